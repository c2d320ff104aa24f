"""A BERT checkpoint as TF Hub-style SavedModels: an encoder and a
preprocessing model (export_hub.py).

The encoder SavedModel follows the TF Hub BERT convention
(modeling/saved_encoder.py describes it), so code written for TF Hub /
Kaggle BERT encoders uses it unchanged:

    encoder = tf.saved_model.load(path)            # or hub.KerasLayer(path)
    outputs = encoder(
        {"input_word_ids": ids, "input_mask": mask, "input_type_ids": types},
        training=False)                            # int32 [B, T] each
    outputs["pooled_output"]      # [B, H]; also "default"
    outputs["sequence_output"]    # [B, T, H]
    outputs["encoder_outputs"]    # one [B, T, H] per layer
    encoder.trainable_variables   # what fine-tuning updates
    encoder.vocab_file, encoder.do_lower_case   # how to tokenize for it
    encoder.mlm({... , "masked_lm_positions": positions})["mlm_logits"]
                                  # with --with_mlm: [B, P, V]

It also has `serving_default` (signature and attribute, flat outputs with
`encoder_outputs_<i>`) for `keras.layers.TFSMLayer(path,
call_endpoint="serving_default")`, and `train`, the same with dropout, for
its `call_training_endpoint`.

The preprocessing SavedModel turns text into those inputs with this
repository's in-graph tokenizer (FullTokenizer's ids) and the original's
truncation (needs `import tensorflow_text` before loading):

    preprocessor = tf.saved_model.load(path)
    preprocessor(tf.constant(["one sentence"]))    # dict at --max_seq_length
    tokens = preprocessor.tokenize(tf.constant([...]))   # [B, words, pieces]
    preprocessor.bert_pack_inputs([tokens_a, tokens_b], seq_length=64)

`bert_pack_inputs` takes one or two segments (ragged [B, tokens] or [B,
words, pieces]); a pair is cut as the original's `_truncate_seq_pair` does
(tokens popped from the end of the longer segment), not by TF Hub's round
robin.
"""

import json
import os

import keras
import tensorflow as tf

from modeling import checkpoints
from modeling import config as config_lib
from modeling import encoder as encoder_lib
from modeling import errors
from modeling import heads
from modeling import models
from modeling import saved_encoder
from modeling.data import input_pipeline
from modeling.export import folders
from modeling.export import saved_models
from modeling.text import in_graph

SERVING_DEFAULT = "serving_default"
TRAIN = "train"
MLM = "mlm"
ENCODER_DIR, PREPROCESSING_DIR = folders.HUB_PARTS
EXPORT_TYPES = ("encoder", "preprocessing", "both")


def _input_specs(with_positions=False):
    specs = {
        name: tf.TensorSpec([None, None], tf.int32, name=name)
        for name in saved_encoder.FEATURES_OF_INPUTS
    }
    if with_positions:
        specs[saved_encoder.MASKED_LM_POSITIONS] = tf.TensorSpec(
            [None, None], tf.int32, name=saved_encoder.MASKED_LM_POSITIONS
        )
    return specs


def _features(inputs):
    """The convention's inputs -> BertModel's feature names."""
    return {
        feature: inputs[name]
        for name, feature in saved_encoder.FEATURES_OF_INPUTS.items()
    }


def _encoder_outputs(outputs):
    """BertModel's outputs -> the convention's."""
    return {
        saved_encoder.POOLED_OUTPUT: outputs["pooled_output"],
        saved_encoder.SEQUENCE_OUTPUT: outputs["sequence_output"],
        saved_encoder.ENCODER_OUTPUTS: list(outputs["all_encoder_layers"]),
        saved_encoder.DEFAULT_OUTPUT: outputs["pooled_output"],
    }


def _flat(outputs):
    """Signature outputs must be flat: encoder_outputs -> _0, _1, ..."""
    flat = {
        k: v for k, v in outputs.items() if k != saved_encoder.ENCODER_OUTPUTS
    }
    for i, layer in enumerate(outputs[saved_encoder.ENCODER_OUTPUTS]):
        flat[f"{saved_encoder.ENCODER_OUTPUTS}_{i}"] = layer
    return flat


def _trace_training_modes(function, *specs):
    """Traces `function(*specs, training=...)` for both values, so that the
    restored function takes either."""
    for training in (False, True):
        function.get_concrete_function(*specs, training=training)


