"""The rocketmq source's reading and planning code without Spark: the Arrow fast path against the
pure-Python twin, row filters, partition planning, CRC and corruption errors, the boundary walk."""

from __future__ import annotations

import shutil
from pathlib import Path

import pyarrow as pa
import pytest
from rocketmq_spark_support import T0, TOPICS, expected_rows, make_store, manifest, normalize

from mqstore.errors import CorruptDataError, CrcMismatchError, DataLossError
from mqstore.spark._rocketmq_options import parse_options
from mqstore.spark._rocketmq_read import (
    RowFilter,
    rocketmq_arrow_batches,
    rocketmq_arrow_schema,
    rocketmq_rows_py,
)
from mqstore.spark._rocketmq_store import list_segments
from mqstore.spark.rocketmq_source import CommitLogRange, PushedFilters, plan_batch, read_range
from mqstore.storage.rocketmq.walk import check_boundary, walk

CASES = ("basic", "prop_crc")


def arrow_rows(segment: str, start: int = 0, end: int | None = None, **kw: object) -> list[dict]:
    rows = []
    for b in rocketmq_arrow_batches(segment, start, end, **kw):  # type: ignore[arg-type]
        assert b.schema == rocketmq_arrow_schema()
        rows += [normalize(r) for r in b.to_pylist()]
    return rows


def twin_rows(segment: str, start: int = 0, end: int | None = None, **kw: object) -> list[dict]:
    data = Path(segment).read_bytes()
    return rocketmq_rows_py(data, int(Path(segment).name), start, len(data) if end is None else end, **kw)  # type: ignore[arg-type]


def read_plan(parts: list[CommitLogRange], **kw: bool) -> list[dict]:
    rows = []
    for p in parts:
        for b in read_range(p, include_body=kw.get("include_body", True), check_crc=kw.get("check_crc", False)):
            rows += [normalize(r) for r in b.to_pylist()]
    return sorted(rows, key=lambda r: (r["brokerName"], r["commitLogOffset"]))


