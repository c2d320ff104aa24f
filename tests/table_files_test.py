"""Your own files: CSV / TSV / JSON Lines rows (modeling/data/table_files.py)
and the custom task's examples and labels (modeling/data/custom.py).

Every bad input is an error naming the file and the line, or with
skip_bad_rows a counted skip."""

import json
import types

import pytest

from modeling.data import custom
from modeling.data import table_files


def _write(tmp_path, name, text, encoding="utf-8"):
    path = tmp_path / name
    if isinstance(text, bytes):
        path.write_bytes(text)
    else:
        path.write_text(text, encoding=encoding, newline="")
    return str(path)


def _rows(path, skip=False):
    bad = table_files.BadRows(skip)
    rows = list(table_files.TableFile(path, bad).rows())
    return rows, bad


# === Reading rows ===


def test_csv_quoting_commas_quotes_newlines_and_bom(tmp_path):
    path = _write(
        tmp_path,
        "a.csv",
        "\ufefftext,label\r\n"
        '"one, two",pos\r\n'
        '"she said ""hi""",neg\r\n'
        '"two\nlines",pos\r\n'
        "\r\n"
        "plain,neg\r\n",
    )
    rows, _ = _rows(path)
    assert table_files.TableFile(path).columns == ["text", "label"]
    assert rows == [
        (2, {"text": "one, two", "label": "pos"}),
        (3, {"text": 'she said "hi"', "label": "neg"}),
        (4, {"text": "two\nlines", "label": "pos"}),
        # A field over two lines: the next row starts on line 6; the blank
        # line 6 is skipped.
        (7, {"text": "plain", "label": "neg"}),
    ]


def test_tsv_keeps_quotes_as_text(tmp_path):
    path = _write(
        tmp_path, "a.tsv", 'id\ttext\n7\t"quoted, not a field"\n8\tx "y\n'
    )
    rows, _ = _rows(path)
    assert rows == [
        (2, {"id": "7", "text": '"quoted, not a field"'}),
        (3, {"id": "8", "text": 'x "y'}),
    ]


def test_json_lines_and_json_array(tmp_path):
    lines = _write(
        tmp_path,
        "a.jsonl",
        '{"text": "caf\u00e9", "label": 1}\n\n{"text": "b", "label": [1, 2]}\n',
    )
    rows, _ = _rows(lines)
    assert rows == [
        (1, {"text": "caf\u00e9", "label": 1}),
        (3, {"text": "b", "label": [1, 2]}),
    ]
    array = _write(tmp_path, "b.json", json.dumps([{"t": "x"}, {"t": "y"}]))
    table = table_files.TableFile(array)
    assert list(table.rows()) == [(1, {"t": "x"}), (2, {"t": "y"})]
    assert table.where(2) == f"{array} item 2"


@pytest.mark.parametrize("name", ["a.csv", "a.tsv", "a.jsonl"])
def test_rows_stream_one_at_a_time(tmp_path, name):
    """The first row comes before the reader has seen the end of the file:
    a file whose last line is not UTF-8 gives its first rows, then the
    error (a reader that loads or decodes the whole file first would fail
    at once)."""
    row = '{"text": "x"}\n' if name.endswith(".jsonl") else "x\n"
    header = "" if name.endswith(".jsonl") else "text\n"
    path = tmp_path / name
    path.write_bytes((header + row * 1000).encode() + b"\xff\n")
    rows = table_files.TableFile(str(path)).rows()
    first = 1 + bool(header)
    assert next(rows) == (first, {"text": "x"})
    assert next(rows) == (first + 1, {"text": "x"})
    with pytest.raises(ValueError, match=f"line {first + 1000}: not UTF-8"):
        list(rows)
    assert table_files.TableFile(str(path)).count_lines() == 1001 + bool(header)


# === Bad rows: the file and the line ===


