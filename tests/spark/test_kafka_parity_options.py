"""kafka-log parity with Spark's Kafka source (issue 14): option names Spark refuses, unknown
names, min/maxTriggerDelay admission, maxRecordsPerPartition splits, null headers."""

from __future__ import annotations

from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st
from kafka_log_support import T0, arrow_rows, collect, write_partition
from pyspark.sql.streaming.datasource import ReadAllAvailable, ReadMaxRows, ReadMinRows

from mqstore.errors import InvalidArgumentError
from mqstore.formats.kafka import SimpleRecord
from mqstore.kafka import LogConfig, PartitionLog
from mqstore.spark._kafka_options import DEFAULT_MAX_TRIGGER_DELAY_MS, parse_duration_ms, parse_options
from mqstore.spark._kafka_plan import OffsetRange, discover_partitions, plan_batch_ranges, split_ranges
from mqstore.spark._kafka_read import read_arrow, read_rows
from mqstore.spark._option_names import nearest


# ----------------------------------------------------------------------------- names (pure)
@pytest.mark.parametrize(("name", "suggestion"), [
    ("startingOffset", "startingOffsets"),
    ("maxRecordPerPartition", "maxRecordsPerPartition"),
    ("minOffsetPerTrigger", "minOffsetsPerTrigger"),
    ("includeHeader", "includeHeaders"),
    ("subscribePatern", "subscribePattern"),
])
def test_unknown_option_names_the_nearest_valid_one(name: str, suggestion: str) -> None:
    with pytest.raises(InvalidArgumentError) as exc:
        parse_options({"path": "/x", name: "1"}, streaming=True)
    msg = str(exc.value)
    assert "\n" not in msg and repr(name) in msg and f"did you mean {suggestion!r}" in msg


@pytest.mark.parametrize(("key", "fragment"), [
    ("kafka.auto.offset.reset", "startingOffsets"),
    ("kafka.key.deserializer", "keys are always binary"),
    ("kafka.value.deserializer", "values are always binary"),
    ("kafka.enable.auto.commit", "'enable.auto.commit' is not supported"),
    ("kafka.interceptor.classes", "'interceptor.classes' is not supported"),
    ("KAFKA.Auto.Offset.Reset", "startingOffsets"),
])
def test_options_spark_refuses_are_refused(key: str, fragment: str) -> None:
    for streaming in (False, True):
        with pytest.raises(InvalidArgumentError, match=fragment):
            parse_options({"path": "/x", key: "x"}, streaming=streaming)


def test_broker_only_options_are_accepted_and_ignored() -> None:
    o = parse_options({"path": "/x", "kafka.bootstrap.servers": "h:9092", "kafka.group.id": "g", "groupIdPrefix": "p",
                       "kafka.session.timeout.ms": "10", "kafka.security.protocol": "SSL",
                       "kafkaConsumer.pollTimeoutMs": "5", "fetchOffset.numRetries": "3",
                       "fetchOffset.retryIntervalMs": "10"}, streaming=True)
    assert o.paths == ("/x",)


def test_nearest_is_case_insensitive() -> None:
    assert nearest("STARTINGOFFSET", ["endingOffsets", "startingOffsets"]) == "startingOffsets"


# ----------------------------------------------------------------------------- trigger options (pure)
def test_min_offsets_and_max_trigger_delay_parse() -> None:
    o = parse_options({"path": "/x", "minOffsetsPerTrigger": "50", "maxOffsetsPerTrigger": "80"}, streaming=True)
    assert (o.min_offsets_per_trigger, o.max_offsets_per_trigger, o.max_trigger_delay_ms) == (50, 80,
                                                                                             DEFAULT_MAX_TRIGGER_DELAY_MS)
    assert DEFAULT_MAX_TRIGGER_DELAY_MS == 15 * 60_000
    o = parse_options({"path": "/x", "minOffsetsPerTrigger": "5", "maxTriggerDelay": "30s"}, streaming=True)
    assert o.max_trigger_delay_ms == 30_000
    # batch queries accept and ignore the trigger options, as Spark does
    b = parse_options({"path": "/x", "minOffsetsPerTrigger": "5", "maxTriggerDelay": "1m",
                       "maxOffsetsPerTrigger": "9"}, streaming=False)
    assert b.min_offsets_per_trigger is None and b.max_offsets_per_trigger is None


@pytest.mark.parametrize(("text", "ms"), [("15m", 900_000), ("30s", 30_000), ("500ms", 500), ("500", 500),
                                          ("2h", 7_200_000), ("1d", 86_400_000), ("3 min", 180_000),
                                          ("2000us", 2)])
def test_durations(text: str, ms: int) -> None:
    assert parse_duration_ms("maxTriggerDelay", text) == ms


