"""Masked-LM / next-sentence instances, exactly as the original release.

This is google-research/bert `create_pretraining_data.py` rebuilt on token
ids (tests/create_pretraining_data_test.py compares its records with the
original's). For the same documents, options and seed it makes the
same instances as the original: every draw from the one `random.Random`
comes in the original's order (document shuffle; per document and pass the
short-sequence draw; per chunk the A/B split, the next-sentence coin, the
random document and start; one draw per truncated token; the candidate
shuffle and the 80/10/10 draws of masking; the final instance shuffle).

What differs is the inside. Documents are one flat array of ids
(pretraining_data_text.Corpus); an instance is kept as its skeleton, the
spans of A and B in that array and its masked positions and replacement
ids (InstanceStore, ~160 bytes), and records are assembled from skeletons
with numpy when written (pretraining_data_records.py); no lists of
strings. The hot random calls
are inlined (pretraining_data_rng.py): the same stream is consumed; tests
compare generator states.

Reading text is in pretraining_data_text.py, records and output files in
pretraining_data_records.py, the whole run in pretraining_data_exact.py,
the parallel mode in pretraining_data_scale.py.
"""

import array
import dataclasses

from absl import logging

from modeling import progress
from modeling.pretraining_data import rng as rng_lib
from modeling.text import vocabulary

# InstanceStore marks a masked position whose token stays as it is.
KEEP = -1


@dataclasses.dataclass(frozen=True)
class GenerationOptions:
    """The generation flags of the original (same names and defaults)."""

    max_seq_length: int = 128
    max_predictions_per_seq: int = 20
    masked_lm_prob: float = 0.15
    short_seq_prob: float = 0.1
    dupe_factor: int = 10
    do_whole_word_mask: bool = False
    random_seed: int = 12345

    def validate(self):
        """Raises ValueError naming the first nonsensical field."""
        if self.max_seq_length < 5:
            raise ValueError(
                f"max_seq_length={self.max_seq_length}: must be >= 5, room "
                "for [CLS] A [SEP] B [SEP] with A and B of 1 token or more"
            )
        # As the original: more predictions than a sequence can mask pad
        # the records' prediction slots; masked_lm_prob 0 masks one token
        # per sequence (it masks at least one).
        if self.max_predictions_per_seq < 1:
            raise ValueError(
                f"max_predictions_per_seq={self.max_predictions_per_seq}: "
                "must be >= 1"
            )
        if not 0.0 <= self.masked_lm_prob <= 1.0:
            raise ValueError(
                f"masked_lm_prob={self.masked_lm_prob}: must be in [0, 1]"
            )
        if not 0.0 <= self.short_seq_prob <= 1.0:
            raise ValueError(
                f"short_seq_prob={self.short_seq_prob}: must be in [0, 1]"
            )
        if self.dupe_factor < 1:
            raise ValueError(
                f"dupe_factor={self.dupe_factor}: must be >= 1 (the number "
                "of passes over the input)"
            )


class VocabIds:
    """The ids generation needs, taken from a token -> id vocabulary.

    Attributes:
      cls_id, sep_id, mask_id: int ids of [CLS], [SEP], [MASK].
      random_word_ids: list of int, the id of `list(vocab.keys())[k]` at k:
        the original draws a random replacement word from the keys (in
        file order, duplicates collapsed) and looks its id up.
      is_continuation: bytes, 1 at the id of each "##" token.
      num_ids: int, one more than the largest id.
    """

    def __init__(self, vocab):
        vocabulary.require_special_tokens(
            vocab,
            (vocabulary.CLS_TOKEN, vocabulary.SEP_TOKEN, vocabulary.MASK_TOKEN),
            "pre-training data",
        )
        self.cls_id = vocab[vocabulary.CLS_TOKEN]
        self.sep_id = vocab[vocabulary.SEP_TOKEN]
        self.mask_id = vocab[vocabulary.MASK_TOKEN]
        self.random_word_ids = [vocab[word] for word in vocab]
        self.num_ids = max(vocab.values()) + 1
        continuation = bytearray(self.num_ids)
        for token, index in vocab.items():
            if token.startswith("##"):
                continuation[index] = 1
        self.is_continuation = bytes(continuation)


def num_to_predict_table(options):
    """The number of masked positions for each sequence length n.

    The original's float product and Python 3 round() (ties to even, so
    n=30 gives 4), at least 1 and at most max_predictions_per_seq.
    """
    return [
        min(
            options.max_predictions_per_seq,
            max(1, round(n * options.masked_lm_prob)),
        )
        for n in range(options.max_seq_length + 1)
    ]


