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
- --do_train: fine-tunes on pairs (embedding_training.py): anchor / positive (/ negative)
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
  vectors; embedding_search.py): search_results.jsonl.
- --do_eval: scored pairs (sentence1, sentence2, score) give the Spearman
  and Pearson correlations of the cosine similarities with the scores
  (STS-B's dev file as it is); query / positive pairs give MRR@10 and
  recall@1 / @10 with every distinct positive as the corpus.
- --export_dir: a serving SavedModel from raw strings to vectors (each batch
  padded to its longest row), with model.tflite when --predict_runtime is
  a TF Lite one.
"""

import os

from absl import logging

from modeling import errors
from modeling import sentence_models
from modeling.data import file_io
from modeling.data import table_files
from modeling.tasks import common
from modeling.tasks import embedding_model
from modeling.tasks import embedding_search
from modeling.tasks import embedding_training
from modeling.tasks.settings import embeddings as embeddings_settings
from modeling.text import tokenization

# The script's flags (modeling/tasks/settings/embeddings.py).
Settings = embeddings_settings.Settings

# Its outputs' file names (embedding_model.py).
EMBEDDINGS_FILE = embedding_model.EMBEDDINGS_FILE
IDS_FILE = embedding_model.IDS_FILE
CORPUS_EMBEDDINGS_FILE = embedding_model.CORPUS_EMBEDDINGS_FILE
CORPUS_IDS_FILE = embedding_model.CORPUS_IDS_FILE
SEARCH_RESULTS_FILE = embedding_model.SEARCH_RESULTS_FILE
EMBEDDING_CONFIG_FILE = embedding_model.EMBEDDING_CONFIG_FILE


def predict(settings, embedder):
    """--do_predict: embeddings.npy and ids.txt in output_dir."""
    s = settings
    texts = table_files.TextFile(s.predict_file, s.text_column, s.id_column)
    path = os.path.join(s.output_dir, EMBEDDINGS_FILE)
    ids = embedder.embed_to_file(
        texts.rows(),
        texts.count(),
        path,
        os.path.join(s.output_dir, IDS_FILE),
        also=embedding_model.vectors_description(s, embedder.source),
    )
    logging.info("Wrote %d embeddings: %s", len(ids), path)
    return path


def export(settings, embedder):
    """--export_dir: the serving SavedModel (raw strings -> vectors), with
    model.tflite under a TF Lite --predict_runtime."""
    from modeling.export import embedder as embedder_export
    from modeling.text import in_graph

    s = settings
    source = embedder.source
    extra = None
    if s.run_config.runtime != "tensorflow":
        from modeling.export import tflite

        backend = embedder.predictor.backend
        extra = tflite.export_files(
            backend.content, backend.output_names, backend.quantized
        )
    embedder_export.export_embedder(
        embedder.model,
        in_graph.TextPreprocessor(
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
    source = embedding_model.read_settings_model(s)
    logging.info("Embedding model: %s", source.describe())
    # Everything that can be checked is, before anything is written to
    # output_dir (a failed run leaves it as it was, and no new folder).
    check_inputs(s, source)
    model = None
    if s.do_train:
        tokenizer = tokenization.FullTokenizer(
            source.vocab_file, source.do_lower_case
        )
        model = embedding_training.train(s, strategy, source, tokenizer)
    embedder = embedding_model.make_embedder(s, strategy, source, model)
    results = None
    # Several TensorFlow workers each embed (their predictions gather over
    # all of them); they write the same files, each published whole, and
    # only the chief writes results and the export (two publishing one
    # folder at once could fail).
    from modeling.training import distribute

    chief = distribute.is_chief(strategy)
    if s.do_predict:
        predict(s, embedder)
    if s.do_search:
        embedding_search.search(s, embedder)
    if s.do_eval:
        results = embedding_search.evaluate(s, embedder)
        from modeling.tasks import fine_tuning

        if chief:
            fine_tuning.write_eval_results(
                os.path.join(s.output_dir, common.EVAL_RESULTS_FILE), results
            )
    if s.export_dir and chief:
        export(s, embedder)
    return results


# What makes two runs' vectors comparable (EMBEDDING_CONFIG_FILE's keys).
_SAME_VECTORS = (
    "init_checkpoint",
    "source",
    "pooling",
    "normalize",
    "hidden_act",
    "do_lower_case",
)


def _warn_of_another_model(settings, source):
    """Warns when the description beside --corpus_embeddings (the run that
    wrote it) names another model than this run's: a search would score
    one model's query vectors against another's corpus vectors. A warning,
    not an error: a folder's description is its training's, whose weights
    are no longer the init checkpoint it names."""
    folder = os.path.dirname(settings.corpus_embeddings) or "."
    path = embedding_model.description_path(folder)
    if not file_io.exists(path):
        return
    try:
        saved = sentence_models.read_json(path)
    except ValueError as e:
        logging.warning("%s: unreadable, not compared (%s)", path, e)
        return
    given = embedding_model.description(source, settings.init_checkpoint)

    def same(key):
        a, b = saved[key], given[key]
        if key == "init_checkpoint" and not file_io.is_remote(str(a)):
            return os.path.realpath(str(a)) == os.path.realpath(str(b))
        return a == b

    differ = [
        f"{key} {saved[key]!r} there, {given[key]!r} here"
        for key in _SAME_VECTORS
        if isinstance(saved, dict) and key in saved and not same(key)
    ]
    if differ:
        logging.warning(
            "--corpus_embeddings=%s was made by another model than this "
            "run's (%s: %s); its vectors and this run's queries may not be "
            "comparable.",
            settings.corpus_embeddings,
            path,
            "; ".join(differ),
        )


def check_inputs(settings, source):
    """Reads the input files of the modes before training or writing: a
    missing column, an empty text, a file without texts or another model's
    --corpus_embeddings fails at once, with nothing written (the training
    file is read first thing in `train`)."""
    s = settings
    dim = source.config.hidden_size
    for needed, path in (
        (s.do_predict, s.predict_file),
        (s.do_search and not s.corpus_embeddings, s.corpus_file),
    ):
        if needed:
            # Read again to embed: that pass warns.
            table_files.TextFile(
                path, s.text_column, s.id_column, warn=False
            ).count()
    if s.do_search:
        if s.corpus_embeddings:
            written = os.path.join(
                s.output_dir, embedding_model.EMBEDDINGS_FILE
            )
            if s.do_predict and os.path.realpath(
                s.corpus_embeddings
            ) == os.path.realpath(written):
                raise errors.UserError(
                    f"--corpus_embeddings={s.corpus_embeddings} is the file "
                    "this run's --do_predict writes (before the search "
                    "reads it): search a copy, or predict into another "
                    "--output_dir"
                )
            embedding_search.saved_corpus(s.corpus_embeddings, dim, warn=False)
            _warn_of_another_model(s, source)
        queries = table_files.TextFile(
            s.query_file, s.text_column, s.id_column, warn=False
        )
        for _ in queries.rows():
            pass
    if s.do_eval:
        embedding_search.read_eval_file(s.eval_file)
