"""BatchConsumeQueue (46-byte units, ``queue.type=BatchCQ`` topics) and the compaction store:
the unit codec, lookup by queue offset, verify against the CommitLog, the byte-identical
rebuild, the CLI, and bad input as typed errors / verify problems."""

from __future__ import annotations

import hashlib
import json
import shutil
from itertools import count
from pathlib import Path

import numpy as np
import pytest
from click.testing import CliRunner
from hypothesis import given, settings
from hypothesis import strategies as st

from mqstore.api.rocketmq import MessageStore
from mqstore.cli.main import cli
from mqstore.errors import CorruptDataError, InvalidArgumentError, OffsetOutOfRangeError, TruncatedRecordError
from mqstore.formats.rocketmq.batch_consumequeue import (
    BCQ_DTYPE,
    BCQ_UNIT_SIZE,
    DEFAULT_BCQ_FILE_SIZE,
    BatchCQUnit,
    decode_unit,
    encode_unit,
    units_view,
    valid_prefix,
    valid_prefix_py,
)
from mqstore.formats.rocketmq.javahash import tags_hash
from mqstore.formats.rocketmq.record import INNER_BATCH_FLAG
from mqstore.storage.rocketmq import batch_consumequeue as bcq
from mqstore.storage.rocketmq.commitlog import CommitLog
from mqstore.storage.rocketmq.config import StoreConfig

I64 = st.integers(-(2**63), 2**63 - 1)
I32 = st.integers(-(2**31), 2**31 - 1)
I16 = st.integers(-(2**15), 2**15 - 1)
FILE_SIZE = 4 * BCQ_UNIT_SIZE  # small files so queues span several
BATCHES = {0: [3, 1, 5, 2, 4, 1], 1: [2, 7]}


@given(I64, I32, I64, I64, I64, I16, I32, I32)
def test_unit_round_trip(off, size, tags, ts, base, batch, compacted, reserved):
    raw = encode_unit(off, size, tags, ts, base, batch, compacted, reserved)
    assert len(raw) == BCQ_UNIT_SIZE
    assert decode_unit(raw) == BatchCQUnit(off, size, tags, ts, base, batch, compacted, reserved)
    view = units_view(raw)
    assert [int(view[0][n]) for n in BCQ_DTYPE.names] == [off, size, tags, ts, base, batch, compacted, reserved]


def test_unit_layout_offsets():
    raw = encode_unit(0x0102030405060708, 0x11121314, 0x2122232425262728, 0x3132333435363738,
                      0x4142434445464748, 0x5152, 0x61626364, 0x71727374)
    assert raw[0:8] == bytes.fromhex("0102030405060708")
    assert raw[8:12] == bytes.fromhex("11121314")
    assert raw[20:28] == bytes.fromhex("3132333435363738")  # storeTime at 20
    assert raw[28:36] == bytes.fromhex("4142434445464748")  # msgBaseOffset at 28
    assert raw[36:38] == bytes.fromhex("5152")  # batchSize at 36
    assert raw[38:42] == bytes.fromhex("61626364")  # compactedOffset at 38
    assert raw[42:46] == bytes.fromhex("71727374")
    assert encode_unit(1, 2, 3, 4, 5, 6)[38:] == b"\xff\xff\xff\xff\x00\x00\x00\x00"  # as the broker writes
    assert DEFAULT_BCQ_FILE_SIZE == 13_800_000


def test_unit_bad_input():
    with pytest.raises(TruncatedRecordError):
        decode_unit(b"\x00" * 45)
    with pytest.raises(InvalidArgumentError):
        encode_unit(0, 1, 0, 0, 0, 2**15)


@settings(max_examples=50)
@given(st.lists(st.tuples(st.integers(-2, 5), st.integers(-2, 5), st.integers(-2, 5), st.integers(-2, 5)), max_size=20))
def test_valid_prefix_twin(rows):
    units = np.zeros(len(rows), BCQ_DTYPE)
    for i, (o, s, b, n) in enumerate(rows):
        units[i]["offset"], units[i]["size"], units[i]["msg_base_offset"], units[i]["batch_size"] = o, s, b, n
    assert valid_prefix(units) == valid_prefix_py(units)


