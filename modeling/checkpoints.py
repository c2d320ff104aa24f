"""Original-format (TF1 name-based) checkpoints: resolve, read, load, write.

A model variable's Keras path IS its original checkpoint name (the layers are
named after the original scopes, modeling/layers.py), so loading is a direct name match with shape checks and no
translation table. The table of names is the model itself; the test
`checkpoints_test.py` asserts that BertPretrainer's (name, shape) set equals
the original's.

Only weights are read (`tf.train.load_checkpoint`); `.meta` graphs are never
imported. Writes use the V2 bundle format (`<prefix>.index`,
`<prefix>.data-00000-of-00001`) with arbitrary names, as tf.compat.v1 Saver
writes them, so the original scripts read our checkpoints and we read theirs.
"""

import dataclasses
import os
import re

import numpy as np
import tensorflow as tf
from absl import logging

from modeling import errors
from modeling.data import file_io

CHECKPOINT_STATE_FILE = "checkpoint"
DEFAULT_PREFIX = "bert_model.ckpt"
GLOBAL_STEP = "global_step"
# The other files of a released checkpoint folder.
CONFIG_FILE = "bert_config.json"
VOCAB_FILE = "vocab.txt"

# Checkpoint names that are normal extras when loading weights: optimizer
# slots, the step counter and names some TF1 optimizers add.
OPTIMIZER_NAME_PATTERN = re.compile(
    r"(/adam_[mv]$)|(^global_step$)|(AdamWeightDecayOptimizer)"
)


def variable_name(variable):
    """The original checkpoint name of a Keras variable.

    Its `path` minus any `:N` suffix. The classifier head's root-scope
    `output_weights` / `output_bias` need no exception: heads.ClassifierHead
    creates them outside any name scope, so their path is already that.

    Args:
        variable: keras.Variable (or tf.Variable).

    Returns:
        str, e.g. "bert/encoder/layer_0/attention/self/query/kernel".
    """
    name = getattr(variable, "path", None) or variable.name
    return re.sub(r":\d+$", "", name)


def original_variable_shapes(config, pretraining_heads=True):
    """The original release's variable table: {name: shape} for a config.

    H = hidden_size, I = intermediate_size, V = vocab_size,
    P = max_position_embeddings, T = type_vocab_size. Kernels are [in, out]
    (tf.layers.dense); Q/K/V are separate [H, H] kernels; the MLM decoder is
    tied to word_embeddings, so it has only `output_bias`;
    `seq_relationship/output_weights` is [out, in] = [2, H].

    Args:
        config: BertConfig.
        pretraining_heads: bool, include the `cls/*` heads.

    Returns:
        dict {str: tuple of int}.
    """
    h, i = config.hidden_size, config.intermediate_size
    shapes = {
        "bert/embeddings/word_embeddings": (config.vocab_size, h),
        "bert/embeddings/token_type_embeddings": (config.type_vocab_size, h),
        "bert/embeddings/position_embeddings": (
            config.max_position_embeddings,
            h,
        ),
        "bert/embeddings/LayerNorm/gamma": (h,),
        "bert/embeddings/LayerNorm/beta": (h,),
    }
    dense = {
        "attention/self/query": (h, h),
        "attention/self/key": (h, h),
        "attention/self/value": (h, h),
        "attention/output/dense": (h, h),
        "intermediate/dense": (h, i),
        "output/dense": (i, h),
    }
    for n in range(config.num_hidden_layers):
        scope = f"bert/encoder/layer_{n}/"
        for name, kernel in dense.items():
            shapes[scope + name + "/kernel"] = kernel
            shapes[scope + name + "/bias"] = (kernel[1],)
        for norm in ("attention/output/LayerNorm", "output/LayerNorm"):
            shapes[f"{scope}{norm}/gamma"] = (h,)
            shapes[f"{scope}{norm}/beta"] = (h,)
    shapes["bert/pooler/dense/kernel"] = (h, h)
    shapes["bert/pooler/dense/bias"] = (h,)
    if pretraining_heads:
        shapes.update(
            {
                "cls/predictions/transform/dense/kernel": (h, h),
                "cls/predictions/transform/dense/bias": (h,),
                "cls/predictions/transform/LayerNorm/gamma": (h,),
                "cls/predictions/transform/LayerNorm/beta": (h,),
                "cls/predictions/output_bias": (config.vocab_size,),
                "cls/seq_relationship/output_weights": (2, h),
                "cls/seq_relationship/output_bias": (2,),
            }
        )
    return shapes


