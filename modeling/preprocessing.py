"""Raw text -> the model's inputs, as a Keras layer.

`BertPreprocessor` is the serving export's in-graph preprocessor
(`text.in_graph.TextPreprocessor`: `InGraphTokenizer` then `InputPacker`)
behind a Keras layer, so it goes where Keras users put preprocessing: in a
`tf.data` pipeline (`dataset.map(preprocessor)`), in front of a model
(`BertTextClassifier`), in a `.keras` file. Its ids are FullTokenizer's and
its packing is `convert_single_example`'s (`[CLS] A [SEP] B [SEP]`, the
longer segment truncated first), so a model fine-tuned on its output is fed
exactly what run_classifier.py feeds it.

The vocabulary is kept in the layer's config as the list of tokens, so
`get_config` / `from_config` and `keras.models.load_model` need no file.
"""

import keras
import tensorflow as tf
from absl import logging

from modeling import checkpoints
from modeling import config as config_lib
from modeling.data import input_pipeline
from modeling.text import in_graph
from modeling.text import tokenization
from modeling.text import vocabulary as vocabulary_lib

# The names of a sentence pair when given as a dict (the serving export's).
TEXT_A = "text_a"
TEXT_B = "text_b"


# Whether a vocabulary is uncased (the one rule: text/vocabulary.py's).
infer_do_lower_case = vocabulary_lib.infer_do_lower_case


@keras.saving.register_keras_serializable(package="bert")
class BertPreprocessor(keras.layers.Layer):
    """Strings, or pairs of strings, -> "input_ids", "input_mask",
    "segment_ids" (int32 [B, sequence_length]), the original's features.

    Call it on:
      * a string Tensor (or array, or list of str) [B]: single sentences;
      * a tuple (text_a, text_b) of two of them, or a dict with "text_a"
        and "text_b": sentence pairs (a row with an empty text_b is packed
        as a single sentence, as the original does);
      * a scalar string: one sentence, outputs [sequence_length].

    Args:
      vocabulary: the tokens (list of str, id = index) or a vocab file.
      do_lower_case: bool, as FullTokenizer's.
      sequence_length: int, the length of every output row (the scripts'
        max_seq_length).
    """

    def __init__(
        self, vocabulary, do_lower_case=True, sequence_length=128, **kwargs
    ):
        kwargs.setdefault("trainable", False)
        super().__init__(**kwargs)
        # Strings are not tensors Keras knows how to convert or cast.
        self._convert_input_args = False
        self._allow_non_tensor_positional_args = True
        # A tuple: Keras and TensorFlow track lists, not tuples of str.
        self.vocabulary = tuple(vocabulary_lib.read_vocab_lines(vocabulary))
        self.do_lower_case = bool(do_lower_case)
        self.sequence_length = int(sequence_length)
        self.text = in_graph.TextPreprocessor(
            self.vocabulary, self.do_lower_case, self.sequence_length
        )
        self.built = True

    @classmethod
    def from_vocab(cls, vocab_file, do_lower_case=True, sequence_length=128):
        """The preprocessor of a vocab.txt."""
        return cls(vocab_file, do_lower_case, sequence_length)

    @classmethod
    def from_checkpoint(
        cls,
        path,
        sequence_length=128,
        do_lower_case=None,
        bert_config_file=None,
    ):
        """The preprocessor of a checkpoint folder (its vocab.txt).

        Args:
          path: a checkpoint folder or prefix (see
            `checkpoints.checkpoint_files`).
          sequence_length: int, at most the config's
            max_position_embeddings.
          do_lower_case: bool; None: uncased when the vocabulary has no
            upper-case token (as the released uncased vocabularies).
          bert_config_file: str, another config than the one beside the
            checkpoint (its sizes are checked against).

        Raises:
          FileNotFoundError: no checkpoint, config or vocab.txt there.
          ValueError: sequence_length too long for the model, a vocabulary
            larger than the model's, or do_lower_case contradicting the
            checkpoint's name (the original's check).
        """
        files = checkpoints.checkpoint_files(path, bert_config_file)
        if files.vocab_file is None:
            raise FileNotFoundError(
                f"No {checkpoints.VOCAB_FILE} beside checkpoint "
                f"{files.prefix}: use BertPreprocessor.from_vocab(vocab_file, "
                "do_lower_case, sequence_length)"
            )
        config = config_lib.BertConfig.from_json_file(files.config_file)
        config_lib.check_max_seq_length(sequence_length, config)
        config_lib.check_vocab_size(files.vocab_file, config)
        tokens = vocabulary_lib.read_vocab_lines(files.vocab_file)
        if do_lower_case is None:
            do_lower_case = infer_do_lower_case(tokens)
            logging.info(
                "do_lower_case=%s (%s has %s upper-case tokens)",
                do_lower_case,
                files.vocab_file,
                "no" if do_lower_case else "some",
            )
        tokenization.validate_case_matches_checkpoint(
            do_lower_case, files.prefix
        )
        return cls(tokens, do_lower_case, sequence_length)

    def call(self, inputs, text_b=None):
        # `text_b` as a second argument: dataset.map(preprocessor) on a
        # dataset of (text_a, text_b) pairs, which tf.data unpacks.
        if text_b is not None:
            inputs = (inputs, text_b)
        text_a, text_b = split_texts(inputs)
        scalar = text_a.shape.rank == 0
        if scalar:
            text_a = text_a[tf.newaxis]
            text_b = None if text_b is None else text_b[tf.newaxis]
        features = self.text(text_a, text_b)
        if scalar:
            features = {k: v[0] for k, v in features.items()}
        return features

    def compute_output_spec(self, inputs, text_b=None):
        del text_b  # The shape is text_a's.
        text_a, _ = split_texts(inputs, convert=False)
        shape = tuple(text_a.shape) + (self.sequence_length,)
        return {
            name: keras.KerasTensor(shape, "int32")
            for name in input_pipeline.CLASSIFIER_SEQ_FEATURES
        }

    def full_tokenizer(self):
        """The same tokenization in Python (tokenization.FullTokenizer, the
        same ids), for features made outside the graph: the windows of
        long texts (modeling/data/long_inputs.py)."""
        if getattr(self, "_full_tokenizer", None) is None:
            from modeling.text import tokenization

            self._full_tokenizer = tokenization.FullTokenizer(
                self.vocabulary, self.do_lower_case
            )
        return self._full_tokenizer

    def get_config(self):
        config = super().get_config()
        config.update(
            vocabulary=list(self.vocabulary),
            do_lower_case=self.do_lower_case,
            sequence_length=self.sequence_length,
        )
        return config


def split_texts(inputs, convert=True):
    """(text_a, text_b or None) of the inputs BertPreprocessor takes.

    Raises:
      ValueError: a tuple or list of other than one or two parts, or a
        dict without "text_a".
    """
    if isinstance(inputs, dict):
        if TEXT_A not in inputs:
            raise ValueError(
                f"A dict of texts needs {TEXT_A!r} (and {TEXT_B!r} for "
                f"pairs), got keys {sorted(inputs)}"
            )
        parts = [inputs[TEXT_A], inputs.get(TEXT_B)]
    elif isinstance(inputs, tuple):
        if len(inputs) not in (1, 2):
            raise ValueError(
                "A tuple of texts is (text_a,) or (text_a, text_b), got "
                f"{len(inputs)} parts"
            )
        parts = list(inputs) + [None] * (2 - len(inputs))
    else:
        parts = [inputs, None]
    if convert:
        parts = [
            None if p is None else tf.convert_to_tensor(p, tf.string)
            for p in parts
        ]
    return parts[0], parts[1]
