"""Pieces every task runner shares.

Nothing here imports TensorFlow at import time: create_pretraining_data.py
and modeling/flags.py import this module before any model is needed.
"""

# === The runner pattern ===
#
# A runner is a script (flag definitions + a short main()) over a task module
# (modeling/tasks/X.py) with a `Settings` dataclass and a `run(settings)`:
#
#     # modeling/tasks/X.py
#     @dataclasses.dataclass
#     class Settings(common.CommonSettings):
#         input_file: str                  # one field per flag, same name
#         ...
#
#     def run(settings):
#         ...check the settings (ValueError with a message for the user)...
#         strategy = common.set_up(settings)
#         ...build, train, evaluate, write...
#
#     # X.py (the script)
#     flags.DEFINE_...(...)                # the script's own flags
#     shared_flags.define_common_flags()   # or define_flags(names...)
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
import typing

from modeling import errors
from modeling.data import file_io

# The evaluation summary a task writes to its output folder.
EVAL_RESULTS_FILE = "eval_results.txt"
# Input shuffle seed when --random_seed is unset (resuming needs a fixed one).
DEFAULT_DATA_SEED = 12345

# The exceptions the scripts map to these statuses are in modeling/errors.py.

# A mistake in the flags or the inputs (errors.UserError, see
# modeling/flags.py is_user_error): one line on stderr, no traceback.
EXIT_USER_ERROR = 1
# After SIGTERM with the state saved (see errors.EXIT_INTERRUPTED).
EXIT_INTERRUPTED = errors.EXIT_INTERRUPTED


@dataclasses.dataclass(kw_only=True)
class CommonSettings:
    """The flags every model runner shares (modeling/flags.py), same names.

    Keyword-only, so that a task's Settings can add required fields before
    them. Fields whose flag a script does not define keep these defaults.

    Attributes:
      run_config: training.RunConfig from the shared training flags
        (modeling/flags.py `run_config`), or None for a runner that does
        not train (extract_features).
    """

    bert_config_file: str
    output_dir: str | None = None
    init_checkpoint: str | None = None
    do_train: bool = False
    do_eval: bool = False
    random_seed: int | None = None
    strategy: str = "default"
    use_tpu: bool = False
    tpu_name: str | None = None
    tpu_zone: str | None = None
    gcp_project: str | None = None
    master: str | None = None
    num_tpu_cores: int = 8
    run_config: typing.Any = None


@dataclasses.dataclass(kw_only=True)
class FineTuningSettings(CommonSettings):
    """The flags every fine-tuning runner shares (run_classifier, run_squad,
    run_ner, run_multiple_choice), same names and defaults; each task adds
    its own (max_seq_length among them: its default differs by task)."""

    vocab_file: str
    do_lower_case: bool = True
    do_predict: bool = False
    train_batch_size: int = 32
    eval_batch_size: int = 8
    predict_batch_size: int = 8
    num_train_epochs: float = 3.0
    warmup_proportion: float = 0.1
    eval_during_training: bool = False
    export_dir: str | None = None


def set_up(settings):
    """The set-up every model runner does once its settings are checked:
    creates output_dir (when set), seeds Python/NumPy/TF (random_seed), sets
    the compute precision (run_config.precision) and builds the strategy.

    Returns:
      The tf.distribute.Strategy.
    """
    # TensorFlow only here: importing this module must not load it.
    import tensorflow as tf

    from modeling.training import distribute
    from modeling.training import trainer

    if settings.output_dir:
        tf.io.gfile.makedirs(settings.output_dir)
    trainer.set_seed(settings.random_seed)
    if settings.run_config is not None:
        distribute.set_precision(settings.run_config.precision)
    return distribute.create_strategy(
        settings.strategy,
        settings.use_tpu,
        settings.tpu_name,
        settings.tpu_zone,
        settings.gcp_project,
        settings.master,
    )


def write_eval_results(path, results):
    """Writes eval_results.txt as the original does: `key = value` lines
    sorted by key, each value as `str` gives it (`!s`: an f-string would
    print a numpy float32 as a Python float); atomically."""
    text = "".join(f"{k} = {results[k]!s}\n" for k in sorted(results))
    file_io.write_text(path, text)
