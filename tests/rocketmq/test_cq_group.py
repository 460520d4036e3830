"""The ConsumeQueue units of a batch grouped by queue (``rocketmq.group_units``: native, numba and
numpy twin on the same inputs) and the storage side that appends them
(:meth:`ConsumeQueue.put_encoded` against :meth:`ConsumeQueue.put_units`, byte for byte)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from kernel_twins import twins
from mqstore.formats.rocketmq.consumequeue import CQ_UNIT_SIZE, encode_unit
from mqstore.kernels.registry import kernel_impls
from mqstore.kernels.rocketmq.cq_group import group_units, group_units_py
from mqstore.storage.rocketmq.consumequeue import ConsumeQueue


def _columns(n: int, seed: int, topics: int = 3, queues: tuple[int, int] = (0, 4)) -> tuple[np.ndarray, ...]:
    rng = np.random.default_rng(seed)
    return (rng.integers(0, topics, n).astype(np.int32), rng.integers(*queues, n).astype(np.int32),
            rng.integers(-(2**62), 2**62, n), rng.integers(-(2**31), 2**31, n).astype(np.int32),
            rng.integers(-(2**63), 2**63 - 1, n, dtype=np.int64))


@pytest.mark.parametrize("impl", twins("rocketmq.group_units"))
def test_group_units_layout(impl: Any) -> None:
    tid = np.array([1, 0, 1, 0, 2, 0], np.int32)
    qid = np.array([3, 1, 3, 0, -1, 1], np.int32)
    off = np.array([100, 200, 300, 400, 500, 600], np.int64)
    size = np.array([10, 20, 30, 40, 50, 60], np.int32)
    tags = np.array([-1, 2, 3, 4, 5, -6], np.int64)
    g = impl(tid, qid, off, size, tags)
    # key order: topic id, then queue id as unsigned (-1 last); rows in their order inside a group
    assert g.topic_id.tolist() == [0, 0, 1, 2] and g.queue_id.tolist() == [0, 1, 3, -1]
    assert g.start.tolist() == [0, 1, 3, 5, 6]
    assert g.rows.tolist() == [3, 1, 5, 0, 2, 4]
    want = b"".join(encode_unit(int(off[r]), int(size[r]), int(tags[r])) for r in g.rows.tolist())
    assert g.units.tobytes() == want
    assert g.unit_bytes(1).tobytes() == want[CQ_UNIT_SIZE : 3 * CQ_UNIT_SIZE]


@pytest.mark.parametrize("impl", twins("rocketmq.group_units"))
def test_group_units_empty(impl: Any) -> None:
    e32, e64 = np.empty(0, np.int32), np.empty(0, np.int64)
    g = impl(e32, e32, e64, e32, e64)
    assert len(g) == 0 and g.start.tolist() == [0] and len(g.rows) == 0 and len(g.units) == 0


@pytest.mark.parametrize("impl", twins("rocketmq.group_units"))
@pytest.mark.parametrize("n,seed,topics,queues", [(1, 1, 1, (0, 1)), (997, 2, 3, (0, 4)), (70_000, 3, 8, (0, 4)),
                                                  (5000, 4, 300, (-3, 200))])
def test_group_units_same_as_reference(impl: Any, n: int, seed: int, topics: int, queues: tuple[int, int]) -> None:
    cols = _columns(n, seed, topics, queues)
    got, want = impl(*cols), group_units_py(*cols)
    for a, b in zip(got, want, strict=True):
        assert np.array_equal(a, b)


@settings(max_examples=60, deadline=None)
@given(st.lists(st.tuples(st.integers(0, 5), st.integers(-(2**31), 2**31 - 1), st.integers(-(2**63), 2**63 - 1),
                          st.integers(-(2**31), 2**31 - 1), st.integers(-(2**63), 2**63 - 1)), max_size=200),
       st.sampled_from([0, 1, 2, 4]))
def test_group_units_twins_agree(rows: list[tuple[int, int, int, int, int]], qmask: int) -> None:
    cols = [np.array(c, dt) for c, dt in zip(zip(*rows, strict=True) if rows else ([],) * 5,
                                            (np.int32, np.int32, np.int64, np.int32, np.int64), strict=True)]
    if qmask:
        cols[1] = cols[1] & qmask  # few queues: long groups
    results = [fn(*cols) for _, fn in kernel_impls("rocketmq.group_units").items()]
    for other in results[1:]:
        for a, b in zip(results[0], other, strict=True):
            assert np.array_equal(a, b)


def _files(d: Path) -> dict[str, bytes]:
    return {p.name: p.read_bytes() for p in sorted(d.iterdir()) if p.is_file()}


@pytest.mark.parametrize("case", ["fresh", "continued", "replay", "gap", "behind", "roll", "bulk"])
def test_put_encoded_same_bytes_as_put_units(tmp_path: Path, case: str) -> None:
    """Every path of put_encoded (the bulk append, by pwrite for long runs, and each fallback)
    writes the files put_units does; the mapping reads what was written through the file."""
    file_size = (1000 if case == "bulk" else 8) * CQ_UNIT_SIZE
    n = 2500 if case == "bulk" else 21
    offsets = np.arange(n, dtype=np.int64) * 100 + 1000
    sizes = np.full(n, 100, np.int32)
    tags = np.arange(n, dtype=np.int64) - 3
    qoffs = np.arange(n, dtype=np.int64)
    first = {"fresh": None, "continued": 5, "replay": 5, "gap": 5, "behind": 5, "roll": 7, "bulk": 3}[case]
    if case == "gap":
        qoffs[9:] += 3
    if case == "behind":
        qoffs[12] = 2
    queues = []
    for name in ("units", "encoded"):
        cq = ConsumeQueue(tmp_path / name, "T", 0, file_size)
        if first is not None:
            cq.put_units(offsets[:first], sizes[:first], tags[:first], qoffs[:first])
        queues.append(cq)
    start = first - 2 if case == "replay" else (first or 0)
    rows = np.arange(start, n, dtype=np.int64)
    g = group_units(np.zeros(n, np.int32), np.zeros(n, np.int32), offsets, sizes, tags)
    queues[0].put_units(offsets[rows], sizes[rows], tags[rows], qoffs[rows])
    queues[1].put_encoded(g.units[CQ_UNIT_SIZE * start :], rows, offsets, sizes, tags, qoffs[rows])
    for cq in queues:
        cq.flush()
    assert queues[0].max_physic_offset == queues[1].max_physic_offset
    assert queues[0].queue.max_offset == queues[1].queue.max_offset
    for q in (0, n // 2, n - 1):
        assert queues[1].get_unit(q) == queues[0].get_unit(q)
    for cq in queues:
        cq.close()
    assert _files(tmp_path / "units") == _files(tmp_path / "encoded")


def test_facade_imports_no_numba() -> None:
    code = ("import sys; import mqstore.kernels.rocketmq.cq_group as m; "
            "from mqstore.kernels.backend import built; "
            "print(built('_nat_rmq_scan') is not None, any(k == 'numba' or k.startswith('numba.') for k in sys.modules))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout.split()
    if out[0] == "True":
        assert out[1] == "False"
