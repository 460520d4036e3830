"""CommitLog directories as operators configure them: ``storePathCommitLog`` elsewhere than
``STORE/commitlog``, a comma-separated list of directories (the broker's round-robin
MultiPathMappedFileQueue) and ``readOnlyCommitLogStorePaths``."""

from __future__ import annotations

import base64
import hashlib
import json
import os
import shutil
from itertools import count
from pathlib import Path

import pytest
from click.testing import CliRunner

from mqstore.api.rocketmq import MessageStore
from mqstore.cli.main import cli
from mqstore.errors import PathOutsideStoreError, StoreError
from mqstore.storage.rocketmq.config import StoreConfig
from mqstore.storage.rocketmq.rebuild import compare_trees, rebuild_indexes
from mqstore.storage.rocketmq.verify import verify_store

SEG = 4096


def run(*args: str):
    return CliRunner().invoke(cli, list(args), catch_exceptions=False)


def tree_hash(*roots: Path) -> dict[str, str]:
    return {str(p): hashlib.sha256(p.read_bytes()).hexdigest()
            for root in roots for p in sorted(root.rglob("*")) if p.is_file()}


def config(paths: str | None, readonly: str | None = None) -> StoreConfig:
    ticks = count(1_700_000_000_000, 3)
    return StoreConfig(store_path_commit_log=paths, read_only_commit_log_store_paths=readonly,
                       commit_log_file_size=SEG, consume_queue_file_size=20 * 100, hash_slot_num=50, index_num=200,
                       background_services=False, clock=lambda: next(ticks))


def fill(root: Path, cfg: StoreConfig, n: int = 120, start: int = 0) -> list:
    with MessageStore.open(root, cfg) as s:
        return [s.put("PathTopic", (b"%05d" % i) * 40, i % 3, keys=f"key{i}", tags="T") for i in range(start, start + n)]


