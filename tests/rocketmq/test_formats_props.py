"""Property tests (hypothesis) of the RocketMQ codecs."""

from __future__ import annotations

import ipaddress

from hypothesis import given, settings
from hypothesis import strategies as st

from mqstore.formats.rocketmq.javahash import (
    java_bytes_hashcode,
    java_hash_units,
    java_string_hashcode,
)
from mqstore.formats.rocketmq.properties import (
    delete_property,
    encode_properties,
    java_hashmap_order,
    parse_properties,
    parse_properties_reference,
    split_keys,
)
from mqstore.formats.rocketmq.record import (
    BORNHOST_V6_FLAG,
    MAGIC_V1,
    MAGIC_V2,
    STOREHOST_V6_FLAG,
    Host,
    MessageRecord,
    body_crc,
    check_record,
    decode_record,
    encode_record,
    read_crc_property,
)

# ----------------------------------------------------------------------------- strategies
# text without the two separators (and without surrogates, which UTF-8 cannot carry)
_chars = st.characters(blacklist_categories=("Cs",), blacklist_characters="\x01\x02")
prop_text = st.text(_chars, min_size=1, max_size=12)
topic_ascii = st.text(st.sampled_from("abcXYZ019_-%|"), min_size=1, max_size=40)
topic_unicode = st.text(_chars, min_size=1, max_size=20)

ipv4 = st.builds(lambda n: str(ipaddress.IPv4Address(n)), st.integers(0, 2**32 - 1))
ipv6 = st.builds(lambda n: ipaddress.IPv6Address(n).exploded, st.integers(0, 2**128 - 1))
hosts = st.builds(Host, st.one_of(ipv4, ipv6), st.integers(-(2**31), 2**31 - 1))
i32 = st.integers(-(2**31), 2**31 - 1)
i64 = st.integers(-(2**63), 2**63 - 1)


def java_hash_direct(s: str) -> int:
    """Java String.hashCode straight from the definition over UTF-16 code units."""
    units = s.encode("utf-16-le", "surrogatepass")
    h = 0
    for i in range(0, len(units), 2):
        h = (h * 31 + int.from_bytes(units[i : i + 2], "little")) % 2**32
    return h - 2**32 if h >= 2**31 else h


@st.composite
def records(draw: st.DrawFn) -> tuple[MessageRecord, int]:
    magic = draw(st.sampled_from([MAGIC_V1, MAGIC_V2]))
    topic = draw(st.one_of(topic_ascii, topic_unicode))
    if magic == MAGIC_V1 and len(topic.encode()) > 127:
        magic = MAGIC_V2
    props = draw(st.dictionaries(prop_text, prop_text, max_size=6))
    rec = MessageRecord(
        topic=topic,
        body=draw(st.binary(max_size=300)),
        queue_id=draw(i32),
        flag=draw(i32),
        queue_offset=draw(i64),
        commit_log_offset=draw(i64),
        sys_flag=draw(st.integers(0, 0x7FF)),
        born_timestamp=draw(i64),
        born_host=draw(hosts),
        store_timestamp=draw(i64),
        store_host=draw(hosts),
        reconsume_times=draw(i32),
        prepared_transaction_offset=draw(i64),
        properties_text=encode_properties(props),
    )
    return rec, magic


# ----------------------------------------------------------------------------- records
@settings(max_examples=300, deadline=None)
@given(records(), st.booleans())
def test_record_round_trip(sample: tuple[MessageRecord, int], prop_crc: bool) -> None:
    rec, magic = sample
    data = encode_record(rec, magic=magic, append_prop_crc=prop_crc)
    res = check_record(data, check_crc=True, verify_prop_crc=prop_crc)
    assert res.success and res.size == len(data), res.error
    back = decode_record(data, check_crc=True)
    expected_flag = rec.sys_flag & ~(BORNHOST_V6_FLAG | STOREHOST_V6_FLAG)
    expected_flag |= (BORNHOST_V6_FLAG if rec.born_host.is_v6 else 0) | (STOREHOST_V6_FLAG if rec.store_host.is_v6 else 0)
    assert back.sys_flag == expected_flag
    assert back.magic == magic
    assert (back.topic, back.body, back.queue_id, back.flag) == (rec.topic, rec.body, rec.queue_id, rec.flag)
    assert (back.queue_offset, back.commit_log_offset) == (rec.queue_offset, rec.commit_log_offset)
    assert (back.born_timestamp, back.store_timestamp) == (rec.born_timestamp, rec.store_timestamp)
    assert (back.born_host, back.store_host) == (rec.born_host, rec.store_host)
    assert str(back.born_host) == str(Host.parse(str(rec.born_host)))
    assert (back.reconsume_times, back.prepared_transaction_offset) == (
        rec.reconsume_times,
        rec.prepared_transaction_offset,
    )
    assert back.body_crc == body_crc(rec.body)
    if prop_crc:
        assert read_crc_property(back.properties_text) == body_crc(data[: len(data) - 20])
        assert delete_property(back.properties_text, "__CRC32#") == rec.properties_text
    else:
        assert back.properties_text == rec.properties_text
    assert back.properties == {**parse_properties(rec.properties_text), **back.properties}
    # re-encoding the decoded record gives the same bytes
    back.body_crc = None
    if prop_crc:
        back.properties_text = delete_property(back.properties_text, "__CRC32#")
    assert encode_record(back, append_prop_crc=prop_crc) == data


