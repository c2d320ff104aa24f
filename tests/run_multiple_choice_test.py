"""run_multiple_choice.py: SWAG's CSV format (written here: SWAG is not on
these machines), a tiny model learning a generated task in that format, the
label-less test split predicted, bad files."""

import csv
import json
import pathlib
import random
import signal

import numpy as np
import pytest
import script_runner
import tensorflow as tf
import tolerance
from constants import TINY_CONFIG

from modeling import checkpoints
from modeling import config as config_lib
from modeling import models
from modeling.data import swag
from modeling.tasks import common
from modeling.tasks import multiple_choice
from modeling.text import tokenization

REPO = pathlib.Path(__file__).resolve().parents[1]
SEQ = 16
COLORS = ["red", "blue", "green", "yellow", "black", "white"]
THINGS = ["ball", "car", "hat", "box"]
WORDS = ["the", "fell", "it", "was", "rolled", "a", "of"]
VOCAB = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", ".", ","]
VOCAB += COLORS + THINGS + WORDS
HEADER = [
    "",
    "video-id",
    "fold-ind",
    "startphrase",
    "sent1",
    "sent2",
    "gold-source",
    "ending0",
    "ending1",
    "ending2",
    "ending3",
    "label",
]


def write_swag(path, num_examples, seed, with_label=True):
    """SWAG's CSV layout; the right ending names the context's color."""
    rng = random.Random(seed)
    rows = []
    for i in range(num_examples):
        colors = rng.sample(COLORS, 4)
        label = rng.randrange(4)
        thing = rng.choice(THINGS)
        # The context's color is the right ending's; the others differ.
        sent1 = f"the {colors[label]} {thing} fell."
        sent2 = "it was"
        endings = [f"a {c} {thing}." for c in colors]
        row = [str(i), f"v{i}", str(i), f"{sent1} {sent2}", sent1, sent2]
        row += ["gold", *endings]
        rows.append(row + [str(label)] if with_label else row)
    with open(path, "w", newline="") as f:
        writer = csv.writer(f)
        writer.writerow(HEADER if with_label else HEADER[:-1])
        writer.writerows(rows)
    return path


@pytest.fixture(scope="module")
def tiny_files(tmp_path_factory):
    d = tmp_path_factory.mktemp("swag_tiny")
    config = dict(
        TINY_CONFIG, hidden_dropout_prob=0.0, attention_probs_dropout_prob=0.0
    )
    (d / "bert_config.json").write_text(json.dumps(config))
    (d / "vocab.txt").write_text("\n".join(VOCAB) + "\n")
    data = d / "data"
    data.mkdir()
    write_swag(data / "train.csv", 256, seed=1)
    write_swag(data / "val.csv", 64, seed=2)
    write_swag(data / "test.csv", 10, seed=3, with_label=False)
    return d


def _settings(files, out, **kwargs):
    values = dict(
        data_dir=str(files / "data"),
        vocab_file=str(files / "vocab.txt"),
        bert_config_file=str(files / "bert_config.json"),
        output_dir=str(out),
        max_seq_length=SEQ,
        random_seed=7,
    )
    values.update(kwargs)
    return multiple_choice.Settings(**values)


@pytest.fixture(scope="module")
def mc_run(tiny_files, tmp_path_factory):
    out = tmp_path_factory.mktemp("mc_run")
    settings = _settings(
        tiny_files,
        out,
        do_train=True,
        do_eval=True,
        do_predict=True,
        train_batch_size=16,
        num_train_epochs=48.0,  # 768 steps, ~15 s on one CPU core
        eval_during_training=True,
        export_dir=str(out.with_name(out.name + "_export")),
    )
    settings.run_config.learning_rate = 5e-4
    settings.run_config.save_checkpoints_steps = 384
    settings.run_config.iterations_per_loop = 128
    results = multiple_choice.run(settings)
    return out, results


