"""Runs the repository's command-line scripts (and other Python programs)
in processes of their own, as a user would, from the repository root.

`python(args)` is `python <args>` in a new process. Most of such a
process's start is importing TensorFlow and Keras (about 5 s of a 2-core
test machine, for each of the suite's dozens of runs), so a run whose
environment is the test process's own is forked from a warm interpreter
that imported them once (multiprocessing's fork server): the program
still runs as `__main__` in a process of its own, with its own argv,
stdout, stderr and exit status; only the import is shared. A run with
other environment variables (a backend, XLA or TensorFlow settings read at
import) gets a fresh interpreter.
"""

import atexit
import hashlib
import multiprocessing
import os
import pathlib
import runpy
import subprocess
import sys
import tempfile
import traceback

REPO = pathlib.Path(__file__).resolve().parents[1]

# What the warm interpreter imports before it forks.
_PRELOAD = ("numpy", "tensorflow", "tensorflow_text", "keras")
# Variables read when those are imported: a run that sets any of them
# differently needs an interpreter of its own.
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
_WARM = {}


def _import_time_env(env):
    return {k: v for k, v in env.items() if k.startswith(_IMPORT_TIME_PREFIXES)}


def _warm_context(env):
    """The warm interpreter's multiprocessing context (it starts with the
    first run), or None where `env` differs from its import-time variables
    or the platform has no fork server."""
    if "forkserver" not in multiprocessing.get_all_start_methods():
        return None
    if not _WARM:
        context = multiprocessing.get_context("forkserver")
        context.set_forkserver_preload(list(_PRELOAD))
        _WARM["context"] = context
        _WARM["env"] = _import_time_env(os.environ)
    if _import_time_env(env) != _WARM["env"]:
        return None
    return _WARM["context"]


def _run_forked(args, env, cwd, out_path, err_path):
    """In the forked process: `python <args>` with this env and cwd."""
    for fd, path in ((1, out_path), (2, err_path)):
        target = os.open(path, os.O_WRONLY | os.O_TRUNC)
        os.dup2(target, fd)
        os.close(target)
    sys.stdout = open(1, "w", encoding="utf-8", closefd=False)
    sys.stderr = open(2, "w", encoding="utf-8", closefd=False, buffering=1)
    os.environ.clear()
    os.environ.update(env)
    os.chdir(cwd)
    if args[0] == "-c":
        sys.argv = ["-c", *args[2:]]
        sys.path[0] = ""
    else:
        sys.argv = list(args)
        sys.path[0] = os.path.dirname(os.path.abspath(args[0]))
    extra = [p for p in env.get("PYTHONPATH", "").split(os.pathsep) if p]
    sys.path[1:1] = [p for p in extra if p not in sys.path]
    code = 0
    try:
        if args[0] == "-c":
            exec(compile(args[1], "<string>", "exec"), {"__name__": "__main__"})
        else:
            runpy.run_path(args[0], run_name="__main__")
    except SystemExit as e:
        code = e.code
    except BaseException:
        traceback.print_exc()
        code = 1
    atexit._run_exitfuncs()
    sys.exit(code)


def python(args, env=None, cwd=REPO, timeout=600):
    """`python <args>` (a script and its arguments, or "-c", code, ...) in a
    process of its own; `env`: the variables to add. Returns a
    subprocess.CompletedProcess (text stdout and stderr; not checked)."""
    args = [str(a) for a in args]
    full_env = {**os.environ, **(env or {})}
    full_env.pop("PYTEST_CURRENT_TEST", None)
    context = _warm_context(full_env)
    if context is None:
        return subprocess.run(
            [sys.executable, *args],
            env=full_env,
            cwd=cwd,
            capture_output=True,
            text=True,
            check=False,
            timeout=timeout,
        )
    with tempfile.TemporaryDirectory() as tmp:
        out, err = os.path.join(tmp, "stdout"), os.path.join(tmp, "stderr")
        for path in (out, err):
            open(path, "w").close()
        child = context.Process(
            target=_run_forked, args=(args, full_env, str(cwd), out, err)
        )
        child.start()
        child.join(timeout)
        if child.exitcode is None:
            child.kill()
            child.join()
            raise subprocess.TimeoutExpired([sys.executable, *args], timeout)
        with open(out, encoding="utf-8", errors="replace") as f:
            stdout = f.read()
        with open(err, encoding="utf-8", errors="replace") as f:
            stderr = f.read()
    return subprocess.CompletedProcess(
        [sys.executable, *args], child.exitcode, stdout, stderr
    )


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
