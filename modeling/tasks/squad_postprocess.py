"""SQuAD answers from start/end logits: the n-best list, the final text, the
v2 null rule, and predictions.json / nbest_predictions.json / null_odds.json.

The same answers, probabilities and files as the original's
`write_predictions`:

- per window, the `n_best_size` highest start and end logits (ties: lower
  index first) are paired; a pair is dropped when either end is outside the
  window's document pieces, the start is not in its best-context window
  (data/squad.py), the end comes before the start or the answer is longer
  than `max_answer_length` pieces;
- v2: the null score of a question is the lowest `start[0] + end[0]` over
  its windows (the first on a tie), and the null answer is a candidate;
- candidates are sorted by `start + end` (stable) and the first
  `n_best_size` distinct texts kept; a text is its word pieces joined
  (`##` removed) mapped back onto the original words (`get_final_text`);
- probabilities are a float64 softmax over the kept entries' scores;
- v1 answers the top entry; v2 answers "" when `null score - best non-null
  score > null_score_diff_threshold`, else the best non-null text, and that
  difference goes to null_odds.json.

One change: when a v2 n-best list holds no non-null entry (the original then
crashes on `best_non_null_entry.start_logit`), the answer is "" and its
null_odds value NO_SPAN_SCORE_DIFF. That happens only when no window has a
valid span among its top start/end pairs: a valid span scores at least its
window's null score, and wins a tie, so any kept list has one. Every answer
the original gives is unchanged.

No TensorFlow here: logits come in as numpy arrays.
"""

import collections
import dataclasses
import json
import math
import os

import numpy as np
from absl import logging

from modeling.data import feature_names
from modeling.data import file_io
from modeling.tasks import predictions as predictions_jsonl
from modeling.text import tokenization

PREDICTIONS_FILE = "predictions.json"
NBEST_FILE = "nbest_predictions.json"
NULL_ODDS_FILE = "null_odds.json"
# The null_odds value of a question without any non-null candidate (see the
# module docstring): null wins at every sensible threshold.
NO_SPAN_SCORE_DIFF = 1e6
# The original's initial "no null score yet".
_NO_NULL_SCORE = 1000000

_Prelim = collections.namedtuple(
    "_Prelim", ["feature_index", "start_index", "end_index", "start", "end"]
)


@dataclasses.dataclass
class Predictions:
    """What write_predictions computes, keyed by question id in file order.

    Attributes:
      answers: qid -> predicted text (predictions.json).
      nbest: qid -> list of dicts text / probability / start_logit /
        end_logit (nbest_predictions.json).
      null_odds: v2 only: qid -> null score - best non-null score
        (null_odds.json); None for v1.
      best_non_null: v2 only: qid -> the best non-null text ("" if none),
        the answer for any threshold below its null_odds value.
    """

    answers: dict
    nbest: dict
    null_odds: dict | None = None
    best_non_null: dict | None = None


def best_indexes(logits, n_best_size):
    """Indices of the n_best_size largest logits, ties in index order."""
    logits = np.asarray(logits)
    return np.argsort(-logits, kind="stable")[:n_best_size].tolist()


def compute_softmax(scores):
    """float64 softmax of a list of floats (max subtracted first)."""
    if not scores:
        return []
    max_score = max(scores)
    exp_scores = [math.exp(score - max_score) for score in scores]
    total_sum = 0.0
    for x in exp_scores:
        total_sum += x
    return [x / total_sum for x in exp_scores]


def _strip_spaces(text):
    """text without " ", and for each kept character its index in text."""
    ns_to_s_map = [i for i, c in enumerate(text) if c != " "]
    return "".join(text[i] for i in ns_to_s_map), ns_to_s_map


