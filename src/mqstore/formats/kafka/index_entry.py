"""Entry codecs of the Kafka offset index (8 bytes) and time index (12 bytes), spec §3.1."""

from __future__ import annotations

import struct
from typing import NamedTuple

from mqstore.errors import InvalidArgumentError, TruncatedRecordError

OFFSET_ENTRY = struct.Struct(">ii")  # int32 relative offset, int32 position
TIME_ENTRY = struct.Struct(">qi")  # int64 timestamp, int32 relative offset
OFFSET_ENTRY_SIZE = OFFSET_ENTRY.size
TIME_ENTRY_SIZE = TIME_ENTRY.size
INT32_MAX = (1 << 31) - 1


class OffsetPosition(NamedTuple):
    """A logical offset-index entry: absolute offset and byte position in the ``.log``."""

    offset: int
    position: int


class TimestampOffset(NamedTuple):
    """A logical time-index entry: timestamp (ms) and absolute offset."""

    timestamp: int
    offset: int


def relative_offset(offset: int, base_offset: int) -> int:
    rel = offset - base_offset
    if not 0 <= rel <= INT32_MAX:
        raise InvalidArgumentError(f"offset {offset} cannot be stored relative to base offset {base_offset}")
    return rel


def encode_offset_entry(offset: int, position: int, base_offset: int) -> bytes:
    if not 0 <= position <= INT32_MAX:
        raise InvalidArgumentError(f"position {position} out of int32 range")
    return OFFSET_ENTRY.pack(relative_offset(offset, base_offset), position)


def decode_offset_entry(buf: bytes | bytearray | memoryview, slot: int, base_offset: int) -> OffsetPosition:
    pos = slot * OFFSET_ENTRY_SIZE
    if slot < 0 or pos + OFFSET_ENTRY_SIZE > len(buf):
        raise TruncatedRecordError(f"offset index slot {slot} is beyond the data", offset=pos)
    rel, position = OFFSET_ENTRY.unpack_from(buf, pos)
    return OffsetPosition(base_offset + rel, position)


def encode_time_entry(timestamp: int, offset: int, base_offset: int) -> bytes:
    return TIME_ENTRY.pack(timestamp, relative_offset(offset, base_offset))


def decode_time_entry(buf: bytes | bytearray | memoryview, slot: int, base_offset: int) -> TimestampOffset:
    pos = slot * TIME_ENTRY_SIZE
    if slot < 0 or pos + TIME_ENTRY_SIZE > len(buf):
        raise TruncatedRecordError(f"time index slot {slot} is beyond the data", offset=pos)
    ts, rel = TIME_ENTRY.unpack_from(buf, pos)
    return TimestampOffset(ts, base_offset + rel)
