"""Kafka record batch v2 codec (spec §2) and the legacy v0/v1 message format (§2.5).

Everything here works on bytes-like objects (``bytes``, ``bytearray``, ``memoryview``, ``mmap``) and
never touches files.  Positions are byte offsets into the buffer handed in; errors carry them.
"""

from __future__ import annotations

import struct
import zlib
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from enum import IntEnum
from typing import Any

from mqstore.errors import (
    CorruptDataError,
    CrcMismatchError,
    InvalidArgumentError,
    TruncatedRecordError,
    UnknownMagicError,
    UnsupportedFormatError,
)
from mqstore.formats.kafka.compression import Compression, compress, decompress
from mqstore.formats.kafka.varint import (
    INT32_MAX,
    decode_varint,
    decode_varlong,
    encode_varint,
    encode_varlong,
)

LOG_OVERHEAD = 12  # int64 offset + int32 size, shared by every magic
HEADER_SIZE_UP_TO_MAGIC = 17
RECORD_BATCH_OVERHEAD = 61
LEGACY_RECORD_OVERHEAD_V0 = 14  # smallest size value the file walker accepts
LEGACY_RECORD_OVERHEAD_V1 = 22
CRC_START = 21  # CRC-32C covers [21, end of batch)

NO_TIMESTAMP = -1
NO_PRODUCER_ID = -1
NO_PRODUCER_EPOCH = -1
NO_SEQUENCE = -1
NO_PARTITION_LEADER_EPOCH = -1

ATTR_COMPRESSION_MASK = 0x07
ATTR_TIMESTAMP_TYPE = 0x08
ATTR_TRANSACTIONAL = 0x10
ATTR_CONTROL = 0x20
ATTR_DELETE_HORIZON = 0x40

_HEADER = struct.Struct(">qiibIhiqqqhii")  # the 61-byte v2 batch header
assert _HEADER.size == RECORD_BATCH_OVERHEAD


_CRC32C: Any = None


def crc32c(data: Any) -> int:
    """CRC-32C (Castagnoli) of a bytes-like object: the ``crc32c`` package's, imported on first
    use (the package imports ``importlib.metadata`` for its version: ~0.1 s of a one-shot command
    that never checksums in Python)."""
    global _CRC32C
    fn = _CRC32C
    if fn is None:
        from crc32c import crc32c as fn

        _CRC32C = fn
    return fn(data)  # type: ignore[no-any-return]


class TimestampType(IntEnum):
    NO_TIMESTAMP_TYPE = -1
    CREATE_TIME = 0
    LOG_APPEND_TIME = 1

    @property
    def label(self) -> str:
        return {-1: "NoTimestampType", 0: "CreateTime", 1: "LogAppendTime"}[int(self)]


class ControlRecordType(IntEnum):
    ABORT = 0
    COMMIT = 1
    LEADER_CHANGE = 2
    SNAPSHOT_HEADER = 3
    SNAPSHOT_FOOTER = 4
    KRAFT_VERSION = 5
    KRAFT_VOTERS = 6


def batch_crc(buf: bytes | bytearray | memoryview, position: int, size: int) -> int:
    """CRC-32C of a v2 batch's covered range ``[position + 21, position + size)``."""
    mv = memoryview(buf)
    return crc32c(mv[position + CRC_START : position + size])


# ----------------------------------------------------------------------------- records
@dataclass(frozen=True, slots=True)
class Header:
    """A record header: UTF-8 key (never null) and an optional binary value."""

    key: str
    value: bytes | None


@dataclass(frozen=True, slots=True)
class Record:
    """One decoded record with absolute offset and the timestamp as Kafka reports it."""

    offset: int
    timestamp: int
    key: bytes | None
    value: bytes | None
    headers: tuple[Header, ...] = ()
    attributes: int = 0
    offset_delta: int = 0
    timestamp_delta: int = 0
    size: int = 0  # encoded size including the length varint


@dataclass(frozen=True, slots=True)
class SimpleRecord:
    """Input of :func:`encode_batch`: what a producer hands in."""

    value: bytes | None
    key: bytes | None = None
    headers: Sequence[Header | tuple[str, bytes | None]] = ()
    timestamp: int | None = None  # None = the batch base timestamp
    offset_delta: int | None = None  # None = the record's index in the batch


