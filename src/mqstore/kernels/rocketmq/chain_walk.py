"""IndexFile queries (numba): one chain-walk core under the single-key, multi-file and batch walks.

A key's hash picks a slot (``hash % slots``); the slot holds the number of the newest item of that
slot's chain, and each 20-byte item (hash, phyOffset, timeDiff, prevIndex) links to the previous
one.  :func:`walk_chain` follows one chain with the rules of ``IndexFileBuffer.select_by_hash``
(spec 3.7): item numbers outside ``[1, limit]`` or pointing to themselves end it, an item older
than the window ends it, a chain longer than ``indexCount`` steps is a cycle (corrupt file), an
item number past the end of the file is corrupt too.  Everything else here drives it:

* :func:`select_one` – one key on one file (``IndexService.queryOffset`` per file);
* :func:`select_files` – one key over every file, newest first, in one call;
* :func:`select_many` / :func:`select_many_text` – many keys on one file: the keys are walked in
  groups of ``lanes`` whose chains are first *touched* in lock-step (:func:`touch_chains`: one step
  of every chain per round, with ``llvm.prefetch``), so the cache misses of different chains
  overlap; optionally in slot order and on two threads.

The core reads the file through the accessors of :mod:`.index_view`, resolved at compile time by
the view's type (the native ``uint32`` view or the bytes): the same walk is compiled for both.  Twins: :func:`select_many_py` (``IndexFileBuffer.select_by_hash`` per
key) and the ``*_py`` functions built on it.
"""

from __future__ import annotations

import os
from typing import NamedTuple

import numpy as np
from numba import carray, njit

from mqstore.errors import CorruptIndexError, InvalidArgumentError
from mqstore.formats.rocketmq.indexfile import IndexFileBuffer, IndexHeader, check_geometry, index_file_size
from mqstore.kernels.endian import as_u8, w_i32, w_i64, word_view
from mqstore.kernels.intrinsics import u32_ptr
from mqstore.kernels.javahash import hash_joined_py
from mqstore.kernels.javahash_nb import hash_joined_range, index_hash_span
from mqstore.kernels.registry import register
from mqstore.kernels.rocketmq import chain_select as _chain_select
from mqstore.kernels.rocketmq.index_build import H_BEGIN_TS, H_INDEX_COUNT
from mqstore.kernels.rocketmq.index_view_nb import (
    HEADER_WORDS,
    ITEM_WORDS,
    item_i32,
    item_i64,
    n_words,
    touch,
)
from mqstore.kernels.threads import run_parallel

# per-key states of the batch walks
SELECT_OK = 0
SELECT_CYCLE = 1  # the chain revisits items: corrupt file
SELECT_OUT_OF_FILE = 2  # an item number points past the end of the file: corrupt header/slot

# results of the single-key walks (a count >= 0 otherwise)
SELECT_ONE_CYCLE = -1  # the chain revisits items (corrupt file)
SELECT_ONE_ROOM = -2  # ``out`` filled up before ``max_num``: call again with a larger ``out``
SELECT_FILES_CYCLE = -16  # ``-16 - i``: the chain in file ``i`` of the table (newest first) loops

# status of walk_chain
WALK_OK = 0
WALK_CYCLE = 1
WALK_OUT_OF_FILE = 2
WALK_ROOM = 3  # ``out`` is full: grow it and walk the chain again



