"""Encoders in the TF Hub BERT convention, on the using side.

The convention (TF Hub's and Kaggle's BERT SavedModels follow it, and so do
the exports of modeling/export/encoder.py): a SavedModel whose root object is
callable as `encoder(inputs, training=False)` on a dict of int32 [B, T]
Tensors `input_word_ids`, `input_mask`, `input_type_ids`, and returns a dict
with `pooled_output` [B, H], `sequence_output` [B, T, H], `encoder_outputs`
(one [B, T, H] per layer) and `default` (= pooled_output); its `variables`
and `trainable_variables` are attributes, so a user can fine-tune it; the
asset `vocab_file` and the boolean variable `do_lower_case` say how to
tokenize for it.

`BertHubClassifier` is run_classifier's model with such an encoder in place
of the Python `BertModel` (run_classifier_with_tfhub.py): the same head
(`output_weights` / `output_bias` at the root scope), loss, Trainer and
outputs. The encoder's variables keep the names they were saved under; for
an encoder exported here those are the original checkpoint names, so the
fine-tuned checkpoints are those run_classifier.py writes.

Shapes: B = batch size, T = sequence length, H = hidden size, L = labels.
"""

import contextlib
import json
import os

import keras
import tensorflow as tf

from modeling import checkpoints
from modeling import config as config_lib
from modeling import errors
from modeling import heads
from modeling.export import folders

# The convention's input names, and the feature (TFRecord) names they take.
INPUT_WORD_IDS = "input_word_ids"
INPUT_MASK = "input_mask"
INPUT_TYPE_IDS = "input_type_ids"
FEATURES_OF_INPUTS = {
    INPUT_WORD_IDS: "input_ids",
    INPUT_MASK: "input_mask",
    INPUT_TYPE_IDS: "segment_ids",
}
# Its output names.
POOLED_OUTPUT = "pooled_output"
SEQUENCE_OUTPUT = "sequence_output"
ENCODER_OUTPUTS = "encoder_outputs"
DEFAULT_OUTPUT = "default"
MLM_LOGITS = "mlm_logits"
MASKED_LM_POSITIONS = "masked_lm_positions"
# The tokenization attributes of an encoder SavedModel.
VOCAB_FILE = "vocab_file"
DO_LOWER_CASE = "do_lower_case"
# Not part of the convention: the exports of this repository also carry the
# BertConfig they were made from (assets.extra/bert_config.json), which lets
# a user check a sequence length against max_position_embeddings.
CONFIG_FILE = folders.HUB_CONFIG_FILE
EXTRA_ASSETS = folders.EXTRA_ASSETS

# run_classifier_with_tfhub.py initializes its head with stddev 0.02 (the
# encoder's initializer_range is not part of the convention).
HEAD_INITIALIZER_RANGE = 0.02


def to_hub_inputs(features):
    """The original's features -> the convention's inputs.

    Args:
      features: dict with "input_ids", "input_mask", "segment_ids" int
        Tensors [B, T] (other keys ignored).

    Returns:
      dict of int32 Tensors "input_word_ids", "input_mask",
      "input_type_ids".
    """
    return {
        name: tf.cast(features[feature], tf.int32)
        for name, feature in FEATURES_OF_INPUTS.items()
    }


def resolve_handle(handle):
    """The local or gs:// folder of an encoder handle.

    A URL (https://tfhub.dev/..., https://www.kaggle.com/models/...) needs
    the tensorflow_hub package, which downloads and caches it; without it,
    the error says to download the SavedModel first.

    Raises:
      errors.UserError: a URL without tensorflow_hub.
    """
    handle = os.fspath(handle)
    if not handle.startswith(("http://", "https://")):
        return handle
    try:
        import tensorflow_hub
    except ImportError:
        raise errors.UserError(
            f"--bert_hub_module_handle={handle} is a URL and tensorflow_hub "
            "is not installed: download the SavedModel first (e.g. the "
            "model page's download, then untar it) and pass its local or "
            "gs:// folder, or pip install tensorflow-hub"
        ) from None
    return tensorflow_hub.resolve(handle)


