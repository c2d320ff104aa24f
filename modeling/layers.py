"""The BERT blocks as Keras 3 layers, named after the original scopes.

Every layer name below is the original variable scope, so a variable's Keras
`path` is its name in an original checkpoint
(`bert/encoder/layer_3/attention/self/query/kernel`): Keras builds a path from
the names of the layers that own the variable, so loading an original
checkpoint is a name match with shape checks (modeling/checkpoints.py).

Letter legend for shapes: B = batch size, F = `from` (query) length,
T = `to` (key) length, N = attention heads, D = size per head, H = hidden size
(= N * D), I = intermediate size, V = vocab size.

One module, over 500 lines: the Transformer read top to bottom, as the
original's modeling.py is read.
"""

import math

import keras
from keras import ops

from modeling import config as config_lib
from modeling import row_gradients

# LayerNorm epsilon of the original (tf.contrib.layers.layer_norm hard-codes
# 1e-12); Keras defaults to 1e-3, which changes every output.
LAYER_NORM_EPSILON = 1e-12

# Added to the attention scores of masked (padding) keys. Not -inf: a row whose
# keys are all masked (a padding example) still gets a finite softmax, that of
# its raw scores, every key shifted alike, as in the original.
MASK_ADDER = -10000.0


def initializer(initializer_range):
    """The one weight initializer of BERT: truncated normal, given stddev."""
    return keras.initializers.TruncatedNormal(stddev=initializer_range)


_SQRT_2_OVER_PI = math.sqrt(2.0 / math.pi)


def _gelu_tanh(x):
    """tanh(sqrt(2 / pi) * (x + 0.044715 * x^3)), the one shared term."""
    return ops.tanh(_SQRT_2_OVER_PI * (x + 0.044715 * x * x * x))


@ops.custom_gradient
def gelu(x):
    """GELU, tanh approximation (the original's `modeling.gelu` at HEAD).

    0.5 * x * (1 + tanh(sqrt(2 / pi) * (x + 0.044715 * x^3))). HuggingFace's
    "gelu" is the exact erf form; outputs differ by up to ~1e-3.

    The gradient is written out rather than left to autodiff, which keeps
    five [B, F, I] intermediates of the element-wise chain alive for the
    backward pass in every layer: a third of a fine-tune's activation memory
    (1 GB of 3.5 GB for a 6-layer, 384-wide model at batch 32 x 128). Here
    the backward pass keeps only `x` and recomputes the tanh:
    d/dx = 0.5 * (1 + t) + 0.5 * x * (1 - t^2) * sqrt(2 / pi)
           * (1 + 3 * 0.044715 * x^2).
    """

    def grad(*args, upstream=None):
        if upstream is None:
            (upstream,) = args
        t = _gelu_tanh(x)
        slope = 0.5 * (1.0 + t) + 0.5 * x * (1.0 - t * t) * (
            _SQRT_2_OVER_PI * (1.0 + 3.0 * 0.044715 * x * x)
        )
        return upstream * slope

    # The forward value is Keras's GELU in its tanh form (tf.nn.gelu with
    # approximate=True on TensorFlow), the same formula: TF Lite's converter
    # recognises that op pattern and fuses it into one GELU kernel (XNNPACK)
    # instead of ten element-wise ops per layer, 5-8% of MiniLM's float32
    # prediction at batch 32 x 64-128 on the 2-vCPU development VM.
    return ops.gelu(x, approximate=True), grad


def gelu_exact(x):
    """GELU in its exact form, x * Phi(x) with the normal CDF by erf: HF's
    "gelu" (BertConfig.hidden_act "gelu_exact"), what models trained in HF
    transformers and sentence-transformers compute."""
    return ops.gelu(x, approximate=False)


# Where Keras's JAX backend runs on a GPU, attention whose dropout is off
# (inference, evaluation, a config with attention_probs_dropout_prob 0) goes
# through ops.dot_product_attention, which picks cuDNN's fused kernel for
# bfloat16 and float16: the [B, N, F, T] scores never reach device memory.
# BERT-base at seq 128, batch 256, bfloat16, with the attention dropout off:
# 59.6 ms a training step instead of 63.1 on an H100
# (bench/gpu_variants_2026-11-26.json). False keeps the explicit path.
FUSED_ATTENTION = True


def _fused_attention_applies(training, dropout_rate):
    if not FUSED_ATTENTION or (training and dropout_rate > 0):
        return False
    return _on_jax_gpu()


