"""Crash test: a child process appends with a flush policy and is killed with SIGKILL at random
points; reopening recovers every flushed batch, and ``verify`` is clean."""

from __future__ import annotations

import os
import random
import signal
import subprocess
import sys
import textwrap
from pathlib import Path

from mqstore.kafka import LogConfig, PartitionLog, verify_path

CONFIG = dict(segment_bytes=20_000, index_interval_bytes=500, max_index_size=4096, flush_interval_messages=7)

CHILD = textwrap.dedent("""
    import sys
    from mqstore.kafka import LogConfig, PartitionLog, SimpleRecord
    cfg = LogConfig(**{config!r})
    log = PartitionLog.open(sys.argv[1], cfg)
    print("start", log.log_end_offset, flush=True)
    flushed = log.recovery_point
    while True:
        o = log.log_end_offset
        n = 1 + o % 3
        recs = [SimpleRecord(value=b"rec-%d" % (o + i) * (1 + (o + i) % 17), key=b"k%d" % (o + i),
                             timestamp=1_700_000_000_000 + o + i) for i in range(n)]
        log.append_records(recs, compression=(o // 3) % 5 if (o // 3) % 5 != 2 else 0)
        if log.recovery_point != flushed:
            flushed = log.recovery_point
            print("flushed", flushed, flush=True)
""")


def _expected_value(offset: int) -> bytes:
    return b"rec-%d" % offset * (1 + offset % 17)


def test_kill_9_during_appends(tmp_path: Path) -> None:
    d = tmp_path / "crash-0"
    script = tmp_path / "child.py"
    script.write_text(CHILD.format(config=CONFIG))
    rnd = random.Random(20240611)
    env = dict(os.environ, PYTHONPATH=str(Path(__file__).resolve().parents[2] / "src"))
    durable = 0
    for _kill in range(5):
        p = subprocess.Popen([sys.executable, str(script), str(d)], stdout=subprocess.PIPE, text=True, env=env)
        assert p.stdout is not None
        start = p.stdout.readline().split()
        assert start[0] == "start" and int(start[1]) >= durable
        wanted = rnd.randrange(3, 40)
        seen = 0
        for line in p.stdout:
            seen += 1
            durable = max(durable, int(line.split()[1]))
            if seen >= wanted:
                break
        os.kill(p.pid, signal.SIGKILL)
        rest = p.stdout.read()  # lines printed before the kill landed are durable too
        for line in rest.splitlines():
            durable = max(durable, int(line.split()[1]))
        p.wait()
        assert p.returncode == -signal.SIGKILL
        log = PartitionLog.open(d, LogConfig(**CONFIG))
        assert not log.had_clean_shutdown
        assert log.log_end_offset >= durable
        for r in log.iter_records(0, durable):
            assert r.value == _expected_value(r.offset) and r.key == b"k%d" % r.offset
        assert sum(1 for _ in log.iter_records(0, durable)) == durable
        log.close()
        report = verify_path(d)
        assert report.ok, report.problems
    assert durable > 0
