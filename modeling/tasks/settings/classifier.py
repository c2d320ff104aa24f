"""run_classifier's and run_classifier_with_tfhub's Settings: their flags
(modeling/tasks/classifier.py runs them)."""

import dataclasses

from modeling import task_kinds
from modeling.data import custom
from modeling.options import option
from modeling.tasks.settings import common


@dataclasses.dataclass(kw_only=True)
class Settings(common.FineTuningSettings, common.LongInputSettings):
    """run_classifier's flags (same names and defaults) plus the new ones;
    the shared ones (bert_config_file, output_dir, init_checkpoint, modes,
    random_seed, strategy, TPU, batch sizes, epochs, ...) are
    common.FineTuningSettings'.

    `run_config` carries the shared training flags (RunConfig,
    modeling/training/run_config.py); its num_train_steps /
    num_warmup_steps are replaced by the original's arithmetic
    (tasks/classifier.py).
    """

    data_dir: str | None = option(
        help="The input data dir. Should contain the .tsv files (or other "
        "data files) for the task."
    )
    task_name: str = option(
        help="The name of the task to train (case-insensitive): cola, mnli, "
        "mrpc, xnli (the original's) or sst-2, sts-b, qqp, qnli, rte, "
        "wnli, mnli-mm, ax; or custom: your own CSV / TSV / JSON Lines "
        "files (--train_file, --dev_file, --test_file; --data_dir then "
        "optional)."
    )
    max_seq_length: int = option(
        128,
        "The maximum total input sequence length after WordPiece "
        "tokenization. Sequences longer than this will be truncated, and "
        "sequences shorter than this will be padded.",
    )
    glue_submission_dir: str | None = option(
        None,
        "With --do_predict, also write <TASK>.tsv (CoLA.tsv, MRPC.tsv, ...) "
        "in the GLUE leaderboard's format (index, predicted label name or "
        "STS-B score) to this directory.",
    )
    # None: on, except on TPU (see `prepare`).
    dynamic_padding: bool | None = option(
        None,
        "Cut each batch to its longest sequence (rounded up to a multiple of "
        "8; with --use_xla to one of 4 lengths, so XLA compiles at most 4 "
        "times) instead of computing on max_seq_length positions: the same "
        "results up to float rounding, several times faster on short texts "
        "(GLUE). Default: on, except on TPU (fixed shapes); "
        "--nodynamic_padding pads every batch to max_seq_length as the "
        "original.",
    )
    # --task_name=custom: your own files (modeling/data/custom.py).
    train_file: str | None = option(
        None,
        "--task_name=custom: the training file, .csv, .tsv, .jsonl or .json "
        "(JSON Lines), with a header row (CSV/TSV) naming the columns. "
        "Default: train.csv / .tsv / .jsonl in --data_dir.",
    )
    dev_file: str | None = option(
        None, "--task_name=custom: the dev file (as --train_file)."
    )
    test_file: str | None = option(
        None,
        "--task_name=custom: the file to predict (as --train_file; no label "
        "column needed). Streamed: any number of rows.",
    )
    # None: labels.json's (an earlier training run), else classification.
    task_type: str | None = option(
        None,
        "--task_name=custom: one label per row (classification), a number "
        "(regression: the STS-B head and metrics), or a set of labels "
        "(multi_label: a sigmoid per label). Default: "
        "output_dir/labels.json's, else classification.",
        choices=task_kinds.NAMES,
    )
    text_a_column: str | None = option(
        None,
        "--task_name=custom: the text column. Default: the first of the pairs "
        + ", ".join("/".join(p) for p in custom.PAIR_COLUMNS)
        + " that the file has (read as sentence pairs), else the first of "
        + ", ".join(custom.TEXT_A_COLUMNS)
        + " that it has.",
    )
    text_b_column: str | None = option(
        None,
        "--task_name=custom: the second text of sentence pairs. Default: the "
        "second column of a pair --text_a_column's help names, when neither "
        "flag is set; else none (single texts).",
    )
    label_column: str | None = option(
        None, "--task_name=custom: the label column (default: label)."
    )
    id_column: str | None = option(
        None,
        "--task_name=custom: the id written to predictions.jsonl. Default: "
        "id, idx, index or guid if the file has one, else the row's line "
        "number.",
    )
    labels: str | None = option(
        None,
        "--task_name=custom: the labels in id order, comma-separated. "
        "Default: output_dir/labels.json (written by training), else the "
        "sorted distinct training labels. List them to allow dev labels "
        "unseen in training.",
    )
    label_separator: str = option(
        custom.DEFAULT_LABEL_SEPARATOR,
        "--task_type=multi_label: splits a CSV/TSV label field into labels "
        "(JSON Lines may give a list).",
    )
    # A float in (0, 1), "auto" (the dev set's best micro-F1), or None
    # (labels.json's, else 0.5); multi-label tasks only.
    multi_label_threshold: float | str | None = option(
        None,
        "--task_type=multi_label: a label is predicted when its probability "
        "is at least this (in (0, 1)); auto: the threshold with the best "
        "micro-F1 on the dev set (needs --do_eval). Recorded in "
        "output_dir/labels.json and an export's bert_export.json, so later "
        "runs and the serving model decide alike. Default: labels.json's, "
        "else 0.5.",
    )
    skip_bad_rows: bool = option(
        False,
        "--task_name=custom: skip rows that are malformed (a ragged CSV row, "
        "a bad JSON line), have an empty text, an unknown label or a "
        "non-numeric regression target, counting and logging them, instead of "
        "stopping with an error naming the file and line.",
    )
    do_predict: bool = option(
        False, "Whether to run the model in inference mode on the test set."
    )
    eval_during_training: bool = option(
        False,
        "Evaluate on the dev set at every checkpoint while training and keep "
        "the best checkpoint by the task's main metric (accuracy; F1 for "
        "MRPC/QQP; Matthews correlation for CoLA; Pearson for STS-B) under "
        "output_dir/best/. Its metrics are in "
        "output_dir/best/eval_results.txt.",
    )
    export_dir: str | None = option(
        None,
        "Write a serving SavedModel here: its signature takes raw strings "
        "(text_a, and text_b for pair tasks), tokenizes them in the graph and "
        "returns class probabilities (STS-B: the score).",
    )

    def ignored_flags(self):
        ignored = super().ignored_flags()
        if not self.do_predict:
            ignored["glue_submission_dir"] = (
                "the submission files hold --do_predict's predictions, and "
                "--do_predict is not set"
            )
        return ignored


