"""DLedger CommitLog stores (issue 20 item 6): detection, reading through the API and the CLI
(inspect, dump, get, query-key, verify), rebuild-index against the broker's dispatch rules,
verify on corrupted files, bad input as one ``error:`` line, and read-only commands changing
nothing.  Stores are made by tests/rocketmq/dledger_support.py."""

from __future__ import annotations

import json
import shutil
import struct
from pathlib import Path

import numpy as np
import pytest
from click.testing import CliRunner

from mqstore.api.rocketmq import MessageStore
from mqstore.cli.main import cli
from mqstore.errors import InvalidArgumentError, ReadOnlyStoreError, StoreNotFoundError
from mqstore.formats.rocketmq import dledger as fmt
from mqstore.formats.rocketmq.record import TRANSACTION_MASK
from mqstore.storage.rocketmq.config import StoreConfig
from mqstore.storage.rocketmq.dledger import DLedgerCommitLog, DLedgerWriter, walk_entries
from mqstore.storage.rocketmq.layout import dledger_home, find_dledger_homes, resolve_config
from mqstore.storage.rocketmq.rebuild import rebuild_indexes

from .dledger_support import (
    CQ_FILE,
    DATA_FILE,
    INDEX_FILE,
    ITEMS,
    SLOTS,
    build_dledger_store,
    expected_index_tree,
    make_records,
    tree,
    tree_hash,
)

N = 240
GEOM = ["--cq-file-size", str(CQ_FILE), "--slots", str(SLOTS), "--items", str(ITEMS)]


def run(*args: str):
    return CliRunner().invoke(cli, ["rocketmq", *args], catch_exceptions=False)


@pytest.fixture(scope="module")
def built(tmp_path_factory) -> tuple[Path, list, list]:
    root = tmp_path_factory.mktemp("dledger") / "store"
    recs = make_records(N)
    entries = build_dledger_store(root, recs)
    return root, recs, entries


@pytest.fixture
def store(built, tmp_path) -> tuple[Path, list, list]:
    """A fresh copy of the built store (tests may change it)."""
    root, recs, entries = built
    dst = tmp_path / "store"
    shutil.copytree(root, dst)
    return dst, recs, entries


def _rebuilt(root: Path) -> Path:
    r = run("rebuild-index", str(root), *GEOM)
    assert r.exit_code == 0, r.output
    return root


# ---------------------------------------------------------------- layout and detection


