"""notebooks/keras_text_classification.ipynb, run top to bottom on a CPU.

papermill (tests/notebooks.py) runs it from the converted MiniLM checkpoint:
2 epochs of 2 steps of batch 8 on a slice of ../shared/data/glue/MRPC (the
repository's tiny MRPC files when ../shared is absent). The tests check
what it wrote: the metrics, the curves, the predictions, the .keras file,
the original-format checkpoint and the serving SavedModel, each read back
here.
"""

import json

import numpy as np
import pytest
import tensorflow as tf
import tolerance

import notebooks

KERAS_NOTEBOOK = notebooks.NOTEBOOKS / "keras_text_classification.ipynb"
EPOCHS = 2
STEPS_PER_EPOCH = 2
NEW_EXAMPLES = [
    ("He said the food was good.", "The food was good, he said."),
    ("The cat sat on the mat.", "Stock markets fell sharply on Monday."),
    ("A man is playing a guitar.", "Nobody plays anything."),
]

pytestmark = (
    pytest.mark.slow
)  # 57-83 s on the 2-core machine (docs/notebooks.md).


@pytest.fixture(scope="module")
def keras_run(tmp_path_factory, minilm_ckpt, optional_shared_dir):
    """The notebook, run once: (executed notebook, output_dir, data_dir)."""
    work = tmp_path_factory.mktemp("keras_notebook")
    data_dir = notebooks.mrpc_slice(work / "mrpc", optional_shared_dir)
    output_dir = work / "output"
    nb = notebooks.run_notebook(
        KERAS_NOTEBOOK,
        {
            "bert_model_dir": str(minilm_ckpt),
            "task_name": "MRPC",
            "data_dir": str(data_dir),
            "output_dir": str(output_dir),
            "max_seq_length": 64,
            "batch_size": 8,
            "eval_batch_size": 8,
            "learning_rate": 1e-4,
            "epochs": EPOCHS,
            "steps_per_epoch": STEPS_PER_EPOCH,
            "random_seed": 1,
            # papermill writes lists, not tuples.
            "new_examples": [list(pair) for pair in NEW_EXAMPLES],
            "install_package": False,
        },
        cwd=work,
    )
    return nb, output_dir, data_dir


def _rows(path):
    with open(path, encoding="utf-8") as f:
        return sum(1 for _ in f) - 1  # Minus the header.


def test_metrics_and_curves(keras_run):
    nb, output_dir, data_dir = keras_run
    results = json.loads((output_dir / "metrics.json").read_text())
    assert results["steps"] == EPOCHS * STEPS_PER_EPOCH
    history = results["history"]
    assert sorted(history) == ["accuracy", "loss", "val_accuracy", "val_loss"]
    assert all(len(values) == EPOCHS for values in history.values())
    keras_metrics, task = results["keras"], results["task"]
    assert sorted(task) == ["eval_accuracy", "eval_f1", "eval_loss", "loss"]
    # Keras's accuracy and loss and run_classifier's metrics code, on the
    # same dev logits: every dev example scored once.
    num_dev = _rows(data_dir / "dev.tsv")
    accuracy = keras_metrics["accuracy"]
    assert accuracy * num_dev == pytest.approx(round(accuracy * num_dev))
    assert task["eval_accuracy"] == pytest.approx(accuracy, abs=1e-6)
    tolerance.assert_float32_close(keras_metrics["loss"], task["eval_loss"])
    # The last epoch's validation is the same model on the same dev set.
    tolerance.assert_float32_close(history["val_loss"][-1], task["eval_loss"])
    png = (output_dir / "training_curves.png").read_bytes()
    assert png.startswith(b"\x89PNG\r\n\x1a\n") and len(png) > 5000
    shown = [
        output
        for cell in notebooks.code_cells(nb)
        for output in cell.get("outputs", [])
        if "image/png" in output.get("data", {})
    ]
    assert len(shown) == 1  # The curves, shown as well as saved.


def _probabilities(output_dir):
    return np.loadtxt(output_dir / "predictions.tsv", delimiter="\t", ndmin=2)


def test_predictions_of_new_sentences(keras_run):
    nb, output_dir, _ = keras_run
    probabilities = _probabilities(output_dir)
    assert probabilities.shape == (len(NEW_EXAMPLES), 2)
    np.testing.assert_allclose(probabilities.sum(-1), 1.0, atol=1e-6)
    text = notebooks.output_text(nb)
    assert f"predictions: ({len(NEW_EXAMPLES)}, 2)" in text
    assert NEW_EXAMPLES[1][1] in text


def test_the_keras_file_loads_and_predicts_the_same(keras_run):
    import keras

    from modeling import text_classifier

    _, output_dir, _ = keras_run
    model = keras.models.load_model(output_dir / "model.keras")
    assert isinstance(model, text_classifier.BertTextClassifier)
    assert int(model.optimizer.iterations.numpy()) == EPOCHS * STEPS_PER_EPOCH
    texts = tuple(np.array(part) for part in zip(*NEW_EXAMPLES))
    logits = model.predict(texts, verbose=0)
    tolerance.assert_float32_close(
        tf.nn.softmax(logits).numpy(), _probabilities(output_dir), scale=1.0
    )


def test_the_original_format_checkpoint(keras_run, minilm_ckpt):
    from modeling import checkpoints
    from modeling import config as config_lib
    from modeling.text import vocabulary

    nb, output_dir, _ = keras_run
    folder = output_dir / "checkpoint"
    # The command it prints reads the folder with the model's casing (the
    # flag's default, True, would lower-case a cased model's input).
    assert "--do_lower_case=True --output_dir=" in notebooks.output_text(nb)
    steps = EPOCHS * STEPS_PER_EPOCH
    prefix = checkpoints.resolve_checkpoint(folder)
    assert prefix == str(folder / f"model.ckpt-{steps}")
    shapes = checkpoints.checkpoint_shapes(prefix)
    init = checkpoints.checkpoint_shapes(minilm_ckpt)
    assert {n: shapes[n] for n in init} == init
    hidden = init["bert/pooler/dense/kernel"][0]
    assert shapes["output_weights"] == (2, hidden)
    assert shapes["output_weights/adam_m"] == (2, hidden)
    assert shapes["bert/pooler/dense/kernel/adam_v"] == (hidden, hidden)
    assert tf.train.load_checkpoint(prefix).get_tensor("global_step") == steps
    # With the config and vocabulary, the folder is a checkpoint folder.
    want = config_lib.BertConfig.from_json_file(
        minilm_ckpt / "bert_config.json"
    )
    assert (
        config_lib.BertConfig.from_json_file(folder / "bert_config.json")
        == want
    )
    assert vocabulary.read_vocab_lines(folder / "vocab.txt") == (
        vocabulary.read_vocab_lines(minilm_ckpt / "vocab.txt")
    )


def test_the_serving_export_loads_and_serves_raw_text(keras_run):
    import tensorflow_text  # noqa: F401  (registers the tokenizer's ops)

    _, output_dir, _ = keras_run
    served = tf.saved_model.load(str(output_dir / "export"))
    a, b = (list(part) for part in zip(*NEW_EXAMPLES))
    out = served.signatures["serving_default"](
        text_a=tf.constant(a), text_b=tf.constant(b)
    )
    tolerance.assert_float32_close(
        out["probabilities"].numpy(), _probabilities(output_dir), scale=1.0
    )
