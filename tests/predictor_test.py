"""The one predictor (modeling/training/predictor.py) in every prediction
path and with every backend: on inputs of mixed lengths, length-sorted
batches cut to their longest row give the outputs of the full-length padded
path (fixed batches in input order), order included, within float32
rounding; the batches really are sorted and cut; TF Lite float32 gives
TensorFlow's outputs; int8 (dynamic range, quantized per row) does not
depend on the batch-mates either.

A tiny random BERT: what is compared is the batching and the runtimes, not
a trained model.
"""

import json
import pathlib
import random
import tempfile

import constants
import numpy as np
import pytest
import script_runner
import tensorflow as tf
import tolerance

from modeling import checkpoints
from modeling import config as config_lib
from modeling import encoder
from modeling import models
from modeling import text_classifier
from modeling.tasks import classifier
from modeling.tasks import extract
from modeling.tasks import fine_tuning
from modeling.tasks import ner
from modeling.tasks import predictions
from modeling.training import predictor

REPO = pathlib.Path(__file__).resolve().parents[1]
SEQ = 48
WORDS = [w for w in constants.TINY_VOCAB if w.isalpha()]
# int8 against float32: dynamic-range quantization moves logits by about 1%
# of their scale; int8 against int8 (another batching) is float rounding.
BACKENDS = ("tensorflow", "tflite", "tflite_int8")


def _features(n, seed, choices=None, max_len=SEQ):
    """Token id rows of lengths from 2 to max_len, padded to SEQ."""
    rng = np.random.default_rng(seed)
    shape = (n, SEQ) if choices is None else (n, choices, SEQ)
    lengths = rng.integers(2, max_len + 1, shape[:-1])
    mask = (np.arange(SEQ) < lengths[..., None]).astype(np.int32)
    return {
        "input_ids": rng.integers(5, 99, shape).astype(np.int32) * mask,
        "input_mask": mask,
        "segment_ids": np.zeros(shape, np.int32),
    }


def _texts(n, seed):
    rng = random.Random(seed)
    return [
        " ".join(rng.choices(WORDS, k=rng.choice([1, 2, 3, 8, 20, 40])))
        for _ in range(n)
    ]


@pytest.fixture(scope="module")
def config():
    return config_lib.BertConfig.from_dict(constants.TINY_CONFIG)


# === The batching itself ===


