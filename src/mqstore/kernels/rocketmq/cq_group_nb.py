"""The numba kernel of :mod:`mqstore.kernels.rocketmq.cq_group` (the development path and the
fallback when the native module ``_nat_rmq_scan`` is not built; imported on first use)."""

from __future__ import annotations

import numpy as np
from numba import njit


@njit(cache=True, nogil=True)
def group_units_kernel(tid, qid, off, size, tags, rows, units, g_tid, g_qid, g_start):  # fmt: skip
    """Rows grouped by the key (topic id, queue id as unsigned 32 bits) with a stable sort, their
    20-byte big-endian units in that order; returns the number of groups."""
    n = len(tid)
    keys = np.empty(n, np.uint64)
    for i in range(n):
        keys[i] = (np.uint64(np.uint32(tid[i])) << np.uint64(32)) | np.uint64(np.uint32(qid[i]))
    order = np.argsort(keys, kind="mergesort")
    ng = 0
    for p in range(n):
        i = order[p]
        rows[p] = i
        if p == 0 or keys[i] != keys[order[p - 1]]:
            g_tid[ng] = np.int32(keys[i] >> np.uint64(32))
            g_qid[ng] = np.int32(np.uint32(keys[i] & np.uint64(0xFFFFFFFF)))
            g_start[ng] = p
            ng += 1
        u = 20 * p
        o = np.uint64(off[i])
        for b in range(8):
            units[u + b] = np.uint8((o >> np.uint64(56 - 8 * b)) & np.uint64(0xFF))
        s = np.uint32(size[i])
        for b in range(4):
            units[u + 8 + b] = np.uint8((s >> np.uint32(24 - 8 * b)) & np.uint32(0xFF))
        t = np.uint64(tags[i])
        for b in range(8):
            units[u + 12 + b] = np.uint8((t >> np.uint64(56 - 8 * b)) & np.uint64(0xFF))
    g_start[ng] = n
    return ng
