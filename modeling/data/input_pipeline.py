"""TFRecord feature names and specs, and the tf.data readers for them.

This module (with modeling/data/feature_names.py, which holds the bare names
so that the data writers need not import TensorFlow) is the only place where
the feature names, dtypes and shapes of the original release's records are
written down.
Writers (pretraining_data, classifier_data, squad) and readers (the training
scripts) both import from here.

One module, over 500 lines: every record's spec and reader together, so
that a writer and its reader cannot drift apart.
"""

import collections
import struct
import time

import tensorflow as tf
from absl import logging

from modeling import errors
from modeling.data import file_io
from modeling.data import tfrecord_io

# The names live in modeling/data/feature_names.py (importable without TensorFlow);
# readers and writers use them from here.
from modeling.data.feature_names import CLASSIFIER_SEQ_FEATURES
from modeling.data.feature_names import END_POSITIONS
from modeling.data.feature_names import EXAMPLE_INDEX
from modeling.data.feature_names import IS_IMPOSSIBLE  # noqa: F401 (re-export)
from modeling.data.feature_names import IS_REAL_EXAMPLE
from modeling.data.feature_names import LABEL_IDS
from modeling.data.feature_names import NEXT_SENTENCE_LABELS
from modeling.data.feature_names import NUM_WINDOWS
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


def classifier_feature_spec(
    max_seq_length, label_dtype=tf.int64, num_multi_labels=None, windowed=False
):
    """The parsing spec of one classifier tf.train.Example.

    `label_dtype` is tf.float32 for regression tasks (STS-B); the original's
    four tasks are all classification and use int64. A multi-label task
    (`num_multi_labels` L) has L int64 0/1 labels. A window's record
    (--long_inputs=chunks, `windowed`) also has EXAMPLE_INDEX and
    NUM_WINDOWS.
    """
    spec = {
        name: tf.io.FixedLenFeature([max_seq_length], tf.int64)
        for name in CLASSIFIER_SEQ_FEATURES
    }
    label_shape = [] if num_multi_labels is None else [num_multi_labels]
    spec[LABEL_IDS] = tf.io.FixedLenFeature(label_shape, label_dtype)
    spec[IS_REAL_EXAMPLE] = tf.io.FixedLenFeature([], tf.int64)
    if windowed:
        spec[EXAMPLE_INDEX] = tf.io.FixedLenFeature([], tf.int64)
        spec[NUM_WINDOWS] = tf.io.FixedLenFeature([], tf.int64)
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


def as_written(fn):
    """`fn` for tf.data's map, filter, scan and interleave, traced as
    written. tf.data otherwise converts it with AutoGraph, which re-parses
    and rewrites the Python of everything it calls (the in-graph tokenizer,
    the masking) on every pipeline a run builds. The graphs' control flow
    here is explicit (tf.cond, tf.while_loop), as in the training step."""
    return tf.autograph.experimental.do_not_convert(fn)


def decode_record(record, spec):
    """Parses one record; int64 features become int32 (TPUs want int32)."""
    example = tf.io.parse_single_example(record, spec)
    return {
        name: tf.cast(t, tf.int32) if t.dtype == tf.int64 else t
        for name, t in example.items()
    }


def without_autotuning(dataset):
    """`dataset` without tf.data's autotuning thread: every pipeline a loop
    of this project iterates goes through here (the Trainer on either
    backend, the predictor, the Keras API's fit and predict).

    Why: the autotuner sleeps between its passes, the sleep doubling up to
    a minute, and in TensorFlow 2.21 destroying an iterator sometimes waits
    for that sleep to end. An evaluation pass, a prediction, or a run
    stopped by SIGTERM then ended seconds to a minute late. Without the
    autotuner, a map or interleave with num_parallel_calls=AUTOTUNE runs on
    min(16, cores) threads, and prefetch(AUTOTUNE) still sizes its own
    buffer. These pipelines fed batches as fast that way
    (bench/sigterm_exit.py measures both).
    """
    options = tf.data.Options()
    options.autotune.enabled = False
    return dataset.with_options(options)


# The original's training input_fn shuffles in a buffer of this many records.
TRAIN_SHUFFLE_BUFFER = 100


