"""The index entries Kafka's recovery writes for a segment's batches (spec §4.5), compiled and twin.

:func:`build_index_entries` replays ``LogSegment.recover`` over scanned batch columns
(:mod:`.batches`): an offset-index entry every ``index.interval.bytes``, the time index following
the largest timestamp so far, and the final time entry.  The compiled rule and its interpreted twin
are the same code (``_build`` is ``_build_py`` under numba's rules), grouped arguments:
:class:`IndexLimits` in, :class:`IndexEntries` out.
"""

from __future__ import annotations

from typing import Any, NamedTuple

import numpy as np
from numba import njit

from mqstore.errors import CorruptDataError, IndexFullError
from mqstore.kernels.registry import register

# error codes of build_index_entries
BUILD_OK = 0
BUILD_OFFSET_OVERFLOW = 1  # last offset − base ∉ [0, 2^31 − 1]
BUILD_OFFSET_NOT_INCREASING = 2  # offset index append with offset ≤ last indexed offset
BUILD_OFFSET_INDEX_FULL = 3
BUILD_TIME_INDEX_FULL = 4
BUILD_POSITION_OVERFLOW = 5



class IndexLimits(NamedTuple):
    base: int  # the segment's base offset
    interval: int  # index.interval.bytes
    max_off_entries: int
    max_time_entries: int


class IndexEntries(NamedTuple):
    offset_offsets: np.ndarray
    offset_positions: np.ndarray
    time_timestamps: np.ndarray
    time_offsets: np.ndarray


@njit(cache=True)
def _build(positions, sizes, last_offsets, max_ts, n, limits, entries):
    base, interval, max_off_entries, max_time_entries = limits
    oi_off, oi_pos, ti_ts, ti_off = entries
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


def _build_py(positions, sizes, last_offsets, max_ts, n, limits, entries):
    base, interval, max_off_entries, max_time_entries = (int(v) for v in limits)
    oi_off, oi_pos, ti_ts, ti_off = entries
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


def _build_entries(fn: Any, scan: dict[str, Any], n_valid: int, base_offset: int, index_interval_bytes: int,
                   max_index_size: int, path: str | None) -> dict[str, np.ndarray]:
    max_off = max_index_size // 8
    max_time = max_index_size // 12
    cap_o = min(max_off, n_valid) + 1
    cap_t = min(max_time, n_valid + 1) + 1
    entries = IndexEntries(np.zeros(cap_o, np.int64), np.zeros(cap_o, np.int64), np.zeros(cap_t, np.int64),
                           np.zeros(cap_t, np.int64))  # fmt: skip
    limits = IndexLimits(np.int64(base_offset), np.int64(index_interval_bytes), np.int64(max_off), np.int64(max_time))
    no, nt, err, at = fn(scan["position"], scan["size"], scan["last_offset"], scan["max_timestamp"], n_valid, limits,
                         entries)  # fmt: skip
    if err != BUILD_OK:
        pos = int(scan["position"][at]) if at < scan["count"] else None
        msg = _BUILD_MESSAGES[err]
        if err in (BUILD_OFFSET_INDEX_FULL, BUILD_TIME_INDEX_FULL):
            raise IndexFullError(msg, path=path, offset=pos)
        raise CorruptDataError(msg, path=path, offset=pos)
    return {
        "offset_offsets": entries.offset_offsets[:no].copy(),
        "offset_positions": entries.offset_positions[:no].copy(),
        "time_timestamps": entries.time_timestamps[:nt].copy(),
        "time_offsets": entries.time_offsets[:nt].copy(),
    }


def build_index_entries(
    scan: dict[str, Any],
    n_valid: int,
    base_offset: int,
    index_interval_bytes: int,
    max_index_size: int,
    *,
    path: str | None = None,
) -> dict[str, np.ndarray]:
    """Index entries that Kafka's ``LogSegment.recover`` writes for the first ``n_valid`` batches.

    Returns ``offset_offsets``/``offset_positions`` (absolute offsets) and ``time_timestamps``/
    ``time_offsets``, including the final time entry.  ``max_index_size`` bounds the number of
    entries as on disk (``floor(size/8)`` / ``floor(size/12)``); exceeding it raises
    :class:`IndexFullError`.  Offsets going backwards or overflowing raise :class:`CorruptDataError`.
    """
    return _build_entries(_build, scan, n_valid, base_offset, index_interval_bytes, max_index_size, path)


def build_index_entries_py(
    scan: dict[str, Any],
    n_valid: int,
    base_offset: int,
    index_interval_bytes: int,
    max_index_size: int,
    *,
    path: str | None = None,
) -> dict[str, np.ndarray]:
    """Twin of :func:`build_index_entries`: the same rule interpreted."""
    return _build_entries(_build_py, scan, n_valid, base_offset, index_interval_bytes, max_index_size, path)


register("kafka.build_index_entries", build_index_entries, build_index_entries_py)
