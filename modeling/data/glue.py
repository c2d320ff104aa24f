"""GLUE and XNLI processors: TSV files -> `InputExample`s.

The four processors of the original release (CoLA, MNLI, MRPC, XNLI) give the
same examples as the original's `run_classifier.py`: the same guids, text
columns, header handling, label lists and test-set placeholder labels. The
other GLUE tasks (SST-2, STS-B, QQP, QNLI, RTE, WNLI, MNLI mismatched and the
AX diagnostic) follow the standard GLUE download's TSV layouts.

Unlike the original, bad input fails with an error naming the file, the line
and the field (a wrong column count, an unknown label, a score that is not a
finite number) instead of an IndexError or KeyError deep in the conversion.
An empty text is encoded as the original encodes it (an empty second text:
one sentence), and logged: QQP's train.tsv has a few.
"""

import math
import os

from absl import logging

from modeling import task_kinds
from modeling.data.classifier_data import InputExample
from modeling.data.classifier_data import data_file
from modeling.data.classifier_data import read_tsv
from modeling.text import tokenization


class DataProcessor:
    """Base class for data converters for sequence classification data sets.

    A task is described by class attributes: the files, whether each has a
    header line, which columns hold text_a / text_b / the label, and how guids
    are built. Subclasses change only what differs from MRPC's layout.
    """

    labels = ("0", "1")  # In id order; None for a regression task.
    train_file, dev_file, test_file = "train.tsv", "dev.tsv", "test.tsv"
    dev_set_name = "dev"  # The guid prefix of dev examples.
    columns = (3, 4, 0)  # text_a, text_b (None: single text), label.
    test_columns = (3, 4)  # text_a, text_b of the unlabeled test file.
    train_header = True  # Whether line 0 of train/dev is a header.
    test_header = True
    guid_column = None  # None: guids use the line index, else this column.
    test_index_column = 0  # The id a GLUE submission uses per test row.
    submission_name = None  # The GLUE leaderboard's file name (no .tsv).
    metric_names = ("accuracy",)  # Keys of modeling.tasks.metrics.METRICS.
    main_metric = "eval_accuracy"  # Picks the best checkpoint.

    def get_train_examples(self, data_dir):
        """Gets a collection of `InputExample`s for the train set."""
        return self._examples(data_dir, self.train_file, "train")

    def get_dev_examples(self, data_dir):
        """Gets a collection of `InputExample`s for the dev set."""
        return self._examples(data_dir, self.dev_file, self.dev_set_name)

    def get_test_examples(self, data_dir):
        """Gets a collection of `InputExample`s for prediction."""
        return self._examples(data_dir, self.test_file, "test")

    def input_files(self, data_dir):
        """The paths of the files this processor reads in data_dir."""
        names = (self.train_file, self.dev_file, self.test_file)
        return [data_file(data_dir, name) for name in names]

    def get_labels(self):
        """Gets the list of labels for this data set (None: regression)."""
        return None if self.labels is None else list(self.labels)

    @property
    def is_regression(self):
        return self.labels is None

    @property
    def task_type(self):
        """The task kind's name: classification or regression
        (modeling/data/custom.py adds multi_label)."""
        if self.is_regression:
            return task_kinds.REGRESSION
        return task_kinds.CLASSIFICATION

    def iter_test_examples(self, data_dir):
        """The examples to predict, as an iterable (a custom task's file
        streams)."""
        return self.get_test_examples(data_dir)

    @property
    def has_text_b(self):
        """Whether examples are sentence pairs (text_a and text_b)."""
        return self.test_columns[1] is not None

    @classmethod
    def _read_tsv(cls, input_file, quotechar=None):
        """Reads a tab separated value file (the original's name and
        arguments: `quotechar` None in its processors)."""
        return read_tsv(input_file, quotechar)

    def _examples(self, data_dir, file_name, set_type):
        path = os.path.join(data_dir, file_name)
        return self._create_examples(self._read_tsv(path), set_type, path)

    def _columns(self, set_type):
        """(text_a, text_b, label) columns; label None for the test set."""
        return (
            self.test_columns + (None,) if set_type == "test" else self.columns
        )

    def _keep(self, line, set_type):
        """Whether a (well-formed, non-header) row becomes an example."""
        del line, set_type
        return True

    def _label(self, text, where):
        """Validates a label field of a train/dev row."""
        if self.labels is None:
            try:
                finite = math.isfinite(float(text))
            except ValueError:
                finite = False
            if not finite:
                raise ValueError(f"{where}: label {text!r} is not a number")
            return text
        if text not in self.labels:
            raise ValueError(
                f"{where}: unknown label {text!r}; expected one of "
                f"{list(self.labels)}"
            )
        return text

    def _create_examples(self, lines, set_type, input_file="<lines>"):
        """Creates examples from rows; errors name `input_file` and the line."""
        is_test = set_type == "test"
        header = self.test_header if is_test else self.train_header
        cols = self._columns(set_type)
        num_columns = len(lines[0]) if lines else 0
        examples = []
        empty = []
        for i, line in enumerate(lines):
            if header and i == 0:
                continue
            where = f"{input_file} line {i + 1}"
            if len(line) != num_columns:
                raise ValueError(
                    f"{where}: expected {num_columns} tab-separated columns "
                    f"(as line 1), found {len(line)}"
                )
            if self._keep(line, set_type):
                example = self._example(line, i, set_type, cols, where)
                if any(
                    t is not None and tokenization.is_empty_text(t)
                    for t in (example.text_a, example.text_b)
                ):
                    empty.append(i + 1)
                examples.append(example)
        if empty:
            # QQP's train.tsv has such rows. As in the original, an empty
            # second text makes a one-sentence input, an empty first text
            # no piece before its [SEP].
            logging.warning(
                "%s: %d rows with an empty text (line %s first), encoded "
                "as the original encodes them",
                input_file,
                len(empty),
                empty[0],
            )
        return examples

    def _example(self, line, i, set_type, cols, where):
        key = i if self.guid_column is None else line[self.guid_column]
        text_a = line[cols[0]]
        text_b = None if cols[1] is None else line[cols[1]]
        if set_type == "test":
            # Test sets are unlabeled: the original gives a placeholder label.
            label = "0.0" if self.labels is None else self.labels[0]
            index = line[self.test_index_column]
        else:
            label = self._label(line[cols[2]], where)
            index = None
        return InputExample(
            guid=f"{set_type}-{key}",
            text_a=text_a,
            text_b=text_b,
            label=label,
            index=index,
        )


