#!/usr/bin/env bash
# Install everything, then run the whole suite: lint, types, and every test (real FUSE mounts
# included; under CI=true a missing /dev/fuse fails instead of skipping), on one pytest-xdist
# worker per core (pyproject.toml's addopts; `-n 0` runs them in one process).
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
PYTHON="${PYTHON:-python3}"
"$PYTHON" -m ruff check acxfs tests scripts
"$PYTHON" -m mypy acxfs scripts tests
"$PYTHON" -m pytest -q "$@"
