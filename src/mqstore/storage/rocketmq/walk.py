"""Record boundary walks over CommitLog segments, local or in an object store (read through a
:class:`~mqstore.storage.fileio.FileIO`): where the records are, where a read may start (a
record boundary), how a segment range is cut into record-aligned pieces.  The planning of the
Spark sources and the Spark rebuild's chunking use these; a walk never counts a record a writer
is still copying (the rule of :mod:`mqstore.storage.rocketmq.tail`).
"""

from __future__ import annotations

from dataclasses import dataclass
from itertools import pairwise

import numpy as np

from mqstore.errors import CorruptDataError, DataLossError
from mqstore.formats.rocketmq.record import check_record
from mqstore.kernels.arrays import unique
from mqstore.kernels.rocketmq.scan import STOP_BLANK, STOP_INVALID
from mqstore.storage.fileio import CHUNK_BYTES, LOCAL, FileIO
from mqstore.storage.rocketmq.dledger import walk_file
from mqstore.storage.rocketmq.layout import SegmentFile
from mqstore.storage.rocketmq.ranged import scan_positions

Segment = SegmentFile


# =============================================================================== boundary walk
@dataclass(slots=True)
class Walk:
    """Records found by :func:`walk`: global offsets and sizes, and the offset where the next walk
    must start (past the last record, or the next segment's base after a blank record)."""

    offsets: np.ndarray
    sizes: np.ndarray
    end: int


def segment_of(segs: list[Segment], offset: int) -> int:
    for i, s in enumerate(segs):
        if s.base <= offset < s.end:
            return i
    return -1


def walk(segs: list[Segment], start: int, *, stop_at: int | None = None, max_records: int | None = None,
         live: bool = True, io: FileIO = LOCAL) -> Walk:
    """Walk record boundaries from ``start`` (a record boundary or a segment base).

    Stops at unwritten bytes, at ``stop_at`` (a boundary found by an earlier walk) or after
    ``max_records``.  With ``live``, the last record is checked completely: a record a writer is
    still copying in is not counted.  Unreadable bytes followed by a newer segment are corruption
    (:class:`CorruptDataError`); at the tail of the newest segment they may be a record in
    progress and end the walk.
    """
    offs: list[np.ndarray] = []
    sizes: list[np.ndarray] = []
    count = 0
    pos = start
    while True:
        if stop_at is not None and pos >= stop_at:
            break
        if max_records is not None and count >= max_records:
            break
        i = segment_of(segs, pos)
        if i < 0:
            break
        seg = segs[i]
        f = io.open(seg.path, what="CommitLog segment")
        try:
            rel_end = seg.size if stop_at is None else min(seg.size, stop_at - seg.base)
            limit = None if max_records is None else max_records - count
            positions, psizes, stop, stop_pos = scan_positions(f, pos - seg.base, rel_end, limit=limit)
            if max_records is not None and len(positions) > max_records - count:
                positions, psizes = positions[: max_records - count], psizes[: max_records - count]
                stop = "limit"
            if live and len(positions) and stop != "limit":
                p, n = int(positions[-1]), int(psizes[-1])
                res = check_record(f.read(p, n), 0, n, check_crc=False, read_body=False)
                if not res.success:
                    if i + 1 < len(segs):
                        raise CorruptDataError(res.error or "unreadable record", path=seg.path, offset=seg.base + p)
                    positions, psizes = positions[:-1], psizes[:-1]
                    stop, stop_pos = "torn", p
            if stop == STOP_INVALID and i + 1 < len(segs):
                tail = f.read(stop_pos, seg.size - stop_pos if f.whole is not None else CHUNK_BYTES)
                res = check_record(tail, 0, len(tail), check_crc=False, read_body=False)
                raise CorruptDataError(res.error or "unreadable record", path=seg.path, offset=seg.base + stop_pos)
        finally:
            f.close()
        offs.append(positions + np.int64(seg.base))
        sizes.append(psizes.astype(np.int64))
        count += len(positions)
        if stop == "limit":
            pos = int(positions[-1]) + int(psizes[-1]) + seg.base
            break
        if stop == STOP_BLANK or (stop_pos >= seg.size and stop not in ("torn", STOP_INVALID)):
            pos = seg.end  # continue in the next segment (when it exists)
            continue
        pos = seg.base + int(stop_pos)
        break
    cat = (lambda xs: np.concatenate(xs) if xs else np.empty(0, np.int64))  # noqa: E731
    return Walk(cat(offs), cat(sizes), pos)


def earliest_offset(segs: list[Segment]) -> int:
    return segs[0].base if segs else 0


def check_boundary(segs: list[Segment], offset: int, *, fail_on_data_loss: bool, what: str,
                   io: FileIO = LOCAL) -> int:
    """Validate a starting CommitLog offset: it must be a record boundary of the store (or the
    end of its data).  Below the oldest segment: :class:`DataLossError`, or the oldest segment's
    base when ``fail_on_data_loss`` is false."""
    first = earliest_offset(segs)
    if offset < first:
        if fail_on_data_loss:
            raise DataLossError(f"{what}: CommitLog offset {offset} was deleted (the store starts at {first}; "
                                "set failOnDataLoss=false to skip ahead)")
        return first
    i = segment_of(segs, offset)
    if i < 0:
        last_end = segs[-1].end if segs else 0
        if offset == last_end:
            return offset
        raise DataLossError(f"{what}: CommitLog offset {offset} is beyond the store's end {last_end}")
    seg = segs[i]
    w = walk([seg], seg.base, stop_at=offset, live=False, io=io)
    if w.end != offset:
        raise CorruptDataError(f"{what}: CommitLog offset {offset} is not a record boundary", path=seg.path,
                               offset=offset)
    return offset


# =============================================================================== splitting
def split_range(seg: Segment, start: int, end: int, pieces: int, *, dledger: bool = False,
                io: FileIO = LOCAL) -> list[tuple[int, int]]:
    """Cut ``[start, end)`` (positions inside ``seg``) into up to ``pieces`` ranges of about equal
    bytes, at record boundaries found by the boundary pre-scan (``dledger``: at DLedger entry
    boundaries)."""
    if pieces <= 1 or end - start <= 0:
        return [(start, end)]
    with io.open(seg.path, what="CommitLog segment") as f:
        if dledger:
            u8 = f.whole if f.whole is not None else f.read(0, f.size)
            positions = walk_file(u8, seg.base, len(u8), start=start).pos - seg.base
            positions = positions[positions < end]
            del u8
        else:
            positions, _sizes, _stop, _pos = scan_positions(f, start, min(end, f.size))
    if len(positions) <= 1:
        return [(start, end)]
    targets = start + (end - start) * np.arange(1, pieces, dtype=np.int64) // pieces
    return cut_at_records(positions, start, end, targets)


def cut_at_records(positions: np.ndarray, start: int, end: int, targets: np.ndarray) -> list[tuple[int, int]]:
    """``[start, end)`` cut into ranges at the record starts ``positions`` (ascending) nearest at
    or after each of ``targets``: every range begins on a record boundary."""
    idx = unique(np.searchsorted(positions, targets).astype(np.int64)) if len(positions) else np.empty(0, np.int64)
    cuts = [int(positions[i]) for i in idx.tolist() if 0 < i < len(positions) and start < positions[i] < end]
    bounds = [start, *sorted(set(cuts)), end]
    return [(a, b) for a, b in pairwise(bounds) if b > a]

