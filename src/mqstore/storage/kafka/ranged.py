"""Kafka partition directories read through a :class:`~mqstore.storage.fileio.FileIO`: the
read-only view the Spark source plans and reads with, for a local directory (files mapped
whole, offset lookups through :class:`~mqstore.storage.kafka.segment.LogSegment`) and for one in
an object store (prefix listings, ``.index`` files read whole — at most ``segment.index.bytes``
— and ``.log`` files read in bounded chunks of whole batches).

The naming rules are :mod:`mqstore.storage.kafka.layout`'s; the index entry-count rule is
:func:`~mqstore.storage.kafka.index.live_entry_count`.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from mqstore.errors import MqStoreError, StoreNotFoundError
from mqstore.kernels.kafka.batches import STOP_BAD_SIZE, STOP_TORN, scan_batches
from mqstore.storage import fileio
from mqstore.storage.fileio import ArrowFileIO, FileIO, RangeFile
from mqstore.storage.kafka.index import live_entry_count
from mqstore.storage.kafka.layout import (
    INDEX_SUFFIX,
    LOG_SUFFIX,
    has_segments,
    is_partition_dir_name,
    log_files,
    parse_base_offset,
    partition_dirs,
    split_segment_name,
    topic_partition_of,
)
from mqstore.storage.kafka.segment import LogSegment

__all__ = ["SegmentRef", "batch_chunks", "index_position", "list_segments", "log_end_offset",
           "partition_dirs_io", "rebase_error", "topic_partition_io"]


@dataclass(frozen=True, slots=True)
class SegmentRef:
    """One ``.log`` file of a partition: base offset, path (a URL when remote), size."""

    base: int
    path: str
    size: int

    @property
    def index_path(self) -> str:
        return self.path[: -len(LOG_SUFFIX)] + INDEX_SUFFIX


def list_segments(io: FileIO, directory: str) -> list[SegmentRef]:
    """The ``.log`` segments of a partition directory, by base offset."""
    if not io.remote:
        out = []
        for p in log_files(directory):
            try:
                out.append(SegmentRef(parse_base_offset(p), str(p), p.stat().st_size))
            except FileNotFoundError:
                continue  # deleted by retention meanwhile
        return out
    segs = []
    for e in io.list(directory):
        parts = split_segment_name(e.name)
        if parts is not None and parts[1] == LOG_SUFFIX and not e.is_dir:
            segs.append(SegmentRef(parts[0], e.path, e.size))
    return sorted(segs, key=lambda s: s.base)


def partition_dirs_io(io: FileIO, path: str) -> tuple[bool, list[str]]:
    """``(path is a partition directory, its partition directories)``: ``(True, [path])`` when
    ``path`` holds ``.log`` segments, else its ``<topic>-<partition>`` children that do
    (:class:`StoreNotFoundError` when ``path`` does not exist)."""
    if not io.remote:
        p = Path(path)
        if not p.exists():
            raise StoreNotFoundError("kafka-log path not found", path=str(p))
        if has_segments(p):
            return True, [str(p)]
        return False, [str(c) for c in partition_dirs(p)] if p.is_dir() else []
    if isinstance(io, ArrowFileIO):
        io.check_bucket(path)
    entries = io.list(path)
    if not entries:
        raise StoreNotFoundError("kafka-log path not found (no object under this prefix)", path=path)
    if any(not e.is_dir and e.name.endswith(LOG_SUFFIX) and split_segment_name(e.name) for e in entries):
        return True, [path]
    return False, [e.path for e in entries if e.is_dir and is_partition_dir_name(e.name) and list_segments(io, e.path)]


def topic_partition_io(path: str) -> tuple[str, int]:
    """``(topic, partition)`` of a partition directory path or URL (layout's rule)."""
    return topic_partition_of(path.rstrip("/").rsplit("/", 1)[-1])


_INDEX_CACHE: dict[tuple[str, int], np.ndarray] = {}
_INDEX_CACHE_MAX = 64


def _index_entries(io: FileIO, seg: SegmentRef) -> np.ndarray:
    """``(n, 2)`` int32 ``(relative offset, position)`` entries of a remote ``.index`` (read whole
    once per process and kept, keyed by path and size: an active segment's index is preallocated
    to ``segment.index.bytes``, 10 MiB by default)."""
    st = io.stat(seg.index_path)
    if st is None:
        return np.empty((0, 2), np.int32)
    key = (seg.index_path, st.size)
    hit = _INDEX_CACHE.get(key)
    if hit is not None:
        return hit
    raw = io.read_all(seg.index_path, what="offset index")
    whole = len(raw) // 8
    arr = np.frombuffer(raw[: whole * 8], dtype=">i4").reshape(-1, 2).astype(np.int32)
    n = live_entry_count(arr[:, 0], bool(whole) and not arr[0].any())
    if len(_INDEX_CACHE) >= _INDEX_CACHE_MAX:
        _INDEX_CACHE.pop(next(iter(_INDEX_CACHE)))
    out = _INDEX_CACHE[key] = arr[:n].copy()
    return out


def index_position(io: FileIO, seg: SegmentRef, offset: int) -> tuple[int, int]:
    """``(indexed offset, position)``: the greatest offset-index entry ≤ ``offset`` of the segment
    (``(base, 0)`` when none), as :meth:`OffsetIndex.lookup`."""
    if offset <= seg.base:
        return seg.base, 0
    if not io.remote:
        with LogSegment.open(seg.path) as s:
            r = s.offset_index.lookup(offset)
            return int(r.offset), int(r.position)
    ent = _index_entries(io, seg)
    i = int(np.searchsorted(ent[:, 0].astype(np.int64) + seg.base, offset, side="right")) - 1
    if i < 0:
        return seg.base, 0
    return seg.base + int(ent[i, 0]), int(ent[i, 1])


def batch_chunks(f: RangeFile, pos: int, limit: int, *, chunk: int | None = None
                 ) -> Iterator[tuple[np.ndarray, int, dict[str, Any]]]:
    """``(buf, buf_pos, scan)``: ``buf[0]`` is byte ``buf_pos`` of the file and ``scan`` the
    :func:`~mqstore.kernels.kafka.batches.scan_batches` of ``buf`` from the first batch at or
    after ``pos``.  Every chunk but the last holds whole batches only; the last one ends where
    ``limit`` or the valid data ends, with the scan's stop reason.  A local file gives one chunk:
    its whole mapping (up to ``limit``)."""
    limit = min(limit, f.size)
    if f.whole is not None:
        buf = f.whole[:limit]
        yield buf, 0, scan_batches(buf, min(pos, limit))
        return
    chunk = chunk or fileio.CHUNK_BYTES
    p = pos
    n = chunk
    while p < limit:
        buf = f.read(p, min(n, limit - p))
        scan = scan_batches(buf, 0)
        if p + len(buf) >= limit or scan["stop_reason"] == STOP_BAD_SIZE:
            yield buf, p, scan
            return
        if scan["count"] == 0:
            if scan["stop_reason"] == STOP_TORN and n < 12 + int.from_bytes(buf[8:12].tobytes(), "big"):
                n = 12 + int.from_bytes(buf[8:12].tobytes(), "big")  # one batch larger than a chunk
                continue
            yield buf, p, scan
            return
        ve = int(scan["valid_end"])
        yield buf[:ve], p, scan
        p += ve
        n = chunk


def rebase_error(exc: MqStoreError, buf_pos: int, path: str) -> MqStoreError:
    """``exc`` (raised on a chunk) with its offset moved to file positions and the file named."""
    if buf_pos == 0 and exc.path is not None:
        return exc
    return type(exc)(exc.message, path=path, offset=None if exc.offset is None else exc.offset + buf_pos)


def log_end_offset(io: FileIO, directory: str, segs: list[SegmentRef] | None = None) -> tuple[int, int]:
    """``(log start, log end)`` of a partition: the first segment's base, and the offset after the
    last complete batch of the newest segment (scanned from its last index entry).  Local
    directories use :class:`~mqstore.storage.kafka.log.PartitionLog` (read-only)."""
    if not io.remote:
        from mqstore.storage.kafka.log import PartitionLog

        with PartitionLog.open(directory, read_only=True) as log:
            return log.log_start_offset, log.log_end_offset
    segs = list_segments(io, directory) if segs is None else segs
    if not segs:
        raise StoreNotFoundError("no .log segment files in partition directory", path=directory)
    last = segs[-1]
    ent = _index_entries(io, last)
    pos = int(ent[-1, 1]) if len(ent) else 0
    end = last.base
    with io.open(last.path, what="Kafka segment") as f:
        for _buf, _bp, scan in batch_chunks(f, pos, f.size):
            k = scan["count"]
            if k:
                end = int(scan["last_offset"][k - 1]) + 1
    return segs[0].base, end

