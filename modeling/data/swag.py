"""SWAG multiple-choice data (run_multiple_choice.py): CSV (or TSV, JSON
Lines) -> examples -> features of C packed choices.

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

import dataclasses
import re

from modeling.data import classifier_data
from modeling.data import table_files

_ENDING = re.compile(r"^ending(\d+)$")
LABEL_COLUMN = "label"
# A JSON object's list of endings, instead of ending0, ending1, ...
ENDINGS_FIELD = "endings"


@dataclasses.dataclass
class SwagExample:
    """One question: a context, the start of the ending, C endings.

    Attributes:
      guid: str, "<split>-<row>".
      context: sent1.
      start: sent2 (the first words every ending continues).
      endings: list of C strings.
      label: int index of the right ending, or None (test split).
      id: the row's id in predictions.jsonl (its `id`, else its line).
    """

    guid: str
    context: str
    start: str
    endings: list
    label: int | None
    id: str | None = None


def read_swag(path, set_type="train", require_label=True):
    """The examples of a SWAG file, as a list (see `iter_swag`)."""
    return list(iter_swag(path, set_type, require_label))


def iter_swag(path, set_type="train", require_label=True):
    """Reads a SWAG file row by row: SWAG's CSV, or the same columns as TSV
    or JSON Lines (a JSON object may give its endings as a list,
    `endings`).

    A CSV or TSV file's columns are its header's; a JSON object's fields
    are its own (a row may leave sent2, or a test row its label, out).

    Args:
      path: str.
      set_type: used in guids.
      require_label: every row must have a label (train/dev); a test row
        without one, or with an empty or -1 label (an unlabelled file's
        placeholder), gives an example with label None.

    Yields:
      SwagExample; `id` is the row's `id` field, else its line.

    Raises:
      ValueError: naming the file and line (and field): a header or object
        without sent1 or endings (sent2 may be absent: empty), or without
        label where one is required; endings not numbered 0, 1, 2, ...; a
        row with another column count than the header; an empty text; a
        label that is not a choice index; a null or empty id; another
        number of endings than the first row's. An empty file, or one
        without rows.
    """
    table = table_files.TableFile(path)
    header = table.columns
    if not header:
        raise ValueError(f"{table.path}: empty file (no header)")
    per_row = table.format == "jsonl"
    if not per_row:
        fields = _fields(header, require_label, table.where(1), "header")
    count, first = 0, None
    for line, row in table.rows():
        where = table.where(line)
        if per_row:
            fields = _fields(list(row), require_label, where, "object")
        columns, endings = fields
        if endings is None:
            texts = row[columns[ENDINGS_FIELD]]
            if not isinstance(texts, list) or len(texts) < 2:
                raise ValueError(f"{where}: fewer than 2 endings")
            names = [f"{ENDINGS_FIELD}[{i}]" for i in range(len(texts))]
        else:
            absent = [c for c in endings if row.get(c) is None]
            if absent:
                raise ValueError(f"{where}: field {absent[0]!r} is null")
            texts, names = [row[c] for c in endings], endings
            if len(texts) < 2:
                raise ValueError(f"{where}: fewer than 2 endings")
        num_choices = len(texts)
        if first is None:
            first = (num_choices, where)
        elif num_choices != first[0]:
            raise ValueError(
                f"{where}: {num_choices} endings where {first[1]} has "
                f"{first[0]} (every row needs as many)"
            )
        label = _label(row, columns, num_choices, require_label, where)
        context = row.get(columns["sent1"])
        start = row.get(columns["sent2"]) if "sent2" in columns else None
        for name, value in [("sent1", context), *zip(names, texts)]:
            if not _is_text(value):
                raise ValueError(f"{where}: {name} is empty or not a text")
        if start is not None and not isinstance(start, str):
            # May be empty or null (no start of the ending), not a number.
            raise ValueError(f"{where}: sent2 is not a text: {start!r}")
        yield SwagExample(
            guid=f"{set_type}-{count}",
            context=context,
            start=start if isinstance(start, str) else "",
            endings=list(texts),
            label=label,
            id=_row_id(row, columns, line, where),
        )
        count += 1
    if not count:
        raise ValueError(f"{table.path}: no examples after the header")


def _fields(names, require_label, where, what):
    """({stripped name: name as written}, the ending columns in order, or
    None for a JSON `endings` list) of a header or a JSON object's keys.

    Raises:
      ValueError: no sent1, no endings, no label where one is required, or
        endings not numbered 0, 1, 2, ... (a label would pick another).
    """
    columns = {str(name).strip(): name for name in names}
    numbered = sorted(
        (int(match.group(1)), name)
        for name, match in ((n, _ENDING.match(n)) for n in columns)
        if match
    )
    listed = ENDINGS_FIELD in columns  # JSON: "endings": [...]
    missing = [n for n in ("sent1",) if n not in columns]
    if not (numbered or listed):
        missing.append("ending0")
    if require_label and LABEL_COLUMN not in columns and what == "header":
        missing.append(LABEL_COLUMN)
    if missing:
        raise ValueError(
            f"{where}: the {what} has no {', '.join(missing)} "
            f"{'column' if what == 'header' else 'field'} (found "
            f"{', '.join(map(str, names))})"
        )
    if listed:
        return columns, None
    if [i for i, _ in numbered] != list(range(len(numbered))):
        raise ValueError(
            f"{where}: the endings {', '.join(n for _, n in numbered)} are "
            "not numbered ending0, ending1, ... (a label is an index into "
            "them)"
        )
    return columns, [columns[name] for _, name in numbered]


def _label(row, columns, num_choices, require_label, where):
    """The row's label: a choice index, or None (an unlabelled row)."""
    value = row.get(columns.get(LABEL_COLUMN))
    text = None if value is None else str(value).strip()
    if not require_label and text in ("", "-1"):
        # An unlabelled file's placeholder (HF's swag test split: -1).
        text = None
    if text is None:
        if require_label:
            raise ValueError(f"{where}: no label")
        return None
    # ASCII digits only: str.isdigit() also holds for "²".
    if not (text.isascii() and text.isdigit()) or int(text) >= num_choices:
        raise ValueError(
            f"{where}: label {text!r} is not a choice index "
            f"0..{num_choices - 1}"
        )
    return int(text)


