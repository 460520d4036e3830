"""The CommitLog: every message of every topic, in fixed-size mapped segments (spec §1, §6.3).

Durability (see also :class:`mqstore.api.rocketmq.StoreConfig`): an appended record is in the
page cache when :meth:`CommitLog.append_records` returns, so it survives a crash of the process;
it survives a crash of the machine once :meth:`CommitLog.flush` has covered it (``msync``).
"""

from __future__ import annotations

import ctypes
import os
import threading
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from mqstore.errors import CorruptDataError, MessageTooLargeError, OffsetOutOfRangeError
from mqstore.formats.rocketmq.record import (
    BLANK_RECORD_SIZE,
    MessageRecord,
    check_record,
    encode_blank,
    store_timestamp_position,
)
from mqstore.kernels.rocketmq.scan import (
    STOP_BLANK,
    STOP_END,
    STOP_INVALID,
    STOP_LIMIT,
    DispatchBatch,
    scan_segment,
    valid_end,
)
from mqstore.storage.libc import libc_function
from mqstore.storage.mapped import (
    MappedFile,
    MappedFileQueue,
    MultiPathMappedFileQueue,
    populate_read,
    populate_write,
)

DEFAULT_COMMIT_LOG_FILE_SIZE = 1024 * 1024 * 1024
WARM_AHEAD_BYTES = 64 << 20  # how far ahead of the write position warm_ahead() populates pages


@dataclass(slots=True)
class RecoveryResult:
    process_offset: int  # valid end of the CommitLog
    start_offset: int  # where the scan began (start of the chosen segment)
    truncated_bytes: int  # bytes of torn/invalid data dropped at the tail
    error: str | None  # why the scan stopped before the written end, if it did


SCAN_NEXT_SEGMENT = "next_segment"
SCAN_CONTINUE = "continue"
SCAN_STOP = "stop"


def scan_step(stop: str, *, range_cut: bool = False) -> str:
    """The dispatch scan's stop rule: what follows a scan of one range that ended with ``stop``.

    An end-of-segment blank leads to the next segment (:data:`SCAN_NEXT_SEGMENT`); a scan cut
    short on purpose — ``max_records`` reached, or (``range_cut``) a range that ends inside a
    segment at a record boundary, read to its end — continues where it stopped
    (:data:`SCAN_CONTINUE`); anything else (the end of the data, an unreadable record) ends the
    dispatch (:data:`SCAN_STOP`).  The live reput, the local rebuild and the Spark rebuild's
    chunk plan all decide with this function."""
    if stop == STOP_BLANK:
        return SCAN_NEXT_SEGMENT
    if stop == STOP_LIMIT or (range_cut and stop == STOP_END):
        return SCAN_CONTINUE
    return SCAN_STOP


