"""run_ner.py on your own tagged files: CoNLL-2003 written as JSON Lines
gives the CoNLL files' results; other columns (--tag_column), IOBES tags and
plain labels (part-of-speech: token accuracy) train and predict; JSON Lines
bad input names the file and line.

The data: the first sentences of the real CoNLL-2003 files in ../shared
when present, else a generated CoNLL-2003-style file (run_ner_test.py's). A
tiny model (2 layers, hidden 32) on the real uncased vocabulary, from
scratch: what is compared is the path from file to numbers, not accuracy.
"""

import json
import pathlib
import types

import pytest
import run_ner_test
import tensorflow as tf
import tolerance
from constants import TINY_CONFIG

from modeling.data import conll
from modeling.tasks import ner
from modeling.tasks import predictions

SEQ = 32
SIZES = {"train": 96, "dev": 32, "test": 32}
SOURCES = {"train": "eng.train", "dev": "eng.testa", "test": "eng.testb"}


def _first_sentences(path, count):
    """The first `count` sentences (blank-line separated) of a CoNLL file."""
    out, sentence = [], []
    for line in pathlib.Path(path).read_text().splitlines():
        if line.strip():
            sentence.append(line)
        elif sentence:
            out.append(sentence)
            sentence = []
            if len(out) == count:
                break
    return out


@pytest.fixture(scope="module")
def files(tmp_path_factory, uncased_vocab_file, optional_shared_dir):
    d = tmp_path_factory.mktemp("ner_files")
    config = dict(
        TINY_CONFIG,
        vocab_size=30522,
        hidden_dropout_prob=0.0,
        attention_probs_dropout_prob=0.0,
    )
    (d / "bert_config.json").write_text(json.dumps(config))
    conll_dir = d / "conll"
    conll_dir.mkdir()
    source = None
    if optional_shared_dir is not None:
        source = optional_shared_dir / "data" / "conll2003"
        if not source.is_dir():
            source = None
    for set_type, count in SIZES.items():
        path = conll_dir / f"{set_type}.txt"
        if source is None:
            run_ner_test.write_conll(path, count, seed=len(set_type))
            continue
        sentences = _first_sentences(source / SOURCES[set_type], count)
        path.write_text("".join("\n".join(s) + "\n\n" for s in sentences))
    return types.SimpleNamespace(root=d, vocab=uncased_vocab_file)


def _read_columns(path):
    """Sentences of a 4-column CoNLL file as lists of column lists."""
    data = conll.read_conll(path)
    lines = pathlib.Path(path).read_text().splitlines()
    return [
        [lines[n - 1].split() for n in s.line_numbers] for s in data.sentences
    ]


def _write_jsonl(files, name, transform=None):
    """The CoNLL files as JSON Lines: {"id", "tokens", "tags"} (the test
    file without tags)."""
    folder = files.root / name
    folder.mkdir(exist_ok=True)
    for set_type in SIZES:
        rows = []
        for i, sentence in enumerate(
            _read_columns(files.root / "conll" / f"{set_type}.txt")
        ):
            tags = [c[-1] for c in sentence]
            if transform:
                tags = transform(tags)
            row = {"id": f"{set_type}-{i}", "tokens": [c[0] for c in sentence]}
            if set_type != "test":
                row["tags"] = tags
            rows.append(json.dumps(row))
        (folder / f"{set_type}.jsonl").write_text("\n".join(rows) + "\n")
    return folder


def _run(files, data_dir, out, **kwargs):
    settings = ner.Settings(
        data_dir=str(data_dir),
        vocab_file=str(files.vocab),
        bert_config_file=str(files.root / "bert_config.json"),
        output_dir=str(out),
        max_seq_length=SEQ,
        do_train=True,
        do_eval=True,
        do_predict=True,
        train_batch_size=16,
        num_train_epochs=2.0,
        random_seed=5,
        **kwargs,
    )
    return ner.run(settings)


@pytest.fixture(scope="module")
def conll_run(files, tmp_path_factory):
    out = tmp_path_factory.mktemp("conll_run")
    results = _run(files, files.root / "conll", out)
    return out, results


def _predictions(out):
    return [
        json.loads(x) for x in (out / predictions.FILE).read_text().splitlines()
    ]


