"""The ``rocketmq`` Spark data source: RocketMQ store directories as a DataFrame, batch and stream.

```python
df = spark.read.format("rocketmq").load("/data/broker-a/store")
df = spark.read.format("rocketmq").option("paths", '["/a/store", "/b/store"]') \
         .option("brokerNames", "broker-a,broker-b").option("topics", "orders").load()
q = spark.readStream.format("rocketmq").load(path).writeStream...
```

Columns: :data:`ROCKETMQ_SCHEMA`.  Batch reads get one input partition per CommitLog segment
(more with ``minPartitions``); streams use the CommitLog physical offset per broker as their
offset (``{"broker-a": 123456}``), which plays the role of RocketMQ's ``reputFromOffset``.
Options: see ``docs/spark.md`` (section *The rocketmq source*).
"""

from __future__ import annotations

import os
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from pyspark.sql.datasource import (
    DataSource,
    DataSourceReader,
    DataSourceStreamReader,
    EqualTo,
    Filter,
    GreaterThan,
    GreaterThanOrEqual,
    In,
    InputPartition,
    LessThan,
    LessThanOrEqual,
)
from pyspark.sql.streaming.datasource import (
    ReadAllAvailable,
    ReadLimit,
    ReadMaxBytes,
    ReadMaxRows,
    SupportsTriggerAvailableNow,
)

from mqstore.errors import DataLossError, SourceOptionError
from mqstore.formats.rocketmq.dledger import ENTRY_HEADER_SIZE as DLEDGER_ENTRY_HEADER
from mqstore.spark._option_names import refuse_custom_schema
from mqstore.spark._rocketmq_options import (
    LATEST,
    RocketMQOptions,
    apportion,
    parse_options,
    resolve_queue_bounds,
    select_topics,
)
from mqstore.spark._rocketmq_read import (
    ROCKETMQ_COLUMNS,
    ROCKETMQ_SCHEMA,
    RowFilter,
    rocketmq_arrow_batches,
    rocketmq_arrow_schema,
)
from mqstore.spark._rocketmq_store import (
    StoreView,
    check_remote_store,
    dledger_data_dirs,
    list_segments,
)
from mqstore.spark.cluster import check_visible, with_absolute_paths
from mqstore.storage.fileio import LOCAL, FileIO, fileio_for, localize_paths, split_fs_options
from mqstore.storage.rocketmq.walk import Segment, check_boundary, earliest_offset, split_range, walk

if TYPE_CHECKING:  # pragma: no cover
    import pyarrow as pa
    from pyspark.sql.types import StructType

__all__ = [
    "ROCKETMQ_COLUMNS",
    "ROCKETMQ_SCHEMA",
    "CommitLogRange",
    "PushedFilters",
    "RocketMQBatchReader",
    "RocketMQDataSource",
    "RocketMQStreamReader",
    "RowFilter",
    "plan_batch",
    "rocketmq_arrow_batches",
    "rocketmq_arrow_schema",
]


@dataclass
class CommitLogRange(InputPartition):
    """One input partition: ``[start, end)`` (positions inside one CommitLog segment file, both
    record boundaries) of one store, and which of its records become rows."""

    segment: str
    base: int
    start: int
    end: int
    broker_name: str
    row_filter: RowFilter | None = None
    dledger: bool = False  # a DLedger data file: [start, end) are entry boundaries
    io: FileIO = LOCAL  # where the segment is (an object store: read by byte ranges)

    def __post_init__(self) -> None:
        self.value = (self.segment, self.start, self.end)


def read_range(part: CommitLogRange, *, include_body: bool, check_crc: bool) -> Iterator[pa.RecordBatch]:
    """The RecordBatches of one partition (runs on the executors)."""
    # planned on the driver, where it exists (retention deletes segments, never the directory)
    check_visible(os.path.dirname(part.segment), "CommitLog directory")
    return rocketmq_arrow_batches(
        part.segment, part.start, part.end, broker_name=part.broker_name, file_from_offset=part.base,
        include_body=include_body, check_crc=check_crc, row_filter=part.row_filter, dledger=part.dledger,
        io=part.io,
    )