def test_reader_finds_columns_by_name(tiny_files):
    examples = swag.read_swag(tiny_files / "data" / "train.csv")
    assert len(examples) == 256 and swag.num_choices(examples) == 4
    e = examples[0]
    assert e.context.startswith("the ") and e.start == "it was"
    assert e.label in range(4) and e.endings[e.label].split()[1] in e.context
    test = swag.read_swag(
        tiny_files / "data" / "test.csv", "test", require_label=False
    )
    assert len(test) == 10 and all(x.label is None for x in test)


def test_choices_are_packed_as_pairs(tiny_files):
    tokenizer = tokenization.FullTokenizer(str(tiny_files / "vocab.txt"))
    example = swag.SwagExample(
        "x", "the red ball fell.", "it was", ["a red ball.", "a hat."], 1
    )
    f = swag.convert_examples([example], SEQ, tokenizer)
    tokens = ["[CLS]", "the", "red", "ball", "fell", ".", "[SEP]"]
    tokens += ["it", "was", "a", "hat", ".", "[SEP]"]
    ids = tokenizer.convert_tokens_to_ids(tokens)
    assert f["input_ids"][0][1] == ids + [0] * (SEQ - len(ids))
    assert f["segment_ids"][0][1] == [0] * 7 + [1] * 6 + [0] * 3
    assert f["input_mask"][0][1] == [1] * 13 + [0] * 3
    assert np.array(f["input_ids"]).shape == (1, 2, SEQ)
    assert f["label_ids"] == [1]


def test_a_tiny_model_learns_the_generated_task(mc_run):
    out, results = mc_run
    assert results["global_step"] == 768
    # Chance is 1/4 (and an untrained head gives loss ln 4). Twice chance
    # on 64 examples is 4.6 standard deviations above it. How far past that
    # 768 steps get depends on the initialization: 0.59, 1.0, 1.0 and 0.84
    # for seeds 7, 1, 2 and 3.
    assert results["eval_accuracy"] > 0.5, results
    assert results["eval_loss"] < 0.7 * np.log(4), results
    text = (out / "eval_results.txt").read_text().splitlines()
    assert [line.split(" = ")[0] for line in text] == [
        "eval_accuracy",
        "eval_loss",
        "global_step",
    ]
    history = (out / "eval_history.txt").read_text().splitlines()
    assert len(history) == 2
    prefix = checkpoints.resolve_checkpoint(out / "best")
    shapes = tf.train.load_checkpoint(prefix).get_variable_to_shape_map()
    assert shapes["output_weights"] == [1, 32] and shapes["output_bias"] == [1]


def test_label_less_test_split_predicts(mc_run, tiny_files):
    """test_results.tsv: one row of 4 probabilities per test example, equal
    to the final checkpoint's softmax computed here."""
    out, _ = mc_run
    lines = (out / "test_results.tsv").read_text().splitlines()
    probs = np.array([[float(v) for v in x.split("\t")] for x in lines])
    assert probs.shape == (10, 4)
    np.testing.assert_allclose(probs.sum(-1), 1.0, atol=1e-6)
    tokenizer = tokenization.FullTokenizer(str(tiny_files / "vocab.txt"))
    examples = swag.read_swag(
        tiny_files / "data" / "test.csv", "test", require_label=False
    )
    features = swag.convert_examples(examples, SEQ, tokenizer)
    config = config_lib.BertConfig.from_json_file(
        tiny_files / "bert_config.json"
    )
    model = models.BertMultipleChoice(config)
    checkpoints.load_weights(model, str(out / "model.ckpt-768"))
    batch = {
        k: tf.constant(features[k])
        for k in ("input_ids", "input_mask", "segment_ids")
    }
    want = tf.nn.softmax(model(batch, training=False)).numpy()
    np.testing.assert_allclose(probs, want, atol=1e-5)
    rows = [
        json.loads(x)
        for x in (out / "predictions.jsonl").read_text().splitlines()
    ]
    # No id column: the row's line (after the header).
    assert [r["id"] for r in rows] == [str(i + 2) for i in range(10)]
    assert [r["label"] for r in rows] == np.argmax(probs, -1).tolist()
    np.testing.assert_allclose([r["probabilities"] for r in rows], probs)
    # The model picks the ending that names the context's color.
    right = [
        next(i for i, e in enumerate(x.endings) if e.split()[1] in x.context)
        for x in examples
    ]
    assert np.mean(np.argmax(probs, -1) == right) > 0.5  # chance: 0.25


