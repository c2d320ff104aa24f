"""run_pretraining.py end to end: flags, outputs, init_checkpoint, SIGKILL.

The script runs in subprocesses (its absl flags would clash with other
scripts' flags in one process); library-level checks run in-process.
"""

import os
import shutil
import signal
import subprocess
import time

import numpy as np
import pytest
import script_runner
import tensorflow as tf
import training_helpers as helpers

from modeling import checkpoints
from modeling.data import file_io
from modeling.tasks import pretraining
from modeling.training import trainer

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
SCRIPT = os.path.join(ROOT, "run_pretraining.py")
EVAL_KEYS = [
    "global_step",
    "loss",
    "masked_lm_accuracy",
    "masked_lm_loss",
    "next_sentence_accuracy",
    "next_sentence_loss",
]


@pytest.fixture(scope="module")
def inputs(tmp_path_factory):
    root = tmp_path_factory.mktemp("rp")
    config = helpers.tiny_config(root / "bert_config.json")
    records = helpers.write_records(root / "data.tfrecord")
    return root, config, records


def _command(config, records, output_dir, *extra):
    return [
        SCRIPT,
        f"--bert_config_file={config}",
        f"--input_file={records}",
        f"--output_dir={output_dir}",
        "--max_seq_length=16",
        "--max_predictions_per_seq=4",
        "--train_batch_size=8",
        "--eval_batch_size=8",
        "--learning_rate=1e-3",
        "--random_seed=3",
        *extra,
    ]


def _env():
    return dict(os.environ, PYTHONPATH=ROOT, TF_CPP_MIN_LOG_LEVEL="2")


def _run(args, **kwargs):
    return script_runner.python(args, env=_env(), **kwargs)


def test_a_second_training_run_in_a_folder_in_use_is_refused(inputs, tmp_path):
    """Two training runs in one --output_dir at once would mix their
    checkpoints (each resumes from the other's, both rotate them): while a
    run holds the folder, a second is refused at once, naming the holder's
    process; once that run has ended, the folder trains."""
    _, config, records = inputs
    out = tmp_path / "out"
    out.mkdir()
    command = _command(
        config, records, out, "--do_train", "--num_train_steps=1"
    )
    with file_io.locked_runs():
        file_io.lock_run_dir(out)  # What a training run's process holds.
        file_io.lock_run_dir(out)  # Again in the same process: no error.
        proc = _run(command)
        assert proc.returncode == 1, proc.stderr[-3000:]
        lines = [x for x in proc.stderr.splitlines() if x.startswith("error:")]
        assert (
            len(lines) == 1
            and (
                f"--output_dir={out} is in use by another training run "
                f"(process {os.getpid()})"
            )
            in lines[0]
        )
        assert not os.listdir(out)
    proc = _run(command)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert tf.train.latest_checkpoint(str(out)).endswith("model.ckpt-1")


def test_required_flags_are_enforced():
    proc = _run([SCRIPT, "--do_train"])
    assert proc.returncode != 0
    assert "--input_file" in proc.stderr
    assert "must have a value other than None" in proc.stderr


def test_neither_train_nor_eval_is_an_error(inputs, tmp_path):
    _, config, records = inputs
    settings = pretraining.Settings(
        bert_config_file=config, input_file=records, output_dir=str(tmp_path)
    )
    with pytest.raises(ValueError, match="`do_train` or `do_eval`"):
        pretraining.run(settings)


def test_script_trains_and_writes_eval_results(inputs, tmp_path):
    _, config, records = inputs
    args = _command(config, records, tmp_path, "--do_train", "--do_eval")
    args += ["--num_train_steps=6", "--num_warmup_steps=2"]
    args += ["--save_checkpoints_steps=3", "--iterations_per_loop=2"]
    args += ["--max_eval_steps=4"]
    proc = _run(args, timeout=600)
    assert proc.returncode == 0, proc.stderr[-3000:]
    lines = (tmp_path / "eval_results.txt").read_text().splitlines()
    assert [line.split(" = ")[0] for line in lines] == EVAL_KEYS
    values = dict(line.split(" = ") for line in lines)
    assert values["global_step"] == "6"
    # float32 values, as the original writes them (loss = 9.681017).
    for key in EVAL_KEYS[1:]:
        assert values[key] == str(np.float32(values[key])), values[key]
    assert 0.0 <= float(values["masked_lm_accuracy"]) <= 1.0
    arrays = checkpoints.read_checkpoint(str(tmp_path))
    assert int(arrays["global_step"]) == 6
    assert "bert/pooler/dense/kernel/adam_v" in arrays
    assert any(
        f.startswith("events.out.tfevents") for f in os.listdir(tmp_path)
    )


