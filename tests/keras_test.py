"""The Keras-native API: from_checkpoint, BertPreprocessor, BertTextClassifier
and the Keras face of the original's optimizer.

The central check: `BertTextClassifier.fit` on raw strings from the
converted MiniLM checkpoint (its first 2 layers: conftest.minilm_small_ckpt) ends with run_classifier.py's weights, Adam slots
and dev metrics for the same seed and settings, and the checkpoint it writes
is what `run_classifier.py --do_predict` reads.
"""

import pathlib

import constants
import keras
import numpy as np
import pytest
import tensorflow as tf
import tolerance
import training_helpers as helpers

from modeling import checkpoints
from modeling import config as config_lib
from modeling import models
from modeling import preprocessing
from modeling import text_classifier
from modeling.data import classifier_data
from modeling.data import glue
from modeling.tasks import classifier as classifier_lib
from modeling.text import tokenization
from modeling.training import checkpoint_manager
from modeling.training import optimization

REPO = pathlib.Path(__file__).resolve().parents[1]
MRPC = REPO / "tests" / "testdata" / "cls_mrpc"
SEQ = 32
SEED = 3


def _write_vocab(path, tokens):
    path.write_text("".join(f"{t}\n" for t in tokens), encoding="utf-8")


@pytest.fixture(scope="module")
def tiny_release(tmp_path_factory):
    """A released-style folder of a tiny random BERT: (folder, {name:
    array}) with bert_config.json, vocab.txt and bert_model.ckpt (with the
    pre-training heads, as Google's)."""
    folder = tmp_path_factory.mktemp("tiny_release")
    config = config_lib.BertConfig.from_dict(constants.TINY_CONFIG)
    config.to_json_file(folder / "bert_config.json")
    _write_vocab(folder / "vocab.txt", constants.TINY_VOCAB)
    model = models.BertPretrainer(config)
    arrays = {
        checkpoints.variable_name(v): v.numpy()
        for v in model.trainable_variables
    }
    checkpoints.write_checkpoint(str(folder / "bert_model.ckpt"), arrays)
    return folder, arrays


def _weights(model):
    return {checkpoints.variable_name(v): v.numpy() for v in model.weights}


# === from_checkpoint ===


@pytest.mark.parametrize("as_prefix", [False, True], ids=["folder", "prefix"])
def test_from_checkpoint_loads_the_encoder_and_starts_fresh_heads(
    tiny_release, as_prefix
):
    folder, arrays = tiny_release
    path = folder / "bert_model.ckpt" if as_prefix else folder
    pretrainer = models.BertPretrainer.from_checkpoint(path)
    assert _weights(pretrainer).keys() == arrays.keys()
    for name, value in _weights(pretrainer).items():
        np.testing.assert_array_equal(value, arrays[name], err_msg=name)
    for cls, kwargs, head in [
        (models.BertClassifier, {"num_labels": 3}, "output_bias"),
        (models.BertSpanLabeler, {}, "cls/squad/output_bias"),
    ]:
        model = cls.from_checkpoint(path, **kwargs)
        weights = _weights(model)
        encoder = [n for n in weights if n.startswith("bert/")]
        assert len(encoder) == len([n for n in arrays if n.startswith("bert/")])
        for name in encoder:
            np.testing.assert_array_equal(weights[name], arrays[name])
        # The head is not in a pre-trained checkpoint: its initial value.
        assert head not in arrays and not weights[head].any()


def test_from_checkpoint_reads_a_fine_tuned_head(tiny_release, tmp_path):
    folder, _ = tiny_release
    model = models.BertClassifier.from_checkpoint(folder, num_labels=3)
    model.classifier.output_bias.assign([0.5, -1.0, 2.0])
    tuned = tmp_path / "tuned"
    checkpoints.write_checkpoint(
        str(tuned / "model.ckpt-7"),
        {n: v for n, v in _weights(model).items()},
        global_step=7,
    )
    (tuned / "bert_config.json").write_text(
        (folder / "bert_config.json").read_text()
    )
    again = models.BertClassifier.from_checkpoint(tuned, num_labels=3)
    np.testing.assert_array_equal(
        again.classifier.output_bias.numpy(), [0.5, -1.0, 2.0]
    )
    # A head of another task: the error names the variable and the shapes.
    with pytest.raises(
        ValueError,
        match=r"fine-tuned with 3 labels \(output_weights has shape \[3, 32\]\); "
        r"the model has 2 \(\[2, 32\]\)",
    ):
        models.BertClassifier.from_checkpoint(tuned, num_labels=2)


