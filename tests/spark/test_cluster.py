"""mqstore on a real Spark standalone cluster: a master and a worker on 127.0.0.1 started from the
installed pyspark, the jobs submitted with ``spark-submit`` (client mode) by a user who has not
activated the virtual environment, from a working directory with relative paths, with mqstore
and its dependencies shipped as docs/spark.md says (``mqstore spark pack-env`` + ``--archives``).

The driver is another process (``cluster_jobs.py``), so the session-scoped local SparkSession of
the other tests is untouched.  It runs every scenario once and writes its outcome to a JSON file;
the tests below assert on it: the rebuilds of both layouts byte-identical with the local ones,
a batch read of both sources, a restarted availableNow stream (exactly-once), the preflight error
for a path the executors do not see, and the missing worker Python."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest
from cluster_support import StandaloneCluster, spark_submit

from mqstore import StoreConfig
from mqstore.storage.kafka.rebuild import rebuild_indexes as kafka_rebuild
from mqstore.storage.rocketmq.rebuild import compare_trees, rebuild_indexes

pytestmark = pytest.mark.spark

JOBS = Path(__file__).with_name("cluster_jobs.py")
KAFKA_CASE = "multi_segment_roll_bytes"
LATER = 3  # segments appended before the stream restarts
ENV_PYTHON = "./environment/bin/python"  # the packed environment's interpreter, on the driver and the executors


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory):
    t0 = time.perf_counter()
    c = StandaloneCluster(tmp_path_factory.mktemp("standalone"), workers=1, cores=2).start()
    c.startup_seconds = round(time.perf_counter() - t0, 1)  # type: ignore[attr-defined]
    try:
        yield c
    finally:
        c.stop()


@pytest.fixture(scope="module")
def run(cluster: StandaloneCluster, shared_fixtures: Path, tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    """Lay out the working directory, submit ``cluster_jobs.py`` once, return its results."""
    work = tmp_path_factory.mktemp("driver-cwd")
    rmq = shared_fixtures / "rocketmq" / "basic"
    shutil.copytree(rmq / "store", work / "data" / "rmq" / "store")
    logs = sorted((shared_fixtures / "kafka" / KAFKA_CASE / "segments").glob("*.log"))
    part, later = work / "data" / "orders-0", work / "later"
    part.mkdir(parents=True)
    later.mkdir()
    for log in logs:  # only the .log files: the rebuild writes the indexes
        shutil.copy2(log, (later if log in logs[-LATER:] else part) / log.name)
    cfg = json.loads((rmq / "manifest.json").read_text())["config"]
    geometry = ["--slots", str(cfg["maxHashSlotNum"]), "--items", str(cfg["maxIndexNum"]),
                "--cq-file-size", str(cfg["mappedFileSizeConsumeQueue"])]
    # the environment, shipped as docs/spark.md says: packed, unpacked beside the driver, --archives
    t0 = time.perf_counter()
    archive = work / "mqstore-env.tar.gz"
    packed = subprocess.run([str(Path(sys.executable).with_name("mqstore")), "spark", "pack-env", str(archive),
                             "--json"], capture_output=True, text=True, stdin=subprocess.DEVNULL)
    assert packed.returncode == 0, packed.stderr
    (work / "environment").mkdir()
    subprocess.run(["tar", "-xzf", str(archive), "-C", str(work / "environment")], check=True)
    pack_seconds = round(time.perf_counter() - t0, 1)
    t0 = time.perf_counter()
    r = spark_submit(cluster, JOBS, str(work / "results.json"), *geometry, cwd=work, python=ENV_PYTHON,
                     conf={"spark.pyspark.driver.python": ENV_PYTHON},
                     extra=["--archives", f"{archive}#environment"])
    seconds = round(time.perf_counter() - t0, 1)
    assert r.returncode == 0 and (work / "results.json").exists(), (r.stdout + r.stderr)[-5000:]
    results = json.loads((work / "results.json").read_text())
    results.update(work=str(work), submit_seconds=seconds, pack_seconds=pack_seconds, cluster_seconds=cluster.startup_seconds,  # type: ignore[attr-defined]
                   stderr=r.stderr, config=cfg, later_logs=[p.name for p in logs[-LATER:]])
    print(f"\ncluster up in {cluster.startup_seconds} s; pack-env + unpack {pack_seconds} s; "  # type: ignore[attr-defined]
          f"spark-submit {seconds} s; "
          + ", ".join(f"{k} {v['seconds']} s" for k, v in results.items() if isinstance(v, dict) and "seconds" in v))
    return results


def _ok(results: dict[str, Any], name: str) -> dict[str, Any]:
    entry = results[name]
    assert "error" not in entry, entry.get("traceback") or entry
    return entry["result"]


def test_executors_run_the_shipped_environment(run: dict[str, Any], cluster: StandaloneCluster) -> None:
    assert run["session"]["master"] == cluster.master_url
    assert run["session"]["python"] == ENV_PYTHON  # spark.pyspark.python, given on the command line
    env = _ok(run, "executor_env")
    driver_prefix, driver_mqstore = env["driver"]
    assert Path(driver_prefix) == Path(run["work"]) / "environment"
    assert driver_mqstore.startswith(str(Path(driver_prefix) / "lib"))
    for prefix, module in env["executors"]:  # the archive unpacked in the executor's directory
        assert Path(prefix).name == "environment" and Path(prefix).parent != Path(run["work"])
        assert module.startswith(str(Path(prefix) / "lib")), module  # mqstore from the archive


def test_rocketmq_rebuild_with_relative_paths_is_byte_identical(run: dict[str, Any], tmp_path: Path) -> None:
    res = _ok(run, "rebuild_rocketmq")
    assert res["code"] == 0, res["stderr"]
    stats = json.loads(res["stdout"].strip().splitlines()[-1])
    work = Path(run["work"])
    assert stats["messages"] == 150 and stats["out"] == str(work / "out" / "rmq")  # made absolute on the driver
    c = run["config"]
    cfg = StoreConfig(commit_log_file_size=c["mappedFileSizeCommitLog"],
                      consume_queue_file_size=c["mappedFileSizeConsumeQueue"], hash_slot_num=c["maxHashSlotNum"],
                      index_num=c["maxIndexNum"])
    rebuild_indexes(work / "data" / "rmq" / "store", tmp_path / "local", config=cfg)
    assert compare_trees(tmp_path / "local", work / "out" / "rmq") == []
    assert (tmp_path / "local" / "checkpoint").read_bytes() == (work / "out" / "rmq" / "checkpoint").read_bytes()


def test_kafka_rebuild_with_relative_paths_is_byte_identical(run: dict[str, Any], shared_fixtures: Path,
                                                              tmp_path: Path) -> None:
    res = _ok(run, "rebuild_kafka")
    assert res["code"] == 0, res["stderr"]
    out = Path(run["work"]) / "out" / "kafka"
    fixture = shared_fixtures / "kafka" / KAFKA_CASE / "segments"
    logs = sorted(p for p in fixture.glob("*.log") if p.name not in run["later_logs"])
    assert len(json.loads(res["stdout"].strip().splitlines()[-1])["results"]) == len(logs)
    for log in logs:
        local = tmp_path / log.stem
        local.mkdir()
        kafka_rebuild(log, local)
        for suffix in (".index", ".timeindex"):
            name = log.stem + suffix
            assert (out / name).read_bytes() == (local / name).read_bytes(), name


def test_batch_read_of_both_sources(run: dict[str, Any]) -> None:
    res = _ok(run, "batch")
    assert res["rocketmq_rows"] == 150
    assert res["kafka_rows"] > 0  # compared with the stream's distinct offsets below


def test_restarted_available_now_stream_is_exactly_once(run: dict[str, Any], shared_fixtures: Path) -> None:
    res = _ok(run, "stream")
    manifest = json.loads((shared_fixtures / "kafka" / KAFKA_CASE / "manifest.json").read_text())
    offsets = [r["offset"] for seg in manifest["segments"] for b in seg["batches"] if not b["control"]
               for r in b["records"]]
    assert res["first"] == _ok(run, "batch")["kafka_rows"] < len(offsets)  # all there was before the restart
    assert res["rows"] == res["distinct"] == len(offsets)  # after the restart: no duplicate, none lost
    assert res["max"] == max(offsets)


def test_preflight_names_the_path_and_the_executor_host(run: dict[str, Any]) -> None:
    res = _ok(run, "unreachable")
    assert res["code"] == 2
    lines = [line for line in res["stderr"].splitlines() if line.strip()]
    assert len(lines) == 1, res["stderr"]
    assert lines[0].startswith("error: the store /proc/self/cwd/data/rmq/store")
    assert "on executor host" in lines[0] and "Traceback" not in res["stderr"]


def test_missing_worker_python_is_named(run: dict[str, Any]) -> None:
    res = _ok(run, "missing_python")
    assert res["type"] == "WorkerPythonError", res
    assert "/nonexistent/bin/python3" in res["message"] and "\n" not in res["message"]
