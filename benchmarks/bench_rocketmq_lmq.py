"""Benchmark of LMQ / multi-dispatch (issue 20 item 2): what the multi-dispatch rule costs the
dispatch of a store without LMQ messages, what a store whose messages name LMQ queues costs to
dispatch and to put, as ratios against a baseline run in the same process.

    python benchmarks/bench_rocketmq_lmq.py [--messages N] [--dir DIR]

Figures (best of 3):
* rebuild-index of a plain store, rule on / rule off (the LMQ check in the scan and dispatch);
* rebuild-index of a store whose every message names 2 LMQ queues / the plain store (3 units
  per record instead of 1);
* put_batch of messages naming 2 LMQ queues / plain messages with the same user property count.
"""

from __future__ import annotations

import argparse
import shutil
import tempfile
import time
from pathlib import Path
from typing import Any

from mqstore import MessageStore, StoreConfig
from mqstore.storage.rocketmq.rebuild import rebuild_indexes


def rebuild_time(store: Path, out: Path, cfg: StoreConfig, repeat: int = 3) -> float:
    best = float("inf")
    for _ in range(repeat):
        shutil.rmtree(out, ignore_errors=True)
        t = time.perf_counter()
        rebuild_indexes(store, out, config=cfg)
        best = min(best, time.perf_counter() - t)
    shutil.rmtree(out, ignore_errors=True)
    return best


def config(lmq: bool) -> StoreConfig:
    return StoreConfig(commit_log_file_size=64 << 20, background_services=False, enable_lmq=lmq,
                       enable_multi_dispatch=lmq, hash_slot_num=500_000, index_num=2_000_000)


def messages(n: int, lmq: bool, start: int = 0) -> list[dict[str, Any]]:
    key = "INNER_MULTI_DISPATCH" if lmq else "X_DISPATCH"
    return [dict(topic=f"T{i % 4}", body=b"x" * 200, queue_id=i % 8, tags=f"t{i % 5}", keys=[f"k{i}"],
                 properties={key: f"%LMQ%g{i % 50},%LMQ%u{i % 20}"}) for i in range(start, start + n)]


def fill(root: Path, n: int, lmq: bool) -> float:
    if root.exists():
        shutil.rmtree(root)
    t = time.perf_counter()
    with MessageStore.open(root, config(lmq)) as s:
        for a in range(0, n, 1000):
            s.put_batch(messages(min(1000, n - a), lmq, a))
    return time.perf_counter() - t


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--messages", type=int, default=100_000)
    ap.add_argument("--dir", default=None)
    args = ap.parse_args()
    base = Path(args.dir or tempfile.mkdtemp(prefix="lmq20-bench-"))
    try:
        n = args.messages
        put_plain = min(fill(base / "plain", n, False) for _ in range(2))
        put_lmq = min(fill(base / "lmq", n, True) for _ in range(2))
        print(f"put_batch {n} messages: plain {put_plain:.2f} s, naming 2 LMQ queues {put_lmq:.2f} s "
              f"(ratio {put_lmq / put_plain:.2f})")
        off = rebuild_time(base / "plain", base / "out", config(False))
        on = rebuild_time(base / "plain", base / "out", config(True))
        print(f"rebuild-index, plain store: rule off {off:.2f} s, rule on {on:.2f} s (ratio {on / off:.2f})")
        lm = rebuild_time(base / "lmq", base / "out", config(True))
        print(f"rebuild-index, every record in 2 LMQ queues: {lm:.2f} s, {lm / off:.2f}x the plain store "
              f"({3 * n} units instead of {n})")
    finally:
        shutil.rmtree(base, ignore_errors=True)


if __name__ == "__main__":
    main()
