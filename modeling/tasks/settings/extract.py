"""extract_features' Settings: its flags (modeling/tasks/extract.py runs
them)."""

import dataclasses
import typing

from modeling import options
from modeling.options import option
from modeling.tasks import common as common_lib
from modeling.tasks.settings import common


@dataclasses.dataclass(kw_only=True)
class Settings(common.CommonSettings):
    """extract_features' flags (the original's names and defaults); the
    shared ones (bert_config_file, init_checkpoint, use_tpu, master, ...)
    are common.CommonSettings'."""

    input_file: str = option(
        help="Input text file: one example per line, a single text or a pair "
        "written `text_a ||| text_b`."
    )
    output_file: str = option(
        help="Output JSON lines file: per input line, the tokens and their "
        "vectors from each layer of --layers."
    )
    vocab_file: str = options.vocab_file()
    do_lower_case: bool = options.do_lower_case()
    # Not flags of extract_features: it trains nothing, on one device.
    output_dir: str | None = None
    do_train: bool = False
    do_eval: bool = False
    random_seed: int | None = None
    strategy: typing.Any = "default"
    tpu_name: str | None = None
    tpu_zone: str | None = None
    gcp_project: str | None = None
    run_config: typing.Any = None
    layers: str = option(
        "-1,-2,-3,-4",
        "Comma-separated indexes of the encoder layers to output; negative "
        "indexes count from the last layer (-1).",
    )
    max_seq_length: int = option(
        128,
        "The maximum total input sequence length after WordPiece "
        "tokenization. Sequences longer than this will be truncated, and "
        "sequences shorter than this will be padded.",
    )
    batch_size: int = option(32, "Batch size for predictions.")
    use_one_hot_embeddings: bool = option(
        False,
        "If True, tf.one_hot will be used for embedding lookups, otherwise "
        "tf.nn.embedding_lookup will be used. On TPUs, this should be True "
        "since it is much faster.",
    )

    def __post_init__(self):
        # Before the features are made and the checkpoint read.
        common_lib.check_counts(self)
        if self.use_tpu and not self.master:
            # The strategy's own message names --tpu_name, a flag the other
            # scripts have and this one has not (the original's neither).
            raise ValueError(
                "--use_tpu needs --master (the TPU's grpc:// address)"
            )
