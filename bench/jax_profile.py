"""Where a JAX training step of bench/pretraining.py spends its time: the
device kernels of a few traced steps, summed by name, largest first.

    KERAS_BACKEND=jax python bench/jax_profile.py --mode=mixed_bfloat16:128:256

Builds the step as `bench/pretraining.py --backend=jax` does, runs
`--warmup` steps, traces `--steps` with `jax.profiler` (a Perfetto JSON
trace, read back here: no TensorBoard needed) and prints one JSON object:
the step time, and the top `--top` kernels with their share of the summed
kernel time. `--variants` times the same mode with named changes to the
config or to modeling.layers' switches (comma-separated names of VARIANTS:
baseline, no_dropout, no_attention_dropout, unfused_attention,
keras_dropout, flash_attention and its Triton settings) for comparison.
"""

import argparse
import collections
import glob
import gzip
import importlib
import json
import os
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import pretraining  # noqa: E402  (bench/pretraining.py, beside this file)

VARIANTS = {
    # The unchanged mode timed as the variants are (10 steps after the
    # warmup, a fresh build), to compare them with.
    "baseline": {},
    "no_dropout": {
        "hidden_dropout_prob": 0.0,
        "attention_probs_dropout_prob": 0.0,
    },
    # With the attention dropout off, a JAX step on a GPU attends through
    # ops.dot_product_attention (layers.FUSED_ATTENTION);
    # "unfused_attention" times the explicit path instead.
    "no_attention_dropout": {"attention_probs_dropout_prob": 0.0},
    # Names in capitals: modeling.layers' switches.
    # keras's dropout masks (a 32-bit uniform float a unit) instead of the
    # half-word ones (layers.HALF_WORD_DROPOUT).
    "keras_dropout": {"_HALF_WORD_DROPOUT": False},
    # The attention and its dropout in Pallas kernels
    # (layers.FLASH_ATTENTION, modeling/flash_attention.py).
    "flash_attention": {"_FLASH_ATTENTION": True},
    # Its Triton settings ("module.NAME": modeling.module's NAME).
    "flash_attention_w8": {
        "_FLASH_ATTENTION": True,
        "flash_attention.NUM_WARPS": 8,
    },
    "flash_attention_b128_w8": {
        "_FLASH_ATTENTION": True,
        "flash_attention.BLOCK": 128,
        "flash_attention.NUM_WARPS": 8,
    },
    "unfused_attention": {
        "attention_probs_dropout_prob": 0.0,
        "_FUSED_ATTENTION": False,
    },
}


def time_steps(step, state, placed, steps):
    import jax

    start = time.perf_counter()
    for _ in range(steps):
        state, logs = step._step(state, placed)
    jax.block_until_ready(logs)
    return state, (time.perf_counter() - start) / steps


def _thread_class(name):
    for key in ("XLA Ops", "XLA Modules", "Stream"):
        if key in name:
            return key
    return name


def kernel_table(trace_dir, top, include_host=False):
    """The device events of the Perfetto trace, summed by name per kind of
    track: "XLA Ops" (HLO ops and fusions), "Stream" (CUDA kernels and
    copies), "XLA Modules" (whole programs); top `top` of each."""
    files = glob.glob(
        os.path.join(trace_dir, "**", "*perfetto_trace.json.gz"),
        recursive=True,
    )
    if not files:
        return {"error": f"no perfetto trace under {trace_dir}"}
    with gzip.open(files[0], "rt") as f:
        trace = json.load(f)
    events = trace["traceEvents"] if isinstance(trace, dict) else trace
    processes, threads = {}, {}
    for e in events:
        if e.get("ph") != "M":
            continue
        if e.get("name") == "process_name":
            processes[e["pid"]] = e.get("args", {}).get("name", "")
        elif e.get("name") == "thread_name":
            threads[(e["pid"], e.get("tid"))] = e.get("args", {}).get(
                "name", ""
            )
    device_pids = {
        pid
        for pid, name in processes.items()
        if include_host or ("/device:" in name and "CPU" not in name.upper())
    }
    totals = collections.defaultdict(collections.Counter)
    counts = collections.Counter()
    for e in events:
        if e.get("ph") == "X" and e.get("pid") in device_pids:
            track = _thread_class(threads.get((e["pid"], e.get("tid")), ""))
            totals[track][e.get("name", "?")] += float(e.get("dur", 0))
            counts[track] += 1
    out = {"device_processes": sorted(processes[p] for p in device_pids)}
    for track, counter in totals.items():
        total = sum(counter.values())
        out[track] = {
            "us_total": round(total, 1),
            "events": counts[track],
            "top": [
                [name[:100], round(us, 1), round(us / total, 4)]
                for name, us in counter.most_common(top)
            ],
        }
    return out