# === Bad files ===


def _write(tmp_path, text):
    path = tmp_path / "bad.csv"
    path.write_text(text)
    return path


def test_wrong_column_count(tmp_path):
    head = ",".join(HEADER)
    path = _write(tmp_path, f"{head}\n0,v,0,s,a b,c,g,e0,e1,e2,e3,1\n1,v,0\n")
    with pytest.raises(ValueError, match=f"{path} line 3: expected 12 "):
        swag.read_swag(path)


@pytest.mark.parametrize("label", ["4", "\u00b2", "1.0"])
def test_bad_label(tmp_path, label):
    """Out of range, a digit int() cannot read (it crashed unnamed), a
    float: one line naming the row."""
    head = ",".join(HEADER)
    path = _write(tmp_path, f"{head}\n0,v,0,s,a b,c,g,e0,e1,e2,e3,{label}\n")
    with pytest.raises(ValueError, match=f"{path} line 2: label '{label}'"):
        swag.read_swag(path)


def test_an_unlabelled_files_placeholder_labels(tmp_path):
    """A test file's empty label, or HF swag test's -1: no label; in a
    training file both are errors."""
    head = ",".join(HEADER)
    path = _write(
        tmp_path,
        f"{head}\n0,v,0,s,a b,c,g,e0,e1,e2,e3,\n1,v,0,s,a b,c,g,e0,e1,e2,e3,-1\n",
    )
    test = swag.read_swag(path, "test", require_label=False)
    assert [e.label for e in test] == [None, None]
    with pytest.raises(ValueError, match=f"{path} line 2: label ''"):
        swag.read_swag(path)


def test_missing_label_column_for_training(tmp_path):
    path = _write(tmp_path, ",".join(HEADER[:-1]) + "\n0,v,0,s,a,c,g,1,2,3,4\n")
    with pytest.raises(ValueError, match=f"{path} line 1: .* no label column"):
        swag.read_swag(path)


@pytest.mark.parametrize("text", ["", ",".join(HEADER) + "\n"])
def test_empty_file(tmp_path, text):
    path = _write(tmp_path, text)
    with pytest.raises(ValueError, match=str(path)):
        swag.read_swag(path)


def test_script_reports_a_bad_file_in_one_line(tiny_files, tmp_path):
    path = _write(tmp_path, ",".join(HEADER) + "\n0,v,0,s,a b,c,g,e0,e1\n")
    proc = script_runner.python(
        [
            str(REPO / "run_multiple_choice.py"),
            f"--vocab_file={tiny_files / 'vocab.txt'}",
            f"--bert_config_file={tiny_files / 'bert_config.json'}",
            f"--output_dir={tmp_path / 'out'}",
            f"--train_file={path}",
            f"--max_seq_length={SEQ}",
            "--do_train",
        ],
        timeout=300,
    )
    assert proc.returncode == common.EXIT_USER_ERROR, proc.stderr[-3000:]
    assert "Traceback" not in proc.stderr
    assert proc.stderr.splitlines()[-1].startswith(f"error: {path} line 2")


