"""RocketMQ 5.x timer files: codecs, the read-only scan, inspect / dump --timer / verify, and
rebuild-index leaving the timer files alone.  Stores are made by tests/rocketmq/timer_support.py."""

from __future__ import annotations

import json
import struct
from pathlib import Path

import numpy as np
import pytest
from click.testing import CliRunner
from hypothesis import given, settings
from hypothesis import strategies as st

from mqstore.cli.main import cli
from mqstore.errors import CorruptDataError, TruncatedRecordError
from mqstore.formats.rocketmq.timer import (
    BLANK_MAGIC,
    DEFAULT_WHEEL_SLOTS,
    SLOT_DTYPE,
    SLOT_SIZE,
    UNIT_DTYPE,
    UNIT_SIZE,
    TimerCheckpoint,
    TimerLogUnit,
    WheelSlot,
    encode_blank,
    is_magic_ok,
    slot_index,
)
from mqstore.storage.rocketmq.timer import _chain_depths, load_timer_state

from .timer_support import WRITE_TIME, TimerMsg, build_timer_store, file_names, tree_hash

LONG = st.integers(-(2**63), 2**63 - 1)
INT = st.integers(-(2**31), 2**31 - 1)
NONNEG = st.integers(0, 2**63 - 1)
SMALL_FILE = UNIT_SIZE * 3 + 16 + 10  # three units, a blank, ten spare bytes


def run(*args: str):
    return CliRunner().invoke(cli, ["rocketmq", *args], catch_exceptions=False)


MSGS = [TimerMsg("TopicA", WRITE_TIME + 5000), TimerMsg("TopicB", WRITE_TIME + 5000, 2),
        TimerMsg("TopicA", WRITE_TIME + 7300), TimerMsg("TopicC", WRITE_TIME - 3000),
        TimerMsg("TopicA", WRITE_TIME + 5400, delete=True), TimerMsg("TopicB", WRITE_TIME + 5999, 1)]


@pytest.fixture
def store(tmp_path: Path) -> tuple[Path, dict]:
    root = tmp_path / "store"
    return root, build_timer_store(root, MSGS, timerlog_file_size=SMALL_FILE)


# ---------------------------------------------------------------- codecs


@given(LONG, LONG, LONG, INT, INT)
def test_slot_round_trip(t: int, first: int, last: int, num: int, magic: int) -> None:
    s = WheelSlot(t, first, last, num, magic)
    data = s.encode()
    assert len(data) == SLOT_SIZE
    assert WheelSlot.decode(data) == s
    assert np.frombuffer(data, SLOT_DTYPE)[0].tolist() == (t, first, last, num, magic)


@given(LONG, st.integers(0, 15), LONG, INT, LONG, INT, INT, LONG)
def test_unit_round_trip(prev: int, magic: int, wt: int, delay: int, opy: int, spy: int, th: int, res: int) -> None:
    u = TimerLogUnit(prev, magic, wt, delay, opy, spy, th, res)
    data = u.encode()
    assert len(data) == UNIT_SIZE
    assert TimerLogUnit.decode(b"xx" + data, 2) == u
    assert np.frombuffer(data, UNIT_DTYPE)[0].tolist() == (UNIT_SIZE, prev, magic, wt, delay, opy, spy, th, res)
    assert u.delivery_ms == wt + delay


@given(st.tuples(NONNEG, NONNEG, NONNEG, NONNEG, NONNEG, NONNEG, NONNEG))
def test_checkpoint_round_trip(values: tuple[int, ...]) -> None:
    ck = TimerCheckpoint(*values)
    data = ck.encode()
    assert len(data) == 4096 and data[56:] == bytes(4040)
    assert TimerCheckpoint.decode(data) == ck
    assert TimerCheckpoint.decode(data[:56]) == ck


