"""Values of the KRaft control records (control record types 2–6), pure codecs.

A control record's key is ``int16 version, int16 type``; for the KRaft types its value is one
message of Kafka's message-definition format at version 0, all of them "flexible" (KIP-482):

* integers big-endian (``int16``/``int32``/``int64``; ``uint16`` unsigned);
* ``string``: compact string, unsigned varint ``length + 1`` then UTF-8 bytes;
* ``uuid``: 16 bytes (shown as Kafka's ``Uuid.toString``: URL-safe base64 without padding);
* ``[]T``: compact array, unsigned varint ``count + 1`` (0 = null) then the elements;
* every struct (the message, each array element, each nested struct) ends with its tagged fields:
  unsigned varint count, then per field unsigned varint tag, unsigned varint size, the bytes.

Schemas (field order; JSON keys as Kafka's generated JSON converters name them):

* 2 LeaderChange: version int16, leaderId int32, voters [voterId int32], grantingVoters [voterId int32]
* 3 SnapshotHeader: version int16, lastContainedLogTimestamp int64
* 4 SnapshotFooter: version int16
* 5 KRaftVersion: version int16, kRaftVersion int16
* 6 KRaftVoters: version int16, voters [voterId int32, voterUuid uuid, endpoints [name string,
  host string, port uint16], kRaftVersionFeature {minSupportedVersion int16, maxSupportedVersion int16}]

:func:`decode_kraft_control` returns the fields as an ordered dict — its compact JSON is what
``kafka-dump-log`` prints after ``LeaderChange:`` / ``SnapshotHeader`` / ... .  Unknown tagged
fields are skipped (Kafka's JSON output does not show them either).
"""

from __future__ import annotations

import base64
import json
import struct
from typing import Any

from mqstore.errors import CorruptDataError

Schema = list[tuple[str, Any]]

_VOTER: Schema = [("voterId", "int32")]
_ENDPOINT: Schema = [("name", "string"), ("host", "string"), ("port", "uint16")]
_FEATURE: Schema = [("minSupportedVersion", "int16"), ("maxSupportedVersion", "int16")]

SCHEMAS: dict[int, tuple[str, str, Schema]] = {
    # type: (label as kafka-dump-log prints it, separator after the label, schema)
    2: ("LeaderChange", ": ", [("version", "int16"), ("leaderId", "int32"), ("voters", [_VOTER]),
                               ("grantingVoters", [_VOTER])]),
    3: ("SnapshotHeader", " ", [("version", "int16"), ("lastContainedLogTimestamp", "int64")]),
    4: ("SnapshotFooter", " ", [("version", "int16")]),
    5: ("KRaftVersion", " ", [("version", "int16"), ("kRaftVersion", "int16")]),
    6: ("KRaftVoters", " ", [("version", "int16"), ("voters", [[
        ("voterId", "int32"), ("voterUuid", "uuid"), ("endpoints", [_ENDPOINT]),
        ("kRaftVersionFeature", _FEATURE)]])]),
}

_FIXED = {"int16": struct.Struct(">h"), "int32": struct.Struct(">i"), "int64": struct.Struct(">q"),
          "uint16": struct.Struct(">H")}


class _Reader:
    def __init__(self, buf: bytes, what: str) -> None:
        self.buf, self.pos, self.what = buf, 0, what

    def fail(self, msg: str) -> CorruptDataError:
        return CorruptDataError(f"{self.what}: {msg} at byte {self.pos}", offset=self.pos)

    def take(self, n: int) -> bytes:
        if n < 0 or self.pos + n > len(self.buf):
            raise self.fail(f"truncated ({n} bytes needed, {len(self.buf) - self.pos} left)")
        b = self.buf[self.pos : self.pos + n]
        self.pos += n
        return b

    def uvarint(self) -> int:
        shift = result = 0
        while True:
            if shift > 28:
                raise self.fail("unsigned varint longer than 5 bytes")
            b = self.take(1)[0]
            result |= (b & 0x7F) << shift
            if not b & 0x80:
                return result
            shift += 7


