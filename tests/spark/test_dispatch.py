"""The streaming dispatch: a Structured Streaming query keeps a live store's ConsumeQueues and
IndexFiles byte-identical to a local rebuild, across a stop/restart and a replayed micro-batch."""

from __future__ import annotations

import hashlib
import random
import threading
from pathlib import Path

import pytest

from mqstore.api.rocketmq import MessageStore, StoreConfig
from mqstore.errors import CorruptIndexError, InvalidArgumentError, StoreNotFoundError
from mqstore.spark.dispatch import (
    DispatchRange,
    _read_range,
    apply_dispatch,
    arrow_to_dispatch_batch,
    run_dispatch_once,
    start_dispatch,
)
from mqstore.storage.rocketmq.rebuild import compare_trees, rebuild_indexes, tree_files
from mqstore.storage.rocketmq.tail import complete_end

SEG = 64 * 1024
GEOMETRY = dict(commit_log_file_size=SEG, consume_queue_file_size=400, hash_slot_num=64, index_num=300)
CFG = StoreConfig(**GEOMETRY)


def writer_config() -> StoreConfig:
    return StoreConfig(**GEOMETRY, dispatch_enabled=False)


def put_some(store: MessageStore, rng: random.Random, start: int, n: int) -> None:
    batch = []
    for i in range(start, start + n):
        topic = rng.choice(["orders", "payments", "audit"])
        keys = [f"order-{i}", f"user-{i % 13}"] if i % 5 else None  # some messages without keys
        batch.append(dict(topic=topic, queue_id=i % 3, body=b"m%d " % i * rng.randint(1, 40), keys=keys,
                          tags=rng.choice(["TagA", "TagB", None])))
    store.put_batch(batch)


def digest(root: Path) -> dict[str, str]:
    return {k: hashlib.sha256(p.read_bytes()).hexdigest() for k, p in tree_files(root).items()}


def assert_like_rebuild(root: Path, tmp: Path) -> None:
    out = tmp / "rebuilt"
    rebuild_indexes(root, out, config=StoreConfig(**GEOMETRY))
    assert tree_files(out), "the rebuild produced nothing"
    assert compare_trees(root, out) == []


def test_stream_tails_live_writer_restart_and_replay(spark, tmp_path: Path) -> None:
    root = tmp_path / "store"
    ckpt = tmp_path / "ckpt"
    rng = random.Random(11)
    store = MessageStore.open(root, writer_config())
    put_some(store, rng, 0, 300)
    total = [300]
    stop = threading.Event()
    failures: list[BaseException] = []

    def appender() -> None:
        try:
            while not stop.is_set() and total[0] < 2400:
                put_some(store, rng, total[0], 60)
                total[0] += 60
                stop.wait(0.05)
        except BaseException as exc:  # surfaced below
            failures.append(exc)

    thread = threading.Thread(target=appender)
    thread.start()
    try:
        q = start_dispatch(spark, root, ckpt, trigger_interval="200 milliseconds", max_bytes_per_trigger=40_000,
                            config=CFG)
        try:
            q.processAllAvailable()
            q.processAllAvailable()
        finally:
            q.stop()  # stopped mid-way: the appender is still running
        first_run = [p for p in q.recentProgress if p["numInputRows"]]
        assert first_run, "the first run dispatched nothing"
        # restart from the same checkpoint while the writer keeps appending
        q = start_dispatch(spark, root, ckpt, trigger_interval="200 milliseconds", max_bytes_per_trigger=40_000,
                            config=CFG)
        try:
            thread.join()
            assert not failures, failures
            store.close()
            q.processAllAvailable()
        finally:
            q.stop()
        assert q.exception() is None
    finally:
        stop.set()
        thread.join()
        store.close()
    assert_like_rebuild(root, tmp_path)
    assert len(list((root / "commitlog").iterdir())) > 3, "the test must roll CommitLog segments"
    assert len(list((root / "index").iterdir())) > 3, "the test must roll index files"
    with MessageStore.open(root, StoreConfig(**GEOMETRY), read_only=True) as ro:
        got = ro.query_by_key("payments", "user-7")
        assert got and all("user-7" in m.keys for m in got)

    # A replayed micro-batch writes nothing twice: drop the last commit marker so that Spark
    # runs the last batch again.
    before = digest(root)
    commits = sorted((ckpt / "commits").glob("[0-9]*"), key=lambda p: int(p.name))
    last = commits[-1]
    last.unlink()
    for crc in ckpt.joinpath("commits").glob(f".{last.name}.crc"):
        crc.unlink()
    run = run_dispatch_once(spark, root, ckpt, config=CFG)
    assert run.messages > 0, "Spark did not replay the batch"
    assert (ckpt / "commits" / last.name).exists()
    assert digest(root) == before
    assert_like_rebuild(root, tmp_path / "again")


