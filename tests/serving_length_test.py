"""The serving SavedModels pad a batch of raw strings only to its longest
tokenized row: the classifier's returns features that wide, and its outputs,
the tagger's and the multiple-choice model's equal what the same model gives
on the rows padded to max_seq_length (the full-length export's numbers)."""

import constants
import numpy as np
import pytest
import tensorflow as tf
import tensorflow_text  # noqa: F401 (registers the tokenizer ops)
import tolerance

from modeling import config as config_lib
from modeling import models
from modeling import task_kinds
from modeling.export import classifier as classifier_export
from modeling.export import multiple_choice as choice_export
from modeling.export import tagger as tagger_export
from modeling.text import in_graph

SEQ = 40
SHORT = ["the cat sat", "a dog", "hello world is good"]


@pytest.fixture(scope="module")
def vocab(tmp_path_factory):
    path = tmp_path_factory.mktemp("serving_vocab") / "vocab.txt"
    path.write_text("\n".join(constants.TINY_VOCAB) + "\n")
    return str(path)


@pytest.fixture(scope="module")
def config():
    return config_lib.BertConfig.from_dict(constants.TINY_CONFIG)


def _full_length(features):
    """The features padded back to SEQ with zeros."""
    return {
        k: tf.pad(v, [[0, 0]] * (v.shape.rank - 1) + [[0, SEQ - v.shape[-1]]])
        for k, v in features.items()
    }


def test_classifier_pads_to_the_longest_row(config, vocab, tmp_path):
    model = models.BertClassifier(config, num_labels=3)
    export_dir = str(tmp_path / "export")
    classifier_export.export_classifier(
        model,
        in_graph.TextPreprocessor(vocab, True, SEQ),
        export_dir,
        kind=task_kinds.get("classification"),
        has_text_b=True,
        label_list=["a", "b", "c"],
        max_seq_length=SEQ,
    )
    loaded = tf.saved_model.load(export_dir)
    out = loaded.signatures["serving_default"](
        text_a=tf.constant(SHORT), text_b=tf.constant(["the mat", "", "!"])
    )
    mask = out["input_mask"].numpy()
    # [CLS] hello world is good [SEP] ! [SEP]: 8 tokens, the longest row.
    assert mask.shape == (3, 8) and mask.sum(-1).max() == 8
    names = ("input_ids", "input_mask", "segment_ids")
    full = _full_length({k: out[k] for k in names})
    want = loaded.signatures["serving_features"](**full)
    tolerance.assert_float32_close(out["logits"], want["logits"])
    tolerance.assert_float32_close(
        out["probabilities"], want["probabilities"], scale=1.0
    )


def test_tagger_and_multiple_choice_equal_full_length(config, vocab):
    tagger = models.BertTokenClassifier(config, 4)
    server = tagger_export.TaggerServer(
        tagger, vocab, True, SEQ, ["O", "B-X", "I-X", "B-Y"]
    )
    out = server.serve_text(tf.constant(SHORT))
    packed = server.packer(
        tf.ragged.constant([[5, 7, 9], [6, 8], [12, 13, 14, 16]])
    )
    full = tagger(packed, training=False).numpy()  # [3, SEQ, 4]
    # Each word's first piece is at 1 + its index (one piece per word).
    for row, text in enumerate(SHORT):
        n = len(text.split())
        want = tf.nn.softmax(full[row, 1 : n + 1]).numpy()
        tolerance.assert_float32_close(
            out["probabilities"][row, :n], want, scale=1.0
        )

    chooser = models.BertMultipleChoice(config)
    server = choice_export.ChoiceServer(chooser, vocab, True, SEQ)
    endings = tf.constant([["sat", "is good"], ["hello", "world"]])
    sent1 = tf.constant(["the cat", "a dog is not"])
    sent2 = tf.constant(["", "bad"])
    out = server.serve_text(sent1, sent2, endings)
    first = tf.repeat(sent1, 2)
    second = tf.strings.strip(
        tf.strings.join([tf.repeat(sent2, 2), tf.reshape(endings, [-1])], " ")
    )
    features = server.preprocessor(first, second)  # [4, SEQ]
    assert int(tf.reduce_max(tf.reduce_sum(features["input_mask"], -1))) < 10
    full = {k: tf.reshape(v, [2, 2, SEQ]) for k, v in features.items()}
    want = chooser(full, training=False).numpy()
    tolerance.assert_float32_close(out["logits"], want)


@pytest.mark.parametrize("pad_to_longest", [False, True])
def test_hub_preprocessor_pad_to_longest(vocab, tmp_path, pad_to_longest):
    """export_hub.py --pad_to_longest: the preprocessing SavedModel's
    default call cuts each batch to its longest row, the ids the same as
    the fixed-length call's; without it, TF Hub's fixed length."""
    from modeling.export import encoder as encoder_export

    path = str(tmp_path / "preprocessing")
    encoder_export.save_preprocessing(path, vocab, True, SEQ, pad_to_longest)
    loaded = tf.saved_model.load(path)
    out = loaded(tf.constant(SHORT))
    # [CLS] hello world is good [SEP]: 6, the longest row.
    width = 6 if pad_to_longest else SEQ
    assert out["input_word_ids"].shape == (3, width)
    fixed = loaded.bert_pack_inputs(
        [loaded.tokenize(tf.constant(SHORT))], seq_length=SEQ
    )
    for name in ("input_word_ids", "input_mask", "input_type_ids"):
        np.testing.assert_array_equal(
            out[name].numpy(), fixed[name].numpy()[:, :width]
        )
        assert not fixed[name].numpy()[:, width:].any()
