"""CommitLog record framing: where records start and end, and why a walk stops.

Every record starts with its TOTALSIZE and magic (big-endian int32s); a blank end-of-segment
filler has the blank magic.  :func:`head` classifies the header at a position, :func:`walk`
follows TOTALSIZE from record to record (the cheap boundary pre-scan behind
:func:`record_positions`), and :func:`find_boundary` finds a record start by its signature (to cut a
segment between threads).  The stop states are shared by the dispatch scan and the reader.
"""

from __future__ import annotations

import numpy as np
from numba import njit

from mqstore.errors import InvalidArgumentError
from mqstore.formats.rocketmq.record import BLANK_MAGIC, MAGIC_V1, MAGIC_V2
from mqstore.kernels.endian import as_u8, rd_i32, rd_i64
from mqstore.kernels.registry import register

STOP_END = "end"  # reached the end of the requested range (or a partial record that may still be written)
STOP_BLANK = "blank"  # an end-of-segment filler: continue in the next segment
STOP_INVALID = "invalid"  # an unreadable record (bad magic, bad CRC, torn): stop here
STOP_LIMIT = "limit"  # max_records reached

MIN_RECORD_SIZE = 91  # IPv4 hosts, magic v1, empty body/topic/properties
FIXED_MIN = 88  # 48 + 8 (born host) + 8 + 8 (store host) + 12 + 4: smaller records cannot decode

# stop states of the kernels
ST_RANGE = 0  # reached ``end``
ST_LIMIT = 1  # max_records
ST_BLANK = 2  # blank end-of-segment record
ST_TRUNC = 3  # TOTALSIZE runs past ``end`` (not written yet)
ST_NOHDR = 4  # <= 4 bytes left
ST_BADMAGIC = 5  # neither v1, v2 nor blank
ST_BAD = 6  # undecodable, CRC mismatch, or a length mismatch that is not skipped
ST_FULL = 7  # (scan only) an output array is full: continue with a new chunk at ``pos``
ST_OK = -1  # (internal) a record header that may be walked


def check_range(buf: np.ndarray, start: int, end: int) -> None:
    if start < 0 or end > len(buf) or start > end:
        raise InvalidArgumentError(f"scan range [{start}, {end}) is outside the buffer of {len(buf)} bytes")


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


def walk_stop(state: int, u8: np.ndarray, pos: int, end: int) -> str:
    """The ``STOP_*`` of a walk that ended in ``state`` at ``pos`` (a zero-filled header after the
    last record is the end of the data, not an invalid record)."""
    if state in (ST_RANGE, ST_TRUNC):
        return STOP_END
    if state == ST_LIMIT:
        return STOP_LIMIT
    if state == ST_BLANK:
        return STOP_BLANK
    if state in (ST_NOHDR, ST_BADMAGIC) and not u8[pos : min(end, pos + 8)].any():
        return STOP_END
    return STOP_INVALID


def record_positions(
    buf: bytes | bytearray | memoryview | np.ndarray, start: int, end: int
) -> tuple[np.ndarray, np.ndarray, str, int]:
    """Cheap boundary pre-scan of ``buf[start:end]`` (TOTALSIZE and magic of each record only).

    Returns ``(positions int64, sizes int32, stop, next_pos)``: the in-buffer positions and sizes of
    the records, why the walk stopped (``STOP_END``, ``STOP_BLANK`` or ``STOP_INVALID``, the same
    states as the dispatch scan) and the position where it stopped.  Used to split a segment
    between workers; it does not validate record contents (length-mismatched records are listed).
    """
    u8 = as_u8(buf)
    check_range(u8, start, end)
    empty64, empty32 = np.empty(0, np.int64), np.empty(0, np.int32)
    n, _, _ = walk(u8, start, end, -1, empty64, empty32, False)
    positions = np.empty(int(n), np.int64)
    sizes = np.empty(int(n), np.int32)
    n, pos, state = walk(u8, start, end, -1, positions, sizes, True)
    return positions, sizes, walk_stop(int(state), u8, int(pos), end), int(pos)


def record_positions_py(
    buf: bytes | bytearray | memoryview | np.ndarray, start: int, end: int
) -> tuple[np.ndarray, np.ndarray, str, int]:
    """Twin of :func:`record_positions`, the header rules written out in Python."""
    u8 = as_u8(buf)
    check_range(u8, start, end)
    raw = u8.tobytes()
    positions: list[int] = []
    sizes: list[int] = []
    pos, stop = start, STOP_END
    while pos < end:
        remaining = end - pos
        if remaining <= 4:
            stop = STOP_INVALID if any(raw[pos:end]) else STOP_END
            break
        total = int.from_bytes(raw[pos : pos + 4], "big", signed=True)
        magic = int.from_bytes(raw[pos + 4 : pos + 8], "big", signed=True) if remaining >= 8 else 0
        if magic == BLANK_MAGIC:
            stop = STOP_BLANK
            break
        if total < 0 or total > remaining:
            break
        if magic not in (MAGIC_V1, MAGIC_V2):
            stop = STOP_INVALID if any(raw[pos : min(end, pos + 8)]) else STOP_END
            break
        if total < MIN_RECORD_SIZE:
            stop = STOP_INVALID
            break
        positions.append(pos)
        sizes.append(total)
        pos += total
    return np.array(positions, np.int64), np.array(sizes, np.int32), stop, pos


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


register("rocketmq.record_positions", record_positions, record_positions_py)