def resolve_checkpoint(path):
    """Finds the checkpoint prefix a user means.

    Args:
        path: str, a prefix (`.../bert_model.ckpt`, `.../model.ckpt-3`) or a
            directory (its `checkpoint` state file names the newest; without
            one, `bert_model.ckpt` in it).

    Returns:
        str, the prefix; `<prefix>.index` and its data file exist.

    Raises:
        FileNotFoundError: nothing readable is there; the message says what
            was looked for.
    """
    path = os.fspath(path)
    if tf.io.gfile.isdir(path):
        state = tf.train.get_checkpoint_state(path)
        if state and state.model_checkpoint_path:
            prefix = state.model_checkpoint_path
            if not os.path.isabs(prefix) and "://" not in prefix:
                prefix = os.path.join(path, prefix)
            moved = os.path.join(path, os.path.basename(prefix))
            if not tf.io.gfile.exists(prefix + ".index"):
                # Old TF1 Savers wrote absolute paths; the folder may have
                # moved since.
                prefix = moved
        else:
            prefix = os.path.join(path, DEFAULT_PREFIX)
    else:
        prefix = path
        for suffix in (".index", ".meta", ".data-00000-of-00001"):
            prefix = prefix.removesuffix(suffix)
    if not tf.io.gfile.exists(prefix + ".index"):
        raise FileNotFoundError(
            f"No checkpoint at {path}: {prefix}.index does not exist (give a "
            "checkpoint prefix such as .../bert_model.ckpt or a directory "
            "holding one)"
        )
    if not tf.io.gfile.glob(prefix + ".data-*-of-*"):
        raise FileNotFoundError(
            f"Checkpoint {prefix} has an index but no data file "
            f"({prefix}.data-00000-of-00001)"
        )
    return prefix


@dataclasses.dataclass
class CheckpointFiles:
    """The files of a checkpoint folder as released (see `checkpoint_files`).

    Attributes:
        prefix: str, the checkpoint prefix (`resolve_checkpoint`).
        config_file: str, `bert_config.json` beside it.
        vocab_file: str or None, `vocab.txt` beside it when there is one.
    """

    prefix: str
    config_file: str
    vocab_file: str | None


def checkpoint_files(path, bert_config_file=None):
    """Finds a checkpoint and the files that describe it.

    A released model is a folder holding `bert_config.json`,
    `bert_model.ckpt.*` and `vocab.txt`; a fine-tuning output folder holds
    `model.ckpt-N.*` and a `checkpoint` state file. Either the folder or a
    prefix in it may be given; the config and vocabulary are looked for in
    the checkpoint's folder.

    Args:
        path: a folder or a checkpoint prefix (see `resolve_checkpoint`).
        bert_config_file: str, the config to use instead of the one beside
            the checkpoint.

    Returns:
        CheckpointFiles.

    Raises:
        FileNotFoundError: no checkpoint there, or no config beside it (the
            message names the file looked for).
    """
    prefix = resolve_checkpoint(path)
    folder = os.path.dirname(prefix) or "."
    config_file = bert_config_file or os.path.join(folder, CONFIG_FILE)
    if not tf.io.gfile.exists(config_file):
        raise FileNotFoundError(
            f"No {CONFIG_FILE} for checkpoint {prefix}: {config_file} does "
            "not exist (pass bert_config_file=... to name the config)"
        )
    vocab_file = os.path.join(folder, VOCAB_FILE)
    if not tf.io.gfile.exists(vocab_file):
        vocab_file = None
    return CheckpointFiles(prefix, os.fspath(config_file), vocab_file)


def _reader(prefix):
    try:
        return tf.train.load_checkpoint(prefix)
    except (tf.errors.OpError, ValueError, IndexError, RuntimeError) as e:
        raise ValueError(
            f"Checkpoint {prefix} is unreadable (truncated or corrupt "
            f"index?): {_first_line(e)}"
        ) from e


def _first_line(error):
    return str(getattr(error, "message", error)).strip().splitlines()[0]


def _get_tensor(reader, prefix, name):
    try:
        return reader.get_tensor(name)
    except (tf.errors.OpError, ValueError, IndexError, RuntimeError) as e:
        raise ValueError(
            f"Checkpoint {prefix} is unreadable: reading {name!r} failed "
            f"(truncated or corrupt data file?): {_first_line(e)}"
        ) from e


def checkpoint_shapes(path):
    """{name: shape tuple} of a checkpoint, without reading the values."""
    prefix = resolve_checkpoint(path)
    shapes = _reader(prefix).get_variable_to_shape_map()
    return {name: tuple(shape) for name, shape in shapes.items()}


