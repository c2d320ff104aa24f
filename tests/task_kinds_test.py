"""The task kinds (modeling/task_kinds.py): each kind's activation, loss
and decision against numpy oracles; the threshold's checks and its record;
the dev set's best threshold against a brute-force search."""

import math

import numpy as np
import pytest

from modeling import task_kinds
from modeling.tasks import metrics


def _sigmoid(x):
    return 1.0 / (1.0 + np.exp(-np.asarray(x, np.float64)))


LOGITS = np.array([[0.0, math.log(3.0)], [2.0, 2.0], [-1.0, 0.5]], np.float32)


def test_classification():
    kind = task_kinds.get("classification")
    # softmax([0, log 3]) = [1/4, 3/4].
    np.testing.assert_allclose(
        np.asarray(kind.activation(LOGITS))[0], [0.25, 0.75], rtol=1e-6
    )
    np.testing.assert_allclose(
        np.asarray(kind.example_loss(LOGITS, [1, 0, 1])),
        [-math.log(0.75), math.log(2.0), math.log(1 + math.exp(-1.5))],
        rtol=1e-6,
    )
    np.testing.assert_array_equal(np.asarray(kind.decide(LOGITS)), [1, 0, 1])
    np.testing.assert_array_equal(
        np.asarray(kind.correct(LOGITS, [1, 1, 1])), [1, 0, 1]
    )
    assert kind.to_json() == {"task_type": "classification"}
    batch = kind.batch_loss(LOGITS, [1, 1, 1])
    np.testing.assert_allclose(
        float(batch["loss"]),
        np.mean(np.asarray(kind.example_loss(LOGITS, [1, 1, 1]))),
        rtol=1e-6,
    )
    np.testing.assert_allclose(float(batch["accuracy"]), 2 / 3, rtol=1e-6)


def test_regression():
    kind = task_kinds.get("regression")
    logits = np.array([[1.5], [0.0]], np.float32)
    np.testing.assert_allclose(
        np.asarray(kind.example_loss(logits, [1.0, 2.0])), [0.25, 4.0]
    )
    np.testing.assert_array_equal(np.asarray(kind.decide(logits)), [1.5, 0.0])
    assert kind.correct(logits, [1.0, 2.0]) is None
    # The mean squared error, and no accuracy.
    batch = kind.batch_loss(logits, [1.0, 2.0])
    assert list(batch) == ["loss"]
    np.testing.assert_allclose(float(batch["loss"]), 2.125)
    assert kind.label_dtype == "float32"


def test_multi_label_threshold_decides():
    kind = task_kinds.get("multi_label", 0.3)
    p = _sigmoid(LOGITS)
    np.testing.assert_allclose(
        np.asarray(kind.activation(LOGITS)), p, rtol=1e-6
    )
    np.testing.assert_array_equal(np.asarray(kind.decide(LOGITS)), p >= 0.3)
    # At 0.3, -1.0 (p = 0.27) is off and 0.0 (p = 0.5) on; at 0.8 only 2.0.
    high = task_kinds.get("multi_label", 0.8)
    np.testing.assert_array_equal(
        np.asarray(high.decide(LOGITS)), [[0, 0], [1, 1], [0, 0]]
    )
    labels = np.array([[0, 1], [1, 0], [1, 1]])
    z = labels.astype(np.float64)
    want = np.mean(-(z * np.log(p) + (1 - z) * np.log(1 - p)), axis=-1)
    np.testing.assert_allclose(
        np.asarray(kind.example_loss(LOGITS, labels)), want, rtol=1e-5
    )
    assert kind.to_json() == {
        "task_type": "multi_label",
        "multi_label_threshold": 0.3,
    }
    assert task_kinds.from_json(kind.to_json()) == kind
    assert task_kinds.get("multi_label").threshold == 0.5


@pytest.mark.parametrize("value", [0, 1, 1.5, -0.1, "x", None])
def test_threshold_range(value):
    with pytest.raises(ValueError, match=r"probability in \(0, 1\)"):
        task_kinds.check_threshold(value)


