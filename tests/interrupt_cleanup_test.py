"""SIGTERM outside the training loop: the scripts exit with 143 and leave
no temporary files or folders behind (modeling/flags.py run_script)."""

import glob
import os
import pathlib
import signal
import subprocess
import sys
import time

import pytest
import script_runner

from modeling import signals
from modeling.tasks import common

REPO = pathlib.Path(__file__).resolve().parents[1]
CORPUS = REPO / "tests" / "testdata" / "train_corpus.txt"
VOCAB = REPO / "vocab" / "books_uncased_8k.txt"


def _start_generator(tmp_path, mode, dupe_factor=10):
    corpus = tmp_path / "corpus.txt"
    if not corpus.exists():
        corpus.write_text(
            CORPUS.read_text(encoding="utf-8") * 3, encoding="utf-8"
        )
        (tmp_path / "tmp").mkdir()
        (tmp_path / "out").mkdir()
    return script_runner.popen(
        [
            REPO / "create_pretraining_data.py",
            f"--input_file={corpus}",
            f"--output_file={tmp_path / 'out' / 'out.tfrecord'}",
            f"--vocab_file={VOCAB}",
            f"--dupe_factor={dupe_factor}",
            *mode,
        ],
        env={"PYTHONPATH": str(REPO), "TMPDIR": str(tmp_path / "tmp")},
    )


def _signal_when(child, pattern, signum):
    try:
        deadline = time.time() + 120
        while not glob.glob(pattern):
            assert child.poll() is None, "finished before the signal"
            assert time.time() < deadline, f"no {pattern} appeared"
            time.sleep(0.01)
        child.send_signal(signum)
        _, stderr = child.communicate(timeout=60)
    finally:
        if child.poll() is None:
            child.kill()
    return stderr


MODES = pytest.mark.parametrize(
    "mode, watch",
    [
        # Exact mode: the signal while its encoder's hand-over folder (beside
        # the output) exists.
        ([], "out/.bert_records_*"),
        # Scale mode: the signal while the output is being written.
        (
            ["--num_workers=2", "--shard_size_mb=0.05"],
            "out/.out.tfrecord.tmp-*",
        ),
    ],
    ids=["exact", "scale"],
)


@MODES
def test_create_pretraining_data_sigterm_leaves_nothing(tmp_path, mode, watch):
    for _ in range(3):
        child = _start_generator(tmp_path, mode)
        stderr = _signal_when(child, str(tmp_path / watch), signal.SIGTERM)
        if child.returncode != 0:
            break
        # On a loaded machine the signal can land after the work is done
        # (the run then rightly exits 0 with its output): once more.
        for name in os.listdir(tmp_path / "out"):
            os.remove(tmp_path / "out" / name)
    assert child.returncode == common.EXIT_INTERRUPTED, stderr[-3000:]
    assert "SIGTERM: stopped" in stderr
    assert "Traceback" not in stderr, stderr[-3000:]
    assert os.listdir(tmp_path / "tmp") == []
    assert os.listdir(tmp_path / "out") == []


@MODES
def test_a_rerun_removes_what_a_sigkill_left(tmp_path, mode, watch):
    """SIGKILL runs no handler: the leftovers are there until the next run
    into the same folders removes them (file_io.sweep_stale_temps)."""
    child = _start_generator(tmp_path, mode)
    _signal_when(child, str(tmp_path / watch), signal.SIGKILL)
    assert child.returncode == -signal.SIGKILL
    assert glob.glob(str(tmp_path / watch))  # left behind
    rerun = _start_generator(tmp_path, mode, dupe_factor=1)
    _, stderr = rerun.communicate(timeout=300)
    assert rerun.returncode == 0, stderr[-3000:]
    assert "left by a killed run" in stderr
    assert os.listdir(tmp_path / "tmp") == []
    assert os.listdir(tmp_path / "out") == ["out.tfrecord"]


