"""Benchmark of the sparse time index (issue 17 item 2): time lookups per second with and without
the ``consumequeue_timeindex/`` sidecars, and the CommitLog records and pages one lookup touches.

    python benchmarks/bench_rocketmq_timeindex.py [--messages 1000000] [--queues 4] [--lookups 4000]

A store is generated under ``/tmp/r17time-bench-*`` (deleted at the end): ``--queues`` queues
interleaved in the CommitLog (a queue's consecutive records are on different pages), ~10
messages per millisecond (long equal-millisecond runs), ConsumeQueue files of 100,000 units (file
boundaries inside every queue), the time index written by the dispatcher (interval 2) and, for
the interval comparison, by ``rebuild-index`` with interval 16.

Cold data: the page cache cannot be dropped in this container (``/proc/sys/vm/drop_caches`` is
not writable), so the cost on cold data is given as the distinct CommitLog pages (4 KiB) a lookup
touches: each is one random read when the CommitLog is not cached.  The ConsumeQueue and the
sidecars are small and read sequentially or kept in memory; their pages are not counted.
Ratios are against the fallback search (no sidecar) measured in the same run.
"""

from __future__ import annotations

import argparse
import math
import random
import shutil
import statistics
import tempfile
import time
from pathlib import Path

from mqstore import MessageStore, StoreConfig
from mqstore.storage.rocketmq.rebuild import rebuild_indexes
from mqstore.storage.rocketmq.timeindex import QueueTimeIndex, cq_offset_for_time, queue_dir

PAGE = 4096