def _row_id(row, columns, line, where):
    """The row's `id` as a str, else (no id field) its line number."""
    if "id" not in columns:
        return str(line)
    value = row[columns["id"]]
    if (
        value is None
        or isinstance(value, (dict, list))
        or not str(value).strip()
    ):
        raise ValueError(f"{where}: no id in field 'id': {value!r}")
    return str(value)


def _check_one_choice_count(examples, what):
    if len({len(e.endings) for e in examples}) > 1:
        raise ValueError(f"{what} have different numbers of endings")


def _is_text(value):
    return isinstance(value, str) and bool(value.strip())


def served_examples(values):
    """SwagExamples of dicts with "sent1", "sent2" (optional, null: empty)
    and "endings" (a list of at least 2 texts), as a server takes them
    (SwagExamples pass as they are).

    Raises:
      ValueError: naming the example: a missing or empty text, endings that
        are not a list (a string would be scored letter by letter), a
        different number of endings from the others.
    """
    examples = []
    for i, value in enumerate(values):
        if not isinstance(value, SwagExample):
            where = f"example {i}"
            if not isinstance(value, dict):
                raise ValueError(
                    f"{where}: expected a dict with sent1, sent2 and "
                    f"endings, got {type(value).__name__}"
                )
            endings = value.get(ENDINGS_FIELD)
            if not isinstance(endings, (list, tuple)) or len(endings) < 2:
                raise ValueError(
                    f"{where}: endings must be a list of 2 or more"
                )
            start = value.get("sent2")
            start = "" if start is None else start
            texts = [value.get("sent1"), *endings]
            if not all(_is_text(t) for t in texts) or not isinstance(
                start, str
            ):
                raise ValueError(f"{where}: empty or non-text sent1 or ending")
            value = SwagExample(
                str(i), texts[0], start, list(endings), None, id=str(i)
            )
        examples.append(value)
    _check_one_choice_count(examples, "the examples")
    return examples


def num_choices(examples):
    return len(examples[0].endings)


def convert_examples(examples, max_seq_length, tokenizer):
    """Examples -> feature lists, each [C][max_seq_length].

    Returns:
      dict "input_ids", "input_mask", "segment_ids" -> lists [N][C][T], and
      "label_ids" -> list [N] (0 for a test example).
    """
    out = {"input_ids": [], "input_mask": [], "segment_ids": []}
    labels = []
    truncated = 0
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
            truncated += feature.truncated
            for k in out:
                per_choice[k].append(getattr(feature, k))
        for k in out:
            out[k].append(per_choice[k])
        labels.append(0 if example.label is None else example.label)
    out["label_ids"] = labels
    classifier_data.log_truncated(
        truncated,
        sum(len(e.endings) for e in examples),
        max_seq_length,
        "packed choices",
    )
    return out