@pytest.mark.parametrize(
    "name, text, message",
    [
        (
            "a.csv",
            "text,label\nfine,1\nragged,1,extra\n",
            "line 3: expected 2 comma-separated fields (as the header), "
            "found 3",
        ),
        (
            "a.tsv",
            "text\tlabel\nfine\t1\nno tab\n",
            "line 3: expected 2 tab-separated fields (as the header), found 1",
        ),
        ("a.csv", 'text,label\n"x"y,1\nfine,1\n', "line 2: not CSV"),
        (
            "a.jsonl",
            '{"text": "a"}\n{"text": "b",}\n',
            "line 2: not a JSON object",
        ),
        ("a.jsonl", '{"text": "a"}\n["b"]\n', "line 2: expected a JSON object"),
        (
            "a.jsonl",
            '{"text": "a"}\n{"text": "b", "text": "c"}\n',
            "line 2: the key 'text' appears twice in one object",
        ),
    ],
)
def test_bad_rows_name_file_and_line(tmp_path, name, text, message):
    path = _write(tmp_path, name, text)
    with pytest.raises(ValueError, match=_literal(f"{path} {message}")):
        _rows(path)
    rows, bad = _rows(path, skip=True)
    assert bad.count == 1
    assert len(rows) == 1


@pytest.mark.parametrize(
    "text, message",
    [
        ('text,"la"bel\nx,1\n', "line 1: not CSV: ',' expected after"),
        ("text,label\rx,1\ry,0\r", "lone carriage return"),
    ],
)
def test_a_header_csv_cannot_read_is_one_line(tmp_path, text, message):
    """csv.Error is no ValueError: from the header it was a traceback that
    named no file."""
    path = _write(tmp_path, "a.csv", text)
    with pytest.raises(ValueError, match=_literal(f"{path}") + ".*" + message):
        _rows(path)


@pytest.mark.parametrize(
    "name, text, message",
    [
        ("a.jsonl", "not json\n{bad\n", "line 1: not a JSON object"),
        ("a.json", "[1, 2]", "item 1: expected a JSON object"),
    ],
)
def test_a_file_of_bad_rows_only_is_not_called_empty(
    tmp_path, name, text, message
):
    """Its columns (the first object's keys) say why there is none: the
    first bad row's error, not "an empty file"."""
    path = _write(tmp_path, name, text)
    with pytest.raises(ValueError, match=_literal(f"{path} {message}")):
        table_files.TableFile(path).columns
    # Skipping bad rows: no columns; the rows counted once, when read.
    skipping = table_files.BadRows(skip=True, quiet=True)
    table = table_files.TableFile(path, skipping)
    assert table.columns == []
    assert list(table.rows()) == []
    assert skipping.count == 2


def test_not_utf8_names_the_line(tmp_path):
    path = _write(tmp_path, "a.csv", b"text\nok\nr\xe9sum\xe9\n")
    with pytest.raises(ValueError, match=_literal(f"{path} line 3: not UTF-8")):
        _rows(path)


def test_unknown_extension_missing_file_and_duplicate_header(tmp_path):
    with pytest.raises(ValueError, match=r"unknown file kind '\.xlsx'"):
        table_files.TableFile(_write(tmp_path, "a.xlsx", "x"))
    with pytest.raises(FileNotFoundError, match="nope.csv"):
        table_files.TableFile(str(tmp_path / "nope.csv"))
    path = _write(tmp_path, "d.csv", "text,text\na,b\n")
    with pytest.raises(ValueError, match=r"line 1: the header names .*'text'"):
        _rows(path)


def test_missing_column_lists_the_columns_found(tmp_path):
    path = _write(tmp_path, "a.csv", "review,stars\ngood,5\n")
    table = table_files.TableFile(path)
    with pytest.raises(ValueError) as e:
        table_files.find_column(table, "label_column", "label")
    assert str(e.value) == (
        f"{path} has no column 'label' (--label_column); its columns are "
        "['review', 'stars']"
    )
    with pytest.raises(
        ValueError, match=r"has none of the columns \['text_a', "
    ):
        table_files.find_column(
            table, "text_a_column", None, custom.TEXT_A_COLUMNS
        )


# === The custom task's examples and labels ===