def test_writer_layout(built):
    root, _recs, entries = built
    home = root / "dledger-n0"
    data = sorted((home / "data").iterdir())
    index = sorted((home / "index").iterdir())
    assert [p.name for p in data] == [f"{k * DATA_FILE:020d}" for k in range(len(data))]
    assert len(data) >= 3 and all(p.stat().st_size == DATA_FILE for p in data)
    assert all(p.stat().st_size == INDEX_FILE for p in index)
    assert [p.name for p in index] == [f"{k * INDEX_FILE:020d}" for k in range(len(index))]
    assert (home / "checkpoint").is_file() and (home / "currterm").is_file()
    # every data file but the last ends with a blank filler of magic -1 and its length
    for p in data[:-1]:
        b = p.read_bytes()
        walk = [e for e in entries if e.pos // DATA_FILE == int(p.name) // DATA_FILE]
        tail = walk[-1].pos + 48 + walk[-1].size - int(p.name)
        assert struct.unpack(">ii", b[tail : tail + 8]) == (-1, DATA_FILE - tail)
    # entry i: header at pos, the message at pos + 48 saying so, index unit i
    allunits = b"".join(p.read_bytes() for p in index)
    for e in entries[:50] + entries[-5:]:
        f = data[e.pos // DATA_FILE].read_bytes()
        h = fmt.EntryHeader.decode(f, e.pos % DATA_FILE)
        assert (h.magic, h.index, h.pos, h.size) == (1, e.index, e.pos, e.size + 48)
        body = f[e.pos % DATA_FILE + 48 : e.pos % DATA_FILE + h.size]
        assert struct.unpack(">i", body[:4])[0] == e.size
        assert struct.unpack(">q", body[28:36])[0] == e.pos + 48
        assert fmt.IndexUnit.decode(allunits, 32 * e.index) == fmt.IndexUnit(1, e.pos, e.size + 48, e.index, h.term)


def test_detection(built, tmp_path):
    root, _, _ = built
    assert find_dledger_homes(root) == [root / "dledger-n0"]
    cfg = resolve_config(root)
    assert cfg.enable_dledger_commit_log and cfg.commit_log_file_size == DATA_FILE
    assert resolve_config(root, {"enable_dledger_commit_log": False}).enable_dledger_commit_log is False
    home = dledger_home(root, cfg)
    assert home.self_id == "n0" and home.index_dir == root / "dledger-n0" / "index"
    # DLedger 0.1 (RocketMQ 4.5): <group>-<selfId>
    legacy = tmp_path / "legacy"
    build_dledger_store(legacy, make_records(5), legacy_group="RaftNode00", self_id="n1")
    assert find_dledger_homes(legacy) == [legacy / "RaftNode00-n1"]
    assert dledger_home(legacy, resolve_config(legacy)).self_id == "n1"
    with MessageStore.open(legacy, read_only=True) as s:
        assert len(s.engine.commit_log.entries()) == 5
    # two members: one must be named
    two = tmp_path / "two"
    build_dledger_store(two, make_records(3), self_id="n0")
    build_dledger_store(two, make_records(4), self_id="n1")
    with pytest.raises(InvalidArgumentError, match="--dledger-id"):
        MessageStore.open(two, read_only=True)
    cfg1 = resolve_config(two, {"dledger_self_id": "n1"})
    with MessageStore.open(two, cfg1, read_only=True) as s:
        assert len(s.engine.commit_log.entries()) == 4
    with pytest.raises(StoreNotFoundError):
        MessageStore.open(two, resolve_config(two, {"dledger_self_id": "n7"}), read_only=True)
    with pytest.raises(InvalidArgumentError):
        StoreConfig(dledger_self_id="../x")
    # an unrelated <name>-<name>/{data,index} without data files is not a DLedger 0.1 home
    other = tmp_path / "classic"
    (other / "commitlog").mkdir(parents=True)
    (other / "backup-old" / "data").mkdir(parents=True)
    (other / "backup-old" / "index").mkdir()
    assert find_dledger_homes(other) == []
    assert resolve_config(other).enable_dledger_commit_log is False


def test_write_open_refused(built):
    root, _, _ = built
    with pytest.raises(ReadOnlyStoreError):
        MessageStore.open(root, read_only=False)
    with pytest.raises(ReadOnlyStoreError):
        DLedgerCommitLog(dledger_home(root, resolve_config(root)), DATA_FILE, read_only=False)


# ---------------------------------------------------------------- reading


def test_walk_and_scan(built):
    root, recs, entries = built
    with MessageStore.open(root, read_only=True) as s:
        cl = s.engine.commit_log
        assert isinstance(cl, DLedgerCommitLog)
        w = cl.entries()
        assert w.error is None and len(w) == N
        assert w.index.tolist() == list(range(N))
        assert w.pos.tolist() == [e.pos for e in entries]
        assert sorted(set(w.term.tolist())) == [1, 2]
        assert cl.max_offset == entries[-1].pos + 48 + entries[-1].size
        offs = []
        for b in cl.scan(cl.min_offset, cl.max_offset, check_crc=True, skip_length_mismatch=False):
            assert b.error is None
            offs += b.commit_log_offset.tolist()
        assert offs == [e.offset for e in entries]
        # max_records and a start inside the log give the same rows
        part = [o for b in cl.scan(entries[100].offset, max_records=7) for o in b.commit_log_offset.tolist()]
        assert part == [e.offset for e in entries[100:]]
        for e, rec in list(zip(entries, recs, strict=True))[::17]:
            got = cl.read_record(e.offset, check_crc=True)
            assert (got.topic, got.body, got.queue_offset, got.commit_log_offset) == (rec.topic, rec.body,
                                                                                   e.queue_offset, e.offset)
            h = cl.entry_at(e.offset)
            assert h is not None and h.index == e.index and h.pos == e.pos
        assert cl.entry_at(entries[3].pos) is None
        info = cl.info()
        assert (info["entries"], info["firstIndex"], info["lastIndex"], info["committedIndex"]) == (N, 0, N - 1, N - 1)
        assert info["currTerm"] == 2 and info["stoppedAt"] is None
        assert cl.problems() == []


def test_rebuild_index_equals_broker_dispatch(store, tmp_path):
    root, recs, entries = store
    expected = expected_index_tree(recs, entries)
    assert any(k.startswith("index/") for k in expected) and any(k.startswith("consumequeue/") for k in expected)
    _rebuilt(root)
    assert tree(root) == expected
    # --out gives the same files; the API rebuild too
    out = tmp_path / "out"
    r = run("rebuild-index", str(root), "--out", str(out), *GEOM)
    assert r.exit_code == 0, r.output
    assert tree(out) == expected
    out2 = tmp_path / "out2"
    cfg = resolve_config(root, {"consume_queue_file_size": CQ_FILE, "hash_slot_num": SLOTS, "index_num": ITEMS})
    stats = rebuild_indexes(root, out2, config=cfg, threads=1)
    assert stats.messages == N and stats.stop_error is None
    assert tree(out2) == expected


def test_cli_read_commands(store):
    root, recs, entries = store
    _rebuilt(root)
    r = run("inspect", str(root), "--json")
    assert r.exit_code == 0, r.output
    info = json.loads(r.output)
    assert info["dledger"]["entries"] == N and info["dledger"]["selfId"] == "n0"
    assert info["commitLog"]["maxOffset"] == entries[-1].pos + 48 + entries[-1].size
    r = run("inspect", str(root))
    assert "dledger: member n0" in r.output and "committedIndex 239" in r.output
    # dump: every message, in order, with its entry
    r = run("dump", str(root), "--json")
    assert r.exit_code == 0, r.output
    rows = [json.loads(line) for line in r.output.splitlines()]
    assert [m["commitLogOffset"] for m in rows] == [e.offset for e in entries]
    assert [m["dledger"]["index"] for m in rows] == list(range(N))
    r = run("dump", str(root), "--json", "--topic", "TopicB", "--limit", "3")
    assert [json.loads(x)["topic"] for x in r.output.splitlines()] == ["TopicB"] * 3
    # get through the rebuilt ConsumeQueue: queue offset -> the wrapped message
    q = [(e, rec) for e, rec in zip(entries, recs, strict=True)
         if rec.topic == "TopicA" and rec.queue_id == 1 and rec.sys_flag & TRANSACTION_MASK in (0, 8)]
    r = run("get", str(root), "--topic", "TopicA", "--queue", "1", "--offset", "2", "--count", "3", "--json")
    assert r.exit_code == 0, r.output
    got = [json.loads(x) for x in r.output.splitlines()]
    assert [m["commitLogOffset"] for m in got] == [e.offset for e, _ in q[2:5]]
    assert [m["queueOffset"] for m in got] == [2, 3, 4]
    r = run("query-key", str(root), "--topic", "TopicA", "--key", "k9", "--json")
    assert [json.loads(x)["commitLogOffset"] for x in r.output.splitlines()] == [entries[9].offset]
    r = run("verify", str(root))
    assert r.exit_code == 0, r.output
    assert "clean" in r.output and f"{N} messages" in r.output


def test_options_select_the_log(store):
    root, _, _ = store
    r = run("inspect", str(root), "--no-dledger")
    assert r.exit_code == 2 and r.output.startswith("error:")
    r = run("inspect", str(root), "--dledger-id", "n0", "--json")
    assert r.exit_code == 0 and json.loads(r.output)["dledger"]["selfId"] == "n0"
    r = run("inspect", str(root), "--dledger-id", "zz")
    assert r.exit_code == 2 and r.output.count("\n") == 1 and "dledger-zz" in r.output
    r = run("inspect", str(root), "--dledger-id", "../etc")
    assert r.exit_code == 2 and r.output.startswith("error:")


def test_read_only_commands_change_nothing(store):
    root, _, _ = store
    _rebuilt(root)
    before = tree_hash(root)
    for args in (("inspect", str(root)), ("inspect", str(root), "--json"), ("dump", str(root), "--limit", "5"),
                 ("get", str(root), "--topic", "TopicA", "--queue", "1", "--offset", "0"),
                 ("query-key", str(root), "--topic", "TopicA", "--key", "k1"), ("verify", str(root)),
                 ("query-time", str(root), "--topic", "TopicA", "--queue", "1", "--timestamp", "0")):
        r = run(*args)
        assert r.exit_code == 0, (args, r.output)
    assert tree_hash(root) == before
    # a rebuild into --out reads the store only
    r = CliRunner().invoke(cli, ["rocketmq", "rebuild-index", str(root), "--out", str(root.parent / "o"), *GEOM])
    assert r.exit_code == 0
    assert tree_hash(root) == before


# ---------------------------------------------------------------- corruption


def _data_file(root: Path, k: int = 0) -> Path:
    return sorted((root / "dledger-n0" / "data").iterdir())[k]


def _poke(path: Path, at: int, data: bytes) -> None:
    with open(path, "r+b") as fh:
        fh.seek(at)
        fh.write(data)


def _verify(root: Path) -> tuple[int, str]:
    r = run("verify", str(root))
    assert "Traceback" not in r.output
    return r.exit_code, r.output


def test_verify_wrong_magic(store):
    root, _, entries = store
    _rebuilt(root)
    e = entries[30]
    _poke(_data_file(root, e.pos // DATA_FILE), e.pos % DATA_FILE, struct.pack(">i", 7))
    code, out = _verify(root)
    assert code == 1
    assert f"DLedger entry at position {e.pos}: unknown DLedger entry magic 7" in out
    # the ConsumeQueue units of the entries past the stop are not records any more
    assert "not a record of the CommitLog" in out
    # dump reads up to the bad entry and says where it stopped (one error line, no traceback)
    r = run("dump", str(root), "--json")
    lines = r.output.splitlines()
    assert r.exit_code == 0 and len(lines) == 31
    assert lines[-1] == f"error: invalid record at offset {e.pos}: DLedger entry at position {e.pos}: unknown DLedger entry magic 7"


def test_verify_body_crc(store):
    root, recs, entries = store
    _rebuilt(root)
    e = entries[12]
    f = _data_file(root, e.pos // DATA_FILE)
    at = f.read_bytes().index(recs[12].body, e.pos % DATA_FILE + 48) + 3  # a byte of the message body
    _poke(f, at, bytes([f.read_bytes()[at] ^ 0xFF]))
    code, out = _verify(root)
    assert code == 1 and "body CRC mismatch" in out
    assert f"invalid record at offset {e.offset}" in out


def test_verify_index_units(store):
    root, _, entries = store
    _rebuilt(root)
    idx = sorted((root / "dledger-n0" / "index").iterdir())
    e = entries[70]
    unit = 32 * e.index
    _poke(idx[unit // INDEX_FILE], unit % INDEX_FILE + 4, struct.pack(">q", e.pos + 8))  # pos
    e2 = entries[71]
    unit2 = 32 * e2.index
    _poke(idx[unit2 // INDEX_FILE], unit2 % INDEX_FILE + 24, struct.pack(">q", 99))  # term
    # a unit past the last entry pointing past the data (a tail DLedger lost)
    end_unit = 32 * N
    if end_unit // INDEX_FILE < len(idx):
        _poke(idx[end_unit // INDEX_FILE], end_unit % INDEX_FILE,
              fmt.IndexUnit(1, 10**9, 100, N, 2).encode())
    code, out = _verify(root)
    assert code == 1
    assert f"index unit {e.index} says pos {e.pos + 8}, the entry at position {e.pos} {e.pos}" in out
    assert f"index unit {e2.index} says term 99" in out
    assert f"index unit {N} (magic 1, pos 1000000000) is past the last entry {N - 1} and points past the data end" \
        in out


def test_verify_index_and_term_monotonic(store):
    root, _, entries = store
    _rebuilt(root)
    e = entries[50]
    f = _data_file(root, e.pos // DATA_FILE)
    _poke(f, e.pos % DATA_FILE + 8, struct.pack(">q", 77))  # index 77 after 49
    code, out = _verify(root)
    assert code == 1 and f"DLedger entry at position {e.pos}: entry index 77 does not follow 49" in out
    # term going down
    shutil.rmtree(root)
    recs = make_records(20)
    w = DLedgerWriter(root, file_size=DATA_FILE, index_file_size=INDEX_FILE, term=5)
    w.append(recs[:10])
    w.term = 4
    w.append(recs[10:])
    w.close()
    code, out = _verify(root)
    assert code == 1 and "entry term 4 is lower than the previous entry's 5" in out


def test_verify_wrapped_record_mismatch(store):
    root, _, entries = store
    e = entries[40]
    f = _data_file(root, e.pos // DATA_FILE)
    _poke(f, e.pos % DATA_FILE + 48 + 28, struct.pack(">q", 12345))  # the record's PHYSICALOFFSET
    code, out = _verify(root)
    assert code == 1 and f"message says it is at offset 12345, its entry puts it at {e.offset}" in out
    e = entries[20]
    _poke(_data_file(root, e.pos // DATA_FILE), e.pos % DATA_FILE + 48, struct.pack(">i", e.size - 1))
    code, out = _verify(root)
    assert code == 1 and f"message TOTALSIZE {e.size - 1} is not the entry body length {e.size}" in out


def test_truncated_entry_and_files(store):
    root, _, entries = store
    last = _data_file(root, -1)
    e = entries[-1]
    # the last entry's size runs past the data file
    _poke(last, e.pos % DATA_FILE + 4, struct.pack(">i", DATA_FILE))
    _poke(last, e.pos % DATA_FILE + 44, struct.pack(">i", DATA_FILE - 48))
    code, out = _verify(root)
    assert code == 1 and "runs past the end of data file" in out
    # a data file cut short: one error line, exit 2
    with open(last, "r+b") as fh:
        fh.truncate(1000)
    for cmd in ("verify", "inspect", "dump"):
        r = run(cmd, str(root))
        assert r.exit_code == 2, (cmd, r.output)
        assert r.output.startswith("error:") and r.output.count("\n") == 1 and "Traceback" not in r.output
    r = run("rebuild-index", str(root))
    assert r.exit_code == 2 and r.output.startswith("error:")
    assert not (root / "consumequeue").exists()


def test_blank_filler_length(store):
    root, _, _ = store
    f = _data_file(root, 0)
    b = f.read_bytes()
    at = b.rfind(struct.pack(">i", -1))
    while at > 0 and struct.unpack(">i", b[at + 4 : at + 8])[0] != DATA_FILE - at:
        at = b.rfind(struct.pack(">i", -1), 0, at)
    _poke(f, at + 4, struct.pack(">i", 9))
    code, out = _verify(root)
    assert code == 1 and f"blank filler at position {at} says 9 bytes" in out


def test_garbage_home(tmp_path):
    root = tmp_path / "s"
    (root / "dledger-n0" / "data").mkdir(parents=True)
    (root / "dledger-n0" / "index").mkdir()
    (root / "dledger-n0" / "data" / f"{0:020d}").write_bytes(b"\xab" * 4096)
    (root / "dledger-n0" / "checkpoint").write_bytes(b"\xff\xfe garbage")
    r = run("verify", str(root))
    assert r.exit_code == 1 and "unknown DLedger entry magic" in r.output and "Traceback" not in r.output
    r = run("inspect", str(root))
    assert r.exit_code == 0 and "entry walk stopped early" in r.output
    r = run("rebuild-index", str(root), *GEOM)
    assert r.exit_code == 0 and "stopped early" in r.output
    # an empty DLedger member: nothing to read, nothing wrong
    empty = tmp_path / "e"
    (empty / "dledger-n0" / "data").mkdir(parents=True)
    r = run("verify", str(empty))
    assert r.exit_code == 0, r.output


def test_empty_commitlog_dir(store):
    root, _, _ = store
    (root / "commitlog").mkdir()
    r = run("inspect", str(root), "--json")  # an empty commitlog/ next to the DLedger home: still DLedger
    assert r.exit_code == 0 and json.loads(r.output)["dledger"]["entries"] == N
    assert json.loads(r.output)["dledger"]["classicSegments"] == []


def _migrated(root: Path) -> tuple[list, list, list]:
    """A classic store switched to DLedger: its classic segments end with the broker's blank
    record, the DLedger data begins right after (dividedCommitlogOffset), queues go on."""
    from mqstore.formats.rocketmq.record import encode_blank

    classic = make_records(50, seed=1)
    cfg = StoreConfig(commit_log_file_size=DATA_FILE, background_services=False, dispatch_enabled=False)
    with MessageStore.open(root, cfg) as s:
        res = s.engine.append(classic)
        qo = dict(s.engine.queue_offsets)
        end = s.engine.commit_log.max_offset
    last = sorted((root / "commitlog").iterdir())[-1]
    _poke(last, end - int(last.name), encode_blank(DATA_FILE - (end - int(last.name))))
    for f in ("abort", "lock", "checkpoint"):
        (root / f).unlink(missing_ok=True)
    divided = int(last.name) + DATA_FILE
    w = DLedgerWriter(root, file_size=DATA_FILE, index_file_size=INDEX_FILE, term=1, start_pos=divided,
                      queue_offsets=qo)
    recs = make_records(60, seed=2)
    entries = w.append(recs)
    w.close()
    return classic, res, list(zip(recs, entries, strict=True))


def test_migrated_store(tmp_path):
    root = tmp_path / "s"
    classic, res, dl = _migrated(root)
    r = run("inspect", str(root), "--json")
    assert r.exit_code == 0, r.output
    info = json.loads(r.output)["dledger"]
    assert info["entries"] == 60 and info["classicSegments"] and info["dividedOffset"] == dl[0][1].pos
    r = run("dump", str(root), "--json")
    rows = [json.loads(x) for x in r.output.splitlines()]
    assert [m["commitLogOffset"] for m in rows] == [x.commit_log_offset for x in res] + [e.offset for _, e in dl]
    assert all("dledger" not in m for m in rows[:50]) and all("dledger" in m for m in rows[50:])
    _rebuilt(root)
    r = run("verify", str(root))
    assert r.exit_code == 0, r.output
    # the broker's ConsumeQueue units: the classic offsets, then the DLedger ones (entry + 48)
    from .dledger_support import expected_columns
    from .helpers import build_consume_queues

    cols_dl = expected_columns([rec for rec, _ in dl], [e for _, e in dl])
    cols_cl = {k: [] for k in cols_dl if k not in ("key_row", "key_hash")}
    for rec, x in zip(classic, res, strict=True):
        for k, v in (("off", x.commit_log_offset), ("size", x.size), ("qid", rec.queue_id), ("qoff", x.queue_offset),
                     ("sys", rec.sys_flag), ("ts", x.store_timestamp), ("topic", rec.topic)):
            cols_cl[k].append(v)
    cols_cl["tags"] = expected_columns(classic, [type(dl[0][1])(0, x.commit_log_offset - 48, x.commit_log_offset,
                                                                x.size, x.queue_offset) for x in res])["tags"]
    merged = {k: cols_cl[k] + cols_dl[k] for k in cols_cl}
    want = build_consume_queues(merged, CQ_FILE)
    assert tree(root, ("consumequeue",)) == want
    # get reads across the switch: a queue's classic units, then its DLedger ones
    q = [(rec, x.queue_offset) for rec, x in zip(classic, res, strict=True)
         if (rec.topic, rec.queue_id) == ("TopicA", 1) and rec.sys_flag & TRANSACTION_MASK in (0, 8)]
    q += [(rec, e.queue_offset) for rec, e in dl
          if (rec.topic, rec.queue_id) == ("TopicA", 1) and rec.sys_flag & TRANSACTION_MASK in (0, 8)]
    r = run("get", str(root), "--topic", "TopicA", "--queue", "1", "--offset", "0", "--count", str(len(q)), "--json")
    got = [json.loads(x) for x in r.output.splitlines()]
    assert [m["queueOffset"] for m in got] == list(range(len(q))) == [o for _, o in q]
    # --no-dledger: the classic part alone
    r = run("inspect", str(root), "--no-dledger", "--json")
    assert r.exit_code == 0 and "dledger" not in json.loads(r.output)
    assert json.loads(r.output)["commitLog"]["maxOffset"] == dl[0][1].pos  # up to the blank the broker wrote


def test_migrated_store_with_a_gap(tmp_path):
    root = tmp_path / "s"
    _migrated(root)
    data = sorted((root / "dledger-n0" / "data").iterdir())
    # move the DLedger data one file up: its entries no longer say where they are, and the
    # classic part no longer ends where the DLedger data begins
    for p in reversed(data):
        p.rename(p.with_name(f"{int(p.name) + DATA_FILE:020d}"))
    code, out = _verify(root)
    assert code == 1
    assert f"the classic CommitLog ends at {int(data[0].name)}, the DLedger data begins at " \
        f"{int(data[0].name) + DATA_FILE}" in out
    assert "entry says it is at position" in out


def test_uncommitted_entries_shown(tmp_path):
    root = tmp_path / "s"
    build_dledger_store(root, make_records(12), committed_index=8)
    r = run("inspect", str(root))
    assert "3 entries past the committed index" in r.output
    with MessageStore.open(root, read_only=True) as s:
        assert s.engine.commit_log.info()["uncommittedEntries"] == 3


def test_walk_entries_empty():
    w = walk_entries([], DATA_FILE)
    assert len(w) == 0 and w.end == 0 and w.error is None
    assert np.asarray(w.pos).dtype == np.int64


def test_index_files_missing_or_cut(store):
    root, _, _ = store
    idx = sorted((root / "dledger-n0" / "index").iterdir())
    with open(idx[1], "r+b") as fh:
        fh.truncate(100)
    code, out = _verify(root)
    assert code == 1 and f"index file {idx[1].name} is 100 bytes, the others {INDEX_FILE}" in out
    assert "no index unit for entries 64..127 (64 entries)" in out
    shutil.rmtree(root / "dledger-n0" / "index")
    code, out = _verify(root)
    assert code == 1 and f"has no index files for {N} entries" in out


def test_random_damage_never_a_traceback(built, tmp_path):
    """Random bytes over data and index files: every read command ends with output or one error
    line (exit 0, 1 or 2), never an exception."""
    root0, _, _ = built
    rng = np.random.default_rng(2026)
    for trial in range(12):
        root = tmp_path / f"s{trial}"
        shutil.copytree(root0, root)
        files = sorted((root / "dledger-n0" / "data").iterdir()) + sorted((root / "dledger-n0" / "index").iterdir())
        for _ in range(int(rng.integers(1, 6))):
            p = files[int(rng.integers(len(files)))]
            size = p.stat().st_size
            at = int(rng.integers(size))
            n = int(rng.integers(1, 16))
            _poke(p, at, bytes(rng.integers(0, 256, min(n, size - at), dtype=np.uint8)))
        if trial % 4 == 3:  # a data file cut
            p = files[int(rng.integers(len(files)))]
            with open(p, "r+b") as fh:
                fh.truncate(int(rng.integers(p.stat().st_size)))
        for args in (("verify", str(root)), ("inspect", str(root), "--json"), ("dump", str(root), "--limit", "50"),
                     ("rebuild-index", str(root), "--out", str(tmp_path / f"o{trial}"), *GEOM)):
            r = CliRunner().invoke(cli, ["rocketmq", *args])
            assert r.exception is None or isinstance(r.exception, SystemExit), (trial, args, r.exception)
            assert r.exit_code in (0, 1, 2), (trial, args, r.output)
            assert "Traceback" not in r.output


def test_verify_columns_equal_reference_on_dledger(built, tmp_path):
    """The columnar verify and its one-at-a-time reference report the same on DLedger stores,
    clean and damaged (index units, entry headers, message bytes)."""
    from mqstore.errors import MqStoreError
    from mqstore.storage.rocketmq.verify import verify_store, verify_store_reference

    root0, _, _ = built
    rng = np.random.default_rng(7)
    for trial in range(6):
        root = tmp_path / f"s{trial}"
        shutil.copytree(root0, root)
        _rebuilt(root)
        files = sorted((root / "dledger-n0" / "data").iterdir()) + sorted((root / "dledger-n0" / "index").iterdir())
        for _ in range(trial):
            p = files[int(rng.integers(len(files)))]
            at = int(rng.integers(p.stat().st_size))
            _poke(p, at, bytes([int(rng.integers(256))]))
        outs = []
        for fn in (verify_store, verify_store_reference):
            try:
                rep = fn(root, resolve_config(root))
                outs.append((rep.messages, rep.cq_units, rep.index_items, rep.problems))
            except MqStoreError as exc:
                outs.append(("error", exc.message))
        assert outs[0] == outs[1], trial


@pytest.mark.parametrize("kind", ["data-file", "index-file", "home-file"])
def test_hostile_homes(tmp_path, kind):
    root = tmp_path / "s"
    root.mkdir()
    if kind == "home-file":
        (root / "dledger-n0").write_bytes(b"x")
    else:
        home = root / "dledger-n0"
        home.mkdir()
        (home / "data").mkdir() if kind == "index-file" else (home / "data").write_bytes(b"x")
        (home / "index").write_bytes(b"x") if kind == "index-file" else (home / "index").mkdir()
    before = tree_hash(root)
    for cmd in ("inspect", "verify", "dump", "rebuild-index"):
        r = CliRunner().invoke(cli, ["rocketmq", cmd, str(root)])
        assert r.exit_code == 2, (kind, cmd, r.output)
        assert r.stderr.startswith("error: ") and len(r.stderr.splitlines()) == 1 and r.stdout == ""
    assert tree_hash(root) == before


def test_open_walks_only_the_newest_files(store):
    """Opening walks the three newest data files, as DLedger's recovery: damage in an older file
    does not cut the log for reads by offset, and the full scan (dump, verify) reports it."""
    root, recs, entries = store
    data = sorted((root / "dledger-n0" / "data").iterdir())
    assert len(data) >= 5
    e = entries[3]
    _poke(data[0], e.pos + 8, struct.pack(">q", 999))  # index 999 after 2
    with MessageStore.open(root, read_only=True) as s:
        cl = s.engine.commit_log
        assert cl.max_offset == entries[-1].pos + 48 + entries[-1].size
        assert cl.read_record(entries[-1].offset).body == recs[-1].body
        assert cl.info()["lastIndex"] == N - 1 and cl.info()["stoppedAt"] is None
        assert cl.entry_at(entries[-2].offset).index == N - 2
    code, out = _verify(root)
    assert code == 1 and f"DLedger entry at position {e.pos}: entry index 999 does not follow 2" in out
    r = run("dump", str(root), "--json")
    assert len(r.output.splitlines()) == 4 and r.output.splitlines()[-1].startswith("error: invalid record")
