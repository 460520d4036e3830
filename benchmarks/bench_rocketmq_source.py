"""Benchmark of the ``rocketmq`` Spark data source.

    python benchmarks/bench_rocketmq_source.py [--messages N] [--no-spark] [--json FILE]

Data (generated under ``benchmarks/data/rocketmq_source/``, gitignored): one store of N messages
(100-byte bodies, two keys, tags, one user property) in 16 MiB CommitLog segments.  Figures, each
with a ratio against a baseline measured in the same process on the same bytes:

* the reader without Spark: numba boundary walk + column decoder → Arrow
  (``rocketmq_arrow_batches``) vs the pure-Python row reference (``rocketmq_rows_py``) and vs the
  previous column path (``decode_columns`` + ``columns_to_arrow``, new/old ratio), and the
  filtered path (numba scan + row mask, one topic of three) vs the unfiltered one;
* through Spark (``local[2]``, ``noop`` sink): one task per segment vs ``minPartitions=8``.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent
sys.path.insert(0, str(ROOT.parent / "src"))

from mqstore import MessageStore, StoreConfig  # noqa: E402
from mqstore.kernels.rocketmq.columns import decode_columns  # noqa: E402
from mqstore.spark._rocketmq_read import (  # noqa: E402
    BATCH_BYTES,
    BATCH_ROWS,
    RowFilter,
    _chunks,
    _record_sizes,
    close_map,
    columns_to_arrow,
    open_segment,
    rocketmq_arrow_batches,
    rocketmq_rows_py,
    select_positions,
)
from mqstore.spark._rocketmq_store import list_segments  # noqa: E402

SEGMENT = 16 * 1024 * 1024


def make(root: Path, messages: int) -> Path:
    d = root / f"store-{messages}"
    marker = d / ".complete"
    if marker.exists():
        return d
    cfg = StoreConfig(commit_log_file_size=SEGMENT, hash_slot_num=50_000, index_num=200_000,
                      background_services=False, message_index_enable=False)
    with MessageStore.open(d, cfg) as s:
        for b in range(0, messages, 1000):
            s.put_batch([{"topic": ("orders", "payments", "audit")[i % 3], "body": b"%08d" % i * 12 + b"....",
                          "queue_id": i % 4, "keys": [f"k{i}", f"o{i // 7}"], "tags": f"T{i % 5}",
                          "properties": {"seq": str(i)}} for i in range(b, min(messages, b + 1000))])
        s.dispatch()
    marker.touch()
    return d


def old_columns_path(path: str, base: int) -> int:
    """The column path before ``arrow_columns``: ``decode_columns`` (per-row Python objects for
    properties, keys, hosts, topic, body) + ``columns_to_arrow``; rows read."""
    mm, u8 = open_segment(path)
    rows = 0
    try:
        pos = select_positions(u8, path, base, 0, len(u8))
        for chunk in _chunks(pos, _record_sizes(u8, pos), BATCH_ROWS, BATCH_BYTES):
            rows += columns_to_arrow(decode_columns(u8, base, chunk), "b").num_rows
    finally:
        del u8
        close_map(mm)
    return rows


def timed(fn: Any) -> tuple[float, Any]:
    t = time.perf_counter()
    out = fn()
    return time.perf_counter() - t, out


def best(fn: Any, runs: int = 2) -> tuple[float, Any]:
    results = [timed(fn) for _ in range(runs)]
    return min(r[0] for r in results), results[0][1]


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--messages", type=int, default=300_000)
    ap.add_argument("--no-spark", action="store_true")
    ap.add_argument("--json")
    args = ap.parse_args()
    store = make(ROOT / "data" / "rocketmq_source", args.messages)
    segs = list_segments(str(store))
    mb = sum(s.size for s in segs[:-1]) / 1e6  # approximate: full segments
    res: dict[str, Any] = {"messages": args.messages, "segments": len(segs)}

    def fast(rf: RowFilter | None = None) -> int:
        return sum(b.num_rows for s in segs for b in rocketmq_arrow_batches(s.path, broker_name="b", row_filter=rf))

    t_fast, n = best(fast)
    assert n == args.messages, n
    first = segs[0]
    data = Path(first.path).read_bytes()
    t_py, rows = timed(lambda: rocketmq_rows_py(data, first.base, 0, len(data), broker_name="b"))
    t_fast1, n1 = best(lambda: sum(b.num_rows for b in rocketmq_arrow_batches(first.path, broker_name="b")))
    assert n1 == len(rows)
    t_old, n_old = best(lambda: sum(old_columns_path(s.path, s.base) for s in segs))
    assert n_old == n
    res["old_columns_rows_per_s"] = n / t_old
    res["arrow_vs_old_columns"] = t_old / t_fast
    t_filt, nf = best(lambda: fast(RowFilter(topics=frozenset({"orders"}))))
    res["arrow_rows_per_s"] = n / t_fast
    res["arrow_mb_per_s"] = mb / t_fast
    res["python_rows_per_s"] = len(rows) / t_py
    res["arrow_vs_python"] = (n1 / t_fast1) / (len(rows) / t_py)
    res["filtered_rows_scanned_per_s"] = n / t_filt
    res["filtered_vs_unfiltered_time"] = t_filt / t_fast
    print(f"Arrow fast path: {n / t_fast:,.0f} rows/s ({mb / t_fast:,.0f} MB/s); pure Python: "
          f"{len(rows) / t_py:,.0f} rows/s; ratio {res['arrow_vs_python']:.1f}x")
    print(f"old column path (decode_columns + columns_to_arrow): {n / t_old:,.0f} rows/s; "
          f"new/old ratio {res['arrow_vs_old_columns']:.2f}x")
    print(f"one topic of three (scan + mask): {n / t_filt:,.0f} records scanned/s, "
          f"{t_filt / t_fast:.2f}x the unfiltered time ({nf} rows)")
    if not args.no_spark:
        from mqstore.spark.session import get_session

        spark = get_session("local[2]", {"spark.driver.memory": "2g"})
        for label, opts in (("per_segment", {}), ("min_partitions_8", {"minPartitions": "8"})):
            def run(opts: dict[str, str] = opts) -> None:
                r = spark.read.format("rocketmq")
                for k, v in opts.items():
                    r = r.option(k, v)
                r.load(str(store)).write.format("noop").mode("overwrite").save()

            timed(run)  # warm-up
            t, _ = best(run)
            res[f"spark_{label}_rows_per_s"] = args.messages / t
            print(f"Spark local[2] {label}: {args.messages / t:,.0f} rows/s ({t:.2f} s)")
        res["spark_split_speedup"] = res["spark_min_partitions_8_rows_per_s"] / res["spark_per_segment_rows_per_s"]
        spark.stop()
    if args.json:
        Path(args.json).write_text(json.dumps(res, indent=2))


if __name__ == "__main__":
    main()
