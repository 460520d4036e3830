"""The streaming dispatch: RocketMQ's ReputMessageService as a Structured Streaming query.

The *source* (format ``rocketmq-dispatch``, read side) tails a store's CommitLog.  Its offset is
``{"commitLogOffset": N}``, the physical offset of the next record to dispatch: Spark's checkpoint
plays the role of the broker's ``reputFromOffset``.  ``latestOffset`` only ever moves to a
*complete* record boundary (walked with :func:`mqstore.kernels.rocketmq.framing.record_positions`,
the last record checked field by field and by body CRC), so a record the writer is still copying
is never read.  Each micro-batch is split per CommitLog segment; a task scans its range with the
shared scan (:func:`~mqstore.kernels.rocketmq.scan.scan_segment`) and emits the dispatch columns
as Arrow record batches.

The *sink* (same format, write side) stages each task's rows in an Arrow IPC file and the
driver-side ``commit`` applies the staged batches in CommitLog order with the store's own
:class:`~mqstore.storage.rocketmq.dispatch.IndexWriters` and
:class:`~mqstore.storage.rocketmq.index.IndexService` (one dispatcher, under the store's dispatch lock).
Writes are idempotent: ConsumeQueue units already written are skipped (and checked to point at the
same physical offset), index keys at or below the index's resume point are skipped, so a replayed
micro-batch writes nothing twice and a restart from the Spark checkpoint is exactly-once.  The
commit also advances the store checkpoint's logics/index timestamps as the broker's dispatcher
does.

The store's writer must not dispatch by itself: open it with ``StoreConfig(dispatch_enabled=False)``.
"""

from __future__ import annotations

import os
import uuid
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np
from pyspark.sql.datasource import (
    DataSource,
    DataSourceStreamArrowWriter,
    DataSourceStreamReader,
    InputPartition,
    WriterCommitMessage,
)
from pyspark.sql.streaming.datasource import (
    ReadAllAvailable,
    ReadLimit,
    ReadMaxBytes,
    SupportsTriggerAvailableNow,
)
from pyspark.sql.types import (
    ArrayType,
    IntegerType,
    LongType,
    StringType,
    StructField,
    StructType,
)

from mqstore.errors import CorruptIndexError, InvalidArgumentError, StoreNotFoundError
from mqstore.storage.rocketmq.tail import complete_end

if TYPE_CHECKING:  # pragma: no cover
    import pyarrow as pa
    from pyspark.sql import SparkSession
    from pyspark.sql.streaming import StreamingQuery

    from mqstore.kernels.rocketmq.scan import DispatchBatch
    from mqstore.storage.rocketmq.config import StoreConfig

FORMAT = "rocketmq-dispatch"
OFFSET_KEY = "commitLogOffset"

DISPATCH_SCHEMA = StructType([
    StructField("commitLogOffset", LongType(), False),
    StructField("size", IntegerType(), False),
    StructField("topic", StringType(), False),
    StructField("queueId", IntegerType(), False),
    StructField("queueOffset", LongType(), False),
    StructField("sysFlag", IntegerType(), False),
    StructField("storeTimestamp", LongType(), False),
    StructField("tagsCode", LongType(), False),
    StructField("keyHashes", ArrayType(IntegerType(), False), False),
    # raw INNER_MULTI_DISPATCH / INNER_MULTI_QUEUE_OFFSET of the records that name LMQ queues
    StructField("multiDispatch", StringType(), True),
    StructField("multiQueueOffset", StringType(), True),
])


# =============================================================================== CommitLog tailing
# where a micro-batch may end is storage's rule for reading a CommitLog another process writes:
# :func:`mqstore.storage.rocketmq.tail.complete_end`