def load_encoder(handle):
    """Loads an encoder SavedModel in the TF Hub BERT convention.

    Only the SavedModel's graphs and variables are read (no Python code, no
    pickle). Call under a tf.distribute strategy's scope to get its
    variables mirrored.

    Args:
      handle: a local folder, a gs:// folder, or a URL (see
        `resolve_handle`).

    Returns:
      The restored object (callable, with `variables` and
      `trainable_variables`).

    Raises:
      errors.UserError: no SavedModel there, a TF1 Hub module, or a
        SavedModel without the convention's call and variables.
    """
    path = resolve_handle(handle)
    if tf.io.gfile.exists(os.path.join(path, "tfhub_module.pb")):
        raise errors.UserError(
            f"{handle} is a TF1 Hub module (hub.Module format), which "
            "TensorFlow 2 cannot fine-tune: use a TF2 SavedModel of the "
            "encoder (on TF Hub / Kaggle, the versions whose inputs are "
            "input_word_ids / input_mask / input_type_ids), or export one "
            "from a checkpoint with export_hub.py"
        )
    if not any(
        tf.io.gfile.exists(os.path.join(path, name))
        for name in ("saved_model.pb", "saved_model.pbtxt")
    ):
        inner = os.path.join(path, "encoder")
        hint = (
            f"; export_hub.py --export_type=both wrote the encoder to {inner}"
            if tf.io.gfile.exists(os.path.join(inner, "saved_model.pb"))
            else ""
        )
        raise errors.UserError(
            f"No SavedModel at {handle} (no saved_model.pb in {path}){hint}"
        )
    module = tf.saved_model.load(path)
    for attribute in ("__call__", "trainable_variables", "variables"):
        if not hasattr(module, attribute):
            raise errors.UserError(
                f"The SavedModel at {handle} is not an encoder in the TF Hub "
                f"BERT convention: it has no `{attribute}` (a preprocessing "
                "model, or a serving export?)"
            )
    return module


def tokenization_info(module, handle):
    """(vocab_file path, do_lower_case) of a loaded encoder.

    Raises:
      errors.UserError: the SavedModel does not carry them.
    """
    if not (hasattr(module, VOCAB_FILE) and hasattr(module, DO_LOWER_CASE)):
        raise errors.UserError(
            f"The encoder at {handle} has no `{VOCAB_FILE}` asset or no "
            f"`{DO_LOWER_CASE}` variable, so its tokenization is unknown "
            "(a SentencePiece model such as ALBERT is not a BERT encoder)"
        )
    vocab = getattr(module, VOCAB_FILE)
    path = vocab.asset_path if hasattr(vocab, "asset_path") else vocab
    path = tf.convert_to_tensor(path).numpy().decode("utf-8")
    return path, bool(getattr(module, DO_LOWER_CASE).numpy())


def exported_config(handle):
    """The BertConfig an export of this repository was made from, or None
    for other encoders (see CONFIG_FILE)."""
    path = os.path.join(resolve_handle(handle), EXTRA_ASSETS, CONFIG_FILE)
    if not tf.io.gfile.exists(path):
        return None
    with tf.io.gfile.GFile(path) as f:
        return config_lib.BertConfig.from_dict(json.load(f))


def _output_width(module):
    """H, from the traced outputs of the encoder's call (a tiny call when
    its traces do not say)."""
    for function in getattr(module.__call__, "concrete_functions", ()):
        outputs = function.structured_outputs
        if isinstance(outputs, dict) and POOLED_OUTPUT in outputs:
            width = outputs[POOLED_OUTPUT].shape[-1]
            if width is not None:
                return int(width)
    dummy = tf.ones([1, 2], tf.int32)
    inputs = {name: dummy for name in FEATURES_OF_INPUTS}
    return int(module(inputs, training=False)[POOLED_OUTPUT].shape[-1])