# run_classifier's flags that run_classifier_with_tfhub reads from the
# SavedModel instead.
FROM_THE_MODULE = (
    "bert_config_file",
    "init_checkpoint",
    "vocab_file",
    "do_lower_case",
)


@dataclasses.dataclass(kw_only=True)
class HubSettings(Settings):
    """run_classifier_with_tfhub's flags: run_classifier's, with the encoder
    SavedModel at `bert_hub_module_handle` (modeling/saved_encoder.py) in
    place of bert_config_file and init_checkpoint; vocab_file and
    do_lower_case are read from it (as the original read its
    `tokenization_info`)."""

    bert_hub_module_handle: str = option(
        help="Handle for the BERT TF-Hub module: an encoder SavedModel folder "
        "(local or gs://) in the TF Hub BERT convention, e.g. "
        "export_hub.py's <export_path>/encoder or a downloaded TF Hub / "
        "Kaggle BERT encoder."
    )
    # Read from the SavedModel: not flags here.
    bert_config_file: str | None = None
    init_checkpoint: str | None = None
    vocab_file: str | None = None
    do_lower_case: bool = True

    def ignored_flags(self):
        ignored = super().ignored_flags()
        for name in FROM_THE_MODULE:
            ignored[name] = (
                "the model, its vocabulary and its casing are read from "
                "--bert_hub_module_handle's SavedModel"
            )
        return ignored
