"""Executor side of the ``rocketmq`` Spark source: CommitLog byte ranges → Arrow record batches.

Nothing here imports pyspark: the same functions serve the data source's ``read()``, the Spark
jobs built on its schema (export, query-keys, dispatch) and plain Python callers.

* :data:`ROCKETMQ_SCHEMA` (Spark DDL) and :func:`rocketmq_arrow_schema` describe the columns.
* :func:`rocketmq_arrow_batches` turns the records of ``[start, end)`` of one CommitLog segment
  file into RecordBatches, column-wise from the numba kernels
  (:func:`~mqstore.kernels.rocketmq.framing.record_positions`,
  :func:`~mqstore.kernels.rocketmq.scan.scan_segment`,
  :func:`~mqstore.kernels.rocketmq.columns.arrow_columns`; batches with invalid UTF-8 text or an
  unreadable record take :func:`~mqstore.kernels.rocketmq.columns.decode_columns` +
  :func:`columns_to_arrow`, the vectorised path's twin).
* :func:`rocketmq_rows_py` is the pure-Python twin (record by record through
  :func:`~mqstore.formats.rocketmq.record.check_record`); tests compare both on the same bytes.
"""

from __future__ import annotations

import os
import re
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import numpy as np

from mqstore.errors import CorruptDataError, CrcMismatchError, SourceOptionError
from mqstore.formats.rocketmq.dledger import ENTRY_HEADER_SIZE as DLEDGER_ENTRY_HEADER
from mqstore.formats.rocketmq.properties import split_keys
from mqstore.formats.rocketmq.record import TRANSACTION_MASK, check_record
from mqstore.kernels.rocketmq.columns import arrow_columns, arrow_of_columns, decode_columns
from mqstore.kernels.rocketmq.framing import record_positions
from mqstore.kernels.rocketmq.scan import STOP_INVALID, DispatchBatch, scan_segment
from mqstore.storage.fileio import LOCAL, FileIO
from mqstore.storage.mapped import ReadOnlyMap
from mqstore.storage.rocketmq.dledger import scan_entry_bodies, walk_file
from mqstore.storage.rocketmq.ranged import record_chunks

if TYPE_CHECKING:  # pragma: no cover
    import pyarrow as pa

#: Columns of the ``rocketmq`` source (Spark DDL).  Timestamps are ``long`` milliseconds since the
#: epoch, as in rocketmq-spark; ``body`` is null when ``includeBody`` is false.
ROCKETMQ_SCHEMA = (
    "topic STRING, flag INT, body BINARY, properties MAP<STRING, STRING>, brokerName STRING, "
    "queueId INT, queueOffset BIGINT, bornTimestamp BIGINT, storeTimestamp BIGINT, "
    "commitLogOffset BIGINT, size INT, keys ARRAY<STRING>, tags STRING, uniqKey STRING, sysFlag INT, "
    "bornHost STRING, storeHost STRING, reconsumeTimes INT, bodyCRC INT"
)

#: Column names in schema order.
ROCKETMQ_COLUMNS = (
    "topic", "flag", "body", "properties", "brokerName", "queueId", "queueOffset", "bornTimestamp",
    "storeTimestamp", "commitLogOffset", "size", "keys", "tags", "uniqKey", "sysFlag", "bornHost",
    "storeHost", "reconsumeTimes", "bodyCRC",
)  # fmt: skip

BATCH_ROWS = 65_536  # rows per RecordBatch at most
BATCH_BYTES = 64 * 1024 * 1024  # record bytes per RecordBatch at most (a batch has >= 1 row)


