"""The ``kafka-log`` Spark data source: Kafka partition directories read offline, batch and streaming.

>>> df = (spark.read.format("kafka-log")                                     # doctest: +SKIP
...       .option("subscribe", "orders").option("startingOffsets", "earliest")
...       .load("/var/lib/kafka/data"))

Columns are exactly those of Spark's own Kafka source (:data:`KAFKA_SCHEMA`; with
``includeHeaders=true`` :data:`KAFKA_SCHEMA_WITH_HEADERS`), produced as Arrow record batches.
Option names, defaults and precedence follow Spark's Kafka source; see ``docs/spark.md``.

Parsing/validation lives in :mod:`mqstore.spark._kafka_options` (pure), planning against the
files in :mod:`mqstore.spark._kafka_plan`, reading in :mod:`mqstore.spark._kafka_read`; this
module only adapts them to PySpark's Python Data Source API.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from pyspark.sql.datasource import DataSource, DataSourceReader, DataSourceStreamReader, InputPartition
from pyspark.sql.streaming.datasource import (
    ReadAllAvailable,
    ReadLimit,
    ReadMaxBytes,
    ReadMaxRows,
    ReadMinRows,
    SupportsTriggerAvailableNow,
)
from pyspark.sql.types import (
    ArrayType,
    BinaryType,
    IntegerType,
    LongType,
    StringType,
    StructField,
    StructType,
    TimestampType,
)

from mqstore.errors import DataLossError
from mqstore.spark._kafka_options import KafkaLogOptions, TopicPartition, parse_options
from mqstore.spark._kafka_plan import (
    OffsetRange,
    PartitionInfo,
    check_offset,
    discover_partitions,
    offsets_json,
    parse_offsets_json,
    plan_batch_ranges,
    rate_limit_bytes,
    rate_limit_offsets,
    resolve_bound,
    split_ranges,
)
from mqstore.spark._option_names import refuse_custom_schema
from mqstore.spark.cluster import check_visible, with_absolute_paths
from mqstore.storage.fileio import localize_paths, split_fs_options

__all__ = [
    "KAFKA_SCHEMA",
    "KAFKA_SCHEMA_DDL",
    "KAFKA_SCHEMA_WITH_HEADERS",
    "KAFKA_SCHEMA_WITH_HEADERS_DDL",
    "KafkaLogDataSource",
    "KafkaLogPartition",
    "kafka_schema",
]

KAFKA_SCHEMA = StructType([
    StructField("key", BinaryType()),
    StructField("value", BinaryType()),
    StructField("topic", StringType()),
    StructField("partition", IntegerType()),
    StructField("offset", LongType()),
    StructField("timestamp", TimestampType()),
    StructField("timestampType", IntegerType()),
])
"""Spark's Kafka source columns: ``key binary, value binary, topic string, partition int,
offset long, timestamp timestamp, timestampType int``."""

KAFKA_SCHEMA_WITH_HEADERS = StructType([
    *KAFKA_SCHEMA.fields,
    StructField("headers", ArrayType(StructType([StructField("key", StringType()),
                                                 StructField("value", BinaryType())]))),
])
""":data:`KAFKA_SCHEMA` plus ``headers array<struct<key:string,value:binary>>`` (``includeHeaders``)."""

KAFKA_SCHEMA_DDL = ("key BINARY, value BINARY, topic STRING, partition INT, offset BIGINT, "
                    "timestamp TIMESTAMP, timestampType INT")
KAFKA_SCHEMA_WITH_HEADERS_DDL = KAFKA_SCHEMA_DDL + ", headers ARRAY<STRUCT<key: STRING, value: BINARY>>"


def kafka_schema(include_headers: bool = False) -> StructType:
    return KAFKA_SCHEMA_WITH_HEADERS if include_headers else KAFKA_SCHEMA


@dataclass(frozen=True)
class KafkaLogPartition(InputPartition):
    """One Spark task: an offset range of one Kafka partition (with an index-entry start hint)."""

    range: OffsetRange
    include_headers: bool
    max_records: int
    fail_on_data_loss: bool
    read_committed: bool = False
    committed: Any = None  # CommittedRanges of the range (read_committed), computed by the planner


def _read(partition: KafkaLogPartition) -> Iterator[Any]:
    from mqstore.spark._kafka_read import read_arrow

    check_visible(partition.range.path, "Kafka partition directory")  # planned on the driver: there it exists
    yield from read_arrow(partition.range, include_headers=partition.include_headers,
                          max_records=partition.max_records, fail_on_data_loss=partition.fail_on_data_loss,
                          read_committed=partition.read_committed, committed=partition.committed)


def _partitions(opts: KafkaLogOptions, ranges: list[OffsetRange]) -> list[KafkaLogPartition]:
    """One task per piece; with read_committed the planner scans each partition's transactions
    once and hands every task the excluded ranges of its own offsets."""
    pieces = split_ranges(ranges, opts.min_partitions, opts.max_records_per_partition)
    states: dict[str, Any] = {}
    out = []
    for r in pieces:
        committed = None
        if opts.read_committed and r.size:
            from mqstore.storage.kafka.txn import partition_txn_state

            if r.path not in states:
                states[r.path] = partition_txn_state(r.path)
            committed = states[r.path].restrict(r.start, r.end)
        out.append(KafkaLogPartition(r, opts.include_headers, opts.max_records_per_batch, opts.fail_on_data_loss,
                                     opts.read_committed, committed))
    return out


class KafkaLogBatchReader(DataSourceReader):
    def __init__(self, opts: KafkaLogOptions, fs_options: Mapping[str, str] | None = None) -> None:
        self.opts = opts
        self.fs_options = dict(fs_options or {})

    def partitions(self) -> Sequence[InputPartition]:
        infos = discover_partitions(self.opts, self.fs_options)
        parts = _partitions(self.opts, plan_batch_ranges(self.opts, infos))
        # Spark needs at least one partition to run the scan; an empty range reads nothing.
        return parts or [KafkaLogPartition(OffsetRange("", 0, "", 0, 0), self.opts.include_headers,
                                           self.opts.max_records_per_batch, self.opts.fail_on_data_loss)]

    def read(self, partition: InputPartition) -> Iterator[Any]:
        assert isinstance(partition, KafkaLogPartition)
        return _read(partition)


class KafkaLogStreamReader(DataSourceStreamReader, SupportsTriggerAvailableNow):
    """Offsets are Spark's Kafka JSON ``{"topic": {"partition": next_offset}}``."""

    def __init__(self, opts: KafkaLogOptions, fs_options: Mapping[str, str] | None = None) -> None:
        self.opts = opts
        self.fs_options = dict(fs_options or {})
        self._target: dict[TopicPartition, int] | None = None  # availableNow snapshot
        self.clock: Callable[[], float] = time.time  # seconds; tests replace it
        self._last_trigger_ms = 0.0  # when the last batch was admitted (0: never, so the first one goes)

    # -------------------------------------------------------------- helpers
    def _infos(self) -> dict[TopicPartition, PartitionInfo]:
        return {i.tp: i for i in discover_partitions(self.opts, self.fs_options)}

    def _bounds(self, start: dict[TopicPartition, int], infos: dict[TopicPartition, PartitionInfo]
                ) -> tuple[dict[TopicPartition, int], dict[TopicPartition, int]]:
        """Checked start offsets and the end offsets available now (log ends, or the availableNow
        target).  New partitions start at their log start (Spark: earliest)."""
        starts: dict[TopicPartition, int] = {}
        ends: dict[TopicPartition, int] = {}
        for tp, s in start.items():
            info = infos.get(tp)
            if info is None:
                if self.opts.fail_on_data_loss:
                    raise DataLossError(f"partition {tp[0]}-{tp[1]} disappeared; set failOnDataLoss=false to "
                                        "ignore it")
                continue
            if s < info.log_start:
                s = check_offset(info, s, what="stream offset", fail_on_data_loss=self.opts.fail_on_data_loss)
            elif s > info.log_end:
                check_offset(info, s, what="stream offset", fail_on_data_loss=self.opts.fail_on_data_loss)
            starts[tp] = s
            ends[tp] = info.log_end
        for tp, info in infos.items():
            if tp not in start and (self._target is None or tp in self._target):
                starts[tp] = info.log_start
                ends[tp] = info.log_end
        if self._target is not None:
            ends = {tp: min(e, self._target.get(tp, starts[tp])) for tp, e in ends.items()}
        return starts, ends

    # -------------------------------------------------------------- API
    def initialOffset(self) -> dict:
        infos = list(self._infos().values())
        starts = resolve_bound(self.opts.starting, infos, start=True, strategy=self.opts.by_timestamp_strategy,
                               fail_on_data_loss=self.opts.fail_on_data_loss)
        return offsets_json(starts)

    def getDefaultReadLimit(self) -> ReadLimit:
        if self.opts.min_offsets_per_trigger is not None:
            return ReadMinRows(self.opts.min_offsets_per_trigger)
        if self.opts.max_offsets_per_trigger is not None:
            return ReadMaxRows(self.opts.max_offsets_per_trigger)
        if self.opts.max_bytes_per_trigger is not None:
            return ReadMaxBytes(self.opts.max_bytes_per_trigger)
        return ReadAllAvailable()

    def prepareForTriggerAvailableNow(self) -> None:
        self._target = {i.tp: i.log_end for i in self._infos().values()}

    def delay_batch(self, starts: dict[TopicPartition, int], ends: dict[TopicPartition, int]) -> bool:
        """Spark's ``minOffsetsPerTrigger`` rule: hold the batch back while fewer new offsets than
        the minimum are available, unless ``maxTriggerDelay`` has passed since the last batch was
        admitted (the first batch of a reader is never held back).  Admitting resets the timer."""
        now_ms = self.clock() * 1000.0
        if now_ms - self._last_trigger_ms >= self.opts.max_trigger_delay_ms:
            self._last_trigger_ms = now_ms
            return False
        available = sum(max(0, e - starts.get(tp, e)) for tp, e in ends.items())
        if available < (self.opts.min_offsets_per_trigger or 0):
            return True
        self._last_trigger_ms = now_ms
        return False

    def latestOffset(self, start: dict, limit: ReadLimit) -> dict:
        infos = self._infos()
        s, ends = self._bounds(parse_offsets_json(start), infos)
        if (self.opts.min_offsets_per_trigger is not None and not isinstance(limit, ReadAllAvailable)
                and self.delay_batch(s, ends)):
            return start  # no new batch yet (Trigger.Once hands ReadAllAvailable: never delayed)
        max_rows = limit.max_rows if isinstance(limit, ReadMaxRows) else None
        max_bytes = limit.max_bytes if isinstance(limit, ReadMaxBytes) else None
        if not isinstance(limit, ReadAllAvailable):
            # Spark hands over one limit: apply the other option as well when both are set
            max_rows = max_rows or self.opts.max_offsets_per_trigger
            max_bytes = max_bytes or self.opts.max_bytes_per_trigger
        clamped = dict(ends)
        if max_rows is not None:
            clamped = rate_limit_offsets(s, clamped, max_rows)
        if max_bytes is not None:
            clamped = rate_limit_bytes({tp: infos[tp].path for tp in clamped}, s, clamped, max_bytes,
                                       {tp: infos[tp].io for tp in clamped})
        return offsets_json(clamped)

    def reportLatestOffset(self) -> dict | None:
        return offsets_json({tp: i.log_end for tp, i in self._infos().items()})

    def partitions(self, start: dict, end: dict) -> Sequence[InputPartition]:
        s = parse_offsets_json(start)
        e = parse_offsets_json(end)
        infos = self._infos()
        ranges = []
        for tp, until in sorted(e.items()):
            frm = s.get(tp)
            info = infos.get(tp)
            if info is None:
                if self.opts.fail_on_data_loss:
                    raise DataLossError(f"partition {tp[0]}-{tp[1]} disappeared; set failOnDataLoss=false to "
                                        "ignore it")
                continue
            if frm is None:
                frm = info.log_start
            if until < frm:
                # the partition was truncated below what was already read (Spark reports data loss)
                if self.opts.fail_on_data_loss:
                    raise DataLossError(f"offsets of {tp[0]}-{tp[1]} went backwards from {frm} to {until}; "
                                        "set failOnDataLoss=false to skip", path=info.path)
                continue
            ranges.append(OffsetRange(tp[0], tp[1], info.path, frm, until, io=info.io))
        return _partitions(self.opts, ranges)

    def read(self, partition: InputPartition) -> Iterator[Any]:
        assert isinstance(partition, KafkaLogPartition)
        return _read(partition)

    def commit(self, end: dict) -> None:
        """Nothing to do: the source never deletes or marks data."""


