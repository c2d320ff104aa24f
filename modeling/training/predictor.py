"""The one predictor: a model run over features in length-aware batches,
its outputs back in input order.

Every prediction path goes through `Predictor` (run_classifier's evaluation
and prediction, run_ner, run_multiple_choice, run_squad, extract_features,
BertTextClassifier.predict, the export tests and bench/prediction.py):

    backend = predictor.make_backend("tflite_int8", model)
    outputs = predictor.Predictor(backend, batch_size=32).gather(arrays)

Batching. Real inputs are mostly much shorter than max_seq_length (GLUE
pairs, NER sentences, queries), and a batch costs what its longest row
costs once it is cut to that row. So rows are numbered, sorted by length
within windows of `WINDOW_BATCHES` batches, batched in that order, each
batch cut to its longest row (rounded up to `multiple`), and the outputs
are put back in input order by the rows' numbers. A window bounds the
memory (a file of any length streams) and the reordering delay. Padded
positions only ever receive the -10000 attention bias, so a row's outputs
at its real positions are the same whatever its batch-mates, up to float32
rounding (another batch shape, another kernel blocking).

`length_sorted=False` gives fixed shapes instead: batches of
`batch_size` rows of full length in input order, the last one filled with
padding rows (dropped from the outputs). TPUs need it (one program per
shape), and so does whatever reads the padding positions' outputs (SQuAD's
n-best ranks every position of a window, as the original does).

Backends (one class each, `run(batches)` -> (features, outputs) per batch
as numpy): `TensorFlowBackend`, the model's compiled step under its
distribution strategy; `TFLiteBackend`, a TF Lite model (float32, or
dynamic-range int8) with XNNPACK on this host's CPU. This module is the one
place that compiles a predict step and the one that creates TF Lite
interpreters.

One module, over 500 lines: the one predictor and its three backends, which
share its batching contract.
"""

import contextlib
import contextvars
import hashlib
import itertools
import os
import warnings
import weakref

import numpy as np

from modeling import backend
from modeling import errors
from modeling import progress
from modeling.data import classifier_data
from modeling.data import feature_names
from modeling.data import long_inputs as long_inputs_lib
from modeling.training import run_config

# Each row's position in the input, added to its features.
ORDER = "example_order"
# Rows are sorted within windows of this many batches.
WINDOW_BATCHES = 64
# The features a model reads (a TF Lite model's inputs, in this order).
MODEL_FEATURES = feature_names.CLASSIFIER_SEQ_FEATURES
# --predict_runtime's values: what runs evaluation and prediction.
RUNTIMES = run_config.RUNTIMES


# === Backends ===


class TensorFlowBackend:
    """The model's compiled predict step, under `strategy` (the default
    one: this device).

    Args:
      model: a Keras model taking a feature dict.
      strategy: tf.distribute.Strategy (default: the current one).
      select: model outputs -> dict of named outputs (default: the model's
        dict, or {"logits": its tensor}; see models.named_outputs).
    """

    def __init__(self, model, strategy=None, select=None):
        import tensorflow as tf

        from modeling import models

        self.model = model
        self.strategy = strategy or tf.distribute.get_strategy()
        self._step = _compiled_step(model, self.strategy, select)
        self._single = tf.function(
            lambda f: models.named_outputs(model, f, select),
            autograph=False,
            reduce_retracing=True,
        )
        self._single_traced = False

    def __call__(self, features):
        """One batch (a dict of arrays) -> its outputs, numpy (no strategy
        splitting: one device)."""
        if not self._single_traced:
            _trace_for_any_shape(self._single, features)
            self._single_traced = True
        return _numpy(self._single(features))

    def run(self, batches, static_shapes=False):
        """Yields (features, outputs) of each batch, numpy.

        Args:
          batches: dicts of numpy arrays (the predictor's batches).
          static_shapes: every batch has the first one's shape (fixed
            batches: what TPUs compile for); else one program for any.
        """
        import tensorflow as tf

        from modeling.training import distribute

        if self.strategy.num_replicas_in_sync == 1 and not static_shapes:
            # One device: the numpy batches go to the compiled step as
            # they are. A tf.data pipeline per call (from_generator) costs
            # about 30 ms, most of a one-text request's time (embedding one
            # sentence with MiniLM: 40 ms through it).
            batches = iter(batches)
            first = next(batches, None)
            if first is None:
                return
            _trace_for_any_shape(self._step, first)
            for batch in itertools.chain([first], batches):
                features, outputs = self._step(batch)
                yield _numpy(features), _numpy(outputs)
            return
        batches = iter(batches)
        first = next(batches, None)
        if first is None:
            return
        signature = {
            k: tf.TensorSpec(
                v.shape if static_shapes else (None,) * v.ndim, v.dtype
            )
            for k, v in first.items()
        }
        dataset = tf.data.Dataset.from_generator(
            lambda: itertools.chain([first], batches),
            output_signature=signature,
        )
        dataset = distribute.distribute_dataset(
            self.strategy, _without_autotuning(dataset)
        )
        for batch in dataset:
            features, outputs = self._step(batch)
            yield _numpy(features), _numpy(outputs)


