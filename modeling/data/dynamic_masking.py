"""Pre-training examples made from raw text in tf.data, masked afresh on
every pass (run_pretraining.py --input_format=text).

The input is the generator's: one sentence per line, a blank line between
documents. Lines are tokenized in the graph by `InGraphTokenizer` (the ids
of `FullTokenizer`), and instances follow the original's rules
(modeling/pretraining_data/generation.py holds them, draw for draw):

- per document a target length: max_seq_length - 3, or with probability
  short_seq_prob a random length in [2, max_seq_length - 3];
- sentences accumulate until the target (or the document's end); A is a
  random number of the chunk's leading sentences;
- B is the rest of the chunk, or (always for a one-sentence chunk, else with
  probability 0.5) sentences from a random other document, starting at a
  random one, until B reaches the rest of the target; the chunk's unused
  sentences are then "put back" and start the next chunk;
- the pair is cut to max_seq_length - 3 tokens by taking a token from the
  longer side (B on a tie), from the front or the back at random;
- round(len * masked_lm_prob) positions (at least 1, at most
  max_predictions_per_seq; len counts [CLS] and [SEP]) are drawn among the
  tokens other than [CLS] / [SEP] (whole words with do_whole_word_mask: a
  "##" piece joins the word before it); each becomes [MASK] with p=0.8,
  stays with p=0.1, becomes a random vocabulary word with p=0.1.

The examples are the feature dicts that `input_pipeline.pretraining_dataset`
gives (same names, dtypes and shapes), so the model and the training loop do
not know where they come from. They are NOT the records the static
generator writes for the same text and seed: the same distribution, other
draws. The differences from the static generator's scale mode, which this
resembles: text is read in blocks of whole documents (about BLOCK_LINES
lines) and a random next sentence comes from a document of the same block;
instances are shuffled in windows of SHUFFLE_BUFFER instances, not
globally; and the epochs replace dupe_factor: every pass over the text
draws new instances (targets, splits, next sentences) and new masks.

Where the work goes. Tokenizing and masking are vectorised over a block of
lines and over a batch. Cutting a block's documents into instances is a
`tf.while_loop` (the put-back makes each chunk depend on the draws of the
one before) that steps every document of the block at once, one sentence
per iteration; what follows a chunk's boundaries (the random next document,
B's extent, the truncation, the packing) is vectorised again.

Randomness is stateless: a block's draws come from (seed, epoch, file,
block) and a batch's masks from (seed, batch number), so the stream is a
pure function of the seed, and a resumed run skips the instances already
consumed (before masking, the cheap end) and continues exactly where an
uninterrupted run would be.

One module, over 500 lines: one tf.data pipeline, lines to masked examples,
whose steps mirror the generator's.
"""

import numpy as np
import tensorflow as tf

from modeling import errors
from modeling.data import feature_names
from modeling.data import file_io
from modeling.data import input_pipeline
from modeling.pretraining_data import exact
from modeling.pretraining_data import generation
from modeling.text import in_graph
from modeling.text import tokenization
from modeling.text import vocabulary

# Lines read at once: tokenized together, and the documents that end in them
# cut into instances together (a random next sentence comes from one of
# them). About 300 KB of English text.
BLOCK_LINES = 2048
# A document longer than this many blocks is cut there (its parts are made
# into instances as separate documents), so memory stays bounded on a file
# without blank lines.
MAX_DOCUMENT_BLOCKS = 8
# Instances shuffled together (a window of the stream, across blocks, files
# and epochs; ~512 bytes each at max_seq_length=128).
SHUFFLE_BUFFER = 10000
# Files read at once (interleaved), as the TFRecord reader's cycle.
CYCLE_LENGTH = 4

# Stateless streams: sub-keys of the seed, one per use.
_INSTANCE_STREAM = 1
_MASK_STREAM = 2
_ORDER_STREAM = 3
_SHUFFLE_STREAM = 4

# A line that Python's str.strip() leaves empty: the original's document
# separator (the in-graph strip knows ASCII whitespace only).
_BLANK_LINE = (
    in_graph._re2_class([(cp, cp) for cp in range(0x3001) if chr(cp).isspace()])
    + "*"
)


