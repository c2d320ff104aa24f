"""What run_squad.py does: fine-tune on SQuAD, predict answers, score them.

The steps follow the original's main(): the flag checks (a mode, the files
it needs, max_seq_length > max_query_length + 3 and within the model), the
case check, training for `int(len(train_examples) / train_batch_size *
num_train_epochs)` steps (examples, not windows) with the examples shuffled
once by `random.Random(12345)` after that count, train.tf_record and
eval.tf_record in output_dir, and predictions.json, nbest_predictions.json,
null_odds.json (v2). The model is models.BertSpanLabeler, whose head keeps
the original names `cls/squad/output_weights` / `output_bias`; an
--init_checkpoint that carries them (a model already fine-tuned on SQuAD,
here or by the original) is used as is.

Added:
- input files are read and checked before anything is written, so a bad
  file leaves output_dir as it was (data/squad.py lists the checks);
- after predicting on a file with answers, the official scores go to
  eval_results.txt (modeling/tasks/squad_metrics.py);
- --best_null_threshold (v2): the null_score_diff_threshold with the best
  F1 on the predict file is chosen and predictions.json rewritten with it
  (the original needs the official script and a second run);
- --eval_during_training: predicts and scores at every checkpoint and keeps
  the best one by F1 under output_dir/best/;
- training, resuming and the speed/distribution flags are the shared
  modeling.training.trainer loop's.

One module, over 500 lines: run_squad's steps in the original's order; its
data, post-processing, metrics and export are their own modules.
"""

import dataclasses
import os
import random

import numpy as np
import tensorflow as tf
from absl import logging

from modeling import checkpoints
from modeling import config as config_lib
from modeling import errors
from modeling import losses
from modeling import models
from modeling.data import input_pipeline
from modeling.data import squad as squad_data
from modeling.tasks import common
from modeling.tasks import fine_tuning
from modeling.tasks import squad_metrics
from modeling.tasks import squad_postprocess
from modeling.tasks.settings import squad as squad_settings
from modeling.text import tokenization

# The script's flags (modeling/tasks/settings/squad.py).
Settings = squad_settings.Settings

TRAIN_RECORD_FILE = "train.tf_record"
EVAL_RECORD_FILE = "eval.tf_record"
# The original shuffles the training examples once with this seed.
EXAMPLE_SHUFFLE_SEED = 12345
# The head is new when fine-tuning starts from a pre-trained checkpoint.
HEAD_VARIABLES = models.BertSpanLabeler.HEAD_VARIABLES
_HEAD_NAME = "cls/squad/output_weights"


@dataclasses.dataclass
class SquadTask:
    """Everything fixed for one run."""

    settings: Settings
    bert_config: config_lib.BertConfig
    tokenizer: tokenization.FullTokenizer
    strategy: tf.distribute.Strategy
    train_examples: list | None
    predict_examples: list | None
    # Made once (eval.tf_record) by the first use: training's evaluation or
    # prediction.
    answers: "AnswerPredictor | None" = None

    def path(self, name):
        return os.path.join(self.settings.output_dir, name)


