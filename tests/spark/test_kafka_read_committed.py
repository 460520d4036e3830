"""kafka-log with kafka.isolation.level=read_committed: aborted transactions and control batches
skipped, the partition's end at the last stable offset (Transactions V1 and V2 markers)."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "kafka"))
from txn_support import Op, build, write_partition

from mqstore.spark._kafka_plan import OffsetRange, partition_info
from mqstore.spark._kafka_read import read_arrow, read_rows

OPS = [Op("plain", n=2), Op("txn", 1, 3), Op("txn", 2, 2), Op("end", 1, commit=False), Op("txn", 2, 1),
       Op("plain", n=1), Op("end", 2, commit=True), Op("txn", 1, 2), Op("end", 1, commit=True),
       Op("txn", 3, 2), Op("end", 3, commit=False), Op("txn", 4, 1), Op("plain", n=2)]


@pytest.fixture(params=[False, True], ids=["txn-v1", "txn-v2"])
def part(request: pytest.FixtureRequest, tmp_path: Path) -> tuple[Path, object]:
    m = build(OPS, tv2=request.param)
    d = tmp_path / "tx-0"
    write_partition(d, m, cuts=[4, 9])
    return d, m


def _offsets(batches: list) -> list[int]:
    return [o for rb in batches for o in rb.column(4).to_pylist()]


def test_read_arrow_read_committed_equals_reference(part) -> None:
    d, m = part
    assert m.committed_offsets() == [0, 1, 5, 6, 8, 9, 11, 12]
    rng = OffsetRange("tx", 0, str(d), 0, m.log_end)
    for fast in (True, False):
        got = _offsets(list(read_arrow(rng, read_committed=True, fast=fast, max_records=3)))
        assert got == m.committed_offsets()
    assert [r[4] for r in read_rows(rng, read_committed=True)] == m.committed_offsets()
    everything = _offsets(list(read_arrow(rng)))
    assert everything == [o for o in range(m.log_end) if o not in m.markers]
    sub = OffsetRange("tx", 0, str(d), 6, 12)
    assert _offsets(list(read_arrow(sub, read_committed=True))) == [6, 8, 9, 11]


def test_plan_ends_at_last_stable_offset(part) -> None:
    d, m = part
    assert partition_info(("tx", 0), str(d)).log_end == m.log_end
    assert partition_info(("tx", 0), str(d), read_committed=True).log_end == m.lso == 17


def test_spark_read_committed(spark, part) -> None:
    d, m = part
    df = spark.read.format("kafka-log").option("kafka.isolation.level", "read_committed").load(str(d))
    assert sorted(r["offset"] for r in df.select("offset").collect()) == m.committed_offsets()
    raw = spark.read.format("kafka-log").load(str(d))
    assert raw.count() == m.log_end - len(m.markers)


def test_planner_hands_each_task_its_excluded_ranges(part) -> None:
    from mqstore.spark._kafka_options import parse_options
    from mqstore.spark._kafka_plan import discover_partitions, plan_batch_ranges
    from mqstore.spark.kafka_source import _partitions

    d, m = part
    opts = parse_options({"path": str(d), "kafka.isolation.level": "read_committed", "minPartitions": "3"},
                         streaming=False)
    parts = _partitions(opts, plan_batch_ranges(opts, discover_partitions(opts)))
    assert len(parts) >= 2 and all(p.committed is not None for p in parts)
    assert parts[-1].range.end == m.lso
    got = []
    for p in parts:
        assert all(s < p.range.end and e >= p.range.start
                   for s, e in zip(p.committed.excluded_starts, p.committed.excluded_ends, strict=True))
        got += _offsets(list(read_arrow(p.range, committed=p.committed)))
    assert sorted(got) == m.committed_offsets()
