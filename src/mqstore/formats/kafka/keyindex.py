"""The Kafka key index (``<base>.keyindex``): a sidecar of one segment, never read by a broker.

Layout (docs/formats/kafka-keyindex.md has the byte-level description): the RocketMQ IndexFile
layout (:mod:`mqstore.formats.rocketmq.indexfile`: 40-byte header, ``hash_slot_num`` 4-byte hash
slots, ``index_num`` 20-byte chained items, item 0 unused) followed by a trailer that names the
geometry (an IndexFile does not record it) and the indexed header::

    [IndexFile body][header name, UTF-8, name_len bytes][name_len u16][version u8][flags u8]
                    [hash_slot_num i32][index_num i32]["MQKX"]

An item's 8-byte "phyOffset" field holds the record's **location** in the segment: the record's
offset relative to the segment's base offset (high 32 bits) and the byte position of its batch in
the ``.log`` (low 32 bits), the two fields of a Kafka ``.index`` entry.  The time field is the
IndexFile's: seconds since the header's beginTimestamp (the first item's record timestamp),
clamped to ``[0, 2**31 - 1]``; Kafka timestamps need not grow, so queries never trust it and
filter the time window on the records themselves.

Key hash: ``IndexFile.indexKeyHashMethod`` (``abs(String.hashCode)``, ``Integer.MIN_VALUE`` → 0)
of the record key decoded as UTF-8 (an invalid sequence decodes to U+FFFD, as Java's decoder
does); a value of the indexed header is hashed as the text ``<header name>#<value>``.  Null keys
(and null header values) are not indexed.  No I/O here.
"""

from __future__ import annotations

import struct
from collections.abc import Iterable
from dataclasses import dataclass

from mqstore.errors import CorruptIndexError, InvalidArgumentError
from mqstore.formats.rocketmq.indexfile import (
    INDEX_HEADER_SIZE,
    INDEX_ITEM_SIZE,
    IndexFileBuffer,
    IndexHeader,
    check_geometry,
    index_file_size,
)
from mqstore.formats.rocketmq.javahash import INT_MIN, java_bytes_hashcode

KEYINDEX_MAGIC = b"MQKX"
KEYINDEX_VERSION = 1
TRAILER_SIZE = 16
MAX_HEADER_NAME_BYTES = 255
#: the fewest slots a key index has (a tiny segment still gets a usable table)
MIN_SLOTS = 16
_TAIL = struct.Struct(">HBBii4s")
_ITEM = struct.Struct(">iqii")
_U32 = 0xFFFFFFFF


# ----------------------------------------------------------------------------- hashes and locations
def key_hash(key: bytes) -> int:
    """The key index hash of a record key (``abs`` of Java ``String.hashCode`` of the UTF-8
    decoded key, 0 for ``Integer.MIN_VALUE``)."""
    h = abs(java_bytes_hashcode(bytes(key)))
    return 0 if h == -INT_MIN else h


def header_hash(name: str, value: bytes) -> int:
    """The key index hash of a value of the indexed header ``name``: the hash of ``name#value``."""
    return key_hash(name.encode("utf-8", "surrogatepass") + b"#" + bytes(value))


def pack_location(relative_offset: int, position: int) -> int:
    """The item's location field: ``relative_offset << 32 | position`` (both in ``[0, 2**31)``)."""
    if not (0 <= relative_offset <= 0x7FFFFFFF and 0 <= position <= 0x7FFFFFFF):
        raise InvalidArgumentError(f"key index location out of range: relative offset {relative_offset}, "
                                   f"position {position}")
    return (relative_offset << 32) | position


def unpack_location(location: int) -> tuple[int, int]:
    """``(relative_offset, position)`` of a location field."""
    return (location >> 32) & _U32, location & _U32


# ----------------------------------------------------------------------------- geometry and trailer
def geometry_for(n_entries: int, slots: int | None = None) -> tuple[int, int]:
    """``(hash_slot_num, index_num)`` of a key index holding ``n_entries`` items: one item per
    entry plus the unused item 0, and (unless ``slots`` is given) one slot per entry, at least
    :data:`MIN_SLOTS`: chains stay about one item long."""
    if n_entries < 0:
        raise InvalidArgumentError(f"negative entry count {n_entries}")
    s = max(MIN_SLOTS, n_entries) if slots is None else slots
    items = max(2, n_entries + 1)
    check_geometry(s, items)
    return s, items


@dataclass(frozen=True, slots=True)
class KeyIndexTrailer:
    """What the trailer records: the geometry and the indexed header's name (None: keys only)."""

    hash_slot_num: int
    index_num: int
    header_name: str | None = None
    version: int = KEYINDEX_VERSION
    flags: int = 0

    @property
    def body_size(self) -> int:
        return index_file_size(self.hash_slot_num, self.index_num)

    @property
    def file_size(self) -> int:
        return self.body_size + len(self.name_bytes) + TRAILER_SIZE

    @property
    def name_bytes(self) -> bytes:
        return b"" if self.header_name is None else self.header_name.encode("utf-8")

    def encode(self) -> bytes:
        name = self.name_bytes
        check_header_name(self.header_name)
        check_geometry(self.hash_slot_num, self.index_num)
        flags = self.flags | (1 if self.header_name is not None else 0)
        return name + _TAIL.pack(len(name), self.version, flags, self.hash_slot_num, self.index_num, KEYINDEX_MAGIC)