def test_conll_as_json_lines_gives_the_conll_results(
    files, conll_run, tmp_path
):
    want_dir, want = conll_run
    out = tmp_path / "jsonl"
    got = _run(files, _write_jsonl(files, "jsonl"), out)
    assert sorted(got) == sorted(want)
    for key in want:
        tolerance.assert_float32_close(got[key], want[key], scale=1.0)
    assert (out / "label_list.txt").read_text() == (
        want_dir / "label_list.txt"
    ).read_text()
    got_rows, want_rows = _predictions(out), _predictions(want_dir)
    assert [r["tags"] for r in got_rows] == [r["tags"] for r in want_rows]
    assert [r["tokens"] for r in got_rows] == [r["tokens"] for r in want_rows]
    assert [r["id"] for r in got_rows] == [
        f"test-{i}" for i in range(SIZES["test"])
    ]
    # A CoNLL file's sentence id: the line of its first word.
    data = conll.read_conll(files.root / "conll" / "test.txt")
    assert [r["id"] for r in want_rows] == [
        str(s.line_numbers[0]) for s in data.sentences
    ]
    # test_predictions.txt of a JSON Lines file: `word predicted` lines.
    lines = (out / ner.PREDICTIONS_FILE).read_text().split("\n\n")
    assert [
        [w.split()[-1] for w in block.splitlines()] for block in lines if block
    ] == [r["tags"] for r in got_rows]


def test_prediction_in_blocks_equals_one_block(
    files, conll_run, tmp_path, monkeypatch
):
    """--do_predict alone from the run's checkpoint, 5 sentences per block
    (ner.PREDICT_BLOCK): the same output files as the run's one block."""
    want_dir, _ = conll_run
    out = tmp_path / "blocks"
    out.mkdir()
    (out / "label_list.txt").write_text(
        (want_dir / "label_list.txt").read_text()
    )
    monkeypatch.setattr(ner, "PREDICT_BLOCK", 5)
    settings = ner.Settings(
        data_dir=str(files.root / "conll"),
        vocab_file=str(files.vocab),
        bert_config_file=str(files.root / "bert_config.json"),
        output_dir=str(out),
        init_checkpoint=tf.train.latest_checkpoint(str(want_dir)),
        max_seq_length=SEQ,
        do_predict=True,
    )
    ner.run(settings)
    for name in (predictions.FILE, ner.PREDICTIONS_FILE):
        assert (out / name).read_text() == (want_dir / name).read_text()


def test_tag_column_picks_another_column(files, conll_run, tmp_path):
    """`word tag POS chunk`: --tag_column=2 gives the 4-column file's run."""
    want_dir, want = conll_run
    folder = tmp_path / "reordered"
    folder.mkdir()
    for set_type in SIZES:
        sentences = _read_columns(files.root / "conll" / f"{set_type}.txt")
        (folder / f"{set_type}.txt").write_text(
            "".join(
                "".join(f"{c[0]} {c[3]} {c[1]} {c[2]}\n" for c in s) + "\n"
                for s in sentences
            )
        )
    out = tmp_path / "out"
    got = _run(files, folder, out, tag_column=2)
    for key in want:
        tolerance.assert_float32_close(got[key], want[key], scale=1.0)
    assert [r["tags"] for r in _predictions(out)] == [
        r["tags"] for r in _predictions(want_dir)
    ]


def to_iobes(tags):
    """IOB2 tags -> IOBES (single-word entities S-, last words E-)."""
    out = []
    for i, tag in enumerate(tags):
        after = tags[i + 1] if i + 1 < len(tags) else "O"
        ends = not after.startswith("I-")
        if tag.startswith("B-"):
            out.append(("S-" if ends else "B-") + tag[2:])
        elif tag.startswith("I-"):
            out.append(("E-" if ends else "I-") + tag[2:])
        else:
            out.append(tag)
    return out