def _processor(path, **kwargs):
    return custom.CustomProcessor(files={"train": path}, **kwargs)


def test_text_column_defaults_and_ids(tmp_path):
    path = _write(
        tmp_path,
        "a.csv",
        "idx,question,sentence,label\n17,q?,s.,b\n18,r?,t.,a\n",
    )
    p = _processor(path)
    examples = p.get_train_examples()
    # QNLI's shape: the question and its sentence are a pair.
    assert [(e.text_a, e.text_b) for e in examples] == [
        ("q?", "s."),
        ("r?", "t."),
    ]
    assert (p.text_a_column, p.text_b_column) == ("question", "sentence")
    # Ids are a test file's (training and dev ids are never written, and
    # not read: a repeating pandas index column was refused).
    assert [e.index for e in examples] == ["2", "3"]
    test = custom.CustomProcessor(files={"test": path})
    assert [e.index for e in test.iter_test_examples()] == ["17", "18"]
    repeating = _write(tmp_path, "r.csv", "index,text,label\n0,a,x\n0,b,y\n")
    assert len(_processor(repeating).get_train_examples()) == 2
    p.set_labels_from_training()
    assert p.get_labels() == ["a", "b"]
    # With --text_a_column, single texts.
    p = _processor(path, text_a_column="sentence")
    assert [(e.text_a, e.text_b) for e in p.get_train_examples()] == [
        ("s.", None),
        ("t.", None),
    ]
    # Without a pair, the first of TEXT_A_COLUMNS ("sentence" before
    # "question").
    path = _write(tmp_path, "b.csv", "sentence,label,text\ns.,b,x\n")
    p = _processor(path)
    assert [(e.text_a, e.text_b) for e in p.get_train_examples()] == [
        ("s.", None)
    ]


def test_labels_sort_numerically_when_integers(tmp_path):
    rows = "".join(f'{{"text": "t", "label": {n}}}\n' for n in (10, 2, 1, 2))
    p = _processor(_write(tmp_path, "a.jsonl", rows))
    p.set_labels_from_training()
    assert p.get_labels() == ["1", "2", "10"]


def test_multi_label_from_lists_and_separated_strings(tmp_path):
    csv_path = _write(tmp_path, "a.csv", 'text,label\nx,"b,a"\ny,\nz, c \n')
    p = _processor(csv_path, task_type="multi_label")
    assert [e.label for e in p.get_train_examples()] == [["a", "b"], [], ["c"]]
    p.set_labels_from_training()
    assert p.get_labels() == ["a", "b", "c"]
    json_path = _write(
        tmp_path, "a.jsonl", '{"text": "x", "label": ["b", "a", "b"]}\n'
    )
    p = _processor(json_path, task_type="multi_label", labels=["a", "b", "c"])
    assert p.get_train_examples()[0].label == ["a", "b"]


@pytest.mark.parametrize(
    "text, kwargs, message",
    [
        ("text,label\n ,1\n", {}, "line 2: empty text in column 'text'"),
        ("text,label\nx,\n", {}, "line 2: empty label (column 'label')"),
        (
            "text,label\nx,maybe\n",
            {"labels": ["yes", "no"]},
            "line 2: label 'maybe' is not one of the labels ['yes', 'no']",
        ),
        (
            "text,label\nx,high\n",
            {"task_type": "regression"},
            "line 2: regression target 'high' (column 'label') is not a number",
        ),
        (
            "text,label\nx,nan\n",
            {"task_type": "regression"},
            "line 2: regression target 'nan' is not finite",
        ),
    ],
)
def test_bad_examples_name_file_and_line(tmp_path, text, kwargs, message):
    path = _write(tmp_path, "a.csv", text + "fine,1\n")
    with pytest.raises(ValueError, match=_literal(f"{path} {message}")):
        _processor(path, **kwargs).get_train_examples()
    p = _processor(path, skip_bad_rows=True, **kwargs)
    if kwargs.get("labels"):
        p.labels = ["yes", "no", "1"]
    assert len(p.get_train_examples()) == 1


