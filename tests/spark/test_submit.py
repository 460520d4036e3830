"""``spark-submit`` runs the ``mqstore spark`` commands with its own master and configuration
(the same code as the embedded default, in a driver that spark-submit started)."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

import mqstore.cli.submit as submit
from mqstore.cli.spark import default_master
from mqstore.storage.kafka.rebuild import rebuild_indexes as kafka_rebuild
from mqstore.storage.rocketmq.rebuild import compare_trees, rebuild_indexes

pytestmark = pytest.mark.spark

SPARK_SUBMIT = Path(sys.executable).with_name("spark-submit")


def _submit(*args: str) -> subprocess.CompletedProcess[str]:
    env = dict(os.environ, PYSPARK_PYTHON=sys.executable, PYSPARK_DRIVER_PYTHON=sys.executable,
               SPARK_LOCAL_IP="127.0.0.1")
    cmd = [str(SPARK_SUBMIT), "--master", "local[2]", "--conf", "spark.ui.enabled=false",
           "--driver-java-options", "-Dlog4j2.configurationFile=file:" + str(Path(submit.__file__).with_name(
               "log4j2.properties")), submit.__file__, *args]
    return subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=900, stdin=subprocess.DEVNULL)


@pytest.fixture(scope="module")
def spark_submit() -> Path:
    if not SPARK_SUBMIT.exists():
        pytest.fail(f"spark-submit not found beside {sys.executable} (pyspark is a test dependency)")
    return SPARK_SUBMIT


def test_default_master_yields_to_spark_submit(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("PYSPARK_GATEWAY_PORT", raising=False)
    assert default_master() == "local[*]"
    monkeypatch.setenv("PYSPARK_GATEWAY_PORT", "40000")
    assert default_master() == ""


def test_print_path() -> None:
    out = subprocess.run([sys.executable, "-m", "mqstore.cli.submit", "--print-path"], capture_output=True,
                         text=True, check=True).stdout.strip()
    assert Path(out).resolve() == Path(submit.__file__).resolve()


def test_spark_submit_rebuilds_like_the_local_commands(spark_submit: Path, shared_fixtures: Path,
                                                       tmp_path: Path) -> None:
    store = shared_fixtures / "rocketmq" / "basic" / "store"
    manifest = json.loads((shared_fixtures / "rocketmq" / "basic" / "manifest.json").read_text())["config"]
    geometry = ["--slots", str(manifest["maxHashSlotNum"]), "--items", str(manifest["maxIndexNum"]),
                "--cq-file-size", str(manifest["mappedFileSizeConsumeQueue"])]
    r = _submit("rebuild-index", "rocketmq", str(store), "--out", str(tmp_path / "rmq"), "--json", *geometry)
    assert r.returncode == 0, r.stderr[-3000:]
    stats = json.loads(r.stdout.strip().splitlines()[-1])
    assert stats["messages"] > 0
    from mqstore import StoreConfig

    cfg = StoreConfig(commit_log_file_size=manifest["mappedFileSizeCommitLog"],
                      consume_queue_file_size=manifest["mappedFileSizeConsumeQueue"],
                      hash_slot_num=manifest["maxHashSlotNum"], index_num=manifest["maxIndexNum"])
    rebuild_indexes(store, tmp_path / "local", config=cfg)
    assert compare_trees(tmp_path / "local", tmp_path / "rmq") == []
    assert (tmp_path / "local" / "checkpoint").read_bytes() == (tmp_path / "rmq" / "checkpoint").read_bytes()
    # a Kafka partition in the same way
    part = tmp_path / "orders-0"
    shutil.copytree(shared_fixtures / "kafka" / "single_default" / "segments", part)
    r = _submit("rebuild-index", "kafka", str(part), "--out", str(tmp_path / "kafka"), "--json")
    assert r.returncode == 0, r.stderr[-3000:]
    (tmp_path / "kafka-local").mkdir()
    kafka_rebuild(part / "00000000000000000000.log", tmp_path / "kafka-local")
    for name in ("00000000000000000000.index", "00000000000000000000.timeindex"):
        assert (tmp_path / "kafka" / name).read_bytes() == (tmp_path / "kafka-local" / name).read_bytes()


def test_spark_submit_reports_bad_arguments(spark_submit: Path, tmp_path: Path) -> None:
    r = _submit("rebuild-index", "rocketmq", str(tmp_path / "missing"), "--out", str(tmp_path / "o"))
    out = r.stdout + r.stderr  # spark-submit passes the driver's stderr on through its stdout
    assert r.returncode == 2, out[-3000:]
    assert "does not exist" in out
    assert "Traceback" not in out
