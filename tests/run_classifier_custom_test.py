"""run_classifier.py --task_name=custom: your own CSV / TSV / JSON Lines files.

The built-in tasks' data written out in each format, with other column
names, fine-tuned from the same checkpoint (MiniLM's first 2 layers:
conftest.minilm_small_ckpt) with the same flags and seed,
gives the built-in task's eval_results.txt and test_results.tsv (MRPC for
classification, STS-B for regression). A generated multi-label task is
learnt well above chance. Predict-only runs read labels.json; bad input
stops with the file and the line, leaving no partial output.
"""

import csv
import json
import pathlib
import random

import numpy as np
import pytest
import script_runner
import tensorflow as tf
import tolerance

from modeling.data import custom
from modeling.data import glue
from modeling.tasks import classifier as classifier_lib
from modeling.tasks import predictions
from modeling.text_classifier import BertTextClassifier

REPO = pathlib.Path(__file__).resolve().parents[1]
TESTDATA = REPO / "tests" / "testdata"
SEQ = 32
# Other names than the GLUE files' and the defaults.
COLUMNS = {"text_a": "first", "text_b": "second", "label": "quality"}


def _settings(minilm_small_ckpt, output_dir, learning_rate=None, **kwargs):
    values = {
        "data_dir": None,
        "task_name": "custom",
        "bert_config_file": str(minilm_small_ckpt / "bert_config.json"),
        "vocab_file": str(minilm_small_ckpt / "vocab.txt"),
        "output_dir": str(output_dir),
        "init_checkpoint": str(minilm_small_ckpt / "bert_model.ckpt"),
        "max_seq_length": SEQ,
        "train_batch_size": 4,
        "num_train_epochs": 1.0,
        "eval_batch_size": 3,
        "predict_batch_size": 2,
        "random_seed": 1,
    }
    values.update(kwargs)
    if learning_rate is not None:
        from modeling.training import trainer

        values["run_config"] = trainer.RunConfig(
            str(output_dir), 0, learning_rate=learning_rate
        )
    return classifier_lib.Settings(**values)


def write_rows(path, rows):
    """rows (dicts) as path's format: .csv, .tsv or .jsonl."""
    path = pathlib.Path(path)
    columns = list(rows[0])
    if path.suffix == ".jsonl":
        path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    elif path.suffix == ".csv":
        with open(path, "w", newline="", encoding="utf-8") as f:
            writer = csv.writer(f)
            writer.writerow(columns)
            writer.writerows([r[c] for c in columns] for r in rows)
    else:
        lines = ["\t".join(columns)]
        lines += ["\t".join(str(r[c]) for c in columns) for r in rows]
        path.write_text("\n".join(lines) + "\n")
    return str(path)


def write_glue_task(folder, task, data_dir, extension):
    """A GLUE task's train/dev/test as your own files (COLUMNS names; the
    test file with its index as "pair_id" and no label)."""
    processor = glue.get_processor(task)
    folder.mkdir(parents=True, exist_ok=True)
    files = {}
    for set_type, examples in (
        ("train", processor.get_train_examples(data_dir)),
        ("dev", processor.get_dev_examples(data_dir)),
        ("test", processor.get_test_examples(data_dir)),
    ):
        rows = []
        for e in examples:
            row = {"pair_id": e.index} if set_type == "test" else {}
            row[COLUMNS["text_a"]] = e.text_a
            row[COLUMNS["text_b"]] = e.text_b
            if set_type != "test":
                label = e.label
                if task == "sts-b" and extension == ".jsonl":
                    label = float(label)  # A JSON number.
                row[COLUMNS["label"]] = label
            rows.append(row)
        files[f"{set_type}_file"] = write_rows(
            folder / f"{set_type}{extension}", rows
        )
    return files


def _column_flags():
    return {f"{k}_column": v for k, v in COLUMNS.items()}


def _eval_results(path):
    return dict(
        line.split(" = ")
        for line in pathlib.Path(path).read_text().splitlines()
    )


def _test_results(path):
    lines = pathlib.Path(path).read_text().splitlines()
    return np.array([[float(v) for v in line.split("\t")] for line in lines])


