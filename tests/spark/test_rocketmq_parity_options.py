"""rocketmq source parity with rocketmq-spark (issue 14): unknown names refused, rocketmq-spark's
topic options, subExpression tag filters (ConsumeQueue tag hash, then the stored tag), streams
starting at latest."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from rocketmq_spark_support import small_config

from mqstore import MessageStore
from mqstore.errors import InvalidArgumentError, SourceOptionError, UnknownTopicError
from mqstore.formats.rocketmq.javahash import java_string_hashcode, parse_sub_expression
from mqstore.spark._rocketmq_options import parse_options, select_topics
from mqstore.spark._rocketmq_read import RowFilter, open_segment, rocketmq_rows_py, select_positions
from mqstore.spark._rocketmq_store import list_segments
from mqstore.spark.rocketmq_source import plan_batch, read_range

pytestmark = pytest.mark.spark


# ----------------------------------------------------------------------------- names (pure)
@pytest.mark.parametrize(("name", "suggestion"), [
    ("subExpresion", "subExpression"),
    ("startingOffset", "startingOffsets"),
    ("topicpatern", "topicPattern"),
    ("brokerName", "brokerNames"),
    ("maxOffsetPerTrigger", "maxOffsetsPerTrigger"),
])
def test_unknown_options_are_refused_with_the_nearest_name(name: str, suggestion: str) -> None:
    with pytest.raises(SourceOptionError) as exc:
        parse_options({"path": "/p", name: "x"})
    msg = str(exc.value)
    assert "\n" not in msg and repr(name) in msg and f"did you mean {suggestion!r}" in msg


def test_rocketmq_spark_broker_options_are_accepted_and_ignored() -> None:
    o = parse_options({"path": "/p", "nameServer": "ns:9876", "nameserver.addr": "ns:9876", "group": "g",
                       "consumer.group": "g", "pullBatchSize": "32", "pull.max.batch.size": "32",
                       "pullTimeout": "3000", "pullTimeoutMs": "3000", "pull.timeout.ms": "3000",
                       "fetchOffset.numRetries": "3", "fetchOffset.retryIntervalMs": "1000"}, streaming=True)
    assert o.paths == ("/p",) and o.max_offsets_per_trigger is None


def test_topic_options_of_rocketmq_spark_and_kafka() -> None:
    assert parse_options({"path": "/p", "topic": "orders"}).topics == ("orders",)
    assert parse_options({"path": "/p", "subscribe": "orders, audit"}).topics == ("orders", "audit")
    o = parse_options({"path": "/p", "subscribePattern": "pay.*"})
    assert o.topics is None and o.topic_pattern == "pay.*"
    known = {"orders", "payments", "audit"}
    assert select_topics(o, known) == {"payments"}
    with pytest.raises(UnknownTopicError, match="option topic names unknown topic 'nope'"):
        select_topics(parse_options({"path": "/p", "topic": "nope"}), known)
    for pair in ({"topic": "a", "topics": "b"}, {"subscribe": "a", "subscribePattern": "b"},
                 {"topicPattern": "a", "subscribe": "b"}):
        with pytest.raises(SourceOptionError, match="give only one of"):
            parse_options({"path": "/p", **pair})
    with pytest.raises(SourceOptionError, match="pattern is empty"):
        parse_options({"path": "/p", "subscribePattern": " "})


@pytest.mark.parametrize(("expr", "tags"), [
    (None, None), ("*", None), ("", None), ("  *  ", None),
    ("TagA", {"TagA"}), ("TagA || TagB", {"TagA", "TagB"}), (" A||  ||B ", {"A", "B"}),
    ("A || *", {"A", "*"}),  # as on a broker: a * among tags is the literal tag *
])
def test_sub_expression_syntax(expr: str | None, tags: set[str] | None) -> None:
    assert parse_sub_expression(expr) == (None if tags is None else frozenset(tags))
    assert parse_options({"path": "/p", **({} if expr is None else {"subExpression": expr})}).tags == (
        None if tags is None else frozenset(tags))


def test_empty_tag_list_is_refused() -> None:
    with pytest.raises(InvalidArgumentError, match="names no tag"):
        parse_sub_expression(" || ")
    with pytest.raises(SourceOptionError, match="option subExpression"):
        parse_options({"path": "/p", "subExpression": "||"})


def test_stream_starts_at_latest_batch_at_earliest() -> None:
    assert parse_options({"path": "/p"}, streaming=True).stream_starting == "latest"
    assert parse_options({"path": "/p", "startingOffsets": "earliest"}, streaming=True).stream_starting == "earliest"
    b = parse_options({"path": "/p"})
    assert b.starting_offsets == "earliest" and not b.offsets_given


# ----------------------------------------------------------------------------- tag filter on a store
TAGS = ("Aa", "BB", "C", None, "Aa", "D", "BB", None, "C")


@pytest.fixture(scope="module")
def tagged(tmp_path_factory: pytest.TempPathFactory) -> Path:
    assert java_string_hashcode("Aa") == java_string_hashcode("BB")  # a Java hash collision
    path = tmp_path_factory.mktemp("tags") / "broker-t"
    with MessageStore.open(path, small_config()) as s:
        for i in range(90):
            s.put("orders" if i % 2 else "audit", b"body-%d" % i, queue_id=i % 2, tags=TAGS[i % len(TAGS)],
                  properties={"seq": str(i)})
        s.dispatch()
    return path


def _seqs(batches) -> list[int]:
    return [int(dict(p)["seq"]) for b in batches for p in b.column("properties").to_pylist()]


def _expected(tags: set[str], topic: str | None = None) -> list[int]:
    return [i for i in range(90) if TAGS[i % len(TAGS)] in tags and (topic is None or
                                                                      ("orders" if i % 2 else "audit") == topic)]


@pytest.mark.parametrize(("expr", "topic"), [("Aa", None), ("BB", "orders"), ("Aa || C", None), ("C||D", "audit"),
                                             ("nope", None)])
def test_tag_filter_batch(tagged: Path, expr: str, topic: str | None) -> None:
    opts = {"path": str(tagged), "subExpression": expr, **({"topic": topic} if topic else {})}
    parts = plan_batch(parse_options(opts))
    got = _seqs(b for p in parts for b in read_range(p, include_body=True, check_crc=False))
    assert got == _expected(set(parse_sub_expression(expr) or ()), topic)


def test_hash_stage_lets_collisions_through_and_the_tag_check_drops_them(tagged: Path) -> None:
    seg = list_segments(str(tagged))[0]
    mm, u8 = open_segment(seg.path)
    try:
        rf = RowFilter(tags=frozenset({"Aa"}))
        positions = select_positions(u8, seg.path, seg.base, 0, len(u8), row_filter=rf)
        ref = rocketmq_rows_py(bytes(u8), seg.base, 0, len(u8), broker_name="b", row_filter=rf)
        everything = rocketmq_rows_py(bytes(u8), seg.base, 0, len(u8), broker_name="b")
    finally:
        del u8
        mm.close()
    by_pos = {r["commitLogOffset"] - seg.base: r["tags"] for r in everything}
    candidates = [by_pos[int(p)] for p in positions]
    assert set(candidates) == {"Aa", "BB"}  # the ConsumeQueue hash cannot tell them apart
    assert {r["tags"] for r in ref} == {"Aa"}
    rows = _seqs(b for p in plan_batch(parse_options({"path": str(tagged), "subExpression": "Aa"}))
                 for b in read_range(p, include_body=False, check_crc=False))
    assert len(rows) == len(_expected({"Aa"})) and len(candidates) > len(ref)


def test_tag_filter_agrees_with_a_consumer(tagged: Path) -> None:
    with MessageStore.open(tagged, small_config(), read_only=True) as s:
        consumer = sorted(int(m.properties["seq"]) for q in (0, 1)
                          for m in s.get_by_tag("orders", q, "Aa || D", max_count=1000))
    parts = plan_batch(parse_options({"path": str(tagged), "topic": "orders", "subExpression": "Aa || D"}))
    assert sorted(_seqs(b for p in parts for b in read_range(p, include_body=False, check_crc=False))) == consumer


def test_spark_tag_filter_and_stream_default_latest(spark, tagged: Path, tmp_path: Path) -> None:
    df = (spark.read.format("rocketmq").option("nameServer", "localhost:9876").option("group", "g")
          .option("topic", "orders").option("subExpression", "Aa || C").load(str(tagged)))
    got = sorted(int(r.seq) for r in df.selectExpr("properties['seq'] AS seq").collect())
    assert got == _expected({"Aa", "C"}, "orders")
    assert np.all(np.isin([r.tags for r in df.select("tags").collect()], ["Aa", "C"]))
    with pytest.raises(Exception, match="did you mean 'subExpression'"):  # Spark wraps the mqstore error
        spark.read.format("rocketmq").option("subExpresion", "Aa").load(str(tagged)).collect()

    store = tmp_path / "broker-s"
    with MessageStore.open(store, small_config()) as s:
        for i in range(10):
            s.put("orders", b"old-%d" % i, tags="Aa", properties={"seq": str(i)})
        s.dispatch()

    def run() -> list[int]:
        seen: list[int] = []
        q = (spark.readStream.format("rocketmq").option("subscribe", "orders").option("subExpression", "Aa")
             .load(str(store)).selectExpr("CAST(properties['seq'] AS INT) AS seq")
             .writeStream.foreachBatch(lambda df, _bid: seen.extend(r.seq for r in df.collect()))
             .option("checkpointLocation", str(tmp_path / "ck")).trigger(availableNow=True).start())
        q.awaitTermination()
        assert q.exception() is None
        return sorted(seen)

    assert run() == []  # a new stream starts at the end of the store, as rocketmq-spark's does
    with MessageStore.open(store, small_config(2_000_000_000_000)) as s:
        for i in range(10, 16):
            s.put("orders", b"new-%d" % i, tags="Aa" if i % 2 else "BB", properties={"seq": str(i)})
        s.dispatch()
    assert run() == [11, 13, 15]


def test_tag_filter_on_a_dledger_store(tmp_path: Path) -> None:
    import sys

    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # tests/: the rocketmq test package
    from mqstore.formats.rocketmq.properties import parse_properties
    from rocketmq.dledger_support import build_dledger_store, make_records

    recs = make_records(60)
    build_dledger_store(tmp_path / "broker-d", recs)
    parts = plan_batch(parse_options({"path": str(tmp_path / "broker-d"), "subExpression": "Tag1 || Tag2"}))
    assert parts and all(p.dledger for p in parts)
    got = [r["tags"] for p in parts for b in read_range(p, include_body=False, check_crc=False)
           for r in b.select(["tags"]).to_pylist()]
    want = [parse_properties(r.properties_text).get("TAGS") for r in recs]
    assert got == [t for t in want if t in ("Tag1", "Tag2")] and got
