"""SQuAD examples -> features -> records (modeling/data/squad.py).

The features of the original's run_squad.py (../shared/golden, three
settings, training and prediction mode) are compared field by field; the
record encoder byte for byte with protobuf's; bad input gives one error
naming file, article and question id.
"""

import gzip
import json

import pytest

from modeling.data import input_pipeline
from modeling.data import squad
from modeling.text import tokenization

# name -> (max_seq_length, doc_stride, max_query_length, version_2)
GOLDEN_SETTINGS = {
    "squad_v1": (384, 128, 64, False),
    "squad_v1_seq128": (128, 64, 32, False),
    "squad_v2": (256, 128, 64, True),
}


@pytest.fixture(scope="module")
def tokenizer(uncased_vocab_file):
    return tokenization.FullTokenizer(uncased_vocab_file, True)


def _features(path, tokenizer, settings, is_training):
    seq, stride, query, v2 = settings
    examples, _ = squad.read_squad_examples(path, is_training, v2)
    features = []
    squad.convert_examples_to_features(
        examples, tokenizer, seq, stride, query, is_training, features.append
    )
    return examples, features


@pytest.mark.parametrize("mode", ["train", "predict"])
@pytest.mark.parametrize("name", sorted(GOLDEN_SETTINGS))
def test_features_match_the_original(golden_dir, tokenizer, name, mode):
    is_training = mode == "train"
    suffix = "_train_input.json" if is_training else "_input.json"
    _, features = _features(
        golden_dir / (name + suffix),
        tokenizer,
        GOLDEN_SETTINGS[name],
        is_training,
    )
    path = golden_dir / f"{name}_features_{mode}.jsonl.gz"
    with gzip.open(path, "rt") as f:
        golden = [json.loads(line) for line in f]
    assert len(features) == len(golden)
    for want, got in zip(golden, features):
        for key, value in want.items():
            mine = getattr(got, key)
            if isinstance(mine, dict):  # JSON keys are strings.
                mine = {str(k): v for k, v in mine.items()}
            assert mine == value, (want["unique_id"], key)
        if not is_training:
            assert got.start_position is None and got.is_impossible is None


def test_records_are_protobufs_bytes(golden_dir, tokenizer):
    import tensorflow as tf

    _, features = _features(
        golden_dir / "squad_v2_train_input.json",
        tokenizer,
        GOLDEN_SETTINGS["squad_v2"],
        True,
    )
    impossible = [f for f in features if f.is_impossible]
    assert impossible and len(impossible) < len(features)
    for feature in features[:40] + impossible[:5]:
        for is_training in (True, False):
            values = {
                "unique_ids": [feature.unique_id],
                "input_ids": feature.input_ids,
                "input_mask": feature.input_mask,
                "segment_ids": feature.segment_ids,
            }
            if is_training:
                values["start_positions"] = [feature.start_position]
                values["end_positions"] = [feature.end_position]
                values["is_impossible"] = [int(feature.is_impossible)]
            want = input_pipeline.serialize_example(
                [(k, input_pipeline.int_feature(v)) for k, v in values.items()]
            )
            got = squad.feature_record(feature, is_training)
            assert got == want
            parsed = tf.io.parse_single_example(
                got, input_pipeline.squad_feature_spec(256, is_training)
            )
            assert int(parsed["unique_ids"]) == feature.unique_id
    # Negative int64 values take 10 bytes, as protobuf writes them.
    neg = {"x": [-1, 5, -(2**40)]}
    assert squad.encode_example(neg) == input_pipeline.serialize_example(
        [("x", input_pipeline.int_feature(neg["x"]))]
    )


def test_paragraph_split_keeps_no_break_spaces_in_words():
    words, offsets = squad.split_paragraph(" a\u00a0b  c\u202fd\n")
    assert words == ["a\u00a0b", "c", "d"]
    assert offsets == [-1, 0, 0, 0, 0, 0, 1, 1, 2, 2]