def get_final_text(
    pred_text,
    orig_text,
    do_lower_case,
    basic_tokenizer=None,
    verbose_logging=False,
):
    """Projects the de-tokenized prediction back onto the original text.

    The prediction is word pieces joined, so it is lower-cased and split at
    punctuation ("steve smith"), while the answer should be the text as
    written ("Steve Smith's" cut to "Steve Smith"). The original words are
    basic-tokenized the same way, the prediction is found in them (first
    occurrence) and its start and end are mapped back through the
    characters that are not spaces. When that fails (not found, the texts
    differ in length without spaces, an end that does not map) the whole
    original words are returned; with `verbose_logging` (run_squad's flag)
    each such case is logged, as the original logs it.
    """

    def whole(message, *args):
        if verbose_logging:
            logging.info(message, *args)
        return orig_text

    if basic_tokenizer is None:
        basic_tokenizer = tokenization.BasicTokenizer(do_lower_case)
    tok_text = " ".join(basic_tokenizer.tokenize(orig_text))
    start_position = tok_text.find(pred_text)
    if start_position == -1:
        return whole("Unable to find text: '%s' in '%s'", pred_text, orig_text)
    end_position = start_position + len(pred_text) - 1

    orig_ns_text, orig_ns_to_s_map = _strip_spaces(orig_text)
    tok_ns_text, tok_ns_to_s_map = _strip_spaces(tok_text)
    if len(orig_ns_text) != len(tok_ns_text):
        return whole(
            "Length not equal after stripping spaces: '%s' vs '%s'",
            orig_ns_text,
            tok_ns_text,
        )
    tok_s_to_ns_map = {s: ns for ns, s in enumerate(tok_ns_to_s_map)}

    def to_orig(position):
        ns = tok_s_to_ns_map.get(position)
        if ns is None or ns >= len(orig_ns_to_s_map):
            return None
        return orig_ns_to_s_map[ns]

    orig_start_position = to_orig(start_position)
    if orig_start_position is None:
        return whole("Couldn't map start position")
    orig_end_position = to_orig(end_position)
    if orig_end_position is None:
        return whole("Couldn't map end position")
    return orig_text[orig_start_position : orig_end_position + 1]


def _prediction_text(example, feature, pred, do_lower_case, basic, verbose):
    tok_tokens = feature.tokens[pred.start_index : pred.end_index + 1]
    orig_doc_start = feature.token_to_orig_map[pred.start_index]
    orig_doc_end = feature.token_to_orig_map[pred.end_index]
    orig_tokens = example.doc_tokens[orig_doc_start : orig_doc_end + 1]
    # De-tokenize WordPieces that have been split off.
    tok_text = " ".join(tok_tokens)
    tok_text = tok_text.replace(" ##", "").replace("##", "")
    tok_text = " ".join(tok_text.strip().split())
    orig_text = " ".join(orig_tokens)
    return get_final_text(tok_text, orig_text, do_lower_case, basic, verbose)


