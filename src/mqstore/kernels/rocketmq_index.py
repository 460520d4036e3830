"""Bulk IndexFile builder and batch chain walk (numba), with their pure-Python twins.

The in-memory header is an ``int64`` array ``[begin_timestamp, end_timestamp, begin_phy_offset,
end_phy_offset, hash_slot_count, index_count]`` owned by the caller (it plays the role of
``IndexFileBuffer.header``).  :func:`bulk_put` leaves the buffer byte-identical to calling
``IndexFileBuffer.put_hash`` for each key in turn (spec 3.6), header write-through and the
first-item timeDiff quirk included; :func:`select_many` returns, for each key hash, what
``IndexFileBuffer.select_by_hash`` appends to a fresh list (spec 3.7).  The file is big-endian on
disk, so the kernels read and write integers byte by byte.
"""

from __future__ import annotations

import os
import sys

import numpy as np
from numba import carray, njit, types
from numba.extending import intrinsic

from mqstore.errors import CorruptIndexError, InvalidArgumentError
from mqstore.formats.rocketmq.indexfile import (
    INDEX_HEADER_SIZE,
    IndexFileBuffer,
    IndexHeader,
    check_geometry,
    index_file_size,
)
from mqstore.kernels.intrinsics import prefetch
from mqstore.kernels.javahash import as_u8
from mqstore.kernels.rocketmq_scan import rd_i32, rd_i64
from mqstore.kernels.threads import run_parallel

HEADER_FIELDS = ("begin_timestamp", "end_timestamp", "begin_phy_offset", "end_phy_offset", "hash_slot_count", "index_count")
_INT_MAX = 2**31 - 1

# select_many states per key
SELECT_OK = 0
SELECT_CYCLE = 1  # the chain revisits items: corrupt file
SELECT_OUT_OF_FILE = 2  # an item number points past the end of the file: corrupt header/slot


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


@njit(cache=True, nogil=True)
def wr_i32(buf: np.ndarray, p: int, v: int) -> None:
    u = v & 0xFFFFFFFF
    buf[p] = (u >> 24) & 0xFF
    buf[p + 1] = (u >> 16) & 0xFF
    buf[p + 2] = (u >> 8) & 0xFF
    buf[p + 3] = u & 0xFF


@njit(cache=True, nogil=True)
def wr_i64(buf: np.ndarray, p: int, v: int) -> None:
    u = np.uint64(v)
    for k in range(8):
        buf[p + 7 - k] = np.uint8(u & np.uint64(0xFF))
        u = u >> np.uint64(8)


@njit(cache=True, nogil=True)
def _bulk_put_kernel(buf, slots, index_num, header, key_hash, phy, ts, start):  # fmt: skip
    begin_ts = header[0]
    end_ts = header[1]
    begin_phy = header[2]
    end_phy = header[3]
    hsc = header[4]
    ic = header[5]
    items_base = 40 + slots * 4
    n = key_hash.shape[0]
    i = start
    wrote_begin = False
    wrote_hsc = False
    while i < n:
        if ic >= index_num:
            break
        h = np.int64(key_hash[i])
        s = h % slots
        if s < 0:
            s += slots
        sp = 40 + s * 4
        sv = rd_i32(buf, sp)
        if sv <= 0 or sv > ic:
            sv = 0
        t = ts[i]
        diff = time_diff(t, begin_ts)
        ip = items_base + ic * 20
        wr_i32(buf, ip, h)
        wr_i64(buf, ip + 4, phy[i])
        wr_i32(buf, ip + 12, diff)
        wr_i32(buf, ip + 16, sv)
        wr_i32(buf, sp, ic)
        if ic <= 1:
            begin_phy = phy[i]
            begin_ts = t
            wrote_begin = True
        if sv == 0:
            hsc += 1
            wrote_hsc = True
        ic += 1
        end_phy = phy[i]
        end_ts = t
        i += 1
    if i > start:  # header write-through (only the fields putKey touched)
        if wrote_begin:
            wr_i64(buf, 16, begin_phy)
            wr_i64(buf, 0, begin_ts)
        if wrote_hsc:
            wr_i32(buf, 32, hsc)
        wr_i64(buf, 24, end_phy)
        wr_i64(buf, 8, end_ts)
        wr_i32(buf, 36, ic)  # the count last: a kill before it leaves a file load() sees as torn
    header[0] = begin_ts
    header[1] = end_ts
    header[2] = begin_phy
    header[3] = end_phy
    header[4] = hsc
    header[5] = ic
    return i - start


# ----------------------------------------------------------------------------- word-view fast path
# IndexFiles are 4-byte aligned throughout (40-byte header, 4-byte slots, 20-byte items), so on a
# little-endian host the kernels address a native ``uint32`` view of the (page-aligned) mapping and
# byte-swap each big-endian word: one load or store per field instead of one per byte.
_WORDS_OK = sys.byteorder == "little"


