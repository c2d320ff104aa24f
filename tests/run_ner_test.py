"""run_ner.py end to end on tiny generated CoNLL files and a tiny model:
training, eval during training, eval_results.txt against the prediction
file, the prediction file word for word against its input (with a sentence
longer than max_seq_length), SIGTERM and resume, bad input."""

import dataclasses
import json
import pathlib
import random
import signal
import time

import numpy as np
import pytest
import script_runner
import tensorflow as tf
import tolerance
from constants import TINY_CONFIG

from modeling import checkpoints
from modeling import config as config_lib
from modeling import models
from modeling.data import conll
from modeling.tasks import common
from modeling.tasks import conlleval
from modeling.tasks import ner
from modeling.text import tokenization

REPO = pathlib.Path(__file__).resolve().parents[1]
SEQ = 16

PER = ["peter", "anna", "john", "maria"]
LOC = ["paris", "london", "berlin"]
ORG = ["acme", "bbc", "nasa"]
FILLER = ["the", "said", "in", "to", "visited", "met", "and", "today"]
# "stein" and "##berg": a surname of two pieces ("steinberg").
VOCAB = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", "stein", "##berg", "."]
VOCAB += PER + LOC + ORG + FILLER


def _sentence(rng):
    words = []
    for _ in range(rng.randint(2, 5)):
        kind = rng.choice(["PER", "LOC", "ORG", "O", "O"])
        if kind == "PER":
            words.append((rng.choice(PER).title(), "I-PER"))
            if rng.random() < 0.5:
                words.append(("Steinberg", "I-PER"))
        elif kind == "LOC":
            words.append((rng.choice(LOC).title(), "I-LOC"))
        elif kind == "ORG":
            words.append((rng.choice(ORG).upper(), "I-ORG"))
        else:
            words.append((rng.choice(FILLER), "O"))
    return words + [(".", "O")]


def write_conll(path, num_sentences, seed, long_sentence=False):
    """A CoNLL-2003 file in IOB1, as the original eng.* files."""
    rng = random.Random(seed)
    lines = ["-DOCSTART- -X- -X- O", ""]
    sentences = [_sentence(rng) for _ in range(num_sentences)]
    if long_sentence:  # Over 3 windows at max_seq_length 16.
        sentences.insert(1, sum((_sentence(rng) for _ in range(8)), []))
    for i, sentence in enumerate(sentences):
        if i == num_sentences // 2:
            lines += ["-DOCSTART- -X- -X- O", ""]
        lines += [f"{w} NNP I-NP {t}" for w, t in sentence]
        lines.append("")
    path.write_text("\n".join(lines) + "\n")
    return path


@pytest.fixture(scope="module")
def tiny_files(tmp_path_factory):
    d = tmp_path_factory.mktemp("ner_tiny")
    config = dict(
        TINY_CONFIG, hidden_dropout_prob=0.0, attention_probs_dropout_prob=0.0
    )
    (d / "bert_config.json").write_text(json.dumps(config))
    (d / "vocab.txt").write_text("\n".join(VOCAB) + "\n")
    data = d / "data"
    data.mkdir()
    write_conll(data / "train.txt", 64, seed=1)
    write_conll(data / "dev.txt", 12, seed=2, long_sentence=True)
    write_conll(data / "test.txt", 12, seed=3, long_sentence=True)
    return d


def _args(files, out, *extra):
    return [
        f"--data_dir={files / 'data'}",
        f"--vocab_file={files / 'vocab.txt'}",
        f"--bert_config_file={files / 'bert_config.json'}",
        f"--output_dir={out}",
        f"--max_seq_length={SEQ}",
        "--random_seed=3",
        *extra,
    ]


def _settings(files, output_dir, **kw):
    """ner.Settings over the tiny files (as `_args` for the script)."""
    return ner.Settings(
        data_dir=str(files / "data"),
        vocab_file=str(files / "vocab.txt"),
        bert_config_file=str(files / "bert_config.json"),
        output_dir=output_dir,
        max_seq_length=SEQ,
        **kw,
    )


def _script(*args):
    return script_runner.python(
        [str(REPO / "run_ner.py"), *args],
        timeout=600,
    )


