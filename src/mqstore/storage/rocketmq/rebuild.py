"""Offline rebuild of ``consumequeue/`` and ``index/`` (and the checkpoint fields they own) from
the CommitLog alone, with the same scan → dispatch → write code as the live store."""

from __future__ import annotations

import hashlib
import os
import shutil
import tempfile
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np

from mqstore.errors import CorruptIndexError, InvalidArgumentError, StoreNotFoundError
from mqstore.formats.rocketmq.record import TRANSACTION_MASK, TRANSACTION_ROLLBACK_TYPE
from mqstore.kernels.threads import default_threads, resolve_threads
from mqstore.storage.locks import DISPATCH_LOCK_FILE, StoreLock
from mqstore.storage.mapped import ensure_inside
from mqstore.storage.rocketmq.checkpoint import StoreCheckpoint
from mqstore.storage.rocketmq.config import StoreConfig, validate_topic
from mqstore.storage.rocketmq.consumequeue import ConsumeQueue
from mqstore.storage.rocketmq.dispatch import IndexWriters
from mqstore.storage.rocketmq.dledger import dledger_home, open_commit_log
from mqstore.storage.rocketmq.index import IndexFile, IndexService
from mqstore.storage.rocketmq.index import _bulk_put as bulk_put_into
from mqstore.storage.rocketmq.index_roll import checkpoint_index_time
from mqstore.storage.rocketmq.layout import commit_log_dirs, is_rocksdb_dir, resolve_config
from mqstore.storage.rocketmq.lmq import MultiDispatchRule
from mqstore.storage.rocketmq.timeindex import TIMEINDEX_DIR, QueueTimeIndex
from mqstore.storage.rocketmq.timeindex import exists as time_index_exists
from mqstore.storage.rocketmq.timeindex import queue_dir as time_index_queue_dir

if TYPE_CHECKING:  # pragma: no cover
    from mqstore.kernels.rocketmq.scan import DispatchBatch

@dataclass(slots=True)
class RebuildStats:
    messages: int
    keys: int
    commit_log_end: int
    consume_queues: int
    index_files: int
    stop_error: str | None


def rebuild_target(root: Path, out: str | os.PathLike[str] | None) -> tuple[bool, Path]:
    """``(in_place, target)``: an in-place rebuild (``out`` missing or the store itself) is built
    in a hidden directory of the store and swapped in by :func:`swap_in` when complete."""
    in_place = out is None or Path(out).resolve() == root.resolve()
    target = Path(tempfile.mkdtemp(prefix=".rebuild-", dir=root)) if in_place else Path(out)  # type: ignore[arg-type]
    if not target.is_dir() and (target.exists() or target.is_symlink()):
        raise InvalidArgumentError(f"output directory {target} exists and is not a directory")
    target.mkdir(parents=True, exist_ok=True)
    return in_place, target


def remove_stale_targets(root: Path) -> int:
    """Remove the build directories an in-place rebuild killed before its swap left in the store
    (``.rebuild-*``: the store's own files were never touched by it; with the store locked no
    rebuild is running).  Returns how many."""
    n = 0
    for d in root.glob(".rebuild-*"):
        if d.is_dir() and not d.is_symlink() and not d.name.startswith(".rebuild-bcq-"):
            shutil.rmtree(d, ignore_errors=True)
            n += 1
    return n


def swap_in(root: Path, target: Path) -> None:
    """Replace the store's ``consumequeue/``, ``consumequeue_ext/``, ``consumequeue_timeindex/``,
    ``index/`` and checkpoint by the rebuilt ones (sidecars of the old ConsumeQueues never survive
    them)."""
    for name in ("consumequeue", "consumequeue_ext", TIMEINDEX_DIR, "index"):
        old = root / name
        if name == "consumequeue" and is_rocksdb_dir(old):
            # a RocksDB ConsumeQueue store migrating back to files: its database stays (the broker
            # with storeType=default reads only the queue directories; remove it when done)
            for d in old.iterdir():
                if d.is_dir() and not d.is_symlink():
                    shutil.rmtree(d)
            if (target / name).exists():
                for d in (target / name).iterdir():
                    os.replace(d, old / d.name)
            continue
        if old.exists():
            shutil.rmtree(old)
        if (target / name).exists():
            os.replace(target / name, old)
    os.replace(target / "checkpoint", root / "checkpoint")
    shutil.rmtree(target, ignore_errors=True)


