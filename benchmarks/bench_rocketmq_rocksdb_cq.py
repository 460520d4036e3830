"""Benchmark of the RocksDB ConsumeQueue reader against the file ConsumeQueue of the same store
(the baseline, run in the same process).  One command:

    python benchmarks/bench_rocketmq_rocksdb_cq.py [--messages N] [--queues Q]

A store of N messages over Q queues is written with MessageStore, copied, and the copy's
ConsumeQueue converted to the RocksDB layout by the test writer (tests/rocketmq/rocksdb_support.py).
Figures (seconds, and RocksDB / file ratios): read-only open, a consumer's pass over every queue in
pulls of 32 units, 2000 random single-unit reads, 2000 time searches, ``verify``.  Data goes to
/tmp/rocks20-bench-* and is deleted at the end.
"""

from __future__ import annotations

import argparse
import random
import shutil
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))

from mqstore.api.rocketmq import MessageStore
from mqstore.storage.rocketmq.layout import resolve_config
from mqstore.storage.rocketmq.verify import verify_store
from rocketmq.rocksdb_support import write_rocksdb_consumequeue

T0 = 1_700_000_000_000


def timed(fn: Callable[[], Any]) -> float:
    t = time.perf_counter()
    fn()
    return time.perf_counter() - t


def build(root: Path, n: int, queues: int) -> None:
    ticks = iter(range(T0, T0 + 10 * n))
    with MessageStore.open(root, {"background_services": False, "commit_log_file_size": 64 << 20,
                                  "clock": lambda: next(ticks)}) as s:
        step = 10_000
        for lo in range(0, n, step):
            k = min(step, n - lo)
            s.put_columns("bench", [b"x" * 64] * k, queue_ids=[i % queues for i in range(lo, lo + k)],
                          tags=[f"t{i % 7}" for i in range(lo, lo + k)])
        s.dispatch()


def measure(root: Path, queues: int, seed: int) -> dict[str, float]:
    out: dict[str, float] = {}
    t = time.perf_counter()
    s = MessageStore.open(root, read_only=True)
    out["open"] = time.perf_counter() - t
    try:
        eng = s.engine

        def consume() -> None:
            for q in range(queues):
                cq = eng.consume_queue("bench", q)
                off = cq.min_offset_in_queue
                while off < cq.max_offset_in_queue:
                    off += len(cq.get_units(off, 32))

        out["consume pulls of 32"] = timed(consume)
        rnd = random.Random(seed)
        picks = [(rnd.randrange(queues), rnd.random()) for _ in range(2000)]

        def point() -> None:
            for q, f in picks:
                cq = eng.consume_queue("bench", q)
                cq.get_unit(int(f * cq.max_offset_in_queue))

        out["2000 unit reads"] = timed(point)
        span = eng.commit_log.max_offset

        def times() -> None:
            for q, f in picks:
                s.offset_for_time("bench", q, T0 + int(f * span / 100), "lower")

        out["2000 time searches"] = timed(times)
    finally:
        s.close()
    out["verify"] = timed(lambda: verify_store(root, resolve_config(root)))
    return out


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--messages", type=int, default=200_000)
    ap.add_argument("--queues", type=int, default=8)
    args = ap.parse_args()
    base = Path(tempfile.mkdtemp(prefix="rocks20-bench-"))
    try:
        files, rocks = base / "files", base / "rocks"
        build(files, args.messages, args.queues)
        shutil.copytree(files, rocks)
        t = timed(lambda: write_rocksdb_consumequeue(rocks, batch_rows=256))
        print(f"{args.messages} messages, {args.queues} queues; RocksDB ConsumeQueue written by the test "
              f"writer in {t:.2f} s")
        a = measure(files, args.queues, 1)
        b = measure(rocks, args.queues, 1)
        print(f"{'figure':<22} {'file CQ s':>10} {'RocksDB s':>10} {'RocksDB/file':>13}")
        for k in a:
            print(f"{k:<22} {a[k]:>10.3f} {b[k]:>10.3f} {b[k] / a[k] if a[k] else float('nan'):>13.2f}")
    finally:
        shutil.rmtree(base, ignore_errors=True)


if __name__ == "__main__":
    main()
