"""Tests for modeling.data.classifier_data and modeling.data.glue."""

import gzip
import json
import pathlib
import random

import numpy as np
import pytest
import tensorflow as tf

from modeling.data import classifier_data
from modeling.data import glue
from modeling.data import input_pipeline
from modeling.text import tokenization


@pytest.fixture(scope="module")
def tokenizer(uncased_vocab_file):
    return tokenization.FullTokenizer(uncased_vocab_file, do_lower_case=True)


def _write(path, rows):
    path.write_text("".join("\t".join(row) + "\n" for row in rows))
    return path


# === Golden features of the original release ===


@pytest.mark.parametrize(
    "golden_name, task, split, seq_len",
    [
        ("classifier_mrpc_dev_seq128", "MRPC", "dev", 128),
        ("classifier_cola_dev_seq64", "CoLA", "dev", 64),
        ("classifier_mrpc_train_seq32", "MRPC", "train", 32),
    ],
)
def test_features_match_original(
    golden_dir, shared_dir, tokenizer, golden_name, task, split, seq_len
):
    with gzip.open(golden_dir / f"{golden_name}.jsonl.gz", "rt") as f:
        golden = [json.loads(line) for line in f]
    processor = glue.get_processor(task)
    data_dir = str(shared_dir / "data" / "glue" / task)
    get = getattr(processor, f"get_{split}_examples")
    examples = get(data_dir)[: len(golden)]
    assert len(examples) == len(golden) == 200
    labels = processor.get_labels()
    for i, (example, want) in enumerate(zip(examples, golden)):
        got = classifier_data.convert_single_example(
            i, example, labels, seq_len, tokenizer
        )
        assert example.guid == want["guid"]
        assert got.input_ids == want["input_ids"], example.guid
        assert got.input_mask == want["input_mask"], example.guid
        assert got.segment_ids == want["segment_ids"], example.guid
        assert got.label_id == want["label_id"], example.guid
        assert got.is_real_example is True


def test_truncation_is_exercised_by_golden(golden_dir):
    # Guards the golden test above: at seq 32 most MRPC pairs are truncated.
    with gzip.open(
        golden_dir / "classifier_mrpc_train_seq32.jsonl.gz", "rt"
    ) as f:
        full = sum(json.loads(line)["input_mask"][-1] for line in f)
    assert full > 150


# === Conversion details ===


class _CharTokenizer:
    """Each character is a token; ids are code points."""

    def tokenize(self, text):
        return [c for c in text if c != " "]

    def convert_tokens_to_ids(self, tokens):
        return [{"[CLS]": 1, "[SEP]": 2}.get(t, ord(t[0])) for t in tokens]


def test_truncate_seq_pair_pops_longer_then_b_on_tie():
    a, b = list("abcde"), list("xyz")
    classifier_data.truncate_seq_pair(a, b, 5)
    assert (a, b) == (list("abc"), list("xy"))
    a, b = list("ab"), list("xy")
    classifier_data.truncate_seq_pair(a, b, 3)
    assert (a, b) == (list("ab"), list("x"))


def test_truncate_seq_pair_with_rng_removes_front_or_back():
    a, b = list("abcdefgh"), list("x")
    rng = random.Random(3)
    want = random.Random(3)
    expected = list("abcdefgh")
    while len(expected) + 1 > 4:
        if want.random() < 0.5:
            del expected[0]
        else:
            expected.pop()
    classifier_data.truncate_seq_pair(a, b, 4, rng=rng)
    assert a == expected and b == ["x"]
    assert a != list("abc")  # Seed 3 removes from the front at least once.


def test_convert_pair_and_single_and_padding():
    tok = _CharTokenizer()
    pair = classifier_data.InputExample("g", "abcd", "xy", label="1")
    f = classifier_data.convert_single_example(0, pair, ["0", "1"], 7, tok)
    assert f.input_ids == [1, 97, 98, 2, 120, 121, 2]
    assert f.segment_ids == [0, 0, 0, 0, 1, 1, 1]
    assert f.input_mask == [1] * 7 and f.label_id == 1
    single = classifier_data.InputExample("g", "abcdef", None, label="0")
    f = classifier_data.convert_single_example(0, single, ["0", "1"], 5, tok)
    assert f.input_ids == [1, 97, 98, 99, 2]
    short = classifier_data.InputExample("g", "a", "", label="0")
    f = classifier_data.convert_single_example(0, short, ["0", "1"], 6, tok)
    assert f.input_ids == [1, 97, 2, 0, 0, 0]
    assert f.input_mask == [1, 1, 1, 0, 0, 0]
    pad = classifier_data.PaddingInputExample()
    f = classifier_data.convert_single_example(0, pad, ["0", "1"], 4, tok)
    assert f.input_ids == f.input_mask == f.segment_ids == [0] * 4
    assert f.label_id == 0 and f.is_real_example is False


