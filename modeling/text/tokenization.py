"""Tokenization classes of the original BERT release, token for token.

`FullTokenizer` runs `BasicTokenizer` (clean text, space out CJK characters,
whitespace split, lower-case and strip accents, split punctuation) and then
`WordpieceTokenizer` (greedy longest-match-first with `##` continuations).
The rules are those of google-research/bert `tokenization.py`;
tests/tokenization_test.py checks them on the original's own outputs.

The implementation differs only in speed: character classes are precomputed
into regular expressions and whole-word results are cached, which is exact
because every step after the whitespace split depends on the word alone.

Vocabulary files are read as UTF-8 on every platform and checked at load
(see modeling/text/vocabulary.py): bad bytes are an error naming the file and
line; duplicate tokens, missing special tokens and a casing that disagrees
with `do_lower_case` are logged as warnings.

One module, over 500 lines: the original's tokenization.py, kept as one
file as the original's users know it.
"""

import json
import os
import re
import unicodedata

from modeling import errors
from modeling.text import vocabulary

# Re-exported: the original's module defines load_vocab, and users import it
# from here.
load_vocab = vocabulary.load_vocab
UNK_TOKEN = vocabulary.UNK_TOKEN

# The CJK Unified Ideographs blocks, as in the original. Hangul, Hiragana
# and Katakana are not in them: those scripts are written with spaces.
CJK_RANGES = (
    (0x4E00, 0x9FFF),
    (0x3400, 0x4DBF),
    (0x20000, 0x2A6DF),
    (0x2A700, 0x2B73F),
    (0x2B740, 0x2B81F),
    (0x2B820, 0x2CEAF),
    (0xF900, 0xFAFF),
    (0x2F800, 0x2FA1F),
)

# ASCII characters the original treats as punctuation although Unicode
# puts some of them in S* categories ("^", "$", "`", ...).
ASCII_PUNCTUATION_RANGES = ((33, 47), (58, 64), (91, 96), (123, 126))

# Caches of whole-word results are cleared when they reach this size, so
# memory stays bounded (about 50 MB) on unbounded input; natural text's
# frequent words refill them at once.
_MAX_CACHE_SIZE = 250_000

_PRINTABLE_ASCII = re.compile("[\t\n\r\x20-\x7e]*")

_LOWER_MODELS = (
    "uncased_L-24_H-1024_A-16",
    "uncased_L-12_H-768_A-12",
    "multilingual_L-12_H-768_A-12",
    "chinese_L-12_H-768_A-12",
)
_CASED_MODELS = (
    "cased_L-12_H-768_A-12",
    "cased_L-24_H-1024_A-16",
    "multi_cased_L-12_H-768_A-12",
)


def validate_case_matches_checkpoint(do_lower_case, init_checkpoint):
    """Checks whether the casing config agrees with the checkpoint's name.

    As the original, it knows only the released checkpoints' names.

    Args:
      do_lower_case: bool, the `--do_lower_case` flag.
      init_checkpoint: str, e.g. ".../uncased_L-12_H-768_A-12/bert_model.ckpt".

    Raises:
      ValueError: the checkpoint is a known cased model and `do_lower_case`
        is True, or a known uncased model and it is False.
    """
    if not init_checkpoint:
        return
    m = re.match("^.*?([A-Za-z0-9_-]+)/bert_model.ckpt", init_checkpoint)
    # A released model's folder itself (accepted here as a checkpoint).
    model_name = (
        m.group(1) if m else os.path.basename(init_checkpoint.rstrip("/"))
    )
    if model_name in _LOWER_MODELS and not do_lower_case:
        flags = ("False", "lowercased", "True")
    elif model_name in _CASED_MODELS and do_lower_case:
        flags = ("True", "cased", "False")
    else:
        return
    actual_flag, case_name, opposite_flag = flags
    raise ValueError(
        f"You passed in `--do_lower_case={actual_flag}` with "
        f"`--init_checkpoint={init_checkpoint}`. However, `{model_name}` "
        f"seems to be a {case_name} model, so you should pass in "
        f"`--do_lower_case={opposite_flag}` so that the fine-tuning matches "
        "how the model was pre-training. If this error is wrong, please "
        "just comment out this check."
    )


def convert_to_unicode(text):
    """Returns `text` as str; bytes are decoded as UTF-8, ignoring errors."""
    if isinstance(text, str):
        return text
    if isinstance(text, bytes):
        return text.decode("utf-8", "ignore")
    raise ValueError(f"Unsupported string type: {type(text)}")


def printable_text(text):
    """Returns `text` as a str fit for printing or logging."""
    return convert_to_unicode(text)


def convert_by_vocab(vocab, items):
    """Maps each item through `vocab`; a missing item raises KeyError."""
    return [vocab[item] for item in items]


