"""PartitionLog: loading and recovery (spec §4.7, §6.4), roll, retention, truncation, lookups."""

from __future__ import annotations

import os
from pathlib import Path

import numpy as np
import pytest
from kafka_support import batch

from mqstore.errors import OffsetOutOfRangeError, ReadOnlyStoreError
from mqstore.formats.kafka import SimpleRecord, walk_batches
from mqstore.kafka import LogConfig, PartitionLog, verify_path
from mqstore.storage.kafka.log import CLEAN_SHUTDOWN_FILE, RECOVERY_POINT_FILE


def fill(log: PartitionLog, n: int, size: int = 100, ts0: int = 1_000_000) -> None:
    for i in range(n):
        log.append_records([SimpleRecord(value=bytes(size), timestamp=ts0 + i)], now=ts0)


def test_log_recovers_to_correct_offset(tmp_path: Path) -> None:
    cfg = LogConfig(segment_bytes=700, index_interval_bytes=300, max_index_size=4096)
    d = tmp_path / "t-0"
    log = PartitionLog.open(d, cfg)
    fill(log, 100)
    assert log.log_end_offset == 100
    active = log.active_segment
    oi_last, oi_n = active.offset_index.last_offset, active.offset_index.entries
    ti_n = active.time_index.entries
    ti_last = active.time_index.last_entry
    log.close()
    # clean reopen: nothing recovered
    log = PartitionLog.open(d, cfg)
    assert log.recovered_segments == [] and log.log_end_offset == 100
    log.close()
    # unclean reopen with recovery point 10
    (d / CLEAN_SHUTDOWN_FILE).unlink()
    (d / RECOVERY_POINT_FILE).write_text("0\n1\nt 0 10\n")
    log = PartitionLog.open(d, cfg)
    assert log.recovered_segments and log.recovered_segments[0] <= 10
    assert log.log_end_offset == 100
    a = log.active_segment
    assert (a.offset_index.last_offset, a.offset_index.entries) == (oi_last, oi_n)
    expected_extra = 0 if ti_last.offset == 99 else 1
    assert a.time_index.entries == ti_n + expected_extra
    assert a.time_index.last_entry == (a.max_timestamp_so_far, 99)
    log.close()


@pytest.mark.parametrize("damage", ["delete", "spaces"])
def test_index_rebuild_after_unclean_reopen(tmp_path: Path, damage: str) -> None:
    cfg = LogConfig(segment_bytes=200, index_interval_bytes=1)
    d = tmp_path / "t-0"
    log = PartitionLog.open(d, cfg)
    fill(log, 200, size=10)
    log.close()
    for f in d.iterdir():
        if f.suffix in (".index", ".timeindex"):
            if damage == "delete":
                f.unlink()
            else:
                f.write_bytes(b"  ")
    (d / CLEAN_SHUTDOWN_FILE).unlink()
    (d / RECOVERY_POINT_FILE).write_text("0\n1\nt 0 0\n")
    log = PartitionLog.open(d, cfg)
    assert log.log_end_offset == 200
    # index_interval_bytes=1: recovery indexes every batch after the segment's first one
    seg0, seg1 = log.segments[0], log.segments[1]
    assert seg0.offset_index.entries == seg1.base_offset - seg0.base_offset - 1 > 0
    for i in range(200):
        r = log.read(i, 1, min_one_message=True)
        assert next(walk_batches(r.records)).last_offset == i
        assert log.offset_for_timestamp(1_000_000 + i).offset == i
    log.close()
    assert verify_path(d).ok


def test_bogus_index_files_removed_and_deleted_files_cleaned(tmp_path: Path) -> None:
    d = tmp_path / "t-0"
    log = PartitionLog.open(d)
    fill(log, 3)
    log.close()
    (d / "00000000000000000005.index").write_bytes(b"\0" * 8)
    (d / "00000000000000000005.timeindex").write_bytes(b"\0" * 12)
    (d / "00000000000000000007.log.deleted").write_bytes(b"x")
    log = PartitionLog.open(d)
    assert not (d / "00000000000000000005.index").exists()
    assert not (d / "00000000000000000005.timeindex").exists()
    assert not (d / "00000000000000000007.log.deleted").exists()
    assert (d / "00000000000000000000.index").stat().st_size > 0  # active index resized to max
    log.close()


def test_corrupt_log_tail_and_index_garbage_cut_by_recovery(tmp_path: Path) -> None:
    d = tmp_path / "t-0"
    log = PartitionLog.open(d)
    fill(log, 50)
    log.close()
    (d / CLEAN_SHUTDOWN_FILE).unlink()
    with open(d / "00000000000000000000.log", "ab") as f:
        f.write(os.urandom(300))
    with open(d / "00000000000000000000.index", "ab") as f:
        f.write(os.urandom(37))
    log = PartitionLog.open(d)
    assert log.log_end_offset == 50
    assert [r.offset for r in log.iter_records()] == list(range(50))
    log.close()
    assert verify_path(d).ok