@settings(max_examples=200, deadline=None)
@given(records(), st.data())
def test_corrupt_record_never_crashes_checker(sample: tuple[MessageRecord, int], data: st.DataObject) -> None:
    rec, magic = sample
    raw = bytearray(encode_record(rec, magic=magic))
    for _ in range(data.draw(st.integers(1, 4))):
        pos = data.draw(st.integers(0, len(raw) - 1))
        raw[pos] = data.draw(st.integers(0, 255))
    cut = data.draw(st.integers(0, len(raw)))
    res = check_record(bytes(raw[:cut]), check_crc=True)
    assert res.size >= -1


# ----------------------------------------------------------------------------- properties
@settings(max_examples=300, deadline=None)
@given(st.dictionaries(prop_text, prop_text, max_size=20), st.sampled_from([16, 128]))
def test_properties_round_trip(props: dict[str, str], capacity: int) -> None:
    text = encode_properties(props, initial_capacity=capacity)
    assert parse_properties(text) == props
    assert sorted(java_hashmap_order(props, capacity)) == sorted(props)
    assert len(text) == sum(len(k) + len(v) + 2 for k, v in props.items())


@settings(max_examples=200, deadline=None)
@given(st.dictionaries(prop_text, prop_text, min_size=1, max_size=8), st.data())
def test_delete_property_removes_exactly_that_name(props: dict[str, str], data: st.DataObject) -> None:
    name = data.draw(st.sampled_from(sorted(props)))
    text = encode_properties(props)
    rest = delete_property(text, name)
    expected = {k: v for k, v in props.items() if k != name}
    assert parse_properties(rest) == expected


@given(st.text(st.sampled_from("ab \x01\x02"), max_size=30))
def test_parse_properties_later_duplicates_win(text: str) -> None:
    result = parse_properties(text)
    for name, value in result.items():
        assert name and value and "\x02" not in name + value
    assert parse_properties(text + "\x02z\x01new") == {**result, "z": "new"}


@given(st.text(st.sampled_from("ab "), max_size=20))
def test_split_keys(keys: str) -> None:
    assert split_keys(keys) == [k for k in keys.split(" ") if k]
    assert " ".join(split_keys(keys)) == " ".join(keys.split())


# ----------------------------------------------------------------------------- java hash
@settings(max_examples=500, deadline=None)
@given(st.text(st.characters(blacklist_categories=("Cs",)), max_size=40))
def test_java_hash_matches_utf16_definition(s: str) -> None:
    assert java_string_hashcode(s) == java_hash_direct(s)
    assert java_hash_units(s.encode("utf-16-be")) == java_hash_direct(s)
    assert java_bytes_hashcode(s.encode("utf-8")) == java_hash_direct(s)


@settings(max_examples=300, deadline=None)
@given(st.binary(max_size=40))
def test_java_bytes_hash_of_invalid_utf8(b: bytes) -> None:
    assert java_bytes_hashcode(b) == java_hash_direct(b.decode("utf-8", "replace"))


@settings(max_examples=400, deadline=None)
@given(st.text(st.sampled_from("ab \x01\x02\u00e9\ufffd"), max_size=40))
def test_parse_properties_matches_reference_walk(text: str) -> None:
    """The split/partition parser gives the reference walk's dict, in the same order."""
    got, exp = parse_properties(text), parse_properties_reference(text)
    assert got == exp
    assert list(got) == list(exp)
