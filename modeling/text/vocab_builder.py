"""Learns a WordPiece vocabulary from text, in the released files' layout.

Words come from the original's `BasicTokenizer` (so lower-casing, accent
stripping, punctuation and CJK splitting are exactly those the vocabulary
will be used with). Each word starts as its characters, the first bare and
the rest with the "##" continuation prefix; the most frequent adjacent pair
is then merged repeatedly (bottom-up, as the WordPiece trainer of Hugging
Face tokenizers) until the vocabulary has the requested size. Every
character seen stays in the vocabulary both bare and with "##", so greedy
longest-match WordPiece never needs "[UNK]" for text of those characters.

Layout (as the released vocabularies): "[PAD]" at id 0, "[unused0]".. at
ids 1-99, "[UNK]" 100, "[CLS]" 101, "[SEP]" 102, "[MASK]" 103, further
"[unusedN]" after them, then single characters, learned pieces in merge
order, and "##" characters last.
"""

import collections
import heapq
import itertools

from modeling.data import file_io
from modeling.text import tokenization
from modeling.text import vocabulary

# Ids 1..99 hold [unused0]..[unused98] in the released vocabularies.
_UNUSED_BEFORE_UNK = 99


def special_tokens(num_unused):
    """Returns the leading tokens of a vocabulary, in the released order.

    Args:
      num_unused: int, how many "[unusedN]" placeholders (994 in the
        released English vocabularies, 99 in the learned ones here).
    """
    unused = [f"[unused{i}]" for i in range(num_unused)]
    head = unused[:_UNUSED_BEFORE_UNK]
    tail = unused[_UNUSED_BEFORE_UNK:]
    return (
        [vocabulary.PAD_TOKEN]
        + head
        + [
            vocabulary.UNK_TOKEN,
            vocabulary.CLS_TOKEN,
            vocabulary.SEP_TOKEN,
            vocabulary.MASK_TOKEN,
        ]
        + tail
    )


def count_words(input_files, do_lower_case=True, max_chars_per_word=200):
    """Counts the BasicTokenizer words of text files.

    Args:
      input_files: list of str, UTF-8 text files.
      do_lower_case: bool, as the tokenizer that will use the vocabulary.
      max_chars_per_word: int, longer words are skipped (WordPiece makes
        them "[UNK]" whatever the vocabulary).

    Returns:
      collections.Counter of word -> count.

    Raises:
      ValueError: a file is not valid UTF-8 (names the file and line).
    """
    basic = tokenization.BasicTokenizer(do_lower_case=do_lower_case)
    raw = collections.Counter()
    for path in input_files:
        with open(path, "rb") as f:
            for number, line in enumerate(f, start=1):
                try:
                    text = line.decode("utf-8")
                except UnicodeDecodeError as e:
                    raise ValueError(
                        f"{path}:{number}: not valid UTF-8 ({e.reason})"
                    ) from None
                raw.update(basic.split_words(text))
    words = collections.Counter()
    for raw_word, count in raw.items():
        for word in basic.tokenize_word(raw_word):
            if len(word) <= max_chars_per_word:
                words[word] += count
    return words


def _units(word):
    return [word[0]] + ["##" + c for c in word[1:]]


def _join(left, right):
    return left + right[2:]  # right always carries the "##" prefix.


class _PairIndex:
    """Counts of adjacent unit pairs over all words, updated per merge."""

    def __init__(self, words, counts):
        self.words = words
        self.counts = counts
        self.pair_count = collections.Counter()
        self.where = collections.defaultdict(set)
        for i, units in enumerate(words):
            self._add(i, units, 1)
        self.heap = [(-n, p) for p, n in self.pair_count.items()]
        heapq.heapify(self.heap)

    def _add(self, i, units, sign):
        for pair in itertools.pairwise(units):
            self.pair_count[pair] += sign * self.counts[i]
            if sign > 0:
                self.where[pair].add(i)

    def best(self, min_frequency):
        """Pops the most frequent pair (ties: the smaller strings), or None."""
        while self.heap:
            neg, pair = heapq.heappop(self.heap)
            if self.pair_count.get(pair, 0) == -neg:
                return pair if -neg >= min_frequency else None
        return None

    def merge(self, pair):
        """Merges `pair` in every word that holds it."""
        left, right = pair
        merged = _join(left, right)
        touched = set()
        for i in self.where.pop(pair, ()):
            units = self.words[i]
            self._add(i, units, -1)
            out, j = [], 0
            while j < len(units):
                if j + 1 < len(units) and (units[j], units[j + 1]) == pair:
                    out.append(merged)
                    j += 2
                else:
                    out.append(units[j])
                    j += 1
            self.words[i] = out
            self._add(i, out, 1)
            # Counts of old and new neighbours changed: re-queue them.
            touched.update(itertools.pairwise(units), itertools.pairwise(out))
        touched.discard(pair)
        for p in touched:
            if self.pair_count[p] > 0:
                heapq.heappush(self.heap, (-self.pair_count[p], p))
        return merged


def learn_vocab(word_counts, vocab_size, num_unused=99, min_frequency=2):
    """Learns the tokens of a WordPiece vocabulary from word counts.

    Args:
      word_counts: dict word -> count, e.g. from `count_words`.
      vocab_size: int, the number of tokens wanted (special ones included).
      num_unused: int, the number of "[unusedN]" placeholders.
      min_frequency: int, pairs seen fewer times are never merged, so the
        vocabulary can come out smaller than `vocab_size`.

    Returns:
      A list of str tokens, the token of id i at index i.

    Raises:
      ValueError: `vocab_size` cannot hold the special tokens and every
        character both bare and with "##".
    """
    head = special_tokens(num_unused)
    chars = sorted({c for word in word_counts for c in word})
    budget = vocab_size - len(head) - 2 * len(chars)
    if budget < 0:
        raise ValueError(
            f"vocab_size={vocab_size} is too small: {len(head)} special "
            f"tokens and {len(chars)} characters (bare and with ##) need "
            f"{len(head) + 2 * len(chars)}."
        )
    words = sorted(word_counts)
    index = _PairIndex(
        [_units(w) for w in words], [word_counts[w] for w in words]
    )
    learned, seen = [], set()
    while len(learned) < budget:
        pair = index.best(min_frequency)
        if pair is None:
            break
        token = index.merge(pair)
        if token not in seen:
            seen.add(token)
            learned.append(token)
    return head + chars + learned + ["##" + c for c in chars]


def write_vocab(tokens, output_file):
    """Writes one token per line, atomically (a temporary file, renamed).

    Raises:
      ValueError: a token is empty or holds whitespace, which the format
        cannot represent.
    """
    for i, token in enumerate(tokens):
        if not token or token != token.strip() or len(token.split()) != 1:
            raise ValueError(f"token {i} ({token!r}) cannot be written")
    file_io.write_text(output_file, "".join(t + "\n" for t in tokens))


def build_vocab(
    input_files,
    output_file,
    vocab_size,
    do_lower_case=True,
    num_unused=99,
    min_frequency=2,
):
    """Counts words of `input_files`, learns a vocabulary, writes it.

    Returns:
      The list of tokens written.
    """
    counts = count_words(input_files, do_lower_case=do_lower_case)
    tokens = learn_vocab(counts, vocab_size, num_unused, min_frequency)
    write_vocab(tokens, output_file)
    return tokens
