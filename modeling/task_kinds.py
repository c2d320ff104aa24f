"""The kinds of classifier task: classification, regression, multi-label.

One object per kind owns everything that differs between them, so that
training, evaluation, a predict-only run, the Keras model and a serving
export treat the same logits the same way:

  kind             activation    loss                    decision
  classification   softmax       softmax cross-entropy   argmax
  regression       (the score)   squared error           the score
  multi_label      sigmoid       sigmoid cross-entropy   p >= threshold
                                 (mean over the labels)  per label

plus the labels' dtype and shape in the records and the default metric
names (a GLUE task names its own: MRPC's accuracy and F1, CoLA's Matthews
correlation). A multi-label kind carries its threshold, which is recorded
with the kind (`to_json`) in a custom task's labels.json and in a serving
export's bert_export.json.

Every computation is in keras.ops on float32, the same in a compiled graph
(training, the serving export) and eagerly on numpy arrays (evaluation,
predictions.jsonl): `np.asarray(kind.decide(logits))`. Keras is imported
when a kind computes, not with this module: reading a kind's name and
threshold (labels.json, bert_export.json) needs no TensorFlow.

One module, over 500 lines: each kind's Keras and numpy forms, its file
labels and its threshold stay together, so that no other module names a
kind.
"""

import json
import math

import numpy as np

CLASSIFICATION = "classification"
REGRESSION = "regression"
MULTI_LABEL = "multi_label"
NAMES = (CLASSIFICATION, REGRESSION, MULTI_LABEL)
DEFAULT_THRESHOLD = 0.5
# The largest regression target: the loss is the squared error
# (prediction - target)^2 in float32, whose largest value is 3.4028235e38.
# With |target| and |prediction| at most sqrt(3.4028235e38) / 2 (about
# 9.2e18), the difference is at most sqrt(3.4028235e38) and its square
# float32's largest: a larger target makes the loss inf at the first step.
MAX_REGRESSION_TARGET = math.sqrt(3.4028234663852886e38) / 2


def label_text(value):
    """A label value of a file as a str: strings stripped, JSON numbers and
    booleans as they are written ("1", "0.5", "true"); None for a missing
    or empty one."""
    if value is None:
        return None
    if isinstance(value, bool):
        return "true" if value else "false"
    text = str(value).strip()
    return text or None


def label_name(value):
    """A label value of a file as the name of its class: `label_text`, with
    a JSON number by its value (JSON has one kind of number: 1 and 1.0 are
    one class; pandas writes an integer column that has a missing value as
    1.0); a NaN (pandas' missing value) is none.

    Raises:
      ValueError: an infinity, which no class is named.
    """
    if isinstance(value, float):
        if math.isnan(value):
            return None
        if math.isinf(value):
            raise ValueError(f"label {value!r} is not a class name")
        if value.is_integer():
            value = int(value)
    return label_text(value)


