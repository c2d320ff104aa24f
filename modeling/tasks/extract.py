"""Feature extraction (extract_features.py): text -> per-token layer vectors.

Behaviour of the original at HEAD:
- One example per input line (stripped; a blank line still gives
  `[CLS] [SEP]`); `A ||| B` (regex `^(.*) \\|\\|\\| (.*)$`) is a pair.
- A pair is truncated to max_seq_length - 3 by popping the longer side (B on
  a tie); a single text is cut to max_seq_length - 2.
- Output: one JSON object per line, `{"linex_index": i, "features": [{"token":
  t, "layers": [{"index": l, "values": [...]}, ...]}, ...]}` for the real
  tokens only, layers in the --layers order, values `round(float(x), 6)`,
  `json.dumps` defaults.

Shapes: B = batch size, T = max_seq_length, H = hidden size.
"""

import dataclasses
import json
import re

import numpy as np
import tensorflow as tf
from absl import logging

from modeling import checkpoints
from modeling import config as config_lib
from modeling import encoder
from modeling import errors
from modeling.data import classifier_data
from modeling.data import file_io
from modeling.data import input_pipeline
from modeling.tasks import common
from modeling.tasks.settings import extract as extract_settings
from modeling.text import tokenization
from modeling.text import vocabulary
from modeling.training import predictor

# The script's flags (modeling/tasks/settings/extract.py).
Settings = extract_settings.Settings

CLS, SEP = vocabulary.CLS_TOKEN, vocabulary.SEP_TOKEN
_PAIR = re.compile(r"^(.*) \|\|\| (.*)$")


@dataclasses.dataclass
class InputExample:
    unique_id: int
    text_a: str
    text_b: str = None


@dataclasses.dataclass
class InputFeatures:
    """One model input: tokens and int lists of length T."""

    unique_id: int
    tokens: list
    input_ids: list
    input_mask: list
    input_type_ids: list


def parse_layers(layers, num_hidden_layers):
    """Parses --layers ("-1,-2") into ints valid for `num_hidden_layers`.

    Raises:
        ValueError: a non-integer or an index outside the encoder layers.
    """
    try:
        indexes = [int(x) for x in layers.split(",")]
    except ValueError as e:
        raise ValueError(
            f"--layers must be comma-separated integers, got {layers!r}"
        ) from e
    for index in indexes:
        if not -num_hidden_layers <= index < num_hidden_layers:
            raise ValueError(
                f"--layers index {index} is out of range for a model with "
                f"{num_hidden_layers} layers"
            )
    return indexes


def read_examples(input_file):
    """Reads one InputExample per line of a UTF-8 file (any gfile path):
    `text` or `text_a ||| text_b`.

    Raises:
      errors.UserError: a line that is not UTF-8 (naming file and line).
    """
    examples = []
    with tf.io.gfile.GFile(input_file, "rb") as reader:
        for unique_id, raw in enumerate(reader):
            try:
                line = raw.decode("utf-8").strip()
            except UnicodeDecodeError as e:
                raise errors.UserError(
                    f"{input_file} line {unique_id + 1}: byte "
                    f"{raw[e.start]:#04x} at column {e.start + 1} is not "
                    "UTF-8; the input must be UTF-8 text"
                ) from e
            match = _PAIR.match(line)
            if match is None:
                examples.append(InputExample(unique_id, line))
                continue
            if line.count(" ||| ") > 1:
                # The original splits at the last separator.
                logging.warning(
                    "%s line %d has more than one ' ||| ': text_a is %r, "
                    "text_b %r",
                    input_file,
                    unique_id + 1,
                    match.group(1),
                    match.group(2),
                )
            examples.append(
                InputExample(unique_id, match.group(1), match.group(2))
            )
    return examples


