"""Driver side of the ``rocketmq`` Spark source: what the stores hold and how to split them.

* :class:`StoreView` opens a store directory read-only (its CommitLog segment list, its
  ConsumeQueues) for planning: queue offset ranges, the ConsumeQueue time search, the physical
  range of queue offsets.  The geometry (segment and ConsumeQueue file sizes) is taken from the
  files, so broker stores with any configuration can be read.
* :func:`walk` finds record boundaries from a known boundary onwards (blank end-of-segment
  records lead to the next segment), never past a record that is not completely written.
* :func:`split_range` cuts a segment range into pieces at record boundaries.

Only small picklable values (paths, offsets) leave this module; files are mapped and closed here.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from mqstore.errors import SourceOptionError, StoreNotFoundError
from mqstore.storage.fileio import LOCAL, ArrowFileIO, FileIO
from mqstore.storage.rocketmq.commitlog import CommitLog
from mqstore.storage.rocketmq.config import STORE_TYPE_ROCKSDB, StoreConfig
from mqstore.storage.rocketmq.consumequeue import BOUNDARY_LOWER, ConsumeQueue
from mqstore.storage.rocketmq.dledger import open_commit_log
from mqstore.storage.rocketmq.layout import (
    SegmentFile,
    commitlog_dir,
    commitlog_segments,
    commitlog_segments_io,
    consume_queue_dirs,
    consume_queue_topics_io,
    consumequeue_dir,
    detect_cq_file_size,
    dledger_home,
    is_dledger_store,
    remote_store_kind_io,
    resolve_config,
    segment_files,
    store_type_of,
)

Segment = SegmentFile


def commit_log_dirs_of(store: str, commit_log: str | None = None) -> list[Path]:
    """The CommitLog directories of a store: ``commit_log`` (the option ``commitLogPath``: one
    directory or a comma-separated list, as the broker's ``storePathCommitLog``) or
    ``STORE/commitlog``."""
    from mqstore.storage.rocketmq.config import split_paths

    return [Path(d) for d in split_paths(commit_log)] or [commitlog_dir(store)]


def dledger_data_dirs(store: str, commit_log: str | None = None) -> list[Path] | None:
    """The data directories of the store's DLedger CommitLog (``enableDLegerCommitLog``), or
    ``None`` for a classic one (no DLedger home); a store migrated to DLedger (classic segments or
    a ``commitLogPath`` as well) is a :class:`SourceOptionError`, never read in part."""
    if not is_dledger_store(store):
        return None
    if commit_log is not None or segment_files(commitlog_dir(store)):  # (an empty commitlog/ is no classic part)
        raise SourceOptionError(f"{store} is a store migrated to DLedger (classic CommitLog segments below a DLedger "
                                "CommitLog): the rocketmq Spark source does not read it; use mqstore rocketmq dump "
                                "or MessageStore.open(..., read_only=True)")
    home = dledger_home(store, StoreConfig(enable_dledger_commit_log=True))
    return [Path(d) for d in home.data_dirs]


def check_remote_store(store: str, commit_log: str | None, io: FileIO) -> None:
    """What the ranged (object store) readers cannot read raises a :class:`SourceOptionError`;
    a store without a ``commitlog/`` prefix a :class:`StoreNotFoundError`."""
    if isinstance(io, ArrowFileIO):
        io.check_bucket(store)
    if commit_log is not None:
        raise SourceOptionError("option commitLogPath is not supported for a store in an object store: the "
                                "CommitLog must be the store's own commitlog/", path=store)
    kind = remote_store_kind_io(io, store)
    if kind == "dledger":
        raise SourceOptionError("a DLedger CommitLog (enableDLegerCommitLog) cannot be read from an object "
                                "store; copy the store to a shared file system", path=store)
    if kind == "rocksdb":
        raise SourceOptionError("a RocksDB ConsumeQueue (storeType=defaultRocksDB) cannot be read from an object "
                                "store; copy the store to a shared file system", path=store)


def list_segments(store: str, commit_log: str | None = None, io: FileIO = LOCAL) -> list[Segment]:
    """The CommitLog segment files of a store, ascending (an empty last file is left out); a
    DLedger CommitLog's data files for a DLedger store.  ``io``: where the store is (an object
    store: the ``commitlog/`` prefix, see :func:`check_remote_store`)."""
    if io.remote:
        segs = commitlog_segments_io(io, store)
        if not segs and not io.list(io.join(store, "commitlog")):
            raise StoreNotFoundError("not a RocketMQ store: no commitlog directory (prefix)",
                                     path=io.join(store, "commitlog"))
        return segs
    dl = dledger_data_dirs(store, commit_log)
    if dl is not None:
        return commitlog_segments(store, dirs=dl)
    dirs = commit_log_dirs_of(store, commit_log)
    if not any(d.is_dir() for d in dirs):
        raise StoreNotFoundError("not a RocketMQ store: no commitlog directory", path=str(dirs[0]))
    return commitlog_segments(store, dirs=None if commit_log is None else dirs)


class StoreView:
    """A store opened read-only for planning (close it, or use it as a context manager)."""

    def __init__(self, path: str, broker_name: str, *, with_queues: bool = True, commit_log: str | None = None,
                 store_type: str | None = None, io: FileIO = LOCAL) -> None:
        self.path = str(path)
        self.io = io
        self.store_type = store_type  # None: decided from the files (layout.store_type_of)
        self.broker_name = broker_name
        self.commit_log_option = commit_log
        self.commit_log: CommitLog | None = None
        self.cqs: dict[tuple[str, int], ConsumeQueue] = {}
        self.rocksdb: Any = None
        self._topics: set[str] | None = None
        if io.remote:
            # an object store: the CommitLog is listed and read by ranges; the ConsumeQueues are
            # only listed (their topics), never opened (queue offset and time options refused)
            check_remote_store(self.path, commit_log, io)
            self.dledger = False
            self.segments = list_segments(self.path, commit_log, io)
            self.file_size = self.segments[0].size if self.segments else 0
            return
        self.dledger = dledger_data_dirs(self.path, commit_log) is not None
        self.segments = list_segments(self.path, commit_log)
        self.file_size = self.segments[0].size if self.segments else 0
        if with_queues:
            self._open_queues()

    def topics(self) -> set[str]:
        """The topics with a ConsumeQueue."""
        if self.io.remote:
            if self._topics is None:
                self._topics = consume_queue_topics_io(self.io, self.path)
            return self._topics
        return {t for (t, _q) in self.cqs}

    def _open_queues(self) -> None:
        if self.segments and self.dledger:
            self.commit_log = open_commit_log(self.path, resolve_config(self.path, {"enable_dledger_commit_log": True}))
        elif self.segments:
            dirs = [str(d) for d in commit_log_dirs_of(self.path, self.commit_log_option)]
            self.commit_log = CommitLog(Path(dirs[0]), self.file_size, read_only=True, paths=dirs)
            self.commit_log.load()
        min_phy = self.segments[0].base if self.segments else 0
        if store_type_of(self.path, StoreConfig(store_type=self.store_type)) == STORE_TYPE_ROCKSDB:  # the RocksDB ConsumeQueue (read-only)
            from mqstore.storage.rocketmq.rocksdb_cq import RocksDBConsumeQueueStore

            self.rocksdb = RocksDBConsumeQueueStore(consumequeue_dir(self.path))
            for key, rq in self.rocksdb.queues().items():
                rq.recover()
                rq.correct_min_offset(min_phy)
                self.cqs[key] = rq  # type: ignore[assignment]
            return
        cq_size = detect_cq_file_size(self.path)
        for topic, qid, qdir in consume_queue_dirs(self.path):
            if cq_size is None or not any(p.stat().st_size for p in segment_files(qdir)):
                continue
            cq = ConsumeQueue(qdir, topic, qid, cq_size, read_only=True)
            cq.load()
            cq.recover()
            cq.correct_min_offset(min_phy)
            self.cqs[(topic, qid)] = cq

    # ------------------------------------------------------------------ queues
    def queue_ranges(self) -> dict[tuple[str, int], tuple[int, int]]:
        """``{(topic, queueId): (minOffset, maxOffset)}`` from the ConsumeQueues."""
        if self.io.remote:
            raise SourceOptionError("queue offset and timestamp options (startingOffsets/endingOffsets as JSON, "
                                    "startingTimestamp, endingTimestamp) are not supported for a store in an object "
                                    "store; filter on queueOffset/storeTimestamp instead", path=self.path)
        return {k: (cq.min_offset_in_queue, cq.max_offset_in_queue) for k, cq in self.cqs.items()}

    def offset_for_time(self, topic: str, queue_id: int, timestamp: int) -> int:
        """First queue offset whose message was stored at or after ``timestamp`` (the max offset
        when every message is older): exact, through the queue's sparse time index sidecars when
        the store has them (at most one CommitLog record read with the default interval), else a
        binary search over the ConsumeQueue."""
        from mqstore.errors import CorruptIndexError
        from mqstore.storage.rocketmq.timeindex import QueueTimeIndex, cq_offset_for_time, exists, queue_dir

        cq = self.cqs.get((topic, queue_id))
        if cq is None or self.commit_log is None:
            return 0
        tix: QueueTimeIndex | None = None
        if exists(self.path):
            tix = QueueTimeIndex(queue_dir(self.path, topic, queue_id), cq.file_size, read_only=True)
            try:
                tix.load()
            except (CorruptIndexError, OSError):
                tix = None  # unreadable sidecar: the ConsumeQueue search gives the same answer
        return cq_offset_for_time(cq, tix, int(timestamp), BOUNDARY_LOWER, self.commit_log.pickup_store_timestamp)

    def physical_range(self, bounds: dict[tuple[str, int], tuple[int, int]]) -> tuple[int, int] | None:
        """``[first record, end of last record)`` in the CommitLog spanned by the queue-offset
        ranges (``None`` when they are all empty)."""
        lo, hi = None, None
        for key, (first, end) in bounds.items():
            cq = self.cqs.get(key)
            if cq is None or first >= end:
                continue
            u0, u1 = cq.get_unit(first, resolve_ext=False), cq.get_unit(end - 1, resolve_ext=False)
            if u0 is None or u1 is None:
                continue
            a, b = u0.commit_log_offset, u1.commit_log_offset + u1.size
            lo = a if lo is None else min(lo, a)
            hi = b if hi is None else max(hi, b)
        return None if lo is None or hi is None else (lo, hi)

    # ------------------------------------------------------------------ lifecycle
    def close(self) -> None:
        for cq in self.cqs.values():
            cq.close()
        self.cqs = {}
        if self.rocksdb is not None:
            self.rocksdb.close()
            self.rocksdb = None
        if self.commit_log is not None:
            self.commit_log.close()
            self.commit_log = None

    def __enter__(self) -> StoreView:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
