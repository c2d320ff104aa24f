"""Input shards and ordered work in forked processes.

Both modes cut input files into shards of about `shard_bytes` (at a blank
line near the cut when there is one, else at a line end) and hand work to
forked worker processes whose results come back in order, with only a few
in flight so memory stays bounded.

Workers are forked: they inherit the state set by `ForkPool` (tokenizer,
corpus, options) instead of receiving it pickled, and they never call
TensorFlow.
"""

import collections
import ctypes
import dataclasses
import multiprocessing
import multiprocessing.pool
import os
import threading

from modeling import errors
from modeling.data import file_io

# Blank-line search window past a nominal cut (a document boundary there
# keeps documents whole; without one the cut falls at the next line end).
_BOUNDARY_WINDOW = 1 << 16

# The state of the current ForkPool, inherited by its workers.
_STATE = None


@dataclasses.dataclass(frozen=True)
class Shard:
    """A byte range of one input file, starting at a line start."""

    index: int
    path: str
    start: int
    end: int
    first_line: int  # 1-based number of the line at `start`.


def open_binary(path):
    """Opens a local or tf.io.gfile path (gs://...) for binary reading."""
    if file_io.is_remote(path):
        import tensorflow as tf  # Only remote paths need TF.

        return tf.io.gfile.GFile(path, "rb")
    return open(path, "rb")


def file_size(path):
    if file_io.is_remote(path):
        import tensorflow as tf

        return tf.io.gfile.stat(path).length
    return os.path.getsize(path)


def _first_blank_line(window):
    """The offset of the first whole line of `window` that is blank as the
    text reader has it (str.strip() of its text, invalid bytes dropped,
    leaves nothing: CRLF, a full-width space U+3000, a no-break space), or
    None."""
    start = window.find(b"\n")
    while start >= 0:
        end = window.find(b"\n", start + 1)
        if end < 0:
            return None
        if not window[start + 1 : end].decode("utf-8", "ignore").strip():
            return start + 1
        start = end
    return None


def _cut(f, nominal, size):
    """The byte offset of the first line start at or after a good cut."""
    f.seek(nominal)
    window = f.read(_BOUNDARY_WINDOW)
    # A blank line begins the next shard: documents are not split.
    blank = _first_blank_line(window)
    if blank is not None:
        return nominal + blank
    pos = nominal
    while window:
        newline = window.find(b"\n")
        if newline >= 0:
            return pos + newline + 1
        pos += len(window)
        window = f.read(_BOUNDARY_WINDOW)
    return size


def plan_shards(input_files, shard_bytes):
    """Yields the Shards of all files, in order, reading each file once.

    Args:
      input_files: list of str.
      shard_bytes: int > 0, the nominal shard size.
    """
    index = 0
    for path in input_files:
        size = file_size(path)
        start, line = 0, 1
        with open_binary(path) as f:
            while start < size:
                nominal = start + shard_bytes
                end = size if nominal >= size else _cut(f, nominal, size)
                yield Shard(index, str(path), start, end, line)
                f.seek(start)
                line += f.read(end - start).count(b"\n")
                index += 1
                start = end


def read_shard_bytes(shard):
    with open_binary(shard.path) as f:
        f.seek(shard.start)
        return f.read(shard.end - shard.start)


def check_output_files(output_files, input_files=(), single_files=False):
    """Raises ValueError (or IsADirectoryError, FileNotFoundError) for an
    unusable list of output files; with `single_files` (not
    --per_shard_output), also for shard files `<output>-NNNNN-of-MMMMM`
    already there: `--input_file=<output>*` would read them with this run's
    records, and they may be anyone's (a Beam run's), so they are not
    removed."""
    if not output_files:
        raise ValueError("No output file given (--output_file)")
    # Compared once resolved: a/x and a/./x, or two links to one file, are
    # one file, whose second writer's rename would drop the first's records.
    resolved = [file_io.resolved(f) for f in output_files]
    if len(set(resolved)) != len(resolved):
        raise ValueError(f"Output files repeat: {output_files}")
    inputs = {file_io.resolved(f) for f in input_files}
    for path in output_files:
        if file_io.resolved(path) in inputs:
            raise ValueError(f"Output file {path} is also an input file")
        if not file_io.is_remote(path):
            file_io.check_file_path(path, f"output file {path}")
        from modeling.pretraining_data import records

        if not single_files:
            # The shards are renamed over files of their names: never over
            # an input, or a file that is not this script's records (a
            # corpus split as `wiki-00000-of-00002`).
            foreign = [
                p
                for p in records.shard_files(path)
                if file_io.resolved(p) in inputs or not records.written_here(p)
            ]
            if foreign:
                kind = (
                    "an input file"
                    if file_io.resolved(foreign[0]) in inputs
                    else "not this script's records"
                )
                raise errors.UserError(
                    f"--output_file={path}: {foreign[0]} is {kind}, and "
                    "shards of that name would replace it; name another "
                    "output file"
                )
            if file_io.exists(path):
                # Not written by this run, and maybe anyone's (the
                # original's output): kept, and refused as exact mode
                # refuses shards beside its file.
                raise errors.UserError(
                    f"--output_file={path}: a file of that name is there: "
                    f"--input_file={path}* would read it with this run's "
                    "shards; remove it or name another output file"
                )
        if single_files:
            shards = records.stale_shards(path)
            if shards:
                names = ", ".join(os.path.basename(p) for p in shards[:3])
                raise errors.UserError(
                    f"--output_file={path}: {len(shards)} shard files of "
                    f"that name are there ({names}{', ...' * (len(shards) > 3)}"
                    f"): --input_file={path}* would read them with this "
                    "run's records; remove them or name another output file"
                )


