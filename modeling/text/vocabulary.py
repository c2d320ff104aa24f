"""Vocabulary files: reading them as UTF-8 and checking them at load.

The format is the original's: one token per line, the id is the line index.
`load_vocab` keeps the original's results (a duplicated token keeps its last
line's id) and adds warnings; `check_vocab` adds the checks a script wants
before it builds a model (casing; the size against the model's `vocab_size`
is `config.check_vocab_size`).
"""

import collections

from absl import logging

# The special tokens of the released vocabularies, in their order there.
PAD_TOKEN = "[PAD]"
UNK_TOKEN = "[UNK]"
CLS_TOKEN = "[CLS]"
SEP_TOKEN = "[SEP]"
MASK_TOKEN = "[MASK]"
SPECIAL_TOKENS = (PAD_TOKEN, UNK_TOKEN, CLS_TOKEN, SEP_TOKEN, MASK_TOKEN)


def read_vocab_lines(vocab_file):
    """Reads a vocabulary file as a list of tokens, one per line.

    Lines end at "\\n" only, every "\\r" is dropped (TensorFlow's line
    reader, which the original's uses, drops them all: "a\\rb" is "ab") and
    each line is stripped, so a blank line in the middle is the token "".

    Args:
      vocab_file: str or path-like, a local or `tf.io.gfile` path; or the
        tokens themselves (a list or tuple of str, id = index), as a Keras
        layer's config holds them.

    Returns:
      A list of str, the token of line i at index i.

    Raises:
      ValueError: a line is not valid UTF-8 (names the file and line).
    """
    if isinstance(vocab_file, (list, tuple)):
        return list(vocab_file)
    with _open_binary(vocab_file) as f:
        data = f.read()
    lines = data.replace(b"\r", b"").split(b"\n")
    if lines and lines[-1] == b"":
        lines.pop()
    tokens = []
    for number, line in enumerate(lines, start=1):
        try:
            tokens.append(line.decode("utf-8").strip())
        except UnicodeDecodeError as e:
            raise ValueError(
                f"{vocab_file}:{number}: vocabulary line is not valid "
                f"UTF-8 ({e.reason} at byte {e.start}): {line[:60]!r}"
            ) from None
    return tokens


def describe(vocab_file):
    """How messages name a vocabulary: its path, or its size when it was
    given as a list of tokens."""
    if isinstance(vocab_file, (list, tuple)):
        return f"the vocabulary of {len(vocab_file)} tokens"
    return str(vocab_file)


def _open_binary(path):
    path = str(path)
    if "://" in path:
        import tensorflow as tf  # Only remote paths (gs://...) need TF.

        return tf.io.gfile.GFile(path, "rb")
    return open(path, "rb")


def load_vocab(vocab_file):
    """Loads a vocabulary file into an ordered dict token -> id.

    The id is the line index. A duplicated token keeps its LAST line's id,
    as in the original (released checkpoints were trained that way); a
    warning names it and its lines.

    Args:
      vocab_file: str or path-like.

    Returns:
      collections.OrderedDict of str -> int.

    Raises:
      ValueError: the file is not valid UTF-8.
    """
    tokens = read_vocab_lines(vocab_file)
    vocab = collections.OrderedDict()
    for index, token in enumerate(tokens):
        vocab[token] = index
    if len(vocab) != len(tokens):
        _warn_duplicates(vocab_file, tokens)
    return vocab


def _warn_duplicates(vocab_file, tokens):
    lines = collections.defaultdict(list)
    for index, token in enumerate(tokens):
        lines[token].append(index + 1)
    dups = [(t, n) for t, n in lines.items() if len(n) > 1]
    shown = "; ".join(f"{t!r} on lines {n}" for t, n in dups[:10])
    logging.warning(
        "%s: %d duplicated vocabulary token(s), each keeps the id of its "
        "last line (as the original): %s%s",
        describe(vocab_file),
        len(dups),
        shown,
        " ..." if len(dups) > 10 else "",
    )


def _is_bracketed(token):
    return len(token) > 2 and token[0] == "[" and token[-1] == "]"


def upper_case_tokens(vocab):
    """Returns the tokens that lower-casing would change, "[...]" excepted.

    A vocabulary without any is uncased: lower-cased text can reach all of
    it and text that is not lower-cased cannot reach capitalized words.
    """
    return [t for t in vocab if t != t.lower() and not _is_bracketed(t)]


def infer_do_lower_case(tokens):
    """Whether a vocabulary is uncased: no token that lower-casing would
    change ("[...]" excepted), as the released uncased vocabularies."""
    return not upper_case_tokens(tokens)


def check_vocab_contents(vocab, vocab_file, do_lower_case=None):
    """Logs warnings for missing special tokens and a casing mismatch.

    Args:
      vocab: dict token -> id, as from `load_vocab`.
      vocab_file: str, named in the messages.
      do_lower_case: bool, or None to skip the casing check.
    """
    first = next(iter(vocab), "")
    if first.startswith("\ufeff") and vocab[first] == 0:
        # Kept as the original reads it (ids stay those of the lines).
        logging.warning(
            "%s starts with a UTF-8 byte-order mark, so its first token is "
            "%r, not %r; save the file as UTF-8 without BOM.",
            describe(vocab_file),
            first,
            first[1:],
        )
    missing = [t for t in SPECIAL_TOKENS if t not in vocab]
    if missing:
        logging.warning(
            "%s lacks the special token(s) %s; scripts that need them fail.",
            describe(vocab_file),
            " ".join(missing),
        )
    if do_lower_case is None:
        return
    upper = upper_case_tokens(vocab)
    if do_lower_case and upper:
        logging.warning(
            "CASING MISMATCH: %s looks cased (%d upper-case tokens, e.g. %s) "
            "but do_lower_case=True lower-cases all text, so those tokens "
            "are never produced. Use do_lower_case=False with a cased model.",
            describe(vocab_file),
            len(upper),
            " ".join(upper[:5]),
        )
    elif not do_lower_case and not upper:
        logging.warning(
            "CASING MISMATCH: %s looks uncased (no upper-case tokens) but "
            "do_lower_case=False keeps case and accents, so capitalized or "
            "accented words split badly or become [UNK]. Use "
            "do_lower_case=True with an uncased model.",
            describe(vocab_file),
        )


def check_vocab(vocab_file, do_lower_case=None):
    """Loads and checks a vocabulary file for a script.

    The size check against a model is `config.check_vocab_size`.

    Args:
      vocab_file: str or path-like.
      do_lower_case: bool, or None to skip the casing check.

    Returns:
      collections.OrderedDict token -> id, as `load_vocab`.

    Raises:
      ValueError: the file is not UTF-8 (names the line).
    """
    vocab = load_vocab(vocab_file)
    check_vocab_contents(vocab, vocab_file, do_lower_case)
    return vocab


def require_special_tokens(vocab, tokens, purpose):
    """Raises unless every token of `tokens` is in `vocab`.

    Args:
      vocab: dict token -> id.
      tokens: iterable of str, e.g. ("[CLS]", "[SEP]", "[MASK]").
      purpose: str naming what needs them, e.g. "pre-training data".

    Raises:
      ValueError: naming the missing tokens and the purpose.
    """
    missing = [t for t in tokens if t not in vocab]
    if missing:
        raise ValueError(
            f"The vocabulary lacks {' '.join(missing)}, needed for "
            f"{purpose}. Use a BERT vocabulary (see vocab/README.md)."
        )
