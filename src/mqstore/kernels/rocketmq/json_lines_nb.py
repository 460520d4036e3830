"""The numba kernels of :mod:`mqstore.kernels.rocketmq.json_lines` (the development path; imported
on first use, so a process on the native path never loads numba)."""

from __future__ import annotations

import numpy as np
from numba import njit

from mqstore.kernels.rocketmq.columns import _HEX

_B64 = np.frombuffer(b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/", np.uint8).copy()
_B64_PAIRS = np.stack([np.repeat(_B64, 64), np.tile(_B64, 64)], axis=1).reshape(-1).copy()  # 12 bits -> 2 chars


def _lit(text: str) -> np.ndarray:
    return np.frombuffer(text.encode("ascii"), np.uint8).copy()


# the fixed pieces of a line, in order
_K_TOPIC = _lit('{"topic":')
_K_FLAG = _lit(',"flag":')
_K_BODY = _lit(',"body":"')
_K_PROPS = _lit('","properties":{')
_K_QID = _lit('},"queueId":')
_K_QOFF = _lit(',"queueOffset":')
_K_CLOFF = _lit(',"commitLogOffset":')
_K_SIZE = _lit(',"size":')
_K_BORN_TS = _lit(',"bornTimestamp":')
_K_STORE_TS = _lit(',"storeTimestamp":')
_K_BORN_HOST = _lit(',"bornHost":"')
_K_STORE_HOST = _lit('","storeHost":"')
_K_SYS = _lit('","sysFlag":')
_K_RECONSUME = _lit(',"reconsumeTimes":')
_K_CRC = _lit(',"bodyCRC":')
_K_KEYS = _lit(',"keys":[')
_K_TAGS = _lit('],"tags":')
_K_UNIQ = _lit(',"uniqKey":')
_K_END = _lit("}\n")
_NULL = _lit("null")
_ESCAPED = np.array([c < 0x20 or c in (34, 92) for c in range(256)], np.bool_)  # bytes JSON escapes
_POW10 = np.array([10**k for k in range(20)], np.uint64)


@njit(cache=True, nogil=True, inline="always")
def _put(out: np.ndarray, o: int, lit: np.ndarray) -> int:
    for k in range(lit.shape[0]):
        out[o + k] = lit[k]
    return o + lit.shape[0]


@njit(cache=True, nogil=True)
def _put_int(out: np.ndarray, o: int, v: int) -> int:
    """The decimal text of the ``int64`` ``v`` (unsigned arithmetic: divisions by a constant)."""
    if v < 0:
        out[o] = 45
        o += 1
        u = np.uint64(-(v + 1)) + np.uint64(1)
    else:
        u = np.uint64(v)
    n = 1
    while n < 20 and u >= _POW10[n]:
        n += 1
    ten = np.uint64(10)
    for i in range(n - 1, -1, -1):
        out[o + i] = np.uint8(48 + u % ten)
        u //= ten
    return o + n


@njit(cache=True, nogil=True)
def _utf8_ok(buf: np.ndarray, s: int, n: int) -> bool:
    """Whether ``buf[s:s+n]`` is valid UTF-8 (no overlongs, surrogates or values above U+10FFFF)."""
    i = s
    e = s + n
    while i < e:
        c = buf[i]
        if c < 0x80:
            i += 1
            continue
        if 0xC2 <= c <= 0xDF:
            need = 1
            lo = 0x80
            hi = 0xBF
        elif c == 0xE0:
            need = 2
            lo = 0xA0
            hi = 0xBF
        elif 0xE1 <= c <= 0xEC or 0xEE <= c <= 0xEF:
            need = 2
            lo = 0x80
            hi = 0xBF
        elif c == 0xED:
            need = 2
            lo = 0x80
            hi = 0x9F
        elif c == 0xF0:
            need = 3
            lo = 0x90
            hi = 0xBF
        elif 0xF1 <= c <= 0xF3:
            need = 3
            lo = 0x80
            hi = 0xBF
        elif c == 0xF4:
            need = 3
            lo = 0x80
            hi = 0x8F
        else:
            return False
        if i + need >= e:
            return False
        c1 = buf[i + 1]
        if c1 < lo or c1 > hi:
            return False
        for k in range(2, need + 1):
            ck = buf[i + k]
            if ck < 0x80 or ck > 0xBF:
                return False
        i += need + 1
    return True


@njit(cache=True, nogil=True)
def _put_str(out: np.ndarray, o: int, buf: np.ndarray, s: int, n: int) -> int:
    """``"`` + the JSON-escaped bytes ``buf[s:s+n]`` + ``"``."""
    out[o] = 34
    o += 1
    k = 0
    esc = _ESCAPED
    while k < n:  # the common case: bytes that need no escape, copied as they come
        c = buf[s + k]
        if esc[c]:
            break
        out[o + k] = c
        k += 1
    if k == n:
        out[o + n] = 34
        return o + n + 1
    o += k
    for j in range(k, n):
        c = buf[s + j]
        if c == 34 or c == 92:
            out[o] = 92
            out[o + 1] = c
            o += 2
        elif c < 0x20:
            out[o] = 92
            if c == 8:
                out[o + 1] = 98
                o += 2
            elif c == 9:
                out[o + 1] = 116
                o += 2
            elif c == 10:
                out[o + 1] = 110
                o += 2
            elif c == 12:
                out[o + 1] = 102
                o += 2
            elif c == 13:
                out[o + 1] = 114
                o += 2
            else:
                out[o + 1] = 117
                out[o + 2] = 48
                out[o + 3] = 48
                out[o + 4] = _HEX[c >> 4]
                out[o + 5] = _HEX[c & 15]
                o += 6
        else:
            out[o] = c
            o += 1
    out[o] = 34
    return o + 1


@njit(cache=True, nogil=True)
def _put_b64(out: np.ndarray, o: int, buf: np.ndarray, s: int, n: int) -> int:
    i = s
    e = s + n
    t = _B64_PAIRS
    while i + 3 <= e:
        v = (np.int64(buf[i]) << 16) | (np.int64(buf[i + 1]) << 8) | np.int64(buf[i + 2])
        a = (v >> 12) << 1
        b = (v & 4095) << 1
        out[o] = t[a]
        out[o + 1] = t[a + 1]
        out[o + 2] = t[b]
        out[o + 3] = t[b + 1]
        o += 4
        i += 3
    rest = e - i
    if rest == 1:
        v = np.int64(buf[i]) << 16
        out[o] = _B64[(v >> 18) & 63]
        out[o + 1] = _B64[(v >> 12) & 63]
        out[o + 2] = 61
        out[o + 3] = 61
        o += 4
    elif rest == 2:
        v = (np.int64(buf[i]) << 16) | (np.int64(buf[i + 1]) << 8)
        out[o] = _B64[(v >> 18) & 63]
        out[o + 1] = _B64[(v >> 12) & 63]
        out[o + 2] = _B64[(v >> 6) & 63]
        out[o + 3] = 61
        o += 4
    return o


@njit(cache=True, nogil=True)
def _json_kernel(buf, rows, offs, pairs, special, keys, born, born_off, store, store_off, out):  # type: ignore[no-untyped-def]  # fmt: skip
    """Write the lines of every row into ``out``; the byte count, or ``-1 - r`` when row ``r``
    needs the per-record path (its text is not valid UTF-8, or its stored physical offset is not
    where it lies: the reader raises on that)."""
    pair_off, ns, nl, vs, vl = pairs
    key_off, ks, kl = keys
    o = 0
    for r in range(rows.shape[0]):
        row = rows[r]
        ts0 = row[18]
        tl0 = row[19]
        if row[6] != offs[r] or not _utf8_ok(buf, ts0, tl0) or not _utf8_ok(buf, row[20], row[21]):
            return -1 - r
        o = _put(out, o, _K_TOPIC)
        o = _put_str(out, o, buf, ts0, tl0)
        o = _put(out, o, _K_FLAG)
        o = _put_int(out, o, row[4])
        o = _put(out, o, _K_BODY)
        o = _put_b64(out, o, buf, row[16], row[17])
        o = _put(out, o, _K_PROPS)
        for q in range(pair_off[r], pair_off[r + 1]):
            if q > pair_off[r]:
                out[o] = 44
                o += 1
            o = _put_str(out, o, buf, ns[q], nl[q])
            out[o] = 58
            o += 1
            o = _put_str(out, o, buf, vs[q], vl[q])
        o = _put(out, o, _K_QID)
        o = _put_int(out, o, row[3])
        o = _put(out, o, _K_QOFF)
        o = _put_int(out, o, row[5])
        o = _put(out, o, _K_CLOFF)
        o = _put_int(out, o, offs[r])
        o = _put(out, o, _K_SIZE)
        o = _put_int(out, o, row[0])
        o = _put(out, o, _K_BORN_TS)
        o = _put_int(out, o, row[8])
        o = _put(out, o, _K_STORE_TS)
        o = _put_int(out, o, row[11])
        o = _put(out, o, _K_BORN_HOST)
        for k in range(born_off[r], born_off[r + 1]):
            out[o] = born[k]
            o += 1
        o = _put(out, o, _K_STORE_HOST)
        for k in range(store_off[r], store_off[r + 1]):
            out[o] = store[k]
            o += 1
        o = _put(out, o, _K_SYS)
        o = _put_int(out, o, row[7])
        o = _put(out, o, _K_RECONSUME)
        o = _put_int(out, o, row[14])
        o = _put(out, o, _K_CRC)
        o = _put_int(out, o, row[2])
        o = _put(out, o, _K_KEYS)
        for q in range(key_off[r], key_off[r + 1]):
            if q > key_off[r]:
                out[o] = 44
                o += 1
            o = _put_str(out, o, buf, ks[q], kl[q])
        o = _put(out, o, _K_TAGS)
        sp = special[r]
        if sp["tagsLen"] >= 0:
            o = _put_str(out, o, buf, sp["tagsStart"], sp["tagsLen"])
        else:
            o = _put(out, o, _NULL)
        o = _put(out, o, _K_UNIQ)
        if sp["uniqLen"] >= 0:
            o = _put_str(out, o, buf, sp["uniqStart"], sp["uniqLen"])
        else:
            o = _put(out, o, _NULL)
        o = _put(out, o, _K_END)
    return o
