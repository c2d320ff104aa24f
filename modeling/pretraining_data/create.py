"""What create_pretraining_data.py does: its `Settings` and `run`.

Exact mode (num_workers=0) does not import TensorFlow (records are written
by modeling/pretraining_data/records.py); scale mode does.
"""

import dataclasses

from absl import logging

from modeling.data import file_io
from modeling.pretraining_data import exact
from modeling.pretraining_data import generation
from modeling.text import tokenization


@dataclasses.dataclass
class Settings:
    """create_pretraining_data's flags (the original's names and defaults,
    plus decode_errors, num_workers and shard_size_mb)."""

    input_file: str
    output_file: str
    vocab_file: str
    do_lower_case: bool = True
    do_whole_word_mask: bool = False
    max_seq_length: int = 128
    max_predictions_per_seq: int = 20
    random_seed: int = 12345
    dupe_factor: int = 10
    masked_lm_prob: float = 0.15
    short_seq_prob: float = 0.1
    decode_errors: str = "strict"
    num_workers: int = 0
    shard_size_mb: float = 1.0

    def options(self):
        """The generation.GenerationOptions of these settings."""
        return generation.GenerationOptions(
            max_seq_length=self.max_seq_length,
            max_predictions_per_seq=self.max_predictions_per_seq,
            masked_lm_prob=self.masked_lm_prob,
            short_seq_prob=self.short_seq_prob,
            dupe_factor=self.dupe_factor,
            do_whole_word_mask=self.do_whole_word_mask,
            random_seed=self.random_seed,
        )


def output_files(value):
    """--output_file's comma-separated list.

    Raises:
      ValueError: an empty entry.
    """
    files = [f.strip() for f in value.split(",")]
    if not all(files):
        raise ValueError(f"--output_file={value!r} has an empty entry")
    return files


def run(settings):
    """create_pretraining_data's main(): writes the records.

    Raises:
      ValueError: a bad setting, no file matching --input_file, bad input
        text (naming the file and line).
    """
    s = settings
    if s.num_workers < 0:
        raise ValueError(f"--num_workers={s.num_workers}: must be >= 0")
    input_files = file_io.expand_input_files(s.input_file)
    outputs = output_files(s.output_file)
    options = s.options()
    options.validate()
    tokenizer = tokenization.FullTokenizer(
        vocab_file=s.vocab_file, do_lower_case=s.do_lower_case
    )
    logging.info("*** Reading from input files ***")
    for input_file in input_files:
        logging.info("  %s", input_file)
    logging.info("*** Writing to output files ***")
    for output_file in outputs:
        logging.info("  %s", output_file)
    if s.num_workers == 0:
        exact.create_exact(
            input_files, outputs, tokenizer, options, s.decode_errors
        )
    else:
        # Imported here: it loads TensorFlow, which the exact mode loads in
        # the background instead.
        from modeling.pretraining_data import scale

        scale.create_scaled(
            input_files,
            outputs,
            tokenizer,
            options,
            num_workers=s.num_workers,
            shard_bytes=int(s.shard_size_mb * 1e6),
            decode_errors=s.decode_errors,
        )
