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
from modeling.pretraining_data import create as settings

FLAGS = flags.FLAGS

shared_flags.define_settings_flags(settings.Settings)


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
