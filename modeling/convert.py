"""Convert between HuggingFace BERT folders and the original release's layout.

HF folder: config.json, model.safetensors, vocab.txt.
Original folder: bert_config.json, bert_model.ckpt.{index,data-*}, vocab.txt.

Name mapping (HF -> original), applied to every encoder tensor:
    [bert.]embeddings.{word,position,token_type}_embeddings.weight
        -> bert/embeddings/{word,position,token_type}_embeddings   (as is)
    [bert.]encoder.layer.N.<path>.weight   (nn.Linear, [out, in])
        -> bert/encoder/layer_N/<path>/kernel   (TRANSPOSED to [in, out])
    ....LayerNorm.weight / .bias (or .gamma / .beta)
        -> .../LayerNorm/gamma / beta
    cls.predictions.transform.dense.weight -> .../transform/dense/kernel (T)
    cls.predictions.bias                    -> cls/predictions/output_bias
    cls.predictions.decoder.weight          (tied to word_embeddings: dropped)
    cls.predictions.decoder.bias            -> .../output_bias when it is
                                               the only copy of the bias
    no pooler (HF masked-LM saves)          -> bert/pooler/dense initialized
    no cls.seq_relationship (masked-LM)     -> written without that head
    cls.seq_relationship.weight [2, H]      -> cls/seq_relationship/
                                               output_weights [2, H] (as is)
Only numpy and safetensors.numpy are used (no torch).

GELU: HF "gelu" is the exact erf GELU; the original (and this project) use
the tanh approximation. `hf_to_original` writes "gelu" (the original's name,
so the tanh form): outputs then differ from HF's by a small amount (~1e-3
relative on activations). HF "gelu_new" / "gelu_pytorch_tanh" / "gelu_fast"
ARE the tanh form and convert exactly. `original_to_hf` writes "gelu_new",
so HF reproduces the original's numbers.

One module, over 500 lines: the two directions of the mapping, which must
stay each other's inverse, side by side.
"""

import argparse
import contextlib
import json
import logging
import os
import re
import shutil
import sys

import numpy as np

from modeling import checkpoints
from modeling import config as config_lib
from modeling import errors
from modeling.data import file_io
from modeling.text import vocabulary

_LOG = logging.getLogger(__name__)

HF_WEIGHTS = "model.safetensors"
HF_CONFIG = "config.json"
# The casing HF's BertTokenizer (and sentence_models) read: without it they
# lower-case, so a converted cased model tokenized wrongly.
HF_TOKENIZER_CONFIG = "tokenizer_config.json"
BERT_CONFIG = checkpoints.CONFIG_FILE
VOCAB = checkpoints.VOCAB_FILE
CKPT_PREFIX = checkpoints.DEFAULT_PREFIX

# hidden_act: HF name -> original name. HF "gelu" is erf; see module doc.
_HF_ACT_TO_ORIGINAL = {
    "gelu": "gelu",
    "gelu_new": "gelu",
    "gelu_pytorch_tanh": "gelu",
    "gelu_fast": "gelu",  # the tanh form written with x * x * x
    "relu": "relu",
    "tanh": "tanh",
    "linear": "linear",
}
# The original's "gelu" is the tanh form (HF's gelu_new); "gelu_exact" (an
# HF or sentence-transformers model read here) is HF's "gelu", the erf form.
_ORIGINAL_ACT_TO_HF = {
    "gelu": "gelu_new",
    "gelu_exact": "gelu",
    "relu": "relu",
    "tanh": "tanh",
    "linear": "linear",
}


# HF buffers and tied copies that have no original variable.
_HF_SKIP = re.compile(
    r"(embeddings\.(position|token_type)_ids$)"
    r"|(^cls\.predictions\.decoder\.(weight|bias)$)"
)


def hf_name_to_original(name):
    """Maps one HF tensor name to (original name, transpose?).

    Returns:
        (str, bool), or None for tensors with no original variable.

    Raises:
        ValueError: a name that is not part of a BERT model.
    """
    if _HF_SKIP.search(name):
        return None
    key = name.removeprefix("bert.")
    if key.startswith("cls.seq_relationship."):
        suffix = {"weight": "output_weights", "bias": "output_bias"}
        return "cls/seq_relationship/" + suffix[key.rsplit(".", 1)[1]], False
    if key == "cls.predictions.bias":
        return "cls/predictions/output_bias", False
    if not key.startswith(("embeddings.", "encoder.", "pooler.", "cls.")):
        raise ValueError(f"HF tensor {name!r} is not part of a BERT model")
    scope = "" if key.startswith("cls.") else "bert/"
    path = re.sub(r"encoder\.layer\.(\d+)\.", r"encoder.layer_\1.", key)
    parts = path.split(".")
    leaf = parts.pop()
    if parts[0] == "embeddings" and parts[-1].endswith("_embeddings"):
        return scope + "/".join(parts), False
    if parts[-1] == "LayerNorm":
        leaf = {"weight": "gamma", "bias": "beta"}.get(leaf, leaf)
        return scope + "/".join(parts + [leaf]), False
    if leaf == "weight":
        return scope + "/".join(parts + ["kernel"]), True
    return scope + "/".join(parts + [leaf]), False


