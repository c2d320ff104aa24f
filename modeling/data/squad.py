"""SQuAD v1.1 / v2.0: JSON files -> examples -> features -> records.

The same examples, features and records as the original's `run_squad.py`:

- a paragraph is split into words on whitespace (space, tab, CR, LF and
  U+202F only: a no-break space stays inside a word), and every character is
  mapped to the word it belongs to (a space to the word before it);
- the question is cut to `max_query_length` word pieces;
- a training answer is located by its `answer_start`, mapped to word pieces
  and tightened to the pieces of the answer text (`improve_answer_span`);
- long documents are cut into windows of `max_seq_length - len(query) - 3`
  pieces, each starting `doc_stride` pieces after the previous one, and a
  piece is scored in each window containing it (`min(left, right) + 0.01 *
  window length`, the earliest window winning ties); only its best window
  may start an answer at prediction time;
- an answer that is not inside a window trains toward position 0 ([CLS]), as
  does every window of an unanswerable (v2) question.

What differs from the original is the handling of bad input. The original
fails with a KeyError or IndexError (or silently trains on a wrong span);
here each problem is a ValueError naming the file, the article and the
question id: a field missing or of the wrong type, an empty context in a
training file (predicted, one is answered as the original answers it:
"empty", or no answer in v2), more than one answer to a training question, an empty answer text or one whose
`answer_start` puts it outside the context.

A training answer is the words its `answer_start` and length cover, as in
the original, when those words contain its text: an `answer_start` a
character or two off (common in SQuAD-format data) still trains on the
answer, and such answers are counted and logged. When the words do not
contain the text (a start pointing elsewhere, or an answer holding a
no-break or thin space, which splits the answer but not the paragraph),
the question is skipped as the original does, counted and logged; more
than `max_skipped_fraction` of the questions skipped is an error (the data
or the settings are wrong).
Questions longer than `max_query_length` are cut, as the original does, and
counted.

Nothing here imports TensorFlow: records are framed by data/tfrecord_io and
encoded by `encode_example` (the bytes of input_pipeline.serialize_example).

One module, over 500 lines: the original's SQuAD data path, example to record,
every rule of which must match the original's.
"""

import dataclasses
import json
import os
import time

from absl import logging

from modeling.data import feature_names
from modeling.data import file_io
from modeling.data import tfrecord_io
from modeling.text.vocabulary import CLS_TOKEN
from modeling.text.vocabulary import SEP_TOKEN

# unique_ids of features count up from here (train and predict alike).
FIRST_UNIQUE_ID = 1000000000
# At most this fraction of training questions may be skipped because their
# answer cannot be found in the whitespace words.
DEFAULT_MAX_SKIPPED_FRACTION = 0.05
# Feature conversion logs its progress every this many examples.
PROGRESS_EVERY = 2000
# The original logs the windows of the first 20 examples.
LOGGED_EXAMPLES = 20

# The paragraph splitter's whitespace (not str.isspace: no NBSP, no U+2009).
_PARAGRAPH_WHITESPACE = frozenset(" \t\r\n\u202f")


@dataclasses.dataclass
class SquadExample:
    """One question on one paragraph.

    For training examples start_position / end_position are word indices in
    doc_tokens (-1 for an impossible question); for prediction they are None.
    `title` and `answers` (the gold texts, or None when the file has none)
    are not in the original; the scorer and the error messages use them.
    """

    qas_id: str
    question_text: str
    doc_tokens: list
    orig_answer_text: str | None = None
    start_position: int | None = None
    end_position: int | None = None
    is_impossible: bool = False
    title: str = ""
    answers: list | None = None


@dataclasses.dataclass
class InputFeatures:
    """One window of one example, as the model sees it."""

    unique_id: int
    example_index: int
    doc_span_index: int
    tokens: list
    token_to_orig_map: dict
    token_is_max_context: dict
    input_ids: list
    input_mask: list
    segment_ids: list
    start_position: int | None = None
    end_position: int | None = None
    is_impossible: bool | None = None


@dataclasses.dataclass
class ReadStats:
    """What reading a file dropped or cut."""

    num_questions: int = 0
    num_skipped: int = 0
    # Kept answers whose answer_start does not point exactly at their text.
    num_inexact_starts: int = 0
    # Questions to predict on a paragraph with no words (no window).
    num_empty_contexts: int = 0


# === Reading ===


