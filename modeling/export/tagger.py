"""Serving SavedModels on raw text for run_ner.py and run_multiple_choice.py.

Like the classifier's export (classifier.py), the graph tokenizes with the
in-graph WordPiece tokenizer (the ids of FullTokenizer) and packs inputs as
the Python path does, so a server needs only TensorFlow and
tensorflow-text:

    import tensorflow_text  # noqa: F401 (registers the ops)
    loaded = tf.saved_model.load(export_dir)
    # NER: sentences of space-separated words -> one tag per word.
    out = loaded.signatures["serving_default"](text=tf.constant([...]))
    out["tags"]       # string [batch, max words], "" after the last word
    out["num_words"]  # int32 [batch]
    # Multiple choice: -> choice probabilities.
    out = loaded.signatures["serving_default"](
        sent1=tf.constant([...]), sent2=tf.constant([...]),
        endings=tf.constant([[...], ...]))   # [batch, choices]
    out["probabilities"]  # float32 [batch, choices]

NER in graph does what modeling/data/conll.py does: words split on
whitespace, each word's WordPieces ([UNK] for a word with none, cut to a
window), a sentence split greedily into windows of whole words of at most
max_seq_length - 2 pieces, the tag of a word read at its first piece.
"""

import tensorflow as tf

from modeling import models
from modeling.export import base
from modeling.text import in_graph
from modeling.text import vocabulary


class TaggerServer(base.Server):
    """Raw sentences -> one tag per word (run_ner's model).

    Args:
      model: the fine-tuned BertTokenClassifier.
      vocab_file, do_lower_case, max_seq_length: as the run's.
      label_list: the tags in id order.
    """

    def __init__(
        self, model, vocab_file, do_lower_case, max_seq_length, label_list
    ):
        super().__init__(name="tagger_server")
        self.model = models.float32_twin(model)
        text = in_graph.TextPreprocessor(
            vocab_file, do_lower_case, max_seq_length
        )
        self.tokenizer, self.packer = text.tokenizer, text.packer
        self.unk_id = vocabulary.load_vocab(vocab_file)[vocabulary.UNK_TOKEN]
        self.max_pieces = max_seq_length - 2
        self.labels = tf.constant(list(label_list))

    @tf.function(
        input_signature=[tf.TensorSpec([None], tf.string, "text")],
        autograph=False,
    )
    def serve_text(self, text):
        words = in_graph.split_words(text)  # [B, (W)], as str.split().
        pieces = tf.cast(self.tokenizer.tokenize(words.flat_values), tf.int32)
        # A word without pieces gets [UNK]; a word over a window is cut.
        empty = tf.equal(pieces.row_lengths(), 0)
        unk = tf.RaggedTensor.from_row_lengths(
            tf.fill([tf.reduce_sum(tf.cast(empty, tf.int32))], self.unk_id),
            tf.cast(empty, tf.int64),
        )
        pieces = tf.concat([pieces, unk], axis=1)
        pieces = in_graph.head(
            pieces,
            tf.minimum(
                pieces.row_lengths(), tf.constant(self.max_pieces, tf.int64)
            ),
        )
        counts = pieces.row_lengths()
        # The windows conll.sentence_windows cuts: whole words, a new one at
        # each sentence and whenever the next word would not fit (an empty
        # sentence gets an empty window); then the window of each word.
        _, start, end = in_graph.word_windows(
            words.with_flat_values(counts),
            tf.fill([words.nrows()], tf.constant(self.max_pieces, tf.int64)),
            overlap=0,
        )
        num_windows = tf.size(start, out_type=tf.int64)
        windows = tf.repeat(tf.range(num_windows), end - start)
        packed = tf.RaggedTensor.from_value_rowids(
            pieces, windows, nrows=num_windows
        ).merge_dims(1, 2)
        features = base.to_longest_row(self.packer(packed))
        logits = tf.cast(self.model(features, training=False), tf.float32)
        # Each word's first piece: 1 ([CLS]) + the pieces before it in its
        # window.
        before = tf.cumsum(counts, exclusive=True)
        window_start = tf.math.unsorted_segment_min(
            before, windows, num_windows
        )
        position = 1 + before - tf.gather(window_start, windows)
        word_logits = tf.gather_nd(
            logits, tf.stack([windows, position], axis=1)
        )
        ids = tf.argmax(word_logits, axis=-1, output_type=tf.int32)
        splits = words.row_splits
        return {
            "tags": tf.RaggedTensor.from_row_splits(
                tf.gather(self.labels, ids), splits
            ).to_tensor(""),
            "tag_ids": tf.RaggedTensor.from_row_splits(ids, splits).to_tensor(
                -1
            ),
            "probabilities": tf.RaggedTensor.from_row_splits(
                tf.nn.softmax(word_logits, axis=-1), splits
            ).to_tensor(0.0),
            "num_words": tf.cast(words.row_lengths(), tf.int32),
        }


def export_tagger(
    model,
    vocab_file,
    do_lower_case,
    max_seq_length,
    label_list,
    export_dir,
    extra_files=None,
    tokens_field="tokens",
):
    """Writes run_ner's serving SavedModel to export_dir (extra_files: see
    base.save_export; tokens_field: run_ner's --tokens_field, recorded for
    predict_lite's JSON Lines input)."""
    server = TaggerServer(
        model, vocab_file, do_lower_case, max_seq_length, label_list
    )
    info = {
        "task": "token_classification",
        "labels": list(label_list),
        "max_seq_length": max_seq_length,
        "inputs": ["text"],
        "outputs": ["tags", "tag_ids", "probabilities", "num_words"],
        "tokens_field": tokens_field,
    }
    return server.save(export_dir, info, extra_files, vocab_file, do_lower_case)