def _assert_same_results(got_dir, want_dir):
    got = _eval_results(got_dir / "eval_results.txt")
    want = _eval_results(want_dir / "eval_results.txt")
    assert sorted(got) == sorted(want)
    assert got["global_step"] == want["global_step"]
    for key in want:
        # The same features in the same order through the same code: only
        # float32 rounding may differ (unit-scale metrics and losses).
        tolerance.assert_float32_close(
            float(got[key]), float(want[key]), scale=1.0
        )
    tolerance.assert_float32_close(
        _test_results(got_dir / "test_results.tsv"),
        _test_results(want_dir / "test_results.tsv"),
        scale=1.0,
    )


@pytest.fixture(scope="module")
def mrpc_reference(minilm_small_ckpt, tmp_path_factory):
    out = tmp_path_factory.mktemp("mrpc_reference")
    classifier_lib.run(
        _settings(
            minilm_small_ckpt,
            out,
            task_name="MRPC",
            data_dir=str(TESTDATA / "cls_mrpc"),
            do_train=True,
            do_eval=True,
            do_predict=True,
        )
    )
    return out


# JSON Lines is slow only: the default run has it in the STS-B test.
@pytest.mark.parametrize(
    "extension", [".tsv", pytest.param(".jsonl", marks=pytest.mark.slow)]
)
def test_mrpc_as_your_own_files_gives_mrpc_results(
    minilm_small_ckpt, mrpc_reference, tmp_path, extension
):
    files = write_glue_task(
        tmp_path / "data", "mrpc", str(TESTDATA / "cls_mrpc"), extension
    )
    out = tmp_path / "out"
    classifier_lib.run(
        _settings(
            minilm_small_ckpt,
            out,
            do_train=True,
            do_eval=True,
            do_predict=True,
            id_column="pair_id",
            **files,
            **_column_flags(),
        )
    )
    _assert_same_results(out, mrpc_reference)


def test_mrpc_as_csv_from_the_command_line(
    minilm_small_ckpt, mrpc_reference, tmp_path
):
    """The script as a user runs it; predictions.jsonl names the labels."""
    files = write_glue_task(
        tmp_path / "data", "mrpc", str(TESTDATA / "cls_mrpc"), ".csv"
    )
    out = tmp_path / "out"
    s = _settings(minilm_small_ckpt, out)
    args = [
        "--task_name=custom",
        *(f"--{k}={v}" for k, v in files.items()),
        *(f"--{k}={v}" for k, v in _column_flags().items()),
        "--id_column=pair_id",
        f"--vocab_file={s.vocab_file}",
        f"--bert_config_file={s.bert_config_file}",
        f"--init_checkpoint={s.init_checkpoint}",
        f"--output_dir={out}",
        "--do_train",
        "--do_eval",
        "--do_predict",
        f"--max_seq_length={SEQ}",
        "--train_batch_size=4",
        "--num_train_epochs=1",
        "--eval_batch_size=3",
        "--predict_batch_size=2",
        "--random_seed=1",
    ]
    script_runner.run_script("run_classifier.py", args)
    _assert_same_results(out, mrpc_reference)
    probs = _test_results(out / "test_results.tsv")
    rows = [
        json.loads(x) for x in (out / predictions.FILE).read_text().splitlines()
    ]
    test = glue.get_processor("mrpc").get_test_examples(
        str(TESTDATA / "cls_mrpc")
    )
    assert [r["id"] for r in rows] == [e.index for e in test]
    for row, p in zip(rows, probs, strict=True):
        assert row["label"] == ["0", "1"][int(np.argmax(p))]
        assert list(row["probabilities"]) == ["0", "1"]
        np.testing.assert_allclose(
            list(row["probabilities"].values()), p, rtol=1e-6
        )
    saved = json.loads((out / custom.LABELS_FILE).read_text())
    assert saved["labels"] == ["0", "1"]
    assert saved["text_b_column"] == "second"


