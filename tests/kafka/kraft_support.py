"""Builders of Kafka 4.x metadata / internal-topic directories for the tests, made with the
project's own writers (PartitionLog, encode_batch) and encoders (metadata / coordinator records)."""

from __future__ import annotations

import hashlib
import struct
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from mqstore.formats.kafka import SimpleRecord, encode_batch, encode_end_txn_marker_batch
from mqstore.formats.kafka.coordinator_records import encode_coordinator_key, encode_coordinator_value
from mqstore.formats.kafka.metadata_records import encode_metadata_record
from mqstore.formats.kafka.varint import encode_uvarint
from mqstore.storage.kafka.log import PartitionLog

TOPIC_ID = "b7E0kH2yQ9uK8lH2cS3wKQ"
DIR_ID = "AAAAAAAAAAAAAAAAAAAAAQ"

METADATA_RECORDS: list[tuple[str, int, dict[str, Any]]] = [
    ("FeatureLevelRecord", 0, {"name": "metadata.version", "featureLevel": 27}),
    ("RegisterBrokerRecord", 3, {
        "brokerId": 1, "isMigratingZkBroker": False, "incarnationId": "x0Xx0Xx0Xx0Xx0Xx0Xx0Xw", "brokerEpoch": 7,
        "endPoints": [{"name": "PLAINTEXT", "host": "localhost", "port": 9092, "securityProtocol": 0}],
        "features": [{"name": "metadata.version", "minSupportedVersion": 7, "maxSupportedVersion": 27}],
        "rack": None, "fenced": True, "inControlledShutdown": False, "logDirs": [DIR_ID]}),
    ("TopicRecord", 0, {"name": "orders", "topicId": TOPIC_ID}),
    ("PartitionRecord", 2, {
        "partitionId": 0, "topicId": TOPIC_ID, "replicas": [1], "isr": [1], "removingReplicas": [],
        "addingReplicas": [], "leader": 1, "leaderRecoveryState": 0, "leaderEpoch": 0, "partitionEpoch": 0,
        "directories": [DIR_ID], "eligibleLeaderReplicas": None, "lastKnownElr": None}),
    ("ConfigRecord", 0, {"resourceType": 2, "resourceName": "orders", "name": "cleanup.policy", "value": "compact"}),
    ("PartitionChangeRecord", 0, {
        "partitionId": 0, "topicId": TOPIC_ID, "isr": [1, 2], "leader": -2, "replicas": None,
        "removingReplicas": None, "addingReplicas": None, "leaderRecoveryState": -1}),
    ("BrokerRegistrationChangeRecord", 2, {"brokerId": 1, "brokerEpoch": 7, "fenced": -1,
                                           "inControlledShutdown": 0, "logDirs": []}),
    ("ProducerIdsRecord", 0, {"brokerId": 1, "brokerEpoch": 7, "nextProducerId": 1000}),
    ("NoOpRecord", 0, {}),
]


def metadata_values() -> list[bytes]:
    return [encode_metadata_record(name, v, data) for name, v, data in METADATA_RECORDS]


def control_record(ctype: int, value: bytes) -> SimpleRecord:
    return SimpleRecord(value=value, key=struct.pack(">hh", 0, ctype), timestamp=1_700_000_000_000)


def snapshot_header_value(ts: int = 1_700_000_000_000) -> bytes:
    # SnapshotHeaderRecord v0: int16 version, int64 last contained log timestamp, no tagged fields
    return struct.pack(">hq", 0, ts) + encode_uvarint(0)


def snapshot_footer_value() -> bytes:
    return struct.pack(">h", 0) + encode_uvarint(0)


def snapshot_bytes(values: Sequence[bytes], *, header: bool = True, footer: bool = True, epoch: int = 3) -> bytes:
    """A KRaft snapshot: control batch (SnapshotHeader), one data batch, control batch (SnapshotFooter)."""
    out = bytearray()
    off = 0
    if header:
        out += encode_batch([control_record(3, snapshot_header_value())], base_offset=off, is_control=True,
                            partition_leader_epoch=epoch)
        off += 1
    out += encode_batch([SimpleRecord(value=v, timestamp=1_700_000_000_000) for v in values], base_offset=off,
                        partition_leader_epoch=epoch)
    off += len(values)
    if footer:
        out += encode_batch([control_record(4, snapshot_footer_value())], base_offset=off, is_control=True,
                            partition_leader_epoch=epoch)
    return bytes(out)