def test_from_checkpoint_without_a_config_names_it(tiny_release, tmp_path):
    folder, arrays = tiny_release
    checkpoints.write_checkpoint(str(tmp_path / "bert_model.ckpt"), arrays)
    with pytest.raises(FileNotFoundError, match="bert_config.json"):
        models.BertClassifier.from_checkpoint(tmp_path, num_labels=2)
    model = models.BertClassifier.from_checkpoint(
        tmp_path,
        bert_config_file=str(folder / "bert_config.json"),
        num_labels=2,
    )
    np.testing.assert_array_equal(
        model.bert.pooler.dense.kernel.numpy(),
        arrays["bert/pooler/dense/kernel"],
    )


# === BertPreprocessor ===

_HARD_TEXTS = [
    # Truncation of the longer segment first, on both sides.
    (
        "the quick brown fox jumps over the lazy dog " * 4,
        "a short second segment",
    ),
    ("short", "a much longer second segment that needs cutting " * 3),
    # Non-ASCII rows take the exact regex path; ™, ß, accents, CJK.
    ("Café naïve façade — 東京タワー™ and Straße", "ÀÉÎÕÜ ﬁne"),
    # An empty text_b is packed as a single sentence.
    ("only one sentence here", ""),
]


def _features(examples, vocab_file, seq):
    tokenizer = tokenization.FullTokenizer(vocab_file, True)
    return [
        classifier_data.convert_single_example(i, e, None, seq, tokenizer)
        for i, e in enumerate(examples)
    ]


def test_preprocessor_gives_run_classifier_features(uncased_vocab_file):
    """Raw pairs and single sentences -> the features
    convert_single_example (FullTokenizer, the original's packing and
    truncation) writes to run_classifier's records."""
    seq = 24
    examples = glue.get_processor("mrpc").get_train_examples(str(MRPC))
    pairs = [(e.text_a, e.text_b) for e in examples] + _HARD_TEXTS
    layer = preprocessing.BertPreprocessor.from_vocab(
        uncased_vocab_file, True, seq
    )
    got = layer(tuple(np.array(part) for part in zip(*pairs)))
    want = _features(
        [
            classifier_data.InputExample(str(i), a, b, label=0.0)
            for i, (a, b) in enumerate(pairs)
        ],
        uncased_vocab_file,
        seq,
    )
    for name in ("input_ids", "input_mask", "segment_ids"):
        np.testing.assert_array_equal(
            got[name].numpy(), [getattr(f, name) for f in want], err_msg=name
        )
    # In a tf.data pipeline of pairs, which map unpacks into two arguments.
    mapped = (
        tf.data.Dataset.from_tensor_slices(
            tuple(np.array(part) for part in zip(*pairs))
        )
        .batch(len(pairs))
        .map(layer)
    )
    np.testing.assert_array_equal(
        next(iter(mapped))["input_ids"].numpy(), got["input_ids"].numpy()
    )
    # Single sentences, as a list of str and as a dict; and one scalar.
    singles = [a for a, _ in pairs]
    want = _features(
        [
            classifier_data.InputExample(str(i), a, None, label=0.0)
            for i, a in enumerate(singles)
        ],
        uncased_vocab_file,
        seq,
    )
    ids = [f.input_ids for f in want]
    np.testing.assert_array_equal(layer(singles)["input_ids"], ids)
    np.testing.assert_array_equal(layer({"text_a": singles})["input_ids"], ids)
    np.testing.assert_array_equal(layer(singles[0])["input_ids"], ids[0])


def test_preprocessor_from_checkpoint(tiny_release, tmp_path):
    folder, _ = tiny_release
    layer = preprocessing.BertPreprocessor.from_checkpoint(folder, 16)
    assert layer.do_lower_case and layer.sequence_length == 16
    assert list(layer.vocabulary) == constants.TINY_VOCAB
    assert layer.get_config()["vocabulary"] == constants.TINY_VOCAB
    # Symbolic inputs (a functional model on strings): the output spec.
    text = keras.Input(shape=(), dtype="string")
    spec = layer((text, text))
    assert {k: (tuple(v.shape), v.dtype) for k, v in spec.items()} == {
        k: ((None, 16), "int32")
        for k in ("input_ids", "input_mask", "segment_ids")
    }
    # A vocabulary with upper-case tokens is cased.
    cased = tmp_path / "cased"
    cased.mkdir()
    for name in ("bert_config.json", "bert_model.ckpt.index", "checkpoint"):
        (cased / name).write_bytes((folder / name).read_bytes())
    data = folder / "bert_model.ckpt.data-00000-of-00001"
    (cased / data.name).write_bytes(data.read_bytes())
    _write_vocab(cased / "vocab.txt", constants.TINY_VOCAB + ["Hello"])
    layer = preprocessing.BertPreprocessor.from_checkpoint(cased, 16)
    assert not layer.do_lower_case
    assert layer("Hello hello")["input_ids"].numpy()[:4].tolist() == [
        constants.TINY_VOCAB.index("[CLS]"),
        len(constants.TINY_VOCAB),
        constants.TINY_VOCAB.index("hello"),
        constants.TINY_VOCAB.index("[SEP]"),
    ]
    with pytest.raises(ValueError, match="sequence length 65"):
        preprocessing.BertPreprocessor.from_checkpoint(folder, 65)
    (cased / "vocab.txt").unlink()
    with pytest.raises(FileNotFoundError, match="from_vocab"):
        preprocessing.BertPreprocessor.from_checkpoint(cased, 16)


