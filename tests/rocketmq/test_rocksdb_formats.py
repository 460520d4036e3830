"""Keys and values of the RocksDB ConsumeQueue and config stores: round trips (hypothesis), the exact
bytes of the documented layout, bad input as typed errors."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from mqstore.errors import CorruptDataError
from mqstore.formats.rocketmq import rocksdb_cq as fmt

topics = st.text(st.characters(codec="utf-8", exclude_categories=("Cs",)), min_size=1, max_size=40)
i32 = st.integers(-(2**31), 2**31 - 1)
i64 = st.integers(-(2**63), 2**63 - 1)


@given(topics, i32, i64)
def test_cq_key_round_trip(topic, qid, qoff):
    key = fmt.encode_cq_key(topic, qid, qoff)
    assert fmt.decode_cq_key(key) == (topic, qid, qoff)
    assert key.startswith(fmt.queue_prefix(topic, qid))
    assert len(key) == 4 + 1 + len(topic.encode()) + 1 + 4 + 1 + 8


@given(i64, i32, i64, i64)
def test_cq_value_round_trip(off, size, tags, ts):
    v = fmt.encode_cq_value(off, size, tags, ts)
    assert len(v) == fmt.UNIT_VALUE_SIZE
    assert fmt.decode_cq_value(v) == (off, size, tags, ts)
    arr = fmt.decode_cq_values([v, v])
    assert arr["offset"].tolist() == [off, off] and arr["store_time"].tolist() == [ts, ts]


@given(topics, i32, st.sampled_from(["max", "min"]), i64, i64)
def test_offset_key_value_round_trip(topic, qid, kind, phy, qoff):
    assert fmt.decode_offset_key(fmt.encode_offset_key(topic, qid, kind)) == (topic, kind, qid)
    assert fmt.decode_offset_value(fmt.encode_offset_value(phy, qoff)) == (phy, qoff)


@given(i64)
def test_checkpoint_round_trip(phy):
    assert fmt.decode_checkpoint_value(fmt.encode_checkpoint_value(phy)) == phy


@given(topics.filter(lambda t: "@" not in t), topics)
def test_v1_key_round_trip(topic, group):
    assert fmt.decode_v1_offset_key(fmt.encode_v1_offset_key(topic, group)) == (topic, group)


@given(st.sampled_from([1, 2]), topics, topics, i32, i64)
def test_v2_key_value_round_trip(table, group, topic, qid, off):
    key = fmt.encode_v2_offset_key(group, topic, qid, table)
    assert fmt.decode_v2_offset_key(key) == (table, group, topic, qid)
    assert key.startswith(fmt.v2_table_prefix(table))
    assert fmt.decode_v2_offset_value(fmt.encode_v2_offset_value(off)) == off


def test_exact_bytes_of_the_documented_layout():
    assert fmt.encode_cq_key("T", 3, 258) == bytes.fromhex("00000001" "01" "54" "01" "00000003" "01" "0000000000000102")
    assert fmt.encode_cq_value(0x1122, 40, -1, 7) == bytes.fromhex(
        "0000000000001122" "00000028" "ffffffffffffffff" "0000000000000007")
    assert fmt.encode_offset_key("T", 2, "max") == bytes.fromhex("00000001" "01" "54" "01" "6d6178" "01" "00000002")
    assert fmt.encode_offset_key("T", 2, "min")[7:10] == b"min"
    assert fmt.CHECKPOINT_KEY == b"\x00\x00\x00\x10\x01CHECKPOINT_TOPIC\x01max\x01\x00\x00\x00\x00"
    assert fmt.encode_v2_offset_key("g", "t", 1) == bytes.fromhex("01" "0001" "02" "0001" "67" "01" "0001" "74" "01"
                                                                  "00000001")


@pytest.mark.parametrize("key", [b"", b"\x00\x00\x00\x09\x01T\x01", b"\x00\x00\x00\x01\x02T\x01\x00\x00\x00\x00\x01" + bytes(8),
                                 b"\xff\xff\xff\xff\x01", b"\x00\x00\x00\x01\x01T\x01\x00\x00\x00\x00\x01" + bytes(7),
                                 b"\x00\x00\x00\x01\x01\xff\x01\x00\x00\x00\x00\x01" + bytes(8)])
def test_bad_cq_keys(key):
    with pytest.raises(CorruptDataError):
        fmt.decode_cq_key(key)


@pytest.mark.parametrize("bad", [b"", bytes(27), bytes(29)])
def test_bad_values(bad):
    with pytest.raises(CorruptDataError):
        fmt.decode_cq_value(bad)
    with pytest.raises(CorruptDataError):
        fmt.decode_cq_values([bytes(28), bad])
    with pytest.raises(CorruptDataError):
        fmt.decode_offset_value(bad[:15])
    with pytest.raises(CorruptDataError):
        fmt.decode_checkpoint_value(bad[:7])


def test_bad_offset_and_config_keys():
    with pytest.raises(CorruptDataError):
        fmt.decode_offset_key(b"\x00\x00\x00\x01\x01T\x01mid\x01\x00\x00\x00\x00")
    with pytest.raises(CorruptDataError):
        fmt.decode_offset_key(b"\x00\x00\x00\x01\x01T\x01max\x01\x00\x00")
    with pytest.raises(CorruptDataError):
        fmt.decode_v1_offset_key(b"no-separator")
    with pytest.raises(CorruptDataError):
        fmt.decode_v1_offset_key(b"\xff@g")
    with pytest.raises(CorruptDataError):
        fmt.decode_v2_offset_key(b"\x01\x00\x01\x01data_version")
    with pytest.raises(CorruptDataError):
        fmt.decode_v2_offset_key(fmt.encode_v2_offset_key("g", "t", 1)[:-1])
    with pytest.raises(CorruptDataError):
        fmt.decode_v2_offset_value(b"\x00")
    with pytest.raises(ValueError):
        fmt.encode_offset_key("T", 0, "mid")
