"""Pre-training throughput of BERT-base on this machine, and its matmul peak;
and whether run_pretraining --input_format=text keeps training fed.

    python bench/pretraining.py                 # all four modes
    python bench/pretraining.py --modes=float32 --steps=5
    python bench/pretraining.py --parts=dynamic_masking

For each mode (fp32 / mixed_bfloat16, each without and with XLA) a fresh
subprocess builds BERT-base (random init) with the pre-training heads and the
original optimizer, and times `--steps` training steps (seq 128, 20
predictions, batch 8) after `--warmup` untimed ones, through the same
`training.Trainer` step function that run_pretraining uses. The same process
times a large tf.matmul in float32 and bfloat16; the fraction of peak is the
training FLOPs per second over that matmul rate. Training FLOPs = 3 x the
forward pass: 2 x (matmul weights of the encoder) x tokens, plus attention
(QK^T and PV), plus the MLM head on the masked positions only (0.559 TFLOP
per step). Prints one JSON object (date, machine, load, results).

Measured 2026-11-22 on this 2-vCPU "AMD EPYC" VM (AVX2/FMA), shared with four
other engineers' jobs; the matmul peak is measured in the same process, so the
fraction is meaningful even when the absolute rate is not:

| mode | seq/s | fraction of peak | matmul peak GFLOP/s | load avg |
|---|---|---|---|---|
| float32 | 0.398 | 0.72 (fp32) | 38.6 fp32 | ~3 |
| mixed_bfloat16 | 0.484 | 0.94 (bf16), 0.92 of fp32 | 36.0 bf16 | ~3 |
| float32 (contended) | 0.177 | 0.68 | 18.3 | ~6 |
| float32 + XLA (contended) | 0.340 | 0.67 | 35.5 | ~6 |
| mixed_bfloat16 (contended) | 0.291 | 0.94 | 21.6 | ~6 |
| mixed_bfloat16 + XLA (contended) | 0.582 | 0.60 | 68.3 | ~5 |

Measured 2026-11-23 on another 2-vCPU "AMD EPYC" VM, one with AVX-512 and
native bf16 dot products (avx512_bf16), no other job running, `python
bench/pretraining.py --steps=5 --warmup=2`; its matmul peak is ten times the
AVX2 VM's:

| mode | seq/s | x float32 | fraction of peak | matmul peak GFLOP/s (fp32 / bf16) |
|---|---|---|---|---|
| float32 | 3.26 | 1.00 | 0.57 (fp32) | 401 / 734 |
| float32 + XLA | 3.68 | 1.13 | 0.59 (fp32) | 435 / 774 |
| mixed_bfloat16 | 4.88 | 1.49 | 0.45 (bf16), 0.79 of fp32 | 429 / 766 |
| mixed_bfloat16 + XLA | 3.13 | 0.96 | 0.28 (bf16), 0.50 of fp32 | 435 / 776 |

The fastest mode differs with the CPU: on the AVX2 VM bf16 gave fp32's
speed (its bf16 matmul is no faster); on this one mixed_bfloat16 without XLA
is 1.49x float32, and with XLA (which does not use oneDNN's kernels) bf16
falls back to 0.96x.

`--parts=dynamic_masking` (dynamic masking, modeling/data/dynamic_masking.py)
times, in one subprocess, on the demo's settings (scripts/demo.sh: the
2-layer 128-wide scripts/demo_bert_config.json, seq 64, 10 predictions, batch
32, vocab/books_uncased_8k.txt, float32) over `--text_file` (default the
demo's corpus, tests/testdata/train_corpus.txt):
- input alone: batches per second of the text pipeline (tokenize, make
  instances, shuffle, mask), read in a Python loop as the trainer reads them;
- training alone: `Trainer.run_steps` on one cached batch repeated;
- training fed by the text pipeline, the two sharing the CPUs;
- the resume fast-forward: examples per second that a resumed run skips
  (made, not masked) to reach its data position.
The ratio input / training alone must be at least 5 (the input never starves
training).

Measured 2026-11-23 on the 2-vCPU AMD EPYC VM, shared with four other
helpers' jobs (load average 4.6-6), `python bench/pretraining.py
--parts=dynamic_masking`:

| text | input alone ex/s | training alone ex/s | ratio | training fed by text ex/s | resume skip ex/s | load avg |
|---|---|---|---|---|---|---|
| train_corpus.txt | 13,641 | 313 | 43.6 | 365 | 12,316 | ~6 |
| train_corpus.txt | 23,350 | 414 | 56.3 | 337 | 16,479 | ~4.6 |
| books_corpus.txt (`--text_file`) | 31,138 | 366 | 85.0 | 295 | 15,269 | ~5 |

The input alone is 44-85x the training rate. Training fed by the text
pipeline (both on the same 2 vCPUs) runs at 0.8-1.2x the cached-batch rate,
within the noise of this shared machine.

Commands: `python bench/pretraining.py --modes=float32,mixed_bfloat16 --steps=4
--warmup=1` (first two rows) and `python bench/pretraining.py --steps=6
--warmup=2` (the rest). The VM's matmul peak (35-70 GFLOP/s for both dtypes,
varying with the other jobs) bounds BERT-base training at about 0.5-1 seq/s,
well under what faster CPUs reach; bf16 has no faster
matmul kernel here (its peak equals fp32's), so its gain is memory traffic.
"""

