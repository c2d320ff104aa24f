"""The exact mode's whole run, and the steps it shares with the scale mode.

`create_exact` is the original's `main`: read every input file into one
list of documents, make all instances with one `random.Random`, shuffle
them, write them round-robin. Same inputs, vocabulary, flags and seed give
the same records as the original (tests compare with its outputs).
"""

import array
import collections
import dataclasses
import multiprocessing
import os

from absl import logging

from modeling import pretraining_data
from modeling import pretraining_data_records
from modeling import pretraining_data_rng
from modeling import pretraining_data_text

# Runs of at least this many instances encode their records in worker
# processes; encoding is deterministic, so the output is the same.
_PARALLEL_ENCODE_MIN = 20_000
_ENCODE_CHUNK = 4096
# Set before the encoder pool forks, so workers inherit it.
_ENCODE_STATE = None


def _encode_chunk(start):
    """Encodes the records of order[start : start + _ENCODE_CHUNK]."""
    encoder, corpus, store, order = _ENCODE_STATE
    indices = order[start : start + _ENCODE_CHUNK]
    records = list(encoder.encode_stored(corpus, store, indices))
    return b"".join(records), array.array("i", map(len, records))


def _split(blob, lengths):
    pos = 0
    for length in lengths:
        yield blob[pos : pos + length]
        pos += length


def default_processes():
    """CPUs this process may use, at most 4."""
    return min(4, len(os.sched_getaffinity(0)))


class ParallelRecords:
    """Context giving the records of stored instances in `order`.

    With `processes` > 1 and enough instances, forked workers encode chunks
    ahead of the writer (a few in flight); else this process encodes.
    """

    def __init__(self, encoder, corpus, store, order, processes):
        self._args = (encoder, corpus, store, order)
        self._processes = processes
        self._pool = None

    def __enter__(self):
        global _ENCODE_STATE
        if self._processes > 1 and len(self._args[3]) >= _PARALLEL_ENCODE_MIN:
            _ENCODE_STATE = self._args
            context = multiprocessing.get_context("fork")
            self._pool = context.Pool(self._processes)
        return self._records()

    def _records(self):
        encoder, corpus, store, order = self._args
        if self._pool is None:
            yield from encoder.encode_stored(corpus, store, order)
            return
        pending = collections.deque()
        for start in range(0, len(order), _ENCODE_CHUNK):
            pending.append(self._pool.apply_async(_encode_chunk, (start,)))
            if len(pending) > self._processes:
                yield from _split(*pending.popleft().get())
        while pending:
            yield from _split(*pending.popleft().get())

    def __exit__(self, exc_type, exc, tb):
        global _ENCODE_STATE
        if self._pool is not None:
            self._pool.terminate()
            self._pool.join()
        _ENCODE_STATE = None
        return False


def log_read_stats(stats, input_files):
    logging.info("Read %d file(s): %s", len(input_files), stats.summary())
    if stats.decode_error_lines:
        logging.warning(
            "%d line(s) held bytes that are not UTF-8 (decoded per "
            "--decode_errors)",
            stats.decode_error_lines,
        )


def check_documents(documents, input_files):
    """Raises ValueError when there is no document to learn from."""
    if not documents:
        raise ValueError(
            "No text to make instances from: the input files hold no line "
            f"that tokenizes to anything ({', '.join(input_files)})"
        )


def write_records(records, output_files, inv_vocab, num_logged=20):
    """Writes records round-robin, atomically; logs the first `num_logged`.

    Returns:
      int, the number of records written.
    """
    with pretraining_data_records.AtomicRecordWriters(output_files) as out:
        for record in records:
            if out.num_written < num_logged:
                pretraining_data_records.log_instance(record, inv_vocab)
            out.write(record)
        if not out.num_written:
            raise ValueError("No instance was made; no output written")
        out.commit()
    logging.info("Wrote %d total instances", out.num_written)
    return out.num_written


def create_exact(
    input_files,
    output_files,
    tokenizer,
    options,
    decode_errors="strict",
    processes=None,
):
    """The original's whole run: same records for the same inputs and seed.

    Args:
      input_files: list of str, read in this order.
      output_files: list of str; records go round-robin, from the first.
      tokenizer: tokenization.FullTokenizer.
      options: pretraining_data.GenerationOptions.
      decode_errors: "strict", "replace" or "ignore".
      processes: int, processes that encode records (the generation itself
        is sequential); None for `default_processes()`.

    Returns:
      dict of counts: instances, and ReadStats fields.

    Raises:
      ValueError: bad options, vocabulary, text or output files; no output
        file is left behind.
    """
    options.validate()
    pretraining_data_records.check_output_files(output_files, input_files)
    vocab_ids = pretraining_data.VocabIds(tokenizer.vocab)
    encoder = pretraining_data_records.RecordEncoder(
        options.max_seq_length, options.max_predictions_per_seq, vocab_ids
    )
    line_tokenizer = pretraining_data_text.LineTokenizer(tokenizer)
    documents, stats = pretraining_data_text.read_documents(
        input_files, line_tokenizer, decode_errors
    )
    log_read_stats(stats, input_files)
    check_documents(documents, input_files)
    corpus = pretraining_data.Corpus(documents, vocab_ids.num_ids)
    del documents, line_tokenizer
    rng = pretraining_data_rng.make_rng(options.random_seed)
    store, order = pretraining_data.generate_instances(
        corpus, options, vocab_ids, rng
    )
    logging.info(
        "Made %d instances (%.1f MB of skeletons, %.1f MB of tokens)",
        len(store),
        store.nbytes / 1e6,
        corpus.tokens.itemsize * len(corpus.tokens) / 1e6,
    )
    if processes is None:
        processes = default_processes()
    with ParallelRecords(encoder, corpus, store, order, processes) as records:
        written = write_records(records, output_files, tokenizer.inv_vocab)
    return {"instances": written, **dataclasses.asdict(stats)}
