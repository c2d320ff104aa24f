"""run_pretraining's Settings: its flags (modeling/tasks/pretraining.py runs
them)."""

import dataclasses
import typing

from modeling import options
from modeling.options import option
from modeling.pretraining_data import generation
from modeling.tasks import common as common_lib
from modeling.tasks.settings import common
from modeling.training import run_config


@dataclasses.dataclass(kw_only=True)
class RunConfig(run_config.RunConfig):
    """The training flags, with run_pretraining's step counts."""

    num_train_steps: int = option(100000, "Number of training steps.")
    num_warmup_steps: int = option(10000, "Number of warmup steps.")


@dataclasses.dataclass(kw_only=True)
class Settings(common.CommonSettings):
    """run_pretraining's flags (original names and defaults) plus the new
    ones; the shared ones (bert_config_file, output_dir, init_checkpoint,
    modes, random_seed, strategy, TPU, run_config) are
    common.CommonSettings'."""

    input_file: str = option(
        help="Input TF example files (can be a glob or comma separated)."
    )
    max_seq_length: int = option(
        128,
        "The maximum total input sequence length after WordPiece "
        "tokenization. Sequences longer than this will be truncated, and "
        "sequences shorter than this will be padded. Must match data "
        "generation.",
    )
    max_predictions_per_seq: int = option(
        20,
        "Maximum number of masked LM predictions per sequence. Must match "
        "data generation.",
    )
    train_batch_size: int = options.train_batch_size()
    eval_batch_size: int = options.eval_batch_size()
    max_eval_steps: int = option(100, "Maximum number of eval steps.")
    # --input_format=text: examples made from raw text while training
    # (modeling/data/dynamic_masking.py), with the generator's flags.
    input_format: str = option(
        "tfrecord",
        "tfrecord: --input_file holds create_pretraining_data.py's records. "
        "text: --input_file holds raw text in that script's input format (one "
        "sentence per line, a blank line between documents), turned into "
        "examples while training with the generator's rules and flags "
        "(--vocab_file, --do_lower_case, --short_seq_prob, --masked_lm_prob, "
        "--do_whole_word_mask, seeded by --random_seed): every pass over the "
        "text draws new instances and masks (dynamic masking). Not the "
        "records create_pretraining_data.py would write.",
        choices=common_lib.PRETRAINING_INPUT_FORMATS,
    )
    vocab_file: str | None = options.vocab_file(None)
    do_lower_case: bool = options.do_lower_case()
    masked_lm_prob: float = options.masked_lm_prob()
    short_seq_prob: float = options.short_seq_prob()
    do_whole_word_mask: bool = options.do_whole_word_mask()
    run_config: typing.Any = options.nested(RunConfig)

    def __post_init__(self):
        if not self.output_dir:
            raise ValueError("output_dir is required")
        common_lib.check_counts(self)
        steps = self.run_config and self.run_config.num_train_steps
        if self.do_train and steps is not None and steps < 1:
            raise ValueError(f"--num_train_steps={steps}: must be at least 1")
        common_lib.check_output_folders(self)
        if self.input_format not in common_lib.PRETRAINING_INPUT_FORMATS:
            raise ValueError(
                f"--input_format={self.input_format}: must be one of "
                f"{', '.join(common_lib.PRETRAINING_INPUT_FORMATS)}"
            )
        if self.input_format == "text" and not self.vocab_file:
            raise ValueError(
                "--input_format=text needs --vocab_file, the vocabulary "
                "that tokenizes the text"
            )

    def ignored_flags(self):
        ignored = super().ignored_flags()
        if self.input_format != "text":
            why = (
                "the records were tokenized and masked when made "
                "(--input_format=tfrecord; set it with "
                "create_pretraining_data.py, or use --input_format=text)"
            )
            for name in (
                "vocab_file",
                "do_lower_case",
                "masked_lm_prob",
                "short_seq_prob",
                "do_whole_word_mask",
            ):
                ignored[name] = why
        return ignored

    @property
    def data_seed(self):
        """The input's seed: --random_seed, else a fixed one (resuming
        needs the same data order)."""
        if self.random_seed is None:
            return common_lib.DEFAULT_DATA_SEED
        return self.random_seed

    def generation_options(self):
        """The generator's options of --input_format=text."""
        return generation.GenerationOptions(
            max_seq_length=self.max_seq_length,
            max_predictions_per_seq=self.max_predictions_per_seq,
            masked_lm_prob=self.masked_lm_prob,
            short_seq_prob=self.short_seq_prob,
            do_whole_word_mask=self.do_whole_word_mask,
            random_seed=self.data_seed,
        )
