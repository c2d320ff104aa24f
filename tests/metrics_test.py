"""Tests for modeling.tasks.metrics against hand-computed values."""

import math

import numpy as np
import pytest

from modeling import task_kinds
from modeling.tasks import metrics


def test_accuracy():
    assert metrics.accuracy([0, 1, 1, 0], [0, 1, 0, 0]) == 0.75


def test_f1_binary_positive_class_1():
    # tp = 2, predicted positives 3, real positives 3: F1 = 2*2 / 6.
    assert metrics.f1([1, 1, 0, 0, 1], [1, 0, 1, 0, 1]) == pytest.approx(2 / 3)
    assert metrics.f1([0, 0], [0, 0]) == 0.0
    assert metrics.f1([1, 0], [0, 1]) == 0.0


def test_matthews_corrcoef():
    # tp 2, tn 1, fp 1, fn 1: (2*1 - 1*1) / sqrt(3*3*2*2) = 1/6.
    got = metrics.matthews_corrcoef([1, 1, 0, 0, 1], [1, 0, 1, 0, 1])
    assert got == pytest.approx(1 / 6)
    assert metrics.matthews_corrcoef([1, 0, 1], [1, 0, 1]) == pytest.approx(1.0)
    assert metrics.matthews_corrcoef([1, 0], [0, 1]) == pytest.approx(-1.0)
    # All predictions one class: denominator 0 -> 0.0 (as scikit-learn).
    assert metrics.matthews_corrcoef([1, 0, 1], [1, 1, 1]) == 0.0


def test_pearson():
    # dx = [-1.5, -.5, .5, 1.5], dy = [-3, -1, 0, 4]: 11 / sqrt(5 * 26).
    got = metrics.pearson([1, 2, 3, 4], [2, 4, 5, 9])
    assert got == pytest.approx(11 / math.sqrt(130))
    assert math.isnan(metrics.pearson([1, 1, 1], [1, 2, 3]))


def test_rankdata_averages_ties():
    np.testing.assert_array_equal(
        metrics.rankdata([10, 20, 20, 5, 20]), [2, 4, 4, 1, 4]
    )
    np.testing.assert_array_equal(metrics.rankdata([3.0, 1.0]), [2, 1])


def test_spearman_with_ties():
    # ranks x = [1, 2.5, 2.5, 4], y = [1, 3, 2, 4]: 4.5 / sqrt(4.5 * 5).
    got = metrics.spearman([1, 2, 2, 3], [1, 3, 2, 4])
    assert got == pytest.approx(4.5 / math.sqrt(22.5))
    # Monotonic but not linear: Spearman 1, Pearson below 1.
    x = [1, 2, 3, 4, 5]
    y = [1, 4, 9, 16, 100]
    assert metrics.spearman(x, y) == pytest.approx(1.0)
    assert metrics.pearson(x, y) < 0.9


def test_spearman_of_nan_outputs_is_nan_as_pearson():
    assert math.isnan(metrics.spearman(np.arange(20.0), np.full(20, np.nan)))
    assert math.isnan(metrics.spearman([1, 2, 3, np.nan], [1, 2, 3, 4]))


def test_a_nan_metric_is_never_the_best_checkpoint(tmp_path, monkeypatch):
    """A first evaluation of nan (constant regression outputs) kept as the
    best would block every later best (x > nan is False), and a resumed run
    read it back."""
    from modeling import checkpoints
    from modeling.tasks import fine_tuning

    saved = []
    monkeypatch.setattr(
        checkpoints,
        "write_checkpoint",
        lambda prefix, *a, **k: saved.append(prefix),
    )
    monkeypatch.setattr(
        fine_tuning.checkpoint_manager, "model_variables", lambda model: {}
    )
    (tmp_path / "best").mkdir()  # What the stubbed writer would make.
    values = iter([float("nan"), 0.5, 0.9])
    keeper = fine_tuning.BestCheckpointKeeper(
        lambda step: {"eval_pearson": next(values), "global_step": step},
        None,
        str(tmp_path),
        "eval_pearson",
    )
    for step in (100, 200, 300):
        keeper(step)
    assert [p.rsplit("-", 1)[1] for p in saved] == ["200", "300"]
    # A resumed run offers its restored step again: evaluated once only.
    again = fine_tuning.BestCheckpointKeeper(
        lambda step: pytest.fail("evaluated twice"),
        None,
        str(tmp_path),
        "eval_pearson",
    )
    assert again(300) is None
    best = tmp_path / "best" / "eval_results.txt"
    best.write_text("eval_pearson = nan\n")
    assert (
        fine_tuning._previous_best(str(tmp_path / "best"), "eval_pearson")
        is None
    )