class TaskKind:
    """What a kind owns (see the module doc); one subclass per kind."""

    name = None
    metric_names = ()
    main_metric = None
    label_dtype = "int32"

    def activation(self, logits):
        """The head's outputs as reported (test_results.tsv, the export's
        "probabilities" or "score"): float32 [B, L] ([B, 1] regression)."""
        raise NotImplementedError

    def example_loss(self, logits, labels):
        """The loss of each example, float32 [B]."""
        raise NotImplementedError

    def decide(self, logits):
        """What the logits [B, L] predict: class ids [B], scores [B], or
        0/1 [B, L]."""
        raise NotImplementedError

    def correct(self, logits, labels):
        """float32 1/0 per decision (training's accuracy), or None."""
        return None

    def batch_loss(self, logits, labels):
        """The original's training loss of a batch: the mean of its
        examples' losses (is_real_example is not used, as in the original),
        with the mean of `correct` as "accuracy" where the kind has one."""
        ops = _ops()
        results = {"loss": ops.mean(self.example_loss(logits, labels))}
        correct = self.correct(logits, labels)
        if correct is not None:
            results["accuracy"] = ops.mean(correct)
        return results

    # Whether an example's label is a set of labels (0/1 per label).
    label_sets = False
    # Whether the labels are names from a list (a regression's are scores).
    label_list = True

    # === A file's labels (modeling/data/custom.py) ===

    def parse_label(self, value, separator, column):
        """A file's label value (from `column`) -> the example's label: a
        name (a set of names for label sets, a score as a str for a
        regression).

        Raises:
          ValueError: the value is not a label of this kind (the message
            names it and the column).
        """
        if isinstance(value, (list, dict)):
            # str() of it would be a class named "['x', 'y']".
            raise ValueError(
                f"label {value!r} (column {column!r}) is a JSON "
                f"{type(value).__name__}, not one label; a list of labels "
                "per text needs --task_type=multi_label"
            )
        try:
            name = label_name(value)
        except ValueError as e:
            raise ValueError(f"{e} (column {column!r})") from None
        if name is None:
            raise ValueError(f"empty label (column {column!r})")
        return name

    def label_names(self, label):
        """The names of the label list that `label` uses."""
        return [label]

    def placeholder_label(self, labels):
        """The label of an unlabelled (test) example, as the GLUE test sets
        get one; `labels`: the label list, or None."""
        return labels[0] if labels else None

    def metric_names_for(self, labels):
        """The metrics of a custom task with the label list `labels`."""
        return self.metric_names

    def keras_metrics(self):
        """The metrics Keras's `compile` reports while training, on the
        logits."""
        return []

    def label_shape(self, num_labels):
        """A record's label shape: [] or [L]."""
        return []

    def encode_labels(self, labels, label_list):
        """Examples' labels (names; a regression's scores) -> the array a
        Keras model trains on: class ids int32 [N]; see the subclasses."""
        ids = {name: i for i, name in enumerate(label_list)}
        return np.array([ids[label] for label in labels], np.int32)

    def to_json(self):
        """What labels.json and bert_export.json record of the kind."""
        return {"task_type": self.name}

    # The serving export's outputs (modeling/export/classifier.py), by name.
    serving_output_names = ("probabilities", "logits", "predictions")

    def serving_outputs(self, logits):
        """The serving export's outputs of float32 logits [B, L]."""
        ops = _ops()
        return {
            "probabilities": self.activation(logits),
            "logits": logits,
            "predictions": ops.cast(self.decide(logits), "int32"),
        }

    # === The numpy forms (the TF-free servers, modeling/tasks/lite.py) ===

    # What a classifier export's TF Lite model outputs, and which model
    # output the windows of one long text combine (--long_inputs).
    output_names = ("probabilities", "predictions")
    combined_output = "logits"

    def numpy_outputs(self, combined):
        """A text's combined outputs ({combined_output: [N, ...]}, numpy) ->
        the export's outputs (output_names), as `activation` and `decide`
        give them: float64 arithmetic, float32 probabilities."""
        raise NotImplementedError

    def rows(self, outputs, count):
        """The export's outputs for `count` texts -> (output, decision) per
        text, what `record` takes."""
        return zip(
            outputs["probabilities"], outputs["predictions"], strict=True
        )

    def record(self, labels, output, decision):
        """A prediction row by name (predictions.jsonl, without its id):
        {"label", "probabilities": {label: p}}; see the subclasses."""
        return {
            "label": labels[int(decision)],
            "probabilities": dict(zip(labels, output, strict=True)),
        }

    def __eq__(self, other):
        return isinstance(other, TaskKind) and self.to_json() == other.to_json()

    def __hash__(self):
        return hash(tuple(sorted(self.to_json().items())))

    def __repr__(self):
        return f"TaskKind({self.to_json()})"


class Classification(TaskKind):
    name = CLASSIFICATION
    metric_names = ("accuracy",)
    main_metric = "eval_accuracy"

    def activation(self, logits):
        ops = _ops()
        return ops.softmax(ops.cast(logits, "float32"), axis=-1)

    def example_loss(self, logits, labels):
        from modeling import losses

        return losses.softmax_cross_entropy(logits, labels)

    def decide(self, logits):
        ops = _ops()
        # The first of the largest logits, as argmax; written without
        # Keras's float argmax, whose negative-zero test (a bitwise op) has
        # no TF Lite kernel, so the serving export converts.
        logits = ops.cast(logits, "float32")
        top = ops.equal(logits, ops.max(logits, axis=-1, keepdims=True))
        return ops.argmax(ops.cast(top, "int32"), axis=-1)

    def correct(self, logits, labels):
        ops = _ops()
        predicted = ops.cast(self.decide(logits), "int32")
        labels = ops.reshape(ops.cast(labels, "int32"), (-1,))
        return ops.cast(ops.equal(predicted, labels), "float32")

    def metric_names_for(self, labels):
        # Two classes: F1 of the second label (MRPC's "1", "positive" after
        # "negative"), as the GLUE pair tasks report it.
        if labels is not None and len(labels) == 2:
            return ("accuracy", "f1")
        return ("accuracy", "macro_f1")

    def keras_metrics(self):
        import keras

        return [keras.metrics.SparseCategoricalAccuracy("accuracy")]

    def numpy_outputs(self, combined):
        logits = np.asarray(combined["logits"], np.float64)
        exp = np.exp(logits - logits.max(axis=-1, keepdims=True))
        probabilities = exp / exp.sum(axis=-1, keepdims=True)
        return {
            "probabilities": probabilities.astype(np.float32),
            "predictions": np.argmax(logits, axis=-1),
        }


