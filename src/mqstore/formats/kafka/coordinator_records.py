"""Records of Kafka's internal coordinator topics: ``__consumer_offsets`` (group coordinator),
``__transaction_state`` (transaction coordinator) and ``__share_group_state`` (share coordinator).

Every record has a key and (except tombstones) a value, each ``int16 version | message``.  The
key's version is the record *type* (for ``__consumer_offsets``: 0/1 offset commit, 2 classic
group metadata, 3..8 KIP-848 consumer-group records, 9..15 share-group records, 16 the
consumer-group regular expressions); the value's version is the version of the value schema that
belongs to that type.  A null value is a tombstone (the key's entity was deleted).  Keys are
never flexible; values are flexible from the version the schema says.

Schemas follow Kafka 4.x's ``group-coordinator``, ``transaction-coordinator`` and
``share-coordinator`` message definitions.  :func:`decode_coordinator_record` never guesses: a
type or version the tables do not know is returned as ``unknown`` with its bytes.
"""

from __future__ import annotations

import struct
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from mqstore.errors import CorruptDataError, InvalidArgumentError, TruncatedRecordError
from mqstore.formats.kafka.protocol import F, S, Schema, decode_message, encode_message

OFFSETS_TOPIC = "__consumer_offsets"
TRANSACTION_TOPIC = "__transaction_state"
SHARE_STATE_TOPIC = "__share_group_state"
METADATA_TOPIC = "__cluster_metadata"


@dataclass(frozen=True)
class RecordType:
    """One record type of a coordinator topic: its key schema and the schema of its values."""

    name: str
    key: Schema
    value: Schema


_TP = (F("TopicId", "uuid"), F("Partitions", "[]int32"))
_GROUP = F("GroupId", "string")
_MEMBER = F("MemberId", "string")


def _key(name: str, *fields: Any) -> Schema:
    return S(name, "0+", None, *fields)  # keys: any type number, one layout, never flexible


_OFFSET_KEY = S("OffsetCommitKey", "0+", None, F("group", "string"), F("topic", "string"), F("partition", "int32"))

