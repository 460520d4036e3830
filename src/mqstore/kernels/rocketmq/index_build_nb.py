"""The numba kernels of :mod:`mqstore.kernels.rocketmq.index_build` (the development path and the
fallback when the native module ``_nat_rmq_index`` is not built; imported on first use, so a
process on the native path never loads numba).  The sequential kernel is compiled for both views
of :mod:`.index_view` (a native ``uint32`` view of the page-aligned mapping on a little-endian
host, else the bytes); the phases of the threaded put need the word view.
"""

from __future__ import annotations

import numpy as np
from numba import njit

from mqstore.kernels.endian import bswap32
from mqstore.kernels.intrinsics import prefetch
from mqstore.kernels.rocketmq.index_build import (
    H_BEGIN_PHY,
    H_BEGIN_TS,
    H_END_PHY,
    H_END_TS,
    H_INDEX_COUNT,
    H_SLOT_COUNT,
)
from mqstore.kernels.rocketmq.index_view_nb import HEADER_WORDS, ITEM_WORDS, item_i32, set_i32, set_i64, touch

_INT_MAX = 2**31 - 1


@njit(cache=True, nogil=True, inline="always")
def time_diff(t: int, begin_ts: int) -> int:
    """An item's time field: seconds since the file's begin timestamp (truncated toward zero),
    clamped to ``[0, 2**31 - 1]``; ``0`` while the file has no begin timestamp."""
    if begin_ts <= 0:
        return 0
    d = t - begin_ts
    q = d // 1000 if d >= 0 else -((-d) // 1000)
    if q > _INT_MAX:
        return _INT_MAX
    if q < 0:
        return 0
    return q


#: keys ahead whose hash slot the bulk builders prefetch (see kernels/intrinsics.py)
_PREFETCH_AHEAD = 16


@njit(cache=True, nogil=True)
def _bulk_put_kernel(a, slots, index_num, header, key_hash, phy, ts, start):  # fmt: skip
    """``putKey`` for keys ``start, start + 1, ...`` until the file is full, on either view of the
    file (:mod:`.index_view`); returns the number of keys put and updates ``header``."""
    begin_ts = header[H_BEGIN_TS]
    end_ts = header[H_END_TS]
    begin_phy = header[H_BEGIN_PHY]
    end_phy = header[H_END_PHY]
    hsc = header[H_SLOT_COUNT]
    ic = header[H_INDEX_COUNT]
    items_w = HEADER_WORDS + slots  # word index of item 0
    n = key_hash.shape[0]
    i = start
    wrote_begin = False
    wrote_hsc = False
    while i < n:
        if ic >= index_num:
            break
        if i + _PREFETCH_AHEAD < n:  # the slot of a later key: its random load overlaps this key's work
            s2 = np.int64(key_hash[i + _PREFETCH_AHEAD]) % slots
            touch(a, HEADER_WORDS + (s2 + slots if s2 < 0 else s2))
        h = np.int64(key_hash[i])
        s = h % slots
        if s < 0:
            s += slots
        sw = HEADER_WORDS + s
        sv = item_i32(a, sw)
        if sv <= 0 or sv > ic:
            sv = 0
        t = ts[i]
        diff = time_diff(t, begin_ts)
        p = phy[i]
        iw = items_w + ic * ITEM_WORDS
        set_i32(a, iw, h)
        set_i64(a, iw + 1, p)
        set_i32(a, iw + 3, diff)
        set_i32(a, iw + 4, sv)
        set_i32(a, sw, ic)
        if ic <= 1:
            begin_phy = p
            begin_ts = t
            wrote_begin = True
        if sv == 0:
            hsc += 1
            wrote_hsc = True
        ic += 1
        end_phy = p
        end_ts = t
        i += 1
    if i > start:  # header write-through (only the fields putKey touched)
        if wrote_begin:
            set_i64(a, 4, begin_phy)
            set_i64(a, 0, begin_ts)
        if wrote_hsc:
            set_i32(a, 8, hsc)
        set_i64(a, 6, end_phy)
        set_i64(a, 2, end_ts)
        set_i32(a, 9, ic)  # the count last: a kill before it leaves a file load() sees as torn
    header[H_BEGIN_TS] = begin_ts
    header[H_END_TS] = end_ts
    header[H_BEGIN_PHY] = begin_phy
    header[H_END_PHY] = end_phy
    header[H_SLOT_COUNT] = hsc
    header[H_INDEX_COUNT] = ic
    return i - start


