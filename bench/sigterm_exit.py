"""How long a process iterating tf.data from Python takes to exit after
SIGTERM (the host loop of a `--backend=jax` run, without the rest), and how
fast the pipeline fed it until then, with and without tf.data's autotuning.

    python bench/sigterm_exit.py --trials=12 --seconds=12 \
        [--pipeline=toy|records|text|script] [--no_autotune]

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
  script   run_pretraining.py --backend=jax itself on those records (a
           2-layer BERT of hidden size 32, batch 8); `--seconds` count
           from its first training step, and it reports no batches/s
Prints one JSON object.

Measured on the 2-vCPU AMD EPYC VM (2026-11-27, TensorFlow 2.21;
bench/sigterm_exit_2026-11-27.json), SIGTERM after 12 s: with autotuning
10 of 54 exits took 8.7-9.2 s instead of 0.8-1.3 s (toy 6 of 24, records
1 of 18, text 3 of 12); without it none of 42, at the same batches per
second. gdb put the wait in the iterator's destructor, joining tf.data's
autotuning thread in the middle of its sleep (10.24 s after 10.23 s of
shorter ones: the exits came at 20.5 s). `--pipeline=script`, SIGTERM 30 s
into training: 1 of 8 exits took 12.1 s before the project's loops read
without autotuning, none of 8 after (1.6-1.8 s).
"""

import argparse
import json
import os
import pathlib
import signal
import subprocess
import sys
import tempfile
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


# --pipeline=script: a BERT of this shape (the uncased vocabulary of the
# golden records) trained by run_pretraining.py itself.
TINY_BERT = {
    "vocab_size": 30522,
    "hidden_size": 32,
    "num_hidden_layers": 2,
    "num_attention_heads": 2,
    "intermediate_size": 64,
    "hidden_act": "gelu",
    "hidden_dropout_prob": 0.1,
    "attention_probs_dropout_prob": 0.1,
    "max_position_embeddings": 128,
    "type_vocab_size": 2,
    "initializer_range": 0.02,
}


def _command(pipeline, no_autotune, workdir):
    """The child's command line, environment and the stderr line that says
    it is running (None: it prints "ready" on stdout)."""
    env = dict(os.environ, TF_CPP_MIN_LOG_LEVEL="3")
    if pipeline != "script":
        command = [
            sys.executable,
            "-c",
            CHILD,
            pipeline,
            str(int(no_autotune)),
            str(REPO_ROOT),
            str(SHARED),
        ]
        return command, env, None
    if no_autotune:
        raise SystemExit("--pipeline=script runs the project as it is")
    config = pathlib.Path(workdir) / "bert_config.json"
    config.write_text(json.dumps(TINY_BERT))
    output_dir = pathlib.Path(workdir) / f"run{time.monotonic_ns()}"
    command = [
        sys.executable,
        str(REPO_ROOT / "run_pretraining.py"),
        "--backend=jax",
        f"--bert_config_file={config}",
        f"--input_file={SHARED / 'golden' / 'pretraining_readme.tfrecord'}",
        f"--output_dir={output_dir}",
        "--max_seq_length=128",
        "--max_predictions_per_seq=20",
        "--train_batch_size=8",
        "--do_train",
        "--num_train_steps=100000000",
        "--save_checkpoints_steps=100000000",
        "--iterations_per_loop=50",
    ]
    env.update(KERAS_BACKEND="jax", TF_CPP_MIN_LOG_LEVEL="2")
    return command, env, "JAX training step on"


def trial(pipeline, seconds, no_autotune, workdir):
    command, env, marker = _command(pipeline, no_autotune, workdir)
    log = pathlib.Path(workdir) / "stderr.txt"
    with open(log, "w") as stderr:
        child = subprocess.Popen(
            command, stdout=subprocess.PIPE, stderr=stderr, text=True, env=env
        )
    try:
        if marker is None:
            ready = child.stdout.readline().strip() == "ready"
        else:
            deadline = time.monotonic() + 300
            while marker not in log.read_text() and child.poll() is None:
                if time.monotonic() > deadline:
                    break
                time.sleep(0.1)
            ready = marker in log.read_text()
        if not ready:
            raise RuntimeError(
                f"the {pipeline} child failed to start: "
                f"{log.read_text()[-2000:]}"
            )
        time.sleep(seconds)
        start = time.perf_counter()
        child.send_signal(signal.SIGTERM)
        rate = None
        if marker is None:
            rate = json.loads(child.stdout.readline())["batches_per_s"]
        child.communicate(timeout=180)
        return round(time.perf_counter() - start, 2), child.returncode, rate
    finally:
        if child.poll() is None:
            child.kill()
            child.wait()


def main(argv):
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--trials", type=int, default=10)
    parser.add_argument("--seconds", type=float, default=12.0)
    parser.add_argument(
        "--pipeline",
        choices=("toy", "records", "text", "script"),
        default="toy",
    )
    parser.add_argument("--no_autotune", action="store_true")
    args = parser.parse_args(argv)
    with tempfile.TemporaryDirectory() as workdir:
        results = [
            trial(args.pipeline, args.seconds, args.no_autotune, workdir)
            for _ in range(args.trials)
        ]
    print(
        json.dumps(
            {
                "pipeline": args.pipeline,
                # The script runs as the checkout is.
                "autotune": None
                if args.pipeline == "script"
                else not args.no_autotune,
                "seconds_before_sigterm": args.seconds,
                "exit_seconds": [t for t, _, _ in results],
                "exit_codes": sorted({c for _, c, _ in results}),
                "batches_per_s": [r for _, _, r in results],
            }
        )
    )


if __name__ == "__main__":
    main(sys.argv[1:])
