"""What export_hub.py does: a checkpoint as TF Hub-style SavedModels.

The SavedModels themselves are modeling/export/encoder.py's; this module checks
the settings as the other runners do and calls it.
"""

from absl import logging

from modeling import errors
from modeling.export import encoder as encoder_export
from modeling.tasks import common
from modeling.tasks.settings import export_hub as export_hub_settings
from modeling.text import tokenization

# The script's flags (modeling/tasks/settings/export_hub.py).
Settings = export_hub_settings.Settings


def run(settings):
    """Checks the settings and writes the SavedModels.

    Returns:
      dict kind ("encoder", "preprocessing") -> SavedModel folder.

    Raises:
      errors.UserError: a missing flag or a bad value.
    """
    s = settings
    if s.export_type != "preprocessing":
        missing = [
            f"--{name}"
            for name in ("bert_config_file", "init_checkpoint")
            if not getattr(s, name)
        ]
        if missing:
            raise errors.UserError(
                f"--export_type={s.export_type} needs {' and '.join(missing)} "
                "(only --export_type=preprocessing works from the vocabulary "
                "alone)"
            )
        tokenization.validate_case_matches_checkpoint(
            s.do_lower_case, s.init_checkpoint
        )
    elif s.with_mlm:
        raise errors.UserError(
            "--with_mlm adds to the encoder: not with --export_type="
            "preprocessing"
        )
    if s.max_seq_length < 3:
        raise errors.UserError(
            f"--max_seq_length must be at least 3 ([CLS] A [SEP] B [SEP] "
            f"needs that much), got {s.max_seq_length}"
        )
    common.check_output_folders(s, export_flag="export_path")
    folders = encoder_export.export(
        s.export_path,
        s.export_type,
        s.vocab_file,
        s.do_lower_case,
        bert_config_file=s.bert_config_file,
        init_checkpoint=s.init_checkpoint,
        with_mlm=s.with_mlm,
        max_seq_length=s.max_seq_length,
        pad_to_longest=s.pad_to_longest,
    )
    for kind, folder in folders.items():
        logging.info("Exported the %s SavedModel to %s", kind, folder)
    return folders