class HubEncoder(tf.train.Checkpoint):
    """The encoder SavedModel's root object.

    A tf.train.Checkpoint rather than a tf.Module: the convention wants
    `variables` and `trainable_variables` as saved attributes, which
    tf.Module computes instead.

    Args:
      bert: encoder.BertModel, weights loaded.
      vocab_file: str, stored as the asset `vocab_file`.
      do_lower_case: bool, stored as a boolean variable.
      mlm: a MaskedLM or None.
    """

    def __init__(self, bert, vocab_file, do_lower_case, mlm=None):
        super().__init__()
        # Every state variable (the dropout seeds too) must be reachable
        # from the root for the traced functions to be saved.
        self.variables = list(bert.variables)
        self.trainable_variables = list(bert.trainable_variables)
        self.regularization_losses = []
        self.vocab_file = tf.saved_model.Asset(vocab_file)
        self.do_lower_case = tf.Variable(
            bool(do_lower_case),
            trainable=False,
            name=saved_encoder.DO_LOWER_CASE,
        )

        @tf.function(autograph=False)
        def call(inputs, training=False):
            return _encoder_outputs(bert(_features(inputs), training=training))

        _trace_training_modes(call, _input_specs())
        self.__call__ = call

        @tf.function(input_signature=[_input_specs()], autograph=False)
        def serve(inputs):
            return _flat(call(inputs, training=False))

        @tf.function(input_signature=[_input_specs()], autograph=False)
        def train(inputs):
            return _flat(call(inputs, training=True))

        # Attributes: TFSMLayer calls them with the dict.
        setattr(self, SERVING_DEFAULT, serve)
        setattr(self, TRAIN, train)
        if mlm is not None:
            self.mlm = mlm

    def signatures(self):
        """The signatures to save (keyword inputs, flat outputs; for TF
        Serving and `loaded.signatures[...]`), by name."""
        out = {
            SERVING_DEFAULT: _keyword_signature(
                getattr(self, SERVING_DEFAULT), _input_specs()
            )
        }
        mlm = getattr(self, "mlm", None)
        if mlm is not None:
            out[MLM] = _keyword_signature(
                lambda inputs: _flat(mlm.__call__(inputs, training=False)),
                _input_specs(with_positions=True),
            )
        return out


def _keyword_signature(function, specs):
    """function(dict of Tensors) as a concrete function taking one keyword
    argument per spec (named after it), as signatures must."""
    names = list(specs)

    @tf.function(input_signature=list(specs.values()), autograph=False)
    def signature(*tensors):
        return function(dict(zip(names, tensors)))

    return signature.get_concrete_function()


class MaskedLM(tf.train.Checkpoint):
    """The `mlm` subobject: the encoder plus the pre-training masked-LM head
    (heads.MaskedLMHead, tied to the word embeddings).

    `mlm(inputs, training=False)`: the encoder's inputs plus
    "masked_lm_positions" int32 [B, P] -> the encoder's outputs plus
    "mlm_logits" float32 [B, P, V].

    Args:
      pretrainer: models.BertPretrainer, weights loaded.
    """

    def __init__(self, pretrainer):
        super().__init__()
        bert = pretrainer.bert
        head = pretrainer.cls.predictions
        self.variables = list(bert.variables) + list(head.variables)
        self.trainable_variables = list(bert.trainable_variables) + list(
            head.trainable_variables
        )

        @tf.function(autograph=False)
        def call(inputs, training=False):
            outputs = bert(_features(inputs), training=training)
            positions = inputs[saved_encoder.MASKED_LM_POSITIONS]
            gathered = heads.gather_indexes(
                outputs["sequence_output"], positions
            )  # [B * P, H]
            logits = head.logits(gathered, bert.embeddings.word_embeddings)
            shape = tf.shape(positions)
            result = _encoder_outputs(outputs)
            result[saved_encoder.MLM_LOGITS] = tf.reshape(
                logits, [shape[0], shape[1], -1]
            )
            return result

        _trace_training_modes(call, _input_specs(with_positions=True))
        self.__call__ = call


