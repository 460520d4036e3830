"""JSON text written into byte buffers by numba kernels: the pieces both dumps' JSON-lines kernels
use (:mod:`mqstore.kernels.rocketmq.json_lines_nb`, :mod:`mqstore.kernels.kafka.json_lines_nb`).

Strings are copied as UTF-8 bytes with JSON's escapes (``\\"``, ``\\\\``, ``\\b\\t\\n\\f\\r``,
``\\u00xx`` for the other control characters, everything else as is: ``json.dumps(...,
ensure_ascii=False)``), integers in decimal, bytes in base64 (what ``base64.b64encode`` gives).
"""

from __future__ import annotations

import numpy as np
from numba import njit

HEX = np.frombuffer(b"0123456789abcdef", np.uint8).copy()
_B64 = np.frombuffer(b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/", np.uint8).copy()
_B64_PAIRS = np.stack([np.repeat(_B64, 64), np.tile(_B64, 64)], axis=1).reshape(-1).copy()  # 12 bits -> 2 chars



def lit(text: str) -> np.ndarray:
    return np.frombuffer(text.encode("ascii"), np.uint8).copy()



NULL = lit("null")
_ESCAPED = np.array([c < 0x20 or c in (34, 92) for c in range(256)], np.bool_)  # bytes JSON escapes
_POW10 = np.array([10**k for k in range(20)], np.uint64)



@njit(cache=True, nogil=True, inline="always")
def put(out: np.ndarray, o: int, lit: np.ndarray) -> int:
    for k in range(lit.shape[0]):
        out[o + k] = lit[k]
    return o + lit.shape[0]


@njit(cache=True, nogil=True)
def put_int(out: np.ndarray, o: int, v: int) -> int:
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
def utf8_ok(buf: np.ndarray, s: int, n: int) -> bool:
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
def put_str(out: np.ndarray, o: int, buf: np.ndarray, s: int, n: int) -> int:
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
                out[o + 4] = HEX[c >> 4]
                out[o + 5] = HEX[c & 15]
                o += 6
        else:
            out[o] = c
            o += 1
    out[o] = 34
    return o + 1


@njit(cache=True, nogil=True)
def put_b64(out: np.ndarray, o: int, buf: np.ndarray, s: int, n: int) -> int:
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
