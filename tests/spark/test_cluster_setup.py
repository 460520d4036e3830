"""The pieces of :mod:`mqstore.spark.cluster` without a cluster: path rules, the worker Python
choice, error unwrapping, the preflight's own checks, and the relative-path handling of the
sources and jobs in local mode (``test_cluster.py`` runs them on a real standalone cluster)."""

from __future__ import annotations

import json
import os
import shutil
import sys
from pathlib import Path
from types import SimpleNamespace

import pytest
from click.testing import CliRunner

from mqstore.cli.main import cli
from mqstore.cli.spark import first_error_line
from mqstore.errors import PathNotVisibleError, WorkerPythonError
from mqstore.spark import cluster
from mqstore.spark.cluster import (
    absolute_path,
    absolute_paths,
    check_visible,
    configure_workers,
    executors_are_driver,
    explain_spark_error,
    is_loopback_master,
    preflight,
    with_absolute_paths,
    worker_python,
)
from mqstore.spark.session import prepare_environment

pytestmark = pytest.mark.spark

PY4J_TASK_ERROR = """An error occurred while calling o123.collectToPython.
: org.apache.spark.SparkException: Job aborted due to stage failure: Task 0 in stage 3.0 failed 4 times, most recent \
failure: Lost task 0.3 in stage 3.0 (TID 9) (127.0.0.1 executor 0): org.apache.spark.api.python.PythonException: \
Traceback (most recent call last):
  File "/opt/spark/python/lib/pyspark.zip/pyspark/worker.py", line 2010, in main
    process()
  File "/work/src/mqstore/spark/kafka_source.py", line 111, in _read
    check_visible(partition.range.path, "Kafka partition directory")
mqstore.errors.PathNotVisibleError: the Kafka partition directory /data/orders-0 does not exist on executor host w1
\tat org.apache.spark.api.python.BasePythonRunner$ReaderIterator.handlePythonException(PythonRunner.scala:612)
\tat org.apache.spark.scheduler.Task.run(Task.scala:147)
Driver stacktrace:
\tat org.apache.spark.scheduler.DAGScheduler.failJobAndIndependentStages(DAGScheduler.scala:2935)
"""

PYARROW_ERROR = """[STREAM_FAILED] Query [id = 1] terminated with exception: An exception was thrown from the Python \
worker. Please see the stack trace below.
Traceback (most recent call last):
  File "/work/src/mqstore/spark/dispatch.py", line 505, in commit
    with pa.memory_map(m.path, "r") as src:
  File "pyarrow/io.pxi", line 1139, in pyarrow.lib.memory_map
  File "pyarrow/error.pxi", line 155, in pyarrow.lib.pyarrow_internal_check_status
  File "pyarrow/error.pxi", line 92, in pyarrow.lib.check_status
FileNotFoundError: [Errno 2] Failed to open local file '/cp/dispatch-staging/ab.arrow'. Detail: [errno 2] No such file
"""

NO_PYTHON = """An error occurred while calling z:org.apache.spark.api.python.PythonRDD.collectAndServe.
: org.apache.spark.SparkException: Job aborted due to stage failure: Task 1 in stage 0.0 failed 4 times, most recent \
failure: Lost task 1.3 in stage 0.0 (TID 7) (127.0.0.1 executor 0): java.io.IOException: Cannot run program \
"/opt/venv/bin/python": error=2, No such file or directory
\tat java.base/java.lang.ProcessBuilder.start(ProcessBuilder.java:1143)
\tat org.apache.spark.api.python.PythonWorkerFactory.startDaemon(PythonWorkerFactory.scala:270)
"""