def rocketmq_arrow_schema() -> pa.Schema:
    """The Arrow schema of the batches (exactly the Spark schema's Arrow form)."""
    import pyarrow as pa

    i32, i64, s = pa.int32(), pa.int64(), pa.string()
    types = {
        "topic": s, "flag": i32, "body": pa.binary(), "properties": pa.map_(s, s), "brokerName": s,
        "queueId": i32, "queueOffset": i64, "bornTimestamp": i64, "storeTimestamp": i64,
        "commitLogOffset": i64, "size": i32, "keys": pa.list_(s), "tags": s, "uniqKey": s, "sysFlag": i32,
        "bornHost": s, "storeHost": s, "reconsumeTimes": i32, "bodyCRC": i32,
    }  # fmt: skip
    return pa.schema([pa.field(name, types[name]) for name in ROCKETMQ_COLUMNS])


# =============================================================================== row filters
@dataclass(frozen=True, slots=True)
class RowFilter:
    """Which records of a range become rows (small and picklable: it travels in partitions).

    * ``topics``: only these topics (``None``: every topic).
    * ``queue_bounds``: ``{(topic, queueId): (first, end)}``: only records with a ConsumeQueue
      position (not transaction half/rollback messages) whose ``queueOffset`` lies in
      ``[first, end)``; queues not listed give no rows.  ``None``: no offset bounds.
    * ``ts_min`` / ``ts_end``: ``ts_min <= storeTimestamp < ts_end`` (``None``: unbounded).
    * ``offset_min`` / ``offset_end``: the same on ``commitLogOffset``.
    * ``queue_ids``: only these queue ids.
    * ``tags``: a TAG subscription (:func:`~mqstore.formats.rocketmq.javahash.parse_sub_expression`),
      applied as a consumer does: first the ConsumeQueue tags code of each record (the Java
      ``hashCode`` of its tag, which the CommitLog scan computes exactly as dispatch writes it) must
      be one of the tags' hashes, then the stored TAGS property must be one of the tags, which drops
      hash collisions (:meth:`tag_check` on the decoded rows).  ``None``: every tag.

    An LMQ / multi-dispatch queue (``%LMQ%name``, queue 0) is matched through the records it was
    dispatched from (their ``INNER_MULTI_DISPATCH`` / ``INNER_MULTI_QUEUE_OFFSET``; bounds apply to
    the LMQ queue offset); such rows keep their own topic, queue and queue offset columns.
    """

    topics: frozenset[str] | None = None
    queue_bounds: dict[tuple[str, int], tuple[int, int]] | None = field(default=None, hash=False)
    ts_min: int | None = None
    ts_end: int | None = None
    offset_min: int | None = None
    offset_end: int | None = None
    queue_ids: frozenset[int] | None = None
    topic_pattern: str | None = None  # regex matched in full (streams: topics may appear later)
    tags: frozenset[str] | None = None

    @property
    def is_trivial(self) -> bool:
        return (
            self.topics is None and self.topic_pattern is None and self.queue_bounds is None and self.ts_min is None and self.ts_end is None
            and self.offset_min is None and self.offset_end is None and self.queue_ids is None and self.tags is None
        )  # fmt: skip

    def _tag_mask(self, b: DispatchBatch) -> np.ndarray:
        """First stage of the tag filter: the tags code is the hash of a wanted tag (storage's
        :func:`~mqstore.storage.rocketmq.dump.tag_candidates`, also behind ``dump --tag``)."""
        from mqstore.storage.rocketmq.dump import tag_candidates

        assert self.tags is not None
        return tag_candidates(b, self.tags)

    def tag_check(self, batch: pa.RecordBatch) -> pa.RecordBatch:
        """Second stage of the tag filter on decoded rows: the TAGS property is a wanted tag."""
        if self.tags is None or batch.num_rows == 0:
            return batch
        import pyarrow as pa
        import pyarrow.compute as pc

        ok = pc.fill_null(pc.is_in(batch.column("tags"), value_set=pa.array(sorted(self.tags), pa.string())), False)
        return batch if pc.all(ok).as_py() else batch.filter(ok)

    def _queue_ok(self, topic: str, queue_id: int, queue_offset: int) -> bool:
        """Topic, queue id and queue bounds of one queue position."""
        if self.topics is not None and topic not in self.topics:
            return False
        if self.topic_pattern is not None and re.fullmatch(self.topic_pattern, topic) is None:
            return False
        if self.queue_ids is not None and queue_id not in self.queue_ids:
            return False
        if self.queue_bounds is not None:
            bounds = self.queue_bounds.get((topic, queue_id))
            return bounds is not None and bounds[0] <= queue_offset < bounds[1]
        return True

    def mask(self, b: DispatchBatch) -> np.ndarray:
        """Boolean mask of the rows of a dispatch batch that pass."""
        from mqstore.storage.rocketmq.lmq import multi_units

        keep = self._own_mask(b)
        if len(b) and len(b.multi_row):
            extra = np.zeros(len(b), bool)
            for row, name, qid, qoff in multi_units(b):
                if not keep[row] and self._queue_ok(name, qid, qoff):
                    extra[row] = True
            if extra.any():
                keep |= extra & self._time_offset_mask(b) & (self._tag_mask(b) if self.tags is not None else True)
        return keep

    def _time_offset_mask(self, b: DispatchBatch) -> np.ndarray:
        keep = np.ones(len(b), bool)
        if self.ts_min is not None:
            keep &= b.store_timestamp >= self.ts_min
        if self.ts_end is not None:
            keep &= b.store_timestamp < self.ts_end
        if self.offset_min is not None:
            keep &= b.commit_log_offset >= self.offset_min
        if self.offset_end is not None:
            keep &= b.commit_log_offset < self.offset_end
        return keep

    def _own_mask(self, b: DispatchBatch) -> np.ndarray:
        n = len(b)
        keep = np.ones(n, bool)
        if n == 0:
            return keep
        if self.topics is not None:
            ok = np.array([t in self.topics for t in b.topics], bool)
            keep &= ok[b.topic_id] if len(ok) else False
        if self.topic_pattern is not None:
            ok = np.array([re.fullmatch(self.topic_pattern, t) is not None for t in b.topics], bool)
            keep &= ok[b.topic_id] if len(ok) else False
        if self.queue_ids is not None:
            keep &= np.isin(b.queue_id, np.fromiter(self.queue_ids, np.int64, len(self.queue_ids)))
        keep &= self._time_offset_mask(b)
        if self.tags is not None:
            keep &= self._tag_mask(b)
        if self.queue_bounds is not None:
            lo = np.ones(n, np.int64)
            hi = np.zeros(n, np.int64)  # rows of unlisted queues: lo > hi → dropped
            for tid, topic in enumerate(b.topics):
                of_topic = b.topic_id == tid
                if not of_topic.any():
                    continue
                for qid in np.unique(b.queue_id[of_topic]).tolist():
                    bounds = self.queue_bounds.get((topic, int(qid)))
                    if bounds is not None:
                        sel = of_topic & (b.queue_id == qid)
                        lo[sel], hi[sel] = bounds
            t = b.sys_flag & TRANSACTION_MASK
            keep &= ((t == 0) | (t == 0x8)) & (b.queue_offset >= lo) & (b.queue_offset < hi)
        return keep

    def accepts(self, topic: str, queue_id: int, queue_offset: int, store_ts: int, offset: int, sys_flag: int,
                properties: dict[str, str] | None = None) -> bool:
        """The same rule for one record (the pure-Python twin uses it; the tag filter compares
        the TAGS property directly, which is what both stages together decide)."""
        if self.tags is not None and (properties or {}).get("TAGS") not in self.tags:
            return False
        if self._accepts_own(topic, queue_id, queue_offset, store_ts, offset, sys_flag):
            return True
        if not properties or (sys_flag & TRANSACTION_MASK) not in (0, 0x8):
            return False
        from mqstore.formats.rocketmq.lmq import topic_allows_lmq
        from mqstore.storage.rocketmq.lmq import record_queue_positions

        if not topic_allows_lmq(topic) or not self._accepts_own("", 0, 0, store_ts, offset, 0, times_only=True):
            return False
        return any(self._queue_ok(n, q, o) for n, q, o in record_queue_positions(topic, queue_id, properties))

    def _accepts_own(self, topic: str, queue_id: int, queue_offset: int, store_ts: int, offset: int, sys_flag: int,
                     *, times_only: bool = False) -> bool:
        in_range = not ((self.ts_min is not None and store_ts < self.ts_min)
                        or (self.ts_end is not None and store_ts >= self.ts_end)
                        or (self.offset_min is not None and offset < self.offset_min)
                        or (self.offset_end is not None and offset >= self.offset_end))
        if times_only or not in_range:
            return in_range
        if self.queue_bounds is not None and (sys_flag & TRANSACTION_MASK) not in (0, 0x8):
            return False  # only dispatched kinds have a queue position to bound
        return self._queue_ok(topic, queue_id, queue_offset)


