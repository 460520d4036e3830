"""CommitLog message records (spec §1): encode, decode, validate.

A record is ``TOTALSIZE MAGIC BODYCRC QUEUEID FLAG QUEUEOFFSET PHYSICALOFFSET SYSFLAG
BORNTIMESTAMP BORNHOST STORETIMESTAMP STOREHOST RECONSUMETIMES PREPAREDTXOFFSET BODY TOPIC
PROPERTIES`` with no padding, all integers big-endian.  Hosts are 4+4 bytes (IPv4) or 16+4
(IPv6) as chosen by the SYSFLAG bits; the topic length is one signed byte (magic v1) or a signed
short (magic v2).
"""

from __future__ import annotations

import functools
import ipaddress
import struct
import zlib
from dataclasses import dataclass, field, fields
from typing import NamedTuple

from mqstore.errors import (
    CorruptDataError,
    CrcMismatchError,
    InvalidTopicError,
    MessageTooLargeError,
    PropertiesTooLargeError,
    TruncatedRecordError,
    UnknownMagicError,
)
from mqstore.formats.rocketmq.properties import (
    PROPERTY_CRC32,
    PROPERTY_DELAY,
    PROPERTY_KEYS,
    PROPERTY_SEPARATOR,
    PROPERTY_TAGS,
    PROPERTY_UNIQ_KEY,
    parse_properties,
    split_keys,
)

MAGIC_V1 = -626843481  # 0xDAA320A7
MAGIC_V2 = -626843477  # 0xDAA320AB
BLANK_MAGIC = -875286124  # 0xCBD43194
BLANK_RECORD_SIZE = 8  # what is written of an end-of-segment filler

# SYSFLAG bits
COMPRESSED_FLAG = 0x1
MULTI_TAGS_FLAG = 0x2
TRANSACTION_NOT_TYPE = 0x0
TRANSACTION_PREPARED_TYPE = 0x4
TRANSACTION_COMMIT_TYPE = 0x8
TRANSACTION_ROLLBACK_TYPE = 0xC
TRANSACTION_MASK = 0xC
BORNHOST_V6_FLAG = 0x10
STOREHOST_V6_FLAG = 0x20
NEED_UNWRAP_FLAG = 0x40
INNER_BATCH_FLAG = 0x80
COMPRESSION_TYPE_MASK = 0x700

DEFAULT_MAX_MESSAGE_SIZE = 4 * 1024 * 1024
RECORD_SLACK = 64 * 1024  # whole record may be maxMessageSize + 64 KiB
MAX_TOPIC_V1_CHARS = 127
MAX_TOPIC_V2_BYTES = 32767
CRC32_RESERVED_LEN = len(PROPERTY_CRC32) + 1 + 10 + 1  # 20

# Offsets of the fixed head (valid for any host width up to the born host).
POS_TOTALSIZE = 0
POS_MAGIC = 4
POS_BODYCRC = 8
POS_QUEUEID = 12
POS_FLAG = 16
POS_QUEUEOFFSET = 20
POS_PHYSICALOFFSET = 28
POS_SYSFLAG = 36
POS_BORNTIMESTAMP = 40
POS_BORNHOST = 48

_HEAD = struct.Struct(">iiiiiqqiq")  # up to and including BORNTIMESTAMP: 48 bytes
_I32 = struct.Struct(">i")
_I64 = struct.Struct(">q")
_I16 = struct.Struct(">h")
_TAIL = struct.Struct(">iq")  # RECONSUMETIMES, PREPARED TX OFFSET


def body_crc(body: bytes | bytearray | memoryview) -> int:
    """``UtilAll.crc32``: zlib CRC-32 with the top bit cleared (0 for an empty body)."""
    if not body:
        return 0
    return zlib.crc32(body) & 0x7FFFFFFF


def transaction_type(sys_flag: int) -> int:
    return sys_flag & TRANSACTION_MASK


def host_width(v6: bool) -> int:
    return 20 if v6 else 8


