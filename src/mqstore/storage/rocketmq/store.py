"""The RocketMQ-layout store engine: files, locking, recovery, append, dispatch, flush, retention.

:class:`mqstore.api.rocketmq.MessageStore` is the public face; this class owns the files.

Threads (when ``config.background_services``): the *reput* service dispatches new CommitLog
records into the ConsumeQueues and IndexFiles; the *flush* service flushes the CommitLog (async
mode), the ConsumeQueues and the checkpoint; the *cleaner* applies retention.  Readers never wait
for the reput thread: every read first dispatches what is pending (read-your-writes).
"""

from __future__ import annotations

import os
import struct
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np

from mqstore.errors import (
    CorruptDataError,
    FlushError,
    MqStoreError,
    ReadOnlyStoreError,
    RocksDBError,
    StoreClosedError,
    StoreNotFoundError,
)
from mqstore.formats.rocketmq.record import (
    BLANK_RECORD_SIZE,
    MAGIC_V1,
    RECORD_SLACK,
    TRANSACTION_MASK,
    TRANSACTION_PREPARED_TYPE,
    TRANSACTION_ROLLBACK_TYPE,
    Host,
    MessageRecord,
    encode_blank,
    encode_record,
    record_length,
)
from mqstore.kernels.arrays import unique
from mqstore.kernels.crc import crc32
from mqstore.kernels.rocketmq.put_one import append_common as _append_common
from mqstore.kernels.rocketmq.scan import DispatchBatch
from mqstore.storage.locks import DISPATCH_LOCK_FILE, StoreLock
from mqstore.storage.mapped import MappedFile, ensure_inside
from mqstore.storage.rocketmq.checkpoint import StoreCheckpoint
from mqstore.storage.rocketmq.commitlog import CommitLog, RecoveryResult
from mqstore.storage.rocketmq.config import FLUSH_SYNC, STORE_TYPE_ROCKSDB, StoreConfig, split_paths
from mqstore.storage.rocketmq.consumequeue import ConsumeQueue
from mqstore.storage.rocketmq.dispatch import IndexWriters
from mqstore.storage.rocketmq.index import IndexService
from mqstore.storage.rocketmq.layout import commit_log_dirs, consumequeue_dir, store_type_of
from mqstore.storage.rocketmq.lmq import MultiDispatchRule
from mqstore.storage.rocketmq.queue_table import NextQueueOffsets

if TYPE_CHECKING:  # pragma: no cover - the put kernels (numba) load with the first batch put
    from mqstore.kernels.rocketmq.put import RecordColumns

OS_PAGE = 4096
# The reput service is woken by a put only once this much is pending; otherwise it wakes on its
# own every REPUT_INTERVAL_S and dispatches what accumulated as one batch (readers dispatch
# before reading, so they never see less than what was put).
# Larger rounds cost less Python per message and fewer GIL hand-offs with a putting thread
# (single put 1.33x at 8 MiB / 50 ms against 1 MiB / 10 ms, measured in one process).
REPUT_WAKE_BYTES = 8 << 20
REPUT_INTERVAL_S = 0.05
# The fixed part of a magic-v1 record with IPv4 hosts, up to and including BODYLENGTH.
_HEAD_V1_V4 = struct.Struct(">iiiiiqqiq8sq8siqi")
# Whole-record structs of the shapes seen (body length, properties length, topic field): one
# pack_into per put instead of head + two slice copies + a concatenation (~200 ns less).  Shapes
# beyond the cap take the three-step write (the same bytes).
_REC_V1_V4: dict[tuple[int, int, bytes], struct.Struct] = {}
_REC_V1_V4_MAX = 4096
_crc32 = crc32
_pack_size = struct.Struct(">i").pack_into
_time_ns = time.time_ns


@dataclass(slots=True)
class AppendResult:
    commit_log_offset: int
    size: int
    queue_offset: int
    store_timestamp: int


@dataclass(slots=True)
class RecoveryReport:
    clean_shutdown: bool
    commit_log_end: int
    truncated_bytes: int
    redispatched_from: int | None
    index_rebuilt_from: int | None
    error: str | None


def _check_layout(root: Path, config: StoreConfig, *, create: bool) -> None:
    """A store directory has a ``commitlog/`` directory (unless ``store_path_commit_log`` puts
    the CommitLog elsewhere); only a writable open with ``create`` makes one, and not in a
    directory holding Kafka segment files (a partition directory).  Read-only and
    ``create=False`` opens of any other directory (empty, a Kafka partition) raise
    :class:`StoreNotFoundError`: an operator's tool never reports such a directory as an empty
    store."""
    clog = root / "commitlog"
    if clog.is_dir() or split_paths(config.store_path_commit_log) or config.enable_dledger_commit_log:
        return
    if clog.exists() or clog.is_symlink():
        raise StoreNotFoundError(f"{root} is not a RocketMQ store: its commitlog is not a directory")
    from mqstore.storage.kafka.layout import classify_partition_file  # only to name the mistake

    kafka = any(classify_partition_file(p.name).kind in ("log", "index", "timeindex") for p in root.iterdir())
    what = ("a Kafka partition directory" if kafka else
            "it has no commitlog/ directory (a CommitLog kept elsewhere is named with --commitlog DIR, "
            "StoreConfig.store_path_commit_log)")
    if not create or kafka:
        raise StoreNotFoundError(f"{root} is not a RocketMQ store: {what}")


