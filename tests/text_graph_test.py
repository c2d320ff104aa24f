"""Tests for modeling/text/in_graph.py: same ids as FullTokenizer, in graph."""

import json

import pytest
import tensorflow as tf

from modeling.text import in_graph as in_graph_lib
from modeling.text import tokenization

# Characters where tf-text's defaults and the original disagree, and the
# rules' corners: controls and zero-width (deleted), odd spaces, NFKC-like
# folds (ß, ﬁ, ™, full-width), final sigma, dotted İ, Unicode 14 capitals,
# characters NFD turns into punctuation (U+037E, U+1FEF), CJK compatibility.
HARD_TEXTS = [
    "",
    "\x00\x07\u200b\ufeff",
    "a\x0cb a\x85b a\u2028b a\u2029b a\u00a0b a\u3000b a\u180eb a\u00adb",
    "Stra\u00dfe \ufb01 \u2122 \uff21\uff22\uff23 \u2026 \u00bd x\u00b2",
    "\u039f\u0394\u039f\u03a3 \u03a3\u0391\u03a3. \u0391\u03a3' \u03a3",
    "\u0130stanbul \u0131 I\u0307 \u1e9e \u01c5",
    "\u2c2f\u2c5f \U00010570ok \ua7c0",
    "a\u037eb a\u1fefb a\u0387b \uf900\U0002f800\u4e00x",
    "caf\u00e9 cafe\u0301 \u00c5ngstr\u00f6m na\u00efve \u0915\u093f",
    "\u00e9" * 200 + " " + "\u00e9" * 201 + " " + "a" * 201,
    "E\u0301" * 150 + " x",
    "[CLS] [UNK] ##ing ## # unwanted!!?",
    "\ud7ff\U0001f600\U0001f44d\U0001f3fd \u0e01\u0e34 \ud55c\uad6d\uc5b4",
]


def _golden_texts(golden_dir):
    path = golden_dir / "tokenization_uncased.jsonl"
    with open(path, encoding="utf-8") as f:
        return [json.loads(line)["text"] for line in f]


@pytest.fixture(scope="module", params=[True, False], ids=["uncased", "cased"])
def tokenizers(request, uncased_vocab_file):
    lower = request.param
    return (
        tokenization.FullTokenizer(uncased_vocab_file, lower),
        in_graph_lib.InGraphTokenizer(uncased_vocab_file, lower),
    )


def _assert_same_ids(tokenizers, texts):
    full, in_graph = tokenizers
    got = in_graph.tokenize(tf.constant(texts)).to_list()
    for text, ids in zip(texts, got):
        want = full.convert_tokens_to_ids(full.tokenize(text))
        assert ids == want, f"{text!r}: {full.convert_ids_to_tokens(ids)}"


def test_goldens(tokenizers, golden_dir):
    texts = _golden_texts(golden_dir)
    assert len(texts) == 55
    _assert_same_ids(tokenizers, texts)


def test_hard_cases(tokenizers):
    _assert_same_ids(tokenizers, HARD_TEXTS)
    # Mixed batches go through both paths and keep their order.
    _assert_same_ids(tokenizers, ["plain ascii", HARD_TEXTS[3], "x", ""])


def test_every_ascii_character(tokenizers):
    # Printable rows take the FastBertTokenizer path, others the regexes.
    chars = [chr(cp) for cp in range(128)]
    texts = [f"a{c}b {c}Z{c}{c}" for c in chars] + ["a\tb\nc\rd  e"]
    _assert_same_ids(tokenizers, texts)


def test_vocab_with_icu_only_characters_is_refused(tmp_path):
    path = tmp_path / "vocab.txt"
    path.write_text("[UNK]\n##\U000105c9\n", encoding="utf-8")
    with pytest.raises(
        ValueError, match=r"vocab.txt: token '##.U000105c9' holds a"
    ):
        in_graph_lib.InGraphTokenizer(str(path))


def test_invalid_utf8_is_dropped_as_original(tokenizers):
    full, in_graph = tokenizers
    raw = [b"caf\xc3\xa9\xff ok", b"\xe2\x82 x\xc3", b"\x80\x80"]
    got = in_graph.tokenize(tf.constant(raw)).to_list()
    for text, ids in zip(raw, got):
        assert ids == full.convert_tokens_to_ids(full.tokenize(text))