class JaxBackend:
    """The model's compiled predict step on Keras's JAX backend (what
    TensorFlowBackend is on TensorFlow): `jax.jit` over the forward pass,
    the weights passed in (not baked into the program), one program per
    batch shape. One device.

    Args:
      model, select: as TensorFlowBackend's.
    """

    def __init__(self, model, select=None):
        import jax
        import keras

        from modeling import models

        self.model = model
        # One program per model and batch shape, also across evaluations
        # (as _compiled_step: each evaluation compiled them all again).
        steps = _STEPS.setdefault(model, {})
        key = ("jax", select)
        if key not in steps:
            # A weak reference: a step holding the model would keep it (its
            # cache's key) alive for good.
            model_ref = weakref.ref(model)

            def predict(values, features):
                m = model_ref()
                mapping = list(zip(m.variables, values))
                with keras.StatelessScope(state_mapping=mapping):
                    return models.named_outputs(m, features, select)

            steps[key] = jax.jit(predict)
        self._step = steps[key]

    def __call__(self, features):
        """One batch (a dict of arrays) -> its outputs, numpy."""
        values = [v.value for v in self.model.variables]
        return _numpy(self._step(values, features))

    def run(self, batches, static_shapes=False):
        """Yields (features, outputs) of each batch, numpy (every shape
        compiles once: static_shapes changes nothing here)."""
        del static_shapes
        values = [v.value for v in self.model.variables]
        for batch in batches:
            yield batch, _numpy(self._step(values, batch))


def _trace_for_any_shape(function, batch):
    """Traces `function` (a tf.function) for batches like `batch` of any
    shape, once: its calls then use that trace. (reduce_retracing alone
    traces the first batch's shape, then again for any shape when a
    second length comes: the model traced twice.)"""
    import tensorflow as tf

    signature = {
        k: tf.TensorSpec(
            (None,) * np.ndim(v),
            tf.convert_to_tensor(np.asarray(v).reshape(-1)[:0]).dtype,
        )
        for k, v in batch.items()
    }
    function.get_concrete_function(signature)


# model -> {(strategy, select): compiled step}: one trace per model, also
# across evaluations (--eval_during_training evaluates the same model).
_STEPS = weakref.WeakKeyDictionary()


def _compiled_step(model, strategy, select):
    import tensorflow as tf

    from modeling import models

    steps = _STEPS.setdefault(model, {})
    key = (id(strategy), select)
    if key in steps:
        return steps[key]
    model_ref = weakref.ref(model)  # As JaxBackend's: the key may go.

    def replica_fn(features):
        return features, models.named_outputs(model_ref(), features, select)

    # No Python control flow inside: no AutoGraph. reduce_retracing:
    # length-sorted batches vary in length.
    @tf.function(autograph=False, reduce_retracing=True)
    def step(features):
        values = strategy.run(replica_fn, args=(features,))
        return tf.nest.map_structure(
            lambda t: strategy.gather(t, axis=0), values
        )

    steps[key] = step
    return step


