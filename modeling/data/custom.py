"""Your own classification files: run_classifier.py --task_name=custom.

The rows of CSV, TSV or JSON Lines files (modeling/data/table_files.py)
become the `InputExample`s a GLUE processor makes, so everything after them
(features, records, training, evaluation, prediction, export) is the
built-in tasks' own: MRPC written as a CSV file gives MRPC's numbers.

Columns are found by name:
  text_a   --text_a_column; without it and --text_b_column, the first pair
  text_b   of PAIR_COLUMNS the file has (the GLUE files' names: sentence1
           and sentence2, question and sentence, premise and hypothesis,
           ...), else the first of TEXT_A_COLUMNS and no text_b;
           --text_b_column names a pair's second text itself;
  label    --label_column (default "label"); not needed to predict;
  id       --id_column, else the first of ID_COLUMNS; else the row's line.

Task types:
  classification  one label per row; the labels are --labels, else the
                  sorted distinct training labels (numerically when all are
                  integers);
  regression      a number per row (the STS-B head and metrics);
  multi_label     a set of labels per row: a JSON list, or a string split
                  at --label_separator (default ","; empty: no label); one
                  sigmoid per label.

What a predict or export run needs to know of the training run (the task
type, the labels in id order, the text columns, a multi-label task's
threshold) is written to `output_dir/labels.json` when training starts, so
those runs need neither the training file nor the flags and decide as
training did.

One module, over 500 lines: your own files' rules (columns, labels, ids,
errors) in one place, read alike by run_classifier and the Keras API.
"""

import collections
import dataclasses
import decimal
import json
import math
import os
import re

import numpy as np
from absl import logging

from modeling import task_kinds
from modeling.data import file_io
from modeling.data import table_files
from modeling.data.classifier_data import InputExample
from modeling.text import tokenization

TASK_NAME = "custom"
TASK_TYPES = task_kinds.NAMES
TEXT_A_COLUMNS = ("text_a", "sentence1", "sentence", "text", "question")
# Sentence pairs by the names their datasets give them (MRPC, STS-B, RTE,
# WNLI; QNLI; QQP; MNLI, RTE, SNLI): taken as (text_a, text_b) when no text
# column flag is given.
PAIR_COLUMNS = (
    ("text_a", "text_b"),
    ("sentence1", "sentence2"),
    ("question", "sentence"),
    ("question1", "question2"),
    ("premise", "hypothesis"),
)
LABEL_COLUMN = "label"
ID_COLUMNS = table_files.ID_COLUMNS
LABELS_FILE = "labels.json"
# Looked for in --data_dir when a file flag is not given.
EXTENSIONS = (".csv", ".tsv", ".jsonl", ".json")
SET_FILES = {"train": "train", "dev": "dev", "test": "test"}
DEFAULT_LABEL_SEPARATOR = ","
# --multi_label_threshold=auto: the dev set's best micro-F1 threshold.
AUTO = "auto"
# Before training, dev and test files up to this size are read whole (a few
# seconds); larger ones only their first CHECK_ROWS rows.
CHECK_WHOLE_BYTES = 64 << 20
CHECK_ROWS = 1000


@dataclasses.dataclass
class TaskSpec:
    """A custom task as labels.json records it.

    Attributes:
      task_type: one of TASK_TYPES.
      labels: the labels in id order; None for regression.
      text_a_column, text_b_column: the text columns training read (None:
        no text_b).
      multi_label_threshold: a multi-label task's decision threshold (None:
        the default 0.5, or not chosen yet).
    """

    task_type: str
    labels: list | None
    text_a_column: str | None = None
    text_b_column: str | None = None
    multi_label_threshold: float | None = None

    def to_json(self):
        return json.dumps(dataclasses.asdict(self), indent=2) + "\n"

    @classmethod
    def read(cls, path):
        """Reads labels.json.

        Raises:
          ValueError: naming the file: not JSON, or fields missing/unknown.
        """
        try:
            value = json.loads(file_io.read_text(path))
            spec = cls(**value)
        except (json.JSONDecodeError, TypeError) as e:
            raise ValueError(f"{path}: not a labels file ({e})") from None
        if spec.task_type not in TASK_TYPES:
            raise ValueError(f"{path}: unknown task_type {spec.task_type!r}")
        if spec.multi_label_threshold is not None:
            try:
                task_kinds.get(spec.task_type, spec.multi_label_threshold)
            except ValueError as e:
                raise ValueError(f"{path}: {e}") from None
        return spec

    def write(self, path):
        file_io.write_text(path, self.to_json())


