"""Training checkpoints: save every N steps, keep the newest K, resume.

Checkpoints are in the original's name-based format (weights under their
original names, `<name>/adam_m`, `<name>/adam_v`, `global_step`), written
atomically by `checkpoints.write_checkpoint` as `<output_dir>/model.ckpt-<step>`
with the `checkpoint` state file, so the original scripts can read them and we
resume from theirs.
"""

import json
import os
import re

import keras
import numpy as np
import tensorflow as tf
from absl import logging

from modeling import checkpoints
from modeling import config as config_lib
from modeling import errors
from modeling.data import file_io
from modeling.text import vocabulary as vocabulary_lib
from modeling.training import optimization

PREFIX = "model.ckpt"
_STEP_RE = re.compile(r"model\.ckpt-(\d+)$")


class NoUsableCheckpointError(errors.UserError):
    """Every checkpoint in the directory is damaged (the message says what
    to do: a one-line error, not a traceback)."""


class ConfigMismatchError(errors.UserError):
    """The checkpoints in output_dir are intact but belong to a model of
    another configuration (a re-run with another bert_config)."""


def model_variables(model):
    """{original name: variable} of the trainable weights that are saved.

    Only trainable weights: Keras's dropout seed-generator states are not part
    of the original's checkpoints.
    """
    return {checkpoints.variable_name(v): v for v in model.trainable_variables}


def find_checkpoints(directory):
    """Prefixes of the training checkpoints in `directory`, newest step
    first; [] for a folder without any (or none at all): such a folder binds
    no later run to its labels.json or long_inputs.json.

    The state file's list and any `model.ckpt-N.index` on disk (a crash
    between publishing a checkpoint and updating the state file leaves one
    unlisted) are both considered.
    """
    if not directory or not file_io.is_dir(directory):
        return []
    found = {}
    # An empty or damaged state file is ignored (logged): the checkpoints
    # on disk are still found.
    state = checkpoints.read_state(directory)
    listed = list(state.all_model_checkpoint_paths) if state else []
    indexes = file_io.files_named(
        os.path.join(directory, PREFIX), r"-\d+\.index"
    )
    on_disk = [p[: -len(".index")] for p in indexes]
    for path in listed + on_disk:
        name = os.path.basename(path)
        match = _STEP_RE.match(name)
        if match:
            found[name] = int(match.group(1))
    ordered = sorted(found, key=found.get, reverse=True)
    return [os.path.join(directory, name) for name in ordered]


