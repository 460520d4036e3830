"""Benchmark of reading stores from object storage vs from the local directory.

    python benchmarks/bench_objstore.py [--messages 300000] [--records 300000] [--data DIR] [--json FILE]

Starts moto's S3-compatible server (``moto[server]``, the test extra) on a free port of
127.0.0.1, uploads a RocketMQ store (``bench_rocketmq_source``'s generator: 16 MiB CommitLog
segments) and a Kafka partition (``bench_kafka_source``'s generator, uncompressed batches of 100
records), then reads every row into Arrow through the data sources' planning and readers (no
Spark): from the local path (mmap) and from the ``s3://`` URL (ranged GETs of
``mqstore.storage.fileio.CHUNK_BYTES``).  Reported: MB/s of segment bytes and rows/s for both, and
the ratio s3/local measured in the same process (best of two runs each).  The server runs in
this process (a thread), so its own CPU competes with the reader: a lower bound for a real
object store reached over a network with spare bandwidth.  Data goes to ``--data`` (default
``/tmp/mqstore-bench-objstore``), deleted at the end unless ``--keep``.
"""

from __future__ import annotations

import argparse
import json
import shutil
import socket
import sys
import time
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
sys.path.insert(0, str(HERE.parent / "src"))

MB = 1024 * 1024


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def upload(fs: Any, local: Path, key: str) -> None:
    for p in sorted(local.rglob("*")):
        if p.is_file():
            with fs.open_output_stream(f"{key}/{p.relative_to(local).as_posix()}") as out:
                out.write(p.read_bytes())


def best(fn: Any, runs: int = 2) -> tuple[float, Any]:
    out = None
    t_best = float("inf")
    for _ in range(runs):
        t = time.perf_counter()
        out = fn()
        t_best = min(t_best, time.perf_counter() - t)
    return t_best, out


def rocketmq_rows(path: str, fs_opts: dict[str, str]) -> int:
    from mqstore.spark._rocketmq_options import parse_options
    from mqstore.spark.rocketmq_source import plan_batch, read_range

    n = 0
    for part in plan_batch(parse_options({"path": path, "brokerNames": "b"}), None, fs_opts):
        for rb in read_range(part, include_body=True, check_crc=False):
            n += rb.num_rows
    return n


def kafka_rows(path: str, fs_opts: dict[str, str]) -> int:
    from mqstore.spark._kafka_options import parse_options
    from mqstore.spark._kafka_plan import discover_partitions, plan_batch_ranges
    from mqstore.spark._kafka_read import read_arrow

    opts = parse_options({"path": path}, streaming=False)
    n = 0
    for r in plan_batch_ranges(opts, discover_partitions(opts, fs_opts)):
        for rb in read_arrow(r, include_headers=True):
            n += rb.num_rows
    return n


def measure(name: str, fn: Any, local: str, url: str, fs_opts: dict[str, str], nbytes: int) -> dict[str, Any]:
    fn(local, {})  # compile / warm the kernels
    t_local, n_local = best(lambda: fn(local, {}))
    t_s3, n_s3 = best(lambda: fn(url, fs_opts))
    assert n_local == n_s3 > 0, (n_local, n_s3)
    return {"layout": name, "rows": n_local, "mb": round(nbytes / MB, 1),
            "local_mb_per_s": round(nbytes / MB / t_local, 1), "s3_mb_per_s": round(nbytes / MB / t_s3, 1),
            "local_rows_per_s": round(n_local / t_local), "s3_rows_per_s": round(n_s3 / t_s3),
            "s3_vs_local": round(t_local / t_s3, 3)}


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--messages", type=int, default=300_000)
    ap.add_argument("--records", type=int, default=300_000)
    ap.add_argument("--data", type=Path, default=Path("/tmp/mqstore-bench-objstore"))
    ap.add_argument("--keep", action="store_true")
    ap.add_argument("--json", type=Path)
    args = ap.parse_args()

    from moto.server import ThreadedMotoServer
    from pyarrow import fs as pafs

    import bench_kafka_source
    import bench_rocketmq_source

    args.data.mkdir(parents=True, exist_ok=True)
    store = bench_rocketmq_source.make(args.data, args.messages)
    part = bench_kafka_source.make(args.data / "kafka", args.records, 0)
    port = _free_port()
    server = ThreadedMotoServer(ip_address="127.0.0.1", port=port, verbose=False)
    server.start()
    results = []
    try:
        opts = {"fs.s3.endpoint": f"http://127.0.0.1:{port}", "fs.s3.accessKey": "bench",
                "fs.s3.secretKey": "bench", "fs.s3.region": "us-east-1"}
        s3 = pafs.S3FileSystem(endpoint_override=f"127.0.0.1:{port}", scheme="http", access_key="bench",
                               secret_key="bench", region="us-east-1", allow_bucket_creation=True)
        s3.create_dir("bench")
        upload(s3, store, "bench/store")
        upload(s3, part, f"bench/kafka/{part.name}")
        cl_bytes = sum(p.stat().st_size for p in (store / "commitlog").iterdir())
        log_bytes = sum(p.stat().st_size for p in part.glob("*.log"))
        results.append(measure("rocketmq", rocketmq_rows, str(store), "s3://bench/store", opts, cl_bytes))
        results.append(measure("kafka", kafka_rows, str(part), f"s3://bench/kafka/{part.name}", opts, log_bytes))
    finally:
        server.stop()
        if not args.keep:
            shutil.rmtree(args.data, ignore_errors=True)
    import os

    print(f"load average: {os.getloadavg()}")
    for r in results:
        print(json.dumps(r))
    if args.json:
        args.json.write_text(json.dumps(results, indent=2))


if __name__ == "__main__":
    main()
