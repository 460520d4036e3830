"""The sparse time index of one ConsumeQueue file (``<cq file name>.timeindex``), pure codecs.

An mqstore sidecar, never read by a broker (layout: ``docs/formats/rocketmq-timeindex.md``).  A
16-byte header, then fixed 16-byte entries, all big endian::

    header  int   magic            0x4D515449 ("MQTI")
            short version          1
            short reserved         0
            int   interval         N: an entry every N units of the ConsumeQueue file
            int   unitsPerFile     units of a ConsumeQueue file (its size / 20)
    entry   long  storeTimestamp   store time (ms) of the message of the unit
            long  queueOffset      the unit's queue offset (logical offset / 20)

Entries are in queue-offset order, one for each unit of the ConsumeQueue file whose index in the
file is a multiple of ``interval`` and that points at a message (blank pre-fill units have none).
Pure bytes in / out.
"""

from __future__ import annotations

import struct
from typing import NamedTuple

import numpy as np

from mqstore.errors import CorruptIndexError, InvalidArgumentError, TruncatedRecordError

MAGIC = 0x4D515449
VERSION = 1
HEADER_SIZE = 16
ENTRY_SIZE = 16
#: one entry every 2 units: the unknown stretch between two entries is one unit, so an exact
#: lookup reads at most one CommitLog record (one page); see docs/formats/rocketmq-timeindex.md
DEFAULT_INTERVAL = 2
MAX_INTERVAL = 1 << 20
SUFFIX = ".timeindex"

_HEADER = struct.Struct(">ihhii")
_ENTRY = struct.Struct(">qq")
assert _HEADER.size == HEADER_SIZE and _ENTRY.size == ENTRY_SIZE

#: numpy dtype of the entries, for zero-copy views of a whole file
ENTRY_DTYPE = np.dtype([("store_timestamp", ">i8"), ("queue_offset", ">i8")])
assert ENTRY_DTYPE.itemsize == ENTRY_SIZE


class TimeIndexHeader(NamedTuple):
    interval: int
    units_per_file: int

    def encode(self) -> bytes:
        check_interval(self.interval)
        if self.units_per_file < 1:
            raise InvalidArgumentError(f"units per ConsumeQueue file must be positive, not {self.units_per_file}")
        return _HEADER.pack(MAGIC, VERSION, 0, self.interval, self.units_per_file)

    @classmethod
    def decode(cls, buf: bytes | bytearray | memoryview) -> TimeIndexHeader:
        if len(buf) < HEADER_SIZE:
            raise TruncatedRecordError(f"time index header needs {HEADER_SIZE} bytes, got {len(buf)}")
        magic, version, _reserved, interval, units = _HEADER.unpack_from(buf, 0)
        if magic != MAGIC:
            raise CorruptIndexError(f"not a time index: magic {magic & 0xFFFFFFFF:#010x} (expected {MAGIC:#010x})")
        if version != VERSION:
            raise CorruptIndexError(f"time index version {version} is not supported (expected {VERSION})")
        if not 1 <= interval <= MAX_INTERVAL or units < 1:
            raise CorruptIndexError(f"time index header: interval {interval}, units per file {units}")
        return cls(int(interval), int(units))


def check_interval(interval: object) -> int:
    """A valid entry interval (units between two entries), else :class:`InvalidArgumentError`."""
    if type(interval) is not int or not 1 <= interval <= MAX_INTERVAL:
        raise InvalidArgumentError(f"time index interval must be an integer in 1..{MAX_INTERVAL}, not {interval!r}")
    return interval


def encode_entry(store_timestamp: int, queue_offset: int) -> bytes:
    return _ENTRY.pack(store_timestamp, queue_offset)


def decode_entry(buf: bytes | bytearray | memoryview, pos: int) -> tuple[int, int]:
    """``(store_timestamp, queue_offset)`` of the entry at byte ``pos``."""
    if pos < 0 or pos + ENTRY_SIZE > len(buf):
        raise TruncatedRecordError(f"no whole time index entry at position {pos} of {len(buf)} bytes", offset=pos)
    ts, qo = _ENTRY.unpack_from(buf, pos)
    return int(ts), int(qo)


def encode_entries(store_timestamps: np.ndarray, queue_offsets: np.ndarray) -> bytes:
    """Many entries, back to back."""
    if len(store_timestamps) != len(queue_offsets):
        raise InvalidArgumentError("as many store timestamps as queue offsets are needed")
    arr = np.empty(len(queue_offsets), dtype=ENTRY_DTYPE)
    arr["store_timestamp"] = store_timestamps
    arr["queue_offset"] = queue_offsets
    return arr.tobytes()


def entries_view(buf: bytes | bytearray | memoryview) -> np.ndarray:
    """The whole entries after the header (a torn last entry is left out), zero-copy."""
    n = max(0, (len(buf) - HEADER_SIZE) // ENTRY_SIZE)
    return np.frombuffer(buf, dtype=ENTRY_DTYPE, count=n, offset=HEADER_SIZE) if n else np.empty(0, ENTRY_DTYPE)


def grid_positions(first: int, end: int, interval: int) -> np.ndarray:
    """File-relative unit indexes in ``[first, end)`` that get an entry (multiples of ``interval``)."""
    start = -(-first // interval) * interval
    return np.arange(start, max(start, end), interval, dtype=np.int64)


def check_entries(header: TimeIndexHeader, file_first_queue_offset: int, entries: np.ndarray) -> str | None:
    """Structural problems of the entries of one file (``None``: none): queue offsets inside the
    ConsumeQueue file, on the grid, strictly ascending; store timestamps non-decreasing."""
    if not len(entries):
        return None
    qo = entries["queue_offset"].astype(np.int64)
    rel = qo - file_first_queue_offset
    if int(rel.min()) < 0 or int(rel.max()) >= header.units_per_file:
        return f"queue offset outside the ConsumeQueue file (units {file_first_queue_offset}..)"
    if bool((rel % header.interval).any()):
        return f"queue offset not a multiple of the interval {header.interval} in its file"
    if len(qo) > 1 and not bool((np.diff(qo) > 0).all()):
        return "queue offsets not strictly ascending"
    ts = entries["store_timestamp"].astype(np.int64)
    if len(ts) > 1 and not bool((np.diff(ts) >= 0).all()):
        return "store timestamps decrease"
    return None
