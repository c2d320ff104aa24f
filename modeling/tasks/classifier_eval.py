"""run_classifier's evaluation and prediction on a trained BertClassifier.

Metrics need every prediction (F1, Matthews and the correlations are not
means over batches), so the model's logits over the whole dev set are
gathered in file order and scored with modeling.tasks.metrics in numpy.
Prediction streams: the test set's outputs are written batch by batch.
"""

import contextlib
import os
import weakref

import numpy as np
import tensorflow as tf
from absl import logging

from modeling import progress
from modeling.data import classifier_data
from modeling.data import file_io
from modeling.data import input_pipeline
from modeling.data import length_batching
from modeling.data import tfrecord_io
from modeling.export import tflite
from modeling.tasks import metrics
from modeling.tasks import predictions
from modeling.training import distribute

TEST_RESULTS_FILE = "test_results.tsv"

_PREDICT_STEPS = weakref.WeakKeyDictionary()


def iter_logits(task, model, dataset, what="Predicting", total=None):
    """Runs the model over a dataset in order (under the task's strategy),
    logging progress (`what`, `total` examples when known).

    Yields:
      per batch, (logits float32 [B, L], labels, is_real_example, order) as
      numpy; order: each row's input position (length-sorted batches,
      length_batching.ORDER), else None.
    """
    runner = tflite.task_runner(task.settings, model)
    if runner is None:
        step = _predict_step(task.strategy, model)
        batches = distribute.distribute_dataset(task.strategy, dataset)
    else:  # TF Lite, on this host's CPU.
        step = _tflite_step(runner)
        batches = dataset
    counter = progress.Progress(what, total=total)
    for batch in batches:
        values = tuple(np.asarray(value) for value in step(batch))
        if len(values) == 3:
            values += (None,)
        counter.add(len(values[0]))
        yield values
    counter.finish()


def _tflite_step(runner):
    """What `_predict_step` returns, from a TF Lite runner."""

    def step(f):
        outputs = (
            runner(f)["logits"],
            f[input_pipeline.LABEL_IDS],
            f[input_pipeline.IS_REAL_EXAMPLE],
        )
        if length_batching.ORDER in f:
            outputs += (f[length_batching.ORDER],)
        return outputs

    return step


def predict_logits(task, model, dataset, what="Predicting", total=None):
    """`iter_logits` gathered in input order: (logits float32 [N, L],
    labels [N], is_real_example int [N]) as numpy."""
    parts = list(zip(*iter_logits(task, model, dataset, what, total)))
    values = tuple(np.concatenate(p, axis=0) for p in parts[:3])
    if parts[3][0] is None:
        return values
    order = np.concatenate(parts[3])
    return tuple(length_batching.unsort(order, v) for v in values)


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
        outputs = (
            logits,
            f[input_pipeline.LABEL_IDS],
            f[input_pipeline.IS_REAL_EXAMPLE],
        )
        if length_batching.ORDER in f:
            outputs += (f[length_batching.ORDER],)
        return outputs

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
    return task.write_records(examples, "eval.tf_record")[0]


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
        multi_label=task.multi_label,
        threshold=s.multi_label_threshold,
    )
    results["global_step"] = int(global_step)
    return results