class TFLiteBackend:
    """A TF Lite model run by the interpreter (XNNPACK kernels) on this
    host's CPU, its inputs resized to each batch's shape.

    Args:
      content: the flatbuffer bytes (modeling/export/tflite.py `convert`),
        or the path of a .tflite file (an export's model.tflite), which the
        interpreter memory-maps instead of holding a copy: BERT-base's
        float32 server peaks at 720 MB instead of 811 MB.
      output_names: {output name: its tensor's name in the model}
        (`convert`, or the export's bert_export.json "tflite" "outputs");
        a list (exports before those names were recorded): the names in
        the model's output order.
      num_threads: CPU threads (default: the machine's cores).
    """

    def __init__(
        self, content, output_names, num_threads=None, quantized=False
    ):
        self.content = content
        self.output_names = output_names
        self.quantized = quantized  # Recorded in an export's metadata.
        source = (
            {"model_content": content}
            if isinstance(content, bytes)
            else {"model_path": os.fspath(content)}
        )
        where = source.get("model_path", "The TF Lite model")
        if not isinstance(content, bytes) and not os.path.isfile(where):
            raise FileNotFoundError(
                f"{where} does not exist: no TF Lite model (export again "
                "with --predict_runtime=tflite or tflite_int8)"
            )
        try:
            with warnings.catch_warnings():
                # tf.lite.Interpreter's notice of its move to ai-edge-litert.
                warnings.simplefilter("ignore")
                self.interpreter = _interpreter_class()(
                    **source, num_threads=num_threads or os.cpu_count()
                )
        except (ValueError, RuntimeError) as e:
            # The runtime's "The model is not a valid Flatbuffer buffer".
            text = str(e).strip()
            reason = text.splitlines()[0] if text else type(e).__name__
            raise ValueError(
                f"{where}: not a TF Lite model, truncated or damaged? "
                f"({reason}); export it again"
            ) from None
        self.inputs = {
            d["name"]: d["index"] for d in self.interpreter.get_input_details()
        }
        missing = set(MODEL_FEATURES) - set(self.inputs)
        if missing:
            raise ValueError(f"The TF Lite model lacks inputs {missing}")
        details = self.interpreter.get_output_details()
        if isinstance(output_names, dict):
            by_name = {d["name"]: d["index"] for d in details}
            missing = sorted(set(output_names.values()) - set(by_name))
            if missing:
                raise ValueError(
                    f"The TF Lite model has no output tensor {missing[0]} "
                    f"(its outputs: {sorted(by_name)})"
                )
            self.outputs = {k: by_name[v] for k, v in output_names.items()}
        else:
            self.outputs = dict(
                zip(output_names, (d["index"] for d in details), strict=True)
            )
        self._shape = None

    @classmethod
    def of_model(cls, model, quantize=False, rank=2, num_threads=None):
        """The backend of `model` converted (export/tflite.py: float32, or
        dynamic-range int8 with `quantize`; rank 3 for multiple choice).
        Converted once per state of the weights: a run's evaluation and
        prediction share it; --eval_during_training converts at each
        evaluation."""
        from modeling.export import tflite

        key = (_fingerprint(model), quantize, rank, num_threads)
        cached = _TFLITE.get(model)
        if cached is not None and cached[0] == key:
            return cached[1]
        content, names = tflite.convert(model, quantize, rank)
        backend = cls(content, names, num_threads, quantized=quantize)
        _TFLITE[model] = (key, backend)
        return backend

    def __call__(self, features):
        """dict of int arrays (MODEL_FEATURES; others ignored) -> dict of
        float32 numpy outputs."""
        arrays = {k: np.asarray(features[k], np.int32) for k in MODEL_FEATURES}
        shape = arrays[MODEL_FEATURES[0]].shape
        if shape != self._shape:
            for name in MODEL_FEATURES:
                self.interpreter.resize_tensor_input(self.inputs[name], shape)
            self.interpreter.allocate_tensors()
            self._shape = shape
        for name, array in arrays.items():
            self.interpreter.set_tensor(self.inputs[name], array)
        self.interpreter.invoke()
        return {
            name: self.interpreter.get_tensor(index)
            for name, index in self.outputs.items()
        }

    def run(self, batches, static_shapes=False):
        """Yields (features, outputs) of each batch (dicts of numpy
        arrays), numpy; the interpreter is resized when a shape changes."""
        del static_shapes  # Resized as needed.
        for features in batches:
            yield features, self(features)


