"""Token classification data (run_ner.py): CoNLL-style files or JSON Lines ->
sentences -> windowed features, and predictions back to the file's lines.

CoNLL-style files: one word per line, space-separated columns (CoNLL-2003's
`word POS chunk tag`; any number of columns, the word first, the tag last or
at `tag_column`; a file to predict may hold the words alone), a blank line
between sentences, `-DOCSTART-` lines between documents.

JSON Lines (.jsonl / .json): one sentence per line, an object with a list of
words and a list of tags (fields `tokens` and `tags` by default) and an
optional `id`.

Any tag scheme (`tag_scheme`): IOB1 or IOB2 (`B-X`, `I-X`, `O`; IOB1 is
converted to IOB2, in which every entity starts with `B-X`, when read, and
predictions are IOB2, written back to an IOB1 file's lines as IOB1),
IOBES / BILOU (kept as they are), or plain labels
(part-of-speech tags, anything without a chunk prefix). run_ner scores
entities (conlleval) for a chunk scheme and tokens otherwise.

As in the BERT paper, each word is split into WordPieces and its label
carried by the first piece; the other pieces get `label_mask` 0 and are not
scored. A sentence longer than `max_seq_length - 2` pieces is split into
consecutive windows at word boundaries (no word dropped or scored twice);
only a single word longer than a whole window loses its trailing pieces,
which carry no label anyway.

No TensorFlow here: features are lists of ints (tasks/ner.py batches them).

One module, over 500 lines: one data path, files to sentences to windows to
features and back to the file's lines, whose ends must meet.
"""

import dataclasses
import os
import re

from modeling.data import file_io
from modeling.data import long_inputs
from modeling.text.vocabulary import CLS_TOKEN
from modeling.text.vocabulary import SEP_TOKEN
from modeling.text.vocabulary import UNK_TOKEN

DOCSTART = "-DOCSTART-"
OUTSIDE = "O"
LABEL_LIST_FILE = "label_list.txt"


# Tag schemes (`tag_scheme`).
IOB, IOBES, BILOU, PLAIN = "IOB", "IOBES", "BILOU", "plain"
CHUNK_SCHEMES = (IOB, IOBES, BILOU)
_PREFIXES = {IOB: "BI", IOBES: "BIES", BILOU: "BILU"}
JSON_EXTENSIONS = (".jsonl", ".json")
# The columns of a CoNLL line: runs of anything but spaces and tabs (a word
# may hold other Unicode white space, such as U+2028 or U+00A0).
_COLUMNS = re.compile(r"[^ \t]+")


@dataclasses.dataclass
class Sentence:
    """One sentence of a CoNLL or JSON Lines file.

    Attributes:
      words: list of str.
      tags: list of str (IOB1 read as IOB2), or None for a file without tags.
      line_numbers: the 1-based line of each word in its file (a JSON Lines
        file's: the lines of test_predictions.txt, see `read_json_lines`).
      row: a JSON Lines file's line of the sentence, else None.
      id: the sentence's id in predictions.jsonl: the JSON object's `id`,
        else its line (a CoNLL file: the line of the first word).
    """

    words: list
    tags: list | None
    line_numbers: list
    row: int | None = None
    id: str | None = None

    def where(self, path, word):
        """ "<path> line N" of a word (a JSON line: and its position)."""
        if self.row is None:
            return f"{path} line {self.line_numbers[word]}"
        return f"{path} line {self.row} (word {word + 1})"


@dataclasses.dataclass
class ConllFile:
    """A parsed CoNLL (or JSON Lines) file: its sentences and every line as
    read (for writing predictions back in place).

    Attributes:
      path: str.
      lines: the file's lines without line ends (a JSON Lines file: its
        sentences as CoNLL lines, `word tag` or `word`).
      sentences: list of Sentence.
      has_tags: whether the word lines carry a tag column.
      scheme: the tags' scheme (`tag_scheme`); None without tags.
      iob1: the file's IOB tags were IOB1 (an entity may start with `I-X`;
        its sentences hold them as IOB2).
    """

    path: str
    lines: list
    sentences: list
    has_tags: bool
    scheme: str | None = None
    iob1: bool = False


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


def iob2_to_iob1(tags):
    """IOB2 tags of one sentence -> IOB1, as CoNLL-2003's files write them:
    an entity starts with `I-X` unless it follows an entity of type X."""
    out = []
    previous = OUTSIDE
    for tag in tags:
        if tag.startswith("B-"):
            kind = tag[2:]
            if previous not in (f"B-{kind}", f"I-{kind}"):
                tag = f"I-{kind}"
        out.append(tag)
        previous = tag
    return out


