"""BatchConsumeQueue units (RocketMQ 5.x, ``queue.type=BatchCQ`` topics) and the compaction
store's sparse queue units: 46 big-endian bytes each.

==========  ====  ======  ==========================================================
field       off   bytes   meaning
==========  ====  ======  ==========================================================
phyOffset   0     8       CommitLog (or compactionLog) offset of the record
size        8     4       TOTALSIZE of that record
tagsCode    12    8       tags hash (as the 20-byte ConsumeQueue)
storeTime   20    8       store timestamp of the record (ms)
msgBaseOffset 28  8       queue offset of the first message the unit covers
batchSize   36    2       number of messages covered (signed short, > 0)
compactedOffset 38 4      -1 as the broker writes it
reserved    42    4       0
==========  ====  ======  ==========================================================

A unit covers queue offsets ``msgBaseOffset .. msgBaseOffset + batchSize - 1``.  Pure bytes
in / out: no I/O here.
"""

from __future__ import annotations

import struct
from typing import NamedTuple

import numpy as np

from mqstore.errors import InvalidArgumentError, TruncatedRecordError

BCQ_UNIT_SIZE = 46
#: the broker's default ``mapperFileSizeBatchConsumeQueue``: 300,000 units
DEFAULT_BCQ_FILE_SIZE = 300_000 * BCQ_UNIT_SIZE
#: the broker's default ``compactionCqMappedFileSize`` (10 MiB) rounded down to whole units
DEFAULT_COMPACTION_CQ_FILE_SIZE = (10 * 1024 * 1024) // BCQ_UNIT_SIZE * BCQ_UNIT_SIZE
#: the broker's default ``compactionMappedFileSize`` (100 MiB): compactionLog segments
DEFAULT_COMPACTION_LOG_FILE_SIZE = 100 * 1024 * 1024
INVALID_COMPACTED_OFFSET = -1
POS_STORE_TIME = 20
POS_MSG_BASE_OFFSET = 28
POS_BATCH_SIZE = 36
POS_COMPACTED_OFFSET = 38

_UNIT = struct.Struct(">qiqqqhii")
assert _UNIT.size == BCQ_UNIT_SIZE

#: numpy record dtype of a unit, for zero-copy views of whole files.
BCQ_DTYPE = np.dtype([("offset", ">i8"), ("size", ">i4"), ("tags_code", ">i8"), ("store_time", ">i8"),
                      ("msg_base_offset", ">i8"), ("batch_size", ">i2"), ("compacted_offset", ">i4"),
                      ("reserved", ">i4")])
assert BCQ_DTYPE.itemsize == BCQ_UNIT_SIZE


class BatchCQUnit(NamedTuple):
    commit_log_offset: int
    size: int
    tags_code: int
    store_time: int
    msg_base_offset: int
    batch_size: int
    compacted_offset: int = INVALID_COMPACTED_OFFSET
    reserved: int = 0

    @property
    def is_valid(self) -> bool:
        """The broker's recovery rule: offset >= 0, size > 0, msgBaseOffset >= 0, batchSize > 0."""
        return self.commit_log_offset >= 0 and self.size > 0 and self.msg_base_offset >= 0 and self.batch_size > 0

    @property
    def next_offset(self) -> int:
        """The first queue offset after this unit."""
        return self.msg_base_offset + self.batch_size

    def covers(self, queue_offset: int) -> bool:
        return self.msg_base_offset <= queue_offset < self.next_offset


def bcq_file_size(configured: int) -> int:
    """A configured size rounded down to whole 46-byte units (as the compaction store does)."""
    if configured < BCQ_UNIT_SIZE:
        raise InvalidArgumentError(f"batch queue file size {configured} is smaller than one {BCQ_UNIT_SIZE}-byte unit")
    return configured // BCQ_UNIT_SIZE * BCQ_UNIT_SIZE


def encode_unit(commit_log_offset: int, size: int, tags_code: int, store_time: int, msg_base_offset: int,
                batch_size: int, compacted_offset: int = INVALID_COMPACTED_OFFSET, reserved: int = 0) -> bytes:
    try:
        return _UNIT.pack(commit_log_offset, size, tags_code, store_time, msg_base_offset, batch_size,
                          compacted_offset, reserved)
    except struct.error as exc:
        raise InvalidArgumentError(f"batch queue unit field out of range: {exc}") from None


def decode_unit(buf: bytes | bytearray | memoryview, pos: int = 0) -> BatchCQUnit:
    if pos < 0 or pos + BCQ_UNIT_SIZE > len(buf):
        raise TruncatedRecordError(f"no whole {BCQ_UNIT_SIZE}-byte batch queue unit at position {pos} of "
                                   f"{len(buf)} bytes", offset=pos)
    return BatchCQUnit(*_UNIT.unpack_from(buf, pos))


def units_view(buf: bytes | bytearray | memoryview | np.ndarray, count: int | None = None) -> np.ndarray:
    """A zero-copy structured view of the whole units in ``buf``."""
    n = len(buf) // BCQ_UNIT_SIZE if count is None else count
    return np.frombuffer(buf, dtype=BCQ_DTYPE, count=n)


def valid_prefix(units: np.ndarray) -> int:
    """How many leading units pass the recovery rule (the broker stops at the first that fails)."""
    ok = (units["offset"] >= 0) & (units["size"] > 0) & (units["msg_base_offset"] >= 0) & (units["batch_size"] > 0)
    bad = np.flatnonzero(~ok)
    return int(bad[0]) if len(bad) else len(units)


def valid_prefix_py(units: np.ndarray) -> int:
    """Reference twin of :func:`valid_prefix`."""
    for i in range(len(units)):
        u = units[i]
        if not (u["offset"] >= 0 and u["size"] > 0 and u["msg_base_offset"] >= 0 and u["batch_size"] > 0):
            return i
    return len(units)
