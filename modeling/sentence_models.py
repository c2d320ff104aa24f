"""Sentence-embedding models as sentence-transformers defines them, read
from the folders users have (run_embeddings.py and BertTextEmbedder):

- a sentence-transformers folder (modules.json: a BERT Transformer module,
  then Pooling, optionally Normalize), read as it is: its config.json and
  model.safetensors, its pooling mode, normalization, max_seq_length
  (sentence_bert_config.json) and casing (tokenizer_config.json), and its
  activation: HF's "gelu" is the exact (erf) GELU ("gelu_exact" here), not
  the original's tanh form;
- an HF BERT folder (config.json, model.safetensors, vocab.txt), read as
  sentence-transformers reads one: mean pooling, no Normalize, the
  tokenizer's model_max_length;
- an original checkpoint (with a vocab_file and bert_config_file, or the
  files beside it).

`read_model` gives a ModelSource (what was found); `build_model` the
models.BertEmbedder with its weights.
"""

import dataclasses
import json
import os

from modeling.data import file_io
from modeling.data import long_inputs as long_inputs_lib

DEFAULT_MAX_SEQ_LENGTH = 128


@dataclasses.dataclass
class ModelSource:
    """What read_model found: the encoder's config and weights (arrays by
    original name, or a checkpoint prefix), the tokenization and the
    pooling."""

    kind: str
    config: object
    weights: object
    vocab_file: str
    do_lower_case: bool
    pooling: str
    normalize: bool
    max_seq_length: int
    # Texts longer than max_seq_length (modeling/data/long_inputs.py).
    long_inputs: long_inputs_lib.LongInputs = dataclasses.field(
        default_factory=long_inputs_lib.LongInputs
    )

    def describe(self):
        described = {
            "source": self.kind,
            "pooling": self.pooling,
            "normalize": self.normalize,
            "max_seq_length": self.max_seq_length,
            "do_lower_case": self.do_lower_case,
            "hidden_act": self.config.hidden_act,
        }
        if self.long_inputs.strategy != long_inputs_lib.TRUNCATE:
            described.update(self.long_inputs.to_json())
        return described


def read_json(path):
    """A model folder's JSON file (also run_embeddings' own).

    Raises:
      FileNotFoundError: naming the file.
      ValueError: naming the file and line: not UTF-8, not JSON.
    """
    text = file_io.read_text(path)
    try:
        return json.loads(text)
    except json.JSONDecodeError as e:
        raise ValueError(
            f"{path} line {e.lineno}: not valid JSON: {e.msg}"
        ) from None


def _module_path(folder, module):
    """The folder of one modules.json entry, inside the model folder.

    Raises:
      ValueError: a path that is not a string, is absolute or leaves the
        model folder (`../x`): a model folder must be self-contained.
    """
    path = module.get("path", "")
    where = f"{folder}/modules.json"
    if not isinstance(path, str):
        raise ValueError(f"{where}: module path {path!r} is not a string")
    inside = os.path.normpath(path)
    if os.path.isabs(path) or inside.split(os.sep)[0] == os.pardir:
        raise ValueError(
            f"{where}: module path {path!r} leaves the model folder; a "
            "model folder must be self-contained"
        )
    return os.path.join(folder, path)


def _sentence_transformers_folder(folder):
    """(transformer folder, pooling, normalize, max_seq_length, whether
    its sentence_bert_config.json lower-cases the text) of a
    sentence-transformers folder.

    Raises:
      ValueError: a module this reader does not compute (Dense, ...), a
        pooling mode other than one of mean / cls / max; a modules.json
        that is not JSON, not a list of objects, or names a folder outside
        this one.
    """
    modules = read_json(os.path.join(folder, "modules.json"))
    if not isinstance(modules, list) or not all(
        isinstance(m, dict) for m in modules
    ):
        raise ValueError(
            f"{folder}/modules.json: not a list of module objects (each with "
            '"type" and "path")'
        )
    transformer = pooling = None
    normalize = False
    for module in modules:
        kind = str(module.get("type", "")).rsplit(".", 1)[-1]
        path = _module_path(folder, module)
        if kind == "Transformer" and transformer is None:
            transformer = path
        elif kind == "Pooling" and pooling is None:
            pooling = _pooling_mode(os.path.join(path, "config.json"))
        elif kind == "Normalize":
            normalize = True
        else:
            raise ValueError(
                f"{folder}/modules.json: module {module.get('type')!r} is "
                "not supported (a BERT Transformer, then Pooling, then "
                "optionally Normalize)"
            )
    if transformer is None or pooling is None:
        raise ValueError(
            f"{folder}/modules.json has no Transformer and Pooling modules"
        )
    said = {}
    config_path = os.path.join(transformer, "sentence_bert_config.json")
    if os.path.exists(config_path):
        said = read_json(config_path)
    # Without a length there, sentence-transformers takes the tokenizer's
    # (capped by the model's positions, as for a plain HF folder).
    max_seq_length = said.get("max_seq_length") or (
        _tokenizer_max_length(transformer) or 1 << 30
    )
    return (
        transformer,
        pooling,
        normalize,
        max_seq_length,
        bool(said.get("do_lower_case")),
    )


def _pooling_mode(path):
    config = read_json(path)
    modes = [
        mode
        for mode, key in (
            ("cls", "pooling_mode_cls_token"),
            ("mean", "pooling_mode_mean_tokens"),
            ("max", "pooling_mode_max_tokens"),
        )
        if config.get(key)
    ]
    others = [
        k
        for k, v in config.items()
        if k.startswith("pooling_mode_")
        and v
        and k
        not in (
            "pooling_mode_cls_token",
            "pooling_mode_mean_tokens",
            "pooling_mode_max_tokens",
        )
    ]
    if len(modes) != 1 or others:
        raise ValueError(
            f"{path}: pooling {modes + others} is not supported (one of "
            "mean, cls, max)"
        )
    return modes[0]