def test_improve_answer_span_takes_the_earliest_exact_match():
    doc = ["the", "19", "##95", "season", "19", "##95"]
    # Word span 1..5 tightened to the first "19 ##95".
    assert squad.improve_answer_span(doc, 1, 5, ["19", "##95"]) == (1, 2)
    assert squad.improve_answer_span(doc, 2, 5, ["19", "##95"]) == (4, 5)
    # No match (or an empty answer): the span is kept.
    assert squad.improve_answer_span(doc, 0, 3, ["1995"]) == (0, 3)
    assert squad.improve_answer_span(doc, 0, 3, []) == (0, 3)


def test_windows_and_max_context():
    spans = squad.doc_spans(10, 4, 2)
    assert spans == [(0, 4), (2, 4), (4, 4), (6, 4)]
    best = squad.max_context_spans(spans, 10)
    # Piece 3: window 0 scores min(3,0)=0, window 1 min(1,2)=1 -> 1.
    # Piece 2: window 0 min(2,1)=1, window 1 min(0,3)=0 -> window 0.
    assert best == [0, 0, 0, 1, 1, 2, 2, 3, 3, 3]
    assert squad.doc_spans(3, 4, 2) == [(0, 3)]
    # A stride longer than a window advances by the window.
    assert squad.doc_spans(9, 3, 5) == [(0, 3), (3, 3), (6, 3)]


def _write(tmp_path, data, name="data.json"):
    path = tmp_path / name
    text = data if isinstance(data, str) else json.dumps(data)
    path.write_text(text, encoding="utf-8")
    return path


def _squad(qas, context="The cat sat on the mat.", title="Cats"):
    return {
        "version": "1.1",
        "data": [
            {"title": title, "paragraphs": [{"context": context, "qas": qas}]}
        ],
    }


def _qa(qid="q1", text="the mat", start=15, answers=None):
    if answers is None:
        answers = [{"text": text, "answer_start": start}]
    return {"id": qid, "question": "Where?", "answers": answers}


@pytest.mark.parametrize(
    "data, is_training, message",
    [
        ('{"data": [', False, "malformed JSON at line 1 column"),
        ({"version": "1.1"}, False, "has no field 'data'"),
        (
            _squad([{"id": "q1", "answers": []}]),
            False,
            "article #0 'Cats', question id 'q1': question has no field "
            "'question'",
        ),
        (
            _squad([_qa(start=18)]),
            True,
            "question id 'q1': answer_start 18 puts the answer text 'the mat' "
            "outside the context (23 characters)",
        ),
        (
            _squad([_qa(answers=[{"text": "mat", "answer_start": 19}] * 2)]),
            True,
            "question id 'q1': 2 answers; for training each question must "
            "have exactly 1 answer",
        ),
        (
            _squad([_qa(text="x", start=3)], context=" \n "),
            True,
            "question id 'q1': answer_start 3 puts the answer text 'x' "
            "outside the context (3 characters)",
        ),
        (
            _squad([{**_qa(), "id": True}]),
            False,
            "field 'id' is bool, expected str or int",
        ),
        (
            _squad([_qa(answers=[{"text": "mat", "answer_start": "19"}])]),
            True,
            "field 'answer_start' is str, expected int",
        ),
        # A predict file's answers as a dict of lists: left unscored.
        (
            _squad([_qa(answers={"text": ["mat"], "answer_start": [19]})]),
            False,
            "field 'answers' is dict, expected list",
        ),
        # Predictions are keyed by id: two questions would merge.
        (
            _squad([_qa(), _qa("q2"), _qa()]),
            False,
            "question id 'q1': this question id is used twice",
        ),
    ],
)
def test_bad_input_is_one_error_naming_the_place(
    tmp_path, data, is_training, message
):
    path = _write(tmp_path, data)
    with pytest.raises(ValueError) as e:
        squad.read_squad_examples(str(path), is_training)
    assert str(e.value).startswith(str(path))
    assert message in str(e.value)
    assert "\n" not in str(e.value)


def test_an_empty_context_is_predicted_as_the_original(tmp_path):
    path = _write(tmp_path, _squad([_qa()], context=" \n "))
    (example,), stats = squad.read_squad_examples(str(path), False)
    assert example.doc_tokens == [] and stats.num_empty_contexts == 1


