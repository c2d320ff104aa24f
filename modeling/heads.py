"""Output heads (run_pretraining.py, run_classifier.py, run_squad.py,
run_ner.py, run_multiple_choice.py); their losses are in losses.py.

Layer names follow the original scopes: the pre-training heads live in a
layer `cls` (`cls/predictions/...`, `cls/seq_relationship/...`). The
classifier's `output_weights` / `output_bias` sit at the ROOT scope in the
original; `ClassifierHead` creates them outside any name scope so their
paths are exactly those names (the one exception to "path = layer names"),
and so do its subclasses `TokenClassifierHead` and `MultipleChoiceHead`.

Shapes: B = batch size, T = sequence length, P = predictions per sequence,
H = hidden size, V = vocab size, L = number of labels.
"""

import keras
from keras import ops

from modeling import config as config_lib
from modeling import layers
from modeling import row_gradients

# run_classifier.py applies dropout with keep_prob 0.9 on the pooled output,
# hard-coded: config.hidden_dropout_prob does not change it.
CLASSIFIER_DROPOUT = 0.1


def gather_indexes(sequence_tensor, positions):
    """Gathers the vectors at `positions` of every sequence, flattened.

    Args:
        sequence_tensor: Tensor [B, T, H].
        positions: int Tensor [B, P].

    Returns:
        Tensor [B * P, H]; row b * P + p is sequence_tensor[b, positions[b, p]].
    """
    shape = ops.shape(sequence_tensor)
    batch, length, width = shape[0], shape[1], shape[2]
    positions = ops.cast(positions, "int32")
    offsets = ops.arange(batch, dtype="int32")[:, None] * length
    flat_positions = ops.reshape(positions + offsets, (-1,))
    flat_sequence = ops.reshape(sequence_tensor, (-1, width))
    return ops.take(flat_sequence, flat_positions, axis=0)


@keras.saving.register_keras_serializable(package="bert")
class MaskedLMTransform(keras.layers.Layer):
    """LN(act(dense(x))) (scope `transform`: `dense/*`, `LayerNorm/*`)."""

    def __init__(self, hidden_size, hidden_act, initializer_range, **kwargs):
        super().__init__(**kwargs)
        self.hidden_size = hidden_size
        self.hidden_act = hidden_act
        self.initializer_range = initializer_range
        self.dense = keras.layers.Dense(
            hidden_size,
            activation=layers.get_activation(hidden_act),
            kernel_initializer=layers.initializer(initializer_range),
            name="dense",
        )
        self.layer_norm = layers.layer_norm()

    def build(self, input_shape=None):
        self.dense.build((None, self.hidden_size))
        self.layer_norm.build((None, self.hidden_size))
        self.built = True

    def call(self, x):
        """x: [N, H] -> [N, H]."""
        return self.layer_norm(self.dense(x))

    def get_config(self):
        config = super().get_config()
        config.update(
            hidden_size=self.hidden_size,
            hidden_act=self.hidden_act,
            initializer_range=self.initializer_range,
        )
        return config


