"""Sentence(-pair) classification data: examples, features, records, files.

`convert_single_example` and `file_based_convert_examples_to_features` give
the same features and records as the original's `run_classifier.py`;
`truncate_seq_pair` (the project's only copy, in long_inputs.py with the
other cutting rules) is importable from here, as the original's was.
The GLUE/XNLI processors that make the examples are in classifier_processors.
Regression tasks (STS-B) carry a float label and write it as a float feature.

One module, over 500 lines: the original's run_classifier data path from
example to record, read in order: the packing sits beside the records it must
reproduce.
"""

import os

import numpy as np
from absl import logging

from modeling import progress
from modeling.data import file_io
from modeling.data import long_inputs as long_inputs_lib
from modeling.data import table_files
from modeling.text.vocabulary import CLS_TOKEN
from modeling.text.vocabulary import SEP_TOKEN


class InputExample:
    """A single training/test example for sequence (pair) classification.

    Args:
      guid: Unique id for the example.
      text_a: string. The untokenized text of the first sequence.
      text_b: (Optional) string. The untokenized text of the second sequence;
        only for sequence pair tasks.
      label: (Optional) string (a float for regression; a list of
        strings for a multi-label task). The label of the example; test
        examples carry a placeholder.
      index: (Optional) string. The id a GLUE submission file uses for this
        example (the test file's `index`/`id` column). Not in the original.
    """

    def __init__(self, guid, text_a, text_b=None, label=None, index=None):
        self.guid = guid
        self.text_a = text_a
        self.text_b = text_b
        self.label = label
        self.index = index

    def __repr__(self):
        return (
            f"InputExample(guid={self.guid!r}, text_a={self.text_a!r}, "
            f"text_b={self.text_b!r}, label={self.label!r})"
        )


class PaddingInputExample:
    """A fake example that pads the example list to a multiple of the batch.

    TPUs need every batch full, so eval and predict pad with these rather than
    drop the remainder. Their features are all zeros and `is_real_example` is
    False, so they get weight 0 in the metrics and no line in the outputs.
    """


class InputFeatures:
    """A single set of features of data (as the original's)."""

    def __init__(
        self, input_ids, input_mask, segment_ids, label_id, is_real_example=True
    ):
        self.input_ids = input_ids
        self.input_mask = input_mask
        self.segment_ids = segment_ids
        self.label_id = label_id
        self.is_real_example = is_real_example


# The original's `_truncate_seq_pair` (run_classifier.py's public name).
truncate_seq_pair = long_inputs_lib.truncate_seq_pair


def convert_single_example(
    ex_index,
    example,
    label_list,
    max_seq_length,
    tokenizer,
    multi_label=False,
    log=False,
):
    """Converts a single `InputExample` into a single `InputFeatures`.

    Args:
      ex_index: int, position of the example (see `log`).
      example: an `InputExample` or `PaddingInputExample`.
      label_list: list of label strings, in id order; None for regression,
        whose label is the float score.
      max_seq_length: int, length of the padded sequences.
      tokenizer: an object with `tokenize(text)` and
        `convert_tokens_to_ids(tokens)` (modeling.text.tokenization.FullTokenizer).
      multi_label: bool, the labels are sets: `label_id` is a 0/1 list over
        label_list (not in the original).
      log: log the example's features when ex_index < 5, as the original
        does while it converts a data file (not for texts served).

    Returns:
      An `InputFeatures`.

    Raises:
      ValueError: the label is not in `label_list`.
    """
    if isinstance(example, PaddingInputExample):
        if multi_label:
            label_id = [0] * len(label_list)
        else:
            label_id = 0.0 if label_list is None else 0
        return InputFeatures(
            input_ids=[0] * max_seq_length,
            input_mask=[0] * max_seq_length,
            segment_ids=[0] * max_seq_length,
            label_id=label_id,
            is_real_example=False,
        )
    tokens_a = tokenizer.tokenize(example.text_a)
    tokens_b = None
    if example.text_b:
        tokens_b = tokenizer.tokenize(example.text_b)
    if tokens_b:
        # Account for [CLS], [SEP], [SEP] with "- 3".
        truncated = len(tokens_a) + len(tokens_b) > max_seq_length - 3
        truncate_seq_pair(tokens_a, tokens_b, max_seq_length - 3)
    else:
        # Account for [CLS] and [SEP] with "- 2".
        truncated = len(tokens_a) > max_seq_length - 2
        tokens_a = tokens_a[0 : (max_seq_length - 2)]

    feature = pack(
        tokens_a,
        tokens_b,
        max_seq_length,
        tokenizer,
        _label_id(example, label_list),
    )
    # Not in the original: whether tokens were cut to fit (counted in the
    # log by the converters).
    feature.truncated = truncated
    if log:
        _log_example(ex_index, example, feature, tokens_a, tokens_b)
    return feature