def test_scalar_and_tf_data(tokenizers):
    full, in_graph = tokenizers
    text = "Hello, World! It's 4 A.M."
    want = full.convert_tokens_to_ids(full.tokenize(text))
    assert in_graph.tokenize(text).numpy().tolist() == want
    dataset = tf.data.Dataset.from_tensor_slices([text, "x"]).batch(2)
    dataset = dataset.map(in_graph.tokenize)
    assert next(iter(dataset)).to_list()[0] == want
    with pytest.raises(ValueError, match=r"shape \[\] or \[batch_size\], got"):
        in_graph.tokenize([[text]])


def test_unicode14_lower_table_is_complete():
    # Re-derives the table: every upper-case letter whose Python lower()
    # tf.strings.lower misses is in it (the fix runs only where needed).
    cps = [cp for cp in range(0x110000) if not 0xD800 <= cp <= 0xDFFF]
    chars = [chr(cp) for cp in cps if chr(cp).lower() != chr(cp)]
    lowered = tf.strings.lower(chars, encoding="utf-8").numpy()
    missed = [
        ord(c) for c, got in zip(chars, lowered) if got.decode() != c.lower()
    ]
    assert missed == in_graph_lib._UNICODE14_UPPER


def test_savedmodel_round_trip(tmp_path):
    tokens = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "hello", "there", "!"]
    tokens += ["##s", "\u00e9", "ok", "."]
    vocab_file = tmp_path / "vocab.txt"
    vocab_file.write_text("\n".join(tokens) + "\n", encoding="utf-8")
    module = tf.Module()
    module.tokenizer = in_graph_lib.InGraphTokenizer(vocab_file)
    module.packer = in_graph_lib.InputPacker.from_vocab_file(vocab_file, 8)

    @tf.function(input_signature=[tf.TensorSpec([None], tf.string)])
    def serve(text):
        return module.packer(module.tokenizer.tokenize(text))

    module.serve = serve
    tf.saved_model.save(module, str(tmp_path / "model"))
    vocab_file.unlink()  # The saved model must not need it.
    loaded = tf.saved_model.load(str(tmp_path / "model"))
    got = loaded.serve(tf.constant(["Hello there!", "OK\u200b. \u00c9x"]))
    assert got["input_ids"].numpy().tolist() == [
        [2, 4, 5, 6, 3, 0, 0, 0],
        [2, 9, 10, 1, 3, 0, 0, 0],
    ]
    assert got["input_mask"].numpy().sum() == 10


def test_duplicates_and_blank_lines_match_full_tokenizer(tmp_path):
    tokens = ["[UNK]", "a", "", "##b", "a", "b", "##b", "[PAD]"]
    path = tmp_path / "vocab.txt"
    path.write_text("".join(t + "\n" for t in tokens), encoding="utf-8")
    full = tokenization.FullTokenizer(str(path))
    in_graph = in_graph_lib.InGraphTokenizer(str(path))
    texts = ["a ab bb abc", "bB"]
    got = in_graph.tokenize(tf.constant(texts)).to_list()
    assert got == [[4, 4, 6, 5, 6, 0], [5, 6]]
    assert got == [full.convert_tokens_to_ids(full.tokenize(t)) for t in texts]


def test_tokens_with_whitespace_are_never_produced(tmp_path):
    """A vocabulary line "new york": the original's WordPiece sees words
    (no whitespace), so it never gives it; tf-text matched it across the
    space (and "new year" as a failed prefix of it: [UNK])."""
    tokens = ["[UNK]", "new york", "new", "year", "yor", "##k", "x\ty", "x"]
    path = tmp_path / "vocab.txt"
    path.write_text("".join(t + "\n" for t in tokens), encoding="utf-8")
    full = tokenization.FullTokenizer(str(path))
    in_graph = in_graph_lib.InGraphTokenizer(str(path))
    texts = ["New York", "new year", "new\tyork", "x y"]
    got = in_graph.tokenize(tf.constant(texts)).to_list()
    assert got == [[2, 4, 5], [2, 3], [2, 4, 5], [7, 0]]
    assert got == [full.convert_tokens_to_ids(full.tokenize(t)) for t in texts]


def _truncate_seq_pair(a, b, max_length):
    """The original's loop, on lengths."""
    while a + b > max_length:
        if a > b:
            a -= 1
        else:
            b -= 1
    return a, b


