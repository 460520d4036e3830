"""Offset message ids (file names are :mod:`mqstore.storage.rocketmq.layout`'s)."""

from __future__ import annotations

import struct

from mqstore.errors import InvalidArgumentError
from mqstore.formats.rocketmq.record import Host


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

