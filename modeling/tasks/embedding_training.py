"""run_embeddings --do_train: pairs read from a file, the in-batch
negatives or CoSENT loss, and the shared Trainer."""

import functools

import keras
import numpy as np
from absl import logging

from modeling import checkpoints
from modeling import losses
from modeling import models
from modeling.data import classifier_data
from modeling.data import table_files
from modeling.tasks import common
from modeling.tasks.embedding_model import SCORED_COLUMNS
from modeling.tasks.embedding_model import parse_score
from modeling.tasks.embedding_model import write_description
from modeling.text import tokenization

# The training file's kinds, by their columns.
_PAIRS = ("anchor", "positive")


def read_train_file(path, tokenizer, max_seq_length, long_inputs=None):
    """The training pairs as feature arrays, each side's under its prefix
    (models.BertEmbedder.SIDES): anchor / positive (/ negative) texts for
    in-batch negatives, or sentence1 / sentence2 / score for CoSENT.

    Returns:
      (arrays, loss name "multiple_negatives" or "cosent", row count).

    Raises:
      ValueError: naming the file (and line): neither set of columns, an
        empty text, a score that is not a number.
    """
    table = table_files.TableFile(path)
    columns = set(table.columns)
    if set(_PAIRS) <= columns:
        loss = "multiple_negatives"
        sides = list(_PAIRS) + (["negative"] if "negative" in columns else [])
    elif set(SCORED_COLUMNS) <= columns:
        loss, sides = "cosent", list(SCORED_COLUMNS[:2])
    else:
        raise ValueError(
            f"{path}: needs the columns anchor, positive (and optionally "
            f"negative), or sentence1, sentence2, score; it has "
            f"{', '.join(table.columns) or 'none'}"
        )
    texts = {side: [] for side in sides}
    scores = []
    for line, row in table.rows():
        where = table.where(line)
        for side in sides:
            value = row.get(side)
            if not isinstance(value, str) or tokenization.is_empty_text(value):
                raise ValueError(f"{where}: empty or missing {side!r}")
            texts[side].append(value)
        if loss == "cosent":
            scores.append(parse_score(row.get("score"), where))
    count = len(texts[sides[0]])
    if not count:
        raise ValueError(f"{path}: no training pairs")
    if long_inputs is not None and long_inputs.windowed:
        # A pair is one row per side: windows would not line up.
        logging.info(
            "--long_inputs=chunks embeds; training pairs are truncated "
            "(--long_inputs=head_tail keeps their ends)"
        )
        long_inputs = None
    arrays = {}
    for side in sides:
        side_arrays, truncated = classifier_data.text_arrays(
            texts[side], max_seq_length, tokenizer, long_inputs=long_inputs
        )
        classifier_data.log_truncated(
            truncated, count, max_seq_length, f"{side} texts"
        )
        arrays.update({f"{side}_{k}": v for k, v in side_arrays.items()})
    if loss == "cosent":
        arrays["score"] = np.array(scores, np.float32)
    return arrays, loss, count


def loss_fn(loss):
    """The Trainer's loss function of a training file's kind."""

    def multiple_negatives(features, outputs):
        del features
        candidates = [outputs["positive"]]
        if "negative" in outputs:
            candidates.append(outputs["negative"])
        return {
            "loss": losses.multiple_negatives_ranking_loss(
                outputs["anchor"], keras.ops.concatenate(candidates, axis=0)
            )
        }

    def cosent(features, outputs):
        return {
            "loss": losses.cosent_loss(
                outputs["sentence1"], outputs["sentence2"], features["score"]
            )
        }

    return {"multiple_negatives": multiple_negatives, "cosent": cosent}[loss]


def train(settings, strategy, source, tokenizer):
    """--do_train: fine-tunes the encoder on --train_file (the shared
    Trainer: the original's optimizer arithmetic, checkpoints in the
    original layout in output_dir, resume, SIGTERM, progress); returns the
    trained models.BertEmbedder."""
    from modeling.data import input_pipeline
    from modeling.tasks import fine_tuning

    s = settings
    arrays, loss, count = read_train_file(
        s.train_file, tokenizer, source.max_seq_length, source.long_inputs
    )
    num_train_steps, num_warmup_steps = common.fine_tuning_steps(
        s, count, "training pairs"
    )
    # Before the first checkpoint: a resumed or later run reads them. The
    # chief's (several TensorFlow workers write nothing else either).
    from modeling.training import distribute

    if distribute.is_chief(strategy):
        source.long_inputs.save(s.output_dir)
        write_description(s, source)
    logging.info(
        "***** Training: %d pairs, %s loss, batch size %d, %d steps *****",
        count,
        loss,
        s.train_batch_size,
        num_train_steps,
    )
    trainer = common.make_trainer(
        s,
        strategy,
        lambda: models.BertEmbedder(
            source.config, pooling=source.pooling, normalize=source.normalize
        ),
        loss_fn(loss),
        lambda model: checkpoints.load_weights(model, source.weights),
        num_train_steps,
        num_warmup_steps,
    )
    map_batch = None
    if not common.uses_tpu(s):
        map_batch = functools.partial(
            trim_sides,
            multiple=input_pipeline.padding_multiple(
                source.max_seq_length, s.run_config.use_xla
            ),
        )
    fine_tuning.train_on_arrays(trainer, arrays, s, None, None, map_batch)
    return trainer.model


def trim_sides(features, multiple):
    """A training batch with each side's features (models.BertEmbedder.
    SIDES) cut to that side's longest row (input_pipeline.trim_padding):
    short sentences cost their own length, not max_seq_length."""
    from modeling.data import input_pipeline

    out = dict(features)
    for side in models.BertEmbedder.SIDES:
        names = [n for n in features if n.startswith(side + "_")]
        if not names:
            continue
        cut = input_pipeline.trim_padding(
            {n[len(side) + 1 :]: features[n] for n in names}, multiple
        )
        out.update({f"{side}_{k}": v for k, v in cut.items()})
    return out
