"""--long_inputs=truncate|head_tail|chunks (modeling/data/long_inputs.py):
the windows, truncate's features for texts that fit, the combination of a
text's windows, and run_classifier on a task that only the end of a text
decides."""

import csv
import json
import pathlib
import re

import numpy as np
import pytest
from constants import TINY_CONFIG
from constants import TINY_VOCAB

from modeling import errors
from modeling.data import classifier_data
from modeling.data import glue
from modeling.data import long_inputs
from modeling.tasks.settings import common as settings_common
from modeling.text import tokenization

TESTDATA = pathlib.Path(__file__).parent / "testdata"
SHARED_MRPC = pathlib.Path(__file__).parents[2] / "shared/data/glue/MRPC"
STRATEGIES = ("head_tail", "chunks")


def test_word_windows_overlap_whole_words_and_advance():
    counts = [2, 1, 3, 1, 2, 2, 1]
    assert long_inputs.word_windows(counts, 4) == [
        (0, 2),
        (2, 4),
        (4, 6),
        (6, 7),
    ]
    # Up to 2 pieces of overlap, whole words only.
    windows = long_inputs.word_windows(counts, 4, overlap=2)
    assert windows == [(0, 2), (1, 3), (3, 5), (4, 6), (5, 7)]
    for (start, end), (next_start, _) in zip(windows, windows[1:]):
        assert start < next_start <= end
        assert sum(counts[next_start:end]) <= 2
    for start, end in windows:
        assert (
            sum(min(c, 4) for c in counts[start:end]) <= 4 or end == start + 1
        )
    # Stepping back never leaves the next word out: each window takes a
    # word the last one lacked (a long word after short ones made windows
    # that were subsets of the one before, hundreds of them a text).
    counts = [1] * 8 + [5] + [1] * 3
    windows = long_inputs.word_windows(counts, 10, overlap=8)
    assert windows == [(0, 8), (3, 9), (5, 11), (7, 12)]
    for (_, end), (_, next_end) in zip(windows, windows[1:]):
        assert next_end > end
    config = long_inputs.LongInputs("chunks", chunk_stride=64)
    config.check(128)
    a = [[f"a{i}"] for i in range(800)]
    b = [[f"b{i}"] for i in range(1000)]
    # The longer text has 125 - 62 = 63 pieces a window; the overlap is
    # held to half of that: 1000 / 32 windows, not 938.
    assert len(list(config.windows(a, b, 128))) <= 1000 // 31 + 1
    # Every word is in some window; a word longer than a window is alone.
    assert long_inputs.word_windows([9, 1], 4, overlap=3) == [(0, 1), (1, 2)]
    assert long_inputs.word_windows([], 4) == []


def _words(n, prefix="w"):
    return [[f"{prefix}{i}"] for i in range(n)]


def test_head_tail_keeps_the_head_and_the_tail():
    config = long_inputs.LongInputs("head_tail", head_tokens=3)
    (a, b), *rest = config.windows(_words(20), None, 12)
    assert not rest and b is None
    assert a == ["w0", "w1", "w2"] + [f"w{i}" for i in range(13, 20)]
    # The head takes at most half of the room.
    config = long_inputs.LongInputs("head_tail", head_tokens=100)
    (a, _), *_ = config.windows(_words(20), None, 12)
    assert a == [f"w{i}" for i in range(5)] + [f"w{i}" for i in range(15, 20)]


def test_a_head_tail_cut_counts_as_truncated(uncased_vocab_file):
    """--long_inputs=head_tail logged no count of the texts it cut, as
    truncate does."""
    tokenizer = tokenization.FullTokenizer(uncased_vocab_file, True)
    config = long_inputs.LongInputs("head_tail", head_tokens=2)
    for words, cut in ((4, False), (40, True)):
        example = classifier_data.InputExample("g", "the " * words, None, "0")
        (feature,) = classifier_data.convert_example_windows(
            0, example, ["0"], 12, tokenizer, long_inputs=config
        )
        assert feature.truncated == cut