# ----------------------------------------------------------------------------- the core
@njit(cache=True, nogil=True, inline="always")
def walk_chain(a, slots, index_num, begin_ts, ic, limit, h, max_num, begin, end, out, k):  # fmt: skip
    """Walk the chain of the key hash ``h`` in the file view ``a`` (``slots``/``index_num`` its
    geometry, ``begin_ts``/``ic`` its header's beginTimestamp and indexCount, ``limit`` the last
    item number a link may name) and write the phyOffsets of the items whose hash is ``h`` and
    whose time lies in ``[begin, end]``, newest first, to ``out[k:]``, at most ``max_num``.

    Returns ``(found, WALK_*)``; ``WALK_ROOM`` when ``out`` filled up (what was written is valid,
    the caller grows ``out`` and walks again)."""
    s = h % slots
    if s < 0:
        s += slots
    sv = item_i32(a, HEADER_WORDS + s)
    if sv <= 0 or sv > limit or ic <= 1:
        return 0, WALK_OK
    items_w = HEADER_WORDS + slots
    cap = out.shape[0]
    got = 0
    cur = sv
    steps = 0
    while True:
        if got >= max_num:
            return got, WALK_OK
        if cur >= index_num:
            return got, WALK_OUT_OF_FILE
        iw = items_w + cur * ITEM_WORDS
        diff = item_i32(a, iw + 3)
        if diff < 0:
            return got, WALK_OK
        prev = item_i32(a, iw + 4)
        time_read = begin_ts + diff * 1000
        if item_i32(a, iw) == h and begin <= time_read <= end:
            if k + got >= cap:
                return got, WALK_ROOM
            out[k + got] = item_i64(a, iw + 1)
            got += 1
        if prev <= 0 or prev > limit or prev == cur or time_read < begin:
            return got, WALK_OK
        cur = prev
        steps += 1
        if steps > ic:
            return got, WALK_CYCLE


@njit(cache=True, nogil=True, inline="always")
def _grow(out: np.ndarray, k: int) -> np.ndarray:
    bigger = np.empty(max(16, 2 * out.shape[0]), np.int64)
    bigger[:k] = out[:k]
    return bigger


@njit(cache=True, nogil=True)
def touch_chains(a, slots, ic, hashes, order, lo, hi, curs):  # fmt: skip
    """Lock-step prefetch of the chains of keys ``order[lo:hi]``: the group's slot loads all in
    flight before the first is used, then one step of every chain per round (at most 64), each
    next item prefetched.  The loads of different chains are independent, so their cache misses
    overlap instead of queueing; the exact walk that follows hits the cache.  Its result is never
    used (bounded steps, every read inside the view)."""
    items_w = HEADER_WORDS + slots
    nw = n_words(a)
    live = 0
    for j in range(hi - lo):
        h = np.int64(hashes[order[lo + j]])
        s = h % slots
        if s < 0:
            s += slots
        curs[j] = HEADER_WORDS + s
        touch(a, HEADER_WORDS + s)
    for j in range(hi - lo):
        sv = item_i32(a, curs[j])
        curs[j] = sv if (0 < sv <= ic and ic > 1) else 0
        if curs[j] > 0:
            live += 1
            iw = items_w + curs[j] * ITEM_WORDS
            if iw + ITEM_WORDS <= nw:
                touch(a, iw)
    steps = 0
    while live > 0 and steps < 64:
        live = 0
        for j in range(hi - lo):
            cur = curs[j]
            if cur <= 0:
                continue
            iw = items_w + cur * ITEM_WORDS
            if iw + ITEM_WORDS > nw:
                curs[j] = 0
                continue
            prev = item_i32(a, iw + 4)
            if prev <= 0 or prev > ic or prev == cur:
                curs[j] = 0
            else:
                curs[j] = prev
                live += 1
                if items_w + prev * ITEM_WORDS + ITEM_WORDS <= nw:
                    touch(a, items_w + prev * ITEM_WORDS)
        steps += 1


# ----------------------------------------------------------------------------- many keys, one file
class FileView(NamedTuple):
    """The geometry and header counts of one IndexFile, as the batch walk reads them."""

    slots: int
    index_num: int
    begin_ts: int
    ic: int


class Window(NamedTuple):
    """The query: at most ``max_num`` offsets per key, store times in ``[begin, end]``."""

    max_num: int
    begin: int
    end: int


class KeySlots(NamedTuple):
    """Per key (indexed by key number): where its offsets start in the scratch, how many, state."""

    starts: np.ndarray
    counts: np.ndarray
    states: np.ndarray


