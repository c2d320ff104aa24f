"""Reading pre-training text into documents of token ids.

The format is the original's: one sentence per line, a blank line between
documents. As in the original, lines end at "\\n" only, each
line is stripped with `str.strip()`, a line that is blank after stripping
starts a new document, a line that tokenizes to nothing is dropped without
starting one, a file boundary does not start a new document, and documents
without tokens are removed.

Unlike the original, bytes that are not UTF-8 are an error naming the file
and line, unless `decode_errors` is "replace" or "ignore" (the original's
silent behaviour); either way they are counted.
"""

import array
import dataclasses
import itertools

from modeling import progress
from modeling.pretraining_data import shards as shards_lib

DECODE_ERRORS = ("strict", "replace", "ignore")


@dataclasses.dataclass
class ReadStats:
    """Counts of what reading found."""

    lines: int = 0
    bytes: int = 0
    tokens: int = 0
    documents: int = 0
    empty_documents: int = 0  # Document slots without tokens, removed.
    dropped_lines: int = 0  # Non-blank lines that tokenize to nothing.
    decode_error_lines: int = 0  # Lines with bytes that are not UTF-8.

    def add(self, other):
        for field in dataclasses.fields(self):
            name = field.name
            setattr(self, name, getattr(self, name) + getattr(other, name))

    def summary(self):
        return ", ".join(
            f"{f.name}={getattr(self, f.name)}"
            for f in dataclasses.fields(self)
        )


class _WordCache(dict):
    """word -> tuple of ids; a miss tokenizes the word (called from C)."""

    def __init__(self, tokenizer, max_size):
        super().__init__()
        self._tokenizer = tokenizer
        self._max_size = max_size

    def __missing__(self, word):
        if len(self) >= self._max_size:
            self.clear()  # Bounded memory on unbounded vocabularies.
        tok = self._tokenizer
        pieces = tuple(tok.convert_tokens_to_ids(tok.tokenize(word)))
        self[word] = pieces
        return pieces


class LineTokenizer:
    """Tokenizes lines into token ids with a per-word id cache.

    Exact: `FullTokenizer.tokenize(line)` is the concatenation over
    `basic_tokenizer.split_words(line)` of each word's pieces, and a word's
    pieces depend on the word alone (tokenization.py says so and its tests
    check it), so each distinct word is tokenized and looked up once.
    """

    def __init__(self, tokenizer, max_cache_size=500_000):
        self._split_words = tokenizer.basic_tokenizer.split_words
        self._lookup = _WordCache(tokenizer, max_cache_size).__getitem__

    def __call__(self, line):
        """Returns the tuple of token ids of one line (a str)."""
        words = self._split_words(line)
        return tuple(itertools.chain.from_iterable(map(self._lookup, words)))


def decode_line(raw, path, line_number, decode_errors, stats):
    """Decodes one line of bytes as UTF-8 under the `decode_errors` policy.

    Raises:
      ValueError: the line is not UTF-8 and `decode_errors` is "strict".
    """
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError as e:
        if decode_errors == "strict":
            raise ValueError(
                f"{path}:{line_number}: bytes that are not UTF-8 "
                f"({e.reason} at byte {e.start} of the line: "
                f"{raw[max(0, e.start - 20) : e.start + 20]!r}). Fix the "
                "file, or pass --decode_errors=replace (or =ignore, the "
                "original's silent behaviour) to go on."
            ) from None
        stats.decode_error_lines += 1
        return raw.decode("utf-8", decode_errors)


class DocumentBuilder:
    """Accumulates lines into documents of token-id segments."""

    def __init__(self, line_tokenizer, decode_errors="strict"):
        if decode_errors not in DECODE_ERRORS:
            raise ValueError(
                f"decode_errors={decode_errors!r}: must be one of "
                f"{', '.join(DECODE_ERRORS)}"
            )
        self._tokenize = line_tokenizer
        self._decode_errors = decode_errors
        self._documents = [[]]
        self.stats = ReadStats()

    def add_bytes(self, data, path, first_line_number=1):
        """Adds whole lines of one file: bytes split at "\\n" only.

        Args:
          data: bytes; the last line may lack its "\\n".
          path: str, named in errors.
          first_line_number: int, the number of the first line in `path`.
        """
        self.stats.bytes += len(data)
        try:
            lines = data.decode("utf-8").split("\n")
        except UnicodeDecodeError:
            lines = [
                decode_line(raw, path, number, self._decode_errors, self.stats)
                for number, raw in enumerate(
                    data.split(b"\n"), first_line_number
                )
            ]
        if lines and not lines[-1]:
            lines.pop()  # What follows the last "\\n" is not a line.
        self.add_lines(lines)

    def add_lines(self, lines):
        """Adds decoded lines (str) in order."""
        documents = self._documents
        stats = self.stats
        stats.lines += len(lines)
        tokenize = self._tokenize
        for line in lines:
            line = line.strip()
            if not line:
                documents.append([])
                continue
            ids = tokenize(line)
            if ids:
                documents[-1].append(ids)
                stats.tokens += len(ids)
            else:
                stats.dropped_lines += 1

    def take_raw_documents(self):
        """Returns the documents so far, empty ones included, and resets.

        The first continues the text before these lines: a new document
        starts only after a blank line.
        """
        documents, self._documents = self._documents, [[]]
        return documents