# ------------------------------------------------------------------------------------ paths
def test_absolute_path_rules(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("HOME", "/home/u")
    assert absolute_path("data/store") == str(tmp_path / "data" / "store")
    assert absolute_path(Path("../x")) == str(tmp_path.parent / "x")
    assert absolute_path("~/s") == "/home/u/s"
    assert absolute_path("/abs/./s") == "/abs/s"
    for url in ("s3://bucket/store", "file:///data/x", "hdfs://nn:8020/k"):
        assert absolute_path(url) == url
    assert absolute_paths([None, "a", "a, /b,c", "gs://b/x"]) == (
        None, str(tmp_path / "a"), f"{tmp_path / 'a'},/b,{tmp_path / 'c'}", "gs://b/x")


def test_both_sources_plan_with_absolute_paths(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from mqstore.spark._kafka_options import parse_options as kafka_options
    from mqstore.spark._rocketmq_options import parse_options as rocketmq_options

    monkeypatch.chdir(tmp_path)
    k = with_absolute_paths(kafka_options({"path": "logs/orders-0"}, streaming=False))
    assert k.paths == (str(tmp_path / "logs" / "orders-0"),)
    r = with_absolute_paths(rocketmq_options({"paths": json.dumps(["b1/store", "s3://x/b2"]),
                                              "commitLogPath": json.dumps(["cl1,cl2", None])}))
    assert r.paths == (str(tmp_path / "b1" / "store"), "s3://x/b2")
    assert r.commit_log_paths == (f"{tmp_path / 'cl1'},{tmp_path / 'cl2'}", None)
    assert r.broker_names == ("store", "b2")  # names come from the paths as given


def test_data_source_readers_carry_absolute_paths(shared_fixtures: Path, tmp_path: Path,
                                                  monkeypatch: pytest.MonkeyPatch) -> None:
    from mqstore.spark.kafka_source import KafkaLogDataSource
    from mqstore.spark.rocketmq_source import RocketMQDataSource

    shutil.copytree(shared_fixtures / "kafka" / "single_default" / "segments", tmp_path / "orders-0")
    shutil.copytree(shared_fixtures / "rocketmq" / "basic" / "store", tmp_path / "rmq")
    monkeypatch.chdir(tmp_path)
    reader = KafkaLogDataSource({"path": "orders-0"}).reader(None)
    assert reader.opts.paths == (str(tmp_path / "orders-0"),)
    assert all(os.path.isabs(p.range.path) for p in reader.partitions())
    stream = RocketMQDataSource({"path": "rmq"}).streamReader(None)
    assert stream.opts.paths == (str(tmp_path / "rmq"),)


# ------------------------------------------------------------------------------------ masters, python
@pytest.mark.parametrize(("master", "driver", "loopback"), [
    ("local", True, True), ("local[*]", True, True), ("local[2,3]", True, True),
    ("local-cluster[2,1,1024]", False, True), ("spark://127.0.0.1:7077", False, True),
    ("spark://localhost:7077,127.0.0.1:7078", False, True), ("spark://10.0.0.5:7077", False, False),
    ("yarn", False, False), ("k8s://https://api:6443", False, False), (None, False, False),
])
def test_master_kinds(master: str | None, driver: bool, loopback: bool) -> None:
    assert executors_are_driver(master) is driver
    assert is_loopback_master(master) is loopback


def test_worker_python_choice(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("PYSPARK_PYTHON", raising=False)
    assert worker_python("spark://127.0.0.1:7077") == sys.executable
    assert worker_python("yarn", "./environment/bin/python") == "./environment/bin/python"
    with pytest.raises(WorkerPythonError, match=r"spark\.pyspark\.python.*--archives"):
        worker_python("yarn")
    monkeypatch.setenv("PYSPARK_PYTHON", "/opt/py/bin/python")
    assert worker_python("yarn") == "/opt/py/bin/python"
    assert worker_python("local[2]", "/conf/python") == "/conf/python"  # the configuration wins


def test_prepare_environment_honours_the_builder_setting(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("PYSPARK_PYTHON", raising=False)
    prepare_environment("yarn", {})
    assert "PYSPARK_PYTHON" not in os.environ  # unknown for a remote cluster: register refuses
    prepare_environment("yarn", {"spark.pyspark.python": "./environment/bin/python"})
    assert os.environ["PYSPARK_PYTHON"] == "./environment/bin/python"
    monkeypatch.delenv("PYSPARK_PYTHON")
    prepare_environment("spark://127.0.0.1:7077", None)
    assert os.environ["PYSPARK_PYTHON"] == sys.executable


def _fake_session(master: str, conf: dict[str, str]) -> SimpleNamespace:
    sc = SimpleNamespace(master=master, pythonExec="python3", environment={"PYTHONHASHSEED": "0"},
                         getConf=lambda: SimpleNamespace(get=lambda k, d=None: conf.get(k, d)))
    return SimpleNamespace(sparkContext=sc)


def test_configure_workers_applies_spark_pyspark_python(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("PYSPARK_PYTHON", raising=False)
    monkeypatch.setattr(cluster, "source_dir", lambda: "/src/tree")
    s = _fake_session("spark://10.1.1.1:7077", {"spark.pyspark.python": "/opt/env/bin/python"})
    assert configure_workers(s) == "/opt/env/bin/python"
    assert s.sparkContext.pythonExec == "/opt/env/bin/python" == os.environ["PYSPARK_PYTHON"]
    assert s.sparkContext.environment["PYTHONPATH"] == "/src/tree"  # mqstore not installed: its source tree
    monkeypatch.delenv("PYSPARK_PYTHON")
    with pytest.raises(WorkerPythonError):
        configure_workers(_fake_session("yarn", {}))
    monkeypatch.setattr(cluster, "source_dir", lambda: None)
    s = _fake_session("local[2]", {})
    assert configure_workers(s) == sys.executable and "PYTHONPATH" not in s.sparkContext.environment


def test_session_workers_run_this_python(spark) -> None:
    assert spark.sparkContext.pythonExec == sys.executable


# ------------------------------------------------------------------------------------ errors
def test_errors_are_unwrapped_to_the_python_exception() -> None:
    assert first_error_line(PY4J_TASK_ERROR) == (
        "PathNotVisibleError: the Kafka partition directory /data/orders-0 does not exist on executor host w1")
    assert first_error_line(PYARROW_ERROR).startswith(
        "FileNotFoundError: [Errno 2] Failed to open local file '/cp/dispatch-staging/ab.arrow'")
    line = first_error_line(NO_PYTHON)
    assert line.startswith("the executors cannot run the worker Python /opt/venv/bin/python (error=2, No such file")
    assert "spark.pyspark.python" in line
    assert explain_spark_error("An error occurred while calling o1.load.\n: java.lang.IllegalStateException: boom") \
        == "IllegalStateException: boom"
    assert explain_spark_error("x\nCaused by: java.io.IOException: outer\nCaused by: java.io.FileNotFoundException: "
                               "/p (No such file)\n\tat a.b(C.java:1)") == "FileNotFoundException: /p (No such file)"
    chained = ("Traceback (most recent call last):\n  File \"a.py\", line 1, in f\nKeyError: 'x'\n\nDuring handling "
               "of the above exception, another exception occurred:\n\nTraceback (most recent call last):\n  File "
               "\"b.py\", line 2, in g\nmqstore.errors.DataLossError: gone (/p)\n")
    assert explain_spark_error(chained) == "DataLossError: gone (/p)"


def test_check_visible_kinds(tmp_path: Path) -> None:
    check_visible(str(tmp_path), "store", "dir")
    check_visible(str(tmp_path), "output directory", "writable")
    check_visible("s3://bucket/x", "store")  # URLs are not local paths
    (tmp_path / "f").write_bytes(b"")
    with pytest.raises(PathNotVisibleError, match=r"is not a directory on executor host"):
        check_visible(str(tmp_path / "f"), "output directory", "writable")
    with pytest.raises(PathNotVisibleError, match=r"^the store /nope/x does not exist on executor host \S+ \(the driver"):
        check_visible("/nope/x", "store", "dir")


def test_preflight_is_skipped_in_local_mode(spark, tmp_path: Path) -> None:
    assert preflight(spark, read={"store": [tmp_path]}, write={"output directory": [tmp_path / "o"]}) == 0


def test_dispatch_commit_names_a_staging_file_the_driver_cannot_see(tmp_path: Path) -> None:
    from mqstore.spark.dispatch import DispatchStreamWriter, StagedDispatch

    writer = DispatchStreamWriter({"path": str(tmp_path), "stagingDir": str(tmp_path / "st")})
    with pytest.raises(PathNotVisibleError, match=r"dispatch staging file .*missing on the driver"):
        writer.commit([StagedDispatch(str(tmp_path / "st" / "gone.arrow"), 0, 3)], 0)


# ------------------------------------------------------------------------------------ jobs, CLI
def test_cli_jobs_resolve_relative_paths_on_the_driver(spark, shared_fixtures: Path, tmp_path: Path,
                                                       monkeypatch: pytest.MonkeyPatch) -> None:
    shutil.copytree(shared_fixtures / "kafka" / "single_default" / "segments", tmp_path / "orders-0")
    monkeypatch.chdir(tmp_path)
    r = CliRunner().invoke(cli, ["spark", "rebuild-index", "kafka", "orders-0", "--out", "out/k", "--json",
                                 "--master", "local[2]"], catch_exceptions=False)
    assert r.exit_code == 0, r.output
    stats = json.loads(r.output.strip().splitlines()[-1])
    assert stats["out"] == str(tmp_path / "out" / "k")
    assert (tmp_path / "out" / "k" / "00000000000000000000.index").exists()
    r = CliRunner().invoke(cli, ["spark", "export", "kafka", "orders-0", "--out", "out/parquet", "--json",
                                 "--master", "local[2]"], catch_exceptions=False)
    assert r.exit_code == 0, r.output
    assert json.loads(r.output.strip().splitlines()[-1])["out"] == str(tmp_path / "out" / "parquet")
