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
random_seed).
"""

import os
import sys

from absl import app
from absl import flags
from absl import logging

from modeling import flags as shared_flags

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
flags.DEFINE_integer("train_batch_size", 32, "Total batch size for training.")
flags.DEFINE_integer("eval_batch_size", 8, "Total batch size for eval.")
flags.DEFINE_float("learning_rate", 5e-5, "The initial learning rate for Adam.")
flags.DEFINE_integer("num_train_steps", 100000, "Number of training steps.")
flags.DEFINE_integer("num_warmup_steps", 10000, "Number of warmup steps.")
flags.DEFINE_integer(
    "save_checkpoints_steps", 1000, "How often to save the model checkpoint."
)
flags.DEFINE_integer(
    "iterations_per_loop",
    1000,
    "How many steps to make in each estimator call (here: how many steps "
    "each compiled loop call runs between host-side logging).",
)
flags.DEFINE_integer("max_eval_steps", 100, "Maximum number of eval steps.")

shared_flags.define_common_flags()

# Exit status after SIGTERM (a checkpoint was saved): 128 + 15, as if killed.
SIGTERM_EXIT_CODE = 143


def main(_):
    # Imported here so that `--help` does not load TensorFlow.
    from modeling.tasks import pretraining
    from modeling.training import trainer

    settings = pretraining.Settings(
        bert_config_file=FLAGS.bert_config_file,
        input_file=FLAGS.input_file,
        output_dir=FLAGS.output_dir,
        init_checkpoint=FLAGS.init_checkpoint,
        max_seq_length=FLAGS.max_seq_length,
        max_predictions_per_seq=FLAGS.max_predictions_per_seq,
        do_train=FLAGS.do_train,
        do_eval=FLAGS.do_eval,
        train_batch_size=FLAGS.train_batch_size,
        eval_batch_size=FLAGS.eval_batch_size,
        max_eval_steps=FLAGS.max_eval_steps,
        seed=FLAGS.random_seed,
        strategy=FLAGS.strategy,
        use_tpu=FLAGS.use_tpu,
        tpu_name=FLAGS.tpu_name,
        tpu_zone=FLAGS.tpu_zone,
        gcp_project=FLAGS.gcp_project,
        master=FLAGS.master,
        run_config=shared_flags.run_config(
            FLAGS.output_dir,
            FLAGS.num_train_steps,
            FLAGS.num_warmup_steps,
            FLAGS.learning_rate,
        ),
    )
    try:
        pretraining.run(settings)
    except trainer.TrainingInterrupted as e:
        logging.warning("%s", e)
        sys.exit(SIGTERM_EXIT_CODE)


def run():
    """Console entry point (setup.py: bert-run-pretraining)."""
    flags.mark_flag_as_required("input_file")
    flags.mark_flag_as_required("bert_config_file")
    flags.mark_flag_as_required("output_dir")
    app.run(main)


if __name__ == "__main__":
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
    logging.set_verbosity(logging.INFO)
    run()