def test_pairs_keep_the_shorter_text_and_window_the_longer():
    question = _words(3, "q")
    config = long_inputs.LongInputs("chunks")
    windows = list(config.windows(question, _words(30), 16))
    # 16 - 3 = 13 pieces: the 3 of the question, 10 of the document each.
    assert [b for _, b in windows] == [
        [f"w{i}" for i in range(s, min(s + 10, 30))] for s in (0, 10, 20)
    ]
    assert all(a == ["q0", "q1", "q2"] for a, _ in windows)
    # The order of the pair is kept when the longer text comes first.
    windows = list(config.windows(_words(30), question, 16))
    assert all(b == ["q0", "q1", "q2"] for _, b in windows)
    # A shorter text over half the room is cut from its end.
    config = long_inputs.LongInputs("head_tail", head_tokens=2)
    ((a, b),) = config.windows(_words(10, "q"), _words(40), 16)
    assert a == [f"q{i}" for i in range(6)]
    assert b == ["w0", "w1"] + [f"w{i}" for i in range(35, 40)]


def test_combining_windows():
    config = long_inputs.LongInputs("chunks")
    outputs = np.array([[1.0, 0.0], [3.0, 2.0], [5.0, 5.0], [0.0, 1.0]], "f4")
    starts, combined = config.per_example([7, 7, 8, 9], outputs)
    assert starts.tolist() == [0, 2, 3]
    np.testing.assert_allclose(combined, [[2, 1], [5, 5], [0, 1]])
    grouped = list(config.grouped(zip([7, 7, 8, 9], outputs)))
    np.testing.assert_allclose([g for g, _ in grouped], combined)
    assert [n for _, n in grouped] == [2, 1, 1]
    maxed = long_inputs.LongInputs("chunks", chunk_pooling="max")
    np.testing.assert_allclose(
        maxed.per_example([7, 7, 8, 9], outputs)[1], [[3, 2], [5, 5], [0, 1]]
    )


@pytest.mark.parametrize("kind", ["classification", "multi_label"])
def test_training_loss_of_windows(kind):
    """Every text counts once. mean: each window's loss weighs 1 / its
    text's windows. max: the loss is that of the maximum of a text's
    windows in the batch (LongInputs.per_example, as evaluation combines
    them), a text cut by the batch's edge weighing its share."""
    import tensorflow as tf

    from modeling import task_kinds
    from modeling.tasks import classifier

    # Text 4 ends the previous batch (2 of its 3 windows are here), 7 and 9
    # are whole, 2 continues into the next batch (1 of 2).
    index = np.array([4, 4, 7, 7, 7, 9, 2], np.int32)
    windows = np.array([3, 3, 3, 3, 3, 1, 2], np.int32)
    logits = np.random.RandomState(0).normal(size=[7, 3]).astype("f4")
    if kind == "classification":
        labels = np.array([2, 2, 0, 0, 0, 1, 1], np.int32)
    else:
        labels = np.array([[1, 0, 1]] * 2 + [[0, 1, 0]] * 3 + [[1, 1, 0]] * 2)
        labels = labels.astype("f4")
    features = {
        "label_ids": tf.constant(labels),
        "example_index": tf.constant(index),
        "num_windows": tf.constant(windows),
    }
    task_kind = task_kinds.get(kind)

    def loss(logits, labels, weights):
        losses = task_kind.example_loss(logits, labels).numpy()
        return (weights * losses).sum() / weights.sum()

    mean = long_inputs.LongInputs("chunks")
    got = classifier.loss_fn(task_kind, mean)(features, tf.constant(logits))
    np.testing.assert_allclose(
        float(got["loss"]), loss(logits, labels, 1 / windows), rtol=1e-6
    )
    maximum = long_inputs.LongInputs("chunks", chunk_pooling="max")
    got = classifier.loss_fn(task_kind, maximum)(features, tf.constant(logits))
    starts, combined = maximum.per_example(index, logits)
    share = np.array([2 / 3, 1.0, 1.0, 1 / 2])
    expected = loss(combined, labels[starts], share)
    np.testing.assert_allclose(float(got["loss"]), expected, rtol=1e-6)
    correct = np.asarray(task_kind.correct(combined, labels[starts]))
    np.testing.assert_allclose(
        float(got["accuracy"]), correct.reshape(4, -1).mean(-1).mean()
    )
    # The windows' own losses would give another.
    assert abs(loss(logits, labels, 1 / windows) - expected) > 1e-3


