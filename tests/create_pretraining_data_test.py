"""create_pretraining_data: the original's records, bad input, scale mode.

The golden files were written by the original release (../shared/golden);
records are compared one by one, feature map by feature map. The script
itself runs in a subprocess: its flags (input_file, vocab_file, ...) are
also defined by other scripts that tests import in-process.
"""

import os
import pathlib
import signal
import time

import pytest
import script_runner
import tensorflow as tf

from modeling import errors
from modeling.data import file_io
from modeling.data import tfrecord_io
from modeling.pretraining_data import exact
from modeling.pretraining_data import generation
from modeling.pretraining_data import scale
from modeling.pretraining_data import shards
from modeling.text import tokenization

REPO_ROOT = pathlib.Path(__file__).resolve().parents[1]
GOLDEN_RUNS = {
    "pretraining_readme.tfrecord": (
        True,
        {
            "max_seq_length": 128,
            "max_predictions_per_seq": 20,
            "masked_lm_prob": 0.15,
            "random_seed": 12345,
            "dupe_factor": 5,
        },
    ),
    "pretraining_wwm_seq64.tfrecord": (
        True,
        {
            "do_whole_word_mask": True,
            "max_seq_length": 64,
            "max_predictions_per_seq": 10,
            "dupe_factor": 2,
            "random_seed": 7,
        },
    ),
    # The golden cased run used the uncased vocab (golden/README.md).
    "pretraining_cased_short.tfrecord": (
        False,
        {"short_seq_prob": 0.3, "dupe_factor": 3, "random_seed": 99},
    ),
}

WORDS = "the cat sat on a mat and dog ran far away from home un ##aff ##able"


def _examples(path):
    return [
        tf.train.Example.FromString(r.numpy())
        for r in tf.data.TFRecordDataset(str(path))
    ]


def _assert_same_records(ours_path, golden_path):
    ours, gold = _examples(ours_path), _examples(golden_path)
    assert len(ours) == len(gold) > 0
    for i, (a, b) in enumerate(zip(ours, gold)):
        fa, fb = a.features.feature, b.features.feature
        assert sorted(fa) == sorted(fb), i
        for name in fb:
            assert fa[name] == fb[name], (i, name)


@pytest.fixture
def toy_tokenizer(tmp_path):
    vocab = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", ".", *WORDS.split()]
    path = tmp_path / "vocab.txt"
    path.write_text("\n".join(vocab) + "\n", encoding="utf-8")
    return tokenization.FullTokenizer(str(path), do_lower_case=True)


def _corpus(tmp_path, num_docs=30, name="corpus.txt"):
    lines = []
    words = WORDS.split()[:12]
    for d in range(num_docs):
        for s in range(3 + d % 5):
            lines.append(
                " ".join(words[(d + s + k) % 12] for k in range(6)) + "."
            )
        lines.append("")
    path = tmp_path / name
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return path


def _leftovers(directory):
    return sorted(p.name for p in directory.iterdir() if ".tfrecord" in p.name)


@pytest.mark.parametrize("golden", sorted(GOLDEN_RUNS))
def test_exact_mode_equals_the_original(
    golden, golden_dir, uncased_vocab_file, tmp_path
):
    do_lower_case, flags = GOLDEN_RUNS[golden]
    tokenizer = tokenization.FullTokenizer(uncased_vocab_file, do_lower_case)
    out = tmp_path / "out.tfrecord"
    counts = exact.create_exact(
        [str(golden_dir / "inputs" / "sample_text.txt")],
        [str(out)],
        tokenizer,
        generation.GenerationOptions(**flags),
    )
    _assert_same_records(out, golden_dir / golden)
    assert counts["instances"] == len(_examples(out))


def test_exact_mode_is_byte_reproducible_and_round_robin(
    toy_tokenizer, tmp_path
):
    corpus = _corpus(tmp_path)
    options = generation.GenerationOptions(max_seq_length=32, dupe_factor=3)
    paths = [tmp_path / f"{n}.tfrecord" for n in ("a", "b", "c1", "c2")]
    for outputs in ([paths[0]], [paths[1]], paths[2:]):
        exact.create_exact(
            [str(corpus)], [str(p) for p in outputs], toy_tokenizer, options
        )
    assert paths[0].read_bytes() == paths[1].read_bytes()
    single = [r.numpy() for r in tf.data.TFRecordDataset(str(paths[0]))]
    first = [r.numpy() for r in tf.data.TFRecordDataset(str(paths[2]))]
    second = [r.numpy() for r in tf.data.TFRecordDataset(str(paths[3]))]
    assert first == single[0::2] and second == single[1::2]
    assert _leftovers(tmp_path) == [
        "a.tfrecord",
        "b.tfrecord",
        "c1.tfrecord",
        "c2.tfrecord",
    ]


