"""CoNLL-2003 reading, sub-word alignment, windows, and the conlleval
entity scores (modeling/data/conll.py, modeling/tasks/conlleval.py)."""

import pytest

from modeling.data import conll
from modeling.tasks import conlleval
from modeling.text import tokenization

VOCAB = [
    "[PAD]",
    "[UNK]",
    "[CLS]",
    "[SEP]",
    "[MASK]",
    "eu",
    "rejects",
    "german",
    "call",
    "peter",
    "black",
    "##burn",
    "brussels",
    "the",
    "un",
    "##believ",
    "##able",
    ".",
]


@pytest.fixture
def tokenizer(tmp_path):
    vocab = tmp_path / "vocab.txt"
    vocab.write_text("\n".join(VOCAB) + "\n")
    return tokenization.FullTokenizer(str(vocab), do_lower_case=True)


def _write(tmp_path, text, name="data.txt"):
    path = tmp_path / name
    path.write_text(text)
    return str(path)


IOB1 = """\
-DOCSTART- -X- -X- O

EU NNP I-NP I-ORG
rejects VBZ I-VP O
German JJ I-NP I-MISC
call NN I-NP O
Peter NNP I-NP I-PER
Blackburn NNP I-NP I-PER
Brussels NNP I-NP B-PER
. . O O

-DOCSTART- -X- -X- O

Peter NNP I-NP I-PER
Blackburn NNP I-NP I-PER

"""


def test_iob1_becomes_iob2_and_docstart_separates(tmp_path):
    data = conll.read_conll(_write(tmp_path, IOB1))
    assert data.has_tags
    assert [s.words for s in data.sentences] == [
        [
            "EU",
            "rejects",
            "German",
            "call",
            "Peter",
            "Blackburn",
            "Brussels",
            ".",
        ],
        ["Peter", "Blackburn"],
    ]
    # I-X after O or another type starts an entity (B-X); I-X after B-X/I-X
    # of its type continues; the second sentence starts afresh.
    assert data.sentences[0].tags == [
        "B-ORG",
        "O",
        "B-MISC",
        "O",
        "B-PER",
        "I-PER",
        "B-PER",
        "O",
    ]
    assert data.sentences[1].tags == ["B-PER", "I-PER"]
    assert data.sentences[0].line_numbers == [3, 4, 5, 6, 7, 8, 9, 10]
    assert data.sentences[1].line_numbers == [14, 15]
    assert conll.labels_from_sentences(data.sentences) == [
        "O",
        "B-MISC",
        "B-ORG",
        "B-PER",
        "I-PER",
    ]
    # Each type with every prefix of its scheme: MISC and ORG, seen only
    # as one word here, can be predicted over two.
    assert conll.labels_from_sentences(data.sentences, data.scheme) == [
        "O",
        "B-MISC",
        "I-MISC",
        "B-ORG",
        "I-ORG",
        "B-PER",
        "I-PER",
    ]
    # A file saved with a byte-order mark: the same file.
    bom = tmp_path / "bom.txt"
    bom.write_text("\ufeff" + IOB1, encoding="utf-8")
    again = conll.read_conll(str(bom))
    assert [s.words for s in again.sentences] == [
        s.words for s in data.sentences
    ]


def test_iob2_is_unchanged():
    tags = ["B-PER", "I-PER", "B-PER", "O", "B-LOC", "I-LOC"]
    assert conll.iob1_to_iob2(tags) == tags
    assert conll.iob1_to_iob2(["I-LOC", "I-PER", "I-PER"]) == [
        "B-LOC",
        "B-PER",
        "I-PER",
    ]


def test_first_piece_carries_the_label(tmp_path, tokenizer):
    data = conll.read_conll(
        _write(tmp_path, "Peter x B-PER\nBlackburn x I-PER\nunbelievable x O\n")
    )
    labels = ["O", "B-PER", "I-PER"]
    (feature,) = conll.convert_sentences(data.sentences, labels, 12, tokenizer)
    tokens = ["[CLS]", "peter", "black", "##burn"]
    tokens += ["un", "##believ", "##able", "[SEP]"]
    ids = tokenizer.convert_tokens_to_ids(tokens)
    assert feature.input_ids == ids + [0] * 4
    assert feature.input_mask == [1] * 8 + [0] * 4
    assert feature.segment_ids == [0] * 12
    assert feature.label_mask == [0, 1, 1, 0, 1, 0, 0, 0, 0, 0, 0, 0]
    assert feature.label_ids == [0, 1, 2, 0, 0, 0, 0, 0, 0, 0, 0, 0]
    assert (feature.sentence_index, feature.word_start) == (0, 0)


