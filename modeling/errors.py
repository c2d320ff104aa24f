"""The two exceptions the scripts turn into exit statuses (modeling/flags.py
run_script; the statuses are in tasks/common.py).

Here, outside tasks/, because the library raises them (the training loop on
SIGTERM, data generation on bad input) and the core never imports tasks/.
Also the one way library code keeps SIGTERM out of a step that must not be
cut in two (`sigterm_deferred`), and the stand-ins for the original's
Estimator-only names (`estimator_only`). Imports only the standard library.
"""

import contextlib
import errno
import os
import re
import signal
import sys

# The exit status after SIGTERM with the state saved: 128 + 15, as if the
# signal had killed the process (what schedulers expect from a preempted
# job). tasks/common.py's EXIT_INTERRUPTED; here because the training loop
# also exits with it directly when its input is stuck.
EXIT_INTERRUPTED = 143
# A mistake in the flags or inputs: one `error:` line on stderr (the
# scripts' runner, modeling/flags.py).
EXIT_USER_ERROR = 1


class Interrupted(Exception):
    """The run stopped early on request (SIGTERM) after saving its state;
    re-running the same command resumes. The Trainer's TrainingInterrupted
    is one."""


class Terminated(Interrupted):
    """SIGTERM outside the training loop (modeling/flags.py run_script
    raises it in the main thread): every `with` block on the way out
    removes its temporary files, folders and worker processes; nothing
    partial is published. Re-running the command starts that step over."""


# SIGTERM deferral: the scripts' handler (modeling/flags.py) only marks a
# signal pending while `depth` > 0; the outermost block delivers it again.
_DEFERRAL = {"depth": 0, "pending": False}


@contextlib.contextmanager
def sigterm_deferred():
    """Holds SIGTERM until the block ends, then delivers it (Terminated is
    raised as the block exits). For steps that must not be cut in two, such
    as creating a temporary folder and registering its removal, or starting
    worker processes and the context that stops them."""
    _DEFERRAL["depth"] += 1
    try:
        yield
    finally:
        _DEFERRAL["depth"] -= 1
        if not _DEFERRAL["depth"] and _DEFERRAL["pending"]:
            _DEFERRAL["pending"] = False
            signal.raise_signal(signal.SIGTERM)


class LostProcessError(RuntimeError):
    """A step of a multi-process run failed in its exchange with the other
    processes: one of them has stopped (a crashed or killed host). Nothing
    was saved after the last checkpoint; every process exits at once
    (modeling/flags.py run_script) rather than wait for the lost one."""


class UserError(ValueError):
    """A mistake the user can fix (a flag, an input file); its message says
    what and where. Any ValueError raised by this repository's own code is
    treated the same way by the scripts; this class marks one raised from
    elsewhere (or deliberately) as such."""


# What a full disk (or an exhausted quota) raises: OSError ENOSPC / EDQUOT
# from Python's own writes; TensorFlow's writers (tf.io.gfile, TFRecord,
# SavedModel) raise a ResourceExhaustedError or another OpError whose
# message carries the C library's text.
_DISK_FULL_ERRNOS = (errno.ENOSPC, errno.EDQUOT)
_DISK_FULL_TEXTS = ("No space left on device", "Disk quota exceeded")


def disk_full(error):
    """The exception in `error`'s chain (itself, its causes and contexts)
    that says the disk is full, else None."""
    seen = set()
    while error is not None and id(error) not in seen:
        seen.add(id(error))
        if isinstance(error, OSError) and error.errno in _DISK_FULL_ERRNOS:
            return error
        if any(text in str(error) for text in _DISK_FULL_TEXTS):
            return error
        error = error.__cause__ or error.__context__
    return None


def disk_full_message(error, outputs=()):
    """One line for a full disk: the path the failed write named (an
    OSError's filename), else the run's `outputs` ("--flag=path" strings)."""
    path = getattr(error, "filename", None)
    where = f" writing {path}" if path else ""
    if not where and outputs:
        where = f" writing {', '.join(outputs)}"
    return (
        f"No space left on the device{where}: free some space (or write "
        "elsewhere) and re-run; nothing partial was left"
    )


