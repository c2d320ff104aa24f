"""run_embeddings' model: read from the settings (a sentence-transformers
folder, an HF BERT folder or an original checkpoint; a folder a run trained
in), described in embedding_config.json, and run by `Embedder` through the
one predictor. The file names of run_embeddings' outputs."""

import dataclasses
import json
import os

import numpy as np
from absl import logging

from modeling import checkpoints
from modeling import errors
from modeling import progress
from modeling import sentence_models
from modeling.data import file_io
from modeling.data import long_inputs as long_inputs_lib
from modeling.text import tokenization
from modeling.training import predictor as predictor_lib

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
# The columns of scored pairs (--train_file's CoSENT pairs, --eval_file's
# STS pairs).
SCORED_COLUMNS = ("sentence1", "sentence2", "score")
# Texts featurized and embedded at a time (their features in memory).
CHUNK_ROWS = 8192
# Corpus rows scored against the queries at a time.
SEARCH_CHUNK_ROWS = 65536


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
    if _trained(s.output_dir) and not file_io.exists(path):
        # Another script's training (run_classifier's model.ckpt-N): its
        # weights would replace --init_checkpoint's.
        raise errors.UserError(
            f"--output_dir={s.output_dir} holds training checkpoints but no "
            f"{EMBEDDING_CONFIG_FILE}: not a run_embeddings training; give "
            "another --output_dir"
        )
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
    a checkpoint), else None (nothing trained there; checkpoints without
    the file are another script's, which read_settings_model refuses)."""
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
    file_io.write_texts(description_file(settings, source))


def description_file(settings, source):
    """{EMBEDDING_CONFIG_FILE's path: its text} of this run's model."""
    text = json.dumps(description(source, settings.init_checkpoint), indent=2)
    return {description_path(settings.output_dir): text + "\n"}


def vectors_description(settings, source):
    """What to publish with vectors written in output_dir: the description
    of the model that made them, unless a training there wrote it (the
    same model: read_settings_model checked it)."""
    if trained_description(settings.output_dir) is not None:
        return {}
    return description_file(settings, source)


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
        return self.predictor.embed(
            self.tokenizer,
            self.source.max_seq_length,
            texts,
            self.dim,
            long_inputs=self.source.long_inputs,
            normalize=self.source.normalize,
            what=what,
        )

    def embed_to_file(
        self, rows, total, path, ids_file, also=None, what="Embedding"
    ):
        """Embeds (id, text) rows, CHUNK_ROWS at a time, into the .npy file
        `path` ([total, H]) and their ids into `ids_file`, one per line;
        returns the ids in order. Both, and the files `also` ({path:
        text}: the model's description), are written aside and published
        as one when complete: vectors never lie beside another run's ids.
        """
        ids = []
        also = dict(also or {})
        counter = progress.Progress(what, total=total, unit="texts")
        finals = [path, ids_file, *also]
        with file_io.atomic_paths(finals) as (tmp, ids_tmp, *also_tmps):
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
            texts = {ids_tmp: "".join(i + "\n" for i in ids)}
            texts.update(zip(also_tmps, also.values(), strict=True))
            for temp, text in texts.items():
                with file_io.open_for_writing(temp) as f:
                    f.write(text)
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
    from modeling.data import input_pipeline  # TensorFlow.

    predictor = predictor_lib.Predictor(
        backend,
        s.predict_batch_size,
        multiple=input_pipeline.predict_multiple(source.max_seq_length),
    )
    return Embedder(source, model, tokenizer, predictor)


def _trained_checkpoint(output_dir):
    """The newest checkpoint of an earlier --do_train in output_dir (not a
    bert_model.ckpt someone left there)."""

    from modeling.training import checkpoint_manager  # TensorFlow.

    found = checkpoint_manager.find_checkpoints(output_dir)
    return found[0] if found else None


def parse_score(value, where):
    """A pair's score: a finite float (`where`: the file and line)."""
    try:
        score = float(value)
    except (TypeError, ValueError):
        raise ValueError(f"{where}: score {value!r} is not a number") from None
    if not np.isfinite(score):
        raise ValueError(f"{where}: score {value!r}")
    return score
