"""BertConfig: the model hyper-parameters, with the original JSON keys.

`bert_config.json` files of the original release load unchanged. The Chinese
model's config carries extra keys (`directionality`, `pooler_*`) that the
model does not use; they are kept so that writing the config back gives the
same file. Keys nobody knows are kept too, but logged as a warning, because a
misspelt key (`num_hidden_layer`) would otherwise silently fall back to its
default.
"""

import copy
import inspect
import json
import logging

from modeling.data import file_io

_LOG = logging.getLogger(__name__)

# Keys of the released configs that the model does not read (google-research/
# bert#82, the Chinese model); loading them is silent.
KNOWN_EXTRA_KEYS = frozenset(
    {
        "directionality",
        "pooler_fc_size",
        "pooler_num_attention_heads",
        "pooler_num_fc_layers",
        "pooler_size_per_head",
        "pooler_type",
    }
)

# Activation names the original `get_activation` accepts (case-insensitive);
# "" and "linear" mean no activation. "gelu" is the tanh approximation.
# "gelu_exact" (not the original's) is the erf form, HF's "gelu": a model
# read from an HF or sentence-transformers folder gives their numbers with it.
ACTIVATIONS = frozenset({"gelu", "gelu_exact", "relu", "tanh", "linear", ""})

_POSITIVE_INT_FIELDS = (
    "vocab_size",
    "hidden_size",
    "num_hidden_layers",
    "num_attention_heads",
    "intermediate_size",
    "max_position_embeddings",
    "type_vocab_size",
)


class BertConfig:
    """Configuration of a `BertModel` (original field names and defaults).

    Args:
        vocab_size: int, size of the WordPiece vocabulary (rows of
            `word_embeddings`).
        hidden_size: int, width H of the encoder.
        num_hidden_layers: int, number of Transformer blocks.
        num_attention_heads: int, heads per block; must divide hidden_size.
        intermediate_size: int, width of the feed-forward layer.
        hidden_act: str, feed-forward activation: "gelu" (tanh
            approximation, as the original at HEAD), "gelu_exact" (the erf
            form: HF's "gelu"), "relu", "tanh" or "linear".
        hidden_dropout_prob: float in [0, 1), dropout after embeddings and
            after each dense output.
        attention_probs_dropout_prob: float in [0, 1), dropout on attention
            probabilities.
        max_position_embeddings: int, rows of `position_embeddings`; the
            longest sequence the model accepts.
        type_vocab_size: int, rows of `token_type_embeddings` (2 in every
            released config).
        initializer_range: float > 0, stddev of the truncated normal
            initializer.
        **extra: further JSON keys; kept and written back.

    Raises:
        ValueError: a field has a bad value; the message names the field.
    """

    def __init__(
        self,
        vocab_size,
        hidden_size=768,
        num_hidden_layers=12,
        num_attention_heads=12,
        intermediate_size=3072,
        hidden_act="gelu",
        hidden_dropout_prob=0.1,
        attention_probs_dropout_prob=0.1,
        max_position_embeddings=512,
        type_vocab_size=16,
        initializer_range=0.02,
        **extra,
    ):
        self.vocab_size = vocab_size
        self.hidden_size = hidden_size
        self.num_hidden_layers = num_hidden_layers
        self.num_attention_heads = num_attention_heads
        self.intermediate_size = intermediate_size
        self.hidden_act = hidden_act
        self.hidden_dropout_prob = hidden_dropout_prob
        self.attention_probs_dropout_prob = attention_probs_dropout_prob
        self.max_position_embeddings = max_position_embeddings
        self.type_vocab_size = type_vocab_size
        self.initializer_range = initializer_range
        self.extra = dict(extra)
        unknown = sorted(set(extra) - KNOWN_EXTRA_KEYS)
        if unknown:
            _LOG.warning(
                "BertConfig: unknown key(s) %s are kept but not used by the "
                "model; check their spelling.",
                ", ".join(unknown),
            )
        self.validate()

    def validate(self):
        """Checks every field; raises ValueError naming the bad one."""
        for field in _POSITIVE_INT_FIELDS:
            value = getattr(self, field)
            if isinstance(value, bool) or not isinstance(value, int):
                raise TypeError(
                    f"BertConfig.{field} must be an integer, got {value!r}"
                )
            if value <= 0:
                raise ValueError(
                    f"BertConfig.{field} must be positive, got {value}"
                )
        if self.hidden_size % self.num_attention_heads:
            raise ValueError(
                f"BertConfig.hidden_size ({self.hidden_size}) is not a "
                "multiple of BertConfig.num_attention_heads "
                f"({self.num_attention_heads})"
            )
        act = self.hidden_act
        if not isinstance(act, str) or act.lower() not in ACTIVATIONS:
            raise ValueError(
                f"BertConfig.hidden_act {act!r} is not supported; use one of "
                "'gelu' (tanh approximation), 'gelu_exact' (erf), 'relu', "
                "'tanh', 'linear'"
            )
        for field in ("hidden_dropout_prob", "attention_probs_dropout_prob"):
            value = getattr(self, field)
            if not isinstance(value, (int, float)) or not 0 <= value < 1:
                raise ValueError(
                    f"BertConfig.{field} must be in [0, 1), got {value!r}"
                )
        init = self.initializer_range
        if not isinstance(init, (int, float)) or init <= 0:
            raise ValueError(
                f"BertConfig.initializer_range must be positive, got {init!r}"
            )

    @classmethod
    def from_dict(cls, json_object):
        """Builds a config from a dict of original JSON keys."""
        if not isinstance(json_object, dict):
            raise TypeError(
                f"a BertConfig needs a JSON object, got {type(json_object)}"
            )
        if "vocab_size" not in json_object:
            raise ValueError("BertConfig.vocab_size is missing")
        return cls(**copy.deepcopy(json_object))

    @classmethod
    def from_json_file(cls, json_file):
        """Reads a `bert_config.json` (local path, or a gs:// path where
        TensorFlow is installed)."""
        try:
            text = file_io.read_text(json_file)
        except FileNotFoundError as e:
            raise FileNotFoundError(
                f"bert_config_file {json_file} does not exist"
            ) from e
        try:
            data = json.loads(text)
        except json.JSONDecodeError as e:
            raise ValueError(f"{json_file} is not valid JSON: {e}") from e
        missing = [
            k for k in FIELDS if isinstance(data, dict) and k not in data
        ]
        try:
            config = cls.from_dict(data)
        except (ValueError, TypeError) as e:
            defaults = _DEFAULTS
            note = "".join(
                f"; {k} is not in the file, so it is the default "
                f"{defaults[k]!r}"
                for k in missing
                if k in defaults and k in str(e)
            )
            raise ValueError(f"{json_file}: {e}{note}") from e
        # Loaded as the original loads it, but a missing key silently
        # changes the model (12 layers where 2 were meant): say so.
        for key in missing:
            _LOG.warning(
                "%s has no %r: using the default %r",
                json_file,
                key,
                getattr(config, key),
            )
        return config

    def to_dict(self):
        """The config as a dict of original JSON keys (extras included)."""
        out = {f: getattr(self, f) for f in FIELDS}
        out.update(copy.deepcopy(self.extra))
        return out

    def to_json_string(self):
        """The config as the original writes it: sorted keys, indent 2."""
        return json.dumps(self.to_dict(), indent=2, sort_keys=True) + "\n"

    def to_json_file(self, path):
        """Writes the JSON atomically (temporary file, then rename)."""
        file_io.write_text(path, self.to_json_string())

    def __eq__(self, other):
        return isinstance(other, BertConfig) and (
            self.to_dict() == other.to_dict()
        )

    def __repr__(self):
        return f"BertConfig({self.to_dict()!r})"