def original_name_to_hf(name, prefix):
    """Maps an original variable name to (HF name, transpose?) or None."""
    if checkpoints.OPTIMIZER_NAME_PATTERN.search(name):
        return None
    if name == "cls/predictions/output_bias":
        return "cls.predictions.bias", False
    if name.startswith("cls/seq_relationship/"):
        leaf = {"output_weights": "weight", "output_bias": "bias"}
        return "cls.seq_relationship." + leaf[name.rsplit("/", 1)[1]], False
    if name.startswith("cls/predictions/"):
        scope = ""
    elif name.startswith("bert/"):
        scope, name = prefix, name.removeprefix("bert/")
    else:
        return None  # fine-tuning heads (output_weights, cls/squad/...)
    path = re.sub(r"encoder/layer_(\d+)/", r"encoder/layer/\1/", name)
    parts = path.split("/")
    leaf = parts.pop()
    if parts[0] == "embeddings" and leaf.endswith("_embeddings"):
        return scope + ".".join(parts + [leaf, "weight"]), False
    mapped = {"gamma": "weight", "beta": "bias", "kernel": "weight"}
    return scope + ".".join(parts + [mapped.get(leaf, leaf)]), leaf == "kernel"


def hf_config_to_original(hf_config, exact_gelu=False):
    """HF config.json dict -> BertConfig (original keys only).

    Args:
      exact_gelu: HF "gelu" (erf) becomes "gelu_exact", HF's numbers;
        otherwise the original's "gelu" (tanh), which the original scripts
        read (see the module doc).
    """
    act = str(hf_config.get("hidden_act", "gelu")).lower()
    if act not in _HF_ACT_TO_ORIGINAL:
        raise ValueError(f"HF hidden_act {act!r} has no original equivalent")
    if act == "gelu" and not exact_gelu:
        _LOG.warning(
            "HF hidden_act 'gelu' is the exact erf GELU; the original BERT "
            "uses the tanh approximation. Outputs will differ slightly."
        )
    if hf_config.get("position_embedding_type", "absolute") != "absolute":
        raise ValueError("only absolute position embeddings are supported")
    eps = hf_config.get("layer_norm_eps", 1e-12)
    if eps != 1e-12:
        _LOG.warning(
            "HF layer_norm_eps %g differs from the original 1e-12", eps
        )
    values = {k: hf_config[k] for k in config_lib.FIELDS if k in hf_config}
    values["hidden_act"] = (
        "gelu_exact"
        if act == "gelu" and exact_gelu
        else _HF_ACT_TO_ORIGINAL[act]
    )
    return config_lib.BertConfig.from_dict(values)


def original_config_to_hf(config, architecture):
    """BertConfig -> HF config.json dict."""
    out = {k: getattr(config, k) for k in config_lib.FIELDS}
    act = config.hidden_act.lower()
    if act not in _ORIGINAL_ACT_TO_HF:
        raise ValueError(
            f"hidden_act {config.hidden_act!r} has no HF equivalent (one of "
            f"{', '.join(_ORIGINAL_ACT_TO_HF)})"
        )
    out["hidden_act"] = _ORIGINAL_ACT_TO_HF[act]
    out.update(
        architectures=[architecture],
        model_type="bert",
        layer_norm_eps=1e-12,
        position_embedding_type="absolute",
        pad_token_id=0,
    )
    return out


def _require_files(folder, names):
    for name in names:
        path = os.path.join(folder, name)
        if os.path.isfile(path):
            continue
        # Weights only: a pickled PyTorch file could run code.
        other = [
            n
            for n in ("model.safetensors.index.json", "pytorch_model.bin")
            if name == HF_WEIGHTS and os.path.exists(os.path.join(folder, n))
        ]
        if other:
            raise FileNotFoundError(
                f"{path} does not exist ({folder} has {other[0]}: sharded "
                "safetensors and pickled PyTorch weights are not read; save "
                "the model as one model.safetensors)"
            )
        raise FileNotFoundError(f"{path} does not exist")