def test_task_metrics_keys():
    got = metrics.task_metrics(("accuracy", "f1"), [1, 0, 1], [1, 1, 1])
    assert got == {"eval_accuracy": pytest.approx(2 / 3), "eval_f1": 0.8}


def test_errors():
    with pytest.raises(ValueError, match="differ in length: 2 vs 3"):
        metrics.accuracy([0, 1], [0, 1, 1])
    with pytest.raises(ValueError, match="No examples"):
        metrics.f1([], [])


def _softmax_cross_entropy(logits, labels):
    """The oracle, in float64 numpy."""
    logits = np.asarray(logits, np.float64)
    shifted = logits - logits.max(-1, keepdims=True)
    log_probs = shifted - np.log(np.exp(shifted).sum(-1, keepdims=True))
    return -log_probs[np.arange(len(labels)), labels]


def test_classifier_eval_results_weights_padding():
    # Three real examples and one padding record, batch size 2.
    logits = np.array([[0.0, 1.0], [1.0, 0.0], [0.0, 1.0], [0.0, 0.0]])
    labels = np.array([1, 1, 0, 0])
    results = metrics.classifier_eval_results(
        logits,
        labels,
        [1, 1, 1, 0],
        2,
        ("accuracy", "f1"),
        task_kinds.get("classification"),
    )
    losses = _softmax_cross_entropy(logits, labels)
    assert results["eval_accuracy"] == pytest.approx(1 / 3)
    assert results["eval_f1"] == pytest.approx(0.5)  # tp 1, 2 pred, 2 real.
    assert results["eval_loss"] == pytest.approx(np.mean(losses[:3]))
    want_loss = (np.mean(losses[:2]) + np.mean(losses[2:])) / 2
    assert results["loss"] == pytest.approx(want_loss)


def test_classifier_eval_results_regression():
    results = metrics.classifier_eval_results(
        [[1.0], [2.0], [4.0]],
        [1.0, 3.0, 3.5],
        [1, 1, 1],
        8,
        ("pearson", "spearman"),
        task_kinds.get("regression"),
    )
    assert results["eval_spearman"] == pytest.approx(1.0)
    assert results["eval_loss"] == pytest.approx((0 + 1 + 0.25) / 3)
    assert "eval_accuracy" not in results


def test_format_eval_results_like_the_original():
    text = metrics.format_eval_results(
        {"global_step": 343, "eval_loss": 0.5053, "eval_accuracy": 0.845588}
    )
    assert text == (
        "eval_accuracy = 0.845588\neval_loss = 0.5053\nglobal_step = 343\n"
    )


def test_spearman_and_pearson_with_ties_against_scipy():
    # run_embeddings' STS scores and the classifier's STS-B metrics.
    scipy_stats = pytest.importorskip("scipy.stats")
    rng = np.random.RandomState(1)
    for _ in range(20):
        x = rng.randint(0, 6, 30).astype(float)  # Ties.
        y = x + rng.normal(0, 2, 30)
        assert metrics.spearman(x, y) == pytest.approx(
            scipy_stats.spearmanr(x, y)[0]
        )
        assert metrics.pearson(x, y) == pytest.approx(
            scipy_stats.pearsonr(x, y)[0]
        )
