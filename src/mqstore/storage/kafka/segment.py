"""One Kafka log segment: ``<base>.log`` + lazy ``.index``/``.timeindex`` (spec §4).

Durability of a segment: :meth:`LogSegment.append` writes with ``pwrite`` (in the page cache at
once: it survives a crash of the process, not of the OS); :meth:`LogSegment.flush` fsyncs the
``.log`` and msyncs both indexes; :meth:`LogSegment.close` and a roll
(:meth:`on_become_inactive_segment` followed by ``flush``) do the same after writing the final
time-index entry and trimming the indexes.
"""

from __future__ import annotations

import os
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, NamedTuple

import numpy as np

from mqstore.errors import (
    CorruptDataError,
    CorruptIndexError,
    IndexFullError,
    InvalidArgumentError,
    OffsetOverflowError,
    ReadOnlyStoreError,
    StoreNotFoundError,
)
from mqstore.formats.kafka.batch import (
    HEADER_SIZE_UP_TO_MAGIC,
    RECORD_BATCH_OVERHEAD,
    BatchRef,
    Record,
    decode_batch_header,
    decode_legacy_message,
    iter_legacy_records,
    iter_records,
    peek_batch,
    validate_batch,
)
from mqstore.formats.kafka.index_entry import OffsetPosition, TimestampOffset
from mqstore.formats.kafka.keyindex import check_header_name
from mqstore.kernels.kafka.batches import scan_batches
from mqstore.storage.kafka.index import OffsetIndex, TimeIndex
from mqstore.storage.kafka.keyindex import (
    INITIAL_ITEMS,
    KeyEntries,
    KeyIndex,
    KeyIndexReader,
    key_entries,
    log_entries,
    rebuild_keyindex,
)
from mqstore.storage.kafka.layout import (
    INDEX_SUFFIX,
    KEYINDEX_SUFFIX,
    LOG_SUFFIX,
    SEGMENT_SUFFIXES,
    TIMEINDEX_SUFFIX,
    parse_base_offset,
    segment_file_name,
)
from mqstore.storage.kafka.rebuild import (
    DEFAULT_INDEX_INTERVAL_BYTES,
    DEFAULT_MAX_INDEX_SIZE,
    MappedLog,
    analyze_log_file,
    atomic_write,
    indexes_of,
)

INT32_MAX = (1 << 31) - 1
LONG_MAX = (1 << 63) - 1
_SCAN_MAPPED_BYTES = 1 << 20
#: appended bytes the key index takes in one put (see LogSegment._index_pending)
KEY_INDEX_DEFER_BYTES = 1 << 20


def now_ms() -> int:
    return int(time.time() * 1000)