def write_rebuild_checkpoint(root: Path, target: Path, logics_msg_timestamp: int, index_msg_timestamp: int) -> None:
    """The checkpoint of a rebuilt store: the CommitLog fields copied from the store's own
    checkpoint (when it has one), the ConsumeQueue and IndexFile fields from the rebuild."""
    cp = StoreCheckpoint(target / "checkpoint")
    try:
        if (root / "checkpoint").exists():
            src_cp = StoreCheckpoint(root / "checkpoint", read_only=True)
            cp.values.physic_msg_timestamp = src_cp.values.physic_msg_timestamp
            cp.values.master_flushed_offset = src_cp.values.master_flushed_offset
            cp.values.confirm_phy_offset = src_cp.values.confirm_phy_offset
            src_cp.close()
        cp.values.logics_msg_timestamp = logics_msg_timestamp
        cp.values.index_msg_timestamp = index_msg_timestamp
        cp.flush()
    finally:
        cp.close()


def write_consume_queue(root: Path, topic: str, queue_id: int, cq_file_size: int, offsets: np.ndarray,
                        sizes: np.ndarray, tags: np.ndarray, queue_offsets: np.ndarray, *,
                        store_timestamps: np.ndarray | None = None, time_index_interval: int = 0) -> int:
    """Write the whole ConsumeQueue ``consumequeue/<topic>/<queue_id>`` of a rebuild from its units
    (CommitLog order), exactly as the dispatch would; with ``time_index_interval`` > 0 (and the
    units' ``store_timestamps``) also its time index sidecars.  The queue directory is built under
    a temporary name and renamed into place (after the sidecars), so a retried task is idempotent:
    when the directory already exists a previous attempt completed it and nothing is written.
    Returns the units."""
    validate_topic(topic)
    base = ensure_inside(root, root / "consumequeue" / topic)
    final = ensure_inside(root, base / str(int(queue_id)))
    if final.is_dir():
        return len(offsets)
    base.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=f".{int(queue_id)}.", suffix=".tmp", dir=base))
    tix_tmp: Path | None = None
    try:
        cq = ConsumeQueue(tmp, topic, int(queue_id), cq_file_size)
        try:
            cq.put_units(offsets, sizes, tags, queue_offsets)
            cq.flush()
            if time_index_interval > 0:
                if store_timestamps is None:
                    raise InvalidArgumentError("the time index needs the store timestamps of the units")
                tix_final = time_index_queue_dir(root, topic, int(queue_id))
                tix_final.parent.mkdir(parents=True, exist_ok=True)
                tix_tmp = Path(tempfile.mkdtemp(prefix=f".{int(queue_id)}.", suffix=".tmp", dir=tix_final.parent))
                tix = QueueTimeIndex(tix_tmp, cq_file_size, time_index_interval)
                order_offsets = np.asarray(offsets, np.int64)
                stamps = np.asarray(store_timestamps, np.int64)

                def times_of(offs: np.ndarray, _sizes: np.ndarray) -> np.ndarray:
                    i = np.minimum(np.searchsorted(order_offsets, offs), len(order_offsets) - 1)
                    return np.where(order_offsets[i] == offs, stamps[i], -1)

                tix.sync([(mf.file_from_offset, mf.mm, mf.wrote_position) for mf in cq.queue.files], times_of)
                if tix_final.exists():
                    shutil.rmtree(tix_final)
                os.rename(tix_tmp, tix_final)
                tix_tmp = None
        finally:
            cq.close()
        try:
            os.rename(tmp, final)
        except OSError:
            if not final.is_dir():
                raise
    finally:
        if tmp.exists():
            shutil.rmtree(tmp, ignore_errors=True)
        if tix_tmp is not None and tix_tmp.exists():
            shutil.rmtree(tix_tmp, ignore_errors=True)
    return len(offsets)


def write_index_file(index_dir: Path, name: str, hash_slot_num: int, index_num: int, key_hash: np.ndarray,
                     phy_offset: np.ndarray, store_timestamp: np.ndarray, carry_end_phy_offset: int = 0,
                     carry_end_timestamp: int = 0) -> None:
    """Write one IndexFile of a rebuild holding ``key_hash`` (at most ``index_num - 1`` keys, in
    CommitLog order).  ``carry_*`` are the end values of the previous file (0 for the first), which
    a rolled file starts from.  Built under a temporary name and renamed: retries are idempotent."""
    if len(key_hash) > index_num - 1:
        raise InvalidArgumentError(f"{len(key_hash)} keys do not fit in an index file of {index_num} items")
    index_dir.mkdir(parents=True, exist_ok=True)
    tmp = index_dir / f".{name}.{uuid.uuid4().hex}.tmp"
    f = IndexFile(tmp, hash_slot_num, index_num, create=True)
    try:
        try:
            f.buffer.carry_over(carry_end_phy_offset, carry_end_timestamp)
            done = 0
            while done < len(key_hash):
                put = bulk_put_into(f, key_hash, phy_offset, store_timestamp, done)
                if put == 0:
                    raise CorruptIndexError("index file refused a key", path=str(tmp))
                done += put
            f.flush()
        finally:
            f.close()
        os.replace(tmp, index_dir / name)
    finally:
        tmp.unlink(missing_ok=True)


