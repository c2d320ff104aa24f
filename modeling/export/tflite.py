"""A task model as a TF Lite model: CPU prediction in float32 or int8.

--predict_runtime=tflite and --precision=int8 run evaluation and prediction
through TF Lite with its XNNPACK CPU kernels instead of TensorFlow:

  float32  the same operations, XNNPACK's kernels: the outputs equal
           TensorFlow's within float32 rounding; on the 2-vCPU development
           VM 1.3x TensorFlow's throughput at batch 32 and 3x at batch 1
           (bench/prediction.py), mostly TensorFlow's per-op overhead.
  int8     dynamic-range quantization: every Dense kernel stored as int8
           with one scale per output channel, activations quantized per
           batch on the fly, the matmuls done in int8 with int32
           accumulation (XNNPACK's dynamically quantized fully-connected
           kernels); embeddings, LayerNorm, softmax and GELU stay float32.
           No calibration data is needed. About 3x TensorFlow float32's
           throughput, a quarter of the model's size on disk.

Why this route (measured in bench/prediction.py's notes): Keras 3's
`model.quantize("int8")` runs its int8 matmuls 5x slower than float32 on
TensorFlow's CPU kernels; TF Lite's dynamic-range kernels are the
TensorFlow stack's fast int8 path on CPU. (`tf.lite.Interpreter` is marked
for a move to the ai-edge-litert package; TensorFlow 2.21, which this
project pins, still ships it.)

The converted model takes the features (`input_ids`, `input_mask`,
`segment_ids`: [B, T], or [B, C, T] for multiple choice) at any batch size
and length, and returns the model's outputs by name ("logits", or a span
labeler's "start_logits" / "end_logits").
"""

import hashlib
import os
import warnings
import weakref

import numpy as np
import tensorflow as tf
from absl import logging

from modeling.data import input_pipeline

FEATURES = input_pipeline.CLASSIFIER_SEQ_FEATURES
RUNTIMES = ("tensorflow", "tflite")


def _serving_function(model, rank):
    """The model as one concrete function: features in, named float32
    outputs out."""
    spec = {
        name: tf.TensorSpec([None] * rank, tf.int32, name=name)
        for name in FEATURES
    }

    @tf.function(input_signature=[spec], autograph=False)
    def serve(features):
        outputs = model(features, training=False)
        if not isinstance(outputs, dict):
            outputs = {"logits": outputs}
        return {k: tf.cast(v, tf.float32) for k, v in outputs.items()}

    return serve, serve.get_concrete_function()


def convert(model, quantize=False, rank=2):
    """The model as TF Lite flatbuffer bytes, its weights as constants.

    Args:
      model: a task model (BertClassifier, BertTokenClassifier,
        BertSpanLabeler, BertMultipleChoice) with its weights.
      quantize: dynamic-range int8 (see the module doc), else float32.
      rank: of the features: 2 ([B, T]), 3 for multiple choice.

    Returns:
      (bytes, the output names in the model's output order).
    """
    # The function itself as the converter's trackable object: the
    # weights it reads are frozen into the model. (A tf.Module holding the
    # Keras model instead leaves them as TF Lite variables that nothing
    # initialises.)
    serve, concrete = _serving_function(model, rank)
    converter = tf.lite.TFLiteConverter.from_concrete_functions(
        [concrete], serve
    )
    if quantize:
        converter.optimizations = [tf.lite.Optimize.DEFAULT]
    # Dict outputs come out in the order tf.nest flattens them: by key.
    return converter.convert(), sorted(concrete.structured_outputs)


