"""The README's "Your own data" commands on tests/testdata/own_data: each
task kind trains, evaluates and predicts from the example files, with a
small BERT (random init) on the real uncased vocabulary, and writes
predictions.jsonl with one line per input row."""

import json
import pathlib

import pytest
import script_runner
from constants import TINY_CONFIG

from modeling.tasks import classifier
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
    assert all(r["label"] in labels for r in rows)
    assert all(list(r["probabilities"]) == labels for r in rows)
    assert "eval_accuracy" in (out / "eval_results.txt").read_text()
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
    assert {"eval_pearson", "eval_spearman"} <= set(results)
    rows = _rows(out / predictions.FILE)
    assert len(rows) == 40 and all("score" in r for r in rows)
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
    assert {"eval_micro_f1", "eval_macro_f1", "eval_subset_accuracy"} <= set(
        results
    )
    rows = _rows(out / predictions.FILE)
    assert [r["id"] for r in rows] == [str(i) for i in range(40)]
    assert all(
        list(r["probabilities"]) == ["politics", "sports", "weather"]
        for r in rows
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
    assert "eval_f1" in results
    rows = _rows(out / predictions.FILE)
    source = _rows(train)
    assert [(r["id"], r["tokens"]) for r in rows] == [
        (s["id"], s["tokens"]) for s in source
    ]
    assert all(len(r["tags"]) == len(r["tokens"]) for r in rows)