def split_paragraph(text):
    """The original's whitespace split of a context.

    Returns:
      (doc_tokens, char_to_word_offset): the words, and for each character
      of `text` the index of its word (whitespace belongs to the word before
      it; -1 before the first word).
    """
    doc_tokens = []
    char_to_word_offset = []
    prev_is_whitespace = True
    for c in text:
        if c in _PARAGRAPH_WHITESPACE:
            prev_is_whitespace = True
        else:
            if prev_is_whitespace:
                doc_tokens.append(c)
            else:
                doc_tokens[-1] += c
            prev_is_whitespace = False
        char_to_word_offset.append(len(doc_tokens) - 1)
    return doc_tokens, char_to_word_offset


class _Where:
    """Builds error messages naming the file, article and question."""

    def __init__(self, input_file):
        self.input_file = input_file
        self.article = None
        self.qas_id = None

    def describe(self):
        parts = [str(self.input_file)]
        if self.article is not None:
            parts.append(f"article {self.article}")
        if self.qas_id is not None:
            parts.append(f"question id {self.qas_id!r}")
        return ", ".join(parts)

    def error(self, message):
        return ValueError(f"{self.describe()}: {message}")

    def field(self, obj, name, kind, what):
        if not isinstance(obj, dict):
            raise self.error(f"{what} is not a JSON object")
        if name not in obj:
            raise self.error(f"{what} has no field {name!r}")
        value = obj[name]
        kinds = kind if isinstance(kind, tuple) else (kind,)
        # A JSON true is not a number here, nor a number a bool, unless
        # both are named.
        if not isinstance(value, kinds) or (
            isinstance(value, bool) and bool not in kinds
        ):
            expected = " or ".join(
                getattr(k, "__name__", "number") for k in kinds
            )
            raise self.error(
                f"{what} field {name!r} is {type(value).__name__}, "
                f"expected {expected}"
            )
        return value


def load_squad_json(input_file):
    """The `data` list of a SQuAD JSON file.

    Raises:
      FileNotFoundError: no such file.
      ValueError: not JSON (naming line and column), not UTF-8, or no
        `data` list.
    """
    text = file_io.read_text(input_file)
    try:
        root = json.loads(text)
    except json.JSONDecodeError as e:
        raise ValueError(
            f"{input_file}: malformed JSON at line {e.lineno} column "
            f"{e.colno}: {e.msg}"
        ) from None
    where = _Where(input_file)
    return where.field(root, "data", list, "the file")


def read_squad_examples(
    input_file,
    is_training,
    version_2_with_negative=False,
    max_skipped_fraction=DEFAULT_MAX_SKIPPED_FRACTION,
    verbose_logging=False,
):
    """Reads a SQuAD JSON file into SquadExamples (the original's order).

    Args:
      input_file: path of train-v1.1.json, dev-v2.0.json, ...
      is_training: whether answers are read as training labels (exactly one
        per answerable question, its position checked).
      version_2_with_negative: read `is_impossible` (training only).
      max_skipped_fraction: training only, see the module docstring.
      verbose_logging: log every skipped answer (else one in 100).

    Returns:
      (examples, ReadStats).

    Raises:
      ValueError: bad input (see the module docstring), naming file,
        article and question id.
    """
    articles = load_squad_json(input_file)
    where = _Where(input_file)
    examples = []
    stats = ReadStats()
    seen_ids = set()
    for article_index, entry in enumerate(articles):
        where.article, where.qas_id = f"#{article_index}", None
        title = entry.get("title") if isinstance(entry, dict) else None
        if isinstance(title, str):
            where.article = f"#{article_index} {title!r}"
        paragraphs = where.field(entry, "paragraphs", list, "the article")
        for paragraph in paragraphs:
            where.qas_id = None
            context = where.field(paragraph, "context", str, "a paragraph")
            qas = where.field(paragraph, "qas", list, "a paragraph")
            doc_tokens, char_to_word_offset = split_paragraph(context)
            for qa in qas:
                where.qas_id = None
                # An int id as the original took any JSON value: its
                # decimal string, as json.dumps writes the key.
                qas_id = str(where.field(qa, "id", (str, int), "a question"))
                where.qas_id = qas_id
                # Predictions are keyed by id: a repeated one would merge
                # two questions' answers (and score one of them).
                if not is_training:
                    if qas_id in seen_ids:
                        raise where.error("this question id is used twice")
                    seen_ids.add(qas_id)
                question_text = where.field(qa, "question", str, "question")
                if not doc_tokens:
                    # No window to read: answered as the original does
                    # ("empty"; v2: no answer).
                    stats.num_empty_contexts += 1
                stats.num_questions += 1
                example = _read_answers(
                    where,
                    qa,
                    context,
                    doc_tokens,
                    char_to_word_offset,
                    is_training,
                    version_2_with_negative,
                    verbose_logging,
                    stats,
                )
                if example is None:
                    stats.num_skipped += 1
                    continue
                example.qas_id = qas_id
                example.question_text = question_text
                example.doc_tokens = doc_tokens
                example.title = title if isinstance(title, str) else ""
                examples.append(example)
    if stats.num_inexact_starts:
        logging.warning(
            "%s: %d training answers' answer_start does not point exactly at "
            "their text; each trains on the words it covers, which contain "
            "the text (as in the original)",
            input_file,
            stats.num_inexact_starts,
        )
    if stats.num_empty_contexts:
        logging.warning(
            "%s: %d questions are on a paragraph whose context is empty; "
            "they get no window, and the answer the original gives then "
            '("empty"; with version_2_with_negative, no answer)',
            input_file,
            stats.num_empty_contexts,
        )
    if stats.num_skipped:
        logging.warning(
            "%s: skipped %d of %d training questions whose answer text is "
            "not in the words of the context its answer_start points at",
            input_file,
            stats.num_skipped,
            stats.num_questions,
        )
        if stats.num_skipped > max_skipped_fraction * stats.num_questions:
            raise ValueError(
                f"{input_file}: {stats.num_skipped} of {stats.num_questions} "
                "training questions have an answer not found in the context's "
                "words (more than max_skipped_fraction="
                f"{max_skipped_fraction}); check the file's answer texts, "
                "or raise --max_skipped_fraction"
            )
    return examples, stats


