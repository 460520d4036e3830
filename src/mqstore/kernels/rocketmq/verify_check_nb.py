"""The numba kernels of :mod:`mqstore.kernels.rocketmq.verify_check` (the development path and the
fallback when the native module ``_nat_rmq_verify`` is not built; imported on first use)."""

from __future__ import annotations

import numpy as np
from numba import njit

from mqstore.kernels.rocketmq.index_check_nb import _locate_one, _lower_bound

_INT64_MIN = np.iinfo(np.int64).min
_INT_MAX = 2**31 - 1
_MAX_ADDR = -(2**31) - 1


@njit(cache=True, nogil=True, inline="always")
def _be(buf, p, width):  # fmt: skip
    v = np.int64(0)
    for i in range(width):
        v = (v << 8) | np.int64(buf[p + i])
    if width == 4 and v >= 2**31:
        v -= 2**32
    return v


@njit(cache=True, nogil=True)
def check_units_kernel(units, count, hi, lo, cl_min, first_qoff, starts, n, sizes, topic_id, queue_id, queue_offset,
                       tags_code, tid, qid, m_off, m_qoff, codes):  # fmt: skip
    cur = 0
    prev = _INT64_MIN
    m = len(m_off)
    for j in range(count):
        p = j * 20
        off = _be(units, p, 8)
        size = _be(units, p + 8, 4)
        tags = _be(units, p + 12, 8)
        if off >= hi:
            return j
        c = 0
        if not (off == 0 and size == _INT_MAX) and off >= cl_min:
            if off < lo:
                c = 8
            else:
                r = _locate_one(starts, n, off, cur, prev)
                cur = r
                prev = off
                if r >= n or starts[r] != off or sizes[r] != size:
                    c = 1
                elif tags <= _MAX_ADDR:
                    c = 2
                else:
                    qoff = first_qoff + j
                    same = topic_id[r] == tid and queue_id[r] == qid and queue_offset[r] == qoff
                    if m > 0:
                        k = _lower_bound(m_off, 0, m, off)
                        if k > m - 1:
                            k = m - 1
                        same = same or (m_off[k] == off and m_qoff[k] == qoff)
                    if not (same and tags_code[r] == tags):
                        c = 4
        codes[j] = c
    return count


@njit(cache=True, nogil=True)
def cut_kernel(rows, count, stride, pos, hi):  # fmt: skip
    for j in range(count):
        if _be(rows, j * stride + pos, 8) >= hi:
            return j
    return count