OFFSETS_TYPES: dict[int, RecordType] = {
    0: RecordType("OffsetCommit", _OFFSET_KEY, S(
        "OffsetCommitValue", "0-4", "4+",
        F("offset", "int64"),
        F("leaderEpoch", "int32", "3+"),
        F("metadata", "string"),
        F("commitTimestamp", "int64"),
        F("expireTimestamp", "int64", "1"))),
    2: RecordType("GroupMetadata", _key("GroupMetadataKey", F("group", "string")), S(
        "GroupMetadataValue", "0-4", "4+",
        F("protocolType", "string"),
        F("generation", "int32"),
        F("protocol", "string", nullable="0+"),
        F("leader", "string", nullable="0+"),
        F("currentStateTimestamp", "int64", "2+"),
        F("members", "[]MemberMetadata", fields=(
            F("memberId", "string"),
            F("groupInstanceId", "string", "3+", nullable="3+"),
            F("clientId", "string"),
            F("clientHost", "string"),
            F("rebalanceTimeout", "int32", "1+"),
            F("sessionTimeout", "int32"),
            F("subscription", "bytes"),
            F("assignment", "bytes"))))),
    3: RecordType("ConsumerGroupMetadata", _key("ConsumerGroupMetadataKey", _GROUP), S(
        "ConsumerGroupMetadataValue", "0", "0+",
        F("Epoch", "int32"),
        F("MetadataHash", "int64", tag=0, default=0))),
    4: RecordType("ConsumerGroupPartitionMetadata", _key("ConsumerGroupPartitionMetadataKey", _GROUP), S(
        "ConsumerGroupPartitionMetadataValue", "0", "0+",
        F("Topics", "[]TopicMetadata", fields=(
            F("TopicId", "uuid"), F("TopicName", "string"), F("NumPartitions", "int32"),
            F("PartitionMetadata", "[]PartitionMetadata", fields=(
                F("Partition", "int32"), F("Racks", "[]string"))))))),
    5: RecordType("ConsumerGroupMemberMetadata", _key("ConsumerGroupMemberMetadataKey", _GROUP, _MEMBER), S(
        "ConsumerGroupMemberMetadataValue", "0", "0+",
        F("InstanceId", "string", nullable="0+"),
        F("RackId", "string", nullable="0+"),
        F("ClientId", "string"),
        F("ClientHost", "string"),
        F("SubscribedTopicNames", "[]string"),
        F("SubscribedTopicRegex", "string", nullable="0+"),
        F("RebalanceTimeoutMs", "int32"),
        F("ServerAssignor", "string", nullable="0+"),
        F("ClassicMemberMetadata", "ClassicMemberMetadata", nullable="0+", tag=0, fields=(
            F("SessionTimeoutMs", "int32"),
            F("SupportedProtocols", "[]ClassicProtocol", fields=(F("Name", "string"), F("Metadata", "bytes"))))))),
    6: RecordType("ConsumerGroupTargetAssignmentMetadata",
                  _key("ConsumerGroupTargetAssignmentMetadataKey", _GROUP),
                  S("ConsumerGroupTargetAssignmentMetadataValue", "0", "0+", F("AssignmentEpoch", "int32"))),
    7: RecordType("ConsumerGroupTargetAssignmentMember",
                  _key("ConsumerGroupTargetAssignmentMemberKey", _GROUP, _MEMBER),
                  S("ConsumerGroupTargetAssignmentMemberValue", "0", "0+",
                    F("TopicPartitions", "[]TopicPartition", fields=_TP))),
    8: RecordType("ConsumerGroupCurrentMemberAssignment",
                  _key("ConsumerGroupCurrentMemberAssignmentKey", _GROUP, _MEMBER),
                  S("ConsumerGroupCurrentMemberAssignmentValue", "0", "0+",
                    F("MemberEpoch", "int32"), F("PreviousMemberEpoch", "int32"), F("State", "int8"),
                    F("AssignedPartitions", "[]TopicPartitions", fields=_TP),
                    F("PartitionsPendingRevocation", "[]TopicPartitions", fields=_TP))),
    9: RecordType("ShareGroupPartitionMetadata", _key("ShareGroupPartitionMetadataKey", _GROUP), S(
        "ShareGroupPartitionMetadataValue", "0", "0+",
        F("Topics", "[]TopicMetadata", fields=(
            F("TopicId", "uuid"), F("TopicName", "string"), F("NumPartitions", "int32"))))),
    10: RecordType("ShareGroupMemberMetadata", _key("ShareGroupMemberMetadataKey", _GROUP, _MEMBER), S(
        "ShareGroupMemberMetadataValue", "0", "0+",
        F("RackId", "string", nullable="0+"), F("ClientId", "string"), F("ClientHost", "string"),
        F("SubscribedTopicNames", "[]string"))),
    11: RecordType("ShareGroupMetadata", _key("ShareGroupMetadataKey", _GROUP),
                   S("ShareGroupMetadataValue", "0", "0+", F("Epoch", "int32"),
                     F("MetadataHash", "int64", tag=0, default=0))),
    12: RecordType("ShareGroupTargetAssignmentMetadata", _key("ShareGroupTargetAssignmentMetadataKey", _GROUP),
                   S("ShareGroupTargetAssignmentMetadataValue", "0", "0+", F("AssignmentEpoch", "int32"))),
    13: RecordType("ShareGroupTargetAssignmentMember",
                   _key("ShareGroupTargetAssignmentMemberKey", _GROUP, _MEMBER),
                   S("ShareGroupTargetAssignmentMemberValue", "0", "0+",
                     F("TopicPartitions", "[]TopicPartition", fields=_TP))),
    14: RecordType("ShareGroupCurrentMemberAssignment",
                   _key("ShareGroupCurrentMemberAssignmentKey", _GROUP, _MEMBER),
                   S("ShareGroupCurrentMemberAssignmentValue", "0", "0+",
                     F("MemberEpoch", "int32"), F("PreviousMemberEpoch", "int32"), F("State", "int8"),
                     F("AssignedPartitions", "[]TopicPartitions", fields=_TP))),
    15: RecordType("ShareGroupStatePartitionMetadata", _key("ShareGroupStatePartitionMetadataKey", _GROUP), S(
        "ShareGroupStatePartitionMetadataValue", "0", "0+",
        F("InitializingTopics", "[]TopicPartitionsInfo", fields=(
            F("TopicId", "uuid"), F("TopicName", "string"), F("Partitions", "[]int32"))),
        F("InitializedTopics", "[]TopicPartitionsInfo", fields=(
            F("TopicId", "uuid"), F("TopicName", "string"), F("Partitions", "[]int32"))),
        F("DeletingTopics", "[]TopicInfo", fields=(F("TopicId", "uuid"), F("TopicName", "string"))))),
    16: RecordType("ConsumerGroupRegularExpression",
                   _key("ConsumerGroupRegularExpressionKey", _GROUP, F("RegularExpression", "string")),
                   S("ConsumerGroupRegularExpressionValue", "0", "0+",
                     F("Topics", "[]string"), F("Version", "int64"), F("Timestamp", "int64"))),
}
OFFSETS_TYPES[1] = OFFSETS_TYPES[0]  # key version 1: same offset-commit key (written by 0.10+ brokers)

TRANSACTION_TYPES: dict[int, RecordType] = {
    0: RecordType("TransactionLog", _key("TransactionLogKey", F("TransactionalId", "string")), S(
        "TransactionLogValue", "0-1", "1+",
        F("ProducerId", "int64"),
        F("PreviousProducerId", "int64", tag=0, tagged="1+", default=-1),
        F("NextProducerId", "int64", tag=1, tagged="1+", default=-1),
        F("ProducerEpoch", "int16"),
        F("TransactionTimeoutMs", "int32"),
        F("TransactionStatus", "int8"),
        F("TransactionPartitions", "[]PartitionsSchema", nullable="0+", fields=(
            F("Topic", "string"), F("PartitionIds", "[]int32"))),
        F("TransactionLastUpdateTimestampMs", "int64"),
        F("TransactionStartTimestampMs", "int64"),
        F("ClientTransactionVersion", "int16", tag=2, tagged="1+", default=0))),
}

