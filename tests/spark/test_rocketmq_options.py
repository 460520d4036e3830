"""Option parsing and offset resolution of the rocketmq source (pure functions, no Spark)."""

from __future__ import annotations

import pytest

from mqstore.errors import (
    DataLossError,
    InvalidArgumentError,
    OffsetOptionOutOfRangeError,
    SourceOptionError,
    UnknownTopicError,
)
from mqstore.spark._rocketmq_options import (
    apportion,
    parse_options,
    parse_queue_offsets,
    resolve_queue_bounds,
    select_topics,
)

CAT = {
    "a": {("orders", 0): (0, 10), ("orders", 1): (2, 5), ("audit", 0): (0, 0)},
    "b": {("orders", 0): (0, 3)},
}


def test_paths_and_broker_names() -> None:
    o = parse_options({"path": "/x/broker-a/"})
    assert o.paths == ("/x/broker-a/",) and o.broker_names == ("broker-a",)
    o = parse_options({"paths": '["/s/a", "/s/b"]', "brokerNames": "A, B"})
    assert o.paths == ("/s/a", "/s/b") and o.broker_names == ("A", "B")
    o = parse_options({"PATHS": "/s/a,/s/b"})  # names are case-insensitive
    assert o.broker_names == ("a", "b")
    with pytest.raises(SourceOptionError, match="no store given"):
        parse_options({})
    with pytest.raises(SourceOptionError, match="used by more than one store"):
        parse_options({"paths": "/x/store,/y/store"})
    with pytest.raises(SourceOptionError, match="2 paths"):
        parse_options({"paths": "/x/a,/y/b", "brokerNames": "only-one"})
    with pytest.raises(SourceOptionError, match="not valid JSON"):
        parse_options({"paths": '["/x/a", '})


def test_topics_and_patterns() -> None:
    assert parse_options({"path": "/p", "topics": "a, b,a"}).topics == ("a", "b")
    assert parse_options({"path": "/p", "topics": '["a", "b"]'}).topics == ("a", "b")
    o = parse_options({"path": "/p", "topics": "regex:ord.*"})
    assert o.topics is None and o.topic_pattern == "ord.*"
    assert parse_options({"path": "/p", "topicPattern": "x|y"}).topic_pattern == "x|y"
    with pytest.raises(SourceOptionError, match="give only one of"):
        parse_options({"path": "/p", "topics": "a", "topicPattern": "b"})
    with pytest.raises(SourceOptionError, match="regular expression"):
        parse_options({"path": "/p", "topicPattern": "("})
    with pytest.raises(SourceOptionError, match="empty entry"):
        parse_options({"path": "/p", "topics": "a,,b"})
    known = {"orders", "order-x", "audit"}
    assert select_topics(parse_options({"path": "/p", "topics": "regex:order.*"}), known) == {"orders", "order-x"}
    assert select_topics(parse_options({"path": "/p"}), known) is None
    with pytest.raises(UnknownTopicError, match="'nope'"):
        select_topics(parse_options({"path": "/p", "topics": "orders,nope"}), known)


def test_scalar_options() -> None:
    o = parse_options({"path": "/p", "includeBody": "FALSE", "checkCRC": "true", "failOnDataLoss": "false",
                       "minPartitions": "8"})
    assert (o.include_body, o.check_crc, o.fail_on_data_loss, o.min_partitions) == (False, True, False, 8)
    for bad in ({"includeBody": "maybe"}, {"minPartitions": "0"}, {"minPartitions": "x"},
                {"startingTimestamp": "-5"}, {"startingTimestamp": "10", "endingTimestamp": "5"},
                {"maxOffsetsPerTrigger": "10"}):
        with pytest.raises(InvalidArgumentError):
            parse_options({"path": "/p", **bad})


def test_offsets_json_parsing() -> None:
    assert parse_queue_offsets("s", " Earliest ") == "earliest"
    assert parse_queue_offsets("s", '{"t": {"b": {"0": 5, "3": -1}}}') == {"t": {"b": {0: 5, 3: -1}}}
    for bad, msg in (('{"t": ', "not valid JSON"), ("[1]", "JSON object"), ('{"t": 1}', "broker names"),
                     ('{"t": {"b": 1}}', "queue ids"), ('{"t": {"b": {"x": 1}}}', "not an integer"),
                     ('{"t": {"b": {"0": -3}}}', "-2 \\(earliest\\)"), ('{"t": {"b": {"0": "5"}}}', "integer"),
                     ('{"t": {"b": {"0": true}}}', "integer"), ('{"t": {"b": {"-1": 0}}}', "negative")):
        with pytest.raises(SourceOptionError, match=msg):
            parse_queue_offsets("startingOffsets", bad)