def convert_tokens_to_ids(vocab, tokens):
    return convert_by_vocab(vocab, tokens)


def convert_ids_to_tokens(inv_vocab, ids):
    return convert_by_vocab(inv_vocab, ids)


def whitespace_tokenize(text):
    """Strips and splits `text` on whitespace (Python's `str.split()`)."""
    return text.split()


def is_empty_text(text):
    """Whether `text` gives the tokenizer no word: empty or whitespace only,
    also once its clean step has deleted the control characters, U+0000 and
    U+FFFD ("\\x00\\x01" is as empty as "  "). The one rule input readers
    refuse an empty text by (a row would be `[CLS] [SEP]` alone)."""
    return _CharTables.get().word_char.search(text) is None


def _is_whitespace(char):
    """Whether `char` is whitespace for `_clean_text` (space, \\t\\n\\r, Zs)."""
    if char in " \t\n\r":
        return True
    return unicodedata.category(char) == "Zs"


def _is_control(char):
    """Whether `char` is a control character (Cc or Cf, except \\t\\n\\r)."""
    if char in "\t\n\r":
        return False
    return unicodedata.category(char) in ("Cc", "Cf")


def _is_punctuation(char):
    """Whether `char` is punctuation (ASCII non-alphanumerics or any P*)."""
    cp = ord(char)
    if any(lo <= cp <= hi for lo, hi in ASCII_PUNCTUATION_RANGES):
        return True
    return unicodedata.category(char).startswith("P")


def _is_chinese_char(cp):
    """Whether the code point `cp` is in a CJK Unified Ideographs block."""
    return any(lo <= cp <= hi for lo, hi in CJK_RANGES)


def _char_class(ranges):
    """Returns a regex character class "[...]" matching the code points."""
    parts = []
    for lo, hi in ranges:
        lo_s, hi_s = re.escape(chr(lo)), re.escape(chr(hi))
        parts.append(lo_s if lo == hi else f"{lo_s}-{hi_s}")
    return "[" + "".join(parts) + "]"


def _to_ranges(code_points):
    ranges = []
    for cp in code_points:
        if ranges and ranges[-1][1] == cp - 1:
            ranges[-1][1] = cp
        else:
            ranges.append([cp, cp])
    return ranges


# The scan's result for the Unicode versions of the supported Pythons
# (unicodedata.unidata_version), shipped: scanning all 1.1M code points
# takes 0.14 s, most of a server's start (modeling/tasks/lite.py).
# tests/tokenization_test.py checks the entry of the running Python
# against the scan; another version is scanned.
_RANGES_FILE = os.path.join(os.path.dirname(__file__), "unicode_ranges.json")


def scan_unicode_ranges():
    """{"delete", "space", "punct", "mark": [[first, last], ...]}: the code
    points `_clean_text` drops, maps to a space, splits as punctuation and
    strips as accents, from this Python's unicodedata."""
    found = {"delete": [], "space": [], "punct": [], "mark": []}
    for cp in range(0x110000):
        char = chr(cp)
        cat = unicodedata.category(char)
        if cp in (0, 0xFFFD) or (cat in ("Cc", "Cf") and char not in "\t\n\r"):
            found["delete"].append(cp)
        elif char in " \t\n\r" or cat == "Zs":
            found["space"].append(cp)
        if cat[0] == "P" or (cp < 128 and _is_punctuation(char)):
            found["punct"].append(cp)
        if cat == "Mn":
            found["mark"].append(cp)
    return {k: _to_ranges(v) for k, v in found.items()}


def _unicode_ranges():
    """scan_unicode_ranges(), from the shipped file when it has this
    Python's Unicode version."""
    try:
        with open(_RANGES_FILE, encoding="utf-8") as f:
            shipped = json.load(f)
    except FileNotFoundError:
        shipped = {}
    ranges = shipped.get(unicodedata.unidata_version)
    return dict(ranges) if ranges else scan_unicode_ranges()


class _CharTables:
    """Code point ranges and compiled regexes of the character classes.

    Built once per process by one scan of every code point (about 0.5 s),
    from the same rules as the predicates above, so they agree with them by
    construction. modeling/text/in_graph.py builds its in-graph regexes from
    the same ranges.

    Attributes:
      ranges: dict name -> list of [first, last] code point ranges, for
        "delete" (dropped by `_clean_text`), "space" (mapped to " "),
        "cjk", "punct" and "mark" (category Mn, stripped with accents).
    """

    _instance = None

    def __init__(self):
        self.ranges = _unicode_ranges()
        self.ranges["cjk"] = [list(r) for r in CJK_RANGES]
        classes = {k: _char_class(v) for k, v in self.ranges.items()}
        self.delete = re.compile(classes["delete"] + "+")
        # A character that `BasicTokenizer.split_words` keeps in a word:
        # neither deleted by the clean step nor whitespace (what `\s` and
        # str.split() take as such: the spaces cleaning makes included).
        self.word_char = re.compile(f"[^{classes['delete'][1:-1]}\\s]")
        self.space = re.compile(classes["space"])
        self.cjk = re.compile(classes["cjk"])
        punct = classes["punct"]
        self.punct_split = re.compile(f"{punct}|[^{punct[1:-1]}]+")
        self.mark = re.compile(classes["mark"] + "+")

    @classmethod
    def get(cls):
        if cls._instance is None:
            cls._instance = cls()
        return cls._instance


