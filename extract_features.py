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

FLAGS = flags.FLAGS

flags.DEFINE_string(
    "input_file",
    None,
    "Input text file: one example per line, a single text or a pair "
    "written `text_a ||| text_b`.",
)

flags.DEFINE_string(
    "output_file",
    None,
    "Output JSON lines file: per input line, the tokens and their vectors "
    "from each layer of --layers.",
)

flags.DEFINE_string(
    "layers",
    "-1,-2,-3,-4",
    "Comma-separated indexes of the encoder layers to output; negative "
    "indexes count from the last layer (-1).",
)

flags.DEFINE_integer(
    "max_seq_length",
    128,
    "The maximum total input sequence length after WordPiece tokenization. "
    "Sequences longer than this will be truncated, and sequences shorter "
    "than this will be padded.",
)

flags.DEFINE_integer("batch_size", 32, "Batch size for predictions.")

flags.DEFINE_bool(
    "use_one_hot_embeddings",
    False,
    "If True, tf.one_hot will be used for embedding lookups, otherwise "
    "tf.nn.embedding_lookup will be used. On TPUs, this should be True "
    "since it is much faster.",
)

shared_flags.define_flags(
    "vocab_file",
    "do_lower_case",
    "bert_config_file",
    "init_checkpoint",
    "use_tpu",
    "master",
    "num_tpu_cores",
)


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
