#!/usr/bin/env bash
# Sets up everything mqstore needs on a fresh Debian machine with Python 3.11:
#   * Java 17 (for PySpark) through apt-get when `java` is missing,
#   * Chromium (the report pages are checked in a real headless browser) through apt-get when missing,
#   * gcc and the Python headers through apt-get when missing (the native kernels are C, compiled by pip),
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

# The native kernels (C, src/mqstore/kernels/csrc) are compiled by pip with the machine's C
# compiler and need the Python headers: install both when missing (without them the install still
# works and the kernels run on numba, slower to start).
if ! command -v cc >/dev/null 2>&1 || ! command -v make >/dev/null 2>&1; then
    log "no C compiler: installing gcc with apt-get (the native kernels are compiled at install)"
    SUDO=""
    if [ "$(id -u)" != "0" ]; then SUDO="sudo"; fi
    export DEBIAN_FRONTEND=noninteractive
    { $SUDO apt-get update -q && $SUDO apt-get install -y -q --no-install-recommends gcc make libc6-dev; } \
        || log "could not install gcc: the kernels will run on numba"
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

if ! "$PY" -c 'import sysconfig, os, sys; sys.exit(not os.path.exists(os.path.join(sysconfig.get_paths()["include"], "Python.h")))'; then
    pyver="$("$PY" -c 'import sys; print(f"{sys.version_info[0]}.{sys.version_info[1]}")')"
    log "Python headers missing: installing python${pyver}-dev with apt-get (the native kernels need them)"
    SUDO=""
    if [ "$(id -u)" != "0" ]; then SUDO="sudo"; fi
    export DEBIAN_FRONTEND=noninteractive
    { $SUDO apt-get update -q && $SUDO apt-get install -y -q --no-install-recommends "python${pyver}-dev"; } \
        || log "could not install the Python headers: the kernels will run on numba"
fi
# With a compiler present a failed build of the native kernels is an error, not a silent fallback.
if command -v cc >/dev/null 2>&1; then export MQSTORE_REQUIRE_NATIVE=1; fi

stamp=".venv/.mqstore-installed"
# reinstall when the package metadata or the native kernels' sources changed
want="$(cat pyproject.toml setup.py src/mqstore/kernels/csrc/* | sha256sum | cut -d' ' -f1)"
if [ ! -f "$stamp" ] || [ "$(cat "$stamp")" != "$want" ] || ! .venv/bin/python -c 'import mqstore, pyspark' 2>/dev/null \
        || { [ -n "${MQSTORE_REQUIRE_NATIVE:-}" ] && ! .venv/bin/python -c 'from mqstore.kernels import backend; import sys; sys.exit(any(backend.built(n) is None for n in backend.native_sources()))'; }; then
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
