"""Parity of BertPretrainer / pretraining_losses with the original graph, and
BertClassifier behaviour."""

import keras
import numpy as np
import pytest
import tolerance

from modeling import checkpoints
from modeling import config as config_lib
from modeling import losses as losses_lib
from modeling import models
from modeling.data import feature_names

FEATURES = feature_names.PRETRAINING_FEATURES
OUTPUTS = (
    "embedding_output",
    "sequence_output",
    "pooled_output",
    "masked_lm_log_probs",
    "masked_lm_example_loss",
    "masked_lm_loss",
    "next_sentence_log_probs",
    "next_sentence_loss",
    "total_loss",
)


@pytest.fixture
def golden(golden_dir):
    data = np.load(golden_dir / "tiny_outputs.npz")
    return {k: data[k] for k in data.files}


@pytest.fixture
def pretrainer(golden_dir):
    config = config_lib.BertConfig.from_json_file(
        str(golden_dir / "tiny_init" / "bert_config.json")
    )
    model = models.BertPretrainer(config)
    checkpoints.load_weights(model, golden_dir / "tiny_init")
    return model


def _run(model, golden, training=False):
    features = {k: golden[k] for k in FEATURES}
    outputs = model(features, training=training)
    outputs.update(losses_lib.pretraining_losses(outputs, features))
    return outputs


def test_every_output_matches_the_original(pretrainer, golden):
    outputs = _run(pretrainer, golden)
    # The golden outputs were computed by the original release on another
    # machine: other kernels, other float32 sums. Each output is held to
    # 1e-5 of the hidden states' magnitude (the values every output is
    # summed from), or of its own magnitude where that is larger (log probs).
    hidden = tolerance.magnitude(golden["sequence_output"])
    for name in OUTPUTS:
        got = np.asarray(outputs[name])
        assert got.shape == golden[name].shape, name
        scale = max(hidden, tolerance.magnitude(golden[name]))
        tolerance.assert_float32_close(
            got, golden[name], scale=scale, err_msg=name
        )
    layers = np.stack([np.asarray(x) for x in outputs["all_encoder_layers"]])
    tolerance.assert_float32_close(layers, golden["all_encoder_layers"])
    assert outputs["total_loss"].dtype == "float32"


def test_dropout_only_when_training(pretrainer, golden):
    eval_a = _run(pretrainer, golden)["total_loss"]
    eval_b = _run(pretrainer, golden)["total_loss"]
    assert float(eval_a) == float(eval_b)
    # Dropout (0.1 in tiny_init's config) zeroes about a tenth of the hidden
    # units: every token's vector moves by far more than float rounding.
    # (The total loss is an average whose change can be as small as 1e-4.)
    eval_out = np.asarray(_run(pretrainer, golden)["sequence_output"])
    train_out = np.asarray(
        _run(pretrainer, golden, training=True)["sequence_output"]
    )
    assert np.abs(train_out - eval_out).max() > 1e-2


def test_mixed_bfloat16_is_close_and_losses_float32(golden_dir, golden):
    keras.mixed_precision.set_dtype_policy("mixed_bfloat16")
    try:
        config = config_lib.BertConfig.from_json_file(
            str(golden_dir / "tiny_init" / "bert_config.json")
        )
        model = models.BertPretrainer(config)
        checkpoints.load_weights(model, golden_dir / "tiny_init")
        outputs = _run(model, golden)
    finally:
        keras.mixed_precision.set_dtype_policy("float32")
    assert model.bert.embeddings.word_embeddings.dtype == "float32"
    assert outputs["sequence_output"].dtype == "bfloat16"
    for name in ("masked_lm_log_probs", "total_loss", "masked_lm_loss"):
        assert outputs[name].dtype == "float32", name
    np.testing.assert_allclose(
        np.asarray(outputs["total_loss"]), golden["total_loss"], rtol=2e-2
    )


