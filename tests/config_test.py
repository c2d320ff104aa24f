"""Tests of modeling.config.BertConfig."""

import json
import logging

import pytest

from modeling import config as config_lib

CHINESE_EXTRAS = {
    "directionality": "bidi",
    "pooler_fc_size": 768,
    "pooler_num_attention_heads": 12,
    "pooler_num_fc_layers": 3,
    "pooler_size_per_head": 128,
    "pooler_type": "first_token_transform",
}


def test_defaults_are_the_originals():
    config = config_lib.BertConfig(vocab_size=30522)
    assert config.to_dict() == {
        "vocab_size": 30522,
        "hidden_size": 768,
        "num_hidden_layers": 12,
        "num_attention_heads": 12,
        "intermediate_size": 3072,
        "hidden_act": "gelu",
        "hidden_dropout_prob": 0.1,
        "attention_probs_dropout_prob": 0.1,
        "max_position_embeddings": 512,
        "type_vocab_size": 16,
        "initializer_range": 0.02,
    }


def test_reads_golden_config_and_writes_original_format(golden_dir, tmp_path):
    path = golden_dir / "tiny_init" / "bert_config.json"
    config = config_lib.BertConfig.from_json_file(str(path))
    assert config.hidden_size == 32 and config.type_vocab_size == 2
    text = config.to_json_string()
    assert text.endswith("}\n")
    assert json.loads(text) == json.loads(path.read_text())
    # sort_keys=True, indent=2, as modeling.BertConfig.to_json_string.
    assert text == json.dumps(json.loads(text), indent=2, sort_keys=True) + "\n"
    out = tmp_path / "bert_config.json"
    config.to_json_file(str(out))
    assert out.read_text() == text
    assert [p.name for p in tmp_path.iterdir()] == ["bert_config.json"]


def test_chinese_extra_keys_are_kept_silently(tiny_config_dict, caplog):
    data = dict(tiny_config_dict, **CHINESE_EXTRAS)
    with caplog.at_level(logging.WARNING):
        config = config_lib.BertConfig.from_dict(data)
    assert not caplog.records
    assert config.extra == CHINESE_EXTRAS
    assert json.loads(config.to_json_string()) == data


def test_unknown_key_warns_and_is_kept(tiny_config_dict, caplog):
    data = dict(tiny_config_dict, num_hidden_layer=3)
    with caplog.at_level(logging.WARNING):
        config = config_lib.BertConfig.from_dict(data)
    assert "num_hidden_layer" in caplog.text
    assert config.to_dict()["num_hidden_layer"] == 3
    assert config.num_hidden_layers == 2


@pytest.mark.parametrize(
    "change, message",
    [
        ({"hidden_size": 30}, "hidden_size (30) is not a multiple of"),
        ({"num_hidden_layers": 0}, "num_hidden_layers must be positive"),
        ({"vocab_size": -5}, "vocab_size must be positive"),
        ({"hidden_act": "swish"}, "hidden_act 'swish' is not supported"),
        ({"hidden_dropout_prob": 1.5}, "hidden_dropout_prob must be in"),
        ({"initializer_range": 0}, "initializer_range must be positive"),
    ],
)
def test_validation_names_the_field(tiny_config_dict, change, message):
    with pytest.raises(ValueError, match="BertConfig") as info:
        config_lib.BertConfig.from_dict(dict(tiny_config_dict, **change))
    assert message in str(info.value)


def test_non_integer_size_is_a_type_error(tiny_config_dict):
    with pytest.raises(TypeError, match="intermediate_size must be an int"):
        config_lib.BertConfig.from_dict(
            dict(tiny_config_dict, intermediate_size="37")
        )


def test_activation_names_are_case_insensitive(tiny_config_dict):
    config = config_lib.BertConfig.from_dict(
        dict(tiny_config_dict, hidden_act="ReLU")
    )
    assert config.hidden_act == "ReLU"


def test_bad_files_name_the_file(tmp_path, tiny_config_dict):
    missing = tmp_path / "nope.json"
    with pytest.raises(FileNotFoundError, match="nope.json does not exist"):
        config_lib.BertConfig.from_json_file(str(missing))
    broken = tmp_path / "broken.json"
    broken.write_text("{not json")
    with pytest.raises(ValueError, match="broken.json is not valid JSON"):
        config_lib.BertConfig.from_json_file(str(broken))
    no_vocab = tmp_path / "no_vocab.json"
    data = dict(tiny_config_dict)
    del data["vocab_size"]
    no_vocab.write_text(json.dumps(data))
    with pytest.raises(ValueError, match="no_vocab.json: .*vocab_size"):
        config_lib.BertConfig.from_json_file(str(no_vocab))


def test_vocab_and_sequence_length_checks(tiny_config_dict, tmp_path):
    tiny_config = config_lib.BertConfig.from_dict(tiny_config_dict)
    assert tiny_config.vocab_size == 99
    assert tiny_config.max_position_embeddings == 64
    vocab = tmp_path / "vocab.txt"
    vocab.write_text("".join(f"tok{i}\n" for i in range(100)))
    with pytest.raises(ValueError) as info:
        config_lib.check_vocab_size(str(vocab), tiny_config)
    assert str(info.value).startswith(
        f"vocab_file {vocab} has 100 tokens but the BERT config's vocab_size "
        "is 99"
    )
    config_lib.check_vocab_size(99, tiny_config)
    # A vocabulary without the special tokens of every input: refused before
    # a script writes anything (it was a KeyError in the features).
    vocab.write_text("".join(f"tok{i}\n" for i in range(50)) + "[SEP]\n")
    with pytest.raises(ValueError, match=r"lacks \[CLS\] \[UNK\], which"):
        config_lib.check_vocab_size(str(vocab), tiny_config)
    vocab.write_text("[UNK]\n[CLS]\n[SEP]\n" + "tok\n" * 50)
    config_lib.check_vocab_size(str(vocab), tiny_config)
    with pytest.raises(ValueError, match="Cannot use sequence length 65 "):
        config_lib.check_max_seq_length(65, tiny_config)
    config_lib.check_max_seq_length(64, tiny_config)


def test_a_missing_vocab_file_is_named_as_the_config_is(
    tiny_config_dict, tmp_path
):
    config = config_lib.BertConfig.from_dict(tiny_config_dict)
    with pytest.raises(
        FileNotFoundError, match="vocab_file .*nope.txt does not exist"
    ):
        config_lib.check_vocab_size(str(tmp_path / "nope.txt"), config)