def convert_example(example, seq_length, tokenizer):
    """Tokenizes, truncates and pads one example into InputFeatures."""
    tokens_a = tokenizer.tokenize(example.text_a)
    tokens_b = tokenizer.tokenize(example.text_b) if example.text_b else None
    if tokens_b:
        # Account for [CLS], [SEP], [SEP] with "- 3".
        classifier_data.truncate_seq_pair(tokens_a, tokens_b, seq_length - 3)
    else:
        # Account for [CLS] and [SEP] with "- 2".
        tokens_a = tokens_a[: seq_length - 2]
    tokens = [CLS, *tokens_a, SEP]
    type_ids = [0] * len(tokens)
    if tokens_b:
        tokens += [*tokens_b, SEP]
        type_ids += [1] * (len(tokens_b) + 1)
    input_ids = list(tokenizer.convert_tokens_to_ids(tokens))
    padding = [0] * (seq_length - len(input_ids))
    return InputFeatures(
        unique_id=example.unique_id,
        tokens=tokens,
        input_ids=input_ids + padding,
        input_mask=[1] * len(input_ids) + padding,
        input_type_ids=type_ids + padding,
    )


def convert_examples_to_features(examples, seq_length, tokenizer):
    """Converts every example; logs the first five as the original does."""
    features = []
    for index, example in enumerate(examples):
        feature = convert_example(example, seq_length, tokenizer)
        if index < 5:
            logging.info("*** Example ***")
            logging.info("unique_id: %s", feature.unique_id)
            logging.info("tokens: %s", " ".join(feature.tokens))
            logging.info("input_ids: %s", " ".join(map(str, feature.input_ids)))
        features.append(feature)
    return features


def _columns(rows):
    """The model's int32 inputs [N, T] of InputFeatures."""
    return {
        "input_ids": np.array([f.input_ids for f in rows], np.int32),
        "input_mask": np.array([f.input_mask for f in rows], np.int32),
        "segment_ids": np.array([f.input_type_ids for f in rows], np.int32),
    }


def extract_layers(
    model,
    features,
    layer_indexes,
    batch_size,
    strategy=None,
    length_sorted=True,
):
    """Runs the encoder and yields the chosen layers of every feature.

    Args:
        model: encoder.BertModel, weights loaded.
        features: list of InputFeatures.
        layer_indexes: list of int, indexes into `all_encoder_layers`.
        batch_size: int, global batch size B.
        strategy: tf.distribute.Strategy (default: the current one).
        length_sorted: batch rows of similar length together, each batch
            cut to its longest row (the rows' real tokens get the same
            values up to float32 rounding); False: batches of T in input
            order, the last one filled (TPUs).

    Yields:
        (InputFeatures, list of float32 np.ndarray [T', H], one per index,
        T' >= the feature's tokens), in input order.
    """
    if not features:
        return
    names = [f"layer_{i}" for i in range(len(layer_indexes))]

    def select(outputs):
        layers = outputs["all_encoder_layers"]
        return {n: layers[i] for n, i in zip(names, layer_indexes)}

    backend = predictor.make_backend(
        "tensorflow", model, strategy, select=select
    )
    length = len(features[0].input_ids)
    rows = predictor.Predictor(
        backend,
        batch_size,
        length_sorted=length_sorted,
        multiple=input_pipeline.predict_multiple(length),
        window_batches=_window_batches(
            batch_size * length * model.config.hidden_size * len(names) * 4
        ),
    ).rows(_columns(features), total=len(features), what="Extracting")
    for feature, (_, outputs) in zip(features, rows, strict=True):
        yield feature, [outputs[n] for n in names]


# What the length-sorted batches of one window may hold of layer outputs.
# Rows computed ahead of their turn wait for it: the predictor's default
# window (64 batches) held 3.2 GB of BERT-base's four layers at batch 32,
# seq 128, where the original held one batch's 50 MB.
WINDOW_BYTES = 256 * 2**20