def compute_predictions(
    all_examples,
    all_features,
    unique_ids,
    start_logits,
    end_logits,
    n_best_size=20,
    max_answer_length=30,
    do_lower_case=True,
    version_2_with_negative=False,
    null_score_diff_threshold=0.0,
    verbose_logging=False,
):
    """The answers of all examples from their features' logits
    (`verbose_logging`: get_final_text's).

    Args:
      all_examples: data.squad.SquadExample list (file order).
      all_features: data.squad.InputFeatures list.
      unique_ids: int [N]; start_logits, end_logits: float32 [N, T] (any
        order; every feature needs a row).

    Returns:
      Predictions.

    Raises:
      ValueError: a feature without logits.
    """
    row_of = {int(u): i for i, u in enumerate(np.asarray(unique_ids))}
    start_logits = np.asarray(start_logits, np.float32)
    end_logits = np.asarray(end_logits, np.float32)
    by_example = collections.defaultdict(list)
    for feature in all_features:
        by_example[feature.example_index].append(feature)
    basic = tokenization.BasicTokenizer(do_lower_case=do_lower_case)
    v2 = version_2_with_negative
    out = Predictions({}, {}, {} if v2 else None, {} if v2 else None)

    for example_index, example in enumerate(all_examples):
        features = by_example[example_index]
        prelim = []
        score_null = _NO_NULL_SCORE
        min_null_feature_index = 0
        null_start_logit = null_end_logit = 0
        for feature_index, feature in enumerate(features):
            row = row_of.get(feature.unique_id)
            if row is None:
                raise ValueError(f"no logits for unique_id {feature.unique_id}")
            starts = start_logits[row]
            ends = end_logits[row]
            if v2:
                feature_null_score = float(starts[0]) + float(ends[0])
                if feature_null_score < score_null:
                    score_null = feature_null_score
                    min_null_feature_index = feature_index
                    null_start_logit = float(starts[0])
                    null_end_logit = float(ends[0])
            prelim.extend(
                _candidates(
                    feature,
                    feature_index,
                    starts,
                    ends,
                    n_best_size,
                    max_answer_length,
                )
            )
        if v2:
            prelim.append(
                _Prelim(
                    min_null_feature_index,
                    0,
                    0,
                    null_start_logit,
                    null_end_logit,
                )
            )
        prelim.sort(key=lambda p: p.start + p.end, reverse=True)

        seen = set()
        nbest = []  # (text, start_logit, end_logit)
        for pred in prelim:
            if len(nbest) >= n_best_size:
                break
            if pred.start_index > 0:  # A non-null answer.
                feature = features[pred.feature_index]
                text = _prediction_text(
                    example,
                    feature,
                    pred,
                    do_lower_case,
                    basic,
                    verbose_logging,
                )
                if text in seen:
                    continue
            else:
                text = ""
            seen.add(text)
            nbest.append((text, pred.start, pred.end))
        if v2 and "" not in seen:
            nbest.append(("", null_start_logit, null_end_logit))
        if not nbest:
            nbest.append(("empty", 0.0, 0.0))

        probs = compute_softmax([s + e for _, s, e in nbest])
        out.nbest[example.qas_id] = [
            {"text": t, "probability": p, "start_logit": s, "end_logit": e}
            for (t, s, e), p in zip(nbest, probs)
        ]
        best = next((entry for entry in nbest if entry[0]), None)
        if not v2:
            out.answers[example.qas_id] = nbest[0][0]
            continue
        if best is not None:
            score_diff = score_null - best[1] - best[2]
            best_text = best[0]
        else:
            # The original crashes here: no valid span at all.
            score_diff, best_text = NO_SPAN_SCORE_DIFF, ""
        out.null_odds[example.qas_id] = score_diff
        out.best_non_null[example.qas_id] = best_text
        out.answers[example.qas_id] = (
            "" if score_diff > null_score_diff_threshold else best_text
        )
    return out


def _candidates(
    feature, feature_index, starts, ends, n_best_size, max_answer_length
):
    """The valid (start, end) pairs of one window, in the original's order."""
    num_tokens = len(feature.tokens)
    to_orig = feature.token_to_orig_map
    max_context = feature.token_is_max_context
    start_list = starts.tolist()
    end_list = ends.tolist()
    end_indexes = best_indexes(ends, n_best_size)
    out = []
    for start_index in best_indexes(starts, n_best_size):
        if start_index >= num_tokens or start_index not in to_orig:
            continue
        if not max_context.get(start_index, False):
            continue
        for end_index in end_indexes:
            if end_index >= num_tokens or end_index not in to_orig:
                continue
            if end_index < start_index:
                continue
            if end_index - start_index + 1 > max_answer_length:
                continue
            out.append(
                _Prelim(
                    feature_index,
                    start_index,
                    end_index,
                    start_list[start_index],
                    end_list[end_index],
                )
            )
    return out


def apply_threshold(predictions, threshold):
    """v2: the answers for another null_score_diff_threshold (a copy)."""
    answers = {
        qid: "" if predictions.null_odds[qid] > threshold else text
        for qid, text in predictions.best_non_null.items()
    }
    return dataclasses.replace(predictions, answers=answers)


