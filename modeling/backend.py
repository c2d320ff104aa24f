"""Which Keras backend runs the model: TensorFlow (the default) or JAX.

Keras reads its backend once, when it is first imported, from the
KERAS_BACKEND environment variable. The scripts import Keras only after
their flags are parsed (modeling/flags.py), so `--backend` is applied here
before that: `select(FLAGS.backend)`.

On the JAX backend the model, its gradients and the update run in JAX
(training/jax_steps.py) over every local accelerator; TensorFlow, where it
is installed, still reads the records on the host (tf.data), and must not
take the accelerators for itself: `select` hides them from it.

This module imports neither Keras nor TensorFlow.
"""

import os
import sys

from modeling import errors

BACKENDS = ("tensorflow", "jax")
DEFAULT = "tensorflow"


def current():
    """The backend Keras runs (or will run when imported)."""
    if "keras" in sys.modules:
        import keras

        return keras.backend.backend()
    return os.environ.get("KERAS_BACKEND") or DEFAULT


def select(name=None):
    """Makes `name` Keras's backend for this process.

    Args:
      name: one of BACKENDS, or None: KERAS_BACKEND if set, else TensorFlow.

    Returns:
      The backend selected.

    Raises:
      errors.UserError: an unknown name; or Keras already runs another
        backend in this process (it cannot switch once imported).
    """
    if name is None:
        name = os.environ.get("KERAS_BACKEND") or DEFAULT
    if name not in BACKENDS:
        raise errors.UserError(
            f"--backend={name}: expected one of {', '.join(BACKENDS)} "
            "(KERAS_BACKEND likewise)"
        )
    if "keras" in sys.modules and current() != name:
        raise errors.UserError(
            f"--backend={name}: Keras already runs on {current()} in this "
            "process and cannot switch; start a new process (or set "
            f"KERAS_BACKEND={name} before importing Keras)"
        )
    os.environ["KERAS_BACKEND"] = name
    if name == "jax":
        _keep_tensorflow_off_accelerators()
    return name


def _keep_tensorflow_off_accelerators():
    """TensorFlow (reading records) sees the CPU only: the GPUs and TPUs
    belong to JAX. A no-op without TensorFlow, or once TensorFlow has
    initialized its devices (then it took them already: nothing to undo)."""
    try:
        import tensorflow as tf
    except ImportError:
        return
    for kind in ("GPU", "TPU"):
        try:
            tf.config.set_visible_devices([], kind)
        except (RuntimeError, ValueError):
            pass
