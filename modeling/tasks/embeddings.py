"""What run_embeddings.py does: a vector per text, semantic search, and the
scores of a model's vectors, with sentence-transformers' numbers.

The model (`sentence_models.read_model`) is a sentence-transformers folder
(read as it is: pooling, normalization, max_seq_length, casing and the
activation it names), an HF BERT folder, or an original checkpoint.
--pooling, --normalize, --max_seq_length and --do_lower_case, when given,
override what the folder says; without a folder's word the defaults are
mean pooling, normalized, 128 pieces, lower-cased. --long_inputs (and
head_tokens, chunk_stride, chunk_pooling; modeling/data/long_inputs.py)
says how texts longer than max_seq_length are read: cut (the default),
head and tail, or windows whose vectors are averaged (or maxed) and
normalized again.

The vectors come from models.BertEmbedder (the encoder, then
heads.SentencePooling) through the one predictor (length-sorted batches,
outputs back in input order; --predict_runtime=tflite / tflite_int8 as the
fine-tuning scripts). A text is the original's single-text features,
`[CLS] text [SEP]` cut to max_seq_length pieces, as sentence-transformers
cuts it; how many texts were cut is logged.

Modes:
- --do_train: fine-tunes on pairs (`train`): anchor / positive (/ negative)
  with in-batch negatives, or sentence1 / sentence2 / score with CoSENT
  (losses.py), on the shared Trainer; later modes use the trained weights,
  and so does a later run with the same output_dir, with the model
  embedding_config.json says they were trained from (another
  --init_checkpoint, activation, --pooling or --do_lower_case is an error).
Nothing is written to output_dir before every input file is read
(`check_inputs`): a failed run leaves it as it was.
- --do_predict: embeddings.npy (float32 [N, H], input order), written as
  it goes into a file published when complete; ids.txt beside it.
- --do_search: the corpus embedded once (or --corpus_embeddings, a previous
  embeddings.npy, memory-mapped), the queries scored against it in chunks
  with a running top-k (cosine similarity: the dot product of normalized
  vectors): search_results.jsonl.
- --do_eval: scored pairs (sentence1, sentence2, score) give the Spearman
  and Pearson correlations of the cosine similarities with the scores
  (STS-B's dev file as it is); query / positive pairs give MRR@10 and
  recall@1 / @10 with every distinct positive as the corpus.
- --export_dir: a serving SavedModel from raw strings to vectors (each batch
  padded to its longest row), with model.tflite when --predict_runtime is
  a TF Lite one.
"""

import dataclasses
import functools
import json
import os

import keras
import numpy as np
from absl import logging

from modeling import checkpoints
from modeling import losses
from modeling import models
from modeling import progress
from modeling import sentence_models
from modeling.data import classifier_data
from modeling.data import file_io
from modeling.data import long_inputs as long_inputs_lib
from modeling.data import table_files
from modeling.tasks import common
from modeling.tasks import metrics
from modeling.tasks import predictions
from modeling.tasks.settings import embeddings as embeddings_settings
from modeling.text import tokenization
from modeling.training import predictor as predictor_lib

# The script's flags (modeling/tasks/settings/embeddings.py).
Settings = embeddings_settings.Settings

EMBEDDINGS_FILE = "embeddings.npy"
IDS_FILE = "ids.txt"
CORPUS_EMBEDDINGS_FILE = "corpus_embeddings.npy"
CORPUS_IDS_FILE = "corpus_ids.txt"
SEARCH_RESULTS_FILE = "search_results.jsonl"
# Written beside a folder's outputs: what the vectors were made with; in a
# folder a run trained in, the model its checkpoints were trained from
# (`trained_description`: later runs read it).
EMBEDDING_CONFIG_FILE = "embedding_config.json"
# Flags a trained folder's description decides: given, they must agree.
_TRAINED_WITH = ("pooling", "do_lower_case")
# Texts featurized and embedded at a time (their features in memory).
CHUNK_ROWS = 8192
# Corpus rows scored against the queries at a time.
SEARCH_CHUNK_ROWS = 65536


# === The model ===