def _split_tag(tag):
    """`B-PER` -> ("B", "PER"); a tag without a chunk prefix -> (None, tag)."""
    if len(tag) > 2 and tag[1] == "-" and tag[0] in "BIESLU":
        return tag[0], tag[2:]
    return None, tag


def tag_scheme(tags):
    """The scheme of a set of tags: IOB (O, B-X, I-X: IOB1 or IOB2), IOBES
    (also E-X, S-X), BILOU (also L-X, U-X), or PLAIN (no chunk prefix at
    all: part-of-speech tags, classes of words).

    Raises:
      ValueError: prefixed tags mixed with plain ones (other than O), or
        the prefixes of two schemes.
    """
    prefixes, plain = set(), set()
    for tag in tags:
        prefix, _ = _split_tag(tag)
        if prefix is not None:
            prefixes.add(prefix)
        elif tag != OUTSIDE:
            plain.add(tag)
    if not prefixes:
        return PLAIN
    if plain:
        raise ValueError(
            f"tag {sorted(plain)[0]!r} has no chunk prefix, but other tags "
            f"use one ({', '.join(sorted(p + '-' for p in prefixes))}): "
            "tags are O, B-<type>, I-<type> (IOB), with E-/S- (IOBES) or "
            "L-/U- (BILOU), or all plain labels"
        )
    for scheme in CHUNK_SCHEMES:
        if prefixes <= set(_PREFIXES[scheme]):
            return scheme
    raise ValueError(
        f"tags mix the prefixes {sorted(prefixes)} of IOBES and BILOU"
    )


def _file_scheme(sentences, path):
    """(the scheme of a file's tags, whether they were IOB1); its IOB1
    sentences become IOB2.

    Raises:
      ValueError: naming the file and the line of the first tag that does
        not fit the others (see `tag_scheme`).
    """
    tagged = [s for s in sentences if s.tags is not None]
    try:
        scheme = tag_scheme(t for s in tagged for t in s.tags)
    except ValueError as e:
        # Name the first plain (or odd-prefix) tag's line.
        has_prefix = any(_split_tag(t)[0] for s in tagged for t in s.tags)
        for s in tagged:
            for i, tag in enumerate(s.tags):
                prefix, _ = _split_tag(tag)
                if has_prefix and prefix is None and tag != OUTSIDE:
                    raise ValueError(f"{s.where(path, i)}: {e}") from None
        raise ValueError(f"{path}: {e}") from None
    iob1 = False
    if scheme == IOB:
        # IOB1: some entity starts with I-X, and no B-X starts one after O
        # or another type (IOB1 has B-X only between two X entities). An
        # IOB2 file with a stray I-X start stays IOB2.
        i_starts = b_starts = False
        for s in tagged:
            iob2 = iob1_to_iob2(s.tags)
            for previous, tag, fixed in zip(
                [OUTSIDE, *s.tags[:-1]], s.tags, iob2, strict=True
            ):
                if tag != fixed:
                    i_starts = True
                elif tag.startswith("B-") and previous[2:] != tag[2:]:
                    b_starts = True
            s.tags = iob2
        iob1 = i_starts and not b_starts
    elif scheme in (IOBES, BILOU):
        _check_closed_entities(tagged, path, scheme)
    return scheme, iob1


def _check_closed_entities(sentences, path, scheme):
    """In an IOBES (BILOU) file every entity is B- I-* E- (L-) or one S-
    (U-) tag. An entity left open is IOB's: the file mixes two schemes,
    which would give each type two sets of labels and entities that never
    match.

    Raises:
      ValueError: naming the line of the entity left open and the line of
        the first tag that made the file IOBES (BILOU).
    """
    _, inside, end, single = _PREFIXES[scheme]
    first = next(
        (s.where(path, i), t)
        for s in sentences
        for i, t in enumerate(s.tags)
        if _split_tag(t)[0] in (end, single)
    )
    for s in sentences:
        open_at, open_kind = None, None
        for i, tag in enumerate([*s.tags, OUTSIDE]):
            prefix, kind = _split_tag(tag)
            problem = None
            if open_kind is not None and not (
                prefix in (inside, end) and kind == open_kind
            ):
                bad, problem = open_at, f"no {end}-{open_kind} closes"
            elif open_kind is None and prefix in (inside, end):
                bad, problem = i, f"no B-{kind} opens"
            if problem:
                raise ValueError(
                    f"{s.where(path, bad)}: the entity of {s.tags[bad]!r}: "
                    f"{problem} it, as in IOB, but the file's tags are "
                    f"{scheme} ({first[1]!r} at {first[0]}), where an entity "
                    f"is B- {inside}-... {end}- or one {single}- tag. Give "
                    "the file one scheme."
                )
            if prefix == "B":
                open_at, open_kind = i, kind
            elif prefix in (end, single) or prefix is None:
                open_at, open_kind = None, None


