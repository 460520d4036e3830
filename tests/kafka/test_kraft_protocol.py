"""The schema-driven Kafka message codec, the KRaft metadata record schemas and the coordinator
record schemas: round trips of every schema at every version, hand-assembled golden bytes, bad input."""

from __future__ import annotations

import struct
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from mqstore.errors import CorruptDataError, InvalidArgumentError, TruncatedRecordError
from mqstore.formats.kafka.coordinator_records import (
    TABLES,
    decode_coordinator_record,
    encode_coordinator_key,
    encode_coordinator_value,
)
from mqstore.formats.kafka.decoders import decode_record, decoder_for_dir_name
from mqstore.formats.kafka.metadata_records import (
    METADATA_SCHEMAS,
    decode_metadata_record,
    encode_metadata_record,
    type_name,
)
from mqstore.formats.kafka.protocol import (
    UNKNOWN_TAGGED,
    Field,
    Schema,
    UnsupportedVersionError,
    decode_message,
    decode_uvarint,
    encode_message,
    encode_uvarint,
    uuid_from_str,
    uuid_to_str,
)
from mqstore.formats.kafka.quorum_state import decode_quorum_state, encode_quorum_state

_INT = {"int8": 8, "int16": 16, "int32": 32, "int64": 64}
_UINT = {"uint16": 16, "uint32": 32}


def _scalar(t: str) -> st.SearchStrategy[Any]:
    if t in _INT:
        b = _INT[t]
        return st.integers(-(1 << (b - 1)), (1 << (b - 1)) - 1)
    if t in _UINT:
        return st.integers(0, (1 << _UINT[t]) - 1)
    if t == "float64":
        return st.floats(allow_nan=False)
    if t == "bool":
        return st.booleans()
    if t == "string":
        return st.text(max_size=12)
    if t == "bytes":
        return st.binary(max_size=12)
    if t == "uuid":
        return st.binary(min_size=16, max_size=16).map(uuid_to_str)
    raise AssertionError(t)


def _field(f: Field, version: int, flexible: bool) -> st.SearchStrategy[Any]:
    if f.is_array:
        elem = _struct(f.fields or (), version, flexible) if f.is_struct else _scalar(f.element)
        base: st.SearchStrategy[Any] = st.lists(elem, max_size=3)
    elif f.is_struct:
        base = _struct(f.fields or (), version, flexible)
    else:
        base = _scalar(f.type)
    return st.none() | base if f.is_nullable(version) else base


def _struct(fields: tuple[Field, ...], version: int, flexible: bool,
            unknown_tags: bool = False) -> st.SearchStrategy[dict[str, Any]]:
    parts = {}
    for f in fields:
        if f.is_tagged(version) and not flexible:
            continue
        if f.present(version):
            parts[f.key] = _field(f, version, flexible)
    s = st.fixed_dictionaries(parts)
    if unknown_tags and flexible:
        known = {f.tag for f in fields if f.tag is not None}
        tags = st.lists(st.integers(0, 40).filter(lambda t: t not in known), unique=True, max_size=2)
        unk = tags.flatmap(lambda ts: st.tuples(*[st.binary(max_size=6) for _ in ts]).map(
            lambda ds, ts=ts: [{"tag": t, "data": d} for t, d in sorted(zip(ts, ds, strict=True))]))
        s = st.tuples(s, unk).map(lambda p: {**p[0], UNKNOWN_TAGGED: p[1]} if p[1] else p[0])
    return s


def _cases() -> list[tuple[str, Schema, int]]:
    out = []
    for k, s in METADATA_SCHEMAS.items():
        for v in range(s.valid[0], s.valid[1] + 1):
            out.append((f"metadata-{k}-{s.name}-v{v}", s, v))
    seen: set[str] = set()
    for table, types in TABLES.items():
        for rt in types.values():
            if rt.key.name not in seen:
                seen.add(rt.key.name)
                out.append((f"{table}-{rt.key.name}", rt.key, 0))
            if rt.value.name in seen:
                continue
            seen.add(rt.value.name)
            for v in range(rt.value.valid[0], rt.value.valid[1] + 1):
                out.append((f"{table}-{rt.value.name}-v{v}", rt.value, v))
    return out


