"""Tests for modeling/text/tokenization.py: the original's cases and the goldens."""

import json
import logging

import pytest

from modeling import errors
from modeling.text import tokenization
from modeling.text import vocabulary

# The vocabulary of the original tokenization_test.
TEST_VOCAB = [
    "[UNK]",
    "[CLS]",
    "[SEP]",
    "want",
    "##want",
    "##ed",
    "wa",
    "un",
    "runn",
    "##ing",
]


def _write_vocab(tmp_path, tokens, name="vocab.txt"):
    path = tmp_path / name
    path.write_bytes("".join(t + "\n" for t in tokens).encode("utf-8"))
    return str(path)


def _read_golden(golden_dir, name):
    path = golden_dir / name
    with open(path, encoding="utf-8") as f:
        return [json.loads(line) for line in f]


# --- The original's tokenization_test cases. ---


def test_full_tokenizer(tmp_path):
    vocab_file = _write_vocab(tmp_path, TEST_VOCAB + [","])
    tokenizer = tokenization.FullTokenizer(vocab_file)
    tokens = tokenizer.tokenize("UNwant\u00e9d,running")
    assert tokens == ["un", "##want", "##ed", ",", "runn", "##ing"]
    assert tokenizer.convert_tokens_to_ids(tokens) == [7, 4, 5, 10, 8, 9]
    assert tokenizer.convert_ids_to_tokens([7, 4, 5]) == [
        "un",
        "##want",
        "##ed",
    ]


def test_chinese():
    tokenizer = tokenization.BasicTokenizer()
    assert tokenizer.tokenize("ah\u535a\u63a8zz") == [
        "ah",
        "\u535a",
        "\u63a8",
        "zz",
    ]


def test_basic_tokenizer_lower():
    tokenizer = tokenization.BasicTokenizer(do_lower_case=True)
    assert tokenizer.tokenize(" \tHeLLo!how  \n Are yoU?  ") == [
        "hello",
        "!",
        "how",
        "are",
        "you",
        "?",
    ]
    assert tokenizer.tokenize("H\u00e9llo") == ["hello"]


def test_basic_tokenizer_no_lower():
    tokenizer = tokenization.BasicTokenizer(do_lower_case=False)
    assert tokenizer.tokenize(" \tHeLLo!how  \n Are yoU?  ") == [
        "HeLLo",
        "!",
        "how",
        "Are",
        "yoU",
        "?",
    ]


def test_wordpiece_tokenizer():
    vocab = {token: i for i, token in enumerate(TEST_VOCAB)}
    tokenizer = tokenization.WordpieceTokenizer(vocab=vocab)
    assert tokenizer.tokenize("") == []
    assert tokenizer.tokenize("unwanted running") == [
        "un",
        "##want",
        "##ed",
        "runn",
        "##ing",
    ]
    assert tokenizer.tokenize("unwantedX running") == [
        "[UNK]",
        "runn",
        "##ing",
    ]


def test_wordpiece_lookups_as_the_originals():
    """A word that starts with "##" matches an entry as it is (its first
    piece takes no prefix); a token added to the vocabulary later counts,
    as the original looks tokens up in `vocab` as it is."""
    tokenizer = tokenization.WordpieceTokenizer({"##abc": 0, "x": 1})
    assert tokenizer.tokenize("##abc") == ["##abc"]
    vocab = {token: i for i, token in enumerate(TEST_VOCAB)}
    tokenizer = tokenization.WordpieceTokenizer(vocab=vocab)
    assert tokenizer.tokenize("unwanted") == ["un", "##want", "##ed"]
    vocab["unwanted"] = len(vocab)
    assert tokenizer.tokenize("unwanted") == ["unwanted"]


def test_full_tokenizer_reads_its_vocab_and_casing_live(tmp_path):
    """As the original: a token added to `vocab` (longer than any before)
    and a change of do_lower_case count from the next call on, whatever
    was tokenized (and cached) before."""
    vocab_file = _write_vocab(tmp_path, TEST_VOCAB)
    tokenizer = tokenization.FullTokenizer(vocab_file)
    assert (
        tokenizer.tokenize("unwanted UNWANTED") == ["un", "##want", "##ed"] * 2
    )
    tokenizer.vocab["unwanted"] = len(tokenizer.vocab)
    word = "w" * 30
    tokenizer.vocab[word] = len(tokenizer.vocab)
    assert tokenizer.tokenize(f"unwanted {word}") == ["unwanted", word]
    tokenizer.basic_tokenizer.do_lower_case = False
    assert tokenizer.tokenize("UNWANTED") == ["[UNK]"]
    tokenizer.basic_tokenizer.do_lower_case = True
    tokenizer.wordpiece_tokenizer.max_input_chars_per_word = 3
    assert tokenizer.tokenize("unwanted") == ["[UNK]"]
    assert tokenizer.basic_tokenizer._is_chinese_char(0x535A)
    assert not tokenizer.basic_tokenizer._is_chinese_char(ord("a"))


