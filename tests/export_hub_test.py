"""export_hub.py: TF Hub-style encoder and preprocessing SavedModels.

The converted MiniLM checkpoint (its first 2 layers: conftest.minilm_small_ckpt)
is exported by the script (a subprocess, as
a user runs it) and a tiny pre-training checkpoint (dropout 0.1, masked-LM
head) by the library. One fresh process that imports only TensorFlow,
tensorflow-text and Keras (not this package) loads them with
tf.saved_model.load and keras.layers.TFSMLayer and records what they
compute; the tests compare that with the Python path: BertModel for the
encoder, FullTokenizer and convert_single_example for the preprocessor.
"""

import json
import pathlib

import hub_helpers
import numpy as np
import pytest
import script_runner
import tensorflow as tf
import tolerance

from modeling import checkpoints
from modeling import config as config_lib
from modeling import encoder as encoder_lib
from modeling import errors
from modeling import saved_encoder
from modeling.data import classifier_data
from modeling.tasks import export_hub as export_task
from modeling.text import tokenization

REPO = pathlib.Path(__file__).resolve().parents[1]
SEQ = 32  # The MiniLM preprocessor's default sequence length.
PAIR_SEQ = 16  # bert_pack_inputs(seq_length=...): pairs get truncated.
TEXTS = [
    "The sailors rode the breeze clear of the rocks.",
    "Crème brûlée, naïve café: ACCENTS and CAPITALS!",
    "中文字符 mixed with English words",
    "a very long sentence " * 12,  # Cut to SEQ - 2 tokens.
    "",
]
# Inputs of the tiny encoder: [B, T] ids and [B, P] masked positions.
TINY_IDS = [[2, 5, 6, 7, 3, 0], [2, 8, 8, 9, 3, 10]]
TINY_POSITIONS = [[1, 2], [3, 5]]

_LOADER = """
import json, sys
import numpy as np
import tensorflow as tf
import tensorflow_text  # noqa: F401  (registers the tokenizer ops)
import keras

spec = json.load(open(sys.argv[1]))
arrays, info = {}, {}

def inputs(ids):
    ids = np.asarray(ids, np.int32)
    return {"input_word_ids": ids, "input_mask": (ids > 0).astype(np.int32),
            "input_type_ids": np.zeros_like(ids)}

def keep(prefix, outputs):
    for key, value in outputs.items():
        if isinstance(value, list):
            for i, v in enumerate(value):
                arrays[f"{prefix}/{key}_{i}"] = np.asarray(v)
        else:
            arrays[f"{prefix}/{key}"] = np.asarray(value)

# The MiniLM encoder, and its preprocessor on the texts.
encoder = tf.saved_model.load(spec["encoder"])
pre = tf.saved_model.load(spec["preprocessing"])
texts = tf.constant(spec["texts"])
packed = pre(texts)
keep("pre", packed)
keep("encoder", encoder(packed, training=False))
keep("signature", encoder.signatures["serving_default"](**packed))
layer = keras.layers.TFSMLayer(spec["encoder"], call_endpoint="serving_default")
keep("tfsm", layer(packed))
with open(encoder.vocab_file.asset_path.numpy(), "rb") as f:
    info["vocab"] = f.read().decode("utf-8")
info["do_lower_case"] = bool(encoder.do_lower_case.numpy())
info["trainable"] = sorted(v.name for v in encoder.trainable_variables)
# Raw strings -> the preprocessor -> the encoder, as Keras layers.
text = keras.Input(shape=(), dtype="string")
encoder_inputs = keras.layers.TFSMLayer(
    spec["preprocessing"], call_endpoint="serving_default")(text)
pooled = layer(encoder_inputs)["pooled_output"]
arrays["chain/pooled_output"] = np.asarray(keras.Model(text, pooled)(texts))

# tokenize and bert_pack_inputs.
tokens = pre.tokenize(texts)
info["special_tokens"] = {
    k: int(v) for k, v in pre.tokenize.get_special_tokens_dict().items()
}
info["tokenize"] = tokens.merge_dims(1, 2).to_list()
info["tokenize_ranks"] = [tokens.shape.rank, tokens.ragged_rank]
a, b = pre.tokenize(tf.constant(spec["pairs"][0])), pre.tokenize(
    tf.constant(spec["pairs"][1]))
keep("pairs", pre.bert_pack_inputs([a, b], seq_length=spec["pair_seq"]))
keep("pairs_flat", pre.bert_pack_inputs(
    [a.merge_dims(1, 2), b.merge_dims(1, 2)], seq_length=spec["pair_seq"]))
keep("single_default", pre.bert_pack_inputs([tokens]))
info["too_short"] = []
for segments, length in (([tokens], 2), ([a, b], 4)):
    try:
        pre.bert_pack_inputs(segments, seq_length=length)
        info["too_short"].append("packed")
    except tf.errors.InvalidArgumentError as e:
        info["too_short"].append(e.message)

# The tiny encoder: dropout, the masked-LM subobject, fine-tuning in Keras.
tiny = tf.saved_model.load(spec["tiny"])
x = inputs(spec["tiny_ids"])
keep("tiny", tiny(x, training=False))
keep("tiny_train_1", tiny(x, training=True))
keep("tiny_train_2", tiny(x, training=True))
positions = np.asarray(spec["tiny_positions"], np.int32)
keep("mlm", tiny.mlm(dict(x, masked_lm_positions=positions)))
keep("mlm_signature", tiny.signatures["mlm"](**x, masked_lm_positions=positions))
tfsm = keras.layers.TFSMLayer(spec["tiny"], call_endpoint="serving_default",
                              call_training_endpoint="train", trainable=True)
named = {k: keras.Input((None,), dtype="int32", name=k) for k in x}
logits = keras.layers.Dense(2)(tfsm(named)["pooled_output"])
model = keras.Model(named, logits)
model.compile(optimizer=keras.optimizers.SGD(0.1),
              loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True))
before = [np.array(w.numpy()) for w in tfsm.trainable_weights]
model.train_on_batch(x, np.array([0, 1]))
info["tfsm_trainable"] = len(tfsm.trainable_weights)
info["tfsm_changed"] = sum(
    int(not np.array_equal(b, w.numpy()))
    for b, w in zip(before, tfsm.trainable_weights))
np.savez(sys.argv[2], **arrays)
with open(sys.argv[3], "w") as f:
    json.dump(info, f)
"""


