"""The IndexFile roll rules (storage/rocketmq/index_roll.py): the plan the IndexService puts its
keys along, which the Spark rebuild uses too."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from mqstore.storage.rocketmq.index import IndexService
from mqstore.storage.rocketmq.index_roll import (
    FileKeys,
    checkpoint_index_time,
    keys_per_file,
    name_rolls,
    new_file_firsts,
    roll_plan,
)


def test_roll_plan_fills_the_current_file_first() -> None:
    assert roll_plan(10, 4, room=3) == [FileKeys(0, 3, False), FileKeys(3, 7, True), FileKeys(7, 10, True)]
    assert roll_plan(2, 4, room=3) == [FileKeys(0, 2, False)]
    assert roll_plan(8, 4) == [FileKeys(0, 4, True), FileKeys(4, 8, True)]
    assert roll_plan(0, 4) == []
    assert keys_per_file(8) == 7
    with pytest.raises(ValueError):
        roll_plan(3, 0)


@given(st.integers(0, 200), st.integers(1, 17), st.integers(0, 16))
def test_roll_plan_covers_every_key_once(keys: int, per_file: int, room: int) -> None:
    room = min(room, per_file - 1)
    plan = roll_plan(keys, per_file, room)
    covered = [k for fk in plan for k in range(fk.lo, fk.hi)]
    assert covered == list(range(keys))
    assert all(fk.hi - fk.lo <= per_file for fk in plan)
    assert all(fk.new_file for fk in plan[1:])
    assert (plan[0].new_file if plan else True) == (room == 0 or keys == 0 or not plan)


def test_checkpoint_index_time_is_the_last_rolled_away_file() -> None:
    ends = [10, 20, 30]
    assert checkpoint_index_time(3, ends.__getitem__) == 20
    assert checkpoint_index_time(1, ends.__getitem__) == 0
    assert checkpoint_index_time(0, ends.__getitem__) == 0


@settings(max_examples=25, deadline=None)
@given(st.integers(1, 60), st.integers(0, 40), st.integers(0, 2**31 - 1))
def test_index_service_follows_the_plan(tmp_path_factory: pytest.TempPathFactory, first: int, second: int,
                                        seed: int) -> None:
    """Two puts (the second resuming a partly filled file): the files the service creates are
    the plan's new files, named by name_rolls, carried over from the previous file's end."""
    tmp = Path(tmp_path_factory.mktemp("roll"))
    rng = np.random.default_rng(seed)
    n = first + second
    ts = 1_700_000_000_000 + np.cumsum(rng.integers(-1, 3, n))  # going back and repeating
    phy = np.arange(n, dtype=np.int64) * 40 + 8
    hashes = rng.integers(-(2**31), 2**31, n).astype(np.int32)
    svc = IndexService(tmp / "index", 3, 6)
    svc.put_hashes(hashes[:first], phy[:first], ts[:first])
    before = [f.name for f in svc.files]
    last = svc.files[-1]
    room = 0 if last.is_write_full() else last.buffer.index_num - last.header.index_count
    plan = roll_plan(second, keys_per_file(6), room)
    svc.put_hashes(hashes[first:], phy[first:], ts[first:])
    firsts = new_file_firsts(plan)
    first_ts = {g: int(ts[first + g]) for g in firsts}
    last_of = {g: (int(phy[first + g - 1]), int(ts[first + g - 1])) for g in firsts}
    rolls = name_rolls(plan, first_ts, last_of, None, before[-1])
    assert [f.name for f in svc.files] == before + [r.name for r in rolls]
    for r, f in zip(rolls, svc.files[len(before):], strict=True):
        assert f.header.index_count - 1 == r.keys
    # the carried-over values are those of the key before the file's first key
    for r in rolls:
        g = first + r.first_key
        assert (r.carry_phy, r.carry_ts) == ((int(phy[g - 1]), int(ts[g - 1])) if r.first_key else (0, 0))
    svc.close()
