"""Index-rebuild jobs on Spark, byte-identical to the local ``rebuild-index`` commands.

RocketMQ (:func:`rebuild_rocketmq`), the same scan → dispatch → write code as
:func:`mqstore.storage.rocketmq.rebuild.rebuild_indexes`, spread over tasks:

1. *scan*: one task per CommitLog segment (a big segment is first cut at record boundaries into
   ranges of ``split_bytes``) runs the numba scan and keeps the dispatch columns (ConsumeQueue
   rows, index keys) as columnar numpy chunks in a persisted RDD; only a small summary per chunk
   reaches the driver, which decides where the local scan would stop.
2. *plan*: the driver counts keys per chunk and computes where the IndexService rolls a file
   (every ``index_num - 1`` keys), each file's name and the values it carries over from its
   predecessor (one small job fetches the keys at the boundaries).
3. *write*: the chunks are routed (one shuffle of per-chunk column slices, not of rows) to one
   partition per IndexFile and to hash partitions of (topic, queueId); each ConsumeQueue and
   each IndexFile is written whole by one task with the vectorised writers, atomically (temp +
   rename), so a retried task is idempotent.  Then the driver writes the checkpoint.

Kafka (:func:`rebuild_kafka`): one task per ``.log`` segment running the local single-segment
rebuild.

Nothing depends on driver-local state: executors get paths and offsets and read and write the
files themselves, so on a cluster the store and ``out`` must be on a shared filesystem.
"""

from __future__ import annotations

import dataclasses
import os
import shutil
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from mqstore.errors import InvalidArgumentError, StoreNotFoundError, UnsupportedFormatError
from mqstore.spark._rebuild_progress import ProgressFn, phase
from mqstore.storage.rocketmq.rebuild import RebuildStats

if TYPE_CHECKING:  # pragma: no cover
    from pyspark.sql import SparkSession

__all__ = ["KafkaRebuildStats", "RocketMQRebuildStats", "rebuild_kafka", "rebuild_rocketmq"]


@dataclass(slots=True)
class RocketMQRebuildStats(RebuildStats):
    """What :func:`rebuild_rocketmq` did (the local :class:`RebuildStats` fields, plus Spark's)."""

    segments: int
    scan_tasks: int
    bytes_scanned: int
    seconds: float
    out: str
    phase_seconds: dict[str, float] = field(default_factory=dict)

    def as_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)


@dataclass(slots=True)
class KafkaRebuildStats:
    """What :func:`rebuild_kafka` did; ``results`` has one entry per segment (the local
    ``RebuildResult`` fields plus ``partition``)."""

    partitions: int
    segments: int
    batches: int
    bytes: int
    offset_entries: int
    time_entries: int
    truncated_segments: int
    seconds: float
    out: str
    results: list[dict[str, Any]] = field(default_factory=list)
    txn_index_files: int = 0  # .txnindex files written (segments where aborted transactions end)
    aborted_txns: int = 0
    key_entries: int = 0  # entries of the key indexes written (with key_index)

    def as_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)


def _positive(name: str, value: int | None, minimum: int = 1) -> None:
    if value is not None and (not isinstance(value, int) or isinstance(value, bool) or value < minimum):
        raise InvalidArgumentError(f"{name} must be an integer ≥ {minimum}, got {value!r}")


# ============================================================================ RocketMQ
def _rocketmq_config(root: Path, hash_slot_num: int | None, index_num: int | None, cq_file_size: int | None,
                     commit_log_file_size: int | None) -> Any:
    from mqstore.storage.rocketmq.layout import resolve_config

    _positive("hash_slot_num", hash_slot_num)
    _positive("index_num", index_num, 2)
    _positive("cq_file_size", cq_file_size, 20)
    _positive("commit_log_file_size", commit_log_file_size, 4096)
    return resolve_config(root, None, hash_slot_num=hash_slot_num, index_num=index_num,
                          consume_queue_file_size=cq_file_size, commit_log_file_size=commit_log_file_size)


