"""A Keras text classifier: raw strings in, run_classifier's model inside.

    model = BertTextClassifier.from_checkpoint("uncased_L-12_H-768_A-12",
                                               num_labels=2)
    model.fit((sentences_a, sentences_b), labels, batch_size=32, epochs=3)
    model.evaluate((dev_a, dev_b), dev_labels)
    logits = model.predict((new_a, new_b))
    model.save("mrpc.keras")           # keras.models.load_model reads it
    model.save_checkpoint("mrpc_out")  # model.ckpt-N, as run_classifier's

Your own CSV / TSV / JSON Lines files, read as run_classifier.py
--task_name=custom reads them:

    train = BertTextClassifier.read_file("train.csv")   # x, y, labels, ids
    model.fit(train.x, train.y, epochs=3)

`BertTextClassifier` is a `BertPreprocessor` (in-graph tokenizer and packer)
in front of a `models.BertClassifier`. `fit`, `evaluate` and `predict` take
raw strings (or (text_a, text_b) pairs) and labels, and run the
preprocessor in their tf.data pipeline; the model itself sees the
original's features.

It is run_classifier.py's training, reached from Keras: for the same seed
(`keras.utils.set_random_seed` before building, `fit(seed=...)`) and
settings, `fit` gives run_classifier.py's weights and dev metrics up to
float rounding (tests/keras_test.py), because both use
  * the same model and starting point: `BertClassifier.from_checkpoint`
    loads the checkpoint as --init_checkpoint does, the head drawn from the
    same seeded initializers;
  * the same features: the in-graph tokenizer gives FullTokenizer's ids,
    packed as `convert_single_example` packs them;
  * the same order: `input_pipeline.repeat_and_shuffle` (the original's
    repeat + shuffle buffer of 100, seeded), whole batches, each cut to its
    longest sequence by `input_pipeline.trim_padding` (--dynamic_padding);
  * the same loss (the task kind's, `task_kinds`, averaged over the
    batch) and optimizer (`optimization.AdamWeightDecayOptimizer`: the
    original's clipping, AdamWeightDecay update, warmup over the first 10%
    of the steps and linear decay to 0 at the last);
  * the same dropout draws: Keras dropout layers seeded in the same
    construction order, one draw per training step.
The step itself is Keras's train_step (a gradient tape, the loss, one
optimizer update), which computes what training.steps does for one replica
without gradient accumulation. `fit` runs `epochs * steps_per_epoch` steps
(default steps_per_epoch: whole batches per epoch); run_classifier.py's
`int(examples / batch * epochs)` is the same when the batch size divides
the number of examples.

One module, over 500 lines: one Keras model's whole API (construction, compile,
fit, evaluate, predict, save, export), as keras-hub keeps a task.
"""

import os

import keras
import numpy as np
import tensorflow as tf

from modeling import models
from modeling import preprocessing
from modeling import task_kinds
from modeling import text_model
from modeling.data import custom
from modeling.data import input_pipeline
from modeling.export import base
from modeling.export import classifier as classifier_export
from modeling.training import checkpoint_manager
from modeling.training import optimization

# The defaults of run_classifier.py's flags.
DEFAULT_BATCH_SIZE = text_model.DEFAULT_BATCH_SIZE
DEFAULT_LEARNING_RATE = 2e-5
DEFAULT_WARMUP_PROPORTION = 0.1


def _is_auto(value):
    return isinstance(value, str) and value == "auto"


