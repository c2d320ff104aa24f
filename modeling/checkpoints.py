"""Original-format (TF1 name-based) checkpoints: resolve, read, load, write.

A model variable's Keras path IS its original checkpoint name (the layers are
named after the original scopes, modeling/layers.py), so loading is a direct name match with shape checks and no
translation table. The table of names is the model itself; the test
`checkpoints_test.py` asserts that BertPretrainer's (name, shape) set equals
the original's.

Only weights are read; `.meta` graphs are never imported. Reads and writes
use the V2 bundle format (`<prefix>.index`, `<prefix>.data-00000-of-00001`)
with arbitrary names, as tf.compat.v1 Saver writes them, so the original
scripts read our checkpoints and we read theirs. The format is read and
written by modeling/tensor_bundle.py, and the `checkpoint` state file parsed
here: this module imports neither TensorFlow nor Keras, so checkpoints load
and save under the JAX backend on machines without TensorFlow.

One module, over 500 lines: the original checkpoint layout in one place:
resolve, read, load by name, write.
"""

import dataclasses
import os
import re

import numpy as np
from absl import logging

from modeling import errors
from modeling import tensor_bundle
from modeling.data import file_io

CHECKPOINT_STATE_FILE = "checkpoint"
DEFAULT_PREFIX = "bert_model.ckpt"
GLOBAL_STEP = "global_step"
# The other files of a released checkpoint folder.
CONFIG_FILE = "bert_config.json"
VOCAB_FILE = "vocab.txt"

# Checkpoint names that are normal extras when loading weights: optimizer
# slots, the step counter and names some TF1 optimizers add.
# The tensor only TF2's object-based checkpoints hold.
_OBJECT_GRAPH = "_CHECKPOINTABLE_OBJECT_GRAPH"
# A checkpoint's data files after its prefix: `.data-00000-of-00001`.
_DATA_TAIL = r"\.data-\d{5}-of-\d{5}"
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
    if file_io.is_dir(path):
        state = read_state(path)
        if state and state.model_checkpoint_path:
            prefix = state.model_checkpoint_path
            moved = os.path.join(path, os.path.basename(prefix))
            if not file_io.exists(prefix + ".index"):
                # Old TF1 Savers wrote absolute paths; the folder may have
                # moved since.
                prefix = moved
        else:
            prefix = os.path.join(path, DEFAULT_PREFIX)
    else:
        prefix = path
        for suffix in (".index", ".meta", ".data-00000-of-00001"):
            prefix = prefix.removesuffix(suffix)
    if not file_io.exists(prefix + ".index"):
        raise FileNotFoundError(
            f"No checkpoint at {path}: {prefix}.index does not exist (give a "
            "checkpoint prefix such as .../bert_model.ckpt or a directory "
            "holding one)"
        )
    if not file_io.files_named(prefix, _DATA_TAIL):
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
    if not file_io.exists(config_file):
        raise FileNotFoundError(
            f"No {CONFIG_FILE} for checkpoint {prefix}: {config_file} does "
            "not exist (pass bert_config_file=... to name the config)"
        )
    vocab_file = os.path.join(folder, VOCAB_FILE)
    if not file_io.exists(vocab_file):
        vocab_file = None
    return CheckpointFiles(prefix, os.fspath(config_file), vocab_file)


def _reader(prefix):
    try:
        reader = tensor_bundle.read(prefix)
    except ValueError as e:
        raise ValueError(
            f"Checkpoint {prefix} is unreadable (truncated or corrupt "
            f"index?): {_first_line(e)}"
        ) from e
    if _OBJECT_GRAPH in reader.shapes:
        # Names such as `encoder/layer/.ATTRIBUTES/VARIABLE_VALUE`, none of
        # the original's: said as such, not as missing variables.
        raise ValueError(
            f"Checkpoint {prefix} is a TF2 object-based checkpoint "
            "(tf.train.Checkpoint or Keras, as TF Model Garden's BERT "
            "checkpoints are), not the original's name-based format; give "
            "a checkpoint of the original release (or one this project wrote)"
        )
    return reader


def _first_line(error):
    return str(getattr(error, "message", error)).strip().splitlines()[0]


