"""The numba kernels of :mod:`mqstore.kernels.rocketmq.columns` (the development path; imported on
first use, so a process on the native path never loads numba)."""

from __future__ import annotations

import numpy as np
from numba import njit

from mqstore.formats.rocketmq.record import MAGIC_V1, MAGIC_V2
from mqstore.kernels.endian import rd_i16, rd_i32, rd_i64
from mqstore.kernels.rocketmq.columns import (
    _KEYS,
    _TAGS,
    _UNIQ,
    F_BODY_C_R_C,
    F_BODY_LEN,
    F_BODY_START,
    F_BORN_HOST_POS,
    F_BORN_HOST_WIDTH,
    F_BORN_TIMESTAMP,
    F_FLAG,
    F_MAGIC,
    F_PHYSICAL_OFFSET,
    F_PREPARED_TRANSACTION_OFFSET,
    F_PROPS_LEN,
    F_PROPS_START,
    F_QUEUE_ID,
    F_QUEUE_OFFSET,
    F_RECONSUME_TIMES,
    F_SIZE,
    F_STORE_HOST_POS,
    F_STORE_HOST_WIDTH,
    F_STORE_TIMESTAMP,
    F_SYS_FLAG,
    F_TOPIC_LEN,
    F_TOPIC_START,
    KeyPieces,
    PairSpans,
)
from mqstore.kernels.rocketmq.framing import FIXED_MIN
from mqstore.kernels.rocketmq.properties_nb import eq_bytes, eq_const


@njit(cache=True, nogil=True)
def _decode_kernel(buf: np.ndarray, positions: np.ndarray, out: np.ndarray) -> int:
    """Fill ``out[i]`` with the fields of the record at ``positions[i]``; returns the first row that
    is not a valid message record (or -1)."""
    for r in range(positions.shape[0]):
        if not decode_one(buf, positions[r], out[r]):
            return r
    return -1


@njit(cache=True, nogil=True)
def decode_one(buf: np.ndarray, pos: int, o: np.ndarray) -> bool:
    """Fill the row ``o`` (:data:`RECORD_FIELDS`) with the fields of the record at ``pos`` of
    ``buf``; False when ``pos`` is not a valid message record inside ``buf``."""
    nbuf = buf.shape[0]
    if pos < 0 or pos + 8 > nbuf:
        return False
    total = rd_i32(buf, pos)
    magic = rd_i32(buf, pos + 4)
    if (magic != MAGIC_V1 and magic != MAGIC_V2) or total < FIXED_MIN or pos + total > nbuf:
        return False
    rend = pos + total
    sys = rd_i32(buf, pos + 36)
    bw = 20 if sys & 0x10 else 8
    sw = 20 if sys & 0x20 else 8
    p = pos + 48 + bw + 8 + sw + 12
    if p + 4 > rend:
        return False
    body_len = rd_i32(buf, p)
    p += 4
    if body_len < 0 or p + body_len > rend:
        return False
    bs = p
    p += body_len
    if magic == MAGIC_V2:
        if p + 2 > rend:
            return False
        tl = rd_i16(buf, p)
        p += 2
        tw = 2
    else:
        if p + 1 > rend:
            return False
        tl = np.int64(buf[p])
        if tl >= 128:
            tl -= 256
        p += 1
        tw = 1
    if tl < 0 or p + tl > rend:
        return False
    tps = p
    p += tl
    if p + 2 > rend:
        return False
    pl = rd_i16(buf, p)
    p += 2
    if pl < 0 or p + pl > rend:
        return False
    if 48 + bw + 8 + sw + 12 + 4 + body_len + tw + tl + 2 + pl != total:
        return False
    o[F_SIZE] = total
    o[F_MAGIC] = magic
    o[F_BODY_C_R_C] = rd_i32(buf, pos + 8)
    o[F_QUEUE_ID] = rd_i32(buf, pos + 12)
    o[F_FLAG] = rd_i32(buf, pos + 16)
    o[F_QUEUE_OFFSET] = rd_i64(buf, pos + 20)
    o[F_PHYSICAL_OFFSET] = rd_i64(buf, pos + 28)
    o[F_SYS_FLAG] = sys
    o[F_BORN_TIMESTAMP] = rd_i64(buf, pos + 40)
    o[F_BORN_HOST_POS] = pos + 48
    o[F_BORN_HOST_WIDTH] = bw
    o[F_STORE_TIMESTAMP] = rd_i64(buf, pos + 48 + bw)
    o[F_STORE_HOST_POS] = pos + 56 + bw
    o[F_STORE_HOST_WIDTH] = sw
    o[F_RECONSUME_TIMES] = rd_i32(buf, pos + 56 + bw + sw)
    o[F_PREPARED_TRANSACTION_OFFSET] = rd_i64(buf, pos + 60 + bw + sw)
    o[F_BODY_START] = bs
    o[F_BODY_LEN] = body_len
    o[F_TOPIC_START] = tps
    o[F_TOPIC_LEN] = tl
    o[F_PROPS_START] = p
    o[F_PROPS_LEN] = pl
    return True