def read_settings_model(settings):
    """read_model of the flags, with their --long_inputs (or those of a
    run that trained in output_dir). In a folder a run trained in, what its
    EMBEDDING_CONFIG_FILE says replaces the model folder's word: pooling,
    casing, normalization and max_seq_length (the last two may be given
    otherwise for this run).

    Raises:
      ValueError: --init_checkpoint (its activation), --pooling or
        --do_lower_case other than those output_dir's checkpoints were
        trained with; naming both values and the file.
    """
    s = settings
    path = description_path(s.output_dir)
    saved = trained_description(s.output_dir) or {}
    for flag in _TRAINED_WITH:
        value = getattr(s, flag)
        if value is not None and saved.get(flag, value) != value:
            raise ValueError(
                f"--{flag}={value}, but {path} says this output_dir's "
                f"checkpoints were trained with {flag} {saved[flag]}: leave "
                f"--{flag} out, or give another --output_dir to start over"
            )

    def flag_or_saved(flag):
        value = getattr(s, flag)
        return saved.get(flag) if value is None else value

    source = sentence_models.read_model(
        s.init_checkpoint,
        bert_config_file=s.bert_config_file,
        vocab_file=s.vocab_file,
        do_lower_case=flag_or_saved("do_lower_case"),
        pooling=flag_or_saved("pooling"),
        normalize=flag_or_saved("normalize"),
        max_seq_length=flag_or_saved("max_seq_length"),
    )
    if saved:
        _check_trained_from(s.init_checkpoint, source, saved, path)
    long_inputs = long_inputs_lib.LongInputs.of(
        s,
        s.output_dir if _trained(s.output_dir) else None,
        source.max_seq_length,
    )
    return dataclasses.replace(source, long_inputs=long_inputs)


def _trained(output_dir):
    """Whether a run trained in output_dir (it holds checkpoints): only
    then do its EMBEDDING_CONFIG_FILE and long_inputs.json bind a run."""
    from modeling.training import checkpoint_manager  # TensorFlow.

    return bool(checkpoint_manager.find_checkpoints(output_dir))


def description_path(output_dir):
    return output_dir and os.path.join(output_dir, EMBEDDING_CONFIG_FILE)


def trained_description(output_dir):
    """What EMBEDDING_CONFIG_FILE says in a folder a run trained in (it has
    a checkpoint), else None (nothing trained there, or trained before the
    file was kept)."""
    path = description_path(output_dir)
    if not (path and file_io.exists(path) and _trained(output_dir)):
        return None
    saved = sentence_models.read_json(path)
    if not isinstance(saved, dict):
        raise ValueError(f"{path}: not a JSON object")
    return saved


def description(source, init_checkpoint):
    """What EMBEDDING_CONFIG_FILE records: source.describe() and where the
    weights were read from (`_model_location`)."""
    return {
        **source.describe(),
        "init_checkpoint": _model_location(source, init_checkpoint),
    }


def write_description(settings, source):
    """Writes EMBEDDING_CONFIG_FILE in output_dir (atomically)."""
    file_io.write_text(
        description_path(settings.output_dir),
        json.dumps(description(source, settings.init_checkpoint), indent=2)
        + "\n",
    )


def _model_location(source, init_checkpoint):
    """The folder given, or an original checkpoint's prefix (its folder and
    the prefix name the same model); absolute when local."""
    location = source.weights if source.kind == "original" else init_checkpoint
    location = os.fspath(location)
    if file_io.is_remote(location):
        return location
    return os.path.abspath(location)


def _check_trained_from(init_checkpoint, source, saved, path):
    """Raises ValueError when --init_checkpoint is not the model the
    checkpoints of output_dir were trained from (`saved`, read from `path`):
    another location, or another kind of model or activation (the same
    weights under another GELU give other vectors)."""
    given = description(source, init_checkpoint)
    location = saved.get("init_checkpoint")
    same_place = location is None or (
        os.path.realpath(location) == os.path.realpath(given["init_checkpoint"])
        if not file_io.is_remote(location)
        else location == given["init_checkpoint"]
    )
    same_model = all(
        saved.get(key, given[key]) == given[key]
        for key in ("source", "hidden_act")
    )
    if same_place and same_model:
        return

    def said(values):
        return (
            f"{values.get('source', '?')} model, hidden_act "
            f"{values.get('hidden_act', '?')}"
        )

    trained = f"{location} ({said(saved)})" if location else f"a {said(saved)}"
    raise ValueError(
        f"--init_checkpoint={init_checkpoint} ({said(given)}), but {path} "
        f"says this output_dir's checkpoints were trained from {trained}: "
        "give that --init_checkpoint, or another --output_dir to start over"
    )