def test_training_shuffles_whole_texts():
    """--long_inputs=chunks training rows: texts in a shuffled order, each
    text's windows consecutive and complete."""
    import tensorflow as tf

    from modeling.data import input_pipeline

    windows = [3, 1, 4, 2, 5, 1, 2]
    index = np.repeat(np.arange(len(windows)), windows)
    rows = tf.data.Dataset.from_tensor_slices(
        {
            "example_index": index.astype(np.int64),
            "num_windows": np.repeat(windows, windows).astype(np.int64),
            "position": np.concatenate([np.arange(n) for n in windows]),
        }
    )
    got = list(
        input_pipeline.shuffled_texts(rows, seed=3)
        .take(3 * len(index))
        .as_numpy_iterator()
    )
    texts, positions = [], []
    for row in got:
        if row["position"] == 0:
            texts.append(int(row["example_index"]))
            positions.append([])
        positions[-1].append(int(row["position"]))
    # The rows taken may end inside a text.
    texts, positions = texts[:-1], positions[:-1]
    assert all(p == list(range(windows[t])) for t, p in zip(texts, positions))
    # Repeated, then shuffled (the original's order): epochs mix.
    assert sorted(set(texts)) == list(range(len(windows)))
    assert texts[: len(windows)] != sorted(texts[: len(windows)])


def test_bad_settings_are_one_line_errors():
    with pytest.raises(ValueError, match="--long_inputs must be one of"):
        long_inputs.LongInputs("middle")
    with pytest.raises(ValueError, match="--chunk_pooling must be one of"):
        long_inputs.LongInputs("chunks", chunk_pooling="sum")
    with pytest.raises(ValueError, match="would not advance"):
        long_inputs.LongInputs("chunks", chunk_stride=125).check(128)


def _mrpc_dev():
    folder = SHARED_MRPC if (SHARED_MRPC / "dev.tsv").exists() else None
    folder = folder or TESTDATA / "cls_mrpc"
    return glue.get_processor("mrpc").get_dev_examples(str(folder))


@pytest.mark.parametrize("strategy", STRATEGIES)
def test_rows_that_fit_get_truncates_features(strategy, uncased_vocab_file):
    """MRPC dev (../shared's 408 pairs when present, else the test
    folder's): every pair that fits in 128 pieces gets exactly truncate's
    one feature; at 48 pieces the long ones get other windows."""
    tokenizer = tokenization.FullTokenizer(uncased_vocab_file, True)
    config = long_inputs.LongInputs(strategy, head_tokens=4)
    examples = _mrpc_dev()
    fitting = windowed = 0
    for seq in (128, 48):
        for i, example in enumerate(examples):
            want = classifier_data.convert_single_example(
                i, example, ["0", "1"], seq, tokenizer
            )
            got = list(
                classifier_data.convert_example_windows(
                    i, example, ["0", "1"], seq, tokenizer, long_inputs=config
                )
            )
            if not want.truncated:
                fitting += 1
                assert len(got) == 1
                for name in ("input_ids", "input_mask", "segment_ids"):
                    assert getattr(got[0], name) == getattr(want, name)
                assert got[0].label_id == want.label_id
            else:
                assert seq == 48
                # head_tail's tail is not truncate's; chunks' first window
                # may be truncate's, and more windows follow.
                if strategy == "head_tail":
                    assert got[0].input_ids != want.input_ids
                assert all(g.num_windows == len(got) for g in got)
                if strategy == "head_tail":
                    assert len(got) == 1
                windowed += len(got) > 1
    assert fitting > len(examples)  # All at 128, some at 48.
    assert (windowed > 0) == (strategy == "chunks")


