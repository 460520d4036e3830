"""The driver program of the cluster test (``tests/spark/test_cluster.py``), run with
``spark-submit --master spark://127.0.0.1:PORT`` from a working directory laid out by the test:

    data/rmq/store/     a RocketMQ store        data/orders-0/   a Kafka partition (some segments)
    later/              the partition's remaining segments (appended before the stream restart)
    environment/        the archive of ``mqstore spark pack-env``, unpacked (the driver's Python)

The executors get the same archive through ``--archives mqstore-env.tar.gz#environment``.

Every path below is relative, as a user would type it: the jobs must make them absolute on the
driver.  Each scenario's outcome goes to ``results.json`` (argv[1]); the test asserts on it.
"""

from __future__ import annotations

import contextlib
import io
import json
import shutil
import sys
import time
import traceback
from pathlib import Path
from typing import Any

RESULTS: dict[str, Any] = {}


def cli(*args: str) -> dict[str, Any]:
    """Run one ``mqstore spark`` command in this driver (the session is shared): exit code,
    stdout and stderr."""
    from mqstore.cli.spark import group

    out, err = io.StringIO(), io.StringIO()
    code = 0
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        try:
            group.main(args=list(args), prog_name="mqstore spark", standalone_mode=False)
        except SystemExit as exc:
            code = int(exc.code or 0)
        except Exception:  # a traceback is a failure of the test
            code = 99
            err.write(traceback.format_exc())
    return {"code": code, "stdout": out.getvalue(), "stderr": err.getvalue()}


def timed(name: str, fn: Any) -> None:
    t0 = time.perf_counter()
    try:
        RESULTS[name] = {"result": fn()}
    except Exception as exc:
        RESULTS[name] = {"error": f"{type(exc).__name__}: {exc}", "traceback": traceback.format_exc()}
    RESULTS[name]["seconds"] = round(time.perf_counter() - t0, 2)
    print(f"[cluster_jobs] {name}: {RESULTS[name]['seconds']} s", file=sys.stderr, flush=True)


def stream_once(spark: Any, max_offsets: int) -> None:
    """One availableNow run of a kafka-log stream into a Parquet sink (relative paths)."""
    q = (spark.readStream.format("kafka-log").option("startingOffsets", "earliest")
         .option("maxOffsetsPerTrigger", str(max_offsets)).load("data/orders-0")
         .selectExpr("offset", "partition", "sha2(value, 256) AS digest")
         .writeStream.format("parquet").option("path", "out/stream").option("checkpointLocation", "out/stream-cp")
         .trigger(availableNow=True).start())
    q.awaitTermination()


def main() -> None:
    results_path = Path(sys.argv[1])
    geometry = sys.argv[2:]  # --slots N --items N --cq-file-size N of the RocketMQ fixture
    t0 = time.perf_counter()
    from mqstore.spark import get_session
    from mqstore.spark.cluster import preflight

    spark = get_session(None, {})  # the master and conf spark-submit was given
    sc = spark.sparkContext
    RESULTS["session"] = {"master": sc.master, "python": sc.pythonExec, "seconds": round(time.perf_counter() - t0, 2)}

    def executor_env() -> dict[str, Any]:
        import mqstore

        def where(_: Any) -> list[tuple[str, str]]:
            import sys

            import mqstore

            return [(sys.prefix, mqstore.__file__)]

        found = sc.parallelize(range(2), 2).mapPartitions(where).collect()
        return {"driver": [sys.prefix, mqstore.__file__], "executors": sorted(set(map(tuple, found)))}

    timed("executor_env", executor_env)
    timed("rebuild_rocketmq", lambda: cli("rebuild-index", "rocketmq", "data/rmq/store", "--out", "out/rmq",
                                          "--json", *geometry))
    timed("rebuild_kafka", lambda: cli("rebuild-index", "kafka", "data/orders-0", "--out", "out/kafka", "--json"))

    def batch() -> dict[str, Any]:
        return {"kafka_rows": spark.read.format("kafka-log").load("data/orders-0").count(),
                "rocketmq_rows": spark.read.format("rocketmq").load("data/rmq/store").count()}

    timed("batch", batch)

    def stream() -> dict[str, Any]:
        stream_once(spark, 500)
        first = spark.read.parquet("out/stream").count()
        for f in sorted(Path("later").iterdir()):  # the partition grows: more segments roll in
            shutil.copy2(f, Path("data/orders-0") / f.name)
        stream_once(spark, 500)  # restarted from the checkpoint
        row = spark.read.parquet("out/stream").selectExpr("count(*)", "count(DISTINCT offset)", "max(offset)").first()
        return {"first": first, "rows": row[0], "distinct": row[1], "max": row[2]}

    timed("stream", stream)

    def unreachable() -> dict[str, Any]:
        # /proc/self/cwd/... names the driver's working directory on the driver and the executor's
        # own working directory on an executor: a path the driver sees and the executors do not
        return cli("rebuild-index", "rocketmq", "/proc/self/cwd/data/rmq/store", "--out", "out/never", *geometry)

    timed("unreachable", unreachable)

    def missing_python() -> dict[str, Any]:
        saved = sc.pythonExec
        sc.pythonExec = "/nonexistent/bin/python3"
        try:
            preflight(spark, read={"store": ["data/rmq/store"]})
        except Exception as exc:
            return {"type": type(exc).__name__, "message": str(exc)}
        finally:
            sc.pythonExec = saved
        return {"type": None}

    timed("missing_python", missing_python)
    RESULTS["total_seconds"] = round(time.perf_counter() - t0, 2)
    results_path.write_text(json.dumps(RESULTS, indent=1))
    spark.stop()


if __name__ == "__main__":
    main()
