"""predict_lite.py's Settings: its flags (modeling/tasks/lite.py's
predict_file takes them as arguments)."""

import dataclasses

from modeling.options import option
from modeling.tasks import common as common_lib


@dataclasses.dataclass(kw_only=True)
class Settings:
    """predict_lite.py's flags."""

    export_dir: str = option(
        help="The classifier, tagger, multiple-choice, question-answering or "
        "embedding export (with its model.tflite)."
    )
    input_file: str = option(
        help="The texts: for a classifier .csv, .tsv, .jsonl / .json (columns as "
        "run_classifier.py's --test_file) or .txt (one text per line); for a "
        "tagger, a multiple-choice or a question-answering model, as its "
        "script's --predict_file."
    )
    output_file: str = option(
        help="Where to write the predictions (JSON Lines)."
    )
    text_a_column: str | None = option(
        None,
        "The text column (default: the one the export was trained on, else as "
        "run_classifier.py).",
    )
    text_b_column: str | None = option(
        None,
        "A pair model's second text column (default: the one it was trained "
        "on).",
    )
    id_column: str | None = option(
        None, "The id column (default: id, idx, ...)."
    )
    batch_size: int = option(32, "Rows per batch.")
    num_threads: int | None = option(
        None, "CPU threads (default: the machine's cores)."
    )

    def __post_init__(self):
        common_lib.check_counts(self)
