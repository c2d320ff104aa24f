"""run_embeddings --do_search's top-k: time and memory against a full sort.

Each system runs in its own process on the same random unit vectors
(--queries x --corpus rows of --dim, float32, seed 0), one at a time:
    top_k       embedding_search.top_k: corpus chunks of 65,536 rows, at
                most SCORES_PER_BLOCK scores at once, each row's best from
                a partition;
    full_sort   every score of a chunk sorted (np.lexsort), what
                embedding_search.top_k did before 2026-11-27;
    st_semantic_search  sentence-transformers' util.semantic_search (torch
                topk over chunks of queries and corpus), where it installs
                (the peers extra); else skipped, saying so.
Peak memory is the process tree's (bench/memory.py) less the process's
peak before the search (the inputs); the top-k indexes of the systems are
compared (ties aside, they agree).

    .venv/bin/python bench/search.py [--queries=2048] [--corpus=65536]
"""

import argparse
import importlib.util
import json
import pathlib
import sys
import time

import machine
import memory
import numpy as np

SYSTEMS = ("top_k", "full_sort", "st_semantic_search")
K = 10


def _inputs(args):
    rng = np.random.default_rng(0)
    queries = rng.standard_normal((args.queries, args.dim), np.float32)
    corpus = rng.standard_normal((args.corpus, args.dim), np.float32)
    queries /= np.linalg.norm(queries, axis=1, keepdims=True)
    corpus /= np.linalg.norm(corpus, axis=1, keepdims=True)
    return queries, corpus


def _full_sort(queries, corpus, k, chunk_rows=65536):
    best_scores = np.zeros((len(queries), 0), np.float32)
    best_index = np.zeros((len(queries), 0), np.int64)
    for start in range(0, len(corpus), chunk_rows):
        block = corpus[start : start + chunk_rows]
        scores = np.concatenate([best_scores, queries @ block.T], axis=1)
        index = np.concatenate(
            [
                best_index,
                np.broadcast_to(
                    np.arange(start, start + len(block)),
                    (len(queries), len(block)),
                ),
            ],
            axis=1,
        )
        order = np.lexsort((index, -scores), axis=1)[:, :k]
        best_scores = np.take_along_axis(scores, order, axis=1)
        best_index = np.take_along_axis(index, order, axis=1)
    return best_index


def _semantic_search(queries, corpus, k):
    import torch
    from sentence_transformers import util

    hits = util.semantic_search(
        torch.from_numpy(queries), torch.from_numpy(corpus), top_k=k
    )
    return np.asarray([[h["corpus_id"] for h in row] for row in hits])


def worker(args):
    queries, corpus = _inputs(args)
    # Each system's imports before the clock and the memory baseline.
    if args.system == "top_k":
        from modeling.tasks import embedding_search
    elif args.system != "full_sort":
        import torch  # noqa: F401
        from sentence_transformers import util  # noqa: F401
    before = memory.own_hwm_mb()
    start = time.perf_counter()
    if args.system == "top_k":
        index = embedding_search.top_k(queries, corpus, K)[0]
    elif args.system == "full_sort":
        index = _full_sort(queries, corpus, K)
    else:
        index = _semantic_search(queries, corpus, K)
    seconds = time.perf_counter() - start
    np.save(pathlib.Path(args.output_root) / f"{args.system}.npy", index)
    memory.report({"seconds": round(seconds, 3), "inputs_mb": before})


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--systems", default=",".join(SYSTEMS))
    parser.add_argument("--queries", type=int, default=2048)
    parser.add_argument("--corpus", type=int, default=65536)
    parser.add_argument("--dim", type=int, default=384)
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--output_root", default="/tmp/bench_search")
    parser.add_argument("--worker", action="store_true")
    parser.add_argument("--system")
    args = parser.parse_args()
    if args.worker:
        worker(args)
        return
    root = pathlib.Path(args.output_root)
    root.mkdir(parents=True, exist_ok=True)
    records = []
    for system in args.systems.split(","):
        if system == "st_semantic_search" and not all(
            importlib.util.find_spec(m)
            for m in ("torch", "sentence_transformers")
        ):
            print(f"skipping {system}: sentence-transformers not installed")
            continue
        command = [
            sys.executable,
            str(pathlib.Path(__file__).resolve()),
            "--worker",
            f"--system={system}",
            *(f"--{f}={getattr(args, f)}" for f in ("queries", "corpus")),
            f"--dim={args.dim}",
            f"--output_root={root}",
        ]
        record, peak = memory.measure_worker(command, args.threads)
        record["system"] = system
        if "error" not in record:
            record["search_mb"] = round(peak - record.pop("inputs_mb"), 1)
            ours = np.load(root / "top_k.npy") if system != "top_k" else None
            if ours is not None:
                mine = np.load(root / f"{system}.npy")
                record["same_top_k_as_top_k"] = float(np.mean(ours == mine))
        records.append(record)
        print(json.dumps(record), flush=True)
    results = {
        "machine": machine.describe(),
        "date": time.strftime("%F"),
        "shape": [args.queries, args.corpus, args.dim],
        "records": records,
    }
    (root / "results.json").write_text(json.dumps(results, indent=2) + "\n")


if __name__ == "__main__":
    main()
