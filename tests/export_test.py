"""Tests for modeling.export.classifier (and base): the serving SavedModel on raw text.

The SavedModel is loaded in a fresh process that imports only TensorFlow and
tensorflow-text (not this package), and must give the numbers of the Python
path: FullTokenizer + convert_single_example + the Keras model.
"""

import json
import pathlib

import numpy as np
import pytest
import script_runner
import tensorflow as tf

from modeling import checkpoints
from modeling import config as config_lib
from modeling import convert
from modeling import models
from modeling import task_kinds
from modeling.data import classifier_data
from modeling.export import classifier as classifier_export
from modeling.text import in_graph
from modeling.text import tokenization

SEQ = 24
TEXTS = [
    "The sailors rode the breeze clear of the rocks.",
    "Crème brûlée, naïve café: ACCENTS and CAPITALS!",
    "中文字符 mixed with English words",
    "a very long sentence " * 12,  # Cut to SEQ - 2 tokens.
]

_LOADER = """
import json, sys
import tensorflow as tf
import tensorflow_text  # noqa: F401  (registers the tokenizer ops)
loaded = tf.saved_model.load(sys.argv[1])
texts = json.loads(sys.argv[2])
out = loaded.signatures["serving_default"](text_a=tf.constant(texts))
features = {k: out[k] for k in ("input_ids", "input_mask", "segment_ids")}
again = loaded.signatures["serving_features"](**features)
out["features_logits"] = again["logits"]
print(json.dumps({k: v.numpy().tolist() for k, v in out.items()}))
"""


@pytest.fixture(scope="module")
def classifier(tmp_path_factory, minilm_dir):
    """A BertClassifier with the real minilm encoder and a seeded head."""
    ckpt_dir = tmp_path_factory.mktemp("minilm_original")
    convert.hf_to_original(minilm_dir, ckpt_dir)
    config = config_lib.BertConfig.from_json_file(ckpt_dir / "bert_config.json")
    tf.keras.utils.set_random_seed(3)
    model = models.BertClassifier(config, num_labels=3)
    checkpoints.load_weights(
        model, ckpt_dir, ignore_missing=("^output_weights$", "^output_bias$")
    )
    return model, str(ckpt_dir / "vocab.txt")


def _python_path(model, vocab_file, texts, label_list):
    tokenizer = tokenization.FullTokenizer(vocab_file, do_lower_case=True)
    features = [
        classifier_data.convert_single_example(
            i,
            classifier_data.InputExample(str(i), text, label=label_list[0]),
            label_list,
            SEQ,
            tokenizer,
        )
        for i, text in enumerate(texts)
    ]
    batch = {
        name: tf.constant([getattr(f, name) for f in features])
        for name in ("input_ids", "input_mask", "segment_ids")
    }
    return batch, model(batch, training=False).numpy()


