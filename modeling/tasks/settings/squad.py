"""run_squad's Settings: its flags (modeling/tasks/squad.py runs them)."""

import dataclasses

from modeling.data import squad as squad_data
from modeling.options import option
from modeling.tasks.settings import common


@dataclasses.dataclass(kw_only=True)
class Settings(common.FineTuningSettings):
    """run_squad's flags (same names and defaults) plus the new ones; the
    shared ones are common.FineTuningSettings'."""

    # run_squad has no --eval_batch_size nor --do_eval (it evaluates by
    # predicting, with --do_predict).
    eval_batch_size: int = 8
    do_eval: bool = False

    train_file: str | None = option(
        None, "SQuAD json for training. E.g., train-v1.1.json"
    )
    predict_file: str | None = option(
        None,
        "SQuAD json for predictions. E.g., dev-v1.1.json or test-v1.1.json",
    )
    max_seq_length: int = option(
        384,
        "The maximum total input sequence length after WordPiece "
        "tokenization. Sequences longer than this will be truncated, and "
        "sequences shorter than this will be padded.",
    )
    doc_stride: int = option(
        128,
        "When splitting up a long document into chunks, how much stride to "
        "take between chunks.",
    )
    max_query_length: int = option(
        64,
        "The maximum number of tokens for the question. Questions longer than "
        "this will be truncated to this length.",
    )
    n_best_size: int = option(
        20,
        "The total number of n-best predictions to generate in the "
        "nbest_predictions.json output file.",
    )
    max_answer_length: int = option(
        30,
        "The maximum length of an answer that can be generated. This is "
        "needed because the start and end predictions are not conditioned on "
        "one another.",
    )
    verbose_logging: bool = option(
        False,
        "If true, all of the warnings related to data processing will be "
        "printed. A number of warnings are expected for a normal SQuAD "
        "evaluation.",
    )
    version_2_with_negative: bool = option(
        False,
        "If true, the SQuAD examples contain some that do not have an answer.",
    )
    null_score_diff_threshold: float = option(
        0.0,
        "If null_score - best_non_null is greater than the threshold predict "
        "null.",
    )
    best_null_threshold: bool = option(
        False,
        "With --version_2_with_negative and a predict file with answers: "
        "choose the null_score_diff_threshold with the best F1 on it (the "
        "official script's best_f1_thresh) and write predictions.json with "
        "it, instead of a second run with --null_score_diff_threshold.",
    )
    max_skipped_fraction: float = option(
        squad_data.DEFAULT_MAX_SKIPPED_FRACTION,
        "Training questions whose answer text is not found in the context's "
        "words are skipped (as the original does); more than this fraction "
        "skipped is an error.",
    )
    # Off: the original's n-best (see AnswerPredictor.logits).
    fast_nbest: bool = option(
        False,
        "Predict each window at its own length (length-sorted batches) and "
        "rank the n best starts and ends among its real positions only. "
        "Faster where windows are shorter than max_seq_length. Off by "
        "default: the original ranks every position of the max_seq_length "
        "row, padding included (padding logits take places among the "
        "n_best_size without being answers), so with it "
        "nbest_predictions.json, and rarely an answer, differ from the "
        "original's. Either way an answer does not depend on "
        "--predict_batch_size or the other questions.",
    )
    do_predict: bool = option(False, "Whether to run eval on the dev set.")
    eval_during_training: bool = option(
        False,
        "Predict and score on --predict_file at every checkpoint while "
        "training and keep the best checkpoint by F1 under output_dir/best/.",
    )
    export_dir: str | None = option(
        None,
        "Write a serving SavedModel here: its signature takes raw questions "
        "and contexts and returns the answer text (windows, the n best and "
        "the answer's characters worked out in the graph, as "
        "predictions.json).",
    )
    predict_batch_size: int = option(8, "Total batch size for predictions.")
