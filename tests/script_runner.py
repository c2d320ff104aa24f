"""Runs the repository's command-line scripts (and other Python programs)
in processes of their own, as a user would, from the repository root.

`python(args)` is `python <args>` in a new process; `popen(args)` starts
one and returns a `subprocess.Popen` look-alike (pid, poll, wait,
communicate, send_signal, streamed stdout and stderr). Most of such a
process's start is importing TensorFlow and Keras (about 5 s of a 2-core
test machine, for each of the suite's dozens of runs), so each is forked
from a warm interpreter (tests/warm_interpreter.py) that imported them
once, with the variables that are read at import (a backend, XLA or
TensorFlow settings) as the run has them: one warm interpreter for each
such set of variables, started by its first run. The program still runs
as `__main__` in a process of its own, with its own argv, environment,
working folder, streams and exit status; only the imports are shared.
"""

import atexit
import hashlib
import json
import os
import pathlib
import select
import signal
import socket
import subprocess
import sys
import tempfile
import threading

import warm_interpreter

REPO = pathlib.Path(__file__).resolve().parents[1]

# What a warm interpreter imports before it forks.
_PRELOAD = ("numpy", "tensorflow", "tensorflow_text", "keras")
# Variables read when those are imported: runs that set them differently
# get warm interpreters of their own. (TF_CONFIG is not one: a
# distribution strategy reads it when it is made.)
_IMPORT_TIME_PREFIXES = (
    "TF_",
    "KERAS_",
    "XLA_",
    "JAX_",
    "CUDA",
    "OMP_",
    "MKL",
    "PYTHON",
    "LD_",
)
_NOT_IMPORT_TIME = ("TF_CONFIG", "PYTHONPATH")
_SERVER = pathlib.Path(warm_interpreter.__file__)
_SERVERS = {}
# Forking TensorFlow's process is Linux's business: elsewhere (macOS forbids
# forking a process that started Apple's frameworks) every run starts afresh.
WARM = sys.platform.startswith("linux")


def _import_time_env(env):
    return tuple(
        sorted(
            (k, v)
            for k, v in env.items()
            if k.startswith(_IMPORT_TIME_PREFIXES) and k not in _NOT_IMPORT_TIME
        )
    )


class _WarmInterpreter:
    """A tests/warm_interpreter.py process and its socket."""

    def __init__(self, env):
        self.folder = tempfile.mkdtemp(prefix="warm-python-")
        self.socket = os.path.join(self.folder, "socket")
        preload = list(_PRELOAD)
        if env.get("KERAS_BACKEND") == "jax":
            preload.insert(1, "jax")
        self.process = subprocess.Popen(
            [sys.executable, str(_SERVER), self.socket, *preload],
            env=env,
            cwd=REPO,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
        )
        line = self.process.stdout.readline()
        if line.strip() != "ready":
            self.process.kill()
            raise RuntimeError(
                f"the warm interpreter did not start (exit status "
                f"{self.process.wait()})"
            )

    def start(self, args, env, cwd, fds):
        """Forks `python <args>` with fds as its stdin, stdout and stderr:
        (its pid, the connection its exit status comes on)."""
        request = json.dumps({"args": args, "env": env, "cwd": str(cwd)})
        request = request.encode()
        conn = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        conn.connect(self.socket)
        socket.send_fds(conn, [warm_interpreter.WORD.pack(len(request))], fds)
        conn.sendall(request)
        return warm_interpreter.receive_word(conn), conn

    def close(self):
        self.process.stdin.close()
        self.process.wait()
        self.process.stdout.close()
        for name in os.listdir(self.folder):
            os.unlink(os.path.join(self.folder, name))
        os.rmdir(self.folder)


@atexit.register
def _close_all():
    while _SERVERS:
        _SERVERS.popitem()[1].close()


def _warm_interpreter(env):
    """The warm interpreter for env's import-time variables; started on
    first use."""
    key = _import_time_env(env)
    if key not in _SERVERS:
        _SERVERS[key] = _WarmInterpreter(env)
    return _SERVERS[key]


class Process:
    """A program started by `popen`: the parts of subprocess.Popen the
    tests use. stdout and stderr are text streams where PIPE was asked."""

    def __init__(self, args, env, cwd, stdout, stderr):
        self.args = [sys.executable, *args]
        self.returncode = None
        self._readers = {}
        ends = {}
        child_fds = []
        keep = []
        for name, how in (
            ("stdin", subprocess.DEVNULL),
            ("stdout", stdout),
            ("stderr", stderr),
        ):
            if how == subprocess.PIPE:
                read, write = os.pipe()
                ends[name] = os.fdopen(read, encoding="utf-8", errors="replace")
                child_fds.append(write)
                keep.append(write)
            elif how == subprocess.DEVNULL:
                fd = os.open(os.devnull, os.O_RDWR)
                child_fds.append(fd)
                keep.append(fd)
            elif how is None:
                child_fds.append({"stdin": 0, "stdout": 1, "stderr": 2}[name])
            else:  # A file object or descriptor of the caller's.
                child_fds.append(getattr(how, "fileno", lambda: how)())
        try:
            self.pid, self._conn = _warm_interpreter(env).start(
                args, env, cwd, child_fds
            )
        finally:
            for fd in keep:
                os.close(fd)
        self.stdin = None
        self.stdout = ends.get("stdout")
        self.stderr = ends.get("stderr")

    def _ended(self, timeout):
        ready, _, _ = select.select([self._conn], [], [], timeout)
        if not ready:
            return False
        self.returncode = warm_interpreter.receive_word(self._conn)
        self._conn.close()
        return True

    def poll(self):
        if self.returncode is None:
            self._ended(0)
        return self.returncode

    def wait(self, timeout=None):
        if self.returncode is None and not self._ended(timeout):
            raise subprocess.TimeoutExpired(self.args, timeout)
        return self.returncode

    def communicate(self, timeout=None):
        """Reads stdout and stderr to their ends and waits: (stdout,
        stderr), None for a stream that is not a pipe."""
        for name in ("stdout", "stderr"):
            stream = getattr(self, name)
            if stream is not None and name not in self._readers:
                out = []
                reader = threading.Thread(
                    target=lambda s=stream, o=out: o.append(s.read()),
                    daemon=True,
                )
                reader.start()
                self._readers[name] = (reader, out)
        for reader, _ in self._readers.values():
            reader.join(timeout)
            if reader.is_alive():
                raise subprocess.TimeoutExpired(self.args, timeout)
        self.wait(timeout)
        results = []
        for name in ("stdout", "stderr"):
            if name in self._readers:
                getattr(self, name).close()
                results.append(self._readers[name][1][0])
            else:
                results.append(None)
        return tuple(results)

    def send_signal(self, signum):
        if self.poll() is None:
            os.kill(self.pid, signum)

    def terminate(self):
        self.send_signal(signal.SIGTERM)

    def kill(self):
        self.send_signal(signal.SIGKILL)

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        for stream in (self.stdout, self.stderr):
            if stream is not None:
                stream.close()
        if self.returncode is None:
            self.wait()