def repeat_and_shuffle(dataset, seed, buffer_size=TRAIN_SHUFFLE_BUFFER):
    """The original's training order: the examples repeated without end and
    shuffled in a buffer of TRAIN_SHUFFLE_BUFFER (`buffer_size`: another).

    The order depends only on the seed and on the number of examples, not on
    what they hold: run_classifier's records and the same examples as raw
    texts (BertTextClassifier.fit) come in the same order for a seed.
    """
    return dataset.repeat().shuffle(buffer_size, seed=seed)


# A text's windows group under EXAMPLE_INDEX * _WINDOW_KEY + NUM_WINDOWS:
# tf.data's group_by_window learns a group's size from its key alone.
_WINDOW_KEY = 2**32


def shuffled_texts(rows, seed, buffer_size=TRAIN_SHUFFLE_BUFFER):
    """Decoded windowed rows (--long_inputs=chunks: a text's windows are
    consecutive records carrying EXAMPLE_INDEX and NUM_WINDOWS) repeated and
    shuffled as whole texts, in a buffer of `buffer_size` texts, then one
    window per element again: a text's windows stay consecutive, so a
    batch holds whole texts but for the two at its ends, and the loss can
    combine a text's windows as evaluation does."""

    def key(features):
        return tf.cast(
            features[EXAMPLE_INDEX], tf.int64
        ) * _WINDOW_KEY + tf.cast(features[NUM_WINDOWS], tf.int64)

    texts = rows.group_by_window(
        key,
        lambda k, windows: windows.batch(k % _WINDOW_KEY),
        window_size_func=lambda k: k % _WINDOW_KEY,
    )
    return repeat_and_shuffle(texts, seed, buffer_size).unbatch()


# With XLA, dynamic padding uses this many lengths at most (each compiles).
XLA_PADDING_BUCKETS = 4