@keras.saving.register_keras_serializable(package="bert")
class MaskedLMHead(keras.layers.Layer):
    """Masked-LM head (scope `predictions`): transform, then the tied decoder.

    logits = transform(x) @ word_embeddings^T + output_bias. The decoder
    weight is the encoder's word embedding table, passed to `call` (so it
    is not tracked twice).
    """

    def __init__(self, config, **kwargs):
        super().__init__(**kwargs)
        self.config = config
        self.transform = MaskedLMTransform(
            config.hidden_size,
            config.hidden_act,
            config.initializer_range,
            name="transform",
        )

    def build(self, input_shape=None):
        self.transform.build()
        self.output_bias = self.add_weight(
            name="output_bias",
            shape=(self.config.vocab_size,),
            initializer="zeros",
        )
        self.built = True

    def call(self, x, embedding_table):
        """Log-probabilities over the vocabulary.

        Args:
            x: compute-dtype Tensor [N, H].
            embedding_table: the [V, H] word embedding variable.

        Returns:
            float32 Tensor [N, V].
        """
        # Losses are computed in float32 whatever the compute dtype.
        return ops.log_softmax(self.logits(x, embedding_table), axis=-1)

    def logits(self, x, embedding_table):
        """The logits before the softmax (the Hub-style export's
        `mlm_logits`); arguments as `call`'s. Returns float32 [N, V]."""
        h = self.transform(x)
        # The table's gradient is then dense, as the original's was.
        row_gradients.used_densely()
        table = ops.cast(embedding_table, h.dtype)
        logits = ops.matmul(h, ops.transpose(table))
        logits = logits + ops.cast(self.output_bias, h.dtype)
        return ops.cast(logits, "float32")

    def get_config(self):
        config = super().get_config()
        config["config"] = self.config.to_dict()
        return config

    @classmethod
    def from_config(cls, config):
        config = dict(config)
        bert_config = config_lib.BertConfig.from_dict(config.pop("config"))
        return cls(bert_config, **config)


@keras.saving.register_keras_serializable(package="bert")
class NextSentenceHead(keras.layers.Layer):
    """Next-sentence head (scope `seq_relationship`): pooled @ W^T + b.

    `output_weights` is [2, H] ([out, in], used transposed) as the original.
    """

    def __init__(self, hidden_size, initializer_range, **kwargs):
        super().__init__(**kwargs)
        self.hidden_size = hidden_size
        self.initializer_range = initializer_range

    def build(self, input_shape=None):
        self.output_weights = self.add_weight(
            name="output_weights",
            shape=(2, self.hidden_size),
            initializer=layers.initializer(self.initializer_range),
        )
        self.output_bias = self.add_weight(
            name="output_bias", shape=(2,), initializer="zeros"
        )
        self.built = True

    def call(self, pooled_output):
        """pooled_output: [B, H] -> float32 log-probabilities [B, 2]."""
        logits = ops.matmul(
            pooled_output, ops.transpose(self.output_weights)
        ) + ops.cast(self.output_bias, pooled_output.dtype)
        return ops.log_softmax(ops.cast(logits, "float32"), axis=-1)

    def get_config(self):
        config = super().get_config()
        config.update(
            hidden_size=self.hidden_size,
            initializer_range=self.initializer_range,
        )
        return config


@keras.saving.register_keras_serializable(package="bert")
class PretrainingHeads(keras.layers.Layer):
    """The scope `cls`: `predictions` (masked LM) and `seq_relationship`."""

    def __init__(self, config, **kwargs):
        super().__init__(**kwargs)
        self.config = config
        self.predictions = MaskedLMHead(config, name="predictions")
        self.seq_relationship = NextSentenceHead(
            config.hidden_size,
            config.initializer_range,
            name="seq_relationship",
        )

    def build(self, input_shape=None):
        self.predictions.build()
        self.seq_relationship.build()
        self.built = True

    def call(
        self,
        sequence_output,
        pooled_output,
        masked_lm_positions,
        embedding_table,
    ):
        """Both heads.

        Args:
            sequence_output: Tensor [B, T, H].
            pooled_output: Tensor [B, H].
            masked_lm_positions: int Tensor [B, P].
            embedding_table: the [V, H] word embedding variable (tied).

        Returns:
            (masked_lm_log_probs float32 [B * P, V],
             next_sentence_log_probs float32 [B, 2]).
        """
        gathered = gather_indexes(sequence_output, masked_lm_positions)
        return (
            self.predictions(gathered, embedding_table=embedding_table),
            self.seq_relationship(pooled_output),
        )

    def get_config(self):
        config = super().get_config()
        config["config"] = self.config.to_dict()
        return config

    @classmethod
    def from_config(cls, config):
        config = dict(config)
        bert_config = config_lib.BertConfig.from_dict(config.pop("config"))
        return cls(bert_config, **config)


