"""tf.distribute strategies and precision policies for the training loop.

One code path for every device: the default strategy (one CPU or GPU),
MirroredStrategy (several local devices), MultiWorkerMirroredStrategy (several
hosts described by TF_CONFIG) and TPUStrategy (the original's `--use_tpu
--tpu_name` flags). `auto_strategy` picks one from what the machine has, for
notebooks, where nobody passes flags.
"""

import json
import os

import keras
import tensorflow as tf
from absl import logging

from modeling import backend
from modeling import errors
from modeling.training import run_config

STRATEGIES = run_config.STRATEGIES
# The Keras dtype policies (--precision=int8 is an alias, run_config.py).
PRECISIONS = run_config.PRECISIONS


def create_strategy(
    strategy="default",
    use_tpu=False,
    tpu_name=None,
    tpu_zone=None,
    gcp_project=None,
    master=None,
):
    """Builds the tf.distribute strategy named by the run flags.

    Args:
      strategy: one of STRATEGIES (`use_tpu` forces "tpu", as in the
        original), or a tf.distribute.Strategy already built (a notebook's,
        see `auto_strategy`), returned as it is: a TPU system is initialized
        once per process, so a second run must reuse the first's strategy.
      use_tpu, tpu_name, tpu_zone, gcp_project, master: the original's TPU
        flags; `tpu_name` (or `master`) names the TPU to connect to.

    Returns:
      A tf.distribute.Strategy.

    Raises:
      ValueError: an unknown strategy, a TPU without a name, or
        multi_worker_mirrored without TF_CONFIG.
    """
    if isinstance(strategy, tf.distribute.Strategy):
        return strategy
    if use_tpu:
        strategy = "tpu"
    if strategy not in STRATEGIES:
        raise ValueError(
            f"Unknown strategy {strategy!r}; expected {STRATEGIES}"
        )
    if strategy == "default":
        return tf.distribute.get_strategy()
    if strategy == "mirrored":
        # Without GPUs MirroredStrategy() would take CPU:0 only; use every
        # logical CPU device (tests split the CPU into two).
        if tf.config.list_logical_devices("GPU"):
            return tf.distribute.MirroredStrategy()
        cpus = [d.name for d in tf.config.list_logical_devices("CPU")]
        return tf.distribute.MirroredStrategy(devices=cpus)
    if strategy == "multi_worker_mirrored":
        if not os.environ.get("TF_CONFIG"):
            raise ValueError(
                "--strategy=multi_worker_mirrored needs the TF_CONFIG "
                "environment variable (cluster and task of this worker)."
            )
        # TensorFlow waits for every worker without a limit, silently.
        logging.info(
            "Waiting for every worker of TF_CONFIG's cluster to start (a "
            "worker that failed before this point leaves the others here: "
            "see its log)"
        )
        return tf.distribute.MultiWorkerMirroredStrategy()
    if not (tpu_name or master):
        raise ValueError("--use_tpu needs --tpu_name (or --master).")
    name = tpu_name or master
    try:
        resolver = tf.distribute.cluster_resolver.TPUClusterResolver(
            tpu=name, zone=tpu_zone, project=gcp_project
        )
        tf.config.experimental_connect_to_cluster(resolver)
        tf.tpu.experimental.initialize_tpu_system(resolver)
    except (ValueError, OSError, tf.errors.OpError) as e:
        # An unknown name (the metadata lookup fails), an address that
        # answers no TPU: one line, not TensorFlow's traceback.
        reason = (str(e).strip().splitlines() or [type(e).__name__])[0]
        flag = "--tpu_name" if tpu_name else "--master"
        raise errors.UserError(
            f"{flag}={name}: cannot reach the TPU ({reason[:300]})"
        ) from e
    return tf.distribute.TPUStrategy(resolver)


# What TPU this machine reaches (TF-free, so a notebook can pick Keras's
# backend before Keras loads).
find_tpu = backend.find_tpu


