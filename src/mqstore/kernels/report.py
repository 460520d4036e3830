"""Vectorised figures of the store report (``mqstore rocketmq|kafka report``), each with a
pure-Python twin (suffix ``_py``) that the tests compare against on the same inputs.

* :func:`chain_depths` – for linked items (each naming an older item or 0), how many items a walk
  from each item visits (itself included): an IndexFile hash chain's length is the depth of the
  item its slot names.  Pointer jumping: ``log2(longest chain)`` passes over numpy arrays.
* :func:`backward_steps` – positions where a time column goes backwards (``t[i] < t[i-1]``).
* :func:`log2_histogram` – counts of values in power-of-two bins ``[0,1), [1,2), [2,4), ...``.
"""

from __future__ import annotations

import numpy as np

from mqstore.kernels.registry import register


def _links(prev: np.ndarray) -> np.ndarray:
    """The usable links: a link must name an older item (``0 < prev[i] < i``), else the chain ends."""
    n = prev.shape[0]
    idx = np.arange(n, dtype=np.int64)
    p = prev.astype(np.int64, copy=False)
    return np.where((p > 0) & (p < idx), p, 0)


def chain_depths(prev: np.ndarray) -> np.ndarray:
    """``depth[i]`` = number of items on the walk ``i, prev[i], prev[prev[i]], ...`` (item 0 is the
    end marker: depth 0).  Links that do not name an older item end the walk (a corrupt file can
    never loop)."""
    n = prev.shape[0]
    if n == 0:
        return np.zeros(0, np.int64)
    nxt = _links(prev)
    rank = np.ones(n, np.int64)
    rank[0] = 0
    while nxt.any():
        rank = rank + rank[nxt]
        nxt = nxt[nxt]
    return rank


def chain_depths_py(prev: list[int] | np.ndarray) -> list[int]:
    """Twin of :func:`chain_depths`: one walk per item, memoised on the older items."""
    vals = [int(v) for v in prev]
    depth = [0] * len(vals)
    for i in range(1, len(vals)):
        p = vals[i]
        depth[i] = 1 + (depth[p] if 0 < p < i else 0)
    return depth


def backward_steps(t: np.ndarray) -> np.ndarray:
    """Indexes ``i`` (≥ 1) with ``t[i] < t[i-1]``."""
    if t.shape[0] < 2:
        return np.zeros(0, np.int64)
    return np.flatnonzero(t[1:] < t[:-1]) + 1


def backward_steps_py(t: list[int] | np.ndarray) -> list[int]:
    vals = [int(v) for v in t]
    return [i for i in range(1, len(vals)) if vals[i] < vals[i - 1]]


def log2_histogram(values: np.ndarray, nbins: int = 40) -> np.ndarray:
    """Counts per bin: bin 0 holds values < 1, bin k ≥ 1 holds ``[2^(k-1), 2^k)``; values beyond
    the last bin are counted in it."""
    v = np.asarray(values, dtype=np.int64)
    b = np.zeros(v.shape[0], np.int64)
    pos = v >= 1
    if pos.any():
        # bit length of v: floor(log2 v) + 1, exact for integers (frexp returns the exponent e with v = m 2^e, m in [0.5, 1))
        _, e = np.frexp(v[pos].astype(np.float64))
        b[pos] = e
    np.minimum(b, nbins - 1, out=b)
    return np.bincount(b, minlength=nbins)


def log2_histogram_py(values: list[int] | np.ndarray, nbins: int = 40) -> list[int]:
    out = [0] * nbins
    for v in values:
        k = int(v).bit_length() if int(v) >= 1 else 0
        out[min(k, nbins - 1)] += 1
    return out


def log2_edges(nbins: int = 40) -> list[int]:
    """Lower edges of the bins of :func:`log2_histogram`."""
    return [0] + [1 << (k - 1) for k in range(1, nbins)]


register("report.chain_depths", chain_depths, chain_depths_py)
register("report.backward_steps", backward_steps, backward_steps_py)
register("report.log2_histogram", log2_histogram, log2_histogram_py)