def test_sentence_windows_keep_every_word_once():
    assert conll.sentence_windows([1, 2, 1, 3, 1], 4) == [
        (0, 3),
        (3, 5),
    ]
    # A word longer than a window gets its own window.
    assert conll.sentence_windows([1, 9, 1], 4) == [(0, 1), (1, 2), (2, 3)]
    assert conll.sentence_windows([], 4) == []


def test_long_sentence_windows_predict_every_word_once(tmp_path, tokenizer):
    words = ["Peter", "Blackburn", "unbelievable", "the", "EU", "."] * 5
    tags = ["B-PER", "I-PER", "O", "O", "B-ORG", "O"] * 5
    text = "".join(f"{w} NNP O {t}\n" for w, t in zip(words, tags))
    text += "\nthe x y O\nunbelievable x y O\n"
    data = conll.read_conll(_write(tmp_path, text))
    labels = ["O", "B-ORG", "B-PER", "I-PER"]
    features = conll.convert_sentences(data.sentences, labels, 8, tokenizer)
    # 6 pieces per window at most; the 45 pieces (9 per 6 words) fill
    # windows of exactly 6 (peter black ##burn un ##believ ##able | the eu .
    # peter black ##burn | ...): 8 windows.
    assert all(sum(f.input_mask) <= 8 for f in features)
    assert [f.sentence_index for f in features] == [0] * 8 + [1]
    assert [sum(f.input_mask) for f in features[:7]] == [8] * 7
    scored = sum(sum(f.label_mask) for f in features)
    assert scored == len(words) + 2
    # Each window's labelled positions hold its words' gold ids in order:
    # predicting the labels back gives the tags, one per word.
    predicted = [f.label_ids for f in features]
    tags_back = conll.word_predictions(
        features, predicted, data.sentences, labels
    )
    assert tags_back == [tags, ["O", "O"]]
    # Windows cut at word boundaries: never between `black` and `##burn`.
    for f in features:
        ids = [i for i, m in zip(f.input_ids, f.input_mask) if m]
        assert ids[0] == VOCAB.index("[CLS]") and ids[-1] == VOCAB.index(
            "[SEP]"
        )
        assert ids[1] != VOCAB.index("##burn")


def test_a_word_longer_than_a_window_is_cut_not_dropped(tmp_path, tokenizer):
    data = conll.read_conll(
        _write(tmp_path, "the O\nunbelievable B-PER\nthe O\n")
    )
    features = conll.convert_sentences(
        data.sentences, ["O", "B-PER"], 4, tokenizer
    )
    assert len(features) == 3
    assert features[1].input_ids[:4] == tokenizer.convert_tokens_to_ids(
        ["[CLS]", "un", "##believ", "[SEP]"]
    )
    tags = conll.word_predictions(
        features,
        [f.label_ids for f in features],
        data.sentences,
        ["O", "B-PER"],
    )
    assert tags == [["O", "B-PER", "O"]]


def test_prediction_lines_line_up_with_the_input(tmp_path, tokenizer):
    data = conll.read_conll(_write(tmp_path, IOB1))
    predicted = [["O"] * len(s.words) for s in data.sentences]
    predicted[1] = ["B-PER", "I-PER"]
    lines = conll.prediction_lines(data, predicted)
    source = IOB1.splitlines()
    assert len(lines) == len(source)
    for got, want in zip(lines, source):
        if not want.strip():
            assert got == want
        elif want.startswith("-DOCSTART-"):
            assert got == want + " O"  # conlleval: same column count
        else:
            assert got.rsplit(" ", 1)[0] == want
    # An IOB1 file's predictions are IOB1, as its gold tags: conlleval
    # compares the two as strings.
    assert lines[13] == "Peter NNP I-NP I-PER I-PER"
    assert lines[14] == "Blackburn NNP I-NP I-PER I-PER"


