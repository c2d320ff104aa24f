"""What run_multiple_choice.py does: SWAG-style multiple choice.

Fine-tunes BertMultipleChoice (each choice packed as `[CLS] sent1 [SEP]
sent2 ending_i [SEP]`, one dense unit on its pooled vector, a softmax over
the choices) with the shared training loop; eval_results.txt holds
eval_accuracy and eval_loss; --do_predict writes test_results.tsv, one row
of choice probabilities per test example (tab-separated, as
run_classifier's).

Steps: `int(len(train_examples) / train_batch_size * num_train_epochs)`,
warmup `int(steps * warmup_proportion)`, as run_classifier counts them.
"""

import contextlib
import dataclasses

import numpy as np
import tensorflow as tf
from absl import logging
from keras import ops

from modeling import losses
from modeling import models
from modeling import progress
from modeling.data import file_io
from modeling.data import swag
from modeling.tasks import common
from modeling.tasks import fine_tuning
from modeling.tasks import predictions
from modeling.tasks.settings import multiple_choice as multiple_choice_settings

# The script's flags (modeling/tasks/settings/multiple_choice.py).
Settings = multiple_choice_settings.Settings

TEST_RESULTS_FILE = "test_results.tsv"
# Looked for in data_dir, in this order (SWAG's names first).
TRAIN_FILES = ("train.csv",)
EVAL_FILES = ("val.csv", "dev.csv")
PREDICT_FILES = ("test.csv",)
SEQ_FEATURES = ("input_ids", "input_mask", "segment_ids")
LABEL_IDS = "label_ids"
# Prediction converts and predicts this many examples at a time.
PREDICT_BLOCK = 8192


@dataclasses.dataclass
class ChoiceTask(fine_tuning.ArrayTask):
    def arrays(self, examples):
        """numpy int32 features: [N, C, T] sequences, [N] labels."""
        lists = swag.convert_examples(
            examples, self.settings.max_seq_length, self.tokenizer
        )
        return {k: np.array(v, np.int32) for k, v in lists.items()}


def prepare(settings):
    """Checks the settings; builds the task (fine_tuning.ArrayTask)."""
    return ChoiceTask.prepare(settings)


def loss_fn(features, logits):
    """keras.ops: it runs inside either backend's compiled step."""
    labels = features[LABEL_IDS]
    predicted = ops.cast(ops.argmax(logits, axis=-1), "int32")
    correct = ops.equal(predicted, ops.cast(labels, "int32"))
    return {
        "loss": losses.multiple_choice_loss(logits, labels),
        "accuracy": ops.mean(ops.cast(correct, "float32")),
    }


def make_trainer(task, num_train_steps=1, num_warmup_steps=0):
    return task.make_trainer(
        lambda: models.BertMultipleChoice(
            task.bert_config, use_one_hot_embeddings=task.settings.use_tpu
        ),
        loss_fn,
        num_train_steps,
        num_warmup_steps,
    )


def element_spec(task):
    seq = tf.TensorSpec([None, None, task.settings.max_seq_length], tf.int32)
    spec = {name: seq for name in SEQ_FEATURES}
    spec[LABEL_IDS] = tf.TensorSpec([None], tf.int32)
    return spec


def read_train_examples(task):
    return swag.read_swag(
        task.data_path("train_file", TRAIN_FILES, "training"), "train"
    )


def read_eval_examples(task):
    path = task.data_path("eval_file", EVAL_FILES, "evaluation")
    return swag.read_swag(path, "dev")


def iter_predict_examples(task):
    """The predict file's examples, streamed (any number of rows)."""
    path = task.data_path("predict_file", PREDICT_FILES, "prediction")
    return swag.iter_swag(path, "test", require_label=False)


def count_predict_examples(task):
    """Reads the predict file through (it is checked before training, but
    not held) and counts its examples."""
    return sum(1 for _ in iter_predict_examples(task))


