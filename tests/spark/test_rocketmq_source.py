"""The ``rocketmq`` Spark data source, batch reads: fixture stores made by the real broker classes,
several stores, partitioning, options, filter pushdown and option errors."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
from pyspark.errors import PySparkException
from rocketmq_spark_support import expected_rows, make_store, manifest, normalize

from mqstore.spark._rocketmq_store import list_segments

pytestmark = pytest.mark.spark


def rows_of(df) -> list[dict]:
    return sorted((normalize(r.asDict()) for r in df.collect()), key=lambda r: (r["brokerName"], r["commitLogOffset"]))


@pytest.fixture(scope="module")
def store(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return make_store(tmp_path_factory.mktemp("rmq-src") / "broker-a", 150)


def test_fixture_stores_equal_their_manifests(spark, shared_fixtures: Path) -> None:
    basic = shared_fixtures / "rocketmq" / "basic" / "store"
    prop = shared_fixtures / "rocketmq" / "prop_crc" / "store"
    df = spark.read.format("rocketmq").load(str(basic))
    assert df.schema.simpleString().startswith("struct<topic:string,flag:int,body:binary,properties:map<string,string>")
    assert df.rdd.getNumPartitions() == len(list_segments(str(basic)))  # one per CommitLog segment
    assert rows_of(df) == expected_rows(manifest(shared_fixtures, "basic"), "store")
    both = (spark.read.format("rocketmq").option("paths", f'["{basic}", "{prop}"]')
            .option("brokerNames", "broker-basic,broker-prop").option("checkCRC", "true").load())
    want = (expected_rows(manifest(shared_fixtures, "basic"), "broker-basic")
            + expected_rows(manifest(shared_fixtures, "prop_crc"), "broker-prop"))
    assert rows_of(both) == want
    counts = {r["brokerName"]: r["count"] for r in both.groupBy("brokerName").count().collect()}
    assert counts == {"broker-basic": 150, "broker-prop": 40}


def test_min_partitions_and_include_body(spark, store: Path) -> None:
    plain = spark.read.format("rocketmq").load(str(store))
    split = spark.read.format("rocketmq").option("minPartitions", 20).load(str(store))
    assert split.rdd.getNumPartitions() >= 20 > plain.rdd.getNumPartitions()
    rows = rows_of(plain)
    assert rows_of(split) == rows and len(rows) == 150
    nobody = rows_of(spark.read.format("rocketmq").option("includeBody", "false").load(str(store)))
    assert all(r["body"] is None for r in nobody)
    assert [dict(r, body=None) for r in rows] == nobody


def test_topic_offset_and_time_options(spark, store: Path) -> None:
    reader = spark.read.format("rocketmq")
    every = rows_of(reader.load(str(store)))
    got = rows_of(reader.option("topics", "orders,audit").load(str(store)))
    assert got == [r for r in every if r["topic"] in ("orders", "audit")]
    got = rows_of(spark.read.format("rocketmq").option("topics", "regex:pay.*").load(str(store)))
    assert got == [r for r in every if r["topic"] == "payments"]
    got = rows_of(spark.read.format("rocketmq").option("topics", "orders")
                  .option("startingOffsets", '{"orders": {"broker-a": {"0": 3, "1": -2}}}')
                  .option("endingOffsets", '{"orders": {"broker-a": {"0": 7, "1": 2}}}').load(str(store)))
    assert sorted((r["queueId"], r["queueOffset"]) for r in got) == [(0, q) for q in range(3, 7)] + [(1, 0), (1, 1)]
    assert all(r["topic"] == "orders" for r in got)
    ts = every[40]["storeTimestamp"]
    got = rows_of(spark.read.format("rocketmq").option("startingTimestamp", ts)
                  .option("endingTimestamp", ts + 50).load(str(store)))
    assert got == [r for r in every if ts <= r["storeTimestamp"] < ts + 50]


def test_filters_are_pushed_down_and_exact(spark, store: Path) -> None:
    df = spark.read.format("rocketmq").load(str(store))
    every = rows_of(df)
    ts = every[100]["storeTimestamp"]
    q = df.filter(f"topic IN ('orders', 'payments') AND storeTimestamp >= {ts} AND queueId = 1")
    plan = q._jdf.queryExecution().executedPlan().toString()
    # Spark keeps only null checks: the comparisons were taken over by the source
    spark_filters = [line for line in plan.splitlines() if "Filter (" in line]
    assert all(">=" not in f and " IN " not in f.upper() and "= 1" not in f for f in spark_filters), plan
    assert rows_of(q) == [r for r in every if r["topic"] in ("orders", "payments")
                          and r["storeTimestamp"] >= ts and r["queueId"] == 1]
    assert df.filter("brokerName = 'elsewhere'").count() == 0
    assert df.filter("topic = 'no-such-topic'").count() == 0  # a filter, unlike the topics option, may match nothing


def test_crc_check(spark, shared_fixtures: Path, tmp_path: Path) -> None:
    copy = tmp_path / "store"
    shutil.copytree(shared_fixtures / "rocketmq" / "prop_crc" / "store", copy)
    m = manifest(shared_fixtures, "prop_crc")
    victim = next(x for x in m["messages"] if len(x["bodyHex"]) > 8)
    seg = copy / "commitlog" / "00000000000000000000"
    seg.chmod(0o644)
    data = bytearray(seg.read_bytes())
    body = bytes.fromhex(victim["bodyHex"])
    at = bytes(data).index(body, victim["physicalOffset"])
    data[at] ^= 0xFF
    seg.write_bytes(bytes(data))
    df = spark.read.format("rocketmq").load(str(copy))
    assert df.count() == 40  # without checkCRC the damage goes unnoticed
    with pytest.raises(PySparkException, match=rf"CrcMismatchError: body CRC mismatch.*{seg}, offset {victim['physicalOffset']}"):
        spark.read.format("rocketmq").option("checkCRC", "true").load(str(copy)).collect()


@pytest.mark.parametrize(("options", "message"), [
    ({"startingOffsets": '{"orders": '}, "SourceOptionError: option startingOffsets is not valid JSON"),
    ({"topics": "orders,nope"}, "UnknownTopicError: option topics names unknown topic 'nope'"),
    ({"startingOffsets": '{"nope": {"broker-a": {"0": 1}}}'}, "UnknownTopicError: option startingOffsets names unknown topic"),
    ({"startingOffsets": '{"orders": {"broker-a": {"0": 999}}}'},
     r"OffsetOptionOutOfRangeError: option startingOffsets: offset 999 of orders/broker-a/0 is outside"),
    ({"includeBody": "sometimes"}, "option includeBody must be true or false"),
    ({"paths": "/no/such/store"}, "StoreNotFoundError: not a RocketMQ store"),
])
def test_option_errors_are_clear(spark, store: Path, options: dict[str, str], message: str) -> None:
    reader = spark.read.format("rocketmq")
    for k, v in options.items():
        reader = reader.option(k, v)
    with pytest.raises(PySparkException, match=message):
        (reader.load() if "paths" in options else reader.load(str(store))).collect()


def test_fail_on_data_loss_false_clamps(spark, store: Path) -> None:
    df = (spark.read.format("rocketmq").option("topics", "orders").option("failOnDataLoss", "false")
          .option("startingOffsets", '{"orders": {"broker-a": {"0": 999, "1": 24}}}').load(str(store)))
    assert [(r.queueId, r.queueOffset) for r in df.orderBy("commitLogOffset").collect()] == [(1, 24)]
