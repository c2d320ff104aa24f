"""The base of the Keras API on raw text (`TextModel`): a task model behind
a `BertPreprocessor`, batches cut to their longest row, the long-input
strategy, the one predictor, the Keras config; and the checks that turn
what a user passes (lists, arrays, (text_a, text_b) pairs) into texts.
`text_classifier.BertTextClassifier` and `text_embedder.BertTextEmbedder`
are its two models."""

import keras
import numpy as np
import tensorflow as tf

from modeling import models
from modeling import preprocessing
from modeling.data import input_pipeline
from modeling.data import long_inputs as long_inputs_lib
from modeling.training import optimization
from modeling.training import predictor

DEFAULT_BATCH_SIZE = 32
# The feature naming each window's text (fit and evaluate with head_tail or
# chunks): BertTextClassifier.call combines a text's windows.
WINDOW_TEXT = "window_text"


class TextModel(models._OptimizerBuiltFirst):
    """The base of the Keras API on raw text: what BertTextClassifier
    (text_classifier.py) and BertTextEmbedder (text_embedder.py) share: a task model
    (`_INNER` names its attribute) behind a BertPreprocessor, batches cut
    to their longest row, the long-input strategy, the one predictor, and
    their Keras config."""

    _INNER = None

    def _set_up(self, preprocessor, dynamic_padding, long_inputs):
        self.preprocessor = preprocessor
        self.dynamic_padding = bool(dynamic_padding)
        self.long_inputs = long_inputs_lib.as_long_inputs(long_inputs)
        # Raw texts (lists of str too) reach `call` as they are.
        self._convert_input_args = False
        self._allow_non_tensor_positional_args = True

    def compile_from_config(self, config):
        """As Keras's (which skips a custom compile): the saved optimizer,
        loss and metrics go to `compile`, which takes them as they are, and
        the optimizer is built so that load_model restores its slots and
        step."""
        config = keras.saving.deserialize_keras_object(config)
        self.compile(**config)
        self.optimizer.build(self.trainable_variables)

    def get_config(self):
        return {
            "name": self.name,
            self._INNER: keras.saving.serialize_keras_object(
                getattr(self, self._INNER)
            ),
            "preprocessor": keras.saving.serialize_keras_object(
                self.preprocessor
            ),
            "dynamic_padding": self.dynamic_padding,
            "long_inputs": self.long_inputs.to_json(),
            "dtype_policy": self.dtype_policy.name,
        }

    @classmethod
    def from_config(cls, config):
        config = dict(config)
        for key in (cls._INNER, "preprocessor"):
            config[key] = keras.saving.deserialize_keras_object(config[key])
        if "long_inputs" in config:
            config["long_inputs"] = long_inputs_lib.LongInputs.from_json(
                config["long_inputs"]
            )
        # compile wraps the optimizer in a loss scale under mixed_float16.
        with models.saved_policy(config.pop("dtype_policy", None)):
            return cls(**config)

    def _on_texts(self, texts, run, normalize=False):
        """run(features) of raw texts (what BertPreprocessor takes): with
        long_inputs head_tail or chunks, of each text's windows, combined
        as predict and the serving export combine them (`normalize`: to
        unit length again, an embedder's)."""
        # head_tail too: one window per text, but not its first tokens.
        if self.long_inputs.strategy == long_inputs_lib.TRUNCATE:
            return run(self.preprocessor(texts))
        from modeling.export import base  # The windows' combination.

        text_a, text_b = preprocessing.split_texts(texts)
        features, window_text = self.preprocessor.text.windows(
            self.long_inputs, text_a, text_b
        )
        outputs = base.combine_windows(
            tf.cast(run(features), tf.float32),
            window_text,
            tf.size(text_a, out_type=window_text.dtype),
            self.long_inputs,
        )
        if normalize:
            norms = tf.norm(outputs, axis=-1, keepdims=True)
            outputs = outputs / tf.maximum(norms, 1e-12)
        return outputs

    def _predictor(self, batch_size):
        """The one predictor over the task model: length-sorted batches
        with dynamic_padding, fixed shapes without (TPUs)."""
        backend = predictor.make_backend(
            "tensorflow",  # The model's own Keras backend (JAX: jax.jit).
            getattr(self, self._INNER),
            getattr(self, "distribute_strategy", None),
        )
        return predictor.Predictor(
            backend,
            batch_size,
            length_sorted=self.dynamic_padding,
            multiple=input_pipeline.predict_multiple(
                self.preprocessor.sequence_length, self.jit_compile
            ),
        )

    def _predict_texts(self, text_a, text_b, batch_size, **outputs):
        """The task model's outputs for lists of texts (pairs with text_b):
        their features made in Python as the scripts make them (the same
        ids as the preprocessor's), windowed as long_inputs says, through
        the one predictor (predictor.Predictor.texts)."""
        return self._predictor(batch_size).texts(
            self.preprocessor.full_tokenizer(),
            self.preprocessor.sequence_length,
            text_a,
            text_b,
            long_inputs=self.long_inputs,
            **outputs,
        )

    def _preprocess(self, texts, windowed=False):
        """Texts -> features, cut to the batch's longest row with
        dynamic_padding (in a tf.data map). `windowed`: with head_tail or
        chunks, the rows are the texts' windows (in the graph, as the
        serving export makes them) and WINDOW_TEXT gives each one's text."""
        if windowed and self.long_inputs.strategy != long_inputs_lib.TRUNCATE:
            text_a, text_b = preprocessing.split_texts(texts)
            features, text = self.preprocessor.text.windows(
                self.long_inputs, text_a, text_b
            )
            features[WINDOW_TEXT] = tf.cast(text, tf.int32)
        else:
            features = self.preprocessor(texts)
        if self.dynamic_padding:
            multiple = input_pipeline.padding_multiple(
                self.preprocessor.sequence_length, bool(self.jit_compile)
            )
            features = input_pipeline.trim_padding(features, multiple)
        return features

    def _check_export_backend(self):
        """Refuses export_for_serving off the TensorFlow backend (its
        SavedModel is traced by TensorFlow; JAX's traceback said nothing
        of it), as the scripts refuse --export_dir there."""
        if keras.backend.backend() != "tensorflow":
            raise ValueError(
                "export_for_serving writes a TensorFlow SavedModel: save "
                "the model here (model.save('model.keras')), then load it "
                "with keras.models.load_model and export in a process run "
                f"with KERAS_BACKEND=tensorflow (this one runs "
                f"{keras.backend.backend()})"
            )

    def _check_windows_backend(self, what):
        """Refuses fit / evaluate on windows (head_tail, chunks) off the
        TensorFlow backend: their logits are combined per text by
        TensorFlow's segment ops, which JAX's traced arrays cannot enter
        (Keras said only that it could not build the model). predict and
        calling the model on texts combine in numpy, on either backend."""
        if (
            keras.backend.backend() != "tensorflow"
            and self.long_inputs.strategy != long_inputs_lib.TRUNCATE
        ):
            raise ValueError(
                f"{what} with long_inputs={self.long_inputs.strategy!r} "
                "runs on the TensorFlow backend only (this process runs "
                f"{keras.backend.backend()}); predict works on both. Or "
                "train with run_classifier.py --backend=jax "
                f"--long_inputs={self.long_inputs.strategy}"
            )

    def _schedule_from_fit(self, epochs, steps_per_epoch, dataset):
        """Gives the default optimizer the steps this fit runs (warmup,
        then decay to 0 at the end), before its first update."""
        optimizer = self.optimizer
        if isinstance(optimizer, keras.optimizers.LossScaleOptimizer):
            optimizer = optimizer.inner_optimizer
        if not isinstance(optimizer, optimization.AdamWeightDecayOptimizer):
            return
        if optimizer.num_train_steps is not None:
            done = int(optimizer.iterations.numpy())
            if done >= optimizer.num_train_steps:
                # Its linear decay has reached 0: every step would be a
                # no-op update.
                raise ValueError(
                    f"The optimizer's schedule ended at step "
                    f"{optimizer.num_train_steps} (this model is at step "
                    f"{done}): its learning rate is 0. compile() again for "
                    "a new schedule, or give an optimizer with "
                    "num_train_steps"
                )
            return
        if steps_per_epoch is None:
            steps_per_epoch = int(dataset.cardinality())
            if steps_per_epoch < 0:
                raise ValueError(
                    "The dataset's length is unknown (or infinite): give "
                    "steps_per_epoch, or an optimizer with num_train_steps"
                )
        optimizer.set_num_train_steps(epochs * steps_per_epoch)
        # A train step traced before would keep the old schedule.
        self.train_function = None