def _log_example(ex_index, example, feature, tokens_a, tokens_b):
    """The original's log of the first 5 examples' features: the user's
    check of tokenization, segment ids and labels."""
    if ex_index >= 5:
        return
    tokens = [CLS_TOKEN, *tokens_a, SEP_TOKEN]
    if tokens_b:
        tokens += [*tokens_b, SEP_TOKEN]
    logging.info("*** Example ***")
    logging.info("guid: %s", example.guid)
    logging.info("tokens: %s", " ".join(tokens))
    for name in ("input_ids", "input_mask", "segment_ids"):
        values = getattr(feature, name)
        logging.info("%s: %s", name, " ".join(str(x) for x in values))
    logging.info("label: %s (id = %s)", example.label, feature.label_id)


def pack(tokens_a, tokens_b, max_seq_length, tokenizer, label_id):
    """The `InputFeatures` of pieces that fit: `[CLS] a [SEP] (b [SEP])`,
    padded to max_seq_length."""
    # The convention in BERT: [CLS] A [SEP] with type 0, then B [SEP] with
    # type 1. [CLS]'s final vector is the "sentence vector" the classifier
    # reads; that only makes sense because the entire model is fine-tuned.
    tokens = [CLS_TOKEN, *tokens_a, SEP_TOKEN]
    segment_ids = [0] * len(tokens)
    if tokens_b:
        tokens += [*tokens_b, SEP_TOKEN]
        segment_ids += [1] * (len(tokens_b) + 1)
    input_ids = tokenizer.convert_tokens_to_ids(tokens)
    # The mask has 1 for real tokens and 0 for padding tokens. Only real
    # tokens are attended to.
    input_mask = [1] * len(input_ids)
    padding = [0] * (max_seq_length - len(input_ids))
    return InputFeatures(
        input_ids=input_ids + padding,
        input_mask=input_mask + padding,
        segment_ids=segment_ids + padding,
        label_id=label_id,
        is_real_example=True,
    )


def convert_example_windows(
    ex_index,
    example,
    label_list,
    max_seq_length,
    tokenizer,
    multi_label=False,
    long_inputs=None,
    log=False,
):
    """The features of an example under --long_inputs (a
    long_inputs.LongInputs; None: truncate): `convert_single_example`'s one
    feature, or one per window (each with `example_index` = ex_index and
    `num_windows`), made one at a time."""
    if (
        long_inputs is None
        or long_inputs.strategy == long_inputs_lib.TRUNCATE
        or isinstance(example, PaddingInputExample)
    ):
        feature = convert_single_example(
            ex_index,
            example,
            label_list,
            max_seq_length,
            tokenizer,
            multi_label,
            log=log,
        )
        feature.example_index, feature.num_windows = ex_index, 1
        yield feature
        return
    words_a = tokenizer.tokenize_words(example.text_a)
    words_b = (
        tokenizer.tokenize_words(example.text_b) if example.text_b else None
    )
    windows = list(long_inputs.windows(words_a, words_b, max_seq_length))
    label_id = _label_id(example, label_list)
    # One window that lost pieces (head_tail's cut) counts as truncated.
    pieces = sum(len(w) for w in [*words_a, *(words_b or ())])
    for number, (tokens_a, tokens_b) in enumerate(windows):
        feature = pack(tokens_a, tokens_b, max_seq_length, tokenizer, label_id)
        feature.example_index, feature.num_windows = ex_index, len(windows)
        kept = len(tokens_a) + len(tokens_b or ())
        feature.truncated = len(windows) == 1 and kept < pieces
        if log and not number:
            _log_example(ex_index, example, feature, tokens_a, tokens_b)
        yield feature


