#!/usr/bin/env bash
# Sets everything up, then runs the linter and the whole test suite (Spark tests included).
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
lint=(src tests); [ -d benchmarks ] && lint+=(benchmarks)
.venv/bin/ruff check "${lint[@]}"
exec .venv/bin/python -m pytest -q "$@"