def test_the_first_five_examples_are_logged_as_the_original(caplog):
    tok = _CharTokenizer()
    examples = [
        classifier_data.InputExample(f"train-{i}", "ab", "c", label="1")
        for i in range(7)
    ]
    with caplog.at_level("INFO"):
        classifier_data.convert_examples_to_features(
            examples, ["0", "1"], 8, tok
        )
    assert caplog.text.count("*** Example ***") == 5
    assert "guid: train-4" in caplog.text and "train-5" not in caplog.text
    assert "tokens: [CLS] a b [SEP] c [SEP]" in caplog.text
    assert "segment_ids: 0 0 0 0 1 1 0 0" in caplog.text
    assert "label: 1 (id = 1)" in caplog.text
    # Texts served (Predictor, LiteRT, Keras) are not logged.
    caplog.clear()
    with caplog.at_level("INFO"):
        classifier_data.text_arrays(["ab", "cd"], 8, tok)
    assert "*** Example ***" not in caplog.text


def test_convert_unknown_label_and_regression():
    tok = _CharTokenizer()
    bad = classifier_data.InputExample("dev-3", "ab", label="2")
    with pytest.raises(ValueError, match=r"dev-3.*'2'.*\['0', '1'\]"):
        classifier_data.convert_single_example(0, bad, ["0", "1"], 8, tok)
    reg = classifier_data.InputExample("g", "ab", "c", label="3.800")
    f = classifier_data.convert_single_example(0, reg, None, 8, tok)
    assert f.label_id == pytest.approx(3.8)


def test_records_round_trip(tmp_path):
    tok = _CharTokenizer()
    examples = [
        classifier_data.InputExample("a", "ab", "c", label="4.5"),
        classifier_data.InputExample("b", "abc", None, label="0.25"),
    ]
    padded, num_actual = classifier_data.pad_examples(examples, 4)
    assert len(padded) == 4 and num_actual == 2
    path = str(tmp_path / "eval.tf_record")
    classifier_data.file_based_convert_examples_to_features(
        padded, None, 6, tok, path
    )
    assert tf.io.gfile.listdir(str(tmp_path)) == ["eval.tf_record"]
    spec = input_pipeline.classifier_feature_spec(6, label_dtype=tf.float32)
    records = [
        input_pipeline.decode_record(r, spec)
        for r in tf.data.TFRecordDataset(path)
    ]
    assert len(records) == 4
    np.testing.assert_array_equal(
        records[0]["input_ids"], [1, 97, 98, 2, 99, 2]
    )
    np.testing.assert_array_equal(records[1]["segment_ids"], [0] * 6)
    np.testing.assert_allclose(
        [r["label_ids"] for r in records], [4.5, 0.25, 0, 0]
    )
    assert [int(r["is_real_example"]) for r in records] == [1, 1, 0, 0]


def test_classification_record_label_is_int64(tmp_path):
    path = str(tmp_path / "train.tf_record")
    ex = classifier_data.InputExample("a", "ab", label="1")
    classifier_data.file_based_convert_examples_to_features(
        [ex], ["0", "1"], 4, _CharTokenizer(), path
    )
    record = next(iter(tf.data.TFRecordDataset(path)))
    parsed = tf.train.Example.FromString(record.numpy())
    assert list(parsed.features.feature["label_ids"].int64_list.value) == [1]
    assert sorted(parsed.features.feature) == [
        "input_ids",
        "input_mask",
        "is_real_example",
        "label_ids",
        "segment_ids",
    ]


# === Processors ===


def test_registry_is_case_insensitive_and_lists_known_tasks():
    assert isinstance(
        glue.get_processor("MRPC"),
        glue.MrpcProcessor,
    )
    assert isinstance(
        glue.get_processor("SST-2"),
        glue.Sst2Processor,
    )
    with pytest.raises(ValueError, match=r"Task not found: boolq.*cola.*mrpc"):
        glue.get_processor("boolq")


