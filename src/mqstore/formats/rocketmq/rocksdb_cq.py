"""Keys and values of the RocksDB ConsumeQueue (``storeType=defaultRocksDB``, RocketMQ >= 5.2) and
of the RocksDB config stores (pure codecs: bytes in, values out).  Layouts in
``docs/formats/rocketmq-rocksdb-consumequeue.md``; every integer is big-endian.

ConsumeQueue database (``STORE/consumequeue/`` itself is the RocksDB directory):

* column family ``default``, one entry per unit::

      key   = topicLen:int32 0x01 topic 0x01 queueId:int32 0x01 queueOffset:int64
      value = phyOffset:int64 size:int32 tagsCode:int64 storeTime:int64        (28 bytes)

* column family ``offset``, per queue a ``max`` entry (written with every dispatch batch) and a
  ``min`` entry (written only when the broker corrects the queue's minimum)::

      key   = topicLen:int32 0x01 topic 0x01 "max"|"min" 0x01 queueId:int32
      value = phyOffset:int64 queueOffset:int64                                  (16 bytes)

  plus the dispatch checkpoint: the ``max`` key of topic ``CHECKPOINT_TOPIC`` queue 0 whose
  value is the CommitLog offset up to which units were written (one int64).

Config stores: v1 (``config/consumerOffsets/``) keys ``<topic>@<group>`` with a JSON value
``{"offsetTable":{"<queueId>":<offset>}}``; v2 (``config/rdb/``) keys
``0x01 tableId:int16 0x02 groupLen:int16 group 0x01 topicLen:int16 topic 0x01 queueId:int32`` with
an 8-byte offset value (table 1: consumer offsets, table 2: pull offsets).
"""

from __future__ import annotations

import struct
from typing import NamedTuple

import numpy as np

from mqstore.errors import CorruptDataError

CTRL_0 = 0x00
CTRL_1 = 0x01
CTRL_2 = 0x02
_SEP = bytes([CTRL_1])

#: column family names of the ConsumeQueue database
CF_DEFAULT = "default"
CF_OFFSET = "offset"

UNIT_VALUE_SIZE = 28
OFFSET_VALUE_SIZE = 16
#: the topic of the dispatch checkpoint entry in the ``offset`` family (``RMQ_SYS_ROCKSDB_OFFSET_TOPIC``)
CHECKPOINT_TOPIC = "CHECKPOINT_TOPIC"
MAX = "max"
MIN = "min"

_UNIT = struct.Struct(">qiqq")
_OFFSET_VALUE = struct.Struct(">qq")
_I32 = struct.Struct(">i")
_Q_TAIL = struct.Struct(">BiBq")  # 0x01 queueId 0x01 queueOffset
_O_TAIL = struct.Struct(">B3sBi")  # 0x01 max|min 0x01 queueId

#: numpy dtype of a 28-byte value (to decode many at once)
UNIT_DTYPE = np.dtype([("offset", ">i8"), ("size", ">i4"), ("tags_code", ">i8"), ("store_time", ">i8")])
assert UNIT_DTYPE.itemsize == UNIT_VALUE_SIZE


class CQValue(NamedTuple):
    """One unit of the ``default`` family."""

    commit_log_offset: int
    size: int
    tags_code: int
    store_timestamp: int


class OffsetKey(NamedTuple):
    topic: str
    kind: str  # "max" or "min"
    queue_id: int


class OffsetValue(NamedTuple):
    commit_log_offset: int
    queue_offset: int


def _topic_bytes(topic: str) -> bytes:
    return topic.encode("utf-8")


# ============================================================================ default family
def queue_prefix(topic: str, queue_id: int) -> bytes:
    """The bytes every unit key of one queue starts with (up to the separator before the offset)."""
    tb = _topic_bytes(topic)
    return _I32.pack(len(tb)) + _SEP + tb + _SEP + _I32.pack(queue_id) + _SEP


def encode_cq_key(topic: str, queue_id: int, queue_offset: int) -> bytes:
    tb = _topic_bytes(topic)
    return _I32.pack(len(tb)) + _SEP + tb + _Q_TAIL.pack(CTRL_1, queue_id, CTRL_1, queue_offset)


