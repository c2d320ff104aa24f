#!/usr/bin/env bash
# Set up (first run only) and run the default test suite. Extra arguments go to
# pytest, e.g. `bash scripts/test.sh --run_slow` or `bash scripts/test.sh -k tokenization`.
source "$(dirname "${BASH_SOURCE[0]}")/env.sh"
python -m pytest tests "$@"
