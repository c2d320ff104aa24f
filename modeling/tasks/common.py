"""Pieces every task runner shares."""

from modeling.data import file_io

# The evaluation summary a task writes to its output folder.
EVAL_RESULTS_FILE = "eval_results.txt"
# Input shuffle seed when --random_seed is unset (resuming needs a fixed one).
DEFAULT_DATA_SEED = 12345


def write_eval_results(path, results):
    """Writes eval_results.txt as the original does: `key = value` lines
    sorted by key, each value as `str` gives it (`!s`: an f-string would
    print a numpy float32 as a Python float); atomically."""
    text = "".join(f"{k} = {results[k]!s}\n" for k in sorted(results))
    file_io.write_text(path, text)
