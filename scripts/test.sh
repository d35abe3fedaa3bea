#!/usr/bin/env bash
# Runs every test: lint, unit tests, the demo (scripts/demo.sh in a fresh clone)
# and every molecule scenario, in that order.
# Sets up what it needs on a fresh Debian/Ubuntu machine (as root): a Python
# venv from requirements.txt, a Docker engine, the node images.
#   bash scripts/test.sh                 # everything
#   bash scripts/test.sh -k unit         # extra arguments go to pytest
set -euo pipefail
. "$(dirname "$0")/lib.sh"
cd "$ROOT"

t0=$(date +%s)
ensure_venv
ensure_docker
ensure_images debian11 debian12 debian13 forky ubuntu2204 ubuntu2404
echo "timing: setup $(( $(date +%s) - t0 ))s"

export PATH="$VENV/bin:$PATH"
exec pytest tests/test_lint.py tests/unit tests/demo tests/molecule "$@"