@njit(cache=True, nogil=True)
def select_range(a, f, hashes, order, lo, hi, q, res, lanes):  # fmt: skip
    """Walk the keys ``order[lo:hi]`` of the file view ``a``, ``lanes`` chains touched side by
    side before they are walked; returns the scratch of offsets (``res.starts``/``res.counts`` per
    key index into it)."""
    slots, index_num, begin_ts, ic = f
    max_num, begin, end = q
    starts, counts, states = res
    out = np.empty(max(16, (hi - lo) * 2), np.int64)
    k = 0
    curs = np.empty(lanes, np.int64)
    for r in range(lo, hi):
        if (r - lo) % lanes == 0:
            touch_chains(a, slots, ic, hashes, order, r, min(hi, r + lanes), curs)
        key = order[r]
        starts[key] = k
        h = np.int64(hashes[key])
        while True:
            got, st = walk_chain(a, slots, index_num, begin_ts, ic, ic, h, max_num, begin, end, out, k)
            if st != WALK_ROOM:
                break
            out = _grow(out, k)
        states[key] = SELECT_CYCLE if st == WALK_CYCLE else SELECT_OUT_OF_FILE if st == WALK_OUT_OF_FILE else SELECT_OK
        k += got
        counts[key] = got
    return out[:k]


@njit(cache=True, nogil=True)
def _select_few(a, slots, index_num, begin_ts, ic, hashes, max_num, begin, end, states):  # fmt: skip
    """The walk of a handful of keys in key order, with plain arguments and no lock-step touch:
    a lookup of one key spends its time in call set-up, not in the walk.  ``(offsets, splits)``."""
    n = hashes.shape[0]
    splits = np.zeros(n + 1, np.int64)
    out = np.empty(max(16, n * 4), np.int64)
    k = 0
    for r in range(n):
        h = np.int64(hashes[r])
        while True:
            got, st = walk_chain(a, slots, index_num, begin_ts, ic, ic, h, max_num, begin, end, out, k)
            if st != WALK_ROOM:
                break
            out = _grow(out, k)
        states[r] = SELECT_CYCLE if st == WALK_CYCLE else SELECT_OUT_OF_FILE if st == WALK_OUT_OF_FILE else SELECT_OK
        k += got
        splits[r + 1] = k
    return out[:k].copy(), splits


@njit(cache=True, nogil=True)
def _gather_csr(scratch, starts, counts, splits, out):  # fmt: skip
    n = counts.shape[0]
    for i in range(n):
        d = splits[i]
        s = starts[i]
        for j in range(counts[i]):
            out[d + j] = scratch[s + j]


_SELECT_LANES = 32  # lanes of the word-view batch walk
_BYTE_LANES = 16  # lanes of the byte-view walk
_THREAD_MIN_KEYS = 1 << 13
_WORDS_MIN_KEYS = 32
_CPUS = os.cpu_count() or 1


def _check_select(buf: np.ndarray, hash_slot_num: int, index_num: int, header: np.ndarray) -> None:
    check_geometry(hash_slot_num, index_num)
    size = index_file_size(hash_slot_num, index_num)
    if len(buf) != size:
        raise CorruptIndexError(f"index buffer is {len(buf)} bytes, geometry {hash_slot_num}x{index_num} needs {size}")
    if header.shape != (6,) or header.dtype != np.int64:
        raise InvalidArgumentError("header must be an int64 array of 6 fields")


def _file_view(hash_slot_num: int, index_num: int, header: np.ndarray) -> FileView:
    return FileView(np.int64(hash_slot_num), np.int64(index_num), np.int64(header[H_BEGIN_TS]),
                    np.int64(header[H_INDEX_COUNT]))  # fmt: skip


