"""absl flags for the scripts, and the runner pattern's flag side
(modeling/tasks/common.py describes the pattern). The only module under
modeling/ that touches absl flags.

- define_settings_flags(Settings): a script's flags, from its Settings
  dataclass (modeling/options.py: each flag is declared once, as a field).
- settings_from_flags(Settings): the Settings from the parsed flags.
- run_script(main, required): every script's entry point and exit status.

The original's flags keep their names and defaults; the rest are new.
"""

import dataclasses
import os
import signal
import socket
import sys
import threading
import time

from absl import app
from absl import flags
from absl import logging

from modeling import backend
from modeling import errors
from modeling import options
from modeling.data import file_io

FLAGS = flags.FLAGS

# === Flag definitions ===

# What runs the model, chosen before any model module loads (run_script):
# the process's, not a task's, so it is no Settings field. Every script that
# trains (a Settings with a run_config) has it.
_BACKEND_HELP = (
    "What runs the model: tensorflow (the default) or jax (Keras 3's "
    "JAX backend: GPUs and TPUs through jax[cuda12/13] or jax[tpu], "
    "each batch split over every local device). Unset: the "
    "KERAS_BACKEND environment variable, else tensorflow. The same "
    "records, flags and checkpoints either way."
)


def define_settings_flags(settings_cls):
    """Defines a script's flags from its Settings dataclass: one per option
    field (modeling/options.py), the training flags of its run_config, and
    --backend with those. Call it from the script's top level: the flags
    are registered under the script, so that its `--help` lists them all.

    A flag already defined is kept (run_classifier_with_tfhub adds its own
    to run_classifier's, which it imports).
    """
    caller = sys._getframe(1).f_globals.get("__name__", "")
    module = sys.argv[0] if caller == "__main__" else caller
    declared = options.flags_of(settings_cls)
    if _trains(settings_cls):
        declared.append(
            options.Flag(
                "backend",
                "backend",
                "enum",
                None,
                _BACKEND_HELP,
                backend.BACKENDS,
            )
        )
    for flag in declared:
        if flag.name not in FLAGS:
            flags.DEFINE_flag(_absl_flag(flag), FLAGS, module_name=module)


def _trains(settings_cls):
    return any(
        "options" in field.metadata
        for field in dataclasses.fields(settings_cls)
    )


def _absl_flag(flag):
    if flag.kind == "bool":
        return flags.BooleanFlag(flag.name, flag.default, flag.help)
    if flag.kind == "enum":
        return flags.EnumFlag(
            flag.name, flag.default, flag.help, list(flag.choices)
        )
    parser = {
        "int": flags.IntegerParser,
        "float": flags.FloatParser,
        "string": flags.ArgumentParser,
    }[flag.kind]()
    return flags.Flag(
        parser, flags.ArgumentSerializer(), flag.name, flag.default, flag.help
    )


# === Settings and entry point (the runner pattern) ===


def settings_from_flags(settings_cls, **overrides):
    """A task's Settings dataclass from the parsed flags.

    Each field takes, in this order: its value in `overrides`; for a
    `nested` field (run_config), the dataclass built the same way from the
    flags when the script defines them (its output_dir: the Settings'); the
    flag of the field's name; else the field's default.

    Raises:
      TypeError: an override that is not a field, or a field without a
        default whose flag the script does not define.
    """
    fields = [f for f in dataclasses.fields(settings_cls) if f.init]
    unknown = set(overrides) - {f.name for f in fields}
    if unknown:
        raise TypeError(
            f"{settings_cls.__name__} has no field {sorted(unknown)}"
        )
    values = _values(fields)
    values.update(overrides)
    for field in fields:
        nested = field.metadata.get("options")
        if field.name in overrides or nested is None:
            continue
        inner = _values(dataclasses.fields(nested))
        if inner:
            inner["output_dir"] = values.get("output_dir")
            values[field.name] = nested(**inner)
    return settings_cls(**values)


