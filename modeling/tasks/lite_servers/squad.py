"""A question-answering model served without TensorFlow (lite.LiteSquad)."""

import numpy as np

from modeling.data import feature_names
from modeling.data import squad as squad_data
from modeling.tasks import squad_postprocess
from modeling.tasks.lite_servers import base
from modeling.training import predictor


class LiteSquad(base.LiteServer):
    """A question-answering export (run_squad.py's --export_dir written
    with --predict_runtime=tflite or tflite_int8), ready to predict: the
    original's windows (squad.convert_examples_to_features), each window's
    start and end logits from its model.tflite through the one predictor
    (at full length as run_squad predicts, or each at its own length for an
    export of a --fast_nbest run: squad_postprocess.answer_logits), and
    run_squad's n-best answers (squad_postprocess.compute_predictions),
    with the export's settings (doc_stride, n_best_size, the SQuAD 2.0
    threshold, ...).

    Args, Raises: as base.LiteServer's.
    """

    SETTINGS = (
        "max_seq_length",
        "doc_stride",
        "max_query_length",
        "n_best_size",
        "max_answer_length",
        "version_2_with_negative",
        "null_score_diff_threshold",
        "fast_nbest",
    )

    task = "question_answering"
    script = "run_squad.py"
    output = "start_logits"

    def __init__(self, export_dir, batch_size=32, num_threads=None):
        super().__init__(export_dir, batch_size, num_threads)
        for name in self.SETTINGS:
            setattr(self, name, self.info[name])
        self.do_lower_case = self.info["do_lower_case"]

    @property
    def length_sorted(self):
        # At full length as run_squad predicts, unless --fast_nbest.
        return self.info["fast_nbest"]

    def predict(self, questions, contexts):
        """The answer to each question about its context, in input order:
        [{"answer": text ("" for none), "probability": its share of the
        n best}], as run_squad's predictions.jsonl lines without their
        id."""
        questions = base.text_list(questions, "Questions")
        contexts = base.text_list(contexts, "Contexts")
        if len(questions) != len(contexts):
            raise ValueError(
                f"{len(questions)} questions but {len(contexts)} contexts"
            )
        examples = [
            squad_data.SquadExample(
                qas_id=str(i),
                question_text=question,
                doc_tokens=squad_data.split_paragraph(context)[0],
            )
            for i, (question, context) in enumerate(
                zip(questions, contexts, strict=True)
            )
        ]
        records = squad_postprocess.records(self.predict_examples(examples))
        return [{k: r[k] for k in ("answer", "probability")} for r in records]

    def predict_examples(self, examples):
        """squad_postprocess.Predictions of squad.SquadExamples (answers,
        n best, and SQuAD 2.0's null odds), as run_squad.py makes them."""
        if not examples:
            return squad_postprocess.Predictions({}, {}, None, None)
        features = []
        squad_data.convert_examples_to_features(
            examples,
            self.tokenizer,
            self.max_seq_length,
            self.doc_stride,
            self.max_query_length,
            False,
            features.append,
            log_examples=False,
        )
        rows = {
            name: np.array([getattr(f, name) for f in features], np.int32)
            for name in predictor.MODEL_FEATURES
        }
        rows[feature_names.UNIQUE_IDS] = np.array(
            [f.unique_id for f in features], np.int64
        )
        unique_ids, start, end = squad_postprocess.answer_logits(
            self.predictor,
            rows,
            self.max_seq_length,
            self.fast_nbest,
            total=len(features),
        )
        return squad_postprocess.compute_predictions(
            examples,
            features,
            unique_ids,
            start,
            end,
            n_best_size=self.n_best_size,
            max_answer_length=self.max_answer_length,
            do_lower_case=self.do_lower_case,
            version_2_with_negative=self.version_2_with_negative,
            null_score_diff_threshold=self.null_score_diff_threshold,
        )

    def predict_file(self, input_file, output_file, **columns):
        """predict_file of a question-answering model: SQuAD JSON, or question
        rows (CSV / TSV / JSON Lines with `question` and `context`), read as
        run_squad.py's --predict_file; run_squad's predictions.jsonl lines."""
        if squad_data.is_question_rows(input_file):
            examples = squad_data.read_question_rows(input_file)
        else:
            examples, _ = squad_data.read_squad_examples(input_file, False)
            if not examples:
                raise ValueError(f"{input_file}: no questions")

        def lines(block):
            return [squad_postprocess.json_lines(self.predict_examples(block))]

        return base.write_lines(
            output_file, examples, lines, "Answered %d questions"
        )
