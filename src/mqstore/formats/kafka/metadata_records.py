"""KRaft metadata records (the data records of ``__cluster_metadata`` and of its snapshots).

A metadata record's value is ``uvarint frame version (0) | uvarint api key | uvarint version |
message`` (the message in Kafka's serialization, see :mod:`mqstore.formats.kafka.protocol`); its
key is null.  The schemas below follow Kafka 4.x's ``metadata/src/main/resources/common/metadata``
definitions (api keys no longer in use are left out; they decode as unknown).
:func:`decode_metadata_record` gives what Kafka's ``kafka-dump-log --cluster-metadata-decoder``
prints: ``{"type": "TOPIC_RECORD", "version": 0, "data": {...}}``.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from mqstore.errors import CorruptDataError, InvalidArgumentError
from mqstore.formats.kafka.protocol import (
    F,
    S,
    Schema,
    decode_message,
    decode_uvarint,
    encode_message,
    encode_uvarint,
)

FRAME_VERSION = 0

_ENDPOINT = (F("Name", "string"), F("Host", "string"), F("Port", "uint16"), F("SecurityProtocol", "int16"))
_FEATURE = (F("Name", "string"), F("MinSupportedVersion", "int16"), F("MaxSupportedVersion", "int16"))

METADATA_SCHEMAS: dict[int, Schema] = {
    0: S("RegisterBrokerRecord", "0-3", "0+",
         F("BrokerId", "int32"),
         F("IsMigratingZkBroker", "bool", "2+"),
         F("IncarnationId", "uuid"),
         F("BrokerEpoch", "int64"),
         F("EndPoints", "[]BrokerEndpoint", fields=_ENDPOINT),
         F("Features", "[]BrokerFeature", fields=_FEATURE),
         F("Rack", "string", nullable="0+"),
         F("Fenced", "bool"),
         F("InControlledShutdown", "bool", "1+"),
         F("LogDirs", "[]uuid", tag=0, tagged="3+")),
    1: S("UnregisterBrokerRecord", "0", "0+", F("BrokerId", "int32"), F("BrokerEpoch", "int64")),
    2: S("TopicRecord", "0", "0+", F("Name", "string"), F("TopicId", "uuid")),
    3: S("PartitionRecord", "0-2", "0+",
         F("PartitionId", "int32"),
         F("TopicId", "uuid"),
         F("Replicas", "[]int32"),
         F("Isr", "[]int32"),
         F("RemovingReplicas", "[]int32"),
         F("AddingReplicas", "[]int32"),
         F("Leader", "int32"),
         F("LeaderRecoveryState", "int8", tag=0, default=0),
         F("LeaderEpoch", "int32"),
         F("PartitionEpoch", "int32"),
         F("Directories", "[]uuid", "1+"),
         F("EligibleLeaderReplicas", "[]int32", nullable="2+", tag=1, tagged="2+"),
         F("LastKnownElr", "[]int32", nullable="2+", tag=2, tagged="2+")),
    4: S("ConfigRecord", "0", "0+",
         F("ResourceType", "int8"), F("ResourceName", "string"), F("Name", "string"),
         F("Value", "string", nullable="0+")),
    5: S("PartitionChangeRecord", "0-2", "0+",
         F("PartitionId", "int32"),
         F("TopicId", "uuid"),
         F("Isr", "[]int32", nullable="0+", tag=0),
         F("Leader", "int32", tag=1, default=-2),
         F("Replicas", "[]int32", nullable="0+", tag=2),
         F("RemovingReplicas", "[]int32", nullable="0+", tag=3),
         F("AddingReplicas", "[]int32", nullable="0+", tag=4),
         F("LeaderRecoveryState", "int8", tag=5, default=-1),
         F("Directories", "[]uuid", nullable="1+", tag=8, tagged="1+"),
         F("EligibleLeaderReplicas", "[]int32", nullable="2+", tag=6, tagged="2+"),
         F("LastKnownElr", "[]int32", nullable="2+", tag=7, tagged="2+")),
    18: S("AccessControlEntryRecord", "0", "0+",
         F("Id", "uuid"), F("ResourceType", "int8"), F("ResourceName", "string"), F("PatternType", "int8"),
         F("Principal", "string"), F("Host", "string"), F("Operation", "int8"), F("PermissionType", "int8")),
    19: S("RemoveAccessControlEntryRecord", "0", "0+", F("Id", "uuid")),
    7: S("FenceBrokerRecord", "0", "0+", F("Id", "int32"), F("Epoch", "int64")),
    8: S("UnfenceBrokerRecord", "0", "0+", F("Id", "int32"), F("Epoch", "int64")),
    9: S("RemoveTopicRecord", "0", "0+", F("TopicId", "uuid")),
    10: S("DelegationTokenRecord", "0", "0+",
          F("Owner", "string"), F("Requester", "string"), F("Renewers", "[]string"),
          F("IssueTimestamp", "int64"), F("MaxTimestamp", "int64"), F("ExpirationTimestamp", "int64"),
          F("TokenId", "string")),
    26: S("RemoveDelegationTokenRecord", "0", "0+", F("TokenId", "string")),
    11: S("UserScramCredentialRecord", "0", "0+",
          F("Name", "string"), F("Mechanism", "int8"), F("Salt", "bytes"), F("StoredKey", "bytes"),
          F("ServerKey", "bytes"), F("Iterations", "int32")),
    22: S("RemoveUserScramCredentialRecord", "0", "0+", F("Name", "string"), F("Mechanism", "int8")),
    12: S("FeatureLevelRecord", "0", "0+", F("Name", "string"), F("FeatureLevel", "int16")),
    14: S("ClientQuotaRecord", "0", "0+",
          F("Entity", "[]EntityData", fields=(F("EntityType", "string"), F("EntityName", "string", nullable="0+"))),
          F("Key", "string"), F("Value", "float64"), F("Remove", "bool")),
    17: S("BrokerRegistrationChangeRecord", "0-2", "0+",
          F("BrokerId", "int32"),
          F("BrokerEpoch", "int64"),
          F("Fenced", "int8", tag=0),
          F("InControlledShutdown", "int8", tag=1, tagged="1+"),
          F("LogDirs", "[]uuid", tag=2, tagged="2+")),
    15: S("ProducerIdsRecord", "0", "0+", F("BrokerId", "int32"), F("BrokerEpoch", "int64"),
          F("NextProducerId", "int64")),
    20: S("NoOpRecord", "0", "0+"),
    21: S("ZkMigrationStateRecord", "0", "0+", F("ZkMigrationState", "int8")),
    23: S("BeginTransactionRecord", "0", "0+", F("Name", "string", nullable="0+", tag=0)),
    24: S("EndTransactionRecord", "0", "0+"),
    25: S("AbortTransactionRecord", "0", "0+", F("Reason", "string", nullable="0+", tag=0)),
    27: S("RegisterControllerRecord", "0", "0+",
          F("ControllerId", "int32"), F("IncarnationId", "uuid"), F("ZkMigrationReady", "bool"),
          F("EndPoints", "[]ControllerEndpoint", fields=_ENDPOINT),
          F("Features", "[]ControllerFeature", fields=_FEATURE)),
    28: S("ClearElrRecord", "0", "0+", F("TopicName", "string")),
}
"""Metadata record schemas by api key (Kafka's ``MetadataRecordType`` numbering)."""


def type_name(schema_name: str) -> str:
    """``TopicRecord`` -> ``TOPIC_RECORD`` (the ``type`` Kafka's JSON dump prints)."""
    out = []
    for i, c in enumerate(schema_name):
        if c.isupper() and i and not schema_name[i - 1].isupper():
            out.append("_")
        out.append(c.upper())
    return "".join(out)


API_KEY_BY_NAME = {s.name: k for k, s in METADATA_SCHEMAS.items()}


def decode_metadata_record(value: bytes | bytearray | memoryview | None) -> dict[str, Any]:
    """Decode one metadata record value.

    Returns ``{"type", "apiKey", "version", "data"}``; an api key or version this table does not
    know gives ``{"type": "UNKNOWN", "apiKey", "version", "bytes"}`` (the message bytes, undecoded).
    Raises :class:`CorruptDataError` for a null value, a bad frame or a message that does not
    parse as its schema (truncated, bytes left over).
    """
    if value is None:
        raise CorruptDataError("metadata record without a value")
    end = len(value)
    frame, pos = decode_uvarint(value, 0, end)
    if frame != FRAME_VERSION:
        raise CorruptDataError(f"metadata record frame version {frame} (expected {FRAME_VERSION})")
    api_key, pos = decode_uvarint(value, pos, end)
    version, pos = decode_uvarint(value, pos, end)
    schema = METADATA_SCHEMAS.get(api_key)
    if schema is None or not schema.valid[0] <= version <= schema.valid[1]:
        return {"type": "UNKNOWN" if schema is None else type_name(schema.name), "apiKey": api_key,
                "version": version, "unknown": True, "bytes": bytes(value[pos:])}
    data, _ = decode_message(schema, version, value, pos, end)
    return {"type": type_name(schema.name), "apiKey": api_key, "version": version, "data": data}


def encode_metadata_record(api_key: int | str, version: int, data: Mapping[str, Any]) -> bytes:
    """The record value for ``data`` (api key by number or by schema name, e.g. ``"TopicRecord"``)."""
    key = API_KEY_BY_NAME.get(api_key, -1) if isinstance(api_key, str) else api_key
    schema = METADATA_SCHEMAS.get(key)
    if schema is None:
        raise InvalidArgumentError(f"unknown metadata record type {api_key!r}")
    return (encode_uvarint(FRAME_VERSION) + encode_uvarint(key) + encode_uvarint(version)
            + encode_message(schema, version, data))
