"""run_classifier.py end to end on tiny GLUE data from a real converted model
(MiniLM's first 2 layers: conftest.minilm_small_ckpt).

One MRPC run of the script (a subprocess, as a user runs it: train -> eval
during training -> eval -> predict -> GLUE submission -> export) is checked
file by file against an independent recomputation from its checkpoint; an
STS-B run checks the regression path and resuming; bad settings and data give
their errors.
"""

import dataclasses
import json
import os
import pathlib
import shutil

import metrics_test
import numpy as np
import pytest
import script_runner
import tensorflow as tf
import tolerance

from modeling import checkpoints
from modeling import config as config_lib
from modeling import models
from modeling import task_kinds
from modeling.data import classifier_data
from modeling.data import glue
from modeling.data import input_pipeline
from modeling.tasks import classifier as classifier_lib
from modeling.tasks import metrics

REPO = pathlib.Path(__file__).resolve().parents[1]
TESTDATA = REPO / "tests" / "testdata"
SEQ = 32


def _settings(minilm_small_ckpt, output_dir, **kwargs):
    values = {
        "data_dir": str(TESTDATA / "cls_mrpc"),
        "bert_config_file": str(minilm_small_ckpt / "bert_config.json"),
        "task_name": "MRPC",
        "vocab_file": str(minilm_small_ckpt / "vocab.txt"),
        "output_dir": str(output_dir),
        "init_checkpoint": str(minilm_small_ckpt / "bert_model.ckpt"),
        "max_seq_length": SEQ,
    }
    values.update(kwargs)
    return classifier_lib.Settings(**values)


@pytest.fixture(scope="module")
def mrpc_run(tmp_path_factory, minilm_small_ckpt):
    """Runs the script once: 16 train examples / batch 4 * 1 epoch = 4 steps."""
    out = tmp_path_factory.mktemp("mrpc_run")
    args = [
        "--task_name=MRPC",
        f"--data_dir={TESTDATA / 'cls_mrpc'}",
        f"--vocab_file={minilm_small_ckpt / 'vocab.txt'}",
        f"--bert_config_file={minilm_small_ckpt / 'bert_config.json'}",
        f"--init_checkpoint={minilm_small_ckpt / 'bert_model.ckpt'}",
        f"--output_dir={out}",
        "--do_train",
        "--do_eval",
        "--do_predict",
        f"--max_seq_length={SEQ}",
        "--train_batch_size=4",
        "--num_train_epochs=1",
        "--learning_rate=1e-4",
        "--save_checkpoints_steps=2",
        "--iterations_per_loop=2",
        "--eval_during_training",
        f"--glue_submission_dir={out / 'glue'}",
        f"--export_dir={out.with_name(out.name + '_export')}",
        "--random_seed=1",
    ]
    script_runner.run_script("run_classifier.py", args)
    return out


def _records(path, label_dtype=tf.int64, seq=SEQ):
    spec = input_pipeline.classifier_feature_spec(seq, label_dtype)
    parsed = [
        input_pipeline.decode_record(r, spec)
        for r in tf.data.TFRecordDataset(str(path))
    ]
    return {k: np.stack([p[k].numpy() for p in parsed]) for k in spec}


def _logits(minilm_small_ckpt, prefix, features, num_labels=2):
    config = config_lib.BertConfig.from_json_file(
        minilm_small_ckpt / "bert_config.json"
    )
    model = models.BertClassifier(config, num_labels)
    checkpoints.load_weights(model, prefix)
    return model(features, training=False).numpy()


def _eval_results(path):
    out = {}
    for line in pathlib.Path(path).read_text().splitlines():
        key, value = line.split(" = ")
        out[key] = value
    return out


def test_records_are_the_converted_examples(mrpc_run, uncased_vocab_file):
    from modeling.text import tokenization

    tokenizer = tokenization.FullTokenizer(uncased_vocab_file, True)
    processor = glue.get_processor("mrpc")
    data_dir = str(TESTDATA / "cls_mrpc")
    for name, examples in [
        ("train", processor.get_train_examples(data_dir)),
        ("eval", processor.get_dev_examples(data_dir)),
        ("predict", processor.get_test_examples(data_dir)),
    ]:
        got = _records(mrpc_run / f"{name}.tf_record")
        assert (
            len(got["input_ids"])
            == len(examples)
            == {
                "train": 16,
                "eval": 8,
                "predict": 5,
            }[name]
        )
        for i, example in enumerate(examples):
            want = classifier_data.convert_single_example(
                i, example, ["0", "1"], SEQ, tokenizer
            )
            assert got["input_ids"][i].tolist() == want.input_ids
            assert got["segment_ids"][i].tolist() == want.segment_ids
            assert got["label_ids"][i] == want.label_id
        assert got["is_real_example"].tolist() == [1] * len(examples)


