"""run_classifier's evaluation and prediction on a trained BertClassifier.

Metrics need every prediction (F1, Matthews and the correlations are not
means over batches), so the model's logits over the whole dev/test set are
gathered in file order and scored with modeling.tasks.metrics in numpy.
"""

import os
import weakref

import numpy as np
import tensorflow as tf
from absl import logging

from modeling import checkpoints
from modeling import progress
from modeling.data import classifier_data
from modeling.data import file_io
from modeling.data import input_pipeline
from modeling.data import tfrecord_io
from modeling.tasks import common
from modeling.tasks import metrics
from modeling.training import checkpoint_manager
from modeling.training import distribute

EVAL_HISTORY_FILE = "eval_history.txt"
TEST_RESULTS_FILE = "test_results.tsv"
BEST_DIR = "best"

_PREDICT_STEPS = weakref.WeakKeyDictionary()


def predict_logits(task, model, dataset, what="Predicting", total=None):
    """Runs the model over a dataset in order (under the task's strategy),
    logging progress (`what`, `total` examples when known).

    Returns:
      (logits float32 [N, L], labels [N], is_real_example int [N]) as numpy.
    """
    step = _predict_step(task.strategy, model)
    parts = ([], [], [])
    counter = progress.Progress(what, total=total)
    for batch in distribute.distribute_dataset(task.strategy, dataset):
        for part, value in zip(parts, step(batch)):
            part.append(value.numpy())
        counter.add(len(parts[0][-1]))
    counter.finish()
    return tuple(np.concatenate(p, axis=0) for p in parts)


def _count_records(path):
    """The number of records of a local file we wrote (None if remote)."""
    if file_io.is_remote(path):
        return None
    return tfrecord_io.check_framing(path)


def _predict_step(strategy, model):
    """A tf.function computing logits, cached on the model (no retracing)."""
    cached = _PREDICT_STEPS.get(model)
    if cached is not None:
        return cached

    def replica_fn(f):
        logits = tf.cast(model(f, training=False), tf.float32)
        return (
            logits,
            f[input_pipeline.LABEL_IDS],
            f[input_pipeline.IS_REAL_EXAMPLE],
        )

    # reduce_retracing: with --dynamic_padding batch lengths vary.
    @tf.function(autograph=False, reduce_retracing=True)
    def step(features):
        outputs = strategy.run(replica_fn, args=(features,))
        return tf.nest.map_structure(
            lambda t: strategy.gather(t, axis=0), outputs
        )

    _PREDICT_STEPS[model] = step
    return step


def eval_examples_and_file(task):
    """Dev examples (padded on TPU) written to eval.tf_record."""
    s = task.settings
    examples = task.processor.get_dev_examples(s.data_dir)
    num_actual = len(examples)
    if s.use_tpu:
        # TPU requires a fixed batch size for all batches; padding examples
        # get weight 0 in the metrics.
        examples, num_actual = classifier_data.pad_examples(
            examples, s.eval_batch_size
        )
    logging.info(
        "***** Running evaluation: %d examples (%d actual, %d padding) *****",
        len(examples),
        num_actual,
        len(examples) - num_actual,
    )
    return task.write_records(examples, "eval.tf_record")


def evaluate(task, model, eval_file, global_step):
    """Evaluates on eval_file: the original's keys plus the task metrics."""
    s = task.settings
    dataset = task.read_records(
        eval_file, s.eval_batch_size, False, drop_remainder=s.use_tpu
    )
    logits, labels, is_real = predict_logits(
        task, model, dataset, "Evaluating", _count_records(eval_file)
    )
    results = metrics.classifier_eval_results(
        logits,
        labels,
        is_real,
        s.eval_batch_size,
        task.processor.metric_names,
        task.processor.is_regression,
    )
    results["global_step"] = int(global_step)
    return results


def write_eval_results(path, results):
    """Logs the results and writes them to `path` (eval_results.txt)."""
    logging.info(
        "***** Eval results *****\n%s", metrics.format_eval_results(results)
    )
    common.write_eval_results(path, metrics.as_reported(results))


