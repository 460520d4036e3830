"""The sparse time index (issue 17 item 2): codec round trips, exact time lookups against a
brute-force scan (equal-millisecond runs, ConsumeQueue file boundaries, both boundaries), the
CommitLog records a lookup reads, the file rule (written, cut, deleted with the ConsumeQueue),
byte-identical rebuilds, and a writer killed with SIGKILL."""

from __future__ import annotations

import math
import os
import random
import signal
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from mqstore import MessageStore, StoreConfig
from mqstore.errors import CorruptIndexError, InvalidArgumentError, TruncatedRecordError
from mqstore.formats.rocketmq.timeindex import (
    ENTRY_SIZE,
    HEADER_SIZE,
    TimeIndexHeader,
    check_interval,
    decode_entry,
    encode_entries,
    entries_view,
)
from mqstore.storage.rocketmq.rebuild import compare_trees, rebuild_indexes
from mqstore.storage.rocketmq.timeindex import TIMEINDEX_DIR, all_sidecars, first_at_least
from mqstore.storage.rocketmq.verify import verify_store, verify_store_reference

LONG = st.integers(min_value=-(2**63), max_value=2**63 - 1)
CQ_UNITS = 7  # small ConsumeQueue files: many file boundaries


# =============================================================================== codec
@given(st.integers(1, 1 << 20), st.integers(1, 2**31 - 1))
def test_header_round_trip(interval: int, units: int) -> None:
    h = TimeIndexHeader(interval, units)
    data = h.encode()
    assert len(data) == HEADER_SIZE
    assert TimeIndexHeader.decode(data) == h


@given(st.lists(st.tuples(LONG, LONG), max_size=50))
def test_entries_round_trip(pairs: list[tuple[int, int]]) -> None:
    ts = np.array([p[0] for p in pairs], np.int64)
    qo = np.array([p[1] for p in pairs], np.int64)
    buf = TimeIndexHeader(2, 10).encode() + encode_entries(ts, qo)
    view = entries_view(buf)
    assert view["store_timestamp"].tolist() == ts.tolist()
    assert view["queue_offset"].tolist() == qo.tolist()
    for i, p in enumerate(pairs):
        assert decode_entry(buf, HEADER_SIZE + i * ENTRY_SIZE) == p
    # a torn last entry is left out
    assert len(entries_view(buf + b"\x01" * (ENTRY_SIZE - 1))) == len(pairs)


def test_header_and_entry_errors() -> None:
    good = TimeIndexHeader(2, 10).encode()
    with pytest.raises(TruncatedRecordError):
        TimeIndexHeader.decode(good[:10])
    with pytest.raises(CorruptIndexError):
        TimeIndexHeader.decode(b"XXXX" + good[4:])
    with pytest.raises(CorruptIndexError):
        TimeIndexHeader.decode(good[:4] + b"\x00\x09" + good[6:])  # version 9
    with pytest.raises(CorruptIndexError):
        TimeIndexHeader.decode(good[:8] + b"\x00\x00\x00\x00" + good[12:])  # interval 0
    with pytest.raises(TruncatedRecordError):
        decode_entry(good, HEADER_SIZE)
    for bad in (0, -1, 1 << 21, 2.0, "2", True):
        with pytest.raises(InvalidArgumentError):
            check_interval(bad)
    with pytest.raises(InvalidArgumentError):
        StoreConfig(time_index_interval=0)


