"""extract_features.py end to end on the converted MiniLM model."""

import json
import pathlib

import numpy as np
import pytest
import script_runner
import tolerance
from constants import TINY_VOCAB

from modeling import checkpoints
from modeling import config as config_lib
from modeling import convert
from modeling import encoder
from modeling.tasks import extract
from modeling.text import tokenization

REPO_ROOT = pathlib.Path(__file__).resolve().parents[1]
LINES = [
    "The dog is hairy.",
    "Is this jacksonville? ||| No it is not.",
    "",
]


@pytest.fixture(scope="module")
def minilm_original(minilm_dir, tmp_path_factory):
    out = tmp_path_factory.mktemp("minilm_original")
    convert.hf_to_original(minilm_dir, out)
    return out


def _script(model_dir, input_file, output_file, *args, env=None):
    """Runs extract_features.py in a subprocess: its flags (vocab_file,
    max_seq_length, ...) are also defined by the other scripts, which must
    not share a process with it."""
    return script_runner.python(
        [
            str(REPO_ROOT / "extract_features.py"),
            f"--input_file={input_file}",
            f"--output_file={output_file}",
            f"--vocab_file={model_dir / 'vocab.txt'}",
            f"--bert_config_file={model_dir / 'bert_config.json'}",
            f"--init_checkpoint={model_dir / 'bert_model.ckpt'}",
            *args,
        ],
        timeout=300,
        env=env,
    )


def _run_script(model_dir, tmp_path, *args, env=None):
    input_file = tmp_path / "input.txt"
    input_file.write_text("\n".join(LINES) + "\n", encoding="utf-8")
    output_file = tmp_path / "output.jsonl"
    proc = _script(model_dir, input_file, output_file, *args, env=env)
    assert proc.returncode == 0, proc.stderr[-3000:]
    return [json.loads(line) for line in output_file.read_text().splitlines()]


def test_main_writes_the_original_jsonl(minilm_original, tmp_path):
    records = _run_script(
        minilm_original,
        tmp_path,
        "--layers=-1,0",
        "--max_seq_length=16",
        "--batch_size=2",
    )
    assert [r["linex_index"] for r in records] == [0, 1, 2]
    assert list(records[0]) == ["linex_index", "features"]
    tokens = [[f["token"] for f in r["features"]] for r in records]
    assert tokens[0] == ["[CLS]", "the", "dog", "is", "hairy", ".", "[SEP]"]
    assert tokens[1][0] == "[CLS]" and tokens[1].count("[SEP]") == 2
    assert tokens[2] == ["[CLS]", "[SEP]"]  # a blank line is an example
    first = records[0]["features"][1]
    assert list(first) == ["token", "layers"]
    assert [layer["index"] for layer in first["layers"]] == [-1, 0]
    assert len(first["layers"][0]["values"]) == 384

    # The values are the encoder's layers, rounded to 6 decimals.
    config = config_lib.BertConfig.from_json_file(
        str(minilm_original / "bert_config.json")
    )
    model = encoder.BertModel(config)
    model.build()
    checkpoints.load_weights(model, minilm_original)
    tokenizer = tokenization.FullTokenizer(
        str(minilm_original / "vocab.txt"), do_lower_case=True
    )
    examples = extract.read_examples(str(tmp_path / "input.txt"))
    features = extract.convert_examples_to_features(examples, 16, tokenizer)
    assert [f.tokens for f in features] == tokens
    outputs = model(
        {
            "input_ids": np.array([f.input_ids for f in features]),
            "input_mask": np.array([f.input_mask for f in features]),
            "segment_ids": np.array([f.input_type_ids for f in features]),
        }
    )
    for record, feature in zip(records, features):
        n = len(feature.tokens)
        for j, layer_index in enumerate([-1, 0]):
            got = np.array(
                [f["layers"][j]["values"] for f in record["features"]]
            )
            want = np.asarray(outputs["all_encoder_layers"][layer_index])
            want = want[feature.unique_id, :n]
            # The script ran batches of 2, this call a batch of 3: other
            # kernels, other float32 sums. 6-decimal rounding (5e-7) plus
            # float32 accumulation relative to the layer's magnitude.
            tolerance.assert_float32_close(got, want, rounding=5e-7)
            assert np.all(np.round(got, 6) == got)
    assert not [p for p in tmp_path.iterdir() if ".tmp" in p.name]


def test_jax_backend_writes_the_same_lines(minilm_original, tmp_path):
    """KERAS_BACKEND=jax: the same tokens and, within 6-decimal rounding
    and float32 accumulation, the same values as TensorFlow's."""
    pytest.importorskip("jax", reason="jax is not installed (the test extra)")
    args = ("--layers=-1,0", "--max_seq_length=16", "--batch_size=2")
    (tmp_path / "tf").mkdir()
    want = _run_script(minilm_original, tmp_path / "tf", *args)
    (tmp_path / "jax").mkdir()
    got = _run_script(
        minilm_original, tmp_path / "jax", *args, env={"KERAS_BACKEND": "jax"}
    )
    assert [[f["token"] for f in r["features"]] for r in got] == [
        [f["token"] for f in r["features"]] for r in want
    ]
    for mine, theirs in zip(got, want, strict=True):
        for a, b in zip(mine["features"], theirs["features"], strict=True):
            for x, y in zip(a["layers"], b["layers"], strict=True):
                assert x["index"] == y["index"]
                tolerance.assert_float32_close(
                    x["values"], y["values"], rounding=1e-6
                )


