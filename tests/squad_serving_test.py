"""run_squad's serving SavedModel: raw questions and contexts in, the same
answers as the Python path (modeling/data/squad.py features, then
squad_postprocess.compute_predictions, which is the original's) out.

The model is a tiny random BERT over the real uncased vocabulary: its answers
are random spans, which is what exercises the text rules (spans starting or
ending inside a word, punctuation, accents, [UNK], several windows). The
contexts are long enough for 2 to 5 windows at seq 48, stride 16.
"""

import json

import numpy as np
import pytest
import run_squad_test
import tensorflow as tf
import tensorflow_text  # noqa: F401 (registers the tokenizer ops)
import tolerance
from constants import TINY_CONFIG

from modeling import config as config_lib
from modeling import models
from modeling.data import squad as squad_data
from modeling.export import squad as squad_export
from modeling.tasks import squad as squad_lib
from modeling.tasks import squad_postprocess
from modeling.text import tokenization

# run_squad_test's sizes: its python_predictions is the reference.
SEQ, STRIDE, QUERY = (
    run_squad_test.SEQ,
    run_squad_test.STRIDE,
    run_squad_test.QUERY,
)

CONTEXTS = [
    # Punctuation attached to words, numbers, a possessive.
    "Super Bowl 50 was an American football game to determine the champion "
    "of the National Football League (NFL) for the 2015 season. The Denver "
    "Broncos defeated the Carolina Panthers 24-10 to earn their third title. "
    "The game was played on February 7, 2016, at Levi's Stadium.",
    # Accents: precomposed (kept length) and decomposed (e + U+0301: the
    # normalized word is shorter, so whole words), a no-break space inside a
    # word, tabs and newlines between words, U+202F.
    "Caf\u00e9s in Montr\u00e9al serve cre\u0301pes\u00a0and tea.\tThe "
    "na\u00efve visitor\norders a\u202fcr\u00e8me br\u00fbl\u00e9e, "
    "then walks to the Basilique Notre-Dame de Montr\u00e9al; it opened in "
    "1829 and seats 3,200 people.",
    # A word over 200 characters ([UNK]), unknown symbols, hyphens.
    "The gene " + "A" * 210 + " was found in 1990. Its \u2603 symbol and "
    "state-of-the-art sequencing (by Smith-Jones et al.) made the "
    "discovery famous among biologists, chemists and physicists alike.",
    # Short: one window.
    "Rollo was the Norse leader.",
]
QUESTIONS = [
    "Who won?",
    "Where was it?",
    "What is served?",
    "When did it open?",
    "What was found in the year of the discovery?",
]


@pytest.fixture(scope="module")
def model():
    config = config_lib.BertConfig.from_dict(
        dict(TINY_CONFIG, vocab_size=30522, max_position_embeddings=64)
    )
    tf.keras.utils.set_random_seed(7)
    model = models.BertSpanLabeler(config)
    model(
        {
            name: tf.zeros([1, SEQ], tf.int32)
            for name in ("input_ids", "input_mask", "segment_ids")
        }
    )
    return model


def _examples():
    examples = []
    for c, context in enumerate(CONTEXTS):
        doc_tokens, _ = squad_data.split_paragraph(context)
        for q, question in enumerate(QUESTIONS):
            examples.append(
                squad_data.SquadExample(
                    qas_id=f"{c}-{q}",
                    question_text=question,
                    doc_tokens=doc_tokens,
                )
            )
    return examples


def _settings(vocab, n_best_size, v2, fast_nbest=False):
    return squad_lib.Settings(
        bert_config_file="unused",
        vocab_file=vocab,
        output_dir="unused",
        max_seq_length=SEQ,
        doc_stride=STRIDE,
        max_query_length=QUERY,
        n_best_size=n_best_size,
        version_2_with_negative=v2,
        fast_nbest=fast_nbest,
    )


@pytest.fixture(scope="module")
def exports(model, uncased_vocab_file, tmp_path_factory):
    """export(n_best_size, v2, fast_nbest=False): the model's export with
    those settings, saved, loaded, and its folder (each made once: several
    tests ask the same one)."""
    made = {}

    def export(n_best_size, v2, fast_nbest=False):
        key = (n_best_size, v2, fast_nbest)
        if key not in made:
            folder = tmp_path_factory.mktemp("squad_export") / "export"
            squad_export.export_squad(
                model,
                _settings(uncased_vocab_file, n_best_size, v2, fast_nbest),
                str(folder),
            )
            serve = tf.saved_model.load(str(folder)).signatures[
                "serving_default"
            ]
            made[key] = (serve, folder)
        return made[key]

    return export


