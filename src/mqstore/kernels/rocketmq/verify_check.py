"""The ConsumeQueue checks of ``mqstore rocketmq verify`` against one CommitLog window, three ways.

* :func:`check_units` – a run of 20-byte ConsumeQueue units (big-endian ``commitLogOffset`` int64,
  ``size`` int32, ``tagsCode`` int64; queue offsets ``first_qoff``, ``first_qoff + 1``, ...)
  against the records of a window (``starts[:n]`` ascending, with their size, topic id, queue id,
  queue offset and tags code).  It stops at the first unit whose offset is ``hi`` or more and
  returns how many units it checked, each with a code: 0 fine or not live (the blank unit
  ``(0, INT_MAX)``, or an offset below ``cl_min``), 1 not a record of the window (no record starts
  there with that size), 2 a record's unit whose tags code is a ConsumeQueueExt address (the
  caller reads the ext unit), 4 a record of another queue/queue offset (and not one of its
  multi-dispatch units ``m_off``/``m_qoff``, sorted by offset) or of another tags code, 8 an offset
  below ``lo``: a record before the window (checked against its own window later).
* :func:`cut` – the first row of a table of ``stride``-byte rows whose big-endian int64 at byte
  ``pos`` is ``hi`` or more (an IndexFile's items up to a window's end).

The native module ``_nat_rmq_verify`` runs them when built, else the numba kernels of
:mod:`.verify_check_nb` (imported on first use); ``*_py`` are the numpy twins.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from mqstore.errors import InvalidArgumentError
from mqstore.kernels.backend import native, numba_module
from mqstore.kernels.buffers import as_u8
from mqstore.kernels.registry import register

_NAT: Any = native("_nat_rmq_verify")
UNIT_SIZE = 20
INT_MAX = 2**31 - 1
MAX_ADDR = -(2**31) - 1
#: codes of :func:`check_units`
NOT_A_RECORD, EXT_ADDRESS, WRONG_RECORD, BEFORE_WINDOW = 1, 2, 4, 8
_NO_MULTI = np.empty(0, np.int64)


def _nb() -> Any:
    return numba_module("mqstore.kernels.rocketmq.verify_check_nb")


def _unit_args(units: object, count: int, starts: np.ndarray, n: int, sizes: np.ndarray, topic_id: np.ndarray,
               queue_id: np.ndarray, queue_offset: np.ndarray, tags_code: np.ndarray, m_off: np.ndarray | None,
               m_qoff: np.ndarray | None) -> tuple[Any, ...]:  # fmt: skip
    u = as_u8(units)
    cols = (np.ascontiguousarray(starts, np.int64), np.ascontiguousarray(sizes, np.int32),
            np.ascontiguousarray(topic_id, np.int32), np.ascontiguousarray(queue_id, np.int32),
            np.ascontiguousarray(queue_offset, np.int64), np.ascontiguousarray(tags_code, np.int64))
    mo = _NO_MULTI if m_off is None else np.ascontiguousarray(m_off, np.int64)
    mq = _NO_MULTI if m_qoff is None else np.ascontiguousarray(m_qoff, np.int64)
    if count < 0 or len(u) < UNIT_SIZE * count or not 0 <= n <= min(len(c) for c in cols) or len(mq) < len(mo):
        raise InvalidArgumentError("check_units: arrays shorter than their counts")
    return (u, *cols, mo, mq)


def check_units_numba(units: object, count: int, hi: int, lo: int, cl_min: int, first_qoff: int, starts: np.ndarray,
                      n: int, sizes: np.ndarray, topic_id: np.ndarray, queue_id: np.ndarray,
                      queue_offset: np.ndarray, tags_code: np.ndarray, tid: int, qid: int,
                      m_off: np.ndarray | None = None, m_qoff: np.ndarray | None = None) -> tuple[int, np.ndarray]:  # fmt: skip
    """``(units checked, their codes)``: see the module.  ``hi``/``lo`` are int64 bounds (use the
    int64 extremes for none), ``tid``/``qid`` the queue's topic id among ``topic_id`` and queue id."""
    u, st, sz, ti, qi, qo, tc, mo, mq = _unit_args(units, count, starts, n, sizes, topic_id, queue_id, queue_offset,
                                                   tags_code, m_off, m_qoff)  # fmt: skip
    codes = np.zeros(count, np.uint8)
    k = _nb().check_units_kernel(u, np.int64(count), np.int64(hi), np.int64(lo), np.int64(cl_min),
                                 np.int64(first_qoff), st, np.int64(n), sz, ti, qi, qo, tc, np.int64(tid),
                                 np.int64(qid), mo, mq, codes)  # fmt: skip
    return int(k), codes[:k]