# =============================================================================== segment access
def open_segment(path: str) -> tuple[ReadOnlyMap, np.ndarray]:
    """Map a CommitLog segment read-only (:class:`~mqstore.storage.mapped.ReadOnlyMap`); returns
    ``(map, uint8 view)``.  Close the map with :func:`close_map` when done."""
    m = ReadOnlyMap(path, what="CommitLog segment")
    return m, m.array


def close_map(m: ReadOnlyMap | None) -> None:
    """Close a segment map (left to the garbage collector while a view is still referenced)."""
    if m is not None:
        m.close()


def _raise_invalid(u8: np.ndarray, path: str, base: int, pos: int, end: int, check_crc: bool) -> None:
    plain = check_record(u8, pos, end, check_crc=False, read_body=False)
    if check_crc and plain.success and plain.size > 0:
        res = check_record(u8, pos, end, check_crc=True)
        raise CrcMismatchError(res.error or "body CRC mismatch", path=path, offset=base + pos)
    raise CorruptDataError(plain.error or "unreadable record", path=path, offset=base + pos)


def select_dledger_positions(
    u8: np.ndarray, path: str, base: int, start: int, end: int, *, row_filter: RowFilter | None = None,
    check_crc: bool = False,
) -> np.ndarray:
    """:func:`select_positions` for a DLedger data file: ``start`` is an entry boundary; the
    positions returned are those of the messages (entry + 48) of the entries ending by ``end``."""
    fw = walk_file(u8, base, len(u8), start=start, name=os.path.basename(path))
    pos, size = fw.pos, fw.size
    keep = pos + size - base <= end
    pos, size = pos[keep], size[keep]
    if fw.error is not None and fw.error_at is not None and fw.error_at - base < end:
        raise CorruptDataError(fw.error, path=path, offset=fw.error_at)
    if not len(pos):
        return np.empty(0, np.int64)
    if not check_crc and (row_filter is None or row_filter.is_trivial):
        return pos - base + DLEDGER_ENTRY_HEADER
    batch = scan_entry_bodies(u8, base, pos, size, check_crc=check_crc, skip_length_mismatch=False)
    if batch.stop == STOP_INVALID:
        cls = CrcMismatchError if batch.error and "CRC" in batch.error else CorruptDataError
        raise cls(batch.error or "unreadable record", path=path, offset=batch.next_offset)
    positions = batch.commit_log_offset - np.int64(base)
    if row_filter is not None and not row_filter.is_trivial:
        positions = positions[row_filter.mask(batch)]
    return positions


