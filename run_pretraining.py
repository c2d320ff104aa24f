"""Run masked LM / next sentence masked_lm pre-training for BERT.

    python run_pretraining.py --input_file=/tmp/tf_examples.tfrecord \
      --output_dir=/tmp/pretraining_output --do_train=True --do_eval=True \
      --bert_config_file=$BERT_BASE_DIR/bert_config.json \
      --init_checkpoint=$BERT_BASE_DIR/bert_model.ckpt \
      --train_batch_size=32 --max_seq_length=128 --max_predictions_per_seq=20 \
      --num_train_steps=20 --num_warmup_steps=10 --learning_rate=2e-5

Same flags, defaults and outputs as the original (checkpoints in output_dir
with the original variable names, adam_m/adam_v and global_step;
eval_results.txt). Re-running the same command resumes from the newest
checkpoint in output_dir. Added: the shared flags of modeling/flags.py
(strategy, precision, XLA, gradient accumulation, LAMB, keep_checkpoint_max,
random_seed), and --input_format=text: examples made from raw text (the
generator's input) while training, with a fresh mask on every pass:

    python run_pretraining.py --input_format=text \
      --input_file=./sample_text.txt --vocab_file=$BERT_BASE_DIR/vocab.txt \
      --output_dir=/tmp/pretraining_output --do_train=True \
      --bert_config_file=$BERT_BASE_DIR/bert_config.json ...
"""

from absl import flags

from modeling import flags as shared_flags
from modeling.tasks import common

FLAGS = flags.FLAGS

## Required parameters
flags.DEFINE_string(
    "input_file",
    None,
    "Input TF example files (can be a glob or comma separated).",
)

## Other parameters
flags.DEFINE_integer(
    "max_seq_length",
    128,
    "The maximum total input sequence length after WordPiece tokenization. "
    "Sequences longer than this will be truncated, and sequences shorter "
    "than this will be padded. Must match data generation.",
)
flags.DEFINE_integer(
    "max_predictions_per_seq",
    20,
    "Maximum number of masked LM predictions per sequence. "
    "Must match data generation.",
)
flags.DEFINE_integer("num_train_steps", 100000, "Number of training steps.")
flags.DEFINE_integer("num_warmup_steps", 10000, "Number of warmup steps.")
flags.DEFINE_integer("max_eval_steps", 100, "Maximum number of eval steps.")

## Added parameters
flags.DEFINE_enum(
    "input_format",
    "tfrecord",
    list(common.PRETRAINING_INPUT_FORMATS),
    "tfrecord: --input_file holds create_pretraining_data.py's records. "
    "text: --input_file holds raw text in that script's input format (one "
    "sentence per line, a blank line between documents), turned into "
    "examples while training with the generator's rules and flags "
    "(--vocab_file, --do_lower_case, --short_seq_prob, --masked_lm_prob, "
    "--do_whole_word_mask, seeded by --random_seed): every pass over the "
    "text draws new instances and masks (dynamic masking). Not the records "
    "create_pretraining_data.py would write.",
)

shared_flags.define_common_flags()
shared_flags.define_flags("eval_batch_size", *shared_flags.TEXT_INSTANCES)


def main(_):
    # Imported here so that `--help` does not load TensorFlow.
    from modeling.tasks import pretraining

    pretraining.run(shared_flags.settings_from_flags(pretraining.Settings))


def run():
    """Console entry point (setup.py: bert-run-pretraining)."""
    shared_flags.run_script(
        main, required=("input_file", "bert_config_file", "output_dir")
    )


if __name__ == "__main__":
    run()
