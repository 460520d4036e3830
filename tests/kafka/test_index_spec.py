"""Spec §6.1 / §6.2 (Kafka's OffsetIndexTest and TimeIndexTest) re-expressed, plus §3 details."""

from __future__ import annotations

import random
import struct
from pathlib import Path

import pytest

from mqstore.errors import (
    CorruptIndexError,
    IndexFullError,
    IndexOrderError,
    InvalidArgumentError,
    OffsetOverflowError,
)
from mqstore.kafka import OffsetIndex, OffsetPosition, TimeIndex, TimestampOffset


@pytest.fixture
def oidx(tmp_path: Path) -> OffsetIndex:
    idx = OffsetIndex(tmp_path / "00000000000000000045.index", 45, 30 * 8)
    yield idx
    idx.close()


@pytest.fixture
def tidx(tmp_path: Path) -> TimeIndex:
    idx = TimeIndex(tmp_path / "00000000000000000045.timeindex", 45, 30 * 12)
    yield idx
    idx.close()


def test_random_lookup(oidx: OffsetIndex) -> None:
    assert oidx.lookup(92) == OffsetPosition(45, 0)
    rnd = random.Random(7)
    offsets = sorted(rnd.sample(range(47, 10_000), 30))
    positions = sorted(rnd.sample(range(0, 100_000), 30))
    for o, p in zip(offsets, positions, strict=True):
        oidx.append(o, p)
    for o, p in zip(offsets, positions, strict=True):
        assert oidx.lookup(o) == OffsetPosition(o, p)
    for _ in range(30):
        t = rnd.randrange(45, offsets[-1])
        floor = [(o, p) for o, p in zip(offsets, positions, strict=True) if o <= t]
        assert oidx.lookup(t) == (OffsetPosition(*floor[-1]) if floor else OffsetPosition(45, 0))


def test_lookup_extreme_cases(oidx: OffsetIndex) -> None:
    assert oidx.lookup(45) == (45, 0)
    for i in range(30):
        oidx.append(46 + i, i)
    assert oidx.lookup(45) == (45, 0)
    assert oidx.lookup(75) == (75, 29)


def test_entry_and_overflow(oidx: OffsetIndex) -> None:
    with pytest.raises(InvalidArgumentError):
        oidx.entry(0)
    for i in range(30):
        oidx.append(45 + i, i)
    assert [oidx.entry(i) for i in range(30)] == [OffsetPosition(45 + i, i) for i in range(30)]


def test_append_too_many_and_out_of_order(oidx: OffsetIndex) -> None:
    for i in range(30):
        oidx.append(46 + i, i)
    with pytest.raises(IndexFullError):
        oidx.append(100, 100)


def test_append_out_of_order(oidx: OffsetIndex) -> None:
    oidx.append(51, 0)
    with pytest.raises(IndexOrderError):
        oidx.append(50, 1)
    with pytest.raises(IndexOrderError):
        oidx.append(51, 1)


def test_relative_offset_overflow(oidx: OffsetIndex) -> None:
    with pytest.raises(OffsetOverflowError):
        oidx.append(45 + 2**31, 0)
    with pytest.raises(OffsetOverflowError):
        oidx.append(44, 0)


def test_fetch_upper_bound_offset(oidx: OffsetIndex) -> None:
    assert oidx.fetch_upper_bound_offset(OffsetPosition(45, 0), 5) is None
    for o, p in ((45, 0), (46, 10), (47, 23), (48, 37)):
        oidx.append(o, p)
    f = oidx.fetch_upper_bound_offset
    assert f(OffsetPosition(45, 0), 5) == (46, 10)
    assert f(OffsetPosition(45, 0), 10) == (46, 10)
    assert f(OffsetPosition(45, 0), 23) == (47, 23)
    assert f(OffsetPosition(45, 0), 22) == (47, 23)
    assert f(OffsetPosition(46, 10), 24) == (48, 37)
    assert f(OffsetPosition(48, 37), 1) is None
    assert f(OffsetPosition(45, 0), 200) is None
    assert f(OffsetPosition(46, 10), 200) is None


def test_reopen(tmp_path: Path) -> None:
    p = tmp_path / "00000000000000000045.index"
    idx = OffsetIndex(p, 45, 30 * 8)
    idx.append(51, 0)
    idx.append(52, 1)
    idx.close()
    assert p.stat().st_size == 16
    idx = OffsetIndex(p, 45)
    assert idx.lookup(51) == (51, 0) and idx.lookup(52) == (52, 1)
    assert idx.last_offset == 52 and idx.entries == 2
    with pytest.raises(IndexFullError):
        idx.append(53, 1)
    idx.close()