def read_checkpoint(path):
    """Reads every tensor of a checkpoint (weights only; no graph import).

    Args:
        path: a prefix or directory, see `resolve_checkpoint`.

    Returns:
        dict {original name: np.ndarray}, in sorted name order.

    Raises:
        FileNotFoundError: no checkpoint there.
        ValueError: the files are truncated or corrupt.
    """
    prefix = resolve_checkpoint(path)
    reader = _reader(prefix)
    names = sorted(reader.get_variable_to_shape_map())
    return {name: _get_tensor(reader, prefix, name) for name in names}


@dataclasses.dataclass
class LoadReport:
    """What `load_weights` did.

    Attributes:
        checkpoint: str, the resolved prefix.
        restored: list of names assigned from the checkpoint.
        missing: model variable names absent from the checkpoint (all of
            them matched `ignore_missing`; others raise).
        unused: checkpoint names no model variable took.
    """

    checkpoint: str
    restored: list
    missing: list
    unused: list

    @property
    def unexpected(self):
        """Unused names that are not optimizer slots / global_step."""
        return [n for n in self.unused if not OPTIMIZER_NAME_PATTERN.search(n)]


def _variables_of(model_or_variables):
    if hasattr(model_or_variables, "weights"):
        return list(model_or_variables.weights)
    return list(model_or_variables)


def _check_names_and_shapes(variables, shapes, prefix, ignore_missing):
    """Splits variables into (to restore, ignored missing); raises on errors."""
    to_restore, missing, absent, mismatched = [], [], [], []
    for variable in variables:
        name = variable_name(variable)
        if name not in shapes:
            if any(re.search(p, name) for p in ignore_missing):
                missing.append(name)
            else:
                absent.append(name)
            continue
        if tuple(variable.shape) != shapes[name]:
            mismatched.append((name, tuple(variable.shape), shapes[name]))
        to_restore.append((name, variable))
    if mismatched:
        name, model_shape, ckpt_shape = mismatched[0]
        more = (
            f" (and {len(mismatched) - 1} more)" if len(mismatched) > 1 else ""
        )
        raise ValueError(
            f"Shape mismatch for variable {name}: the model has "
            f"{list(model_shape)} but checkpoint {prefix} has "
            f"{list(ckpt_shape)}{more}. Does bert_config.json match the "
            "checkpoint?"
        )
    if absent:
        shown = ", ".join(absent[:5]) + (" ..." if len(absent) > 5 else "")
        raise ValueError(
            f"Checkpoint {prefix} lacks {len(absent)} variable(s) the model "
            f"needs: {shown}. If these are new heads being fine-tuned, pass "
            "them in ignore_missing."
        )
    return to_restore, missing


def load_weights(model_or_variables, path, ignore_missing=()):
    """Assigns a model's variables from an original-format checkpoint.

    Names match exactly (variable path = checkpoint name). Optimizer slots,
    `global_step` and other checkpoint names the model lacks are left out
    and listed in the report.

    Args:
        model_or_variables: a Keras layer/model (its `weights`) or an
            iterable of variables.
        path: checkpoint prefix or directory, see `resolve_checkpoint`; or
            a dict {original name: array} (weights read from elsewhere, as
            convert.read_hf_folder gives them).
        ignore_missing: iterable of regular expressions (re.search); model
            variables matching one may be absent from the checkpoint (e.g.
            `^output_` or `^cls/squad/` for heads being fine-tuned).

    Returns:
        LoadReport.

    Raises:
        FileNotFoundError: no checkpoint at `path`.
        ValueError: a shape differs (names the variable and both shapes), a
            needed variable is missing, or the files are unreadable. Nothing
            is assigned when the names or shapes do not match.
    """
    if isinstance(path, dict):
        prefix = "the weights given"
        shapes = {n: tuple(np.shape(a)) for n, a in path.items()}

        def tensor(name):
            return path[name]
    else:
        prefix = resolve_checkpoint(path)
        reader = _reader(prefix)
        shapes = {
            n: tuple(s) for n, s in reader.get_variable_to_shape_map().items()
        }

        def tensor(name):
            return _get_tensor(reader, prefix, name)

    variables = _variables_of(model_or_variables)
    to_restore, missing = _check_names_and_shapes(
        variables, shapes, prefix, tuple(ignore_missing)
    )
    values = [(v, tensor(name)) for name, v in to_restore]
    for variable, value in values:
        variable.assign(np.asarray(value).astype(variable.dtype))
    restored = [name for name, _ in to_restore]
    used = set(restored)
    report = LoadReport(
        checkpoint=prefix,
        restored=restored,
        missing=missing,
        unused=sorted(n for n in shapes if n not in used),
    )
    logging.info(
        "Restored %d variables from %s; %d left at their initial values "
        "(%s); %d checkpoint names unused (%d not optimizer state).",
        len(restored),
        prefix,
        len(missing),
        ", ".join(missing) or "none",
        len(report.unused),
        len(report.unexpected),
    )
    return report


