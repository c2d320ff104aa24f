"""Serving SavedModel for run_squad.py: a question and its context in, the
answer text out.

    import tensorflow_text  # noqa: F401 (registers the ops)
    loaded = tf.saved_model.load(export_dir)
    out = loaded.signatures["serving_default"](
        question=tf.constant(["Who ...?"]), context=tf.constant(["..."]))
    out["answer"]           # string [batch]
    out["score"]            # float32 [batch], start + end logit of it
    out["null_score_diff"]  # float32 [batch] (SQuAD 2.0: > threshold -> "")

The graph does what modeling/data/squad.py and squad_postprocess.py do in
Python, for the best answer only:

- the context is split into words on the original's paragraph whitespace
  (space, tab, CR, LF, U+202F), each word into its WordPieces (the in-graph
  tokenizer: FullTokenizer's ids); the question is cut to max_query_length
  pieces;
- long contexts become windows of max_seq_length - len(question) - 3
  pieces every doc_stride pieces, and a piece may start an answer only in
  the window where it has the most context (min(left, right) + 0.01 *
  length in float64, the earliest window on a tie), as the original;
- the candidates of a window are the pairs of its n_best_size best starts
  and ends inside the context, end >= start, at most max_answer_length
  pieces; the answer is the candidate of highest start + end logit over the
  windows of the question. The n best are ranked over every position of the
  window's max_seq_length row, its padding included, as the original ranks
  them (a padding position never starts an answer, but may take one of
  the n places), so each window runs at full length. An export of a
  --fast_nbest run pads each batch to its longest row instead and ranks
  each window's own positions only (run_squad's AnswerPredictor.logits
  says what that changes). Either way a question's answer does not depend
  on the other questions of its batch;
- its text is the original words it covers, cut inside the first and last
  word to the characters of its pieces, as `get_final_text` does. Where
  that function gives up and returns the whole words (a word of the answer
  whose normalized form has another length than it: an accent dropped
  from a decomposed letter, a deleted control character; an [UNK] piece),
  so does the graph.
- a question with no valid span (every one of the n best starts or ends
  outside the context) gets "" (the original's predictions.json says
  "empty");
- SQuAD 2.0 (an export of a --version_2_with_negative run): the null score
  is the least [CLS] start + end logit over the windows, and the answer is
  "" where null score - best start logit - best end logit >
  null_score_diff_threshold, in float64 as the original's Python floats
  (a --best_null_threshold is one question's difference: in float32 that
  question could fall on either side of it).

Where it may differ from run_squad.py's predictions.json: get_final_text
finds the answer's pieces by the first match of their text in the words'
tokenized text (the graph uses their position; the two differ only when
the same text occurs earlier in the answer's first word).
"""

import tensorflow as tf

from modeling import models
from modeling.export import base
from modeling.text import in_graph
from modeling.text import vocabulary

# The original's paragraph whitespace (modeling/data/squad.py).
_PARAGRAPH_WHITESPACE = "[ \\t\\r\\n\\x{202f}]+"


def piece_char_lengths(tokens):
    """Characters each vocabulary entry stands for in the normalized text:
    "##" continuations without their prefix; -1 for [UNK] (it stands for a
    whole basic token, of any length)."""
    lengths = []
    for token in tokens:
        if token == vocabulary.UNK_TOKEN:
            lengths.append(-1)
        elif token.startswith("##"):
            lengths.append(len(token) - 2)
        else:
            lengths.append(len(token))
    return lengths


def doc_windows(num_pieces, max_doc, doc_stride):
    """modeling/data/squad.doc_spans for a batch, as tensors.

    Args:
      num_pieces: int32 [B], context pieces per question.
      max_doc: int32 [B], pieces a window of each question holds.
      doc_stride: int.

    Returns:
      (example, start, length): int32 [W] for every window, the windows of
      a question consecutive and in order.
    """
    step = tf.minimum(max_doc, doc_stride)
    extra = tf.maximum(num_pieces - max_doc, 0)
    count = 1 + (extra + step - 1) // step
    example = tf.repeat(tf.range(tf.size(count)), count)
    index = tf.ragged.range(count).flat_values
    start = index * tf.gather(step, example)
    length = tf.minimum(
        tf.gather(max_doc, example), tf.gather(num_pieces, example) - start
    )
    return example, start, length


