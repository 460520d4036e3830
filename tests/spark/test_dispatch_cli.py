"""CLI: `mqstore spark dispatch | query-keys | export` (CliRunner, in the test session)."""

from __future__ import annotations

import json
import random
from pathlib import Path

from click.testing import CliRunner

from mqstore.api.rocketmq import MessageStore, StoreConfig
from mqstore.cli.main import cli
from mqstore.storage.rocketmq.rebuild import compare_trees, rebuild_indexes

GEOMETRY = dict(commit_log_file_size=64 * 1024, consume_queue_file_size=400, hash_slot_num=64, index_num=300)
GEOMETRY_ARGS = ["--slots", "64", "--items", "300", "--cq-file-size", "400"]


def run(*args: str) -> tuple[int, str, str]:
    res = CliRunner().invoke(cli, list(args), catch_exceptions=False)
    return res.exit_code, res.stdout, res.stderr


def make_store(root: Path, n: int, seed: int = 1) -> None:
    rng = random.Random(seed)
    with MessageStore.open(root, StoreConfig(**GEOMETRY, dispatch_enabled=False)) as store:
        store.put_batch([dict(topic=rng.choice(["orders", "audit"]), queue_id=i % 2, body=b"x" * rng.randint(1, 200),
                              keys=[f"k{i}", "shared"]) for i in range(n)])


def test_dispatch_once_cli(spark, tmp_path: Path) -> None:
    root = tmp_path / "store"
    make_store(root, 700)
    code, out, err = run("spark", "dispatch", str(root), "--checkpoint", str(tmp_path / "ckpt"), "--once", "--json",
                         *GEOMETRY_ARGS, "--master", "local[2]")
    assert code == 0, err
    totals = json.loads(out.strip().splitlines()[-1])
    assert totals["messages"] == 700 and totals["commitLogOffset"] > 0
    rebuild_indexes(root, tmp_path / "r", config=StoreConfig(**GEOMETRY))
    assert compare_trees(root, tmp_path / "r") == []
    code, out, _ = run("spark", "dispatch", str(root), "--checkpoint", str(tmp_path / "ckpt"), "--once", *GEOMETRY_ARGS)
    assert code == 0 and "dispatch" in out  # a table; nothing new to dispatch


def test_dispatch_cli_errors(spark, tmp_path: Path) -> None:
    code, _, err = run("spark", "dispatch", str(tmp_path / "missing"), "--checkpoint", str(tmp_path / "c"), "--once")
    assert code == 2 and err.startswith("error:")
    make_store(tmp_path / "s", 5)
    code, _, err = run("spark", "dispatch", str(tmp_path / "s"), "--checkpoint", str(tmp_path / "c"), "--once",
                       "--max-bytes-per-trigger", "0")
    assert code == 2 and "max-bytes-per-trigger" in err
    code, _, err = run("spark", "dispatch", str(tmp_path / "s"), "--checkpoint", str(tmp_path / "c"), "--conf", "nokey")
    assert code == 2 and "key=value" in err


def test_query_keys_cli(spark, shared_fixtures: Path, tmp_path: Path) -> None:
    root = shared_fixtures / "rocketmq" / "basic" / "store"
    manifest = json.loads((root.parent / "manifest.json").read_text())
    keys = sorted({k for m in manifest["messages"] if m["topic"] == "TopicTest" for k in (m["keys"] or "").split(" ") if k})
    kf = tmp_path / "keys.txt"
    kf.write_text("\n".join([*keys, "absent"]) + "\n", encoding="utf-8")
    code, out, err = run("spark", "query-keys", str(root), "--topic", "TopicTest", "--keys-file", str(kf), "--json")
    assert code == 0, err
    got = sorted((d["key"], d["commitLogOffset"]) for d in map(json.loads, out.strip().splitlines()))
    cfg = manifest["config"]
    config = StoreConfig(commit_log_file_size=cfg["mappedFileSizeCommitLog"], hash_slot_num=cfg["maxHashSlotNum"],
                         index_num=cfg["maxIndexNum"], consume_queue_file_size=cfg["mappedFileSizeConsumeQueue"])
    with MessageStore.open(root, config, read_only=True) as store:
        expected = sorted((k, m.commit_log_offset) for k in keys for m in store.query_by_key("TopicTest", k))
    assert got == expected and got
    code, out, _ = run("spark", "query-keys", str(root), "--topic", "TopicTest", "--keys-file", str(kf), "--no-body")
    assert code == 0 and "messages for" in out
    code, _, err = run("spark", "query-keys", str(root), "--topic", "TopicTest", "--keys-file", str(tmp_path / "nope"))
    assert code == 2 and "does not exist" in err
    code, _, err = run("spark", "query-keys", str(root), "--topic", "bad topic!", "--keys-file", str(kf))
    assert code == 2 and "topic" in err


def test_export_cli(spark, shared_fixtures: Path, tmp_path: Path) -> None:
    root = shared_fixtures / "rocketmq" / "basic" / "store"
    code, out, err = run("spark", "export", "rocketmq", str(root), "--out", str(tmp_path / "o"), "--json",
                         "--option", "topics=TopicTest")
    assert code == 0, err
    res = json.loads(out.strip().splitlines()[-1])
    assert res["rows"] == sum(1 for m in json.loads((root.parent / "manifest.json").read_text())["messages"]
                              if m["topic"] == "TopicTest")
    code, _, err = run("spark", "export", "rocketmq", str(root), "--out", str(tmp_path / "o"))
    assert code == 2 and "not empty" in err
    code, _, err = run("spark", "export", "kafka", str(root), str(root), "--out", str(tmp_path / "k"))
    assert code == 2 and "one log" in err
    code, _, err = run("spark", "export", "rocketmq", str(root), "--out", str(tmp_path / "p"), "--option", "oops")
    assert code == 2 and "key=value" in err

