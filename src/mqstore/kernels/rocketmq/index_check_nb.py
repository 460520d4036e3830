"""The numba kernels of :mod:`mqstore.kernels.rocketmq.index_check` (the development path and the
fallback when the native module ``_nat_rmq_index`` is not built; imported on first use)."""

from __future__ import annotations

import numpy as np
from numba import njit

from mqstore.kernels.rocketmq.index_build_nb import time_diff

_INT64_MIN = np.iinfo(np.int64).min


@njit(cache=True, nogil=True, inline="always")
def _lower_bound(a, lo, hi, v):  # fmt: skip
    while lo < hi:
        mid = lo + ((hi - lo) >> 1)
        if a[mid] < v:
            lo = mid + 1
        else:
            hi = mid
    return lo


@njit(cache=True, nogil=True, inline="always")
def _locate_one(a, n, v, cur, prev):  # fmt: skip
    """``(lower bound of v in a[:n], the new cursor)``: galloping up from ``cur`` when ``v >= prev``."""
    if v >= prev:
        step = 1
        lo = cur
        hi = cur
        while hi < n and a[hi] < v:
            lo = hi + 1
            hi += step
            step <<= 1
        if hi > n:
            hi = n
        return _lower_bound(a, lo, hi, v)
    return _lower_bound(a, 0, cur, v)


@njit(cache=True, nogil=True)
def locate_kernel(a, n, x, out):  # fmt: skip
    cur = 0
    prev = _INT64_MIN
    for k in range(x.shape[0]):
        v = x[k]
        cur = _locate_one(a, n, v, cur, prev)
        prev = v
        out[k] = cur


@njit(cache=True, nogil=True)
def check_items_kernel(items, count, begin_ts, cl_min, starts, n, splits, keys, sts, codes, first_item):  # fmt: skip
    cur = 0
    prev = _INT64_MIN
    bad = 0
    for k in range(count):
        p = k * 20
        h = np.int64(0)
        for j in range(4):
            h = (h << 8) | np.int64(items[p + j])
        if h >= 0x80000000:
            h -= 0x100000000
        phy = np.int64(0)
        for j in range(8):
            phy = (phy << np.int64(8)) | np.int64(items[p + 4 + j])
        diff = np.int64(0)
        link = np.int64(0)
        for j in range(4):
            diff = (diff << 8) | np.int64(items[p + 12 + j])
            link = (link << 8) | np.int64(items[p + 16 + j])
        if diff >= 0x80000000:
            diff -= 0x100000000
        if link >= 0x80000000:
            link -= 0x100000000
        item = first_item + k
        c = 0
        if phy >= cl_min:
            cur = _locate_one(starts, n, phy, cur, prev)
            prev = phy
            r = cur
            if r >= n or starts[r] != phy or splits[r + 1] == splits[r]:
                c |= 1
            else:
                hit = False
                for q in range(splits[r], splits[r + 1]):
                    kq = keys[q] & 0xFFFFFFFF
                    if (kq - 0x100000000 if kq >= 0x80000000 else kq) == h:
                        hit = True
                if not hit:
                    c |= 2
                elif item >= 2 and diff != time_diff(sts[r], begin_ts):
                    c |= 4
        if link < 0 or link >= item:
            c |= 8
        if diff < 0:
            c |= 16
        codes[k] = c
        if c:
            bad += 1
    return bad
