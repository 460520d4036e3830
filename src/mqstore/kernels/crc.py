"""zlib CRC-32 of many spans of one buffer (the RocketMQ body CRC), three ways.

* :func:`crc32_spans` – the fast path: the native module ``_nat_crc`` when built (ISA-L's folding
  CRC bound by symbol, else a slice-by-8 table in C), else the numba kernels of
  :mod:`mqstore.kernels.crc_nb` (ISA-L called by symbol from a compiled loop, else slice-by-16);
* :func:`mqstore.kernels.crc_nb.crc32_span` – one span, slice-by-8 on :data:`CRC_TABLE`
  (numba kernels that checksum inline);
* :func:`crc32_spans_py` – the twin: ``zlib.crc32`` per span.

:data:`crc32` is the one-shot CRC-32 of a bytes-like object for Python callers (ISA-L when
installed, same values as ``zlib.crc32``).
"""

from __future__ import annotations

import zlib
from typing import Any

import numpy as np

from mqstore.errors import InvalidArgumentError
from mqstore.kernels.backend import native, numba_module
from mqstore.kernels.buffers import as_u8
from mqstore.kernels.registry import register

try:  # ISA-L's CRC-32 (carry-less multiplication): the same values as zlib.crc32, 3-4x faster on 1 KiB
    from isal.isal_zlib import crc32 as crc32
except ImportError:  # pragma: no cover - isal is a dependency; zlib is the reference twin
    from zlib import crc32 as crc32


def _make_crc_table() -> np.ndarray:
    t = np.zeros((8, 256), np.int64)
    for n in range(256):
        c = n
        for _ in range(8):
            c = (c >> 1) ^ 0xEDB88320 if c & 1 else c >> 1
        t[0, n] = c
    for k in range(1, 8):
        prev = t[k - 1]
        t[k] = (prev >> 8) ^ t[0, prev & 0xFF]
    return t


CRC_TABLE = _make_crc_table()


def _make_crc_table16() -> np.ndarray:
    t = np.zeros((16, 256), np.uint32)
    t[:8] = CRC_TABLE.astype(np.uint32)
    for k in range(8, 16):
        prev = t[k - 1]
        t[k] = (prev >> 8) ^ t[0, prev & 0xFF]
    return t.ravel().copy()


_CRC_FLAT = _make_crc_table16()  # slice-by-16, uint32: 16 KiB, stays in L1 next to the data


def _nb() -> Any:
    return numba_module("mqstore.kernels.crc_nb")


def _spans(buf: object, starts: np.ndarray, lengths: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    u8 = as_u8(buf)
    s = np.ascontiguousarray(starts, np.int64)
    ln = np.ascontiguousarray(lengths, np.int64)
    if s.shape != ln.shape:
        raise InvalidArgumentError("crc32_spans: starts and lengths differ in shape")
    if len(s) and (int(s.min()) < 0 or int(ln.min()) < 0 or int((s + ln).max()) > len(u8)):
        raise InvalidArgumentError(f"crc32_spans: a span lies outside the buffer of {len(u8)} bytes")
    return u8, s, ln


def crc32_spans_numba(buf: object, starts: np.ndarray, lengths: np.ndarray, *, use_isal: bool | None = None) -> np.ndarray:
    """zlib CRC-32 of many spans ``buf[starts[i] : starts[i] + lengths[i]]`` (int64 array), numba path.

    ISA-L's folding CRC when available (``use_isal=None``), else (or with ``use_isal=False``) the
    slice-by-16 table kernel; both give zlib's values."""
    u8, s, ln = _spans(buf, starts, lengths)
    out = np.empty(len(s), np.int64)
    nb = _nb()
    if len(s) and (nb.HAVE_ISAL_CRC if use_isal is None else use_isal and nb.HAVE_ISAL_CRC):
        nb._crc_spans_isal(u8, s, ln, out)
    else:
        nb._crc_spans_kernel(u8, s, ln, _CRC_FLAT, out)
    return out


def crc32_spans_native(buf: object, starts: np.ndarray, lengths: np.ndarray, *, use_isal: bool | None = None) -> np.ndarray:
    """:func:`crc32_spans_numba` in C (``_nat_crc``; ``use_isal=False`` only chooses the table path
    of the numba kernels and is ignored here)."""
    u8, s, ln = _spans(buf, starts, lengths)
    out = np.empty(len(s), np.int64)
    if len(s):
        _NAT_CRC.spans(u8, s, ln, out, 0)
    return out


def crc32_spans_py(buf: object, starts: np.ndarray, lengths: np.ndarray, *, use_isal: bool | None = None) -> np.ndarray:
    """Twin of :func:`crc32_spans`: ``zlib.crc32`` of each span (``use_isal`` is ignored)."""
    u8, s, ln = _spans(buf, starts, lengths)
    mv = memoryview(u8)
    return np.array([zlib.crc32(mv[a : a + n]) for a, n in zip(s.tolist(), ln.tolist(), strict=True)], np.int64)


_NAT_CRC = native("_nat_crc")
crc32_spans = crc32_spans_native if _NAT_CRC is not None else crc32_spans_numba
register("crc.crc32_spans", crc32_spans_numba, crc32_spans_py,
         native=crc32_spans_native if _NAT_CRC is not None else None)
