"""A fine-tuned classifier, tagger, multiple-choice or question-answering
model served without TensorFlow: an export's `model.tflite` on the LiteRT
runtime, with the Python tokenizer (LiteClassifier, LiteTagger, LiteChooser,
LiteSquad; `load` picks by the export).

    from modeling.tasks import lite

    model = lite.LiteClassifier("/tmp/reviews_export")
    model.predict(["a fine film", "a dull plot"])
    # [{"label": "positive", "probabilities": {"negative": 0.02, ...}}, ...]

The export is run_classifier.py's `--export_dir` written with
`--predict_runtime=tflite` (float32) or `tflite_int8`. Its `model.tflite` is
the serving signature from the features: the task kind's probabilities
(a regression's score) and decisions, converted with the model. Its
`bert_export.json` gives the labels, the tokenization and the sequence
length. The features are the original's (`convert_single_example`, as
`--do_predict` makes them). They go through the one predictor: length-sorted
batches, each cut to its longest row, outputs back in input order.

This module and everything it imports (numpy, absl, ai-edge-litert, the
project's TF-free modules) never import TensorFlow or Keras:
tests/layering_test.py checks it, and tests/lite_test.py runs it with
`import tensorflow` failing. Install without TensorFlow: see
docs/serving-lite.md.

One module, over 500 lines: the LiteRT servers share the export reader, the
Python tokenizer and the file predictor; splitting it per task is still open
(issue 38).
"""

import json
import os

import numpy as np
from absl import logging

from modeling import task_kinds
from modeling.data import classifier_data
from modeling.data import conll
from modeling.data import feature_names
from modeling.data import file_io
from modeling.data import long_inputs as long_inputs_lib
from modeling.export import folders
from modeling.tasks import predictions
from modeling.tasks import squad_postprocess
from modeling.text import tokenization
from modeling.training import predictor

INFO_FILE = os.path.join(folders.EXTRA_ASSETS, folders.EXPORT_INFO_FILE)


