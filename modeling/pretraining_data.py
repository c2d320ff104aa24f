"""Masked-LM / next-sentence instances, exactly as the original release.

This is google-research/bert `create_pretraining_data.py` (spec:
../shared/spec/original_release.md section 1.2 and the audit's list A1-A15)
rebuilt on token ids. For the same documents, options and seed it makes the
same instances as the original: every draw from the one `random.Random`
comes in the original's order (document shuffle; per document and pass the
short-sequence draw; per chunk the A/B split, the next-sentence coin, the
random document and start; one draw per truncated token; the candidate
shuffle and the 80/10/10 draws of masking; the final instance shuffle).

What differs is the inside: documents are tuples of ids, instances are
kept as flat arrays of ids (no lists of strings) and encoded as they are
written, and the hot random calls are inlined. The inlined calls are the
ones CPython's `random.Random` makes itself (`shuffle` and `randint` both
reduce to `_randbelow`, i.e. `getrandbits(n.bit_length())` with rejection),
so the stream consumed is the same; tests compare states after each call.

Reading text is in pretraining_data_text.py, records and output files in
pretraining_data_records.py, the parallel mode in pretraining_data_scale.py.
"""

import array
import dataclasses
import random

from absl import logging

from modeling import pretraining_data_records
from modeling import pretraining_data_text
from modeling import vocabulary