def _to_tensor(value):
    # keras.Variable and tf.Variable (mirrored too) convert to their value.
    return tf.convert_to_tensor(value)


def _quote(text):
    return '"' + text.replace("\\", "\\\\").replace('"', '\\"') + '"'


def _write_state(directory, newest, all_paths):
    """Writes the `checkpoint` state file (relative paths) atomically."""
    lines = [f"model_checkpoint_path: {_quote(newest)}"]
    lines += [f"all_model_checkpoint_paths: {_quote(p)}" for p in all_paths]
    file_io.write_text(
        os.path.join(directory, CHECKPOINT_STATE_FILE), "\n".join(lines) + "\n"
    )


def _delete_checkpoint_files(prefix):
    for suffix in (".index", ".meta", ".data-?????-of-?????"):
        for filename in tf.io.gfile.glob(prefix + suffix):
            tf.io.gfile.remove(filename)


def write_checkpoint(prefix, arrays, global_step=None, keep_max=None):
    """Writes an original-format checkpoint atomically.

    The tensors are saved under a temporary prefix in the same folder, the
    data and then the index files are renamed into place, and only then is
    the `checkpoint` state file (relative paths) rewritten, atomically. So
    a reader never sees a half-written checkpoint as the newest.

    Args:
        prefix: str, e.g. ".../model.ckpt-1000" (used as given; the step is
            not appended).
        arrays: dict {original name: np.ndarray, tf.Tensor or variable};
            e.g. `{variable_name(v): v for v in model.weights}` plus the
            optimizer's `<name>/adam_m`, `<name>/adam_v`.
        global_step: int or None; stored as the int64 scalar `global_step`.
        keep_max: int or None; keep only this many newest checkpoints listed
            in the state file, deleting the files of older ones.

    Returns:
        str, the prefix written.
    """
    prefix = os.fspath(prefix)
    directory = os.path.dirname(prefix) or "."
    tf.io.gfile.makedirs(directory)
    tensors = {name: _to_tensor(value) for name, value in arrays.items()}
    if global_step is not None:
        if GLOBAL_STEP in tensors:
            raise ValueError("global_step given both in arrays and as argument")
        tensors[GLOBAL_STEP] = tf.constant(int(global_step), tf.int64)
    names = sorted(tensors)
    tmp_prefix = file_io.temp_name(prefix)
    try:
        tf.raw_ops.SaveV2(
            prefix=tmp_prefix,
            tensor_names=names,
            shape_and_slices=[""] * len(names),
            tensors=[tensors[n] for n in names],
        )
        # Data first, index last: the index marks a checkpoint present.
        for data_file in tf.io.gfile.glob(tmp_prefix + ".data-?????-of-?????"):
            file_io.publish(data_file, prefix + data_file[len(tmp_prefix) :])
        file_io.publish(tmp_prefix + ".index", prefix + ".index")
    except BaseException as e:
        for leftover in tf.io.gfile.glob(tmp_prefix + ".*"):
            file_io.remove_if_exists(leftover)
        if isinstance(e, tf.errors.ResourceExhaustedError):
            raise errors.UserError(
                f"No space left on the device of {directory} to write the "
                f"checkpoint {prefix} (nothing partial was left): free some "
                "space and re-run"
            ) from e
        raise
    _update_state(directory, prefix, keep_max)
    return prefix


def _update_state(directory, prefix, keep_max):
    """Appends `prefix` to the state file, pruning beyond `keep_max`."""
    name = os.path.basename(prefix)
    state = tf.train.get_checkpoint_state(directory)
    previous = list(state.all_model_checkpoint_paths) if state else []
    previous = [os.path.basename(p) for p in previous if p]
    all_paths = [p for p in previous if p != name] + [name]
    dropped = []
    if keep_max is not None and len(all_paths) > keep_max:
        dropped = all_paths[: len(all_paths) - keep_max]
        all_paths = all_paths[len(all_paths) - keep_max :]
    _write_state(directory, name, all_paths)
    for old in dropped:
        _delete_checkpoint_files(os.path.join(directory, old))