def test_mlm_loss_denominator_and_empty_batch():
    log_probs = np.log(np.full([4, 5], 0.2, np.float32))
    outputs = {
        "masked_lm_log_probs": log_probs,
        "next_sentence_log_probs": np.log(np.full([2, 2], 0.5, np.float32)),
    }
    features = {
        "masked_lm_ids": np.array([[1, 2], [3, 0]]),
        "masked_lm_weights": np.array([[1.0, 1.0], [1.0, 0.0]], np.float32),
        "next_sentence_labels": np.array([[0], [1]]),
    }
    losses = losses_lib.pretraining_losses(outputs, features)
    nll = -np.log(0.2)
    # float32 TF against float64 numpy, a handful of operations: a few
    # float32 ulps (rtol 1e-6), tight enough to see the 1e-5 in the
    # denominator (3.3e-6 of the loss). numpy's default rtol 1e-7 was
    # below one float32 ulp (up to 1.2e-7).
    np.testing.assert_allclose(
        losses["masked_lm_loss"], 3 * nll / (3 + 1e-5), rtol=1e-6
    )
    np.testing.assert_allclose(
        losses["next_sentence_loss"], np.log(2.0), rtol=1e-6
    )
    features["masked_lm_weights"] = np.zeros([2, 2], np.float32)
    losses = losses_lib.pretraining_losses(outputs, features)
    assert float(losses["masked_lm_loss"]) == 0.0


def test_classifier_head_names_and_logits(tiny_config_dict):
    config = config_lib.BertConfig.from_dict(tiny_config_dict)
    model = models.BertClassifier(config, num_labels=3)
    names = [checkpoints.variable_name(v) for v in model.weights]
    assert "output_weights" in names and "output_bias" in names
    assert [n for n in names if not n.startswith("bert/")] == [
        "output_weights",
        "output_bias",
    ]
    assert tuple(model.classifier.output_weights.shape) == (3, 32)
    ids = np.array([[2, 5, 7, 0], [3, 4, 0, 0]], np.int32)
    features = {
        "input_ids": ids,
        "input_mask": (ids > 0).astype(np.int32),
        "segment_ids": np.zeros_like(ids),
        "label_ids": np.array([0, 2]),
    }
    logits = model(features)
    assert logits.shape == (2, 3) and logits.dtype == "float32"
    pooled = model.bert(features)["pooled_output"]
    expected = np.asarray(pooled) @ model.classifier.output_weights.numpy().T
    np.testing.assert_allclose(logits, expected, atol=1e-6)
    # Dropout 0.1 on the pooled output when training, whatever the config.
    assert model.classifier.dropout.rate == 0.1


def test_classifier_rejects_bad_num_labels(tiny_config_dict):
    config = config_lib.BertConfig.from_dict(tiny_config_dict)
    with pytest.raises(ValueError, match="num_labels must be positive"):
        models.BertClassifier(config, num_labels=0)


def test_span_labeler_names_logits_and_loss(tiny_config_dict):
    config = config_lib.BertConfig.from_dict(tiny_config_dict)
    model = models.BertSpanLabeler(config)
    names = {
        checkpoints.variable_name(v): tuple(v.shape) for v in model.weights
    }
    assert names["cls/squad/output_weights"] == (2, 32)
    assert names["cls/squad/output_bias"] == (2,)
    assert [n for n in names if not n.startswith("bert/")] == [
        "cls/squad/output_weights",
        "cls/squad/output_bias",
    ]
    ids = np.array([[2, 5, 7, 0], [3, 4, 0, 0]], np.int32)
    outputs = model({"input_ids": ids, "input_mask": (ids > 0).astype(int)})
    assert outputs["start_logits"].shape == (2, 4)
    sequence = np.asarray(
        model.bert({"input_ids": ids, "input_mask": ids > 0})["sequence_output"]
    )
    weights = model.cls.squad.output_weights.numpy()
    np.testing.assert_allclose(
        outputs["end_logits"], sequence @ weights[1], atol=1e-6
    )
    start = np.log(np.array([[0.7, 0.1, 0.1, 0.1]], np.float32))
    end = np.log(np.array([[0.25, 0.25, 0.25, 0.25]], np.float32))
    loss = losses_lib.span_loss(start, end, np.array([0]), np.array([[3]]))
    np.testing.assert_allclose(
        loss, (-np.log(0.7) - np.log(0.25)) / 2, rtol=1e-6
    )


def test_task_heads_under_mixed_bfloat16(tiny_config_dict):
    config = config_lib.BertConfig.from_dict(tiny_config_dict)
    ids = np.array([[2, 5, 7, 0], [3, 4, 0, 0]], np.int32)
    features = {"input_ids": ids, "input_mask": (ids > 0).astype(np.int32)}
    keras.mixed_precision.set_dtype_policy("mixed_bfloat16")
    try:
        classifier = models.BertClassifier(config, num_labels=3)
        span = models.BertSpanLabeler(config)
    finally:
        keras.mixed_precision.set_dtype_policy("float32")
    logits = classifier(features, training=True)
    assert logits.dtype == "float32" and logits.shape == (2, 3)
    outputs = span(features)
    assert outputs["start_logits"].dtype == "float32"
    assert classifier.classifier.output_bias.dtype == "float32"
