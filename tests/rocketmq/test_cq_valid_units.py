"""``consumequeue.valid_units`` (recovery's valid prefix of a ConsumeQueue file, tested on the raw
bytes) against the rule on the decoded big-endian fields."""

from __future__ import annotations

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from mqstore.formats.rocketmq.consumequeue import CQ_DTYPE, INT_MAX
from mqstore.storage.rocketmq import consumequeue as cqmod
from mqstore.storage.rocketmq.consumequeue import valid_units


def reference(buf: bytes) -> tuple[int, int]:
    units = np.frombuffer(buf, dtype=CQ_DTYPE, count=len(buf) // 20)
    valid = (units["offset"] >= 0) & (units["size"] > 0)
    n = len(units) if valid.all() else int(np.argmin(valid))
    blank = (units["offset"] == 0) & (units["size"] == INT_MAX) & (units["tags_code"] == 0)
    real = np.flatnonzero(~blank[:n])
    return n, int(real[-1]) if len(real) else -1


_OFFSETS = st.sampled_from([0, 1, 7, 2**31, 2**63 - 1, -1, -(2**63), 128, 255, 2**56])
_SIZES = st.sampled_from([0, 1, 128, 255, 256, INT_MAX, -1, -(2**31), 2**24, 0x80])
_TAGS = st.sampled_from([0, 1, -1, 2**40])
_UNIT = st.tuples(_OFFSETS, _SIZES, _TAGS)
_GOOD = st.tuples(st.integers(0, 2**40), st.integers(1, 2**20), _TAGS)
_BLANK = st.just((0, INT_MAX, 0))


def _encode(units: list[tuple[int, int, int]], tail: int) -> bytes:
    arr = np.zeros(len(units), CQ_DTYPE)
    for i, (o, s, t) in enumerate(units):
        arr[i] = (o, s, t)
    return arr.tobytes() + bytes(20 * tail) + b"\x01" * (tail % 3)  # (a partial unit at the end is ignored)


@settings(max_examples=300, deadline=None)
@given(st.lists(st.one_of(_GOOD, _BLANK, _UNIT), max_size=40), st.integers(0, 5), st.sampled_from([1, 2, 3, 1 << 16]))
def test_valid_units_matches_the_decoded_rule(units, tail, step) -> None:
    buf = _encode(units, tail)
    old = cqmod._VALID_STEP
    cqmod._VALID_STEP = step
    try:
        assert valid_units(buf) == reference(buf)
    finally:
        cqmod._VALID_STEP = old


def test_valid_units_long_blank_run_and_empty() -> None:
    good = (5, 10, 3)
    buf = _encode([good] * 3 + [(0, INT_MAX, 0)] * 5000 + [(0, 0, 0)], 2)
    assert valid_units(buf) == reference(buf) == (5003, 2)
    assert valid_units(_encode([(0, INT_MAX, 0)] * 3000, 0)) == (3000, -1)
    assert valid_units(b"") == (0, -1)