class Regression(TaskKind):
    name = REGRESSION
    metric_names = ("pearson", "spearman")
    main_metric = "eval_pearson"
    label_dtype = "float32"

    def activation(self, logits):
        ops = _ops()
        return ops.cast(logits, "float32")[:, :1]

    def example_loss(self, logits, labels):
        from modeling import losses

        return losses.squared_error(logits, labels)

    def decide(self, logits):
        ops = _ops()
        return ops.cast(logits, "float32")[:, 0]

    output_names = ("score",)
    combined_output = "score"
    label_list = False

    def parse_label(self, value, separator, column):
        del separator
        try:
            if isinstance(value, bool):
                raise TypeError  # JSON true/false: not a number.
            number = float(value)
        except (TypeError, ValueError):
            raise ValueError(
                f"regression target {value!r} (column {column!r}) is not a "
                "number"
            ) from None
        if not math.isfinite(number):
            raise ValueError(f"regression target {value!r} is not finite")
        if abs(number) > MAX_REGRESSION_TARGET:
            raise ValueError(
                f"regression target {value!r} (column {column!r}) is beyond "
                f"+-{MAX_REGRESSION_TARGET:.3g}, the largest whose squared "
                "error float32 holds"
            )
        return str(number)

    def label_names(self, label):
        return []

    def placeholder_label(self, labels):
        return "0.0"

    def encode_labels(self, labels, label_list):
        """float32 scores [N]."""
        del label_list
        return np.array([float(label) for label in labels], np.float32)

    serving_output_names = ("score",)

    def serving_outputs(self, logits):
        return {"score": self.decide(logits)}

    def numpy_outputs(self, combined):
        return combined

    def rows(self, outputs, count):
        scores = np.asarray(outputs["score"]).reshape(count, -1)[:, 0]
        return [([score], score) for score in scores]

    def record(self, labels, output, decision):
        """{"score"}."""
        return {"score": decision}


class MultiLabel(TaskKind):
    """A set of labels per example: one sigmoid per label, a label
    predicted when its probability is at least `threshold` (in (0, 1))."""

    name = MULTI_LABEL
    metric_names = ("micro_f1", "macro_f1", "subset_accuracy")
    main_metric = "eval_micro_f1"

    def __init__(self, threshold=DEFAULT_THRESHOLD):
        self.threshold = check_threshold(threshold)

    def activation(self, logits):
        ops = _ops()
        return ops.sigmoid(ops.cast(logits, "float32"))

    def example_loss(self, logits, labels):
        from modeling import losses

        return losses.sigmoid_cross_entropy(logits, labels)

    def decide(self, logits):
        ops = _ops()
        on = ops.greater_equal(self.activation(logits), self.threshold)
        return ops.cast(on, "int32")

    def correct(self, logits, labels):
        ops = _ops()
        same = ops.equal(self.decide(logits), ops.cast(labels, "int32"))
        return ops.cast(same, "float32")

    def numpy_outputs(self, combined):
        logits = np.asarray(combined["logits"], np.float64)
        probabilities = 1.0 / (1.0 + np.exp(-logits))
        return {
            "probabilities": probabilities.astype(np.float32),
            "predictions": (probabilities >= self.threshold).astype(np.int32),
        }

    def record(self, labels, output, decision):
        """{"labels": the predicted ones, "probabilities": {label: p}}."""
        return {
            "labels": [n for n, on in zip(labels, decision, strict=True) if on],
            "probabilities": dict(zip(labels, output, strict=True)),
        }

    label_sets = True

    def parse_label(self, value, separator, column):
        """A list (JSON Lines) or a `separator`-joined string of names ->
        the sorted set of names (empty: no label applies)."""
        if isinstance(value, list):
            for v in value:
                if (
                    v is None
                    or isinstance(v, (list, dict))
                    or (isinstance(v, float) and not math.isfinite(v))
                ):
                    raise ValueError(
                        f"label list {value!r} (column {column!r}) holds "
                        f"{json.dumps(v)}: each label is a name"
                    )
            names = [label_name(v) for v in value]
        else:
            try:
                names = (label_name(value) or "").split(separator)
            except ValueError as e:
                raise ValueError(f"{e} (column {column!r})") from None
        return sorted({n.strip() for n in names if n and n.strip()})

    def label_names(self, label):
        return label

    def placeholder_label(self, labels):
        return []

    def keras_metrics(self):
        import keras

        # Each label's decision at the threshold, on the logits.
        t = self.threshold
        return [
            keras.metrics.BinaryAccuracy(
                "accuracy", threshold=float(np.log(t / (1.0 - t)))
            )
        ]

    def label_shape(self, num_labels):
        return [num_labels]

    def encode_labels(self, labels, label_list):
        """0/1 int32 [N, L] (each example's labels a set of names)."""
        rows = [[int(n in label) for n in label_list] for label in labels]
        return np.array(rows, np.int32).reshape(len(rows), len(label_list))

    def to_json(self):
        return {"task_type": self.name, "multi_label_threshold": self.threshold}


