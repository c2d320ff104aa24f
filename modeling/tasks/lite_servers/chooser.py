"""A multiple-choice model served without TensorFlow (lite.LiteChooser)."""

import numpy as np

from modeling.data import swag
from modeling.tasks import predictions
from modeling.tasks.lite_servers import base
from modeling.training import predictor


class LiteChooser(base.LiteServer):
    """A multiple-choice export (run_multiple_choice.py's --export_dir
    written with --predict_runtime=tflite or tflite_int8), ready to
    predict: each example's choices packed as swag.convert_examples packs
    them, its model.tflite giving a logit per choice.

    Args, Raises: as base.LiteServer's.
    """

    task = "multiple_choice"
    script = "run_multiple_choice.py"
    output = "logits"

    def predict(self, examples):
        """examples: dicts with "sent1", "sent2" and "endings" (a list), or
        swag.SwagExamples -> [{"label": the chosen ending's index,
        "probabilities": [p per ending]}], as run_multiple_choice's
        predictions.jsonl lines without their id."""
        examples = swag.served_examples(
            base.text_list(examples, "Examples", item=None)
        )
        if not examples:
            return []
        lists = swag.convert_examples(
            examples, self.max_seq_length, self.tokenizer
        )
        _, outputs = self.predictor.gather(
            {k: np.array(lists[k], np.int32) for k in predictor.MODEL_FEATURES},
            what="Predicting",
            unit="examples",
        )
        logits = outputs["logits"].astype(np.float64)
        exp = np.exp(logits - logits.max(axis=-1, keepdims=True))
        probabilities = exp / exp.sum(axis=-1, keepdims=True)
        return [
            {
                "label": int(np.argmax(row)),
                "probabilities": [predictions.number(p) for p in row],
            }
            for row in probabilities
        ]

    def predict_file(self, input_file, output_file, **columns):
        """predict_file of a multiple-choice model: SWAG's columns read as
        run_multiple_choice.py's --predict_file, its predictions.jsonl lines."""
        examples = swag.iter_swag(input_file, "test", require_label=False)

        def lines(block):
            for example, record in zip(block, self.predict(block), strict=True):
                yield predictions.line({"id": example.id, **record})

        return base.write_lines(
            output_file, examples, lines, "Predicted %d examples"
        )
