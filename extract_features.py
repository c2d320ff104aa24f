"""Extract pre-computed feature vectors from BERT (the original's flags).

    python extract_features.py --input_file=/tmp/input.txt \
      --output_file=/tmp/output.jsonl --vocab_file=$BERT_BASE_DIR/vocab.txt \
      --bert_config_file=$BERT_BASE_DIR/bert_config.json \
      --init_checkpoint=$BERT_BASE_DIR/bert_model.ckpt \
      --layers=-1,-2,-3,-4 --max_seq_length=128 --batch_size=8

One JSON object per input line, as the original writes it (about 15 kB per
token with the default four layers). The logic lives in modeling/tasks/extract.py.
"""

from absl import flags

from modeling import flags as shared_flags
from modeling.tasks.settings import extract as settings

FLAGS = flags.FLAGS

shared_flags.define_settings_flags(settings.Settings)


def main(_):
    # Imported here so that `--help` does not load TensorFlow.
    from modeling.tasks import extract

    extract.run(shared_flags.settings_from_flags(extract.Settings))


def run():
    """Console entry point (setup.py: bert-extract-features)."""
    shared_flags.run_script(
        main,
        required=(
            "input_file",
            "vocab_file",
            "bert_config_file",
            "init_checkpoint",
            "output_file",
        ),
    )


if __name__ == "__main__":
    run()
