"""Hot loops of the Kafka layer, each with a pure-Python twin that gives identical answers.

* :func:`scan_batches` – walk the batch headers of a ``.log`` buffer (spec §2.4) into columns;
* :func:`check_crcs` – CRC-32C (v2) / CRC-32 (legacy) of many batches;
* :func:`build_index_entries` – the recovery rule of spec §4.5 over scanned batches;
* :func:`index_search_many` – the exact largest-lower-bound / smallest-upper-bound search of spec
  §3.7 (warm-section split and its quirks included) for many targets at once;
* :func:`decode_records_columnar` – records of many batches as columns (for Arrow / Spark).

The compiled versions use numba ``@njit(cache=True)``; the twins (suffix ``_py``) are plain
Python and are what the tests compare against.
"""

from __future__ import annotations

import os
import zlib
from bisect import bisect_right
from itertools import pairwise
from typing import Any

import crc32c as _crc32c
import numpy as np
from numba import njit

from mqstore.errors import (
    CorruptDataError,
    CorruptIndexError,
    IndexFullError,
    InvalidArgumentError,
    TruncatedRecordError,
    UnsupportedFormatError,
)
from mqstore.kernels import native
from mqstore.kernels.threads import default_threads, run_parallel

# stop reasons of scan_batches
STOP_END = 0  # fewer than 18 bytes left: clean end of data
STOP_TORN = 1  # the last batch is cut short (torn write): end of data, not an error
STOP_BAD_SIZE = 2  # size field < 14: Kafka's CorruptRecordException

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

# error codes of build_index_entries
BUILD_OK = 0
BUILD_OFFSET_OVERFLOW = 1  # last offset − base ∉ [0, 2^31 − 1]
BUILD_OFFSET_NOT_INCREASING = 2  # offset index append with offset ≤ last indexed offset
BUILD_OFFSET_INDEX_FULL = 3
BUILD_TIME_INDEX_FULL = 4
BUILD_POSITION_OVERFLOW = 5


# ----------------------------------------------------------------------------- big-endian readers
@njit(cache=True, inline="always")
def _i8(a, p):
    v = np.int64(a[p])
    return v - 256 if v >= 128 else v


@njit(cache=True, inline="always")
def _u16(a, p):
    return (np.int64(a[p]) << 8) | np.int64(a[p + 1])


@njit(cache=True, inline="always")
def _u32(a, p):
    return (np.int64(a[p]) << 24) | (np.int64(a[p + 1]) << 16) | (np.int64(a[p + 2]) << 8) | np.int64(a[p + 3])


@njit(cache=True, inline="always")
def _i32(a, p):
    v = _u32(a, p)
    return v - 4294967296 if v >= 2147483648 else v


@njit(cache=True, inline="always")
def _i64(a, p):
    hi = _u32(a, p)
    lo = _u32(a, p + 4)
    u = (np.uint64(hi) << np.uint64(32)) | np.uint64(lo)
    return np.int64(u)


# ----------------------------------------------------------------------------- scan
@njit(cache=True)
def _scan_count(a, start, end):
    p = start
    n = 0
    while True:
        if p >= end - 17:
            return n, p, STOP_END
        size = _i32(a, p + 8)
        if size < 14:
            return n, p, STOP_BAD_SIZE
        if p > end - 12 - size:
            return n, p, STOP_TORN
        n += 1
        p += 12 + size


@njit(cache=True)
def _scan_fill(a, start, n, position, size, base_offset, last_offset, max_ts, base_ts, epoch, magic, attrs, count, crc):
    p = start
    end = a.shape[0]
    for i in range(n):
        s = _i32(a, p + 8)
        m = _i8(a, p + 16)
        total = s + 12
        position[i] = p
        size[i] = total
        magic[i] = m
        off = _i64(a, p)
        if m >= 2:
            epoch[i] = _i32(a, p + 12)
            if total >= 61 and p + 61 <= end:
                crc[i] = _u32(a, p + 17)
                attrs[i] = _u16(a, p + 21)
                base_offset[i] = off
                last_offset[i] = off + _i32(a, p + 23)
                base_ts[i] = _i64(a, p + 27)
                max_ts[i] = _i64(a, p + 35)
                count[i] = _i32(a, p + 57)
            else:
                crc[i] = _u32(a, p + 17) if p + 21 <= end else 0
                attrs[i] = 0
                base_offset[i] = off
                last_offset[i] = off
                base_ts[i] = -1
                max_ts[i] = -1
                count[i] = 0
        else:
            epoch[i] = -1
            crc[i] = _u32(a, p + 12)
            attrs[i] = np.int64(a[p + 17])
            base_offset[i] = -1
            last_offset[i] = off
            count[i] = 1
            if m == 1 and s >= 22:
                base_ts[i] = _i64(a, p + 18)
            else:
                base_ts[i] = -1
            max_ts[i] = base_ts[i]
        p += total


def _as_u8(buf: Any) -> np.ndarray:
    if isinstance(buf, np.ndarray):
        return buf.view(np.uint8).reshape(-1)
    return np.frombuffer(buf, dtype=np.uint8)


