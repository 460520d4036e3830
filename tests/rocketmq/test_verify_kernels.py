"""The ConsumeQueue kernels of ``rocketmq verify`` (``kernels/rocketmq/verify_check.py``: native C,
numba, numpy) on the same inputs, and the command's output on damaged stores: the same bytes and
exit code under ``MQSTORE_KERNELS=numba`` and the default, and ``verify_store`` equal to
``verify_store_reference``."""

from __future__ import annotations

import os
import struct
import subprocess
import sys
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from kernel_twins import twins
from mqstore import MessageStore, StoreConfig
from mqstore.kernels import backend
from mqstore.kernels.registry import kernel_impls
from mqstore.kernels.rocketmq.verify_check import (
    BEFORE_WINDOW,
    EXT_ADDRESS,
    INT_MAX,
    MAX_ADDR,
    NOT_A_RECORD,
    WRONG_RECORD,
)
from mqstore.storage.rocketmq.verify import verify_store, verify_store_reference

REPO = Path(__file__).resolve().parents[2]
I64_MIN, I64_MAX = -(2**63), 2**63 - 1
SETTINGS = settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])


def _units(rows: list[tuple[int, int, int]]) -> bytes:
    return b"".join(struct.pack(">qiq", o, s, t) for o, s, t in rows)


# records: starts, sizes, topic ids, queue ids, queue offsets, tags codes
STARTS = np.array([100, 200, 300, 400], np.int64)
SIZES = np.array([50, 60, 70, 80], np.int32)
TOPIC = np.array([0, 0, 1, 0], np.int32)
QID = np.array([2, 2, 2, 3], np.int32)
QOFF = np.array([10, 11, 5, 12], np.int64)
TAGS = np.array([7, 8, 9, 10], np.int64)


@pytest.mark.parametrize("check", twins("rocketmq.check_units"))
def test_check_units_codes(check: Any) -> None:
    rows = [
        (100, 50, 7),  # queue offset 10: the record's unit
        (0, INT_MAX, 0),  # the blank unit: not live
        (5, 50, 7),  # below cl_min (10): not live
        (150, 50, 7),  # no record starts there
        (200, 61, 8),  # the wrong size
        (200, 60, 99),  # queue offset 15 vs 11, and the tags code differs
        (300, 70, 9),  # a record of another topic
        (400, 80, MAX_ADDR),  # an ext address
        (50, 50, 7),  # before the window (lo 60)
        (900, 1, 1),  # at hi: the run stops here
        (100, 50, 7),
    ]
    k, codes = check(_units(rows), len(rows), 900, 60, 10, 10, STARTS, 4, SIZES, TOPIC, QID, QOFF, TAGS, 0, 2)
    assert k == 9
    assert codes.tolist() == [0, 0, 0, NOT_A_RECORD, NOT_A_RECORD, WRONG_RECORD, WRONG_RECORD, EXT_ADDRESS,
                              BEFORE_WINDOW]  # fmt: skip
    # a multi-dispatch unit of record 300 at this queue's offset 16 makes unit 6 right
    k, codes = check(_units(rows), len(rows), I64_MAX, I64_MIN, 10, 10, STARTS, 4, SIZES, TOPIC, QID, QOFF, TAGS, 0, 2,
                     np.array([300], np.int64), np.array([16], np.int64))  # fmt: skip
    assert k == len(rows) and codes[6] == 0 and codes[9] == NOT_A_RECORD and codes[10] == WRONG_RECORD


@pytest.mark.parametrize("check", twins("rocketmq.check_units"))
@SETTINGS
@given(seed=st.integers(0, 2**32 - 1), n=st.integers(0, 20), count=st.integers(0, 50))
def test_check_units_random(check: Any, seed: int, n: int, count: int) -> None:
    rng = np.random.default_rng(seed)
    starts = np.sort(rng.choice(np.arange(10, 1000, 10), n, replace=False)).astype(np.int64)
    sizes = rng.integers(1, 3, n).astype(np.int32)
    topic, qid = rng.integers(0, 2, n).astype(np.int32), rng.integers(0, 2, n).astype(np.int32)
    qoff, tags = rng.integers(0, 4, n).astype(np.int64), rng.integers(-3, 3, n).astype(np.int64)
    pool = np.append(starts, rng.integers(0, 1100, 5))
    offs = np.sort(rng.choice(pool, count)) if rng.random() < 0.7 else rng.choice(pool, count)
    rows = [(int(o), int(rng.integers(1, 3)), int(rng.choice([MAX_ADDR, MAX_ADDR + 5, -1, 0, 1, 2])))
            for o in offs]  # fmt: skip
    if count and rng.random() < 0.3:
        rows[int(rng.integers(0, count))] = (0, INT_MAX, 0)
    m = int(rng.integers(0, 4))
    m_off = np.sort(rng.choice(pool, m)).astype(np.int64)
    m_qoff = rng.integers(0, 4, m).astype(np.int64)
    hi = int(rng.choice([I64_MAX, int(rng.integers(0, 1100))]))
    lo = int(rng.choice([I64_MIN, int(rng.integers(0, 500))]))
    args = (_units(rows), count, hi, lo, 15, int(rng.integers(0, 3)), starts, n, sizes, topic, qid, qoff, tags,
            int(rng.integers(-1, 2)), int(rng.integers(0, 2)), m_off if m else None, m_qoff if m else None)  # fmt: skip
    want = kernel_impls("rocketmq.check_units").reference(*args)
    got = check(*args)
    assert got[0] == want[0] and got[1].tolist() == want[1].tolist()