@njit(cache=True, nogil=True, inline="always")
def _bswap32(v: int) -> np.uint32:
    u = np.uint32(v & 0xFFFFFFFF)
    return np.uint32(
        ((u & np.uint32(0xFF)) << np.uint32(24)) | ((u & np.uint32(0xFF00)) << np.uint32(8))
        | ((u >> np.uint32(8)) & np.uint32(0xFF00)) | (u >> np.uint32(24))
    )  # fmt: skip


@njit(cache=True, nogil=True, inline="always")
def _w_i32(w: np.ndarray, i: int) -> int:
    v = np.int64(_bswap32(w[i]))
    return v - 0x100000000 if v >= 0x80000000 else v


@njit(cache=True, nogil=True, inline="always")
def _w_i64(w: np.ndarray, i: int) -> int:
    hi = np.uint64(_bswap32(w[i]))
    lo = np.uint64(_bswap32(w[i + 1]))
    return np.int64((hi << np.uint64(32)) | lo)


#: keys ahead whose hash slot the bulk builders prefetch (see kernels/intrinsics.py)
_PREFETCH_AHEAD = 16


@njit(cache=True, nogil=True)
def _bulk_put_words(w, slots, index_num, header, key_hash, phy, ts, start):  # fmt: skip
    begin_ts = header[0]
    end_ts = header[1]
    begin_phy = header[2]
    end_phy = header[3]
    hsc = header[4]
    ic = header[5]
    items_w = 10 + slots  # word index of item 0
    n = key_hash.shape[0]
    i = start
    wrote_begin = False
    wrote_hsc = False
    while i < n:
        if ic >= index_num:
            break
        if i + _PREFETCH_AHEAD < n:  # the slot of a later key: its random load overlaps this key's work
            s2 = np.int64(key_hash[i + _PREFETCH_AHEAD]) % slots
            prefetch(w, 10 + (s2 + slots if s2 < 0 else s2))
        h = np.int64(key_hash[i])
        s = h % slots
        if s < 0:
            s += slots
        sw = 10 + s
        sv = _w_i32(w, sw)
        if sv <= 0 or sv > ic:
            sv = 0
        t = ts[i]
        diff = time_diff(t, begin_ts)
        p = phy[i]
        iw = items_w + ic * 5
        w[iw] = _bswap32(h)
        w[iw + 1] = _bswap32(p >> 32)
        w[iw + 2] = _bswap32(p)
        w[iw + 3] = _bswap32(diff)
        w[iw + 4] = _bswap32(sv)
        w[sw] = _bswap32(ic)
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
            w[4] = _bswap32(begin_phy >> 32)
            w[5] = _bswap32(begin_phy)
            w[0] = _bswap32(begin_ts >> 32)
            w[1] = _bswap32(begin_ts)
        if wrote_hsc:
            w[8] = _bswap32(hsc)
        w[6] = _bswap32(end_phy >> 32)
        w[7] = _bswap32(end_phy)
        w[2] = _bswap32(end_ts >> 32)
        w[3] = _bswap32(end_ts)
        w[9] = _bswap32(ic)  # the count last: a kill before it leaves a file load() sees as torn
    header[0] = begin_ts
    header[1] = end_ts
    header[2] = begin_phy
    header[3] = end_phy
    header[4] = hsc
    header[5] = ic
    return i - start


def _word_view(buf: np.ndarray) -> np.ndarray | None:
    """The native ``uint32`` view of an index buffer, or None (big-endian host, unaligned buffer)."""
    if not _WORDS_OK or buf.ctypes.data % 4 or len(buf) % 4:
        return None
    return buf.view(np.uint32)


def _check_inputs(
    buf: np.ndarray, hash_slot_num: int, index_num: int, header: np.ndarray
) -> None:
    check_geometry(hash_slot_num, index_num)
    size = index_file_size(hash_slot_num, index_num)
    if len(buf) != size:
        raise CorruptIndexError(f"index buffer is {len(buf)} bytes, geometry {hash_slot_num}x{index_num} needs {size}")
    if header.shape != (6,) or header.dtype != np.int64:
        raise InvalidArgumentError("header must be an int64 array of 6 fields")
    if not 1 <= int(header[5]) <= index_num or int(header[4]) < 0:
        raise CorruptIndexError(f"index header counts out of range (hashSlotCount {header[4]}, indexCount {header[5]})")


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
    w = _word_view(buf)
    if w is not None:
        return int(_bulk_put_words(w, np.int64(hash_slot_num), np.int64(index_num), header, kh, phy, ts, np.int64(start)))
    return int(_bulk_put_kernel(buf, np.int64(hash_slot_num), np.int64(index_num), header, kh, phy, ts, np.int64(start)))


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