@pytest.mark.parametrize(("opts", "fragment"), [
    ({"maxTriggerDelay": "soon"}, "must be a time"),
    ({"maxTriggerDelay": "5 weeks"}, "must be a time"),
    ({"minOffsetsPerTrigger": "0"}, "positive integer"),
    ({"minOffsetsPerTrigger": "100", "maxOffsetsPerTrigger": "10"}, "higher than maxOffsetsPerTrigger"),
    ({"maxRecordsPerPartition": "0"}, "positive integer"),
    ({"maxRecordsPerPartition": "many"}, "positive integer"),
])
def test_bad_trigger_and_split_options(opts: dict[str, str], fragment: str) -> None:
    with pytest.raises(InvalidArgumentError, match=fragment):
        parse_options({"path": "/x", **opts}, streaming=True)


# ----------------------------------------------------------------------------- maxRecordsPerPartition
def test_max_records_per_partition_cuts_exact_offsets() -> None:
    ranges = [OffsetRange("a", 0, "", 0, 100), OffsetRange("a", 1, "", 10, 15), OffsetRange("b", 0, "", 7, 7)]
    pieces = split_ranges(ranges, None, 30)
    assert [(p.topic, p.partition, p.start, p.end) for p in pieces] == [
        ("a", 0, 0, 25), ("a", 0, 25, 50), ("a", 0, 50, 75), ("a", 0, 75, 100), ("a", 1, 10, 15)]
    assert [p.size for p in split_ranges([OffsetRange("a", 0, "", 0, 101)], None, 25)] == [20, 20, 20, 20, 21]
    assert split_ranges([OffsetRange("a", 0, "", 0, 30)], None, 30) == [OffsetRange("a", 0, "", 0, 30)]


@given(st.lists(st.tuples(st.integers(0, 10**6), st.integers(0, 5000)), min_size=1, max_size=6),
       st.integers(1, 2000))
