"""run_classifier's evaluation and prediction on a trained BertClassifier.

Metrics need every prediction (F1, Matthews and the correlations are not
means over batches), so the model's logits over the whole dev set are
gathered in file order and scored with modeling.tasks.metrics in numpy.
Prediction streams: the test set's outputs are written batch by batch.
"""

import contextlib
import itertools
import os

import numpy as np
import tensorflow as tf
from absl import logging

from modeling import task_kinds
from modeling.data import classifier_data
from modeling.data import custom
from modeling.data import file_io
from modeling.data import input_pipeline
from modeling.data import tfrecord_io
from modeling.tasks import common
from modeling.tasks import metrics
from modeling.tasks import predictions
from modeling.training import predictor

TEST_RESULTS_FILE = "test_results.tsv"


def _count_records(path):
    """The number of records of a local file we wrote (None if remote)."""
    if file_io.is_remote(path):
        return None
    return tfrecord_io.check_framing(path)


def eval_examples_and_file(task):
    """Dev examples (padded on TPU) written to eval.tf_record."""
    s = task.settings
    examples = task.processor.get_dev_examples(s.data_dir)
    num_actual = len(examples)
    if common.uses_tpu(s):
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


def dev_logits(task, model, eval_file):
    """The model's logits over eval_file in file order: (logits [N, L],
    labels, is_real_example), numpy."""
    s = task.settings
    features, outputs = task.predictor(model, s.eval_batch_size).gather(
        task.read_rows(eval_file),
        what="Evaluating",
        total=_count_records(eval_file),
        unit=_unit(task),
    )
    if not outputs:
        raise ValueError(f"{eval_file}: no records to evaluate")
    logits = outputs["logits"]
    labels = features[input_pipeline.LABEL_IDS]
    is_real = features[input_pipeline.IS_REAL_EXAMPLE]
    if task.long_inputs is not None and task.long_inputs.windowed:
        # One row per text: its windows' outputs combined.
        starts, logits = task.long_inputs.per_example(
            features[input_pipeline.EXAMPLE_INDEX], logits
        )
        labels, is_real = labels[starts], is_real[starts]
    return logits, labels, is_real


def evaluate(task, model, eval_file, global_step, logits=None):
    """Evaluates on eval_file: the original's keys plus the task metrics
    (`logits`: dev_logits' result, when already computed)."""
    logits, labels, is_real = logits or dev_logits(task, model, eval_file)
    results = metrics.classifier_eval_results(
        logits,
        labels,
        is_real,
        task.settings.eval_batch_size,
        task.processor.metric_names,
        task.kind,
    )
    results["global_step"] = int(global_step)
    return results


def choose_threshold(task, logits, write=True):
    """--multi_label_threshold=auto: the threshold with the best micro-F1
    on the dev set's logits (task_kinds.best_threshold) becomes the task's
    kind and, written to output_dir/labels.json, the one a later predict
    run and the export use."""
    logits, labels, is_real = logits
    real = np.asarray(is_real).astype(bool)
    threshold, f1 = task_kinds.best_threshold(logits[real], labels[real])
    logging.info(
        "--multi_label_threshold=auto: %.6g (dev micro-F1 %.4f; at 0.5: %.4f)",
        threshold,
        f1,
        metrics.micro_f1(
            labels[real],
            np.asarray(task_kinds.MultiLabel().decide(logits[real])),
        ),
    )
    task.kind = task_kinds.MultiLabel(threshold)
    task.processor.multi_label_threshold = threshold
    if write:
        task.processor.spec().write(task.path(custom.LABELS_FILE))
    return threshold


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
    if common.uses_tpu(s):
        # As the original on TPU: padding records fill the last batch
        # (their outputs are dropped below).
        examples = classifier_data.padded_to_batch(
            examples, s.predict_batch_size
        )
    predict_file, num_records = task.write_records(
        examples, "predict.tf_record", total
    )
    if not num_records and hasattr(processor, "path"):
        raise ValueError(f"{processor.path('test')}: no rows to predict")
    rows = _rows(
        task,
        task.predictor(model, s.predict_batch_size).batches(
            task.read_rows(predict_file), total=num_records, unit=_unit(task)
        ),
    )
    with contextlib.ExitStack() as files:
        writers = _PredictionWriters(task, files if write else None)
        count = 0
        for example in processor.iter_test_examples(s.data_dir):
            output, prediction, num_windows = next(rows, (None, None, None))
            if output is None:
                raise RuntimeError(
                    "The test file has more rows than when it was read "
                    "first (did it change during the run?)"
                )
            writers.write(example, output, prediction, num_windows)
            count += 1
        rest = sum(1 for _ in rows)  # The TPU's padding records.
        windowed = task.long_inputs is not None and task.long_inputs.windowed
        if (not windowed and count + rest != num_records) or (
            rest and not common.uses_tpu(s)
        ):
            raise RuntimeError(
                f"The test file gave {count} examples, then "
                f"{num_records} (did it change during the run?)"
            )
        files.close()  # Publishes the files as one (file_io.atomic_writes).
    logging.info("Predicted %d examples", count)


