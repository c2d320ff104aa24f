"""Trains the tiny pre-training model for a few steps under one strategy.

Used by tests/distribute_test.py in a subprocess (logical devices must be set
before TensorFlow initializes):

    python train_distribute_worker.py STRATEGY NUM_CPUS CONFIG RECORDS OUT \
        [LOG_EVERY_SECS [NUM_TRAIN_STEPS]]
"""

import os
import sys

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

import tensorflow as tf


def main(
    strategy,
    num_cpus,
    config,
    records,
    output_dir,
    log_every_secs=None,
    num_train_steps=4,
):
    cpus = tf.config.list_physical_devices("CPU")
    tf.config.set_logical_device_configuration(
        cpus[0],
        [tf.config.LogicalDeviceConfiguration() for _ in range(int(num_cpus))],
    )
    from modeling.training import distribute

    if strategy != "multi_worker_mirrored":  # one MWMS per process
        replicas = distribute.create_strategy(strategy).num_replicas_in_sync
        print(f"replicas={replicas}")
    train(
        strategy,
        config,
        records,
        output_dir,
        log_every_secs and float(log_every_secs),
        int(num_train_steps),
    )


def train(
    strategy,
    config,
    records,
    output_dir,
    log_every_secs=None,
    num_train_steps=4,
):
    """4 steps of batch 8, seed 5, dropout as in the config;
    `log_every_secs`: the time limit of a compiled call (None: the
    default)."""
    from modeling.tasks import pretraining
    from modeling.training import trainer

    more = {"log_every_secs": log_every_secs} if log_every_secs else {}
    run_config = trainer.RunConfig(
        output_dir=output_dir,
        num_train_steps=num_train_steps,
        learning_rate=1e-3,
        num_warmup_steps=1,
        save_checkpoints_steps=4,
        iterations_per_loop=2,
        handle_sigterm=False,
        **more,
    )
    settings = pretraining.Settings(
        bert_config_file=config,
        input_file=records,
        output_dir=output_dir,
        max_seq_length=16,
        max_predictions_per_seq=4,
        do_train=True,
        train_batch_size=8,
        random_seed=5,
        strategy=strategy,
        run_config=run_config,
    )
    # The loss below the clip norm (training_helpers.below_clip_norm): a
    # wrong reduction's doubled gradient is not clipped back.
    sys.path.insert(0, os.path.dirname(os.path.dirname(__file__)))
    import training_helpers

    original = pretraining.loss_fn
    pretraining.loss_fn = training_helpers.below_clip_norm(original)
    try:
        pretraining.run(settings)
    finally:
        pretraining.loss_fn = original


if __name__ == "__main__":
    main(*sys.argv[1:])
