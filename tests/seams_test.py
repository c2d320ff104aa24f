"""Bad input at the seams of the own-data, prediction and serving paths:
each mistake fails in seconds with one message naming the file, line or
field, leaves a trained folder exactly as it was, and never drops rows
silently."""

import json
import os
import time

import pytest
import script_runner

from modeling import errors
from modeling.data import conll
from modeling.data import custom
from modeling.data import table_files
from modeling.tasks import classifier as classifier_lib
from modeling.tasks import common
from modeling.tasks import ner
from modeling.training import checkpoint_manager

ROWS = [
    ("a good film", "pos"),
    ("a bad film", "neg"),
    ("great acting", "pos"),
    ("dull plot", "neg"),
] * 2


def _csv(path, rows=ROWS, header="text,label"):
    path.write_text(header + "\n" + "".join(f"{t},{y}\n" for t, y in rows))
    return str(path)


def _settings(tmp_path, config, vocab, **kwargs):
    values = {
        "data_dir": None,
        "task_name": "custom",
        "bert_config_file": str(config),
        "vocab_file": vocab,
        "output_dir": str(tmp_path / "out"),
        "init_checkpoint": None,
        "max_seq_length": 16,
        "train_batch_size": 4,
        "num_train_epochs": 1.0,
        "eval_batch_size": 4,
        "predict_batch_size": 4,
        "random_seed": 1,
    }
    values.update(kwargs)
    return classifier_lib.Settings(**values)


@pytest.fixture
def config_file(tmp_path, tiny_config_dict):
    path = tmp_path / "bert_config.json"
    path.write_text(json.dumps({**tiny_config_dict, "vocab_size": 30522}))
    return path


@pytest.fixture
def trained(tmp_path, config_file, uncased_vocab_file):
    """A custom classifier trained in tmp_path/out (two labels)."""
    train = _csv(tmp_path / "train.csv")
    classifier_lib.run(
        _settings(
            tmp_path,
            config_file,
            uncased_vocab_file,
            train_file=train,
            do_train=True,
        )
    )
    return tmp_path / "out"


def test_a_failed_run_leaves_the_trained_folder_as_it_was(
    trained, tmp_path, config_file, uncased_vocab_file
):
    """Item 1: labels.json deleted, then --labels with another count: the
    error names the labels, and the folder is byte-for-byte unchanged (no
    wrong labels.json that would refuse the right --labels later)."""
    (trained / custom.LABELS_FILE).unlink()
    before = script_runner.folder_digests(trained)
    test = _csv(tmp_path / "test.csv", header="text,label")
    with pytest.raises(
        checkpoint_manager.ConfigMismatchError,
        match=r"trained with 2 labels .* this run's model has 3",
    ):
        classifier_lib.run(
            _settings(
                tmp_path,
                config_file,
                uncased_vocab_file,
                test_file=test,
                do_predict=True,
                labels="neg,pos,other",
            )
        )
    assert script_runner.folder_digests(trained) == before
    # The right labels are then accepted.
    classifier_lib.run(
        _settings(
            tmp_path,
            config_file,
            uncased_vocab_file,
            test_file=test,
            do_predict=True,
            labels="neg,pos",
        )
    )
    assert json.loads((trained / custom.LABELS_FILE).read_text())["labels"] == [
        "neg",
        "pos",
    ]


def test_training_again_with_other_labels_changes_nothing(
    trained, tmp_path, config_file, uncased_vocab_file
):
    """A training run into a trained folder with a third label: refused
    before train.tf_record or labels.json is rewritten."""
    (trained / custom.LABELS_FILE).unlink()
    before = script_runner.folder_digests(trained)
    train = _csv(tmp_path / "train3.csv", ROWS + [("so so", "meh")])
    with pytest.raises(
        checkpoint_manager.ConfigMismatchError, match="trained with 2 labels"
    ):
        classifier_lib.run(
            _settings(
                tmp_path,
                config_file,
                uncased_vocab_file,
                train_file=train,
                do_train=True,
                num_train_epochs=2.0,
            )
        )
    assert script_runner.folder_digests(trained) == before