def _open_files_under(folder_prefix):
    """How many of this process's file descriptors are files whose folder's
    name starts with `folder_prefix`."""
    count = 0
    for fd in os.listdir("/proc/self/fd"):
        try:
            target = os.readlink(f"/proc/self/fd/{fd}")
        except OSError:  # The listing's own descriptor, closed.
            continue
        count += os.path.basename(os.path.dirname(target)).startswith(
            folder_prefix
        )
    return count


def test_encoded_chunks_hold_a_file_descriptor_per_worker_not_per_chunk(
    toy_tokenizer, tmp_path, monkeypatch
):
    # Every chunk's records stay mapped until the last record is written: a
    # file (and descriptor) per chunk ran out of descriptors (ulimit -n 1024)
    # at about 4M instances.
    monkeypatch.setattr(exact, "_ENCODE_CHUNK", 7)
    corpus = _corpus(tmp_path)
    options = generation.GenerationOptions(max_seq_length=32)
    seen = []
    write_records = exact.write_records

    def counting(records, *args, **kwargs):
        def counted():
            for record in records:
                seen.append(_open_files_under(".bert_records_"))
                yield record

        return write_records(counted(), *args, **kwargs)

    monkeypatch.setattr(exact, "write_records", counting)
    out = tmp_path / "out.tfrecord"
    exact.create_exact(
        [str(corpus)], [str(out)], toy_tokenizer, options, processes=3
    )
    assert len(_examples(out)) > 30 * 7
    assert 1 <= max(seen) <= 2  # One per worker.


def test_parallel_encoding_writes_the_same_bytes(
    toy_tokenizer, tmp_path, monkeypatch
):
    monkeypatch.setattr(exact, "_ENCODE_CHUNK", 37)
    corpus = _corpus(tmp_path)
    options = generation.GenerationOptions(max_seq_length=32)
    outputs = []
    for processes in (1, 2):
        out = tmp_path / f"p{processes}.tfrecord"
        exact.create_exact(
            [str(corpus)],
            [str(out)],
            toy_tokenizer,
            options,
            processes=processes,
        )
        outputs.append(out.read_bytes())
    assert outputs[0] == outputs[1]
    assert len(_examples(tmp_path / "p2.tfrecord")) > 200


def test_exact_mode_hands_records_over_beside_the_output(
    toy_tokenizer, tmp_path, monkeypatch
):
    """The encoded records wait for the writer in a hidden folder beside
    the output (its disk), not in /tmp (memory on a tmpfs, or small): the
    whole output passes through it. Nothing is left there afterwards."""
    from modeling.data import file_io

    folders = []
    real = file_io.scratch_dir

    def recording(prefix, folder=None):
        folders.append(folder)
        return real(prefix, folder)

    monkeypatch.setattr(file_io, "scratch_dir", recording)
    out_dir = tmp_path / "out"
    out_dir.mkdir()
    exact.create_exact(
        [str(_corpus(tmp_path))],
        [str(out_dir / "o.tfrecord")],
        toy_tokenizer,
        generation.GenerationOptions(max_seq_length=32),
        processes=2,
    )
    assert folders == [str(out_dir)]
    assert sorted(p.name for p in out_dir.iterdir()) == ["o.tfrecord"]


BAD_INPUTS = {
    "empty_corpus": (
        b"\n \n\n\xe2\x80\x8b\n",
        {},
        "No text to make instances from",
    ),
    "not_utf8": (
        b"the cat sat.\n\nthe dog \xff ran.\n",
        {},
        r"corpus\.txt:3: bytes that are not UTF-8",
    ),
    "no_predictions": (
        b"the cat.\nthe dog.\n",
        {"max_predictions_per_seq": 0},
        "max_predictions_per_seq=0: must be >= 1",
    ),
    "short_max_seq_length": (
        b"the cat.\n",
        {"max_seq_length": 3},
        "max_seq_length=3",
    ),
    "zero_dupe_factor": (b"the cat.\n", {"dupe_factor": 0}, "dupe_factor=0"),
    "negative_masked_lm_prob": (
        b"the cat.\n",
        {"masked_lm_prob": -0.1},
        "masked_lm_prob=-0.1",
    ),
}