def test_threshold_only_for_multi_label():
    with pytest.raises(ValueError, match="is for --task_type=multi_label"):
        task_kinds.get("classification", 0.3)
    with pytest.raises(ValueError, match="Unknown task type"):
        task_kinds.get("ranking")


def test_best_threshold_is_the_best_micro_f1():
    rng = np.random.default_rng(0)
    labels = (rng.random((60, 5)) < 0.3).astype(int)
    # Informative but noisy logits.
    logits = (2 * labels - 1) * rng.random((60, 5)) * 2 + rng.normal(
        0, 1.0, (60, 5)
    )
    threshold, f1 = task_kinds.best_threshold(logits, labels)
    p = _sigmoid(logits.astype(np.float32))
    grid = np.unique(p)
    best = max(metrics.micro_f1(labels, (p >= t).astype(int)) for t in grid)
    assert f1 == pytest.approx(best)
    decided = np.asarray(task_kinds.MultiLabel(threshold).decide(logits))
    assert metrics.micro_f1(labels, decided) == pytest.approx(best)
    assert 0 < threshold < 1


@pytest.mark.parametrize("name", task_kinds.NAMES)
def test_the_legacy_flags_name_the_same_kind(name):
    """from_legacy reads back what legacy_json writes (exports and Keras
    models saved before the kinds), the threshold kept."""
    threshold = 0.3 if name == task_kinds.MULTI_LABEL else None
    kind = task_kinds.get(name, threshold)
    assert (
        task_kinds.from_legacy(
            **task_kinds.legacy_json(kind), threshold=threshold
        )
        == kind
    )
    with pytest.raises(ValueError, match="exclude each other"):
        task_kinds.from_legacy(is_regression=True, multi_label=True)


def test_each_kind_reads_a_files_labels():
    """A file's label value as each kind reads it, the names it checks
    against the label list, and an unlabelled example's placeholder."""
    single, score, sets = (task_kinds.get(n) for n in task_kinds.NAMES)
    assert single.parse_label(" yes ", ",", "label") == "yes"
    assert single.parse_label(True, ",", "label") == "true"
    assert single.label_names("yes") == ["yes"]
    # JSON numbers by value: 1 and 1.0 one class; NaN (pandas' missing
    # value) no label, an infinity refused; a CSV's text stays as written.
    assert single.parse_label(1.0, ",", "label") == "1"
    assert single.parse_label(1, ",", "label") == "1"
    assert single.parse_label(0.5, ",", "label") == "0.5"
    assert single.parse_label("1.0", ",", "label") == "1.0"
    with pytest.raises(ValueError, match="empty label \\(column 'label'\\)"):
        single.parse_label(float("nan"), ",", "label")
    with pytest.raises(ValueError, match="inf.*column 'label'"):
        single.parse_label(float("inf"), ",", "label")
    assert sets.parse_label([2.0, "b", 2], ",", "topics") == ["2", "b"]
    assert sets.parse_label(3.0, ",", "topics") == ["3"]
    for bad in (float("nan"), float("-inf")):
        with pytest.raises(ValueError, match="each label is a name"):
            sets.parse_label(["a", bad], ",", "topics")
    assert single.placeholder_label(["no", "yes"]) == "no"
    with pytest.raises(ValueError, match="empty label \\(column 'label'\\)"):
        single.parse_label("  ", ",", "label")
    assert score.parse_label("2", ",", "label") == "2.0"
    assert score.label_names("2.0") == [] and not score.label_list
    assert score.placeholder_label(None) == "0.0"
    for bad in (True, "nan", "x", 1e19):
        with pytest.raises(ValueError, match="regression target"):
            score.parse_label(bad, ",", "label")
    assert sets.parse_label("b, a,,b", ",", "topics") == ["a", "b"]
    assert sets.parse_label(["b", 1], ",", "topics") == ["1", "b"]
    assert sets.label_names(["a", "b"]) == ["a", "b"]
    assert sets.placeholder_label(["a"]) == []
    assert single.metric_names_for(["no", "yes"]) == ("accuracy", "f1")
    assert single.metric_names_for(["a", "b", "c"]) == ("accuracy", "macro_f1")
    assert sets.metric_names_for(["a", "b"]) == sets.metric_names