# The original's bert_config.json keys, in the original's order.
FIELDS = (
    "vocab_size",
    "hidden_size",
    "num_hidden_layers",
    "num_attention_heads",
    "intermediate_size",
    "hidden_act",
    "hidden_dropout_prob",
    "attention_probs_dropout_prob",
    "max_position_embeddings",
    "type_vocab_size",
    "initializer_range",
)


# The constructor's defaults (the original's), for messages.
_DEFAULTS = {
    name: p.default
    for name, p in inspect.signature(BertConfig.__init__).parameters.items()
    if p.default is not inspect.Parameter.empty
}


# === Checks of a vocabulary and a sequence length against a config ===


def vocab_size_of(vocab_file):
    """Number of entries of a vocab file, counted as the original does
    (one per line)."""
    return len(file_io.read_lines(vocab_file))


# The special tokens of every BERT input (modeling/text/vocabulary.py).
_INPUT_TOKENS = ("[CLS]", "[SEP]", "[UNK]")


def check_vocab_size(vocab_file_or_size, config, input_tokens=True):
    """Fails when the vocabulary has more ids than `word_embeddings` rows.

    Args:
        vocab_file_or_size: path of vocab.txt, or its size as an int.
        config: BertConfig.
        input_tokens: also require [CLS], [SEP] and [UNK] in a file (what
          makes inputs; False where only weights are converted).

    Raises:
        ValueError: the vocabulary is larger than config.vocab_size, or (a
          file) lacks a special token every input has.
    """
    if isinstance(vocab_file_or_size, int):
        size, source = vocab_file_or_size, "the vocabulary"
    else:
        if not file_io.exists(vocab_file_or_size):
            raise FileNotFoundError(
                f"vocab_file {vocab_file_or_size} does not exist"
            )
        lines = file_io.read_lines(vocab_file_or_size)
        size = len(lines)
        source = f"vocab_file {vocab_file_or_size}"
    if size > config.vocab_size:
        raise ValueError(
            f"{source} has {size} tokens but the BERT config's vocab_size is "
            f"{config.vocab_size}: ids >= {config.vocab_size} have no "
            "embedding. Use the vocab.txt that came with the checkpoint."
        )
    if input_tokens and not isinstance(vocab_file_or_size, int):
        # Every BERT input has them (and [UNK] stands for a word out of the
        # vocabulary): checked here, before a script writes anything.
        tokens = {line.strip() for line in lines}
        missing = [t for t in _INPUT_TOKENS if t not in tokens]
        if missing:
            raise ValueError(
                f"{source} lacks {' '.join(missing)}, which BERT's inputs "
                "need. Use a BERT vocabulary (see vocab/README.md)."
            )


def check_max_seq_length(max_seq_length, config):
    """Fails when max_seq_length exceeds max_position_embeddings, or leaves
    no room for [CLS] and [SEP] around a token (below 3: a pair's
    truncation popped from an empty list, a single text's cut kept it
    whole).

    Raises:
        ValueError: with the original run_classifier.py message.
    """
    if max_seq_length > config.max_position_embeddings:
        raise ValueError(
            f"Cannot use sequence length {max_seq_length} because the BERT "
            "model was only trained up to sequence length "
            f"{config.max_position_embeddings}"
        )
    if max_seq_length < 3:
        raise ValueError(
            f"max_seq_length {max_seq_length} is below 3 (room for [CLS], "
            "a token and [SEP])"
        )
