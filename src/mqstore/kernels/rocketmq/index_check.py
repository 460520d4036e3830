"""The IndexFile checks of ``mqstore rocketmq verify`` in one pass per file, three ways.

* :func:`locate` – where each offset lies among the records' ascending start offsets (numpy's
  ``searchsorted``, side left): the native and numba kernels gallop from the previous answer, so
  ascending offsets (ConsumeQueue units, IndexFile items, a scan's keys) cost O(n + m) instead of
  a binary search each;
* :func:`check_items` – items of an IndexFile against the CommitLog's records: a live item
  (``phyOffset >= cl_min``) must point at a record start with keys (code bit 1), its hash must be
  one of that record's key hashes (2), its time difference that of the record's store time (4,
  from item 2 on: the first item keeps the broker's quirk); every item must link to an older one
  (8) and have a non-negative time difference (16).  Returns a ``uint8`` code per item; the caller
  formats the problems of the non-zero ones.  A record's keys are a run of ``keys`` (int64 whose
  low 32 bits are the hash, e.g. verify's ``record << 32 | hash`` pairs), compared one by one.

The native module ``_nat_rmq_index`` runs them when built, else the numba kernels of
:mod:`.index_check_nb` (imported on first use); ``*_py`` are the numpy twins.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from mqstore.errors import InvalidArgumentError
from mqstore.kernels.backend import native, numba_module
from mqstore.kernels.buffers import as_u8
from mqstore.kernels.registry import register

_NAT: Any = native("_nat_rmq_index")
INT_MAX = 2**31 - 1
#: code bits of :func:`check_items`
NOT_A_KEYED_RECORD, HASH_NOT_A_KEY, TIME_MISMATCH, BAD_LINK, NEGATIVE_DIFF = 1, 2, 4, 8, 16


def _nb() -> Any:
    return numba_module("mqstore.kernels.rocketmq.index_check_nb")


def _locate_args(starts: np.ndarray, n: int, offsets: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    a = np.ascontiguousarray(starts, np.int64)
    if not 0 <= n <= len(a):
        raise InvalidArgumentError(f"locate: n={n} outside the {len(a)} starts")
    return a, np.ascontiguousarray(offsets, np.int64)


def locate_numba(starts: np.ndarray, n: int, offsets: np.ndarray) -> np.ndarray:
    """``np.searchsorted(starts[:n], offsets)`` (``starts[:n]`` ascending), galloping."""
    a, x = _locate_args(starts, n, offsets)
    out = np.empty(len(x), np.int64)
    _nb().locate_kernel(a, np.int64(n), x, out)
    return out


def locate_native(starts: np.ndarray, n: int, offsets: np.ndarray) -> np.ndarray:
    """:func:`locate_numba` in C (``_nat_rmq_index``)."""
    a, x = _locate_args(starts, n, offsets)
    out = np.empty(len(x), np.int64)
    _NAT.locate(a, int(n), x, out)
    return out


def locate_py(starts: np.ndarray, n: int, offsets: np.ndarray) -> np.ndarray:
    """Twin of :func:`locate`: ``numpy.searchsorted``."""
    a, x = _locate_args(starts, n, offsets)
    return np.searchsorted(a[:n], x).astype(np.int64)


def _check_args(items: object, count: int, starts: np.ndarray, n: int, key_splits: np.ndarray, keys: np.ndarray,
                store_ts: np.ndarray) -> tuple[np.ndarray, ...]:  # fmt: skip
    it = as_u8(items)
    st = np.ascontiguousarray(starts, np.int64)
    ks = np.ascontiguousarray(key_splits, np.int64)
    kv = np.ascontiguousarray(keys, np.int64)
    ts = np.ascontiguousarray(store_ts, np.int64)
    if count < 0 or len(it) < 20 * count or not 0 <= n <= min(len(st), len(ts)) or len(ks) < n + 1:
        raise InvalidArgumentError("check_items: arrays shorter than their counts")
    if n and (int(ks[0]) < 0 or int(ks[n]) > len(kv) or bool((np.diff(ks[: n + 1]) < 0).any())):
        raise InvalidArgumentError("check_items: key_splits outside keys")
    return it, st, ks, kv, ts


def check_items_numba(items: object, count: int, begin_ts: int, cl_min: int, starts: np.ndarray, n: int,
                      key_splits: np.ndarray, keys: np.ndarray, store_ts: np.ndarray, first_item: int = 1) -> np.ndarray:  # fmt: skip
    """The code of each of the ``count`` 20-byte items of ``items`` (numbered from ``first_item``):
    see the module.
    ``starts[:n]`` are the records' start offsets (ascending), ``keys[key_splits[r]:key_splits[r + 1]]``
    the index key hashes of record ``r``, ``store_ts[r]`` its store time; ``begin_ts`` is the file's
    beginTimestamp, ``cl_min`` the CommitLog's first offset."""
    it, st, ks, kv, ts = _check_args(items, count, starts, n, key_splits, keys, store_ts)
    codes = np.zeros(count, np.uint8)
    _nb().check_items_kernel(it, np.int64(count), np.int64(begin_ts), np.int64(cl_min), st, np.int64(n), ks, kv, ts,
                             codes, np.int64(first_item))  # fmt: skip
    return codes


