"""absl flags for the scripts, and the runner pattern's flag side
(modeling/tasks/common.py describes the pattern). The only module under
modeling/ that touches absl flags.

- define_settings_flags(Settings): a script's flags, from its Settings
  dataclass (modeling/options.py: each flag is declared once, as a field).
- settings_from_flags(Settings): the Settings from the parsed flags.
- run_script(main, required): every script's entry point and exit status.

The original's flags keep their names and defaults; the rest are new.
"""

import contextlib
import dataclasses
import fnmatch
import os
import sys
import traceback

from absl import app
from absl import flags
from absl import logging

from modeling import backend
from modeling import errors
from modeling import options
from modeling import signals
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
        _DEFINED.append(flag.name)


# The flags define_settings_flags declared in this process (run_script
# lists them under the running program for `--help`).
_DEFINED = []


def _list_flags_under_the_program():
    """`--help` lists the flags of sys.argv[0]: an installed command
    (bert-run-squad) or a script whose flags another script declared
    (run_classifier_with_tfhub's, run_classifier's) listed none."""
    program = sys.argv[0]
    listed = {f.name for f in FLAGS.flags_by_module_dict().get(program, [])}
    for name in dict.fromkeys(_DEFINED):
        if name in FLAGS and name not in listed:
            FLAGS.register_flag_by_module(program, FLAGS[name])


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
    settings = settings_cls(**values)
    check_outputs_are_not_inputs(settings)
    _warn_ignored(settings)
    return settings


def _warn_ignored(settings):
    """A warning for each flag given on the command line that this run
    does not read (`settings.ignored_flags()`: {flag: why}): accepted, as
    the original accepted it, but never silently."""
    ignored = getattr(settings, "ignored_flags", dict)()
    for name, why in sorted(ignored.items()):
        if name in FLAGS and FLAGS[name].present:
            logging.warning("--%s has no effect here: %s", name, why)


def _paths(value):
    """{key: path} of the files a file flag's value names (a
    comma-separated list of paths or globs): local ones resolved (links
    followed, globs expanded), remote ones as written."""
    out = {}
    for part in str(value).split(","):
        part = part.strip()
        if not part:
            continue
        if file_io.is_remote(part):
            out[part.rstrip("/")] = part  # A remote glob: `_names`.
            continue
        globbed = any(c in part for c in "*?[")
        for path in (file_io.glob_files(part) if globbed else []) or [part]:
            out[os.path.realpath(path)] = path
    return out


def _names(pattern, path):
    """Whether a remote input `pattern` (a glob: not expanded here, which
    would need the network) names the remote `path`."""
    if not (file_io.is_remote(pattern) and any(c in pattern for c in "*?[")):
        return False
    return fnmatch.fnmatchcase(path, pattern)


def check_outputs_are_not_inputs(settings):
    """Refuses an --output_file that is also a file the run reads (a field
    named `*_file` or `*_files`): writing it would replace that input (an
    extract_features.py or predict_lite.py run given its own --input_file).

    Raises:
      errors.UserError: naming both flags.
    """
    output = getattr(settings, "output_file", None)
    if not output:
        return
    outputs = _paths(output)
    for field in dataclasses.fields(settings):
        name = field.name
        value = getattr(settings, name, None)
        if (
            name == "output_file"
            or not name.endswith(("_file", "_files"))
            or not isinstance(value, str)
        ):
            continue
        for key, path in _paths(value).items():
            if key in outputs or any(_names(key, out) for out in outputs):
                raise errors.UserError(
                    f"--output_file={output} is also --{name}'s file {path}: "
                    "writing it would replace it; name another output file"
                )


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
    verbosity, --verbosity=1) for a user error (`errors.is_user_error`); any other
    exception keeps its traceback. In a process of a multi-process JAX run
    both end the process at once (`_exit`).
    """
    for name in required:
        flags.mark_flag_as_required(name)
    _list_flags_under_the_program()
    main_module = sys.modules.get("__main__")
    script = sys.modules.get(main.__module__)
    if main_module is not None and not getattr(main_module, "__doc__", None):
        # An installed command's wrapper: the script's usage for --help.
        main_module.__doc__ = getattr(script, "__doc__", None)
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
    logging.set_verbosity(logging.INFO)
    signals.install_sigterm_exit()
    app.run(_guarded(main))


@contextlib.contextmanager
def _removing_empty_run_dirs():
    """On any error, the output folders this run created and left empty go
    (file_io.make_run_dir)."""
    try:
        yield
    except BaseException:
        file_io.remove_empty_run_dirs()
        raise


def _guarded(main):
    def guarded(argv):
        try:
            # The run's folder locks (file_io.lock_run_dir) are held until
            # a failed run has removed the folders it created and left
            # empty: a second run cannot take one that is about to go.
            with file_io.locked_runs(), _removing_empty_run_dirs():
                if len(argv) > 1:
                    # absl leaves words after the flags to main: dropped,
                    # they changed a run silently ("--do_lower_case False"
                    # lower-cased; "--input_file=a.txt, b.txt" read a.txt).
                    raise errors.UserError(
                        f"unexpected argument {argv[1]!r}: give each flag "
                        "as --flag=value (booleans: --flag=false or "
                        "--noflag), lists without spaces (a.txt,b.txt)"
                    )
                if "backend" in FLAGS:
                    # Before main imports Keras.
                    backend.select(FLAGS.backend)
                return main(argv)
        except errors.Interrupted as e:
            logging.warning("%s", e)
            sys.exit(errors.EXIT_INTERRUPTED)
        except Exception as e:
            if signals.terminated():
                # The SIGTERM handler's exception, raised inside a C call
                # (TensorFlow tracing a function), surfaces as another
                # error (a SystemError): the run was still interrupted, and
                # the writers cleaned up on the way out.
                logging.warning(
                    "SIGTERM: stopped (%s); no partial output was left behind.",
                    _one_line(e),
                )
                sys.exit(errors.EXIT_INTERRUPTED)
            if errors.is_user_error(e, script_module=main.__module__):
                message = _one_line(e)
            elif errors.disk_full(e) is not None:
                # The writers removed their temporary files on the way out.
                message = errors.disk_full_message(
                    errors.disk_full(e), _output_flags()
                )
            elif backend.several_processes():
                traceback.print_exc()
                signals.exit_now(1)  # An uncaught exception's status.
            else:
                raise
            logging.debug("The error below came from:", exc_info=True)
            print(f"error: {message}", file=sys.stderr, flush=True)
            _exit(errors.EXIT_USER_ERROR)

    return guarded


def _exit(status):
    """sys.exit, or at once in a process of a multi-process JAX run that
    failed alone: at a normal exit JAX's distributed client waits for every
    process of the run (minutes, then an abort), while the others wait in
    their next step's exchange with this one, which ends when this process
    does (errors.LostProcessError there)."""
    if backend.several_processes():
        signals.exit_now(status)
    sys.exit(status)


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
