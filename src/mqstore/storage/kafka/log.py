"""A Kafka partition directory as an embedded log (spec §1, §4.7).

Durability promise (what survives a crash, when):

* ``append`` writes batches into the active segment with ``pwrite``: they are in the OS page cache
  when ``append`` returns, so they survive a crash **of the process** (``kill -9``), but not a
  crash of the machine, unless they were flushed;
* ``flush()`` — called automatically when ``flush_interval_messages`` offsets or
  ``flush_interval_ms`` milliseconds are pending, on every roll, and by ``close()`` — fsyncs every
  segment from the recovery point on, then durably advances the recovery point (checkpoint file
  written to a temporary name, fsynced, renamed, directory fsynced).  Everything below the recovery
  point survives any crash;
* ``close()`` also writes the final time-index entries, trims the indexes and writes the
  clean-shutdown marker.  After a clean shutdown the files are trusted as they are; after an
  unclean one, every segment from the one holding the recovery point to the end is re-validated
  (CRC) and its indexes are rebuilt; an invalid or torn tail is cut and later segments are dropped
  (Kafka's rule).

Files: Kafka's layout (``<20-digit base>.log/.index/.timeindex``).  Unlike a broker, which keeps
``recovery-point-offset-checkpoint`` and ``.kafka_cleanshutdown`` once per log directory, mqstore
keeps both **inside the partition directory** (same formats), so partitions are independent.
"""

from __future__ import annotations

import bisect
import json
import os
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from mqstore.errors import (
    CorruptDataError,
    FlushError,
    InvalidArgumentError,
    MqStoreError,
    OffsetOutOfRangeError,
    ReadOnlyStoreError,
    StoreClosedError,
    StoreError,
    StoreNotFoundError,
)
from mqstore.formats.kafka.batch import Record, SimpleRecord, encode_batch, peek_batch, set_base_offset
from mqstore.formats.kafka.compression import Compression
from mqstore.formats.kafka.txn import AbortedTxn
from mqstore.kernels.kafka.batches import STOP_END, check_crcs, scan_batches
from mqstore.storage.kafka.key_query import KeyMatch, KeyQueryStats, query_segments
from mqstore.storage.kafka.layout import (
    ALL_INDEX_SUFFIXES,
    KEYINDEX_SUFFIX,
    log_files,
    parse_base_offset,
    segment_file_name,
    segment_files,
    segment_logs,
    topic_partition_of,
)
from mqstore.storage.kafka.segment import (
    FetchDataInfo,
    LogConfig,
    LogOffsetMetadata,
    LogOffsetPosition,
    LogSegment,
    RollParams,
    TimestampAndOffset,
    now_ms,
)
from mqstore.storage.kafka.txn import (
    TxnState,
    check_isolation,
    expected_txn_indexes,
    partition_txn_columns,
    txn_state_of,
)
from mqstore.storage.locks import PartitionLock
from mqstore.storage.mapped import ensure_inside

CLEAN_SHUTDOWN_FILE = ".kafka_cleanshutdown"
RECOVERY_POINT_FILE = "recovery-point-offset-checkpoint"
EARLIEST_TIMESTAMP = -2
LATEST_TIMESTAMP = -1
MAX_TIMESTAMP = -3
INT32_MAX = (1 << 31) - 1


@dataclass(frozen=True)
class LogAppendInfo:
    """What an append did."""

    first_offset: int
    last_offset: int
    max_timestamp: int
    shallow_offset_of_max_timestamp: int
    batches: int
    size: int
    segment_base_offset: int
    position: int


@dataclass(frozen=True)
class OffsetLookup:
    """Answer of :meth:`PartitionLog.lookup_offset`: the segment and the batch holding an offset."""

    segment: int  # segment base offset
    segment_path: str
    offset: int  # the batch's last offset (Kafka translate-offset)
    position: int
    size: int


@dataclass(frozen=True)
class TimestampLookup:
    """Answer of :meth:`PartitionLog.lookup_timestamp`."""

    segment: int
    segment_path: str
    offset: int
    timestamp: int
    leader_epoch: int | None


@contextmanager
def _typed_io_errors(path: Path) -> Iterator[None]:
    """A failed write or fsync (disk full, EIO) is a :class:`FlushError`: what was being appended
    or flushed is not acknowledged; the log stays usable once the fault clears."""
    try:
        yield
    except MqStoreError:
        raise
    except OSError as exc:
        raise FlushError(f"write or fsync failed: {exc.strerror or exc}", path=str(path)) from exc


