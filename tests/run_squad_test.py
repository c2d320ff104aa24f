"""run_squad.py end to end on a tiny model: fine-tune a few steps, predict,
score; predict again from the fine-tuned checkpoint alone; bad input.

The model is a tiny random BERT (hidden 32, 2 layers) over the real uncased
vocabulary, trained from scratch for a few steps: the answers are not good,
but every file is checked against an independent recomputation from the
saved checkpoint.
"""

import json

import numpy as np
import pytest
import script_runner
import tolerance
from constants import REPO_ROOT
from constants import TINY_CONFIG

from modeling import checkpoints
from modeling import config as config_lib
from modeling import models
from modeling.data import squad as squad_data
from modeling.tasks import squad as squad_lib
from modeling.tasks import squad_postprocess
from modeling.text import tokenization

SEQ, STRIDE, QUERY = 48, 16, 12

PARAGRAPHS = [
    (
        "Normandy",
        "The Normans were the people who in the 10th and 11th centuries "
        "gave their name to Normandy, a region in France. They were "
        "descended from Norse raiders and pirates from Denmark, Iceland and "
        "Norway who, under their leader Rollo, agreed to swear fealty to "
        "King Charles III of West Francia.",
        [
            ("In what country is Normandy located?", "France"),
            ("When were the Normans in Normandy?", "10th and 11th centuries"),
            ("Who was the Norse leader?", "Rollo"),
            (
                "From which countries did the Norse originate?",
                "Denmark, Iceland and Norway",
            ),
        ],
    ),
    (
        "Super Bowl",
        "Super Bowl 50 was an American football game to determine the "
        "champion of the National Football League for the 2015 season. The "
        "Denver Broncos defeated the Carolina Panthers 24 to 10 to earn "
        "their third Super Bowl title. The game was played on February 7, "
        "2016, at Levi's Stadium in Santa Clara, California.",
        [
            ("Which team won Super Bowl 50?", "Denver Broncos"),
            ("Where was Super Bowl 50 played?", "Santa Clara, California"),
            ("When was the game played?", "February 7, 2016"),
            ("What was the final score?", "24 to 10"),
        ],
    ),
]


def squad_file(path, version_2=False, several_answers=False):
    """A small SQuAD file; with version_2 one question per paragraph has no
    answer; with several_answers each question has two (predict files)."""
    data = []
    for p_index, (title, context, questions) in enumerate(PARAGRAPHS):
        qas = []
        for q_index, (question, answer) in enumerate(questions):
            start = context.index(answer)
            answers = [{"text": answer, "answer_start": start}]
            if several_answers:
                answers.append(
                    {
                        "text": answer.split()[-1],
                        "answer_start": start
                        + answer.rindex(answer.split()[-1]),
                    }
                )
            qa = {
                "id": f"q{p_index}{q_index}",
                "question": question,
                "answers": answers,
            }
            if version_2:
                qa["is_impossible"] = q_index == 3
                if q_index == 3:
                    qa["question"] = "Who painted the Mona Lisa?"
                    qa["answers"] = []
            qas.append(qa)
        data.append(
            {"title": title, "paragraphs": [{"context": context, "qas": qas}]}
        )
    path.write_text(json.dumps({"version": "x", "data": data}))
    return path


@pytest.fixture(scope="module")
def tiny_model(tmp_path_factory, uncased_vocab_file):
    out = tmp_path_factory.mktemp("tiny_squad_model")
    config = dict(TINY_CONFIG, vocab_size=30522, max_position_embeddings=64)
    (out / "bert_config.json").write_text(json.dumps(config))
    return out


def _run_script(args, timeout=600):
    return script_runner.python(
        [str(REPO_ROOT / "run_squad.py"), *map(str, args)],
        timeout=timeout,
    )


def _common_args(tiny_model, vocab, out):
    return [
        f"--vocab_file={vocab}",
        f"--bert_config_file={tiny_model / 'bert_config.json'}",
        f"--output_dir={out}",
        f"--max_seq_length={SEQ}",
        f"--doc_stride={STRIDE}",
        f"--max_query_length={QUERY}",
        "--predict_batch_size=5",
    ]