@settings(max_examples=50)
@given(st.lists(st.integers(1, 5), min_size=1, max_size=30), st.integers(0, 200), st.integers(0, 160))
def test_find_twin(sizes, start, probe):
    units = np.zeros(len(sizes), BCQ_DTYPE)
    units["batch_size"] = sizes
    units["msg_base_offset"] = start + np.concatenate([[0], np.cumsum(sizes)[:-1]])
    units["size"] = 1
    q = bcq.BatchQueue(Path("."), "t", 0, FILE_SIZE, [], units)
    want = bcq.find_py(units, probe)
    if want < 0:
        with pytest.raises(OffsetOutOfRangeError):
            q.find(probe)
    else:
        assert q.find(probe) == want
        assert q.lookup(probe).covers(probe)


# --------------------------------------------------------------------------------- test stores
def _topics_json(batch_topics: list[str]) -> str:
    table = {t: {"topicName": t, "readQueueNums": 2, "writeQueueNums": 2, "perm": 6,
                 "attributes": {"queue.type": "BatchCQ"}} for t in batch_topics}
    table["plain"] = {"topicName": "plain", "readQueueNums": 1, "writeQueueNums": 1, "perm": 6, "attributes": {}}
    return json.dumps({"topicConfigTable": table, "dataVersion": {"counter": 1}})


def _put_batches(s: MessageStore, topic: str, batches: dict[int, list[int]]) -> None:
    """Inner-batch records as the broker stores them: INNER_BATCH flag, INNER_NUM, and INNER_BASE
    = the queue offset the broker assigns (the running sum of the batch sizes)."""
    for qid, sizes in batches.items():
        base = 0
        for n in sizes:
            s.put(topic, b"batch-%d" % base, qid, tags="tg", sys_flag=INNER_BATCH_FLAG,
                  properties={"INNER_NUM": str(n), "INNER_BASE": str(base)})
            base += n


