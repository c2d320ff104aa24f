"""A PyTorch / Hugging Face peer for bench/pretraining.py: BERT-base
pre-training throughput on one GPU, and its matmul peak, in the same process.

    python3 bench/gpu_hf_peer.py --out gpu_hf_peer.json   # on a CUDA machine
    python bench/gpu_hf_peer.py --smoke                  # tiny, CPU, 2 steps

Needs torch and transformers (not TensorFlow); imports torch inside main, so
this module imports without it. The model is
`transformers.BertForPreTraining(BertConfig())` (BERT-base: 12 layers,
hidden 768, 12 heads, intermediate 3072, vocab 30522, dropout 0.1), random
init, `attn_implementation="sdpa"`, trained with torch.optim.AdamW (fused
where available, lr 1e-4) on one synthetic batch held on the GPU: random
input_ids, segment ids half 0 / half 1, attention mask all ones, MLM labels
on `preds` random positions per sequence (20 at seq 128, 76 at seq 512; the
rest -100), random next-sentence labels.

Modes: fp32 (TF32 matmuls allowed), bf16 autocast, fp16 autocast with
torch.amp.GradScaler; each without and then with torch.compile (compiled
modes last: compiling is slow); seq 128 batch 256 and seq 512 batch 64 (a
batch that runs out of memory is halved, and the result says so). Each mode
runs 3 untimed steps (8 when compiled), then times 20 steps between
torch.cuda.synchronize() calls. A mode is skipped once the script has run
`--budget` seconds, or when the mode would likely end past `--deadline`; the
JSON at `--out` is rewritten after every mode, so a run killed by a timeout
still leaves what it measured.

Model TFLOP/s use bench/pretraining.py's `training_flops` (3 x forward,
MLM head on the masked positions only): `mfu_model_spec` divides by the
datasheet dense peak (H100 SXM: bf16/fp16 989, tf32 495 TFLOP/s), and
`mfu_model_measured` by an 8192^3 matmul in the same precision measured in
the same process (mean of 10 after 3 warm-ups). HF computes the MLM head on
every position, so the script also reports `tflops_hf` / `mfu_hf_*` with
the head counted on all positions: the work the GPU actually did.

Measured 2026-11-25 on one NVIDIA H100 80GB HBM3 (SXM, 132 SMs, 700 W
limit; driver 580.159.04, CUDA 13.0), torch 2.11.0+cu130, transformers
5.17.0, Python 3.12.3, `PYTHONUNBUFFERED=1 timeout 400 python3
bench/gpu_hf_peer.py --out gpu_hf_peer.json` (161 s, nothing skipped; full
numbers in bench/gpu_hf_peer_2026-11-25.json).
Matmul peak measured in the process: bf16 815, fp16 782, tf32 414 TFLOP/s.
MFU = model TFLOP/s (project formula) over the datasheet dense peak, then
over the measured matmul peak; peak memory is torch.cuda.max_memory_allocated:

| mode | seq | batch | seq/s | TFLOP/s | MFU spec | MFU measured | peak GiB |
|---|---|---|---|---|---|---|---|
| fp32 (TF32) | 128 | 256 | 1,466 | 102.5 | 0.207 | 0.248 | 31.6 |
| fp32 (TF32) | 512 | 64 | 278 | 83.6 | 0.169 | 0.202 | 31.6 |
| bf16 | 128 | 256 | 2,576 | 180.1 | 0.182 | 0.221 | 23.0 |
| bf16 | 512 | 64 | 609 | 183.1 | 0.185 | 0.225 | 23.0 |
| fp16 | 128 | 256 | 2,545 | 178.0 | 0.180 | 0.228 | 23.0 |
| fp16 | 512 | 64 | 599 | 180.1 | 0.182 | 0.230 | 23.0 |
| fp32 (TF32) + compile | 128 | 256 | 1,774 | 124.0 | 0.251 | 0.300 | 31.7 |
| fp32 (TF32) + compile | 512 | 64 | 313 | 94.2 | 0.190 | 0.228 | 31.7 |
| bf16 + compile | 128 | 256 | 3,850 | 269.2 | 0.272 | 0.330 | 18.1 |
| bf16 + compile | 512 | 64 | 861 | 258.9 | 0.262 | 0.318 | 18.2 |
| fp16 + compile | 128 | 256 | 3,817 | 266.9 | 0.270 | 0.341 | 18.1 |
| fp16 + compile | 512 | 64 | 853 | 256.7 | 0.260 | 0.328 | 18.2 |

No batch ran out of memory; every loss was finite, and the fp16 grad scale
stayed at 65536. Counting the MLM head on all positions (what HF computes:
21.9 instead of 17.9 TFLOP per step at seq 128, 23.3 instead of 19.3 at
512) raises every rate by 22% at seq 128 and 21% at seq 512 (bf16 +
compile: 329 TFLOP/s, 0.33 of spec). torch.compile gave 1.4-1.5x in bf16
and fp16, 1.1-1.2x in fp32; its warm-up (compile) took 20-26 s per mode,
2-3 s for fp16 (after bf16: Inductor's caches, presumably).
`import tensorflow` failed there (ModuleNotFoundError).
"""