# Files of question rows (not SQuAD JSON): run_squad --predict_file.
ROW_EXTENSIONS = (".csv", ".tsv", ".jsonl")


def is_question_rows(path):
    """Whether `path` is a file of question rows (CSV, TSV, JSON Lines)
    rather than SQuAD JSON."""
    return os.fspath(path).lower().endswith(ROW_EXTENSIONS)


def read_question_rows(path):
    """Questions to predict from a CSV / TSV / JSON Lines file: columns
    `question` and `context`, and `id` (else the row's line number); no
    answers.

    Returns:
      list of SquadExample (unscored: `answers` None).

    Raises:
      ValueError: naming the file and line: a missing column, an empty
        question or context.
    """
    from modeling.data import table_files

    table = table_files.TableFile(path)
    for name in ("question", "context"):
        table_files.find_column(table, None, name)
    examples = []
    for line, row in table.rows():
        where = table.where(line)
        texts = []
        for name in ("question", "context"):
            value = row.get(name)
            if not isinstance(value, str) or not value.strip():
                raise ValueError(f"{where}: empty or missing {name}")
            texts.append(value)
        doc_tokens, _ = split_paragraph(texts[1])
        examples.append(
            SquadExample(
                qas_id=str(row.get("id", line)),
                question_text=texts[0],
                doc_tokens=doc_tokens,
            )
        )
    if not examples:
        raise ValueError(f"{table.path}: no questions")
    ids = [e.qas_id for e in examples]
    if len(set(ids)) != len(ids):
        twice = sorted({i for i in ids if ids.count(i) > 1})[:3]
        raise ValueError(f"{table.path}: ids {twice} are used twice")
    return examples


