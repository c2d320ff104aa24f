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
import itertools
import mmap
import multiprocessing
import os

from absl import logging

from modeling import errors
from modeling import progress
from modeling.data import file_io
from modeling.pretraining_data import generation
from modeling.pretraining_data import records as records_lib
from modeling.pretraining_data import rng as rng_lib
from modeling.pretraining_data import shards
from modeling.pretraining_data import text

# Instances per chunk sent to the encoder process while generation goes on.
_ENCODE_CHUNK = 4096


def _encode_chunk(task):
    """Encodes one chunk of instances (InstanceStore.chunk_bytes) in a
    worker. Returns (blob, path, offset, lengths): the records back to back
    in `blob`, or, when `task` names a folder, appended to this worker's
    file in it (`path`, from byte `offset`; blob None), and their lengths.

    One file per worker, not one per chunk: the reader maps every file
    until the last record is written, and each map holds a file descriptor
    (a 100M-instance corpus would need 25,000 at 4,096 a chunk, past the
    usual limit of 1,024)."""
    payload, folder = task
    encoder, corpus = shards.state()
    store = generation.InstanceStore.from_bytes(*payload)
    records = list(encoder.encode_stored(corpus, store, range(len(store))))
    lengths = array.array("i", map(len, records))
    blob = b"".join(records)
    if folder is None:
        return blob, None, 0, lengths
    path = os.path.join(folder, f"worker-{os.getpid()}")
    with open(path, "ab") as f:
        offset = f.tell()
        f.write(blob)
    return None, path, offset, lengths


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


class ConcurrentEncoder:
    """Encodes instances in chunks, in the order they are made, while the
    generation goes on (in worker processes when the pool forks), then
    yields the records in output order.

    Workers hand their records over in files under a temporary directory,
    not through the pool's pipe: reading megabytes from a pipe takes the
    GIL once per 64 KB, which the generating thread holds for up to 5 ms at
    a time, so the workers would mostly wait. Records are deterministic
    functions of their instances: the bytes do not depend on the chunking
    or on the number of processes.
    """

    def __init__(self, pool, tmpdir, chunk=None):
        """`tmpdir`: where forked workers leave their records. The caller
        owns it and removes it only after the pool is gone: a worker still
        encoding when a run is interrupted could otherwise write a file into
        it while it is being removed."""
        self._pool = pool
        self._chunk = chunk or _ENCODE_CHUNK
        self._sent = 0
        self._pending = []
        self._tmpdir = tmpdir if pool.forks else None

    def __call__(self, store, final=False):
        """Sends whole chunks of new instances (all of them when final)."""
        while len(store) - self._sent >= (1 if final else self._chunk):
            end = min(len(store), self._sent + self._chunk)
            task = (store.chunk_bytes(self._sent, end), self._tmpdir)
            self._pending.append(self._pool.submit(_encode_chunk, task))
            self._sent = end

    def records(self, order):
        """Yields the records of instances `order[0]`, `order[1]`, ..."""
        # Every chunk but the last is full: instance i is in blobs[i // chunk]
        # at [starts[i], ends[i]).
        results = [result.get() for result in self._pending]
        self._pending = []
        # Mapped, not read: the whole output would be in memory (pages of a
        # mapped file are the page cache's to drop). The scratch folder's
        # removal deletes the files.
        maps = {}
        for _, path, _, _ in results:
            if path is not None and path not in maps:
                with open(path, "rb") as f:
                    maps[path] = (
                        mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ)
                        if os.fstat(f.fileno()).st_size
                        else b""
                    )
        blobs, starts, ends = [], [], []
        for blob, path, offset, lengths in results:
            blobs.append(blob if path is None else maps[path])
            chunk_ends = list(itertools.accumulate(lengths, initial=offset))
            starts += chunk_ends[:-1]
            ends += chunk_ends[1:]
        chunk = self._chunk
        for i in order:
            yield blobs[i // chunk][starts[i] : ends[i]]


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


def write_records(records, output_files, inv_vocab, num_logged=20, total=None):
    """Writes records round-robin, atomically; logs the first `num_logged`
    and the progress (of `total` when known).

    Returns:
      int, the number of records written.
    """
    counter = progress.Progress(
        "Writing records", total=total, unit="instances"
    )
    with records_lib.AtomicRecordWriters(output_files) as out:
        for record in records:
            if out.num_written < num_logged:
                records_lib.log_instance(record, inv_vocab)
            out.write(record)
            counter.add()
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
    shards.check_output_files(output_files, input_files, single_files=True)
    vocab_ids = generation.VocabIds(tokenizer.vocab)
    shards.release_large_blocks_to_os()
    if processes is None:
        processes = default_processes()
    corpus, stats = text.read_corpus(
        input_files,
        text.LineTokenizer(tokenizer),
        vocab_ids.num_ids,
        decode_errors,
        processes,
    )
    log_read_stats(stats, input_files)
    check_documents(corpus.documents, input_files)
    encoder = records_lib.RecordEncoder(
        options.max_seq_length, options.max_predictions_per_seq, vocab_ids
    )
    rng = rng_lib.make_rng(options.random_seed)
    # Encoding runs in processes - 1 forked workers beside the generation
    # (which is sequential), or here at the end with one process.
    # Exit order matters on an interruption: the pool's workers are killed
    # before their hand-over folder is removed.
    with errors.sigterm_deferred():
        # Created and its removal registered in one step.
        # Beside the output (its disk), as scale mode's: the records wait
        # there for the writer, and /tmp may be memory (tmpfs) or small.
        beside = output_files[0]
        records_dir = file_io.scratch_dir(
            ".bert_records_",
            None
            if file_io.is_remote(beside)
            else os.path.dirname(os.path.abspath(beside)),
        )
    with (
        records_dir as tmpdir,
        shards.ForkPool(
            max(1, processes - 1), (encoder, corpus), fork=processes > 1
        ) as pool,
    ):
        concurrent = ConcurrentEncoder(pool, tmpdir)
        store, order = generation.generate_instances(
            corpus, options, vocab_ids, rng, on_document=concurrent
        )
        concurrent(store, final=True)
        logging.info(
            "Made %d instances (%.1f MB of skeletons, %.1f MB of tokens)",
            len(store),
            store.nbytes / 1e6,
            corpus.tokens.itemsize * len(corpus.tokens) / 1e6,
        )
        records = concurrent.records(order)
        written = write_records(
            records, output_files, tokenizer.inv_vocab, total=len(order)
        )
    return {"instances": written, **dataclasses.asdict(stats)}