def padding_multiple(max_seq_length, use_xla=False):
    """The multiple `trim_padding` rounds lengths up to: 8, or where every
    batch shape compiles a program of its own (XLA, and Keras's JAX backend
    always) a quarter of max_seq_length (rounded up to 8), so that batches
    take at most XLA_PADDING_BUCKETS shapes and XLA compiles a bounded
    number of times (on JAX, training at seq 128 compiled up to 16
    programs)."""
    from modeling import backend

    if not (use_xla or backend.current() == "jax"):
        return 8
    quarter = -(-max_seq_length // XLA_PADDING_BUCKETS)
    return max(8, -(-quarter // 8) * 8)


def predict_multiple(max_seq_length, use_xla=False):
    """The predictor's `multiple`: 1 (each batch at its longest row), or
    where every batch shape compiles a program of its own (XLA, and
    Keras's JAX backend always) `padding_multiple`'s few lengths: on JAX,
    32 batches of a dev set compiled 32 programs."""
    from modeling import backend

    if use_xla or backend.current() == "jax":
        return padding_multiple(max_seq_length, use_xla)
    return 1


def trim_padding(features, multiple=8, seq_features=CLASSIFIER_SEQ_FEATURES):
    """Cuts a batch's sequence features to its longest real sequence.

    The length is rounded up to `multiple` (fewer distinct shapes, so fewer
    XLA compilations) and never exceeds the records' length. Padded
    positions only ever receive the -10000 attention bias, so the outputs at
    real positions are the untrimmed batch's up to float rounding, at the
    cost of the real tokens only.

    Args:
      features: dict of batched Tensors with an `input_mask` [B, T] (or
        [B, C, T]: multiple choice).
      multiple: int >= 1.
      seq_features: the names of the [..., T] features to cut.

    Returns:
      The dict with seq_features cut to [..., T'], T' <= T.
    """
    mask = features["input_mask"]
    longest = tf.reduce_max(tf.reduce_sum(tf.cast(mask, tf.int32), axis=-1))
    # An empty batch (a server called with no text) keeps one position: the
    # pooler and the span heads read position 0.
    longest = tf.maximum(longest, 1)
    length = tf.minimum(
        (longest + multiple - 1) // multiple * multiple, tf.shape(mask)[-1]
    )
    return {
        k: v[..., :length] if k in seq_features else v
        for k, v in features.items()
    }


# === Checks of the input files before any training ===

# How many leading records the id range check reads.
RECORDS_TO_CHECK = 100
# How long a run that met a bad record looks for it before giving
# TensorFlow's message (records are parsed in Python: ~10 MB/s).
FIND_SECONDS = 120
# The message of the reader's check of every record's token ids.
_BAD_IDS = "A token id of a record is outside the BERT config vocab_size"


def check_record_files(input_files):
    """Fails unless some file holds a record; checks every local file's
    framing (a truncated or non-TFRecord file); warns about empty files.

    A repeated dataset over files without any record never yields a batch
    (it spins forever), so this runs before any dataset is repeated.

    Returns:
      The files that hold records.

    Raises:
      errors.UserError: naming the empty, truncated or damaged file(s).
    """
    nonempty, empty = [], []
    for path in input_files:
        try:
            if file_io.is_remote(path):
                has_record = any(
                    True for _ in tfrecord_io.read_records(path, 1)
                )
            else:
                has_record = tfrecord_io.check_framing(path) > 0
        except ValueError as e:
            raise errors.UserError(str(e)) from e
        except tf.errors.OpError as e:  # A remote folder, say.
            reason = (e.message or type(e).__name__).strip().splitlines()[0]
            raise errors.UserError(
                f"Input {path} cannot be read as records: {reason}"
            ) from e
        (nonempty if has_record else empty).append(path)
    if not nonempty:
        raise errors.UserError(
            "No records in the input: "
            + ", ".join(empty)
            + (" is" if len(empty) == 1 else " are")
            + " empty (an interrupted or failed data generation?)"
        )
    if empty:
        logging.warning(
            "Skipping %d empty input file(s): %s", len(empty), ", ".join(empty)
        )
    return nonempty


def _examples(path, limit=None):
    """(number, parsed record) of a file's first `limit` records (None:
    all), read without TensorFlow, streamed."""
    number = 0
    try:
        for number, record in enumerate(tfrecord_io.read_records(path, limit)):
            yield number, tfrecord_io.parse_example(record)
    except (ValueError, IndexError, UnicodeDecodeError, struct.error) as e:
        # A damaged file says so itself (read_records names it).
        if str(e).startswith(str(path)):
            raise errors.UserError(str(e)) from e
        raise errors.UserError(
            f"{path} does not hold pre-training records (tf.train.Example): "
            f"record {number}: {e}"
        ) from e


def _check_pretraining_example(
    example, path, number, max_seq_length, max_predictions_per_seq, vocab_size
):
    """One record's features, lengths and token ids against the flags and
    the config (the first record's messages say what to set)."""
    where = "the first record" if number == 0 else f"record {number}"
    names = (
        PRETRAINING_SEQ_FEATURES
        + PRETRAINING_PRED_INT_FEATURES
        + PRETRAINING_PRED_FLOAT_FEATURES
        + (NEXT_SENTENCE_LABELS,)
    )
    missing = [n for n in names if n not in example]
    if missing:
        raise errors.UserError(
            f"{path} does not hold pre-training records: {where} "
            f"lacks {', '.join(missing)} (found: {', '.join(sorted(example))})"
        )
    for names, flag, want in (
        (PRETRAINING_SEQ_FEATURES, "max_seq_length", max_seq_length),
        (
            PRETRAINING_PRED_INT_FEATURES + PRETRAINING_PRED_FLOAT_FEATURES,
            "max_predictions_per_seq",
            max_predictions_per_seq,
        ),
    ):
        for name in names:
            have = len(example[name])
            if have != want and number == 0:
                raise errors.UserError(
                    f"The records in {path} were made with --{flag}={have} "
                    f"({name} has {have} values), not {want}: set "
                    f"--{flag}={have}"
                )
            if have != want:
                raise errors.UserError(
                    f"Record {number} of {path} has {have} values of {name}, "
                    f"not --{flag}={want} as the first record (records of "
                    "two runs of create_pretraining_data.py in one file?)"
                )
    if vocab_size is None:
        return
    for name in ("input_ids", "masked_lm_ids"):
        top = max(example[name], default=0)
        if min(example[name], default=0) < 0:
            top = min(example[name])
        if not 0 <= top < vocab_size:
            raise errors.UserError(
                f"Record {number} of {path} has {name} {top}, but the BERT "
                f"config's vocab_size is {vocab_size}: the records were made "
                "with another vocabulary than the model's (--vocab_file of "
                "create_pretraining_data.py)"
            )


def check_pretraining_records(
    input_files, max_seq_length, max_predictions_per_seq, vocab_size=None
):
    """The checks before pre-training: records present (see
    `check_record_files`), their lengths those of the flags, their token ids
    below the config's vocab_size (on a GPU an embedding lookup of a larger
    id returns zeros instead of failing), from the first records. The
    dataset checks the ids of every record as it reads it
    (`pretraining_dataset`), and `find_bad_pretraining_record` names a
    later record the reader refused.

    Returns:
      The files that hold records.

    Raises:
      errors.UserError: naming the file and the flag to set (and to what).
    """
    files = check_record_files(input_files)
    # Every file's first record (a glob may catch two generations of
    # records), and more of the first file's for the vocabulary check.
    _check_files(
        files,
        lambda index: RECORDS_TO_CHECK if index == 0 else 1,
        max_seq_length,
        max_predictions_per_seq,
        vocab_size,
    )
    return files


def _check_files(
    files, limit, max_seq_length, max_predictions_per_seq, vocab, seconds=None
):
    """`_check_pretraining_example` of the first `limit(index)` records of
    each file (None: all), for at most `seconds` (None: no limit).

    Returns:
      The number of records checked, and whether every one was.
    """
    deadline = None if seconds is None else time.monotonic() + seconds
    count = 0
    for index, path in enumerate(files):
        for number, example in _examples(path, limit(index)):
            if deadline is not None and time.monotonic() > deadline:
                return count, False
            count += 1
            _check_pretraining_example(
                example,
                path,
                number,
                max_seq_length,
                max_predictions_per_seq,
                vocab,
            )
    return count, True


def is_record_error(message):
    """Whether a TensorFlow error from reading pre-training records is one
    of a record (its features, lengths or ids), which
    `find_bad_pretraining_record` can name."""
    return any(
        marker in message
        for marker in (
            "Can't parse serialized Example",
            "is required but could not be found",
            _BAD_IDS,
        )
    )


def find_bad_pretraining_record(
    input_files, max_seq_length, max_predictions_per_seq, vocab_size=None
):
    """Reads the records (without TensorFlow, in file order, for at most
    FIND_SECONDS) to name the first that is damaged or unlike the flags:
    what a TensorFlow error in the middle of a run could not say.

    Returns:
      What was read when no record was found bad: "every record", or "the
      first N records" (the time ran out).

    Raises:
      errors.UserError: naming the file, the record and the feature.
    """
    logging.info(
        "Looking for the bad record in %d input file(s), for at most %d s",
        len(input_files),
        FIND_SECONDS,
    )
    count, complete = _check_files(
        input_files,
        lambda index: None,
        max_seq_length,
        max_predictions_per_seq,
        vocab_size,
        FIND_SECONDS,
    )
    return "every record" if complete else f"the first {count} records"


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
    vocab_size=None,
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
      vocab_size: the model's; a record with a larger token id is an error
        (None: not checked).

    Returns:
      tf.data.Dataset of dicts of int32 / float32 Tensors [batch_size, ...].
    """
    spec = pretraining_feature_spec(max_seq_length, max_predictions_per_seq)

    def check_ids(batch):
        # An id outside the embedding table: a CPU's lookup fails naming no
        # record, a GPU's returns zeros (the run's guard then names the
        # record: find_bad_pretraining_record). Once a batch: cheaper.
        ids = tf.concat([batch["input_ids"], batch["masked_lm_ids"]], axis=1)
        inside = tf.logical_and(
            tf.reduce_min(ids) >= 0, tf.reduce_max(ids) < vocab_size
        )
        check = tf.debugging.Assert(inside, [_BAD_IDS])
        with tf.control_dependencies([check]):
            return {name: tf.identity(t) for name, t in batch.items()}

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
        as_written(lambda record: decode_record(record, spec)),
        num_parallel_calls=tf.data.AUTOTUNE,
        deterministic=True,
    )
    d = d.batch(batch_size, drop_remainder=True)
    if vocab_size is not None:
        d = d.map(as_written(check_ids))
    return d.prefetch(tf.data.AUTOTUNE)