@dataclasses.dataclass
class Embedder:
    """A model ready to embed texts: the source, the tokenizer and the
    predictor (the --predict_runtime backend, length-sorted batches)."""

    source: sentence_models.ModelSource
    model: object
    tokenizer: object
    predictor: object

    @property
    def dim(self):
        return self.source.config.hidden_size

    def embed(self, texts, what="Embedding"):
        """float32 [N, H] of a list of texts, in order (long texts as
        --long_inputs says)."""
        if not texts:
            return np.zeros((0, self.dim), np.float32)
        outputs, truncated = self.predictor.texts(
            self.tokenizer,
            self.source.max_seq_length,
            texts,
            long_inputs=self.source.long_inputs,
            combine=("embeddings",),
            normalize=self.source.normalize,
            what=what,
            unit="texts",
        )
        classifier_data.log_truncated(
            truncated, len(texts), self.source.max_seq_length, "texts"
        )
        return outputs["embeddings"]

    def embed_to_file(self, rows, total, path, what="Embedding"):
        """Embeds (id, text) rows, CHUNK_ROWS at a time, into the .npy file
        `path` ([total, H], written aside and published when complete);
        returns the rows' ids in order."""
        ids = []
        counter = progress.Progress(what, total=total, unit="texts")
        with file_io.atomic_path(path) as tmp:
            out = np.lib.format.open_memmap(
                tmp, mode="w+", dtype=np.float32, shape=(total, self.dim)
            )
            start = 0
            for chunk in file_io.chunks(rows, CHUNK_ROWS):
                chunk_ids, texts = zip(*chunk, strict=True)
                vectors = self.embed(list(texts), what=what)
                out[start : start + len(texts)] = vectors
                start += len(texts)
                ids.extend(chunk_ids)
                counter.add(len(texts))
            out.flush()
            del out
        counter.finish()
        return ids


def make_embedder(settings, strategy=None, source=None, model=None):
    """The Embedder of --init_checkpoint (`source`, read_model's, if read
    already), with `model` (default: its weights, or those of the newest
    checkpoint in output_dir: a run trained there)."""

    s = settings
    if source is None:
        source = read_settings_model(s)
        logging.info("Embedding model: %s", source.describe())
    if model is None:
        model = sentence_models.build_model(source)
        trained = _trained_checkpoint(s.output_dir)
        if trained:
            logging.info("Using the checkpoint trained in %s", trained)
            checkpoints.load_weights(model, trained)
    tokenizer = tokenization.FullTokenizer(
        source.vocab_file, source.do_lower_case
    )
    backend = predictor_lib.make_backend(s.run_config.runtime, model, strategy)
    predictor = predictor_lib.Predictor(backend, s.predict_batch_size)
    return Embedder(source, model, tokenizer, predictor)


def _trained_checkpoint(output_dir):
    """The newest checkpoint of an earlier --do_train in output_dir."""

    if not output_dir:
        return None
    try:
        return checkpoints.resolve_checkpoint(output_dir)
    except FileNotFoundError:
        return None


# === Training ===

# The training file's kinds, by their columns.
_PAIRS = ("anchor", "positive")
_SCORED = ("sentence1", "sentence2", "score")


