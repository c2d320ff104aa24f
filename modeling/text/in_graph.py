"""In-graph BERT tokenization giving the same ids as `FullTokenizer`.

`InGraphTokenizer` runs the original's basic tokenization as TensorFlow
string ops and WordPiece as tensorflow-text's `FastWordpieceTokenizer`, so
it works in `tf.data` pipelines and inside a SavedModel. `InputPacker` then
builds `[CLS] A [SEP] B [SEP]` model inputs with the original's truncation.

tensorflow-text's `FastBertTokenizer` alone disagrees with the original:
its uncased normalizer is NFKC-like with case folding ("ß" -> "ss", "™" ->
"tm", full-width letters -> ASCII, "…" -> "..."), it splits on control and
zero-width characters that the original deletes, it ignores the 200-char
word limit and uses its ICU's Unicode tables. So the basic steps here are
regexes built from the very code point tables of modeling/text/tokenization.py
(the running Python's Unicode 14 data), in the original's order:

  1. drop invalid UTF-8 bytes (as `convert_to_unicode`);
  2. delete control/format characters, map whitespace to " ";
  3. space out CJK ideographs;
  4. uncased: full lower-casing (`tf.strings.lower`, which applies the
     final-sigma rule as Python does), NFD, delete category Mn;
  5. space out punctuation, split on spaces;
  6. words over 200 characters become "[UNK]";
  7. WordPiece of each word (`no_pretokenization=True`).

Rows of printable ASCII (plus tab, LF, CR), nearly all English text, skip
this and go through one `FastBertTokenizer` op (after ASCII lower-casing),
whose rules agree with the original's there: the batch is partitioned, both
parts tokenized and the rows put back in order.

Known residue: `tf.strings.lower` misses 40 upper-case letters of Unicode
14 (Glagolitic, Latin Extended-D, Vithkuqi) that its ICU lacks; they are
mapped explicitly, in a branch that runs only when a batch holds one. 20
code points unassigned in Python's Unicode 14 that ICU's NFD decomposes
(Unicode 16 scripts) could differ only inside words that hold them, which
are "[UNK]" under any vocabulary without those scripts (a vocabulary with
them is refused). A capital sigma right beside one of about 410 letters or
marks new in Unicode 14 may lower to the other sigma (ICU's casing context
does not know them): a different id only next to such characters, which
real text essentially never holds. tests/text_graph_test.py checks every
code point.

One module, over 500 lines: the in-graph twin of text/tokenization.py, of the
features' packing and of the long-input windows, compared id for id by the
tests.
"""

import tensorflow as tf
import tensorflow_text as tf_text

from modeling.text import tokenization
from modeling.text import vocabulary

# One UTF-8 code point takes at most 4 bytes, so words of at most 200
# code points stay below FastWordpieceTokenizer's byte limit.
_BYTES_PER_CHAR = 4

# Rows the fast path takes: printable ASCII plus tab, LF and CR.
_PRINTABLE_ASCII = r"[\t\n\r\x20-\x7e]*"


def _re2_class(ranges, negate=False):
    """Returns an RE2 character class for code point ranges."""
    parts = []
    for lo, hi in ranges:
        if 0xD800 <= lo and hi <= 0xDFFF:
            continue  # Surrogates never occur in valid UTF-8.
        part = f"\\x{{{lo:x}}}"
        parts.append(part if lo == hi else f"{part}-\\x{{{hi:x}}}")
    return "[" + ("^" if negate else "") + "".join(parts) + "]"


def _split_space_ranges(tables):
    """Whitespace that `str.split()` splits on after `_clean_text`, but " ".

    That is `_clean_text`'s (space, \\t\\n\\r, Zs) plus U+2028 and U+2029,
    which the original leaves in place and its whitespace split splits on.
    " " itself is left out: rewriting it to itself would only cost time.
    """
    cps = {cp for lo, hi in tables.ranges["space"] for cp in range(lo, hi + 1)}
    # Python's last whitespace character is U+3000.
    cps.update(cp for cp in range(0x3001) if chr(cp).isspace())
    cps.discard(ord(" "))
    return tokenization._to_ranges(sorted(cps))