def _check_out(root: Path, out: Path) -> bool:
    """Validate ``out``; returns True for an in-place rebuild (``out`` is the store)."""
    cl_dir = (root / "commitlog").resolve()
    o = out.resolve()
    if o == cl_dir or cl_dir in o.parents:
        raise InvalidArgumentError("the output directory must not be inside the CommitLog directory", path=str(out))
    if out.exists() and not out.is_dir():
        raise InvalidArgumentError("the output path exists and is not a directory", path=str(out))
    if o == root.resolve():
        return True
    for sub in ("consumequeue", "index"):
        d = out / sub
        if d.is_dir() and any(d.iterdir()):
            raise InvalidArgumentError(f"the output directory already holds {sub}/ files: remove them or choose "
                                       "an empty directory", path=str(out))
    return False


def _segments(root: Path, segment_size: int) -> list[Any]:
    """The CommitLog segments in the order the local scan visits them (it stops at a hole)."""
    from mqstore.spark._rebuild_rocketmq import SegmentDesc
    from mqstore.storage.rocketmq.commitlog import CommitLog

    cl = CommitLog(root / "commitlog", segment_size, read_only=True)
    cl.load()
    try:
        out: list[SegmentDesc] = []
        expect = cl.min_offset
        for mf in cl.queue.files:
            if mf.file_from_offset != expect:
                break
            out.append(SegmentDesc(len(out), str(mf.path), mf.file_from_offset, mf.wrote_position))
            expect = mf.file_from_offset + mf.file_size
        return out
    finally:
        cl.close()


def rebuild_rocketmq(spark: SparkSession, store: str | os.PathLike[str], out: str | os.PathLike[str], *,
                     hash_slot_num: int | None = None, index_num: int | None = None, cq_file_size: int | None = None,
                     commit_log_file_size: int | None = None, check_crc: bool = False,
                     split_bytes: int | None = None, progress: ProgressFn | None = None,
                     time_index: bool | None = None, lmq: bool | None = None) -> RocketMQRebuildStats:
    """Regenerate ``consumequeue/``, ``index/`` and the checkpoint of ``store`` into ``out`` on Spark.

    The files are byte-identical to ``rebuild_indexes(store, out, config=...)`` with the same
    geometry (by default: the store defaults, CommitLog segment size detected from the files).
    ``out`` may be the store itself (built aside, swapped in at the end); otherwise it must not
    hold ``consumequeue/`` or ``index/`` files yet.  ``progress(phase, done, total)`` is called on
    the driver with the tasks done.  ``time_index``: also write the sparse time index sidecars
    (``consumequeue_timeindex/``; ``None``: when the store has them), as the local rebuild.
    ``lmq``: dispatch the LMQ / multi-dispatch queues too (``enableLmq`` + ``enableMultiDispatch``;
    default: when the store shows LMQ queues or ``config/lmqConsumerOffset.json``), as the local
    rebuild with the same setting.
    """
    from mqstore.spark import _rebuild_rocketmq as rr
    from mqstore.spark.cluster import absolute_path, preflight
    from mqstore.storage.locks import DISPATCH_LOCK_FILE, StoreLock

    t0 = time.perf_counter()
    root = Path(absolute_path(store))  # executors resolve relative paths in their own directory
    if not (root / "commitlog").is_dir():
        raise StoreNotFoundError(f"{root} has no commitlog/ directory", path=str(root))
    if out is None or str(out) == "":
        raise InvalidArgumentError("an output directory is required")
    _positive("split_bytes", split_bytes, 4096)
    split = split_bytes or rr.DEFAULT_SPLIT_BYTES
    cfg = _rocketmq_config(root, hash_slot_num, index_num, cq_file_size, commit_log_file_size)
    if lmq is not None:
        cfg.enable_lmq = cfg.enable_multi_dispatch = bool(lmq)
    from mqstore.errors import RocksDBError
    from mqstore.storage.rocketmq.config import STORE_TYPE_ROCKSDB
    from mqstore.storage.rocketmq.layout import store_type_of

    if store_type_of(root, cfg) == STORE_TYPE_ROCKSDB:
        raise RocksDBError(f"{root} keeps its ConsumeQueue in RocksDB (storeType=defaultRocksDB): the Spark rebuild "
                           "writes file ConsumeQueues only; migrate the store back with `mqstore rocketmq "
                           "rebuild-index --to file-cq`", path=str(root))
    if cfg.enable_consume_queue_ext:
        # the Spark writer produces plain ConsumeQueue units: on an ext store it would drop the
        # consumequeue_ext/ files and the tag codes they hold
        raise UnsupportedFormatError(
            f"{root} uses ConsumeQueueExt (consumequeue_ext/): the Spark rebuild does not write it yet; "
            "use `mqstore rocketmq rebuild-index`, which regenerates both byte-identically", path=str(root))
    out = absolute_path(out)
    in_place = _check_out(root, Path(out))
    preflight(spark, read={"store": [root / "commitlog"]}, write={"output directory": [out]})
    # in place: no writer nor dispatcher may run while the files are rebuilt and swapped, as in
    # the local rebuild (StoreLockedError)
    locks = [StoreLock(root), StoreLock(root, DISPATCH_LOCK_FILE)] if in_place else []
    try:
        return _rebuild_rocketmq(spark, root, out, in_place, cfg, split, check_crc, progress, t0, time_index)
    finally:
        for lock in reversed(locks):
            lock.release()


