"""Serving export of run_embeddings: raw strings in, the model's vectors
out (`EmbedderServer`, `export_embedder`)."""

import tensorflow as tf

from modeling import models
from modeling.export import base


class EmbedderServer(base.Server):
    """run_embeddings' serving model: raw strings [batch] -> "embeddings"
    float32 [batch, H] (models.BertEmbedder's pooled, and normalized,
    vectors), each batch cut to its longest tokenized row. With
    long_inputs head_tail or chunks, a text's vector is its windows'
    combined (normalized again when the model normalizes), as
    predictor.Predictor.texts combines them."""

    def __init__(self, model, preprocessor, long_inputs=None):
        super().__init__(name="embedder_server")
        self.model = models.float32_twin(model)
        self.preprocessor = preprocessor
        self.long_inputs = base.cutting(long_inputs)

    @tf.function(
        input_signature=[tf.TensorSpec([None], tf.string, name="text")],
        autograph=False,
    )
    def serve_text(self, text):
        if self.long_inputs is None:
            features = base.to_longest_row(self.preprocessor(text))
            outputs = self.model(features, training=False)
            return {"embeddings": tf.cast(outputs["embeddings"], tf.float32)}
        features, windows = self.preprocessor.windows(self.long_inputs, text)
        outputs = self.model(base.to_longest_row(features), training=False)
        vectors = base.combine_windows(
            tf.cast(outputs["embeddings"], tf.float32),
            windows,
            tf.size(text, out_type=tf.int64),
            self.long_inputs,
        )
        if self.model.pooling.normalize:
            norms = tf.norm(vectors, axis=-1, keepdims=True)
            vectors = vectors / tf.maximum(norms, 1e-12)
        return {"embeddings": vectors}


def export_embedder(model, preprocessor, export_dir, description, extra_files):
    """Writes run_embeddings' serving SavedModel to export_dir (atomically),
    `description` (the pooling, normalization, sequence length, casing and
    source) in bert_export.json.

        loaded = tf.saved_model.load(export_dir)
        loaded.signatures["serving_default"](text=tf.constant(["..."]))
        # {"embeddings": float32 [1, H]}

    Args:
      extra_files: see save_export (a TF Lite model), or None.
    """
    from modeling.data import long_inputs

    server = EmbedderServer(
        model, preprocessor, long_inputs.LongInputs.from_json(description)
    )
    info = {
        "task": "embeddings",
        **description,
        "dimensions": int(model.config.hidden_size),
        "inputs": ["text"],
        "outputs": ["embeddings"],
    }
    return server.save(export_dir, info, extra_files)
