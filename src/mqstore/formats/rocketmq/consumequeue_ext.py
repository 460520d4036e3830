"""ConsumeQueueExt units and addresses (``consumequeue_ext/<topic>/<queueId>/<20-digit offset>``).

A store with ``enableConsumeQueueExt=true`` writes, for every dispatched message, a variable
length *ext unit* into the queue's ext files and puts the unit's *address* into the tagsCode
field of the 20-byte ConsumeQueue unit instead of the tag hash.  Layout of an ext unit (big
endian, see ``docs/formats/rocketmq-consumequeue-ext.md``)::

    short size           total bytes of the unit (20 + bitmap bytes)
    long  tagsCode       the real tag hash
    long  msgStoreTime   store time of the message (ms)
    short bitMapSize     bytes of the filter bitmap (0: none)
    byte[bitMapSize]     filter bitmap

Addresses are the global byte offset of a unit in the ext file queue shifted down by 2**63
(``offset + Long.MIN_VALUE``), so every address is far below any real tag hash: a tagsCode is an
address when it is at most ``MAX_ADDR`` = ``Integer.MIN_VALUE - 1``.  Pure bytes in / out.
"""

from __future__ import annotations

import struct
from typing import NamedTuple

import numpy as np

from mqstore.errors import CorruptDataError, InvalidArgumentError, TruncatedRecordError

LONG_MIN = -(2**63)
#: the largest (least negative) value that is an ext address: ``Integer.MIN_VALUE - 1L``
MAX_ADDR = -(2**31) - 1
#: the largest real offset an address can carry
MAX_REAL_OFFSET = MAX_ADDR - LONG_MIN
#: bytes a writer always leaves free at the end of an ext file (room for the end marker)
END_BLANK_DATA_LENGTH = 4
#: the end marker written where a unit did not fit: ``short -1``
END_MARK = -1
#: size, tagsCode, msgStoreTime, bitMapSize
MIN_EXT_UNIT_SIZE = 2 + 8 + 8 + 2
MAX_EXT_UNIT_SIZE = 32767
DEFAULT_EXT_FILE_SIZE = 48 * 1024 * 1024
#: ``bitMapLengthConsumeQueueExt``: bits of a filter bitmap
DEFAULT_BITMAP_BITS = 64

_HEAD = struct.Struct(">hqqh")
assert _HEAD.size == MIN_EXT_UNIT_SIZE

#: numpy dtype of a unit without bitmap (what every unit is when no filter bitmap is computed)
EXT_PLAIN_DTYPE = np.dtype([("size", ">i2"), ("tags_code", ">i8"), ("store_time", ">i8"), ("bitmap_size", ">i2")])
assert EXT_PLAIN_DTYPE.itemsize == MIN_EXT_UNIT_SIZE


class ExtUnit(NamedTuple):
    tags_code: int
    msg_store_time: int
    filter_bitmap: bytes = b""

    @property
    def size(self) -> int:
        return MIN_EXT_UNIT_SIZE + len(self.filter_bitmap)


def is_ext_addr(value: int) -> bool:
    """True when a ConsumeQueue tagsCode is an address into the ext files."""
    return value <= MAX_ADDR


def decorate(offset: int) -> int:
    """The address of the ext unit at global ext offset ``offset`` (an address is left as is)."""
    return offset if is_ext_addr(offset) else offset + LONG_MIN


def undecorate(address: int) -> int:
    """The global ext offset of an address (a non-address is left as is)."""
    return address - LONG_MIN if is_ext_addr(address) else address


def decorate_many(offsets: np.ndarray) -> np.ndarray:
    """Vectorised :func:`decorate` of non-negative ext offsets (int64)."""
    off = np.asarray(offsets, dtype=np.int64)
    return off + np.int64(LONG_MIN)


def is_ext_addr_many(tags: np.ndarray) -> np.ndarray:
    return np.asarray(tags, dtype=np.int64) <= MAX_ADDR


def encode_ext_unit(unit: ExtUnit) -> bytes:
    size = unit.size
    if size > MAX_EXT_UNIT_SIZE:
        raise InvalidArgumentError(f"ext unit of {size} bytes exceeds {MAX_EXT_UNIT_SIZE}")
    return _HEAD.pack(size, unit.tags_code, unit.msg_store_time, len(unit.filter_bitmap)) + bytes(unit.filter_bitmap)


def peek_unit_size(buf: bytes | bytearray | memoryview, pos: int) -> int:
    """The size field at ``pos`` (a value below 1 ends the file's data)."""
    if pos < 0 or pos + 2 > len(buf):
        raise TruncatedRecordError(f"no ext unit size field at position {pos} of {len(buf)} bytes", offset=pos)
    return int(struct.unpack_from(">h", buf, pos)[0])


def decode_ext_unit(buf: bytes | bytearray | memoryview, pos: int = 0, end: int | None = None) -> ExtUnit:
    """The ext unit at ``pos``; ``end`` (default: the buffer's end) bounds the readable data.
    A unit that is not whole and consistent before ``end`` raises a typed error."""
    limit = len(buf) if end is None else min(end, len(buf))
    if pos < 0 or pos + MIN_EXT_UNIT_SIZE > limit:
        raise TruncatedRecordError(f"no whole ext unit at position {pos} (data ends at {limit})", offset=pos)
    size, tags, store_time, bm = _HEAD.unpack_from(buf, pos)
    if size < MIN_EXT_UNIT_SIZE:
        raise CorruptDataError(f"ext unit at position {pos} has size {size} (at least {MIN_EXT_UNIT_SIZE})", offset=pos)
    if bm < 0 or size != MIN_EXT_UNIT_SIZE + bm:
        raise CorruptDataError(f"ext unit at position {pos}: size {size} does not match its bitmap size {bm}", offset=pos)
    if pos + size > limit:
        raise TruncatedRecordError(f"ext unit at position {pos} of {size} bytes runs past the data end {limit}",
                                   offset=pos)
    bitmap = bytes(buf[pos + MIN_EXT_UNIT_SIZE : pos + size])
    return ExtUnit(int(tags), int(store_time), bitmap)


def scan_end(buf: bytes | bytearray | memoryview, file_size: int) -> int:
    """Where the units of one ext file end: the first size field below 1 (the end marker or
    never-written zeros), or where a size would run past the file (recovery's rule)."""
    limit = min(file_size, len(buf))
    # fast path: the leading run of bitmap-less 20-byte units, vectorised
    n = limit // MIN_EXT_UNIT_SIZE
    units = np.frombuffer(buf, dtype=EXT_PLAIN_DTYPE, count=n)
    plain = (units["size"] == MIN_EXT_UNIT_SIZE) & (units["bitmap_size"] == 0)
    run = n if bool(plain.all()) else int(np.argmin(plain))
    del units, plain
    pos = run * MIN_EXT_UNIT_SIZE
    while pos + 2 <= limit:
        size = int(struct.unpack_from(">h", buf, pos)[0])
        if size <= 0 or pos + size > limit:
            break
        pos += size
    return pos


def encode_plain_units(tags_codes: np.ndarray, store_times: np.ndarray) -> np.ndarray:
    """Vectorised: units without bitmap, back to back, as one ``uint8`` array."""
    arr = np.empty(len(tags_codes), dtype=EXT_PLAIN_DTYPE)
    arr["size"] = MIN_EXT_UNIT_SIZE
    arr["tags_code"] = tags_codes
    arr["store_time"] = store_times
    arr["bitmap_size"] = 0
    return arr.view(np.uint8)
