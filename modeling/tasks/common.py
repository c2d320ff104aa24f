"""Pieces every task runner shares.

Nothing here imports TensorFlow at import time: the scripts' Settings
(modeling/tasks/settings/) import this module before any model is needed.
"""

# === The runner pattern ===
#
# A runner is a script (its flags + a short main()) over a task module
# (modeling/tasks/X.py, `run(settings)`) and its Settings dataclass
# (modeling/tasks/settings/X.py, TensorFlow-free), which declares each flag
# once, as a field (modeling/options.py):
#
#     # modeling/tasks/settings/X.py
#     @dataclasses.dataclass(kw_only=True)
#     class Settings(common.CommonSettings):
#         input_file: str = option(help="...")     # the flag --input_file
#         ...
#
#     # modeling/tasks/X.py
#     Settings = X_settings.Settings
#
#     def run(settings):
#         ...check the settings (ValueError with a message for the user)...
#         strategy = common.set_up(settings)
#         ...build, train, evaluate, write...
#
#     # X.py (the script)
#     from modeling.tasks.settings import X as settings
#     shared_flags.define_settings_flags(settings.Settings)
#
#     def main(_):
#         from modeling.tasks import X    # TensorFlow only after parsing
#         X.run(shared_flags.settings_from_flags(X.Settings))
#
#     def run():
#         shared_flags.run_script(main, required=(...))
#
#     if __name__ == "__main__":
#         run()
#
# Exit statuses (shared_flags.run_script): 0 done; EXIT_USER_ERROR with one
# `error: <message>` line on stderr for a mistake in the flags or inputs;
# EXIT_INTERRUPTED after SIGTERM once the state is saved (re-run the same
# command to resume); anything else keeps Python's traceback (status 1).

import dataclasses

from modeling import backend
from modeling import errors
from modeling.data import file_io
from modeling.export import folders
from modeling.training import schedule

# The evaluation summary a task writes to its output folder.
EVAL_RESULTS_FILE = "eval_results.txt"
# Input shuffle seed when --random_seed is unset (resuming needs a fixed one).
DEFAULT_DATA_SEED = 12345
# run_pretraining --input_format: the generator's records, or its raw text.
PRETRAINING_INPUT_FORMATS = ("tfrecord", "text")

# The exceptions the scripts map to these statuses are in modeling/errors.py.

# A mistake in the flags or the inputs (errors.UserError, see
# errors.is_user_error): one line on stderr, no traceback.
EXIT_USER_ERROR = errors.EXIT_USER_ERROR
# After SIGTERM with the state saved (see errors.EXIT_INTERRUPTED).
EXIT_INTERRUPTED = errors.EXIT_INTERRUPTED


def uses_tpu(settings):
    """Whether the run is on a TPU: --use_tpu, --strategy=tpu or a
    TPUStrategy already built (fixed batch shapes there)."""
    strategy = settings.strategy
    return bool(
        settings.use_tpu
        or strategy == "tpu"
        or type(strategy).__name__.startswith("TPUStrategy")
    )


# The counts a run needs at least one of, when they are set.
_AT_LEAST_ONE = (
    "train_batch_size",
    "eval_batch_size",
    "predict_batch_size",
    "batch_size",  # extract_features.py's
    "max_eval_steps",
    "num_tpu_cores",
)


def check_counts(settings):
    """Refuses a batch size (or --max_eval_steps) below 1, naming the flag
    (else a TensorFlow traceback, or an evaluation of nothing).

    Raises:
      ValueError: "--train_batch_size=0: must be at least 1".
    """
    for name in _AT_LEAST_ONE:
        value = getattr(settings, name, None)
        if value is not None and value < 1:
            raise ValueError(f"--{name}={value}: must be at least 1")


def check_modes(settings, modes, also="export_dir", closing_quote="`"):
    """Refuses a run with nothing to do, in the original scripts' words:
    "At least one of `do_train` or `do_predict` must be True." Every script
    checks its modes here.

    Args:
      settings: the script's Settings.
      modes: the names of its mode flags, in the message's order.
      also: a further flag that is a mode of its own (--export_dir), or
        None.
      closing_quote: of the last name: run_classifier's message closes
        `do_predict' with a straight quote, kept word for word.
    """
    if any(getattr(settings, m) for m in modes):
        return
    if also and getattr(settings, also, None):
        return
    names = [f"`{m}`" for m in modes]
    names[-1] = names[-1][:-1] + closing_quote
    listed = names[0]
    if len(names) > 1:
        listed = ", ".join(names[:-1]) + " or " + names[-1]
    ending = f" (or give --{also})." if also else "."
    raise ValueError(f"At least one of {listed} must be True{ending}")


