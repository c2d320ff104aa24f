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
from modeling import options as shared_options
from modeling.data import file_io
from modeling.options import option
from modeling.pretraining_data import exact
from modeling.pretraining_data import generation
from modeling.pretraining_data import text
from modeling.text import tokenization

# --runner: this machine, or an Apache Beam pipeline.
RUNNERS = ("local", "beam")


@dataclasses.dataclass(kw_only=True)
class Settings:
    """create_pretraining_data's flags (the original's names and defaults,
    plus decode_errors, num_workers, shard_size_mb, per_shard_output,
    runner and beam_pipeline_options)."""

    input_file: str = option(
        help="Input raw text file (or comma-separated list of files; each may "
        "be a glob). One sentence per line, a blank line between "
        "documents."
    )
    output_file: str = option(
        help="Output TF example file (or comma-separated list of files). "
        "Instances are written round-robin across the files."
    )
    vocab_file: str = shared_options.vocab_file()
    do_lower_case: bool = shared_options.do_lower_case()
    do_whole_word_mask: bool = shared_options.do_whole_word_mask()
    max_seq_length: int = option(128, "Maximum sequence length.")
    max_predictions_per_seq: int = option(
        20, "Maximum number of masked LM predictions per sequence."
    )
    random_seed: int = option(12345, "Random seed for data generation.")
    dupe_factor: int = option(
        10,
        "Number of times to duplicate the input data (with different masks).",
    )
    masked_lm_prob: float = shared_options.masked_lm_prob()
    short_seq_prob: float = shared_options.short_seq_prob()
    decode_errors: str = option(
        "strict",
        "What to do with input bytes that are not UTF-8: 'strict' stops with "
        "an error naming the file and line (the original under Python 3 "
        "stopped with a UnicodeDecodeError); 'replace' puts U+FFFD in their "
        "place (the tokenizer then deletes it) and 'ignore' drops them (the "
        "original under Python 2); both count the lines affected.",
        choices=text.DECODE_ERRORS,
    )
    num_workers: int = option(
        0,
        "0 (default): exact mode, the original's records (all instances are "
        "held in memory, compactly, for the final shuffle; up to 4 CPUs "
        "tokenize and encode, which does not change the output). N >= 1: "
        "scale mode with N worker processes over input shards (N=1 runs "
        "in-process), memory bounded independently of corpus size, output "
        "streamed as shards complete. Scale-mode records are deterministic "
        "for a given seed (and do not depend on N) but are NOT the "
        "original's: each shard has its own random stream, next-sentence "
        "negatives come from the same shard, and instances are shuffled "
        "within each shard, not globally.",
    )
    shard_size_mb: float = option(
        1.0,
        "Scale mode and --runner=beam: size of an input shard in MB of text "
        "(cut at a blank line near the boundary when there is one). Each "
        "shard's instances (all dupe_factor passes) are shuffled together, so "
        "bigger shards mix better and use more memory per worker (about 20 MB "
        "of records per MB of text at dupe_factor=10).",
    )
    per_shard_output: bool = option(
        False,
        "Scale mode: write each input shard's records to its own file, "
        "<output_file>-SSSSS-of-NNNNN (one --output_file), instead of "
        "round-robin across the --output_file list: the layout --runner=beam "
        "writes, file for file the same records.",
    )
    runner: str = option(
        "local",
        "'local': this machine (exact or scale mode, per --num_workers). "
        "'beam': the scale mode's per-shard work as an Apache Beam pipeline "
        "(pip install .[beam]), on the runner --beam_pipeline_options names. "
        "It writes the scale mode's records for the same --random_seed and "
        "--shard_size_mb, one file per input shard: "
        "<output_file>-SSSSS-of-NNNNN.",
        choices=RUNNERS,
    )
    # beam.DEFAULT_PIPELINE_OPTIONS; None takes it.
    beam_pipeline_options: str | None = option(
        None,
        "--runner=beam: Beam's pipeline options, as a command line. Default: "
        "'--runner=DirectRunner --direct_num_workers=0 "
        "--direct_running_mode=multi_processing' (one local worker process "
        "per CPU). The DirectRunner runs on Beam's local FnApiRunner, without "
        "trying to download the Prism runner. For Dataflow: "
        "'--runner=DataflowRunner --project=P --region=R "
        "--temp_location=gs://... --setup_file=./setup.py' with gs:// input "
        "and output paths.",
    )

    def ignored_flags(self):
        """{flag: why} of the flags this run does not read (modeling/
        flags.py warns about those given)."""
        ignored = {}
        if self.runner == "local" and not self.num_workers:
            ignored["shard_size_mb"] = (
                "exact mode (--num_workers=0) reads the corpus whole"
            )
        if self.runner != "beam":
            ignored["beam_pipeline_options"] = "--runner is not beam"
        return ignored

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