@pytest.mark.parametrize(
    ("dev", "message"),
    [
        (None, "Data file not found: .*/typo.csv"),
        ("text,label\nfine,neutral\n", r"dev.csv line 2: label 'neutral'"),
        ("text,label\nfine,pos,extra\n", "dev.csv line 2: expected 2"),
        (b"text,label\n\xff\xfe,pos\n", "dev.csv line 2: not UTF-8"),
        ("text,label\n", "dev.csv: no rows to evaluate"),
    ],
)
def test_dev_file_mistakes_fail_before_training(
    tmp_path, config_file, uncased_vocab_file, dev, message
):
    """Item 7 (and 10's empty dev set): a run whose training would take
    minutes fails in seconds, with nothing written."""
    train = _csv(tmp_path / "train.csv", ROWS * 50)
    dev_path = tmp_path / ("typo.csv" if dev is None else "dev.csv")
    if isinstance(dev, bytes):
        dev_path.write_bytes(dev)
    elif dev is not None:
        dev_path.write_text(dev)
    start = time.monotonic()
    with pytest.raises((ValueError, FileNotFoundError), match=message):
        classifier_lib.run(
            _settings(
                tmp_path,
                config_file,
                uncased_vocab_file,
                train_file=train,
                dev_file=str(dev_path),
                do_train=True,
                do_eval=True,
                # 50,000 steps: minutes of training (over 1 ms a step).
                num_train_epochs=500.0,
            )
        )
    assert time.monotonic() - start < 20
    out = tmp_path / "out"
    assert not out.exists() or not os.listdir(out)


def test_test_file_mistakes_fail_before_training(
    tmp_path, config_file, uncased_vocab_file
):
    train = _csv(tmp_path / "train.csv")
    test = tmp_path / "test.csv"
    test.write_bytes(b"text\nok\n\xe9t\xe9\n")
    with pytest.raises(ValueError, match="test.csv line 3: not UTF-8"):
        classifier_lib.run(
            _settings(
                tmp_path,
                config_file,
                uncased_vocab_file,
                train_file=train,
                test_file=str(test),
                do_train=True,
                do_predict=True,
            )
        )
    out = tmp_path / "out"
    assert not out.exists() or not os.listdir(out)


# === Readers ===


def _rows(path, skip=False):
    bad = table_files.BadRows(skip)
    return [r for _, r in table_files.TableFile(path, bad).rows()], bad


def test_an_unterminated_csv_quote_is_an_error_naming_its_line(tmp_path):
    """Item 2: the open quote would swallow every later row; even with
    skip_bad_rows it is an error naming the row it opened in."""
    path = tmp_path / "a.csv"
    path.write_text('text,label\nfine,pos\n"open,neg\nthree,pos\nfour,neg\n')
    for skip in (False, True):
        with pytest.raises(ValueError, match=f"{path} line 3: not CSV"):
            _rows(path, skip)
    # Closed out of place further down: the rows in between would be lost.
    path.write_text('text,label\n"open,neg\nthree,pos\n"x"y,neg\nok,pos\n')
    with pytest.raises(ValueError, match=f"{path} line 2: not CSV.*line 4"):
        _rows(path, skip=True)
    # A bad quote within one line is still one skippable row.
    path.write_text('text,label\n"bad"quote,pos\nok,neg\n')
    rows, bad = _rows(path, skip=True)
    assert rows == [{"text": "ok", "label": "neg"}] and bad.count == 1


def test_a_bad_json_line_is_counted_once(tmp_path):
    """Item 6: the file was re-read per column lookup, counting a bad first
    line once per lookup."""
    path = tmp_path / "a.jsonl"
    path.write_text('{"text": \n{"text": "x", "label": "a", "id": 1}\n')
    p = custom.CustomProcessor(files={"train": str(path)}, skip_bad_rows=True)
    bad = table_files.BadRows(skip=True)
    assert len(list(p.iter_examples("train", bad))) == 1
    assert bad.count == 1


