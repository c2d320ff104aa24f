"""SIGTERM in a Beam run on the local runner (beam.py): its worker processes
end at once, and what Beam's threads say about that end is not printed.

Left alone, the workers finish the bundles in flight into a hidden folder
about to be removed, and Beam's harness, shut down around them, sometimes
prints a KeyError traceback of its own. So this module's SIGTERM stop kills
them first (signals.on_sigterm). Beam's threads in this process then report
the workers' end as failures (a worker thread's RuntimeError, the data
plane's read errors); so do they when the SIGTERM went to the whole process
group, as batch schedulers send it, and the workers ended by it on their
own. The run is being abandoned in both cases, so those reports are
dropped.
"""

import contextlib
import logging as py_logging
import os
import signal
import threading
import time

from absl import logging

from modeling import signals


@contextlib.contextmanager
def stopped_by_sigterm():
    """Around a pipeline's run: a SIGTERM kills its local workers before
    errors.Terminated is raised, and Beam's reports of their end go
    unprinted."""
    with _QuietAfterSigterm(), signals.on_sigterm(_stop_local_workers):
        yield


# In the command line of Beam's local workers (and of the shells that start
# them): what _stop_local_workers looks for.
_LOCAL_WORKER = b"apache_beam.runners.worker.sdk_worker_main"


def _local_worker_pids():
    """This process's descendants that are Beam's local workers (Linux's
    /proc; none found elsewhere)."""
    parents = {}
    try:
        entries = os.listdir("/proc")
    except OSError:
        return []
    for entry in entries:
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat", "rb") as f:
                # "pid (name) state ppid ...": the name may hold spaces.
                ppid = int(f.read().rsplit(b")", 1)[1].split()[1])
        except (OSError, IndexError, ValueError):
            continue  # Gone meanwhile.
        parents.setdefault(ppid, []).append(int(entry))
    found = []
    todo = [os.getpid()]
    while todo:
        for child in parents.get(todo.pop(), []):
            todo.append(child)
            try:
                with open(f"/proc/{child}/cmdline", "rb") as f:
                    if _LOCAL_WORKER in f.read():
                        found.append(child)
            except OSError:
                continue
    return found


def _stop_local_workers():
    """SIGTERM: kills Beam's local workers (their shards are discarded)."""
    pids = _local_worker_pids()
    for pid in pids:
        try:
            os.kill(pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
    if pids:
        logging.info("SIGTERM: stopped %d Beam worker processes.", len(pids))


# How long a report of Beam's own threads waits for a SIGTERM to be known
# (_QuietAfterSigterm).
_REPORT_WAIT_SECS = 0.5


class _QuietAfterSigterm(py_logging.Filter):
    """While a pipeline runs, what Beam's threads report (an uncaught
    exception; a log record of Beam's) is dropped once a SIGTERM has reached
    this process: the workers' end is then the run's own stop
    (_stop_local_workers, or the same SIGTERM sent to the whole process
    group, as a batch scheduler does), not a failure. A failure report (an
    uncaught exception, an error record) from another thread waits up to
    _REPORT_WAIT_SECS for the SIGTERM to be known first, since a worker
    ended by a group's SIGTERM may be seen before."""

    def __init__(self):
        super().__init__()
        self._report = threading.excepthook
        self._handlers = list(py_logging.getLogger().handlers)

    def __enter__(self):
        threading.excepthook = self._hook
        for handler in self._handlers:
            handler.addFilter(self)
        return self

    def __exit__(self, *exc):
        if signals.sigterm_arrived():
            return  # The process is on its way out: Beam stays quiet.
        threading.excepthook = self._report
        for handler in self._handlers:
            handler.removeFilter(self)

    @staticmethod
    def _after_sigterm():
        if threading.current_thread() is threading.main_thread():
            return signals.sigterm_arrived()
        deadline = time.monotonic() + _REPORT_WAIT_SECS
        while not signals.sigterm_arrived():
            if time.monotonic() > deadline:
                return False
            time.sleep(0.02)
        return True

    def _hook(self, args):
        if args.thread is threading.main_thread() or not self._after_sigterm():
            self._report(args)

    def filter(self, record):
        if not record.name.startswith("apache_beam"):
            return True
        if record.levelno < py_logging.ERROR and not record.exc_info:
            # Not a failure report: never held up (Beam's threads log
            # often at debug verbosity).
            return not signals.sigterm_arrived()
        return not self._after_sigterm()
