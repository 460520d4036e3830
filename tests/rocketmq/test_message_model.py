"""The one message model: ``MessageRecord`` is what the decoder returns and what the store's API
(``mqstore.Message``) hands out."""

from __future__ import annotations

import pickle

from hypothesis import given
from hypothesis import strategies as st

import mqstore
from mqstore.api.rocketmq import Message
from mqstore.formats.rocketmq.msgid import create_message_id, decode_message_id
from mqstore.formats.rocketmq.properties import encode_properties
from mqstore.formats.rocketmq.record import Host, MessageRecord, decode_record, encode_record

ipv4 = st.tuples(*[st.integers(0, 255)] * 4).map(lambda t: ".".join(map(str, t)))
port = st.integers(0, 65535)


def test_the_api_message_is_the_record() -> None:
    assert Message is MessageRecord
    assert mqstore.Message is MessageRecord


@given(ipv4, port)
def test_host_is_its_text(ip: str, p: int) -> None:
    h = Host(ip, p)
    assert h == f"{ip}:{p}" and str(h) == f"{ip}:{p}" and (h.ip, h.port) == (ip, p)
    assert Host.parse(str(h)) == h and Host.from_bytes(h.to_bytes()) == h
    back = pickle.loads(pickle.dumps(h))
    assert type(back) is Host and (back.ip, back.port) == (ip, p)
    v6 = Host.parse(f"[::{p:x}]:{p}")
    assert v6.is_v6 and v6.startswith("[0000:") and v6 == str(v6)


@given(st.lists(st.text(alphabet="abc-1", min_size=1, max_size=5), max_size=4), st.integers(0, 2**40), ipv4, port)
def test_record_fields_the_api_uses(keys: list[str], offset: int, ip: str, p: int) -> None:
    props = {"KEYS": " ".join(keys)} if keys else {}
    rec = MessageRecord(topic="T", body=b"x", commit_log_offset=offset, store_host=Host(ip, p),
                        properties_text=encode_properties(props))
    raw = encode_record(rec)
    back = decode_record(raw)
    assert back.commit_log_offset == offset and back.size == len(raw) == back.total_size
    assert back.keys == [k for k in " ".join(keys).split(" ") if k]
    assert back.msg_id == create_message_id(back.store_host, offset)
    assert decode_message_id(back.msg_id) == (back.store_host, offset)
    d = back.to_json_dict()
    assert (d["commitLogOffset"], d["size"], d["storeHost"], d["keys"]) == (offset, len(raw), f"{ip}:{p}", back.keys)
    assert type(d["storeHost"]) is str


def test_get_by_tag_follows_the_subscription_rule(tmp_path) -> None:
    """``MessageStore.get_by_tag`` reads a tag expression by the broker's rule (one home:
    ``parse_sub_expression``): ``*`` or empty selects all, a ``*`` among tags is a literal tag."""
    from mqstore.api.rocketmq import MessageStore, StoreConfig

    with MessageStore.open(tmp_path, StoreConfig(commit_log_file_size=1 << 20)) as s:
        s.put_batch([dict(topic="T", body=b"%d" % i, tags=["A", "B", "*"][i % 3]) for i in range(9)])
        s.flush()
        assert len(s.get_by_tag("T", 0, "*", 0, 100)) == 9
        assert len(s.get_by_tag("T", 0, "  ", 0, 100)) == 9
        assert [m.tags for m in s.get_by_tag("T", 0, "A || *", 0, 100)] == ["A", "*"] * 3
        assert [m.tags for m in s.get_by_tag("T", 0, "B||", 0, 100)] == ["B"] * 3


prop_text = st.lists(st.sampled_from(["\x01", "\x02", "a", "b", "KEYS", "TAGS", "UNIQ_KEY", " ", "é"]), max_size=30).map("".join)


@given(prop_text)
def test_lazy_properties_equal_eager(text: str) -> None:
    """A record made with ``properties=None`` parses ``properties_text`` on first access: equal to
    the record made with the parsed dict, through ``==``, ``repr``, the key accessors, pickling,
    ``dataclasses.replace``/``asdict`` and ``to_json_dict``; setting the field still works."""
    import copy
    import dataclasses

    from mqstore.formats.rocketmq.properties import parse_properties
    from mqstore.formats.rocketmq.record import _props_get

    def lazy() -> MessageRecord:
        return MessageRecord("T", b"body", properties_text=text, properties=None)  # type: ignore[arg-type]

    eager = MessageRecord("T", b"body", properties_text=text, properties=parse_properties(text))
    m = lazy()
    assert _props_get(m) is None  # nothing parsed yet
    assert m == eager and _props_get(m) == eager.properties
    assert repr(lazy()) == repr(eager) and lazy().keys == eager.keys and lazy().tags == eager.tags
    assert lazy().uniq_key == eager.uniq_key and lazy().to_json_dict() == eager.to_json_dict()
    assert pickle.loads(pickle.dumps(lazy())) == eager and copy.deepcopy(lazy()) == eager
    assert dataclasses.replace(lazy()) == eager and dataclasses.asdict(lazy()) == dataclasses.asdict(eager)
    m = lazy()
    m.properties = {"X": "1"}
    assert m.properties == {"X": "1"}
    assert MessageRecord("T", properties_text=text).properties == {}  # the default stays an empty dict