def test_convert_tokens_to_ids():
    vocab = {token: i for i, token in enumerate(TEST_VOCAB)}
    tokens = ["un", "##want", "##ed", "runn", "##ing"]
    assert tokenization.convert_tokens_to_ids(vocab, tokens) == [7, 4, 5, 8, 9]
    with pytest.raises(KeyError):
        tokenization.convert_tokens_to_ids(vocab, ["nope"])


def test_is_whitespace():
    for char in [" ", "\t", "\r", "\n", "\u00a0"]:
        assert tokenization._is_whitespace(char), repr(char)
    assert not tokenization._is_whitespace("A")
    assert not tokenization._is_whitespace("-")


def test_is_control():
    assert tokenization._is_control("\u0005")
    for char in ["A", " ", "\t", "\r"]:
        assert not tokenization._is_control(char), repr(char)


def test_is_punctuation():
    for char in ["-", "$", "`", "."]:
        assert tokenization._is_punctuation(char), repr(char)
    assert not tokenization._is_punctuation("A")
    assert not tokenization._is_punctuation(" ")


# --- Edge cases, each checked against the original's behaviour. ---


def test_deleted_characters_join_words():
    tokenizer = tokenization.BasicTokenizer(do_lower_case=True)
    assert tokenizer.tokenize("a\x0cb") == ["ab"]
    assert tokenizer.tokenize("a\u200bb c\ufeffd\u00ade") == ["ab", "cde"]
    assert tokenizer.tokenize("a\u2028b") == ["a", "b"]
    assert tokenizer.tokenize("x\x00y\ufffdz") == ["xyz"]


def test_lower_case_strips_accents_only_when_lowering():
    lower = tokenization.BasicTokenizer(do_lower_case=True)
    cased = tokenization.BasicTokenizer(do_lower_case=False)
    assert lower.tokenize("\u0130stanbul") == ["istanbul"]
    assert cased.tokenize("\u0130stanbul \ufb01") == ["\u0130stanbul", "\ufb01"]
    assert lower.tokenize("...") == [".", ".", "."]
    assert lower.tokenize("[MASK]") == ["[", "mask", "]"]


def test_wordpiece_length_limit():
    vocab = {"[UNK]": 0, "a": 1, "##a": 2}
    tokenizer = tokenization.WordpieceTokenizer(vocab=vocab)
    assert tokenizer.tokenize("a" * 200) == ["a"] + ["##a"] * 199
    assert tokenizer.tokenize("a" * 201) == ["[UNK]"]
    short = tokenization.WordpieceTokenizer(vocab, max_input_chars_per_word=3)
    assert short.tokenize("aaaa aa") == ["[UNK]", "a", "##a"]


def test_convert_to_unicode():
    assert tokenization.convert_to_unicode(b"caf\xc3\xa9\xff") == "caf\u00e9"
    assert tokenization.printable_text("x") == "x"
    with pytest.raises(ValueError, match="Unsupported string type"):
        tokenization.convert_to_unicode(3)


def test_validate_case_matches_checkpoint():
    validate = tokenization.validate_case_matches_checkpoint
    validate(True, "/m/uncased_L-12_H-768_A-12/bert_model.ckpt")
    validate(False, "/m/cased_L-12_H-768_A-12/bert_model.ckpt")
    validate(False, "")
    validate(True, "/m/my_model/bert_model.ckpt")
    with pytest.raises(ValueError, match="seems to be a lowercased model"):
        validate(False, "/m/uncased_L-12_H-768_A-12/bert_model.ckpt")
    with pytest.raises(ValueError, match="--do_lower_case=False` so that"):
        validate(True, "gs://b/multi_cased_L-12_H-768_A-12/bert_model.ckpt")
    # The released folder itself, as --init_checkpoint accepts it here.
    with pytest.raises(ValueError, match="seems to be a lowercased model"):
        validate(False, "/m/uncased_L-12_H-768_A-12/")


# --- Parity with the original on the real vocabulary. ---


@pytest.mark.parametrize(
    "name,do_lower_case",
    [("tokenization_uncased.jsonl", True), ("tokenization_cased.jsonl", False)],
)
def test_goldens(golden_dir, uncased_vocab_file, name, do_lower_case):
    tokenizer = tokenization.FullTokenizer(uncased_vocab_file, do_lower_case)
    golden = _read_golden(golden_dir, name)
    assert len(golden) == 55
    for i, record in enumerate(golden):
        tokens = tokenizer.tokenize(record["text"])
        assert tokens == record["tokens"], f"line {i + 1}: {record['text']!r}"
        assert tokenizer.convert_tokens_to_ids(tokens) == record["ids"]
        # A second pass goes through the caches and must agree.
        assert tokenizer.tokenize(record["text"]) == record["tokens"]


# --- Vocabulary checks (modeling/text/vocabulary.py). ---


