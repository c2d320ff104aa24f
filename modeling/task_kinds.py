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
"""

import numpy as np

CLASSIFICATION = "classification"
REGRESSION = "regression"
MULTI_LABEL = "multi_label"
NAMES = (CLASSIFICATION, REGRESSION, MULTI_LABEL)
DEFAULT_THRESHOLD = 0.5


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

    def label_shape(self, num_labels):
        """A record's label shape: [] or [L]."""
        return []

    def to_json(self):
        """What labels.json and bert_export.json record of the kind."""
        return {"task_type": self.name}

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

    def label_shape(self, num_labels):
        return [num_labels]

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
