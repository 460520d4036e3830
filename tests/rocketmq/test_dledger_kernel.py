"""The DLedger entry walk kernel (kernels/rocketmq/dledger.py) and its pure-Python twin: behaviour
over both, and the two against each other on random and corrupted data files."""

from __future__ import annotations

import struct

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from kernel_twins import twins
from mqstore.formats.rocketmq import dledger as fmt
from mqstore.kernels.rocketmq import dledger as kd
from mqstore.kernels.rocketmq.dledger import walk_dledger_entries, walk_dledger_entries_py

SIZE = 4096


def data_file(bodies: list[int], *, base: int = 0, first_index: int = 0, terms: list[int] | None = None,
              close: bool = True) -> tuple[bytearray, list[int]]:
    buf = bytearray(SIZE)
    p, out = 0, []
    for k, n in enumerate(bodies):
        e = fmt.encode_entry(first_index + k, (terms or [1] * len(bodies))[k], base + p, b"\x07" * n)
        if p + len(e) + 8 > SIZE:
            break
        buf[p : p + len(e)] = e
        out.append(base + p)
        p += len(e)
    if close:
        buf[p:] = fmt.encode_blank(SIZE - p)
    return buf, out


@pytest.mark.parametrize("walk", twins("rocketmq.walk_dledger_entries"))
def test_walk_closed_file(walk):
    buf, pos = data_file([10, 0, 300, 5], base=8192, first_index=40, terms=[1, 1, 2, 2])
    p, size, index, term, crc, status, stop = walk(buf, 8192, SIZE)
    assert p.tolist() == pos and index.tolist() == [40, 41, 42, 43] and term.tolist() == [1, 1, 2, 2]
    assert size.tolist() == [58, 48, 348, 53] and crc.tolist() == [0, 0, 0, 0]
    assert status == kd.W_BLANK and stop == sum(size.tolist())
    # from the middle, with the previous index and term
    p2, *_rest, status2, _stop2 = walk(buf, 8192, SIZE, pos[2] - 8192, 41, 1)
    assert p2.tolist() == pos[2:] and status2 == kd.W_BLANK


@pytest.mark.parametrize("walk", twins("rocketmq.walk_dledger_entries"))
def test_walk_stops(walk):
    buf, pos = data_file([20, 20, 20], close=False)
    *_c, status, stop = walk(buf, 0, SIZE)
    assert status == kd.W_END and stop == pos[-1] + 68
    # cap: the walk pauses and resumes
    p, *_c, status, stop = walk(buf, 0, SIZE, 0, -1, -1, 2)
    assert p.tolist() == pos[:2] and status == kd.W_LIMIT and stop == pos[2]
    for at, data, want in ((pos[1], struct.pack(">i", 9), kd.W_HEADER),          # magic
                           (pos[1] + 24, struct.pack(">q", 5), kd.W_HEADER),     # pos field
                           (pos[1] + 44, struct.pack(">i", 21), kd.W_HEADER),    # body length
                           (pos[1] + 8, struct.pack(">q", 7), kd.W_GAP),          # index
                           (pos[1] + 16, struct.pack(">q", 0), kd.W_TERM)):       # term
        bad = bytearray(buf)
        bad[at : at + len(data)] = data
        p, *_c, status, stop = walk(bad, 0, SIZE)
        assert (p.tolist(), status, stop) == (pos[:1], want, pos[1]), (at, want)
    # an entry running past the end, a header cut by the end
    p, *_c, status, stop = walk(buf, 0, pos[2] + 50)
    assert (status, stop) == (kd.W_PAST, pos[2])
    p, *_c, status, stop = walk(buf, 0, pos[2] + 20)
    assert (status, stop) == (kd.W_CUT, pos[2])


@settings(suppress_health_check=[HealthCheck.too_slow], deadline=None, max_examples=150)
@given(st.lists(st.integers(0, 200), max_size=30), st.booleans(),
       st.lists(st.tuples(st.integers(0, SIZE - 1), st.integers(0, 255)), max_size=4),
       st.integers(1, 50))
def test_twins_agree(bodies, close, flips, cap):
    buf, _ = data_file(bodies, base=SIZE * 3, close=close)
    for at, v in flips:
        buf[at] = v
    a = walk_dledger_entries(buf, SIZE * 3, SIZE, 0, -1, -1, cap)
    b = walk_dledger_entries_py(buf, SIZE * 3, SIZE, 0, -1, -1, cap)
    assert [x.tolist() if isinstance(x, np.ndarray) else x for x in a] == \
        [x.tolist() if isinstance(x, np.ndarray) else x for x in b]


def wrapped_file(n: int) -> tuple[bytearray, np.ndarray, np.ndarray]:
    """A data file of ``n`` entries whose bodies look like messages (TOTALSIZE, PHYSICALOFFSET)."""
    buf = bytearray(SIZE)
    pos, size = [], []
    p = 0
    for k in range(n):
        body = bytearray(40 + 3 * k)
        struct.pack_into(">i", body, 0, len(body))
        struct.pack_into(">q", body, 28, SIZE + p + 48)
        body[36:] = bytes([k]) * (len(body) - 36)
        e = fmt.encode_entry(k, 1, SIZE + p, body)
        buf[p : p + len(e)] = e
        pos.append(SIZE + p)
        size.append(len(e))
        p += len(e)
    return buf, np.array(pos, np.int64), np.array(size, np.int64)


@pytest.mark.parametrize("gather", twins("rocketmq.gather_entry_bodies"))
def test_gather(gather):
    buf, pos, size = wrapped_file(6)
    out, k, code, _v = gather(buf, SIZE, pos, size)
    assert (k, code) == (6, kd.G_OK)
    assert bytes(out) == b"".join(bytes(buf[p - SIZE + 48 : p - SIZE + s]) for p, s in zip(pos, size, strict=True))
    for at, data, want, value in ((pos[3] - SIZE + 48, struct.pack(">i", 1), kd.G_TOTAL, 1),
                                  (pos[3] - SIZE + 48 + 28, struct.pack(">q", 9), kd.G_PHYSICAL, 9)):
        bad = bytearray(buf)
        bad[at : at + len(data)] = data
        out, k, code, v = gather(bad, SIZE, pos, size)
        assert (k, code, v) == (3, want, value)
        assert len(out) == int((size[:3] - 48).sum())
    small = size.copy()
    small[2] = 48 + 20
    assert gather(buf, SIZE, pos, small)[1:] == (2, kd.G_SMALL, 20)
    assert gather(buf, SIZE, pos[:0], size[:0])[1:] == (0, kd.G_OK, 0)
