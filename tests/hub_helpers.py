"""A tiny checkpoint folder and its TF Hub-style encoder export, for the
tests of modeling/saved_encoder.py and modeling/export/encoder.py
(`import hub_helpers`)."""

import json

import keras
from constants import TINY_CONFIG

from modeling import checkpoints
from modeling import config as config_lib
from modeling import models
from modeling.export import encoder as encoder_export
from modeling.text import vocabulary

# 99 tokens (TINY_CONFIG's vocab_size): the special tokens, then words.
WORDS = [f"w{i}" for i in range(TINY_CONFIG["vocab_size"] - 5)]
VOCAB = list(vocabulary.SPECIAL_TOKENS) + WORDS


def tiny_checkpoint(folder, dropout=0.1, seed=0):
    """Writes bert_config.json (TINY_CONFIG with this dropout), vocab.txt
    and a pre-training checkpoint (random weights, masked-LM and
    next-sentence heads included) to `folder`; returns the BertPretrainer."""
    config = config_lib.BertConfig.from_dict(
        dict(
            TINY_CONFIG,
            hidden_dropout_prob=dropout,
            attention_probs_dropout_prob=dropout,
        )
    )
    (folder / "bert_config.json").write_text(
        json.dumps(config.to_dict(), indent=2)
    )
    (folder / "vocab.txt").write_text("\n".join(VOCAB) + "\n")
    keras.utils.set_random_seed(seed)
    model = models.BertPretrainer(config)
    checkpoints.write_checkpoint(
        folder / checkpoints.DEFAULT_PREFIX,
        {checkpoints.variable_name(v): v for v in model.weights},
    )
    return model


def export_tiny_encoder(folder, dropout=0.1, with_mlm=False):
    """tiny_checkpoint in `folder`, exported to `folder`/encoder; returns
    (the export's path, the BertPretrainer it holds)."""
    model = tiny_checkpoint(folder, dropout)
    path = folder / "encoder"
    encoder_export.export(
        str(path),
        "encoder",
        str(folder / "vocab.txt"),
        True,
        bert_config_file=str(folder / "bert_config.json"),
        init_checkpoint=str(folder),
        with_mlm=with_mlm,
    )
    return path, model