def test_sts_b_as_json_lines_gives_sts_b_results(minilm_small_ckpt, tmp_path):
    """Regression: the STS-B head, loss and metrics from a JSON Lines file
    of numbers."""
    common = dict(do_train=True, do_eval=True, do_predict=True)
    want = tmp_path / "stsb"
    classifier_lib.run(
        _settings(
            minilm_small_ckpt,
            want,
            task_name="STS-B",
            data_dir=str(TESTDATA / "cls_stsb"),
            **common,
        )
    )
    files = write_glue_task(
        tmp_path / "data", "sts-b", str(TESTDATA / "cls_stsb"), ".jsonl"
    )
    got = tmp_path / "custom"
    results = classifier_lib.run(
        _settings(
            minilm_small_ckpt,
            got,
            task_type="regression",
            id_column="pair_id",
            **files,
            **_column_flags(),
            **common,
        )
    )
    assert {"eval_pearson", "eval_spearman"} <= set(results)
    _assert_same_results(got, want)
    scores = _test_results(got / "test_results.tsv")[:, 0]
    rows = [
        json.loads(x)
        for x in (got / predictions.FILE).read_text().split("\n")[:-1]
    ]
    assert [r["score"] for r in rows] == [predictions.number(v) for v in scores]


# === Multi-label ===

TOPICS = {
    "sports": ["football", "tennis", "goal", "match", "coach", "team"],
    "politics": ["election", "senate", "vote", "minister", "policy", "law"],
    "music": ["guitar", "concert", "album", "song", "band", "piano"],
    "weather": ["rain", "storm", "sunny", "forecast", "snow", "wind"],
}
FILLER = ["the", "a", "today", "people", "said", "about", "new", "city"]


def multi_label_rows(n, seed):
    rng = random.Random(seed)
    rows = []
    for i in range(n):
        topics = [t for t in TOPICS if rng.random() < 0.35]
        words = rng.sample(FILLER, 3)
        for t in topics:
            words += rng.sample(TOPICS[t], 2)
        rng.shuffle(words)
        rows.append(
            {"id": f"r{i}", "text": " ".join(words), "topics": ",".join(topics)}
        )
    return rows


# Slow: the multi-label kind's default-run tests are the threshold one
# below, own_data_test's and task_kinds_test's. All 6 of MiniLM's layers
# (minilm_ckpt), not minilm_small_ckpt: this test is about learning, not
# about two runs agreeing. The 2-layer model (whose pooler was trained on
# layer 6) reaches micro F1 0.62 in these 48 steps, under chance + 0.3
# (0.84); all 6 layers reach micro F1 and subset accuracy 1.0, in about the
# time the 2-layer model would need for the 8 epochs that it learns in.
@pytest.mark.slow
def test_multi_label_learns_a_generated_task(minilm_ckpt, tmp_path):
    train = write_rows(tmp_path / "train.csv", multi_label_rows(192, 1))
    dev_rows = multi_label_rows(64, 2)
    dev = write_rows(tmp_path / "dev.csv", dev_rows)
    out = tmp_path / "out"
    results = classifier_lib.run(
        _settings(
            minilm_ckpt,
            out,
            task_type="multi_label",
            train_file=train,
            dev_file=dev,
            test_file=dev,
            label_column="topics",
            do_train=True,
            do_eval=True,
            do_predict=True,
            train_batch_size=16,
            num_train_epochs=4.0,
            learning_rate=1e-4,
            eval_batch_size=16,
            predict_batch_size=16,
        )
    )
    labels = sorted(TOPICS)
    gold = np.array(
        [[int(t in r["topics"].split(",")) for t in labels] for r in dev_rows]
    )
    # Chance: the best constant guess, every label on every row (micro F1
    # 2p / (1 + p) for label density p), and the most frequent label set.
    density = gold.mean()
    chance_f1 = 2 * density / (1 + density)
    sets = [tuple(g) for g in gold]
    chance_subset = max(sets.count(x) for x in set(sets)) / len(sets)
    assert results["eval_micro_f1"] > chance_f1 + 0.3, (results, chance_f1)
    assert results["eval_subset_accuracy"] > chance_subset + 0.4, (
        results,
        chance_subset,
    )
    rows = [
        json.loads(x) for x in (out / predictions.FILE).read_text().splitlines()
    ]
    assert [r["id"] for r in rows] == [r["id"] for r in dev_rows]
    probs = _test_results(out / "test_results.tsv")
    assert probs.shape == (64, 4)
    for row, p in zip(rows, probs, strict=True):
        assert row["labels"] == [t for t, q in zip(labels, p) if q >= 0.5]
    hits = np.mean(
        [
            set(r["labels"]) == set(d["topics"].split(",")) - {""}
            for r, d in zip(rows, dev_rows)
        ]
    )
    assert hits == pytest.approx(results["eval_subset_accuracy"])

    # Predict only, from labels.json; the serving export's sigmoids.
    test = write_rows(
        tmp_path / "new.jsonl",
        [{"text": "the senate vote on the new law"}, {"text": "snow storm"}],
    )
    export = tmp_path / "export"
    classifier_lib.run(
        _settings(
            minilm_ckpt,
            out,
            test_file=test,
            do_predict=True,
            export_dir=str(export),
        )
    )
    rows = [
        json.loads(x) for x in (out / predictions.FILE).read_text().splitlines()
    ]
    assert [r["id"] for r in rows] == ["1", "2"]  # Line numbers.
    assert [r["labels"] for r in rows] == [["politics"], ["weather"]]
    import tensorflow_text  # noqa: F401 (registers the ops)

    served = (
        tf.saved_model.load(str(export))
        .signatures["serving_default"](
            text_a=tf.constant(["the senate vote on the new law", "snow storm"])
        )["probabilities"]
        .numpy()
    )
    tolerance.assert_float32_close(
        served, _test_results(out / "test_results.tsv"), scale=1.0
    )