class Corpus:
    """Documents as one flat array of token ids.

    Attributes:
      tokens: array.array of every token id, document after document.
      documents: list, per document the list of its segment bounds
        (offsets into `tokens`): segment j is tokens[b[j]:b[j + 1]].
    """

    def __init__(self, num_ids):
        self.tokens = array.array("H" if num_ids <= 1 << 16 else "I")
        self.documents = [[0]]  # The last one is open until `finish`.

    def add(self, tokens, lengths):
        """Appends the next stretch of text, flattened.

        Args:
          tokens: array of the ids of its segments, back to back.
          lengths: per raw document (see `take_raw_documents`), the list of
            its segment lengths; the first continues the last document.
        """
        pos = len(self.tokens)
        self.tokens.extend(tokens)
        for k, segment_lengths in enumerate(lengths):
            if k:
                self.documents.append([pos])
            bounds = self.documents[-1]
            for length in segment_lengths:
                pos += length
                bounds.append(pos)

    def finish(self):
        """Drops documents without segments; returns how many."""
        kept = [bounds for bounds in self.documents if len(bounds) > 1]
        dropped = len(self.documents) - len(kept)
        self.documents = kept
        return dropped

    @classmethod
    def from_documents(cls, documents, num_ids):
        """A Corpus of documents given as lists of tuples of ids."""
        corpus = cls(num_ids)
        corpus.add(*flatten(documents, corpus.tokens.typecode))
        corpus.finish()
        return corpus

    def segments(self, document_index):
        """The tuples of ids of one document's segments (for tests, logs)."""
        bounds = self.documents[document_index]
        return [
            tuple(self.tokens[bounds[j] : bounds[j + 1]])
            for j in range(len(bounds) - 1)
        ]


def flatten(raw_documents, typecode):
    """(tokens array, per document segment lengths) of raw documents."""
    tokens = array.array(typecode)
    lengths = []
    for document in raw_documents:
        for segment in document:
            tokens.extend(segment)
        lengths.append([len(segment) for segment in document])
    return tokens, lengths


def read_shard(shard, line_tokenizer, decode_errors, typecode):
    """Tokenizes one shard: (tokens, lengths, stats) for `Corpus.add`."""
    builder = DocumentBuilder(line_tokenizer, decode_errors)
    data = shards_lib.read_shard_bytes(shard)
    builder.add_bytes(data, shard.path, shard.first_line)
    raw = builder.take_raw_documents()
    return (*flatten(raw, typecode), builder.stats)


def _read_shard_in_worker(shard):
    return read_shard(shard, *shards_lib.state())


def read_corpus(
    input_files,
    line_tokenizer,
    num_ids,
    decode_errors="strict",
    processes=1,
    shard_bytes=1 << 20,
):
    """Reads all files into one Corpus, as the original reads them.

    Shards of the files are tokenized by `processes` workers and joined in
    order; the result does not depend on `processes` or `shard_bytes`.

    Returns:
      (corpus, stats): Corpus; ReadStats.
    """
    corpus = Corpus(num_ids)
    stats = ReadStats()
    state = (line_tokenizer, decode_errors, corpus.tokens.typecode)
    shards = list(shards_lib.plan_shards(input_files, shard_bytes))
    counter = progress.Progress(
        f"Reading input ({shard_bytes / (1 << 20):g} MiB shards)",
        total=len(shards),
        unit="shards",
    )
    with shards_lib.ForkPool(processes, state) as pool:
        for tokens, lengths, shard_stats in pool.imap(
            _read_shard_in_worker, shards
        ):
            corpus.add(tokens, lengths)
            stats.add(shard_stats)
            counter.add()
    stats.empty_documents = corpus.finish()
    stats.documents = len(corpus.documents)
    return corpus, stats