@pytest.fixture(scope="module")
def ner_run(tiny_files, tmp_path_factory):
    """One script run: 64 sentences / batch 8 * 10 epochs = 80 steps."""
    out = tmp_path_factory.mktemp("ner_run")
    proc = _script(
        *_args(
            tiny_files,
            out,
            "--do_train",
            "--do_eval",
            "--do_predict",
            "--train_batch_size=8",
            "--num_train_epochs=10",
            "--learning_rate=3e-3",
            "--save_checkpoints_steps=40",
            "--eval_during_training",
            f"--export_dir={out.with_name(out.name + '_export')}",
        )
    )
    assert proc.returncode == 0, proc.stderr[-4000:]
    return out


def _eval_results(path):
    return dict(
        line.split(" = ")
        for line in pathlib.Path(path).read_text().splitlines()
    )


def test_label_list_and_checkpoint_names(ner_run):
    labels = (ner_run / "label_list.txt").read_text().split()
    # IOB1 in the file, IOB2 labels: "O" first, then by type. (Adjacent
    # words of one type form one entity in IOB1, hence I-LOC, I-ORG.)
    assert labels == ["O", "B-LOC", "I-LOC", "B-ORG", "I-ORG", "B-PER", "I-PER"]
    prefix = checkpoints.resolve_checkpoint(ner_run)
    assert prefix.endswith("model.ckpt-80")
    shapes = tf.train.load_checkpoint(prefix).get_variable_to_shape_map()
    assert shapes["output_weights"] == [7, 32]
    assert shapes["output_bias"] == [7]
    assert shapes["output_weights/adam_m"] == [7, 32]
    assert "bert/encoder/layer_1/output/LayerNorm/beta" in shapes


def test_prediction_file_lines_up_with_its_input(ner_run, tiny_files):
    source = (tiny_files / "data" / "test.txt").read_text().splitlines()
    lines = (ner_run / "test_predictions.txt").read_text().splitlines()
    assert len(lines) == len(source)
    labels = (ner_run / "label_list.txt").read_text().split()
    for got, want in zip(lines, source):
        if not want:
            assert got == want
        elif want.startswith("-DOCSTART-"):
            assert got == want + " O"
        else:
            head, tag = got.rsplit(" ", 1)
            assert head == want and tag in labels


def test_eval_results_match_the_predictions(ner_run, tiny_files):
    """eval_results.txt on dev; recomputed here from the final checkpoint
    with the model called directly on the dev windows."""
    results = _eval_results(ner_run / "eval_results.txt")
    assert {
        "eval_precision",
        "eval_recall",
        "eval_f1",
        "eval_accuracy",
        "eval_loss",
        "global_step",
        "eval_f1_PER",
    } <= set(results)
    assert results["global_step"] == "80"
    dev = conll.read_conll(tiny_files / "data" / "dev.txt")
    labels = (ner_run / "label_list.txt").read_text().split()
    tokenizer = tokenization.FullTokenizer(str(tiny_files / "vocab.txt"))
    feats = conll.convert_sentences(dev.sentences, labels, SEQ, tokenizer)
    assert len(feats) > len(dev.sentences)  # The long sentence's windows.
    config = config_lib.BertConfig.from_json_file(
        tiny_files / "bert_config.json"
    )
    model = models.BertTokenClassifier(config, len(labels))
    checkpoints.load_weights(model, str(ner_run / "model.ckpt-80"))
    batch = {
        k: tf.constant([getattr(f, k) for f in feats])
        for k in ("input_ids", "input_mask", "segment_ids")
    }
    logits = model(batch, training=False).numpy()
    tags = conll.word_predictions(
        feats, logits.argmax(-1), dev.sentences, labels
    )
    want = conlleval.evaluate([s.tags for s in dev.sentences], tags)
    for key in ("precision", "recall", "f1", "accuracy"):
        assert float(results[f"eval_{key}"]) == pytest.approx(
            want[key], abs=1e-6
        )
    # The tiny model from scratch learns this generated task (an untrained
    # head finds next to no entity; 80 steps give about 0.74).
    assert float(results["eval_f1"]) > 0.6


def test_best_checkpoint_kept(ner_run):
    history = (ner_run / "eval_history.txt").read_text().splitlines()
    assert len(history) == 2
    best = _eval_results(ner_run / "best" / "eval_results.txt")
    f1s = [float(h.split("eval_f1 = ")[1].split()[0]) for h in history]
    assert float(best["eval_f1"]) == pytest.approx(max(f1s))
    prefix = checkpoints.resolve_checkpoint(ner_run / "best")
    assert prefix.endswith(f"model.ckpt-{best['global_step']}")
    shapes = tf.train.load_checkpoint(prefix).get_variable_to_shape_map()
    assert "output_weights" in shapes and "output_weights/adam_m" not in shapes


