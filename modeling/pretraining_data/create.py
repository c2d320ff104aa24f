"""What create_pretraining_data.py does: its `Settings` and `run`.

Three ways to make the records: exact mode (runner "local", num_workers=0:
the original's records), scale mode (runner "local", num_workers >= 1:
local worker processes over input shards) and the Beam runner (runner
"beam": the scale mode's shards as an Apache Beam pipeline). None of them
imports TensorFlow unless a path is remote (gs://...).
"""

import dataclasses

from absl import logging

from modeling import errors
from modeling.data import file_io
from modeling.pretraining_data import exact
from modeling.pretraining_data import generation
from modeling.text import tokenization


@dataclasses.dataclass
class Settings:
    """create_pretraining_data's flags (the original's names and defaults,
    plus decode_errors, num_workers, shard_size_mb, per_shard_output,
    runner and beam_pipeline_options)."""

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
    per_shard_output: bool = False
    runner: str = "local"
    # beam.DEFAULT_PIPELINE_OPTIONS; None takes it.
    beam_pipeline_options: str | None = None

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


RUNNERS = ("local", "beam")


def _check_runner(s):
    if s.runner not in RUNNERS:
        raise errors.UserError(
            f"--runner={s.runner}: must be one of {', '.join(RUNNERS)}"
        )
    if s.num_workers < 0:
        raise errors.UserError(f"--num_workers={s.num_workers}: must be >= 0")
    if s.runner == "beam" and s.num_workers:
        raise errors.UserError(
            f"--num_workers={s.num_workers} is the local runner's; with "
            "--runner=beam the runner's options set the parallelism "
            "(--beam_pipeline_options='--direct_num_workers=N' locally)"
        )
    if s.per_shard_output and s.runner == "local" and not s.num_workers:
        raise errors.UserError(
            "--per_shard_output needs input shards: --num_workers >= 1 "
            "(scale mode) or --runner=beam"
        )


def run(settings):
    """create_pretraining_data's main(): writes the records.

    Raises:
      ValueError: a bad setting, no file matching --input_file, bad input
        text (naming the file and line).
    """
    s = settings
    _check_runner(s)
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
    shard_bytes = int(s.shard_size_mb * 1e6)
    if s.runner == "beam":
        # Imported here: it needs Apache Beam (an optional extra).
        from modeling.pretraining_data import beam

        beam_options = s.beam_pipeline_options
        if beam_options is None:
            beam_options = beam.DEFAULT_PIPELINE_OPTIONS
        beam.create_with_beam(
            input_files,
            outputs,
            tokenizer,
            options,
            shard_bytes=shard_bytes,
            decode_errors=s.decode_errors,
            beam_pipeline_options=beam_options,
        )
    elif s.num_workers == 0:
        exact.create_exact(
            input_files, outputs, tokenizer, options, s.decode_errors
        )
    else:
        from modeling.pretraining_data import scale

        scale.create_scaled(
            input_files,
            outputs,
            tokenizer,
            options,
            num_workers=s.num_workers,
            shard_bytes=shard_bytes,
            decode_errors=s.decode_errors,
            per_shard_output=s.per_shard_output,
        )