def _copy_atomically(src, dst):
    with file_io.atomic_path(dst) as tmp:
        shutil.copyfile(src, tmp)


@contextlib.contextmanager
def _new_files_removed_on_error(out_dir, names):
    """Creates out_dir if needed; if the block fails (a full disk), removes
    the files it added (and out_dir if it made it): no half-built model
    folder is left behind. A folder that holds a model already (a file
    named as, or starting with, one of `names`: what the conversion
    writes) is refused: replaced file by file, a failure would leave half
    of the old model."""
    file_io.check_folder_path(out_dir, f"The output folder {out_dir}")
    existed = os.path.isdir(out_dir)
    before = set(os.listdir(out_dir)) if existed else set()
    there = sorted(n for n in before if n.startswith(names))
    if there:
        raise errors.UserError(
            f"The output folder {out_dir} holds a model already "
            f"({', '.join(there[:3])}): give a new or empty folder"
        )
    os.makedirs(out_dir, exist_ok=True)
    try:
        yield
    except BaseException:
        if not existed:
            file_io.remove_if_exists(out_dir)
        else:
            for name in set(os.listdir(out_dir)) - before:
                file_io.remove_if_exists(os.path.join(out_dir, name))
        raise


# The pre-training heads, each whole or absent: an HF masked-LM save has
# the first only; a fine-tuned checkpoint neither (its cls/squad/ is not one).
_HEADS = ("cls/predictions/", "cls/seq_relationship/")


# An encoder layer's variables, by the original's names.
_LAYER_NAME = re.compile(r"^bert/encoder/layer_(\d+)/")


def _heads_of(names):
    """The pre-training heads (`_HEADS`) some of whose tensors are there."""
    return tuple(h for h in _HEADS if any(n.startswith(h) for n in names))


def _check_encoder_arrays(arrays, config, source, names=None):
    """Every encoder variable present with its shape; each pre-training
    head whole or absent; no layer beyond the config's (of `names`, the
    source's original names, default the arrays'): a config of 4 layers on
    6 layers' weights converted the first 4 silently (or wrote all 6 under
    a config of 4)."""
    beyond = sorted(
        {
            int(m.group(1))
            for m in map(_LAYER_NAME.match, names or arrays)
            if m and int(m.group(1)) >= config.num_hidden_layers
        }
    )
    if beyond:
        raise ValueError(
            f"{source} has weights of encoder layers {beyond[0]}.."
            f"{beyond[-1]}, beyond the config's num_hidden_layers="
            f"{config.num_hidden_layers}: does the config match the weights?"
        )
    expected = checkpoints.original_variable_shapes(config)
    absent = tuple(h for h in _HEADS if h not in _heads_of(arrays))
    for name, shape in expected.items():
        if absent and name.startswith(absent):
            continue
        if name not in arrays:
            raise ValueError(f"{source} lacks the tensor for {name}")
        if tuple(arrays[name].shape) != shape:
            raise ValueError(
                f"{source}: {name} has shape {list(arrays[name].shape)}, "
                f"the config needs {list(shape)}"
            )


def _truncated_normal(shape, stddev, seed):
    """The original's initializer: a normal draw, redrawn beyond 2 stddev."""
    rng = np.random.default_rng(seed)
    values = rng.standard_normal(shape)
    while (far := np.abs(values) > 2).any():
        values[far] = rng.standard_normal(int(far.sum()))
    return (values * stddev).astype(np.float32)


def _heads_as_the_original_has_them(tensors, arrays, config, source):
    """What an HF save may hold differently from the original's variables.

    The original always has a pooler; HF's masked-LM and token-classification
    models save none, so it is initialized as the original initializes a new
    layer (fine-tuning trains it; mean-pooled embeddings never read it). The
    original's masked-LM output is the word embeddings (tied): an HF model
    saved untied would lose its own decoder, said aloud. Newer HF versions
    may save the output bias only as the decoder's bias.
    """
    pooler = "bert/pooler/dense/"
    if not any(name.startswith(pooler) for name in arrays):
        hidden = config.hidden_size
        arrays[pooler + "kernel"] = _truncated_normal(
            (hidden, hidden), config.initializer_range, seed=0
        )
        arrays[pooler + "bias"] = np.zeros([hidden], np.float32)
        _LOG.warning(
            "%s has no pooler (an HF masked-LM or token-classification "
            "save): bert/pooler/dense is newly initialized (truncated "
            "normal, stddev %g), as the original initializes a new layer; "
            "fine-tuning a classifier trains it",
            source,
            config.initializer_range,
        )
    decoder = tensors.get("cls.predictions.decoder.weight")
    words = arrays.get("bert/embeddings/word_embeddings")
    if (
        decoder is not None
        and words is not None
        and (decoder.shape != words.shape or not np.array_equal(decoder, words))
    ):
        _LOG.warning(
            "%s: cls.predictions.decoder.weight differs from the word "
            "embeddings (an untied model); the original's masked-LM output "
            "is the word embeddings, so that decoder is not converted and "
            "masked-LM predictions will differ from this model's",
            source,
        )
    bias = tensors.get("cls.predictions.decoder.bias")
    if bias is not None and "cls/predictions/output_bias" not in arrays:
        if any(name.startswith("cls/predictions/") for name in arrays):
            arrays["cls/predictions/output_bias"] = bias.astype(np.float32)