class MrpcProcessor(DataProcessor):
    """Processor for the MRPC data set (GLUE version)."""

    submission_name = "MRPC"
    metric_names = ("accuracy", "f1")
    main_metric = "eval_f1"


class ColaProcessor(DataProcessor):
    """Processor for the CoLA data set (GLUE version).

    Only the test set has a header; guids count it (the first test example is
    `test-1`, the first train example `train-0`), as in the original.
    """

    columns = (3, None, 1)
    test_columns = (1, None)
    train_header = False
    submission_name = "CoLA"
    metric_names = ("accuracy", "mcc")
    main_metric = "eval_mcc"


class MnliProcessor(DataProcessor):
    """Processor for the MultiNLI data set (GLUE version), matched dev/test."""

    labels = ("contradiction", "entailment", "neutral")
    dev_file, test_file = "dev_matched.tsv", "test_matched.tsv"
    dev_set_name = "dev_matched"
    columns = (8, 9, -1)
    test_columns = (8, 9)
    guid_column = 0
    submission_name = "MNLI-m"


class MnliMismatchedProcessor(MnliProcessor):
    """MultiNLI with the mismatched dev/test sets (train is the same)."""

    dev_file, test_file = "dev_mismatched.tsv", "test_mismatched.tsv"
    dev_set_name = "dev_mismatched"
    submission_name = "MNLI-mm"


