"""The BERT library behind the original scripts (modeling/README.md maps it).

The public names below are re-exported lazily (PEP 562), so that
`from modeling import tokenization` in a data tool does not import Keras.
Submodules can always be imported directly.
"""

import importlib

_EXPORTS = {
    "BertConfig": "modeling.config",
    "BertModel": "modeling.encoder",
    "BertPretrainer": "modeling.models",
    "BertClassifier": "modeling.models",
    "BertSpanLabeler": "modeling.models",
    "BertPreprocessor": "modeling.preprocessing",
    "BertTextClassifier": "modeling.text_classifier",
    "BertTextEmbedder": "modeling.text_embedder",
    "pretraining_losses": "modeling.losses",
    "span_loss": "modeling.losses",
    "load_weights": "modeling.checkpoints",
    "read_checkpoint": "modeling.checkpoints",
    "write_checkpoint": "modeling.checkpoints",
    "resolve_checkpoint": "modeling.checkpoints",
    "variable_name": "modeling.checkpoints",
    "FullTokenizer": "modeling.text.tokenization",
    "InGraphTokenizer": "modeling.text.in_graph",
    "InputPacker": "modeling.text.in_graph",
    "create_optimizer": "modeling.training.optimization",
    "Trainer": "modeling.training.trainer",
}

# Modules that lived at the top of the package before it had subpackages:
# `from modeling import tokenization` (as in the original's notebooks) keeps
# working.
_MODULES = {
    "tokenization": "modeling.text.tokenization",
}

# The original modeling.py's helpers for its TF1 Estimator graph: importable,
# and calling one says what replaces it.
_ESTIMATOR_ONLY = {
    "get_assignment_map_from_checkpoint": (
        "modeling.load_weights(model, init_checkpoint): variables are "
        "matched to checkpoint names exactly, no assignment map is needed"
    ),
}

__all__ = sorted(_EXPORTS)


def __getattr__(name):
    if name in _MODULES:
        value = importlib.import_module(_MODULES[name])
    elif name in _EXPORTS:
        value = getattr(importlib.import_module(_EXPORTS[name]), name)
    elif name in _ESTIMATOR_ONLY:
        from modeling import errors

        value = errors.estimator_only(name, _ESTIMATOR_ONLY[name])
    else:
        raise AttributeError(f"module 'modeling' has no attribute {name!r}")
    globals()[name] = value
    return value


def __dir__():
    return sorted(set(globals()) | set(_EXPORTS) | set(_MODULES))