@pytest.mark.parametrize("source", ["numpy", "tf.data"])
def test_sorted_batches_are_sorted_cut_and_numbered(source):
    features = _features(50, 1)
    rows = features
    if source == "tf.data":
        rows = tf.data.Dataset.from_tensor_slices(features)
    windows = predictor.numbered_windows(rows, 12)
    batches = list(predictor.sorted_batches(windows, 4, multiple=8))
    orders = np.concatenate([b[predictor.ORDER] for b in batches])
    assert sorted(orders.tolist()) == list(range(50))
    mask = features["input_mask"]
    # Windows of 12 rows keep their rows; within one, lengths ascend.
    for w in range(0, 50, 12):
        window = orders[w : w + 12]
        assert sorted(window.tolist()) == list(range(w, min(w + 12, 50)))
        assert np.all(np.diff(mask[window].sum(-1)) >= 0)
    for batch in batches:
        width = batch["input_ids"].shape[1]
        longest = batch["input_mask"].sum(-1).max()
        assert width == min(-(-longest // 8) * 8, SEQ)
        rows = batch[predictor.ORDER]
        np.testing.assert_array_equal(
            batch["input_ids"], features["input_ids"][rows, :width]
        )


def test_the_cut_is_trim_paddings(config):
    """predictor.cut_to_longest (numpy, between input and backend) cuts as
    input_pipeline.trim_padding (in a graph: training batches, the serving
    exports), an empty batch included."""
    from modeling.data import input_pipeline

    for n, multiple in ((7, 8), (5, 1), (0, 8), (3, 64)):
        batch = {k: v[:n] for k, v in _features(max(n, 1), n).items()}
        want = input_pipeline.trim_padding(
            {k: tf.constant(v) for k, v in batch.items()}, multiple
        )
        got = predictor.cut_to_longest(batch, multiple)
        for k in batch:
            np.testing.assert_array_equal(got[k], want[k].numpy(), err_msg=k)


def test_fixed_batches_have_one_shape_and_drop_their_filling():
    """length_sorted=False: every batch [batch_size, SEQ] in input order
    (TPUs); the rows filling the last one are not among the outputs."""

    class Echo:
        def run(self, batches, static_shapes):
            assert static_shapes
            for batch in batches:
                assert batch["input_ids"].shape == (4, SEQ)
                yield batch, {"ids": batch["input_ids"]}

    features = _features(10, 2)
    runner = predictor.Predictor(Echo(), 4, length_sorted=False)
    got_features, outputs = runner.gather(features)
    np.testing.assert_array_equal(outputs["ids"], features["input_ids"])
    np.testing.assert_array_equal(
        got_features["input_mask"], features["input_mask"]
    )


def test_in_input_order_restores_the_order():
    shuffled = [(3, "d"), (1, "b"), (0, "a"), (2, "c"), (5, "f"), (4, "e")]
    assert list(predictor.in_input_order(shuffled)) == list("abcdef")
    with pytest.raises(RuntimeError, match="without row 1"):
        list(predictor.in_input_order([(0, "a"), (2, "c")]))
    with pytest.raises(RuntimeError, match="row 0 came twice"):
        list(predictor.in_input_order([(0, "a"), (0, "b")]))


def test_one_place_compiles_the_predict_step_and_creates_interpreters():
    """grep: the TF Lite interpreters (LiteRT's or tf.lite's) and the
    predict step's strategy.run + gather are written once in modeling/, in
    predictor.py."""
    interpreters, steps = [], []
    for path in sorted((REPO / "modeling").rglob("*.py")):
        text = path.read_text()
        if "tf.lite.Interpreter" in text or "ai_edge_litert" in text:
            interpreters.append(path.name)
        if "strategy.gather(" in text:
            steps.append(path.name)
    assert interpreters == ["predictor.py"]
    assert steps == ["predictor.py"]


# === Backends and batchings, per task model ===


MODELS = {
    "classifier": (lambda c: models.BertClassifier(c, 3), None, ()),
    "tagger": (lambda c: models.BertTokenClassifier(c, 5), None, ("logits",)),
    "span": (
        lambda c: models.BertSpanLabeler(c),
        None,
        ("start_logits", "end_logits"),
    ),
    "choice": (lambda c: models.BertMultipleChoice(c), 3, ()),
}


@pytest.mark.parametrize("name", sorted(MODELS))
def test_backends_and_batchings_agree(config, name):
    """For each task model: TensorFlow full-length is the reference; every
    backend's length-sorted outputs equal its own full-length ones at the
    real positions (int8 too: it quantizes each row on its own); TF Lite
    float32 equals TensorFlow."""
    make, choices, seq_outputs = MODELS[name]
    model = make(config)
    features = _features(23, 3, choices)
    rank = 2 if choices is None else 3
    real = features["input_mask"].astype(bool)
    outputs = {}
    for runtime in BACKENDS:
        backend = predictor.make_backend(runtime, model, rank=rank)
        for sorted_ in (False, True):
            _, out = predictor.Predictor(
                backend, 5, length_sorted=sorted_
            ).gather(features, width=SEQ, seq_outputs=seq_outputs)
            outputs[runtime, sorted_] = out
    reference = outputs["tensorflow", False]
    for key, out in outputs.items():
        assert sorted(out) == sorted(reference), key
        for output, values in out.items():
            want = outputs[key[0], False][output]
            if output in seq_outputs:
                values, want = values[real], want[real]
            tolerance.assert_float32_close(values, want, err_msg=str(key))
            if key[0] == "tflite":
                tolerance.assert_float32_close(
                    values,
                    reference[output][real]
                    if output in seq_outputs
                    else reference[output],
                    err_msg=str(key),
                )


def test_tflite_resizes_to_each_batch_shape(config):
    model = models.BertClassifier(config, 3)
    backend = predictor.TFLiteBackend.of_model(model)
    for batch, length in ((3, 17), (1, 5), (4, 32)):
        x = {k: v[:batch, :length] for k, v in _features(4, batch).items()}
        tolerance.assert_float32_close(
            backend(x)["logits"], model(x, training=False).numpy()
        )
    # Converted once per state of the weights.
    assert predictor.TFLiteBackend.of_model(model) is backend
    model.weights[0].assign(model.weights[0] + 1.0)
    assert predictor.TFLiteBackend.of_model(model) is not backend


# === Each prediction path against its padded path ===


def _ner_task(config, tmp_path, runtime):
    settings = ner.Settings(
        bert_config_file="unused",
        vocab_file="unused",
        output_dir=str(tmp_path),
        max_seq_length=SEQ,
    )
    settings.run_config.predict_runtime = runtime
    return fine_tuning.ArrayTask(
        settings, config, None, tf.distribute.get_strategy()
    )


@pytest.mark.parametrize("runtime", ["tensorflow", "tflite"])
def test_array_task_logits(config, tmp_path, runtime):
    """ArrayTask.logits (run_ner, run_multiple_choice) against the
    full-length path of the same backend; a tagger's logits per position
    at full width, [N, C, T] choices."""
    task = _ner_task(config, tmp_path, runtime)
    features = _features(37, 4)
    tagger = models.BertTokenClassifier(config, 5)
    got = task.logits(tagger, features, 8, per_position=True)
    backend = predictor.make_backend(runtime, tagger)
    _, want = predictor.Predictor(backend, 8, length_sorted=False).gather(
        features
    )
    real = features["input_mask"].astype(bool)
    assert got.shape == want["logits"].shape == (37, SEQ, 5)
    tolerance.assert_float32_close(got[real], want["logits"][real])

    choices = _features(12, 5, choices=3)
    chooser = models.BertMultipleChoice(config)
    got = task.logits(chooser, choices, 5)
    backend = predictor.make_backend(runtime, chooser, rank=3)
    _, want = predictor.Predictor(backend, 5, length_sorted=False).gather(
        choices
    )
    assert got.shape == (12, 3)
    tolerance.assert_float32_close(got, want["logits"])


def test_extract_features_layers(config):
    model = encoder.BertModel(config)
    model.build()
    columns = _features(21, 6)
    features = [
        extract.InputFeatures(
            i, ["t"] * int(m.sum()), list(x), list(m), [0] * SEQ
        )
        for i, (x, m) in enumerate(
            zip(columns["input_ids"], columns["input_mask"])
        )
    ]
    want = list(
        extract.extract_layers(model, features, [-1, 0], 4, None, False)
    )
    got = list(extract.extract_layers(model, features, [-1, 0], 4))
    assert [f.unique_id for f, _ in got] == list(range(21))
    for (f, values), (_, expected) in zip(got, want):
        n = len(f.tokens)
        for a, b in zip(values, expected):
            tolerance.assert_float32_close(a[:n], b[:n])


@pytest.fixture(scope="module")
def tiny_release(tmp_path_factory, config):
    folder = tmp_path_factory.mktemp("tiny_release_predictor")
    config.to_json_file(folder / "bert_config.json")
    (folder / "vocab.txt").write_text("\n".join(constants.TINY_VOCAB) + "\n")
    model = models.BertClassifier(config, 3)
    checkpoints.write_checkpoint(
        str(folder / "bert_model.ckpt"),
        {checkpoints.variable_name(v): v.numpy() for v in model.weights},
    )
    return folder


def test_keras_predict(tiny_release):
    model = text_classifier.BertTextClassifier.from_checkpoint(
        tiny_release, num_labels=3, sequence_length=SEQ
    )
    texts = _texts(45, 7)
    got = model.predict(texts, batch_size=4, verbose=0)
    model.dynamic_padding = False
    want = model.predict(texts, batch_size=4, verbose=0)
    assert got.shape == (45, 3)
    tolerance.assert_float32_close(got, want)
    # The same texts as a dataset of batches, and one at a time.
    dataset = tf.data.Dataset.from_tensor_slices(texts).batch(7)
    tolerance.assert_float32_close(model.predict(dataset), want)
    alone = np.concatenate([model.predict(texts[i : i + 1]) for i in (0, 9)])
    tolerance.assert_float32_close(alone, want[[0, 9]])


@pytest.mark.parametrize("runtime", ["tensorflow", "tflite"])
def test_run_classifier_predict_and_eval(tiny_release, tmp_path, runtime):
    """run_classifier.py --do_eval --do_predict with and without
    --dynamic_padding from one checkpoint, for each runtime: the same
    eval_results.txt and test_results.tsv, predictions.jsonl in input
    order."""
    rows = [
        {"id": f"r{i}", "text": t, "label": str(i % 3)}
        for i, t in enumerate(_texts(41, 8))
    ]
    data = tmp_path / "data.jsonl"
    data.write_text("".join(json.dumps(r) + "\n" for r in rows))
    outputs = {}
    for dynamic in (True, False):
        out = tmp_path / f"out_{dynamic}"
        settings = classifier.Settings(
            data_dir=None,
            task_name="custom",
            bert_config_file=str(tiny_release / "bert_config.json"),
            vocab_file=str(tiny_release / "vocab.txt"),
            init_checkpoint=str(tiny_release / "bert_model.ckpt"),
            output_dir=str(out),
            dev_file=str(data),
            test_file=str(data),
            labels="0,1,2",
            max_seq_length=SEQ,
            eval_batch_size=4,
            predict_batch_size=3,
            do_eval=True,
            do_predict=True,
            dynamic_padding=dynamic,
        )
        settings.run_config.predict_runtime = runtime
        results = classifier.run(settings)
        probs = np.array(
            [
                [float(v) for v in line.split("\t")]
                for line in (out / "test_results.tsv").read_text().splitlines()
            ]
        )
        ids = [
            json.loads(x)["id"]
            for x in (out / predictions.FILE).read_text().splitlines()
        ]
        outputs[dynamic] = (results, probs, ids)
    (got, got_probs, got_ids), (want, want_probs, want_ids) = (
        outputs[True],
        outputs[False],
    )
    assert got_ids == want_ids == [r["id"] for r in rows]
    tolerance.assert_float32_close(got_probs, want_probs, scale=1.0)
    for key in want:
        tolerance.assert_float32_close(got[key], want[key], scale=1.0)


_MIRRORED = """
import sys
import numpy as np
import tensorflow as tf

cpus = tf.config.list_physical_devices("CPU")
tf.config.set_logical_device_configuration(
    cpus[0], [tf.config.LogicalDeviceConfiguration() for _ in range(2)]
)
import keras
from modeling import config as config_lib
from modeling import models
from modeling.training import distribute
from modeling.training import predictor

config = config_lib.BertConfig.from_json_file(sys.argv[1])
data = dict(np.load(sys.argv[2]))
strategy = distribute.create_strategy("mirrored")
assert strategy.num_replicas_in_sync == 2
keras.utils.set_random_seed(1)
with strategy.scope():
    model = models.BertTokenClassifier(config, 5)
out = {}
for sorted_ in (True, False):
    runner = predictor.Predictor(
        predictor.TensorFlowBackend(model, strategy), 5, length_sorted=sorted_
    )
    _, outputs = runner.gather(data, width=data["input_ids"].shape[1],
                               seq_outputs=("logits",))
    out[f"sorted_{sorted_}"] = outputs["logits"]
keras.utils.set_random_seed(1)
reference = models.BertTokenClassifier(config, 5)
out["reference"] = reference(data, training=False).numpy()
np.savez(sys.argv[3], **out)
"""


def test_mirrored_strategy_on_two_cpus(config, tmp_path):
    """The TensorFlow backend under MirroredStrategy (2 logical CPUs): 23
    rows in batches of 5, split across the replicas (the last unevenly),
    give the single-device outputs in input order."""
    config.to_json_file(tmp_path / "bert_config.json")
    features = _features(23, 9)
    np.savez(tmp_path / "features.npz", **features)
    proc = script_runner.python(
        [
            "-c",
            _MIRRORED,
            str(tmp_path / "bert_config.json"),
            str(tmp_path / "features.npz"),
            str(tmp_path / "out.npz"),
        ],
        env={"PYTHONPATH": str(REPO)},
        timeout=300,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    out = np.load(tmp_path / "out.npz")
    real = features["input_mask"].astype(bool)
    want = out["reference"][real]
    for key in ("sorted_True", "sorted_False"):
        tolerance.assert_float32_close(out[key][real], want, err_msg=key)


def test_sigterm_while_predicting_leaves_no_output(tiny_release, tmp_path):
    """SIGTERM in the middle of run_classifier's prediction: the run ends
    within seconds with the interrupted status, and neither
    test_results.tsv nor predictions.jsonl (nor a temporary file) is left
    behind."""
    import signal
    import time

    from modeling import errors

    rows = "".join(json.dumps({"text": t}) + "\n" for t in _texts(30000, 10))
    test = tmp_path / "test.jsonl"
    test.write_text(rows)
    out = tmp_path / "out"
    proc = script_runner.popen(
        [
            REPO / "run_classifier.py",
            "--task_name=custom",
            f"--test_file={test}",
            "--labels=0,1,2",
            f"--vocab_file={tiny_release / 'vocab.txt'}",
            f"--bert_config_file={tiny_release / 'bert_config.json'}",
            f"--init_checkpoint={tiny_release / 'bert_model.ckpt'}",
            f"--output_dir={out}",
            f"--max_seq_length={SEQ}",
            "--do_predict",
            "--predict_batch_size=2",
        ],
        env={"PYTHONPATH": str(REPO)},
    )
    deadline = time.monotonic() + 120
    while not (out / "predict.tf_record").exists():
        assert proc.poll() is None, proc.stderr.read()[-3000:]
        assert time.monotonic() < deadline
        time.sleep(0.05)
    time.sleep(1.0)  # Building the model, then predicting.
    assert proc.poll() is None, "prediction ended before the signal"
    start = time.monotonic()
    proc.send_signal(signal.SIGTERM)
    stderr = proc.communicate(timeout=60)[1]
    assert time.monotonic() - start < 15
    assert proc.returncode == errors.EXIT_INTERRUPTED, stderr[-3000:]
    left = sorted(p.name for p in out.iterdir())
    assert "test_results.tsv" not in left and predictions.FILE not in left
    assert not [name for name in left if ".tmp" in name], left


def test_the_predictor_imports_without_tensorflow():
    """The batching and the TF Lite backend need no TensorFlow: with
    `import tensorflow` failing, numpy rows go through LiteRT."""
    pytest.importorskip("ai_edge_litert")
    code = """
import numpy as np
from modeling.training import predictor
content = open(sys.argv[1], "rb").read()
backend = predictor.TFLiteBackend(content, {"logits": sys.argv[2]})
rows = dict(np.load(sys.argv[3]))
_, outputs = predictor.Predictor(backend, 4, multiple=1).gather(rows)
np.save(sys.argv[4], outputs["logits"])
assert "tensorflow" not in sys.modules
"""
    from modeling import config as config_lib
    from modeling.export import tflite

    model = models.BertClassifier(
        config_lib.BertConfig.from_dict(constants.TINY_CONFIG), 3
    )
    rows = _features(10, 3)
    want = model(rows, training=False).numpy()
    content, names = tflite.convert(model)
    folder = pathlib.Path(tempfile.mkdtemp())
    (folder / "model.tflite").write_bytes(content)
    np.savez(folder / "rows.npz", **rows)
    proc = script_runner.run_without_tensorflow(
        [
            str(folder / "model.tflite"),
            names["logits"],
            str(folder / "rows.npz"),
            str(folder / "out.npy"),
        ],
        code,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    tolerance.assert_float32_close(np.load(folder / "out.npy"), want)


def test_batch_lengths_are_few_where_every_shape_compiles(monkeypatch):
    """On XLA, and always on Keras's JAX backend, a batch length is a
    program: a few lengths only (a quarter of max_seq_length apart); on
    TensorFlow's default path each batch at its longest row."""
    from modeling import backend
    from modeling.data import input_pipeline

    assert input_pipeline.predict_multiple(128) == 1
    assert input_pipeline.predict_multiple(128, use_xla=True) == 32
    monkeypatch.setattr(backend, "current", lambda: "jax")
    assert input_pipeline.predict_multiple(128) == 32
    # Training's dynamic padding too (every length compiled a program).
    assert input_pipeline.padding_multiple(128) == 32
