"""Java ``String.hashCode`` and the hashes RocketMQ derives from it.

Java hashes the UTF-16 code units of a string: ``h = 31*h + unit`` with 32-bit wrap-around, the
result read as a signed int.  Characters outside the BMP contribute their two surrogate units.
These are the scalar reference functions; :mod:`mqstore.kernels.javahash` has the vectorised twin.
"""

from __future__ import annotations

from mqstore.errors import InvalidArgumentError

INT_MIN = -(2**31)
_MASK32 = 0xFFFFFFFF


def _to_signed32(h: int) -> int:
    return h - (1 << 32) if h & 0x80000000 else h


def java_hash_units(units: bytes) -> int:
    """Hash a UTF-16BE byte string (Java code units)."""
    h = 0
    for i in range(0, len(units) - 1, 2):
        h = (31 * h + ((units[i] << 8) | units[i + 1])) & _MASK32
    return _to_signed32(h)


def java_string_hashcode(s: str) -> int:
    """Java ``String.hashCode`` of ``s`` (a signed 32-bit int)."""
    if s.isascii():
        h = 0
        for c in s.encode("ascii"):
            h = (31 * h + c) & _MASK32
        return _to_signed32(h)
    return java_hash_units(s.encode("utf-16-be", "surrogatepass"))


def java_bytes_hashcode(data: bytes) -> int:
    """Java ``String.hashCode`` of the string that the UTF-8 bytes ``data`` decode to.

    Invalid UTF-8 decodes the way Java's decoder does for our purposes (replacement character
    U+FFFD per bad sequence); pure ASCII takes a fast path.
    """
    if data.isascii():
        h = 0
        for c in data:
            h = (31 * h + c) & _MASK32
        return _to_signed32(h)
    return java_string_hashcode(data.decode("utf-8", "replace"))


def index_key_hash(key: str) -> int:
    """``IndexFile.indexKeyHashMethod``: ``abs(hashCode)``, and 0 for ``Integer.MIN_VALUE``."""
    h = java_string_hashcode(key)
    h = abs(h)
    return 0 if h == -INT_MIN else h


SCHEDULE_TOPIC = "SCHEDULE_TOPIC_XXXX"
DEFAULT_DELAY_LEVELS = "1s 5s 10s 30s 1m 2m 3m 4m 5m 6m 7m 8m 9m 10m 20m 30m 1h 2h"
_UNIT_MS = {"s": 1000, "m": 60_000, "h": 3_600_000, "d": 86_400_000}


def parse_delay_levels(spec: str = DEFAULT_DELAY_LEVELS) -> dict[int, int]:
    """``messageDelayLevel`` → {level: delay ms}, level 1 first."""
    table: dict[int, int] = {}
    for i, item in enumerate(spec.split()):
        table[i + 1] = int(item[:-1]) * _UNIT_MS[item[-1]]
    return table


DEFAULT_DELAY_TABLE = parse_delay_levels()


def tags_hash(tags: str | None) -> int:
    """``tagsString2tagsCode``: 0 for null/empty tags, else ``tags.hashCode()``."""
    if not tags:
        return 0
    return java_string_hashcode(tags)


SUB_ALL = "*"


def parse_sub_expression(expression: str | None) -> frozenset[str] | None:
    """The tags a consumer's TAG subscription expression selects (``None``: every message).

    RocketMQ's rule (``FilterAPI.buildSubscriptionData``): ``*`` or an empty expression selects
    all; otherwise the expression is split at ``||`` and each trimmed, non-empty piece is a tag
    (``"TagA || TagB"``).  A ``*`` among other tags is the literal tag ``*``, as on a broker.
    A consumer then matches a message when the ConsumeQueue tags code is the hash
    (:func:`tags_hash`) of one of these tags, and finally when its TAGS property is one of them.
    """
    if expression is None or expression.strip() in ("", SUB_ALL):
        return None
    tags = frozenset(t.strip() for t in expression.split("||") if t.strip())
    if not tags:
        raise InvalidArgumentError(f"the tag expression {expression!r} names no tag (use * for all)")
    return tags


def tags_code(
    topic: str,
    tags: str | None,
    delay: str | None,
    store_timestamp: int,
    delay_table: dict[int, int] = DEFAULT_DELAY_TABLE,
) -> int:
    """The ConsumeQueue tagsCode of a message (spec 1.8 / 2.2), delay-topic case included."""
    if topic == SCHEDULE_TOPIC and delay is not None:
        try:
            level = int(delay)
        except ValueError:
            level = 0
        level = min(level, max(delay_table) if delay_table else 0)
        if level > 0:
            return store_timestamp + delay_table.get(level, 1000)
    return tags_hash(tags)