class CheckpointManager:
    """Saves and restores (model, optimizer) in one directory.

    Args:
      directory: output_dir.
      model: the Keras model (its trainable variables are saved).
      optimizer: an optimization.AdamWeightDecayOptimizer (slots and
        global_step).
      keep_checkpoint_max: how many newest checkpoints to keep (None: all).
      is_chief: only the chief writes (multi-worker training).
      extra_variables: {name: variable} of training state beyond the
        optimizer's (the float16 loss scale): saved, and restored when a
        checkpoint has them (one without keeps their initial values).
    """

    def __init__(
        self,
        directory,
        model,
        optimizer,
        keep_checkpoint_max=5,
        is_chief=True,
        extra_variables=None,
    ):
        self.directory = directory
        self.model = model
        self.optimizer = optimizer
        self.keep_checkpoint_max = keep_checkpoint_max
        self.is_chief = is_chief
        self.extra_variables = dict(extra_variables or {})

    def variables(self):
        """{name: variable} of everything saved except global_step."""
        out = model_variables(self.model)
        slots = dict(self.optimizer.checkpoint_variables())
        slots.pop(checkpoints.GLOBAL_STEP)
        out.update(slots)
        out.update(self.extra_variables)
        return out

    def save(self):
        """Writes `model.ckpt-<global_step>`; returns its prefix (or None)."""
        step = int(self.optimizer.global_step.numpy())
        if not self.is_chief:
            return None
        prefix = os.path.join(self.directory, f"{PREFIX}-{step}")
        # The variables themselves, not .numpy() copies: SaveV2 reads their
        # buffers, where copies would add the weights and both Adam slots
        # to the peak memory (1.3 GB for BERT-base, twice over).
        checkpoints.write_checkpoint(
            prefix,
            self.variables(),
            global_step=step,
            keep_max=self.keep_checkpoint_max,
        )
        logging.info("Saved checkpoint %s", prefix)
        return prefix

    def candidates(self):
        """Prefixes of the checkpoints in the directory, newest step first
        (`find_checkpoints`)."""
        return find_checkpoints(self.directory)

    def restore_latest(self):
        """Restores the newest readable checkpoint, falling back on damage.

        Returns:
          The prefix restored, or None when the directory has no checkpoint.

        Raises:
          NoUsableCheckpointError: checkpoints exist but none is readable
            (training would otherwise silently restart from scratch).
        """
        candidates = self.candidates()
        for prefix in candidates:
            try:
                arrays = checkpoints.read_checkpoint(prefix)
            except (ValueError, FileNotFoundError) as e:
                logging.warning(
                    "Checkpoint %s is damaged or incomplete (%s); falling "
                    "back to an older one.",
                    prefix,
                    e,
                )
                continue
            self._check_model(
                {name: a.shape for name, a in arrays.items()}, prefix
            )
            try:
                self._assign(arrays, prefix)
            except (ValueError, FileNotFoundError) as e:
                logging.warning(
                    "Checkpoint %s is damaged or incomplete (%s); falling "
                    "back to an older one.",
                    prefix,
                    e,
                )
                continue
            logging.info(
                "Resumed from %s at global_step %d",
                prefix,
                int(self.optimizer.global_step.numpy()),
            )
            return prefix
        if candidates:
            raise NoUsableCheckpointError(
                f"All {len(candidates)} checkpoints in {self.directory} are "
                f"damaged ({', '.join(candidates)}); move them away to start "
                "over, or restore a backup."
            )
        return None

    def check_compatible(self):
        """Checks the newest readable checkpoint's variable names and shapes
        against the model, reading no weight and assigning nothing: what a
        run calls before it writes anything into output_dir.

        Raises:
          ConfigMismatchError: see `_check_model`.
        """
        for prefix in self.candidates():
            try:
                shapes = checkpoints.checkpoint_shapes(prefix)
            except (ValueError, FileNotFoundError):
                continue  # Damaged: restore_latest falls back past it.
            self._check_model(shapes, prefix)
            return

    def _check_model(self, shapes, prefix):
        """A readable checkpoint whose weights do not fit the model comes
        from another configuration: an error at once, not a fallback.

        Args:
          shapes: {name: shape} of the checkpoint's variables.
        """
        weights = model_variables(self.model)
        missing = sorted(set(weights) - set(shapes))
        mismatched = [
            (name, list(shapes[name]), list(var.shape))
            for name, var in weights.items()
            if name in shapes and tuple(shapes[name]) != tuple(var.shape)
        ]
        if not (missing or mismatched):
            return
        heads = [m for m in mismatched if checkpoints.is_output_layer(m[0])]
        if mismatched and len(heads) == len(mismatched):
            # Only the output layer differs: another number of labels.
            name, theirs, ours = heads[0]
            raise ConfigMismatchError(
                f"The checkpoints in {self.directory} were trained with "
                f"{theirs[0]} labels (newest: {prefix}; {name} has shape "
                f"{theirs}), this run's model has {ours[0]} ({ours}). Give "
                "the labels they were trained with, or another --output_dir "
                "to start over."
            )
        if not mismatched and not any(m.startswith("bert/") for m in missing):
            # The encoder fits; only this task's head is missing: another
            # task's run (fine-tuning into run_pretraining's output_dir,
            # from one of its checkpoints, is the common case).
            raise ConfigMismatchError(
                f"The checkpoints in {self.directory} are another task's "
                f"(newest: {prefix}): they have no {missing[0]}, a head of "
                "this run's model. Write this run to another --output_dir "
                "(its --init_checkpoint may be one of them)."
            )
        if mismatched:
            name, theirs, ours = mismatched[0]
            detail = (
                f"{name} has shape {theirs} there and {ours} in the model "
                f"of this bert_config ({len(mismatched)} variable(s) differ)"
            )
        else:
            detail = (
                f"they lack {missing[0]} ({len(missing)} variable(s) of this "
                "model missing)"
            )
        raise ConfigMismatchError(
            f"The checkpoints in {self.directory} were made with another "
            f"bert_config than this run's (newest: {prefix}): {detail}. "
            "Use the bert_config_file they were trained with, or another "
            "--output_dir to start over."
        )

    def _assign(self, arrays, prefix):
        """Checks names and shapes first, then assigns everything."""
        weights = model_variables(self.model)
        missing = sorted(set(weights) - set(arrays))
        if missing:
            raise ValueError(f"{prefix} lacks model variables {missing[:5]}")
        pairs = []
        for name, var in self.variables().items():
            if name not in arrays and name in self.extra_variables:
                continue  # A checkpoint of another precision, or older.
            if name not in arrays:
                # Slots absent (a released checkpoint): they start at zero,
                # as in the original.
                pairs.append((var, np.zeros(var.shape, np.float32)))
                continue
            value = arrays[name]
            if tuple(value.shape) != tuple(var.shape):
                raise ValueError(
                    f"{prefix}: {name} has shape {list(value.shape)}, the "
                    f"model {list(var.shape)}"
                )
            pairs.append((var, value))
        for var, value in pairs:
            var.assign(
                np.asarray(value).astype(tf.as_dtype(var.dtype).as_numpy_dtype)
            )
        step = int(arrays.get(checkpoints.GLOBAL_STEP, 0))
        self.optimizer.global_step.assign(step)


