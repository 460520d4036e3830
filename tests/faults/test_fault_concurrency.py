"""Concurrency: one writer and N readers (threads in the writer's process, and processes that
open the store read-only while the writer holds the lock).  Readers never see a partial record,
queue offsets are monotonic and gap-free, and nothing deadlocks (the run ends when the writer has
written everything and every reader has seen it).  ``MQSTORE_LOAD_MESSAGES`` scales it up."""

from __future__ import annotations

import resource
import subprocess
import sys
import threading
from pathlib import Path

from faults_support import env_int

from mqstore import MessageStore, StoreConfig
from mqstore.errors import MqStoreError
from mqstore.kafka import LogConfig, PartitionLog, SimpleRecord

N = env_int("MQSTORE_LOAD_MESSAGES", 1500)


def _cfg(**kw: object) -> StoreConfig:
    base = dict(commit_log_file_size=64 * 1024, consume_queue_file_size=400, hash_slot_num=32, index_num=128,
                flush_interval_commit_log_ms=5, flush_interval_consume_queue_ms=5)
    base.update(kw)
    return StoreConfig(**base)  # type: ignore[arg-type]


def _body(i: int) -> bytes:
    return b"%d:" % i + b"x" * (i % 300)


READER = """
import sys
from mqstore import MessageStore, StoreConfig
path, n = sys.argv[1], int(sys.argv[2])
cfg = StoreConfig(commit_log_file_size=64 * 1024, consume_queue_file_size=400, hash_slot_num=32, index_num=128,
                  background_services=False)
seen = 0
rounds = 0
while seen < n:
    rounds += 1
    with MessageStore.open(path, cfg, read_only=True) as s:
        nxt = 0
        while True:
            got = s.get("T", 0, nxt, 64) if nxt <= s.max_offset("T", 0) - 1 else []
            if not got:
                break
            for m in got:
                i = int(m.body.split(b":")[0])
                assert m.queue_offset == nxt and i == nxt, (m.queue_offset, nxt, i)
                assert m.body == b"%d:" % i + b"x" * (i % 300)
                nxt += 1
        assert nxt >= seen, (nxt, seen)
        seen = nxt
print("ok", seen, rounds)
"""


def test_one_writer_many_readers_rocketmq(tmp_path: Path) -> None:
    path = tmp_path / "s"
    store = MessageStore.open(path, _cfg())
    procs = [subprocess.Popen([sys.executable, "-c", READER, str(path), str(N)], stdout=subprocess.PIPE,
                              stderr=subprocess.PIPE, text=True) for _ in range(2)]
    errors: list[str] = []
    lag: list[int] = []

    def reader(k: int) -> None:
        nxt = 0
        try:
            while nxt < N:
                for m in store.get("T", 0, nxt, 32) if nxt < store.max_offset("T", 0) else []:
                    if m.queue_offset != nxt or m.body != _body(nxt):
                        errors.append(f"reader {k}: queue offset {m.queue_offset} at {nxt}")
                        return
                    nxt += 1
        except MqStoreError as exc:
            errors.append(f"reader {k}: {exc}")

    threads = [threading.Thread(target=reader, args=(k,)) for k in range(3)]
    for t in threads:
        t.start()
    eng = store.engine
    for i in range(N):
        store.put("T", _body(i), keys=[f"k{i}"])
        lag.append(eng.commit_log.max_offset - eng.reput_from_offset)
    for t in threads:
        t.join()
    outs = [p.communicate() for p in procs]
    store.close()
    assert errors == []
    for p, (out, err) in zip(procs, outs, strict=True):
        assert p.returncode == 0 and out.startswith("ok"), err[-2000:]
    size = sum(f.stat().st_size for f in path.rglob("*") if f.is_file())
    rss_kb = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    print(f"\nrocketmq: {N} messages, dispatcher lag max {max(lag)} B, store {size} B, peak RSS {rss_kb} KiB")


def test_one_writer_reader_threads_kafka(tmp_path: Path) -> None:
    d = tmp_path / "t-0"
    log = PartitionLog.open(d, LogConfig(segment_bytes=32 * 1024, index_interval_bytes=512,
                                         flush_interval_messages=50))
    errors: list[str] = []
    lock = threading.Lock()  # PartitionLog is not thread-safe: readers and the writer take turns

    def reader(k: int) -> None:
        nxt = 0
        while nxt < N:
            with lock:
                end = log.log_end_offset
                try:
                    recs = list(log.iter_records(nxt, min(end, nxt + 50)))
                except MqStoreError as exc:
                    errors.append(f"reader {k}: {exc}")
                    return
            for r in recs:
                if r.offset != nxt or r.value != _body(nxt):
                    errors.append(f"reader {k}: offset {r.offset} at {nxt}")
                    return
                nxt += 1

    threads = [threading.Thread(target=reader, args=(k,)) for k in range(3)]
    for t in threads:
        t.start()
    for i in range(N):
        with lock:
            log.append_records([SimpleRecord(_body(i), b"k%d" % i, timestamp=1000 + i)])
    for t in threads:
        t.join()
    log.close()
    assert errors == []


def test_load_campaign_bounded() -> None:
    """``tools/load_campaign.py`` bounded by a message count: one writer, reader threads and a
    read-only reader process per layout; no partial record, no offset violation, every key found,
    every reader reaches the end (no deadlock)."""
    import tempfile

    from faults_support import load_tool

    load = load_tool("load_campaign")
    n = env_int("MQSTORE_LOAD_CAMPAIGN_MESSAGES", 1200)
    with tempfile.TemporaryDirectory(prefix="mqstore-load-") as tmp:
        for run, name in ((load.run_rocketmq, "store"), (load.run_kafka, "t-0")):
            r = run(Path(tmp) / name, messages=n, threads=2, procs=1)
            print("\n" + load.summary(r))
            assert r.ok(), r.errors
            assert r.messages_written >= n and r.partial_records == 0 and r.offset_violations == 0
            assert r.reads == 3 * r.messages_written  # two threads and one process read everything
            assert r.writer_rss_anon_peak_kib > 0 and r.store_bytes > 0 and r.data_bytes > 0
            if r.layout == "rocketmq":
                assert r.lag_samples > 0 and r.key_queries > 0 and r.key_misses == 0