class Probe:
    """The CommitLog's store-time read, counting records and the pages their bytes span."""

    def __init__(self, real) -> None:
        self.real = real
        self.records = 0
        self.pages: set[int] = set()

    def __call__(self, offset: int, size: int) -> int:
        self.records += 1
        # pickup reads SYSFLAG (offset+36..40) and STORETIMESTAMP (offset+56..64, IPv4 born host)
        self.pages.update({(offset + 36) // PAGE, (offset + 63) // PAGE})
        return self.real(offset, size)


def build(root: Path, messages: int, queues: int) -> tuple[StoreConfig, int, int]:
    now = [1_700_000_000_000]
    cfg = StoreConfig(consume_queue_file_size=100_000 * 20, background_services=False, enable_time_index=True,
                      message_index_enable=False, clock=lambda: now[0])
    t0 = time.perf_counter()
    batch = 1000
    with MessageStore.open(root, cfg) as s:
        for start in range(0, messages, batch):
            now[0] += 100  # ~10 messages per ms inside a batch of 1000 stamped at one time: runs of 1000
            s.put_batch([{"topic": "Bench", "body": b"x" * 180, "queue_id": i % queues}
                         for i in range(start, min(messages, start + batch))])
    first, last = 1_700_000_000_100, now[0]
    print(f"built {messages:,} messages in {queues} queues in {time.perf_counter() - t0:.1f} s "
          f"(CommitLog {sum(p.stat().st_size for p in (root / 'commitlog').iterdir()) / 2**20:.0f} MiB)")
    return cfg, first, last


def run(store: MessageStore, queues: int, targets: list[int], index_of, semantics: str = "exact") -> dict:
    eng = store.engine
    cl = eng.commit_log
    probe = Probe(cl.pickup_store_timestamp)
    recs: list[int] = []
    pages: list[int] = []
    t0 = time.perf_counter()
    n = 0
    for i, ts in enumerate(targets):
        q = i % queues
        cq = eng.consume_queue("Bench", q)
        for boundary in ("lower", "upper"):
            probe.records, probe.pages = 0, set()
            if semantics == "broker":
                cq.offset_in_queue_by_time(ts, boundary, probe, cl.min_offset)
            else:
                cq_offset_for_time(cq, index_of(q), ts, boundary, probe)
            recs.append(probe.records)
            pages.append(len(probe.pages))
            n += 1
    dt = time.perf_counter() - t0
    return {"rate": n / dt, "records": statistics.mean(recs), "records_max": max(recs),
            "pages": statistics.mean(pages), "pages_max": max(pages)}


def write_cost(root: Path, puts: int) -> None:
    """What keeping the sidecars costs a writer: single ``put`` with the reput thread on (the live
    store), and ``put_batch`` of 1000 followed by a read (dispatch in the caller), off vs on."""
    rates: dict[tuple[str, bool], list[float]] = {}
    for rep in range(3):
        for on in (False, True):
            d = root / f"w{rep}{int(on)}"
            cfg = StoreConfig(commit_log_file_size=256 << 20, enable_time_index=on, message_index_enable=False)
            with MessageStore.open(d, cfg) as s:
                t = time.perf_counter()
                for i in range(puts):
                    s.put("W", b"x" * 180, queue_id=i % 4)
                s.flush()
                rates.setdefault(("put, reput thread", on), []).append(puts / (time.perf_counter() - t))
                t = time.perf_counter()
                for _k in range(puts // 1000):
                    s.put_batch([{"topic": "W", "body": b"x" * 180, "queue_id": i % 4} for i in range(1000)])
                    s.max_offset("W", 0)
                rates.setdefault(("put_batch(1000) + dispatch", on), []).append(
                    (puts // 1000) * 1000 / (time.perf_counter() - t))
            shutil.rmtree(d, ignore_errors=True)
    print(f"\nwrite cost ({puts:,} messages, best of 3): {'path':28} {'off msg/s':>10} {'on msg/s':>10} {'ratio':>6}")
    for path in ("put, reput thread", "put_batch(1000) + dispatch"):
        off, on = max(rates[(path, False)]), max(rates[(path, True)])
        print(f"{'':40} {path:28} {off:10,.0f} {on:10,.0f} {on / off:5.2f}x")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--messages", type=int, default=1_000_000)
    ap.add_argument("--queues", type=int, default=4)
    ap.add_argument("--lookups", type=int, default=4000)
    ap.add_argument("--puts", type=int, default=50_000, help="messages of the write-cost runs (0: skip)")
    args = ap.parse_args()
    root = Path(tempfile.mkdtemp(prefix="r17time-bench-"))
    try:
        cfg, first, last = build(root / "store", args.messages, args.queues)
        rng = random.Random(17)
        targets = [rng.randint(first - 50, last + 50) for _ in range(args.lookups)]
        out16 = root / "i16"
        cfg16 = StoreConfig(consume_queue_file_size=cfg.consume_queue_file_size, enable_time_index=True,
                            time_index_interval=16, message_index_enable=False, background_services=False)
        rebuild_indexes(root / "store", out16, config=cfg16)
        with MessageStore.open(root / "store", cfg, read_only=True) as s:
            size = cfg.mapped_file_size_consume_queue

            def loaded(base: Path):
                cache: dict[int, QueueTimeIndex] = {}

                def get(q: int) -> QueueTimeIndex:
                    if q not in cache:
                        cache[q] = QueueTimeIndex(queue_dir(base, "Bench", q), size, read_only=True)
                        cache[q].load()
                    return cache[q]

                return get

            # correctness first: every variant gives the same exact answers
            for ts in targets[:200]:
                for b in ("lower", "upper"):
                    cq = s.engine.consume_queue("Bench", 0)
                    a = cq_offset_for_time(cq, None, ts, b, s.engine.commit_log.pickup_store_timestamp)
                    assert a == cq_offset_for_time(cq, loaded(root / "store")(0), ts, b,
                                                   s.engine.commit_log.pickup_store_timestamp)
            results = {
                "no sidecar (binary search)": run(s, args.queues, targets, lambda q: None),
                "broker getOffsetInQueueByTime": run(s, args.queues, targets, None, "broker"),
                "sidecar, interval 2 (default)": run(s, args.queues, targets, loaded(root / "store")),
                "sidecar, interval 16": run(s, args.queues, targets, loaded(out16)),
            }
        base = results["no sidecar (binary search)"]
        per_queue = args.messages // args.queues
        print(f"\n{args.lookups * 2:,} lookups (lower + upper) over {args.queues} queues of {per_queue:,} units "
              f"(log2 = {math.log2(per_queue):.1f})")
        print(f"{'variant':34} {'lookups/s':>10} {'ratio':>7} {'records/lookup':>15} {'max':>4} "
              f"{'pages/lookup':>13} {'max':>4} {'pages ratio':>11}")
        for name, r in results.items():
            print(f"{name:34} {r['rate']:10,.0f} {r['rate'] / base['rate']:6.1f}x {r['records']:15.2f} "
                  f"{r['records_max']:4d} {r['pages']:13.2f} {r['pages_max']:4d} "
                  f"{base['pages'] / max(r['pages'], 1e-9):10.1f}x")
        sidecar_bytes = sum(p.stat().st_size for p in (root / "store" / "consumequeue_timeindex").rglob("*") if p.is_file())
        cq_bytes = sum(p.stat().st_size for p in (root / "store" / "consumequeue").rglob("*") if p.is_file())
        s16 = sum(p.stat().st_size for p in (out16 / "consumequeue_timeindex").rglob("*") if p.is_file())
        print(f"\nsidecar size: interval 2 {sidecar_bytes / 2**20:.1f} MiB, interval 16 {s16 / 2**20:.2f} MiB "
              f"(ConsumeQueue files {cq_bytes / 2**20:.1f} MiB, preallocated)")
        shutil.rmtree(out16, ignore_errors=True)
        if args.puts:
            write_cost(root, args.puts)
    finally:
        shutil.rmtree(root, ignore_errors=True)


if __name__ == "__main__":
    main()
