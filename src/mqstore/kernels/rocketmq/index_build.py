"""IndexFile bulk build (numba), sequential and on several threads, with its pure-Python twin.

The in-memory header is an ``int64`` array of :data:`HEADER_FIELDS` (``begin_timestamp,
end_timestamp, begin_phy_offset, end_phy_offset, hash_slot_count, index_count``; index with the
``H_*`` constants) owned by the caller (it plays the role of ``IndexFileBuffer.header``).
:func:`bulk_put` leaves the buffer byte-identical to calling ``IndexFileBuffer.put_hash`` for each
key in turn (spec 3.6), header write-through and the first-item timeDiff quirk included.  The file
is big-endian on disk: the one sequential kernel is compiled for both views of :mod:`.index_view`
(a native ``uint32`` view of the page-aligned mapping on a little-endian host, else the bytes).

:func:`bulk_put_parallel` is the same put on several threads (byte-identical, see its section).
"""

from __future__ import annotations

from typing import NamedTuple

import numpy as np
from numba import njit

from mqstore.errors import CorruptIndexError, InvalidArgumentError
from mqstore.formats.rocketmq.indexfile import (
    INDEX_HEADER_SIZE,
    IndexFileBuffer,
    IndexHeader,
    check_geometry,
    index_file_size,
)
from mqstore.kernels.endian import (
    as_u8,
    bswap32,
    set_w_i32,
    set_w_i64,
    word_view,
)
from mqstore.kernels.intrinsics import prefetch
from mqstore.kernels.registry import register
from mqstore.kernels.rocketmq.index_view import HEADER_WORDS, ITEM_WORDS, item_i32, set_i32, set_i64, touch
from mqstore.kernels.threads import resolve_threads, run_parallel, split_even

HEADER_FIELDS = ("begin_timestamp", "end_timestamp", "begin_phy_offset", "end_phy_offset", "hash_slot_count", "index_count")
# positions in the header array
H_BEGIN_TS, H_END_TS, H_BEGIN_PHY, H_END_PHY, H_SLOT_COUNT, H_INDEX_COUNT = range(6)
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


def _check_inputs(
    buf: np.ndarray, hash_slot_num: int, index_num: int, header: np.ndarray
) -> None:
    check_geometry(hash_slot_num, index_num)
    size = index_file_size(hash_slot_num, index_num)
    if len(buf) != size:
        raise CorruptIndexError(f"index buffer is {len(buf)} bytes, geometry {hash_slot_num}x{index_num} needs {size}")
    if header.shape != (6,) or header.dtype != np.int64:
        raise InvalidArgumentError("header must be an int64 array of 6 fields")
    if not 1 <= int(header[H_INDEX_COUNT]) <= index_num or int(header[H_SLOT_COUNT]) < 0:
        raise CorruptIndexError(f"index header counts out of range (hashSlotCount {header[H_SLOT_COUNT]}, indexCount {header[H_INDEX_COUNT]})")


def _key_arrays(key_hash: np.ndarray, phy_offset: np.ndarray, store_ts: np.ndarray) -> tuple[np.ndarray, ...]:
    kh = np.ascontiguousarray(key_hash, np.int32)
    phy = np.ascontiguousarray(phy_offset, np.int64)
    ts = np.ascontiguousarray(store_ts, np.int64)
    if not (len(kh) == len(phy) == len(ts)):
        raise InvalidArgumentError("key_hash, phy_offset and store_ts differ in length")
    return kh, phy, ts


def bulk_put(
    buf_u8: object,
    hash_slot_num: int,
    index_num: int,
    header: np.ndarray,
    key_hash: np.ndarray,
    phy_offset: np.ndarray,
    store_ts: np.ndarray,
    start: int = 0,
) -> int:
    """Put keys ``start, start+1, ...`` into the IndexFile in ``buf_u8`` until it is full.

    Returns the number of keys consumed (fewer than ``len(key_hash) - start`` means the file is
    full: roll and continue with ``start + consumed``).  ``header`` is updated in place."""
    buf = as_u8(buf_u8)
    _check_inputs(buf, hash_slot_num, index_num, header)
    kh, phy, ts = _key_arrays(key_hash, phy_offset, store_ts)
    if not 0 <= start <= len(kh):
        raise InvalidArgumentError(f"start {start} outside the {len(kh)} keys")
    w = word_view(buf)
    view = buf if w is None else w
    return int(_bulk_put_kernel(view, np.int64(hash_slot_num), np.int64(index_num), header, kh, phy, ts, np.int64(start)))


def bulk_put_py(
    buf_u8: object,
    hash_slot_num: int,
    index_num: int,
    header: np.ndarray,
    key_hash: np.ndarray,
    phy_offset: np.ndarray,
    store_ts: np.ndarray,
    start: int = 0,
) -> int:
    """Pure-Python twin of :func:`bulk_put`: ``IndexFileBuffer.put_hash`` in a loop."""
    buf = as_u8(buf_u8)
    _check_inputs(buf, hash_slot_num, index_num, header)
    kh, phy, ts = _key_arrays(key_hash, phy_offset, store_ts)
    if not 0 <= start <= len(kh):
        raise InvalidArgumentError(f"start {start} outside the {len(kh)} keys")
    f = IndexFileBuffer(memoryview(buf), hash_slot_num, index_num, load=False)
    f.header = IndexHeader(*(int(v) for v in header))
    i = start
    while i < len(kh) and f.put_hash(int(kh[i]), int(phy[i]), int(ts[i])):
        i += 1
    header[:] = [getattr(f.header, name) for name in HEADER_FIELDS]
    return i - start


