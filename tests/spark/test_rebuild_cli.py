"""`mqstore spark rebuild-index rocketmq|kafka`: same files as the local commands, JSON stats,
typed errors with exit code 2 (the commands join the session-scoped test session)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import CliRunner

from mqstore.cli.main import cli
from mqstore.storage.rocketmq.rebuild import compare_trees

pytestmark = pytest.mark.spark

MASTER = ["--master", "local[2]"]


def run(*args: str):
    return CliRunner().invoke(cli, list(args), catch_exceptions=False)


def test_rocketmq_command_equals_local_command(spark, shared_fixtures: Path, tmp_path: Path) -> None:
    store = shared_fixtures / "rocketmq" / "basic" / "store"
    # geometry detected from the store's own files, as the local command does
    local = run("rocketmq", "rebuild-index", str(store), "--out", str(tmp_path / "local"), "--json")
    assert local.exit_code == 0, local.output
    r = run("spark", "rebuild-index", "rocketmq", str(store), "--out", str(tmp_path / "spark"), "--json", *MASTER)
    assert r.exit_code == 0, r.output
    stats = json.loads(r.output.strip().splitlines()[-1])
    assert stats["messages"] == 150 and stats["index_files"] == 1 and stats["stop_error"] is None
    assert compare_trees(tmp_path / "local", tmp_path / "spark") == []
    assert compare_trees(store, tmp_path / "spark") == []
    assert (tmp_path / "local" / "checkpoint").read_bytes() == (tmp_path / "spark" / "checkpoint").read_bytes()
    r = run("spark", "rebuild-index", "rocketmq", str(store), "--out", str(tmp_path / "small"), "--slots", "5",
            "--items", "9", "--cq-file-size", "100", *MASTER)
    assert r.exit_code == 0, r.output
    assert "rebuilt on Spark" in r.output
    local = run("rocketmq", "rebuild-index", str(store), "--out", str(tmp_path / "small-local"), "--slots", "5",
                "--items", "9", "--cq-file-size", "100")
    assert local.exit_code == 0, local.output
    assert compare_trees(tmp_path / "small-local", tmp_path / "small") == []


@pytest.mark.parametrize("args", [
    ["--slots", "0"], ["--items", "1"], ["--cq-file-size", "-5"], ["--conf", "novalue"],
])
def test_rocketmq_bad_arguments_exit_2(spark, shared_fixtures: Path, tmp_path: Path, args: list[str]) -> None:
    store = shared_fixtures / "rocketmq" / "basic" / "store"
    r = CliRunner().invoke(cli, ["spark", "rebuild-index", "rocketmq", str(store), "--out", str(tmp_path / "o"),
                                 *MASTER, *args])
    assert r.exit_code == 2
    assert "error:" in r.output and "Traceback" not in r.output


def test_rocketmq_missing_store_and_out_inside_commitlog(spark, shared_fixtures: Path, tmp_path: Path) -> None:
    r = CliRunner().invoke(cli, ["spark", "rebuild-index", "rocketmq", str(tmp_path / "nope"), "--out",
                                 str(tmp_path / "o"), *MASTER])
    assert r.exit_code == 2 and "does not exist" in r.output
    store = shared_fixtures / "rocketmq" / "basic" / "store"
    r = CliRunner().invoke(cli, ["spark", "rebuild-index", "rocketmq", str(store), "--out",
                                 str(store / "commitlog" / "sub"), *MASTER])
    assert r.exit_code == 2 and "inside the CommitLog" in r.output
    r = CliRunner().invoke(cli, ["spark", "rebuild-index", "rocketmq", str(store), *MASTER])
    assert r.exit_code == 2 and "--out" in r.output


def test_kafka_command_equals_local_command(spark, shared_fixtures: Path, tmp_path: Path) -> None:
    part = shared_fixtures / "kafka" / "multi_segment_roll_bytes" / "segments"
    local = run("kafka", "rebuild-index", str(part), "--out", str(tmp_path / "local"), "--index-interval-bytes", "2048")
    assert local.exit_code == 0, local.output
    r = run("spark", "rebuild-index", "kafka", str(part), "--out", str(tmp_path / "spark"),
            "--index-interval-bytes", "2048", "--json", *MASTER)
    assert r.exit_code == 0, r.output
    stats = json.loads(r.output.strip().splitlines()[-1])
    assert stats["segments"] == len(list(part.glob("*.log"))) == len(stats["results"])
    files = sorted(p.name for p in (tmp_path / "local").iterdir())
    assert files == sorted(p.name for p in (tmp_path / "spark").iterdir())
    for name in files:
        assert (tmp_path / "local" / name).read_bytes() == (tmp_path / "spark" / name).read_bytes()
    r = run("spark", "rebuild-index", "kafka", str(part), "--out", str(tmp_path / "table"), *MASTER)
    assert r.exit_code == 0 and "rebuilt on Spark" in r.output


def test_kafka_truncated_segment_warns(spark, shared_fixtures: Path, tmp_path: Path) -> None:
    part = shared_fixtures / "kafka" / "corrupt_tail_recover" / "corrupted_input"
    r = CliRunner().invoke(cli, ["spark", "rebuild-index", "kafka", str(part), "--out", str(tmp_path / "o"), *MASTER])
    assert r.exit_code == 0
    assert "warning:" in r.output and "invalid bytes" in r.output


@pytest.mark.parametrize("args", [["--index-interval-bytes", "-1"], ["--max-index-bytes", "0"]])
def test_kafka_bad_arguments_exit_2(spark, shared_fixtures: Path, tmp_path: Path, args: list[str]) -> None:
    part = shared_fixtures / "kafka" / "single_default" / "segments"
    r = CliRunner().invoke(cli, ["spark", "rebuild-index", "kafka", str(part), "--out", str(tmp_path / "o"),
                                 *MASTER, *args])
    assert r.exit_code == 2 and "error:" in r.output
    r = CliRunner().invoke(cli, ["spark", "rebuild-index", "kafka", str(tmp_path / "missing"), "--out",
                                 str(tmp_path / "o"), *MASTER])
    assert r.exit_code == 2 and "not found" in r.output