class InstanceStore:
    """Instance skeletons in flat arrays: about 160 bytes an instance.

    Per instance: where A and B lie in the Corpus, the next-sentence label,
    and per masked position (in draw order) the id it gets: [MASK], a
    random word, or KEEP. Records are assembled from these when written.
    """

    def __init__(self):
        # a_start, len_a, b_start, len_b, is_random, end of predictions.
        self.meta = array.array("q")
        self.positions = array.array("H")
        self.outputs = array.array("i")

    def append(self, a_start, len_a, b_start, len_b, is_random, pos, out):
        self.positions.extend(pos)
        self.outputs.extend(out)
        self.meta.extend(
            (a_start, len_a, b_start, len_b, is_random, len(self.positions))
        )

    def __len__(self):
        return len(self.meta) // 6

    def chunk_bytes(self, start, end):
        """The bytes of instances [start, end) as a store of their own
        (prediction offsets rebased): see `from_bytes`."""
        meta = self.meta[6 * start : 6 * end]
        first = self.meta[6 * start - 1] if start else 0
        last = meta[-1] if end > start else first
        for i in range(5, len(meta), 6):
            meta[i] -= first
        return (
            meta.tobytes(),
            self.positions[first:last].tobytes(),
            self.outputs[first:last].tobytes(),
        )

    @classmethod
    def from_bytes(cls, meta, positions, outputs):
        store = cls()
        store.meta.frombytes(meta)
        store.positions.frombytes(positions)
        store.outputs.frombytes(outputs)
        return store

    @property
    def nbytes(self):
        arrays = (self.meta, self.positions, self.outputs)
        return sum(a.itemsize * len(a) for a in arrays)


class InstanceMaker:
    """Makes the instances of one document at a time (the original's
    `create_instances_from_document` and `create_masked_lm_predictions`),
    appending their skeletons to an InstanceStore.
    """

    def __init__(self, corpus, options, vocab_ids, rng, store, mask=True):
        self.documents = corpus.documents
        self.tokens = corpus.tokens
        self.store = store
        # mask=False (scale mode) leaves masking to a later bulk pass.
        self.mask = mask
        self.max_num_tokens = options.max_seq_length - 3
        self.short_seq_prob = options.short_seq_prob
        self.do_whole_word_mask = options.do_whole_word_mask
        self.ids = vocab_ids
        self.random = rng.random
        self.getrandbits = rng.getrandbits
        self.num_to_predict = num_to_predict_table(options)

    def from_document(self, document_index):
        """Makes the instances of one document for one pass."""
        bounds = self.documents[document_index]
        num_segments = len(bounds) - 1
        # The target is drawn once per document and pass, before any chunk.
        target = self.max_num_tokens
        if self.random() < self.short_seq_prob:
            target = 2 + rng_lib.randbelow(
                self.max_num_tokens - 1, self.getrandbits
            )
        chunk_start = 0
        length = 0
        i = 0
        while i < num_segments:
            length += bounds[i + 1] - bounds[i]
            if i == num_segments - 1 or length >= target:
                # Unused segments of a random-next chunk are "put back".
                i -= self._from_chunk(
                    document_index, bounds, chunk_start, i + 1, target
                )
                chunk_start = i + 1
                length = 0
            i += 1

    def _from_chunk(self, document_index, bounds, start, end, target):
        """Makes one instance from segments [start, end); returns how many
        segments were put back."""
        num_segments = end - start
        a_end = start + 1
        if num_segments >= 2:
            a_end = (
                start
                + 1
                + rng_lib.randbelow(num_segments - 1, self.getrandbits)
            )
        a_start, len_a = bounds[start], bounds[a_end] - bounds[start]
        # No coin is drawn for a one-segment chunk (as in the original).
        if num_segments == 1 or self.random() < 0.5:
            is_random = 1
            b_start, len_b = self._random_next(document_index, target - len_a)
            put_back = end - a_end
        else:
            is_random = 0
            b_start, len_b = bounds[a_end], bounds[end] - bounds[a_end]
            put_back = 0
        a_lo, a_hi, b_lo, b_hi = self._truncate(len_a, len_b)
        if self.mask:
            self._mask(a_start + a_lo, a_hi - a_lo, b_start + b_lo, b_hi - b_lo)
        else:
            self._masked = ((), ())
        self.store.append(
            a_start + a_lo,
            a_hi - a_lo,
            b_start + b_lo,
            b_hi - b_lo,
            is_random,
            *self._masked,
        )
        return put_back

    def _random_next(self, document_index, target_b_length):
        """Segment B from a random other document (10 tries, as original).

        Returns:
          (start, length) of B in the corpus: whole segments from a random
          one until B reaches `target_b_length` or the document ends.
        """
        documents = self.documents
        for _ in range(10):
            random_index = rng_lib.randbelow(len(documents), self.getrandbits)
            if random_index != document_index:
                break
        # After 10 misses B comes from this same document, still labelled
        # random next, as in the original.
        bounds = documents[random_index]
        j = rng_lib.randbelow(len(bounds) - 1, self.getrandbits)
        b_start = bounds[j]
        j += 1
        while j < len(bounds) - 1 and bounds[j] - b_start < target_b_length:
            j += 1
        return b_start, bounds[j] - b_start

    def _truncate(self, len_a, len_b):
        """The original's truncate_seq_pair, on index ranges."""
        a_lo, a_hi, b_lo, b_hi = 0, len_a, 0, len_b
        random = self.random
        while (a_hi - a_lo) + (b_hi - b_lo) > self.max_num_tokens:
            # The longer side loses a token, B on a tie; one draw picks
            # the front (< 0.5) or the back.
            if a_hi - a_lo > b_hi - b_lo:
                if random() < 0.5:
                    a_lo += 1
                else:
                    a_hi -= 1
            elif random() < 0.5:
                b_lo += 1
            else:
                b_hi -= 1
        return a_lo, a_hi, b_lo, b_hi

    def _candidates(self, a_start, len_a, b_start, len_b):
        """Index groups that may be masked; [CLS] and [SEP] never are."""
        n = len_a + len_b + 3
        if not self.do_whole_word_mask:
            return [*range(1, len_a + 1), *range(len_a + 2, n - 1)]
        groups = []
        continuation = self.ids.is_continuation
        tokens = self.tokens
        for i in range(1, n - 1):
            if i <= len_a:
                token = tokens[a_start + i - 1]
            elif i == len_a + 1:
                continue
            else:
                token = tokens[b_start + i - len_a - 2]
            # A "##" piece joins the previous group, even across the
            # [SEP] between A and B, as in the original.
            if groups and continuation[token]:
                groups[-1].append(i)
            else:
                groups.append([i])
        return groups

    def _choose(self, candidates, num_to_predict):
        """Shuffles the candidates and picks the positions to mask."""
        rng_lib.shuffle(candidates, self.getrandbits)
        if not self.do_whole_word_mask:
            return candidates[:num_to_predict]
        positions = []
        for group in candidates:
            if len(positions) >= num_to_predict:
                break
            # A word that would overflow the budget is skipped; groups are
            # disjoint, so none is ever partly covered.
            if len(positions) + len(group) > num_to_predict:
                continue
            positions.extend(group)
        return positions

    def _mask(self, a_start, len_a, b_start, len_b):
        """Draws the masked positions and their outputs into _masked."""
        num_to_predict = self.num_to_predict[len_a + len_b + 3]
        candidates = self._candidates(a_start, len_a, b_start, len_b)
        positions = self._choose(candidates, num_to_predict)
        random = self.random
        mask_id = self.ids.mask_id
        words = self.ids.random_word_ids
        outputs = []
        for _ in positions:
            if random() < 0.8:
                outputs.append(mask_id)
            elif random() < 0.5:
                outputs.append(KEEP)  # 10% of the time: unchanged.
            else:
                outputs.append(
                    words[rng_lib.randbelow(len(words), self.getrandbits)]
                )
        # Positions stay in draw order; records sort them.
        self._masked = (positions, outputs)


