"""BERT token classification (named entities, CoNLL-2003 format; any
tagging task in CoNLL-style or JSON Lines files).

    python run_ner.py --do_train --do_eval --do_predict \
      --data_dir=$CONLL_DIR --vocab_file=$BERT_BASE_DIR/vocab.txt \
      --bert_config_file=$BERT_BASE_DIR/bert_config.json \
      --init_checkpoint=$BERT_BASE_DIR/bert_model.ckpt \
      --max_seq_length=128 --train_batch_size=32 --learning_rate=5e-5 \
      --num_train_epochs=3.0 --output_dir=/tmp/ner_output/

data_dir holds train.txt / dev.txt / test.txt or CoNLL-2003's eng.train /
eng.testa / eng.testb (--train_file, --eval_file, --predict_file name
others). Writes checkpoints (original variable names; the head's
`output_weights` [L, H] / `output_bias` [L] at the root scope),
label_list.txt, eval_results.txt (entity precision/recall/F1 as conlleval,
token accuracy, loss) and test_predictions.txt (the predict file with a
predicted-tag column) and predictions.jsonl (per sentence: id, tokens,
predicted tags).

Files ending in .jsonl / .json are JSON Lines, one sentence per line:
{"id": ..., "tokens": [...], "tags": [...]} (--tokens_field, --tags_field).
Other files are CoNLL-style: the word first, the tag last (--tag_column).
Tags in any scheme: IOB1/IOB2, IOBES, BILOU (entity F1) or plain labels
(token accuracy).
"""

from absl import flags

from modeling import flags as shared_flags
from modeling.tasks.settings import ner as settings

FLAGS = flags.FLAGS

shared_flags.define_settings_flags(settings.Settings)


def main(_):
    # Imported here so that `--help` does not load TensorFlow.
    from modeling.tasks import ner

    ner.run(shared_flags.settings_from_flags(ner.Settings))


def run():
    """Console entry point (setup.py: bert-run-ner)."""
    shared_flags.run_script(
        main, required=("vocab_file", "bert_config_file", "output_dir")
    )


if __name__ == "__main__":
    run()