class XnliProcessor(DataProcessor):
    """Processor for the XNLI data set (train: machine-translated MultiNLI).

    The original hard-codes the language "zh"; `language` keeps that default.
    Dev rows of other languages are skipped, but guids count them (as the
    original's).
    """

    labels = ("contradiction", "entailment", "neutral")
    dev_set_name = "dev"

    def __init__(self, language="zh"):
        self.language = language

    def get_train_examples(self, data_dir):
        """See base class."""
        name = os.path.join("multinli", f"multinli.train.{self.language}.tsv")
        return self._examples(data_dir, name, "train")

    def get_dev_examples(self, data_dir):
        """See base class."""
        return self._examples(data_dir, "xnli.dev.tsv", "dev")

    def get_test_examples(self, data_dir):
        raise ValueError("XNLI has no test set (as in the original release)")

    def _columns(self, set_type):
        return (0, 1, 2) if set_type == "train" else (6, 7, 1)

    def _keep(self, line, set_type):
        return set_type == "train" or line[0] == self.language

    def _label(self, text, where):
        # The translated MultiNLI train files say "contradictory".
        if text == "contradictory":
            text = "contradiction"
        return super()._label(text, where)


class Sst2Processor(DataProcessor):
    """Processor for the SST-2 data set (GLUE version)."""

    columns = (0, None, 1)
    test_columns = (1, None)
    submission_name = "SST-2"


class StsbProcessor(DataProcessor):
    """Processor for the STS-B data set (GLUE version): regression, 0 to 5."""

    labels = None
    columns = (7, 8, -1)
    test_columns = (7, 8)
    submission_name = "STS-B"
    metric_names = ("pearson", "spearman")
    main_metric = "eval_pearson"


class QqpProcessor(DataProcessor):
    """Processor for the QQP data set (GLUE version)."""

    columns = (3, 4, 5)
    test_columns = (1, 2)
    guid_column = 0
    submission_name = "QQP"
    metric_names = ("accuracy", "f1")
    main_metric = "eval_f1"


class QnliProcessor(DataProcessor):
    """Processor for the QNLI data set (GLUE version)."""

    labels = ("entailment", "not_entailment")
    columns = (1, 2, -1)
    test_columns = (1, 2)
    submission_name = "QNLI"


class RteProcessor(QnliProcessor):
    """Processor for the RTE data set (GLUE version)."""

    submission_name = "RTE"


class WnliProcessor(DataProcessor):
    """Processor for the WNLI data set (GLUE version)."""

    columns = (1, 2, -1)
    test_columns = (1, 2)
    submission_name = "WNLI"


class AxProcessor(MnliProcessor):
    """The GLUE diagnostic set (AX): test only, predicted by an MNLI model."""

    test_columns = (1, 2)
    submission_name = "AX"

    def get_train_examples(self, data_dir):
        raise ValueError("AX is a test-only diagnostic set: train on MNLI")

    def get_dev_examples(self, data_dir):
        raise ValueError("AX is a test-only diagnostic set: it has no dev set")

    def input_files(self, data_dir):
        return [data_file(data_dir, "diagnostic.tsv", "AX.tsv")]

    def get_test_examples(self, data_dir):
        """diagnostic.tsv (GLUE download) or AX.tsv; columns index, s1, s2."""
        (path,) = self.input_files(data_dir)
        return self._create_examples(self._read_tsv(path), "test", path)


PROCESSORS = {
    "cola": ColaProcessor,
    "mnli": MnliProcessor,
    "mrpc": MrpcProcessor,
    "xnli": XnliProcessor,
    "sst-2": Sst2Processor,
    "sts-b": StsbProcessor,
    "qqp": QqpProcessor,
    "qnli": QnliProcessor,
    "rte": RteProcessor,
    "wnli": WnliProcessor,
    "mnli-mm": MnliMismatchedProcessor,
    "ax": AxProcessor,
}


def get_processor(task_name):
    """The processor for `task_name` (case-insensitive; "sst2" = "sst-2").

    Raises:
      ValueError: naming the unknown task and listing the known ones.
    """
    key = task_name.lower()
    key = {"sst2": "sst-2", "stsb": "sts-b", "mnli_mm": "mnli-mm"}.get(key, key)
    if key not in PROCESSORS:
        raise ValueError(
            f"Task not found: {task_name}. Known tasks: {', '.join(PROCESSORS)}"
        )
    return PROCESSORS[key]()
