"""The numba kernels of :mod:`mqstore.kernels.kafka.batches` (the development path and the fallback
when the native module ``_nat_kafka`` is not built; imported on first use, so a process on the
native path never loads numba)."""

from __future__ import annotations

import numpy as np
from numba import njit

from mqstore.kernels.endian import rd_i8, rd_i32, rd_i64, rd_u16, rd_u32
from mqstore.kernels.kafka.batches import STOP_BAD_SIZE, STOP_END, STOP_TORN


@njit(cache=True)
def _scan_count(a, start, end):
    p = start
    n = 0
    while True:
        if p >= end - 17:
            return n, p, STOP_END
        size = rd_i32(a, p + 8)
        if size < 14:
            return n, p, STOP_BAD_SIZE
        if p > end - 12 - size:
            return n, p, STOP_TORN
        n += 1
        p += 12 + size


@njit(cache=True)
def _scan_fill(a, start, n, cols):
    position, size, base_offset, last_offset, max_ts, base_ts, epoch, magic, attrs, count, crc = cols
    p = start
    end = a.shape[0]
    for i in range(n):
        s = rd_i32(a, p + 8)
        m = rd_i8(a, p + 16)
        total = s + 12
        position[i] = p
        size[i] = total
        magic[i] = m
        off = rd_i64(a, p)
        if m >= 2:
            epoch[i] = rd_i32(a, p + 12)
            if total >= 61 and p + 61 <= end:
                crc[i] = rd_u32(a, p + 17)
                attrs[i] = rd_u16(a, p + 21)
                base_offset[i] = off
                last_offset[i] = off + rd_i32(a, p + 23)
                base_ts[i] = rd_i64(a, p + 27)
                max_ts[i] = rd_i64(a, p + 35)
                count[i] = rd_i32(a, p + 57)
            else:
                crc[i] = rd_u32(a, p + 17) if p + 21 <= end else 0
                attrs[i] = 0
                base_offset[i] = off
                last_offset[i] = off
                base_ts[i] = -1
                max_ts[i] = -1
                count[i] = 0
        else:
            epoch[i] = -1
            crc[i] = rd_u32(a, p + 12)
            attrs[i] = np.int64(a[p + 17])
            base_offset[i] = -1
            last_offset[i] = off
            count[i] = 1
            if m == 1 and s >= 22:
                base_ts[i] = rd_i64(a, p + 18)
            else:
                base_ts[i] = -1
            max_ts[i] = base_ts[i]
        p += total
