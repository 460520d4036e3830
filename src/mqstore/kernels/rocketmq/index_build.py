"""IndexFile bulk build, sequential and on several threads, three ways.

The in-memory header is an ``int64`` array of :data:`HEADER_FIELDS` (``begin_timestamp,
end_timestamp, begin_phy_offset, end_phy_offset, hash_slot_count, index_count``; index with the
``H_*`` constants) owned by the caller (it plays the role of ``IndexFileBuffer.header``).
:func:`bulk_put` leaves the buffer byte-identical to calling ``IndexFileBuffer.put_hash`` for each
key in turn (spec 3.6), header write-through and the first-item timeDiff quirk included.

* :func:`bulk_put` / :func:`bulk_put_parallel` – the native module ``_nat_rmq_index`` when built,
  else the numba kernels of :mod:`.index_build_nb` (imported on first use: a process on the native
  path never loads numba); ``*_numba`` / ``*_native`` name each implementation;
* :func:`bulk_put_py` / :func:`bulk_put_parallel_py` – the twins (``IndexFileBuffer.put_hash`` in a
  loop).

:func:`bulk_put_parallel` is the same put on several threads (byte-identical, see its section).
"""

from __future__ import annotations

import struct
from typing import Any, NamedTuple

import numpy as np

from mqstore.errors import CorruptIndexError, InvalidArgumentError
from mqstore.formats.rocketmq.indexfile import (
    INDEX_HEADER_SIZE,
    IndexFileBuffer,
    IndexHeader,
    check_geometry,
    index_file_size,
)
from mqstore.kernels.backend import native, numba_module
from mqstore.kernels.buffers import as_u8, word_view
from mqstore.kernels.registry import register
from mqstore.kernels.threads import resolve_threads, run_parallel, split_even

HEADER_FIELDS = ("begin_timestamp", "end_timestamp", "begin_phy_offset", "end_phy_offset", "hash_slot_count", "index_count")
# positions in the header array
H_BEGIN_TS, H_END_TS, H_BEGIN_PHY, H_END_PHY, H_SLOT_COUNT, H_INDEX_COUNT = range(6)

_NAT: Any = native("_nat_rmq_index")


def _nb() -> Any:
    return numba_module("mqstore.kernels.rocketmq.index_build_nb")


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


def _key_arrays(key_hash: np.ndarray, phy_offset: np.ndarray, store_ts: np.ndarray) -> tuple[np.ndarray, ...]:
    kh = np.ascontiguousarray(key_hash, np.int32)
    phy = np.ascontiguousarray(phy_offset, np.int64)
    ts = np.ascontiguousarray(store_ts, np.int64)
    if not (len(kh) == len(phy) == len(ts)):
        raise InvalidArgumentError("key_hash, phy_offset and store_ts differ in length")
    return kh, phy, ts


def _put_inputs(buf_u8: object, hash_slot_num: int, index_num: int, header: np.ndarray, key_hash: np.ndarray,
                phy_offset: np.ndarray, store_ts: np.ndarray, start: int) -> tuple[np.ndarray, ...]:  # fmt: skip
    buf = as_u8(buf_u8)
    _check_inputs(buf, hash_slot_num, index_num, header)
    kh, phy, ts = _key_arrays(key_hash, phy_offset, store_ts)
    if not 0 <= start <= len(kh):
        raise InvalidArgumentError(f"start {start} outside the {len(kh)} keys")
    return buf, kh, phy, ts