# ----------------------------------------------------------------------------- batch header
@dataclass(frozen=True, slots=True)
class BatchHeader:
    """Every field of a v2 batch header (spec §2.1) plus derived values."""

    base_offset: int
    batch_length: int
    partition_leader_epoch: int
    magic: int
    crc: int
    attributes: int
    last_offset_delta: int
    base_timestamp: int
    max_timestamp: int
    producer_id: int
    producer_epoch: int
    base_sequence: int
    records_count: int
    position: int = 0

    @property
    def size(self) -> int:
        return LOG_OVERHEAD + self.batch_length

    @property
    def last_offset(self) -> int:
        return self.base_offset + self.last_offset_delta

    @property
    def next_offset(self) -> int:
        return self.last_offset + 1

    @property
    def compression(self) -> Compression:
        c = self.attributes & ATTR_COMPRESSION_MASK
        try:
            return Compression(c)
        except ValueError:
            raise UnsupportedFormatError(f"unknown compression codec id {c}", offset=self.position) from None

    @property
    def timestamp_type(self) -> TimestampType:
        return TimestampType.LOG_APPEND_TIME if self.attributes & ATTR_TIMESTAMP_TYPE else TimestampType.CREATE_TIME

    @property
    def is_transactional(self) -> bool:
        return bool(self.attributes & ATTR_TRANSACTIONAL)

    @property
    def is_control(self) -> bool:
        return bool(self.attributes & ATTR_CONTROL)

    @property
    def has_delete_horizon(self) -> bool:
        return bool(self.attributes & ATTR_DELETE_HORIZON)

    @property
    def delete_horizon_ms(self) -> int:
        return self.base_timestamp if self.has_delete_horizon else NO_TIMESTAMP

    @property
    def last_sequence(self) -> int:
        if self.base_sequence == NO_SEQUENCE:
            return NO_SEQUENCE
        s = self.base_sequence + self.last_offset_delta
        return s - INT32_MAX - 1 if s > INT32_MAX else s

    def compute_crc(self, buf: bytes | bytearray | memoryview, position: int | None = None) -> int:
        return batch_crc(buf, self.position if position is None else position, self.size)


def decode_batch_header(
    buf: bytes | bytearray | memoryview, position: int = 0, *, path: str | None = None
) -> BatchHeader:
    """Decode the 61-byte v2 header at ``position``.

    Raises :class:`TruncatedRecordError` if fewer than 61 bytes are available,
    :class:`UnsupportedFormatError` for magic 0/1 (use :func:`decode_legacy_message`) and
    :class:`UnknownMagicError` for any other magic.
    """
    if position < 0 or position + HEADER_SIZE_UP_TO_MAGIC > len(buf):
        raise TruncatedRecordError("batch header is truncated", path=path, offset=position)
    magic = struct.unpack_from(">b", buf, position + 16)[0]
    if magic in (0, 1):
        raise UnsupportedFormatError(
            f"legacy message set (magic {magic}); read it with decode_legacy_message", path=path, offset=position
        )
    if magic != 2:
        raise UnknownMagicError(f"unknown record batch magic {magic}", path=path, offset=position)
    if position + RECORD_BATCH_OVERHEAD > len(buf):
        raise TruncatedRecordError("v2 batch header is truncated", path=path, offset=position)
    f = _HEADER.unpack_from(buf, position)
    return BatchHeader(*f, position=position)


@dataclass(frozen=True, slots=True)
class RecordBatch:
    """A decoded v2 batch: header and records."""

    header: BatchHeader
    records: tuple[Record, ...]
    crc_valid: bool = True


def validate_batch(buf: bytes | bytearray | memoryview, header: BatchHeader, *, path: str | None = None) -> None:
    """Kafka's ``ensureValid``: size ≥ 61 and stored CRC == CRC-32C of ``[21, end)``."""
    if header.size < RECORD_BATCH_OVERHEAD:
        raise CorruptDataError(
            f"record batch size {header.size} is below the minimum {RECORD_BATCH_OVERHEAD}",
            path=path,
            offset=header.position,
        )
    if header.position + header.size > len(buf):
        raise TruncatedRecordError(
            f"record batch of {header.size} bytes runs past the end of the data", path=path, offset=header.position
        )
    computed = header.compute_crc(buf)
    if computed != header.crc:
        raise CrcMismatchError(
            f"record batch CRC mismatch: stored {header.crc}, computed {computed}", path=path, offset=header.position
        )


