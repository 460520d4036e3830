"""The numba kernels of :mod:`mqstore.kernels.javahash` (the development path and the fallback when
the native module ``_nat_rmq_index`` is not built; imported on first use, so a process on the
native path never loads numba).

:func:`hash_continue` is the one Java-hash loop of the numba kernels: every numba kernel that
hashes keys (the CommitLog scan, the batch and single-key IndexFile walks, the key batches)
continues a state with it and finishes with :func:`index_hash_of_state` (or
:func:`index_hash_span`, both at once).  Its C twin is ``csrc/mq_javahash.h``.
"""

from __future__ import annotations

import numpy as np
from numba import njit

_REPL = 0xFFFD


@njit(cache=True, nogil=True)
def utf8_next(buf: np.ndarray, i: int, e: int) -> tuple[int, int]:
    """Decode one code point at ``buf[i]`` (``i < e``): ``(code point, next index)``.

    Invalid input yields U+FFFD and consumes the maximal valid prefix (at least one byte)."""
    b0 = np.int64(buf[i])
    if b0 < 0x80:
        return b0, i + 1
    if b0 < 0xC2 or b0 > 0xF4:
        return _REPL, i + 1
    if b0 < 0xE0:
        need = 1
        cp = b0 & 0x1F
        lo = 0x80
        hi = 0xBF
    elif b0 < 0xF0:
        need = 2
        cp = b0 & 0x0F
        lo = 0xA0 if b0 == 0xE0 else 0x80
        hi = 0x9F if b0 == 0xED else 0xBF
    else:
        need = 3
        cp = b0 & 0x07
        lo = 0x90 if b0 == 0xF0 else 0x80
        hi = 0x8F if b0 == 0xF4 else 0xBF
    j = i + 1
    if j >= e:
        return _REPL, j
    b = np.int64(buf[j])
    if b < lo or b > hi:
        return _REPL, j
    cp = (cp << 6) | (b & 0x3F)
    j += 1
    for _ in range(need - 1):
        if j >= e:
            return _REPL, j
        b = np.int64(buf[j])
        if b < 0x80 or b > 0xBF:
            return _REPL, j
        cp = (cp << 6) | (b & 0x3F)
        j += 1
    return cp, j


@njit(cache=True, nogil=True)
def hash_continue(buf: np.ndarray, s: int, e: int, h: np.uint64) -> np.uint64:
    """Continue the Java hash state ``h`` over the UTF-8 bytes ``buf[s:e]``."""
    i = s
    c31 = np.uint64(31)
    c961 = np.uint64(961)
    c29791 = np.uint64(29791)
    c923521 = np.uint64(923521)
    while i < e:
        if i + 4 <= e:
            b0 = np.uint64(buf[i])
            b1 = np.uint64(buf[i + 1])
            b2 = np.uint64(buf[i + 2])
            b3 = np.uint64(buf[i + 3])
            if ((b0 | b1 | b2 | b3) & np.uint64(0x80)) == 0:
                h = h * c923521 + b0 * c29791 + b1 * c961 + b2 * c31 + b3
                i += 4
                continue
        b = buf[i]
        if b < 0x80:
            h = h * c31 + np.uint64(b)
            i += 1
            continue
        cp, i = utf8_next(buf, i, e)
        if cp >= 0x10000:
            v = cp - 0x10000
            h = h * c31 + np.uint64(0xD800 + (v >> 10))
            h = h * c31 + np.uint64(0xDC00 + (v & 0x3FF))
        else:
            h = h * c31 + np.uint64(cp)
    return h


@njit(cache=True, nogil=True)
def state_to_int32(h: np.uint64) -> int:
    """The signed 32-bit value of a hash state."""
    v = np.int64(h & np.uint64(0xFFFFFFFF))
    if v >= 0x80000000:
        v -= 0x100000000
    return v


@njit(cache=True, nogil=True)
def index_hash_of_state(h: np.uint64) -> int:
    """``IndexFile.indexKeyHashMethod``: ``abs(hashCode)``, 0 for ``Integer.MIN_VALUE``."""
    v = state_to_int32(h)
    if v < 0:
        v = -v
    if v > 0x7FFFFFFF:
        v = 0
    return v


@njit(cache=True, nogil=True, inline="always")
def index_hash_span(buf: np.ndarray, s: int, e: int, state: np.uint64) -> int:
    """IndexFile key hash of the string whose Java hash state is ``state`` continued over the UTF-8
    bytes ``buf[s:e]`` (``state``: the unsigned state of ``topic#``, see :func:`hash_prefix_state`)."""
    return index_hash_of_state(hash_continue(buf, s, e, state))


@njit(cache=True, nogil=True)
def _hash_spans_kernel(buf: np.ndarray, starts: np.ndarray, lengths: np.ndarray, out: np.ndarray) -> None:
    n = buf.shape[0]
    for r in range(starts.shape[0]):
        s = starts[r]
        e = s + lengths[r]
        s = min(max(s, 0), n)
        e = min(max(e, s), n)
        out[r] = state_to_int32(hash_continue(buf, s, e, np.uint64(0)))


@njit(cache=True, nogil=True)
def _index_hash_spans_kernel(
    buf: np.ndarray,
    topic_starts: np.ndarray,
    topic_lens: np.ndarray,
    key_starts: np.ndarray,
    key_lens: np.ndarray,
    out: np.ndarray,
) -> None:
    n = buf.shape[0]
    c31 = np.uint64(31)
    for r in range(key_starts.shape[0]):
        ts = min(max(topic_starts[r], 0), n)
        te = min(max(topic_starts[r] + topic_lens[r], ts), n)
        ks = min(max(key_starts[r], 0), n)
        ke = min(max(key_starts[r] + key_lens[r], ks), n)
        h = hash_continue(buf, ts, te, np.uint64(0))
        out[r] = index_hash_span(buf, ks, ke, h * c31 + np.uint64(35))  # '#'


@njit(cache=True, nogil=True)
def _index_hash_keys_kernel(buf: np.ndarray, starts: np.ndarray, lengths: np.ndarray, prefix: np.uint64,
                            out: np.ndarray) -> None:  # fmt: skip
    for i in range(starts.shape[0]):
        out[i] = index_hash_span(buf, starts[i], starts[i] + lengths[i], prefix)


@njit(cache=True, nogil=True, inline="always")
def hash_joined_range(kbuf: np.ndarray, kstarts: np.ndarray, prefix: np.uint64, a: int, b: int,
                      out: np.ndarray) -> None:  # fmt: skip
    """``out[i]`` = IndexFile hash of key ``i`` of a :func:`join_keys_ascii` buffer continued from
    ``prefix``, for ``a <= i < b``."""
    for i in range(a, b):
        out[i] = index_hash_span(kbuf, kstarts[i], kstarts[i + 1] - 1, prefix)


@njit(cache=True, nogil=True)
def _hash_joined_kernel(kbuf: np.ndarray, kstarts: np.ndarray, prefix: np.uint64, out: np.ndarray) -> None:
    hash_joined_range(kbuf, kstarts, prefix, 0, out.shape[0], out)
