"""Kafka's message serialization, driven by small schema descriptions (pure bytes in / out).

Kafka describes every protocol message, KRaft metadata record and coordinator record
(``__consumer_offsets``, ``__transaction_state``, ``__share_group_state``) in a JSON schema; its
build generates a reader and writer per message.  Here a schema is a :class:`Schema` (a tuple of
:class:`Field`), written by hand in Python from those public definitions, and ONE generic codec
reads and writes any of them:

* fixed-width big-endian ints ``int8 int16 uint16 int32 uint32 int64``, ``float64``, ``bool``
  (one byte, non-zero = true), ``uuid`` (16 bytes);
* in *flexible* versions (``Schema.flexible``): strings, byte arrays and arrays carry an unsigned
  varint of ``length + 1`` (0 = null) and every struct ends with a tagged-field section: an
  unsigned varint count, then per field ``uvarint tag, uvarint size, data`` in ascending tag order;
* in older versions: strings an int16 length (−1 = null), bytes and arrays an int32 length / count
  (−1 = null), no tagged fields;
* a nullable single struct is preceded by an int8 (−1 = null, 1 = present).

Decoded messages are plain dicts keyed by the camel-case field name (``PartitionId`` ->
``partitionId``, what Kafka's JSON converters print); uuids are Kafka's text form (URL-safe
base64, no padding), bytes stay ``bytes``.  Tagged fields absent from the data take their default;
tagged fields the schema does not know are kept under ``_unknownTaggedFields`` as
``[{"tag": n, "data": bytes}]`` so :func:`encode_message` writes them back unchanged.
"""

from __future__ import annotations

import base64
import struct
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from mqstore.errors import CorruptDataError, InvalidArgumentError, TruncatedRecordError
from mqstore.formats.kafka.varint import decode_uvarint, encode_uvarint

MAX_VERSION = 0x7FFF
UNKNOWN_TAGGED = "_unknownTaggedFields"

_FIXED: dict[str, tuple[str, int]] = {
    "int8": (">b", 1), "int16": (">h", 2), "uint16": (">H", 2), "int32": (">i", 4),
    "uint32": (">I", 4), "int64": (">q", 8), "float64": (">d", 8),
}
_RANGES: dict[str, tuple[int, int]] = {
    "int8": (-(1 << 7), (1 << 7) - 1), "int16": (-(1 << 15), (1 << 15) - 1), "uint16": (0, (1 << 16) - 1),
    "int32": (-(1 << 31), (1 << 31) - 1), "uint32": (0, (1 << 32) - 1), "int64": (-(1 << 63), (1 << 63) - 1),
}
SCALAR_TYPES = frozenset(_FIXED) | {"bool", "string", "bytes", "uuid"}


def parse_versions(spec: str | None) -> tuple[int, int] | None:
    """``"0+"`` -> (0, MAX), ``"1-3"`` -> (1, 3), ``"2"`` -> (2, 2), ``None``/``"none"`` -> None."""
    if spec is None or spec == "none":
        return None
    if spec.endswith("+"):
        return int(spec[:-1]), MAX_VERSION
    if "-" in spec:
        lo, hi = spec.split("-", 1)
        return int(lo), int(hi)
    return int(spec), int(spec)


def _in(rng: tuple[int, int] | None, version: int) -> bool:
    return rng is not None and rng[0] <= version <= rng[1]


def json_name(name: str) -> str:
    """Kafka's JSON field name: the schema name with its first letter in lower case."""
    return name[:1].lower() + name[1:]