def select_positions(
    u8: np.ndarray, path: str, base: int, start: int, end: int, *, row_filter: RowFilter | None = None,
    check_crc: bool = False, dledger: bool = False,
) -> np.ndarray:
    """In-file positions of the records of ``[start, end)`` that pass ``row_filter``.

    The range ends early at a blank end-of-segment record or where unwritten (zero) bytes begin.
    A record that cannot be read raises :class:`CorruptDataError` (:class:`CrcMismatchError` for a
    body CRC mismatch when ``check_crc``), naming the file and the record's global offset.
    ``dledger``: the file is a DLedger data file (:func:`select_dledger_positions`).
    """
    end = min(end, len(u8))
    if start >= end:
        return np.empty(0, np.int64)
    if dledger:
        return select_dledger_positions(u8, path, base, start, end, row_filter=row_filter, check_crc=check_crc)
    if not check_crc and (row_filter is None or row_filter.is_trivial):
        positions, _sizes, stop, stop_pos = record_positions(u8, start, end)
        if stop == STOP_INVALID:
            _raise_invalid(u8, path, base, stop_pos, end, check_crc)
        return positions
    batch = scan_segment(u8, base, start, end, check_crc=check_crc, skip_length_mismatch=False)
    if batch.stop == STOP_INVALID:
        _raise_invalid(u8, path, base, batch.next_offset - base, end, check_crc)
    positions = batch.commit_log_offset - np.int64(base)
    if row_filter is not None and not row_filter.is_trivial:
        positions = positions[row_filter.mask(batch)]
    return positions