def _rebuild_rocketmq(spark: SparkSession, root: Path, out: str | os.PathLike[str], in_place: bool, cfg: Any,
                      split: int, check_crc: bool, progress: ProgressFn | None, t0: float,
                      time_index: bool | None = None) -> RocketMQRebuildStats:
    import numpy as np

    from mqstore.spark import _rebuild_rocketmq as rr
    from mqstore.storage.rocketmq.index_roll import (
        IndexRoll,
        checkpoint_index_time,
        keys_per_file,
        new_file_firsts,
        roll_plan,
    )
    from mqstore.storage.rocketmq.rebuild import (
        rebuild_target,
        swap_in,
        time_index_interval_for,
        write_rebuild_checkpoint,
    )

    tix_interval = time_index_interval_for(root, cfg, time_index)

    segments = _segments(root, cfg.commit_log_file_size)
    sc = spark.sparkContext
    _, target = rebuild_target(root, None if in_place else out)
    stage = Path(target) / rr.STAGE_DIR  # scan columns, on the filesystem the output is on
    timings: dict[str, float] = {}
    try:
        # ---------------------------------------------------------------- 1. split + scan
        chunks: list[rr.ChunkDesc] = []
        big = [s for s in segments if s.wrote_position > split]
        ranges: dict[int, list[tuple[int, int]]] = {s.index: [(0, s.wrote_position)] for s in segments}
        if big:
            with phase(sc, "split segments", progress, timings):
                found = sc.parallelize(big, len(big)).map(lambda s: (s.index, rr.split_segment(s, split))).collect()
            ranges.update(dict(found))
        for s in segments:
            rs = ranges[s.index]
            for j, (a, b) in enumerate(rs):
                chunks.append(rr.ChunkDesc(len(chunks), s.index, s.path, s.file_from_offset, a, b,
                                           j == len(rs) - 1, check_crc, cfg.enable_lmq, cfg.enable_multi_dispatch))
        staged: list[rr.StagedChunk] = []
        if chunks:
            stage_s = str(stage)
            with phase(sc, "scan CommitLog", progress, timings):
                staged = sc.parallelize(chunks, len(chunks)).map(lambda c: rr.scan_chunk_staged(c, stage_s)).collect()
        included = rr.included_chunks([s.summary for s in staged], segments)
        # ---------------------------------------------------------------- 2. plan the IndexFiles
        starts = rr.key_starts(included)
        total_keys = sum(s.keys for s in included)
        # storage's roll rule: which keys each new IndexFile gets (the IndexService's own plan)
        roll = roll_plan(total_keys, keys_per_file(cfg.index_num)) if cfg.message_index_enable else []
        firsts = np.array(new_file_firsts(roll), np.int64)
        plans: list[IndexRoll] = []
        if len(firsts):
            picks, ask = rr.summary_picks(included, starts, firsts)
            for i in sorted(ask):  # files roll inside these chunks: read the keys at the boundaries
                picks += list(rr.boundary_picks(rr.load_key_columns(str(stage), i), starts[i], firsts))
            plans = rr.plan_index_files(roll, picks, target / "index")
        n_files = len(plans)
        # ---------------------------------------------------------------- 3. write
        written: list[tuple[Any, ...]] = []
        if included:
            n_cq = max(1, sc.defaultParallelism)
            # one task per IndexFile up to a few per core (tiny geometries roll hundreds of files)
            n_ix = min(n_files, 2 * n_cq)
            tasks = rr.plan_writes(staged, included, starts, plans, n_cq, n_ix)
            plan_map = {p.number: p for p in plans}
            stage_s, target_s, cq_size = str(stage), str(target), cfg.mapped_file_size_consume_queue
            slots, items = cfg.hash_slot_num, cfg.index_num
            with phase(sc, "write ConsumeQueues and IndexFiles", progress, timings):
                written = sc.parallelize(tasks, max(len(tasks), 1)).flatMap(
                    lambda task: rr.write_task(task, stage_s, target_s, cq_size, slots, items, plan_map,
                                               tix_interval)).collect()
        shutil.rmtree(stage, ignore_errors=True)
        last_cq = [s.last_cq_timestamp for s in included if s.last_cq_timestamp is not None]
        # the end time of file k is the carry-over of file k + 1
        index_ts = checkpoint_index_time(len(plans), lambda k: plans[k + 1].carry_ts)
        write_rebuild_checkpoint(root, target, last_cq[-1] if last_cq else 0, index_ts)
        if in_place:
            swap_in(root, target)
    except BaseException:
        if in_place:
            shutil.rmtree(target, ignore_errors=True)
        raise
    finally:
        shutil.rmtree(stage, ignore_errors=True)
    last = included[-1] if included else None
    return RocketMQRebuildStats(
        messages=sum(s.messages for s in included), keys=total_keys,
        commit_log_end=last.next_offset if last else 0,
        consume_queues=sum(1 for w in written if w[0] == "cq"), index_files=sum(1 for w in written if w[0] == "index"),
        stop_error=last.error if last else None, segments=len(segments), scan_tasks=len(chunks),
        bytes_scanned=(last.next_offset - segments[0].file_from_offset) if last and segments else 0,
        seconds=round(time.perf_counter() - t0, 3), out=str(out), phase_seconds=timings,
    )