@dataclass(frozen=True)
class Field:
    """One field of a schema.  ``type`` is a scalar (``int32``, ``string``, ...), ``[]scalar``,
    ``[]Name`` (array of structs, ``fields`` given) or ``Name`` (one struct, ``fields`` given)."""

    name: str
    type: str
    versions: tuple[int, int] | None
    nullable: tuple[int, int] | None = None
    tag: int | None = None
    tagged: tuple[int, int] | None = None
    default: Any = None
    fields: tuple[Field, ...] | None = None

    @property
    def key(self) -> str:
        return json_name(self.name)

    @property
    def is_array(self) -> bool:
        return self.type.startswith("[]")

    @property
    def element(self) -> str:
        return self.type[2:] if self.is_array else self.type

    @property
    def is_struct(self) -> bool:
        return self.element not in SCALAR_TYPES

    def present(self, version: int) -> bool:
        return _in(self.versions, version) or _in(self.tagged, version)

    def is_tagged(self, version: int) -> bool:
        return _in(self.tagged, version)

    def is_nullable(self, version: int) -> bool:
        return _in(self.nullable, version)

    def default_value(self) -> Any:
        """The value an absent tagged field (or a field missing from a version) takes."""
        if self.default is not None:
            return self.default
        if self.is_nullable(MAX_VERSION) or self.is_nullable(0):
            return None
        if self.is_array:
            return []
        return {"int8": 0, "int16": 0, "uint16": 0, "int32": 0, "uint32": 0, "int64": 0, "float64": 0.0,
                "bool": False, "string": "", "bytes": b"", "uuid": ZERO_UUID}.get(self.type)


def F(name: str, type_: str, versions: str = "0+", *, nullable: str | None = None, tag: int | None = None,
      tagged: str | None = None, default: Any = None, fields: Sequence[Field] | None = None) -> Field:
    """Shorthand to write schemas close to Kafka's JSON (``tag`` given -> tagged in ``tagged`` or
    ``versions``)."""
    vr = parse_versions(versions)
    tr = parse_versions(tagged if tagged is not None else versions) if tag is not None else None
    return Field(name, type_, None if tag is not None else vr, parse_versions(nullable), tag, tr, default,
                 tuple(fields) if fields is not None else None)


@dataclass(frozen=True)
class Schema:
    """A message: its name, valid versions, first flexible version (None: never) and fields."""

    name: str
    valid: tuple[int, int]
    flexible: tuple[int, int] | None
    fields: tuple[Field, ...]

    def is_flexible(self, version: int) -> bool:
        return _in(self.flexible, version)

    def check_version(self, version: int) -> None:
        if not self.valid[0] <= version <= self.valid[1]:
            raise UnsupportedVersionError(
                f"{self.name} version {version} is not known (known: {self.valid[0]}..{self.valid[1]})")


def S(name: str, valid: str, flexible: str | None, *fields: Field) -> Schema:
    v = parse_versions(valid)
    assert v is not None
    return Schema(name, v, parse_versions(flexible), tuple(fields))


class UnsupportedVersionError(CorruptDataError):
    """A record names a schema version this decoder does not know."""


# ----------------------------------------------------------------------------- uuid / varints
ZERO_UUID = "AAAAAAAAAAAAAAAAAAAAAA"


def uuid_to_str(b: bytes) -> str:
    """Kafka's ``Uuid.toString``: URL-safe base64 of the 16 bytes without padding."""
    return base64.urlsafe_b64encode(b).decode("ascii").rstrip("=")


def uuid_from_str(s: str) -> bytes:
    try:
        raw = base64.urlsafe_b64decode(s + "=" * (-len(s) % 4))
    except (ValueError, TypeError) as exc:
        raise InvalidArgumentError(f"not a Kafka uuid: {s!r}") from exc
    if len(raw) != 16:
        raise InvalidArgumentError(f"not a Kafka uuid (16 bytes): {s!r}")
    return raw


# ----------------------------------------------------------------------------- decoding
class _Reader:
    __slots__ = ("buf", "end", "pos")

    def __init__(self, buf: bytes | bytearray | memoryview, pos: int, end: int) -> None:
        self.buf, self.pos, self.end = buf, pos, end

    def take(self, n: int) -> bytes:
        if n < 0 or self.pos + n > self.end:
            raise TruncatedRecordError(f"field of {n} bytes runs past the end of the data", offset=self.pos)
        b = bytes(self.buf[self.pos:self.pos + n])
        self.pos += n
        return b

    def fixed(self, t: str) -> Any:
        fmt, size = _FIXED[t]
        return struct.unpack(fmt, self.take(size))[0]

    def uvarint(self) -> int:
        v, self.pos = decode_uvarint(self.buf, self.pos, self.end)
        return v

    def length(self, flexible: bool, wide: bool) -> int:
        """Length / count: -1 means null."""
        if flexible:
            return self.uvarint() - 1
        return int(self.fixed("int32" if wide else "int16"))


