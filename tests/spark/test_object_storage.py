"""The rocketmq and kafka-log sources and export over object storage: stores and log directories
uploaded to a real S3-compatible server on 127.0.0.1 (moto's, tests/s3_server.py) read through
``s3://`` URLs give exactly the rows of the local read, in batch and in availableNow streams;
export writes Parquet to ``s3://`` that reads back equal; a missing bucket or prefix and bad
credentials fail with one typed error line, never an empty DataFrame."""

from __future__ import annotations

from pathlib import Path

import pytest
from kafka_log_support import fixture_log_dir
from pyspark.errors import PySparkException
from rocketmq_spark_support import make_store

from mqstore.spark.export import export_kafka, export_rocketmq
from s3_server import S3

pytestmark = pytest.mark.spark
FIXTURES = Path(__file__).resolve().parents[1] / "fixtures"


@pytest.fixture(scope="module")
def data(s3: S3, tmp_path_factory: pytest.TempPathFactory) -> dict[str, tuple[str, str]]:
    tmp = tmp_path_factory.mktemp("objstore")
    local = {
        "basic": FIXTURES / "rocketmq" / "basic" / "store",
        "gen": make_store(tmp / "gen", 80, body_size=200),
        "kafka": fixture_log_dir(tmp),
    }
    return {k: (str(v), s3.upload(v, f"s3://spark/{k}")) for k, v in local.items()}


def _sorted(df, order: list[str]) -> list:
    return [tuple(r) for r in df.orderBy(*order).collect()]


def test_rocketmq_batch_from_s3_equals_local(spark, s3: S3, data) -> None:
    for name in ("basic", "gen"):
        local, url = data[name]
        a = spark.read.format("rocketmq").option("brokerNames", "b").load(local)
        b = spark.read.format("rocketmq").options(**s3.options()).option("brokerNames", "b").load(url)
        expected = _sorted(a, ["commitLogOffset"])
        assert len(expected) >= 80
        assert _sorted(b, ["commitLogOffset"]) == expected
    # filters and minPartitions go through the same ranged reads
    local, url = data["gen"]
    q = "topic = 'orders' AND queueId = 1"
    a = spark.read.format("rocketmq").option("minPartitions", "6").load(local).where(q)
    b = spark.read.format("rocketmq").options(**s3.options()).option("minPartitions", "6").load(url).where(q)
    assert _sorted(b, ["commitLogOffset"]) == _sorted(a, ["commitLogOffset"]) != []


def test_kafka_batch_from_s3_equals_local(spark, s3: S3, data) -> None:
    local, url = data["kafka"]
    a = spark.read.format("kafka-log").option("includeHeaders", "true").load(local)
    b = spark.read.format("kafka-log").options(**s3.options()).option("includeHeaders", "true").load(url)
    order = ["topic", "partition", "offset"]
    expected = _sorted(a, order)
    assert len(expected) > 1000
    assert _sorted(b, order) == expected
    c = spark.read.format("kafka-log").options(**s3.options()).option("minPartitions", "8") \
        .option("subscribe", "multi_segment_roll_bytes").option("includeHeaders", "true").load(url)
    assert _sorted(c, order) == [r for r in expected if r[2] == "multi_segment_roll_bytes"]


def _stream(spark, fmt: str, path: str, opts: dict[str, str], ckpt: Path, sink: Path) -> None:
    q = (spark.readStream.format(fmt).options(**opts).load(path).writeStream.format("parquet")
         .option("checkpointLocation", str(ckpt)).option("path", str(sink)).trigger(availableNow=True).start())
    q.awaitTermination()
    assert q.exception() is None