def test_a_list_label_and_a_missing_id_column_are_named(tmp_path):
    """A JSON list as a single label became the class "['x', 'y']"; an
    --id_column not in the file gave line numbers as ids, silently."""
    path = _write(tmp_path, "a.jsonl", '{"text": "x", "label": ["x", "y"]}\n')
    with pytest.raises(ValueError, match="needs --task_type=multi_label"):
        _processor(path).get_train_examples()
    path = _write(tmp_path, "b.csv", "id,text\n7,x\n")
    processor = custom.CustomProcessor(files={"test": path}, id_column="doc_id")
    with pytest.raises(ValueError, match="no column 'doc_id'"):
        list(processor.iter_test_examples())


def test_bad_json_values_name_the_field(tmp_path):
    path = _write(tmp_path, "a.jsonl", '{"text": null, "label": "a"}\n')
    with pytest.raises(ValueError, match="line 1: 'text' is not a text: None"):
        _processor(path).get_train_examples()
    path = _write(
        tmp_path, "b.jsonl", '{"text": "x", "label": "a"}\n{"text": "y"}\n'
    )
    with pytest.raises(
        ValueError, match=r"line 2: no field 'label' \(fields: \['text'\]\)"
    ):
        _processor(path).get_train_examples()


def test_dev_label_unseen_in_training_is_an_error(tmp_path):
    dev = _write(tmp_path, "dev.csv", "text,label\nx,a\ny,z\n")
    p = custom.CustomProcessor(files={"dev": dev}, labels=["a", "b"])
    with pytest.raises(
        ValueError,
        match=_literal(
            f"{dev} line 3: label 'z' is not one of the training labels "
            "['a', 'b']; list every label with --labels"
        ),
    ):
        p.get_dev_examples()
    # Not skipped by skip_bad_rows: it would bias the dev metrics.
    p.skip_bad_rows = True
    with pytest.raises(ValueError, match="training labels"):
        p.get_dev_examples()


def _settings(tmp_path, **kwargs):
    values = dict(
        data_dir=None,
        output_dir=str(tmp_path / "out"),
        train_file=None,
        dev_file=None,
        test_file=None,
        task_type=None,
        text_a_column=None,
        text_b_column=None,
        label_column=None,
        id_column=None,
        labels=None,
        label_separator=",",
        skip_bad_rows=False,
        multi_label_threshold=None,
        do_train=False,
        do_eval=False,
        do_predict=False,
    )
    values.update(kwargs)
    return types.SimpleNamespace(**values)


def test_labels_json_serves_later_runs(tmp_path):
    train = _write(tmp_path, "train.jsonl", '{"t": "x", "y": "b"}\n' * 2)
    s = _settings(
        tmp_path,
        train_file=train,
        do_train=True,
        text_a_column="t",
        label_column="y",
        labels="b,a",
    )
    p = custom.processor_from_settings(s)
    # Written by publish_spec, once the run has checked everything.
    assert not (tmp_path / "out" / custom.LABELS_FILE).exists()
    custom.publish_spec(p)
    saved = json.loads((tmp_path / "out" / custom.LABELS_FILE).read_text())
    assert saved == {
        "task_type": "classification",
        "labels": ["b", "a"],
        "text_a_column": "t",
        "text_b_column": None,
        "multi_label_threshold": None,
    }
    test = _write(tmp_path, "test.jsonl", '{"t": "new", "id": 5}\n')
    p = custom.processor_from_settings(
        _settings(tmp_path, test_file=test, do_predict=True)
    )
    assert p.get_labels() == ["b", "a"]
    assert [(e.text_a, e.index) for e in p.iter_test_examples()] == [
        ("new", "5")
    ]
    with pytest.raises(ValueError, match=r"--labels \['a', 'b'\] differs"):
        custom.processor_from_settings(
            _settings(tmp_path, test_file=test, do_predict=True, labels="a,b")
        )
    with pytest.raises(ValueError, match="says this output_dir's model is"):
        custom.processor_from_settings(
            _settings(
                tmp_path,
                test_file=test,
                do_predict=True,
                task_type="regression",
            )
        )