class LiteClassifier:
    """A classifier export (see the module doc), ready to predict.

    Args:
      export_dir: the export folder.
      batch_size: rows per batch.
      num_threads: CPU threads (default: the machine's cores).

    Attributes:
      labels: the labels in id order (None for regression).
      task_type: "classification", "regression" or "multi_label".
      has_text_b: whether the model takes sentence pairs.
      max_seq_length: the pieces a row is cut to.
      text_a_column, text_b_column: the columns of the files it was trained
        on (None: not recorded), what `predict_file` reads by default.

    Raises:
      FileNotFoundError: no export there.
      ValueError: an export without the TF Lite model this needs (export
        again with --predict_runtime=tflite or tflite_int8), or not a
        classifier's.
    """

    def __init__(self, export_dir, batch_size=32, num_threads=None):
        self.export_dir = os.fspath(export_dir)
        info_path, info = _info(self.export_dir)
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
            raise ValueError(_NO_TFLITE.format(export_dir=self.export_dir))
        self.labels = info["labels"]
        self.has_text_b = info["has_text_b"]
        self.max_seq_length = info["max_seq_length"]
        self.text_a_column = info.get("text_a_column")
        self.text_b_column = info.get("text_b_column")
        self.threshold = info.get("multi_label_threshold") or 0.5
        # As the training run read long texts (modeling/data/long_inputs.py).
        self.long_inputs = long_inputs_lib.LongInputs.from_json(info)
        self.precision = info["tflite"].get("precision")
        self.tokenizer, self.backend = _tokenizer_and_backend(
            self.export_dir, info, num_threads
        )
        self.predictor = predictor.Predictor(self.backend, batch_size)

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
        text_a = list(text_a)
        text_b = None if text_b is None else list(text_b)
        if not text_a:
            return []
        if self.has_text_b and text_b is None:
            raise ValueError(
                "This model classifies sentence pairs: give text_b"
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


class LiteTagger:
    """A tagger export (run_ner.py's --export_dir written with
    --predict_runtime=tflite or tflite_int8), ready to predict: its
    model.tflite gives each window's logits per position, the Python
    tokenizer and run_ner's windows (conll.sentence_arrays) the features,
    and each word gets the tag of its first piece, as --do_predict does.

    Args, Raises: as LiteClassifier's.
    """

    def __init__(self, export_dir, batch_size=32, num_threads=None):
        self.export_dir = os.fspath(export_dir)
        info = _read_info(self.export_dir, "token_classification", "logits")
        self.labels = info["labels"]
        self.max_seq_length = info["max_seq_length"]
        self.tokenizer, self.backend = _tokenizer_and_backend(
            self.export_dir, info, num_threads
        )
        self.predictor = predictor.Predictor(self.backend, batch_size)

    def predict(self, texts):
        """Tags of each text (words split at white space), or of each list
        of words: [{"tokens": [...], "tags": [...]}], as run_ner's
        predictions.jsonl lines without their id."""
        sentences = [
            conll.Sentence(
                list(t.split() if isinstance(t, str) else t),
                None,
                [],
            )
            for t in texts
        ]
        return [
            {"tokens": s.words, "tags": tags}
            for s, tags in zip(
                sentences, self.tag_sentences(sentences), strict=True
            )
        ]

    def tag_sentences(self, sentences):
        """One tag per word of each conll.Sentence (an empty one: none)."""
        words = [s for s in sentences if s.words]
        arrays, features = conll.sentence_arrays(
            words, self.labels, self.max_seq_length, self.tokenizer
        )
        tags = iter([])
        if features:
            _, outputs = self.predictor.gather(
                {k: arrays[k] for k in predictor.MODEL_FEATURES},
                width=self.max_seq_length,
                seq_outputs=("logits",),
                what="Tagging",
                unit="windows",
            )
            predicted = np.argmax(outputs["logits"], axis=-1)
            tags = iter(
                conll.word_predictions(features, predicted, words, self.labels)
            )
        return [next(tags) if s.words else [] for s in sentences]


class LiteChooser:
    """A multiple-choice export (run_multiple_choice.py's --export_dir
    written with --predict_runtime=tflite or tflite_int8), ready to
    predict: each example's choices packed as swag.convert_examples packs
    them, its model.tflite giving a logit per choice.

    Args, Raises: as LiteClassifier's.
    """

    def __init__(self, export_dir, batch_size=32, num_threads=None):
        self.export_dir = os.fspath(export_dir)
        info = _read_info(self.export_dir, "multiple_choice", "logits")
        self.max_seq_length = info["max_seq_length"]
        self.tokenizer, self.backend = _tokenizer_and_backend(
            self.export_dir, info, num_threads
        )
        self.predictor = predictor.Predictor(self.backend, batch_size)

    def predict(self, examples):
        """examples: dicts with "sent1", "sent2" and "endings" (a list), or
        swag.SwagExamples -> [{"label": the chosen ending's index,
        "probabilities": [p per ending]}], as run_multiple_choice's
        predictions.jsonl lines without their id."""
        from modeling.data import swag

        examples = [
            e
            if isinstance(e, swag.SwagExample)
            else swag.SwagExample(
                str(i), e["sent1"], e.get("sent2", ""), list(e["endings"]), None
            )
            for i, e in enumerate(examples)
        ]
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


class LiteSquad:
    """A question-answering export (run_squad.py's --export_dir written
    with --predict_runtime=tflite or tflite_int8), ready to predict: the
    original's windows (squad.convert_examples_to_features), each window's
    start and end logits from its model.tflite through the one predictor
    (at full length as run_squad predicts, or each at its own length for an
    export of a --fast_nbest run: squad_postprocess.answer_logits), and
    run_squad's n-best answers (squad_postprocess.compute_predictions),
    with the export's settings (doc_stride, n_best_size, the SQuAD 2.0
    threshold, ...).

    Args, Raises: as LiteClassifier's.
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

    def __init__(self, export_dir, batch_size=32, num_threads=None):
        self.export_dir = os.fspath(export_dir)
        info = _read_info(self.export_dir, "question_answering", "start_logits")
        for name in self.SETTINGS:
            setattr(self, name, info[name])
        self.do_lower_case = info["do_lower_case"]
        self.tokenizer, self.backend = _tokenizer_and_backend(
            self.export_dir, info, num_threads
        )
        self.predictor = predictor.Predictor(
            self.backend, batch_size, length_sorted=self.fast_nbest
        )

    def predict(self, questions, contexts):
        """The answer to each question about its context, in input order:
        [{"answer": text ("" for none), "probability": its share of the
        n best}], as run_squad's predictions.jsonl lines without their
        id."""
        from modeling.data import squad as squad_data

        questions, contexts = list(questions), list(contexts)
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
        from modeling.data import squad as squad_data

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


class LiteEmbedder:
    """A sentence-embedding export (run_embeddings.py's --export_dir written
    with --predict_runtime=tflite or tflite_int8), ready to embed: the
    original's single-text features, its model.tflite's pooled vectors
    through the one predictor.

    Args, Raises: as LiteClassifier's.
    """

    def __init__(self, export_dir, batch_size=32, num_threads=None):
        self.export_dir = os.fspath(export_dir)
        info = _read_info(self.export_dir, "embeddings", "embeddings")
        self.max_seq_length = info["max_seq_length"]
        self.dimensions = info["dimensions"]
        self.normalize = info.get("normalize", True)
        self.long_inputs = long_inputs_lib.LongInputs.from_json(info)
        self.tokenizer, self.backend = _tokenizer_and_backend(
            self.export_dir, info, num_threads
        )
        self.predictor = predictor.Predictor(self.backend, batch_size)

    def encode(self, texts):
        """float32 [N, dimensions]: each text's vector, in input order."""
        return self.predictor.embed(
            self.tokenizer,
            self.max_seq_length,
            texts,
            self.dimensions,
            long_inputs=self.long_inputs,
            normalize=self.normalize,
        )

    def predict(self, texts):
        """[{"embedding": [floats]}] per text: predictions.jsonl records
        without their id."""
        return [
            {"embedding": [predictions.number(v) for v in row]}
            for row in self.encode(texts)
        ]


def load(export_dir, batch_size=32, num_threads=None):
    """The LiteClassifier, LiteTagger, LiteChooser, LiteSquad or
    LiteEmbedder of an export folder."""
    _, info = _info(os.fspath(export_dir))
    kinds = {
        "token_classification": LiteTagger,
        "multiple_choice": LiteChooser,
        "question_answering": LiteSquad,
        "embeddings": LiteEmbedder,
    }
    return kinds.get(info.get("task"), LiteClassifier)(
        export_dir, batch_size, num_threads
    )


def _read_info(export_dir, task, output):
    """bert_export.json of an export of `task` whose TF Lite model has
    `output`.

    Raises:
      ValueError: another task's export, or no such TF Lite model.
    """
    info_path, info = _info(export_dir)
    if info.get("task") != task:
        raise ValueError(f"{info_path}: not a {task} export")
    outputs = (info.get("tflite") or {}).get("outputs")
    if not isinstance(outputs, dict) or output not in outputs:
        raise ValueError(_NO_TFLITE.format(export_dir=export_dir))
    return info


def _info(export_dir):
    """(path, contents) of an export's bert_export.json.

    Raises:
      FileNotFoundError: no such file (not an export folder).
      ValueError: naming the file: not a JSON object.
    """
    path = os.path.join(export_dir, INFO_FILE)
    try:
        info = json.loads(file_io.read_text(path))
    except json.JSONDecodeError as e:
        raise ValueError(f"{path}: not JSON ({e})") from None
    if not isinstance(info, dict):
        raise ValueError(f"{path}: not a JSON object")
    return path, info


def _tokenizer_and_backend(export_dir, info, num_threads):
    if "vocab_file" not in info:
        raise ValueError(_NO_TFLITE.format(export_dir=export_dir))
    # A row longer than the position table would index past it.
    positions = info.get("max_position_embeddings")
    if positions is not None and info.get("max_seq_length", 0) > positions:
        raise ValueError(
            f"{os.path.join(export_dir, INFO_FILE)}: max_seq_length "
            f"{info['max_seq_length']} exceeds the model's "
            f"max_position_embeddings {positions}"
        )
    tokenizer = tokenization.FullTokenizer(
        os.path.join(export_dir, info["vocab_file"]), info["do_lower_case"]
    )
    tflite_info = info["tflite"]
    backend = predictor.TFLiteBackend(
        os.path.join(export_dir, tflite_info["file"]),
        tflite_info["outputs"],
        num_threads=num_threads,
    )
    return tokenizer, backend


_NO_TFLITE = (
    "{export_dir} has no TF Lite model of this version's serving outputs: "
    "export it with --predict_runtime=tflite (float32) or "
    "--predict_runtime=tflite_int8"
)


# Rows predicted at a time by `predict_file` (their features in memory).
CHUNK_ROWS = 8192


def _text_rows(path):
    """(id, text) of each non-empty line of a .txt file (its line number as
    the id)."""
    for number, line in enumerate(file_io.read_lines(path), start=1):
        if line.strip():
            yield str(number), line, None


def predict_file(
    export_dir,
    input_file,
    output_file,
    text_a_column=None,
    text_b_column=None,
    id_column=None,
    batch_size=32,
    num_threads=None,
):
    """predict_lite.py: the predictions of every row of `input_file` as
    predictions.jsonl lines in `output_file` (written aside and renamed
    when complete), CHUNK_ROWS rows at a time.

    Returns:
      The number of rows predicted.
    """
    from modeling.data import custom

    model = load(export_dir, batch_size, num_threads)
    if isinstance(model, LiteTagger):
        return _tag_file(model, input_file, output_file)
    if isinstance(model, LiteChooser):
        return _choose_file(model, input_file, output_file)
    if isinstance(model, LiteSquad):
        return _answer_file(model, input_file, output_file)
    if isinstance(model, LiteEmbedder):
        return _embed_file(
            model, input_file, output_file, text_a_column, id_column
        )
    if input_file.lower().endswith(".txt"):
        if model.has_text_b:
            raise ValueError(
                f"{input_file}: this model classifies sentence pairs; give "
                "a CSV, TSV or JSON Lines file with both texts"
            )
        rows = _text_rows(input_file)
    else:
        processor = custom.CustomProcessor(
            model.task_type,
            files={"test": input_file},
            # The columns the model was trained on, unless named here.
            text_a_column=text_a_column or model.text_a_column,
            text_b_column=text_b_column or model.text_b_column,
            id_column=id_column,
            labels=model.labels,
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
        if model.has_text_b and pairs is None:
            raise ValueError(
                f"{input_file}: this model classifies sentence pairs; "
                "name the second text's column with --text_b_column"
            )
        for row_id, record in zip(
            ids, model.predict(text_a, pairs), strict=True
        ):
            yield predictions.line({"id": row_id, **record})

    return _write_lines(output_file, rows, lines, "Predicted %d rows")


def _write_lines(output_file, items, lines, done):
    """Writes `lines(chunk)` for each CHUNK_ROWS of `items` to output_file
    (written aside and renamed when complete); logs `done` % count.

    Returns:
      The number of items.
    """
    count = 0
    with file_io.atomic_write(output_file) as f:
        for chunk in file_io.chunks(items, CHUNK_ROWS):
            f.writelines(lines(chunk))
            count += len(chunk)
    logging.info(done + ": %s", count, output_file)
    return count


def _tag_file(model, input_file, output_file):
    """predict_file of a tagger: a CoNLL-style or JSON Lines file read as
    run_ner.py's --predict_file, its sentences' tags as run_ner's
    predictions.jsonl lines."""
    data = conll.read_tagged_file(input_file, require_tags=False)

    def lines(block):
        for sentence, tags in zip(
            block, model.tag_sentences(block), strict=True
        ):
            yield predictions.line(
                {"id": sentence.id, "tokens": sentence.words, "tags": tags}
            )

    return _write_lines(
        output_file, data.sentences, lines, "Tagged %d sentences"
    )


def _choose_file(model, input_file, output_file):
    """predict_file of a multiple-choice model: SWAG's columns read as
    run_multiple_choice.py's --predict_file, its predictions.jsonl lines."""
    from modeling.data import swag

    examples = swag.read_swag(input_file, "test", require_label=False)

    def lines(block):
        for example, record in zip(block, model.predict(block), strict=True):
            yield predictions.line({"id": example.id, **record})

    return _write_lines(output_file, examples, lines, "Predicted %d examples")


def _answer_file(model, input_file, output_file):
    """predict_file of a question-answering model: SQuAD JSON, or question
    rows (CSV / TSV / JSON Lines with `question` and `context`), read as
    run_squad.py's --predict_file; run_squad's predictions.jsonl lines."""
    from modeling.data import squad as squad_data

    if squad_data.is_question_rows(input_file):
        examples = squad_data.read_question_rows(input_file)
    else:
        examples, _ = squad_data.read_squad_examples(input_file, False)
        if not examples:
            raise ValueError(f"{input_file}: no questions")

    def lines(block):
        return [squad_postprocess.json_lines(model.predict_examples(block))]

    return _write_lines(output_file, examples, lines, "Answered %d questions")


def _embed_file(model, input_file, output_file, text_column, id_column):
    """predict_file of an embedding model: texts read as run_embeddings.py
    reads them (.txt, or CSV / TSV / JSON Lines with a text column), one
    {"id", "embedding"} line each."""
    from modeling.data import table_files

    rows = table_files.TextFile(input_file, text_column, id_column).rows()

    def lines(chunk):
        ids, texts = zip(*chunk, strict=True)
        for row_id, record in zip(ids, model.predict(texts), strict=True):
            yield predictions.line({"id": row_id, **record})

    return _write_lines(output_file, rows, lines, "Embedded %d texts")