def test_inputs_the_original_read_are_read(tmp_path):
    """An int question id (its decimal string, as json.dumps writes the
    key), is_impossible as 1/0, a v2 training paragraph with an empty
    context and unanswerable questions only (no window, as the original's
    no feature), an empty training answer (skipped and counted): each
    stopped the run."""
    path = _write(tmp_path, _squad([_qa(qid=17)]))
    (example,), _ = squad.read_squad_examples(str(path), False)
    assert example.qas_id == "17"
    qas = [
        dict(_qa("a", answers=[]), is_impossible=1),
        dict(_qa("b"), is_impossible=0),
    ]
    path = _write(tmp_path, _squad(qas))
    examples, _ = squad.read_squad_examples(str(path), True, True)
    assert [e.is_impossible for e in examples] == [True, False]
    with pytest.raises(ValueError, match="is_impossible is 2"):
        bad = [dict(_qa("a", answers=[]), is_impossible=2)]
        squad.read_squad_examples(
            str(_write(tmp_path, _squad(bad))), True, True
        )
    empty = [dict(_qa("e", answers=[]), is_impossible=True)]
    path = _write(tmp_path, _squad(empty, context=" "))
    (example,), stats = squad.read_squad_examples(str(path), True, True)
    assert example.doc_tokens == [] and stats.num_empty_contexts == 1
    good = [_qa(f"g{i}", "cat", 4) for i in range(19)]
    path = _write(tmp_path, _squad([*good, _qa("x", text="")]))
    examples, stats = squad.read_squad_examples(str(path), True)
    assert len(examples) == 19 and stats.num_skipped == 1


def test_v2_training_needs_is_impossible(tmp_path):
    path = _write(tmp_path, _squad([_qa()]))
    with pytest.raises(ValueError, match="has no field 'is_impossible'"):
        squad.read_squad_examples(str(path), True, True)
    qa = dict(_qa(answers=[]), is_impossible=True)
    path = _write(tmp_path, _squad([qa]))
    (example,), _ = squad.read_squad_examples(str(path), True, True)
    assert example.is_impossible and example.start_position == -1
    # As the original, an unanswerable question's answers are not read.
    del qa["answers"]
    path = _write(tmp_path, _squad([qa]))
    (example,), _ = squad.read_squad_examples(str(path), True, True)
    assert example.orig_answer_text == ""


def test_unrecoverable_answers_are_skipped_then_an_error(tmp_path):
    # A no-break space is inside a paragraph word but splits the answer
    # text: "the\u00a0mat" is not found in the words, so it is skipped.
    context = "The cat sat on the\u00a0mat."
    good = [_qa(f"g{i}", "cat", 4) for i in range(19)]
    bad = _qa("bad", "the\u00a0mat", 15)
    path = _write(tmp_path, _squad([*good, bad], context=context))
    examples, stats = squad.read_squad_examples(str(path), True)
    assert len(examples) == 19 and stats.num_skipped == 1
    with pytest.raises(ValueError, match="1 of 20 training questions"):
        squad.read_squad_examples(str(path), True, max_skipped_fraction=0.01)


def test_answers_of_whitespace_or_before_the_first_word_are_skipped(tmp_path):
    # An empty cleaned text is "found" anywhere, and whitespace before the
    # first word is word -1: the original trained on a wrong span (an end
    # before its start) or crashed.
    good = [_qa(f"g{i}", "cat", 5) for i in range(17)]
    bad = [
        _qa("space", " ", 0),  # The whitespace before "The".
        _qa("space_inside", " ", 4),  # Between "The" and "cat".
        _qa("before_first_word", " The", 0),
    ]
    path = _write(tmp_path, _squad([*good, *bad], context=" The cat"))
    examples, stats = squad.read_squad_examples(
        str(path), True, max_skipped_fraction=0.2
    )
    assert [e.qas_id for e in examples] == [f"g{i}" for i in range(17)]
    assert stats.num_skipped == 3


