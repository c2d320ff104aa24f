"""Scale mode: worker processes over input shards, bounded memory.

Each input file is cut into shards of about `shard_bytes` (at a blank line
near the cut when there is one, else at a line end). A worker turns one
shard into records with the exact mode's algorithm applied to the shard
alone, with its own `random.Random` seeded from (random_seed, shard index):
document shuffle, `dupe_factor` passes, then a shuffle of all the shard's
instances. Per-token masking is then drawn for the whole shard at once with
numpy (the original's distribution; whole-word masking keeps the exact
mode's draws). The parent writes shards in shard order, round-robin across the
output files, as they complete; or, with `per_shard_output`, each shard to
its own file (records.ShardRecordFiles), the layout of the Beam runner,
which runs the same per-shard code (`make_records`) as a Beam pipeline.

So the output is deterministic for a seed and shard size, whatever the
number of workers, but it is NOT the original's: next-sentence negatives
come from the same shard, a document never continues across a file
boundary, and instances are shuffled within a shard (the bounded shuffle),
not globally. Memory per worker is one shard's documents and instances;
workers leave each shard's records in a temporary file, and the parent holds
one shard's records at a time while it writes them.
"""

import array
import dataclasses
import os
import random
import time

import numpy as np
from absl import logging

from modeling.data import file_io
from modeling.pretraining_data import exact
from modeling.pretraining_data import generation
from modeling.pretraining_data import records
from modeling.pretraining_data import shards as shards_lib
from modeling.pretraining_data import text

# Workers are replaced (forked afresh) after this many shards, so memory
# fragmentation cannot build up over a long run.
_SHARDS_PER_WORKER = 16


@dataclasses.dataclass
class _WorkerState:
    options: generation.GenerationOptions
    vocab_ids: generation.VocabIds
    encoder: records.RecordEncoder
    line_tokenizer: text.LineTokenizer
    decode_errors: str
    tmpdir: str | None = None  # Where workers leave their shards' records.


def shard_rng(random_seed, shard_index):
    """The generator of one shard: deterministic, independent per shard."""
    return random.Random(f"bert-pretraining-shard:{random_seed}:{shard_index}")


def make_records(shard, state):
    """Turns one shard into records: the per-shard work of the scale mode,
    which the Beam runner (pretraining_data/beam.py) also runs.

    Args:
      shard: shards.Shard.
      state: what `worker_state` returns.

    Returns:
      (records, stats): an iterator of the shard's serialized examples in
      output order, made as they are consumed (None when the shard holds
      no document); a text.ReadStats.

    Raises:
      ValueError: bad text (naming the file and line).
    """
    corpus = text.Corpus(state.vocab_ids.num_ids)
    tokens, lengths, stats = text.read_shard(
        shard, state.line_tokenizer, state.decode_errors, corpus.tokens.typecode
    )
    corpus.add(tokens, lengths)
    del tokens, lengths
    stats.empty_documents = corpus.finish()
    stats.documents = len(corpus.documents)
    if not corpus.documents:
        return None, stats
    rng = shard_rng(state.options.random_seed, shard.index)
    # Whole-word masking keeps the exact mode's masking; per-token masking
    # is drawn for the whole shard at once with numpy.
    whole_word = state.options.do_whole_word_mask
    store, order = generation.generate_instances(
        corpus,
        state.options,
        state.vocab_ids,
        rng,
        mask=whole_word,
        log_passes=False,
    )
    if not whole_word:
        mask_in_bulk(store, state.options, state.vocab_ids, rng.getrandbits(64))
    return state.encoder.encode_stored(corpus, store, order), stats


def process_shard(shard):
    """Turns one shard into records (runs in a ForkPool worker).

    Returns:
      (shard, path, lengths, stats): path is a file (in the run's temporary
      directory) holding the shard's serialized examples in output order,
      back to back, or None when there are none; lengths an array of their
      sizes; stats a ReadStats. A file, not the pool's pipe: see
      pretraining_data_exact.ConcurrentEncoder.
    """
    state = shards_lib.state()
    records, stats = make_records(shard, state)
    lengths = array.array("i")
    if records is None:
        return shard, None, lengths, stats
    # Written as they come: the worker never holds the shard's records.
    path = os.path.join(state.tmpdir, f"shard-{shard.index}")
    with open(path, "wb") as f:
        for record in records:
            f.write(record)
            lengths.append(len(record))
    return shard, path, lengths, stats