def test_json_number_labels_match_a_label_list_by_value(tmp_path):
    """A JSON number is the class of its value (1 and 1.0: "1"); a label
    list spelling it otherwise (--labels=1.0, an earlier run's labels.json)
    keeps its spelling; a CSV's text is matched as written."""
    path = tmp_path / "train.jsonl"
    path.write_text(
        "".join(
            json.dumps({"text": t, "label": v}) + "\n"
            for t, v in [("a", 0.5), ("b", 1.0), ("c", 1.5), ("d", 1)]
        )
    )
    p = custom.CustomProcessor(files={"train": str(path)})
    p.set_labels_from_training()
    assert p.labels == ["0.5", "1", "1.5"]
    assert [e.label for e in p.get_train_examples()] == ["0.5", "1", "1.5", "1"]
    p = custom.CustomProcessor(
        files={"train": str(path)}, labels=["0.5", "1.0", "1.5"]
    )
    assert [e.label for e in p.get_train_examples()] == [
        "0.5",
        "1.0",
        "1.5",
        "1.0",
    ]
    sets = tmp_path / "sets.jsonl"
    sets.write_text('{"text": "a", "label": [2, "x", 1.0]}\n')
    p = custom.CustomProcessor(
        "multi_label", files={"train": str(sets)}, labels=["1.0", "2.0", "x"]
    )
    assert [e.label for e in p.get_train_examples()] == [["1.0", "2.0", "x"]]
    # Only names written as JSON numbers, exactly: not "01" or "1_0", and
    # no large id rounded to another.
    ids = tmp_path / "ids.jsonl"
    for labels, value in [
        (["01", "5"], 1),
        (["1_0", "5"], 10),
        (["9007199254740992", "5"], 9007199254740993),
        (["10000000000000001", "5"], 1e16),
    ]:
        ids.write_text(json.dumps({"text": "a", "label": value}) + "\n")
        p = custom.CustomProcessor(files={"train": str(ids)}, labels=labels)
        with pytest.raises(ValueError, match="is not one of"):
            p.get_train_examples()
    p = custom.CustomProcessor(files={"train": str(ids)}, labels=["1", "1.0"])
    with pytest.raises(ValueError, match="'1' and '1.0' are one number"):
        p.get_train_examples()
    csv_file = _csv(tmp_path / "t.csv", [("a", "1")])
    p = custom.CustomProcessor(files={"train": csv_file}, labels=["1.0"])
    with pytest.raises(ValueError, match="label '1' is not one of"):
        p.get_train_examples()


@pytest.mark.parametrize(
    ("value", "message"),
    [
        ("1e39", "beyond \\+-9.22e\\+18, the largest whose squared error"),
        ("-1e39", "beyond \\+-9.22e\\+18"),
        ("3e38", "beyond \\+-9.22e\\+18"),
        ("-1e19", "beyond \\+-9.22e\\+18"),
        ("true", "not a number"),
        ('"nan"', "not finite"),
    ],
)
def test_regression_targets_outside_float32_name_their_line(
    tmp_path, value, message
):
    """Item 5."""
    path = tmp_path / "a.jsonl"
    path.write_text(
        f'{{"text": "x", "label": 0.5}}\n{{"text": "y", "label": {value}}}\n'
    )
    p = custom.CustomProcessor("regression", files={"train": str(path)})
    with pytest.raises(ValueError, match=f"{path} line 2: .*{message}"):
        p.get_train_examples()


def test_a_regression_target_the_loss_cannot_square_fails_before_writing(
    tmp_path, config_file, uncased_vocab_file
):
    """3e38 is a float32, but its square is not: the file, line and value
    in one line before anything is written (not a non-finite loss in
    training); 9e18 (below sqrt(float32 max) / 2) is a target."""
    p = custom.CustomProcessor(
        "regression",
        files={"train": _csv(tmp_path / "ok.csv", [("x", "9e18")])},
    )
    assert [e.label for e in p.get_train_examples()] == ["9e+18"]
    train = _csv(tmp_path / "train.csv", [("a", "0.5"), ("b", "3e38")])
    out = tmp_path / "out"
    out.mkdir()
    before = script_runner.folder_digests(tmp_path)
    with pytest.raises(ValueError) as e:
        classifier_lib.run(
            _settings(
                tmp_path,
                config_file,
                uncased_vocab_file,
                train_file=train,
                task_type="regression",
                do_train=True,
            )
        )
    assert str(e.value) == (
        f"{train} line 3: regression target '3e38' (column 'label') is "
        "beyond +-9.22e+18, the largest whose squared error float32 holds"
    )
    assert script_runner.folder_digests(tmp_path) == before
    assert not os.listdir(out)