BLOCKED_SCRIPT = """
import ctypes, sys, threading, time
from modeling import flags
from modeling import signals

def main(_):
    try:
        print("ready", file=sys.stderr, flush=True)
        time.sleep(100)
    finally:
        BLOCK

signals.SIGTERM_GRACE_SECS = 1.0
flags.run_script(main)
"""
# Cleanup that never ends.
BLOCKS = {
    # A stuck read (the interpreter lock released): the watchdog exits.
    "read": "lock = threading.Lock(); lock.acquire(); lock.acquire()",
    # A C call that holds the interpreter lock, as a C++ destructor can
    # (PyDLL does not release it): no Python thread runs, the watchdog's
    # neither; the backstop ends the process with SIGTERM (status 143 in a
    # shell) after printing where every thread was.
    "held_lock": "ctypes.PyDLL(None).sleep(100)",
    # The same in a container's PID 1, to which the kernel drops the
    # timer's signal: faulthandler's thread exits instead (status 1).
    "held_lock_pid_1": "ctypes.PyDLL(None).sleep(100)",
}


def _as_pid_1(script):
    """Starts `script` as PID 1 of new user and PID namespaces; returns
    (the unshare process, the script's process id here)."""
    command = ["unshare", "--user", "--map-root-user", "--pid", "--fork"]
    probe = subprocess.run([*command, "true"], capture_output=True)
    if probe.returncode:
        pytest.skip(f"no user namespaces here: {probe.stderr.strip()}")
    child = subprocess.Popen(
        [*command, sys.executable, str(script)],
        env={**os.environ, "PYTHONPATH": str(REPO)},
        stdin=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
    )
    # unshare ignores SIGTERM and waits for its child, the script.
    children = pathlib.Path(f"/proc/{child.pid}/task/{child.pid}/children")
    if not children.exists():
        child.kill()
        pytest.skip(f"{children} is missing: the script's id is unknown")
    deadline = time.time() + 10
    while not children.read_text().split():
        assert time.time() < deadline, "unshare started no process"
        time.sleep(0.01)
    return child, int(children.read_text().split()[0])


@pytest.mark.parametrize("block", sorted(BLOCKS))
def test_sigterm_exits_even_when_the_main_thread_stays_blocked(tmp_path, block):
    script = tmp_path / "blocked.py"
    script.write_text(BLOCKED_SCRIPT.replace("BLOCK", BLOCKS[block]))
    if block.endswith("pid_1"):
        child, pid = _as_pid_1(script)
    else:
        child = script_runner.popen(
            [script], env={"PYTHONPATH": str(REPO)}, stdout=None
        )
        pid = child.pid
    try:
        # TensorFlow's own log lines (a missing CUDA driver) may come first.
        for line in child.stderr:
            if line.strip() == "ready":
                break
        os.kill(pid, signal.SIGTERM)
        started = time.time()
        _, stderr = child.communicate(timeout=60)
    finally:
        if child.poll() is None:
            child.kill()
    waited = time.time() - started
    if block == "read":
        assert child.returncode == common.EXIT_INTERRUPTED, stderr
        assert waited < 10
        assert "SIGTERM: still running 1 s later" in stderr
        return
    expected = 1 if block.endswith("pid_1") else -signal.SIGTERM
    assert child.returncode == expected, stderr
    assert waited < 1 + signals.BACKSTOP_SECS + 1 + 5
    assert "SIGTERM: still running" not in stderr
    assert "Timeout (" in stderr and 'blocked.py", line 11' in stderr


STDERR_GONE_SCRIPT = """
import os, signal, sys
from modeling import errors
from modeling import signals
signals.install_sigterm_exit()
sys.stderr = None  # As when started with it closed: no stack dump.
try:
    os.kill(os.getpid(), signal.SIGTERM)
    for _ in range(1000):  # Bytecodes where a handler could run.
        pass
except errors.Terminated:
    print("terminated", signal.getsignal(signal.SIGTERM) is signal.SIG_DFL)
sys.stderr = sys.__stderr__
"""