def check_units_native(units: object, count: int, hi: int, lo: int, cl_min: int, first_qoff: int, starts: np.ndarray,
                       n: int, sizes: np.ndarray, topic_id: np.ndarray, queue_id: np.ndarray,
                       queue_offset: np.ndarray, tags_code: np.ndarray, tid: int, qid: int,
                       m_off: np.ndarray | None = None, m_qoff: np.ndarray | None = None) -> tuple[int, np.ndarray]:  # fmt: skip
    """:func:`check_units_numba` in C (``_nat_rmq_verify``)."""
    u, st, sz, ti, qi, qo, tc, mo, mq = _unit_args(units, count, starts, n, sizes, topic_id, queue_id, queue_offset,
                                                   tags_code, m_off, m_qoff)  # fmt: skip
    codes = np.zeros(count, np.uint8)
    k = _NAT.check_units(u, int(count), int(hi), int(lo), int(cl_min), int(first_qoff), st, int(n), sz, ti, qi, qo, tc,
                         int(tid), int(qid), mo, mq, codes)  # fmt: skip
    return int(k), codes[:k]


_UNIT = np.dtype([("offset", ">i8"), ("size", ">i4"), ("tags_code", ">i8")])


def check_units_py(units: object, count: int, hi: int, lo: int, cl_min: int, first_qoff: int, starts: np.ndarray,
                   n: int, sizes: np.ndarray, topic_id: np.ndarray, queue_id: np.ndarray,
                   queue_offset: np.ndarray, tags_code: np.ndarray, tid: int, qid: int,
                   m_off: np.ndarray | None = None, m_qoff: np.ndarray | None = None) -> tuple[int, np.ndarray]:  # fmt: skip
    """Twin of :func:`check_units` in numpy (``searchsorted``)."""
    u, st, sz, ti, qi, qo, tc, mo, mq = _unit_args(units, count, starts, n, sizes, topic_id, queue_id, queue_offset,
                                                   tags_code, m_off, m_qoff)  # fmt: skip
    rec = np.frombuffer(u, _UNIT, count=count)
    off = rec["offset"].astype(np.int64)
    past = np.flatnonzero(off >= hi)
    k = int(past[0]) if len(past) else count
    off = off[:k]
    size = rec["size"][:k].astype(np.int64)
    tags = rec["tags_code"][:k].astype(np.int64)
    qoff = first_qoff + np.arange(k, dtype=np.int64)
    live = ~((off == 0) & (size == INT_MAX)) & (off >= cl_min)
    before = live & (off < lo)
    r = np.minimum(np.searchsorted(st[:n], off), max(n - 1, 0))
    if n:
        found = (st[r] == off) & (sz[r] == size)
        same = (ti[r] == tid) & (qi[r] == qid) & (qo[r] == qoff)
        tag_ok = tc[r] == tags
    else:
        found = same = tag_ok = np.zeros(k, bool)
    if len(mo):
        j = np.minimum(np.searchsorted(mo, off), len(mo) - 1)
        same = same | ((mo[j] == off) & (mq[j] == qoff))
    check = live & ~before
    codes = np.zeros(k, np.uint8)
    codes[check & ~found] = NOT_A_RECORD
    codes[check & found & (tags <= MAX_ADDR)] = EXT_ADDRESS
    codes[check & found & (tags > MAX_ADDR) & ~(same & tag_ok)] = WRONG_RECORD
    codes[before] = BEFORE_WINDOW
    return k, codes


def _cut_args(rows: object, count: int, stride: int, pos: int) -> Any:
    r = as_u8(rows)
    if count < 0 or stride < 8 or not 0 <= pos <= stride - 8 or len(r) < count * stride:
        raise InvalidArgumentError("cut: rows shorter than count x stride, or pos outside a row")
    return r


def cut_numba(rows: object, count: int, stride: int, pos: int, hi: int) -> int:
    """The first of ``count`` rows whose big-endian int64 at byte ``pos`` is ``hi`` or more (``count``: none)."""
    return int(_nb().cut_kernel(_cut_args(rows, count, stride, pos), np.int64(count), np.int64(stride),
                                np.int64(pos), np.int64(hi)))  # fmt: skip


def cut_native(rows: object, count: int, stride: int, pos: int, hi: int) -> int:
    """:func:`cut_numba` in C (``_nat_rmq_verify``)."""
    return int(_NAT.cut(_cut_args(rows, count, stride, pos), int(count), int(stride), int(pos), int(hi)))


def cut_py(rows: object, count: int, stride: int, pos: int, hi: int) -> int:
    """Twin of :func:`cut` in numpy."""
    r = _cut_args(rows, count, stride, pos)
    if count == 0:
        return 0
    v = np.ndarray((count,), ">i8", r, pos, (stride,)).astype(np.int64)
    past = np.flatnonzero(v >= hi)
    return int(past[0]) if len(past) else count


_ON = _NAT is not None
check_units = check_units_native if _ON else check_units_numba
cut = cut_native if _ON else cut_numba
register("rocketmq.check_units", check_units_numba, check_units_py, native=check_units_native if _ON else None)
register("rocketmq.cut", cut_numba, cut_py, native=cut_native if _ON else None)
