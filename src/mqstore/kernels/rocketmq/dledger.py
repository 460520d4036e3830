"""The DLedger entry walk: the entries of one data file by DLedger's recovery rules (layout:
:mod:`mqstore.formats.rocketmq.dledger`), as columns.

``walk_dledger_entries(buf, base, end, start, prev_index, prev_term, cap)`` walks from in-file
position ``start`` while fewer than ``cap`` entries are found and returns ``(pos, size, index,
term, body_crc, status, stop)``: the accepted entries' global positions, sizes, indexes, terms and
bodyCrc fields (int64 arrays), why the walk stopped (one of the ``W_*`` codes) and the in-file
position where it stopped (the next entry's place, the filler's, or the entry that broke a rule).
An entry is accepted when its magic is 1, its size is above 44 and equals its body length + 48,
its ``pos`` field is its own global position, it fits before ``end``, its index follows the previous
one (``prev_index`` for the first; -1: any) and its term is not below the previous one.

``walk_dledger_entries_py`` is the pure-Python twin (the rules written out); both release nothing
but a pass over the headers.
"""

from __future__ import annotations

import numpy as np
from numba import njit

from mqstore.kernels.endian import as_u8, rd_i32, rd_i64
from mqstore.kernels.registry import register

W_END = 0  # zeros (unwritten space) or fewer than 4 bytes left: the end of the data
W_BLANK = 1  # the filler (magic -1) at ``stop``: the file is closed
W_CUT = 2  # a header cut by the end of the file
W_HEADER = 3  # a header that breaks a rule (magic, size, body length, pos)
W_PAST = 4  # an entry that runs past the end of the file
W_GAP = 5  # an index that does not follow the previous one
W_TERM = 6  # a term below the previous one
W_LIMIT = 7  # ``cap`` entries found: call again from ``stop``

HEADER = 48


@njit(cache=True, nogil=True)
def _walk(u8, base, end, start, prev_index, prev_term, out_pos, out_size, out_index, out_term, out_crc):
    cap = out_pos.shape[0]
    n = 0
    p = start
    while p + 4 <= end:
        if n == cap:
            return n, W_LIMIT, p
        magic = rd_i32(u8, p)
        if magic == -1:
            return n, W_BLANK, p
        if magic == 0:
            zero = True
            for q in range(p, min(p + HEADER, end)):
                if u8[q] != 0:
                    zero = False
                    break
            if zero:
                return n, W_END, p
        if p + HEADER > end:
            return n, W_CUT, p
        size = rd_i32(u8, p + 4)
        index = rd_i64(u8, p + 8)
        term = rd_i64(u8, p + 16)
        pos = rd_i64(u8, p + 24)
        crc = rd_i32(u8, p + 40)
        blen = rd_i32(u8, p + 44)
        if magic != 1 or size <= 44 or blen + HEADER != size or pos != base + p:
            return n, W_HEADER, p
        if p + size > end:
            return n, W_PAST, p
        if prev_index != -1 and index != prev_index + 1:
            return n, W_GAP, p
        if term < prev_term:
            return n, W_TERM, p
        out_pos[n] = base + p
        out_size[n] = size
        out_index[n] = index
        out_term[n] = term
        out_crc[n] = crc
        n += 1
        prev_index = index
        prev_term = term
        p += size
    return n, W_END, p


def _check(u8: np.ndarray, end: int, start: int) -> int:
    end = min(int(end), len(u8))
    if start < 0 or start > end:
        from mqstore.errors import InvalidArgumentError

        raise InvalidArgumentError(f"walk start {start} outside [0, {end}]")
    return end