def text_arrays(
    text_a, max_seq_length, tokenizer, text_b=None, long_inputs=None
):
    """The original's features of texts (or pairs) for prediction, as
    numpy arrays (convert_single_example's, without labels).

    Args:
      text_a: list of str; text_b: None, or a list of second texts.
      long_inputs: long_inputs.LongInputs, or None (truncate). With chunks
        each window is a row, and "example_index" [R] gives its text.

    Returns:
      ({"input_ids", "input_mask", "segment_ids": int32 [R, max_seq_length]
      (R = N but with chunks)}, the number of rows cut to max_seq_length).
    """
    from modeling.data import feature_names

    if text_b is not None and len(text_b) != len(text_a):
        raise ValueError(f"{len(text_a)} texts but {len(text_b)} second texts")
    names = ("input_ids", "input_mask", "segment_ids")
    rows = {name: [] for name in names}
    index = []
    truncated = 0
    for i, text in enumerate(text_a):
        example = InputExample(
            guid=str(i),
            text_a=text,
            text_b=None if text_b is None else text_b[i],
            label="0",  # Unused: the features' label is not read.
        )
        for feature in convert_example_windows(
            i, example, None, max_seq_length, tokenizer, long_inputs=long_inputs
        ):
            truncated += feature.truncated
            index.append(i)
            for name in names:
                rows[name].append(getattr(feature, name))
    arrays = {
        name: np.array(values, np.int32).reshape(len(index), max_seq_length)
        for name, values in rows.items()
    }
    if long_inputs is not None and long_inputs.windowed:
        arrays[feature_names.EXAMPLE_INDEX] = np.array(index, np.int64)
    return arrays, truncated


def log_truncated(count, total, max_seq_length, what="examples"):
    """Logs how many texts were cut to max_seq_length (as the original cuts
    them, silently)."""
    if count:
        logging.info(
            "%d of %d %s were longer than max_seq_length=%d tokens and were "
            "truncated (as the original does)",
            count,
            total,
            what,
            max_seq_length,
        )


def _label_id(example, label_list):
    if label_list is None:
        return float(example.label)
    # Any sequence, as the original's enumerate (a notebook's numpy array
    # of df.label.unique()).
    label_list = list(label_list)
    if isinstance(example.label, (list, tuple)):  # A multi-label example.
        unknown = set(example.label) - set(label_list)
        if unknown:
            raise ValueError(
                f"Example {example.guid}: labels {sorted(unknown)} are not "
                f"among the task's labels {label_list}"
            )
        return [int(label in example.label) for label in label_list]
    try:
        return label_list.index(example.label)
    except ValueError:
        raise ValueError(
            f"Example {example.guid}: label {example.label!r} is not one of "
            f"the task's labels {label_list}"
        ) from None


def convert_examples_to_features(
    examples, label_list, max_seq_length, tokenizer
):
    """Converts `InputExample`s to a list of `InputFeatures` in memory (the
    original kept it for its notebooks; the scripts write records)."""
    return [
        convert_single_example(
            i, example, label_list, max_seq_length, tokenizer, log=True
        )
        for i, example in enumerate(examples)
    ]


def count_records(examples, max_seq_length, tokenizer, long_inputs=None):
    """The number of records `file_based_convert_examples_to_features`
    writes for `examples` (a list): one per example, or with chunks one per
    window (the training steps of an epoch)."""
    if long_inputs is None or not long_inputs.windowed:
        return len(examples)
    count = 0
    for example in examples:
        words_b = (
            tokenizer.tokenize_words(example.text_b) if example.text_b else None
        )
        count += sum(
            1
            for _ in long_inputs.windows(
                tokenizer.tokenize_words(example.text_a),
                words_b,
                max_seq_length,
            )
        )
    return count


def features_to_example_bytes(feature, windowed=False):
    """Serializes an `InputFeatures` as the original's tf.train.Example
    (`windowed`: with its EXAMPLE_INDEX and NUM_WINDOWS, --long_inputs=
    chunks)."""
    from modeling.data import input_pipeline  # TensorFlow: records only.

    if isinstance(feature.label_id, float):
        label = input_pipeline.float_feature([feature.label_id])
    elif isinstance(feature.label_id, list):  # Multi-label: 0/1 per label.
        label = input_pipeline.int_feature(feature.label_id)
    else:
        label = input_pipeline.int_feature([feature.label_id])
    names = input_pipeline.CLASSIFIER_SEQ_FEATURES
    values = (feature.input_ids, feature.input_mask, feature.segment_ids)
    features = [
        (name, input_pipeline.int_feature(v)) for name, v in zip(names, values)
    ]
    features.append((input_pipeline.LABEL_IDS, label))
    features.append(
        (
            input_pipeline.IS_REAL_EXAMPLE,
            input_pipeline.int_feature([int(feature.is_real_example)]),
        )
    )
    if windowed:
        features.append(
            (
                input_pipeline.EXAMPLE_INDEX,
                input_pipeline.int_feature([feature.example_index]),
            )
        )
        features.append(
            (
                input_pipeline.NUM_WINDOWS,
                input_pipeline.int_feature([feature.num_windows]),
            )
        )
    return input_pipeline.serialize_example(features)