def bulk_put_numba(
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
    buf, kh, phy, ts = _put_inputs(buf_u8, hash_slot_num, index_num, header, key_hash, phy_offset, store_ts, start)
    w = word_view(buf)
    view = buf if w is None else w
    return int(_nb()._bulk_put_kernel(view, np.int64(hash_slot_num), np.int64(index_num), header, kh, phy, ts,
                                      np.int64(start)))  # fmt: skip


def bulk_put_native(
    buf_u8: object,
    hash_slot_num: int,
    index_num: int,
    header: np.ndarray,
    key_hash: np.ndarray,
    phy_offset: np.ndarray,
    store_ts: np.ndarray,
    start: int = 0,
) -> int:
    """:func:`bulk_put_numba` in C (``_nat_rmq_index``)."""
    buf, kh, phy, ts = _put_inputs(buf_u8, hash_slot_num, index_num, header, key_hash, phy_offset, store_ts, start)
    return int(_NAT.bulk_put(buf, int(hash_slot_num), int(index_num), header, kh, phy, ts, int(start)))


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
    buf, kh, phy, ts = _put_inputs(buf_u8, hash_slot_num, index_num, header, key_hash, phy_offset, store_ts, start)
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
    """What the item phase needs of the file: its slot count, begin timestamp, first item number (and
    its item count, which the native phase checks its writes against)."""

    slots: int
    begin_ts: int
    ic0: int
    index_num: int = 0


class KeyInputs(NamedTuple):
    """The keys of a bulk put: hash, phyOffset, store time, and the first key to put."""

    key_hash: np.ndarray
    phy: np.ndarray
    ts: np.ndarray
    start: int


#: a bulk put of fewer keys runs sequentially (two pool rounds cost ~0.1 ms)
PARALLEL_MIN_KEYS = 1 << 16


#: a bulk put of fewer keys runs sequentially (two pool rounds cost ~0.1 ms)
PARALLEL_MIN_KEYS = 1 << 16


class _NumbaPhases:
    """The three phases on the numba kernels (the native ``uint32`` view of the file)."""

    put = staticmethod(bulk_put_numba)

    @staticmethod
    def view(buf: np.ndarray) -> np.ndarray | None:
        return word_view(buf)

    @staticmethod
    def slots_of(kh: np.ndarray, start: int, j0: int, j1: int, slots: int, sl: np.ndarray) -> None:
        _nb()._slots_of(kh, np.int64(start), np.int64(j0), np.int64(j1), np.int64(slots), sl)

    @staticmethod
    def slot_phase(w: np.ndarray, slots: int, ic0: int, sl: np.ndarray, lo: int, hi: int, key_bounds: np.ndarray,
                   prev_out: np.ndarray, marks: np.ndarray) -> int:  # fmt: skip
        return int(_nb()._slot_phase(w, np.int64(ic0), sl, np.int64(len(sl)), np.int64(lo), np.int64(hi), key_bounds,
                                     prev_out, marks))  # fmt: skip

    @staticmethod
    def item_phase(w: np.ndarray, f: ItemFile, keys: KeyInputs, j0: int, j1: int, sl: np.ndarray,
                   bounds: np.ndarray, prevs: np.ndarray, cursors: np.ndarray) -> None:  # fmt: skip
        f64 = ItemFile(np.int64(f.slots), np.int64(f.begin_ts), np.int64(f.ic0), np.int64(f.index_num))
        k64 = KeyInputs(keys.key_hash, keys.phy, keys.ts, np.int64(keys.start))
        _nb()._item_phase(w, f64, k64, np.int64(j0), np.int64(j1), sl, bounds, prevs, cursors)


class _NativePhases:
    """The three phases in C (any alignment: the C kernels load and store big-endian bytes)."""

    put = staticmethod(bulk_put_native)

    @staticmethod
    def view(buf: np.ndarray) -> np.ndarray | None:
        return buf

    @staticmethod
    def slots_of(kh: np.ndarray, start: int, j0: int, j1: int, slots: int, sl: np.ndarray) -> None:
        _NAT.slots_of(kh, start, j0, j1, slots, sl)

    @staticmethod
    def slot_phase(w: np.ndarray, slots: int, ic0: int, sl: np.ndarray, lo: int, hi: int, key_bounds: np.ndarray,
                   prev_out: np.ndarray, marks: np.ndarray) -> int:  # fmt: skip
        return int(_NAT.slot_phase(w, slots, ic0, sl, lo, hi, key_bounds, prev_out, marks))

    @staticmethod
    def item_phase(w: np.ndarray, f: ItemFile, keys: KeyInputs, j0: int, j1: int, sl: np.ndarray,
                   bounds: np.ndarray, prevs: np.ndarray, cursors: np.ndarray) -> None:  # fmt: skip
        _NAT.item_phase(w, f.slots, f.index_num, f.begin_ts, f.ic0, keys.key_hash, keys.phy, keys.ts, keys.start,
                        j0, j1, sl, bounds, prevs, cursors)  # fmt: skip


def _bulk_put_parallel(k: Any, buf_u8: object, hash_slot_num: int, index_num: int, header: np.ndarray,
                       key_hash: np.ndarray, phy_offset: np.ndarray, store_ts: np.ndarray, start: int,
                       threads: int | None) -> int:  # fmt: skip
    nthreads = resolve_threads(threads)
    buf, kh, phy, ts = _put_inputs(buf_u8, hash_slot_num, index_num, header, key_hash, phy_offset, store_ts, start)
    w = k.view(buf)
    m = min(len(kh) - start, max(0, index_num - int(header[H_INDEX_COUNT])))
    if nthreads == 1 or w is None or m < PARALLEL_MIN_KEYS:
        return k.put(buf, hash_slot_num, index_num, header, kh, phy, ts, start)
    done = 0
    if int(header[H_INDEX_COUNT]) <= 1:  # the first key of a fresh file sets the begin fields: sequential
        done = k.put(buf, hash_slot_num, index_num, header, kh[: start + 1], phy[: start + 1], ts[: start + 1], start)
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
    run_parallel(k.slots_of, [(kh, start, a, b, slots, sl) for a, b in ranges])
    prevs = np.empty((parts, m), np.int32)
    marks = np.zeros((parts, parts), np.int64)
    args = [(w, slots, ic0, sl, int(bounds[p]), int(bounds[p + 1]), key_bounds, prevs[p], marks[p])
            for p in range(parts)]  # fmt: skip
    new_slots = sum(int(v) for v in run_parallel(k.slot_phase, args))
    f = ItemFile(slots, int(header[H_BEGIN_TS]), ic0, int(index_num))
    keys = KeyInputs(kh, phy, ts, start)
    item_args = [(w, f, keys, a, b, sl, bounds, prevs, np.ascontiguousarray(marks[:, u]))
                 for u, (a, b) in enumerate(ranges)]  # fmt: skip
    run_parallel(k.item_phase, item_args)
    # header: what putKey leaves after these keys (write-through of the fields it touches)
    last = start + m - 1
    header[H_END_TS] = int(ts[last])
    header[H_END_PHY] = int(phy[last])
    header[H_SLOT_COUNT] = int(header[H_SLOT_COUNT]) + new_slots
    header[H_INDEX_COUNT] = ic0 + m
    mv = memoryview(buf)
    if new_slots:
        struct.pack_into(">i", mv, 32, int(header[H_SLOT_COUNT]))
    struct.pack_into(">q", mv, 24, int(header[H_END_PHY]))
    struct.pack_into(">q", mv, 8, int(header[H_END_TS]))
    struct.pack_into(">i", mv, 36, int(header[H_INDEX_COUNT]))  # the count last (see IndexFile.torn)
    return done + m


def bulk_put_parallel_numba(
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
    """:func:`bulk_put` on ``threads`` threads (same arguments, same result, same bytes).  Small
    puts, ``threads=1`` and buffers without a native word view run the sequential kernel."""
    return _bulk_put_parallel(_NumbaPhases, buf_u8, hash_slot_num, index_num, header, key_hash, phy_offset,
                              store_ts, start, threads)  # fmt: skip


def bulk_put_parallel_native(
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
    """:func:`bulk_put_parallel_numba` in C (``_nat_rmq_index``; small puts and ``threads=1`` run
    the sequential kernel)."""
    return _bulk_put_parallel(_NativePhases, buf_u8, hash_slot_num, index_num, header, key_hash, phy_offset,
                              store_ts, start, threads)  # fmt: skip


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


# ----------------------------------------------------------------------------- the keys of a batch
class BatchKeys(NamedTuple):
    """The index keys of a dispatch batch (a key's row, hash; per row: sysFlag, offset, store time)."""

    key_row: np.ndarray
    key_hash: np.ndarray
    sys_flag: np.ndarray
    offsets: np.ndarray
    store_ts: np.ndarray


def _batch_keys(b: BatchKeys) -> tuple[BatchKeys, np.ndarray, np.ndarray, np.ndarray]:
    k = BatchKeys(np.ascontiguousarray(b.key_row, np.int64), np.ascontiguousarray(b.key_hash, np.int32),
                  np.ascontiguousarray(b.sys_flag, np.int32), np.ascontiguousarray(b.offsets, np.int64),
                  np.ascontiguousarray(b.store_ts, np.int64))  # fmt: skip
    n = len(k.sys_flag)
    if len(k.key_hash) != len(k.key_row) or len(k.offsets) != n or len(k.store_ts) != n:
        raise InvalidArgumentError("index_keys: column lengths differ")
    if len(k.key_row) and (int(k.key_row.min()) < 0 or int(k.key_row.max()) >= n):
        raise InvalidArgumentError("index_keys: a key row outside the batch")
    m = len(k.key_row)
    return k, np.empty(m, np.int32), np.empty(m, np.int64), np.empty(m, np.int64)


def index_keys_numba(b: BatchKeys, resume_offset: int, resume_skip: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """``(key_hash, phy_offset, store_ts)`` of the keys of a batch that ``IndexService.build`` puts:
    not of a ROLLBACK message and past the resume point (offsets below ``resume_offset`` skipped,
    and the first ``resume_skip`` keys at it; ``resume_offset < 0``: none), in key order."""
    k, oh, oo, ot = _batch_keys(b)
    m = int(_nb().index_keys_kernel(*k, np.int64(resume_offset), np.int64(resume_skip), oh, oo, ot))
    return oh[:m], oo[:m], ot[:m]


def index_keys_native(b: BatchKeys, resume_offset: int, resume_skip: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """:func:`index_keys_numba` in C (``_nat_rmq_index``): one pass instead of the masks."""
    k, oh, oo, ot = _batch_keys(b)
    m = int(_NAT.index_keys(*k, int(resume_offset), int(resume_skip), oh, oo, ot))
    return oh[:m], oo[:m], ot[:m]


def index_keys_py(b: BatchKeys, resume_offset: int, resume_skip: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Twin of :func:`index_keys`: the masks of ``IndexService.build`` in numpy."""
    k, _, _, _ = _batch_keys(b)
    rows = k.key_row
    mask = (k.sys_flag[rows] & 0xC) != 0xC
    offsets = k.offsets[rows]
    if resume_offset >= 0:
        mask &= offsets >= resume_offset
        at = np.nonzero(mask & (offsets == resume_offset))[0]
        mask[at[:resume_skip]] = False
    return k.key_hash[mask], offsets[mask], k.store_ts[rows][mask]


_ON = _NAT is not None
index_keys = index_keys_native if _ON else index_keys_numba
bulk_put = bulk_put_native if _ON else bulk_put_numba
bulk_put_parallel = bulk_put_parallel_native if _ON else bulk_put_parallel_numba

register("rocketmq.index_keys", index_keys_numba, index_keys_py, native=index_keys_native if _ON else None)
register("rocketmq.bulk_put", bulk_put_numba, bulk_put_py, native=bulk_put_native if _ON else None)
register("rocketmq.bulk_put_parallel", bulk_put_parallel_numba, bulk_put_parallel_py,
         native=bulk_put_parallel_native if _ON else None)
