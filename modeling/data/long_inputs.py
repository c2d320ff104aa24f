"""Texts longer than max_seq_length: --long_inputs=truncate|head_tail|chunks.

BERT sees at most max_seq_length pieces. The original cuts a text to them
(`truncate`, the default: its features byte for byte). The two others keep
every piece, or the ones that decide most often:

- `head_tail`: the first `head_tokens` pieces and the last ones up to
  max_seq_length (Sun et al. 2019, "How to Fine-Tune BERT for Text
  Classification?": on IMDb the head and the tail beat the head alone; their
  128 + 382 for 512 pieces is the default). The head takes at most half of
  the room. One window per text: the cost of `truncate`.
- `chunks`: windows of max_seq_length over the whole text, cut between
  words (as the tagger cuts long sentences, modeling/data/conll.py), each
  starting `chunk_stride` pieces before the previous one ended (whole
  words); a word longer than a window is cut. Each window is a row of the
  batch; a document's outputs are combined (`combine`: the mean, or the
  maximum, over its windows). Cost: about pieces / (room - chunk_stride)
  windows per document.

A pair of texts keeps the shorter one whole (at most half of the room, cut
from its end beyond that, as the original cuts), and cuts or windows the
longer one in the rest, as SQuAD keeps the question and windows the
document. Texts that fit in one window get `truncate`'s features exactly.

This module needs no TensorFlow.
"""

import dataclasses
import json
import os

import numpy as np
from absl import logging

from modeling.data import file_io

TRUNCATE = "truncate"
HEAD_TAIL = "head_tail"
CHUNKS = "chunks"
STRATEGIES = (TRUNCATE, HEAD_TAIL, CHUNKS)
POOLINGS = ("mean", "max")
DEFAULT_HEAD_TOKENS = 128
DEFAULT_CHUNK_STRIDE = 0
# Beside a trained run's checkpoints: the strategy it trained with.
FILE = "long_inputs.json"