def read_train_file(path, tokenizer, max_seq_length, long_inputs=None):
    """The training pairs as feature arrays, each side's under its prefix
    (models.BertEmbedder.SIDES): anchor / positive (/ negative) texts for
    in-batch negatives, or sentence1 / sentence2 / score for CoSENT.

    Returns:
      (arrays, loss name "multiple_negatives" or "cosent", row count).

    Raises:
      ValueError: naming the file (and line): neither set of columns, an
        empty text, a score that is not a number.
    """
    table = table_files.TableFile(path)
    columns = set(table.columns)
    if set(_PAIRS) <= columns:
        loss = "multiple_negatives"
        sides = list(_PAIRS) + (["negative"] if "negative" in columns else [])
    elif set(_SCORED) <= columns:
        loss, sides = "cosent", list(_SCORED[:2])
    else:
        raise ValueError(
            f"{path}: needs the columns anchor, positive (and optionally "
            f"negative), or sentence1, sentence2, score; it has "
            f"{', '.join(table.columns) or 'none'}"
        )
    texts = {side: [] for side in sides}
    scores = []
    for line, row in table.rows():
        where = table.where(line)
        for side in sides:
            value = row.get(side)
            if not isinstance(value, str) or tokenization.is_empty_text(value):
                raise ValueError(f"{where}: empty or missing {side!r}")
            texts[side].append(value)
        if loss == "cosent":
            scores.append(_score(row.get("score"), where))
    count = len(texts[sides[0]])
    if not count:
        raise ValueError(f"{path}: no training pairs")
    if long_inputs is not None and long_inputs.windowed:
        # A pair is one row per side: windows would not line up.
        logging.info(
            "--long_inputs=chunks embeds; training pairs are truncated "
            "(--long_inputs=head_tail keeps their ends)"
        )
        long_inputs = None
    arrays = {}
    for side in sides:
        side_arrays, truncated = classifier_data.text_arrays(
            texts[side], max_seq_length, tokenizer, long_inputs=long_inputs
        )
        classifier_data.log_truncated(
            truncated, count, max_seq_length, f"{side} texts"
        )
        arrays.update({f"{side}_{k}": v for k, v in side_arrays.items()})
    if loss == "cosent":
        arrays["score"] = np.array(scores, np.float32)
    return arrays, loss, count


def _score(value, where):
    try:
        score = float(value)
    except (TypeError, ValueError):
        raise ValueError(f"{where}: score {value!r} is not a number") from None
    if not np.isfinite(score):
        raise ValueError(f"{where}: score {value!r}")
    return score


def loss_fn(loss):
    """The Trainer's loss function of a training file's kind."""

    def multiple_negatives(features, outputs):
        del features
        candidates = [outputs["positive"]]
        if "negative" in outputs:
            candidates.append(outputs["negative"])
        return {
            "loss": losses.multiple_negatives_ranking_loss(
                outputs["anchor"], keras.ops.concatenate(candidates, axis=0)
            )
        }

    def cosent(features, outputs):
        return {
            "loss": losses.cosent_loss(
                outputs["sentence1"], outputs["sentence2"], features["score"]
            )
        }

    return {"multiple_negatives": multiple_negatives, "cosent": cosent}[loss]


def train(settings, strategy, source, tokenizer):
    """--do_train: fine-tunes the encoder on --train_file (the shared
    Trainer: the original's optimizer arithmetic, checkpoints in the
    original layout in output_dir, resume, SIGTERM, progress); returns the
    trained models.BertEmbedder."""
    from modeling.data import input_pipeline
    from modeling.tasks import fine_tuning

    s = settings
    arrays, loss, count = read_train_file(
        s.train_file, tokenizer, source.max_seq_length, source.long_inputs
    )
    num_train_steps, num_warmup_steps = common.fine_tuning_steps(
        s, count, "training pairs"
    )
    # Before the first checkpoint: a resumed or later run reads them.
    source.long_inputs.save(s.output_dir)
    write_description(s, source)
    logging.info(
        "***** Training: %d pairs, %s loss, batch size %d, %d steps *****",
        count,
        loss,
        s.train_batch_size,
        num_train_steps,
    )
    trainer = common.make_trainer(
        s,
        strategy,
        lambda: models.BertEmbedder(
            source.config, pooling=source.pooling, normalize=source.normalize
        ),
        loss_fn(loss),
        lambda model: checkpoints.load_weights(model, source.weights),
        num_train_steps,
        num_warmup_steps,
    )
    map_batch = None
    if not common.uses_tpu(s):
        map_batch = functools.partial(
            trim_sides,
            multiple=input_pipeline.padding_multiple(
                source.max_seq_length, s.run_config.use_xla
            ),
        )
    fine_tuning.train_on_arrays(trainer, arrays, s, None, None, map_batch)
    return trainer.model


