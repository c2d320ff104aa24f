"""Task models: the encoder plus the heads of run_pretraining,
run_classifier, run_squad, run_ner and run_multiple_choice.

Each model builds all of its weights in __init__, outside any name scope, so
that a variable's path is its original checkpoint name: a Keras Model called
later would otherwise prefix its own name (`bert_pretrainer/bert/...`).

Shapes: B = batch size, T = sequence length, P = predictions per sequence,
H = hidden size, V = vocab size, L = number of labels, C = number of choices.
"""

import contextlib

import keras

from modeling import checkpoints
from modeling import config as config_lib
from modeling import encoder
from modeling import heads


@contextlib.contextmanager
def saved_policy(policy):
    """Makes layers under the dtype policy a saved model was built with
    (None: this process's). Layers take the global policy as they are
    made: without this, a mixed-precision .keras file loads as float32,
    and its optimizer's loss-scale state is dropped."""
    if policy is None:
        yield
        return
    previous = keras.config.dtype_policy()
    keras.config.set_dtype_policy(policy)
    try:
        yield
    finally:
        keras.config.set_dtype_policy(previous)


class _OptimizerBuiltFirst(keras.Model):
    """A keras.Model whose `fit` builds the optimizer's slots before the
    train step is traced. Keras's TensorFlow trainer (without a
    distribution strategy) leaves them to the step's first trace, and a
    tf.function that creates variables is traced twice, once creating
    them and once using them: every fit traced the whole BERT train step
    twice (a third of a tiny embedder's fit). Built here as Keras builds
    it under a strategy; a model whose layers are not all built yet is
    left to Keras. The base of the task models and of the raw-text models
    (text_model.TextModel); tests/keras_test.py and embeddings_test.py
    hold their fits to no variable made while tracing."""

    def make_train_function(self, force=False):
        optimizer = getattr(self, "optimizer", None)
        if (
            optimizer is not None
            and not optimizer.built
            and all(layer.built for layer in self._flatten_layers())
        ):
            strategy = getattr(self, "distribute_strategy", None)
            with strategy.scope() if strategy else contextlib.nullcontext():
                optimizer.build(self.trainable_variables)
        return super().make_train_function(force)


class _TaskModel(_OptimizerBuiltFirst):
    """What every task model shares: its config holds the BertConfig as a
    dict (get_config), rebuilt here; `from_checkpoint` builds one from an
    original-format checkpoint."""

    # Regular expressions of the task head's variables: a pre-trained
    # checkpoint lacks them, so they keep their initial values when it is
    # loaded (the runners' --init_checkpoint does the same).
    HEAD_VARIABLES = ()

    def get_config(self):
        """The constructor's arguments; the BertConfig as a dict; the dtype
        policy the layers were built under (mixed_bfloat16, ...)."""
        return {
            "name": self.name,
            "config": self.config.to_dict(),
            "use_one_hot_embeddings": self.use_one_hot_embeddings,
            "dtype_policy": self.dtype_policy.name,
        }

    @classmethod
    def from_config(cls, config):
        config = dict(config)
        bert_config = config_lib.BertConfig.from_dict(config.pop("config"))
        with saved_policy(config.pop("dtype_policy", None)):
            return cls(bert_config, **config)

    @classmethod
    def from_checkpoint(
        cls, path, bert_config_file=None, ignore_missing=None, **kwargs
    ):
        """The model of a checkpoint folder, with its weights.

        A released model folder (`bert_config.json`, `bert_model.ckpt.*`,
        `vocab.txt`), a fine-tuning output folder (its newest
        `model.ckpt-N`), or a checkpoint prefix with `bert_config.json` in
        its folder. Weights only are read, by name with shape checks
        (`checkpoints.load_weights`); the head is loaded when the checkpoint
        has it (one fine-tuned here or by the original) and starts from its
        initializer otherwise.

            model = BertClassifier.from_checkpoint(
                "uncased_L-12_H-768_A-12", num_labels=2)

        Args:
            path: folder or checkpoint prefix.
            bert_config_file: str, another config than the one beside the
                checkpoint.
            ignore_missing: regexes of variables the checkpoint may lack
                (default: the task head, HEAD_VARIABLES).
            **kwargs: the class's other arguments (`num_labels`, ...).

        Raises:
            FileNotFoundError: no checkpoint or no config there.
            ValueError: a variable's shape differs from the checkpoint's
                (another config, or a head with another number of labels),
                or the checkpoint lacks an encoder variable.
        """
        files = checkpoints.checkpoint_files(path, bert_config_file)
        config = config_lib.BertConfig.from_json_file(files.config_file)
        model = cls(config, **kwargs)
        if ignore_missing is None:
            ignore_missing = cls.HEAD_VARIABLES
        checkpoints.load_weights(model, files.prefix, ignore_missing)
        return model