@pytest.fixture(scope="module")
def v2_run(tmp_path_factory, tiny_model, uncased_vocab_file):
    """Fine-tunes 4 steps (8 questions / batch 2 * 1 epoch), then predicts
    on a file with answers, choosing the best null threshold."""
    tmp = tmp_path_factory.mktemp("squad_v2_run")
    train = squad_file(tmp / "train.json", version_2=True)
    predict = squad_file(tmp / "dev.json", version_2=True)
    out = tmp / "out"
    proc = _run_script(
        _common_args(tiny_model, uncased_vocab_file, out)
        + [
            "--do_train",
            f"--train_file={train}",
            "--do_predict",
            f"--predict_file={predict}",
            "--version_2_with_negative",
            "--best_null_threshold",
            "--train_batch_size=2",
            "--num_train_epochs=1",
            "--learning_rate=1e-3",
            "--save_checkpoints_steps=2",
            "--random_seed=3",
        ]
    )
    assert proc.returncode == 0, proc.stderr[-4000:]
    return tmp, out


def _read_json(path):
    return json.loads(path.read_text())


def _eval_results(path):
    return dict(
        line.split(" = ") for line in path.read_text().splitlines() if line
    )


def python_predictions(model, vocab, examples, v2, threshold=0.0, n_best=20):
    """(features, Predictions) of `model` on `examples` through the Python
    path: the original's features at SEQ / STRIDE / QUERY, then its
    post-processing (also squad_serving_test's reference)."""
    features = []
    tokenizer = tokenization.FullTokenizer(vocab, True)
    squad_data.convert_examples_to_features(
        examples, tokenizer, SEQ, STRIDE, QUERY, False, features.append
    )
    inputs = {
        name: np.array([getattr(f, name) for f in features], np.int32)
        for name in ("input_ids", "input_mask", "segment_ids")
    }
    outputs = model(inputs, training=False)
    return features, squad_postprocess.compute_predictions(
        examples,
        features,
        [f.unique_id for f in features],
        outputs["start_logits"].numpy(),
        outputs["end_logits"].numpy(),
        n_best_size=n_best,
        version_2_with_negative=v2,
        null_score_diff_threshold=threshold,
    )


def _recompute(tiny_model, vocab, prefix, predict_file, v2, threshold):
    """Predictions from the checkpoint, outside the script."""
    config = config_lib.BertConfig.from_json_file(
        tiny_model / "bert_config.json"
    )
    model = models.BertSpanLabeler(config)
    checkpoints.load_weights(model, prefix)
    examples, _ = squad_data.read_squad_examples(predict_file, False)
    features, predictions = python_predictions(
        model, vocab, examples, v2, threshold
    )
    return examples, features, predictions


def test_v2_train_predict_end_to_end(v2_run, tiny_model, uncased_vocab_file):
    tmp, out = v2_run
    names = {p.name for p in out.iterdir()}
    for name in (
        "train.tf_record",
        "eval.tf_record",
        "predictions.json",
        "nbest_predictions.json",
        "null_odds.json",
        "eval_results.txt",
        "checkpoint",
        "model.ckpt-4.index",
    ):
        assert name in names, name
    assert not [n for n in names if ".tmp-" in n]
    results = _eval_results(out / "eval_results.txt")
    assert results["global_step"] == "4"
    threshold = float(results["null_score_diff_threshold"])
    odds = _read_json(out / "null_odds.json")
    # The official best_f1_thresh, or below every value when answering
    # nothing is best; either way the predictions score best_f1.
    assert threshold == float(results["best_f1_thresh"]) or threshold < min(
        odds.values()
    )
    assert float(results["f1"]) == pytest.approx(float(results["best_f1"]))
    for key in ("exact", "HasAns_f1", "NoAns_total", "best_exact"):
        assert key in results

    _, _, want = _recompute(
        tiny_model,
        uncased_vocab_file,
        out / "model.ckpt-4",
        tmp / "dev.json",
        True,
        threshold,
    )
    answers = _read_json(out / "predictions.json")
    nbest = _read_json(out / "nbest_predictions.json")
    assert list(answers) == [f"q{p}{q}" for p in range(2) for q in range(4)]
    assert odds.keys() == want.null_odds.keys()
    for qid in odds:
        tolerance.assert_float32_close(odds[qid], want.null_odds[qid])
        # The chosen threshold is some question's null_odds value: on that
        # one, float rounding of the recomputation may fall either side.
        if abs(odds[qid] - threshold) > 1e-4:
            assert answers[qid] == want.answers[qid], qid
        else:
            assert answers[qid] in ("", want.best_non_null[qid]), qid
        assert [e["text"] for e in nbest[qid]] == [
            e["text"] for e in want.nbest[qid]
        ]