import argparse
import datetime
import gc
import json
import os
import platform
import subprocess
import sys
import time
import traceback

# bench/pretraining.py's FLOP formula (that module imports no TensorFlow at
# its top), so the peer's MFU is counted as this project's.
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from pretraining import training_flops  # noqa: E402

# Datasheet dense peaks (no sparsity), TFLOP/s.
SPEC_PEAK = {
    "source": "NVIDIA H100 datasheet, SXM, dense",
    "bf16": 989.0,
    "fp16": 989.0,
    "tf32": 495.0,
}
PRECISIONS = ("fp32", "bf16", "fp16")
PEAK_KEY = {"fp32": "tf32", "bf16": "bf16", "fp16": "fp16"}
# (seq, batch, masked predictions per sequence)
SHAPES = ((128, 256, 20), (512, 64, 76))
NOTE = (
    "tflops_model / mfu_model_* use bench/pretraining.py's training_flops "
    "(3 x forward; MLM head on the masked positions only). HF's "
    "BertForPreTraining computes the MLM head (transform + 30522-way "
    "decoder) on every position, so the GPU does more work than that "
    "formula counts; tflops_hf / mfu_hf_* count the head on all positions."
)


def run_cmd(cmd):
    try:
        proc = subprocess.run(
            cmd, capture_output=True, text=True, check=False, timeout=30
        )
        return (proc.stdout + proc.stderr).strip()
    except (OSError, subprocess.SubprocessError) as e:
        return f"{type(e).__name__}: {e}"


def tensorflow_import():
    """Whether `import tensorflow` works here (not expected on the GPU), in
    a subprocess: TensorFlow and torch in one process can crash."""
    code = "import tensorflow as tf; print('TFVERSION', tf.__version__)"
    try:
        proc = subprocess.run(
            [sys.executable, "-c", code],
            capture_output=True,
            text=True,
            check=False,
            timeout=120,
            env=dict(os.environ, TF_CPP_MIN_LOG_LEVEL="2"),
        )
    except (OSError, subprocess.SubprocessError) as e:
        return {"ok": False, "error": f"{type(e).__name__}: {e}"}
    for line in proc.stdout.splitlines():
        if line.startswith("TFVERSION "):
            return {"ok": True, "version": line.split()[1]}
    lines = proc.stderr.strip().splitlines()
    return {
        "ok": False,
        "returncode": proc.returncode,
        "error": lines[-1] if lines else "",
    }


def matmul_peak(torch, device, dtype, n, warmup=3, repeats=10):
    """Mean TFLOP/s of an n x n x n matmul (random data)."""
    a = torch.randn(n, n, device=device).to(dtype)
    b = torch.randn(n, n, device=device).to(dtype)
    for _ in range(warmup):
        torch.matmul(a, b)
    sync(torch, device)
    start = time.perf_counter()
    for _ in range(repeats):
        torch.matmul(a, b)
    sync(torch, device)
    elapsed = (time.perf_counter() - start) / repeats
    del a, b
    return 2 * n**3 / elapsed / 1e12


def sync(torch, device):
    if device == "cuda":
        torch.cuda.synchronize()