def predict(task, model, write=True):
    """Predicts the test set: test_results.tsv, predictions.jsonl (+ the
    GLUE submission file).

    test_results.tsv has one line per real test example: the class
    probabilities, tab-separated (`str` of float32 values, as the original),
    or for a regression task the predicted score; a multi-label task's are
    each label's sigmoid probability. predictions.jsonl has the row's id
    and its prediction by name (modeling/tasks/predictions.py).

    The test file streams: its examples are converted to predict.tf_record
    one by one, read back in batches and written out batch by batch, with
    the examples read a second time for their ids, so a file of any length
    takes the memory of a batch. Outputs are published when complete.
    """
    s = task.settings
    processor = task.processor
    examples = processor.iter_test_examples(s.data_dir)
    total = (
        len(examples)
        if hasattr(examples, "__len__")
        else processor.estimate_rows("test")
    )
    if s.use_tpu:
        # TPUs need every batch full: padding records, dropped below.
        examples = classifier_data.padded_to_batch(
            examples, s.predict_batch_size
        )
    predict_file, num_records = task.write_records(
        examples, "predict.tf_record", total
    )
    if not num_records and hasattr(processor, "path"):
        raise ValueError(f"{processor.path('test')}: no rows to predict")
    dataset = task.read_records(
        predict_file, s.predict_batch_size, False, drop_remainder=s.use_tpu
    )
    batches = iter_logits(task, model, dataset, "Predicting", num_records)
    with contextlib.ExitStack() as files:
        writers = _PredictionWriters(task, files if write else None)
        count = 0
        rows = _rows(task, batches)
        for example in processor.iter_test_examples(s.data_dir):
            output, prediction = next(rows, (None, None))
            if output is None:
                raise RuntimeError(
                    "The test file has more rows than when it was read "
                    "first (did it change during the run?)"
                )
            writers.write(example, output, prediction)
            count += 1
        rest = sum(1 for _ in rows)  # TPU padding (every batch is run).
        if count + rest != num_records or (rest and not s.use_tpu):
            raise RuntimeError(
                f"The test file gave {count} examples, then "
                f"{num_records} (did it change during the run?)"
            )
    logging.info("Predicted %d examples", count)


def _rows(task, batches):
    """Per example: (its test_results.tsv values float32 [K], what it
    predicts: a class id, a score or a 0/1 vector)."""
    threshold = task.settings.multi_label_threshold

    def rows():
        count = 0
        for logits, _, _, order in batches:
            if task.task_type == "regression":
                outputs = logits[:, :1]
            elif task.task_type == "multi_label":
                outputs = tf.sigmoid(logits).numpy()
            else:
                outputs = tf.nn.softmax(logits, axis=-1).numpy()
            chosen = metrics.classifier_predictions(
                logits, task.task_type, threshold
            )
            if order is None:  # In input order already.
                order = range(count, count + len(logits))
            count += len(logits)
            yield from zip(order, zip(outputs, chosen))

    return length_batching.in_input_order(rows())


class _PredictionWriters:
    """test_results.tsv, predictions.jsonl and the GLUE submission file,
    written row by row under temporary names and published together when
    the ExitStack closes without an error (None: nothing is written, a
    worker that is not the chief)."""

    def __init__(self, task, files):
        self.task = task
        self.files = files
        if files is None:
            return
        s = task.settings
        self.results = files.enter_context(
            file_io.atomic_write(task.path(TEST_RESULTS_FILE))
        )
        self.jsonl = files.enter_context(
            file_io.atomic_write(task.path(predictions.FILE))
        )
        self.submission = None
        if s.glue_submission_dir:
            tf.io.gfile.makedirs(s.glue_submission_dir)
            name = f"{task.processor.submission_name}.tsv"
            self.submission = files.enter_context(
                file_io.atomic_write(
                    os.path.join(s.glue_submission_dir, name)
                )
            )
            self.submission.write(classifier_data.GLUE_SUBMISSION_HEADER)

    def write(self, example, output, prediction):
        if self.files is None:
            return
        task = self.task
        self.results.write(
            "\t".join(str(np.float32(v)) for v in output) + "\n"
        )
        record = {"id": example.index or example.guid}
        labels = task.label_list
        if task.task_type == "regression":
            record["score"] = predictions.number(prediction)
        elif task.task_type == "multi_label":
            record["labels"] = [
                name for name, on in zip(labels, prediction) if on
            ]
            record["probabilities"] = predictions.by_name(labels, output)
        else:
            record["label"] = labels[int(prediction)]
            record["probabilities"] = predictions.by_name(labels, output)
        self.jsonl.write(predictions.line(record))
        if self.submission is not None:
            self.submission.write(
                classifier_data.glue_submission_line(
                    example, prediction, labels
                )
            )