def refuse_one_string(texts, what="Texts"):
    """Raises ValueError for one string given where a list of texts goes
    (its characters would be predicted, one row each): the one check of
    the Keras models and the LiteRT servers."""
    if isinstance(texts, (str, bytes)):
        raise ValueError(f"{what} are a list of strings, not one string")


def _interpreter_class():
    """The standalone LiteRT runtime's interpreter (ai-edge-litert: no
    TensorFlow needed), else TensorFlow's own tf.lite one (deprecated in
    its favour; the same flatbuffers, the same API)."""
    try:
        from ai_edge_litert.interpreter import Interpreter
    except ImportError:
        try:
            import tensorflow as tf
        except ImportError:
            raise errors.UserError(
                "model.tflite needs the LiteRT runtime: pip install "
                "ai-edge-litert (or TensorFlow)"
            ) from None
        return tf.lite.Interpreter
    return Interpreter


# model -> (key of its weights and conversion, TFLiteBackend).
_TFLITE = weakref.WeakKeyDictionary()


def _fingerprint(model):
    """A digest of the model's weights (a run evaluates, trains on, then
    evaluates the same model object)."""
    digest = hashlib.blake2b(digest_size=16)
    for variable in model.weights:
        digest.update(np.ascontiguousarray(variable.numpy()).tobytes())
    return digest.hexdigest()


def make_backend(runtime, model, strategy=None, rank=2, select=None):
    """The backend of a --predict_runtime value (RUNTIMES).

    Args:
      rank: of the features, for TF Lite: 2 ([B, T]), 3 for multiple choice.
      select: as TensorFlowBackend's (the compiled step on either Keras
        backend only: a TF Lite model has its outputs).
    """
    if runtime == "tensorflow":
        if backend.current() == "jax":
            return JaxBackend(model, select)
        return TensorFlowBackend(model, strategy, select)
    if select is not None:
        raise ValueError(f"--predict_runtime={runtime} cannot select outputs")
    if runtime in ("tflite", "tflite_int8"):
        return TFLiteBackend.of_model(
            model, quantize=runtime == "tflite_int8", rank=rank
        )
    raise ValueError(
        f"Unknown predict runtime {runtime!r}; expected {RUNTIMES}"
    )


def _numpy(values):
    return {k: np.asarray(v) for k, v in values.items()}


# === The predictor ===

# What `between_batches` installed, or None.
_BETWEEN_BATCHES = contextvars.ContextVar("between_batches", default=None)


@contextlib.contextmanager
def between_batches(check):
    """Calls `check()` after each batch of every prediction in the block;
    what it raises ends the prediction. The Trainer's, around
    --eval_during_training's evaluations: after SIGTERM its handler only
    sets a flag, and an evaluation (a SQuAD dev set: minutes on a CPU)
    would run to its end before the run stops."""
    token = _BETWEEN_BATCHES.set(check)
    try:
        yield
    finally:
        _BETWEEN_BATCHES.reset(token)