class BasicTokenizer:
    """Runs basic tokenization (punctuation splitting, lower casing, etc.)."""

    def __init__(self, do_lower_case=True):
        """Constructs a BasicTokenizer.

        Args:
          do_lower_case: Whether to lower case the input (and strip accents).
        """
        self.do_lower_case = do_lower_case
        self._tables = _CharTables.get()
        self._cache = {}
        self._cached_case = do_lower_case

    def tokenize(self, text):
        """Tokenizes a piece of text."""
        tokens = []
        for word in self.split_words(text):
            tokens.extend(self.tokenize_word(word))
        return tokens

    def split_words(self, text):
        """Cleans `text`, spaces out CJK characters and splits on whitespace.

        Args:
          text: str or UTF-8 bytes.

        Returns:
          A list of str "words"; `tokenize_word` of each, concatenated, is
          `tokenize(text)`.
        """
        text = convert_to_unicode(text)
        if not _PRINTABLE_ASCII.fullmatch(text):
            # Printable ASCII, tab and newlines need no cleaning: split()
            # treats tab and newlines as the spaces cleaning makes them.
            text = self._clean_text(text)
        # This was added on November 1st, 2018 for the multilingual and
        # Chinese models. It also applies to the English models, though
        # their training data held few Chinese characters.
        if not text.isascii():
            text = self._tokenize_chinese_chars(text)
        return text.split()

    def tokenize_word(self, word):
        """Lower-cases, strips accents and splits punctuation of one word.

        Args:
          word: str without whitespace, an item of `split_words`.

        Returns:
          A tuple of str tokens (cached per word).
        """
        if self.do_lower_case != self._cached_case:
            # The original reads do_lower_case on every call.
            self._cache, self._cached_case = {}, self.do_lower_case
        tokens = self._cache.get(word)
        if tokens is None:
            if len(self._cache) >= _MAX_CACHE_SIZE:
                self._cache.clear()
            tokens = self._tokenize_word_uncached(word)
            self._cache[word] = tokens
        return tokens

    def _tokenize_word_uncached(self, word):
        text = word
        if self.do_lower_case:
            text = self._run_strip_accents(text.lower())
        pieces = self._run_split_on_punc(text)
        # Re-join and split again, as the original, in case lower() or NFD
        # produced whitespace or an empty piece.
        return tuple(" ".join(pieces).split())

    def _run_strip_accents(self, text):
        """Strips accents: NFD, then drops nonspacing marks (category Mn)."""
        if text.isascii():
            return text  # NFD leaves ASCII unchanged and ASCII has no Mn.
        text = unicodedata.normalize("NFD", text)
        return self._tables.mark.sub("", text)

    def _run_split_on_punc(self, text):
        """Makes each punctuation character its own piece."""
        return self._tables.punct_split.findall(text)

    def _is_chinese_char(self, cp):
        """Whether the code point `cp` is a CJK character (the original's
        method, which code built on it calls)."""
        return _is_chinese_char(cp)

    def _tokenize_chinese_chars(self, text):
        """Adds whitespace around any CJK character."""
        return self._tables.cjk.sub(r" \g<0> ", text)

    def _clean_text(self, text):
        """Deletes invalid and control characters, maps whitespace to " "."""
        text = self._tables.delete.sub("", text)
        return self._tables.space.sub(" ", text)


