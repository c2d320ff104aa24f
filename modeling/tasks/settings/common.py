"""The Settings every model runner shares: CommonSettings (model,
checkpoint, modes, strategy and TPU flags, and the training flags in its
`run_config`), FineTuningSettings and LongInputSettings. One field per flag,
same names (modeling/options.py)."""

import dataclasses
import typing

from modeling import options
from modeling.data import long_inputs as long_inputs_lib
from modeling.options import option
from modeling.tasks import common
from modeling.training import run_config as run_config_lib


@dataclasses.dataclass(kw_only=True)
class CommonSettings:
    """The flags every model runner shares, same names.

    Keyword-only, so that a task's Settings can add required fields before
    them. A subclass that redeclares a field without `option` takes its
    flag out of its script (extract_features trains nothing).

    Attributes:
      strategy: a `--strategy` name, or a tf.distribute.Strategy already
        built (a notebook's `distribute.auto_strategy`), used as it is; with
        a TPUStrategy set use_tpu=True too (the TPU's fixed batch shapes).
      run_config: a RunConfig (modeling/training/run_config.py) from the
        shared training flags, or None for a runner that does not train
        (extract_features).
    """

    bert_config_file: str = options.bert_config_file(dataclasses.MISSING)
    output_dir: str | None = option(
        None,
        "The output directory where the model checkpoints will be written.",
    )
    init_checkpoint: str | None = options.init_checkpoint()
    do_train: bool = option(False, "Whether to run training.")
    do_eval: bool = option(False, "Whether to run eval on the dev set.")
    random_seed: int | None = option(
        None,
        "Seed for weight initialization, dropout and (run_pretraining) the "
        "input shuffle; with run_pretraining --input_format=text also the "
        "instances and masks made from the text. Unset: random init, input "
        "seed 12345 (create_pretraining_data's default).",
    )
    strategy: typing.Any = option(
        "default",
        "tf.distribute strategy: default (one device), mirrored (all local "
        "GPUs), multi_worker_mirrored (hosts from the TF_CONFIG environment "
        "variable), tpu (same as --use_tpu).",
        choices=run_config_lib.STRATEGIES,
    )
    use_tpu: bool = option(False, "Whether to use TPU or GPU/CPU.")
    tpu_name: str | None = option(
        None,
        "The Cloud TPU to use for training. This should be either the name "
        "used when creating the Cloud TPU, or a grpc://ip.address.of.tpu:8470 "
        "url.",
    )
    tpu_zone: str | None = option(
        None,
        "[Optional] GCE zone where the Cloud TPU is located in. If not "
        "specified, we will attempt to automatically detect it.",
    )
    gcp_project: str | None = option(
        None,
        "[Optional] Project name for the Cloud TPU-enabled project. If not "
        "specified, we will attempt to automatically detect it.",
    )
    master: str | None = option(None, "[Optional] TensorFlow master URL.")
    num_tpu_cores: int = option(
        8,
        "Only used if `use_tpu` is True. Total number of TPU cores to use "
        "(TPUStrategy uses every core of the TPU it connects to).",
    )
    # The training flags (run_config.RunConfig's options): the RunConfig
    # built from them, or None for a runner that does not train.
    run_config: typing.Any = options.nested(run_config_lib.RunConfig)

    def ignored_flags(self):
        """{flag: why} of the flags this run does not read (warned about
        when given: modeling/flags.py)."""
        ignored = {
            "num_tpu_cores": "a TPU run uses every core of the TPU it "
            "connects to (TPUStrategy)"
        }
        if not self.use_tpu and self.strategy != "tpu":
            for name in ("tpu_name", "tpu_zone", "gcp_project", "master"):
                ignored[name] = "it names a TPU, and --use_tpu is not set"
        return ignored


@dataclasses.dataclass(kw_only=True)
class FineTuningSettings(CommonSettings):
    """The flags every fine-tuning runner shares (run_classifier, run_squad,
    run_ner, run_multiple_choice), same names and defaults; each task adds
    its own (max_seq_length among them: its default differs by task)."""

    vocab_file: str = options.vocab_file()
    do_lower_case: bool = options.do_lower_case()
    # Each script declares these three with its own help.
    do_predict: bool = False
    train_batch_size: int = options.train_batch_size()
    eval_batch_size: int = options.eval_batch_size()
    predict_batch_size: int = option(8, "Total batch size for predict.")
    num_train_epochs: float = option(
        3.0, "Total number of training epochs to perform."
    )
    warmup_proportion: float = option(
        0.1,
        "Proportion of training to perform linear learning rate warmup for. "
        "E.g., 0.1 = 10% of training.",
    )
    eval_during_training: bool = False
    export_dir: str | None = None

    def ignored_flags(self):
        ignored = super().ignored_flags()
        if not self.do_train:
            ignored["eval_during_training"] = (
                "it evaluates at each checkpoint of training, and --do_train "
                "is not set"
            )
        return ignored

    def __post_init__(self):
        if not self.output_dir:
            raise ValueError("output_dir is required")
        common.check_counts(self)
        common.check_output_folders(self)
        if self.run_config is None:
            # The shared training flags' defaults (a task built in Python).
            self.run_config = run_config_lib.RunConfig(self.output_dir, 0)
        common.check_predict_runtime(self)


@dataclasses.dataclass(kw_only=True)
class LongInputSettings:
    """--long_inputs and its companions (modeling/data/long_inputs.py), for
    run_classifier and run_embeddings. None: what the run that trained in
    output_dir used (long_inputs.json), else truncate and the defaults."""

    long_inputs: str | None = option(
        None,
        "Texts longer than max_seq_length: truncate (the original: the first "
        "pieces; the default), head_tail (the first --head_tokens pieces and "
        "the last ones), chunks (windows over the whole text, outputs "
        "combined by --chunk_pooling). Default: what the run that trained in "
        "output_dir used, else truncate.",
        choices=long_inputs_lib.STRATEGIES,
    )
    head_tokens: int | None = option(
        None,
        "--long_inputs=head_tail: pieces kept from the start (default 128; at "
        "most half of max_seq_length), the rest from the end.",
    )
    chunk_stride: int | None = option(
        None,
        "--long_inputs=chunks: pieces of overlap between consecutive windows, "
        "whole words (default 0).",
    )
    chunk_pooling: str | None = option(
        None,
        "--long_inputs=chunks: a text's windows combined by the mean "
        "(default) or the maximum of their outputs.",
        choices=long_inputs_lib.POOLINGS,
    )
