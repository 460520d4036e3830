"""The numba kernel of the exact single-key query (the development path and twin of the native
``_nat_rmq_query``); see :mod:`mqstore.kernels.rocketmq.key_match` for the rules, the constants
and the Python wrappers."""

from __future__ import annotations

import numpy as np
from numba import carray, njit

from mqstore.kernels.crc import CRC_TABLE
from mqstore.kernels.crc_nb import crc32_span
from mqstore.kernels.intrinsics import u8_ptr
from mqstore.kernels.rocketmq.chain_walk import SELECT_ONE_ROOM, select_files
from mqstore.kernels.rocketmq.columns import (
    F_BODY_C_R_C,
    F_BODY_LEN,
    F_BODY_START,
    F_PHYSICAL_OFFSET,
    F_PROPS_LEN,
    F_PROPS_START,
    F_SEGMENT,
    F_STORE_TIMESTAMP,
    F_TOPIC_LEN,
    F_TOPIC_START,
    MATCH_COLUMNS,
)
from mqstore.kernels.rocketmq.columns_nb import decode_one
from mqstore.kernels.rocketmq.key_match import (
    EXACT_ROOM,
    EXACT_UNCLEAN,
    LONG_MAX,
    PRM_B,
    PRM_E,
    PRM_END,
    PRM_HI,
    PRM_LO,
    PRM_SEED,
    PRM_WBEGIN,
    SEG_ADDR,
    SEG_BASE,
    SEG_LIMIT,
    SEG_SIZE,
)
from mqstore.kernels.rocketmq.properties import P_KEYS, P_UNIQ, PROP_SPANS
from mqstore.kernels.rocketmq.properties_nb import prop_spans


@njit(cache=True, nogil=True)
def _eq_at(buf: np.ndarray, a: int, const: bytes) -> bool:
    """Whether ``buf[a:a + len(const)] == const``."""
    for k in range(len(const)):
        if buf[a + k] != const[k]:
            return False
    return True


@njit(cache=True, nogil=True)
def _has_piece(buf: np.ndarray, s: int, e: int, key: np.ndarray) -> bool:
    """Whether ``key`` is one of the space-separated pieces of ``buf[s:e]``."""
    n = len(key)
    i = s
    while i < e:
        j = i
        while j < e and buf[j] != 32:
            j += 1
        if j - i == n and _eq_at(buf, i, key):
            return True
        i = j + 1
    return False


@njit(cache=True, nogil=True)
def _segment_of(segs: np.ndarray, off: int) -> int:
    """The row of ``segs`` (ascending bases) holding global offset ``off``, or -1."""
    lo = 0
    hi = segs.shape[0]
    while lo < hi:  # last row with base <= off
        mid = (lo + hi) >> 1
        if segs[mid, SEG_BASE] <= off:
            lo = mid + 1
        else:
            hi = mid
    s = lo - 1
    if s < 0 or off >= segs[s, SEG_BASE] + segs[s, SEG_SIZE]:
        return -1
    return s


@njit(cache=True, nogil=True)
def exact_key_files(files, segs, topic, key, prm, out):  # type: ignore[no-untyped-def]
    """See the module docstring.  ``files``: the IndexFile table of ``select_files``; ``segs``: the
    segment table; ``topic``/``key``: their UTF-8 bytes; ``prm``: the ``PRM_*`` numbers;
    ``out``: ``(rows, MATCH_COLUMNS)`` ``int64``."""
    seed = prm[PRM_SEED]
    wbegin = prm[PRM_WBEGIN]
    end = prm[PRM_END]
    lo = prm[PRM_LO]
    hi = prm[PRM_HI]
    b = prm[PRM_B]
    e = prm[PRM_E]
    kb = key  # (not read by the walk when the seed is the hash)
    cand = np.empty(64, np.int64)
    n = select_files(files, seed, kb, LONG_MAX, wbegin, end, cand)
    while n == SELECT_ONE_ROOM:
        cand = np.empty(cand.shape[0] * 16, np.int64)
        n = select_files(files, seed, kb, LONG_MAX, wbegin, end, cand)
    if n < 0:
        return n
    c = np.sort(cand[:n])
    spans = np.empty(PROP_SPANS, np.int64)
    tl = len(topic)
    m = 0
    prev = -1
    for i in range(n):
        off = c[i]
        if off == prev:
            continue
        prev = off
        if off < lo or off >= hi:
            continue
        s = _segment_of(segs, off)
        if s < 0:
            continue
        if m == out.shape[0]:
            return EXACT_ROOM
        buf = carray(u8_ptr(segs[s, SEG_ADDR]), (segs[s, SEG_LIMIT],))
        o = out[m]
        if not decode_one(buf, off - segs[s, SEG_BASE], o) or o[F_PHYSICAL_OFFSET] != off:
            return EXACT_UNCLEAN
        if o[F_TOPIC_LEN] != tl or not _eq_at(buf, o[F_TOPIC_START], topic):
            continue
        ts = o[F_STORE_TIMESTAMP]
        if ts < b or ts > e:
            continue
        ps = o[F_PROPS_START]
        prop_spans(buf, ps, ps + o[F_PROPS_LEN], spans)
        hit = spans[P_UNIQ + 1] - spans[P_UNIQ] == len(key) and _eq_at(buf, spans[P_UNIQ], key)
        if not hit and spans[P_KEYS] >= 0:
            hit = _has_piece(buf, spans[P_KEYS], spans[P_KEYS + 1], key)
        if not hit:
            continue
        bs = o[F_BODY_START]
        bl = o[F_BODY_LEN]
        crc = 0 if bl == 0 else crc32_span(buf, bs, bs + bl, CRC_TABLE) & 0x7FFFFFFF
        if crc != o[F_BODY_C_R_C]:
            return EXACT_UNCLEAN
        o[F_SEGMENT] = s
        m += 1
    # newest first: (store time, offset) descending (insertion sort: a key has few matches)
    for i in range(1, m):
        j = i
        while j > 0 and (out[j, F_STORE_TIMESTAMP], out[j, F_PHYSICAL_OFFSET]) > (
            out[j - 1, F_STORE_TIMESTAMP], out[j - 1, F_PHYSICAL_OFFSET]
        ):  # fmt: skip
            for k in range(MATCH_COLUMNS):
                t = out[j, k]
                out[j, k] = out[j - 1, k]
                out[j - 1, k] = t
            j -= 1
    return m