def initial_dispatch_offset(store: str | os.PathLike[str], config: StoreConfig) -> int:
    """Where dispatching must start for a store's existing consumequeue/ and index/: the end of
    the last ConsumeQueue unit, or earlier if the IndexFiles lag behind (replays are skipped)."""
    from mqstore.storage.rocketmq.dispatch import IndexWriters
    from mqstore.storage.rocketmq.index import IndexService

    root = Path(store)
    writers = IndexWriters(root, config.mapped_file_size_consume_queue, None, read_only=True)
    index = IndexService(root / "index", config.hash_slot_num, config.index_num, read_only=True)
    try:
        writers.load_consume_queues()
        cq_end = 0
        for cq in writers.consume_queues.values():
            cq.recover()
            cq_end = max(cq_end, cq.max_physic_offset)
        if cq_end <= 0:
            return 0
        if not config.message_index_enable:
            return cq_end
        index.load(True, 0)
        if index.resume_offset < 0:
            return 0  # no key indexed yet although queues exist: index everything
        return min(cq_end, index.resume_offset)
    finally:
        writers.close()
        index.close()


# =============================================================================== source
@dataclass(frozen=True)
class DispatchRange(InputPartition):
    """Records of one CommitLog segment between two global offsets."""

    store: str
    seg_size: int
    base: int
    start: int
    end: int
    check_crc: bool = False


def _read_range(part: DispatchRange) -> Iterator[pa.RecordBatch]:
    from mqstore.storage.rocketmq.tail import scan_tail_range

    yield dispatch_batch_to_arrow(scan_tail_range(part.store, part.seg_size, part.base, part.start, part.end,
                                                  check_crc=part.check_crc))


def dispatch_batch_to_arrow(batch: DispatchBatch) -> pa.RecordBatch:
    """The dispatch columns of a scan as an Arrow record batch (schema :data:`DISPATCH_SCHEMA`)."""
    import pyarrow as pa

    n = len(batch)
    topics = pa.array(batch.topics, pa.string())
    topic_col = pa.DictionaryArray.from_arrays(pa.array(batch.topic_id, pa.int32()), topics).cast(pa.string()) if n else pa.array([], pa.string())
    counts = np.bincount(batch.key_row, minlength=n).astype(np.int32) if n else np.zeros(0, np.int32)
    offsets = np.zeros(n + 1, np.int32)
    np.cumsum(counts, out=offsets[1:])
    keys = pa.ListArray.from_arrays(pa.array(offsets, pa.int32()), pa.array(batch.key_hash, pa.int32()))
    arrays = [
        pa.array(batch.commit_log_offset, pa.int64()), pa.array(batch.size, pa.int32()), topic_col,
        pa.array(batch.queue_id, pa.int32()), pa.array(batch.queue_offset, pa.int64()),
        pa.array(batch.sys_flag, pa.int32()), pa.array(batch.store_timestamp, pa.int64()),
        pa.array(batch.tags_code, pa.int64()), keys,
    ]
    md: list[str | None] = [None] * n
    mo: list[str | None] = [None] * n
    for r, (q, o) in zip(batch.multi_row.tolist(), batch.multi_value, strict=True):
        md[r], mo[r] = q, o
    arrays += [pa.array(md, pa.string()), pa.array(mo, pa.string())]
    schema = pa.schema([
        pa.field("commitLogOffset", pa.int64(), False), pa.field("size", pa.int32(), False),
        pa.field("topic", pa.string(), False), pa.field("queueId", pa.int32(), False),
        pa.field("queueOffset", pa.int64(), False), pa.field("sysFlag", pa.int32(), False),
        pa.field("storeTimestamp", pa.int64(), False), pa.field("tagsCode", pa.int64(), False),
        pa.field("keyHashes", pa.list_(pa.field("element", pa.int32(), False)), False),
        pa.field("multiDispatch", pa.string(), True), pa.field("multiQueueOffset", pa.string(), True),
    ])
    return pa.RecordBatch.from_arrays(arrays, schema=schema)