def _serve(exports, n_best_size, v2):
    """The export, saved and loaded, run on every question at once."""
    serve, folder = exports(n_best_size, v2)
    info = json.loads(
        (folder / "assets.extra" / "bert_export.json").read_text()
    )
    assert info["task"] == "question_answering"
    examples = _examples()
    questions = [e.question_text for e in examples]
    contexts = [CONTEXTS[int(e.qas_id.split("-")[0])] for e in examples]
    out = serve(question=tf.constant(questions), context=tf.constant(contexts))
    return examples, {k: v.numpy() for k, v in out.items()}


def test_a_threshold_at_a_questions_own_difference(model, uncased_vocab_file):
    """--best_null_threshold is one question's null score difference: that
    question keeps its answer, and just below it gets "". The export
    decides in float64 as the Python path does: in float32 both thresholds
    are one number, and the question got the same answer from both."""
    examples = _examples()
    questions = tf.constant([e.question_text for e in examples])
    contexts = tf.constant(
        [CONTEXTS[int(e.qas_id.split("-")[0])] for e in examples]
    )
    _, base = run_squad_test.python_predictions(
        model, uncased_vocab_file, examples, True
    )
    odds = [base.null_odds[e.qas_id] for e in examples]
    found = [o for e, o in zip(examples, odds) if base.best_non_null[e.qas_id]]
    assert len(found) >= 4
    # The difference nearest a float32 number: the one below it rounds to
    # that number too.
    at = min(found, key=lambda o: abs(o - float(np.float32(o))))
    below = np.nextafter(at, -np.inf)
    assert np.float32(below) == np.float32(at)
    s = _settings(uncased_vocab_file, 20, True)
    for threshold in (at, below):
        server = squad_export.SquadServer(
            model,
            s.vocab_file,
            s.do_lower_case,
            SEQ,
            STRIDE,
            QUERY,
            20,
            s.max_answer_length,
            True,
            float(threshold),
        )
        out = server.serve_text(questions, contexts)
        want = squad_postprocess.apply_threshold(base, float(threshold))
        assert [a.decode() for a in out["answer"].numpy()] == [
            want.answers[e.qas_id] for e in examples
        ]


@pytest.mark.parametrize("v2, n_best", [(False, 20), (True, 20), (False, SEQ)])
def test_answers_equal_the_python_path(
    model, uncased_vocab_file, exports, v2, n_best
):
    """Both paths rank the n best over every position of a window's SEQ
    row, its padding included, as the original does."""
    examples, out = _serve(exports, n_best, v2)
    features, expected = run_squad_test.python_predictions(
        model, uncased_vocab_file, examples, v2, n_best=n_best
    )
    windows = [sum(f.example_index == i for f in features) for i in range(4)]
    assert max(windows) >= 3, windows  # Several windows are exercised.
    answers = [a.decode() for a in out["answer"]]
    # "empty": the original's placeholder for no span among the n best.
    assert answers == [
        ""
        if expected.answers[e.qas_id] == "empty"
        else expected.answers[e.qas_id]
        for e in examples
    ]
    # The score is the best n-best entry's start + end logit, v2's null
    # score difference null_odds.json's; a question without any span among
    # the n best has -inf and +inf (the Python path, "" and a placeholder).
    if not v2:
        best = [expected.nbest[e.qas_id][0] for e in examples]
        found = np.array([b["text"] != "empty" for b in best])
        want = [b["start_logit"] + b["end_logit"] for b in best]
        values, missing = out["score"], -np.inf
    else:
        found = np.array(
            [bool(expected.best_non_null[e.qas_id]) for e in examples]
        )
        want = [expected.null_odds[e.qas_id] for e in examples]
        values, missing = out["null_score_diff"], np.inf
    assert np.all(values[~found] == missing)
    tolerance.assert_float32_close(values[found], np.array(want)[found])


def test_default_n_best(model, uncased_vocab_file, exports):
    """n_best_size 20 (the default): the short context's padding takes all
    of the n best places with this random head: no span, "" (predictions.json
    has the original's placeholder "empty")."""
    examples, out = _serve(exports, 20, False)
    _, expected = run_squad_test.python_predictions(
        model, uncased_vocab_file, examples, False
    )
    answers = [a.decode() for a in out["answer"]]
    want = [expected.answers[e.qas_id] for e in examples]
    assert "empty" in want
    assert answers == [("" if a == "empty" else a) for a in want]