def _read_scalar(r: _Reader, t: str, flexible: bool, nullable: bool, name: str) -> Any:
    if t in _FIXED:
        return r.fixed(t)
    if t == "bool":
        return r.take(1) != b"\x00"
    if t == "uuid":
        return uuid_to_str(r.take(16))
    n = r.length(flexible, wide=(t == "bytes"))
    if n < 0:
        if n == -1 and nullable:
            return None
        raise CorruptDataError(f"field {name}: length {n} for a non-nullable {t}", offset=r.pos)
    raw = r.take(n)
    if t == "bytes":
        return raw
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise CorruptDataError(f"field {name}: string is not valid UTF-8", offset=r.pos - n) from exc


def _read_value(r: _Reader, f: Field, version: int, flexible: bool) -> Any:
    nullable = f.is_nullable(version)
    if f.is_array:
        n = r.length(flexible, wide=True)
        if n < 0:
            if n == -1 and nullable:
                return None
            raise CorruptDataError(f"field {f.name}: array count {n}", offset=r.pos)
        if n > r.end - r.pos:  # every element takes at least one byte
            raise TruncatedRecordError(f"field {f.name}: array of {n} elements runs past the end", offset=r.pos)
        if f.is_struct:
            assert f.fields is not None
            return [_read_struct(r, f.fields, version, flexible) for _ in range(n)]
        return [_read_scalar(r, f.element, flexible, False, f.name) for _ in range(n)]
    if f.is_struct:
        assert f.fields is not None
        if nullable:
            marker = r.fixed("int8")
            if marker < 0:
                return None
        return _read_struct(r, f.fields, version, flexible)
    return _read_scalar(r, f.type, flexible, nullable, f.name)


def _read_struct(r: _Reader, fields: tuple[Field, ...], version: int, flexible: bool) -> dict[str, Any]:
    out: dict[str, Any] = {}
    tagged: dict[int, Field] = {}
    for f in fields:
        if f.is_tagged(version):
            if flexible:
                tagged[f.tag] = f  # type: ignore[index]
                out[f.key] = f.default_value()
            continue
        if _in(f.versions, version):
            out[f.key] = _read_value(r, f, version, flexible)
    if flexible:
        unknown: list[dict[str, Any]] = []
        count = r.uvarint()
        prev = -1
        for _ in range(count):
            tag = r.uvarint()
            size = r.uvarint()
            if tag <= prev:
                raise CorruptDataError(f"tagged fields out of order (tag {tag} after {prev})", offset=r.pos)
            prev = tag
            end = r.pos + size
            if end > r.end:
                raise TruncatedRecordError(f"tagged field {tag} of {size} bytes runs past the end", offset=r.pos)
            tf = tagged.get(tag)
            if tf is None:
                unknown.append({"tag": tag, "data": r.take(size)})
                continue
            sub = _Reader(r.buf, r.pos, end)
            out[tf.key] = _read_value(sub, tf, version, flexible)
            if sub.pos != end:
                raise CorruptDataError(f"tagged field {tf.name}: {end - sub.pos} bytes left over", offset=sub.pos)
            r.pos = end
        if unknown:
            out[UNKNOWN_TAGGED] = unknown
    return out


def decode_message(schema: Schema, version: int, buf: bytes | bytearray | memoryview, pos: int = 0,
                   end: int | None = None, *, exact: bool = True) -> tuple[dict[str, Any], int]:
    """Decode ``schema`` at ``version`` from ``buf[pos:end]``; return ``(message, next position)``.

    With ``exact`` (default) bytes left after the message are an error (a record value holds
    exactly one message).  Raises :class:`CorruptDataError` / :class:`TruncatedRecordError` /
    :class:`UnsupportedVersionError`.
    """
    schema.check_version(version)
    r = _Reader(buf, pos, len(buf) if end is None else end)
    msg = _read_struct(r, schema.fields, version, schema.is_flexible(version))
    if exact and r.pos != r.end:
        raise CorruptDataError(f"{schema.name} v{version}: {r.end - r.pos} bytes after the message", offset=r.pos)
    return msg, r.pos


