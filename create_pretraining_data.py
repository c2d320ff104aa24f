"""Create masked LM/next sentence masked_lm TF examples for BERT.

The original release's script with its flags and defaults. By default
(`--num_workers=0`) it writes the same records as the original for the same
inputs, vocabulary, flags and seed. With `--num_workers=N` (N >= 1) it runs
the scale mode instead: N processes over input shards, bounded memory,
records deterministic for a seed but NOT those of the original. With
`--runner=beam` the scale mode's shards run as an Apache Beam pipeline
(local, Dataflow, Flink, Spark): the scale mode's records, one file per
shard.
"""

from absl import flags

from modeling import flags as shared_flags
from modeling.pretraining_data import text

FLAGS = flags.FLAGS

## Required parameters
flags.DEFINE_string(
    "input_file",
    None,
    "Input raw text file (or comma-separated list of files; each may be a "
    "glob). One sentence per line, a blank line between documents.",
)
flags.DEFINE_string(
    "output_file",
    None,
    "Output TF example file (or comma-separated list of files). Instances "
    "are written round-robin across the files.",
)
## Other parameters (the original's)
# vocab_file, do_lower_case, do_whole_word_mask, masked_lm_prob and
# short_seq_prob (shared with run_pretraining --input_format=text).
shared_flags.define_flags(*shared_flags.TEXT_INSTANCES)
flags.DEFINE_integer("max_seq_length", 128, "Maximum sequence length.")
flags.DEFINE_integer(
    "max_predictions_per_seq",
    20,
    "Maximum number of masked LM predictions per sequence.",
)
flags.DEFINE_integer("random_seed", 12345, "Random seed for data generation.")
flags.DEFINE_integer(
    "dupe_factor",
    10,
    "Number of times to duplicate the input data (with different masks).",
)

## Added parameters
flags.DEFINE_enum(
    "decode_errors",
    "strict",
    text.DECODE_ERRORS,
    "What to do with input bytes that are not UTF-8: 'strict' stops with "
    "an error naming the file and line; 'replace' puts U+FFFD in their "
    "place (the tokenizer then deletes it) and 'ignore' drops them (the "
    "original's silent behaviour); both count the lines affected.",
)
flags.DEFINE_integer(
    "num_workers",
    0,
    "0 (default): exact mode, the original's records (all instances are "
    "held in memory, compactly, for the final shuffle; up to 4 CPUs "
    "tokenize and encode, which does not change the output). N >= 1: scale "
    "mode with N worker processes over input shards (N=1 runs in-process), "
    "memory bounded independently of corpus size, output streamed as "
    "shards complete. "
    "Scale-mode records are deterministic for a given seed (and do not "
    "depend on N) but are NOT the original's: each shard has its own "
    "random stream, next-sentence negatives come from the same shard, and "
    "instances are shuffled within each shard, not globally.",
)
flags.DEFINE_float(
    "shard_size_mb",
    1.0,
    "Scale mode and --runner=beam: size of an input shard in MB of text "
    "(cut at a blank line near the boundary when there is one). Each "
    "shard's instances (all dupe_factor passes) are shuffled together, so "
    "bigger shards mix better and use more memory per worker (about 20 MB "
    "of records per MB of text at dupe_factor=10).",
)
flags.DEFINE_bool(
    "per_shard_output",
    False,
    "Scale mode: write each input shard's records to its own file, "
    "<output_file>-SSSSS-of-NNNNN (one --output_file), instead of "
    "round-robin across the --output_file list: the layout --runner=beam "
    "writes, file for file the same records.",
)
flags.DEFINE_enum(
    "runner",
    "local",
    ["local", "beam"],
    "'local': this machine (exact or scale mode, per --num_workers). "
    "'beam': the scale mode's per-shard work as an Apache Beam pipeline "
    "(pip install .[beam]), on the runner --beam_pipeline_options names. "
    "It writes the scale mode's records for the same --random_seed and "
    "--shard_size_mb, one file per input shard: "
    "<output_file>-SSSSS-of-NNNNN.",
)
flags.DEFINE_string(
    "beam_pipeline_options",
    None,
    "--runner=beam: Beam's pipeline options, as a command line. Default: "
    "'--runner=DirectRunner --direct_num_workers=0 "
    "--direct_running_mode=multi_processing' (one local worker process per "
    "CPU). The DirectRunner runs on Beam's local FnApiRunner, without "
    "trying to download the Prism runner. For Dataflow: '--runner="
    "DataflowRunner --project=P --region=R --temp_location=gs://... "
    "--setup_file=./setup.py' with gs:// input and output paths.",
)


def main(_):
    from modeling.pretraining_data import create

    create.run(shared_flags.settings_from_flags(create.Settings))


def run():
    """Console entry point (setup.py: bert-create-pretraining-data)."""
    shared_flags.run_script(
        main, required=("input_file", "output_file", "vocab_file")
    )


if __name__ == "__main__":
    run()
