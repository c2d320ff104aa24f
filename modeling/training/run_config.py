"""The training loop's run settings (trainer.RunConfig), and the names its
choices take: the one declaration of the training flags every training
script shares (modeling/options.py; `run_config` in a task's Settings).

No TensorFlow: the scripts define their flags from here before parsing.
"""

import dataclasses

from modeling import backend
from modeling import progress
from modeling.options import option

# tf.distribute strategies (distribute.create_strategy).
STRATEGIES = ("default", "mirrored", "multi_worker_mirrored", "tpu")
# The Keras dtype policies. (--precision=int8 is not one: it is an alias of
# --predict_runtime=tflite_int8, resolved in RunConfig.)
PRECISIONS = ("float32", "mixed_bfloat16", "mixed_float16")
INT8 = "int8"
# What runs evaluation and prediction (predictor.py).
RUNTIMES = ("tensorflow", "tflite", "tflite_int8")
# The optimizers' update rules (update_rules.py).
OPTIMIZER_TYPES = ("adamw", "lamb")


@dataclasses.dataclass
class RunConfig:
    """Run settings; the fields made with `option` are the training
    scripts' flags, same names (optimizer_type: --optimizer)."""

    output_dir: str
    # 0: the task sets it (the fine-tuning runners from their epochs).
    num_train_steps: int = 0
    learning_rate: float = option(5e-5, "The initial learning rate for Adam.")
    num_warmup_steps: int = 0
    save_checkpoints_steps: int = option(
        1000, "How often to save the model checkpoint."
    )
    iterations_per_loop: int = option(
        1000,
        "How many steps to make in each estimator call (here: how many "
        "steps each compiled loop call runs; off TPU a call also ends "
        "after 100 steps or 30 seconds, so that progress is logged).",
    )
    keep_checkpoint_max: int = option(
        5,
        "How many of the newest checkpoints to keep in output_dir (0: all, "
        "as the original's RunConfig).",
    )
    gradient_accumulation_steps: int = option(
        1,
        "Split each training batch into this many micro-batches and apply "
        "their mean gradient once, with less memory: one batch's update "
        "(the masked-LM and NER token losses of each divide by the whole "
        "batch's count of masked tokens or labelled words). "
        "train_batch_size must be divisible by it (times the replicas).",
    )
    optimizer_type: str = option(
        "adamw",
        "adamw: the original AdamWeightDecay; lamb: layer-wise adaptive "
        "(large batches).",
        choices=OPTIMIZER_TYPES,
        flag="optimizer",
    )
    precision: str = option(
        "float32",
        "Compute precision. mixed_bfloat16: bf16 compute with float32 "
        "weights (fastest on some CPUs and on TPUs); mixed_float16: GPUs, "
        "with dynamic loss scaling. int8 (fine-tuning scripts): an alias "
        "of --predict_runtime=tflite_int8 (training, if any, in float32). "
        "Checkpoints stay float32.",
        choices=PRECISIONS + (INT8,),
    )
    # What runs evaluation and prediction (RUNTIMES): None (not
    # given: "tensorflow"), "tensorflow", "tflite" or "tflite_int8".
    # precision "int8" is an alias of predict_runtime "tflite_int8" (the
    # model, and training, in float32).
    predict_runtime: str | None = option(
        None,
        "What runs --do_eval / --do_predict (fine-tuning scripts): "
        "tensorflow (the default); tflite: TF Lite with XNNPACK on this "
        "host's CPU, outputs within float32 rounding of TensorFlow's, "
        "faster on CPU; tflite_int8: the same with dynamic-range int8 "
        "matmuls, about 2-3x float32's speed, labels within int8's "
        "rounding. TF Lite runs the float32 model on one CPU host: not with "
        "a mixed --precision, --use_tpu or another --strategy.",
        choices=RUNTIMES,
    )
    use_xla: bool = option(
        False,
        "Compile the forward and backward pass with XLA (jit_compile). "
        "Faster on GPU/TPU; on CPU it is slower than plain bf16 (bench/).",
    )
    # Recompute each Transformer block in the backward pass instead of
    # keeping its activations (encoder.set_gradient_checkpointing).
    gradient_checkpointing: bool = option(
        False,
        "Recompute each Transformer layer's activations in the backward "
        "pass instead of keeping them: about 0.5-0.9 GB less for a 6-layer, "
        "384-wide model at batch 32 x 128 (more for larger models), for "
        "about 1.25x the time per step. The same updates.",
    )
    handle_sigterm: bool = True
    # A safety checkpoint every this many seconds besides
    # save_checkpoints_steps (None or 0: none).
    save_checkpoints_secs: float | None = option(
        600,
        "Besides every save_checkpoints_steps, save a safety checkpoint "
        "when this many seconds have passed since the last one (rotated "
        "like the others; resuming uses it like any checkpoint), so a kill "
        "loses minutes at most. 0 disables it.",
        kind="int",
    )
    # Off TPU, the host logs progress (and checks the time) at least every
    # this many steps and seconds, whatever iterations_per_loop says.
    log_every_steps: int = 100
    log_every_secs: float = progress.EVERY_SECS

    def __post_init__(self):
        """Resolves --precision=int8 and refuses what TF Lite cannot run.

        Raises:
          ValueError: an unknown runtime; int8 with
            --predict_runtime=tensorflow; TF Lite after a mixed precision
            (its converter takes the float32 model); a negative
            --keep_checkpoint_max or --save_checkpoints_secs, a
            --save_checkpoints_steps or --iterations_per_loop below 1.
        """
        if self.keep_checkpoint_max < 0:
            raise ValueError(
                f"--keep_checkpoint_max={self.keep_checkpoint_max}: keep how "
                "many newest checkpoints (0: all)"
            )
        # As the original's TPUConfig refused them (it checked them even
        # off TPU): a safety checkpoint after every step, or a silent 1.
        for name in ("save_checkpoints_steps", "iterations_per_loop"):
            value = getattr(self, name)
            if value is None or value < 1:
                raise ValueError(f"--{name}={value}: must be at least 1")
        if (
            self.save_checkpoints_secs is not None
            and self.save_checkpoints_secs < 0
        ):
            raise ValueError(
                f"--save_checkpoints_secs={self.save_checkpoints_secs}: "
                "seconds between safety checkpoints (0: none)"
            )
        runtime = self.predict_runtime
        if runtime is not None and runtime not in RUNTIMES:
            raise ValueError(
                f"--predict_runtime={runtime}: expected one of "
                f"{', '.join(RUNTIMES)}"
            )
        int8 = self.precision == INT8
        if int8:
            if runtime == "tensorflow":
                raise ValueError(
                    "--precision=int8 predicts through TF Lite "
                    "(--predict_runtime=tflite_int8): drop "
                    "--predict_runtime=tensorflow"
                )
            self.precision = "float32"
            self.predict_runtime = "tflite_int8"
        if backend.current() == "jax":
            if self.precision == "mixed_float16":
                raise ValueError(
                    "--precision=mixed_float16 scales the loss on the "
                    "TensorFlow backend only; with --backend=jax use "
                    "mixed_bfloat16"
                )
            if self.runtime != "tensorflow":
                flag = (
                    "--precision=int8"
                    if int8
                    else f"--predict_runtime={self.runtime}"
                )
                raise ValueError(
                    f"{flag} converts a TensorFlow model to TF Lite: it "
                    "cannot run with --backend=jax"
                )
        if self.runtime != "tensorflow" and self.precision != "float32":
            raise ValueError(
                f"--predict_runtime={self.runtime} converts the float32 "
                f"model: it cannot run with --precision={self.precision} "
                "(train with it, then evaluate or predict in a second run "
                "without it)"
            )

    @property
    def runtime(self):
        """What runs evaluation and prediction (RUNTIMES)."""
        return self.predict_runtime or "tensorflow"