@keras.saving.register_keras_serializable(package="bert")
class ClassifierHead(keras.layers.Layer):
    """run_classifier's head: dropout(0.1) on the pooled output, then dense.

    The variables `output_weights` [L, H] and `output_bias` [L] are created
    here, in __init__ and outside any name scope, so their paths are the
    original ROOT-scope names. Construct this layer outside other layers'
    calls (task models do so in their __init__).
    """

    def __init__(self, num_labels, hidden_size, initializer_range, **kwargs):
        # No autocast: call() casts output_weights to the compute dtype
        # itself and adds the float32 output_bias to float32 logits. The
        # variables are made with autocast=False too: called outside any
        # other layer under a mixed policy, Keras opens an autocast scope
        # even for a layer with autocast=False, and would read them as
        # bfloat16.
        kwargs.setdefault("autocast", False)
        super().__init__(**kwargs)
        self.num_labels = num_labels
        self.hidden_size = hidden_size
        self.initializer_range = initializer_range
        self.output_weights = keras.Variable(
            layers.initializer(initializer_range)((num_labels, hidden_size)),
            name="output_weights",
            autocast=False,
        )
        self.output_bias = keras.Variable(
            keras.initializers.Zeros()((num_labels,)),
            name="output_bias",
            autocast=False,
        )
        self.dropout = keras.layers.Dropout(CLASSIFIER_DROPOUT, name="dropout")
        self.built = True

    def call(self, pooled_output, training=False):
        """pooled_output: [B, H] -> float32 logits [B, L]."""
        x = self.dropout(pooled_output, training=training)
        weights = ops.cast(self.output_weights, x.dtype)
        logits = ops.matmul(x, ops.transpose(weights))
        logits = ops.cast(logits, "float32") + self.output_bias
        return logits

    def get_config(self):
        config = super().get_config()
        config.update(
            num_labels=self.num_labels,
            hidden_size=self.hidden_size,
            initializer_range=self.initializer_range,
        )
        return config


@keras.saving.register_keras_serializable(package="bert")
class SpanHead(keras.layers.Layer):
    """run_squad's head (scope `squad`): start/end logits for every token.

    `output_weights` is [2, H] ([out, in]); row 0 gives start logits, row 1
    end logits. No dropout, as the original.
    """

    def __init__(self, hidden_size, initializer_range, **kwargs):
        # No autocast: call() casts output_weights itself and adds the
        # float32 output_bias to float32 logits (variables not autocast
        # either, as in ClassifierHead).
        kwargs.setdefault("autocast", False)
        super().__init__(**kwargs)
        self.hidden_size = hidden_size
        self.initializer_range = initializer_range

    def build(self, input_shape=None):
        self.output_weights = self.add_weight(
            name="output_weights",
            shape=(2, self.hidden_size),
            initializer=layers.initializer(self.initializer_range),
            autocast=False,
        )
        self.output_bias = self.add_weight(
            name="output_bias",
            shape=(2,),
            initializer="zeros",
            autocast=False,
        )
        self.built = True

    def call(self, sequence_output):
        """[B, T, H] -> (start_logits, end_logits), float32 [B, T] each."""
        weights = ops.cast(self.output_weights, sequence_output.dtype)
        logits = ops.matmul(sequence_output, ops.transpose(weights))
        logits = ops.cast(logits, "float32") + self.output_bias  # [B, T, 2]
        return logits[:, :, 0], logits[:, :, 1]

    def get_config(self):
        config = super().get_config()
        config.update(
            hidden_size=self.hidden_size,
            initializer_range=self.initializer_range,
        )
        return config


@keras.saving.register_keras_serializable(package="bert")
class SquadHeads(keras.layers.Layer):
    """The scope `cls` of run_squad, holding `squad` (a SpanHead)."""

    def __init__(self, hidden_size, initializer_range, **kwargs):
        super().__init__(**kwargs)
        self.hidden_size = hidden_size
        self.initializer_range = initializer_range
        self.squad = SpanHead(hidden_size, initializer_range, name="squad")

    def build(self, input_shape=None):
        self.squad.build()
        self.built = True

    def call(self, sequence_output):
        return self.squad(sequence_output)

    def get_config(self):
        config = super().get_config()
        config.update(
            hidden_size=self.hidden_size,
            initializer_range=self.initializer_range,
        )
        return config


