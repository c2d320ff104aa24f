"""A task model as a TF Lite model: CPU prediction in float32 or int8.

--predict_runtime=tflite and tflite_int8 (--precision=int8) run evaluation
and prediction through TF Lite with its XNNPACK CPU kernels instead of
TensorFlow (modeling/training/predictor.py runs it); an --export_dir of such
a run holds the converted model beside its SavedModel (`export_files`):

  float32  the same operations, XNNPACK's kernels: the outputs equal
           TensorFlow's within float32 rounding; on the 2-vCPU development
           VM 1.3x TensorFlow's throughput at batch 32 and 3x at batch 1
           (bench/prediction.py), mostly TensorFlow's per-op overhead.
  int8     dynamic-range quantization: every Dense kernel stored as int8
           with one scale per output channel, each row of activations
           quantized on the fly, the matmuls done in int8 with int32
           accumulation (XNNPACK's dynamically quantized fully-connected
           kernels); embeddings, LayerNorm, softmax and GELU stay float32.
           No calibration data is needed. About 3x TensorFlow float32's
           throughput, a quarter of the model's size on disk.

Why this route (measured in bench/prediction.py's notes): Keras 3's
`model.quantize("int8")` runs its int8 matmuls 5x slower than float32 on
TensorFlow's CPU kernels; TF Lite's dynamic-range kernels are the
TensorFlow stack's fast int8 path on CPU. The models run on the standalone
LiteRT runtime when it is installed (modeling/training/predictor.py), which
needs no TensorFlow, else on the interpreter TensorFlow 2.21 still ships.

The converted model takes the features (`input_ids`, `input_mask`,
`segment_ids`: [B, T], or [B, C, T] for multiple choice) at any batch size
and length, and returns the model's outputs by name ("logits", or a span
labeler's "start_logits" / "end_logits").
"""

import tensorflow as tf
from absl import logging

from modeling import models
from modeling.data import input_pipeline

FEATURES = input_pipeline.CLASSIFIER_SEQ_FEATURES
# The TF Lite model an export holds beside its SavedModel.
EXPORT_FILE = "model.tflite"
INT8 = "int8 (dynamic range)"


def convert(model, quantize=False, rank=2, outputs=None):
    """The model as TF Lite flatbuffer bytes, its weights as constants.

    Args:
      model: a task model (BertClassifier, BertTokenClassifier,
        BertSpanLabeler, BertMultipleChoice) with its weights, float32.
      quantize: dynamic-range int8 (see the module doc), else float32.
      rank: of the features: 2 ([B, T]), 3 for multiple choice.
      outputs: features -> the dict of tensors to convert (default: the
        model's named outputs; a serving export's own outputs, such as a
        classifier's probabilities and decisions, also work).

    Returns:
      (bytes, {output name: the name of its tensor in the TF Lite model}).
    """
    spec = {
        name: tf.TensorSpec([None] * rank, tf.int32, name=name)
        for name in FEATURES
    }

    @tf.function(input_signature=[spec], autograph=False)
    def serve(features):
        if outputs is not None:
            return outputs(features)
        return models.named_outputs(model, features)

    # The function itself as the converter's trackable object: the
    # weights it reads are frozen into the model. (A tf.Module holding the
    # Keras model instead leaves them as TF Lite variables that nothing
    # initialises.)
    concrete = serve.get_concrete_function()
    converter = tf.lite.TFLiteConverter.from_concrete_functions(
        [concrete], serve
    )
    if quantize:
        converter.optimizations = [tf.lite.Optimize.DEFAULT]
    logging.info(
        "Converting the model to TF Lite, %s", INT8 if quantize else "float32"
    )
    content = converter.convert()
    logging.info("TF Lite model: %.1f MB", len(content) / 2**20)
    # Each output's graph tensor keeps its name in the flatbuffer: the
    # outputs are found by it, not by their position (a span labeler's
    # start and end logits have the same shape).
    tensors = tf.nest.flatten(concrete.structured_outputs)
    keys = sorted(concrete.structured_outputs)  # tf.nest's order.
    return content, {
        key: tensor.name.split(":")[0]
        for key, tensor in zip(keys, tensors, strict=True)
    }


def export_files(content, output_names, quantized):
    """What an export holds besides its SavedModel when its run predicts
    through TF Lite: ({EXPORT_FILE: the converted bytes}, its description
    for bert_export.json), as base.save_export's `extra_files` takes
    it."""
    info = {
        "file": EXPORT_FILE,
        "precision": INT8 if quantized else "float32",
        "inputs": list(FEATURES),
        # {output: tensor name} (a list in earlier exports: by position).
        "outputs": dict(output_names),
    }
    return {EXPORT_FILE: content}, info
