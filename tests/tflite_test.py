"""TF Lite prediction (modeling/export/tflite.py): --predict_runtime=tflite
gives TensorFlow's outputs within float32 rounding for every task model;
--precision=int8 predicts the float32 labels; the settings that cannot run
it fail with a message; an export carries the TF Lite model."""

import dataclasses
import json
import pathlib
import subprocess
import sys
import types

import numpy as np
import pytest
import tensorflow as tf

from modeling.export import tflite
from modeling.tasks import classifier
from modeling.tasks import predictions
from modeling.training import predictor
from modeling.training import trainer

REPO = pathlib.Path(__file__).resolve().parents[1]
OWN_DATA = REPO / "tests" / "testdata" / "own_data"


def _features(batch, length, seed):
    rng = np.random.default_rng(seed)
    lengths = rng.integers(2, length + 1, batch)
    mask = (np.arange(length) < lengths[:, None]).astype(np.int32)
    return {
        "input_ids": rng.integers(5, 99, (batch, length)).astype(np.int32)
        * mask,
        "input_mask": mask,
        "segment_ids": np.zeros((batch, length), np.int32),
    }


def test_runtime_flags():
    """--predict_runtime, and --precision=int8 as its alias."""
    config = trainer.RunConfig("/tmp/x", 0)
    assert (config.runtime, config.precision) == ("tensorflow", "float32")
    config = trainer.RunConfig("/tmp/x", 0, precision="int8")
    assert (config.runtime, config.precision) == ("tflite_int8", "float32")
    for runtime in ("tflite", "tflite_int8"):
        config = trainer.RunConfig(
            "/tmp/x", 0, precision="int8", predict_runtime=runtime
        )
        assert config.runtime == "tflite_int8"
    with pytest.raises(ValueError, match="drop --predict_runtime=tensorflow"):
        trainer.RunConfig(
            "/tmp/x", 0, precision="int8", predict_runtime="tensorflow"
        )
    with pytest.raises(ValueError, match="expected one of tensorflow"):
        trainer.RunConfig("/tmp/x", 0, predict_runtime="onnx")


@pytest.mark.parametrize(
    "flags, message",
    [
        (
            ["--predict_runtime=tflite", "--precision=mixed_bfloat16"],
            "--predict_runtime=tflite converts the float32 model: it cannot "
            "run with --precision=mixed_bfloat16",
        ),
        (
            ["--precision=int8", "--use_tpu", "--tpu_name=x"],
            "--predict_runtime=tflite_int8 runs in this process on this "
            "host's CPU: it cannot run with --use_tpu",
        ),
        (
            ["--predict_runtime=tflite", "--strategy=mirrored"],
            "it cannot run with --strategy=mirrored",
        ),
    ],
)
def test_impossible_runtimes_fail_in_the_flag_checks(tmp_path, flags, message):
    """One error line, exit 1, before any checkpoint, record or TPU: the
    output folder is not even created (the files named do not exist)."""
    out = tmp_path / "out"
    proc = subprocess.run(
        [
            sys.executable,
            str(REPO / "run_classifier.py"),
            "--task_name=mrpc",
            "--do_eval",
            f"--data_dir={tmp_path / 'none'}",
            f"--vocab_file={tmp_path / 'vocab.txt'}",
            f"--bert_config_file={tmp_path / 'bert_config.json'}",
            f"--output_dir={out}",
            *flags,
        ],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert proc.returncode == 1, proc.stderr
    lines = proc.stderr.strip().splitlines()
    assert lines[-1].startswith("error: "), proc.stderr[-2000:]
    assert message in lines[-1]
    assert "Traceback" not in proc.stderr
    assert not out.exists()


@pytest.mark.slow  # 46-49 s: a fine-tuning run and two full predictions.
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
    want = classifier.run(
        settings(do_train=True, do_eval=True, do_predict=True)
    )
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
    exported = predictor.TFLiteBackend(
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


def test_outputs_are_found_by_name(tiny_config_dict):
    """A span labeler's start and end logits have one shape: the TF Lite
    model's outputs are matched to them by tensor name (recorded by
    `convert`), and give the Keras model's numbers."""
    import tolerance

    from modeling import config as config_lib
    from modeling import models

    model = models.BertSpanLabeler(
        config_lib.BertConfig.from_dict(tiny_config_dict)
    )
    x = _features(3, 12, 1)
    want = model(x, training=False)
    content, names = tflite.convert(model)
    assert sorted(names) == ["end_logits", "start_logits"]
    got = predictor.TFLiteBackend(content, names)(x)
    for name in names:
        tolerance.assert_float32_close(got[name], want[name], err_msg=name)
    # The other way round is not the model: the test could tell.
    swapped = dict(zip(names, reversed(names.values())))
    got = predictor.TFLiteBackend(content, swapped)(x)
    assert not np.allclose(got["start_logits"], want["start_logits"])
    with pytest.raises(ValueError, match="has no output tensor nope"):
        predictor.TFLiteBackend(content, {"start_logits": "nope"})


def test_int8_quantizes_the_weights(tiny_config_dict):
    """--precision=int8 converts with dynamic-range int8 weights (the slow
    test above checks its labels on a fine-tuned model): the file is under
    half of float32's, and its logits are float32's within int8's rounding
    but not float32's own (a conversion left in float32 would be)."""
    from modeling import config as config_lib
    from modeling import models

    # Matrices of 4,096+ values: dynamic-range quantization passes over
    # tensors under 1,024.
    config = dict(tiny_config_dict, hidden_size=64, intermediate_size=256)
    tf.keras.utils.set_random_seed(0)
    model = models.BertClassifier(config_lib.BertConfig.from_dict(config), 3)
    x = _features(4, 12, 2)
    runs = {}
    for quantize in (False, True):
        content, names = tflite.convert(model, quantize=quantize)
        runs[quantize] = (
            len(content),
            predictor.TFLiteBackend(content, names)(x)["logits"],
        )
    (float_size, float_logits), (int8_size, int8_logits) = (
        runs[False],
        runs[True],
    )
    assert int8_size < 0.5 * float_size
    difference = np.abs(int8_logits - float_logits).max()
    scale = np.abs(float_logits).max()
    # int8 rounding, 1-2% of the largest logit here (3 random models);
    # 10% bounds a broken quantization.
    assert 1e-5 * scale < difference < 0.1 * scale
