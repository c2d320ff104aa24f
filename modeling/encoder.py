"""BertModel: the encoder, from token ids to per-token and pooled vectors.

A subclassed layer named `bert`, so that its variables' paths are the original
checkpoint names (`bert/embeddings/...`, `bert/encoder/layer_N/...`,
`bert/pooler/dense/...`). Task models (modeling/models.py) hold one.

Shapes: B = batch size, T = sequence length, H = hidden size.
"""

import keras
from keras import ops

from modeling import config as config_lib
from modeling import layers


@keras.saving.register_keras_serializable(package="bert")
class TransformerEncoder(keras.layers.Layer):
    """The stack of Transformer blocks (scope `encoder`, blocks `layer_N`)."""

    def __init__(self, config, **kwargs):
        super().__init__(**kwargs)
        self.config = config
        # Recompute each block's activations in the backward pass instead of
        # keeping them (set by the Trainer from --gradient_checkpointing).
        self.gradient_checkpointing = False
        self.blocks = [
            layers.TransformerBlock(config, name=f"layer_{i}")
            for i in range(config.num_hidden_layers)
        ]
        # A plain object: Keras does not track it, nor save or copy what
        # it holds (see _SharedBlock).
        self._shared_block = _SharedBlock()

    def build(self, input_shape):
        for block in self.blocks:
            block.build(input_shape)
        self.built = True

    def call(self, x, input_mask, training=False):
        """Runs every block.

        Args:
            x: compute-dtype Tensor [B, T, H], the embedding output.
            input_mask: int32 Tensor [B, T], 1 = real token.
            training: bool, apply dropout.

        Returns:
            list of num_hidden_layers Tensors [B, T, H], one per block.
        """
        outputs = []
        shared = self._shared_block.applies(self, training)
        for block in self.blocks:
            if training and self.gradient_checkpointing and block.built:
                x = _recomputed(block, x, input_mask)
            elif shared:
                x = self._shared_block(self, block, x, input_mask, training)
            else:
                x = block(x, input_mask, training=training)
            outputs.append(x)
        return outputs

    def get_config(self):
        config = super().get_config()
        config["config"] = self.config.to_dict()
        return config

    @classmethod
    def from_config(cls, config):
        config = dict(config)
        bert_config = config_lib.BertConfig.from_dict(config.pop("config"))
        return cls(bert_config, **config)


# On TensorFlow, inside a traced function (a training step, an evaluation
# or prediction step, a SavedModel's signature), the blocks are one traced
# function called once per block with that block's weights, instead of
# each block's operations built again: tracing a 12-layer training step
# builds one block's forward and backward pass, not twelve (a 12-layer
# BERT-base step: 4.5-6.8 s of tracing instead of 10.1-11.5 on a 2-vCPU
# VM; the step itself as fast). TensorFlow inlines the calls when it
# optimizes the graph: the outputs and dropout masks are bit for bit those
# of each block built on its own, the gradients equal within float32
# rounding (a block's backward pass sums its gradient terms in another
# order); tests/encoder_test.py holds both. Not under XLA (below). False
# builds every block.
SHARED_BLOCK_TRACE = True


def _dropouts(block):
    """The block's dropout layers that drop anything, in a fixed order."""
    return [
        layer
        for layer in block._flatten_layers()
        if isinstance(layer, layers.Dropout) and layer.rate > 0
    ]


def _seeded_call(block, dropouts, seeds, x, input_mask, training):
    """block(x, input_mask, training), each of `dropouts` using its seed of
    `seeds` (drawn before: layers.Dropout) instead of drawing one."""
    for layer, seed in zip(dropouts, seeds, strict=True):
        layer.set_drawn_seed(seed)
    try:
        return block(x, input_mask, training=training)
    finally:
        for layer in dropouts:
            layer.set_drawn_seed(None)


def _structure(block):
    """What a block's traced function depends on beside its weights'
    values."""
    weights = tuple(
        (w.path[len(block.path) :], tuple(w.shape), w.dtype, w.trainable)
        for w in block.weights
    )
    dropouts = tuple(layer.rate for layer in _dropouts(block))
    return weights, dropouts, block.trainable, block.dtype_policy.name