def decode_batch(
    buf: bytes | bytearray | memoryview,
    position: int = 0,
    *,
    validate: bool = True,
    path: str | None = None,
) -> RecordBatch:
    """Decode the v2 batch at ``position`` (header, CRC check, decompression, every record)."""
    header = decode_batch_header(buf, position, path=path)
    crc_ok = True
    if validate:
        validate_batch(buf, header, path=path)
    else:
        if header.size < RECORD_BATCH_OVERHEAD or position + header.size > len(buf):
            raise TruncatedRecordError("record batch is truncated", path=path, offset=position)
        crc_ok = header.compute_crc(buf) == header.crc
    return RecordBatch(header, tuple(iter_records(buf, header, path=path)), crc_ok)


def batch_body(buf: bytes | bytearray | memoryview, header: BatchHeader, *, path: str | None = None) -> bytes | memoryview:
    """The (decompressed) records area of a batch."""
    start = header.position + RECORD_BATCH_OVERHEAD
    end = header.position + header.size
    if end > len(buf) or header.size < RECORD_BATCH_OVERHEAD:
        raise TruncatedRecordError("record batch is truncated", path=path, offset=header.position)
    body = memoryview(buf)[start:end]
    comp = header.compression
    if comp is Compression.NONE:
        return body
    return decompress(comp, body, path=path, offset=header.position)


def iter_records(
    buf: bytes | bytearray | memoryview, header: BatchHeader, *, path: str | None = None
) -> Iterator[Record]:
    """Yield the records of a v2 batch with Kafka's reader checks (spec §2.3)."""
    body = batch_body(buf, header, path=path)
    count = header.records_count
    if count < 0:
        raise CorruptDataError(f"negative record count {count}", path=path, offset=header.position)
    log_append = header.timestamp_type is TimestampType.LOG_APPEND_TIME
    pos = 0
    end = len(body)
    for _ in range(count):
        rec, pos = _decode_record(body, pos, end, header, log_append, path)
        yield rec
    if pos != end:
        raise CorruptDataError(
            f"incorrect declared batch size: {end - pos} bytes left after {count} records",
            path=path,
            offset=header.position,
        )


def _decode_record(
    body: bytes | memoryview, pos: int, end: int, header: BatchHeader, log_append: bool, path: str | None
) -> tuple[Record, int]:
    where = header.position
    start = pos
    length, pos = decode_varint(body, pos, end)
    if length < 0 or pos + length > end:
        raise TruncatedRecordError(f"record length {length} exceeds the batch", path=path, offset=where)
    rec_end = pos + length
    if pos >= rec_end:
        raise TruncatedRecordError("record is empty", path=path, offset=where)
    attributes = body[pos]
    pos += 1
    ts_delta, pos = decode_varlong(body, pos, rec_end)
    off_delta, pos = decode_varint(body, pos, rec_end)
    key, pos = _read_bytes(body, pos, rec_end, where, path)
    value, pos = _read_bytes(body, pos, rec_end, where, path)
    n_headers, pos = decode_varint(body, pos, rec_end)
    if n_headers < 0:
        raise CorruptDataError(f"negative header count {n_headers}", path=path, offset=where)
    headers = []
    for _ in range(n_headers):
        klen, pos = decode_varint(body, pos, rec_end)
        if klen < 0:
            raise CorruptDataError("null header key", path=path, offset=where)
        if pos + klen > rec_end:
            raise TruncatedRecordError("header key exceeds the record", path=path, offset=where)
        try:
            hkey = bytes(body[pos : pos + klen]).decode("utf-8")
        except UnicodeDecodeError as exc:
            raise CorruptDataError(f"header key is not UTF-8: {exc}", path=path, offset=where) from None
        pos += klen
        hval, pos = _read_bytes(body, pos, rec_end, where, path)
        headers.append(Header(hkey, hval))
    if pos != rec_end:
        raise CorruptDataError(
            f"record declared {length} bytes but {pos - (rec_end - length)} were used", path=path, offset=where
        )
    timestamp = header.max_timestamp if log_append else header.base_timestamp + ts_delta
    rec = Record(
        offset=header.base_offset + off_delta,
        timestamp=timestamp,
        key=key,
        value=value,
        headers=tuple(headers),
        attributes=attributes,
        offset_delta=off_delta,
        timestamp_delta=ts_delta,
        size=rec_end - start,
    )
    return rec, rec_end