@dataclass(frozen=True)
class LogConfig:
    """Topic configuration that matters to the log layer (Kafka names in comments).

    Flush policy (``flush_interval_messages`` / ``flush_interval_ms``): ``None`` means "never by
    count/time" (Kafka's default: rely on replication and the OS); ``1`` makes every append durable
    before it returns.
    """

    segment_bytes: int = 1024 * 1024 * 1024  # segment.bytes
    segment_ms: int = 7 * 24 * 3600 * 1000  # segment.ms
    segment_jitter_ms: int = 0  # segment.jitter.ms (the random jitter actually used, 0 = none)
    max_index_size: int = DEFAULT_MAX_INDEX_SIZE  # segment.index.bytes
    index_interval_bytes: int = DEFAULT_INDEX_INTERVAL_BYTES  # index.interval.bytes
    retention_bytes: int = -1  # retention.bytes (−1 = unlimited)
    retention_ms: int = 7 * 24 * 3600 * 1000  # retention.ms (−1 = unlimited)
    flush_interval_messages: int | None = None  # flush.messages
    flush_interval_ms: int | None = None  # flush.ms
    validate_appends: bool = True  # check size/CRC of every batch handed to PartitionLog.append
    # mqstore's key index (docs/formats/kafka-keyindex.md), off by default: a <base>.keyindex per
    # segment built from the record keys (and the values of the header ``key_header``)
    key_index: bool = False
    key_header: str | None = None
    key_index_slots: int | None = None  # fixed hash slot count (tests, tuning); default: one per entry

    def __post_init__(self) -> None:
        if self.segment_bytes < 14:
            raise InvalidArgumentError(f"segment_bytes must be ≥ 14, got {self.segment_bytes}")
        if self.segment_ms < 1:
            raise InvalidArgumentError(f"segment_ms must be ≥ 1, got {self.segment_ms}")
        if self.segment_jitter_ms < 0:
            raise InvalidArgumentError(f"segment_jitter_ms must be ≥ 0, got {self.segment_jitter_ms}")
        if self.max_index_size < 12:
            raise InvalidArgumentError(
                f"max_index_size must be ≥ 12 (room for one time-index entry), got {self.max_index_size}")
        if self.index_interval_bytes < 0:
            raise InvalidArgumentError(f"index_interval_bytes must be ≥ 0, got {self.index_interval_bytes}")
        if (self.key_header is not None or self.key_index_slots is not None) and not self.key_index:
            raise InvalidArgumentError("key_header and key_index_slots need key_index=True")
        check_header_name(self.key_header)
        if self.key_index_slots is not None and not 0 < self.key_index_slots <= 100_000_000:
            raise InvalidArgumentError(f"key_index_slots must be in [1, 10**8], got {self.key_index_slots}")
        for name in ("flush_interval_messages", "flush_interval_ms"):
            v = getattr(self, name)
            if v is not None and v < 1:
                raise InvalidArgumentError(f"{name} must be ≥ 1 or None, got {v}")

    @classmethod
    def from_properties(cls, props: dict[str, str | int]) -> LogConfig:
        """Build from Kafka topic config names (``segment.bytes`` ...)."""
        names = {
            "segment.bytes": "segment_bytes", "segment.ms": "segment_ms", "segment.jitter.ms": "segment_jitter_ms",
            "segment.index.bytes": "max_index_size", "index.interval.bytes": "index_interval_bytes",
            "retention.bytes": "retention_bytes", "retention.ms": "retention_ms",
            "flush.messages": "flush_interval_messages", "flush.ms": "flush_interval_ms",
        }
        kwargs = {}
        for k, v in props.items():
            if k not in names:
                raise InvalidArgumentError(f"unsupported topic config {k!r}")
            try:
                kwargs[names[k]] = int(v)
            except (TypeError, ValueError):
                raise InvalidArgumentError(f"topic config {k} must be an integer, got {v!r}") from None
        return cls(**kwargs)


class LogOffsetPosition(NamedTuple):
    """Answer of ``translate_offset``: the batch's LAST offset, its position and size."""

    offset: int
    position: int
    size: int


class LogOffsetMetadata(NamedTuple):
    message_offset: int
    segment_base_offset: int
    relative_position_in_segment: int


class TimestampAndOffset(NamedTuple):
    """Answer of offset-for-timestamp: the record's timestamp, offset and leader epoch (or None)."""

    timestamp: int
    offset: int
    leader_epoch: int | None


@dataclass(frozen=True)
class FetchDataInfo:
    """Answer of ``read``: where the fetch starts and the raw batch bytes."""

    offset_metadata: LogOffsetMetadata
    records: bytes
    first_entry_incomplete: bool = False
    # read_committed reads only: the aborted transactions overlapping the returned batches
    # (Kafka's FetchResponse abortedTransactions), else None
    aborted_transactions: list[Any] | None = None

    @property
    def position(self) -> int:
        return self.offset_metadata.relative_position_in_segment

    @property
    def size(self) -> int:
        return len(self.records)


@dataclass
class RollParams:
    max_segment_ms: int
    max_segment_bytes: int
    max_timestamp_in_messages: int
    max_offset_in_messages: int
    messages_size: int
    now: int = field(default_factory=now_ms)


