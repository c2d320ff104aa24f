#!/usr/bin/env bash
# Set up (first run only) and run the default test suite. Extra arguments go to
# pytest, e.g. `bash scripts/test.sh --run_slow` or `bash scripts/test.sh -k tokenization`.
source "$(dirname "${BASH_SOURCE[0]}")/env.sh"
# One worker per core (pytest-xdist), each taking whole test files, so that a
# file's module fixtures are built once, the longest files first
# (tests/conftest.py's LONGEST_FILES); `-n 0` runs in this process.
python -m pytest tests -n "${PYTEST_WORKERS:-logical}" --dist loadfile \
  --no-loadscope-reorder "$@"