def test_multi_label_threshold_is_stored_and_used(minilm_small_ckpt, tmp_path):
    """--multi_label_threshold=0.3 when training: labels.json records it, and
    a later predict-only run (no flag), the serving export and the Keras
    model all decide p >= 0.3, which here differs from 0.5 on some labels.
    Then --multi_label_threshold=auto picks the dev set's best micro-F1
    threshold and stores it."""
    import tensorflow_text  # noqa: F401 (registers the ops)

    from modeling import checkpoints
    from modeling import task_kinds
    from modeling.tasks import metrics

    train = write_rows(tmp_path / "train.csv", multi_label_rows(64, 5))
    dev_rows = multi_label_rows(48, 6)
    dev = write_rows(tmp_path / "dev.csv", dev_rows)
    out = tmp_path / "out"
    classifier_lib.run(
        _settings(
            minilm_small_ckpt,
            out,
            task_type="multi_label",
            train_file=train,
            label_column="topics",
            do_train=True,
            train_batch_size=16,
            num_train_epochs=1.0,
            learning_rate=1e-4,
            multi_label_threshold="0.3",
        )
    )
    spec = json.loads((out / custom.LABELS_FILE).read_text())
    assert spec["multi_label_threshold"] == 0.3
    export = tmp_path / "export"
    classifier_lib.run(
        _settings(
            minilm_small_ckpt,
            out,
            test_file=dev,
            do_predict=True,
            export_dir=str(export),
        )
    )
    probs = _test_results(out / "test_results.tsv")
    between = (probs >= 0.3) & (probs < 0.5)
    assert between.any(), "no probability between the two thresholds"
    labels = spec["labels"]
    rows = [
        json.loads(x) for x in (out / predictions.FILE).read_text().splitlines()
    ]
    for row, p in zip(rows, probs, strict=True):
        assert row["labels"] == [t for t, q in zip(labels, p) if q >= 0.3]
    info = json.loads(
        (export / "assets.extra" / "bert_export.json").read_text()
    )
    assert info["task_type"] == "multi_label"
    assert info["multi_label_threshold"] == 0.3
    texts = [r["text"] for r in dev_rows]
    served = tf.saved_model.load(str(export)).signatures["serving_default"](
        text_a=tf.constant(texts)
    )
    np.testing.assert_array_equal(
        served["predictions"].numpy(),
        [[int(t in r["labels"]) for t in labels] for r in rows],
    )
    model = BertTextClassifier.from_checkpoint(
        minilm_small_ckpt,
        num_labels=len(labels),
        sequence_length=SEQ,
        multi_label=True,
        multi_label_threshold=info["multi_label_threshold"],
    )
    checkpoints.load_weights(model.classifier, str(out))
    np.testing.assert_array_equal(
        model.predict_labels(texts), served["predictions"].numpy()
    )

    # auto: the dev set's best threshold, stored, used in eval_results.
    results = classifier_lib.run(
        _settings(
            minilm_small_ckpt,
            out,
            dev_file=dev,
            label_column="topics",
            do_eval=True,
            multi_label_threshold="auto",
        )
    )
    chosen = json.loads((out / custom.LABELS_FILE).read_text())[
        "multi_label_threshold"
    ]
    gold = np.array(
        [[int(t in r["topics"].split(",")) for t in labels] for r in dev_rows]
    )
    logits = np.log(probs / (1.0 - probs))  # The dev file was predicted.
    want, want_f1 = task_kinds.best_threshold(logits, gold)
    assert chosen == pytest.approx(want, abs=1e-4)
    assert results["eval_micro_f1"] == pytest.approx(want_f1, abs=1e-6)
    at_half = metrics.micro_f1(gold, (probs >= 0.5).astype(int))
    assert results["eval_micro_f1"] >= at_half
    with pytest.raises(ValueError, match="add --do_eval"):
        classifier_lib.run(
            _settings(
                minilm_small_ckpt,
                out,
                do_predict=True,
                test_file=dev,
                multi_label_threshold="auto",
            )
        )
    with pytest.raises(ValueError, match=r"in \(0, 1\)"):
        classifier_lib.run(
            _settings(
                minilm_small_ckpt,
                out,
                do_predict=True,
                test_file=dev,
                multi_label_threshold="1.5",
            )
        )


