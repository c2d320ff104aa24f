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
from modeling.tasks.settings import squad as settings

FLAGS = flags.FLAGS

shared_flags.define_settings_flags(settings.Settings)


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
