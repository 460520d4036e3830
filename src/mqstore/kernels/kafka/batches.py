"""Kafka ``.log`` record batches: the header walk into columns and the batch checksums.

* :func:`scan_batches` – walk the batch headers of a ``.log`` buffer (spec §2.4) into the columns
  of :data:`SCAN_FIELDS` (numba); twin :func:`scan_batches_py`;
* :func:`check_crcs` – CRC-32C (v2) / CRC-32 (legacy) of many batches, in byte-balanced parts on
  several threads; twin :func:`check_crcs_py`.

The compiled walk writes the columns through one :class:`BatchColumns` argument (a ``NamedTuple``
of the arrays, named as in :data:`SCAN_FIELDS`).
"""

from __future__ import annotations

import zlib
from itertools import pairwise
from typing import Any, NamedTuple

import numpy as np

from mqstore.formats.kafka.batch import crc32c as crc32c_of
from mqstore.kernels.backend import native, numba_module
from mqstore.kernels.buffers import as_u8
from mqstore.kernels.kafka.stops import STOP_BAD_SIZE, STOP_END, STOP_TORN  # the stop reasons of scan_batches
from mqstore.kernels.registry import register
from mqstore.kernels.threads import default_threads, run_parallel

SCAN_FIELDS = (
    "position",
    "size",
    "base_offset",
    "last_offset",
    "max_timestamp",
    "base_timestamp",
    "partition_leader_epoch",
    "magic",
    "attributes",
    "record_count",
    "crc",
)


class BatchColumns(NamedTuple):
    """The scan columns, one entry per batch (legacy messages: ``base_offset`` −1, ``last_offset``
    the stored offset, ``record_count`` 1, timestamps −1 for magic 0)."""

    position: np.ndarray  # int64, where the batch starts
    size: np.ndarray  # int32, bytes including the 12-byte offset + length prefix
    base_offset: np.ndarray  # int64
    last_offset: np.ndarray  # int64
    max_timestamp: np.ndarray  # int64
    base_timestamp: np.ndarray  # int64
    partition_leader_epoch: np.ndarray  # int32
    magic: np.ndarray  # int8
    attributes: np.ndarray  # int32
    record_count: np.ndarray  # int32
    crc: np.ndarray  # uint32, as stored

    @classmethod
    def of(cls, cols: dict[str, np.ndarray]) -> BatchColumns:
        """The columns of a scan dict as one kernel argument."""
        return cls(*(cols[f] for f in SCAN_FIELDS))


assert BatchColumns._fields == SCAN_FIELDS


#: (name, numpy dtype) of each scan column
COLUMN_DTYPES = tuple(
    (name, np.dtype(np.uint32 if name == "crc" else np.int8 if name == "magic" else np.int32 if name in (
        "size", "partition_leader_epoch", "attributes", "record_count") else np.int64))
    for name in SCAN_FIELDS)


def empty_columns(n: int) -> dict[str, np.ndarray]:
    return {name: np.zeros(n, dtype) for name, dtype in COLUMN_DTYPES}


def _nb() -> Any:
    return numba_module("mqstore.kernels.kafka.batches_nb")


def _scan_result(cols: dict[str, np.ndarray], n: int, stop: int, reason: int) -> dict[str, Any]:
    out: dict[str, Any] = dict(cols)
    out.update(valid_end=int(stop), stop_reason=int(reason), count=int(n))
    return out


def scan_batches_numba(buf: Any, start: int = 0) -> dict[str, Any]:
    """Walk batch headers from ``start`` (numba kernels of :mod:`.batches_nb`).  Returns one numpy
    array per field of :data:`SCAN_FIELDS` plus ``valid_end`` (where the walk stopped),
    ``stop_reason`` (``STOP_END``/``STOP_TORN``/``STOP_BAD_SIZE``) and ``count``.

    For legacy (magic 0/1) messages ``base_offset`` is −1, ``last_offset`` the stored offset,
    ``record_count`` 1 and timestamps −1 for magic 0.  Nothing is validated here.
    """
    a = as_u8(buf)
    end = a.shape[0]
    nb = _nb()
    n, stop, reason = nb._scan_count(a, start, end)
    cols = empty_columns(n)
    if n:
        nb._scan_fill(a, start, n, BatchColumns.of(cols))
    return _scan_result(cols, n, stop, reason)


def scan_batches_native(buf: Any, start: int = 0) -> dict[str, Any]:
    """:func:`scan_batches_numba` in C (``_nat_kafka``)."""
    a = as_u8(buf)
    n, stop, reason = _NAT.scan_count(a, start)
    cols = empty_columns(n)
    if n:
        _NAT.scan_fill(a, start, n, *BatchColumns.of(cols))
    return _scan_result(cols, n, stop, reason)