def _predict_with_trained(v2_run, tiny_model, vocab, out, extra=()):
    """run_squad.py --do_predict on v2_run's dev file from its checkpoint,
    with its null threshold: (the process, the threshold)."""
    tmp, trained = v2_run
    threshold = _eval_results(trained / "eval_results.txt")[
        "null_score_diff_threshold"
    ]
    proc = _run_script(
        _common_args(tiny_model, vocab, out)
        + [
            f"--init_checkpoint={trained / 'model.ckpt-4'}",
            "--do_predict",
            f"--predict_file={tmp / 'dev.json'}",
            "--version_2_with_negative",
            f"--null_score_diff_threshold={threshold}",
            *extra,
        ]
    )
    return proc, threshold


def test_checkpoint_with_span_head_predicts_without_training(
    v2_run, tiny_model, uncased_vocab_file, tmp_path
):
    """--init_checkpoint with cls/squad/* and --do_predict alone: the same
    files as the run that trained it (same threshold)."""
    tmp, trained = v2_run
    out = tmp_path / "predict_only"
    proc, _ = _predict_with_trained(v2_run, tiny_model, uncased_vocab_file, out)
    assert proc.returncode == 0, proc.stderr[-4000:]
    assert "untrained" not in proc.stderr
    for name in ("predictions.json", "null_odds.json"):
        assert _read_json(out / name) == _read_json(trained / name), name
    assert not (out / "train.tf_record").exists()


def test_export_answers_like_predictions_json(
    v2_run, tiny_model, uncased_vocab_file, tmp_path
):
    """--export_dir: the SavedModel answers the dev questions from their
    raw text as predictions.json does (the default n_best_size: both rank
    every position of a window's row, padding included), with
    null_odds.json's null score differences; with --best_null_threshold,
    at the threshold the run chose, not the flag's."""
    import tensorflow as tf
    import tensorflow_text  # noqa: F401 (registers the tokenizer ops)

    tmp, _ = v2_run
    out = tmp_path / "export_run"
    export = tmp_path / "export"
    proc, threshold = _predict_with_trained(
        v2_run,
        tiny_model,
        uncased_vocab_file,
        out,
        [
            f"--export_dir={export}",
            "--best_null_threshold",
            "--null_score_diff_threshold=5.0",
        ],
    )
    assert proc.returncode == 0, proc.stderr[-4000:]
    info = _read_json(export / "assets.extra" / "bert_export.json")
    assert info["null_score_diff_threshold"] == pytest.approx(float(threshold))
    assert info["doc_stride"] == STRIDE and info["version_2_with_negative"]
    serve = tf.saved_model.load(str(export)).signatures["serving_default"]
    data = _read_json(tmp / "dev.json")["data"]
    rows = [
        (qa["id"], qa["question"], paragraph["context"])
        for article in data
        for paragraph in article["paragraphs"]
        for qa in paragraph["qas"]
    ]
    got = serve(
        question=tf.constant([r[1] for r in rows]),
        context=tf.constant([r[2] for r in rows]),
    )
    answers = _read_json(out / "predictions.json")
    odds = _read_json(out / "null_odds.json")
    tolerance.assert_float32_close(
        got["null_score_diff"].numpy(), [odds[r[0]] for r in rows]
    )
    # One context per question (was "Detected at node sub_4").
    with pytest.raises(
        tf.errors.InvalidArgumentError, match="the same batch size"
    ):
        serve(
            question=tf.constant([r[1] for r in rows[:2]]),
            context=tf.constant([r[2] for r in rows[:3]]),
        )
    for (qid, _, _), answer, diff in zip(
        rows, got["answer"].numpy(), got["null_score_diff"].numpy()
    ):
        if abs(diff - float(threshold)) > 1e-4:  # Not on the threshold.
            assert answer.decode() == answers[qid], qid


def test_bad_input_is_one_line_and_leaves_nothing(
    tmp_path, tiny_model, uncased_vocab_file
):
    train = tmp_path / "train.json"
    train.write_text('{"data": [{"title": "x", "paragraphs": [}')
    out = tmp_path / "out"
    proc = _run_script(
        _common_args(tiny_model, uncased_vocab_file, out)
        + ["--do_train", f"--train_file={train}"]
    )
    assert proc.returncode == 1
    lines = proc.stderr.strip().splitlines()
    assert lines[-1].startswith(f"error: {train}: malformed JSON at line 1")
    assert "Traceback" not in proc.stderr
    assert not out.exists()