def test_original_four_layouts(tmp_path):
    cola = tmp_path / "cola"
    cola.mkdir()
    _write(
        cola / "train.tsv", [["gj04", "1", "", "A b."], ["gj04", "0", "*", "C"]]
    )
    _write(cola / "test.tsv", [["index", "sentence"], ["0", "Test s."]])
    p = glue.get_processor("cola")
    train = p.get_train_examples(str(cola))
    assert [(e.guid, e.text_a, e.text_b, e.label) for e in train] == [
        ("train-0", "A b.", None, "1"),
        ("train-1", "C", None, "0"),
    ]
    (test,) = p.get_test_examples(str(cola))
    assert (test.guid, test.text_a, test.label, test.index) == (
        "test-1",
        "Test s.",
        "0",
        "0",
    )

    mnli = tmp_path / "mnli"
    mnli.mkdir()
    head = [f"h{i}" for i in range(12)]
    row = ["77"] + ["x"] * 7 + ['"P" q', "H", "neutral", "entailment"]
    _write(mnli / "train.tsv", [head, row])
    _write(mnli / "test_matched.tsv", [head[:10], row[:10]])
    p = glue.get_processor("MNLI")
    (ex,) = p.get_train_examples(str(mnli))
    # Quotes stay literal (QUOTE_NONE) and the label is the last column.
    assert (ex.guid, ex.text_a, ex.text_b, ex.label) == (
        "train-77",
        '"P" q',
        "H",
        "entailment",
    )
    (ex,) = p.get_test_examples(str(mnli))
    assert (ex.guid, ex.label) == ("test-77", "contradiction")


def test_xnli_language_filter_and_label_mapping(tmp_path):
    (tmp_path / "multinli").mkdir()
    _write(
        tmp_path / "multinli" / "multinli.train.zh.tsv",
        [["premise", "hypo", "label"], ["p", "h", "contradictory"]],
    )
    head = ["language", "gold_label"] + [f"c{i}" for i in range(2, 8)]
    rows = [
        ["en", "neutral", "", "", "", "", "e1", "e2"],
        ["zh", "entailment", "", "", "", "", "z1", "z2"],
    ]
    _write(tmp_path / "xnli.dev.tsv", [head] + rows)
    p = glue.get_processor("xnli")
    (ex,) = p.get_train_examples(str(tmp_path))
    assert (ex.guid, ex.label) == ("train-1", "contradiction")
    (ex,) = p.get_dev_examples(str(tmp_path))
    assert (ex.guid, ex.text_a, ex.text_b, ex.label) == (
        "dev-2",
        "z1",
        "z2",
        "entailment",
    )
    with pytest.raises(ValueError, match="no test set"):
        p.get_test_examples(str(tmp_path))


@pytest.mark.parametrize(
    "task, split, count, first",
    [
        ("SST-2", "dev", 872, ("dev-1", "1", None)),
        ("SST-2", "test", 1821, ("test-1", "0", "0")),
        ("STS-B", "dev", 1500, ("dev-1", "5.000", None)),
        ("STS-B", "test", 1379, ("test-1", "0.0", "0")),
        ("WNLI", "train", 635, ("train-1", "1", None)),
        ("WNLI", "test", 146, ("test-1", "0", "0")),
        ("CoLA", "test", 1063, ("test-1", "0", "0")),
        ("MRPC", "test", 1725, ("test-1", "0", "0")),
    ],
)
def test_glue_layouts_on_real_data(shared_dir, task, split, count, first):
    p = glue.get_processor(task)
    data_dir = str(shared_dir / "data" / "glue" / task)
    examples = getattr(p, f"get_{split}_examples")(data_dir)
    assert len(examples) == count
    ex = examples[0]
    assert (ex.guid, ex.label, ex.index) == first
    assert ex.text_a and (ex.text_b is None) == (task in ("SST-2", "CoLA"))


def test_sts_b_is_regression_and_others_are_not():
    assert glue.get_processor("sts-b").get_labels() is None
    assert glue.get_processor("sts-b").is_regression
    assert glue.get_processor("qnli").get_labels() == [
        "entailment",
        "not_entailment",
    ]


def test_ax_is_test_only(tmp_path):
    _write(
        tmp_path / "diagnostic.tsv",
        [["index", "sentence1", "sentence2"], ["0", "A", "B"]],
    )
    p = glue.get_processor("AX")
    (ex,) = p.get_test_examples(str(tmp_path))
    assert (ex.text_a, ex.text_b, ex.index) == ("A", "B", "0")
    with pytest.raises(ValueError, match="test-only"):
        p.get_train_examples(str(tmp_path))


# === Bad input ===