import argparse
import datetime
import json
import os
import platform
import subprocess
import sys
import time

import machine  # bench/machine.py, beside this script

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
# The demo's pre-training settings (scripts/demo.sh).
DEMO = {
    "config": "scripts/demo_bert_config.json",
    "vocab": "vocab/books_uncased_8k.txt",
    "seq": 64,
    "preds": 10,
}
MODES = ("float32", "float32_xla", "mixed_bfloat16", "mixed_bfloat16_xla")
BASE = {
    "vocab_size": 30522,
    "hidden_size": 768,
    "num_hidden_layers": 12,
    "num_attention_heads": 12,
    "intermediate_size": 3072,
    "hidden_act": "gelu",
    "hidden_dropout_prob": 0.1,
    "attention_probs_dropout_prob": 0.1,
    "max_position_embeddings": 512,
    "type_vocab_size": 2,
    "initializer_range": 0.02,
}


def training_flops(cfg, batch, seq, preds):
    """FLOPs of one training step (3 x forward), multiply-add = 2 FLOPs."""
    h, i, n = (
        cfg["hidden_size"],
        cfg["intermediate_size"],
        cfg["num_hidden_layers"],
    )
    tokens = batch * seq
    encoder = 2 * n * (4 * h * h + 2 * h * i) * tokens
    attention = 2 * n * batch * 2 * seq * seq * h
    mlm = 2 * batch * preds * (h * h + h * cfg["vocab_size"])
    pooler_nsp = 2 * batch * (h * h + 2 * h)
    return 3 * (encoder + attention + mlm + pooler_nsp)


def matmul_peak(tf, dtype, n=2048, repeats=10):
    """Best FLOP/s of an n x n matmul chain in `dtype`."""
    a = tf.random.normal([n, n], dtype=tf.float32)
    a, b = tf.cast(a, dtype), tf.cast(a * 0.5, dtype)
    matmul = tf.function(lambda x, y: tf.matmul(x, y))
    matmul(a, b).numpy()
    best = float("inf")
    for _ in range(repeats):
        start = time.perf_counter()
        matmul(a, b).numpy()
        best = min(best, time.perf_counter() - start)
    return 2 * n**3 / best