@pytest.mark.parametrize(
    "case, message",
    [
        ("several", "question id 'q00': 2 answers"),
        ("start", "question id 'q01': answer_start 100000 puts the answer"),
        ("missing", "question id 'q02': question has no field 'question'"),
        ("empty", "question id 'q10': answer_start 127 puts the answer text"),
    ],
)
def test_bad_training_files(
    tmp_path, tiny_model, uncased_vocab_file, case, message
):
    path = squad_file(tmp_path / "train.json", several_answers=True)
    data = _read_json(path)
    qas = data["data"][0]["paragraphs"][0]["qas"]
    if case != "several":
        for a in data["data"]:
            for qa in a["paragraphs"][0]["qas"]:
                del qa["answers"][1:]
    if case == "start":
        qas[1]["answers"][0]["answer_start"] = 100000
    elif case == "missing":
        del qas[2]["question"]
        del qas[0:2]
    elif case == "empty":
        del data["data"][0]
        data["data"][0]["paragraphs"][0]["context"] = "  "
    path.write_text(json.dumps(data))
    out = tmp_path / "out"
    settings = squad_lib.Settings(
        vocab_file=uncased_vocab_file,
        bert_config_file=str(tiny_model / "bert_config.json"),
        output_dir=str(out),
        train_file=str(path),
        do_train=True,
        max_seq_length=SEQ,
        max_query_length=QUERY,
    )
    with pytest.raises(ValueError) as e:
        squad_lib.run(settings)
    assert str(e.value).startswith(f"{path}, article #")
    assert message in str(e.value)
    assert not out.exists()


@pytest.mark.parametrize("case", ["missing_checkpoint", "no_window"])
def test_a_run_that_cannot_train_stops_before_its_features(
    tmp_path, tiny_model, uncased_vocab_file, case
):
    """A bad --init_checkpoint was found only after minutes of conversion
    had written train.tf_record; a file whose paragraphs are all empty
    ended in TensorFlow's 'End of sequence'."""
    path = squad_file(tmp_path / "train.json")
    data = _read_json(path)
    kwargs = {}
    if case == "missing_checkpoint":
        kwargs["init_checkpoint"] = str(tmp_path / "nope" / "bert_model.ckpt")
        message = f"--init_checkpoint={kwargs['init_checkpoint']}: "
    else:
        for article in data["data"]:
            for paragraph in article["paragraphs"]:
                paragraph["context"] = " "
                for qa in paragraph["qas"]:
                    qa["is_impossible"] = True
                    qa["answers"] = []
        path.write_text(json.dumps(data))
        kwargs["version_2_with_negative"] = True
        message = f"--train_file={path}: no question to train on has a window"
    out = tmp_path / "out"
    settings = squad_lib.Settings(
        vocab_file=uncased_vocab_file,
        bert_config_file=str(tiny_model / "bert_config.json"),
        output_dir=str(out),
        train_file=str(path),
        do_train=True,
        max_seq_length=SEQ,
        max_query_length=QUERY,
        train_batch_size=2,
        **kwargs,
    )
    with pytest.raises((ValueError, FileNotFoundError)) as e:
        squad_lib.run(settings)
    assert str(e.value).startswith(message)
    if case == "missing_checkpoint":
        assert not (out / squad_lib.TRAIN_RECORD_FILE).exists()


def test_which_predict_files_are_scored():
    """v2: a file where no question has an answer is taken as unlabelled
    (scoring it would count every answer wrong)."""
    import types

    def examples(*answers, impossible=None):
        return [
            types.SimpleNamespace(
                qas_id=f"q{i}", answers=a, is_impossible=impossible
            )
            for i, a in enumerate(answers)
        ]

    assert squad_lib.gold_answers(examples([], []), True) is None
    # A labelled file of unanswerable questions only is scored.
    assert squad_lib.gold_answers(examples([], impossible=True), True) == {
        "q0": []
    }
    assert squad_lib.gold_answers(examples([], ["x"]), True) == {
        "q0": [],
        "q1": ["x"],
    }
    assert squad_lib.gold_answers(examples([], ["x"]), False) is None
    assert squad_lib.gold_answers(examples(None, ["x"]), True) is None