def _wrap(variables, handle):
    """Keras variables over the restored tf.Variables (the same storage),
    each with its saved name as its path: the checkpoint name the Trainer,
    the optimizer's weight-decay rule and the checkpoints use.

    Raises:
      errors.UserError: two variables share a name (their optimizer slots
        would be one).
    """
    wrapped, seen = [], set()
    for variable in variables:
        name = checkpoints.variable_name(variable)
        if name in seen:
            raise errors.UserError(
                f"The encoder at {handle} has two variables named {name}: "
                "their checkpoint names would clash"
            )
        seen.add(name)
        scope, _, short = name.rpartition("/")
        with contextlib.ExitStack() as stack:
            # Keras names scopes one level at a time.
            for part in scope.split("/") if scope else ():
                stack.enter_context(keras.name_scope(part))
            wrapped.append(
                keras.Variable(
                    initializer=variable,
                    shape=variable.shape,
                    dtype=variable.dtype.name,
                    trainable=True,
                    name=short,
                )
            )
    return wrapped


@keras.saving.register_keras_serializable(package="bert")
class BertHubClassifier(keras.Model):
    """run_classifier's model on an encoder SavedModel: the pooled output of
    the encoder, dropout 0.1 and the root-scope `output_weights` [L, H] /
    `output_bias` [L] (as `models.BertClassifier`).

    The encoder's trainable variables are fine-tuned with the head. Its
    dropout is whatever the SavedModel applies when called with
    training=True (for an export of this repository: its BertConfig's).

    Args:
      handle: str, the encoder SavedModel (see `load_encoder`).
      num_labels: int, number of classes L.

    Attributes:
      encoder: the restored SavedModel object.
      encoder_variables: its trainable variables, as Keras variables.
      classifier: heads.ClassifierHead.
    """

    def __init__(self, handle, num_labels, **kwargs):
        kwargs.setdefault("name", "bert_hub_classifier")
        super().__init__(**kwargs)
        if isinstance(num_labels, bool) or not isinstance(num_labels, int):
            raise TypeError(f"num_labels must be an int, got {num_labels!r}")
        if num_labels < 1:
            raise ValueError(f"num_labels must be positive, got {num_labels}")
        self.handle = os.fspath(handle)
        self.num_labels = num_labels
        # === Layers ===
        # Loading draws no random number, so the head below gets the same
        # initial values and dropout seed as BertClassifier's for a seed.
        self.encoder = load_encoder(self.handle)
        self.encoder_variables = _wrap(
            self.encoder.trainable_variables, self.handle
        )
        self.classifier = heads.ClassifierHead(
            num_labels,
            _output_width(self.encoder),
            HEAD_INITIALIZER_RANGE,
            name="classifier",
        )
        self.built = True

    def call(self, features, training=False):
        """features: dict with "input_ids", "input_mask", "segment_ids" int
        [B, T] (other keys ignored) -> float32 logits [B, L]."""
        outputs = self.encoder(to_hub_inputs(features), training=training)
        pooled = tf.cast(outputs[POOLED_OUTPUT], tf.float32)
        return self.classifier(pooled, training=training)

    def get_config(self):
        return {
            "name": self.name,
            "handle": self.handle,
            "num_labels": self.num_labels,
        }

    @classmethod
    def from_config(cls, config):
        """As the constructor; but a .keras file read in Keras's safe mode
        (load_model's default) may not make this process fetch and load a
        remote SavedModel that the file names.

        Raises:
          ValueError: a remote handle in safe mode.
        """
        handle = os.fspath(config.get("handle", ""))
        if "://" in handle and _in_safe_mode():
            raise ValueError(
                f"This model's encoder is the remote SavedModel {handle}, "
                "which a .keras file is not trusted to load in safe mode: "
                "if you trust the file, keras.models.load_model(path, "
                "safe_mode=False)"
            )
        return cls(**config)


def _in_safe_mode():
    """Whether Keras is deserializing in safe mode (outside load_model:
    False)."""
    try:
        from keras.src.saving import serialization_lib
    except ImportError:  # Another Keras layout: assume safe mode.
        return True
    return bool(serialization_lib.in_safe_mode())