def test_predict_only_run_reuses_the_label_list(ner_run, tiny_files, tmp_path):
    """A later predict-only run (no --do_train) reads label_list.txt and
    the newest checkpoint, and writes the same predictions."""
    before = (ner_run / "test_predictions.txt").read_text()
    settings = _settings(
        tiny_files,
        str(ner_run),
        do_predict=True,
        predict_batch_size=3,
    )
    ner.run(settings)
    assert (ner_run / "test_predictions.txt").read_text() == before


def test_unknown_tag_at_predict_time_is_one_error_line(ner_run, tiny_files):
    bad = ner_run.parent / "bad_test.txt"
    lines = (tiny_files / "data" / "test.txt").read_text().splitlines()
    lines[2] = lines[2].rsplit(" ", 1)[0] + " B-FOO"
    bad.write_text("\n".join(lines) + "\n")
    proc = _script(
        *_args(tiny_files, ner_run, "--do_predict", f"--predict_file={bad}")
    )
    assert proc.returncode == common.EXIT_USER_ERROR, proc.stderr[-3000:]
    assert "Traceback" not in proc.stderr
    last = proc.stderr.splitlines()[-1]
    assert last.startswith(f"error: {bad} line 3: unknown tag 'B-FOO'"), last


def test_wrong_columns_in_the_training_file(tiny_files, tmp_path):
    bad = tmp_path / "train.txt"
    bad.write_text("EU NNP I-NP I-ORG\nrejects VBZ O\n")
    proc = _script(
        *_args(tiny_files, tmp_path / "out", "--do_train"),
        f"--train_file={bad}",
    )
    assert proc.returncode == common.EXIT_USER_ERROR, proc.stderr[-3000:]
    assert proc.stderr.splitlines()[-1].startswith(
        f"error: {bad} line 2: expected 4 space-separated columns"
    )


def test_no_label_list_for_eval_only(tiny_files, tmp_path):
    settings = _settings(
        tiny_files,
        str(tmp_path / "empty"),
        do_eval=True,
    )
    with pytest.raises(ValueError, match="No label list"):
        ner.run(settings)


def test_a_label_list_without_checkpoints_gives_way(tiny_files, tmp_path):
    """label_list.txt left in a folder without checkpoints (a predict-only
    run, or a training run killed before its first checkpoint) is not held
    against --label_list nor against a training run's tags: their list
    replaces it. (It blocked training, naming checkpoints that were not
    there.) A run that does not train still reads it."""
    out = tmp_path / "out"
    out.mkdir()
    (out / "label_list.txt").write_text("O\nB-PER\n")
    settings = _settings(
        tiny_files,
        str(out),
        do_predict=True,
    )
    for given, train, want in (
        (None, False, ["O", "B-PER"]),
        ("O,B-LOC,I-LOC", False, ["O", "B-LOC", "I-LOC"]),
        (None, True, None),
    ):
        task = ner.prepare(dataclasses.replace(settings, label_list=given))
        train_data = None
        if train:
            train_data = task.read(
                task.data_path("train_file", ner.TRAIN_FILES, "training")
            )
            want = conll.labels_from_sentences(
                train_data.sentences, train_data.scheme
            )
            assert want != ["O", "B-PER"]
        ner.resolve_labels(task, train_data)
        assert task.label_list == want
        pending = task.pending_label_list
        assert pending == (
            str(out / "label_list.txt") if given or train else None
        )


def test_gradient_accumulation_equals_one_batch(
    tiny_files, tmp_path, monkeypatch
):
    """Micro-batches on TensorFlow where the pooler takes no gradient (the
    tagger does not use it): the pooler is left as it was, and the update is
    one batch's although the micro-batches hold different numbers of
    labelled words (each divides by the whole batch's count,
    losses.TOKEN_DENOMINATOR). With each part's own count the weights
    differed by 6.6e-4 after 2 steps here (7e-9 with it)."""
    from modeling import checkpoints
    from modeling import heads
    from modeling.training import run_config

    # Dropout off (the head's too): the same model function for a batch of
    # 8 as for two of 4.
    monkeypatch.setattr(heads, "CLASSIFIER_DROPOUT", 0.0)
    runs = {}
    for n in (1, 2):
        out = str(tmp_path / str(n))
        ner.run(
            _settings(
                tiny_files,
                out,
                do_train=True,
                train_batch_size=8,
                num_train_epochs=0.25,
                random_seed=3,
                run_config=run_config.RunConfig(
                    out, 0, gradient_accumulation_steps=n, handle_sigterm=False
                ),
            )
        )
        runs[n] = checkpoints.read_checkpoint(out)
    assert int(runs[2]["global_step"]) == 2
    assert not np.any(runs[2]["bert/pooler/dense/kernel/adam_m"])
    # As training_test's accumulation tests: float32 sums of other shapes,
    # amplified by Adam's 1 / (sqrt(v) + 1e-6) near zero; 2e-5.
    worst = max(
        float(np.max(np.abs(runs[1][k] - runs[2][k])))
        for k in runs[1]
        if runs[1][k].dtype.kind == "f"
    )
    assert worst < 2e-5, worst