def _is_blank(lines):
    """Whether each line is blank: invalid bytes vanish first (this path
    reads text as create_pretraining_data --decode_errors=ignore does), so
    a line of nothing else is blank too."""
    valid = tf.strings.unicode_transcode(
        lines, "UTF-8", "UTF-8", errors="ignore"
    )
    return tf.strings.regex_full_match(valid, _BLANK_LINE)


def _key(seed, *path):
    """A stateless seed ([2] int32) for `seed` folded with `path`, so each
    use of randomness has its own independent stream."""
    key = tf.stack([tf.cast(seed, tf.int64), tf.constant(0, tf.int64)])
    for part in path:
        key = tf.random.experimental.stateless_fold_in(
            key, tf.cast(part, tf.int64)
        )
    return key


def _randint(uniform, n):
    """Integers uniform in [0, n) from uniform floats in [0, 1) (n >= 1)."""
    n = tf.cast(n, tf.int32)
    drawn = tf.cast(tf.floor(uniform * tf.cast(n, tf.float32)), tf.int32)
    return tf.minimum(drawn, n - 1)  # float rounding of u * n


class TextPretrainingData:
    """Raw text -> masked-LM / next-sentence batches (module docstring).

    Args:
      input_files: list of text files (`file_io.expand_input_files`).
      vocab_file: str, the vocabulary; needs [CLS], [SEP], [MASK].
      do_lower_case: bool.
      options: pretraining_data.GenerationOptions (max_seq_length,
        max_predictions_per_seq, masked_lm_prob, short_seq_prob,
        do_whole_word_mask; dupe_factor and random_seed are not used).
      block_lines: lines read at once (BLOCK_LINES).
      shuffle_buffer: instances shuffled together (SHUFFLE_BUFFER).

    Raises:
      errors.UserError: bad options or a vocabulary without the special
        tokens, naming the flag and file.
    """

    def __init__(
        self,
        input_files,
        vocab_file,
        do_lower_case,
        options,
        block_lines=BLOCK_LINES,
        shuffle_buffer=SHUFFLE_BUFFER,
    ):
        ids = _vocab_ids(vocab_file, options)
        self.input_files = list(input_files)
        self.options = options
        self.block_lines = int(block_lines)
        self.shuffle_buffer = int(shuffle_buffer)
        self.tokenizer = in_graph.InGraphTokenizer(vocab_file, do_lower_case)
        self.cls_id, self.sep_id, self.mask_id = (
            ids.cls_id,
            ids.sep_id,
            ids.mask_id,
        )
        self.random_word_ids = tf.constant(ids.random_word_ids, tf.int32)
        self.is_continuation = tf.constant(
            np.frombuffer(ids.is_continuation, np.uint8) > 0
        )
        self.num_to_predict = tf.constant(
            generation.num_to_predict_table(options), tf.int32
        )
        self.max_num_tokens = options.max_seq_length - 3

    # === The dataset ===

    def dataset(self, batch_size, is_training, seed, start_batch=0):
        """Batches of pre-training features, as `pretraining_dataset`.

        Training: epoch after epoch, each over the files in a new order
        (CYCLE_LENGTH at a time), each with new instances, shuffled in
        windows; every batch with its own masks. Eval: the first epoch's
        instances with the files in order, unshuffled, repeated; masks
        differ per batch but not per run.

        Args:
          batch_size: global batch size (drop_remainder).
          is_training: bool.
          seed: int, the data seed (the same seed gives the same batches).
          start_batch: number of batches to skip (resume).

        Returns:
          tf.data.Dataset of dicts of int32 / float32 Tensors
          [batch_size, ...], endless.
        """
        d = self.instances(is_training, seed)
        if start_batch:
            # Before masking, which is keyed by the batch number below.
            d = d.skip(int(start_batch) * batch_size)
        d = d.batch(batch_size, drop_remainder=True)
        d = d.enumerate(start=int(start_batch))
        d = d.map(
            input_pipeline.as_written(
                lambda number, batch: self.mask(
                    batch, _key(seed, _MASK_STREAM, number)
                )
            ),
            num_parallel_calls=tf.data.AUTOTUNE,
            deterministic=True,
        )
        return d.prefetch(tf.data.AUTOTUNE)

    def instances(self, is_training, seed):
        """The endless stream of unmasked instances (dicts of input_ids
        [max_seq_length], num_tokens, len_a and next_sentence_labels)."""
        files = tf.constant(self.input_files)
        num_files = len(self.input_files)

        def epoch(number):
            order = tf.range(num_files, dtype=tf.int64)
            if is_training:
                order = tf.random.experimental.stateless_shuffle(
                    order, _key(seed, _ORDER_STREAM, number)
                )
            return tf.data.Dataset.from_tensor_slices(order).interleave(
                input_pipeline.as_written(
                    lambda index: self._file_instances(
                        files[index],
                        _key(seed, _INSTANCE_STREAM, number, index),
                    )
                ),
                cycle_length=min(CYCLE_LENGTH, num_files),
                num_parallel_calls=tf.data.AUTOTUNE,
                deterministic=True,
            )

        if not is_training:
            return epoch(tf.constant(0, tf.int64)).repeat()
        # Shuffled a window at a time by a stateless permutation, not by
        # Dataset.shuffle, whose order also depends on TensorFlow's global
        # seed: the stream is a function of `seed` alone.
        d = tf.data.Dataset.counter().flat_map(input_pipeline.as_written(epoch))
        d = d.batch(self.shuffle_buffer).enumerate()
        return d.map(
            input_pipeline.as_written(
                lambda number, window: _permuted(
                    window, _key(seed, _SHUFFLE_STREAM, number)
                )
            ),
            num_parallel_calls=tf.data.AUTOTUNE,
            deterministic=True,
        ).unbatch()

    def _file_instances(self, path, key):
        """One file's instances, block after block."""
        blocks = self.blocks(tf.data.TextLineDataset(path)).enumerate()
        blocks = blocks.map(
            input_pipeline.as_written(
                lambda number, block: self.block_instances(
                    block, tf.random.experimental.stateless_fold_in(key, number)
                )
            ),
            num_parallel_calls=tf.data.AUTOTUNE,
            deterministic=True,
        )
        return blocks.unbatch()

    def blocks(self, lines):
        """One file's lines (a dataset of strings) in blocks of whole
        documents: about block_lines lines each, cut after a blank line;
        a document longer than MAX_DOCUMENT_BLOCKS blocks is cut."""
        # A blank line at the end closes the file's last document: documents
        # do not continue across files (as in the static scale mode).
        lines = lines.concatenate(tf.data.Dataset.from_tensors(""))
        blocks = lines.batch(self.block_lines).scan(
            tf.constant([], tf.string),
            input_pipeline.as_written(self._whole_documents),
        )
        return blocks.filter(
            input_pipeline.as_written(lambda block: tf.size(block) > 0)
        )

    def _whole_documents(self, carry, lines):
        """scan step: emits the lines up to the last blank one and carries
        the rest (an unfinished document) over to the next batch of lines."""
        lines = tf.concat([carry, lines], axis=0)
        size = tf.size(lines)
        blank = _is_blank(lines)
        last_blank = tf.reduce_max(
            tf.where(blank, tf.range(size), -tf.ones_like(size))
        )
        cut = tf.where(
            last_blank >= 0,
            last_blank + 1,
            tf.where(size > MAX_DOCUMENT_BLOCKS * self.block_lines, size, 0),
        )
        return lines[cut:], lines[:cut]

    # === Instances of one block ===

    def block_instances(self, lines, key):
        """Tokenizes a block of whole documents and cuts it into instances.

        Args:
          lines: string Tensor [num_lines]; a blank line ends a document.
          key: stateless seed of the block.

        Returns:
          dict of Tensors with a leading dimension of num_instances:
          input_ids [n, max_seq_length] ([CLS] A [SEP] B [SEP], 0-padded),
          num_tokens, len_a (A's tokens) and next_sentence_labels (1: B is
          a random next sentence).
        """
        segments, document = self.segments(lines)
        return tf.cond(
            tf.size(document) > 0,
            lambda: self.segment_instances(segments, document, key),
            self._no_instances,
        )

    def segments(self, lines):
        """Tokenizes lines into the sentences of documents.

        As the original reads text: a blank line (after str.strip) starts a
        new document, a line without tokens is dropped without starting
        one, and documents without sentences vanish.

        Returns:
          (segments, document): int32 RaggedTensor [num_segments, (tokens)]
          and int32 [num_segments], each sentence's document: 0, 1, ...
        """
        blank = _is_blank(lines)
        tokens = self.tokenizer.tokenize(lines)
        document = tf.cumsum(tf.cast(blank, tf.int32))
        keep = tf.logical_and(tf.logical_not(blank), tokens.row_lengths() > 0)
        _, document = tf.unique(tf.boolean_mask(document, keep))
        return tf.ragged.boolean_mask(tokens, keep), document

    def _no_instances(self):
        return {
            "input_ids": tf.zeros([0, self.options.max_seq_length], tf.int32),
            "num_tokens": tf.zeros([0], tf.int32),
            "len_a": tf.zeros([0], tf.int32),
            feature_names.NEXT_SENTENCE_LABELS: tf.zeros([0], tf.int32),
        }

    def segment_instances(self, segments, document, key):
        """Instances of tokenized documents (see `block_instances`).

        Args:
          segments: int32 RaggedTensor [num_segments, (tokens)], no empty
            row: the sentences, document after document.
          document: int32 [num_segments], each sentence's document,
            0, 1, ... in order.
          key: stateless seed.
        """
        max_num_tokens = self.max_num_tokens
        flat = segments.flat_values
        seg_len = tf.cast(segments.row_lengths(), tf.int32)
        # Sentence j is flat[offset[j]:offset[j + 1]].
        offset = tf.concat([[0], tf.cumsum(seg_len)], axis=0)
        index = tf.range(tf.size(document))
        doc_start = tf.math.segment_min(index, document)
        doc_end = tf.math.segment_max(index, document) + 1
        num_docs = tf.size(doc_start)

        # The target length, once per document.
        u = tf.random.stateless_uniform([num_docs, 2], _key_of(key, 0))
        target = tf.where(
            u[:, 0] < self.options.short_seq_prob,
            2 + _randint(u[:, 1], max_num_tokens - 1),
            max_num_tokens,
        )
        chunks = self._chunks(offset, doc_start, doc_end, target, key)
        doc, chunk_start, a_end, chunk_end, is_random = chunks

        # A: the chunk's first sentences; B: the rest of the chunk, or
        # sentences of a random other document.
        a_start = tf.gather(offset, chunk_start)
        len_a = tf.gather(offset, a_end) - a_start
        num = tf.size(doc)
        u = tf.random.stateless_uniform([num, 11], _key_of(key, 2))
        # Ten tries at a document other than this one; after ten misses B
        # comes from this same one (still labelled random), as the original.
        tries = _randint(u[:, :10], num_docs)
        other = tries != doc[:, None]
        first = tf.argmax(
            tf.cast(other, tf.int32), axis=1, output_type=tf.int32
        )
        random_doc = tf.where(
            tf.reduce_any(other, axis=1),
            tf.gather(tries, first, batch_dims=1),
            tries[:, 9],
        )
        r_start = tf.gather(doc_start, random_doc)
        r_end = tf.gather(doc_end, random_doc)
        first_segment = r_start + _randint(u[:, 10], r_end - r_start)
        # Whole sentences from there until B reaches the target's rest.
        start_offset = tf.gather(offset, first_segment)
        want = tf.gather(target, doc) - len_a
        past = tf.searchsorted(offset, start_offset + want, side="left")
        last_segment = tf.clip_by_value(
            tf.cast(past, tf.int32) - 1, first_segment, r_end - 1
        )
        b_start = tf.where(is_random, start_offset, tf.gather(offset, a_end))
        b_stop = tf.where(
            is_random,
            tf.gather(offset, last_segment + 1),
            tf.gather(offset, chunk_end),
        )
        len_b = b_stop - b_start

        # The original's truncate_seq_pair: how many tokens each side loses
        # is fixed by the lengths; each loss is from the front with p=0.5.
        keep_a, keep_b = in_graph.truncated_lengths(
            len_a, len_b, max_num_tokens
        )
        front = tf.random.stateless_binomial(
            [2, num],
            _key_of(key, 3),
            counts=tf.cast(
                tf.stack([len_a - keep_a, len_b - keep_b]), tf.float32
            ),
            probs=0.5,
            output_dtype=tf.int32,
        )
        input_ids = self._pack(
            flat, a_start + front[0], keep_a, b_start + front[1], keep_b
        )
        return {
            "input_ids": input_ids,
            "num_tokens": keep_a + keep_b + 3,
            "len_a": keep_a,
            feature_names.NEXT_SENTENCE_LABELS: tf.cast(is_random, tf.int32),
        }

    def _chunks(self, offset, doc_start, doc_end, target, key):
        """The original's chunking loop, every document at once.

        The original adds sentences to a chunk until it reaches the target
        length or the document's end; here each iteration finds that end
        at once (a search in the sentence offsets) and closes one chunk of
        every unfinished document. A closed chunk draws A's end and the
        next-sentence coin; a random-next one puts its sentences after A
        back (the next chunk starts there). Each chunk starts after the one
        before, so a document takes at most one iteration per sentence.

        Returns:
          (doc, chunk_start, a_end, chunk_end, is_random) per chunk, in
          sentence indexes; is_random bool.
        """
        num_docs = tf.size(doc_start)
        loop_key = _key_of(key, 1)

        def body(step, start, chunks):
            active = start < doc_end
            # The first sentence that takes the chunk to the target.
            reach = tf.gather(offset, tf.minimum(start, doc_end - 1)) + target
            end = tf.minimum(
                tf.searchsorted(offset, reach, side="left"), doc_end
            )
            size = end - start
            u = tf.random.stateless_uniform(
                [2, num_docs], tf.stack([loop_key[0], loop_key[1] + step])
            )
            a_end = start + 1 + _randint(u[0], tf.maximum(size - 1, 1))
            # No coin for a one-sentence chunk: B is always random.
            is_random = (size == 1) | (u[1] < 0.5)
            chunks = chunks.write(
                step,
                tf.stack(
                    [
                        tf.cast(active, tf.int32),
                        start,
                        a_end,
                        end,
                        tf.cast(is_random, tf.int32),
                    ]
                ),
            )
            following = tf.where(is_random, a_end, end)
            return step + 1, tf.where(active, following, start), chunks

        chunks = tf.TensorArray(
            tf.int32, size=0, dynamic_size=True, element_shape=[5, None]
        )
        _, _, chunks = tf.while_loop(
            lambda step, start, _: tf.reduce_any(start < doc_end),
            body,
            (0, doc_start, chunks),
        )
        # [steps, 5, docs] -> [5, steps, docs] -> the chunks made.
        table = tf.transpose(chunks.stack(), [1, 0, 2])
        where = tf.where(table[0] > 0)
        doc = tf.cast(where[:, 1], tf.int32)
        fields = [tf.gather_nd(table[k], where) for k in range(1, 5)]
        return doc, fields[0], fields[1], fields[2], fields[3] > 0

    def _pack(self, flat, a_start, len_a, b_start, len_b):
        """[CLS] A [SEP] B [SEP] rows, 0-padded to max_seq_length."""
        position = tf.range(self.options.max_seq_length)[None, :]
        len_a, len_b = len_a[:, None], len_b[:, None]
        in_a = (position >= 1) & (position <= len_a)
        in_b = (position >= len_a + 2) & (position < len_a + 2 + len_b)
        source = tf.where(
            in_a,
            a_start[:, None] + position - 1,
            b_start[:, None] + position - len_a - 2,
        )
        source = tf.clip_by_value(source, 0, tf.size(flat) - 1)
        ids = tf.where(in_a | in_b, tf.gather(flat, source), 0)
        is_sep = (position == len_a + 1) | (position == len_a + len_b + 2)
        ids = tf.where(is_sep, self.sep_id, ids)
        return tf.where(position == 0, self.cls_id, ids)

    # === Masking a batch ===

    def mask(self, batch, key):
        """Masks a batch of instances; returns the pre-training features.

        Args:
          batch: dict of batched instances (`block_instances`).
          key: stateless seed of this batch.

        Returns:
          dict: input_ids, input_mask, segment_ids [B, max_seq_length],
          masked_lm_positions, masked_lm_ids (int32) and masked_lm_weights
          (float32) [B, max_predictions_per_seq], next_sentence_labels
          [B, 1], as the records' parser gives them.
        """
        ids = batch["input_ids"]
        num_tokens = batch["num_tokens"][:, None]
        len_a = batch["len_a"][:, None]
        seq = self.options.max_seq_length
        preds = self.options.max_predictions_per_seq
        position = tf.range(seq)[None, :]
        real = position < num_tokens
        # [CLS] and the two [SEP] are never masked.
        candidate = (
            real
            & (position > 0)
            & (position != len_a + 1)
            & (position != num_tokens - 1)
        )
        budget = tf.gather(self.num_to_predict, batch["num_tokens"])
        u = tf.random.stateless_uniform([4, tf.shape(ids)[0], seq], key)
        if self.options.do_whole_word_mask:
            chosen = self._choose_words(ids, candidate, budget, u[0])
        else:
            # The `budget` candidates with the smallest keys: a uniform
            # draw without replacement, as the original's shuffle.
            keys = tf.where(candidate, u[0], 2.0)
            rank = tf.argsort(tf.argsort(keys, axis=1), axis=1)
            chosen = candidate & (rank < budget[:, None])
        # The 80/10/10 replacement.
        words = tf.gather(
            self.random_word_ids,
            _randint(u[2], tf.size(self.random_word_ids)),
        )
        replaced = tf.where(
            u[1] < 0.8, self.mask_id, tf.where(u[3] < 0.5, ids, words)
        )
        masked_ids = tf.where(chosen, replaced, ids)
        # Chosen positions in ascending order (as the records list them),
        # padded with position 0, id 0 and weight 0.
        order = tf.argsort(
            tf.where(chosen, position, seq + position), axis=1, stable=True
        )[:, :preds]
        if preds > seq:
            # More prediction slots than positions (allowed, as the records
            # pad them): the rest point at [CLS], never chosen, weight 0.
            order = tf.pad(order, [[0, 0], [0, preds - seq]])
        weights = tf.gather(chosen, order, batch_dims=1)
        positions = tf.where(weights, order, 0)
        lm_ids = tf.where(weights, tf.gather(ids, order, batch_dims=1), 0)
        segment_ids = tf.cast(real & (position >= len_a + 2), tf.int32)
        features = dict(
            zip(
                feature_names.PRETRAINING_SEQ_FEATURES,
                (masked_ids, tf.cast(real, tf.int32), segment_ids),
            )
        )
        features.update(
            zip(
                feature_names.PRETRAINING_PRED_INT_FEATURES, (positions, lm_ids)
            )
        )
        (weights_name,) = feature_names.PRETRAINING_PRED_FLOAT_FEATURES
        features[weights_name] = tf.cast(weights, tf.float32)
        labels = batch[feature_names.NEXT_SENTENCE_LABELS]
        features[feature_names.NEXT_SENTENCE_LABELS] = labels[:, None]
        return features

    def _choose_words(self, ids, candidate, budget, uniform):
        """Whole-word masking: words in random order, each taken whole if
        it still fits the budget (a word that would overflow is skipped, a
        later shorter one may fit), as the original.

        A "##" piece continues the word before it, even across the [SEP]
        between A and B; the first candidate always starts a word.
        """
        seq = self.options.max_seq_length
        cont = tf.gather(self.is_continuation, ids)
        first = candidate & (tf.cumsum(tf.cast(candidate, tf.int32), 1) == 1)
        starts = candidate & (first | tf.logical_not(cont))
        word = tf.cumsum(tf.cast(starts, tf.int32), axis=1) - 1
        word = tf.where(candidate, word, seq)  # seq: no word
        # Per (row, word) sums and minimums as segments of the flattened
        # batch: O(batch x seq) memory (a one-hot over words was seq times
        # that, hundreds of MB per seq-512 batch).
        rows = tf.shape(ids)[0]
        segment = word + tf.range(rows)[:, None] * (seq + 1)
        num_segments = rows * (seq + 1)

        def per_word(reduce, values):
            out = reduce(values, segment, num_segments)
            return tf.reshape(out, [rows, seq + 1])[:, :seq]  # [B, words]

        word_len = per_word(tf.math.unsorted_segment_sum, tf.ones_like(word))
        # A word's random key is its first piece's.
        keys = tf.where(starts, uniform, 2.0)
        word_key = per_word(tf.math.unsorted_segment_min, keys)
        word_key = tf.where(word_len > 0, word_key, 3.0)
        order = tf.argsort(word_key, axis=1)
        lengths = tf.gather(word_len, order, batch_dims=1)

        def take(count, length):
            fits = (length > 0) & (count < budget) & (count + length <= budget)
            return count + tf.where(fits, length, 0)

        counts = tf.scan(
            take,
            tf.transpose(lengths),
            initializer=tf.zeros_like(budget),
        )
        previous = tf.concat([tf.zeros_like(counts[:1]), counts[:-1]], axis=0)
        taken_sorted = tf.transpose(counts > previous)
        # Back from key order to word order, then to positions.
        taken = tf.gather(taken_sorted, tf.argsort(order, axis=1), batch_dims=1)
        taken = tf.concat([taken, tf.zeros_like(taken[:, :1])], axis=1)
        return candidate & tf.gather(taken, word, batch_dims=1)


