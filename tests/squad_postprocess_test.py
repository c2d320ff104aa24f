"""SQuAD post-processing (modeling/tasks/squad_postprocess.py).

From the original's golden logits, predictions.json, nbest_predictions.json
and null_odds.json are compared with the original's files, text and numbers;
get_final_text, the softmax and the all-null case (where the original
crashes) on hand-made cases.
"""

import gzip
import json
import math

import numpy as np
import pytest

from modeling.data import squad
from modeling.tasks import squad_postprocess as pp
from modeling.text import tokenization

GOLDEN_SETTINGS = {
    "squad_v1": (384, 128, 64, False),
    "squad_v1_seq128": (128, 64, 32, False),
    "squad_v2": (256, 128, 64, True),
}


@pytest.fixture(scope="module")
def tokenizer(uncased_vocab_file):
    return tokenization.FullTokenizer(uncased_vocab_file, True)


def _predict(golden_dir, tokenizer, name):
    seq, stride, query, v2 = GOLDEN_SETTINGS[name]
    examples, _ = squad.read_squad_examples(
        golden_dir / f"{name}_input.json", False, v2
    )
    features = []
    squad.convert_examples_to_features(
        examples, tokenizer, seq, stride, query, False, features.append
    )
    logits = np.load(golden_dir / f"{name}_logits.npz")
    return pp.compute_predictions(
        examples,
        features,
        logits["unique_ids"],
        logits["start_logits"],
        logits["end_logits"],
        n_best_size=20,
        max_answer_length=30,
        do_lower_case=True,
        version_2_with_negative=v2,
        null_score_diff_threshold=0.0,
    )


def _assert_same_json(want, got, tol=1e-6):
    assert type(want) is type(got) or (
        isinstance(want, float) and isinstance(got, float)
    )
    if isinstance(want, dict):
        assert list(want) == list(got)
        for k in want:
            _assert_same_json(want[k], got[k], tol)
    elif isinstance(want, list):
        assert len(want) == len(got)
        for a, b in zip(want, got):
            _assert_same_json(a, b, tol)
    elif isinstance(want, float):
        assert abs(want - got) <= tol, (want, got)
    else:
        assert want == got


@pytest.mark.parametrize("name", sorted(GOLDEN_SETTINGS))
def test_outputs_match_the_original(golden_dir, tokenizer, tmp_path, name):
    predictions = _predict(golden_dir, tokenizer, name)
    # An earlier SQuAD 2.0 run's: replaced, or (v1) removed.
    (tmp_path / "null_odds.json").write_text("{}")
    pp.write_predictions(predictions, str(tmp_path))
    files = [("predictions.json", f"{name}_predictions.json")]
    files.append(
        ("nbest_predictions.json", f"{name}_nbest_predictions.json.gz")
    )
    if GOLDEN_SETTINGS[name][3]:
        files.append(("null_odds.json", f"{name}_null_odds.json"))
    else:
        assert not (tmp_path / "null_odds.json").exists()
    for mine, theirs in files:
        path = golden_dir / theirs
        opener = gzip.open if theirs.endswith(".gz") else open
        with opener(path, "rt", encoding="utf-8") as f:
            want_text = f.read()
        got_text = (tmp_path / mine).read_text(encoding="utf-8")
        # Texts, key order and numbers (probabilities within 1e-6)...
        _assert_same_json(json.loads(want_text), json.loads(got_text))
        # ...and in fact the same bytes (same float64 arithmetic).
        assert got_text == want_text, mine


def test_v2_threshold_rule_on_golden(golden_dir, tokenizer):
    predictions = _predict(golden_dir, tokenizer, "squad_v2")
    odds = predictions.null_odds
    assert any(v > 0 for v in odds.values())
    assert any(v <= 0 for v in odds.values())
    for threshold in (-3.0, 0.0, 2.5):
        answers = pp.apply_threshold(predictions, threshold).answers
        for qid, text in answers.items():
            if odds[qid] > threshold:
                assert text == ""
            else:
                assert text == predictions.best_non_null[qid] != ""
    # The threshold the predictions were made with gives them back.
    assert pp.apply_threshold(predictions, 0.0).answers == predictions.answers


