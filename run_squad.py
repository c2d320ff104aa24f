"""Run BERT on SQuAD 1.1 and SQuAD 2.0 (the original's flags).

    python run_squad.py --vocab_file=$BERT_BASE_DIR/vocab.txt \
      --bert_config_file=$BERT_BASE_DIR/bert_config.json \
      --init_checkpoint=$BERT_BASE_DIR/bert_model.ckpt \
      --do_train=True --train_file=$SQUAD_DIR/train-v1.1.json \
      --do_predict=True --predict_file=$SQUAD_DIR/dev-v1.1.json \
      --train_batch_size=12 --learning_rate=3e-5 --num_train_epochs=2.0 \
      --max_seq_length=384 --doc_stride=128 --output_dir=/tmp/squad_base/

Writes, as the original: train.tf_record, eval.tf_record, checkpoints
(original variable names, span head `cls/squad/output_weights` /
`output_bias`), predictions.json, nbest_predictions.json and, with
--version_2_with_negative, null_odds.json. Added: eval_results.txt with the
official scores when the predict file has answers, --best_null_threshold,
--eval_during_training, --max_skipped_fraction and the shared
speed/distribution flags of modeling/flags.py.
"""

from absl import flags

from modeling import flags as shared_flags

FLAGS = flags.FLAGS

## Other parameters
shared_flags.define_flags(
    "vocab_file", "do_lower_case", "num_train_epochs", "warmup_proportion"
)
flags.DEFINE_string(
    "train_file", None, "SQuAD json for training. E.g., train-v1.1.json"
)
flags.DEFINE_string(
    "predict_file",
    None,
    "SQuAD json for predictions. E.g., dev-v1.1.json or test-v1.1.json",
)
flags.DEFINE_integer(
    "max_seq_length",
    384,
    "The maximum total input sequence length after WordPiece tokenization. "
    "Sequences longer than this will be truncated, and sequences shorter "
    "than this will be padded.",
)
flags.DEFINE_integer(
    "doc_stride",
    128,
    "When splitting up a long document into chunks, how much stride to "
    "take between chunks.",
)
flags.DEFINE_integer(
    "max_query_length",
    64,
    "The maximum number of tokens for the question. Questions longer than "
    "this will be truncated to this length.",
)
flags.DEFINE_bool("do_predict", False, "Whether to run eval on the dev set.")
flags.DEFINE_integer(
    "predict_batch_size", 8, "Total batch size for predictions."
)
flags.DEFINE_integer(
    "n_best_size",
    20,
    "The total number of n-best predictions to generate in the "
    "nbest_predictions.json output file.",
)
flags.DEFINE_integer(
    "max_answer_length",
    30,
    "The maximum length of an answer that can be generated. This is needed "
    "because the start and end predictions are not conditioned on one "
    "another.",
)
flags.DEFINE_bool(
    "verbose_logging",
    False,
    "If true, all of the warnings related to data processing will be "
    "printed. A number of warnings are expected for a normal SQuAD "
    "evaluation.",
)
flags.DEFINE_bool(
    "version_2_with_negative",
    False,
    "If true, the SQuAD examples contain some that do not have an answer.",
)
flags.DEFINE_float(
    "null_score_diff_threshold",
    0.0,
    "If null_score - best_non_null is greater than the threshold predict null.",
)

## Added (not in the original)
flags.DEFINE_bool(
    "best_null_threshold",
    False,
    "With --version_2_with_negative and a predict file with answers: choose "
    "the null_score_diff_threshold with the best F1 on it (the official "
    "script's best_f1_thresh) and write predictions.json with it, instead "
    "of a second run with --null_score_diff_threshold.",
)
flags.DEFINE_bool(
    "fast_nbest",
    False,
    "Predict each window at its own length (length-sorted batches) and rank "
    "the n best starts and ends among its real positions only. Faster where "
    "windows are shorter than max_seq_length. Off by default: the original "
    "ranks every position of the max_seq_length row, padding included "
    "(padding logits take places among the n_best_size without being "
    "answers), so with it nbest_predictions.json, and rarely an answer, "
    "differ from the original's. Either way an answer does not depend on "
    "--predict_batch_size or the other questions.",
)
flags.DEFINE_float(
    "max_skipped_fraction",
    0.05,
    "Training questions whose answer text is not found in the context's "
    "words are skipped (as the original does); more than this fraction "
    "skipped is an error.",
)
flags.DEFINE_bool(
    "eval_during_training",
    False,
    "Predict and score on --predict_file at every checkpoint while training "
    "and keep the best checkpoint by F1 under output_dir/best/.",
)

flags.DEFINE_string(
    "export_dir",
    None,
    "Write a serving SavedModel here: its signature takes raw questions and "
    "contexts and returns the answer text (windows, the n best and the "
    "answer's characters worked out in the graph, as predictions.json).",
)

shared_flags.define_common_flags()


def main(_):
    # Imported here so that `--help` does not load TensorFlow.
    from modeling.tasks import squad

    squad.run(shared_flags.settings_from_flags(squad.Settings))


def run():
    """Console entry point (setup.py: bert-run-squad)."""
    shared_flags.run_script(
        main, required=("vocab_file", "bert_config_file", "output_dir")
    )


if __name__ == "__main__":
    run()
