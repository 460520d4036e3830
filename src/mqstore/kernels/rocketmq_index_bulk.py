"""Bulk IndexFile build on several threads, byte-identical to the sequential builder.

Putting key ``i`` of a bulk put touches two places: its hash slot (read the previous item number,
write its own) and its item, whose position is fixed in advance (item ``indexCount + i``).  Keys
whose slots lie in different ranges of the slot table never touch each other's slots, so:

0. the hash slot of every key is computed once (the threads split the keys);
1. **slot phase**: thread ``t`` lists, in order, the keys whose slot falls in its range
   ``floor(slot * T / slots) == t`` (a branch-free pass), then for each of them reads and
   validates the slot's previous item number (exactly as ``putKey`` does for that key's
   ``indexCount``), writes the key's item number into the slot, counts the new slots, and appends
   the previous number to its own compact list (no two threads ever write the same cache line of
   the slot table, and the lists are private); the slot of the key :data:`PREFETCH_AHEAD` places
   later is prefetched, so several random slot loads are in flight at once;
2. **item phase**: the keys are split into ``T`` contiguous ranges; each thread writes the 20-byte
   items of its range in order (sequential stores, disjoint bytes), taking each key's previous
   item number from the list of the slot range it belongs to (the slot phase noted where each
   key range starts in every list).

The header (counts, end offset/time, and the begin fields of a fresh file, set by its first key
before anything else) is updated exactly as ``putKey`` would after the same keys.  The first key
of a fresh file is put by the sequential kernel: it sets the begin timestamp that every later
key's time difference uses.  ``bulk_put_parallel(..., threads=1)`` is
:func:`mqstore.kernels.rocketmq_index.bulk_put`; tests compare both, and the pure-Python twin,
byte for byte.
"""

from __future__ import annotations

import numpy as np
from numba import njit

from mqstore.errors import InvalidArgumentError
from mqstore.kernels.intrinsics import prefetch
from mqstore.kernels.javahash import as_u8
from mqstore.kernels.rocketmq_index import (
    _PREFETCH_AHEAD,
    _check_inputs,
    _key_arrays,
    _word_view,
    bulk_put,
    time_diff,
)
from mqstore.kernels.threads import resolve_threads, run_parallel, split_even

#: a bulk put of fewer keys runs sequentially (two pool rounds cost ~0.1 ms)
PARALLEL_MIN_KEYS = 1 << 16


@njit(cache=True, nogil=True, inline="always")
def _bswap(v: int) -> np.uint32:
    u = np.uint32(v & 0xFFFFFFFF)
    return np.uint32(
        ((u & np.uint32(0xFF)) << np.uint32(24)) | ((u & np.uint32(0xFF00)) << np.uint32(8))
        | ((u >> np.uint32(8)) & np.uint32(0xFF00)) | (u >> np.uint32(24))
    )  # fmt: skip


#: keys ahead whose hash slot the slot phase prefetches (the slot loads are random: several in
#: flight at once instead of one at a time)
PREFETCH_AHEAD = _PREFETCH_AHEAD


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
    ``prev_out`` itself: entry ``k`` is read (and entry ``k + PREFETCH_AHEAD``) before the previous
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
        if k + PREFETCH_AHEAD < c:
            prefetch(w, 10 + sl[own[k + PREFETCH_AHEAD]])
        j = own[k]
        sw = 10 + sl[j]
        ic = ic0 + j
        v = np.int64(_bswap(w[sw]))
        sv = v - 0x100000000 if v >= 0x80000000 else v
        if sv <= 0 or sv > ic:
            sv = 0
            new_slots += 1
        prev_out[k] = sv
        w[sw] = _bswap(ic)
    return new_slots


@njit(cache=True, nogil=True)
def _item_phase(w, slots, begin_ts, ic0, key_hash, phy, ts, start, j0, j1, sl, bounds, prevs, cursors):  # fmt: skip
    """Items of keys ``j0 <= j < j1`` (``prevs[p, cursors[p]]`` is the next previous item number of
    slot range ``p``, which holds the slots ``bounds[p] <= s < bounds[p + 1]``)."""
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
        w[iw] = _bswap(np.int64(key_hash[i]))
        w[iw + 1] = _bswap(pv >> 32)
        w[iw + 2] = _bswap(pv)
        w[iw + 3] = _bswap(diff)
        w[iw + 4] = _bswap(sv)


