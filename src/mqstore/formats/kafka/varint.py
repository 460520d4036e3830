"""Zig-zag varints as used inside Kafka v2 records (spec §2.3).

A value ``n`` is zig-zag mapped (``(n << 1) ^ (n >> 31)`` for 32-bit ints, ``>> 63`` for longs) and
then written 7 bits per byte, least significant group first, with the high bit meaning "more bytes
follow".  An int takes at most 5 bytes, a long at most 10.
"""

from __future__ import annotations

from mqstore.errors import CorruptDataError, InvalidArgumentError, TruncatedRecordError

INT32_MIN = -(1 << 31)
INT32_MAX = (1 << 31) - 1
INT64_MIN = -(1 << 63)
INT64_MAX = (1 << 63) - 1


def _zigzag(n: int, bits: int) -> int:
    return ((n << 1) ^ (n >> (bits - 1))) & ((1 << bits) - 1)


def encode_varint(n: int) -> bytes:
    """Encode a signed 32-bit int as a zig-zag varint (1..5 bytes)."""
    if not INT32_MIN <= n <= INT32_MAX:
        raise InvalidArgumentError(f"varint out of int32 range: {n}")
    return _encode_unsigned(_zigzag(n, 32))


def encode_varlong(n: int) -> bytes:
    """Encode a signed 64-bit int as a zig-zag varlong (1..10 bytes)."""
    if not INT64_MIN <= n <= INT64_MAX:
        raise InvalidArgumentError(f"varlong out of int64 range: {n}")
    return _encode_unsigned(_zigzag(n, 64))


def _encode_unsigned(u: int) -> bytes:
    out = bytearray()
    while u >= 0x80:
        out.append((u & 0x7F) | 0x80)
        u >>= 7
    out.append(u)
    return bytes(out)


def _decode_unsigned(buf: bytes | bytearray | memoryview, pos: int, end: int, max_bytes: int) -> tuple[int, int]:
    u = 0
    shift = 0
    for i in range(max_bytes):
        if pos + i >= end:
            raise TruncatedRecordError("varint runs past the end of its buffer", offset=pos)
        b = buf[pos + i]
        u |= (b & 0x7F) << shift
        if not b & 0x80:
            return u, pos + i + 1
        shift += 7
    raise CorruptDataError(f"varint longer than {max_bytes} bytes", offset=pos)


def _decode(buf: bytes | bytearray | memoryview, pos: int, end: int, max_bytes: int, bits: int) -> tuple[int, int]:
    u, nxt = _decode_unsigned(buf, pos, end, max_bytes)
    u &= (1 << bits) - 1
    return (u >> 1) ^ -(u & 1), nxt


def encode_uvarint(u: int) -> bytes:
    """Encode an unsigned 32-bit int as a plain (not zig-zag) varint, as the Kafka protocol's
    compact lengths and tagged fields are (1..5 bytes)."""
    if u < 0 or u >= 1 << 32:
        raise InvalidArgumentError(f"unsigned varint out of range: {u}")
    return _encode_unsigned(u)


def decode_uvarint(buf: bytes | bytearray | memoryview, pos: int = 0, end: int | None = None) -> tuple[int, int]:
    """Decode a plain unsigned varint (at most 5 bytes) at ``pos``; return ``(value, next_position)``."""
    return _decode_unsigned(buf, pos, len(buf) if end is None else end, 5)


def decode_varint(buf: bytes | bytearray | memoryview, pos: int = 0, end: int | None = None) -> tuple[int, int]:
    """Decode a zig-zag varint (int32) at ``pos``; return ``(value, next_position)``."""
    return _decode(buf, pos, len(buf) if end is None else end, 5, 32)


def decode_varlong(buf: bytes | bytearray | memoryview, pos: int = 0, end: int | None = None) -> tuple[int, int]:
    """Decode a zig-zag varlong (int64) at ``pos``; return ``(value, next_position)``."""
    return _decode(buf, pos, len(buf) if end is None else end, 10, 64)
