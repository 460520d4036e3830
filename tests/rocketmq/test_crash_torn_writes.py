"""A kill in the middle of writing a record never leaves a record that recovery takes for valid
(found by the crash campaign of issue 18: a SIGKILL from another thread while the batch encoder ran
without the GIL left a record whose header and body, so its body CRC, were in place and whose
properties were zeros; recovery served it as a message without keys).  The first record's
TOTALSIZE is the commit point and is written last."""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from mqstore import MessageStore, StoreConfig


def cfg() -> StoreConfig:
    return StoreConfig(commit_log_file_size=65536, consume_queue_file_size=400, background_services=False)


def body(i: int) -> bytes:
    return b"body-%d-" % i * (1 + i % 5)


def check_whole(store: Path, expected: int) -> list[int]:
    """Every record of the recovered store is a whole message of this test; returns their numbers."""
    with MessageStore.open(store, cfg()) as s:
        assert not s.recovery.clean_shutdown
        cl = s.engine.commit_log
        seen = []
        for batch in cl.scan(cl.min_offset, cl.max_offset, check_crc=True):
            for off in batch.commit_log_offset.tolist():
                m = s.get_by_offset(off)
                i = int(m.body.split(b"-")[1])
                assert m.body == body(i) and m.keys == [f"k{i}", "x"] and m.topic == "T", (off, m)
                seen.append(i)
        assert seen == list(range(len(seen))) and len(seen) >= expected
        s.put("T", body(999), keys=["k999", "x"])  # the store goes on from the recovered end
    return seen


@pytest.mark.parametrize("cut", [1, 10, 40, 100])
def test_kill_inside_the_batch_encoder(tmp_path: Path, cut: int) -> None:
    """The encoder is stopped (SIGKILL) when it has written all but the last ``cut`` bytes of the
    batch's first record and nothing after: the batch is absent after recovery, never torn."""
    store = tmp_path / "s"
    code = textwrap.dedent(f"""
        import os, signal, sys
        sys.path.insert(0, {str(Path(__file__).parent)!r})
        from test_crash_torn_writes import body, cfg
        import mqstore.kernels.rocketmq.put as st  # the store calls the encoders through these modules
        import mqstore.kernels.rocketmq.put_one as po
        from mqstore import MessageStore
        s = MessageStore.open({str(store)!r}, cfg())
        for i in range(5):
            s.put("T", body(i), keys=[f"k{{i}}", "x"])
        real = st.encode_records_into

        def stopped(out, pos, cols, lo, hi, sizes, phys, now):
            end = real(out, pos, cols, lo, hi, sizes, phys, now)
            if lo == 0:  # the call that writes the batch's first record: it had not finished
                out[pos + int(sizes[0]) - {cut}:end] = 0
                os.kill(os.getpid(), signal.SIGKILL)
            return end

        st.encode_records_into = stopped
        real_common = po.encode_common_into  # the native encoder from the list of bodies, when built

        def stopped_common(out, pos, lo, hi, sizes, phys, now, *rest):
            end = real_common(out, pos, lo, hi, sizes, phys, now, *rest)
            if lo == 0:
                out[pos + int(sizes[0]) - {cut}:end] = 0
                os.kill(os.getpid(), signal.SIGKILL)
            return end

        if real_common is not None:
            po.encode_common_into = stopped_common
        s.put_batch([dict(topic="T", body=body(i), keys=[f"k{{i}}", "x"]) for i in range(5, 9)])
    """)
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert proc.returncode == -signal.SIGKILL, proc.stderr[-3000:]
    assert check_whole(store, 5) == [0, 1, 2, 3, 4]


def _put_killed_at_line(store: Path, n: int) -> None:
    """(In a forked child.)  Open ``store`` and put one message of a new shape, SIGKILLed at the
    ``n``-th Python line event inside the append; exit status 7 if the put finished first."""
    try:
        s = MessageStore.open(store, cfg())
        left = [n]

        def local(frame, event, arg):  # type: ignore[no-untyped-def]
            if event == "line":
                left[0] -= 1
                if left[0] <= 0:
                    os.kill(os.getpid(), signal.SIGKILL)
            return local

        engine = type(s.engine)
        real = engine.append_one

        def traced(*a, **k):  # type: ignore[no-untyped-def]
            sys.settrace(lambda f, e, x: local)
            try:
                return real(*a, **k)
            finally:
                sys.settrace(None)

        engine.append_one = traced  # type: ignore[method-assign]
        s.put("T", body(3) + b"-" * 17, keys=["k3", "x"])
    finally:
        os._exit(7)


def test_kill_at_every_line_of_a_single_put(tmp_path: Path) -> None:
    """A put of a record shape not seen before (the three-step write), killed after each Python
    line of the append in turn (as a kill from another thread lands between two statements):
    after recovery the record is whole or absent."""
    base = tmp_path / "base"
    with MessageStore.open(base, cfg()) as s:
        for i in range(3):
            s.put("T", body(i), keys=[f"k{i}", "x"])
    outcomes = set()
    for n in range(1, 200):
        store = tmp_path / f"s{n}"
        shutil.copytree(base, store)
        pid = os.fork()
        if pid == 0:
            _put_killed_at_line(store, n)
        _, status = os.waitpid(pid, 0)
        if os.WIFEXITED(status):
            assert os.WEXITSTATUS(status) == 7
            break  # the put ended before the n-th line: every line was a kill point
        assert os.WTERMSIG(status) == signal.SIGKILL
        with MessageStore.open(store, cfg()) as s:
            cl = s.engine.commit_log
            offs = [o for b in cl.scan(cl.min_offset, cl.max_offset, check_crc=True) for o in b.commit_log_offset.tolist()]
            msgs = [s.get_by_offset(o) for o in offs]
        assert [m.keys for m in msgs[:3]] == [[f"k{i}", "x"] for i in range(3)]
        assert len(msgs) in (3, 4)
        if len(msgs) == 4:
            assert msgs[3].body == body(3) + b"-" * 17 and msgs[3].keys == ["k3", "x"] and msgs[3].topic == "T"
        outcomes.add(len(msgs))
    else:
        raise AssertionError("the put never completed")
    assert outcomes == {3, 4}  # kills before and after the commit point