def test_resolution_defaults_and_json() -> None:
    o = parse_options({"path": "/p", "topics": "orders"})
    assert resolve_queue_bounds(o, CAT, frozenset({"orders"})) is None  # no offset option: everything
    o = parse_options({"paths": "/a,/b", "startingOffsets": '{"orders": {"a": {"0": 4, "1": -1}}}',
                       "endingOffsets": '{"orders": {"a": {"0": 9}, "b": {"0": -2}}}'})
    got = resolve_queue_bounds(o, CAT, None)
    assert got == {"a": {("audit", 0): (0, 0), ("orders", 0): (4, 9), ("orders", 1): (5, 5)},
                   "b": {("orders", 0): (0, 0)}}
    o = parse_options({"paths": "/a,/b", "startingOffsets": "latest"})
    assert all(lo == hi for q in resolve_queue_bounds(o, CAT, None).values() for lo, hi in q.values())


def test_resolution_errors() -> None:
    def bounds(**opts: str) -> object:
        return resolve_queue_bounds(parse_options({"paths": "/a,/b", **opts}), CAT, None)

    with pytest.raises(UnknownTopicError, match="unknown topic 'nope'"):
        bounds(startingOffsets='{"nope": {"a": {"0": 1}}}')
    with pytest.raises(UnknownTopicError, match="unknown broker 'c'"):
        bounds(startingOffsets='{"orders": {"c": {"0": 1}}}')
    with pytest.raises(UnknownTopicError, match="no queue 7"):
        bounds(endingOffsets='{"orders": {"a": {"7": 1}}}')
    with pytest.raises(OffsetOptionOutOfRangeError, match=r"offset 11 of orders/a/0 is outside .*\[0, 10\]") as err:
        bounds(startingOffsets='{"orders": {"a": {"0": 11}}}')
    assert isinstance(err.value, DataLossError) and isinstance(err.value, InvalidArgumentError)
    with pytest.raises(OffsetOptionOutOfRangeError, match="offset 1 of orders/a/1"):
        bounds(startingOffsets='{"orders": {"a": {"1": 1}}}')  # below the queue's min offset 2
    with pytest.raises(SourceOptionError, match="after its ending offset"):
        bounds(startingOffsets='{"orders": {"a": {"0": 8}}}', endingOffsets='{"orders": {"a": {"0": 3}}}')
    clamped = bounds(startingOffsets='{"orders": {"a": {"0": 11, "1": 0}}}', failOnDataLoss="false")
    assert clamped["a"][("orders", 0)] == (10, 10) and clamped["a"][("orders", 1)] == (2, 5)
    with pytest.raises(SourceOptionError, match="does not select"):
        resolve_queue_bounds(parse_options({"paths": "/a,/b", "topics": "audit",
                                            "startingOffsets": '{"orders": {"a": {"0": 1}}}'}), CAT,
                             frozenset({"audit"}))


def test_resolution_by_time() -> None:
    calls = []

    def lookup(broker: str, topic: str, qid: int, ts: int) -> int:
        calls.append((broker, topic, qid, ts))
        return {100: 3, 200: 7}[ts] if (broker, topic, qid) == ("a", "orders", 0) else 99

    o = parse_options({"paths": "/a,/b", "startingTimestamp": "100", "endingTimestamp": "200",
                       "startingOffsets": '{"orders": {"a": {"0": 1}}}'})  # timestamps take precedence
    got = resolve_queue_bounds(o, CAT, frozenset({"orders"}), lookup)
    assert got["a"][("orders", 0)] == (3, 7)
    assert got["a"][("orders", 1)] == (5, 5)  # lookups clamp to the queue's range
    assert got["b"][("orders", 0)] == (3, 3)
    assert ("a", "audit", 0, 100) not in calls  # unselected topics are not searched
    with pytest.raises(SourceOptionError, match="ConsumeQueues"):
        resolve_queue_bounds(o, CAT, None, None)


def test_stream_options() -> None:
    o = parse_options({"paths": "/a,/b", "startingOffsets": '{"a": 120}', "maxOffsetsPerTrigger": "5",
                       "maxBytesPerTrigger": "1000"}, streaming=True)
    assert o.stream_starting == {"a": 120} and o.max_offsets_per_trigger == 5 and o.max_bytes_per_trigger == 1000
    assert parse_options({"path": "/a"}, streaming=True).stream_starting == "latest"  # as rocketmq-spark
    assert parse_options({"path": "/a", "startingOffsets": "latest"}, streaming=True).stream_starting == "latest"
    with pytest.raises(UnknownTopicError, match="unknown broker 'zz'"):
        parse_options({"path": "/a", "startingOffsets": '{"zz": 0}'}, streaming=True)
    for bad in ({"startingOffsets": '{"a": "x"}'}, {"startingOffsets": "{"}, {"endingOffsets": "latest"},
                {"startingTimestamp": "5"}, {"maxBytesPerTrigger": "0"}):
        with pytest.raises(SourceOptionError):
            parse_options({"path": "/a", **bad}, streaming=True)


def test_apportion() -> None:
    assert apportion([3, 4], 10) == [3, 4]
    assert apportion([10, 10], 5) in ([3, 2], [2, 3])
    assert sum(apportion([7, 0, 13], 9)) == 9
    got = apportion([100, 1, 1], 3)
    assert sum(got) == 3 and all(g <= a for g, a in zip(got, [100, 1, 1], strict=True))
    assert apportion([], 5) == []
