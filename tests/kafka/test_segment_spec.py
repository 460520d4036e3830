"""Spec §6.3 (Kafka's LogSegmentTest) and §4 rules, re-expressed with magic-2 batches."""

from __future__ import annotations

import os
import random
from pathlib import Path

import pytest
from kafka_support import append_batch, batch

from mqstore.errors import InvalidArgumentError, OffsetOverflowError
from mqstore.formats.kafka import walk_batches
from mqstore.kafka import LogConfig, LogSegment
from mqstore.storage.kafka.segment import RollParams

CFG = LogConfig(max_index_size=1000, index_interval_bytes=10)


def make(tmp_path: Path, base: int = 40, cfg: LogConfig = CFG) -> LogSegment:
    return LogSegment.create(tmp_path, base, cfg)


@pytest.mark.parametrize("base,largest", [(0, -(2**31)), (0, 2**31), (1, 0), (100, 10), (2**31, 0),
                                          (-(2**31), 0), (2**31, 2**32)])
def test_append_offset_overflow(tmp_path: Path, base: int, largest: int) -> None:
    if base < 0:
        seg = LogSegment(tmp_path / "neg.log", base, CFG, read_only=False, create=True)
    else:
        seg = make(tmp_path, base)
    with pytest.raises(OffsetOverflowError):
        seg.append(largest, -1, largest, batch(0))
    assert seg.size == 0
    seg.close()


def test_read_on_empty_segment(tmp_path: Path) -> None:
    with make(tmp_path) as seg:
        assert seg.read(40, 300) is None


def test_read_before_first_offset(tmp_path: Path) -> None:
    with make(tmp_path) as seg:
        data = batch(50, 4)
        seg.append(53, 530, 53, data)
        r = seg.read(41, 300)
        assert r is not None and r.records == data


def test_read_after_last(tmp_path: Path) -> None:
    with make(tmp_path) as seg:
        append_batch(seg, 50, 2)
        assert seg.read(52, 200) is None


def test_read_from_gap(tmp_path: Path) -> None:
    with make(tmp_path) as seg:
        append_batch(seg, 50, 2)
        second = append_batch(seg, 60, 2)
        r = seg.read(55, 200)
        assert r is not None and r.records == second


def test_read_max_size_zero_and_min_one_message(tmp_path: Path) -> None:
    with make(tmp_path) as seg:
        data = append_batch(seg, 50, 3)
        r = seg.read(50, 0)
        assert r is not None and r.records == b"" and r.offset_metadata == (50, 40, 0)
        r = seg.read(50, 1, min_one_message=True)
        assert r is not None and r.records == data and not r.first_entry_incomplete
        r = seg.read(50, 10)
        assert r is not None and r.records == data[:10] and r.first_entry_incomplete
        with pytest.raises(InvalidArgumentError, match="invalid max size"):
            seg.read(50, -1)


def test_truncate_rounds(tmp_path: Path) -> None:
    with make(tmp_path) as seg:
        o = 40
        for _ in range(30):
            b1 = append_batch(seg, o)
            b2 = append_batch(seg, o + 1)
            r = seg.read(o, 10_000)
            assert r is not None and r.records == b1 + b2
            seg.truncate_to(o + 1)
            r = seg.read(o, 10_000)
            assert r is not None and r.records == b1
            o += 2


def test_reload_largest_timestamp_and_next_offset_after_truncation(tmp_path: Path) -> None:
    size = len(batch(40))
    cfg = LogConfig(max_index_size=1000, index_interval_bytes=2 * size - 1)
    with make(tmp_path, 40, cfg) as seg:
        for o in range(40, 70):
            append_batch(seg, o)
        assert seg.time_index.entries == 14
        assert seg.read_next_offset() == 70
        seg.truncate_to(41)
        assert seg.time_index.entries == 0
        assert seg.max_timestamp_so_far == 400
        assert seg.read_next_offset() == 41


def test_truncate_full(tmp_path: Path) -> None:
    with make(tmp_path) as seg:
        append_batch(seg, 40)
        append_batch(seg, 41)
        seg.truncate_to(0)
        assert seg.size == 0
        assert not seg.offset_index.is_full() and not seg.time_index.is_full()
        assert seg.read(0, 1024) is None
        append_batch(seg, 42)
        assert seg.read_next_offset() == 43


def test_find_offset_by_timestamp(tmp_path: Path) -> None:
    size = len(batch(40))
    cfg = LogConfig(max_index_size=1000, index_interval_bytes=2 * size - 1)
    with make(tmp_path, 40, cfg) as seg:
        for o in range(40, 50):
            append_batch(seg, o)
        assert seg.largest_timestamp == 490
        f = seg.find_offset_by_timestamp
        assert f(420, 0).offset == 42
        assert f(421, 0).offset == 43
        assert f(430, 0).offset == 43
        assert f(431, 0).offset == 44
        assert f(491, 0) is None
        assert f(401, 0).offset == 41
        assert f(399, 0).offset == 40
        assert f(399, 45).offset == 45  # starting offset respected


def test_next_offset_calculation(tmp_path: Path) -> None:
    with make(tmp_path) as seg:
        assert seg.read_next_offset() == 40
        append_batch(seg, 50, 3)
        assert seg.read_next_offset() == 53


def test_index_files_created_lazily(tmp_path: Path) -> None:
    seg = make(tmp_path)
    assert not seg.offset_index_path.exists() and not seg.time_index_path.exists()
    append_batch(seg, 40)
    append_batch(seg, 41)  # second append creates index entries
    assert seg.offset_index_path.exists() and seg.time_index_path.exists()
    seg.close()