def hf_to_original(hf_dir, out_dir):
    """Converts an HF BERT folder into the original release's layout.

    Args:
        hf_dir: folder with config.json, model.safetensors, vocab.txt.
        out_dir: folder to write bert_config.json, bert_model.ckpt.* and
            vocab.txt into (created if needed).

    Returns:
        str, the checkpoint prefix written.

    Raises:
        FileNotFoundError: an input file is missing.
        ValueError: a tensor is missing, has the wrong shape, or the config
            has no original equivalent.
    """
    out_dir = os.fspath(out_dir)
    config, arrays, vocab = read_hf_folder(hf_dir)
    with _new_files_removed_on_error(
        out_dir, (BERT_CONFIG, VOCAB, CKPT_PREFIX + ".", "checkpoint")
    ):
        config.to_json_file(os.path.join(out_dir, BERT_CONFIG))
        _copy_atomically(vocab, os.path.join(out_dir, VOCAB))
        return checkpoints.write_checkpoint(
            os.path.join(out_dir, CKPT_PREFIX), arrays
        )


def read_hf_folder(hf_dir, exact_gelu=False):
    """An HF BERT folder's model in the original's terms, in memory.

    Args:
        hf_dir: folder with config.json, model.safetensors, vocab.txt.
        exact_gelu: see hf_config_to_original.

    Returns:
        (BertConfig, {original variable name: float32 array}, the path of
        its vocab.txt).

    Raises:
        as hf_to_original.
    """
    from safetensors import numpy as safetensors_numpy

    hf_dir = os.fspath(hf_dir)
    _require_files(hf_dir, (HF_CONFIG, HF_WEIGHTS, VOCAB))
    config_file = os.path.join(hf_dir, HF_CONFIG)
    try:
        config = hf_config_to_original(
            json.loads(file_io.read_text(config_file)), exact_gelu
        )
    except json.JSONDecodeError as e:
        raise ValueError(f"{config_file} is not valid JSON: {e}") from None
    except (ValueError, TypeError, AttributeError) as e:
        # AttributeError: a JSON value that is not an object.
        raise ValueError(f"{config_file}: {e}") from None
    weights_file = os.path.join(hf_dir, HF_WEIGHTS)
    arrays, skipped = {}, []
    try:
        tensors = safetensors_numpy.load_file(weights_file)
    except Exception as e:  # safetensors' own error class (a Rust error)
        raise ValueError(
            f"{weights_file} is not a readable safetensors file (truncated "
            f"or damaged: {e}); download it again"
        ) from e
    for name, tensor in tensors.items():
        try:
            mapped = hf_name_to_original(name)
        except ValueError:
            skipped.append(name)  # e.g. a fine-tuned model's classifier
            continue
        if mapped is None:
            continue
        original, transpose = mapped
        value = tensor.T if transpose else tensor
        arrays[original] = np.ascontiguousarray(value, dtype=np.float32)
    if skipped:
        _LOG.warning(
            "Not converted (not part of the BERT encoder or its pre-training "
            "heads): %s",
            ", ".join(sorted(skipped)),
        )
    _heads_as_the_original_has_them(tensors, arrays, config, weights_file)
    _check_encoder_arrays(arrays, config, weights_file)
    vocab = os.path.join(hf_dir, VOCAB)
    # Weights converted, no input made: the size alone matters here.
    config_lib.check_vocab_size(vocab, config, input_tokens=False)
    return config, arrays, vocab


