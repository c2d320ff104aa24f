"""The code's format and lint (ruff, from the `test` extra; its rules are
pyproject.toml's): a change that breaks either fails the default suite,
and so CI."""

import subprocess
import sys

import pytest
import script_runner

pytest.importorskip("ruff", reason="ruff is in the `test` extra")


@pytest.mark.parametrize(
    "command", [["check"], ["format", "--check"]], ids=["lint", "format"]
)
def test_ruff(command):
    proc = subprocess.run(
        [sys.executable, "-m", "ruff", *command, "."],
        capture_output=True,
        text=True,
        check=False,
        cwd=script_runner.REPO,
    )
    assert proc.returncode == 0, (proc.stdout + proc.stderr)[-4000:]