def walk_dledger_entries(buf, base: int, end: int, start: int = 0, prev_index: int = -1, prev_term: int = -1,
                         cap: int = 1 << 20):
    """Fast path (numba; see the module docstring)."""
    u8 = as_u8(buf)
    end = _check(u8, end, start)
    cap = max(1, min(int(cap), (end - start) // HEADER + 1))
    cols = [np.empty(cap, np.int64) for _ in range(5)]
    n, status, stop = _walk(u8, int(base), end, int(start), int(prev_index), int(prev_term), *cols)
    return (*(c[:n].copy() for c in cols), int(status), int(stop))


def walk_dledger_entries_py(buf, base: int, end: int, start: int = 0, prev_index: int = -1, prev_term: int = -1,
                            cap: int = 1 << 20):
    """Twin of :func:`walk_dledger_entries`: the same rules, one entry at a time."""
    u8 = as_u8(buf)
    end = _check(u8, end, start)
    raw = memoryview(u8)

    def i32(at: int) -> int:
        return int.from_bytes(raw[at : at + 4], "big", signed=True)

    def i64(at: int) -> int:
        return int.from_bytes(raw[at : at + 8], "big", signed=True)

    cols: list[list[int]] = [[], [], [], [], []]
    p = start
    status = W_END
    while p + 4 <= end:
        if len(cols[0]) >= cap:
            status = W_LIMIT
            break
        magic = i32(p)
        if magic == -1:
            status = W_BLANK
            break
        if magic == 0 and not any(raw[p : min(p + HEADER, end)]):
            status = W_END
            break
        if p + HEADER > end:
            status = W_CUT
            break
        size, index, term, pos, crc, blen = i32(p + 4), i64(p + 8), i64(p + 16), i64(p + 24), i32(p + 40), i32(p + 44)
        if magic != 1 or size <= 44 or blen + HEADER != size or pos != base + p:
            status = W_HEADER
            break
        if p + size > end:
            status = W_PAST
            break
        if prev_index != -1 and index != prev_index + 1:
            status = W_GAP
            break
        if term < prev_term:
            status = W_TERM
            break
        for c, v in zip(cols, (base + p, size, index, term, crc), strict=True):
            c.append(v)
        prev_index, prev_term = index, term
        p += size
    return (*(np.array(c, np.int64) for c in cols), status, p)


G_OK = 0  # every entry's message was gathered
G_SMALL = 1  # the body is too short to hold a message record header
G_TOTAL = 2  # the message's TOTALSIZE is not the body length
G_PHYSICAL = 3  # the message's PHYSICALOFFSET is not its own position (entry position + 48)
_POS_PHYSICALOFFSET = 28


@njit(cache=True, nogil=True)
def _gather(u8, base, entry_pos, entry_size, out):
    o = 0
    for k in range(entry_pos.shape[0]):
        b = entry_pos[k] - base + HEADER
        n = entry_size[k] - HEADER
        if n < _POS_PHYSICALOFFSET + 8:
            return k, o, G_SMALL, n
        total = rd_i32(u8, b)
        if total != n:
            return k, o, G_TOTAL, total
        phy = rd_i64(u8, b + _POS_PHYSICALOFFSET)
        if phy != base + b:
            return k, o, G_PHYSICAL, phy
        out[o : o + n] = u8[b : b + n]
        o += n
    return entry_pos.shape[0], o, G_OK, 0


def gather_entry_bodies(buf, base: int, entry_pos: np.ndarray, entry_size: np.ndarray):
    """The messages of consecutive accepted entries of one data file (``buf``, global position
    ``base``; the entries' global positions and sizes) copied back to back, as long as each one
    fills its entry's body and names its own offset: ``(bytes as uint8, entries gathered, code,
    value)``; ``code`` is ``G_OK`` or why entry ``entries gathered`` was not (with the value
    found: the body length, TOTALSIZE or PHYSICALOFFSET)."""
    u8 = as_u8(buf)
    entry_pos = np.ascontiguousarray(entry_pos, np.int64)
    entry_size = np.ascontiguousarray(entry_size, np.int64)
    out = np.empty(int(np.maximum(entry_size - HEADER, 0).sum()), np.uint8)
    k, o, code, value = _gather(u8, int(base), entry_pos, entry_size, out)
    return out[:o], int(k), int(code), int(value)


def gather_entry_bodies_py(buf, base: int, entry_pos: np.ndarray, entry_size: np.ndarray):
    """Twin of :func:`gather_entry_bodies`."""
    raw = memoryview(as_u8(buf))
    parts: list[bytes] = []
    for k, (p, size) in enumerate(zip(np.asarray(entry_pos).tolist(), np.asarray(entry_size).tolist(), strict=True)):
        b, n = p - base + HEADER, size - HEADER
        if n < _POS_PHYSICALOFFSET + 8:
            return np.frombuffer(b"".join(parts), np.uint8), k, G_SMALL, n
        total = int.from_bytes(raw[b : b + 4], "big", signed=True)
        if total != n:
            return np.frombuffer(b"".join(parts), np.uint8), k, G_TOTAL, total
        phy = int.from_bytes(raw[b + _POS_PHYSICALOFFSET : b + _POS_PHYSICALOFFSET + 8], "big", signed=True)
        if phy != base + b:
            return np.frombuffer(b"".join(parts), np.uint8), k, G_PHYSICAL, phy
        parts.append(bytes(raw[b : b + n]))
    return np.frombuffer(b"".join(parts), np.uint8), len(parts), G_OK, 0


register("rocketmq.walk_dledger_entries", walk_dledger_entries, walk_dledger_entries_py)
register("rocketmq.gather_entry_bodies", gather_entry_bodies, gather_entry_bodies_py)