def _chunks(positions: np.ndarray, sizes: np.ndarray | None, max_rows: int, max_bytes: int) -> Iterator[np.ndarray]:
    n = len(positions)
    i = 0
    cum = np.cumsum(sizes, dtype=np.int64) if sizes is not None else None
    while i < n:
        j = min(n, i + max_rows)
        if cum is not None:
            before = cum[i - 1] if i else 0
            j = max(i + 1, min(j, int(np.searchsorted(cum, before + max_bytes, side="right"))))
        yield positions[i:j]
        i = j


def _record_sizes(u8: np.ndarray, positions: np.ndarray) -> np.ndarray:
    """TOTALSIZE of the records at ``positions`` (big-endian int32, vectorised)."""
    p = positions.astype(np.int64)
    out = np.zeros(len(p), np.int64)
    for k in range(4):
        out = (out << 8) | u8[p + k].astype(np.int64)
    return out


def columns_to_arrow(cols: dict[str, Any], broker_name: str, *, include_body: bool = True) -> pa.RecordBatch:
    """A RecordBatch in :data:`ROCKETMQ_SCHEMA` order from :func:`decode_columns` output."""
    import pyarrow as pa

    arrays = arrow_of_columns(cols, broker_name, include_body=include_body)
    return pa.RecordBatch.from_arrays([arrays[c] for c in ROCKETMQ_COLUMNS], schema=rocketmq_arrow_schema())


def rocketmq_arrow_batches(
    segment_path: str | os.PathLike[str],
    start: int = 0,
    end: int | None = None,
    *,
    broker_name: str,
    file_from_offset: int | None = None,
    include_body: bool = True,
    check_crc: bool = False,
    row_filter: RowFilter | None = None,
    max_rows: int = BATCH_ROWS,
    max_bytes: int = BATCH_BYTES,
    dledger: bool = False,
    io: FileIO = LOCAL,
) -> Iterator[pa.RecordBatch]:
    """RecordBatches (:func:`rocketmq_arrow_schema`) of the records of ``[start, end)`` (positions
    inside the segment file; ``end=None``: the whole file) that pass ``row_filter``.

    ``start`` must be a record boundary (0, or a position from a boundary walk / a ConsumeQueue
    unit).  ``file_from_offset`` defaults to the segment's name (its global offset).  Batches hold
    at most ``max_rows`` rows and about ``max_bytes`` record bytes.  ``dledger``: the file is a
    DLedger data file and ``start`` an entry boundary.  ``io``: where the file is (a remote file
    is read in bounded chunks of whole records, :func:`~mqstore.storage.rocketmq.ranged.record_chunks`).
    """
    path = os.fspath(segment_path)
    base = int(os.path.basename(path.rstrip("/"))) if file_from_offset is None else int(file_from_offset)
    if dledger and io.remote:
        raise SourceOptionError("a DLedger CommitLog cannot be read from an object store", path=path)
    with io.open(path, what="CommitLog segment") as f:
        for buf, buf_pos, s, e in record_chunks(f, int(start), f.size if end is None else int(end)):
            yield from _arrow_batches_of(buf, path, base + buf_pos, s, e, broker_name=broker_name,
                                         include_body=include_body, check_crc=check_crc, row_filter=row_filter,
                                         max_rows=max_rows, max_bytes=max_bytes, dledger=dledger)
            del buf