def mask_in_bulk(store, options, vocab_ids, seed, chunk=8192):
    """Masks every stored (unmasked) instance, numpy-vectorized.

    The original's distribution: num_to_predict positions drawn uniformly
    among the tokens other than [CLS] and [SEP], each becoming [MASK] with
    p=0.8, staying with p=0.1, a random vocabulary word with p=0.1. The
    draws come from numpy's PCG64 seeded with `seed`.

    Args:
      store: pretraining_data.InstanceStore without predictions.
      options: pretraining_data.GenerationOptions.
      vocab_ids: pretraining_data.VocabIds.
      seed: int, seeds the draws.
      chunk: instances drawn per numpy pass (bounds memory).
    """
    gen = np.random.default_rng(seed)
    words = np.asarray(vocab_ids.random_word_ids, np.int64)
    budget = np.array(generation.num_to_predict_table(options))
    meta = np.frombuffer(store.meta, np.int64).reshape(-1, 6).copy()
    positions, outputs = array.array("H"), array.array("i")
    for start in range(0, len(meta), chunk):
        rows = meta[start : start + chunk]
        len_a, count = rows[:, 1], rows[:, 1] + rows[:, 3]
        num = np.minimum(budget[count + 3], count)
        keys = gen.random((len(rows), int(count.max())))
        keys[np.arange(keys.shape[1]) >= count[:, None]] = 2.0
        slots = np.argsort(keys, axis=1)[:, : int(num.max())]
        picked = np.arange(slots.shape[1]) < num[:, None]
        # Slot j is A's token j+1, or past A, B's token at j+2.
        pos = np.where(slots < len_a[:, None], slots + 1, slots + 2)
        coin, side = gen.random(pos.shape), gen.random(pos.shape)
        random_words = words[gen.integers(0, len(words), pos.shape)]
        out = np.where(
            coin < 0.8,
            vocab_ids.mask_id,
            np.where(side < 0.5, generation.KEEP, random_words),
        )
        positions.frombytes(pos[picked].astype(np.uint16).tobytes())
        outputs.frombytes(out[picked].astype(np.int32).tobytes())
        rows[:, 5] = num
    meta[:, 5] = np.cumsum(meta[:, 5])
    store.meta = array.array("q", meta.tobytes())
    store.positions, store.outputs = positions, outputs


class _Progress:
    """Logs counts, rate and ETA at most every `interval` seconds."""

    def __init__(self, total_bytes, interval=5.0):
        self.total_bytes = max(total_bytes, 1)
        self.interval = interval
        self.start = self.last = time.monotonic()
        self.done_bytes = 0
        self.shards = 0

    def update(self, shard, instances):
        self.done_bytes += shard.end - shard.start
        self.shards += 1
        if time.monotonic() - self.last >= self.interval:
            self.log(instances)

    def log(self, instances):
        self.last = now = time.monotonic()
        elapsed = now - self.start
        rate = self.done_bytes / max(elapsed, 1e-9)
        eta = (self.total_bytes - self.done_bytes) / max(rate, 1e-9)
        logging.info(
            "%d shards, %.1f/%.1f MB (%.0f%%), %d instances, %.1f s, "
            "%.2f MB/s, ETA %.0f s",
            self.shards,
            self.done_bytes / 1e6,
            self.total_bytes / 1e6,
            100.0 * self.done_bytes / self.total_bytes,
            instances,
            elapsed,
            rate / 1e6,
            eta,
        )


def check_shard_args(shard_bytes, decode_errors):
    """Raises ValueError for a bad shard size or decode policy (the scale
    mode's and the Beam runner's)."""
    if shard_bytes < 1:
        raise ValueError(
            f"shard size {shard_bytes} bytes: must be > 0 (--shard_size_mb)"
        )
    if decode_errors not in text.DECODE_ERRORS:
        raise ValueError(f"decode_errors={decode_errors!r}: unknown policy")