@pytest.fixture(scope="module")
def minilm_export(minilm_small_ckpt, tmp_path_factory):
    """export_hub.py --export_type=both (the default) of the MiniLM folder."""
    path = tmp_path_factory.mktemp("minilm_hub") / "export"
    script_runner.run_script(
        "export_hub.py",
        [
            f"--bert_config_file={minilm_small_ckpt / 'bert_config.json'}",
            f"--init_checkpoint={minilm_small_ckpt}",
            f"--vocab_file={minilm_small_ckpt / 'vocab.txt'}",
            "--do_lower_case=True",
            f"--export_path={path}",
            f"--max_seq_length={SEQ}",
        ],
    )
    return path


@pytest.fixture(scope="module")
def tiny_export(tmp_path_factory):
    """(export with --with_mlm, BertPretrainer) of a tiny checkpoint."""
    folder = tmp_path_factory.mktemp("tiny_hub")
    return hub_helpers.export_tiny_encoder(folder, dropout=0.1, with_mlm=True)


def _golden(request):
    """The golden tokenization lines, or [] when ../shared is absent."""
    try:
        golden_dir = request.getfixturevalue("golden_dir")
    except pytest.skip.Exception:
        return []
    path = golden_dir / "tokenization_uncased.jsonl"
    with open(path, encoding="utf-8") as f:
        return [json.loads(line) for line in f]