def test_start_and_end_pieces(uncased_vocab_file, exports):
    """start_piece / end_piece index the context's pieces: their text,
    joined as the original de-tokenizes, is found in the answer's words."""
    examples, out = _serve(exports, SEQ, False)
    tokenizer = tokenization.FullTokenizer(uncased_vocab_file, True)
    for example, start, end, answer in zip(
        examples,
        out["start_piece"],
        out["end_piece"],
        out["answer"],
        strict=True,
    ):
        pieces = [
            p for word in example.doc_tokens for p in tokenizer.tokenize(word)
        ]
        assert 0 <= start <= end < len(pieces)
        text = " ".join(pieces[start : end + 1]).replace(" ##", "")
        normalized = " ".join(
            tokenization.BasicTokenizer(True).tokenize(answer.decode())
        )
        assert text.replace("##", "") in normalized or "[UNK]" in text


def test_empty_context_and_question(exports):
    """No context pieces: no answer ("" and start_piece -1), not an error."""
    serve, _ = exports(20, False)
    out = serve(
        question=tf.constant(["", "Who?", "Who?"]),
        context=tf.constant(["Rollo led them.", " \t\n", "\u0000"]),
    )
    answers = [a.decode() for a in out["answer"].numpy()]
    assert answers[0] in "Rollo led them."
    assert answers[1:] == ["", ""]
    assert out["start_piece"].numpy()[1:].tolist() == [-1, -1]


@pytest.mark.parametrize("fast_nbest", [False, True])
def test_a_question_alone_gets_its_answer_in_a_batch(exports, fast_nbest):
    """The serving contract: a request's answer does not depend on the
    other requests of its batch (nor on their order): each question asked
    alone gets the answer and score it gets among all the others, by
    default and in an export of a --fast_nbest run."""
    serve, _ = exports(20, False, fast_nbest)
    examples = _examples()
    questions = [e.question_text for e in examples]
    contexts = [CONTEXTS[int(e.qas_id.split("-")[0])] for e in examples]
    together = serve(
        question=tf.constant(questions), context=tf.constant(contexts)
    )
    reverse = serve(
        question=tf.constant(questions[::-1]),
        context=tf.constant(contexts[::-1]),
    )
    for i, (question, context) in enumerate(zip(questions, contexts)):
        alone = serve(
            question=tf.constant([question]), context=tf.constant([context])
        )
        for out, row in ((together, i), (reverse, len(questions) - 1 - i)):
            assert alone["answer"].numpy()[0] == out["answer"].numpy()[row]
            tolerance.assert_float32_close(
                alone["score"].numpy()[0], out["score"].numpy()[row]
            )


@pytest.mark.parametrize(
    "fast_nbest", [False, pytest.param(True, marks=pytest.mark.slow)]
)
def test_an_empty_batch_gets_empty_answers(exports, fast_nbest):
    """No question at all: outputs of batch 0, not an error."""
    serve, _ = exports(20, True, fast_nbest)
    empty = tf.zeros([0], tf.string)
    out = serve(question=empty, context=empty)
    assert out["answer"].shape[0] == 0
    for name, value in out.items():
        assert value.shape[0] == 0, name