def arrow_to_dispatch_batch(rb: pa.RecordBatch | pa.Table) -> DispatchBatch:
    """Inverse of :func:`dispatch_batch_to_arrow` (key order within a message kept)."""
    import pyarrow as pa

    from mqstore.kernels.rocketmq.scan import STOP_END, DispatchBatch

    t = pa.Table.from_batches([rb]) if isinstance(rb, pa.RecordBatch) else rb
    t = t.combine_chunks()
    n = t.num_rows
    col = lambda name, dt: np.asarray(t.column(name).to_numpy(), dtype=dt)  # noqa: E731
    off = col("commitLogOffset", np.int64)
    dict_topics = t.column("topic").combine_chunks().dictionary_encode() if n else None
    topics = dict_topics.dictionary.to_pylist() if dict_topics is not None else []
    topic_id = np.asarray(dict_topics.indices.to_numpy(), np.int32) if dict_topics is not None else np.zeros(0, np.int32)
    keys = t.column("keyHashes").combine_chunks() if n else None
    if keys is not None and len(keys):
        key_hash = np.asarray(keys.flatten().to_numpy(), np.int32)
        counts = np.asarray(keys.value_lengths().fill_null(0).to_numpy(), np.int64)
        key_row = np.repeat(np.arange(n, dtype=np.int64), counts)
    else:
        key_hash, key_row = np.zeros(0, np.int32), np.zeros(0, np.int64)
    end = int(off[-1]) + int(t.column("size")[n - 1].as_py()) if n else 0
    multi_row, multi_value = np.zeros(0, np.int64), []
    if n and "multiDispatch" in t.column_names:
        md = t.column("multiDispatch").to_pylist()
        mo = t.column("multiQueueOffset").to_pylist()
        rows = [i for i, q in enumerate(md) if q]
        multi_row = np.array(rows, np.int64)
        multi_value = [(md[i], mo[i]) for i in rows]
    return DispatchBatch(
        commit_log_offset=off, size=col("size", np.int32), queue_id=col("queueId", np.int32),
        queue_offset=col("queueOffset", np.int64), sys_flag=col("sysFlag", np.int32),
        store_timestamp=col("storeTimestamp", np.int64), tags_code=col("tagsCode", np.int64),
        topic_id=topic_id, topics=topics, key_row=key_row, key_hash=key_hash, next_offset=end, stop=STOP_END,
        multi_row=multi_row, multi_value=multi_value,
    )


class DispatchStreamReader(DataSourceStreamReader, SupportsTriggerAvailableNow):
    def __init__(self, options: Mapping[str, str]) -> None:
        self.store = options["path"]
        self.seg_size = int(options["commitLogFileSize"])
        self.max_bytes = int(options["maxBytesPerTrigger"]) if options.get("maxBytesPerTrigger") else None
        self.check_crc = options.get("checkCRC", "false").lower() == "true"
        self.config_json = options.get("storeConfig", "{}")
        self.available_now = False
        self.target: int | None = None  # availableNow: the end fixed when the run started

    def _config(self) -> StoreConfig:
        import json

        from mqstore.storage.rocketmq.config import StoreConfig

        return StoreConfig.from_dict(json.loads(self.config_json))

    def initialOffset(self) -> dict:
        return {OFFSET_KEY: initial_dispatch_offset(self.store, self._config())}

    def getDefaultReadLimit(self) -> ReadLimit:
        return ReadMaxBytes(self.max_bytes) if self.max_bytes else ReadAllAvailable()

    def prepareForTriggerAvailableNow(self) -> None:
        self.available_now = True  # the target is fixed at the first latestOffset (it knows start)

    def latestOffset(self, start: dict, limit: ReadLimit) -> dict:
        begin = int(start[OFFSET_KEY])
        max_bytes = limit.max_bytes if isinstance(limit, ReadMaxBytes) else None
        if self.available_now and self.target is None:
            self.target = complete_end(self.store, self.seg_size, begin)
        if self.target is not None:
            if begin >= self.target:
                return {OFFSET_KEY: begin}
            end = complete_end(self.store, self.seg_size, begin, max_bytes)
            return {OFFSET_KEY: min(end, self.target)}
        return {OFFSET_KEY: complete_end(self.store, self.seg_size, begin, max_bytes)}

    def reportLatestOffset(self) -> dict | None:
        return None

    def partitions(self, start: dict, end: dict) -> Sequence[InputPartition]:
        a, b = int(start[OFFSET_KEY]), int(end[OFFSET_KEY])
        parts: list[InputPartition] = []
        while a < b:
            base = a - a % self.seg_size
            stop = min(b, base + self.seg_size)
            parts.append(DispatchRange(self.store, self.seg_size, base, a, stop, self.check_crc))
            a = stop
        return parts

    def read(self, partition: InputPartition) -> Iterator[pa.RecordBatch]:
        assert isinstance(partition, DispatchRange)
        yield from _read_range(partition)

    def commit(self, end: dict) -> None:
        pass