# The folders a run writes into besides an export, by flag: an export
# folder must lie apart from each (publishing an export replaces its folder).
_RUN_FOLDERS = ("output_dir", "glue_submission_dir")
# The paths a run reads (or writes a file at), by flag: none may lie in the
# export folder, which publishing replaces (an encoder fine-tuned from an
# earlier export's folder, exported over it, was deleted).
_RUN_PATHS = (
    "bert_hub_module_handle",
    "init_checkpoint",
    "bert_config_file",
    "vocab_file",
    "data_dir",
    "input_file",
    "train_file",
    "dev_file",
    "eval_file",
    "test_file",
    "predict_file",
    "corpus_file",
    "corpus_embeddings",
    "query_file",
    "output_file",
)


def check_output_folders(settings, export_flag="export_dir"):
    """Checks the folders a run writes, with its settings: before anything
    is read, trained or written.

    - --output_dir, if it exists, is a folder;
    - the export folder (the `export_flag` field: --export_dir, or
      export_hub's --export_path) is one an export may replace
      (folders.check_replaceable: absent, empty, or an earlier export);
    - it is apart from the run's other folders (_RUN_FOLDERS): neither the
      same folder nor one inside the other;
    - no path the run reads or writes (_RUN_PATHS) lies in it.

    Raises:
      NotADirectoryError, errors.UserError: naming the flags and paths.
    """
    output_dir = getattr(settings, "output_dir", None)
    if output_dir:
        file_io.check_folder_path(output_dir, f"--output_dir={output_dir}")
    export_dir = getattr(settings, export_flag, None)
    if not export_dir:
        return
    for flag in _RUN_FOLDERS:
        folder = getattr(settings, flag, None)
        if folder and file_io.overlap(folder, export_dir):
            raise errors.UserError(
                f"--{export_flag}={export_dir} and --{flag}={folder} must be "
                "separate folders, neither inside the other: an export "
                "replaces its whole folder"
            )
    for flag in _RUN_PATHS:
        value = getattr(settings, flag, None)
        if not isinstance(value, str):
            continue
        for path in filter(None, (p.strip() for p in value.split(","))):
            if file_io.within(path, export_dir):
                raise errors.UserError(
                    f"--{flag}={value} lies in --{export_flag}={export_dir}, "
                    "which the export replaces as a whole: export to "
                    "another folder"
                )
    folders.check_replaceable(export_dir, export_flag)


def check_predict_runtime(settings):
    """Refuses a TF Lite runtime (--predict_runtime=tflite or tflite_int8,
    --precision=int8) where it cannot run: it runs in this process on this
    host's CPU. (A mixed --precision is refused by the RunConfig.) Called
    when the settings are made: before a checkpoint is read, a record
    written or a TPU contacted.

    Raises:
      ValueError: with --use_tpu, or a strategy of several devices.
    """
    runtime = settings.run_config.runtime
    if runtime == "tensorflow":
        return
    strategy = settings.strategy
    if isinstance(strategy, str):
        several = strategy != "default"
        name = f"--strategy={strategy}"
    else:  # A tf.distribute.Strategy already built.
        replicas = getattr(strategy, "num_replicas_in_sync", 1)
        several = replicas > 1
        name = f"a strategy of {replicas} devices"
    if settings.use_tpu:
        several, name = True, "--use_tpu"
    if several:
        raise ValueError(
            f"--predict_runtime={runtime} runs in this process on this "
            f"host's CPU: it cannot run with {name} (evaluate or predict in "
            "a second run without it)"
        )