def _on_jax_gpu():
    if keras.backend.backend() != "jax":
        return False
    import jax

    return jax.devices()[0].platform == "gpu"


# Training with the attention dropout on, on a JAX GPU: the attention and
# its dropout in one Pallas kernel per pass (modeling/flash_attention.py),
# where the explicit path writes the [B, N, F, T] scores, probabilities and
# mask to device memory. Off until it is timed on a GPU (bench/jax_profile.py
# variant "flash_attention"); its numbers are tested on the CPU, in Pallas's
# interpreter (tests/jax_backend_test.py).
FLASH_ATTENTION = False


def _flash_attention_applies(training, dropout_rate, length):
    if not (FLASH_ATTENTION and training and dropout_rate > 0):
        return False
    if not _on_jax_gpu():
        return False
    from modeling import flash_attention

    return flash_attention.block_size(length) is not None


# On JAX a dropout mask takes 16 random bits a unit: each 32-bit word of
# jax.random.bits decides two neighbouring units, where keras's dropout
# draws a 32-bit uniform float for each (JAX's threefry hashes once per
# word either way). A unit is dropped with probability
# round(rate * 2^16) / 2^16 (0.1000061 for 0.1) and the kept ones scaled by
# its inverse complement, so the expected output is the input. On a 2-vCPU
# VM's CPU this cut the dropout's share of a training step by 35-60%
# (bench/jax_dropout_cpu_2026-11-27.json, docs/gpus-tpus.md);
# tests/jax_backend_test.py holds the rate, the scale and the units'
# independence. False draws keras's masks.
HALF_WORD_DROPOUT = True
_UNIT_BITS = 16