def check_settings(s):
    """The original's validate_flags_or_throw, plus the new flags' checks.

    Returns:
      The BertConfig.
    """
    tokenization.validate_case_matches_checkpoint(
        s.do_lower_case, s.init_checkpoint
    )
    common.check_modes(s, ("do_train", "do_predict"))
    if s.do_train and not s.train_file:
        raise ValueError(
            "If `do_train` is True, then `train_file` must be specified."
        )
    if s.do_predict and not s.predict_file:
        raise ValueError(
            "If `do_predict` is True, then `predict_file` must be specified."
        )
    if s.eval_during_training and not (s.do_train and s.predict_file):
        raise ValueError(
            "--eval_during_training needs --do_train and a --predict_file "
            "with answers"
        )
    if s.best_null_threshold and not (
        s.do_predict and s.version_2_with_negative
    ):
        raise ValueError(
            "--best_null_threshold needs --do_predict and "
            "--version_2_with_negative"
        )
    if not 0 <= s.max_skipped_fraction <= 1:
        raise ValueError("--max_skipped_fraction must be in [0, 1]")
    bert_config = config_lib.BertConfig.from_json_file(s.bert_config_file)
    config_lib.check_max_seq_length(s.max_seq_length, bert_config)
    if s.max_seq_length <= s.max_query_length + 3:
        raise ValueError(
            f"The max_seq_length ({s.max_seq_length}) must be greater than "
            f"max_query_length ({s.max_query_length}) + 3"
        )
    # 0 would answer every question "empty"; a negative query length
    # would cut pieces off every question.
    for flag, least in (
        ("doc_stride", 1),
        ("n_best_size", 1),
        ("max_answer_length", 1),
        ("max_query_length", 0),
    ):
        if getattr(s, flag) < least:
            raise ValueError(
                f"--{flag} must be at least {least}, got {getattr(s, flag)}"
            )
    config_lib.check_vocab_size(s.vocab_file, bert_config)
    return bert_config


def prepare(settings):
    """Checks the settings and reads the input files, before anything is
    written; then creates output_dir and the strategy."""
    s = settings
    bert_config = check_settings(s)
    tokenizer = tokenization.FullTokenizer(s.vocab_file, s.do_lower_case)
    train_examples = predict_examples = None
    if s.do_train:
        train_examples, _ = squad_data.read_squad_examples(
            s.train_file,
            is_training=True,
            version_2_with_negative=s.version_2_with_negative,
            max_skipped_fraction=s.max_skipped_fraction,
            verbose_logging=s.verbose_logging,
        )
        if not train_examples:
            raise ValueError(f"{s.train_file}: no training questions")
    if s.do_predict or s.eval_during_training:
        if squad_data.is_question_rows(s.predict_file):
            predict_examples = squad_data.read_question_rows(s.predict_file)
        else:
            predict_examples, _ = squad_data.read_squad_examples(
                s.predict_file, is_training=False
            )
        if not predict_examples:
            raise ValueError(f"{s.predict_file}: no questions")
        needs = [
            flag
            for flag, on in (
                ("--best_null_threshold", s.best_null_threshold),
                ("--eval_during_training", s.eval_during_training),
            )
            if on
        ]
        if (
            needs
            and gold_answers(predict_examples, s.version_2_with_negative)
            is None
        ):
            raise ValueError(
                f"{' and '.join(needs)}: {s.predict_file} has questions "
                "without answers to score with"
            )
    strategy = common.set_up(s)
    return SquadTask(
        s, bert_config, tokenizer, strategy, train_examples, predict_examples
    )


# === Model and training ===


def loss_fn(features, outputs):
    """The original's loss: the mean of the start and end cross-entropies."""
    return {
        "loss": losses.span_loss(
            outputs["start_logits"],
            outputs["end_logits"],
            features[input_pipeline.START_POSITIONS],
            features[input_pipeline.END_POSITIONS],
        )
    }


def make_trainer(task, num_train_steps=1, num_warmup_steps=0):
    """The shared Trainer around a BertSpanLabeler."""
    s = task.settings

    def init_fn(model):
        # Weights only (fresh Adam slots, step 0); the span head comes from
        # the checkpoint when it has one, else it is new.
        report = checkpoints.load_weights(
            model, s.init_checkpoint, ignore_missing=HEAD_VARIABLES
        )
        if _HEAD_NAME in report.restored:
            logging.info(
                "The span head cls/squad/* comes from %s", report.checkpoint
            )

    return common.make_trainer(
        s,
        task.strategy,
        lambda: models.BertSpanLabeler(
            task.bert_config, use_one_hot_embeddings=s.use_tpu
        ),
        loss_fn,
        init_fn,
        num_train_steps,
        num_warmup_steps,
    )


def _decoded(task, records, is_training):
    spec = input_pipeline.squad_feature_spec(
        task.settings.max_seq_length, is_training
    )
    return records.map(
        input_pipeline.as_written(
            lambda record: input_pipeline.decode_record(record, spec)
        ),
        num_parallel_calls=tf.data.AUTOTUNE,
    )


