"""IndexFile layout and algorithms (spec §3): header, hash slots, chained items.

``IndexFileBuffer`` runs ``putKey`` / ``selectPhyOffset`` on any writable buffer (a ``bytearray``
or a memory map); it does no I/O.  It is the reference implementation; the bulk builder in
:mod:`mqstore.kernels.rocketmq.index_build` must produce the same bytes.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass

from mqstore.errors import CorruptIndexError, InvalidArgumentError
from mqstore.formats.rocketmq.javahash import index_key_hash

INDEX_HEADER_SIZE = 40
HASH_SLOT_SIZE = 4
INDEX_ITEM_SIZE = 20
DEFAULT_HASH_SLOT_NUM = 5_000_000
DEFAULT_INDEX_NUM = 5_000_000 * 4
DEFAULT_MAX_MSGS_NUM_BATCH = 64
INT_MAX = 2**31 - 1
LONG_MAX = 2**63 - 1

_HEADER = struct.Struct(">qqqqii")
_I32 = struct.Struct(">i")
_I64 = struct.Struct(">q")
_ITEM = struct.Struct(">iqii")


def index_file_size(hash_slot_num: int, index_num: int) -> int:
    return INDEX_HEADER_SIZE + hash_slot_num * HASH_SLOT_SIZE + index_num * INDEX_ITEM_SIZE


def check_geometry(hash_slot_num: int, index_num: int) -> None:
    if hash_slot_num <= 0 or index_num <= 1:
        raise InvalidArgumentError(f"invalid index geometry: {hash_slot_num} slots, {index_num} items")
    if index_file_size(hash_slot_num, index_num) > 2**31 - 1:
        raise InvalidArgumentError("index file geometry exceeds 2 GiB")


@dataclass(slots=True)
class IndexHeader:
    begin_timestamp: int = 0
    end_timestamp: int = 0
    begin_phy_offset: int = 0
    end_phy_offset: int = 0
    hash_slot_count: int = 0
    index_count: int = 1

    def encode(self) -> bytes:
        return _HEADER.pack(
            self.begin_timestamp,
            self.end_timestamp,
            self.begin_phy_offset,
            self.end_phy_offset,
            self.hash_slot_count,
            self.index_count,
        )

    @classmethod
    def decode(cls, data: bytes | bytearray | memoryview) -> IndexHeader:
        if len(data) < INDEX_HEADER_SIZE:
            raise CorruptIndexError(f"index file header needs {INDEX_HEADER_SIZE} bytes, got {len(data)}")
        h = cls(*_HEADER.unpack_from(data, 0))
        if h.index_count <= 0:  # IndexHeader.load maps a never-flushed count to 1
            h.index_count = 1
        return h

    @property
    def key_count(self) -> int:
        return self.index_count - 1


def time_matched(header: IndexHeader, begin: int, end: int) -> bool:
    """``IndexFile.isTimeMatched``: whether a file whose keys span the header's store times may
    hold keys stored in ``[begin, end]``."""
    fb, fe = header.begin_timestamp, header.end_timestamp
    return (begin < fb and end > fe) or (fb <= begin <= fe) or (fb <= end <= fe)


def java_div(a: int, b: int) -> int:
    """Java integer division (truncates toward zero)."""
    q = abs(a) // abs(b)
    return q if (a >= 0) == (b > 0) else -q


def time_diff_seconds(store_timestamp: int, begin_timestamp: int) -> int:
    """Step 4 of ``putKey``: seconds since the header begin timestamp, clamped into an int."""
    if begin_timestamp <= 0:
        return 0
    diff = java_div(store_timestamp - begin_timestamp, 1000)
    if diff > INT_MAX:
        return INT_MAX
    if diff < 0:
        return 0
    return diff


class IndexFileBuffer:
    """An IndexFile held in a writable buffer of exactly ``index_file_size`` bytes."""

    __slots__ = ("_items_base", "buf", "hash_slot_num", "header", "index_num")

    def __init__(self, buf: bytearray | memoryview, hash_slot_num: int, index_num: int, *, load: bool = True) -> None:
        check_geometry(hash_slot_num, index_num)
        size = index_file_size(hash_slot_num, index_num)
        if len(buf) != size:
            raise CorruptIndexError(f"index file is {len(buf)} bytes, geometry {hash_slot_num}x{index_num} needs {size}")
        self.buf = buf
        self.hash_slot_num = hash_slot_num
        self.index_num = index_num
        self._items_base = INDEX_HEADER_SIZE + hash_slot_num * HASH_SLOT_SIZE
        self.header = IndexHeader.decode(buf) if load else IndexHeader()

    # ------------------------------------------------------------------ header write-through
    def carry_over(self, end_phy_offset: int, end_timestamp: int) -> None:
        """Constructor arguments of a rolled file: previous file's end values (when > 0)."""
        if end_phy_offset > 0:
            self._set_long(16, "begin_phy_offset", end_phy_offset)
            self._set_long(24, "end_phy_offset", end_phy_offset)
        if end_timestamp > 0:
            self._set_long(0, "begin_timestamp", end_timestamp)
            self._set_long(8, "end_timestamp", end_timestamp)

    def _set_long(self, pos: int, name: str, value: int) -> None:
        setattr(self.header, name, value)
        _I64.pack_into(self.buf, pos, value)

    def write_header(self) -> None:
        """``updateByteBuffer``: write all header fields (done on flush)."""
        self.buf[0:INDEX_HEADER_SIZE] = self.header.encode()

    # ------------------------------------------------------------------ putKey
    def is_write_full(self) -> bool:
        return self.header.index_count >= self.index_num

    def slot_position(self, key_hash: int) -> int:
        return INDEX_HEADER_SIZE + (key_hash % self.hash_slot_num) * HASH_SLOT_SIZE

    def item_position(self, item: int) -> int:
        return self._items_base + item * INDEX_ITEM_SIZE

    def put_key(self, key: str, phy_offset: int, store_timestamp: int) -> bool:
        return self.put_hash(index_key_hash(key), phy_offset, store_timestamp)

    def put_hash(self, key_hash: int, phy_offset: int, store_timestamp: int) -> bool:
        """``putKey`` with the key already hashed (spec 3.6)."""
        h = self.header
        if h.index_count >= self.index_num:
            return False
        abs_slot = self.slot_position(key_hash)
        slot_value = _I32.unpack_from(self.buf, abs_slot)[0]
        if slot_value <= 0 or slot_value > h.index_count:
            slot_value = 0
        diff = time_diff_seconds(store_timestamp, h.begin_timestamp)
        _ITEM.pack_into(self.buf, self.item_position(h.index_count), key_hash, phy_offset, diff, slot_value)
        _I32.pack_into(self.buf, abs_slot, h.index_count)
        if h.index_count <= 1:
            self._set_long(16, "begin_phy_offset", phy_offset)
            self._set_long(0, "begin_timestamp", store_timestamp)
        if slot_value == 0:
            h.hash_slot_count += 1
            _I32.pack_into(self.buf, 32, h.hash_slot_count)
        self._set_long(24, "end_phy_offset", phy_offset)
        self._set_long(8, "end_timestamp", store_timestamp)
        h.index_count += 1  # the count last: a crash before it leaves slots naming an uncounted item
        _I32.pack_into(self.buf, 36, h.index_count)
        return True

    # ------------------------------------------------------------------ queries
    def read_item(self, item: int) -> tuple[int, int, int, int]:
        """(keyHash, phyOffset, timeDiff, prevIndex) of item number ``item``."""
        return _ITEM.unpack_from(self.buf, self.item_position(item))

    def slot_value(self, key_hash: int) -> int:
        return _I32.unpack_from(self.buf, self.slot_position(key_hash))[0]

    def is_time_matched(self, begin: int, end: int) -> bool:
        return time_matched(self.header, begin, end)

    def select_phy_offset(self, out: list[int], key: str, max_num: int, begin: int, end: int) -> None:
        self.select_by_hash(out, index_key_hash(key), max_num, begin, end)

    def select_by_hash(self, out: list[int], key_hash: int, max_num: int, begin: int, end: int) -> None:
        """``selectPhyOffset`` (spec 3.7): append candidate offsets, newest first, to ``out``."""
        h = self.header
        slot_value = self.slot_value(key_hash)
        # a corrupt header may claim more items than the file holds: never read past the last one
        last_item = min(h.index_count, self.index_num - 1)
        if slot_value <= 0 or slot_value > last_item or h.index_count <= 1:
            return
        cur = slot_value
        steps = 0
        while True:
            if len(out) >= max_num:
                return
            hash_read, phy_read, diff, prev = self.read_item(cur)
            if diff < 0:
                return
            time_read = h.begin_timestamp + diff * 1000
            if hash_read == key_hash and begin <= time_read <= end:
                out.append(phy_read)
            if prev <= 0 or prev > last_item or prev == cur or time_read < begin:
                return
            cur = prev
            steps += 1
            if steps > h.index_count:  # a corrupt chain with a cycle: stop instead of looping forever
                raise CorruptIndexError(f"index chain from slot {key_hash % self.hash_slot_num} has a cycle")
