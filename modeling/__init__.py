"""The BERT library behind the original scripts (see modeling/README.md).

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
    "pretraining_losses": "modeling.heads",
    "span_loss": "modeling.heads",
    "load_weights": "modeling.checkpoints",
    "read_checkpoint": "modeling.checkpoints",
    "write_checkpoint": "modeling.checkpoints",
    "resolve_checkpoint": "modeling.checkpoints",
    "variable_name": "modeling.checkpoints",
    "FullTokenizer": "modeling.tokenization",
    "InGraphTokenizer": "modeling.text_graph",
    "InputPacker": "modeling.text_graph",
    "create_optimizer": "modeling.optimization",
    "Trainer": "modeling.training",
}

__all__ = sorted(_EXPORTS)


def __getattr__(name):
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module 'modeling' has no attribute {name!r}")
    value = getattr(importlib.import_module(module), name)
    globals()[name] = value
    return value


def __dir__():
    return sorted(set(globals()) | set(_EXPORTS))