def _check_release_folder(directory, model, step, config_text, vocabulary):
    """What `save_release_folder` refuses (see its Raises): nothing in the
    folder is replaced, and its series gets only a newer checkpoint of the
    same model (a later save of the same training)."""
    if not file_io.is_dir(directory):
        return
    where = f"save_checkpoint({directory!r})"
    released = os.path.join(directory, checkpoints.DEFAULT_PREFIX)
    if file_io.exists(released + ".index"):
        raise FileExistsError(
            f"{where}: the folder holds a released checkpoint ({released}); "
            "a model.ckpt-N beside it would be what --init_checkpoint of the "
            "folder reads. Save to another folder."
        )
    config_file = os.path.join(directory, checkpoints.CONFIG_FILE)
    if file_io.exists(config_file):
        theirs = config_lib.BertConfig.from_json_file(config_file).to_dict()
        if theirs != json.loads(config_text):
            raise FileExistsError(
                f"{where}: {config_file} is another model's configuration. "
                "Save to another folder."
            )
    vocab_file = os.path.join(directory, checkpoints.VOCAB_FILE)
    if file_io.exists(vocab_file):
        if vocabulary_lib.read_vocab_lines(vocab_file) != list(vocabulary):
            raise FileExistsError(
                f"{where}: {vocab_file} is another vocabulary. Save to "
                "another folder."
            )
    found = find_checkpoints(directory)
    if not found:
        return
    CheckpointManager(directory, model, None).check_compatible()
    newest = found[0]
    if int(_STEP_RE.match(os.path.basename(newest)).group(1)) >= step:
        raise FileExistsError(
            f"{where}: the folder holds {newest}, of step {step} or later: "
            f"a save of this step already, or another training's (this "
            f"model is at step {step}; its older checkpoints would be "
            "pruned). Save to another folder."
        )


def save_release_folder(directory, model, optimizer, vocabulary, keep_max):
    """Writes `directory/model.ckpt-<step>` in the original's format, with
    bert_config.json and vocab.txt beside it: a folder run_classifier.py
    reads as --output_dir or --init_checkpoint (Keras's save_checkpoint).

    The weights under their original names and, with the original's
    optimizer (built), `<name>/adam_m`, `<name>/adam_v` and `global_step`,
    as the training loop writes them; with another Keras optimizer the
    weights and the step only.

    Args:
      model: a task model with a `config` (models.BertClassifier).
      optimizer: the Keras optimizer (a LossScaleOptimizer's inner one is
        used), or None.
      vocabulary: the tokens in id order.

    Returns:
      str, the checkpoint prefix.

    Raises:
      FileExistsError: the folder holds what this save would replace or
        mix with: a released checkpoint (bert_model.ckpt), a bert_config.json
        or vocab.txt of other content, a checkpoint of this step or a newer
        one (another run's series: keep_max would prune it).
      ConfigMismatchError: its checkpoints are of another model.
    """
    if isinstance(optimizer, keras.optimizers.LossScaleOptimizer):
        optimizer = optimizer.inner_optimizer
    ours = isinstance(
        optimizer, optimization.AdamWeightDecayOptimizer
    ) and bool(optimizer.built)
    if ours:
        step = int(optimizer.global_step.numpy())
    else:
        step = int(optimizer.iterations.numpy()) if optimizer else 0
    config_text = model.config.to_json_string()
    vocab_text = "".join(f"{token}\n" for token in vocabulary)
    _check_release_folder(directory, model, step, config_text, vocabulary)
    tf.io.gfile.makedirs(directory)
    for name, text in (
        (checkpoints.CONFIG_FILE, config_text),
        (checkpoints.VOCAB_FILE, vocab_text),
    ):
        if not file_io.exists(os.path.join(directory, name)):
            file_io.write_text(os.path.join(directory, name), text)
    if ours:
        return CheckpointManager(directory, model, optimizer, keep_max).save()
    return checkpoints.write_checkpoint(
        os.path.join(directory, f"{PREFIX}-{step}"),
        model_variables(model),
        global_step=step,
        keep_max=keep_max,
    )
