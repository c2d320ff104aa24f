"""Reads the first batches of the text pipeline under one strategy and
saves what each local replica got (tests/dynamic_masking_test.py runs it in
a subprocess: logical devices must be set before TensorFlow initializes):

    python text_distribute_worker.py STRATEGY NUM_CPUS CORPUS VOCAB OUT.npz
"""

import os
import sys

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

import numpy as np
import tensorflow as tf

# The pipeline's settings, also the test's reference.
SEQ, PREDS, BATCH, SEED, STEPS = 32, 5, 8, 9, 2


def dataset(corpus, vocab):
    from modeling.data import dynamic_masking
    from modeling.pretraining_data import generation

    options = generation.GenerationOptions(
        max_seq_length=SEQ, max_predictions_per_seq=PREDS
    )
    data = dynamic_masking.TextPretrainingData(
        [corpus], vocab, True, options, shuffle_buffer=1000
    )
    return data.dataset(BATCH, True, SEED)


def main(strategy_name, num_cpus, corpus, vocab, out):
    cpus = tf.config.list_physical_devices("CPU")
    tf.config.set_logical_device_configuration(
        cpus[0],
        [tf.config.LogicalDeviceConfiguration() for _ in range(int(num_cpus))],
    )
    from modeling.training import distribute

    strategy = distribute.create_strategy(strategy_name)
    print(f"replicas={strategy.num_replicas_in_sync}")
    batches = distribute.distribute_dataset(strategy, dataset(corpus, vocab))
    saved = {}
    for step, batch in zip(range(STEPS), batches):
        for name, value in batch.items():
            parts = strategy.experimental_local_results(value)
            for replica, part in enumerate(parts):
                saved[f"{step}/{replica}/{name}"] = part.numpy()
    np.savez(out, **saved)


if __name__ == "__main__":
    main(*sys.argv[1:])