@keras.saving.register_keras_serializable(package="bert", name="ClassifierLoss")
class ClassifierLoss(keras.losses.Loss):
    """A kind's `example_loss` as a Keras loss, for `compile` (Keras
    averages it over the batch, as the original's mean).

    Args:
      task_type: a name of task_kinds.NAMES. (is_regression / multi_label: the
        arguments of models saved before the kinds, read as a task_type.)
    """

    def __init__(
        self,
        task_type=task_kinds.CLASSIFICATION,
        name="classifier_loss",
        is_regression=False,
        multi_label=False,
        **kwargs,
    ):
        super().__init__(name=name, **kwargs)
        if is_regression or multi_label:
            task_type = task_kinds.from_legacy(is_regression, multi_label).name
        self.task_type = task_type
        self.kind = task_kinds.get(task_type)

    def call(self, y_true, y_pred):
        return self.kind.example_loss(y_pred, y_true)

    def get_config(self):
        return dict(super().get_config(), task_type=self.task_type)


@keras.saving.register_keras_serializable(package="bert")
class BertTextClassifier(text_model.TextModel):
    """Sentence (pair) classification on raw text (see the module doc).

    Args:
      classifier: models.BertClassifier (its variables keep the original
        checkpoint names).
      preprocessor: preprocessing.BertPreprocessor.
      is_regression: bool, a single output trained with the squared error
        (STS-B); needs num_labels 1.
      multi_label: bool, a set of labels per text: labels are 0/1 arrays
        [N, num_labels], each output a sigmoid's logit.
      multi_label_threshold: a multi-label model predicts a label when its
        probability is at least this (default 0.5; run_classifier.py's
        labels.json records the one its run used).
      dynamic_padding: bool, cut each batch to its longest sequence
        (rounded up to 8): the same numbers up to float rounding, less work
        on short texts. Turn it off on TPUs (fixed shapes).
      long_inputs: how `predict` reads texts longer than the sequence
        length, as run_classifier.py --long_inputs: "truncate" (default),
        "head_tail", "chunks" (the mean of the windows' logits), or a
        long_inputs.LongInputs. `fit` and `evaluate` read texts the same
        way: a batch of texts is a batch of their windows, each text's
        logits combined before the loss and the metrics (chunks: a batch
        costs all its texts' windows; not with jit_compile, whose shapes
        must not vary).

    Compiled at construction with `compile()`'s defaults; `compile` again
    to change them.
    """

    def __init__(
        self,
        classifier,
        preprocessor,
        is_regression=False,
        dynamic_padding=True,
        multi_label=False,
        multi_label_threshold=None,
        long_inputs=None,
        **kwargs,
    ):
        kwargs.setdefault("name", "bert_text_classifier")
        # Saved by versions before the task kinds: the same, by name.
        task_type = kwargs.pop("task_type", None)
        super().__init__(**kwargs)
        # Classification, regression or multi-label (modeling/task_kinds.py):
        # the loss, the reported outputs and the decision rule.
        if task_type is not None:
            kind = task_kinds.get(task_type, multi_label_threshold)
        else:
            kind = task_kinds.from_legacy(
                is_regression, multi_label, multi_label_threshold
            )
        if not kind.label_list and classifier.num_labels != 1:
            raise ValueError(
                "A regression classifier has one output: num_labels=1, got "
                f"{classifier.num_labels}"
            )
        self.classifier = classifier
        self.kind = kind
        self._set_up(preprocessor, dynamic_padding, long_inputs)
        self.built = True
        self.compile()

    @property
    def is_regression(self):
        return not self.kind.label_list

    @property
    def multi_label(self):
        return self.kind.label_sets

    @classmethod
    def from_checkpoint(
        cls,
        path,
        num_labels=2,
        sequence_length=128,
        do_lower_case=None,
        is_regression=False,
        dynamic_padding=True,
        bert_config_file=None,
        multi_label=False,
        multi_label_threshold=None,
        long_inputs=None,
    ):
        """The classifier of a checkpoint folder.

        Args:
          path: a released model folder (bert_config.json, bert_model.ckpt,
            vocab.txt), a fine-tuning output folder (its newest checkpoint),
            or a checkpoint prefix with those files beside it.
          num_labels: int, the number of classes (1 for regression).
          sequence_length: int, the scripts' max_seq_length.
          do_lower_case: bool; None: from the vocabulary (uncased when it
            has no upper-case token).
          is_regression, dynamic_padding, multi_label,
            multi_label_threshold, long_inputs: see the class.
          bert_config_file: str, another config than the folder's.

        Raises:
          FileNotFoundError: a file is missing (named).
          ValueError: the checkpoint does not fit the config or num_labels,
            or sequence_length exceeds the model's positions.
        """
        classifier = models.BertClassifier.from_checkpoint(
            path, bert_config_file=bert_config_file, num_labels=num_labels
        )
        preprocessor = preprocessing.BertPreprocessor.from_checkpoint(
            path,
            sequence_length=sequence_length,
            do_lower_case=do_lower_case,
            bert_config_file=bert_config_file,
        )
        return cls(
            classifier,
            preprocessor,
            is_regression=is_regression,
            dynamic_padding=dynamic_padding,
            multi_label=multi_label,
            multi_label_threshold=multi_label_threshold,
            long_inputs=long_inputs,
        )

    # Your own CSV / TSV / JSON Lines file as fit's inputs
    # (modeling/data/custom.py).
    read_file = staticmethod(custom.read_file)

    # === Keras ===

    def call(self, inputs, training=False):
        """Features (a dict with "input_ids", ...) or raw texts (what
        BertPreprocessor takes) -> float32 logits [B, num_labels]. Features
        of windows (fit and evaluate with head_tail or chunks) carry
        text_model.WINDOW_TEXT: each text's logits are its windows' combined, as
        run_classifier.py's evaluation combines them."""
        if not (isinstance(inputs, dict) and "input_ids" in inputs):
            return self._on_texts(
                inputs, lambda f: self.classifier(f, training=training)
            )
        if text_model.WINDOW_TEXT not in inputs:
            return self.classifier(inputs, training=training)
        inputs = dict(inputs)
        text = inputs.pop(text_model.WINDOW_TEXT)
        logits = self.classifier(inputs, training=training)
        return base.combine_windows(
            logits, text, tf.reduce_max(text) + 1, self.long_inputs
        )

    def compile(
        self,
        optimizer="auto",
        loss="auto",
        metrics="auto",
        learning_rate=DEFAULT_LEARNING_RATE,
        warmup_proportion=DEFAULT_WARMUP_PROPORTION,
        jit_compile=False,
        **kwargs,
    ):
        """Keras's compile with run_classifier's defaults.

        Args:
          optimizer: "auto": the original's optimizer
            (`optimization.create_optimizer`) with `learning_rate`,
            warmup over `warmup_proportion` of the steps the first `fit`
            runs and linear decay to 0 at its end; or any Keras optimizer.
          loss: "auto": the task kind's (`ClassifierLoss`:
            softmax cross-entropy of the logits, the squared error for
            regression, sigmoid cross-entropies for multi-label).
          metrics: "auto": accuracy of the kind's decisions (none for
            regression).
          jit_compile: XLA for the train step; off by default (the
            original's optimizer step is not compiled by XLA).
          **kwargs: the rest of keras.Model.compile's arguments.
        """
        if jit_compile and self.long_inputs.windowed:
            raise ValueError(
                "jit_compile=True cannot train on long_inputs='chunks': the "
                "windows per batch vary; compile with jit_compile=False"
            )
        if _is_auto(optimizer):
            optimizer = optimization.create_optimizer(
                learning_rate, warmup_proportion=warmup_proportion
            )
        if _is_auto(loss):
            loss = ClassifierLoss(self.kind.name)
        if _is_auto(metrics):
            metrics = self.kind.keras_metrics()
        super().compile(
            optimizer=optimizer,
            loss=loss,
            metrics=metrics,
            jit_compile=jit_compile,
            **kwargs,
        )

    def fit(
        self,
        x=None,
        y=None,
        batch_size=None,
        epochs=1,
        steps_per_epoch=None,
        validation_data=None,
        validation_batch_size=None,
        shuffle=True,
        seed=None,
        **kwargs,
    ):
        """Trains on raw texts and labels.

        Args:
          x: texts: a list / array / Tensor of strings, a tuple (text_a,
            text_b) of two of them, or a dict with "text_a" and "text_b";
            or a tf.data.Dataset of batched (texts, labels), used as it is
            (its order, its batches).
          y: labels, int class ids (floats for regression).
          batch_size: int (default 32, run_classifier's).
          epochs: int.
          steps_per_epoch: int (default: the whole batches of x).
          validation_data: (texts, labels) or a dataset, as x.
          validation_batch_size: int (default batch_size).
          shuffle: bool, the original's order (repeat, shuffle buffer of
            100); False: the given order, repeated.
          seed: int, the shuffle seed (run_classifier.py's --random_seed);
            None: TensorFlow's global seed decides.
          **kwargs: the rest of keras.Model.fit's arguments (callbacks,
            verbose, initial_epoch, ...).

        Returns:
          The keras History.
        """
        self._check_windows_backend("fit")
        batch_size = text_model.batch_size_of(batch_size)
        for name in ("sample_weight", "validation_split", "class_weight"):
            if kwargs.get(name) is not None:
                raise ValueError(
                    f"fit takes no {name} (texts become features in a "
                    "dataset of their own): give validation_data for a "
                    "validation set"
                )
        if isinstance(x, tf.data.Dataset):
            if y is not None:
                raise ValueError(
                    "With a dataset x, labels come from it: y=None"
                )
            spec = x.element_spec
            if not isinstance(spec, tuple) or len(spec) != 2:
                raise ValueError(
                    "fit's dataset gives batches of (texts, labels)"
                )
            texts = spec[0]
        else:
            texts = x
        # What export_for_serving serves by default.
        self._fit_on_pairs = (
            preprocessing.split_texts(texts, convert=False)[1] is not None
        )
        if isinstance(x, tf.data.Dataset):
            text_model.check_batched(x, "(texts, labels)")
            dataset = x.map(
                input_pipeline.as_written(self._preprocess_xy), tf.data.AUTOTUNE
            )
        else:
            texts, labels = self._examples(x, y)
            num_examples = len(labels)
            if steps_per_epoch is None:
                steps_per_epoch = num_examples // batch_size
                if not steps_per_epoch:
                    raise ValueError(
                        f"{num_examples} examples are fewer than one batch "
                        f"of {batch_size}: lower batch_size"
                    )
            dataset = tf.data.Dataset.from_tensor_slices((texts, labels))
            if shuffle:
                dataset = input_pipeline.repeat_and_shuffle(dataset, seed)
            else:
                dataset = dataset.repeat()
            dataset = dataset.batch(batch_size, drop_remainder=True)
            dataset = dataset.map(
                input_pipeline.as_written(self._preprocess_xy), tf.data.AUTOTUNE
            )
        self._schedule_from_fit(epochs, steps_per_epoch, dataset)
        if validation_data is not None:
            validation_data = self._eval_dataset(
                validation_data, validation_batch_size or batch_size
            )
        return super().fit(
            input_pipeline.without_autotuning(
                dataset.prefetch(tf.data.AUTOTUNE)
            ),
            epochs=epochs,
            steps_per_epoch=steps_per_epoch,
            validation_data=validation_data,
            # The order is the dataset's (shuffled above).
            shuffle=False,
            **kwargs,
        )

    def evaluate(self, x=None, y=None, batch_size=None, **kwargs):
        """Keras's evaluate on raw texts and labels (or a dataset of
        batched (texts, labels)); batch_size default 32."""
        if kwargs.get("_use_cached_eval_dataset"):
            # fit's validation: Keras reuses the dataset fit gave it,
            # already preprocessed.
            return super().evaluate(x, y, batch_size=batch_size, **kwargs)
        self._check_windows_backend("evaluate")
        if isinstance(x, tf.data.Dataset) and y is not None:
            raise ValueError("With a dataset x, labels come from it: y=None")
        dataset = self._eval_dataset(
            x if y is None else (x, y), text_model.batch_size_of(batch_size)
        )
        return super().evaluate(dataset, **kwargs)

    def predict(self, x, batch_size=None, verbose="auto", **kwargs):
        """The logits [N, num_labels] of raw texts (as `fit`'s x, or a
        dataset of batched texts), in input order; batch_size default 32.

        The texts become the scripts' features (the Python tokenizer,
        windowed as long_inputs says) and run through the scripts'
        predictor (modeling/training/predictor.py): with dynamic_padding,
        batches of similar length, each cut to its longest row (the same
        values up to float32 rounding, less work on texts of mixed
        lengths); without, fixed batches in input order (TPUs).

        Args:
          verbose: accepted for Keras's signature; the predictor's progress
            lines go to the absl log at INFO.
        """
        if kwargs:
            raise TypeError(
                f"predict() takes x, batch_size and verbose, not "
                f"{sorted(kwargs)}"
            )
        del verbose  # Progress goes to the absl log (INFO).
        text_a, text_b = text_model.python_texts(x)
        if not text_a:
            return np.zeros((0, self.classifier.num_labels), np.float32)
        outputs, _ = self._predict_texts(
            text_a,
            text_b,
            text_model.batch_size_of(batch_size),
            what="Predicting",
            unit="texts",
        )
        return outputs["logits"]

    def predict_labels(self, x, batch_size=None):
        """What the model predicts for raw texts, decided as run_classifier
        and the serving export decide (the task kind's rule): class ids
        [N], scores [N], or a multi-label model's 0/1 [N, num_labels] at
        its threshold."""
        return np.asarray(self.kind.decide(self.predict(x, batch_size)))

    _INNER = "classifier"

    def get_config(self):
        return {**super().get_config(), **self.kind.to_json()}

    # === The original's formats ===

    def save_checkpoint(
        self, directory, keep_checkpoint_max=5, label_list=None
    ):
        """Writes `directory/model.ckpt-<step>` in the original's format.

        The weights under their original names and, with the original's
        optimizer, `<name>/adam_m`, `<name>/adam_v` and `global_step`, as
        run_classifier.py writes them (training.checkpoint_manager), plus
        bert_config.json and vocab.txt, so the folder is what
        `run_classifier.py --output_dir` (or --init_checkpoint, and
        `from_checkpoint`) reads. As a run_classifier output_dir, it also
        records the long-input strategy (long_inputs.json) and, given
        `label_list` (the class names in id order), the task
        (labels.json: `--task_name=custom` predicts with it, and with a
        multi-label model's threshold).

        Returns:
          str, the checkpoint prefix.

        Raises:
          FileExistsError, ConfigMismatchError: the folder holds another
            model's or another training's files (nothing is written).
        """
        if label_list is not None:
            labels = [str(x) for x in label_list]
            if len(labels) != self.classifier.num_labels:
                raise ValueError(
                    f"label_list has {len(labels)} labels, the model "
                    f"{self.classifier.num_labels}"
                )
            spec = custom.TaskSpec(
                labels=labels,
                **{"multi_label_threshold": None, **self.kind.to_json()},
            )
        prefix = checkpoint_manager.save_release_folder(
            directory,
            self.classifier,
            self.optimizer,
            self.preprocessor.vocabulary,
            keep_checkpoint_max,
        )
        self.long_inputs.save(directory)
        if label_list is not None:
            spec.write(os.path.join(directory, custom.LABELS_FILE))
        return prefix

    def export_for_serving(self, export_dir, has_text_b=None, label_list=None):
        """Writes run_classifier.py's serving SavedModel (--export_dir):
        `serving_default` takes raw `text_a` (and `text_b`) strings and
        returns "probabilities" and "logits" (a regression: "score").

        Args:
          export_dir: str, replaced atomically.
          has_text_b: bool, whether the signature takes sentence pairs;
            None: as the texts this object's last `fit` trained on (a
            model trained on pairs served single texts), single texts if
            it did not fit.
          label_list: the class names in id order (recorded in
            assets.extra/bert_export.json), or None.
        """
        self._check_export_backend()
        if has_text_b is None:
            has_text_b = bool(getattr(self, "_fit_on_pairs", False))
        return classifier_export.export_classifier(
            self.classifier,
            self.preprocessor.text,
            export_dir,
            kind=self.kind,
            has_text_b=has_text_b,
            label_list=label_list,
            max_seq_length=self.preprocessor.sequence_length,
            long_inputs=self.long_inputs,
        )

    # === Input pipelines ===

    def _preprocess_xy(self, texts, labels):
        return self._preprocess(texts, windowed=True), labels

    def _eval_dataset(self, data, batch_size):
        """Batches of (features, labels) in order, the last one partial."""
        if isinstance(data, tf.data.Dataset):
            text_model.check_batched(data, "(texts, labels)")
            dataset = data
        else:
            if not (isinstance(data, (tuple, list)) and len(data) == 2):
                raise ValueError(
                    "Evaluation data is (texts, labels) or a dataset of "
                    "batched (texts, labels)"
                )
            texts, labels = self._examples(*data)
            dataset = tf.data.Dataset.from_tensor_slices((texts, labels))
            dataset = dataset.batch(batch_size)
        dataset = dataset.map(
            input_pipeline.as_written(self._preprocess_xy), tf.data.AUTOTUNE
        )
        return input_pipeline.without_autotuning(
            dataset.prefetch(tf.data.AUTOTUNE)
        )

    def _examples(self, x, y):
        """(texts, labels) checked: one label per text, each what the task
        kind's loss takes (a class id below num_labels; a finite score; a
        multi-label row of num_labels 0/1 values). An id out of range had a
        zero loss, a 2.7 was taken as class 2.

        Raises:
          ValueError: naming the first bad label's index and value.
        """
        if y is None:
            raise ValueError(
                "Labels are missing: fit/evaluate(x=texts, y=labels)"
            )
        texts = text_model.texts(x)
        labels = np.asarray(y)
        if labels.dtype.kind not in "biuf" or labels.ndim > 2:
            raise ValueError(
                f"Labels must be class ids (ints; floats for regression), "
                f"got {labels.dtype} values such as "
                f"{labels.reshape(-1)[:3].tolist()}: map label names to ids, "
                "e.g. with label_list.index"
            )
        first = texts[0] if isinstance(texts, tuple) else texts
        if len(first) != len(labels):
            raise ValueError(
                f"{len(first)} texts but {len(labels)} labels: one label per "
                "text"
            )
        n = self.classifier.num_labels
        name = self.kind.name
        if name == task_kinds.MULTI_LABEL:
            if labels.ndim != 2 or labels.shape[1] != n:
                raise ValueError(
                    f"A multi-label model's labels are rows of {n} 0/1 "
                    f"values, got shape {labels.shape}"
                )
            bad = ~np.isin(labels, (0, 1)).all(axis=1)
            want = "0 or 1 values"
        else:
            if labels.ndim == 2 and labels.shape[1] == 1:
                labels = labels[:, 0]
            if labels.ndim != 1:
                raise ValueError(
                    f"Labels are one per text (shape [N]), got shape "
                    f"{labels.shape}"
                )
            if name == task_kinds.REGRESSION:
                bad = ~np.isfinite(labels)
                want = "a finite score"
            else:
                bad = (
                    (labels != np.round(labels)) | (labels < 0) | (labels >= n)
                )
                want = f"a class id 0..{n - 1}"
        if bad.any():
            i = int(np.argmax(bad))
            raise ValueError(f"Label {i} is {labels[i].tolist()!r}, not {want}")
        return texts, labels