def read_conll(path, require_tags=True, tag_column=None, words_only=False):
    """Reads a CoNLL-style file.

    Every word line must have as many space-separated columns as the file's
    first word line. With `require_tags` that is at least 2; otherwise a
    file of one column holds words only.

    Args:
      path: str.
      require_tags: a training or dev file.
      tag_column: the 1-based column of the tags; None: the last.
      words_only: read the words alone, whatever the other columns hold
        (a server's file to tag: its tags would not be read).

    Raises:
      FileNotFoundError: no such file.
      ValueError: naming the file and line: not UTF-8, a wrong column count,
        a tag that does not fit the file's scheme; or a file with no
        sentence.
    """
    path = os.fspath(path)
    lines = file_io.read_lines(path)
    sentences = []
    num_columns = None
    tag_index = -1 if tag_column is None else tag_column - 1
    words, tags, numbers = [], [], []
    if words_only:
        require_tags, tag_column = False, None

    def tagged():
        return num_columns > 1 and not words_only

    def flush():
        if words:
            sentences.append(
                Sentence(
                    list(words),
                    list(tags) if tagged() else None,
                    list(numbers),
                    id=str(numbers[0]),
                )
            )
        words.clear()
        tags.clear()
        numbers.clear()

    for i, line in enumerate(lines):
        columns = _COLUMNS.findall(line)
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
            if (
                num_columns > 1
                and tag_column is not None
                and not (2 <= tag_column <= num_columns)
            ):
                raise ValueError(
                    f"{where}: --tag_column={tag_column}, but the word "
                    f"lines have {num_columns} columns (the word is column 1)"
                )
        elif len(columns) != num_columns:
            raise ValueError(
                f"{where}: expected {num_columns} space-separated columns "
                f"(as the first word line), found {len(columns)}"
            )
        words.append(columns[0])
        if tagged():
            tags.append(columns[tag_index])
        numbers.append(i + 1)
    if num_columns is None:
        raise ValueError(f"{path}: no sentences (an empty CoNLL file)")
    flush()
    has_tags = tagged()
    scheme, iob1 = _file_scheme(sentences, path) if has_tags else (None, False)
    return ConllFile(path, lines, sentences, has_tags, scheme, iob1)


def read_json_lines(
    path, require_tags=True, tokens_field="tokens", tags_field="tags"
):
    """Reads a JSON Lines file of sentences: objects with a list of words
    (`tokens_field`), a list of as many tags (`tags_field`; optional unless
    `require_tags`) and an optional `id`.

    The ConllFile's `lines` are the sentences as CoNLL lines (`word tag`, or
    `word`, a blank line after each sentence): test_predictions.txt appends
    the predicted tag to them.

    Raises:
      ValueError: naming the file and line: not JSON, a missing or empty
        word list, words or tags that are not strings, a tag list of
        another length; a file with no sentence.
    """
    from modeling.data import table_files

    table = table_files.TableFile(path)
    sentences, lines = [], []
    has_tags = None
    for row, value in table.rows():
        where = table.where(row)
        words = value.get(tokens_field)
        if not isinstance(words, list) or not words:
            found = (
                f"found a {type(words).__name__}"
                if tokens_field in value
                else f"fields: {list(value)}"
            )
            raise ValueError(
                f"{where}: expected a non-empty list of words in field "
                f"{tokens_field!r} (--tokens_field); {found}"
            )
        tags = value.get(tags_field)
        if tags is not None and not isinstance(tags, list):
            # A string would be read character by character.
            raise ValueError(
                f"{where}: field {tags_field!r} (--tags_field) is a "
                f"{type(tags).__name__}, not a list of tags: {tags!r}"
            )
        if has_tags is None:
            has_tags = tags is not None
        if require_tags and tags is None:
            raise ValueError(
                f"{where}: no field {tags_field!r} (--tags_field) with the "
                f"tags; fields: {list(value)}"
            )
        if (tags is not None) != has_tags:
            raise ValueError(
                f"{where}: field {tags_field!r} is "
                f"{'missing' if has_tags else 'present'} (unlike on the "
                "first line)"
            )
        for what, items in (("word", words), ("tag", tags or [])):
            for i, item in enumerate(items):
                if not isinstance(item, str) or not item.strip():
                    raise ValueError(
                        f"{where}: {what} {i + 1} is not a non-empty "
                        f"string: {item!r}"
                    )
                if what == "word" and len(item.split()) != 1:
                    raise ValueError(
                        f"{where}: word {i + 1} {item!r} holds white space "
                        "(one word per list item)"
                    )
        if tags is not None and len(tags) != len(words):
            raise ValueError(
                f"{where}: {len(words)} words but {len(tags)} tags"
            )
        first = len(lines) + 1
        for i, word in enumerate(words):
            lines.append(word if tags is None else f"{word} {tags[i]}")
        lines.append("")
        sentences.append(
            Sentence(
                list(words),
                None if tags is None else list(tags),
                list(range(first, first + len(words))),
                row=row,
                id=str(value.get("id", row)),
            )
        )
    if not sentences:
        raise ValueError(f"{path}: no sentences (an empty JSON Lines file)")
    scheme, iob1 = (
        _file_scheme(sentences, table.path) if has_tags else (None, False)
    )
    return ConllFile(table.path, lines, sentences, bool(has_tags), scheme, iob1)


