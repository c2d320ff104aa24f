"""Serving export: a fine-tuned classifier as a SavedModel that takes raw text.

The original release had no export; users asked for one (google-research/bert
#146, #114, #522). The SavedModel written here tokenizes in the graph (the
in-graph WordPiece tokenizer gives the same ids as FullTokenizer), packs
`[CLS] A [SEP] B [SEP]` the way `convert_single_example` does, and returns
class probabilities (or the score of a regression task), each batch padded
only to its longest tokenized row, so a server needs
neither this package nor a vocab file, only TensorFlow and tensorflow-text
(whose import registers the tokenizer ops):

    import tensorflow_text  # noqa: F401 (registers the ops)
    loaded = tf.saved_model.load(export_dir)
    out = loaded.signatures["serving_default"](
        text_a=tf.constant(["..."]), text_b=tf.constant(["..."]))
    out["probabilities"]  # float32 [batch, num_labels]

A second signature, "serving_features", takes the three int32 feature
tensors of the original's records directly.
"""

import tensorflow as tf

from modeling import models
from modeling import task_kinds
from modeling.export import base
from modeling.export.base import SERVING_DEFAULT

SERVING_FEATURES = "serving_features"


class ClassifierServer(base.Server):
    """Holds the model and the in-graph preprocessor; defines the signatures.

    Args:
      model: the fine-tuned `BertClassifier` (call(features) -> logits).
      preprocessor: a trackable callable (text_a, text_b or None) -> dict of
        int32 [batch, max_seq_length] "input_ids", "input_mask",
        "segment_ids"; it owns its vocabulary as a SavedModel asset.
      kind: the task_kinds.TaskKind: a regression returns the single logit
        as "score"; the others "probabilities" (softmax, or each label's
        sigmoid) and "logits", and "predictions", the run's decision (the
        class id; a multi-label task's 0/1 per label at its threshold).
      has_text_b: bool, whether the task takes sentence pairs.
    """

    def __init__(self, model, preprocessor, kind, has_text_b, long_inputs=None):
        super().__init__(name="classifier_server")
        self.model = models.float32_twin(model)
        self.preprocessor = preprocessor
        self.kind = kind
        self.has_text_b = has_text_b
        self.long_inputs = base.cutting(long_inputs)

    def _outputs(self, features, windows=None):
        logits = tf.cast(self.model(features, training=False), tf.float32)
        if windows is not None:
            logits = base.combine_windows(logits, *windows, self.long_inputs)
        return self._decisions(logits)

    def _decisions(self, logits):
        return self.kind.serving_outputs(logits)

    @tf.function(
        autograph=False,
        input_signature=[
            tf.TensorSpec([None, None], tf.int32, name="input_ids"),
            tf.TensorSpec([None, None], tf.int32, name="input_mask"),
            tf.TensorSpec([None, None], tf.int32, name="segment_ids"),
        ],
    )
    def serve_features(self, input_ids, input_mask, segment_ids):
        """The original's features (as in the TFRecords) -> outputs."""
        return self._outputs(
            {
                "input_ids": input_ids,
                "input_mask": input_mask,
                "segment_ids": segment_ids,
            }
        )

    def serve_text(self, text_a, text_b=None):
        """Raw UTF-8 strings [batch] -> outputs (traced in `signatures`).
        The features are cut to the batch's longest row (`to_longest_row`):
        a batch of short texts costs what its texts cost. With long_inputs
        head_tail or chunks, a text's windows are its rows (their outputs
        combined, "num_windows" counting them) and the features are not
        returned."""
        if self.long_inputs is None:
            features = base.to_longest_row(self.preprocessor(text_a, text_b))
            outputs = self._outputs(features)
            outputs.update(features)
            return outputs
        features, text = self.preprocessor.windows(
            self.long_inputs, text_a, text_b
        )
        texts = tf.size(text_a, out_type=tf.int64)
        outputs = self._outputs(base.to_longest_row(features), (text, texts))
        outputs["num_windows"] = tf.math.unsorted_segment_sum(
            tf.ones_like(text, tf.int32), text, texts
        )
        return outputs

    def signatures(self):
        """The concrete functions to save, keyed by signature name."""
        text = tf.TensorSpec([None], tf.string, name="text_a")
        if self.has_text_b:
            text_b = tf.TensorSpec([None], tf.string, name="text_b")
            serve = tf.function(
                lambda text_a, text_b: self.serve_text(text_a, text_b),
                autograph=False,
            )
            concrete = serve.get_concrete_function(text, text_b)
        else:
            serve = tf.function(
                lambda text_a: self.serve_text(text_a), autograph=False
            )
            concrete = serve.get_concrete_function(text)
        return {
            SERVING_DEFAULT: concrete,
            SERVING_FEATURES: self.serve_features.get_concrete_function(),
        }


def export_classifier(
    model,
    preprocessor,
    export_dir,
    kind,
    has_text_b,
    label_list=None,
    max_seq_length=None,
    tflite_quantize=None,
    long_inputs=None,
    text_columns=(None, None),
):
    """Writes the serving SavedModel (atomically) to `export_dir`.

    The SavedModel is written under a temporary name beside `export_dir`
    (`folders.publishing`) and renamed, so a reader never sees half an
    export. `bert_export.json` in assets.extra records the labels (in
    output order), the task kind (with a multi-label threshold) and the
    sequence length.

    Args:
      model: the fine-tuned `BertClassifier`, float32 or mixed precision
        (served in float32: models.float32_twin).
      preprocessor: see `ClassifierServer`.
      export_dir: str, the output directory (an earlier export there is
        replaced; see save_export).
      kind: the task_kinds.TaskKind.
      has_text_b: bool.
      label_list: the task's labels, or None (regression).
      max_seq_length: int, recorded in bert_export.json.
      tflite_quantize: None, or also write `model.tflite` (False: float32,
        True: dynamic-range int8): the serving signature's outputs from
        the features, which modeling/tasks/lite.py runs without TensorFlow.
      long_inputs: long_inputs.LongInputs of the training run: with
        head_tail or chunks, serving_default cuts or windows long texts as
        the run did (in the graph: in_graph.long_input_windows) and adds
        "num_windows"; recorded for modeling/tasks/lite.py, which does the
        same without TensorFlow.
      text_columns: (text_a, text_b) column names of the files the model
        was trained on (None: unknown or none), recorded as predict_lite.py's
        default columns.

    Returns:
      export_dir.
    """
    server = ClassifierServer(
        model, preprocessor, kind, has_text_b, long_inputs
    )
    info = {
        "labels": label_list,
        **kind.to_json(),
        # Read by servers written before task_type.
        **task_kinds.legacy_json(kind),
        "has_text_b": has_text_b,
        "max_seq_length": max_seq_length,
        "outputs": list(kind.serving_output_names),
    }
    if server.long_inputs is not None:
        info.update(long_inputs.to_json())
        info["outputs"].append("num_windows")
    config = getattr(model, "config", None)  # None: a hub encoder's.
    if config is not None:
        # The position table's length, which a server checks
        # max_seq_length against.
        info["max_position_embeddings"] = int(config.max_position_embeddings)
    for name, column in zip(
        ("text_a_column", "text_b_column"), text_columns, strict=True
    ):
        if column:
            info[name] = column
    extra_files = None
    if tflite_quantize is not None:
        from modeling.export import tflite

        content, names = tflite.convert(
            model, tflite_quantize, outputs=server._outputs
        )
        extra_files = tflite.export_files(content, names, tflite_quantize)
    return server.save(export_dir, info, extra_files)