CASES = _cases()


@pytest.mark.parametrize(("schema", "version"), [(s, v) for _, s, v in CASES], ids=[c[0] for c in CASES])
@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(data=st.data())
def test_round_trip_every_schema(schema: Schema, version: int, data: st.DataObject) -> None:
    msg = data.draw(_struct(schema.fields, version, schema.is_flexible(version), unknown_tags=True))
    raw = encode_message(schema, version, msg)
    decoded, end = decode_message(schema, version, raw)
    assert end == len(raw)
    assert decoded == msg
    assert encode_message(schema, version, decoded) == raw


def test_every_metadata_type_is_covered() -> None:
    names = {type_name(s.name) for s in METADATA_SCHEMAS.values()}
    for n in ("TOPIC_RECORD", "PARTITION_RECORD", "PARTITION_CHANGE_RECORD", "REGISTER_BROKER_RECORD",
              "BROKER_REGISTRATION_CHANGE_RECORD", "FEATURE_LEVEL_RECORD", "CONFIG_RECORD", "PRODUCER_IDS_RECORD",
              "REMOVE_TOPIC_RECORD", "UNREGISTER_BROKER_RECORD", "FENCE_BROKER_RECORD", "UNFENCE_BROKER_RECORD",
              "ACCESS_CONTROL_ENTRY_RECORD", "CLIENT_QUOTA_RECORD", "NO_OP_RECORD", "ZK_MIGRATION_STATE_RECORD",
              "REGISTER_CONTROLLER_RECORD", "BEGIN_TRANSACTION_RECORD", "END_TRANSACTION_RECORD",
              "ABORT_TRANSACTION_RECORD", "DELEGATION_TOKEN_RECORD", "USER_SCRAM_CREDENTIAL_RECORD"):
        assert n in names


