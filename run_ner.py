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

FLAGS = flags.FLAGS

flags.DEFINE_string(
    "data_dir",
    None,
    "Folder of the CoNLL files: train.txt, dev.txt, test.txt (or eng.train, "
    "eng.testa, eng.testb).",
)
flags.DEFINE_string("train_file", None, "Training file (default: data_dir's).")
flags.DEFINE_string("eval_file", None, "Dev file (default: data_dir's).")
flags.DEFINE_string(
    "predict_file",
    None,
    "File to predict (default: data_dir's test file). Its tag column, if "
    "any, is kept; the predicted tag is appended to each word line.",
)
flags.DEFINE_string(
    "label_list",
    None,
    "Comma-separated tags in id order. Default: output_dir/label_list.txt "
    "if present, else the training file's tags ('O' first, then sorted); "
    "the list is written to output_dir/label_list.txt.",
)
shared_flags.define_flags(*shared_flags.FINE_TUNING)
flags.DEFINE_integer(
    "max_seq_length",
    128,
    "The maximum total input sequence length after WordPiece tokenization. "
    "Longer sentences are split into windows of whole words (none dropped).",
)
flags.DEFINE_bool("do_predict", False, "Whether to predict the test file.")
flags.DEFINE_bool(
    "eval_during_training",
    False,
    "Evaluate on the dev set at every checkpoint and keep the best by "
    "entity F1 under output_dir/best/ (eval_history.txt has every one).",
)
flags.DEFINE_string(
    "export_dir",
    None,
    "Write a serving SavedModel here: its signature takes raw sentences (space-separated words) and returns one tag per word, "
    "tokenized in the graph.",
)
flags.DEFINE_integer(
    "tag_column",
    None,
    "CoNLL-style files: the column of the tags, counted from 1 (the word is "
    "column 1). Default: the last.",
)
flags.DEFINE_string(
    "tokens_field",
    "tokens",
    "JSON Lines files (.jsonl/.json): the field holding each sentence's "
    "list of words.",
)
flags.DEFINE_string(
    "tags_field",
    "tags",
    "JSON Lines files: the field holding the list of tags (one per word).",
)
shared_flags.define_common_flags()


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
