"""run_classifier_with_tfhub.py: fine-tuning an encoder SavedModel gives
run_classifier.py's results.

The converted MiniLM checkpoint (its first 2 layers: conftest.minilm_small_ckpt)
is exported with export_hub's library
(modeling/export/encoder.py); run_classifier.py's task fine-tunes the checkpoint
in process and run_classifier_with_tfhub.py (a subprocess, as a user runs
it) fine-tunes the export, with the same seed and settings, on the MRPC test
data: 16 examples, batch 4, one epoch = 4 steps.

Both runs use a BertConfig with dropout 0 (the export is made from it).
Dropout inside a SavedModel draws from the SavedModel's own random state,
which cannot follow the Python model's, so with dropout the two runs would
differ by their masks and nothing else; export_hub_test checks that the
export does apply dropout when called with training=True. The classifier
head's dropout is the same Python layer in both runs and stays on.
"""

import filecmp
import json
import pathlib
import sys

import numpy as np
import pytest
import script_runner
import tensorflow as tf
import tolerance

from modeling import errors
from modeling import saved_encoder
from modeling.export import encoder as encoder_export
from modeling.tasks import classifier as classifier_lib

REPO = pathlib.Path(__file__).resolve().parents[1]
TESTDATA = REPO / "tests" / "testdata"
SEQ = 32
# The flags both runs share (run_classifier's names).
COMMON = {
    "task_name": "MRPC",
    "data_dir": str(TESTDATA / "cls_mrpc"),
    "do_train": True,
    "do_eval": True,
    "do_predict": True,
    "max_seq_length": SEQ,
    "train_batch_size": 4,
    "num_train_epochs": 1.0,
    "learning_rate": 1e-4,
    "random_seed": 1,
}


@pytest.fixture(scope="module")
def no_dropout(minilm_small_ckpt, tmp_path_factory):
    """(bert_config.json with dropout 0, the encoder exported from it)."""
    folder = tmp_path_factory.mktemp("hub_minilm")
    config = json.loads((minilm_small_ckpt / "bert_config.json").read_text())
    config.update(hidden_dropout_prob=0.0, attention_probs_dropout_prob=0.0)
    config_file = folder / "bert_config.json"
    config_file.write_text(json.dumps(config))
    encoder = folder / "encoder"
    encoder_export.export(
        str(encoder),
        "encoder",
        str(minilm_small_ckpt / "vocab.txt"),
        True,
        bert_config_file=str(config_file),
        init_checkpoint=str(minilm_small_ckpt),
    )
    return config_file, encoder


@pytest.fixture(scope="module")
def runs(minilm_small_ckpt, no_dropout, tmp_path_factory):
    """(run_classifier's output_dir, run_classifier_with_tfhub's)."""
    config_file, encoder = no_dropout
    reference = tmp_path_factory.mktemp("reference")
    settings = classifier_lib.Settings(
        bert_config_file=str(config_file),
        init_checkpoint=str(minilm_small_ckpt / "bert_model.ckpt"),
        vocab_file=str(minilm_small_ckpt / "vocab.txt"),
        output_dir=str(reference),
        **{k: v for k, v in COMMON.items() if k != "learning_rate"},
    )
    settings.run_config.learning_rate = COMMON["learning_rate"]
    classifier_lib.run(settings)
    with_hub = tmp_path_factory.mktemp("with_hub")
    flags = [f"--{k}={v}" for k, v in COMMON.items()]
    script_runner.run_script(
        "run_classifier_with_tfhub.py",
        [
            f"--bert_hub_module_handle={encoder}",
            f"--output_dir={with_hub}",
            f"--export_dir={with_hub.with_name(with_hub.name + '_export')}",
            *flags,
        ],
    )
    return reference, with_hub


def _eval_results(path):
    pairs = (line.split(" = ") for line in path.read_text().splitlines())
    return {key: float(value) for key, value in pairs}


def _probabilities(path):
    rows = path.read_text().splitlines()
    return np.array([[float(v) for v in row.split("\t")] for row in rows])


def test_same_records(runs):
    # The tokenization comes from the SavedModel's vocab_file asset and
    # do_lower_case variable.
    reference, with_hub = runs
    for name in ("train", "eval", "predict"):
        assert filecmp.cmp(
            reference / f"{name}.tf_record",
            with_hub / f"{name}.tf_record",
            shallow=False,
        ), name


def test_serving_export(runs):
    # run_classifier's --export_dir, on the SavedModel encoder.
    _, with_hub = runs
    export = with_hub.with_name(with_hub.name + "_export")
    info = json.loads(
        (export / "assets.extra" / "bert_export.json").read_text()
    )
    assert info["labels"] == ["0", "1"] and info["max_seq_length"] == SEQ
    assert (export / "saved_model.pb").exists()


def test_same_eval_metrics(runs):
    reference, with_hub = runs
    want = _eval_results(reference / "eval_results.txt")
    got = _eval_results(with_hub / "eval_results.txt")
    assert (
        sorted(got)
        == sorted(want)
        == [
            "eval_accuracy",
            "eval_f1",
            "eval_loss",
            "global_step",
            "loss",
        ]
    )
    for key in ("global_step", "eval_accuracy", "eval_f1"):
        assert got[key] == want[key], key
    for key in ("eval_loss", "loss"):
        tolerance.assert_float32_close(got[key], want[key], err_msg=key)