def _unit(task):
    """What the predictor's progress lines count: with --long_inputs=chunks
    the records are windows (the texts were counted as they were
    written)."""
    if task.long_inputs is not None and task.long_inputs.windowed:
        return "windows"
    return "examples"


def _rows(task, batches):
    """Per example, in input order: (its test_results.tsv values float32
    [K]: the kind's activation, what it predicts: a class id, a score or a
    0/1 vector)."""

    long_inputs = task.long_inputs
    if long_inputs is not None and long_inputs.windowed:
        return _window_rows(task, batches)

    def rows():
        for order, _, outputs in batches:
            logits = outputs["logits"]
            values = np.asarray(task.kind.activation(logits))
            chosen = np.asarray(task.kind.decide(logits))
            yield from zip(order, zip(values, chosen, itertools.repeat(None)))

    return predictor.in_input_order(rows())


def _window_rows(task, batches, group=256):
    """`_rows` of --long_inputs=chunks: each text's windows combined, with
    their count, `group` texts at a time through the activation."""

    def windows():
        for order, features, outputs in batches:
            index = features[input_pipeline.EXAMPLE_INDEX]
            yield from zip(order, zip(index, outputs["logits"]))

    texts = task.long_inputs.grouped(predictor.in_input_order(windows()))
    for chunk in file_io.chunks(texts, group):
        logits = np.stack([logit for logit, _ in chunk])
        values = np.asarray(task.kind.activation(logits))
        chosen = np.asarray(task.kind.decide(logits))
        yield from zip(values, chosen, [count for _, count in chunk])


class _PredictionWriters:
    """test_results.tsv, predictions.jsonl and the GLUE submission file,
    written row by row under temporary names and published as one when the
    ExitStack closes without an error (file_io.atomic_writes; None: nothing
    is written, a worker that is not the chief)."""

    def __init__(self, task, files):
        self.task = task
        self.files = files
        if files is None:
            return
        s = task.settings
        paths = [task.path(TEST_RESULTS_FILE), task.path(predictions.FILE)]
        if s.glue_submission_dir:
            tf.io.gfile.makedirs(s.glue_submission_dir)
            name = f"{task.processor.submission_name}.tsv"
            paths.append(os.path.join(s.glue_submission_dir, name))
        opened = files.enter_context(file_io.atomic_writes(paths))
        self.results, self.jsonl = opened[:2]
        self.submission = opened[2] if s.glue_submission_dir else None
        if self.submission is not None:
            self.submission.write(classifier_data.GLUE_SUBMISSION_HEADER)

    def write(self, example, output, prediction, num_windows=None):
        if self.files is None:
            return
        task = self.task
        self.results.write("\t".join(str(np.float32(v)) for v in output) + "\n")
        labels = task.label_list
        record = {
            "id": example.index or example.guid,
            **predictions.classifier_record(
                task.kind, labels, output, prediction
            ),
        }
        if num_windows is not None:  # --long_inputs=chunks.
            record["num_windows"] = int(num_windows)
        self.jsonl.write(predictions.line(record))
        if self.submission is not None:
            self.submission.write(
                classifier_data.glue_submission_line(
                    example, prediction, labels
                )
            )