def check_items_native(items: object, count: int, begin_ts: int, cl_min: int, starts: np.ndarray, n: int,
                       key_splits: np.ndarray, keys: np.ndarray, store_ts: np.ndarray, first_item: int = 1) -> np.ndarray:  # fmt: skip
    """:func:`check_items_numba` in C (``_nat_rmq_index``)."""
    it, st, ks, kv, ts = _check_args(items, count, starts, n, key_splits, keys, store_ts)
    codes = np.zeros(count, np.uint8)
    _NAT.check_items(it, int(count), int(begin_ts), int(cl_min), st, int(n), ks, kv, ts, codes, int(first_item))
    return codes


_ITEM = np.dtype([("hash", ">i4"), ("phy", ">i8"), ("diff", ">i4"), ("prev", ">i4")])


def check_items_py(items: object, count: int, begin_ts: int, cl_min: int, starts: np.ndarray, n: int,
                   key_splits: np.ndarray, keys: np.ndarray, store_ts: np.ndarray, first_item: int = 1) -> np.ndarray:  # fmt: skip
    """Twin of :func:`check_items` in numpy: sorted ``(record, hash)`` pairs and binary searches."""
    it, st, ks, kv, ts = _check_args(items, count, starts, n, key_splits, keys, store_ts)
    rec = np.frombuffer(it, _ITEM, count=count)
    h = rec["hash"].astype(np.int64)
    phy = rec["phy"].astype(np.int64)
    diff = rec["diff"].astype(np.int64)
    prev = rec["prev"].astype(np.int64)
    item_no = np.arange(first_item, first_item + count, dtype=np.int64)
    ri = np.searchsorted(st[:n], phy)
    found = ri < n
    found[found] = st[ri[found]] == phy[found]
    counts = np.diff(ks[: n + 1])
    ri_c = np.minimum(ri, max(n - 1, 0))
    keyed = found & (counts[ri_c] > 0) if n else np.zeros(count, bool)
    owner = np.repeat(np.arange(n, dtype=np.int64), counts)
    pairs = np.sort((owner << 32) | (kv[ks[0] : ks[n]].astype(np.int64) & 0xFFFFFFFF)) if n else np.zeros(0, np.int64)
    pk = (ri_c << 32) | (h & 0xFFFFFFFF)
    j = np.minimum(np.searchsorted(pairs, pk), len(pairs) - 1) if len(pairs) else np.zeros(count, np.int64)
    hash_ok = keyed & (pairs[j] == pk) if len(pairs) else np.zeros(count, bool)
    if begin_ts <= 0:
        want = np.zeros(count, np.int64)
    else:
        d = ts[ri_c] - begin_ts if n else np.zeros(count, np.int64)
        want = np.clip(np.where(d >= 0, d // 1000, -((-d) // 1000)), 0, INT_MAX)
    live = phy >= cl_min
    codes = np.zeros(count, np.uint8)
    codes[live & ~keyed] |= NOT_A_KEYED_RECORD
    codes[live & keyed & ~hash_ok] |= HASH_NOT_A_KEY
    codes[live & hash_ok & (item_no >= 2) & (diff != want)] |= TIME_MISMATCH
    codes[(prev < 0) | (prev >= item_no)] |= BAD_LINK
    codes[diff < 0] |= NEGATIVE_DIFF
    return codes


_ON = _NAT is not None
locate = locate_native if _ON else locate_numba
check_items = check_items_native if _ON else check_items_numba
register("rocketmq.locate", locate_numba, locate_py, native=locate_native if _ON else None)
register("rocketmq.check_items", check_items_numba, check_items_py, native=check_items_native if _ON else None)