class Predictor:
    """Runs a backend over rows of features (see the module doc).

    Args:
      backend: TensorFlowBackend or TFLiteBackend (or any object with
        `run(batches, static_shapes)` yielding numpy (features, outputs)
        per batch).
      batch_size: rows per batch.
      length_sorted: length-sorted batches cut to their longest row; False:
        fixed shapes in input order (TPUs; outputs at padding positions).
      multiple: batch lengths are rounded up to a multiple of this. 1 (the
        default): each batch at its longest row, fastest on CPU. A new
        batch shape costs the TF Lite interpreter a re-plan (about a third
        of a batch's time at 32 x 64 on MiniLM), but rounding to 8 pads
        more than that saves: on the 2-vCPU development VM (2026-11-25),
        MiniLM through TF Lite float32 over SST-2 dev took 1.35 s with 1
        against 1.51 s with 8 (26 shape changes in 28 batches against 6),
        CoNLL testb 4.28 s against 5.0 s; TensorFlow's step was no slower.
        With XLA, input_pipeline.padding_multiple: a few lengths only.
      window_batches: rows are sorted within windows of this many batches.
    """

    def __init__(
        self,
        backend,
        batch_size,
        length_sorted=True,
        multiple=1,
        window_batches=WINDOW_BATCHES,
    ):
        if batch_size < 1:
            raise ValueError(
                f"The batch size must be at least 1, got {batch_size}"
            )
        self.backend = backend
        self.batch_size = batch_size
        self.length_sorted = length_sorted
        self.multiple = multiple
        self.window_batches = window_batches

    def batches(
        self,
        rows,
        total=None,
        what="Predicting",
        unit="examples",
        seq_features=MODEL_FEATURES,
    ):
        """Yields (order, features, outputs) per batch, in batch order.

        Args:
          rows: a tf.data.Dataset of single rows (dicts with "input_mask"
            [T] or [C, T] and the other features), or a dict of numpy
            arrays with one row per index of their first axis.
          total: the number of rows, if known (progress lines and ETA).
          what, unit: the progress lines' words.
          seq_features: the features cut with the mask (last axis T); the
            others pass through as they are.

        Yields:
          order: int64 [B], each row's position in the input; features and
          outputs: dicts of numpy arrays [B, ...] (length-sorted: [..., T']
          for the sequence features, outputs per position [B, T', ...]).
        """
        windows = numbered_windows(rows, self.batch_size * self.window_batches)
        if self.length_sorted:
            batches = sorted_batches(
                windows, self.batch_size, self.multiple, seq_features
            )
        else:
            batches = fixed_batches(windows, self.batch_size)
        counter = progress.Progress(what, total=total, unit=unit)
        check = _BETWEEN_BATCHES.get()
        run = self.backend.run(batches, static_shapes=not self.length_sorted)
        for features, outputs in run:
            if check is not None:
                check()
            order = features.pop(ORDER)
            real = order >= 0
            if not real.all():  # Padding rows of a fixed-shape batch.
                order = order[real]
                features = {k: v[real] for k, v in features.items()}
                outputs = {k: v[real] for k, v in outputs.items()}
            counter.add(len(order))
            yield order, features, outputs
        counter.finish()

    def texts(
        self,
        tokenizer,
        max_seq_length,
        text_a,
        text_b=None,
        long_inputs=None,
        combine=("logits",),
        normalize=False,
        **progress_args,
    ):
        """A model's outputs for texts (or pairs) in input order, one row per
        text: their features (classifier_data.text_arrays, windowed as
        `long_inputs` says) through this predictor, the windows' `combine`
        outputs combined per text (`normalize`: to unit length, an
        embedder's vectors). The one path of the Python-tokenized
        predictions (run_embeddings, the TF-free servers, the Keras classes
        with long inputs).

        Returns:
          (dict of numpy outputs [N, ...], the number of texts cut, also
          logged).
        """
        long_inputs = long_inputs or long_inputs_lib.LongInputs()
        arrays, truncated = classifier_data.text_arrays(
            text_a, max_seq_length, tokenizer, text_b, long_inputs=long_inputs
        )
        classifier_data.log_truncated(
            truncated, len(text_a), max_seq_length, "texts"
        )
        _, outputs = self.gather(
            {k: arrays[k] for k in feature_names.CLASSIFIER_SEQ_FEATURES},
            **progress_args,
        )
        if long_inputs.windowed and outputs:
            index = arrays[feature_names.EXAMPLE_INDEX]
            outputs = {
                name: long_inputs.per_example(index, outputs[name], normalize)[
                    1
                ]
                for name in combine
            }
        return outputs, truncated

    def embed(
        self,
        tokenizer,
        max_seq_length,
        texts,
        dim,
        long_inputs=None,
        normalize=True,
        what="Embedding",
    ):
        """float32 [N, dim] vectors of an embedder's texts, in input order:
        `texts` (windowed as `long_inputs` says, a text's windows' vectors
        combined, `normalize`d to unit length) through this predictor; the
        number of texts cut is logged. The one place texts become vectors:
        run_embeddings, the Keras BertTextEmbedder and the LiteRT server
        call it with their own backend."""
        texts = list(texts)
        if not texts:
            return np.zeros((0, dim), np.float32)
        outputs, _ = self.texts(
            tokenizer,
            max_seq_length,
            texts,
            long_inputs=long_inputs,
            combine=("embeddings",),
            normalize=normalize,
            what=what,
            unit="texts",
        )
        return np.asarray(outputs["embeddings"], np.float32)

    def gather(
        self,
        rows,
        width=None,
        seq_outputs=(),
        fill=0.0,
        seq_features=MODEL_FEATURES,
        **progress_args,
    ):
        """Every row's features and outputs, in input order.

        Args:
          rows, seq_features, **progress_args: as `batches`.
          width: the sequence length to pad cut batches back to (default:
            the longest batch's).
          seq_outputs: the outputs with a sequence axis (axis 1: a tagger's
            [B, T', L], a span labeler's [B, T']), padded with `fill`.
          fill: the outputs' value at the positions of the padding.

        Returns:
          (features, outputs): dicts of numpy arrays [N, ...]; empty dicts
          when there is no row.
        """
        parts = list(
            self.batches(rows, seq_features=seq_features, **progress_args)
        )
        if not parts:
            return {}, {}
        if width is None:
            width = max(f["input_mask"].shape[-1] for _, f, _ in parts)
        order = np.concatenate([o for o, _, _ in parts])

        def joined(index, names, axis, value):
            keys = parts[0][index].keys()
            return {
                k: unsort(
                    order,
                    np.concatenate(
                        [
                            pad_to(p[index][k], width, axis, value)
                            if k in names
                            else p[index][k]
                            for p in parts
                        ]
                    ),
                )
                for k in keys
            }

        return (
            joined(1, seq_features, -1, 0),
            joined(2, seq_outputs, 1, fill),
        )

    def rows(self, rows, **batches_args):
        """Yields (features, outputs) of each row, dicts of numpy arrays, in
        input order, holding at most a window's rows (a file of any length
        streams)."""

        def numbered():
            for order, features, outputs in self.batches(rows, **batches_args):
                for i, place in enumerate(order):
                    yield (
                        place,
                        (
                            {k: v[i] for k, v in features.items()},
                            {k: v[i] for k, v in outputs.items()},
                        ),
                    )

        return in_input_order(numbered())