def test_max_records_pieces_cover_each_range_exactly(spans: list[tuple[int, int]], max_records: int) -> None:
    ranges = [OffsetRange("t", i, "", s, s + n) for i, (s, n) in enumerate(spans)]
    pieces = split_ranges(ranges, None, max_records)
    assert all(0 < p.size <= max_records for p in pieces)
    for r in ranges:
        own = [p for p in pieces if p.partition == r.partition]
        assert len(own) == -(-r.size // max_records)
        if own:
            assert own[0].start == r.start and own[-1].end == r.end
            assert [p.start for p in own[1:]] == [p.end for p in own[:-1]]
            assert max(p.size for p in own) - min(p.size for p in own) <= 1  # nearly equal


@pytest.fixture(scope="module")
def logdir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("klog-parity")
    write_partition(root / "t-0", batches=40, topic="t", partition=0)
    write_partition(root / "t-1", batches=9, per_batch=3, topic="t", partition=1, first_value=5000)
    return root


def test_max_records_per_partition_with_min_partitions_reads_every_row_once(logdir: Path) -> None:
    o = parse_options({"path": str(logdir), "includeHeaders": "true"}, streaming=False)
    ranges = plan_batch_ranges(o, discover_partitions(o))
    whole = [r for rng in ranges for r in arrow_rows(read_arrow(rng, include_headers=True))]
    sizes = {(r.topic, r.partition): r.size for r in ranges}
    firsts = {(r.topic, r.partition): r.start for r in ranges}
    for max_records, min_parts in ((50, None), (50, 40), (7, None), (1000, 12), (100, 3)):
        pieces = split_ranges(ranges, min_parts, max_records)
        assert all(p.size <= max_records for p in pieces)
        by_records = sum(-(-s // max_records) for s in sizes.values())
        assert len(pieces) >= max(by_records, min(min_parts or 0, sum(sizes.values())) // 2)
        for tp in sizes:  # contiguous pieces covering each partition's range
            own = [p for p in pieces if (p.topic, p.partition) == tp]
            assert own[0].start == firsts[tp] and own[-1].end == firsts[tp] + sizes[tp]
            assert [p.start for p in own[1:]] == [p.end for p in own[:-1]]
        got = [r for p in pieces for r in arrow_rows(read_arrow(p, include_headers=True))]
        assert got == whole


def test_spark_max_records_per_partition_and_null_headers(spark, logdir: Path) -> None:
    plain = spark.read.format("kafka-log").option("includeHeaders", "true").load(str(logdir))
    split = (spark.read.format("kafka-log").option("includeHeaders", "true")
             .option("maxRecordsPerPartition", "40").load(str(logdir)))
    o = parse_options({"path": str(logdir)}, streaming=False)
    sizes = [r.size for r in plan_batch_ranges(o, discover_partitions(o))]
    assert split.rdd.getNumPartitions() == sum(-(-s // 40) for s in sizes)
    rows = collect(split)
    assert rows == collect(plain)
    assert any(r["headers"] is None for r in rows)  # records without headers: null, as Spark gives
    assert all(r["headers"] is None or len(r["headers"]) > 0 for r in rows)
    assert split.where("headers IS NULL").count() == sum(1 for r in rows if r["headers"] is None)


def test_reference_reader_gives_null_headers_too(logdir: Path) -> None:
    o = parse_options({"path": str(logdir / "t-0")}, streaming=False)
    (rng,) = plan_batch_ranges(o, discover_partitions(o))
    ref = [row[-1] for row in read_rows(rng, include_headers=True)]
    fast = [r["headers"] for r in arrow_rows(read_arrow(rng, include_headers=True))]
    generic = [r["headers"] for r in arrow_rows(read_arrow(rng, include_headers=True, fast=False))]
    assert ref == fast == generic and None in ref


# ----------------------------------------------------------------------------- minOffsetsPerTrigger
class Clock:
    def __init__(self) -> None:
        self.now = 1_000_000.0

    def __call__(self) -> float:
        return self.now


def _append(path: Path, n: int, first: int) -> None:
    with PartitionLog.open(path, LogConfig(segment_bytes=16 * 1024)) as log:
        for k in range(n):
            log.append_records([SimpleRecord(b"v-%d" % (first + k))], timestamp=T0 + first + k)


def test_min_offsets_delay_batches_until_enough_or_max_trigger_delay(tmp_path: Path) -> None:
    from mqstore.spark.kafka_source import KafkaLogStreamReader

    part = tmp_path / "m-0"
    _append(part, 3, 0)
    o = parse_options({"path": str(tmp_path), "startingOffsets": "earliest", "minOffsetsPerTrigger": "10",
                       "maxOffsetsPerTrigger": "25", "maxTriggerDelay": "1m"}, streaming=True)
    reader = KafkaLogStreamReader(o)
    clock = reader.clock = Clock()
    limit = reader.getDefaultReadLimit()
    assert limit == ReadMinRows(10)
    start = reader.initialOffset()
    assert start == {"m": {"0": 0}}
    # the first batch of a reader always goes (Spark: no trigger yet, so the delay has passed)
    first = reader.latestOffset(start, limit)
    assert first == {"m": {"0": 3}}
    _append(part, 4, 3)
    clock.now += 5
    assert reader.latestOffset(first, limit) == first  # 4 < 10 new offsets, 5 s < 1 min: held back
    _append(part, 6, 7)
    clock.now += 5
    second = reader.latestOffset(first, limit)  # 10 available: admitted (the timer restarts)
    assert second == {"m": {"0": 13}}
    _append(part, 2, 13)
    clock.now += 59
    assert reader.latestOffset(second, limit) == second  # 59 s since the last batch
    clock.now += 1
    third = reader.latestOffset(second, limit)  # maxTriggerDelay passed: whatever is there goes
    assert third == {"m": {"0": 15}}
    _append(part, 60, 15)
    clock.now += 1
    assert reader.latestOffset(third, limit) == {"m": {"0": 40}}  # enough; maxOffsetsPerTrigger caps it
    # Trigger.Once hands ReadAllAvailable: never held back, no cap
    _append(part, 1, 75)
    assert reader.latestOffset({"m": {"0": 74}}, ReadAllAvailable()) == {"m": {"0": 76}}
    # a ReadMaxRows limit (not the default) keeps the minimum from the options as well
    clock.now += 1
    assert reader.latestOffset({"m": {"0": 70}}, ReadMaxRows(3)) == {"m": {"0": 70}}


def test_spark_stream_with_min_offsets_available_now(spark, tmp_path: Path) -> None:
    root = tmp_path / "logs"
    _append(root / "s-0", 30, 0)
    ck = tmp_path / "ck"

    def run() -> list[int]:
        q = (spark.readStream.format("kafka-log").option("startingOffsets", "earliest")
             .option("minOffsetsPerTrigger", "8").option("maxOffsetsPerTrigger", "12").load(str(root))
             .writeStream.format("noop").option("checkpointLocation", str(ck))
             .trigger(availableNow=True).start())
        q.awaitTermination()
        assert q.exception() is None
        return [int(p["numInputRows"]) for p in q.recentProgress if int(p["numInputRows"])]

    # first batch always goes; later ones need >= 8 new offsets; the 6-offset tail waits for the
    # next run (or maxTriggerDelay), as Spark's Kafka source does with availableNow
    assert run() == [12, 12]
    assert run() == [6]


def test_spark_refuses_a_custom_schema_as_spark_does(spark, logdir: Path) -> None:
    with pytest.raises(Exception, match="fixed schema"):
        spark.read.format("kafka-log").schema("value BINARY").load(str(logdir)).collect()
    with pytest.raises(Exception, match="fixed schema"):
        spark.read.format("rocketmq").schema("topic STRING").load(str(logdir)).collect()
    same = spark.read.format("kafka-log").schema("key BINARY, value BINARY, topic STRING, partition INT, "
                                                 "offset BIGINT, timestamp TIMESTAMP, timestampType INT")
    assert same.load(str(logdir)).count() == spark.read.format("kafka-log").load(str(logdir)).count()