def test_clean_shutdown_skips_recovery(tmp_path: Path) -> None:
    d = tmp_path / "t-0"
    log = PartitionLog.open(d)
    fill(log, 10)
    log.close()
    (d / RECOVERY_POINT_FILE).write_text("0\n1\nt 0 0\n")
    log = PartitionLog.open(d)
    assert log.had_clean_shutdown and log.recovered_segments == []
    assert not (d / CLEAN_SHUTDOWN_FILE).exists()  # removed while open: a crash now is unclean
    log.close()
    assert (d / CLEAN_SHUTDOWN_FILE).exists()


def test_recover_with_empty_active_segment(tmp_path: Path) -> None:
    d = tmp_path / "t-0"
    log = PartitionLog.open(d)
    fill(log, 5)
    log.roll()
    log.flush()
    assert not log.active_segment.offset_index_path.exists()
    log.close_handlers()  # simulate a crash: drop the handles (and the writer lock) without closing
    log = PartitionLog.open(d)
    assert log.active_segment.offset_index_path.exists()
    assert log.active_segment.time_index.entries == 0
    assert log.log_end_offset == 5
    log.close()


def test_recovery_drops_segments_after_a_truncated_one(tmp_path: Path) -> None:
    cfg = LogConfig(segment_bytes=400)
    d = tmp_path / "t-0"
    log = PartitionLog.open(d, cfg)
    fill(log, 20)
    bases = [s.base_offset for s in log.segments]
    assert len(bases) > 3
    log.close()
    victim = d / f"{bases[1]:020d}.log"
    raw = bytearray(victim.read_bytes())
    raw[-1] ^= 0xFF  # inside the CRC range of the last batch
    victim.write_bytes(bytes(raw))
    (d / CLEAN_SHUTDOWN_FILE).unlink()
    (d / RECOVERY_POINT_FILE).write_text("0\n1\nt 0 0\n")
    log = PartitionLog.open(d, cfg)
    assert [s.base_offset for s in log.segments] == bases[:2]
    assert log.log_end_offset < bases[2]
    log.close()
    assert verify_path(d).ok


def test_roll_by_size_time_index_full_and_offset_overflow(tmp_path: Path) -> None:
    d = tmp_path / "t-0"
    log = PartitionLog.open(d, LogConfig(segment_ms=1000, index_interval_bytes=0, max_index_size=48))
    log.append(batch(0, ts=10_000), now=0)
    log.append(batch(1, ts=10_500), now=0)
    assert len(log.segments) == 1
    log.append(batch(2, ts=11_001), now=0)  # time waited 1001 > 1000
    assert [s.base_offset for s in log.segments] == [0, 2]
    for o in range(3, 12):
        log.append(batch(o, ts=11_002 + o), now=0)
    assert len(log.segments) >= 3  # 6-slot offset index / 4-slot time index fill up
    before = len(log.segments)
    log.append(batch(2**31 + 100, ts=11_100), assign_offsets=False, now=0)  # not relative-able
    assert log.segments[-1].base_offset == 2**31 + 100 and len(log.segments) == before + 1
    log.close()
    assert verify_path(d).ok


def test_roll_replaces_empty_active_segment_for_oversized_set(tmp_path: Path) -> None:
    log = PartitionLog.open(tmp_path / "t-0", LogConfig(segment_bytes=100))
    info = log.append(batch(0, count=5, value=b"x" * 50))
    assert info.segment_base_offset == 0 and [s.base_offset for s in log.segments] == [0]
    log.close()


def test_read_across_segments_and_out_of_range(tmp_path: Path) -> None:
    log = PartitionLog.open(tmp_path / "t-0", LogConfig(segment_bytes=300))
    fill(log, 30)
    assert len(log.segments) > 2
    for o in range(30):
        r = log.read(o, 1, min_one_message=True)
        assert next(walk_batches(r.records)).last_offset == o
    assert log.read(30, 100).records == b""
    with pytest.raises(OffsetOutOfRangeError):
        log.read(31, 100)
    with pytest.raises(OffsetOutOfRangeError):
        log.read(-1, 100)
    log.close()


def test_offset_for_timestamp_semantics(tmp_path: Path) -> None:
    log = PartitionLog.open(tmp_path / "t-0", LogConfig(segment_bytes=400))
    # timestamps are not monotonic: 0:100 1:300 2:200 3:400 ...
    tss = [100, 300, 200, 400, 350, 500, 450, 600]
    for t in tss:
        log.append_records([SimpleRecord(value=b"x" * 40, timestamp=t)])
    for target in range(50, 650, 25):
        expected = next(((i, t) for i, t in enumerate(tss) if t >= target), None)
        got = log.offset_for_timestamp(target)
        assert (None if got is None else (got.offset, got.timestamp)) == expected
    assert log.offset_for_timestamp(-2).offset == 0
    assert log.offset_for_timestamp(-1).offset == 8
    assert log.offset_for_timestamp(-3)[:2] == (600, 7)
    log.close()