class CommitLog:
    #: whether :meth:`segment_table` describes the records (classic segments, records back to
    #: back); a CommitLog of another layout answers its readers record by record
    has_segment_table = True
    #: whether a read-only open may leave the recovery walk to the first whole-log scan
    #: (:meth:`defer_valid_end`); a CommitLog of another layout walks at open
    can_defer_valid_end = True
    #: the recovery walk left for later (:meth:`defer_valid_end`): (segment index, check_crc)
    _pending_end: tuple[int, bool] | None = None
    _settled: RecoveryResult | None = None  # its result once settled

    def __init__(self, directory: Path, file_size: int = DEFAULT_COMMIT_LOG_FILE_SIZE, *, read_only: bool = False,
                 paths: list[str] | None = None, readonly_paths: list[str] | None = None) -> None:
        """``directory``: the one CommitLog directory; or ``paths`` (+ ``readonly_paths``), the
        broker's multi-path CommitLog (:class:`MultiPathMappedFileQueue`)."""
        if file_size < 64:
            from mqstore.errors import InvalidArgumentError

            raise InvalidArgumentError(f"CommitLog segment size {file_size} is too small")
        self.file_size = file_size
        if paths and (len(paths) > 1 or readonly_paths):
            self.queue: MappedFileQueue = MultiPathMappedFileQueue(list(paths), list(readonly_paths or []), file_size,
                                                                   read_only=read_only)
        else:
            self.queue = MappedFileQueue(Path(paths[0]) if paths else Path(directory), file_size, read_only=read_only)
        self.directory = self.queue.directory
        self.read_only = read_only
        self._warmed = (-1, 0)  # (segment start offset, position populated up to)
        # (segments, table, views, table as bytes) of segment_table(); dropped before segments are
        # closed or deleted (the native query checks the bytes' plan against ``queue.files`` itself)
        self._seg_plan: tuple[list[MappedFile], np.ndarray, list[np.ndarray], bytes] | None = None
        self._end_lock = threading.Lock()

    def load(self) -> None:
        self.queue.load()

    # ------------------------------------------------------------------ offsets
    @property
    def min_offset(self) -> int:
        """Global offset of the oldest segment (0 when there is none)."""
        return max(self.queue.min_offset, 0)

    @property
    def max_offset(self) -> int:
        return self.queue.max_offset

    @property
    def flushed_offset(self) -> int:
        return self.queue.flushed_offset

    def roll_next_file(self, offset: int) -> int:
        return offset + self.file_size - offset % self.file_size

    # ------------------------------------------------------------------ append (spec §1.7)
    def append_records(self, sizes: list[int], encode_at: EncodeAt) -> list[int]:
        """Append records of the given sizes; ``encode_at(i, physical_offset)`` returns the bytes
        of record ``i`` once its offset is known.  The end-of-segment rule applies: a record
        that does not leave 8 spare bytes goes to the next segment and the rest of the current
        one becomes a blank record.  Returns the physical offset of each record."""
        offsets: list[int] = []
        i = 0
        n = len(sizes)
        while i < n:
            mf = self.queue.get_last_or_create(0)
            pos = mf.wrote_position
            max_blank = self.file_size - pos
            if sizes[i] + BLANK_RECORD_SIZE > self.file_size:
                raise MessageTooLargeError(
                    f"record of {sizes[i]} bytes does not fit in a CommitLog segment of {self.file_size} bytes"
                )
            if sizes[i] + BLANK_RECORD_SIZE > max_blank:
                mf.write_at(pos, encode_blank(max_blank))
                mf.wrote_position = self.file_size
                continue
            # As many records as fit, written as one copy.
            chunk = bytearray()
            p = pos
            while i < n and sizes[i] + BLANK_RECORD_SIZE <= self.file_size - p:
                data = encode_at(i, mf.file_from_offset + p)
                if len(data) != sizes[i]:
                    raise CorruptDataError(f"encoded record is {len(data)} bytes, expected {sizes[i]}")
                chunk += data
                offsets.append(mf.file_from_offset + p)
                p += sizes[i]
                i += 1
            publish(mf, pos, chunk)
        return offsets

    def append_encoded(self, sizes: np.ndarray, write: EncodeInto) -> np.ndarray:
        """Append records of the given sizes written in place by ``write(segment array, pos, lo,
        hi, physical offsets)`` (records ``lo:hi`` back to back from ``pos``; returns the end
        position), once per segment they land in.  Same end-of-segment rule as
        :meth:`append_records`.  Returns the physical offset of each record."""
        n = int(sizes.shape[0])
        offsets = np.empty(n, np.int64)
        if n and int(sizes.max()) + BLANK_RECORD_SIZE > self.file_size:
            raise MessageTooLargeError(
                f"record of {int(sizes.max())} bytes does not fit in a CommitLog segment of {self.file_size} bytes"
            )
        i = 0
        while i < n:
            mf = self.queue.get_last_or_create(0)
            pos = mf.wrote_position
            space = self.file_size - pos
            cum = np.cumsum(sizes[i:])
            k = int(np.searchsorted(cum, space - BLANK_RECORD_SIZE, side="right"))
            if k == 0:
                mf.write_at(pos, encode_blank(space))
                mf.wrote_position = self.file_size
                continue
            offsets[i : i + k] = mf.file_from_offset + pos + cum[:k] - sizes[i : i + k]
            # The commit point is the first record's TOTALSIZE (see publish): the records after
            # it are encoded in place, the first one aside and copied last (the encoder runs
            # without the GIL, so a kill can land in the middle of it).
            first = int(sizes[i])
            end = write(mf.array, pos + first, i + 1, i + k, offsets) if k > 1 else pos + first
            head = np.empty(first, np.uint8)
            if write(head, 0, i, i + 1, offsets) != first or end != pos + int(cum[k - 1]):
                raise CorruptDataError(f"encoded {end - pos} bytes, expected {int(cum[k - 1])}", path=str(mf.path))
            publish(mf, pos, head)
            mf.wrote_position = end
            i += k
        return offsets

    def warm_ahead(self, ahead: int = WARM_AHEAD_BYTES) -> int:
        """Populate the page tables of the last segment up to ``ahead`` bytes past the write
        position (``MADV_POPULATE_WRITE``; the broker's "warm mapped file"), so that appends do
        not stop on page faults.  Meant for a background thread: the call releases the GIL.
        Changes no byte of the file.  Returns the number of bytes populated (0 where the kernel
        cannot do it)."""
        if self.read_only:
            return 0
        mf = self.queue.last()
        if mf is None or mf.wrote_position >= mf.file_size:
            return 0
        seg, done = self._warmed
        start = max(done if seg == mf.file_from_offset else 0, mf.wrote_position) // 4096 * 4096
        end = min(mf.file_size, mf.wrote_position + ahead)
        if end - start < (1 << 20) and end < mf.file_size:
            return 0
        if end <= start:
            return 0
        if not populate_write(mf.array, start, end - start):
            return 0
        self._warmed = (mf.file_from_offset, end)
        return end - start

    # ------------------------------------------------------------------ read
    def segment_for(self, offset: int) -> MappedFile:
        mf = self.queue.find(offset)
        if mf is None:
            raise OffsetOutOfRangeError(
                f"offset {offset} is outside the CommitLog [{self.min_offset}, {self.max_offset})"
            )
        return mf

    def segment_table(self) -> tuple[list[MappedFile], np.ndarray]:
        """The segments and a table of their mappings for compiled readers
        (:mod:`mqstore.kernels.rocketmq.key_match`): one ``int64`` row per segment, ascending,
        ``[address, wrote position, global offset of its first byte, file size]``.  Cached while the
        segment list is the same (the last row's wrote position is refreshed on every call); the
        views behind the addresses are held by the cache, which :meth:`truncate_dirty`,
        :meth:`delete_expired_by_time` and :meth:`close` drop first (a caller holding an older
        table keeps its mappings alive through it until it returns)."""
        files = self.queue.files
        plan = self._seg_plan
        if plan is None or plan[0] != files:
            views = [mf.array for mf in files]
            table = np.empty((len(files), 4), np.int64)
            for i, (mf, v) in enumerate(zip(files, views, strict=True)):
                table[i] = (v.ctypes.data, mf.wrote_position, mf.file_from_offset, mf.file_size)
            plan = self._seg_plan = (list(files), table, views, table.tobytes())
        elif files:
            plan[1][-1, 1] = files[-1].wrote_position
        return plan[0], plan[1]

    def read_record(self, offset: int, *, check_crc: bool = False) -> MessageRecord:
        """Decode the message record at ``offset`` or raise a typed error naming the offset."""
        if offset < self.min_offset or offset >= self.max_offset:
            raise OffsetOutOfRangeError(
                f"offset {offset} is outside the CommitLog [{self.min_offset}, {self.max_offset})"
            )
        mf = self.segment_for(offset)
        pos = offset - mf.file_from_offset
        res = check_record(mf.mm, pos, mf.wrote_position, check_crc=check_crc)
        if res.success and res.record is not None:
            if res.record.commit_log_offset != offset:  # no CRC covers the header: catch what we can
                raise CorruptDataError(f"record says it is at offset {res.record.commit_log_offset}",
                                       path=str(mf.path), offset=offset)
            return res.record
        if res.size == 0 and res.success:
            raise CorruptDataError("blank end-of-segment record, not a message", path=str(mf.path), offset=offset)
        raise CorruptDataError(res.error or "invalid record", path=str(mf.path), offset=offset)

    def read_raw(self, offset: int, size: int) -> bytes:
        mf = self.segment_for(offset)
        pos = offset - mf.file_from_offset
        if pos + size > mf.wrote_position:
            raise OffsetOutOfRangeError(f"{size} bytes at {offset} run past the written end", path=str(mf.path))
        return mf.read(pos, size)

    def pickup_store_timestamp(self, offset: int, size: int) -> int:
        """``pickupStoreTimestamp``: the store time of the record at ``offset``, -1 when unavailable."""
        if offset < self.min_offset or size <= 0 or offset + size > self.max_offset:
            return -1
        mf = self.queue.find(offset)
        if mf is None:
            return -1
        pos = offset - mf.file_from_offset
        sys_flag = int.from_bytes(mf.mm[pos + 36 : pos + 40], "big", signed=True)
        tpos = pos + store_timestamp_position(sys_flag)
        return int.from_bytes(mf.mm[tpos : tpos + 8], "big", signed=True)

    def scan(self, start: int, end: int | None = None, *, check_crc: bool = False, max_records: int | None = None,
             skip_length_mismatch: bool = True, keys: bool = True, columns: bool = True) -> Iterator[DispatchBatch]:
        """Dispatch batches for the records in [start, end) segment by segment (the reput loop);
        without ``keys``, batches without index keys (a reader that does not use them); without
        ``columns``, batches with only the offsets and sizes filled (``scan_segment``'s
        ``columns``: a reader that needs nothing else, the dump without filters).

        While the valid end is not settled (:meth:`defer_valid_end`), a scan of the whole log
        from at or before the recovery walk's start is that walk too: from there on every segment
        is scanned with the walk's rules as well (:meth:`_scan_walked`), and the scan ends where
        the walk would have ended (settling the valid end); any other scan settles it first."""
        pending = self._pending_end
        if pending is not None:
            files = self.queue.files
            walk_from = files[pending[0]].file_from_offset
            if max(start, self.min_offset) <= walk_from and (end is None or end >= self.max_offset):
                yield from self._scan_walked(start, pending, check_crc, max_records, skip_length_mismatch, keys,
                                             columns)
                return
            self.settle_valid_end()
        end = self.max_offset if end is None else end
        offset = max(start, self.min_offset)
        while offset < end:
            mf = self.queue.find(offset)
            if mf is None:
                return
            seg_end = min(mf.file_from_offset + mf.wrote_position, end)
            pos = offset - mf.file_from_offset
            batch = scan_segment(
                mf.mm, mf.file_from_offset, pos, seg_end - mf.file_from_offset,
                check_crc=check_crc, max_records=max_records, skip_length_mismatch=skip_length_mismatch, keys=keys,
                **({} if columns else {"columns": False}),
            )
            yield batch
            nxt = self._after_batch(batch)
            if nxt is None:
                return
            offset = nxt

    def _after_batch(self, batch: DispatchBatch) -> int | None:
        """Where a whole-log scan goes on after ``batch`` (:func:`scan_step` of its stop: the next
        segment's start, the batch's end), or ``None`` where it ends."""
        step = scan_step(batch.stop)
        if step == SCAN_NEXT_SEGMENT:
            return self.roll_next_file(batch.next_offset)
        if step == SCAN_CONTINUE:
            return batch.next_offset
        return None

    def scan_bounded(self, start: int, end: int | None = None, *, check_crc: bool = False,
                     batch_records: int = 1 << 16, skip_length_mismatch: bool = True,
                     release_pages: bool = True, read_ahead: bool = True, populate_ahead: bool = False,
                     keys: bool = True, columns: bool = True) -> Iterator[DispatchBatch]:
        """The batches of :meth:`scan` with ``max_records=batch_records``, for bulk consumers (the
        offline rebuild).  The next batch is scanned in a worker thread while the caller consumes
        the current one (the scan kernel releases the GIL), and the mapped CommitLog pages behind
        a consumed batch are dropped from this process (``MADV_DONTNEED``: the page cache keeps
        them), so the resident memory does not grow with the CommitLog size.

        ``populate_ahead`` (with ``read_ahead``): when the caller comes back for the next batch,
        the pages of the batch after it (a window as long as the last batch) are mapped in this
        thread (``MADV_POPULATE_READ``) while the worker scans: the worker then takes no page
        fault (~8 % of its time), and this thread would only have waited for it."""
        batches = self.scan(start, end, check_crc=check_crc, max_records=max(1, batch_records),
                            skip_length_mismatch=skip_length_mismatch, **({} if keys else {"keys": False}),
                            **({} if columns else {"columns": False}))
        released = max(start, self.min_offset)
        if not read_ahead:
            for batch in batches:
                yield batch
                if release_pages:
                    released = self._release_pages(released, batch.next_offset)
            return
        populated = released
        with _OneAhead(batches, "mqstore-scan") as ahead:
            ahead.ask()
            prev = released
            while True:
                batch = ahead.result()
                if batch is None:
                    return
                ahead.ask()
                yield batch
                if release_pages:
                    released = self._release_pages(released, batch.next_offset)
                if populate_ahead:
                    span = max(batch.next_offset - prev, 0)
                    hi = batch.next_offset + 2 * span if end is None else min(batch.next_offset + 2 * span, end)
                    populated = self._populate_pages(max(populated, batch.next_offset + span), hi)
                prev = batch.next_offset

    def _mapped_spans(self, start: int, end: int, whole_pages: bool) -> Iterator[tuple[MappedFile, int, int]]:
        """``(segment, a, b)``: the part of [start, end) in each mapped segment as positions in it,
        ``a`` rounded down to a page (``b`` too with ``whole_pages``), non-empty spans only."""
        import mmap

        page = mmap.PAGESIZE
        for mf in list(self.queue.files):
            a = max(start, mf.file_from_offset) - mf.file_from_offset
            b = min(end, mf.end_offset) - mf.file_from_offset
            a -= a % page
            if whole_pages:
                b -= b % page
            if b > a and mf._mm is not None:
                yield mf, a, b

    def _populate_pages(self, start: int, end: int) -> int:
        """Map the pages of [start, end) into this process (advice only); returns the new end."""
        for mf, a, b in self._mapped_spans(start, end, False):
            populate_read(mf.array, a, b - a)
        return max(start, end)

    def _release_pages(self, start: int, end: int) -> int:
        """Drop the whole mapped pages of [start, end) from this process; returns the new start."""
        import mmap

        for mf, a, b in self._mapped_spans(start, end, True):
            try:
                mf._mm.madvise(mmap.MADV_DONTNEED, a, b - a)
            except (OSError, ValueError):  # pragma: no cover - advice only
                pass
        return max(start, end - end % mmap.PAGESIZE)

    # ------------------------------------------------------------------ recovery (spec §6.3)
    def _first_record_ok(self, mf: MappedFile, check_crc: bool) -> MessageRecord | None:
        res = check_record(mf.mm, 0, mf.file_size, check_crc=check_crc, read_body=check_crc)
        if not res.success or res.record is None or res.record.store_timestamp == 0:
            return None
        return res.record

    def choose_recovery_segment(self, *, normal: bool, dispatch_from_phy: int, min_timestamp: int, check_crc: bool) -> int:
        files = self.queue.files
        if not files:
            return 0
        if normal:
            for i in range(len(files) - 1, 0, -1):
                rec = self._first_record_ok(files[i], check_crc)
                if rec is not None and rec.commit_log_offset <= dispatch_from_phy:
                    return i
            return 0
        for i in range(len(files) - 1, -1, -1):
            rec = self._first_record_ok(files[i], check_crc)
            if rec is not None and rec.store_timestamp <= min_timestamp:
                return i
        return 0

    def find_valid_end(self, start_index: int, *, check_crc: bool, from_offset: int | None = None) -> RecoveryResult:
        """Scan forward from segment ``start_index`` (from ``from_offset`` inside it, a record
        boundary, when given) and return the end of the valid records."""
        files = self.queue.files
        if not files:
            return RecoveryResult(0, 0, 0, None)
        idx = start_index
        start_offset = files[idx].file_from_offset
        pos = 0 if from_offset is None else from_offset - start_offset
        while True:
            mf = files[idx]
            base = mf.file_from_offset
            # a reader's later scans map the pages again: the walk's pages leave RSS as it goes
            done = (lambda a, b, base=base: self._release_pages(base + a, base + b)) if self.read_only else None
            process, stop, error = valid_end(mf.mm, base, pos, mf.file_size, check_crc=check_crc, done=done)
            nxt, process, error = self._walk_step(idx, stop, process, error)
            if nxt is None:
                return RecoveryResult(process, start_offset, 0, error)
            idx, pos = nxt, 0

    def _walk_step(self, idx: int, stop: str, stop_offset: int, error: str | None) -> tuple[int | None, int, str | None]:
        """Recovery's rule once the walk of segment ``idx`` stopped (``stop`` at global
        ``stop_offset``): ``(next segment to walk, None, None)``, or ``(None, valid end, why the
        records end there)``.  An end-of-segment blank leads on to the next segment when it follows
        without a gap; the blank of the last segment makes the whole segment valid."""
        files = self.queue.files
        if stop == STOP_BLANK:
            mf = files[idx]
            if idx + 1 < len(files) and files[idx + 1].file_from_offset == mf.end_offset:
                return idx + 1, files[idx + 1].file_from_offset, None
            return None, (mf.end_offset if idx + 1 >= len(files) else stop_offset), None
        return None, stop_offset, error

    # ------------------------------------------------------------------ the valid end, settled later
    def defer_valid_end(self, start_index: int, *, check_crc: bool) -> None:
        """Read-only opens: leave recovery's walk (:meth:`find_valid_end` from segment
        ``start_index``) for later.  Until it is settled the segments read as written to their end
        (as loaded); the first whole-log :meth:`scan` settles it on its way, or
        :meth:`settle_valid_end` walks for it."""
        if not self.read_only:
            raise ValueError("only a read-only CommitLog defers its valid end")
        if self.queue.files:
            self._pending_end = (start_index, check_crc)

    def settle_valid_end(self) -> RecoveryResult:
        """The valid end of a CommitLog whose open deferred it (walked now unless a scan found it)."""
        with self._end_lock:
            if self._settled is None:
                pending = self._pending_end
                if pending is None:
                    raise ValueError("the CommitLog's valid end was not deferred")
                self._settle(self.find_valid_end(pending[0], check_crc=pending[1]))
            assert self._settled is not None
            return self._settled

    def _settle(self, res: RecoveryResult) -> None:
        """(Under ``_end_lock``) the records end at ``res.process_offset``: the positions of a recovered reader."""
        if self._settled is None:
            self.queue.set_positions(res.process_offset)
            self._settled = res
            self._pending_end = None

    def _scan_walked(self, start: int, pending: tuple[int, bool], check_crc: bool, max_records: int | None,
                     skip_length_mismatch: bool, keys: bool, columns: bool = True) -> Iterator[DispatchBatch]:
        """:meth:`scan` of the whole log that is also recovery's walk (``pending``: its first
        segment and CRC rule).  The segments before the walk's are scanned as always; from there
        each is scanned to its end with the walk's rules too (no skipping of length mismatches;
        the body CRCs when the walk checks them): the scan then stops exactly where the walk's
        :func:`valid_end` does (the twins' contract), and :meth:`_walk_step` decides what
        follows.  A record the walk rejects ends the log silently, as a scan bounded by the
        settled end would (``STOP_END``); one only the caller's own CRC check rejects is reported
        (``STOP_INVALID``) and the walk goes on past it for the end."""
        walk_idx, walk_crc = pending
        files = list(self.queue.files)
        walk_from = files[walk_idx].file_from_offset
        offset = max(start, self.min_offset)
        while True:
            mf = self.queue.find(offset)
            if mf is None:  # (a gap before the walk's segments: nothing more to read)
                return
            base = mf.file_from_offset
            if base < walk_from:
                batch = scan_segment(mf.mm, base, offset - base, mf.wrote_position, check_crc=check_crc,
                                     max_records=max_records, skip_length_mismatch=skip_length_mismatch, keys=keys,
                                     **({} if columns else {"columns": False}))
                yield batch
                nxt_offset = self._after_batch(batch)
                if nxt_offset is None:
                    return
                offset = nxt_offset
                continue
            idx = files.index(mf)
            batch = scan_segment(mf.mm, base, offset - base, mf.file_size, check_crc=check_crc or walk_crc,
                                 max_records=max_records, skip_length_mismatch=False, keys=keys,
                                 **({} if columns else {"columns": False}))
            if batch.stop == STOP_LIMIT:
                yield batch
                offset = batch.next_offset
                continue
            if batch.stop == STOP_INVALID and check_crc and not walk_crc:
                # stricter than the walk: does the walk take the record the CRC rejected?
                res = self.find_valid_end(idx, check_crc=False, from_offset=batch.next_offset)
                if res.process_offset != batch.next_offset:
                    with self._end_lock:
                        self._settle(RecoveryResult(res.process_offset, walk_from, 0, res.error))
                    yield batch  # a real problem of the scan, inside the valid records
                    return
                nxt, vend, error = None, res.process_offset, res.error
            else:
                nxt, vend, error = self._walk_step(idx, batch.stop, batch.next_offset, batch.error)
            if nxt is not None:
                yield batch
                offset = files[nxt].file_from_offset
                continue
            with self._end_lock:
                self._settle(RecoveryResult(vend, walk_from, 0, error))
            if vend == batch.next_offset and batch.stop != STOP_END:
                # the scan of the settled log ends here at the end of its range
                batch.stop, batch.error = STOP_END, None
            if len(batch) or mf is not files[-1]:  # (as that scan: an empty batch unless at the log's end)
                yield batch
            return

    def truncate_dirty(self, offset: int) -> int:
        """Drop everything at and beyond ``offset``: later segments are deleted and the rest of
        the segment holding it is zeroed (so stale bytes can never be mistaken for records).
        Returns the number of bytes that were dropped from written segments."""
        dropped = 0
        self._seg_plan = None
        for mf in self.queue.files:
            if mf.file_from_offset > offset:
                dropped += _used_bytes(mf, 0)
            elif mf.file_from_offset <= offset < mf.end_offset:
                pos = offset - mf.file_from_offset
                dropped += _used_bytes(mf, pos)
                if not self.read_only and dropped:
                    zero_range(mf, pos, mf.file_size)
        self.queue.truncate_dirty(offset)
        if self.queue.files and self.queue.files[-1].end_offset == offset:
            self.queue.files[-1].wrote_position = self.file_size
        return dropped

    # ------------------------------------------------------------------ flush / retention
    def flush(self, least_pages: int = 0) -> int:
        return self.queue.flush(least_pages)

    def delete_expired_by_time(self, expired_before_ms: int, *, max_files: int = 10) -> int:
        """Delete whole segments (never the last) whose files were last modified before the
        given time, oldest first, stopping at the first one that is not expired."""
        victims: list[MappedFile] = []
        for mf in self.queue.files[:-1]:
            if len(victims) >= max_files:
                break
            if int(mf.path.stat().st_mtime * 1000) < expired_before_ms:
                victims.append(mf)
            else:
                break
        self._seg_plan = None
        return self.queue.delete_files(victims)

    def close(self) -> None:
        self._seg_plan = None
        self.queue.close()