@pytest.mark.parametrize("mode", ["exact", "scale", "scale_per_shard"])
@pytest.mark.parametrize("case", sorted(BAD_INPUTS))
def test_bad_input_is_a_clear_error_and_leaves_no_file(
    case, mode, toy_tokenizer, tmp_path
):
    data, flags, message = BAD_INPUTS[case]
    corpus = tmp_path / "corpus.txt"
    corpus.write_bytes(data)
    out = tmp_path / "out.tfrecord"
    options = generation.GenerationOptions(**flags)
    with pytest.raises(ValueError, match=message):
        if mode == "exact":
            exact.create_exact(
                [str(corpus)], [str(out)], toy_tokenizer, options
            )
        else:
            scale.create_scaled(
                [str(corpus)],
                [str(out)],
                toy_tokenizer,
                options,
                num_workers=2,
                per_shard_output=mode == "scale_per_shard",
            )
    assert _leftovers(tmp_path) == []


def test_the_originals_edge_values_make_records(toy_tokenizer, tmp_path):
    """max_seq_length 16 with the default 20 predictions (more slots than
    a sequence can mask: padded), and masked_lm_prob 0 (one mask per
    sequence): the original accepts both."""
    corpus = _corpus(tmp_path, num_docs=4)
    out = tmp_path / "out.tfrecord"
    exact.create_exact(
        [str(corpus)],
        [str(out)],
        toy_tokenizer,
        generation.GenerationOptions(
            max_seq_length=16, masked_lm_prob=0.0, dupe_factor=1
        ),
    )
    examples = _examples(out)
    assert examples
    for example in examples:
        f = example.features.feature
        assert len(f["masked_lm_positions"].int64_list.value) == 20
        assert sum(f["masked_lm_weights"].float_list.value) == 1.0


def test_replace_policy_counts_bad_lines(toy_tokenizer, tmp_path):
    corpus = tmp_path / "corpus.txt"
    corpus.write_bytes(
        b"the cat \xff sat.\nthe dog ran.\n\nthe \xfe mat.\na cat.\n"
    )
    out = tmp_path / "out.tfrecord"
    counts = exact.create_exact(
        [str(corpus)],
        [str(out)],
        toy_tokenizer,
        generation.GenerationOptions(dupe_factor=1),
        decode_errors="replace",
    )
    assert counts["decode_error_lines"] == 2
    assert counts["instances"] == len(_examples(out)) > 0


def test_vocab_without_mask_is_an_error(tmp_path):
    vocab = tmp_path / "vocab.txt"
    vocab.write_text("[PAD]\n[UNK]\n[CLS]\n[SEP]\nthe\ncat\n", encoding="utf-8")
    tokenizer = tokenization.FullTokenizer(str(vocab), True)
    corpus = _corpus(tmp_path, num_docs=2)
    with pytest.raises(ValueError, match=r"lacks \[MASK\]"):
        exact.create_exact(
            [str(corpus)],
            [str(tmp_path / "out.tfrecord")],
            tokenizer,
            generation.GenerationOptions(),
        )
    assert _leftovers(tmp_path) == []


@pytest.mark.parametrize(
    "outputs,message",
    [
        (["missing_dir/out.tfrecord"], "The folder of output file .* does not"),
        (["corpus.txt"], "is also an input file"),
        (["a.tfrecord", "a.tfrecord"], "Output files repeat"),
        # One file spelled twice: the second rename dropped the first's half.
        (["a.tfrecord", "./a.tfrecord"], "Output files repeat"),
        ([""], "is a folder, not a file"),
    ],
)
def test_bad_output_files(outputs, message, toy_tokenizer, tmp_path):
    corpus = _corpus(tmp_path, num_docs=2)
    with pytest.raises((ValueError, OSError), match=message):
        exact.create_exact(
            [str(corpus)],
            [os.path.join(tmp_path, o) for o in outputs],
            toy_tokenizer,
            generation.GenerationOptions(),
        )


def test_an_output_that_is_a_link_is_written_through_it(
    toy_tokenizer, tmp_path
):
    # As the original's TFRecord writer: the link's target (on another disk,
    # say) gets the records; the link stays.
    corpus = _corpus(tmp_path, num_docs=10)
    (tmp_path / "big").mkdir()
    target = tmp_path / "big" / "target.tfrecord"
    target.write_bytes(b"an earlier run's")
    link = tmp_path / "out.tfrecord"
    link.symlink_to(target)
    exact.create_exact(
        [str(corpus)],
        [str(link)],
        toy_tokenizer,
        generation.GenerationOptions(),
    )
    assert link.is_symlink() and os.readlink(link) == str(target)
    assert len(_examples(target)) > 10


