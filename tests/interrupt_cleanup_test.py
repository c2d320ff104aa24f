"""SIGTERM outside the training loop: the scripts exit with 143 and leave
no temporary files or folders behind (modeling/flags.py run_script)."""

import glob
import os
import pathlib
import signal
import subprocess
import sys
import time

import pytest

from modeling.tasks import common

REPO = pathlib.Path(__file__).resolve().parents[1]
CORPUS = REPO / "tests" / "testdata" / "train_corpus.txt"
VOCAB = REPO / "vocab" / "books_uncased_8k.txt"


@pytest.mark.parametrize(
    "mode, watch",
    [
        # Exact mode: SIGTERM while its encoder's temporary folder exists.
        ([], "tmp/bert_records_*"),
        # Scale mode: SIGTERM while the output is being written.
        (
            ["--num_workers=2", "--shard_size_mb=0.05"],
            "out/.out.tfrecord.tmp-*",
        ),
    ],
    ids=["exact", "scale"],
)
def test_create_pretraining_data_sigterm_leaves_nothing(tmp_path, mode, watch):
    corpus = tmp_path / "corpus.txt"
    corpus.write_text(CORPUS.read_text(encoding="utf-8") * 3, encoding="utf-8")
    (tmp_path / "tmp").mkdir()
    (tmp_path / "out").mkdir()
    output = tmp_path / "out" / "out.tfrecord"
    child = subprocess.Popen(
        [
            sys.executable,
            str(REPO / "create_pretraining_data.py"),
            f"--input_file={corpus}",
            f"--output_file={output}",
            f"--vocab_file={VOCAB}",
            "--dupe_factor=10",
            *mode,
        ],
        cwd=REPO,
        env={
            **os.environ,
            "PYTHONPATH": str(REPO),
            "TMPDIR": str(tmp_path / "tmp"),
        },
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        deadline = time.time() + 120
        while not glob.glob(str(tmp_path / watch)):
            assert child.poll() is None, "finished before the signal"
            assert time.time() < deadline, f"no {watch} appeared"
            time.sleep(0.01)
        child.send_signal(signal.SIGTERM)
        _, stderr = child.communicate(timeout=60)
    finally:
        if child.poll() is None:
            child.kill()
    assert child.returncode == common.EXIT_INTERRUPTED, stderr[-3000:]
    assert "SIGTERM: stopped" in stderr
    assert "Traceback" not in stderr, stderr[-3000:]
    assert os.listdir(tmp_path / "tmp") == []
    assert os.listdir(tmp_path / "out") == []