# =============================================================================== filter pushdown
@dataclass
class PushedFilters:
    """The filters ``pushFilters`` accepted; all are applied exactly in ``read()``."""

    topics: frozenset[str] | None = None
    brokers: frozenset[str] | None = None
    queue_ids: frozenset[int] | None = None
    ts_min: int | None = None
    ts_end: int | None = None
    offset_min: int | None = None
    offset_end: int | None = None

    def accept(self, f: Filter) -> bool:
        """Record ``f`` when it can be applied exactly; ``False`` leaves it to Spark."""
        col = f.attribute if hasattr(f, "attribute") else None
        if not isinstance(col, tuple) or len(col) != 1:
            return False
        name = col[0]
        if name in ("topic", "brokerName", "queueId"):
            kind = int if name == "queueId" else str
            if isinstance(f, EqualTo):
                values: tuple[Any, ...] = (f.value,)
            elif isinstance(f, In):
                values = tuple(f.value)
            else:
                return False
            if not all(isinstance(v, kind) and not isinstance(v, bool) for v in values):
                return False
            field = {"topic": "topics", "brokerName": "brokers", "queueId": "queue_ids"}[name]
            old = getattr(self, field)
            setattr(self, field, frozenset(values) if old is None else old & frozenset(values))
            return True
        if name in ("storeTimestamp", "commitLogOffset"):
            v = getattr(f, "value", None)
            if not isinstance(v, int) or isinstance(v, bool):
                return False
            lo_name, hi_name = ("ts_min", "ts_end") if name == "storeTimestamp" else ("offset_min", "offset_end")
            lo, hi = getattr(self, lo_name), getattr(self, hi_name)
            if isinstance(f, EqualTo):
                new_lo, new_hi = v, v + 1
            elif isinstance(f, GreaterThan):
                new_lo, new_hi = v + 1, None
            elif isinstance(f, GreaterThanOrEqual):
                new_lo, new_hi = v, None
            elif isinstance(f, LessThan):
                new_lo, new_hi = None, v
            elif isinstance(f, LessThanOrEqual):
                new_lo, new_hi = None, v + 1
            else:
                return False
            if new_lo is not None:
                setattr(self, lo_name, new_lo if lo is None else max(lo, new_lo))
            if new_hi is not None:
                setattr(self, hi_name, new_hi if hi is None else min(hi, new_hi))
            return True
        return False


# =============================================================================== batch planning
def plan_batch(opts: RocketMQOptions, pushed: PushedFilters | None = None,
               fs_options: Mapping[str, str] | None = None) -> list[CommitLogRange]:
    """The input partitions of a batch read (driver side; also usable without Spark).
    ``fs_options``: the ``fs.*`` options of stores in an object store."""
    pushed = pushed or PushedFilters()
    views: list[StoreView] = []
    try:
        for i, (p, b) in enumerate(zip(opts.paths, opts.broker_names, strict=True)):
            views.append(StoreView(p, b, commit_log=opts.commit_log_of(i), store_type=opts.store_type,
                                   io=fileio_for(p, fs_options)))
        known = {t for v in views for t in v.topics()}
        topics = select_topics(opts, known)
        if pushed.topics is not None:
            topics = pushed.topics if topics is None else topics & pushed.topics
        catalogue = {v.broker_name: v.queue_ranges() for v in views} if opts.offsets_given else {}
        by_broker = {v.broker_name: v for v in views}

        def time_lookup(broker: str, topic: str, qid: int, ts: int) -> int:
            return by_broker[broker].offset_for_time(topic, qid, ts)

        bounds = resolve_queue_bounds(opts, catalogue, topics, time_lookup)
        parts: list[tuple[Segment, int, int, str, RowFilter, bool]] = []
        ios = {v.broker_name: v.io for v in views}
        for v in views:
            if pushed.brokers is not None and v.broker_name not in pushed.brokers:
                continue
            qb = bounds[v.broker_name] if bounds is not None else None
            lo, hi = (v.segments[0].base if v.segments else 0), (v.segments[-1].end if v.segments else 0)
            if qb is not None:
                rng = v.physical_range(qb)
                if rng is None:
                    continue
                lo, hi = rng
                if v.dledger:  # from the first message back to its entry
                    lo -= DLEDGER_ENTRY_HEADER
            rf = RowFilter(topics=topics, queue_bounds=qb, ts_min=pushed.ts_min, ts_end=pushed.ts_end,
                           offset_min=pushed.offset_min, offset_end=pushed.offset_end, queue_ids=pushed.queue_ids,
                           tags=opts.tags)
            for seg in v.segments:
                if seg.end <= lo or seg.base >= hi:
                    continue
                if pushed.offset_min is not None and seg.end <= pushed.offset_min:
                    continue
                if pushed.offset_end is not None and seg.base >= pushed.offset_end:
                    continue
                parts.append((seg, max(lo, seg.base) - seg.base, min(hi, seg.end) - seg.base, v.broker_name, rf,
                              v.dledger))
    finally:
        for v in views:
            v.close()
    want = opts.min_partitions or 0
    if want > len(parts) and parts:
        pieces = apportion([max(1, e - s) for _seg, s, e, _b, _f, _d in parts], want)
        out: list[CommitLogRange] = []
        for (seg, s, e, b, rf, dl), k in zip(parts, pieces, strict=True):
            for a, z in split_range(seg, s, e, max(1, k), dledger=dl, io=ios[b]):
                out.append(CommitLogRange(seg.path, seg.base, a, z, b, rf, dl, ios[b]))
    else:
        out = [CommitLogRange(seg.path, seg.base, s, e, b, rf, dl, ios[b]) for seg, s, e, b, rf, dl in parts]
    for i, p in enumerate(out):
        p.value = (i, p.segment, p.start, p.end)
    return out