def header_array(header: IndexHeader) -> np.ndarray:
    """The ``int64[6]`` header array of an :class:`IndexHeader`."""
    return np.array([getattr(header, name) for name in HEADER_FIELDS], np.int64)


def write_header(buf_u8: object, header: np.ndarray) -> None:
    """``updateByteBuffer`` (flush): write every header field into the buffer."""
    buf = as_u8(buf_u8)
    buf[:INDEX_HEADER_SIZE] = np.frombuffer(IndexHeader(*(int(v) for v in header)).encode(), np.uint8)




# ----------------------------------------------------------------------------- on several threads
# Bulk IndexFile build on several threads, byte-identical to the sequential builder.
#
# Putting key ``i`` of a bulk put touches two places: its hash slot (read the previous item number,
# write its own) and its item, whose position is fixed in advance (item ``indexCount + i``).  Keys
# whose slots lie in different ranges of the slot table never touch each other's slots, so:
#
# 0. the hash slot of every key is computed once (the threads split the keys);
# 1. **slot phase**: thread ``t`` lists, in order, the keys whose slot falls in its range
#    ``floor(slot * T / slots) == t`` (a branch-free pass), then for each of them reads and
#    validates the slot's previous item number (exactly as ``putKey`` does for that key's
#    ``indexCount``), writes the key's item number into the slot, counts the new slots, and appends
#    the previous number to its own compact list (no two threads ever write the same cache line of
#    the slot table, and the lists are private); the slot of the key :data:`_PREFETCH_AHEAD` places
#    later is prefetched, so several random slot loads are in flight at once;
# 2. **item phase**: the keys are split into ``T`` contiguous ranges; each thread writes the 20-byte
#    items of its range in order (sequential stores, disjoint bytes), taking each key's previous
#    item number from the list of the slot range it belongs to (the slot phase noted where each
#    key range starts in every list).
#
# The header (counts, end offset/time, and the begin fields of a fresh file, set by its first key
# before anything else) is updated exactly as ``putKey`` would after the same keys.  The first key
# of a fresh file is put by the sequential kernel: it sets the begin timestamp that every later
# key's time difference uses.  ``bulk_put_parallel(..., threads=1)`` is
# :func:`bulk_put`; tests compare both, and the pure-Python twin,
# byte for byte.

class ItemFile(NamedTuple):
    """What the item phase needs of the file: its slot count, begin timestamp, first item number."""

    slots: int
    begin_ts: int
    ic0: int


class KeyInputs(NamedTuple):
    """The keys of a bulk put: hash, phyOffset, store time, and the first key to put."""

    key_hash: np.ndarray
    phy: np.ndarray
    ts: np.ndarray
    start: int


#: a bulk put of fewer keys runs sequentially (two pool rounds cost ~0.1 ms)
PARALLEL_MIN_KEYS = 1 << 16


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
    slots, begin_ts, ic0 = f
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
    """:func:`bulk_put` on ``threads`` threads (same arguments,
    same result, same bytes).  Small puts, ``threads=1`` and buffers without a native word view
    run the sequential kernel."""
    nthreads = resolve_threads(threads)
    buf = as_u8(buf_u8)
    _check_inputs(buf, hash_slot_num, index_num, header)
    kh, phy, ts = _key_arrays(key_hash, phy_offset, store_ts)
    if not 0 <= start <= len(kh):
        raise InvalidArgumentError(f"start {start} outside the {len(kh)} keys")
    w = word_view(buf)
    m = min(len(kh) - start, max(0, index_num - int(header[H_INDEX_COUNT])))
    if nthreads == 1 or w is None or m < PARALLEL_MIN_KEYS:
        return bulk_put(buf, hash_slot_num, index_num, header, kh, phy, ts, start)
    done = 0
    if int(header[H_INDEX_COUNT]) <= 1:  # the first key of a fresh file sets the begin fields: sequential
        done = bulk_put(buf, hash_slot_num, index_num, header, kh[: start + 1], phy[: start + 1], ts[: start + 1], start)
        start += done
        m -= done
    slots = int(hash_slot_num)
    ic0 = int(header[H_INDEX_COUNT])
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
    begin_ts = int(header[H_BEGIN_TS])
    f = ItemFile(np.int64(slots), np.int64(begin_ts), np.int64(ic0))
    keys = KeyInputs(kh, phy, ts, np.int64(start))
    item_args = [(w, f, keys, np.int64(a), np.int64(b), sl, bounds, prevs, np.ascontiguousarray(marks[:, u]))
                 for u, (a, b) in enumerate(ranges)]  # fmt: skip
    run_parallel(_item_phase, item_args)
    # header: what putKey leaves after these keys (write-through of the fields it touches)
    last = start + m - 1
    header[H_END_TS] = int(ts[last])
    header[H_END_PHY] = int(phy[last])
    header[H_SLOT_COUNT] = int(header[H_SLOT_COUNT]) + new_slots
    header[H_INDEX_COUNT] = ic0 + m
    if new_slots:
        set_w_i32(w, 8, int(header[H_SLOT_COUNT]))
    set_w_i64(w, 6, int(header[H_END_PHY]))
    set_w_i64(w, 2, int(header[H_END_TS]))
    set_w_i32(w, 9, int(header[H_INDEX_COUNT]))  # the count last (see IndexFile.torn)
    return done + m


def bulk_put_parallel_py(
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
    """Twin of :func:`bulk_put_parallel`: :func:`bulk_put_py` (``threads`` is checked, then ignored)."""
    resolve_threads(threads)
    return bulk_put_py(buf_u8, hash_slot_num, index_num, header, key_hash, phy_offset, store_ts, start)


register("rocketmq.bulk_put", bulk_put, bulk_put_py)
register("rocketmq.bulk_put_parallel", bulk_put_parallel, bulk_put_parallel_py)
