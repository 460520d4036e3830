"""The RocksDB ConsumeQueue (storeType=defaultRocksDB): stores made by the test writer following the
documented layout; every ConsumeQueue answer equal to the file ConsumeQueue of the same store; the
CLI commands on a RocksDB store; nothing written by read-only commands; garbage directories and a
missing binding as one typed error; rebuild-index --to file-cq; consumer offsets from the RocksDB
config stores."""

from __future__ import annotations

import json
import shutil
import sys
from pathlib import Path

import pytest
from click.testing import CliRunner
from rocksdict import Options, Rdict

from mqstore.api.rocketmq import MessageStore
from mqstore.cli.main import cli
from mqstore.errors import RocksDBError
from mqstore.formats.rocketmq import rocksdb_cq as fmt
from mqstore.storage.rocketmq import config_files
from mqstore.storage.rocketmq.config import STORE_TYPE_FILE, STORE_TYPE_ROCKSDB, StoreConfig
from mqstore.storage.rocketmq.layout import store_type_of
from mqstore.storage.rocketmq.rebuild import compare_trees
from mqstore.storage.rocketmq.verify import verify_store

from .rocksdb_support import (
    tree_digest,
    write_rocksdb_consumequeue,
    write_v1_consumer_offsets,
    write_v2_consumer_offsets,
)

T0 = 1_700_000_000_000
TOPICS = ("orders", "audit", "%RETRY%billing")


def run(*args: str):
    return CliRunner().invoke(cli, [str(a) for a in args], catch_exceptions=False)