def split_words(text):
    """Python's `str.split()` in the graph: [B] strings -> ragged [B, (W)]
    words, split at every character `str.isspace()` is true of (U+3000,
    U+00A0, U+2028, U+001C, ... as well as ASCII's), as the tokenizer's
    whitespace split and the LiteRT servers split words."""
    space = [cp for cp in range(0x3001) if chr(cp).isspace() and cp != 0x20]
    pattern = _re2_class(tokenization._to_ranges(space)) + "+"
    return tf.strings.split(tf.strings.regex_replace(text, pattern, " "))


# Upper-case letters of Unicode 14 that TensorFlow 2.21's ICU does not
# lower-case (Glagolitic, Latin Extended-D, Vithkuqi); found by comparing
# every code point, a comparison tests/text_graph_test.py repeats.
_UNICODE14_UPPER = [0x2C2F, 0xA7C0, 0xA7D0, 0xA7D6, 0xA7D8] + [
    cp
    for cp in range(0x10570, 0x10596)
    if cp not in (0x1057B, 0x1058B, 0x10593)
]

# Code points unassigned in Python 3.11's Unicode 14 that ICU's NFD
# decomposes (Unicode 16 scripts), with the code points they decompose to.
_ICU_ONLY_DECOMPOSED = [
    0x105C9, 0x105E4, 0x105D2, 0x105DA, 0x11382, 0x11383, 0x11384,
    0x11385, 0x1138B, 0x1138E, 0x11390, 0x11391, 0x113B8, 0x113BB,
    0x113C2, 0x113C5, 0x113C7, 0x113C8, 0x113C9, 0x1611E, 0x1611F,
    0x16120, 0x16121, 0x16122, 0x16123, 0x16124, 0x16125, 0x16126,
    0x16127, 0x16128, 0x16129, 0x16D63, 0x16D67, 0x16D68, 0x16D69,
    0x16D6A,
]  # fmt: skip


def _wordpiece_vocab(tokens, vocab_file):
    """Returns the tokens for FastWordpieceTokenizer, ids kept by position.

    The original's dict gives a duplicated token the id of its last line
    and no string maps to a blank line's "", and its WordPiece sees words,
    which hold no whitespace, so a token such as "new york" is never
    produced (FastWordpieceTokenizer would match it across the space):
    earlier duplicates, blanks and tokens with whitespace become
    placeholders that no word can produce (a word holds no "[", a
    punctuation character, unless it is one).
    """
    last = {token: i for i, token in enumerate(tokens)}
    out = []
    for i, token in enumerate(tokens):
        if token == "" or last[token] != i or any(c.isspace() for c in token):
            token = f"[unreachable-line-{i + 1}]"
        out.append(token)
    for token in out:
        if any(ord(c) in _ICU_ONLY_DECOMPOSED for c in token):
            raise ValueError(
                f"{vocab_file}: token {token!r} holds a character that "
                "Python's Unicode 14 leaves unassigned but ICU decomposes; "
                "InGraphTokenizer cannot match FullTokenizer on it."
            )
    return out