def to_json(obj):
    """The original's JSON layout: indent 4, ASCII escapes, a final newline."""
    return json.dumps(obj, indent=4) + "\n"


def write_predictions(predictions, output_dir, extra=None, stale=()):
    """Writes predictions.json, nbest_predictions.json, (v2)
    null_odds.json and predictions.jsonl to output_dir, and the `extra`
    {path: text} (their eval_results.txt), as one (file_io.write_texts);
    once they are in place, removes the `stale` outputs of an earlier run
    that this one does not write (and, in v1, an earlier v2 run's
    null_odds.json), so none sits beside them.

    Returns:
      The paths written.
    """
    files = [
        (PREDICTIONS_FILE, predictions.answers),
        (NBEST_FILE, predictions.nbest),
    ]
    stale = list(stale)
    if predictions.null_odds is not None:
        files.append((NULL_ODDS_FILE, predictions.null_odds))
    else:
        stale.append(os.path.join(output_dir, NULL_ODDS_FILE))
    texts = {
        os.path.join(output_dir, name): to_json(obj) for name, obj in files
    }
    texts[os.path.join(output_dir, predictions_jsonl.FILE)] = json_lines(
        predictions
    )
    texts.update(extra or {})
    file_io.write_texts(texts, stale=stale)
    return list(texts)


def json_lines(predictions):
    """predictions.jsonl: per question, its id, the answer ("" for none)
    and the answer's probability among the n best."""
    return "".join(predictions_jsonl.line(r) for r in records(predictions))


def records(predictions):
    """predictions.jsonl's records ({"id", "answer", "probability"}), one
    per question in order."""
    out = []
    for qid, answer in predictions.answers.items():
        probability = next(
            (
                e["probability"]
                for e in predictions.nbest[qid]
                if e["text"] == answer
            ),
            None,
        )
        record = {"id": qid, "answer": answer}
        record["probability"] = (
            None
            if probability is None
            else predictions_jsonl.number(probability)
        )
        out.append(record)
    return out


def answer_logits(predictor, rows, max_seq_length, fast_nbest, total=None):
    """Every window's start and end logits at full max_seq_length, through
    the one predictor (modeling/training/predictor.py), in input order.

    The original ranks the n best starts and ends over every position of a
    window's row, its padding included: a padding position is never an
    answer, but its logit may take one of the n_best_size places. So by
    default every window is predicted at its full max_seq_length (a
    predictor with fixed-shape batches in input order), which gives the
    original's n-best lists and answers whatever the batch size or the
    order. With `fast_nbest` (a length-sorted predictor) each window is
    predicted at its own length and only its real positions are ranked:
    faster where windows are shorter than max_seq_length, still
    independent of the batch-mates (every position past a window's own end
    is -inf), but its n-best lists, and rarely its answers, differ from the
    original's where padding logits would have taken places.

    Args:
      predictor: a predictor.Predictor, length-sorted iff fast_nbest.
      rows: the windows' features with their unique ids (predictor rows).
      total: the number of windows (progress).

    Returns:
      (unique_ids [N], start_logits [N, T], end_logits [N, T]).
    """
    features, outputs = predictor.gather(
        rows,
        width=max_seq_length,
        seq_outputs=("start_logits", "end_logits"),
        fill=-np.inf,
        total=total,
    )
    if not outputs:  # No window at all: every context was empty.
        empty = np.zeros([0, max_seq_length], np.float32)
        return np.zeros([0], np.int64), empty, empty
    start, end = outputs["start_logits"], outputs["end_logits"]
    if fast_nbest:
        padding = features["input_mask"] == 0
        start = np.where(padding, -np.inf, start)
        end = np.where(padding, -np.inf, end)
    return features[feature_names.UNIQUE_IDS], start, end