def make_file_store(root: Path, n: int = 600) -> Path:
    """Several topics and queues, tags, keys, runs of equal store times, several CommitLog segments."""
    ticks = iter([T0 + (i // 3) * 5 for i in range(10 * n)])
    cfg = {"commit_log_file_size": 1 << 15, "background_services": False, "clock": lambda: next(ticks)}
    with MessageStore.open(root, cfg) as s:
        for i in range(n):
            s.put(TOPICS[i % 3], b"m%05d" % i + b"." * (i % 37), queue_id=i % 4 if i % 3 else i % 2,
                  tags=f"tag{i % 5}", keys=[f"k{i}"])
        s.dispatch()
    return root


@pytest.fixture(scope="module")
def stores(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    """(file-ConsumeQueue store, the same store with its ConsumeQueue in RocksDB)."""
    base = tmp_path_factory.mktemp("rocks")
    files = make_file_store(base / "files")
    rocks = base / "rocks"
    shutil.copytree(files, rocks)
    write_rocksdb_consumequeue(rocks)
    return files, rocks


def queues_of(s: MessageStore) -> list[tuple[str, int]]:
    return [(t, q) for t, qs in s.topics().items() for q in qs]


def assert_same_answers(files: Path, rocks: Path) -> None:
    with MessageStore.open(files, read_only=True) as a, MessageStore.open(rocks, read_only=True) as b:
        assert b.engine.store_type == STORE_TYPE_ROCKSDB and a.engine.store_type == STORE_TYPE_FILE
        assert a.topics() == b.topics() and queues_of(a)
        for t, q in queues_of(a):
            lo, hi = a.min_offset(t, q), a.max_offset(t, q)
            assert (lo, hi) == (b.min_offset(t, q), b.max_offset(t, q)), (t, q)
            ca, cb = a.engine.consume_queue(t, q), b.engine.consume_queue(t, q)
            assert ca.max_physic_offset == cb.max_physic_offset
            assert ca.get_units(0, 10_000).tolist() == cb.get_units(0, 10_000).tolist()
            for start in range(lo, hi + 1, 7):
                for count in (1, 5, 64):
                    assert ([m.commit_log_offset for m in a.get(t, q, start, count)]
                            == [m.commit_log_offset for m in b.get(t, q, start, count)])
                assert ([m.commit_log_offset for m in a.get_by_tag(t, q, "tag1 || tag3", start, 9)]
                        == [m.commit_log_offset for m in b.get_by_tag(t, q, "tag1 || tag3", start, 9)])
            for off in (lo - 1, lo, (lo + hi) // 2, hi - 1, hi):
                ua, ub = ca.get_unit(off), cb.get_unit(off)
                assert ua == ub, (t, q, off)
            for ts in range(T0 - 7, T0 + 5 * 600 // 3 + 20, 4):
                for boundary in ("lower", "upper"):
                    assert a.offset_for_time(t, q, ts, boundary) == b.offset_for_time(t, q, ts, boundary), \
                        (t, q, ts, boundary)


def test_reader_answers_every_question_as_the_file_consumequeue(stores):
    files, rocks = stores
    assert sorted(p.name for p in (rocks / "consumequeue").iterdir() if p.is_dir()) == []
    assert store_type_of(rocks) == STORE_TYPE_ROCKSDB and store_type_of(files) == STORE_TYPE_FILE
    assert_same_answers(files, rocks)


def test_min_entries_and_deleted_segments(stores, tmp_path):
    """The min entries the broker writes when it corrects a minimum, and a CommitLog whose first
    segments are gone: the minimum follows the first live unit in both kinds of queue."""
    files, _ = stores
    a, b = tmp_path / "a", tmp_path / "b"
    shutil.copytree(files, a)
    shutil.copytree(files, b)
    write_rocksdb_consumequeue(b, min_entries=True)
    assert_same_answers(a, b)
    for root in (a, b):
        for seg in sorted((root / "commitlog").iterdir())[:2]:
            seg.unlink()
    assert_same_answers(a, b)
    with MessageStore.open(b, read_only=True) as s:
        assert all(s.min_offset(t, q) > 0 for t, q in queues_of(s))


def test_cli_commands_on_a_rocksdb_store_write_nothing(stores, tmp_path):
    files, rocks = stores
    for root in (files, rocks):
        (root / "config").mkdir(exist_ok=True)
        (root / "config" / "consumerOffset.json").write_text(
            '{"offsetTable":{"orders@billing":{0:40,1:7},"audit@billing":{0:3}}}')
    before = tree_digest(rocks)
    out = {}
    for root in (files, rocks):
        got = {}
        r = run("rocketmq", "get", root, "--topic", "orders", "--queue", 0, "--offset", 5, "--count", 4, "--json")
        assert r.exit_code == 0, r.output
        got["get"] = [json.loads(x)["commitLogOffset"] for x in r.output.splitlines()] if r.output.startswith("{") \
            else r.output
        r = run("rocketmq", "get", root, "--topic", "audit", "--queue", 1, "--offset", 0, "--tag", "tag2", "--json")
        got["tag"] = r.output
        r = run("rocketmq", "query-time", root, "--topic", "audit", "--queue", 2, "--timestamp", T0 + 400, "--json")
        got["time"] = json.loads(r.output)
        r = run("rocketmq", "consumers", root, "--json")
        assert r.exit_code == 0, r.output
        got["consumers"] = [json.loads(x) for x in r.output.splitlines()]
        r = run("rocketmq", "dump", root, "--topic", "orders", "--limit", 3, "--json")
        got["dump"] = r.output
        r = run("rocketmq", "verify", root, "--json")
        assert r.exit_code == 0, r.output
        v = json.loads(r.output)
        got["verify"] = (v["messages"], v["cqUnits"], v["ok"])
        out[root] = got
    assert out[files] == out[rocks]
    assert any(row["diff"] > 0 for row in out[rocks]["consumers"])
    r = run("rocketmq", "inspect", rocks, "--json")
    assert r.exit_code == 0, r.output
    info = json.loads(r.output)
    assert info["storeType"] == "defaultRocksDB"
    db = info["rocksdbConsumeQueue"]
    assert db["columnFamilies"] == ["default", "offset"] and db["queues"] == 10
    assert {"CURRENT", "IDENTITY"} <= {f["name"] for f in db["files"]}
    assert db["dispatchedPhyOffset"] == info["commitLog"]["maxOffset"]
    with MessageStore.open(files, read_only=True) as s:
        want = [(t, q, s.min_offset(t, q), s.max_offset(t, q)) for t, q in queues_of(s)]
    assert sorted((q["topic"], q["queueId"], q["minOffset"], q["maxOffset"]) for q in info["queues"]) == sorted(want)
    text = run("rocketmq", "inspect", rocks)
    assert "RocksDB database (storeType=defaultRocksDB)" in text.output and "CURRENT" in text.output
    r = run("rocketmq", "report", rocks, "--json")
    assert r.exit_code == 0, r.output
    assert tree_digest(rocks) == before


def test_explicit_store_type_wins(stores):
    _, rocks = stores
    with MessageStore.open(rocks, StoreConfig(store_type="default", commit_log_file_size=1 << 15),
                           read_only=True) as s:
        assert s.engine.store_type == "default" and s.topics() == {}
    r = run("rocketmq", "inspect", rocks, "--store-type", "default", "--json")
    assert json.loads(r.output)["queues"] == []
    with pytest.raises(Exception, match="store_type"):
        StoreConfig(store_type="rocks")


def test_writable_open_and_dispatcher_are_refused(stores):
    _, rocks = stores
    before = tree_digest(rocks)
    with pytest.raises(RocksDBError, match="never writes"):
        MessageStore.open(rocks)
    from mqstore.spark.dispatch import store_config_for

    with pytest.raises(RocksDBError, match="file ConsumeQueues only"):
        store_config_for(rocks)
    r = run("rocketmq", "rebuild-index", rocks)
    assert r.exit_code == 2 and r.output.startswith("error:") and "--to file-cq" in r.output
    assert tree_digest(rocks) == before


def test_rebuild_to_file_cq_migrates_back(stores, tmp_path):
    files, rocks = stores
    out = tmp_path / "out"
    r = run("rocketmq", "rebuild-index", rocks, "--to", "file-cq", "--out", out, "--json")
    assert r.exit_code == 0, r.output
    assert compare_trees(files, out, ("consumequeue", "index")) == []
    inplace = tmp_path / "inplace"
    shutil.copytree(rocks, inplace)
    r = run("rocketmq", "rebuild-index", inplace, "--to", "file-cq")
    assert r.exit_code == 0, r.output
    names = {p.name for p in (inplace / "consumequeue").iterdir()}
    assert {"CURRENT", "orders", "audit", "%RETRY%billing"} <= names  # the database stays beside the queues
    diff = compare_trees(files, inplace, ("consumequeue",))
    db_files = {p.name for p in (inplace / "consumequeue").iterdir() if p.is_file()}
    assert diff and all(d == f"only in {inplace}: consumequeue/{d.rsplit('/', 1)[1]}" and d.rsplit("/", 1)[1] in db_files
                        for d in diff), diff
    assert store_type_of(inplace) == STORE_TYPE_FILE
    info = json.loads(run("rocketmq", "inspect", inplace, "--json").output)
    assert "CURRENT" in info["rocksdbConsumeQueueNotRead"] and info["rocksdbConsumeQueue"] is None
    assert "also holds a RocksDB database" in run("rocketmq", "inspect", inplace).output
    assert verify_store(inplace, StoreConfig(commit_log_file_size=1 << 15)).ok
    with MessageStore.open(inplace, read_only=True, config={"store_type": "defaultRocksDB"}) as s:
        assert s.engine.store_type == STORE_TYPE_ROCKSDB and s.topics()  # the old database, on request


def test_verify_finds_units_that_disagree_with_the_commitlog(stores, tmp_path):
    files, _ = stores
    bad = tmp_path / "bad"
    shutil.copytree(files, bad)
    write_rocksdb_consumequeue(bad)
    db = Rdict(str(bad / "consumequeue"), Options(raw_mode=True), column_families={"offset": Options(raw_mode=True)})
    try:
        key = fmt.encode_cq_key("orders", 0, 3)
        u = fmt.decode_cq_value(db[key])
        db[key] = fmt.encode_cq_value(u.commit_log_offset, u.size, u.tags_code + 1, u.store_timestamp)
        del db[fmt.encode_cq_key("audit", 1, 2)]
        db[b"\x00\x00\x00\x09garbage"] = b"xx"
        key = fmt.encode_cq_key("orders", 1, 10)
        u = fmt.decode_cq_value(db[key])
        db[key] = fmt.encode_cq_value(u.commit_log_offset, u.size + 1, u.tags_code, u.store_timestamp)
        db[fmt.encode_cq_key("orders", 1, 11)] = bytes(20)  # not a 28-byte value
        db.get_column_family("offset")[fmt.encode_offset_key("audit", 2, "max")] = fmt.encode_offset_value(1, 999)
        db.flush()
    finally:
        db.close()
    (bad / "consumequeue" / "rocksdict-config.json").unlink()
    r = run("rocketmq", "verify", bad, "--json")
    assert r.exit_code == 1, r.output
    problems = "\n".join(json.loads(r.output)["problems"])
    assert "orders/0: unit 3" in problems and "tags code" in problems
    assert "audit/1" in problems and "missing" in problems
    assert "does not have the topic-length layout" in problems
    assert "audit/2: the max entry names queue offset 999" in problems
    assert "orders/1: unit 10 points at offset" in problems and "value of 20 bytes" in problems
    # the vectorised verify and its one-at-a-time twin agree on the RocksDB problems too
    from mqstore.storage.rocketmq.verify import verify_store_reference

    cfg = StoreConfig(commit_log_file_size=1 << 15)
    fast, ref = verify_store(bad, cfg), verify_store_reference(bad, cfg)
    assert (fast.problems, fast.cq_units, fast.messages) == (ref.problems, ref.cq_units, ref.messages)
    assert fast.problems == json.loads(r.output)["problems"]


def test_garbage_directory_and_missing_binding_are_one_error(stores, tmp_path, monkeypatch):
    files, _ = stores
    junk = tmp_path / "junk"
    shutil.copytree(files, junk)
    shutil.rmtree(junk / "consumequeue")
    (junk / "consumequeue").mkdir()
    (junk / "consumequeue" / "CURRENT").write_text("MANIFEST-000099\n")
    (junk / "consumequeue" / "MANIFEST-000099").write_bytes(b"\x00garbage" * 10)
    before = tree_digest(junk)
    for cmd in (("inspect",), ("get", "--topic", "orders", "--queue", 0, "--offset", 0), ("verify",),
                ("consumers",), ("query-time", "--topic", "orders", "--queue", 0, "--timestamp", T0)):
        r = run("rocketmq", cmd[0], junk, *cmd[1:])
        assert r.exit_code == 2, (cmd, r.output)
        assert r.output.startswith("error:") and len(r.output.strip().splitlines()) == 1, r.output
        assert "RocksDB" in r.output
    with pytest.raises(RocksDBError):
        MessageStore.open(junk, read_only=True)
    # a database that is not the ConsumeQueue's (no offset family)
    other = tmp_path / "other"
    shutil.copytree(files, other)
    shutil.rmtree(other / "consumequeue")
    db = Rdict(str(other / "consumequeue"), Options(raw_mode=True))
    db[b"k"] = b"v"
    db.close()
    with pytest.raises(RocksDBError, match="no column family 'offset'"):
        MessageStore.open(other, read_only=True)
    assert tree_digest(junk) == before
    # the optional binding missing: the same error type, naming the extra
    _, rocks = stores
    monkeypatch.setitem(sys.modules, "rocksdict", None)
    with pytest.raises(RocksDBError, match=r"mqstore\[rocksdb\]"):
        MessageStore.open(rocks, read_only=True)
    r = run("rocketmq", "inspect", rocks)
    assert r.exit_code == 2 and r.output.startswith("error:") and "mqstore[rocksdb]" in r.output


# ----------------------------------------------------------------------------- config stores
OFFSETS = {("orders", "billing"): {0: 40, 1: 7}, ("audit", "billing"): {0: 3, 2: 1},
           ("%LMQ%x", "lmqgroup"): {0: 12}}


def test_consumer_offsets_from_the_v1_and_v2_config_stores(stores, tmp_path):
    files, rocks = stores
    v1 = tmp_path / "v1"
    shutil.copytree(rocks, v1)
    shutil.rmtree(v1 / "config", ignore_errors=True)
    write_v1_consumer_offsets(v1, OFFSETS)
    before = tree_digest(v1)
    got = config_files.consumer_offsets(v1)
    assert got.table == OFFSETS and got.data_version is not None and got.data_version.counter == 3
    assert tree_digest(v1) == before
    # consumerOffset.json with a higher data version counter wins (the broker's start-up merge)
    (v1 / "config" / "consumerOffset.json").write_text(
        '{"offsetTable":{"orders@billing":{0:1}},"dataVersion":{"counter":9,"timestamp":1}}')
    assert config_files.consumer_offsets(v1).table == {("orders", "billing"): {0: 1}}
    (v1 / "config" / "consumerOffset.json").write_text(
        '{"offsetTable":{"orders@billing":{0:1}},"dataVersion":{"counter":2,"timestamp":1}}')
    assert config_files.consumer_offsets(v1).table == OFFSETS
    (v1 / "config" / "consumerOffset.json").unlink()
    v2 = tmp_path / "v2"
    shutil.copytree(rocks, v2)
    shutil.rmtree(v2 / "config", ignore_errors=True)
    write_v2_consumer_offsets(v2, OFFSETS, pull={("orders", "billing"): {0: 99}})
    before = tree_digest(v2)
    assert config_files.consumer_offsets(v2).table == OFFSETS
    for root in (v1, v2):
        r = run("rocketmq", "consumers", root, "--json")
        assert r.exit_code == 0, r.output
        rows = {(x["group"], x["topic"], x["queueId"]): (x["consumerOffset"], x["brokerOffset"])
                for x in map(json.loads, r.output.splitlines())}
        with MessageStore.open(files, read_only=True) as s:
            assert rows[("billing", "orders", 0)] == (40, s.max_offset("orders", 0))
            assert rows[("billing", "audit", 2)] == (1, s.max_offset("audit", 2))
        assert rows[("lmqgroup", "%LMQ%x", 0)] == (12, 0)
        info = json.loads(run("rocketmq", "inspect", root, "--json").output)
        conf = {c["name"]: c for c in info["config"]}
        name = "consumerOffsets/" if root == v1 else "rdb/"
        assert conf[name]["entries"] == 3 and conf[name]["error"] is None and "RocksDB" in conf[name]["kind"]
    assert tree_digest(v2) == before


def test_garbage_config_store_is_one_error(stores, tmp_path):
    _, rocks = stores
    root = tmp_path / "cfg"
    shutil.copytree(rocks, root)
    d = root / "config" / "consumerOffsets"
    d.mkdir(parents=True, exist_ok=True)
    (d / "CURRENT").write_text("MANIFEST-000001\n")
    r = run("rocketmq", "consumers", root)
    assert r.exit_code == 2 and r.output.startswith("error:") and len(r.output.strip().splitlines()) == 1
    info = json.loads(run("rocketmq", "inspect", root, "--json").output)
    assert next(c for c in info["config"] if c["name"] == "consumerOffsets/")["error"]


def test_every_rocketmq_command_takes_the_store_type(stores):
    from .test_commitlog_paths import _leaf_commands

    leaves = _leaf_commands(cli.commands["rocketmq"])
    missing = [n for n, c in leaves.items() if {"commitlog"} <= {p.name for p in c.params}
               and "store_type" not in {p.name for p in c.params}]
    assert missing == []
    files, _ = stores
    # a RocksDB store asked for where there is none: one error naming the directory
    r = run("rocketmq", "inspect", files, "--store-type", "defaultRocksDB")
    assert r.exit_code == 2 and r.output.startswith("error:") and "no CURRENT file" in r.output