@njit(cache=True, nogil=True)
def _slots_of(key_hash, start, j0, j1, slots, out):  # fmt: skip
    """``out[j]`` = the hash slot of key ``start + j`` for ``j0 <= j < j1`` (``putKey``'s
    ``abs(hash) % slots``; the hash is already non-negative except for ``Integer.MIN_VALUE``)."""
    for j in range(j0, j1):
        s = np.int64(key_hash[start + j]) % slots
        if s < 0:
            s += slots
        out[j] = s


@njit(cache=True, nogil=True)
def _slot_phase(w, ic0, sl, m, lo, hi, key_bounds, prev_out, marks):  # fmt: skip
    """Slot phase of the part owning slots ``lo <= s < hi``: returns the number of slots that were
    empty (hashSlotCount += n).  First the part's keys are listed in order (no branch), then their
    slots are read and written with the slot of a later key prefetched.  The list lives in
    ``prev_out`` itself: entry ``k`` is read (and entry ``k + _PREFETCH_AHEAD``) before the previous
    item number of key ``k`` replaces it."""
    own = prev_out
    c = 0
    b = 0
    nb = key_bounds.shape[0]
    for j in range(m):
        while b < nb and key_bounds[b] == j:
            marks[b] = c
            b += 1
        s = sl[j]
        own[c] = j
        c += (s >= lo) & (s < hi)
    while b < nb:
        marks[b] = c
        b += 1
    new_slots = 0
    for k in range(c):
        if k + _PREFETCH_AHEAD < c:
            prefetch(w, 10 + sl[own[k + _PREFETCH_AHEAD]])
        j = own[k]
        sw = 10 + sl[j]
        ic = ic0 + j
        v = np.int64(bswap32(w[sw]))
        sv = v - 0x100000000 if v >= 0x80000000 else v
        if sv <= 0 or sv > ic:
            sv = 0
            new_slots += 1
        prev_out[k] = sv
        w[sw] = bswap32(ic)
    return new_slots


@njit(cache=True, nogil=True)
def _item_phase(w, f, keys, j0, j1, sl, bounds, prevs, cursors):  # fmt: skip
    """Items of keys ``j0 <= j < j1`` (``prevs[p, cursors[p]]`` is the next previous item number of
    slot range ``p``, which holds the slots ``bounds[p] <= s < bounds[p + 1]``)."""
    slots, begin_ts, ic0, _index_num = f
    key_hash, phy, ts, start = keys
    items_w = 10 + slots
    parts = bounds.shape[0] - 1
    for j in range(j0, j1):
        i = start + j
        s = sl[j]
        p = 0
        while p + 1 < parts and s >= bounds[p + 1]:
            p += 1
        sv = prevs[p, cursors[p]]
        cursors[p] += 1
        t = ts[i]
        diff = time_diff(t, begin_ts)
        pv = phy[i]
        iw = items_w + (ic0 + j) * 5
        w[iw] = bswap32(np.int64(key_hash[i]))
        w[iw + 1] = bswap32(pv >> 32)
        w[iw + 2] = bswap32(pv)
        w[iw + 3] = bswap32(diff)
        w[iw + 4] = bswap32(sv)


@njit(cache=True, nogil=True)
def index_keys_kernel(key_row, key_hash, sys_flag, offsets, store_ts, resume, skip, out_h, out_o, out_t):  # fmt: skip
    """:func:`mqstore.kernels.rocketmq.index_build.index_keys` (rows already checked)."""
    m = 0
    skipped = 0
    for i in range(key_row.shape[0]):
        r = key_row[i]
        if (sys_flag[r] & 0xC) == 0xC:
            continue
        off = offsets[r]
        if resume >= 0:
            if off < resume:
                continue
            if off == resume and skipped < skip:
                skipped += 1
                continue
        out_h[m] = key_hash[i]
        out_o[m] = off
        out_t[m] = store_ts[r]
        m += 1
    return m