def batch_size_of(batch_size):
    """A batch_size argument: None is DEFAULT_BATCH_SIZE (run_classifier's
    32); below 1 is refused."""
    if batch_size is None:
        return DEFAULT_BATCH_SIZE
    if int(batch_size) < 1:
        raise ValueError(f"batch_size={batch_size}: it must be 1 or more")
    return int(batch_size)


def texts(x):
    """The texts as what from_tensor_slices and BertPreprocessor take:
    one array, or a tuple of two (pairs)."""
    if isinstance(x, dict):
        x = preprocessing.split_texts(x, convert=False)
        if x[1] is None:
            x = x[0]
    if isinstance(x, tuple):
        if len(x) != 2:
            raise ValueError(
                f"Texts are (text_a, text_b) pairs or single texts, got a "
                f"tuple of {len(x)}"
            )
        a, b = (string_array(t) for t in x)
        if len(a) != len(b):
            raise ValueError(
                f"text_a has {len(a)} texts but text_b has {len(b)}"
            )
        return a, b
    return string_array(x)


def python_texts(x):
    """What predict takes (as `texts`, or a tf.data.Dataset of batched
    texts, (text_a, text_b) pairs or dicts of them, with or without the
    labels that fit takes) -> (text_a, text_b or None) as lists of str."""
    if isinstance(x, tf.data.Dataset):
        check_batched(x)
        batches = [
            _without_labels(b)
            for b in input_pipeline.without_autotuning(x).as_numpy_iterator()
        ]
        if batches and isinstance(batches[0], tuple):
            x = tuple(np.concatenate(side) for side in zip(*batches))
        elif batches and isinstance(batches[0], dict):
            x = {k: np.concatenate([b[k] for b in batches]) for k in batches[0]}
        else:
            x = np.concatenate(batches) if batches else []
    x = texts(x)
    text_a, text_b = x if isinstance(x, tuple) else (x, None)
    return _str_list(text_a), None if text_b is None else _str_list(text_b)


