"""Benchmark of the embedded RocketMQ put paths (1 KiB bodies, KEYS + TAGS + generated UNIQ_KEY,
8 queues, async flush, background services on, as a user runs the store).

    python benchmarks/bench_put.py [--messages N] [--repeat R] [--json FILE]

Figures (best of R rounds, each on a fresh store under ``benchmarks/data/``): single ``put``,
``put_batch`` of 1000 dicts, ``put_columns`` of 1000 messages, and as the in-process baseline the
general record-by-record path (one ``MessageRecord`` through the record codec per message) that
every put took before the fast paths.  Each round ends with ``flush()`` (timed separately): the
dispatch of what the reput service had not yet done and the msync.
"""

from __future__ import annotations

import argparse
import json
import shutil
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

import numpy as np

HERE = Path(__file__).resolve().parent
DATA = HERE / "data"
sys.path.insert(0, str(HERE.parent / "src"))

from mqstore import MessageStore, StoreConfig  # noqa: E402

GOAL_SINGLE = 150_000
GOAL_BATCH = 800_000  # issue 15 (issue 5 had 600 k)
BATCH = 1000


def _round(n: int, run: Callable[[MessageStore, int], None]) -> tuple[float, float, float]:
    d = Path(tempfile.mkdtemp(dir=DATA, prefix="put-"))
    try:
        cfg = StoreConfig(hash_slot_num=500_000, index_num=2_000_000)
        with MessageStore.open(d / "store", cfg) as s:
            s.put("Warmup", b"w", keys="w")
            s.put_columns("Warmup", [b"w"] * 4, keys=["a", "b", "c", "d"], tags="T")  # JIT cache load
            s.flush()
            s.engine.commit_log.warm_ahead()
            t = time.perf_counter()
            c = time.process_time()  # every thread of the process: the reput and flush services too
            run(s, n)
            dt = time.perf_counter() - t
            dc = time.process_time() - c
            t = time.perf_counter()
            s.flush()
            flush = time.perf_counter() - t
        return n / dt, flush, n / dc
    finally:
        shutil.rmtree(d, ignore_errors=True)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--messages", type=int, default=100_000, help="messages per round (default 100,000)")
    ap.add_argument("--repeat", type=int, default=3, help="rounds per figure, best kept (default 3)")
    ap.add_argument("--json", type=Path, help="also write the figures to this JSON file")
    args = ap.parse_args()
    DATA.mkdir(exist_ok=True)
    n = args.messages - args.messages % BATCH
    rng = np.random.default_rng(5)
    body = rng.bytes(1024)
    keys = [f"order-{i} user-{i % 977}" for i in range(n)]
    qids = [i & 7 for i in range(n)]

    def single(s: MessageStore, n: int) -> None:
        put = s.put
        for i in range(n):
            put("BenchTopic", body, i & 7, keys=keys[i], tags="TagA")

    def general(s: MessageStore, n: int) -> None:
        put = s._put_records
        for i in range(n):
            put([{"topic": "BenchTopic", "body": body, "queue_id": i & 7, "keys": keys[i], "tags": "TagA"}])

    dicts = [{"topic": "BenchTopic", "body": body, "queue_id": i & 7, "keys": keys[i], "tags": "TagA"} for i in range(n)]

    def batch(s: MessageStore, n: int) -> None:
        for i in range(0, n, BATCH):
            s.put_batch(dicts[i : i + BATCH])

    def general_batch(s: MessageStore, n: int) -> None:
        for i in range(0, n, BATCH):
            s._put_records(dicts[i : i + BATCH])

    bodies = [body] * BATCH

    def columns(s: MessageStore, n: int) -> None:
        for i in range(0, n, BATCH):
            s.put_columns("BenchTopic", bodies, qids[i : i + BATCH], keys=keys[i : i + BATCH], tags="TagA")

    results: dict[str, tuple[float, float, float]] = {}
    for name, fn, count in (("general", general, min(n, 30_000)), ("single", single, n),
                            ("general_batch", general_batch, min(n, 60_000)), ("batch", batch, n),
                            ("columns", columns, n)):
        best = max((_round(count, fn) for _ in range(args.repeat)), key=lambda r: r[0])
        results[name] = best
        print(f"  {name:<14} {best[0]:>12,.0f} msgs/s   (flush after the round {best[1]:.2f} s; "
              f"{best[2]:,.0f} msgs per CPU-second of the process)", flush=True)
    g, g_b = results["general"][0], results["general_batch"][0]
    rows = [
        ("put, single (1 KiB, async flush)", results["single"][0], GOAL_SINGLE, g, "general path, one by one"),
        ("put_batch, 1000 dicts per call", results["batch"][0], GOAL_BATCH, g_b, "general path, 1000 per call"),
        ("put_columns, 1000 per call", results["columns"][0], GOAL_BATCH, g_b, "general path, 1000 per call"),
    ]
    print()
    print(f"{'figure':<36} {'msgs/s':>12} {'goal':>9} {'x goal':>7} {'x baseline':>11}  baseline")
    for name, v, goal, base, what in rows:
        print(f"{name:<36} {v:>12,.0f} {goal:>9,} {v / goal:>7.2f} {v / base:>11.2f}  {what} ({base:,.0f}/s)")
    if args.json:
        args.json.write_text(json.dumps({k: {"msgs_per_s": v[0], "flush_s": v[1], "msgs_per_cpu_s": v[2]}
                                            for k, v in results.items()}, indent=1))


if __name__ == "__main__":
    main()
