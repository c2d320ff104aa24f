"""The notebook test harness: run a notebook of notebooks/ as a user would.

`run_notebook` executes a notebook top to bottom with papermill in a fresh
`python3` kernel, with the values of its `parameters` cell replaced, and
returns the executed notebook; the helpers below read its outputs. The kernel
imports this checkout (PYTHONPATH) and sees no GPU, so a run is the same on
every machine. A failing cell fails the test with that cell's error.

    nb = notebooks.run_notebook(notebooks.NOTEBOOKS / "x.ipynb",
                                {"steps": 2}, cwd=tmp_path)
    assert "accuracy" in notebooks.output_text(nb)

Tests using it skip when papermill is not installed (the setup.py extra
`notebooks`).
"""

import ast
import os
import pathlib
import re
import shutil

import pytest
from constants import REPO_ROOT

NOTEBOOKS = REPO_ROOT / "notebooks"
# The papermill convention: the cell whose values a run replaces.
PARAMETERS_TAG = "parameters"
# Where papermill puts the replacement values (a cell after `parameters`).
INJECTED_TAG = "injected-parameters"
KERNEL = "python3"
_ANSI_ESCAPE = re.compile(r"\x1b\[[0-9;]*m")


def run_notebook(path, parameters, cwd, timeout=900, env=None):
    """Executes a notebook with papermill; returns the executed notebook.

    Args:
      path: the .ipynb file.
      parameters: dict of the `parameters` cell's names to their values for
        this run (papermill injects them in a cell after it).
      cwd: the kernel's working directory; the executed copy is written
        there as `<name>.executed.ipynb` (kept for debugging).
      timeout: seconds allowed per cell.
      env: extra environment variables for the kernel.

    Returns:
      the executed notebook (an nbformat NotebookNode, outputs included).
    """
    papermill = pytest.importorskip("papermill")
    pytest.importorskip("ipykernel")
    path = pathlib.Path(path)
    # papermill injects unknown names without a word: a misspelt parameter
    # would silently leave the notebook's default in place.
    unknown = set(parameters) - set(parameter_names(read_notebook(path)))
    assert not unknown, f"{path.name} has no parameter {sorted(unknown)}"
    out = pathlib.Path(cwd) / f"{path.stem}.executed.ipynb"
    pythonpath = os.environ.get("PYTHONPATH")
    kernel_env = {
        # The kernel imports this checkout, not another install.
        "PYTHONPATH": os.pathsep.join(
            p for p in (str(REPO_ROOT), pythonpath) if p
        ),
        "KERAS_BACKEND": "tensorflow",
        "TF_CPP_MIN_LOG_LEVEL": "2",
        # CPU only: the same numbers and the same run on every test machine.
        "CUDA_VISIBLE_DEVICES": "-1",
        **(env or {}),
    }
    # The kernel inherits this process's environment at its start.
    saved = {name: os.environ.get(name) for name in kernel_env}
    os.environ.update(kernel_env)
    try:
        papermill.execute_notebook(
            str(path),
            str(out),
            parameters=parameters,
            cwd=str(cwd),
            kernel_name=KERNEL,
            execution_timeout=timeout,
            progress_bar=False,
        )
    except papermill.PapermillExecutionError as e:
        # IPython colours its tracebacks; pytest's report is plain text.
        trace = _ANSI_ESCAPE.sub("", "\n".join(e.traceback[-5:]))
        pytest.fail(
            f"{path.name}: cell {e.exec_count} raised {e.ename}: "
            f"{e.evalue}\n{trace}",
            pytrace=False,
        )
    finally:
        for name, value in saved.items():
            if value is None:
                os.environ.pop(name, None)
            else:
                os.environ[name] = value
    return read_notebook(out)


def read_notebook(path):
    """A notebook file as an nbformat NotebookNode (validated)."""
    import nbformat

    nb = nbformat.read(str(path), as_version=4)
    nbformat.validate(nb)
    return nb


def parameter_names(nb):
    """The names the `parameters` cell assigns, in order.

    Raises:
      AssertionError: no such cell, or one that is not plain assignments.
    """
    cells = tagged_cells(nb, PARAMETERS_TAG)
    assert len(cells) == 1, f"{len(cells)} cells tagged {PARAMETERS_TAG!r}"
    names = []
    for statement in ast.parse(cells[0].source).body:
        assert isinstance(statement, (ast.Assign, ast.AnnAssign)), (
            f"line {statement.lineno} of the parameters cell is not an "
            "assignment"
        )
        targets = getattr(statement, "targets", None) or [statement.target]
        names += [t.id for t in targets if isinstance(t, ast.Name)]
    return names


def tagged_cells(nb, tag):
    """The cells carrying a tag (papermill keeps tags in metadata.tags)."""
    return [c for c in nb.cells if tag in c.get("metadata", {}).get("tags", [])]


def code_cells(nb):
    return [c for c in nb.cells if c.cell_type == "code"]


def cell_text(cell, stderr=False):
    """What a code cell printed: stdout (and stderr: logs, warnings, when
    asked) and text/plain results."""
    parts = []
    for output in cell.get("outputs", []):
        if output.output_type == "stream":
            if stderr or output.name == "stdout":
                parts.append(output.text)
        elif output.output_type in ("execute_result", "display_data"):
            parts.append(output.get("data", {}).get("text/plain", ""))
    return "".join(parts)


def output_text(nb, stderr=False):
    """Everything the notebook's code cells printed, in order."""
    return "".join(cell_text(c, stderr) for c in code_cells(nb))


# Rows of the ../shared MRPC files a notebook run uses: training, dev, test.
MRPC_SLICE = {"train": 32, "dev": 16, "test": 8}


def mrpc_slice(out, shared_dir):
    """A small MRPC folder in `out` for a notebook run: the first
    MRPC_SLICE rows of ../shared/data/glue/MRPC, else (../shared absent)
    the repository's tiny MRPC files. Returns `out`."""
    out = pathlib.Path(out)
    out.mkdir(parents=True, exist_ok=True)
    shared = shared_dir and pathlib.Path(shared_dir) / "data/glue/MRPC"
    for name, rows in MRPC_SLICE.items():
        if shared and shared.is_dir():
            with open(shared / f"{name}.tsv", encoding="utf-8") as f:
                lines = f.readlines()
            with open(out / f"{name}.tsv", "w", encoding="utf-8") as f:
                f.writelines(lines[: rows + 1])  # The header, then rows.
        else:
            shutil.copy(
                REPO_ROOT / "tests/testdata/cls_mrpc" / f"{name}.tsv", out
            )
    return out