class LogSegment:
    """A segment: the ``.log`` file and its two sparse indexes (created lazily on first use).

    Open an existing one with :meth:`open` (read-only by default), create one with :meth:`create`.
    Indexes opened by a segment stop at the zero padding of an untrimmed file (Kafka's own loader
    would trust the length; see docs/kafka.md).
    """

    def __init__(self, log_path: Path, base_offset: int, config: LogConfig, *, read_only: bool,
                 create: bool = False) -> None:
        self.log_path = Path(log_path)
        self.base_offset = base_offset
        self.config = config
        self.read_only = read_only
        flags = os.O_RDONLY if read_only else os.O_RDWR | (os.O_CREAT if create else 0)
        try:
            self._fd = os.open(self.log_path, flags, 0o644)
        except FileNotFoundError:
            raise StoreNotFoundError("segment log file not found", path=str(self.log_path)) from None
        self._size = os.fstat(self._fd).st_size
        self._offset_index: OffsetIndex | None = None
        self._time_index: TimeIndex | None = None
        self._key_index: KeyIndex | None = None  # the live key index of a writable segment
        self._key_reader: KeyIndexReader | None = None  # a read-only one, for lookups
        self._key_pending: int | None = None  # where the appended bytes not yet in the key index start
        self.bytes_since_last_index_entry = 0
        self._max_ts_and_offset: TimestampOffset | None = None  # None = not loaded yet
        self._rolling_based_timestamp: int | None = None
        self.created_ms = now_ms()

    # ------------------------------------------------------------------ construction
    @classmethod
    def open(cls, path: str | os.PathLike[str], config: LogConfig | None = None, *,
             read_only: bool = True) -> LogSegment:
        """Open the segment whose ``.log`` is ``path`` (base offset from the file name)."""
        p = Path(path)
        if p.suffix != LOG_SUFFIX:
            raise InvalidArgumentError("a segment is opened through its .log file", path=str(p))
        if not p.is_file():
            raise StoreNotFoundError("segment log file not found", path=str(p))
        return cls(p, parse_base_offset(p), config or LogConfig(), read_only=read_only)

    @classmethod
    def create(cls, directory: str | os.PathLike[str], base_offset: int, config: LogConfig | None = None) -> LogSegment:
        """Create a new empty writable segment, deleting stale files with the same name first."""
        d = Path(directory)
        for suffix in SEGMENT_SUFFIXES:
            (d / segment_file_name(base_offset, suffix)).unlink(missing_ok=True)
        return cls(d / segment_file_name(base_offset, LOG_SUFFIX), base_offset, config or LogConfig(),
                   read_only=False, create=True)

    @property
    def offset_index_path(self) -> Path:
        return self.log_path.with_suffix(INDEX_SUFFIX)

    @property
    def time_index_path(self) -> Path:
        return self.log_path.with_suffix(TIMEINDEX_SUFFIX)

    @property
    def key_index_path(self) -> Path:
        return self.log_path.with_suffix(KEYINDEX_SUFFIX)

    # ------------------------------------------------------------------ key index
    def _rebuild_key_index(self, entries: KeyEntries | None = None) -> KeyIndex:
        """Build the live key index from the ``.log`` (or ``entries``) and map it."""
        self._drop_key_index()
        c = self.config
        if entries is None:
            entries, _ = log_entries(self.log_path, header_name=c.key_header, valid_bytes=self._size)
        self._key_index = KeyIndex.create(self.key_index_path, entries, header_name=c.key_header,
                                          slots=c.key_index_slots, capacity=max(INITIAL_ITEMS, 2 * len(entries)))
        return self._key_index

    def live_key_index(self) -> KeyIndex:
        """The key index appends put into: the existing file if it is sound and indexes the
        configured header, else rebuilt from the ``.log``."""
        self._require_writable()
        if self._key_index is not None:
            return self._key_index
        c = self.config
        if self.key_index_path.exists():
            try:
                k = KeyIndex.open_existing(self.key_index_path, header_name=c.key_header, slots=c.key_index_slots)
                if self._key_index_sane(k):
                    self._key_index = k
                    return k
                k.close()
            except CorruptIndexError:
                pass
        return self._rebuild_key_index()

    def _key_index_sane(self, k: KeyIndex) -> bool:
        """Cheap check of a key index trusted after a clean shutdown: its last item lies inside
        the ``.log`` and a fixed slot count matches the configuration."""
        if self.config.key_index_slots is not None and k.trailer is not None \
                and k.trailer.hash_slot_num != self.config.key_index_slots:
            return False
        if k.count == 0:
            return True
        e, _ = k.stored()
        pos = int(e.location[-1]) & 0xFFFFFFFF
        return pos < self._size

    def ensure_key_index(self, *, live: bool) -> None:
        """With ``key_index`` on, make sure a sound key index exists: mapped for appends
        (``live``, the active segment), else checked cheaply and rebuilt from the ``.log`` when
        missing, damaged or built for another header or slot count."""
        c = self.config
        if not c.key_index or self.read_only:
            return
        if live:
            self.live_key_index()
            return
        try:
            with KeyIndexReader(self.key_index_path) as r:
                t = r.parsed.trailer
                last = r.last_location()
                ok = (t.header_name == c.key_header
                      and (c.key_index_slots is None or t.hash_slot_num == c.key_index_slots)
                      and (last is None or (last & 0xFFFFFFFF) < self._size))
        except (StoreNotFoundError, CorruptIndexError):
            ok = False
        if not ok:
            self._drop_key_index()
            rebuild_keyindex(self.log_path, header_name=c.key_header, slots=c.key_index_slots, lock=False)

    def key_lookup(self, hashes: np.ndarray) -> tuple[np.ndarray, np.ndarray, str | None] | None:
        """Candidate locations of key hashes from the key index (``(locations, splits, indexed
        header)``), or ``None`` when the segment has no key index."""
        if self._key_index is not None:
            self._index_pending()
            loc, sp = self._key_index.candidates(hashes)
            return loc, sp, self._key_index.header_name
        if self._key_reader is None:
            if not self.key_index_path.exists():
                return None
            self._key_reader = KeyIndexReader(self.key_index_path)
        loc, sp = self._key_reader.candidates(hashes)
        return loc, sp, self._key_reader.header_name

    def _index_pending(self) -> None:
        """Put the keys of the batches appended since the last put into the key index: appends
        are indexed in groups of about :data:`KEY_INDEX_DEFER_BYTES` (one compiled pass instead
        of one per append), and before any flush, roll, close or lookup.  A crash in between is
        an unclean shutdown, after which recovery rebuilds the key index anyway."""
        start = self._key_pending
        self._key_pending = None
        if start is None or self._key_index is None or start >= self._size:
            return
        data = self.read_bytes(start, self._size - start)
        mv = memoryview(data)
        cols = scan_batches(mv, 0)
        self._key_index.append(key_entries(mv, cols, cols["count"], self.base_offset, shift=start,
                                           header_name=self.config.key_header, path=str(self.log_path)))

    def _drop_key_index(self) -> None:
        self._key_pending = None
        for k in (self._key_index, self._key_reader):
            if k is not None:
                k.close()
        self._key_index = None
        self._key_reader = None

    def _key_index_after_change(self) -> None:
        """After recovery or truncation changed the ``.log``: rebuild the key index (option on)
        or delete the stale one (option off)."""
        self._drop_key_index()
        if self.config.key_index:
            self._rebuild_key_index()
        else:
            self.key_index_path.unlink(missing_ok=True)

    @property
    def offset_index(self) -> OffsetIndex:
        """The offset index (opened, or created and preallocated, on first use)."""
        if self._offset_index is None:
            self._offset_index = OffsetIndex(self.offset_index_path, self.base_offset, self.config.max_index_size,
                                             writable=not self.read_only, stop_at_padding=True)
        return self._offset_index

    @property
    def time_index(self) -> TimeIndex:
        """The time index (opened, or created and preallocated, on first use)."""
        if self._time_index is None:
            self._time_index = TimeIndex(self.time_index_path, self.base_offset, self.config.max_index_size,
                                         writable=not self.read_only, stop_at_padding=True)
        return self._time_index

    @property
    def size(self) -> int:
        """Bytes in the ``.log``."""
        return self._size

    def _require_writable(self) -> None:
        if self.read_only:
            raise ReadOnlyStoreError("segment is open read-only", path=str(self.log_path))
        if self._fd < 0:
            raise ReadOnlyStoreError("segment is closed", path=str(self.log_path))

    # ------------------------------------------------------------------ raw file access
    def read_bytes(self, position: int, length: int) -> bytes:
        if length <= 0:
            return b""
        if position < 0 or position > self._size:  # e.g. a corrupt index entry pointed here
            raise CorruptIndexError(f"read at position {position} outside the segment of {self._size} bytes",
                                    path=str(self.log_path), offset=position)
        return os.pread(self._fd, length, position)

    def batches(self, start_position: int = 0) -> Iterator[BatchRef]:
        """Batch headers from ``start_position`` (spec §2.4 walk over the file)."""
        pos = start_position
        end = self._size
        if pos < 0:  # from a corrupt index entry
            raise CorruptIndexError(f"index points at position {pos} of the segment", path=str(self.log_path),
                                    offset=pos)
        while True:
            if pos >= end - HEADER_SIZE_UP_TO_MAGIC:
                return
            hdr = os.pread(self._fd, RECORD_BATCH_OVERHEAD, pos)
            ref = peek_batch(hdr, 0, end - pos, path=str(self.log_path))
            if ref is None:
                return
            ref = BatchRef(pos, ref.size, ref.magic, ref.base_offset, ref.last_offset, ref.max_timestamp)
            yield ref
            pos += ref.size

    def records_of(self, ref: BatchRef) -> tuple[list[Record], int | None]:
        """Decoded records of a batch plus its partition leader epoch (None if −1 / legacy)."""
        data = self.read_bytes(ref.position, ref.size)
        where = str(self.log_path)
        if ref.magic >= 2:
            h = decode_batch_header(data, 0, path=where)
            try:
                validate_batch(data, h, path=where)  # a reader never hands out a corrupt batch
                recs = list(iter_records(data, h, path=where))
            except CorruptDataError as exc:
                raise type(exc)(exc.message, path=where, offset=ref.position) from None
            epoch = h.partition_leader_epoch
            return recs, (None if epoch == -1 else epoch)
        msg = decode_legacy_message(data, 0, path=where)
        return list(iter_legacy_records(msg, path=where)), None

    # ------------------------------------------------------------------ max timestamp state (§4.4)
    def _load_max_ts(self) -> TimestampOffset:
        if self._max_ts_and_offset is None:
            if self.read_only:
                # Offline the time index may be missing, a live broker's preallocated file (its
                # last entries only in the broker's memory) or cut short: the last entry is then
                # below the segment's real maximum.  Kafka would have rebuilt or kept it in memory;
                # read-only, the batches after the last indexed entry give the same maximum
                # (a few KiB to scan when the index is sound, the whole segment when it is missing).
                self._load_largest_timestamp()
            else:
                self._max_ts_and_offset = self.time_index.last_entry
        assert self._max_ts_and_offset is not None
        return self._max_ts_and_offset

    @property
    def max_timestamp_so_far(self) -> int:
        return self._load_max_ts().timestamp

    @property
    def offset_of_max_timestamp_so_far(self) -> int:
        return self._load_max_ts().offset

    @property
    def largest_timestamp(self) -> int:
        """Max timestamp so far if ≥ 0, else the ``.log`` modification time (ms)."""
        ts = self.max_timestamp_so_far
        return ts if ts >= 0 else int(os.fstat(self._fd).st_mtime * 1000)

    @property
    def largest_record_timestamp(self) -> int | None:
        ts = self.max_timestamp_so_far
        return ts if ts >= 0 else None

    def _load_largest_timestamp(self) -> None:
        last = self.time_index.last_entry
        self._max_ts_and_offset = last
        pos = self._index_position(last.offset)
        best_ts, best_off = -1, -1
        if self._size - pos > _SCAN_MAPPED_BYTES:  # long tail (index missing or sparse): compiled header walk
            with MappedLog(self.log_path) as ml:
                scan = scan_batches(ml.mm, pos)
                if scan["count"]:
                    i = int(np.argmax(scan["max_timestamp"]))  # first batch holding the maximum
                    best_ts, best_off = int(scan["max_timestamp"][i]), int(scan["last_offset"][i])
                del scan
        else:
            for ref in self.batches(pos):
                if ref.max_timestamp > best_ts:
                    best_ts, best_off = ref.max_timestamp, ref.last_offset
        if best_ts > last.timestamp:
            self._max_ts_and_offset = TimestampOffset(best_ts, best_off)

    # ------------------------------------------------------------------ append (§4.1)
    def can_convert_to_relative_offset(self, offset: int) -> bool:
        return 0 <= offset - self.base_offset <= INT32_MAX

    def append(self, largest_offset: int, largest_timestamp: int, shallow_offset_of_max_timestamp: int,
               records: bytes | bytearray | memoryview) -> None:
        """Append a message set (one or more whole batches) exactly as Kafka's ``LogSegment.append``
        (with ``key_index`` on, its keys go into the key index, see :meth:`_index_pending`)."""
        self._require_writable()
        n = len(records)
        if n == 0:
            return
        position = self._size
        if position == 0:
            self._rolling_based_timestamp = largest_timestamp
        if not self.can_convert_to_relative_offset(largest_offset):
            raise OffsetOverflowError(
                f"detected offset overflow at offset {largest_offset} in segment with base offset {self.base_offset}",
                path=str(self.log_path))
        if self.config.key_index:
            self.live_key_index()
            if self._key_pending is None:
                self._key_pending = position
        written = 0
        mv = memoryview(records)
        while written < n:
            written += os.pwrite(self._fd, mv[written:], position + written)
        self._size = position + n
        if self._key_pending is not None and self._size - self._key_pending >= KEY_INDEX_DEFER_BYTES:
            self._index_pending()
        if largest_timestamp > self.max_timestamp_so_far:
            self._max_ts_and_offset = TimestampOffset(largest_timestamp, shallow_offset_of_max_timestamp)
        if self.bytes_since_last_index_entry > self.config.index_interval_bytes:
            self.offset_index.append(largest_offset, position)
            self.time_index.maybe_append(self.max_timestamp_so_far, self.offset_of_max_timestamp_so_far)
            self.bytes_since_last_index_entry = 0
        self.bytes_since_last_index_entry += n

    # ------------------------------------------------------------------ lookups (§4.2, §4.3)
    def _index_position(self, offset: int) -> int:
        """The offset index's position hint for ``offset``; 0 (scan from the start) when the entry
        points past the end of the ``.log`` (a stale or damaged index Kafka would have rebuilt)."""
        pos = self.offset_index.lookup(offset).position
        return pos if 0 <= pos <= self._size else 0

    def translate_offset(self, offset: int, starting_position: int = 0) -> LogOffsetPosition | None:
        """First batch (from the index hint) whose last offset ≥ ``offset``: ``(last_offset, position, size)``."""
        for ref in self.batches(max(self._index_position(offset), starting_position)):
            if ref.last_offset >= offset:
                return LogOffsetPosition(ref.last_offset, ref.position, ref.size)
        return None

    def read(self, start_offset: int, max_size: int, min_one_message: bool = False, *,
             max_position: int | None = None) -> FetchDataInfo | None:
        """Batches starting with the one holding ``start_offset``; ``None`` past the segment's data."""
        if max_size < 0:
            raise InvalidArgumentError(f"invalid max size {max_size} for log read from segment {self.log_path}")
        t = self.translate_offset(start_offset)
        if t is None:
            return None
        meta = LogOffsetMetadata(start_offset, self.base_offset, t.position)
        adjusted = max(max_size, t.size) if min_one_message else max_size
        max_pos = self._size if max_position is None else max_position
        if adjusted == 0:
            return FetchDataInfo(meta, b"")
        fetch = min(max_pos - t.position, adjusted)
        fetch = max(0, min(fetch, self._size - t.position))
        return FetchDataInfo(meta, self.read_bytes(t.position, fetch), adjusted < t.size)

    def fetch_upper_bound_offset(self, start_position: OffsetPosition | int, fetch_size: int) -> OffsetPosition | None:
        return self.offset_index.fetch_upper_bound_offset(start_position, fetch_size)

    def find_offset_by_timestamp(self, timestamp: int, starting_offset: int | None = None) -> TimestampAndOffset | None:
        """First record with timestamp ≥ ``timestamp`` and offset ≥ ``starting_offset`` (default base)."""
        start = self.base_offset if starting_offset is None else starting_offset
        te = self.time_index.lookup(timestamp)
        pos = self._index_position(max(te.offset, start))
        for ref in self.batches(pos):
            if ref.max_timestamp >= timestamp:
                recs, epoch = self.records_of(ref)
                for r in recs:
                    if r.timestamp >= timestamp and r.offset >= start:
                        return TimestampAndOffset(r.timestamp, r.offset, epoch)
        return None

    def read_next_offset(self) -> int:
        """Next offset after the last batch, or the base offset when empty."""
        last = None
        for ref in self.batches(self.offset_index.lookup(self.offset_index.last_offset).position):
            last = ref
        return self.base_offset if last is None else last.last_offset + 1

    def lookup_many(self, offsets: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Vectorised offset-index lookups (``(offsets, positions)`` arrays)."""
        return self.offset_index.lookup_many(offsets)

    def time_lookup_many(self, timestamps: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Vectorised time-index lookups (``(timestamps, offsets)`` arrays)."""
        return self.time_index.lookup_many(timestamps)

    # ------------------------------------------------------------------ recovery (§4.5)
    def recover(self) -> int:
        """Validate every batch, rebuild both indexes, cut the invalid tail; return bytes cut."""
        self._require_writable()
        interval = self.config.index_interval_bytes
        size = os.fstat(self._fd).st_size
        try:  # one pread pass: header walk and checksums together (no mapping, no page faults)
            analysis = analyze_log_file(self._fd, size)
        except CorruptDataError as exc:
            raise type(exc)(exc.message, path=str(self.log_path), offset=exc.offset) from None
        while True:
            try:
                oi, ti = indexes_of(analysis, self.base_offset, index_interval_bytes=interval,
                                    max_index_size=self.config.max_index_size, path=str(self.log_path))
                break
            except IndexFullError:
                # Appends after a reopen index less densely than the recovery rule, so a valid
                # segment can hold more entries than fit: index it more sparsely (still exact,
                # just more scanning) rather than refuse to open the log.
                if interval >= size:
                    raise
                interval = min(max(2 * interval, 64), size)
        truncated = analysis.truncated_bytes
        if truncated:
            os.ftruncate(self._fd, analysis.valid_bytes)
            self._size = analysis.valid_bytes
        for attr, path, data in (("_offset_index", self.offset_index_path, oi),
                                 ("_time_index", self.time_index_path, ti)):
            idx = getattr(self, attr)
            if idx is not None:
                idx.close()
                setattr(self, attr, None)
            atomic_write(path, data, fsync=False)
        if self.config.key_index:
            entries, _ = log_entries(self.log_path, header_name=self.config.key_header,
                                     valid_bytes=analysis.valid_bytes)
            self._rebuild_key_index(entries)
        else:
            self._key_index_after_change()
        n = analysis.n_valid
        if n:
            mts = analysis.scan["max_timestamp"][:n]
            i = int(np.argmax(mts))
            self._max_ts_and_offset = (TimestampOffset(int(mts[i]), int(analysis.scan["last_offset"][i]))
                                       if mts[i] >= 0 else TimestampOffset(-1, -1))
        else:
            self._max_ts_and_offset = TimestampOffset(-1, -1)
        self.last_recovery_error = analysis.error
        return truncated

    # ------------------------------------------------------------------ truncation (§4.6)
    def truncate_to(self, offset: int) -> int:
        """Remove every batch holding offsets ≥ ``offset`` (at batch granularity); return bytes cut."""
        self._require_writable()
        mapping = self.translate_offset(offset)
        self.offset_index.truncate_to(offset)
        self.time_index.truncate_to(offset)
        self.offset_index.resize(self.config.max_index_size)
        self.time_index.resize(self.config.max_index_size)
        cut = 0
        if mapping is not None:
            cut = self._size - mapping.position
            os.ftruncate(self._fd, mapping.position)
            self._size = mapping.position
        if cut or self._key_index is not None or self.key_index_path.exists():
            self._key_index_after_change()
        if self._size == 0:
            self.created_ms = now_ms()
            self._rolling_based_timestamp = None
        self.bytes_since_last_index_entry = 0
        if self.max_timestamp_so_far >= 0:
            self._load_largest_timestamp()
        return cut

    # ------------------------------------------------------------------ roll (§1.3, §4.6)
    def _first_batch_timestamp(self) -> int | None:
        if self._rolling_based_timestamp is None and self._size > 0:
            for ref in self.batches(0):
                self._rolling_based_timestamp = ref.max_timestamp
                break
        return self._rolling_based_timestamp

    def get_first_batch_timestamp(self) -> int:
        ts = self._first_batch_timestamp()
        return LONG_MAX if self._size == 0 or ts is None else ts

    def time_waited_for_roll(self, now: int, max_timestamp_in_messages: int) -> int:
        first = self._first_batch_timestamp()
        if first is not None and first >= 0:
            return max_timestamp_in_messages - first
        return now - self.created_ms

    def should_roll(self, p: RollParams) -> bool:
        reached_time = self.time_waited_for_roll(p.now, p.max_timestamp_in_messages) > p.max_segment_ms - self.config.segment_jitter_ms
        return (self._size > p.max_segment_bytes - p.messages_size
                or (self._size > 0 and reached_time)
                or self.offset_index.is_full()
                or self.time_index.is_full()
                or not self.can_convert_to_relative_offset(p.max_offset_in_messages))

    def on_become_inactive_segment(self) -> None:
        """Roll: write the final time-index entry and trim both indexes."""
        self._require_writable()
        self.time_index.maybe_append(self.max_timestamp_so_far, self.offset_of_max_timestamp_so_far,
                                     skip_full_check=True)
        self.offset_index.trim_to_valid_size()
        self.time_index.trim_to_valid_size()
        if self._key_index is not None:
            self._index_pending()
            self._key_index.compact()

    def resize_indexes(self, size: int) -> None:
        self.offset_index.resize(size)
        self.time_index.resize(size)

    def sanity_check(self) -> None:
        """Both indexes' sanity checks (spec §3.10)."""
        self.offset_index.sanity_check()
        self.time_index.sanity_check()

    # ------------------------------------------------------------------ durability / lifecycle
    def flush(self) -> None:
        """fsync the ``.log`` and msync both indexes: everything appended so far is durable."""
        if self.read_only or self._fd < 0:
            return
        os.fsync(self._fd)
        if self._offset_index is not None:
            self._offset_index.flush()
        if self._time_index is not None:
            self._time_index.flush()
        if self._key_index is not None:
            self._index_pending()
            self._key_index.flush()

    def close(self) -> None:
        """Final time entry (if the max timestamp was ever known), trim indexes, fsync, close."""
        if self._fd < 0:
            return
        if not self.read_only:
            if self._max_ts_and_offset is not None:
                self.time_index.maybe_append(self._max_ts_and_offset.timestamp, self._max_ts_and_offset.offset,
                                             skip_full_check=True)
            if self._key_index is not None:
                self._index_pending()
                self._key_index.compact()
            self.flush()
        for idx in (self._offset_index, self._time_index):
            if idx is not None:
                idx.close()
        self._drop_key_index()
        os.close(self._fd)
        self._fd = -1

    def close_handlers(self) -> None:
        """Close without writing anything (used before deleting files)."""
        self._drop_key_index()
        for idx in (self._offset_index, self._time_index):
            if idx is not None:
                idx._unmap()
                if idx._fd >= 0:
                    os.close(idx._fd)
                    idx._fd = -1
        if self._fd >= 0:
            os.close(self._fd)
            self._fd = -1

    def delete(self) -> None:
        """Close and remove the files (``.log`` first, so a crash leaves only stray indexes)."""
        self.close_handlers()
        self.log_path.unlink(missing_ok=True)
        for p in (self.offset_index_path, self.time_index_path, self.log_path.with_suffix(".txnindex"),
                  self.key_index_path):
            p.unlink(missing_ok=True)

    @property
    def closed(self) -> bool:
        return self._fd < 0

    def __enter__(self) -> LogSegment:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __repr__(self) -> str:
        return f"LogSegment(base_offset={self.base_offset}, size={self._size}, path={str(self.log_path)!r})"