def test_wrong_column_count_names_file_and_line(tmp_path):
    path = _write(
        tmp_path / "train.tsv",
        [
            ["Quality", "i1", "i2", "s1", "s2"],
            ["1", "1", "2", "a", "b"],
            ["1", "a"],
        ],
    )
    p = glue.get_processor("mrpc")
    with pytest.raises(
        ValueError, match=rf"{path} line 3: expected 5 .* found 2"
    ):
        p.get_train_examples(str(tmp_path))


def test_unknown_label_names_file_line_and_label(tmp_path):
    path = _write(
        tmp_path / "dev.tsv",
        [["Quality", "i1", "i2", "s1", "s2"], ["2", "1", "2", "a", "b"]],
    )
    p = glue.get_processor("mrpc")
    with pytest.raises(ValueError, match=rf"{path} line 2: unknown label '2'"):
        p.get_dev_examples(str(tmp_path))


def test_empty_texts_are_encoded_as_the_original_does(
    tmp_path, tokenizer, caplog
):
    """QQP's train.tsv has rows with an empty question: an empty second
    text is one sentence, an empty first text no piece before [SEP];
    counted in the log."""
    header = ["id", "qid1", "qid2", "question1", "question2", "is_duplicate"]
    _write(
        tmp_path / "train.tsv",
        [
            header,
            ["1", "1", "2", "how are you?", "", "0"],
            ["2", "3", "4", " ", "who are you?", "1"],
        ],
    )
    labels = ["0", "1"]
    one, two = glue.get_processor("qqp").get_train_examples(str(tmp_path))
    assert "2 rows with an empty text (line 2 first)" in caplog.text

    def tokens(example):
        feature = classifier_data.convert_single_example(
            0, example, labels, 16, tokenizer
        )
        n = sum(feature.input_mask)
        return tokenizer.convert_ids_to_tokens(feature.input_ids[:n])

    assert tokens(one) == ["[CLS]", "how", "are", "you", "?", "[SEP]"]
    assert tokens(two) == ["[CLS]", "[SEP]", "who", "are", "you", "?", "[SEP]"]


def test_bad_regression_label_and_missing_file(tmp_path):
    head = [f"h{i}" for i in range(10)]
    row = ["0"] * 7 + ["a", "b", "high"]
    path = _write(tmp_path / "train.tsv", [head, row])
    p = glue.get_processor("sts-b")
    with pytest.raises(
        ValueError, match=rf"{path} line 2: label 'high' is not"
    ):
        p.get_train_examples(str(tmp_path))
    path = _write(tmp_path / "train.tsv", [head, row[:-1] + ["nan"]])
    with pytest.raises(ValueError, match=rf"{path} line 2: label 'nan' is not"):
        p.get_train_examples(str(tmp_path))
    with pytest.raises(FileNotFoundError, match="dev.tsv"):
        p.get_dev_examples(str(tmp_path))


def test_glue_submission_file(tmp_path):
    examples = [
        classifier_data.InputExample("test-1", "a", index="0"),
        classifier_data.InputExample("test-2", "b", index="1"),
    ]
    path = str(tmp_path / "QNLI.tsv")
    classifier_data.write_glue_submission(
        path, examples, [1, 0], ["entailment", "not_entailment"]
    )
    assert pathlib.Path(path).read_text() == (
        "index\tprediction\n0\tnot_entailment\n1\tentailment\n"
    )
    classifier_data.write_glue_submission(path, examples, [5.7, 2.25], None)
    assert (
        pathlib.Path(path).read_text()
        == "index\tprediction\n0\t5.000\n1\t2.250\n"
    )


@pytest.mark.parametrize(
    "task, train_row, test_row, want",
    [
        (
            "qqp",
            ["7", "1", "2", "Q1?", "Q2?", "1"],
            ["9", "Q3?", "Q4?"],
            ("train-7", "Q1?", "Q2?", "1", "9", "Q3?"),
        ),
        (
            "qnli",
            ["0", "Q?", "S.", "not_entailment"],
            ["5", "Q?", "S."],
            ("train-1", "Q?", "S.", "not_entailment", "5", "Q?"),
        ),
        (
            "rte",
            ["0", "S1", "S2", "entailment"],
            ["3", "T1", "T2"],
            ("train-1", "S1", "S2", "entailment", "3", "T1"),
        ),
    ],
)
def test_other_glue_layouts(tmp_path, task, train_row, test_row, want):
    _write(tmp_path / "train.tsv", [["h"] * len(train_row), train_row])
    _write(tmp_path / "test.tsv", [["h"] * len(test_row), test_row])
    p = glue.get_processor(task)
    (ex,) = p.get_train_examples(str(tmp_path))
    (test,) = p.get_test_examples(str(tmp_path))
    got = (ex.guid, ex.text_a, ex.text_b, ex.label, test.index, test.text_a)
    assert got == want
    assert test.label == p.get_labels()[0]


