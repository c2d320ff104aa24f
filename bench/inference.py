"""Inference throughput of BertModel, and its fraction of the matmul peak.

    .venv/bin/python bench/inference.py            # BERT-base, seq 128, B 32
    .venv/bin/python bench/inference.py --iters 3 --precisions float32

For each precision (float32, mixed_bfloat16) and each tf.function setting
(jit_compile False / True) it times the encoder forward pass (random
weights; dropout off) and reports sequences/s. In the same run it times a
large tf.matmul (2048 x 2048, in the run's dtype) right before each model
measurement, to get this machine's reachable matmul GFLOP/s under the same
load, and divides the model's achieved GFLOP/s by it.

Model FLOPs count the matmuls only: 2 * (weights used in dense layers) per
token, plus attention scores and context (2 * 2 * T * T * H per layer and
sequence), plus the pooler. Other machines' processes share the CPU: numbers
can be lower under contention. The last line printed is one JSON object.
"""

import argparse
import datetime
import json
import os
import platform
import sys
import time

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
os.environ.setdefault("KERAS_BACKEND", "tensorflow")

import keras
import numpy as np
import tensorflow as tf

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

import machine  # bench/machine.py, beside this script

from modeling import config as config_lib
from modeling import encoder

BERT_BASE = {"vocab_size": 30522, "type_vocab_size": 2}


def model_flops(config, batch_size, seq_length):
    """Matmul FLOPs of one encoder forward pass over a batch."""
    h, i, t = config.hidden_size, config.intermediate_size, seq_length
    per_token = 2 * (4 * h * h + 2 * h * i)  # Q, K, V, attn-out, FFN in/out
    attention = 2 * 2 * t * t * h  # scores (Q K^T) and context (P V)
    per_layer = per_token * t + attention
    pooler = 2 * h * h
    return batch_size * (config.num_hidden_layers * per_layer + pooler)


def _time(fn, iters):
    times = []
    for _ in range(iters):
        start = time.perf_counter()
        fn()
        times.append(time.perf_counter() - start)
    return float(np.median(times))


def matmul_peak(dtype, n=2048, iters=5):
    """Measured GFLOP/s of an n x n x n tf.matmul in `dtype`."""
    a = tf.random.normal([n, n], dtype=tf.float32)
    a, b = tf.cast(a, dtype), tf.cast(tf.transpose(a), dtype)
    matmul = tf.function(lambda: tf.reduce_sum(tf.matmul(a, b)[0]))
    matmul()  # trace and warm up
    seconds = _time(lambda: matmul().numpy(), iters)
    return 2 * n**3 / seconds / 1e9


def bench_model(precision, jit_compile, batch_size, seq_length, iters):
    """Sequences/s of the forward pass (median of `iters` batches)."""
    keras.mixed_precision.set_dtype_policy(precision)
    try:
        config = config_lib.BertConfig(**BERT_BASE)
        model = encoder.BertModel(config)
        model.build()
    finally:
        keras.mixed_precision.set_dtype_policy("float32")
    rng = np.random.default_rng(0)
    inputs = {
        "input_ids": tf.constant(
            rng.integers(1, config.vocab_size, [batch_size, seq_length]),
            tf.int32,
        ),
        "input_mask": tf.ones([batch_size, seq_length], tf.int32),
        "segment_ids": tf.zeros([batch_size, seq_length], tf.int32),
    }

    @tf.function(jit_compile=jit_compile, autograph=False)
    def forward(batch):
        outputs = model(batch, training=False)
        return outputs["sequence_output"], outputs["pooled_output"]

    forward(inputs)[1].numpy()  # trace / compile
    forward(inputs)[1].numpy()  # warm up
    seconds = _time(lambda: forward(inputs)[1].numpy(), iters)
    return {
        "precision": precision,
        "jit_compile": jit_compile,
        "seconds_per_batch": round(seconds, 4),
        "sequences_per_s": round(batch_size / seconds, 2),
        "gflop_per_s": round(
            model_flops(config, batch_size, seq_length) / seconds / 1e9, 1
        ),
    }


def machine_info():
    return {
        **machine.describe(),
        "python": platform.python_version(),
        "tensorflow": tf.__version__,
        "keras": keras.__version__,
        "gpus": len(tf.config.list_physical_devices("GPU")),
    }


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--batch_size", type=int, default=32)
    parser.add_argument("--seq_length", type=int, default=128)
    parser.add_argument("--iters", type=int, default=5)
    parser.add_argument(
        "--precisions", default="float32,mixed_bfloat16", help="comma list"
    )
    parser.add_argument("--jit", default="false,true", help="comma list")
    args = parser.parse_args(argv)
    dtypes = {"float32": tf.float32, "mixed_bfloat16": tf.bfloat16}
    results = []
    for precision in args.precisions.split(","):
        for jit in args.jit.split(","):
            # Measured next to each run: other processes share the CPU.
            peak = matmul_peak(dtypes[precision])
            row = bench_model(
                precision,
                jit == "true",
                args.batch_size,
                args.seq_length,
                args.iters,
            )
            row["matmul_peak_gflop_per_s"] = round(peak, 1)
            row["fraction_of_matmul_peak"] = round(row["gflop_per_s"] / peak, 3)
            results.append(row)
            print(json.dumps(row), flush=True)
    print(
        json.dumps(
            {
                "bench": "inference",
                "date": datetime.datetime.now(datetime.UTC).isoformat(),
                "machine": machine_info(),
                "shape": {
                    "model": "BERT-base (random init)",
                    "batch_size": args.batch_size,
                    "seq_length": args.seq_length,
                },
                "results": results,
            }
        )
    )


if __name__ == "__main__":
    main()
