"""The folder a benchmark writes its runs into (--output_root).

Benchmarks start runs afresh by deleting their own earlier run folders
there. So the folder is claimed first: a new or empty folder gets a marker
file; one that holds files and no marker is someone else's, and the
benchmark stops before deleting anything in it.
"""

import pathlib
import shutil

MARKER = ".bench_output_root"


def claim(root, clear=False):
    """Makes `root` (a pathlib.Path or str) this benchmark's folder and
    returns it as a Path; `clear`: empty it first (only a claimed one).

    Raises:
      SystemExit: the folder holds files and was not made by a benchmark.
    """
    root = pathlib.Path(root)
    if root.exists() and not root.is_dir():
        raise SystemExit(f"--output_root={root} is a file, not a folder")
    if root.is_dir() and any(root.iterdir()) and not (root / MARKER).exists():
        raise SystemExit(
            f"--output_root={root} holds files a benchmark did not write, and "
            "benchmarks delete their run folders there: choose a new folder"
        )
    if clear and root.is_dir():
        shutil.rmtree(root)
    root.mkdir(parents=True, exist_ok=True)
    (root / MARKER).touch()
    return root