def trim_sides(features, multiple):
    """A training batch with each side's features (models.BertEmbedder.
    SIDES) cut to that side's longest row (input_pipeline.trim_padding):
    short sentences cost their own length, not max_seq_length."""
    from modeling.data import input_pipeline

    out = dict(features)
    for side in models.BertEmbedder.SIDES:
        names = [n for n in features if n.startswith(side + "_")]
        if not names:
            continue
        cut = input_pipeline.trim_padding(
            {n[len(side) + 1 :]: features[n] for n in names}, multiple
        )
        out.update({f"{side}_{k}": v for k, v in cut.items()})
    return out


# === The modes ===


def predict(settings, embedder):
    """--do_predict: embeddings.npy and ids.txt in output_dir."""
    s = settings
    texts = table_files.TextFile(s.predict_file, s.text_column, s.id_column)
    path = os.path.join(s.output_dir, EMBEDDINGS_FILE)
    ids = embedder.embed_to_file(texts.rows(), texts.count(), path)
    file_io.write_text(
        os.path.join(s.output_dir, IDS_FILE), "".join(i + "\n" for i in ids)
    )
    logging.info("Wrote %d embeddings: %s", len(ids), path)
    return path


def load_embeddings(path, dim):
    """A saved embeddings.npy, memory-mapped.

    Raises:
      ValueError: not a float32 [N, dim] array (another model's vectors).
    """
    try:
        array = np.load(path, mmap_mode="r", allow_pickle=False)
    except (OSError, ValueError) as e:
        raise ValueError(f"{path}: not a readable .npy file ({e})") from e
    if array.ndim != 2 or array.shape[1] != dim:
        raise ValueError(
            f"{path}: embeddings of shape {list(array.shape)}, but this "
            f"model's vectors have {dim} dimensions"
        )
    return array


def top_k(queries, corpus, k, chunk_rows=SEARCH_CHUNK_ROWS):
    """The k best corpus rows of each query by dot product (cosine of
    normalized vectors), scoring `chunk_rows` corpus rows at a time.

    Args:
      queries: float32 [Q, H]; corpus: float32 [N, H] (a memory map is
        read a chunk at a time).

    Returns:
      (indexes int64 [Q, k'], scores float32 [Q, k']), best first, k' =
      min(k, N); ties by the lower index.
    """
    queries = np.asarray(queries, np.float32)
    n = len(corpus)
    k = min(k, n)
    best_scores = np.full((len(queries), 0), -np.inf, np.float32)
    best_index = np.zeros((len(queries), 0), np.int64)
    for start in range(0, n, chunk_rows):
        block = np.asarray(corpus[start : start + chunk_rows], np.float32)
        scores = queries @ block.T
        scores = np.concatenate([best_scores, scores], axis=1)
        index = np.concatenate(
            [
                best_index,
                np.broadcast_to(
                    np.arange(start, start + len(block)),
                    (len(queries), len(block)),
                ),
            ],
            axis=1,
        )
        # Highest score first, then the lower index: a stable order.
        order = np.lexsort((index, -scores), axis=1)[:, :k]
        best_scores = np.take_along_axis(scores, order, axis=1)
        best_index = np.take_along_axis(index, order, axis=1)
    return best_index, best_scores


def saved_corpus(path, dim):
    """(embeddings, ids) of --corpus_embeddings: the memory-mapped .npy and
    the ids.txt beside it (else the row numbers from 0).

    Raises:
      ValueError: not this model's vectors; another number of ids.
    """
    corpus = load_embeddings(path, dim)
    ids_path = os.path.join(os.path.dirname(path) or ".", IDS_FILE)
    corpus_ids = (
        file_io.read_text(ids_path).splitlines()
        if os.path.exists(ids_path)
        else [str(i) for i in range(len(corpus))]
    )
    if len(corpus_ids) != len(corpus):
        raise ValueError(
            f"{ids_path}: {len(corpus_ids)} ids for {len(corpus)} "
            f"embeddings in {path}"
        )
    return corpus, corpus_ids


