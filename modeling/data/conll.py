"""CoNLL-2003 token classification data (run_ner.py): files -> sentences ->
windowed features, and predictions back to the file's lines.

The file format: one word per line, `word POS chunk tag` separated by spaces
(any number of columns, the tag last; a file to predict may hold the words
alone), a blank line between sentences, `-DOCSTART-` lines between
documents. Tags in IOB1 (`I-X` starts an entity unless it continues one;
`B-X` only between two adjacent entities of one type) are converted to IOB2
(every entity starts with `B-X`) when read, and predictions are IOB2.

As in the BERT paper, each word is split into WordPieces and its label
carried by the first piece; the other pieces get `label_mask` 0 and are not
scored. A sentence longer than `max_seq_length - 2` pieces is split into
consecutive windows at word boundaries (no word dropped or scored twice);
only a single word longer than a whole window loses its trailing pieces,
which carry no label anyway.

No TensorFlow here: features are lists of ints (tasks/ner.py batches them).
"""

import dataclasses
import os

from modeling.data import file_io
from modeling.text.vocabulary import CLS_TOKEN
from modeling.text.vocabulary import SEP_TOKEN
from modeling.text.vocabulary import UNK_TOKEN

DOCSTART = "-DOCSTART-"
OUTSIDE = "O"
LABEL_LIST_FILE = "label_list.txt"


@dataclasses.dataclass
class Sentence:
    """One sentence of a CoNLL file.

    Attributes:
      words: list of str.
      tags: list of str (IOB2), or None for a file without tags.
      line_numbers: the 1-based line of each word in its file.
    """

    words: list
    tags: list | None
    line_numbers: list


@dataclasses.dataclass
class ConllFile:
    """A parsed CoNLL file: its sentences and every line as read (for
    writing predictions back in place).

    Attributes:
      path: str.
      lines: the file's lines without line ends.
      sentences: list of Sentence.
      has_tags: whether the word lines carry a tag column.
    """

    path: str
    lines: list
    sentences: list
    has_tags: bool


def iob1_to_iob2(tags):
    """IOB1 (or mixed) tags of one sentence -> IOB2: an `I-X` that does not
    continue an entity of type X (after `B-X` or `I-X`) becomes `B-X`.
    IOB2 tags come back unchanged."""
    out = []
    previous = OUTSIDE
    for tag in tags:
        if tag.startswith("I-"):
            kind = tag[2:]
            if previous not in (f"B-{kind}", f"I-{kind}"):
                tag = f"B-{kind}"
        out.append(tag)
        previous = tag
    return out


def _check_tag(tag, where):
    if tag == OUTSIDE:
        return
    if len(tag) > 2 and tag[:2] in ("B-", "I-"):
        return
    raise ValueError(
        f"{where}: tag {tag!r} is not O, B-<type> or I-<type> (IOB1/IOB2)"
    )


def read_conll(path, require_tags=True):
    """Reads a CoNLL file.

    Every word line must have as many space-separated columns as the file's
    first word line. With `require_tags` that is at least 2 (the tag is the
    last column); otherwise a file of one column holds words only.

    Raises:
      FileNotFoundError: no such file.
      ValueError: naming the file and line: not UTF-8, a wrong column count,
        a malformed tag; or a file with no sentence.
    """
    path = os.fspath(path)
    lines = file_io.read_text(path).splitlines()
    sentences = []
    num_columns = None
    words, tags, numbers = [], [], []

    def flush():
        if words:
            sentences.append(
                Sentence(
                    list(words),
                    iob1_to_iob2(tags) if num_columns > 1 else None,
                    list(numbers),
                )
            )
        words.clear()
        tags.clear()
        numbers.clear()

    for i, line in enumerate(lines):
        columns = line.split()
        if not columns:
            flush()
            continue
        if columns[0] == DOCSTART:
            flush()
            continue
        where = f"{path} line {i + 1}"
        if num_columns is None:
            num_columns = len(columns)
            if require_tags and num_columns < 2:
                raise ValueError(
                    f"{where}: expected `word ... tag` (at least 2 "
                    f"space-separated columns), found {num_columns}"
                )
        elif len(columns) != num_columns:
            raise ValueError(
                f"{where}: expected {num_columns} space-separated columns "
                f"(as the first word line), found {len(columns)}"
            )
        words.append(columns[0])
        if num_columns > 1:
            _check_tag(columns[-1], where)
            tags.append(columns[-1])
        numbers.append(i + 1)
    if num_columns is None:
        raise ValueError(f"{path}: no sentences (an empty CoNLL file)")
    flush()
    return ConllFile(path, lines, sentences, num_columns > 1)


def labels_from_sentences(sentences):
    """The label list of a training file: "O" first, then the others sorted
    (so that the ids do not depend on the order of the file)."""
    found = {tag for s in sentences for tag in s.tags}
    return sorted(found, key=lambda t: (t != OUTSIDE, t[2:], t))


def read_label_list(path):
    """output_dir/label_list.txt: one label per line, in id order."""
    labels = [
        line.strip()
        for line in file_io.read_text(path).splitlines()
        if line.strip()
    ]
    if not labels:
        raise ValueError(f"{path}: no labels")
    return labels


def write_label_list(path, labels):
    file_io.write_text(path, "".join(f"{label}\n" for label in labels))


def check_tags(conll, label_list):
    """Every tag of a labelled file is in label_list.

    Raises:
      ValueError: naming the file and the line of the first unknown tag.
    """
    known = set(label_list)
    if not conll.has_tags:
        return
    for s in conll.sentences:
        for tag, number in zip(s.tags, s.line_numbers):
            if tag not in known:
                raise ValueError(
                    f"{conll.path} line {number}: unknown tag {tag!r}; the "
                    f"model's labels are {list(label_list)}"
                )


