"""The store report against ``verify`` on the same data (issue 16: report ≤ 2 × verify).

    python benchmarks/bench_report.py [--mb 256] [--only rocketmq|kafka]

RocketMQ: a store written through ``put_columns`` (bodies of 100-1000 bytes, two keys and tags
per message, 8 topics x 4 queues), generated once under ``benchmarks/data/``.  Kafka: one partition of 16 × 1 KiB-record batches (``bench_kafka``).

Timed in one process, page cache warm (one untimed ``verify`` first), best of ``--reps``:

* ``verify``: what ``mqstore rocketmq|kafka verify`` runs;
* ``report``: what ``mqstore ... report --html`` runs: the verify summary, the figures and the
  HTML page (matplotlib, every plot) — the ratio asked for;
* ``figures``: the figures alone (the vectorised scans), for the record.
"""

from __future__ import annotations

import argparse
import shutil
import sys
import time
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

DATA = HERE / "data"


def _best(fn: Any, reps: int) -> tuple[float, Any]:
    best = float("inf")
    out = None
    for _ in range(reps):
        t = time.perf_counter()
        out = fn()
        best = min(best, time.perf_counter() - t)
    return best, out


def rocketmq_store(mb: int) -> tuple[Path, Any]:
    """A consistent store of ``mb`` MiB written through ``put_columns`` (bodies of 100-1000 bytes,
    two keys, tags, generated unique keys; 8 topics x 4 queues; 1 GiB segments), so that ``verify``
    finds no problem (the raw CommitLog of ``bench_rocketmq_store`` has no ConsumeQueues)."""
    import numpy as np

    from mqstore import MessageStore, StoreConfig
    from mqstore.storage.rocketmq.layout import resolve_config

    root = DATA / f"report-rocketmq-{mb}m"
    marker = root / "ready"
    if not marker.exists():
        shutil.rmtree(root, ignore_errors=True)
        rng = np.random.default_rng(16)
        pool = rng.integers(0, 256, 1 << 20, dtype=np.uint8).tobytes()
        topics = [f"topic-{i}" for i in range(8)]
        target = mb << 20
        written = 0
        i = 0
        t = time.perf_counter()
        with MessageStore.open(root, StoreConfig(background_services=False)) as s:
            while written < target:
                n = 20_000
                lens = rng.integers(100, 1001, n)
                starts = rng.integers(0, len(pool) - 1000, n)
                bodies = [pool[a : a + b] for a, b in zip(starts.tolist(), lens.tolist(), strict=True)]
                keys = [[f"order-{j}", f"user-{j % 9973}"] for j in range(i, i + n)]
                for k, topic in enumerate(topics):
                    sel = slice(k, n, len(topics))
                    res = s.put_columns(topic, bodies[sel], rng.integers(0, 4, len(bodies[sel])), keys=keys[sel],
                                        tags="TagA" if k % 2 else "TagB")
                    written += int(np.asarray(res.size).sum())
                i += n
            s.flush()
        marker.write_text(str(i))
        print(f"generated a {mb} MiB store with {i:,} messages in {time.perf_counter() - t:.1f} s")
    return root, resolve_config(root, None, background_services=False)


def kafka_partition(mb: int) -> Path:
    from bench_kafka import MB, make_batches
    from mqstore.storage.kafka.log import PartitionLog
    from mqstore.storage.kafka.segment import LogConfig

    part = DATA / f"report-kafka-{mb}m" / "bench-0"
    marker = part.parent / "ready"
    if not marker.exists():
        shutil.rmtree(part.parent, ignore_errors=True)
        template = make_batches(256)
        n = mb * MB // len(template[0])
        with PartitionLog.open(part, LogConfig(segment_bytes=2**31 - 1)) as log:
            for i in range(n):
                log.append(template[i % 256], assign_offsets=True)
        marker.write_text("1")
    return part


def bench_rocketmq(mb: int, reps: int) -> list[tuple[str, str, str]]:
    from mqstore.cli.report_html import render_figures, render_html
    from mqstore.storage.rocketmq.report import report_with_verify, rocketmq_report
    from mqstore.storage.rocketmq.verify import verify_store

    root, cfg = rocketmq_store(mb)
    verify_store(root, cfg)  # warm: page cache, compiled kernels
    rocketmq_report(root, cfg)
    t_verify, rep = _best(lambda: verify_store(root, cfg), reps)
    assert rep.ok, rep.problems[:3]
    t_fig, fig = _best(lambda: rocketmq_report(root, cfg), reps)

    def full() -> str:  # what `report --html` runs: figures and plots beside the verification, then the page
        return render_html(*report_with_verify(root, cfg, then=render_figures))

    t_report, _ = _best(full, reps)
    n = fig["commitLog"]["messages"]
    return [
        (f"rocketmq verify, {mb} MiB, {n:,} msgs", f"{t_verify:.2f} s", "1.00x (baseline)"),
        ("rocketmq report --html (verify + figures + page)", f"{t_report:.2f} s", f"{t_report / t_verify:.2f}x verify"),
        ("rocketmq figures alone", f"{t_fig:.2f} s", f"{t_fig / t_verify:.2f}x verify"),
    ]


def bench_kafka(mb: int, reps: int) -> list[tuple[str, str, str]]:
    from mqstore.cli.report_html import render_html
    from mqstore.storage.kafka.report import kafka_report, verify_summary
    from mqstore.storage.kafka.tools import verify_path

    part = kafka_partition(mb)
    verify_path(part)
    kafka_report(part)
    t_verify, rep = _best(lambda: verify_path(part), reps)
    assert rep.ok, rep.problems[:3]
    t_fig, fig = _best(lambda: kafka_report(part), reps)
    t_report, _ = _best(lambda: render_html(kafka_report(part), verify_summary(part)), reps)
    return [
        (f"kafka verify, {mb} MiB, {fig['partitions'][0]['batches']:,} batches", f"{t_verify:.2f} s", "1.00x (baseline)"),
        ("kafka report --html (verify + figures + page)", f"{t_report:.2f} s", f"{t_report / t_verify:.2f}x verify"),
        ("kafka figures alone", f"{t_fig:.2f} s", f"{t_fig / t_verify:.2f}x verify"),
    ]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--mb", type=int, default=256, help="store / partition size (MiB)")
    ap.add_argument("--reps", type=int, default=2, help="timed runs of each figure (best is kept)")
    ap.add_argument("--only", choices=["rocketmq", "kafka"], default=None)
    args = ap.parse_args()
    rows: list[tuple[str, str, str]] = []
    if args.only in (None, "rocketmq"):
        rows += bench_rocketmq(args.mb, args.reps)
    if args.only in (None, "kafka"):
        rows += bench_kafka(args.mb, args.reps)
    w = max(len(r[0]) for r in rows)
    for name, t, ratio in rows:
        print(f"{name:<{w}}  {t:>9}  {ratio}")


if __name__ == "__main__":
    main()
