"""The ahead-of-time compiled kernels: built by the install, selected by default, free of numba.

``setup.py`` builds one extension module per ``src/mqstore/kernels/csrc/_nat_*.c``; on a machine
with a C compiler (every CI machine: ``scripts/setup.sh`` installs gcc) each must be importable.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import zlib

import crc32c
import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from mqstore.errors import InvalidArgumentError
from mqstore.kernels import backend

NAMES = backend.native_sources()


def test_sources_define_native_modules() -> None:
    assert "_nat_crc" in NAMES


@pytest.mark.parametrize("name", NAMES)
def test_native_module_is_built(name: str) -> None:
    if shutil.which("cc") is None and shutil.which("gcc") is None:
        pytest.skip("no C compiler on this machine: the install falls back to the numba kernels")
    assert backend.built(name) is not None, f"mqstore.kernels.{name} was not built: reinstall (bash scripts/setup.sh)"


def _run(code: str, **env: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          env={**os.environ, **env}, check=False)


def test_mode_is_read_from_the_environment() -> None:
    r = _run("from mqstore.kernels import crc; print(crc.crc32_spans.__name__)", MQSTORE_KERNELS="numba")
    assert r.returncode == 0, r.stderr
    assert r.stdout.strip() == "crc32_spans_numba"
    r = _run("from mqstore.kernels import backend; backend.mode()", MQSTORE_KERNELS="fortran")
    assert r.returncode != 0 and "MQSTORE_KERNELS" in r.stderr


def test_bad_mode_is_a_typed_error(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(backend.ENV, "jit")
    with pytest.raises(InvalidArgumentError):
        backend.mode()


def test_native_path_does_not_import_numba() -> None:
    if backend.built("_nat_crc") is None:
        pytest.skip("native kernels not built")
    code = ("import sys, numpy as np; from mqstore.kernels.crc import crc32_spans; "
            "print(crc32_spans(b'abcdef', np.array([1]), np.array([4]))[0], 'numba' in sys.modules)")
    r = _run(code, MQSTORE_KERNELS="auto")
    assert r.returncode == 0, r.stderr
    assert r.stdout.split() == [str(zlib.crc32(b"bcde")), "False"]


@given(st.binary(max_size=3000), st.integers(0, 2**32 - 1))
def test_native_checksums_match_the_libraries_with_and_without_isal(data: bytes, seed: int) -> None:
    mod = backend.built("_nat_crc")
    if mod is None:
        pytest.skip("native kernels not built")
    try:
        for lib in (None, backend._checksum_library()):  # the C tables, then ISA-L bound by symbol
            mod.bind_checksums(lib)
            assert mod.one(data, 0, 0) == zlib.crc32(data)
            assert mod.one(data, 0, 1) == crc32c.crc32c(data)
            cut = seed % (len(data) + 1)  # continuing a checksum over two parts
            assert mod.one(data[cut:], mod.one(data[:cut], 0, 0), 0) == zlib.crc32(data)
            assert mod.one(data[cut:], mod.one(data[:cut], 0, 1), 1) == crc32c.crc32c(data)
    finally:
        mod.bind_checksums(backend._checksum_library())


def test_native_spans_reject_spans_outside_the_buffer() -> None:
    mod = backend.built("_nat_crc")
    if mod is None:
        pytest.skip("native kernels not built")
    out = np.zeros(1, np.int64)
    with pytest.raises(ValueError):
        mod.spans(b"abc", np.array([2]), np.array([5]), out, 0)
    with pytest.raises(TypeError):
        mod.spans(b"abc", np.array([2], np.int32), np.array([1]), out, 0)