def _one_warmup_step(golden_dir, records, init, output_dir):
    """One training step of the tiny golden config from `init`: with
    warmup its learning rate is 0, so the weights stay the checkpoint's."""
    pretraining.run(
        pretraining.Settings(
            bert_config_file=str(golden_dir / "tiny_init" / "bert_config.json"),
            input_file=records,
            output_dir=str(output_dir),
            init_checkpoint=str(init),
            max_seq_length=16,
            max_predictions_per_seq=4,
            do_train=True,
            train_batch_size=8,
            run_config=trainer.RunConfig(
                output_dir=str(output_dir),
                num_train_steps=1,
                num_warmup_steps=1,
                learning_rate=1e-2,
                handle_sigterm=False,
            ),
        )
    )


def test_init_checkpoint_without_slots_starts_from_its_weights(
    golden_dir, inputs, tmp_path
):
    """A released-style checkpoint (no slots, no step): weights load, slots
    start at zero, the step at 0. With warmup the first update has lr 0, so
    after one step the weights still equal the checkpoint's."""
    _, _, records = inputs
    init = golden_dir / "tiny_init" / "bert_model.ckpt"
    _one_warmup_step(golden_dir, records, init, tmp_path)
    after = checkpoints.read_checkpoint(str(tmp_path / "model.ckpt-1"))
    before = checkpoints.read_checkpoint(str(init))
    assert int(after["global_step"]) == 1
    for name, value in before.items():
        np.testing.assert_array_equal(after[name], value, err_msg=name)
    assert np.any(after["bert/embeddings/word_embeddings/adam_m"] != 0)


def test_init_checkpoint_without_the_heads_starts_them_afresh(
    golden_dir, inputs, tmp_path
):
    """A checkpoint without cls/ (a fine-tuned one): as the original's
    init_from_checkpoint, the encoder's weights load, the heads start from
    their initializers (lr 0 in the first warmup step: unchanged)."""
    _, _, records = inputs
    weights = checkpoints.read_checkpoint(
        str(golden_dir / "tiny_init" / "bert_model.ckpt")
    )
    encoder = {n: v for n, v in weights.items() if not n.startswith("cls/")}
    assert len(encoder) < len(weights)
    init = str(tmp_path / "init" / "bert_model.ckpt")
    checkpoints.write_checkpoint(init, encoder)
    out = tmp_path / "out"
    _one_warmup_step(golden_dir, records, init, out)
    after = checkpoints.read_checkpoint(str(out / "model.ckpt-1"))
    for name, value in encoder.items():
        np.testing.assert_array_equal(after[name], value, err_msg=name)
    assert any(n.startswith("cls/") for n in after)


def _newest_step(directory):
    steps = [
        int(f.split("-")[1].split(".")[0])
        for f in os.listdir(directory)
        if f.startswith("model.ckpt-") and f.endswith(".index")
    ]
    return max(steps, default=0)


@pytest.mark.slow
def test_sigkill_then_rerun_ends_with_the_same_checkpoint(inputs, tmp_path):
    _, config, records = inputs
    flags = ["--do_train", "--num_train_steps=40", "--num_warmup_steps=4"]
    flags += ["--save_checkpoints_steps=2", "--iterations_per_loop=1"]
    straight = tmp_path / "straight"
    proc = _run(_command(config, records, straight, *flags), timeout=600)
    assert proc.returncode == 0, proc.stderr[-3000:]

    killed = tmp_path / "killed"
    args = _command(config, records, killed, *flags)
    child = script_runner.popen(args, env=_env(), stderr=subprocess.DEVNULL)
    while child.poll() is None:
        if killed.exists() and _newest_step(killed) >= 6:
            break
        time.sleep(0.01)
    child.send_signal(signal.SIGKILL)
    child.wait()
    assert child.returncode == -signal.SIGKILL, "finished before the kill"
    assert _newest_step(killed) < 40
    proc = _run(args, timeout=600)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert "Resumed from" in proc.stderr
    a = checkpoints.read_checkpoint(str(straight / "model.ckpt-40"))
    b = checkpoints.read_checkpoint(str(killed / "model.ckpt-40"))
    assert sorted(a) == sorted(b)
    for name in a:
        np.testing.assert_array_equal(a[name], b[name], err_msg=name)
    shutil.rmtree(tmp_path)