def training_batches(task, path, batch_size):
    """The original's training input_fn: the records repeated, shuffled
    (buffer 100, seeded), batched with the remainder dropped."""
    seed = task.settings.random_seed
    records = input_pipeline.repeat_and_shuffle(
        tf.data.TFRecordDataset(path),
        common.DEFAULT_DATA_SEED if seed is None else seed,
    )
    d = _decoded(task, records, True)
    return d.batch(batch_size, drop_remainder=True).prefetch(2)


def feature_rows(features, max_seq_length):
    """The prediction windows' model inputs, one row at a time in
    eval.tf_record's order: what the predictor batches. Made from the
    features this run holds, not read back from eval.tf_record: another
    run in the same output_dir (a --do_predict beside a training) may have
    replaced that file, and its windows would be paired with this run's
    by unique_id, silently."""
    columns = {
        input_pipeline.UNIQUE_IDS: np.asarray(
            [f.unique_id for f in features], np.int32
        )
    }
    for name in input_pipeline.CLASSIFIER_SEQ_FEATURES:
        columns[name] = np.asarray(
            [getattr(f, name) for f in features], np.int32
        ).reshape(-1, max_seq_length)
    return tf.data.Dataset.from_tensor_slices(columns)


def train(task):
    """Writes train.tf_record and fine-tunes; returns the Trainer."""
    s = task.settings
    examples = list(task.train_examples)
    num_train_steps, num_warmup_steps = common.fine_tuning_steps(
        s, len(examples)
    )
    # Checked before minutes of feature conversion write train.tf_record:
    # output_dir's checkpoints and --init_checkpoint against this model.
    trainer = make_trainer(task, num_train_steps, num_warmup_steps)
    trainer.check_output_dir(_build_element_spec(task))
    fine_tuning.check_init_checkpoint(trainer, s, HEAD_VARIABLES)
    # After the step count, before the features, as the original.
    random.Random(EXAMPLE_SHUFFLE_SEED).shuffle(examples)
    train_file = task.path(TRAIN_RECORD_FILE)
    num_features, _, _ = squad_data.write_features(
        examples,
        task.tokenizer,
        s.max_seq_length,
        s.doc_stride,
        s.max_query_length,
        True,
        train_file,
    )
    if not num_features:
        raise errors.UserError(
            f"--train_file={s.train_file}: no question to train on has a "
            "window of context (every paragraph is empty)"
        )
    logging.info(
        "***** Running training: %d examples, %d features, batch size %d, "
        "%d steps *****",
        len(examples),
        num_features,
        s.train_batch_size,
        num_train_steps,
    )

    def dataset_fn(start_step):
        d = training_batches(task, train_file, s.train_batch_size)
        return d.skip(start_step)

    # The best checkpoint by F1 (best_f1 with --best_null_threshold), under
    # the key best_metric in its eval_results.txt.
    return fine_tuning.train(
        trainer, dataset_fn, s, "best_metric", lambda m: _scorer(task, m)
    )


def _scorer(task, model):
    """--eval_during_training: global_step -> the official scores of a
    prediction of --predict_file with the current weights."""
    s = task.settings
    task.answers = AnswerPredictor(task, model)
    if task.answers.gold is None:
        raise ValueError(
            f"--eval_during_training: {s.predict_file} has no answers to score"
        )
    key = "best_f1" if s.best_null_threshold else "f1"

    def evaluate(global_step):
        gold = task.answers.gold
        results = score(task.answers.predict(), gold, s.version_2_with_negative)
        return dict(
            results, global_step=int(global_step), best_metric=results[key]
        )

    return evaluate


def _build_element_spec(task):
    """The training batches' structure, from which the Trainer builds its
    variables (it calls loss_fn once, so the labels are in it)."""
    seq = [None, task.settings.max_seq_length]
    spec = {
        name: tf.TensorSpec(seq, tf.int32)
        for name in input_pipeline.CLASSIFIER_SEQ_FEATURES
    }
    for name in (
        input_pipeline.UNIQUE_IDS,
        input_pipeline.START_POSITIONS,
        input_pipeline.END_POSITIONS,
    ):
        spec[name] = tf.TensorSpec([None], tf.int32)
    return spec


