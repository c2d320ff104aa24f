"""Learns a WordPiece vocabulary (vocab.txt) from raw text files.

Example (the committed vocab/books_uncased_8k.txt):

  python vocab/build_vocab.py \
    --input_file=../shared/data/corpus/books_corpus.txt \
    --output_file=vocab/books_uncased_8k.txt \
    --vocab_size=8000 --do_lower_case=True
"""

import dataclasses
import os
import sys
import time

from absl import flags
from absl import logging

# Run as a file (python vocab/build_vocab.py) from a checkout.
sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from modeling import flags as shared_flags
from modeling.data import file_io
from modeling.text import vocab_builder

FLAGS = flags.FLAGS

## Required parameters
flags.DEFINE_string(
    "input_file",
    None,
    "UTF-8 text file(s) to learn from: a comma-separated list, each may be "
    "a glob. Any line layout works (one sentence per line is typical).",
)
flags.DEFINE_string(
    "output_file",
    None,
    "Where to write the vocabulary, one token per line (written to a "
    "temporary file first, then renamed).",
)

## Other parameters
flags.DEFINE_integer(
    "vocab_size",
    8000,
    "Number of tokens, special ones included (at most: fewer when the text "
    "runs out of pairs seen --min_frequency times; a warning says so). "
    "bert_config.json's vocab_size must be at least the number written.",
)
flags.DEFINE_bool(
    "do_lower_case",
    True,
    "Lower-case and strip accents before learning (an uncased vocabulary). "
    "Use the same value when tokenizing with the vocabulary.",
)
flags.DEFINE_integer(
    "num_unused",
    99,
    "Number of [unusedN] placeholder tokens. 99 keeps [UNK]/[CLS]/[SEP]/"
    "[MASK] at ids 100-103 as in the released vocabularies (which have "
    "994, the rest after [MASK]).",
)
flags.DEFINE_integer(
    "min_frequency",
    2,
    "Pairs seen fewer times are never merged; the vocabulary is smaller "
    "than vocab_size when the text runs out of such pairs.",
)


@dataclasses.dataclass
class _Files:
    """The flags the scripts' output check reads (an output file that is an
    input, or that an input glob matches: a second run learned from the
    first's vocabulary, or replaced its corpus)."""

    input_file: str
    output_file: str


def main(_):
    output = FLAGS.output_file
    shared_flags.check_outputs_are_not_inputs(_Files(FLAGS.input_file, output))
    file_io.check_file_path(output, f"--output_file={output}")
    input_files = file_io.expand_input_files(FLAGS.input_file)
    start = time.time()
    tokens = vocab_builder.build_vocab(
        input_files,
        FLAGS.output_file,
        FLAGS.vocab_size,
        do_lower_case=FLAGS.do_lower_case,
        num_unused=FLAGS.num_unused,
        min_frequency=FLAGS.min_frequency,
    )
    logging.info(
        "Wrote %d tokens to %s in %.1f s",
        len(tokens),
        FLAGS.output_file,
        time.time() - start,
    )
    if len(tokens) < FLAGS.vocab_size:
        logging.warning(
            "%d tokens, fewer than --vocab_size=%d: the text ran out of "
            "pairs seen --min_frequency=%d times. Models using it need "
            "bert_config.json's vocab_size >= %d.",
            len(tokens),
            FLAGS.vocab_size,
            FLAGS.min_frequency,
            len(tokens),
        )


if __name__ == "__main__":
    shared_flags.run_script(main, required=("input_file", "output_file"))