def test_checkpoint_old_layout_and_garbage() -> None:
    old = struct.pack(">qqqq", 5, 6, 7, 8)
    assert TimerCheckpoint.decode(old) == TimerCheckpoint(5, 6, 7, 8, 0, 0, 0)
    with pytest.raises(CorruptDataError, match="31 bytes"):
        TimerCheckpoint.decode(old[:31])
    with pytest.raises(CorruptDataError, match="last_timer_log_flush_pos is -1"):
        TimerCheckpoint.decode(struct.pack(">qqqqqqq", 1, -1, 0, 0, 0, 0, 0))


def test_unit_decode_refuses_bad_input() -> None:
    good = TimerLogUnit(-1, 1, 10, 20, 30, 40, 50).encode()
    with pytest.raises(TruncatedRecordError, match="51 left"):
        TimerLogUnit.decode(good[:51])
    with pytest.raises(CorruptDataError, match="magic 0x10"):
        TimerLogUnit.decode(good[:12] + struct.pack(">i", 16) + good[16:])
    with pytest.raises(CorruptDataError, match="size 53"):
        TimerLogUnit.decode(struct.pack(">i", 53) + good[4:])
    with pytest.raises(TruncatedRecordError):
        WheelSlot.decode(bytes(31))


def test_constants_match_the_broker() -> None:
    assert BLANK_MAGIC == -875286124  # 0xCBD43194
    assert struct.unpack(">iqi", encode_blank(99)) == (99, 0, BLANK_MAGIC)
    assert DEFAULT_WHEEL_SLOTS * SLOT_SIZE == 38_707_200
    assert slot_index(WRITE_TIME + 5000) == (WRITE_TIME + 5000) // 1000 % DEFAULT_WHEEL_SLOTS
    assert slot_index(1999, 500, 7) == 3
    assert is_magic_ok(0xF) and not is_magic_ok(0x10) and not is_magic_ok(BLANK_MAGIC)


def _walk(parent: list[int], weight: list[int], i: int) -> tuple[int, int, int]:
    """Reference twin of _chain_depths: follow the parent links one by one."""
    n, w = 1, weight[i]
    while parent[i] != i:
        i = parent[i]
        n += 1
        w += weight[i]
    return i, n, w


@settings(max_examples=60)
@given(st.lists(st.tuples(st.integers(0, 1000), st.sampled_from([1, -1])), min_size=1, max_size=60))
def test_chain_depths_matches_the_walk(spec: list[tuple[int, int]]) -> None:
    parent = [i if i == 0 else p % (i + 1) for i, (p, _) in enumerate(spec)]  # links go to earlier nodes
    weight = [w for _, w in spec]
    root, dist, acc = _chain_depths(np.array(parent, np.int64), np.array(weight, np.int64))
    for i in range(len(parent)):
        assert (int(root[i]), int(dist[i]), int(acc[i])) == _walk(parent, weight, i)


# ---------------------------------------------------------------- a store with timers


def test_scan_follows_the_files(store: tuple[Path, dict]) -> None:
    root, built = store
    assert file_names(root) == [f"{0:020d}", f"{SMALL_FILE:020d}"]
    st_ = load_timer_state(root)
    assert st_.scan.problems == [] and st_.problems == []
    assert st_.scan.units.pos.tolist() == [p for p, _ in built["units"]]
    assert st_.scan.end == built["end"]
    assert st_.precision_ms == 1000
    assert st_.scan.units.offset_py.tolist() == [r.commit_log_offset for r in built["puts"]]


