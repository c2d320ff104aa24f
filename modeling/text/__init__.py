"""Text: the original's tokenizer, vocabularies, the vocab builder and the
in-graph (tensorflow-text) tokenizer. Only in_graph imports TensorFlow."""