class InGraphTokenizer(tf.Module):
    """`FullTokenizer` as TensorFlow ops: the same ids, in graph.

    Usable eagerly, in `tf.data.Dataset.map` and in a SavedModel (it is a
    `tf.Module`; its vocabulary lives in the FastWordpieceTokenizer model
    buffer, so the saved model needs no vocab file).

    Args:
      vocab_file: str, the vocabulary (one token per line; id = line index),
        or the list of tokens itself.
      do_lower_case: bool, as `FullTokenizer`'s.
      max_input_chars_per_word: int, longer words become `unk_token`.
      unk_token: str, must be in the vocabulary.
    """

    def __init__(
        self,
        vocab_file,
        do_lower_case=True,
        max_input_chars_per_word=200,
        unk_token=vocabulary.UNK_TOKEN,
        name=None,
    ):
        super().__init__(name=name)
        self.vocab_file = vocabulary.describe(vocab_file)
        self.do_lower_case = do_lower_case
        self.max_input_chars_per_word = max_input_chars_per_word
        self.unk_token = unk_token
        tokens = vocabulary.read_vocab_lines(vocab_file)
        vocab = vocabulary.load_vocab(vocab_file)
        vocabulary.check_vocab_contents(vocab, vocab_file, do_lower_case)
        vocabulary.require_special_tokens(vocab, [unk_token], "WordPiece")
        self.vocab_size = len(tokens)
        wordpiece_vocab = _wordpiece_vocab(tokens, self.vocab_file)
        self._wordpiece = tf_text.FastWordpieceTokenizer(
            vocab=wordpiece_vocab,
            unknown_token=unk_token,
            max_bytes_per_word=_BYTES_PER_CHAR * max_input_chars_per_word,
            token_out_type=tf.int32,
            no_pretokenization=True,
        )
        # On ASCII a byte is a character, so the byte limit is the original's
        # character limit (a longer word is one unk_token).
        self._ascii_tokenizer = tf_text.FastBertTokenizer(
            vocab=wordpiece_vocab,
            unknown_token=unk_token,
            max_bytes_per_word=max_input_chars_per_word,
            token_out_type=tf.int32,
        )
        tables = tokenization._CharTables.get()
        self._patterns = {
            "delete": _re2_class(tables.ranges["delete"]) + "+",
            "space": _re2_class(_split_space_ranges(tables)) + "+",
            "cjk": _re2_class(tables.ranges["cjk"]),
            "mark": _re2_class(tables.ranges["mark"]) + "+",
            "punct": _re2_class(tables.ranges["punct"]),
            "unicode14_upper": "(?s).*"
            + _re2_class([(cp, cp) for cp in _UNICODE14_UPPER])
            + ".*",
        }

    def tokenize(self, text):
        """Tokenizes text into WordPiece ids.

        Args:
          text: string Tensor of shape [] or [batch_size] (UTF-8).

        Returns:
          int32 ids: a Tensor of shape [num_tokens] for a scalar input, else
          a RaggedTensor of shape [batch_size, (num_tokens)].
        """
        text = tf.convert_to_tensor(text, tf.string)
        if text.shape.rank == 0:
            return self.tokenize(text[tf.newaxis])[0]
        if text.shape.rank != 1:
            raise ValueError(
                f"InGraphTokenizer.tokenize takes a string Tensor of shape "
                f"[] or [batch_size], got shape {text.shape}"
            )
        # Rows of printable ASCII (most English text) take a fast path: one
        # FastBertTokenizer op, whose rules agree with the original's there.
        is_ascii = tf.cast(
            tf.strings.regex_full_match(text, _PRINTABLE_ASCII), tf.int32
        )
        rows = tf.dynamic_partition(text, is_ascii, 2)
        positions = tf.dynamic_partition(tf.range(tf.size(text)), is_ascii, 2)
        ids = tf.concat(
            [self._tokenize_general(rows[0]), self._tokenize_ascii(rows[1])],
            axis=0,
        )
        order = tf.math.invert_permutation(tf.concat(positions, axis=0))
        return tf.gather(ids, order)

    def _tokenize_ascii(self, text):
        """Tokenizes rows of printable ASCII, tab, LF and CR only."""
        if self.do_lower_case:
            text = tf.strings.lower(text)  # NFD and Mn: no-ops on ASCII.
        return self._ascii_tokenizer.tokenize(text)

    def _tokenize_general(self, text):
        """Tokenizes any rows: the basic steps as regexes, then WordPiece."""
        # [batch_size, (words), (pieces)] -> [batch_size, (tokens)].
        return self.tokenize_words(text).merge_dims(1, 2)

    __call__ = tokenize

    def tokenize_words(self, text):
        """Tokenizes text into WordPiece ids grouped by word.

        The words are BasicTokenizer's; their pieces concatenated are
        `tokenize`'s ids. Every row takes the general path (the ASCII fast
        path's op does not report word boundaries).

        Args:
          text: string Tensor of shape [batch_size] (UTF-8).

        Returns:
          int32 RaggedTensor [batch_size, (words), (pieces)].
        """
        return self.tokenize_basic_tokens(self.basic_tokens(text))

    def tokenize_basic_tokens(self, tokens):
        """WordPiece ids of `basic_tokens`' output (a RaggedTensor [...,
        (words)] of strings), the long ones as `unk_token`: [...,
        (words), (pieces)], for a caller that needs the tokens too."""
        return self._wordpiece.tokenize(self._long_as_unk(tokens))

    def tokenize_text_words(self, text):
        """WordPiece ids grouped by whitespace word, as
        `FullTokenizer.tokenize_words` groups them: where a long text may be
        cut between windows (modeling/data/long_inputs.py).

        Args:
          text: string Tensor of shape [batch_size] (UTF-8).

        Returns:
          int32 RaggedTensor [batch_size, (words), (pieces)], a word
          possibly without pieces.
        """
        words = tf.strings.split(self._clean(text))
        pieces = self.tokenize_words(words.flat_values).merge_dims(1, 2)
        return words.with_flat_values(pieces)

    def _clean(self, text):
        """The original's cleaning: invalid bytes, control characters and
        whitespace, CJK characters spaced out."""
        p = self._patterns
        # Invalid bytes vanish, as bytes.decode("utf-8", "ignore").
        text = tf.strings.unicode_transcode(
            text, "UTF-8", "UTF-8", errors="ignore"
        )
        text = tf.strings.regex_replace(text, p["delete"], "")
        text = tf.strings.regex_replace(text, p["space"], " ")
        return tf.strings.regex_replace(text, p["cjk"], r" \0 ")

    def split_words(self, text):
        """Runs the original's BasicTokenizer on a batch of strings.

        Args:
          text: string Tensor of shape [batch_size].

        Returns:
          string RaggedTensor [batch_size, (words)]: BasicTokenizer's tokens,
          words over `max_input_chars_per_word` replaced by `unk_token`.
        """
        return self._long_as_unk(self.basic_tokens(text))

    def _long_as_unk(self, words):
        """Tokens over max_input_chars_per_word as `unk_token`."""
        flat = words.flat_values
        too_long = (
            tf.strings.length(flat, unit="UTF8_CHAR")
            > self.max_input_chars_per_word
        )
        flat = tf.where(too_long, self.unk_token, flat)
        # "[UNK]" is a whole vocabulary entry, so WordPiece maps it to one id.
        return words.with_flat_values(flat)

    def basic_tokens(self, text):
        """BasicTokenizer's tokens of a batch of strings, long ones as they
        are (`split_words` makes those `unk_token`): string RaggedTensor
        [batch_size, (words)]."""
        p = self._patterns
        text = self._clean(text)
        if self.do_lower_case:
            text = self._lower(text)
            text = tf_text.normalize_utf8(text, "NFD")
            text = tf.strings.regex_replace(text, p["mark"], "")
        text = tf.strings.regex_replace(text, p["punct"], r" \0 ")
        return tf.strings.split(text)  # On " ", the only space left.

    def _lower(self, text):
        """Python's str.lower(): ICU full case mapping plus Unicode 14."""

        def lower_unicode14(text):
            for cp in _UNICODE14_UPPER:
                text = tf.strings.regex_replace(
                    text, f"\\x{{{cp:x}}}", chr(cp).lower()
                )
            return text

        rare = tf.strings.regex_full_match(
            text, self._patterns["unicode14_upper"]
        )
        text = tf.cond(
            tf.reduce_any(rare), lambda: lower_unicode14(text), lambda: text
        )
        return tf.strings.lower(text, encoding="utf-8")