@keras.saving.register_keras_serializable(package="bert")
class BertPretrainer(_TaskModel):
    """BERT with the masked-LM and next-sentence heads (run_pretraining).

    Args:
        config: BertConfig.
        use_one_hot_embeddings: bool, see `encoder.BertModel`.

    Attributes:
        bert: encoder.BertModel (variables `bert/...`).
        cls: heads.PretrainingHeads (variables `cls/...`).
    """

    def __init__(self, config, use_one_hot_embeddings=False, **kwargs):
        kwargs.setdefault("name", "bert_pretrainer")
        super().__init__(**kwargs)
        self.config = config
        self.use_one_hot_embeddings = use_one_hot_embeddings
        # === Layers ===
        self.bert = encoder.BertModel(
            config, use_one_hot_embeddings=use_one_hot_embeddings, name="bert"
        )
        self.cls = heads.PretrainingHeads(config, name="cls")
        # Built now, outside the model's name scope (see the module doc).
        self.bert.build()
        self.cls.build()
        self.built = True

    def call(self, features, training=False):
        """Runs the encoder and both heads.

        Args:
            features: dict with "input_ids", "input_mask", "segment_ids"
                (int Tensors [B, T]) and "masked_lm_positions" (int Tensor
                [B, P]); other keys (labels, weights) are ignored.
            training: bool, apply dropout.

        Returns:
            the encoder's dict (see `encoder.BertModel.call`) plus
            "masked_lm_log_probs" float32 [B * P, V] and
            "next_sentence_log_probs" float32 [B, 2].
        """
        outputs = dict(self.bert(features, training=training))
        mlm, nsp = self.cls(
            outputs["sequence_output"],
            outputs["pooled_output"],
            features["masked_lm_positions"],
            embedding_table=self.bert.embeddings.word_embeddings,
        )
        outputs["masked_lm_log_probs"] = mlm
        outputs["next_sentence_log_probs"] = nsp
        return outputs


@keras.saving.register_keras_serializable(package="bert")
class BertClassifier(_TaskModel):
    """BERT with run_classifier's head on the pooled output.

    Args:
        config: BertConfig.
        num_labels: int, number of classes L.
        use_one_hot_embeddings: bool, see `encoder.BertModel`.

    Attributes:
        bert: encoder.BertModel (variables `bert/...`).
        classifier: heads.ClassifierHead (variables `output_weights` [L, H]
            and `output_bias` [L], at the root scope as in the original).
    """

    # The head and the encoder output it reads (BertTokenClassifier
    # changes both).
    HEAD_VARIABLES = ("^output_weights$", "^output_bias$")
    _DEFAULT_NAME = "bert_classifier"
    _HEAD = heads.ClassifierHead
    _INPUT = "pooled_output"

    def __init__(
        self, config, num_labels, use_one_hot_embeddings=False, **kwargs
    ):
        kwargs.setdefault("name", self._DEFAULT_NAME)
        super().__init__(**kwargs)
        if isinstance(num_labels, bool) or not isinstance(num_labels, int):
            raise TypeError(f"num_labels must be an int, got {num_labels!r}")
        if num_labels < 1:
            raise ValueError(f"num_labels must be positive, got {num_labels}")
        self.config = config
        self.num_labels = num_labels
        self.use_one_hot_embeddings = use_one_hot_embeddings
        # === Layers ===
        # The head first: its initial values and dropout seed are then the
        # first draws after the random seed, whatever the encoder, so a
        # head on a SavedModel encoder (saved_encoder.BertHubClassifier)
        # gets the same ones.
        self.classifier = self._HEAD(
            num_labels,
            config.hidden_size,
            config.initializer_range,
            name="classifier",
        )
        self.bert = encoder.BertModel(
            config, use_one_hot_embeddings=use_one_hot_embeddings, name="bert"
        )
        self.bert.build()
        self.built = True

    def call(self, features, training=False):
        """features: dict with "input_ids", "input_mask", "segment_ids" int
        [B, T] (other keys ignored) -> float32 logits [B, L] (a token
        classifier's: [B, T, L])."""
        outputs = self.bert(features, training=training)
        return self.classifier(outputs[self._INPUT], training=training)

    def get_config(self):
        return dict(super().get_config(), num_labels=self.num_labels)