def file_based_convert_examples_to_features(
    examples,
    label_list,
    max_seq_length,
    tokenizer,
    output_file,
    multi_label=False,
    total=None,
    long_inputs=None,
):
    """Converts a set of `InputExample`s to a TFRecord file (atomically).

    The file is written under a temporary name and renamed when complete, so
    a crash never leaves a truncated `train.tf_record` behind. `examples`
    may be any iterable (a file streamed row by row); `total` is its
    expected length for the progress lines when it has no len().
    `long_inputs` (long_inputs.LongInputs, not in the original): with
    chunks, a record per window (`convert_example_windows`).

    Returns:
      The number of records written (not in the original).
    """
    counter = progress.Progress(
        f"Writing {os.path.basename(os.fspath(output_file))}",
        total=len(examples) if hasattr(examples, "__len__") else total,
    )
    import tensorflow as tf  # Records only: the conversion needs none.

    windowed = long_inputs is not None and long_inputs.windowed
    truncated = windowed_examples = records = 0
    with (
        file_io.atomic_path(output_file) as tmp_file,
        tf.io.TFRecordWriter(tmp_file) as writer,
    ):
        for ex_index, example in enumerate(examples):
            records_of_example = 0
            for feature in convert_example_windows(
                ex_index,
                example,
                label_list,
                max_seq_length,
                tokenizer,
                multi_label=multi_label,
                long_inputs=long_inputs,
                log=True,
            ):
                truncated += getattr(feature, "truncated", False)
                # Once per example, at its first window.
                windowed_examples += (
                    feature.num_windows > 1 and not records_of_example
                )
                records_of_example += 1
                writer.write(features_to_example_bytes(feature, windowed))
                records += 1
            counter.add()
    total = counter.finish()
    log_truncated(truncated, total, max_seq_length)
    if windowed:
        logging.info(
            "%d of %d examples were longer than max_seq_length=%d tokens: "
            "%d records (--long_inputs=chunks)",
            windowed_examples,
            total,
            max_seq_length,
            records,
        )
    return records


def padded_to_batch(examples, batch_size):
    """Yields `examples`, then `PaddingInputExample`s up to a multiple of
    batch_size (`pad_examples` for an iterable of unknown length)."""
    count = 0
    for example in examples:
        count += 1
        yield example
    while count % batch_size:
        count += 1
        yield PaddingInputExample()


def pad_examples(examples, batch_size):
    """Pads `examples` with `PaddingInputExample`s to a multiple of batch_size.

    Returns:
      (padded list, number of real examples).
    """
    num_actual = len(examples)
    padded = list(examples)
    while len(padded) % batch_size != 0:
        padded.append(PaddingInputExample())
    return padded, num_actual


def read_tsv(input_file, quotechar=None):
    """Reads a tab separated value file as the original does.

    Quote characters stay literal text (QUOTE_NONE: pandas or csv's default
    dialect would join quoted fields across tabs), unless a `quotechar` is
    given (the original's `_read_tsv` argument, for a processor of one's
    own: quoted fields as the csv module reads them).

    Returns:
      list of rows, each a list of strings.

    Raises:
      FileNotFoundError: naming the file.
      ValueError: `<file> line N: not UTF-8 text`.
    """
    # The one reader of the own-data files: lines end at "\n" only, as the
    # original's reader split them; a UTF-8 byte-order mark is ignored.
    table = table_files.TableFile(input_file, format="tsv")
    return list(table.lines_of_fields(quotechar))


def write_glue_submission(path, examples, predictions, label_list):
    """Writes one GLUE leaderboard file (`index<TAB>prediction` lines).

    Args:
      path: output file, conventionally `<dir>/<TASK>.tsv` (`CoLA.tsv`, ...).
      examples: the test `InputExample`s; their `index` is the row id.
      predictions: per example, a class id, or the score for regression.
      label_list: the task's labels (ids are written as these names); None
        for regression, whose scores are clipped to GLUE's range [0, 5].
    """
    lines = [GLUE_SUBMISSION_HEADER]
    for example, prediction in zip(examples, predictions, strict=True):
        lines.append(glue_submission_line(example, prediction, label_list))
    file_io.write_text(path, "".join(lines))


GLUE_SUBMISSION_HEADER = "index\tprediction\n"


def glue_submission_line(example, prediction, label_list):
    """One line of a GLUE leaderboard file (see `write_glue_submission`)."""
    if label_list is None:
        value = f"{min(max(float(prediction), 0.0), 5.0):.3f}"
    else:
        value = label_list[int(prediction)]
    return f"{example.index}\t{value}\n"


def data_file(data_dir, *names):
    """The first of `names` that exists under data_dir, else the first one."""
    for name in names:
        path = os.path.join(data_dir, name)
        if file_io.exists(path):
            return path
    return os.path.join(data_dir, names[0])