def test_in_graph_windows_are_the_written_ones(uncased_vocab_file):
    """The serving SavedModel's in-graph windows (TextPreprocessor.windows)
    are run_classifier's records, window for window, for pairs and single
    texts, at 48 pieces and at 20 with a stride of 5 (MRPC dev: up to 12
    windows a text)."""
    import tensorflow as tf

    from modeling.text import in_graph

    tokenizer = tokenization.FullTokenizer(uncased_vocab_file, True)
    examples = _mrpc_dev()[:64]
    singles = [
        classifier_data.InputExample(
            e.guid, f"{e.text_a} {e.text_b}", None, e.label
        )
        for e in examples
    ]
    # (20, 12): a stride over half a pair's room for its longer text.
    for seq, stride in ((48, 0), (20, 5), (20, 12)):
        preprocessor = in_graph.TextPreprocessor(uncased_vocab_file, True, seq)
        for strategy in STRATEGIES:
            config = long_inputs.LongInputs(
                strategy, head_tokens=4, chunk_stride=stride
            )
            for rows in (examples, singles):
                want, text = [], []
                for i, example in enumerate(rows):
                    for f in classifier_data.convert_example_windows(
                        i,
                        example,
                        ["0", "1"],
                        seq,
                        tokenizer,
                        long_inputs=config,
                    ):
                        want.append([f.input_ids, f.input_mask, f.segment_ids])
                        text.append(i)
                pairs = rows is examples
                features, got_text = preprocessor.windows(
                    config,
                    tf.constant([e.text_a for e in rows]),
                    tf.constant([e.text_b for e in rows]) if pairs else None,
                )
                got = np.stack(
                    [
                        features[k].numpy()
                        for k in ("input_ids", "input_mask", "segment_ids")
                    ],
                    axis=1,
                )
                np.testing.assert_array_equal(got, np.array(want))
                np.testing.assert_array_equal(got_text.numpy(), text)
                assert (len(want) > len(rows)) == (strategy == "chunks")
    # A batch in which no text has a word (a serving request of [""]):
    # one [CLS] [SEP] window each, as in a mixed batch (it crashed).
    for texts_b in (None, tf.constant(["", " "])):
        features, got_text = preprocessor.windows(
            long_inputs.LongInputs("chunks", chunk_stride=2),
            tf.constant(["", "\u200b"]),
            texts_b,
        )
        assert got_text.numpy().tolist() == [0, 1]
        cls, sep = tokenizer.convert_tokens_to_ids(["[CLS]", "[SEP]"])
        assert features["input_ids"].numpy()[:, :2].tolist() == [[cls, sep]] * 2


# === run_classifier on long texts ===

FILLER = TINY_VOCAB[5:14]  # the ... world


def _long_task(folder, rng, count, words=60):
    """Texts of `words` filler words; the label is "good" or "bad" among
    the last 5 words."""
    folder.mkdir(parents=True, exist_ok=True)
    for split, n in (("train", count), ("dev", 32), ("test", 16)):
        with open(folder / f"{split}.csv", "w", newline="") as f:
            writer = csv.writer(f)
            writer.writerow(["text", "label"])
            for _ in range(n):
                label = ("good", "bad")[int(rng.randint(2))]
                text = list(rng.choice(FILLER, words))
                text[words - 1 - int(rng.randint(5))] = label
                writer.writerow([" ".join(text), label])
    return folder


def _tiny_checkpoint(folder):
    import tensorflow as tf

    from modeling import checkpoints
    from modeling import config as config_lib
    from modeling import models

    folder.mkdir(parents=True, exist_ok=True)
    config = config_lib.BertConfig.from_dict(
        {**TINY_CONFIG, "hidden_dropout_prob": 0.0}
    )
    config.to_json_file(str(folder / "bert_config.json"))
    (folder / "vocab.txt").write_text("".join(t + "\n" for t in TINY_VOCAB))
    tf.keras.utils.set_random_seed(3)
    model = models.BertClassifier(config, 2)
    checkpoints.write_checkpoint(
        str(folder / "bert_model.ckpt"),
        {checkpoints.variable_name(v): v.numpy() for v in model.weights},
    )
    return folder


def _run(data, model, out, **values):
    import dataclasses

    from modeling.tasks import classifier

    runtime = values.pop("predict_runtime", None)
    settings = classifier.Settings(
        task_name="custom",
        data_dir=None,
        train_file=str(data / "train.csv"),
        dev_file=str(data / "dev.csv"),
        test_file=str(data / "test.csv"),
        text_a_column="text",
        label_column="label",
        bert_config_file=str(model / "bert_config.json"),
        vocab_file=str(model / "vocab.txt"),
        init_checkpoint=str(model / "bert_model.ckpt"),
        output_dir=str(out),
        max_seq_length=16,
        train_batch_size=16,
        num_train_epochs=5.0,
        random_seed=1,
        **values,
    )
    settings.run_config = dataclasses.replace(
        settings.run_config, learning_rate=1e-3, predict_runtime=runtime
    )
    return classifier.run(settings)