class _SharedBlock:
    """The traced function of one block (its first), by `training` and
    structure: called with another block's weights (read as they are
    stored, the block casts them as it would) and dropout seeds (drawn from
    that block's own layers, as a plain call would draw them), it computes
    that block."""

    def __init__(self):
        self._functions = {}

    def __reduce__(self):
        # A copy of the encoder traces its own.
        return (_SharedBlock, ())

    def applies(self, encoder, training):
        if not SHARED_BLOCK_TRACE or len(encoder.blocks) < 2:
            return False
        if keras.backend.backend() != "tensorflow":
            return False
        if not isinstance(training, bool):
            return False
        if not all(block.built for block in encoder.blocks):
            return False
        import tensorflow as tf

        if not tf.inside_function():
            return False
        # Under XLA (jit_compile, as --use_xla and Keras's compile on a GPU
        # set it, or a TPU's replicated step) the compiled step called the
        # shared function through a call XLA compiled again on every run:
        # 3.4 s a step instead of 0.11 s for 2 layers of width 128. XLA
        # builds its own program from the graph, so sharing the trace buys
        # little there.
        if tf.__internal__.get_enclosing_xla_context() is not None:
            return False
        # Blocks made alike (a block changed on its own, frozen or given
        # other weights or another dtype policy, is built on its own).
        first = _structure(encoder.blocks[0])
        return all(_structure(b) == first for b in encoder.blocks[1:])

    def __call__(self, encoder, block, x, input_mask, training):
        import tensorflow as tf
        from keras.src.backend import AutocastScope

        template = encoder.blocks[0]
        # By structure too: weights added later (LoRA, quantization) or
        # another dtype policy get a new function, not a stale one.
        key = (training, _structure(template))
        function = self._functions.get(key)
        if function is None:
            function = self._trace(template, training)
            self._functions[key] = function
        # Read here, as stored (the block's layers cast what they use), and
        # in this replica's context: a variable passed in would be read
        # inside, from the first replica's copy under a MirroredStrategy.
        with AutocastScope(None):
            weights = [tf.convert_to_tensor(w.value) for w in block.weights]
        seeds = []
        if training:
            seeds = [layer.draw_seed() for layer in _dropouts(block)]
        return function(weights, seeds, x, input_mask)

    @staticmethod
    def _trace(template, training):
        import tensorflow as tf

        variables = list(template.weights)
        dropouts = _dropouts(template) if training else []

        def run(weights, seeds, x, input_mask):
            mapping = list(zip(variables, weights, strict=True))
            with keras.StatelessScope(state_mapping=mapping):
                return _seeded_call(
                    template, dropouts, seeds, x, input_mask, training
                )

        return tf.function(run, autograph=False)


def _recomputed(block, x, input_mask):
    """block(x, input_mask, training=True), keeping only `x` for the
    backward pass, which runs the block again (tf.recompute_grad on
    TensorFlow, jax.checkpoint on JAX through keras.remat).

    A block's activations for the backward pass are ~160 MB per layer at
    batch 32 x 128 (hidden 384), most of a fine-tune's memory; kept instead
    is its [B, T, H] input, for about a third more compute per step. The
    dropout seeds are drawn once, before, so the rerun drops the same units
    as the first run (layers.Dropout).
    """
    dropouts = _dropouts(block)
    seeds = [layer.draw_seed() for layer in dropouts]

    def run(h):
        return _seeded_call(block, dropouts, seeds, h, input_mask, True)

    if keras.backend.backend() == "tensorflow":
        import tensorflow as tf

        # What tests/encoder_test.py measures (masks, memory) on TF.
        return tf.recompute_grad(run)(x)
    return keras.remat(run)(x)


def set_gradient_checkpointing(model, enabled=True):
    """Turns gradient checkpointing on or off in every encoder of `model`."""
    found = False
    for layer in model._flatten_layers():
        if isinstance(layer, TransformerEncoder):
            layer.gradient_checkpointing = enabled
            found = True
    if not found:
        raise ValueError(f"{model.name} holds no TransformerEncoder")


@keras.saving.register_keras_serializable(package="bert")
class Pooler(keras.layers.Layer):
    """tanh(dense(first token)) (scope `pooler`, variables `dense/*`)."""

    def __init__(self, hidden_size, initializer_range, **kwargs):
        super().__init__(**kwargs)
        self.hidden_size = hidden_size
        self.initializer_range = initializer_range
        self.dense = keras.layers.Dense(
            hidden_size,
            activation="tanh",
            kernel_initializer=layers.initializer(initializer_range),
            name="dense",
        )

    def build(self, input_shape):
        self.dense.build((None, self.hidden_size))
        self.built = True

    def call(self, sequence_output):
        """[B, T, H] -> [B, H], from the [CLS] (first) position."""
        return self.dense(sequence_output[:, 0, :])

    def get_config(self):
        config = super().get_config()
        config.update(
            hidden_size=self.hidden_size,
            initializer_range=self.initializer_range,
        )
        return config


