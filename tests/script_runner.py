"""Runs one of the repository's command-line scripts in a subprocess, as a
user would, from the repository root."""

import hashlib
import os
import pathlib
import subprocess
import sys

REPO = pathlib.Path(__file__).resolve().parents[1]


def run_script(script, args, timeout=900):
    """Runs `python <script> <args>`; asserts that it exits 0, showing the
    end of its stderr when it does not, and returns the CompletedProcess."""
    proc = subprocess.run(
        [sys.executable, str(REPO / script), *args],
        check=False,
        capture_output=True,
        text=True,
        cwd=REPO,
        timeout=timeout,
    )
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