def test_missing_files_and_labels_fail_before_any_work(tmp_path):
    with pytest.raises(ValueError, match="--do_eval needs --dev_file"):
        custom.processor_from_settings(_settings(tmp_path, do_eval=True))
    test = _write(tmp_path, "test.csv", "text\nx\n")
    with pytest.raises(ValueError, match="No label list: .*labels.json"):
        custom.processor_from_settings(
            _settings(tmp_path, test_file=test, do_predict=True)
        )


def test_files_found_in_data_dir(tmp_path):
    _write(tmp_path, "train.tsv", "text\tlabel\nx\ta\n")
    s = _settings(tmp_path, data_dir=str(tmp_path), do_train=True)
    p = custom.processor_from_settings(s)
    assert p.path("train") == str(tmp_path / "train.tsv")


def test_reading_rows_does_not_load_tensorflow():
    import subprocess
    import sys

    code = (
        "import sys; from modeling.data import table_files; "
        "assert 'tensorflow' not in sys.modules"
    )
    subprocess.run([sys.executable, "-c", code], check=True)


def _literal(text):
    import re

    return re.escape(text)


def test_a_text_file_is_read_one_line_at_a_time(tmp_path):
    """A .txt corpus (run_embeddings) streams: taking its first texts costs
    one line's memory, not the file's (read whole, two or three times, a
    10 GB corpus needed about 35 GB a pass)."""
    import tracemalloc

    path = tmp_path / "corpus.txt"
    line = "the quick brown fox jumps over the lazy dog " * 2
    path.write_text((line + "\n") * 100_000)  # 9 MB
    texts = table_files.TextFile(str(path))
    tracemalloc.start()
    rows = texts.rows()
    first = [next(rows) for _ in range(3)]
    _, peak = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    assert first[0] == ("1", line)
    assert peak < 1 << 20, peak


# === A user's files, as a demanding user writes them ===


def test_json_columns_are_every_rows_keys(tmp_path):
    """A JSON Lines row's fields are its own: a key the first row lacks is
    still a column (every later row's sentence2, and the test file's ids,
    were dropped silently); the row without it is named."""
    rows = [
        {"sentence1": "a", "label": "x"},
        {"sentence1": "b", "sentence2": "c", "label": "y"},
        {"sentence1": "d", "sentence2": "e", "label": "x"},
    ]
    path = _write(
        tmp_path, "a.jsonl", "".join(json.dumps(r) + "\n" for r in rows)
    )
    assert table_files.TableFile(path).columns == [
        "sentence1",
        "label",
        "sentence2",
    ]
    with pytest.raises(
        ValueError, match=_literal(f"{path} line 1: no field 'sentence2'")
    ):
        _processor(path).get_train_examples()
    p = _processor(path, skip_bad_rows=True)
    assert [(e.text_a, e.text_b) for e in p.get_train_examples()] == [
        ("b", "c"),
        ("d", "e"),
    ]
    test = _write(
        tmp_path, "t.jsonl", '{"text": "a"}\n{"text": "b", "id": "B"}\n'
    )
    processor = custom.CustomProcessor(files={"test": test})
    with pytest.raises(
        ValueError, match=_literal(f"{test} line 1: no id in column 'id'")
    ):
        list(processor.iter_test_examples())


@pytest.mark.parametrize(
    "text, message",
    [
        ("id,text\n7,a\n7,b\n", "line 3: id '7' (column 'id') is used twice"),
        ("id,text\n,a\n", "line 2: no id in column 'id': ''"),
        (
            'id,text\n"x\ny",a\n',
            "line 2: id 'x\\ny' (column 'id') holds a line break",
        ),
    ],
)
def test_a_text_files_ids_are_checked_as_the_classifiers(
    tmp_path, text, message
):
    """The embedding scripts' --id_column (ids.txt, one per line beside the
    vectors) follows run_classifier's rule: present, unique, one line."""
    path = _write(tmp_path, "a.csv", text)
    with pytest.raises(ValueError, match=_literal(f"{path} {message}")):
        list(table_files.TextFile(path, id_column="id").rows())
    path = _write(tmp_path, "b.jsonl", '{"text": "a", "id": null}\n')
    with pytest.raises(ValueError, match="line 1: no id in column 'id': None"):
        list(table_files.TextFile(path, id_column="id").rows())


