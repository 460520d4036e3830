"""The ``rocketmq`` Spark source on a store whose ConsumeQueue is in RocksDB (storeType=defaultRocksDB):
queue offsets, timestamps and topics are planned through the RocksDB reader, the rows equal those
of the same store with a file ConsumeQueue, and nothing in the store changes."""

from __future__ import annotations

import shutil
import sys
from pathlib import Path

import pytest
from pyspark.errors import PySparkException
from rocketmq_spark_support import make_store, normalize

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from mqstore.spark._rocketmq_store import StoreView
from rocketmq.rocksdb_support import tree_digest, write_rocksdb_consumequeue

pytestmark = pytest.mark.spark


def rows_of(df) -> list[dict]:
    return sorted((normalize(r.asDict()) for r in df.collect()), key=lambda r: r["commitLogOffset"])


def test_source_reads_a_rocksdb_consumequeue_store(spark, tmp_path: Path) -> None:
    files = make_store(tmp_path / "files" / "broker-a", 150)
    rocks = tmp_path / "rocks" / "broker-a"
    shutil.copytree(files, rocks)
    write_rocksdb_consumequeue(rocks)
    before = tree_digest(rocks)
    with StoreView(str(files), "broker-a") as a, StoreView(str(rocks), "broker-a") as b:
        assert a.queue_ranges() == b.queue_ranges() and b.rocksdb is not None
    every = rows_of(spark.read.format("rocketmq").load(str(files)))
    ts = every[40]["storeTimestamp"]
    cases = [
        {"topics": "orders,audit"},
        {"topics": "orders", "startingOffsets": '{"orders": {"broker-a": {"0": 3, "1": -2}}}',
         "endingOffsets": '{"orders": {"broker-a": {"0": 7, "1": 2}}}'},
        {"startingTimestamp": str(ts), "endingTimestamp": str(ts + 50)},
        {},
    ]
    for options in cases:
        got = {}
        for root in (files, rocks):
            reader = spark.read.format("rocketmq")
            for k, v in options.items():
                reader = reader.option(k, v)
            got[root] = rows_of(reader.load(str(root)))
        assert got[files] == got[rocks] and got[rocks], options
    # the storeType option overrides the detection (files: this store has none), a bad one is clear
    with pytest.raises(PySparkException, match="UnknownTopicError"):
        spark.read.format("rocketmq").option("storeType", "default").option("topics", "orders").load(str(rocks)).collect()
    got = rows_of(spark.read.format("rocketmq").option("storeType", "defaultRocksDB").option("topics", "orders")
                  .load(str(rocks)))
    assert got and got == [r for r in every if r["topic"] == "orders"]
    with pytest.raises(PySparkException, match="option storeType must be one of"):
        spark.read.format("rocketmq").option("storeType", "rocks").load(str(rocks)).collect()
    assert tree_digest(rocks) == before


def test_spark_rebuild_and_dispatch_refuse_a_rocksdb_store(spark, tmp_path: Path) -> None:
    from mqstore.errors import RocksDBError
    from mqstore.spark.dispatch import store_config_for
    from mqstore.spark.rebuild import rebuild_rocketmq

    rocks = make_store(tmp_path / "broker-a", 30)
    write_rocksdb_consumequeue(rocks)
    before = tree_digest(rocks)
    with pytest.raises(RocksDBError, match="rebuild-index --to file-cq"):
        rebuild_rocketmq(spark, rocks, rocks)
    with pytest.raises(RocksDBError, match="file ConsumeQueues only"):
        store_config_for(rocks)
    assert tree_digest(rocks) == before