# =============================================================================== sink
@dataclass
class StagedDispatch(WriterCommitMessage):
    """A task's rows, staged in an Arrow IPC file until the driver commits the micro-batch."""

    path: str
    first_offset: int
    rows: int


@dataclass(slots=True)
class ApplyStats:
    messages: int = 0
    units_written: int = 0
    units_skipped: int = 0
    keys_written: int = 0
    end_offset: int = 0
    index_files: list[str] = field(default_factory=list)


def apply_dispatch(store: str | os.PathLike[str], batches: Sequence[DispatchBatch], config: StoreConfig) -> ApplyStats:
    """Apply dispatch batches (in CommitLog order) to a store's consumequeue/ and index/ with
    the shared writers, idempotently, then flush them and the checkpoint's logics/index
    timestamps.  One dispatcher at a time: it takes the store's dispatch lock
    (:class:`~mqstore.storage.locks.StoreLock` on ``dispatch.lock``; :class:`StoreLockedError`
    while another dispatcher, or a store that dispatches itself, holds it)."""
    from mqstore.storage.locks import DISPATCH_LOCK_FILE, StoreLock
    from mqstore.storage.rocketmq.checkpoint import StoreCheckpoint
    from mqstore.storage.rocketmq.dispatch import IndexWriters
    from mqstore.storage.rocketmq.index import IndexService
    from mqstore.storage.rocketmq.lmq import MultiDispatchRule

    root = Path(store)
    if not (root / "commitlog").is_dir():
        raise StoreNotFoundError(f"{root} has no commitlog/ directory")
    stats = ApplyStats()
    with StoreLock(root, DISPATCH_LOCK_FILE):
        index = IndexService(root / "index", config.hash_slot_num, config.index_num) if config.message_index_enable else None
        writers = IndexWriters(root, config.mapped_file_size_consume_queue, index,
                               time_index_interval=config.time_index_interval if config.enable_time_index else 0,
                               multi_dispatch=MultiDispatchRule.of(config))
        full_end_ts: list[int] = []
        checkpoint = StoreCheckpoint(root / "checkpoint")
        try:
            writers.load_consume_queues()
            for cq in writers.consume_queues.values():
                cq.recover()
            writers.sync_time_indexes()  # time index sidecars (when kept) follow the recovered queues
            if index is not None:
                index.load(True, checkpoint.values.index_msg_timestamp)
                index.on_file_full = full_end_ts.append
            keys_before = _indexed_keys(index)
            for batch in sorted(batches, key=lambda b: int(b.commit_log_offset[0]) if len(b) else b.next_offset):
                if not len(batch):
                    continue
                skipped = _check_replayed(writers, batch)
                writers.apply(batch)
                stats.messages += len(batch)
                stats.units_skipped += skipped
                stats.units_written += int(batch.cq_mask().sum()) - skipped
                stats.end_offset = max(stats.end_offset, int(batch.commit_log_offset[-1]) + int(batch.size[-1]))
            writers.flush()
            stats.keys_written = _indexed_keys(index) - keys_before
            if index is not None:
                index.flush()
                stats.index_files = [f.name for f in index.files]
            fields: dict[str, int] = {}
            if writers.last_logic_store_ts > checkpoint.values.logics_msg_timestamp:
                fields["logics_msg_timestamp"] = writers.last_logic_store_ts
            if full_end_ts and full_end_ts[-1] > checkpoint.values.index_msg_timestamp:
                fields["index_msg_timestamp"] = full_end_ts[-1]
            if fields:
                checkpoint.flush_fields(**fields)
        finally:
            writers.close()
            checkpoint.close()
    return stats


def _indexed_keys(index: Any) -> int:
    return 0 if index is None else sum(max(f.header.index_count - 1, 0) for f in index.files)


