"""The numba kernel of :mod:`mqstore.kernels.kafka.index_build` (the development path and the
fallback when the native module ``_nat_kafka`` is not built; imported on first use)."""

from __future__ import annotations

import numpy as np
from numba import njit

from mqstore.kernels.kafka.index_build import (
    BUILD_OFFSET_INDEX_FULL,
    BUILD_OFFSET_NOT_INCREASING,
    BUILD_OFFSET_OVERFLOW,
    BUILD_OK,
    BUILD_POSITION_OVERFLOW,
    BUILD_TIME_INDEX_FULL,
)


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