def _split_topic(key: bytes, what: str) -> tuple[str, int]:
    """(topic, position after the separator following it) of a key starting ``len 0x01 topic 0x01``."""
    if len(key) < 6:
        raise CorruptDataError(f"{what} key of {len(key)} bytes is too short")
    (n,) = _I32.unpack_from(key, 0)
    if n < 0 or 5 + n + 1 > len(key) or key[4] != CTRL_1 or key[5 + n] != CTRL_1:
        raise CorruptDataError(f"{what} key {key[:64].hex()} does not have the topic-length layout")
    try:
        topic = key[5 : 5 + n].decode("utf-8")
    except UnicodeDecodeError as exc:
        raise CorruptDataError(f"{what} key {key[:64].hex()}: the topic is not UTF-8") from exc
    return topic, 5 + n + 1


def decode_cq_key(key: bytes) -> tuple[str, int, int]:
    """``(topic, queueId, queueOffset)`` of a ``default``-family key."""
    key = bytes(key)
    topic, pos = _split_topic(key, "ConsumeQueue")
    if len(key) != pos + 4 + 1 + 8 or key[pos + 4] != CTRL_1:
        raise CorruptDataError(f"ConsumeQueue key {key[:64].hex()} is not topic/queueId/offset")
    (qid,) = _I32.unpack_from(key, pos)
    (qoff,) = struct.unpack_from(">q", key, pos + 5)
    return topic, qid, qoff


def encode_cq_value(commit_log_offset: int, size: int, tags_code: int, store_timestamp: int) -> bytes:
    return _UNIT.pack(commit_log_offset, size, tags_code, store_timestamp)


def decode_cq_value(value: bytes) -> CQValue:
    if len(value) != UNIT_VALUE_SIZE:
        raise CorruptDataError(f"ConsumeQueue value of {len(value)} bytes (a unit has {UNIT_VALUE_SIZE})")
    return CQValue(*_UNIT.unpack(value))


def decode_cq_values(values: list[bytes]) -> np.ndarray:
    """Many 28-byte values as a structured array (:data:`UNIT_DTYPE`)."""
    bad = next((v for v in values if len(v) != UNIT_VALUE_SIZE), None)
    if bad is not None:
        raise CorruptDataError(f"ConsumeQueue value of {len(bad)} bytes (a unit has {UNIT_VALUE_SIZE})")
    return np.frombuffer(b"".join(values), dtype=UNIT_DTYPE).copy()


# ============================================================================ offset family
def encode_offset_key(topic: str, queue_id: int, kind: str) -> bytes:
    if kind not in (MAX, MIN):
        raise ValueError(f"offset key kind must be 'max' or 'min', not {kind!r}")
    tb = _topic_bytes(topic)
    return _I32.pack(len(tb)) + _SEP + tb + _O_TAIL.pack(CTRL_1, kind.encode(), CTRL_1, queue_id)


def decode_offset_key(key: bytes) -> OffsetKey:
    key = bytes(key)
    topic, pos = _split_topic(key, "offset")
    if len(key) != pos + 3 + 1 + 4 or key[pos + 3] != CTRL_1:
        raise CorruptDataError(f"offset key {key[:64].hex()} is not topic/max|min/queueId")
    kind = key[pos : pos + 3].decode("latin-1")
    if kind not in (MAX, MIN):
        raise CorruptDataError(f"offset key {key[:64].hex()}: {kind!r} is neither 'max' nor 'min'")
    (qid,) = _I32.unpack_from(key, pos + 4)
    return OffsetKey(topic, kind, qid)


def encode_offset_value(commit_log_offset: int, queue_offset: int) -> bytes:
    return _OFFSET_VALUE.pack(commit_log_offset, queue_offset)


def decode_offset_value(value: bytes) -> OffsetValue:
    if len(value) != OFFSET_VALUE_SIZE:
        raise CorruptDataError(f"offset value of {len(value)} bytes (one has {OFFSET_VALUE_SIZE})")
    return OffsetValue(*_OFFSET_VALUE.unpack(value))