class _OneAhead:
    """``next(it, None)`` on a worker thread, one call ahead of the caller: :meth:`ask` starts a
    call, :meth:`result` waits for it (and raises what it raised).  Leaving the ``with`` block
    waits for a call still running and ends the thread.  (What a one-worker ``ThreadPoolExecutor``
    did for :meth:`CommitLog.scan_bounded`, without importing ``concurrent.futures`` and
    ``logging``: ~10 ms of a one-shot command.)"""

    def __init__(self, it: Iterator[Any], name: str) -> None:
        self._it = it
        self._asked, self._done = threading.Semaphore(0), threading.Semaphore(0)
        self._value: Any = None
        self._error: BaseException | None = None
        self._pending = self._closing = False
        self._thread = threading.Thread(target=self._run, name=name, daemon=True)
        self._thread.start()

    def _run(self) -> None:
        while True:
            self._asked.acquire()
            if self._closing:
                return
            try:
                self._value, self._error = next(self._it, None), None
            except BaseException as exc:  # (handed to the caller by result)
                self._value, self._error = None, exc
            self._done.release()

    def ask(self) -> None:
        self._pending = True
        self._asked.release()

    def result(self) -> Any:
        self._done.acquire()
        self._pending = False
        value, error = self._value, self._error
        self._value = self._error = None
        if error is not None:
            raise error
        return value

    def __enter__(self) -> _OneAhead:
        return self

    def __exit__(self, *exc: object) -> None:
        if self._pending:
            self._done.acquire()
            self._pending = False
        self._closing = True
        self._asked.release()
        self._thread.join()


