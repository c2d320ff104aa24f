"""Reading pre-training text into documents of token ids.

The format is the original's: one sentence per line, a blank line between
documents. As in the original (audit A13), lines end at "\\n" only, each
line is stripped with `str.strip()`, a line that is blank after stripping
starts a new document, a line that tokenizes to nothing is dropped without
starting one, a file boundary does not start a new document, and documents
without tokens are removed.

Unlike the original, bytes that are not UTF-8 are an error naming the file
and line, unless `decode_errors` is "replace" or "ignore" (the original's
silent behaviour); either way they are counted.
"""

import dataclasses
import itertools

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


def open_binary(path):
    """Opens a local or tf.io.gfile path (gs://...) for binary reading."""
    if "://" in str(path):
        import tensorflow as tf  # Only remote paths need TF.

        return tf.io.gfile.GFile(path, "rb")
    return open(path, "rb")


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

    def add_file(self, path, block_size=1 << 20):
        """Adds a whole file, reading it in blocks of whole lines."""
        line_number = 1
        rest = b""
        with open_binary(path) as f:
            while True:
                block = f.read(block_size)
                data = rest + block
                cut = len(data) if not block else data.rfind(b"\n") + 1
                if cut > 0:
                    self.add_bytes(data[:cut], path, line_number)
                    line_number += data.count(b"\n", 0, cut)
                rest = data[cut:]
                if not block:
                    break

    def finish(self):
        """Returns the list of non-empty documents (and updates stats)."""
        documents = [d for d in self._documents if d]
        self.stats.empty_documents += len(self._documents) - len(documents)
        self.stats.documents += len(documents)
        self._documents = [[]]
        return documents


def read_documents(input_files, line_tokenizer, decode_errors="strict"):
    """Reads all files into one list of documents (the original's order).

    Returns:
      (documents, stats): list of documents, each a list of tuples of ids;
      ReadStats.
    """
    builder = DocumentBuilder(line_tokenizer, decode_errors)
    for path in input_files:
        builder.add_file(path)
    documents = builder.finish()
    return documents, builder.stats
