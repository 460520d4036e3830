"""The index entries Kafka's recovery writes for a segment's batches (spec §4.5), compiled and twin.

:func:`build_index_entries` replays ``LogSegment.recover`` over scanned batch columns
(:mod:`.batches`): an offset-index entry every ``index.interval.bytes``, the time index following
the largest timestamp so far, and the final time entry.  The compiled rule and its interpreted twin
are the same code (``_build`` is ``_build_py`` under numba's rules), grouped arguments:
:class:`IndexLimits` in, :class:`IndexEntries` out.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, NamedTuple

from mqstore.errors import CorruptDataError, IndexFullError
from mqstore.kernels.backend import native, numba_module
from mqstore.kernels.registry import register

if TYPE_CHECKING:  # (numpy is imported by the functions that use it: see kernels.kafka.file_scan.recover_native)
    import numpy as np

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


def build_error(err: int, position: int | None, path: str | None) -> CorruptDataError | IndexFullError:
    """The typed error of a ``BUILD_*`` code (``position``: of the batch it concerns)."""
    msg = _BUILD_MESSAGES[err]
    if err in (BUILD_OFFSET_INDEX_FULL, BUILD_TIME_INDEX_FULL):
        return IndexFullError(msg, path=path, offset=position)
    return CorruptDataError(msg, path=path, offset=position)


def _build_entries(fn: Any, scan: dict[str, Any], n_valid: int, base_offset: int, index_interval_bytes: int,
                   max_index_size: int, path: str | None) -> dict[str, np.ndarray]:
    import numpy as np

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
        raise build_error(err, int(scan["position"][at]) if at < scan["count"] else None, path)
    return {
        "offset_offsets": entries.offset_offsets[:no].copy(),
        "offset_positions": entries.offset_positions[:no].copy(),
        "time_timestamps": entries.time_timestamps[:nt].copy(),
        "time_offsets": entries.time_offsets[:nt].copy(),
    }


def _build_numba(positions: Any, sizes: Any, last_offsets: Any, max_ts: Any, n: int, limits: IndexLimits,
                 entries: IndexEntries) -> tuple[int, int, int, int]:
    return numba_module("mqstore.kernels.kafka.index_build_nb")._build(positions, sizes, last_offsets, max_ts, n,
                                                                        limits, entries)


def _build_native(positions: Any, sizes: Any, last_offsets: Any, max_ts: Any, n: int, limits: IndexLimits,
                  entries: IndexEntries) -> tuple[int, int, int, int]:
    import numpy as np

    return _NAT.build_index(np.ascontiguousarray(positions, np.int64), np.ascontiguousarray(sizes, np.int32),
                            np.ascontiguousarray(last_offsets, np.int64), np.ascontiguousarray(max_ts, np.int64),
                            int(n), *(int(v) for v in limits), *entries)


def build_index_entries_numba(
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
    return _build_entries(_build_numba, scan, n_valid, base_offset, index_interval_bytes, max_index_size, path)


def build_index_entries_native(
    scan: dict[str, Any],
    n_valid: int,
    base_offset: int,
    index_interval_bytes: int,
    max_index_size: int,
    *,
    path: str | None = None,
) -> dict[str, np.ndarray]:
    """:func:`build_index_entries_numba` in C (``_nat_kafka``)."""
    return _build_entries(_build_native, scan, n_valid, base_offset, index_interval_bytes, max_index_size, path)


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


_NAT = native("_nat_kafka")
build_index_entries = build_index_entries_native if _NAT is not None else build_index_entries_numba
register("kafka.build_index_entries", build_index_entries_numba, build_index_entries_py,
         native=build_index_entries_native if _NAT is not None else None)