def scan_batches_py(buf: Any, start: int = 0) -> dict[str, Any]:
    """Pure-Python twin of :func:`scan_batches` (same output)."""
    mv = memoryview(buf).cast("B") if not isinstance(buf, np.ndarray) else memoryview(as_u8(buf))
    end = len(mv)
    rows = []
    p = start
    reason = STOP_END
    while True:
        if p >= end - 17:
            reason = STOP_END
            break
        s = int.from_bytes(mv[p + 8 : p + 12], "big", signed=True)
        if s < 14:
            reason = STOP_BAD_SIZE
            break
        if p > end - 12 - s:
            reason = STOP_TORN
            break
        total = s + 12
        m = int.from_bytes(mv[p + 16 : p + 17], "big", signed=True)
        off = int.from_bytes(mv[p : p + 8], "big", signed=True)
        if m >= 2:
            epoch = int.from_bytes(mv[p + 12 : p + 16], "big", signed=True)
            if total >= 61 and p + 61 <= end:
                row = (
                    p, total, off, off + int.from_bytes(mv[p + 23 : p + 27], "big", signed=True),
                    int.from_bytes(mv[p + 35 : p + 43], "big", signed=True),
                    int.from_bytes(mv[p + 27 : p + 35], "big", signed=True), epoch, m,
                    int.from_bytes(mv[p + 21 : p + 23], "big"),
                    int.from_bytes(mv[p + 57 : p + 61], "big", signed=True),
                    int.from_bytes(mv[p + 17 : p + 21], "big"),
                )
            else:
                c = int.from_bytes(mv[p + 17 : p + 21], "big") if p + 21 <= end else 0
                row = (p, total, off, off, -1, -1, epoch, m, 0, 0, c)
        else:
            ts = int.from_bytes(mv[p + 18 : p + 26], "big", signed=True) if m == 1 and s >= 22 else -1
            row = (p, total, -1, off, ts, ts, -1, m, mv[p + 17], 1, int.from_bytes(mv[p + 12 : p + 16], "big"))
        rows.append(row)
        p += total
    cols = empty_columns(len(rows))
    for j, name in enumerate(SCAN_FIELDS):
        if rows:
            cols[name][:] = [r[j] for r in rows]
    out: dict[str, Any] = dict(cols)
    out.update(valid_end=p, stop_reason=reason, count=len(rows))
    return out




# ----------------------------------------------------------------------------- CRC
def check_crcs(buf: Any, scan: dict[str, Any], *, threads: int | None = None) -> np.ndarray:
    """``True`` per scanned batch whose size and checksum are valid (Kafka ``ensureValid``).

    v2: size ≥ 61 and CRC-32C of ``[21, end)`` equals the stored CRC; legacy: size field ≥ 14
    and CRC-32 of magic..end; unknown magic: invalid.  The checksum is C code (``crc32c``), the
    loop is Python – it is one call per batch.  Large scans are split in byte-balanced parts
    checked by ``threads`` threads (default: the CPUs), the CRC-32C calls releasing the GIL.
    Twin: :func:`check_crcs_py`.
    """
    mv = memoryview(buf).cast("B") if not isinstance(buf, np.ndarray) else memoryview(as_u8(buf))
    n = scan["count"]
    ok = np.zeros(n, dtype=bool)
    pos = scan["position"][:n]
    # (the thread count is only looked up for scans large enough to split: os.cpu_count() alone
    # costs ~15 µs, as much as checking a 16 KiB batch — appends check one batch per call)
    parts = 1 if n < 2 * PARALLEL_MIN_BATCHES else min(default_threads() if threads is None else max(1, threads),
                                                       n // PARALLEL_MIN_BATCHES)
    if parts <= 1 or n == 0:
        _check_crc_range(mv, scan, ok, 0, n, 0)
        return ok
    ends = pos + scan["size"][:n]
    total = int(ends[-1] - pos[0])
    cuts = [0, *np.searchsorted(ends, pos[0] + total * np.arange(1, parts) // parts).tolist(), n]
    run_parallel(_check_crc_range, [(mv, scan, ok, a, b, 1) for a, b in pairwise(cuts) if b > a])
    return ok


PARALLEL_MIN_BATCHES = 1024  # scans with this many batches per thread are checked by several threads


def _check_crc_range(mv: memoryview, scan: dict[str, Any], ok: np.ndarray, a: int, b: int, release: int) -> None:
    """:func:`check_crcs` of batches ``a:b`` into ``ok`` (``release``: the crc32c GIL mode)."""
    pos = scan["position"][a:b].tolist()
    size = scan["size"][a:b].tolist()
    magic = scan["magic"][a:b].tolist()
    crc = scan["crc"][a:b].tolist()
    from crc32c import crc32c as c32c  # (imported on first use: see formats.kafka.batch.crc32c)

    for i in range(b - a):
        p, s, m = pos[i], size[i], magic[i]
        if m >= 2:  # like Kafka, any magic ≥ 2 is checked as a v2 batch (size and CRC-32C)
            ok[a + i] = s >= 61 and c32c(mv[p + 21 : p + s], 0, release) == crc[i]
        elif m in (0, 1):
            ok[a + i] = s >= 26 and (zlib.crc32(mv[p + 16 : p + s]) & 0xFFFFFFFF) == crc[i]




def check_crcs_py(buf: Any, scan: dict[str, Any], *, threads: int | None = None) -> np.ndarray:
    """Twin of :func:`check_crcs`: one batch after the other, ``zlib.crc32`` for legacy messages
    and CRC-32C for v2 batches (``threads`` is ignored)."""
    mv = memoryview(buf).cast("B") if not isinstance(buf, np.ndarray) else memoryview(as_u8(buf))
    n = scan["count"]
    ok = np.zeros(n, dtype=bool)
    for i in range(n):
        p, s, m, c = (int(scan[f][i]) for f in ("position", "size", "magic", "crc"))
        if m >= 2:
            ok[i] = s >= 61 and crc32c_of(bytes(mv[p + 21 : p + s])) == c
        elif m in (0, 1):
            ok[i] = s >= 26 and (zlib.crc32(mv[p + 16 : p + s]) & 0xFFFFFFFF) == c
    return ok


_NAT = native("_nat_kafka")
scan_batches = scan_batches_native if _NAT is not None else scan_batches_numba
register("kafka.scan_batches", scan_batches_numba, scan_batches_py,
         native=scan_batches_native if _NAT is not None else None)
register("kafka.check_crcs", check_crcs, check_crcs_py)
