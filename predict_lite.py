"""Predict a file with a classifier, tagger, multiple-choice,
question-answering or embedding export, without TensorFlow.

    python predict_lite.py --export_dir=/tmp/reviews_export \
      --input_file=reviews_new.jsonl --output_file=/tmp/predictions.jsonl

The export is run_classifier.py's, run_ner.py's, run_multiple_choice.py's,
run_squad.py's or run_embeddings.py's --export_dir written with --predict_runtime=tflite (or
tflite_int8): its
model.tflite runs on the standalone LiteRT runtime (modeling/tasks/lite.py). A classifier's input is
CSV, TSV or JSON Lines read as run_classifier.py's --test_file (the same
columns and ids), or a .txt file of one text per line; a tagger's is read as
run_ner.py's --predict_file (CoNLL-style, or JSON Lines with "tokens"); a
multiple-choice model's as run_multiple_choice.py's (SWAG's columns); a
question-answering model's as run_squad.py's (SQuAD JSON, or CSV / TSV /
JSON Lines with question and context columns); an embedding model's as
run_embeddings.py's (.txt, or a table with a text column). The
output is the script's predictions.jsonl format: one JSON object per row,
its id and its prediction by name. Neither this script nor what it imports
loads TensorFlow or Keras.
"""

import dataclasses

from absl import flags

from modeling import flags as shared_flags
from modeling.tasks.settings import lite as settings

FLAGS = flags.FLAGS

shared_flags.define_settings_flags(settings.Settings)


def main(_):
    from modeling.tasks import lite

    s = shared_flags.settings_from_flags(settings.Settings)
    lite.predict_file(**dataclasses.asdict(s))


def run():
    """Console entry point (setup.py: bert-predict-lite)."""
    shared_flags.run_script(
        main, required=("export_dir", "input_file", "output_file")
    )


if __name__ == "__main__":
    run()
