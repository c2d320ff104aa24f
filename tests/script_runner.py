"""Runs one of the repository's command-line scripts in a subprocess, as a
user would, from the repository root."""

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


# Prepended to the code `run_without_tensorflow` runs: TensorFlow, Keras and
# TensorFlow Text cannot be imported.
_BLOCK_TENSORFLOW = """
import runpy, sys
class Block:
    def find_spec(self, name, path=None, target=None):
        if name.split(".")[0] in ("tensorflow", "keras", "tensorflow_text"):
            raise ImportError("blocked for this test: " + name)
sys.meta_path.insert(0, Block())
"""


def run_without_tensorflow(args, code=None, timeout=300):
    """Runs `code` (with sys.argv[1:] = args), or else the script args[0]
    with the rest as its arguments, in a Python process where importing
    TensorFlow, Keras or TensorFlow Text fails; returns the
    CompletedProcess (not checked)."""
    if code is None:
        code = (
            "sys.argv = sys.argv[1:]\n"
            "runpy.run_path(sys.argv[0], run_name='__main__')\n"
        )
    return subprocess.run(
        [sys.executable, "-c", _BLOCK_TENSORFLOW + code, *args],
        capture_output=True,
        text=True,
        check=False,
        cwd=REPO,
        timeout=timeout,
    )