@pytest.fixture(scope="module")
def fresh(request, minilm_export, tiny_export, tmp_path_factory):
    """(arrays, info, texts, pairs) computed by the fresh process."""
    folder = tmp_path_factory.mktemp("fresh")
    texts = TEXTS + [g["text"] for g in _golden(request)]
    pairs = [texts[0::2], texts[1::2][: len(texts[0::2])]]
    pairs[1] += [""] * (len(pairs[0]) - len(pairs[1]))
    spec = {
        "encoder": str(minilm_export / "encoder"),
        "preprocessing": str(minilm_export / "preprocessing"),
        "tiny": str(tiny_export[0]),
        "texts": texts,
        "pairs": pairs,
        "pair_seq": PAIR_SEQ,
        "tiny_ids": TINY_IDS,
        "tiny_positions": TINY_POSITIONS,
    }
    (folder / "spec.json").write_text(json.dumps(spec))
    proc = script_runner.python(
        [
            "-c",
            _LOADER,
            str(folder / "spec.json"),
            str(folder / "arrays.npz"),
            str(folder / "info.json"),
        ],
        timeout=900,
    )
    assert proc.returncode == 0, proc.stderr[-4000:]
    arrays = dict(np.load(folder / "arrays.npz"))
    info = json.loads((folder / "info.json").read_text())
    return arrays, info, texts, pairs


@pytest.fixture(scope="module")
def full_tokenizer(minilm_small_ckpt):
    return tokenization.FullTokenizer(
        str(minilm_small_ckpt / "vocab.txt"), True
    )


def _features(tokenizer, text_a, text_b, seq):
    """The original's features of one example (convert_single_example)."""
    example = classifier_data.InputExample("x", text_a, text_b or None, "0")
    f = classifier_data.convert_single_example(
        0, example, ["0"], seq, tokenizer
    )
    return f.input_ids, f.input_mask, f.segment_ids


# === The encoder ===


def test_encoder_outputs_equal_the_python_model(fresh, minilm_small_ckpt):
    arrays, _, _, _ = fresh
    config = config_lib.BertConfig.from_json_file(
        minilm_small_ckpt / "bert_config.json"
    )
    model = encoder_lib.BertModel(config)
    checkpoints.load_weights(model, minilm_small_ckpt)
    features = {
        "input_ids": arrays["pre/input_word_ids"],
        "input_mask": arrays["pre/input_mask"],
        "segment_ids": arrays["pre/input_type_ids"],
    }
    want = model(features, training=False)
    pairs = [
        ("pooled_output", want["pooled_output"]),
        ("default", want["pooled_output"]),
        ("sequence_output", want["sequence_output"]),
    ] + [
        (f"encoder_outputs_{i}", layer)
        for i, layer in enumerate(want["all_encoder_layers"])
    ]
    assert len(pairs) == 3 + config.num_hidden_layers
    for name, value in pairs:
        for source in ("encoder", "signature", "tfsm"):
            tolerance.assert_float32_close(
                arrays[f"{source}/{name}"], value, err_msg=f"{source} {name}"
            )
    # Raw strings through the two SavedModels as Keras layers.
    tolerance.assert_float32_close(
        arrays["chain/pooled_output"], want["pooled_output"]
    )


def test_encoder_attributes(fresh, minilm_small_ckpt):
    _, info, _, _ = fresh
    assert info["vocab"] == (minilm_small_ckpt / "vocab.txt").read_text("utf-8")
    assert info["do_lower_case"] is True
    config = config_lib.BertConfig.from_json_file(
        minilm_small_ckpt / "bert_config.json"
    )
    # The original checkpoint names (what fine-tuning checkpoints keep).
    want = checkpoints.original_variable_shapes(config, False)
    assert info["trainable"] == sorted(f"{name}:0" for name in want)


def test_export_layout_and_config(minilm_export, minilm_small_ckpt):
    assert sorted(p.name for p in minilm_export.iterdir()) == [
        "encoder",
        "preprocessing",
    ]
    config = saved_encoder.exported_config(str(minilm_export / "encoder"))
    want = config_lib.BertConfig.from_json_file(
        minilm_small_ckpt / "bert_config.json"
    )
    assert config.to_dict() == want.to_dict()
    # No temporary folder left beside the export.
    assert [p.name for p in minilm_export.parent.iterdir()] == ["export"]


def test_training_applies_the_configs_dropout(fresh, tiny_export):
    arrays, _, _, _ = fresh
    _, pretrainer = tiny_export
    ids = np.array(TINY_IDS, np.int32)
    features = {
        "input_ids": ids,
        "input_mask": (ids > 0).astype(np.int32),
        "segment_ids": np.zeros_like(ids),
    }
    want = pretrainer.bert(features, training=False)["sequence_output"]
    tolerance.assert_float32_close(arrays["tiny/sequence_output"], want)
    train_1 = arrays["tiny_train_1/sequence_output"]
    train_2 = arrays["tiny_train_2/sequence_output"]
    # Dropout 0.1 moves values by far more than rounding, and each call
    # draws new masks.
    scale = tolerance.magnitude(want)
    assert np.max(np.abs(train_1 - want)) > 0.01 * scale
    assert np.max(np.abs(train_1 - train_2)) > 0.01 * scale


