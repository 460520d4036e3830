"""The numba kernels of :mod:`mqstore.kernels.rocketmq.framing` (the development path and the
fallback when the native module ``_nat_rmq_scan`` is not built; imported on first use)."""

from __future__ import annotations

import numpy as np
from numba import njit

from mqstore.formats.rocketmq.record import BLANK_MAGIC, MAGIC_V1, MAGIC_V2
from mqstore.kernels.endian import rd_i32, rd_i64
from mqstore.kernels.rocketmq.framing import (
    FIXED_MIN,
    MIN_RECORD_SIZE,
    ST_BAD,
    ST_BADMAGIC,
    ST_BLANK,
    ST_LIMIT,
    ST_NOHDR,
    ST_OK,
    ST_RANGE,
    ST_TRUNC,
)


@njit(cache=True, nogil=True)
def head(buf: np.ndarray, pos: int, end: int, min_size: int) -> tuple[int, int]:
    """``(state, TOTALSIZE)`` of the record header at ``pos``: ``ST_OK`` or why the walk stops."""
    remaining = end - pos
    if remaining <= 4:
        return ST_NOHDR, 0
    total = rd_i32(buf, pos)
    magic = rd_i32(buf, pos + 4) if remaining >= 8 else 0
    if magic == BLANK_MAGIC:
        return ST_BLANK, total
    if total < 0 or total > remaining:
        return ST_TRUNC, total
    if magic != MAGIC_V1 and magic != MAGIC_V2:
        return ST_BADMAGIC, total
    if total < min_size:
        return ST_BAD, total
    return ST_OK, total


@njit(cache=True, nogil=True)
def walk(buf: np.ndarray, start: int, end: int, limit: int, pos_out: np.ndarray, size_out: np.ndarray, fill: bool):
    """Cheap boundary walk (TOTALSIZE + magic only): ``(count, stop position, state)``."""
    pos = start
    n = 0
    state = ST_RANGE
    while pos < end:
        if limit >= 0 and n >= limit:
            state = ST_LIMIT
            break
        head_state, total = head(buf, pos, end, MIN_RECORD_SIZE)
        if head_state != ST_OK:
            state = head_state
            break
        if fill:
            pos_out[n] = pos
            size_out[n] = total
        n += 1
        pos += total
    return n, pos, state


@njit(cache=True, nogil=True)
def find_boundary(buf: np.ndarray, base: int, p: int, end: int, limit: int) -> int:
    """The first position ``q >= p`` that looks like a message record (v1/v2 magic, TOTALSIZE
    that fits, PHYSICALOFFSET == ``base + q``), or -1 within ``limit`` bytes."""
    stop = min(end - FIXED_MIN, p + limit)
    q = p
    while q <= stop:
        magic = rd_i32(buf, q + 4)
        if magic == MAGIC_V1 or magic == MAGIC_V2:
            total = rd_i32(buf, q)
            if FIXED_MIN <= total <= end - q and rd_i64(buf, q + 28) == base + q:
                return q
        q += 1
    return -1
