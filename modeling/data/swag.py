"""SWAG multiple-choice data (run_multiple_choice.py): CSV -> examples ->
features of C packed choices.

SWAG's CSV files have a header naming the columns: (an unnamed index,)
`video-id, fold-ind, startphrase, sent1, sent2, gold-source, ending0,
ending1, ending2, ending3, label`; the test split has no `label`. Columns
are found by their header names, so the index column, the column order and
the number of choices (every `ending<i>` column, in order of i) come from
the file.

Each choice is packed as `[CLS] sent1 [SEP] sent2 + " " + ending_i [SEP]`,
exactly as run_classifier packs a sentence pair (`convert_single_example`,
the longer side truncated first), so the model sees C classifier inputs.
"""

import csv
import dataclasses
import io
import os
import re

from modeling.data import file_io

_ENDING = re.compile(r"^ending(\d+)$")
LABEL_COLUMN = "label"


@dataclasses.dataclass
class SwagExample:
    """One question: a context, the start of the ending, C endings.

    Attributes:
      guid: str, "<split>-<row>".
      context: sent1.
      start: sent2 (the first words every ending continues).
      endings: list of C strings.
      label: int index of the right ending, or None (test split).
    """

    guid: str
    context: str
    start: str
    endings: list
    label: int | None


def read_swag(path, set_type="train", require_label=True):
    """Reads a SWAG CSV file.

    Args:
      path: str.
      set_type: used in guids.
      require_label: the file must have a `label` column (train/dev); a
        test file without one gives examples with label None.

    Returns:
      list of SwagExample.

    Raises:
      ValueError: naming the file and line: a header without sent1, sent2
        or an ending column, or without label where one is required; a row
        with another column count than the header; an empty text; a label
        that is not a choice index. An empty file, or one without rows.
    """
    path = os.fspath(path)
    reader = csv.reader(io.StringIO(file_io.read_text(path), newline=""))
    header = next(reader, None)
    if not header:
        raise ValueError(f"{path}: empty file (no CSV header)")
    columns = {name.strip(): i for i, name in enumerate(header)}
    endings = sorted(
        (int(m.group(1)), i)
        for name, i in columns.items()
        if (m := _ENDING.match(name))
    )
    missing = [n for n in ("sent1", "sent2") if n not in columns]
    if not endings:
        missing.append("ending0")
    if require_label and LABEL_COLUMN not in columns:
        missing.append(LABEL_COLUMN)
    if missing:
        raise ValueError(
            f"{path} line 1: the header has no {', '.join(missing)} column "
            f"(found {', '.join(header)})"
        )
    if len(endings) < 2:
        raise ValueError(f"{path} line 1: fewer than 2 ending columns")
    ending_columns = [i for _, i in endings]
    label_column = columns.get(LABEL_COLUMN)
    num_choices = len(ending_columns)
    examples = []
    line = reader.line_num  # The last line read (a row may span lines).
    for row in reader:
        where = f"{path} line {line + 1}"
        line = reader.line_num
        if not row:
            continue
        if len(row) != len(header):
            raise ValueError(
                f"{where}: expected {len(header)} comma-separated columns "
                f"(as the header), found {len(row)}"
            )
        label = None
        if label_column is not None:
            text = row[label_column].strip()
            if not (text.isdigit() and int(text) < num_choices):
                raise ValueError(
                    f"{where}: label {text!r} is not a choice index "
                    f"0..{num_choices - 1}"
                )
            label = int(text)
        texts = [row[i] for i in ending_columns]
        if not row[columns["sent1"]].strip() or any(
            not t.strip() for t in texts
        ):
            raise ValueError(f"{where}: empty sent1 or ending")
        examples.append(
            SwagExample(
                guid=f"{set_type}-{len(examples)}",
                context=row[columns["sent1"]],
                start=row[columns["sent2"]],
                endings=texts,
                label=label,
            )
        )
    if not examples:
        raise ValueError(f"{path}: no examples after the header")
    return examples


def num_choices(examples):
    return len(examples[0].endings)


def convert_examples(examples, max_seq_length, tokenizer):
    """Examples -> feature lists, each [C][max_seq_length].

    Returns:
      dict "input_ids", "input_mask", "segment_ids" -> lists [N][C][T], and
      "label_ids" -> list [N] (0 for a test example).
    """
    # classifier_data loads TensorFlow: reading a file does not need it.
    from modeling.data import classifier_data

    out = {"input_ids": [], "input_mask": [], "segment_ids": []}
    labels = []
    for example in examples:
        per_choice = {k: [] for k in out}
        for ending in example.endings:
            second = f"{example.start} {ending}".strip()
            feature = classifier_data.convert_single_example(
                0,
                classifier_data.InputExample(
                    example.guid, example.context, second, label="0"
                ),
                ["0"],
                max_seq_length,
                tokenizer,
            )
            for k in out:
                per_choice[k].append(getattr(feature, k))
        for k in out:
            out[k].append(per_choice[k])
        labels.append(0 if example.label is None else example.label)
    out["label_ids"] = labels
    return out