def synthetic_batch(tf, cfg, batch, seq, preds):
    rng = tf.random.Generator.from_seed(0)
    low = 1000 if cfg["vocab_size"] > 2000 else 5  # skip [unused*]/specials
    ids = rng.uniform([batch, seq], low, cfg["vocab_size"], dtype=tf.int32)
    positions = tf.sort(
        rng.uniform([batch, preds], 1, seq, dtype=tf.int32), axis=-1
    )
    return {
        "input_ids": ids,
        "input_mask": tf.ones([batch, seq], tf.int32),
        "segment_ids": tf.concat(
            [
                tf.zeros([batch, seq // 2], tf.int32),
                tf.ones([batch, seq // 2], tf.int32),
            ],
            axis=1,
        ),
        "masked_lm_positions": positions,
        "masked_lm_ids": tf.gather(ids, positions, batch_dims=1),
        "masked_lm_weights": tf.ones([batch, preds], tf.float32),
        "next_sentence_labels": tf.zeros([batch, 1], tf.int32),
    }


def run_mode(mode, args):
    """Times one mode in this process; returns a dict of results."""
    import tensorflow as tf

    from modeling import config as config_lib
    from modeling.tasks import pretraining
    from modeling.training import distribute
    from modeling.training import trainer as trainer_lib

    precision = mode.replace("_xla", "")
    distribute.set_precision(precision)
    cfg = dict(BASE, **json.loads(args.config_overrides or "{}"))
    bert_config = config_lib.BertConfig.from_dict(cfg)
    run_config = trainer_lib.RunConfig(
        output_dir=os.path.join(args.tmp_dir, mode),
        num_train_steps=10**6,
        num_warmup_steps=100,
        learning_rate=1e-4,
        precision=precision,
        use_xla=mode.endswith("_xla"),
        handle_sigterm=False,
    )
    trainer = trainer_lib.Trainer(
        pretraining.make_task(bert_config), run_config
    )
    features = synthetic_batch(tf, cfg, args.batch, args.seq, args.preds)
    dataset = tf.data.Dataset.from_tensors(features).repeat()
    trainer.build(dataset.element_spec)
    iterator = iter(dataset)
    start = time.perf_counter()
    # At least one: the trace and compile stay out of the timed steps.
    trainer.run_steps(iterator, max(args.warmup, 1))
    warmup_s = time.perf_counter() - start
    start = time.perf_counter()
    logs = trainer.run_steps(iterator, args.steps)
    elapsed = time.perf_counter() - start
    flops = training_flops(cfg, args.batch, args.seq, args.preds)
    peak32 = matmul_peak(tf, tf.float32)
    peak16 = matmul_peak(tf, tf.bfloat16)
    rate = flops * args.steps / elapsed
    peak = peak32 if precision == "float32" else peak16
    return {
        "mode": mode,
        "sequences_per_sec": round(args.batch * args.steps / elapsed, 3),
        "step_seconds": round(elapsed / args.steps, 4),
        "trace_and_warmup_seconds": round(warmup_s, 1),
        "train_tflops_per_step": round(flops / 1e12, 4),
        "achieved_gflops": round(rate / 1e9, 1),
        "matmul_peak_fp32_gflops": round(peak32 / 1e9, 1),
        "matmul_peak_bf16_gflops": round(peak16 / 1e9, 1),
        "fraction_of_peak": round(rate / peak, 3),
        "fraction_of_fp32_peak": round(rate / peak32, 3),
        "loss": round(logs["loss"], 4),
    }


# Dense (no sparsity) peaks from NVIDIA's H100 / H200 datasheets, TFLOP/s:
# (bf16/fp16 tensor cores, tf32 tensor cores). H200 has the H100 SXM's.
DATASHEET_PEAKS = {
    "H100 PCIe": (756.0, 378.0),
    "H100": (989.4, 494.7),  # SXM (HBM3); the NVL is listed apart
    "H200": (989.4, 494.7),
}
MODELS = {
    "base": BASE,
    "large": dict(
        BASE,
        hidden_size=1024,
        num_hidden_layers=24,
        num_attention_heads=16,
        intermediate_size=4096,
    ),
}


def datasheet_peak(device_kind, precision):
    """The card's dense peak in TFLOP/s for `precision` (None: unknown)."""
    for name, peaks in DATASHEET_PEAKS.items():
        if name in device_kind:
            return peaks[0] if precision != "float32" else peaks[1]
    return None


def jax_matmul_peak(dtype, n):
    """Mean FLOP/s of an n x n matmul in `dtype` on JAX's default device
    (float32 at XLA's default precision: TF32 tensor cores on GPUs)."""
    import jax
    import jax.numpy as jnp

    a = jax.random.normal(jax.random.key(0), (n, n), jnp.float32)
    a, b = a.astype(dtype), (a * 0.5).astype(dtype)
    matmul = jax.jit(jnp.matmul)
    for _ in range(3):
        matmul(a, b).block_until_ready()
    repeats = 10
    start = time.perf_counter()
    for _ in range(repeats):
        c = matmul(a, b)
    c.block_until_ready()
    return 2 * n**3 * repeats / (time.perf_counter() - start)


def numpy_batch(cfg, batch, seq, preds, seed=0):
    """The synthetic batch of `synthetic_batch`, drawn with numpy."""
    import numpy as np

    rng = np.random.default_rng(seed)
    low = 1000 if cfg["vocab_size"] > 2000 else 5
    ids = rng.integers(low, cfg["vocab_size"], (batch, seq), dtype=np.int32)
    positions = np.sort(
        rng.integers(1, seq, (batch, preds), dtype=np.int32), axis=-1
    )
    segments = np.zeros((batch, seq), np.int32)
    segments[:, seq // 2 :] = 1
    return {
        "input_ids": ids,
        "input_mask": np.ones((batch, seq), np.int32),
        "segment_ids": segments,
        "masked_lm_positions": positions,
        "masked_lm_ids": np.take_along_axis(ids, positions, axis=1),
        "masked_lm_weights": np.ones((batch, preds), np.float32),
        "next_sentence_labels": rng.integers(0, 2, (batch, 1), dtype=np.int32),
    }


def build_jax_step(args, precision, seq, batch, overrides=None):
    """BERT (args.model, random init) with the pre-training heads and its
    JAX training step on a synthetic batch: (step, state, placed batch,
    config dict, predictions per sequence)."""
    import keras

    from modeling import config as config_lib
    from modeling import losses
    from modeling import models
    from modeling.training import jax_steps
    from modeling.training import optimization

    # bench/gpu_hf_peer.py's predictions per sequence: 20 at 128, 76 at 512.
    preds = args.preds if seq <= 128 else max(args.preds, 76)
    keras.mixed_precision.set_global_policy(precision)
    keras.utils.set_random_seed(0)
    cfg = dict(MODELS[args.model], **json.loads(args.config_overrides or "{}"))
    cfg.update(overrides or {})
    model = models.BertPretrainer(config_lib.BertConfig.from_dict(cfg))
    features = numpy_batch(cfg, batch, seq, preds)
    model(features)

    def loss_fn(features, outputs):
        terms = losses.pretraining_losses(outputs, features)
        return {"loss": terms["total_loss"]}

    step = jax_steps.TrainStep(
        model,
        loss_fn,
        optimization.create_optimizer(1e-4, 10**6, 100),
        gradient_accumulation_steps=args.accumulation,
    )
    return step, step.initial_state(), step.place_batch(features), cfg, preds


def run_jax_mode(mode, args):
    """Times one JAX mode in this process (KERAS_BACKEND=jax, no
    TensorFlow needed): "<precision>:<seq>:<batch>"; returns a dict."""
    import jax
    import keras

    precision, seq, batch = mode.split(":")
    seq, batch = int(seq), int(batch)
    step, state, placed, cfg, preds = build_jax_step(
        args, precision, seq, batch
    )
    start = time.perf_counter()
    for _ in range(max(args.warmup, 1)):
        state, logs = step._step(state, placed)
    jax.block_until_ready(logs)
    warmup_s = time.perf_counter() - start
    start = time.perf_counter()
    for _ in range(args.steps):
        state, logs = step._step(state, placed)
    jax.block_until_ready(logs)
    elapsed = time.perf_counter() - start
    device = jax.devices()[0]
    # The step runs on every local device: the peaks are theirs together.
    devices = len(step.devices)
    flops = training_flops(cfg, batch, seq, preds)
    dtype = "bfloat16" if precision != "float32" else "float32"
    measured = jax_matmul_peak(dtype, args.matmul_n) * devices
    rate = flops * args.steps / elapsed
    spec = datasheet_peak(device.device_kind, precision)
    spec = spec * devices if spec else spec
    stats = getattr(device, "memory_stats", lambda: None)() or {}
    result = {
        "mode": mode,
        "backend": "jax",
        "model": args.model,
        "precision": precision,
        "seq": seq,
        "batch": batch,
        "predictions": preds,
        "sequences_per_sec": round(batch * args.steps / elapsed, 1),
        "step_seconds": round(elapsed / args.steps, 5),
        "compile_and_warmup_seconds": round(warmup_s, 1),
        "train_tflops_per_step": round(flops / 1e12, 4),
        "achieved_tflops": round(rate / 1e12, 2),
        "matmul_measured_tflops": round(measured / 1e12, 3),
        "mfu_measured": round(rate / measured, 3),
        "datasheet_tflops": spec,
        "mfu_datasheet": round(rate / (spec * 1e12), 3) if spec else None,
        "peak_device_gib": round(stats.get("peak_bytes_in_use", 0) / 2**30, 2),
        "loss": round(float(logs["loss"]), 4),
        "device": device.device_kind,
        "devices": devices,
        "jax": jax.__version__,
        "keras": keras.__version__,
    }
    return result


def run_dynamic_masking(args):
    """The dynamic-masking part (module docstring) in this process."""
    import tensorflow as tf

    from modeling import config as config_lib
    from modeling.data import dynamic_masking
    from modeling.pretraining_data import generation
    from modeling.tasks import pretraining
    from modeling.training import distribute
    from modeling.training import trainer as trainer_lib

    batch, seq, preds = args.demo_batch, DEMO["seq"], DEMO["preds"]
    options = generation.GenerationOptions(
        max_seq_length=seq, max_predictions_per_seq=preds
    )
    data = dynamic_masking.TextPretrainingData(
        [args.text_file], os.path.join(ROOT, DEMO["vocab"]), True, options
    )
    results = {"part": "dynamic_masking", "text_file": args.text_file}

    # Input alone, in the steady state: the first window of instances is
    # made before the first batch, so the clock starts after it and runs
    # over many windows.
    iterator = iter(data.dataset(batch, True, seed=1))
    for _ in range(data.shuffle_buffer // batch + 1):
        next(iterator)
    start = time.perf_counter()
    for _ in range(args.input_batches):
        next(iterator)
    results["input_examples_per_sec"] = round(
        args.input_batches * batch / (time.perf_counter() - start), 1
    )
    # A resumed run's first batch, after skipping input_batches batches
    # (set-up and the first window included).
    start = time.perf_counter()
    next(
        iter(data.dataset(batch, True, seed=1, start_batch=args.input_batches))
    )
    results["resume_skip_examples_per_sec"] = round(
        args.input_batches * batch / (time.perf_counter() - start), 1
    )

    distribute.set_precision("float32")
    config = config_lib.BertConfig.from_json_file(
        os.path.join(ROOT, DEMO["config"])
    )
    trainer = trainer_lib.Trainer(
        pretraining.make_task(config),
        trainer_lib.RunConfig(
            output_dir=os.path.join(args.tmp_dir, "dynamic_masking"),
            num_train_steps=10**6,
            num_warmup_steps=100,
            learning_rate=5e-4,
            handle_sigterm=False,
        ),
    )
    text_batches = data.dataset(batch, True, seed=2)
    cached = tf.data.Dataset.from_tensors(next(iter(text_batches))).repeat()
    trainer.build(cached.element_spec)

    def train_rate(iterator):
        trainer.run_steps(iterator, max(args.warmup, 1))
        start = time.perf_counter()
        trainer.run_steps(iterator, args.demo_steps)
        return args.demo_steps * batch / (time.perf_counter() - start)

    alone = train_rate(iter(cached))
    fed = train_rate(iter(text_batches))
    results["train_examples_per_sec"] = round(alone, 1)
    results["train_fed_by_text_examples_per_sec"] = round(fed, 1)
    results["input_over_train"] = round(
        results["input_examples_per_sec"] / alone, 1
    )
    results["settings"] = dict(DEMO, batch=batch)
    return results


def parse_args(argv):
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument(
        "--parts",
        default="model",
        help="model (BERT-base, --modes) and/or dynamic_masking",
    )
    parser.add_argument("--modes", default=",".join(MODES))
    parser.add_argument("--batch", type=int, default=8)
    parser.add_argument("--seq", type=int, default=128)
    parser.add_argument("--preds", type=int, default=20)
    parser.add_argument("--steps", type=int, default=10)
    parser.add_argument("--warmup", type=int, default=3)
    parser.add_argument(
        "--config_overrides", default="", help="JSON (smoke tests)"
    )
    parser.add_argument("--tmp_dir", default="/tmp/bert_bench")
    parser.add_argument(
        "--text_file",
        default=os.path.join(ROOT, "tests", "testdata", "train_corpus.txt"),
        help="dynamic_masking: the raw text",
    )
    parser.add_argument("--demo_batch", type=int, default=32)
    parser.add_argument("--demo_steps", type=int, default=200)
    parser.add_argument("--input_batches", type=int, default=2000)
    parser.add_argument(
        "--backend",
        default="tensorflow",
        help="tensorflow (--modes), jax (--jax_modes; KERAS_BACKEND=jax, "
        "TensorFlow not needed) or both, comma-separated",
    )
    parser.add_argument(
        "--jax_modes",
        default="",
        help="precision:seq:batch,... (default: float32 and mixed_bfloat16 "
        "at --seq and --batch)",
    )
    parser.add_argument("--model", default="base", choices=sorted(MODELS))
    parser.add_argument("--accumulation", type=int, default=1)
    parser.add_argument("--matmul_n", type=int, default=2048)
    parser.add_argument(
        "--budget",
        type=float,
        default=0,
        help="seconds: start no mode after this (0: no limit)",
    )
    parser.add_argument(
        "--out", default="", help="also write the JSON here, after each mode"
    )
    parser.add_argument("--child", default="", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if not args.jax_modes:
        args.jax_modes = ",".join(
            f"{p}:{args.seq}:{args.batch}"
            for p in ("float32", "mixed_bfloat16")
        )
    return args


def gpu_description():
    """The GPUs as nvidia-smi names them, with the driver; {} without one."""
    try:
        out = subprocess.run(
            [
                "nvidia-smi",
                "--query-gpu=name,driver_version,memory.total,power.limit",
                "--format=csv,noheader",
            ],
            capture_output=True,
            text=True,
            check=True,
            timeout=30,
        ).stdout
    except (OSError, subprocess.SubprocessError):
        return {}
    return {"gpus": [line.strip() for line in out.splitlines() if line.strip()]}


def main(argv):
    started = time.perf_counter()
    args = parse_args(argv)
    if args.child:
        if args.child == "dynamic_masking":
            result = run_dynamic_masking(args)
        elif args.child.startswith("jax:"):
            result = run_jax_mode(args.child[len("jax:") :], args)
        else:
            result = run_mode(args.child, args)
        print("RESULT " + json.dumps(result), flush=True)
        return
    backends = args.backend.split(",")
    children = []
    for part in args.parts.split(","):
        if part == "model":
            for backend in backends:
                if backend == "tensorflow":
                    children.extend(args.modes.split(","))
                elif backend == "jax":
                    modes = args.jax_modes.split(",")
                    children.extend("jax:" + m for m in modes)
                else:
                    raise SystemExit(
                        f"unknown backend {backend!r}: tensorflow, jax"
                    )
        elif part == "dynamic_masking":
            children.append(part)
        else:
            raise SystemExit(f"unknown part {part!r}: model, dynamic_masking")
    report = {
        "date": datetime.datetime.now(datetime.UTC).isoformat(),
        "machine": {
            "node": platform.node(),
            **machine.describe(),
            **gpu_description(),
        },
        "settings": {
            "model": args.model,
            "batch": args.batch,
            "seq": args.seq,
            "predictions": args.preds,
            "timed_steps": args.steps,
            "warmup_steps": max(args.warmup, 1),
            # A model of other sizes than --model's, when given.
            "config_overrides": args.config_overrides,
        },
        "results": [],
    }
    for mode in children:
        if not mode.startswith("jax:") and mode not in (
            *MODES,
            "dynamic_masking",
        ):
            raise SystemExit(f"unknown mode {mode!r}; expected {MODES}")
        if args.budget and time.perf_counter() - started > args.budget:
            report["results"].append({"mode": mode, "skipped": "budget"})
            continue
        child = [
            sys.executable,
            os.path.abspath(__file__),
            *argv,
            f"--child={mode}",
        ]
        path = os.pathsep.join(
            p for p in (ROOT, os.environ.get("PYTHONPATH")) if p
        )
        env = dict(os.environ, PYTHONPATH=path, TF_CPP_MIN_LOG_LEVEL="2")
        if mode.startswith("jax:"):
            env["KERAS_BACKEND"] = "jax"
        proc = subprocess.run(
            child, env=env, capture_output=True, text=True, check=False
        )
        lines = [x for x in proc.stdout.splitlines() if x.startswith("RESULT ")]
        if proc.returncode or not lines:
            error = proc.stderr[-2000:]
            if "RESOURCE_EXHAUSTED" in proc.stderr:
                error = "out of memory (RESOURCE_EXHAUSTED)"
            report["results"].append({"mode": mode, "error": error})
        else:
            report["results"].append(json.loads(lines[-1][len("RESULT ") :]))
        if args.out:
            with open(args.out + ".tmp", "w") as f:
                f.write(json.dumps(report, indent=2) + "\n")
            os.replace(args.out + ".tmp", args.out)
    print(json.dumps(report, indent=2))
    results = report["results"]
    if results and all("error" in r for r in results):
        raise SystemExit("every mode failed (see their errors above)")


if __name__ == "__main__":
    main(sys.argv[1:])
