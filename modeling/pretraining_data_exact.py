"""The exact mode's whole run, and the steps it shares with the scale mode.

`create_exact` is the original's `main`: read every input file into one
list of documents, make all instances with one `random.Random`, shuffle
them, write them round-robin. Same inputs, vocabulary, flags and seed give
the same records as the original (tests compare with its outputs).

Nothing on this path imports TensorFlow (seconds of CPU) unless a path is
remote (gs://...): records are encoded and framed in Python and numpy.
"""

import array
import dataclasses
import multiprocessing
import os

from absl import logging

from modeling import pretraining_data
from modeling import pretraining_data_records
from modeling import pretraining_data_rng
from modeling import pretraining_data_shards
from modeling import pretraining_data_text

# Runs of at least this many instances encode their records in worker
# processes; encoding is deterministic, so the output is the same.
_PARALLEL_ENCODE_MIN = 20_000
_ENCODE_CHUNK = 4096


def _encode_chunk(start):
    """Encodes the records of order[start : start + _ENCODE_CHUNK]."""
    encoder, corpus, store, order = pretraining_data_shards.state()
    indices = order[start : start + _ENCODE_CHUNK]
    records = list(encoder.encode_stored(corpus, store, indices))
    return b"".join(records), array.array("i", map(len, records))


def split_records(blob, lengths):
    """Yields the records packed back to back in `blob`."""
    pos = 0
    for length in lengths:
        yield blob[pos : pos + length]
        pos += length


def default_processes():
    """CPUs this process may use, at most 4 (1 where fork is missing)."""
    if "fork" not in multiprocessing.get_all_start_methods():
        return 1
    if hasattr(os, "sched_getaffinity"):
        return min(4, len(os.sched_getaffinity(0)))
    return min(4, os.cpu_count() or 1)


def encoded_records(pool, encoder, corpus, store, order):
    """Yields the records of stored instances in `order`.

    With a multi-process `pool` (whose state is these arguments) and
    enough instances, the workers encode chunks ahead of the writer.
    """
    if pool.processes <= 1 or len(order) < _PARALLEL_ENCODE_MIN:
        yield from encoder.encode_stored(corpus, store, order)
        return
    starts = range(0, len(order), _ENCODE_CHUNK)
    for blob, lengths in pool.imap(_encode_chunk, starts):
        yield from split_records(blob, lengths)


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
      processes: int, processes that tokenize text and encode records
        (the generation itself is sequential; the output does not depend
        on this); None for `default_processes()`.

    Returns:
      dict of counts: instances, and ReadStats fields.

    Raises:
      ValueError: bad options, vocabulary, text or output files; no output
        file is left behind.
    """
    options.validate()
    pretraining_data_shards.check_output_files(output_files, input_files)
    vocab_ids = pretraining_data.VocabIds(tokenizer.vocab)
    pretraining_data_shards.release_large_blocks_to_os()
    if processes is None:
        processes = default_processes()
    corpus, stats = pretraining_data_text.read_corpus(
        input_files,
        pretraining_data_text.LineTokenizer(tokenizer),
        vocab_ids.num_ids,
        decode_errors,
        processes,
    )
    log_read_stats(stats, input_files)
    check_documents(corpus.documents, input_files)
    rng = pretraining_data_rng.make_rng(options.random_seed)
    store, order = pretraining_data.generate_instances(
        corpus, options, vocab_ids, rng
    )
    encoder = pretraining_data_records.RecordEncoder(
        options.max_seq_length, options.max_predictions_per_seq, vocab_ids
    )
    logging.info(
        "Made %d instances (%.1f MB of skeletons, %.1f MB of tokens)",
        len(store),
        store.nbytes / 1e6,
        corpus.tokens.itemsize * len(corpus.tokens) / 1e6,
    )
    state = (encoder, corpus, store, order)
    with pretraining_data_shards.ForkPool(processes, state) as pool:
        records = encoded_records(pool, encoder, corpus, store, order)
        written = write_records(records, output_files, tokenizer.inv_vocab)
    return {"instances": written, **dataclasses.asdict(stats)}