def _window_batches(batch_bytes):
    """Batches a sorting window may span, their outputs within WINDOW_BYTES
    (1 at least, the predictor's default at most)."""
    return max(1, min(predictor.WINDOW_BATCHES, WINDOW_BYTES // batch_bytes))


def feature_json(feature, layer_values, layer_indexes):
    """One output line (without the newline) as the original writes it.

    Args:
        feature: InputFeatures.
        layer_values: list of float32 np.ndarray [T, H], one per index.
        layer_indexes: list of int, the --layers values.
    """
    all_features = []
    for i, token in enumerate(feature.tokens):
        layers = [
            {"index": index, "values": [round(float(x), 6) for x in values[i]]}
            for index, values in zip(layer_indexes, layer_values)
        ]
        all_features.append({"token": token, "layers": layers})
    return json.dumps(
        {"linex_index": feature.unique_id, "features": all_features}
    )


def write_lines_atomically(output_file, lines):
    """Writes `lines` (each gets a "\n") to a temporary file next to
    `output_file`, then renames it into place: readers never see a partial
    file, and a failure leaves no output behind."""
    count = 0
    with file_io.atomic_write(output_file) as writer:
        for line in lines:
            writer.write(line + "\n")
            count += 1
    return count


def run_extraction(
    input_file,
    output_file,
    bert_config_file,
    init_checkpoint,
    vocab_file,
    do_lower_case=True,
    layers="-1,-2,-3,-4",
    max_seq_length=128,
    batch_size=32,
    use_one_hot_embeddings=False,
    strategy=None,
    length_sorted=True,
):
    """extract_features.py end to end; returns the number of lines written.
    length_sorted: see `extract_layers` (False on TPU).

    Every check (config, layers, vocabulary, input text, output folder)
    comes before the model is built; an empty input writes an empty file,
    as the original does, without building it.
    """
    if not file_io.exists(input_file):
        raise errors.UserError(f"--input_file={input_file} does not exist")
    if file_io.is_dir(input_file):
        # tf.io.gfile reads a folder as an empty file: "0 lines written".
        raise errors.UserError(
            f"--input_file={input_file} is a folder, not a file"
        )
    file_io.check_file_path(output_file, f"--output_file={output_file}")
    config = config_lib.BertConfig.from_json_file(bert_config_file)
    layer_indexes = parse_layers(layers, config.num_hidden_layers)
    config_lib.check_max_seq_length(max_seq_length, config)
    config_lib.check_vocab_size(vocab_file, config)
    tokenizer = tokenization.FullTokenizer(
        vocab_file=vocab_file, do_lower_case=do_lower_case
    )
    examples = read_examples(input_file)
    if not examples:
        logging.warning("%s holds no line: writing an empty file", input_file)
        return write_lines_atomically(output_file, [])
    features = convert_examples_to_features(examples, max_seq_length, tokenizer)
    strategy = strategy or tf.distribute.get_strategy()
    with strategy.scope():
        model = encoder.BertModel(
            config, use_one_hot_embeddings=use_one_hot_embeddings
        )
        model.build()
    checkpoints.load_weights(model, init_checkpoint)
    results = extract_layers(
        model,
        features,
        layer_indexes,
        batch_size,
        strategy,
        length_sorted=length_sorted,
    )
    lines = (
        feature_json(feature, values, layer_indexes)
        for feature, values in results
    )
    return write_lines_atomically(output_file, lines)


def run(settings):
    """extract_features' main(): writes output_file; returns its line count.

    Raises:
      ValueError: bad --layers, max_seq_length or vocabulary for the model.
    """
    s = settings
    strategy = common.set_up(s)
    count = run_extraction(
        input_file=s.input_file,
        output_file=s.output_file,
        bert_config_file=s.bert_config_file,
        init_checkpoint=s.init_checkpoint,
        vocab_file=s.vocab_file,
        do_lower_case=s.do_lower_case,
        layers=s.layers,
        max_seq_length=s.max_seq_length,
        batch_size=s.batch_size,
        use_one_hot_embeddings=s.use_one_hot_embeddings,
        strategy=strategy,
        # TPUs compile one program per shape: fixed batches there.
        length_sorted=not s.use_tpu,
    )
    logging.info("Wrote %d lines to %s", count, s.output_file)
    return count
