"""What run_pretraining.py does, as a `trainer.Task` plus a `run` function.

The losses are the original's (`losses.pretraining_losses`); the eval metrics
are its `metric_fn`: masked-LM accuracy and loss weighted by
`masked_lm_weights`, next-sentence accuracy and loss unweighted, and "loss"
the mean over batches of total_loss (what the original's Estimator reported as
"loss").
"""

import contextlib
import os

import tensorflow as tf
from absl import logging
from keras import ops

from modeling import checkpoints
from modeling import config as config_lib
from modeling import errors
from modeling import losses
from modeling import models
from modeling.data import dynamic_masking
from modeling.data import file_io
from modeling.data import input_pipeline
from modeling.data import tfrecord_io
from modeling.tasks import common
from modeling.tasks import metrics
from modeling.tasks.settings import pretraining as pretraining_settings
from modeling.training import trainer as trainer_lib

# The script's flags (modeling/tasks/settings/pretraining.py).
Settings = pretraining_settings.Settings


def _predictions(outputs, features):
    # keras.ops: these run inside the compiled step of either backend.
    mlm_pred = ops.argmax(outputs["masked_lm_log_probs"], axis=-1)
    mlm_ids = ops.reshape(features["masked_lm_ids"], [-1])
    mlm_weights = ops.reshape(
        ops.cast(features["masked_lm_weights"], "float32"), [-1]
    )
    mlm_correct = ops.cast(
        ops.equal(ops.cast(mlm_pred, "int32"), ops.cast(mlm_ids, "int32")),
        "float32",
    )
    nsp_pred = ops.argmax(outputs["next_sentence_log_probs"], axis=-1)
    nsp_labels = ops.reshape(features["next_sentence_labels"], [-1])
    nsp_correct = ops.cast(
        ops.equal(ops.cast(nsp_pred, "int32"), ops.cast(nsp_labels, "int32")),
        "float32",
    )
    return mlm_correct, mlm_weights, nsp_correct


def loss_fn(features, outputs):
    """Training loss ("loss" = total_loss) and the logged components."""
    terms = losses.pretraining_losses(outputs, features)
    mlm_correct, mlm_weights, nsp_correct = _predictions(outputs, features)
    return {
        "loss": terms["total_loss"],
        "masked_lm_loss": terms["masked_lm_loss"],
        "next_sentence_loss": terms["next_sentence_loss"],
        "masked_lm_accuracy": ops.sum(mlm_correct * mlm_weights)
        / ops.maximum(ops.sum(mlm_weights), 1e-5),
        "next_sentence_accuracy": ops.mean(nsp_correct),
    }


def eval_metrics_fn(features, outputs):
    """The original metric_fn as (sum, weight) pairs."""
    terms = losses.pretraining_losses(outputs, features)
    mlm_correct, mlm_weights, nsp_correct = _predictions(outputs, features)
    count = ops.cast(ops.size(nsp_correct), "float32")
    return {
        "masked_lm_accuracy": (
            ops.sum(mlm_correct * mlm_weights),
            ops.sum(mlm_weights),
        ),
        "masked_lm_loss": (
            ops.sum(terms["masked_lm_example_loss"] * mlm_weights),
            ops.sum(mlm_weights),
        ),
        "next_sentence_accuracy": (ops.sum(nsp_correct), count),
        "next_sentence_loss": (
            ops.sum(terms["next_sentence_example_loss"]),
            count,
        ),
    }


def batch_metrics_fn(sums):
    """The original's eval "loss": the mean over batches of each batch's
    total_loss, from the batch's sums over every replica (a mean of the
    replicas' losses, each masked-LM term divided by its own slice's
    weights, depended on the number of devices)."""
    mlm, weights = sums["masked_lm_loss"]
    nsp, count = sums["next_sentence_loss"]
    total = mlm / (weights + losses.MLM_LOSS_EPSILON) + nsp / count
    return {"loss": (total, 1.0)}


def make_task(bert_config, init_checkpoint=None, use_one_hot_embeddings=False):
    """The pre-training Task: BertPretrainer, its losses and metrics."""

    def init_fn(model):
        # Like the original, only weights come from init_checkpoint: the Adam
        # slots start at zero and global_step at 0. A checkpoint without the
        # pre-training heads (cls/: a fine-tuned or masked-LM-only one)
        # starts them from their initializers, as the original's
        # init_from_checkpoint restores only the names it finds (the load
        # logs which).
        checkpoints.load_weights(
            model.trainable_variables,
            init_checkpoint,
            ignore_missing=("^cls/",),
        )

    return trainer_lib.Task(
        build_model=lambda: models.BertPretrainer(
            bert_config, use_one_hot_embeddings=use_one_hot_embeddings
        ),
        loss_fn=loss_fn,
        eval_metrics_fn=eval_metrics_fn,
        batch_metrics_fn=batch_metrics_fn,
        init_fn=init_fn if init_checkpoint else None,
    )