def test_inexact_answer_starts_train_as_in_the_original(tmp_path):
    # A start a character or two off: the words it covers contain the
    # answer, so it trains on them (counted); a start at other words:
    # skipped, as the original does.
    qas = [_qa("exact"), _qa("late", start=16), _qa("early", start=14)]
    qas.append(_qa("elsewhere", start=4))
    path = _write(tmp_path, _squad(qas))
    examples, stats = squad.read_squad_examples(
        str(path), True, max_skipped_fraction=0.25
    )
    assert [e.qas_id for e in examples] == ["exact", "late", "early"]
    assert [(e.start_position, e.end_position) for e in examples] == [
        (4, 5),
        (4, 5),
        (3, 5),
    ]
    assert stats.num_inexact_starts == 2 and stats.num_skipped == 1


def test_a_byte_order_mark_is_not_json(tmp_path):
    path = _write(tmp_path, _squad([_qa()]))
    path.write_bytes(b"\xef\xbb\xbf" + path.read_bytes())
    (example,), _ = squad.read_squad_examples(str(path), True)
    assert example.orig_answer_text == "the mat"


def test_long_questions_are_cut_and_counted(tmp_path, tokenizer):
    qa = dict(_qa(), question="where " * 40)
    path = _write(tmp_path, _squad([qa, _qa("q2")]))
    examples, _ = squad.read_squad_examples(str(path), True)
    features, stats = [], {}
    squad.convert_examples_to_features(
        examples, tokenizer, 64, 16, 8, True, features.append, stats
    )
    assert stats == {"num_truncated_queries": 1, "num_features": 2}
    assert features[0].tokens[:10] == ["[CLS]"] + ["where"] * 8 + ["[SEP]"]
    # The answer "the mat" is pieces 4..5 of the document.
    assert features[0].tokens[features[0].start_position] == "the"
    assert features[0].tokens[features[0].end_position] == "mat"


def test_the_first_examples_windows_are_logged(tmp_path, tokenizer, caplog):
    # As the original: every window of the first 20 examples, with the
    # answer's pieces (a user's check of the spans).
    qas = [_qa(f"q{i}") for i in range(squad.LOGGED_EXAMPLES + 3)]
    path = _write(tmp_path, _squad(qas))
    examples, _ = squad.read_squad_examples(str(path), True)
    with caplog.at_level("INFO"):
        squad.convert_examples_to_features(
            examples, tokenizer, 64, 16, 8, True, lambda feature: None
        )
    assert caplog.text.count("*** Example ***") == squad.LOGGED_EXAMPLES
    assert "answer: the mat" in caplog.text
    assert "token_is_max_context: " in caplog.text


def test_write_features_is_atomic(tmp_path, tokenizer):
    path = _write(tmp_path, _squad([_qa()]))
    examples, _ = squad.read_squad_examples(str(path), True)
    out = tmp_path / "out"
    out.mkdir()

    class Broken:
        vocab = tokenizer.vocab

        def tokenize(self, text):
            raise RuntimeError("boom")

    with pytest.raises(RuntimeError):
        squad.write_features(
            examples, Broken(), 64, 16, 8, True, str(out / "train.tf_record")
        )
    assert list(out.iterdir()) == []
    num, kept, _ = squad.write_features(
        examples,
        tokenizer,
        64,
        16,
        8,
        True,
        str(out / "train.tf_record"),
        keep=True,
    )
    assert num == 1 and kept[0].unique_id == squad.FIRST_UNIQUE_ID
    assert [p.name for p in out.iterdir()] == ["train.tf_record"]


def test_data_and_post_processing_import_no_tensorflow():
    """Reading, converting, writing records, post-processing and scoring
    run without TensorFlow (it takes seconds and hundreds of MB)."""
    import subprocess
    import sys

    from constants import REPO_ROOT

    code = (
        "import sys\n"
        "import modeling.data.squad, modeling.tasks.squad_postprocess\n"
        "import modeling.tasks.squad_metrics\n"
        "print(sorted(m for m in ('tensorflow', 'keras') if m in sys.modules))"
    )
    proc = subprocess.run(
        [sys.executable, "-c", code],
        capture_output=True,
        text=True,
        cwd=REPO_ROOT,
        check=True,
    )
    assert proc.stdout.strip() == "[]"
