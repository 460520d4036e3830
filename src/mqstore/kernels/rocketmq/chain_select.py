"""The many-keys chain walk of one IndexFile-shaped buffer (``select_many``) without numba.

:func:`select_many` is :func:`mqstore.kernels.rocketmq.chain_walk.select_many` (same arguments,
same answers and errors): the native kernel (``_nat_rmq_query.select_many``, one thread, keys in
their order) when built, else the numba one, loaded on first use.  The Kafka key index queries
import it from here, so they load no numba on the native path.  The twin test is
``chain_walk``'s (``twins("rocketmq.select_many")`` runs this native kernel too).
"""

from __future__ import annotations

from typing import Any

import numpy as np

from mqstore.errors import CorruptIndexError, InvalidArgumentError
from mqstore.formats.rocketmq.indexfile import check_geometry, index_file_size
from mqstore.kernels.backend import native, numba_module
from mqstore.kernels.buffers import as_u8
from mqstore.kernels.rocketmq.index_build import H_BEGIN_TS, H_INDEX_COUNT

_SELECT_CYCLE = 1  # chain_walk.SELECT_CYCLE (a test checks they agree)

_NAT = native("_nat_rmq_query")


def select_many_native(
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
    lanes: int = 32,
    words: bool = True,
    sort_slots: bool = False,
) -> tuple[np.ndarray, np.ndarray]:
    """``chain_walk.select_many`` by the C kernel (``threads``, ``words`` and ``sort_slots`` only
    tune the numba walk: the keys are walked in their order in the calling thread)."""
    buf = as_u8(buf_u8)
    check_geometry(hash_slot_num, index_num)
    size = index_file_size(hash_slot_num, index_num)
    if len(buf) != size:
        raise CorruptIndexError(f"index buffer is {len(buf)} bytes, geometry {hash_slot_num}x{index_num} needs {size}")
    if header.shape != (6,) or header.dtype != np.int64:
        raise InvalidArgumentError("header must be an int64 array of 6 fields")
    if lanes < 1:
        raise InvalidArgumentError("lanes must be positive")
    kh = np.ascontiguousarray(key_hashes, np.int32)
    n = len(kh)
    states = np.zeros(n, np.int8)
    splits = np.zeros(n + 1, np.int64)
    out = np.empty(max(16, n * 4), np.int64)
    args = (int(hash_slot_num), int(index_num), int(header[H_BEGIN_TS]), int(header[H_INDEX_COUNT]), kh,
            int(max_num), int(begin), int(end))  # fmt: skip
    k = _NAT.select_many(buf, *args, out, splits, states)
    while k < 0:
        out = np.empty(len(out) * 4, np.int64)
        k = _NAT.select_many(buf, *args, out, splits, states)
    if on_corrupt == "raise" and states.any():
        bad = int(np.flatnonzero(states)[0])
        slot = int(kh[bad]) % hash_slot_num
        what = "has a cycle" if states[bad] == _SELECT_CYCLE else "points past the end of the file"
        raise CorruptIndexError(f"index chain from slot {slot} {what}")
    return out[:k].copy(), splits


def _select_many_numba(*args: Any, **kwargs: Any) -> tuple[np.ndarray, np.ndarray]:
    # (chain_walk registers this module's native kernel as its twin: loaded by name, no import cycle)
    return numba_module("mqstore.kernels.rocketmq.chain_walk").select_many(*args, **kwargs)  # type: ignore[no-any-return]


if _NAT is None:
    select_many_native = None  # type: ignore[assignment]
#: ``chain_walk.select_many``: native when built, else numba
select_many = select_many_native if select_many_native is not None else _select_many_numba