@dataclasses.dataclass(frozen=True)
class LongInputs:
    """How texts longer than max_seq_length are read (see the module doc).

    Args:
      strategy: "truncate", "head_tail" or "chunks".
      head_tokens: head_tail's head, in pieces (at most half of the room).
      chunk_stride: chunks' overlap between consecutive windows, in pieces
        (whole words: at most this many).
      chunk_pooling: "mean" or "max", how a document's window outputs are
        combined.
    """

    strategy: str = TRUNCATE
    head_tokens: int = DEFAULT_HEAD_TOKENS
    chunk_stride: int = DEFAULT_CHUNK_STRIDE
    chunk_pooling: str = "mean"

    def __post_init__(self):
        if self.strategy not in STRATEGIES:
            raise ValueError(
                f"--long_inputs must be one of {', '.join(STRATEGIES)}, got "
                f"{self.strategy!r}"
            )
        if self.chunk_pooling not in POOLINGS:
            raise ValueError(
                f"--chunk_pooling must be one of {', '.join(POOLINGS)}, got "
                f"{self.chunk_pooling!r}"
            )
        if self.head_tokens < 0:
            raise ValueError(
                f"--head_tokens must be at least 0, got {self.head_tokens}"
            )
        if self.chunk_stride < 0:
            raise ValueError(
                f"--chunk_stride must be at least 0, got {self.chunk_stride}"
            )

    @classmethod
    def of(cls, settings, output_dir=None, max_seq_length=None):
        """The LongInputs of a run's flags (long_inputs, head_tokens,
        chunk_stride, chunk_pooling; None: not given).

        Args:
          output_dir: the folder whose FILE binds the run (the caller passes
            it only where its checkpoints are the run's model): the flags
            left out take its values (logged), a flag given must equal its
            value. Without one, a flag left out takes the default.
          max_seq_length: when given, a --head_tokens given above half of
            the room is refused, and `check` runs.

        Raises:
          ValueError: one line naming the flag (and the file, or the limit).
        """
        given = {
            "long_inputs": settings.long_inputs,
            "head_tokens": settings.head_tokens,
            "chunk_stride": settings.chunk_stride,
            "chunk_pooling": settings.chunk_pooling,
        }
        given = {k: v for k, v in given.items() if v is not None}
        path = output_dir and os.path.join(output_dir, FILE)
        saved = {}
        if path and file_io.exists(path):
            try:
                saved = cls.from_json(json.loads(file_io.read_text(path)))
            except (ValueError, TypeError, AttributeError) as e:
                raise ValueError(f"{path}: not a {FILE} ({e})") from None
            saved = saved.to_json()
            for name, value in given.items():
                if value != saved[name]:
                    raise ValueError(
                        f"--{name}={value} differs from {path} ({name}: "
                        f"{saved[name]}), which this output_dir's "
                        "checkpoints were trained with: leave the flag out, "
                        "or use another --output_dir"
                    )
            if not given:
                logging.info("Long inputs from %s: %s", path, saved)
        result = cls.from_json({**saved, **given})
        if max_seq_length is not None:
            half = (max_seq_length - 2) // 2
            if (
                "head_tokens" in given
                and result.strategy == HEAD_TAIL
                and result.head_tokens > half
            ):
                # _head_tail would cut it to half of the room, silently.
                raise ValueError(
                    f"--head_tokens={result.head_tokens} is above half of "
                    f"the room: at most {half} (max_seq_length "
                    f"{max_seq_length} less [CLS] and [SEP], halved)"
                )
            result.check(max_seq_length)
        return result

    def save(self, output_dir):
        """Records the strategy in output_dir/FILE (a later predict-only run
        and the export use it); truncate writes none (and removes one left
        by a run that made no checkpoint: a folder without FILE was trained
        with truncate)."""
        path = os.path.join(output_dir, FILE)
        if self.strategy == TRUNCATE:
            file_io.remove_if_exists(path)
        else:
            file_io.write_text(
                path, json.dumps(self.to_json(), indent=2) + "\n"
            )

    @property
    def windowed(self):
        """Whether a text may give several rows."""
        return self.strategy == CHUNKS

    def check(self, max_seq_length):
        """Raises ValueError when the windows cannot advance."""
        if self.windowed and self.chunk_stride >= max_seq_length - 3:
            raise ValueError(
                f"--chunk_stride={self.chunk_stride} must be below "
                f"max_seq_length - 3 = {max_seq_length - 3}: the windows "
                "would not advance"
            )

    def to_json(self):
        """What labels.json and an export's metadata record."""
        return {
            "long_inputs": self.strategy,
            "head_tokens": self.head_tokens,
            "chunk_stride": self.chunk_stride,
            "chunk_pooling": self.chunk_pooling,
        }

    @classmethod
    def from_json(cls, values):
        return cls(
            strategy=values.get("long_inputs", TRUNCATE),
            head_tokens=values.get("head_tokens", DEFAULT_HEAD_TOKENS),
            chunk_stride=values.get("chunk_stride", DEFAULT_CHUNK_STRIDE),
            chunk_pooling=values.get("chunk_pooling", "mean"),
        )

    def windows(self, words_a, words_b, max_seq_length):
        """Yields the (pieces_a, pieces_b or None) of each window of a text
        (pair), for packing as `[CLS] a [SEP] (b [SEP])`.

        Args:
          words_a, words_b: each word's pieces (FullTokenizer.
            tokenize_words); words_b None or empty for a single text.
        """
        pieces_a = _flat(words_a)
        if not words_b or not _flat(words_b):
            room = max_seq_length - 2
            if len(pieces_a) <= room or self.strategy == TRUNCATE:
                yield pieces_a[:room], None
            elif self.strategy == HEAD_TAIL:
                yield self._head_tail(pieces_a, room), None
            else:
                for piece in self._chunks(words_a, room):
                    yield piece, None
            return
        pieces_b = _flat(words_b)
        room = max_seq_length - 3
        if len(pieces_a) + len(pieces_b) <= room or self.strategy == TRUNCATE:
            truncate_seq_pair(pieces_a, pieces_b, room)
            yield pieces_a, pieces_b
            return
        # The longer is cut; on a tie b, as the original.
        a_longer = len(pieces_a) > len(pieces_b)
        shorter = pieces_b if a_longer else pieces_a
        shorter = shorter[: min(len(shorter), room // 2)]
        budget = room - len(shorter)
        if self.strategy == HEAD_TAIL:
            longer = [
                self._head_tail(pieces_a if a_longer else pieces_b, budget)
            ]
        else:
            overlap = pair_overlap(self.chunk_stride, budget)
            if overlap < self.chunk_stride:
                logging.log_first_n(
                    logging.WARNING,
                    "--chunk_stride=%d is over half the room a pair leaves "
                    "its longer text (%d pieces): windows share at most %d "
                    "(else each would advance by a word or so)",
                    1,
                    self.chunk_stride,
                    budget,
                    overlap,
                )
            longer = self._chunks(
                words_a if a_longer else words_b, budget, overlap
            )
        for piece in longer:
            yield (piece, shorter) if a_longer else (shorter, piece)

    def _head_tail(self, pieces, room):
        if len(pieces) <= room:
            return pieces
        head = min(self.head_tokens, room // 2)
        tail = room - head
        return pieces[:head] + (pieces[-tail:] if tail else [])

    def _chunks(self, words, room, overlap=None):
        if overlap is None:
            overlap = self.chunk_stride
        for start, end in word_windows([len(w) for w in words], room, overlap):
            yield [p for w in words[start:end] for p in w[:room]]

    def combine(self, outputs):
        """One document's outputs [W, ...] (its windows') -> [...]: their
        mean, or their maximum (for a multi-label model's sigmoid logits the
        maximum of each label's probability)."""
        outputs = np.asarray(outputs)
        if self.chunk_pooling == "max":
            return outputs.max(axis=0)
        return outputs.mean(axis=0, dtype=np.float64).astype(outputs.dtype)

    def per_example(self, example_index, outputs, normalize=False):
        """Rows in file order, consecutive rows of one text sharing its
        `example_index` -> (each text's first row [E], its combined
        outputs [E, ...]); `normalize`: each combined vector scaled to unit
        length (an embedder's)."""
        index = np.asarray(example_index)
        outputs = np.asarray(outputs)
        if not len(index):
            return np.zeros([0], np.int64), outputs
        starts = np.flatnonzero(np.r_[True, index[1:] != index[:-1]])
        if self.chunk_pooling == "max":
            combined = np.maximum.reduceat(outputs, starts, axis=0)
        else:
            counts = np.diff(np.r_[starts, len(index)])
            sums = np.add.reduceat(outputs.astype(np.float64), starts, axis=0)
            shape = (-1,) + (1,) * (outputs.ndim - 1)
            combined = (sums / counts.reshape(shape)).astype(outputs.dtype)
        if normalize:
            norms = np.linalg.norm(combined, axis=-1, keepdims=True)
            combined = combined / np.maximum(norms, 1e-12).astype(
                combined.dtype
            )
        return starts, combined

    def grouped(self, rows):
        """Streams (example_index, output) rows in file order into
        (combined output, number of windows) per text."""
        current, outputs = None, []
        for index, output in rows:
            if outputs and index != current:
                yield self.combine(outputs), len(outputs)
                outputs = []
            current = index
            outputs.append(output)
        if outputs:
            yield self.combine(outputs), len(outputs)


def as_long_inputs(value):
    """A LongInputs from None (truncate), a strategy name, or itself."""
    if value is None:
        return LongInputs()
    if isinstance(value, str):
        return LongInputs(value)
    if isinstance(value, LongInputs):
        return value
    raise ValueError(
        f"long_inputs is a strategy ({', '.join(STRATEGIES)}) or a "
        f"LongInputs, got {value!r}"
    )


def truncate_seq_pair(tokens_a, tokens_b, max_length, rng=None):
    """Truncates a sequence pair in place to the maximum length.

    This is a simple heuristic which will always truncate the longer sequence
    one token at a time. This makes more sense than truncating an equal percent
    of tokens from each, since if one sequence is very short then each token
    that's truncated likely contains more information than a longer sequence.
    On a tie the token is taken from `tokens_b` (as the original).

    Args:
      tokens_a: list, modified in place.
      tokens_b: list, modified in place.
      max_length: int, the most tokens the two may hold together.
      rng: None (run_classifier: always pop from the end) or a
        `random.Random` (create_pretraining_data: remove from the front or the
        back with p = 0.5, one `rng.random()` call per removed token, to add
        randomness and avoid biases).
    """
    while len(tokens_a) + len(tokens_b) > max_length:
        trunc_tokens = tokens_a if len(tokens_a) > len(tokens_b) else tokens_b
        if rng is not None and rng.random() < 0.5:
            del trunc_tokens[0]
        else:
            trunc_tokens.pop()


def word_windows(piece_counts, max_pieces, overlap=0):
    """Splits a text into windows of whole words.

    Args:
      piece_counts: the number of WordPieces of each word.
      max_pieces: the most pieces a window holds.
      overlap: each window after the first starts with the previous one's
        last words holding at most this many pieces (never its first word,
        and never so many that the word after the previous window no longer
        fits: every window advances by at least one word).

    Returns:
      list of (first word, end word) pairs covering every word; a word
      longer than max_pieces gets a window of its own (it is cut).
    """
    counts = [min(c, max_pieces) for c in piece_counts]
    windows = []
    start = 0
    while start < len(counts):
        end, used = start, 0
        while end < len(counts) and (
            used + counts[end] <= max_pieces or end == start
        ):
            used += counts[end]
            end += 1
        windows.append((start, end))
        if end == len(counts):
            break
        # Step back over at most `overlap` pieces, keeping room for word
        # `end`: every window takes at least one word the last one lacked.
        following, shared = end, 0
        while (
            following - 1 > start
            and shared + counts[following - 1] <= overlap
            and shared + counts[following - 1] + counts[end] <= max_pieces
        ):
            following -= 1
            shared += counts[following]
        start = following
    return windows


def pair_overlap(chunk_stride, budget):
    """The pieces windows of a pair's longer text share: --chunk_stride, at
    most half the room the pair leaves that text (`budget`)."""
    return min(chunk_stride, budget // 2)


def _flat(words):
    return [p for w in words or () for p in w]