class RocketMQStore:
    def __init__(self, root: str | os.PathLike[str], config: StoreConfig | None = None, *, read_only: bool = False,
                 create: bool = True, defer_valid_end: bool = False) -> None:
        """``defer_valid_end`` (read-only, a classic CommitLog): the open does not walk the CommitLog
        for its valid end; the first scan of the whole log finds it as it goes, or the first use of
        :attr:`recovery` walks for it (:meth:`CommitLog.defer_valid_end`).  For one-shot readers
        that scan everything anyway (``dump``, ``verify``): the log is read once instead of twice."""
        self.root = Path(root)
        self.config = config or StoreConfig()
        self.read_only = read_only
        self._defer_valid_end = defer_valid_end and read_only
        self._recovery: RecoveryReport | None = None
        if self.config.enable_dledger_commit_log and not read_only:
            raise ReadOnlyStoreError("mqstore reads DLedger CommitLogs (enableDLegerCommitLog) but does not write "
                                     "them: open the store read-only", path=str(self.root))
        if not self.root.exists():
            if read_only or not create:
                raise StoreNotFoundError(f"store directory {self.root} does not exist")
            self.root.mkdir(parents=True)
        if not self.root.is_dir():
            raise StoreNotFoundError(f"{self.root} is not a directory")
        _check_layout(self.root, self.config, create=create and not read_only)
        # where the ConsumeQueue lives (files, or the RocksDB database of storeType=defaultRocksDB)
        self.store_type = store_type_of(self.root, self.config)
        self.rocksdb_cq = None
        if self.store_type == STORE_TYPE_ROCKSDB and not read_only:
            raise RocksDBError(
                f"{self.root} keeps its ConsumeQueue in RocksDB (storeType=defaultRocksDB): mqstore reads it "
                "but never writes it; open the store read-only, or write the classic file ConsumeQueue with "
                "`mqstore rocketmq rebuild-index --to file-cq` (a store migrating back to storeType=default)")
        if not read_only and not split_paths(self.config.store_path_commit_log):
            # what makes the directory a store, even before its first message
            ensure_inside(self.root, self.root / "commitlog").mkdir(exist_ok=True)
        self._closed = False
        self._lock_fd: int | None = None
        self._lock: StoreLock | None = None
        self._put_lock = threading.RLock()
        self._dispatch_lock = threading.RLock()
        self._flush_lock = threading.Lock()
        self._wake = threading.Event()
        self._warm_first = True  # the reput service warms the CommitLog pages ahead before dispatching
        self._stop = threading.Event()
        self._threads: list[threading.Thread] = []
        self.background_error: BaseException | None = None
        self.queue_offsets: dict[tuple[str, int], int] = {}
        self.last_flushed_store_ts = 0
        self.last_logic_store_ts = 0
        self._last_put_ts = 0
        self._ts_runs: list[tuple[int, int]] = []  # (start offset, store ts) of data not yet flushed
        self._sync_flush = self.config.flush_disk_type == FLUSH_SYNC
        self._max_body = self.config.max_message_size
        self._max_fast_size = min(self.config.max_message_size + RECORD_SLACK,
                                  self.config.commit_log_file_size - BLANK_RECORD_SIZE)
        self._reput_wake_bytes = REPUT_WAKE_BYTES  # (read by put_one.append_common)
        self._store_host_b = Host.parse(self.config.store_host).to_bytes()
        self.multi_dispatch = MultiDispatchRule.of(self.config)
        if not read_only:
            self._acquire_lock()
        try:
            self.last_exit_ok = not (self.root / "abort").exists()
            if not read_only:
                # Before recovery touches a file: a crash during recovery is an unclean shutdown.
                (self.root / "abort").write_text(str(os.getpid()))
            if self.config.enable_dledger_commit_log:  # read-only (checked above)
                from mqstore.storage.rocketmq.dledger import open_commit_log

                self.commit_log = open_commit_log(self.root, self.config)
            else:
                cl_paths, cl_ro = commit_log_dirs(self.root, self.config.store_path_commit_log,
                                                  self.config.read_only_commit_log_store_paths)
                self.commit_log = CommitLog(Path(cl_paths[0]), self.config.commit_log_file_size, read_only=read_only,
                                            paths=cl_paths, readonly_paths=cl_ro)
            self._cl_queue = self.commit_log.queue
            self.checkpoint = StoreCheckpoint(self.root / "checkpoint", read_only=read_only)
            self.index = IndexService(self._sub("index"), self.config.hash_slot_num, self.config.index_num, read_only=read_only)
            self.index.on_file_full = self._on_index_file_full
            self.writers = IndexWriters(self.root, self.config.mapped_file_size_consume_queue,
                                        self.index if self.config.message_index_enable else None, read_only=read_only,
                                        ext_enabled=self.config.enable_consume_queue_ext,
                                        ext_file_size=self.config.mapped_file_size_consume_queue_ext,
                                        time_index_interval=self.config.time_index_interval
                                        if self.config.enable_time_index else 0,
                                        store_time=self.commit_log.pickup_store_timestamp,
                                        multi_dispatch=self.multi_dispatch)
            self._recovery = self._load_and_recover()
            self.reput_from_offset = self.commit_log.max_offset
            if not read_only and self.config.background_services:
                self._start_services()
        except BaseException:
            self._release_lock()
            if self.rocksdb_cq is not None:
                self.rocksdb_cq.close()
            raise

    # ================================================================== files and lock
    def _sub(self, name: str) -> Path:
        return ensure_inside(self.root, self.root / name)

    def _acquire_lock(self) -> None:
        """The writer lock; a store that dispatches itself also takes the dispatch lock, so no
        external dispatcher (``mqstore spark dispatch``) writes the same ConsumeQueues."""
        self._lock = StoreLock(self.root)
        self._lock_fd = self._lock.fd
        if self.config.dispatch_enabled:
            try:
                self._dispatch_file_lock: StoreLock | None = StoreLock(self.root, DISPATCH_LOCK_FILE)
            except BaseException:
                self._release_lock()
                raise

    def _release_lock(self) -> None:
        dl = getattr(self, "_dispatch_file_lock", None)
        if dl is not None:
            dl.release()
            self._dispatch_file_lock = None
        if self._lock is not None:
            self._lock.release()
            self._lock = None
        self._lock_fd = None

    @property
    def consume_queues(self) -> dict[tuple[str, int], ConsumeQueue]:
        return self.writers.consume_queues

    def consume_queue(self, topic: str, queue_id: int, *, create: bool = False) -> ConsumeQueue | None:
        return self.writers.consume_queue(topic, queue_id, create=create)

    # ================================================================== recovery (spec §6.3)
    @property
    def recovery(self) -> RecoveryReport:
        """What the open's recovery found; with ``defer_valid_end``, the CommitLog's valid end is
        settled here if no scan has found it yet."""
        rep = self._recovery
        if rep is None:
            res = self.commit_log.settle_valid_end()
            rep = self._recovery = RecoveryReport(self.last_exit_ok, res.process_offset, 0, None, self._index_from,
                                                  res.error)
        return rep

    def _load_and_recover(self) -> RecoveryReport | None:
        cfg = self.config
        self.commit_log.load()
        if self.store_type == STORE_TYPE_ROCKSDB:
            from mqstore.storage.rocketmq.rocksdb_cq import RocksDBConsumeQueueStore

            self.rocksdb_cq = RocksDBConsumeQueueStore(consumequeue_dir(self.root))
            self.writers.consume_queues.update(self.rocksdb_cq.queues())  # type: ignore[arg-type]
        else:
            self.writers.load_consume_queues()
        for cq in self.consume_queues.values():
            cq.recover()
        dispatch_from_phy = max((cq.max_physic_offset for cq in self.consume_queues.values()), default=-1)
        cp = self.checkpoint.values
        normal = self.last_exit_ok
        idx = self.commit_log.choose_recovery_segment(
            normal=normal, dispatch_from_phy=dispatch_from_phy, min_timestamp=cp.min_timestamp(),
            check_crc=cfg.check_crc_on_recover,
        )
        if self._defer_valid_end and self.commit_log.can_defer_valid_end and self.commit_log.queue.files:
            # a reader that scans the whole log finds the valid end on the way (see `recovery`)
            self.commit_log.defer_valid_end(idx, check_crc=cfg.check_crc_on_recover)
            self._index_from = (self.index.load(normal, cp.index_msg_timestamp, commit_log_end=None)
                                if cfg.message_index_enable else None)
            for cq in self.consume_queues.values():
                cq.correct_min_offset(self.commit_log.min_offset)
            self._recover_topic_queue_table({})
            return None
        res: RecoveryResult = self.commit_log.find_valid_end(idx, check_crc=cfg.check_crc_on_recover)
        end = res.process_offset
        truncated = 0
        if not self.commit_log.queue.files:
            for cq in self.consume_queues.values():
                if not self.read_only:
                    cq.queue.destroy()
            self.consume_queues.clear()
        elif self.read_only:
            self.commit_log.queue.set_positions(end)
        else:
            truncated = self.commit_log.truncate_dirty(end)
            for cq in self.consume_queues.values():
                cq.truncate_dirty_logic_files(end)
        index_from = None
        if cfg.message_index_enable:
            index_from = self.index.load(normal, cp.index_msg_timestamp, commit_log_end=end if not self.read_only else None)
        for cq in self.consume_queues.values():
            cq.correct_min_offset(self.commit_log.min_offset)
        if not self.read_only and cfg.dispatch_enabled:
            # the sidecars follow the recovered ConsumeQueues (cut, deleted, completed)
            if not normal:
                self.writers.check_time_index_tails()
            self.writers.sync_time_indexes()
        redispatch = None
        tail = NextQueueOffsets(self.multi_dispatch)
        if not self.read_only and self.commit_log.queue.files:
            if normal:
                start = dispatch_from_phy if dispatch_from_phy >= 0 else self.commit_log.min_offset
            else:
                start = res.start_offset
            if not cfg.dispatch_enabled and normal:
                # An external dispatcher owns the ConsumeQueues: one killed mid-batch leaves some
                # queues behind others, so their common end is no bound; its checkpoint time is.
                first = self.commit_log.choose_recovery_segment(
                    normal=False, dispatch_from_phy=-1, min_timestamp=cp.min_timestamp(),
                    check_crc=cfg.check_crc_on_recover)
                start = min(start, self.commit_log.queue.files[first].file_from_offset)
            if index_from is not None:
                start = min(start, index_from)
            if start < end and not cfg.dispatch_enabled:
                for batch in self.commit_log.scan(start, end):
                    tail.add(batch)
            elif start < end:
                redispatch = start
                self._dispatch_range(start, end, tail.add)
        self._recover_topic_queue_table(tail.table())
        return RecoveryReport(normal, end, truncated, redispatch, index_from, res.error)

    def _recover_topic_queue_table(self, tail: dict[tuple[str, int], int]) -> None:
        """The next queue offset of every queue, once the recovered CommitLog tail is dispatched
        (spec §6.3; the broker's ``recoverTopicQueueTable`` after its recovery dispatch): the end
        of its ConsumeQueue, or past the highest queue offset of its records in the recovered
        range (``tail``) when that is higher (dispatch disabled: the ConsumeQueues may lag).  Never
        lower than what a record of the CommitLog already carries, so no queue offset is
        assigned twice (issue 18)."""
        table = {key: cq.max_offset_in_queue for key, cq in self.consume_queues.items()}
        for key, nxt in tail.items():
            if nxt > table.get(key, 0):
                table[key] = nxt
        self.queue_offsets = table

    # ================================================================== append
    def append(self, records: list[MessageRecord]) -> list[AppendResult]:
        """Assign queue offsets, stamp store times and append the records (one lock, one copy
        per segment).  ``record.store_timestamp`` is stamped here."""
        self._check_writable()
        cfg = self.config
        with self._put_lock:
            now = cfg.now()
            sizes: list[int] = []
            topic_bytes: list[bytes] = []
            for rec in records:
                tb = rec.topic.encode("utf-8")
                topic_bytes.append(tb)
                sizes.append(self._record_size(rec, tb))
            self._check_sizes(records, sizes)
            assigned: list[int] = []
            pending: dict[tuple[str, int], int] = {}
            if self.multi_dispatch.enable_lmq:
                self._wrap_lmq(records, pending)
                sizes = [self._record_size(rec, tb) for rec, tb in zip(records, topic_bytes, strict=True)]
                self._check_sizes(records, sizes)
            for rec in records:
                key = (rec.topic, rec.queue_id)
                tx = rec.sys_flag & TRANSACTION_MASK
                if tx in (TRANSACTION_PREPARED_TYPE, TRANSACTION_ROLLBACK_TYPE):
                    assigned.append(0)
                    continue
                nxt = pending.get(key, self.queue_offsets.get(key, 0))
                assigned.append(nxt)
                pending[key] = nxt + 1
            for rec, qo in zip(records, assigned, strict=True):
                rec.queue_offset = qo
                rec.store_timestamp = now

            def encode_at(i: int, phys: int) -> bytes:
                rec = records[i]
                rec.commit_log_offset = phys
                return encode_record(rec, append_prop_crc=cfg.enabled_append_prop_crc,
                                     max_message_size=cfg.max_message_size)

            offsets = self.commit_log.append_records(sizes, encode_at)  # type: ignore[arg-type]
            self.queue_offsets.update(pending)
            if offsets:
                self._note_put(offsets[0], now)
        if cfg.flush_disk_type == FLUSH_SYNC:
            self.flush_commit_log(0)
        self._maybe_wake()
        return [AppendResult(o, s, q, now) for o, s, q in zip(offsets, sizes, assigned, strict=True)]

    def _wrap_lmq(self, records: list[MessageRecord], pending: dict[tuple[str, int], int]) -> None:
        """The put side of LMQ (under the put lock, before the sizes are final): each record that
        names LMQ queues gets their next queue offsets in ``INNER_MULTI_QUEUE_OFFSET`` (and loses
        ``WAIT``, as the broker's ``removeWaitStorePropertyString``); ``pending`` gets the
        advanced offsets (:mod:`mqstore.storage.rocketmq.lmq`)."""
        from mqstore.errors import InvalidArgumentError
        from mqstore.formats.rocketmq.lmq import PROPERTY_INNER_MULTI_QUEUE_OFFSET
        from mqstore.formats.rocketmq.properties import PROPERTY_WAIT, encode_properties
        from mqstore.storage.rocketmq.lmq import assign_lmq_offsets, lmq_names_for_put, lmq_queue_count

        rule = self.multi_dispatch
        # prepared / rolled-back transaction records get no unit anywhere: no LMQ offset either
        wanted = [None if rec.sys_flag & TRANSACTION_MASK in (TRANSACTION_PREPARED_TYPE, TRANSACTION_ROLLBACK_TYPE)
                  else lmq_names_for_put(rec.topic, rec.properties, rule) for rec in records]
        if not any(w is not None for w in wanted):
            return
        if rule.enable_multi_dispatch and lmq_queue_count(self.queue_offsets) > rule.max_lmq_consume_queue_num:
            raise InvalidArgumentError(
                f"the store has more LMQ queues than max_lmq_consume_queue_num ({rule.max_lmq_consume_queue_num}): "
                "multi-dispatch puts are refused (the broker's LMQ_CONSUME_QUEUE_NUM_EXCEEDED)")
        committed = self.queue_offsets
        for rec, names in zip(records, wanted, strict=True):
            if names is None:
                continue
            props = {k: v for k, v in rec.properties.items() if k != PROPERTY_WAIT}
            value, advanced = assign_lmq_offsets(names, lambda k: pending.get(k, committed.get(k, 0)))
            pending.update(advanced)
            props[PROPERTY_INNER_MULTI_QUEUE_OFFSET] = value
            rec.properties = props
            rec.properties_text = encode_properties(props)

    def _maybe_wake(self) -> None:
        if (self.config.flush_disk_type == FLUSH_SYNC or (
                self.commit_log.max_offset - self.reput_from_offset >= REPUT_WAKE_BYTES)) and not self._wake.is_set():
            self._wake.set()

    def _note_put(self, start: int, now: int) -> None:
        """Remember the store time of the data from ``start`` on for the checkpoint (under the
        put lock): one ``(start offset, store time)`` run per change of store time."""
        if now != self._last_put_ts:
            self._ts_runs.append((start, now))
            self._last_put_ts = now

    def _roll_for(self, size: int) -> MappedFile:
        """The segment the next record of ``size`` bytes goes to (under the put lock): the last
        one, or, by the end-of-segment rule, a new one after a blank filler."""
        mf = self.commit_log.queue.last()
        if mf is None or mf.wrote_position >= mf.file_size:
            mf = self.commit_log.queue.get_last_or_create(0)
        pos = mf.wrote_position
        if pos + size + BLANK_RECORD_SIZE > mf.file_size:
            mf.write_at(pos, encode_blank(mf.file_size - pos))
            mf.wrote_position = mf.file_size
            mf = self.commit_log.queue.get_last_or_create(0)
        return mf

    def append_one(self, topic: str, topic_field: bytes, body: bytes, props: bytes, queue_id: int, flag: int,
                   born_timestamp: int, born_host: bytes | None = None) -> tuple[int, int, int, int]:
        """The single-message fast path of :meth:`append` for the common record shape: magic v1
        (``topic_field`` is the length byte and the topic), IPv4 hosts (8 bytes each; the born
        host defaults to the store host), SYSFLAG 0, no property CRC.  Same bytes, checks,
        offsets and durability as :meth:`append`.  Returns ``(commit log offset, size, queue
        offset, store timestamp)``."""
        if self._closed or self.read_only or self.background_error is not None:
            self._check_writable()
        lb = len(body)
        lp = len(props)
        size = 90 + lb + len(topic_field) + lp  # 88 bytes of head, 2 of properties length
        if size > self._max_fast_size or lb > self._max_body or lp > 32767:
            self._check_sizes([MessageRecord(topic=topic, body=body, properties_text=props.decode("utf-8"))], [size])
        crc = _crc32(body) & 0x7FFFFFFF
        key = (topic, queue_id)
        sh = self._store_host_b
        with self._put_lock:
            clock = self.config.clock
            now = _time_ns() // 1_000_000 if clock is None else int(clock())
            qo = self.queue_offsets.get(key, 0)
            files = self._cl_queue.files
            mf = files[-1] if files else None
            if mf is None or (pos := mf.wrote_position) + size + BLANK_RECORD_SIZE > mf.file_size:
                mf = self._roll_for(size)
                pos = mf.wrote_position
            phys = mf.file_from_offset + pos
            mm = mf.mm
            rec = _REC_V1_V4.get((lb, lp, topic_field))
            # TOTALSIZE is written last (0 until then): a kill in the middle of the record leaves
            # nothing recovery could take for a record (see commitlog.publish).
            if rec is not None:  # the whole record by one pack_into (no concatenation, one call)
                rec.pack_into(mm, pos, 0, MAGIC_V1, crc, queue_id, flag, qo, phys, 0, born_timestamp,
                              born_host or sh, now, sh, 0, 0, lb, body, topic_field, lp, props)
            else:
                _HEAD_V1_V4.pack_into(mm, pos, 0, MAGIC_V1, crc, queue_id, flag, qo, phys, 0, born_timestamp,
                                      born_host or sh, now, sh, 0, 0, lb)
                p = pos + 88
                mm[p : p + lb] = body
                p += lb
                mm[p : pos + size] = topic_field + lp.to_bytes(2, "big") + props
                if len(_REC_V1_V4) < _REC_V1_V4_MAX:  # after the write: the next record of this shape packs at once
                    _REC_V1_V4[(lb, lp, topic_field)] = struct.Struct(
                        f"{_HEAD_V1_V4.format}{lb}s{len(topic_field)}sH{lp}s")
            _pack_size(mm, pos, size)
            mf.wrote_position = pos + size
            self.queue_offsets[key] = qo + 1
            if now != self._last_put_ts:
                self._ts_runs.append((phys, now))
                self._last_put_ts = now
        if self._sync_flush:
            self.flush_commit_log(0)
            self._wake.set()
        elif phys + size - self.reput_from_offset >= REPUT_WAKE_BYTES and not self._wake.is_set():
            self._wake.set()  # once per dispatch round: Event.set takes a lock and notifies
        return phys, size, qo, now

    def append_common(self, topic: str, topic_field: bytes, body: bytes, keys: str, uniq: str, tags: str,
                      queue_id: int, born_timestamp: int, size: int) -> tuple[int, int, int] | None:
        """:meth:`append_one` for the record shape of a plain ``put`` (ASCII string keys and tags,
        a generated 32-character unique key, flag 0, born host = store host): the checks, the put
        lock, the segment (and its roll through :meth:`_roll_for`), the clock, the queue offset,
        the store-time runs and the reput wake-up in one call of
        :func:`~mqstore.kernels.rocketmq.put_one.append_common` (native when built; the rules
        are written there, with the reference ``append_common_py``), then the sync-flush rule.
        ``size`` is :func:`~mqstore.kernels.rocketmq.put_one.one_v1_size`.  Same bytes, offsets
        and durability as :meth:`append_one`.  Returns ``(commit log offset, queue offset, store
        timestamp)``, or None (nothing written) when the record is too large for this path: the
        caller then takes the checked one, which reports it."""
        got = _append_common(self, topic, topic_field, body, keys, uniq, tags, queue_id, born_timestamp, size)
        if got is not None and self._sync_flush:
            self.flush_commit_log(0)
            self._wake.set()
        return got

    def append_columns(self, cols: RecordColumns, topics: list[str]) -> tuple[np.ndarray, np.ndarray, np.ndarray, int]:
        """Append many records given as columns (``topics``: the topic of each record, for the
        queue offsets): sizes, checks and queue offsets vectorised, the bytes encoded by one
        compiled pass per CommitLog segment straight into the mapping.  All or nothing: a batch
        with a bad record raises before anything is written.  Returns ``(commit log offsets,
        sizes, queue offsets, store timestamp)``."""
        self._check_writable()
        from mqstore.kernels.rocketmq import put as put_kernels  # (numba-free facade)

        cfg = self.config
        n = len(cols)
        sizes = cols.sizes()
        if n and (int(cols.body_len.max()) > cfg.max_message_size or int(cols.props_len.max()) > 32767
                  or int(sizes.max()) > min(cfg.max_message_size + RECORD_SLACK, cfg.commit_log_file_size - 8)):
            bad = int(np.flatnonzero((cols.body_len > cfg.max_message_size) | (cols.props_len > 32767)
                                     | (sizes > cfg.max_message_size + RECORD_SLACK)
                                     | (sizes + 8 > cfg.commit_log_file_size))[0])
            o = int(cols.props_off[bad])
            props_text = bytes(cols.props[o : o + int(cols.props_len[bad])]).decode("utf-8", "replace")
            self._check_sizes([MessageRecord(topic=topics[bad], body=b"\0" * int(cols.body_len[bad]),
                                             properties_text=props_text)], [int(sizes[bad])])
        with self._put_lock:
            now = cfg.now()
            qo, updates = self._assign_queue_offsets(topics, cols.queue_id, cols.sys_flag)
            cols.queue_offset = qo

            if cols.body_list is not None:  # the common shape from a list of bodies: the native encoder
                from mqstore.kernels.rocketmq.put_one import encode_common_into

                host = bytes(cols.store_host[:4]) + bytes(cols.store_host[16:20])
                args = (cols.body_list, cols.topics, cols.topic_off, cols.topic_len, cols.props, cols.props_off,
                        cols.props_len, cols.queue_id, cols.flag, qo, cols.born_ts, host)

                def write(out: np.ndarray, pos: int, lo: int, hi: int, phys: np.ndarray) -> int:
                    return encode_common_into(out, pos, lo, hi, sizes, phys, now, *args)  # type: ignore[misc]
            else:
                def write(out: np.ndarray, pos: int, lo: int, hi: int, phys: np.ndarray) -> int:
                    return put_kernels.encode_records_into(out, pos, cols, lo, hi, sizes, phys, now)

            offsets = self.commit_log.append_encoded(sizes, write)
            self.queue_offsets.update(updates)
            if n:
                self._note_put(int(offsets[0]), now)
        if cfg.flush_disk_type == FLUSH_SYNC:
            self.flush_commit_log(0)
        self._maybe_wake()
        return offsets, sizes, qo, now

    def _assign_queue_offsets(self, topics: list[str], queue_ids: np.ndarray,
                              sys_flags: np.ndarray) -> tuple[np.ndarray, dict[tuple[str, int], int]]:
        """Consecutive queue offsets per (topic, queue) in batch order; prepared and rolled-back
        transaction records get 0 and take no offset (as :meth:`append`).  Dense (topic, queue)
        codes go through one compiled pass (:func:`queue_ranks`); sparse ones take the sorting
        twin :meth:`_assign_queue_offsets_sorted`."""
        n = len(topics)
        q = queue_ids.astype(np.int64)
        if n == 0 or int(q.min()) < 0:
            return self._assign_queue_offsets_sorted(topics, queue_ids, sys_flags)
        tx = sys_flags & TRANSACTION_MASK
        takes = (tx != TRANSACTION_PREPARED_TYPE) & (tx != TRANSACTION_ROLLBACK_TYPE)
        # one topic (the common batch): a C-level count, identity first, instead of hashing every name
        names = [topics[0]] if topics.count(topics[0]) == n else list(dict.fromkeys(topics))
        width = int(q.max()) + 1
        nslots = len(names) * width
        if nslots > 1 << 16:
            return self._assign_queue_offsets_sorted(topics, queue_ids, sys_flags)
        if len(names) == 1:
            codes = q
        else:
            tid = {t: i for i, t in enumerate(names)}
            codes = np.fromiter(map(tid.__getitem__, topics), np.int64, n) * width + q
        from mqstore.kernels.rocketmq.put import queue_ranks  # native when built (numba otherwise)

        rank, counts = queue_ranks(codes, takes, nslots)
        slots = np.flatnonzero(counts).tolist()
        keys = [(names[c // width], c % width) for c in slots]
        get = self.queue_offsets.get
        base = np.zeros(nslots, np.int64)
        base[slots] = [get(k, 0) for k in keys]
        out = np.where(takes, base[codes] + rank, 0)
        return out, {k: int(base[c] + counts[c]) for k, c in zip(keys, slots, strict=True)}

    def _assign_queue_offsets_sorted(self, topics: list[str], queue_ids: np.ndarray,
                                     sys_flags: np.ndarray) -> tuple[np.ndarray, dict[tuple[str, int], int]]:
        """:meth:`_assign_queue_offsets` by sorting the (topic, queue) codes (any queue ids)."""
        n = len(topics)
        out = np.zeros(n, np.int64)
        tx = sys_flags & TRANSACTION_MASK
        takes = (tx != TRANSACTION_PREPARED_TYPE) & (tx != TRANSACTION_ROLLBACK_TYPE)
        names = list(dict.fromkeys(topics))
        if len(names) == 1:
            codes = queue_ids.astype(np.int64)
        else:
            tid = {t: i for i, t in enumerate(names)}
            codes = (np.fromiter(map(tid.__getitem__, topics), np.int64, n) << 32) | queue_ids.astype(np.int64)
        idx = np.flatnonzero(takes)
        uniq, inv, counts = unique(codes[idx], return_inverse=True, return_counts=True)
        order = np.argsort(inv, kind="stable")
        starts = np.cumsum(counts) - counts
        rank = np.empty(len(idx), np.int64)
        rank[order] = np.arange(len(idx), dtype=np.int64) - starts[inv[order]]
        keys = [(names[int(c) >> 32], int(c) & 0xFFFFFFFF) for c in uniq.tolist()]
        base = np.array([self.queue_offsets.get(k, 0) for k in keys], dtype=np.int64)
        out[idx] = base[inv] + rank
        return out, {k: int(b + c) for k, b, c in zip(keys, base.tolist(), counts.tolist(), strict=True)}

    def _check_sizes(self, records: list[MessageRecord], sizes: list[int]) -> None:
        """Refuse the whole batch before anything is written (a batch is all or nothing)."""
        from mqstore.errors import MessageTooLargeError, PropertiesTooLargeError
        from mqstore.formats.rocketmq.record import RECORD_SLACK

        cfg = self.config
        for rec, size in zip(records, sizes, strict=True):
            if len(rec.body) > cfg.max_message_size:
                raise MessageTooLargeError(f"body of {len(rec.body)} bytes exceeds max_message_size {cfg.max_message_size}")
            if len(rec.properties_text.encode("utf-8")) > 32767:
                raise PropertiesTooLargeError("properties exceed 32767 bytes")
            if size > cfg.max_message_size + RECORD_SLACK:
                raise MessageTooLargeError(f"record of {size} bytes exceeds max_message_size + 64 KiB")
            if size + 8 > cfg.commit_log_file_size:
                raise MessageTooLargeError(
                    f"record of {size} bytes does not fit in a CommitLog segment of {cfg.commit_log_file_size} bytes")

    def _record_size(self, rec: MessageRecord, topic_b: bytes) -> int:
        from mqstore.formats.rocketmq.record import CRC32_RESERVED_LEN, MAGIC_V2, choose_magic
        from mqstore.formats.rocketmq.record import Host as _Host

        magic = choose_magic(rec.topic, self.config.auto_message_version_on_topic_len)
        rec.magic = magic
        props = rec.properties_text.encode("utf-8")
        extra = 0
        if self.config.enabled_append_prop_crc:
            extra = CRC32_RESERVED_LEN + (1 if rec.properties_text and not rec.properties_text.endswith("\x02") else 0)
        return record_length(len(rec.body), len(topic_b), len(props) + extra, v2=magic == MAGIC_V2,
                             born_v6=_Host.parse(rec.born_host).is_v6, store_v6=_Host.parse(rec.store_host).is_v6)

    def _check_writable(self) -> None:
        if self._closed:
            raise StoreClosedError("store is closed")
        if self.read_only:
            raise ReadOnlyStoreError(f"store {self.root} is opened read-only")
        if self.background_error is not None:
            raise CorruptDataError(f"a background service failed: {self.background_error}")

    # ================================================================== dispatch (spec §5)
    @property
    def confirm_offset(self) -> int:
        """What the reput service may dispatch: flushed data in sync mode, written data otherwise."""
        if self.config.flush_disk_type == FLUSH_SYNC:
            return self.commit_log.flushed_offset
        return self.commit_log.max_offset

    def dispatch_pending(self) -> int:
        """Dispatch everything up to the confirm offset now (the reput service's ``doReput``)."""
        if self.read_only or self._closed or not self.config.dispatch_enabled:
            return 0
        if self.reput_from_offset >= self.confirm_offset:
            # nothing pending, seen without the lock: reput_from_offset only moves once a dispatch
            # round is complete, so the data below it is dispatched (a reader's common case)
            return 0
        with self._dispatch_lock:
            end = self.confirm_offset
            if self.reput_from_offset >= end:
                return 0
            start = max(self.reput_from_offset, self.commit_log.min_offset)
            n = self._dispatch_range(start, end)
            self.reput_from_offset = end
            return n

    def _dispatch_range(self, start: int, end: int, seen: Callable[[DispatchBatch], None] | None = None) -> int:
        n = 0
        for batch in self.commit_log.scan(start, end):
            n += self.apply_batch(batch)
            if seen is not None:
                seen(batch)
        return n

    def apply_batch(self, batch: DispatchBatch) -> int:
        """Route a dispatch batch to the ConsumeQueue and IndexFile writers (idempotent)."""
        with self._dispatch_lock:
            n = self.writers.apply(batch)
            self.last_logic_store_ts = max(self.last_logic_store_ts, self.writers.last_logic_store_ts)
            return n

    # ================================================================== flush
    def flush_commit_log(self, least_pages: int = 0) -> int:
        with self._flush_lock:
            try:
                flushed = self.commit_log.flush(least_pages)
            except OSError as exc:  # msync failed (EIO): nothing past the last good flush is acknowledged
                if isinstance(exc, MqStoreError):
                    raise
                raise FlushError(f"flushing the CommitLog failed: {exc.strerror or exc}",
                                 path=str(self.root / "commitlog")) from exc
            with self._put_lock:
                runs = self._ts_runs
                written = self.commit_log.max_offset
                done = 0
                for i, (_start, ts) in enumerate(runs):  # a run ends where the next one starts
                    if (runs[i + 1][0] if i + 1 < len(runs) else written) > flushed:
                        break
                    self.last_flushed_store_ts = max(self.last_flushed_store_ts, ts)
                    done = i + 1
                if done:
                    del runs[:done]
            return flushed

    def flush_consume_queues(self, least_pages: int = 0) -> None:
        with self._dispatch_lock:
            for cq in list(self.consume_queues.values()):
                cq.flush(least_pages)

    def flush_checkpoint(self) -> None:
        if self.read_only:
            return
        cp = self.checkpoint.values
        cp.physic_msg_timestamp = max(cp.physic_msg_timestamp, self.last_flushed_store_ts)
        if not self.config.dispatch_enabled:  # the dispatcher owns the other fields
            self.checkpoint.flush_fields(physic_msg_timestamp=cp.physic_msg_timestamp)
            return
        cp.logics_msg_timestamp = max(cp.logics_msg_timestamp, self.last_logic_store_ts)
        self.checkpoint.flush()

    def _on_index_file_full(self, end_timestamp: int) -> None:
        self.checkpoint.values.index_msg_timestamp = end_timestamp
        self.flush_checkpoint()

    def flush(self) -> None:
        """Make everything durable now: CommitLog, dispatch, ConsumeQueues, IndexFiles, checkpoint."""
        if self.read_only or self._closed:
            return
        self.flush_commit_log(0)
        if self.config.dispatch_enabled:
            self.dispatch_pending()
            self.flush_consume_queues(0)
            with self._dispatch_lock:
                self.index.flush()
        self.flush_checkpoint()

    # ================================================================== retention (spec §6.5)
    def delete_expired(self, *, force: bool = False, now_ms: int | None = None) -> int:
        """Delete CommitLog segments older than ``file_reserved_time_hours`` (all but the last;
        at most ``delete_file_batch_max`` per call), then the ConsumeQueue segments and index
        files that only point into deleted segments.  Without ``force`` it runs only in the
        ``delete_when`` hours."""
        self._check_writable()
        cfg = self.config
        now_ms = cfg.now() if now_ms is None else now_ms
        if not force:
            hours = {int(h) for h in cfg.delete_when.split(";")}
            if time.gmtime(now_ms / 1000).tm_hour not in hours:
                return 0
        expired_before = now_ms - int(cfg.file_reserved_time_hours * 3600_000)
        with self._put_lock, self._dispatch_lock:
            self.dispatch_pending()
            n = self.commit_log.delete_expired_by_time(expired_before, max_files=cfg.delete_file_batch_max)
            if n and cfg.dispatch_enabled:
                min_off = self.commit_log.min_offset
                for cq in self.consume_queues.values():
                    cq.delete_expired(min_off)
                self.writers.sync_time_indexes()
                self.index.delete_expired(min_off)
                self.reput_from_offset = max(self.reput_from_offset, min_off)
        return n

    # ================================================================== services
    def _start_services(self) -> None:
        for name, target in (("reput", self._reput_loop), ("flush", self._flush_loop), ("clean", self._clean_loop)):
            t = threading.Thread(target=self._guard(target), name=f"mqstore-{name}", daemon=True)
            t.start()
            self._threads.append(t)

    def _guard(self, fn: Callable[[], None]) -> Callable[[], None]:
        def run() -> None:
            try:
                fn()
            except BaseException as exc:  # surfaced to the next caller
                self.background_error = exc

        return run

    def _reput_loop(self) -> None:
        while not self._stop.is_set():
            self._wake.wait(REPUT_INTERVAL_S)
            self._wake.clear()
            if self._stop.is_set():
                break
            if self._warm_first and self.config.flush_disk_type != FLUSH_SYNC:
                # Pages first: a writer that outruns the warmed range faults them itself, under the
                # GIL and ~3x slower; dispatch is derived data that may lag (readers dispatch first).
                self.commit_log.warm_ahead()
            self.dispatch_pending()
            if self.config.flush_disk_type != FLUSH_SYNC:
                self.commit_log.warm_ahead()

    def _flush_loop(self) -> None:
        cfg = self.config
        last_cl_thorough = last_cq_thorough = 0.0
        next_cq = time.monotonic()
        interval = cfg.flush_interval_commit_log_ms / 1000.0
        while not self._stop.wait(interval if cfg.flush_disk_type != FLUSH_SYNC else cfg.flush_interval_consume_queue_ms / 1000.0):
            now = time.monotonic()
            if cfg.flush_disk_type != FLUSH_SYNC:
                pages = cfg.flush_commit_log_least_pages
                if (now - last_cl_thorough) * 1000 >= cfg.flush_commit_log_thorough_interval_ms:
                    pages, last_cl_thorough = 0, now
                self.flush_commit_log(pages)
            if now >= next_cq:
                next_cq = now + cfg.flush_interval_consume_queue_ms / 1000.0
                pages = cfg.flush_consume_queue_least_pages
                if (now - last_cq_thorough) * 1000 >= cfg.flush_consume_queue_thorough_interval_ms:
                    pages, last_cq_thorough = 0, now
                if cfg.dispatch_enabled:
                    self.flush_consume_queues(pages)
                self.flush_checkpoint()

    def _clean_loop(self) -> None:
        while not self._stop.wait(self.config.clean_resource_interval_ms / 1000.0):
            self.delete_expired()

    # ================================================================== close
    def close(self) -> None:
        if self._closed:
            return
        try:
            self._stop.set()
            self._wake.set()
            for t in self._threads:
                t.join(timeout=30)
            if not self.read_only:
                self.flush()
                if not self.config.dispatch_enabled or self.reput_from_offset >= self.commit_log.max_offset:
                    try:
                        (self.root / "abort").unlink()
                    except FileNotFoundError:
                        pass
        finally:
            self._closed = True
            self.commit_log.close()
            self.writers.close()
            self.index.close()
            self.checkpoint.close()
            if self.rocksdb_cq is not None:
                self.rocksdb_cq.close()
            self._release_lock()

    @property
    def closed(self) -> bool:
        return self._closed

    def check_open(self) -> None:
        if self._closed:
            raise StoreClosedError("store is closed")
