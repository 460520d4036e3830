"""Crash tests: a child process appends (sync and async flush) and is killed with SIGKILL at random
points; after each reopen every acknowledged message is readable byte-identical, nothing torn
appears, verify is clean and key queries find every acknowledged key."""

from __future__ import annotations

import os
import random
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from mqstore import MessageStore, StoreConfig
from mqstore.storage.rocketmq.rebuild import compare_trees, rebuild_indexes
from mqstore.storage.rocketmq.verify import verify_store

sys.path.insert(0, str(Path(__file__).parent))
from crash_child import body_of

CHILD = Path(__file__).with_name("crash_child.py")
KILLS = int(os.environ.get("MQSTORE_CRASH_KILLS", "6"))


def cfg() -> StoreConfig:
    return StoreConfig(commit_log_file_size=16384, consume_queue_file_size=400, hash_slot_num=64, index_num=40,
                       background_services=False)


def run_child_and_kill(store: Path, flush: str, start: int, rng: random.Random) -> dict[int, int]:
    proc = subprocess.Popen([sys.executable, str(CHILD), str(store), flush, str(start)], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)
    acks: dict[int, int] = {}
    target = rng.randint(1, 120)
    deadline = time.monotonic() + 60
    assert proc.stdout is not None
    while len(acks) < target and time.monotonic() < deadline:
        line = proc.stdout.readline()
        if not line:
            break
        _, i, off = line.split()
        acks[int(i)] = int(off)
    if rng.random() < 0.5:
        time.sleep(rng.random() * 0.01)  # let it run on a little: kill mid-append
    proc.send_signal(signal.SIGKILL)
    rest, err = proc.communicate()
    for line in rest.splitlines():
        if line.startswith("ack "):
            _, i, off = line.split()
            acks[int(i)] = int(off)
    assert acks, f"child produced no acknowledgement: {err[-2000:]}"
    return acks


@pytest.mark.parametrize("flush", ["sync", "async"])
def test_kill9_keeps_acknowledged_messages(tmp_path: Path, flush: str) -> None:
    rng = random.Random(1234 if flush == "sync" else 99)
    store = tmp_path / "store"
    acked: dict[int, int] = {}
    for round_no in range(KILLS):
        start = round_no * 1_000_000  # unacknowledged messages of a killed child never share a key
        acks = run_child_and_kill(store, flush, start, rng)
        acked.update(acks)
        with MessageStore.open(store, cfg()) as s:
            assert not s.recovery.clean_shutdown
            for i, off in acks.items():
                m = s.get_by_offset(off)
                assert m.body == body_of(i) and m.keys == [f"key-{i}", "shared"]
            sample = rng.sample(sorted(acked), min(15, len(acked)))
            for i in sample:
                hits = s.query_by_key(f"T{i % 3}", f"key-{i}")
                assert [h.commit_log_offset for h in hits] == [acked[i]]
        assert verify_store(store, cfg()).ok
    out = tmp_path / "rebuilt"
    rebuild_indexes(store, out, config=cfg())
    assert compare_trees(store, out) == []
    with MessageStore.open(store, cfg(), read_only=True) as s:
        shared = {m.commit_log_offset for t in ("T0", "T1", "T2") for m in s.query_by_key(t, "shared")}
        assert set(acked.values()) <= shared
