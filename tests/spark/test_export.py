"""export_rocketmq / export_kafka: Parquet partitioned by topic/queue whose rows equal the source's."""

from __future__ import annotations

from pathlib import Path

import pytest
from kafka_log_support import fixture_log_dir

from mqstore.errors import InvalidArgumentError, StoreNotFoundError
from mqstore.spark.export import export_kafka, export_rocketmq
from mqstore.spark.kafka_source import KAFKA_SCHEMA_WITH_HEADERS
from mqstore.spark.rocketmq_source import ROCKETMQ_SCHEMA


def rows(df, order: list[str]) -> list:  # df: a pyspark DataFrame
    cols = list(df.columns)
    return [tuple(r[c] for c in cols) for r in df.select(*cols).orderBy(*order).collect()]


def test_export_rocketmq_fixtures_roundtrip(spark, shared_fixtures: Path, tmp_path: Path) -> None:
    stores = [shared_fixtures / "rocketmq" / c / "store" for c in ("basic", "prop_crc")]
    out = tmp_path / "rmq"
    res = export_rocketmq(spark, stores, out, brokerNames="basic,prop_crc")
    source = spark.read.format("rocketmq").option("paths", f'["{stores[0]}", "{stores[1]}"]') \
        .option("brokerNames", "basic,prop_crc").load()
    back = spark.read.schema(ROCKETMQ_SCHEMA).parquet(str(out))
    assert sorted(back.columns) == sorted(source.columns)  # the partition columns come last
    back = back.select(*source.columns)
    order = ["brokerName", "commitLogOffset"]
    expected = rows(source, order)
    assert res.rows == len(expected) > 0
    assert rows(back, order) == expected
    # partitioned by topic/queueId: one directory per (topic, queue)
    dirs = {(p.parent.name, p.name) for p in out.glob("topic=*/queueId=*")}
    assert len(dirs) == res.partitions == len({(r[0], r[5]) for r in expected})
    # options pass through to the source
    only = export_rocketmq(spark, stores[0], tmp_path / "orders", topics="orders", includeBody=False)
    got = spark.read.schema(ROCKETMQ_SCHEMA).parquet(str(tmp_path / "orders"))
    assert only.rows == got.count() > 0
    assert {r.topic for r in got.select("topic").distinct().collect()} == {"orders"}
    assert all(r.body is None for r in got.select("body").collect())


def test_export_kafka_fixtures_roundtrip(spark, tmp_path: Path) -> None:
    logs = fixture_log_dir(tmp_path)
    out = tmp_path / "kafka"
    res = export_kafka(spark, logs, out, includeHeaders=True)
    source = spark.read.format("kafka-log").option("includeHeaders", "true").load(str(logs))
    back = spark.read.schema(KAFKA_SCHEMA_WITH_HEADERS).parquet(str(out)).select(*source.columns)
    order = ["topic", "partition", "offset"]
    expected = rows(source, order)
    assert res.rows == len(expected) > 0
    assert rows(back, order) == expected
    assert len(list(out.glob("topic=*/partition=*"))) == res.partitions > 1


def test_export_errors(spark, tmp_path: Path, shared_fixtures: Path) -> None:
    store = shared_fixtures / "rocketmq" / "basic" / "store"
    with pytest.raises(StoreNotFoundError):
        export_rocketmq(spark, tmp_path / "missing", tmp_path / "o1")
    with pytest.raises(StoreNotFoundError):
        export_kafka(spark, tmp_path / "missing", tmp_path / "o2")
    with pytest.raises(InvalidArgumentError):
        export_rocketmq(spark, store, tmp_path / "o3", mode="sideways")
    (tmp_path / "full").mkdir()
    (tmp_path / "full" / "x").write_text("x")
    with pytest.raises(InvalidArgumentError, match="not empty"):
        export_rocketmq(spark, store, tmp_path / "full")
    res = export_rocketmq(spark, store, tmp_path / "full", mode="overwrite")
    assert res.rows > 0 and not (tmp_path / "full" / "x").exists()
