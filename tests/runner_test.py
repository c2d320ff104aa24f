"""The runner pattern (modeling/tasks/common.py, modeling/flags.py): exit
statuses of the four scripts, the user-error rule, TensorFlow-free imports.

The scripts run in subprocesses (their absl flags clash in one process), on
a tiny config and vocabulary: each stops at its first check of the inputs.
"""

import os
import pathlib
import signal
import subprocess
import sys
import time

import numpy as np
import pytest
import script_runner

from modeling import errors
from modeling.tasks import common

REPO = pathlib.Path(__file__).resolve().parents[1]
TESTDATA = REPO / "tests" / "testdata"
TINY_CONFIG = (
    '{"vocab_size": 99, "hidden_size": 32, "num_hidden_layers": 2, '
    '"num_attention_heads": 4, "intermediate_size": 37, '
    '"max_position_embeddings": 64, "type_vocab_size": 2}'
)
VOCAB = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", "the", "a", "is"]


@pytest.fixture
def tiny(tmp_path):
    """(bert_config.json, vocab.txt) of a 2-layer model."""
    config = tmp_path / "bert_config.json"
    config.write_text(TINY_CONFIG)
    vocab = tmp_path / "vocab.txt"
    vocab.write_text("\n".join(VOCAB) + "\n")
    return config, vocab


def _env():
    return {**os.environ, "PYTHONPATH": str(REPO), "TF_CPP_MIN_LOG_LEVEL": "2"}


def _run(script, *args):
    return script_runner.python(
        [str(REPO / script), *args],
        env=_env(),
        timeout=300,
    )


def _assert_one_line_error(proc, *words):
    assert proc.returncode == common.EXIT_USER_ERROR, proc.stderr[-3000:]
    assert "Traceback" not in proc.stderr, proc.stderr[-3000:]
    lines = proc.stderr.splitlines()
    errors = [line for line in lines if line.startswith("error: ")]
    assert len(errors) == 1, proc.stderr[-3000:]
    assert lines[-1] == errors[0], proc.stderr[-3000:]
    for word in words:
        assert word in errors[0], errors[0]


def test_create_pretraining_data_missing_input(tiny, tmp_path):
    _, vocab = tiny
    missing = tmp_path / "no_corpus.txt"
    proc = _run(
        "create_pretraining_data.py",
        f"--input_file={missing}",
        f"--output_file={tmp_path / 'out.tfrecord'}",
        f"--vocab_file={vocab}",
    )
    _assert_one_line_error(proc, str(missing))
    assert not (tmp_path / "out.tfrecord").exists()


def test_run_pretraining_missing_input(tiny, tmp_path):
    config, _ = tiny
    missing = tmp_path / "no_data.tfrecord"
    proc = _run(
        "run_pretraining.py",
        f"--input_file={missing}",
        f"--bert_config_file={config}",
        f"--output_dir={tmp_path / 'out'}",
        "--do_train",
        "--max_seq_length=16",
    )
    _assert_one_line_error(proc, str(missing))


def test_run_classifier_missing_train_file(tiny, tmp_path):
    config, vocab = tiny
    data = tmp_path / "empty_data"
    data.mkdir()
    proc = _run(
        "run_classifier.py",
        "--task_name=MRPC",
        f"--data_dir={data}",
        f"--vocab_file={vocab}",
        f"--bert_config_file={config}",
        f"--output_dir={tmp_path / 'out'}",
        "--do_train",
        "--max_seq_length=16",
    )
    _assert_one_line_error(proc, str(data / "train.tsv"))


def test_extract_features_missing_input(tiny, tmp_path):
    config, vocab = tiny
    missing = tmp_path / "no_input.txt"
    proc = _run(
        "extract_features.py",
        f"--input_file={missing}",
        f"--output_file={tmp_path / 'out.jsonl'}",
        f"--vocab_file={vocab}",
        f"--bert_config_file={config}",
        f"--init_checkpoint={tmp_path / 'no_model.ckpt'}",
        "--max_seq_length=16",
        "--layers=-1",
    )
    _assert_one_line_error(proc, str(missing))
    assert not (tmp_path / "out.jsonl").exists()


def test_run_classifier_exits_143_on_sigterm(tiny, tmp_path):
    """SIGTERM while training: a checkpoint, a warning saying how to resume,
    exit status 143 and no traceback."""
    config, vocab = tiny
    out = tmp_path / "out"
    child = script_runner.popen(
        [
            REPO / "run_classifier.py",
            "--task_name=MRPC",
            f"--data_dir={TESTDATA / 'cls_mrpc'}",
            f"--vocab_file={vocab}",
            f"--bert_config_file={config}",
            f"--output_dir={out}",
            "--do_train",
            "--max_seq_length=16",
            "--train_batch_size=4",
            "--num_train_epochs=100000",
            "--iterations_per_loop=1",
            "--save_checkpoints_steps=1000000",
        ],
        env=_env(),
    )
    lines = []
    deadline = time.time() + 240
    try:
        for line in child.stderr:
            lines.append(line)
            if "steps/s" in line:  # The trainer's first step log.
                child.send_signal(signal.SIGTERM)
                break
            assert time.time() < deadline, "no training step logged"
        lines += child.stderr.readlines()
        child.wait(timeout=120)
    finally:
        if child.poll() is None:
            child.kill()
    stderr = "".join(lines)
    assert child.returncode == common.EXIT_INTERRUPTED, stderr[-3000:]
    assert "re-run the same command to resume" in stderr
    assert "Traceback" not in stderr
    assert (out / "checkpoint").exists()