def _check_replayed(writers: Any, batch: DispatchBatch) -> int:
    """Count the ConsumeQueue units of ``batch`` that are already written, and make sure each of
    them is written with the same physical offset (anything else means the consumequeue/ tree
    belongs to another CommitLog: refuse rather than mix them)."""
    mask = batch.cq_mask()
    rows = np.flatnonzero(mask)
    if not len(rows):
        return 0
    skipped = 0
    for topic_id in np.unique(batch.topic_id[rows]).tolist():
        trows = rows[batch.topic_id[rows] == topic_id]
        topic = batch.topics[topic_id]
        for qid in np.unique(batch.queue_id[trows]).tolist():
            qrows = trows[batch.queue_id[trows] == qid]
            cq = writers.consume_queue(topic, int(qid))
            if cq is None:
                continue
            done = qrows[batch.commit_log_offset[qrows] + batch.size[qrows] <= cq.max_physic_offset]
            if not len(done):
                continue
            skipped += len(done)
            qoffs = batch.queue_offset[done]
            lo, hi = int(qoffs.min()), int(qoffs.max())
            units = cq.get_units(lo, hi - lo + 1)
            have = units["offset"][qoffs - lo] if len(units) == hi - lo + 1 else None
            if have is None or not np.array_equal(have, batch.commit_log_offset[done]):
                raise CorruptIndexError(
                    f"consumequeue {topic}/{qid} disagrees with the CommitLog at queue offsets {lo}..{hi}: "
                    "it was built from other data; rebuild it (mqstore rocketmq rebuild-index)")
    return skipped


class DispatchStreamWriter(DataSourceStreamArrowWriter):
    def __init__(self, options: Mapping[str, str]) -> None:
        self.store = options["path"]
        self.staging = options["stagingDir"]
        self.config_json = options.get("storeConfig", "{}")

    def write(self, iterator: Iterator[pa.RecordBatch]) -> StagedDispatch:
        import pyarrow as pa

        os.makedirs(self.staging, exist_ok=True)
        path = os.path.join(self.staging, f"{uuid.uuid4().hex}.arrow")
        rows, first = 0, -1
        tmp = path + ".tmp"
        with pa.OSFile(tmp, "wb") as sink:
            writer = None
            for rb in iterator:
                if rb.num_rows == 0:
                    continue
                if writer is None:
                    writer = pa.ipc.new_file(sink, rb.schema)
                    first = int(rb.column(0)[0].as_py())
                writer.write_batch(rb)
                rows += rb.num_rows
            if writer is not None:
                writer.close()
        if rows == 0:
            os.unlink(tmp)
            return StagedDispatch("", -1, 0)
        os.replace(tmp, path)
        return StagedDispatch(path, first, rows)

    def commit(self, messages: list[WriterCommitMessage | None], batchId: int) -> None:
        import json

        import pyarrow as pa

        from mqstore.storage.rocketmq.config import StoreConfig

        staged = sorted((m for m in messages if isinstance(m, StagedDispatch) and m.rows), key=lambda m: m.first_offset)
        batches = []
        for m in staged:
            if not os.path.exists(m.path):
                from mqstore.errors import PathNotVisibleError

                raise PathNotVisibleError(
                    f"the dispatch staging file {m.path} written by an executor is missing on the driver: the "
                    "checkpoint directory must be on a filesystem the driver and every executor share")
            with pa.memory_map(m.path, "r") as src:
                table = pa.ipc.open_file(src).read_all()
            batches.append(arrow_to_dispatch_batch(table))
        apply_dispatch(self.store, batches, StoreConfig.from_dict(json.loads(self.config_json)))
        for m in staged:
            try:
                os.unlink(m.path)
            except FileNotFoundError:
                pass

    def abort(self, messages: list[WriterCommitMessage | None], batchId: int) -> None:
        for m in messages:
            if isinstance(m, StagedDispatch) and m.path:
                try:
                    os.unlink(m.path)
                except FileNotFoundError:
                    pass


class RocketMQDispatchDataSource(DataSource):
    """``rocketmq-dispatch``: the CommitLog tail as dispatch rows (read) and the index writers (write)."""

    @classmethod
    def name(cls) -> str:
        return FORMAT

    def schema(self) -> StructType:
        return DISPATCH_SCHEMA

    def streamReader(self, schema: StructType) -> DataSourceStreamReader:
        return DispatchStreamReader(self.options)

    def streamWriter(self, schema: StructType, overwrite: bool) -> DispatchStreamWriter:
        return DispatchStreamWriter(self.options)


# =============================================================================== jobs
_GEOMETRY_FIELDS = ("commit_log_file_size", "consume_queue_file_size", "hash_slot_num", "index_num", "message_index_enable")