class WordpieceTokenizer:
    """Runs WordPiece tokenization."""

    def __init__(
        self, vocab, unk_token=UNK_TOKEN, max_input_chars_per_word=200
    ):
        self.vocab = vocab
        self.unk_token = unk_token
        self.max_input_chars_per_word = max_input_chars_per_word
        self._refresh()

    def _refresh(self):
        """The longest candidates worth a lookup (a first piece as it is, a
        later one after "##"), and an empty cache: again when the
        vocabulary's size changes (the original reads `vocab` live)."""
        vocab = self.vocab
        self._vocab_size = len(vocab)
        self._max_first_chars = max((len(t) for t in vocab), default=0)
        self._max_piece_chars = max(
            (len(t) - 2 for t in vocab if t.startswith("##")), default=0
        )
        self._cache = {}

    def tokenize(self, text):
        """Tokenizes a piece of text into its word pieces.

        This uses a greedy longest-match-first algorithm to perform
        tokenization using the given vocabulary.

        For example:
          input = "unaffable"
          output = ["un", "##aff", "##able"]

        Args:
          text: A single token or whitespace separated tokens. This should
            have already been passed through `BasicTokenizer`.

        Returns:
          A list of wordpiece tokens.
        """
        output_tokens = []
        for token in whitespace_tokenize(convert_to_unicode(text)):
            output_tokens.extend(self.tokenize_word(token))
        return output_tokens

    def tokenize_word(self, token):
        """Returns a tuple of the word pieces of one whitespace-free token."""
        if len(self.vocab) != self._vocab_size:
            self._refresh()
        pieces = self._cache.get(token)
        if pieces is None:
            if len(self._cache) >= _MAX_CACHE_SIZE:
                self._cache.clear()
            pieces = tuple(self._greedy_longest_match(token))
            self._cache[token] = pieces
        return pieces

    def _greedy_longest_match(self, token):
        n = len(token)  # Code points, as the original's list(token).
        if n > self.max_input_chars_per_word:
            return [self.unk_token]
        pieces = []
        start = 0
        while start < n:
            longest = self._max_piece_chars if start else self._max_first_chars
            end = min(n, start + longest)
            cur_substr = None
            while start < end:
                substr = token[start:end]
                if start > 0:
                    substr = "##" + substr
                if substr in self.vocab:
                    cur_substr = substr
                    break
                end -= 1
            if cur_substr is None:
                # One unmatchable piece makes the whole word unknown.
                return [self.unk_token]
            pieces.append(cur_substr)
            start = end
        return pieces


class FullTokenizer:
    """Runs end-to-end tokenization: basic tokenization, then WordPiece."""

    def __init__(self, vocab_file, do_lower_case=True):
        self.vocab = load_vocab(vocab_file)
        self.vocab_file = vocab_file
        self.inv_vocab = {v: k for k, v in self.vocab.items()}
        self.basic_tokenizer = BasicTokenizer(do_lower_case=do_lower_case)
        self.wordpiece_tokenizer = WordpieceTokenizer(vocab=self.vocab)
        vocabulary.check_vocab_contents(self.vocab, vocab_file, do_lower_case)
        self._cache = {}
        self._cached_state = self._state()

    def _state(self):
        """What the word cache depends on: the original reads `vocab` and
        the settings live, so a change empties it. A vocabulary is followed
        by its size (tokens added, as a user extends one), not by content
        replaced in place."""
        wordpiece = self.wordpiece_tokenizer
        return (
            id(wordpiece.vocab),
            len(wordpiece.vocab),
            wordpiece.max_input_chars_per_word,
            wordpiece.unk_token,
            self.basic_tokenizer.do_lower_case,
        )

    def tokenize(self, text):
        split_tokens = []
        for pieces in self.tokenize_words(text):
            split_tokens.extend(pieces)
        return split_tokens

    def tokenize_words(self, text):
        """`tokenize`'s pieces grouped by word (the basic tokenizer's
        words; a word may give no piece): where a long text may be cut
        between windows (modeling/data/long_inputs.py)."""
        if self._state() != self._cached_state:
            self._cache = {}
            self.wordpiece_tokenizer._refresh()
            self._cached_state = self._state()
        words = []
        for word in self.basic_tokenizer.split_words(text):
            pieces = self._cache.get(word)
            if pieces is None:
                pieces = self._tokenize_word(word)
            words.append(pieces)
        return words

    def _tokenize_word(self, word):
        if len(self._cache) >= _MAX_CACHE_SIZE:
            self._cache.clear()
        pieces = []
        # The word-level cache here makes the inner caches redundant.
        basic = self.basic_tokenizer._tokenize_word_uncached(word)
        for token in basic:
            pieces.extend(self.wordpiece_tokenizer._greedy_longest_match(token))
        pieces = tuple(pieces)
        self._cache[word] = pieces
        return pieces

    def convert_tokens_to_ids(self, tokens):
        try:
            return convert_by_vocab(self.vocab, tokens)
        except KeyError as e:
            # The special tokens every input has ([CLS], [SEP], and [UNK]
            # for a word out of the vocabulary): a vocabulary without them
            # is not a BERT vocabulary (its load only warned).
            if e.args and e.args[0] in vocabulary.SPECIAL_TOKENS:
                raise errors.UserError(
                    f"{vocabulary.describe(self.vocab_file)} lacks "
                    f"{e.args[0]}, which BERT's inputs need. Use a BERT "
                    "vocabulary (see vocab/README.md)."
                ) from None
            raise

    def convert_ids_to_tokens(self, ids):
        return convert_by_vocab(self.inv_vocab, ids)