def generate_instances(
    corpus,
    options,
    vocab_ids,
    rng,
    mask=True,
    log_passes=True,
    on_document=None,
):
    """All passes over the corpus, then the original's final shuffle.

    Args:
      corpus: pretraining_data_text.Corpus; its document list is shuffled
        in place by `rng`.
      options: GenerationOptions.
      vocab_ids: VocabIds.
      rng: random.Random, consumed exactly as the original consumes it.
      mask: bool, False to leave every instance unmasked (the scale mode
        masks them in bulk afterwards).
      log_passes: bool, whether to log progress after each pass.
      on_document: optional callable(store), called after each document of
        each pass (instances made so far can be processed meanwhile).

    Returns:
      (store, order): an InstanceStore of the instances in the order they
      were made, and an array of their indexes in output order.
    """
    rng.shuffle(corpus.documents)
    store = InstanceStore()
    maker = InstanceMaker(corpus, options, vocab_ids, rng, store, mask)
    counter = progress.Progress(
        "Making instances",
        total=options.dupe_factor * len(corpus.documents),
        unit="documents",
        every_secs=None if log_passes else float("inf"),
    )
    for pass_index in range(options.dupe_factor):
        for document_index in range(len(corpus.documents)):
            maker.from_document(document_index)
            if on_document is not None:
                on_document(store)
            counter.add()
        if log_passes:
            logging.info(
                "Pass %d/%d: %d instances so far",
                pass_index + 1,
                options.dupe_factor,
                len(store),
            )
    # Shuffling the indexes draws exactly what shuffling the instances does.
    order = array.array("i", range(len(store)))
    rng.shuffle(order)
    return store, order