class SquadServer(base.Server):
    """Raw questions and contexts -> answers (run_squad's model).

    Args:
      model: the fine-tuned BertSpanLabeler (features -> start/end logits).
      vocab_file, do_lower_case, max_seq_length, doc_stride,
      max_query_length, n_best_size, max_answer_length,
      version_2_with_negative, null_score_diff_threshold, fast_nbest: the
      run's flags.
    """

    def __init__(
        self,
        model,
        vocab_file,
        do_lower_case,
        max_seq_length,
        doc_stride,
        max_query_length,
        n_best_size,
        max_answer_length,
        version_2_with_negative,
        null_score_diff_threshold,
        fast_nbest=False,
    ):
        super().__init__(name="squad_server")
        self.model = models.float32_twin(model)
        text = in_graph.TextPreprocessor(
            vocab_file, do_lower_case, max_seq_length
        )
        self.tokenizer, self.packer = text.tokenizer, text.packer
        tokens = vocabulary.read_vocab_lines(vocab_file)
        self.piece_lengths = tf.constant(piece_char_lengths(tokens), tf.int32)
        self.max_seq_length = max_seq_length
        self.doc_stride = doc_stride
        self.max_query_length = max_query_length
        self.n_best_size = n_best_size
        self.max_answer_length = max_answer_length
        self.version_2_with_negative = version_2_with_negative
        self.null_score_diff_threshold = null_score_diff_threshold
        self.fast_nbest = fast_nbest

    @tf.function(
        input_signature=[
            tf.TensorSpec([None], tf.string, "question"),
            tf.TensorSpec([None], tf.string, "context"),
        ],
        autograph=False,
    )
    def serve_text(self, question, context):
        # One context per question: other sizes failed deep in the graph
        # ("Detected at node sub_4"), which told a caller nothing.
        check = tf.debugging.assert_equal(
            tf.size(question),
            tf.size(context),
            message="question and context must have the same batch size",
        )
        with tf.control_dependencies([check]):
            question = tf.identity(question)
            context = tf.identity(context)
        batch = tf.shape(question)[0]
        query = tf.cast(self.tokenizer.tokenize(question), tf.int32)
        query = query[:, : self.max_query_length]
        # The context's words, then each word's pieces.
        words = tf.strings.split(
            tf.strings.strip(
                tf.strings.regex_replace(context, _PARAGRAPH_WHITESPACE, " ")
            ),
            sep=" ",
        )
        words = tf.ragged.boolean_mask(words, tf.strings.length(words) > 0)
        flat_words = words.flat_values
        # [words, (basic tokens), (pieces)]: tokenize's ids, grouped so an
        # [UNK] piece knows the length of the token it stands for.
        basic = self.tokenizer.basic_tokens(flat_words)
        basic_len = tf.strings.length(basic.flat_values, unit="UTF8_CHAR")
        grouped = tf.cast(self.tokenizer.tokenize_basic_tokens(basic), tf.int32)
        word_pieces = grouped.merge_dims(1, 2)
        # [B, (pieces)] and each piece's word (an index into flat_words).
        pieces = tf.RaggedTensor.from_row_splits(
            word_pieces.flat_values,
            tf.gather(word_pieces.row_splits, words.row_splits),
        )
        piece_word = tf.cast(word_pieces.value_rowids(), tf.int32)

        # Windows (modeling/data/squad.doc_spans) and their features.
        query_len = tf.cast(query.row_lengths(), tf.int32)
        num_pieces = tf.cast(pieces.row_lengths(), tf.int32)
        max_doc = self.max_seq_length - query_len - 3
        example, start, length = doc_windows(
            num_pieces, max_doc, self.doc_stride
        )
        row_start = tf.cast(pieces.row_starts(), tf.int32)
        first = tf.gather(row_start, example) + start  # flat piece index
        flat_index = tf.ragged.range(first, first + length)
        window_pieces = tf.gather(pieces.flat_values, flat_index)
        features = self.packer(tf.gather(query, example), window_pieces)
        if self.fast_nbest:
            features = base.to_longest_row(features)
        outputs = self.model(features, training=False)
        start_logits = tf.cast(outputs["start_logits"], tf.float32)
        end_logits = tf.cast(outputs["end_logits"], tf.float32)
        if self.fast_nbest:  # Each window's own positions only.
            padding = tf.equal(features["input_mask"], 0)
            start_logits = tf.where(padding, -float("inf"), start_logits)
            end_logits = tf.where(padding, -float("inf"), end_logits)
        width = tf.shape(start_logits)[1]

        # Where a piece has the most context (squad.max_context_spans).
        offset = tf.ragged.range(length).flat_values  # position in window
        window = tf.repeat(tf.range(tf.size(length)), length)
        window_length = tf.cast(tf.gather(length, window), tf.float64)
        score = (
            tf.cast(
                tf.minimum(offset, tf.gather(length, window) - 1 - offset),
                tf.float64,
            )
            + 0.01 * window_length
        )
        piece = flat_index.flat_values
        total = tf.size(pieces.flat_values)
        best = tf.math.unsorted_segment_max(score, piece, total)
        on_best = tf.equal(score, tf.gather(best, piece))
        first_best = tf.math.unsorted_segment_min(
            tf.where(on_best, window, tf.int32.max), piece, total
        )
        max_context = tf.equal(window, tf.gather(first_best, piece))
        # In packed positions: [CLS] query [SEP] then the window's pieces.
        doc_offset = tf.gather(query_len, example) + 2
        position = tf.gather(doc_offset, window) + offset
        coords = tf.stack([window, position], axis=1)
        shape = tf.stack([tf.size(length), width])
        in_doc = tf.scatter_nd(coords, tf.ones_like(window, tf.bool), shape)
        can_start = tf.scatter_nd(coords, max_context, shape)
        # The flat piece index at each packed position (for the answer).
        piece_at = tf.tensor_scatter_nd_update(
            tf.zeros(shape, tf.int32), coords, piece
        )

        # The n best starts and ends of each window, as the original picks
        # them (over every position of the row, padding included).
        k = tf.minimum(self.n_best_size, width)

        def top(logits):
            index = tf.math.top_k(logits, k=k).indices
            return tf.reduce_any(
                tf.equal(index[:, :, None], tf.range(width)[None, None, :]),
                axis=1,
            )

        ok_start = top(start_logits) & can_start
        ok_end = top(end_logits) & in_doc
        span = tf.range(width)[None, :] - tf.range(width)[:, None]
        ok_span = (span >= 0) & (span < self.max_answer_length)
        ok = ok_start[:, :, None] & ok_end[:, None, :] & ok_span[None]
        pair = start_logits[:, :, None] + end_logits[:, None, :]
        pair = tf.where(ok, pair, -float("inf"))
        flat_pair = tf.reshape(pair, [tf.size(length), -1])
        window_best = tf.reduce_max(flat_pair, axis=1)
        window_arg = tf.argmax(flat_pair, axis=1, output_type=tf.int32)
        # The best window of each question (the earliest on a tie).
        best_score = tf.math.unsorted_segment_max(window_best, example, batch)
        is_best = tf.equal(window_best, tf.gather(best_score, example))
        best_window = tf.math.unsorted_segment_min(
            tf.where(is_best, tf.range(tf.size(length)), tf.int32.max),
            example,
            batch,
        )
        # (A segment of -inf only has the max lowest(), not -inf.)
        found = (
            tf.math.unsorted_segment_max(
                tf.cast(tf.math.is_finite(window_best), tf.int32),
                example,
                batch,
            )
            > 0
        )
        best_score = tf.where(found, best_score, -float("inf"))
        best_window = tf.where(found, best_window, 0)
        arg = tf.gather(window_arg, best_window)
        # The answer's start and end: [window, position] of each question.
        at_start = tf.stack([best_window, arg // width], axis=1)
        at_end = tf.stack([best_window, arg % width], axis=1)
        first_piece = tf.gather_nd(piece_at, at_start)
        last_piece = tf.gather_nd(piece_at, at_end)
        answer = tf.cond(
            total > 0,
            lambda: self._answer_text(
                flat_words,
                grouped,
                basic_len,
                word_pieces,
                piece_word,
                first_piece,
                last_piece,
            ),
            lambda: tf.fill([batch], ""),
        )
        answer = tf.where(found, answer, "")

        # SQuAD 2.0: the least null score of the question's windows, and
        # its difference to the answer's logits, in float64.
        def f64(logits):
            return tf.cast(logits, tf.float64)

        null = tf.math.unsorted_segment_min(
            f64(start_logits[:, 0]) + f64(end_logits[:, 0]), example, batch
        )
        best_start = f64(tf.gather_nd(start_logits, at_start))
        best_end = f64(tf.gather_nd(end_logits, at_end))
        null_diff = tf.where(found, null - best_start - best_end, float("inf"))
        if self.version_2_with_negative:
            answer = tf.where(
                null_diff > self.null_score_diff_threshold, "", answer
            )
        return {
            "answer": answer,
            "score": best_score,
            "null_score_diff": tf.cast(null_diff, tf.float32),
            # The answer's first and last piece among its context's pieces
            # (-1: no answer).
            "start_piece": tf.where(found, first_piece - row_start, -1),
            "end_piece": tf.where(found, last_piece - row_start, -1),
        }

    def _answer_text(
        self,
        flat_words,
        grouped,
        basic_len,
        word_pieces,
        piece_word,
        first,
        last,
    ):
        """The answer's text from its first and last flat piece index, as
        get_final_text: the words it covers, cut to its pieces' characters
        when every word of it keeps its length once normalized and none of
        the answer's own pieces is [UNK] (one elsewhere in its words, as a
        rare character in a paragraph of CJK text written without spaces,
        does not matter there)."""
        ids = word_pieces.flat_values
        vocab_len = tf.gather(self.piece_lengths, ids)
        is_unk = vocab_len < 0
        # An [UNK] stands for its whole basic token (`basic_len` chars).
        piece_basic = tf.cast(grouped.values.value_rowids(), tf.int32)
        char_len = tf.where(
            is_unk, tf.gather(basic_len, piece_basic), vocab_len
        )
        # A piece's first character in its word: the lengths before it.
        before = tf.cumsum(char_len, exclusive=True)
        word_start = tf.gather(
            tf.cast(word_pieces.row_starts(), tf.int32), piece_word
        )
        in_word = before - tf.gather(before, word_start)
        word_chars = tf.strings.length(flat_words, unit="UTF8_CHAR")
        pieces_chars = tf.math.segment_sum(char_len, piece_word)
        pieces_chars = tf.pad(
            pieces_chars, [[0, tf.size(flat_words) - tf.size(pieces_chars)]]
        )
        kept = tf.equal(pieces_chars, word_chars)
        # The words of the answer, and whether all of them kept.
        first_word = tf.gather(piece_word, first)
        last_word = tf.gather(piece_word, last)
        bad_before = tf.concat(
            [[0], tf.cumsum(tf.cast(~kept, tf.int32))], axis=0
        )
        unk_before = tf.concat([[0], tf.cumsum(tf.cast(is_unk, tf.int32))], 0)
        exact = tf.equal(
            tf.gather(bad_before, last_word + 1),
            tf.gather(bad_before, first_word),
        ) & tf.equal(
            tf.gather(unk_before, last + 1), tf.gather(unk_before, first)
        )
        text = tf.strings.reduce_join(
            tf.gather(flat_words, tf.ragged.range(first_word, last_word + 1)),
            axis=1,
            separator=" ",
        )
        lead = tf.gather(in_word, first)
        tail = tf.gather(word_chars, last_word) - (
            tf.gather(in_word, last) + tf.gather(char_len, last)
        )
        lead = tf.where(exact, lead, 0)
        tail = tf.where(exact, tail, 0)
        total = tf.strings.length(text, unit="UTF8_CHAR")
        return tf.strings.substr(
            text, lead, total - lead - tail, unit="UTF8_CHAR"
        )


def export_squad(model, settings, export_dir, extra_files=None):
    """Writes run_squad's serving SavedModel to export_dir (extra_files:
    see base.save_export)."""
    s = settings
    server = SquadServer(
        model,
        s.vocab_file,
        s.do_lower_case,
        s.max_seq_length,
        s.doc_stride,
        s.max_query_length,
        s.n_best_size,
        s.max_answer_length,
        s.version_2_with_negative,
        s.null_score_diff_threshold,
        s.fast_nbest,
    )
    info = {
        "task": "question_answering",
        "max_seq_length": s.max_seq_length,
        "doc_stride": s.doc_stride,
        "max_query_length": s.max_query_length,
        "n_best_size": s.n_best_size,
        "max_answer_length": s.max_answer_length,
        "version_2_with_negative": s.version_2_with_negative,
        "null_score_diff_threshold": s.null_score_diff_threshold,
        "fast_nbest": s.fast_nbest,
        "inputs": ["question", "context"],
        "outputs": [
            "answer",
            "score",
            "null_score_diff",
            "start_piece",
            "end_piece",
        ],
    }
    return server.save(
        export_dir, info, extra_files, s.vocab_file, s.do_lower_case
    )
