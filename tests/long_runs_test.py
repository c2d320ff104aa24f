"""Long runs: progress lines during training, the time-based safety
checkpoint, SIGTERM while the input is stuck or while the exit holds the
interpreter lock, no endless loop on an empty input.

Everything runs the golden tiny config; the scripts run in subprocesses.
"""

import os
import pathlib
import re
import signal
import time

import pytest
import script_runner
import tensorflow as tf
import training_helpers as helpers

from modeling import config as config_lib
from modeling import errors
from modeling import signals
from modeling.data import input_pipeline
from modeling.tasks import common
from modeling.tasks import pretraining
from modeling.training import trainer as trainer_lib

REPO = pathlib.Path(__file__).resolve().parents[1]
TESTDATA = REPO / "tests" / "testdata"
PROGRESS = re.compile(
    r"step (\d+)/(\d+) \(\d+%\): .*loss = .*learning_rate = .*"
    r"examples/s, ETA (\S+)"
)


def _env():
    return {**os.environ, "PYTHONPATH": str(REPO), "TF_CPP_MIN_LOG_LEVEL": "2"}


@pytest.fixture(scope="module")
def data(tmp_path_factory):
    root = tmp_path_factory.mktemp("long_runs")
    config = helpers.tiny_config(root / "bert_config.json")
    records = helpers.write_records(root / "data.tfrecord")
    return config, records


def _dataset_fn(records):
    return lambda start: input_pipeline.pretraining_dataset(
        [records], 8, helpers.SEQ, helpers.PRED, True, start_batch=start
    )


def _checkpoint_steps(directory):
    state = tf.train.get_checkpoint_state(str(directory))
    paths = state.all_model_checkpoint_paths if state else []
    return [int(p.rsplit("-", 1)[1]) for p in paths]


