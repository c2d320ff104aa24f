"""Serving without TensorFlow (modeling/tasks/lite.py, predict_lite.py): a
classifier export's model.tflite on LiteRT gives the TensorFlow
SavedModel's probabilities within float32 rounding and its labels, in a
process where `import tensorflow` fails."""

import json

import numpy as np
import pytest
import script_runner
import tensorflow as tf
import tolerance

from modeling import errors
from modeling.tasks import classifier as classifier_lib
from modeling.training import trainer

pytest.importorskip("ai_edge_litert")

LABELS = ["bad", "fine", "good"]
TEXTS = [
    "a good film",
    "a bad film with a long and winding plot that goes nowhere at all",
    "fine",
    "good acting, bad script",
    "nothing to say",
    "the best film of the year, good in every way",
]


@pytest.fixture(scope="module")
def export(tmp_path_factory, tiny_config_dict_module, uncased_vocab_file):
    folder = tmp_path_factory.mktemp("lite")
    config = folder / "bert_config.json"
    config.write_text(json.dumps(tiny_config_dict_module))
    train = folder / "train.csv"
    rows = [(t, LABELS[i % 3]) for i, t in enumerate(TEXTS * 4)]
    train.write_text("text,label\n" + "".join(f'"{t}",{y}\n' for t, y in rows))
    out = folder / "out"
    classifier_lib.run(
        classifier_lib.Settings(
            data_dir=None,
            task_name="custom",
            train_file=str(train),
            bert_config_file=str(config),
            vocab_file=uncased_vocab_file,
            output_dir=str(out),
            max_seq_length=16,
            train_batch_size=8,
            num_train_epochs=1.0,
            do_train=True,
            export_dir=str(folder / "export"),
            run_config=trainer.RunConfig(str(out), 0, predict_runtime="tflite"),
        )
    )
    return folder / "export"


@pytest.fixture(scope="module")
def tiny_config_dict_module():
    from constants import TINY_CONFIG

    return {**TINY_CONFIG, "vocab_size": 30522}


def _saved_model(export, texts):
    serve = tf.saved_model.load(str(export)).signatures["serving_default"]
    out = serve(text_a=tf.constant(texts))
    return out["probabilities"].numpy(), out["predictions"].numpy()


