"""absl flags shared by the scripts, and the runner pattern's flag side
(modeling/tasks/common.py describes the pattern). The only module under
modeling/ that touches absl flags.

- define_common_flags(): the shared flags of the training scripts
  (run_pretraining, run_classifier, run_squad); define_flags(*names): some
  of them (extract_features).
- settings_from_flags(Settings): a task's Settings from the parsed flags.
- run_script(main, required): every script's entry point and exit status.

The original's TPU flags (use_tpu, tpu_name, tpu_zone, gcp_project, master,
num_tpu_cores) keep their names and defaults; the rest are new.
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
from modeling.data import file_io

FLAGS = flags.FLAGS

# Copies of distribute.STRATEGIES / PRECISIONS, predictor.RUNTIMES and
# optimization.OPTIMIZER_TYPES (tests/distribute_test.py checks they agree):
# importing those modules here would load TensorFlow for `--help`.
STRATEGIES = ("default", "mirrored", "multi_worker_mirrored", "tpu")
# int8: the documented alias of --predict_runtime=tflite_int8.
PRECISIONS = ("float32", "mixed_bfloat16", "mixed_float16", "int8")
PREDICT_RUNTIMES = ("tensorflow", "tflite", "tflite_int8")
OPTIMIZER_TYPES = ("adamw", "lamb")

# === Flag definitions ===


def define_common_flags():
    """Defines the shared flags (idempotent: safe to call twice)."""
    if "strategy" in FLAGS:
        return
    define_flags(*_TRAINING_SCRIPTS)
    _define_training_flags()


def define_flags(*names):
    """Defines the named shared model/TPU flags that are not defined yet,
    for a script that needs only some of them (extract_features).

    Raises:
      KeyError: a name that is not one of them.
    """
    for name in names:
        if name not in FLAGS:
            _SHARED[name]()


# The original's model, checkpoint, mode and TPU flags: same names, defaults
# and meaning in every script that has them.
_SHARED = {
    "bert_config_file": lambda: flags.DEFINE_string(
        "bert_config_file",
        None,
        "The config json file corresponding to the pre-trained BERT model. "
        "This specifies the model architecture.",
    ),
    "output_dir": lambda: flags.DEFINE_string(
        "output_dir",
        None,
        "The output directory where the model checkpoints will be written.",
    ),
    "init_checkpoint": lambda: flags.DEFINE_string(
        "init_checkpoint",
        None,
        "Initial checkpoint (usually from a pre-trained BERT model).",
    ),
    "do_train": lambda: flags.DEFINE_bool(
        "do_train", False, "Whether to run training."
    ),
    "do_eval": lambda: flags.DEFINE_bool(
        "do_eval", False, "Whether to run eval on the dev set."
    ),
    "use_tpu": lambda: flags.DEFINE_bool(
        "use_tpu", False, "Whether to use TPU or GPU/CPU."
    ),
    "tpu_name": lambda: flags.DEFINE_string(
        "tpu_name",
        None,
        "The Cloud TPU to use for training. This should be either the name "
        "used when creating the Cloud TPU, or a grpc://ip.address.of.tpu:8470 "
        "url.",
    ),
    "tpu_zone": lambda: flags.DEFINE_string(
        "tpu_zone",
        None,
        "[Optional] GCE zone where the Cloud TPU is located in. If not "
        "specified, we will attempt to automatically detect it.",
    ),
    "gcp_project": lambda: flags.DEFINE_string(
        "gcp_project",
        None,
        "[Optional] Project name for the Cloud TPU-enabled project. If not "
        "specified, we will attempt to automatically detect it.",
    ),
    "master": lambda: flags.DEFINE_string(
        "master", None, "[Optional] TensorFlow master URL."
    ),
    "num_tpu_cores": lambda: flags.DEFINE_integer(
        "num_tpu_cores",
        8,
        "Only used if `use_tpu` is True. Total number of TPU cores to use "
        "(TPUStrategy uses every core of the TPU it connects to).",
    ),
    # The scripts that read text (not run_pretraining).
    "vocab_file": lambda: flags.DEFINE_string(
        "vocab_file",
        None,
        "The vocabulary file that the BERT model was trained on.",
    ),
    "do_lower_case": lambda: flags.DEFINE_bool(
        "do_lower_case",
        True,
        "Whether to lower case the input text. Should be True for uncased "
        "models and False for cased models.",
    ),
    # The generator's instance and masking flags: create_pretraining_data,
    # and run_pretraining --input_format=text, which makes its examples from
    # raw text (the original's help and defaults).
    "do_whole_word_mask": lambda: flags.DEFINE_bool(
        "do_whole_word_mask",
        False,
        "Whether to use whole word masking rather than per-WordPiece masking.",
    ),
    "masked_lm_prob": lambda: flags.DEFINE_float(
        "masked_lm_prob", 0.15, "Masked LM probability."
    ),
    "short_seq_prob": lambda: flags.DEFINE_float(
        "short_seq_prob",
        0.1,
        "Probability of creating sequences which are shorter than the "
        "maximum length.",
    ),
}
# The flags that make instances from raw text (define_flags(*TEXT_INSTANCES)).
TEXT_INSTANCES = (
    "vocab_file",
    "do_lower_case",
    "do_whole_word_mask",
    "masked_lm_prob",
    "short_seq_prob",
)
# What define_common_flags defines: the flags of every training script.
_SHARED.update(
    {
        # Training flags of the original's scripts, same defaults and help
        # in each of them. A script whose original differs (SQuAD's
        # predict_batch_size help, multiple choice's smaller batch) defines
        # its own first: define_flags skips a flag that exists.
        "train_batch_size": lambda: flags.DEFINE_integer(
            "train_batch_size", 32, "Total batch size for training."
        ),
        "eval_batch_size": lambda: flags.DEFINE_integer(
            "eval_batch_size", 8, "Total batch size for eval."
        ),
        "predict_batch_size": lambda: flags.DEFINE_integer(
            "predict_batch_size", 8, "Total batch size for predict."
        ),
        "learning_rate": lambda: flags.DEFINE_float(
            "learning_rate", 5e-5, "The initial learning rate for Adam."
        ),
        "num_train_epochs": lambda: flags.DEFINE_float(
            "num_train_epochs",
            3.0,
            "Total number of training epochs to perform.",
        ),
        "warmup_proportion": lambda: flags.DEFINE_float(
            "warmup_proportion",
            0.1,
            "Proportion of training to perform linear learning rate warmup "
            "for. E.g., 0.1 = 10% of training.",
        ),
        "save_checkpoints_steps": lambda: flags.DEFINE_integer(
            "save_checkpoints_steps",
            1000,
            "How often to save the model checkpoint.",
        ),
        "iterations_per_loop": lambda: flags.DEFINE_integer(
            "iterations_per_loop",
            1000,
            "How many steps to make in each estimator call (here: how many "
            "steps each compiled loop call runs; off TPU a call also ends "
            "after 100 steps or 30 seconds, so that progress is logged).",
        ),
    }
)
# What runs evaluation and prediction (the fine-tuning scripts, and
# run_embeddings.py, which trains nothing).
_SHARED.update(
    {
        "predict_runtime": lambda: flags.DEFINE_enum(
            "predict_runtime",
            None,
            list(PREDICT_RUNTIMES),
            "What runs --do_eval / --do_predict (fine-tuning scripts): "
            "tensorflow (the default); tflite: TF Lite with XNNPACK on this "
            "host's CPU, outputs within float32 rounding of TensorFlow's, "
            "faster on CPU; tflite_int8: the same with dynamic-range int8 "
            "matmuls, about 2-3x float32's speed, labels within int8's "
            "rounding. TF Lite runs the float32 model on one CPU host: not with "
            "a mixed --precision, --use_tpu or another --strategy.",
        ),
    }
)
# Texts longer than max_seq_length (run_classifier, run_embeddings;
# modeling/data/long_inputs.py). None: the training run's choice.
_SHARED.update(
    {
        "long_inputs": lambda: flags.DEFINE_enum(
            "long_inputs",
            None,
            ["truncate", "head_tail", "chunks"],
            "Texts longer than max_seq_length: truncate (the original: the "
            "first pieces; the default), head_tail (the first --head_tokens "
            "pieces and the last ones), chunks (windows over the whole text, "
            "outputs combined by --chunk_pooling). Default: what the run "
            "that trained in output_dir used, else truncate.",
        ),
        "head_tokens": lambda: flags.DEFINE_integer(
            "head_tokens",
            None,
            "--long_inputs=head_tail: pieces kept from the start (default "
            "128; at most half of max_seq_length), the rest from the end.",
        ),
        "chunk_stride": lambda: flags.DEFINE_integer(
            "chunk_stride",
            None,
            "--long_inputs=chunks: pieces of overlap between consecutive "
            "windows, whole words (default 0).",
        ),
        "chunk_pooling": lambda: flags.DEFINE_enum(
            "chunk_pooling",
            None,
            ["mean", "max"],
            "--long_inputs=chunks: a text's windows combined by the mean "
            "(default) or the maximum of their outputs.",
        ),
    }
)
LONG_INPUTS = ("long_inputs", "head_tokens", "chunk_stride", "chunk_pooling")
# What define_common_flags defines: the flags every training script has.
_TRAINING_SCRIPTS = (
    "bert_config_file",
    "output_dir",
    "init_checkpoint",
    "do_train",
    "do_eval",
    "use_tpu",
    "tpu_name",
    "tpu_zone",
    "gcp_project",
    "master",
    "num_tpu_cores",
    "train_batch_size",
    "learning_rate",
    "save_checkpoints_steps",
    "iterations_per_loop",
)
# The fine-tuning scripts' flags beyond those (define_flags(*FINE_TUNING)).
FINE_TUNING = (
    "vocab_file",
    "do_lower_case",
    "eval_batch_size",
    "predict_batch_size",
    "num_train_epochs",
    "warmup_proportion",
)


def _define_training_flags():
    """Flags added by this project."""
    flags.DEFINE_enum(
        "backend",
        None,
        list(backend.BACKENDS),
        "What runs the model: tensorflow (the default) or jax (Keras 3's "
        "JAX backend: GPUs and TPUs through jax[cuda12/13] or jax[tpu], "
        "each batch split over every local device). Unset: the "
        "KERAS_BACKEND environment variable, else tensorflow. The same "
        "records, flags and checkpoints either way.",
    )
    flags.DEFINE_enum(
        "strategy",
        "default",
        list(STRATEGIES),
        "tf.distribute strategy: default (one device), mirrored (all local "
        "GPUs), multi_worker_mirrored (hosts from the TF_CONFIG environment "
        "variable), tpu (same as --use_tpu).",
    )
    flags.DEFINE_enum(
        "precision",
        "float32",
        list(PRECISIONS),
        "Compute precision. mixed_bfloat16: bf16 compute with float32 "
        "weights (fastest on some CPUs and on TPUs); mixed_float16: GPUs, "
        "with dynamic loss scaling. int8 (fine-tuning scripts): an alias "
        "of --predict_runtime=tflite_int8 (training, if any, in float32). "
        "Checkpoints stay float32.",
    )
    define_flags("predict_runtime")
    flags.DEFINE_bool(
        "use_xla",
        False,
        "Compile the forward and backward pass with XLA (jit_compile). "
        "Faster on GPU/TPU; on CPU it is slower than plain bf16 (bench/).",
    )
    flags.DEFINE_integer(
        "gradient_accumulation_steps",
        1,
        "Split each training batch into this many micro-batches and apply "
        "their mean gradient once: the same update with less memory. "
        "train_batch_size must be divisible by it (times the replicas).",
    )
    flags.DEFINE_bool(
        "gradient_checkpointing",
        False,
        "Recompute each Transformer layer's activations in the backward "
        "pass instead of keeping them: about 0.5-0.9 GB less for a 6-layer, "
        "384-wide model at batch 32 x 128 (more for larger models), for "
        "about 1.25x the time per step. The same updates.",
    )
    flags.DEFINE_enum(
        "optimizer",
        "adamw",
        list(OPTIMIZER_TYPES),
        "adamw: the original AdamWeightDecay; lamb: layer-wise adaptive "
        "(large batches).",
    )
    flags.DEFINE_integer(
        "keep_checkpoint_max",
        5,
        "How many of the newest checkpoints to keep in output_dir.",
    )
    flags.DEFINE_integer(
        "save_checkpoints_secs",
        600,
        "Besides every save_checkpoints_steps, save a safety checkpoint "
        "when this many seconds have passed since the last one (rotated "
        "like the others; resuming uses it like any checkpoint), so a kill "
        "loses minutes at most. 0 disables it.",
    )
    flags.DEFINE_integer(
        "random_seed",
        None,
        "Seed for weight initialization, dropout and (run_pretraining) the "
        "input shuffle; with run_pretraining --input_format=text also the "
        "instances and masks made from the text. Unset: random init, input "
        "seed 12345 (create_pretraining_data's default).",
    )


def run_config(output_dir, num_train_steps, num_warmup_steps, learning_rate):
    """A trainer.RunConfig from the shared and per-script flags."""
    # TensorFlow only once flags are parsed.
    from modeling.training import trainer

    return trainer.RunConfig(
        output_dir=output_dir,
        num_train_steps=num_train_steps,
        learning_rate=learning_rate,
        num_warmup_steps=num_warmup_steps,
        save_checkpoints_steps=FLAGS.save_checkpoints_steps,
        iterations_per_loop=FLAGS.iterations_per_loop,
        keep_checkpoint_max=FLAGS.keep_checkpoint_max,
        save_checkpoints_secs=FLAGS.save_checkpoints_secs,
        gradient_accumulation_steps=FLAGS.gradient_accumulation_steps,
        optimizer_type=FLAGS.optimizer,
        precision=FLAGS.precision,
        predict_runtime=FLAGS.predict_runtime,
        use_xla=FLAGS.use_xla,
        gradient_checkpointing=FLAGS.gradient_checkpointing,
    )


# === Settings and entry point (the runner pattern) ===


def settings_from_flags(settings_cls, **overrides):
    """A task's Settings dataclass from the parsed flags, by reflection.

    Each field takes, in this order: its value in `overrides`; for
    `run_config`, the shared training flags (`run_config` below; the
    script's num_train_steps / num_warmup_steps when it has them, else 0 for
    the task to set) when the script defines them; the flag of the same
    name; else the field's default.

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
    values = {}
    for field in fields:
        name = field.name
        if name in overrides:
            values[name] = overrides[name]
        elif name == "run_config" and "precision" in FLAGS:
            values[name] = run_config(
                FLAGS.output_dir,
                num_train_steps=_flag_or("num_train_steps", 0),
                num_warmup_steps=_flag_or("num_warmup_steps", 0),
                learning_rate=_flag_or("learning_rate", 5e-5),
            )
        elif name in FLAGS:
            values[name] = FLAGS[name].value
    return settings_cls(**values)


def _flag_or(name, default):
    return FLAGS[name].value if name in FLAGS else default


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