_COLUMN_DTYPES = tuple(
    (name, np.dtype(np.uint32 if name == "crc" else np.int8 if name == "magic" else np.int32 if name in (
        "size", "partition_leader_epoch", "attributes", "record_count") else np.int64))
    for name in SCAN_FIELDS)


def _empty_columns(n: int) -> dict[str, np.ndarray]:
    return {name: np.zeros(n, dtype) for name, dtype in _COLUMN_DTYPES}


def scan_batches(buf: Any, start: int = 0) -> dict[str, Any]:
    """Walk batch headers from ``start`` (numba).  Returns one numpy array per field of
    :data:`SCAN_FIELDS` plus ``valid_end`` (where the walk stopped), ``stop_reason``
    (``STOP_END``/``STOP_TORN``/``STOP_BAD_SIZE``) and ``count``.

    For legacy (magic 0/1) messages ``base_offset`` is −1, ``last_offset`` the stored offset,
    ``record_count`` 1 and timestamps −1 for magic 0.  Nothing is validated here.
    """
    a = _as_u8(buf)
    end = a.shape[0]
    n, stop, reason = _scan_count(a, start, end)
    cols = _empty_columns(n)
    if n:
        _scan_fill(a, start, n, *(cols[f] for f in SCAN_FIELDS))
    out: dict[str, Any] = dict(cols)
    out.update(valid_end=int(stop), stop_reason=int(reason), count=int(n))
    return out