@pytest.mark.slow  # run_classifier_test checks a pair-task export by default.
def test_saved_model_in_fresh_process_matches_python_path(classifier, tmp_path):
    model, vocab_file = classifier
    labels = ["a", "b", "c"]
    export_dir = str(tmp_path / "export")
    classifier_export.export_classifier(
        model,
        in_graph.TextPreprocessor(vocab_file, True, SEQ),
        export_dir,
        kind=task_kinds.get("classification"),
        has_text_b=False,
        label_list=labels,
        max_seq_length=SEQ,
    )
    assert not [p for p in tmp_path.iterdir() if ".tmp" in p.name]
    info = json.loads(
        (
            pathlib.Path(export_dir) / "assets.extra" / "bert_export.json"
        ).read_text()
    )
    assert info["labels"] == labels and info["has_text_b"] is False
    proc = script_runner.python(
        ["-c", _LOADER, export_dir, json.dumps(TEXTS)],
        timeout=600,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    served = json.loads(proc.stdout.strip().splitlines()[-1])
    batch, logits = _python_path(model, vocab_file, TEXTS, labels)
    np.testing.assert_array_equal(served["input_ids"], batch["input_ids"])
    np.testing.assert_array_equal(served["input_mask"], batch["input_mask"])
    np.testing.assert_array_equal(served["segment_ids"], batch["segment_ids"])
    assert served["input_mask"][3] == [1] * SEQ  # The long text was cut.
    np.testing.assert_allclose(served["logits"], logits, atol=1e-5)
    np.testing.assert_allclose(served["features_logits"], logits, atol=1e-5)
    np.testing.assert_allclose(
        served["probabilities"], tf.nn.softmax(logits).numpy(), atol=1e-6
    )


def test_features_signature_and_regression_outputs(tiny_config_dict):
    config = config_lib.BertConfig.from_dict(tiny_config_dict)
    tf.keras.utils.set_random_seed(4)
    model = models.BertClassifier(config, num_labels=1)
    batch = {
        "input_ids": tf.constant([[5, 7, 9, 0], [1, 2, 3, 4]]),
        "input_mask": tf.constant([[1, 1, 1, 0], [1, 1, 1, 1]]),
        "segment_ids": tf.constant([[0, 0, 1, 0], [0, 1, 1, 1]]),
    }
    logits = model(batch, training=False).numpy()
    server = classifier_export.ClassifierServer(
        model,
        preprocessor=None,
        kind=task_kinds.get("regression"),
        has_text_b=True,
    )
    names = ("input_ids", "input_mask", "segment_ids")
    out = server.serve_features(*(batch[n] for n in names))
    assert sorted(out) == ["score"]
    np.testing.assert_allclose(out["score"], logits[:, 0], atol=1e-6)
    model = models.BertClassifier(config, num_labels=3)
    logits = model(batch, training=False).numpy()
    server = classifier_export.ClassifierServer(
        model, None, task_kinds.get("classification"), True
    )
    out = server.serve_features(*(batch[n] for n in names))
    assert sorted(out) == ["logits", "predictions", "probabilities"]
    np.testing.assert_array_equal(out["predictions"], np.argmax(logits, -1))
    np.testing.assert_allclose(
        out["probabilities"], tf.nn.softmax(logits).numpy(), atol=1e-6
    )


def test_a_mixed_precision_model_is_served_in_float32(tiny_config_dict):
    # Exported as trained, a mixed_bfloat16 run's SavedModel computed in
    # bfloat16: logits 1.7% off the float32 checkpoint's.
    import keras
    import tolerance

    config = config_lib.BertConfig.from_dict(tiny_config_dict)
    keras.utils.set_random_seed(4)
    keras.config.set_dtype_policy("mixed_bfloat16")
    try:
        mixed = models.BertClassifier(config, num_labels=3)
    finally:
        keras.config.set_dtype_policy("float32")
    exact = models.BertClassifier(config, num_labels=3)
    exact.set_weights(mixed.get_weights())
    rng = np.random.default_rng(0)
    batch = {
        "input_ids": rng.integers(0, config.vocab_size, [4, 16], "int32"),
        "input_mask": np.ones([4, 16], "int32"),
        "segment_ids": (np.arange(16) >= 8).astype("int32")[None].repeat(4, 0),
    }
    want = exact(batch, training=False).numpy()
    server = classifier_export.ClassifierServer(
        mixed, None, task_kinds.get("classification"), True
    )
    assert mixed.compute_dtype == "bfloat16"
    out = server.serve_features(*(batch[n] for n in batch))
    # The pooled output is a tanh: the logits' inputs have unit scale.
    tolerance.assert_float32_close(out["logits"], want, scale=1.0)


def test_serving_signatures_trace_without_autograph(
    tiny_config_dict, tmp_path, autograph_conversions
):
    """The exports' functions are traced as written: AutoGraph's conversion
    of the model and tokenizer code was about a sixth of an export's time."""
    vocab = tmp_path / "vocab.txt"
    vocab.write_text("\n".join(["[PAD]", "[UNK]", "[CLS]", "[SEP]", "a", "b"]))
    config = config_lib.BertConfig.from_dict(tiny_config_dict)
    model = models.BertClassifier(config, num_labels=2)
    preprocessor = in_graph.TextPreprocessor(str(vocab), True, 8)
    server = classifier_export.ClassifierServer(
        model, preprocessor, task_kinds.get("classification"), True
    )
    serve = server.signatures()["serving_default"]
    out = serve(text_a=tf.constant(["a b"]), text_b=tf.constant(["b"]))
    np.testing.assert_array_equal(out["input_ids"], [[2, 4, 5, 3, 5, 3]])
    assert autograph_conversions == []