@keras.saving.register_keras_serializable(package="bert")
class BertModel(keras.layers.Layer):
    """The BERT encoder (the original's `modeling.BertModel`).

    Args:
        config: BertConfig.
        use_one_hot_embeddings: bool, look up word embeddings with a one-hot
            matmul (faster on TPU) instead of a gather.
        name: str, the variable scope; "bert" for original checkpoints.

    Attributes:
        embeddings: layers.BertEmbeddings; `embeddings.word_embeddings` is the
            [V, H] table the masked-LM head is tied to.
        encoder: TransformerEncoder.
        pooler: Pooler.
    """

    def __init__(
        self, config, use_one_hot_embeddings=False, name="bert", **kwargs
    ):
        _reject_the_original_call(kwargs)
        super().__init__(name=name, **kwargs)
        self.config = config
        self.use_one_hot_embeddings = use_one_hot_embeddings
        self.embeddings = layers.BertEmbeddings(
            vocab_size=config.vocab_size,
            hidden_size=config.hidden_size,
            type_vocab_size=config.type_vocab_size,
            max_position_embeddings=config.max_position_embeddings,
            initializer_range=config.initializer_range,
            dropout_rate=config.hidden_dropout_prob,
            use_one_hot_embeddings=use_one_hot_embeddings,
            name="embeddings",
        )
        self.encoder = TransformerEncoder(config, name="encoder")
        self.pooler = Pooler(
            config.hidden_size, config.initializer_range, name="pooler"
        )
        # Built now, outside any name scope: built lazily inside a parent
        # model's call, the paths would get the parent's prefix
        # (`my_model/bert/...`) and no longer be the checkpoint names.
        self.build()

    def build(self, input_shape=None):
        if self.built:
            return
        # The input is a dict; every weight shape follows from the config.
        hidden_shape = (None, None, self.config.hidden_size)
        self.embeddings.build(None)
        self.encoder.build(hidden_shape)
        self.pooler.build(hidden_shape)
        self.built = True

    def call(self, inputs, training=False):
        """Encodes a batch.

        Args:
            inputs: dict with "input_ids" (int32 Tensor [B, T], required),
                "input_mask" (int Tensor [B, T], 1 = real token; default all
                ones) and "segment_ids" (int Tensor [B, T]; default zeros).
                Other keys are ignored.
            training: bool, apply dropout.

        Returns:
            dict of compute-dtype Tensors: "sequence_output" [B, T, H] (the
            last layer), "pooled_output" [B, H], "all_encoder_layers" (list
            of [B, T, H], one per layer; the embeddings not included) and
            "embedding_output" [B, T, H].
        """
        if "input_ids" not in inputs:
            raise ValueError(
                f"BertModel needs 'input_ids'; got keys {sorted(inputs)}"
            )
        input_ids = ops.cast(inputs["input_ids"], "int32")
        input_mask = inputs.get("input_mask")
        if input_mask is None:
            input_mask = ops.ones_like(input_ids)
        segment_ids = inputs.get("segment_ids")
        if segment_ids is None:
            segment_ids = ops.zeros_like(input_ids)
        segment_ids = ops.cast(segment_ids, "int32")
        embedding_output = self.embeddings(
            input_ids, segment_ids, training=training
        )
        input_mask = ops.cast(input_mask, "int32")
        all_layers = self.encoder(
            embedding_output, input_mask, training=training
        )
        sequence_output = all_layers[-1]
        return {
            "sequence_output": sequence_output,
            "pooled_output": self.pooler(sequence_output),
            "all_encoder_layers": all_layers,
            "embedding_output": embedding_output,
        }

    def get_config(self):
        config = super().get_config()
        config["config"] = self.config.to_dict()
        config["use_one_hot_embeddings"] = self.use_one_hot_embeddings
        return config

    @classmethod
    def from_config(cls, config):
        config = dict(config)
        bert_config = config_lib.BertConfig.from_dict(config.pop("config"))
        return cls(bert_config, **config)


# The graph inputs of the original's BertModel(config, is_training,
# input_ids, input_mask, token_type_ids, use_one_hot_embeddings, scope).
_ORIGINAL_CALL_ARGS = (
    "is_training",
    "input_ids",
    "input_mask",
    "token_type_ids",
    "scope",
)


def _reject_the_original_call(kwargs):
    """Code written against the original builds BertModel on its input
    tensors; here it is a layer called on them: say so, not Keras's
    "unrecognized keyword arguments"."""
    used = [k for k in _ORIGINAL_CALL_ARGS if k in kwargs]
    if used:
        raise TypeError(
            f"BertModel got {', '.join(used)}: the original's "
            "BertModel(config, is_training, input_ids, ...) built a TF1 "
            "graph; here it is a Keras layer. Build it with "
            "BertModel(config) (or use models.BertClassifier.from_checkpoint"
            "), then call it: outputs = model({'input_ids': ..., "
            "'input_mask': ..., 'segment_ids': ...}, training=...); "
            'outputs["pooled_output"] and outputs["sequence_output"] are '
            "the original's get_pooled_output() and get_sequence_output()."
        )
