"""run_multiple_choice's Settings: its flags (modeling/tasks/multiple_choice.py
runs them)."""

import dataclasses

from modeling.options import option
from modeling.tasks.settings import common


@dataclasses.dataclass(kw_only=True)
class Settings(common.FineTuningSettings):
    """run_multiple_choice's flags (the shared ones are FineTuningSettings')."""

    data_dir: str | None = option(
        None, "Folder of SWAG's train.csv, val.csv and test.csv."
    )
    train_file: str | None = option(None, "Training CSV (default: data_dir's).")
    eval_file: str | None = option(None, "Dev CSV (default: data_dir's).")
    predict_file: str | None = option(
        None,
        "CSV to predict (default: data_dir's test.csv); needs no label column.",
    )
    max_seq_length: int = option(
        128,
        "The maximum length of one packed choice after WordPiece "
        "tokenization; longer pairs are truncated (the longer side first), "
        "shorter padded.",
    )
    train_batch_size: int = option(
        16,
        "Total batch size (examples, each of its choices packed) for "
        "training; 16, the BERT paper's SWAG setting (run_classifier's is 32).",
    )
    do_predict: bool = option(False, "Whether to predict the test file.")
    eval_during_training: bool = option(
        False,
        "Evaluate on the dev set at every checkpoint and keep the best by "
        "accuracy under output_dir/best/ (eval_history.txt has every one).",
    )
    export_dir: str | None = option(
        None,
        "Write a serving SavedModel here: its signature takes raw sent1, "
        "sent2 and endings [batch, choices] and returns the choice "
        "probabilities, tokenized in the graph.",
    )