class EncodeAt:  # typing helper (a callable protocol)
    def __call__(self, i: int, physical_offset: int) -> bytes: ...


class EncodeInto:  # typing helper (a callable protocol)
    def __call__(self, out: np.ndarray, pos: int, lo: int, hi: int, physical_offsets: np.ndarray) -> int: ...


def publish(mf: MappedFile, pos: int, data: bytes | bytearray | np.ndarray) -> None:
    """Write records at the write position of a CommitLog segment so that a kill at any moment
    leaves either all of their first record or none of it: everything but the first record's
    4-byte TOTALSIZE first, that field last (the bytes beyond the write position are zero, and
    recovery ends the log at a zero TOTALSIZE and zeroes what follows).  Without it a kill inside
    the copy could leave a record whose header and body (so its body CRC) are in place and whose
    topic or properties are not, which recovery would take for a valid record.  Records after
    the first may be written before the call; the same rule then holds for the whole batch."""
    n = len(data)
    if n < 4:
        raise CorruptDataError(f"a record of {n} bytes", path=str(mf.path))
    view = memoryview(data) if not isinstance(data, np.ndarray) else data
    mf.write_at(pos + 4, view[4:])
    mf.write_at(pos, bytes(view[:4]))
    mf.wrote_position = pos + n


def _used_bytes(mf: MappedFile, pos: int) -> int:
    """Bytes from ``pos`` up to the last non-zero byte of the segment (torn or stale data)."""
    nz = np.flatnonzero(mf.array[pos:])
    del_ = int(nz[-1]) + 1 if len(nz) else 0
    return del_


def _fallocate_punch(fd: int, offset: int, length: int) -> bool:
    fn = libc_function("fallocate", (ctypes.c_int, ctypes.c_int, ctypes.c_long, ctypes.c_long))
    # FALLOC_FL_KEEP_SIZE | FALLOC_FL_PUNCH_HOLE
    return fn is not None and fn(fd, 0x01 | 0x02, offset, length) == 0


def zero_range(mf: MappedFile, start: int, end: int) -> None:
    """Make ``[start, end)`` of a segment read as zeros (hole punching where possible)."""
    if end <= start:
        return
    page = 4096
    a = -(-start // page) * page
    # zero the partial first page by hand
    head_end = min(a, end)
    if head_end > start:
        mf.mm[start:head_end] = bytes(head_end - start)
    if a >= end:
        return
    fd = os.open(mf.path, os.O_RDWR)
    try:
        if _fallocate_punch(fd, a, end - a):
            return
    finally:
        os.close(fd)
    arr = mf.array
    chunk = 1 << 20
    for s in range(a, end, chunk):
        e = min(end, s + chunk)
        if np.any(arr[s:e]):
            mf.mm[s:e] = bytes(e - s)