def _read_answers(
    where,
    qa,
    context,
    doc_tokens,
    char_to_word_offset,
    is_training,
    version_2_with_negative,
    verbose_logging,
    stats,
):
    """A SquadExample with its answer fields (None: skip this question)."""
    example = SquadExample(qas_id="", question_text="", doc_tokens=[])
    if not is_training:
        answers = qa.get("answers")
        if answers is not None:
            # Not read past (a dict of lists, as some exports write them,
            # left the file unscored without a word).
            answers = where.field(qa, "answers", list, "question")
            example.answers = [
                a["text"]
                for a in answers
                if isinstance(a, dict) and isinstance(a.get("text"), str)
            ]
        # A labelled v2 file's unanswerable question (an unlabelled file's
        # questions have no answers either, but no is_impossible).
        if qa.get("is_impossible") in (True, 1):
            example.is_impossible = True
        return example
    if version_2_with_negative:
        # true/false, or 1/0 as some exports write it (the original tested
        # its truth).
        value = where.field(qa, "is_impossible", (bool, int), "question")
        if value not in (True, False):
            raise where.error(f"is_impossible is {value!r}, not true or false")
        example.is_impossible = bool(value)
    if example.is_impossible:  # Its answers are not read.
        example.start_position = example.end_position = -1
        example.orig_answer_text = ""
        return example
    answers = where.field(qa, "answers", list, "question")
    if len(answers) != 1:
        raise where.error(
            f"{len(answers)} answers; for training each question must have "
            "exactly 1 answer (unanswerable ones: is_impossible with "
            "--version_2_with_negative)"
        )
    answer = answers[0]
    text = where.field(answer, "text", str, "the answer")
    start = where.field(answer, "answer_start", int, "the answer")
    if not text.strip():
        # Skipped and counted as an answer not found (the original trained
        # on a wrong span: an empty text is found anywhere).
        logging.warning(
            "%s: the answer text is empty or only whitespace; skipped",
            where.describe(),
        )
        return None
    if start < 0 or start + len(text) > len(context):
        raise where.error(
            f"answer_start {start} puts the answer text {text!r} outside "
            f"the context ({len(context)} characters)"
        )
    example.orig_answer_text = text
    example.start_position = char_to_word_offset[start]
    example.end_position = char_to_word_offset[start + len(text) - 1]
    if example.start_position < 0:
        # Whitespace before the context's first word (its word index is -1:
        # the original trained on position -1, or crashed).
        logging.warning(
            "%s: answer_start %d is whitespace before the context's first "
            "word; skipped",
            where.describe(),
            start,
        )
        return None
    # Only answers made of whole words can be recovered from the words.
    actual_text = " ".join(
        doc_tokens[example.start_position : example.end_position + 1]
    )
    cleaned_answer_text = " ".join(text.split())
    if actual_text.find(cleaned_answer_text) == -1:
        logging.log_every_n(
            logging.WARNING,
            "%s: could not find answer %r in %r (answer_start %d); skipped",
            1 if verbose_logging else 100,
            where.describe(),
            cleaned_answer_text,
            actual_text,
            start,
        )
        return None
    if context[start : start + len(text)] != text:
        stats.num_inexact_starts += 1
    return example


# === Features ===


def improve_answer_span(doc_tokens, input_start, input_end, answer_tokens):
    """The earliest span of `doc_tokens` within [input_start, input_end]
    whose word pieces are the answer's, else the input span.

    The original joins pieces with spaces and compares strings; pieces never
    contain spaces, so that is list equality of the same length.
    """
    n = len(answer_tokens)
    if n == 0:
        return input_start, input_end
    answer_tokens = list(answer_tokens)
    first = answer_tokens[0]
    for new_start in range(input_start, input_end - n + 2):
        if (
            doc_tokens[new_start] == first
            and doc_tokens[new_start : new_start + n] == answer_tokens
        ):
            return new_start, new_start + n - 1
    return input_start, input_end


def doc_spans(num_tokens, max_tokens_for_doc, doc_stride):
    """The windows (start, length) over `num_tokens` document pieces."""
    spans = []
    start_offset = 0
    while start_offset < num_tokens:
        length = min(num_tokens - start_offset, max_tokens_for_doc)
        spans.append((start_offset, length))
        if start_offset + length == num_tokens:
            break
        start_offset += min(length, doc_stride)
    return spans


def max_context_spans(spans, num_tokens):
    """For each document piece, the index of the window where it has the
    most context: max of min(left, right) + 0.01 * length, the earliest
    window on a tie (the original's score, computed the same way)."""
    best = [None] * num_tokens
    best_score = [None] * num_tokens
    for span_index, (start, length) in enumerate(spans):
        end = start + length - 1
        for position in range(start, end + 1):
            score = min(position - start, end - position) + 0.01 * length
            if best_score[position] is None or score > best_score[position]:
                best_score[position] = score
                best[position] = span_index
    return best


