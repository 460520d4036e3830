"""The kafka-log data source through Spark (batch reads)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from kafka_log_support import CASES, as_manifest, collect, fixture_log_dir, manifest_rows, write_partition
from pyspark.errors import PySparkException

from mqstore.spark._kafka_read import KAFKA_ARROW_SCHEMA, KAFKA_ARROW_SCHEMA_WITH_HEADERS
from mqstore.spark.kafka_source import KAFKA_SCHEMA, KAFKA_SCHEMA_WITH_HEADERS


@pytest.fixture(scope="module")
def logdir(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, dict[str, list[dict]]]:
    root = tmp_path_factory.mktemp("klog-spark")
    exp = {
        "t-0": write_partition(root / "t-0", batches=40, topic="t", partition=0),
        "t-1": write_partition(root / "t-1", batches=9, per_batch=3, topic="t", partition=1, first_value=5000),
        "u-0": write_partition(root / "u-0", batches=5, txn=False, topic="u", partition=0),
    }
    return root, exp


def _all(exp: dict[str, list[dict]], *names: str) -> list[dict]:
    rows = [r for n in (names or sorted(exp)) for r in exp[n]]
    return sorted(rows, key=lambda x: (x["topic"], x["partition"], x["offset"]))


def _strip_headers(rows: list[dict]) -> list[dict]:
    return [{k: v for k, v in r.items() if k != "headers"} for r in rows]


def test_schema_is_sparks_kafka_schema(spark) -> None:
    from pyspark.sql.pandas.types import to_arrow_schema

    assert to_arrow_schema(KAFKA_SCHEMA, timezone="UTC").equals(KAFKA_ARROW_SCHEMA)
    assert to_arrow_schema(KAFKA_SCHEMA_WITH_HEADERS, timezone="UTC").equals(KAFKA_ARROW_SCHEMA_WITH_HEADERS)
    assert [f.name for f in KAFKA_SCHEMA.fields] == ["key", "value", "topic", "partition", "offset", "timestamp",
                                                      "timestampType"]
    assert KAFKA_SCHEMA_WITH_HEADERS.simpleString().endswith("headers:array<struct<key:string,value:binary>>>")


def test_fixtures_equal_their_manifests(spark, tmp_path: Path) -> None:
    d = fixture_log_dir(tmp_path)
    df = spark.read.format("kafka-log").option("includeHeaders", "true").load(str(d))
    assert df.schema == KAFKA_SCHEMA_WITH_HEADERS
    rows = collect(df)
    for case in CASES:
        got = [as_manifest(r) for r in rows if r["topic"] == case]
        assert {r["partition"] for r in rows if r["topic"] == case} == {0}
        assert got == manifest_rows(case), case


def test_headers_compression_transactions(spark, logdir) -> None:
    root, exp = logdir
    df = spark.read.format("kafka-log").option("includeHeaders", "true").load(str(root))
    assert collect(df) == _all(exp)
    plain = spark.read.format("kafka-log").load(str(root))
    assert plain.schema == KAFKA_SCHEMA
    assert collect(plain) == _strip_headers(_all(exp))


def test_min_partitions_gives_identical_rows(spark, logdir) -> None:
    root, exp = logdir
    df = (spark.read.format("kafka-log").option("includeHeaders", "true").option("minPartitions", "9")
          .option("maxRecordsPerBatch", "7").load(str(root)))
    assert df.rdd.getNumPartitions() >= 6
    assert collect(df) == _all(exp)


def test_paths_topic_selection(spark, logdir) -> None:
    root, exp = logdir
    df = spark.read.format("kafka-log").option("includeHeaders", "true").load([str(root / "u-0"), str(root / "t-1")])
    assert collect(df) == _all(exp, "t-1", "u-0")
    df = spark.read.format("kafka-log").option("includeHeaders", "true").option("subscribePattern", "t").load(str(root))
    assert collect(df) == _all(exp, "t-0", "t-1")
    df = spark.read.format("kafka-log").option("includeHeaders", "true").option("assign", '{"t":[1]}').load(str(root))
    assert collect(df) == _all(exp, "t-1")


def test_offset_and_timestamp_options(spark, logdir) -> None:
    root, exp = logdir
    rows = exp["t-0"]
    read = lambda **o: collect(spark.read.format("kafka-log").options(includeHeaders="true", subscribe="t",  # noqa: E731
                                                                       **o).load(str(root)))
    got = read(startingOffsets=json.dumps({"t": {"0": 40, "1": -2}}),
               endingOffsets=json.dumps({"t": {"0": 100, "1": 10}}))
    assert got == [r for r in rows if 40 <= r["offset"] < 100] + [r for r in exp["t-1"] if r["offset"] < 10]
    target = rows[150]["timestamp"]
    first = min(r["offset"] for r in rows if r["timestamp"] >= target)
    first1 = min(r["offset"] for r in exp["t-1"] if r["timestamp"] >= target)
    # startingTimestamp wins over startingOffsetsByTimestamp and startingOffsets (Spark's precedence)
    got = read(startingTimestamp=str(target), startingOffsetsByTimestamp=json.dumps({"t": {"0": 0, "1": 0}}),
               startingOffsets=json.dumps({"t": {"0": 3, "1": 3}}))
    assert got == [r for r in rows if r["offset"] >= first] + [r for r in exp["t-1"] if r["offset"] >= first1]
    # startingOffsetsByTimestamp wins over startingOffsets
    got = read(startingOffsetsByTimestamp=json.dumps({"t": {"0": target, "1": 0}}),
               startingOffsets=json.dumps({"t": {"0": 3, "1": 3}}))
    assert got == [r for r in rows if r["offset"] >= first] + exp["t-1"]
    # ending by timestamp: up to (excluding) the first record at or after it
    got = read(endingTimestamp=str(target), endingOffsets=json.dumps({"t": {"0": 5, "1": 5}}))
    assert got == [r for r in rows if r["offset"] < first] + [r for r in exp["t-1"] if r["offset"] < first1]


def _error_text(excinfo: pytest.ExceptionInfo[BaseException]) -> str:
    return str(excinfo.value)


@pytest.mark.parametrize(("opts", "message"), [
    ({"startingOffsets": "{oops"}, "option startingOffsets is not valid JSON"),
    ({"subscribe": "nope"}, "unknown topic(s) nope"),
    ({"assign": '{"t":[9]}'}, "unknown topic partition(s) t-9"),
    ({"subscribe": "u", "startingOffsets": '{"u":{"0":1000}}'}, "is beyond the log end offset 35"),
    ({"subscribe": "u", "endingOffsets": '{"u":{"0":1000}}'}, "is beyond the log end offset 35"),
    ({"subscribe": "u", "startingTimestamp": "9999999999999"}, "no record of u-0 has a timestamp"),
    ({"minPartitions": "-1"}, "minPartitions must be a positive integer"),
])
def test_errors_carry_the_mqstore_message(spark, logdir, opts: dict[str, str], message: str) -> None:
    root, _ = logdir
    with pytest.raises(PySparkException) as excinfo:  # Spark wraps the typed error in its own exception
        spark.read.format("kafka-log").options(**opts).load(str(root)).collect()
    assert message in _error_text(excinfo)


def test_out_of_range_clamped_without_fail_on_data_loss(spark, logdir) -> None:
    root, exp = logdir
    df = (spark.read.format("kafka-log").option("subscribe", "u").option("failOnDataLoss", "false")
          .option("startingOffsets", '{"u":{"0":30}}').option("endingOffsets", '{"u":{"0":1000}}')
          .option("includeHeaders", "true").load(str(root)))
    assert collect(df) == [r for r in exp["u-0"] if r["offset"] >= 30]


def test_read_never_writes(spark, logdir) -> None:
    root, _ = logdir
    before = {p: (p.stat().st_size, p.stat().st_mtime_ns) for p in root.rglob("*")}
    spark.read.format("kafka-log").option("minPartitions", "5").load(str(root)).count()
    assert {p: (p.stat().st_size, p.stat().st_mtime_ns) for p in root.rglob("*")} == before
