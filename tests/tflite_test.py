"""TF Lite prediction (modeling/export/tflite.py): --predict_runtime=tflite
gives TensorFlow's outputs within float32 rounding for every task model;
--precision=int8 predicts the float32 labels; the settings that cannot run
it fail with a message; an export carries the TF Lite model."""

import dataclasses
import json
import pathlib
import types

import constants
import numpy as np
import pytest
import tensorflow as tf
import tolerance

from modeling import config as config_lib
from modeling import models
from modeling.export import tflite
from modeling.tasks import classifier
from modeling.tasks import predictions
from modeling.training import trainer

REPO = pathlib.Path(__file__).resolve().parents[1]
OWN_DATA = REPO / "tests" / "testdata" / "own_data"


def _features(batch, length, seed, choices=None):
    rng = np.random.default_rng(seed)
    shape = (batch, length) if choices is None else (batch, choices, length)
    lengths = rng.integers(2, length + 1, shape[:-1])
    mask = (np.arange(length) < lengths[..., None]).astype(np.int32)
    return {
        "input_ids": rng.integers(5, 99, shape).astype(np.int32) * mask,
        "input_mask": mask,
        "segment_ids": np.zeros(shape, np.int32),
    }


@pytest.mark.parametrize(
    "name, make, rank",
    [
        ("classifier", lambda c: models.BertClassifier(c, 3), 2),
        ("tagger", lambda c: models.BertTokenClassifier(c, 5), 2),
        ("span", lambda c: models.BertSpanLabeler(c), 2),
        ("choice", lambda c: models.BertMultipleChoice(c), 3),
    ],
)
def test_float32_runtime_gives_tensorflow_outputs(name, make, rank):
    config = config_lib.BertConfig.from_dict(constants.TINY_CONFIG)
    model = make(config)
    runner = tflite.runner(model, rank=rank)
    for batch, length in ((3, 17), (1, 5), (4, 32)):  # Resized each time.
        x = _features(batch, length, batch, choices=2 if rank == 3 else None)
        want = model(x, training=False)
        if not isinstance(want, dict):
            want = {"logits": want}
        got = runner(x)
        assert sorted(got) == sorted(want)
        for key in want:
            tolerance.assert_float32_close(got[key], want[key].numpy())


def _settings(**run_config):
    return types.SimpleNamespace(
        use_tpu=False,
        strategy="default",
        run_config=trainer.RunConfig("/tmp/x", 0, **run_config),
    )


def test_check_runtime():
    assert tflite.check_runtime(_settings()) == "tensorflow"
    assert tflite.check_runtime(_settings(precision="int8")) == "tflite"
    assert (
        tflite.check_runtime(_settings(predict_runtime="tflite")) == "tflite"
    )
    with pytest.raises(ValueError, match="drop --predict_runtime=tensorflow"):
        tflite.check_runtime(
            _settings(precision="int8", predict_runtime="tensorflow")
        )
    settings = _settings(precision="int8")
    settings.strategy = "mirrored"
    with pytest.raises(ValueError, match="runs on this host's CPU"):
        tflite.check_runtime(settings)


def test_int8_predicts_the_float32_labels(minilm_ckpt, tmp_path):
    """A MiniLM classifier fine-tuned on the reviews example (3 classes),
    then run_classifier --do_eval --do_predict in float32 and in int8 on
    all 60 labelled rows. int8 moves logits by about 1% of their scale, so
    a row may change label only where float32's top two classes are
    nearly tied: every disagreement must be such a row (top-two margin
    under 0.1 in probability), and at least 90% of the rows must agree
    (60 rows: at most 6 near ties allowed)."""
    rows = (OWN_DATA / "reviews_train.csv").read_text().splitlines()
    dev = (OWN_DATA / "reviews_dev.csv").read_text().splitlines()
    data = tmp_path / "all.csv"
    data.write_text("\n".join(rows + dev[1:]) + "\n")
    out = tmp_path / "out"

    def settings(**kwargs):
        values = dict(
            data_dir=None,
            task_name="custom",
            bert_config_file=str(minilm_ckpt / "bert_config.json"),
            vocab_file=str(minilm_ckpt / "vocab.txt"),
            init_checkpoint=str(minilm_ckpt / "bert_model.ckpt"),
            output_dir=str(out),
            train_file=str(OWN_DATA / "reviews_train.csv"),
            dev_file=str(data),
            test_file=str(data),
            text_a_column="review",
            label_column="sentiment",
            max_seq_length=32,
            train_batch_size=8,
            num_train_epochs=3.0,
            random_seed=2,
        )
        values.update(kwargs)
        s = classifier.Settings(**values)
        s.run_config = dataclasses.replace(
            s.run_config, learning_rate=1e-4, precision=precision
        )
        return s

    precision = "float32"
    want = classifier.run(settings(do_train=True, do_eval=True, do_predict=True))
    assert want["eval_accuracy"] > 0.8  # A confident model to compare on.
    want_rows = _rows(out / predictions.FILE)
    precision = "int8"
    got = classifier.run(
        settings(do_eval=True, do_predict=True, export_dir=str(tmp_path / "e"))
    )
    got_rows = _rows(out / predictions.FILE)
    assert [r["id"] for r in got_rows] == [r["id"] for r in want_rows]
    agree = [a["label"] == b["label"] for a, b in zip(got_rows, want_rows)]
    assert np.mean(agree) >= 0.9, np.mean(agree)
    for same, row in zip(agree, want_rows):
        if not same:
            top = sorted(row["probabilities"].values())[-2:]
            assert top[1] - top[0] < 0.1, row
    assert abs(got["eval_accuracy"] - want["eval_accuracy"]) <= 0.1
    info = json.loads(
        (tmp_path / "e" / "assets.extra" / "bert_export.json").read_text()
    )
    assert info["tflite"]["precision"] == "int8 (dynamic range)"
    exported = tflite.Runner(
        (tmp_path / "e" / tflite.EXPORT_FILE).read_bytes(),
        info["tflite"]["outputs"],
    )
    x = _features(2, 9, 0)
    assert exported(x)["logits"].shape == (2, 3)
    # A quarter of the float32 weights' size: int8 Dense kernels.
    size = (tmp_path / "e" / tflite.EXPORT_FILE).stat().st_size
    assert size < 0.4 * 4 * 22.7e6


def _rows(path):
    return [json.loads(x) for x in pathlib.Path(path).read_text().splitlines()]


def test_pretraining_refuses_int8(tmp_path):
    from modeling.tasks import pretraining

    s = types.SimpleNamespace(
        do_train=True,
        do_eval=False,
        run_config=trainer.RunConfig(str(tmp_path), 1, precision="int8"),
    )
    with pytest.raises(ValueError, match="are for the fine-tuning scripts"):
        pretraining.run(s)
    assert tf.executing_eagerly()