# === The Keras optimizer ===


def _variables():
    rng = np.random.default_rng(0)
    return [
        keras.Variable(rng.normal(size=shape).astype("float32"), name=name)
        for name, shape in [
            ("kernel", (3, 4)),
            ("bias", (4,)),
            ("LayerNorm_gamma", (4,)),
        ]
    ]


def test_keras_optimizer_saves_its_schedule_and_slots_names():
    """The one optimizer (checked step for step against the original's in
    optimization_test.py) through Keras's own apply_gradients: it counts
    the steps, names its slots as the original's checkpoints and
    round-trips its config."""
    keras_opt = optimization.create_optimizer(1e-2, 5, 2)
    ours = _variables()
    rng = np.random.default_rng(1)
    rates = []
    for step in range(3):
        grads = [
            tf.constant(rng.normal(size=v.shape).astype("float32") * 3)
            for v in ours
        ]
        rates.append(float(keras_opt.learning_rate))
        keras_opt.apply_gradients(zip(grads, ours))
    # warmup 0, 1e-2 / 2, then 1e-2 * (1 - 2 / 5).
    np.testing.assert_allclose(rates, [0.0, 5e-3, 6e-3], rtol=1e-6)
    assert int(keras_opt.iterations.numpy()) == 3
    slots = keras_opt.checkpoint_variables()
    want = {"global_step"} | {
        f"{v.path}/{slot}" for v in ours for slot in ("adam_m", "adam_v")
    }
    assert sorted(slots) == sorted(want)
    # The weights moved (clipped and decayed).
    assert not np.allclose(ours[0].numpy(), _variables()[0].numpy())
    config = keras_opt.get_config()
    clone = optimization.AdamWeightDecayOptimizer.from_config(config)
    assert clone.get_config() == config
    assert config["num_warmup_steps"] == 2 and config["clip_norm"] == 1.0


# === BertTextClassifier on a tiny model ===

_PAIRS = [
    ("the cat sat on the mat", "a cat sat"),
    ("hello world", "the dog is bad"),
    ("the dog is not good", "a dog"),
    ("cats sat on mats", "hello"),
] * 2
_LABELS = [1, 0, 0, 1] * 2


def _tiny_classifier(tiny_release, **kwargs):
    folder, _ = tiny_release
    return text_classifier.BertTextClassifier.from_checkpoint(
        folder, sequence_length=16, **kwargs
    )


def _texts(pairs):
    return tuple(np.array(part) for part in zip(*pairs))


def test_a_mixed_precision_model_loads_as_it_was_saved(tiny_release, tmp_path):
    """Saved under mixed_float16, loaded in a float32 process: the same
    policy, optimizer step and loss-scale state (they were dropped with a
    warning), and the same logits."""
    import warnings

    keras.config.set_dtype_policy("mixed_float16")
    try:
        model = _tiny_classifier(tiny_release, num_labels=2)
        model.compile(learning_rate=1e-3)
        a = np.array([a for a, _ in _PAIRS])
        model.fit(a[:4], _LABELS[:4], batch_size=2, verbose=0)
        want = model.predict(a, verbose=0)
        count = len(model.optimizer.variables)
        model.save(tmp_path / "mixed.keras")
    finally:
        keras.config.set_dtype_policy("float32")
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        loaded = keras.models.load_model(tmp_path / "mixed.keras")
    assert not [w for w in caught if "Skipping variable" in str(w.message)]
    assert loaded.classifier.dtype_policy.name == "mixed_float16"
    assert keras.config.dtype_policy().name == "float32"
    assert len(loaded.optimizer.variables) == count
    assert int(loaded.optimizer.iterations.numpy()) == 2
    np.testing.assert_array_equal(loaded.predict(a, verbose=0), want)