def test_the_exit_backstop_never_replaces_the_sigterm_exception():
    """Arming the backstop (the kernel timer; faulthandler, which fails
    without stderr) inside the handler still raises Terminated."""
    out = script_runner.python(
        ["-c", STDERR_GONE_SCRIPT], env={"PYTHONPATH": str(REPO)}, timeout=60
    )
    assert out.returncode == 0, out.stderr[-2000:]
    # The timer is armed: SIGTERM has its default action back.
    assert out.stdout.strip() == "terminated True"


ON_SIGTERM_SCRIPT = """
import os, signal
from modeling import errors
from modeling import signals
signals.install_sigterm_exit()
steps = []
def broken():
    raise OSError("cannot")
try:
    with signals.on_sigterm(lambda: steps.append("stopped")):
        with signals.on_sigterm(broken):
            os.kill(os.getpid(), signal.SIGTERM)
            for _ in range(1000):  # Bytecodes where a handler could run.
                pass
except errors.Terminated:
    steps.append("terminated")
steps.append(len(signals._STOPS))
print(steps)
"""


def test_sigterm_stops_what_runs_beside_the_main_thread_first():
    """on_sigterm: the handler calls each stop before raising Terminated; a
    stop that fails is logged and never replaces Terminated; the block's end
    removes it."""
    out = script_runner.python(
        ["-c", ON_SIGTERM_SCRIPT], env={"PYTHONPATH": str(REPO)}, timeout=60
    )
    assert out.returncode == 0, out.stderr[-2000:]
    assert out.stdout.strip() == "['stopped', 'terminated', 0]"
    assert "SIGTERM: could not stop" in out.stderr
    assert "cannot" in out.stderr


ARRIVED_SCRIPT = """
import os, signal, threading, time
from modeling import errors
from modeling import signals
signals.install_sigterm_exit()
steps = [signals.sigterm_arrived()]
held = threading.Lock()
held.acquire()
def other():
    # The main thread blocks SIGTERM, so the kernel hands it to another
    # thread and the main thread's wait below is not interrupted: the
    # handler cannot run yet, but the arrival is known. (Sent once the main
    # thread has had time to reach that wait.)
    time.sleep(0.5)
    os.kill(os.getpid(), signal.SIGTERM)
    deadline = time.monotonic() + 5
    while not signals.sigterm_arrived() and time.monotonic() < deadline:
        time.sleep(0.01)
    steps.extend([signals.sigterm_arrived(), signals.terminated()])
    held.release()
signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGTERM})
threading.Thread(target=other).start()
try:
    held.acquire()
    for _ in range(1000):
        pass
except errors.Terminated:
    steps.append("terminated")
print(steps)
"""


def test_a_sigterm_is_known_to_have_arrived_before_its_handler_runs():
    out = script_runner.python(
        ["-c", ARRIVED_SCRIPT], env={"PYTHONPATH": str(REPO)}, timeout=60
    )
    assert out.returncode == 0, out.stderr[-2000:]
    assert out.stdout.strip() == "[False, True, False, 'terminated']"


DEFERRAL_SCRIPT = """
import os, signal, sys
from modeling import errors
from modeling import signals
signals.install_sigterm_exit()
steps = []
try:
    with errors.sigterm_deferred():
        os.kill(os.getpid(), signal.SIGTERM)
        for _ in range(1000):  # Bytecodes where a handler could run.
            pass
        steps.append("inside")
    steps.append("after")
except errors.Terminated:
    steps.append("terminated")
# A signal that comes while os.fork runs its hooks (where a raised exception
# would be printed and ignored) is delivered again after the fork.
signals._TERMINATION["received"] = False
signals._TERMINATION["forking"] = 1
signals._raise_terminated(signal.SIGTERM, None)
steps.append(signals._TERMINATION["fork_pending"])
print(steps)
"""


def test_sigterm_waits_for_a_deferred_step_and_for_a_fork():
    out = script_runner.python(
        ["-c", DEFERRAL_SCRIPT], env={"PYTHONPATH": str(REPO)}, timeout=60
    )
    assert out.returncode == 0, out.stderr[-2000:]
    assert out.stdout.strip() == "['inside', 'terminated', True]"