def rebuild_indexes(store: str | os.PathLike[str], out: str | os.PathLike[str] | None = None, *,
                    config: StoreConfig | None = None, progress: Callable[[int, int], None] | None = None,
                    check_crc: bool = False, threads: int | None = None,
                    time_index: bool | None = None) -> RebuildStats:
    """Regenerate the ConsumeQueues and IndexFiles of ``store`` into ``out`` (default: in place,
    built next to the old ones and swapped in when complete).  The CommitLog is only read.

    ``threads``: threads of the scan and of the IndexFile bulk build (``None``: the CPUs less the
    one the read-ahead scan keeps busy, at least 1 and at most 4, or ``MQSTORE_THREADS``; ``1``:
    the sequential kernels, the scan still reads ahead in one worker thread).  The files are the
    same bytes whatever the count.

    ``time_index``: also write the sparse time index sidecars (``consumequeue_timeindex/``, every
    ``config.time_index_interval`` units); ``None``: when the configuration enables them or the
    store has them (an in-place rebuild never keeps sidecars of the old ConsumeQueues)."""
    nthreads = resolve_threads(threads) if threads is not None else default_threads(reserve=1)
    root = Path(store)
    cfg = resolve_config(root, config)
    if cfg.enable_dledger_commit_log:
        dledger_home(root, cfg)  # StoreNotFoundError / several members: before anything is locked or written
    else:
        paths, ro = commit_log_dirs(root, cfg.store_path_commit_log, cfg.read_only_commit_log_store_paths)
        if not any(Path(p).is_dir() for p in paths + ro):
            raise StoreNotFoundError(f"{root} has no CommitLog directory ({', '.join(paths + ro)})")
    if out is None or Path(out).resolve() == root.resolve():
        # in place: no writer nor dispatcher may run while the files are rebuilt and swapped (StoreLockedError)
        with StoreLock(root), StoreLock(root, DISPATCH_LOCK_FILE):
            remove_stale_targets(root)
            return _rebuild(root, None, cfg, progress, check_crc, nthreads, time_index)
    return _rebuild(root, out, cfg, progress, check_crc, nthreads, time_index)


def time_index_interval_for(root: Path, cfg: StoreConfig, time_index: bool | None) -> int:
    """The interval a rebuild writes sidecars with (0: none)."""
    on = (cfg.enable_time_index or time_index_exists(root)) if time_index is None else time_index
    return cfg.time_index_interval if on else 0


