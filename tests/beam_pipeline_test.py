"""create_pretraining_data --runner=beam: the scale mode's records through
an Apache Beam pipeline, and its errors.

The pipeline runs on Beam's DirectRunner (the local FnApiRunner) with 2
worker processes (--direct_running_mode=multi_processing: the mode that
spreads work over CPUs, and the one that hands a worker's exception back
wrapped). Its output is compared with the scale mode's on the same corpus,
seed and shard size: file by file against --per_shard_output, and record by
record against the default single output file. The corpus is
tests/testdata/train_corpus.txt cut into two files, so shard numbering
across files is checked too.
"""

import os
import sys

import pytest
from constants import REPO_ROOT

from modeling import errors
from modeling.data import tfrecord_io
from modeling.pretraining_data import beam as beam_runner
from modeling.pretraining_data import create
from modeling.pretraining_data import generation
from modeling.pretraining_data import records
from modeling.pretraining_data import scale
from modeling.pretraining_data import shards
from modeling.text import tokenization

VOCAB = REPO_ROOT / "vocab" / "books_uncased_8k.txt"
CORPUS = REPO_ROOT / "tests" / "testdata" / "train_corpus.txt"
OPTIONS = generation.GenerationOptions(
    max_seq_length=64, max_predictions_per_seq=10, dupe_factor=2
)
SHARD_BYTES = 60_000
TWO_WORKERS = (
    "--runner=DirectRunner --direct_num_workers=2 "
    "--direct_running_mode=multi_processing"
)
ONE_WORKER = "--runner=DirectRunner --direct_num_workers=1"


@pytest.fixture(scope="module")
def tokenizer():
    return tokenization.FullTokenizer(str(VOCAB), do_lower_case=True)


@pytest.fixture(scope="module")
def beam_workers():
    """Skips without Apache Beam. Beam's worker processes import the
    pipeline's functions by name: from this checkout, not another
    installed copy."""
    pytest.importorskip("apache_beam")
    with pytest.MonkeyPatch.context() as patch:
        path = os.environ.get("PYTHONPATH")
        value = str(REPO_ROOT) + (os.pathsep + path if path else "")
        patch.setenv("PYTHONPATH", value)
        yield