@keras.saving.register_keras_serializable(package="bert")
class BertSpanLabeler(_TaskModel):
    """BERT with run_squad's span head on every token.

    Args:
        config: BertConfig.
        use_one_hot_embeddings: bool, see `encoder.BertModel`.

    Attributes:
        bert: encoder.BertModel (variables `bert/...`).
        cls: heads.SquadHeads (variables `cls/squad/output_weights` [2, H],
            `cls/squad/output_bias` [2]).
    """

    HEAD_VARIABLES = ("^cls/squad/",)

    def __init__(self, config, use_one_hot_embeddings=False, **kwargs):
        kwargs.setdefault("name", "bert_span_labeler")
        super().__init__(**kwargs)
        self.config = config
        self.use_one_hot_embeddings = use_one_hot_embeddings
        # === Layers ===
        self.bert = encoder.BertModel(
            config, use_one_hot_embeddings=use_one_hot_embeddings, name="bert"
        )
        self.cls = heads.SquadHeads(
            config.hidden_size, config.initializer_range, name="cls"
        )
        self.bert.build()
        self.cls.build()
        self.built = True

    def call(self, features, training=False):
        """features: dict with "input_ids", "input_mask", "segment_ids" int
        [B, T] -> dict "start_logits", "end_logits", float32 [B, T]."""
        outputs = self.bert(features, training=training)
        start, end = self.cls(outputs["sequence_output"])
        return {"start_logits": start, "end_logits": end}


@keras.saving.register_keras_serializable(package="bert")
class BertTokenClassifier(BertClassifier):
    """BERT with run_ner's head on every token.

    Args:
        config: BertConfig.
        num_labels: int, number of tags L.
        use_one_hot_embeddings: bool, see `encoder.BertModel`.

    Attributes:
        bert: encoder.BertModel (variables `bert/...`).
        classifier: heads.TokenClassifierHead (variables `output_weights`
            [L, H] and `output_bias` [L] at the root scope).
    """

    _DEFAULT_NAME = "bert_token_classifier"
    _HEAD = heads.TokenClassifierHead
    _INPUT = "sequence_output"  # Logits [B, T, L].


@keras.saving.register_keras_serializable(package="bert")
class BertMultipleChoice(_TaskModel):
    """BERT scoring C packed choices per example (run_multiple_choice).

    Each choice is its own `[CLS] A [SEP] B [SEP]` sequence; the encoder
    runs on the B * C sequences and one dense unit scores each pooled
    vector. The number of choices is the inputs' second dimension.

    Args:
        config: BertConfig.
        use_one_hot_embeddings: bool, see `encoder.BertModel`.

    Attributes:
        bert: encoder.BertModel (variables `bert/...`).
        classifier: heads.MultipleChoiceHead (variables `output_weights`
            [1, H] and `output_bias` [1] at the root scope).
    """

    HEAD_VARIABLES = BertClassifier.HEAD_VARIABLES

    def __init__(self, config, use_one_hot_embeddings=False, **kwargs):
        kwargs.setdefault("name", "bert_multiple_choice")
        super().__init__(**kwargs)
        self.config = config
        self.use_one_hot_embeddings = use_one_hot_embeddings
        # === Layers ===
        self.bert = encoder.BertModel(
            config, use_one_hot_embeddings=use_one_hot_embeddings, name="bert"
        )
        self.classifier = heads.MultipleChoiceHead(
            config.hidden_size, config.initializer_range, name="classifier"
        )
        self.bert.build()
        self.built = True

    def call(self, features, training=False):
        """features: dict with "input_ids", "input_mask", "segment_ids" int
        [B, C, T] (other keys ignored) -> float32 logits [B, C]."""
        ids = features["input_ids"]
        shape = keras.ops.shape(ids)
        # Sizes, not -1: a batch of no examples has nothing to infer from.
        flat = {
            name: keras.ops.reshape(
                features[name], (shape[0] * shape[1], shape[2])
            )
            for name in ("input_ids", "input_mask", "segment_ids")
        }
        pooled = self.bert(flat, training=training)["pooled_output"]
        pooled = keras.ops.reshape(
            pooled, (shape[0], shape[1], self.config.hidden_size)
        )
        return self.classifier(pooled, training=training)


