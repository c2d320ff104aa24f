"""Tests for modeling/text/vocab_builder.py, vocab/build_vocab.py and vocab/."""

import logging
import time

import pytest
import script_runner
from constants import REPO_ROOT

from modeling.text import tokenization
from modeling.text import vocab_builder
from modeling.text import vocabulary

BOOKS_VOCAB = REPO_ROOT / "vocab" / "books_uncased_8k.txt"


def test_special_tokens_match_the_released_layout(uncased_vocab_file):
    released = vocabulary.read_vocab_lines(uncased_vocab_file)
    head = vocab_builder.special_tokens(994)
    assert head == released[: len(head)]
    assert len(head) == 999 and head[104] == "[unused99]"
    small = vocab_builder.special_tokens(99)
    assert small == released[:104]


def test_learn_vocab_merges_most_frequent_pairs():
    counts = {"low": 5, "lower": 2, "newest": 6, "widest": 3}
    tokens = vocab_builder.learn_vocab(counts, 104 + 2 * 10 + 5, 99)
    chars = sorted("lowernstid")
    assert tokens[:104] == vocab_builder.special_tokens(99)
    assert tokens[104:114] == chars
    # ("##e", "##s") and ("##s", "##t") tie at 9: the smaller pair first.
    assert tokens[114:119] == ["##es", "##est", "##ow", "low", "##ew"]
    assert tokens[119:] == ["##" + c for c in chars]


def test_learn_vocab_stops_at_min_frequency():
    tokens = vocab_builder.learn_vocab({"ab": 1}, 200, num_unused=0)
    assert tokens[5:] == ["a", "b", "##a", "##b"]
    tokens = vocab_builder.learn_vocab({"ab": 1}, 200, 0, min_frequency=1)
    assert tokens[5:] == ["a", "b", "ab", "##a", "##b"]


def test_learn_vocab_too_small():
    with pytest.raises(ValueError, match="vocab_size=10 is too small: 5 "):
        vocab_builder.learn_vocab({"abc": 3}, 10, num_unused=0)


def test_write_vocab_is_atomic(tmp_path):
    path = tmp_path / "vocab.txt"
    vocab_builder.write_vocab(["[PAD]", "a"], str(path))
    assert path.read_text(encoding="utf-8") == "[PAD]\na\n"
    with pytest.raises(ValueError, match=r"token 1 \('a b'\) cannot"):
        vocab_builder.write_vocab(["[PAD]", "a b"], str(path))
    assert path.read_text(encoding="utf-8") == "[PAD]\na\n"
    assert [p.name for p in tmp_path.iterdir()] == ["vocab.txt"]


def test_count_words_uses_basic_tokenizer_and_checks_utf8(tmp_path):
    text = tmp_path / "a.txt"
    text.write_text("H\u00e9llo, WORLD!\nhello\u200bworld\n", encoding="utf-8")
    assert vocab_builder.count_words([str(text)]) == {
        "hello": 1,
        ",": 1,
        "world": 1,
        "!": 1,
        "helloworld": 1,
    }
    cased = vocab_builder.count_words([str(text)], do_lower_case=False)
    assert cased["H\u00e9llo"] == 1
    bad = tmp_path / "bad.txt"
    bad.write_bytes(b"ok\nfine\n\xff\n")
    with pytest.raises(ValueError, match=r"bad\.txt:3: not valid UTF-8"):
        vocab_builder.count_words([str(bad)])


def test_build_vocab_then_tokenize(tmp_path, caplog):
    text = tmp_path / "text.txt"
    text.write_text("The cat sat on the mat.\nThe cats sat.\n" * 3)
    out = tmp_path / "vocab.txt"
    tokens = vocab_builder.build_vocab([str(text)], str(out), 150)
    assert vocabulary.read_vocab_lines(out) == tokens
    with caplog.at_level(logging.WARNING):
        tokenizer = tokenization.FullTokenizer(str(out))
    assert caplog.text == ""  # Specials present, casing consistent.
    assert tokenizer.tokenize("The cats sat on a mat!") == [
        "the",
        "cats",
        "sat",
        "on",
        "a",
        "mat",
        "[UNK]",  # "!" never occurs in the text.
    ]


def test_committed_books_vocab(caplog):
    tokens = vocabulary.read_vocab_lines(BOOKS_VOCAB)
    assert len(tokens) == len(set(tokens)) == 8000
    assert tokens[:104] == vocab_builder.special_tokens(99)
    assert vocabulary.upper_case_tokens(tokens) == []
    with caplog.at_level(logging.WARNING):
        vocabulary.check_vocab(BOOKS_VOCAB, do_lower_case=True)
    assert caplog.text == ""


@pytest.mark.slow
def test_books_corpus_vocab_is_reproducible_fast_and_covers(
    shared_dir, tmp_path
):
    corpus = shared_dir / "data" / "corpus" / "books_corpus.txt"
    out = tmp_path / "books.txt"
    start = time.time()
    vocab_builder.build_vocab([str(corpus)], str(out), 8000)
    assert time.time() - start < 120
    assert out.read_bytes() == BOOKS_VOCAB.read_bytes()
    tokenizer = tokenization.FullTokenizer(str(out))
    num_tokens = num_unk = 0
    with open(corpus, encoding="utf-8") as f:
        for line in f:
            tokens = tokenizer.tokenize(line)
            num_tokens += len(tokens)
            num_unk += tokens.count("[UNK]")
    assert num_unk / num_tokens < 0.005


def test_the_script_refuses_an_output_among_its_inputs(tmp_path):
    """A second `--input_file='*.txt' --output_file=vocab.txt` learned from
    the first's vocabulary (another file each time), and an output named as
    the corpus replaced it: both are refused, the files unchanged; fewer
    tokens than --vocab_size is a warning."""
    corpus = tmp_path / "c.txt"
    corpus.write_text("the cat sat on the mat\nthe dog ran far away\n" * 5)
    vocab = tmp_path / "vocab.txt"
    script = "vocab/build_vocab.py"
    first = script_runner.python(
        [
            script,
            f"--input_file={tmp_path}/*.txt",
            f"--output_file={vocab}",
            "--vocab_size=300",
        ]
    )
    assert first.returncode == 0, first.stderr[-2000:]
    assert "fewer than --vocab_size=300" in first.stderr
    before = script_runner.folder_digests(tmp_path)
    for args in (
        [f"--input_file={tmp_path}/*.txt", f"--output_file={vocab}"],
        [f"--input_file={corpus}", f"--output_file={corpus}"],
    ):
        proc = script_runner.python([script, *args])
        assert proc.returncode == 1, proc.stderr[-2000:]
        lines = [x for x in proc.stderr.splitlines() if x.startswith("error:")]
        assert len(lines) == 1 and "is also --input_file's file" in lines[0]
        assert "Traceback" not in proc.stderr
    assert script_runner.folder_digests(tmp_path) == before
