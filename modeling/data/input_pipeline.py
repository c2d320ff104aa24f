"""TFRecord feature names and specs, and the tf.data readers for them.

This module (with modeling/data/feature_names.py, which holds the bare names
so that the data writers need not import TensorFlow) is the only place where
the feature names, dtypes and shapes of the original release's records are
written down.
Writers (pretraining_data, classifier_data, squad) and readers (the training
scripts) both import from here.
"""

import collections

import tensorflow as tf

# The names live in modeling/data/feature_names.py (importable without TensorFlow);
# readers and writers use them from here.
from modeling.data.feature_names import CLASSIFIER_SEQ_FEATURES
from modeling.data.feature_names import END_POSITIONS
from modeling.data.feature_names import IS_IMPOSSIBLE  # noqa: F401 (re-export)
from modeling.data.feature_names import IS_REAL_EXAMPLE
from modeling.data.feature_names import LABEL_IDS
from modeling.data.feature_names import NEXT_SENTENCE_LABELS
from modeling.data.feature_names import PRETRAINING_PRED_FLOAT_FEATURES
from modeling.data.feature_names import PRETRAINING_PRED_INT_FEATURES
from modeling.data.feature_names import PRETRAINING_SEQ_FEATURES
from modeling.data.feature_names import START_POSITIONS
from modeling.data.feature_names import UNIQUE_IDS


def pretraining_feature_spec(max_seq_length, max_predictions_per_seq):
    """The parsing spec of one pre-training tf.train.Example."""
    spec = {}
    for name in PRETRAINING_SEQ_FEATURES:
        spec[name] = tf.io.FixedLenFeature([max_seq_length], tf.int64)
    for name in PRETRAINING_PRED_INT_FEATURES:
        spec[name] = tf.io.FixedLenFeature([max_predictions_per_seq], tf.int64)
    for name in PRETRAINING_PRED_FLOAT_FEATURES:
        spec[name] = tf.io.FixedLenFeature(
            [max_predictions_per_seq], tf.float32
        )
    spec[NEXT_SENTENCE_LABELS] = tf.io.FixedLenFeature([1], tf.int64)
    return spec


def classifier_feature_spec(max_seq_length, label_dtype=tf.int64):
    """The parsing spec of one classifier tf.train.Example.

    `label_dtype` is tf.float32 for regression tasks (STS-B); the original's
    four tasks are all classification and use int64.
    """
    spec = {
        name: tf.io.FixedLenFeature([max_seq_length], tf.int64)
        for name in CLASSIFIER_SEQ_FEATURES
    }
    spec[LABEL_IDS] = tf.io.FixedLenFeature([], label_dtype)
    spec[IS_REAL_EXAMPLE] = tf.io.FixedLenFeature([], tf.int64)
    return spec


def squad_feature_spec(max_seq_length, is_training):
    """The parsing spec of one SQuAD tf.train.Example (as run_squad reads it)."""
    spec = {UNIQUE_IDS: tf.io.FixedLenFeature([], tf.int64)}
    for name in CLASSIFIER_SEQ_FEATURES:
        spec[name] = tf.io.FixedLenFeature([max_seq_length], tf.int64)
    if is_training:
        spec[START_POSITIONS] = tf.io.FixedLenFeature([], tf.int64)
        spec[END_POSITIONS] = tf.io.FixedLenFeature([], tf.int64)
    return spec


# === Writing ===


def int_feature(values):
    return tf.train.Feature(int64_list=tf.train.Int64List(value=list(values)))


def float_feature(values):
    return tf.train.Feature(float_list=tf.train.FloatList(value=list(values)))


def serialize_example(features):
    """Serializes an ordered mapping name -> tf.train.Feature deterministically.

    The original's bytes change from run to run because protobuf does not fix
    the order of map entries; `deterministic=True` sorts them, so the same
    record always gives the same bytes.
    """
    example = tf.train.Example(
        features=tf.train.Features(feature=collections.OrderedDict(features))
    )
    return example.SerializeToString(deterministic=True)