def truncated_lengths(len_a, len_b, max_num_tokens):
    """Segment lengths after the original's `truncate_seq_pair`.

    The original pops the last token of the longer segment (of B on a tie)
    until the pair fits. In closed form: A keeps
    min(len_a, max(ceil(max_num_tokens / 2), max_num_tokens - len_b)).

    Args:
      len_a: int Tensor [batch_size], lengths of segment A.
      len_b: int Tensor [batch_size], lengths of segment B.
      max_num_tokens: int, the budget for both segments.

    Returns:
      (keep_a, keep_b), int Tensors like `len_a`.
    """
    fits = len_a + len_b <= max_num_tokens
    half_up = (max_num_tokens + 1) // 2
    keep_a = tf.minimum(len_a, tf.maximum(half_up, max_num_tokens - len_b))
    keep_a = tf.where(fits, len_a, keep_a)
    keep_b = tf.where(fits, len_b, max_num_tokens - keep_a)
    return keep_a, keep_b


def _flat_positions(ids):
    """(row, position in that row) of each value of a RaggedTensor
    [batch_size, (items)], as flat Tensors.

    The ragged helpers below work on these flat values: comparing a ragged
    range with a dense column instead costs a ragged broadcast, about 0.2 s
    of tracing each time (an export traces the packer 8 times)."""
    rows = ids.value_rowids()
    starts = tf.gather(ids.row_starts(), rows)
    return rows, tf.range(tf.size(rows, out_type=rows.dtype)) - starts


