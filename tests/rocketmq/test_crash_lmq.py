"""LMQ queue offsets across crashes (issue 20 item 2): writers with LMQ on are SIGKILLed in turn;
after every kill, on a copy of the store as the next writer opens it: no LMQ queue offset was given
to two records, and every acknowledged message is readable in each of its LMQ queues at the offset
it was acknowledged with."""

from __future__ import annotations

import os
import random
import shutil
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from mqstore import MessageStore
from mqstore.storage.rocketmq.queue_table import queue_offset_duplicates
from mqstore.storage.rocketmq.verify import verify_store

sys.path.insert(0, str(Path(__file__).parent))
from lmq_crash_writer import body_of, lmq_writer_config

WRITER = Path(__file__).with_name("lmq_crash_writer.py")
KILLS = int(os.environ.get("MQSTORE_CRASH_KILLS", "5"))
Ack = tuple[int, dict[str, int]]


def kill_writer_after(store: Path, flush: str, start: int, want: int) -> dict[int, Ack]:
    proc = subprocess.Popen([sys.executable, str(WRITER), str(store), flush, str(start)], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)
    acks: dict[int, Ack] = {}
    assert proc.stdout is not None

    def take(line: str) -> None:
        _, i, off, pairs = line.split()
        acks[int(i)] = (int(off), {q: int(o) for q, o in (p.split("=") for p in pairs.split(","))})

    while len(acks) < want:
        line = proc.stdout.readline()
        if not line:
            break
        take(line)
    proc.send_signal(signal.SIGKILL)
    rest, err = proc.communicate()
    for line in rest.splitlines():
        if line.startswith("ack ") and len(line.split()) == 4:
            take(line)
    assert proc.returncode == -signal.SIGKILL, err[-2000:]
    assert acks, f"writer acknowledged nothing: {err[-2000:]}"
    return acks


def check_copy(store: Path, copy: Path, flush: str, acked: dict[int, Ack]) -> None:
    shutil.rmtree(copy, ignore_errors=True)
    shutil.copytree(store, copy)
    with MessageStore.open(copy, lmq_writer_config(flush)) as s:
        assert not s.recovery.clean_shutdown
        cl = s.engine.commit_log
        dups = queue_offset_duplicates(cl.scan(cl.min_offset, cl.max_offset), s.engine.multi_dispatch)
        assert dups == [], dups[:5]
        wrong = []
        for i, (off, pairs) in sorted(acked.items()):
            for q, o in pairs.items():
                got = s.get(q, 0, o, 1)
                if not got or got[0].commit_log_offset != off or got[0].body != body_of(i):
                    wrong.append((i, q, o, off, got[0].commit_log_offset if got else None))
        assert wrong == [], f"{len(wrong)} LMQ units of acknowledged messages wrong: {wrong[:5]}"
        # the next put continues after everything the CommitLog holds, in every LMQ queue
        for q in {q for _, pairs in acked.values() for q in pairs}:
            top = max(o for _, pairs in acked.values() for qq, o in pairs.items() if qq == q)
            assert s.engine.queue_offsets[(q, 0)] > top


@pytest.mark.parametrize("flush", ["sync", "async"])
def test_lmq_writers_killed_in_turn_never_reuse_an_lmq_offset(tmp_path: Path, flush: str) -> None:
    rng = random.Random(20 if flush == "sync" else 2)
    store, copy = tmp_path / "store", tmp_path / "copy"
    acked: dict[int, Ack] = {}
    for round_no in range(KILLS):
        acked.update(kill_writer_after(store, flush, round_no * 1_000_000, rng.randint(80, 400)))
        check_copy(store, copy, flush, acked)
    assert verify_store(copy, lmq_writer_config(flush)).ok