def convert_examples_to_features(
    examples,
    tokenizer,
    max_seq_length,
    doc_stride,
    max_query_length,
    is_training,
    output_fn,
    stats=None,
    log_examples=True,
):
    """Converts examples to InputFeatures, calling output_fn(feature) for
    each window in order; logs progress every PROGRESS_EVERY examples.

    Args:
      stats: optional dict; its "num_truncated_queries" and "num_features"
        are set.
      log_examples: log the windows of the first LOGGED_EXAMPLES examples
        (once a run; not a server's every request).

    Returns:
      The number of features.
    """
    unique_id = FIRST_UNIQUE_ID
    num_truncated = 0
    tokenize = tokenizer.tokenize
    vocab = tokenizer.vocab
    cls_id, sep_id = vocab[CLS_TOKEN], vocab[SEP_TOKEN]
    started = time.time()
    for example_index, example in enumerate(examples):
        if example_index and example_index % PROGRESS_EVERY == 0:
            _log_progress(example_index, len(examples), unique_id, started)
        query_tokens = tokenize(example.question_text)
        if len(query_tokens) > max_query_length:
            query_tokens = query_tokens[:max_query_length]
            num_truncated += 1

        tok_to_orig_index = []
        orig_to_tok_index = []
        all_doc_tokens = []
        for i, token in enumerate(example.doc_tokens):
            orig_to_tok_index.append(len(all_doc_tokens))
            sub_tokens = tokenize(token)
            tok_to_orig_index.extend([i] * len(sub_tokens))
            all_doc_tokens.extend(sub_tokens)
        doc_ids = tokenizer.convert_tokens_to_ids(all_doc_tokens)

        tok_start_position = tok_end_position = None
        if is_training and example.is_impossible:
            tok_start_position = tok_end_position = -1
        if is_training and not example.is_impossible:
            tok_start_position = orig_to_tok_index[example.start_position]
            if example.end_position < len(example.doc_tokens) - 1:
                tok_end_position = (
                    orig_to_tok_index[example.end_position + 1] - 1
                )
            else:
                tok_end_position = len(all_doc_tokens) - 1
            tok_start_position, tok_end_position = improve_answer_span(
                all_doc_tokens,
                tok_start_position,
                tok_end_position,
                tokenize(example.orig_answer_text),
            )

        # [CLS], [SEP] and [SEP] take 3 positions.
        max_tokens_for_doc = max_seq_length - len(query_tokens) - 3
        spans = doc_spans(len(all_doc_tokens), max_tokens_for_doc, doc_stride)
        best_span = max_context_spans(spans, len(all_doc_tokens))
        query_ids = tokenizer.convert_tokens_to_ids(query_tokens)
        head_tokens = [CLS_TOKEN, *query_tokens, SEP_TOKEN]
        head_ids = [cls_id, *query_ids, sep_id]
        doc_offset = len(head_tokens)
        for doc_span_index, (start, length) in enumerate(spans):
            end = start + length  # exclusive
            tokens = head_tokens + all_doc_tokens[start:end] + [SEP_TOKEN]
            input_ids = head_ids + doc_ids[start:end] + [sep_id]
            token_to_orig_map = {
                doc_offset + i: tok_to_orig_index[start + i]
                for i in range(length)
            }
            token_is_max_context = {
                doc_offset + i: best_span[start + i] == doc_span_index
                for i in range(length)
            }
            num_real = len(input_ids)
            padding = [0] * (max_seq_length - num_real)
            segment_ids = [0] * doc_offset + [1] * (length + 1) + padding
            input_mask = [1] * num_real + padding
            input_ids += padding

            start_position = end_position = None
            if is_training and not example.is_impossible:
                if start <= tok_start_position and tok_end_position < end:
                    start_position = tok_start_position - start + doc_offset
                    end_position = tok_end_position - start + doc_offset
                else:
                    start_position = end_position = 0
            if is_training and example.is_impossible:
                start_position = end_position = 0
            feature = InputFeatures(
                unique_id=unique_id,
                example_index=example_index,
                doc_span_index=doc_span_index,
                tokens=tokens,
                token_to_orig_map=token_to_orig_map,
                token_is_max_context=token_is_max_context,
                input_ids=input_ids,
                input_mask=input_mask,
                segment_ids=segment_ids,
                start_position=start_position,
                end_position=end_position,
                is_impossible=example.is_impossible if is_training else None,
            )
            if log_examples and example_index < LOGGED_EXAMPLES:
                _log_feature(feature, is_training)
            output_fn(feature)
            unique_id += 1
    num_features = unique_id - FIRST_UNIQUE_ID
    if num_truncated:
        logging.info(
            "%d of %d questions were longer than max_query_length=%d word "
            "pieces and were cut to it",
            num_truncated,
            len(examples),
            max_query_length,
        )
    logging.info(
        "%d examples -> %d features in %.1f s",
        len(examples),
        num_features,
        time.time() - started,
    )
    if stats is not None:
        stats["num_truncated_queries"] = num_truncated
        stats["num_features"] = num_features
    return num_features