def test_checkpoint_has_original_names(mrpc_run):
    prefix = checkpoints.resolve_checkpoint(mrpc_run)
    assert prefix.endswith("model.ckpt-4")
    shapes = tf.train.load_checkpoint(prefix).get_variable_to_shape_map()
    assert shapes["output_weights"] == [2, 384]
    assert shapes["output_bias"] == [2]
    assert shapes["output_weights/adam_m"] == [2, 384]
    assert shapes["bert/encoder/layer_1/output/LayerNorm/gamma"] == [384]
    assert int(tf.train.load_checkpoint(prefix).get_tensor("global_step")) == 4
    # keep_checkpoint_max 5: the step-2 checkpoint is still there.
    assert (mrpc_run / "model.ckpt-2.index").exists()


def test_eval_results_match_an_independent_evaluation(
    mrpc_run, minilm_small_ckpt
):
    results = _eval_results(mrpc_run / "eval_results.txt")
    assert sorted(results) == [
        "eval_accuracy",
        "eval_f1",
        "eval_loss",
        "global_step",
        "loss",
    ]
    assert results["global_step"] == "4"
    records = _records(mrpc_run / "eval.tf_record")
    logits = _logits(minilm_small_ckpt, str(mrpc_run / "model.ckpt-4"), records)
    labels = records["label_ids"]
    predictions = np.argmax(logits, -1)
    want_loss = np.mean(metrics_test._softmax_cross_entropy(logits, labels))
    assert float(results["eval_accuracy"]) == pytest.approx(
        np.mean(predictions == labels), abs=1e-6
    )
    assert float(results["eval_f1"]) == pytest.approx(
        metrics.f1(labels, predictions), abs=1e-6
    )
    assert float(results["eval_loss"]) == pytest.approx(want_loss, rel=1e-4)
    # One eval batch of 8: the Estimator's `loss` equals eval_loss.
    assert float(results["loss"]) == pytest.approx(want_loss, rel=1e-4)


def test_test_results_and_submission(mrpc_run, minilm_small_ckpt):
    lines = (mrpc_run / "test_results.tsv").read_text().splitlines()
    probs = np.array([[float(v) for v in line.split("\t")] for line in lines])
    assert probs.shape == (5, 2)
    np.testing.assert_allclose(probs.sum(-1), 1.0, atol=1e-6)
    records = _records(mrpc_run / "predict.tf_record")
    logits = _logits(minilm_small_ckpt, str(mrpc_run / "model.ckpt-4"), records)
    np.testing.assert_allclose(probs, tf.nn.softmax(logits).numpy(), atol=1e-5)
    submission = (mrpc_run / "glue" / "MRPC.tsv").read_text().splitlines()
    assert submission[0] == "index\tprediction"
    want = [f"{i}\t{np.argmax(p)}" for i, p in enumerate(probs)]
    assert submission[1:] == want


def test_dynamic_padding_gives_the_padded_numbers(minilm_small_ckpt, tmp_path):
    """Training, eval and predict on batches cut to their longest sequence;
    the results equal the full-length computation from the checkpoint."""
    out = tmp_path / "dyn"
    settings = _settings(
        minilm_small_ckpt,
        out,
        do_train=True,
        do_eval=True,
        do_predict=True,
        train_batch_size=4,
        num_train_epochs=1.0,
        eval_batch_size=3,
        predict_batch_size=2,
        dynamic_padding=True,
        max_seq_length=96,
        random_seed=4,
    )
    results = classifier_lib.run(settings)
    assert results["global_step"] == 4
    records = _records(out / "eval.tf_record", seq=96)
    # The records are padded to 96 and the batches cut shorter.
    assert records["input_mask"].sum(-1).max() <= 96 - 8
    logits = _logits(minilm_small_ckpt, str(out / "model.ckpt-4"), records)
    labels = records["label_ids"]
    assert results["eval_accuracy"] == pytest.approx(
        np.mean(np.argmax(logits, -1) == labels), abs=1e-6
    )
    want_loss = np.mean(metrics_test._softmax_cross_entropy(logits, labels))
    assert results["eval_loss"] == pytest.approx(want_loss, rel=1e-5)
    lines = (out / "test_results.tsv").read_text().splitlines()
    probs = np.array([[float(v) for v in line.split("\t")] for line in lines])
    records = _records(out / "predict.tf_record", seq=96)
    logits = _logits(minilm_small_ckpt, str(out / "model.ckpt-4"), records)
    # Batches cut to their longest sequence against the full 96 positions:
    # other shapes, other float32 sums. Probabilities have unit scale
    # (as in test_test_results_and_submission's 1e-5).
    tolerance.assert_float32_close(
        probs, tf.nn.softmax(logits).numpy(), scale=1.0
    )


