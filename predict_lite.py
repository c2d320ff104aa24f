"""Predict a file with a classifier, tagger, multiple-choice or
question-answering export, without TensorFlow.

    python predict_lite.py --export_dir=/tmp/reviews_export \
      --input_file=reviews_new.jsonl --output_file=/tmp/predictions.jsonl

The export is run_classifier.py's, run_ner.py's, run_multiple_choice.py's
or run_squad.py's --export_dir written with --predict_runtime=tflite (or
tflite_int8): its
model.tflite runs on the standalone LiteRT runtime (modeling/tasks/lite.py). A classifier's input is
CSV, TSV or JSON Lines read as run_classifier.py's --test_file (the same
columns and ids), or a .txt file of one text per line; a tagger's is read as
run_ner.py's --predict_file (CoNLL-style, or JSON Lines with "tokens"); a
multiple-choice model's as run_multiple_choice.py's (SWAG's columns); a
question-answering model's as run_squad.py's (SQuAD JSON, or CSV / TSV /
JSON Lines with question and context columns). The
output is the script's predictions.jsonl format: one JSON object per row,
its id and its prediction by name. Neither this script nor what it imports
loads TensorFlow or Keras.
"""

from absl import flags

from modeling import flags as shared_flags

FLAGS = flags.FLAGS

flags.DEFINE_string(
    "export_dir",
    None,
    "The classifier, tagger, multiple-choice or question-answering export "
    "(with its model.tflite).",
)
flags.DEFINE_string(
    "input_file",
    None,
    "The texts: for a classifier .csv, .tsv, .jsonl / .json (columns as "
    "run_classifier.py's --test_file) or .txt (one text per line); for a "
    "tagger, a multiple-choice or a question-answering model, as its "
    "script's --predict_file.",
)
flags.DEFINE_string(
    "output_file", None, "Where to write the predictions (JSON Lines)."
)
flags.DEFINE_string(
    "text_a_column",
    None,
    "The text column (default: the one the export was trained on, else as "
    "run_classifier.py).",
)
flags.DEFINE_string(
    "text_b_column",
    None,
    "A pair model's second text column (default: the one it was trained on).",
)
flags.DEFINE_string("id_column", None, "The id column (default: id, idx, ...).")
flags.DEFINE_integer("batch_size", 32, "Rows per batch.")
flags.DEFINE_integer(
    "num_threads", None, "CPU threads (default: the machine's cores)."
)


def main(_):
    from modeling.tasks import lite

    lite.predict_file(
        FLAGS.export_dir,
        FLAGS.input_file,
        FLAGS.output_file,
        text_a_column=FLAGS.text_a_column,
        text_b_column=FLAGS.text_b_column,
        id_column=FLAGS.id_column,
        batch_size=FLAGS.batch_size,
        num_threads=FLAGS.num_threads,
    )


def run():
    """Console entry point (setup.py: bert-predict-lite)."""
    shared_flags.run_script(
        main, required=("export_dir", "input_file", "output_file")
    )


if __name__ == "__main__":
    run()
