"""Scale mode: worker processes over input shards, bounded memory.

Each input file is cut into shards of about `shard_bytes` (at a blank line
near the cut when there is one, else at a line end). A worker turns one
shard into records with the exact mode's algorithm applied to the shard
alone, with its own `random.Random` seeded from (random_seed, shard index):
document shuffle, `dupe_factor` passes, then a shuffle of all the shard's
instances. Masking draws only the positions it masks (a partial shuffle,
the same distribution with ~20 draws instead of ~125). The parent writes shards in shard order, round-robin across the
output files, as they complete.

So the output is deterministic for a seed and shard size, whatever the
number of workers, but it is NOT the original's: next-sentence negatives
come from the same shard, a document never continues across a file
boundary, and instances are shuffled within a shard (the bounded shuffle),
not globally. Memory per worker is one shard's documents and records; the
parent holds the records of at most num_workers + 1 shards.
"""

import array
import dataclasses
import random
import time

from absl import logging

from modeling import pretraining_data
from modeling import pretraining_data_exact
from modeling import pretraining_data_records
from modeling import pretraining_data_shards
from modeling import pretraining_data_text

# Workers are replaced (forked afresh) after this many shards, so memory
# fragmentation cannot build up over a long run.
_SHARDS_PER_WORKER = 16


@dataclasses.dataclass
class _WorkerState:
    options: pretraining_data.GenerationOptions
    vocab_ids: pretraining_data.VocabIds
    encoder: pretraining_data_records.RecordEncoder
    line_tokenizer: pretraining_data_text.LineTokenizer
    decode_errors: str


def shard_rng(random_seed, shard_index):
    """The generator of one shard: deterministic, independent per shard."""
    return random.Random(f"bert-pretraining-shard:{random_seed}:{shard_index}")


def process_shard(shard):
    """Turns one shard into records (runs in a worker).

    Returns:
      (shard, records, lengths, stats): records is a bytearray, the shard's
      serialized examples in output order, back to back; lengths an array
      of their sizes; stats a ReadStats.
    """
    state = pretraining_data_shards.state()
    corpus = pretraining_data_text.Corpus(state.vocab_ids.num_ids)
    tokens, lengths, stats = pretraining_data_text.read_shard(
        shard, state.line_tokenizer, state.decode_errors, corpus.tokens.typecode
    )
    corpus.add(tokens, lengths)
    del tokens, lengths
    stats.empty_documents = corpus.finish()
    stats.documents = len(corpus.documents)
    if not corpus.documents:
        return shard, b"", array.array("i"), stats
    rng = shard_rng(state.options.random_seed, shard.index)
    store, order = pretraining_data.generate_instances(
        corpus,
        state.options,
        state.vocab_ids,
        rng,
        exact=False,
        log_passes=False,
    )
    # One buffer, no list of records: the worker's peak is one copy.
    blob, lengths = bytearray(), array.array("i")
    for record in state.encoder.encode_stored(corpus, store, order):
        blob += record
        lengths.append(len(record))
    return shard, blob, lengths, stats


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


def _check_scale_args(num_workers, shard_bytes, decode_errors):
    if num_workers < 1:
        raise ValueError(f"num_workers={num_workers}: scale mode needs >= 1")
    if shard_bytes < 1:
        raise ValueError(
            f"shard size {shard_bytes} bytes: must be > 0 (--shard_size_mb)"
        )
    if decode_errors not in pretraining_data_text.DECODE_ERRORS:
        raise ValueError(f"decode_errors={decode_errors!r}: unknown policy")


def _worker_state(tokenizer, options, decode_errors):
    vocab_ids = pretraining_data.VocabIds(tokenizer.vocab)
    encoder = pretraining_data_records.RecordEncoder(
        options.max_seq_length, options.max_predictions_per_seq, vocab_ids
    )
    line_tokenizer = pretraining_data_text.LineTokenizer(tokenizer)
    return _WorkerState(
        options, vocab_ids, encoder, line_tokenizer, decode_errors
    )


def _write_shard(out, data, lengths, inv_vocab):
    for piece in pretraining_data_exact.split_records(data, lengths):
        record = bytes(piece)
        if out.num_written < 20:
            pretraining_data_records.log_instance(record, inv_vocab)
        out.write(record)


def create_scaled(
    input_files,
    output_files,
    tokenizer,
    options,
    num_workers,
    shard_bytes=1_000_000,
    decode_errors="strict",
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

    Returns:
      dict of counts: instances, shards, and ReadStats fields.

    Raises:
      ValueError: bad options, vocabulary, text or output files; no output
        file is left behind.
    """
    options.validate()
    _check_scale_args(num_workers, shard_bytes, decode_errors)
    pretraining_data_shards.check_output_files(output_files, input_files)
    state = _worker_state(tokenizer, options, decode_errors)
    stats = pretraining_data_text.ReadStats()
    progress = _Progress(
        sum(pretraining_data_shards.file_size(f) for f in input_files)
    )
    shards = pretraining_data_shards.plan_shards(input_files, shard_bytes)
    pretraining_data_shards.release_large_blocks_to_os()  # Workers inherit it.
    # The pool forks before the writers open; one worker runs in-process.
    with (
        pretraining_data_shards.ForkPool(
            num_workers, state, max_tasks=_SHARDS_PER_WORKER
        ) as pool,
        pretraining_data_records.AtomicRecordWriters(output_files) as out,
    ):
        for shard, data, lengths, shard_stats in pool.imap(
            process_shard, shards
        ):
            stats.add(shard_stats)
            _write_shard(out, data, lengths, tokenizer.inv_vocab)
            progress.update(shard, out.num_written)
        progress.log(out.num_written)
        pretraining_data_exact.log_read_stats(stats, input_files)
        if not stats.documents:
            pretraining_data_exact.check_documents([], input_files)
        out.commit()
    logging.info("Wrote %d total instances", out.num_written)
    return {
        "instances": out.num_written,
        "shards": progress.shards,
        **dataclasses.asdict(stats),
    }