class KafkaLogDataSource(DataSource):
    """``spark.read.format("kafka-log")`` / ``spark.readStream.format("kafka-log")``."""

    @classmethod
    def name(cls) -> str:
        return "kafka-log"

    def _include_headers(self) -> bool:
        value = str(self.options.get("includeHeaders", self.options.get("includeheaders", "false")))
        return value.strip().lower() == "true"

    def schema(self) -> StructType:
        return kafka_schema(self._include_headers())

    def _checked(self, schema: StructType, *, streaming: bool) -> KafkaLogOptions:
        from mqstore.spark._kafka_read import arrow_schema

        _fs, rest = split_fs_options(self.options)  # (the file system's options: fileio)
        opts = with_absolute_paths(parse_options(localize_paths(rest), streaming=streaming))
        refuse_custom_schema("kafka-log", schema, arrow_schema(opts.include_headers))
        return opts

    def reader(self, schema: StructType) -> DataSourceReader:
        fs, _rest = split_fs_options(self.options)
        return KafkaLogBatchReader(self._checked(schema, streaming=False), fs)

    def streamReader(self, schema: StructType) -> DataSourceStreamReader:
        fs, _rest = split_fs_options(self.options)
        return KafkaLogStreamReader(self._checked(schema, streaming=True), fs)
