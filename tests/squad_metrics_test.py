"""The official SQuAD scores (modeling/tasks/squad_metrics.py) on cases
computed by hand (the arithmetic is in the comments)."""

import pytest

from modeling.tasks import squad_metrics as m


@pytest.mark.parametrize(
    "text, want",
    [
        ("The  Quick, brown fox!", "quick brown fox"),
        ("an apple a day", "apple day"),
        ("Anthem of the A-Team", "anthem of ateam"),  # "an" in a word stays
        ("  Théâtre\t(1995). ", "théâtre 1995"),  # non-ASCII kept
        ("the", ""),
    ],
)
def test_normalize_answer(text, want):
    assert m.normalize_answer(text) == want


def test_v1_f1_and_exact():
    # [cat, sat] vs [cat, sat, on, mat]: P = 1, R = 1/2, F1 = 2/3.
    assert m.f1_v1("the cat sat", "cat sat on the mat") == pytest.approx(2 / 3)
    assert m.exact_match_v1("The Cat.", "cat")
    # Repeated words count as a multiset: [a1, a1] vs [a1]: P 1/2, R 1.
    assert m.f1_v1("a1 a1", "a1") == pytest.approx(2 / 3)
    # v1: an empty prediction has no words, F1 0 even against "" gold.
    assert m.f1_v1("", "Paris") == 0
    assert m.f1_v1("", "") == 0 and m.exact_match_v1("", "")


def test_v1_evaluate_takes_the_best_gold_and_counts_missing_as_zero():
    gold = {
        "q1": ["Denver Broncos"],
        # vs "Paris": [city, of, paris] vs [paris] F1 1/2; vs "the city of
        # Paris": exact. The best is taken.
        "q2": ["Paris", "the city of Paris"],
        "q3": ["1995"],
    }
    preds = {"q1": "denver broncos.", "q2": "city of paris", "q3": "in 1996"}
    got = m.evaluate_v1(gold, preds)
    assert got == pytest.approx({"exact_match": 200 / 3, "f1": 200 / 3})
    del preds["q3"]  # Unanswered: 0, still in the total.
    assert m.evaluate_v1(gold, preds) == pytest.approx(got)
    preds["q2"] = "Paris, France"  # [paris, france] vs [paris]: F1 2/3.
    assert m.evaluate_v1(gold, preds) == pytest.approx(
        {"exact_match": 100 / 3, "f1": 100 * (1 + 2 / 3) / 3}
    )


GOLD_V2 = {
    "a": ["Paris"],
    "b": [],  # unanswerable
    "c": ["1995", "in 1995"],
    "d": [],  # unanswerable
}
# a exact; b "" on an unanswerable question: 1; c: vs "1995" [1995,
# season] P 1/2 R 1 F1 2/3, vs "in 1995" F1 1/2 -> 2/3, exact 0; d: an
# answer to an unanswerable question: 0.
PREDS_V2 = {"a": "Paris", "b": "", "c": "1995 season", "d": "London"}


def test_v2_scores_split_has_and_no_answer():
    got = m.evaluate_v2(GOLD_V2, PREDS_V2)
    assert got == pytest.approx(
        {
            "exact": 50.0,  # (1 + 1 + 0 + 0) / 4
            "f1": 100 * (2 + 2 / 3) / 4,
            "total": 4,
            "HasAns_exact": 50.0,
            "HasAns_f1": 100 * (1 + 2 / 3) / 2,
            "HasAns_total": 2,
            "NoAns_exact": 50.0,
            "NoAns_f1": 50.0,
            "NoAns_total": 2,
        }
    )
    # Gold answers that normalize to "" are dropped: the question becomes
    # "" gold, which only an empty prediction matches.
    assert m.raw_scores_v2({"x": ["The", "a"]}, {"x": ""}) == (
        {"x": 1},
        {"x": 1},
    )
    assert m.f1_v2("", "") == 1 and m.f1_v2("Paris", "") == 0


def test_v2_best_threshold_search():
    na = {"a": -2.0, "b": 0.5, "c": -1.0, "d": 0.2}
    got = m.evaluate_v2(GOLD_V2, PREDS_V2, na)
    # All "": 2 (b, d). In na order: a +1 -> 3 (thresh -2); c +0 exact /
    # +2/3 F1 -> 3 / 3.667 (thresh -1); d answered "London": -1; b "": 0.
    assert got["best_exact"] == pytest.approx(75.0)
    assert got["best_exact_thresh"] == -2.0
    assert got["best_f1"] == pytest.approx(100 * (3 + 2 / 3) / 4)
    assert got["best_f1_thresh"] == -1.0
    # No value above na_prob_thresh (1.0): the scores are the raw ones.
    assert got["exact"] == 50.0
    # d above it counts as "", which is right for d: exact 3 / 4.
    na["d"] = 2.0
    assert m.evaluate_v2(GOLD_V2, PREDS_V2, na)["exact"] == 75.0
    # When answering nothing is best, the threshold stays 0.0.
    score, thresh = m.best_threshold(
        {"x": "a", "y": "b"},
        {"x": 0, "y": 0},
        {"x": -1.0, "y": -2.0},
        {"x": False, "y": False},
    )
    assert (score, thresh) == (100.0, 0.0)
    # threshold_search says so: nothing answered at the best.
    assert m.threshold_search(
        {"x": "a", "y": "b"},
        {"x": 0, "y": 0},
        {"x": -1.0, "y": -2.0},
        {"x": False, "y": False},
    ) == (100.0, 0.0, 0)
    assert m.threshold_search(
        PREDS_V2,
        m.raw_scores_v2(GOLD_V2, PREDS_V2)[1],
        {"a": -2.0, "b": 0.5, "c": -1.0, "d": 0.2},
        {q: bool(a) for q, a in GOLD_V2.items()},
    )[1:] == (-1.0, 2)


def test_v2_missing_predictions_leave_the_totals():
    preds = dict(PREDS_V2)
    del preds["d"]
    got = m.evaluate_v2(GOLD_V2, preds)
    assert got["total"] == 3 and got["NoAns_total"] == 1
    assert got["exact"] == pytest.approx(200 / 3)


def test_run_squad_scores_as_the_official_script_with_null_odds():
    """eval_results.txt's best_* are evaluate-v2.0.py's with
    --na-prob-file null_odds.json: searched over predictions.json as written
    (q1, answerable but cut to "", scores as ""), not over the best non-null
    answers."""
    import types

    from modeling.tasks import squad as squad_lib

    gold = {"q1": ["Paris"], "q2": [], "q3": ["blue whale"]}
    predictions = types.SimpleNamespace(
        answers={"q1": "", "q2": "", "q3": "blue whale"},
        null_odds={"q1": 0.5, "q2": 2.0, "q3": -1.0},
        best_non_null={"q1": "Paris", "q2": "London", "q3": "blue whale"},
    )
    got = squad_lib.score(predictions, gold, True)
    assert got["best_f1"] == pytest.approx(200 / 3)
    assert got["best_f1_thresh"] == -1.0
    assert got["best_exact"] == pytest.approx(200 / 3)
    assert got["exact"] == pytest.approx(200 / 3)