def _read_bytes(body: bytes | memoryview, pos: int, end: int, where: int, path: str | None) -> tuple[bytes | None, int]:
    n, pos = decode_varint(body, pos, end)
    if n < 0:
        return None, pos
    if pos + n > end:
        raise TruncatedRecordError(f"field of {n} bytes exceeds the record", path=path, offset=where)
    return bytes(body[pos : pos + n]), pos + n


# ----------------------------------------------------------------------------- encoding
def encode_record(
    offset_delta: int, timestamp_delta: int, key: bytes | None, value: bytes | None, headers: Sequence[Header]
) -> bytes:
    """Encode one v2 record (length varint included)."""
    parts = [b"\x00", encode_varlong(timestamp_delta), encode_varint(offset_delta)]
    for field_ in (key, value):
        if field_ is None:
            parts.append(b"\x01")
        else:
            parts.append(encode_varint(len(field_)))
            parts.append(bytes(field_))
    parts.append(encode_varint(len(headers)))
    for h in headers:
        kb = h.key.encode("utf-8")
        parts.append(encode_varint(len(kb)))
        parts.append(kb)
        if h.value is None:
            parts.append(b"\x01")
        else:
            parts.append(encode_varint(len(h.value)))
            parts.append(bytes(h.value))
    body = b"".join(parts)
    return encode_varint(len(body)) + body


def _as_header(h: Header | tuple[str, bytes | None]) -> Header:
    if isinstance(h, Header):
        return h
    k, v = h
    if not isinstance(k, str):
        raise InvalidArgumentError(f"header key must be str, got {type(k).__name__}")
    return Header(k, None if v is None else bytes(v))


def encode_batch(
    records: Sequence[SimpleRecord | bytes],
    *,
    base_offset: int = 0,
    base_timestamp: int | None = None,
    max_timestamp: int | None = None,
    compression: int = Compression.NONE,
    timestamp_type: int = TimestampType.CREATE_TIME,
    partition_leader_epoch: int = NO_PARTITION_LEADER_EPOCH,
    producer_id: int = NO_PRODUCER_ID,
    producer_epoch: int = NO_PRODUCER_EPOCH,
    base_sequence: int = NO_SEQUENCE,
    is_transactional: bool = False,
    is_control: bool = False,
    delete_horizon_ms: int | None = None,
    last_offset_delta: int | None = None,
) -> bytes:
    """Build one v2 record batch (with a correct CRC-32C).

    ``records`` are :class:`SimpleRecord` (or plain ``bytes`` values).  Timestamps default to
    ``base_timestamp`` (which defaults to the first record's timestamp, or −1 for an empty batch).
    For ``LOG_APPEND_TIME`` pass ``max_timestamp`` = the append time.
    """
    recs = [r if isinstance(r, SimpleRecord) else SimpleRecord(value=bytes(r)) for r in records]
    first_ts = next((r.timestamp for r in recs if r.timestamp is not None), None)
    if delete_horizon_ms is not None:
        base_ts = delete_horizon_ms
    elif base_timestamp is not None:
        base_ts = base_timestamp
    else:
        base_ts = first_ts if first_ts is not None else NO_TIMESTAMP
    body_parts = []
    max_ts = NO_TIMESTAMP
    max_delta = -1
    for i, r in enumerate(recs):
        ts = r.timestamp if r.timestamp is not None else base_ts
        od = r.offset_delta if r.offset_delta is not None else i
        if od < 0 or od > INT32_MAX:
            raise InvalidArgumentError(f"offset delta {od} out of range")
        if od <= max_delta:
            raise InvalidArgumentError("record offset deltas must be strictly increasing")
        max_delta = od
        max_ts = max(max_ts, ts)
        body_parts.append(encode_record(od, ts - base_ts, r.key, r.value, [_as_header(h) for h in r.headers]))
    body = b"".join(body_parts)
    comp = Compression(compression)
    if comp is not Compression.NONE and recs:
        body = compress(comp, body)
    attributes = int(comp)
    if timestamp_type == TimestampType.LOG_APPEND_TIME:
        attributes |= ATTR_TIMESTAMP_TYPE
    if is_transactional:
        attributes |= ATTR_TRANSACTIONAL
    if is_control:
        attributes |= ATTR_CONTROL
    if delete_horizon_ms is not None:
        attributes |= ATTR_DELETE_HORIZON
    if max_timestamp is None:
        max_timestamp = max_ts
    if last_offset_delta is None:
        last_offset_delta = max(max_delta, 0) if recs else 0
    size = RECORD_BATCH_OVERHEAD + len(body)
    out = bytearray(size)
    _HEADER.pack_into(
        out,
        0,
        base_offset,
        size - LOG_OVERHEAD,
        partition_leader_epoch,
        2,
        0,
        attributes,
        last_offset_delta,
        base_ts,
        max_timestamp,
        producer_id,
        producer_epoch,
        base_sequence,
        len(recs),
    )
    out[RECORD_BATCH_OVERHEAD:] = body
    struct.pack_into(">I", out, 17, crc32c(memoryview(out)[CRC_START:]))
    return bytes(out)