def test_truncation_as_the_original(uncased_vocab_file):
    tokenizer = tokenization.FullTokenizer(uncased_vocab_file, True)
    pair = extract.InputExample(0, "a b c d e f", "g h i")
    feature = extract.convert_example(pair, 10, tokenizer)
    # 10 - 3 = 7 tokens: the longer side (A) is popped until it ties, then
    # B is popped on the tie.
    assert feature.tokens == [
        "[CLS]",
        "a",
        "b",
        "c",
        "d",
        "[SEP]",
        "g",
        "h",
        "i",
        "[SEP]",
    ]
    assert feature.input_type_ids == [0] * 6 + [1] * 4
    single = extract.InputExample(1, "a b c d e f g h i j k")
    feature = extract.convert_example(single, 6, tokenizer)
    assert feature.tokens == ["[CLS]", "a", "b", "c", "d", "[SEP]"]
    assert feature.input_mask == [1] * 6
    short = extract.convert_example(extract.InputExample(2, "a"), 6, tokenizer)
    assert short.input_ids[3:] == [0, 0, 0] and short.input_mask[3:] == [0] * 3


def test_pair_regex_and_bad_layers(tmp_path):
    path = tmp_path / "in.txt"
    path.write_text("  x ||| y  \nno pair|||here\n", encoding="utf-8")
    examples = extract.read_examples(str(path))
    assert (examples[0].text_a, examples[0].text_b) == ("x", "y")
    assert (examples[1].text_a, examples[1].text_b) == ("no pair|||here", None)
    assert extract.parse_layers("-1,-2,0", 6) == [-1, -2, 0]
    with pytest.raises(
        ValueError, match="index -7 is out of range .* 6 layers"
    ):
        extract.parse_layers("-1,-7", 6)
    with pytest.raises(ValueError, match="comma-separated integers"):
        extract.parse_layers("last", 6)


def test_an_output_file_that_is_the_input_is_refused(tmp_path):
    """The input survives: a one-line error before the model is built."""
    text = tmp_path / "input.txt"
    text.write_text("The dog is hairy.\n", encoding="utf-8")
    proc = _script(tmp_path, text, text)
    assert proc.returncode == 1, proc.stderr[-2000:]
    assert "also --input_file's file" in proc.stderr
    assert "Traceback" not in proc.stderr
    assert text.read_text(encoding="utf-8") == "The dog is hairy.\n"


@pytest.mark.parametrize(
    "case", ["output_folder", "no_folder", "input_folder", "no_input"]
)
def test_bad_paths_are_refused_before_the_model_is_built(tmp_path, case):
    """One line naming the flag, before any work (the output was checked at
    the rename that published it, after the whole extraction)."""
    text = tmp_path / "input.txt"
    text.write_text("The dog is hairy.\n", encoding="utf-8")
    (tmp_path / "folder").mkdir()
    input_file, output_file, message = {
        "output_folder": (text, tmp_path / "folder", "is a folder, not a file"),
        "no_folder": (text, tmp_path / "no" / "o.jsonl", "does not exist"),
        "input_folder": (tmp_path / "folder", tmp_path / "o.jsonl", "a folder"),
        "no_input": (
            tmp_path / "nope.txt",
            tmp_path / "o.jsonl",
            "does not exist",
        ),
    }[case]
    # No model at all: the checks come first.
    proc = _script(tmp_path, input_file, output_file)
    assert proc.returncode == 1, proc.stderr[-2000:]
    last = proc.stderr.strip().splitlines()[-1]
    assert last.startswith("error: ") and message in last, last
    assert (
        "--input_file"
        if case in ("input_folder", "no_input")
        else "--output_file"
    ) in last
    assert not (tmp_path / "o.jsonl").exists()


def test_extraction_holds_a_bounded_window_of_outputs(
    tiny_config_dict, tmp_path, monkeypatch
):
    """Rows computed ahead of their turn wait for it; a layer output is
    about 3 KB a token at BERT-base's width, so the sorting window spans
    WINDOW_BYTES of batches (it held 64 batches, 3.2 GB at batch 32 and
    seq 128, where the original held one). Here: a long first line, then
    short ones, batch 4, a window of 2 batches."""
    from modeling.training import predictor

    config = config_lib.BertConfig.from_dict(tiny_config_dict)
    model = encoder.BertModel(config)
    model.build()
    vocab = tmp_path / "vocab.txt"
    vocab.write_text("\n".join(TINY_VOCAB) + "\n")
    tokenizer = tokenization.FullTokenizer(str(vocab), True)
    lines = ["the cat " * 30] + ["dog"] * 199
    examples = [extract.InputExample(i, t) for i, t in enumerate(lines)]
    features = extract.convert_examples_to_features(examples, 64, tokenizer)
    batch_bytes = 4 * 64 * config.hidden_size * 2 * 4
    monkeypatch.setattr(extract, "WINDOW_BYTES", 2 * batch_bytes)
    ahead = []
    in_order = predictor.in_input_order

    def counting(rows):
        received = []

        def tap():
            for order, item in rows:
                received.append(order)
                yield order, item

        for given, item in enumerate(in_order(tap()), 1):
            ahead.append(len(received) - given)
            yield item

    monkeypatch.setattr(predictor, "in_input_order", counting)
    out = list(extract.extract_layers(model, features, [-1, -2], 4))
    assert [f.unique_id for f, _ in out] == list(range(200))
    assert 0 < max(ahead) <= 2 * 4
