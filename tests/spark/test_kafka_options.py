"""kafka-log option parsing, planning and the Arrow reader, without Spark."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from kafka_log_support import (
    CASES,
    T0,
    arrow_rows,
    fixture_log_dir,
    manifest_rows,
    write_partition,
)
from pyspark.sql.streaming.datasource import ReadAllAvailable

from mqstore.errors import (
    DataLossError,
    InvalidArgumentError,
    OffsetOutOfRangeError,
    StoreNotFoundError,
    UnknownTopicPartitionError,
)
from mqstore.spark._kafka_options import OffsetSpec, parse_options
from mqstore.spark._kafka_plan import (
    OffsetRange,
    discover_partitions,
    plan_batch_ranges,
    rate_limit_bytes,
    rate_limit_offsets,
    resolve_bound,
    split_ranges,
)
from mqstore.spark._kafka_read import (
    KAFKA_ARROW_SCHEMA,
    KAFKA_ARROW_SCHEMA_WITH_HEADERS,
    read_arrow,
    read_rows,
)


def _rows_ref(rng: OffsetRange, headers: bool = True) -> list[dict]:
    names = (KAFKA_ARROW_SCHEMA_WITH_HEADERS if headers else KAFKA_ARROW_SCHEMA).names
    out = []
    for row in read_rows(rng, include_headers=headers):
        d = dict(zip(names, row, strict=True))
        d["timestamp"] = int(d["timestamp"].timestamp() * 1000)
        out.append(d)
    return out


@pytest.fixture(scope="module")
def logdir(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, dict[str, list[dict]]]:
    root = tmp_path_factory.mktemp("klog")
    exp = {
        "t-0": write_partition(root / "t-0", batches=40, topic="t", partition=0),
        "t-1": write_partition(root / "t-1", batches=9, per_batch=3, topic="t", partition=1, first_value=5000),
        "u-0": write_partition(root / "u-0", batches=5, txn=False, topic="u", partition=0),
    }
    return root, exp


# ----------------------------------------------------------------------------- option parsing
def test_defaults_batch_and_stream() -> None:
    b = parse_options({"path": "/x"}, streaming=False)
    assert (b.starting.kind, b.ending.kind, b.fail_on_data_loss, b.include_headers) == ("earliest", "latest", True, False)
    s = parse_options({"path": "/x"}, streaming=True)
    assert s.starting.kind == "latest"


def test_keys_are_case_insensitive_and_paths_list() -> None:
    o = parse_options({"PATHS": json.dumps(["/a", "/b"]), "IncludeHeaders": "TRUE", "minpartitions": "4"},
                      streaming=False)
    assert o.paths == ("/a", "/b") and o.include_headers and o.min_partitions == 4


@pytest.mark.parametrize(("opts", "fragment"), [
    ({}, "needs a path"),
    ({"path": "/x", "subscribe": "a", "assign": '{"a":[0]}'}, "only one of"),
    ({"path": "/x", "subscribe": " , "}, "no topics"),
    ({"path": "/x", "subscribePattern": "a("}, "not a valid regex"),
    ({"path": "/x", "assign": "{bad"}, "not valid JSON"),
    ({"path": "/x", "assign": '{"a": 0}'}, "list of partition"),
    ({"path": "/x", "startingOffsets": "{not json"}, "not valid JSON"),
    ({"path": "/x", "startingOffsets": "latest"}, "latest is not allowed"),
    ({"path": "/x", "startingOffsets": '{"a":{"0":-1}}'}, "latest (−1) is not allowed"),
    ({"path": "/x", "endingOffsets": "earliest"}, "earliest is not allowed"),
    ({"path": "/x", "endingOffsets": '{"a":{"0":-2}}'}, "earliest (−2) is not allowed"),
    ({"path": "/x", "startingOffsets": '{"a":{"x":1}}'}, "not an integer"),
    ({"path": "/x", "startingOffsets": '{"a":{"0":-7}}'}, "is invalid"),
    ({"path": "/x", "startingOffsets": "middle"}, "earliest, latest or a JSON"),
    ({"path": "/x", "startingTimestamp": "soon"}, "single long"),
    ({"path": "/x", "startingOffsetsByTimestamp": '{"a":{"0":-5}}'}, "must be ≥ 0"),
    ({"path": "/x", "failOnDataLoss": "maybe"}, "true or false"),
    ({"path": "/x", "minPartitions": "0"}, "positive integer"),
    ({"path": "/x", "maxRecordsPerBatch": "lots"}, "positive integer"),
    ({"path": "/x", "startingOffsetsByTimestampStrategy": "oldest"}, "error or latest"),
    ({"path": "/x", "kafka.isolation.level": "serializable"}, "read_uncommitted or read_committed"),
    ({"path": "/x", "startingOffset": "earliest"}, "unknown option"),
])
def test_bad_options_raise_typed_errors(opts: dict[str, str], fragment: str) -> None:
    with pytest.raises(InvalidArgumentError, match=fragment.replace("(", r"\(").replace(")", r"\)")):
        parse_options(opts, streaming=False)


def test_stream_rejects_ending_options() -> None:
    with pytest.raises(InvalidArgumentError, match="only valid in batch"):
        parse_options({"path": "/x", "endingOffsets": "latest"}, streaming=True)
    assert parse_options({"path": "/x", "startingOffsets": '{"a":{"0":-1}}'}, streaming=True).starting.kind == "offsets"


def test_precedence_follows_spark() -> None:
    base = {"path": "/x", "startingOffsets": '{"a":{"0":3}}', "startingOffsetsByTimestamp": '{"a":{"0":5}}',
            "startingTimestamp": "9", "endingOffsets": '{"a":{"0":30}}',
            "endingOffsetsByTimestamp": '{"a":{"0":50}}', "endingTimestamp": "90"}
    o = parse_options(base, streaming=False)
    assert (o.starting.kind, o.starting.timestamp) == ("timestamp", 9)
    assert (o.ending.kind, o.ending.timestamp) == ("timestamp", 90)
    del base["startingTimestamp"], base["endingTimestamp"]
    o = parse_options(base, streaming=False)
    assert o.starting == OffsetSpec("timestamps", {("a", 0): 5}, source="startingOffsetsByTimestamp")
    assert o.ending.per_partition == {("a", 0): 50} and o.ending.kind == "timestamps"
    del base["startingOffsetsByTimestamp"], base["endingOffsetsByTimestamp"]
    o = parse_options(base, streaming=False)
    assert (o.starting.kind, o.starting.per_partition, o.ending.per_partition) == ("offsets", {("a", 0): 3},
                                                                                   {("a", 0): 30})


def test_broker_only_options_are_ignored() -> None:
    o = parse_options({"path": "/x", "kafka.bootstrap.servers": "h:9092", "maxOffsetsPerTrigger": "5"},
                      streaming=False)
    assert o.max_offsets_per_trigger is None


# ----------------------------------------------------------------------------- discovery / offsets
def test_discovery_and_topic_selection(logdir: tuple[Path, dict]) -> None:
    root, _ = logdir
    tps = [i.tp for i in discover_partitions(parse_options({"path": str(root)}, streaming=False))]
    assert tps == [("t", 0), ("t", 1), ("u", 0)]
    sel = lambda **kw: [i.tp for i in discover_partitions(parse_options({"path": str(root), **kw},  # noqa: E731
                                                                        streaming=False))]
    assert sel(subscribe="u") == [("u", 0)]
    assert sel(subscribePattern="t") == [("t", 0), ("t", 1)]
    assert sel(subscribePattern=".") == [("t", 0), ("t", 1), ("u", 0)]
    assert sel(assign='{"t":[1]}') == [("t", 1)]
    assert sel(path=str(root / "t-1")) == [("t", 1)]
    with pytest.raises(UnknownTopicPartitionError, match="unknown topic"):
        sel(subscribe="t,nope")
    with pytest.raises(UnknownTopicPartitionError, match="t-7"):
        sel(assign='{"t":[7]}')
    with pytest.raises(UnknownTopicPartitionError, match="no partition matches"):
        sel(subscribePattern="zz.*")
    with pytest.raises(StoreNotFoundError):
        sel(path=str(root / "missing"))


def test_offsets_resolution_and_data_loss(logdir: tuple[Path, dict]) -> None:
    root, _ = logdir
    infos = discover_partitions(parse_options({"path": str(root), "subscribe": "u"}, streaming=False))
    (info,) = infos
    assert (info.log_start, info.log_end) == (0, 35)

    def spec(v: dict, **kw: object) -> dict:
        o = parse_options({"path": str(root), "subscribe": "u", "startingOffsets": json.dumps({"u": v}), **kw},
                          streaming=False)
        return resolve_bound(o.starting, infos, start=True, fail_on_data_loss=o.fail_on_data_loss)

    assert spec({"0": -2}) == {("u", 0): 0}
    assert spec({"0": 12}) == {("u", 0): 12}
    with pytest.raises(OffsetOutOfRangeError, match="beyond the log end offset 35"):
        spec({"0": 99})
    assert spec({"0": 99}, failOnDataLoss="false") == {("u", 0): 35}
    with pytest.raises(UnknownTopicPartitionError):
        spec({"0": 1, "3": 1})
    o = parse_options({"path": str(root), "startingOffsets": '{"u":{"0":1}}'}, streaming=False)
    with pytest.raises(InvalidArgumentError, match="must give every selected partition"):
        plan_batch_ranges(o, discover_partitions(o))
    o = parse_options({"path": str(root), "subscribe": "u", "startingOffsets": '{"u":{"0":20}}',
                       "endingOffsets": '{"u":{"0":10}}'}, streaming=False)
    with pytest.raises(InvalidArgumentError, match="after its ending offset"):
        plan_batch_ranges(o, infos)


def test_data_loss_below_log_start(tmp_path: Path) -> None:
    from mqstore.kafka import LogConfig, PartitionLog

    exp = write_partition(tmp_path / "d-0", batches=12, txn=False, segment_bytes=2048, topic="d")
    with PartitionLog.open(tmp_path / "d-0", LogConfig(segment_bytes=2048, retention_bytes=4000)) as log:
        assert log.delete_old_segments() > 0
        start = log.log_start_offset
    o = parse_options({"path": str(tmp_path), "startingOffsets": '{"d":{"0":0}}'}, streaming=False)
    with pytest.raises(DataLossError, match="below the log start offset"):
        plan_batch_ranges(o, discover_partitions(o))
    o = parse_options({"path": str(tmp_path), "startingOffsets": '{"d":{"0":0}}', "failOnDataLoss": "false"},
                      streaming=False)
    (rng,) = plan_batch_ranges(o, discover_partitions(o))
    assert rng.start == start
    assert arrow_rows(read_arrow(rng, include_headers=True)) == [r for r in exp if r["offset"] >= start]
    # a planned range whose segments vanished before the read
    lost = OffsetRange("d", 0, str(tmp_path / "d-0"), 0, rng.end)
    with pytest.raises(DataLossError, match="deleted before they were read"):
        list(read_arrow(lost))
    assert arrow_rows(read_arrow(lost, include_headers=True, fail_on_data_loss=False)) == arrow_rows(
        read_arrow(rng, include_headers=True))


def test_timestamps_resolve_through_the_time_index(logdir: tuple[Path, dict]) -> None:
    root, exp = logdir
    rows = exp["t-0"]
    infos = discover_partitions(parse_options({"path": str(root), "subscribe": "t"}, streaming=False))
    target = rows[100]["timestamp"]
    want = min(r["offset"] for r in rows if r["timestamp"] >= target)
    o = parse_options({"path": str(root), "subscribe": "t", "startingTimestamp": str(target)}, streaming=False)
    got = resolve_bound(o.starting, infos, start=True)
    assert got[("t", 0)] == want
    # no record late enough: error by default, latest with the strategy, latest for an end bound
    late = str(T0 + 10**9)
    o = parse_options({"path": str(root), "subscribe": "t", "startingTimestamp": late}, streaming=False)
    with pytest.raises(OffsetOutOfRangeError, match="startingOffsetsByTimestampStrategy"):
        resolve_bound(o.starting, infos, start=True)
    assert resolve_bound(o.starting, infos, start=True, strategy="latest") == {i.tp: i.log_end for i in infos}
    o = parse_options({"path": str(root), "subscribe": "t", "endingTimestamp": late}, streaming=False)
    assert resolve_bound(o.ending, infos, start=False) == {i.tp: i.log_end for i in infos}


# ----------------------------------------------------------------------------- reading
def test_arrow_path_equals_python_reference_and_expectation(logdir: tuple[Path, dict]) -> None:
    root, exp = logdir
    o = parse_options({"path": str(root), "includeHeaders": "true"}, streaming=False)
    for rng in plan_batch_ranges(o, discover_partitions(o)):
        batches = list(read_arrow(rng, include_headers=True, max_records=13))
        assert all(b.schema == KAFKA_ARROW_SCHEMA_WITH_HEADERS and b.num_rows <= 13 for b in batches)
        fast = arrow_rows(batches)
        assert fast == _rows_ref(rng)
        assert fast == exp[f"{rng.topic}-{rng.partition}"]
        plain = arrow_rows(read_arrow(rng, include_headers=False))
        assert plain == [{k: v for k, v in r.items() if k != "headers"} for r in fast]


@pytest.mark.parametrize("case", CASES)
def test_fixture_rows_equal_manifest_without_spark(case: str, tmp_path: Path) -> None:
    d = fixture_log_dir(tmp_path)
    o = parse_options({"path": str(d / f"{case}-0"), "includeHeaders": "true"}, streaming=False)
    (rng,) = plan_batch_ranges(o, discover_partitions(o))
    rows = arrow_rows(read_arrow(rng, include_headers=True))
    assert rows == _rows_ref(rng)
    got = [{"offset": r["offset"], "timestamp": r["timestamp"],
            "key": None if r["key"] is None else r["key"].decode(), "value_size": -1 if r["value"] is None else len(r["value"]),
            "header_keys": [h["key"] for h in r["headers"] or ()], "timestampType": r["timestampType"]} for r in rows]
    assert got == manifest_rows(case)


def test_min_partitions_split_at_index_entries_gives_identical_rows(logdir: tuple[Path, dict]) -> None:
    root, _ = logdir
    o = parse_options({"path": str(root), "includeHeaders": "true"}, streaming=False)
    ranges = plan_batch_ranges(o, discover_partitions(o))
    whole = [r for rng in ranges for r in arrow_rows(read_arrow(rng, include_headers=True))]
    for n in (2, 5, 11, 40):
        pieces = split_ranges(ranges, n)
        assert len(pieces) >= min(n, 3)
        t0 = [p for p in pieces if (p.topic, p.partition) == ("t", 0)]
        # contiguous, non-overlapping, every later piece starts at an indexed file position
        assert [p.start for p in t0[1:]] == [p.end for p in t0[:-1]]
        assert all(p.position is not None and p.segment is not None for p in t0[1:])
        got = [r for p in pieces for r in arrow_rows(read_arrow(p, include_headers=True))]
        assert got == whole
    with_start = [OffsetRange(r.topic, r.partition, r.path, r.start + 17, r.end - 3) for r in ranges]
    sub = [r for p in split_ranges(with_start, 9) for r in arrow_rows(read_arrow(p, include_headers=True))]
    assert sub == [r for rng in with_start for r in _rows_ref(rng)]


def test_rate_limits() -> None:
    start = {("a", 0): 0, ("a", 1): 100, ("b", 0): 5}
    end = {("a", 0): 1000, ("a", 1): 110, ("b", 0): 5}
    lim = rate_limit_offsets(start, end, 101)
    assert lim[("b", 0)] == 5
    assert lim[("a", 0)] == 100 and lim[("a", 1)] == 101  # 101·1000/1010 = 100; 101·10/1010 = 1
    assert rate_limit_offsets(start, end, 10_000) == end


def test_byte_limit_takes_whole_batches(logdir: tuple[Path, dict]) -> None:
    root, _ = logdir
    infos = {i.tp: i for i in discover_partitions(parse_options({"path": str(root)}, streaming=False))}
    paths = {tp: i.path for tp, i in infos.items()}
    start = {tp: i.log_start for tp, i in infos.items()}
    end = {tp: i.log_end for tp, i in infos.items()}
    tiny = rate_limit_bytes(paths, start, end, 1)
    assert all(start[tp] < tiny[tp] < end[tp] for tp in end)  # one batch each
    assert rate_limit_bytes(paths, start, end, 1 << 40) == end
    mid = rate_limit_bytes(paths, start, end, 6000)
    assert all(start[tp] <= mid[tp] <= end[tp] for tp in end) and mid != end


def test_half_written_batch_is_never_read(tmp_path: Path) -> None:
    from mqstore.formats.kafka import SimpleRecord, encode_batch
    from mqstore.spark.kafka_source import KafkaLogStreamReader

    exp = write_partition(tmp_path / "h-0", batches=6, txn=False, topic="h")
    seg = sorted((tmp_path / "h-0").glob("*.log"))[-1]
    o = parse_options({"path": str(tmp_path), "startingOffsets": "earliest"}, streaming=True)
    reader = KafkaLogStreamReader(o)
    start = reader.initialOffset()
    end_before = reader.latestOffset(start, ReadAllAvailable())
    n = end_before["h"]["0"]
    batch = encode_batch([SimpleRecord(b"late-%d" % i, timestamp=T0) for i in range(3)], base_offset=n)
    with open(seg, "ab") as f:  # a writer in the middle of its write: only part of the batch is there
        f.write(batch[: len(batch) // 2])
    assert reader.latestOffset(start, ReadAllAvailable()) == end_before
    (part,) = reader.partitions(start, end_before)
    assert arrow_rows(read_arrow(part.range, include_headers=True)) == exp
    with open(seg, "ab") as f:
        f.write(batch[len(batch) // 2:])
    end_after = reader.latestOffset(end_before, ReadAllAvailable())
    assert end_after == {"h": {"0": n + 3}}
    (part,) = reader.partitions(end_before, end_after)
    assert [r["value"] for r in arrow_rows(read_arrow(part.range))] == [b"late-0", b"late-1", b"late-2"]


def test_isolation_level_option() -> None:
    assert parse_options({"path": "/x"}, streaming=False).read_committed is False
    assert parse_options({"path": "/x", "kafka.isolation.level": "READ_COMMITTED"}, streaming=False).read_committed
    assert not parse_options({"path": "/x", "kafka.isolation.level": "read_uncommitted"}, streaming=True).read_committed
