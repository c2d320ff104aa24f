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

The servers live in modeling/tasks/lite_servers/, one module per task on
the shared export reader (`base.LiteServer`); this module names them, picks
one for an export folder (`load`) and predicts a file with it
(`predict_file`, predict_lite.py).
"""

import os

from modeling import errors
from modeling.data import file_io
from modeling.tasks.lite_servers import base
from modeling.tasks.lite_servers.chooser import LiteChooser
from modeling.tasks.lite_servers.classifier import LiteClassifier
from modeling.tasks.lite_servers.embedder import LiteEmbedder
from modeling.tasks.lite_servers.squad import LiteSquad
from modeling.tasks.lite_servers.tagger import LiteTagger

__all__ = [
    "LiteChooser",
    "LiteClassifier",
    "LiteEmbedder",
    "LiteSquad",
    "LiteTagger",
    "load",
    "predict_file",
]

INFO_FILE = base.INFO_FILE
CHUNK_ROWS = base.CHUNK_ROWS
# bert_export.json's "task" -> its server (a classifier's export has none).
SERVERS = {
    server.task: server
    for server in (LiteTagger, LiteChooser, LiteSquad, LiteEmbedder)
}


def load(export_dir, batch_size=32, num_threads=None):
    """The LiteClassifier, LiteTagger, LiteChooser, LiteSquad or
    LiteEmbedder of an export folder."""
    _, info = base.read_export_info(os.fspath(export_dir))
    server = SERVERS.get(info.get("task"), LiteClassifier)
    return server(export_dir, batch_size, num_threads)


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
    when complete), CHUNK_ROWS rows at a time, by the export's server.

    Returns:
      The number of rows predicted.
    """
    file_io.check_file_path(output_file, f"--output_file={output_file}")
    if file_io.overlap(output_file, export_dir):
        raise errors.UserError(
            f"--output_file={output_file} is inside --export_dir="
            f"{export_dir}: it would replace a file of the export; write "
            "the predictions elsewhere"
        )
    if num_threads is not None and num_threads != -1 and num_threads < 1:
        raise errors.UserError(
            f"--num_threads={num_threads}: give 1 or more (or leave it "
            "unset for the runtime's default)"
        )
    server = load(export_dir, batch_size, num_threads)
    columns = {
        "text_a_column": text_a_column,
        "text_b_column": text_b_column,
        "id_column": id_column,
    }
    _check_column_flags(server, input_file, columns)
    return server.predict_file(input_file, output_file, **columns)


def _check_column_flags(server, input_file, columns):
    """A column flag the export's reader would not read is refused (it was
    ignored, and the ids were line numbers without a word)."""
    if not any(columns.values()):
        return
    is_text = os.fspath(input_file).lower().endswith(".txt")
    for flag, value in columns.items():
        if not value or (flag in server.column_flags and not is_text):
            continue
        if is_text and flag in server.column_flags:
            why = (
                f"{input_file} is a .txt file: one text per line, its line "
                "number the id"
            )
        else:
            why = (
                f"an export of {server.script} reads {input_file} as "
                f"{server.script} reads its --predict_file (its own columns)"
            )
        raise errors.UserError(f"--{flag}={value} is not read: {why}")