# ----------------------------------------------------------------------------- batch chain walk
_LANES = 16
_SELECT_LANES = 32  # lanes of the word-view batch walk (see below)
_THREAD_MIN_KEYS = 1 << 13
_WORDS_MIN_KEYS = 32
_CPUS = os.cpu_count() or 1


@njit(cache=True, nogil=True)
def _touch_chains(buf, slots, index_num, ic, key_hashes, a, b, curs, nbuf):  # fmt: skip
    """Walk the chains of keys ``a..b`` side by side, one step of every chain per round, only
    reading the items: the loads of different chains are independent, so their cache misses
    overlap instead of queueing behind each other.  The exact walk that follows hits the cache.
    A pure prefetch: its result is never used (bounded steps, every read inside the buffer)."""
    items_base = 40 + slots * 4
    live = 0
    for j in range(b - a):
        h = np.int64(key_hashes[a + j])
        s = h % slots
        if s < 0:
            s += slots
        sv = rd_i32(buf, 40 + s * 4)
        curs[j] = sv if (0 < sv <= ic and ic > 1) else 0
        if curs[j] > 0:
            live += 1
    steps = 0
    while live > 0 and steps < 64:
        live = 0
        for j in range(b - a):
            cur = curs[j]
            if cur <= 0:
                continue
            ip = items_base + cur * 20
            if cur >= index_num or ip + 20 > nbuf:
                curs[j] = 0
                continue
            prev = rd_i32(buf, ip + 16)
            if prev <= 0 or prev > ic or prev == cur:
                curs[j] = 0
            else:
                curs[j] = prev
                live += 1
        steps += 1


@njit(cache=True, nogil=True)
def _select_kernel(buf, slots, index_num, header, key_hashes, max_num, begin, end, states):  # fmt: skip
    begin_ts = header[0]
    ic = header[5]
    items_base = 40 + slots * 4
    n = key_hashes.shape[0]
    splits = np.zeros(n + 1, np.int64)
    cap = max(16, n * 4)
    out = np.empty(cap, np.int64)
    k = 0
    curs = np.empty(_LANES, np.int64)
    nbuf = buf.shape[0]
    for r in range(n):
        if r % _LANES == 0:
            _touch_chains(buf, slots, index_num, ic, key_hashes, r, min(n, r + _LANES), curs, nbuf)
        states[r] = SELECT_OK
        h = np.int64(key_hashes[r])
        s = h % slots
        if s < 0:
            s += slots
        sv = rd_i32(buf, 40 + s * 4)
        if not (sv <= 0 or sv > ic or ic <= 1):
            cur = sv
            got = 0
            steps = 0
            while True:
                if got >= max_num:
                    break
                if cur >= index_num:
                    states[r] = SELECT_OUT_OF_FILE
                    break
                ip = items_base + cur * 20
                hash_read = rd_i32(buf, ip)
                phy_read = rd_i64(buf, ip + 4)
                diff = rd_i32(buf, ip + 12)
                prev = rd_i32(buf, ip + 16)
                if diff < 0:
                    break
                time_read = begin_ts + diff * 1000
                if hash_read == h and begin <= time_read <= end:
                    if k >= cap:
                        cap *= 2
                        bigger = np.empty(cap, np.int64)
                        bigger[:k] = out[:k]
                        out = bigger
                    out[k] = phy_read
                    k += 1
                    got += 1
                if prev <= 0 or prev > ic or prev == cur or time_read < begin:
                    break
                cur = prev
                steps += 1
                if steps > ic:
                    states[r] = SELECT_CYCLE
                    break
        splits[r + 1] = k
    return out[:k].copy(), splits


def _check_select(buf: np.ndarray, hash_slot_num: int, index_num: int, header: np.ndarray) -> None:
    check_geometry(hash_slot_num, index_num)
    size = index_file_size(hash_slot_num, index_num)
    if len(buf) != size:
        raise CorruptIndexError(f"index buffer is {len(buf)} bytes, geometry {hash_slot_num}x{index_num} needs {size}")
    if header.shape != (6,) or header.dtype != np.int64:
        raise InvalidArgumentError("header must be an int64 array of 6 fields")