def test_inspect_shows_the_timer_state(store: tuple[Path, dict]) -> None:
    root, built = store
    r = run("inspect", "--json", str(root))
    assert r.exit_code == 0, r.output
    t = json.loads(r.output)["timer"]
    assert t["units"] == 6 and t["deleteUnits"] == 1 and t["rollUnits"] == 0
    assert t["pending"] == 4  # the unit due before lastReadTimeMs is done; the delete marker is not a message
    assert t["pendingPerSecond"] == [{"second": (WRITE_TIME + 5000) // 1000, "messages": 3, "deletes": 1},
                                     {"second": (WRITE_TIME + 7300) // 1000, "messages": 1, "deletes": 0}]
    assert t["timerLogEnd"] == built["end"]
    assert t["checkpoint"]["lastTimerLogFlushPos"] == built["end"]
    assert t["checkpoint"]["flushPosBehindEnd"] == 0
    assert t["wheelSlots"] == DEFAULT_WHEEL_SLOTS and t["wheelSlotsUsed"] == 3
    assert t["problems"] == []
    kinds = {c["name"]: c["kind"] for c in json.loads(r.output)["config"]}
    assert kinds["timercheck"].startswith("timer checkpoint")
    text = run("inspect", str(root))
    assert text.exit_code == 0 and "6 units (0 roll, 1 delete), 4 pending" in text.output


def test_dump_timer_lists_pending_messages(store: tuple[Path, dict]) -> None:
    root, built = store
    r = run("dump", "--timer", "--json", str(root))
    assert r.exit_code == 0, r.output
    rows = [json.loads(line) for line in r.output.splitlines()]
    assert [(x["realTopic"], x["realQueueId"], x["deliverMs"], x["delete"]) for x in rows] == [
        ("TopicA", 0, WRITE_TIME + 5000, False), ("TopicB", 2, WRITE_TIME + 5000, False),
        ("TopicA", 0, WRITE_TIME + 5400, True), ("TopicB", 1, WRITE_TIME + 5999, False),
        ("TopicA", 0, WRITE_TIME + 7300, False)]
    puts = built["puts"]
    assert [x["commitLogOffset"] for x in rows] == [puts[i].commit_log_offset for i in (0, 1, 4, 5, 2)]
    assert all(x["error"] is None and x["size"] == puts[i].size for x, i in zip(rows, (0, 1, 4, 5, 2), strict=True))
    everything = run("dump", "--timer-all", "--json", "--limit", "2", str(root))
    first = [json.loads(line) for line in everything.output.splitlines()]
    assert [(x["realTopic"], x["deliverMs"]) for x in first] == [("TopicC", WRITE_TIME - 3000),
                                                                 ("TopicA", WRITE_TIME + 5000)]
    text = run("dump", "--timer", str(root))
    assert text.exit_code == 0 and "pending timer messages" in text.output


def test_verify_clean_and_read_only_commands_change_nothing(store: tuple[Path, dict]) -> None:
    root, _ = store
    before = tree_hash(root)
    r = run("verify", "--json", str(root))
    assert r.exit_code == 0, r.output
    assert json.loads(r.output)["problems"] == []
    for args in (("inspect", str(root)), ("dump", "--timer", str(root)), ("dump", "--timer-all", "--json", str(root))):
        assert run(*args).exit_code == 0
    assert tree_hash(root) == before


def test_default_geometry_and_other_precision(tmp_path: Path) -> None:
    root = tmp_path / "store"
    msgs = [TimerMsg("T1", WRITE_TIME + 1250 + 100 * i) for i in range(8)] + [TimerMsg("T2", WRITE_TIME + 1250)]
    build_timer_store(root, msgs, precision_ms=100)  # one preallocated 100 MiB timerlog file
    assert (root / "timerlog" / f"{0:020d}").stat().st_size == 100 * 1024 * 1024
    state = load_timer_state(root)
    assert state.precision_ms == 100 and len(state.scan.units) == 9 and state.scan.problems == []
    r = run("verify", "--json", str(root))
    assert r.exit_code == 0 and json.loads(r.output)["problems"] == []


def test_rebuild_index_leaves_the_timer_files_alone(store: tuple[Path, dict]) -> None:
    root, _ = store
    timer = {k: v for k, v in tree_hash(root).items() if k.startswith(("timer", "config/timer"))}
    assert len(timer) == 5
    r = run("rebuild-index", str(root))
    assert r.exit_code == 0, r.output
    after = tree_hash(root)
    assert {k: after[k] for k in timer} == timer
    assert run("verify", str(root)).exit_code == 0


# ---------------------------------------------------------------- bad input


def _verify_problems(root: Path) -> list[str]:
    r = run("verify", "--json", str(root))
    assert r.exit_code == 1, r.output
    return json.loads(r.output)["problems"]


def _one_error_line(*args: str) -> str:
    r = CliRunner().invoke(cli, ["rocketmq", *args])
    assert r.exit_code == 2, r.output
    lines = r.output.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error:"), r.output
    return lines[0]


def test_truncated_timerlog_unit(tmp_path: Path) -> None:
    root = tmp_path / "store"
    build_timer_store(root, MSGS[:2], timerlog_file_size=SMALL_FILE)
    f = root / "timerlog" / f"{0:020d}"
    f.write_bytes(f.read_bytes()[: UNIT_SIZE + 30])  # the second unit cut after 30 bytes
    problems = _verify_problems(root)
    assert any("truncated timerlog unit at position 52: 30 of 52 bytes" in p for p in problems)
    assert "truncated timerlog unit" in _one_error_line("dump", "--timer", str(root))
    r = run("inspect", "--json", str(root))
    assert r.exit_code == 0
    assert any("truncated timerlog unit" in p for p in json.loads(r.output)["timer"]["problems"])


def test_slot_pointing_past_the_timerlog(store: tuple[Path, dict]) -> None:
    root, built = store
    idx = slot_index(WRITE_TIME + 7300)
    slot = built["slots"][idx]
    with open(root / "timerwheel", "r+b") as fh:
        fh.seek(idx * SLOT_SIZE)
        fh.write(WheelSlot(slot.time, slot.first_pos, built["end"] + 10 * UNIT_SIZE, slot.num, 0).encode())
    problems = _verify_problems(root)
    assert any(f"slot {idx}" in p and "past the timerlog end" in p and "lastPos" in p for p in problems)


def test_garbage_timercheck(store: tuple[Path, dict]) -> None:
    root, _ = store
    (root / "config" / "timercheck").write_bytes(bytes(range(200, 256)) * 3)
    problems = _verify_problems(root)
    assert any(p.startswith("config/timercheck:") and "negative" in p for p in problems)
    assert "timer checkpoint field" in _one_error_line("dump", "--timer", str(root))
    (root / "config" / "timercheck").write_bytes(b"short")
    assert any("is 5 bytes" in p for p in _verify_problems(root))


def test_unit_pointing_at_a_wrong_record(store: tuple[Path, dict]) -> None:
    root, built = store
    pos, unit = built["units"][2]
    f = root / "timerlog" / f"{0:020d}"
    data = bytearray(f.read_bytes())
    data[pos + 36:pos + 40] = struct.pack(">i", unit.size_py + 1)  # sizePy
    f.write_bytes(bytes(data))
    problems = _verify_problems(root)
    assert problems == [f"timerlog: unit at {pos} says size {unit.size_py + 1} for the record at "
                        f"{unit.offset_py}, which is {unit.size_py} bytes"]
    data[pos + 36:pos + 40] = struct.pack(">i", unit.size_py)
    data[pos + 28:pos + 36] = struct.pack(">q", 10**9)  # offsetPy past the CommitLog
    f.write_bytes(bytes(data))
    assert any("past the CommitLog end" in p for p in _verify_problems(root))


def test_broken_chain_and_wrong_count(store: tuple[Path, dict]) -> None:
    root, built = store
    idx = slot_index(WRITE_TIME + 5000)
    slot = built["slots"][idx]
    assert slot.num == 2  # in that second: TopicA, TopicB, a delete marker, TopicB again: 1 + 1 - 1 + 1
    with open(root / "timerwheel", "r+b") as fh:
        fh.seek(idx * SLOT_SIZE)
        fh.write(WheelSlot(slot.time, slot.first_pos, slot.last_pos, 7, 0).encode())
    assert any(f"slot {idx}" in p and "says num 7, its chain holds 2" in p for p in _verify_problems(root))
    # cut the chain: the last unit of the slot forgets its predecessor
    last_pos = slot.last_pos
    base = last_pos // SMALL_FILE * SMALL_FILE
    f = root / "timerlog" / f"{base:020d}"
    data = bytearray(f.read_bytes())
    at = last_pos - base
    data[at + 4:at + 12] = struct.pack(">q", -1)
    f.write_bytes(bytes(data))
    assert any("does not reach firstPos" in p for p in _verify_problems(root))


def test_wheel_of_a_wrong_size(store: tuple[Path, dict]) -> None:
    root, _ = store
    with open(root / "timerwheel", "r+b") as fh:
        fh.truncate(DEFAULT_WHEEL_SLOTS * SLOT_SIZE - 5)
    assert any(p.startswith("timerwheel:") and "not a non-zero multiple" in p for p in _verify_problems(root))
    assert "timer wheel is" in _one_error_line("dump", "--timer", str(root))


# ---------------------------------------------------------------- verify a window at a time


@pytest.mark.parametrize("batch", [2, 3, 1 << 16])
def test_verify_windowed_timer_checks_equal_the_whole_table(tmp_path: Path, batch: int,
                                                            monkeypatch: pytest.MonkeyPatch) -> None:
    """A store with timer files is verified a CommitLog window at a time (no whole record table):
    the timerlog units are answered as the scan passes their records, with the same problems in
    the same order as the reference, for units pointing at a wrong size, mid-record, a record of
    another topic, past the end, and below the CommitLog's first offset."""
    from mqstore.storage.rocketmq import verify as verify_module
    from mqstore.storage.rocketmq.verify import verify_store, verify_store_reference

    from .timer_support import config

    root = tmp_path / "store"
    msgs = [TimerMsg(("TopicA", "TopicB")[i % 2], WRITE_TIME + 1000 * (i % 7), i % 3) for i in range(23)]
    built = build_timer_store(root, msgs, timerlog_file_size=UNIT_SIZE * 8 + 16 + 4, plain=5)

    def same() -> list[str]:
        calls = []
        table = verify_module._verify_table
        monkeypatch.setattr(verify_module, "_verify_table", lambda *a, **k: (calls.append(1), table(*a, **k)))
        monkeypatch.setattr(verify_module, "_VERIFY_BATCH_RECORDS", batch)
        fast = verify_store(root, config())
        monkeypatch.undo()
        ref = verify_store_reference(root, config())
        assert calls == []
        assert fast.problems == ref.problems
        assert fast.messages == ref.messages
        return fast.problems

    assert same() == []
    plain_size = int.from_bytes((root / "commitlog" / f"{0:020d}").read_bytes()[:4], "big")
    damage = [(1, 36, ">i", lambda u: u.size_py + 3), (4, 28, ">q", lambda u: u.offset_py + 8),
              (7, 28, ">q", lambda u: 0), (7, 36, ">i", lambda u: plain_size),  # the first plain message
              (11, 28, ">q", lambda u: 10**9), (15, 28, ">q", lambda u: -5)]
    for k, at, fmt, value in damage:
        pos, unit = built["units"][k]
        f = root / "timerlog" / f"{(pos // (UNIT_SIZE * 8 + 16 + 4)) * (UNIT_SIZE * 8 + 16 + 4):020d}"
        data = bytearray(f.read_bytes())
        rel = pos % (UNIT_SIZE * 8 + 16 + 4)
        data[rel + at:rel + at + struct.calcsize(fmt)] = struct.pack(fmt, value(unit))
        f.write_bytes(bytes(data))
    problems = same()
    assert any("says size" in p for p in problems)
    assert any("not a record start" in p for p in problems)
    assert any("not a message of rmq_sys_wheel_timer" in p for p in problems)
    assert any("past the CommitLog end" in p for p in problems)