@pytest.mark.slow  # ~15 s: two script runs.
def test_sigterm_then_resume_finishes(tiny_files, tmp_path):
    """SIGTERM mid-training: exit 143 with a checkpoint; the same command
    again resumes from it and finishes."""
    out = tmp_path / "out"
    args = [
        f"--data_dir={tiny_files / 'data'}",
        f"--vocab_file={tiny_files / 'vocab.txt'}",
        f"--bert_config_file={tiny_files / 'bert_config.json'}",
        f"--output_dir={out}",
        f"--max_seq_length={SEQ}",
        "--do_train",
        "--do_eval",
        "--train_batch_size=16",
        "--num_train_epochs=20",  # 320 steps
        "--iterations_per_loop=1",
        "--save_checkpoints_steps=100000",
        "--random_seed=3",
    ]
    child = script_runner.popen([REPO / "run_multiple_choice.py", *args])
    lines = []
    try:
        for line in child.stderr:
            lines.append(line)
            if "steps/s" in line:
                child.send_signal(signal.SIGTERM)
                break
        lines += child.stderr.readlines()
        child.wait(timeout=120)
    finally:
        if child.poll() is None:
            child.kill()
    stderr = "".join(lines)
    assert child.returncode == common.EXIT_INTERRUPTED, stderr[-3000:]
    stopped = int(
        tf.train.load_checkpoint(
            checkpoints.resolve_checkpoint(out)
        ).get_tensor("global_step")
    )
    assert 0 < stopped < 320
    proc = script_runner.run_script("run_multiple_choice.py", args, timeout=600)
    assert f"at global_step {stopped}" in proc.stderr
    results = (out / "eval_results.txt").read_text()
    assert "global_step = 320" in results


_LOADER = """
import json, sys
import tensorflow as tf
import tensorflow_text  # noqa: F401  (registers the tokenizer ops)
loaded = tf.saved_model.load(sys.argv[1])
sent1, sent2, endings = json.loads(sys.argv[2])
out = loaded.signatures["serving_default"](
    sent1=tf.constant(sent1), sent2=tf.constant(sent2),
    endings=tf.constant(endings))
print(json.dumps({k: v.numpy().tolist() for k, v in out.items()}))
"""


