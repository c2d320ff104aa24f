"""run_embeddings --do_search and --do_eval: a running top-k over a
corpus of vectors, and the scores of a model's vectors (STS correlations,
MRR and recall)."""

import os

import numpy as np
from absl import logging

from modeling.data import file_io
from modeling.data import table_files
from modeling.tasks import embedding_model
from modeling.tasks import metrics
from modeling.tasks import predictions
from modeling.tasks.embedding_model import CHUNK_ROWS
from modeling.tasks.embedding_model import CORPUS_EMBEDDINGS_FILE
from modeling.tasks.embedding_model import CORPUS_IDS_FILE
from modeling.tasks.embedding_model import EMBEDDINGS_FILE
from modeling.tasks.embedding_model import IDS_FILE
from modeling.tasks.embedding_model import SCORED_COLUMNS
from modeling.tasks.embedding_model import SEARCH_CHUNK_ROWS
from modeling.tasks.embedding_model import SEARCH_RESULTS_FILE
from modeling.tasks.embedding_model import parse_score
from modeling.text import tokenization


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


# Scores held at a time (queries x corpus rows, float32: 64 MiB): a large
# query batch is scored against a corpus chunk a slice of queries at a time.
SCORES_PER_BLOCK = 1 << 24


def top_k(queries, corpus, k, chunk_rows=SEARCH_CHUNK_ROWS):
    """The k best corpus rows of each query by cosine similarity, scoring
    `chunk_rows` corpus rows at a time (and at most SCORES_PER_BLOCK
    scores at once).

    Args:
      queries: float32 [Q, H]; corpus: float32 [N, H] (a memory map is
        read a chunk at a time).

    Returns:
      (indexes int64 [Q, k'], scores float32 [Q, k']), best first, k' =
      min(k, N); ties by the lower index.
    """
    queries = _unit(queries)
    k = min(k, len(corpus))
    best_index = np.zeros((len(queries), 0), np.int64)
    best_scores = np.zeros((len(queries), 0), np.float32)
    step = max(1, SCORES_PER_BLOCK // chunk_rows)
    for start in range(0, len(corpus), chunk_rows):
        block = _unit(corpus[start : start + chunk_rows])
        width = min(k, best_index.shape[1] + len(block))
        merged_index = np.empty((len(queries), width), np.int64)
        merged_scores = np.empty((len(queries), width), np.float32)
        for i in range(0, len(queries), step):
            rows = slice(i, i + step)
            index, scores = _block_top_k(queries[rows] @ block.T, k)
            index = np.concatenate([best_index[rows], index + start], 1)
            scores = np.concatenate([best_scores[rows], scores], 1)
            # Highest score first, then the lower index: a stable order.
            order = np.lexsort((index, -scores), axis=1)[:, :width]
            merged_index[rows] = np.take_along_axis(index, order, 1)
            merged_scores[rows] = np.take_along_axis(scores, order, 1)
        best_index, best_scores = merged_index, merged_scores
    return best_index, best_scores


def _block_top_k(scores, k):
    """(column indexes, scores) [Q, min(k, B)] of the best k of each row of
    `scores` [Q, B], best first, ties by the lower column: the rows'
    candidates are those at or above their k-th best (a partition, not a
    sort of every score)."""
    scores = np.nan_to_num(scores, nan=-np.inf)
    q, b = scores.shape
    k = min(k, b)
    if b > k:
        kth = -np.partition(-scores, k - 1, axis=1)[:, k - 1 : k]
        rows, cols = np.nonzero(scores >= kth)
    else:
        rows, cols = np.divmod(np.arange(q * b), b)
    values = scores[rows, cols]
    order = np.lexsort((cols, -values, rows))
    rows, cols, values = rows[order], cols[order], values[order]
    rank = np.arange(len(rows)) - np.searchsorted(rows, rows)
    keep = rank < k
    return cols[keep].reshape(q, k), values[keep].reshape(q, k)


def ids_path(path):
    """The ids file written beside an embeddings file: ids.txt beside
    embeddings.npy (--do_predict), corpus_ids.txt beside
    corpus_embeddings.npy (--do_search); ids.txt beside a file of another
    name (a renamed embeddings.npy)."""
    folder, name = os.path.split(os.fspath(path))
    suffix = EMBEDDINGS_FILE
    stem = name[: -len(suffix)] if name.endswith(suffix) else ""
    return os.path.join(folder or ".", stem + IDS_FILE)


def saved_corpus(path, dim, warn=True):
    """(embeddings, ids) of --corpus_embeddings: the memory-mapped .npy and
    the ids file written beside it (`ids_path`), else the row numbers from
    0 (with a warning, unless `warn` is False: the checks before a run
    read it once more).

    Raises:
      ValueError: not this model's vectors; another number of ids.
    """
    corpus = load_embeddings(path, dim)
    ids_file = ids_path(path)
    if os.path.exists(ids_file):
        corpus_ids = file_io.read_lines(ids_file)  # Split at "\n" only.
    else:
        if warn:
            logging.warning(
                "%s has no ids file beside it (%s): the results name corpus "
                "rows by their numbers from 0.",
                path,
                os.path.basename(ids_file),
            )
        ids_file = path
        corpus_ids = [str(i) for i in range(len(corpus))]
    if len(corpus_ids) != len(corpus):
        raise ValueError(
            f"{ids_file}: {len(corpus_ids)} ids for {len(corpus)} "
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
            texts.rows(),
            texts.count(),
            path,
            os.path.join(s.output_dir, CORPUS_IDS_FILE),
            also=embedding_model.vectors_description(s, embedder.source),
            what="Embedding the corpus",
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
    index, _ = top_k(query_vectors, positive_vectors, 10)
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


# The eval file's kinds, by their columns (and SCORED_COLUMNS).
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
    if set(SCORED_COLUMNS) <= columns:
        kind, names = "scored", SCORED_COLUMNS
    elif set(_RETRIEVAL) <= columns:
        kind, names = "retrieval", _RETRIEVAL
    else:
        raise ValueError(
            f"{path}: needs the columns {', '.join(SCORED_COLUMNS)} "
            f"(scored pairs) or {', '.join(_RETRIEVAL)} (queries and their "
            f"positives); it has {', '.join(table.columns) or 'none'}"
        )
    values = {name: [] for name in names}
    for line, row in table.rows():
        where = table.where(line)
        for name in names:
            value = row.get(name)
            if name == "score":
                value = parse_score(value, where)
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
