"""Entity-level precision, recall and F1 as the CoNLL shared tasks' conlleval
script defines them (run_ner.py's eval_results.txt).

An entity (a chunk) is a maximal run of tags of one type: it starts at a
`B-X` (or `S-X`; BILOU's `U-X`), at an `I-X`/`E-X` (`L-X`) after a tag of
another type or after `O`, and ends before a tag that starts a new chunk, an `O` or another type.
A predicted entity is correct only when its type and both boundaries equal
a gold entity's. Precision = correct / predicted entities, recall =
correct / gold entities, F1 their harmonic mean (0 when both are 0). Token
accuracy counts every word whose predicted tag equals the gold one, `O`
included. Sentences are separate: no entity crosses their boundary.

Values are fractions in [0, 1] (conlleval prints percentages). For IOB tags
they are the script's numbers; IOBES / BILOU spans (an `S-X` entity, `E-X`
then `B-X` two entities) are scored as spans, where the script, which knows
no `S-` and joins `E-X B-X`, counts otherwise.
"""

OUTSIDE = "O"


# BILOU's last and unit tags are IOBES's end and single tags.
_BILOU = {"L": "E", "U": "S"}


def _split(tag):
    """`B-PER` -> ("B", "PER"); `O` -> ("O", ""); BILOU's `L-X` / `U-X` as
    IOBES's `E-X` / `S-X`."""
    if tag == OUTSIDE or len(tag) < 2 or tag[1] != "-":
        return OUTSIDE, ""
    return _BILOU.get(tag[0], tag[0]), tag[2:]


def _ends(prev_tag, tag, prev_type, kind):
    """Whether a chunk ends between the previous word and this one."""
    if prev_tag in ("E", "S"):
        return True
    if prev_tag in ("B", "I"):
        return tag in ("B", "S", OUTSIDE) or prev_type != kind
    return False


def _starts(prev_tag, tag, prev_type, kind):
    """Whether a chunk starts at this word."""
    if tag in ("B", "S"):
        return True
    if tag in ("I", "E"):
        return prev_tag in ("E", "S", OUTSIDE) or prev_type != kind
    return False


def chunks(tags):
    """The entities of one sentence's tags.

    Returns:
      set of (type, first word, last word) tuples.
    """
    out = set()
    prev_tag, prev_type = OUTSIDE, ""
    start = None
    for i, full in enumerate(list(tags) + [OUTSIDE]):
        tag, kind = _split(full)
        if start is not None and _ends(prev_tag, tag, prev_type, kind):
            out.add((prev_type, start, i - 1))
            start = None
        if _starts(prev_tag, tag, prev_type, kind):
            start = i
        prev_tag, prev_type = tag, kind
    return out


def evaluate(gold_sentences, predicted_sentences):
    """conlleval's overall and per-type scores.

    Args:
      gold_sentences: list (per sentence) of lists of gold tags.
      predicted_sentences: the same structure of predicted tags.

    Returns:
      dict with "precision", "recall", "f1", "accuracy" (floats), the
      counts "gold_entities", "predicted_entities", "correct_entities",
      and "per_type": {type: {"precision", "recall", "f1", "gold",
      "predicted", "correct"}}.

    Raises:
      ValueError: the two differ in the number of sentences or words.
    """
    if len(gold_sentences) != len(predicted_sentences):
        raise ValueError(
            f"{len(gold_sentences)} gold sentences but "
            f"{len(predicted_sentences)} predicted"
        )
    gold_count, pred_count, correct = {}, {}, {}
    tokens = right = 0
    for i, (gold, pred) in enumerate(zip(gold_sentences, predicted_sentences)):
        if len(gold) != len(pred):
            raise ValueError(
                f"sentence {i}: {len(gold)} gold tags but {len(pred)} predicted"
            )
        tokens += len(gold)
        right += sum(g == p for g, p in zip(gold, pred))
        gold_chunks, pred_chunks = chunks(gold), chunks(pred)
        for counts, found in (
            (gold_count, gold_chunks),
            (pred_count, pred_chunks),
            (correct, gold_chunks & pred_chunks),
        ):
            for kind, _, _ in found:
                counts[kind] = counts.get(kind, 0) + 1
    per_type = {}
    for kind in sorted(set(gold_count) | set(pred_count)):
        g, p, c = gold_count.get(kind, 0), pred_count.get(kind, 0), 0
        c = correct.get(kind, 0)
        per_type[kind] = dict(_prf(c, g, p), gold=g, predicted=p, correct=c)
    g, p, c = (sum(d.values()) for d in (gold_count, pred_count, correct))
    results = _prf(c, g, p)
    results.update(
        accuracy=right / tokens if tokens else 0.0,
        gold_entities=g,
        predicted_entities=p,
        correct_entities=c,
        per_type=per_type,
    )
    return results


def _prf(correct, gold, predicted):
    precision = correct / predicted if predicted else 0.0
    recall = correct / gold if gold else 0.0
    total = precision + recall
    f1 = 2 * precision * recall / total if total else 0.0
    return {"precision": precision, "recall": recall, "f1": f1}