def read_tagged_file(
    path,
    require_tags=True,
    tag_column=None,
    tokens_field="tokens",
    tags_field="tags",
    words_only=False,
):
    """A CoNLL-style file, or JSON Lines for a .jsonl / .json path
    (`words_only`: its words alone, see `read_conll`)."""
    if os.fspath(path).lower().endswith(JSON_EXTENSIONS):
        if words_only:
            require_tags, tags_field = False, None  # No field is None.
        return read_json_lines(path, require_tags, tokens_field, tags_field)
    return read_conll(path, require_tags, tag_column, words_only)


def labels_from_sentences(sentences, scheme=None):
    """The label list of a training file: "O" first, then the others sorted
    by type (so that the ids do not depend on the order of the file).

    With a chunk `scheme`, each type seen has every prefix of the scheme: a
    type seen only as one-word entities (B-X) can still be predicted, and
    scored, as a longer one (I-X).
    """
    found = {tag for s in sentences for tag in s.tags}
    if scheme in CHUNK_SCHEMES:
        types = {_split_tag(t)[1] for t in found if _split_tag(t)[0]}
        found |= {f"{p}-{x}" for x in types for p in _PREFIXES[scheme]}
    return sorted(found, key=lambda t: (t != OUTSIDE, _split_tag(t)[1], t))


def read_label_list(path):
    """output_dir/label_list.txt: one label per line, in id order."""
    labels = [line.strip() for line in file_io.read_lines(path) if line.strip()]
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
        for i, tag in enumerate(s.tags):
            if tag not in known:
                raise ValueError(
                    f"{s.where(conll.path, i)}: unknown tag {tag!r}; the "
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
    """Splits a sentence into consecutive windows of whole words, without
    overlap (long_inputs.word_windows): a list of (first word, end word)
    pairs covering every word once; a word longer than max_pieces gets a
    window of its own (it is cut)."""
    return long_inputs.word_windows(piece_counts, max_pieces)


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
                            f"{sentence.where('', w).strip()}: unknown tag "
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


# The arrays of a tagger's features (`sentence_arrays`).
FEATURE_NAMES = (
    "input_ids",
    "input_mask",
    "segment_ids",
    "label_ids",
    "label_mask",
)


def sentence_arrays(sentences, label_list, max_seq_length, tokenizer):
    """Windowed features of the sentences (`convert_sentences`) as int32
    numpy arrays [W, T] by FEATURE_NAMES, and the Feature list (for mapping
    predictions back with `word_predictions`)."""
    import numpy as np

    features = convert_sentences(
        sentences, label_list, max_seq_length, tokenizer
    )
    arrays = {
        name: np.array([getattr(f, name) for f in features], np.int32).reshape(
            len(features), max_seq_length
        )
        for name in FEATURE_NAMES
    }
    return arrays, features


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
    space, or a tab where the line's columns are tab-separated, then the
    tag); blank lines as they were. A -DOCSTART- line gets an `O` column
    too, so that every non-blank line has the same number of columns, as
    the CoNLL conlleval script requires of its input. The script compares
    the tags as strings: an IOB1 file's predictions are written as IOB1.

    Args:
      conll: the ConllFile.
      predicted_tags: per sentence, one tag per word (`word_predictions`).

    Returns:
      list of str, one per line of the input file.
    """

    def appended(line, tag):
        line = line.rstrip()
        return line + ("\t" if "\t" in line else " ") + tag

    lines = list(conll.lines)
    words = {n for s in conll.sentences for n in s.line_numbers}
    for i, line in enumerate(lines):
        # A JSON Lines sentence's word may be -DOCSTART- (HF's conll2003).
        if i + 1 not in words and line.split()[:1] == [DOCSTART]:
            lines[i] = appended(line, OUTSIDE)
    for sentence, tags in zip(conll.sentences, predicted_tags, strict=True):
        if conll.iob1:
            tags = iob2_to_iob1(tags)
        for number, tag in zip(sentence.line_numbers, tags, strict=True):
            lines[number - 1] = appended(lines[number - 1], tag)
    return lines