def record_length(body_len: int, topic_len: int, props_len: int, *, v2: bool, born_v6: bool, store_v6: bool) -> int:
    """``MessageExtEncoder.calMsgLength``."""
    return (
        4 + 4 + 4 + 4 + 4 + 8 + 8 + 4 + 8
        + host_width(born_v6) + 8 + host_width(store_v6) + 4 + 8
        + 4 + body_len
        + (2 if v2 else 1) + topic_len
        + 2 + props_len
    )  # fmt: skip


class Host(str):
    """A socket address as stored in a record: the text ``a.b.c.d:port`` or
    ``[8 full groups]:port`` (it compares and prints as that text), with ``ip`` and ``port``."""

    ip: str
    port: int

    def __new__(cls, ip: str, port: int) -> Host:
        self = super().__new__(cls, f"[{ip}]:{port}" if ":" in ip else f"{ip}:{port}")
        self.ip = ip
        self.port = int(port)
        return self

    def __getnewargs__(self) -> tuple[str, int]:  # type: ignore[override]  # pickling
        return self.ip, self.port

    def __repr__(self) -> str:
        return f"Host({self.ip!r}, {self.port})"

    def __str__(self) -> str:
        return str.__str__(self)

    @property
    def is_v6(self) -> bool:
        return ":" in self.ip

    def to_bytes(self) -> bytes:
        return _host_bytes(self.ip, self.port)

    @classmethod
    def parse(cls, text: str | tuple[str, int] | Host) -> Host:
        if isinstance(text, Host):
            return text
        return _parse_host(text)

    @classmethod
    def _parse(cls, text: str | tuple[str, int]) -> Host:
        """Parse ``1.2.3.4:5``, ``[::1]:5`` or a ``(ip, port)`` tuple."""
        if isinstance(text, Host):
            return text
        if isinstance(text, tuple):
            ip, port = text
        else:
            text = text.strip()
            if text.startswith("["):
                ip, _, port_s = text[1:].partition("]:")
            else:
                ip, _, port_s = text.rpartition(":")
            try:
                port = int(port_s)
            except ValueError as exc:
                raise CorruptDataError(f"invalid host address {text!r}") from exc
        try:
            addr = ipaddress.ip_address(ip)
        except ValueError as exc:
            raise CorruptDataError(f"invalid host address {ip!r}") from exc
        return cls(str(addr) if addr.version == 4 else _full_v6(addr), int(port))

    @classmethod
    def from_bytes(cls, data: bytes | memoryview) -> Host:
        if len(data) == 8:
            ip = str(ipaddress.IPv4Address(bytes(data[:4])))
        else:
            ip = _full_v6(ipaddress.IPv6Address(bytes(data[:16])))
        return cls(ip, _I32.unpack_from(data, len(data) - 4)[0])


@functools.lru_cache(maxsize=1024)
def _host_bytes(ip: str, port: int) -> bytes:
    return ipaddress.ip_address(ip).packed + _I32.pack(port)


@functools.lru_cache(maxsize=1024)
def _parse_host(text: str | tuple[str, int]) -> Host:
    return Host._parse(text)


def _full_v6(addr: ipaddress.IPv4Address | ipaddress.IPv6Address) -> str:
    # Java prints IPv6 addresses in full (8 groups); we keep the exploded form so that text round-trips.
    return addr.exploded


DEFAULT_HOST = Host("127.0.0.1", 0)