def select_many(
    buf_u8: object,
    hash_slot_num: int,
    index_num: int,
    header: np.ndarray,
    key_hashes: np.ndarray,
    max_num: int,
    begin: int,
    end: int,
    *,
    on_corrupt: str = "raise",
    threads: int | None = None,
    lanes: int = _SELECT_LANES,
    words: bool = True,
    sort_slots: bool = False,
) -> tuple[np.ndarray, np.ndarray]:
    """``selectPhyOffset`` for many key hashes at once, each with a fresh list.

    Returns ``(offsets, splits)``: the candidates of key ``i`` are ``offsets[splits[i]:splits[i+1]]``
    (newest first).  A chain that loops (more than ``index_count`` steps) or points past the end of
    the file is corrupt: ``on_corrupt="raise"`` raises :class:`CorruptIndexError` (as the reference
    does for a loop), ``"stop"`` keeps what was found before the fault.

    On a little-endian host the keys are walked in slot order on the ``uint32`` view, ``lanes``
    chains touched side by side, split over ``threads`` threads (default: 2 from 8,192 keys on a
    machine with 2+ CPUs); ``words=False`` forces the byte-level kernel (same answers)."""
    buf = as_u8(buf_u8)
    _check_select(buf, hash_slot_num, index_num, header)
    kh = np.ascontiguousarray(key_hashes, np.int32)
    states = np.zeros(len(kh), np.int8)
    if lanes < 1:
        raise InvalidArgumentError("lanes must be positive")
    # a handful of keys: the byte kernel has less set-up per call
    w = _word_view(buf) if words and (threads is not None or len(kh) >= _WORDS_MIN_KEYS) else None
    if w is not None:
        if threads is None:
            threads = 2 if len(kh) >= _THREAD_MIN_KEYS and _CPUS >= 2 else 1
        offsets, splits = _select_words(w, hash_slot_num, index_num, header, kh, max_num, begin, end, states,
                                        max(1, int(threads)), int(lanes), sort_slots)  # fmt: skip
    else:
        offsets, splits = _select_kernel(
            buf, np.int64(hash_slot_num), np.int64(index_num), header, kh, np.int64(max_num), np.int64(begin),
            np.int64(end), states,
        )  # fmt: skip
    if on_corrupt == "raise" and states.any():
        bad = int(np.flatnonzero(states)[0])
        slot = int(kh[bad]) % hash_slot_num
        what = "has a cycle" if states[bad] == SELECT_CYCLE else "points past the end of the file"
        raise CorruptIndexError(f"index chain from slot {slot} {what}")
    return offsets, splits


def select_many_py(
    buf_u8: object,
    hash_slot_num: int,
    index_num: int,
    header: np.ndarray,
    key_hashes: np.ndarray,
    max_num: int,
    begin: int,
    end: int,
) -> tuple[np.ndarray, np.ndarray]:
    """Pure-Python twin of :func:`select_many`: ``IndexFileBuffer.select_by_hash`` per key."""
    buf = as_u8(buf_u8)
    _check_select(buf, hash_slot_num, index_num, header)
    f = IndexFileBuffer(memoryview(buf), hash_slot_num, index_num, load=False)
    f.header = IndexHeader(*(int(v) for v in header))
    offsets: list[int] = []
    splits = [0]
    for h in np.asarray(key_hashes).tolist():
        out: list[int] = []
        f.select_by_hash(out, int(h), max_num, begin, end)
        offsets += out
        splits.append(len(offsets))
    return np.array(offsets, np.int64), np.array(splits, np.int64)


# ----------------------------------------------------------------------------- single-key walk
# One compiled call per IndexFile answers one query: the key's hash is finished from the cached
# state of ``topic#`` over the key's ASCII bytes, then the chain is walked on the word view.
SELECT_ONE_CYCLE = -1  # the chain revisits items (corrupt file)
SELECT_ONE_ROOM = -2  # ``out`` filled up before ``max_num``: call again with a larger ``out``


@njit(cache=True, nogil=True)
def select_one(w, slots, index_num, begin_ts, ic, prefix, kb, key_hash, max_num, begin, end, out):  # fmt: skip
    """``selectPhyOffset`` of one key on the native ``uint32`` view ``w`` of an IndexFile.

    ``begin_ts``/``ic`` are the header's beginTimestamp and indexCount.  With ``key_hash < 0`` the
    hash is ``indexKeyHashMethod`` of the key whose Java hash state after ``topic#`` is ``prefix``
    (unsigned) continued over the ASCII bytes ``kb``; otherwise ``key_hash`` is used as is.
    Writes the offsets (newest first) to ``out`` and returns how many, or a negative
    ``SELECT_ONE_*`` code.  Same rules as ``IndexFileBuffer.select_by_hash``."""
    if key_hash < 0:
        u = prefix
        for i in range(len(kb)):
            u = (u * 31 + kb[i]) & 0xFFFFFFFF
        h = u - 0x100000000 if u >= 0x80000000 else u
        if h < 0:
            h = -h
        if h > 0x7FFFFFFF:
            h = 0
    else:
        h = key_hash
    if max_num <= 0:
        return 0
    last_item = min(ic, index_num - 1)
    sv = _w_i32(w, 10 + h % slots)
    if sv <= 0 or sv > last_item or ic <= 1:
        return 0
    items_w = 10 + slots
    cap = out.shape[0]
    n = 0
    cur = sv
    steps = 0
    while True:
        if n >= max_num:
            return n
        iw = items_w + cur * 5
        diff = _w_i32(w, iw + 3)
        if diff < 0:
            return n
        prev = _w_i32(w, iw + 4)
        time_read = begin_ts + diff * 1000
        if _w_i32(w, iw) == h and begin <= time_read <= end:
            if n >= cap:
                return SELECT_ONE_ROOM
            out[n] = _w_i64(w, iw + 1)
            n += 1
        if prev <= 0 or prev > last_item or prev == cur or time_read < begin:
            return n
        cur = prev
        steps += 1
        if steps > ic:
            return SELECT_ONE_CYCLE


