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
from modeling.tasks.settings import pretraining as settings

FLAGS = flags.FLAGS

shared_flags.define_settings_flags(settings.Settings)


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