def _pretrained(folder, config_dict):
    """A pre-trained checkpoint (bert_model.ckpt: the encoder, no head) of
    a model of `config_dict`."""
    from modeling import checkpoints
    from modeling import config as config_lib
    from modeling import models

    folder.mkdir()
    config = config_lib.BertConfig.from_dict(config_dict)
    weights = {
        checkpoints.variable_name(v): v.numpy()
        for v in models.BertClassifier(config, 2).weights
    }
    prefix = str(folder / "bert_model.ckpt")
    checkpoints.write_checkpoint(
        prefix,
        {k: v for k, v in weights.items() if not k.startswith("output_")},
    )
    return prefix


def test_a_bad_init_checkpoint_publishes_nothing_and_binds_nothing(
    tmp_path, config_file, uncased_vocab_file
):
    """--init_checkpoint missing, or of another config: one line naming the
    flag before anything is written to output_dir. The labels.json and
    long_inputs.json that a run without checkpoints left there bind
    nothing: the corrected run (other labels, truncate) replaces them."""
    from modeling.data import long_inputs

    config = json.loads(config_file.read_text())
    good = _pretrained(tmp_path / "good", config)
    other = _pretrained(tmp_path / "other", {**config, "intermediate_size": 40})
    out = tmp_path / "out"
    out.mkdir()
    custom.TaskSpec("classification", ["x", "y", "z"], "text").write(
        str(out / custom.LABELS_FILE)
    )
    long_inputs.LongInputs("chunks").save(str(out))
    train = _csv(tmp_path / "train.csv")
    before = script_runner.folder_digests(tmp_path)
    missing = str(tmp_path / "nowhere" / "bert_model.ckpt")
    for init, error, message in (
        (missing, FileNotFoundError, f"No checkpoint at {missing}: "),
        (other, ValueError, "Shape mismatch for variable bert/encoder/"),
    ):
        with pytest.raises(error) as e:
            classifier_lib.run(
                _settings(
                    tmp_path,
                    config_file,
                    uncased_vocab_file,
                    train_file=train,
                    do_train=True,
                    init_checkpoint=init,
                )
            )
        line = str(e.value)
        assert line.startswith(f"--init_checkpoint={init}: {message}"), line
        assert "\n" not in line
        assert errors.is_user_error(e.value)
        assert script_runner.folder_digests(tmp_path) == before
    classifier_lib.run(
        _settings(
            tmp_path,
            config_file,
            uncased_vocab_file,
            train_file=train,
            do_train=True,
            init_checkpoint=good,
        )
    )
    spec = custom.TaskSpec.read(str(out / custom.LABELS_FILE))
    assert spec.labels == ["neg", "pos"]
    assert not (out / long_inputs.FILE).exists()


@pytest.mark.parametrize(
    ("rows", "message"),
    [
        ('{"id": null, "text": "x", "label": "a"}\n', "line 1: no id"),
        (
            '{"id": 7, "text": "x", "label": "a"}\n'
            '{"id": "7", "text": "y", "label": "b"}\n',
            "line 2: id '7' .* used twice",
        ),
    ],
)
def test_ids_must_be_present_and_unique(tmp_path, rows, message):
    """A test file's ids (predictions.jsonl names its rows by them); a
    training file's are never written, and not read."""
    path = tmp_path / "a.jsonl"
    path.write_text(rows)
    p = custom.CustomProcessor(files={"test": str(path)})
    with pytest.raises(ValueError, match=message):
        list(p.iter_test_examples())
    p = custom.CustomProcessor(files={"train": str(path)})
    assert len(p.get_train_examples()) == rows.count("\n")


def test_pair_columns_by_convention_and_unused_columns_logged(tmp_path, caplog):
    """Item 4: MRPC's, QNLI's, QQP's and MNLI's column names are pairs;
    the log says which columns were read and which were not."""
    for first, second in custom.PAIR_COLUMNS:
        path = tmp_path / f"{first}_{second}.jsonl"
        row = {"idx": 3, first: "one", second: "two", "label": "a", "x": "?"}
        path.write_text(json.dumps(row) + "\n")
        p = custom.CustomProcessor(files={"train": str(path)})
        with caplog.at_level("INFO"):
            (example,) = p.get_train_examples()
        assert (example.text_a, example.text_b) == ("one", "two")
        assert p.spec().text_b_column == second
        assert f"text_a={first!r}, text_b={second!r}" in caplog.text
        assert "column 'x' not used" in caplog.text


# === run_ner ===


