"""Length-aware batching for prediction and evaluation.

Real inputs are mostly much shorter than --max_seq_length (GLUE sentence
pairs, NER sentences, queries), and a batch costs what its longest row
costs once it is cut to that row (`input_pipeline.trim_padding`). Batches
of rows of similar length waste least: rows are sorted by length within a
window of `WINDOW_BATCHES` batches, batched in that order, each batch cut to
its own longest row, and every row carries its position in the input
(`ORDER`), by which the outputs are put back in input order. A window
bounds the memory (a file of any length streams) and the reordering delay.

Padded positions only ever receive the -10000 attention bias, so a row's
outputs at its real positions are the same whatever its batch-mates, up to
float32 rounding (another batch shape, other kernel blocking).

TPUs compile one program per shape: there the scripts keep fixed-length
batches in input order (no sorting, no cutting).
"""

import numpy as np
import tensorflow as tf

from modeling.data import input_pipeline

# Each row's position in the input, added to the features of a batch.
ORDER = "example_order"
# Rows are sorted within windows of this many batches.
WINDOW_BATCHES = 64


def row_lengths(mask):
    """The number of real positions of each row of a batch: the sum of
    `input_mask` over its last axis (max over choices for [B, C, T])."""
    lengths = tf.reduce_sum(tf.cast(mask, tf.int32), axis=-1)
    lengths = tf.reshape(lengths, [tf.shape(lengths)[0], -1])
    return tf.reduce_max(lengths, axis=1)


def sorted_batches(
    dataset,
    batch_size,
    multiple=8,
    seq_features=input_pipeline.CLASSIFIER_SEQ_FEATURES,
    window_batches=WINDOW_BATCHES,
):
    """Batches of similar-length rows, each cut to its longest row.

    Args:
      dataset: a tf.data.Dataset of single rows: dicts with "input_mask"
        [T] (or [C, T]) and the other features.
      batch_size: rows per batch (the last one may be smaller).
      multiple: batch lengths are rounded up to a multiple of this
        (`input_pipeline.padding_multiple`: with XLA a few lengths only).
      seq_features: the features cut with the mask (their last axis is T).
      window_batches: rows are sorted within windows of this many batches.

    Returns:
      A dataset of batches with ORDER (int64 [B]), in sorted order within
      each window; windows in input order.
    """
    window = batch_size * window_batches

    def number(index, features):
        return dict(features, **{ORDER: index})

    def sort(features):
        order = tf.argsort(
            row_lengths(features["input_mask"]), stable=True
        )
        return {k: tf.gather(v, order) for k, v in features.items()}

    d = dataset.enumerate().map(number)
    d = d.batch(window).map(sort, num_parallel_calls=tf.data.AUTOTUNE)
    d = d.unbatch().batch(batch_size)
    d = d.map(
        lambda f: input_pipeline.trim_padding(f, multiple, seq_features),
        num_parallel_calls=tf.data.AUTOTUNE,
    )
    # No tf.data autotuning: its background work competes with the model
    # for the cores, and these maps cost microseconds. Measured on the
    # 2-vCPU development VM (BERT-base tagger on CoNLL testb through TF
    # Lite int8): with it, 4 passes in 12 took 20.5 s instead of 11.5 s;
    # without it, none in 12.
    options = tf.data.Options()
    options.autotune.enabled = False
    return d.prefetch(2).with_options(options)


def in_input_order(rows):
    """Yields the items of `rows`, (order, item) pairs in any order within
    a window, by order: 0, 1, 2, ... Holds at most the rows that arrived
    ahead of their turn (a window's).

    Raises:
      RuntimeError: an order missing or given twice when `rows` ends.
    """
    waiting = {}
    expected = 0
    for order, item in rows:
        order = int(order)
        if order in waiting or order < expected:
            raise RuntimeError(f"row {order} came twice")
        waiting[order] = item
        while expected in waiting:
            yield waiting.pop(expected)
            expected += 1
    if waiting:
        raise RuntimeError(
            f"rows {sorted(waiting)[:5]}... came without row {expected}"
        )


def unsort(order, values):
    """Rows gathered in sorted order, back in input order: the row with
    order i goes to position i."""
    order = np.asarray(order)
    out = np.empty_like(values)
    out[order] = values
    return out


def pad_to(values, length, axis=1):
    """Pads axis `axis` of `values` with zeros up to `length` (a batch cut
    to its longest row, back to the common width)."""
    missing = length - values.shape[axis]
    if missing <= 0:
        return values
    widths = [(0, 0)] * values.ndim
    widths[axis] = (0, missing)
    return np.pad(values, widths)