def test_settings_checks(tiny_model, uncased_vocab_file, tmp_path):
    base = dict(
        vocab_file=uncased_vocab_file,
        bert_config_file=str(tiny_model / "bert_config.json"),
        output_dir=str(tmp_path / "out"),
    )
    cases = [
        ({}, "At least one of `do_train` or `do_predict`"),
        ({"do_train": True}, "`train_file` must be specified"),
        ({"do_predict": True}, "`predict_file` must be specified"),
        (
            {"do_predict": True, "predict_file": "x", "max_seq_length": 128},
            "only trained up to sequence length 64",
        ),
        (
            {
                "do_predict": True,
                "predict_file": "x",
                "max_seq_length": 40,
                "max_query_length": 37,
            },
            "must be greater than max_query_length",
        ),
        (
            {
                "do_predict": True,
                "predict_file": "x",
                "max_seq_length": 40,
                "best_null_threshold": True,
            },
            "--version_2_with_negative",
        ),
    ]
    for flag, value in (
        ("doc_stride", 0),
        ("n_best_size", 0),
        ("max_answer_length", 0),
        ("max_query_length", -1),
    ):
        cases.append(
            (
                {
                    "do_predict": True,
                    "predict_file": "x",
                    "max_seq_length": 64,
                    "max_query_length": 8,
                    flag: value,
                },
                f"--{flag} must be at least {value + 1}, got {value}",
            )
        )
    for extra, message in cases:
        with pytest.raises(ValueError, match=message):
            squad_lib.run(squad_lib.Settings(**base, **extra))
    assert not (tmp_path / "out").exists()


def test_v1_train_with_eval_during_training(
    tmp_path, tiny_model, uncased_vocab_file
):
    """v1: eval_results.txt holds the official scores of predictions.json
    against every gold answer; the best checkpoint by F1 is kept."""
    from modeling.tasks import squad_metrics

    train = squad_file(tmp_path / "train.json")
    predict = squad_file(tmp_path / "dev.json", several_answers=True)
    out = tmp_path / "out"
    proc = _run_script(
        _common_args(tiny_model, uncased_vocab_file, out)
        + [
            "--do_train",
            f"--train_file={train}",
            "--do_predict",
            f"--predict_file={predict}",
            "--train_batch_size=2",
            "--num_train_epochs=1",
            "--learning_rate=1e-3",
            "--save_checkpoints_steps=2",
            "--eval_during_training",
            "--random_seed=5",
        ]
    )
    assert proc.returncode == 0, proc.stderr[-4000:]
    assert not (out / "null_odds.json").exists()
    answers = _read_json(out / "predictions.json")
    gold = {
        qa["id"]: [a["text"] for a in qa["answers"]]
        for article in _read_json(predict)["data"]
        for qa in article["paragraphs"][0]["qas"]
    }
    want = squad_metrics.evaluate_v1(gold, answers)
    results = _eval_results(out / "eval_results.txt")
    assert set(results) == {"exact_match", "f1", "global_step"}
    assert float(results["f1"]) == pytest.approx(want["f1"])
    assert float(results["exact_match"]) == pytest.approx(want["exact_match"])
    history = (out / "eval_history.txt").read_text().splitlines()
    steps = [line.split("global_step = ")[1].split()[0] for line in history]
    assert steps == ["2", "4"]
    best = _eval_results(out / "best" / "eval_results.txt")
    f1s = [float(line.split(" f1 = ")[1].split()[0]) for line in history]
    assert float(best["best_metric"]) == pytest.approx(max(f1s))
    step = best["global_step"]
    assert (out / "best" / f"model.ckpt-{step}.index").exists()