def _conll(path, sentences):
    path.write_text("".join("\n".join(s) + "\n\n" for s in sentences))
    return str(path)


def test_a_json_tag_string_is_refused(tmp_path):
    """Item 3: "OOO" for three words was read as three tags."""
    path = tmp_path / "a.jsonl"
    path.write_text(
        '{"tokens": ["a", "b", "c"], "tags": ["O", "O", "O"]}\n'
        '{"tokens": ["a", "b", "c"], "tags": "OOO"}\n'
    )
    with pytest.raises(ValueError, match=f"{path} line 2: field 'tags'.* str"):
        conll.read_tagged_file(str(path))
    path.write_text('{"tokens": "abc", "tags": ["O", "O", "O"]}\n')
    with pytest.raises(ValueError, match="line 1: .*'tokens'.* found a str"):
        conll.read_tagged_file(str(path))


def test_mixed_tag_schemes_name_both_lines(tmp_path):
    """Item 10: B-LOC left open (IOB) in a file of S-/E- tags (IOBES)."""
    path = _conll(
        tmp_path / "a.txt",
        [["Paris S-LOC", "is O"], ["New B-LOC", "York I-LOC", "is O"]],
    )
    with pytest.raises(
        ValueError,
        match=r"a.txt line 4: the entity of 'B-LOC': no E-LOC closes it.*"
        r"IOBES \('S-LOC' at .*a.txt line 1\)",
    ):
        conll.read_conll(path)
    # The same entities in one scheme each.
    path = _conll(
        tmp_path / "b.txt",
        [["Paris S-LOC", "is O"], ["New B-LOC", "York E-LOC", "is O"]],
    )
    assert conll.read_conll(path).scheme == conll.IOBES
    path = _conll(
        tmp_path / "c.txt", [["Paris U-LOC"], ["New B-LOC", "York L-LOC"]]
    )
    assert conll.read_conll(path).scheme == conll.BILOU


def test_conll_lines_end_at_newlines_only(tmp_path):
    """U+2028 and U+0085 inside a word are text (str.splitlines() and
    str.split() took them for line and column breaks)."""
    path = tmp_path / "a.txt"
    path.write_text("a\u2028b O\nc\x85d B-PER\r\n\ne O\n", newline="")
    data = conll.read_conll(str(path))
    assert [s.words for s in data.sentences] == [["a\u2028b", "c\x85d"], ["e"]]
    assert data.sentences[0].tags == ["O", "B-PER"]


def _ner_settings(tmp_path, config, vocab, **kwargs):
    values = {
        "data_dir": None,
        "vocab_file": vocab,
        "bert_config_file": str(config),
        "output_dir": str(tmp_path / "ner_out"),
        "max_seq_length": 16,
        "train_batch_size": 4,
        "num_train_epochs": 1.0,
        "random_seed": 1,
    }
    values.update(kwargs)
    return ner.Settings(**values)


NER_TRAIN = [["Paris B-LOC", "is O"], ["Peter B-PER", "runs O"]] * 4


def test_ner_failed_runs_leave_the_trained_folder_as_it_was(
    tmp_path, config_file, uncased_vocab_file
):
    train = _conll(tmp_path / "train.txt", NER_TRAIN)
    ner.run(
        _ner_settings(
            tmp_path,
            config_file,
            uncased_vocab_file,
            train_file=train,
            do_train=True,
        )
    )
    out = tmp_path / "ner_out"
    (out / conll.LABEL_LIST_FILE).unlink()
    before = script_runner.folder_digests(out)
    test = _conll(tmp_path / "test.txt", [["Paris"]])
    with pytest.raises(
        checkpoint_manager.ConfigMismatchError,
        match="trained with 5 labels.* has 3",
    ):
        ner.run(
            _ner_settings(
                tmp_path,
                config_file,
                uncased_vocab_file,
                predict_file=test,
                do_predict=True,
                label_list="O,B-LOC,B-PER",
            )
        )
    assert script_runner.folder_digests(out) == before
    # A typo in the eval file of a training run: before any training.
    start = time.monotonic()
    with pytest.raises(FileNotFoundError, match="typo.txt"):
        ner.run(
            _ner_settings(
                tmp_path,
                config_file,
                uncased_vocab_file,
                train_file=train,
                eval_file=str(tmp_path / "typo.txt"),
                do_train=True,
                do_eval=True,
                # 40,000 steps: minutes of training.
                num_train_epochs=20000.0,
            )
        )
    assert time.monotonic() - start < 20
    assert script_runner.folder_digests(out) == before


