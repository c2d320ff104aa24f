"""predictions.jsonl: what every fine-tuning script's --do_predict writes
beside the original's output files, one JSON object per predicted row:

  run_classifier       {"id", "label", "probabilities": {label: p}}
                       regression: {"id", "score"}
                       multi-label: {"id", "labels": [...], "probabilities"}
  run_ner              {"id", "tokens": [...], "tags": [...]}
  run_squad            {"id", "answer", "probability"}
  run_multiple_choice  {"id", "label", "probabilities": [p per choice]}

`id` is the input row's id (its id column or field), else its line number
(a sentence's first line for run_ner). Numbers are float32 values written
as their shortest decimal ("0.9731", not "0.97310000658").
"""

import json

import numpy as np

FILE = "predictions.jsonl"


def number(value):
    """A float32 value as the Python float of its shortest decimal."""
    return float(str(np.float32(value)))


def by_name(names, values):
    """{name: number(value)} in the names' order."""
    return {name: number(v) for name, v in zip(names, values, strict=True)}


def line(record):
    """One line of predictions.jsonl (UTF-8 text kept as it is)."""
    return json.dumps(record, ensure_ascii=False) + "\n"


def classifier_record(kind, labels, output, prediction):
    """A classifier row's prediction by name (without its id), as its task
    kind writes it (task_kinds.TaskKind.record: a regression's {"score"}, a
    multi-label task's {"labels", "probabilities"}, else {"label",
    "probabilities"}), its numbers as `number` writes them.

    Args:
      kind: the task kind (task_kinds).
      labels: the labels in id order (None for regression).
      output: the row's probabilities [L] (a regression's [1] score).
      prediction: the decision: a class id, a score, or 0/1 per label.
    """
    record = {}
    for key, value in kind.record(labels, output, prediction).items():
        if isinstance(value, dict):
            value = by_name(list(value), list(value.values()))
        elif not isinstance(value, (str, list)):
            value = number(value)
        record[key] = value
    return record