@pytest.fixture(scope="module")
def store(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return make_store(tmp_path_factory.mktemp("rmq") / "broker-a", 150)


@pytest.mark.parametrize("case", CASES)
def test_fixture_rows_equal_manifest_and_twin(shared_fixtures: Path, case: str) -> None:
    segs = list_segments(str(shared_fixtures / "rocketmq" / case / "store"))
    fast = [r for s in segs for r in arrow_rows(s.path, broker_name="b1")]
    slow = [r for s in segs for r in twin_rows(s.path, broker_name="b1")]
    assert fast == slow == expected_rows(manifest(shared_fixtures, case), "b1")
    nobody = [r for s in segs for r in arrow_rows(s.path, broker_name="b1", include_body=False)]
    assert nobody == expected_rows(manifest(shared_fixtures, case), "b1", include_body=False)


def test_twin_with_filters_and_small_batches(store: Path) -> None:
    rf = RowFilter(topics=frozenset({"orders", "audit"}), ts_min=T0 + 20, ts_end=T0 + 400,
                   queue_bounds={("orders", 0): (2, 9), ("audit", 1): (0, 100)})
    total = 0
    for s in list_segments(str(store)):
        for f in (None, rf, RowFilter(topic_pattern="pay.*", queue_ids=frozenset({1})),
                  RowFilter(offset_min=s.base + 300, offset_end=s.base + 2000)):
            fast = arrow_rows(s.path, broker_name="x", row_filter=f, max_rows=3)
            assert fast == twin_rows(s.path, broker_name="x", row_filter=f)
            total += len(fast)
        # byte-bounded batches: every batch but the last holds at most ~max_bytes of records
        batches = list(rocketmq_arrow_batches(s.path, broker_name="x", max_bytes=600))
        assert all(sum(b.column("size").to_pylist()) <= 600 or b.num_rows == 1 for b in batches)
        assert pa.Table.from_batches(batches).num_rows == len(twin_rows(s.path, broker_name="x"))
    assert total > 150


def test_plan_covers_every_record_once(store: Path) -> None:
    opts = parse_options({"path": str(store)})
    parts = plan_batch(opts)
    assert len(parts) == len(list_segments(str(store))) >= 5  # one partition per segment
    rows = read_plan(parts)
    assert len(rows) == 150 and len({r["commitLogOffset"] for r in rows}) == 150
    assert [int(r["properties"]["seq"]) for r in rows] == list(range(150))
    split = plan_batch(parse_options({"path": str(store), "minPartitions": "23"}))
    assert 23 <= len(split) <= 23 + len(parts)
    assert read_plan(split) == rows
    assert all(p.start < p.end for p in split)


def test_plan_with_offsets_skips_segments(store: Path) -> None:
    opts = parse_options({"path": str(store), "topics": "orders",
                          "startingOffsets": '{"orders": {"broker-a": {"0": 20, "1": -1}}}',
                          "endingOffsets": '{"orders": {"broker-a": {"0": 24}}}'})
    parts = plan_batch(opts)
    assert len(parts) < len(list_segments(str(store)))
    rows = read_plan(parts)
    assert [(r["topic"], r["queueId"], r["queueOffset"]) for r in rows] == [("orders", 0, q) for q in range(20, 24)]
    opts = parse_options({"path": str(store), "topics": "orders", "endingOffsets": "earliest"})
    assert plan_batch(opts) == []


def test_plan_by_timestamp_and_pushed_filters(store: Path) -> None:
    every = read_plan(plan_batch(parse_options({"path": str(store)})))
    ts = every[60]["storeTimestamp"]
    by_time = read_plan(plan_batch(parse_options({"path": str(store), "startingTimestamp": str(ts),
                                                 "endingTimestamp": str(ts + 30)})))
    assert by_time == [r for r in every if ts <= r["storeTimestamp"] < ts + 30]
    pushed = PushedFilters()
    from pyspark.sql.datasource import EqualTo, GreaterThan, In, LessThanOrEqual, StringContains

    assert pushed.accept(In(("topic",), ("orders", "audit")))
    assert pushed.accept(EqualTo(("topic",), "audit"))
    assert pushed.accept(GreaterThan(("storeTimestamp",), ts))
    assert pushed.accept(LessThanOrEqual(("commitLogOffset",), 20_000))
    assert pushed.accept(EqualTo(("brokerName",), "broker-a"))
    assert not pushed.accept(StringContains(("topic",), "x"))
    assert not pushed.accept(EqualTo(("queueOffset",), 3))
    assert not pushed.accept(EqualTo(("queueId",), "3"))
    got = read_plan(plan_batch(parse_options({"path": str(store)}), pushed))
    assert got == [r for r in every if r["topic"] == "audit" and r["storeTimestamp"] > ts
                   and r["commitLogOffset"] <= 20_000]
    pushed.accept(EqualTo(("brokerName",), "other"))
    assert plan_batch(parse_options({"path": str(store)}), pushed) == []


def test_crc_mismatch_names_file_and_offset(shared_fixtures: Path, tmp_path: Path) -> None:
    copy = tmp_path / "store"
    shutil.copytree(shared_fixtures / "rocketmq" / "basic" / "store", copy)
    m = manifest(shared_fixtures, "basic")
    victim = next(x for x in m["messages"] if x["bodyHex"] and x["physicalOffset"] >= 16384)
    seg = copy / "commitlog" / "00000000000000016384"
    seg.chmod(0o644)
    data = bytearray(seg.read_bytes())
    body_at = victim["physicalOffset"] - 16384 + x_body_pos(victim)
    data[body_at] ^= 0xFF
    seg.write_bytes(bytes(data))
    assert len(arrow_rows(str(seg), broker_name="b")) > 0  # no CRC check: reads
    with pytest.raises(CrcMismatchError) as err:
        arrow_rows(str(seg), broker_name="b", check_crc=True)
    assert err.value.path == str(seg) and err.value.offset == victim["physicalOffset"]
    # a broken header in the middle of a segment is corruption, named the same way
    data[victim["physicalOffset"] - 16384 + 4 : victim["physicalOffset"] - 16384 + 8] = b"\x12\x34\x56\x78"
    seg.write_bytes(bytes(data))
    with pytest.raises(CorruptDataError, match="magic") as err2:
        arrow_rows(str(seg), broker_name="b")
    assert err2.value.offset == victim["physicalOffset"] and str(seg) in str(err2.value)


def x_body_pos(msg: dict) -> int:
    """Position of the body inside a record (after the 4-byte body length)."""
    born = 20 if msg["sysFlag"] & 0x10 else 8
    store = 20 if msg["sysFlag"] & 0x20 else 8
    return 48 + born + 8 + store + 12 + 4


def test_walk_stops_before_a_torn_record(store: Path, tmp_path: Path) -> None:
    copy = tmp_path / "live"
    shutil.copytree(store, copy)
    segs = list_segments(str(copy))
    full = walk(segs, segs[0].base)
    assert len(full.offsets) == 150 and full.end > segs[-1].base
    # segment boundaries: a blank record leads to the next segment's base
    first = walk(segs, segs[0].base, stop_at=segs[1].base)
    assert first.end == segs[1].base and len(first.offsets) > 0
    lim = walk(segs, segs[0].base, max_records=7)
    assert len(lim.offsets) == 7 and lim.end == int(lim.offsets[-1] + lim.sizes[-1])
    # tear the last record: its header stays, its tail is not written yet
    last_off, last_size = int(full.offsets[-1]), int(full.sizes[-1])
    last = segs[-1]
    data = bytearray(Path(last.path).read_bytes())
    rel = last_off - last.base
    saved = bytes(data[rel + 40 : rel + last_size])
    data[rel + 40 : rel + last_size] = bytes(last_size - 40)
    Path(last.path).write_bytes(bytes(data))
    torn = walk(list_segments(str(copy)), segs[0].base)
    assert len(torn.offsets) == 149 and torn.end == last_off
    data[rel + 40 : rel + last_size] = saved
    Path(last.path).write_bytes(bytes(data))
    assert walk(list_segments(str(copy)), torn.end).end == full.end


def test_check_boundary(store: Path) -> None:
    segs = list_segments(str(store))
    full = walk(segs, segs[0].base)
    assert check_boundary(segs, int(full.offsets[5]), fail_on_data_loss=True, what="x") == int(full.offsets[5])
    assert check_boundary(segs, full.end, fail_on_data_loss=True, what="x") == full.end
    with pytest.raises(CorruptDataError, match="not a record boundary"):
        check_boundary(segs, int(full.offsets[5]) + 3, fail_on_data_loss=True, what="x")
    with pytest.raises(DataLossError, match="beyond"):
        check_boundary(segs, segs[-1].end + 4096, fail_on_data_loss=True, what="x")
    assert {r for r in TOPICS} == {"orders", "payments", "audit"}


def test_stream_reader_offsets_and_admission_control(tmp_path: Path) -> None:
    """The stream reader's driver-side methods, called directly (Spark calls the same ones)."""
    from pyspark.sql.streaming.datasource import ReadAllAvailable, ReadMaxBytes, ReadMaxRows

    from mqstore.spark.rocketmq_source import RocketMQStreamReader

    a, b = make_store(tmp_path / "a", 40), make_store(tmp_path / "b", 10)
    opts = parse_options({"paths": f"{a},{b}", "maxOffsetsPerTrigger": "20", "startingOffsets": "earliest"},
                         streaming=True)
    r = RocketMQStreamReader(opts)
    start = r.initialOffset()
    ends = {n: walk(list_segments(str(p)), 0).end for n, p in (("a", a), ("b", b))}
    assert start == {"a": 0, "b": 0} and r.getDefaultReadLimit() == ReadMaxRows(20)
    assert r.latestOffset(start, ReadAllAvailable()) == ends
    seen: list[int] = []
    pos = start
    while True:
        nxt = r.latestOffset(pos, r.getDefaultReadLimit())
        if nxt == pos:
            break
        batch = read_plan(list(r.partitions(pos, nxt)))  # type: ignore[arg-type]
        assert 0 < len(batch) <= 20
        seen += [int(x["properties"]["seq"]) + (1000 if x["brokerName"] == "b" else 0) for x in batch]
        pos = nxt
    assert sorted(seen) == list(range(40)) + list(range(1000, 1010)) and len(seen) == len(set(seen))
    # bytes: never more than the limit unless a single record is larger
    one = RocketMQStreamReader(parse_options({"path": str(a), "maxBytesPerTrigger": "10"}, streaming=True))
    first = one.latestOffset({"a": 0}, ReadMaxBytes(10))
    assert len(read_plan(list(one.partitions({"a": 0}, first)))) == 1  # type: ignore[arg-type]
    # availableNow: the end is fixed when the query starts
    fixed = RocketMQStreamReader(parse_options({"path": str(a)}, streaming=True))
    fixed.prepareForTriggerAvailableNow()
    from rocketmq_spark_support import fill, small_config

    from mqstore import MessageStore

    with MessageStore.open(a, small_config(T0 + 10_000)) as s:
        fill(s, 5, start=40)
    assert fixed.latestOffset({"a": 0}, ReadAllAvailable()) == {"a": ends["a"]}
    assert RocketMQStreamReader(opts).latestOffset({"a": 0, "b": 0}, ReadAllAvailable())["a"] > ends["a"]
    with pytest.raises(DataLossError, match="beyond the store's end"):
        fixed.latestOffset({"a": 10**9}, ReadAllAvailable())
    lenient = RocketMQStreamReader(parse_options({"path": str(a), "failOnDataLoss": "false"}, streaming=True))
    assert lenient.latestOffset({"a": 10**9}, ReadAllAvailable())["a"] > ends["a"]
