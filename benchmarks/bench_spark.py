"""Benchmark of the Spark index-rebuild jobs (RocketMQ CommitLog and Kafka segment).

    python benchmarks/bench_spark.py [--mb 1024] [--masters local[1],local[2]]

For each master a fresh process (one SparkSession, stopped before the next one starts) first runs
the single-process local rebuild of the same data (the baseline, best of two runs so that loading
the kernels is not counted), then the Spark rebuild, and
checks that both outputs are byte-identical.  Reported: MB/s, messages (records) per second, the
ratio to the local rebuild measured in the same process, the speed-up local[2]/local[1] and, for
RocketMQ, the ratio to the Java anchor (the broker's dispatch, measured on this machine, issue 5).

Data is generated deterministically under ``benchmarks/data/`` (gitignored) with the generators
of ``bench_rocketmq_store.py`` (one CommitLog segment of realistic v1 records with keys) and
``bench_kafka.py`` (batches of 16 records of 1 KiB).  The figures depend on how busy the machine is:
run it on an idle machine and note the load average it prints.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
sys.path.insert(0, str(HERE.parent / "src"))

DATA = HERE / "data"
JAVA_REBUILD_MSGS_S = 620_000
MB = 1024 * 1024


def make_kafka_segment(mb: int) -> tuple[Path, int]:
    """A partition with one segment of about ``mb`` MiB (bench_kafka's batches, offsets assigned)."""
    from bench_kafka import PER_BATCH, make_batches
    from mqstore.kafka import LogConfig, PartitionLog

    part = DATA / f"spark-kafka-{mb}m" / "bench-0"
    marker = part.parent / "records.txt"
    if marker.exists() and (part / "00000000000000000000.log").exists():
        return part, int(marker.read_text())
    shutil.rmtree(part.parent, ignore_errors=True)
    t = time.perf_counter()
    template = make_batches(256)
    n_batches = mb * MB // len(template[0])
    with PartitionLog.open(part, LogConfig(segment_bytes=2**31 - 1)) as log:
        for i in range(n_batches):
            log.append(template[i % 256], assign_offsets=True)
    marker.write_text(str(n_batches * PER_BATCH))
    print(f"generated a {mb} MiB Kafka segment ({n_batches * PER_BATCH:,} records) in {time.perf_counter() - t:.1f} s",
          flush=True)
    return part, n_batches * PER_BATCH


def _same_files(a: Path, b: Path) -> bool:
    fa = sorted(p.relative_to(a) for p in a.rglob("*") if p.is_file())
    fb = sorted(p.relative_to(b) for p in b.rglob("*") if p.is_file())
    if fa != fb:
        return False
    from mqstore.storage.rocketmq.rebuild import _digest

    return all((a / f).stat().st_size == (b / f).stat().st_size and _digest(a / f) == _digest(b / f) for f in fa)


def worker(master: str, mb: int, which: list[str]) -> dict[str, Any]:
    """One process, one session: local baseline then Spark, for each layout."""
    from bench_rocketmq_store import make_store
    from mqstore.spark.rebuild import rebuild_kafka, rebuild_rocketmq
    from mqstore.spark.session import get_session
    from mqstore.storage.kafka.rebuild import rebuild_indexes as kafka_rebuild
    from mqstore.storage.rocketmq.config import StoreConfig
    from mqstore.storage.rocketmq.rebuild import compare_trees, rebuild_indexes

    res: dict[str, Any] = {"master": master}
    work = DATA / f"spark-bench-{os.getpid()}"
    work.mkdir(parents=True)
    try:
        t = time.perf_counter()
        spark = get_session(master, {"spark.driver.memory": "6g", "spark.ui.enabled": "false"},
                            app_name="bench_spark")
        res["session_s"] = time.perf_counter() - t
        # warm-up: Python workers started, numba caches loaded (not timed)
        fixtures = HERE.parent / "tests" / "fixtures"
        if (fixtures / "rocketmq" / "basic" / "store").is_dir():
            rebuild_rocketmq(spark, fixtures / "rocketmq" / "basic" / "store", work / "warm", hash_slot_num=100,
                             index_num=1000, cq_file_size=320, commit_log_file_size=16384)
        if "rocketmq" in which:
            root, _n = make_store(mb)
            cfg = StoreConfig(commit_log_file_size=mb * MB)
            local_s = float("inf")
            for _ in range(2):  # best of 2: the first run of the process also loads the kernels
                shutil.rmtree(work / "rmq-local", ignore_errors=True)
                t = time.perf_counter()
                rebuild_indexes(root, work / "rmq-local", config=cfg)
                local_s = min(local_s, time.perf_counter() - t)
            t = time.perf_counter()
            stats = rebuild_rocketmq(spark, root, work / "rmq-spark", commit_log_file_size=mb * MB)
            spark_s = time.perf_counter() - t
            same = compare_trees(work / "rmq-local", work / "rmq-spark") == [] and \
                (work / "rmq-local" / "checkpoint").read_bytes() == (work / "rmq-spark" / "checkpoint").read_bytes()
            res["rocketmq"] = {"messages": stats.messages, "keys": stats.keys, "bytes": stats.bytes_scanned,
                               "local_s": local_s, "spark_s": spark_s, "scan_tasks": stats.scan_tasks,
                               "identical": same, "phases": stats.phase_seconds}
            shutil.rmtree(work / "rmq-local")
            shutil.rmtree(work / "rmq-spark")
        if "kafka" in which:
            part, records = make_kafka_segment(mb)
            log = part / "00000000000000000000.log"
            local_s = float("inf")
            for _ in range(2):  # best of 2, as for RocketMQ
                shutil.rmtree(work / "k-local", ignore_errors=True)
                (work / "k-local").mkdir()
                t = time.perf_counter()
                r = kafka_rebuild(log, work / "k-local")
                local_s = min(local_s, time.perf_counter() - t)
            t = time.perf_counter()
            ks = rebuild_kafka(spark, part, work / "k-spark")
            spark_s = time.perf_counter() - t
            res["kafka"] = {"records": records, "batches": r.batches, "bytes": ks.bytes, "local_s": local_s,
                            "spark_s": spark_s, "identical": _same_files(work / "k-local", work / "k-spark")}
        spark.stop()
    finally:
        shutil.rmtree(work, ignore_errors=True)
    return res


def _rates(base: dict[str, float], job: str, x: dict[str, Any], count: int) -> tuple[float, float, str]:
    """Items/s and MB/s of one Spark run, and its speed-up over the first master's run of ``job``."""
    seconds = x["spark_s"]
    speed = ""
    if job in base:
        speed = f"; {base[job] / seconds:.2f}x speed-up over the first master"
    else:
        base[job] = seconds
    return count / seconds, x["bytes"] / MB / seconds, speed


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--mb", type=int, default=1024, help="size of the CommitLog and of the Kafka segment (MiB)")
    ap.add_argument("--masters", default="local[1],local[2]", help="comma-separated Spark masters")
    ap.add_argument("--only", choices=["rocketmq", "kafka"], default=None)
    ap.add_argument("--worker", default=None, help=argparse.SUPPRESS)
    args = ap.parse_args()
    which = [args.only] if args.only else ["rocketmq", "kafka"]
    if args.worker:
        print("RESULT " + json.dumps(worker(args.worker, args.mb, which)), flush=True)
        return
    DATA.mkdir(exist_ok=True)
    from bench_rocketmq_store import make_store

    if "rocketmq" in which:
        make_store(args.mb)
    if "kafka" in which:
        make_kafka_segment(args.mb)
    results = []
    for master in args.masters.split(","):
        load = os.getloadavg()[0]
        cmd = [sys.executable, __file__, "--worker", master, "--mb", str(args.mb)]
        if args.only:
            cmd += ["--only", args.only]
        out = subprocess.run(cmd, check=True, capture_output=True, text=True).stdout
        line = next(x for x in out.splitlines() if x.startswith("RESULT "))
        r = json.loads(line[len("RESULT "):])
        r["load_before"] = load
        results.append(r)
    rows: list[tuple[str, str, str, str]] = []
    base: dict[str, float] = {}
    for r in results:
        m = r["master"]
        if "rocketmq" in r:
            x = r["rocketmq"]
            rate, mbs, speed = _rates(base, "rocketmq", x, x["messages"])
            rows.append((f"RocketMQ rebuild {args.mb} MiB, Spark {m} ({x['scan_tasks']} scan tasks)",
                         f"{mbs:,.0f} MB/s, {rate:,.0f} msgs/s ({x['spark_s']:.1f} s)",
                         f"local {x['bytes'] / MB / x['local_s']:,.0f} MB/s ({x['local_s']:.1f} s); "
                         f"Java {JAVA_REBUILD_MSGS_S:,} msgs/s",
                         f"{x['local_s'] / x['spark_s']:.2f}x local, {rate / JAVA_REBUILD_MSGS_S:.2f}x Java{speed}; "
                         f"identical={x['identical']}"))
            rows.append((f"  phases {m}", ", ".join(f"{k} {v:.1f} s" for k, v in x["phases"].items()), "", ""))
        if "kafka" in r:
            x = r["kafka"]
            rate, mbs, speed = _rates(base, "kafka", x, x["records"])
            rows.append((f"Kafka rebuild {args.mb} MiB segment, Spark {m}",
                         f"{mbs:,.0f} MB/s, {rate:,.0f} records/s ({x['spark_s']:.1f} s)",
                         f"local {x['bytes'] / MB / x['local_s']:,.0f} MB/s ({x['local_s']:.1f} s)",
                         f"{x['local_s'] / x['spark_s']:.2f}x local{speed}; identical={x['identical']}"))
        rows.append((f"session start {m}", f"{r['session_s']:.1f} s", f"load average before {r['load_before']:.1f}",
                     ""))
    w = [max(len(row[i]) for row in rows) for i in range(4)]
    print(f"{'figure':<{w[0]}} | {'Spark':<{w[1]}} | {'baseline':<{w[2]}} | ratio")
    for row in rows:
        print(f"{row[0]:<{w[0]}} | {row[1]:<{w[1]}} | {row[2]:<{w[2]}} | {row[3]}")


if __name__ == "__main__":
    main()