def test_best_checkpoint_and_history(mrpc_run):
    history = (mrpc_run / "eval_history.txt").read_text().splitlines()
    assert len(history) == 2
    assert "global_step = 2" in history[0]
    assert "global_step = 4" in history[1]
    best = _eval_results(mrpc_run / "best" / "eval_results.txt")
    f1s = [float(h.split("eval_f1 = ")[1].split()[0]) for h in history]
    assert float(best["eval_f1"]) == pytest.approx(max(f1s))
    step = best["global_step"]
    prefix = checkpoints.resolve_checkpoint(mrpc_run / "best")
    assert prefix.endswith(f"model.ckpt-{step}")
    shapes = tf.train.load_checkpoint(prefix).get_variable_to_shape_map()
    # The training checkpoint's variables without the optimizer slots.
    full = tf.train.load_checkpoint(str(mrpc_run / "model.ckpt-4"))
    want = {
        name: shape
        for name, shape in full.get_variable_to_shape_map().items()
        if not name.endswith(("/adam_m", "/adam_v"))
    }
    assert shapes == want and "output_weights" in shapes


_LOADER = """
import json, sys
import tensorflow as tf
import tensorflow_text  # noqa: F401  (registers the tokenizer ops)
loaded = tf.saved_model.load(sys.argv[1])
a, b = json.loads(sys.argv[2])
out = loaded.signatures["serving_default"](
    text_a=tf.constant(a), text_b=tf.constant(b))
print(json.dumps({k: v.numpy().tolist() for k, v in out.items()}))
"""