def auto_strategy(use_tpu=None, tpu_name=None, tpu_zone=None, gcp_project=None):
    """The strategy for what this machine has: a TPU when one is attached
    (TPUStrategy), else every local GPU (MirroredStrategy), else the default
    strategy (the CPU). Built by `create_strategy`, as the flags would.

    Args:
      use_tpu: None: a TPU when `tpu_name` or `find_tpu` gives one; True: a
        TPU or an error; False: never a TPU.
      tpu_name, tpu_zone, gcp_project: as the original's flags; `tpu_name`
        defaults to what `find_tpu` finds.

    Raises:
      ValueError: use_tpu=True and no TPU is named or found.
    """
    if use_tpu is not False:
        tpu_name = tpu_name or find_tpu()
        if tpu_name:
            logging.info("Connecting to the TPU %s", tpu_name)
            return create_strategy(
                "tpu",
                tpu_name=tpu_name,
                tpu_zone=tpu_zone,
                gcp_project=gcp_project,
            )
        if use_tpu:
            raise ValueError(
                "use_tpu=True, but no TPU is attached (no TPU chips, "
                "$TPU_NAME or $COLAB_TPU_ADDR): pick a TPU runtime or name "
                "the TPU (tpu_name)."
            )
    if tf.config.list_logical_devices("GPU"):
        return create_strategy("mirrored")
    return create_strategy("default")


def set_precision(precision):
    """Sets the Keras global dtype policy; call before building the model.

    Args:
      precision: "float32", "mixed_bfloat16" (bf16 compute, float32
        variables; the fast path on recent CPUs and TPUs) or "mixed_float16"
        (GPUs; the training loop then scales the loss dynamically).
    """
    if precision not in PRECISIONS:
        raise ValueError(
            f"Unknown precision {precision!r}; expected {PRECISIONS}"
        )
    keras.mixed_precision.set_global_policy(precision)
    logging.info("Keras dtype policy: %s", precision)


def is_chief(strategy):
    """Whether this process writes checkpoints, summaries and results: on
    JAX the first process (backend.join_processes), on TensorFlow the chief
    of TF_CONFIG's cluster (else its worker 0)."""
    if backend.current() == "jax":
        import jax

        return jax.process_index() == 0
    resolver = getattr(strategy, "cluster_resolver", None)
    if resolver is None or not isinstance(
        strategy, tf.distribute.MultiWorkerMirroredStrategy
    ):
        return True
    task_type, task_id = resolver.task_type, resolver.task_id
    if task_type is None:
        return True
    has_chief = "chief" in json.loads(os.environ.get("TF_CONFIG", "{}")).get(
        "cluster", {}
    )
    if has_chief:
        return task_type == "chief"
    return task_type == "worker" and task_id == 0


def worker_range(strategy, value):
    """(min, max) of a number over the replicas of a strategy's workers
    (an all-reduce under MultiWorkerMirroredStrategy: every worker calls
    it). Each replica puts its value at its own index of a zero vector;
    their sum holds every replica's."""
    replicas = strategy.num_replicas_in_sync
    value = tf.constant(value, tf.float64)

    def at_own_index():
        index = tf.distribute.get_replica_context().replica_id_in_sync_group
        return tf.one_hot(index, replicas, dtype=tf.float64) * value

    values = strategy.reduce(
        tf.distribute.ReduceOp.SUM, strategy.run(at_own_index), axis=None
    ).numpy()
    return int(values.min()), int(values.max())


def distribute_dataset(strategy, dataset):
    """Splits each global batch across replicas, identically on every worker.

    Auto-sharding by DATA (every worker reads the same stream and keeps its
    slice) makes the global batch, and so the result, independent of the
    number of workers and of how many input files there are.
    """
    options = tf.data.Options()
    options.experimental_distribute.auto_shard_policy = (
        tf.data.experimental.AutoShardPolicy.DATA
    )
    dataset = dataset.with_options(options)
    if (
        strategy is tf.distribute.get_strategy()
        and not tf.distribute.has_strategy()
    ):
        return dataset
    return strategy.experimental_distribute_dataset(dataset)