@keras.saving.register_keras_serializable(package="bert")
class TokenClassifierHead(ClassifierHead):
    """run_ner's head: dropout(0.1) on every token's final hidden state,
    then one dense layer to L label logits.

    The same root-scope variables as ClassifierHead, `output_weights` [L, H]
    and `output_bias` [L], so the head loads and saves under the names a
    classifier checkpoint uses.
    """

    def call(self, sequence_output, training=False):
        """sequence_output: [B, T, H] -> float32 logits [B, T, L]."""
        return super().call(sequence_output, training=training)


@keras.saving.register_keras_serializable(package="bert")
class MultipleChoiceHead(ClassifierHead):
    """run_multiple_choice's head (the BERT paper's SWAG set-up): one dense
    unit scores each choice's pooled [CLS] vector; a softmax over the
    choices (in the loss) picks one.

    Root-scope `output_weights` [1, H] and `output_bias` [1], as a
    one-label ClassifierHead.
    """

    def __init__(self, hidden_size, initializer_range, **kwargs):
        kwargs.pop("num_labels", None)  # get_config's copy: always 1.
        super().__init__(1, hidden_size, initializer_range, **kwargs)

    def call(self, pooled_output, training=False):
        """pooled_output: [B, C, H] (C choices) -> float32 logits [B, C]."""
        return super().call(pooled_output, training=training)[..., 0]


# The sentence-embedding pooling modes (sentence-transformers' Pooling
# module's names: pooling_mode_<mode>_tokens).
POOLING_MODES = ("mean", "cls", "max")


@keras.saving.register_keras_serializable(package="bert")
class SentencePooling(keras.layers.Layer):
    """A sentence's vector from the encoder's token vectors (no weights),
    as sentence-transformers' Pooling and Normalize modules compute it.

    Args:
        mode: "mean" (the mean of the real tokens' vectors, [CLS] and
            [SEP] included), "cls" (the [CLS] token's) or "max" (the
            largest value of each dimension over the real tokens).
        normalize: scale each vector to unit length (cosine similarity is
            then a dot product).

    Call: (sequence_output [B, T, H], input_mask [B, T]) -> [B, H].
    """

    def __init__(self, mode="mean", normalize=True, **kwargs):
        super().__init__(**kwargs)
        if mode not in POOLING_MODES:
            raise ValueError(
                f"Unknown pooling {mode!r}; expected one of {POOLING_MODES}"
            )
        self.mode = mode
        self.normalize = normalize
        # No weights (as Keras's own Dropout): the model is whole once its
        # other layers are, and fit can build the optimizer before tracing
        # (models._OptimizerBuiltFirst).
        self.built = True

    def call(self, sequence_output, input_mask):
        x = ops.cast(sequence_output, "float32")
        mask = ops.expand_dims(ops.cast(input_mask, "float32"), -1)
        if self.mode == "cls":
            pooled = x[:, 0]
        elif self.mode == "mean":
            # sentence-transformers' clamp: a row without tokens gives 0.
            pooled = ops.sum(x * mask, axis=1) / ops.maximum(
                ops.sum(mask, axis=1), 1e-9
            )
        else:  # Padding set to -1e9, as sentence-transformers does.
            pooled = ops.max(ops.where(mask > 0, x, -1e9), axis=1)
        if self.normalize:
            # torch.nn.functional.normalize's eps.
            norm = ops.sqrt(ops.sum(pooled * pooled, axis=-1, keepdims=True))
            pooled = pooled / ops.maximum(norm, 1e-12)
        return pooled

    def get_config(self):
        return dict(
            super().get_config(), mode=self.mode, normalize=self.normalize
        )
