"""Which Keras backend runs the model: TensorFlow (the default) or JAX.

Keras reads its backend once, when it is first imported, from the
KERAS_BACKEND environment variable. The scripts import Keras only after
their flags are parsed (modeling/flags.py), so `--backend` is applied here
before that: `select(FLAGS.backend)`.

On the JAX backend the model, its gradients and the update run in JAX
(training/jax_steps.py) over every local accelerator; TensorFlow, where it
is installed, still reads the records on the host (tf.data), and must not
take the accelerators for itself: `select` hides them from it.

Past one machine, on JAX: one process per host, each started with the same
command and the environment Keras reads (`keras.distribution.initialize`):
KERAS_DISTRIBUTION_JOB_ADDRESSES (the coordinator's host:port first),
KERAS_DISTRIBUTION_NUM_PROCESSES and KERAS_DISTRIBUTION_PROCESS_ID. `select`
joins them before the first computation; the training step then splits
each batch over every device of every process (training/jax_steps.py).

This module imports neither Keras nor TensorFlow.
"""

import glob
import importlib.metadata
import importlib.util
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
    if name == "jax" and importlib.util.find_spec("jax") is None:
        raise errors.UserError(
            '--backend=jax: jax is not installed; pip install "jax[cuda12]" '
            "(or jax[cuda13], jax[tpu], jax for CPUs) beside this package"
        )
    os.environ["KERAS_BACKEND"] = name
    if name == "jax":
        _keep_tensorflow_off_accelerators()
        join_processes()
    return name


# What keras.distribution.initialize reads; any of them makes a process one
# of several.
PROCESS_VARIABLES = (
    "KERAS_DISTRIBUTION_JOB_ADDRESSES",
    "KERAS_DISTRIBUTION_NUM_PROCESSES",
    "KERAS_DISTRIBUTION_PROCESS_ID",
)


def join_processes():
    """Joins this process to the others of a multi-process JAX run when the
    environment names them (PROCESS_VARIABLES), once; a no-op otherwise.
    Returns whether this process is one of several.

    Raises:
      errors.UserError: a variable that is not a number where one is due.
    """
    given = [v for v in PROCESS_VARIABLES if os.environ.get(v)]
    if not given:
        return False
    if len(given) < len(PROCESS_VARIABLES):
        missing = [v for v in PROCESS_VARIABLES if v not in given]
        raise errors.UserError(
            f"{', '.join(given)} set without {', '.join(missing)}: a "
            f"process of several needs all of {', '.join(PROCESS_VARIABLES)}"
        )
    for name in PROCESS_VARIABLES[1:]:
        value = os.environ.get(name)
        if value and not value.isdigit():
            raise errors.UserError(f"{name}={value!r}: expected a number")
    import jax

    if not jax.distributed.is_initialized():
        import keras
        from absl import logging

        logging.info(
            "Joining %s processes at %s as process %s (JAX waits up to 5 "
            "minutes for the others)",
            os.environ[PROCESS_VARIABLES[1]],
            os.environ[PROCESS_VARIABLES[0]],
            os.environ[PROCESS_VARIABLES[2]],
        )
        keras.distribution.initialize()
    return True


def several_processes():
    """Whether this process runs with others (join_processes joined them)."""
    jax = sys.modules.get("jax")
    return jax is not None and jax.distributed.is_initialized()


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


# Where a TPU VM's chips show up: PCI devices of Google's vendor id with one
# of the TPU device ids (v2/v3, v4, v5p, v5e, v6e, v7). Google's virtual NIC
# shares the vendor id, so the device id has to be checked too.
_PCI_DEVICES_GLOB = "/sys/bus/pci/devices/*"
_GOOGLE_PCI_VENDOR = "0x1ae0"
_TPU_PCI_DEVICES = frozenset(
    ("0x0027", "0x005e", "0x0062", "0x0063", "0x006f", "0x0076")
)


def find_tpu(pci_devices_glob=None):
    """The TPU this machine reaches without being told a name, or None.

    In this order: $TPU_NAME (a Cloud TPU's name or address, as Cloud
    TPU tooling sets it); $COLAB_TPU_ADDR (Colab's former remote TPU
    runtime, host:port); "local" when TPU chips are attached to this machine
    (a TPU VM: Colab's and Kaggle's TPU runtimes, Cloud TPU VMs).

    Args:
      pci_devices_glob: where PCI devices are listed (default: /sys; tests
        give a fake).

    Returns:
      str for TPUClusterResolver(tpu=...), or None.
    """
    if os.environ.get("TPU_NAME"):
        return os.environ["TPU_NAME"]
    if os.environ.get("COLAB_TPU_ADDR"):
        return "grpc://" + os.environ["COLAB_TPU_ADDR"]
    return "local" if has_tpu_chips(pci_devices_glob) else None


def has_tpu_chips(pci_devices_glob=None):
    """Whether TPU chips are attached to this machine (a TPU VM), whatever
    $TPU_NAME says (find_tpu's args)."""
    for device in glob.glob(pci_devices_glob or _PCI_DEVICES_GLOB):
        try:
            with open(os.path.join(device, "vendor")) as f:
                vendor = f.read().strip()
            with open(os.path.join(device, "device")) as f:
                device_id = f.read().strip()
        except OSError:
            continue
        if vendor == _GOOGLE_PCI_VENDOR and device_id in _TPU_PCI_DEVICES:
            return True
    return False


def for_this_machine():
    """The backend a notebook should use here: KERAS_BACKEND when set;
    "jax" on a machine with TPU chips whose TensorFlow has no TPU build
    (Colab's and Kaggle's TPU runtimes ship JAX; TensorFlow's TPU path needs
    `tensorflow-tpu`); else "tensorflow"."""
    if os.environ.get("KERAS_BACKEND"):
        return os.environ["KERAS_BACKEND"]
    # The chips, not find_tpu: a TPU VM may set TPU_NAME to its own name.
    if has_tpu_chips() and not _installed("tensorflow-tpu"):
        return "jax"
    return DEFAULT


def _installed(distribution):
    try:
        importlib.metadata.version(distribution)
    except importlib.metadata.PackageNotFoundError:
        return False
    return True