def test_gold_tags_as_predictions_are_the_gold_column(tmp_path):
    """Predicting every gold tag writes each word line's gold tag again
    (IOB1 as IOB1, including a B- after an entity of its type), so the
    conlleval script's token accuracy is 100%; a tab-separated file gets a
    tab-separated column."""
    for name, text in (("spaces", IOB1), ("tabs", IOB1.replace(" ", "\t"))):
        data = conll.read_conll(_write(tmp_path, text, name))
        assert data.iob1
        lines = conll.prediction_lines(data, [s.tags for s in data.sentences])
        sep = "\t" if name == "tabs" else " "
        for line in lines:
            columns = line.split(sep)
            if line.strip():
                assert len(columns) == 5, line
                assert columns[-1] == columns[-2], line
    assert not conll.read_conll(_write(tmp_path, "a B-X\nb I-X\n")).iob1
    # An IOB2 file with one slip (an entity starting with I-X) is IOB2:
    # its B-X predictions stay B-X (all were written as I-X).
    slip = "John B-PER\nin O\nParis B-LOC\n\nMary B-PER\nSmith I-PER\nsaw O\nBob I-PER\n"
    data = conll.read_conll(_write(tmp_path, slip))
    assert not data.iob1
    lines = conll.prediction_lines(data, [s.tags for s in data.sentences])
    assert lines[0] == "John B-PER B-PER"


def test_a_json_word_docstart_gets_one_column(tmp_path):
    """A JSON Lines sentence may hold the word -DOCSTART- (HF's
    conll2003): it is a word, and gets its predicted tag only."""
    path = tmp_path / "docs.jsonl"
    path.write_text(
        '{"tokens": ["-DOCSTART-"], "tags": ["O"]}\n'
        '{"tokens": ["EU", "rejects"], "tags": ["B-ORG", "O"]}\n'
    )
    data = conll.read_json_lines(str(path))
    lines = conll.prediction_lines(data, [["O"], ["B-ORG", "O"]])
    assert [line.split() for line in lines if line] == [
        ["-DOCSTART-", "O", "O"],
        ["EU", "B-ORG", "B-ORG"],
        ["rejects", "O", "O"],
    ]


def test_a_words_only_file_predicts(tmp_path, tokenizer):
    data = conll.read_conll(
        _write(tmp_path, "Peter\nBlackburn\n\nthe\n"), require_tags=False
    )
    assert not data.has_tags and data.sentences[0].tags is None
    features = conll.convert_sentences(data.sentences, ["O"], 16, tokenizer)
    assert [sum(f.label_mask) for f in features] == [2, 1]


def test_label_list_file_round_trip(tmp_path):
    path = tmp_path / "label_list.txt"
    conll.write_label_list(str(path), ["O", "B-PER", "I-PER"])
    assert path.read_text() == "O\nB-PER\nI-PER\n"
    assert conll.read_label_list(str(path)) == ["O", "B-PER", "I-PER"]


# === Bad input: one message naming the file and the line ===


def test_wrong_column_count_names_file_and_line(tmp_path):
    path = _write(tmp_path, "EU NNP B-NP B-ORG\nrejects VBZ O\n")
    with pytest.raises(ValueError, match=f"{path} line 2: expected 4 "):
        conll.read_conll(path)


def test_a_single_column_training_file(tmp_path):
    path = _write(tmp_path, "\n\nEU\n")
    with pytest.raises(ValueError, match=f"{path} line 3: expected `word"):
        conll.read_conll(path)


def test_malformed_tag_names_file_and_line(tmp_path):
    path = _write(tmp_path, "EU x B-ORG\nrejects x PER\n")
    with pytest.raises(ValueError, match=f"{path} line 2: tag 'PER'"):
        conll.read_conll(path)


def test_unknown_tag_at_predict_time(tmp_path):
    path = _write(tmp_path, "EU x B-ORG\n\nrejects x B-FOO\n")
    data = conll.read_conll(path)
    with pytest.raises(ValueError, match=f"{path} line 3: unknown tag 'B-FOO'"):
        conll.check_tags(data, ["O", "B-ORG"])
    conll.check_tags(data, ["O", "B-ORG", "B-FOO"])