@pytest.mark.slow
def test_read_file_gives_the_scripts_examples(minilm_small_ckpt, tmp_path):
    """BertTextClassifier.read_file: the texts and label ids
    run_classifier.py --task_name=custom trains on."""
    rows = multi_label_rows(24, 3)
    train = write_rows(tmp_path / "train.tsv", rows)
    data = BertTextClassifier.read_file(
        train, task_type="multi_label", label_column="topics"
    )
    assert data.labels == sorted(
        {t for r in rows for t in r["topics"].split(",") if t}
    )
    assert list(data.x) == [r["text"] for r in rows]
    # Training and dev rows' ids are never written, so not read: their
    # lines (the header is line 1), not the file's "id" column. A test
    # file's ids (what predictions are written under) are that column.
    assert data.ids == [str(line) for line in range(2, len(rows) + 2)]
    dev = BertTextClassifier.read_file(
        train,
        labels=data.labels,
        task_type="multi_label",
        label_column="topics",
    )
    assert dev.ids == data.ids
    test = custom.CustomProcessor(
        task_type="multi_label", files={"test": train}, labels=data.labels
    ).get_test_examples()
    assert [e.index for e in test] == [r["id"] for r in rows]
    out = tmp_path / "out"
    classifier_lib.run(
        _settings(
            minilm_small_ckpt,
            out,
            task_type="multi_label",
            train_file=train,
            label_column="topics",
            do_train=True,
            train_batch_size=24,
        )
    )
    records = [
        tf.train.Example.FromString(r.numpy())
        for r in tf.data.TFRecordDataset(str(out / "train.tf_record"))
    ]
    label_ids = [
        list(r.features.feature["label_ids"].int64_list.value) for r in records
    ]
    assert label_ids == data.y.tolist()
    model = BertTextClassifier.from_checkpoint(
        minilm_small_ckpt,
        num_labels=len(data.labels),
        sequence_length=SEQ,
        multi_label=True,
    )
    history = model.fit(data.x, data.y, batch_size=8, epochs=1)
    assert np.isfinite(history.history["loss"][-1])


# === Bad input: the file and the line, nothing half-written ===