@pytest.mark.slow
def test_chunks_learn_what_truncate_cannot_see(tmp_path):
    """The label word is among the last 5 of 60: past the first window of
    14 pieces. Truncate stays near chance; chunks and head_tail learn it. A predict-only run reads the
    strategy from long_inputs.json, predictions.jsonl counts the windows,
    and both servers of the export (the SavedModel's graph, TF Lite
    without TensorFlow) window the texts the same."""
    rng = np.random.RandomState(0)
    data = _long_task(tmp_path / "data", rng, 512)
    model = _tiny_checkpoint(tmp_path / "model")
    accuracy = {}
    for strategy in ("truncate", "chunks", "head_tail"):
        out = tmp_path / strategy
        results = _run(
            data,
            model,
            out,
            do_train=True,
            do_eval=True,
            long_inputs=strategy,
            head_tokens=4,
        )
        accuracy[strategy] = float(results["eval_accuracy"])
    assert accuracy["truncate"] <= 0.75, accuracy
    assert accuracy["chunks"] >= 0.95, accuracy
    assert accuracy["head_tail"] >= 0.95, accuracy
    saved = json.loads((tmp_path / "chunks" / "long_inputs.json").read_text())
    assert saved["long_inputs"] == "chunks"
    export = tmp_path / "export"
    results = _run(
        data,
        model,
        tmp_path / "chunks",
        do_eval=True,
        do_predict=True,
        export_dir=str(export),
        predict_runtime="tflite",
    )
    assert float(results["eval_accuracy"]) == accuracy["chunks"]
    rows = [
        json.loads(line)
        for line in (tmp_path / "chunks" / "predictions.jsonl").open()
    ]
    assert len(rows) == 16
    assert all(row["num_windows"] == 5 for row in rows), rows[0]
    # The export records the strategy; its TF-free server windows the same.
    from modeling.tasks import lite

    info = json.loads(
        (export / "assets.extra" / "bert_export.json").read_text()
    )
    assert info["long_inputs"] == "chunks"
    with open(data / "test.csv", newline="") as f:
        test = list(csv.DictReader(f))
    served = lite.LiteClassifier(export).predict([r["text"] for r in test])
    assert [r["label"] for r in served] == [r["label"] for r in rows]
    for mine, theirs in zip(served, rows):
        for label, p in mine["probabilities"].items():
            assert abs(p - theirs["probabilities"][label]) <= 1e-5
    # So does the SavedModel's serving_default, in its graph.
    import tensorflow as tf

    serve = tf.saved_model.load(str(export)).signatures["serving_default"]
    out = serve(text_a=tf.constant([r["text"] for r in test]))
    assert out["num_windows"].numpy().tolist() == [5] * 16
    labels = [r["label"] for r in rows]
    want = [[r["probabilities"][k] for k in ("bad", "good")] for r in rows]
    assert out["predictions"].numpy().tolist() == [
        ["bad", "good"].index(label) for label in labels
    ]
    np.testing.assert_allclose(out["probabilities"].numpy(), want, atol=1e-5)


@pytest.fixture(scope="module")
def head_tail_run(tmp_path_factory):
    """(data, model, output_dir) of a tiny run trained with
    --long_inputs=head_tail --head_tokens=4 (16 texts, 5 steps)."""
    root = tmp_path_factory.mktemp("head_tail")
    data = _long_task(root / "data", np.random.RandomState(1), 16)
    model = _tiny_checkpoint(root / "model")
    out = root / "out"
    _run(
        data, model, out, do_train=True, long_inputs="head_tail", head_tokens=4
    )
    return data, model, out


@pytest.mark.parametrize(
    ("flags", "given"),
    [
        ({"long_inputs": "chunks"}, "--long_inputs=chunks"),
        ({"chunk_pooling": "max"}, "--chunk_pooling=max"),
        ({"long_inputs": "head_tail", "head_tokens": 5}, "--head_tokens=5"),
    ],
)
def test_a_flag_other_than_the_trained_folders_is_refused(
    head_tail_run, flags, given
):
    """A predict-only run in a folder trained with head_tail: a long-input
    flag given with another value than its long_inputs.json is one line
    naming the flag and the file, before anything is written."""
    import script_runner

    data, model, out = head_tail_run
    before = script_runner.folder_digests(out)
    name = given[2:].split("=")[0]
    with pytest.raises(ValueError) as e:
        _run(data, model, out, do_predict=True, **flags)
    message = str(e.value)
    path = out / long_inputs.FILE
    saved = json.loads(path.read_text())[name]
    assert re.fullmatch(
        f"{re.escape(given)} differs from {re.escape(str(path))} "
        f"\\({name}: {saved}\\), which this output_dir's checkpoints were "
        "trained with: .*",
        message,
    ), message
    assert errors.is_user_error(e.value)
    assert script_runner.folder_digests(out) == before