def set_base_offset(batch: bytearray | memoryview, base_offset: int, partition_leader_epoch: int | None = None) -> None:
    """Assign the broker-owned fields in place (outside the CRC range, so the CRC stays valid)."""
    struct.pack_into(">q", batch, 0, base_offset)
    if partition_leader_epoch is not None:
        struct.pack_into(">i", batch, 12, partition_leader_epoch)


# ----------------------------------------------------------------------------- control records
@dataclass(frozen=True, slots=True)
class ControlRecord:
    version: int
    type: int
    coordinator_epoch: int | None = None  # for end-transaction markers

    @property
    def type_name(self) -> str:
        try:
            return ControlRecordType(self.type).name
        except ValueError:
            return f"UNKNOWN({self.type})"


def decode_control_record(rec: Record, *, path: str | None = None) -> ControlRecord:
    """Decode a control record key (int16 version, int16 type) and, for ABORT/COMMIT, the marker value."""
    if rec.key is None or len(rec.key) < 4:
        raise CorruptDataError("control record key shorter than 4 bytes", path=path, offset=rec.offset)
    version, ctype = struct.unpack_from(">hh", rec.key)
    coord = None
    if ctype in (ControlRecordType.ABORT, ControlRecordType.COMMIT):
        if rec.value is None or len(rec.value) < 6:
            raise CorruptDataError("end-transaction marker value shorter than 6 bytes", path=path, offset=rec.offset)
        _v, coord = struct.unpack_from(">hi", rec.value)
    return ControlRecord(version, ctype, coord)


def encode_end_txn_marker_batch(
    *,
    commit: bool,
    producer_id: int,
    producer_epoch: int,
    base_offset: int = 0,
    timestamp: int = NO_TIMESTAMP,
    coordinator_epoch: int = 0,
    partition_leader_epoch: int = NO_PARTITION_LEADER_EPOCH,
) -> bytes:
    """A transactional control batch holding one COMMIT or ABORT marker."""
    key = struct.pack(">hh", 0, ControlRecordType.COMMIT if commit else ControlRecordType.ABORT)
    value = struct.pack(">hi", 0, coordinator_epoch)
    return encode_batch(
        [SimpleRecord(value=value, key=key, timestamp=timestamp)],
        base_offset=base_offset,
        producer_id=producer_id,
        producer_epoch=producer_epoch,
        partition_leader_epoch=partition_leader_epoch,
        is_transactional=True,
        is_control=True,
    )


