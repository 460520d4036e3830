"""The Spark RocketMQ rebuild writes the LMQ / multi-dispatch ConsumeQueues (issue 20 item 2) byte
for byte as the live dispatch and the local ``rebuild-index`` (one rule: storage.rocketmq.lmq)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from mqstore import MessageStore, StoreConfig
from mqstore.spark.rebuild import rebuild_rocketmq
from mqstore.storage.rocketmq.rebuild import compare_trees, rebuild_indexes

pytestmark = pytest.mark.spark

SEG = 65536


def lmq_config(**kw: object) -> StoreConfig:
    return StoreConfig(commit_log_file_size=SEG, consume_queue_file_size=200, hash_slot_num=64, index_num=40,
                       background_services=False, enable_lmq=True, enable_multi_dispatch=True, **kw)  # type: ignore[arg-type]


@pytest.fixture(scope="module")
def lmq_store(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """3 topics, 6 LMQ queues named by 0-3 per message, transactions, 6+ CommitLog segments."""
    root = tmp_path_factory.mktemp("lmq") / "store"
    rng = np.random.default_rng(20)
    with MessageStore.open(root, lmq_config()) as s:
        for i in range(1500):
            names = sorted({f"%LMQ%q{int(rng.integers(0, 6))}" for _ in range(int(rng.integers(0, 4)))})
            props = {"INNER_MULTI_DISPATCH": ",".join(names)} if names else None
            s.put(f"T{i % 3}", bytes(int(rng.integers(10, 300))), queue_id=i % 2, tags=f"t{i % 5}",
                  keys=[f"k{i}"], properties=props)
            if i % 400 == 399:  # PREPARED and ROLLBACK records get no unit anywhere, COMMIT does
                s.put("T0", b"p", sys_flag=0x4, properties={"INNER_MULTI_DISPATCH": "%LMQ%q0"})
                s.put("T0", b"r", sys_flag=0xC, properties={"INNER_MULTI_DISPATCH": "%LMQ%q0"})
                s.put("T0", b"c", sys_flag=0x8, properties={"INNER_MULTI_DISPATCH": "%LMQ%q0"})
    assert len(list((root / "commitlog").iterdir())) >= 6
    return root


@pytest.mark.parametrize("split", [None, 8192])
def test_spark_rebuild_writes_the_lmq_queues_as_the_live_store(spark, lmq_store: Path, tmp_path: Path,
                                                               split: int | None) -> None:
    cfg = lmq_config()
    rebuild_indexes(lmq_store, tmp_path / "local", config=cfg)
    stats = rebuild_rocketmq(spark, lmq_store, tmp_path / "spark", split_bytes=split, hash_slot_num=64, index_num=40,
                             cq_file_size=200, commit_log_file_size=SEG)
    assert compare_trees(tmp_path / "local", tmp_path / "spark") == []
    assert compare_trees(lmq_store, tmp_path / "spark") == []  # the live dispatch wrote the same files
    lmq = sorted(p.name for p in (tmp_path / "spark" / "consumequeue").iterdir() if p.name.startswith("%LMQ%"))
    assert lmq == [f"%LMQ%q{i}" for i in range(6)]
    assert stats.consume_queues == 6 + 6


def test_spark_rebuild_without_lmq(spark, lmq_store: Path, tmp_path: Path) -> None:
    stats = rebuild_rocketmq(spark, lmq_store, tmp_path / "spark", hash_slot_num=64, index_num=40, cq_file_size=200,
                             commit_log_file_size=SEG, lmq=False)
    assert stats.consume_queues == 6, stats
    assert not any(p.name.startswith("%LMQ%") for p in (tmp_path / "spark" / "consumequeue").iterdir())


def test_streaming_dispatch_columns_carry_the_lmq_properties(lmq_store: Path, tmp_path: Path) -> None:
    """``mqstore spark dispatch`` (the external dispatcher): the Arrow dispatch columns keep the
    multi-dispatch values, and applying them writes the same LMQ queues as the live store."""
    import shutil

    from mqstore.spark.dispatch import DispatchRange, _read_range, apply_dispatch, arrow_to_dispatch_batch

    root = tmp_path / "store"
    shutil.copytree(lmq_store, root, ignore=shutil.ignore_patterns("consumequeue", "index", "checkpoint"))
    segs = sorted((root / "commitlog").iterdir())
    batches = []
    for seg in segs:
        base = int(seg.name)
        end = base + seg.stat().st_size
        for rb in _read_range(DispatchRange(str(root), SEG, base, base, end)):
            batches.append(arrow_to_dispatch_batch(rb))
    assert sum(len(b.multi_row) for b in batches) > 1000
    apply_dispatch(root, batches, lmq_config())
    assert compare_trees(lmq_store, root, ("consumequeue",)) == []


@pytest.mark.parametrize("queue", ["%LMQ%q1", "%LMQ%q4"])
def test_spark_source_reads_an_lmq_queue(spark, lmq_store: Path, queue: str) -> None:
    """``spark.read.format("rocketmq").option("topics", "%LMQ%...")``: the records of the LMQ
    queue, as its ConsumeQueue lists them (the rows keep their own topic and queue fields)."""
    with MessageStore.open(lmq_store, lmq_config(), read_only=True) as s:
        want = [m.commit_log_offset for m in s.get(queue, 0, 0, 100_000)]
    assert len(want) > 100
    df = spark.read.format("rocketmq").option("topics", queue).load(str(lmq_store))
    got = [r.commitLogOffset for r in df.select("commitLogOffset").orderBy("commitLogOffset").collect()]
    assert got == want
    both = spark.read.format("rocketmq").option("topics", f"T2,{queue}").load(str(lmq_store))
    assert both.count() == len(set(want) | {r.commitLogOffset for r in spark.read.format("rocketmq")
                                            .option("topics", "T2").load(str(lmq_store)).collect()})


def test_python_twin_row_filter_accepts_lmq_rows(lmq_store: Path) -> None:
    from mqstore.spark._rocketmq_read import RowFilter, rocketmq_arrow_batches, rocketmq_rows_py

    seg = sorted((lmq_store / "commitlog").iterdir())[1]
    rf = RowFilter(topics=frozenset({"%LMQ%q2"}))
    rows = rocketmq_rows_py(seg.read_bytes(), int(seg.name), 0, seg.stat().st_size, broker_name="b", row_filter=rf)
    fast = [o for rb in rocketmq_arrow_batches(seg, broker_name="b", row_filter=rf)
            for o in rb.column("commitLogOffset").to_pylist()]
    assert [r["commitLogOffset"] for r in rows] == fast and len(fast) > 10
    assert all("%LMQ%q2" in r["properties"]["INNER_MULTI_DISPATCH"].split(",") for r in rows)
