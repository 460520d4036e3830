"""DLedger CommitLog files (``enableDLegerCommitLog=true``, RocketMQ 4.5 to 5.x): pure codecs.

A DLedger store keeps every replicated entry in ``data/`` files and one fixed-size *index unit*
per entry in ``index/`` files (docs/formats/rocketmq-dledger.md).  A RocketMQ broker puts exactly
one CommitLog message record, byte for byte as the classic CommitLog would hold it, in the body of
each entry; the record's PHYSICALOFFSET field is the entry's position plus
:data:`ENTRY_HEADER_SIZE`, which is where the record itself starts in the data files.

Entry (big-endian)::

    0  magic       int32   1 (MAGIC_1); -1 marks the blank filler at the end of a data file
    4  size        int32   the whole entry, header included (= 48 + body length)
    8  index       int64   the entry's index (consecutive, from 0)
   16  term        int64   the leader term that wrote it (never decreases)
   24  pos         int64   the entry's own global position in the data files
   32  channel     int32   reserved, 0
   36  chainCrc    int32   reserved, 0
   40  bodyCrc     int32   0 as written by every DLedger release that RocketMQ uses
   44  bodyLength  int32   length of the body that follows
   48  body

Blank filler: magic -1, then the filler's length (int32), the rest zero.

Index unit (32 bytes, big-endian): magic int32, pos int64, size int32, index int64, term int64;
the unit of entry ``i`` is at byte ``32 * i`` of the index files.

No I/O here; :mod:`mqstore.storage.rocketmq.dledger` reads and writes the files.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass

import numpy as np

from mqstore.errors import CorruptDataError

MAGIC_1 = 1
CURRENT_MAGIC = MAGIC_1
BLANK_MAGIC = -1
#: the smallest gap the writer leaves at the end of a data file for the blank filler
MIN_BLANK_LEN = 8
#: bytes before the body: the 44-byte header (DLedger's HEADER_SIZE) and the body length
ENTRY_HEADER_SIZE = 48
#: DLedger's own HEADER_SIZE (without the body length field); an entry must be larger
HEADER_SIZE_WITHOUT_LENGTH = 44
POS_FIELD_OFFSET = 24
INDEX_UNIT_SIZE = 32
#: DLedger's defaults: 1 GiB data files (RocketMQ sets them to mappedFileSizeCommitLog), index
#: files of 5 Mi units
DEFAULT_DATA_FILE_SIZE = 1024 * 1024 * 1024
DEFAULT_INDEX_FILE_SIZE = INDEX_UNIT_SIZE * 5 * 1024 * 1024

_ENTRY = struct.Struct(">iiqqqiiii")
_INDEX = struct.Struct(">iqiqq")
_BLANK = struct.Struct(">ii")
assert _ENTRY.size == ENTRY_HEADER_SIZE and _INDEX.size == INDEX_UNIT_SIZE

#: the index files as a numpy structured array (zero-copy over a mapping)
INDEX_DTYPE = np.dtype([("magic", ">i4"), ("pos", ">i8"), ("size", ">i4"), ("index", ">i8"), ("term", ">i8")])
assert INDEX_DTYPE.itemsize == INDEX_UNIT_SIZE


@dataclass(frozen=True, slots=True)
class EntryHeader:
    """The 48 bytes in front of an entry's body."""

    magic: int
    size: int
    index: int
    term: int
    pos: int
    channel: int = 0
    chain_crc: int = 0
    body_crc: int = 0
    body_length: int = 0

    def encode(self) -> bytes:
        return _ENTRY.pack(self.magic, self.size, self.index, self.term, self.pos, self.channel, self.chain_crc,
                           self.body_crc, self.body_length)

    @classmethod
    def decode(cls, buf: bytes | bytearray | memoryview, pos: int = 0) -> EntryHeader:
        if len(buf) - pos < ENTRY_HEADER_SIZE:
            raise CorruptDataError(f"DLedger entry header truncated: {max(len(buf) - pos, 0)} of {ENTRY_HEADER_SIZE} bytes")
        return cls(*_ENTRY.unpack_from(buf, pos))

    @property
    def is_blank(self) -> bool:
        return self.magic == BLANK_MAGIC

    @property
    def body_pos(self) -> int:
        """Global position of the body (the wrapped CommitLog record)."""
        return self.pos + ENTRY_HEADER_SIZE

    def problem(self, at: int) -> str | None:
        """What is wrong with this header read at global position ``at`` (``None``: nothing), by
        the rules DLedger's recovery applies to every entry."""
        if self.magic != CURRENT_MAGIC:
            return f"unknown DLedger entry magic {self.magic}"
        if self.size <= HEADER_SIZE_WITHOUT_LENGTH:
            return f"entry size {self.size} is not larger than the {HEADER_SIZE_WITHOUT_LENGTH}-byte header"
        if self.body_length + ENTRY_HEADER_SIZE != self.size:
            return f"entry size {self.size} is not the body length {self.body_length} + {ENTRY_HEADER_SIZE}"
        if self.pos != at:
            return f"entry says it is at position {self.pos}"
        return None