def test_same_predictions(runs):
    reference, with_hub = runs
    got = _probabilities(with_hub / "test_results.tsv")
    want = _probabilities(reference / "test_results.tsv")
    assert got.shape == want.shape == (5, 2)
    tolerance.assert_float32_close(got, want, scale=1.0)


def test_same_checkpoint_names_and_weights(runs):
    """The fine-tuned encoder keeps the original names (an export of this
    repository saves them), so the checkpoint is run_classifier's: the same
    variables, slots and step, the same values after 4 updates."""
    reference, with_hub = runs
    want = tf.train.load_checkpoint(str(reference / "model.ckpt-4"))
    got = tf.train.load_checkpoint(str(with_hub / "model.ckpt-4"))
    shapes = want.get_variable_to_shape_map()
    assert got.get_variable_to_shape_map() == shapes
    assert "output_weights" in shapes and "output_weights/adam_m" in shapes
    assert "bert/encoder/layer_1/output/dense/kernel/adam_v" in shapes
    for name in sorted(shapes):
        # Adam's first updates move a weight by about the learning rate
        # whatever its gradient's size: a rounding difference in a tiny
        # gradient moves the weight by up to that much.
        tolerance.assert_float32_close(
            got.get_tensor(name),
            want.get_tensor(name),
            scale=max(tolerance.magnitude(want.get_tensor(name)), 1.0),
            err_msg=name,
        )


# === Handles that are not an encoder SavedModel ===


def _hub_settings(handle, tmp_path):
    values = {k: v for k, v in COMMON.items() if k != "learning_rate"}
    return classifier_lib.HubSettings(
        bert_hub_module_handle=str(handle),
        output_dir=str(tmp_path / "out"),
        **values,
    )


def test_a_url_needs_tensorflow_hub_or_a_download(tmp_path, monkeypatch):
    monkeypatch.setitem(sys.modules, "tensorflow_hub", None)
    url = "https://tfhub.dev/tensorflow/bert_en_uncased_L-12_H-768_A-12/4"
    with pytest.raises(errors.UserError, match="download the SavedModel"):
        classifier_lib.prepare(_hub_settings(url, tmp_path))


def test_a_tf1_hub_module_is_named(tmp_path):
    module = tmp_path / "bert_uncased_L-12_H-768_A-12_1"
    module.mkdir()
    (module / "tfhub_module.pb").write_bytes(b"")
    (module / "saved_model.pb").write_bytes(b"")
    with pytest.raises(errors.UserError, match="TF1 Hub module"):
        saved_encoder.load_encoder(module)


def test_no_saved_model(tmp_path):
    with pytest.raises(errors.UserError, match="No SavedModel at"):
        classifier_lib.prepare(_hub_settings(tmp_path, tmp_path))


def test_the_checkpoint_flags_are_accepted_with_a_warning(tmp_path):
    """They come from the SavedModel. The original accepted them (and
    ignored them silently): a command line copied from run_classifier.py
    runs, with a warning for each, and the module's values are used."""
    proc = script_runner.python(
        [
            str(REPO / "run_classifier_with_tfhub.py"),
            "--task_name=MRPC",
            f"--data_dir={TESTDATA / 'cls_mrpc'}",
            f"--bert_hub_module_handle={tmp_path}",
            f"--output_dir={tmp_path / 'out'}",
            "--vocab_file=vocab.txt",
            "--do_lower_case=False",
            "--do_train",
        ],
        timeout=300,
    )
    assert proc.returncode == 1
    for name in ("vocab_file", "do_lower_case"):
        assert f"--{name} has no effect here: the model" in proc.stderr
    # The module was looked for (the flags' values were not used).
    assert (
        proc.stderr.strip()
        .splitlines()[-1]
        .startswith("error: No SavedModel at")
    )


def test_evaluation_without_training_uses_the_module(
    no_dropout, tmp_path, caplog
):
    """--do_eval with no checkpoint in --output_dir evaluates the module's
    encoder with a new head, as the original's Estimator initialized from
    the module (it was refused, advising --init_checkpoint, which this
    script ignores)."""
    _, encoder = no_dropout
    values = {k: v for k, v in COMMON.items() if k != "learning_rate"}
    values.update(do_train=False, do_predict=False)
    settings = classifier_lib.HubSettings(
        bert_hub_module_handle=str(encoder),
        output_dir=str(tmp_path / "out"),
        **values,
    )
    results = classifier_lib.run(settings)
    assert 0.0 <= results["eval_accuracy"] <= 1.0
    assert results["global_step"] == 0
    assert f"using {encoder}, whose classifier head is untrained" in caplog.text


def test_an_export_root_points_to_its_encoder(no_dropout, tmp_path):
    _, encoder = no_dropout
    root = tmp_path / "both"
    root.mkdir()
    (root / "encoder").symlink_to(encoder)
    with pytest.raises(
        errors.UserError, match="wrote the encoder to .*encoder"
    ):
        saved_encoder.load_encoder(root)