# ----------------------------------------------------------------------------- legacy (magic 0/1)
@dataclass(frozen=True, slots=True)
class LegacyMessage:
    """A magic 0/1 message (or compressed wrapper) as stored in the log (spec §2.5)."""

    offset: int
    size: int  # the int32 size field (bytes after the 12-byte prefix)
    crc: int
    magic: int
    attributes: int
    timestamp: int
    key: bytes | None
    value: bytes | None
    position: int = 0

    @property
    def total_size(self) -> int:
        return LOG_OVERHEAD + self.size

    @property
    def compression(self) -> Compression:
        return Compression(self.attributes & ATTR_COMPRESSION_MASK)

    @property
    def timestamp_type(self) -> TimestampType:
        if self.magic == 0:
            return TimestampType.NO_TIMESTAMP_TYPE
        return TimestampType.LOG_APPEND_TIME if self.attributes & ATTR_TIMESTAMP_TYPE else TimestampType.CREATE_TIME


def legacy_crc(buf: bytes | bytearray | memoryview, position: int, size_field: int) -> int:
    """CRC-32 (IEEE) of a legacy message: magic .. end."""
    return zlib.crc32(memoryview(buf)[position + 16 : position + LOG_OVERHEAD + size_field]) & 0xFFFFFFFF


def decode_legacy_message(
    buf: bytes | bytearray | memoryview, position: int = 0, *, validate: bool = True, path: str | None = None
) -> LegacyMessage:
    """Decode one magic 0/1 message at ``position`` (CRC-32 checked when ``validate``)."""
    if position + LOG_OVERHEAD + LEGACY_RECORD_OVERHEAD_V0 > len(buf):
        raise TruncatedRecordError("legacy message header is truncated", path=path, offset=position)
    offset, size, crc, magic, attrs = struct.unpack_from(">qiIbb", buf, position)
    if magic not in (0, 1):
        raise UnknownMagicError(f"not a legacy message (magic {magic})", path=path, offset=position)
    end = position + LOG_OVERHEAD + size
    min_size = LEGACY_RECORD_OVERHEAD_V0 if magic == 0 else LEGACY_RECORD_OVERHEAD_V1
    if size < min_size:
        raise CorruptDataError(f"legacy message size {size} below {min_size}", path=path, offset=position)
    if end > len(buf):
        raise TruncatedRecordError("legacy message is truncated", path=path, offset=position)
    if validate:
        computed = legacy_crc(buf, position, size)
        if computed != crc:
            raise CrcMismatchError(
                f"legacy message CRC mismatch: stored {crc}, computed {computed}", path=path, offset=position
            )
    pos = position + 18
    timestamp = NO_TIMESTAMP
    if magic == 1:
        (timestamp,) = struct.unpack_from(">q", buf, pos)
        pos += 8
    key, pos = _legacy_bytes(buf, pos, end, position, path)
    value, pos = _legacy_bytes(buf, pos, end, position, path)
    if pos != end:
        raise CorruptDataError("legacy message has trailing bytes", path=path, offset=position)
    return LegacyMessage(offset, size, crc, magic, attrs, timestamp, key, value, position)


def _legacy_bytes(buf: bytes | bytearray | memoryview, pos: int, end: int, where: int, path: str | None) -> tuple[bytes | None, int]:
    if pos + 4 > end:
        raise TruncatedRecordError("legacy length field is truncated", path=path, offset=where)
    (n,) = struct.unpack_from(">i", buf, pos)
    pos += 4
    if n < 0:
        return None, pos
    if pos + n > end:
        raise TruncatedRecordError("legacy field exceeds the message", path=path, offset=where)
    return bytes(memoryview(buf)[pos : pos + n]), pos + n


def iter_legacy_records(msg: LegacyMessage, *, path: str | None = None) -> Iterator[Record]:
    """Records of a legacy message: itself, or the inner messages of a compressed wrapper."""
    comp = msg.attributes & ATTR_COMPRESSION_MASK
    if comp == 0:
        yield Record(msg.offset, msg.timestamp, msg.key, msg.value, (), msg.attributes, size=msg.total_size)
        return
    if comp == Compression.ZSTD:
        raise UnsupportedFormatError("zstd is not allowed in legacy messages", path=path, offset=msg.position)
    inner_buf = decompress(comp, msg.value or b"", path=path, offset=msg.position)
    inner = []
    pos = 0
    while pos + LOG_OVERHEAD + LEGACY_RECORD_OVERHEAD_V0 <= len(inner_buf):
        m = decode_legacy_message(inner_buf, pos, path=path)
        inner.append(m)
        pos += m.total_size
    if pos != len(inner_buf):
        raise CorruptDataError("compressed legacy wrapper has trailing bytes", path=path, offset=msg.position)
    if not inner:
        return
    last_rel = inner[-1].offset
    log_append = msg.magic == 1 and bool(msg.attributes & ATTR_TIMESTAMP_TYPE)
    for m in inner:
        # magic 1 wrappers use relative inner offsets; magic 0 uses absolute ones
        off = msg.offset - last_rel + m.offset if msg.magic == 1 else m.offset
        ts = msg.timestamp if log_append else m.timestamp
        yield Record(off, ts, m.key, m.value, (), m.attributes, size=m.total_size)