def test_text_classifier_fit_save_load_and_export(
    tiny_release, tmp_path, autograph_conversions
):
    model = _tiny_classifier(tiny_release, num_labels=2)
    model.compile(learning_rate=1e-3)
    dataset = tf.data.Dataset.from_tensor_slices(
        (_texts(_PAIRS), _LABELS)
    ).batch(4)
    with helpers.variables_made_while_tracing() as made:
        history = model.fit(
            dataset,
            epochs=2,
            validation_data=(_texts(_PAIRS[:3]), _LABELS[:3]),
            verbose=0,
        )
    # The slots were made before the train step's one trace, and the
    # texts' pipeline was traced as written (input_pipeline.as_written).
    assert made == []
    assert autograph_conversions == []
    assert len(history.history["loss"]) == 2
    # An unbatched dataset, Keras arguments fit cannot honour: one line.
    with pytest.raises(ValueError, match=r"dataset.batch\(batch_size\) first"):
        model.fit(dataset.unbatch(), epochs=1, verbose=0)
    with pytest.raises(ValueError, match="fit takes no validation_split"):
        model.fit(_texts(_PAIRS), _LABELS, validation_split=0.5, verbose=0)
    # The last validation is evaluate's (fit preprocesses it once).
    metrics = model.evaluate(_texts(_PAIRS[:3]), _LABELS[:3], verbose=0)
    tolerance.assert_float32_close(history.history["val_loss"][-1], metrics[0])
    # The default schedule spans the steps fit ran: 2 epochs of 2 batches.
    assert model.optimizer.num_train_steps == 4
    assert int(model.optimizer.iterations.numpy()) == 4
    logits = model.predict(_texts(_PAIRS), batch_size=3, verbose=0)
    assert logits.shape == (8, 2)
    # A dataset of batched pairs, of 1-tuples of texts: the same logits.
    batched = tf.data.Dataset.from_tensor_slices(_texts(_PAIRS)).batch(5)
    tolerance.assert_float32_close(model.predict(batched), logits)
    firsts = tf.data.Dataset.from_tensor_slices((_texts(_PAIRS)[0],))
    tolerance.assert_float32_close(
        model.predict(firsts.batch(3)),
        model.predict(list(_texts(_PAIRS)[0])),
    )
    # fit's dataset as it is (the labels are not texts), and dicts.
    tolerance.assert_float32_close(model.predict(dataset), logits)
    a, b = _texts(_PAIRS)
    singles = tf.data.Dataset.from_tensor_slices((a, _LABELS)).batch(3)
    tolerance.assert_float32_close(
        model.predict(singles), model.predict(list(a))
    )
    dicts = tf.data.Dataset.from_tensor_slices({"text_a": a, "text_b": b})
    tolerance.assert_float32_close(model.predict(dicts.batch(3)), logits)
    # Calling the model on raw pairs gives predict's logits.
    tolerance.assert_float32_close(model(_texts(_PAIRS)).numpy(), logits)
    # .keras: the same class, weights, predictions and optimizer state.
    path = tmp_path / "tiny.keras"
    model.save(path)
    loaded = keras.models.load_model(path)
    assert isinstance(loaded, text_classifier.BertTextClassifier)
    assert [checkpoints.variable_name(v) for v in loaded.weights] == [
        checkpoints.variable_name(v) for v in model.weights
    ]
    np.testing.assert_array_equal(
        loaded(_texts(_PAIRS)).numpy(), model(_texts(_PAIRS)).numpy()
    )
    assert int(loaded.optimizer.iterations.numpy()) == 4
    assert loaded.optimizer.get_config() == model.optimizer.get_config()
    want = model.optimizer.checkpoint_variables()
    for name, slot in loaded.optimizer.checkpoint_variables().items():
        np.testing.assert_array_equal(slot.numpy(), want[name].numpy())
    export = tmp_path / "export"
    # Pairs, as fit trained on (the default served text_a alone).
    model.export_for_serving(str(export), label_list=["0", "1"])
    loaded = tf.saved_model.load(str(export))
    out = loaded.signatures["serving_default"](
        text_a=tf.constant(_texts(_PAIRS)[0]),
        text_b=tf.constant(_texts(_PAIRS)[1]),
    )
    tolerance.assert_float32_close(
        out["probabilities"].numpy(),
        tf.nn.softmax(logits).numpy(),
        scale=1.0,
    )


def test_save_checkpoint_with_another_keras_optimizer(tiny_release, tmp_path):
    """Any Keras optimizer trains the model; save_checkpoint then writes the
    weights and the step (no Adam slots), which from_checkpoint reads."""
    model = _tiny_classifier(tiny_release, num_labels=2)
    model.compile(optimizer=keras.optimizers.SGD(0.5))
    model.fit(_texts(_PAIRS), _LABELS, batch_size=4, epochs=1, verbose=0)
    prefix = model.save_checkpoint(str(tmp_path / "sgd"))
    assert pathlib.Path(prefix).name == "model.ckpt-2"
    names = checkpoints.checkpoint_shapes(prefix)
    assert "output_weights" in names and "global_step" in names
    assert not [n for n in names if n.endswith(("/adam_m", "/adam_v"))]
    again = models.BertClassifier.from_checkpoint(
        tmp_path / "sgd", num_labels=2
    )
    for name, value in _weights(again).items():
        np.testing.assert_array_equal(value, _weights(model.classifier)[name])
    # Trained: the head moved from its zero bias.
    assert model.classifier.classifier.output_bias.numpy().any()


