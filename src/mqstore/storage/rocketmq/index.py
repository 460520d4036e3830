"""IndexFile files and the IndexService (spec §3–4): hash index of message keys.

Files live in ``index/`` and are named ``yyyyMMddHHmmssSSS`` (UTC) of the store timestamp of
their first key, bumped by 1 ms when that name is not greater than the last one; the broker uses
the wall clock at creation instead, which makes the names irreproducible.  The contents are
byte-identical to what the broker writes for the same messages.

Durability: keys are written through the mapping (safe from a process crash at once).  A file is
``msync``ed when it fills and a new one is rolled (then the checkpoint's ``indexMsgTimestamp``
advances), and all files are flushed on close.  After an unclean shutdown the files newer than
the checkpoint are not deleted as the broker does (which loses key lookups): they are rebuilt by
re-dispatching their messages from the CommitLog (:meth:`IndexService.load` returns where from).
"""

from __future__ import annotations

import mmap
import os
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from pathlib import Path
from types import ModuleType
from typing import TYPE_CHECKING, Any

import numpy as np

from mqstore.errors import (
    CorruptIndexError,
    FlushError,
    GeometryMismatchError,
    InvalidArgumentError,
    ReadOnlyStoreError,
)
from mqstore.formats.rocketmq.indexfile import IndexFileBuffer, index_file_size
from mqstore.formats.rocketmq.javahash import index_key_hash
from mqstore.storage.mapped import MappedFile, msync_range, populate_write, size_file
from mqstore.storage.rocketmq.index_roll import keys_per_file, roll_plan
from mqstore.storage.rocketmq.layout import (
    index_tmp_name,
    is_index_tmp_name,
    is_offset_name,
    next_index_file_name,
)

if TYPE_CHECKING:  # pragma: no cover
    from mqstore.kernels.rocketmq.scan import DispatchBatch
    from mqstore.storage.rocketmq.commitlog import CommitLog

LONG_MAX = 2**63 - 1
_WALKS: list[ModuleType] = []  # the numba walk modules (chain_walk, key_match), imported by the first query


def _walks() -> list[ModuleType]:
    """``[chain_walk, key_match]``: the kernels of the queries, imported on first use."""
    if not _WALKS:  # the rebuild and verify never query: their processes never load these (numba)
        from mqstore.kernels.rocketmq import chain_walk, key_match

        _WALKS[:] = [chain_walk, key_match]
    return _WALKS


_KM: list[ModuleType] = []  # key_match (the facade: native when built; numba loads only on the numba path)


def _key_match() -> ModuleType:
    if not _KM:
        from mqstore.kernels.rocketmq import key_match

        _KM.append(key_match)
    return _KM[0]


#: the image of an in-memory built IndexFile is returned to the system by whole huge pages
_IMAGE_DROP = 2 << 20


