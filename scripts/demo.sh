#!/usr/bin/env bash
# Sets everything up, then runs the main job on the embedded default (./mqstore-data).
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
exec .venv/bin/mqstore demo --data ./mqstore-data "$@"
