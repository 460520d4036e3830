"""CommitLog record framing: where records start and end, and why a walk stops.

Every record starts with its TOTALSIZE and magic (big-endian int32s); a blank end-of-segment
filler has the blank magic.  :func:`head` classifies the header at a position, :func:`walk`
follows TOTALSIZE from record to record (the cheap boundary pre-scan behind
:func:`record_positions`), and :func:`find_boundary` finds a record start by its signature (to cut a
segment between threads).  The stop states are shared by the dispatch scan and the reader.

Those three are compiled twice: in C (the native module ``_nat_rmq_scan``) and with numba
(:mod:`mqstore.kernels.rocketmq.framing_nb`, imported on first use, so the native path never loads
numba); this module keeps the constants, the Python wrappers and the twins.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from mqstore.errors import InvalidArgumentError
from mqstore.formats.rocketmq.record import BLANK_MAGIC, MAGIC_V1, MAGIC_V2
from mqstore.kernels.backend import native, numba_module
from mqstore.kernels.buffers import as_u8
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


def _nb() -> Any:
    return numba_module("mqstore.kernels.rocketmq.framing_nb")


def find_boundary_any(u8: np.ndarray, base: int, p: int, end: int, limit: int, *, use_native: bool = True) -> int:
    """:func:`~mqstore.kernels.rocketmq.framing_nb.find_boundary` on the native module when built
    (and ``use_native``), else on numba."""
    if use_native and _NAT is not None:
        return int(_NAT.find_boundary(u8, int(base), int(p), int(end), int(limit)))
    return int(_nb().find_boundary(u8, np.int64(base), np.int64(p), np.int64(end), np.int64(limit)))


def _record_positions(buf: object, start: int, end: int, nat: Any) -> tuple[np.ndarray, np.ndarray, str, int]:
    u8 = as_u8(buf)
    check_range(u8, start, end)
    walk = nat.walk if nat is not None else _nb().walk
    empty64, empty32 = np.empty(0, np.int64), np.empty(0, np.int32)
    n, _, _ = walk(u8, start, end, -1, empty64, empty32, False)
    positions = np.empty(int(n), np.int64)
    sizes = np.empty(int(n), np.int32)
    n, pos, state = walk(u8, start, end, -1, positions, sizes, True)
    return positions, sizes, walk_stop(int(state), u8, int(pos), end), int(pos)


def record_positions_numba(
    buf: bytes | bytearray | memoryview | np.ndarray, start: int, end: int
) -> tuple[np.ndarray, np.ndarray, str, int]:
    """Cheap boundary pre-scan of ``buf[start:end]`` (TOTALSIZE and magic of each record only).

    Returns ``(positions int64, sizes int32, stop, next_pos)``: the in-buffer positions and sizes of
    the records, why the walk stopped (``STOP_END``, ``STOP_BLANK`` or ``STOP_INVALID``, the same
    states as the dispatch scan) and the position where it stopped.  Used to split a segment
    between workers; it does not validate record contents (length-mismatched records are listed).
    """
    return _record_positions(buf, start, end, None)


def record_positions_native(
    buf: bytes | bytearray | memoryview | np.ndarray, start: int, end: int
) -> tuple[np.ndarray, np.ndarray, str, int]:
    """:func:`record_positions_numba` in C (``_nat_rmq_scan.walk``)."""
    return _record_positions(buf, start, end, _NAT)


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



_NAT = native("_nat_rmq_scan")
record_positions = record_positions_native if _NAT is not None else record_positions_numba
register("rocketmq.record_positions", record_positions_numba, record_positions_py,
         native=record_positions_native if _NAT is not None else None)