@contextlib.contextmanager
def _naming_damaged_files(input_files, find_bad_record=None):
    """TensorFlow's "corrupted record at N" names no file, its parse and
    token-id errors no record: find them. `find_bad_record`: reads the
    files to name a record TensorFlow refused (see
    input_pipeline.find_bad_pretraining_record)."""
    what_to_do = (
        "; fix that file (the same records otherwise) and re-run: a run "
        "resumes from the newest checkpoint in --output_dir (leaving the "
        "file out, or other records, moves the data position: "
        "docs/scripts.md)"
    )
    try:
        yield
    except tf.errors.DataLossError as e:
        for path in input_files:
            try:
                for _ in tfrecord_io.read_records(path):
                    pass
            except ValueError as damaged:
                raise errors.UserError(f"{damaged}{what_to_do}") from e
        raise errors.UserError(
            f"An input file is damaged ({e.message}); "
            f"inputs: {', '.join(input_files)}"
        ) from e
    except tf.errors.InvalidArgumentError as e:
        # A later record unlike each file's first (those are checked).
        if not input_pipeline.is_record_error(e.message):
            raise
        read = ""
        if find_bad_record is not None:
            try:
                read = f"; {find_bad_record()} of the inputs read fine here"
            except errors.UserError as bad:
                raise errors.UserError(f"{bad}{what_to_do}") from e
        # TensorFlow's first line may be only "Graph execution error:".
        lines = [x for x in e.message.splitlines() if x.strip()]
        detail = next(
            (x for x in lines if input_pipeline.is_record_error(x)), lines[0]
        )
        raise errors.UserError(
            "An input record is not a pre-training record of these flags "
            f"({detail.strip()}); inputs: {', '.join(input_files)}{read}"
        ) from e


def run(s):
    """Trains and/or evaluates as the original's main(); returns eval results.

    Raises:
      ValueError: neither do_train nor do_eval, or a bad config/sequence length.
    """
    common.check_modes(s, ("do_train", "do_eval"), also=None)
    config = s.run_config  # None: a run built in Python, float32 defaults.
    if config is not None and config.runtime != "tensorflow":
        raise ValueError(
            "--predict_runtime (and --precision=int8) are for the "
            "fine-tuning scripts' evaluation and prediction; pre-training "
            "runs in float32, mixed_bfloat16 or mixed_float16"
        )
    bert_config = config_lib.BertConfig.from_json_file(s.bert_config_file)
    config_lib.check_max_seq_length(s.max_seq_length, bert_config)
    input_files = file_io.expand_input_files(s.input_file)
    logging.info("*** Input Files ***\n%s", "\n".join(input_files))
    text = s.input_format == "text"
    # The checks run before the strategy exists: no TensorFlow op yet.
    if text:
        config_lib.check_vocab_size(s.vocab_file, bert_config)
        dynamic_masking.check_text_input(
            input_files,
            s.vocab_file,
            s.do_lower_case,
            s.generation_options(),
        )
    else:
        input_files = input_pipeline.check_pretraining_records(
            input_files,
            s.max_seq_length,
            s.max_predictions_per_seq,
            bert_config.vocab_size,
        )
    strategy = common.set_up(s)
    task = make_task(
        bert_config, s.init_checkpoint, use_one_hot_embeddings=s.use_tpu
    )
    trainer = trainer_lib.Trainer(task, s.run_config, strategy)

    if text:
        data = dynamic_masking.TextPretrainingData(
            input_files, s.vocab_file, s.do_lower_case, s.generation_options()
        )

        def dataset(batch_size, is_training, start_batch=0):
            return data.dataset(
                batch_size, is_training, s.data_seed, start_batch=start_batch
            )

        guard = contextlib.nullcontext()
    else:

        def dataset(batch_size, is_training, start_batch=0):
            return input_pipeline.pretraining_dataset(
                input_files,
                batch_size,
                s.max_seq_length,
                s.max_predictions_per_seq,
                is_training,
                seed=s.data_seed,
                start_batch=start_batch,
                vocab_size=bert_config.vocab_size,
            )

        guard = _naming_damaged_files(
            input_files,
            lambda: input_pipeline.find_bad_pretraining_record(
                input_files,
                s.max_seq_length,
                s.max_predictions_per_seq,
                bert_config.vocab_size,
            ),
        )

    def train_dataset(start):
        if start:
            # The data's position is not in the checkpoint: the input is
            # read again up to it (its order is a function of the seed).
            logging.info(
                "Resuming the input at batch %d: reading past the %d %s "
                "already trained on first",
                start,
                start * s.train_batch_size,
                "records" if s.input_format == "tfrecord" else "instances",
            )
        return dataset(s.train_batch_size, True, start)

    with guard:
        if s.do_train:
            trainer.train(train_dataset)
        if not s.do_eval:
            return None
        results = trainer.evaluate(
            dataset(s.eval_batch_size, False), s.max_eval_steps
        )
    # As the original writes them: float32 values (loss = 9.681017).
    results = metrics.as_reported(results)
    logging.info(
        "***** Eval results *****\n%s",
        "\n".join(f"  {k} = {results[k]!s}" for k in sorted(results)),
    )
    if trainer.is_chief:
        common.write_eval_results(
            os.path.join(s.output_dir, common.EVAL_RESULTS_FILE), results
        )
    return results