def test_available_now_runs_and_new_messages(spark, tmp_path: Path) -> None:
    root = tmp_path / "store"
    rng = random.Random(3)
    with MessageStore.open(root, writer_config()) as store:
        put_some(store, rng, 0, 500)
    run = run_dispatch_once(spark, root, tmp_path / "ckpt", max_bytes_per_trigger=30_000, config=CFG)
    assert run.messages == 500 and run.batches > 1
    assert_like_rebuild(root, tmp_path / "r1")
    with MessageStore.open(root, writer_config()) as store:  # the writer restarts: queue offsets continue
        put_some(store, rng, 500, 200)
    run = run_dispatch_once(spark, root, tmp_path / "ckpt", config=CFG)
    assert run.messages == 200
    assert_like_rebuild(root, tmp_path / "r2")
    assert run_dispatch_once(spark, root, tmp_path / "ckpt", config=CFG).messages == 0


def test_new_checkpoint_on_dispatched_store_starts_at_its_end(spark, tmp_path: Path) -> None:
    root = tmp_path / "store"
    rng = random.Random(5)
    with MessageStore.open(root, StoreConfig(**GEOMETRY)) as store:  # dispatched locally
        put_some(store, rng, 0, 300)
    with MessageStore.open(root, writer_config()) as store:
        put_some(store, rng, 300, 100)
    run = run_dispatch_once(spark, root, tmp_path / "ckpt", config=CFG)
    assert 100 <= run.messages <= 101  # the last indexed message may be looked at again
    assert_like_rebuild(root, tmp_path / "r")


def test_complete_end_never_passes_a_partial_record(tmp_path: Path) -> None:
    root = tmp_path / "store"
    with MessageStore.open(root, writer_config()) as store:
        put_some(store, random.Random(1), 0, 20)
    seg = root / "commitlog" / f"{0:020d}"
    end = complete_end(root, SEG, 0)
    assert end > 0
    data = bytearray(seg.read_bytes())
    # cut the tail of the last record: its header stays, its body/properties are zeroed
    from mqstore.kernels.rocketmq.framing import record_positions

    positions, sizes, _, _ = record_positions(bytes(data), 0, SEG)
    p, s = int(positions[-1]), int(sizes[-1])
    data[p + s - 10 : p + s] = bytes(10)
    seg.write_bytes(bytes(data))
    assert complete_end(root, SEG, 0) == p
    assert complete_end(root, SEG, 0, max_bytes=1) == int(sizes[0])  # at least one record
    assert complete_end(root, SEG, p) == p


def test_apply_refuses_a_foreign_consumequeue(tmp_path: Path) -> None:
    a, b = tmp_path / "a", tmp_path / "b"
    for root, seed in ((a, 1), (b, 2)):
        with MessageStore.open(root, writer_config()) as store:
            put_some(store, random.Random(seed), 0, 50)
    cfg = StoreConfig(**GEOMETRY)

    def batches(root: Path) -> list:
        end = complete_end(root, SEG, 0)
        return [arrow_to_dispatch_batch(rb) for rb in _read_range(DispatchRange(str(root), SEG, 0, 0, end))]

    apply_dispatch(a, batches(a), cfg)
    stats = apply_dispatch(a, batches(a), cfg)
    assert stats.units_written == 0 and stats.keys_written == 0 and stats.units_skipped == 50
    import shutil

    shutil.rmtree(b / "consumequeue", ignore_errors=True)
    shutil.copytree(a / "consumequeue", b / "consumequeue")
    with pytest.raises(CorruptIndexError):
        apply_dispatch(b, batches(b), cfg)


def test_bad_arguments(spark, tmp_path: Path) -> None:
    with pytest.raises(StoreNotFoundError):
        start_dispatch(spark, tmp_path / "missing", tmp_path / "ckpt")
    (tmp_path / "s" / "commitlog").mkdir(parents=True)
    with pytest.raises(InvalidArgumentError):
        start_dispatch(spark, tmp_path / "s", tmp_path / "ckpt", max_bytes_per_trigger=0)