def make_batch(torch, cfg, device, batch, seq, preds):
    gen = torch.Generator(device=device).manual_seed(0)
    vocab = cfg["vocab_size"]
    low = 1000 if vocab > 2000 else 5  # skip [unused*] / specials
    ids = torch.randint(low, vocab, (batch, seq), device=device, generator=gen)
    scores = torch.rand(batch, seq, device=device, generator=gen)
    scores[:, 0] = -1.0  # never mask [CLS]
    positions = scores.topk(preds, dim=1).indices
    labels = torch.full_like(ids, -100)
    labels.scatter_(1, positions, ids.gather(1, positions))
    segments = torch.zeros_like(ids)
    segments[:, seq // 2 :] = 1
    return {
        "input_ids": ids,
        "token_type_ids": segments,
        "attention_mask": torch.ones_like(ids),
        "labels": labels,
        "next_sentence_label": torch.randint(
            0, 2, (batch,), device=device, generator=gen
        ),
    }


def make_optimizer(torch, model, lr):
    try:
        return torch.optim.AdamW(model.parameters(), lr=lr, fused=True), True
    except (RuntimeError, TypeError, ValueError):
        return torch.optim.AdamW(model.parameters(), lr=lr), False


def run_mode(torch, transformers, args, cfg, precision, compiled, shape):
    """Builds a fresh model and times it; returns a dict (no OOM retry)."""
    seq, batch, preds = shape
    device = args.device
    torch.manual_seed(0)
    config = transformers.BertConfig(**cfg, attn_implementation="sdpa")
    model = transformers.BertForPreTraining(config).to(device).train()
    optimizer, fused = make_optimizer(torch, model, 1e-4)
    step_model = torch.compile(model) if compiled else model
    amp_dtype = {"bf16": torch.bfloat16, "fp16": torch.float16}.get(precision)
    scaler = torch.amp.GradScaler(device) if precision == "fp16" else None
    features = make_batch(torch, cfg, device, batch, seq, preds)

    def step():
        optimizer.zero_grad(set_to_none=True)
        with torch.autocast(
            device, dtype=amp_dtype or torch.float32, enabled=bool(amp_dtype)
        ):
            loss = step_model(**features).loss
        if scaler is not None:
            scaler.scale(loss).backward()
            scaler.step(optimizer)
            scaler.update()
        else:
            loss.backward()
            optimizer.step()
        return loss

    warmup = args.warmup_compiled if compiled else args.warmup
    sync(torch, device)
    start = time.perf_counter()
    for _ in range(warmup):
        step()
    sync(torch, device)
    warmup_s = time.perf_counter() - start
    start = time.perf_counter()
    for _ in range(args.steps):
        loss = step()
    sync(torch, device)
    elapsed = time.perf_counter() - start
    loss = float(loss.detach().float().item())
    result = {
        "precision": precision,
        "compile": compiled,
        "seq": seq,
        "batch": batch,
        "preds": preds,
        "fused_adamw": fused,
        "warmup_steps": warmup,
        "timed_steps": args.steps,
        "warmup_seconds": round(warmup_s, 1),
        "step_ms": round(1000 * elapsed / args.steps, 2),
        "sequences_per_sec": round(batch * args.steps / elapsed, 1),
        "loss": round(loss, 4),
        "loss_finite": loss == loss and abs(loss) != float("inf"),
    }
    if scaler is not None:
        result["grad_scale"] = float(scaler.get_scale())
    return result


def add_rates(result, cfg, peaks):
    """TFLOP/s and MFU for a timed mode (step time from step_ms)."""
    step_s = result["step_ms"] / 1000
    b, s, p = result["batch"], result["seq"], result["preds"]
    flops = {
        "model": training_flops(cfg, b, s, p),
        "hf": training_flops(cfg, b, s, s),
    }
    key = PEAK_KEY[result["precision"]]
    for name, f in flops.items():
        rate = f / step_s / 1e12
        result[f"train_tflop_per_step_{name}"] = round(f / 1e12, 3)
        result[f"tflops_{name}"] = round(rate, 1)
        if SPEC_PEAK.get(key):
            result[f"mfu_{name}_spec"] = round(rate / SPEC_PEAK[key], 3)
        if peaks.get(key):
            result[f"mfu_{name}_measured"] = round(rate / peaks[key], 3)
    result["peak_key"] = key
    return result


def mode_list(args):
    """Eager modes first, then compiled; bf16 before fp16 before fp32."""
    order = []
    for compiled in (False, True):
        if compiled and args.no_compile:
            continue
        precisions = PRECISIONS if not compiled else ("bf16", "fp16", "fp32")
        for precision in precisions:
            if precision not in args.precisions.split(","):
                continue
            for shape in args.shapes:
                order.append((precision, compiled, shape))
    return order


def parse_args(argv):
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--out", default="gpu_hf_peer.json")
    parser.add_argument("--precisions", default=",".join(PRECISIONS))
    parser.add_argument("--no_compile", action="store_true")
    parser.add_argument("--steps", type=int, default=20)
    parser.add_argument("--warmup", type=int, default=3)
    parser.add_argument("--warmup_compiled", type=int, default=8)
    parser.add_argument("--matmul_n", type=int, default=8192)
    parser.add_argument(
        "--budget", type=float, default=330.0, help="skip modes after this"
    )
    parser.add_argument(
        "--deadline",
        type=float,
        default=380.0,
        help="skip a mode likely to end after this many seconds",
    )
    parser.add_argument(
        "--smoke",
        action="store_true",
        help="2-layer 128-wide model, seq 32, batch 4, 2 steps, CPU",
    )
    args = parser.parse_args(argv)
    args.shapes = SHAPES
    args.device = "cuda"
    if args.smoke:
        args.shapes = ((32, 4, 5),)
        args.device = "cpu"
        args.steps, args.warmup = 2, 1
        args.no_compile = True
        args.matmul_n = 256
    return args


def main(argv):
    t0 = time.perf_counter()
    args = parse_args(argv)

    import torch
    import transformers

    print(f"torch {torch.__version__} transformers {transformers.__version__}")
    print(f"imports {time.perf_counter() - t0:.1f} s", flush=True)
    cfg = {
        "vocab_size": 30522,
        "hidden_size": 768,
        "num_hidden_layers": 12,
        "num_attention_heads": 12,
        "intermediate_size": 3072,
    }
    if args.smoke:
        cfg.update(
            hidden_size=128,
            num_hidden_layers=2,
            num_attention_heads=2,
            intermediate_size=512,
        )
    torch.backends.cuda.matmul.allow_tf32 = True
    torch.backends.cudnn.allow_tf32 = True
    cuda = args.device == "cuda"
    report = {
        "date": datetime.datetime.now(datetime.timezone.utc).isoformat(),
        "host": platform.node(),
        "nvidia_smi_query": run_cmd(
            [
                "nvidia-smi",
                "--query-gpu=name,driver_version,memory.total,"
                "clocks.max.sm,power.limit",
                "--format=csv",
            ]
        ),
        "nvidia_smi": run_cmd(["nvidia-smi"]),
        "software": {
            "python": sys.version.split()[0],
            "torch": torch.__version__,
            "torch_cuda": torch.version.cuda,
            "cudnn": torch.backends.cudnn.version() if cuda else None,
            "transformers": transformers.__version__,
        },
        "gpu": None,
        "tensorflow_import": tensorflow_import(),
        "tf32": {
            "torch.backends.cuda.matmul.allow_tf32": (
                torch.backends.cuda.matmul.allow_tf32
            ),
            "torch.backends.cudnn.allow_tf32": torch.backends.cudnn.allow_tf32,
            "float32_matmul_precision": torch.get_float32_matmul_precision(),
        },
        "spec_peak_tflops": SPEC_PEAK,
        "matmul_peak_tflops": {},
        "settings": {
            "model": "transformers.BertForPreTraining(BertConfig())",
            "config": cfg,
            "attn_implementation": "sdpa",
            "optimizer": "torch.optim.AdamW lr 1e-4",
            "device": args.device,
            "smoke": args.smoke,
            "budget_s": args.budget,
            "deadline_s": args.deadline,
        },
        "note": NOTE,
        "results": [],
        "skipped": [],
    }
    if cuda:
        props = torch.cuda.get_device_properties(0)
        report["gpu"] = {
            "name": props.name,
            "multiprocessors": props.multi_processor_count,
            "total_memory_gib": round(props.total_memory / 2**30, 1),
            "capability": f"{props.major}.{props.minor}",
        }
    print(report["nvidia_smi_query"], flush=True)
    print("tensorflow:", report["tensorflow_import"], flush=True)

    def write():
        report["elapsed_s"] = round(time.perf_counter() - t0, 1)
        with open(args.out, "w") as f:
            json.dump(report, f, indent=2)

    peaks = report["matmul_peak_tflops"]
    for key, dtype in (
        ("bf16", torch.bfloat16),
        ("fp16", torch.float16),
        ("tf32", torch.float32),
    ):
        peaks[key] = round(
            matmul_peak(torch, args.device, dtype, args.matmul_n), 1
        )
    peaks["n"] = args.matmul_n
    print("matmul peak TFLOP/s:", peaks, flush=True)
    write()

    durations = {False: [], True: []}
    default_estimate = {False: 20.0, True: 75.0}
    for precision, compiled, shape in mode_list(args):
        name = f"{precision}{'+compile' if compiled else ''} seq {shape[0]}"
        elapsed = time.perf_counter() - t0
        estimate = max(durations[compiled] or [default_estimate[compiled]])
        if elapsed > args.budget or elapsed + estimate > args.deadline:
            report["skipped"].append(
                {
                    "precision": precision,
                    "compile": compiled,
                    "seq": shape[0],
                    "why": f"time: {elapsed:.0f} s elapsed, "
                    f"~{estimate:.0f} s estimated",
                }
            )
            print(f"skip {name} ({elapsed:.0f} s elapsed)", flush=True)
            write()
            continue
        print(f"{name} batch {shape[1]} ...", flush=True)
        mode_start = time.perf_counter()
        seq, batch, preds = shape
        halved_from, result = None, None
        while result is None and batch >= 1:
            if cuda:
                torch.cuda.empty_cache()
                torch.cuda.reset_peak_memory_stats()
            if compiled:
                torch._dynamo.reset()
            oom = False
            try:
                result = run_mode(
                    torch,
                    transformers,
                    args,
                    cfg,
                    precision,
                    compiled,
                    (seq, batch, preds),
                )
            except torch.OutOfMemoryError:
                oom = True
            except Exception as e:
                result = {
                    "precision": precision,
                    "compile": compiled,
                    "seq": seq,
                    "batch": batch,
                    "error": f"{type(e).__name__}: {e}"[:2000],
                    "traceback": traceback.format_exc()[-3000:],
                }
            if oom:
                gc.collect()
                halved_from = halved_from or batch
                batch //= 2
                print(f"  OOM: batch halved to {batch}", flush=True)
        if result is None:
            result = {"precision": precision, "seq": seq, "error": "OOM"}
        if halved_from:
            result["batch_halved_from"] = halved_from
        if "error" not in result:
            add_rates(result, cfg, peaks)
            if cuda:
                result["peak_memory_gib"] = round(
                    torch.cuda.max_memory_allocated() / 2**30, 2
                )
        gc.collect()
        duration = time.perf_counter() - mode_start
        durations[compiled].append(duration)
        result["mode_seconds"] = round(duration, 1)
        report["results"].append(result)
        write()
        if "error" in result:
            print(f"  error: {result['error'][:300]}", flush=True)
        else:
            print(
                f"  {result['sequences_per_sec']} seq/s, "
                f"{result['step_ms']} ms/step, "
                f"{result['tflops_model']} TFLOP/s (model), "
                f"MFU {result.get('mfu_model_spec')} spec / "
                f"{result.get('mfu_model_measured')} measured, "
                f"{result.get('peak_memory_gib')} GiB, "
                f"warmup {result['warmup_seconds']} s, "
                f"loss {result['loss']}",
                flush=True,
            )
    write()
    print(
        "\n| mode | seq | batch | seq/s | TFLOP/s (model) | MFU spec "
        "| MFU measured | peak GiB |"
    )
    print("|---|---|---|---|---|---|---|---|")
    for r in report["results"]:
        mode = r["precision"] + (" + compile" if r.get("compile") else "")
        if "error" in r:
            print(f"| {mode} | {r['seq']} | {r.get('batch')} | error |||||")
            continue
        print(
            f"| {mode} | {r['seq']} | {r['batch']} | "
            f"{r['sequences_per_sec']} | {r['tflops_model']} | "
            f"{r.get('mfu_model_spec')} | {r.get('mfu_model_measured')} | "
            f"{r.get('peak_memory_gib')} |"
        )
    print(f"total {time.perf_counter() - t0:.0f} s", flush=True)


if __name__ == "__main__":
    main(sys.argv[1:])