def test_truncate(tmp_path: Path) -> None:
    idx = OffsetIndex(tmp_path / "00000000000000000000.index", 0, 10 * 8)
    for i in range(1, 10):
        idx.append(i, i)
    idx.truncate_to(12)
    assert idx.lookup(10) == (9, 9) and idx.last_offset == 9
    idx.append(10, 10)
    idx.truncate_to(10)
    assert idx.lookup(10) == (9, 9) and idx.last_offset == 9
    idx.append(10, 10)
    idx.truncate_to(9)
    assert idx.lookup(10) == (8, 8) and idx.last_offset == 8
    idx.append(9, 9)
    idx.truncate_to(5)
    assert idx.lookup(10) == (4, 4) and idx.last_offset == 4
    idx.append(5, 5)
    idx.truncate()
    assert idx.entries == 0
    idx.close()


def test_sanity_last_offset_equal_to_base(tmp_path: Path) -> None:
    idx = OffsetIndex(tmp_path / "00000000000000000020.index", 20, 80)
    idx.append(20, 0)
    idx.sanity_check()
    idx.close()


def test_offset_index_sanity_detects_bad_length_and_offsets(tmp_path: Path) -> None:
    p = tmp_path / "00000000000000000020.index"
    p.write_bytes(struct.pack(">ii", 5, 0) + struct.pack(">ii", -3, 10) + b"\x00\x00\x00")
    idx = OffsetIndex(p, 20, writable=False)
    assert idx.entries == 2 and idx.last_offset == 17
    with pytest.raises(CorruptIndexError):
        idx.sanity_check()
    idx.close()
    p.write_bytes(struct.pack(">ii", 5, 0) + b"\x00\x00")
    idx = OffsetIndex(p, 20, writable=False)
    with pytest.raises(CorruptIndexError, match="multiple of 8"):
        idx.sanity_check()
    idx.close()


def test_new_file_preallocation_and_invalid_size(tmp_path: Path) -> None:
    idx = OffsetIndex(tmp_path / "00000000000000000000.index", 0, 10485760)
    assert idx.length == 10485760 and idx.max_entries == 1310720 and idx.entries == 0
    idx.close()
    t = TimeIndex(tmp_path / "00000000000000000000.timeindex", 0, 10485760)
    assert t.length == 10485756 and t.max_entries == 873813
    t.close()
    with pytest.raises(InvalidArgumentError, match="Invalid max index size"):
        OffsetIndex(tmp_path / "00000000000000000001.index", 1, 7)
    assert not (tmp_path / "00000000000000000001.index").exists()


def test_resize_and_reset(tmp_path: Path) -> None:
    idx = OffsetIndex(tmp_path / "00000000000000000000.index", 0, 80)
    idx.append(3, 10)
    assert idx.resize(80) is False
    assert idx.resize(85) is False  # rounded down to 80
    assert idx.resize(40) is True and idx.max_entries == 5 and idx.entries == 1
    assert idx.trim_to_valid_size() and idx.length == 8
    idx.reset()
    assert idx.entries == 0 and idx.length == 80
    idx.close()


# ----------------------------------------------------------------------------- TimeIndex (§6.2)
def _append_entries(t: TimeIndex, k: int) -> None:
    for i in range(1, k + 1):
        t.maybe_append(10 * i, 45 + 10 * i)


def test_time_lookup(tidx: TimeIndex) -> None:
    assert tidx.lookup(100) == TimestampOffset(-1, 45)
    _append_entries(tidx, 29)
    assert tidx.lookup(9) == (-1, 45)
    assert tidx.lookup(25) == (20, 65)
    assert tidx.lookup(30) == (30, 75)


def test_time_entry(tidx: TimeIndex) -> None:
    with pytest.raises(InvalidArgumentError):
        tidx.entry(0)
    _append_entries(tidx, 29)
    assert [tidx.entry(i) for i in range(4)] == [(10, 55), (20, 65), (30, 75), (40, 85)]


def test_time_truncate(tidx: TimeIndex) -> None:
    _append_entries(tidx, 29)
    tidx.truncate()
    assert tidx.entries == 0
    _append_entries(tidx, 29)
    tidx.truncate_to(55)
    assert tidx.entries == 0


def test_time_append(tidx: TimeIndex) -> None:
    _append_entries(tidx, 29)
    assert tidx.is_full()
    with pytest.raises(IndexFullError):
        tidx.maybe_append(10000, 1000)
    with pytest.raises(IndexOrderError):
        tidx.maybe_append(10000, 280, skip_full_check=True)
    assert tidx.maybe_append(10000, 1000, skip_full_check=True)
    assert tidx.entries == 30


def test_time_maybe_append_ignores_equal_and_rejects_smaller(tidx: TimeIndex) -> None:
    assert tidx.maybe_append(-1, 45) is False  # −1 into an empty index: nothing
    assert tidx.maybe_append(100, 50)
    assert tidx.maybe_append(100, 60) is False
    with pytest.raises(IndexOrderError):
        tidx.maybe_append(99, 70)
    assert tidx.entries == 1