def test_the_trained_folders_long_inputs_by_default(head_tail_run, caplog):
    """Flags left out: the folder's long_inputs.json, logged; flags equal
    to it are accepted."""
    import logging

    from modeling.tasks import classifier

    data, model, out = head_tail_run
    want = long_inputs.LongInputs("head_tail", head_tokens=4)
    for flags in ({}, {"long_inputs": "head_tail", "head_tokens": 4}):
        settings = classifier.Settings(
            task_name="custom",
            data_dir=None,
            test_file=str(data / "test.csv"),
            bert_config_file=str(model / "bert_config.json"),
            vocab_file=str(model / "vocab.txt"),
            output_dir=str(out),
            max_seq_length=16,
            do_predict=True,
            **flags,
        )
        with caplog.at_level(logging.INFO):
            assert classifier.prepare(settings).long_inputs == want
    assert f"Long inputs from {out / long_inputs.FILE}" in caplog.text


def test_head_tokens_above_half_of_the_room_is_refused(tmp_path):
    """max_seq_length 16: 14 pieces of room, a head of at most 7 (the
    default 128 stays the documented "at most half")."""
    import script_runner

    def of(head_tokens, strategy="head_tail"):
        settings = settings_common.LongInputSettings(
            long_inputs=strategy, head_tokens=head_tokens
        )
        return long_inputs.LongInputs.of(settings, None, 16)

    assert of(7).head_tokens == 7
    # Another strategy reads no head: bench/long_inputs.py gives every
    # strategy one --head_tokens, and chunks were refused for it.
    assert of(8, "chunks").strategy == "chunks"
    assert of(None).head_tokens == long_inputs.DEFAULT_HEAD_TOKENS
    message = (
        "--head_tokens=8 is above half of the room: at most 7 "
        "(max_seq_length 16 less [CLS] and [SEP], halved)"
    )
    with pytest.raises(ValueError, match=re.escape(message)):
        of(8)
    # Through run_classifier: refused before the output folder exists.
    data = _long_task(tmp_path / "data", np.random.RandomState(2), 4)
    model = tmp_path / "model"
    model.mkdir()
    (model / "bert_config.json").write_text(json.dumps(TINY_CONFIG))
    (model / "vocab.txt").write_text("".join(t + "\n" for t in TINY_VOCAB))
    before = script_runner.folder_digests(tmp_path)
    with pytest.raises(ValueError, match=re.escape(message)):
        _run(
            data,
            model,
            tmp_path / "out",
            do_train=True,
            long_inputs="head_tail",
            head_tokens=8,
        )
    assert script_runner.folder_digests(tmp_path) == before
    assert not (tmp_path / "out").exists()


# === The Keras classes ===


def _tiny_keras(kind, long_inputs, seq=8, head_scale=300.0):
    import tensorflow as tf

    from modeling import config as config_lib
    from modeling import models
    from modeling import preprocessing
    from modeling.text_classifier import BertTextClassifier
    from modeling.text_embedder import BertTextEmbedder

    config = config_lib.BertConfig.from_dict(TINY_CONFIG)
    tf.keras.utils.set_random_seed(4)
    preprocessor = preprocessing.BertPreprocessor(TINY_VOCAB, True, seq)
    if kind == "classifier":
        classifier = models.BertClassifier(config, 2)
        # Logits of order 1 (a fresh head's are of order 0.01): differences
        # between windows show above float rounding.
        for weight in classifier.weights:
            if "output_weights" in weight.path:
                weight.assign(weight * head_scale)
        return BertTextClassifier(
            classifier, preprocessor, long_inputs=long_inputs
        )
    return BertTextEmbedder(
        models.BertEmbedder(config), preprocessor, long_inputs=long_inputs
    )


