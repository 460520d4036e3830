"""Reading a CommitLog that another process is writing (the streaming dispatch's tail).

A tailing reader cannot know the writer's committed position: it walks record boundaries and
stops before a record still being copied (:func:`last_record_complete`), so it never returns a
torn record.  Segments are listed with storage's naming rule and only when fully sized (a file
being created may show a smaller size for a moment).
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from mqstore.errors import CorruptDataError, DataLossError
from mqstore.storage.mapped import ReadOnlyMap
from mqstore.storage.rocketmq.layout import commitlog_dir, commitlog_segments, segment_name

if TYPE_CHECKING:  # pragma: no cover
    from mqstore.kernels.rocketmq.scan import DispatchBatch


def _map(path: str | Path, size: int) -> ReadOnlyMap:
    return ReadOnlyMap(path, what="CommitLog segment", size=size)


def last_record_complete(mm: Any, pos: int, size: int) -> bool:
    """Whether the tail record of a walk is completely written.  A record still being copied by
    the writer (another process) shows zeros where its bytes have not arrived: its fields do not
    add up to TOTALSIZE, or its body does not match BODYCRC, or its properties (which end with a
    separator, never a NUL) end with a zero byte.  Last, its bytes must not change over a short
    pause (a copy of one record takes microseconds)."""
    import time

    from mqstore.formats.rocketmq.record import check_record

    res = check_record(mm, pos, pos + size, check_crc=True, read_body=True)
    if not res.success or res.record is None:
        return False
    if res.record.properties_text and mm[pos + size - 1] == 0:
        return False
    before = mm[pos : pos + size]
    time.sleep(0.002)
    return mm[pos : pos + size] == before


def complete_end(store: str | os.PathLike[str], seg_size: int, start: int, max_bytes: int | None = None) -> int:
    """The offset just past the last complete record at or after ``start`` (at most about
    ``max_bytes`` further, but always at least one record when there is one), following blank
    end-of-segment records into the next segment.  Returns ``start`` when nothing new is there."""
    from mqstore.kernels.rocketmq.framing import record_positions
    from mqstore.kernels.rocketmq.scan import STOP_BLANK

    # only fully sized segments: a segment being created may be visible for a moment with a
    # smaller size (it is not there yet)
    segs = commitlog_segments(store, size=seg_size)
    if not segs:
        return start
    pos_global = max(start, segs[0].base)
    budget = max_bytes if max_bytes is not None and max_bytes > 0 else None
    seg_index = {s.base: s.path for s in segs}
    while True:
        base = pos_global - pos_global % seg_size
        path = seg_index.get(base)
        if path is None:
            return pos_global
        m = _map(path, seg_size)
        mm = m.mm
        try:
            positions, sizes, stop, next_pos = record_positions(mm, pos_global - base, seg_size)
            n = len(positions)
            if n and stop != STOP_BLANK and not last_record_complete(mm, int(positions[-1]), int(sizes[-1])):
                n -= 1  # the writer may still be copying it
                next_pos = int(positions[n]) if n < len(positions) else next_pos
                stop = "partial"
        finally:
            del mm
            m.close()
        if budget is not None and n:
            ends = positions[:n] + sizes[:n]  # in-segment end of each record
            allowed = pos_global - base + budget
            fit = max(int(np.searchsorted(ends, allowed, side="right")), 1)
            if fit < n:
                return base + int(ends[fit - 1])
            budget -= int(ends[n - 1]) - (pos_global - base)
        new_end = base + int(next_pos)
        if stop == STOP_BLANK:
            if base + seg_size not in seg_index:
                return new_end  # the blank is dispatched with the next segment's first records
            pos_global = base + seg_size
            if budget is not None and budget <= 0:
                return pos_global
            continue
        return new_end


def scan_tail_range(store: str | os.PathLike[str], seg_size: int, base: int, start: int, end: int, *,
                    check_crc: bool = False) -> DispatchBatch:
    """The dispatch columns of the records ``[start, end)`` of the segment at ``base`` (a range
    :func:`complete_end` returned): :class:`DataLossError` when retention deleted the segment
    first, :class:`CorruptDataError` on an invalid record."""
    from mqstore.kernels.rocketmq.scan import STOP_INVALID, scan_segment

    path = commitlog_dir(store) / segment_name(base)
    if not path.exists():
        raise DataLossError(f"CommitLog segment {path.name} was deleted before offsets "
                            f"[{start}, {end}) were dispatched", path=str(path))
    with _map(path, seg_size) as m:
        batch = scan_segment(m.array, base, start - base, end - base, check_crc=check_crc)
    if batch.stop == STOP_INVALID:
        raise CorruptDataError(batch.error or "invalid record", path=str(path), offset=batch.next_offset)
    return batch