@pytest.mark.parametrize(
    "pred, orig, lower, want",
    [
        # Lower-cased and split at punctuation, mapped back to the case and
        # the characters as written.
        ("steve smith", "Steve Smith's", True, "Steve Smith"),
        ("denver broncos", "Denver Broncos.", True, "Denver Broncos"),
        ("1995", "(1995)", True, "1995"),
        # Accents are stripped by lower-casing: lengths differ -> whole text.
        ("cafe", "Café", True, "Café"),
        # Not found: the original words.
        ("xyz", "abc def", True, "abc def"),
        # Cased: "steve" is not in "Steve Smith".
        ("steve", "Steve Smith", False, "Steve Smith"),
        ("Smith", "Steve Smith", False, "Smith"),
    ],
)
def test_get_final_text(pred, orig, lower, want):
    assert pp.get_final_text(pred, orig, lower) == want


def test_verbose_logging_names_why_the_whole_words_are_the_answer(caplog):
    """--verbose_logging, as the original's: each fallback is logged."""
    with caplog.at_level("INFO"):
        pp.get_final_text("xyz", "abc def", True)
        assert "Unable to find text" not in caplog.text
        pp.get_final_text("xyz", "abc def", True, verbose_logging=True)
        pp.get_final_text("cafe", "Cafe\u0301", True, verbose_logging=True)
    assert "Unable to find text: 'xyz' in 'abc def'" in caplog.text
    assert "Length not equal after stripping spaces" in caplog.text


def test_softmax_and_best_indexes():
    probs = pp.compute_softmax([1.0, 2.0, 3.0])
    e = [math.exp(-2), math.exp(-1), 1.0]
    assert probs == pytest.approx([x / sum(e) for x in e], abs=1e-15)
    assert pp.compute_softmax([]) == []
    # Ties keep the lower index first.
    assert pp.best_indexes(np.float32([1, 3, 3, 2, 3]), 3) == [1, 2, 4]


def _one_example(tmp_path, tokenizer, context="Paris is in France ."):
    data = {
        "data": [
            {
                "title": "t",
                "paragraphs": [
                    {
                        "context": context,
                        "qas": [
                            {"id": "q", "question": "where", "answers": []}
                        ],
                    }
                ],
            }
        ]
    }
    path = tmp_path / "d.json"
    path.write_text(json.dumps(data))
    examples, _ = squad.read_squad_examples(str(path), False)
    features = []
    squad.convert_examples_to_features(
        examples, tokenizer, 16, 8, 4, False, features.append
    )
    return examples, features


def test_all_null_nbest_does_not_crash(tmp_path, tokenizer):
    # [CLS] where [SEP] paris is in france . [SEP]. With n_best_size 1 the
    # only pair is start 3 ("paris") with end 0: invalid, so the n-best list
    # holds only the null entry, where the original crashes.
    examples, features = _one_example(tmp_path, tokenizer)
    (feature,) = features
    start = np.full([1, 16], -5.0, np.float32)
    end = np.full([1, 16], -5.0, np.float32)
    start[0, 0], end[0, 0] = 2.0, 2.0
    start[0, 3], end[0, 3] = 3.0, 1.0
    unique = np.array([feature.unique_id])
    kwargs = dict(n_best_size=1, version_2_with_negative=True)
    p = pp.compute_predictions(examples, features, unique, start, end, **kwargs)
    assert p.answers == {"q": ""}
    assert p.nbest["q"] == [
        {"text": "", "probability": 1.0, "start_logit": 2.0, "end_logit": 2.0}
    ]
    assert p.null_odds == {"q": pp.NO_SPAN_SCORE_DIFF}
    assert p.best_non_null == {"q": ""}
    # n_best_size 2 pairs start 3 with end 3: the original's answer. The
    # span ties the null score (4) and comes first.
    kwargs["n_best_size"] = 2
    p = pp.compute_predictions(examples, features, unique, start, end, **kwargs)
    assert [e["text"] for e in p.nbest["q"]] == ["Paris", ""]
    assert p.null_odds == {"q": 0.0} and p.answers == {"q": "Paris"}
    kwargs["null_score_diff_threshold"] = -0.5
    p = pp.compute_predictions(examples, features, unique, start, end, **kwargs)
    assert p.answers == {"q": ""}
    # v1 without a valid span: the original's "empty" entry.
    p = pp.compute_predictions(
        examples, features, unique, start, end, max_answer_length=0
    )
    assert p.answers == {"q": "empty"} and p.null_odds is None


def test_missing_logits_is_an_error(tmp_path, tokenizer):
    examples, features = _one_example(tmp_path, tokenizer)
    zeros = np.zeros([1, 16], np.float32)
    with pytest.raises(ValueError, match="no logits for unique_id"):
        pp.compute_predictions(examples, features, [7], zeros, zeros)