@dataclass(slots=True)
class MessageRecord:
    """One CommitLog message with every stored field."""

    topic: str
    body: bytes = b""
    queue_id: int = 0
    flag: int = 0
    queue_offset: int = 0
    commit_log_offset: int = 0
    sys_flag: int = 0
    born_timestamp: int = 0
    born_host: Host = DEFAULT_HOST
    store_timestamp: int = 0
    store_host: Host = DEFAULT_HOST
    reconsume_times: int = 0
    prepared_transaction_offset: int = 0
    properties_text: str = ""
    body_crc: int | None = None  # None: computed when encoding
    magic: int = 0  # 0: chosen by encode_record from the topic length (v2 above 127 chars)
    total_size: int = 0
    #: the parsed properties; ``None`` given here: parsed from ``properties_text`` on first access
    properties: dict[str, str] = field(default_factory=dict)

    @property
    def keys(self) -> list[str]:
        """The KEYS property split at its separator (empty without keys)."""
        return split_keys(self.properties.get(PROPERTY_KEYS))

    @property
    def size(self) -> int:
        """TOTALSIZE (the record's length in the CommitLog)."""
        return self.total_size

    @property
    def msg_id(self) -> str:
        """The offset message id (store host + commit log offset, hex)."""
        return (self.store_host.to_bytes() + self.commit_log_offset.to_bytes(8, "big", signed=True)).hex().upper()

    def to_json_dict(self) -> dict[str, object]:
        """The JSON shape of every CLI command that prints messages (the Spark column names)."""
        import base64

        return {
            "topic": self.topic, "flag": self.flag, "body": base64.b64encode(self.body).decode("ascii"),
            "properties": self.properties, "queueId": self.queue_id, "queueOffset": self.queue_offset,
            "commitLogOffset": self.commit_log_offset, "size": self.size, "bornTimestamp": self.born_timestamp,
            "storeTimestamp": self.store_timestamp, "bornHost": str(self.born_host),
            "storeHost": str(self.store_host), "sysFlag": self.sys_flag, "reconsumeTimes": self.reconsume_times,
            "bodyCRC": self.body_crc, "keys": self.keys, "tags": self.tags, "uniqKey": self.uniq_key,
        }

    @property
    def tags(self) -> str | None:
        return self.properties.get(PROPERTY_TAGS)

    @property
    def uniq_key(self) -> str | None:
        return self.properties.get(PROPERTY_UNIQ_KEY)

    @property
    def delay(self) -> str | None:
        return self.properties.get(PROPERTY_DELAY)

    @property
    def transaction_type(self) -> int:
        return self.sys_flag & TRANSACTION_MASK

    @property
    def is_v2(self) -> bool:
        return self.magic == MAGIC_V2


# ``properties`` is parsed from ``properties_text`` on first access when a record was made with
# ``properties=None`` (the readers that build many messages, e.g. ``query_by_key``, leave the
# parsing to the messages whose properties are looked at).  The field stays a dataclass field
# (``fields()``, ``__init__``, ``==``, ``repr``, ``replace`` and pickling read it through this
# descriptor, so they see the parsed dict); its storage is the class's slot.
_PROPERTIES_SLOT = MessageRecord.__dict__["properties"]
_props_get = _PROPERTIES_SLOT.__get__
_props_set = _PROPERTIES_SLOT.__set__


def _lazy_properties(obj: MessageRecord) -> dict[str, str]:
    d = _props_get(obj)
    if d is None:
        d = parse_properties(obj.properties_text)
        _props_set(obj, d)
    return d  # type: ignore[no-any-return]


MessageRecord.properties = property(_lazy_properties, _props_set, doc="the parsed properties")  # type: ignore[assignment,method-assign]


def record_slots() -> tuple[object, ...]:
    """The member descriptors (slots) of the fields of :class:`MessageRecord`, in constructor
    order, ``properties``'s being its slot under the lazy property: what a native builder fills to
    make records without calling ``__init__`` (the same objects ``__init__`` would make)."""
    return tuple(
        _PROPERTIES_SLOT if f.name == "properties" else MessageRecord.__dict__[f.name] for f in fields(MessageRecord)
    )


def choose_magic(topic: str, auto_version_on_topic_len: bool = True) -> int:
    """v2 when the topic has more than 127 (UTF-16) characters, as ``CommitLog.asyncPutMessage``."""
    return MAGIC_V2 if auto_version_on_topic_len and len(topic.encode("utf-16-le")) // 2 > MAX_TOPIC_V1_CHARS else MAGIC_V1


