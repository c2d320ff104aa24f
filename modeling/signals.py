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
SIGTERM_GRACE_SECS.

That watcher is a Python thread: it cannot run while a C call holds the
interpreter lock (a C++ destructor that waits, as tf.data's autotuner once
made iterators do). So once a script is only exiting (this module's
handler has raised, or the Trainer has saved its checkpoint after
SIGTERM), `arm_exit_backstop` arms what needs no lock: faulthandler's
thread prints every thread's Python stack after BACKSTOP_SECS more than
the grace, and a kernel timer ends the process with SIGTERM's default
action a second later (status 143, as a kill would give)."""

import contextlib
import ctypes
import faulthandler
import os
import signal
import socket
import sys
import threading
import time

from absl import logging

from modeling import errors
from modeling.data import file_io

SIGTERM_GRACE_SECS = 10.0
# How much longer than the grace the backstop waits (arm_exit_backstop).
BACKSTOP_SECS = 5.0
_TERMINATION = {
    "pid": None,
    "grace": SIGTERM_GRACE_SECS,
    "backstop": False,
    "received": False,
    "arrived": False,
    "forking": 0,
    "fork_pending": False,
}
# What the handler stops first (on_sigterm).
_STOPS = []


def install_sigterm_exit(grace_secs=None):
    """Installs the handler above (main thread; once per process)."""
    if (
        _TERMINATION["pid"] == os.getpid()
        or threading.current_thread() is not threading.main_thread()
    ):
        return
    _TERMINATION["pid"] = os.getpid()
    grace = SIGTERM_GRACE_SECS if grace_secs is None else grace_secs
    _TERMINATION["grace"] = grace
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
        threading.Timer(0.05, _deliver_pending).start()
    _TERMINATION["forking"] -= 1


def _deliver_pending():
    # Unless a later SIGTERM has been handled meanwhile (then SIGTERM may
    # have its default action back: arm_exit_backstop).
    if not _TERMINATION["received"]:
        signal.raise_signal(signal.SIGTERM)


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
    arm_exit_backstop()
    for stop in list(_STOPS):
        try:
            stop()
        except Exception as e:  # Never in place of Terminated.
            logging.warning("SIGTERM: could not stop %s: %s", stop, e)
    raise errors.Terminated(
        "SIGTERM: stopped; no partial output was left behind. Re-run the "
        "same command to start again (training resumes from its newest "
        "checkpoint)."
    )


@contextlib.contextmanager
def on_sigterm(stop):
    """Within this block, this module's handler calls `stop()` before it
    raises errors.Terminated: for work running beside the main thread that
    must end at once, before the clean-up on the way out (Beam's local
    worker processes)."""
    _STOPS.append(stop)
    try:
        yield
    finally:
        _STOPS.remove(stop)


def _sigterm_watchdog(reader, grace):
    while True:
        data = reader.recv(64)
        if not data:
            return
        if signal.SIGTERM in data:
            break
    _TERMINATION["arrived"] = True
    time.sleep(grace)
    logging.warning(
        "SIGTERM: still running %.0f s later (blocked in a read or a "
        "computation); exiting now.",
        grace,
    )
    exit_now(errors.EXIT_INTERRUPTED)


def exit_now(status):
    """Ends the process with `status` at once: no clean-up but the atomic
    writers' temporary files (os._exit skips their `with` blocks; nothing
    was published from them) and the logs' flush, and no wait at exit (JAX's
    distributed client waits there for every process of a run)."""
    logging.flush()
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except (AttributeError, OSError, ValueError):  # None or closed
            pass
    file_io.remove_open_temporaries()
    os._exit(status)


def arm_exit_backstop():
    """Ends this script's process even if a C call holds the interpreter
    lock (see above): prints every thread's Python stack the grace plus
    BACKSTOP_SECS from now, and ends the process a second later; for a
    script that has nothing left to do but exit, so the bound holds for a
    slow but healthy exit too. A no-op outside the scripts (no
    install_sigterm_exit in this process: a notebook, a test) and when
    armed already.

    The timer sends SIGTERM with its default action back (a second SIGTERM
    by hand then also ends the process at once), or SIGKILL when armed off
    the main thread, where the handler cannot be changed. Where there is no
    timer (off Linux) or its signal would be dropped (the process is a
    container's PID 1: the kernel drops the signals whose action is the
    default, SIGKILL included, sent to a namespace's init from within),
    faulthandler's thread ends the process after its dump instead, with
    the one exit it has: status 1.
    """
    if _TERMINATION["pid"] != os.getpid() or _TERMINATION["backstop"]:
        return
    _TERMINATION["backstop"] = True
    secs = _TERMINATION["grace"] + BACKSTOP_SECS
    main = threading.current_thread() is threading.main_thread()
    try:
        timed = False
        if os.getpid() != 1:
            timed = _kernel_timer(
                signal.SIGTERM if main else signal.SIGKILL, secs + 1.0
            )
        if timed and main:
            signal.signal(signal.SIGTERM, signal.SIG_DFL)
        faulthandler.dump_traceback_later(secs, exit=not timed, file=sys.stderr)
    except Exception as e:  # Never in place of the exception on its way.
        # stderr closed or without a file descriptor: no stack dump.
        logging.debug("SIGTERM backstop: %s", e)
        return
    logging.info(
        "SIGTERM: exiting; should the exit hang, the process is ended in "
        "%.0f s (every thread's Python stack is printed first).",
        secs + 1.0 if timed else secs,
    )


# struct sigevent and struct itimerspec of Linux's C library (64 bytes;
# the signal number and the notification after the 8-byte value).
class _SigEvent(ctypes.Structure):
    _fields_ = [
        ("value", ctypes.c_void_p),
        ("signo", ctypes.c_int),
        ("notify", ctypes.c_int),
        ("pad", ctypes.c_int * 12),
    ]


class _TimeSpec(ctypes.Structure):
    _fields_ = [("sec", ctypes.c_long), ("nsec", ctypes.c_long)]


class _ITimerSpec(ctypes.Structure):
    _fields_ = [("interval", _TimeSpec), ("value", _TimeSpec)]


_CLOCK_MONOTONIC = 1
_SIGEV_SIGNAL = 0


def _kernel_timer(signum, secs):
    """Arms a one-shot POSIX timer that sends `signum` to this process
    after `secs` (it goes with the process); whether it could."""
    if not sys.platform.startswith("linux"):
        return False
    libc = None
    for name in (None, "librt.so.1"):  # glibc 2.34 merged librt into libc.
        try:
            lib = ctypes.CDLL(name, use_errno=True)
        except OSError:
            continue
        if hasattr(lib, "timer_create") and hasattr(lib, "timer_settime"):
            libc = lib
            break
    if libc is None:
        return False
    event = _SigEvent(signo=signum, notify=_SIGEV_SIGNAL)
    timer = ctypes.c_void_p()
    if libc.timer_create(
        _CLOCK_MONOTONIC, ctypes.byref(event), ctypes.byref(timer)
    ):
        return False
    whole = int(secs)
    when = _ITimerSpec(value=_TimeSpec(whole, int((secs - whole) * 1e9)))
    # (The first timer's id is 0: `timer` may read as None, and is valid.)
    return not libc.timer_settime(timer, 0, ctypes.byref(when), None)


def terminated():
    """Whether this process's SIGTERM handler has raised errors.Terminated."""
    return _TERMINATION["received"]


def sigterm_arrived():
    """Whether a SIGTERM has reached this process (install_sigterm_exit),
    known within milliseconds from the watchdog's thread even while the
    main thread, where the handler runs, waits in a call: the kernel may
    hand a process's signal to any of its threads."""
    return _TERMINATION["arrived"] or _TERMINATION["received"]