# === Reading ===


def decode_record(record, spec):
    """Parses one record; int64 features become int32 (TPUs want int32)."""
    example = tf.io.parse_single_example(record, spec)
    return {
        name: tf.cast(t, tf.int32) if t.dtype == tf.int64 else t
        for name, t in example.items()
    }


def trim_padding(features, multiple=8, seq_features=CLASSIFIER_SEQ_FEATURES):
    """Cuts a batch's sequence features to its longest real sequence.

    The length is rounded up to `multiple` (fewer distinct shapes, so fewer
    XLA compilations) and never exceeds the records' length. Padded
    positions only ever receive the -10000 attention bias, so the outputs at
    real positions are the untrimmed batch's up to float rounding, at the
    cost of the real tokens only.

    Args:
      features: dict of batched Tensors with an `input_mask` [B, T].
      multiple: int >= 1.
      seq_features: the names of the [B, T] features to cut.

    Returns:
      The dict with seq_features cut to [B, T'], T' <= T.
    """
    mask = features["input_mask"]
    longest = tf.reduce_max(tf.reduce_sum(tf.cast(mask, tf.int32), axis=1))
    length = tf.minimum(
        (longest + multiple - 1) // multiple * multiple, tf.shape(mask)[1]
    )
    return {
        k: v[:, :length] if k in seq_features else v
        for k, v in features.items()
    }


# === Pre-training reader (run_pretraining.py) ===

# The original's shuffle buffer after the file interleave.
PRETRAINING_SHUFFLE_BUFFER = 100


def pretraining_dataset(
    input_files,
    batch_size,
    max_seq_length,
    max_predictions_per_seq,
    is_training,
    seed=12345,
    start_batch=0,
    num_cpu_threads=4,
):
    """The original run_pretraining input_fn, made deterministic and resumable.

    Training: the file list repeated and shuffled, records interleaved from
    up to `num_cpu_threads` files, shuffled with a buffer of 100, batched with
    drop_remainder. Unlike the original (sloppy interleave, unseeded
    shuffles) the order is a pure function of `seed`, so a resumed run can
    skip the `start_batch` batches already consumed (raw records are skipped
    before parsing, which is cheap) and see exactly what an uninterrupted run
    would. Eval: files in order, repeated, no shuffle, drop_remainder=True
    (the original's eval also dropped the remainder).

    Args:
      input_files: list of TFRecord paths (see `file_io.expand_input_files`).
      batch_size: global batch size.
      max_seq_length, max_predictions_per_seq: must match the records.
      is_training: bool.
      seed: int, shuffle seed (training only).
      start_batch: number of global batches to skip (resume).
      num_cpu_threads: interleave width.

    Returns:
      tf.data.Dataset of dicts of int32 / float32 Tensors [batch_size, ...].
    """
    spec = pretraining_feature_spec(max_seq_length, max_predictions_per_seq)
    if is_training:
        files = tf.data.Dataset.from_tensor_slices(tf.constant(input_files))
        files = files.repeat().shuffle(len(input_files), seed=seed)
        d = files.interleave(
            tf.data.TFRecordDataset,
            cycle_length=min(num_cpu_threads, len(input_files)),
            num_parallel_calls=tf.data.AUTOTUNE,
            deterministic=True,
        )
        d = d.shuffle(PRETRAINING_SHUFFLE_BUFFER, seed=seed)
    else:
        d = tf.data.TFRecordDataset(input_files).repeat()
    if start_batch:
        d = d.skip(int(start_batch) * batch_size)
    d = d.map(
        lambda record: decode_record(record, spec),
        num_parallel_calls=tf.data.AUTOTUNE,
        deterministic=True,
    )
    d = d.batch(batch_size, drop_remainder=True)
    return d.prefetch(tf.data.AUTOTUNE)