def _get_tensor(reader, prefix, name):
    try:
        return reader.get_tensor(name)
    except ValueError as e:
        raise ValueError(
            f"Checkpoint {prefix} is unreadable: reading {name!r} failed "
            f"(truncated or corrupt data file?): {_first_line(e)}"
        ) from e


def checkpoint_shapes(path):
    """{name: shape tuple} of a checkpoint, without reading the values."""
    prefix = resolve_checkpoint(path)
    shapes = _reader(prefix).get_variable_to_shape_map()
    return {name: tuple(shape) for name, shape in shapes.items()}


def read_checkpoint(path, names=None):
    """Reads the tensors of a checkpoint (weights only; no graph import).

    Args:
        path: a prefix or directory, see `resolve_checkpoint`.
        names: the tensors to read (None: every one); each must be there.

    Returns:
        dict {original name: np.ndarray}, in sorted name order.

    Raises:
        FileNotFoundError: no checkpoint there.
        ValueError: the files are truncated or corrupt.
    """
    prefix = resolve_checkpoint(path)
    reader = _reader(prefix)
    if names is None:
        names = reader.get_variable_to_shape_map()
    return {name: _get_tensor(reader, prefix, name) for name in sorted(names)}


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


def is_output_layer(name):
    """Whether `name` is a fine-tuning head's output layer (`output_bias`,
    `output_weights`, `cls/squad/output_bias`): its first dimension is the
    number of labels. Not the pre-training heads' (`cls/predictions/...`
    spans the vocabulary, `cls/seq_relationship/...` two classes)."""
    if name.startswith(("cls/predictions/", "cls/seq_relationship/")):
        return False
    return name.rsplit("/", 1)[-1] in ("output_weights", "output_bias")


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
        if all(is_output_layer(m[0]) for m in mismatched):
            # Only the output layer: a fine-tuned head of other labels.
            raise ValueError(
                f"Checkpoint {prefix} was fine-tuned with {ckpt_shape[0]} "
                f"labels ({name} has shape {list(ckpt_shape)}); the model "
                f"has {model_shape[0]} ({list(model_shape)}). Give the "
                "labels it was trained with, or start from a checkpoint "
                "without that head."
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


def check_weights(model_or_variables, path, ignore_missing=()):
    """What `load_weights` checks (the checkpoint is there and readable, its
    names and shapes fit the model), reading the index only and assigning
    nothing: what a run calls before it writes anything.

    Raises:
        FileNotFoundError, ValueError: as load_weights.
    """
    prefix = resolve_checkpoint(path)
    shapes = {
        n: tuple(s)
        for n, s in _reader(prefix).get_variable_to_shape_map().items()
    }
    _check_names_and_shapes(
        _variables_of(model_or_variables), shapes, prefix, tuple(ignore_missing)
    )


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
        # A tf.Variable's dtype is a tf.DType, a Keras variable's a name.
        dtype = getattr(variable.dtype, "as_numpy_dtype", variable.dtype)
        variable.assign(np.asarray(value).astype(dtype))
    restored = [name for name, _ in to_restore]
    used = set(restored)
    report = LoadReport(
        checkpoint=prefix,
        restored=restored,
        missing=missing,
        unused=sorted(n for n in shapes if n not in used),
    )
    _warn_of_deeper_encoder(used, report.unused, prefix)
    _log_trainable_variables(variables, used)
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


def _warn_of_deeper_encoder(restored, unused, prefix):
    """Warns when the checkpoint has encoder layers past the model's (a
    bert_config.json of fewer layers loads the first ones, as the
    original's assignment map did, and was not said)."""

    def layers(names):
        return {
            int(m.group(1))
            for m in map(re.compile(r"^bert/encoder/layer_(\d+)/").match, names)
            if m
        }

    have, more = layers(restored), layers(unused)
    beyond = sorted(more - have)
    if have and beyond and beyond[0] > max(have):
        logging.warning(
            "%s has encoder layers %d..%d that the model (%d layers) lacks: "
            "only its first %d are loaded. Does bert_config.json's "
            "num_hidden_layers match the checkpoint?",
            prefix,
            beyond[0],
            beyond[-1],
            len(have),
            len(have),
        )


def _log_trainable_variables(variables, restored):
    """The original's listing: each trainable variable's name and shape,
    marked when it came from the checkpoint (the user's check of what
    --init_checkpoint gave)."""
    logging.info("**** Trainable Variables ****")
    for variable in variables:
        if not getattr(variable, "trainable", True):
            continue
        name = variable_name(variable)
        logging.info(
            "  name = %s:0, shape = %s%s",
            name,
            tuple(variable.shape),
            ", *INIT_FROM_CKPT*" if name in restored else "",
        )


def _quote(text):
    return '"' + text.replace("\\", "\\\\").replace('"', '\\"') + '"'


@dataclasses.dataclass
class CheckpointState:
    """A folder's `checkpoint` state file: tf.train.CheckpointState's two
    fields that matter (the timestamps TF2 adds are ignored). Relative paths
    are joined to the folder, as tf.train.get_checkpoint_state does.

    Attributes:
        model_checkpoint_path: str, the newest checkpoint's prefix ("" when
            the file names none).
        all_model_checkpoint_paths: list of str, oldest first.
    """

    model_checkpoint_path: str
    all_model_checkpoint_paths: list


# One `field: value` of the text proto: a double-quoted string with C
# escapes, or a bare token (a number).
_STATE_FIELD = re.compile(r'\s*(\w+)\s*:\s*("(?:[^"\\\n]|\\.)*"|[^\s"]+)\s*')
_STATE_ESCAPE = re.compile(rb"\\(x[0-9a-fA-F]{1,2}|[0-7]{1,3}|.)", re.DOTALL)
_STATE_ESCAPES = {b"n": b"\n", b"t": b"\t", b"r": b"\r"}


def _unquote(token):
    def one(match):
        code = match.group(1)
        if code[:1] == b"x":
            return bytes([int(code[1:], 16)])
        if code[:1].isdigit():
            return bytes([int(code, 8) & 0xFF])
        return _STATE_ESCAPES.get(code, code)

    # Text format escapes bytes (a UTF-8 name's as octal): unescape, decode.
    raw = _STATE_ESCAPE.sub(one, token[1:-1].encode("utf-8"))
    return raw.decode("utf-8")


def read_state(directory):
    """Parses the `checkpoint` state file of `directory` (a text proto, as
    tf.train.get_checkpoint_state reads it).

    Returns:
        CheckpointState, or None when the folder has no state file or it
        cannot be parsed (logged; the caller looks for checkpoints on disk).
    """
    directory = os.fspath(directory)
    path = os.path.join(directory, CHECKPOINT_STATE_FILE)
    if not file_io.exists(path):
        return None
    try:
        text = file_io.read_text(path)
    except ValueError as e:
        logging.warning("%s: checkpoint state ignored", e)
        return None
    fields, pos = [], 0
    while pos < len(text):
        match = _STATE_FIELD.match(text, pos)
        if match is None:
            if text[pos:].strip():
                logging.warning(
                    "%s: not a checkpoint state file at character %d; ignored",
                    path,
                    pos,
                )
                return None
            break
        fields.append(match.groups())
        pos = match.end()

    def value(token):
        prefix = _unquote(token) if token.startswith('"') else token
        if prefix and not os.path.isabs(prefix):
            if not file_io.is_remote(prefix):
                prefix = os.path.join(directory, prefix)
        return prefix

    newest = [value(v) for k, v in fields if k == "model_checkpoint_path"]
    return CheckpointState(
        model_checkpoint_path=newest[-1] if newest else "",
        all_model_checkpoint_paths=[
            value(v) for k, v in fields if k == "all_model_checkpoint_paths"
        ],
    )


def _write_state(directory, newest, all_paths):
    """Writes the `checkpoint` state file (relative paths) atomically."""
    lines = [f"model_checkpoint_path: {_quote(newest)}"]
    lines += [f"all_model_checkpoint_paths: {_quote(p)}" for p in all_paths]
    # A link is replaced (file_io.atomic_paths), as the original's was.
    file_io.write_text(
        os.path.join(directory, CHECKPOINT_STATE_FILE),
        "\n".join(lines) + "\n",
        follow_links=False,
    )


def _delete_checkpoint_files(prefix):
    tail = rf"(\.index|\.meta|{_DATA_TAIL})"
    for filename in file_io.files_named(prefix, tail):
        file_io.remove_if_exists(filename)


def write_checkpoint(prefix, arrays, global_step=None, keep_max=None):
    """Writes an original-format checkpoint atomically.

    The data and then the index file are each written under a temporary
    name in the same folder and renamed into place (tensor_bundle.write),
    and only then is the `checkpoint` state file (relative paths)
    rewritten, atomically. So a reader never sees a half-written checkpoint
    as the newest.

    Args:
        prefix: str, e.g. ".../model.ckpt-1000" (used as given; the step is
            not appended).
        arrays: dict {original name: np.ndarray, or a keras / tf variable, a
            tf.Tensor or a jax array, converted one at a time as written};
            e.g. `{variable_name(v): v for v in model.weights}` plus the
            optimizer's `<name>/adam_m`, `<name>/adam_v`.
        global_step: int or None; stored as the int64 scalar `global_step`.
        keep_max: int or None; keep only this many newest checkpoints listed
            in the state file, deleting the files of older ones (None or 0,
            as the original's RunConfig: keep them all).

    Returns:
        str, the prefix written.

    Raises:
        errors.UserError: the disk is full (nothing partial was left).
    """
    prefix = os.fspath(prefix)
    directory = os.path.dirname(prefix) or "."
    file_io.make_dirs(directory)
    tensors = dict(arrays)
    if global_step is not None:
        if GLOBAL_STEP in tensors:
            raise ValueError("global_step given both in arrays and as argument")
        tensors[GLOBAL_STEP] = np.int64(global_step)
    try:
        tensor_bundle.write(prefix, tensors)
    except Exception as e:
        # The writer removed its temporary files; a remote (tf.io.gfile)
        # write reports a full disk as an OpError with the C library's text.
        if errors.disk_full(e) is not None:
            raise errors.UserError(
                f"No space left on the device of {directory} to write the "
                f"checkpoint {prefix} (nothing partial was left): free some "
                "space and re-run"
            ) from e
        raise
    _update_state(directory, prefix, keep_max)
    return prefix


def _series(name):
    """`model.ckpt` for `model.ckpt-1000`; "" for a name without a step."""
    stem, _, step = name.rpartition("-")
    return stem if step.isdigit() else ""


def _update_state(directory, prefix, keep_max):
    """Appends `prefix` to the state file, pruning beyond `keep_max`."""
    name = os.path.basename(prefix)
    state = read_state(directory)
    previous = list(state.all_model_checkpoint_paths) if state else []
    previous = [os.path.basename(p) for p in previous if p]
    all_paths = [p for p in previous if p != name] + [name]
    dropped = []
    # Only checkpoints of this series (`model.ckpt-N` beside the new
    # `model.ckpt-M`) are pruned: a release's bert_model.ckpt listed in the
    # same folder's state file is the user's model, not an old step.
    series = re.compile(re.escape(_series(name)) + r"-\d+")
    ours = [p for p in all_paths if series.fullmatch(p)]
    if keep_max and _series(name) and len(ours) > keep_max:
        dropped = ours[: len(ours) - keep_max]
        all_paths = [p for p in all_paths if p not in dropped]
    _write_state(directory, name, all_paths)
    for old in dropped:
        _delete_checkpoint_files(os.path.join(directory, old))
    if keep_max and _series(name) and previous:
        # Only with a state that listed checkpoints: without one (missing,
        # empty, damaged), those on disk are what a resume falls back to.
        _delete_older_leftovers(directory, _series(name), all_paths)


def _delete_older_leftovers(directory, series, kept):
    """Files of the series older than every checkpoint the state keeps,
    which it no longer lists: a kill while pruning left them (each as large
    as a checkpoint), and nothing else would remove them."""
    shape = re.compile(re.escape(series) + r"-(\d+)$")
    steps = [int(m.group(1)) for p in kept if (m := shape.match(p))]
    if not steps:
        return
    tail = rf"-(\d+)(\.index|\.meta|{_DATA_TAIL})"
    for path in file_io.files_named(os.path.join(directory, series), tail):
        step = re.search(
            r"-(\d+)\.[a-z]", os.path.basename(path)[len(series) :]
        )
        if step and int(step.group(1)) < min(steps):
            logging.info("Removing %s, left by an interrupted run", path)
            file_io.remove_if_exists(path)