def test_an_id_column_found_by_name_may_repeat_or_miss(tmp_path, caplog):
    """Not given, an `id` column is the ids where it has one (a document's
    passages share theirs; a row without one is numbered by its line), with
    a warning; a line break is still refused (it would split ids.txt)."""
    path = _write(tmp_path, "a.csv", "id,text\ndoc1,a\ndoc1,b\n,c\n")
    texts = table_files.TextFile(path)
    assert texts.count() == 3
    rows = list(texts.rows())
    assert rows == [("doc1", "a"), ("doc1", "b"), ("4", "c")]
    # Once each, though the file is read twice (counted, then embedded).
    assert caplog.text.count("repeats an earlier row's") == 1
    assert caplog.text.count("numbered by their line") == 1
    path = _write(tmp_path, "b.csv", 'id,text\n"x\ny",a\n')
    with pytest.raises(ValueError, match="holds a line break"):
        list(table_files.TextFile(path).rows())


def test_json_numbers_too_long_or_nesting_too_deep_name_the_line(tmp_path):
    path = _write(
        tmp_path,
        "a.jsonl",
        '{"text": "a", "label": 1}\n'
        + '{"text": "b", "label": '
        + "9" * 5000
        + "}\n"
        + '{"text": "c", "label": '
        + "[" * 100000
        + "]" * 100000
        + "}\n",
    )
    with pytest.raises(
        ValueError, match=_literal(f"{path} line 2: not a JSON object")
    ):
        _rows(path)
    rows, bad = _rows(path, skip=True)
    assert len(rows) == 1 and bad.count == 2


def test_label_lists_hold_names_only_and_ties_sort_by_text(tmp_path):
    path = _write(
        tmp_path, "a.jsonl", '{"text": "x", "label": ["a", null, ["b"]]}\n'
    )
    with pytest.raises(ValueError, match="holds null: each label is a name"):
        _processor(path, task_type="multi_label").get_train_examples()
    # "1", "01" and "+1" are one integer: their order was the set's, which
    # changes between processes (PYTHONHASHSEED).
    assert custom.sorted_labels(["1", "2", "01", "+1", "10"]) == [
        "+1",
        "01",
        "1",
        "2",
        "10",
    ]


def test_header_mistakes_get_a_hint(tmp_path):
    path = _write(tmp_path, "a.csv", "text , label\nx,1\n")
    with pytest.raises(
        ValueError, match=r"spaces around them: \['text ', ' label'\]"
    ):
        _processor(path).get_train_examples()
    path = _write(tmp_path, "b.csv", "text,label,,\nx,1,,\n")
    with pytest.raises(ValueError, match="does the header end in separators"):
        _rows(path)


def test_a_json_files_keys_are_scanned_once_a_process(tmp_path, monkeypatch):
    """The key scan reads the whole file: the scripts' checks and reads of
    one file share it (a 10 GB corpus took minutes a scan), and a changed
    file is scanned again."""
    path = _write(
        tmp_path, "a.jsonl", '{"text": "a"}\n{"text": "b", "id": 2}\n'
    )
    parsed = []
    loads = json.loads
    monkeypatch.setattr(
        table_files.json,
        "loads",
        lambda *a, **k: parsed.append(1) or loads(*a, **k),
    )
    assert table_files.TableFile(path).columns == ["text", "id"]
    assert table_files.TableFile(path).columns == ["text", "id"]
    assert len(parsed) == 2
    _write(tmp_path, "a.jsonl", '{"text": "a", "label": 1}\n')
    assert table_files.TableFile(path).columns == ["text", "label"]