def search(settings, embedder):
    """--do_search: search_results.jsonl in output_dir."""
    s = settings
    if s.corpus_embeddings:
        corpus, corpus_ids = saved_corpus(s.corpus_embeddings, embedder.dim)
    else:
        texts = table_files.TextFile(s.corpus_file, s.text_column, s.id_column)
        path = os.path.join(s.output_dir, CORPUS_EMBEDDINGS_FILE)
        corpus_ids = embedder.embed_to_file(
            texts.rows(), texts.count(), path, what="Embedding the corpus"
        )
        file_io.write_text(
            os.path.join(s.output_dir, CORPUS_IDS_FILE),
            "".join(i + "\n" for i in corpus_ids),
        )
        corpus = load_embeddings(path, embedder.dim)
    queries = table_files.TextFile(s.query_file, s.text_column, s.id_column)
    out = os.path.join(s.output_dir, SEARCH_RESULTS_FILE)
    count = 0
    with file_io.atomic_write(out) as f:
        for chunk in file_io.chunks(queries.rows(), CHUNK_ROWS):
            query_ids, texts = zip(*chunk, strict=True)
            vectors = embedder.embed(list(texts), what="Embedding queries")
            index, scores = top_k(vectors, corpus, s.top_k)
            for query_id, rows, values in zip(
                query_ids, index, scores, strict=True
            ):
                f.write(
                    predictions.line(
                        {
                            "id": query_id,
                            "results": [
                                {
                                    "id": corpus_ids[i],
                                    "score": predictions.number(v),
                                }
                                for i, v in zip(rows, values, strict=True)
                            ],
                        }
                    )
                )
            count += len(chunk)
    logging.info("Searched %d queries: %s", count, out)
    return out


def cosine(a, b):
    """Row-wise cosine similarity of two float arrays [N, H]."""
    a = np.asarray(a, np.float64)
    b = np.asarray(b, np.float64)
    norms = np.linalg.norm(a, axis=1) * np.linalg.norm(b, axis=1)
    return np.sum(a * b, axis=1) / np.maximum(norms, 1e-12)


def retrieval_scores(query_vectors, positive_vectors, positive_of):
    """MRR@10, recall@1 and recall@10 of queries against a corpus.

    Args:
      query_vectors: [Q, H]; positive_vectors: the corpus [N, H];
      positive_of: int [Q], each query's corpus row.
    """
    index, _ = top_k(_unit(query_vectors), _unit(positive_vectors), 10)
    hits = index == np.asarray(positive_of)[:, None]
    first = np.where(hits.any(axis=1), hits.argmax(axis=1), -1)
    reciprocal = np.where(first >= 0, 1.0 / np.maximum(first + 1, 1), 0.0)
    return {
        "eval_mrr_at_10": float(np.mean(reciprocal)),
        "eval_recall_at_1": float(np.mean(first == 0)),
        "eval_recall_at_10": float(np.mean(first >= 0)),
    }


def _unit(vectors):
    vectors = np.asarray(vectors, np.float32)
    norms = np.linalg.norm(vectors, axis=1, keepdims=True)
    return vectors / np.maximum(norms, 1e-12)


# The eval file's kinds, by their columns (and _SCORED).
_RETRIEVAL = ("query", "positive")


def read_eval_file(path):
    """(kind "scored" or "retrieval", {column: values}, row count) of
    --eval_file (see the module doc).

    Raises:
      ValueError: naming the file (and line): neither set of columns, an
        empty text, a score that is not a number, no row.
    """
    table = table_files.TableFile(path)
    columns = set(table.columns)
    if set(_SCORED) <= columns:
        kind, names = "scored", _SCORED
    elif set(_RETRIEVAL) <= columns:
        kind, names = "retrieval", _RETRIEVAL
    else:
        raise ValueError(
            f"{path}: needs the columns {', '.join(_SCORED)} "
            f"(scored pairs) or {', '.join(_RETRIEVAL)} (queries and their "
            f"positives); it has {', '.join(table.columns) or 'none'}"
        )
    values = {name: [] for name in names}
    for line, row in table.rows():
        where = table.where(line)
        for name in names:
            value = row.get(name)
            if name == "score":
                value = _score(value, where)
            elif not isinstance(value, str) or tokenization.is_empty_text(
                value
            ):
                raise ValueError(f"{where}: empty or missing {name!r}")
            values[name].append(value)
    count = len(values[names[0]])
    if not count:
        raise ValueError(f"{path}: no rows to evaluate")
    return kind, values, count