class HubPreprocessor(tf.Module):
    """The preprocessing SavedModel's root object.

    Args:
      vocab_file: str (stored in the tokenizer, and as the asset
        `vocab_file`).
      do_lower_case: bool.
      seq_length: int, the default call's and bert_pack_inputs' default
        sequence length.
      pad_to_longest: bool, the default call pads each batch only to its
        longest packed row (at most seq_length; the encoder's outputs at
        real positions are the same). bert_pack_inputs keeps its explicit
        seq_length.
    """

    def __init__(
        self, vocab_file, do_lower_case, seq_length, pad_to_longest=False
    ):
        super().__init__(name="preprocessing")
        text = in_graph.TextPreprocessor(vocab_file, do_lower_case, seq_length)
        tokenizer, packer = text.tokenizer, text.packer
        self.tokenizer = tokenizer
        self.packer = packer
        self.vocab_file = tf.saved_model.Asset(vocab_file)
        self.do_lower_case = tf.Variable(
            bool(do_lower_case),
            trainable=False,
            name=saved_encoder.DO_LOWER_CASE,
        )

        @tf.function(
            input_signature=[tf.TensorSpec([None], tf.string)], autograph=False
        )
        def tokenize(text):
            return tokenizer.tokenize_words(text)

        # TF Hub's preprocessors: `tokenize` is also an object whose
        # get_special_tokens_dict() gives the ids a caller packs or masks
        # with (vocab_size, start_of_sequence_id, end_of_segment_id,
        # padding_id, mask_id).
        special = _special_tokens(vocab_file, tokenizer.vocab_size)

        @tf.function(input_signature=[], autograph=False)
        def get_special_tokens_dict():
            return {k: tf.constant(v, tf.int32) for k, v in special.items()}

        tokenize_object = tf.Module(name="tokenize")
        tokenize_object.__call__ = tokenize
        tokenize_object.get_special_tokens_dict = get_special_tokens_dict

        @tf.function(autograph=False)
        def bert_pack_inputs(inputs, seq_length=seq_length):
            return _pack(packer, inputs, seq_length)

        # One or two segments, each [B, tokens] or [B, words, pieces].
        for ragged_rank in (1, 2):
            spec = tf.RaggedTensorSpec([None] * (ragged_rank + 1), tf.int32)
            for num_segments in (1, 2):
                bert_pack_inputs.get_concrete_function(
                    [spec] * num_segments,
                    seq_length=tf.TensorSpec([], tf.int32),
                )

        @tf.function(
            input_signature=[tf.TensorSpec([None], tf.string, "sentences")],
            autograph=False,
        )
        def call(sentences):
            packed = _pack(packer, [tokenizer.tokenize(sentences)], seq_length)
            if pad_to_longest:
                packed = input_pipeline.trim_padding(
                    packed, multiple=1, seq_features=tuple(packed)
                )
            return packed

        self.tokenize = tokenize_object
        self.bert_pack_inputs = bert_pack_inputs
        self.__call__ = call
        setattr(self, SERVING_DEFAULT, call)

    def signatures(self):
        return {SERVING_DEFAULT: self.__call__.get_concrete_function()}


def _special_tokens(vocab_file, vocab_size):
    """TF Hub's get_special_tokens_dict() values of a vocabulary: its size
    and the ids of [CLS], [SEP], [PAD] and [MASK] (-1 for one it lacks)."""
    from modeling.text import vocabulary

    tokens = vocabulary.read_vocab_lines(vocab_file)
    ids = {token: i for i, token in reversed(list(enumerate(tokens)))}
    return {
        "vocab_size": int(vocab_size),
        "start_of_sequence_id": ids.get(vocabulary.CLS_TOKEN, -1),
        "end_of_segment_id": ids.get(vocabulary.SEP_TOKEN, -1),
        "padding_id": ids.get(vocabulary.PAD_TOKEN, -1),
        "mask_id": ids.get(vocabulary.MASK_TOKEN, -1),
    }


def _pack(packer, segments, seq_length):
    """bert_pack_inputs: 1 or 2 ragged segments -> the convention's dict."""
    segments = list(segments)
    if len(segments) not in (1, 2):
        raise ValueError(
            f"bert_pack_inputs takes 1 or 2 segments, got {len(segments)}"
        )
    flat = [s.merge_dims(1, -1) if s.ragged_rank > 1 else s for s in segments]
    # [CLS], a [SEP] per segment and a token of each: below that, rows
    # without their [SEP] or tokens came back.
    check = tf.debugging.assert_greater_equal(
        seq_length,
        2 * len(segments) + 1,
        message=f"bert_pack_inputs: seq_length must be at least "
        f"{2 * len(segments) + 1} for {len(segments)} segment(s)",
    )
    with tf.control_dependencies([check]):
        flat = [tf.identity(s) for s in flat]
    packed = packer(*flat, seq_length=seq_length)
    return {
        name: packed[feature]
        for name, feature in saved_encoder.FEATURES_OF_INPUTS.items()
    }


