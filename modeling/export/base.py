"""What every serving export shares: the `Server` base (a model behind the
in-graph preprocessing; serving_default from `serve_text`), the batch cut to
its longest row, a text's windows combined, the vocabulary a server without
TensorFlow reads, and `save_export`, which publishes an export atomically
with its bert_export.json. One module per export beside it: classifier.py,
embedder.py, tagger.py, multiple_choice.py, squad.py (and the Hub-style
models, encoder.py)."""

import json

import tensorflow as tf

from modeling.data import input_pipeline
from modeling.export import folders
from modeling.export import saved_models
from modeling.text import vocabulary

SERVING_DEFAULT = "serving_default"
# A classifier export's copy of its vocabulary (bert_export.json "vocab_file").
VOCAB_FILE = "vocab.txt"
EXPORT_INFO_FILE = folders.EXPORT_INFO_FILE


def to_longest_row(features):
    """Packed features [..., max_seq_length] cut to the batch's longest
    packed row: the outputs at real positions are the same (padding only
    ever gets the -10000 attention bias), the work that of the real
    tokens. Rows longer than max_seq_length were truncated when packed."""
    return input_pipeline.trim_padding(
        features, multiple=1, seq_features=tuple(features)
    )


def cutting(long_inputs):
    """long_inputs, or None when it cuts texts as the original does."""
    if long_inputs is None or long_inputs.strategy == "truncate":
        return None
    return long_inputs


def combine_windows(outputs, text, texts, long_inputs):
    """The outputs of windows [R, ...] -> of their texts [texts, ...], as
    long_inputs.LongInputs.combine: the mean, or with chunk_pooling=max the
    maximum, of a text's windows (head_tail's one window: itself)."""
    if long_inputs.chunk_pooling == "max":
        return tf.math.unsorted_segment_max(outputs, text, texts)
    return tf.math.unsorted_segment_mean(outputs, text, texts)


class Server(tf.Module):
    """The base of every serving export's root: a model behind the in-graph
    preprocessing, `serve_text` its serving_default signature (raw text
    in), written by `save` with its vocabulary (for the TF-free servers,
    modeling/tasks/lite.py) and its bert_export.json."""

    def signatures(self):
        """The concrete functions to save, keyed by signature name."""
        return {SERVING_DEFAULT: self.serve_text.get_concrete_function()}

    def save(
        self, export_dir, info, extra_files=None, vocab=None, do_lower_case=None
    ):
        """Writes the export (save_export) with its vocabulary recorded in
        `info` (tokenization_files).

        Args:
          extra_files: None, or (files, tflite) as save_export's: a TF
            Lite model and what `info` records of it.
          vocab, do_lower_case: the tokenization (a vocab path or its
            tokens); None: the server's preprocessor's.
        """
        if vocab is None:
            vocab = self.preprocessor.vocab_file
            do_lower_case = self.preprocessor.do_lower_case
        files = tokenization_files(info, vocab, do_lower_case)
        tflite_info = None
        if extra_files is not None:
            more, tflite_info = extra_files
            files.update(more)
        return save_export(
            self, export_dir, self.signatures(), info, (files, tflite_info)
        )


def tokenization_files(info, vocab, do_lower_case):
    """The tokenization, for a server without the graph's tokenizer
    (modeling/tasks/lite.py): records `do_lower_case` and "vocab_file" in
    `info` and returns {VOCAB_FILE: the vocabulary's bytes}, for
    save_export's files.

    Args:
      vocab: a vocab.txt path, or its tokens.
    """
    info["do_lower_case"] = bool(do_lower_case)
    info["vocab_file"] = VOCAB_FILE
    tokens = vocabulary.read_vocab_lines(vocab)
    return {VOCAB_FILE: "".join(t + "\n" for t in tokens).encode()}


def save_export(server, export_dir, signatures, info, extra_files=None):
    """Writes `server` as a SavedModel with `info` in
    assets.extra/bert_export.json, atomically: under a temporary name beside
    `export_dir`, then renamed onto it (folders.publishing: it replaces an
    earlier export, never a folder holding anything else; a link's target).

    Args:
      extra_files: None, or (files, tflite): files {name: bytes} written
        into the export folder (a TF Lite model, modeling/export/tflite.py;
        a vocabulary) and what `info` records of a TF Lite model under
        "tflite" (None: none).
    """
    files = None
    if extra_files is not None:
        files, tflite_info = extra_files
        if tflite_info is not None:
            info["tflite"] = tflite_info
    with folders.publishing(export_dir) as tmp_dir:
        saved_models.write(
            server,
            tmp_dir,
            signatures,
            files,
            {EXPORT_INFO_FILE: json.dumps(info, indent=2) + "\n"},
        )
    return export_dir
