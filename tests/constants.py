"""Constants shared by the tests, imported as `import constants` (pytest puts
tests/ on sys.path, as for `import training_helpers` and `import harness`).

TINY_CONFIG is the one tiny BertConfig of the tests: the sizes of the
original's modeling_test (2 layers, hidden 32, vocab 99), also the config of
the golden outputs. The `tiny_config_dict` fixture returns a copy.
"""

import pathlib

REPO_ROOT = pathlib.Path(__file__).resolve().parents[1]

TINY_CONFIG = {
    "vocab_size": 99,
    "hidden_size": 32,
    "num_hidden_layers": 2,
    "num_attention_heads": 4,
    "intermediate_size": 37,
    "hidden_act": "gelu",
    "hidden_dropout_prob": 0.1,
    "attention_probs_dropout_prob": 0.1,
    "max_position_embeddings": 64,
    "type_vocab_size": 2,
    "initializer_range": 0.02,
}

# A tiny uncased WordPiece vocabulary (fewer ids than TINY_CONFIG's
# vocab_size) for preprocessors and text models built on TINY_CONFIG.
TINY_VOCAB = [
    "[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]",
    "the", "a", "cat", "dog", "sat", "on", "mat", "hello", "world",
    "is", "not", "good", "bad", "##s", "##ing", ".", ",", "!", "?",
]  # fmt: skip
