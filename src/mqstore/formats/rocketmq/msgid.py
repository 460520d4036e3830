"""Offset message ids and the time-stamped names of index files."""

from __future__ import annotations

import datetime as _dt
import struct

from mqstore.errors import InvalidArgumentError
from mqstore.formats.rocketmq.record import Host

SEGMENT_NAME_DIGITS = 20


def offset_to_file_name(offset: int) -> str:
    """``UtilAll.offset2FileName``: 20-digit zero-padded decimal."""
    if offset < 0:
        raise InvalidArgumentError(f"negative segment offset {offset}")
    return f"{offset:020d}"


def create_message_id(store_host: Host | str, commit_log_offset: int) -> str:
    """``MessageDecoder.createMessageId``: hex of store ip + port + physical offset (uppercase)."""
    host = Host.parse(store_host)
    return (host.to_bytes() + struct.pack(">q", commit_log_offset)).hex().upper()


def decode_message_id(msg_id: str) -> tuple[Host, int]:
    """The store host and physical offset encoded in an offset message id (32 or 56 hex chars)."""
    text = msg_id.strip()
    if len(text) not in (32, 56):
        raise InvalidArgumentError(f"offset message id must have 32 or 56 hex digits, got {len(text)}")
    try:
        raw = bytes.fromhex(text)
    except ValueError as exc:
        raise InvalidArgumentError(f"offset message id {msg_id!r} is not hexadecimal") from exc
    if len(raw) not in (16, 28):  # fromhex skips whitespace: "7F 00 ..." is 32 characters, fewer bytes
        raise InvalidArgumentError(f"offset message id {msg_id!r} must be 32 or 56 hex digits without spaces")
    host = Host.from_bytes(raw[:-8])
    return host, struct.unpack(">q", raw[-8:])[0]


def index_file_name(timestamp_ms: int) -> str:
    """``yyyyMMddHHmmssSSS`` of ``timestamp_ms`` in UTC (17 digits)."""
    t = _dt.datetime.fromtimestamp(timestamp_ms / 1000.0, tz=_dt.UTC)
    ms = timestamp_ms % 1000
    return t.strftime("%Y%m%d%H%M%S") + f"{ms:03d}"


def index_file_name_to_ms(name: str) -> int:
    """Inverse of :func:`index_file_name` (for names we wrote)."""
    t = _dt.datetime.strptime(name[:14], "%Y%m%d%H%M%S").replace(tzinfo=_dt.UTC)
    return int(t.timestamp()) * 1000 + int(name[14:17])
