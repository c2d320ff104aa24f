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

from modeling import progress
from modeling.data import classifier_data
from modeling.data import file_io
from modeling.data import input_pipeline
from modeling.data import tfrecord_io
from modeling.tasks import metrics
from modeling.training import distribute

TEST_RESULTS_FILE = "test_results.tsv"

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