@pytest.mark.parametrize("cut", twins("rocketmq.cut"))
@SETTINGS
@given(vals=st.lists(st.integers(-(2**63), 2**63 - 1), max_size=30), hi=st.integers(-(2**63), 2**63 - 1),
       stride=st.sampled_from([8, 12, 20]), data=st.data())  # fmt: skip
def test_cut(cut: Any, vals: list[int], hi: int, stride: int, data: st.DataObject) -> None:
    pos = data.draw(st.integers(0, stride - 8))
    raw = bytearray(len(vals) * stride)
    for j, v in enumerate(vals):
        struct.pack_into(">q", raw, j * stride + pos, v)
    want = next((j for j, v in enumerate(vals) if v >= hi), len(vals))
    assert cut(bytes(raw), len(vals), stride, pos, hi) == want


@pytest.mark.parametrize("check", twins("rocketmq.check_units"))
def test_check_units_rejects_short_arrays(check: Any) -> None:
    from mqstore.errors import InvalidArgumentError

    with pytest.raises(InvalidArgumentError):
        check(b"\0" * 19, 1, I64_MAX, I64_MIN, 0, 0, STARTS, 4, SIZES, TOPIC, QID, QOFF, TAGS, 0, 2)
    with pytest.raises(InvalidArgumentError):
        check(b"\0" * 20, 1, I64_MAX, I64_MIN, 0, 0, STARTS, 5, SIZES, TOPIC, QID, QOFF, TAGS, 0, 2)


# ----------------------------------------------------------------------------- the command
def _config() -> StoreConfig:
    return StoreConfig(commit_log_file_size=16384, consume_queue_file_size=320, hash_slot_num=16, index_num=60,
                       background_services=False)


def _damaged(tmp_path: Path) -> Path:
    root = tmp_path / "store"
    with MessageStore.open(root, _config()) as s:
        for i in range(120):
            s.put(("A", "B")[i % 2], b"body-%d" % i * (1 + i % 3), i % 2, keys=[f"k{i % 7}", f"u{i}"], tags="t")
    cq = sorted(f for f in (root / "consumequeue").rglob("0*") if f.is_file())
    with open(cq[0], "r+b") as fh:  # unit 1 one byte off, units 3 and 4 swapped, unit 6 far past the end
        fh.seek(20)
        fh.write(struct.pack(">q", struct.unpack(">q", fh.read(8))[0] + 1))
        fh.seek(60)
        a, b = fh.read(20), fh.read(20)
        fh.seek(60)
        fh.write(b + a)
        fh.seek(120)
        fh.write(struct.pack(">q", 10**12))
    idx = sorted((root / "index").iterdir())[0]
    with open(idx, "r+b") as fh:  # item 3's hash, item 5's offset, item 7's link
        base = 40 + 16 * 4
        fh.seek(base + 2 * 20)
        fh.write(struct.pack(">i", 12345))
        fh.seek(base + 4 * 20 + 4)
        fh.write(struct.pack(">q", 3))
        fh.seek(base + 6 * 20 + 16)
        fh.write(struct.pack(">i", 99))
    return root


def _cli(args: list[str], mode: str | None) -> tuple[int, str]:
    env = {k: v for k, v in os.environ.items() if k != backend.ENV}
    if mode is not None:
        env[backend.ENV] = mode
    r = subprocess.run([sys.executable, "-m", "mqstore.cli.main", *args], capture_output=True, text=True, env=env,
                       cwd=REPO)  # fmt: skip
    return r.returncode, r.stdout


def test_damaged_store_same_output_on_numba_default_and_reference(tmp_path: Path) -> None:
    root = _damaged(tmp_path)
    fast, ref = verify_store(root, _config()), verify_store_reference(root, _config())
    assert fast.problems == ref.problems and len(fast.problems) >= 6
    assert (fast.messages, fast.cq_units, fast.ext_units, fast.index_items) == (
        ref.messages, ref.cq_units, ref.ext_units, ref.index_items)
    for extra in ([], ["--json"]):  # (the command detects the geometry from the files)
        outs = [_cli(["rocketmq", "verify", str(root), *extra], mode) for mode in ("numba", None)]
        assert outs[0] == outs[1]
        assert outs[0][0] == 1, outs[0]
