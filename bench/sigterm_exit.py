"""How long a process iterating tf.data from Python takes to exit after
SIGTERM: the host loop of a `--backend=jax` run, without the rest.

    python bench/sigterm_exit.py --trials=10 --seconds=12 [--no_autotune]

Each trial starts a child that iterates a pipeline with AUTOTUNE
parallelism and prefetch (as the input pipelines do), sends it SIGTERM
after `--seconds`, and times its exit; a SIGTERM handler raises SystemExit
as the scripts' does. Prints one JSON object with the exit times.

On the 2-vCPU AMD EPYC VM (2026-11-27, TensorFlow 2.21) 4 of 12 trials
took 9.1 s to exit instead of 0.9-1.2 s, and none of 12 with
`--no_autotune` (bench/sigterm_exit_2026-11-27.json); gdb put the wait in
tf.data's autotuning thread while the iterator is destroyed
(docs/gpus-tpus.md).
"""

import argparse
import json
import os
import signal
import subprocess
import sys
import time

CHILD = """
import os, signal, sys, time
def stop(signum, frame):
    raise SystemExit(143)
signal.signal(signal.SIGTERM, stop)
import tensorflow as tf
ds = tf.data.Dataset.range(10**9).map(
    lambda x: tf.cast(x, tf.float32) * 2, num_parallel_calls=tf.data.AUTOTUNE
).batch(8).prefetch(tf.data.AUTOTUNE)
options = tf.data.Options()
options.autotune.enabled = not int(sys.argv[1])
batches = ds.with_options(options).as_numpy_iterator()
next(batches)
print("ready", flush=True)
while True:
    next(batches)
    time.sleep(0.001)
"""


def trial(seconds, no_autotune):
    env = dict(os.environ, TF_CPP_MIN_LOG_LEVEL="3")
    child = subprocess.Popen(
        [sys.executable, "-c", CHILD, str(int(no_autotune))],
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        text=True,
        env=env,
    )
    try:
        child.stdout.readline()  # "ready"
        time.sleep(seconds)
        start = time.perf_counter()
        child.send_signal(signal.SIGTERM)
        code = child.wait(timeout=120)
        return round(time.perf_counter() - start, 2), code
    finally:
        if child.poll() is None:
            child.kill()
            child.wait()


def main(argv):
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--trials", type=int, default=10)
    parser.add_argument("--seconds", type=float, default=12.0)
    parser.add_argument("--no_autotune", action="store_true")
    args = parser.parse_args(argv)
    results = [
        trial(args.seconds, args.no_autotune) for _ in range(args.trials)
    ]
    print(
        json.dumps(
            {
                "autotune": not args.no_autotune,
                "seconds_before_sigterm": args.seconds,
                "exit_seconds": [t for t, _ in results],
                "exit_codes": sorted({c for _, c in results}),
            }
        )
    )


if __name__ == "__main__":
    main(sys.argv[1:])