def peek_magic(buf: bytes | bytearray | memoryview, pos: int = 0) -> int:
    return struct.unpack_from(">i", buf, pos)[0]


def encode_entry(index: int, term: int, pos: int, body: bytes | bytearray | memoryview, *, magic: int = CURRENT_MAGIC,
                 channel: int = 0, chain_crc: int = 0, body_crc: int = 0) -> bytes:
    """An entry: the header (``size`` = 48 + body length) and the body."""
    body = bytes(body)
    size = ENTRY_HEADER_SIZE + len(body)
    return EntryHeader(magic, size, index, term, pos, channel, chain_crc, body_crc, len(body)).encode() + body


def encode_blank(length: int) -> bytes:
    """The filler that closes a data file: magic -1, its length, zeros (``length`` >= 8)."""
    if length < MIN_BLANK_LEN:
        raise ValueError(f"a DLedger blank filler needs {MIN_BLANK_LEN} bytes, not {length}")
    return _BLANK.pack(BLANK_MAGIC, length) + bytes(length - _BLANK.size)


@dataclass(frozen=True, slots=True)
class IndexUnit:
    """One 32-byte unit of the index files."""

    magic: int
    pos: int
    size: int
    index: int
    term: int

    def encode(self) -> bytes:
        return _INDEX.pack(self.magic, self.pos, self.size, self.index, self.term)

    @classmethod
    def decode(cls, buf: bytes | bytearray | memoryview, pos: int = 0) -> IndexUnit:
        if len(buf) - pos < INDEX_UNIT_SIZE:
            raise CorruptDataError(f"DLedger index unit truncated: {max(len(buf) - pos, 0)} of {INDEX_UNIT_SIZE} bytes")
        return cls(*_INDEX.unpack_from(buf, pos))

    @classmethod
    def of(cls, header: EntryHeader) -> IndexUnit:
        """The unit DLedger writes for an entry."""
        return cls(header.magic, header.pos, header.size, header.index, header.term)


def parse_properties(data: bytes) -> dict[str, str]:
    """The ``key=value`` lines DLedger writes with ``java.util.Properties`` (``checkpoint``:
    ``endIndex``, ``committedIndex``; ``currterm``: ``currTerm``, ``voteLeader``); ``#`` and
    ``!`` lines are comments.  Undecodable bytes raise :class:`CorruptDataError`."""
    try:
        text = data.decode("latin-1")
    except UnicodeDecodeError as exc:  # pragma: no cover - latin-1 decodes every byte
        raise CorruptDataError(str(exc)) from exc
    out: dict[str, str] = {}
    for raw in text.splitlines():
        line = raw.strip()
        if not line or line[0] in "#!":
            continue
        cut = min((i for i in (line.find("="), line.find(":")) if i >= 0), default=-1)
        if cut < 0:
            out[line] = ""
        else:
            out[line[:cut].strip()] = line[cut + 1 :].strip()
    return out


def encode_properties(values: dict[str, object]) -> bytes:
    """The same files as DLedger writes them (a date comment line, then ``key=value``)."""
    return ("#" + "\n" + "".join(f"{k}={v}\n" for k, v in values.items())).encode("latin-1")