def test_default_flag_fine_tune_logs_progress_during_the_run(tmp_path):
    """run_classifier with the original's --iterations_per_loop=1000 and
    --save_checkpoints_steps=1000 over 300 steps: progress lines at steps
    100 and 200 (the whole run used to be one silent compiled call)."""
    config = tmp_path / "bert_config.json"
    config.write_text(
        '{"vocab_size": 99, "hidden_size": 32, "num_hidden_layers": 2, '
        '"num_attention_heads": 4, "intermediate_size": 37, '
        '"max_position_embeddings": 64, "type_vocab_size": 2}'
    )
    vocab = tmp_path / "vocab.txt"
    vocab.write_text("[PAD]\n[UNK]\n[CLS]\n[SEP]\n[MASK]\nthe\na\nis\n")
    proc = script_runner.python(
        [
            str(REPO / "run_classifier.py"),
            "--task_name=MRPC",
            f"--data_dir={TESTDATA / 'cls_mrpc'}",
            f"--vocab_file={vocab}",
            f"--bert_config_file={config}",
            f"--output_dir={tmp_path / 'out'}",
            "--do_train",
            "--max_seq_length=16",
            "--train_batch_size=2",
            "--num_train_epochs=37.5",  # 16 examples: 300 steps
        ],
        env=_env(),
        timeout=300,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert "dynamic_padding: True (the default on CPU and GPU)" in proc.stderr
    found = [m.groups() for m in PROGRESS.finditer(proc.stderr)]
    steps = [int(step) for step, total, _ in found]
    assert {total for _, total, _ in found} == {"300"}, proc.stderr[-3000:]
    assert 100 in steps and 200 in steps and steps[-1] == 300, steps
    assert all(b - a <= 100 for a, b in zip([0] + steps, steps))
    # After the first call (tracing) every line has an estimate.
    assert found[0][2] == "?" and all(eta != "?" for *_, eta in found[1:])


@pytest.mark.slow
def test_progress_lines_come_every_log_every_secs(data, tmp_path, caplog):
    """The time check ends a compiled call early: with a zero-second
    interval each call runs one step, whatever iterations_per_loop says."""
    config, records = data
    bert_config = config_lib.BertConfig.from_json_file(config)
    run_config = trainer_lib.RunConfig(
        output_dir=str(tmp_path),
        num_train_steps=3,
        iterations_per_loop=1000,
        log_every_secs=1e-9,
        handle_sigterm=False,
    )
    trainer = trainer_lib.Trainer(
        pretraining.make_task(bert_config), run_config
    )
    with caplog.at_level("INFO"):
        assert trainer.train(_dataset_fn(records)) == 3
    steps = [int(m.group(1)) for m in PROGRESS.finditer(caplog.text)]
    assert steps == [1, 2, 3]


def test_time_based_checkpoint_appears_and_resume_uses_it(
    data, tmp_path, caplog
):
    config, records = data
    bert_config = config_lib.BertConfig.from_json_file(config)

    def trainer(num_steps, secs):
        run_config = trainer_lib.RunConfig(
            output_dir=str(tmp_path),
            num_train_steps=num_steps,
            save_checkpoints_steps=1000,
            iterations_per_loop=1000,
            save_checkpoints_secs=secs,
            keep_checkpoint_max=2,
            handle_sigterm=False,
        )
        task = pretraining.make_task(bert_config)
        return trainer_lib.Trainer(task, run_config)

    # A tiny interval: a safety checkpoint after (nearly) every call; the
    # calls themselves end on the same interval.
    with caplog.at_level("INFO"):
        trainer(3, 1e-9).train(_dataset_fn(records))
    assert "time-based safety checkpoint" in caplog.text
    # Rotated like the step checkpoints (keep 2), the final one included.
    assert _checkpoint_steps(tmp_path) == [2, 3]
    caplog.clear()
    (tmp_path / "model.ckpt-3.index").unlink()  # Killed before step 3.
    with caplog.at_level("INFO"):
        assert trainer(5, 0).train(_dataset_fn(records)) == 5
    # The newest left is a time-based one: resuming uses it.
    assert "Resumed from" in caplog.text and "model.ckpt-2 " in caplog.text
    # 0 disables it: only the final checkpoint was added.
    assert _checkpoint_steps(tmp_path) == [3, 5]


def _sigterm_worker(
    data, out, worker_args, send_after, clock_from=None, backend="tensorflow"
):
    """Runs tests/testdata/stuck_input_worker.py, sends SIGTERM once it
    prints `send_after`; returns its status, its stderr and the seconds
    from the SIGTERM (or from its line `clock_from`) to its end."""
    config, records = data
    child = script_runner.popen(
        [
            TESTDATA / "stuck_input_worker.py",
            config,
            records,
            str(out),
            *worker_args,
        ],
        env={**_env(), "KERAS_BACKEND": backend},
    )
    lines = []
    try:
        deadline = time.time() + 240
        for line in child.stderr:
            lines.append(line)
            if send_after in line:
                break
            assert time.time() < deadline, f"no {send_after!r} line"
        time.sleep(1)
        child.send_signal(signal.SIGTERM)
        started = time.time()
        for line in child.stderr if clock_from else ():
            lines.append(line)
            if clock_from in line:
                started = time.time()
                break
        child.wait(timeout=60)
        waited = time.time() - started
        lines += child.stderr.readlines()
    finally:
        if child.poll() is None:
            child.kill()
    return child.returncode, "".join(lines), waited


@pytest.mark.parametrize("backend", ["tensorflow", "jax"])
def test_sigterm_ends_a_run_whose_input_is_stuck(data, tmp_path, backend):
    """The input blocks for good after 3 batches; SIGTERM still ends the
    run within seconds, with a checkpoint of step 3 and status 143. On JAX
    this is inside the first chunk, while the state's buffers are donated
    to each step (the Trainer's watcher reads the step counter then)."""
    out = tmp_path / "out"
    status, stderr, waited = _sigterm_worker(
        data, out, ["3"], "input blocked", backend=backend
    )
    assert status == common.EXIT_INTERRUPTED, stderr[-3000:]
    # 1-2 s to see the input stuck (steps.StopSignal), the save, the exit.
    assert waited < 10, waited
    print(f"SIGTERM to exit with the input stuck: {waited:.2f} s")
    assert "input pipeline has given no batch" in stderr
    assert "SIGTERM: saving global_step 3." in stderr, stderr[-3000:]
    assert _checkpoint_steps(out) == [3]


def test_sigterm_ends_a_run_whose_exit_holds_the_interpreter_lock(
    data, tmp_path
):
    """After SIGTERM's checkpoint the process blocks for good in a C call
    holding the interpreter lock, where no Python thread (the SIGTERM
    watchdog included) can run: the backstop the Trainer armed after
    saving (modeling/signals.py) prints the stacks and ends the process
    with SIGTERM 1 + BACKSTOP_SECS + 1 s later."""
    out = tmp_path / "out"
    status, stderr, waited = _sigterm_worker(
        data,
        out,
        ["2", "hold_lock"],
        "input flowing",
        clock_from="holding the interpreter lock",
    )
    assert status == -signal.SIGTERM, stderr[-3000:]
    assert waited < 1 + signals.BACKSTOP_SECS + 1 + 5, waited
    assert "Timeout (" in stderr and "stuck_input_worker.py" in stderr
    assert "SIGTERM: still running" not in stderr  # The watchdog never ran.
    assert len(_checkpoint_steps(out)) == 1


def _run_pretraining(config, input_file, output_dir, *flags):
    return script_runner.python(
        [
            str(REPO / "run_pretraining.py"),
            f"--bert_config_file={config}",
            f"--input_file={input_file}",
            f"--output_dir={output_dir}",
            "--max_seq_length=16",
            "--max_predictions_per_seq=4",
            *flags,
        ],
        env=_env(),
        timeout=120,
    )


def test_empty_input_fails_at_once_naming_the_files(data, tmp_path):
    config, _ = data
    (tmp_path / "a.tfrecord").write_bytes(b"")
    (tmp_path / "b.tfrecord").write_bytes(b"")
    started = time.time()
    proc = _run_pretraining(
        config, tmp_path / "*.tfrecord", tmp_path / "out", "--do_train"
    )
    assert time.time() - started < 60
    assert proc.returncode == common.EXIT_USER_ERROR, proc.stderr[-3000:]
    assert "Traceback" not in proc.stderr
    error = proc.stderr.splitlines()[-1]
    assert error.startswith("error: No records in the input"), error
    assert str(tmp_path / "a.tfrecord") in error
    assert str(tmp_path / "b.tfrecord") in error


def test_eval_on_an_empty_input_is_an_error(data, tmp_path):
    """Not an eval_results.txt holding only global_step."""
    config, _ = data
    empty = tmp_path / "empty.tfrecord"
    empty.write_bytes(b"")
    settings = pretraining.Settings(
        bert_config_file=config,
        input_file=str(empty),
        output_dir=str(tmp_path / "out"),
        do_eval=True,
        max_seq_length=helpers.SEQ,
        max_predictions_per_seq=helpers.PRED,
    )
    with pytest.raises(
        errors.UserError, match=f"No records in the input: {empty} is empty"
    ):
        pretraining.run(settings)
    assert not (tmp_path / "out" / common.EVAL_RESULTS_FILE).exists()


def test_progress_lines_have_counts_rate_and_eta(monkeypatch, caplog):
    from modeling import progress

    counter = progress.Progress("Writing x", total=4, every_secs=0)
    with caplog.at_level("INFO"):
        for _ in range(3):
            counter.add()
        assert counter.finish() == 3
    lines = [r.getMessage() for r in caplog.records]
    assert lines[0].startswith("Writing x: 1/4 examples (25%), ")
    assert re.search(r"examples/s, ETA \d+s$", lines[0]), lines[0]
    assert re.search(r"3/4 examples \(75%\), .* done in \d+s$", lines[-1])
    assert progress.format_seconds(3725) == "1h02m"
    assert progress.format_seconds(185) == "3m05s"


def test_feature_conversion_and_evaluation_log_progress(
    data, tmp_path, monkeypatch, caplog
):
    from modeling import progress
    from modeling.data import classifier_data
    from modeling.text import tokenization

    monkeypatch.setattr(progress, "EVERY_SECS", 0.0)
    vocab = tmp_path / "vocab.txt"
    vocab.write_text("[PAD]\n[UNK]\n[CLS]\n[SEP]\nthe\na\n")
    tokenizer = tokenization.FullTokenizer(str(vocab), True)
    examples = [
        classifier_data.InputExample(str(i), "the a", "a", "0")
        for i in range(3)
    ]
    with caplog.at_level("INFO"):
        classifier_data.file_based_convert_examples_to_features(
            examples, ["0", "1"], 8, tokenizer, str(tmp_path / "x.tf_record")
        )
    assert "Writing x.tf_record: 2/3 examples (67%)" in caplog.text
    config, records = data
    bert_config = config_lib.BertConfig.from_json_file(config)
    run_config = trainer_lib.RunConfig(str(tmp_path), 1)
    trainer = trainer_lib.Trainer(
        pretraining.make_task(bert_config), run_config
    )
    dataset = input_pipeline.pretraining_dataset(
        [records], 8, helpers.SEQ, helpers.PRED, False
    )
    caplog.clear()
    with caplog.at_level("INFO"):
        trainer.evaluate(dataset, 3, restore=False)
    assert "Evaluating: 2/3 batches (67%)" in caplog.text
    assert "Evaluating: 3/3 batches (100%)" in caplog.text
