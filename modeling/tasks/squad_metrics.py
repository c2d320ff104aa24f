"""The official SQuAD scores: v1.1 exact match / F1 and v2.0 with the
HasAns / NoAns split and the best no-answer threshold.

Written here to give the numbers of the official evaluation scripts
(evaluate-v1.1.py, evaluate-v2.0.py):

- an answer is normalized by lower-casing, deleting ASCII punctuation,
  deleting the words "a", "an", "the" and collapsing whitespace;
- exact match compares normalized texts; F1 is over the multiset of
  normalized words; a question scores its best over its gold answers;
- v1.1: a question without a prediction scores 0; the scores are
  percentages over all questions. An empty text scores 0 F1 (no words);
- v2.0: gold answers that normalize to "" are dropped, and a question with
  none is unanswerable, gold "". Two empty texts score 1 (exact and F1),
  one empty text 0. Questions without a prediction are left out of every
  total. With no-answer probabilities (null_odds.json), a question whose
  value is above `na_prob_thresh` counts as answered "" (1 if it has no
  answer, else 0); the best threshold is searched over those values.

Pure Python: no TensorFlow, no NumPy.
"""

import collections
import re
import string

_PUNCTUATION = frozenset(string.punctuation)
_ARTICLES = re.compile(r"\b(a|an|the)\b", re.UNICODE)


def normalize_answer(text):
    """Lower text and remove punctuation, articles and extra whitespace."""
    text = text.lower()
    text = "".join(ch for ch in text if ch not in _PUNCTUATION)
    text = _ARTICLES.sub(" ", text)
    return " ".join(text.split())


def _f1(pred_tokens, gold_tokens):
    common = collections.Counter(pred_tokens) & collections.Counter(gold_tokens)
    num_same = sum(common.values())
    if num_same == 0:
        return 0
    precision = num_same / len(pred_tokens)
    recall = num_same / len(gold_tokens)
    return (2 * precision * recall) / (precision + recall)


# === v1.1 ===


def exact_match_v1(prediction, ground_truth):
    return normalize_answer(prediction) == normalize_answer(ground_truth)


def f1_v1(prediction, ground_truth):
    return _f1(
        normalize_answer(prediction).split(),
        normalize_answer(ground_truth).split(),
    )


def evaluate_v1(gold, predictions):
    """evaluate-v1.1.py's scores.

    Args:
      gold: qid -> list of gold answer texts (non-empty), file order.
      predictions: qid -> predicted text.

    Returns:
      {"exact_match": %, "f1": %}.
    """
    exact = f1 = 0.0
    for qid, answers in gold.items():
        if qid not in predictions:
            continue  # Unanswered: scores 0.
        pred = predictions[qid]
        exact += max(exact_match_v1(pred, a) for a in answers)
        f1 += max(f1_v1(pred, a) for a in answers)
    total = len(gold)
    return {"exact_match": 100.0 * exact / total, "f1": 100.0 * f1 / total}


# === v2.0 ===


def _tokens(text):
    return normalize_answer(text).split() if text else []


def exact_v2(gold_answer, prediction):
    return int(normalize_answer(gold_answer) == normalize_answer(prediction))


def f1_v2(gold_answer, prediction):
    gold_tokens = _tokens(gold_answer)
    pred_tokens = _tokens(prediction)
    if not gold_tokens or not pred_tokens:
        # If either is no-answer, F1 is 1 if they agree, 0 otherwise.
        return int(gold_tokens == pred_tokens)
    return _f1(pred_tokens, gold_tokens)


def raw_scores_v2(gold, predictions):
    """Per-question exact and F1 before any no-answer threshold.

    Returns:
      (exact: qid -> 0/1, f1: qid -> float), for the questions predicted.
    """
    exact, f1 = {}, {}
    for qid, answers in gold.items():
        answers = [a for a in answers if normalize_answer(a)] or [""]
        if qid not in predictions:
            continue
        pred = predictions[qid]
        exact[qid] = max(exact_v2(a, pred) for a in answers)
        f1[qid] = max(f1_v2(a, pred) for a in answers)
    return exact, f1


def _apply_no_answer_threshold(scores, na_probs, has_answer, threshold):
    return {
        qid: float(not has_answer[qid]) if na_probs[qid] > threshold else s
        for qid, s in scores.items()
    }


def _totals(exact, f1, qids):
    total = len(qids)
    return {
        "exact": 100.0 * sum(exact[q] for q in qids) / total,
        "f1": 100.0 * sum(f1[q] for q in qids) / total,
        "total": total,
    }


def best_threshold(predictions, scores, na_probs, has_answer):
    """evaluate-v2.0.py's threshold search.

    Starting from every question answered "" (the unanswerable ones score
    1), questions are switched to their prediction in increasing order of
    na_prob; the best running score and the na_prob reached are kept (0.0
    while nothing beats all-empty, see `threshold_search`). A question
    counts as "" exactly when its na_prob is above the returned threshold.

    Returns:
      (best score in %, threshold).
    """
    value, thresh, _ = threshold_search(
        predictions, scores, na_probs, has_answer
    )
    return value, thresh


def threshold_search(predictions, scores, na_probs, has_answer):
    """`best_threshold`, and how many questions are answered at the best.

    When that count is 0 the official threshold (0.0) does not give the
    best score: every threshold below the smallest na_prob does.

    Returns:
      (best score in %, threshold, number of questions switched).
    """
    score = sum(1 for qid in has_answer if not has_answer[qid])
    best, best_thresh, best_count = score, 0.0, 0
    for count, qid in enumerate(
        sorted((q for q in na_probs if q in scores), key=lambda q: na_probs[q]),
        start=1,
    ):
        if has_answer[qid]:
            diff = scores[qid]
        else:
            diff = -1 if predictions[qid] else 0
        score += diff
        if score > best:
            best, best_thresh, best_count = score, na_probs[qid], count
    return 100.0 * best / len(scores), best_thresh, best_count


def evaluate_v2(gold, predictions, na_probs=None, na_prob_thresh=1.0):
    """evaluate-v2.0.py's output.

    Args:
      gold: qid -> list of gold answer texts ([] for unanswerable), in file
        order.
      predictions: qid -> predicted text ("" for no answer).
      na_probs: optional qid -> no-answer value (null_odds.json); without
        it every value is 0 (no threshold applies and no search is made).
      na_prob_thresh: the no-answer threshold applied to na_probs.

    Returns:
      dict: exact, f1, total; HasAns_* and NoAns_* (when there are such
      questions); with na_probs also best_exact, best_exact_thresh,
      best_f1, best_f1_thresh.
    """
    has_answer = {qid: bool(answers) for qid, answers in gold.items()}
    exact_raw, f1_raw = raw_scores_v2(gold, predictions)
    probs = (
        na_probs if na_probs is not None else dict.fromkeys(predictions, 0.0)
    )
    exact = _apply_no_answer_threshold(
        exact_raw, probs, has_answer, na_prob_thresh
    )
    f1 = _apply_no_answer_threshold(f1_raw, probs, has_answer, na_prob_thresh)
    out = _totals(exact, f1, list(exact))
    for prefix, want in (("HasAns", True), ("NoAns", False)):
        qids = [q for q in exact if has_answer[q] == want]
        if qids:
            for key, value in _totals(exact, f1, qids).items():
                out[f"{prefix}_{key}"] = value
    if na_probs is not None:
        for name, raw in (("exact", exact_raw), ("f1", f1_raw)):
            value, thresh = best_threshold(
                predictions, raw, na_probs, has_answer
            )
            out[f"best_{name}"] = value
            out[f"best_{name}_thresh"] = thresh
    return out