def test_vectorised_lookups_match_scalar(tmp_path: Path) -> None:
    log = PartitionLog.open(tmp_path / "t-0", LogConfig(segment_bytes=5000, index_interval_bytes=100))
    fill(log, 300)
    targets = np.arange(0, 300)
    res = log.lookup_offsets_many(targets)
    for i, t in enumerate(targets):
        seg = log.floor_segment(int(t))
        assert res["segment"][i] == seg.base_offset
        assert (res["index_offset"][i], res["position"][i]) == tuple(seg.offset_index.lookup(int(t)))
    ts = np.arange(999_990, 1_000_310)
    tres = log.lookup_timestamps_many(ts)
    for i, t in enumerate(ts):
        seg = next((s for s in log.segments if s.max_timestamp_so_far >= t), None)
        if seg is None:
            assert tres["segment"][i] == -1
        else:
            assert tres["segment"][i] == seg.base_offset
            assert (tres["index_timestamp"][i], tres["index_offset"][i]) == tuple(seg.time_index.lookup(int(t)))
    log.close()


def test_truncate_to_across_segments(tmp_path: Path) -> None:
    d = tmp_path / "t-0"
    log = PartitionLog.open(d, LogConfig(segment_bytes=400))
    fill(log, 30)
    assert log.truncate_to(12)
    assert log.log_end_offset == 12
    assert all(s.base_offset <= 12 for s in log.segments)
    assert [r.offset for r in log.iter_records()] == list(range(12))
    assert not log.truncate_to(50)
    fill(log, 3)
    assert log.log_end_offset == 15
    log.close()
    assert verify_path(d).ok
    log = PartitionLog.open(d, LogConfig(segment_bytes=400))
    log.truncate_to(0)
    assert log.log_end_offset == 0 and log.size_in_bytes == 0
    log.close()


def test_retention_by_size_and_time(tmp_path: Path) -> None:
    d = tmp_path / "t-0"
    cfg = LogConfig(segment_bytes=400, retention_bytes=1000, retention_ms=-1)
    log = PartitionLog.open(d, cfg)
    fill(log, 40)
    total = log.size_in_bytes
    n = log.delete_old_segments()
    assert n > 0 and log.size_in_bytes <= 1000 + 400 and log.size_in_bytes < total
    assert log.log_start_offset == log.segments[0].base_offset > 0
    with pytest.raises(OffsetOutOfRangeError):
        log.read(0, 100)
    log.close()
    cfg2 = LogConfig(segment_bytes=400, retention_ms=1000)
    log = PartitionLog.open(d, cfg2)
    end = log.log_end_offset
    deleted = log.delete_old_segments(now=1_000_000 + 10_000_000)
    assert deleted > 0 and log.log_end_offset == end
    assert log.active_segment.size == 0 and log.log_start_offset == end
    log.close()


def test_flush_policy_advances_recovery_point(tmp_path: Path) -> None:
    d = tmp_path / "t-0"
    log = PartitionLog.open(d, LogConfig(flush_interval_messages=3))
    fill(log, 2)
    assert log.recovery_point == 0
    fill(log, 1)
    assert log.recovery_point == 3
    assert (d / RECOVERY_POINT_FILE).read_text() == "0\n1\nt 0 3\n"
    log.close()


def test_read_only_open_changes_nothing(tmp_path: Path) -> None:
    d = tmp_path / "t-0"
    log = PartitionLog.open(d)
    fill(log, 5)
    log.close()
    (d / CLEAN_SHUTDOWN_FILE).unlink()
    before = {f.name: f.read_bytes() for f in d.iterdir()}
    with PartitionLog.open(d, read_only=True) as ro:
        assert ro.log_end_offset == 5
        with pytest.raises(ReadOnlyStoreError):
            ro.append(batch(5))
    assert {f.name: f.read_bytes() for f in d.iterdir()} == before


def test_append_rejects_bad_batches(tmp_path: Path) -> None:
    from mqstore.errors import CorruptDataError, InvalidArgumentError

    log = PartitionLog.open(tmp_path / "t-0")
    good = bytearray(batch(0))
    bad = bytearray(good)
    bad[-1] ^= 1
    with pytest.raises(CorruptDataError):
        log.append(bytes(bad))
    with pytest.raises(CorruptDataError):
        log.append(bytes(good[:-3]))
    log.append(bytes(good))
    with pytest.raises(InvalidArgumentError):
        log.append(batch(0), assign_offsets=False)  # offset 0 again
    assert log.log_end_offset == 1
    log.close()