def check_header_name(name: str | None) -> None:
    if name is None:
        return
    if not isinstance(name, str) or not name:
        raise InvalidArgumentError("the indexed header name must be a non-empty string")
    if len(name.encode("utf-8", "surrogatepass")) > MAX_HEADER_NAME_BYTES:
        raise InvalidArgumentError(f"the indexed header name is longer than {MAX_HEADER_NAME_BYTES} bytes")


def decode_trailer(data: bytes | bytearray | memoryview) -> KeyIndexTrailer:
    """The trailer of a whole key index file; :class:`CorruptIndexError` when it is missing, names
    another geometry than the file's size, or is of an unknown version."""
    n = len(data)
    if n < INDEX_HEADER_SIZE + TRAILER_SIZE:
        raise CorruptIndexError(f"key index of {n} bytes is too short for a header and a trailer")
    name_len, version, flags, slots, items, magic = _TAIL.unpack_from(data, n - TRAILER_SIZE)
    if magic != KEYINDEX_MAGIC:
        raise CorruptIndexError("key index trailer magic missing (not a key index, or a torn file)")
    if version != KEYINDEX_VERSION:
        raise CorruptIndexError(f"unknown key index version {version}")
    if slots <= 0 or items <= 1:
        raise CorruptIndexError(f"invalid key index geometry: {slots} slots, {items} items")
    body = index_file_size(slots, items)
    if body + name_len + TRAILER_SIZE != n:
        raise CorruptIndexError(f"key index is {n} bytes, its geometry {slots}x{items} and header name need "
                                f"{body + name_len + TRAILER_SIZE}")
    name = None
    if flags & 1:
        try:
            name = bytes(data[body : body + name_len]).decode("utf-8")
        except UnicodeDecodeError:
            raise CorruptIndexError("key index header name is not UTF-8") from None
        if not name:
            raise CorruptIndexError("key index flags an indexed header but names none")
    elif name_len:
        raise CorruptIndexError("key index names a header without flagging it")
    return KeyIndexTrailer(slots, items, name, version, flags & ~1)


def decode_header(data: bytes | bytearray | memoryview, trailer: KeyIndexTrailer) -> IndexHeader:
    """The IndexFile header of a key index, its counts checked against the geometry."""
    h = IndexHeader.decode(data)
    if h.index_count > trailer.index_num or h.hash_slot_count < 0 or h.hash_slot_count > trailer.hash_slot_num:
        raise CorruptIndexError(f"key index header counts out of range (hashSlotCount {h.hash_slot_count}, "
                                f"indexCount {h.index_count}, geometry {trailer.hash_slot_num}x{trailer.index_num})")
    return h


# ----------------------------------------------------------------------------- reference build / read
def encode_keyindex(entries: Iterable[tuple[int, int, int]], hash_slot_num: int, index_num: int,
                    header_name: str | None = None) -> bytes:
    """A whole key index file from ``(key_hash, location, timestamp)`` entries in record order:
    ``IndexFileBuffer.put_hash`` per entry (the reference of the compiled bulk builder), then the
    header written and the trailer appended.  :class:`InvalidArgumentError` if they do not fit."""
    trailer = KeyIndexTrailer(hash_slot_num, index_num, header_name)
    tail = trailer.encode()
    buf = bytearray(trailer.body_size)
    f = IndexFileBuffer(buf, hash_slot_num, index_num, load=False)
    for h, loc, ts in entries:
        if not f.put_hash(h, loc, ts):
            raise InvalidArgumentError(f"more entries than the {index_num - 1} items of the key index")
    f.write_header()
    return bytes(buf) + tail


def iter_items(data: bytes | bytearray | memoryview, trailer: KeyIndexTrailer,
               header: IndexHeader) -> Iterable[tuple[int, int, int, int]]:
    """``(key_hash, location, time_diff, prev_item)`` of items ``1 .. indexCount - 1``."""
    base = INDEX_HEADER_SIZE + trailer.hash_slot_num * 4
    for i in range(1, min(header.index_count, trailer.index_num)):
        yield _ITEM.unpack_from(data, base + i * INDEX_ITEM_SIZE)


__all__ = [
    "KEYINDEX_MAGIC",
    "MIN_SLOTS",
    "TRAILER_SIZE",
    "KeyIndexTrailer",
    "check_header_name",
    "decode_header",
    "decode_trailer",
    "encode_keyindex",
    "geometry_for",
    "header_hash",
    "iter_items",
    "key_hash",
    "pack_location",
    "unpack_location",
]
