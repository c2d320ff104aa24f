"""run_ner's Settings: its flags (modeling/tasks/ner.py runs them)."""

import dataclasses

from modeling.options import option
from modeling.tasks.settings import common


@dataclasses.dataclass(kw_only=True)
class Settings(common.FineTuningSettings):
    """run_ner's flags (the shared ones are common.FineTuningSettings')."""

    data_dir: str | None = option(
        None,
        "Folder of the CoNLL files: train.txt, dev.txt, test.txt (or "
        "eng.train, eng.testa, eng.testb).",
    )
    train_file: str | None = option(
        None, "Training file (default: data_dir's)."
    )
    eval_file: str | None = option(None, "Dev file (default: data_dir's).")
    predict_file: str | None = option(
        None,
        "File to predict (default: data_dir's test file). Its tag column, if "
        "any, is kept; the predicted tag is appended to each word line.",
    )
    label_list: str | None = option(
        None,
        "Comma-separated tags in id order. Default: output_dir/label_list.txt "
        "if present, else the training file's tags ('O' first, then sorted); "
        "the list is written to output_dir/label_list.txt.",
    )
    max_seq_length: int = option(
        128,
        "The maximum total input sequence length after WordPiece "
        "tokenization. Longer sentences are split into windows of whole words "
        "(none dropped).",
    )
    # CoNLL-style files: the tags' column (1-based; None: the last).
    tag_column: int | None = option(
        None,
        "CoNLL-style files: the column of the tags, counted from 1 (the word "
        "is column 1). Default: the last.",
    )
    # JSON Lines files: the fields of the words and the tags.
    tokens_field: str = option(
        "tokens",
        "JSON Lines files (.jsonl/.json): the field holding each sentence's "
        "list of words.",
    )
    tags_field: str = option(
        "tags",
        "JSON Lines files: the field holding the list of tags (one per word).",
    )
    do_predict: bool = option(False, "Whether to predict the test file.")
    eval_during_training: bool = option(
        False,
        "Evaluate on the dev set at every checkpoint and keep the best by "
        "entity F1 under output_dir/best/ (eval_history.txt has every one).",
    )
    export_dir: str | None = option(
        None,
        "Write a serving SavedModel here: its signature takes raw sentences "
        "(space-separated words) and returns one tag per word, tokenized in "
        "the graph.",
    )
