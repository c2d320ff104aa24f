"""What the LiteRT servers share: an export's bert_export.json read and
checked, the Python tokenizer and the TF Lite backend it names, the one
predictor over them, and predictions.jsonl written CHUNK_ROWS at a time.

Imports no TensorFlow or Keras (tests/layering_test.py).
"""

import json
import os

from absl import logging

from modeling.data import file_io
from modeling.export import folders
from modeling.text import tokenization
from modeling.training import predictor

INFO_FILE = os.path.join(folders.EXTRA_ASSETS, folders.EXPORT_INFO_FILE)
# Rows predicted at a time by `predict_file` (their features in memory).
CHUNK_ROWS = 8192


class LiteServer:
    """An export folder's model.tflite behind the Python tokenizer and the
    one predictor. A subclass names its export's `task` and the TF Lite
    `output` it needs, and predicts (`predict`) and predicts a file
    (`predict_file`).

    Args:
      export_dir: the export folder.
      batch_size: rows per batch.
      num_threads: CPU threads (default: the machine's cores).

    Raises:
      FileNotFoundError: no export there.
      ValueError: an export without the TF Lite model this needs (export
        again with --predict_runtime=tflite or tflite_int8), or another
        task's.
    """

    task = None
    output = None
    # The script whose --export_dir this serves (and whose files it reads).
    script = None

    def __init__(self, export_dir, batch_size=32, num_threads=None):
        self.export_dir = os.fspath(export_dir)
        self.info = self.read_info()
        self.max_seq_length = self.info["max_seq_length"]
        self.tokenizer, self.backend = _tokenizer_and_backend(
            self.export_dir, self.info, num_threads
        )
        self.predictor = predictor.Predictor(
            self.backend, batch_size, length_sorted=self.length_sorted
        )

    # Length-sorted batches, each cut to its longest row.
    length_sorted = True
    # The predict_lite column flags predict_file reads (of a table file).
    column_flags = ()

    def read_info(self):
        """bert_export.json, checked to be this server's export."""
        return _read_info(self.export_dir, self.task, self.output)

    def predict_file(self, input_file, output_file, **columns):
        """predict_lite.py: every row of `input_file` as a
        predictions.jsonl line of `output_file`; returns the count."""
        raise NotImplementedError


def _read_info(export_dir, task, output):
    """bert_export.json of an export of `task` whose TF Lite model has
    `output`.

    Raises:
      ValueError: another task's export, or no such TF Lite model.
    """
    info_path, info = read_export_info(export_dir)
    if info.get("task") != task:
        raise ValueError(f"{info_path}: not a {task} export")
    outputs = (info.get("tflite") or {}).get("outputs")
    if not isinstance(outputs, dict) or output not in outputs:
        raise ValueError(NO_TFLITE.format(export_dir=export_dir))
    return info


def read_export_info(export_dir):
    """(path, contents) of an export's bert_export.json.

    Raises:
      FileNotFoundError: no such file (not an export folder).
      ValueError: naming the file: not a JSON object.
    """
    path = os.path.join(export_dir, INFO_FILE)
    if not file_io.exists(path):
        what = "folder" if file_io.is_dir(export_dir) else "path"
        raise FileNotFoundError(
            f"--export_dir={export_dir} is not an export of this repository "
            f"(this {what} has no {INFO_FILE}): give the --export_dir of "
            "run_classifier.py, run_ner.py, run_multiple_choice.py, "
            "run_squad.py or run_embeddings.py"
        )
    try:
        info = json.loads(file_io.read_text(path))
    except json.JSONDecodeError as e:
        raise ValueError(f"{path}: not JSON ({e})") from None
    if not isinstance(info, dict):
        raise ValueError(f"{path}: not a JSON object")
    return path, info


def _tokenizer_and_backend(export_dir, info, num_threads):
    if "vocab_file" not in info:
        raise ValueError(NO_TFLITE.format(export_dir=export_dir))
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


NO_TFLITE = (
    "{export_dir} has no TF Lite model of this version's serving outputs: "
    "export it with --predict_runtime=tflite (float32) or "
    "--predict_runtime=tflite_int8"
)


# What text_list accepts as an item.
_ITEMS = {
    "text": "a string",
    "words": "a string or a list of words (non-blank strings)",
}


def text_list(texts, what="Texts", item="text"):
    """`texts` as a list (one string refused: predictor.refuse_one_string;
    a dict or set too, its keys in no given order), each item `item`: a
    string (str or bytes), "words" (a string or a list of non-blank
    strings), or None (checked by the caller).

    Raises:
      ValueError: naming the first bad item's index (None or a number
        failed deep in the tokenizer, a dict was read as its keys).
    """
    predictor.refuse_one_string(texts, what)
    if isinstance(texts, (dict, set, frozenset)):
        raise ValueError(f"{what} are a list, not a {type(texts).__name__}")
    texts = list(texts)
    if item is None:
        return texts
    for i, text in enumerate(texts):
        if isinstance(text, (str, bytes)):
            continue
        if (
            item == "words"
            and isinstance(text, (list, tuple))
            and all(isinstance(w, str) and w.strip() for w in text)
        ):
            continue
        raise ValueError(
            f"{what}[{i}] is not {_ITEMS[item]}: {repr(text)[:80]}"
        )
    return texts


def write_lines(output_file, items, lines, done, input_file=None):
    """Writes `lines(chunk)` for each CHUNK_ROWS of `items` to output_file
    (written aside and renamed when complete); logs `done` % count.

    Returns:
      The number of items.

    Raises:
      ValueError: `input_file` gave no item (nothing is written).
    """
    count = 0
    with file_io.atomic_write(output_file) as f:
        for chunk in file_io.chunks(items, CHUNK_ROWS):
            f.writelines(lines(chunk))
            count += len(chunk)
        if not count and input_file is not None:
            raise ValueError(f"{input_file}: no rows to predict")
    logging.info(done + ": %s", count, output_file)
    return count