@pytest.mark.parametrize(
    "v2, fast_nbest",
    [(True, False), pytest.param(False, True, marks=pytest.mark.slow)],
)
def test_served_without_tensorflow(
    model, uncased_vocab_file, tmp_path, v2, fast_nbest
):
    """An export of a --predict_runtime=tflite run answers on LiteRT with
    the Python tokenizer, in a process where TensorFlow cannot be imported
    (lite.LiteSquad, and predict_lite.py on a SQuAD JSON file): the Python
    path's answers, their probabilities within float32 rounding (XNNPACK's
    kernels against TensorFlow's)."""
    import script_runner

    from modeling.export import tflite

    pytest.importorskip("ai_edge_litert")
    export = tmp_path / "export"
    content, names = tflite.convert(model)
    squad_export.export_squad(
        model,
        _settings(uncased_vocab_file, 20, v2, fast_nbest),
        str(export),
        extra_files=tflite.export_files(content, names, False),
    )
    examples = _examples()
    contexts = [CONTEXTS[int(e.qas_id.split("-")[0])] for e in examples]
    squad_json = tmp_path / "dev.json"
    squad_json.write_text(
        json.dumps(
            {
                "data": [
                    {
                        "title": "t",
                        "paragraphs": [
                            {
                                "context": context,
                                "qas": [
                                    {"id": f"{c}-{q}", "question": question}
                                    for q, question in enumerate(QUESTIONS)
                                ],
                            }
                            for c, context in enumerate(CONTEXTS)
                        ],
                    }
                ]
            }
        )
    )
    out = tmp_path / "predictions.jsonl"
    code = (
        "import json\n"
        "from modeling.tasks import lite\n"
        "model = lite.load(sys.argv[1], batch_size=4)\n"
        "rows = model.predict(*json.loads(sys.argv[2]))\n"
        "sys.argv = ['predict_lite.py', '--export_dir=' + sys.argv[1],\n"
        "            '--input_file=' + sys.argv[3],\n"
        "            '--output_file=' + sys.argv[4], '--batch_size=3']\n"
        "try:\n"
        "    runpy.run_path('predict_lite.py', run_name='__main__')\n"
        "except SystemExit as e:\n"
        "    assert not e.code, e.code\n"
        "assert 'tensorflow' not in sys.modules and 'keras' not in sys.modules\n"
        "print(json.dumps(model.predict(['Who?'], [' '])))\n"
        "print(json.dumps(rows))\n"
    )
    questions = [e.question_text for e in examples]
    proc = script_runner.run_without_tensorflow(
        [
            str(export),
            json.dumps([questions, contexts]),
            str(squad_json),
            str(out),
        ],
        code,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    rows = json.loads(proc.stdout.strip().splitlines()[-1])
    # A context without words has no window: the original's answer.
    (none,) = json.loads(proc.stdout.strip().splitlines()[-2])
    assert none["answer"] == ("" if v2 else "empty")
    # The Python path: TensorFlow's logits, the original's post-processing
    # (the --fast_nbest export ranks each window's own positions only).
    features = []
    squad_data.convert_examples_to_features(
        examples,
        tokenization.FullTokenizer(uncased_vocab_file, True),
        SEQ,
        STRIDE,
        QUERY,
        False,
        features.append,
    )
    inputs = {
        name: np.array([getattr(f, name) for f in features], np.int32)
        for name in ("input_ids", "input_mask", "segment_ids")
    }
    logits = model(inputs, training=False)
    start, end = (logits[k].numpy() for k in ("start_logits", "end_logits"))
    if fast_nbest:
        start = np.where(inputs["input_mask"] == 0, -np.inf, start)
        end = np.where(inputs["input_mask"] == 0, -np.inf, end)
    expected = squad_postprocess.records(
        squad_postprocess.compute_predictions(
            examples,
            features,
            [f.unique_id for f in features],
            start,
            end,
            version_2_with_negative=v2,
        )
    )
    written = [json.loads(x) for x in out.read_text().splitlines()]
    assert [r["id"] for r in written] == [e.qas_id for e in examples]
    for got in (rows, written):
        assert [r["answer"] for r in got] == [r["answer"] for r in expected]
        if v2:  # Some questions are answered, some are not.
            assert 0 < sum(r["answer"] == "" for r in got) < len(got)
        probabilities = [
            (r["probability"], e["probability"])
            for r, e in zip(got, expected, strict=True)
            if e["probability"] is not None
        ]
        assert probabilities
        tolerance.assert_float32_close(*np.array(probabilities).T)


def test_an_unknown_character_beside_the_answer_keeps_it_cut(
    uncased_vocab_file,
):
    """get_final_text falls back to the whole words only when an [UNK] is
    among the answer's own pieces. An [UNK] elsewhere in the same word (a
    rare character in CJK text written without spaces: one "word" is the
    whole paragraph) made the export answer with the whole paragraph."""
    vocab = tokenization.FullTokenizer(uncased_vocab_file).vocab
    cases = [
        ("Where?", "hello abc,\u2603\u2603 world", "abc", "abc", "abc"),
        (
            "Where?",
            "\u6771\u4eac\u306f\u65e5\u672c\u306e\u9996\u90fd\u3067\u3059"
            "\u3002\U00020bb7\u91ce\u5bb6",
            "\u6771",
            "\u4eac",
            "\u6771\u4eac",
        ),
    ]

    for question, context, start, end, want in cases:
        start_id, end_id = vocab[start], vocab[end]

        def model(features, training=False, start_id=start_id, end_id=end_id):
            ids = features["input_ids"]
            return {
                "start_logits": tf.cast(tf.equal(ids, start_id), tf.float32)
                * 9,
                "end_logits": tf.cast(tf.equal(ids, end_id), tf.float32) * 9,
            }

        server = squad_export.SquadServer(
            model,
            uncased_vocab_file,
            True,
            SEQ,
            STRIDE,
            QUERY,
            20,
            30,
            False,
            0.0,
        )
        out = server.serve_text(tf.constant([question]), tf.constant([context]))
        assert out["answer"].numpy()[0].decode() == want
        # The Python path (the original's get_final_text) agrees.
        examples = [
            squad_data.SquadExample(
                qas_id="q",
                question_text=question,
                doc_tokens=squad_data.split_paragraph(context)[0],
            )
        ]
        _, expected = run_squad_test.python_predictions(
            model, uncased_vocab_file, examples, False, n_best=20
        )
        assert expected.answers["q"] == want