def scan_batches_py(buf: Any, start: int = 0) -> dict[str, Any]:
    """Pure-Python twin of :func:`scan_batches` (same output)."""
    mv = memoryview(buf).cast("B") if not isinstance(buf, np.ndarray) else memoryview(_as_u8(buf))
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
    cols = _empty_columns(len(rows))
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
    checked by ``threads`` threads (default: the CPUs), the CRC-32C calls releasing the GIL;
    ``threads=1`` is the plain single-threaded loop (the twin the tests compare against).
    """
    mv = memoryview(buf).cast("B") if not isinstance(buf, np.ndarray) else memoryview(_as_u8(buf))
    n = scan["count"]
    ok = np.zeros(n, dtype=bool)
    pos = scan["position"][:n]
    # (the thread count is only looked up for scans large enough to split: os.cpu_count() alone
    # costs ~15 µs, as much as checking a 16 KiB batch — appends check one batch per call)
    parts = 1 if n < 2 * PARALLEL_MIN_BATCHES else min(_threads() if threads is None else max(1, threads),
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
    c32c = _crc32c.crc32c
    for i in range(b - a):
        p, s, m = pos[i], size[i], magic[i]
        if m >= 2:  # like Kafka, any magic ≥ 2 is checked as a v2 batch (size and CRC-32C)
            ok[a + i] = s >= 61 and c32c(mv[p + 21 : p + s], 0, release) == crc[i]
        elif m in (0, 1):
            ok[a + i] = s >= 26 and (zlib.crc32(mv[p + 16 : p + s]) & 0xFFFFFFFF) == crc[i]


# ----------------------------------------------------------------------------- index build (§4.5)
@njit(cache=True)
def _build(positions, sizes, last_offsets, max_ts, n, base, interval, max_off_entries, max_time_entries,
           oi_off, oi_pos, ti_ts, ti_off):
    no = 0
    nt = 0
    last_ts = np.int64(-1)
    last_toff = base
    last_ooff = base
    max_so_far = np.int64(-1)
    off_of_max = np.int64(-1)
    last_entry_bytes = np.int64(0)
    valid = np.int64(0)
    for i in range(n):
        lo = last_offsets[i]
        rel = lo - base
        if rel < 0 or rel > 2147483647:
            return no, nt, BUILD_OFFSET_OVERFLOW, i
        if max_ts[i] > max_so_far:
            max_so_far = max_ts[i]
            off_of_max = lo
        if valid - last_entry_bytes > interval:
            if no >= max_off_entries:
                return no, nt, BUILD_OFFSET_INDEX_FULL, i
            if no > 0 and lo <= last_ooff:
                return no, nt, BUILD_OFFSET_NOT_INCREASING, i
            if valid > 2147483647:
                return no, nt, BUILD_POSITION_OVERFLOW, i
            oi_off[no] = lo
            oi_pos[no] = valid
            no += 1
            last_ooff = lo
            # timeIndex.maybeAppend(max_so_far, off_of_max)
            if nt >= max_time_entries - 1:
                return no, nt, BUILD_TIME_INDEX_FULL, i
            if nt > 0 and off_of_max < last_toff:
                return no, nt, BUILD_OFFSET_NOT_INCREASING, i
            if max_so_far > last_ts:
                ti_ts[nt] = max_so_far
                ti_off[nt] = off_of_max
                nt += 1
                last_ts = max_so_far
                last_toff = off_of_max
            last_entry_bytes = valid
        valid += sizes[i]
    # final entry, skipFullCheck = true (still bounded by the physical slots)
    if max_so_far > last_ts:
        if nt >= max_time_entries:
            return no, nt, BUILD_TIME_INDEX_FULL, n
        if nt > 0 and off_of_max < last_toff:
            return no, nt, BUILD_OFFSET_NOT_INCREASING, n
        ti_ts[nt] = max_so_far
        ti_off[nt] = off_of_max
        nt += 1
    return no, nt, BUILD_OK, n


def _build_py(positions, sizes, last_offsets, max_ts, n, base, interval, max_off_entries, max_time_entries,
              oi_off, oi_pos, ti_ts, ti_off):
    no = nt = 0
    last_ts, last_toff, last_ooff = -1, base, base
    max_so_far, off_of_max = -1, -1
    last_entry_bytes = valid = 0
    for i in range(n):
        lo = int(last_offsets[i])
        if not 0 <= lo - base <= 2147483647:
            return no, nt, BUILD_OFFSET_OVERFLOW, i
        if int(max_ts[i]) > max_so_far:
            max_so_far, off_of_max = int(max_ts[i]), lo
        if valid - last_entry_bytes > interval:
            if no >= max_off_entries:
                return no, nt, BUILD_OFFSET_INDEX_FULL, i
            if no > 0 and lo <= last_ooff:
                return no, nt, BUILD_OFFSET_NOT_INCREASING, i
            if valid > 2147483647:
                return no, nt, BUILD_POSITION_OVERFLOW, i
            oi_off[no], oi_pos[no] = lo, valid
            no += 1
            last_ooff = lo
            if nt >= max_time_entries - 1:
                return no, nt, BUILD_TIME_INDEX_FULL, i
            if nt > 0 and off_of_max < last_toff:
                return no, nt, BUILD_OFFSET_NOT_INCREASING, i
            if max_so_far > last_ts:
                ti_ts[nt], ti_off[nt] = max_so_far, off_of_max
                nt += 1
                last_ts, last_toff = max_so_far, off_of_max
            last_entry_bytes = valid
        valid += int(sizes[i])
    if max_so_far > last_ts:
        if nt >= max_time_entries:
            return no, nt, BUILD_TIME_INDEX_FULL, n
        if nt > 0 and off_of_max < last_toff:
            return no, nt, BUILD_OFFSET_NOT_INCREASING, n
        ti_ts[nt], ti_off[nt] = max_so_far, off_of_max
        nt += 1
    return no, nt, BUILD_OK, n


_BUILD_MESSAGES = {
    BUILD_OFFSET_OVERFLOW: "batch last offset cannot be stored relative to the segment base offset",
    BUILD_OFFSET_NOT_INCREASING: "batch offsets go backwards: the offset index would not be increasing",
    BUILD_OFFSET_INDEX_FULL: "the offset index is full (raise max index bytes)",
    BUILD_TIME_INDEX_FULL: "the time index is full (raise max index bytes)",
    BUILD_POSITION_OVERFLOW: "batch position does not fit an int32",
}


def build_index_entries(
    scan: dict[str, Any],
    n_valid: int,
    base_offset: int,
    index_interval_bytes: int,
    max_index_size: int,
    *,
    compiled: bool = True,
    path: str | None = None,
) -> dict[str, np.ndarray]:
    """Index entries that Kafka's ``LogSegment.recover`` writes for the first ``n_valid`` batches.

    Returns ``offset_offsets``/``offset_positions`` (absolute offsets) and ``time_timestamps``/
    ``time_offsets``, including the final time entry.  ``max_index_size`` bounds the number of
    entries as on disk (``floor(size/8)`` / ``floor(size/12)``); exceeding it raises
    :class:`IndexFullError`.  Offsets going backwards or overflowing raise :class:`CorruptDataError`.
    """
    max_off = max_index_size // 8
    max_time = max_index_size // 12
    cap_o = min(max_off, n_valid) + 1
    cap_t = min(max_time, n_valid + 1) + 1
    oi_off = np.zeros(cap_o, np.int64)
    oi_pos = np.zeros(cap_o, np.int64)
    ti_ts = np.zeros(cap_t, np.int64)
    ti_off = np.zeros(cap_t, np.int64)
    fn = _build if compiled else _build_py
    no, nt, err, at = fn(
        scan["position"], scan["size"], scan["last_offset"], scan["max_timestamp"], n_valid,
        np.int64(base_offset), np.int64(index_interval_bytes), max_off, max_time, oi_off, oi_pos, ti_ts, ti_off,
    )
    if err != BUILD_OK:
        pos = int(scan["position"][at]) if at < scan["count"] else None
        msg = _BUILD_MESSAGES[err]
        if err in (BUILD_OFFSET_INDEX_FULL, BUILD_TIME_INDEX_FULL):
            raise IndexFullError(msg, path=path, offset=pos)
        raise CorruptDataError(msg, path=path, offset=pos)
    return {
        "offset_offsets": oi_off[:no].copy(),
        "offset_positions": oi_pos[:no].copy(),
        "time_timestamps": ti_ts[:nt].copy(),
        "time_offsets": ti_off[:nt].copy(),
    }


# ----------------------------------------------------------------------------- index search (§3.7)
@njit(cache=True)
def _search_one(col, n, target, warm, want_sub):
    if n == 0:
        return -1
    first_hot = n - 1 - warm
    if first_hot < 0:
        first_hot = 0
    if col[first_hot] < target:
        lo = first_hot
        hi = n - 1
    else:
        if col[0] > target:
            return 0 if want_sub else -1
        lo = 0
        hi = first_hot
    while lo < hi:
        mid = (lo + hi + 1) >> 1
        v = col[mid]
        if v > target:
            hi = mid - 1
        elif v < target:
            lo = mid
        else:
            return mid
    if not want_sub:
        return lo
    return -1 if lo == n - 1 else lo + 1


@njit(cache=True)
def _search_many(col, n, targets, warm, want_sub, out):
    for i in range(targets.shape[0]):
        out[i] = _search_one(col, n, targets[i], warm, want_sub)


def index_search_py(col: Any, n: int, target: int, warm: int, smallest_upper_bound: bool = False) -> int:
    """Pure-Python twin: the exact slot search of spec §3.7 over ``col[0:n]``."""
    if n == 0:
        return -1
    first_hot = max(0, n - 1 - warm)
    if col[first_hot] < target:
        lo, hi = first_hot, n - 1
    else:
        if col[0] > target:
            return 0 if smallest_upper_bound else -1
        lo, hi = 0, first_hot
    while lo < hi:
        mid = (lo + hi + 1) >> 1
        v = col[mid]
        if v > target:
            hi = mid - 1
        elif v < target:
            lo = mid
        else:
            return mid
    if not smallest_upper_bound:
        return lo
    return -1 if lo == n - 1 else lo + 1


def index_search_many(col: np.ndarray, n: int, targets: Any, warm: int, smallest_upper_bound: bool = False) -> np.ndarray:
    """Slots for many targets at once (numba); same answers as :func:`index_search_py`."""
    t = np.ascontiguousarray(np.asarray(targets, dtype=np.int64))
    out = np.empty(t.shape[0], dtype=np.int64)
    c = np.ascontiguousarray(col[:n], dtype=np.int64)
    _search_many(c, n, t, warm, smallest_upper_bound, out)
    return out


def index_search_many_py(col: Any, n: int, targets: Any, warm: int, smallest_upper_bound: bool = False) -> np.ndarray:
    """Pure-Python twin of :func:`index_search_many`."""
    c = [int(x) for x in col[:n]]
    return np.array([index_search_py(c, n, int(t), warm, smallest_upper_bound) for t in targets], dtype=np.int64)


def validate_index_arrays(offsets: np.ndarray, base_offset: int, path: str | None = None) -> None:
    """Raise :class:`CorruptIndexError` if offsets are not strictly increasing (used by verify)."""
    if offsets.shape[0] > 1:
        bad = np.nonzero(np.diff(offsets) <= 0)[0]
        if bad.shape[0]:
            raise CorruptIndexError(f"index offsets not increasing at slot {int(bad[0]) + 1}", path=path)


# ----------------------------------------------------------------------------- columnar records
def decode_records_columnar(
    buf: Any,
    start: int = 0,
    end: int | None = None,
    *,
    start_offset: int | None = None,
    end_offset: int | None = None,
    include_control: bool = False,
    validate: bool = True,
    path: str | None = None,
) -> dict[str, Any]:
    """Decode every record of the batches in ``buf[start:end]`` into columns.

    Intended for building a ``pyarrow.RecordBatch`` shaped like Spark's Kafka source (the caller
    adds the constant ``topic`` and ``partition`` columns)::

        cols = decode_records_columnar(mm, start=pos, start_offset=o)
        pa.record_batch({"key": pa.array(cols["key"], pa.binary()), "value": ...,
                         "topic": ..., "partition": ..., "offset": cols["offset"],
                         "timestamp": cols["timestamp"], "timestampType": cols["timestamp_type"],
                         "headers": cols["headers"]})

    Returns a dict with

    * ``offset`` int64 array, ``timestamp`` int64 array (ms; LogAppendTime batches report the
      batch max timestamp), ``timestamp_type`` int32 array (0 CreateTime, 1 LogAppendTime, −1 none
      for magic 0);
    * ``key``, ``value``: lists of ``bytes | None``;
    * ``headers``: list of lists of ``(key: str, value: bytes | None)`` tuples (Spark's
      ``array<struct<key string, value binary>>``);
    * ``partition_leader_epoch`` int32, ``is_transactional`` bool, ``batch_position`` int64 arrays
      and ``next_position`` (where decoding stopped: the end of the last whole batch).

    Records with offset < ``start_offset`` or ≥ ``end_offset`` are skipped; control batches
    (transaction markers) are skipped unless ``include_control``.  A batch failing its CRC raises
    :class:`~mqstore.errors.CrcMismatchError` when ``validate`` (the default).  A torn tail ends
    the decoding silently (it is the end of data); a size field below 14 raises.
    """
    from mqstore.formats.kafka.batch import (
        decode_batch_header,
        decode_legacy_message,
        iter_legacy_records,
        iter_records,
        validate_batch,
    )

    mv = memoryview(buf).cast("B") if not isinstance(buf, np.ndarray) else memoryview(_as_u8(buf))
    if end is not None:
        mv = mv[:end]
    scan = scan_batches(mv, start)
    if scan["stop_reason"] == STOP_BAD_SIZE:
        raise CorruptDataError("record size smaller than the minimum record overhead (14)", path=path,
                               offset=scan["valid_end"])
    offsets: list[int] = []
    timestamps: list[int] = []
    ts_types: list[int] = []
    keys: list[bytes | None] = []
    values: list[bytes | None] = []
    headers: list[list[tuple[str, bytes | None]]] = []
    epochs: list[int] = []
    txn: list[bool] = []
    bpos: list[int] = []
    lo = -(1 << 63) if start_offset is None else start_offset
    hi = (1 << 63) - 1 if end_offset is None else end_offset
    for i in range(scan["count"]):
        if scan["last_offset"][i] < lo:
            continue
        p = int(scan["position"][i])
        m = int(scan["magic"][i])
        if m == 2:
            h = decode_batch_header(mv, p, path=path)
            if validate:
                validate_batch(mv, h, path=path)
            if h.base_offset >= hi:
                break
            if h.is_control and not include_control:
                continue
            tt = int(h.timestamp_type)
            recs = iter_records(mv, h, path=path)
            epoch, is_txn = h.partition_leader_epoch, h.is_transactional
        elif m in (0, 1):
            msg = decode_legacy_message(mv, p, validate=validate, path=path)
            tt = int(msg.timestamp_type)
            recs = iter_legacy_records(msg, path=path)
            epoch, is_txn = -1, False
        else:
            raise CorruptDataError(f"unknown record batch magic {m}", path=path, offset=p)
        for r in recs:
            if r.offset < lo or r.offset >= hi:
                continue
            offsets.append(r.offset)
            timestamps.append(r.timestamp)
            ts_types.append(tt)
            keys.append(r.key)
            values.append(r.value)
            headers.append([(x.key, x.value) for x in r.headers])
            epochs.append(epoch)
            txn.append(is_txn)
            bpos.append(p)
    return {
        "offset": np.array(offsets, dtype=np.int64),
        "timestamp": np.array(timestamps, dtype=np.int64),
        "timestamp_type": np.array(ts_types, dtype=np.int32),
        "key": keys,
        "value": values,
        "headers": headers,
        "partition_leader_epoch": np.array(epochs, dtype=np.int32),
        "is_transactional": np.array(txn, dtype=bool),
        "batch_position": np.array(bpos, dtype=np.int64),
        "next_position": int(scan["valid_end"]),
    }


# ----------------------------------------------------------------------------- fast lookups
def index_search_sorted(col: Any, n: int, target: int, smallest_upper_bound: bool = False) -> int:
    """The search of :func:`index_search_py` as one C ``bisect`` call.

    Valid only when ``col[0:n]`` is strictly increasing (every index mqstore or Kafka writes;
    callers check once and fall back to :func:`index_search_py` otherwise).  On such a column the
    warm-section split of spec §3.7 cannot change the answer, and the one quirk of the smallest
    upper bound (slot 0 is never probed, so an exact hit on slot 0 answers slot 1, or −1 when it
    is the only entry) is reproduced by the generic rule below.
    """
    if n == 0:
        return -1
    j = bisect_right(col, target, 0, n) - 1
    if not smallest_upper_bound:
        return j
    if j < 0:
        return 0  # every entry is above the target
    if j > 0 and col[j] == target:
        return j
    return -1 if j == n - 1 else j + 1


@njit(cache=True)
def _lookup_many(keys, vals, n, targets, warm, miss_key, miss_val, out_k, out_v):
    for i in range(targets.shape[0]):
        s = _search_one(keys, n, targets[i], warm, False)
        if s < 0:
            out_k[i] = miss_key
            out_v[i] = miss_val
        else:
            out_k[i] = keys[s]
            out_v[i] = vals[s]


_LANES = 32


@njit(cache=True, nogil=True)  # several threads search parts of one batch (index_lookup_many)
def _lookup_many_sorted(keys, vals, n, targets, miss_key, miss_val, out_k, out_v):
    # Branch-free binary searches, _LANES targets in lock-step: the probes of different targets
    # do not depend on each other, so the CPU overlaps their cache misses.
    m = targets.shape[0]
    base = np.zeros(_LANES, np.int64)
    i = 0
    while i < m:
        lanes = min(_LANES, m - i)
        for j in range(lanes):
            base[j] = 0
        length = n
        while length > 1:
            half = length >> 1
            for j in range(lanes):
                b = base[j]
                base[j] = b + half if keys[b + half] <= targets[i + j] else b
            length -= half
        for j in range(lanes):
            b = base[j]
            if keys[b] <= targets[i + j]:
                out_k[i + j] = keys[b]
                out_v[i + j] = vals[b]
            else:
                out_k[i + j] = miss_key
                out_v[i + j] = miss_val
        i += lanes


PARALLEL_MIN_TARGETS = 1 << 15  # batches this large per thread are split over the CPUs


def _threads() -> int:
    """Threads for the split kernels (``MQSTORE_THREADS`` or the CPUs, see :mod:`.threads`)."""
    return default_threads()


def index_lookup_many(keys: np.ndarray, vals: np.ndarray, n: int, targets: Any, warm: int, miss_key: int,
                      miss_val: int, *, strictly_increasing: bool | None = None) -> tuple[np.ndarray, np.ndarray]:
    """Largest-lower-bound search and entry fetch fused in one compiled pass: for each target the
    ``(key, value)`` of the greatest entry whose key ≤ target, ``(miss_key, miss_val)`` if none.

    On a strictly increasing key column (checked unless the caller says) the answer of Kafka's
    warm/cold search is the plain greatest lower bound, found by lock-step branch-free searches;
    any other column takes the exact algorithm of spec §3.7."""
    t = np.ascontiguousarray(np.asarray(targets, dtype=np.int64))
    out_k = np.empty(t.shape[0], dtype=np.int64)
    out_v = np.empty(t.shape[0], dtype=np.int64)
    k = keys[:n]
    if strictly_increasing is None:
        strictly_increasing = bool(n < 2 or np.all(k[1:] > k[:-1]))
    if n == 0:
        out_k[:] = miss_key
        out_v[:] = miss_val
    elif strictly_increasing:
        kc, vc = np.ascontiguousarray(k), np.ascontiguousarray(vals[:n])
        parts = min(_threads(), t.shape[0] // PARALLEL_MIN_TARGETS)
        if parts > 1:  # the searches are independent: one slice of the targets per thread
            cuts = np.linspace(0, t.shape[0], parts + 1).astype(np.int64).tolist()
            run_parallel(_lookup_many_sorted, [(kc, vc, n, t[a:b], miss_key, miss_val, out_k[a:b], out_v[a:b])
                                               for a, b in pairwise(cuts)])
        else:
            _lookup_many_sorted(kc, vc, n, t, miss_key, miss_val, out_k, out_v)
    else:
        _lookup_many(keys, vals, n, t, warm, miss_key, miss_val, out_k, out_v)
    return out_k, out_v


def index_lookup_many_py(keys: Any, vals: Any, n: int, targets: Any, warm: int, miss_key: int,
                         miss_val: int) -> tuple[np.ndarray, np.ndarray]:
    """Pure-Python twin of :func:`index_lookup_many`."""
    ks, vs = [int(x) for x in keys[:n]], [int(x) for x in vals[:n]]
    out_k, out_v = [], []
    for t in targets:
        s = index_search_py(ks, n, int(t), warm, False)
        out_k.append(miss_key if s < 0 else ks[s])
        out_v.append(miss_val if s < 0 else vs[s])
    return np.array(out_k, dtype=np.int64), np.array(out_v, dtype=np.int64)


# ----------------------------------------------------------------------------- file scan + CRC (recovery)
# Recovery reads the ``.log`` with ``pread`` into one small reused buffer per thread, walking the
# batch headers and checksumming each batch while its bytes are in the L2 cache: one pass, no page
# faults (a fresh mapping of a 1 GiB segment spends more time faulting than checksumming) and no
# SIGBUS if the file shrinks meanwhile.  The checksums are ISA-L's (shipped in the ``isal``
# package), called from the compiled loop by symbol.  Twin: :func:`scan_batches_py` over the whole
# file followed by :func:`check_crcs` with ``threads=1``.

STOP_LIMIT = 3  # the walk reached ``stop_at`` (a part boundary)
STOP_FULL = 4  # the output columns are full: call again from the returned position
STOP_READ_ERROR = -1  # pread failed or returned fewer bytes than the file held when the scan began

FILE_SCAN_BUFFER = 64 * 1024  # bytes per pread: copies from the page cache are fastest into an L2-sized buffer
PARALLEL_MIN_BYTES = 32 * 1024 * 1024  # files this large per thread are walked in parts
SPLIT_SEARCH_BYTES = 4 * 1024 * 1024  # how far past a cut a batch start is looked for
SPLIT_VERIFY_BYTES = 32 * 1024 * 1024  # CRC bytes spent verifying split candidates, per cut
_NO_LIMIT = (1 << 62)


HAVE_FILE_SCAN = native.HAVE_PREAD and native.HAVE_ISAL_CRC32 and native.HAVE_ISAL_CRC32C
_c_pread, _c_crc32c, _c_crc32, _ptr = native.c_pread, native.c_crc32c, native.c_crc32, native.as_voidptr


@njit(cache=True, nogil=True, inline="always")
def _fill(fd, base, cap, off, file_end):
    # file[off : off + min(cap, file_end - off)] into the buffer; bytes read, or -1 on an error
    want = min(cap, file_end - off)
    got = 0
    while got < want:
        r = _c_pread(np.intc(fd), _ptr(base + got), want - got, off + got)
        if r <= 0:
            return -1 if r < 0 else got
        got += r
    return got


@njit(cache=True, nogil=True)
def _file_scan(fd, file_end, start, stop_at, buf, position, size, base_offset, last_offset, max_ts, base_ts,
               epoch, magic, attrs, count, crc, ok):
    cap = position.shape[0]
    bsz = buf.shape[0]
    base = buf.ctypes.data
    ws = np.int64(0)  # the buffer holds file[ws:we]
    we = np.int64(0)
    p = np.int64(start)
    n = 0
    while True:
        if p >= stop_at:
            return n, p, STOP_LIMIT
        if p >= file_end - 17:
            return n, p, STOP_END
        if n >= cap:
            return n, p, STOP_FULL
        need = min(p + 61, file_end)
        if p < ws or need > we:
            got = _fill(fd, base, bsz, p, file_end)
            if got < need - p:
                return n, p, STOP_READ_ERROR
            ws = p
            we = p + got
        o = p - ws
        s = _i32(buf, o + 8)
        if s < 14:
            return n, p, STOP_BAD_SIZE
        if p > file_end - 12 - s:
            return n, p, STOP_TORN
        m = _i8(buf, o + 16)
        total = s + 12
        position[n] = p
        size[n] = total
        magic[n] = m
        off = _i64(buf, o)
        kind = 0  # 0: no checksum (invalid), 1: CRC-32C from p + 21, 2: CRC-32 from p + 16
        if m >= 2:
            epoch[n] = _i32(buf, o + 12)
            if total >= 61 and p + 61 <= file_end:
                crc[n] = _u32(buf, o + 17)
                attrs[n] = _u16(buf, o + 21)
                base_offset[n] = off
                last_offset[n] = off + _i32(buf, o + 23)
                base_ts[n] = _i64(buf, o + 27)
                max_ts[n] = _i64(buf, o + 35)
                count[n] = _i32(buf, o + 57)
                kind = 1
            else:
                crc[n] = _u32(buf, o + 17) if p + 21 <= file_end else 0
                attrs[n] = 0
                base_offset[n] = off
                last_offset[n] = off
                base_ts[n] = -1
                max_ts[n] = -1
                count[n] = 0
        else:
            epoch[n] = -1
            crc[n] = _u32(buf, o + 12)
            attrs[n] = np.int64(buf[o + 17])
            base_offset[n] = -1
            last_offset[n] = off
            count[n] = 1
            if m == 1 and s >= 22:
                base_ts[n] = _i64(buf, o + 18)
            else:
                base_ts[n] = -1
            max_ts[n] = base_ts[n]
            if (m == 0 or m == 1) and total >= 26:
                kind = 2
        good = False
        if kind != 0:
            cs = p + 21 if kind == 1 else p + 16
            ce = p + total
            c = np.uint32(0xFFFFFFFF) if kind == 1 else np.uint32(0)
            while cs < ce:
                if cs >= we:  # the batch goes on past the buffer: read its next part
                    got = _fill(fd, base, bsz, cs, file_end)
                    if got <= 0:
                        return n, p, STOP_READ_ERROR
                    ws = cs
                    we = cs + got
                e = min(ce, we)
                if kind == 1:
                    c = _c_crc32c(_ptr(base + (cs - ws)), np.intc(e - cs), c)
                else:
                    c = _c_crc32(c, _ptr(base + (cs - ws)), np.uint64(e - cs))
                cs = e
            if kind == 1:
                c = c ^ np.uint32(0xFFFFFFFF)
            good = np.int64(c) == crc[n]
        ok[n] = good
        n += 1
        p += total


@njit(cache=True, nogil=True)
def _find_batch_start(fd, file_end, lo, hi, buf, buf2, verify_budget):
    # First position in [lo, hi) that looks like the start of a v2 batch whose CRC-32C verifies
    # (and is followed by a plausible header or the end of the file); -1 if none.  A guess: the
    # caller confirms it by walking the chain from the start of the file up to it.
    bsz = buf.shape[0]
    base = buf.ctypes.data
    base2 = buf2.ctypes.data
    q = np.int64(lo)
    budget = np.int64(verify_budget)
    while q < hi:
        got = _fill(fd, base, bsz, q, file_end)
        if got < 61:
            return -1
        last = min(hi, q + got - 60)
        for c in range(q, last):
            o = c - q
            if buf[o + 16] != 2:
                continue
            s = _i32(buf, o + 8)
            if s < 49 or c > file_end - 12 - s or _i32(buf, o + 23) < 0 or _i32(buf, o + 57) < 0:
                continue
            nxt = c + 12 + s
            if nxt <= file_end - 17:
                if _fill(fd, base2, 17, nxt, file_end) != 17 or buf2[16] != 2 or _i32(buf2, 8) < 14:
                    continue
            if s > budget:
                return -1
            budget -= s
            cs = c + 21
            x = np.uint32(0xFFFFFFFF)
            b2 = buf2.shape[0]
            while cs < nxt:
                g = _fill(fd, base2, b2, cs, nxt)
                if g <= 0:
                    return -1
                x = _c_crc32c(_ptr(base2), np.intc(g), x)
                cs += g
            if np.int64(x ^ np.uint32(0xFFFFFFFF)) == _u32(buf, o + 17):
                return c
        if last <= q:
            return -1
        q = last
    return -1


def _file_columns(n: int) -> dict[str, np.ndarray]:
    cols = _empty_columns(n)
    cols["ok"] = np.zeros(n, dtype=bool)
    return cols


def _walk_part(fd: int, file_size: int, start: int, stop_at: int, buffer_size: int,
               report: Any = None) -> tuple[list[dict[str, np.ndarray]], int, int]:
    """Blocks of columns of the batches walked from ``start`` (see :func:`_file_scan`)."""
    buf = np.empty(buffer_size, np.uint8)
    blocks: list[dict[str, np.ndarray]] = []
    p = start
    seen = 0
    step = 64 * 1024 * 1024 if report is not None else _NO_LIMIT
    while True:
        room = (min(stop_at, file_size) - p) // 26 + 1  # a batch is at least 26 bytes
        est = 4096 if seen == 0 else int((min(stop_at, file_size) - p) * seen / max(1, p - start) * 1.05) + 64
        cols = _file_columns(max(1, min(room, est)))
        limit = min(stop_at, p + step)
        n, p2, reason = _file_scan(fd, file_size, p, limit, buf, *(cols[f] for f in SCAN_FIELDS), cols["ok"])
        if n:
            blocks.append({k: v[:n] for k, v in cols.items()})
            seen += n
        p = int(p2)
        if reason == STOP_READ_ERROR:
            return blocks, p, STOP_READ_ERROR
        if report is not None:
            report(p)
        if reason == STOP_FULL or (reason == STOP_LIMIT and p < stop_at):
            continue
        return blocks, p, int(reason)


def scan_check_file(fd: int, file_size: int, *, threads: int | None = None, progress: Any = None,
                    buffer_size: int = FILE_SCAN_BUFFER, min_part_bytes: int | None = None,
                    ) -> tuple[dict[str, Any], np.ndarray]:
    """:func:`scan_batches` and :func:`check_crcs` of ``file[0:file_size]`` in one pass of ``pread``.

    Returns ``(scan, ok)``, identical to ``scan_batches(data)`` and ``check_crcs(data, scan)`` of the
    same bytes.  Large files are walked in ``threads`` parts (default: the CPUs): each part after
    the first starts at a guessed batch start near its cut (a v2 header whose CRC verifies), and
    the part before it must arrive exactly there, else the walk goes on sequentially from where
    the chain really leads — the guesses only ever cost time.  ``progress(done, total)`` is called
    from the calling thread.  Raises :class:`TruncatedRecordError` when the file holds fewer than
    ``file_size`` bytes (it shrank meanwhile) and ``OSError`` when a read fails.
    """
    if not HAVE_FILE_SCAN:  # pragma: no cover - see mqstore.kernels.native
        raise UnsupportedFormatError("the pread/ISA-L scan is not available on this platform")
    if buffer_size < 64:
        raise InvalidArgumentError(f"buffer_size must be ≥ 64, got {buffer_size}")
    min_part = PARALLEL_MIN_BYTES if min_part_bytes is None else max(1, min_part_bytes)
    parts = max(1, min(_threads() if threads is None else max(1, threads), file_size // min_part))
    cuts = [0]
    if parts > 1:
        scratch, scratch2 = np.empty(buffer_size, np.uint8), np.empty(buffer_size, np.uint8)
        for k in range(1, parts):
            lo = max(cuts[-1] + 1, file_size * k // parts)
            s = int(_find_batch_start(fd, file_size, lo, min(file_size, lo + SPLIT_SEARCH_BYTES), scratch, scratch2,
                                      SPLIT_VERIFY_BYTES))
            if s > cuts[-1]:
                cuts.append(s)
    done = [0] * len(cuts)
    bounds = [*cuts[1:], _NO_LIMIT]

    def reporter(k: int) -> Any:
        if progress is None:
            return None

        def report(p: int) -> None:
            done[k] = p - cuts[k]
            if k == 0:
                progress(min(file_size, sum(done)), file_size)
        return report

    results = run_parallel(_walk_part, [(fd, file_size, cuts[k], bounds[k], buffer_size, reporter(k))
                                        for k in range(len(cuts))])
    blocks: list[dict[str, np.ndarray]] = []
    p, reason = 0, STOP_END
    for k, (bl, p_k, reason_k) in enumerate(results):
        blocks += bl
        p, reason = p_k, reason_k
        if reason != STOP_LIMIT:
            break
        if p != bounds[k]:  # the guess at cut k + 1 was not a batch start of this chain
            bl, p, reason = _walk_part(fd, file_size, p, _NO_LIMIT, buffer_size, reporter(0))
            blocks += bl
            break
    if reason == STOP_READ_ERROR:
        data = os.pread(fd, 61, p)  # raises the OSError if there is one
        raise TruncatedRecordError(
            f"the file ended at {p + len(data)} while being read (it held {file_size} bytes when the scan began)",
            offset=p)
    if progress is not None:
        progress(file_size, file_size)
    out: dict[str, Any] = {}
    for f in (*SCAN_FIELDS, "ok"):
        out[f] = (np.concatenate([b[f] for b in blocks]) if len(blocks) > 1 else
                  blocks[0][f].copy() if blocks else _file_columns(0)[f])
    ok = out.pop("ok")
    out.update(valid_end=int(p), stop_reason=int(reason), count=int(ok.shape[0]))
    return out, ok


def scan_check_file_py(fd: int, file_size: int) -> tuple[dict[str, Any], np.ndarray]:
    """Pure-Python twin of :func:`scan_check_file`: the whole file read at once, then
    :func:`scan_batches_py` and the single-threaded :func:`check_crcs`."""
    data = os.pread(fd, file_size, 0) if file_size else b""
    if len(data) < file_size:
        raise TruncatedRecordError(f"the file holds {len(data)} of {file_size} bytes", offset=len(data))
    scan = scan_batches_py(data)
    return scan, check_crcs(data, scan, threads=1)