def test_loss_is_the_mean_over_labelled_pieces():
    logits = tf.constant([[[0.0, np.log(3.0)], [5.0, -5.0], [2.0, 2.0]]])
    logs = ner.loss_fn(
        {"label_ids": tf.constant([[1, 1, 0]]), "label_mask": [[1, 0, 1]]},
        logits,
    )
    want = np.mean([-np.log(0.75), np.log(2.0)])
    assert float(logs["loss"]) == pytest.approx(want, rel=1e-6)
    assert float(logs["accuracy"]) == 1.0  # argmax of a tie is 0.


# ~14 s (three script runs), in the default run: the one fast check of
# a resumed fine-tuning run's data position (fine_tuning.train_dataset).
def test_sigterm_then_resume_finishes(tiny_files, tmp_path):
    """SIGTERM mid-training: exit 143 with a checkpoint; the same command
    again resumes from it and finishes where an uninterrupted run ends (the
    consumed batches skipped, dropout positioned): a resume that read the
    data from its start moved every weight."""
    out = tmp_path / "out"
    extra = (
        "--do_train",
        "--do_eval",
        "--train_batch_size=8",
        "--num_train_epochs=40",  # 320 steps
        "--iterations_per_loop=1",
        "--save_checkpoints_steps=100000",
    )
    args = _args(tiny_files, out, *extra)
    child = script_runner.popen([REPO / "run_ner.py", *args])
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
    assert child.returncode == common.EXIT_INTERRUPTED, stderr[-3000:]
    assert "re-run the same command to resume" in stderr
    stopped = int(
        tf.train.load_checkpoint(
            checkpoints.resolve_checkpoint(out)
        ).get_tensor("global_step")
    )
    assert 0 < stopped < 320
    assert not (out / "eval_results.txt").exists()
    proc = _script(*args)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert f"at global_step {stopped}" in proc.stderr
    assert _eval_results(out / "eval_results.txt")["global_step"] == "320"
    straight = tmp_path / "straight"
    proc = _script(*_args(tiny_files, straight, *extra))
    assert proc.returncode == 0, proc.stderr[-3000:]
    tolerance.assert_checkpoints_close(
        checkpoints.read_checkpoint(str(out / "model.ckpt-320")),
        checkpoints.read_checkpoint(str(straight / "model.ckpt-320")),
        tolerance.FLOAT32_REL,
        "resumed",
        5e-5,
    )


_LOADER = """
import json, sys
import tensorflow as tf
import tensorflow_text  # noqa: F401  (registers the tokenizer ops)
loaded = tf.saved_model.load(sys.argv[1])
out = loaded.signatures["serving_default"](
    text=tf.constant(json.loads(sys.argv[2])))
print(json.dumps({k: v.numpy().tolist() for k, v in out.items()},
                 default=bytes.decode))
"""


