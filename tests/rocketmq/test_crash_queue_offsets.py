"""Queue offsets across crashes (issue 18): after every SIGKILL, every acknowledged message is at
its acknowledged queue offset (``get`` right after ``open``, no explicit dispatch) and no two
CommitLog records share a (topic, queue, queue offset).

The writer is killed and the next writer recovers the store directly, as an application does; the
checks run on a copy of the store after each kill, so that checking never repairs the store the
next writer recovers."""

from __future__ import annotations

import os
import random
import shutil
import signal
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from mqstore import MessageStore, StoreConfig
from mqstore.storage.rocketmq.queue_table import queue_offset_duplicates
from mqstore.storage.rocketmq.verify import verify_store

sys.path.insert(0, str(Path(__file__).parent))
from crash_writer import body_of, writer_config

WRITER = Path(__file__).with_name("crash_writer.py")
KILLS = int(os.environ.get("MQSTORE_CRASH_KILLS", "6"))


def duplicates(store: MessageStore) -> list:
    cl = store.engine.commit_log
    return queue_offset_duplicates(cl.scan(cl.min_offset, cl.max_offset))


def kill_child_after(store: Path, flush: str, start: int, want: int) -> dict[int, tuple[str, int, int, int]]:
    proc = subprocess.Popen([sys.executable, str(WRITER), str(store), flush, str(start)], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)
    acks: dict[int, tuple[str, int, int, int]] = {}
    assert proc.stdout is not None

    def take(line: str) -> None:
        _, i, t, q, qo, off = line.split()
        acks[int(i)] = (t, int(q), int(qo), int(off))

    while len(acks) < want:
        line = proc.stdout.readline()
        if not line:
            break
        take(line)
    proc.send_signal(signal.SIGKILL)
    rest, err = proc.communicate()
    for line in rest.splitlines():
        if line.startswith("ack "):
            take(line)
    assert proc.returncode == -signal.SIGKILL, err[-2000:]
    assert acks, f"writer acknowledged nothing: {err[-2000:]}"
    return acks


def check_copy(store: Path, copy: Path, flush: str, acked: dict[int, tuple[str, int, int, int]]) -> None:
    """Open a copy of the crashed store as the next writer would and read every acknowledged
    message at its queue offset at once (no explicit dispatch)."""
    shutil.rmtree(copy, ignore_errors=True)
    shutil.copytree(store, copy)
    with MessageStore.open(copy, writer_config(flush)) as s:
        assert not s.recovery.clean_shutdown
        wrong = []
        for i, (t, q, qo, off) in sorted(acked.items()):
            got = s.get(t, q, qo, 1)
            if not got or got[0].commit_log_offset != off or got[0].body != body_of(i):
                wrong.append((i, t, q, qo, off, got[0].commit_log_offset if got else None))
        assert wrong == [], f"{len(wrong)} of {len(acked)} acknowledged messages not at their queue offset"
        for i in random.Random(len(acked)).sample(sorted(acked), min(40, len(acked))):
            t, _, _, off = acked[i]
            assert [m.commit_log_offset for m in s.query_by_key(t, f"k{i}")] == [off]
        assert duplicates(s) == []


@pytest.mark.parametrize("flush", ["sync", "async"])
def test_writers_killed_in_turn_never_reuse_a_queue_offset(tmp_path: Path, flush: str) -> None:
    rng = random.Random(18 if flush == "sync" else 81)
    store, copy = tmp_path / "store", tmp_path / "copy"
    acked: dict[int, tuple[str, int, int, int]] = {}
    for round_no in range(KILLS):
        acks = kill_child_after(store, flush, round_no * 1_000_000, rng.randint(100, 600))
        acked.update(acks)
        check_copy(store, copy, flush, acked)
    assert verify_store(copy, writer_config(flush)).ok


def _killed_writer(store: Path, flush: str, script: str) -> None:
    """Run ``script`` against ``s`` (the store opened without background services, so nothing is
    dispatched unless the script asks) in a child that then SIGKILLs itself."""
    code = textwrap.dedent(f"""
        import os, signal
        from mqstore import MessageStore, StoreConfig
        s = MessageStore.open({str(store)!r}, StoreConfig(flush_disk_type={flush!r}, background_services=False,
                              commit_log_file_size=16384, consume_queue_file_size=400))
    """) + textwrap.dedent(script) + "\nos.kill(os.getpid(), signal.SIGKILL)\n"
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert proc.returncode == -signal.SIGKILL, proc.stderr[-2000:]