def _values(fields):
    """{field name: its flag's value} for the fields whose flag (the
    option's name, else the field's) is defined."""
    values = {}
    for field in fields:
        if field.init:
            name = field.metadata.get("flag") or field.name
            if name in FLAGS:
                values[field.name] = FLAGS[name].value
    return values


def run_script(main, required=()):
    """Every script's entry point (`run()` and `__main__`): marks the
    required flags, parses them (absl app.run) and calls main, with INFO
    logs and TensorFlow's C++ logs quiet unless set otherwise.

    Exit statuses (modeling/errors.py): 0 when main returns;
    errors.EXIT_INTERRUPTED after errors.Interrupted (SIGTERM, state saved:
    a warning says how to resume); errors.EXIT_USER_ERROR with one line
    `error: <message>` on stderr and no traceback (it is logged at debug
    verbosity, --verbosity=1) for a user error (`is_user_error`); any other
    exception keeps its traceback.
    """
    for name in required:
        flags.mark_flag_as_required(name)
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
    logging.set_verbosity(logging.INFO)
    install_sigterm_exit()
    app.run(_guarded(main))


# === SIGTERM outside the training loop ===
#
# The training loop handles SIGTERM itself while it runs (a checkpoint, then
# errors.Interrupted; modeling/training/steps.py). Everywhere else (data
# generation, feature conversion, evaluation, extraction) a script's SIGTERM
# raises errors.Terminated in the main thread, so the atomic writers and
# temporary folders clean up on the way out, and the script exits with
# EXIT_INTERRUPTED. A Python handler runs only between bytecodes of the main
# thread; should the main thread be blocked in a long call (a stuck read),
# a watcher thread woken by the signal exits anyway after
# SIGTERM_GRACE_SECS.
SIGTERM_GRACE_SECS = 10.0
_TERMINATION = {
    "pid": None,
    "received": False,
    "forking": 0,
    "fork_pending": False,
}


def install_sigterm_exit(grace_secs=None):
    """Installs the handler above (main thread; once per process)."""
    if (
        _TERMINATION["pid"] == os.getpid()
        or threading.current_thread() is not threading.main_thread()
    ):
        return
    _TERMINATION["pid"] = os.getpid()
    grace = SIGTERM_GRACE_SECS if grace_secs is None else grace_secs
    reader, writer = socket.socketpair()
    writer.setblocking(False)
    # Kept open for the life of the process (a collected socket closes).
    _TERMINATION["sockets"] = (reader, writer)
    signal.set_wakeup_fd(writer.fileno(), warn_on_full_buffer=False)
    signal.signal(signal.SIGTERM, _raise_terminated)
    threading.Thread(
        target=_sigterm_watchdog, args=(reader, grace), daemon=True
    ).start()
    # Forked workers (data generation) must not share the wakeup socket nor
    # raise in their own loops: a SIGTERM ends them plainly. In the parent,
    # an exception raised while os.fork runs its hooks is printed and
    # ignored, so a SIGTERM arriving then waits until the fork is done.
    os.register_at_fork(
        before=_before_fork,
        after_in_parent=_after_fork_in_parent,
        after_in_child=_reset_sigterm_in_child,
    )


def _before_fork():
    _TERMINATION["forking"] += 1


def _after_fork_in_parent():
    if _TERMINATION["forking"] == 1 and _TERMINATION["fork_pending"]:
        _TERMINATION["fork_pending"] = False
        # Delivered again from another thread once this hook has returned
        # (the handler then runs in the main thread's own code).
        threading.Timer(0.05, signal.raise_signal, (signal.SIGTERM,)).start()
    _TERMINATION["forking"] -= 1


def _reset_sigterm_in_child():
    try:
        signal.signal(signal.SIGTERM, signal.SIG_DFL)
        signal.set_wakeup_fd(-1)
    except ValueError:  # Not the main thread: nothing was installed here.
        pass


def _raise_terminated(signum, frame):
    del signum, frame
    if _TERMINATION["received"]:
        return  # Already on the way out.
    if _TERMINATION["forking"]:
        _TERMINATION["fork_pending"] = True
        return
    if errors._DEFERRAL["depth"]:
        errors._DEFERRAL["pending"] = True
        return
    _TERMINATION["received"] = True
    raise errors.Terminated(
        "SIGTERM: stopped; no partial output was left behind. Re-run the "
        "same command to start again (training resumes from its newest "
        "checkpoint)."
    )