def _raise_in_numpy():
    np.reshape(np.zeros(3), (2, 2))


def test_user_error_rule(tmp_path):
    from modeling.tasks import extract

    def caught(fn, *args):
        try:
            fn(*args)
        except Exception as e:
            return e
        raise AssertionError("no exception")

    # A ValueError of the library: a message for the user.
    assert errors.is_user_error(caught(extract.parse_layers, "x", 2))
    # A ValueError from inside NumPy (or TF, Keras): a bug, traceback kept.
    assert not errors.is_user_error(caught(_raise_in_numpy))
    assert errors.is_user_error(FileNotFoundError(2, "no", "/x"))
    assert errors.is_user_error(errors.UserError("bad"))
    assert not errors.is_user_error(RuntimeError("bad"))
    assert not errors.is_user_error(KeyError("x"))
    # Raised in a worker process and again in the parent: judged by the
    # worker's frames (create_pretraining_data's bad UTF-8 line).
    import multiprocessing

    from modeling.data import file_io

    bad = tmp_path / "latin1.txt"
    bad.write_bytes(b"caf\xe9\n")
    with multiprocessing.get_context("fork").Pool(1) as pool:
        for function, arg, mine in (
            (file_io.read_text, str(bad), True),
            (int, "a", False),
        ):
            try:
                pool.map(function, [arg])
            except ValueError as e:
                assert errors.is_user_error(e) is mine, e
            else:
                raise AssertionError("no exception")


def test_training_interrupted_is_the_common_interruption():
    from modeling.training import trainer

    assert issubclass(trainer.TrainingInterrupted, errors.Interrupted)
    assert common.EXIT_INTERRUPTED == 143 and common.EXIT_USER_ERROR == 1


def test_runner_pieces_do_not_load_tensorflow():
    code = (
        "import sys, modeling.flags, modeling.tasks.common, "
        "modeling.pretraining_data.create; "
        "print('tensorflow' in sys.modules)"
    )
    out = subprocess.run(
        [sys.executable, "-c", code],
        capture_output=True,
        text=True,
        check=True,
        cwd=REPO,
        env=_env(),
    )
    assert out.stdout.strip() == "False"


def test_every_script_refuses_a_run_with_no_mode_in_the_originals_words():
    """One check (tasks/common.check_modes) for every script's modes: the
    original's message, run_classifier's straight closing quote included,
    and --export_dir counted as a mode where a script has it."""
    import types

    from modeling.tasks import common

    none = types.SimpleNamespace(
        do_train=False, do_eval=False, do_predict=False, export_dir=""
    )
    with pytest.raises(ValueError) as error:
        common.check_modes(none, ("do_train", "do_eval"), also=None)
    assert str(error.value) == (
        "At least one of `do_train` or `do_eval` must be True."
    )
    with pytest.raises(ValueError) as error:
        common.check_modes(
            none, ("do_train", "do_eval", "do_predict"), closing_quote="'"
        )
    assert str(error.value) == (
        "At least one of `do_train`, `do_eval` or `do_predict' must be True "
        "(or give --export_dir)."
    )
    common.check_modes(
        types.SimpleNamespace(**{**vars(none), "export_dir": "/x"}),
        ("do_train", "do_predict"),
    )
    common.check_modes(
        types.SimpleNamespace(**{**vars(none), "do_eval": True}),
        ("do_train", "do_eval"),
        also=None,
    )


def test_sigterm_surfacing_as_another_error_still_exits_interrupted(
    monkeypatch,
):
    """The SIGTERM handler's exception, raised while TensorFlow traces in
    C, reaches the runner as a SystemError (seen in CI: predictor_test's
    SIGTERM test exited 1): after a SIGTERM any error ends the run with
    the interrupted status; without one it keeps its traceback."""
    from modeling import errors
    from modeling import flags as flags_lib
    from modeling import signals

    def main(argv):
        del argv
        raise SystemError("bad argument to internal function")

    monkeypatch.setitem(signals._TERMINATION, "received", True)
    with pytest.raises(SystemExit) as exit_info:
        flags_lib._guarded(main)([])
    assert exit_info.value.code == errors.EXIT_INTERRUPTED
    monkeypatch.setitem(signals._TERMINATION, "received", False)
    with pytest.raises(SystemError):
        flags_lib._guarded(main)([])