def _mrpc_csv(tmp_path):
    return write_glue_task(
        tmp_path / "data", "mrpc", str(TESTDATA / "cls_mrpc"), ".csv"
    )


def test_a_bad_row_in_the_predict_file_leaves_no_output(
    minilm_small_ckpt, mrpc_reference, tmp_path
):
    test = pathlib.Path(tmp_path / "test.csv")
    test.write_text("text_a,text_b\nfine,pair\nragged,row,here\n")
    out = _predict_only_dir(mrpc_reference, tmp_path / "out")
    settings = _settings(
        minilm_small_ckpt, out, test_file=str(test), do_predict=True
    )
    with pytest.raises(
        ValueError, match=f"{test} line 3: expected 2 comma-separated fields"
    ):
        classifier_lib.run(settings)
    assert not (out / "test_results.tsv").exists()
    assert not (out / predictions.FILE).exists()
    assert not [p for p in out.iterdir() if ".tmp-" in p.name]
    # --skip_bad_rows: the good row is predicted, the bad one counted.
    settings.skip_bad_rows = True
    classifier_lib.run(settings)
    assert len((out / predictions.FILE).read_text().splitlines()) == 1


def _predict_only_dir(reference, out):
    """A copy of the reference run's checkpoints, with the labels and
    columns of a custom task, without its outputs."""
    import shutil

    shutil.copytree(reference, out)
    for name in ("test_results.tsv", predictions.FILE, "predict.tf_record"):
        (out / name).unlink()
    (out / custom.LABELS_FILE).write_text(
        custom.TaskSpec(
            "classification", ["0", "1"], "text_a", "text_b"
        ).to_json()
    )
    return out


def test_an_empty_predict_file_is_an_error(
    minilm_small_ckpt, mrpc_reference, tmp_path
):
    test = tmp_path / "test.jsonl"
    test.write_text("\n")
    out = _predict_only_dir(mrpc_reference, tmp_path / "out")
    settings = _settings(
        minilm_small_ckpt, out, test_file=str(test), do_predict=True
    )
    with pytest.raises(ValueError, match=f"{test}: no rows"):
        classifier_lib.run(settings)
    assert not (out / predictions.FILE).exists()
    test = tmp_path / "test.csv"
    test.write_text("text_a,text_b\n")  # A header, no rows.
    settings.test_file = str(test)
    with pytest.raises(ValueError, match=f"{test}: no rows to predict"):
        classifier_lib.run(settings)


def test_missing_column_names_the_file_and_the_columns(
    minilm_small_ckpt, tmp_path
):
    files = _mrpc_csv(tmp_path)
    settings = _settings(
        minilm_small_ckpt,
        tmp_path / "out",
        do_train=True,
        train_file=files["train_file"],
        text_a_column="first",
        label_column="label",
    )
    with pytest.raises(
        ValueError,
        match=(
            r"train.csv has no column 'label' \(--label_column\); its columns "
            r"are \['first', 'second', 'quality'\]"
        ),
    ):
        classifier_lib.run(settings)


def test_dev_label_unseen_in_training(minilm_small_ckpt, tmp_path):
    train = write_rows(
        tmp_path / "train.csv", [{"text": "a", "label": "x"}] * 4
    )
    dev = write_rows(
        tmp_path / "dev.csv",
        [{"text": "a", "label": "x"}, {"text": "b", "label": "y"}],
    )
    settings = _settings(
        minilm_small_ckpt,
        tmp_path / "out",
        do_train=True,
        do_eval=True,
        train_file=train,
        dev_file=dev,
    )
    with pytest.raises(
        ValueError,
        match=(
            f"{dev} line 3: label 'y' is not one of the training labels "
            r"\['x'\]; list every label with --labels"
        ),
    ):
        classifier_lib.run(settings)


def test_data_dir_still_required_for_glue_tasks(minilm_small_ckpt, tmp_path):
    settings = _settings(
        minilm_small_ckpt, tmp_path / "out", task_name="MRPC", do_eval=True
    )
    with pytest.raises(ValueError, match="--data_dir is required for"):
        classifier_lib.prepare(settings)