def test_time_sanity_check(tmp_path: Path) -> None:
    p = tmp_path / "00000000000000000045.timeindex"
    t = TimeIndex(p, 45, 30 * 12)
    t.sanity_check()
    _append_entries(t, 5)
    t.sanity_check()
    t.close()
    TimeIndex(p, 45).sanity_check()
    raw = p.read_bytes()
    # (a) last offset below the base
    p.write_bytes(raw[:-12] + struct.pack(">qi", 50, -1))
    with pytest.raises(CorruptIndexError):
        TimeIndex(p, 45, writable=False).sanity_check()
    # (b) last timestamp below the first
    p.write_bytes(raw[:-12] + struct.pack(">qi", 9, 95))
    with pytest.raises(CorruptIndexError):
        TimeIndex(p, 45, writable=False).sanity_check()
    # (c) length not a multiple of 12
    p.write_bytes(raw[:-1])
    with pytest.raises(CorruptIndexError):
        TimeIndex(p, 45, writable=False).sanity_check()


def test_time_is_full_and_last_entry(tidx: TimeIndex) -> None:
    assert not tidx.is_full()
    assert tidx.last_entry == (-1, 45)
    tidx.maybe_append(1, 46)
    assert tidx.last_entry == (1, 46)
    assert tidx.entry(0) == (1, 46)
    _append_entries(tidx, 28)
    assert tidx.is_full()


def test_time_index_one_slot_is_full_when_empty(tmp_path: Path) -> None:
    t = TimeIndex(tmp_path / "00000000000000000000.timeindex", 0, 23)
    assert t.max_entries == 1 and t.is_full()
    t.close()


def test_time_resize(tidx: TimeIndex) -> None:
    assert tidx.resize(30 * 12) is False
    assert tidx.resize(15 * 12) is True
    assert tidx.resize(60 * 12) is True


def test_untrimmed_timeindex_reopened_like_kafka(tmp_path: Path) -> None:
    """§3.2: a zero-padded file is trusted by length: last entry (0, base), sanity check fails;
    with stop_at_padding the valid prefix is used."""
    p = tmp_path / "00000000000000000000.timeindex"
    t = TimeIndex(p, 0, 120)
    t.maybe_append(1000, 5)
    t.maybe_append(2000, 9)
    t.flush()
    t._unmap()  # simulate a crash: no trim
    import os

    os.close(t._fd)
    t._fd = -1
    raw = TimeIndex(p, 0, writable=False)
    assert raw.entries == 10 and raw.last_entry == (0, 0)
    with pytest.raises(CorruptIndexError):
        raw.sanity_check()
    raw.close()
    good = TimeIndex(p, 0, writable=False, stop_at_padding=True)
    assert good.entries == 2 and good.last_entry == (2000, 9) and good.padded
    good.sanity_check()
    good.close()


def test_sub_quirk_for_target_equal_to_slot0(tmp_path: Path) -> None:
    """§3.7: positions [50, 90, 200], SUB(50) → slot 1; single entry [50], SUB(50) → none."""
    idx = OffsetIndex(tmp_path / "00000000000000000000.index", 0, 80)
    for o, p in ((1, 50), (2, 90), (3, 200)):
        idx.append(o, p)
    assert idx.smallest_upper_bound_slot(50, search_value=True) == 1
    assert idx.fetch_upper_bound_offset(0, 50) == (2, 90)
    assert idx.largest_lower_bound_slot(1) == 0
    idx.close()
    one = OffsetIndex(tmp_path / "00000000000000000001.index", 1, 80)
    one.append(2, 50)
    assert one.smallest_upper_bound_slot(50, search_value=True) == -1
    one.close()


def test_warm_section_split_large_index(tmp_path: Path) -> None:
    """Many more entries than the warm section (1024 slots): cold and warm branches agree with a
    plain floor search on sorted data."""
    idx = OffsetIndex(tmp_path / "00000000000000000000.index", 0, 5000 * 8)
    keys = list(range(3, 3 + 5000 * 7, 7))
    for i, k in enumerate(keys):
        idx.append(k, i * 100)
    import bisect

    for t in [0, 2, 3, 4, 100, 3 + 7 * 3974, 3 + 7 * 3975, 3 + 7 * 3976, keys[-1], keys[-1] + 5]:
        i = bisect.bisect_right(keys, t) - 1
        assert idx.lookup(t) == ((keys[i], i * 100) if i >= 0 else (0, 0))
    offs, poss = idx.lookup_many([0, 2, 3, 4, keys[-1] + 5])
    assert offs.tolist() == [0, 0, 3, 3, keys[-1]] and poss.tolist() == [0, 0, 0, 0, 499900]
    idx.close()
