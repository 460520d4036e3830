"""Crash test of the key index: a child appends with ``key_index=True`` (a header indexed too, a
tiny slot table, segments large enough for the live index to grow) and is killed with SIGKILL at
random moments; after a writable reopen every key index answers like a rebuild (lookups equal a
brute-force scan) and, once closed, is byte-identical to one."""

from __future__ import annotations

import os
import random
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

from mqstore.kafka import LogConfig, PartitionLog
from mqstore.storage.kafka.keyindex import rebuild_keyindex, verify_keyindex
from mqstore.storage.kafka.layout import segment_files

CONFIG = dict(segment_bytes=150_000, flush_interval_messages=50, key_index=True, key_header="trace",
              key_index_slots=5)

CHILD = textwrap.dedent("""
    import sys
    from mqstore.kafka import LogConfig, PartitionLog, SimpleRecord
    from mqstore.formats.kafka.batch import Header
    cfg = LogConfig(**{config!r})
    log = PartitionLog.open(sys.argv[1], cfg)
    print("start", log.log_end_offset, flush=True)
    while True:
        o = log.log_end_offset
        n = 1 + o % 4
        recs = [SimpleRecord(value=b"v" * (1 + (o + i) % 30), key=None if (o + i) % 11 == 0 else b"k%d" % ((o + i) % 13),
                             headers=[Header("trace", b"t%d" % ((o + i) % 5))], timestamp=1_000_000 + (o + i) % 97)
                for i in range(n)]
        log.append_records(recs, compression=(o // 4) % 2)
        if o // 150 != log.log_end_offset // 150:
            print("at", log.log_end_offset, flush=True)
""")

KEYS = [b"k%d" % i for i in range(14)]


def _brute(log: PartitionLog, key: bytes, header: str | None = None, lo: int = 0, hi: int = 2**62) -> list[int]:
    out = []
    for r in log.iter_records():
        if not lo <= r.timestamp <= hi:
            continue
        if header is None:
            ok = r.key == key
        else:
            ok = any(h.key == header and h.value == key for h in r.headers)
        if ok:
            out.append(r.offset)
    return out


def test_kill_9_during_appends_with_key_index(tmp_path: Path) -> None:
    d = tmp_path / "crash-0"
    script = tmp_path / "child.py"
    script.write_text(CHILD.format(config=CONFIG))
    rnd = random.Random(20261128)
    env = dict(os.environ, PYTHONPATH=str(Path(__file__).resolve().parents[2] / "src"))
    for _kill in range(6):
        p = subprocess.Popen([sys.executable, str(script), str(d)], stdout=subprocess.PIPE, text=True, env=env)
        assert p.stdout is not None
        assert p.stdout.readline().split()[0] == "start"
        wanted = rnd.randrange(1, 12)
        for seen, _line in enumerate(p.stdout, start=1):
            if seen >= wanted:
                break
        time.sleep(rnd.uniform(0, 0.05))  # somewhere inside an append
        os.kill(p.pid, signal.SIGKILL)
        p.wait()
        assert p.returncode == -signal.SIGKILL
        log = PartitionLog.open(d, LogConfig(**CONFIG))
        try:
            assert not log.had_clean_shutdown
            assert not [f for f in d.iterdir() if f.name.endswith(".tmp")]  # no interrupted rewrite left
            for k in rnd.sample(KEYS, 4):
                assert log.offsets_for_key(k) == _brute(log, k)
                assert log.offsets_for_key(k, 1_000_020, 1_000_060) == _brute(log, k, None, 1_000_020, 1_000_060)
            t = b"t%d" % rnd.randrange(6)
            assert log.offsets_for_key(t, header="trace") == _brute(log, t, "trace")
            assert log.offsets_for_keys(KEYS) == [_brute(log, k) for k in KEYS]
            assert log.find_keys(KEYS[:1])[1].scanned_segments == []
        finally:
            log.close()
        for f in segment_files(d, (".log",)):
            kp = f.with_suffix(".keyindex")
            assert verify_keyindex(kp, f).problem is None
            have = kp.read_bytes()
            rebuild_keyindex(f, header_name="trace", slots=5)
            assert kp.read_bytes() == have
    log = PartitionLog.open(d, read_only=True)
    assert log.log_end_offset > 3000 and len(log.segments) > 1  # the live index grew and rolled
    log.close()