def test_mlm_logits_are_the_pretraining_heads(fresh, tiny_export):
    arrays, _, _, _ = fresh
    _, pretrainer = tiny_export
    ids = np.array(TINY_IDS, np.int32)
    features = {
        "input_ids": ids,
        "input_mask": (ids > 0).astype(np.int32),
        "segment_ids": np.zeros_like(ids),
        "masked_lm_positions": np.array(TINY_POSITIONS, np.int32),
    }
    log_probs = pretrainer(features, training=False)["masked_lm_log_probs"]
    b, p = ids.shape[0], len(TINY_POSITIONS[0])
    for source in ("mlm", "mlm_signature"):
        logits = arrays[f"{source}/mlm_logits"]
        assert logits.shape == (b, p, pretrainer.config.vocab_size)
        tolerance.assert_float32_close(
            tf.nn.log_softmax(logits.reshape(b * p, -1)), log_probs
        )
    tolerance.assert_float32_close(
        arrays["mlm/pooled_output"], arrays["tiny/pooled_output"]
    )


def test_tfsm_layer_fine_tunes_every_variable(fresh, tiny_export):
    _, info, _, _ = fresh
    _, pretrainer = tiny_export
    want = len(pretrainer.bert.trainable_weights)
    assert info["tfsm_trainable"] == info["tfsm_changed"] == want


# === The preprocessor ===


def test_preprocessor_gives_tf_hubs_special_tokens(fresh, full_tokenizer):
    """preprocessor.tokenize.get_special_tokens_dict(), as TF Hub's BERT
    preprocessors have it (code that masks or packs by hand calls it)."""
    _, info, _, _ = fresh
    ids = full_tokenizer.convert_tokens_to_ids
    assert info["special_tokens"] == {
        "vocab_size": len(full_tokenizer.vocab),
        "start_of_sequence_id": ids(["[CLS]"])[0],
        "end_of_segment_id": ids(["[SEP]"])[0],
        "padding_id": ids(["[PAD]"])[0],
        "mask_id": ids(["[MASK]"])[0],
    }


def test_preprocessor_refuses_a_seq_length_too_short_to_pack(fresh):
    # Rows without their [SEP] (seq_length 1), or [CLS][SEP][SEP] without a
    # token of the pair (3), came back.
    _, info, _, _ = fresh
    want = [
        "bert_pack_inputs: seq_length must be at least 3 for 1 segment(s)",
        "bert_pack_inputs: seq_length must be at least 5 for 2 segment(s)",
    ]
    assert len(info["too_short"]) == 2
    for message, expected in zip(info["too_short"], want):
        assert expected in message, message


def test_preprocessor_ids_are_full_tokenizers(fresh, full_tokenizer):
    arrays, info, texts, pairs = fresh
    for i, text in enumerate(texts):
        ids = full_tokenizer.convert_tokens_to_ids(
            full_tokenizer.tokenize(text)
        )
        assert info["tokenize"][i] == ids, text
        want = _features(full_tokenizer, text, None, SEQ)
        got = [
            arrays[f"pre/{k}"][i].tolist()
            for k in saved_encoder.FEATURES_OF_INPUTS
        ]
        assert got == list(want), text
        got = [
            arrays[f"single_default/{k}"][i].tolist()
            for k in saved_encoder.FEATURES_OF_INPUTS
        ]
        assert got == list(want), text
    # [batch, words, pieces] and [batch, tokens] segments alike.
    assert info["tokenize_ranks"] == [3, 2]
    for i, (a, b) in enumerate(zip(*pairs)):
        want = list(_features(full_tokenizer, a, b, PAIR_SEQ))
        for source in ("pairs", "pairs_flat"):
            got = [
                arrays[f"{source}/{k}"][i].tolist()
                for k in saved_encoder.FEATURES_OF_INPUTS
            ]
            assert got == want, (source, a, b)