def restore_for_inference(task, trainer):
    """The weights to predict with when nothing was trained: the newest
    checkpoint of output_dir (as the Estimator did), else --init_checkpoint
    (with a warning when it has no span head)."""
    s = task.settings
    warning = None
    if s.init_checkpoint and _HEAD_NAME not in checkpoints.checkpoint_shapes(
        s.init_checkpoint
    ):
        warning = (
            f"No checkpoint in {s.output_dir} and {s.init_checkpoint} has no "
            "cls/squad/* span head: predicting with an untrained head."
        )
    trainer.restore_for_inference(
        _build_element_spec(task),
        missing_message=(
            f"No checkpoint in --output_dir={s.output_dir} and no "
            "--init_checkpoint: nothing to predict with. Train first "
            "(--do_train)."
        ),
        init_warning=warning,
    )


# === Prediction ===


class AnswerPredictor:
    """Writes eval.tf_record once, then predicts answers with a model."""

    def __init__(self, task, model):
        s = task.settings
        self.task = task
        self.model = model
        self.examples = task.predict_examples
        num, self.features, _ = squad_data.write_features(
            self.examples,
            task.tokenizer,
            s.max_seq_length,
            s.doc_stride,
            s.max_query_length,
            False,
            task.path(EVAL_RECORD_FILE),
            keep=True,
        )
        logging.info(
            "***** Running predictions: %d examples, %d features, batch "
            "size %d *****",
            len(self.examples),
            num,
            s.predict_batch_size,
        )
        self.gold = gold_answers(self.examples, s.version_2_with_negative)

    def logits(self):
        """(unique_ids [N], start_logits [N, T], end_logits [N, T]):
        squad_postprocess.answer_logits (full-length windows, the
        original's n best; --fast_nbest: each at its own length)."""
        s = self.task.settings
        predictor = fine_tuning.make_predictor(
            s,
            self.task.strategy,
            self.model,
            s.predict_batch_size,
            length_sorted=s.fast_nbest,
        )
        return squad_postprocess.answer_logits(
            predictor,
            feature_rows(self.features, s.max_seq_length),
            s.max_seq_length,
            s.fast_nbest,
            total=len(self.features),
        )

    def predict(self, threshold=None):
        """The answers (squad_postprocess.Predictions) of the model now."""
        s = self.task.settings
        unique_ids, start, end = self.logits()
        return squad_postprocess.compute_predictions(
            self.examples,
            self.features,
            unique_ids,
            start,
            end,
            n_best_size=s.n_best_size,
            max_answer_length=s.max_answer_length,
            do_lower_case=s.do_lower_case,
            version_2_with_negative=s.version_2_with_negative,
            null_score_diff_threshold=(
                s.null_score_diff_threshold if threshold is None else threshold
            ),
            verbose_logging=s.verbose_logging,
        )


def gold_answers(examples, version_2_with_negative):
    """qid -> gold texts when the file can be scored, else None (a file
    without answers; v1 with unanswerable questions; v2 where no question
    has an answer or is marked is_impossible: an unlabelled file, whose
    "answers": [] everywhere would score every answer wrong and choose a
    threshold that answers nothing)."""
    gold = {}
    for example in examples:
        if example.answers is None:
            return None
        gold[example.qas_id] = example.answers
    if version_2_with_negative and not any(
        e.answers or e.is_impossible for e in examples
    ):
        logging.warning(
            "No question of the predict file has an answer or is_impossible: "
            "taken as unlabelled, not scored."
        )
        return None
    if not version_2_with_negative and not all(gold.values()):
        logging.warning(
            "The predict file has questions without answers: not scored "
            "(SQuAD 2.0 files need --version_2_with_negative)."
        )
        return None
    return gold


