#!/usr/bin/env bash
# Sets up everything mqstore needs on a fresh Debian machine with Python 3.11:
#   * Java 17 (for PySpark) through apt-get when `java` is missing,
#   * Chromium (the report pages are checked in a real headless browser) through apt-get when missing,
#   * a virtual environment in .venv with mqstore installed (editable) plus its Spark and test extras.
# Safe to run again: it only reinstalls when pyproject.toml changed since the last run.
set -euo pipefail
cd "$(dirname "$0")/.."

log() { printf '[setup] %s\n' "$*" >&2; }

if ! command -v java >/dev/null 2>&1; then
    log "java not found: installing openjdk-17-jre-headless with apt-get"
    SUDO=""
    if [ "$(id -u)" != "0" ]; then SUDO="sudo"; fi
    export DEBIAN_FRONTEND=noninteractive
    $SUDO apt-get update -q
    $SUDO apt-get install -y -q --no-install-recommends openjdk-17-jre-headless procps
fi

if ! command -v chromium >/dev/null 2>&1 && ! command -v chromium-browser >/dev/null 2>&1; then
    log "chromium not found: installing it with apt-get (the report page test drives it with Playwright)"
    SUDO=""
    if [ "$(id -u)" != "0" ]; then SUDO="sudo"; fi
    export DEBIAN_FRONTEND=noninteractive
    # not fatal: without a browser only that one test is skipped (with its reason)
    { $SUDO apt-get update -q && $SUDO apt-get install -y -q --no-install-recommends chromium; } \
        || log "could not install chromium: the browser test will be skipped"
fi

PY="${PYTHON:-}"
if [ -z "$PY" ]; then
    for cand in python3.11 python3.12 python3.13 python3; do
        if command -v "$cand" >/dev/null 2>&1 && "$cand" -c 'import sys; sys.exit(sys.version_info < (3, 11))'; then
            PY="$cand"; break
        fi
    done
fi
[ -n "$PY" ] || { echo "setup: Python >= 3.11 is required" >&2; exit 1; }

if [ ! -x .venv/bin/python ]; then
    log "creating .venv with $PY"
    "$PY" -m venv .venv
fi

stamp=".venv/.mqstore-installed"
want="$(sha256sum pyproject.toml | cut -d' ' -f1)"
if [ ! -f "$stamp" ] || [ "$(cat "$stamp")" != "$want" ] || ! .venv/bin/python -c 'import mqstore, pyspark' 2>/dev/null; then
    log "installing mqstore and its dependencies into .venv (first time: about a minute)"
    .venv/bin/python -m pip install -q --upgrade pip
    .venv/bin/python -m pip install -q -e ".[spark,test]"
    echo "$want" > "$stamp"
fi
# Byte-compile the sources once (an editable install leaves none, and with PYTHONDONTWRITEBYTECODE
# every CLI start would compile them again: ~50 ms of a one-shot command).  Stale files are
# ignored by Python, so this is only a speed-up.
.venv/bin/python -m compileall -q src/mqstore >/dev/null || true
# Compile the numba kernels once now (cached on disk next to their sources) so that the demo and
# the first operator commands run compiled code from the start: ~1 minute the first time, a few
# seconds when the cache is already there.  A failure here is reported, not fatal: the kernels
# then compile on first use (and tests/test_warmup.py fails, telling why).
.venv/bin/mqstore warm-up || log "warm-up failed: the kernels will compile on first use"