def _sigterm_watchdog(reader, grace):
    while True:
        data = reader.recv(64)
        if not data:
            return
        if signal.SIGTERM in data:
            break
    time.sleep(grace)
    logging.warning(
        "SIGTERM: still running %.0f s later (blocked in a read or a "
        "computation); exiting now.",
        grace,
    )
    logging.flush()
    # os._exit skips the atomic writers' clean-up: their temporary files
    # go first (nothing was published from them).
    file_io.remove_open_temporaries()
    os._exit(errors.EXIT_INTERRUPTED)


def _guarded(main):
    def guarded(argv):
        try:
            try:
                if "backend" in FLAGS:
                    # Before main imports Keras.
                    backend.select(FLAGS.backend)
                return main(argv)
            except BaseException:
                # An output folder this run created and left empty goes.
                file_io.remove_empty_run_dirs()
                raise
        except errors.Interrupted as e:
            logging.warning("%s", e)
            sys.exit(errors.EXIT_INTERRUPTED)
        except Exception as e:
            if _TERMINATION["received"]:
                # The SIGTERM handler's exception, raised inside a C call
                # (TensorFlow tracing a function), surfaces as another
                # error (a SystemError): the run was still interrupted, and
                # the writers cleaned up on the way out.
                logging.warning(
                    "SIGTERM: stopped (%s); no partial output was left behind.",
                    _one_line(e),
                )
                sys.exit(errors.EXIT_INTERRUPTED)
            if is_user_error(e, script_module=main.__module__):
                message = _one_line(e)
            elif errors.disk_full(e) is not None:
                # The writers removed their temporary files on the way out.
                message = errors.disk_full_message(
                    errors.disk_full(e), _output_flags()
                )
            else:
                raise
            logging.debug("The error below came from:", exc_info=True)
            print(f"error: {message}", file=sys.stderr, flush=True)
            sys.exit(errors.EXIT_USER_ERROR)

    return guarded


# The user-error rule. An exception is a mistake in the flags or inputs,
# reported as one `error:` line without a traceback, when it is:
# - a errors.UserError, wherever it was raised;
# - a ValueError (or subclass) raised by this repository's own code: the
#   innermost frame of its traceback is in a modeling.* module or in the
#   script. The library raises ValueError only to describe bad settings or
#   data (unknown task, sequence too long, bad line N of a file, no file
#   matching a pattern, no checkpoint to evaluate, ...), with a message that
#   says what to change. A ValueError raised inside TensorFlow, Keras or
#   NumPy (a shape or dtype mismatch) is a bug and keeps its traceback;
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


def is_user_error(error, script_module="__main__"):
    """Whether `error` is a user mistake (the rule above).

    Args:
      error: the exception.
      script_module: the running script's module name (its own ValueErrors
        count as the library's).
    """
    if isinstance(error, (errors.UserError, *_PATH_ERRORS)):
        return True
    tf = sys.modules.get("tensorflow")  # Loaded only if the run used it.
    if tf is not None and isinstance(
        error, tuple(getattr(tf.errors, n) for n in _TF_PATH_ERRORS)
    ):
        return True
    if not isinstance(error, ValueError):
        return False
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


# The flags that name what a script writes, for the full-disk message.
_OUTPUT_FLAGS = (
    "output_file",
    "output_dir",
    "export_dir",
    "export_path",
    "glue_submission_dir",
)


def _output_flags():
    """ "--flag=value" of the output flags this run set."""
    out = []
    for name in _OUTPUT_FLAGS:
        if name in flags.FLAGS and flags.FLAGS[name].present:
            out.append(f"--{name}={flags.FLAGS[name].value}")
    return out


def _one_line(error):
    lines = [line.strip() for line in str(error).splitlines()]
    return " ".join(line for line in lines if line) or type(error).__name__