def test_mnli_mismatched_files(tmp_path):
    head = [f"h{i}" for i in range(16)]
    row = ["4"] + ["x"] * 7 + ["P", "H"] + ["neutral"] * 6
    _write(tmp_path / "dev_mismatched.tsv", [head, row])
    p = glue.get_processor("MNLI-MM")
    (ex,) = p.get_dev_examples(str(tmp_path))
    assert (ex.guid, ex.label) == ("dev_mismatched-4", "neutral")
    assert p.submission_name == "MNLI-mm"


def test_truncated_rows_are_counted_in_the_log(tmp_path, caplog):
    """Rows longer than max_seq_length are cut as the original cuts them,
    and the converter says how many."""
    tok = _CharTokenizer()
    examples = [
        classifier_data.InputExample("a", "abcdefgh", None, label="0"),
        classifier_data.InputExample("b", "ab", None, label="0"),
        classifier_data.InputExample("c", "abcd", "efgh", label="1"),
    ]
    caplog.set_level("INFO")
    classifier_data.file_based_convert_examples_to_features(
        examples, ["0", "1"], 6, tok, str(tmp_path / "x.tf_record")
    )
    assert (
        "2 of 3 examples were longer than max_seq_length=6 tokens and were "
        "truncated (as the original does)" in caplog.text
    )


def test_multi_label_features_and_padding(tmp_path):
    tok = _CharTokenizer()
    labels = ["x", "y", "z"]
    example = classifier_data.InputExample("a", "ab", label=["z", "x"])
    f = classifier_data.convert_single_example(
        0, example, labels, 6, tok, multi_label=True
    )
    assert f.label_id == [1, 0, 1]
    pad = classifier_data.convert_single_example(
        0, classifier_data.PaddingInputExample(), labels, 6, tok, True
    )
    assert pad.label_id == [0, 0, 0] and pad.is_real_example is False
    bad = classifier_data.InputExample("b", "ab", label=["w"])
    with pytest.raises(ValueError, match=r"labels \['w'\] are not among"):
        classifier_data.convert_single_example(0, bad, labels, 6, tok, True)


def test_a_glue_file_that_is_not_utf8_names_the_line(tmp_path):
    path = tmp_path / "train.tsv"
    path.write_bytes(
        b"Quality\ta\tb\ts1\ts2\n1\t1\t2\tok\tfine\n0\t3\t4\tcaf\xe9\tx\n"
    )
    with pytest.raises(ValueError, match=f"{path} line 3: not UTF-8 text"):
        glue.get_processor("mrpc").get_train_examples(str(tmp_path))


def test_a_carriage_return_inside_a_glue_line_names_the_line(tmp_path):
    path = tmp_path / "train.tsv"
    path.write_bytes(b"Quality\ta\tb\ts1\ts2\n1\t1\t2\tHello\rworld\tx\n")
    with pytest.raises(ValueError, match=f"{path} line 2: new-line character"):
        glue.get_processor("mrpc").get_train_examples(str(tmp_path))


def test_a_numpy_label_list_and_a_quotechar_as_the_original(
    tmp_path, tokenizer
):
    """The original's public helpers took any label sequence (a notebook's
    df.label.unique()), and `_read_tsv(input_file, quotechar)` parsed
    quoted fields for a processor of one's own (the argument was dropped)."""
    example = classifier_data.InputExample("g", "the cat", label=np.int64(1))
    feature = classifier_data.convert_single_example(
        0, example, np.array([0, 1]), 16, tokenizer
    )
    assert feature.label_id == 1
    path = tmp_path / "quoted.tsv"
    path.write_text('1\t"hello\tworld"\n')
    assert glue.DataProcessor._read_tsv(str(path)) == [
        ["1", '"hello', 'world"']
    ]
    assert glue.DataProcessor._read_tsv(str(path), quotechar='"') == [
        ["1", "hello\tworld"]
    ]


@pytest.mark.parametrize("length", [1, 2])
def test_a_max_seq_length_without_room_is_one_line(length):
    """Below 3 a pair's truncation popped from an empty list and a single
    text kept more ids than the length: refused, naming the flag."""
    from modeling import config as config_lib

    config = config_lib.BertConfig(vocab_size=10)
    with pytest.raises(ValueError, match=f"max_seq_length {length} is below 3"):
        config_lib.check_max_seq_length(length, config)
