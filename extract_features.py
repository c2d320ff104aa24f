"""Extract pre-computed feature vectors from BERT (the original's flags).

    python extract_features.py --input_file=/tmp/input.txt \
      --output_file=/tmp/output.jsonl --vocab_file=$BERT_BASE_DIR/vocab.txt \
      --bert_config_file=$BERT_BASE_DIR/bert_config.json \
      --init_checkpoint=$BERT_BASE_DIR/bert_model.ckpt \
      --layers=-1,-2,-3,-4 --max_seq_length=128 --batch_size=8

One JSON object per input line, as the original writes it (about 15 kB per
token with the default four layers). The logic lives in modeling/tasks/extract.py.
"""

from absl import app
from absl import flags
from absl import logging

from modeling.tasks import extract
from modeling.training import distribute

FLAGS = flags.FLAGS

flags.DEFINE_string("input_file", None, "")

flags.DEFINE_string("output_file", None, "")

flags.DEFINE_string("layers", "-1,-2,-3,-4", "")

flags.DEFINE_string(
    "bert_config_file",
    None,
    "The config json file corresponding to the pre-trained BERT model. "
    "This specifies the model architecture.",
)

flags.DEFINE_integer(
    "max_seq_length",
    128,
    "The maximum total input sequence length after WordPiece tokenization. "
    "Sequences longer than this will be truncated, and sequences shorter "
    "than this will be padded.",
)

flags.DEFINE_string(
    "init_checkpoint",
    None,
    "Initial checkpoint (usually from a pre-trained BERT model).",
)

flags.DEFINE_string(
    "vocab_file",
    None,
    "The vocabulary file that the BERT model was trained on.",
)

flags.DEFINE_bool(
    "do_lower_case",
    True,
    "Whether to lower case the input text. Should be True for uncased "
    "models and False for cased models.",
)

flags.DEFINE_integer("batch_size", 32, "Batch size for predictions.")

flags.DEFINE_bool("use_tpu", False, "Whether to use TPU or GPU/CPU.")

flags.DEFINE_string(
    "master", None, "If using a TPU, the address of the master."
)

flags.DEFINE_integer(
    "num_tpu_cores",
    8,
    "Only used if `use_tpu` is True. Total number of TPU cores to use. "
    "(TPUStrategy uses every core of the TPU named by --master.)",
)

flags.DEFINE_bool(
    "use_one_hot_embeddings",
    False,
    "If True, tf.one_hot will be used for embedding lookups, otherwise "
    "tf.nn.embedding_lookup will be used. On TPUs, this should be True "
    "since it is much faster.",
)

_REQUIRED = (
    "input_file",
    "vocab_file",
    "bert_config_file",
    "init_checkpoint",
    "output_file",
)


def main(_):
    logging.set_verbosity(logging.INFO)
    strategy = distribute.create_strategy(
        use_tpu=FLAGS.use_tpu, master=FLAGS.master
    )
    count = extract.run_extraction(
        input_file=FLAGS.input_file,
        output_file=FLAGS.output_file,
        bert_config_file=FLAGS.bert_config_file,
        init_checkpoint=FLAGS.init_checkpoint,
        vocab_file=FLAGS.vocab_file,
        do_lower_case=FLAGS.do_lower_case,
        layers=FLAGS.layers,
        max_seq_length=FLAGS.max_seq_length,
        batch_size=FLAGS.batch_size,
        use_one_hot_embeddings=FLAGS.use_one_hot_embeddings,
        strategy=strategy,
    )
    logging.info("Wrote %d lines to %s", count, FLAGS.output_file)


def run():
    """Console entry point (setup.py: extract_features:run)."""
    for name in _REQUIRED:
        flags.mark_flag_as_required(name)
    app.run(main)


if __name__ == "__main__":
    for name in _REQUIRED:
        flags.mark_flag_as_required(name)
    app.run(main)
