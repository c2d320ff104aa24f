"""export_hub.py's Settings: its flags (modeling/tasks/export_hub.py runs
them)."""

import dataclasses

from modeling import options
from modeling.options import option


@dataclasses.dataclass(kw_only=True)
class Settings:
    """export_hub.py's flags, same names.

    bert_config_file and init_checkpoint (a prefix or a folder) are needed
    unless export_type is "preprocessing".
    """

    export_path: str = option(
        help="Where to write the SavedModels: with --export_type=both, the "
        "folders <export_path>/encoder and <export_path>/preprocessing; "
        "else the one SavedModel. An earlier export there is replaced "
        "once the new one is complete; a folder holding anything else is "
        "refused."
    )
    vocab_file: str = options.vocab_file()
    do_lower_case: bool = options.do_lower_case()
    bert_config_file: str | None = options.bert_config_file()
    init_checkpoint: str | None = options.init_checkpoint()
    export_type: str = option(
        "both",
        "encoder: the encoder SavedModel; preprocessing: text -> the "
        "encoder's inputs (needs only --vocab_file and --do_lower_case); "
        "both: the two.",
        choices=("encoder", "preprocessing", "both"),
    )
    with_mlm: bool = option(
        False,
        "Also export the masked-LM head as the encoder's `mlm` subobject and "
        "signature (mlm_logits [batch, predictions, vocab]); the checkpoint "
        "must hold cls/predictions/*, as pre-training checkpoints do.",
    )
    max_seq_length: int = option(
        128,
        "The sequence length of the preprocessing model's default call (and "
        "the default of its bert_pack_inputs(seq_length=...)).",
    )
    pad_to_longest: bool = option(
        False,
        "The preprocessing model's default call pads each batch to its "
        "longest packed row (at most --max_seq_length) instead of always to "
        "--max_seq_length, so that the encoder works on the real tokens only. "
        "Off by default: TF Hub's convention is a fixed length.",
    )
