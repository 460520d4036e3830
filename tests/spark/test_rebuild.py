"""The Spark index-rebuild jobs equal the local rebuilds byte for byte (RocketMQ and Kafka)."""

from __future__ import annotations

import itertools
import json
import shutil
from pathlib import Path

import numpy as np
import pytest

from mqstore import MessageStore, StoreConfig
from mqstore.errors import InvalidArgumentError, StoreNotFoundError, UnsupportedFormatError
from mqstore.spark import _rebuild_rocketmq as rr
from mqstore.spark.rebuild import rebuild_kafka, rebuild_rocketmq
from mqstore.storage.rocketmq.index import IndexService
from mqstore.storage.rocketmq.index_roll import keys_per_file, new_file_firsts, roll_plan
from mqstore.storage.rocketmq.rebuild import (
    compare_trees,
    rebuild_indexes,
    tree_files,
    write_consume_queue,
    write_index_file,
)

pytestmark = pytest.mark.spark

SEG = 65536


class Clock:
    def __init__(self, start: int = 1_700_000_000_000, step: int = 3) -> None:
        self.t = start
        self.step = step

    def __call__(self) -> int:
        self.t += self.step
        return self.t


def fixture_config(case_dir: Path, **over: int) -> StoreConfig:
    c = json.loads((case_dir / "manifest.json").read_text())["config"]
    values = dict(commit_log_file_size=c["mappedFileSizeCommitLog"], consume_queue_file_size=c["mappedFileSizeConsumeQueue"],
                  hash_slot_num=c["maxHashSlotNum"], index_num=c["maxIndexNum"])
    values.update(over)
    return StoreConfig(**values)


def spark_args(cfg: StoreConfig) -> dict[str, int]:
    return dict(hash_slot_num=cfg.hash_slot_num, index_num=cfg.index_num, cq_file_size=cfg.consume_queue_file_size,
                commit_log_file_size=cfg.commit_log_file_size)


def assert_same(local: Path, spark_out: Path) -> None:
    assert compare_trees(local, spark_out) == []
    assert (local / "checkpoint").read_bytes() == (spark_out / "checkpoint").read_bytes()