def word_view(buf_u8: object) -> np.ndarray | None:
    """The native ``uint32`` view :func:`select_one` walks (None on a big-endian host or an
    unaligned buffer: callers then use the reference walk)."""
    return _word_view(as_u8(buf_u8))


def hash_prefix_state(text: str) -> int:
    """The unsigned Java ``hashCode`` state after ``text`` (``topic#``), for :func:`select_one`."""
    from mqstore.formats.rocketmq.javahash import java_string_hashcode

    return java_string_hashcode(text) & 0xFFFFFFFF


# ----------------------------------------------------------------------------- batch walk, word view
# The batch walk of :func:`select_many` on the native ``uint32`` view: keys are visited in slot order
# (the slot reads then go through the slot table in address order), chains of ``lanes`` keys are
# first touched side by side (their cache misses overlap), and each key's offsets land in a
# scratch buffer that a final pass gathers into per-key order.  A range of the slot order is one
# task: two threads can walk two halves at once (the kernels release the GIL).


@njit(cache=True, nogil=True)
def _touch_words(w, slots, ic, hashes, order, a, b, curs):  # fmt: skip
    items_w = 10 + slots
    nw = w.shape[0]
    live = 0
    for j in range(b - a):  # the group's slot loads all in flight before the first is used
        h = np.int64(hashes[order[a + j]])
        s = h % slots
        if s < 0:
            s += slots
        curs[j] = 10 + s
        prefetch(w, 10 + s)
    for j in range(b - a):
        sv = _w_i32(w, curs[j])
        curs[j] = sv if (0 < sv <= ic and ic > 1) else 0
        if curs[j] > 0:
            live += 1
            iw = items_w + curs[j] * 5
            if iw + 5 <= nw:
                prefetch(w, iw)
    steps = 0
    while live > 0 and steps < 64:
        live = 0
        for j in range(b - a):
            cur = curs[j]
            if cur <= 0:
                continue
            iw = items_w + cur * 5
            if iw + 5 > nw:
                curs[j] = 0
                continue
            prev = _w_i32(w, iw + 4)
            if prev <= 0 or prev > ic or prev == cur:
                curs[j] = 0
            else:
                curs[j] = prev
                live += 1
                if items_w + prev * 5 + 5 <= nw:
                    prefetch(w, items_w + prev * 5)
        steps += 1


@njit(cache=True, nogil=True)
def _select_words_range(w, slots, index_num, begin_ts, ic, hashes, order, a, b, max_num, begin, end, starts, counts,
                        states, lanes):  # fmt: skip
    """Walk the keys ``order[a:b]``; returns the scratch offsets (``starts``/``counts`` per key
    index into it).  Same rules as ``_select_kernel``."""
    items_w = 10 + slots
    cap = max(16, (b - a) * 2)
    out = np.empty(cap, np.int64)
    k = 0
    curs = np.empty(lanes, np.int64)
    for r in range(a, b):
        if (r - a) % lanes == 0:
            _touch_words(w, slots, ic, hashes, order, r, min(b, r + lanes), curs)
        key = order[r]
        states[key] = SELECT_OK
        starts[key] = k
        h = np.int64(hashes[key])
        s = h % slots
        if s < 0:
            s += slots
        sv = _w_i32(w, 10 + s)
        if not (sv <= 0 or sv > ic or ic <= 1):
            cur = sv
            got = 0
            steps = 0
            while True:
                if got >= max_num:
                    break
                if cur >= index_num:
                    states[key] = SELECT_OUT_OF_FILE
                    break
                iw = items_w + cur * 5
                diff = _w_i32(w, iw + 3)
                prev = _w_i32(w, iw + 4)
                if diff < 0:
                    break
                time_read = begin_ts + diff * 1000
                if _w_i32(w, iw) == h and begin <= time_read <= end:
                    if k >= cap:
                        cap *= 2
                        bigger = np.empty(cap, np.int64)
                        bigger[:k] = out[:k]
                        out = bigger
                    out[k] = _w_i64(w, iw + 1)
                    k += 1
                    got += 1
                if prev <= 0 or prev > ic or prev == cur or time_read < begin:
                    break
                cur = prev
                steps += 1
                if steps > ic:
                    states[key] = SELECT_CYCLE
                    break
        counts[key] = k - starts[key]
    return out[:k]