class RocketMQBatchReader(DataSourceReader):
    def __init__(self, opts: RocketMQOptions, fs_options: Mapping[str, str] | None = None) -> None:
        self.opts = opts
        self.pushed = PushedFilters()
        self.fs_options = dict(fs_options or {})

    def pushFilters(self, filters: list[Filter]) -> Iterator[Filter]:
        for f in filters:
            if not self.pushed.accept(f):
                yield f

    def partitions(self) -> Sequence[InputPartition]:
        return plan_batch(self.opts, self.pushed, self.fs_options)

    def read(self, partition: InputPartition) -> Iterator[pa.RecordBatch]:
        if not isinstance(partition, CommitLogRange):
            return  # Spark reads one placeholder partition when partitions() returned none
        yield from read_range(partition, include_body=self.opts.include_body, check_crc=self.opts.check_crc)


# =============================================================================== streaming
class RocketMQStreamReader(DataSourceStreamReader, SupportsTriggerAvailableNow):
    """Offsets: ``{brokerName: CommitLog physical offset of the next unread record}``."""

    def __init__(self, opts: RocketMQOptions, fs_options: Mapping[str, str] | None = None) -> None:
        self.opts = opts
        self.stores = dict(zip(opts.broker_names, opts.paths, strict=True))
        self.commit_logs = {b: opts.commit_log_of(i) for i, b in enumerate(opts.broker_names)}
        self.ios = {b: fileio_for(path, fs_options) for b, path in self.stores.items()}
        for b, path in self.stores.items():
            if self.ios[b].remote:
                check_remote_store(path, self.commit_logs[b], self.ios[b])
            elif dledger_data_dirs(path, self.commit_logs[b]) is not None:
                raise SourceOptionError(f"{path} has a DLedger CommitLog (enableDLegerCommitLog): the streaming "
                                        "rocketmq source reads classic CommitLogs only; read it as a batch")
        self._target: dict[str, int] | None = None
        self._latest: dict[str, int] | None = None
        if opts.topics is not None or opts.topic_pattern is not None or opts.tags is not None:
            self._filter: RowFilter | None = RowFilter(
                topics=frozenset(opts.topics) if opts.topics is not None else None, topic_pattern=opts.topic_pattern,
                tags=opts.tags)
        else:
            self._filter = None

    def _segments(self, broker: str) -> list[Segment]:
        return list_segments(self.stores[broker], self.commit_logs[broker], self.ios[broker])

    def _end_of(self, broker: str, start: int | None = None) -> int:
        segs = self._segments(broker)
        if not segs:
            return 0
        if start is None:
            start = segs[-1].base  # a segment base is always a record boundary
        return walk(segs, max(start, earliest_offset(segs)), io=self.ios[broker]).end

    def initialOffset(self) -> dict[str, int]:
        out: dict[str, int] = {}
        spec = self.opts.stream_starting
        for broker in self.stores:
            segs = self._segments(broker)
            chosen = spec.get(broker, -2) if isinstance(spec, dict) else (-1 if spec == "latest" else -2)
            if chosen == -2:
                out[broker] = earliest_offset(segs)
            elif chosen == LATEST:
                out[broker] = self._end_of(broker)
            else:
                out[broker] = check_boundary(segs, chosen, fail_on_data_loss=self.opts.fail_on_data_loss,
                                             what=f"startingOffsets of {broker}", io=self.ios[broker])
        return out

    def getDefaultReadLimit(self) -> ReadLimit:
        if self.opts.max_offsets_per_trigger is not None:
            return ReadMaxRows(self.opts.max_offsets_per_trigger)
        if self.opts.max_bytes_per_trigger is not None:
            return ReadMaxBytes(self.opts.max_bytes_per_trigger)
        return ReadAllAvailable()

    def prepareForTriggerAvailableNow(self) -> None:
        self._target = {b: self._end_of(b) for b in self.stores}

    def _start_of(self, start: dict[str, Any], broker: str, segs: list[Segment]) -> int:
        if broker not in start:
            raise SourceOptionError(f"the stream's checkpointed offset {start} has no entry for broker {broker!r}; "
                                    "the brokers of a query cannot change across restarts")
        pos = int(start[broker])
        first = earliest_offset(segs)
        if pos < first:
            return check_boundary(segs, pos, fail_on_data_loss=self.opts.fail_on_data_loss,
                                  what=f"stream offset of {broker}", io=self.ios[broker])
        last = segs[-1].end if segs else 0
        if pos > last:  # the store was replaced or truncated behind the query's back
            if self.opts.fail_on_data_loss:
                raise DataLossError(f"stream offset {pos} of {broker} is beyond the store's end {last} "
                                    "(set failOnDataLoss=false to continue from the end)")
            return self._end_of(broker)
        return pos

    def latestOffset(self, start: dict[str, Any], limit: ReadLimit) -> dict[str, int]:
        max_rows = max_bytes = None
        if not isinstance(limit, ReadAllAvailable):
            max_rows = self.opts.max_offsets_per_trigger
            max_bytes = self.opts.max_bytes_per_trigger
            if isinstance(limit, ReadMaxRows):
                max_rows = limit.max_rows
            elif isinstance(limit, ReadMaxBytes):
                max_bytes = limit.max_bytes
        walks = {}
        for broker in self.stores:
            segs = self._segments(broker)
            pos = self._start_of(start, broker, segs)
            stop_at = self._target.get(broker) if self._target is not None else None
            walks[broker] = (pos, walk(segs, pos, stop_at=stop_at, max_records=max_rows, io=self.ios[broker]))
        take = {b: len(w.offsets) for b, (_p, w) in walks.items()}
        if max_rows is not None:
            take = dict(zip(take, apportion(list(take.values()), max_rows), strict=True))
        if max_bytes is not None:
            totals = {b: int(w.sizes[: take[b]].sum()) for b, (_p, w) in walks.items()}
            shares = dict(zip(totals, apportion(list(totals.values()), max_bytes), strict=True))
            for b, (_p, w) in walks.items():
                cum = w.sizes[: take[b]].cumsum()
                take[b] = int((cum <= shares[b]).sum())
            if not any(take.values()):  # at least one record per trigger, however large
                for b, (_p, w) in walks.items():
                    if len(w.offsets):
                        take[b] = 1
                        break
        out: dict[str, int] = {}
        for b, (pos, w) in walks.items():
            k = take[b]
            if k == len(w.offsets):
                out[b] = w.end  # past the last record, or the next segment after a blank
            elif k == 0:
                out[b] = pos
            else:
                out[b] = int(w.offsets[k - 1] + w.sizes[k - 1])
        self._latest = out
        return out

    def reportLatestOffset(self) -> dict[str, int] | None:
        return self._latest

    def partitions(self, start: dict[str, Any], end: dict[str, Any]) -> Sequence[InputPartition]:
        parts: list[CommitLogRange] = []
        for broker in self.stores:
            segs = self._segments(broker)
            lo = self._start_of(start, broker, segs)
            hi = int(end.get(broker, lo))
            for seg in segs:
                if seg.end <= lo or seg.base >= hi:
                    continue
                parts.append(CommitLogRange(seg.path, seg.base, max(lo, seg.base) - seg.base,
                                            min(hi, seg.end) - seg.base, broker, self._filter, io=self.ios[broker]))
        return parts

    def read(self, partition: InputPartition) -> Iterator[pa.RecordBatch]:
        if not isinstance(partition, CommitLogRange):
            return  # Spark reads one placeholder partition when partitions() returned none
        yield from read_range(partition, include_body=self.opts.include_body, check_crc=self.opts.check_crc)

    def commit(self, end: dict[str, Any]) -> None:
        """Nothing to release: the store is only read."""


# =============================================================================== the source
class RocketMQDataSource(DataSource):
    """``format("rocketmq")``: RocketMQ store directories (batch and streaming)."""

    @classmethod
    def name(cls) -> str:
        return "rocketmq"

    def schema(self) -> str:
        return ROCKETMQ_SCHEMA

    def reader(self, schema: StructType) -> DataSourceReader:
        fs, rest = split_fs_options(self.options)
        opts = with_absolute_paths(parse_options(localize_paths(rest)))
        refuse_custom_schema("rocketmq", schema, rocketmq_arrow_schema())
        return RocketMQBatchReader(opts, fs)

    def streamReader(self, schema: StructType) -> DataSourceStreamReader:
        fs, rest = split_fs_options(self.options)
        opts = with_absolute_paths(parse_options(localize_paths(rest), streaming=True))
        refuse_custom_schema("rocketmq", schema, rocketmq_arrow_schema())
        return RocketMQStreamReader(opts, fs)
