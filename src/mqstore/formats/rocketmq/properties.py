"""The RocketMQ properties string: ``name\\x01value\\x02`` pairs.

Parsing follows ``MessageDecoder.string2messageProperties`` exactly; encoding reproduces the byte
order the broker writes, which is the iteration order of the Java ``HashMap`` that holds the
properties (bucket order, insertion order inside a bucket).
"""

from __future__ import annotations

import functools
from collections.abc import Iterable, Mapping

from mqstore.formats.rocketmq.javahash import java_string_hashcode

NAME_VALUE_SEPARATOR = "\x01"
PROPERTY_SEPARATOR = "\x02"
KEY_SEPARATOR = " "
MAX_PROPERTIES_BYTES = 32767

PROPERTY_KEYS = "KEYS"
PROPERTY_TAGS = "TAGS"
PROPERTY_UNIQ_KEY = "UNIQ_KEY"
PROPERTY_WAIT = "WAIT"
PROPERTY_DELAY = "DELAY"
PROPERTY_CLUSTER = "CLUSTER"
PROPERTY_CRC32 = "__CRC32#"
PROPERTY_TRANSACTION_PREPARED = "TRAN_MSG"
PROPERTY_INNER_NUM = "INNER_NUM"
PROPERTY_INNER_BASE = "INNER_BASE"
PROPERTY_DUP_INFO = "DUP_INFO"


def parse_properties(text: str) -> dict[str, str]:
    """Parse a properties string with the broker's exact rules (spec 1.6): pairs split on
    ``\x02``, name and value on the pair's first ``\x01``, both non-empty, a later duplicate
    wins (at the first one's position).  ``str.split``/``str.partition`` do the scanning; the
    character loop of the rules is :func:`parse_properties_reference`, its twin."""
    result: dict[str, str] = {}
    for pair in text.split(PROPERTY_SEPARATOR):
        name, _, value = pair.partition(NAME_VALUE_SEPARATOR)
        if name and value:
            result[name] = value
    return result


def parse_properties_reference(text: str) -> dict[str, str]:
    """:func:`parse_properties` written as ``string2messageProperties`` walks the text."""
    result: dict[str, str] = {}
    n = len(text)
    start = 0
    while start < n:
        end = text.find(PROPERTY_SEPARATOR, start)
        if end < 0:
            end = n
        if end - start >= 3:
            sep = text.find(NAME_VALUE_SEPARATOR, start)
            if start < sep < end - 1:
                result[text[start:sep]] = text[sep + 1 : end]
        start = end + 1
    return result


def _table_size_for(cap: int) -> int:
    n = 1
    while n < cap:
        n <<= 1
    return max(n, 1)


@functools.lru_cache(maxsize=4096)
def _spread(key: str) -> int:
    h = java_string_hashcode(key) & 0xFFFFFFFF
    return h ^ (h >> 16)


def java_hashmap_order(keys: Iterable[str], initial_capacity: int = 16) -> list[str]:
    """The iteration order of a Java ``HashMap`` into which ``keys`` were put in this order.

    The table starts at ``tableSizeFor(initial_capacity)`` buckets and doubles whenever the size
    exceeds 0.75 × capacity; a resize keeps the relative order of the entries of a bucket, so the
    final order is a stable sort by the final bucket index.  (Treeified buckets need ≥ 8 colliding
    entries in a ≥ 64-bucket table and never occur for property maps.)
    """
    ordered = list(dict.fromkeys(keys))
    cap = _table_size_for(initial_capacity)
    size = 0
    for _ in ordered:
        size += 1
        if size > cap * 3 // 4:
            cap <<= 1
    mask = cap - 1
    return sorted(ordered, key=lambda k: _spread(k) & mask)


def encode_properties(
    properties: Mapping[str, str | None] | Iterable[tuple[str, str | None]],
    *,
    order: str = "hashmap",
    initial_capacity: int = 16,
) -> str:
    """Encode properties as the broker does (``messageProperties2String``).

    ``order="hashmap"`` (default) writes them in Java ``HashMap`` order for the given insertion
    order; ``order="insertion"`` keeps the caller's order.  Entries with a ``None`` value are
    skipped.  The byte-length limit is checked by the record encoder.
    """
    items = list(properties.items()) if isinstance(properties, Mapping) else list(properties)
    values: dict[str, str | None] = {}
    for name, value in items:
        values[name] = value
    names = java_hashmap_order(values, initial_capacity) if order == "hashmap" else list(values)
    parts = []
    for name in names:
        value = values[name]
        if value is None:
            continue
        parts.append(f"{name}{NAME_VALUE_SEPARATOR}{value}{PROPERTY_SEPARATOR}")
    return "".join(parts)


def delete_property(text: str, name: str) -> str:
    """``MessageUtils.deleteProperty``: remove every ``name\\x01...\\x02`` pair that starts the
    string or follows a ``\\x02`` (up to and including the next ``\\x02``, or to the end)."""
    marker = name + NAME_VALUE_SEPARATOR
    out: list[str] = []
    i = 0
    n = len(text)
    while i < n:
        at_pair_start = i == 0 or text[i - 1] == PROPERTY_SEPARATOR
        if at_pair_start and text.startswith(marker, i):
            end = text.find(PROPERTY_SEPARATOR, i)
            i = n if end < 0 else end + 1
            continue
        out.append(text[i])
        i += 1
    return "".join(out)


def split_keys(keys: str | None) -> list[str]:
    """Split a ``KEYS`` value on single spaces, dropping empty pieces (as the index builder)."""
    if not keys:
        return []
    return [k for k in keys.split(KEY_SEPARATOR) if k]


def join_keys(keys: str | Iterable[str] | None) -> str | None:
    """``Message.setKeys(Collection)``: join with a single space."""
    if keys is None:
        return None
    if isinstance(keys, str):
        return keys
    return KEY_SEPARATOR.join(keys)
