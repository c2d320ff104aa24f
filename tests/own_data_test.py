"""docs/own-data.md's "Your own data" commands on tests/testdata/own_data: each
task kind trains, evaluates and predicts from the example files, with a
small BERT (random init) on the real uncased vocabulary, and writes
predictions.jsonl with one line per input row."""

import json
import pathlib

import numpy as np
import pytest
import script_runner
from constants import TINY_CONFIG

from modeling.tasks import classifier
from modeling.tasks import conlleval
from modeling.tasks import ner
from modeling.tasks import predictions

REPO = pathlib.Path(__file__).resolve().parents[1]
DATA = REPO / "tests" / "testdata" / "own_data"


@pytest.fixture(scope="module")
def model(tmp_path_factory, uncased_vocab_file):
    d = tmp_path_factory.mktemp("own_data_model")
    (d / "bert_config.json").write_text(
        json.dumps(dict(TINY_CONFIG, vocab_size=30522))
    )
    return {
        "vocab_file": uncased_vocab_file,
        "bert_config_file": str(d / "bert_config.json"),
    }


def _rows(path):
    return [json.loads(x) for x in pathlib.Path(path).read_text().splitlines()]


def test_classification_command(model, tmp_path):
    out = tmp_path / "reviews"
    script_runner.run_script(
        "run_classifier.py",
        [
            "--task_name=custom",
            f"--train_file={DATA / 'reviews_train.csv'}",
            f"--dev_file={DATA / 'reviews_dev.csv'}",
            f"--test_file={DATA / 'reviews_new.jsonl'}",
            "--text_a_column=review",
            "--label_column=sentiment",
            "--do_train",
            "--do_eval",
            "--do_predict",
            f"--vocab_file={model['vocab_file']}",
            f"--bert_config_file={model['bert_config_file']}",
            "--max_seq_length=32",
            "--train_batch_size=8",
            "--num_train_epochs=1",
            f"--output_dir={out}",
        ],
    )
    rows = _rows(out / predictions.FILE)
    assert [r["id"] for r in rows] == [
        r["id"] for r in _rows(DATA / "reviews_new.jsonl")
    ]
    labels = ["negative", "neutral", "positive"]
    for r in rows:
        assert list(r["probabilities"]) == labels
        p = np.array(list(r["probabilities"].values()))
        assert abs(p.sum() - 1) < 1e-5 and np.all(p >= 0), r
        assert r["label"] == labels[int(np.argmax(p))], r
    accuracy = float(
        dict(
            line.split(" = ")
            for line in (out / "eval_results.txt").read_text().splitlines()
        )["eval_accuracy"]
    )
    assert 0 <= accuracy <= 1
    saved = json.loads((out / "labels.json").read_text())
    assert saved["labels"] == labels and saved["text_a_column"] == "review"


def _classifier(model, out, **kwargs):
    return classifier.Settings(
        data_dir=None,
        task_name="custom",
        output_dir=str(out),
        max_seq_length=32,
        train_batch_size=8,
        num_train_epochs=1.0,
        do_train=True,
        **model,
        **kwargs,
    )


def test_regression_command(model, tmp_path):
    train = str(DATA / "similarity_train.tsv")
    out = tmp_path / "similarity"
    results = classifier.run(
        _classifier(
            model,
            out,
            task_type="regression",
            train_file=train,
            dev_file=train,
            test_file=train,
            text_b_column="sentence2",
            label_column="score",
            do_eval=True,
            do_predict=True,
        )
    )
    rows = _rows(out / predictions.FILE)
    assert len(rows) == 40
    # The scores written are the ones evaluated (dev = test here).
    gold = [
        float(line.split("\t")[2])
        for line in pathlib.Path(train).read_text().splitlines()[1:]
    ]
    # The file holds each float32 score in its shortest repr: read back as
    # float32 it is the value evaluated, exactly. (Read as float64 it is off
    # by up to half a float32 ulp, and the tiny model's scores spread over
    # ~1e-4 of their mean, so the correlation would move by ~1e-5.)
    scores = np.array([r["score"] for r in rows], np.float32)
    assert results["eval_pearson"] == pytest.approx(
        np.corrcoef(scores.astype(np.float64), gold)[0, 1], abs=1e-9
    )
    assert -1 <= results["eval_spearman"] <= 1
    # No id column: the line of each row.
    assert rows[0]["id"] == "2"


def test_multi_label_command(model, tmp_path):
    train = str(DATA / "topics_train.jsonl")
    out = tmp_path / "topics"
    results = classifier.run(
        _classifier(
            model,
            out,
            task_type="multi_label",
            train_file=train,
            dev_file=train,
            test_file=train,
            label_column="topics",
            do_eval=True,
            do_predict=True,
        )
    )
    rows = _rows(out / predictions.FILE)
    assert [r["id"] for r in rows] == [str(i) for i in range(40)]
    names = ["politics", "sports", "weather"]
    assert all(list(r["probabilities"]) == names for r in rows)
    # The label sets written are the ones evaluated (dev = test here), each
    # the labels of probability >= the threshold (0.5).
    gold = [set(r["topics"]) for r in _rows(train)]
    said = [set(r["labels"]) for r in rows]
    for r, labels in zip(rows, said, strict=True):
        assert labels == {n for n, p in r["probabilities"].items() if p >= 0.5}
    tp = sum(len(g & s) for g, s in zip(gold, said, strict=True))
    fp = sum(len(s - g) for g, s in zip(gold, said, strict=True))
    fn = sum(len(g - s) for g, s in zip(gold, said, strict=True))
    assert results["eval_micro_f1"] == pytest.approx(
        2 * tp / (2 * tp + fp + fn) if tp else 0.0, abs=1e-6
    )
    assert results["eval_subset_accuracy"] == pytest.approx(
        np.mean([g == s for g, s in zip(gold, said, strict=True)]), abs=1e-6
    )


def test_token_classification_command(model, tmp_path):
    train = str(DATA / "entities_train.jsonl")
    out = tmp_path / "entities"
    results = ner.run(
        ner.Settings(
            train_file=train,
            eval_file=train,
            predict_file=train,
            output_dir=str(out),
            max_seq_length=32,
            train_batch_size=8,
            num_train_epochs=1.0,
            do_train=True,
            do_eval=True,
            do_predict=True,
            **model,
        )
    )
    rows = _rows(out / predictions.FILE)
    source = _rows(train)
    assert [(r["id"], r["tokens"]) for r in rows] == [
        (s["id"], s["tokens"]) for s in source
    ]
    assert all(len(r["tags"]) == len(r["tokens"]) for r in rows)
    # The tags written are the ones evaluated (eval = predict here).
    scores = conlleval.evaluate(
        [s["tags"] for s in source], [r["tags"] for r in rows]
    )
    assert results["eval_f1"] == pytest.approx(scores["f1"], abs=1e-6)
    assert results["eval_accuracy"] == pytest.approx(
        scores["accuracy"], abs=1e-6
    )