def original_to_hf(ckpt_dir, out_dir):
    """Converts an original-layout folder into an HF BERT folder.

    Writes config.json (hidden_act "gelu_new": the original's tanh GELU),
    model.safetensors and vocab.txt. With both pre-training heads the
    tensors are named as HF's BertForPreTraining (`bert.` prefix, `cls.*`),
    with one as BertForMaskedLM or BertForNextSentencePrediction, without
    them as BertModel (no prefix). Optimizer slots, global_step and
    fine-tuning heads are not converted (the heads are named in a warning).

    Args:
        ckpt_dir: folder with bert_config.json, vocab.txt and a checkpoint
            (see checkpoints.resolve_checkpoint).
        out_dir: output folder (created if needed).

    Returns:
        str, the path of model.safetensors.
    """
    from safetensors import numpy as safetensors_numpy

    ckpt_dir, out_dir = os.fspath(ckpt_dir), os.fspath(out_dir)
    _require_files(ckpt_dir, (BERT_CONFIG, VOCAB))
    config = config_lib.BertConfig.from_json_file(
        os.path.join(ckpt_dir, BERT_CONFIG)
    )
    # Only the model's own variables are read: not the optimizer's slots
    # (twice the model again), nor what else a run saved there.
    expected = checkpoints.original_variable_shapes(config)
    there = checkpoints.checkpoint_shapes(ckpt_dir)
    others = sorted(
        name
        for name in there
        if name not in expected
        and not checkpoints.OPTIMIZER_NAME_PATTERN.search(name)
    )
    if others:
        _LOG.warning(
            "Not converted (not part of the BERT encoder or its pre-training "
            "heads, such as a fine-tuning head): %s",
            ", ".join(others),
        )
    arrays = checkpoints.read_checkpoint(
        ckpt_dir, names=[name for name in there if name in expected]
    )
    _check_encoder_arrays(arrays, config, ckpt_dir, names=there)
    heads = _heads_of(arrays)
    prefix = "bert." if heads else ""
    tensors = {}
    for name, value in arrays.items():
        mapped = original_name_to_hf(name, prefix)
        if mapped is None:
            continue
        hf_name, transpose = mapped
        tensors[hf_name] = np.ascontiguousarray(value.T if transpose else value)
    architecture = {
        _HEADS: "BertForPreTraining",
        _HEADS[:1]: "BertForMaskedLM",
        _HEADS[1:]: "BertForNextSentencePrediction",
    }.get(heads, "BertModel")
    hf_config = original_config_to_hf(config, architecture)
    target = os.path.join(out_dir, HF_WEIGHTS)
    # The original's folders do not record their casing; the released
    # vocabularies tell it (uncased ones have no upper-case token).
    tokenizer_config = {
        "do_lower_case": vocabulary.infer_do_lower_case(
            vocabulary.load_vocab(os.path.join(ckpt_dir, VOCAB))
        ),
        "tokenizer_class": "BertTokenizer",
        "model_max_length": config.max_position_embeddings,
    }
    with _new_files_removed_on_error(
        out_dir, (HF_CONFIG, HF_TOKENIZER_CONFIG, VOCAB, HF_WEIGHTS)
    ):
        file_io.write_text(
            os.path.join(out_dir, HF_CONFIG),
            json.dumps(hf_config, indent=2, sort_keys=True) + "\n",
        )
        file_io.write_text(
            os.path.join(out_dir, HF_TOKENIZER_CONFIG),
            json.dumps(tokenizer_config, indent=2, sort_keys=True) + "\n",
        )
        _copy_atomically(
            os.path.join(ckpt_dir, VOCAB), os.path.join(out_dir, VOCAB)
        )
        with file_io.atomic_path(target) as tmp:
            safetensors_numpy.save_file(tensors, tmp, metadata={"format": "pt"})
    return target


def main(argv=None):
    """CLI: --from_hf DIR | --to_hf DIR, with --output_dir OUT."""
    parser = argparse.ArgumentParser(
        prog="python -m modeling.convert", description=__doc__.split("\n")[0]
    )
    source = parser.add_mutually_exclusive_group(required=True)
    source.add_argument("--from_hf", help="HF folder to convert")
    source.add_argument("--to_hf", help="original-layout folder to convert")
    parser.add_argument("--output_dir", required=True)
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.INFO)
    try:
        if args.from_hf:
            written = hf_to_original(args.from_hf, args.output_dir)
        else:
            written = original_to_hf(args.to_hf, args.output_dir)
    except (ValueError, FileNotFoundError, NotADirectoryError) as e:
        # A mistake in the inputs (the scripts' rule: one line, status 1).
        print(f"error: {e}", file=sys.stderr)
        sys.exit(1)
    print(f"wrote {written}")


if __name__ == "__main__":
    main()