def _log_feature(feature, is_training):
    """The original's log of the windows of the first LOGGED_EXAMPLES
    examples: the user's check of word pieces, the map back to words, the
    windows' best-context positions and the answer's span."""
    logging.info("*** Example ***")
    logging.info("unique_id: %s", feature.unique_id)
    logging.info("example_index: %s", feature.example_index)
    logging.info("doc_span_index: %s", feature.doc_span_index)
    logging.info("tokens: %s", " ".join(feature.tokens))
    logging.info(
        "token_to_orig_map: %s",
        " ".join(f"{k}:{v}" for k, v in feature.token_to_orig_map.items()),
    )
    logging.info(
        "token_is_max_context: %s",
        " ".join(f"{k}:{v}" for k, v in feature.token_is_max_context.items()),
    )
    for name in ("input_ids", "input_mask", "segment_ids"):
        values = getattr(feature, name)
        logging.info("%s: %s", name, " ".join(str(x) for x in values))
    if is_training and feature.is_impossible:
        logging.info("impossible example")
    elif is_training:
        start, end = feature.start_position, feature.end_position
        logging.info("start_position: %d", start)
        logging.info("end_position: %d", end)
        logging.info("answer: %s", " ".join(feature.tokens[start : end + 1]))


def _log_progress(done, total, unique_id, started):
    elapsed = time.time() - started
    logging.info(
        "Converted %d / %d examples (%d features), %.0f examples/s, ETA %.0f s",
        done,
        total,
        unique_id - FIRST_UNIQUE_ID,
        done / max(elapsed, 1e-9),
        (total - done) * elapsed / done,
    )


# === Records ===


def _varint(value):
    out = bytearray()
    while value >= 0x80:
        out.append((value & 0x7F) | 0x80)
        value >>= 7
    out.append(value)
    return bytes(out)


def _int64_payload(values):
    # int64 varints: negative values take their two's complement (10 bytes).
    return b"".join(_varint(v if v >= 0 else v + (1 << 64)) for v in values)


def encode_example(features):
    """The bytes input_pipeline.serialize_example writes for a mapping
    name -> list of ints (int64 features), without protobuf: map entries
    sorted by name, each list one packed field."""
    entries = []
    for name in sorted(features):
        payload = _int64_payload(features[name])
        inner = b"\x0a" + _varint(len(payload)) + payload  # Int64List.value
        feature = b"\x1a" + _varint(len(inner)) + inner  # Feature.int64_list
        key = name.encode("utf-8")
        entry = b"\x0a" + _varint(len(key)) + key
        entry += b"\x12" + _varint(len(feature)) + feature
        entries.append(b"\x0a" + _varint(len(entry)) + entry)
    body = b"".join(entries)
    return b"\x0a" + _varint(len(body)) + body  # Example.features


def feature_record(feature, is_training):
    """One InputFeatures as the original's tf.train.Example bytes."""
    values = {
        feature_names.UNIQUE_IDS: [feature.unique_id],
        "input_ids": feature.input_ids,
        "input_mask": feature.input_mask,
        "segment_ids": feature.segment_ids,
    }
    if is_training:
        values[feature_names.START_POSITIONS] = [feature.start_position]
        values[feature_names.END_POSITIONS] = [feature.end_position]
        values[feature_names.IS_IMPOSSIBLE] = [int(feature.is_impossible)]
    return encode_example(values)


def write_features(
    examples,
    tokenizer,
    max_seq_length,
    doc_stride,
    max_query_length,
    is_training,
    output_file,
    keep=False,
):
    """Converts examples and writes their records to output_file
    (train.tf_record / eval.tf_record), atomically.

    Args:
      keep: also return the InputFeatures (prediction needs them).

    Returns:
      (number of features, list of InputFeatures or None, stats dict).
    """
    kept = [] if keep else None
    stats = {}
    with file_io.atomic_path(output_file) as tmp:
        writer = tfrecord_io.open_writer(tmp)
        try:

            def output_fn(feature):
                writer.write(feature_record(feature, is_training))
                if kept is not None:
                    kept.append(feature)

            num = convert_examples_to_features(
                examples,
                tokenizer,
                max_seq_length,
                doc_stride,
                max_query_length,
                is_training,
                output_fn,
                stats,
            )
        finally:
            writer.close()
    return num, kept, stats