def parse_label_list(text):
    """--labels: comma-separated, in id order, each stripped.

    Raises:
      ValueError: a label given twice, or none.
    """
    labels = [x.strip() for x in text.split(",") if x.strip()]
    if not labels:
        raise ValueError("--labels lists no label")
    twice = sorted({x for x in labels if labels.count(x) > 1})
    if twice:
        raise ValueError(f"--labels lists {twice} twice")
    return labels


def sorted_labels(labels):
    """The labels in id order: numerically if all are integers, else as
    strings."""
    labels = set(labels)
    try:
        # Ties ("1", "01", "+1") by their text: never by set order, which
        # changes between processes.
        return sorted(labels, key=lambda x: (int(x), x))
    except ValueError:
        return sorted(labels)


class CustomProcessor:
    """A processor (as modeling.data.glue.DataProcessor) over the user's
    files.

    Args:
      task_type: one of TASK_TYPES.
      files: dict "train"/"dev"/"test" -> path (or None).
      text_a_column, text_b_column, label_column, id_column: the column
        flags (None: the defaults above).
      labels: the labels in id order (None: from the training file, set by
        `set_labels`; always None for regression).
      label_separator: splits a multi-label string.
      skip_bad_rows: skip (count, log) bad rows instead of failing.
    """

    submission_name = None  # Not a GLUE task.

    def __init__(
        self,
        task_type=task_kinds.CLASSIFICATION,
        files=None,
        text_a_column=None,
        text_b_column=None,
        label_column=None,
        id_column=None,
        labels=None,
        label_separator=DEFAULT_LABEL_SEPARATOR,
        skip_bad_rows=False,
        multi_label_threshold=None,
    ):
        if task_type not in TASK_TYPES:
            raise ValueError(
                f"--task_type={task_type}: expected one of "
                f"{', '.join(TASK_TYPES)}"
            )
        # What differs between the kinds here: how a label is read.
        self.kind = task_kinds.get(task_type)
        if labels and not self.kind.label_list:
            raise ValueError(f"A {task_type} task has no --labels")
        self.task_type = task_type
        self.files = dict(files or {})
        self.text_a_column = text_a_column
        self.text_b_column = text_b_column
        self.label_column = label_column
        self.id_column = id_column
        self.labels = None if labels is None else list(labels)
        self.label_separator = label_separator or DEFAULT_LABEL_SEPARATOR
        self.skip_bad_rows = skip_bad_rows
        # A float, "auto" (chosen on the dev set by the run), or None.
        self.multi_label_threshold = multi_label_threshold
        self._train_examples = None
        # labels.json's path while it waits for `publish_spec`.
        self.pending_spec = None

    # === What run_classifier asks a processor ===

    @property
    def is_regression(self):
        """The GLUE processors' flag: the labels are scores, not names."""
        return not self.kind.label_list

    @property
    def has_text_b(self):
        return bool(self.text_b_column)

    @property
    def metric_names(self):
        return self.kind.metric_names_for(self.labels)

    @property
    def main_metric(self):
        return self.kind.main_metric

    def get_labels(self):
        return None if self.labels is None else list(self.labels)

    def get_train_examples(self, data_dir=None):
        """The training examples (read once, then kept)."""
        del data_dir  # The files are the processor's.
        if self._train_examples is None:
            self._train_examples = list(self.iter_examples("train"))
        return self._train_examples

    def get_dev_examples(self, data_dir=None):
        del data_dir
        return list(self.iter_examples("dev"))

    def get_test_examples(self, data_dir=None):
        del data_dir
        return list(self.iter_examples("test"))

    def iter_test_examples(self, data_dir=None):
        """The test file's examples, streamed (any number of rows)."""
        del data_dir
        return self.iter_examples("test")

    def estimate_rows(self, set_type):
        """About how many rows a set's file has (its lines less the
        header), for progress lines before it is read."""
        table = table_files.TableFile(self.path(set_type))
        return table.count_lines() - (table.format != "jsonl")

    # === Reading ===

    def path(self, set_type):
        """The file of a set.

        Raises:
          ValueError: no file given for it.
        """
        path = self.files.get(set_type)
        if not path:
            mode = {"train": "do_train", "dev": "do_eval"}.get(
                set_type, "do_predict"
            )
            raise ValueError(
                f"--task_name=custom --{mode} needs --{set_type}_file (or a "
                f"{set_type}.csv, .tsv or .jsonl file in --data_dir)"
            )
        return path

    def iter_examples(self, set_type, bad_rows=None):
        """The examples of a set, one row at a time (a file of any length
        streams). Test examples carry a placeholder label and, as `index`,
        the row's id (its id column, else its line number).

        Args:
          bad_rows: a table_files.BadRows (None: a new one, by
            skip_bad_rows).

        Raises:
          ValueError: naming the file and line (unless skip_bad_rows): a
            missing column, an empty text, a label that is not in the label
            set, a regression target that is not a number, a missing or
            repeated id, a bad row.
        """
        bad = bad_rows or table_files.BadRows(self.skip_bad_rows)
        table = table_files.TableFile(self.path(set_type), bad)
        if not table.columns:
            raise ValueError(f"{table.path}: no rows (an empty file)")
        is_test = set_type == "test"
        text_a, text_b = self._text_columns(table)
        label = None
        if not is_test:
            label = table_files.find_column(
                table, "label_column", self.label_column or LABEL_COLUMN, ()
            )
        # A column the flag names must be in the file to predict (a typo
        # gave line numbers as ids). Training and dev rows' ids are never
        # written: not read (a pandas index column repeating was refused).
        id_column = None
        if is_test:
            id_column = table_files.find_column(
                table,
                "id_column",
                self.id_column,
                ID_COLUMNS,
                required=bool(self.id_column),
            )
        if not bad.quiet:
            used = {text_a, text_b, label, id_column}
            logging.info(
                "%s: text_a=%r, text_b=%r, label=%r, id=%r%s",
                table.path,
                text_a,
                text_b,
                label,
                id_column,
                "".join(
                    f"; column {c!r} not used"
                    for c in table.columns
                    if c not in used
                ),
            )
        ids = set()
        for line, row in table.rows():
            where = table.where(line)
            try:
                index = (
                    str(line)
                    if id_column is None
                    else _row_id(row, id_column, ids)
                )
                example = InputExample(
                    guid=f"{set_type}-{line}",
                    text_a=_text(row, text_a, where),
                    text_b=None
                    if text_b is None
                    else _text(row, text_b, where),
                    label=(
                        self._placeholder()
                        if is_test
                        else self._label(row, label, where, set_type)
                    ),
                    index=index,
                )
            except _BadRow as e:
                bad.report(where, str(e))
                continue
            if id_column is not None:
                ids.add(index)
            yield example
        bad.log_summary(table.path)

    def _text_columns(self, table):
        """(text_a, text_b) of a file (see the module doc); the first file
        read fixes them for the others (and labels.json records them)."""
        if self.text_a_column is None and self.text_b_column is None:
            for first, second in PAIR_COLUMNS:
                if first in table.columns and second in table.columns:
                    self.text_a_column, self.text_b_column = first, second
                    logging.info(
                        "Sentence pairs: columns %r and %r of %s (set "
                        "--text_a_column to read single texts)",
                        first,
                        second,
                        table.path,
                    )
                    break
        text_a = table_files.find_column(
            table, "text_a_column", self.text_a_column, TEXT_A_COLUMNS
        )
        if self.text_a_column is None:
            self.text_a_column = text_a
        text_b = None
        if self.text_b_column:
            text_b = table_files.find_column(
                table, "text_b_column", self.text_b_column
            )
        return text_a, text_b

    def check_file(self, set_type):
        """Reads a set's file as `iter_examples` does, before any training:
        all of it when it is at most CHECK_WHOLE_BYTES, else its columns
        and first CHECK_ROWS rows (the rest is checked as it is used).

        Raises:
          ValueError: what iter_examples raises; a file without any usable
            row (naming it and the rows skipped).
        """
        path = table_files.TableFile(self.path(set_type)).path  # Exists.
        whole = file_io.size(path) <= CHECK_WHOLE_BYTES
        bad = table_files.BadRows(self.skip_bad_rows, quiet=True)
        count = 0
        for _ in self.iter_examples(set_type, bad):
            count += 1
            if not whole and count >= CHECK_ROWS:
                return
        if not count:
            skipped = f" ({bad.count} bad row(s) skipped)" if bad.count else ""
            mode = "predict" if set_type == "test" else "evaluate"
            raise ValueError(f"{path}: no rows to {mode}{skipped}")

    def _placeholder(self):
        """The label of an unlabelled (test) example, as the GLUE test sets
        get one."""
        return self.kind.placeholder_label(self.labels)

    def _label(self, row, column, where, set_type):
        if column not in row:
            raise _BadRow(f"no field {column!r} (fields: {list(row)})")
        try:
            label = self.kind.parse_label(
                row[column], self.label_separator, column
            )
        except ValueError as e:
            raise _BadRow(str(e)) from None
        label = self._as_listed(label, row[column])
        for name in self.kind.label_names(label):
            self._check_known(name, where, set_type)
        return label

    def _as_listed(self, label, value):
        """A JSON number's class as the label list spells it, matched by
        value: the JSON 1.0 is the class "1", which --labels=0,1.0 (or the
        labels.json of a run that named JSON numbers as written) spells
        "1.0". Only listed names written as JSON numbers match (not "01",
        "1_0" or "+1"); a JSON integer matches exactly (no float rounding
        of large ids). A CSV's text is matched as written."""
        if self.labels is None:
            return label
        values = value if isinstance(value, list) else [value]
        numbers = [v for v in values if _finite_number(v) is not None]
        if not numbers:
            return label
        known, exact, floats = self._listed_numbers()
        renamed = {}
        for v in numbers:
            name = task_kinds.label_name(v)
            if name in known:
                continue
            if isinstance(v, int):
                listed = exact.get(decimal.Decimal(v))
            else:
                listed = floats.get(float(v))
            if listed is not None:
                renamed[name] = listed
        if not renamed:
            return label
        if isinstance(label, list):
            return sorted({renamed.get(n, n) for n in label})
        return renamed.get(label, label)

    def _listed_numbers(self):
        """(the label set, {exact value: name}, {float value: name}) of the
        listed names written as JSON numbers; made once per label list.

        Raises:
          ValueError: two listed names are one number ("1" and "1.0").
        """
        key = tuple(self.labels)
        if getattr(self, "_numbers_key", None) != key:
            exact, floats = {}, {}
            for name in self.labels:
                if not _JSON_NUMBER.match(name):
                    continue
                number = decimal.Decimal(name)
                if number in exact:
                    raise ValueError(
                        f"The labels {exact[number]!r} and {name!r} are one "
                        "number: list it once"
                    )
                exact[number] = name
                # A JSON float matches a name that is its shortest spelling's
                # value (0.5, 1.1), not one float only rounds to.
                f = float(name)
                if math.isfinite(f) and decimal.Decimal(repr(f)) == number:
                    floats[f] = name
            self._numbers_key = key
            self._numbers = (set(self.labels), exact, floats)
        return self._numbers

    def _check_known(self, name, where, set_type):
        if self.labels is None or name in self.labels:
            return
        if set_type == "train":
            raise _BadRow(
                f"label {name!r} is not one of the labels {self.labels}"
            )
        # A dev label the model has no output for: scoring it would be
        # wrong (and is not skipped: it would bias the metrics).
        raise ValueError(
            f"{where}: label {name!r} is not one of the training labels "
            f"{self.labels}; list every label with --labels"
        )

    # === Labels ===

    def set_labels_from_training(self):
        """The labels of the training file, when no --labels or saved list
        gave them (sorted, see the module doc)."""
        if not self.kind.label_list or self.labels is not None:
            return
        found = set()
        for example in self.get_train_examples():
            found.update(self.kind.label_names(example.label))
        if not found:
            raise ValueError(
                f"{self.path('train')}: no labels in the training file"
            )
        self.labels = sorted_labels(found)
        logging.info(
            "Labels from %s (%d, in id order): %s",
            self.path("train"),
            len(self.labels),
            self.labels,
        )

    def spec(self):
        threshold = self.multi_label_threshold
        return TaskSpec(
            self.task_type,
            self.get_labels(),
            self.text_a_column,
            self.text_b_column,
            None if threshold == AUTO else threshold,
        )