def _keep_values(ids, keep, rows):
    """The values of ids where the flat bool `keep` holds, in their rows."""
    lengths = tf.math.unsorted_segment_sum(
        tf.cast(keep, rows.dtype), rows, ids.nrows(out_type=rows.dtype)
    )
    return tf.RaggedTensor.from_row_lengths(
        tf.boolean_mask(ids.values, keep), lengths, validate=False
    )


def head(ids, keep):
    """The first keep[i] items of each row of a RaggedTensor."""
    rows, position = _flat_positions(ids)
    keep = tf.cast(keep, rows.dtype)
    return _keep_values(ids, position < tf.gather(keep, rows), rows)


class InputPacker(tf.Module):
    """Packs token ids into BERT inputs: [CLS] A [SEP] (B [SEP]), padded.

    As the original's `convert_single_example`: a single segment is cut to
    max_seq_length - 2; a pair is truncated by popping from the end of the
    longer segment until it fits max_seq_length - 3; padding is 0.

    Args:
      max_seq_length: int, the length of every output row.
      cls_id: int, the id of "[CLS]".
      sep_id: int, the id of "[SEP]".
    """

    def __init__(self, max_seq_length, cls_id, sep_id, name=None):
        super().__init__(name=name)
        if max_seq_length < 2:
            raise ValueError(
                f"sequence length {max_seq_length}: a row needs at least 2 "
                "positions, for [CLS] and [SEP]"
            )
        self.max_seq_length = max_seq_length
        self.cls_id = cls_id
        self.sep_id = sep_id

    @classmethod
    def from_vocab_file(cls, vocab_file, max_seq_length):
        """Builds a packer with the "[CLS]" and "[SEP]" ids of a vocabulary
        (a file, or the list of tokens)."""
        vocab = vocabulary.load_vocab(vocab_file)
        vocabulary.require_special_tokens(
            vocab, [vocabulary.CLS_TOKEN, vocabulary.SEP_TOKEN], "packing"
        )
        return cls(
            max_seq_length,
            vocab[vocabulary.CLS_TOKEN],
            vocab[vocabulary.SEP_TOKEN],
        )

    def __call__(self, segment_a, segment_b=None, seq_length=None):
        """Packs one or two segments.

        Args:
          segment_a: int RaggedTensor [batch_size, (tokens)], ids of A.
          segment_b: like `segment_a` for B, or None for single segments;
            rows where B is empty are packed like single segments.
          seq_length: int or int32 scalar Tensor, the length of the rows
            of this call; default `max_seq_length`.

        Returns:
          dict with "input_ids", "input_mask" and "segment_ids", each an
          int32 Tensor of shape [batch_size, seq_length].
        """
        if seq_length is None:
            seq_length = self.max_seq_length
        segment_a = tf.cast(segment_a, tf.int32)
        batch_size = segment_a.nrows()
        len_a = tf.cast(segment_a.row_lengths(), tf.int32)
        cls = tf.fill([batch_size, 1], self.cls_id)
        sep = tf.fill([batch_size, 1], self.sep_id)
        if segment_b is None:
            keep_a = tf.minimum(len_a, seq_length - 2)
            pieces = [cls, head(segment_a, keep_a), sep]
            types = [0, 0, 0]
        else:
            if isinstance(seq_length, int) and seq_length < 3:
                # The original's truncation fails there; cut to the width,
                # B and its [SEP] would vanish silently.
                raise ValueError(
                    f"sequence length {seq_length}: a pair needs at least 3 "
                    "positions, for [CLS] and two [SEP]"
                )
            segment_b = tf.cast(segment_b, tf.int32)
            len_b = tf.cast(segment_b.row_lengths(), tf.int32)
            keep_a, keep_b = truncated_lengths(len_a, len_b, seq_length - 3)
            # A row whose B has no tokens is packed as a single segment,
            # as the original does (`if tokens_b:`): no second [SEP], and
            # A keeps seq_length - 2 tokens.
            has_b = len_b > 0
            keep_a = tf.where(has_b, keep_a, tf.minimum(len_a, seq_length - 2))
            b = head(segment_b, keep_b)
            sep_b = tf.ragged.boolean_mask(sep, has_b[:, None])
            pieces = [cls, head(segment_a, keep_a), sep, b, sep_b]
            types = [0, 0, 0, 1, 1]
        ids = tf.concat(pieces, axis=1)
        segments = tf.concat(
            [tf.ones_like(p) * t for p, t in zip(pieces, types)], axis=1
        )
        if isinstance(seq_length, int):
            shape = [None, seq_length]
        else:  # A Tensor: the width is known when the graph runs.
            shape = tf.stack([tf.cast(batch_size, tf.int32), seq_length])
        return {
            "input_ids": ids.to_tensor(0, shape=shape),
            "input_mask": tf.ones_like(ids).to_tensor(0, shape=shape),
            "segment_ids": segments.to_tensor(0, shape=shape),
        }