def main(argv):
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--mode", default="mixed_bfloat16:128:256")
    parser.add_argument("--model", default="base")
    parser.add_argument("--preds", type=int, default=20)
    parser.add_argument("--accumulation", type=int, default=1)
    parser.add_argument("--config_overrides", default="")
    parser.add_argument("--warmup", type=int, default=2)
    parser.add_argument("--steps", type=int, default=3)
    parser.add_argument("--top", type=int, default=30)
    parser.add_argument("--variants", default="")
    parser.add_argument("--out", default="")
    parser.add_argument(
        "--hlo_out", default="", help="write the compiled HLO text (.gz)"
    )
    parser.add_argument(
        "--include_host", action="store_true", help="CPU tracks too (tests)"
    )
    args = parser.parse_args(argv)
    import jax

    precision, seq, batch = args.mode.split(":")
    step, state, placed, _, _ = pretraining.build_jax_step(
        args, precision, int(seq), int(batch)
    )
    if args.hlo_out:
        # The optimized program: what the trace's fusion names stand for.
        text = step._step.lower(state, placed).compile().as_text()
        with gzip.open(args.hlo_out, "wt") as f:
            f.write(text)
    state, _ = time_steps(step, state, placed, args.warmup)
    state, step_s = time_steps(step, state, placed, 10)
    trace_dir = tempfile.mkdtemp(prefix="jax_trace_")
    with jax.profiler.trace(trace_dir, create_perfetto_trace=True):
        state, _ = time_steps(step, state, placed, args.steps)
    report = {
        "mode": args.mode,
        "device": jax.devices()[0].device_kind,
        "step_seconds": round(step_s, 5),
        "kernels_per_traced_steps": args.steps,
        **kernel_table(trace_dir, args.top, args.include_host),
    }
    del step, state, placed
    # A name given twice is timed twice (alternating rounds): a list.
    rounds = {}
    for name in filter(None, args.variants.split(",")):
        overrides = dict(VARIANTS[name])
        # (module, name) -> value: "_NAME" is modeling.layers' NAME,
        # "module.NAME" modeling.module's.
        switches = {}
        for key in list(overrides):
            if key[0] == "_":
                switches[("layers", key[1:])] = overrides.pop(key)
            elif "." in key:
                switches[tuple(key.split("."))] = overrides.pop(key)
        modules = {
            m: importlib.import_module(f"modeling.{m}") for m, _ in switches
        }
        saved = {(m, k): getattr(modules[m], k) for m, k in switches}
        for (m, k), value in switches.items():
            setattr(modules[m], k, value)
        try:
            v_step, v_state, v_placed, _, _ = pretraining.build_jax_step(
                args, precision, int(seq), int(batch), overrides
            )
            v_state, _ = time_steps(v_step, v_state, v_placed, args.warmup)
            _, v_s = time_steps(v_step, v_state, v_placed, 10)
            result = round(v_s, 5)
            del v_step, v_state, v_placed
        except Exception as e:  # one variant failing must not lose the rest
            result = f"{type(e).__name__}: {str(e)[-400:]}"
        finally:
            for (m, k), value in saved.items():
                setattr(modules[m], k, value)
        rounds.setdefault(name, []).append(result)
        print(name, result, flush=True)
    report["variants"] = {
        name: times if len(times) > 1 else times[0]
        for name, times in rounds.items()
    }
    text = json.dumps(report, indent=1)
    if args.out:
        with open(args.out, "w") as f:
            f.write(text + "\n")
    print(text)


if __name__ == "__main__":
    main(sys.argv[1:])