def make_metadata_dir(root: Path, *, snapshot: bytes | None = None, quorum_state: bytes | None = None) -> Path:
    """``root/__cluster_metadata-0`` with one segment of metadata records (and a snapshot / quorum-state)."""
    d = root / "__cluster_metadata-0"
    with PartitionLog.open(d) as log:
        vals = metadata_values()
        log.append_records([SimpleRecord(value=v, timestamp=1_700_000_000_000 + i) for i, v in enumerate(vals[:4])])
        log.append_records([SimpleRecord(value=v, timestamp=1_700_000_001_000 + i) for i, v in enumerate(vals[4:])])
    if snapshot is not None:
        (d / "00000000000000000009-0000000003.checkpoint").write_bytes(snapshot)
    if quorum_state is not None:
        (d / "quorum-state").write_bytes(quorum_state)
    return d


def offset_commit(group: str, topic: str, partition: int, offset: int | None, *, key_version: int = 1,
                  value_version: int = 3, ts: int = 1_700_000_000_000) -> SimpleRecord:
    key = encode_coordinator_key("offsets", key_version, {"group": group, "topic": topic, "partition": partition})
    value = None if offset is None else encode_coordinator_value("offsets", key_version, value_version, {
        "offset": offset, "leaderEpoch": 0, "metadata": "", "commitTimestamp": ts, "expireTimestamp": -1})
    return SimpleRecord(value=value, key=key, timestamp=ts)


def group_metadata(group: str, members: int, *, protocol: str = "range", generation: int = 5) -> SimpleRecord:
    key = encode_coordinator_key("offsets", 2, {"group": group})
    value = encode_coordinator_value("offsets", 2, 4, {
        "protocolType": "consumer", "generation": generation, "protocol": protocol,
        "leader": "m-0" if members else None, "currentStateTimestamp": 1_700_000_000_000,
        "members": [{"memberId": f"m-{i}", "groupInstanceId": None, "clientId": "c", "clientHost": "/127.0.0.1",
                     "rebalanceTimeout": 30000, "sessionTimeout": 45000, "subscription": b"\x00\x01",
                     "assignment": b"\x00\x02"} for i in range(members)]})
    return SimpleRecord(value=value, key=key, timestamp=1_700_000_000_000)


def consumer_group_records(group: str, epoch: int, member: str) -> list[SimpleRecord]:
    """KIP-848 records: group epoch, one member's metadata and its current assignment."""
    recs = [
        (3, {"groupId": group}, 0, {"epoch": epoch, "metadataHash": 0}),
        (5, {"groupId": group, "memberId": member}, 0, {
            "instanceId": None, "rackId": None, "clientId": "c", "clientHost": "/10.0.0.1",
            "subscribedTopicNames": ["orders"], "subscribedTopicRegex": None, "rebalanceTimeoutMs": 30000,
            "serverAssignor": "uniform", "classicMemberMetadata": None}),
        (8, {"groupId": group, "memberId": member}, 0, {
            "memberEpoch": epoch, "previousMemberEpoch": epoch - 1, "state": 0,
            "assignedPartitions": [{"topicId": TOPIC_ID, "partitions": [0, 1]}], "partitionsPendingRevocation": []}),
    ]
    return [SimpleRecord(value=encode_coordinator_value("offsets", t, vv, v),
                         key=encode_coordinator_key("offsets", t, k), timestamp=1_700_000_000_000)
            for t, k, vv, v in recs]


def write_partition(root: Path, name: str, batches: Sequence[bytes | Sequence[SimpleRecord]]) -> Path:
    """A partition directory written by PartitionLog; each item is raw batch bytes (offsets
    reassigned) or a list of records (one batch)."""
    d = root / name
    with PartitionLog.open(d) as log:
        for b in batches:
            if isinstance(b, bytes | bytearray):
                log.append(b)
            else:
                log.append_records(list(b))
    return d


def txn_batch(records: Sequence[SimpleRecord], producer_id: int) -> bytes:
    return encode_batch(list(records), producer_id=producer_id, producer_epoch=0, base_sequence=0,
                        is_transactional=True)


def txn_marker(producer_id: int, commit: bool) -> bytes:
    return encode_end_txn_marker_batch(producer_id=producer_id, producer_epoch=0, commit=commit,
                                       coordinator_epoch=1, timestamp=1_700_000_000_000)


def tree_hash(root: Path) -> str:
    h = hashlib.sha256()
    for f in sorted(root.rglob("*")):
        h.update(str(f.relative_to(root)).encode())
        if f.is_file():
            h.update(f.read_bytes())
    return h.hexdigest()