@pytest.fixture(scope="module")
def generated_store(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """7 topics x 5 queues, 10 CommitLog segments, 0-3 keys per message, transactions."""
    root = tmp_path_factory.mktemp("gen") / "store"
    cfg = StoreConfig(commit_log_file_size=SEG, consume_queue_file_size=400, hash_slot_num=64, index_num=40,
                      background_services=False, clock=Clock())
    rng = np.random.default_rng(7)
    with MessageStore.open(root, cfg) as s:
        for i in range(2500):
            topic = f"Topic{i % 7}"
            keys = [f"k{int(rng.integers(0, 300))}" for _ in range(int(rng.integers(0, 4)))]
            s.put(topic, bytes(int(rng.integers(10, 400))), queue_id=int(rng.integers(0, 5)), keys=keys or None,
                  tags=f"T{i % 3}")
            if i % 500 == 499:  # PREPARED (no unit), ROLLBACK (no unit, no key), COMMIT
                s.put(topic, b"p", keys="tx-p", sys_flag=0x4)
                s.put(topic, b"r", keys="tx-r", sys_flag=0xC)
                s.put(topic, b"c", keys="tx-c", sys_flag=0x8)
    assert len(list((root / "commitlog").iterdir())) >= 8
    return root


# ------------------------------------------------------------------------------- RocketMQ fixtures
@pytest.mark.parametrize("case", ["basic", "prop_crc"])
def test_fixture_stores_equal_local_and_broker(spark, shared_fixtures: Path, tmp_path: Path, case: str) -> None:
    case_dir = shared_fixtures / "rocketmq" / case
    store = case_dir / "store"
    cfg = fixture_config(case_dir)
    local = tmp_path / "local"
    ls = rebuild_indexes(store, local, config=cfg)
    stats = rebuild_rocketmq(spark, store, tmp_path / "spark", **spark_args(cfg))
    assert_same(local, tmp_path / "spark")
    assert compare_trees(store, tmp_path / "spark") == []  # the broker's own files
    assert (stats.messages, stats.keys, stats.commit_log_end, stats.consume_queues, stats.index_files,
            stats.stop_error) == (ls.messages, ls.keys, ls.commit_log_end, ls.consume_queues, ls.index_files,
                                  ls.stop_error)
    assert stats.segments == len(list((store / "commitlog").iterdir()))


@pytest.mark.parametrize("case", ["basic", "prop_crc"])
def test_fixture_stores_with_rolling_index_and_split_segments(spark, shared_fixtures: Path, tmp_path: Path,
                                                              case: str) -> None:
    case_dir = shared_fixtures / "rocketmq" / case
    cfg = fixture_config(case_dir, index_num=16, hash_slot_num=7)
    ls = rebuild_indexes(case_dir / "store", tmp_path / "local", config=cfg)
    stats = rebuild_rocketmq(spark, case_dir / "store", tmp_path / "spark", split_bytes=4096, **spark_args(cfg))
    assert_same(tmp_path / "local", tmp_path / "spark")
    assert ls.index_files > 5 and stats.index_files == ls.index_files
    assert stats.scan_tasks > stats.segments  # segments were cut at record boundaries


# ------------------------------------------------------------------------------- generated stores
@pytest.mark.parametrize(("items", "slots", "split"), [(40, 64, None), (7, 3, 16384), (100_000, 1000, 20000)])
def test_generated_store(spark, generated_store: Path, tmp_path: Path, items: int, slots: int,
                         split: int | None) -> None:
    cfg = StoreConfig(commit_log_file_size=SEG, consume_queue_file_size=400, hash_slot_num=slots, index_num=items)
    ls = rebuild_indexes(generated_store, tmp_path / "local", config=cfg)
    events: list[tuple[str, int, int]] = []
    stats = rebuild_rocketmq(spark, generated_store, tmp_path / "spark", split_bytes=split,
                             progress=lambda p, d, t: events.append((p, d, t)), **spark_args(cfg))
    assert_same(tmp_path / "local", tmp_path / "spark")
    assert stats.messages == ls.messages == 2515
    assert stats.consume_queues == ls.consume_queues == 35
    assert stats.index_files == ls.index_files == len(list((tmp_path / "spark" / "index").iterdir()))
    assert stats.keys == ls.keys and stats.commit_log_end == ls.commit_log_end
    if items == 40:  # the live store wrote the same files
        assert compare_trees(generated_store, tmp_path / "spark") == []
    phases = [p for p, _, _ in events]
    assert "scan CommitLog" in phases and "write ConsumeQueues and IndexFiles" in phases
    finals = {p: (d, t) for p, d, t in events}
    assert all(d == t and t > 0 for d, t in finals.values())
    assert set(stats.phase_seconds) == set(finals) and all(v >= 0 for v in stats.phase_seconds.values())


def test_scan_stops_where_the_local_scan_stops(spark, generated_store: Path, tmp_path: Path) -> None:
    store = tmp_path / "store"
    shutil.copytree(generated_store, store)
    segs = sorted((store / "commitlog").iterdir())
    victim = segs[len(segs) // 2]
    data = bytearray(victim.read_bytes())
    data[30_000:34_096] = bytes(4096)  # wipe a stretch in the middle of a segment
    victim.chmod(0o644)
    victim.write_bytes(bytes(data))
    cfg = StoreConfig(commit_log_file_size=SEG, consume_queue_file_size=400, hash_slot_num=64, index_num=40)
    ls = rebuild_indexes(store, tmp_path / "local", config=cfg)
    stats = rebuild_rocketmq(spark, store, tmp_path / "spark", split_bytes=16384, **spark_args(cfg))
    assert_same(tmp_path / "local", tmp_path / "spark")
    assert stats.messages == ls.messages < 2515
    assert (stats.commit_log_end, stats.stop_error) == (ls.commit_log_end, ls.stop_error)


def test_in_place_rebuild(spark, generated_store: Path, tmp_path: Path) -> None:
    store = tmp_path / "store"
    shutil.copytree(generated_store, store)
    shutil.rmtree(store / "index")
    victim = next(iter(tree_files(store, ("consumequeue",)).values()))
    victim.write_bytes(bytes(victim.stat().st_size))  # damage a queue
    stats = rebuild_rocketmq(spark, store, store, hash_slot_num=64, index_num=40, cq_file_size=400)
    assert compare_trees(generated_store, store) == []
    assert stats.messages == 2515
    assert not [p for p in store.iterdir() if p.name.startswith(".rebuild-")]


def test_empty_commitlog(spark, tmp_path: Path) -> None:
    (tmp_path / "store" / "commitlog").mkdir(parents=True)
    ls = rebuild_indexes(tmp_path / "store", tmp_path / "local")
    stats = rebuild_rocketmq(spark, tmp_path / "store", tmp_path / "spark")
    assert stats.messages == ls.messages == 0 and stats.index_files == 0
    assert_same(tmp_path / "local", tmp_path / "spark")


def test_bad_arguments(spark, generated_store: Path, tmp_path: Path) -> None:
    with pytest.raises(StoreNotFoundError):
        rebuild_rocketmq(spark, tmp_path / "missing", tmp_path / "o")
    with pytest.raises(InvalidArgumentError, match="inside the CommitLog"):
        rebuild_rocketmq(spark, generated_store, generated_store / "commitlog" / "x")
    for kw in ({"hash_slot_num": 0}, {"index_num": 1}, {"cq_file_size": -20}, {"split_bytes": 0}):
        with pytest.raises(InvalidArgumentError):
            rebuild_rocketmq(spark, generated_store, tmp_path / "o", **kw)
    (tmp_path / "full" / "index").mkdir(parents=True)
    (tmp_path / "full" / "index" / "20240101000000000").write_bytes(b"x")
    with pytest.raises(InvalidArgumentError, match="already holds"):
        rebuild_rocketmq(spark, generated_store, tmp_path / "full")
    (tmp_path / "afile").write_bytes(b"")
    with pytest.raises(InvalidArgumentError, match="not a directory"):
        rebuild_rocketmq(spark, generated_store, tmp_path / "afile")


# ------------------------------------------------------------------------------- pieces
def test_writers_are_idempotent(tmp_path: Path) -> None:
    offs = np.arange(0, 2000, 100, dtype=np.int64)
    sizes = np.full(20, 100, np.int32)
    tags = np.arange(20, dtype=np.int64)
    qoffs = np.arange(20, dtype=np.int64)
    assert write_consume_queue(tmp_path, "T", 3, 200, offs, sizes, tags, qoffs) == 20
    first = {k: p.read_bytes() for k, p in tree_files(tmp_path).items()}
    write_consume_queue(tmp_path, "T", 3, 200, offs, sizes, tags, qoffs)  # a retried task
    assert {k: p.read_bytes() for k, p in tree_files(tmp_path).items()} == first
    assert len(first) == 2  # 200-byte segments of 10 units
    h = np.arange(5, dtype=np.int32)
    write_index_file(tmp_path / "index", "20240101000000000", 3, 6, h, offs[:5], 1_700_000_000_000 + qoffs[:5])
    one = (tmp_path / "index" / "20240101000000000").read_bytes()
    write_index_file(tmp_path / "index", "20240101000000000", 3, 6, h, offs[:5], 1_700_000_000_000 + qoffs[:5])
    assert (tmp_path / "index" / "20240101000000000").read_bytes() == one
    assert [p.name for p in (tmp_path / "index").iterdir()] == ["20240101000000000"]
    with pytest.raises(InvalidArgumentError):
        write_index_file(tmp_path / "index", "20240101000000001", 3, 6, np.arange(6, dtype=np.int32), offs[:6],
                         qoffs[:6])


def test_index_plan_matches_index_service(tmp_path: Path) -> None:
    """The driver's roll plan (names, carry-over) equals what IndexService does, timestamps
    going backwards and repeating included."""
    rng = np.random.default_rng(3)
    n = 97
    ts = 1_700_000_000_000 + np.cumsum(rng.integers(-1, 3, n))
    phy = np.arange(n, dtype=np.int64) * 50 + 10
    hashes = rng.integers(-(2**31), 2**31, n).astype(np.int32)
    svc = IndexService(tmp_path / "svc", 5, 8)
    svc.put_hashes(hashes, phy, ts)
    svc.flush()
    roll = roll_plan(n, keys_per_file(8))
    firsts = np.array(new_file_firsts(roll), np.int64)
    # the keys arrive in chunks of arbitrary sizes
    cuts = [0, 5, 6, 7, 14, 30, 31, 70, n]
    picks = []
    scans = []
    for i, (a, b) in enumerate(itertools.pairwise(cuts)):
        scan = rr.ChunkScan(i, 0, 0, True, 0, "end", None, b - a, [], *(np.empty(0),) * 6, None,
                            hashes[a:b], phy[a:b], ts[a:b])
        scans.append(scan)
        picks += list(rr.boundary_picks(scan, a, firsts))
    plans = rr.plan_index_files(roll, picks)
    assert [p.name for p in plans] == [f.name for f in svc.files]
    assert [p.carry_ts for p in plans[1:]] == [f.header.end_timestamp for f in svc.files[:-1]]
    # the summaries answer boundaries at chunk edges; only the other chunks are asked
    starts = {i: a for i, a in enumerate(cuts[:-1])}
    quick, ask = rr.summary_picks([c.summary() for c in scans], starts, firsts)
    assert ask and len(ask) < len(scans)
    for i in ask:
        quick += list(rr.boundary_picks(scans[i], starts[i], firsts))
    assert rr.plan_index_files(roll, quick) == plans
    for p in plans:
        write_index_file(tmp_path / "plan", p.name, 5, 8, hashes[p.first_key:p.first_key + p.keys],
                         phy[p.first_key:p.first_key + p.keys], ts[p.first_key:p.first_key + p.keys],
                         p.carry_phy, p.carry_ts)
    svc.close()
    for f in sorted((tmp_path / "svc").iterdir()):
        assert (tmp_path / "plan" / f.name).read_bytes() == f.read_bytes()


def test_included_chunks_rules() -> None:
    segs = [rr.SegmentDesc(i, f"s{i}", i * 100, 100) for i in range(3)]
    S = rr.ChunkSummary
    ok = [S(0, 0, 50, False, 50, "end", None, 1, 0, None), S(1, 0, 100, True, 90, "blank", None, 1, 0, None),
          S(2, 1, 200, True, 190, "blank", None, 1, 0, None), S(3, 2, 300, True, 250, "end", None, 1, 0, None)]
    assert [s.index for s in rr.included_chunks(ok, segs)] == [0, 1, 2, 3]
    bad = [ok[0], S(1, 0, 100, True, 70, "invalid", "bad magic", 1, 0, None), ok[2], ok[3]]
    assert [s.index for s in rr.included_chunks(bad, segs)] == [0, 1]
    no_blank = [ok[0], S(1, 0, 100, True, 100, "end", None, 1, 0, None), ok[2], ok[3]]
    assert [s.index for s in rr.included_chunks(no_blank, segs)] == [0, 1]
    short = [S(0, 0, 50, False, 40, "end", None, 1, 0, None), *ok[1:]]
    assert [s.index for s in rr.included_chunks(short, segs)] == [0]


# ------------------------------------------------------------------------------- Kafka
def _kafka_local(path: Path, out: Path, **kw: int) -> int:
    """The local rebuild (indexes per segment, then the partition's .txnindex files); returns the
    number of aborted transactions written."""
    from mqstore.storage.kafka.rebuild import rebuild_indexes as kafka_rebuild
    from mqstore.storage.kafka.txn_rebuild import rebuild_txn_indexes

    out.mkdir(parents=True, exist_ok=True)
    for log in sorted(path.glob("*.log")):
        kafka_rebuild(log, out, index_interval_bytes=kw.get("index_interval_bytes", 4096),
                      max_index_size=kw.get("max_index_bytes", 10485760))
    return sum(r.entries for r in rebuild_txn_indexes(path, out))


def _files(d: Path) -> dict[str, bytes]:
    return {str(p.relative_to(d)): p.read_bytes() for p in sorted(d.rglob("*")) if p.is_file()}


@pytest.mark.parametrize("case", ["append_groups", "corrupt_tail_recover", "multi_segment_roll_bytes",
                                  "single_default", "unclean_flush"])
def test_kafka_fixtures(spark, shared_fixtures: Path, tmp_path: Path, case: str) -> None:
    d = shared_fixtures / "kafka" / case
    part = d / "corrupted_input" if (d / "corrupted_input").is_dir() else d / "segments"
    interval = json.loads((d / "manifest.json").read_text()).get("config", {}).get("index_interval_bytes", 4096)
    aborted = _kafka_local(part, tmp_path / "local", index_interval_bytes=interval)
    stats = rebuild_kafka(spark, part, tmp_path / "spark", index_interval_bytes=interval)
    assert _files(tmp_path / "local") == _files(tmp_path / "spark")
    assert stats.aborted_txns == aborted
    assert stats.segments == len(list(part.glob("*.log"))) and stats.partitions == 1
    assert stats.offset_entries == sum(int(r["offset_entries"]) for r in stats.results)


def test_kafka_log_dir_of_partitions(spark, tmp_path: Path) -> None:
    from mqstore.formats.kafka import SimpleRecord
    from mqstore.kafka import LogConfig, PartitionLog

    logdir = tmp_path / "data"
    for p in range(3):
        with PartitionLog.open(logdir / f"orders-{p}", LogConfig(segment_bytes=3000)) as log:
            for i in range(60 + 20 * p):
                log.append_records([SimpleRecord(b"v" * (i % 90), key=b"k%d" % i)], timestamp=1_700_000_000_000 + i)
    (logdir / "not-a-partition").mkdir()
    for kw in ({}, {"index_interval_bytes": 0, "max_index_bytes": 4096}):
        out = tmp_path / f"spark{len(kw)}"
        stats = rebuild_kafka(spark, logdir, out, **kw)
        for p in range(3):
            _kafka_local(logdir / f"orders-{p}", tmp_path / f"local{len(kw)}" / f"orders-{p}", **kw)
        assert _files(tmp_path / f"local{len(kw)}") == _files(out)
        assert stats.partitions == 3 and stats.segments > 6
    one = sorted((logdir / "orders-1").glob("*.log"))[1]
    stats = rebuild_kafka(spark, one, tmp_path / "one")
    assert [p.name for p in sorted((tmp_path / "one").iterdir())] == [one.stem + ".index", one.stem + ".timeindex"]


def test_kafka_bad_arguments(spark, tmp_path: Path) -> None:
    with pytest.raises(StoreNotFoundError):
        rebuild_kafka(spark, tmp_path / "missing", tmp_path / "o")
    (tmp_path / "empty").mkdir()
    with pytest.raises(StoreNotFoundError):
        rebuild_kafka(spark, tmp_path / "empty", tmp_path / "o")
    with pytest.raises(InvalidArgumentError):
        rebuild_kafka(spark, tmp_path / "empty", tmp_path / "o", index_interval_bytes=-1)
    with pytest.raises(InvalidArgumentError):
        rebuild_kafka(spark, tmp_path / "empty", tmp_path / "o", max_index_bytes=0)
    (tmp_path / "x.txt").write_bytes(b"")
    with pytest.raises(InvalidArgumentError):
        rebuild_kafka(spark, tmp_path / "x.txt", tmp_path / "o")


def test_consume_queue_ext_store_is_refused_and_left_alone(spark, tmp_path: Path) -> None:
    """The Spark writer has no ConsumeQueueExt: it refuses such a store rather than dropping the ext."""
    root = tmp_path / "ext"
    cfg = StoreConfig(enable_consume_queue_ext=True, consume_queue_file_size=20 * 64,
                      commit_log_file_size=64 * 1024, background_services=False)
    with MessageStore.open(root, cfg) as s:
        for i in range(5):
            s.put("ExtTopic", f"b{i}".encode(), 0, keys=f"k{i}", tags="TagA")
    before = {p: p.read_bytes() for p in sorted(root.rglob("*")) if p.is_file()}
    assert any("consumequeue_ext" in str(p) for p in before)
    for out in (root, tmp_path / "out"):
        with pytest.raises(UnsupportedFormatError, match="ConsumeQueueExt"):
            rebuild_rocketmq(spark, root, out)
    assert {p: p.read_bytes() for p in sorted(root.rglob("*")) if p.is_file()} == before
    assert not (tmp_path / "out").exists()