class EstimatorOnlyError(NotImplementedError):
    """A name of the original release that only made sense with its TF1
    Estimator (model_fn / input_fn builders, graph-mode helpers); the
    message names what replaces it here."""


def estimator_only(name, replacement):
    """A stand-in for the original's `name`, importable as before, that
    raises EstimatorOnlyError naming `replacement` when called (code
    written against the original fails at the call, with the way forward,
    not at the import)."""

    def stand_in(*args, **kwargs):
        del args, kwargs
        raise EstimatorOnlyError(
            f"{name} built the original's TF1 Estimator graph, which this "
            f"TensorFlow 2 / Keras 3 version does not have. Use instead: "
            f"{replacement}"
        )

    stand_in.__name__ = stand_in.__qualname__ = name
    stand_in.__doc__ = f"Not provided (TF1 Estimator only): use {replacement}"
    return stand_in


# The user-error rule. An exception is a mistake in the flags or inputs,
# reported as one `error:` line without a traceback, when it is:
# - a UserError, wherever it was raised;
# - a ValueError (or subclass) raised by this repository's own code: the
#   innermost frame of its traceback is in a modeling.* module or in the
#   script. The library raises ValueError only to describe bad settings or
#   data (unknown task, sequence too long, bad line N of a file, no file
#   matching a pattern, no checkpoint to evaluate, ...), with a message that
#   says what to change. A ValueError raised inside TensorFlow, Keras or
#   NumPy (a shape or dtype mismatch) is a bug and keeps its traceback. One
#   raised in a worker process (multiprocessing re-raises it in the parent,
#   the worker's traceback as its cause) is judged by the worker's frames;
# - a missing or unreadable path, wherever it was raised: FileNotFoundError,
#   IsADirectoryError, NotADirectoryError, PermissionError, and their
#   TensorFlow counterparts tf.errors.NotFoundError / PermissionDeniedError
#   (tf.io.gfile); their message names the path.
# Everything else (RuntimeError such as a non-finite loss, KeyError,
# TypeError, other tf.errors) keeps its traceback.
_PATH_ERRORS = (
    FileNotFoundError,
    IsADirectoryError,
    NotADirectoryError,
    PermissionError,
)
_TF_PATH_ERRORS = ("NotFoundError", "PermissionDeniedError")
# This package's folder: a worker's frame in it is the library's.
_PACKAGE_DIR = os.path.dirname(os.path.abspath(__file__)) + os.sep


def is_user_error(error, script_module="__main__"):
    """Whether `error` is a user mistake (the rule above).

    Args:
      error: the exception.
      script_module: the running script's module name (its own ValueErrors
        count as the library's).
    """
    if isinstance(error, (UserError, *_PATH_ERRORS)):
        return True
    tf = sys.modules.get("tensorflow")  # Loaded only if the run used it.
    if tf is not None and isinstance(
        error, tuple(getattr(tf.errors, n) for n in _TF_PATH_ERRORS)
    ):
        return True
    if (
        tf is not None
        and isinstance(error, tf.errors.FailedPreconditionError)
        and "not a directory" in str(error).lower()
    ):
        return True  # tf.io.gfile's NotADirectoryError, naming the path.
    if not isinstance(error, ValueError):
        return False
    cause = error.__cause__
    if type(cause).__name__ == "RemoteTraceback":
        frames = re.findall(r'File "([^"]+)"', str(cause))
        return bool(frames) and os.path.abspath(frames[-1]).startswith(
            _PACKAGE_DIR
        )
    tb = error.__traceback__
    if tb is None:
        return False
    while tb.tb_next is not None:
        tb = tb.tb_next
    module = tb.tb_frame.f_globals.get("__name__", "")
    return module.startswith("modeling.") or module in (
        script_module,
        "__main__",
    )