def test_segments_spread_round_robin_over_sorted_paths(tmp_path: Path) -> None:
    dirs = [tmp_path / "disk-b" / "cl", tmp_path / "disk-a" / "cl", tmp_path / "disk-c" / "cl"]
    spec = ",".join(str(d) for d in dirs)
    results = fill(tmp_path / "store", config(spec))
    assert not (tmp_path / "store" / "commitlog").exists()
    placed = {p.name: p.parent for d in dirs if d.is_dir() for p in d.iterdir()}
    ordered = sorted(str(d) for d in dirs)  # the broker sorts the path strings
    assert len(placed) >= 7
    for name, parent in placed.items():
        assert str(parent) == ordered[(int(name) // SEG) % 3], name
    # read back through a new open, by offset and by queue
    with MessageStore.open(tmp_path / "store", config(spec), read_only=True) as s:
        for i, r in enumerate(results):
            assert s.get_by_offset(r.commit_log_offset).body == (b"%05d" % i) * 40
        assert [m.queue_offset for m in s.get("PathTopic", 1, 0, 100)] == list(range(40))
    assert verify_store(tmp_path / "store", config(spec)).problems == []
    # rebuild from the three directories gives the files the live dispatch wrote
    stats = rebuild_indexes(tmp_path / "store", tmp_path / "rebuilt", config=config(spec))
    assert stats.messages == 120 and compare_trees(tmp_path / "store", tmp_path / "rebuilt") == []
    # appending after a reopen continues the round robin
    more = fill(tmp_path / "store", config(spec), n=40, start=120)
    assert more[0].queue_offset == 40 and more[0].commit_log_offset > results[-1].commit_log_offset
    for d in dirs:
        for p in d.iterdir():
            assert str(p.parent) == ordered[(int(p.name) // SEG) % 3]


def test_cli_commitlog_option_on_every_command(tmp_path: Path) -> None:
    dirs = [tmp_path / "d1", tmp_path / "d2"]
    spec = ",".join(str(d) for d in dirs)
    fill(tmp_path / "store", config(spec))
    store = str(tmp_path / "store")
    before = tree_hash(tmp_path)
    r = run("rocketmq", "inspect", store, "--commitlog", spec, "--json")
    assert r.exit_code == 0, r.output
    info = json.loads(r.output)
    assert info["commitLog"]["dirs"] == [str(d) for d in dirs] and info["commitLog"]["segmentSize"] == SEG
    assert len(info["commitLog"]["segments"]) == len(list(dirs[0].iterdir())) + len(list(dirs[1].iterdir()))
    r = run("rocketmq", "dump", store, "--commitlog", spec, "--json")
    assert r.exit_code == 0 and len(r.output.splitlines()) == 120
    r = run("rocketmq", "get", store, "--commitlog", spec, "--topic", "PathTopic", "--queue", "2", "--offset", "39",
            "--json")
    assert r.exit_code == 0 and json.loads(r.output)["body"]
    r = run("rocketmq", "query-key", store, "--commitlog", spec, "--topic", "PathTopic", "--key", "key7", "--json")
    assert r.exit_code == 0 and json.loads(r.output)["queueOffset"] == 2
    r = run("rocketmq", "query-time", store, "--commitlog", spec, "--topic", "PathTopic", "--queue", "0",
            "--timestamp", "0")
    assert r.exit_code == 0 and r.output.strip() == "0"
    r = run("rocketmq", "verify", store, "--commitlog", spec)
    assert r.exit_code == 0, r.output
    r = run("rocketmq", "consumers", store, "--commitlog", spec)
    assert r.exit_code == 0
    assert tree_hash(tmp_path) == before
    # without the option the directory has no CommitLog: one error line naming the option (issue 18:
    # a directory without commitlog/ is never reported as an empty store), never a traceback
    r = run("rocketmq", "dump", store, "--json")
    assert r.exit_code == 2 and r.stdout == ""
    assert r.stderr.startswith("error: ") and "--commitlog" in r.stderr and len(r.stderr.splitlines()) == 1
    r = run("rocketmq", "rebuild-index", store, "--commitlog", spec, "--out", str(tmp_path / "out"), "--json")
    assert r.exit_code == 0 and json.loads(r.output)["messages"] == 120
    assert compare_trees(tmp_path / "store", tmp_path / "out") == []


def test_readonly_paths_are_read_never_written(tmp_path: Path) -> None:
    old, new = tmp_path / "old", tmp_path / "new"
    fill(tmp_path / "store", config(str(old)))
    n_old = len(list(old.iterdir()))
    frozen = tree_hash(old)
    cfg = config(f"{old},{new}", readonly=str(old))
    with MessageStore.open(tmp_path / "store", cfg) as s:
        assert len(s.get("PathTopic", 0, 0, 100)) == 40
        r = [s.put("PathTopic", b"x" * 300, 0) for _ in range(30)]
        assert r[0].queue_offset == 40
    # as the broker: no segment is created in a read-only path; the partly written last segment
    # found there is still appended to (the read-only rule only governs where files are created)
    last = str(sorted(old.iterdir())[-1])
    assert len(list(old.iterdir())) == n_old
    assert {k: v for k, v in tree_hash(old).items() if k != last} == {k: v for k, v in frozen.items() if k != last}
    assert len(list(new.iterdir())) >= 2
    r = run("rocketmq", "get", str(tmp_path / "store"), "--commitlog", f"{old},{new}", "--readonly-commitlog", str(old),
            "--topic", "PathTopic", "--queue", "0", "--offset", "38", "--count", "4", "--json")
    assert r.exit_code == 0, r.output
    assert [json.loads(x)["queueOffset"] for x in r.output.splitlines()] == [38, 39, 40, 41]
    assert verify_store(tmp_path / "store", cfg).problems == []


def test_single_commitlog_elsewhere_and_symlink(tmp_path: Path) -> None:
    elsewhere = tmp_path / "fast-disk" / "commitlog"
    fill(tmp_path / "store", config(str(elsewhere)))
    assert len(list(elsewhere.iterdir())) >= 7
    os.symlink(elsewhere, tmp_path / "store" / "commitlog")
    with pytest.raises(PathOutsideStoreError, match="--commitlog DIR"):
        MessageStore.open(tmp_path / "store", config(None), read_only=True)
    r = CliRunner().invoke(cli, ["rocketmq", "verify", str(tmp_path / "store")])
    assert r.exit_code == 2 and r.output.startswith("error: ") and "--commitlog" in r.output
    r = run("rocketmq", "verify", str(tmp_path / "store"), "--commitlog", str(elsewhere))
    assert r.exit_code == 0, r.output


def test_segment_in_two_directories_is_an_error(tmp_path: Path) -> None:
    a, b = tmp_path / "a", tmp_path / "b"
    fill(tmp_path / "store", config(f"{a},{b}"))
    first = sorted(a.iterdir())[0]
    shutil.copy(first, b / first.name)
    with pytest.raises(StoreError, match="in two CommitLog directories"):
        MessageStore.open(tmp_path / "store", config(f"{a},{b}"), read_only=True)
    r = CliRunner().invoke(cli, ["rocketmq", "inspect", str(tmp_path / "store"), "--commitlog", f"{a},{b}"])
    assert r.exit_code == 2 and r.output.count("error:") == 1


def _leaf_commands(group, prefix: str = "") -> dict:
    out = {}
    for name, cmd in group.commands.items():
        if hasattr(cmd, "commands"):
            out.update(_leaf_commands(cmd, f"{prefix}{name} "))
        else:
            out[f"{prefix}{name}"] = cmd
    return out


def test_every_rocketmq_command_takes_the_commitlog_options() -> None:
    leaves = _leaf_commands(cli.commands["rocketmq"])
    assert {"inspect", "dump", "get", "verify", "report", "get-by-msgid", "consumers"} <= set(leaves)
    # (these two read only the batch queue files / the compaction store, never the CommitLog)
    no_commitlog = {"bcq inspect", "bcq dump-compaction"}
    missing = [n for n, c in leaves.items()
               if n not in no_commitlog and not {"commitlog", "readonly_commitlog"} <= {p.name for p in c.params}]
    assert missing == []


def test_report_and_get_by_msgid_with_the_commitlog_elsewhere(tmp_path: Path) -> None:
    elsewhere = tmp_path / "fast-disk" / "commitlog"
    results = fill(tmp_path / "store", config(str(elsewhere)))
    before = tree_hash(tmp_path / "store", elsewhere)
    r = run("rocketmq", "report", str(tmp_path / "store"), "--json", "--commitlog", str(elsewhere))
    assert r.exit_code == 0, r.output
    assert json.loads(r.output)["verify"]["ok"] is True
    r = CliRunner().invoke(cli, ["rocketmq", "report", str(tmp_path / "store"), "--json"])
    assert r.exit_code == 2 and r.output.startswith("error: ")
    r = run("rocketmq", "get-by-msgid", str(tmp_path / "store"), results[5].msg_id, "--json", "--commitlog",
            str(elsewhere))
    assert r.exit_code == 0, r.output
    assert base64.b64decode(json.loads(r.output.splitlines()[0])["body"]) == (b"%05d" % 5) * 40
    assert tree_hash(tmp_path / "store", elsewhere) == before
