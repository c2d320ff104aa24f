"""How long a process iterating tf.data from Python takes to exit after
SIGTERM (the host loop of a `--backend=jax` run, without the rest), and how
fast the pipeline fed it until then, with and without tf.data's autotuning.

    python bench/sigterm_exit.py --trials=12 --seconds=12 \
        [--pipeline=toy|records|text] [--no_autotune]

Each trial starts a child that iterates a pipeline with as_numpy_iterator
(as jax_steps does), sends it SIGTERM after `--seconds`, and times its
exit; the child's SIGTERM handler prints the batches per second it read
and raises SystemExit, as the scripts' raises their exception.
`--no_autotune` passes the pipeline through
input_pipeline.without_autotuning, as the project's loops do. Pipelines:
  toy      range -> map(AUTOTUNE) -> batch(8) -> prefetch(AUTOTUNE)
  records  run_pretraining's record reader (pretraining_dataset) over the
           original release's records in ../shared/golden, batch 32
  text     run_pretraining's dynamic masking (TextPretrainingData) over
           ../shared/data/corpus with vocab/books_uncased_8k.txt, batch 32
Prints one JSON object.

Measured on the 2-vCPU AMD EPYC VM (2026-11-27, TensorFlow 2.21;
bench/sigterm_exit_2026-11-27.json), SIGTERM after 12 s: with autotuning
10 of 54 exits took 8.7-9.2 s instead of 0.8-1.3 s (toy 6 of 24, records
1 of 18, text 3 of 12); without it none of 42, at the same batches per
second. gdb put the wait in the iterator's destructor, joining tf.data's
autotuning thread in the middle of its sleep (10.24 s after 10.23 s of
shorter ones: the exits came at 20.5 s).
"""

import argparse
import json
import os
import pathlib
import signal
import subprocess
import sys
import time

REPO_ROOT = pathlib.Path(__file__).resolve().parents[1]
SHARED = pathlib.Path(
    os.environ.get("BERT_SHARED_DIR", REPO_ROOT.parent / "shared")
)

CHILD = """
import json, os, signal, sys, time
sys.path.insert(0, sys.argv[3])
pipeline, no_autotune, shared = sys.argv[1], int(sys.argv[2]), sys.argv[4]
import tensorflow as tf
from modeling.data import input_pipeline
if pipeline == "toy":
    ds = tf.data.Dataset.range(10**9).map(
        lambda x: tf.cast(x, tf.float32) * 2,
        num_parallel_calls=tf.data.AUTOTUNE,
    ).batch(8).prefetch(tf.data.AUTOTUNE)
elif pipeline == "records":
    ds = input_pipeline.pretraining_dataset(
        [os.path.join(shared, "golden", "pretraining_readme.tfrecord")],
        32, 128, 20, True, seed=1,
    )
else:
    from modeling.data import dynamic_masking
    from modeling.pretraining_data import generation
    ds = dynamic_masking.TextPretrainingData(
        [os.path.join(shared, "data", "corpus", "books_corpus.txt")],
        os.path.join(sys.argv[3], "vocab", "books_uncased_8k.txt"),
        True, generation.GenerationOptions(),
    ).dataset(32, True, seed=1)
if no_autotune:
    ds = input_pipeline.without_autotuning(ds)
batches = ds.as_numpy_iterator()
next(batches)
count = [0, time.perf_counter()]
def stop(signum, frame):
    rate = count[0] / (time.perf_counter() - count[1])
    print(json.dumps({"batches_per_s": round(rate, 1)}), flush=True)
    raise SystemExit(143)
signal.signal(signal.SIGTERM, stop)
print("ready", flush=True)
while True:
    next(batches)
    count[0] += 1
    time.sleep(0.001)
"""


def trial(pipeline, seconds, no_autotune):
    env = dict(os.environ, TF_CPP_MIN_LOG_LEVEL="3")
    child = subprocess.Popen(
        [
            sys.executable,
            "-c",
            CHILD,
            pipeline,
            str(int(no_autotune)),
            str(REPO_ROOT),
            str(SHARED),
        ],
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        text=True,
        env=env,
    )
    try:
        if child.stdout.readline().strip() != "ready":
            raise RuntimeError(f"the {pipeline} child failed to start")
        time.sleep(seconds)
        start = time.perf_counter()
        child.send_signal(signal.SIGTERM)
        rate = json.loads(child.stdout.readline())["batches_per_s"]
        code = child.wait(timeout=120)
        return round(time.perf_counter() - start, 2), code, rate
    finally:
        if child.poll() is None:
            child.kill()
            child.wait()


def main(argv):
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--trials", type=int, default=10)
    parser.add_argument("--seconds", type=float, default=12.0)
    parser.add_argument(
        "--pipeline", choices=("toy", "records", "text"), default="toy"
    )
    parser.add_argument("--no_autotune", action="store_true")
    args = parser.parse_args(argv)
    results = [
        trial(args.pipeline, args.seconds, args.no_autotune)
        for _ in range(args.trials)
    ]
    print(
        json.dumps(
            {
                "pipeline": args.pipeline,
                "autotune": not args.no_autotune,
                "seconds_before_sigterm": args.seconds,
                "exit_seconds": [t for t, _, _ in results],
                "exit_codes": sorted({c for _, c, _ in results}),
                "batches_per_s": [r for _, _, r in results],
            }
        )
    )


if __name__ == "__main__":
    main(sys.argv[1:])
