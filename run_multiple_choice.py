"""BERT multiple choice (SWAG format), the BERT paper's SWAG set-up.

    python run_multiple_choice.py --do_train --do_eval \
      --data_dir=$SWAG_DIR --vocab_file=$BERT_BASE_DIR/vocab.txt \
      --bert_config_file=$BERT_BASE_DIR/bert_config.json \
      --init_checkpoint=$BERT_BASE_DIR/bert_model.ckpt \
      --max_seq_length=80 --train_batch_size=16 --learning_rate=2e-5 \
      --num_train_epochs=3.0 --output_dir=/tmp/swag_output/

data_dir holds SWAG's train.csv, val.csv and test.csv (--train_file,
--eval_file, --predict_file name others). Each choice is packed as
`[CLS] sent1 [SEP] sent2 ending_i [SEP]`; one dense unit scores each
choice's pooled vector (root-scope `output_weights` [1, H] /
`output_bias` [1]) and a softmax over the choices picks one. Writes
checkpoints, eval_results.txt (eval_accuracy, eval_loss) and
test_results.tsv (one row of choice probabilities per test example).
"""

from absl import flags

from modeling import flags as shared_flags
from modeling.tasks.settings import multiple_choice as settings

FLAGS = flags.FLAGS

shared_flags.define_settings_flags(settings.Settings)


def main(_):
    # Imported here so that `--help` does not load TensorFlow.
    from modeling.tasks import multiple_choice

    multiple_choice.run(
        shared_flags.settings_from_flags(multiple_choice.Settings)
    )


def run():
    """Console entry point (setup.py: bert-run-multiple-choice)."""
    shared_flags.run_script(
        main, required=("vocab_file", "bert_config_file", "output_dir")
    )


if __name__ == "__main__":
    run()