@pytest.mark.parametrize("text", ["", "\n\n", "-DOCSTART- -X- O O\n\n"])
def test_empty_file(tmp_path, text):
    path = _write(tmp_path, text)
    with pytest.raises(ValueError, match=f"{path}: no sentences"):
        conll.read_conll(path)


def test_not_utf8_names_the_line(tmp_path):
    path = tmp_path / "bad.txt"
    path.write_bytes(b"EU x O\nr\xe9jects x O\n")
    with pytest.raises(ValueError, match=f"{path} line 2: not UTF-8"):
        conll.read_conll(str(path))


def test_missing_file(tmp_path):
    with pytest.raises(FileNotFoundError, match="no_such.txt"):
        conll.read_conll(str(tmp_path / "no_such.txt"))


# === conlleval entity scores, by hand ===


def test_chunks():
    assert conlleval.chunks(["B-PER", "I-PER", "O", "B-LOC"]) == {
        ("PER", 0, 1),
        ("LOC", 3, 3),
    }
    # IOB1: I- after O or another type starts a chunk; B- splits two.
    assert conlleval.chunks(["I-PER", "I-PER", "B-PER", "I-LOC"]) == {
        ("PER", 0, 1),
        ("PER", 2, 2),
        ("LOC", 3, 3),
    }
    assert conlleval.chunks(["O", "O"]) == set()


def test_entity_scores_by_hand():
    gold = [
        ["B-PER", "I-PER", "O", "B-LOC", "O"],
        ["B-ORG", "I-ORG", "I-ORG"],
    ]
    pred = [
        # PER right; LOC predicted one word too long (wrong boundary).
        ["B-PER", "I-PER", "O", "B-LOC", "I-LOC"],
        # ORG cut short (wrong boundary) plus an extra MISC.
        ["B-ORG", "I-ORG", "B-MISC"],
    ]
    r = conlleval.evaluate(gold, pred)
    # gold 3 entities, predicted 4, correct 1 (the PER).
    assert (r["gold_entities"], r["predicted_entities"]) == (3, 4)
    assert r["correct_entities"] == 1
    assert r["precision"] == pytest.approx(1 / 4)
    assert r["recall"] == pytest.approx(1 / 3)
    assert r["f1"] == pytest.approx(2 * (1 / 4) * (1 / 3) / (1 / 4 + 1 / 3))
    # 8 words, 6 tags equal.
    assert r["accuracy"] == pytest.approx(6 / 8)
    assert r["per_type"]["PER"]["f1"] == 1.0
    assert r["per_type"]["LOC"]["f1"] == 0.0
    assert r["per_type"]["MISC"]["predicted"] == 1
    assert r["per_type"]["MISC"]["gold"] == 0


def test_type_must_match():
    r = conlleval.evaluate([["B-PER", "I-PER"]], [["B-ORG", "I-ORG"]])
    assert (r["precision"], r["recall"], r["f1"]) == (0.0, 0.0, 0.0)
    assert r["accuracy"] == 0.0


def test_perfect_and_empty():
    gold = [["B-PER", "O"], ["O"]]
    assert conlleval.evaluate(gold, gold)["f1"] == 1.0
    r = conlleval.evaluate([["O"]], [["O"]])
    assert (r["f1"], r["accuracy"]) == (0.0, 1.0)


def test_length_mismatch_is_an_error():
    with pytest.raises(ValueError, match="sentence 0: 2 gold tags"):
        conlleval.evaluate([["O", "O"]], [["O"]])


def test_readers_and_scripts_do_not_load_tensorflow():
    """The readers, the metric and the scripts' flag parsing (--help) run
    without TensorFlow; it loads once a task runs."""
    import subprocess
    import sys

    from constants import REPO_ROOT

    # One script per process: their absl flags share names.
    for script in ("run_ner", "run_multiple_choice"):
        code = (
            "import sys; import modeling.data.conll, modeling.data.swag, "
            f"modeling.tasks.conlleval, {script}; "
            "print('tensorflow' in sys.modules)"
        )
        out = subprocess.run(
            [sys.executable, "-c", code],
            capture_output=True,
            text=True,
            check=True,
            cwd=REPO_ROOT,
        )
        assert out.stdout.strip() == "False", script
