"""SIGTERM outside the training loop, for every script (flags.run_script
installs it).

The training loop handles SIGTERM itself while it runs (a checkpoint, then
errors.Interrupted; modeling/training/steps.py). Everywhere else (data
generation, feature conversion, evaluation, extraction) a script's SIGTERM
raises errors.Terminated in the main thread, so the atomic writers and
temporary folders clean up on the way out, and the script exits with
EXIT_INTERRUPTED. A Python handler runs only between bytecodes of the main
thread; should the main thread be blocked in a long call (a stuck read),
a watcher thread woken by the signal exits anyway after
SIGTERM_GRACE_SECS."""

import os
import signal
import socket
import threading
import time

from absl import logging

from modeling import errors
from modeling.data import file_io

SIGTERM_GRACE_SECS = 10.0
_TERMINATION = {
    "pid": None,
    "received": False,
    "forking": 0,
    "fork_pending": False,
}


def install_sigterm_exit(grace_secs=None):
    """Installs the handler above (main thread; once per process)."""
    if (
        _TERMINATION["pid"] == os.getpid()
        or threading.current_thread() is not threading.main_thread()
    ):
        return
    _TERMINATION["pid"] = os.getpid()
    grace = SIGTERM_GRACE_SECS if grace_secs is None else grace_secs
    reader, writer = socket.socketpair()
    writer.setblocking(False)
    # Kept open for the life of the process (a collected socket closes).
    _TERMINATION["sockets"] = (reader, writer)
    signal.set_wakeup_fd(writer.fileno(), warn_on_full_buffer=False)
    signal.signal(signal.SIGTERM, _raise_terminated)
    threading.Thread(
        target=_sigterm_watchdog, args=(reader, grace), daemon=True
    ).start()
    # Forked workers (data generation) must not share the wakeup socket nor
    # raise in their own loops: a SIGTERM ends them plainly. In the parent,
    # an exception raised while os.fork runs its hooks is printed and
    # ignored, so a SIGTERM arriving then waits until the fork is done.
    os.register_at_fork(
        before=_before_fork,
        after_in_parent=_after_fork_in_parent,
        after_in_child=_reset_sigterm_in_child,
    )


def _before_fork():
    _TERMINATION["forking"] += 1


def _after_fork_in_parent():
    if _TERMINATION["forking"] == 1 and _TERMINATION["fork_pending"]:
        _TERMINATION["fork_pending"] = False
        # Delivered again from another thread once this hook has returned
        # (the handler then runs in the main thread's own code).
        threading.Timer(0.05, signal.raise_signal, (signal.SIGTERM,)).start()
    _TERMINATION["forking"] -= 1


def _reset_sigterm_in_child():
    try:
        signal.signal(signal.SIGTERM, signal.SIG_DFL)
        signal.set_wakeup_fd(-1)
    except ValueError:  # Not the main thread: nothing was installed here.
        pass


def _raise_terminated(signum, frame):
    del signum, frame
    if _TERMINATION["received"]:
        return  # Already on the way out.
    if _TERMINATION["forking"]:
        _TERMINATION["fork_pending"] = True
        return
    if errors._DEFERRAL["depth"]:
        errors._DEFERRAL["pending"] = True
        return
    _TERMINATION["received"] = True
    raise errors.Terminated(
        "SIGTERM: stopped; no partial output was left behind. Re-run the "
        "same command to start again (training resumes from its newest "
        "checkpoint)."
    )


def _sigterm_watchdog(reader, grace):
    while True:
        data = reader.recv(64)
        if not data:
            return
        if signal.SIGTERM in data:
            break
    time.sleep(grace)
    logging.warning(
        "SIGTERM: still running %.0f s later (blocked in a read or a "
        "computation); exiting now.",
        grace,
    )
    logging.flush()
    # os._exit skips the atomic writers' clean-up: their temporary files
    # go first (nothing was published from them).
    file_io.remove_open_temporaries()
    os._exit(errors.EXIT_INTERRUPTED)


def terminated():
    """Whether this process's SIGTERM handler has raised errors.Terminated."""
    return _TERMINATION["received"]