@keras.saving.register_keras_serializable(package="bert")
class BertEmbedder(_TaskModel):
    """BERT as a sentence embedder (run_embeddings.py): the encoder's token
    vectors pooled into one vector per text (heads.SentencePooling), the
    vectors of sentence-transformers for the same weights and settings.

    Args:
        config: BertConfig.
        pooling: "mean", "cls" or "max".
        normalize: unit-length vectors.
        use_one_hot_embeddings: bool, see `encoder.BertModel`.

    Attributes:
        bert: encoder.BertModel (variables `bert/...`; no head: the pooling
            has no weights, so any BERT checkpoint loads as it is).
    """

    def __init__(
        self,
        config,
        pooling="mean",
        normalize=True,
        use_one_hot_embeddings=False,
        **kwargs,
    ):
        kwargs.setdefault("name", "bert_embedder")
        super().__init__(**kwargs)
        self.config = config
        self.use_one_hot_embeddings = use_one_hot_embeddings
        self.pooling = heads.SentencePooling(pooling, normalize, name="pooling")
        self.bert = encoder.BertModel(
            config, use_one_hot_embeddings=use_one_hot_embeddings, name="bert"
        )
        self.bert.build()
        self.built = True

    # Training batches (run_embeddings --do_train) hold the texts of each
    # side of a pair under these prefixes: "anchor_input_ids", ...
    SIDES = ("anchor", "positive", "negative", "sentence1", "sentence2")

    def call(self, features, training=False):
        """features: dict with "input_ids", "input_mask", "segment_ids" int
        [B, T] -> {"embeddings": float32 [B, H]}; or the same features of
        several SIDES ("anchor_input_ids", ...) -> {side: [B, H]}."""
        if "input_ids" in features:
            return {"embeddings": self._embed(features, "", training)}
        return {
            side: self._embed(features, side + "_", training)
            for side in self.SIDES
            if side + "_input_ids" in features
        }

    def _embed(self, features, prefix, training):
        inputs = {
            name: features[prefix + name]
            for name in ("input_ids", "input_mask", "segment_ids")
        }
        outputs = self.bert(inputs, training=training)
        return self.pooling(outputs["sequence_output"], inputs["input_mask"])

    def get_config(self):
        return dict(
            super().get_config(),
            pooling=self.pooling.mode,
            normalize=self.pooling.normalize,
        )


def float32_twin(model):
    """`model`, computing in float32: itself when it does, else a copy of
    it built under the float32 policy holding its weights (a mixed-precision
    run's variables are float32 already: copied exactly). What the serving
    exports serve, whatever precision trained the model, as export_hub.py's
    encoder: bfloat16 would round the outputs to 2-3 digits, and on a CPU
    without bfloat16 units run slower than float32."""
    policy = getattr(model, "dtype_policy", None)  # None: a plain function.
    if policy is None or policy.compute_dtype == "float32":
        return model
    twin = type(model).from_config(
        dict(model.get_config(), dtype_policy="float32")
    )
    weights = {checkpoints.variable_name(v): v for v in model.weights}
    twins = {checkpoints.variable_name(v): v for v in twin.weights}
    if weights.keys() != twins.keys():
        raise RuntimeError(
            f"A float32 {type(model).__name__} has other variables: "
            f"{sorted(weights.keys() ^ twins.keys())[:5]}"
        )
    for name, variable in twins.items():
        variable.assign(keras.ops.convert_to_numpy(weights[name].value))
    return twin


def named_outputs(model, features, select=None):
    """A model's outputs for prediction: a dict of float32 tensors by name
    (the model's own dict, a span labeler's "start_logits" and
    "end_logits"; a single tensor as "logits"), whatever the compute
    precision.

    Args:
        model: a task model (or an encoder) taking a feature dict.
        features: its inputs.
        select: optional, the model's outputs -> a dict of the ones wanted
            (e.g. some layers of an encoder's "all_encoder_layers").
    """
    outputs = model(features, training=False)
    if select is not None:
        outputs = select(outputs)
    if not isinstance(outputs, dict):
        outputs = {"logits": outputs}
    return {k: keras.ops.cast(v, "float32") for k, v in outputs.items()}