_STATE_BATCH = (F("FirstOffset", "int64"), F("LastOffset", "int64"), F("DeliveryState", "int8"),
                F("DeliveryCount", "int16"))
_SHARE_KEY = (F("GroupId", "string"), F("TopicId", "uuid"), F("Partition", "int32"))

SHARE_STATE_TYPES: dict[int, RecordType] = {
    0: RecordType("ShareSnapshot", _key("ShareSnapshotKey", *_SHARE_KEY), S(
        "ShareSnapshotValue", "0", "0+",
        F("SnapshotEpoch", "int32"), F("StateEpoch", "int32"), F("LeaderEpoch", "int32"),
        F("StartOffset", "int64"),
        F("DeliveryCompleteCount", "int32", tag=0, default=-1),
        F("CreateTimestamp", "int64"), F("WriteTimestamp", "int64"),
        F("StateBatches", "[]StateBatch", fields=_STATE_BATCH))),
    1: RecordType("ShareUpdate", _key("ShareUpdateKey", *_SHARE_KEY), S(
        "ShareUpdateValue", "0", "0+",
        F("SnapshotEpoch", "int32"), F("LeaderEpoch", "int32"), F("StartOffset", "int64"),
        F("DeliveryCompleteCount", "int32", tag=0, default=-1),
        F("StateBatches", "[]StateBatch", fields=_STATE_BATCH))),
}

TABLES: dict[str, dict[int, RecordType]] = {
    "offsets": OFFSETS_TYPES, "transaction": TRANSACTION_TYPES, "share-state": SHARE_STATE_TYPES,
}
DECODER_BY_TOPIC = {OFFSETS_TOPIC: "offsets", TRANSACTION_TOPIC: "transaction",
                    SHARE_STATE_TOPIC: "share-state", METADATA_TOPIC: "cluster-metadata"}


def _version_prefix(b: bytes | bytearray | memoryview, what: str) -> int:
    if len(b) < 2:
        raise TruncatedRecordError(f"{what} shorter than its 2-byte version")
    return int(struct.unpack_from(">h", b, 0)[0])


def decode_coordinator_record(table: str, key: bytes | bytearray | memoryview | None,
                              value: bytes | bytearray | memoryview | None) -> dict[str, Any]:
    """Decode one record of a coordinator topic (``table``: ``offsets``, ``transaction`` or
    ``share-state``).

    Returns ``{"type", "keyVersion", "key", "valueVersion", "value"}`` (``value`` None for a
    tombstone).  A key type the table does not know gives ``{"type": "UNKNOWN", "keyVersion",
    "unknown": True, "keyBytes", "valueBytes"}``; a value version it does not know keeps the
    decoded key and gives ``"valueBytes"`` instead of ``"value"``.  Raises
    :class:`CorruptDataError` when the bytes do not parse as the schema they name.
    """
    types = TABLES.get(table)
    if types is None:
        raise InvalidArgumentError(f"unknown coordinator record table {table!r}")
    if key is None:
        raise CorruptDataError("coordinator record without a key")
    kv = _version_prefix(key, "record key")
    rt = types.get(kv)
    if rt is None:
        return {"type": "UNKNOWN", "keyVersion": kv, "unknown": True, "keyBytes": bytes(key[2:]),
                "valueBytes": None if value is None else bytes(value)}
    k, _ = decode_message(rt.key, 0, key, 2)
    out: dict[str, Any] = {"type": rt.name, "keyVersion": kv, "key": k}
    if value is None:
        out["valueVersion"] = None
        out["value"] = None
        return out
    vv = _version_prefix(value, "record value")
    out["valueVersion"] = vv
    if not rt.value.valid[0] <= vv <= rt.value.valid[1]:
        out["unknown"] = True
        out["valueBytes"] = bytes(value[2:])
        return out
    out["value"], _ = decode_message(rt.value, vv, value, 2)
    return out


def encode_coordinator_key(table: str, key_version: int, key: Mapping[str, Any]) -> bytes:
    rt = _type(table, key_version)
    return struct.pack(">h", key_version) + encode_message(rt.key, 0, key)


def encode_coordinator_value(table: str, key_version: int, value_version: int,
                             value: Mapping[str, Any] | None) -> bytes | None:
    """The value bytes (``None`` for a tombstone)."""
    if value is None:
        return None
    rt = _type(table, key_version)
    return struct.pack(">h", value_version) + encode_message(rt.value, value_version, value)


def _type(table: str, key_version: int) -> RecordType:
    types = TABLES.get(table)
    if types is None or key_version not in types:
        raise InvalidArgumentError(f"unknown record type {key_version} for {table!r}")
    return types[key_version]