@pytest.mark.parametrize("api_key", sorted(METADATA_SCHEMAS))
@settings(max_examples=15, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(data=st.data())
def test_metadata_record_frame_round_trip(api_key: int, data: st.DataObject) -> None:
    s = METADATA_SCHEMAS[api_key]
    version = data.draw(st.integers(s.valid[0], s.valid[1]))
    msg = data.draw(_struct(s.fields, version, s.is_flexible(version)))
    value = encode_metadata_record(api_key, version, msg)
    assert value[0] == 0  # frame version
    d = decode_metadata_record(value)
    assert d == {"type": type_name(s.name), "apiKey": api_key, "version": version, "data": msg}


# ----------------------------------------------------------------------------- golden bytes (by layout)
TOPIC_ID = "AAAAAAAAQACAAAAAAAAAkQ"


def test_topic_record_golden_bytes() -> None:
    # frame 0, api key 2, version 0, compact string "foo" (length+1 = 4), 16-byte uuid, no tagged fields
    golden = bytes([0, 2, 0, 4]) + b"foo" + uuid_from_str(TOPIC_ID) + b"\x00"
    assert encode_metadata_record("TopicRecord", 0, {"name": "foo", "topicId": TOPIC_ID}) == golden
    assert decode_metadata_record(golden)["data"] == {"name": "foo", "topicId": TOPIC_ID}
    assert uuid_from_str(TOPIC_ID).hex() == "00000000000040008000000000000091"  # 00000000-0000-4000-8000-...91


def test_feature_level_record_golden_bytes() -> None:
    golden = bytes([0, 12, 0, 17]) + b"metadata.version" + struct.pack(">h", 20) + b"\x00"
    d = decode_metadata_record(golden)
    assert d["type"] == "FEATURE_LEVEL_RECORD"
    assert d["data"] == {"name": "metadata.version", "featureLevel": 20}


def test_partition_change_record_tagged_fields_golden() -> None:
    # only the ISR (tag 0) and the leader (tag 1) changed
    isr = b"\x03" + struct.pack(">ii", 1, 2)
    leader = struct.pack(">i", 2)
    body = (struct.pack(">i", 3) + uuid_from_str(TOPIC_ID) + b"\x02"
            + b"\x00" + bytes([len(isr)]) + isr + b"\x01" + bytes([len(leader)]) + leader)
    value = bytes([0, 5, 0]) + body
    d = decode_metadata_record(value)
    assert d["data"]["isr"] == [1, 2] and d["data"]["leader"] == 2
    assert d["data"]["replicas"] is None and d["data"]["leaderRecoveryState"] == -1
    assert encode_metadata_record(5, 0, d["data"]) == value


def test_offset_commit_golden_bytes() -> None:
    # key v1: int16 1, int16-length strings, int32 partition; value v3: int64, int32, string, int64
    key = struct.pack(">hh", 1, 1) + b"g" + struct.pack(">h", 1) + b"t" + struct.pack(">i", 7)
    value = struct.pack(">hqih", 3, 42, 5, 2) + b"md" + struct.pack(">q", 1_700_000_000_000)
    d = decode_coordinator_record("offsets", key, value)
    assert d == {"type": "OffsetCommit", "keyVersion": 1, "key": {"group": "g", "topic": "t", "partition": 7},
                 "valueVersion": 3, "value": {"offset": 42, "leaderEpoch": 5, "metadata": "md",
                                              "commitTimestamp": 1_700_000_000_000}}
    assert encode_coordinator_key("offsets", 1, d["key"]) == key
    assert encode_coordinator_value("offsets", 1, 3, d["value"]) == value


def test_offset_commit_value_v4_is_flexible() -> None:
    value = encode_coordinator_value("offsets", 1, 4, {"offset": 1, "leaderEpoch": -1, "metadata": "",
                                                        "commitTimestamp": 2})
    assert value == struct.pack(">hqi", 4, 1, -1) + b"\x01" + struct.pack(">q", 2) + b"\x00"


def test_tombstone_and_transaction_record() -> None:
    key = encode_coordinator_key("offsets", 2, {"group": "gone"})
    assert decode_coordinator_record("offsets", key, None)["value"] is None
    k = encode_coordinator_key("transaction", 0, {"transactionalId": "tx-1"})
    v = encode_coordinator_value("transaction", 0, 1, {
        "producerId": 9, "previousProducerId": -1, "nextProducerId": 10, "producerEpoch": 3,
        "transactionTimeoutMs": 60000, "transactionStatus": 4,
        "transactionPartitions": [{"topic": "orders", "partitionIds": [0, 1]}],
        "transactionLastUpdateTimestampMs": 5, "transactionStartTimestampMs": 4, "clientTransactionVersion": 2})
    d = decode_coordinator_record("transaction", k, v)
    assert d["type"] == "TransactionLog" and d["key"] == {"transactionalId": "tx-1"}
    assert d["value"]["nextProducerId"] == 10 and d["value"]["clientTransactionVersion"] == 2
    assert d["value"]["previousProducerId"] == -1


# ----------------------------------------------------------------------------- bad input
def test_unknown_metadata_api_key_is_shown_with_its_bytes() -> None:
    value = bytes([0, 99, 0, 1, 2, 3])
    d = decode_metadata_record(value)
    assert d == {"type": "UNKNOWN", "apiKey": 99, "version": 0, "unknown": True, "bytes": b"\x01\x02\x03"}
    newer = bytes([0, 2, 7, 9])
    assert decode_metadata_record(newer)["unknown"] is True
    assert decode_metadata_record(newer)["type"] == "TOPIC_RECORD"


def test_truncated_metadata_record_raises_typed_error() -> None:
    full = encode_metadata_record("TopicRecord", 0, {"name": "foo", "topicId": TOPIC_ID})
    for cut in range(1, len(full)):
        with pytest.raises(CorruptDataError):
            decode_metadata_record(full[:cut])
    with pytest.raises(CorruptDataError, match="bytes after"):
        decode_metadata_record(full + b"\x00")
    with pytest.raises(CorruptDataError, match="frame version"):
        decode_metadata_record(b"\x05\x02\x00")
    with pytest.raises(CorruptDataError, match="without a value"):
        decode_metadata_record(None)


def test_decode_record_never_raises_on_garbage() -> None:
    assert decode_record("cluster-metadata", None, b"\x00\x02\x00\xff")["decodeError"]
    assert decode_record("offsets", b"\x00", b"")["decodeError"]
    assert decode_record("offsets", struct.pack(">h", 99) + b"x", None)["type"] == "UNKNOWN"
    assert decode_record("none", b"k", b"v") is None
    assert decoder_for_dir_name("__consumer_offsets-12") == "offsets"
    assert decoder_for_dir_name("__transaction_state-0") == "transaction"
    assert decoder_for_dir_name("__share_group_state-3") == "share-state"
    assert decoder_for_dir_name("__cluster_metadata-0") == "cluster-metadata"
    assert decoder_for_dir_name("orders-0") == "none"


def test_codec_errors() -> None:
    s = METADATA_SCHEMAS[2]
    with pytest.raises(UnsupportedVersionError):
        decode_message(s, 5, b"")
    with pytest.raises(InvalidArgumentError, match="missing"):
        encode_message(s, 0, {"name": "x"})
    with pytest.raises(InvalidArgumentError, match="not a int32"):
        encode_message(METADATA_SCHEMAS[1], 0, {"brokerId": 1 << 40, "brokerEpoch": 0})
    with pytest.raises(InvalidArgumentError, match="not nullable"):
        encode_message(s, 0, {"name": None, "topicId": TOPIC_ID})
    with pytest.raises(InvalidArgumentError):
        uuid_from_str("short")
    with pytest.raises(CorruptDataError, match="UTF-8"):
        decode_message(s, 0, b"\x02\xff" + bytes(16) + b"\x00")
    with pytest.raises(TruncatedRecordError):
        decode_uvarint(b"\x80\x80", 0, 2)
    with pytest.raises(CorruptDataError, match="longer than 5"):
        decode_uvarint(b"\x80" * 6, 0, 6)
    assert decode_uvarint(encode_uvarint(300), 0, 2) == (300, 2)
    # an array count far past the data is refused before any allocation
    with pytest.raises(TruncatedRecordError):
        decode_message(METADATA_SCHEMAS[11], 0, b"\x01a\x01b\xff\xff\xff\x0f")
    # tagged fields must be in ascending order
    bad = struct.pack(">i", 1) + uuid_from_str(TOPIC_ID) + b"\x02" + b"\x01\x04\x00\x00\x00\x01" + b"\x00\x01\x01"
    with pytest.raises(CorruptDataError, match="out of order"):
        decode_message(METADATA_SCHEMAS[5], 0, bad)


# ----------------------------------------------------------------------------- quorum-state
def test_quorum_state_versions() -> None:
    v0 = {"clusterId": "", "leaderId": 1, "leaderEpoch": 4, "votedId": -1, "appliedOffset": 0,
          "currentVoters": [{"voterId": 1}, {"voterId": 2}], "data_version": 0}
    v1 = {"leaderId": -1, "leaderEpoch": 9, "votedId": 2, "votedDirectoryId": "AAAAAAAAAAAAAAAAAAAAAQ",
          "data_version": 1}
    assert decode_quorum_state(encode_quorum_state(v0)) == v0
    assert decode_quorum_state(encode_quorum_state(v1)) == v1
    for bad, msg in ((b"{", "JSON"), (b"[]", "object"), (b'{"data_version":7}', "data_version"),
                     (b'{"data_version":1,"leaderId":"x"}', "leaderId"),
                     (b'{"data_version":0,"leaderId":1,"leaderEpoch":1,"votedId":1,"currentVoters":[1]}', "voter"),
                     (b"\xff", "JSON")):
        with pytest.raises(CorruptDataError, match=msg):
            decode_quorum_state(bad)
