"""The dispatch step: route dispatch batches to the ConsumeQueue and IndexFile writers (spec §5).

One class serves the live store's reput service, the offline rebuild and the Spark jobs, so all
of them write byte-identical files for the same CommitLog.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

from mqstore.formats.rocketmq.consumequeue import CQ_UNIT_SIZE
from mqstore.formats.rocketmq.consumequeue_ext import DEFAULT_EXT_FILE_SIZE
from mqstore.formats.rocketmq.lmq import is_lmq
from mqstore.kernels.rocketmq.cq_group import group_units
from mqstore.kernels.rocketmq.scan import DispatchBatch
from mqstore.storage.mapped import ensure_inside
from mqstore.storage.rocketmq.config import validate_topic
from mqstore.storage.rocketmq.consumequeue import ConsumeQueue
from mqstore.storage.rocketmq.consumequeue_ext import ConsumeQueueExt
from mqstore.storage.rocketmq.index import IndexFile, IndexService
from mqstore.storage.rocketmq.layout import consume_queue_dirs
from mqstore.storage.rocketmq.lmq import MultiDispatchRule, cq_units
from mqstore.storage.rocketmq.timeindex import QueueTimeIndex, StoreTimeLookup, TimesOf
from mqstore.storage.rocketmq.timeindex import exists as time_index_exists
from mqstore.storage.rocketmq.timeindex import queue_dir as time_index_dir


class IndexWriters:
    """The ConsumeQueues of a store (``consumequeue/``, with their ``consumequeue_ext/`` files)
    and its IndexService (``index/``).

    ``ext_enabled`` is ``enableConsumeQueueExt``: every queue gets ext files and new units carry
    ext addresses.  Without it a queue whose ext directory exists still reads through it (the
    units a broker wrote with the ext on stay readable), and writes plain tags codes.  LMQ queues
    (``%LMQ%...``) never get ext units (the broker writes their units with the plain tags code).

    ``multi_dispatch`` (``enableLmq`` / ``enableMultiDispatch``): the records' multi-dispatch
    units are written too (:func:`mqstore.storage.rocketmq.lmq.cq_units`).

    ``time_index_interval`` (0: off) keeps the sparse time index sidecars of every queue
    (``consumequeue_timeindex/``, :mod:`mqstore.storage.rocketmq.timeindex`); it is also kept
    when that directory exists already.  ``store_time`` reads a record's store time from the
    CommitLog (for units whose record is not in the batch at hand)."""

    def __init__(self, root: Path, cq_file_size: int, index: IndexService | None, *, read_only: bool = False,
                 ext_enabled: bool = False, ext_file_size: int = DEFAULT_EXT_FILE_SIZE,
                 time_index_interval: int = 0, store_time: StoreTimeLookup | None = None,
                 multi_dispatch: MultiDispatchRule | None = None) -> None:
        self.root = Path(root)
        self.cq_file_size = cq_file_size
        self.index = index
        self.read_only = read_only
        self.ext_enabled = ext_enabled
        self.ext_file_size = ext_file_size
        self.multi_dispatch = multi_dispatch
        self.multi_dispatch_problems: list[tuple[int, str]] = []  # (commit log offset, what), latest first dropped
        self.consume_queues: dict[tuple[str, int], ConsumeQueue] = {}
        self.last_logic_store_ts = 0
        self._released: set[Path] = set()  # files whose pages release_full_files dropped
        self.time_index_interval = time_index_interval
        self.time_index_on = time_index_interval > 0 or time_index_exists(self.root)
        self.store_time = store_time
        self.time_indexes: dict[tuple[str, int], QueueTimeIndex] = {}

    def cq_dir(self, topic: str, queue_id: int) -> Path:
        return ensure_inside(self.root, self.root / "consumequeue" / topic / str(queue_id))

    def ext_dir(self, topic: str, queue_id: int) -> Path:
        return ensure_inside(self.root, self.root / "consumequeue_ext" / topic / str(queue_id))

    def _ext_for(self, topic: str, queue_id: int) -> ConsumeQueueExt | None:
        d = self.ext_dir(topic, queue_id)
        if (not self.ext_enabled or is_lmq(topic)) and not d.is_dir():
            return None
        return ConsumeQueueExt(d, self.ext_file_size, read_only=self.read_only)

    def _new_queue(self, directory: Path, topic: str, queue_id: int) -> ConsumeQueue:
        return ConsumeQueue(directory, topic, queue_id, self.cq_file_size, read_only=self.read_only,
                            ext=self._ext_for(topic, queue_id), ext_write=self.ext_enabled and not is_lmq(topic))

    def consume_queue(self, topic: str, queue_id: int, *, create: bool = False) -> ConsumeQueue | None:
        key = (topic, queue_id)
        cq = self.consume_queues.get(key)
        if cq is None and create:
            validate_topic(topic)
            cq = self._new_queue(self.cq_dir(topic, queue_id), topic, queue_id)
            self.consume_queues[key] = cq
        return cq

    # ------------------------------------------------------------------ time index sidecars
    def time_index(self, topic: str, queue_id: int) -> QueueTimeIndex | None:
        """The sidecars of a queue (loaded on first use; ``None`` when the index is off)."""
        if not self.time_index_on:
            return None
        key = (topic, queue_id)
        tix = self.time_indexes.get(key)
        if tix is None:
            from mqstore.formats.rocketmq.timeindex import DEFAULT_INTERVAL

            tix = QueueTimeIndex(time_index_dir(self.root, topic, queue_id), self.cq_file_size,
                                 self.time_index_interval or DEFAULT_INTERVAL, read_only=self.read_only)
            tix.load()
            self.time_indexes[key] = tix
        return tix

    def time_index_for_lookup(self, topic: str, queue_id: int) -> QueueTimeIndex | None:
        """The sidecars a time lookup may use: a reader sees what a writer appended since; a
        sidecar that cannot be read is not used (the lookup falls back to the ConsumeQueue search,
        ``verify`` reports the file)."""
        from mqstore.errors import CorruptIndexError

        if not self.time_index_on and not time_index_exists(self.root):
            return None
        self.time_index_on = True
        try:
            tix = self.time_index(topic, queue_id)
            if tix is not None and self.read_only:
                tix.refresh()
            return tix
        except (CorruptIndexError, OSError):
            self.time_indexes.pop((topic, queue_id), None)
            return None

    def _pickup_times(self, offsets: np.ndarray, sizes: np.ndarray) -> np.ndarray:
        if self.store_time is None:
            return np.full(len(offsets), -1, np.int64)
        st = self.store_time
        return np.array([st(int(o), int(s)) for o, s in zip(offsets.tolist(), sizes.tolist(), strict=True)], np.int64)

    def sync_time_index(self, key: tuple[str, int], times_of: TimesOf | None = None, *, tail_only: bool = False) -> int:
        """Make the sidecars of queue ``key`` agree with its ConsumeQueue files (the rule of
        :meth:`QueueTimeIndex.sync`); store times from ``times_of``, else the CommitLog."""
        cq = self.consume_queues.get(key)
        tix = self.time_index(*key)
        if tix is None or self.read_only:
            return 0
        if cq is None:
            tix.destroy()
            return 0
        files = [(mf.file_from_offset, mf.mm, mf.wrote_position) for mf in cq.queue.files]
        return tix.sync(files, times_of or self._pickup_times, tail_only=tail_only)

    def sync_time_indexes(self) -> None:
        """Every queue's sidecars after recovery or retention (and those of vanished queues go)."""
        if not self.time_index_on or self.read_only:
            return
        from mqstore.storage.rocketmq.timeindex import all_sidecars

        keys = set(self.consume_queues) | {(t, q) for t, q, _p in all_sidecars(self.root)}
        for key in sorted(keys):
            self.sync_time_index(key)

    def check_time_index_tails(self) -> int:
        """After an unclean shutdown: cut sidecar entries the CommitLog contradicts."""
        if not self.time_index_on or self.read_only or self.store_time is None:
            return 0
        cut = 0
        for key, cq in self.consume_queues.items():
            tix = self.time_index(*key)
            if tix is None:
                continue

            def unit(q: int, cq=cq) -> tuple[int, int] | None:
                u = cq.get_unit(q, resolve_ext=False) if q >= 0 else None
                return None if u is None else (u.commit_log_offset, u.size)

            cut += tix.check_tail(self.store_time, unit)
        return cut

    def load_consume_queues(self) -> None:
        for topic, qid, qdir in consume_queue_dirs(self.root):
            ensure_inside(self.root, qdir)
            cq = self._new_queue(qdir, topic, qid)
            cq.load()
            self.consume_queues[(topic, qid)] = cq

    def apply(self, batch: DispatchBatch, *, index: bool = True) -> int:
        """Write the ConsumeQueue units (NOT/COMMIT messages, grouped per queue, vectorised) and
        the index keys of a batch; replayed batches write nothing twice.  ``index=False`` leaves
        the keys to the caller (``self.index.build(batch)``, which touches no ConsumeQueue: the
        offline rebuild runs it in another thread, overlapped with the next batch's units)."""
        if len(batch) == 0:
            return 0
        units = cq_units(batch, self.multi_dispatch)
        if units.problems:
            self.multi_dispatch_problems = (self.multi_dispatch_problems + units.problems)[-1000:]
        if len(units):
            # one native call groups the units by queue and encodes them (queues in key order)
            groups = group_units(units.topic_id, units.queue_id, units.commit_log_offset, units.size, units.tags_code)
            queue_offsets = units.queue_offset[groups.rows]
            for g in range(len(groups)):
                a, b = int(groups.start[g]), int(groups.start[g + 1])
                cq = self.consume_queue(units.topics[int(groups.topic_id[g])], int(groups.queue_id[g]), create=True)
                assert cq is not None
                cq.put_encoded(groups.units[CQ_UNIT_SIZE * a : CQ_UNIT_SIZE * b], groups.rows[a:b],
                               units.commit_log_offset, units.size, units.tags_code, queue_offsets[a:b],
                               units.store_timestamp if cq.ext_write else None)  # (the times: ext units only)
                if self.time_index_on:
                    self.sync_time_index((cq.topic, cq.queue_id), self._batch_times(batch), tail_only=True)
            self.last_logic_store_ts = int(units.store_timestamp[-1])
        if index and self.index is not None:
            self.index.build(batch)
        return len(batch)

    def _batch_times(self, batch: DispatchBatch) -> TimesOf:
        """Store times of units whose records are in ``batch`` (CommitLog order), the others
        from the CommitLog."""
        starts = batch.commit_log_offset
        stamps = batch.store_timestamp

        def times_of(offsets: np.ndarray, sizes: np.ndarray) -> np.ndarray:
            i = np.searchsorted(starts, offsets)
            hit = i < len(starts)
            hit[hit] = starts[i[hit]] == offsets[hit]
            out = np.empty(len(offsets), np.int64)
            out[hit] = stamps[i[hit]]
            if not hit.all():
                out[~hit] = self._pickup_times(offsets[~hit], sizes[~hit])
            return out

        return times_of

    def release_full_files(self, *, index: bool = True) -> None:
        """Flush the ConsumeQueue and IndexFile files that are full and drop their pages from this
        process's mapping (``MADV_DONTNEED``; the page cache keeps them, dirty pages stay dirty):
        a bulk rebuild's resident memory then does not grow with the number of messages.
        ``index=False``: the ConsumeQueue files only (an index build is running in another thread)."""
        import mmap

        files = [mf for cq in self.consume_queues.values() for mf in cq.queue.files[:-1]]
        files += [mf for cq in self.consume_queues.values() if cq.ext is not None for mf in cq.ext.queue.files[:-1]]
        if index and self.index is not None:
            files += self.index.files[:-1]
        for f in files:
            if f.path in self._released:
                continue
            f.flush()
            mm = getattr(f, "_mm", None) if not isinstance(f, IndexFile) else f.mm
            if mm is not None:
                try:
                    mm.madvise(mmap.MADV_DONTNEED)
                except (OSError, ValueError):  # pragma: no cover - advice only
                    pass
            self._released.add(f.path)

    def flush(self, least_pages: int = 0) -> None:
        for cq in list(self.consume_queues.values()):
            cq.flush(least_pages)

    def close(self) -> None:
        for tix in self.time_indexes.values():
            tix.close()
        for cq in self.consume_queues.values():
            cq.close()
        if self.index is not None:
            self.index.close()