def make_crc_property(value: int) -> str:
    """``MessageDecoder.createCrc32``: ``__CRC32#\\x01`` + 10 digits, least significant first, + ``\\x02``."""
    digits = "".join(str((value // 10**i) % 10) for i in range(10))
    return f"{PROPERTY_CRC32}\x01{digits}{PROPERTY_SEPARATOR}"


def read_crc_property(properties_text: str) -> int | None:
    """The value of a trailing property CRC, or ``None`` when there is none."""
    marker = PROPERTY_CRC32 + "\x01"
    pos = properties_text.rfind(marker)
    if pos < 0:
        return None
    digits = properties_text[pos + len(marker) : pos + len(marker) + 10]
    if len(digits) != 10 or not digits.isdigit():
        return None
    return int(digits[::-1])


def encode_record(
    rec: MessageRecord,
    *,
    magic: int | None = None,
    append_prop_crc: bool = False,
    max_message_size: int = DEFAULT_MAX_MESSAGE_SIZE,
) -> bytes:
    """Encode ``rec`` as the broker stores it (queue offset, physical offset and store timestamp
    taken from ``rec``).  The v6 SYSFLAG bits are set from the host addresses.  With
    ``append_prop_crc`` the properties get the reserved CRC tail of ``enabledAppendPropCRC`` and the
    CRC of the finished record is written into it.
    """
    if magic is None:
        magic = rec.magic if rec.magic in (MAGIC_V1, MAGIC_V2) else choose_magic(rec.topic)
    if magic not in (MAGIC_V1, MAGIC_V2):
        raise UnknownMagicError(f"cannot encode a record with magic {magic:#x}")
    body = bytes(rec.body)
    if len(body) > max_message_size:
        raise MessageTooLargeError(f"message body of {len(body)} bytes exceeds maxMessageSize {max_message_size}")
    topic_b = rec.topic.encode("utf-8")
    if magic == MAGIC_V1 and len(topic_b) > MAX_TOPIC_V1_CHARS:
        raise InvalidTopicError(f"topic of {len(topic_b)} bytes cannot be stored with magic v1 (at most 127)")
    if len(topic_b) > MAX_TOPIC_V2_BYTES:
        raise InvalidTopicError(f"topic of {len(topic_b)} bytes is too long (at most {MAX_TOPIC_V2_BYTES})")
    props_text = rec.properties_text
    if append_prop_crc:
        if props_text and not props_text.endswith(PROPERTY_SEPARATOR):
            props_text += PROPERTY_SEPARATOR
        props_text += make_crc_property(0)
    props_b = props_text.encode("utf-8")
    if len(props_b) > 32767:
        raise PropertiesTooLargeError(f"properties of {len(props_b)} bytes exceed 32767 bytes")
    sys_flag = rec.sys_flag & ~(BORNHOST_V6_FLAG | STOREHOST_V6_FLAG)
    born, store = Host.parse(rec.born_host), Host.parse(rec.store_host)
    if born.is_v6:
        sys_flag |= BORNHOST_V6_FLAG
    if store.is_v6:
        sys_flag |= STOREHOST_V6_FLAG
    v2 = magic == MAGIC_V2
    total = record_length(len(body), len(topic_b), len(props_b), v2=v2, born_v6=born.is_v6, store_v6=store.is_v6)
    if total > max_message_size + RECORD_SLACK:
        raise MessageTooLargeError(f"record of {total} bytes exceeds maxMessageSize + 64 KiB")
    crc = body_crc(body) if rec.body_crc is None else rec.body_crc
    out = bytearray(total)
    _HEAD.pack_into(
        out, 0, total, magic, crc, rec.queue_id, rec.flag, rec.queue_offset, rec.commit_log_offset, sys_flag, rec.born_timestamp
    )
    pos = 48
    hb = born.to_bytes()
    out[pos : pos + len(hb)] = hb
    pos += len(hb)
    _I64.pack_into(out, pos, rec.store_timestamp)
    pos += 8
    hb = store.to_bytes()
    out[pos : pos + len(hb)] = hb
    pos += len(hb)
    _TAIL.pack_into(out, pos, rec.reconsume_times, rec.prepared_transaction_offset)
    pos += 12
    _I32.pack_into(out, pos, len(body))
    pos += 4
    out[pos : pos + len(body)] = body
    pos += len(body)
    if v2:
        _I16.pack_into(out, pos, len(topic_b))
        pos += 2
    else:
        out[pos] = len(topic_b)
        pos += 1
    out[pos : pos + len(topic_b)] = topic_b
    pos += len(topic_b)
    _I16.pack_into(out, pos, len(props_b))
    pos += 2
    out[pos : pos + len(props_b)] = props_b
    if append_prop_crc:
        patch_prop_crc(out, 0, total)
    return bytes(out)


def patch_prop_crc(buf: bytearray | memoryview, pos: int, total: int) -> None:
    """Write the property CRC (over the first ``total - 20`` bytes) into the reserved tail."""
    crc = body_crc(bytes(buf[pos : pos + total - CRC32_RESERVED_LEN]))
    tail = make_crc_property(crc).encode("ascii")
    buf[pos + total - CRC32_RESERVED_LEN : pos + total] = tail


def encode_blank(total_size: int) -> bytes:
    """The 8 bytes of an end-of-segment filler whose TOTALSIZE is the remaining space."""
    return struct.pack(">ii", total_size, BLANK_MAGIC)


def store_timestamp_position(sys_flag: int) -> int:
    """``pickupStoreTimestamp``: 48 + born-host width."""
    return POS_BORNHOST + host_width(bool(sys_flag & BORNHOST_V6_FLAG))


class CheckResult(NamedTuple):
    """Outcome of :func:`check_record` (``checkMessageAndReturnSize``).

    ``size`` > 0 and ``success``: a valid record; ``size == 0`` and ``success``: a blank
    end-of-segment record; ``size == -1``: unreadable (stop); ``size > 0`` and not ``success``:
    the length formula disagrees with TOTALSIZE (the dispatcher skips such a record).
    """

    size: int
    success: bool
    record: MessageRecord | None
    error: str | None = None


def check_record(
    buf: bytes | bytearray | memoryview,
    pos: int = 0,
    end: int | None = None,
    *,
    check_crc: bool = True,
    verify_prop_crc: bool = False,
    read_body: bool = True,
) -> CheckResult:
    """Validate the record at ``pos`` exactly like ``CommitLog.checkMessageAndReturnSize``."""
    if end is None:
        end = len(buf)
    remaining = end - pos
    if remaining <= 4:
        return CheckResult(-1, False, None, "no record header")
    total = _I32.unpack_from(buf, pos)[0]
    magic = _I32.unpack_from(buf, pos + 4)[0] if remaining >= 8 else 0
    if magic == BLANK_MAGIC:
        return CheckResult(0, True, None)
    if total < 0 or total - 4 > remaining - 4:
        return CheckResult(-1, False, None, f"record of {total} bytes is truncated ({remaining} bytes left)")
    if magic not in (MAGIC_V1, MAGIC_V2):
        return CheckResult(-1, False, None, f"unknown magic code {magic & 0xFFFFFFFF:#010x}")
    try:
        rec, computed = _decode_fields(buf, pos, pos + total, magic, read_body=read_body or check_crc)
    except (struct.error, ValueError, IndexError, CorruptDataError) as exc:
        return CheckResult(-1, False, None, f"undecodable record: {exc}")
    if check_crc and not verify_prop_crc and rec.body_crc is not None and body_crc(rec.body) != rec.body_crc:
        return CheckResult(-1, False, None, f"body CRC mismatch: stored {rec.body_crc}, computed {body_crc(rec.body)}")
    if verify_prop_crc:
        stored = read_crc_property(rec.properties_text)
        if stored is None or not rec.properties_text.endswith(PROPERTY_SEPARATOR):
            return CheckResult(-1, False, None, "property CRC missing")
        actual = body_crc(bytes(buf[pos : pos + total - CRC32_RESERVED_LEN]))
        if stored != actual:
            return CheckResult(-1, False, None, f"property CRC mismatch: stored {stored}, computed {actual}")
    if computed != total:
        return CheckResult(total, False, None, f"length mismatch: TOTALSIZE {total}, fields add up to {computed}")
    if not read_body:
        rec.body = b""
    return CheckResult(total, True, rec)


def _decode_fields(
    buf: bytes | bytearray | memoryview, pos: int, end: int, magic: int, *, read_body: bool
) -> tuple[MessageRecord, int]:
    (total, _magic, crc, queue_id, flag, queue_offset, phys, sys_flag, born_ts) = _HEAD.unpack_from(buf, pos)
    p = pos + 48
    bw = host_width(bool(sys_flag & BORNHOST_V6_FLAG))
    sw = host_width(bool(sys_flag & STOREHOST_V6_FLAG))
    if p + bw + 8 + sw + 12 + 4 > end:
        raise TruncatedRecordError("record too short for its fixed fields")
    born = Host.from_bytes(bytes(buf[p : p + bw]))
    p += bw
    store_ts = _I64.unpack_from(buf, p)[0]
    p += 8
    store = Host.from_bytes(bytes(buf[p : p + sw]))
    p += sw
    reconsume, prepared = _TAIL.unpack_from(buf, p)
    p += 12
    body_len = _I32.unpack_from(buf, p)[0]
    p += 4
    if body_len < 0 or p + body_len > end:
        raise TruncatedRecordError(f"body length {body_len} runs past the record")
    body = bytes(buf[p : p + body_len]) if read_body else b""
    p += body_len
    if magic == MAGIC_V2:
        topic_len = _I16.unpack_from(buf, p)[0]
        p += 2
    else:
        topic_len = struct.unpack_from(">b", buf, p)[0]
        p += 1
    if topic_len < 0 or p + topic_len > end:
        raise TruncatedRecordError(f"topic length {topic_len} runs past the record")
    topic = bytes(buf[p : p + topic_len]).decode("utf-8", "replace")
    p += topic_len
    if p + 2 > end:
        raise TruncatedRecordError("record too short for its properties length")
    props_len = _I16.unpack_from(buf, p)[0]
    p += 2
    if props_len < 0 or p + props_len > end:
        raise TruncatedRecordError(f"properties length {props_len} runs past the record")
    props_text = bytes(buf[p : p + props_len]).decode("utf-8", "replace")
    computed = record_length(
        body_len, topic_len, props_len, v2=magic == MAGIC_V2, born_v6=bw == 20, store_v6=sw == 20
    )
    rec = MessageRecord(
        topic=topic,
        body=body,
        queue_id=queue_id,
        flag=flag,
        queue_offset=queue_offset,
        commit_log_offset=phys,
        sys_flag=sys_flag,
        born_timestamp=born_ts,
        born_host=born,
        store_timestamp=store_ts,
        store_host=store,
        reconsume_times=reconsume,
        prepared_transaction_offset=prepared,
        properties_text=props_text,
        body_crc=crc,
        magic=magic,
        total_size=total,
        properties=parse_properties(props_text),
    )
    return rec, computed


def decode_record(
    buf: bytes | bytearray | memoryview, pos: int = 0, *, check_crc: bool = False, path: str | None = None,
    base_offset: int = 0,
) -> MessageRecord:
    """Decode the record at ``pos`` or raise a typed error naming the offset.

    ``base_offset`` is added to ``pos`` in error messages (the segment's start offset)."""
    res = check_record(buf, pos, check_crc=check_crc)
    if res.success and res.record is not None:
        return res.record
    where = base_offset + pos
    if res.size == 0:
        raise CorruptDataError("blank end-of-segment record where a message was expected", path=path, offset=where)
    msg = res.error or "invalid record"
    if msg.startswith("unknown magic"):
        raise UnknownMagicError(msg, path=path, offset=where)
    if "CRC" in msg:
        raise CrcMismatchError(msg, path=path, offset=where)
    if "truncated" in msg or "no record header" in msg:
        raise TruncatedRecordError(msg, path=path, offset=where)
    raise CorruptDataError(msg, path=path, offset=where)