# ----------------------------------------------------------------------------- encoding
def _w_len(out: bytearray, n: int, flexible: bool, wide: bool) -> None:
    if flexible:
        out += encode_uvarint(n + 1)
    else:
        out += struct.pack(">i" if wide else ">h", n)


def _w_scalar(out: bytearray, t: str, v: Any, flexible: bool, nullable: bool, name: str) -> None:
    if t in _FIXED:
        if t != "float64":
            lo, hi = _RANGES[t]
            if not isinstance(v, int) or isinstance(v, bool) or not lo <= v <= hi:
                raise InvalidArgumentError(f"field {name}: {v!r} is not a {t}")
        out += struct.pack(_FIXED[t][0], v)
        return
    if t == "bool":
        out.append(1 if v else 0)
        return
    if t == "uuid":
        out += uuid_from_str(v)
        return
    if v is None:
        if not nullable:
            raise InvalidArgumentError(f"field {name} is not nullable")
        _w_len(out, -1, flexible, wide=(t == "bytes"))
        return
    raw = bytes(v) if t == "bytes" else str(v).encode("utf-8")
    if t == "string" and not flexible and len(raw) > 0x7FFF:
        raise InvalidArgumentError(f"field {name}: string longer than 32767 bytes")
    _w_len(out, len(raw), flexible, wide=(t == "bytes"))
    out += raw


def _w_value(out: bytearray, f: Field, v: Any, version: int, flexible: bool) -> None:
    nullable = f.is_nullable(version)
    if f.is_array:
        if v is None:
            if not nullable:
                raise InvalidArgumentError(f"field {f.name} is not nullable")
            _w_len(out, -1, flexible, wide=True)
            return
        _w_len(out, len(v), flexible, wide=True)
        for e in v:
            if f.is_struct:
                assert f.fields is not None
                _w_struct(out, f.fields, e, version, flexible)
            else:
                _w_scalar(out, f.element, e, flexible, False, f.name)
        return
    if f.is_struct:
        assert f.fields is not None
        if nullable:
            if v is None:
                out += b"\xff"
                return
            out += b"\x01"
        elif v is None:
            raise InvalidArgumentError(f"field {f.name} is not nullable")
        _w_struct(out, f.fields, v, version, flexible)
        return
    _w_scalar(out, f.type, v, flexible, nullable, f.name)


def _w_struct(out: bytearray, fields: tuple[Field, ...], msg: Mapping[str, Any], version: int,
              flexible: bool) -> None:
    tagged: list[tuple[int, bytes]] = []
    for f in fields:
        if f.is_tagged(version):
            if not flexible:
                continue
            v = msg.get(f.key, f.default_value())
            if v == f.default_value():
                continue
            buf = bytearray()
            _w_value(buf, f, v, version, flexible)
            tagged.append((f.tag, bytes(buf)))  # type: ignore[arg-type]
        elif _in(f.versions, version):
            if f.key not in msg:
                raise InvalidArgumentError(f"field {f.name} missing")
            _w_value(out, f, msg[f.key], version, flexible)
    if flexible:
        for u in msg.get(UNKNOWN_TAGGED, ()):
            tagged.append((int(u["tag"]), bytes(u["data"])))
        tagged.sort(key=lambda t: t[0])
        out += encode_uvarint(len(tagged))
        for tag, data in tagged:
            out += encode_uvarint(tag)
            out += encode_uvarint(len(data))
            out += data


def encode_message(schema: Schema, version: int, msg: Mapping[str, Any]) -> bytes:
    """Serialize ``msg`` (a dict as :func:`decode_message` returns) as ``schema`` at ``version``."""
    schema.check_version(version)
    out = bytearray()
    _w_struct(out, schema.fields, msg, version, schema.is_flexible(version))
    return bytes(out)
