"""Length-aware batching (modeling/data/length_batching.py) in every
prediction path: on inputs of mixed lengths, the outputs equal the padded
path's (fixed-length batches in input order), order included, within
float32 rounding; and the batches really are sorted and cut.

A tiny random BERT: what is compared is the batching, not a trained model.
"""

import json
import pathlib
import random
import shutil

import constants
import numpy as np
import pytest
import tensorflow as tf
import tolerance

from modeling import checkpoints
from modeling import config as config_lib
from modeling import encoder
from modeling import models
from modeling import text_classifier
from modeling.data import length_batching
from modeling.tasks import classifier
from modeling.tasks import extract
from modeling.tasks import fine_tuning
from modeling.tasks import predictions

SEQ = 48
WORDS = [w for w in constants.TINY_VOCAB if w.isalpha()]


def _mixed_lengths(n, seed, max_len=SEQ):
    """Token id rows of lengths from 2 to max_len, padded to SEQ."""
    rng = np.random.default_rng(seed)
    lengths = rng.integers(2, max_len + 1, n)
    ids = np.zeros((n, SEQ), np.int32)
    mask = np.zeros((n, SEQ), np.int32)
    for i, length in enumerate(lengths):
        ids[i, :length] = rng.integers(5, 99, length)
        mask[i, :length] = 1
    return ids, mask


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


def test_sorted_batches_are_sorted_cut_and_numbered():
    ids, mask = _mixed_lengths(50, 1)
    d = tf.data.Dataset.from_tensor_slices(
        {"input_ids": ids, "input_mask": mask, "segment_ids": 0 * ids}
    )
    batches = list(
        length_batching.sorted_batches(d, 4, multiple=8, window_batches=3)
    )
    orders = np.concatenate([b[length_batching.ORDER].numpy() for b in batches])
    assert sorted(orders.tolist()) == list(range(50))
    # Windows of 12 rows keep their rows; within one, lengths ascend.
    for w in range(0, 50, 12):
        window = orders[w : w + 12]
        assert sorted(window.tolist()) == list(range(w, min(w + 12, 50)))
        lengths = mask[window].sum(-1)
        assert np.all(np.diff(lengths) >= 0)
    for batch in batches:
        width = batch["input_ids"].shape[1]
        longest = batch["input_mask"].numpy().sum(-1).max()
        assert width == min(-(-longest // 8) * 8, SEQ)
        rows = batch[length_batching.ORDER].numpy()
        np.testing.assert_array_equal(batch["input_ids"], ids[rows, :width])


def test_in_input_order_restores_the_order():
    shuffled = [(3, "d"), (1, "b"), (0, "a"), (2, "c"), (5, "f"), (4, "e")]
    assert list(length_batching.in_input_order(shuffled)) == list("abcdef")
    with pytest.raises(RuntimeError, match="without row 1"):
        list(length_batching.in_input_order([(0, "a"), (2, "c")]))
    with pytest.raises(RuntimeError, match="row 0 came twice"):
        list(length_batching.in_input_order([(0, "a"), (0, "b")]))


# === Each prediction path against its padded path ===


def test_classifier_and_multiple_choice_logits(config):
    """fine_tuning.logits (run_ner, run_multiple_choice): sorted and cut
    against fixed batches; [N, C, T] choices too."""
    strategy = tf.distribute.get_strategy()
    ids, mask = _mixed_lengths(37, 2)
    arrays = {"input_ids": ids, "input_mask": mask, "segment_ids": 0 * ids}
    tagger = models.BertTokenClassifier(config, 5)
    want = fine_tuning.logits(strategy, tagger, arrays, 8)
    got = fine_tuning.logits(strategy, tagger, arrays, 8, length_sorted=True)
    real = mask.astype(bool)
    assert got.shape == want.shape == (37, SEQ, 5)
    tolerance.assert_float32_close(got[real], want[real])

    choices = {k: v[:36].reshape(12, 3, SEQ) for k, v in arrays.items()}
    choices["label_ids"] = np.zeros(12, np.int32)
    chooser = models.BertMultipleChoice(config)
    want = fine_tuning.logits(strategy, chooser, choices, 5)
    got = fine_tuning.logits(strategy, chooser, choices, 5, length_sorted=True)
    assert got.shape == (12, 3)
    tolerance.assert_float32_close(got, want)


def test_extract_features_layers(config):
    model = encoder.BertModel(config)
    model.build()
    ids, mask = _mixed_lengths(21, 3)
    features = [
        extract.InputFeatures(
            i, ["t"] * int(m.sum()), list(x), list(m), [0] * SEQ
        )
        for i, (x, m) in enumerate(zip(ids, mask))
    ]
    want = list(extract.extract_layers(model, features, [-1, 0], 4, None, False))
    got = list(extract.extract_layers(model, features, [-1, 0], 4))
    assert [f.unique_id for f, _ in got] == list(range(21))
    for (f, values), (_, expected) in zip(got, want):
        n = len(f.tokens)
        for a, b in zip(values, expected):
            tolerance.assert_float32_close(a[:n], b[:n])


@pytest.fixture(scope="module")
def tiny_release(tmp_path_factory, config):
    folder = tmp_path_factory.mktemp("tiny_release_lb")
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
    texts = _texts(45, 4)
    got = model.predict(texts, batch_size=4, verbose=0)
    model.dynamic_padding = False
    want = model.predict(texts, batch_size=4, verbose=0)
    assert got.shape == (45, 3)
    tolerance.assert_float32_close(got, want)


def test_run_classifier_predict_and_eval(tiny_release, tmp_path):
    """run_classifier.py --do_eval --do_predict with and without
    --dynamic_padding from one checkpoint: the same eval_results.txt and
    test_results.tsv, predictions.jsonl in input order."""
    rows = [
        {"id": f"r{i}", "text": t, "label": str(i % 3)}
        for i, t in enumerate(_texts(41, 5))
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
