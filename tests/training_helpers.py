"""Tiny pre-training records and configs for the training tests."""

import contextlib
import json

import numpy as np
from constants import TINY_CONFIG

from modeling.data import input_pipeline

SEQ = 16
PRED = 4
VOCAB = TINY_CONFIG["vocab_size"]


def tiny_config(path, dropout=0.0):
    """Writes the golden tiny bert_config.json (dropout off by default)."""
    config = dict(
        TINY_CONFIG,
        hidden_dropout_prob=dropout,
        attention_probs_dropout_prob=dropout,
    )
    path.write_text(json.dumps(config))
    return str(path)


def write_records(path, num_records=64, seed=0, varied_masks=False):
    """Random pre-training records; every record has PRED real predictions
    (equal weights per replica, so replica means equal the global mean),
    or with `varied_masks` 1 to PRED of them (weight 1, the rest 0)."""
    import tensorflow as tf

    rng = np.random.default_rng(seed)
    with tf.io.TFRecordWriter(str(path)) as writer:
        for _ in range(num_records):
            length = int(rng.integers(8, SEQ + 1))
            ids = np.zeros(SEQ, np.int64)
            ids[:length] = rng.integers(5, VOCAB, size=length)
            mask = (np.arange(SEQ) < length).astype(np.int64)
            segments = (np.arange(SEQ) >= length // 2).astype(np.int64) * mask
            positions = np.sort(rng.choice(np.arange(1, length), PRED, False))
            real = int(rng.integers(1, PRED + 1)) if varied_masks else PRED
            weights = [1.0] * real + [0.0] * (PRED - real)
            features = {
                "input_ids": input_pipeline.int_feature(ids),
                "input_mask": input_pipeline.int_feature(mask),
                "segment_ids": input_pipeline.int_feature(segments),
                "masked_lm_positions": input_pipeline.int_feature(positions),
                "masked_lm_ids": input_pipeline.int_feature(ids[positions]),
                "masked_lm_weights": input_pipeline.float_feature(weights),
                "next_sentence_labels": input_pipeline.int_feature(
                    [int(rng.integers(0, 2))]
                ),
            }
            writer.write(input_pipeline.serialize_example(features))
    return str(path)


def below_clip_norm(loss_fn, factor=0.1):
    """`loss_fn` with its "loss" times `factor`: the tiny model's gradients
    (global norm 1.9-2.8) stay below the original's clip norm 1.0. Clipped,
    a gradient summed where it should be averaged (doubled) is clipped back
    to the same update, and a test comparing two runs could not see it."""

    def scaled(features, outputs):
        logs = dict(loss_fn(features, outputs))
        logs["loss"] = logs["loss"] * factor
        return logs

    return scaled


@contextlib.contextmanager
def variables_made_while_tracing():
    """Yields a list that gets the name of each TensorFlow variable made
    inside a tf.function's trace within the block. A train step that makes
    its optimizer's slots is traced twice, once making them and once using
    them (models._OptimizerBuiltFirst)."""
    import tensorflow as tf

    made = []

    def creator(next_creator, **kwargs):
        if tf.inside_function():
            made.append(kwargs.get("name"))
        return next_creator(**kwargs)

    with tf.variable_creator_scope(creator):
        yield made