class Runner:
    """Runs a converted model on numpy features, resizing its inputs to
    each batch's shape.

    Args:
      content: the flatbuffer bytes (`convert`).
      output_names: the names of its outputs, in order (`convert`).
      num_threads: CPU threads (default: the machine's cores).
    """

    def __init__(self, content, output_names, num_threads=None):
        with warnings.catch_warnings():
            # The deprecation notice of tf.lite.Interpreter (module doc).
            warnings.simplefilter("ignore")
            self.interpreter = tf.lite.Interpreter(
                model_content=content,
                num_threads=num_threads or os.cpu_count(),
            )
        self.inputs = {
            d["name"]: d["index"] for d in self.interpreter.get_input_details()
        }
        missing = set(FEATURES) - set(self.inputs)
        if missing:
            raise ValueError(f"The TF Lite model lacks inputs {missing}")
        details = self.interpreter.get_output_details()
        self.outputs = dict(zip(output_names, (d["index"] for d in details)))
        self._shape = None

    def __call__(self, features):
        """dict of int arrays (FEATURES and others, ignored) -> dict of
        float32 numpy outputs."""
        arrays = {k: np.asarray(features[k], np.int32) for k in FEATURES}
        shape = arrays[FEATURES[0]].shape
        if shape != self._shape:
            for name in FEATURES:
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


def runner(model, quantize=False, rank=2, num_threads=None):
    """`Runner` of `convert(model, ...)`, logging the conversion."""
    kind = "int8 (dynamic range)" if quantize else "float32"
    logging.info("Converting the model to TF Lite, %s", kind)
    content, names = convert(model, quantize, rank)
    logging.info("TF Lite model: %.1f MB", len(content) / 2**20)
    return Runner(content, names, num_threads)


def check_runtime(settings):
    """The runtime of a run's evaluation and prediction: "tflite" with
    --predict_runtime=tflite or --precision=int8, else "tensorflow".

    Raises:
      ValueError: TF Lite with a distribution strategy or a TPU (it runs
        on this host's CPU, in this process), or int8 with
        --predict_runtime=tensorflow.
    """
    config = settings.run_config
    runtime = config.predict_runtime
    if config.precision == "int8":
        if runtime == "tensorflow":
            raise ValueError(
                "--precision=int8 runs through TF Lite: drop "
                "--predict_runtime=tensorflow"
            )
        runtime = "tflite"
    runtime = runtime or "tensorflow"
    strategy = settings.strategy
    one_device = strategy == "default" or (
        isinstance(strategy, tf.distribute.Strategy)
        and strategy.num_replicas_in_sync == 1
    )
    if runtime == "tflite" and (settings.use_tpu or not one_device):
        raise ValueError(
            "TF Lite prediction (--predict_runtime=tflite, --precision=int8) "
            "runs on this host's CPU: use the default --strategy, no TPU"
        )
    return runtime


# The TF Lite model an export holds beside its SavedModel.
EXPORT_FILE = "model.tflite"


def export_files(settings, model, rank=2):
    """With --predict_runtime=tflite or --precision=int8, what an
    --export_dir holds besides the SavedModel: ({EXPORT_FILE: bytes},
    its description for bert_export.json); else None."""
    if check_runtime(settings) != "tflite":
        return None
    quantize = settings.run_config.precision == "int8"
    content, names = convert(model, quantize, rank)
    info = {
        "file": EXPORT_FILE,
        "precision": "int8 (dynamic range)" if quantize else "float32",
        "inputs": list(FEATURES),
        "outputs": names,
    }
    return {EXPORT_FILE: content}, info


# model -> (fingerprint of its weights, quantize, rank, Runner).
_RUNNERS = weakref.WeakKeyDictionary()


def _fingerprint(model):
    """A digest of the model's weights (a run evaluates, trains on, then
    evaluates the same model object)."""
    digest = hashlib.blake2b(digest_size=16)
    for variable in model.weights:
        digest.update(np.ascontiguousarray(variable.numpy()).tobytes())
    return digest.hexdigest()


def task_runner(settings, model, rank=2):
    """The TF Lite runner of a run's model when its evaluation and
    prediction run through TF Lite (`check_runtime`), else None. Converted
    once per state of the weights (evaluation then prediction share it;
    --eval_during_training converts at each evaluation)."""
    if check_runtime(settings) != "tflite":
        return None
    quantize = settings.run_config.precision == "int8"
    key = (_fingerprint(model), quantize, rank)
    cached = _RUNNERS.get(model)
    if cached is not None and cached[0] == key:
        return cached[1]
    result = runner(model, quantize=quantize, rank=rank)
    _RUNNERS[model] = (key, result)
    return result