def test_resume_after_a_kill_ends_like_an_uninterrupted_run(
    tmp_path, uncased_vocab_file, caplog
):
    """Training stopped after its step-2 checkpoint and run again resumes
    there (weights, slots, step, data position): the same final weights
    (dropout off, so no random draw differs)."""
    import dataclasses

    config = dict(
        TINY_CONFIG,
        vocab_size=30522,
        max_position_embeddings=64,
        hidden_dropout_prob=0.0,
        attention_probs_dropout_prob=0.0,
    )
    (tmp_path / "bert_config.json").write_text(json.dumps(config))
    train = squad_file(tmp_path / "train.json")

    def settings(out):
        s = squad_lib.Settings(
            vocab_file=uncased_vocab_file,
            bert_config_file=str(tmp_path / "bert_config.json"),
            output_dir=str(out),
            train_file=str(train),
            do_train=True,
            max_seq_length=SEQ,
            doc_stride=STRIDE,
            max_query_length=QUERY,
            train_batch_size=2,
            num_train_epochs=1.0,
            random_seed=7,
        )
        s.run_config = dataclasses.replace(
            s.run_config, save_checkpoints_steps=2, learning_rate=1e-3
        )
        return s

    squad_lib.run(settings(tmp_path / "a"))
    resumed = tmp_path / "b"
    squad_lib.run(settings(resumed))
    # A kill after step 2's checkpoint: step 4's never written.
    for path in resumed.glob("model.ckpt-4.*"):
        path.unlink()
    (resumed / "checkpoint").unlink()
    with caplog.at_level("INFO"):
        squad_lib.run(settings(resumed))
    assert "model.ckpt-2 at global_step 2" in caplog.text
    want = checkpoints.read_checkpoint(str(tmp_path / "a" / "model.ckpt-4"))
    got = checkpoints.read_checkpoint(str(resumed / "model.ckpt-4"))
    assert want.keys() == got.keys()
    assert "cls/squad/output_weights" in got and "global_step" in got
    for name in want:
        tolerance.assert_float32_close(got[name], want[name])


@pytest.fixture(scope="module")
def random_span_head(tmp_path_factory, tiny_model):
    """A checkpoint of a random BertSpanLabeler, its span head included:
    random start/end logits, so padding positions rank among the n best."""
    import keras

    keras.utils.set_random_seed(11)
    config = config_lib.BertConfig.from_json_file(
        tiny_model / "bert_config.json"
    )
    model = models.BertSpanLabeler(config)
    prefix = tmp_path_factory.mktemp("random_span_head") / "model.ckpt"
    checkpoints.write_checkpoint(
        str(prefix),
        {checkpoints.variable_name(v): v.numpy() for v in model.weights},
    )
    return prefix


def _predict_in_process(tiny_model, vocab, prefix, predict, out, **kwargs):
    settings = squad_lib.Settings(
        bert_config_file=str(tiny_model / "bert_config.json"),
        vocab_file=vocab,
        init_checkpoint=str(prefix),
        output_dir=str(out),
        predict_file=str(predict),
        do_predict=True,
        max_seq_length=SEQ,
        doc_stride=STRIDE,
        max_query_length=QUERY,
        **kwargs,
    )
    squad_lib.run(settings)
    return (
        _read_json(out / "predictions.json"),
        _read_json(out / "nbest_predictions.json"),
    )


def test_answers_do_not_depend_on_the_batch(
    tmp_path, tiny_model, uncased_vocab_file, random_span_head
):
    """At the default n_best_size=20 with a random span head, where padding
    logits take places among the n best: predictions.json and
    nbest_predictions.json are the same for --predict_batch_size 1, 7 and
    32 and for the questions in another order, by default (every window at
    full length: the original's n best) and with --fast_nbest (each
    window's own positions). The two modes differ here, which is what the
    padding logits change."""
    path = squad_file(tmp_path / "dev.json")
    data = _read_json(path)
    shuffled = tmp_path / "shuffled.json"
    rng = np.random.default_rng(0)
    for article in data["data"]:
        for paragraph in article["paragraphs"]:
            rng.shuffle(paragraph["qas"])
    data["data"].reverse()
    shuffled.write_text(json.dumps(data))
    results = {}
    for fast in (False, True):
        for batch, predict in ((1, path), (7, path), (32, path), (7, shuffled)):
            results[fast, batch, predict.name] = _predict_in_process(
                tiny_model,
                uncased_vocab_file,
                random_span_head,
                predict,
                tmp_path / f"out_{fast}_{batch}_{predict.name}",
                predict_batch_size=batch,
                fast_nbest=fast,
            )
    for (fast, batch, name), (answers, nbest) in results.items():
        want_answers, want_nbest = results[fast, 7, "dev.json"]
        # Another batch shape may take other kernels (bitwise equal with
        # oneDNN here, not with Eigen): the texts exactly, the numbers
        # within float32 rounding.
        assert answers == want_answers, (fast, batch, name)
        assert nbest.keys() == want_nbest.keys()
        for qid, entries in nbest.items():
            want = want_nbest[qid]
            assert [e["text"] for e in entries] == [e["text"] for e in want]
            for key in ("probability", "start_logit", "end_logit"):
                tolerance.assert_float32_close(
                    [e[key] for e in entries],
                    [e[key] for e in want],
                    err_msg=f"{qid} {key}",
                )
    original = results[False, 7, "dev.json"][1]
    fast = results[True, 7, "dev.json"][1]
    assert original.keys() == fast.keys()
    changed = [
        qid
        for qid in original
        if [e["text"] for e in original[qid]] != [e["text"] for e in fast[qid]]
    ]
    assert changed, "padding logits never ranked among the n best"