@dataclasses.dataclass
class Feature:
    """One window of a sentence, padded to max_seq_length.

    Attributes:
      input_ids, input_mask, segment_ids: list of int [T].
      label_ids: list of int [T]; the word's label id at its first piece.
      label_mask: list of int [T]; 1 at the first piece of each word.
      sentence_index: the sentence the window comes from.
      word_start: index (in the sentence) of the window's first word; the
        window's labelled positions are its words in order from there.
    """

    input_ids: list
    input_mask: list
    segment_ids: list
    label_ids: list
    label_mask: list
    sentence_index: int
    word_start: int


def _word_pieces(tokenizer, word):
    # A word the tokenizer deletes entirely (control characters) still
    # needs a piece to carry its label.
    return tokenizer.tokenize(word) or [UNK_TOKEN]


def sentence_windows(piece_counts, max_pieces):
    """Splits a sentence into consecutive windows of whole words.

    Args:
      piece_counts: the number of WordPieces of each word.
      max_pieces: the most pieces a window holds (max_seq_length - 2).

    Returns:
      list of (first word, end word) pairs covering every word once; a word
      longer than max_pieces gets a window of its own (it is cut).
    """
    windows = []
    start, used = 0, 0
    for i, count in enumerate(piece_counts):
        count = min(count, max_pieces)
        if used + count > max_pieces and i > start:
            windows.append((start, i))
            start, used = i, 0
        used += count
    if piece_counts:
        windows.append((start, len(piece_counts)))
    return windows


def convert_sentences(sentences, label_list, max_seq_length, tokenizer):
    """Sentences -> windowed Features (`[CLS] pieces [SEP]`, segment 0).

    Sentences without tags (a file to predict) get label id 0 everywhere;
    `label_mask` still marks the first pieces.

    Raises:
      ValueError: max_seq_length below 3; a tag not in label_list.
    """
    if max_seq_length < 3:
        raise ValueError(f"max_seq_length {max_seq_length} is below 3")
    label_ids = {label: i for i, label in enumerate(label_list)}
    max_pieces = max_seq_length - 2
    features = []
    for index, sentence in enumerate(sentences):
        pieces = [_word_pieces(tokenizer, w) for w in sentence.words]
        windows = sentence_windows([len(p) for p in pieces], max_pieces)
        for start, end in windows:
            tokens, labels, mask = [CLS_TOKEN], [0], [0]
            for w in range(start, end):
                word_pieces = pieces[w][:max_pieces]
                tag_id = 0
                if sentence.tags is not None:
                    tag = sentence.tags[w]
                    if tag not in label_ids:
                        raise ValueError(
                            f"line {sentence.line_numbers[w]}: unknown tag "
                            f"{tag!r}; the model's labels are {label_list}"
                        )
                    tag_id = label_ids[tag]
                tokens += word_pieces
                labels += [tag_id] + [0] * (len(word_pieces) - 1)
                mask += [1] + [0] * (len(word_pieces) - 1)
            tokens.append(SEP_TOKEN)
            labels.append(0)
            mask.append(0)
            ids = tokenizer.convert_tokens_to_ids(tokens)
            pad = [0] * (max_seq_length - len(ids))
            features.append(
                Feature(
                    input_ids=ids + pad,
                    input_mask=[1] * len(ids) + pad,
                    segment_ids=[0] * max_seq_length,
                    label_ids=labels + pad,
                    label_mask=mask + pad,
                    sentence_index=index,
                    word_start=start,
                )
            )
    return features


def word_predictions(features, predicted_ids, sentences, label_list):
    """Per-position predicted label ids -> one tag per word of each sentence.

    Args:
      features: the Features, in order.
      predicted_ids: [num_features, T] predicted label ids.
      sentences: the Sentences the features came from.
      label_list: id -> label.

    Returns:
      list (per sentence) of lists of tags, one per word.

    Raises:
      RuntimeError: a word got no prediction or two (cannot happen with
        features from `convert_sentences`).
    """
    out = [[None] * len(s.words) for s in sentences]
    for feature, ids in zip(features, predicted_ids, strict=True):
        word = feature.word_start
        tags = out[feature.sentence_index]
        for position, flag in enumerate(feature.label_mask):
            if flag:
                if tags[word] is not None:
                    raise RuntimeError(f"word {word} predicted twice")
                tags[word] = label_list[int(ids[position])]
                word += 1
    for index, tags in enumerate(out):
        if any(t is None for t in tags):
            raise RuntimeError(f"sentence {index}: a word has no prediction")
    return out


def prediction_lines(conll, predicted_tags):
    """The file's lines with each word line's predicted tag appended (a
    space, then the tag); blank lines as they were. A -DOCSTART- line gets
    " O" too, so that every non-blank line has the same number of columns,
    as the CoNLL conlleval script requires of its input.

    Args:
      conll: the ConllFile.
      predicted_tags: per sentence, one tag per word (`word_predictions`).

    Returns:
      list of str, one per line of the input file.
    """
    lines = [
        f"{line.rstrip()} {OUTSIDE}" if line.split()[:1] == [DOCSTART] else line
        for line in conll.lines
    ]
    for sentence, tags in zip(conll.sentences, predicted_tags, strict=True):
        for number, tag in zip(sentence.line_numbers, tags, strict=True):
            lines[number - 1] = f"{lines[number - 1].rstrip()} {tag}"
    return lines