# =============================================================================== lookups
class CountingTimes:
    """The CommitLog's ``pickup_store_timestamp`` with a count of records read and pages touched."""

    def __init__(self, cl) -> None:
        self.cl = cl
        self.real = cl.pickup_store_timestamp
        self.records = 0
        self.pages: set[int] = set()

    def __call__(self, offset: int, size: int) -> int:
        self.records += 1
        self.pages.add(offset // 4096)
        return self.real(offset, size)

    def reset(self) -> None:
        self.records = 0
        self.pages = set()


def make_store(path: Path, stamps: list[int], interval: int, *, enabled: bool = True, queues: int = 1) -> MessageStore:
    now = [0]
    cfg = StoreConfig(commit_log_file_size=1 << 20, consume_queue_file_size=CQ_UNITS * 20, background_services=False,
                      enable_time_index=enabled, time_index_interval=interval, clock=lambda: now[0],
                      message_index_enable=False)
    s = MessageStore.open(path, cfg)
    for i, t in enumerate(stamps):
        now[0] = t
        s.put("T", b"m%d" % i, queue_id=i % queues)
    return s


def brute(times: list[int], t: int, boundary: str) -> int:
    if boundary == "lower":
        return next((i for i, x in enumerate(times) if x >= t), len(times))
    return max((i for i, x in enumerate(times) if x <= t), default=0)


STAMPS = st.lists(st.integers(0, 6), min_size=0, max_size=60).map(
    lambda steps: list(np.cumsum([1000, *steps]).tolist()[1:]))  # non-decreasing, many equal-ms runs


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(stamps=STAMPS, interval=st.sampled_from([1, 2, 3, 5, 8]), queues=st.integers(1, 3), data=st.data())
def test_exact_lookup_equals_brute_force(tmp_path_factory, stamps: list[int], interval: int, queues: int,
                                         data) -> None:
    path = tmp_path_factory.mktemp("tix")
    s = make_store(path, stamps, interval, queues=queues)  # queues interleaved in the CommitLog
    stamps = stamps[::queues]  # queue 0's messages
    try:
        s.flush()
        counter = CountingTimes(s.engine.commit_log)
        s.engine.commit_log.pickup_store_timestamp = counter
        lo_t, hi_t = (stamps[0] - 3, stamps[-1] + 3) if stamps else (0, 10)
        queries = data.draw(st.lists(st.integers(lo_t, hi_t), min_size=1, max_size=12))
        queries += sorted(set(stamps))[:5]
        bound = max(1, math.ceil(math.log2(interval)))
        for t in queries:
            for b in ("lower", "upper"):
                counter.reset()
                assert s.offset_for_time("T", 0, t, b) == brute(stamps, t, b), (t, b)
                assert counter.records <= bound, (t, b, counter.records)
                broker = s.offset_for_time("T", 0, t, b, "broker")
                if stamps and (b == "lower" or t >= stamps[0]):
                    assert broker == brute(stamps, t, b), ("broker", t, b)
    finally:
        s.close()


def test_default_interval_reads_one_record_across_files(tmp_path: Path) -> None:
    stamps = sorted(random.Random(5).choices(range(5000, 5040), k=300))  # ~7 messages per ms
    s = make_store(tmp_path, stamps, 2)
    try:
        assert s.engine.config.time_index_interval == 2
        counter = CountingTimes(s.engine.commit_log)
        s.engine.commit_log.pickup_store_timestamp = counter
        worst = 0
        for t in range(4995, 5045):
            for b in ("lower", "upper"):
                counter.reset()
                assert s.offset_for_time("T", 0, t, b) == brute(stamps, t, b)
                worst = max(worst, counter.records, len(counter.pages))
        assert worst == 1
    finally:
        s.close()


def test_fallback_without_sidecars_is_exact(tmp_path: Path) -> None:
    stamps = sorted(random.Random(7).choices(range(100, 130), k=150))
    s = make_store(tmp_path, stamps, 2, enabled=False)
    try:
        assert not (tmp_path / TIMEINDEX_DIR).exists()
        counter = CountingTimes(s.engine.commit_log)
        s.engine.commit_log.pickup_store_timestamp = counter
        for t in range(95, 135):
            for b in ("lower", "upper"):
                counter.reset()
                assert s.offset_for_time("T", 0, t, b) == brute(stamps, t, b)
                assert counter.records <= math.ceil(math.log2(len(stamps) + 1))
    finally:
        s.close()


def test_first_at_least_bracket_edges() -> None:
    times = [1, 1, 2, 2, 2, 5, 9]

    def at(q: int) -> int:
        return times[q]

    for th in range(0, 11):
        want = next((i for i, x in enumerate(times) if x >= th), len(times))
        assert first_at_least(th, 0, len(times), at) == want
        # known points outside [lo, hi) clamp
        assert first_at_least(th, 2, 5, at) == min(max(want, 2), 5)


def test_bad_arguments(tmp_path: Path) -> None:
    s = make_store(tmp_path, [1, 2, 3], 2)
    try:
        for kwargs in ({"boundary": "middle"}, {"semantics": "fast"}):
            with pytest.raises(InvalidArgumentError):
                s.offset_for_time("T", 0, 2, **kwargs)
        with pytest.raises(InvalidArgumentError):
            s.offset_for_time("T", 0, "2")  # type: ignore[arg-type]
        with pytest.raises(InvalidArgumentError):
            s.offset_for_time("T", -1, 2)
        assert s.offset_for_time("T", 5, 2) == 0  # no such queue
    finally:
        s.close()


# =============================================================================== file rule
def sidecar_names(root: Path) -> list[str]:
    return [p.relative_to(root).as_posix() for _t, _q, p in all_sidecars(root)]


def test_layout_broker_never_sees_sidecars(tmp_path: Path) -> None:
    s = make_store(tmp_path, list(range(100, 130)), 2, queues=2)
    s.close()
    # what a broker's MappedFileQueue.load lists: only 20-digit files of the ConsumeQueue size
    for qdir in (tmp_path / "consumequeue" / "T").iterdir():
        for f in qdir.iterdir():
            assert f.name.isdigit() and len(f.name) == 20 and f.stat().st_size == CQ_UNITS * 20, f
    names = sidecar_names(tmp_path)
    cq_files = sorted(p.relative_to(tmp_path / "consumequeue").as_posix()
                      for p in (tmp_path / "consumequeue").rglob("*") if p.is_file())
    assert sorted(n.removeprefix(TIMEINDEX_DIR + "/").removesuffix(".timeindex") for n in names) == cq_files


def test_off_by_default_is_broker_layout(tmp_path: Path) -> None:
    s = make_store(tmp_path, list(range(100, 120)), 2, enabled=False)
    s.close()
    assert not (tmp_path / TIMEINDEX_DIR).exists()


def test_rebuild_is_byte_identical_and_retention_deletes(tmp_path: Path) -> None:
    store = tmp_path / "s"
    stamps = sorted(random.Random(3).choices(range(1000, 1020), k=80))
    s = make_store(store, stamps, 3, queues=2)
    s.close()
    assert verify_store(store, s.engine.config).ok
    out = tmp_path / "out"
    rebuild_indexes(store, out, config=s.engine.config)
    assert compare_trees(store, out) == []
    assert sidecar_names(out)
    # in place, without the option: the store has sidecars, they are rebuilt, never stale
    rebuild_indexes(store, config=s.engine.config)
    assert compare_trees(store, out) == []
    rebuild_indexes(store, config=s.engine.config, time_index=False)
    assert not (store / TIMEINDEX_DIR).exists()


def test_recovery_cuts_and_completes_sidecars(tmp_path: Path) -> None:
    stamps = sorted(random.Random(9).choices(range(1000, 1010), k=40))
    s = make_store(tmp_path, stamps, 2)
    s.close()
    names = sidecar_names(tmp_path)
    # a sidecar without its ConsumeQueue file, a torn tail, a stale entry past the queue's end
    first = tmp_path / names[0]
    extra = first.with_name("00000000000000099960.timeindex")
    extra.write_bytes(first.read_bytes())
    last = tmp_path / names[-1]
    last.write_bytes(last.read_bytes() + encode_entries(np.array([1009]), np.array([10_000])) + b"\x00" * 5)
    (tmp_path / sidecar_names(tmp_path)[1]).unlink()  # a missing one is completed
    s = MessageStore.open(tmp_path, s.engine.config)
    s.close()
    assert not extra.exists()
    assert sidecar_names(tmp_path) == names
    rep = verify_store(tmp_path, s.engine.config)
    assert rep.ok, rep.problems


def test_verify_reports_a_wrong_entry_and_lookups_stay_exact(tmp_path: Path) -> None:
    stamps = sorted(random.Random(11).choices(range(1000, 1010), k=40))
    s = make_store(tmp_path, stamps, 2)
    s.close()
    path = tmp_path / sidecar_names(tmp_path)[0]
    data = bytearray(path.read_bytes())
    data[HEADER_SIZE : HEADER_SIZE + 8] = (999).to_bytes(8, "big")  # first entry: wrong time
    path.write_bytes(bytes(data))
    rep = verify_store(tmp_path, s.engine.config)
    assert any("has time 999" in p for p in rep.problems), rep.problems
    assert verify_store_reference(tmp_path, s.engine.config).problems == rep.problems  # the twins agree
    path.write_bytes(b"garbage!" * 3)
    rep = verify_store(tmp_path, s.engine.config)
    assert any("not a time index" in p for p in rep.problems), rep.problems
    with MessageStore.open(tmp_path, s.engine.config, read_only=True) as ro:
        for t in range(998, 1012):
            for b in ("lower", "upper"):
                assert ro.offset_for_time("T", 0, t, b) == brute(stamps, t, b)


# =============================================================================== crash
CHILD = Path(__file__).with_name("timeindex_child.py")


def _run_and_kill(store: Path, start: int, rng: random.Random) -> int:
    proc = subprocess.Popen([sys.executable, str(CHILD), str(store), str(start)], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)
    assert proc.stdout is not None
    target, acked = rng.randint(20, 400), 0
    while acked < target:
        line = proc.stdout.readline()
        if not line:
            break
        acked += 1
    proc.send_signal(signal.SIGKILL)
    rest, err = proc.communicate()
    acked += sum(1 for line in rest.splitlines() if line.startswith("ack "))
    assert acked, f"child produced no acknowledgement: {err[-2000:]}"
    return start + acked + 6


def test_kill9_writer_sidecars_consistent(tmp_path: Path) -> None:
    sys.path.insert(0, str(Path(__file__).parent))
    from timeindex_child import child_config

    rng = random.Random(int(os.environ.get("MQSTORE_CRASH_SEED", "17")))
    store = tmp_path / "store"
    start = 0
    for round_no in range(int(os.environ.get("MQSTORE_CRASH_KILLS", "4"))):
        start = _run_and_kill(store, start, rng)
        with MessageStore.open(store, child_config()) as s:  # recovery
            s.flush()
            for topic, qid in ((f"T{a}", b) for a in range(2) for b in range(2)):
                n = s.max_offset(topic, qid)
                times = [m.store_timestamp for m in s.get(topic, qid, 0, n + 1)]
                assert len(times) == n
                probes = sorted(set(times))
                probes = probes[:: max(1, len(probes) // 20)] + ([times[-1] + 1, times[0] - 1] if times else [])
                for t in probes:
                    for b in ("lower", "upper"):
                        assert s.offset_for_time(topic, qid, t, b) == brute(times, t, b), (round_no, topic, qid, t, b)
        rep = verify_store(store, child_config())
        assert rep.ok, (round_no, rep.problems[:5])
        out = tmp_path / f"rebuilt{round_no}"
        rebuild_indexes(store, out, config=child_config())
        assert compare_trees(store, out, (TIMEINDEX_DIR,)) == [], round_no


def test_retention_deletes_sidecars_with_their_consume_queue_files(tmp_path: Path) -> None:
    now = [0]
    cfg = StoreConfig(commit_log_file_size=4096, consume_queue_file_size=CQ_UNITS * 20, background_services=False,
                      enable_time_index=True, clock=lambda: now[0], message_index_enable=False,
                      file_reserved_time_hours=1)
    stamps = []
    with MessageStore.open(tmp_path, cfg) as s:
        for i in range(300):
            now[0] = 1000 + i // 3
            stamps.append(now[0])
            s.put("T", b"x" * 100, queue_id=0)
        s.flush()
        before = sidecar_names(tmp_path)
        for f in (tmp_path / "commitlog").iterdir():
            os.utime(f, (1, 1))  # every segment old: retention deletes all but the last
        assert s.engine.delete_expired(force=True, now_ms=10**12) > 0
        lo, hi = s.min_offset("T", 0), s.max_offset("T", 0)
        assert lo > 0
        after = sidecar_names(tmp_path)
        assert len(after) < len(before)
        cq_files = sorted(p.name for p in (tmp_path / "consumequeue" / "T" / "0").iterdir())
        assert [n.rsplit("/", 1)[-1].removesuffix(".timeindex") for n in after] == cq_files
        for t in range(stamps[0] - 1, stamps[-1] + 2, 7):
            for b in ("lower", "upper"):
                want = min(max(brute(stamps, t, b), lo), hi)
                if b == "upper" and brute(stamps, t, "upper") < lo:
                    want = lo
                assert s.offset_for_time("T", 0, t, b) == want, (t, b)
    rep = verify_store(tmp_path, cfg)
    assert rep.ok, rep.problems


def test_geometry_detects_the_interval(tmp_path: Path) -> None:
    from mqstore.storage.rocketmq.layout import resolve_config

    s = make_store(tmp_path, list(range(100, 140)), 5)
    s.close()
    cfg = resolve_config(tmp_path)
    assert cfg.enable_time_index and cfg.time_index_interval == 5
    with MessageStore.open(tmp_path) as s2:  # geometry detected: the writer keeps interval 5
        s2.put("T", b"late", queue_id=0)
        s2.flush()
    assert verify_store(tmp_path, resolve_config(tmp_path)).ok


def test_broker_semantics_walks_equal_millisecond_runs(tmp_path: Path) -> None:
    stamps = [1000] * 3 + [1001] * 200 + [1002] * 3  # one long run inside one ConsumeQueue file
    now = [0]
    cfg = StoreConfig(commit_log_file_size=1 << 20, background_services=False, enable_time_index=True,
                      clock=lambda: now[0], message_index_enable=False)
    with MessageStore.open(tmp_path, cfg) as s:
        for i, t in enumerate(stamps):
            now[0] = t
            s.put("T", b"m%d" % i, queue_id=0)
        counter = CountingTimes(s.engine.commit_log)
        s.engine.commit_log.pickup_store_timestamp = counter
        for b, want in (("lower", 3), ("upper", 202)):
            counter.reset()
            assert s.offset_for_time("T", 0, 1001, b, "broker") == want
            assert counter.records > 50  # the broker walks the run record by record
            counter.reset()
            assert s.offset_for_time("T", 0, 1001, b) == want
            assert counter.records <= 1


def test_reader_sees_a_writers_new_entries(tmp_path: Path) -> None:
    now = [0]
    cfg = StoreConfig(commit_log_file_size=1 << 20, consume_queue_file_size=CQ_UNITS * 20, background_services=False,
                      enable_time_index=True, clock=lambda: now[0], message_index_enable=False)
    stamps = []
    with MessageStore.open(tmp_path, cfg) as w:
        for i in range(10):
            now[0] = 100 + i
            stamps.append(now[0])
            w.put("T", b"a", queue_id=0)
        w.flush()
        with MessageStore.open(tmp_path, cfg, read_only=True) as r:
            assert r.offset_for_time("T", 0, 105) == 5
            for i in range(10, 40):
                now[0] = 100 + i
                stamps.append(now[0])
                w.put("T", b"a", queue_id=0)
            w.flush()
            tix = r.engine.writers.time_index_for_lookup("T", 0)
            # refreshed: units 0, 2, 4, 6 of every 7-unit file (5 full files), then 0, 2, 4
            assert tix is not None and tix.entries == 5 * 4 + 3