def check_threshold(value):
    """A multi-label threshold as a float in (0, 1).

    Raises:
      ValueError: not a number, or outside (0, 1) (at 0 every label is
        predicted, above 1 none).
    """
    try:
        threshold = float(value)
    except (TypeError, ValueError):
        raise ValueError(
            f"--multi_label_threshold={value!r}: expected a probability in "
            "(0, 1) or 'auto'"
        ) from None
    if not 0.0 < threshold < 1.0:
        raise ValueError(
            f"--multi_label_threshold={value}: expected a probability in "
            "(0, 1) (exclusive) or 'auto'"
        )
    return threshold


def get(name, threshold=None):
    """The kind called `name` (NAMES); `threshold`: a multi-label kind's
    (default 0.5; refused for the other kinds).

    Raises:
      ValueError: an unknown name; a threshold for another kind.
    """
    if name == MULTI_LABEL:
        return MultiLabel(DEFAULT_THRESHOLD if threshold is None else threshold)
    if threshold is not None:
        raise ValueError(
            f"--multi_label_threshold is for --task_type={MULTI_LABEL}, not "
            f"{name}"
        )
    if name == CLASSIFICATION:
        return Classification()
    if name == REGRESSION:
        return Regression()
    raise ValueError(f"Unknown task type {name!r}; expected one of {NAMES}")


def from_json(value):
    """The kind `to_json` recorded."""
    return get(value["task_type"], value.get("multi_label_threshold"))


def from_legacy(is_regression=False, multi_label=False, threshold=None):
    """The kind that the flags of models saved before the kinds name."""
    if is_regression and multi_label:
        raise ValueError("is_regression and multi_label exclude each other")
    if is_regression:
        return get(REGRESSION, threshold)
    return get(MULTI_LABEL if multi_label else CLASSIFICATION, threshold)


def legacy_json(kind):
    """What exports written before `task_type` recorded of the kind (still
    written: older servers read it)."""
    return {
        "is_regression": kind.name == REGRESSION,
        "multi_label": kind.name == MULTI_LABEL,
    }


def best_threshold(logits, labels):
    """The multi-label threshold with the best micro-F1 on labelled logits
    (a dev set): every distinct probability is tried as the least one
    predicted; the threshold returned lies halfway between the chosen
    probability and the next lower one (ties: the highest threshold).

    Args:
      logits: float [N, L].
      labels: 0/1 [N, L].

    Returns:
      (threshold, its micro-F1).
    """
    ops = _ops()
    probabilities = np.asarray(
        ops.sigmoid(ops.cast(logits, "float32")), np.float32
    ).reshape(-1)
    gold = np.asarray(labels).reshape(-1).astype(bool)
    order = np.argsort(-probabilities, kind="stable")
    p, g = probabilities[order], gold[order]
    # The last index of each distinct probability: predicting every label
    # down to it.
    last = np.flatnonzero(np.r_[p[1:] != p[:-1], True])
    true_pos = np.cumsum(g)[last]
    predicted = last + 1
    f1 = 2.0 * true_pos / np.maximum(predicted + gold.sum(), 1)
    best = int(np.argmax(f1))
    low = p[last[best] + 1] if last[best] + 1 < len(p) else 0.0
    threshold = float((p[last[best]] + low) / 2.0)
    # Within (0, 1) whatever the probabilities (saturated sigmoids).
    threshold = min(max(threshold, 1e-6), 1.0 - 1e-6)
    return threshold, float(f1[best])


def _ops():
    from keras import ops

    return ops
