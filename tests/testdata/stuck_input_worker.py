"""Trains the tiny pre-training model on an input that blocks for good after
its first batches (as a pipe or a stalled remote read would).

Used by tests/long_runs_test.py in a subprocess, which sends SIGTERM once
training has stopped making progress:

    python stuck_input_worker.py CONFIG RECORDS OUT GOOD_BATCHES

With a fifth argument, `hold_lock`, the input never blocks ("input flowing"
after GOOD_BATCHES); the worker handles SIGTERM as the scripts do
(modeling/signals.py, a 1 s grace) and, once the Trainer has saved and
stopped, blocks for good in a C call that holds the interpreter lock, as a
C++ destructor on the way out can:

    python stuck_input_worker.py CONFIG RECORDS OUT GOOD_BATCHES hold_lock
"""

import ctypes
import os
import sys
import time

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

import tensorflow as tf
from absl import logging

from modeling import config as config_lib
from modeling import errors
from modeling import signals
from modeling.data import input_pipeline
from modeling.tasks import pretraining
from modeling.training import trainer as trainer_lib


def _block_forever(value):
    print("input blocked", file=sys.stderr, flush=True)
    while True:
        time.sleep(3600)
    return value


def _announce_flowing(value):
    print("input flowing", file=sys.stderr, flush=True)
    return value


def main(config, records, output_dir, good_batches, hold_lock=""):
    logging.set_verbosity(logging.INFO)
    bert_config = config_lib.BertConfig.from_json_file(config)
    if hold_lock:
        signals.install_sigterm_exit(grace_secs=1.0)

    def dataset_fn(start):
        good = input_pipeline.pretraining_dataset(
            [records], 8, 16, 4, True, start_batch=start
        )

        def block(features):
            ids = tf.py_function(
                _announce_flowing if hold_lock else _block_forever,
                [features["input_ids"]],
                tf.int32,
            )
            ids.set_shape(features["input_ids"].shape)
            return {**features, "input_ids": ids}

        stuck = good.take(1).map(block)
        if hold_lock:
            stuck = stuck.concatenate(good)  # The training input repeats.
        return good.take(int(good_batches)).concatenate(stuck)

    run_config = trainer_lib.RunConfig(
        output_dir=output_dir,
        num_train_steps=1000,
        save_checkpoints_steps=1000,
        iterations_per_loop=1000,
        learning_rate=1e-3,
    )
    trainer = trainer_lib.Trainer(
        pretraining.make_task(bert_config), run_config
    )
    try:
        trainer.train(dataset_fn)
    except errors.Interrupted:
        if hold_lock:
            print("holding the interpreter lock", file=sys.stderr, flush=True)
            ctypes.PyDLL(None).sleep(3600)  # PyDLL: the lock stays held.
        sys.exit(errors.EXIT_INTERRUPTED)


if __name__ == "__main__":
    main(*sys.argv[1:])