COMMIT_SCRIPT = """
import os, signal, sys
from modeling import errors, signals
from modeling.data import file_io
from modeling.pretraining_data import records
signals.install_sigterm_exit()
outs = sys.argv[1:]
for path in outs:
    with open(path, "w") as f:
        f.write("EARLIER RUN")
publish = file_io.publish
def publish_then_sigterm(temp, final):
    publish(temp, final)
    os.kill(os.getpid(), signal.SIGTERM)  # Between two renames.
file_io.publish = publish_then_sigterm
try:
    with records.AtomicRecordWriters(outs) as out:
        out.write(b"a record")
        out.write(b"another")
        out.commit()
except errors.Terminated:
    print("terminated")
earlier = []
for path in outs:
    with open(path, "rb") as f:
        earlier.append(f.read() == b"EARLIER RUN")
print(earlier, sorted(os.listdir(os.path.dirname(outs[0]))))
"""


def test_a_sigterm_while_publishing_never_leaves_two_runs_outputs(tmp_path):
    outs = [str(tmp_path / "a.tfrecord"), str(tmp_path / "b.tfrecord")]
    out = script_runner.python(
        ["-c", COMMIT_SCRIPT, *outs],
        env={"PYTHONPATH": str(REPO_ROOT)},
        timeout=60,
    )
    assert out.returncode == 0, out.stderr[-2000:]
    assert out.stdout.split("\n")[:2] == [
        "terminated",
        "[False, False] ['a.tfrecord', 'b.tfrecord']",
    ]


def _classifier_record():
    feature = {
        name: tf.train.Feature(int64_list=tf.train.Int64List(value=[1, 2]))
        for name in ("input_ids", "input_mask", "segment_ids", "label_ids")
    }
    example = tf.train.Example(features=tf.train.Features(feature=feature))
    return example.SerializeToString()


@pytest.mark.parametrize(
    "payload",
    [lambda: b"a user's payload", _classifier_record],
    ids=["payload", "classifier_features"],
)
def test_shards_of_the_prefix_that_are_not_pretraining_records_are_kept(
    payload, toy_tokenizer, tmp_path
):
    # Only this script's own records of an earlier run are removed before
    # the new shards are published: other TFRecords of those names are
    # refused, and stay.
    corpus = _corpus(tmp_path, num_docs=10)
    theirs = tmp_path / "out.tfrecord-00000-of-00002"
    theirs.write_bytes(tfrecord_io.frame(payload()))
    before = theirs.read_bytes()
    with pytest.raises(errors.UserError, match="not this script's records"):
        scale.create_scaled(
            [str(corpus)],
            [str(tmp_path / "out.tfrecord")],
            toy_tokenizer,
            generation.GenerationOptions(),
            num_workers=1,
            per_shard_output=True,
        )
    assert theirs.read_bytes() == before


@pytest.mark.parametrize(
    "kwargs,message",
    [
        ({"num_workers": 0}, "num_workers=0: scale mode needs >= 1"),
        ({"num_workers": 2, "shard_bytes": 0}, "shard size 0 bytes"),
        ({"num_workers": 2, "decode_errors": "skip"}, "decode_errors='skip'"),
    ],
)
def test_scale_mode_rejects_bad_arguments(
    kwargs, message, toy_tokenizer, tmp_path
):
    corpus = _corpus(tmp_path, num_docs=2)
    with pytest.raises(ValueError, match=message):
        scale.create_scaled(
            [str(corpus)],
            [str(tmp_path / "out.tfrecord")],
            toy_tokenizer,
            generation.GenerationOptions(),
            **kwargs,
        )
    assert _leftovers(tmp_path) == []


def test_scale_mode_is_deterministic_whatever_the_worker_count(
    toy_tokenizer, tmp_path, monkeypatch
):
    corpus = _corpus(tmp_path, num_docs=60)
    options = generation.GenerationOptions(max_seq_length=32, dupe_factor=2)
    outputs = {}
    runs = ((1, "w1"), (2, "w2"), (3, "w3"), (2, "w2_recycled"))
    for workers, name in runs:
        if name == "w2_recycled":  # Workers replaced after every shard.
            monkeypatch.setattr(scale, "_SHARDS_PER_WORKER", 1)
        out = tmp_path / f"{name}.tfrecord"
        counts = scale.create_scaled(
            [str(corpus)],
            [str(out)],
            toy_tokenizer,
            options,
            num_workers=workers,
            shard_bytes=1500,
        )
        outputs[name] = out.read_bytes()
    assert counts["shards"] > 3
    assert len(set(outputs.values())) == 1
    examples = _examples(tmp_path / "w2.tfrecord")
    assert len(examples) == counts["instances"] > 100
    labels = [
        e.features.feature["next_sentence_labels"].int64_list.value[0]
        for e in examples
    ]
    assert 0.3 < sum(labels) / len(labels) < 0.7


