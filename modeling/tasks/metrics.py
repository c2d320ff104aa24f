"""GLUE metrics in numpy: accuracy, F1, Matthews correlation, Pearson, Spearman;
and for your own tasks (--task_name=custom) macro F1, and multi-label micro
F1, macro F1 and subset accuracy.

Each function takes 1-D arrays of equal length (the multi-label ones 0/1
arrays [N, L]) and returns a Python float.
Degenerate inputs follow the usual conventions (scikit-learn, scipy): F1 and
Matthews correlation are 0.0 where their denominator is 0; a correlation with
a constant input is NaN.
"""

import numpy as np


def _pair(labels, predictions):
    labels = np.asarray(labels).reshape(-1)
    predictions = np.asarray(predictions).reshape(-1)
    if labels.shape != predictions.shape:
        raise ValueError(
            f"labels and predictions differ in length: {labels.shape[0]} vs "
            f"{predictions.shape[0]}"
        )
    if labels.size == 0:
        raise ValueError("No examples to compute a metric on")
    return labels, predictions


def accuracy(labels, predictions):
    """Fraction of predictions equal to the labels."""
    labels, predictions = _pair(labels, predictions)
    return float(np.mean(labels == predictions))


def f1(labels, predictions, positive=1):
    """Binary F1 score of class `positive` (MRPC, QQP)."""
    labels, predictions = _pair(labels, predictions)
    true_pos = np.sum((predictions == positive) & (labels == positive))
    pred_pos = np.sum(predictions == positive)
    real_pos = np.sum(labels == positive)
    if pred_pos + real_pos == 0:
        return 0.0
    return float(2.0 * true_pos / (pred_pos + real_pos))


def matthews_corrcoef(labels, predictions):
    """Matthews correlation coefficient of binary labels (CoLA)."""
    labels, predictions = _pair(labels, predictions)
    y, p = labels == 1, predictions == 1
    tp = float(np.sum(y & p))
    tn = float(np.sum(~y & ~p))
    fp = float(np.sum(~y & p))
    fn = float(np.sum(y & ~p))
    denominator = np.sqrt((tp + fp) * (tp + fn) * (tn + fp) * (tn + fn))
    if denominator == 0:
        return 0.0
    return float((tp * tn - fp * fn) / denominator)


def pearson(x, y):
    """Pearson correlation coefficient (STS-B)."""
    x, y = _pair(x, y)
    x = x.astype(np.float64) - np.mean(x, dtype=np.float64)
    y = y.astype(np.float64) - np.mean(y, dtype=np.float64)
    denominator = np.sqrt(np.sum(x * x) * np.sum(y * y))
    if denominator == 0:
        return float("nan")
    return float(np.sum(x * y) / denominator)


def rankdata(values):
    """1-based ranks; tied values get the average of the ranks they span."""
    values = np.asarray(values).reshape(-1)
    order = np.argsort(values, kind="stable")
    sorted_values = values[order]
    # Start of each run of equal values in sorted order.
    starts = np.flatnonzero(
        np.r_[True, sorted_values[1:] != sorted_values[:-1]]
    )
    ends = np.r_[starts[1:], len(values)]
    average = (starts + ends + 1) / 2.0  # Mean of ranks starts+1 .. ends.
    ranks = np.empty(len(values), dtype=np.float64)
    ranks[order] = np.repeat(average, ends - starts)
    return ranks


def spearman(x, y):
    """Spearman rank correlation, ties given average ranks (STS-B)."""
    x, y = _pair(x, y)
    if np.isnan(x).any() or np.isnan(y).any():
        return float("nan")  # As scipy: NaN ranks would mean nothing.
    return pearson(rankdata(x), rankdata(y))


def macro_f1(labels, predictions):
    """The mean F1 over classes: for class ids [N], each class found in
    the labels or the predictions; for multi-label 0/1 arrays [N, L], each
    label (a label never gold nor predicted scores 0, as scikit-learn's
    zero_division=0)."""
    labels, predictions = np.asarray(labels), np.asarray(predictions)
    if labels.ndim == 2:
        return float(
            np.mean(
                [
                    f1(labels[:, j], predictions[:, j])
                    for j in range(labels.shape[1])
                ]
            )
        )
    classes = np.union1d(np.unique(labels), np.unique(predictions))
    return float(
        np.mean([f1(labels, predictions, positive=c) for c in classes])
    )


def micro_f1(labels, predictions):
    """F1 over every (example, label) decision of multi-label 0/1 arrays
    [N, L]."""
    return f1(labels, predictions)


def subset_accuracy(labels, predictions):
    """The fraction of examples whose predicted label set is exactly the
    gold one (multi-label 0/1 arrays [N, L])."""
    labels, predictions = np.asarray(labels), np.asarray(predictions)
    if labels.shape != predictions.shape or labels.ndim != 2:
        raise ValueError(
            f"expected two [N, L] arrays, got {labels.shape} and "
            f"{predictions.shape}"
        )
    return float(np.mean(np.all(labels == predictions, axis=1)))


def task_metrics(metric_names, labels, predictions):
    """The `eval_*` metrics a task reports, keyed as in eval_results.txt.

    Args:
      metric_names: names from `METRICS` (e.g. ("accuracy", "f1")).
      labels: class ids, or scores for regression.
      predictions: predicted class ids, or scores for regression.

    Returns:
      dict "eval_<name>" -> float.
    """
    return {
        f"eval_{name}": METRICS[name](labels, predictions)
        for name in metric_names
    }


METRICS = {
    "accuracy": accuracy,
    "f1": f1,
    "mcc": matthews_corrcoef,
    "pearson": pearson,
    "spearman": spearman,
    "macro_f1": macro_f1,
    "micro_f1": micro_f1,
    "subset_accuracy": subset_accuracy,
}


# === From model outputs to eval_results.txt ===


def classifier_eval_results(
    logits, labels, is_real_example, batch_size, metric_names, kind
):
    """run_classifier's evaluation results from the logits of the eval set.

    Args:
      logits: float [N, L] for the N eval records in file order (padding
        records included).
      labels: [N] class ids or scores (0/1 [N, L] for multi-label).
      is_real_example: [N] 0/1; padding records (0) get weight 0.
      batch_size: the eval batch size (for `loss`, see below).
      metric_names: the task's metric names (keys of METRICS).
      kind: the task_kinds.TaskKind (its loss and decision rule).

    Returns:
      dict with "eval_loss" (mean loss over the real examples), "loss" (the
      Estimator's mean over batches of each batch's mean loss, padding
      included, as the original reports it) and "eval_<metric>" for each
      metric, computed on the real examples.
    """
    losses = np.asarray(kind.example_loss(logits, labels), np.float64)
    real = np.asarray(is_real_example).reshape(-1).astype(bool)
    batch_means = [
        np.mean(losses[i : i + batch_size])
        for i in range(0, len(losses), batch_size)
    ]
    results = {
        "eval_loss": float(np.mean(losses[real])),
        "loss": float(np.mean(batch_means)),
    }
    predictions = np.asarray(kind.decide(logits))
    labels = np.asarray(labels)
    results.update(task_metrics(metric_names, labels[real], predictions[real]))
    return results


def as_reported(results):
    """The results with floats as the original's float32 metric values, so
    that `str` prints them as it does (e.g. 0.84558824); integers
    (global_step) as they are."""
    return {
        k: np.float32(v) if isinstance(v, float | np.floating) else v
        for k, v in results.items()
    }


def format_eval_results(results):
    """eval_results.txt as the original writes it: sorted `key = value` lines
    of the `as_reported` values."""
    from modeling.tasks import common

    return common.eval_results_text(as_reported(results))
