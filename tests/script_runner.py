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