def store_config_for(store: str | os.PathLike[str], config: StoreConfig | None = None) -> StoreConfig:
    """The geometry used to dispatch ``store``: ``config`` if given, else detected from the files
    (:func:`mqstore.storage.rocketmq.layout.resolve_config`)."""
    from mqstore.errors import RocksDBError
    from mqstore.storage.rocketmq.config import STORE_TYPE_ROCKSDB
    from mqstore.storage.rocketmq.layout import resolve_config, store_type_of

    root = Path(store)
    if not (root / "commitlog").is_dir():
        raise StoreNotFoundError(f"{root} is not a RocketMQ store (no commitlog/ directory)")
    cfg = resolve_config(root, config)
    if store_type_of(root, cfg) == STORE_TYPE_ROCKSDB:
        raise RocksDBError(f"{root} keeps its ConsumeQueue in RocksDB (storeType=defaultRocksDB): the dispatcher "
                           "writes file ConsumeQueues only; migrate the store back first (rebuild-index --to file-cq)",
                           path=str(root))
    return cfg


def start_dispatch(spark: SparkSession, store: str | os.PathLike[str], checkpoint: str | os.PathLike[str], *,
                   once: bool = False, trigger_interval: str = "1 second", max_bytes_per_trigger: int | None = None,
                   config: StoreConfig | None = None, check_crc: bool = False,
                   query_name: str | None = None) -> StreamingQuery:
    """Start the streaming dispatch of ``store`` (Spark checkpoint in ``checkpoint``).

    ``once`` runs with ``availableNow`` (everything complete when it starts, then stops);
    otherwise a ``processingTime`` trigger every ``trigger_interval`` tails the CommitLog until
    stopped.  ``config`` gives the store's geometry (segment sizes, index slots/items)."""
    import json

    if max_bytes_per_trigger is not None and max_bytes_per_trigger <= 0:
        raise InvalidArgumentError("max_bytes_per_trigger must be positive")
    from mqstore.spark.cluster import absolute_path, preflight

    cfg = store_config_for(store, config)
    root = str(Path(absolute_path(store)).resolve())
    cp = Path(absolute_path(checkpoint)).resolve()
    preflight(spark, read={"store": [Path(root) / "commitlog"]}, write={"checkpoint directory": [cp]})
    geometry = json.dumps({name: getattr(cfg, name) for name in _GEOMETRY_FIELDS})
    spark.dataSource.register(RocketMQDispatchDataSource)
    reader = (spark.readStream.format(FORMAT).option("path", root)
              .option("commitLogFileSize", str(cfg.commit_log_file_size))
              .option("storeConfig", geometry).option("checkCRC", str(check_crc).lower()))
    if max_bytes_per_trigger:
        reader = reader.option("maxBytesPerTrigger", str(int(max_bytes_per_trigger)))
    writer = (reader.load().writeStream.format(FORMAT).option("path", root)
              .option("stagingDir", str(cp / "dispatch-staging")).option("storeConfig", geometry)
              .option("checkpointLocation", str(cp)))
    if query_name:
        writer = writer.queryName(query_name)
    writer = writer.trigger(availableNow=True) if once else writer.trigger(processingTime=trigger_interval)
    return writer.start()


@dataclass(slots=True)
class DispatchRun:
    batches: int
    messages: int
    end_offset: int | None


def run_dispatch_once(spark: SparkSession, store: str | os.PathLike[str], checkpoint: str | os.PathLike[str],
                      **kwargs: Any) -> DispatchRun:
    """Dispatch everything complete now (``availableNow``) and wait for it; returns what was done."""
    query = start_dispatch(spark, store, checkpoint, once=True, **kwargs)
    query.awaitTermination()
    exc = query.exception()
    if exc is not None:  # pragma: no cover - awaitTermination raises first
        raise exc
    progress = query.recentProgress
    batches = [p for p in progress if p.get("numInputRows", 0)]
    end = None
    for p in progress:
        for src in p.get("sources", []):
            off = src.get("endOffset")
            if off:
                import json

                end = int((json.loads(off) if isinstance(off, str) else off)[OFFSET_KEY])
    return DispatchRun(len(batches), sum(int(p.get("numInputRows", 0)) for p in progress), end)