@njit(cache=True, nogil=True)
def _gather_csr(scratch, starts, counts, splits, out):  # fmt: skip
    n = counts.shape[0]
    for i in range(n):
        d = splits[i]
        s = starts[i]
        for j in range(counts[i]):
            out[d + j] = scratch[s + j]


def _select_words(w: np.ndarray, hash_slot_num: int, index_num: int, header: np.ndarray, kh: np.ndarray, max_num: int,
                  begin: int, end: int, states: np.ndarray, threads: int, lanes: int,
                  sort_slots: bool) -> tuple[np.ndarray, np.ndarray]:  # fmt: skip
    n = len(kh)
    slots64 = np.int64(hash_slot_num)
    if sort_slots and n > 1:
        order = np.argsort(kh.astype(np.int64) % hash_slot_num, kind="stable")
    else:
        order = np.arange(n, dtype=np.int64)
    starts = np.zeros(n, np.int64)
    counts = np.zeros(n, np.int64)
    args = (np.int64(index_num), np.int64(header[0]), np.int64(header[5]), kh, order)
    tail = (np.int64(max_num), np.int64(begin), np.int64(end), starts, counts, states, np.int64(lanes))
    if threads > 1 and n >= 2:
        cuts = [n * t // threads for t in range(threads + 1)]
        parts = run_parallel(_select_words_range, [(w, slots64, *args, np.int64(cuts[t]), np.int64(cuts[t + 1]), *tail)
                                                   for t in range(threads)])
        base = 0
        for t, part in enumerate(parts):
            if base:
                starts[order[cuts[t] : cuts[t + 1]]] += base
            base += len(part)
        scratch = np.concatenate(parts)
    else:
        scratch = _select_words_range(w, slots64, *args, np.int64(0), np.int64(n), *tail)
    splits = np.zeros(n + 1, np.int64)
    np.cumsum(counts, out=splits[1:])
    if not sort_slots or n < 2:  # keys walked in key order: the scratch already is the CSR column
        return scratch, splits
    out = np.empty(len(scratch), np.int64)
    _gather_csr(scratch, starts, counts, splits, out)
    return out, splits


# ----------------------------------------------------------------------------- batch key hashing
@njit(cache=True, nogil=True)
def _hash_prefixed_kernel(buf, starts, lengths, prefix, out):  # fmt: skip
    for i in range(starts.shape[0]):
        u = prefix
        p = starts[i]
        for j in range(lengths[i]):
            u = (u * 31 + buf[p + j]) & 0xFFFFFFFF
        h = u - 0x100000000 if u >= 0x80000000 else u
        if h < 0:
            h = -h
        out[i] = 0 if h > 0x7FFFFFFF else h


def index_hash_keys(topic: str, keys: list[str]) -> np.ndarray:
    """IndexFile hashes (``int32``) of ``topic#key`` for many keys: one join and one encode for
    all ASCII keys, the hash continued from the cached state of ``topic#`` in one kernel pass.
    Non-ASCII keys take :func:`~mqstore.kernels.javahash.index_hash_strings` (its twin).
    Raises ``TypeError`` when a key is not a string."""
    joined = "".join(keys)
    if not joined.isascii():
        from mqstore.kernels.javahash import index_hash_strings

        return index_hash_strings([f"{topic}#{k}" for k in keys])
    buf = np.frombuffer(joined.encode("ascii"), np.uint8)
    lengths = np.fromiter(map(len, keys), np.int64, len(keys))
    starts = np.cumsum(lengths) - lengths
    out = np.empty(len(keys), np.int32)
    if len(buf) == 0:
        buf = np.zeros(1, np.uint8)
    _hash_prefixed_kernel(buf, starts, lengths, np.int64(hash_prefix_state(f"{topic}#")), out)
    return out


# ----------------------------------------------------------------------------- batch walk, keys as text
# The store-level batch query hands over the keys as one ``\0``-joined ASCII buffer: the key
# boundaries are found in one compiled pass and each thread hashes its own range of keys (from the
# state of ``topic#``) right before walking it, so hashing runs on the same threads as the walk.
@njit(cache=True, nogil=True)
def _key_bounds(kbuf, n, starts):  # fmt: skip
    """``starts[i]`` = first byte of key ``i`` in the ``\\0``-joined ``kbuf``, ``starts[n]`` = one
    past the end plus one; returns the number of keys found (``n`` unless a key holds ``\\0``)."""
    k = 1
    starts[0] = 0
    for p in range(kbuf.shape[0]):
        if kbuf[p] == 0:
            if k < n:
                starts[k] = p + 1
            k += 1
    starts[n] = kbuf.shape[0] + 1
    return k


@njit(cache=True, nogil=True, inline="always")
def _hash_bounded(kbuf, starts, prefix, a, b, out):  # fmt: skip
    for i in range(a, b):
        u = prefix
        for p in range(starts[i], starts[i + 1] - 1):
            u = (u * 31 + kbuf[p]) & 0xFFFFFFFF
        h = u - 0x100000000 if u >= 0x80000000 else u
        if h < 0:
            h = -h
        out[i] = 0 if h > 0x7FFFFFFF else h


@njit(cache=True, nogil=True)
def _hash_select_range(w, slots, index_num, begin_ts, ic, kbuf, kstarts, prefix, hashes, order, a, b, max_num, begin,
                       end, starts, counts, states, lanes):  # fmt: skip
    """Hash keys ``a..b`` into ``hashes``, then walk them (``order`` is the identity)."""
    _hash_bounded(kbuf, kstarts, prefix, a, b, hashes)
    return _select_words_range(w, slots, index_num, begin_ts, ic, hashes, order, a, b, max_num, begin, end, starts,
                               counts, states, lanes)  # fmt: skip


def join_keys_ascii(keys: list[str]) -> tuple[np.ndarray, np.ndarray] | None:
    """``(kbuf, starts)`` of ASCII keys joined by ``\\0`` (see :func:`select_many_text`), or None
    when a key is not ASCII or holds ``\\0`` (then hash with :func:`index_hash_keys`).  Raises
    ``TypeError`` when a key is not a string."""
    n = len(keys)
    joined = "\0".join(keys)
    if not joined.isascii():
        return None
    kbuf = np.frombuffer(joined.encode("ascii"), np.uint8) if joined else np.zeros(0, np.uint8)
    starts = np.empty(n + 1, np.int64)
    if n and _key_bounds(kbuf, np.int64(n), starts) != n:
        return None
    return kbuf, starts


def select_many_text(
    buf_u8: object,
    hash_slot_num: int,
    index_num: int,
    header: np.ndarray,
    prefix: int,
    kbuf: np.ndarray,
    kstarts: np.ndarray,
    max_num: int,
    begin: int,
    end: int,
    *,
    threads: int | None = None,
    lanes: int = _SELECT_LANES,
    on_corrupt: str = "raise",
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """:func:`select_many` of keys given as text (:func:`join_keys_ascii`) whose Java hash is
    continued from ``prefix`` (:func:`hash_prefix_state` of ``topic#``): each thread hashes its
    keys, then walks them.  Returns ``(offsets, splits, hashes)``; the offsets are written in key
    order directly (no gather pass).  Same answers as hashing with :func:`index_hash_keys` and
    calling :func:`select_many` (its twin)."""
    buf = as_u8(buf_u8)
    _check_select(buf, hash_slot_num, index_num, header)
    n = len(kstarts) - 1
    hashes = np.empty(n, np.int32)
    w = _word_view(buf)
    if w is None or n < 1:  # big-endian host (or nothing to do): hash here, then the reference kernels
        if n:
            _hash_bounded_py(kbuf, kstarts, prefix, hashes)
        offsets, splits = select_many(buf, hash_slot_num, index_num, header, hashes, max_num, begin, end,
                                      on_corrupt=on_corrupt)  # fmt: skip
        return offsets, splits, hashes
    if lanes < 1:
        raise InvalidArgumentError("lanes must be positive")
    if threads is None:
        threads = 2 if n >= _THREAD_MIN_KEYS and _CPUS >= 2 else 1
    threads = max(1, min(int(threads), n))
    states = np.zeros(n, np.int8)
    order = np.arange(n, dtype=np.int64)
    starts = np.empty(n, np.int64)
    counts = np.empty(n, np.int64)
    head = (w, np.int64(hash_slot_num), np.int64(index_num), np.int64(header[0]), np.int64(header[5]), kbuf, kstarts,
            np.int64(prefix), hashes, order)  # fmt: skip
    tail = (np.int64(max_num), np.int64(begin), np.int64(end), starts, counts, states, np.int64(lanes))
    if threads > 1:
        cuts = [n * t // threads for t in range(threads + 1)]
        parts = run_parallel(_hash_select_range, [(*head, np.int64(cuts[t]), np.int64(cuts[t + 1]), *tail)
                                                  for t in range(threads)])  # fmt: skip
        offsets = np.concatenate(parts)
    else:
        offsets = _hash_select_range(*head, np.int64(0), np.int64(n), *tail)
    splits = np.empty(n + 1, np.int64)
    splits[0] = 0
    np.cumsum(counts, out=splits[1:])
    if on_corrupt == "raise" and states.any():
        bad = int(np.flatnonzero(states)[0])
        slot = int(hashes[bad]) % hash_slot_num
        what = "has a cycle" if states[bad] == SELECT_CYCLE else "points past the end of the file"
        raise CorruptIndexError(f"index chain from slot {slot} {what}")
    return offsets, splits, hashes


def _hash_bounded_py(kbuf: np.ndarray, kstarts: np.ndarray, prefix: int, out: np.ndarray) -> None:
    raw = kbuf.tobytes()
    st = kstarts.tolist()
    for i in range(len(st) - 1):
        u = prefix
        for c in raw[st[i] : st[i + 1] - 1]:
            u = (u * 31 + c) & 0xFFFFFFFF
        h = u - 0x100000000 if u >= 0x80000000 else u
        h = -h if h < 0 else h
        out[i] = 0 if h > 0x7FFFFFFF else h


# ----------------------------------------------------------------------------- single key, every file
# One compiled call answers ``IndexService.queryOffset`` over all the IndexFiles: the files are
# handed over as a small ``int64`` table of (address, words) of their cached ``uint32`` views,
# newest first, and each file's header (beginTimestamp, endTimestamp, indexCount) is read from its
# mapping, which every writer path updates in step with the in-memory header.  The caller keeps
# the views alive for the duration of the call.
@intrinsic
def _u32_ptr(typingctx, addr):  # type: ignore[no-untyped-def]
    """An ``int64`` address as a ``uint32*`` (for ``numba.carray``)."""
    if not isinstance(addr, types.Integer):
        return None
    ptr_t = types.CPointer(types.uint32)

    def codegen(context, builder, signature, args):  # type: ignore[no-untyped-def]
        return builder.inttoptr(args[0], context.get_value_type(ptr_t))

    return ptr_t(addr), codegen


SELECT_FILES_CYCLE = -16  # ``-16 - i``: the chain in file ``i`` of the table (newest first) loops


@njit(cache=True, nogil=True)
def select_files(files, seed, kb, max_num, begin, end, out):  # fmt: skip
    """``IndexService.queryOffset(...).phyOffsets`` of one key over every file of ``files``
    (rows ``[address, words, hash_slot_num, index_num]`` of the files' ``uint32`` views, newest
    first).  ``seed < 0``: the key's hash is the Java hash state ``~seed`` (of ``topic#``)
    continued over the ASCII bytes ``kb``; ``seed >= 0``: it is the hash.  Writes the offsets to
    ``out`` and returns their number, ``SELECT_ONE_ROOM`` when ``out`` is too small, or
    ``SELECT_FILES_CYCLE - i`` for a looping chain in file ``i``."""
    if seed < 0:
        u = ~seed
        for i in range(len(kb)):
            u = (u * 31 + kb[i]) & 0xFFFFFFFF
        h = u - 0x100000000 if u >= 0x80000000 else u
        if h < 0:
            h = -h
        if h > 0x7FFFFFFF:
            h = 0
    else:
        h = seed
    cap = out.shape[0]
    n = 0
    for f in range(files.shape[0]):
        w = carray(_u32_ptr(files[f, 0]), (files[f, 1],))
        slots = files[f, 2]
        index_num = files[f, 3]
        fb = _w_i64(w, 0)
        fe = _w_i64(w, 2)
        ic = _w_i32(w, 9)
        if (begin < fb and end > fe) or (fb <= begin <= fe) or (fb <= end <= fe):
            last_item = min(ic, index_num - 1)
            sv = _w_i32(w, 10 + h % slots)
            if n < max_num and not (sv <= 0 or sv > last_item or ic <= 1):
                items_w = 10 + slots
                cur = sv
                steps = 0
                while True:
                    if n >= max_num:
                        break
                    iw = items_w + cur * 5
                    diff = _w_i32(w, iw + 3)
                    if diff < 0:
                        break
                    prev = _w_i32(w, iw + 4)
                    time_read = fb + diff * 1000
                    if _w_i32(w, iw) == h and begin <= time_read <= end:
                        if n >= cap:
                            return SELECT_ONE_ROOM
                        out[n] = _w_i64(w, iw + 1)
                        n += 1
                    if prev <= 0 or prev > last_item or prev == cur or time_read < begin:
                        break
                    cur = prev
                    steps += 1
                    if steps > ic:
                        return SELECT_FILES_CYCLE - f
        if fb < begin or n >= max_num:
            break
    return n