# ============================================================================ Kafka
def find_kafka_segments(path: str | os.PathLike[str], out: str | os.PathLike[str]) -> list[tuple[str, Path, Path]]:
    """``(partition, log file, output directory)`` of every segment :func:`rebuild_kafka` would
    rebuild (a bad path fails here, before a session is started)."""
    from mqstore.spark._rebuild_kafka import find_segments

    return find_segments(Path(path), Path(out))


def rebuild_kafka(spark: SparkSession, path: str | os.PathLike[str], out: str | os.PathLike[str], *,
                  index_interval_bytes: int = 4096, max_index_bytes: int = 10485760,
                  key_index: bool = False, key_header: str | None = None,
                  progress: ProgressFn | None = None) -> KafkaRebuildStats:
    """Regenerate the ``.index``/``.timeindex`` of every segment under ``path`` (a ``.log``, a
    partition directory or a log directory of partition directories) into ``out``, one Spark
    task per segment, byte-identical to ``mqstore kafka rebuild-index``; then the ``.txnindex``
    files, one task per partition (transactions span segments).  For a log directory the files
    of partition ``P`` go to ``out/P/``.  ``key_index``: each segment task also writes the
    segment's key index (``<base>.keyindex``, the values of ``key_header`` indexed too),
    byte-identical to ``mqstore kafka rebuild-index --key-index``."""
    from mqstore.spark._rebuild_kafka import (
        PartitionTxnTask,
        SegmentTask,
        find_segments,
        rebuild_partition_txn,
        rebuild_segment,
    )
    from mqstore.spark.cluster import absolute_path, preflight

    t0 = time.perf_counter()
    if isinstance(index_interval_bytes, bool) or not isinstance(index_interval_bytes, int) or index_interval_bytes < 0:
        raise InvalidArgumentError(f"index_interval_bytes must be an integer ≥ 0, got {index_interval_bytes!r}")
    _positive("max_index_bytes", max_index_bytes, 12)
    if key_header is not None and not key_index:
        raise InvalidArgumentError("key_header needs key_index=True")
    from mqstore.formats.kafka.keyindex import check_header_name

    check_header_name(key_header)
    if out is None or str(out) == "":
        raise InvalidArgumentError("an output directory is required")
    out_p = Path(absolute_path(out))  # executors resolve relative paths in their own directory
    if out_p.exists() and not out_p.is_dir():
        raise InvalidArgumentError("the output path exists and is not a directory", path=str(out_p))
    segs = find_segments(Path(absolute_path(path)), out_p)
    tasks = []
    for part, log, od in segs:
        od.mkdir(parents=True, exist_ok=True)
        tasks.append(SegmentTask(str(log), str(od), part, index_interval_bytes, max_index_bytes, key_index,
                                 key_header))
    preflight(spark, read={"Kafka log path": [absolute_path(path)]}, write={"output directory": [out_p]})
    sc = spark.sparkContext
    with phase(sc, "rebuild Kafka indexes", progress):
        results = sc.parallelize(tasks, len(tasks)).map(rebuild_segment).collect()
    groups: dict[tuple[str, str, str], list[int]] = {}
    for part, log, od in segs:
        groups.setdefault((part, str(log.parent), str(od)), []).append(int(log.name.split(".", 1)[0]))
    txn_tasks = [PartitionTxnTask(d, od, part, tuple(b)) for (part, d, od), b in groups.items()]
    with phase(sc, "rebuild Kafka transaction indexes", progress):
        txn = sc.parallelize(txn_tasks, len(txn_tasks)).map(rebuild_partition_txn).collect()
    results.sort(key=lambda r: (str(r["partition"]), int(r["base_offset"])))  # type: ignore[call-overload]
    return KafkaRebuildStats(
        partitions=len({r["partition"] for r in results}), segments=len(results),
        batches=sum(int(r["batches"]) for r in results), bytes=sum(int(r["log_size"]) for r in results),  # type: ignore[call-overload]
        offset_entries=sum(int(r["offset_entries"]) for r in results),  # type: ignore[call-overload]
        time_entries=sum(int(r["time_entries"]) for r in results),  # type: ignore[call-overload]
        truncated_segments=sum(1 for r in results if r["truncated_bytes"]),
        seconds=round(time.perf_counter() - t0, 3), out=str(out_p), results=results,
        txn_index_files=sum(int(t["files"]) for t in txn),  # type: ignore[call-overload]
        aborted_txns=sum(int(t["aborted_txns"]) for t in txn),  # type: ignore[call-overload]
        key_entries=sum(int(r.get("key_entries", 0)) for r in results),  # type: ignore[call-overload]
    )
