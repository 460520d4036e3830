"""Vectorised Java ``String.hashCode`` over many byte spans of one buffer (numba).

The bytes of a span are UTF-8; Java hashes UTF-16 code units, so the kernel decodes UTF-8 on the
fly: ASCII bytes are one unit each (with a 4-byte unrolled fast path), valid multi-byte sequences
give their code point (two surrogate units above U+FFFF), and every invalid or truncated sequence
gives one U+FFFD exactly as Python's ``bytes.decode("utf-8", "replace")`` does (maximal subpart
rule).  The scalar twins are :func:`mqstore.formats.rocketmq.javahash.java_bytes_hashcode` and
:func:`~mqstore.formats.rocketmq.javahash.index_key_hash`.

Hash states are carried as ``uint64`` (wrap-around arithmetic; only the low 32 bits matter) so a
``topic#key`` hash is the topic's state continued with ``#`` and the key's bytes.

:func:`hash_continue` is the one Java-hash loop of the package: every kernel that hashes keys (the
CommitLog scan, the batch and single-key IndexFile walks, the key batches below) continues a state
with it and finishes with :func:`index_hash_of_state` (or :func:`index_hash_span`, both at once).
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
from numba import njit

from mqstore.errors import InvalidArgumentError
from mqstore.formats.rocketmq.javahash import index_key_hash, java_bytes_hashcode, java_string_hashcode
from mqstore.kernels.endian import as_u8
from mqstore.kernels.registry import register
from mqstore.kernels.threads import resolve_threads, run_parallel, split_even

_M32 = np.uint64(0xFFFFFFFF)
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



def _check_spans(n: int, starts: np.ndarray, lengths: np.ndarray, what: str) -> None:
    if starts.shape != lengths.shape:
        raise InvalidArgumentError(f"{what}: starts and lengths differ in shape")
    if len(starts) and (
        int(starts.min()) < 0 or int(lengths.min()) < 0 or int((starts + lengths).max()) > n
    ):
        raise InvalidArgumentError(f"{what}: a span lies outside the buffer of {n} bytes")


#: below this many spans a call runs in the calling thread only (a pool round costs ~50 µs)
PARALLEL_MIN_SPANS = 1 << 16


def hash_spans(buf_u8: object, starts: np.ndarray, lengths: np.ndarray, *, threads: int | None = None) -> np.ndarray:
    """Java ``String.hashCode`` of the UTF-8 strings ``buf[starts[i] : starts[i] + lengths[i]]``.

    ``threads``: how many threads share the spans (``None``: :func:`~mqstore.kernels.threads.default_threads`,
    1: the calling thread only); the result does not depend on it."""
    buf = as_u8(buf_u8)
    s = np.ascontiguousarray(starts, dtype=np.int64)
    ln = np.ascontiguousarray(lengths, dtype=np.int64)
    _check_spans(len(buf), s, ln, "hash_spans")
    out = np.empty(len(s), np.int32)
    parts = _parts(len(s), threads)
    run_parallel(_hash_spans_kernel, [(buf, s[a:b], ln[a:b], out[a:b]) for a, b in parts])
    return out


def _parts(n: int, threads: int | None) -> list[tuple[int, int]]:
    t = resolve_threads(threads)
    return split_even(n, t if n >= PARALLEL_MIN_SPANS else 1)


def index_hash_spans(
    buf_u8: object,
    topic_starts: np.ndarray,
    topic_lens: np.ndarray,
    key_starts: np.ndarray,
    key_lens: np.ndarray,
    *,
    threads: int | None = None,
) -> np.ndarray:
    """IndexFile key hash of ``topic + "#" + key`` for spans of one buffer (``threads`` as for
    :func:`hash_spans`)."""
    buf = as_u8(buf_u8)
    ts = np.ascontiguousarray(topic_starts, dtype=np.int64)
    tl = np.ascontiguousarray(topic_lens, dtype=np.int64)
    ks = np.ascontiguousarray(key_starts, dtype=np.int64)
    kl = np.ascontiguousarray(key_lens, dtype=np.int64)
    _check_spans(len(buf), ts, tl, "index_hash_spans (topics)")
    _check_spans(len(buf), ks, kl, "index_hash_spans (keys)")
    if ts.shape != ks.shape:
        raise InvalidArgumentError("index_hash_spans: topic and key spans differ in number")
    out = np.empty(len(ks), np.int32)
    parts = _parts(len(ks), threads)
    run_parallel(_index_hash_spans_kernel, [(buf, ts[a:b], tl[a:b], ks[a:b], kl[a:b], out[a:b]) for a, b in parts])
    return out


def _pack_strings(strings: Sequence[str]) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    encoded = [s.encode("utf-8", "surrogatepass") for s in strings]
    lengths = np.fromiter((len(b) for b in encoded), dtype=np.int64, count=len(encoded))
    starts = np.zeros(len(encoded), np.int64)
    if len(encoded) > 1:
        np.cumsum(lengths[:-1], out=starts[1:])
    return np.frombuffer(b"".join(encoded), np.uint8), starts, lengths


def hash_strings(strings: Sequence[str]) -> np.ndarray:
    """Java ``String.hashCode`` of many Python strings (encoded into one buffer, then the kernel).

    Lone surrogates in a string are hashed as the code unit itself, as Java does."""
    if any(not s.isascii() and _has_surrogate(s) for s in strings):

        return np.array([java_string_hashcode(s) for s in strings], np.int32)
    buf, starts, lengths = _pack_strings(strings)
    out = np.empty(len(strings), np.int32)
    _hash_spans_kernel(buf, starts, lengths, out)
    return out


def index_hash_strings(keys: Sequence[str]) -> np.ndarray:
    """IndexFile key hash (``abs``, ``MIN_VALUE`` → 0) of many full index keys (``topic#key``)."""
    h = hash_strings(keys).astype(np.int64)
    h = np.abs(h)
    h[h > 0x7FFFFFFF] = 0
    return h.astype(np.int32)


def _has_surrogate(s: str) -> bool:
    return any(0xD800 <= ord(c) <= 0xDFFF for c in s)


def hash_spans_py(buf_u8: object, starts: np.ndarray, lengths: np.ndarray, *, threads: int | None = None) -> np.ndarray:
    """Twin of :func:`hash_spans`: :func:`~mqstore.formats.rocketmq.javahash.java_bytes_hashcode`
    of each span (``threads`` is ignored)."""
    buf = as_u8(buf_u8)
    s = np.ascontiguousarray(starts, dtype=np.int64)
    ln = np.ascontiguousarray(lengths, dtype=np.int64)
    _check_spans(len(buf), s, ln, "hash_spans")
    raw = buf.tobytes()
    return np.array([java_bytes_hashcode(raw[a : a + n]) for a, n in zip(s.tolist(), ln.tolist(), strict=True)],
                    np.int32)  # fmt: skip


def index_hash_spans_py(
    buf_u8: object,
    topic_starts: np.ndarray,
    topic_lens: np.ndarray,
    key_starts: np.ndarray,
    key_lens: np.ndarray,
    *,
    threads: int | None = None,
) -> np.ndarray:
    """Twin of :func:`index_hash_spans`: :func:`~mqstore.formats.rocketmq.javahash.index_key_hash`
    of the decoded ``topic#key`` strings."""
    buf = as_u8(buf_u8)
    cols = [np.ascontiguousarray(a, dtype=np.int64) for a in (topic_starts, topic_lens, key_starts, key_lens)]
    _check_spans(len(buf), cols[0], cols[1], "index_hash_spans (topics)")
    _check_spans(len(buf), cols[2], cols[3], "index_hash_spans (keys)")
    if cols[0].shape != cols[2].shape:
        raise InvalidArgumentError("index_hash_spans: topic and key spans differ in number")
    raw = buf.tobytes()

    def text(a: int, n: int) -> str:
        return raw[a : a + n].decode("utf-8", "replace")

    return np.array([index_key_hash(f"{text(ts, tl)}#{text(ks, kl)}")
                     for ts, tl, ks, kl in zip(*(c.tolist() for c in cols), strict=True)], np.int32)  # fmt: skip


def hash_strings_py(strings: Sequence[str]) -> np.ndarray:
    """Twin of :func:`hash_strings`: :func:`~mqstore.formats.rocketmq.javahash.java_string_hashcode`."""
    return np.array([java_string_hashcode(s) for s in strings], np.int32)


def index_hash_strings_py(keys: Sequence[str]) -> np.ndarray:
    """Twin of :func:`index_hash_strings`: :func:`~mqstore.formats.rocketmq.javahash.index_key_hash`."""
    return np.array([index_key_hash(k) for k in keys], np.int32)


# ----------------------------------------------------------------------------- keys of one topic
def hash_prefix_state(text: str) -> int:
    """The unsigned Java ``hashCode`` state after ``text`` (``topic#``): the ``state`` argument of
    :func:`index_hash_span` and of the kernels that finish key hashes themselves."""
    return java_string_hashcode(text) & 0xFFFFFFFF


@njit(cache=True, nogil=True)
def _index_hash_keys_kernel(buf: np.ndarray, starts: np.ndarray, lengths: np.ndarray, prefix: np.uint64,
                            out: np.ndarray) -> None:  # fmt: skip
    for i in range(starts.shape[0]):
        out[i] = index_hash_span(buf, starts[i], starts[i] + lengths[i], prefix)


def index_hash_keys(topic: str, keys: list[str]) -> np.ndarray:
    """IndexFile hashes (``int32``) of ``topic#key`` for many keys: one join and one encode for
    all ASCII keys, the hash continued from the state of ``topic#`` in one kernel pass.
    Non-ASCII keys take :func:`index_hash_strings`.  Raises ``TypeError`` when a key is not a
    string."""
    joined = "".join(keys)
    if not joined.isascii():
        return index_hash_strings([f"{topic}#{k}" for k in keys])
    buf = np.frombuffer(joined.encode("ascii"), np.uint8)
    lengths = np.fromiter(map(len, keys), np.int64, len(keys))
    starts = np.cumsum(lengths) - lengths
    out = np.empty(len(keys), np.int32)
    if len(buf) == 0:
        buf = np.zeros(1, np.uint8)
    _index_hash_keys_kernel(buf, starts, lengths, np.uint64(hash_prefix_state(f"{topic}#")), out)
    return out


def index_hash_keys_py(topic: str, keys: list[str]) -> np.ndarray:
    """Twin of :func:`index_hash_keys`: :func:`~mqstore.formats.rocketmq.javahash.index_key_hash`
    of each ``topic#key``."""
    if any(not isinstance(k, str) for k in keys):
        raise TypeError("keys must be strings")
    return np.array([index_key_hash(f"{topic}#{k}") for k in keys], np.int32)


# Keys handed over as one ``\0``-joined ASCII buffer (the store-level batch query): the boundaries
# are found in one compiled pass and each walking thread hashes its own range of keys right before
# walking it (:func:`hash_joined_range`).
@njit(cache=True, nogil=True)
def _key_bounds(kbuf: np.ndarray, n: int, starts: np.ndarray) -> int:
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


def join_keys_ascii(keys: list[str]) -> tuple[np.ndarray, np.ndarray] | None:
    """``(kbuf, starts)`` of ASCII keys joined by ``\\0`` (key ``i`` is
    ``kbuf[starts[i] : starts[i + 1] - 1]``), or None when a key is not ASCII or holds ``\\0``
    (then hash with :func:`index_hash_keys`).  Raises ``TypeError`` when a key is not a string."""
    n = len(keys)
    joined = "\0".join(keys)
    if not joined.isascii():
        return None
    kbuf = np.frombuffer(joined.encode("ascii"), np.uint8) if joined else np.zeros(0, np.uint8)
    starts = np.empty(n + 1, np.int64)
    if n and _key_bounds(kbuf, np.int64(n), starts) != n:
        return None
    return kbuf, starts


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


def hash_joined(kbuf: np.ndarray, kstarts: np.ndarray, prefix: int) -> np.ndarray:
    """IndexFile hashes (``int32``) of the keys of a :func:`join_keys_ascii` buffer, continued
    from the state ``prefix`` (:func:`hash_prefix_state` of ``topic#``)."""
    out = np.empty(len(kstarts) - 1, np.int32)
    _hash_joined_kernel(kbuf, kstarts, np.uint64(prefix), out)
    return out


def hash_joined_py(kbuf: np.ndarray, kstarts: np.ndarray, prefix: int) -> np.ndarray:
    """Twin of :func:`hash_joined`: the Java hash of each ASCII key written out in Python."""
    raw = kbuf.tobytes()
    st = kstarts.tolist()
    out = []
    for i in range(len(st) - 1):
        u = prefix
        for c in raw[st[i] : st[i + 1] - 1]:
            u = (u * 31 + c) & 0xFFFFFFFF
        h = u - 0x100000000 if u >= 0x80000000 else u
        h = -h if h < 0 else h
        out.append(0 if h > 0x7FFFFFFF else h)
    return np.array(out, np.int32)


register("javahash.hash_spans", hash_spans, hash_spans_py)
register("javahash.index_hash_spans", index_hash_spans, index_hash_spans_py)
register("javahash.hash_strings", hash_strings, hash_strings_py)
register("javahash.index_hash_strings", index_hash_strings, index_hash_strings_py)
register("javahash.index_hash_keys", index_hash_keys, index_hash_keys_py)
register("javahash.hash_joined", hash_joined, hash_joined_py)