def test_lite_classifier_equals_the_saved_model(export, tmp_path):
    want_p, want_ids = _saved_model(export, TEXTS)
    code = (
        "import json\n"
        "from modeling.tasks import lite\n"
        "model = lite.LiteClassifier(sys.argv[1], batch_size=4)\n"
        "rows = model.predict(json.loads(sys.argv[2]))\n"
        "assert 'tensorflow' not in sys.modules and 'keras' not in sys.modules\n"
        "print(json.dumps(rows))\n"
    )
    proc = script_runner.run_without_tensorflow(
        [str(export), json.dumps(TEXTS)], code
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    rows = json.loads(proc.stdout.strip().splitlines()[-1])
    assert [r["label"] for r in rows] == [LABELS[i] for i in want_ids]
    got = np.array([[r["probabilities"][n] for n in LABELS] for r in rows])
    # predictions.jsonl numbers: float32 values as their shortest decimal.
    tolerance.assert_float32_close(got, want_p)


def test_predict_lite_script(export, tmp_path):
    data = tmp_path / "new.jsonl"
    data.write_text(
        "".join(
            json.dumps({"id": f"r{i}", "text": t}) + "\n"
            for i, t in enumerate(TEXTS)
        )
    )
    out = tmp_path / "predictions.jsonl"
    proc = script_runner.run_without_tensorflow(
        [
            "predict_lite.py",
            f"--export_dir={export}",
            f"--input_file={data}",
            f"--output_file={out}",
            "--batch_size=4",
        ]
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    rows = [json.loads(x) for x in out.read_text().splitlines()]
    _, want_ids = _saved_model(export, TEXTS)
    assert [r["id"] for r in rows] == [f"r{i}" for i in range(len(TEXTS))]
    assert [r["label"] for r in rows] == [LABELS[i] for i in want_ids]
    # An output folder that is not there: one line naming the flag.
    missing = tmp_path / "no" / "p.jsonl"
    proc = script_runner.run_without_tensorflow(
        [
            "predict_lite.py",
            f"--export_dir={export}",
            f"--input_file={data}",
            f"--output_file={missing}",
        ]
    )
    assert proc.returncode == 1
    assert proc.stderr.strip().splitlines()[-1] == (
        f"error: The folder of --output_file={missing} does not exist: "
        f"create {missing.parent} first"
    )


def test_misuses_of_the_lite_classifier_are_refused(export, tmp_path, caplog):
    """What silently gave wrong rows or destroyed the export: an output
    inside the export folder, a second text for a single-text model, one
    string (predicted character by character), an empty .txt; and a bad
    thread count is named as such, not as a damaged model."""
    from modeling.tasks import lite

    data = tmp_path / "in.txt"
    data.write_text("a fine film\n")
    before = (export / "model.tflite").read_bytes()
    with pytest.raises(errors.UserError, match="is inside --export_dir"):
        lite.predict_file(export, str(data), str(export / "model.tflite"))
    assert (export / "model.tflite").read_bytes() == before
    from modeling.tasks.settings import lite as lite_settings

    with pytest.raises(ValueError, match="--batch_size=0: must be at least 1"):
        lite_settings.Settings(
            export_dir="e", input_file="i", output_file="o", batch_size=0
        )
    with pytest.raises(errors.UserError, match="--num_threads=-5: give 1"):
        lite.predict_file(
            export, str(data), str(tmp_path / "p.jsonl"), num_threads=-5
        )
    model = lite.load(export)
    with pytest.raises(ValueError, match="not one string"):
        model.predict("a fine film")
    # Items named (None failed in the tokenizer, a dict gave its keys).
    with pytest.raises(ValueError, match=r"^Texts\[1\] is not a string: None"):
        model.predict(["a fine film", None])
    with pytest.raises(ValueError, match="^Texts are a list, not a dict"):
        model.predict({"a fine film": 1})
    # Cut texts are logged, as run_classifier logs them.
    with caplog.at_level("INFO"):
        model.predict(["a fine film " * 20, "short"])
    assert (
        "1 of 2 texts were longer than max_seq_length=16 tokens" in caplog.text
    )
    with pytest.raises(ValueError, match="classifies single texts"):
        model.predict(["a"], ["b"])
    table = tmp_path / "in.jsonl"
    table.write_text(json.dumps({"text": "a", "t2": "b"}) + "\n")
    with pytest.raises(ValueError, match="--text_b_column=t2: this model"):
        model.predict_file(
            str(table), str(tmp_path / "p.jsonl"), text_b_column="t2"
        )
    empty = tmp_path / "empty.txt"
    empty.write_text("\n \n")
    with pytest.raises(ValueError, match="empty.txt: no rows to predict"):
        model.predict_file(str(empty), str(tmp_path / "p.jsonl"))
    assert not (tmp_path / "p.jsonl").exists()
    # A column flag a .txt file has no column for was ignored unsaid.
    with pytest.raises(errors.UserError, match="--id_column=k is not read: "):
        lite.predict_file(
            export, str(data), str(tmp_path / "p.jsonl"), id_column="k"
        )


def test_an_export_without_its_tflite_model_says_how_to_get_one(
    export, tmp_path
):
    import shutil

    from modeling.tasks import lite

    copy = tmp_path / "export"
    shutil.copytree(export, copy)
    info_path = copy / "assets.extra" / "bert_export.json"
    info = json.loads(info_path.read_text())
    del info["tflite"]
    info_path.write_text(json.dumps(info))
    with pytest.raises(ValueError, match="--predict_runtime=tflite"):
        lite.LiteClassifier(str(copy))


SENTENCES = [
    "Peter lives in Paris",
    "Maria works for Acme in London today",
    "nothing here",
    "",
    "Paris",
]


@pytest.fixture(scope="module")
def tagger_export(
    tmp_path_factory, tiny_config_dict_module, uncased_vocab_file
):
    from modeling.tasks import ner

    folder = tmp_path_factory.mktemp("lite_tagger")
    config = folder / "bert_config.json"
    config.write_text(json.dumps(tiny_config_dict_module))
    train = folder / "train.jsonl"
    rows = [
        {
            "tokens": ["Peter", "lives", "in", "Paris"],
            "tags": ["B-PER", "O", "O", "B-LOC"],
        },
        {
            "tokens": ["Acme", "is", "in", "London"],
            "tags": ["B-ORG", "O", "O", "B-LOC"],
        },
    ] * 4
    train.write_text("".join(json.dumps(r) + "\n" for r in rows))
    out = folder / "out"
    ner.run(
        ner.Settings(
            train_file=str(train),
            bert_config_file=str(config),
            vocab_file=uncased_vocab_file,
            output_dir=str(out),
            max_seq_length=8,
            train_batch_size=4,
            num_train_epochs=1.0,
            do_train=True,
            export_dir=str(folder / "export"),
            run_config=trainer.RunConfig(str(out), 0, predict_runtime="tflite"),
        )
    )
    return folder / "export"


def test_lite_tagger_equals_the_saved_model(tagger_export, tmp_path):
    """Windows included: max_seq_length 8 splits the longer sentences."""
    serve = tf.saved_model.load(str(tagger_export)).signatures[
        "serving_default"
    ]
    out = serve(text=tf.constant(SENTENCES))
    want = [
        [t.decode() for t in row[:n]]
        for row, n in zip(out["tags"].numpy(), out["num_words"].numpy())
    ]
    data = tmp_path / "new.jsonl"
    data.write_text(
        "".join(
            json.dumps({"id": f"s{i}", "tokens": s.split()}) + "\n"
            for i, s in enumerate(SENTENCES)
            if s
        )
    )
    result = tmp_path / "predictions.jsonl"
    proc = script_runner.run_without_tensorflow(
        [
            "predict_lite.py",
            f"--export_dir={tagger_export}",
            f"--input_file={data}",
            f"--output_file={result}",
        ]
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    rows = [json.loads(x) for x in result.read_text().splitlines()]
    assert [r["tags"] for r in rows] == [
        w for w, s in zip(want, SENTENCES) if s
    ]
    assert [r["id"] for r in rows] == ["s0", "s1", "s2", "s4"]
    code = (
        "import json\n"
        "from modeling.tasks import lite\n"
        "model = lite.load(sys.argv[1])\n"
        "print(json.dumps(model.predict(json.loads(sys.argv[2]))))\n"
    )
    proc = script_runner.run_without_tensorflow(
        [str(tagger_export), json.dumps(SENTENCES)], code
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    rows = json.loads(proc.stdout.strip().splitlines()[-1])
    assert [r["tags"] for r in rows] == want
    from modeling.tasks import lite

    model = lite.load(tagger_export)
    # A blank word was tagged; None failed in iterating it.
    for bad in (["new", " "], None):
        with pytest.raises(ValueError, match=r"^Texts\[1\] is not a string"):
            model.predict(["a b", bad])


def test_lite_tagger_reads_the_tokens_field_it_was_trained_with(
    tagger_export, tmp_path
):
    """run_ner --tokens_field=words: the export records it, and
    predict_lite (which has no such flag) reads JSON Lines by it."""
    import shutil

    from modeling.tasks import lite

    info_path = tagger_export / "assets.extra" / "bert_export.json"
    assert json.loads(info_path.read_text())["tokens_field"] == "tokens"
    export = tmp_path / "export"
    shutil.copytree(tagger_export, export)
    info = json.loads(info_path.read_text())
    info["tokens_field"] = "words"
    (export / "assets.extra" / "bert_export.json").write_text(json.dumps(info))
    data = tmp_path / "in.jsonl"
    data.write_text(json.dumps({"id": "a", "words": ["Peter", "lives"]}) + "\n")
    out = tmp_path / "p.jsonl"
    assert lite.load(export).predict_file(str(data), str(out)) == 1
    # The tagger reads run_ner's fields: a column flag is refused, not
    # ignored.
    with pytest.raises(errors.UserError, match="of run_ner.py reads"):
        lite.predict_file(export, str(data), str(out), text_a_column="w")
    (row,) = [json.loads(x) for x in out.read_text().splitlines()]
    assert row["tokens"] == ["Peter", "lives"] and len(row["tags"]) == 2


def test_lite_tagger_predicts_a_file_with_tags_it_does_not_know(
    tagger_export, tmp_path
):
    """A file to predict may carry gold tags (CoNLL's test file) or other
    columns: predict_lite reads its words alone, as run_ner --do_predict
    tags them (a tag the model lacks, or a POS column read as tags, refused
    the file)."""
    from modeling.tasks import lite

    model = lite.load(tagger_export)
    want = model.predict([["Peter", "lives"]])[0]["tags"]
    out = tmp_path / "p.jsonl"
    data = tmp_path / "in.txt"
    for text in (
        "Peter NNP B-NEVERSEEN\nlives VBZ O\n",
        "Peter B-NEVERSEEN NNP\nlives O B-VP\n",  # Tags, then POS.
        "Peter NNP\nlives VBZ\n",
    ):
        data.write_text(text)
        assert model.predict_file(str(data), str(out)) == 1
        (row,) = [json.loads(x) for x in out.read_text().splitlines()]
        assert row["tags"] == want, text
    data = tmp_path / "in.jsonl"
    data.write_text(json.dumps({"tokens": ["Peter", "lives"], "tags": "x"}))
    assert model.predict_file(str(data), str(out)) == 1


def test_lite_chooser_equals_the_saved_model(
    tmp_path, tiny_config_dict_module, uncased_vocab_file
):
    import run_multiple_choice_test as mc_test

    from modeling.tasks import multiple_choice

    config = tmp_path / "bert_config.json"
    config.write_text(json.dumps(tiny_config_dict_module))
    train = mc_test.write_swag(tmp_path / "train.csv", 8, 1)
    test = mc_test.write_swag(tmp_path / "test.csv", 6, 2, with_label=False)
    out = tmp_path / "out"
    multiple_choice.run(
        multiple_choice.Settings(
            train_file=str(train),
            bert_config_file=str(config),
            vocab_file=uncased_vocab_file,
            output_dir=str(out),
            max_seq_length=16,
            train_batch_size=4,
            num_train_epochs=1.0,
            do_train=True,
            export_dir=str(tmp_path / "export"),
            run_config=trainer.RunConfig(str(out), 0, predict_runtime="tflite"),
        )
    )
    from modeling.data import swag

    examples = swag.read_swag(str(test), "test", require_label=False)
    serve = tf.saved_model.load(str(tmp_path / "export")).signatures[
        "serving_default"
    ]
    want = serve(
        sent1=tf.constant([e.context for e in examples]),
        sent2=tf.constant([e.start for e in examples]),
        endings=tf.constant([e.endings for e in examples]),
    )["probabilities"].numpy()
    result = tmp_path / "predictions.jsonl"
    proc = script_runner.run_without_tensorflow(
        [
            "predict_lite.py",
            f"--export_dir={tmp_path / 'export'}",
            f"--input_file={test}",
            f"--output_file={result}",
        ]
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    rows = [json.loads(x) for x in result.read_text().splitlines()]
    assert [r["id"] for r in rows] == [e.id for e in examples]
    tolerance.assert_float32_close(
        np.array([r["probabilities"] for r in rows]), want
    )
    assert [r["label"] for r in rows] == np.argmax(want, -1).tolist()


# === Bad exports and inputs: one line naming the file, nothing written ===


def _predict_lite(export, data, out):
    return script_runner.run_without_tensorflow(
        [
            "predict_lite.py",
            f"--export_dir={export}",
            f"--input_file={data}",
            f"--output_file={out}",
        ]
    )


def _one_error_line(proc):
    """The `error:` line of a failed script: exit 1, no traceback."""
    assert proc.returncode == 1, proc.stderr[-3000:]
    assert "Traceback" not in proc.stderr, proc.stderr[-3000:]
    errors = [x for x in proc.stderr.splitlines() if x.startswith("error: ")]
    assert len(errors) == 1, proc.stderr[-3000:]
    return errors[0]


def test_a_folder_that_is_not_an_export_is_named_so(tmp_path):
    """predict_lite.py on a folder without bert_export.json (a run's
    output_dir, a Hub export): one line saying it is not an export (it
    named a missing data file)."""
    folder = tmp_path / "output_dir"
    folder.mkdir()
    data = tmp_path / "new.txt"
    data.write_text("a good film\n")
    line = _one_error_line(
        _predict_lite(folder, data, tmp_path / "predictions.jsonl")
    )
    assert "is not an export of this repository" in line, line
    assert not (tmp_path / "predictions.jsonl").exists()


def test_a_header_only_file_is_refused_as_run_classifier_refuses_it(
    export, tmp_path
):
    """run_classifier's --test_file check (CustomProcessor.check_file):
    exit 1 naming the file; no output; the user's folders unchanged. The
    export records the training file's text column, which is read by
    default."""
    info = json.loads(
        (export / "assets.extra" / "bert_export.json").read_text()
    )
    assert info["text_a_column"] == "text" and "text_b_column" not in info
    data = tmp_path / "data"
    data.mkdir()
    (data / "new.csv").write_text("id,text\n")
    before = script_runner.folder_digests(tmp_path)
    exported = script_runner.folder_digests(export)
    out = tmp_path / "predictions.jsonl"
    line = _one_error_line(_predict_lite(export, data / "new.csv", out))
    assert line == f"error: {data / 'new.csv'}: no rows to predict"
    assert script_runner.folder_digests(tmp_path) == before
    assert script_runner.folder_digests(export) == exported


@pytest.mark.parametrize(
    ("damage", "message"),
    [
        ("missing", "model.tflite does not exist: no TF Lite model"),
        ("truncated", "model.tflite: not a TF Lite model, truncated or"),
        ("positions", "max_seq_length 128 exceeds the model's"),
    ],
)
def test_a_damaged_export_is_one_line_naming_its_file(
    export, tmp_path, damage, message
):
    """model.tflite missing or cut short, or a bert_export.json whose
    sequence length exceeds the model's position table: predict_lite.py
    exits 1 with one line naming the file, writing nothing."""
    import shutil

    copy = tmp_path / "export"
    shutil.copytree(export, copy)
    model = copy / "model.tflite"
    info_path = copy / "assets.extra" / "bert_export.json"
    named = model
    if damage == "missing":
        model.unlink()
    elif damage == "truncated":
        model.write_bytes(model.read_bytes()[: model.stat().st_size // 2])
    else:
        info = json.loads(info_path.read_text())
        assert info["max_position_embeddings"] == 64
        info_path.write_text(json.dumps({**info, "max_seq_length": 128}))
        named = info_path
    data = tmp_path / "new.txt"
    data.write_text("a good film\n")
    before = script_runner.folder_digests(tmp_path)
    out = tmp_path / "predictions.jsonl"
    line = _one_error_line(_predict_lite(copy, data, out))
    assert line.startswith(f"error: {named}"), line
    assert message in line, line
    assert script_runner.folder_digests(tmp_path) == before


def _readme_block(marker):
    """The commands of docs/serving-lite.md's bash block holding `marker`:
    each command's lines joined (backslash continuations), comments
    dropped."""
    from constants import REPO_ROOT

    text = (REPO_ROOT / "docs" / "serving-lite.md").read_text()
    blocks = text.split("```bash\n")[1:]
    block = next(b.split("```")[0] for b in blocks if marker in b)
    joined = block.replace("\\\n", " ")
    return [
        " ".join(line.split())
        for line in joined.splitlines()
        if line.strip() and not line.lstrip().startswith("#")
    ]


def test_the_readmes_tf_free_command_on_its_example_data(
    tmp_path, uncased_vocab_file
):
    """docs/serving-lite.md "Serving without TensorFlow": its training command (a tiny
    model as $BERT_BASE_DIR, /tmp/ in tmp_path) and then its predict_lite.py
    command as written, without TensorFlow, on its example data: the export
    records the --text_a_column it was trained with (review), which
    predict_lite.py reads by default."""
    import shlex
    import shutil

    from constants import TINY_CONFIG

    from modeling import checkpoints
    from modeling import config as config_lib
    from modeling import models

    commands = _readme_block("predict_lite.py --export_dir=/tmp/reviews_export")
    train = next(c for c in commands if c.startswith("python run_classifier"))
    serve = next(c for c in commands if c.startswith("python predict_lite"))
    assert serve == (
        "python predict_lite.py --export_dir=/tmp/reviews_export "
        "--input_file=tests/testdata/own_data/reviews_new.jsonl "
        "--output_file=/tmp/predictions.jsonl"
    )
    base = tmp_path / "bert"
    base.mkdir()
    # 128 positions: the command's default max_seq_length.
    config = config_lib.BertConfig.from_dict(
        {**TINY_CONFIG, "vocab_size": 30522, "max_position_embeddings": 128}
    )
    config.to_json_file(str(base / "bert_config.json"))
    shutil.copy(uncased_vocab_file, base / "vocab.txt")
    # A pre-trained checkpoint: the encoder, no classifier head.
    weights = {
        checkpoints.variable_name(v): v.numpy()
        for v in models.BertClassifier(config, 2).weights
    }
    checkpoints.write_checkpoint(
        str(base / "bert_model.ckpt"),
        {k: v for k, v in weights.items() if not k.startswith("output_")},
    )

    def argv(command):
        command = command.replace("/tmp/", f"{tmp_path}/")
        command = command.replace("$BERT_BASE_DIR", str(base))
        return shlex.split(command)[1:]  # Without "python".

    script, *args = argv(train)
    script_runner.run_script(script, args)
    data = script_runner.REPO / "tests/testdata/own_data/reviews_new.jsonl"
    before = script_runner.folder_digests(tmp_path / "reviews_export")
    proc = script_runner.run_without_tensorflow(argv(serve))
    assert proc.returncode == 0, proc.stderr[-3000:]
    rows = [
        json.loads(x)
        for x in (tmp_path / "predictions.jsonl").read_text().splitlines()
    ]
    want = [json.loads(x)["id"] for x in data.read_text().splitlines()]
    assert [r["id"] for r in rows] == want
    labels = {"negative", "neutral", "positive"}
    assert all(r["label"] in labels for r in rows), rows
    assert script_runner.folder_digests(tmp_path / "reviews_export") == before