def score(predictions, gold, version_2_with_negative):
    """The official scores of predictions (dict), or None without gold."""
    if gold is None:
        return None
    if not version_2_with_negative:
        return squad_metrics.evaluate_v1(gold, predictions.answers)
    # As `evaluate-v2.0.py dev.json predictions.json --na-prob-file
    # null_odds.json`: the search runs over predictions.json as written (a
    # question cut to "" by the threshold scores as ""). The search over
    # the best non-null answers is --best_null_threshold's.
    return squad_metrics.evaluate_v2(
        gold, predictions.answers, predictions.null_odds
    )


def best_null_threshold(predictions, gold):
    """The null_score_diff_threshold that gives the best F1 on gold: the
    official best_f1_thresh, except when answering nothing is best (the
    official value is then 0.0): just below every null_odds value."""
    _, f1_raw = squad_metrics.raw_scores_v2(gold, predictions.best_non_null)
    has_answer = {qid: bool(a) for qid, a in gold.items()}
    _, thresh, count = squad_metrics.threshold_search(
        predictions.best_non_null, f1_raw, predictions.null_odds, has_answer
    )
    if count:
        return thresh
    return min(predictions.null_odds.values()) - 1.0


def predict(task, answers, global_step, write=True):
    """Predicts, writes the outputs and (with answers) eval_results.txt."""
    s = task.settings
    predictions = answers.predict()
    results = score(predictions, answers.gold, s.version_2_with_negative)
    threshold = s.null_score_diff_threshold
    if s.best_null_threshold:
        if results is None:
            raise ValueError(
                f"--best_null_threshold: {s.predict_file} has no answers "
                "to choose a threshold with"
            )
        threshold = best_null_threshold(predictions, answers.gold)
        predictions = squad_postprocess.apply_threshold(predictions, threshold)
        results.update(score(predictions, answers.gold, True))
        logging.info(
            "Best null_score_diff_threshold by F1: %s (F1 %.3f)",
            threshold,
            # predictions.json's own F1 at it (no --na-prob-thresh cut).
            squad_metrics.evaluate_v2(answers.gold, predictions.answers)["f1"],
        )
    if not write:
        return predictions, results
    scores, stale = {}, []
    if results is None:  # A file without answers: nothing scored.
        stale.append(task.path(common.EVAL_RESULTS_FILE))
    else:
        if s.version_2_with_negative:
            results["null_score_diff_threshold"] = threshold
        results["global_step"] = int(global_step)
        logging.info(
            "***** Eval results *****\n%s",
            "".join(f"  {k} = {results[k]}\n" for k in sorted(results)),
        )
        scores[task.path(common.EVAL_RESULTS_FILE)] = common.eval_results_text(
            results
        )
    # The answers and their scores as one: never one run's with another's.
    squad_postprocess.write_predictions(
        predictions, s.output_dir, scores, stale
    )
    return predictions, results


def run(settings):
    """run_squad's main(): train, then predict (and score).

    Returns:
      The eval results (dict) when predicting on a file with answers,
      else None.
    """
    task = prepare(settings)
    s = task.settings
    if s.do_train:
        trainer = train(task)
    else:
        trainer = make_trainer(task)
        restore_for_inference(task, trainer)
    results = None
    if s.do_predict:
        if task.answers is None:
            task.answers = AnswerPredictor(task, trainer.model)
        _, results = predict(
            task, task.answers, trainer.global_step, write=trainer.is_chief
        )
    if s.export_dir and trainer.is_chief:
        from modeling.export import squad as squad_export

        if s.best_null_threshold and results:
            # The export answers as predictions.json: with the threshold
            # this run chose, not the flag's.
            s = dataclasses.replace(
                s,
                null_score_diff_threshold=results["null_score_diff_threshold"],
            )
        squad_export.export_squad(
            trainer.model,
            s,
            s.export_dir,
            extra_files=fine_tuning.tflite_export_files(s, trainer.model),
        )
        logging.info("Exported the serving SavedModel to %s", s.export_dir)
    return results