def small(**kw: object) -> StoreConfig:
    return StoreConfig(commit_log_file_size=16384, consume_queue_file_size=400, **kw)  # type: ignore[arg-type]


@pytest.mark.parametrize("flush", ["sync", "async"])
def test_undispatched_tail_at_the_kill_keeps_its_queue_offsets(tmp_path: Path, flush: str) -> None:
    """Records written but not dispatched when the writer died: the next writer continues after
    them, also in a queue that only the undispatched tail knows."""
    store = tmp_path / "s"
    _killed_writer(store, flush, """
        for i in range(5):
            s.put("A", b"a%d" % i, queue_id=0)
        s.dispatch()
        for i in range(5, 30):
            s.put("A", b"a%d" % i, queue_id=0)
            s.put("B", b"b%d" % i, queue_id=3)
    """)
    with MessageStore.open(store, small(flush_disk_type=flush)) as s:
        assert not s.recovery.clean_shutdown
        assert s.put("A", b"next-a").queue_offset == 30
        assert s.put("B", b"next-b", queue_id=3).queue_offset == 25
        assert [m.body for m in s.get("A", 0, 28, 3)] == [b"a28", b"a29", b"next-a"]
        assert s.get("B", 3, 25, 1)[0].body == b"next-b"
        assert duplicates(s) == []


def test_dispatch_disabled_writer_continues_after_its_killed_tail(tmp_path: Path) -> None:
    """``dispatch_enabled=False`` (an external dispatcher owns the ConsumeQueues): the next queue
    offsets come from the CommitLog records, whatever the ConsumeQueues hold."""
    store = tmp_path / "s"
    with MessageStore.open(store, small()) as s:  # dispatched, clean close
        for _i in range(10):
            s.put("A", b"x", queue_id=0)
            s.put("A", b"y", queue_id=1)
    _killed_writer(store, "sync", """
        s.close()
        s = MessageStore.open(s.path, StoreConfig(dispatch_enabled=False, background_services=False,
                                                   commit_log_file_size=16384, consume_queue_file_size=400))
        for i in range(7):
            s.put("A", b"z", queue_id=0)
    """)
    with MessageStore.open(store, small(dispatch_enabled=False)) as s:
        assert s.put("A", b"w", queue_id=0).queue_offset == 17
        assert s.put("A", b"w", queue_id=1).queue_offset == 10
        assert duplicates(s) == []


def test_dispatch_disabled_open_looks_past_a_lagging_consume_queue(tmp_path: Path) -> None:
    """An external dispatcher killed mid-batch wrote the units of one queue and not of another:
    the common end of the ConsumeQueues is no bound, the records behind it still count."""
    store = tmp_path / "s"
    with MessageStore.open(store, small()) as s:
        for i in range(10):
            s.put("A", b"x%d" % i, queue_id=0)
        for _ in range(10):
            s.put("A", b"y", queue_id=1)
    cq = next((store / "consumequeue" / "A" / "0").iterdir())
    raw = bytearray(cq.read_bytes())
    raw[6 * 20 : 10 * 20] = bytes(4 * 20)  # units 6..9 of A/0 not written by the dispatcher
    cq.write_bytes(bytes(raw))
    with MessageStore.open(store, small(dispatch_enabled=False)) as s:
        assert s.put("A", b"z", queue_id=0).queue_offset == 10
        assert s.put("A", b"z", queue_id=1).queue_offset == 10
        assert duplicates(s) == []


def test_duplicate_scan_finds_every_shared_queue_offset(tmp_path: Path) -> None:
    """The checker is not vacuous: records forced onto queue offsets already taken are found."""
    with MessageStore.open(tmp_path / "s", small(background_services=False)) as s:
        for i in range(6):
            s.put("A", b"a", queue_id=i % 2)
        s.put("B", b"b", queue_id=0)
        eng = s.engine
        eng.queue_offsets[("A", 1)] = 1  # as the old recovery did: the table restarts too low
        eng.queue_offsets[("B", 0)] = 0
        r1 = s.put("A", b"again", queue_id=1)
        r2 = s.put("B", b"again", queue_id=0)
        found = duplicates(s)
        assert [(d.topic, d.queue_id, d.queue_offset) for d in found] == [("A", 1, 1), ("B", 0, 0)]
        assert found[0].commit_log_offsets[-1] == r1.commit_log_offset
        assert found[1].commit_log_offsets[-1] == r2.commit_log_offset
        assert all(len(d.commit_log_offsets) == 2 for d in found)