def _tokenizer_config(folder):
    path = os.path.join(folder, "tokenizer_config.json")
    return read_json(path) if os.path.exists(path) else {}


def _tokenizer_lower_case(folder):
    """An HF folder's casing: tokenizer_config.json's do_lower_case (HF's
    BertTokenizer lower-cases by default)."""
    return bool(_tokenizer_config(folder).get("do_lower_case", True))


def _warn_of_kept_accents(folder):
    """HF's strip_accents false (lower-case, keep accents) is not this
    tokenizer's: it strips accents when it lower-cases, as the original's."""
    if _tokenizer_config(folder).get("strip_accents") is False:
        from absl import logging

        logging.warning(
            "%s/tokenizer_config.json: strip_accents false (lower-case but "
            "keep accents); this tokenizer, as the original's, strips them "
            "when it lower-cases: accented words get other pieces than HF's",
            folder,
        )


def _tokenizer_max_length(folder):
    """An HF folder's tokenizer_config.json model_max_length (None when it
    gives none: HF's stand-in for "no limit" is a huge number)."""
    length = _tokenizer_config(folder).get("model_max_length")
    if isinstance(length, int) and 0 < length < 1 << 30:
        return length
    return None


def read_model(
    path,
    bert_config_file=None,
    vocab_file=None,
    do_lower_case=None,
    pooling=None,
    normalize=None,
    max_seq_length=None,
):
    """The ModelSource of a model folder or checkpoint (--init_checkpoint;
    see the module doc); the other arguments, when not None, override what
    the folder says (the flags of the same names).

    Raises:
      FileNotFoundError, ValueError: naming the folder or file.
    """
    from modeling import checkpoints
    from modeling import config as config_lib
    from modeling import convert

    # What the folder says (an original checkpoint says nothing).
    said_pooling, said_normalize, length = "mean", True, None
    lower_text = False  # sentence_bert_config.json's do_lower_case.
    if os.path.isdir(path) and os.path.exists(
        os.path.join(path, "modules.json")
    ):
        kind = "sentence-transformers"
        folder, said_pooling, said_normalize, length, lower_text = (
            _sentence_transformers_folder(path)
        )
    elif os.path.isdir(path) and os.path.exists(
        os.path.join(path, convert.HF_CONFIG)
    ):
        # As sentence-transformers reads a plain HF folder: mean pooling,
        # no Normalize, the tokenizer's length limit (capped below).
        kind, folder = "hf", path
        said_normalize = False
        length = _tokenizer_max_length(folder) or 1 << 30
    else:
        kind = "original"
    if kind == "original":
        files = checkpoints.checkpoint_files(path, bert_config_file)
        config = config_lib.BertConfig.from_json_file(files.config_file)
        weights = files.prefix
        vocab = vocab_file or os.path.join(
            os.path.dirname(files.config_file), checkpoints.VOCAB_FILE
        )
        lower = None  # From the vocabulary, below.
    else:
        model_type = read_json(os.path.join(folder, convert.HF_CONFIG)).get(
            "model_type", "bert"
        )
        if model_type != "bert":
            raise ValueError(
                f"{folder}/config.json: model_type {model_type!r}; only "
                "BERT models are read"
            )
        config, weights, vocab = convert.read_hf_folder(folder, exact_gelu=True)
        vocab = vocab_file or vocab
        # sentence-transformers lower-cases the text itself when its
        # config says do_lower_case, whatever the tokenizer's casing.
        lower = _tokenizer_lower_case(folder)
        if lower_text and not lower:
            from absl import logging

            lower = True
            logging.warning(
                "%s: sentence_bert_config.json lower-cases the text for a "
                "cased tokenizer, which keeps accents there; this tokenizer "
                "strips them when it lower-cases: accented words get other "
                "pieces than sentence-transformers'",
                path,
            )
    if not os.path.exists(vocab):
        raise FileNotFoundError(f"No vocabulary at {vocab}: give --vocab_file")
    config_lib.check_vocab_size(vocab, config)
    if max_seq_length is None:
        # What the folder says, within what the model was trained for; a
        # --max_seq_length beyond that is an error.
        max_seq_length = min(
            length or DEFAULT_MAX_SEQ_LENGTH, config.max_position_embeddings
        )
    config_lib.check_max_seq_length(max_seq_length, config)
    lower = lower if do_lower_case is None else do_lower_case
    if kind == "original":
        # As BertPreprocessor.from_checkpoint: uncased when the vocabulary
        # has no upper-case token, and the original's check of the
        # checkpoint's name (a cased_L-12_... model lower-cased lost its
        # capitals to [UNK]).
        from modeling.text import tokenization
        from modeling.text import vocabulary

        if lower is None:
            lower = vocabulary.infer_do_lower_case(
                vocabulary.read_vocab_lines(vocab)
            )
        tokenization.validate_case_matches_checkpoint(lower, weights)
    elif lower:
        _warn_of_kept_accents(folder)
    return ModelSource(
        kind=kind,
        config=config,
        weights=weights,
        vocab_file=vocab,
        do_lower_case=lower,
        pooling=pooling or said_pooling,
        normalize=said_normalize if normalize is None else normalize,
        max_seq_length=max_seq_length,
    )


def build_model(source):
    """models.BertEmbedder with the source's weights."""
    from modeling import checkpoints
    from modeling import models

    model = models.BertEmbedder(
        source.config, pooling=source.pooling, normalize=source.normalize
    )
    checkpoints.load_weights(model, source.weights)
    return model
