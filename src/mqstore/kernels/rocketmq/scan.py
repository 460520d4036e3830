"""The dispatch scan: a CommitLog segment into columnar *dispatch batches* (scan → dispatch → write).

A dispatch batch holds, for every message record of a byte range of one segment, exactly what the
ConsumeQueue and IndexFile writers need, as numpy arrays, plus the flattened list of index keys
(already hashed with the IndexFile key hash of ``topic#key``).  The same batches feed the live
dispatcher, the offline rebuild and the Spark jobs.

``scan_segment_py`` is the pure-Python reference (record by record through
:func:`mqstore.formats.rocketmq.record.check_record`); ``scan_segment`` is the fast path and must
return identical batches (tests run both on the same data).

The compiled pass exists twice: in C (``_nat_rmq_scan.scan``, ``kernels/csrc/_nat_rmq_scan.c``,
which checks the body CRCs inline) and with numba (:mod:`mqstore.kernels.rocketmq.scan_nb`,
imported on first use: a process on the native path never loads numba).  :func:`scan_segment` is
bound to the native one when it is built, :func:`scan_segment_numba` and
:func:`scan_segment_native` name each; all three are registered twins.

The compiled pass takes its inputs and outputs as a few named groups (:class:`ScanParams`,
:class:`DelayRule`, :class:`RowColumns`, ...; numba passes a ``NamedTuple`` of arrays as one
argument at no cost, the C wrapper spreads them) instead of 33 positional parameters.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from itertools import pairwise
from typing import Any, NamedTuple

import numpy as np

from mqstore.errors import CorruptDataError
from mqstore.formats.rocketmq.javahash import (
    DEFAULT_DELAY_TABLE,
    SCHEDULE_TOPIC,
    index_key_hash,
    tags_code,
)
from mqstore.formats.rocketmq.lmq import PROPERTY_INNER_MULTI_DISPATCH, PROPERTY_INNER_MULTI_QUEUE_OFFSET
from mqstore.formats.rocketmq.record import (
    TRANSACTION_MASK,
    TRANSACTION_ROLLBACK_TYPE,
    check_record,
)
from mqstore.kernels.backend import native, numba_module
from mqstore.kernels.buffers import as_u8
from mqstore.kernels.crc import crc32_spans
from mqstore.kernels.registry import register
from mqstore.kernels.rocketmq.framing import (
    ST_BAD,
    ST_FULL,
    ST_RANGE,
    ST_TRUNC,
    STOP_BLANK,
    STOP_END,
    STOP_INVALID,
    STOP_LIMIT,
    check_range,
    find_boundary_any,
    walk_stop,
)
from mqstore.kernels.threads import resolve_threads, run_parallel

__all__ = ["STOP_BLANK", "STOP_END", "STOP_INVALID", "STOP_LIMIT", "DispatchBatch", "scan_segment", "scan_segment_py"]


@dataclass(slots=True)
class DispatchBatch:
    """Columnar description of consecutive records of one CommitLog segment."""

    commit_log_offset: np.ndarray  # int64, global physical offset of the record
    size: np.ndarray  # int32, TOTALSIZE
    queue_id: np.ndarray  # int32
    queue_offset: np.ndarray  # int64, QUEUEOFFSET field
    sys_flag: np.ndarray  # int32
    store_timestamp: np.ndarray  # int64
    tags_code: np.ndarray  # int64 (tags hash, or deliver time for the delay topic)
    topic_id: np.ndarray  # int32, index into ``topics``
    topics: list[str]
    key_row: np.ndarray  # int64, row (message) of each index key, in index order
    key_hash: np.ndarray  # int32, IndexFile hash of ``topic#key`` (uniq key first, then KEYS pieces)
    next_offset: int  # global offset just past the last consumed record (or of the stop point)
    stop: str  # one of STOP_END, STOP_BLANK, STOP_INVALID, STOP_LIMIT
    error: str | None = None  # why the scan stopped at an invalid record
    skipped: list[tuple[int, str]] = field(default_factory=list)  # (offset, reason) of skipped records
    # rows whose properties name multi-dispatch queues (INNER_MULTI_DISPATCH), ascending, and the
    # raw (INNER_MULTI_DISPATCH, INNER_MULTI_QUEUE_OFFSET or None) values of each
    multi_row: np.ndarray = field(default_factory=lambda: np.empty(0, np.int64))
    multi_value: list[tuple[str, str | None]] = field(default_factory=list)

    def __len__(self) -> int:
        return len(self.commit_log_offset)

    @staticmethod
    def empty(next_offset: int, stop: str = STOP_END, error: str | None = None) -> DispatchBatch:
        i32, i64 = np.empty(0, np.int32), np.empty(0, np.int64)
        return DispatchBatch(i64, i32, i32, i64, i32, i64, i64, i32, [], i64, i32, next_offset, stop, error)

    def topic_of(self, row: int) -> str:
        return self.topics[int(self.topic_id[row])]

    def cq_mask(self) -> np.ndarray:
        """Rows that get a ConsumeQueue unit (transaction type NOT or COMMIT)."""
        t = self.sys_flag & TRANSACTION_MASK
        return (t == 0) | (t == 0x8)

    def index_key_mask(self) -> np.ndarray:
        """Index keys whose message is not a ROLLBACK (those are never indexed)."""
        t = self.sys_flag[self.key_row] & TRANSACTION_MASK
        return t != TRANSACTION_ROLLBACK_TYPE


def scan_segment_py(
    buf: bytes | bytearray | memoryview,
    file_from_offset: int,
    start: int,
    end: int,
    *,
    check_crc: bool = False,
    skip_length_mismatch: bool = True,
    max_records: int | None = None,
    delay_table: dict[int, int] = DEFAULT_DELAY_TABLE,
    threads: int | None = 1,
    keys: bool = True,
    columns: bool = True,
) -> DispatchBatch:
    """Reference scan of ``buf[start:end]`` (positions inside one segment whose global start is
    ``file_from_offset``).

    Stops at a blank record (``STOP_BLANK``, ``next_offset`` = the blank's offset), at an
    unreadable record (``STOP_INVALID``), when fewer bytes than a whole record remain
    (``STOP_END``) or after ``max_records``.  A record whose TOTALSIZE disagrees with its field
    lengths is skipped (as the reput service does) when ``skip_length_mismatch``, otherwise it is
    an invalid stop (as recovery does).  ``threads`` only tunes the fast path.  Without ``keys``
    the batch has no index keys (``key_row``/``key_hash`` empty: for a reader that does not use
    them, the dump); everything else is the same.  Without ``columns`` (nor keys) only
    ``commit_log_offset`` and ``size`` are filled: the other per-record columns are zeros, and
    there are no topics, keys or multi-dispatch rows (a reader that only needs where the records
    are: the dump without filters); the stop, next offset, error and skipped records are the same.
    """
    if not columns:
        return without_columns(scan_segment_py(buf, file_from_offset, start, end, check_crc=check_crc,
                                               skip_length_mismatch=skip_length_mismatch, max_records=max_records,
                                               delay_table=delay_table, keys=False))
    cols: dict[str, list[int]] = {k: [] for k in ("off", "size", "qid", "qoff", "sys", "ts", "tags", "topic")}
    key_row: list[int] = []
    key_hash: list[int] = []
    multi_row: list[int] = []
    multi_value: list[tuple[str, str | None]] = []
    topics: dict[str, int] = {}
    skipped: list[tuple[int, str]] = []
    pos = start
    stop, error = STOP_END, None
    while pos < end:
        if max_records is not None and len(cols["off"]) >= max_records:
            stop = STOP_LIMIT
            break
        res = check_record(buf, pos, end, check_crc=check_crc, read_body=False)
        if res.size == 0 and res.success:
            stop = STOP_BLANK
            break
        if not res.success:
            if res.size > 0 and skip_length_mismatch:
                skipped.append((file_from_offset + pos, res.error or "length mismatch"))
                pos += res.size
                continue
            # A record cut by the end of the range is not an error: it is not written yet.
            if res.error and "truncated" in res.error:
                stop = STOP_END
            elif _all_zero(buf, pos, min(end, pos + 8)):
                stop = STOP_END
            else:
                stop, error = STOP_INVALID, res.error
            break
        rec = res.record
        assert rec is not None
        row = len(cols["off"])
        tid = topics.setdefault(rec.topic, len(topics))
        cols["off"].append(file_from_offset + pos)
        cols["size"].append(res.size)
        cols["qid"].append(rec.queue_id)
        cols["qoff"].append(rec.queue_offset)
        cols["sys"].append(rec.sys_flag)
        cols["ts"].append(rec.store_timestamp)
        cols["tags"].append(tags_code(rec.topic, rec.tags, rec.delay, rec.store_timestamp, delay_table))
        cols["topic"].append(tid)
        if keys and rec.uniq_key is not None:
            key_row.append(row)
            key_hash.append(index_key_hash(f"{rec.topic}#{rec.uniq_key}"))
        for k in rec.keys if keys else ():
            key_row.append(row)
            key_hash.append(index_key_hash(f"{rec.topic}#{k}"))
        md = rec.properties.get(PROPERTY_INNER_MULTI_DISPATCH)
        if md:
            multi_row.append(row)
            multi_value.append((md, rec.properties.get(PROPERTY_INNER_MULTI_QUEUE_OFFSET)))
        pos += res.size
    return DispatchBatch(
        commit_log_offset=np.array(cols["off"], np.int64),
        size=np.array(cols["size"], np.int32),
        queue_id=np.array(cols["qid"], np.int32),
        queue_offset=np.array(cols["qoff"], np.int64),
        sys_flag=np.array(cols["sys"], np.int32),
        store_timestamp=np.array(cols["ts"], np.int64),
        tags_code=np.array(cols["tags"], np.int64),
        topic_id=np.array(cols["topic"], np.int32),
        topics=list(topics),
        key_row=np.array(key_row, np.int64),
        key_hash=np.array(key_hash, np.int32),
        next_offset=file_from_offset + pos,
        stop=stop,
        error=error,
        skipped=skipped,
        multi_row=np.array(multi_row, np.int64),
        multi_value=multi_value,
    )


def without_columns(b: DispatchBatch) -> DispatchBatch:
    """``b`` as a scan without ``columns`` gives it: offsets and sizes, the rest zeros/empty."""
    n = len(b)
    i32, i64 = (lambda: np.zeros(n, np.int32)), (lambda: np.zeros(n, np.int64))
    return DispatchBatch(b.commit_log_offset, b.size, i32(), i64(), i32(), i64(), i64(), i32(), [],
                         np.empty(0, np.int64), np.empty(0, np.int32), b.next_offset, b.stop, b.error, b.skipped)


def _all_zero(buf: bytes | bytearray | memoryview, a: int, b: int) -> bool:
    return not any(bytes(buf[a:b]))



# =============================================================================== fast path
#
# The kernels (scan_nb._scan_kernel, _nat_rmq_scan.scan) check each length against the end of its
# record before touching a byte, so a corrupt or truncated buffer can only stop a scan.


class ScanParams(NamedTuple):
    """What to scan: the segment's global offset and the in-buffer range, and the options."""

    base: int
    start: int
    end: int
    check_crc: bool
    skip_mismatch: bool
    max_records: int  # -1: no limit


class DelayRule(NamedTuple):
    """The delay table as the kernel reads it (tags code of the schedule topic)."""

    delay_ms: np.ndarray  # int64, ms per level (-1: not in the table)
    max_level: int
    ok: bool  # False: the table cannot be read by the kernel (every delayed record falls back)
    sched: np.ndarray  # uint8, the schedule topic's name


class RowColumns(NamedTuple):
    """One entry per record (the columns of :class:`DispatchBatch`)."""

    off: np.ndarray  # int64
    size: np.ndarray  # int32
    qid: np.ndarray  # int32
    qoff: np.ndarray  # int64
    sysf: np.ndarray  # int32
    ts: np.ndarray  # int64
    tags: np.ndarray  # int64
    topic_id: np.ndarray  # int32


class TopicTable(NamedTuple):
    """Distinct topics of a chunk: first occurrence (span) per id and an open-addressing table."""

    rep_s: np.ndarray
    rep_l: np.ndarray
    table: np.ndarray


class KeyColumns(NamedTuple):
    row: np.ndarray  # int64, record of each index key
    hash: np.ndarray  # int32


class SkipColumns(NamedTuple):
    """Records skipped for a length mismatch."""

    pos: np.ndarray
    total: np.ndarray
    computed: np.ndarray


class CrcSpans(NamedTuple):
    """Body spans to checksum after the pass (``check_crc``), with where to cut on a mismatch."""

    pos: np.ndarray
    start: np.ndarray
    length: np.ndarray
    row: np.ndarray
    skip: np.ndarray


_SCHED = np.frombuffer(SCHEDULE_TOPIC.encode("ascii"), np.uint8).copy()


def _delay_rule(delay_table: dict[int, int]) -> DelayRule:
    if not delay_table:
        return DelayRule(np.full(1, -1, np.int64), 0, True, _SCHED)
    lo, hi = min(delay_table), max(delay_table)
    if lo < 0 or hi > 1_000_000:
        return DelayRule(np.full(1, -1, np.int64), 0, False, _SCHED)
    arr = np.full(hi + 1, -1, np.int64)
    for level, ms in delay_table.items():
        arr[level] = ms
    return DelayRule(arr, hi, True, _SCHED)


def _table_size(n: int) -> int:
    size = 16
    while size < 2 * n + 2:
        size <<= 1
    return size


#: rows of the first output chunk per byte of range (records are at least 91 bytes; a chunk that
#: fills up is continued with another one, so this only trades memory against merge copies)
_BYTES_PER_ROW_GUESS = 160
_KEYS_PER_ROW_GUESS = 4
_MAX_CHUNK_ROWS = 1 << 22
_MAX_CHUNK_TOPICS = 1 << 14
_MAX_KEYS_PER_RECORD = 1 + (0x7FFF + 1) // 2  # uniq key + KEYS pieces of a 32767-byte property string
# The row capacity of a chunk's columns is its bytes over _BYTES_PER_ROW_GUESS, or over half the
# mean record size seen by the chunks scanned so far in this process when that is more (a live
# store's reput rounds of 1 KiB records: ~2x their rows instead of ~7x).  Columns sized for far
# more rows than the chunk holds cost their allocation and page faults; one of 4 MiB or more
# also takes numpy's hugepage advice, which cost ~10 ms per chunk (with the GIL held) on this
# project's VM when the allocator reuses memory.  A guess too small only ends a chunk early (the
# next chunk goes on; the batch is the same).
LEARN_ROW_BYTES = True
_ROW_BYTES_SEEN = [0]  # mean record size of the last chunk of >= 64 records (0: none yet)


@dataclass(slots=True)
class _Chunk:
    rows: RowColumns  # trimmed; topic ids into ``topics``
    topics: list[str]
    key_row: np.ndarray
    key_hash: np.ndarray
    skipped: list[tuple[int, str]]
    pos: int
    state: int
    multi_row: np.ndarray
    multi_value: list[tuple[str, str | None]]


def _skipped(skips: Any, ns: int) -> list[tuple[int, str]]:
    """The records a scan skipped for a length mismatch (the reput service's rule), as
    ``(position, reason)``."""
    return [(int(skips.pos[i]), f"length mismatch: TOTALSIZE {int(skips.total[i])}, fields add up to "
                                f"{int(skips.computed[i])}") for i in range(ns)]


def _scan_chunk(
    u8: np.ndarray, file_from_offset: int, start: int, end: int, check_crc: bool, skip_length_mismatch: bool,
    limit: int, delay: DelayRule, delay_table: dict[int, int], nat: Any = None, keys: bool = True,
    columns: bool = True,
) -> _Chunk:  # fmt: skip
    per_row = max(_BYTES_PER_ROW_GUESS, _ROW_BYTES_SEEN[0] // 2) if LEARN_ROW_BYTES else _BYTES_PER_ROW_GUESS
    cap = max(16, min((end - start) // per_row + 16, _MAX_CHUNK_ROWS))
    if limit >= 0:
        cap = max(1, min(cap, limit))
    kcap = cap * _KEYS_PER_ROW_GUESS + _MAX_KEYS_PER_RECORD  # the first record always fits: progress
    if not (keys and columns) and nat is not None:
        kcap = 1  # the C pass writes none (the numba pass computes them; they are dropped below)
    i64, i32 = (lambda n: np.empty(n, np.int64)), (lambda n: np.empty(n, np.int32))
    rows = RowColumns(off=i64(cap), size=i32(cap), qid=i32(cap), qoff=i64(cap), sysf=i32(cap), ts=i64(cap),
                      tags=i64(cap), topic_id=i32(cap))  # fmt: skip
    fallback = i64(cap)
    multi = i64(cap)
    mspan = np.empty((cap, 4), np.int64)
    # distinct topics of a chunk: a full table ends the chunk (many topics are rare)
    tcap = min(cap, _MAX_CHUNK_TOPICS)
    topics_t = TopicTable(i64(tcap), i64(tcap), np.full(_table_size(tcap), -1, np.int64))
    kcols = KeyColumns(i64(kcap), i32(kcap))
    skips = SkipColumns(i64(cap), i64(cap), i64(cap))
    ncrc = 2 * cap if check_crc and nat is None else 0  # the native kernel checks the CRCs inline
    crcs = CrcSpans(*(i64(ncrc) for _ in range(5)))
    prm = ScanParams(np.int64(file_from_offset), np.int64(start), np.int64(end), bool(check_crc),
                     bool(skip_length_mismatch), np.int64(limit))  # fmt: skip
    if nat is not None:
        counts = nat.scan(u8, *prm, *delay, *rows, *topics_t, *kcols, fallback, multi, mspan, *skips,
                          *(() if keys and columns else (False,)), *(() if columns else (False,)))  # fmt: skip
    else:
        counts = _nb()._scan_kernel(u8, prm, delay, rows, topics_t, kcols, fallback, multi, mspan, skips, crcs)
    n, pos, state, nt, ns, nk, nf, nc, nm = (int(v) for v in counts)
    if n >= 64:
        _ROW_BYTES_SEEN[0] = (pos - start) // n
    if nc:
        got = crc32_spans(u8, crcs.start[:nc], crcs.length[:nc])
        stored = _stored_crcs(u8, crcs.pos[:nc])
        bad = np.flatnonzero((got & 0x7FFFFFFF) != stored)
        if len(bad):
            j = int(bad[0])
            n, ns, pos, state = int(crcs.row[j]), int(crcs.skip[j]), int(crcs.pos[j]), ST_BAD
            nk = int(np.searchsorted(kcols.row[:nk], n))
            nf = int(np.searchsorted(fallback[:nf], n))
            nm = int(np.searchsorted(multi[:nm], n))
            nt = int(rows.topic_id[:n].max()) + 1 if n else 0
    if not columns:  # (the C pass writes only the offsets and sizes; the numba pass's rest is dropped)
        skipped = _skipped(skips, ns)
        # (read-only zero views: nothing is allocated or written for columns no one reads)
        z32, z64 = (lambda: np.broadcast_to(np.int32(0), (n,))), (lambda: np.broadcast_to(np.int64(0), (n,)))
        empty = RowColumns(rows.off[:n], rows.size[:n], z32(), z64(), z32(), z64(), z64(), z32())
        return _Chunk(empty, [], kcols.row[:0], kcols.hash[:0], skipped, pos, state, multi[:0].copy(), [])
    # topics: ids of distinct byte strings → ids of distinct decoded strings (first appearance)
    topics: dict[str, int] = {}
    remap = np.empty(nt, np.int32)
    for t in range(nt):
        s = int(topics_t.rep_s[t])
        name = u8[s : s + int(topics_t.rep_l[t])].tobytes().decode("utf-8", "replace")
        remap[t] = topics.setdefault(name, len(topics))
    tid = rows.topic_id[:n]
    if nt and len(topics) < nt:
        tid = remap[tid]
    tags = rows.tags[:n]
    for r in fallback[:nf].tolist():
        res = check_record(u8, int(rows.off[r]) - file_from_offset, end, check_crc=False, read_body=False)
        rec = res.record
        assert rec is not None
        tags[r] = tags_code(rec.topic, rec.tags, rec.delay, rec.store_timestamp, delay_table)
    # the two values as parse_properties gives them (a value between ASCII separators decodes
    # alone exactly as inside the whole properties text, errors replaced)
    multi_value: list[tuple[str, str | None]] = [
        (u8[a:b].tobytes().decode("utf-8", "replace"), u8[c:d].tobytes().decode("utf-8", "replace") if c >= 0 else None)
        for a, b, c, d in mspan[:nm].tolist()
    ]
    skipped = _skipped(skips, ns)
    trimmed = RowColumns(rows.off[:n], rows.size[:n], rows.qid[:n], rows.qoff[:n], rows.sysf[:n], rows.ts[:n], tags,
                         tid)  # fmt: skip
    if not keys:
        nk = 0
    return _Chunk(trimmed, list(topics), kcols.row[:nk], kcols.hash[:nk], skipped, pos, state, multi[:nm].copy(),
                  multi_value)


def _stored_crcs(u8: np.ndarray, pos: np.ndarray) -> np.ndarray:
    """The stored BODYCRC (big-endian int32 at +8) of the records at ``pos``."""
    at = pos[:, None] + np.arange(8, 12)
    return u8[at].copy().view(">i4").reshape(-1).astype(np.int64)


def _merge_chunks(chunks: list[_Chunk]) -> _Chunk:
    if len(chunks) == 1:
        return chunks[0]
    topics: dict[str, int] = {}
    tids, key_rows, multi_rows, base = [], [], [], 0
    for c in chunks:
        remap = np.array([topics.setdefault(t, len(topics)) for t in c.topics] or [0], np.int32)
        tids.append(remap[c.rows.topic_id] if len(c.rows.topic_id) else c.rows.topic_id)
        key_rows.append(c.key_row + base)
        multi_rows.append(c.multi_row + base)
        base += len(c.rows.topic_id)
    cols = {f: np.concatenate([getattr(c.rows, f) for c in chunks]) for f in RowColumns._fields if f != "topic_id"}
    rows = RowColumns(**cols, topic_id=np.concatenate(tids).astype(np.int32, copy=False))
    return _Chunk(
        rows, list(topics), np.concatenate(key_rows), np.concatenate([c.key_hash for c in chunks]),
        [s for c in chunks for s in c.skipped], chunks[-1].pos, chunks[-1].state,
        np.concatenate(multi_rows), [v for c in chunks for v in c.multi_value],
    )  # fmt: skip


def _nb() -> Any:
    return numba_module("mqstore.kernels.rocketmq.scan_nb")


def scan_segment_numba(
    buf: bytes | bytearray | memoryview | np.ndarray,
    file_from_offset: int,
    start: int,
    end: int,
    *,
    check_crc: bool = False,
    skip_length_mismatch: bool = True,
    max_records: int | None = None,
    delay_table: dict[int, int] = DEFAULT_DELAY_TABLE,
    threads: int | None = 1,
    keys: bool = True,
    columns: bool = True,
) -> DispatchBatch:
    """Fast path of :func:`scan_segment_py` (same arguments, same result).

    ``buf`` may be any contiguous bytes-like object (a memory map too) or a ``uint8`` array; no
    copy is made.  ``[start, end)`` must lie inside the buffer (else ``InvalidArgumentError``).
    The kernel releases the GIL (a rebuild overlaps scanning and writing in two threads).

    ``threads`` (default 1; ``None``: :func:`~mqstore.kernels.threads.default_threads`): a scan
    without ``max_records`` of at least :data:`PARALLEL_MIN_BYTES` is cut into that many byte
    ranges scanned at the same time.  Each cut is put on a record boundary found by its signature
    (a v1/v2 magic, a plausible TOTALSIZE and a PHYSICALOFFSET field equal to the record's own
    offset) and *verified*: a range's results are used only if the scan of the range before it
    ended exactly on the cut; otherwise the scan goes on sequentially from where that range
    stopped.  The result is the sequential one whatever the data.
    """
    return _scan_segment(buf, file_from_offset, start, end, check_crc, skip_length_mismatch, max_records, delay_table,
                         threads, None, keys, columns)  # fmt: skip


def scan_segment_native(
    buf: bytes | bytearray | memoryview | np.ndarray,
    file_from_offset: int,
    start: int,
    end: int,
    *,
    check_crc: bool = False,
    skip_length_mismatch: bool = True,
    max_records: int | None = None,
    delay_table: dict[int, int] = DEFAULT_DELAY_TABLE,
    threads: int | None = 1,
    keys: bool = True,
    columns: bool = True,
) -> DispatchBatch:
    """:func:`scan_segment_numba` on the C kernel ``_nat_rmq_scan.scan`` (same arguments, same result)."""
    return _scan_segment(buf, file_from_offset, start, end, check_crc, skip_length_mismatch, max_records, delay_table,
                         threads, _NAT, keys, columns)  # fmt: skip


def _scan_segment(
    buf: object, file_from_offset: int, start: int, end: int, check_crc: bool, skip_length_mismatch: bool,
    max_records: int | None, delay_table: dict[int, int], threads: int | None, nat: Any, keys: bool = True,
    columns: bool = True,
) -> DispatchBatch:  # fmt: skip
    u8 = as_u8(buf)
    check_range(u8, start, end)
    limit = -1 if max_records is None else max(int(max_records), 0)
    delay = _delay_rule(delay_table)
    nthreads = 1 if threads == 1 else resolve_threads(threads)
    chunks: list[_Chunk] = []
    pos = start
    if nthreads > 1 and limit < 0 and end - start >= PARALLEL_MIN_BYTES:
        cuts = _cuts(u8, file_from_offset, start, end, nthreads, nat)
        if len(cuts) > 2:
            parts = run_parallel(_scan_run, [
                (u8, file_from_offset, a, b, check_crc, skip_length_mismatch, -1, delay, delay_table, nat, keys,
                 columns)
                for a, b in pairwise(cuts)
            ])  # fmt: skip
            for k, (part_chunks, part_pos, part_state) in enumerate(parts):
                chunks += part_chunks
                pos = part_pos
                if k == len(parts) - 1:
                    return _batch_of(chunks, u8, file_from_offset, end, check_crc)
                if part_state != ST_RANGE or part_pos != cuts[k + 1]:
                    break  # the record chain did not land on the cut: go on sequentially from here
    more, _, _ = _scan_run(u8, file_from_offset, pos, end, check_crc, skip_length_mismatch, limit, delay, delay_table,
                           nat, keys, columns)  # fmt: skip
    return _batch_of(chunks + more, u8, file_from_offset, end, check_crc)


#: a scan of fewer bytes is never split between threads
PARALLEL_MIN_BYTES = 4 << 20
#: how far past a tentative cut the boundary search looks (a record is at most this long here)
_CUT_SEARCH_BYTES = 8 << 20


def _cuts(u8: np.ndarray, base: int, start: int, end: int, parts: int, nat: Any = None) -> list[int]:
    cuts = [start]
    for k in range(1, parts):
        guess = start + (end - start) * k // parts
        if guess <= cuts[-1]:
            continue
        q = find_boundary_any(u8, base, guess, end, _CUT_SEARCH_BYTES, use_native=nat is not None)
        if q > cuts[-1]:
            cuts.append(q)
    cuts.append(end)
    return cuts


def _scan_run(
    u8: np.ndarray, file_from_offset: int, pos: int, end: int, check_crc: bool, skip_length_mismatch: bool,
    limit: int, delay: DelayRule, delay_table: dict[int, int], nat: Any = None, keys: bool = True,
    columns: bool = True,
) -> tuple[list[_Chunk], int, int]:  # fmt: skip
    """Chunks of a sequential scan of ``[pos, end)`` until it stops: ``(chunks, pos, state)``."""
    chunks: list[_Chunk] = []
    rows = 0
    while True:
        left = -1 if limit < 0 else limit - rows
        c = _scan_chunk(u8, file_from_offset, pos, end, check_crc, skip_length_mismatch, left, delay, delay_table, nat,
                        keys, columns)  # fmt: skip
        chunks.append(c)
        rows += len(c.rows.topic_id)
        pos = c.pos
        if c.state != ST_FULL:
            return chunks, pos, c.state
        if not len(c.rows.topic_id) and not c.skipped:  # pragma: no cover - the capacities guarantee progress
            raise CorruptDataError("scan made no progress", offset=file_from_offset + pos)


def _batch_of(chunks: list[_Chunk], u8: np.ndarray, file_from_offset: int, end: int, check_crc: bool) -> DispatchBatch:
    c = _merge_chunks(chunks)
    stop, error = _stop_of(c.state, u8, c.pos, end, check_crc)
    r = c.rows
    return DispatchBatch(
        commit_log_offset=r.off,
        size=r.size,
        queue_id=r.qid,
        queue_offset=r.qoff,
        sys_flag=r.sysf,
        store_timestamp=r.ts,
        tags_code=r.tags,
        topic_id=np.ascontiguousarray(r.topic_id, np.int32),
        topics=c.topics,
        key_row=c.key_row,
        key_hash=c.key_hash,
        next_offset=file_from_offset + c.pos,
        stop=stop,
        error=error,
        skipped=c.skipped,
        multi_row=c.multi_row,
        multi_value=c.multi_value,
    )


def _stop_of(state: int, u8: np.ndarray, pos: int, end: int, check_crc: bool) -> tuple[str, str | None]:
    stop = walk_stop(state, u8, pos, end)
    if stop != STOP_INVALID:
        return stop, None
    res = check_record(u8, pos, end, check_crc=check_crc, read_body=False)
    return STOP_INVALID, res.error or "invalid record"


def valid_end_numba(buf: bytes | bytearray | memoryview | np.ndarray, file_from_offset: int, start: int, end: int, *,
                    check_crc: bool = False, done: Callable[[int, int], None] | None = None) -> tuple[int, str, str | None]:
    """Where the valid records of ``buf[start:end]`` end, as recovery walks them: ``(next_offset,
    stop, error)`` of :func:`scan_segment` with ``skip_length_mismatch=False`` (numba: the whole scan).

    ``done(a, b)`` (a performance knob, like ``threads``) is told the in-buffer ranges the walk has
    left behind, so the caller can drop their mapped pages while it goes on (the native walk goes
    in windows of :data:`VALID_END_WINDOW` bytes; the others call it once at the end)."""
    b = scan_segment_numba(buf, file_from_offset, start, end, check_crc=check_crc, skip_length_mismatch=False)
    if done is not None:
        done(start, b.next_offset - file_from_offset)
    return b.next_offset, b.stop, b.error


def valid_end_py(buf: bytes | bytearray | memoryview | np.ndarray, file_from_offset: int, start: int, end: int, *,
                 check_crc: bool = False, done: Callable[[int, int], None] | None = None) -> tuple[int, str, str | None]:
    """Twin of :func:`valid_end_numba` through :func:`scan_segment_py`."""
    b = scan_segment_py(buf, file_from_offset, start, end, check_crc=check_crc, skip_length_mismatch=False)
    if done is not None:
        done(start, b.next_offset - file_from_offset)
    return b.next_offset, b.stop, b.error


#: bytes the native recovery walk covers between two ``done`` calls
VALID_END_WINDOW = 64 << 20


def valid_end_native(buf: bytes | bytearray | memoryview | np.ndarray, file_from_offset: int, start: int, end: int, *,
                     check_crc: bool = False, done: Callable[[int, int], None] | None = None) -> tuple[int, str, str | None]:
    """:func:`valid_end_numba` on ``_nat_rmq_scan.valid_end``: the same checks without building any
    column (recovery only needs the end), in windows.  A window's walk that stops for want of bytes
    (the window's end, a record running past it, fewer than 8 bytes left) goes on in a longer
    window from where it stopped; any other stop is the answer."""
    u8 = as_u8(buf)
    check_range(u8, start, end)
    pos, wend = start, start
    while True:
        wend = min(end, max(wend, pos) + VALID_END_WINDOW)
        p, state = _NAT.valid_end(u8, pos, wend, bool(check_crc))
        p, state = int(p), int(state)
        if done is not None and p > pos:
            done(pos, p)
        if wend < end and (state in (ST_RANGE, ST_TRUNC) or wend - p < 8):
            pos = p
            continue
        break
    stop, error = _stop_of(state, u8, p, end, check_crc)
    return file_from_offset + p, stop, error


_NAT = native("_nat_rmq_scan")
valid_end = valid_end_native if _NAT is not None else valid_end_numba
register("rocketmq.valid_end", valid_end_numba, valid_end_py, native=valid_end_native if _NAT is not None else None)
scan_segment = scan_segment_native if _NAT is not None else scan_segment_numba
register("rocketmq.scan_segment", scan_segment_numba, scan_segment_py,
         native=scan_segment_native if _NAT is not None else None)