def test_save_checkpoint_records_the_labels_and_long_inputs(
    tiny_release, tmp_path
):
    """A multi-label model reading long texts in chunks, saved with its
    label names: the folder's labels.json and long_inputs.json are what
    run_classifier --task_name=custom reads from an output_dir (the
    threshold and the chunks were lost: it predicted at 0.5, truncating)."""
    from modeling.data import custom
    from modeling.data import long_inputs

    model = _tiny_classifier(
        tiny_release,
        num_labels=3,
        multi_label=True,
        multi_label_threshold=0.3,
        long_inputs="chunks",
    )
    with pytest.raises(ValueError, match="label_list has 2 labels"):
        model.save_checkpoint(str(tmp_path / "x"), label_list=["a", "b"])
    assert not (tmp_path / "x").exists()
    out = tmp_path / "saved"
    model.save_checkpoint(str(out), label_list=["a", "b", "c"])
    spec = custom.TaskSpec.read(str(out / "labels.json"))
    assert (spec.task_type, spec.labels) == ("multi_label", ["a", "b", "c"])
    assert spec.multi_label_threshold == 0.3

    class Flags:
        long_inputs = head_tokens = chunk_stride = chunk_pooling = None

    saved = long_inputs.LongInputs.of(Flags, str(out))
    assert saved.to_json() == model.long_inputs.to_json()
    assert saved.strategy == "chunks"


def test_save_checkpoint_replaces_and_prunes_nothing_of_another_run(
    tiny_release, tmp_path
):
    """save_checkpoint into a folder that holds another run's checkpoints,
    a release, another config or vocabulary: refused before anything is
    written (it pruned the other run's oldest checkpoint and rewrote its
    bert_config.json). A later save of the same training goes on."""
    model = _tiny_classifier(tiny_release, num_labels=2)
    model.compile(optimizer=keras.optimizers.SGD(0.5))
    model.fit(_texts(_PAIRS), _LABELS, batch_size=4, epochs=1, verbose=0)
    folder = tmp_path / "saved"
    first = model.save_checkpoint(str(folder), keep_checkpoint_max=1)
    assert pathlib.Path(first).name == "model.ckpt-2"
    # The same model at the same step again, or another run's newer series.
    with pytest.raises(FileExistsError, match="model.ckpt-2, of step 2"):
        model.save_checkpoint(str(folder))
    # Loaded for another number of labels: said so (it blamed the config).
    with pytest.raises(
        ValueError, match=r"fine-tuned with 2 labels .* the model has 3"
    ):
        text_classifier.BertTextClassifier.from_checkpoint(
            str(folder), num_labels=3, sequence_length=16
        )
    # Another model's checkpoints (3 labels) in the folder: nothing changes.
    other = _tiny_classifier(tiny_release, num_labels=3)
    other.compile(optimizer=keras.optimizers.SGD(0.5))
    other.fit(
        _texts(_PAIRS), [0, 1, 2, 1] * 2, batch_size=4, epochs=2, verbose=0
    )
    before = {p.name: p.read_bytes() for p in folder.iterdir()}
    with pytest.raises(
        checkpoint_manager.ConfigMismatchError, match="trained with 2 labels"
    ):
        other.save_checkpoint(str(folder))
    assert {p.name: p.read_bytes() for p in folder.iterdir()} == before
    # A release folder (bert_model.ckpt): refused, unchanged.
    release = tiny_release[0]
    before = {p.name: p.read_bytes() for p in release.iterdir()}
    with pytest.raises(FileExistsError, match="released checkpoint"):
        model.save_checkpoint(str(release))
    assert {p.name: p.read_bytes() for p in release.iterdir()} == before
    # Another vocabulary or configuration beside no checkpoint.
    for name, text in (("vocab.txt", "[PAD]\n"), ("bert_config.json", "{}")):
        lone = tmp_path / f"lone_{name}"
        lone.mkdir()
        (lone / name).write_text(text)
        with pytest.raises((FileExistsError, ValueError), match=name):
            model.save_checkpoint(str(lone))
        assert [p.name for p in lone.iterdir()] == [name]
    # The same training, later: saved, its own older checkpoint pruned.
    model.fit(_texts(_PAIRS), _LABELS, batch_size=4, epochs=1, verbose=0)
    second = model.save_checkpoint(str(folder), keep_checkpoint_max=1)
    assert pathlib.Path(second).name == "model.ckpt-4"
    assert not (folder / "model.ckpt-2.index").exists()