def test_predictions_are_of_this_runs_windows_whatever_eval_tf_record_holds(
    tmp_path, tiny_model, uncased_vocab_file, random_span_head
):
    """A training's evaluations predicted from output_dir/eval.tf_record,
    re-read each time: a --do_predict on another file in the same folder
    (allowed beside a training) replaced it, and its windows were paired
    with the training's by unique_id, changing every answer and F1 (and the
    best checkpoint) silently."""
    dev = squad_file(tmp_path / "dev.json")
    data = _read_json(dev)
    for article in data["data"]:
        for paragraph in article["paragraphs"]:
            paragraph["context"] = paragraph["context"][::-1]
    other = tmp_path / "other.json"
    other.write_text(json.dumps(data))
    out = tmp_path / "out"

    def settings(predict_file):
        return squad_lib.Settings(
            bert_config_file=str(tiny_model / "bert_config.json"),
            vocab_file=uncased_vocab_file,
            init_checkpoint=str(random_span_head),
            output_dir=str(out),
            predict_file=str(predict_file),
            do_predict=True,
            max_seq_length=SEQ,
            doc_stride=STRIDE,
            max_query_length=QUERY,
        )

    task = squad_lib.prepare(settings(dev))
    trainer = squad_lib.make_trainer(task)
    squad_lib.restore_for_inference(task, trainer)
    answers = squad_lib.AnswerPredictor(task, trainer.model)
    before = answers.predict().answers
    # What a --do_predict --predict_file=other.json in output_dir writes.
    other_task = squad_lib.prepare(settings(other))
    squad_data.write_features(
        other_task.predict_examples,
        other_task.tokenizer,
        SEQ,
        STRIDE,
        QUERY,
        False,
        other_task.path(squad_lib.EVAL_RECORD_FILE),
    )
    assert answers.predict().answers == before


def test_a_file_without_answers_is_predicted_not_scored(
    tmp_path, tiny_model, uncased_vocab_file, v2_run
):
    path = squad_file(tmp_path / "test.json", version_2=True)
    data = _read_json(path)
    for article in data["data"]:
        for qa in article["paragraphs"][0]["qas"]:
            del qa["answers"]
    # The original predicts on an empty context too (no window: no answer).
    data["data"][0]["paragraphs"][0]["context"] = " "
    empty = [qa["id"] for qa in data["data"][0]["paragraphs"][0]["qas"]]
    path.write_text(json.dumps(data))
    out = tmp_path / "out"
    settings = squad_lib.Settings(
        vocab_file=uncased_vocab_file,
        bert_config_file=str(tiny_model / "bert_config.json"),
        output_dir=str(out),
        predict_file=str(path),
        do_predict=True,
        version_2_with_negative=True,
        best_null_threshold=True,
        max_seq_length=SEQ,
        max_query_length=QUERY,
    )
    with pytest.raises(ValueError, match="--best_null_threshold: .* without"):
        squad_lib.run(settings)
    assert not out.exists()
    settings.best_null_threshold = False
    settings.init_checkpoint = str(v2_run[1] / "model.ckpt-4")
    assert squad_lib.run(settings) is None
    predictions = _read_json(out / "predictions.json")
    assert len(predictions) == 8
    assert empty and all(predictions[qid] == "" for qid in empty)
    assert (out / "null_odds.json").exists()
    assert not (out / "eval_results.txt").exists()


