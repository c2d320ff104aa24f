"""A full disk: every script ends in one `error:` line naming what it was
writing, exit status EXIT_USER_ERROR, and leaves nothing partial behind.

The disk is a small tmpfs mounted for the test (root on Linux); elsewhere
the tests skip with the reason. Each script writes to a tmpfs with a few
KB left (a filler file takes the rest), after copying in what it reads.
"""

import os
import shutil
import subprocess

import hub_helpers
import pytest
import script_runner

from modeling.tasks import common

FREE_BYTES = 16 << 10


@pytest.fixture
def full_disk(tmp_path):
    """A tmpfs of 8 MB at tmp_path/disk; yields (mount point, fill), where
    fill() leaves FREE_BYTES free."""
    mount = tmp_path / "disk"
    mount.mkdir()
    proc = subprocess.run(
        ["mount", "-t", "tmpfs", "-o", "size=8m", "tmpfs", str(mount)],
        capture_output=True,
        text=True,
        check=False,
    )
    if proc.returncode:
        pytest.skip(f"cannot mount a tmpfs here: {proc.stderr.strip()}")

    def fill():
        stat = os.statvfs(mount)
        free = stat.f_bavail * stat.f_frsize
        with open(mount / ".filler", "wb") as f:
            f.write(b"\0" * max(free - FREE_BYTES, 0))

    try:
        yield mount, fill
    finally:
        subprocess.run(["umount", "-l", str(mount)], check=False)


def _files(folder):
    return sorted(
        os.path.relpath(os.path.join(root, name), folder)
        for root, _, names in os.walk(folder)
        for name in names
        if name != ".filler"
    )


def _fails_with_one_line(script, args, names):
    proc = script_runner.python(
        [str(script_runner.REPO / script), *args],
        timeout=600,
    )
    assert proc.returncode == common.EXIT_USER_ERROR, proc.stderr[-3000:]
    last = proc.stderr.strip().splitlines()[-1]
    assert last.startswith("error: No space left on the device writing ")
    assert names in last, last
    assert "Traceback" not in proc.stderr, proc.stderr[-3000:]


@pytest.fixture(scope="module")
def tiny(tmp_path_factory):
    folder = tmp_path_factory.mktemp("tiny")
    hub_helpers.tiny_checkpoint(folder)
    return folder


def _corpus(path, lines=3000):
    words = hub_helpers.WORDS
    path.write_text(
        "".join(
            " ".join(words[(i * 7 + j) % len(words)] for j in range(12))
            + (".\n\n" if i % 8 == 7 else ".\n")
            for i in range(lines)
        )
    )
    return path


def test_create_pretraining_data(full_disk, tiny, tmp_path):
    disk, fill = full_disk
    fill()
    out = disk / "records.tfrecord"
    _fails_with_one_line(
        "create_pretraining_data.py",
        [
            f"--input_file={_corpus(tmp_path / 'corpus.txt')}",
            f"--output_file={out}",
            f"--vocab_file={tiny / 'vocab.txt'}",
            "--max_seq_length=32",
            "--max_predictions_per_seq=5",
            "--dupe_factor=2",
        ],
        f"--output_file={out}",
    )
    assert _files(disk) == []


def test_extract_features(full_disk, tiny, tmp_path):
    disk, fill = full_disk
    fill()
    out = disk / "features.jsonl"
    _fails_with_one_line(
        "extract_features.py",
        [
            f"--input_file={_corpus(tmp_path / 'input.txt', 400)}",
            f"--output_file={out}",
            f"--vocab_file={tiny / 'vocab.txt'}",
            f"--bert_config_file={tiny / 'bert_config.json'}",
            f"--init_checkpoint={tiny}",
            "--max_seq_length=32",
            "--layers=-1,-2",
        ],
        f"--output_file={out}",
    )
    assert _files(disk) == []


def _classifier_args(tiny, data, out, *extra):
    return [
        "--task_name=custom",
        f"--train_file={data}",
        f"--test_file={data}",
        f"--vocab_file={tiny / 'vocab.txt'}",
        f"--bert_config_file={tiny / 'bert_config.json'}",
        f"--output_dir={out}",
        "--max_seq_length=16",
        "--train_batch_size=8",
        *extra,
    ]


@pytest.fixture(scope="module")
def trained(tiny, tmp_path_factory):
    tmp_path = tmp_path_factory.mktemp("trained")
    data = tmp_path / "data.csv"
    words = hub_helpers.WORDS
    data.write_text(
        "text,label\n"
        + "".join(
            f"{words[i % 90]} {words[(i * 3) % 90]},{i % 2}\n"
            for i in range(400)
        )
    )
    out = tmp_path / "out"
    script_runner.run_script(
        "run_classifier.py",
        _classifier_args(
            tiny, data, out, "--do_train", "--num_train_epochs=0.1"
        ),
    )
    return data, out


def test_predict(full_disk, tiny, trained):
    """The trained folder copied onto the disk, the disk filled: predict
    cannot write its records or results, and leaves the folder as it was."""
    disk, fill = full_disk
    data, trained_dir = trained
    out = disk / "trained"
    shutil.copytree(trained_dir, out)
    before = _files(disk)
    fill()
    _fails_with_one_line(
        "run_classifier.py",
        _classifier_args(tiny, data, out, "--do_predict"),
        f"--output_dir={out}",
    )
    assert _files(disk) == before


def test_export(full_disk, tiny, trained):
    disk, fill = full_disk
    data, trained_dir = trained
    fill()
    export = disk / "export"
    _fails_with_one_line(
        "run_classifier.py",
        _classifier_args(tiny, data, trained_dir, f"--export_dir={export}"),
        f"--export_dir={export}",
    )
    assert _files(disk) == []
    assert not export.exists()
