"""Serving export of run_multiple_choice: raw SWAG fields in, choice
probabilities out (`ChoiceServer`, `export_multiple_choice`)."""

import tensorflow as tf

from modeling import models
from modeling.export import base
from modeling.text import in_graph


class ChoiceServer(base.Server):
    """Raw SWAG fields -> choice probabilities (run_multiple_choice)."""

    def __init__(self, model, vocab_file, do_lower_case, max_seq_length):
        super().__init__(name="choice_server")
        self.model = models.float32_twin(model)
        self.preprocessor = in_graph.TextPreprocessor(
            vocab_file, do_lower_case, max_seq_length
        )

    @tf.function(
        input_signature=[
            tf.TensorSpec([None], tf.string, "sent1"),
            tf.TensorSpec([None], tf.string, "sent2"),
            tf.TensorSpec([None, None], tf.string, "endings"),
        ],
        autograph=False,
    )
    def serve_text(self, sent1, sent2, endings):
        shape = tf.shape(endings)
        choices = shape[1]
        # As swag.convert_examples: A = sent1, B = sent2 + " " + ending.
        first = tf.repeat(sent1, choices)
        second = tf.strings.strip(
            tf.strings.join(
                [tf.repeat(sent2, choices), tf.reshape(endings, [-1])], " "
            )
        )
        features = base.to_longest_row(self.preprocessor(first, second))
        length = tf.shape(features["input_ids"])[-1]
        features = {
            k: tf.reshape(v, [shape[0], choices, length])
            for k, v in features.items()
        }
        logits = tf.cast(self.model(features, training=False), tf.float32)
        return {
            "probabilities": tf.nn.softmax(logits, axis=-1),
            "logits": logits,
        }


def export_multiple_choice(
    model,
    vocab_file,
    do_lower_case,
    max_seq_length,
    export_dir,
    extra_files=None,
):
    """Writes run_multiple_choice's serving SavedModel to export_dir
    (extra_files: see base.save_export)."""
    server = ChoiceServer(model, vocab_file, do_lower_case, max_seq_length)
    info = {
        "task": "multiple_choice",
        "max_seq_length": max_seq_length,
        "inputs": ["sent1", "sent2", "endings"],
        "outputs": ["probabilities", "logits"],
    }
    return server.save(export_dir, info, extra_files)