@pytest.mark.parametrize("kind", ["classifier", "embedder"])
def test_keras_chunks_combine_the_windows(kind, tmp_path):
    """BertTextClassifier.predict / BertTextEmbedder.encode with chunks: a
    long text's output is the mean of its windows' (each word of this
    vocabulary is one piece: windows of 6 words at sequence length 8); a
    text that fits gets truncate's; the .keras round trip keeps the
    strategy, evaluate combines the windows in the graph, and the serving
    export gives the same outputs."""
    import keras
    import tensorflow as tf

    model = _tiny_keras(kind, "chunks")
    run = model.predict if kind == "classifier" else model.encode
    words = FILLER * 2  # 18 words: windows of 6, 6 and 6.
    long_text = " ".join(words[:15])
    windows = [" ".join(words[i : i + 6]) for i in (0, 6, 12)]
    windows[-1] = " ".join(words[12:15])
    short = "the cat sat"
    got = run([short, long_text])
    truncate = _tiny_keras(kind, None)
    plain = truncate.predict if kind == "classifier" else truncate.encode
    want = plain(windows)
    combined = want.mean(axis=0)
    if kind == "embedder":
        combined = combined / np.linalg.norm(combined)
    np.testing.assert_allclose(got[1], combined, rtol=1e-4, atol=1e-5)
    np.testing.assert_allclose(got[0], plain([short])[0], rtol=1e-4, atol=1e-5)
    # The windows differ by far more than the combination's error.
    error = np.max(np.abs(got[1] - combined))
    assert np.max(np.ptp(want, axis=0)) > 20 * error, (want, error)
    assert np.max(np.abs(plain([long_text])[0] - got[1])) > 20 * error
    # Calling the model on raw texts combines the windows too.
    called = np.asarray(model(tf.constant([short, long_text])))
    np.testing.assert_allclose(called, got, rtol=1e-4, atol=1e-5)
    path = str(tmp_path / "model.keras")
    model.save(path)
    loaded = keras.models.load_model(path)
    assert loaded.long_inputs == model.long_inputs
    # The serving export windows in its graph: the same outputs.
    model.export_for_serving(str(tmp_path / "export"))
    serve = tf.saved_model.load(str(tmp_path / "export"))
    serve = serve.signatures["serving_default"]
    texts = tf.constant([short, long_text])
    if kind == "classifier":
        # evaluate (and fit, through the same features and `call`) combine
        # the windows in the graph: predict's logits.
        labels = np.array([0, 1])
        loss, accuracy = model.evaluate([short, long_text], labels, verbose=0)
        want_loss = keras.losses.SparseCategoricalCrossentropy(
            from_logits=True
        )(labels, got)
        np.testing.assert_allclose(loss, float(want_loss), rtol=1e-4)
        assert accuracy == pytest.approx(np.mean(got.argmax(-1) == labels))
        with pytest.raises(ValueError, match="jit_compile"):
            model.compile(jit_compile=True)
        served = serve(text_a=texts)
        assert served["num_windows"].numpy().tolist() == [1, 3]
        served = served["logits"]
    else:
        served = serve(text=texts)["embeddings"]
    np.testing.assert_allclose(served.numpy(), got, rtol=1e-4, atol=1e-5)


def _last_word_task(count):
    """Texts of 20 filler words whose last is "good" or "bad" (the label):
    four windows at sequence length 8, the last one deciding."""
    rng = np.random.RandomState(0)
    texts, labels = [], []
    for _ in range(count):
        words = [FILLER[i] for i in rng.randint(len(FILLER), size=20)]
        label = int(rng.randint(2))
        words[-1] = ("bad", "good")[label]
        texts.append(" ".join(words))
        labels.append(label)
    return texts, np.array(labels)


@pytest.mark.slow
def test_keras_fit_learns_what_truncate_cannot_see():
    """BertTextClassifier.fit with chunks learns a label that only the last
    of four windows holds."""
    texts, labels = _last_word_task(224)
    model = _tiny_keras("classifier", "chunks", head_scale=1.0)
    model.compile(learning_rate=1e-3)
    model.fit(texts[:192], labels[:192], batch_size=16, epochs=15, seed=1)
    _, accuracy = model.evaluate(texts[192:], labels[192:], verbose=0)
    assert accuracy >= 0.9, accuracy