def test_run_ner_leaves_no_empty_output_folder(
    tmp_path, config_file, uncased_vocab_file
):
    """Item 10: the script's output folder, created for the run, goes when
    the run fails before writing anything to it."""
    train = tmp_path / "train.jsonl"
    train.write_text('{"tokens": ["a"], "tags": "O"}\n')
    out = tmp_path / "new" / "out"
    proc = script_runner.python(
        [
            str(script_runner.REPO / "run_ner.py"),
            f"--train_file={train}",
            f"--bert_config_file={config_file}",
            f"--vocab_file={uncased_vocab_file}",
            f"--output_dir={out}",
            "--max_seq_length=16",
            "--do_train",
        ],
    )
    assert proc.returncode == common.EXIT_USER_ERROR, proc.stderr[-3000:]
    assert (
        proc.stderr.strip()
        .splitlines()[-1]
        .startswith(f"error: {train} line 1: field 'tags'")
    )
    assert not (tmp_path / "new").exists()


# === Serving exports ===


@pytest.fixture
def tiny_bert_config(tiny_config_dict):
    from modeling import config as config_lib

    return config_lib.BertConfig.from_dict(
        {**tiny_config_dict, "vocab_size": 30522}
    )


def _empty(shape=(0,)):
    import tensorflow as tf

    return tf.zeros(shape, tf.string)


def test_servers_answer_an_empty_batch(tiny_bert_config, uncased_vocab_file):
    """Item 11: a batch of no strings gets outputs of batch 0 (it failed in
    the pooler's slice of a sequence of length 0)."""
    from modeling import models
    from modeling import task_kinds
    from modeling.export import base
    from modeling.export import classifier as classifier_export
    from modeling.export import multiple_choice as choice_export
    from modeling.export import tagger as tagger_export
    from modeling.text import in_graph

    vocab = uncased_vocab_file
    classifier = models.BertClassifier(tiny_bert_config, 3)
    preprocessor = in_graph.TextPreprocessor(vocab, True, 16)
    for kind, has_b in (
        (task_kinds.get("classification"), True),
        (task_kinds.get("regression"), False),
    ):
        model = (
            classifier
            if kind.name != "regression"
            else (models.BertClassifier(tiny_bert_config, 1))
        )
        server = classifier_export.ClassifierServer(
            model, preprocessor, kind, has_b
        )
        serve = server.signatures()[base.SERVING_DEFAULT]
        args = {"text_a": _empty()}
        if has_b:
            args["text_b"] = _empty()
        out = serve(**args)
        for name, value in out.items():
            assert value.shape[0] == 0, name
        if kind.name == "classification":
            assert out["probabilities"].shape == (0, 3)
    tagger = tagger_export.TaggerServer(
        models.BertTokenClassifier(tiny_bert_config, 5),
        vocab,
        True,
        16,
        ["O", "B-X", "I-X", "B-Y", "I-Y"],
    )
    out = tagger.serve_text(_empty())
    assert out["tags"].shape[0] == 0 and out["probabilities"].shape[-1] == 5
    chooser = choice_export.ChoiceServer(
        models.BertMultipleChoice(tiny_bert_config), vocab, True, 16
    )
    out = chooser.serve_text(_empty(), _empty(), _empty((0, 4)))
    assert out["probabilities"].shape == (0, 4)


def test_read_file_with_labels_reads_evaluation_data(tmp_path):
    """BertTextClassifier.read_file with the training labels is a dev file:
    an unseen label is an error even with skip_bad_rows (dropping its rows
    would bias the metrics), as run_classifier's dev file."""
    from modeling.text_classifier import BertTextClassifier

    path = _csv(tmp_path / "dev.csv", [("fine", "pos"), ("meh", "neutral")])
    with pytest.raises(ValueError, match=r"dev.csv line 3: label 'neutral'"):
        BertTextClassifier.read_file(
            path, labels=["neg", "pos"], skip_bad_rows=True
        )
    # Training data (no labels given): the file's labels.
    data = BertTextClassifier.read_file(path, skip_bad_rows=True)
    assert data.labels == ["neutral", "pos"]
    assert data.y.tolist() == [1, 0]
