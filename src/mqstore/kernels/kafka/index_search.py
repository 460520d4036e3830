"""Kafka ``.index``/``.timeindex`` lookups (spec §3.7): the exact slot search and batch lookups.

* :func:`index_search_many` – the largest-lower-bound / smallest-upper-bound search with Kafka's
  warm-section split and its quirks, for many targets (numba); twin :func:`index_search_many_py`
  over the scalar :func:`index_search_py`;
* :func:`index_search_sorted` – the same answer as one C ``bisect`` on a strictly increasing column;
* :func:`index_lookup_many` – search and entry fetch fused, branch-free lock-step searches on a
  strictly increasing column, on several threads for large batches; twin
  :func:`index_lookup_many_py`.
"""

from __future__ import annotations

from bisect import bisect_right
from itertools import pairwise
from typing import Any

import numpy as np

from mqstore.kernels.backend import numba_module
from mqstore.kernels.registry import register
from mqstore.kernels.threads import default_threads, run_parallel


def _nb() -> Any:
    return numba_module("mqstore.kernels.kafka.index_search_nb")


def index_search_py(col: Any, n: int, target: int, warm: int, smallest_upper_bound: bool = False) -> int:
    """Pure-Python twin: the exact slot search of spec §3.7 over ``col[0:n]``."""
    if n == 0:
        return -1
    first_hot = max(0, n - 1 - warm)
    if col[first_hot] < target:
        lo, hi = first_hot, n - 1
    else:
        if col[0] > target:
            return 0 if smallest_upper_bound else -1
        lo, hi = 0, first_hot
    while lo < hi:
        mid = (lo + hi + 1) >> 1
        v = col[mid]
        if v > target:
            hi = mid - 1
        elif v < target:
            lo = mid
        else:
            return mid
    if not smallest_upper_bound:
        return lo
    return -1 if lo == n - 1 else lo + 1


def index_search_many(col: np.ndarray, n: int, targets: Any, warm: int, smallest_upper_bound: bool = False) -> np.ndarray:
    """Slots for many targets at once (numba); same answers as :func:`index_search_py`."""
    t = np.ascontiguousarray(np.asarray(targets, dtype=np.int64))
    out = np.empty(t.shape[0], dtype=np.int64)
    c = np.ascontiguousarray(col[:n], dtype=np.int64)
    _nb()._search_many(c, n, t, warm, smallest_upper_bound, out)
    return out


def index_search_many_py(col: Any, n: int, targets: Any, warm: int, smallest_upper_bound: bool = False) -> np.ndarray:
    """Pure-Python twin of :func:`index_search_many`."""
    c = [int(x) for x in col[:n]]
    return np.array([index_search_py(c, n, int(t), warm, smallest_upper_bound) for t in targets], dtype=np.int64)




def index_search_sorted(col: Any, n: int, target: int, smallest_upper_bound: bool = False) -> int:
    """The search of :func:`index_search_py` as one C ``bisect`` call.

    Valid only when ``col[0:n]`` is strictly increasing (every index mqstore or Kafka writes;
    callers check once and fall back to :func:`index_search_py` otherwise).  On such a column the
    warm-section split of spec §3.7 cannot change the answer, and the one quirk of the smallest
    upper bound (slot 0 is never probed, so an exact hit on slot 0 answers slot 1, or −1 when it
    is the only entry) is reproduced by the generic rule below.
    """
    if n == 0:
        return -1
    j = bisect_right(col, target, 0, n) - 1
    if not smallest_upper_bound:
        return j
    if j < 0:
        return 0  # every entry is above the target
    if j > 0 and col[j] == target:
        return j
    return -1 if j == n - 1 else j + 1


PARALLEL_MIN_TARGETS = 1 << 15  # batches this large per thread are split over the CPUs


def index_lookup_many(keys: np.ndarray, vals: np.ndarray, n: int, targets: Any, warm: int, miss_key: int,
                      miss_val: int, *, strictly_increasing: bool | None = None) -> tuple[np.ndarray, np.ndarray]:
    """Largest-lower-bound search and entry fetch fused in one compiled pass: for each target the
    ``(key, value)`` of the greatest entry whose key ≤ target, ``(miss_key, miss_val)`` if none.

    On a strictly increasing key column (checked unless the caller says) the answer of Kafka's
    warm/cold search is the plain greatest lower bound, found by lock-step branch-free searches;
    any other column takes the exact algorithm of spec §3.7."""
    t = np.ascontiguousarray(np.asarray(targets, dtype=np.int64))
    out_k = np.empty(t.shape[0], dtype=np.int64)
    out_v = np.empty(t.shape[0], dtype=np.int64)
    k = keys[:n]
    if strictly_increasing is None:
        strictly_increasing = bool(n < 2 or np.all(k[1:] > k[:-1]))
    if n == 0:
        out_k[:] = miss_key
        out_v[:] = miss_val
    elif strictly_increasing:
        kc, vc = np.ascontiguousarray(k), np.ascontiguousarray(vals[:n])
        parts = min(default_threads(), t.shape[0] // PARALLEL_MIN_TARGETS)
        if parts > 1:  # the searches are independent: one slice of the targets per thread
            cuts = np.linspace(0, t.shape[0], parts + 1).astype(np.int64).tolist()
            run_parallel(_nb()._lookup_many_sorted, [(kc, vc, n, t[a:b], miss_key, miss_val, out_k[a:b], out_v[a:b])
                                               for a, b in pairwise(cuts)])
        else:
            _nb()._lookup_many_sorted(kc, vc, n, t, miss_key, miss_val, out_k, out_v)
    else:
        _nb()._lookup_many(keys, vals, n, t, warm, miss_key, miss_val, out_k, out_v)
    return out_k, out_v


def index_lookup_many_py(keys: Any, vals: Any, n: int, targets: Any, warm: int, miss_key: int,
                         miss_val: int, *, strictly_increasing: bool | None = None) -> tuple[np.ndarray, np.ndarray]:
    """Twin of :func:`index_lookup_many`: :func:`index_search_py` per target (the exact §3.7
    search whatever ``strictly_increasing`` says)."""
    ks, vs = [int(x) for x in keys[:n]], [int(x) for x in vals[:n]]
    out_k, out_v = [], []
    for t in targets:
        s = index_search_py(ks, n, int(t), warm, False)
        out_k.append(miss_key if s < 0 else ks[s])
        out_v.append(miss_val if s < 0 else vs[s])
    return np.array(out_k, dtype=np.int64), np.array(out_v, dtype=np.int64)


register("kafka.index_search_many", index_search_many, index_search_many_py)
register("kafka.index_lookup_many", index_lookup_many, index_lookup_many_py)
