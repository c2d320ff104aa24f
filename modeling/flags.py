"""absl flags shared by the training scripts (run_pretraining, run_classifier,
run_squad). The only module under modeling/ that touches absl flags.

The original's TPU flags (use_tpu, tpu_name, tpu_zone, gcp_project, master,
num_tpu_cores) keep their names and defaults; the rest are new.
"""

from absl import flags

FLAGS = flags.FLAGS

# Copies of distribute.STRATEGIES / PRECISIONS and optimization.OPTIMIZER_TYPES
# (tests/distribute_test.py checks they agree): importing those modules here
# would load TensorFlow for `--help`.
STRATEGIES = ("default", "mirrored", "multi_worker_mirrored", "tpu")
PRECISIONS = ("float32", "mixed_bfloat16", "mixed_float16")
OPTIMIZER_TYPES = ("adamw", "lamb")


def define_common_flags():
    """Defines the shared flags (idempotent: safe to call twice)."""
    if "strategy" in FLAGS:
        return
    _define_model_flags()
    _define_tpu_flags()
    _define_training_flags()


def _define_model_flags():
    """The original's model, checkpoint and mode flags that every training
    script defines with the same meaning."""
    flags.DEFINE_string(
        "bert_config_file",
        None,
        "The config json file corresponding to the pre-trained BERT model. "
        "This specifies the model architecture.",
    )
    flags.DEFINE_string(
        "output_dir",
        None,
        "The output directory where the model checkpoints will be written.",
    )
    flags.DEFINE_string(
        "init_checkpoint",
        None,
        "Initial checkpoint (usually from a pre-trained BERT model).",
    )
    flags.DEFINE_bool("do_train", False, "Whether to run training.")
    flags.DEFINE_bool("do_eval", False, "Whether to run eval on the dev set.")


def _define_tpu_flags():
    """The original's TPU flags, same names, defaults and help."""
    flags.DEFINE_bool("use_tpu", False, "Whether to use TPU or GPU/CPU.")
    flags.DEFINE_string(
        "tpu_name",
        None,
        "The Cloud TPU to use for training. This should be either the name "
        "used when creating the Cloud TPU, or a grpc://ip.address.of.tpu:8470 "
        "url.",
    )
    flags.DEFINE_string(
        "tpu_zone",
        None,
        "[Optional] GCE zone where the Cloud TPU is located in. If not "
        "specified, we will attempt to automatically detect it.",
    )
    flags.DEFINE_string(
        "gcp_project",
        None,
        "[Optional] Project name for the Cloud TPU-enabled project. If not "
        "specified, we will attempt to automatically detect it.",
    )
    flags.DEFINE_string("master", None, "[Optional] TensorFlow master URL.")
    flags.DEFINE_integer(
        "num_tpu_cores",
        8,
        "Only used if `use_tpu` is True. Total number of TPU cores to use "
        "(TPUStrategy uses every core of the TPU it connects to).",
    )


def _define_training_flags():
    """Flags added by this project."""
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
        "weights (fastest on recent CPUs and on TPUs); mixed_float16: GPUs, "
        "with dynamic loss scaling. Checkpoints stay float32.",
    )
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
        "random_seed",
        None,
        "Seed for weight initialization, dropout and (run_pretraining) the "
        "input shuffle. Unset: random init, input shuffle seed 12345.",
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
        gradient_accumulation_steps=FLAGS.gradient_accumulation_steps,
        optimizer_type=FLAGS.optimizer,
        precision=FLAGS.precision,
        use_xla=FLAGS.use_xla,
    )