def _read_struct(r: _Reader, schema: Schema) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for name, typ in schema:
        if isinstance(typ, str):
            if typ in _FIXED:
                s = _FIXED[typ]
                out[name] = s.unpack(r.take(s.size))[0]
            elif typ == "string":
                n = r.uvarint()
                if n == 0:
                    raise r.fail(f"null string in non-nullable field {name}")
                try:
                    out[name] = r.take(n - 1).decode("utf-8")
                except UnicodeDecodeError:
                    raise r.fail(f"field {name} is not UTF-8") from None
            elif typ == "uuid":
                out[name] = base64.urlsafe_b64encode(r.take(16)).decode().rstrip("=")
            else:  # pragma: no cover - schema typo
                raise AssertionError(typ)
        elif isinstance(typ, list) and len(typ) == 1 and isinstance(typ[0], list):  # array of structs
            n = r.uvarint()
            if n == 0:
                raise r.fail(f"null array in non-nullable field {name}")
            if n - 1 > len(r.buf) - r.pos:
                raise r.fail(f"array {name} claims {n - 1} elements")
            out[name] = [_read_struct(r, typ[0]) for _ in range(n - 1)]
        else:  # nested struct
            out[name] = _read_struct(r, typ)
    for _ in range(r.uvarint()):  # tagged fields: skipped
        r.uvarint()
        r.take(r.uvarint())
    return out


def decode_kraft_control(ctype: int, value: bytes | None) -> dict[str, Any]:
    """The fields of a KRaft control record value (types 2–6), raising :class:`CorruptDataError`."""
    if ctype not in SCHEMAS:
        raise CorruptDataError(f"control record type {ctype} is not a KRaft control record")
    label, _, schema = SCHEMAS[ctype]
    if value is None:
        raise CorruptDataError(f"{label} control record without a value")
    r = _Reader(bytes(value), label)
    out = _read_struct(r, schema)
    if r.pos != len(r.buf):
        raise r.fail(f"{len(r.buf) - r.pos} bytes after the message")
    return out


def kraft_control_text(ctype: int, fields: dict[str, Any]) -> str:
    """``LeaderChange: {...}`` / ``SnapshotHeader {...}`` ... as kafka-dump-log prints it."""
    label, sep, _ = SCHEMAS[ctype]
    return label + sep + json.dumps(fields, separators=(",", ":"), ensure_ascii=False)


def _uvarint(n: int) -> bytes:
    out = bytearray()
    while True:
        b = n & 0x7F
        n >>= 7
        if n:
            out.append(b | 0x80)
        else:
            out.append(b)
            return bytes(out)


def _write_struct(schema: Schema, obj: dict[str, Any]) -> bytes:
    out = bytearray()
    for name, typ in schema:
        v = obj[name]
        if isinstance(typ, str):
            if typ in _FIXED:
                out += _FIXED[typ].pack(v)
            elif typ == "string":
                b = v.encode("utf-8")
                out += _uvarint(len(b) + 1) + b
            else:  # uuid
                out += base64.urlsafe_b64decode(v + "==")
        elif isinstance(typ, list) and len(typ) == 1 and isinstance(typ[0], list):
            out += _uvarint(len(v) + 1)
            for item in v:
                out += _write_struct(typ[0], item)
        else:
            out += _write_struct(typ, v)
    out += b"\x00"  # no tagged fields
    return bytes(out)


def encode_kraft_control(ctype: int, fields: dict[str, Any]) -> bytes:
    """The value bytes Kafka writes for these fields (no tagged fields)."""
    if ctype not in SCHEMAS:
        raise CorruptDataError(f"control record type {ctype} is not a KRaft control record")
    return _write_struct(SCHEMAS[ctype][2], fields)


def control_key(ctype: int, version: int = 0) -> bytes:
    """The key of a control record: int16 version, int16 type."""
    return struct.pack(">hh", version, ctype)
