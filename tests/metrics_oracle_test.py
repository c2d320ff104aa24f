"""The task metrics against scikit-learn and seqeval (the `test` extra) on
random inputs: F1 (binary, macro, micro), Matthews correlation, subset
accuracy, and conlleval's entity precision, recall and F1 under IOB, IOBES
and BILOU tags."""

import numpy as np
import pytest

from modeling.tasks import conlleval
from modeling.tasks import metrics

sklearn_metrics = pytest.importorskip("sklearn.metrics")
seqeval_metrics = pytest.importorskip("seqeval.metrics")
seqeval_scheme = pytest.importorskip("seqeval.scheme")

SEEDS = range(20)


def _classes(rng, n, k):
    return rng.integers(0, k, n), rng.integers(0, k, n)


@pytest.mark.parametrize("seed", SEEDS)
def test_class_metrics(seed):
    rng = np.random.default_rng(seed)
    n, k = int(rng.integers(1, 60)), int(rng.integers(2, 6))
    labels, predictions = _classes(rng, n, k)
    assert metrics.accuracy(labels, predictions) == pytest.approx(
        sklearn_metrics.accuracy_score(labels, predictions)
    )
    assert metrics.macro_f1(labels, predictions) == pytest.approx(
        sklearn_metrics.f1_score(
            labels, predictions, average="macro", zero_division=0
        )
    )
    binary = labels % 2, predictions % 2
    assert metrics.f1(*binary) == pytest.approx(
        sklearn_metrics.f1_score(*binary, zero_division=0)
    )
    assert metrics.matthews_corrcoef(*binary) == pytest.approx(
        sklearn_metrics.matthews_corrcoef(*binary)
    )


@pytest.mark.parametrize("seed", SEEDS)
def test_multi_label_metrics(seed):
    rng = np.random.default_rng(seed)
    # Two labels or more: scikit-learn reads an [N, 1] array as the
    # classes of one column (macro over 0 and 1), not as one label.
    n, k = int(rng.integers(1, 40)), int(rng.integers(2, 7))
    density = rng.uniform(0.05, 0.6)
    labels = (rng.random((n, k)) < density).astype(int)
    predictions = (rng.random((n, k)) < density).astype(int)
    for ours, average in (
        (metrics.macro_f1, "macro"),
        (metrics.micro_f1, "micro"),
    ):
        assert ours(labels, predictions) == pytest.approx(
            sklearn_metrics.f1_score(
                labels, predictions, average=average, zero_division=0
            )
        ), average
    assert metrics.subset_accuracy(labels, predictions) == pytest.approx(
        sklearn_metrics.accuracy_score(labels, predictions)
    )


TYPES = ("PER", "LOC", "ORG")


def _random_tags(rng, n):
    """Any IOB tags, ill-formed runs included (an I- after O or another
    type): conlleval's lenient reading is what seqeval's default mode
    reproduces."""
    tags = ["O"] + [f"{p}-{t}" for p in "BI" for t in TYPES]
    return [tags[i] for i in rng.integers(0, len(tags), n)]


def _entity_tags(rng, n, scheme):
    """Well-formed tags of random entities in `scheme` ("IOB2", "IOBES",
    "BILOU")."""
    begin, inside, end, single = {
        "IOB2": "BIIB",
        "IOBES": "BIES",
        "BILOU": "BILU",
    }[scheme]
    tags, i = [], 0
    while i < n:
        if rng.random() < 0.5:
            tags.append("O")
            i += 1
            continue
        kind = TYPES[rng.integers(0, len(TYPES))]
        length = int(min(rng.integers(1, 4), n - i))
        if length == 1:
            tags.append(f"{single}-{kind}")
        else:
            tags += [f"{begin}-{kind}"] + [f"{inside}-{kind}"] * (length - 2)
            tags.append(f"{end}-{kind}")
        i += length
    return tags


def _sentences(rng, make):
    lengths = rng.integers(1, 15, int(rng.integers(1, 12)))
    return [make(int(n)) for n in lengths]


def _assert_same(ours, gold, predicted, **seqeval_kwargs):
    for name, oracle in (
        ("precision", seqeval_metrics.precision_score),
        ("recall", seqeval_metrics.recall_score),
        ("f1", seqeval_metrics.f1_score),
    ):
        want = oracle(gold, predicted, zero_division=0, **seqeval_kwargs)
        assert ours[name] == pytest.approx(want), name
    assert ours["accuracy"] == pytest.approx(
        seqeval_metrics.accuracy_score(gold, predicted)
    )


@pytest.mark.parametrize("seed", SEEDS)
def test_entity_scores_of_any_iob_tags(seed):
    rng = np.random.default_rng(seed)
    gold = _sentences(rng, lambda n: _random_tags(rng, n))
    predicted = [_random_tags(rng, len(s)) for s in gold]
    _assert_same(conlleval.evaluate(gold, predicted), gold, predicted)


@pytest.mark.parametrize("scheme", ["IOB2", "IOBES", "BILOU"])
@pytest.mark.parametrize("seed", SEEDS)
def test_entity_scores_of_each_scheme(scheme, seed):
    rng = np.random.default_rng(seed)
    gold = _sentences(rng, lambda n: _entity_tags(rng, n, scheme))
    predicted = [_entity_tags(rng, len(s), scheme) for s in gold]
    # Per type too: each type's gold entities alone.
    ours = conlleval.evaluate(gold, predicted)
    _assert_same(
        ours,
        gold,
        predicted,
        mode="strict",
        scheme=getattr(seqeval_scheme, scheme),
    )
    report = seqeval_metrics.classification_report(
        gold,
        predicted,
        mode="strict",
        scheme=getattr(seqeval_scheme, scheme),
        output_dict=True,
        zero_division=0,
    )
    for kind, per in ours["per_type"].items():
        if kind in report:
            assert per["f1"] == pytest.approx(report[kind]["f1-score"]), kind
            assert per["gold"] == report[kind]["support"], kind