def test_iobes_tags_score_entities(files, tmp_path):
    def iobes(tags):
        return to_iobes(conll.iob1_to_iob2(tags))

    # Every IOBES tag: a short training set (the generated one, without
    # ../shared) may lack a tag of the dev set, which is an error.
    tags = ["O"] + [
        f"{p}-{t}" for t in ("PER", "ORG", "LOC", "MISC") for p in "BIES"
    ]
    out = tmp_path / "out"
    results = _run(
        files,
        _write_jsonl(files, "iobes", iobes),
        out,
        label_list=",".join(tags),
    )
    labels = (out / "label_list.txt").read_text().split()
    assert labels == tags
    assert {"eval_f1", "eval_precision", "eval_recall"} <= set(results)
    for row in _predictions(out):
        assert conll.tag_scheme(row["tags"]) in (
            conll.IOBES,
            conll.IOB,
            "plain",
        )


def test_plain_labels_score_tokens(files, tmp_path):
    """Part-of-speech tags (column 2 of CoNLL-2003): no entities, token
    accuracy; the best checkpoint is kept by it."""
    out = tmp_path / "out"
    results = _run(
        files,
        files.root / "conll",
        out,
        tag_column=2,
        eval_during_training=True,
        # The dev file's tags are all in training; the test file's may not.
        predict_file=str(files.root / "conll" / "dev.txt"),
    )
    assert "eval_f1" not in results
    assert set(results) == {"eval_accuracy", "eval_loss", "global_step"}
    labels = (out / "label_list.txt").read_text().split()
    assert conll.tag_scheme(labels) == conll.PLAIN
    assert "NNP" in labels or "NN" in labels
    best = (out / "best" / "eval_results.txt").read_text()
    assert "eval_accuracy" in best


# === Bad input ===


@pytest.mark.parametrize(
    "line, message",
    [
        ('{"tokens": [], "tags": []}', "expected a non-empty list of words"),
        (
            '{"words": ["a"], "tags": ["O"]}',
            "in field 'tokens' (--tokens_field)",
        ),
        ('{"tokens": ["a", "b"], "tags": ["O"]}', "2 words but 1 tags"),
        (
            '{"tokens": ["a b"], "tags": ["O"]}',
            "word 1 'a b' holds white space",
        ),
        ('{"tokens": ["a", 3], "tags": ["O", "O"]}', "word 2 is not a"),
        ('{"tokens": ["a"], "tags": ["O"]', "not a JSON object"),
        ('{"tokens": ["a"]}', "no field 'tags' (--tags_field)"),
    ],
)
def test_json_lines_errors_name_file_and_line(tmp_path, line, message):
    path = tmp_path / "train.jsonl"
    path.write_text('{"tokens": ["EU"], "tags": ["B-ORG"]}\n' + line + "\n")
    with pytest.raises(ValueError) as e:
        conll.read_tagged_file(str(path))
    assert str(e.value).startswith(f"{path} line 2")
    assert message in str(e.value)


def test_mixed_schemes_name_the_line(tmp_path):
    path = tmp_path / "train.jsonl"
    path.write_text(
        '{"tokens": ["EU", "rejects"], "tags": ["B-ORG", "O"]}\n'
        '{"tokens": ["German", "call"], "tags": ["MISC", "O"]}\n'
    )
    with pytest.raises(
        ValueError, match=rf"{path} line 2 \(word 1\): tag 'MISC' has no chunk"
    ):
        conll.read_tagged_file(str(path))


def test_tag_scheme():
    assert conll.tag_scheme(["O", "B-PER", "I-PER"]) == conll.IOB
    assert conll.tag_scheme(["O", "S-PER", "E-LOC", "B-LOC"]) == conll.IOBES
    assert conll.tag_scheme(["O", "U-PER", "L-LOC", "B-LOC"]) == conll.BILOU
    assert conll.tag_scheme(["NN", "VBZ", "O"]) == conll.PLAIN
    with pytest.raises(ValueError, match="mix the prefixes"):
        conll.tag_scheme(["S-PER", "U-LOC"])
    with pytest.raises(ValueError, match="tag 'NN' has no chunk prefix"):
        conll.tag_scheme(["B-PER", "NN"])


def test_tag_column_out_of_range(tmp_path):
    path = tmp_path / "train.txt"
    path.write_text("EU NNP B-ORG\n")
    with pytest.raises(ValueError, match=r"line 1: --tag_column=4, but the"):
        conll.read_conll(str(path), tag_column=4)