def half_word_dropout(inputs, rate, key):
    """inputs with each unit dropped with probability ~rate (above), the
    kept units scaled to keep the expectation; JAX only (`key`: a JAX key,
    what keras's SeedGenerator.next() gives)."""
    import jax
    import jax.numpy as jnp

    levels = 1 << _UNIT_BITS
    # A rate within 2^-17 of 1 keeps one level of the 2^16.
    threshold = min(round(rate * levels), levels - 1)
    width = inputs.shape[-1]
    words = jax.random.bits(
        key, tuple(inputs.shape[:-1]) + ((width + 1) // 2,), jnp.uint32
    )
    # Neighbours share a word: where XLA computes the bits inside the
    # fusion that uses them, one hash can serve both.
    units = jnp.stack([words & (levels - 1), words >> _UNIT_BITS], axis=-1)
    units = units.reshape(tuple(inputs.shape[:-1]) + (-1,))[..., :width]
    scale = levels / (levels - threshold)
    kept = jnp.asarray(inputs * scale, inputs.dtype)
    return jnp.where(units >= threshold, kept, jnp.zeros_like(inputs))


@keras.saving.register_keras_serializable(package="bert")
class Dropout(keras.layers.Dropout):
    """keras.layers.Dropout whose seed can be drawn before the call.

    Gradient checkpointing (encoder.TransformerEncoder) runs a block's
    forward pass twice, the second time in the backward pass; both runs
    must drop the same units. `draw_seed` takes the next seed from the
    layer's own generator, exactly what a plain call would take, and while
    `drawn_seed` holds it the call uses it instead of drawing: the same
    stateless op keras's TensorFlow backend runs, so the masks are those of
    an ordinary run too (tests/encoder_test.py compares them).

    On JAX the masks are half-word ones (`half_word_dropout`), drawn from
    the same generator's keys.
    """

    def draw_seed(self):
        seed = self.seed_generator.next()
        if keras.backend.backend() != "tensorflow":
            return seed  # JAX: the generator's key, what a plain call uses.
        import tensorflow as tf

        if seed.dtype != tf.int32:  # keras's cast: stateless ops take int32.
            seed = tf.cast(tf.math.floormod(seed, tf.int32.max - 1), tf.int32)
        return seed

    def call(self, inputs, training=False):
        seed = getattr(self, "_drawn_seed", None)
        jax_backend = keras.backend.backend() == "jax"
        if (
            jax_backend
            and HALF_WORD_DROPOUT
            and training
            and 0 < self.rate < 1
            and self.noise_shape is None
        ):
            return half_word_dropout(inputs, self.rate, self.call_seed())
        if seed is None or not training or self.rate == 0:
            return super().call(inputs, training=training)
        if jax_backend:
            # JAX's dropout takes a key array as its seed.
            return keras.random.dropout(inputs, self.rate, seed=seed)
        import tensorflow as tf

        return tf.nn.experimental.stateless_dropout(
            inputs, rate=self.rate, seed=seed
        )

    def call_seed(self):
        """The seed of this call: the drawn one, else the generator's next
        (JAX: a key array, what keras's own dropout would take)."""
        seed = getattr(self, "_drawn_seed", None)
        return self.seed_generator.next() if seed is None else seed

    def set_drawn_seed(self, seed):
        # object.__setattr__: a tensor is state of one call, not something
        # for keras to track.
        object.__setattr__(self, "_drawn_seed", seed)


def get_activation(name):
    """Maps an original `hidden_act` string to a function (None = linear)."""
    key = (name or "linear").lower()
    table = {
        "gelu": gelu,
        "gelu_exact": gelu_exact,
        "relu": ops.relu,
        "tanh": ops.tanh,
        "linear": None,
    }
    if key not in table:
        raise ValueError(f"Unsupported activation: {name!r}")
    return table[key]


def layer_norm(name="LayerNorm"):
    """LayerNormalization over the last axis with the original epsilon."""
    return keras.layers.LayerNormalization(
        axis=-1, epsilon=LAYER_NORM_EPSILON, name=name
    )


def attention_bias(input_mask, dtype="float32"):
    """Additive attention bias from a key padding mask.

    Args:
        input_mask: int or float Tensor of shape [B, T]; 1 = real token.

    Returns:
        `dtype` Tensor of shape [B, 1, 1, T]: 0 for real keys and -10000 for
        padding, broadcast over heads and queries (the original masks keys
        only; padded query rows are computed and ignored downstream).
    """
    # expand_dims rather than [:, None, None, :]: a plain reshape, which
    # every runtime the model is exported to has (TF Lite lacks the
    # strided slice that inserts axes).
    mask = ops.expand_dims(ops.cast(input_mask, dtype), (1, 2))
    return (1.0 - mask) * MASK_ADDER


@keras.saving.register_keras_serializable(package="bert")
class BertEmbeddings(keras.layers.Layer):
    """Word + token type + position embeddings, then LayerNorm and dropout.

    The three tables are plain weights of this layer (named as the original),
    not keras.layers.Embedding, whose table would be called `embeddings`.

    Under a mixed precision policy the rows are looked up in the float32
    tables and then cast (`autocast=False`): the same values as a lookup in
    a cast table, but the gradient of a lookup, which adds up the rows of
    every occurrence of a token, is summed in float32, as TensorFlow's
    IndexedSlices are. (A bfloat16 scatter-add loses precision on frequent
    tokens, and on GPUs it is slow.)
    """

    def __init__(
        self,
        vocab_size,
        hidden_size,
        type_vocab_size,
        max_position_embeddings,
        initializer_range,
        dropout_rate,
        use_one_hot_embeddings=False,
        **kwargs,
    ):
        kwargs["autocast"] = False  # The casts are explicit (see above).
        super().__init__(**kwargs)
        self.vocab_size = vocab_size
        self.hidden_size = hidden_size
        self.type_vocab_size = type_vocab_size
        self.max_position_embeddings = max_position_embeddings
        self.initializer_range = initializer_range
        self.dropout_rate = dropout_rate
        self.use_one_hot_embeddings = use_one_hot_embeddings
        self.layer_norm = layer_norm()
        self.dropout = Dropout(dropout_rate, name="dropout")

    def build(self, input_shape=None):
        def table(name, rows):
            return self.add_weight(
                name=name,
                shape=(rows, self.hidden_size),
                initializer=initializer(self.initializer_range),
            )

        self.word_embeddings = table("word_embeddings", self.vocab_size)
        self.token_type_embeddings = table(
            "token_type_embeddings", self.type_vocab_size
        )
        self.position_embeddings = table(
            "position_embeddings", self.max_position_embeddings
        )
        self.layer_norm.build((None, None, self.hidden_size))
        self.built = True

    def call(self, input_ids, segment_ids, training=False):
        """Embeds ids.

        Args:
            input_ids: int32 Tensor [B, T], T <= max_position_embeddings.
            segment_ids: int32 Tensor [B, T], values < type_vocab_size.

        Returns:
            compute-dtype Tensor [B, T, H].
        """
        dtype = self.compute_dtype
        if self.use_one_hot_embeddings:
            # One-hot matmul instead of a gather: faster on TPUs.
            one_hot = ops.one_hot(input_ids, self.vocab_size, dtype=dtype)
            words = ops.matmul(
                one_hot, ops.cast(self.word_embeddings.value, dtype)
            )
        else:
            words = ops.cast(
                row_gradients.take(self.word_embeddings.value, input_ids), dtype
            )
        # The original's one-hot matmul for the (tiny) type table: the same
        # numbers as a gather (one non-zero term per output), and its
        # gradient is a matmul, not a scatter-add of every token onto two
        # rows (on GPUs that scatter took 40% of a BERT-base step).
        types = ops.matmul(
            ops.one_hot(segment_ids, self.type_vocab_size, dtype=dtype),
            ops.cast(self.token_type_embeddings.value, dtype),
        )
        seq_length = ops.shape(input_ids)[1]
        if isinstance(seq_length, int) and (
            seq_length > self.max_position_embeddings
        ):
            raise ValueError(
                f"sequence length {seq_length} is longer than "
                f"max_position_embeddings ({self.max_position_embeddings})"
            )
        # .value: the array; JAX cannot slice a Variable itself.
        positions = ops.slice(
            self.position_embeddings.value,
            (0, 0),
            (seq_length, self.hidden_size),
        )
        positions = ops.cast(positions, dtype)
        x = words + types + positions[None, :, :]
        return self.dropout(self.layer_norm(x), training=training)

    def get_config(self):
        config = super().get_config()
        for key in (
            "vocab_size",
            "hidden_size",
            "type_vocab_size",
            "max_position_embeddings",
            "initializer_range",
            "dropout_rate",
            "use_one_hot_embeddings",
        ):
            config[key] = getattr(self, key)
        return config


@keras.saving.register_keras_serializable(package="bert")
class SelfAttention(keras.layers.Layer):
    """Multi-head scaled dot-product self-attention (scope `self`).

    Q, K and V are three [H, H] Dense layers, as in the original checkpoints.
    """

    def __init__(
        self, num_heads, hidden_size, initializer_range, dropout_rate, **kwargs
    ):
        super().__init__(**kwargs)
        self.num_heads = num_heads
        self.hidden_size = hidden_size
        self.initializer_range = initializer_range
        self.dropout_rate = dropout_rate
        self.head_size = hidden_size // num_heads

        def dense(name):
            return keras.layers.Dense(
                hidden_size,
                kernel_initializer=initializer(initializer_range),
                name=name,
            )

        self.query = dense("query")
        self.key = dense("key")
        self.value = dense("value")
        self.dropout = Dropout(dropout_rate, name="dropout")

    def build(self, input_shape):
        for layer in (self.query, self.key, self.value):
            layer.build(input_shape)
        self.built = True

    def _split_heads(self, x, input_mask):
        # [B, T, H] or [B*T, H] -> [B, N, T, D]
        batch, length = ops.shape(input_mask)[0], ops.shape(input_mask)[1]
        x = ops.reshape(x, (batch, length, self.num_heads, self.head_size))
        return ops.transpose(x, (0, 2, 1, 3))

    def call(self, x, input_mask, training=False):
        """Attends every position to every unmasked position.

        Args:
            x: compute-dtype Tensor [B, T, H], or [B*T, H] (the blocks'
                matrices on JAX).
            input_mask: int32 Tensor [B, T], 1 = real token. (An int mask,
                not a float bias: Keras would cast a float argument to the
                compute dtype, and -10000 is not exact in bfloat16.)

        Returns:
            compute-dtype Tensor of x's shape, the concatenated heads.
        """
        if _fused_attention_applies(training, self.dropout.rate):
            return self._fused(x, input_mask)
        if _flash_attention_applies(
            training, self.dropout.rate, ops.shape(input_mask)[1]
        ):
            return self._flash(x, input_mask)
        q = self._split_heads(self.query(x), input_mask)  # [B, N, F, D]
        k = self._split_heads(self.key(x), input_mask)  # [B, N, T, D]
        v = self._split_heads(self.value(x), input_mask)  # [B, N, T, D]
        # The original multiplies after the matmul: scores = (q k^T) / sqrt(D).
        scores = ops.matmul(q, ops.transpose(k, (0, 1, 3, 2)))  # [B, N, F, T]
        scores = scores * (1.0 / math.sqrt(self.head_size))
        # Mask and softmax in float32: in bfloat16, -10000 plus a score loses
        # the score, and the softmax sum is imprecise.
        scores = ops.cast(scores, "float32") + attention_bias(input_mask)
        probs = ops.cast(ops.softmax(scores, axis=-1), self.compute_dtype)
        probs = self.dropout(probs, training=training)
        context = ops.matmul(probs, v)  # [B, N, F, D]
        context = ops.transpose(context, (0, 2, 1, 3))  # [B, F, N, D]
        return ops.reshape(context, ops.shape(x))

    def _flash(self, x, input_mask):
        # The attention and its dropout in Pallas kernels (JAX): the heads
        # stay in [B, T, N, D], no transpose.
        from modeling import flash_attention

        q, k, v = self._heads_in_place(x, input_mask)
        context = flash_attention.attention(
            q, k, v, input_mask, self.dropout.rate, self.dropout.call_seed()
        )
        return ops.reshape(context, ops.shape(x))

    def _heads_in_place(self, x, input_mask):
        """Q, K and V as [B, T, N, D] (a reshape, no transpose)."""
        batch, length = ops.shape(input_mask)[0], ops.shape(input_mask)[1]
        shape = (batch, length, self.num_heads, self.head_size)
        return tuple(
            ops.reshape(layer(x), shape)
            for layer in (self.query, self.key, self.value)
        )

    def _fused(self, x, input_mask):
        # The same attention through ops.dot_product_attention, which has no
        # dropout. A boolean mask equals the -10000 bias wherever a row has
        # a real key (exp(-10000) is 0 in float32); a row with none (a
        # padding example) attends to every key, as -10000 on all of them
        # does, rather than getting the kernel's choice.
        batch, length = ops.shape(input_mask)[0], ops.shape(input_mask)[1]
        q, k, v = self._heads_in_place(x, input_mask)
        real = ops.cast(input_mask, "bool")
        real = ops.logical_or(real, ~ops.any(real, axis=1, keepdims=True))
        mask = ops.broadcast_to(
            ops.expand_dims(real, (1, 2)), (batch, 1, length, length)
        )
        context = ops.dot_product_attention(
            q, k, v, mask=mask, scale=1.0 / math.sqrt(self.head_size)
        )
        return ops.reshape(context, ops.shape(x))

    def get_config(self):
        config = super().get_config()
        for key in (
            "num_heads",
            "hidden_size",
            "initializer_range",
            "dropout_rate",
        ):
            config[key] = getattr(self, key)
        return config


@keras.saving.register_keras_serializable(package="bert")
class DenseResidual(keras.layers.Layer):
    """LayerNorm(residual + dropout(dense(x))): scopes `attention/output` and
    `output` of a block (variables `dense/*`, `LayerNorm/*`)."""

    def __init__(self, hidden_size, initializer_range, dropout_rate, **kwargs):
        super().__init__(**kwargs)
        self.hidden_size = hidden_size
        self.initializer_range = initializer_range
        self.dropout_rate = dropout_rate
        self.dense = keras.layers.Dense(
            hidden_size,
            kernel_initializer=initializer(initializer_range),
            name="dense",
        )
        self.dropout = Dropout(dropout_rate, name="dropout")
        self.layer_norm = layer_norm()

    def build(self, input_shape):
        self.dense.build(input_shape)
        self.layer_norm.build(input_shape[:-1] + (self.hidden_size,))
        self.built = True

    def call(self, x, residual, training=False):
        """x: [B, T, in]; residual: [B, T, H] -> [B, T, H]."""
        y = self.dropout(self.dense(x), training=training)
        return self.layer_norm(y + residual)

    def get_config(self):
        config = super().get_config()
        config.update(
            hidden_size=self.hidden_size,
            initializer_range=self.initializer_range,
            dropout_rate=self.dropout_rate,
        )
        return config


@keras.saving.register_keras_serializable(package="bert")
class Attention(keras.layers.Layer):
    """Self-attention plus its output projection (scope `attention`)."""

    def __init__(
        self,
        num_heads,
        hidden_size,
        initializer_range,
        hidden_dropout_prob,
        attention_probs_dropout_prob,
        **kwargs,
    ):
        super().__init__(**kwargs)
        self.num_heads = num_heads
        self.hidden_size = hidden_size
        self.initializer_range = initializer_range
        self.hidden_dropout_prob = hidden_dropout_prob
        self.attention_probs_dropout_prob = attention_probs_dropout_prob
        self.self_attention = SelfAttention(
            num_heads,
            hidden_size,
            initializer_range,
            attention_probs_dropout_prob,
            name="self",
        )
        self.output_layer = DenseResidual(
            hidden_size, initializer_range, hidden_dropout_prob, name="output"
        )

    def build(self, input_shape):
        self.self_attention.build(input_shape)
        self.output_layer.build(input_shape)
        self.built = True

    def call(self, x, input_mask, training=False):
        """x: [B, T, H]; input_mask: int32 [B, T] -> [B, T, H]."""
        context = self.self_attention(x, input_mask, training=training)
        return self.output_layer(context, x, training=training)

    def get_config(self):
        config = super().get_config()
        for key in (
            "num_heads",
            "hidden_size",
            "initializer_range",
            "hidden_dropout_prob",
            "attention_probs_dropout_prob",
        ):
            config[key] = getattr(self, key)
        return config


@keras.saving.register_keras_serializable(package="bert")
class Intermediate(keras.layers.Layer):
    """The feed-forward expansion act(dense(x)) (scope `intermediate`)."""

    def __init__(self, intermediate_size, hidden_act, initializer_range, **kw):
        super().__init__(**kw)
        self.intermediate_size = intermediate_size
        self.hidden_act = hidden_act
        self.initializer_range = initializer_range
        self.dense = keras.layers.Dense(
            intermediate_size,
            activation=get_activation(hidden_act),
            kernel_initializer=initializer(initializer_range),
            name="dense",
        )

    def build(self, input_shape):
        self.dense.build(input_shape)
        self.built = True

    def call(self, x):
        """x: [B, T, H] -> [B, T, I]."""
        return self.dense(x)

    def get_config(self):
        config = super().get_config()
        config.update(
            intermediate_size=self.intermediate_size,
            hidden_act=self.hidden_act,
            initializer_range=self.initializer_range,
        )
        return config


@keras.saving.register_keras_serializable(package="bert")
class TransformerBlock(keras.layers.Layer):
    """One post-LayerNorm Transformer block (scope `layer_N`).

    h = LN(x + dropout(attention(x))); out = LN(h + dropout(W2 act(W1 h))).
    """

    def __init__(self, config, **kwargs):
        super().__init__(**kwargs)
        self.config = config
        self.attention = Attention(
            config.num_attention_heads,
            config.hidden_size,
            config.initializer_range,
            config.hidden_dropout_prob,
            config.attention_probs_dropout_prob,
            name="attention",
        )
        self.intermediate = Intermediate(
            config.intermediate_size,
            config.hidden_act,
            config.initializer_range,
            name="intermediate",
        )
        self.output_layer = DenseResidual(
            config.hidden_size,
            config.initializer_range,
            config.hidden_dropout_prob,
            name="output",
        )

    def build(self, input_shape):
        self.attention.build(input_shape)
        self.intermediate.build(input_shape)
        self.output_layer.build(
            input_shape[:-1] + (self.config.intermediate_size,)
        )
        self.built = True

    def call(self, x, input_mask, training=False):
        """x: [B, T, H]; input_mask: int32 [B, T] -> [B, T, H]."""
        # On JAX the block works on [B*T, H] matrices, as the original did
        # (its reshape_to_matrix), reshaping to [B, N, T, D] only for
        # attention: on 3-D activations XLA chose layouts such as [T, H, B]
        # for the weight gradients and spent milliseconds transposing
        # between them. BERT-base's bfloat16 step on an H100: 63.8 ms as
        # matrices, 65.8 ms as [B, T, H] (bench/gpu_variants_2026-11-26.json).
        # TensorFlow keeps [B, T, H]: on a 2-vCPU Xeon its mixed_bfloat16
        # step ran 8% slower as matrices (float32 the same).
        matrices = keras.backend.backend() == "jax"
        shape = ops.shape(x)
        if matrices:
            x = ops.reshape(x, (-1, shape[-1]))
        h = self.attention(x, input_mask, training=training)
        out = self.output_layer(self.intermediate(h), h, training=training)
        return ops.reshape(out, shape) if matrices else out

    def get_config(self):
        config = super().get_config()
        config["config"] = self.config.to_dict()
        return config

    @classmethod
    def from_config(cls, config):
        config = dict(config)
        bert_config = config_lib.BertConfig.from_dict(config.pop("config"))
        return cls(bert_config, **config)