# A label written as a JSON number (not "01", "+1", "1_0" or "\u0661",
# which float() reads too).
_JSON_NUMBER = re.compile(r"-?(0|[1-9][0-9]*)(\.[0-9]+)?([eE][+-]?[0-9]+)?\Z")


def _finite_number(value):
    """A JSON number's value as a finite float, else None."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return None
    try:
        number = float(value)
    except OverflowError:
        return None
    return number if math.isfinite(number) else None


class _BadRow(Exception):
    """A row that BadRows reports (or skips)."""


def _row_id(row, column, seen):
    """A row's id (its id column's value as a str).

    Raises:
      _BadRow: missing, null, empty, or given to an earlier row (`seen`:
        the ids of the rows read so far).
    """
    try:
        return table_files.row_id(row, column, seen)
    except ValueError as e:
        raise _BadRow(str(e)) from None


def _text(row, column, where):
    del where  # The caller reports it.
    if column not in row:
        raise _BadRow(f"no field {column!r} (fields: {list(row)})")
    value = row[column]
    if isinstance(value, (dict, list, bool)) or value is None:
        raise _BadRow(f"{column!r} is not a text: {value!r}")
    text = str(value)
    if tokenization.is_empty_text(text):
        raise _BadRow(f"empty text in column {column!r}")
    return text


def find_set_file(data_dir, set_type):
    """`<data_dir>/<set>.{csv,tsv,jsonl,json}`, the first that exists, or
    None."""
    if not data_dir:
        return None
    for extension in EXTENSIONS:
        path = os.path.join(data_dir, SET_FILES[set_type] + extension)
        if file_io.exists(path):
            return path
    return None


def processor_from_settings(settings, trained=True):
    """The CustomProcessor of run_classifier's settings, its labels resolved:
    --labels, else output_dir/labels.json (an earlier training run), else
    the training file's; the saved file also gives the task type and the
    text columns when their flags are unset. With --do_train (or --labels
    and no saved file) the result is to be written to output_dir/labels.json
    (`publish_spec`, once the run has checked its inputs): nothing is
    written here.

    Args:
      trained: whether output_dir holds checkpoints. Without any, its
        labels.json (left by a run that failed before its first
        checkpoint) describes no model: it binds nothing and a training run
        replaces it.

    Raises:
      ValueError: a file missing for a mode; --labels or --task_type
        disagreeing with labels.json; no labels for a predict-only run.
    """
    s = settings
    files = {}
    for set_type, flag in (
        ("train", "train_file"),
        ("dev", "dev_file"),
        ("test", "test_file"),
    ):
        path = getattr(s, flag, None)
        if (
            path
            and s.data_dir
            and not os.path.isabs(path)
            and "://" not in path
        ):
            candidate = os.path.join(s.data_dir, path)
            path = candidate if file_io.exists(candidate) else path
        files[set_type] = path or find_set_file(s.data_dir, set_type)
    saved_path = os.path.join(s.output_dir, LABELS_FILE)
    saved = None
    if file_io.exists(saved_path):
        if trained:
            saved = TaskSpec.read(saved_path)
        else:
            logging.info(
                "%s: not used, %s holds no checkpoint (a training run "
                "replaces it)",
                saved_path,
                s.output_dir,
            )
    task_type = s.task_type or (
        saved.task_type if saved else task_kinds.CLASSIFICATION
    )
    if saved and saved.task_type != task_type:
        raise ValueError(
            f"--task_type={task_type}, but {saved_path} says this "
            f"output_dir's model is {saved.task_type}"
        )
    labels = parse_label_list(s.labels) if s.labels else None
    if saved and labels is not None and saved.labels != labels:
        raise ValueError(
            f"--labels {labels} differs from {saved_path} {saved.labels} "
            "that this output_dir's checkpoints were trained with"
        )
    if labels is None and saved is not None:
        labels = saved.labels
    threshold = _threshold(s, task_type, saved, saved_path)
    processor = CustomProcessor(
        task_type=task_type,
        files=files,
        text_a_column=s.text_a_column or (saved and saved.text_a_column),
        text_b_column=s.text_b_column or (saved and saved.text_b_column),
        label_column=s.label_column,
        id_column=s.id_column,
        labels=labels,
        label_separator=s.label_separator,
        skip_bad_rows=s.skip_bad_rows,
        multi_label_threshold=threshold,
    )
    for needed, set_type in (
        (s.do_train, "train"),
        (s.do_eval, "dev"),
        (s.do_predict, "test"),
    ):
        if needed:
            processor.path(set_type)  # Fails now, not after training.
    if s.do_train:
        processor.set_labels_from_training()
    if processor.labels is None and processor.kind.label_list:
        why = (
            f"{s.output_dir} holds no checkpoint"
            if file_io.exists(saved_path)
            else f"{saved_path} does not exist"
        )
        raise ValueError(
            f"No label list: {why}; train first (--do_train) or give --labels"
        )
    new_threshold = (
        saved is not None
        and s.do_train
        and processor.spec().multi_label_threshold
        != saved.multi_label_threshold
    )
    if (saved is None and (s.do_train or s.labels)) or new_threshold:
        if s.do_train:
            # The columns training read (their defaults resolved).
            processor.get_train_examples()
        # Written by `publish_spec` once the run has checked everything it
        # can (the checkpoints already in output_dir among them): a failed
        # run leaves a trained folder as it was.
        processor.pending_spec = saved_path
    return processor


def publish_spec(processor):
    """Writes the labels.json that `processor_from_settings` found new (the
    first training run, --labels without one, a new threshold), if any."""
    path = getattr(processor, "pending_spec", None)
    if path:
        file_io.make_dirs(os.path.dirname(path))
        processor.spec().write(path)
        processor.pending_spec = None


def _threshold(settings, task_type, saved, saved_path):
    """A multi-label task's threshold: --multi_label_threshold (a float in
    (0, 1), or AUTO), else labels.json's, else the default 0.5; None for
    the other kinds.

    Raises:
      ValueError: the flag for another kind, out of range, or AUTO without
        --do_eval (it is chosen on the dev set).
    """
    s = settings
    value = s.multi_label_threshold
    if not task_kinds.get(task_type).label_sets:  # No threshold to set.
        if value is not None:
            raise ValueError(
                "--multi_label_threshold is for --task_type=multi_label, "
                f"not {task_type}"
            )
        return None
    if isinstance(value, str) and value.strip().lower() == AUTO:
        if not s.do_eval:
            raise ValueError(
                "--multi_label_threshold=auto picks the threshold with the "
                "best micro-F1 on the dev set: add --do_eval (and its "
                "--dev_file)"
            )
        return AUTO
    if value is not None:
        threshold = task_kinds.check_threshold(value)
        if (
            saved is not None
            and saved.multi_label_threshold not in (None, threshold)
            and not s.do_train
        ):
            logging.info(
                "--multi_label_threshold=%s, not %s's %s",
                threshold,
                saved_path,
                saved.multi_label_threshold,
            )
        return threshold
    if saved is not None and saved.multi_label_threshold is not None:
        logging.info(
            "Multi-label threshold %s (from %s)",
            saved.multi_label_threshold,
            saved_path,
        )
        return saved.multi_label_threshold
    return task_kinds.DEFAULT_THRESHOLD


class FileInputs(collections.namedtuple("FileInputs", "x y labels ids")):
    """`read_file`'s result: fit's x and y, the labels
    in id order, each row's id (`read_file` says which)."""