def test_scale_mode_per_shard_output_is_the_one_file_output_cut_by_shard(
    toy_tokenizer, tmp_path, monkeypatch
):
    corpus = _corpus(tmp_path, num_docs=60)
    options = generation.GenerationOptions(max_seq_length=32, dupe_factor=2)
    # Whole shards of records wait for the writer beside the output, not in
    # the system's /tmp (memory, on tmpfs); nothing is left there.
    scratch_folders = []
    real_scratch = file_io.scratch_dir
    monkeypatch.setattr(
        file_io,
        "scratch_dir",
        lambda prefix, folder=None: (
            scratch_folders.append(folder) or real_scratch(prefix, folder)
        ),
    )
    outputs = {}
    for per_shard in (False, True):
        (tmp_path / str(per_shard)).mkdir()
        scale.create_scaled(
            [str(corpus)],
            [str(tmp_path / str(per_shard) / "out.tfrecord")],
            toy_tokenizer,
            options,
            num_workers=2,
            shard_bytes=1500,
            per_shard_output=per_shard,
        )
        outputs[per_shard] = sorted(os.listdir(tmp_path / str(per_shard)))
    assert scratch_folders == [str(tmp_path / "False"), str(tmp_path / "True")]
    count = len(list(shards.plan_shards([str(corpus)], 1500)))
    assert count > 3
    assert outputs[True] == [
        f"out.tfrecord-{i:05d}-of-{count:05d}" for i in range(count)
    ]
    per_shard = [
        r.numpy()
        for name in outputs[True]
        for r in tf.data.TFRecordDataset(str(tmp_path / "True" / name))
    ]
    one_file = tmp_path / "False" / "out.tfrecord"
    assert per_shard == [
        r.numpy() for r in tf.data.TFRecordDataset(str(one_file))
    ]


def test_scale_mode_masks_like_the_original(toy_tokenizer, tmp_path):
    corpus = _corpus(tmp_path, num_docs=60)
    options = generation.GenerationOptions(
        max_seq_length=32, max_predictions_per_seq=5, dupe_factor=3
    )
    out = tmp_path / "out.tfrecord"
    scale.create_scaled(
        [str(corpus)],
        [str(out)],
        toy_tokenizer,
        options,
        num_workers=2,
        shard_bytes=2000,
    )
    budget = generation.num_to_predict_table(options)
    mask_id = toy_tokenizer.vocab["[MASK]"]
    masked = kept = total = 0
    for example in _examples(out):
        f = {k: v.int64_list.value for k, v in example.features.feature.items()}
        n = sum(f["input_mask"])
        len_a = f["segment_ids"][:n].count(0) - 2
        m = int(
            sum(example.features.feature["masked_lm_weights"].float_list.value)
        )
        assert m == budget[n]
        pos = list(f["masked_lm_positions"][:m])
        assert pos == sorted(set(pos))
        assert not {0, len_a + 1, n - 1} & set(pos)
        for p, label in zip(pos, f["masked_lm_ids"][:m]):
            masked += f["input_ids"][p] == mask_id
            kept += f["input_ids"][p] == label
            total += 1
    assert 0.75 < masked / total < 0.85
    assert 0.07 < kept / total < 0.15