def _rebuild(root: Path, out: str | os.PathLike[str] | None, cfg: StoreConfig,
             progress: Callable[[int, int], None] | None, check_crc: bool, nthreads: int,
             time_index: bool | None = None) -> RebuildStats:
    commit_log = open_commit_log(root, cfg)  # classic or DLedger: the scan below is the broker's dispatch walk
    try:
        in_place, target = rebuild_target(root, out)
    except BaseException:
        commit_log.close()
        raise
    index = IndexService(target / "index", cfg.hash_slot_num, cfg.index_num)
    index.bulk_threads = nthreads
    index.in_memory_build = True  # the files are written with pwrite from memory, then fdatasync'ed
    writers = IndexWriters(target, cfg.mapped_file_size_consume_queue, index if cfg.message_index_enable else None,
                           ext_enabled=cfg.enable_consume_queue_ext, ext_file_size=cfg.mapped_file_size_consume_queue_ext,
                           time_index_interval=time_index_interval_for(root, cfg, time_index),
                           store_time=commit_log.pickup_store_timestamp,
                           multi_dispatch=MultiDispatchRule.of(cfg))
    messages = keys = 0
    end = commit_log.max_offset
    last_stop = None
    writeback = _Writeback(background_sync=True)
    # Three stages overlap: the scan of batch N+2 (read-ahead thread), the ConsumeQueue units of
    # batch N+1 (this thread) and the IndexFile keys of batch N (the index thread); the kernels of
    # each release the GIL.  The index thread takes one batch at a time, in CommitLog order, and
    # nothing else touches the IndexFiles while it runs: the same bytes as the sequential dispatch.
    from concurrent.futures import Future, ThreadPoolExecutor

    pool = ThreadPoolExecutor(1, thread_name_prefix="mqstore-index") if writers.index is not None else None
    pending: Future[int] | None = None
    try:
        for n_batch, batch in enumerate(commit_log.scan_bounded(commit_log.min_offset, end, check_crc=check_crc,
                                                                          populate_ahead=True)):
            writers.apply(batch, index=pool is None)
            if pending is not None:
                pending.result()  # the keys of the previous batch are in (or its error is raised here)
                pending = None
            writers.release_full_files()
            if _WRITEBACK_EVERY and n_batch % _WRITEBACK_EVERY == _WRITEBACK_EVERY - 1:
                writeback.kick(writers)
            if pool is not None and len(batch.key_hash):
                pending = pool.submit(index.build, batch)
            messages += len(batch)
            keys += _index_key_count(batch)
            last_stop = batch
            if progress is not None:
                progress(batch.next_offset - commit_log.min_offset, end - commit_log.min_offset)
        if pending is not None:
            pending.result()
            pending = None
        # the IndexFile's slot table is written and synced in the index thread while this one
        # syncs the ConsumeQueues: the two waits for the disk overlap
        index_flushed = pool.submit(index.flush) if pool is not None else None
        writers.flush()
        if index_flushed is not None:
            index_flushed.result()
        else:
            index.flush()
        index_ts = checkpoint_index_time(len(index.files), lambda k: index.files[k].header.end_timestamp)
        write_rebuild_checkpoint(root, target, writers.last_logic_store_ts, index_ts)
        n_cq = len(writers.consume_queues)
        n_idx = len(index.files)
    finally:
        if pool is not None:
            pool.shutdown(wait=True)  # an index build still running (after an error) ends before the files close
        writeback.close()
        writers.close()
        commit_log.close()
    if in_place:
        swap_in(root, target)
    # (an empty batch is falsy: it has a length)
    return RebuildStats(messages, keys, last_stop.next_offset if last_stop is not None else 0, n_cq, n_idx,
                        last_stop.error if last_stop is not None else None)


def _index_key_count(batch: DispatchBatch) -> int:
    """The index keys of a batch that are not of a ROLLBACK message (the mask only when the batch
    has such a message: most have none)."""
    if not len(batch.key_hash):
        return 0
    if not np.any((batch.sys_flag & TRANSACTION_MASK) == TRANSACTION_ROLLBACK_TYPE):
        return len(batch.key_hash)
    return int(batch.index_key_mask().sum())


#: batches between two write-back requests for the files being built (0: none)
_WRITEBACK_EVERY = 4
_SYNC_FILE_RANGE_WRITE = 2  # start write-back of the dirty pages of the range, do not wait


def _load_sync_file_range() -> Callable[[int, int, int], None] | None:
    import ctypes

    from mqstore.storage.libc import libc_function

    fn = libc_function("sync_file_range", (ctypes.c_int, ctypes.c_int64, ctypes.c_int64, ctypes.c_uint))
    if fn is None:  # pragma: no cover - not Linux
        return None

    def call(fd: int, offset: int, nbytes: int) -> None:
        fn(fd, offset, nbytes, _SYNC_FILE_RANGE_WRITE)  # advice only: errors are the final flush's

    return call