def _walk_keys(a: np.ndarray, f: FileView, kh: np.ndarray, q: Window, states: np.ndarray, threads: int, lanes: int,
               sort_slots: bool) -> tuple[np.ndarray, np.ndarray]:  # fmt: skip
    n = len(kh)
    if sort_slots and n > 1:
        order = np.argsort(kh.astype(np.int64) % int(f.slots), kind="stable")
    else:
        order = np.arange(n, dtype=np.int64)
    res = KeySlots(np.zeros(n, np.int64), np.zeros(n, np.int64), states)
    if threads > 1 and n >= 2:
        cuts = [n * t // threads for t in range(threads + 1)]
        parts = run_parallel(select_range, [(a, f, kh, order, np.int64(cuts[t]), np.int64(cuts[t + 1]), q, res,
                                             np.int64(lanes)) for t in range(threads)])  # fmt: skip
        base = 0
        for t, part in enumerate(parts):
            if base:
                res.starts[order[cuts[t] : cuts[t + 1]]] += base
            base += len(part)
        scratch = np.concatenate(parts)
    else:
        scratch = select_range(a, f, kh, order, np.int64(0), np.int64(n), q, res, np.int64(lanes))
    splits = np.zeros(n + 1, np.int64)
    np.cumsum(res.counts, out=splits[1:])
    if not sort_slots or n < 2:  # keys walked in key order: the scratch already is the CSR column
        return scratch, splits
    out = np.empty(len(scratch), np.int64)
    _gather_csr(scratch, res.starts, res.counts, splits, out)
    return out, splits


def _raise_corrupt(states: np.ndarray, hashes: np.ndarray, hash_slot_num: int) -> None:
    bad = int(np.flatnonzero(states)[0])
    slot = int(hashes[bad]) % hash_slot_num
    what = "has a cycle" if states[bad] == SELECT_CYCLE else "points past the end of the file"
    raise CorruptIndexError(f"index chain from slot {slot} {what}")


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

    On a little-endian host the keys are walked on the ``uint32`` view, ``lanes`` chains touched
    side by side, in slot order with ``sort_slots``, split over ``threads`` threads (default: 2
    from 8,192 keys on a machine with 2+ CPUs); a handful of keys (or ``words=False``) take the
    same walk on the byte view in the calling thread (less set-up; same answers)."""
    buf = as_u8(buf_u8)
    _check_select(buf, hash_slot_num, index_num, header)
    kh = np.ascontiguousarray(key_hashes, np.int32)
    states = np.zeros(len(kh), np.int8)
    if lanes < 1:
        raise InvalidArgumentError("lanes must be positive")
    f = _file_view(hash_slot_num, index_num, header)
    q = Window(np.int64(max_num), np.int64(begin), np.int64(end))
    w = word_view(buf) if words and (threads is not None or len(kh) >= _WORDS_MIN_KEYS) else None
    if w is not None:
        if threads is None:
            threads = 2 if len(kh) >= _THREAD_MIN_KEYS and _CPUS >= 2 else 1
        offsets, splits = _walk_keys(w, f, kh, q, states, max(1, int(threads)), int(lanes), sort_slots)
    elif len(kh) < _WORDS_MIN_KEYS:  # a handful of keys on the bytes: the least set-up per call
        offsets, splits = _select_few(buf, *f, kh, *q, states)
    else:
        offsets, splits = _walk_keys(buf, f, kh, q, states, 1, _BYTE_LANES, False)
    if on_corrupt == "raise" and states.any():
        _raise_corrupt(states, kh, hash_slot_num)
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
    *,
    on_corrupt: str = "raise",
    threads: int | None = None,
    lanes: int = _SELECT_LANES,
    words: bool = True,
    sort_slots: bool = False,
) -> tuple[np.ndarray, np.ndarray]:
    """Twin of :func:`select_many`: ``IndexFileBuffer.select_by_hash`` per key (the reference
    raises :class:`CorruptIndexError` on a looping chain whatever ``on_corrupt``; the keyword
    arguments after it only tune the fast path)."""
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


# ----------------------------------------------------------------------------- many keys as text
@njit(cache=True, nogil=True)
def _hash_select_range(w, f, kbuf, kstarts, prefix, hashes, order, lo, hi, q, res, lanes):  # fmt: skip
    """Hash keys ``lo..hi`` into ``hashes`` (on the thread that walks them), then walk them."""
    hash_joined_range(kbuf, kstarts, prefix, lo, hi, hashes)
    return select_range(w, f, hashes, order, lo, hi, q, res, lanes)


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
    """:func:`select_many` of keys given as text
    (:func:`~mqstore.kernels.javahash.join_keys_ascii`) whose Java hash is continued from
    ``prefix`` (:func:`~mqstore.kernels.javahash.hash_prefix_state` of ``topic#``): each thread
    hashes its keys, then walks them.  Returns ``(offsets, splits, hashes)``; the offsets are
    written in key order directly (no gather pass)."""
    buf = as_u8(buf_u8)
    _check_select(buf, hash_slot_num, index_num, header)
    n = len(kstarts) - 1
    w = word_view(buf)
    if w is None or n < 1:  # big-endian host (or nothing to do): hash here, then select_many
        hashes = hash_joined_py(kbuf, kstarts, prefix) if n else np.empty(0, np.int32)
        offsets, splits = select_many(buf, hash_slot_num, index_num, header, hashes, max_num, begin, end,
                                      on_corrupt=on_corrupt)  # fmt: skip
        return offsets, splits, hashes
    if lanes < 1:
        raise InvalidArgumentError("lanes must be positive")
    if threads is None:
        threads = 2 if n >= _THREAD_MIN_KEYS and _CPUS >= 2 else 1
    threads = max(1, min(int(threads), n))
    hashes = np.empty(n, np.int32)
    states = np.zeros(n, np.int8)
    order = np.arange(n, dtype=np.int64)
    res = KeySlots(np.empty(n, np.int64), np.empty(n, np.int64), states)
    f = _file_view(hash_slot_num, index_num, header)
    q = Window(np.int64(max_num), np.int64(begin), np.int64(end))
    pre = np.uint64(prefix)
    if threads > 1:
        cuts = [n * t // threads for t in range(threads + 1)]
        parts = run_parallel(_hash_select_range, [(w, f, kbuf, kstarts, pre, hashes, order, np.int64(cuts[t]),
                                                   np.int64(cuts[t + 1]), q, res, np.int64(lanes))
                                                  for t in range(threads)])  # fmt: skip
        offsets = np.concatenate(parts)
    else:
        offsets = _hash_select_range(w, f, kbuf, kstarts, pre, hashes, order, np.int64(0), np.int64(n), q, res,
                                     np.int64(lanes))  # fmt: skip
    splits = np.empty(n + 1, np.int64)
    splits[0] = 0
    np.cumsum(res.counts, out=splits[1:])
    if on_corrupt == "raise" and states.any():
        _raise_corrupt(states, hashes, hash_slot_num)
    return offsets, splits, hashes


def select_many_text_py(
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
    """Twin of :func:`select_many_text`: :func:`~mqstore.kernels.javahash.hash_joined_py`, then
    :func:`select_many_py`."""
    hashes = hash_joined_py(kbuf, kstarts, prefix)
    offsets, splits = select_many_py(buf_u8, hash_slot_num, index_num, header, hashes, max_num, begin, end)
    return offsets, splits, hashes


# ----------------------------------------------------------------------------- one key
@njit(cache=True, nogil=True)
def select_one(w, slots, index_num, begin_ts, ic, prefix, kb, key_hash, max_num, begin, end, out):  # fmt: skip
    """``selectPhyOffset`` of one key on the native ``uint32`` view ``w`` of an IndexFile
    (:func:`~mqstore.kernels.endian.word_view`).

    ``begin_ts``/``ic`` are the header's beginTimestamp and indexCount.  With ``key_hash < 0`` the
    hash is ``indexKeyHashMethod`` of the key whose Java hash state after ``topic#`` is ``prefix``
    (unsigned) continued over the bytes ``kb``; otherwise ``key_hash`` is used as is.  Writes the
    offsets (newest first) to ``out`` and returns how many, or a negative ``SELECT_ONE_*`` code."""
    if max_num <= 0:
        return 0
    h = index_hash_span(kb, 0, len(kb), np.uint64(prefix)) if key_hash < 0 else key_hash
    last_item = min(ic, index_num - 1)
    got, st = walk_chain(w, slots, index_num, begin_ts, ic, last_item, h, max_num, begin, end, out, 0)
    if st == WALK_ROOM:
        return SELECT_ONE_ROOM
    if st == WALK_CYCLE:
        return SELECT_ONE_CYCLE
    return got


def select_one_py(w, slots, index_num, begin_ts, ic, prefix, kb, key_hash, max_num, begin, end, out):  # type: ignore[no-untyped-def]  # fmt: skip
    """Twin of :func:`select_one`: ``IndexFileBuffer.select_by_hash`` on the same bytes."""
    if max_num <= 0:
        return 0
    if key_hash < 0:
        raw = np.frombuffer(bytes(kb), np.uint8)
        h = int(hash_joined_py(raw, np.array([0, len(raw) + 1], np.int64), int(prefix))[0])
    else:
        h = int(key_hash)
    f = IndexFileBuffer(memoryview(np.asarray(w).view(np.uint8)), int(slots), int(index_num), load=False)
    f.header = IndexHeader(int(begin_ts), 0, 0, 0, 0, int(ic))
    found: list[int] = []
    try:
        f.select_by_hash(found, h, int(max_num), int(begin), int(end))
    except CorruptIndexError:
        return SELECT_ONE_CYCLE
    if len(found) > len(out):
        return SELECT_ONE_ROOM
    out[: len(found)] = found
    return len(found)


# One compiled call answers ``IndexService.queryOffset`` over all the IndexFiles: the files are
# handed over as a small ``int64`` table of (address, words) of their cached ``uint32`` views,
# newest first, and each file's header (beginTimestamp, endTimestamp, indexCount) is read from its
# mapping, which every writer path updates in step with the in-memory header.  The caller keeps
# the views alive for the duration of the call.
@njit(cache=True, nogil=True)
def select_files(files, seed, kb, max_num, begin, end, out):  # fmt: skip
    """``IndexService.queryOffset(...).phyOffsets`` of one key over every file of ``files``
    (rows ``[address, words, hash_slot_num, index_num]`` of the files' ``uint32`` views, newest
    first).  ``seed < 0``: the key's hash is the Java hash state ``~seed`` (of ``topic#``)
    continued over the bytes ``kb``; ``seed >= 0``: it is the hash.  Writes the offsets to
    ``out`` and returns their number, ``SELECT_ONE_ROOM`` when ``out`` is too small, or
    ``SELECT_FILES_CYCLE - i`` for a looping chain in file ``i``."""
    h = index_hash_span(kb, 0, len(kb), np.uint64(~seed)) if seed < 0 else seed
    n = 0
    for f in range(files.shape[0]):
        w = carray(u32_ptr(files[f, 0]), (files[f, 1],))
        slots = files[f, 2]
        index_num = files[f, 3]
        fb = w_i64(w, 0)
        fe = w_i64(w, 2)
        ic = w_i32(w, 9)
        if (begin < fb and end > fe) or (fb <= begin <= fe) or (fb <= end <= fe):
            if n < max_num:
                last_item = min(ic, index_num - 1)
                got, st = walk_chain(w, slots, index_num, fb, ic, last_item, h, max_num - n, begin, end, out, n)
                if st == WALK_ROOM:
                    return SELECT_ONE_ROOM
                if st == WALK_CYCLE:
                    return SELECT_FILES_CYCLE - f
                n += got
        if fb < begin or n >= max_num:
            break
    return n


def select_files_py(files, seed, kb, max_num, begin, end, out):  # type: ignore[no-untyped-def]  # fmt: skip
    """Twin of :func:`select_files`: :func:`select_one_py` per file of the table, newest first."""
    import ctypes

    n = 0
    for f in range(files.shape[0]):
        addr, words, slots, index_num = (int(v) for v in files[f])
        w = np.ctypeslib.as_array((ctypes.c_uint32 * words).from_address(addr))
        head = w.view(np.uint8)[:40].tobytes()
        fb = int.from_bytes(head[0:8], "big", signed=True)
        fe = int.from_bytes(head[8:16], "big", signed=True)
        ic = int.from_bytes(head[36:40], "big", signed=True)
        if (begin < fb and end > fe) or (fb <= begin <= fe) or (fb <= end <= fe):
            if n < max_num:
                room = out[n:]
                got = select_one_py(w, slots, index_num, fb, ic, ~seed if seed < 0 else 0, kb,
                                    seed if seed >= 0 else -1, max_num - n, begin, end, room)  # fmt: skip
                if got == SELECT_ONE_ROOM:
                    return SELECT_ONE_ROOM
                if got == SELECT_ONE_CYCLE:
                    return SELECT_FILES_CYCLE - f
                n += got
        if fb < begin or n >= max_num:
            break
    return n


register("rocketmq.select_many", select_many, select_many_py, native=_chain_select.select_many_native)
register("rocketmq.select_many_text", select_many_text, select_many_text_py)
register("rocketmq.select_one", select_one, select_one_py)
register("rocketmq.select_files", select_files, select_files_py)