def _inputs(directory):
    """The corpus as two files, cut at a blank line near its middle."""
    data = CORPUS.read_bytes()
    cut = data.index(b"\n\n", len(data) // 2) + 2
    paths = [directory / "part_a.txt", directory / "part_b.txt"]
    paths[0].write_bytes(data[:cut])
    paths[1].write_bytes(data[cut:])
    return [str(p) for p in paths]


def _records(paths):
    return [r for p in paths for r in tfrecord_io.read_records(str(p))]


def _leftovers(directory):
    return sorted(p.name for p in directory.iterdir() if ".tfrecord" in p.name)


@pytest.fixture(scope="module")
def runs(tmp_path_factory, tokenizer, beam_workers):
    """The same corpus through scale mode (per shard, and one file) and
    through Beam with 2 workers; a stale file of an earlier run with
    another shard count sits beside Beam's output."""
    directory = tmp_path_factory.mktemp("beam_runs")
    inputs = _inputs(directory)
    for name in ("scale", "scale_one_file", "beam"):
        (directory / name).mkdir()
    scale.create_scaled(
        inputs,
        [str(directory / "scale" / "out.tfrecord")],
        tokenizer,
        OPTIONS,
        num_workers=2,
        shard_bytes=SHARD_BYTES,
        per_shard_output=True,
    )
    one_file = directory / "scale_one_file" / "out.tfrecord"
    scale.create_scaled(
        inputs,
        [str(one_file)],
        tokenizer,
        OPTIONS,
        num_workers=2,
        shard_bytes=SHARD_BYTES,
    )
    stale = directory / "beam" / "out.tfrecord-00000-of-00099"
    first_shard = sorted((directory / "scale").iterdir())[0]
    stale.write_bytes(tfrecord_io.frame(_records([first_shard])[0]))
    counts = beam_runner.create_with_beam(
        inputs,
        [str(directory / "beam" / "out.tfrecord")],
        tokenizer,
        OPTIONS,
        shard_bytes=SHARD_BYTES,
        beam_pipeline_options=TWO_WORKERS,
    )
    return {
        "dir": directory,
        "inputs": inputs,
        "counts": counts,
        "one_file": one_file,
        "stale": stale,
    }


def test_beam_writes_the_scale_modes_records_shard_by_shard(runs):
    directory = runs["dir"]
    planned = list(shards.plan_shards(runs["inputs"], SHARD_BYTES))
    assert {s.path for s in planned} == set(runs["inputs"])
    count = len(planned)
    assert count >= 4
    names = [
        records.ShardRecordFiles.name("out.tfrecord", i, count)
        for i in range(count)
    ]
    assert sorted(os.listdir(directory / "beam")) == names
    assert sorted(os.listdir(directory / "scale")) == names
    assert not runs["stale"].exists()
    for name in names:
        ours = _records([directory / "beam" / name])
        assert ours, name
        assert ours == _records([directory / "scale" / name]), name
    beam_records = _records(directory / "beam" / n for n in names)
    one_file = _records([runs["one_file"]])
    assert set(beam_records) == set(one_file)
    assert beam_records == one_file
    assert len(set(beam_records)) == len(beam_records)
    assert runs["counts"]["instances"] == len(beam_records)
    assert runs["counts"]["shards"] == count
    assert runs["counts"]["text_bytes"] == CORPUS.stat().st_size


def test_beam_output_does_not_depend_on_parallelism(runs, tokenizer, tmp_path):
    beam_runner.create_with_beam(
        runs["inputs"],
        [str(tmp_path / "out.tfrecord")],
        tokenizer,
        OPTIONS,
        shard_bytes=SHARD_BYTES,
        beam_pipeline_options=ONE_WORKER,
    )
    names = sorted(os.listdir(runs["dir"] / "beam"))
    assert sorted(os.listdir(tmp_path)) == names
    for name in names:
        ours = (tmp_path / name).read_bytes()
        assert ours == (runs["dir"] / "beam" / name).read_bytes(), name


def test_bad_bytes_in_a_late_shard_fail_clearly_and_publish_nothing(
    tokenizer, tmp_path, beam_workers
):
    corpus = tmp_path / "corpus.txt"
    data = CORPUS.read_bytes()
    corpus.write_bytes(data + b"the cat \xff sat.\n")
    bad_line = data.count(b"\n") + 1
    out = tmp_path / "out.tfrecord"
    with pytest.raises(ValueError) as raised:
        beam_runner.create_with_beam(
            [str(corpus)],
            [str(out)],
            tokenizer,
            OPTIONS,
            shard_bytes=SHARD_BYTES,
            beam_pipeline_options=TWO_WORKERS,
        )
    # The other modes' message, alone (not Beam's wrapped traceback).
    assert str(raised.value).startswith(
        f"{corpus}:{bad_line}: bytes that are not UTF-8"
    )
    assert "Traceback" not in str(raised.value)
    assert _leftovers(tmp_path) == []


@pytest.mark.parametrize(
    "data,vocab_lines,message",
    [
        (b"\n\n  \n", None, "No text to make instances from"),
        (b"the cat.\nthe dog.\n", ["[CLS]", "[SEP]", "the"], r"lacks \[MASK\]"),
    ],
    ids=["empty_corpus", "vocab_without_mask"],
)
def test_bad_input_fails_like_the_other_modes(
    data, vocab_lines, message, tokenizer, tmp_path, beam_workers
):
    corpus = tmp_path / "corpus.txt"
    corpus.write_bytes(data)
    if vocab_lines is not None:
        vocab = tmp_path / "vocab.txt"
        vocab.write_text("\n".join(["[PAD]", "[UNK]", *vocab_lines]) + "\n")
        tokenizer = tokenization.FullTokenizer(str(vocab), True)
    arguments = ([str(corpus)], [str(tmp_path / "out.tfrecord")], tokenizer)
    with pytest.raises(ValueError, match=message):
        scale.create_scaled(*arguments, OPTIONS, num_workers=1)
    with pytest.raises(ValueError, match=message):
        beam_runner.create_with_beam(
            *arguments, OPTIONS, beam_pipeline_options=ONE_WORKER
        )
    assert _leftovers(tmp_path) == []


def _settings(tmp_path, **fields):
    return create.Settings(
        input_file=str(CORPUS),
        output_file=str(tmp_path / "out.tfrecord"),
        vocab_file=str(VOCAB),
        **fields,
    )


def test_without_beam_the_runner_says_how_to_install_it(tmp_path, monkeypatch):
    monkeypatch.setitem(sys.modules, "apache_beam", None)  # import fails
    with pytest.raises(errors.UserError, match=r"pip install \.\[beam\]"):
        create.run(_settings(tmp_path, runner="beam"))
    assert _leftovers(tmp_path) == []


@pytest.mark.parametrize(
    "fields,message",
    [
        ({"runner": "spark"}, "--runner=spark: must be one of local, beam"),
        ({"runner": "beam", "num_workers": 2}, "the local runner's"),
        ({"per_shard_output": True}, "--per_shard_output needs input shards"),
        # A runner of other machines cannot read this one's files.
        (
            {
                "runner": "beam",
                "beam_pipeline_options": "--runner=DataflowRunner "
                "--project=p --region=r --temp_location=gs://b/t",
            },
            "on this machine, which the DataflowRunner's workers cannot reach",
        ),
    ],
)
def test_bad_runner_settings(fields, message, tmp_path):
    with pytest.raises(errors.UserError, match=message):
        create.run(_settings(tmp_path, **fields))


class _RemoteJob:
    """A remote runner's result: running until cancelled; waiting on it
    raises `stop` (a Ctrl-C, a SIGTERM, a lost connection)."""

    def __init__(self, stop):
        self.state = "RUNNING"
        self.stop = stop

    def wait_until_finish(self, duration=None):
        raise self.stop

    def cancel(self):
        self.state = "CANCELLED"


@pytest.mark.parametrize(
    "stop",
    [KeyboardInterrupt(), errors.Terminated("SIGTERM"), OSError("lost")],
    ids=["ctrl_c", "sigterm", "error"],
)
def test_a_stopped_launcher_cancels_its_remote_job(stop, tmp_path):
    # The job would otherwise go on (billed) writing into a folder the
    # launcher removes.
    job = _RemoteJob(stop)
    pipeline = type("Pipeline", (), {"run": lambda self: job})()
    with pytest.raises(type(stop)):
        beam_runner._run(pipeline, str(tmp_path), total_bytes=1)
    assert job.state == "CANCELLED"


def test_a_loopback_runner_may_use_local_paths():
    """A runner that calls back into this process (LOOPBACK) reads this
    machine's files: not refused as a runner of other machines."""
    from apache_beam.options.pipeline_options import PipelineOptions

    from modeling.pretraining_data import beam

    options = PipelineOptions(
        ["--runner=FlinkRunner", "--environment_type=LOOPBACK"]
    )
    beam._check_paths_reach_the_workers(options, ["in.txt"], ["out"])
    options = PipelineOptions(["--runner=FlinkRunner"])
    with pytest.raises(errors.UserError, match="cannot reach"):
        beam._check_paths_reach_the_workers(options, ["in.txt"], ["out"])


def test_one_output_prefix(tokenizer, tmp_path, beam_workers):
    outputs = [str(tmp_path / "a.tfrecord"), str(tmp_path / "b.tfrecord")]
    with pytest.raises(ValueError, match="give one --output_file"):
        beam_runner.create_with_beam([str(CORPUS)], outputs, tokenizer, OPTIONS)


def _processes_with(marker):
    """Pids of live processes whose environment holds `marker`."""
    pids = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/environ", "rb") as f:
                if marker.encode() in f.read():
                    pids.append(int(entry))
        except OSError:
            continue
    return pids


@pytest.mark.parametrize("sent_to", ["process", "group"])
def test_sigterm_stops_the_pipeline_and_leaves_nothing(
    tmp_path, beam_workers, sent_to
):
    """SIGTERM while Beam's workers write shards: exit 143 within seconds,
    no worker process left, nothing published and no hidden folder, and no
    traceback. Sent to the script alone, or to its whole process group as a
    batch scheduler does (the workers then end by it too, and Beam's threads
    report their end as failures)."""
    import signal
    import subprocess
    import sys
    import time
    import uuid

    corpus = tmp_path / "corpus.txt"
    corpus.write_text(CORPUS.read_text(encoding="utf-8") * 4, encoding="utf-8")
    out = tmp_path / "out"
    out.mkdir()
    marker = f"BERT_BEAM_TEST={uuid.uuid4().hex}"
    child = subprocess.Popen(
        [
            sys.executable,
            str(REPO_ROOT / "create_pretraining_data.py"),
            f"--input_file={corpus}",
            f"--output_file={out / 'out.tfrecord'}",
            f"--vocab_file={VOCAB}",
            "--dupe_factor=10",
            "--runner=beam",
            "--shard_size_mb=0.05",
            f"--beam_pipeline_options={TWO_WORKERS}",
        ],
        cwd=REPO_ROOT,
        env={**os.environ, marker.split("=")[0]: marker.split("=")[1]},
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=sent_to == "group",
    )
    try:
        deadline = time.time() + 120
        # The hidden folder's first shard file: workers are writing.
        while not list(out.glob(".out.tfrecord.tmp-*/shard-*")):
            assert child.poll() is None, child.stderr.read()[-3000:]
            assert time.time() < deadline, "no shard was being written"
            time.sleep(0.05)
        # The launcher and its worker processes carry the marker.
        assert len(_processes_with(marker)) >= 2
        if sent_to == "group":
            os.killpg(child.pid, signal.SIGTERM)
        else:
            child.send_signal(signal.SIGTERM)
        start = time.time()
        _, stderr = child.communicate(timeout=60)
        stopped_after = time.time() - start
    finally:
        if child.poll() is None:
            child.kill()
    assert child.returncode == 143, stderr[-3000:]
    assert stopped_after < 30, stopped_after
    assert "Traceback" not in stderr, stderr[-3000:]
    # The workers were killed at once: Beam's harness never shut down
    # around a bundle in flight (its own KeyError traceback, now and then).
    if sent_to == "process":
        assert "Beam worker processes" in stderr, stderr[-3000:]
    assert "sdk harness exiting" not in stderr, stderr[-3000:]
    assert os.listdir(out) == []
    deadline = time.time() + 10  # workers may take a moment to go
    while _processes_with(marker) and time.time() < deadline:
        time.sleep(0.1)
    assert _processes_with(marker) == []