def _broker_units(root: Path, topic: str, qid: int) -> np.ndarray:
    """The units a broker writes for ``topic``/``qid``, encoded here from the records by the
    dispatch rule (independent of the module under test's scan)."""
    cl = CommitLog(root / "commitlog", 64 * 1024, read_only=True)
    cl.load()
    rows = []
    off = 0
    try:
        while off < cl.max_offset:
            try:
                rec = cl.read_record(off)
            except CorruptDataError:
                off = (off // (64 * 1024) + 1) * 64 * 1024  # blank end of segment
                continue
            if rec.topic == topic and rec.queue_id == qid and "INNER_NUM" in rec.properties:
                rows.append(encode_unit(off, rec.total_size, tags_hash(rec.tags), rec.store_timestamp,
                                        int(rec.properties["INNER_BASE"]), int(rec.properties["INNER_NUM"])))
            off += rec.total_size
    finally:
        cl.close()
    return units_view(b"".join(rows))


def _write_broker_queue(root: Path, topic: str, qid: int) -> None:
    d = root / "batchconsumequeue" / topic / str(qid)
    d.mkdir(parents=True)
    data = _broker_units(root, topic, qid).tobytes()
    for k in range(0, max(len(data), 1), FILE_SIZE):
        (d / f"{k:020d}").write_bytes(data[k:k + FILE_SIZE].ljust(FILE_SIZE, b"\x00"))


@pytest.fixture()
def store(tmp_path: Path) -> Path:
    ticks = count(1_700_000_000_000, 7)
    cfg = StoreConfig(commit_log_file_size=64 * 1024, consume_queue_file_size=20 * 100, hash_slot_num=50,
                      index_num=200, background_services=False, clock=lambda: next(ticks))
    root = tmp_path / "store"
    with MessageStore.open(root, cfg) as s:
        for i in range(5):
            s.put("plain", b"p%d" % i, 0, tags="x")
        _put_batches(s, "bt", BATCHES)
        s.put("plain", b"tail", 0, tags="x")
    (root / "config").mkdir(exist_ok=True)
    (root / "config" / "topics.json").write_text(_topics_json(["bt"]))
    for qid in BATCHES:
        _write_broker_queue(root, "bt", qid)
    return root


def _compaction(root: Path, tmp_path: Path) -> None:
    """A compaction store for ``ck``/0: a compactionLog of six records (queue offsets 0..5) and a
    sparse compactionCq keeping offsets 1, 3, 4 (what compaction leaves: batchSize 1 each)."""
    ticks = count(1_700_000_100_000, 3)
    cfg = StoreConfig(commit_log_file_size=64 * 1024, background_services=False, clock=lambda: next(ticks))
    side = tmp_path / "side"
    with MessageStore.open(side, cfg) as s:
        for i in range(6):
            s.put("ck", b"v%d" % i, 0, keys=f"k{i % 3}")
    log_dir = root / "compaction" / "compactionLog" / "ck" / "0"
    log_dir.parent.mkdir(parents=True)
    shutil.copytree(side / "commitlog", log_dir)
    cl = CommitLog(log_dir, 64 * 1024, read_only=True)
    cl.load()
    recs, off = [], 0
    for _ in range(6):
        r = cl.read_record(off)
        recs.append(r)
        off += r.total_size
    cl.close()
    data = b"".join(encode_unit(r.commit_log_offset, r.total_size, 0, r.store_timestamp, r.queue_offset, 1)
                    for r in recs if r.queue_offset in (1, 3, 4))
    cq = root / "compaction" / "compactionCq" / "ck" / "0"
    cq.mkdir(parents=True)
    (cq / f"{0:020d}").write_bytes(data.ljust(10 * BCQ_UNIT_SIZE, b"\x00"))
    (root / "compaction" / "position-checkpoint").write_text(json.dumps({"queueOffsetMap": {"ck_0": 6}}))


def tree_hash(root: Path) -> dict[str, str]:
    return {str(p.relative_to(root)): hashlib.sha256(p.read_bytes()).hexdigest()
            for p in sorted(root.rglob("*")) if p.is_file()}


def run(*args: str):
    return CliRunner().invoke(cli, ["rocketmq", *map(str, args)], catch_exceptions=False)


# ------------------------------------------------------------------------------------- storage
def test_load_and_lookup(store: Path):
    queues = bcq.load_batch_queues(store)
    assert sorted(queues) == [("bt", 0), ("bt", 1)]
    q0 = queues[("bt", 0)]
    assert len(q0.files) == 2 and not q0.problems
    assert (q0.min_offset, q0.max_offset, q0.messages) == (0, 16, 16)
    assert q0.lookup(0).msg_base_offset == 0
    assert q0.lookup(3) == q0.unit(1)
    assert q0.lookup(8).msg_base_offset == 4 and q0.lookup(8).batch_size == 5
    assert q0.lookup(15).msg_base_offset == 15
    with pytest.raises(OffsetOutOfRangeError):
        q0.lookup(16)
    assert bcq.batch_cq_topics(store) == {"bt"}


def test_verify_clean_and_read_only(store: Path, tmp_path: Path):
    _compaction(store, tmp_path)
    before = tree_hash(store)
    cl = CommitLog(store / "commitlog", 64 * 1024, read_only=True)
    cl.load()
    try:
        rep = bcq.verify_batch_store(store, cl)
    finally:
        cl.close()
    assert rep.problems == []
    assert (rep.queues, rep.units, rep.messages) == (2, 8, 25)
    assert (rep.compaction_queues, rep.compaction_units) == (1, 3)
    assert tree_hash(store) == before


def test_rebuild_byte_identical(store: Path, tmp_path: Path):
    out = tmp_path / "out"
    cl = CommitLog(store / "commitlog", 64 * 1024, read_only=True)
    cl.load()
    try:
        queues, units, problems = bcq.rebuild_batch_queues(store, cl, out, file_size=FILE_SIZE)
    finally:
        cl.close()
    assert (queues, units, problems) == (2, 8, [])
    want = tree_hash(store / "batchconsumequeue")
    assert tree_hash(out / "batchconsumequeue") == want
    # in place: the same bytes come back after the queue is removed
    shutil.rmtree(store / "batchconsumequeue" / "bt" / "1")
    r = run("rebuild-index", store, "--bcq-file-size", FILE_SIZE)
    assert r.exit_code == 0, r.output
    assert tree_hash(store / "batchconsumequeue") == want


def _verify_problems(store: Path) -> list[str]:
    cl = CommitLog(store / "commitlog", 64 * 1024, read_only=True)
    cl.load()
    try:
        return bcq.verify_batch_store(store, cl).problems
    finally:
        cl.close()


def _patch_unit(store: Path, qid: int, index: int, **fields: int) -> None:
    path = store / "batchconsumequeue" / "bt" / str(qid) / f"{0:020d}"
    data = bytearray(path.read_bytes())
    u = decode_unit(data, index * BCQ_UNIT_SIZE)._replace(**fields)
    data[index * BCQ_UNIT_SIZE:(index + 1) * BCQ_UNIT_SIZE] = encode_unit(*u)
    path.write_bytes(bytes(data))


@pytest.mark.parametrize(("fields", "needle"), [
    ({"msg_base_offset": 4}, "does not continue"),
    ({"size": 17}, "size 17"),
    ({"store_time": 5}, "storeTime 5"),
    ({"commit_log_offset": 10**9}, "outside the CommitLog"),
])
def test_verify_finds_bad_units(store: Path, fields: dict[str, int], needle: str):
    _patch_unit(store, 0, 1, **fields)
    problems = _verify_problems(store)
    assert any(needle in p for p in problems), problems


def test_verify_missing_units_and_dirty_tail(store: Path):
    path = store / "batchconsumequeue" / "bt" / "1" / f"{0:020d}"
    data = bytearray(path.read_bytes())
    data[BCQ_UNIT_SIZE:BCQ_UNIT_SIZE + 8] = (-5).to_bytes(8, "big", signed=True)  # unit 1 invalid
    path.write_bytes(bytes(data))
    problems = _verify_problems(store)
    assert any("fails the recovery rule" in p for p in problems), problems
    assert any("1 CommitLog batch record(s)" in p and "have no unit" in p for p in problems), problems


def test_truncated_file_and_bad_names(store: Path):
    d = store / "batchconsumequeue" / "bt" / "0"
    (d / f"{FILE_SIZE:020d}").write_bytes(b"\x00" * 10)
    (d / "junk").write_bytes(b"x")
    q = bcq.load_queue(d, "bt", 0, FILE_SIZE)
    assert any("10 bytes, expected" in p for p in q.problems)
    assert any("junk" in p for p in q.problems)
    assert q.max_offset == 11  # the four units of the first file: 3 + 1 + 5 + 2


def test_bad_topics_json_and_checkpoint(store: Path, tmp_path: Path):
    _compaction(store, tmp_path)
    (store / "compaction" / "position-checkpoint").write_text("{nope")
    assert any("position-checkpoint" in p for p in _verify_problems(store))
    (store / "config" / "topics.json").write_text("[1, 2")
    with pytest.raises(CorruptDataError):
        bcq.batch_cq_topics(store)


def test_bad_inner_properties(tmp_path: Path):
    cfg = StoreConfig(commit_log_file_size=64 * 1024, background_services=False)
    root = tmp_path / "s"
    with MessageStore.open(root, cfg) as s:
        s.put("bt", b"x", 0, sys_flag=INNER_BATCH_FLAG, properties={"INNER_NUM": " 3", "INNER_BASE": "0"})
    (root / "config").mkdir(exist_ok=True)
    (root / "config" / "topics.json").write_text(_topics_json(["bt"]))
    problems = _verify_problems(root)
    assert any("are not numbers" in p for p in problems), problems


# ------------------------------------------------------------------------------------------ CLI
def test_cli_inspect_get_verify(store: Path, tmp_path: Path):
    _compaction(store, tmp_path)
    before = tree_hash(store)
    r = run("bcq", "inspect", store, "--json")
    assert r.exit_code == 0, r.output
    doc = json.loads(r.output)
    assert [(q["topic"], q["queueId"], q["units"], q["maxOffset"]) for q in doc["batchQueues"]] == [
        ("bt", 0, 6, 16), ("bt", 1, 2, 9)]
    assert doc["compactionQueues"][0]["units"] == 3
    assert doc["positionCheckpoint"] == {"ck_0": 6}
    r = run("bcq", "get", store, "--topic", "bt", "--queue", 0, "--offset", 9, "--json")
    assert r.exit_code == 0, r.output
    got = json.loads(r.output)
    assert got["unit"]["msgBaseOffset"] == 9 and got["unit"]["batchSize"] == 2
    assert got["message"]["properties"]["INNER_BASE"] == "9"
    r = run("bcq", "get", store, "--topic", "ck", "--queue", 0, "--offset", 3, "--compaction", "--json")
    assert r.exit_code == 0, r.output
    assert json.loads(r.output)["message"]["body"] == "djM="  # b"v3"
    r = run("bcq", "get", store, "--topic", "ck", "--queue", 0, "--offset", 2, "--compaction")
    assert r.exit_code == 2 and r.output.startswith("error:")
    r = run("bcq", "verify", store)
    assert r.exit_code == 0, r.output
    r = run("bcq", "dump-compaction", store, "--topic", "ck", "--queue", 0, "--json")
    assert r.exit_code == 0, r.output
    assert [json.loads(line)["queueOffset"] for line in r.output.splitlines()] == [1, 3, 4]
    assert tree_hash(store) == before


def test_cli_errors(store: Path, tmp_path: Path):
    r = run("bcq", "get", store, "--topic", "bt", "--queue", 0, "--offset", 99)
    assert r.exit_code == 2 and r.output.startswith("error:")
    r = run("bcq", "get", store, "--topic", "nope", "--queue", 0, "--offset", 0)
    assert r.exit_code == 2 and r.output.startswith("error:")
    r = run("bcq", "inspect", tmp_path / "missing")
    assert r.exit_code == 2 and r.output.startswith("error:")
    _patch_unit(store, 0, 2, size=3)
    r = run("bcq", "verify", store)
    assert r.exit_code == 1 and "size 3" in r.output


def test_main_commands_see_batch_queues(store: Path, tmp_path: Path):
    _compaction(store, tmp_path)
    shutil.rmtree(store / "consumequeue" / "bt")  # a broker keeps no 20-byte queue for a BatchCQ topic
    before = tree_hash(store)
    r = run("inspect", store, "--json")
    assert r.exit_code == 0, r.output
    batch = json.loads(r.output)["batchConsumeQueue"]
    assert batch["batchCqTopics"] == ["bt"]
    assert [(q["topic"], q["queueId"], q["messages"]) for q in batch["batchQueues"]] == [("bt", 0, 16), ("bt", 1, 9)]
    r = run("inspect", store)
    assert r.exit_code == 0 and "batchconsumequeue" in r.output and "ck_0=6" in r.output
    r = run("get", store, "--topic", "bt", "--queue", 0, "--offset", 3, "--count", 3, "--json")
    assert r.exit_code == 0, r.output
    rows = [json.loads(line) for line in r.output.splitlines()]
    assert [(x["unit"]["msgBaseOffset"], x["unit"]["batchSize"]) for x in rows] == [(3, 1), (4, 5)]
    r = run("verify", store)
    assert r.exit_code == 0, r.output
    assert tree_hash(store) == before
    _patch_unit(store, 1, 1, store_time=1)
    r = run("verify", store, "--json")
    assert r.exit_code == 1
    assert any("storeTime 1" in p for p in json.loads(r.output)["problems"])


def test_rebuild_without_batch_topics_leaves_batch_queues(store: Path):
    (store / "config" / "topics.json").write_text(_topics_json([]))
    before = tree_hash(store / "batchconsumequeue")
    r = run("rebuild-index", store, "--json")
    assert r.exit_code == 0, r.output
    assert json.loads(r.output)["batchQueues"] == 0
    assert tree_hash(store / "batchconsumequeue") == before


def test_bcq_commands_take_commitlog_dirs(store: Path, tmp_path: Path):
    moved = tmp_path / "disk1" / "commitlog"
    moved.parent.mkdir()
    shutil.move(store / "commitlog", moved)
    r = run("bcq", "verify", store, "--commitlog", moved)
    assert r.exit_code == 0, r.output
    r = run("bcq", "get", store, "--commitlog", moved, "--topic", "bt", "--queue", 1, "--offset", 8, "--json")
    assert r.exit_code == 0, r.output
    assert json.loads(r.output)["unit"]["msgBaseOffset"] == 2
    r = run("bcq", "get", store, "--topic", "bt", "--queue", 1, "--offset", 8)
    assert r.exit_code == 2 and r.output.startswith("error:")