class _Deferred:
    def __init__(self, fn, item):
        self._call = (fn, item)

    def get(self):
        fn, item = self._call
        return fn(item)


def release_large_blocks_to_os(threshold=1 << 20):
    """Makes glibc serve blocks >= `threshold` bytes with mmap, always.

    By default glibc raises its mmap threshold after large frees, so the
    multi-MB record buffers of later shards come from the heap, which then
    fragments and keeps RSS growing over a long run. A fixed threshold
    returns each buffer to the OS when freed. Only on glibc; else a no-op.
    """
    try:
        libc = ctypes.CDLL("libc.so.6")
    except OSError:
        return False
    m_mmap_threshold = -3  # From glibc's malloc.h.
    return bool(libc.mallopt(m_mmap_threshold, threshold))


def state():
    """The state of the ForkPool this worker belongs to."""
    return _STATE


def _free(lock):
    """Leaves a multiprocessing Lock released, whoever held it."""
    lock.acquire(block=False)
    lock.release()


class _WatchedPool(multiprocessing.pool.Pool):
    """A Pool that keeps every worker process it starts (`workers`): one
    that died is gone from the pool's own list once replaced, its exit code
    kept here. Those that retired cleanly (exit code 0) are dropped."""

    def __init__(self, *args, **kwargs):
        self.workers = collections.deque()
        super().__init__(*args, **kwargs)

    def Process(self, ctx, *args, **kwargs):  # noqa: N802 (Pool's name)
        for _ in range(len(self.workers)):
            worker = self.workers.popleft()
            if worker.exitcode != 0:
                self.workers.append(worker)
        worker = ctx.Process(*args, **kwargs)
        self.workers.append(worker)
        return worker


class ForkPool:
    """A context: `processes` forked workers that inherit `worker_state`.

    `imap(fn, items)` yields fn(item) in order, computed by the workers
    with at most `processes + 1` items in flight; with `processes` <= 1 it
    runs in this process (same results, no fork) unless `fork` is True. A worker is replaced
    after `max_tasks` items, if given.
    """

    def __init__(self, processes, worker_state, max_tasks=None, fork=None):
        self.processes = processes
        self._state = worker_state
        self._max_tasks = max_tasks
        # fork=True forks even one worker (to run beside this process).
        self._fork = processes > 1 if fork is None else fork
        self._pool = None

    def __enter__(self):
        global _STATE
        _STATE = self._state
        if self._fork:
            context = multiprocessing.get_context("fork")
            # The workers and the `with` that stops them come as one: a
            # SIGTERM meanwhile is delivered once __exit__ is sure to run.
            with errors.sigterm_deferred():
                self._pool = _WatchedPool(
                    self.processes,
                    maxtasksperchild=self._max_tasks,
                    context=context,
                )
        return self

    def imap(self, fn, items):
        if self._pool is None:
            yield from map(fn, items)
            return
        pending = collections.deque()
        for item in items:
            pending.append(self.submit(fn, item))
            if len(pending) > self.processes:
                yield pending.popleft().get()
        while pending:
            yield pending.popleft().get()

    def _result(self, result):
        """result.get(), unless a worker dies first: multiprocessing.Pool
        replaces a killed worker (the out-of-memory killer's SIGKILL) and
        loses its task, whose result would then never come."""
        while not result.ready():
            for worker in list(self._pool.workers):
                code = worker.exitcode
                if code:  # 0: retired after max_tasks; None: alive.
                    how = (
                        f"was killed by signal {-code}"
                        if code < 0
                        else f"exited with status {code}"
                    )
                    raise errors.UserError(
                        f"A worker process {how} (out of memory?); nothing "
                        "was published: use fewer worker processes or "
                        "smaller shards"
                    )
            result.wait(0.5)
        return result.get()

    @property
    def forks(self):
        """Whether work runs in forked workers (not in this process)."""
        return self._fork

    def submit(self, fn, item):
        """Starts fn(item) in a worker; `.get()` of the result waits for it.
        Without workers fn runs when `.get()` is called."""
        if self._pool is None:
            return _Deferred(fn, item)
        return _Deferred(self._result, self._pool.apply_async(fn, (item,)))

    def __exit__(self, exc_type, exc, tb):
        global _STATE
        if self._pool is not None and exc_type is None:
            self._pool.terminate()
            self._pool.join()
        elif self._pool is not None:
            # After an error, the workers take the sentinels terminate
            # sends them and it returns at once. But an error or SIGTERM
            # (errors.Terminated) may have stopped a worker in the middle of
            # the pool's own bookkeeping, holding a lock of its queues (the
            # task queue's read lock, the result queue's write lock) that
            # Pool.terminate then waits on forever. So: terminate, and if
            # it is not done within a second, kill the workers, free those
            # locks (no live worker holds them then) and give terminate a
            # bounded time more.
            stopper = threading.Thread(target=self._pool.terminate, daemon=True)
            stopper.start()
            stopper.join(timeout=1)
            if stopper.is_alive():
                workers = list(self._pool._pool)
                for worker in workers:
                    worker.kill()
                for worker in workers:
                    worker.join(timeout=1)
                _free(self._pool._inqueue._rlock)
                _free(self._pool._outqueue._wlock)
                stopper.join(timeout=5)
        _STATE = None
        return False