@njit(cache=True, nogil=True)
def _props_kernel(buf: np.ndarray, ps: np.ndarray, pl: np.ndarray, pairs: PairSpans, special: np.ndarray,
                  keys: KeyPieces) -> None:  # fmt: skip
    """Kept property pairs of every record (``pair_off`` row offsets; name/value spans), the
    ``KEYS``/``TAGS``/``UNIQ_KEY`` value spans (``special[r]``, :data:`SPECIAL_DTYPE`, length -1 when absent) and
    the non-empty space-separated pieces of ``KEYS`` (``key_off`` row offsets)."""
    pair_off, ns, nl, vs, vl = pairs
    key_off, ks, kl = keys
    kname, ktags, kuniq = _KEYS, _TAGS, _UNIQ
    npairs = 0
    nkeys = 0
    for r in range(ps.shape[0]):
        pair_off[r] = npairs
        key_off[r] = nkeys
        first = npairs
        a = ps[r]
        n = pl[r]
        start = 0
        while start < n:
            end = start
            sep = -1
            while end < n and buf[a + end] != 2:
                if sep < 0 and buf[a + end] == 1:
                    sep = end
                end += 1
            if sep > start and sep < end - 1:
                s0 = a + start
                l0 = sep - start
                dup = -1
                for q in range(first, npairs):
                    if nl[q] == l0 and eq_bytes(buf, ns[q], s0, l0):
                        dup = q
                        break
                if dup >= 0:
                    vs[dup] = a + sep + 1
                    vl[dup] = end - sep - 1
                else:
                    ns[npairs] = s0
                    nl[npairs] = l0
                    vs[npairs] = a + sep + 1
                    vl[npairs] = end - sep - 1
                    npairs += 1
            start = end + 1
        sp = special[r]
        sp["keysLen"] = -1
        sp["tagsLen"] = -1
        sp["uniqLen"] = -1
        for q in range(first, npairs):
            if eq_const(buf, ns[q], nl[q], kname):
                sp["keysStart"] = vs[q]
                sp["keysLen"] = vl[q]
            elif eq_const(buf, ns[q], nl[q], ktags):
                sp["tagsStart"] = vs[q]
                sp["tagsLen"] = vl[q]
            elif eq_const(buf, ns[q], nl[q], kuniq):
                sp["uniqStart"] = vs[q]
                sp["uniqLen"] = vl[q]
        if sp["keysLen"] > 0:
            s = sp["keysStart"]
            e = s + sp["keysLen"]
            i = s
            while i < e:
                j = i
                while j < e and buf[j] != 32:
                    j += 1
                if j > i:
                    ks[nkeys] = i
                    kl[nkeys] = j - i
                    nkeys += 1
                i = j + 1
    pair_off[ps.shape[0]] = npairs
    key_off[ps.shape[0]] = nkeys


@njit(cache=True, nogil=True)
def _put_uint(out: np.ndarray, o: int, v: int) -> int:
    if v == 0:
        out[o] = 48
        return o + 1
    digits = 0
    t = v
    while t > 0:
        digits += 1
        t //= 10
    for i in range(digits - 1, -1, -1):
        out[o + i] = 48 + v % 10
        v //= 10
    return o + digits


@njit(cache=True, nogil=True)
def _hosts_kernel(buf: np.ndarray, hp: np.ndarray, hw: np.ndarray, hexd: np.ndarray, offsets: np.ndarray, out: np.ndarray) -> int:
    """``Host.__str__`` text of each host (``a.b.c.d:port``, or ``[8 full groups]:port`` for
    IPv6) into ``out``; ``offsets`` gets the n+1 offsets; returns the byte count."""
    o = 0
    prev_p = -1
    prev_w = 0
    for r in range(hp.shape[0]):
        offsets[r] = o
        p = hp[r]
        w = hw[r]
        if prev_p >= 0 and w == prev_w and eq_bytes(buf, p, prev_p, w):  # same host as the row before
            a = offsets[r - 1]
            ln = o - a
            for k in range(ln):
                out[o + k] = out[a + k]
            o += ln
            continue
        prev_p = p
        prev_w = w
        if w == 8:
            for k in range(4):
                if k:
                    out[o] = 46
                    o += 1
                o = _put_uint(out, o, np.int64(buf[p + k]))
        else:
            out[o] = 91
            o += 1
            for g in range(8):
                if g:
                    out[o] = 58
                    o += 1
                b0 = buf[p + 2 * g]
                b1 = buf[p + 2 * g + 1]
                out[o] = hexd[b0 >> 4]
                out[o + 1] = hexd[b0 & 15]
                out[o + 2] = hexd[b1 >> 4]
                out[o + 3] = hexd[b1 & 15]
                o += 4
            out[o] = 93
            o += 1
        q = p + w - 4
        port = (np.int64(buf[q]) << 24) | (np.int64(buf[q + 1]) << 16) | (np.int64(buf[q + 2]) << 8) | np.int64(buf[q + 3])
        if port >= 0x80000000:
            port -= 0x100000000
        out[o] = 58
        o += 1
        if port < 0:
            out[o] = 45
            o += 1
            port = -port
        o = _put_uint(out, o, port)
    offsets[hp.shape[0]] = o
    return o


@njit(cache=True, nogil=True)
def _gather_kernel(buf: np.ndarray, starts: np.ndarray, lens: np.ndarray, offsets: np.ndarray, out: np.ndarray) -> None:
    o = 0
    for r in range(starts.shape[0]):
        offsets[r] = o
        s = starts[r]
        ln = lens[r]
        for k in range(ln):  # an explicit loop: slicing costs more than the copy for short pieces
            out[o + k] = buf[s + k]
        o += max(ln, 0)
    offsets[starts.shape[0]] = o