def test_keras_reads_the_texts_without_tf_data_autotuning(
    tiny_release, monkeypatch
):
    # The autotuner's sleep can hold up an iterator's end by up to a minute
    # (input_pipeline.without_autotuning): every epoch's end in fit.
    seen = []

    def spy(self, x=None, *args, validation_data=None, **kwargs):
        for dataset in (x, validation_data):
            if dataset is not None:
                seen.append(dataset.options().autotune.enabled)

    monkeypatch.setattr(keras.Model, "fit", spy)
    monkeypatch.setattr(keras.Model, "evaluate", spy)
    model = _tiny_classifier(tiny_release, num_labels=2)
    model.compile(learning_rate=1e-3)
    model.fit(
        _texts(_PAIRS),
        _LABELS,
        batch_size=4,
        validation_data=(_texts(_PAIRS), _LABELS),
    )
    model.evaluate(_texts(_PAIRS), _LABELS, batch_size=4)
    assert seen == [False, False, False]


def test_text_classifier_bad_inputs(tiny_release):
    model = _tiny_classifier(tiny_release, num_labels=2)
    with pytest.raises(ValueError, match="8 texts but 3 labels"):
        model.fit(_texts(_PAIRS), _LABELS[:3], batch_size=4)
    with pytest.raises(ValueError, match="fewer than one batch of 32"):
        model.fit(_texts(_PAIRS), _LABELS)
    with pytest.raises(ValueError, match="label_list.index"):
        model.evaluate(_texts(_PAIRS), [str(label) for label in _LABELS])
    with pytest.raises(ValueError, match="tuple of 3"):
        model.predict(_texts(_PAIRS) + _texts(_PAIRS)[:1])
    with pytest.raises(ValueError, match="num_labels=1"):
        _tiny_classifier(tiny_release, num_labels=2, is_regression=True)


# === fit = run_classifier.py ===


def _mrpc(split):
    processor = glue.get_processor("mrpc")
    examples = getattr(processor, f"get_{split}_examples")(str(MRPC))
    texts = (
        np.array([e.text_a for e in examples]),
        np.array([e.text_b for e in examples]),
    )
    return texts, np.array([int(e.label) for e in examples])


@pytest.fixture(scope="module")
def both_runs(minilm_small_ckpt, tmp_path_factory):
    """run_classifier's training (in process, as the script's main() runs
    it) and BertTextClassifier.fit, from the same checkpoint with the same
    seed and settings: 16 MRPC pairs, batch 4, 1 epoch = 4 steps,
    learning rate 1e-4 (no warmup step: int(4 * 0.1) = 0), seq 32, dynamic
    padding (both defaults), dropout on."""
    out = tmp_path_factory.mktemp("run_classifier")
    settings = classifier_lib.Settings(
        data_dir=str(MRPC),
        task_name="MRPC",
        bert_config_file=str(minilm_small_ckpt / "bert_config.json"),
        vocab_file=str(minilm_small_ckpt / "vocab.txt"),
        init_checkpoint=str(minilm_small_ckpt / "bert_model.ckpt"),
        output_dir=str(out),
        max_seq_length=SEQ,
        do_train=True,
        do_eval=True,
        train_batch_size=4,
        eval_batch_size=8,
        num_train_epochs=1.0,
        random_seed=SEED,
    )
    settings.run_config.learning_rate = 1e-4
    results = classifier_lib.run(settings)

    keras.utils.set_random_seed(SEED)
    model = text_classifier.BertTextClassifier.from_checkpoint(
        minilm_small_ckpt, num_labels=2, sequence_length=SEQ
    )
    model.compile(learning_rate=1e-4)
    history = model.fit(*_mrpc("train"), batch_size=4, seed=SEED, verbose=0)
    metrics = model.evaluate(
        *_mrpc("dev"), batch_size=8, return_dict=True, verbose=0
    )
    return {
        "results": results,
        "checkpoint": checkpoints.read_checkpoint(str(out / "model.ckpt-4")),
        "model": model,
        "history": history.history,
        "metrics": metrics,
    }


def test_fit_ends_with_run_classifier_weights(both_runs, minilm_small_ckpt):
    model, want = both_runs["model"], both_runs["checkpoint"]
    start = checkpoints.read_checkpoint(str(minilm_small_ckpt))
    moved = 0.0
    for variable in model.classifier.trainable_variables:
        name = checkpoints.variable_name(variable)
        tolerance.assert_float32_close(
            variable.numpy(), want[name], err_msg=name
        )
        if name in start:
            moved = max(moved, np.abs(want[name] - start[name]).max())
    # Four updates of 1e-4 moved the weights far beyond float rounding.
    assert moved > 1e-5
    slots = model.optimizer.checkpoint_variables()
    assert int(slots.pop("global_step").numpy()) == want["global_step"] == 4
    # A slot is a sum of gradients, and a gradient a sum of terms that
    # cancel (a LayerNorm's gamma: over every token; the attention's key
    # bias: exactly, a softmax ignores a shift of a query's scores), so an
    # element's rounding scales with the terms, not with it: each kind of
    # slot is held to the largest of its kind (the updates they make are
    # held per weight above).
    kinds = {"adam_m", "adam_v"}
    scale = {
        kind: max(
            tolerance.magnitude(want[name])
            for name in slots
            if name.endswith(kind)
        )
        for kind in kinds
    }
    for name, slot in slots.items():
        tolerance.assert_float32_close(
            slot.numpy(),
            want[name],
            scale=scale[name.rsplit("/", 1)[1]],
            err_msg=name,
        )