class IndexFile:
    """One mapped IndexFile.

    ``in_memory`` (with ``create``; the offline rebuild's bulk build): the file is created and
    sized as usual, but its bytes are built in an anonymous private mapping (``mm``: the same
    bytes as the file would hold) and written to the file with ``pwrite``: the items, written once
    and in order, after every bulk put (:meth:`spill`; their pages then leave the image, so its
    resident memory is the slot table and the last put's items), the header and the slot table by
    :meth:`flush` (then ``fdatasync``).  A fresh shared file mapping would take a page fault per
    page, each reading (zero-filling) the page of a fresh file first: ~12 % of a rebuild's CPU.
    Such a file is for writing only: the items already spilled read as zeros in ``mm``."""

    def __init__(self, path: Path, hash_slot_num: int, index_num: int, *, read_only: bool = False, create: bool = False,
                 in_memory: bool = False) -> None:  # fmt: skip
        if in_memory and (read_only or not create):
            raise InvalidArgumentError("an in-memory IndexFile is a new file being written", path=str(path))
        self.path = Path(path)
        self.name = self.path.name
        self.read_only = read_only
        size = index_file_size(hash_slot_num, index_num)
        if create:  # sized under a temporary name, then renamed: a crash never leaves a short file
            tmp = self.path.with_name(index_tmp_name(self.path.name))
            fd = os.open(tmp, os.O_RDWR | os.O_CREAT | os.O_TRUNC, 0o644)
            try:
                size_file(fd, size, self.path)
            except BaseException:
                tmp.unlink(missing_ok=True)
                raise
            finally:
                os.close(fd)
            os.rename(tmp, self.path)
        actual = self.path.stat().st_size
        if actual != size:
            raise GeometryMismatchError(
                f"index file is {actual} bytes but {hash_slot_num} slots x {index_num} items need {size}",
                path=str(self.path),
            )
        self._fd = -1
        if in_memory:
            self._file: MappedFile | None = None
            self._fd = os.open(self.path, os.O_RDWR)
            try:
                self.mm = mmap.mmap(-1, size, flags=mmap.MAP_PRIVATE | mmap.MAP_ANONYMOUS)
            except BaseException:
                os.close(self._fd)
                raise
            if hasattr(mmap, "MADV_HUGEPAGE"):
                try:  # the slot table's random writes fault 2 MiB at a time (where THP is on)
                    self.mm.madvise(mmap.MADV_HUGEPAGE)
                except OSError:  # pragma: no cover - advice only
                    pass
            # items [0, _spilled) are in the file; the image's pages below _dropped are returned
            self._spilled = self._dropped = 40 + hash_slot_num * 4
            self._flushed_head = b""  # the header last written by flush
        else:
            self._file = MappedFile(self.path, size, read_only=read_only, named_by_offset=False)
            self.mm = self._file.mm
        self.buffer = IndexFileBuffer(self.mm, hash_slot_num, index_num, load=not create)
        self._words: np.ndarray | bool | None = None  # cached uint32 view for queries (False: none)

    @property
    def in_memory(self) -> bool:
        return self._fd >= 0

    def _pwrite(self, lo: int, hi: int) -> None:
        with memoryview(self.mm) as mv:
            while lo < hi:
                try:
                    n = os.pwrite(self._fd, mv[lo:hi], lo)  # the GIL released
                except OSError as exc:
                    raise FlushError(f"write failed: {exc.strerror}", path=str(self.path)) from exc
                lo += n

    def spill(self) -> None:
        """In-memory mode: write the items put since the last spill to the file and return the
        image's whole huge pages below them (items are never written twice)."""
        if self._fd < 0:
            return
        end = 40 + self.buffer.hash_slot_num * 4 + min(self.buffer.header.index_count, self.buffer.index_num) * 20
        if end > self._spilled:
            self._pwrite(self._spilled, end)
            self._spilled = end
        lo = max(self._dropped, -(-(40 + self.buffer.hash_slot_num * 4) // _IMAGE_DROP) * _IMAGE_DROP)
        hi = end - end % _IMAGE_DROP
        if hi > lo:
            try:
                self.mm.madvise(mmap.MADV_DONTNEED, lo, hi - lo)
            except (OSError, ValueError):  # pragma: no cover - advice only
                pass
            self._dropped = hi

    def query_words(self) -> np.ndarray | None:
        """The cached native ``uint32`` view of the mapping that single-key queries walk (None on
        a big-endian host); dropped by :meth:`close`."""
        w = self._words
        if w is None:
            from mqstore.kernels.buffers import word_view

            w = self._words = word_view(self.mm)
            if w is None:
                self._words = False
        return w if w is not False else None

    @property
    def header(self):
        return self.buffer.header

    def select_many(self, key_hashes: np.ndarray, begin: int, end: int,
                    max_num: int = LONG_MAX) -> tuple[np.ndarray, np.ndarray]:
        """The physical offsets of many hashed keys stored in ``[begin, end]`` (ms; the file keeps
        seconds), one batch chain walk: ``(offsets, splits)``, the offsets of key ``i`` being
        ``offsets[splits[i]:splits[i + 1]]``.  Hash collisions are not filtered."""
        from mqstore.kernels.rocketmq.chain_walk import select_many
        from mqstore.kernels.rocketmq.index_build import header_array

        buf = self.buffer
        u8 = np.frombuffer(self.mm, np.uint8)
        try:
            return select_many(u8, buf.hash_slot_num, buf.index_num, header_array(buf.header), key_hashes,
                               max_num, begin, end)
        finally:
            del u8

    def is_write_full(self) -> bool:
        return self.buffer.is_write_full()

    def torn(self) -> bool:
        """Whether a put was cut short here (a crash inside a batch of keys): a slot that names an
        item the header does not count yet (a later put would link that item to itself), or a
        header whose end offset is not the last counted item's.  Such a file is rebuilt, not kept:
        the broker keeps it when its end timestamp is not newer than the checkpoint (keys of the
        same millisecond), and then writes self-links."""
        h = self.header
        if h.index_count > self.buffer.index_num:
            return True
        slots = self.buffer.hash_slot_num
        table = np.frombuffer(self.mm, dtype=">i4", count=slots, offset=40)
        if int(table.max(initial=0)) >= h.index_count:
            return True
        if h.index_count > 1:
            _, phy, _, _ = self.buffer.read_item(h.index_count - 1)
            return phy != h.end_phy_offset
        return False

    def flush(self) -> None:
        """Write the header and ``msync`` the file, with the GIL released (a full default file is
        ~100 MiB of dirty pages at its roll: CPython's ``mmap.flush`` would stop every other
        thread, the putting one included, for the whole write-back)."""
        if self.read_only:
            return
        self.buffer.write_header()
        if self._fd >= 0:  # in-memory mode: the items, then the header and slot table; then to disk
            head = self.buffer.header.encode()
            if head == self._flushed_head:  # nothing put since the last flush (whose image may be dropped)
                return
            self.spill()
            self._pwrite(0, 40 + self.buffer.hash_slot_num * 4)
            try:
                os.fdatasync(self._fd)
            except OSError as exc:
                raise FlushError(f"fdatasync failed: {exc.strerror}", path=str(self.path)) from exc
            self._flushed_head = head
            return
        view = np.frombuffer(self.mm, dtype=np.uint8)
        try:
            msync_range(self.mm, view, 0, len(view))
        except OSError as exc:
            raise FlushError(f"msync failed: {exc.strerror}", path=str(self.path)) from exc
        finally:
            del view  # the export of the mapping ends here: close() can unmap it

    def close(self) -> None:
        self._words = None  # release the query view's export of the mapping first
        if self._file is not None:
            self._file.close()
        elif self._fd >= 0:
            try:
                self.mm.close()
            except BufferError:  # a caller still holds a view; the image goes when it does
                pass
            os.close(self._fd)
            self._fd = -1

    def destroy(self) -> None:
        self._words = None
        if self._file is not None:
            self._file.destroy()
        else:
            self.close()
            self.path.unlink(missing_ok=True)


@dataclass(slots=True)
class QueryOffsetResult:
    phy_offsets: list[int]
    index_last_update_timestamp: int
    index_last_update_phyoffset: int


class IndexService:
    #: threads of a large bulk put (the offline rebuild sets more; the live store stays sequential)
    bulk_threads: int = 1
    #: new files are built in memory and written with pwrite (the offline rebuild; see IndexFile)
    in_memory_build: bool = False

    def __init__(self, directory: Path, hash_slot_num: int, index_num: int, *, read_only: bool = False) -> None:
        self.directory = Path(directory)
        self.hash_slot_num = hash_slot_num
        self.index_num = index_num
        self.read_only = read_only
        self.files: list[IndexFile] = []
        # Messages below resume_offset are indexed; the first resume_skip keys of the message at
        # resume_offset are indexed too (a file can fill in the middle of a message's keys).
        self.resume_offset = -1
        self.resume_skip = 0
        self.on_file_full = None  # callback(end_timestamp) after a full file is flushed
        self._prefixes: dict[str, int] = {}  # Java hash state of "topic#" per queried topic
        self._seeds: dict[str, int] = {}  # its complement, the seed of select_files
        self._query_topics: dict[str, tuple[bytes, int]] = {}  # topic -> (UTF-8 bytes, seed) (exact_matches)
        self._match_pool: list[np.ndarray] = []  # buffers of exact_matches
        self._out_pool: list[tuple[np.ndarray, memoryview]] = []
        # (files, table, views) of select_files; dropped before any file is closed
        self._plan: tuple[list[IndexFile], np.ndarray, list[np.ndarray], bytes] | None = None

    # ------------------------------------------------------------------ load (spec §4.5)
    def load(self, last_exit_ok: bool, index_msg_timestamp: int, commit_log_end: int | None = None) -> int | None:
        """Open the files.  After an unclean shutdown, the files the broker would delete (end
        timestamp newer than the checkpoint, or pointing beyond the valid CommitLog end) are
        removed and the offset from which their messages must be re-dispatched is returned
        (``None`` when nothing has to be rebuilt)."""
        if not self.directory.is_dir():
            return None
        names = sorted(p.name for p in self.directory.iterdir() if p.is_file())
        for name in names:
            if not is_offset_name(name):
                if is_index_tmp_name(name) and not self.read_only:
                    (self.directory / name).unlink()  # a file whose creation was interrupted
                continue  # the broker skips non-numeric names
            self.files.append(IndexFile(self.directory / name, self.hash_slot_num, self.index_num, read_only=self.read_only))
        rebuild_from: int | None = None
        if not last_exit_ok or commit_log_end is not None:
            keep = len(self.files)
            while keep > 0:
                h = self.files[keep - 1].header
                stale = (not last_exit_ok and (h.end_timestamp > index_msg_timestamp or self.files[keep - 1].torn())) or (
                    commit_log_end is not None and h.end_phy_offset >= commit_log_end and h.index_count > 1
                )
                if not stale:
                    break
                keep -= 1
            if keep < len(self.files):
                victims = self.files[keep:]
                self.files = self.files[:keep]
                # Re-dispatch from the last message the kept files hold (its missing keys are
                # completed, see _compute_resume), or from the start when no file is kept.
                rebuild_from = self.files[-1].header.end_phy_offset if self.files else 0
                if not self.read_only:
                    self._plan = None
                    for v in victims:
                        v.destroy()
        self._compute_resume()
        return rebuild_from

    def _compute_resume(self) -> None:
        """Find the last indexed message and how many of its keys the files hold."""
        self.resume_offset, self.resume_skip = -1, 0
        for f in reversed(self.files):
            h = f.header
            if h.index_count <= 1:
                continue
            if self.resume_offset < 0:
                self.resume_offset = h.end_phy_offset
            elif h.end_phy_offset != self.resume_offset:
                break
            # a damaged header may count more items than the file holds: read only those it holds
            # (verify reports the count, see verify_chains)
            n = min(h.index_count, f.buffer.index_num) - 1
            count = 0
            for item in range(n, 0, -1):
                _, phy, _, _ = f.buffer.read_item(item)
                if phy != self.resume_offset:
                    break
                count += 1
            self.resume_skip += count
            if count < n:
                break

    # ------------------------------------------------------------------ files
    def last_file(self) -> IndexFile | None:
        return self.files[-1] if self.files else None

    def _new_file(self, first_timestamp: int) -> IndexFile:
        if self.read_only:
            raise ReadOnlyStoreError("store is opened read-only", path=str(self.directory))
        self.directory.mkdir(parents=True, exist_ok=True)
        prev = self.last_file()
        name = next_index_file_name(self.directory, prev.name if prev is not None else None, first_timestamp)
        f = IndexFile(self.directory / name, self.hash_slot_num, self.index_num, create=True,
                      in_memory=self.in_memory_build)
        if prev is not None:
            f.buffer.carry_over(prev.header.end_phy_offset, prev.header.end_timestamp)
            prev.flush()
            if prev.is_write_full() and self.on_file_full is not None:
                self.on_file_full(prev.header.end_timestamp)
        self.files.append(f)
        return f

    # ------------------------------------------------------------------ build (spec §4.2)
    def put_hashes(self, key_hash: np.ndarray, phy_offset: np.ndarray, store_ts: np.ndarray) -> None:
        """Put keys (already hashed) in order, rolling files as they fill."""
        n = len(key_hash)
        last = self.files[-1] if self.files else None
        room = 0 if last is None or last.is_write_full() else max(last.buffer.index_num - last.header.index_count, 0)
        if 0 < n <= room:  # the plan's one range continuing the current file (the live dispatch's usual case)
            put = _bulk_put(last, key_hash, phy_offset, store_ts, 0, self.bulk_threads)
            if put != n:
                raise CorruptIndexError(f"index file took {put} keys, the roll plan gave it {n}", path=str(last.path))
            return
        for fk in roll_plan(n, keys_per_file(self.index_num), room):
            f = self._new_file(int(store_ts[fk.lo])) if fk.new_file else self.files[-1]
            # bounded to the plan's range: the file takes exactly the keys the plan gives it
            put = _bulk_put(f, key_hash[: fk.hi], phy_offset[: fk.hi], store_ts[: fk.hi], fk.lo, self.bulk_threads)
            if put != fk.hi - fk.lo:
                raise CorruptIndexError(f"index file took {put} keys, the roll plan gave it {fk.hi - fk.lo}",
                                        path=str(f.path))

    def build(self, batch: DispatchBatch) -> int:
        """Index the keys of a dispatch batch (ROLLBACK messages skipped, already indexed keys
        skipped); returns the number of keys put."""
        if len(batch.key_hash) == 0:
            return 0
        from mqstore.kernels.rocketmq.index_build import BatchKeys, index_keys

        hashes, offs, ts = index_keys(BatchKeys(batch.key_row, batch.key_hash, batch.sys_flag, batch.commit_log_offset,
                                                batch.store_timestamp), self.resume_offset, self.resume_skip)  # fmt: skip
        if not len(hashes):
            return 0
        self.put_hashes(hashes, offs, ts)
        last = int(offs[-1])
        put_for_last = int(np.count_nonzero(offs == last))
        self.resume_skip = self.resume_skip + put_for_last if last == self.resume_offset else put_for_last
        self.resume_offset = last
        return len(hashes)

    # ------------------------------------------------------------------ query (spec §4.3)
    def query_offset(self, topic: str, key: str, max_num: int, begin: int, end: int, *, cap: int | None = 64) -> QueryOffsetResult:
        """``IndexService.queryOffset``: candidate offsets newest first (hash matches only)."""
        if cap is not None:
            max_num = min(max_num, cap)
        out: list[int] = []
        last_ts = last_phy = 0
        key_hash = index_key_hash(f"{topic}#{key}")
        for i, f in enumerate(reversed(self.files)):
            h = f.header
            if i == 0:
                last_ts, last_phy = h.end_timestamp, h.end_phy_offset
            if f.buffer.is_time_matched(begin, end):
                f.buffer.select_by_hash(out, key_hash, max_num, begin, end)
            if h.begin_timestamp < begin:
                break
            if len(out) >= max_num:
                break
        return QueryOffsetResult(out, last_ts, last_phy)

    def select_offsets(self, topic: str, key: str, max_num: int, begin: int, end: int) -> list[int]:
        """``query_offset(...).phy_offsets`` (``max_num`` already capped) in one compiled call over
        every IndexFile (:func:`~mqstore.kernels.rocketmq.chain_walk.select_files`) on a cached table of
        the files' mappings; same files, same order, same corrupt-chain error.  :meth:`query_offset`
        is its twin.  Each file's header is read from its mapping (which the writer updates in step
        with the in-memory header; a read-only reader sees what the writer indexed since it opened
        the files)."""
        plan = self._plan
        if plan is None or plan[0] != self.files:
            plan = self._make_plan()
            if plan is None:  # big-endian host: the per-file walk
                return self._select_offsets_loop(topic, key, max_num, begin, end)
        seed = self._seeds.get(topic)
        if seed is None:
            seed = ~self._prefix_state(topic)
            self._seeds[topic] = seed
        if key.isascii():
            kb = key.encode("ascii")
        else:
            kb, seed = b"", index_key_hash(f"{topic}#{key}")
        cw = (_WALKS or _walks())[0]
        select_files, SELECT_ONE_ROOM, SELECT_FILES_CYCLE = cw.select_files, cw.SELECT_ONE_ROOM, cw.SELECT_FILES_CYCLE
        pool = self._out_pool  # 64-slot result buffers with their memoryviews (list pop/append are atomic)
        out, mv = pool.pop() if pool else _out_buffer(64)
        try:
            n = select_files(plan[1], seed, kb, max_num, begin, end, out)
            if n == 1:
                return [mv[0]]
            if n > 1:
                return mv[:n].tolist()
            if n == 0:
                return []
            size = 64
            while n == SELECT_ONE_ROOM:
                size *= 16
                big = np.empty(size, np.int64)
                n = select_files(plan[1], seed, kb, max_num, begin, end, big)
            if n >= 0:
                return big[:n].tolist()
            f = plan[0][len(plan[0]) - 1 - (SELECT_FILES_CYCLE - n)]
            raise CorruptIndexError(f"index chain of {topic}#{key} in {f.name} has a cycle", path=str(f.path))
        finally:
            if len(pool) < 8:
                pool.append((out, mv))

    def exact_query(self, topic: str, key: str, begin: int, end: int, commit_log: CommitLog, max_num: int,
                    query: Callable[..., Any]) -> list[Any] | None:
        """The whole exact key query in one native call (``key_match.query_native``, given as
        ``query``): the messages of ``topic`` whose KEYS hold ``key`` or whose UNIQ_KEY is ``key``,
        stored in [begin, end], newest first, at most ``max_num`` (``< 0``: all).  None where
        :meth:`exact_matches` gives None (the caller takes the record-by-record path); a looping
        chain raises :class:`CorruptIndexError`.  The plans (this service's files table, the
        CommitLog's segment table) are made here when missing or stale; the native call checks
        them against the live file lists on every call."""
        if not commit_log.has_segment_table:  # (a DLedger CommitLog: entries wrap the records)
            return None
        r = query(self._plan, self.files, commit_log._seg_plan, commit_log.queue.files, topic, key, begin, end, max_num)
        if type(r) is list:
            return r
        km = _KM[0] if _KM else _key_match()
        for _ in range(3):  # a missing or stale plan: make it (each at most once) and ask again
            if r == km.QUERY_NEED_INDEX_PLAN:
                if self._make_plan() is None:
                    return None
            elif r == km.QUERY_NEED_SEGMENT_PLAN:
                if not commit_log.has_segment_table:
                    return None
                commit_log.segment_table()
            else:
                break
            r = query(self._plan, self.files, commit_log._seg_plan, commit_log.queue.files, topic, key, begin, end,
                      max_num)  # fmt: skip
            if type(r) is list:
                return r
        if r > km.SELECT_FILES_CYCLE:  # a candidate is not clean, or a key the path cannot compare
            return None
        plan = self._plan
        assert plan is not None
        f = plan[0][len(plan[0]) - 1 - (km.SELECT_FILES_CYCLE - r)]
        raise CorruptIndexError(f"index chain of {topic}#{key} in {f.name} has a cycle", path=str(f.path))

    def exact_matches(self, topic: str, key: str, begin: int, end: int, commit_log: CommitLog,
                      build: Callable[[np.ndarray, int, np.ndarray, str], Any] | None = None) -> Any:
        """The exact key query in one compiled call (:func:`~mqstore.kernels.rocketmq.key_match.exact_key_files`):
        the :data:`~mqstore.kernels.rocketmq.key_match.MATCH_COLUMNS` rows of the records of
        ``topic`` whose KEYS hold ``key`` or whose UNIQ_KEY is ``key``, stored in [begin, end],
        newest first, with the segments their ``F_SEGMENT`` column points into.  None when the
        compiled path does not apply (big-endian host, key holding U+FFFD or not encodable) or a
        candidate is not a clean record: the caller then takes the record-by-record path, which
        gives the same answer or raises the typed error.  With ``build``, the answer is
        ``build(out, n, table, topic)`` of the ``n`` rows in ``out`` (with the segment table
        ``F_SEGMENT`` indexes) instead, called while the buffers are still this call's."""
        plan = self._plan
        if plan is None or plan[0] != self.files:
            plan = self._make_plan()
            if plan is None:
                return None
        try:
            kb = key.encode("utf-8")
        except UnicodeEncodeError:
            return None
        if key.isascii():
            q = self._query_topics.get(topic)  # (topic bytes, seed: ~ the hash state of "topic#")
            if q is None:
                try:
                    tb = topic.encode("utf-8")
                except UnicodeEncodeError:
                    return None
                if len(self._query_topics) >= 4096:
                    self._query_topics.clear()
                q = self._query_topics[topic] = (tb, ~self._prefix_state(topic))
            tb, seed = q
        elif "\ufffd" in key:
            return None
        else:
            try:
                tb = topic.encode("utf-8")
            except UnicodeEncodeError:
                return None
            seed = index_key_hash(f"{topic}#{key}")
        if not commit_log.has_segment_table:
            return None
        segments, table = commit_log.segment_table()
        km = _KM[0] if _KM else _key_match()
        exact_key_files, EXACT_ROOM, MATCH_COLUMNS = km.exact_key_files, km.EXACT_ROOM, km.MATCH_COLUMNS
        pool = self._match_pool  # result buffers (list pop/append are atomic)
        out = pool.pop() if pool else np.empty((4, MATCH_COLUMNS), np.int64)
        if segments:  # the CommitLog's [min offset, max offset), from the segments of the table
            last = segments[-1]
            lo, hi = segments[0].file_from_offset, last.file_from_offset + last.wrote_position
        else:
            lo = hi = 0
        prm: Any = (seed, begin - 1000 if begin > 1000 else 0, end, lo if lo > 0 else 0, hi, begin, end)
        if not km.PRM_TUPLE:  # the numba kernel takes an array
            prm = np.array(prm, np.int64)
        n = exact_key_files(plan[1], table, tb, kb, prm, out)
        while n == EXACT_ROOM:
            out = np.empty((len(out) * 16, MATCH_COLUMNS), np.int64)
            n = exact_key_files(plan[1], table, tb, kb, prm, out)
        if n >= 0:
            if build is not None:
                res = build(out, n, table, topic)
            else:
                res = [out[0].tolist()] if n == 1 else out[:n].tolist() if n > 0 else [], segments
            if len(pool) < 8 and len(out) == 4:
                pool.append(out)
            return res
        if n == km.EXACT_UNCLEAN:
            return None
        f = plan[0][len(plan[0]) - 1 - (km.SELECT_FILES_CYCLE - n)]
        raise CorruptIndexError(f"index chain of {topic}#{key} in {f.name} has a cycle", path=str(f.path))

    def _make_plan(self) -> tuple[list[IndexFile], np.ndarray, list[np.ndarray], bytes] | None:
        """The table :func:`select_files` walks: the files' ``uint32`` views, newest first (the
        views are held here so that the addresses stay valid while the plan is in use), and the
        table as bytes (what the native :meth:`exact_query` reads)."""
        files = list(self.files)
        views = [f.query_words() for f in reversed(files)]
        if any(v is None for v in views):
            return None
        table = np.empty((len(views), 4), np.int64)
        for i, v in enumerate(views):
            table[i] = (v.ctypes.data, len(v), self.hash_slot_num, self.index_num)  # type: ignore[union-attr]
        plan = (files, table, views, table.tobytes())
        self._plan = plan  # type: ignore[assignment]
        return plan  # type: ignore[return-value]

    def _select_offsets_loop(self, topic: str, key: str, max_num: int, begin: int, end: int) -> list[int]:
        """:meth:`select_offsets` with one compiled walk per IndexFile
        (:func:`~mqstore.kernels.rocketmq.chain_walk.select_one`, in-memory headers)."""
        prefix = self._prefixes.get(topic)
        if prefix is None:
            prefix = self._prefix_state(topic)
        if key.isascii():
            kb, kh = key.encode("ascii"), -1
        else:
            kb, kh = b"", index_key_hash(f"{topic}#{key}")
        cw = (_WALKS or _walks())[0]
        select_one, SELECT_ONE_ROOM, SELECT_ONE_CYCLE = cw.select_one, cw.SELECT_ONE_ROOM, cw.SELECT_ONE_CYCLE
        found: list[int] = []
        files = self.files
        i = len(files)
        while i:
            i -= 1
            f = files[i]
            h = f.buffer.header
            fb, fe = h.begin_timestamp, h.end_timestamp
            if (begin < fb and end > fe) or (fb <= begin <= fe) or (fb <= end <= fe):
                w = f._words
                if w is None or w is False:
                    w = f.query_words()
                if w is None:
                    f.buffer.select_by_hash(found, kh if kh >= 0 else index_key_hash(f"{topic}#{key}"), max_num, begin, end)
                else:
                    room = max_num - len(found)
                    out = np.empty(64, np.int64)
                    n = select_one(w, self.hash_slot_num, self.index_num, fb, h.index_count, prefix, kb, kh, room,
                                   begin, end, out)  # fmt: skip
                    big = out
                    while n == SELECT_ONE_ROOM:
                        big = np.empty(len(big) * 16, np.int64)
                        n = select_one(w, self.hash_slot_num, self.index_num, fb, h.index_count, prefix, kb, kh,
                                       room, begin, end, big)  # fmt: skip
                    if n == SELECT_ONE_CYCLE:
                        raise CorruptIndexError(f"index chain of {topic}#{key} in {f.name} has a cycle",
                                                path=str(f.path))  # fmt: skip
                    if n:
                        found += big[:n].tolist()
            if fb < begin or len(found) >= max_num:
                break
        return found

    def _prefix_state(self, topic: str) -> int:
        from mqstore.kernels.javahash import hash_prefix_state

        if len(self._prefixes) >= 4096:
            self._prefixes.clear()
            self._seeds.clear()
        p = self._prefixes[topic] = hash_prefix_state(f"{topic}#")
        return p

    def candidates(self, topic: str, key: str, begin: int, end: int) -> Iterable[int]:
        """Every candidate offset of ``topic#key`` whose (second-granularity) index time may lie
        in [begin, end], newest first, with no cap.  Callers re-check key and time exactly."""
        prefix = self._prefixes.get(topic)
        if prefix is None:
            prefix = self._prefix_state(topic)
        # ASCII keys are hashed by the kernel from the state of "topic#" (no Python hash loop)
        kb = key.encode("ascii") if key.isascii() else None
        key_hash = -1 if kb is not None else index_key_hash(f"{topic}#{key}")
        # The index rounds times down to whole seconds after the file's begin: widen by 1 s.
        wbegin = max(0, begin - 1000)
        cw = (_WALKS or _walks())[0]
        select_one, SELECT_ONE_ROOM, SELECT_ONE_CYCLE = cw.select_one, cw.SELECT_ONE_ROOM, cw.SELECT_ONE_CYCLE
        for f in reversed(self.files):
            h = f.header
            if h.index_count <= 1:
                continue
            if not f.buffer.is_time_matched(wbegin, end):
                if h.end_timestamp < wbegin:
                    break
                continue
            out: list[int] = []
            w = f.query_words()
            if w is None:
                f.buffer.select_by_hash(out, key_hash if key_hash >= 0 else index_key_hash(f"{topic}#{key}"), LONG_MAX,
                                        wbegin, end)  # fmt: skip
            else:  # the compiled walk (same rules); the hash is passed in when the key is not ASCII
                buf = np.empty(64, np.int64)
                while True:
                    n = select_one(w, self.hash_slot_num, self.index_num, h.begin_timestamp, h.index_count, prefix,
                                   kb if kb is not None else b"", key_hash, LONG_MAX, wbegin, end, buf)  # fmt: skip
                    if n != SELECT_ONE_ROOM:
                        break
                    buf = np.empty(len(buf) * 16, np.int64)
                if n == SELECT_ONE_CYCLE:
                    raise CorruptIndexError(f"index chain of {topic}#{key} in {f.name} has a cycle", path=str(f.path))
                out = buf[:n].tolist()
            yield from out
            if h.begin_timestamp < wbegin:
                break

    def candidates_columnar(self, topic: str, keys: list[str], begin: int, end: int, *,
                            max_num: int | None = None, widen: bool = True) -> tuple[np.ndarray, np.ndarray]:
        """Candidate offsets (hash matches, newest first) of many keys of ``topic`` at once, as
        ``(offsets, splits)``: those of ``keys[i]`` are ``offsets[splits[i]:splits[i + 1]]``.  One
        vectorised chain walk per file for all keys (``select_many``).  With ``widen`` the time
        window is widened by 1 s as :meth:`candidates` does (callers re-check exactly); without it
        and with ``max_num`` (total per key, capped per file as the broker does) each key gets what
        :meth:`query_offset` returns for it."""
        from mqstore.kernels.javahash import index_hash_keys, join_keys_ascii
        from mqstore.kernels.rocketmq.chain_walk import select_many, select_many_text
        from mqstore.kernels.rocketmq.index_build import header_array

        n = len(keys)
        # ASCII keys: hashed by the walk's own threads, from the cached state of "topic#"
        text = join_keys_ascii(keys)
        hashes = index_hash_keys(topic, keys) if text is None else None
        got = np.zeros(n, np.int64)
        offs_parts: list[np.ndarray] = []
        key_parts: list[tuple[np.ndarray | None, np.ndarray]] = []
        wbegin = max(0, begin - 1000) if widen else begin
        limit = LONG_MAX if max_num is None else max_num
        for f in reversed(self.files):
            h = f.header
            if widen:
                if h.index_count <= 1:
                    continue
                if not f.buffer.is_time_matched(wbegin, end):
                    if h.end_timestamp < wbegin:
                        break
                    continue
            elif not f.buffer.is_time_matched(wbegin, end):
                if h.begin_timestamp < wbegin:
                    break
                continue
            if not offs_parts:  # the first file walked: every key is still to do (no selection pass)
                todo = None
                if hashes is None:
                    prefix = self._prefixes.get(topic)
                    if prefix is None:
                        prefix = self._prefix_state(topic)
                    offs, splits, hashes = select_many_text(f.mm, self.hash_slot_num, self.index_num, header_array(h),
                                                            prefix, text[0], text[1], limit, wbegin, end)  # type: ignore[index]  # fmt: skip
                else:
                    offs, splits = select_many(f.mm, self.hash_slot_num, self.index_num, header_array(h), hashes,
                                               limit, wbegin, end)  # fmt: skip
                first_splits = splits
            else:
                todo = np.flatnonzero(got < limit)
                if not len(todo):
                    break
                offs, splits = select_many(f.mm, self.hash_slot_num, self.index_num, header_array(h), hashes[todo],
                                           limit, wbegin, end)  # type: ignore[index]  # fmt: skip
            counts = np.diff(splits)
            if todo is None:
                got += counts  # the kernel already capped each key at ``limit``
            else:
                if limit != LONG_MAX:  # the broker's list is shared across files: each file tops it up
                    take = np.minimum(counts, limit - got[todo])
                    if (take < counts).any():
                        within = np.arange(len(offs)) - np.repeat(splits[:-1], counts)
                        offs = offs[within < np.repeat(take, counts)]
                    counts = take
                got[todo] += counts
            offs_parts.append(offs)
            key_parts.append((todo, counts))
            if h.begin_timestamp < wbegin:
                break
        if len(offs_parts) == 1:
            return offs_parts[0], first_splits
        out_splits = np.zeros(n + 1, np.int64)
        np.cumsum(got, out=out_splits[1:])
        if not offs_parts:
            return np.empty(0, np.int64), out_splits
        rows = [np.repeat(np.arange(n) if t is None else t, c) for t, c in key_parts]
        order = np.argsort(np.concatenate(rows), kind="stable")  # per key, newest file first
        return np.concatenate(offs_parts)[order], out_splits

    def candidates_many(self, topic: str, keys: list[str], begin: int, end: int, *,
                        max_num: int | None = None, widen: bool = True) -> list[np.ndarray]:
        """:meth:`candidates_columnar` as one array per key."""
        offs, splits = self.candidates_columnar(topic, keys, begin, end, max_num=max_num, widen=widen)
        return [offs[splits[i] : splits[i + 1]] for i in range(len(keys))]

    # ------------------------------------------------------------------ retention / flush
    def delete_expired(self, min_commit_log_offset: int) -> int:
        if not self.files or self.files[0].header.end_phy_offset >= min_commit_log_offset:
            return 0
        victims = []
        for f in self.files[:-1]:
            if f.header.end_phy_offset < min_commit_log_offset:
                victims.append(f)
            else:
                break
        self._plan = None  # the query table holds views of the mappings: drop it first
        for v in victims:
            v.destroy()
        self.files = self.files[len(victims) :]
        return len(victims)

    def flush(self) -> None:
        for f in self.files:
            f.flush()

    def close(self) -> None:
        self._plan = None  # the query table holds views of the mappings: drop it first
        for f in self.files:
            f.close()
        self.files = []

    def verify_chains(self) -> list[str]:
        """Sanity problems of the files (bad counts, links out of range)."""
        problems = []
        for f in self.files:
            h = f.header
            if not 1 <= h.index_count <= self.index_num:
                problems.append(f"{f.name}: indexCount {h.index_count} outside 1..{self.index_num}")
            if h.hash_slot_count > min(self.hash_slot_num, max(h.index_count - 1, 0)):
                problems.append(f"{f.name}: hashSlotCount {h.hash_slot_count} exceeds the keys stored")
        return problems


def _out_buffer(size: int) -> tuple[np.ndarray, memoryview]:
    out = np.empty(size, np.int64)
    return out, memoryview(out)


def _bulk_put(f: IndexFile, key_hash: np.ndarray, phy: np.ndarray, ts: np.ndarray, start: int,
              threads: int | None = 1) -> int:
    """Put keys from ``start`` until the file is full (numba bulk builder, on ``threads`` threads
    for large puts: same bytes); returns how many."""
    from mqstore.formats.rocketmq.indexfile import IndexHeader
    from mqstore.kernels.rocketmq.index_build import bulk_put_parallel, header_array

    buf = f.buffer
    header = header_array(buf.header)
    _populate(f, buf.hash_slot_num, int(buf.header.index_count), len(key_hash) - start)
    n = bulk_put_parallel(f.mm, buf.hash_slot_num, buf.index_num, header, key_hash, phy, ts, start, threads=threads)
    buf.header = IndexHeader(*(int(v) for v in header))
    f.spill()
    if n == 0 and len(key_hash) > start and not buf.is_write_full():
        raise CorruptIndexError("index file refused a key although it is not full", path=str(f.path))
    return n


_POPULATE_MIN_KEYS = 1 << 16


def _populate(f: IndexFile, hash_slot_num: int, index_count: int, keys: int) -> None:
    """Before a large bulk put, pre-fault the slot table and the item range it will write (the GIL
    released: the rebuild's other stages run meanwhile)."""
    if keys < _POPULATE_MIN_KEYS or f.read_only or f.in_memory:
        return
    page = mmap.PAGESIZE
    items = 40 + hash_slot_num * 4
    end = min(len(f.mm), items + (index_count + keys) * 20)
    view = np.frombuffer(f.mm, np.uint8)
    try:
        for a, b in ((0, items), (items + index_count * 20, end)):
            a -= a % page
            if b > a and not populate_write(view, a, b - a):
                return  # older kernels: the pages fault in one by one
    finally:
        del view  # the export of the mapping ends here: close() can unmap it