def train(task, examples, eval_examples=None):
    """Fine-tunes on the training examples, evaluating on eval_examples
    with --eval_during_training; returns the Trainer."""
    s = task.settings
    num_train_steps, num_warmup_steps = common.fine_tuning_steps(
        s, len(examples)
    )
    trainer = make_trainer(task, num_train_steps, num_warmup_steps)
    # Before the examples' features (minutes on SWAG's 73k).
    trainer.check_output_dir(element_spec(task))
    fine_tuning.check_init_checkpoint(trainer, s, encoder_only=True)
    arrays = task.arrays(examples)
    logging.info(
        "***** Running training: %d examples of %d choices, batch size %d, "
        "%d steps *****",
        len(examples),
        swag.num_choices(examples),
        s.train_batch_size,
        num_train_steps,
    )

    def make_evaluate(model):
        eval_arrays = task.arrays(eval_examples or read_eval_examples(task))
        return lambda step: evaluate(task, model, eval_arrays, step)

    return fine_tuning.train_on_arrays(
        trainer, arrays, s, "eval_accuracy", make_evaluate
    )


def evaluate(task, model, arrays, global_step):
    """eval_accuracy and eval_loss (mean cross-entropy over the choices)."""
    logits = task.logits(model, arrays, task.settings.eval_batch_size)
    labels = arrays[LABEL_IDS]
    return {
        "eval_accuracy": float(np.mean(np.argmax(logits, -1) == labels)),
        "eval_loss": float(
            np.mean(losses.softmax_cross_entropy(logits, labels))
        ),
        "global_step": int(global_step),
    }


def predict(task, model, write=True, total=None):
    """test_results.tsv: per test example, its choice probabilities; and
    predictions.jsonl: its id, the chosen ending's index and the
    probabilities. The predict file streams, PREDICT_BLOCK examples at a
    time (`total`: its count, for the progress's ETA); the files are
    published together when complete.

    Returns:
      The number of examples predicted.
    """
    s = task.settings
    counter = progress.Progress("Predicting", total=total, unit="examples")
    count = 0
    with contextlib.ExitStack() as files:
        paths = [task.path(TEST_RESULTS_FILE), task.path(predictions.FILE)]
        results, jsonl = (
            files.enter_context(file_io.atomic_writes(paths))
            if write
            else (None, None)
        )
        examples = iter_predict_examples(task)
        for block in file_io.chunks(examples, PREDICT_BLOCK):
            logits = task.logits(
                model, task.arrays(block), s.predict_batch_size
            )
            probabilities = tf.nn.softmax(logits, axis=-1).numpy()
            if write:
                for example, row in zip(block, probabilities, strict=True):
                    results.write(
                        "\t".join(str(np.float32(v)) for v in row) + "\n"
                    )
                    jsonl.write(
                        predictions.line(
                            {
                                "id": example.id,
                                "label": int(np.argmax(row)),
                                "probabilities": [
                                    predictions.number(p) for p in row
                                ],
                            }
                        )
                    )
            count += len(block)
            counter.add(len(block))
        counter.finish()
    return count


def run(settings):
    """run_multiple_choice's main(): train, evaluate, predict.

    Returns:
      The eval results (dict) when do_eval, else None.
    """
    task = prepare(settings)
    s = task.settings
    # Every input file is read and checked before training.
    train_examples = read_train_examples(task) if s.do_train else None
    eval_examples = read_eval_examples(task) if s.do_eval else None
    num_predict = count_predict_examples(task) if s.do_predict else None
    if s.do_train:
        trainer = train(task, train_examples, eval_examples)
    else:
        trainer = fine_tuning.restore_for_inference(
            task, make_trainer(task), element_spec(task), "choice head"
        )

    def export(model):
        from modeling.export import multiple_choice as choice_export

        choice_export.export_multiple_choice(
            model,
            s.vocab_file,
            s.do_lower_case,
            s.max_seq_length,
            s.export_dir,
            extra_files=fine_tuning.tflite_export_files(s, model, rank=3),
        )

    return fine_tuning.evaluate_predict_export(
        task,
        trainer,
        lambda model, step: evaluate(
            task, model, task.arrays(eval_examples), step
        ),
        lambda task, model, write: predict(task, model, write, num_predict),
        export,
    )