# === Batching ===
#
# In numpy, between the input and the backend: the same batches whatever
# runs them, and a TF Lite (LiteRT) backend that needs no TensorFlow. A
# tf.data input is read a window at a time.


def numbered_windows(rows, window):
    """The rows as dicts of numpy arrays of at most `window` rows each, in
    input order, each row numbered (ORDER) by its position in the input.

    Args:
      rows: a dict of numpy arrays (a row per index of their first axis),
        or a tf.data.Dataset of single rows.
    """
    if isinstance(rows, dict):
        arrays = {k: np.asarray(v) for k, v in rows.items()}
        total = len(next(iter(arrays.values()))) if arrays else 0
        chunks = (
            {k: v[start : start + window] for k, v in arrays.items()}
            for start in range(0, total, window)
        )
    else:
        chunks = _without_autotuning(rows.batch(window)).as_numpy_iterator()
    start = 0
    for chunk in chunks:
        count = len(next(iter(chunk.values())))
        chunk[ORDER] = np.arange(start, start + count, dtype=np.int64)
        start += count
        yield chunk


def row_lengths(mask):
    """The number of real positions of each row of a batch: the sum of
    `input_mask` over its last axis (max over choices for [B, C, T])."""
    mask = np.asarray(mask)
    lengths = mask.astype(np.int64).sum(axis=-1)
    if lengths.ndim == 1:
        return lengths
    return lengths.reshape(len(lengths), -1).max(axis=1, initial=0)