def _set_i32(w: np.ndarray, i: int, v: int) -> None:
    w[i] = int.from_bytes((v & 0xFFFFFFFF).to_bytes(4, "big"), "little")


def _set_i64(w: np.ndarray, i: int, v: int) -> None:
    _set_i32(w, i, (v >> 32) & 0xFFFFFFFF)
    _set_i32(w, i + 1, v & 0xFFFFFFFF)


def bulk_put_parallel(
    buf_u8: object,
    hash_slot_num: int,
    index_num: int,
    header: np.ndarray,
    key_hash: np.ndarray,
    phy_offset: np.ndarray,
    store_ts: np.ndarray,
    start: int = 0,
    *,
    threads: int | None = None,
) -> int:
    """:func:`~mqstore.kernels.rocketmq_index.bulk_put` on ``threads`` threads (same arguments,
    same result, same bytes).  Small puts, ``threads=1`` and buffers without a native word view
    run the sequential kernel."""
    nthreads = resolve_threads(threads)
    buf = as_u8(buf_u8)
    _check_inputs(buf, hash_slot_num, index_num, header)
    kh, phy, ts = _key_arrays(key_hash, phy_offset, store_ts)
    if not 0 <= start <= len(kh):
        raise InvalidArgumentError(f"start {start} outside the {len(kh)} keys")
    w = _word_view(buf)
    m = min(len(kh) - start, max(0, index_num - int(header[5])))
    if nthreads == 1 or w is None or m < PARALLEL_MIN_KEYS:
        return bulk_put(buf, hash_slot_num, index_num, header, kh, phy, ts, start)
    done = 0
    if int(header[5]) <= 1:  # the first key of a fresh file sets the begin fields: sequential
        done = bulk_put(buf, hash_slot_num, index_num, header, kh[: start + 1], phy[: start + 1], ts[: start + 1], start)
        start += done
        m -= done
    slots = int(hash_slot_num)
    ic0 = int(header[5])
    parts = nthreads
    ranges = split_even(m, parts)
    key_bounds = np.array([a for a, _ in ranges], np.int64)
    # slot range p holds the slots s with floor(s * parts / slots) == p
    bounds = np.array([(p * slots + parts - 1) // parts for p in range(parts + 1)], np.int64)
    sl = np.empty(m, np.int32)  # slots < 2**31 (check_geometry)
    run_parallel(_slots_of, [(kh, np.int64(start), np.int64(a), np.int64(b), np.int64(slots), sl) for a, b in ranges])
    prevs = np.empty((parts, m), np.int32)
    marks = np.zeros((parts, parts), np.int64)
    args = [
        (w, np.int64(ic0), sl, np.int64(m), bounds[p], bounds[p + 1], key_bounds, prevs[p], marks[p])
        for p in range(parts)
    ]  # fmt: skip
    new_slots = sum(int(v) for v in run_parallel(_slot_phase, args))
    begin_ts = int(header[0])
    item_args = [
        (w, np.int64(slots), np.int64(begin_ts), np.int64(ic0), kh, phy, ts, np.int64(start), np.int64(a), np.int64(b),
         sl, bounds, prevs, np.ascontiguousarray(marks[:, u]))
        for u, (a, b) in enumerate(ranges)
    ]  # fmt: skip
    run_parallel(_item_phase, item_args)
    # header: what putKey leaves after these keys (write-through of the fields it touches)
    last = start + m - 1
    header[1] = int(ts[last])
    header[3] = int(phy[last])
    header[4] = int(header[4]) + new_slots
    header[5] = ic0 + m
    if new_slots:
        _set_i32(w, 8, int(header[4]))
    _set_i64(w, 6, int(header[3]))
    _set_i64(w, 2, int(header[1]))
    _set_i32(w, 9, int(header[5]))  # the count last (see IndexFile.torn)
    return done + m