def test_fit_gives_run_classifier_dev_metrics(both_runs):
    results, metrics = both_runs["results"], both_runs["metrics"]
    # Accuracy counts the same argmaxes; the loss is the mean of the same
    # per-example losses (run_classifier sums them in float64).
    assert metrics["accuracy"] == results["eval_accuracy"]
    tolerance.assert_float32_close(metrics["loss"], results["eval_loss"])
    assert len(both_runs["history"]["loss"]) == 1


def test_run_classifier_predicts_from_the_keras_checkpoint(
    both_runs, tmp_path, caplog
):
    """save_checkpoint writes a folder that `run_classifier.py --do_predict
    --output_dir=<it>` reads (what the script's main() runs, in process):
    test_results.tsv holds the Keras model's probabilities."""
    model = both_runs["model"]
    out = tmp_path / "keras_out"
    prefix = model.save_checkpoint(str(out))
    assert pathlib.Path(prefix).name == "model.ckpt-4"
    settings = classifier_lib.Settings(
        data_dir=str(MRPC),
        task_name="MRPC",
        bert_config_file=str(out / "bert_config.json"),
        vocab_file=str(out / "vocab.txt"),
        output_dir=str(out),
        max_seq_length=SEQ,
        do_predict=True,
    )
    with caplog.at_level("INFO"):
        classifier_lib.run(settings)
    assert "model.ckpt-4" in caplog.text
    lines = (out / "test_results.tsv").read_text().splitlines()
    probs = np.array([[float(v) for v in line.split("\t")] for line in lines])
    texts, _ = _mrpc("test")
    want = tf.nn.softmax(model.predict(texts, verbose=0)).numpy()
    assert probs.shape == want.shape == (5, 2)
    tolerance.assert_float32_close(probs, want, scale=1.0)


def test_bad_labels_and_inputs_are_one_line_errors(tiny_release):
    """Labels the loss would take wrongly (an id out of range had loss 0, a
    2.7 became class 2), texts that are not strings (None and NaN were
    predicted as "None" and "nan"), one string Tensor (its bytes were
    texts), unbatched datasets, batch_size 0: each one line, nothing run."""
    model = _tiny_classifier(tiny_release, num_labels=2)
    model.compile(optimizer=keras.optimizers.SGD(0.1))
    texts = _texts(_PAIRS)[0]
    for labels, message in (
        ([0, 1, 2, 0, 1, 0, 1, 0], "Label 2 is 2, not a class id 0..1"),
        ([0, 1, -1, 0, 1, 0, 1, 0], "Label 2 is -1"),
        ([0.0, 1.0, 2.7, 0, 1, 0, 1, 0], "Label 2 is 2.7"),
        ([[1, 0]] * 8, r"one per text \(shape \[N\]\)"),
    ):
        with pytest.raises(ValueError, match=message):
            model.fit(texts, labels, batch_size=4, verbose=0)
        with pytest.raises(ValueError, match=message):
            model.evaluate(texts, labels, verbose=0)
    with pytest.raises(ValueError, match="Text 1 is None"):
        model.predict(["a cat", None], verbose=0)
    with pytest.raises(ValueError, match="Text 0 is nan"):
        model.fit([float("nan")] * 8, [0] * 8, batch_size=4, verbose=0)
    with pytest.raises(ValueError, match=r"one-dimensional.*shape \(\)"):
        model.predict(tf.constant("hello world"), verbose=0)
    with pytest.raises(ValueError, match="batch_size=0"):
        model.fit(texts, _LABELS, batch_size=0, verbose=0)
    single = tf.data.Dataset.from_tensor_slices((texts, _LABELS))
    with pytest.raises(ValueError, match="single .*batch"):
        model.evaluate(single, verbose=0)
    with pytest.raises(ValueError, match="single texts, not batches"):
        model.predict(tf.data.Dataset.from_tensor_slices(texts), verbose=0)
    with pytest.raises(ValueError, match="labels come from it"):
        model.evaluate(single.batch(4), _LABELS, verbose=0)
    multi = _tiny_classifier(tiny_release, num_labels=3, multi_label=True)
    multi.compile(optimizer=keras.optimizers.SGD(0.1))
    with pytest.raises(ValueError, match="Label 0 is \\[2, 0, 1\\]"):
        multi.fit(texts, [[2, 0, 1]] * 8, batch_size=4, verbose=0)
    with pytest.raises(ValueError, match="rows of 3 0/1 values"):
        multi.fit(texts, [1] * 8, batch_size=4, verbose=0)


