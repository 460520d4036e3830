"""Benchmark of the ``kafka-log`` Spark data source.

    python benchmarks/bench_kafka_source.py [--records N] [--no-spark] [--json FILE]

Data (generated under ``benchmarks/data/kafka_source/``, gitignored): one partition, one segment,
batches of 100 records of ~100-byte values with keys and a header on every fourth record, once
uncompressed and once zstd.  Figures, each with a ratio against a baseline measured in the same
process on the same bytes:

* the reader without Spark: numba record-body decoder → Arrow, vs the generic per-record decoder
  (``decode_records_columnar`` → Arrow) and the pure-Python row reference (``read_rows``);
* through Spark (``local[2]``, ``noop`` sink): one task per partition vs ``minPartitions=2``
  (the segment split at offset-index entries and read by two tasks).
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

from mqstore.formats.kafka import Compression, SimpleRecord, encode_batch  # noqa: E402
from mqstore.kafka import LogConfig, PartitionLog  # noqa: E402
from mqstore.spark._kafka_plan import OffsetRange  # noqa: E402
from mqstore.spark._kafka_read import read_arrow, read_rows  # noqa: E402


def make(root: Path, records: int, codec: int) -> Path:
    d = root / f"bench{codec}-0"
    marker = d / f".complete-{records}"
    if marker.exists():
        return d
    if d.exists():
        for f in d.iterdir():
            f.unlink()
    with PartitionLog.open(d, LogConfig()) as log:
        buf = bytearray()
        for b in range(records // 100):
            recs = [SimpleRecord(value=(b"x%07d-" % (b * 100 + i)) * 12, key=b"key-%d" % i,
                                 headers=[("h", b"v")] if i % 4 == 0 else [], timestamp=1_700_000_000_000 + b)
                    for i in range(100)]
            buf += encode_batch(recs, base_offset=0, compression=codec)
            if len(buf) > 1 << 20:
                log.append(bytes(buf))
                buf = bytearray()
        if buf:
            log.append(bytes(buf))
    marker.touch()
    return d


def timed(fn: Any) -> tuple[float, Any]:
    t = time.perf_counter()
    out = fn()
    return time.perf_counter() - t, out


def bench_reader(d: Path, records: int) -> dict[str, Any]:
    rng = OffsetRange("bench", 0, str(d), 0, records)
    list(read_arrow(OffsetRange("bench", 0, str(d), 0, 200), include_headers=True))  # compile / warm
    t_fast, n = timed(lambda: sum(b.num_rows for b in read_arrow(rng, include_headers=True)))
    t_gen, n2 = timed(lambda: sum(b.num_rows for b in read_arrow(rng, include_headers=True, fast=False)))
    t_py, n3 = timed(lambda: sum(1 for _ in read_rows(rng, include_headers=True)))
    assert n == n2 == n3 == records
    size = sum(f.stat().st_size for f in d.glob("*.log"))
    return {"rows": n, "log_mb": round(size / 2**20, 1),
            "fast_rows_per_s": round(n / t_fast), "generic_rows_per_s": round(n / t_gen),
            "python_rows_per_s": round(n / t_py),
            "fast_vs_generic": round(t_gen / t_fast, 2), "fast_vs_python": round(t_py / t_fast, 2)}


def bench_spark(d: Path, records: int) -> dict[str, Any]:
    from mqstore.spark import get_session

    spark = get_session("local[2]")
    out: dict[str, Any] = {}
    try:
        for parts in (1, 2, 1, 2):  # the first pair warms the workers and the JIT caches
            df = (spark.read.format("kafka-log").option("includeHeaders", "true")
                  .option("minPartitions", str(parts)).load(str(d)))
            t, _ = timed(lambda df=df: df.write.format("noop").mode("overwrite").save())
            out[f"tasks_{parts}_rows_per_s"] = round(records / t)
        out["speedup_2_tasks"] = round(out["tasks_2_rows_per_s"] / out["tasks_1_rows_per_s"], 2)
    finally:
        spark.stop()
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--records", type=int, default=500_000)
    ap.add_argument("--no-spark", action="store_true")
    ap.add_argument("--json", type=Path)
    args = ap.parse_args()
    root = ROOT / "data" / "kafka_source"
    root.mkdir(parents=True, exist_ok=True)
    results: dict[str, Any] = {}
    for codec in (Compression.NONE, Compression.ZSTD):
        d = make(root, args.records, codec)
        r = bench_reader(d, args.records)
        results[f"reader_{codec.name.lower()}"] = r
        print(f"reader {codec.name.lower():5s}: {r}")
    if not args.no_spark:
        s = bench_spark(make(root, args.records, Compression.NONE), args.records)
        results["spark_none"] = s
        print(f"spark  none : {s}")
    if args.json:
        args.json.write_text(json.dumps(results, indent=2))


if __name__ == "__main__":
    main()