def test_vocab_not_utf8_names_file_and_line(tmp_path):
    path = tmp_path / "bad.txt"
    path.write_bytes(b"[PAD]\n[UNK]\ncaf\xe9\n")
    with pytest.raises(ValueError, match=r"bad\.txt:3: vocabulary line is not"):
        tokenization.FullTokenizer(str(path))


def test_vocab_crlf_and_blank_lines_as_original(tmp_path):
    path = tmp_path / "crlf.txt"
    path.write_bytes(b"[UNK]\r\na\r\n\r\nb")
    vocab = tokenization.load_vocab(str(path))
    assert list(vocab.items()) == [("[UNK]", 0), ("a", 1), ("", 2), ("b", 3)]
    # TensorFlow's line reader (the original's) drops a "\r" anywhere.
    path.write_bytes(b"[UNK]\na\rb\n##b\nab\n")
    vocab = tokenization.load_vocab(str(path))
    assert list(vocab.items()) == [("[UNK]", 0), ("ab", 3), ("##b", 2)]


def test_vocab_with_a_byte_order_mark_is_named(tmp_path, caplog):
    path = tmp_path / "bom.txt"
    path.write_bytes("\ufeff[PAD]\n[UNK]\n".encode("utf-8"))
    with caplog.at_level(logging.WARNING):
        vocab = vocabulary.check_vocab(str(path))
    assert list(vocab.values()) == [0, 1]  # ids as the original reads them
    assert "starts with a UTF-8 byte-order mark" in caplog.text
    assert "without BOM" in caplog.text


def test_duplicate_token_keeps_last_id_and_warns(tmp_path, caplog):
    vocab_file = _write_vocab(tmp_path, ["[UNK]", "a", "b", "a"])
    with caplog.at_level(logging.WARNING):
        vocab = vocabulary.load_vocab(vocab_file)
    assert vocab["a"] == 3
    assert "'a' on lines [2, 4]" in caplog.text


def test_missing_special_tokens_warn_and_require_raises(tmp_path, caplog):
    vocab_file = _write_vocab(tmp_path, TEST_VOCAB)
    with caplog.at_level(logging.WARNING):
        tokenizer = tokenization.FullTokenizer(vocab_file)
    assert "lacks the special token(s) [PAD] [MASK]" in caplog.text
    vocabulary.require_special_tokens(tokenizer.vocab, ["[CLS]"], "x")
    with pytest.raises(ValueError, match=r"lacks \[MASK\], needed for MLM"):
        vocabulary.require_special_tokens(
            tokenizer.vocab, ["[CLS]", "[MASK]"], "MLM"
        )
    # Converting a special token the vocabulary lacks: one line naming the
    # file (it was a KeyError traceback from every script's features).
    assert tokenizer.convert_tokens_to_ids(["[CLS]"]) == [
        TEST_VOCAB.index("[CLS]")
    ]
    with pytest.raises(errors.UserError, match=r"vocab.txt lacks \[MASK\]"):
        tokenizer.convert_tokens_to_ids(["[CLS]", "[MASK]"])
    with pytest.raises(KeyError):  # Any other token: as the original.
        tokenizer.convert_tokens_to_ids(["absent"])


def test_casing_mismatch_warns(tmp_path, caplog):
    cased = _write_vocab(tmp_path, TEST_VOCAB + ["Want"], "cased.txt")
    uncased = _write_vocab(tmp_path, TEST_VOCAB, "uncased.txt")
    for vocab_file, lower in [(cased, False), (uncased, True)]:
        caplog.clear()
        with caplog.at_level(logging.WARNING):
            vocabulary.check_vocab(vocab_file, do_lower_case=lower)
        assert "CASING MISMATCH" not in caplog.text
    caplog.clear()
    with caplog.at_level(logging.WARNING):
        tokenization.FullTokenizer(cased, do_lower_case=True)
    assert "cased.txt looks cased (1 upper-case tokens, e.g. Want)" in (
        caplog.text
    )
    caplog.clear()
    with caplog.at_level(logging.WARNING):
        tokenization.FullTokenizer(uncased, do_lower_case=False)
    assert "uncased.txt looks uncased" in caplog.text


def test_shipped_unicode_ranges_equal_the_scan():
    """The character classes ship precomputed (a server starts 0.14 s
    sooner): the running Python's entry equals a scan of its unicodedata,
    and the README's Python (3.11: Unicode 14.0.0) has one."""
    import json
    import unicodedata

    with open(tokenization._RANGES_FILE, encoding="utf-8") as f:
        shipped = json.load(f)
    assert "14.0.0" in shipped
    scanned = tokenization.scan_unicode_ranges()
    if unicodedata.unidata_version in shipped:
        assert shipped[unicodedata.unidata_version] == scanned
    tables = tokenization._CharTables()
    assert {k: tables.ranges[k] for k in scanned} == scanned
