"""A fine-tuned classifier served without TensorFlow (lite.LiteClassifier):
the original's features (`convert_single_example`, as --do_predict makes
them, windowed as the training run read long texts) through the export's
model.tflite, which gives the task kind's probabilities (a regression's
score) and decisions; windows combined here, decided by the kind's numpy
forms."""

from modeling import task_kinds
from modeling.data import classifier_data
from modeling.data import custom
from modeling.data import file_io
from modeling.data import long_inputs as long_inputs_lib
from modeling.tasks import predictions
from modeling.tasks.lite_servers import base


class LiteClassifier(base.LiteServer):
    """A classifier export (run_classifier.py's --export_dir written with
    --predict_runtime=tflite or tflite_int8), ready to predict.

    Args, Raises: as base.LiteServer's; also ValueError for an export that
      is not a classifier's.

    Attributes:
      labels: the labels in id order (None for regression).
      task_type: "classification", "regression" or "multi_label".
      has_text_b: whether the model takes sentence pairs.
      max_seq_length: the pieces a row is cut to.
      text_a_column, text_b_column: the columns of the files it was trained
        on (None: not recorded), what `predict_file` reads by default.
    """

    def __init__(self, export_dir, batch_size=32, num_threads=None):
        super().__init__(export_dir, batch_size, num_threads)
        info = self.info
        self.labels = info["labels"]
        self.has_text_b = info["has_text_b"]
        self.text_a_column = info.get("text_a_column")
        self.text_b_column = info.get("text_b_column")
        self.threshold = info.get("multi_label_threshold") or 0.5
        # As the training run read long texts (modeling/data/long_inputs.py).
        self.long_inputs = long_inputs_lib.LongInputs.from_json(info)
        self.precision = info["tflite"].get("precision")

    def read_info(self):
        info_path, info = base.read_export_info(self.export_dir)
        self.task_type = info.get("task_type")
        if self.task_type not in task_kinds.NAMES:
            raise ValueError(
                f"{info_path}: not a classifier export (task_type "
                f"{self.task_type!r})"
            )
        # The kind's numpy forms decide (its threshold: the export's).
        self.kind = task_kinds.from_json(info)
        outputs = (info.get("tflite") or {}).get("outputs")
        if not isinstance(outputs, dict) or not set(
            self.kind.output_names
        ) <= set(outputs):
            raise ValueError(base.NO_TFLITE.format(export_dir=self.export_dir))
        return info

    def features(self, text_a, text_b=None):
        """The original's features of the texts: dict of int32 [N, T]."""
        if self.has_text_b and text_b is None:
            raise ValueError(
                "This model classifies sentence pairs: give text_b"
            )
        arrays, _ = classifier_data.text_arrays(
            text_a,
            self.max_seq_length,
            self.tokenizer,
            text_b,
            long_inputs=self.long_inputs,
        )
        return arrays

    def predict(self, text_a, text_b=None):
        """Predictions of each text (or pair), in input order: what a
        predictions.jsonl line holds besides its id ({"label",
        "probabilities": {label: p}}, {"score"}, or {"labels",
        "probabilities"})."""
        text_a = base.text_list(text_a)
        text_b = None if text_b is None else base.text_list(text_b)
        if not text_a:
            return []
        if self.has_text_b and text_b is None:
            raise ValueError(
                "This model classifies sentence pairs: give text_b"
            )
        if text_b is not None and not self.has_text_b:
            raise ValueError(
                "This model classifies single texts: it was trained without "
                "text_b"
            )
        outputs, _ = self.predictor.texts(
            self.tokenizer,
            self.max_seq_length,
            text_a,
            text_b,
            long_inputs=self.long_inputs,
            combine=(self.kind.combined_output,),
            what="Predicting",
            unit="texts",
        )
        if self.long_inputs.windowed:
            # Each text's combined windows (as run_classifier combines
            # them) -> the kind's activation and decision, in numpy.
            outputs = self.kind.numpy_outputs(outputs)
        return [
            predictions.classifier_record(
                self.kind, self.labels, output, decision
            )
            for output, decision in self.kind.rows(outputs, len(text_a))
        ]

    column_flags = ("text_a_column", "text_b_column", "id_column")
    script = "run_classifier.py"

    def predict_file(
        self,
        input_file,
        output_file,
        text_a_column=None,
        text_b_column=None,
        id_column=None,
    ):
        """Every row of a .txt file (one text a line) or of a CSV, TSV or
        JSON Lines file (the columns the model was trained on, unless
        named) as a predictions.jsonl line."""
        if text_b_column and not self.has_text_b:
            raise ValueError(
                f"--text_b_column={text_b_column}: this model classifies "
                "single texts (it was trained without a second text)"
            )
        if input_file.lower().endswith(".txt"):
            if self.has_text_b:
                raise ValueError(
                    f"{input_file}: this model classifies sentence pairs; give "
                    "a CSV, TSV or JSON Lines file with both texts"
                )
            rows = _text_rows(input_file)
        else:
            processor = custom.CustomProcessor(
                self.task_type,
                files={"test": input_file},
                # The columns the model was trained on, unless named here.
                text_a_column=text_a_column or self.text_a_column,
                text_b_column=text_b_column or self.text_b_column,
                id_column=id_column,
                labels=self.labels,
            )
            # run_classifier's check of a --test_file: its columns, and at
            # least one row to predict.
            processor.check_file("test")
            rows = (
                (e.index, e.text_a, e.text_b)
                for e in processor.iter_test_examples()
            )

        def lines(chunk):
            ids, text_a, text_b = zip(*chunk, strict=True)
            pairs = None if text_b[0] is None else text_b
            if self.has_text_b and pairs is None:
                raise ValueError(
                    f"{input_file}: this model classifies sentence pairs; "
                    "name the second text's column with --text_b_column"
                )
            for row_id, record in zip(
                ids, self.predict(text_a, pairs), strict=True
            ):
                yield predictions.line({"id": row_id, **record})

        return base.write_lines(
            output_file, rows, lines, "Predicted %d rows", input_file
        )


def _text_rows(path):
    """(id, text) of each non-empty line of a .txt file (its line number as
    the id)."""
    for number, line in enumerate(file_io.read_lines(path), start=1):
        if line.strip():
            yield str(number), line, None