def evaluate(settings, embedder):
    """--do_eval: eval_results.txt in output_dir (see the module doc)."""
    kind, values, count = read_eval_file(settings.eval_file)
    if kind == "scored":
        a = embedder.embed(values["sentence1"])
        b = embedder.embed(values["sentence2"])
        similarity = cosine(a, b)
        results = {
            # NaN when undefined (every similarity or score the same), as
            # scipy and the classifier's STS-B metrics.
            "eval_spearman_cosine": metrics.spearman(
                similarity, values["score"]
            ),
            "eval_pearson_cosine": metrics.pearson(similarity, values["score"]),
        }
    else:
        corpus = list(dict.fromkeys(values["positive"]))
        row_of = {text: i for i, text in enumerate(corpus)}
        results = retrieval_scores(
            embedder.embed(values["query"]),
            embedder.embed(corpus),
            [row_of[p] for p in values["positive"]],
        )
        results["eval_corpus_size"] = len(corpus)
    results["eval_examples"] = count
    return results


def export(settings, embedder):
    """--export_dir: the serving SavedModel (raw strings -> vectors), with
    model.tflite under a TF Lite --predict_runtime."""
    from modeling.export import serving

    s = settings
    source = embedder.source
    extra = None
    if s.run_config.runtime != "tensorflow":
        from modeling.export import tflite

        backend = embedder.predictor.backend
        extra = tflite.export_files(
            backend.content, backend.output_names, backend.quantized
        )
    serving.export_embedder(
        embedder.model,
        serving.make_preprocessor(
            source.vocab_file, source.do_lower_case, source.max_seq_length
        ),
        s.export_dir,
        source.describe(),
        extra,
    )
    logging.info("Exported the serving SavedModel to %s", s.export_dir)


def run(settings):
    """run_embeddings' main().

    Returns:
      The eval results (dict) with --do_eval, else None.
    """
    s = settings
    strategy = common.set_up(s)
    source = read_settings_model(s)
    logging.info("Embedding model: %s", source.describe())
    # Everything that can be checked is, before anything is written to
    # output_dir (a failed run leaves it as it was, and no new folder).
    check_inputs(s, source.config.hidden_size)
    model = None
    if s.do_train:
        tokenizer = tokenization.FullTokenizer(
            source.vocab_file, source.do_lower_case
        )
        model = train(s, strategy, source, tokenizer)
    embedder = make_embedder(s, strategy, source, model)
    results = None
    if s.do_predict:
        predict(s, embedder)
    if s.do_search:
        search(s, embedder)
    if s.do_eval:
        results = evaluate(s, embedder)
        from modeling.tasks import fine_tuning

        fine_tuning.write_eval_results(
            os.path.join(s.output_dir, common.EVAL_RESULTS_FILE), results
        )
    if (
        (s.do_predict or s.do_search or s.do_eval)
        and not s.do_train
        and trained_description(s.output_dir) is None
    ):
        # What the outputs were made with, once they are there (a trained
        # folder keeps the description of its training: train wrote it).
        write_description(s, source)
    if s.export_dir:
        export(s, embedder)
    return results


def check_inputs(settings, dim):
    """Reads the input files of the modes before training or writing: a
    missing column, an empty text, a file without texts or another model's
    --corpus_embeddings fails at once, with nothing written (the training
    file is read first thing in `train`)."""
    s = settings
    for needed, path in (
        (s.do_predict, s.predict_file),
        (s.do_search and not s.corpus_embeddings, s.corpus_file),
    ):
        if needed:
            table_files.TextFile(path, s.text_column, s.id_column).count()
    if s.do_search:
        if s.corpus_embeddings:
            saved_corpus(s.corpus_embeddings, dim)
        queries = table_files.TextFile(s.query_file, s.text_column, s.id_column)
        for _ in queries.rows():
            pass
    if s.do_eval:
        read_eval_file(s.eval_file)