CHECKPOINT_KEY = encode_offset_key(CHECKPOINT_TOPIC, 0, MAX)


def encode_checkpoint_value(max_phy_offset: int) -> bytes:
    return struct.pack(">q", max_phy_offset)


def decode_checkpoint_value(value: bytes) -> int:
    if len(value) != 8:
        raise CorruptDataError(f"dispatch checkpoint value of {len(value)} bytes (it has 8)")
    return struct.unpack(">q", value)[0]


# ============================================================================ config stores
#: v1 (``config/consumerOffsets/``): the column family of the data version (key ``kvDataVersionKey``)
V1_VERSION_CF = "kvDataVersion"
V1_VERSION_KEY = b"kvDataVersionKey"
#: v2 (``config/rdb/``): table prefix, table ids and record prefixes
V2_TABLE_PREFIX = 1
V2_CONSUMER_OFFSET = 1
V2_PULL_OFFSET = 2
V2_RECORD_DATA_VERSION = 1
V2_RECORD_DATA = 2
_I16 = struct.Struct(">h")


def encode_v1_offset_key(topic: str, group: str) -> bytes:
    return f"{topic}@{group}".encode()


def decode_v1_offset_key(key: bytes) -> tuple[str, str]:
    try:
        text = bytes(key).decode("utf-8")
    except UnicodeDecodeError as exc:
        raise CorruptDataError(f"consumerOffsets key {bytes(key)[:64].hex()} is not UTF-8") from exc
    topic, sep, group = text.partition("@")
    if not sep or not topic or not group:
        raise CorruptDataError(f"consumerOffsets key {text!r} is not <topic>@<group>")
    return topic, group


def v2_table_prefix(table_id: int = V2_CONSUMER_OFFSET) -> bytes:
    """The first bytes of every data key of a v2 table."""
    return bytes([V2_TABLE_PREFIX]) + _I16.pack(table_id) + bytes([V2_RECORD_DATA])


def encode_v2_offset_key(group: str, topic: str, queue_id: int, table_id: int = V2_CONSUMER_OFFSET) -> bytes:
    gb, tb = group.encode("utf-8"), topic.encode("utf-8")
    return (v2_table_prefix(table_id) + _I16.pack(len(gb)) + gb + _SEP + _I16.pack(len(tb)) + tb + _SEP
            + _I32.pack(queue_id))


def decode_v2_offset_key(key: bytes) -> tuple[int, str, str, int]:
    """``(tableId, group, topic, queueId)`` of a v2 consumer/pull offset key."""
    key = bytes(key)
    bad = CorruptDataError(f"config/rdb key {key[:64].hex()} is not a consumer offset key")
    if len(key) < 4 + 2 + 1 + 2 + 1 + 4 or key[0] != V2_TABLE_PREFIX or key[3] != V2_RECORD_DATA:
        raise bad
    (table,) = _I16.unpack_from(key, 1)
    (gl,) = _I16.unpack_from(key, 4)
    pos = 6 + gl
    if gl < 0 or pos + 1 + 2 > len(key) or key[pos] != CTRL_1:
        raise bad
    (tl,) = _I16.unpack_from(key, pos + 1)
    tpos = pos + 3
    if tl < 0 or tpos + tl + 1 + 4 != len(key) or key[tpos + tl] != CTRL_1:
        raise bad
    try:
        group = key[6:pos].decode("utf-8")
        topic = key[tpos : tpos + tl].decode("utf-8")
    except UnicodeDecodeError as exc:
        raise bad from exc
    (qid,) = _I32.unpack_from(key, tpos + tl + 1)
    return table, group, topic, qid


def encode_v2_offset_value(offset: int) -> bytes:
    return struct.pack(">q", offset)


def decode_v2_offset_value(value: bytes) -> int:
    if len(value) != 8:
        raise CorruptDataError(f"config/rdb consumer offset value of {len(value)} bytes (it has 8)")
    return struct.unpack(">q", value)[0]