def test_scale_mode_whole_word_masking(toy_tokenizer, tmp_path):
    corpus = tmp_path / "corpus.txt"
    corpus.write_text(
        "the unaffable cat sat on a mat .\n" * 40, encoding="utf-8"
    )
    options = generation.GenerationOptions(
        max_seq_length=24,
        max_predictions_per_seq=4,
        do_whole_word_mask=True,
        dupe_factor=2,
    )
    out = tmp_path / "out.tfrecord"
    scale.create_scaled(
        [str(corpus)], [str(out)], toy_tokenizer, options, num_workers=2
    )
    budget = generation.num_to_predict_table(options)
    ids = toy_tokenizer.vocab
    checked = 0
    for example in _examples(out):
        f = {k: v.int64_list.value for k, v in example.features.feature.items()}
        n = sum(f["input_mask"])
        m = int(
            sum(example.features.feature["masked_lm_weights"].float_list.value)
        )
        assert 1 <= m <= budget[n]
        len_a = f["segment_ids"][:n].count(0) - 2
        masked = set(f["masked_lm_positions"][:m])
        continuation = {ids["##aff"], ids["##able"]}
        for p, label in zip(f["masked_lm_positions"][:m], f["masked_lm_ids"]):
            if label not in continuation or p == 1:
                continue
            # A "##" piece is masked with the piece before it, which for
            # B's first token is A's last (the original groups across
            # [SEP]; truncation can leave B starting with "##").
            before = len_a if p == len_a + 2 else p - 1
            assert before in masked
            checked += 1
    assert checked > 10


def test_scale_mode_error_in_a_late_shard_removes_partial_output(
    toy_tokenizer, tmp_path
):
    corpus = _corpus(tmp_path, num_docs=80)
    with open(corpus, "ab") as f:
        f.write(b"the cat \xff sat.\n")
    out = tmp_path / "out.tfrecord"
    bad_line = corpus.read_bytes().count(b"\n")
    with pytest.raises(
        ValueError, match=rf"corpus\.txt:{bad_line}: bytes that are not UTF-8"
    ):
        scale.create_scaled(
            [str(corpus)],
            [str(out)],
            toy_tokenizer,
            generation.GenerationOptions(max_seq_length=32, dupe_factor=1),
            num_workers=2,
            shard_bytes=500,
        )
    assert _leftovers(tmp_path) == []


def _run_script(*args):
    return script_runner.python(
        [str(REPO_ROOT / "create_pretraining_data.py"), *args],
        env={"TF_CPP_MIN_LOG_LEVEL": "2"},
        timeout=300,
    )


def test_script_with_the_readme_flags_equals_the_original(
    golden_dir, uncased_vocab_file, tmp_path
):
    out = tmp_path / "readme.tfrecord"
    result = _run_script(
        f"--input_file={golden_dir / 'inputs' / 'sample_*.txt'}",
        f"--output_file={out}",
        f"--vocab_file={uncased_vocab_file}",
        "--max_seq_length=128",
        "--max_predictions_per_seq=20",
        "--masked_lm_prob=0.15",
        "--random_seed=12345",
        "--dupe_factor=5",
    )
    assert result.returncode == 0, result.stderr[-3000:]
    assert "*** Example ***" in result.stderr
    assert "Wrote 60 total instances" in result.stderr
    _assert_same_records(out, golden_dir / "pretraining_readme.tfrecord")


@pytest.mark.slow
def test_script_missing_input_file_fails_clearly(tmp_path):
    out = tmp_path / "out.tfrecord"
    result = _run_script(
        f"--input_file={tmp_path / 'nope.txt'}",
        f"--output_file={out}",
        f"--vocab_file={tmp_path / 'vocab.txt'}",
    )
    assert result.returncode != 0
    assert "No file matches input pattern" in result.stderr
    assert "nope.txt" in result.stderr
    assert not out.exists()


def test_a_failed_run_stops_its_workers_promptly():
    """An error while forked workers wait for tasks: the pool is gone in
    well under a second (it took 5 s when a killed worker kept the task
    queue's lock)."""
    from modeling.pretraining_data import shards

    start = time.monotonic()
    with pytest.raises(ValueError, match="bad shard"):
        with shards.ForkPool(2, None) as pool:
            assert list(pool.imap(abs, [-1, -2, -3])) == [1, 2, 3]
            raise ValueError("bad shard")
    assert time.monotonic() - start < 2.5


def _killed_on_two(item):
    if item == 2:
        os.kill(os.getpid(), signal.SIGKILL)
    return item


def test_a_killed_worker_ends_the_run_instead_of_hanging_it():
    """multiprocessing.Pool replaces a SIGKILLed worker (the out-of-memory
    killer) and loses its task: waiting on its result hung forever. Now
    one line, within seconds."""
    start = time.monotonic()
    with pytest.raises(errors.UserError, match="was killed by signal 9"):
        with shards.ForkPool(2, None, max_tasks=1) as pool:
            list(pool.imap(_killed_on_two, [0, 1, 2, 3]))
    assert time.monotonic() - start < 10
    with pytest.raises(errors.UserError, match="killed by signal 9"):
        with shards.ForkPool(2, None) as pool:
            pool.submit(_killed_on_two, 2).get()