def test_recovery_fixes_corrupt_index(tmp_path: Path) -> None:
    cfg = LogConfig(max_index_size=1500, index_interval_bytes=10)
    seg = make(tmp_path, 0, cfg)
    for o in range(100):
        append_batch(seg, o)
    seg.close()
    p = seg.offset_index_path
    raw = bytearray(p.read_bytes())
    rnd = random.Random(1)
    for i in range(5, len(raw)):
        raw[i] = rnd.randrange(256)
    p.write_bytes(bytes(raw))
    seg = LogSegment.open(seg.log_path, cfg, read_only=False)
    seg.recover()
    for o in range(100):
        r = seg.read(o, 1, min_one_message=True)
        first = next(walk_batches(r.records))
        assert first.last_offset == o
    seg.close()


def test_recovery_fixes_corrupt_time_index(tmp_path: Path) -> None:
    cfg = LogConfig(max_index_size=1500, index_interval_bytes=10)
    seg = make(tmp_path, 0, cfg)
    for o in range(100):
        append_batch(seg, o)
    seg.close()
    p = seg.time_index_path
    raw = bytearray(p.read_bytes())
    rnd = random.Random(2)
    for i in range(5, len(raw)):
        raw[i] = rnd.randrange(256)
    p.write_bytes(bytes(raw))
    seg = LogSegment.open(seg.log_path, cfg, read_only=False)
    seg.recover()
    for i in range(100):
        assert seg.find_offset_by_timestamp(i * 10, 0).offset == i
        if i < 99:
            assert seg.find_offset_by_timestamp(i * 10 + 1, 0).offset == i + 1
    seg.close()


@pytest.mark.parametrize("k", [0, 3, 11, 19])
def test_recovery_with_corrupt_message(tmp_path: Path, k: int) -> None:
    seg = make(tmp_path, 0)
    positions = []
    for o in range(20):
        positions.append(seg.size)
        append_batch(seg, o)
    seg.close()
    rnd = random.Random(k)
    start = positions[k] + rnd.randrange(15)
    with open(seg.log_path, "r+b") as f:
        f.seek(start)
        f.write(bytes(rnd.randrange(256) for _ in range(seg.size - start)))
    seg = LogSegment.open(seg.log_path, CFG, read_only=False)
    seg.recover()
    lasts = [b.last_offset for b in seg.batches()]
    assert lasts == list(range(k))
    seg.close()


def test_truncate_even_if_offset_points_to_a_gap(tmp_path: Path) -> None:
    with make(tmp_path) as seg:
        append_batch(seg, 40)
        append_batch(seg, 43)
        seg.truncate_to(41)
        assert [b.last_offset for b in seg.batches()] == [40]


def test_get_first_batch_timestamp(tmp_path: Path) -> None:
    with make(tmp_path) as seg:
        assert seg.get_first_batch_timestamp() == 2**63 - 1
        append_batch(seg, 40, ts=1000)
        assert seg.get_first_batch_timestamp() == 1000


def test_truncate_empty_segment_and_should_roll(tmp_path: Path) -> None:
    cfg = LogConfig(max_index_size=1000, index_interval_bytes=10, segment_ms=100)
    seg = make(tmp_path, 56, cfg)
    seg.offset_index  # noqa: B018 - force creation
    seg.time_index  # noqa: B018
    seg.close()
    assert seg.offset_index_path.stat().st_size == 0 and seg.time_index_path.stat().st_size == 0
    seg = LogSegment.open(seg.log_path, cfg, read_only=False)
    seg.truncate_to(57)
    assert not seg.offset_index.is_full() and not seg.time_index.is_full()
    later = seg.created_ms + 1000
    assert not seg.should_roll(RollParams(100, 2**30, -1, 100, 10, later))
    assert seg.should_roll(RollParams(100, 2**30, -1, 56 + 2**31 + 200, 10, later))
    seg.close()


def test_roll_conditions(tmp_path: Path) -> None:
    cfg = LogConfig(max_index_size=1000, index_interval_bytes=10, segment_ms=1000, segment_bytes=500)
    with make(tmp_path, 0, cfg) as seg:
        append_batch(seg, 0, ts=5000)
        s = seg.size
        assert not seg.should_roll(RollParams(1000, 500, 5500, 1, 500 - s, 0))
        assert seg.should_roll(RollParams(1000, 500, 5500, 1, 500 - s + 1, 0))  # size
        assert seg.should_roll(RollParams(1000, 500, 6001, 1, 10, 0))  # time from the first batch timestamp
        assert not seg.should_roll(RollParams(1000, 500, 6000, 1, 10, 0))


def test_on_become_inactive_writes_final_time_entry_and_trims(tmp_path: Path) -> None:
    cfg = LogConfig(max_index_size=1000, index_interval_bytes=10)
    seg = make(tmp_path, 0, cfg)
    for o in range(5):
        append_batch(seg, o)
    before = seg.time_index.entries
    append_batch(seg, 5, ts=10_000)  # raises the max, after the last entry: no entry yet
    seg.on_become_inactive_segment()
    assert seg.time_index.entries >= before + 1
    assert seg.time_index.last_entry == (10_000, 5)
    assert seg.offset_index.length == seg.offset_index.entries * 8
    assert seg.time_index.length == seg.time_index.entries * 12
    seg.close()


def test_segment_read_only_refuses_writes(tmp_path: Path) -> None:
    seg = make(tmp_path, 0)
    append_batch(seg, 0)
    seg.close()
    ro = LogSegment.open(seg.log_path)
    from mqstore.errors import ReadOnlyStoreError

    with pytest.raises(ReadOnlyStoreError):
        ro.append(1, 10, 1, batch(1))
    with pytest.raises(ReadOnlyStoreError):
        ro.recover()
    ro.close()
    assert os.path.getsize(seg.log_path) == len(batch(0))