def _load_model(bert_config, init_checkpoint, with_mlm):
    """BertModel (or BertPretrainer with --with_mlm) with the checkpoint's
    weights.

    Raises:
      errors.UserError: --with_mlm on a checkpoint without a masked-LM head.
    """
    if not with_mlm:
        bert = encoder_lib.BertModel(bert_config)
        checkpoints.load_weights(bert, init_checkpoint)
        return bert, None
    names = checkpoints.checkpoint_shapes(init_checkpoint)
    if "cls/predictions/output_bias" not in names:
        raise errors.UserError(
            f"--with_mlm: checkpoint {init_checkpoint} has no masked-LM head "
            "(cls/predictions/*; a fine-tuned or converted encoder-only "
            "checkpoint?): export it without --with_mlm"
        )
    pretrainer = models.BertPretrainer(bert_config)
    checkpoints.load_weights(
        pretrainer, init_checkpoint, ignore_missing=("^cls/seq_relationship/",)
    )
    return pretrainer.bert, MaskedLM(pretrainer)


def save_encoder(
    path, bert_config, init_checkpoint, vocab_file, do_lower_case, with_mlm
):
    """Writes the encoder SavedModel to the folder `path` (not atomic: see
    `export`), float32 whatever the global dtype policy."""
    previous = keras.config.dtype_policy()
    keras.config.set_dtype_policy("float32")
    try:
        bert, mlm = _load_model(bert_config, init_checkpoint, with_mlm)
        root = HubEncoder(bert, vocab_file, do_lower_case, mlm)
    finally:
        keras.config.set_dtype_policy(previous)
    saved_models.write(
        root,
        path,
        root.signatures(),
        extras={saved_encoder.CONFIG_FILE: bert_config.to_json_string()},
    )


def save_preprocessing(
    path, vocab_file, do_lower_case, seq_length, pad_to_longest=False
):
    """Writes the preprocessing SavedModel to the folder `path`."""
    root = HubPreprocessor(
        vocab_file, do_lower_case, seq_length, pad_to_longest
    )
    saved_models.write(root, path, root.signatures())


def export(
    export_path,
    export_type,
    vocab_file,
    do_lower_case,
    bert_config_file=None,
    init_checkpoint=None,
    with_mlm=False,
    max_seq_length=128,
    pad_to_longest=False,
):
    """Writes the SavedModels, atomically (a temporary folder beside
    `export_path`, renamed when complete: folders.publishing, which
    replaces an earlier export there, never a folder holding anything
    else). Each SavedModel is marked as this repository's export
    (assets.extra/bert_hub_export.json).

    Args:
      export_path: str; with export_type "both" it gets `encoder/` and
        `preprocessing/`, else it is the one SavedModel.
      export_type: "encoder", "preprocessing" or "both".
      vocab_file, do_lower_case: the checkpoint's tokenization.
      bert_config_file, init_checkpoint: the model (not needed for
        "preprocessing"); init_checkpoint a prefix or a folder.
      with_mlm: also the `mlm` subobject (needs cls/predictions/*).
      max_seq_length: the preprocessing model's default sequence length.
      pad_to_longest: see HubPreprocessor.

    Returns:
      dict kind -> the SavedModel folder written.
    """
    if export_type not in EXPORT_TYPES:
        raise errors.UserError(
            f"--export_type must be one of {EXPORT_TYPES}, got {export_type!r}"
        )
    bert_config = None
    if export_type != "preprocessing":
        bert_config = config_lib.BertConfig.from_json_file(bert_config_file)
        config_lib.check_vocab_size(vocab_file, bert_config)
        if export_type == "both":  # The preprocessor's length.
            config_lib.check_max_seq_length(max_seq_length, bert_config)
    export_path = os.fspath(export_path).rstrip("/")
    kinds = ["encoder", "preprocessing"] if export_type == "both" else None
    written = {}
    with folders.publishing(export_path) as tmp:
        for kind in kinds or [export_type]:
            sub = {"encoder": ENCODER_DIR, "preprocessing": PREPROCESSING_DIR}
            # "both": one subfolder each; else export_path is the SavedModel.
            folder = os.path.join(tmp, sub[kind]) if kinds else tmp
            if kind == "encoder":
                save_encoder(
                    folder,
                    bert_config,
                    init_checkpoint,
                    vocab_file,
                    do_lower_case,
                    with_mlm,
                )
            else:
                save_preprocessing(
                    folder,
                    vocab_file,
                    do_lower_case,
                    max_seq_length,
                    pad_to_longest,
                )
            folders.write_extra(
                folder,
                folders.HUB_EXPORT_FILE,
                json.dumps({"export_type": kind}) + "\n",
            )
            written[kind] = (
                os.path.join(export_path, sub[kind]) if kinds else export_path
            )
    return written