@pytest.mark.slow
def test_sigterm_saves_and_a_rerun_finishes(
    tmp_path, tiny_model, uncased_vocab_file
):
    """SIGTERM while training: a checkpoint, exit 143, no traceback; the
    same command again resumes from it and predicts."""
    import signal
    import time

    train = squad_file(tmp_path / "train.json")
    predict = squad_file(tmp_path / "dev.json")
    out = tmp_path / "out"
    args = _common_args(tiny_model, uncased_vocab_file, out) + [
        "--do_train",
        f"--train_file={train}",
        "--do_predict",
        f"--predict_file={predict}",
        "--train_batch_size=2",
        "--num_train_epochs=60",
        "--iterations_per_loop=1",
        "--save_checkpoints_steps=1000000",
    ]
    child = script_runner.popen([REPO_ROOT / "run_squad.py", *args])
    lines = []
    deadline = time.time() + 240
    try:
        for line in child.stderr:
            lines.append(line)
            if "steps/s" in line:
                child.send_signal(signal.SIGTERM)
                break
            assert time.time() < deadline, "no training step logged"
        lines += child.stderr.readlines()
        child.wait(timeout=120)
    finally:
        if child.poll() is None:
            child.kill()
    stderr = "".join(lines)
    assert child.returncode == 143, stderr[-3000:]
    assert "re-run the same command to resume" in stderr
    assert "Traceback" not in stderr
    assert not (out / "predictions.json").exists()
    state = (out / "checkpoint").read_text()
    stopped_at = int(state.split("model.ckpt-")[1].split('"')[0])
    assert 0 < stopped_at < 240
    proc = _run_script(args)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert f"at global_step {stopped_at}" in proc.stderr
    assert _eval_results(out / "eval_results.txt")["global_step"] == "240"


@pytest.mark.parametrize("extension", [".jsonl", ".csv"])
def test_questions_as_rows_predict_like_the_squad_file(
    v2_run, tiny_model, uncased_vocab_file, tmp_path, extension
):
    """--predict_file of question rows (id, question, context) in JSON Lines
    or CSV: the SQuAD JSON file's answers; predictions.jsonl has them with
    their probabilities."""
    tmp, trained = v2_run
    threshold = _eval_results(trained / "eval_results.txt")[
        "null_score_diff_threshold"
    ]
    rows = [
        {"id": qa["id"], "question": qa["question"], "context": p["context"]}
        for article in _read_json(tmp / "dev.json")["data"]
        for p in article["paragraphs"]
        for qa in p["qas"]
    ]
    path = tmp_path / f"questions{extension}"
    if extension == ".jsonl":
        path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    else:
        import csv

        with open(path, "w", newline="") as f:
            writer = csv.DictWriter(f, ["id", "question", "context"])
            writer.writeheader()
            writer.writerows(rows)
    out = tmp_path / "out"
    settings = squad_lib.Settings(
        vocab_file=uncased_vocab_file,
        bert_config_file=str(tiny_model / "bert_config.json"),
        output_dir=str(out),
        init_checkpoint=str(trained / "model.ckpt-4"),
        predict_file=str(path),
        do_predict=True,
        version_2_with_negative=True,
        null_score_diff_threshold=float(threshold),
        max_seq_length=SEQ,
        doc_stride=STRIDE,
        max_query_length=QUERY,
        predict_batch_size=5,
    )
    assert squad_lib.run(settings) is None  # No answers: not scored.
    want = _read_json(trained / "predictions.json")
    assert _read_json(out / "predictions.json") == want
    lines = [
        json.loads(x)
        for x in (out / "predictions.jsonl").read_text().splitlines()
    ]
    assert [(x["id"], x["answer"]) for x in lines] == list(want.items())
    nbest = _read_json(out / "nbest_predictions.json")
    for x in lines:
        top = [e for e in nbest[x["id"]] if e["text"] == x["answer"]][0]
        assert x["probability"] == pytest.approx(top["probability"], rel=1e-6)


def test_question_rows_errors_name_file_and_line(tmp_path):
    path = tmp_path / "q.jsonl"
    path.write_text(
        '{"id": "a", "question": "Who?", "context": "Bob."}\n'
        '{"id": "b", "question": " ", "context": "Bob."}\n'
    )
    with pytest.raises(
        ValueError, match=f"{path} line 2: empty or missing question"
    ):
        squad_data.read_question_rows(str(path))
    path.write_text('{"id": "a", "question": "Who?"}\n')
    with pytest.raises(ValueError, match="has no column 'context'"):
        squad_data.read_question_rows(str(path))