def check_backend(settings):
    """Refuses what the JAX backend does not run: tf.distribute strategies
    (it uses every local device itself) and the TensorFlow TPU path.

    Raises:
      ValueError: naming the flag.
    """
    if backend.current() != "jax":
        return
    if getattr(settings, "bert_hub_module_handle", None):
        raise ValueError(
            "--bert_hub_module_handle loads a TensorFlow SavedModel: run "
            "run_classifier_with_tfhub.py with --backend=tensorflow"
        )
    if getattr(settings, "export_dir", None):
        raise ValueError(
            "--export_dir writes a TensorFlow SavedModel: export from "
            "output_dir's checkpoint in a second run with "
            "--backend=tensorflow"
        )
    strategy = settings.strategy
    name = strategy if isinstance(strategy, str) else type(strategy).__name__
    if settings.use_tpu or name not in (
        "default",
        "_DefaultDistributionStrategy",
    ):
        flag = "--use_tpu" if settings.use_tpu else f"--strategy={name}"
        raise ValueError(
            f"{flag} is a TensorFlow strategy; --backend=jax splits each "
            "batch over every local device (GPUs, TPU cores) itself: drop "
            f"{flag}"
        )


def set_up(settings):
    """The set-up every model runner does once its settings are checked:
    creates output_dir (when set), seeds Python/NumPy/TF (random_seed), sets
    the compute precision (run_config.precision), builds the strategy and,
    for a training run, locks output_dir (file_io.lock_run_dir).

    Returns:
      The tf.distribute.Strategy.
    """
    # TensorFlow only here: importing this module must not load it.
    from modeling.training import distribute
    from modeling.training import trainer

    check_backend(settings)
    if settings.output_dir:
        # Removed again, if still empty, when the run fails.
        file_io.make_run_dir(settings.output_dir)
    trainer.set_seed(settings.random_seed)
    if settings.run_config is not None:
        distribute.set_precision(settings.run_config.precision)
    strategy = distribute.create_strategy(
        settings.strategy,
        settings.use_tpu,
        settings.tpu_name,
        settings.tpu_zone,
        settings.gcp_project,
        settings.master,
    )
    # The process that writes checkpoints (of several, the chief) locks
    # the folder while training: a second training run there fails.
    if (
        settings.output_dir
        and getattr(settings, "do_train", False)
        and distribute.is_chief(strategy)
    ):
        file_io.lock_run_dir(settings.output_dir)
    return strategy


def fine_tuning_steps(settings, num_examples, what="train examples"):
    """The original's step arithmetic for a fine-tuning run.

    Returns:
      (num_train_steps, num_warmup_steps): int(num_examples /
      train_batch_size * num_train_epochs) and int(steps *
      warmup_proportion).

    Raises:
      ValueError: that gives no training step.
    """
    s = settings
    num_train_steps = schedule.num_train_steps(
        num_examples, s.train_batch_size, s.num_train_epochs
    )
    if num_train_steps < 1:
        raise ValueError(
            f"{num_examples} {what} / train_batch_size "
            f"{s.train_batch_size} * num_train_epochs {s.num_train_epochs} "
            "gives 0 training steps"
        )
    return num_train_steps, schedule.num_warmup_steps(
        num_train_steps, s.warmup_proportion
    )


def make_trainer(
    settings,
    strategy,
    build_model,
    loss_fn,
    init_fn,
    num_train_steps=1,
    num_warmup_steps=0,
):
    """The shared Trainer of a fine-tuning task: `init_fn` loads
    --init_checkpoint (or keeps a TF Hub encoder's weights) when there is
    one; the step counts replace those of
    run_config (for inference only they just have to be valid)."""
    from modeling.training import trainer as trainer_lib  # TensorFlow.

    # A TF Hub encoder (run_classifier_with_tfhub) comes with its weights:
    # they are the initial ones, as an --init_checkpoint's would be.
    initial = settings.init_checkpoint or getattr(
        settings, "bert_hub_module_handle", None
    )
    task = trainer_lib.Task(
        build_model=build_model,
        loss_fn=loss_fn,
        init_fn=init_fn if initial else None,
    )
    config = dataclasses.replace(
        settings.run_config,
        output_dir=settings.output_dir,
        num_train_steps=num_train_steps,
        num_warmup_steps=num_warmup_steps,
    )
    return trainer_lib.Trainer(task, config, strategy)


def eval_results_text(results):
    """eval_results.txt as the original writes it: `key = value` lines
    sorted by key, each value as `str` gives it (`!s`: an f-string would
    print a numpy float32 as a Python float)."""
    return "".join(f"{k} = {results[k]!s}\n" for k in sorted(results))


def write_eval_results(path, results):
    """Writes eval_results.txt (`eval_results_text`), atomically."""
    file_io.write_text(path, eval_results_text(results))