def test_export_tags_raw_text_like_the_prediction_file(ner_run, tiny_files):
    """The SavedModel, loaded in a fresh process with only TF and
    tensorflow-text, tags the test sentences (one with several windows)
    as test_predictions.txt does, with the Python path's probabilities. An
    empty text among them gets no tags and moves no other sentence's."""
    data = conll.read_conll(tiny_files / "data" / "test.txt")
    texts = [" ".join(s.words) for s in data.sentences]
    texts.insert(1, "")
    proc = script_runner.python(
        [
            "-c",
            _LOADER,
            str(ner_run.with_name(ner_run.name + "_export")),
            json.dumps(texts),
        ],
        timeout=600,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    served = json.loads(proc.stdout.strip().splitlines()[-1])
    assert served["num_words"][1] == 0
    assert set(served["tags"][1]) <= {""}
    served = {key: rows[:1] + rows[2:] for key, rows in served.items()}
    lines = (ner_run / "test_predictions.txt").read_text().splitlines()
    # The file's predictions are IOB1 as its gold tags; the server's are
    # the label list's tags as predicted (an entity may start with I-X
    # there, which IOB1 cannot tell from B-X): equal as entities.
    assert data.iob1
    want = [
        conll.iob1_to_iob2(
            [lines[n - 1].rsplit(" ", 1)[1] for n in s.line_numbers]
        )
        for s in data.sentences
    ]
    assert served["num_words"] == [len(s.words) for s in data.sentences]
    got = [
        conll.iob1_to_iob2(row[:n])
        for row, n in zip(served["tags"], served["num_words"])
    ]
    assert got == want
    # Probabilities: the model called here on conll.py's windows.
    labels = (ner_run / "label_list.txt").read_text().split()
    tokenizer = tokenization.FullTokenizer(str(tiny_files / "vocab.txt"))
    feats = conll.convert_sentences(data.sentences, labels, SEQ, tokenizer)
    assert max(f.sentence_index for f in feats) < len(feats) - 1  # windows
    config = config_lib.BertConfig.from_json_file(
        tiny_files / "bert_config.json"
    )
    model = models.BertTokenClassifier(config, len(labels))
    checkpoints.load_weights(model, str(ner_run / "model.ckpt-80"))
    batch = {
        k: tf.constant([getattr(f, k) for f in feats])
        for k in ("input_ids", "input_mask", "segment_ids")
    }
    probs = tf.nn.softmax(model(batch, training=False)).numpy()
    per_sentence = [[] for _ in data.sentences]
    for f, p in zip(feats, probs):
        per_sentence[f.sentence_index] += [
            row for row, m in zip(p, f.label_mask) if m
        ]
    for i, rows in enumerate(per_sentence):
        served_rows = np.array(served["probabilities"][i][: len(rows)])
        np.testing.assert_allclose(served_rows, np.array(rows), atol=1e-5)


def test_label_list_flag_must_match_the_saved_list(ner_run, tiny_files):
    settings = _settings(
        tiny_files,
        str(ner_run),
        do_predict=True,
        label_list="O,B-PER,I-PER",
    )
    with pytest.raises(ValueError, match="differs from .*label_list.txt"):
        ner.run(settings)


def test_a_fine_tuned_checkpoint_initialises_the_other_tasks(
    ner_run, tiny_files
):
    """The tagger's checkpoint: encoder and head for a tagger of the same
    labels; the encoder alone for a multiple-choice model (head [1, H]
    against [7, H]: it starts fresh)."""
    from modeling.tasks import fine_tuning

    config = config_lib.BertConfig.from_json_file(
        tiny_files / "bert_config.json"
    )
    prefix = str(ner_run / "model.ckpt-80")
    saved = checkpoints.read_checkpoint(prefix)
    tagger = models.BertTokenClassifier(config, 7)
    fine_tuning.init_from_checkpoint(tagger, prefix)
    np.testing.assert_array_equal(
        tagger.classifier.output_weights.numpy(), saved["output_weights"]
    )
    chooser = models.BertMultipleChoice(config)
    fresh_head = chooser.classifier.output_weights.numpy()
    report = fine_tuning.init_from_checkpoint(chooser, prefix)
    assert "output_weights" not in report.restored
    np.testing.assert_array_equal(
        chooser.classifier.output_weights.numpy(), fresh_head
    )
    name = "bert/encoder/layer_1/attention/self/query/kernel"
    got = {checkpoints.variable_name(v): v for v in chooser.weights}[name]
    np.testing.assert_array_equal(got.numpy(), saved[name])


def test_eval_from_init_checkpoint_of_the_same_task(
    ner_run, tiny_files, tmp_path
):
    """--init_checkpoint of a tagger with the same labels, nothing trained
    in output_dir: its head is loaded too, so eval equals the run's."""
    settings = ner.Settings(
        data_dir=str(tiny_files / "data"),
        vocab_file=str(tiny_files / "vocab.txt"),
        bert_config_file=str(tiny_files / "bert_config.json"),
        output_dir=str(tmp_path / "out"),
        init_checkpoint=str(ner_run / "model.ckpt-80"),
        label_list=",".join((ner_run / "label_list.txt").read_text().split()),
        max_seq_length=SEQ,
        do_eval=True,
    )
    results = ner.run(settings)
    want = _eval_results(ner_run / "eval_results.txt")
    for key in ("eval_f1", "eval_precision", "eval_recall", "eval_accuracy"):
        assert results[key] == pytest.approx(float(want[key]), abs=1e-6)
