"""The numba kernels of :mod:`mqstore.kernels.kafka.index_search` (imported on first use, so a
process that never calls them does not load numba)."""

from __future__ import annotations

import numpy as np
from numba import njit


@njit(cache=True)
def _search_one(col, n, target, warm, want_sub):
    if n == 0:
        return -1
    first_hot = n - 1 - warm
    if first_hot < 0:
        first_hot = 0
    if col[first_hot] < target:
        lo = first_hot
        hi = n - 1
    else:
        if col[0] > target:
            return 0 if want_sub else -1
        lo = 0
        hi = first_hot
    while lo < hi:
        mid = (lo + hi + 1) >> 1
        v = col[mid]
        if v > target:
            hi = mid - 1
        elif v < target:
            lo = mid
        else:
            return mid
    if not want_sub:
        return lo
    return -1 if lo == n - 1 else lo + 1


@njit(cache=True)
def _search_many(col, n, targets, warm, want_sub, out):
    for i in range(targets.shape[0]):
        out[i] = _search_one(col, n, targets[i], warm, want_sub)


@njit(cache=True)
def _lookup_many(keys, vals, n, targets, warm, miss_key, miss_val, out_k, out_v):
    for i in range(targets.shape[0]):
        s = _search_one(keys, n, targets[i], warm, False)
        if s < 0:
            out_k[i] = miss_key
            out_v[i] = miss_val
        else:
            out_k[i] = keys[s]
            out_v[i] = vals[s]


_LANES = 32


@njit(cache=True, nogil=True)  # several threads search parts of one batch (index_lookup_many)
def _lookup_many_sorted(keys, vals, n, targets, miss_key, miss_val, out_k, out_v):
    # Branch-free binary searches, _LANES targets in lock-step: the probes of different targets
    # do not depend on each other, so the CPU overlaps their cache misses.
    m = targets.shape[0]
    base = np.zeros(_LANES, np.int64)
    i = 0
    while i < m:
        lanes = min(_LANES, m - i)
        for j in range(lanes):
            base[j] = 0
        length = n
        while length > 1:
            half = length >> 1
            for j in range(lanes):
                b = base[j]
                base[j] = b + half if keys[b + half] <= targets[i + j] else b
            length -= half
        for j in range(lanes):
            b = base[j]
            if keys[b] <= targets[i + j]:
                out_k[i + j] = keys[b]
                out_v[i + j] = vals[b]
            else:
                out_k[i + j] = miss_key
                out_v[i + j] = miss_val
        i += lanes
