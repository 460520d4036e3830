"""The sparse time index on Spark: the RocketMQ rebuild writes the same sidecars as the local
rebuild, and the ``rocketmq`` source resolves ``startingTimestamp`` / ``endingTimestamp`` through
them exactly (equal-millisecond runs, ConsumeQueue file boundaries)."""

from __future__ import annotations

import random
from pathlib import Path

import pytest

from mqstore import MessageStore, StoreConfig
from mqstore.spark.rebuild import rebuild_rocketmq
from mqstore.storage.rocketmq.rebuild import compare_trees, rebuild_indexes
from mqstore.storage.rocketmq.timeindex import TIMEINDEX_DIR, all_sidecars

pytestmark = pytest.mark.spark


def _store(path: Path) -> StoreConfig:
    now = [0]
    cfg = StoreConfig(commit_log_file_size=1 << 16, consume_queue_file_size=11 * 20, background_services=False,
                      enable_time_index=True, clock=lambda: now[0], hash_slot_num=64, index_num=400)
    rng = random.Random(17)
    t = 10_000
    with MessageStore.open(path, cfg) as s:
        for i in range(400):
            t += rng.choice((0, 0, 0, 1, 2))
            now[0] = t
            s.put(f"T{i % 2}", b"v%d" % i, queue_id=i % 3, keys=[f"k{i}"])
    return cfg


def test_rebuild_and_starting_timestamp(spark, tmp_path: Path) -> None:
    store = tmp_path / "store"
    cfg = _store(store)
    local, remote = tmp_path / "local", tmp_path / "spark"
    rebuild_indexes(store, local, config=cfg)
    rebuild_rocketmq(spark, store, remote, hash_slot_num=64, index_num=400, cq_file_size=11 * 20,
                     commit_log_file_size=1 << 16, time_index=True)
    assert all_sidecars(remote)
    assert compare_trees(local, remote) == []
    assert compare_trees(store, remote, (TIMEINDEX_DIR,)) == []
    every = sorted((r["storeTimestamp"], r["topic"], r["queueId"], r["queueOffset"])
                    for r in spark.read.format("rocketmq").load(str(store)).collect())
    stamps = sorted({e[0] for e in every})
    for ts in (stamps[0] - 1, stamps[len(stamps) // 3], stamps[len(stamps) // 2], stamps[-1], stamps[-1] + 1):
        got = sorted((r["storeTimestamp"], r["topic"], r["queueId"], r["queueOffset"])
                     for r in spark.read.format("rocketmq").option("startingTimestamp", ts)
                     .option("endingTimestamp", ts + 3).load(str(store)).collect())
        assert got == [e for e in every if ts <= e[0] < ts + 3], ts