def _without_labels(batch):
    """A dataset batch's texts, as Keras's predict unpacks (x, y) and
    (x, y, sample_weight): a 2-tuple is (text_a, text_b) only when its
    second part is texts too (labels are numbers)."""
    if not isinstance(batch, tuple):
        return batch
    if len(batch) == 1 or len(batch) == 3:
        return batch[0]
    second = batch[1]
    if (
        isinstance(second, (tuple, dict))
        or np.asarray(second).dtype.kind not in "OSU"
    ):
        return batch[0]
    return batch


def check_batched(dataset, what="texts"):
    """Refuses a dataset of single examples where batches go (one line, not
    a shape error deep in the model)."""
    spec = dataset.element_spec
    while isinstance(spec, (tuple, list)) and spec:
        spec = spec[0]
    if isinstance(spec, dict):
        spec = next(iter(spec.values()), None)
    shape = getattr(spec, "shape", None)
    if shape is not None and shape.rank == 0:
        raise ValueError(
            f"The dataset gives single {what}, not batches: "
            "dataset.batch(batch_size) first"
        )


def decoded(texts):
    """Texts (a string tensor, an array or a list) with UTF-8 bytes decoded
    to str; anything else as it is."""
    if isinstance(texts, tf.Tensor):
        texts = texts.numpy()
    return [t.decode("utf-8") if isinstance(t, bytes) else t for t in texts]


def _str_list(array):
    return [str(t) for t in decoded(array)]


def string_array(texts):
    """Texts as one-dimensional strings (a string Tensor as it is).

    Raises:
      ValueError: another shape (one string: its bytes would be texts), or
        an element that is not a string (a missing value: None or NaN would
        be predicted as the text "None" or "nan"), named by its index.
    """
    if isinstance(texts, tf.Tensor):
        shape = texts.shape
    else:
        texts = np.asarray(texts, dtype=object)
        shape = texts.shape
    if len(shape) != 1:
        raise ValueError(
            f"Texts must be one-dimensional (one string per example), got "
            f"shape {tuple(shape)}"
        )
    if isinstance(texts, tf.Tensor):
        if texts.dtype != tf.string:
            raise ValueError(
                f"Texts must be strings, got a {texts.dtype} Tensor"
            )
        return texts
    for i, text in enumerate(texts):
        if not isinstance(text, (str, bytes, np.str_, np.bytes_)):
            raise ValueError(
                f"Text {i} is {text!r} ({type(text).__name__}), not a string "
                "(a missing value? drop or fill it first)"
            )
    return texts