def _choose(condition, x, y):
    """Rows of ragged x where condition [R], else of y."""
    rows = tf.range(tf.size(condition, out_type=tf.int64), dtype=tf.int64)
    size = tf.cast(x.nrows(), tf.int64)
    return tf.gather(
        tf.concat([x, y], 0), tf.where(condition, rows, size + rows)
    )


def _head_tail(pieces, room, head_tokens):
    """long_inputs.LongInputs._head_tail of each row: a row over room[i]
    keeps its first min(head_tokens, room[i] // 2) pieces and its last ones
    up to room[i]."""
    length = pieces.row_lengths()
    kept_head = tf.minimum(tf.cast(head_tokens, tf.int64), room // 2)
    tail_start = length - (room - kept_head)
    rows, position = _flat_positions(pieces)
    keep = (
        tf.gather(length <= room, rows)
        | (position < tf.gather(kept_head, rows))
        | (position >= tf.gather(tail_start, rows))
    )
    return _keep_values(pieces, keep, rows)


def word_windows(piece_counts, max_pieces, overlap):
    """long_inputs.word_windows for a batch of texts at once.

    Args:
      piece_counts: int64 RaggedTensor [B, (words)], each <= max_pieces.
      max_pieces: int64 [B], the most pieces a window of each text holds.
      overlap: int64 [B] (or an int), the pieces a window may share with
        the previous one.

    Returns:
      (text, start, end) int64 [R]: each window's text and word range, the
      windows of a text consecutive and in order; a text without words has
      one empty window.
    """
    words = piece_counts.row_lengths()
    # One column more than the longest text: a batch of texts without any
    # word (all "" or blank) still has a column to gather from.
    counts = tf.pad(piece_counts.to_tensor(0), [[0, 0], [0, 1]])
    # cum[t, w]: the pieces of text t before word w; flat past its end.
    cum = tf.concat([tf.zeros_like(counts[:, :1]), tf.cumsum(counts, 1)], 1)
    texts = tf.shape(counts, out_type=tf.int64)[0]

    def at(positions):
        return tf.gather(cum, positions, batch_dims=1)

    def search(values, side):
        return tf.searchsorted(
            cum, values[:, None], side=side, out_type=tf.int64
        )[:, 0]

    def step(i, start, active, starts, ends, used):
        # The most words from `start` that fit (at least one).
        end = search(at(start) + max_pieces, "right") - 1
        end = tf.minimum(tf.maximum(end, start + 1), words)
        starts, ends, used = (
            starts.write(i, start),
            ends.write(i, end),
            used.write(i, active),
        )
        # The next window starts at the first word after `start` from
        # which at most `overlap` pieces reach `end`.
        following = search(at(end) - overlap, "left")
        # ... keeping room for word `end`: every window takes a new word.
        after = tf.minimum(end + 1, words)
        following = tf.maximum(
            following, search(at(after) - max_pieces, "left")
        )
        following = tf.maximum(following, start + 1)
        active = active & (end < words)
        return (
            i + 1,
            tf.where(active, following, start),
            active,
            starts,
            ends,
            used,
        )

    def windows():
        return _windows_loop(texts, step)

    none = tf.zeros([0], tf.int64)
    # A batch without texts has no windows (and nothing to search).
    return tf.cond(texts > 0, windows, lambda: (none, none, none))


def _windows_loop(texts, step):
    """word_windows' loop: `step` once per window of the longest text."""
    arrays = [
        tf.TensorArray(dtype, 0, dynamic_size=True)
        for dtype in (tf.int64, tf.int64, tf.bool)
    ]
    _, _, _, starts, ends, used = tf.while_loop(
        lambda i, start, active, *_: tf.reduce_any(active),
        step,
        (
            tf.constant(0),
            tf.zeros([texts], tf.int64),
            tf.ones([texts], tf.bool),
            *arrays,
        ),
    )
    # [windows, B] -> text-major order.
    used = tf.transpose(used.stack())
    text = tf.broadcast_to(tf.range(texts)[:, None], tf.shape(used, tf.int64))
    text = tf.boolean_mask(text, used)
    start = tf.boolean_mask(tf.transpose(starts.stack()), used)
    end = tf.boolean_mask(tf.transpose(ends.stack()), used)
    return text, start, end


def long_input_windows(words_a, words_b, max_seq_length, long_inputs):
    """long_inputs.LongInputs.windows for a batch, in the graph: the pieces
    of each window of each text (pair), for `InputPacker`.

    Args:
      words_a, words_b: int RaggedTensor [B, (words), (pieces)]
        (`InGraphTokenizer.tokenize_text_words`); words_b None for single
        texts.
      max_seq_length: int.
      long_inputs: a long_inputs.LongInputs, head_tail or chunks.

    Returns:
      (segment_a, segment_b or None, text): int RaggedTensors
      [R, (pieces)] and int64 [R], each window's text, a text's windows
      consecutive and in order (head_tail: one per text).
    """
    single = words_b is None
    pieces_a = words_a.merge_dims(1, 2)
    length_a = pieces_a.row_lengths()
    if single:
        words_b = tf.RaggedTensor.from_row_lengths(
            words_a.values[:0], tf.zeros_like(length_a)
        )
    pieces_b = words_b.merge_dims(1, 2)
    length_b = pieces_b.row_lengths()
    has_b = length_b > 0
    room = tf.where(has_b, max_seq_length - 3, max_seq_length - 2)
    room = tf.cast(room, tf.int64)
    # The shorter text is kept (at most half of the room, cut from its
    # end), the longer one (b on a tie) is cut or windowed in the rest.
    a_longer = length_a > length_b
    keep = tf.minimum(tf.where(a_longer, length_b, length_a), room // 2)
    shorter = head(_choose(a_longer, pieces_b, pieces_a), keep)
    budget = room - keep
    longer = _choose(a_longer, words_a, words_b)
    if long_inputs.strategy == "head_tail":
        window = _head_tail(
            longer.merge_dims(1, 2), budget, long_inputs.head_tokens
        )
        text = tf.range(tf.size(budget, out_type=tf.int64), dtype=tf.int64)
    else:
        # A word longer than a window is cut to it.
        word_budget = tf.gather(budget, longer.value_rowids())
        cut = head(longer.values, word_budget)
        counts = longer.with_values(cut.row_lengths())
        # long_inputs.pair_overlap for pairs.
        stride = tf.constant(long_inputs.chunk_stride, tf.int64)
        overlap = tf.where(has_b, tf.minimum(stride, budget // 2), stride)
        text, start, end = word_windows(counts, budget, overlap)
        first = tf.gather(longer.row_starts(), text)
        word_ids = tf.ragged.range(first + start, first + end)
        window = tf.gather(cut, word_ids).merge_dims(1, 2)
    shorter = tf.gather(shorter, text)
    a_longer = tf.gather(a_longer, text)
    segment_a = _choose(a_longer, window, shorter)
    if single:
        return segment_a, None, text
    return segment_a, _choose(a_longer, shorter, window), text


class TextPreprocessor(tf.Module):
    """Raw strings -> the original's features, in graph: the one place the
    in-graph tokenizer and packer are made (every serving export, the Hub
    preprocessing model and the Keras BertPreprocessor build them here).

    `InGraphTokenizer` gives FullTokenizer's ids and `InputPacker` packs
    them as `convert_single_example` does.

    Args:
      vocab_file: str, the vocabulary (stored inside the SavedModel), or
        its tokens in id order.
      do_lower_case: bool.
      max_seq_length: int.
    """

    def __init__(self, vocab_file, do_lower_case, max_seq_length):
        super().__init__(name="text_preprocessor")
        self.vocab_file = vocab_file
        self.do_lower_case = do_lower_case
        self.tokenizer = InGraphTokenizer(vocab_file, do_lower_case)
        self.packer = InputPacker.from_vocab_file(vocab_file, max_seq_length)

    def __call__(self, text_a, text_b=None):
        """string [batch] (x2) -> dict of int32 [batch, max_seq_length]."""
        segment_a = self.tokenizer.tokenize(text_a)
        segment_b = None
        if text_b is not None:
            segment_b = self.tokenizer.tokenize(text_b)
        return self.packer(segment_a, segment_b)

    def windows(self, long_inputs, text_a, text_b=None):
        """Texts (pairs) [batch] -> the features of their windows as
        `long_inputs` (head_tail or chunks) cuts them, as run_classifier
        writes them (classifier_data.convert_example_windows): (dict of
        int32 [R, max_seq_length], int64 [R] each window's text, a text's
        windows consecutive)."""
        words_b = None
        if text_b is not None:
            words_b = self.tokenizer.tokenize_text_words(text_b)
        segment_a, segment_b, text = long_input_windows(
            self.tokenizer.tokenize_text_words(text_a),
            words_b,
            self.packer.max_seq_length,
            long_inputs,
        )
        return self.packer(segment_a, segment_b), text