class _Writeback:
    """Asks the kernel to start writing the finished parts of the files being built while the
    rebuild goes on (``sync_file_range(SYNC_FILE_RANGE_WRITE)``: no waiting), so that the final
    flush (``msync``, which the rebuild must wait for) finds little left to write.  Only whole
    items already written are asked for, never the IndexFile's slot table (still being written:
    cleaning its pages would fault them again).

    With ``background_sync`` it also makes what was written durable early: an ``fdatasync`` of the
    IndexFile being built runs in its own thread (one at a time; a kick while one runs adds none).
    On a virtual disk the final flush otherwise waited ~0.15 s for the device to drain every write
    of the run at once (the journal commit and cache flush of the first ``msync``); drained along
    the way, the end waits only for the last batches.  Advice only: errors are the final flush's
    (``fdatasync`` reports a write error to every descriptor open before it, the files' own
    included).  Durability still comes from the final flush."""

    def __init__(self, *, background_sync: bool = False) -> None:
        self._call = _load_sync_file_range()
        self._done: dict[Path, int] = {}  # bytes of each file already asked for
        self._sync_pool = None
        self._synced: object = None  # the Future of the running background fdatasync
        if background_sync:
            from concurrent.futures import ThreadPoolExecutor

            self._sync_pool = ThreadPoolExecutor(1, thread_name_prefix="mqstore-sync")

    def kick(self, writers: IndexWriters) -> None:
        if self._call is None:
            return
        ranges = [(mf.path, 0, mf.wrote_position) for cq in writers.consume_queues.values()
                  for mf in cq.queue.files[-1:]]  # fmt: skip
        index_path = None
        if writers.index is not None and writers.index.files:
            f = writers.index.files[-1]
            items = 40 + f.buffer.hash_slot_num * 4
            ranges.append((f.path, items, items + 20 * f.header.index_count))
            index_path = f.path
        for path, lo, hi in ranges:
            lo = max(lo, self._done.get(path, 0))
            lo -= lo % 4096
            hi -= hi % 4096
            if hi <= lo:
                continue
            try:
                fd = os.open(path, os.O_RDONLY)
            except OSError:  # pragma: no cover - renamed meanwhile: nothing to do
                continue
            try:
                self._call(fd, lo, hi - lo)
            finally:
                os.close(fd)
            self._done[path] = hi
        if self._sync_pool is not None and index_path is not None:
            running = self._synced
            if running is None or running.done():  # type: ignore[attr-defined]
                self._synced = self._sync_pool.submit(_datasync_quietly, index_path)

    def close(self) -> None:
        """Wait for a background ``fdatasync`` still running (before the files are closed)."""
        if self._sync_pool is not None:
            self._sync_pool.shutdown(wait=True)
            self._sync_pool = None


def _datasync_quietly(path: Path) -> None:
    try:
        fd = os.open(path, os.O_RDONLY)
    except OSError:  # pragma: no cover - renamed meanwhile: nothing to do
        return
    try:
        os.fdatasync(fd)
    except OSError:  # pragma: no cover - advice only: the final flush reports it
        pass
    finally:
        os.close(fd)


_M_TRIM_THRESHOLD, _M_TOP_PAD, _M_MMAP_THRESHOLD = -1, -2, -3  # glibc <malloc.h>


def keep_freed_memory() -> bool:
    """For a one-shot rebuild process (the CLI command; a library caller's process is left alone):
    ask glibc's allocator to keep freed memory for reuse instead of returning it to the system.
    Every batch allocates its columns afresh (~0.5-2 MiB arrays, above glibc's default mmap
    threshold or trimmed off the heap top when freed): each then came back as new zero-filled
    pages, one page fault each, ~10 % of the rebuild's CPU.  Kept, the same few tens of MiB serve
    every batch, so the resident memory still does not grow with the store.  False where it does
    not apply (not glibc)."""
    import ctypes

    from mqstore.storage.libc import libc_function

    mallopt = libc_function("mallopt", (ctypes.c_int, ctypes.c_int))
    if mallopt is None:  # pragma: no cover - not glibc
        return False
    ok = mallopt(_M_MMAP_THRESHOLD, 32 << 20)  # glibc's maximum: the batch columns come from the heap
    ok &= mallopt(_M_TRIM_THRESHOLD, 256 << 20)  # freed heap top kept (up to the batch working set)
    ok &= mallopt(_M_TOP_PAD, 16 << 20)
    return bool(ok)


def _digest(path: Path) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as fh:
        for chunk in iter(lambda: fh.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()


INDEX_TREES = ("consumequeue", "consumequeue_ext", TIMEINDEX_DIR, "index")


def tree_files(root: Path, subdirs: tuple[str, ...] = INDEX_TREES) -> dict[str, Path]:
    out: dict[str, Path] = {}
    for sub in subdirs:
        base = root / sub
        if base.is_dir():
            for p in sorted(base.rglob("*")):
                if p.is_file():
                    out[str(p.relative_to(root))] = p
    return out


def compare_trees(a: str | os.PathLike[str], b: str | os.PathLike[str],
                  subdirs: tuple[str, ...] = INDEX_TREES) -> list[str]:
    """Differences between the index trees of two stores (empty list: byte-identical)."""
    fa, fb = tree_files(Path(a), subdirs), tree_files(Path(b), subdirs)
    diff = [f"only in {a}: {k}" for k in sorted(set(fa) - set(fb))]
    diff += [f"only in {b}: {k}" for k in sorted(set(fb) - set(fa))]
    for k in sorted(set(fa) & set(fb)):
        if fa[k].stat().st_size != fb[k].stat().st_size or _digest(fa[k]) != _digest(fb[k]):
            diff.append(f"differs: {k}")
    return diff
