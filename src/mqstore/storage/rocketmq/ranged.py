"""CommitLog segment ranges read through a :class:`~mqstore.storage.fileio.RangeFile`: a local
segment is handed over whole (its mapping), a remote one (an object store) in bounded chunks
that each end at a record boundary, so that the record decoders and the boundary walk work on
every chunk unchanged and no request reads more than :data:`~mqstore.storage.fileio.CHUNK_BYTES`
(or one record, when a record is larger).
"""

from __future__ import annotations

from collections.abc import Iterator

import numpy as np

from mqstore.formats.rocketmq.record import MAGIC_V1, MAGIC_V2
from mqstore.kernels.rocketmq.framing import MIN_RECORD_SIZE, STOP_BLANK, STOP_END, record_positions
from mqstore.storage import fileio
from mqstore.storage.fileio import RangeFile

__all__ = ["record_chunks", "scan_positions"]


def _be32(b: np.ndarray, p: int) -> int:
    return int.from_bytes(b[p:p + 4].tobytes(), "big", signed=True)


def record_chunks(f: RangeFile, start: int, end: int, *, chunk: int | None = None
                  ) -> Iterator[tuple[np.ndarray, int, int, int]]:
    """``(buf, buf_pos, s, e)``: ``buf[0]`` is byte ``buf_pos`` of the file and ``buf[s:e]`` the
    part of ``[start, end)`` (``start`` a record boundary) to decode.  Every chunk but the last
    ends at a record boundary; the last one ends where ``[start, end)`` or the data ends (a
    blank record, unwritten bytes, an unreadable record), so the decoders' stop rules apply to
    it as to a whole file.  A local file gives one chunk: its whole mapping."""
    stop = min(end, f.size)
    if f.whole is not None:
        yield f.whole, 0, start, max(start, stop)
        return
    chunk = chunk or fileio.CHUNK_BYTES
    p = start
    n = chunk
    while p < stop:
        buf = f.read(p, min(n, stop - p))
        if p + len(buf) >= stop:
            yield buf, p, 0, len(buf)
            return
        _pos, _sizes, st, sp = record_positions(buf, 0, len(buf))
        rem = len(buf) - sp
        crossing = False
        if st != STOP_BLANK and 0 < rem < 8:
            crossing = True  # a header cut by the chunk's end (sp > 0: the chunk is far longer)
        elif st == STOP_END and rem >= 8:
            total, magic = _be32(buf, sp), _be32(buf, sp + 4)
            crossing = magic in (MAGIC_V1, MAGIC_V2) and total > rem and total >= MIN_RECORD_SIZE
            if crossing and sp == 0:  # one record larger than the chunk: read it whole
                n = total
                continue
        if (st == STOP_END and rem == 0) or (crossing and sp > 0):
            yield buf, p, 0, sp
            p += sp
            n = chunk
            continue
        yield buf, p, 0, len(buf)  # the data ends in this chunk (blank, zeros, invalid)
        return


def scan_positions(f: RangeFile, start: int, end: int, *, limit: int | None = None, chunk: int | None = None
                   ) -> tuple[np.ndarray, np.ndarray, str, int]:
    """:func:`~mqstore.kernels.rocketmq.framing.record_positions` of ``f[start:end)`` in file
    positions, read chunk by chunk; with ``limit`` it may stop once more than ``limit`` records
    are found (the caller cuts the list)."""
    pos_parts: list[np.ndarray] = []
    size_parts: list[np.ndarray] = []
    count = 0
    st, sp = STOP_END, start
    for buf, bp, s, e in record_chunks(f, start, end, chunk=chunk):
        positions, sizes, st, stop_pos = record_positions(buf, s, e)
        pos_parts.append(positions + np.int64(bp))
        size_parts.append(sizes)
        sp = bp + stop_pos
        count += len(positions)
        if limit is not None and count > limit:
            break
    if not pos_parts:
        return np.empty(0, np.int64), np.empty(0, np.int32), st, sp
    return (np.concatenate(pos_parts) if len(pos_parts) > 1 else pos_parts[0],
            np.concatenate(size_parts) if len(size_parts) > 1 else size_parts[0], st, sp)