def test_export_serves_raw_text_like_test_results(mrpc_run):
    """The SavedModel, loaded in a fresh process that imports only TF and
    tensorflow-text, reproduces test_results.tsv from the raw test texts."""
    export = mrpc_run.with_name(mrpc_run.name + "_export")
    info = json.loads(
        (export / "assets.extra" / "bert_export.json").read_text()
    )
    assert info["labels"] == ["0", "1"] and info["max_seq_length"] == SEQ
    examples = glue.get_processor("mrpc").get_test_examples(
        str(TESTDATA / "cls_mrpc")
    )
    texts = [[e.text_a for e in examples], [e.text_b for e in examples]]
    proc = script_runner.python(
        [
            "-c",
            _LOADER,
            str(export),
            json.dumps(texts),
        ],
        timeout=600,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    served = json.loads(proc.stdout.strip().splitlines()[-1])
    lines = (mrpc_run / "test_results.tsv").read_text().splitlines()
    want = np.array([[float(v) for v in line.split("\t")] for line in lines])
    np.testing.assert_allclose(served["probabilities"], want, atol=1e-5)
    records = _records(mrpc_run / "predict.tf_record")
    np.testing.assert_array_equal(served["input_ids"], records["input_ids"])
    np.testing.assert_array_equal(served["segment_ids"], records["segment_ids"])


@pytest.mark.slow  # The pieces are unit-tested; this runs them together.
def test_sts_b_regression(minilm_small_ckpt, tmp_path):
    out = tmp_path / "stsb"
    settings = _settings(
        minilm_small_ckpt,
        out,
        task_name="STS-B",
        data_dir=str(TESTDATA / "cls_stsb"),
        do_train=True,
        do_eval=True,
        do_predict=True,
        train_batch_size=4,
        num_train_epochs=1.0,
        eval_batch_size=4,
        glue_submission_dir=str(tmp_path / "glue"),
        random_seed=2,
    )
    results = classifier_lib.run(settings)
    assert sorted(results) == [
        "eval_loss",
        "eval_pearson",
        "eval_spearman",
        "global_step",
        "loss",
    ]
    assert results["global_step"] == 3  # int(12 / 4 * 1.0)
    records = _records(out / "eval.tf_record", tf.float32)
    np.testing.assert_allclose(
        records["label_ids"], [5.0, 4.75, 5.0, 2.4, 2.75, 2.615], atol=1e-6
    )
    ckpt = str(out / "model.ckpt-3")
    scores = _logits(minilm_small_ckpt, ckpt, records, 1)[:, 0]
    # The run's scores come from other kernels (batches of 4 and 2, each
    # cut to its longest sequence): each within the float32 tolerance
    # `atol`, as its test scores (written as float32, no rounding) are.
    predict = _records(out / "predict.tf_record", tf.float32)
    lines = (out / "test_results.tsv").read_text().splitlines()
    assert len(lines) == 3 and all("\t" not in line for line in lines)
    tolerance.assert_float32_close(
        [float(v) for v in lines],
        _logits(minilm_small_ckpt, ckpt, predict, 1)[:, 0],
        err_msg="test_results.tsv",
    )
    # Pearson is the cosine of the centred vectors: moving each score by at
    # most atol moves the centred scores' unit vector by at most
    # 2 * sqrt(n) * atol / |centred scores| = 2 * atol / std(scores), and r
    # as much. After 3 steps the scores are nearly constant (0.07026 to
    # 0.07041, std 6e-5): a one-ulp (7e-9) change of one score moves r by
    # up to 1e-4, so abs=1e-5 failed on some CPUs; the bound is ~0.025,
    # while scores out of step with their labels give another r.
    atol = tolerance.float32_atol(scores)
    assert results["eval_pearson"] == pytest.approx(
        metrics.pearson(records["label_ids"], scores),
        abs=2 * atol / float(np.std(scores, dtype=np.float64)),
    )
    # Spearman sees only the ranks, which atol cannot change while
    # neighbouring scores are more than 2 * atol apart (here 4.6e-6, atol
    # 7e-7): the same up to float64 rounding.
    assert np.min(np.diff(np.sort(scores))) > 2 * atol
    assert results["eval_spearman"] == pytest.approx(
        metrics.spearman(records["label_ids"], scores), abs=1e-12
    )
    # Two batches of 4 and 2: `loss` is the mean of the two batch means.
    sq = np.square(scores - records["label_ids"])
    assert results["loss"] == pytest.approx(
        (sq[:4].mean() + sq[4:].mean()) / 2, rel=1e-4
    )
    submission = (tmp_path / "glue" / "STS-B.tsv").read_text().splitlines()
    assert submission[0] == "index\tprediction" and len(submission) == 4
    clipped = min(max(float(lines[0]), 0.0), 5.0)
    assert submission[1] == f"0\t{clipped:.3f}"


# ~13 s, in the default run: run_classifier's data position on resume.
def test_resume_continues_to_the_same_result(
    minilm_small_ckpt, tmp_path, caplog
):
    """A run stopped at step 2 and resumed ends like an uninterrupted one."""
    common = {
        "do_train": True,
        "do_eval": True,
        "train_batch_size": 4,
        "num_train_epochs": 1.0,
        "random_seed": 5,
    }
    # The uninterrupted run, saving at step 2 too (saving changes nothing
    # of the training).
    straight = _settings(minilm_small_ckpt, tmp_path / "a", **common)
    straight.run_config = dataclasses.replace(
        straight.run_config, save_checkpoints_steps=2
    )
    straight = classifier_lib.run(straight)
    # Its folder without the final checkpoint: the next run resumes from
    # model.ckpt-2.
    resumed_dir = tmp_path / "b"
    shutil.copytree(tmp_path / "a", resumed_dir)
    for path in resumed_dir.glob("model.ckpt-4.*"):
        path.unlink()
    (resumed_dir / "checkpoint").unlink()
    with caplog.at_level("INFO"):
        resumed = classifier_lib.run(
            _settings(minilm_small_ckpt, resumed_dir, **common)
        )
    assert "model.ckpt-2 at global_step 2" in caplog.text
    assert resumed["global_step"] == straight["global_step"] == 4
    assert (resumed_dir / "model.ckpt-2.index").exists()
    assert (resumed_dir / "model.ckpt-4.index").exists()
    # Same data order after the resume (the shuffle is seeded and consumed
    # batches are skipped) and the same dropout masks (positioned by the
    # step): the uninterrupted run's weights, float32 rounding apart.
    tolerance.assert_checkpoints_close(
        checkpoints.read_checkpoint(str(resumed_dir / "model.ckpt-4")),
        checkpoints.read_checkpoint(str(tmp_path / "a" / "model.ckpt-4")),
        tolerance.FLOAT32_REL,
        "resumed",
        5e-5,
    )
    assert resumed["eval_loss"] == pytest.approx(
        straight["eval_loss"], rel=1e-5
    )
    finished = classifier_lib.run(
        _settings(minilm_small_ckpt, resumed_dir, **common)
    )
    assert finished["eval_loss"] == pytest.approx(resumed["eval_loss"])


def test_loss_fn_is_the_original_cross_entropy_or_squared_error():
    logits = tf.constant([[0.0, np.log(3.0)], [2.0, 2.0]])
    labels = tf.constant([1, 0], tf.int32)
    logs = classifier_lib.loss_fn(task_kinds.get("classification"))(
        {"label_ids": labels}, logits
    )
    want = np.mean([-np.log(0.75), np.log(2.0)])
    assert float(logs["loss"]) == pytest.approx(want, rel=1e-6)
    assert float(logs["accuracy"]) == 1.0  # argmax of a tie is class 0.
    scores = tf.constant([[1.5], [0.0]])
    labels = tf.constant([1.0, 2.0])
    logs = classifier_lib.loss_fn(task_kinds.get("regression"))(
        {"label_ids": labels}, scores
    )
    assert float(logs["loss"]) == pytest.approx((0.25 + 4.0) / 2)


def test_classifier_runs_under_mixed_bfloat16(tiny_config_dict):
    import keras

    config = config_lib.BertConfig.from_dict(tiny_config_dict)
    batch = {
        "input_ids": tf.constant([[5, 7, 9, 0]]),
        "input_mask": tf.constant([[1, 1, 1, 0]]),
        "segment_ids": tf.constant([[0, 0, 1, 0]]),
    }
    keras.mixed_precision.set_global_policy("mixed_bfloat16")
    try:
        model = classifier_lib.build_classifier(config, 2)
        logits = model(batch, training=False)
    finally:
        keras.mixed_precision.set_global_policy("float32")
    assert logits.dtype == tf.float32 and logits.shape == (1, 2)
    assert model.classifier.output_bias.dtype == "float32"


# === Bad settings and data ===


@pytest.mark.parametrize(
    "kwargs, message",
    [
        ({}, "At least one of `do_train`, `do_eval` or `do_predict'"),
        (
            {"do_eval": True, "max_seq_length": 513},
            (
                "Cannot use sequence length 513 because the BERT model was "
                "only trained up to sequence length 512"
            ),
        ),
        (
            {"do_eval": True, "task_name": "boolq"},
            "Task not found: boolq. Known tasks: cola, mnli, mrpc, xnli",
        ),
        (
            {
                "do_eval": True,
                "do_lower_case": False,
                "init_checkpoint": "/m/uncased_L-12_H-768_A-12/bert_model.ckpt",
            },
            "do_lower_case",
        ),
        (
            {"do_eval": True, "dynamic_padding": True, "use_tpu": True},
            "--dynamic_padding gives batches of varying shapes",
        ),
        (
            {
                "do_predict": True,
                "task_name": "xnli",
                "glue_submission_dir": "g",
            },
            "xnli is not a GLUE task",
        ),
    ],
)
def test_bad_settings(minilm_small_ckpt, tmp_path, kwargs, message):
    settings = _settings(minilm_small_ckpt, tmp_path / "out", **kwargs)
    with pytest.raises(ValueError, match=_literal(message)):
        classifier_lib.prepare(settings)


def test_an_ax_submission_that_would_replace_its_input_is_refused(
    minilm_small_ckpt, tmp_path
):
    data = tmp_path / "data"
    data.mkdir()
    (data / "AX.tsv").write_text("index\tsentence1\tsentence2\n0\ta\tb\n")
    before = (data / "AX.tsv").read_text()
    settings = _settings(
        minilm_small_ckpt,
        tmp_path / "out",
        task_name="ax",
        data_dir=str(data),
        do_predict=True,
        glue_submission_dir=str(data),
    )
    with pytest.raises(ValueError, match="would replace the input"):
        classifier_lib.prepare(settings)
    assert (data / "AX.tsv").read_text() == before


def test_gradient_accumulation_with_dynamic_padding(
    minilm_small_ckpt, tmp_path
):
    """Micro-batches of batches cut to their longest row (a length the
    graph does not know): it trains (the reshape took the static shape)."""
    from modeling.training import run_config

    out = str(tmp_path / "out")
    classifier_lib.run(
        _settings(
            minilm_small_ckpt,
            out,
            do_train=True,
            dynamic_padding=True,
            train_batch_size=4,
            num_train_epochs=0.5,
            run_config=run_config.RunConfig(
                out, 0, gradient_accumulation_steps=2, handle_sigterm=False
            ),
        )
    )
    assert int(checkpoints.read_checkpoint(out)["global_step"]) == 2


def test_max_pooled_chunks_train_on_tensorflow_only(
    minilm_small_ckpt, tmp_path, monkeypatch
):
    """JAX trains --chunk_pooling=max with no segment op: refused before
    anything is written (evaluation, which combines in numpy, is not)."""
    from modeling import backend

    monkeypatch.setattr(backend, "current", lambda: "jax")
    settings = _settings(
        minilm_small_ckpt,
        tmp_path / "out",
        do_train=True,
        long_inputs="chunks",
        chunk_pooling="max",
    )
    with pytest.raises(ValueError, match="--chunk_pooling=max trains with"):
        classifier_lib.prepare(settings)
    assert not (tmp_path / "out").exists()


def _literal(text):
    import re

    return re.escape(text)


def test_bad_train_file_names_file_and_line(minilm_small_ckpt, tmp_path):
    data = tmp_path / "data"
    data.mkdir()
    lines = (TESTDATA / "cls_mrpc" / "train.tsv").read_text().splitlines()
    lines[3] = lines[3].replace("\t", " ", 1)
    (data / "train.tsv").write_text("\n".join(lines) + "\n")
    settings = _settings(
        minilm_small_ckpt, tmp_path / "out", data_dir=str(data), do_train=True
    )
    want = f"{data / 'train.tsv'} line 4: expected 5 tab-separated columns"
    with pytest.raises(ValueError, match=_literal(want)):
        classifier_lib.run(settings)


def test_eval_without_any_checkpoint(minilm_small_ckpt, tmp_path):
    settings = _settings(
        minilm_small_ckpt, tmp_path / "out", do_eval=True, init_checkpoint=None
    )
    with pytest.raises(ValueError, match="nothing to evaluate"):
        classifier_lib.run(settings)
    assert not os.path.exists(tmp_path / "out" / "eval_results.txt")


def test_an_empty_dev_set_fails_before_training_with_eval_during_training(
    minilm_small_ckpt, tmp_path
):
    """--do_train --eval_during_training without --do_eval: the dev set is
    read at the first checkpoint, so it is checked up front (an empty one
    failed after train.tf_record and those steps)."""
    import shutil

    data = tmp_path / "data"
    shutil.copytree(TESTDATA / "cls_mrpc", data)
    header = (data / "dev.tsv").read_text().splitlines()[0]
    (data / "dev.tsv").write_text(header + "\n")
    out = tmp_path / "out"
    settings = _settings(
        minilm_small_ckpt,
        out,
        data_dir=str(data),
        do_train=True,
        eval_during_training=True,
    )
    task = classifier_lib.prepare(settings)
    with pytest.raises(ValueError, match="has no example: nothing to evaluate"):
        classifier_lib.check_inputs(task)
    assert not (out / "train.tf_record").exists()


def test_flags_a_run_does_not_read_are_named(minilm_small_ckpt, tmp_path):
    """Accepted as the original accepted them, and warned about when given
    (modeling/flags.py): --eval_during_training without --do_train, a
    --glue_submission_dir without --do_predict."""
    settings = _settings(minilm_small_ckpt, tmp_path / "out", do_eval=True)
    ignored = settings.ignored_flags()
    assert "--do_train" in ignored["eval_during_training"]
    assert "--do_predict" in ignored["glue_submission_dir"]
    both = _settings(
        minilm_small_ckpt, tmp_path / "out", do_train=True, do_predict=True
    ).ignored_flags()
    assert "eval_during_training" not in both
    assert "glue_submission_dir" not in both