def test_available_now_streams_from_s3(spark, s3: S3, data, tmp_path: Path) -> None:
    local, url = data["gen"]
    _stream(spark, "rocketmq", url, {**s3.options(), "maxOffsetsPerTrigger": "40", "startingOffsets": "earliest"},
            tmp_path / "c1", tmp_path / "s1")
    got = spark.read.parquet(str(tmp_path / "s1")).select("commitLogOffset", "topic", "body")
    want = spark.read.format("rocketmq").load(local).select("commitLogOffset", "topic", "body")
    assert _sorted(got, ["commitLogOffset"]) == _sorted(want, ["commitLogOffset"])
    local, url = data["kafka"]
    # one partition of ~730 KiB in three triggers (every trigger is a Spark micro-batch)
    opts = {"subscribe": "multi_segment_roll_bytes", "startingOffsets": "earliest"}
    _stream(spark, "kafka-log", url, {**s3.options(), **opts, "maxBytesPerTrigger": "300000"}, tmp_path / "c2",
            tmp_path / "s2")
    got = spark.read.parquet(str(tmp_path / "s2")).select("topic", "partition", "offset", "value")
    want = spark.read.format("kafka-log").option("subscribe", "multi_segment_roll_bytes").load(local) \
        .select("topic", "partition", "offset", "value")
    assert _sorted(got, ["topic", "partition", "offset"]) == _sorted(want, ["topic", "partition", "offset"])
    assert len(list((tmp_path / "c2" / "commits").iterdir())) >= 3


def test_export_to_s3_reads_back(spark, s3: S3, data, tmp_path: Path) -> None:
    import pyarrow.dataset as ds

    fs = s3.filesystem()
    local, url = data["basic"]
    res = export_rocketmq(spark, url, "s3://spark/out/rmq", **s3.options())
    back = ds.dataset("spark/out/rmq", filesystem=fs, format="parquet", partitioning="hive").to_table()
    want = spark.read.format("rocketmq").load(local)
    assert res.rows == back.num_rows == want.count() > 0
    assert res.partitions == want.select("topic", "queueId").distinct().count()
    assert sorted(back.column("commitLogOffset").to_pylist()) == \
        sorted(r[0] for r in want.select("commitLogOffset").collect())
    assert sorted(zip(back.column("commitLogOffset").to_pylist(), back.column("body").to_pylist(), strict=True)) == \
        sorted((r[0], bytes(r[1])) for r in want.select("commitLogOffset", "body").collect())
    with pytest.raises(Exception, match="exists and is not empty"):
        export_rocketmq(spark, url, "s3://spark/out/rmq", **s3.options())
    again = export_rocketmq(spark, local, "s3://spark/out/rmq", mode="overwrite", **s3.options())
    assert again.rows == res.rows and again.files >= 1
    klocal, kurl = data["kafka"]
    kres = export_kafka(spark, kurl, "s3://spark/out/kafka", **s3.options())
    kback = ds.dataset("spark/out/kafka", filesystem=fs, format="parquet", partitioning="hive").to_table()
    assert kres.rows == kback.num_rows == spark.read.format("kafka-log").load(klocal).count()


def _error_line(excinfo: pytest.ExceptionInfo) -> str:
    return str(excinfo.value)


def test_errors_are_one_typed_line(spark, s3: S3, data) -> None:
    _local, url = data["basic"]
    bad = {**s3.options(), "fs.s3.secretKey": "wrong"}
    cases = [
        ("rocketmq", url, bad, "ObjectStoreError", "refused access"),
        ("kafka-log", data["kafka"][1], bad, "ObjectStoreError", "refused access"),
        ("rocketmq", "s3://no-such-bucket/store", s3.options(), "StoreNotFoundError", "bucket 'no-such-bucket'"),
        ("kafka-log", "s3://no-such-bucket/logs", s3.options(), "StoreNotFoundError", "bucket 'no-such-bucket'"),
        ("rocketmq", "s3://spark/nothing-here", s3.options(), "StoreNotFoundError", "no commitlog directory"),
        ("kafka-log", "s3://spark/nothing-here", s3.options(), "StoreNotFoundError", "kafka-log path not found"),
    ]
    for fmt, path, opts, kind, text in cases:
        with pytest.raises(PySparkException) as excinfo:
            spark.read.format(fmt).options(**opts).load(path).collect()
        msg = _error_line(excinfo)
        assert kind in msg and text in msg, (fmt, path, msg[:2000])