def encode_legacy_message(
    offset: int, value: bytes | None, key: bytes | None = None, *, magic: int = 1, timestamp: int = NO_TIMESTAMP
) -> bytes:
    """An uncompressed magic 0/1 message (used by tests and to exercise legacy detection)."""
    if magic not in (0, 1):
        raise InvalidArgumentError(f"legacy magic must be 0 or 1, got {magic}")
    body = bytearray(struct.pack(">bb", magic, 0))
    if magic == 1:
        body += struct.pack(">q", timestamp)
    for f in (key, value):
        if f is None:
            body += struct.pack(">i", -1)
        else:
            body += struct.pack(">i", len(f)) + bytes(f)
    crc = zlib.crc32(body) & 0xFFFFFFFF
    return struct.pack(">qiI", offset, 4 + len(body), crc) + bytes(body)


# ----------------------------------------------------------------------------- file walking
@dataclass(frozen=True, slots=True)
class BatchRef:
    """Where a batch sits and the few header fields every walker needs (any magic)."""

    position: int
    size: int
    magic: int
    base_offset: int  # −1 for legacy messages (unknown without decompression)
    last_offset: int
    max_timestamp: int


def peek_batch(buf: bytes | bytearray | memoryview, position: int, end: int, *, path: str | None = None) -> BatchRef | None:
    """One step of the file walker of spec §2.4: the batch at ``position`` or ``None`` at end of data.

    Raises :class:`CorruptDataError` when the size field is below 14.
    """
    if position >= end - HEADER_SIZE_UP_TO_MAGIC:
        return None
    base, size = struct.unpack_from(">qi", buf, position)
    if size < LEGACY_RECORD_OVERHEAD_V0:
        raise CorruptDataError(f"record size {size} is smaller than the minimum record overhead (14)", path=path, offset=position)
    if position > end - LOG_OVERHEAD - size:
        return None
    magic = struct.unpack_from(">b", buf, position + 16)[0]
    if magic >= 2:
        if size + LOG_OVERHEAD >= RECORD_BATCH_OVERHEAD:
            last_delta, _bt, max_ts = struct.unpack_from(">iqq", buf, position + 23)
        else:
            last_delta, max_ts = 0, NO_TIMESTAMP
        return BatchRef(position, size + LOG_OVERHEAD, magic, base, base + last_delta, max_ts)
    ts = NO_TIMESTAMP
    if magic == 1 and size >= LEGACY_RECORD_OVERHEAD_V1:
        (ts,) = struct.unpack_from(">q", buf, position + 18)
    return BatchRef(position, size + LOG_OVERHEAD, magic, -1, base, ts)


def walk_batches(
    buf: bytes | bytearray | memoryview, start: int = 0, end: int | None = None, *, path: str | None = None
) -> Iterator[BatchRef]:
    """Iterate batch headers from ``start`` per spec §2.4 (no validation; torn tail = end of data)."""
    end = len(buf) if end is None else end
    pos = start
    while True:
        ref = peek_batch(buf, pos, end, path=path)
        if ref is None:
            return
        yield ref
        pos += ref.size


def validate_any(buf: bytes | bytearray | memoryview, ref: BatchRef, *, path: str | None = None) -> None:
    """``ensureValid`` for any magic: v2 size/CRC-32C, legacy CRC-32."""
    if ref.magic >= 2:
        if ref.magic != 2:
            raise UnknownMagicError(f"unknown record batch magic {ref.magic}", path=path, offset=ref.position)
        validate_batch(buf, decode_batch_header(buf, ref.position, path=path), path=path)
    else:
        decode_legacy_message(buf, ref.position, validate=True, path=path)