def test_export_serves_raw_text_like_test_results(mc_run, tiny_files):
    """The SavedModel in a fresh process (TF and tensorflow-text only)
    gives test_results.tsv's probabilities from the raw CSV fields."""
    out, _ = mc_run
    examples = swag.read_swag(
        tiny_files / "data" / "test.csv", "test", require_label=False
    )
    fields = [
        [e.context for e in examples],
        [e.start for e in examples],
        [e.endings for e in examples],
    ]
    proc = script_runner.python(
        [
            "-c",
            _LOADER,
            str(out.with_name(out.name + "_export")),
            json.dumps(fields),
        ],
        timeout=600,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    served = json.loads(proc.stdout.strip().splitlines()[-1])
    lines = (out / "test_results.tsv").read_text().splitlines()
    want = np.array([[float(v) for v in x.split("\t")] for x in lines])
    np.testing.assert_allclose(served["probabilities"], want, atol=1e-5)


def test_init_checkpoint_is_checked_before_the_features(
    tiny_files, tmp_path, monkeypatch
):
    # A missing one was found after every example was tokenized (minutes
    # on SWAG); a classifier's checkpoint (a head of another shape, which
    # starts fresh) is fine.
    config = config_lib.BertConfig.from_json_file(
        tiny_files / "bert_config.json"
    )
    classifier = models.BertClassifier(config, 3)
    prefix = tmp_path / "classifier" / "model.ckpt"
    prefix.parent.mkdir()
    checkpoints.write_checkpoint(
        str(prefix),
        {checkpoints.variable_name(v): v.numpy() for v in classifier.weights},
    )
    made = []
    arrays = multiple_choice.ChoiceTask.arrays
    monkeypatch.setattr(
        multiple_choice.ChoiceTask,
        "arrays",
        lambda self, examples: made.append(1) or arrays(self, examples),
    )
    missing = tmp_path / "nope" / "bert_model.ckpt"
    settings = _settings(
        tiny_files,
        tmp_path / "out",
        do_train=True,
        init_checkpoint=str(missing),
        train_batch_size=64,
        num_train_epochs=0.25,
    )
    with pytest.raises(
        FileNotFoundError, match=f"^--init_checkpoint={missing}"
    ):
        multiple_choice.run(settings)
    assert not made
    settings.init_checkpoint = str(prefix)
    multiple_choice.run(settings)
    assert made and (tmp_path / "out" / "model.ckpt-1.index").exists()


def test_predict_only_run_restores_the_newest_checkpoint(
    mc_run, tiny_files, monkeypatch
):
    out, _ = mc_run
    before = (out / "test_results.tsv").read_text()
    ids = (out / "predictions.jsonl").read_text().count('"id"')
    # The predict file streams: 10 rows in blocks of 4, 4 and 2.
    monkeypatch.setattr(multiple_choice, "PREDICT_BLOCK", 4)
    multiple_choice.run(
        _settings(tiny_files, out, do_predict=True, predict_batch_size=3)
    )
    after = (out / "test_results.tsv").read_text()
    want = np.array(
        [[float(v) for v in x.split("\t")] for x in before.split("\n") if x]
    )
    got = np.array(
        [[float(v) for v in x.split("\t")] for x in after.split("\n") if x]
    )
    # Batches of 3 instead of 8: other shapes, the same rows to float
    # rounding (probabilities have unit scale).
    tolerance.assert_float32_close(got, want, scale=1.0)
    assert (out / "predictions.jsonl").read_text().count('"id"') == ids == 10


def test_each_choice_is_scored_on_its_own_sequence(tiny_config_dict):
    """logits[b, c] = w . pooled(choice c of example b) + bias: the choices
    are flattened into the batch and back in the right order."""
    config = config_lib.BertConfig.from_dict(tiny_config_dict)
    model = models.BertMultipleChoice(config)
    rng = np.random.default_rng(0)
    ids = rng.integers(5, 99, (2, 3, 10)).astype("int32")
    mask = np.ones_like(ids)
    mask[1, 2, 6:] = 0
    features = {
        "input_ids": ids * mask,
        "input_mask": mask,
        "segment_ids": (np.arange(10) >= 5).astype("int32") * mask,
    }
    logits = model(features, training=False).numpy()
    assert logits.shape == (2, 3)
    w = model.classifier.output_weights.numpy()[0]
    b = model.classifier.output_bias.numpy()[0]
    for c in range(3):
        one = {k: v[:, c] for k, v in features.items()}
        pooled = model.bert(one, training=False)["pooled_output"].numpy()
        # The same encoder kernels on another batch size: float rounding.
        tolerance.assert_float32_close(logits[:, c], pooled @ w + b)


def test_json_lines_with_a_list_of_endings(tmp_path):
    """A JSON Lines file: sent1, (sent2,) a list of endings, label, id."""
    path = tmp_path / "mc.jsonl"
    path.write_text(
        '{"id": "x1", "sent1": "He opened", "sent2": "the", '
        '"endings": ["door", "sky", "sea"], "label": 0}\n'
        '{"sent1": "She ate", "endings": ["soup", "rocks", "air"], "label": 2}\n'
    )
    examples = swag.read_swag(path)
    assert [(e.id, e.start, e.endings, e.label) for e in examples] == [
        ("x1", "the", ["door", "sky", "sea"], 0),
        ("2", "", ["soup", "rocks", "air"], 2),
    ]
    path.write_text('{"sent1": "a", "endings": ["b", "c"], "label": 5}\n')
    with pytest.raises(ValueError, match=f"{path} line 1: label '5'"):
        swag.read_swag(path)
    # It was trained without its sent2, silently.
    path.write_text(
        '{"sent1": "a", "sent2": 5, "endings": ["b", "c"], "label": 0}\n'
    )
    with pytest.raises(ValueError, match=f"{path} line 1: sent2 is not a"):
        swag.read_swag(path)
    # Numbered endings: a row without one of them (JSON Lines rows each
    # have their own keys) is a one-line error, not a KeyError.
    path.write_text(
        '{"sent1": "a", "ending0": "b", "ending1": "c", "label": 0}\n'
        '{"sent1": "a", "ending0": "b", "label": 0}\n'
    )
    with pytest.raises(ValueError, match=f"{path} line 2: fewer than 2"):
        swag.read_swag(path)
    path.write_text(
        '{"sent1": "a", "ending0": "b", "ending1": "c", "label": 0}\n'
        '{"sent1": "a", "endings": ["b", "c", "d"], "label": 0}\n'
    )
    with pytest.raises(
        ValueError, match=f"{path} line 2: 3 endings where .*line 1 has 2"
    ):
        swag.read_swag(path)


def test_json_lines_rows_have_their_own_fields(tmp_path):
    """A JSON object's fields are its own: a first row without sent2 (or a
    test row without a label) does not drop a later row's."""
    path = tmp_path / "mc.jsonl"
    path.write_text(
        '{"sent1": "He opened", "endings": ["door", "sky"]}\n'
        '{"sent1": "She", "sent2": "ate", "endings": ["soup", "air"], '
        '"label": 1, "id": 7}\n'
    )
    examples = swag.read_swag(path, "test", require_label=False)
    assert [(e.id, e.start, e.label) for e in examples] == [
        ("1", "", None),
        ("7", "ate", 1),
    ]
    with pytest.raises(ValueError, match=f"{path} line 1: no label"):
        swag.read_swag(path)


@pytest.mark.parametrize(
    "head,row,error",
    [
        # A padded header name is the column (as the other columns are).
        (" id,sent1,ending0,ending1,label", "q7,s,a,b,0", None),
        ("id,sent1,ending0,ending1,label", ",s,a,b,0", "no id in field 'id'"),
        ("sent1,ending0,ending1,label", "s,a, ,0", "ending1 is empty"),
        ("sent1,ending0,ending1,label", " ,a,b,0", "sent1 is empty"),
        # A label indexes the endings: a gap would shift it unsaid.
        ("sent1,ending0,ending2,label", "s,a,b,1", "not numbered ending0"),
        ("sent1,ending1,ending2,label", "s,a,b,1", "not numbered ending0"),
    ],
)
def test_fields_are_named(tmp_path, head, row, error):
    path = _write(tmp_path, f"{head}\n{row}\n")
    if error is None:
        assert swag.read_swag(path)[0].id == "q7"
        return
    with pytest.raises(ValueError, match=f"{path} line \\d: .*{error}"):
        swag.read_swag(path)


def test_served_examples_are_checked():
    """What a server (LiteChooser.predict) takes: a null sent2 is empty
    (not the text "None"); endings given as one string (scored letter by
    letter before), too few, empty, or of different counts: one line
    naming the example."""
    ok = {"sent1": "a", "sent2": None, "endings": ["x", "y"]}
    (example,) = swag.served_examples([ok])
    assert (example.start, example.endings) == ("", ["x", "y"])
    bad = [
        ({"sent1": "a", "endings": "xy"}, "example 0: endings must be a list"),
        ({"sent1": "a", "endings": ["x"]}, "example 0: endings must be a list"),
        ({"sent1": "", "endings": ["x", "y"]}, "example 0: empty"),
        ({"sent1": "a", "endings": ["x", 3]}, "example 0: empty or non-text"),
        ({"sent1": "a", "sent2": 1, "endings": ["x", "y"]}, "example 0: empty"),
        ("a text", "example 0: expected a dict"),
    ]
    for value, message in bad:
        with pytest.raises(ValueError, match=message):
            swag.served_examples([value])
    three = {"sent1": "a", "endings": ["x", "y", "z"]}
    with pytest.raises(ValueError, match="different numbers of endings"):
        swag.served_examples([ok, three])