def _permuted(window, key):
    """The instances of a window in a random order."""
    size = tf.shape(window["input_ids"])[0]
    order = tf.random.experimental.stateless_shuffle(tf.range(size), key)
    return {name: tf.gather(value, order) for name, value in window.items()}


def _key_of(key, part):
    return tf.random.experimental.stateless_fold_in(key, part)


# === Checks before training ===


def _vocab_ids(vocab_file, options):
    """The generation.VocabIds of vocab_file, once options are checked.

    Raises:
      errors.UserError: naming the flag or the vocabulary file.
    """
    try:
        options.validate()
    except ValueError as e:
        raise errors.UserError(f"--input_format=text: {e}") from None
    vocab = vocabulary.load_vocab(vocab_file)
    try:
        vocabulary.require_special_tokens(
            vocab,
            (
                vocabulary.CLS_TOKEN,
                vocabulary.SEP_TOKEN,
                vocabulary.MASK_TOKEN,
                vocabulary.UNK_TOKEN,
            ),
            "pre-training data from text",
        )
    except ValueError as e:
        raise errors.UserError(f"--vocab_file={vocab_file}: {e}") from None
    return generation.VocabIds(vocab)


def check_text_input(input_files, vocab_file, do_lower_case, options):
    """The checks before training from text, without running TensorFlow
    (a multi-worker strategy must be created first): the options, the
    vocabulary's special tokens, and some input line that tokenizes to
    something (an endless dataset over text without any token would never
    yield a batch).

    Reads each file only up to its first such line: cheap on any real
    corpus.

    Raises:
      errors.UserError / ValueError: naming the flag, the vocabulary or
        the input files.
    """
    _vocab_ids(vocab_file, options)
    tokenizer = tokenization.FullTokenizer(
        vocab_file=vocab_file, do_lower_case=do_lower_case
    )
    for path in input_files:
        for line in _lines(path):
            if line.strip() and tokenizer.tokenize(line):
                return
    # The static generator's message.
    exact.check_documents([], input_files)


def _lines(path):
    """The lines of a file, decoded as the in-graph tokenizer does (bytes
    that are not UTF-8 dropped)."""
    if file_io.is_remote(path):
        opened = tf.io.gfile.GFile(path, "rb")
    else:
        opened = open(path, "rb")  # noqa: SIM115
    with opened as f:
        for raw in f:
            yield raw.decode("utf-8", "ignore")