def worker_state(tokenizer, options, decode_errors):
    """What `make_records` needs, made once per process."""
    vocab_ids = generation.VocabIds(tokenizer.vocab)
    encoder = records.RecordEncoder(
        options.max_seq_length, options.max_predictions_per_seq, vocab_ids
    )
    line_tokenizer = text.LineTokenizer(tokenizer)
    return _WorkerState(
        options, vocab_ids, encoder, line_tokenizer, decode_errors
    )


def _read_back(path, lengths):
    """The records a worker left in `path` (removed once read)."""
    if path is None:
        return []
    with open(path, "rb") as f:
        data = f.read()
    os.remove(path)
    return exact.split_records(data, lengths)


def _logged(made, num_written, inv_vocab, num_logged=20):
    """Yields `made`, logging those among the first `num_logged` written."""
    for record in made:
        if num_written < num_logged:
            records.log_instance(record, inv_vocab)
        num_written += 1
        yield record


def check_per_shard_output(output_files):
    """Raises ValueError unless there is one output prefix."""
    if len(output_files) != 1:
        raise ValueError(
            f"--output_file={','.join(output_files)}: one file per input "
            "shard is written, named <output_file>-SSSSS-of-NNNNN; give one "
            "--output_file"
        )


def create_scaled(
    input_files,
    output_files,
    tokenizer,
    options,
    num_workers,
    shard_bytes=1_000_000,
    decode_errors="strict",
    per_shard_output=False,
):
    """Scale mode: records from shards in parallel, streamed to the outputs.

    Args:
      input_files: list of str.
      output_files: list of str; records go round-robin, from the first.
      tokenizer: tokenization.FullTokenizer.
      options: pretraining_data.GenerationOptions.
      num_workers: int >= 1, worker processes.
      shard_bytes: int, nominal shard size in bytes.
      decode_errors: "strict", "replace" or "ignore".
      per_shard_output: bool, write shard i's records to
        `<output_file>-{i:05d}-of-{count:05d}` instead (one output file
        given; records.ShardRecordFiles), as the Beam runner does.

    Returns:
      dict of counts: instances, shards, and ReadStats fields.

    Raises:
      ValueError: bad options, vocabulary, text or output files; no output
        file is left behind.
    """
    options.validate()
    if num_workers < 1:
        raise ValueError(f"num_workers={num_workers}: scale mode needs >= 1")
    check_shard_args(shard_bytes, decode_errors)
    shards_lib.check_output_files(
        output_files, input_files, single_files=not per_shard_output
    )
    if per_shard_output:
        check_per_shard_output(output_files)
        output = records.ShardRecordFiles(output_files[0])
    else:
        output = records.AtomicRecordWriters(output_files)
    state = worker_state(tokenizer, options, decode_errors)
    stats = text.ReadStats()
    progress = _Progress(sum(shards_lib.file_size(f) for f in input_files))
    shards = shards_lib.plan_shards(input_files, shard_bytes)
    shards_lib.release_large_blocks_to_os()  # Workers inherit it.
    # The pool forks before the writers open; one worker runs in-process.
    # Whole shards of records wait there for the writer: beside the output
    # (its disk), not in a /tmp that may be memory (tmpfs) or small.
    beside = output_files[0]
    scratch = (
        None
        if file_io.is_remote(beside)
        else os.path.dirname(os.path.abspath(beside))
    )
    with (
        file_io.scratch_dir(".bert_shards_", scratch) as tmpdir,
        shards_lib.ForkPool(
            num_workers,
            dataclasses.replace(state, tmpdir=tmpdir),
            max_tasks=_SHARDS_PER_WORKER,
        ) as pool,
        output as out,
    ):
        for shard, path, lengths, shard_stats in pool.imap(
            process_shard, shards
        ):
            stats.add(shard_stats)
            made = _logged(
                _read_back(path, lengths), out.num_written, tokenizer.inv_vocab
            )
            if per_shard_output:
                out.write(shard.index, made)
            else:
                for record in made:
                    out.write(record)
            progress.update(shard, out.num_written)
        progress.log(out.num_written)
        exact.log_read_stats(stats, input_files)
        if not stats.documents:
            exact.check_documents([], input_files)
        if per_shard_output:
            out.publish(progress.shards)
        else:
            out.commit()
    logging.info("Wrote %d total instances", out.num_written)
    return {
        "instances": out.num_written,
        "shards": progress.shards,
        **dataclasses.asdict(stats),
    }