def popen(
    args,
    env=None,
    cwd=REPO,
    stdout=subprocess.DEVNULL,
    stderr=subprocess.PIPE,
):
    """Starts `python <args>` (a script and its arguments, or "-c", code,
    ...) and returns its Process; `env`: the variables to add; stdout and
    stderr: subprocess.PIPE, DEVNULL, None (the test's own) or a file."""
    args = [str(a) for a in args]
    full_env = {**os.environ, **(env or {})}
    full_env.pop("PYTEST_CURRENT_TEST", None)
    if not WARM:
        return subprocess.Popen(
            [sys.executable, *args],
            env=full_env,
            cwd=cwd,
            stdin=subprocess.DEVNULL,
            stdout=stdout,
            stderr=stderr,
            text=True,
            encoding="utf-8",
            errors="replace",
        )
    return Process(args, full_env, cwd, stdout, stderr)


def _text_file():
    return tempfile.TemporaryFile("w+", encoding="utf-8", errors="replace")


def python(args, env=None, cwd=REPO, timeout=600):
    """`python <args>` (a script and its arguments, or "-c", code, ...) in a
    process of its own; `env`: the variables to add. Returns a
    subprocess.CompletedProcess (text stdout and stderr; not checked)."""
    with _text_file() as out, _text_file() as err:
        child = popen(args, env, cwd, stdout=out, stderr=err)
        try:
            child.wait(timeout)
        except subprocess.TimeoutExpired:
            child.kill()
            child.wait()
            raise
        streams = []
        for f in (out, err):
            f.seek(0)
            streams.append(f.read())
    return subprocess.CompletedProcess(child.args, child.returncode, *streams)


def free_ports(n):
    """`n` TCP ports on 127.0.0.1 that nothing listens on now (for the
    processes of a multi-process run to meet at)."""
    socks = [socket.socket() for _ in range(n)]
    for s in socks:
        s.bind(("127.0.0.1", 0))
    ports = [s.getsockname()[1] for s in socks]
    for s in socks:
        s.close()
    return ports


def run_script(script, args, timeout=900):
    """Runs `python <script> <args>` from the repository root; asserts that
    it exits 0, showing the end of its stderr when it does not, and returns
    the CompletedProcess."""
    proc = python([REPO / script, *args], timeout=timeout)
    assert proc.returncode == 0, proc.stderr[-4000:]
    return proc


# Prepended to the code `run_without_tensorflow` runs: the named top-level
# packages cannot be imported.
_BLOCK = """
import runpy, sys
class Block:
    def find_spec(self, name, path=None, target=None):
        if name.split(".")[0] in {blocked!r}:
            raise ImportError("blocked for this test: " + name)
sys.meta_path.insert(0, Block())
"""
TENSORFLOW_AND_KERAS = ("tensorflow", "keras", "tensorflow_text")


def run_without_tensorflow(
    args, code=None, timeout=300, blocked=TENSORFLOW_AND_KERAS, env=None
):
    """Runs `code` (with sys.argv[1:] = args), or else the script args[0]
    with the rest as its arguments, in a Python process where importing
    the `blocked` packages (TensorFlow, Keras and TensorFlow Text) fails;
    `env`: variables set for it. Returns the CompletedProcess (not
    checked)."""
    if code is None:
        code = (
            "sys.argv = sys.argv[1:]\n"
            "runpy.run_path(sys.argv[0], run_name='__main__')\n"
        )
    return subprocess.run(
        [sys.executable, "-c", _BLOCK.format(blocked=tuple(blocked)) + code]
        + list(args),
        capture_output=True,
        text=True,
        check=False,
        cwd=REPO,
        timeout=timeout,
        env=None if env is None else {**os.environ, **env},
    )


def folder_digests(folder):
    """{relative path: sha256} of every file under folder (symlinks followed
    for files, listed for folders): a user's folder before and after a run
    that must leave it unchanged."""
    out = {}
    for root, dirs, names in os.walk(folder):
        for name in dirs:
            path = os.path.join(root, name)
            if os.path.islink(path):
                out[os.path.relpath(path, folder)] = "link:" + os.readlink(path)
        for name in names:
            path = os.path.join(root, name)
            with open(path, "rb") as f:
                digest = hashlib.sha256(f.read()).hexdigest()
            out[os.path.relpath(path, folder)] = digest
    return out