# Shuffles of up to this many items (candidate lists) memoize their steps.
_MAX_MEMO_SHUFFLE = 4096


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
        max_num_tokens = self.max_seq_length - 3
        if not 1 <= self.max_predictions_per_seq <= max_num_tokens:
            raise ValueError(
                f"max_predictions_per_seq={self.max_predictions_per_seq}: "
                f"must be between 1 and max_seq_length - 3 = "
                f"{max_num_tokens}, the most tokens a sequence can mask"
            )
        if not 0.0 < self.masked_lm_prob <= 1.0:
            raise ValueError(
                f"masked_lm_prob={self.masked_lm_prob}: must be in (0, 1]"
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


def randbelow(n, getrandbits):
    """CPython's `Random._randbelow(n)`: `randint(a, a+n-1)` is `a+this`."""
    k = n.bit_length()
    r = getrandbits(k)
    while r >= n:
        r = getrandbits(k)
    return r


def _shuffle_steps(n, cache={}):  # noqa: B006 (a deliberate memo)
    """((i, bit_length(i + 1)) for i = n-1 .. 1): the draws of a shuffle."""
    steps = cache.get(n)
    if steps is None:
        steps = tuple((i, (i + 1).bit_length()) for i in range(n - 1, 0, -1))
        if n <= _MAX_MEMO_SHUFFLE:
            cache[n] = steps
    return steps


def shuffle(x, getrandbits):
    """CPython's `Random.shuffle(x)` with `_randbelow` inlined (3x faster).

    Step i swaps x[i] with x[r], r = `_randbelow(i + 1)`: the top
    `bit_length(i + 1)` bits of one 32-bit output, redrawn while r > i.
    """
    for i, k in _shuffle_steps(len(x)):
        r = getrandbits(k)
        while r > i:
            r = getrandbits(k)
        x[i], x[r] = x[r], x[i]


def sample(x, m, getrandbits):
    """The first `m` items of a random permutation of `x` (x is changed).

    A Fisher-Yates shuffle from the front stopped after `m` steps: every
    m-subset in every order is equally likely, with `m` draws instead of
    `len(x) - 1`. Not the original's stream; the scale mode uses it.
    """
    n = len(x)
    m = min(m, n)
    for i in range(m):
        j = i + randbelow(n - i, getrandbits)
        x[i], x[j] = x[j], x[i]
    return x[:m]


class InstanceMaker:
    """Makes the instances of one document at a time (the original's
    `create_instances_from_document` and `create_masked_lm_predictions`).

    Each instance goes to `emit(input_ids, len_a, len_b, positions,
    label_ids, is_random_next)` as soon as it is made.
    """

    def __init__(self, documents, options, vocab_ids, rng, emit, exact=True):
        self.documents = documents
        # exact=False (scale mode) draws only the masked positions of a
        # shuffle: the same distribution, fewer draws, another stream.
        self.partial_shuffle = not exact and not options.do_whole_word_mask
        self.max_num_tokens = options.max_seq_length - 3
        self.short_seq_prob = options.short_seq_prob
        self.do_whole_word_mask = options.do_whole_word_mask
        self.ids = vocab_ids
        self.random = rng.random
        self.getrandbits = rng.getrandbits
        self.emit = emit
        # num_to_predict for each sequence length, with the original's
        # float product and Python 3 round() (ties to even: 30 -> 4).
        self.num_to_predict = [
            min(
                options.max_predictions_per_seq,
                max(1, round(n * options.masked_lm_prob)),
            )
            for n in range(options.max_seq_length + 1)
        ]

    def from_document(self, document_index):
        """Makes the instances of one document for one pass."""
        document = self.documents[document_index]
        # The target is drawn once per document and pass, before any chunk.
        target = self.max_num_tokens
        if self.random() < self.short_seq_prob:
            target = 2 + randbelow(self.max_num_tokens - 1, self.getrandbits)
        chunk_start = 0
        length = 0
        i = 0
        while i < len(document):
            length += len(document[i])
            if i == len(document) - 1 or length >= target:
                chunk = document[chunk_start : i + 1]
                # Unused segments of a random-next chunk are "put back".
                i -= self._from_chunk(document_index, chunk, target)
                chunk_start = i + 1
                length = 0
            i += 1

    def _from_chunk(self, document_index, chunk, target):
        """Makes one instance; returns how many segments were put back."""
        a_end = 1
        if len(chunk) >= 2:
            a_end = 1 + randbelow(len(chunk) - 1, self.getrandbits)
        tokens_a = []
        for segment in chunk[:a_end]:
            tokens_a.extend(segment)
        # No coin is drawn for a one-segment chunk (audit E1).
        if len(chunk) == 1 or self.random() < 0.5:
            is_random_next = True
            tokens_b = self._random_next(document_index, target - len(tokens_a))
            put_back = len(chunk) - a_end
        else:
            is_random_next = False
            tokens_b = []
            for segment in chunk[a_end:]:
                tokens_b.extend(segment)
            put_back = 0
        tokens_a, tokens_b = self._truncate(tokens_a, tokens_b)
        self._mask_and_emit(tokens_a, tokens_b, is_random_next)
        return put_back

    def _random_next(self, document_index, target_b_length):
        """Segment B from a random other document (10 tries, as original)."""
        documents = self.documents
        for _ in range(10):
            random_index = randbelow(len(documents), self.getrandbits)
            if random_index != document_index:
                break
        # After 10 misses B comes from this same document, still labelled
        # random next (audit A5).
        random_document = documents[random_index]
        start = randbelow(len(random_document), self.getrandbits)
        tokens_b = []
        for segment in random_document[start:]:
            tokens_b.extend(segment)
            if len(tokens_b) >= target_b_length:
                break
        return tokens_b

    def _truncate(self, tokens_a, tokens_b):
        """The original's truncate_seq_pair, on index ranges."""
        a_lo, a_hi, b_lo, b_hi = 0, len(tokens_a), 0, len(tokens_b)
        if a_hi + b_hi <= self.max_num_tokens:
            return tokens_a, tokens_b
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
        return tokens_a[a_lo:a_hi], tokens_b[b_lo:b_hi]

    def _candidates(self, tokens, len_a):
        """Index groups that may be masked; [CLS] and [SEP] never are."""
        n = len(tokens)
        if not self.do_whole_word_mask:
            return [*range(1, len_a + 1), *range(len_a + 2, n - 1)]
        groups = []
        continuation = self.ids.is_continuation
        for i in range(1, n - 1):
            if i == len_a + 1:
                continue
            # A "##" piece joins the previous group, even across the
            # [SEP] between A and B (audit A10).
            if groups and continuation[tokens[i]]:
                groups[-1].append(i)
            else:
                groups.append([i])
        return groups

    def _choose(self, candidates, num_to_predict):
        """Shuffles the candidates and picks the positions to mask."""
        if self.partial_shuffle:
            return sample(candidates, num_to_predict, self.getrandbits)
        shuffle(candidates, self.getrandbits)
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

    def _mask_and_emit(self, tokens_a, tokens_b, is_random_next):
        ids = self.ids
        tokens = [ids.cls_id, *tokens_a, ids.sep_id, *tokens_b, ids.sep_id]
        num_to_predict = self.num_to_predict[len(tokens)]
        candidates = self._candidates(tokens, len(tokens_a))
        positions = self._choose(candidates, num_to_predict)
        output = list(tokens)
        random = self.random
        words = ids.random_word_ids
        for index in positions:
            if random() < 0.8:
                output[index] = ids.mask_id
            elif random() >= 0.5:
                output[index] = words[randbelow(len(words), self.getrandbits)]
            # else: 10% of the time the token stays as it is.
        positions.sort()
        labels = [tokens[p] for p in positions]
        self.emit(
            output,
            len(tokens_a),
            len(tokens_b),
            positions,
            labels,
            is_random_next,
        )


def generate_records(
    documents, options, vocab_ids, rng, exact=True, log_passes=True
):
    """All passes over `documents`, then the original's final shuffle.

    Args:
      documents: list of documents, each a non-empty list of non-empty
        tuples of token ids (one per line); shuffled in place by `rng`.
      options: GenerationOptions.
      vocab_ids: VocabIds.
      rng: random.Random, consumed exactly as the original consumes it.
      exact: bool, False for the scale mode's cheaper masking draws.
      log_passes: bool, whether to log progress after each pass.

    Returns:
      (store, order): an InstanceStore of the instances in the order they
      were made, and an array of their indexes in output order.
    """
    rng.shuffle(documents)
    store = pretraining_data_records.InstanceStore(vocab_ids.num_ids)
    maker = InstanceMaker(
        documents, options, vocab_ids, rng, store.append, exact
    )
    for pass_index in range(options.dupe_factor):
        for document_index in range(len(documents)):
            maker.from_document(document_index)
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


def make_rng(seed):
    """The original's generator: `random.Random(seed)`."""
    return random.Random(seed)


def log_read_stats(stats, input_files):
    logging.info("Read %d file(s): %s", len(input_files), stats.summary())
    if stats.decode_error_lines:
        logging.warning(
            "%d line(s) held bytes that are not UTF-8 (decoded per "
            "--decode_errors)",
            stats.decode_error_lines,
        )


def check_documents(documents, input_files):
    if not documents:
        raise ValueError(
            "No text to make instances from: the input files hold no line "
            f"that tokenizes to anything ({', '.join(input_files)})"
        )


def write_records(records, output_files, inv_vocab, num_logged=20):
    """Writes records round-robin, atomically; logs the first `num_logged`.

    Returns:
      int, the number of records written.
    """
    with pretraining_data_records.AtomicRecordWriters(output_files) as out:
        for record in records:
            if out.num_written < num_logged:
                pretraining_data_records.log_instance(record, inv_vocab)
            out.write(record)
        if not out.num_written:
            raise ValueError("No instance was made; no output written")
        out.commit()
    logging.info("Wrote %d total instances", out.num_written)
    return out.num_written


def create_exact(
    input_files, output_files, tokenizer, options, decode_errors="strict"
):
    """The original's whole run: same records for the same inputs and seed.

    Args:
      input_files: list of str, read in this order.
      output_files: list of str; records go round-robin, from the first.
      tokenizer: tokenization.FullTokenizer.
      options: GenerationOptions.
      decode_errors: "strict", "replace" or "ignore".

    Returns:
      dict of counts: instances, and ReadStats fields.

    Raises:
      ValueError: bad options, vocabulary, text or output files; no output
        file is left behind.
    """
    options.validate()
    pretraining_data_records.check_output_files(output_files, input_files)
    vocab_ids = VocabIds(tokenizer.vocab)
    line_tokenizer = pretraining_data_text.LineTokenizer(tokenizer)
    documents, stats = pretraining_data_text.read_documents(
        input_files, line_tokenizer, decode_errors
    )
    log_read_stats(stats, input_files)
    check_documents(documents, input_files)
    encoder = pretraining_data_records.RecordEncoder(
        options.max_seq_length,
        options.max_predictions_per_seq,
        vocab_ids.num_ids,
    )
    rng = make_rng(options.random_seed)
    store, order = generate_records(documents, options, vocab_ids, rng)
    del documents
    logging.info(
        "Made %d instances (%.1f MB in memory)", len(store), store.nbytes / 1e6
    )
    records = (encoder.encode(*store.instance(i)) for i in order)
    written = write_records(records, output_files, tokenizer.inv_vocab)
    return {"instances": written, **dataclasses.asdict(stats)}