def test_truncated_lengths_equal_the_original_loop():
    pairs = [(a, b) for a in range(13) for b in range(13)]
    len_a = tf.constant([a for a, _ in pairs])
    len_b = tf.constant([b for _, b in pairs])
    for budget in [1, 4, 7, 10]:
        keep_a, keep_b = in_graph_lib.truncated_lengths(len_a, len_b, budget)
        want = [_truncate_seq_pair(a, b, budget) for a, b in pairs]
        assert list(zip(keep_a.numpy(), keep_b.numpy())) == want


def test_split_words_is_str_split():
    """The tagger export's word split: Python's str.split() on every code
    point to U+3000 between two words (and doubled, leading, trailing)."""
    texts = [f"a{chr(cp)}b{chr(cp)}{chr(cp)}c " for cp in range(0x3001)]
    texts += [" \u3000 x\u00a0y\x1cz\u2028", ""]
    got = in_graph_lib.split_words(tf.constant(texts)).to_list()
    want = [t.split() for t in texts]
    assert [[w.decode() for w in row] for row in got] == want


def test_a_sequence_length_without_room_is_refused():
    """[CLS] and [SEP] need 2 positions, a pair 3: below that B was cut off
    without a word (the original fails on such a pair)."""
    with pytest.raises(ValueError, match="at least 2 positions"):
        in_graph_lib.InputPacker(1, 101, 102)
    packer = in_graph_lib.InputPacker(2, 101, 102)
    ids = tf.ragged.constant([[7]])
    assert packer(ids)["input_ids"].numpy().tolist() == [[101, 102]]
    with pytest.raises(ValueError, match="a pair needs at least 3"):
        packer(ids, ids)


def test_input_packer():
    packer = in_graph_lib.InputPacker(max_seq_length=8, cls_id=101, sep_id=102)
    a = tf.ragged.constant([[1, 2, 3, 4, 5], [7]])
    b = tf.ragged.constant([[11, 12], [13, 14, 15, 16, 17, 18]])
    pair = packer(a, b)
    assert pair["input_ids"].numpy().tolist() == [
        [101, 1, 2, 3, 102, 11, 12, 102],
        [101, 7, 102, 13, 14, 15, 16, 102],
    ]
    assert pair["segment_ids"].numpy().tolist() == [
        [0, 0, 0, 0, 0, 1, 1, 1],
        [0, 0, 0, 1, 1, 1, 1, 1],
    ]
    # An empty B packs like a single segment (the original's `if tokens_b`).
    mixed = packer(
        tf.ragged.constant([[1, 2, 3, 4, 5, 6, 7], [7]]),
        tf.ragged.constant([[], [13]], dtype=tf.int32),
    )
    assert mixed["input_ids"].numpy().tolist() == [
        [101, 1, 2, 3, 4, 5, 6, 102],
        [101, 7, 102, 13, 102, 0, 0, 0],
    ]
    assert mixed["segment_ids"].numpy().tolist() == [
        [0, 0, 0, 0, 0, 0, 0, 0],
        [0, 0, 0, 1, 1, 0, 0, 0],
    ]
    single = packer(tf.ragged.constant([[1, 2, 3, 4, 5, 6, 7], [9]]))
    assert single["input_ids"].numpy().tolist() == [
        [101, 1, 2, 3, 4, 5, 6, 102],
        [101, 9, 102, 0, 0, 0, 0, 0],
    ]
    assert single["input_mask"].numpy().tolist()[1] == [1, 1, 1, 0, 0, 0, 0, 0]
    assert single["input_ids"].dtype == tf.int32


@pytest.mark.slow
def test_every_code_point(tokenizers):
    # Each character alone, inside a word and between words.
    chars = [chr(cp) for cp in range(1, 0x110000) if not 0xD800 <= cp <= 0xDFFF]
    full, in_graph = tokenizers
    for start in range(0, len(chars), 65536):
        texts = [f"a{c}b {c}" for c in chars[start : start + 65536]]
        got = in_graph.tokenize(tf.constant(texts)).to_list()
        for text, ids in zip(texts, got):
            want = full.convert_tokens_to_ids(full.tokenize(text))
            # Exact everywhere with this vocabulary, the ICU-only
            # decomposed code points included (their words are [UNK]).
            assert ids == want, text