def predict(task, model, write=True):
    """Predicts the test set: test_results.tsv (+ the GLUE submission file).

    test_results.tsv has one line per real test example: the class
    probabilities, tab-separated (`str` of float32 values, as the original),
    or for a regression task the predicted score.
    """
    s = task.settings
    examples = task.processor.get_test_examples(s.data_dir)
    records, num_actual = examples, len(examples)
    if s.use_tpu:
        records, num_actual = classifier_data.pad_examples(
            examples, s.predict_batch_size
        )
    predict_file = task.write_records(records, "predict.tf_record")
    dataset = task.read_records(
        predict_file, s.predict_batch_size, False, drop_remainder=s.use_tpu
    )
    logits = predict_logits(task, model, dataset, "Predicting", len(records))[
        0
    ][:num_actual]
    if task.processor.is_regression:
        outputs = logits[:, :1]
        predictions = logits[:, 0]
    else:
        outputs = tf.nn.softmax(logits, axis=-1).numpy()
        predictions = np.argmax(logits, axis=-1)
    if not write:  # Not the chief of a multi-worker run.
        return outputs
    lines = [
        "\t".join(str(np.float32(v)) for v in row) + "\n" for row in outputs
    ]
    file_io.write_text(task.path(TEST_RESULTS_FILE), "".join(lines))
    if s.glue_submission_dir:
        tf.io.gfile.makedirs(s.glue_submission_dir)
        name = f"{task.processor.submission_name}.tsv"
        classifier_data.write_glue_submission(
            os.path.join(s.glue_submission_dir, name),
            examples,
            predictions,
            task.label_list,
        )
    return outputs


class BestCheckpointKeeper:
    """--eval_during_training: evaluates at each checkpoint, keeps the best.

    The best model's weights (no optimizer slots, so it is small and loads
    like a released checkpoint plus the head) go to output_dir/best/ as
    `model.ckpt-<step>` with its `eval_results.txt`; every evaluation is
    appended to output_dir/eval_history.txt.

    Args:
      task: the ClassifierTask.
      model: the BertClassifier being trained.
      eval_file: eval.tf_record.
      write: whether this process writes files (the chief of a multi-worker
        run); every worker evaluates, as the collective ops require.
    """

    def __init__(self, task, model, eval_file, write=True):
        self.task = task
        self.model = model
        self.eval_file = eval_file
        self.write = write
        self.metric = task.processor.main_metric
        self.best_dir = task.path(BEST_DIR)
        self.best_value = _previous_best(self.best_dir, self.metric)

    def __call__(self, global_step):
        """Evaluates the current weights; returns the eval results."""
        results = evaluate(self.task, self.model, self.eval_file, global_step)
        value = results[self.metric]
        if not self.write:
            return results
        history = self.task.path(EVAL_HISTORY_FILE)
        line = metrics.format_eval_results(results).replace("\n", "  ")
        with tf.io.gfile.GFile(history, "a") as f:
            f.write(line.rstrip() + "\n")
        if self.best_value is None or value > self.best_value:
            logging.info(
                "New best %s = %s at step %d", self.metric, value, global_step
            )
            self.best_value = value
            # The trainable weights under their original names (no Keras
            # dropout seed states), as the training checkpoints hold them.
            arrays = checkpoint_manager.model_variables(self.model)
            checkpoints.write_checkpoint(
                os.path.join(self.best_dir, f"model.ckpt-{int(global_step)}"),
                arrays,
                global_step=global_step,
                keep_max=1,
            )
            write_eval_results(
                os.path.join(self.best_dir, common.EVAL_RESULTS_FILE), results
            )
        return results


def _previous_best(best_dir, metric):
    """The main metric of an earlier run's best checkpoint (resume), if any."""
    path = os.path.join(best_dir, common.EVAL_RESULTS_FILE)
    if not tf.io.gfile.exists(path):
        return None
    with tf.io.gfile.GFile(path) as f:
        for line in f:
            key, _, value = line.partition(" = ")
            if key == metric:
                return float(value)
    return None