def _fsync_dir(path: Path) -> None:
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def _analyze_append(data: memoryview, path: str, validate: bool) -> dict[str, Any]:
    scan = scan_batches(data, 0)
    if scan["count"] == 0 or scan["stop_reason"] != STOP_END or scan["valid_end"] != len(data):
        raise CorruptDataError(
            f"appended data is not a sequence of whole record batches (parsed {scan['valid_end']} of {len(data)} bytes)",
            path=path)
    if validate:
        ok = check_crcs(data, scan)
        if not ok.all():
            i = int(np.nonzero(~ok)[0][0])
            raise CorruptDataError("appended record batch fails its size/CRC check", path=path,
                                   offset=int(scan["position"][i]))
    if (scan["magic"] < 2).any():
        raise InvalidArgumentError("only magic 2 record batches can be appended", path=path)
    return scan


class PartitionLog:
    """A partition's segments, with roll, recovery, retention and truncation (``UnifiedLog``/``LocalLog``)."""

    def __init__(self, directory: Path, config: LogConfig, read_only: bool) -> None:
        self.dir = directory
        self.config = config
        self.read_only = read_only
        self.topic, self.partition = topic_partition_of(directory)
        self._segments: list[LogSegment] = []
        self._bases: list[int] = []
        self._closed = False
        self.recovery_point = 0
        self.had_clean_shutdown = False
        self.log_start_offset = 0
        self.log_end_offset = 0
        self.recovered_segments: list[int] = []
        self.deleted_files: list[str] = []
        self._last_flush_ms = now_ms()
        self._lock: PartitionLock | None = None
        self._txn_cache: tuple[Any, TxnState] | None = None
        self._aborted_cache: tuple[Any, list[AbortedTxn]] | None = None

    # ------------------------------------------------------------------ open / load (§4.7)
    @classmethod
    def open(cls, path: str | os.PathLike[str], config: LogConfig | None = None, *, read_only: bool = False,
             create: bool = True) -> PartitionLog:
        """Open (or create) a partition directory.

        Writable (default): takes the partition's writer lock (a second writer, in this process or
        another, gets :class:`StoreLockedError`), settles temporary files, deletes stray index
        files, recovers after an unclean shutdown, creates the first segment if there is none.
        ``read_only=True`` takes no lock and changes nothing on disk (no recovery, indexes trusted
        up to their zero padding).
        """
        d = Path(path)
        if not d.exists():
            if read_only or not create:
                raise StoreNotFoundError("partition directory not found", path=str(d))
            d.mkdir(parents=True)
        if not d.is_dir():
            raise InvalidArgumentError("not a partition directory", path=str(d))
        log = cls(d, config or LogConfig(), read_only)
        if not read_only:
            log._lock = PartitionLock(d)
        try:
            log._load()
        except BaseException:
            log._release_lock()
            raise
        return log

    def _release_lock(self) -> None:
        if self._lock is not None:
            self._lock.release()
            self._lock = None

    def _load(self) -> None:
        d = self.dir
        rw = not self.read_only
        marker = d / CLEAN_SHUTDOWN_FILE
        self.had_clean_shutdown = marker.exists()
        if rw and self.had_clean_shutdown:
            # Before loading changes a file: a crash during the load is an unclean shutdown.
            marker.unlink()
            _fsync_dir(d)
        if rw:
            for f in sorted(d.iterdir()):
                name = f.name
                if name.endswith((".deleted", ".cleaned")):
                    f.unlink(missing_ok=True)
                    self.deleted_files.append(name)
                elif name.endswith(".swap"):
                    os.replace(f, d / name[: -len(".swap")])
                elif name.endswith(".tmp") and KEYINDEX_SUFFIX + "." in name:
                    f.unlink(missing_ok=True)  # a key index rewrite (growth, compaction) a crash interrupted
                    self.deleted_files.append(name)
        logs: dict[int, Path] = {}
        needs_recovery: set[int] = set()
        for f in sorted(d.iterdir()):
            if f.is_symlink():  # a segment or index linked elsewhere would make appends write there
                ensure_inside(d, f)
        for f in log_files(d):
            logs[parse_base_offset(f)] = f
        for f in segment_files(d, ALL_INDEX_SUFFIXES):
            if parse_base_offset(f) not in logs and rw:
                f.unlink()
                self.deleted_files.append(f.name)
        for base in sorted(logs):
            seg = LogSegment(logs[base], base, self.config, read_only=self.read_only)
            if not seg.offset_index_path.exists() or not seg.time_index_path.exists():
                needs_recovery.add(base)
            self._add_segment(seg)
        self.recovery_point = self._read_recovery_point()
        if not rw and not self._segments:
            raise StoreNotFoundError("no .log segment files in partition directory", path=str(d))
        if rw:
            try:
                self._recover(needs_recovery)
            except BaseException:
                for s in self._segments:
                    s.close_handlers()
                raise
            if not self._segments:
                self._add_segment(LogSegment.create(d, self.recovery_point if self.recovery_point > 0 else 0,
                                                    self.config))
            self.active_segment.resize_indexes(self.config.max_index_size)
            self._settle_key_indexes()
        self.log_start_offset = self._segments[0].base_offset if self._segments else 0
        self.log_end_offset = self._segments[-1].read_next_offset() if self._segments else 0
        if rw:
            if self.had_clean_shutdown:
                self.recovery_point = self.log_end_offset
            else:
                self.recovery_point = min(self.recovery_point, self.log_end_offset)
            self._write_recovery_point()
            _fsync_dir(d)

    def _settle_key_indexes(self) -> None:
        """``key_index`` on: every segment gets a sound key index (recovered ones were rebuilt,
        the others are checked and rebuilt when missing or damaged), the active one mapped for
        appends.  Off: the active segment's key index, which appends would leave stale, goes."""
        if self.config.key_index:
            for seg in self._segments:
                seg.ensure_key_index(live=seg is self.active_segment)
        else:
            self.active_segment.key_index_path.unlink(missing_ok=True)

    def _recover(self, needs_recovery: set[int]) -> None:
        start_idx = len(self._segments)
        if not self.had_clean_shutdown and self._segments:
            i = bisect.bisect_right(self._bases, self.recovery_point) - 1
            start_idx = max(i, 0)
        to_recover = set(self._bases[start_idx:]) | needs_recovery
        i = 0
        while i < len(self._segments):
            seg = self._segments[i]
            if seg.base_offset in to_recover:
                truncated = seg.recover()
                self.recovered_segments.append(seg.base_offset)
                if truncated > 0:
                    for later in self._segments[i + 1 :]:
                        later.delete()
                        self.deleted_files.append(later.log_path.name)
                    del self._segments[i + 1 :]
                    del self._bases[i + 1 :]
                    break
            i += 1

    def _add_segment(self, seg: LogSegment) -> None:
        self._segments.append(seg)
        self._bases.append(seg.base_offset)

    # ------------------------------------------------------------------ checkpoint files
    def _read_recovery_point(self) -> int:
        p = self.dir / RECOVERY_POINT_FILE
        if not p.exists():
            return 0
        try:
            lines = p.read_text().split("\n")
            if lines[0].strip() != "0":
                raise ValueError("unknown version")
            n = int(lines[1])
            for line in lines[2 : 2 + n]:
                topic, part, off = line.rsplit(" ", 2)
                if topic == self.topic and int(part) == self.partition:
                    return int(off)
            return 0
        except (ValueError, IndexError):
            raise CorruptDataError("malformed recovery-point checkpoint", path=str(p)) from None

    def _write_recovery_point(self) -> None:
        p = self.dir / RECOVERY_POINT_FILE
        tmp = p.with_name(p.name + ".tmp")
        with open(tmp, "w") as f:
            f.write(f"0\n1\n{self.topic} {self.partition} {self.recovery_point}\n")
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, p)

    # ------------------------------------------------------------------ properties
    @property
    def segments(self) -> list[LogSegment]:
        return list(self._segments)

    @property
    def active_segment(self) -> LogSegment:
        return self._segments[-1]

    @property
    def size_in_bytes(self) -> int:
        return sum(s.size for s in self._segments)

    def _check_open(self) -> None:
        if self._closed:
            raise StoreClosedError("partition log is closed", path=str(self.dir))

    def _check_writable(self) -> None:
        self._check_open()
        if self.read_only:
            raise ReadOnlyStoreError("partition log is open read-only", path=str(self.dir))

    def floor_segment(self, offset: int) -> LogSegment | None:
        i = bisect.bisect_right(self._bases, offset) - 1
        return self._segments[i] if i >= 0 else None

    # ------------------------------------------------------------------ append / roll (§1.3)
    def append(self, records: bytes | bytearray | memoryview, *, assign_offsets: bool = True,
               leader_epoch: int | None = None, now: int | None = None) -> LogAppendInfo:
        """Append whole v2 batches.

        ``assign_offsets=True`` (leader): base offsets are rewritten to follow the log end offset
        (outside the CRC, so the batches stay valid).  ``False`` (follower/replica): offsets are
        kept and must start at or after the log end offset and increase.
        """
        self._check_writable()
        buf = bytearray(records)
        mv = memoryview(buf)
        scan = _analyze_append(mv, str(self.dir), self.config.validate_appends)
        n = scan["count"]
        if assign_offsets:
            nxt = self.log_end_offset
            for i in range(n):
                p = int(scan["position"][i])
                delta = int(scan["last_offset"][i] - scan["base_offset"][i])
                set_base_offset(mv[p : p + 12 + 4 + 1], nxt, leader_epoch)
                scan["base_offset"][i] = nxt
                scan["last_offset"][i] = nxt + delta
                nxt += delta + 1
        else:
            prev = self.log_end_offset - 1
            for i in range(n):
                if scan["base_offset"][i] <= prev or scan["last_offset"][i] < scan["base_offset"][i]:
                    raise InvalidArgumentError(
                        f"out of order offsets: batch base offset {int(scan['base_offset'][i])} after offset {prev}",
                        path=str(self.dir), offset=int(scan["position"][i]))
                prev = int(scan["last_offset"][i])
            if leader_epoch is not None:
                for i in range(n):
                    p = int(scan["position"][i])
                    set_base_offset(mv[p : p + 17], int(scan["base_offset"][i]), leader_epoch)
        max_ts = -1
        shallow = -1
        for i in range(n):
            if scan["max_timestamp"][i] > max_ts:
                max_ts = int(scan["max_timestamp"][i])
                shallow = int(scan["last_offset"][i])
        first = int(scan["base_offset"][0])
        last = int(scan["last_offset"][n - 1])
        t = now_ms() if now is None else now
        with _typed_io_errors(self.dir):
            seg = self._maybe_roll(len(buf), first, last, max_ts, t)
            position = seg.size
            seg.append(last, max_ts, shallow, mv)
            self.log_end_offset = last + 1
            info = LogAppendInfo(first, last, max_ts, shallow, n, len(buf), seg.base_offset, position)
            self._maybe_flush(t)
        return info

    def append_records(self, records: Sequence[SimpleRecord | bytes], *, compression: int = Compression.NONE,
                       timestamp: int | None = None, leader_epoch: int = 0, now: int | None = None) -> LogAppendInfo:
        """Convenience: build one batch from ``records`` and append it as the leader would.
        Records without a timestamp get ``timestamp`` (default: now)."""
        ts = now_ms() if timestamp is None else timestamp
        recs = [r if isinstance(r, SimpleRecord) else SimpleRecord(value=bytes(r)) for r in records]
        if not recs:
            raise InvalidArgumentError("nothing to append")
        recs = [r if r.timestamp is not None else SimpleRecord(r.value, r.key, r.headers, ts, r.offset_delta)
                for r in recs]
        batch = encode_batch(recs, base_offset=self.log_end_offset, compression=compression,
                             partition_leader_epoch=leader_epoch)
        return self.append(batch, assign_offsets=True, leader_epoch=leader_epoch, now=now)

    def _maybe_roll(self, size: int, first: int, last: int, max_ts: int, now: int) -> LogSegment:
        seg = self.active_segment
        params = RollParams(self.config.segment_ms, self.config.segment_bytes, max_ts, last, size, now)
        if seg.should_roll(params):
            return self.roll(max(first, self.log_end_offset), now=now)
        return seg

    def roll(self, new_base: int | None = None, *, now: int | None = None) -> LogSegment:
        """Close the active segment for appends (final time entry, trim, fsync) and start a new one."""
        self._check_writable()
        base = self.log_end_offset if new_base is None else max(new_base, self.log_end_offset)
        active = self.active_segment
        if base in self._bases:
            if active.base_offset == base and active.size == 0:
                active.delete()
                self._segments.pop()
                self._bases.pop()
            else:
                raise StoreError(f"trying to roll a new segment at {base} while it already exists", path=str(self.dir))
        else:
            active.on_become_inactive_segment()
            active.flush()
        seg = LogSegment.create(self.dir, base, self.config)
        if now is not None:
            seg.created_ms = now
        self._add_segment(seg)
        # the old segments are durable now: advance the recovery point
        if self.recovery_point < base:
            self._flush_to(base)
        return seg

    # ------------------------------------------------------------------ flush
    def _maybe_flush(self, now: int) -> None:
        c = self.config
        if c.flush_interval_messages is not None and self.log_end_offset - self.recovery_point >= c.flush_interval_messages:
            self.flush()
        elif c.flush_interval_ms is not None and now - self._last_flush_ms >= c.flush_interval_ms:
            self.flush()

    def _flush_to(self, offset: int) -> None:
        i = max(bisect.bisect_right(self._bases, self.recovery_point) - 1, 0)
        for seg in self._segments[i:]:
            if seg.base_offset >= offset:
                break
            seg.flush()
        if offset > self.recovery_point:
            self.recovery_point = offset
            self._write_recovery_point()
        self._last_flush_ms = now_ms()

    def flush(self) -> None:
        """Make every appended batch durable (fsync) and advance the recovery point to the log end."""
        self._check_writable()
        i = max(bisect.bisect_right(self._bases, self.recovery_point) - 1, 0)
        with _typed_io_errors(self.dir):
            for seg in self._segments[i:]:
                seg.flush()
            self.recovery_point = self.log_end_offset
            self._write_recovery_point()
        self._last_flush_ms = now_ms()

    # ------------------------------------------------------------------ reads
    def read(self, start_offset: int, max_size: int, min_one_message: bool = False, *,
             isolation: str = "read_uncommitted") -> FetchDataInfo:
        """Raw batches from the one holding ``start_offset`` (may start below it), across segments.

        ``start_offset == log_end_offset`` gives empty records; outside
        ``[log_start_offset, log_end_offset]`` raises :class:`OffsetOutOfRangeError`.

        ``isolation="read_committed"`` reads as the broker serves a ``read_committed`` fetch: only
        whole batches below the last stable offset, and ``aborted_transactions`` lists the aborted
        transactions (:class:`~mqstore.formats.kafka.txn.AbortedTxn`) overlapping them, which the
        consumer uses to drop aborted records (:meth:`iter_records` does that filtering).
        """
        self._check_open()
        committed = check_isolation(isolation)
        if start_offset < self.log_start_offset or start_offset > self.log_end_offset:
            raise OffsetOutOfRangeError(
                f"offset {start_offset} is outside the log range [{self.log_start_offset}, {self.log_end_offset}]",
                path=str(self.dir))
        res = self._read_raw(start_offset, max_size, min_one_message)
        if not committed:
            return res
        state = self.txn_state()
        lso = state.last_stable_offset
        data = res.records
        cut = 0
        pos = 0
        while pos < len(data):
            ref = peek_batch(data, pos, len(data))
            if ref is None or ref.base_offset >= lso:
                break
            pos += ref.size
            cut = pos
        data = data[:cut]
        upper = self._next_offset_after(data, start_offset)
        aborted = [t for t in self._aborted_txns() if t.last_offset >= start_offset and t.first_offset < upper]
        return FetchDataInfo(res.offset_metadata, data, res.first_entry_incomplete, aborted)

    @staticmethod
    def _next_offset_after(data: bytes, default: int) -> int:
        nxt = default
        pos = 0
        while pos < len(data):
            ref = peek_batch(data, pos, len(data))
            if ref is None:
                break
            nxt = ref.last_offset + 1
            pos += ref.size
        return nxt

    def _read_raw(self, start_offset: int, max_size: int, min_one_message: bool) -> FetchDataInfo:
        i = max(bisect.bisect_right(self._bases, start_offset) - 1, 0)
        for seg in self._segments[i:]:
            res = seg.read(start_offset, max_size, min_one_message)
            if res is not None:
                return res
        active = self.active_segment
        return FetchDataInfo(LogOffsetMetadata(start_offset, active.base_offset, active.size), b"")

    def txn_state(self) -> TxnState:
        """The transaction state of the whole log (cached until the log end moves): last stable
        offset (offline, high watermark = log end) and the ranges a ``read_committed`` consumer skips."""
        key = (self.log_end_offset, len(self._segments), self._segments[0].base_offset if self._segments else -1)
        cached = self._txn_cache
        if cached is not None and cached[0] == key:
            return cached[1]
        cols = partition_txn_columns(self.dir, logs=[s.log_path for s in self._segments])
        state = txn_state_of(cols, self.log_start_offset)
        self._txn_cache = (key, state)
        self._aborted_cache = None
        return state

    def _aborted_txns(self) -> list[AbortedTxn]:
        state = self.txn_state()
        cached = self._aborted_cache
        if cached is not None and cached[0] is state:
            return cached[1]
        per_seg = expected_txn_indexes(self.dir, state.columns)
        txns = [t for b in sorted(per_seg) for t in per_seg[b]]
        self._aborted_cache = (state, txns)
        return txns

    def last_stable_offset(self) -> int:
        """The first offset of the earliest open transaction, else the log end offset."""
        self._check_open()
        return self.txn_state().last_stable_offset

    def iter_records(self, start_offset: int | None = None, end_offset: int | None = None, *,
                     isolation: str = "read_uncommitted") -> Iterator[Record]:
        """Every record with ``start_offset ≤ offset < end_offset`` (control records included).

        ``isolation="read_committed"`` yields what a ``read_committed`` consumer receives: no
        control records, no records of aborted transactions, nothing at or past the last stable
        offset (a transaction still open at the log end hides everything after its first offset).
        """
        self._check_open()
        committed = check_isolation(isolation)
        lo = self.log_start_offset if start_offset is None else start_offset
        hi = self.log_end_offset if end_offset is None else end_offset
        state = self.txn_state() if committed else None
        if state is not None:
            hi = min(hi, state.last_stable_offset)
        i = max(bisect.bisect_right(self._bases, lo) - 1, 0)
        for seg in self._segments[i:]:
            if seg.base_offset >= hi:
                return
            t = seg.translate_offset(lo)
            if t is None:
                continue
            for ref in seg.batches(t.position):
                if ref.last_offset < lo:
                    continue
                if state is not None and ref.base_offset < hi and not state.is_visible(ref.base_offset):
                    continue  # a control batch or an aborted transaction's batch: skipped whole
                recs, _ = seg.records_of(ref)
                for r in recs:
                    if r.offset >= hi:
                        return
                    if r.offset >= lo:
                        yield r

    def lookup_offset(self, offset: int) -> OffsetLookup | None:
        """The segment and batch holding ``offset`` (Kafka translate-offset), ``None`` if beyond the data."""
        self._check_open()
        if offset < 0:
            raise InvalidArgumentError(f"offset must be ≥ 0, got {offset}")
        i = max(bisect.bisect_right(self._bases, offset) - 1, 0)
        for seg in self._segments[i:]:
            t: LogOffsetPosition | None = seg.translate_offset(offset)
            if t is not None:
                return OffsetLookup(seg.base_offset, str(seg.log_path), t.offset, t.position, t.size)
        return None

    def offset_for_timestamp(self, timestamp: int) -> TimestampAndOffset | None:
        """Kafka's ``fetchOffsetByTimestamp``: the earliest record with timestamp ≥ ``timestamp``.

        Special targets: −2 earliest (log start offset), −1 latest (log end offset), −3 the record
        with the max timestamp (its batch's last offset, as the time index stores it).
        """
        r = self.lookup_timestamp(timestamp)
        return None if r is None else TimestampAndOffset(r.timestamp, r.offset, r.leader_epoch)

    def lookup_timestamp(self, timestamp: int) -> TimestampLookup | None:
        self._check_open()
        if timestamp == EARLIEST_TIMESTAMP:
            s = self._segments[0]
            return TimestampLookup(s.base_offset, str(s.log_path), self.log_start_offset, -1, None)
        if timestamp == LATEST_TIMESTAMP:
            s = self.active_segment
            return TimestampLookup(s.base_offset, str(s.log_path), self.log_end_offset, -1, None)
        if timestamp == MAX_TIMESTAMP:
            best = None
            for s in self._segments:
                if s.max_timestamp_so_far >= 0 and (best is None or s.max_timestamp_so_far > best.max_timestamp_so_far):
                    best = s
            if best is None:
                return None
            return TimestampLookup(best.base_offset, str(best.log_path), best.offset_of_max_timestamp_so_far,
                                   best.max_timestamp_so_far, None)
        if timestamp < 0:
            raise InvalidArgumentError(f"invalid timestamp {timestamp} (use ≥ 0, or −1/−2/−3)")
        for s in self._segments:
            if s.largest_record_timestamp is None or s.largest_record_timestamp < timestamp:
                continue
            r = s.find_offset_by_timestamp(timestamp, self.log_start_offset)
            if r is not None:
                return TimestampLookup(s.base_offset, str(s.log_path), r.offset, r.timestamp, r.leader_epoch)
        return None

    # ------------------------------------------------------------------ key lookups (key index)
    def find_keys(self, keys: Sequence[bytes | str], start_ts: int | None = None, end_ts: int | None = None, *,
                  header: str | None = None, use_index: bool = True) -> tuple[list[list[KeyMatch]], KeyQueryStats]:
        """Per key, every record whose key (or, with ``header``, a value of that header) equals it
        and whose timestamp lies in ``[start_ts, end_ts]``, by offset, plus how the answer was
        found.  Exact: the key index gives candidates, the records decide.  Segments without a
        key index are scanned (``stats.scanned_segments``)."""
        self._check_open()
        return query_segments(self._segments, keys, start_ts, end_ts, header=header, use_index=use_index)

    def offsets_for_key(self, key: bytes | str, start_ts: int | None = None, end_ts: int | None = None, *,
                        header: str | None = None) -> list[int]:
        """The offsets of the records with key ``key`` (UTF-8 when a ``str``) and a timestamp in
        ``[start_ts, end_ts]`` (inclusive; ``None``: unbounded), ascending."""
        found, _ = self.find_keys([key], start_ts, end_ts, header=header)
        return [m.offset for m in found[0]]

    def offsets_for_keys(self, keys: Sequence[bytes | str], start_ts: int | None = None,
                         end_ts: int | None = None, *, header: str | None = None) -> list[list[int]]:
        """:meth:`offsets_for_key` of many keys at once (one compiled chain walk per segment)."""
        found, _ = self.find_keys(keys, start_ts, end_ts, header=header)
        return [[m.offset for m in ms] for ms in found]

    # ------------------------------------------------------------------ batch (vectorised) API
    def lookup_offsets_many(self, offsets: Any) -> dict[str, np.ndarray]:
        """Offset-index lookups for many offsets at once: per offset the floor segment's base and
        that segment's ``OffsetIndex.lookup`` answer (``index_offset``, ``position``)."""
        self._check_open()
        t = np.asarray(offsets, dtype=np.int64)
        seg_idx = np.searchsorted(np.asarray(self._bases, np.int64), t, side="right") - 1
        seg_idx = np.maximum(seg_idx, 0)
        out_off = np.empty_like(t)
        out_pos = np.empty_like(t)
        for k in np.unique(seg_idx):
            sel = seg_idx == k
            o, p = self._segments[int(k)].offset_index.lookup_many(t[sel])
            out_off[sel] = o
            out_pos[sel] = p
        return {"segment": np.asarray(self._bases, np.int64)[seg_idx], "index_offset": out_off, "position": out_pos}

    def lookup_timestamps_many(self, timestamps: Any) -> dict[str, np.ndarray]:
        """Time-index lookups for many timestamps at once: per target the first segment whose
        largest timestamp ≥ target (−1 if none) and that segment's ``TimeIndex.lookup`` answer."""
        self._check_open()
        t = np.asarray(timestamps, dtype=np.int64)
        largest = np.array([s.max_timestamp_so_far for s in self._segments], dtype=np.int64)
        running = np.maximum.accumulate(largest) if largest.size else largest
        seg_idx = np.searchsorted(running, t, side="left")
        found = seg_idx < len(self._segments)
        out_ts = np.full_like(t, -1)
        out_off = np.full_like(t, -1)
        seg_base = np.full_like(t, -1)
        for k in np.unique(seg_idx[found]):
            sel = seg_idx == k
            seg = self._segments[int(k)]
            ts, off = seg.time_index.lookup_many(t[sel])
            out_ts[sel] = ts
            out_off[sel] = off
            seg_base[sel] = seg.base_offset
        return {"segment": seg_base, "index_timestamp": out_ts, "index_offset": out_off}

    # ------------------------------------------------------------------ truncation
    def truncate_to(self, target_offset: int) -> bool:
        """Remove every offset ≥ ``target_offset`` (batch granularity); ``False`` if nothing to do."""
        self._check_writable()
        if target_offset < 0:
            raise InvalidArgumentError(f"cannot truncate to negative offset {target_offset}")
        if target_offset >= self.log_end_offset:
            return False
        if self._bases[0] > target_offset:
            self.truncate_fully_and_start_at(target_offset)
            return True
        while len(self._segments) > 1 and self._bases[-1] > target_offset:
            self._segments.pop().delete()
            self._bases.pop()
        self.active_segment.truncate_to(target_offset)
        self.active_segment.resize_indexes(self.config.max_index_size)
        self.log_end_offset = self.active_segment.read_next_offset()
        self.recovery_point = min(self.recovery_point, self.log_end_offset)
        self._write_recovery_point()
        return True

    def truncate_fully_and_start_at(self, new_offset: int) -> None:
        """Delete every segment and start an empty log at ``new_offset``."""
        self._check_writable()
        for s in self._segments:
            s.delete()
        self._segments.clear()
        self._bases.clear()
        self._add_segment(LogSegment.create(self.dir, new_offset, self.config))
        self.log_start_offset = self.log_end_offset = self.recovery_point = new_offset
        self._write_recovery_point()

    # ------------------------------------------------------------------ retention
    def delete_old_segments(self, now: int | None = None) -> int:
        """Retention by time (``retention_ms``) then by size (``retention_bytes``), oldest first.

        The active segment is only deleted when it is non-empty and expired (a new empty segment is
        rolled first).  Returns the number of segments deleted.
        """
        self._check_writable()
        t = now_ms() if now is None else now
        deleted = 0
        if self.config.retention_ms >= 0:
            deleted += self._delete_while(lambda s, _: t - s.largest_timestamp > self.config.retention_ms)
        if self.config.retention_bytes >= 0:
            state = {"diff": self.size_in_bytes - self.config.retention_bytes}

            def by_size(s: LogSegment, _: int) -> bool:
                if state["diff"] - s.size >= 0:
                    state["diff"] -= s.size
                    return True
                return False

            deleted += self._delete_while(by_size)
        return deleted

    def _delete_while(self, predicate: Any) -> int:
        victims = []
        for i, s in enumerate(self._segments):
            is_active = i == len(self._segments) - 1
            if is_active and s.size == 0:
                break
            if not predicate(s, i):
                break
            victims.append(s)
        if not victims:
            return 0
        if victims[-1] is self.active_segment:
            self.roll()
        for s in victims:
            self._segments.remove(s)
            self._bases.remove(s.base_offset)
            s.delete()
        self.log_start_offset = max(self.log_start_offset, self._segments[0].base_offset)
        self.recovery_point = max(self.recovery_point, self.log_start_offset)
        self._write_recovery_point()
        return len(victims)

    # ------------------------------------------------------------------ lifecycle
    def close(self) -> None:
        """Final time entries, trim, fsync, advance the recovery point, write the clean-shutdown marker."""
        if self._closed:
            return
        try:
            if not self.read_only:
                for s in self._segments:
                    s.close()
                self.recovery_point = self.log_end_offset
                self._write_recovery_point()
                marker = self.dir / CLEAN_SHUTDOWN_FILE
                with open(marker, "w") as f:
                    f.write(json.dumps({"version": 0, "brokerEpoch": -1}))
                    f.flush()
                    os.fsync(f.fileno())
                _fsync_dir(self.dir)
            else:
                for s in self._segments:
                    s.close()
        finally:
            self._closed = True
            self._release_lock()

    def close_handlers(self) -> None:
        """Drop the file handles and the writer lock without flushing, trimming or writing the
        clean-shutdown marker: what a crash leaves behind (fault injection, tests)."""
        try:
            for s in self._segments:
                s.close_handlers()
        finally:
            self._closed = True
            self._release_lock()

    def __enter__(self) -> PartitionLog:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __repr__(self) -> str:
        return (f"PartitionLog({str(self.dir)!r}, segments={len(self._segments)}, "
                f"log_start_offset={self.log_start_offset}, log_end_offset={self.log_end_offset})")


def open_segments_readonly(path: str | os.PathLike[str], config: LogConfig | None = None) -> list[LogSegment]:
    """Read-only segments of a partition directory, or the one segment of a ``.log`` path."""
    return [LogSegment.open(f, config) for f in segment_logs(path)]


__all__ = [
    "CLEAN_SHUTDOWN_FILE",
    "RECOVERY_POINT_FILE",
    "LogAppendInfo",
    "MqStoreError",
    "OffsetLookup",
    "PartitionLog",
    "TimestampLookup",
    "open_segments_readonly",
    "segment_file_name",
]