def test_preprocessor_on_the_golden_lines(fresh, golden_dir):
    """The original's FullTokenizer ids of every golden line."""
    _, info, texts, _ = fresh
    path = golden_dir / "tokenization_uncased.jsonl"
    golden = [json.loads(line) for line in path.open(encoding="utf-8")]
    assert len(golden) == 55
    offset = len(TEXTS)
    assert texts[offset:] == [g["text"] for g in golden]
    for i, g in enumerate(golden):
        assert info["tokenize"][offset + i] == g["ids"], g["text"]


# === Settings and failures ===


def test_encoder_export_needs_the_checkpoint(tmp_path):
    settings = export_task.Settings(
        export_path=str(tmp_path / "out"),
        vocab_file=str(tmp_path / "vocab.txt"),
        export_type="encoder",
    )
    with pytest.raises(errors.UserError, match="--bert_config_file and --"):
        export_task.run(settings)


def test_with_mlm_needs_a_masked_lm_head(minilm_small_ckpt, tmp_path):
    settings = export_task.Settings(
        export_path=str(tmp_path / "out"),
        vocab_file=str(minilm_small_ckpt / "vocab.txt"),
        bert_config_file=str(minilm_small_ckpt / "bert_config.json"),
        init_checkpoint=str(minilm_small_ckpt),
        export_type="encoder",
        with_mlm=True,
    )
    with pytest.raises(errors.UserError, match="no masked-LM head"):
        export_task.run(settings)
    assert list(tmp_path.iterdir()) == []  # Nothing published or left.


def test_an_export_replaces_the_old_one(tmp_path):
    """An earlier export is replaced; a file a user put beside it is not
    deleted: the export is refused, the folder left as it was."""
    hub_helpers.tiny_checkpoint(tmp_path)
    out = tmp_path / "out"
    settings = export_task.Settings(
        export_path=str(out),
        vocab_file=str(tmp_path / "vocab.txt"),
        export_type="preprocessing",
        max_seq_length=8,
    )
    # An earlier export's record and a file of it (one real export here:
    # user_folders_test.py replaces real exports).
    (out / "assets.extra").mkdir(parents=True)
    (out / "assets.extra" / "bert_hub_export.json").write_text("{}")
    (out / "saved_model.pb").write_text("old")
    assert export_task.run(settings) == {"preprocessing": str(out)}
    assert (out / "saved_model.pb").read_bytes() != b"old"
    assert (out / "assets.extra" / "bert_hub_export.json").read_text() == (
        '{"export_type": "preprocessing"}\n'
    )
    (out / "stale.txt").write_text("old")
    before = script_runner.folder_digests(out)
    with pytest.raises(
        errors.UserError,
        match=f"--export_path={out} holds files that no export writes "
        r"\(stale.txt\)",
    ):
        export_task.run(settings)
    assert script_runner.folder_digests(out) == before
    assert not [p for p in tmp_path.iterdir() if ".tmp-" in p.name]
    # A preprocessing model is not an encoder.
    with pytest.raises(errors.UserError, match="not an encoder"):
        saved_encoder.load_encoder(out)


@pytest.mark.parametrize("pad_to_longest", [False, True])
def test_an_empty_batch_through_preprocessor_and_encoder(
    minilm_export, tiny_export, pad_to_longest
):
    """No sentence at all: features and encoder outputs of batch 0."""
    from modeling.export import encoder as encoder_export

    pre = encoder_export.HubPreprocessor(
        str(minilm_export / "preprocessing" / "assets" / "vocab.txt"),
        True,
        SEQ,
        pad_to_longest=pad_to_longest,
    )
    features = pre.__call__(tf.zeros([0], tf.string))
    for name, value in features.items():
        assert value.shape[0] == 0 and value.shape[1] >= 1, name
    encoder = tf.saved_model.load(str(tiny_export[0]))
    outputs = encoder(
        {
            "input_word_ids": tf.zeros([0, 8], tf.int32),
            "input_mask": tf.zeros([0, 8], tf.int32),
            "input_type_ids": tf.zeros([0, 8], tf.int32),
        },
        training=False,
    )
    assert outputs["pooled_output"].shape[0] == 0
    assert outputs["sequence_output"].shape[:2] == (0, 8)