def cut_to_longest(features, multiple=8, seq_features=MODEL_FEATURES):
    """A batch's sequence features cut to its longest row, rounded up to
    `multiple`, never beyond their length and never below 1 position (the
    rule of input_pipeline.trim_padding, which does it in a graph)."""
    mask = features["input_mask"]
    longest = max(int(row_lengths(mask).max(initial=0)), 1)
    length = min(-(-longest // multiple) * multiple, mask.shape[-1])
    return {
        k: v[..., :length] if k in seq_features else v
        for k, v in features.items()
    }


def sorted_batches(
    windows, batch_size, multiple=8, seq_features=MODEL_FEATURES
):
    """Batches of similar-length rows, each cut to its longest row.

    Args:
      windows: numbered_windows' dicts.
      batch_size: rows per batch (a window's last one may be smaller).
      multiple: batch lengths are rounded up to a multiple of this.
      seq_features: the features cut with the mask (their last axis is T).

    Yields:
      Dicts of numpy arrays: the batches in length order within each
      window, the windows in input order.
    """
    for window in windows:
        order = np.argsort(row_lengths(window["input_mask"]), kind="stable")
        for start in range(0, len(order), batch_size):
            rows = order[start : start + batch_size]
            yield cut_to_longest(
                {k: v[rows] for k, v in window.items()},
                multiple,
                seq_features,
            )


def fixed_batches(windows, batch_size):
    """Batches of `batch_size` rows in input order, every one of one shape:
    the last is filled with all-zero rows numbered -1.

    Args:
      windows: numbered_windows' dicts, each but the last a multiple of
        batch_size rows.
    """
    for window in windows:
        count = len(window[ORDER])
        for start in range(0, count, batch_size):
            batch = {
                k: v[start : start + batch_size] for k, v in window.items()
            }
            missing = batch_size - len(batch[ORDER])
            if missing:
                batch = {
                    k: np.concatenate(
                        [
                            v,
                            np.full(
                                (missing,) + v.shape[1:],
                                -1 if k == ORDER else 0,
                                v.dtype,
                            ),
                        ]
                    )
                    for k, v in batch.items()
                }
            yield batch


def _without_autotuning(dataset):
    # Measured on the 2-vCPU development VM (BERT-base tagger on CoNLL testb
    # through TF Lite int8): with tf.data's autotuning, 4 passes in 12 took
    # 20.5 s instead of 11.5 s; without it, none in 12. The 9 s are the
    # autotuner's sleep, which ending the iterator waited out
    # (input_pipeline.without_autotuning).
    from modeling.data import input_pipeline

    return input_pipeline.without_autotuning(dataset.prefetch(2))


def in_input_order(rows):
    """Yields the items of `rows`, (order, item) pairs in any order within
    a window, by order: 0, 1, 2, ... Holds at most the rows that arrived
    ahead of their turn (a window's).

    Raises:
      RuntimeError: an order missing or given twice when `rows` ends.
    """
    waiting = {}
    expected = 0
    for order, item in rows:
        order = int(order)
        if order in waiting or order < expected:
            raise RuntimeError(f"row {order} came twice")
        waiting[order] = item
        while expected in waiting:
            yield waiting.pop(expected)
            expected += 1
    if waiting:
        raise RuntimeError(
            f"rows {sorted(waiting)[:5]}... came without row {expected}"
        )


def unsort(order, values):
    """Rows gathered in any order, back in input order: the row with order
    i goes to position i."""
    out = np.empty_like(values)
    out[np.asarray(order)] = values
    return out


def pad_to(values, length, axis=1, value=0):
    """Pads axis `axis` of `values` with `value` up to `length` (a batch
    cut to its longest row, back to the common width)."""
    axis = axis % values.ndim
    missing = length - values.shape[axis]
    if missing <= 0:
        return values
    widths = [(0, 0)] * values.ndim
    widths[axis] = (0, missing)
    return np.pad(values, widths, constant_values=value)