# Slow (~35 s on a slow 2-vCPU VM: three fits, two traces).
@pytest.mark.slow
def test_a_second_fit_after_the_schedule_ended_is_refused(tiny_release):
    """fit plans the original's schedule (decay to 0 at its last step): a
    second fit trained at learning rate 0, silently."""
    model = _tiny_classifier(tiny_release, num_labels=2)
    model.compile()
    model.fit(_texts(_PAIRS), _LABELS, batch_size=4, epochs=1, verbose=0)
    with pytest.raises(ValueError, match="schedule ended at step 2"):
        model.fit(_texts(_PAIRS), _LABELS, batch_size=4, epochs=1, verbose=0)
    model.compile()  # A new schedule: trains again.
    before = _weights(model.classifier)["output_weights"]
    model.fit(_texts(_PAIRS), _LABELS, batch_size=4, epochs=1, verbose=0)
    assert np.abs(_weights(model.classifier)["output_weights"] - before).max()


def test_head_tail_call_reads_the_texts_as_predict(tiny_release):
    """long_inputs="head_tail": calling the model on texts keeps each long
    text's tail, as predict (and fit) do; it truncated."""
    model = _tiny_classifier(
        tiny_release, num_labels=2, long_inputs="head_tail"
    )
    long_text = " ".join(["the cat sat on the mat"] * 6) + " hello world"
    texts = np.array([long_text, "a dog"], dtype=object)
    want = model.predict(texts, verbose=0)
    got = model(tf.constant(texts)).numpy()
    tolerance.assert_float32_close(got, want)
    cut = _tiny_classifier(tiny_release, num_labels=2)
    cut.classifier.set_weights(model.classifier.get_weights())
    assert np.abs(cut(tf.constant(texts)).numpy()[0] - want[0]).max() > 1e-6


_ON_JAX = """
import json, sys
import numpy as np
from modeling import text_classifier, text_embedder
texts = json.loads(sys.argv[2])
m = text_classifier.BertTextClassifier.from_checkpoint(
    sys.argv[3], sequence_length=16
)
e = text_embedder.BertTextEmbedder.from_checkpoint(
    sys.argv[1], sequence_length=16
)
import keras
refused = []
for exporting in (m, e):
    try:
        exporting.export_for_serving(sys.argv[3] + "_export")
    except ValueError as error:
        refused.append(str(error))
windows = text_classifier.BertTextClassifier.from_checkpoint(
    sys.argv[3], sequence_length=16, long_inputs="chunks"
)
for run in (windows.fit, windows.evaluate):
    try:
        run(texts, [0, 1, 0], batch_size=1)
    except ValueError as error:
        refused.append(str(error))
print(json.dumps({
    "backend": keras.backend.backend(),
    "predict": m.predict(texts, verbose=0).tolist(),
    "encode": e.encode(texts).tolist(),
    "refused": refused,
}))
"""


def test_predict_and_encode_on_the_jax_backend(tiny_release, tmp_path):
    """Under KERAS_BACKEND=jax, predict and encode run through the JAX
    predictor (they failed: the TensorFlow one needs a tf.distribute
    strategy) and give TensorFlow's numbers (the classifier's head from a
    checkpoint this process saved)."""
    import json

    import script_runner

    from modeling import text_embedder

    folder, _ = tiny_release
    texts = ["the cat sat on the mat", "hello world", "a dog"]
    model = _tiny_classifier(tiny_release, num_labels=2)
    model.save_checkpoint(str(tmp_path / "saved"))
    proc = script_runner.python(
        [
            "-c",
            _ON_JAX,
            str(folder),
            json.dumps(texts),
            str(tmp_path / "saved"),
        ],
        env={"KERAS_BACKEND": "jax"},
        timeout=300,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    got = json.loads(proc.stdout.strip().splitlines()[-1])
    assert got["backend"] == "jax"
    # A TensorFlow SavedModel: one line (was a JAX tracing traceback);
    # windows combined by TensorFlow's ops: one line (was "Unable to
    # automatically build the model").
    assert len(got["refused"]) == 4
    assert all(
        m.startswith("export_for_serving writes a TensorFlow SavedModel")
        for m in got["refused"][:2]
    )
    assert got["refused"][2].startswith(
        "fit with long_inputs='chunks' runs on the TensorFlow backend only"
    )
    assert got["refused"][3].startswith("evaluate with long_inputs='chunks'")
    tolerance.assert_float32_close(
        np.array(got["predict"]), model.predict(texts, verbose=0)
    )
    embedder = text_embedder.BertTextEmbedder.from_checkpoint(
        folder, sequence_length=16
    )
    tolerance.assert_float32_close(
        np.array(got["encode"]), embedder.encode(texts), scale=1.0
    )