def _arrow_batches_of(u8: np.ndarray, path: str, base: int, start: int, stop: int, *, broker_name: str,
                      include_body: bool, check_crc: bool, row_filter: RowFilter | None, max_rows: int,
                      max_bytes: int, dledger: bool) -> Iterator[pa.RecordBatch]:
    """The batches of ``u8[start:stop)`` (``u8[0]`` is CommitLog offset ``base``)."""
    import pyarrow as pa

    schema = rocketmq_arrow_schema()
    positions = select_positions(u8, path, base, start, stop, row_filter=row_filter, check_crc=check_crc,
                                 dledger=dledger)
    sizes = _record_sizes(u8, positions)
    tags = row_filter is not None and row_filter.tags is not None
    for chunk in _chunks(positions, sizes, max_rows, max_bytes):
        fast = arrow_columns(u8, base, chunk, broker_name=broker_name, include_body=include_body)
        if fast is not None:
            rb = pa.RecordBatch.from_arrays([fast[c] for c in ROCKETMQ_COLUMNS], schema=schema)
            del fast
            yield row_filter.tag_check(rb) if tags else rb  # type: ignore[union-attr]
            continue
        # unusual batch (invalid UTF-8 text, an unreadable record, > 2 GiB column): old path
        try:
            cols = decode_columns(u8, base, chunk, include_body=include_body)
        except CorruptDataError as exc:
            raise CorruptDataError(exc.message, path=path, offset=exc.offset) from exc
        rb = columns_to_arrow(cols, broker_name, include_body=include_body)
        del cols
        yield row_filter.tag_check(rb) if tags else rb  # type: ignore[union-attr]


# =============================================================================== pure-Python twin
def rocketmq_rows_py(
    buf: bytes | bytearray | memoryview,
    file_from_offset: int,
    start: int,
    end: int,
    *,
    broker_name: str,
    include_body: bool = True,
    row_filter: RowFilter | None = None,
) -> list[dict[str, Any]]:
    """Reference row builder: one dict per record (column names of :data:`ROCKETMQ_SCHEMA`),
    record by record with :func:`check_record`; stops where :func:`rocketmq_arrow_batches` stops."""
    rows: list[dict[str, Any]] = []
    pos = start
    while pos < end:
        res = check_record(buf, pos, end, check_crc=False, read_body=True)
        if res.success and res.size == 0:
            break  # blank end-of-segment record
        if not res.success or res.record is None:
            if res.error and "truncated" in res.error:
                break
            if not any(bytes(buf[pos : min(end, pos + 8)])):
                break
            raise CorruptDataError(res.error or "unreadable record", offset=file_from_offset + pos)
        r = res.record
        if row_filter is None or row_filter.accepts(
            r.topic, r.queue_id, r.queue_offset, r.store_timestamp, file_from_offset + pos, r.sys_flag, r.properties
        ):
            props = dict(r.properties)
            rows.append({
                "topic": r.topic, "flag": r.flag, "body": bytes(r.body) if include_body else None,
                "properties": props, "brokerName": broker_name, "queueId": r.queue_id,
                "queueOffset": r.queue_offset, "bornTimestamp": r.born_timestamp,
                "storeTimestamp": r.store_timestamp, "commitLogOffset": file_from_offset + pos, "size": res.size,
                "keys": split_keys(props.get("KEYS")), "tags": props.get("TAGS"), "uniqKey": props.get("UNIQ_KEY"),
                "sysFlag": r.sys_flag, "bornHost": str(r.born_host), "storeHost": str(r.store_host),
                "reconsumeTimes": r.reconsume_times, "bodyCRC": r.body_crc,
            })  # fmt: skip
        pos += res.size
    return rows