def read_file(
    path,
    labels=None,
    task_type=task_kinds.CLASSIFICATION,
    text_a_column=None,
    text_b_column=None,
    label_column=None,
    label_separator=DEFAULT_LABEL_SEPARATOR,
    skip_bad_rows=False,
):
    """A CSV / TSV / JSON Lines file as `fit`'s inputs, read as
    run_classifier.py --task_name=custom reads it (the same columns,
    labels, ids and errors); BertTextClassifier.read_file:

        train = BertTextClassifier.read_file("train.csv")
        model = BertTextClassifier.from_checkpoint(
            folder, num_labels=len(train.labels))
        model.fit(train.x, train.y, epochs=3)
        dev = BertTextClassifier.read_file("dev.csv", labels=train.labels)

    Args:
      path: the file.
      labels: the labels in id order; None: the file's, sorted. Give
        the training file's labels when reading a dev file: a file
        read with labels is evaluation data, where a label outside them
        is an error even with skip_bad_rows (dropping those rows would
        bias the metrics), as run_classifier.py's dev file.
      task_type: "classification", "regression" or "multi_label".
      text_a_column, text_b_column, label_column, label_separator,
        skip_bad_rows: as run_classifier.py's flags.

    Returns:
      FileInputs(x, y, labels, ids): x the texts (or a (text_a, text_b)
      pair of arrays), y the class ids (floats for regression, 0/1
      [N, L] for multi-label), labels in id order (None for
      regression), ids each row's line in the file (1-based, a CSV or
      TSV header is line 1): a training or dev file's ids are never
      written, so its id column is not read; only a test file's ids
      (run_classifier.py's predictions) come from its id column.

    Raises:
      ValueError: naming the file and line (see run_classifier.py's
        --task_name=custom).
    """
    # With the training run's labels: evaluation data.
    split = "train" if labels is None else "dev"
    processor = CustomProcessor(
        task_type=task_type,
        files={split: os.fspath(path)},
        text_a_column=text_a_column,
        text_b_column=text_b_column,
        label_column=label_column,
        labels=labels,
        label_separator=label_separator,
        skip_bad_rows=skip_bad_rows,
    )
    if split == "train":
        examples = processor.get_train_examples()
        processor.set_labels_from_training()
    else:
        examples = processor.get_dev_examples()
    labels = processor.get_labels()
    y = task_kinds.get(task_type).encode_labels(
        [e.label for e in examples], labels
    )
    text_a = np.array([e.text_a for e in examples], dtype=object)
    x = text_a
    if processor.has_text_b:
        x = (text_a, np.array([e.text_b for e in examples], dtype=object))
    return FileInputs(x, y, labels, [e.index for e in examples])
