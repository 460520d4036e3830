"""Vectorised Java ``String.hashCode`` over many byte spans of one buffer, three ways.

The bytes of a span are UTF-8; Java hashes UTF-16 code units, so the kernels decode UTF-8 on the
fly: ASCII bytes are one unit each (with a 4-byte unrolled fast path), valid multi-byte sequences
give their code point (two surrogate units above U+FFFF), and every invalid or truncated sequence
gives one U+FFFD exactly as Python's ``bytes.decode("utf-8", "replace")`` does (maximal subpart
rule).  The scalar twins are :func:`mqstore.formats.rocketmq.javahash.java_bytes_hashcode` and
:func:`~mqstore.formats.rocketmq.javahash.index_key_hash`.

* the public functions (:func:`hash_spans`, :func:`index_hash_spans`, :func:`hash_strings`,
  :func:`index_hash_strings`, :func:`index_hash_keys`, :func:`hash_joined`) run on the native
  module ``_nat_rmq_index`` when it is built (the hash loop is ``csrc/mq_javahash.h``), else on
  the numba kernels of :mod:`mqstore.kernels.javahash_nb` (imported on first use);
* ``*_numba`` / ``*_native`` name each implementation, ``*_py`` the pure-Python twins.

Hash states are carried as unsigned values (wrap-around arithmetic; only the low 32 bits matter)
so a ``topic#key`` hash is the topic's state continued with ``#`` and the key's bytes
(:func:`hash_prefix_state`).  The numba building blocks other numba kernels inline
(``hash_continue``, ``index_hash_span``, ``index_hash_of_state``, ``state_to_int32``,
``utf8_next``, ``hash_joined_range``) live in :mod:`mqstore.kernels.javahash_nb`; reading them as
attributes of this module still works (it imports that module, and numba, then).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from mqstore.errors import InvalidArgumentError
from mqstore.formats.rocketmq.javahash import index_key_hash, java_bytes_hashcode, java_string_hashcode
from mqstore.kernels.backend import native, numba_module
from mqstore.kernels.buffers import as_u8
from mqstore.kernels.registry import register
from mqstore.kernels.threads import resolve_threads, run_parallel, split_even

_NAT: Any = native("_nat_rmq_index")
_NB_NAMES = frozenset(("utf8_next", "hash_continue", "state_to_int32", "index_hash_of_state", "index_hash_span",
                       "hash_joined_range"))  # fmt: skip


def __getattr__(name: str) -> Any:  # the numba building blocks, for numba modules not yet importing javahash_nb
    if name in _NB_NAMES:
        return getattr(_nb(), name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def _nb() -> Any:
    return numba_module("mqstore.kernels.javahash_nb")


# ----------------------------------------------------------------------------- the two backends
# Each backend has the same four loops with the same arguments (outputs int32, written in place).
class _NumbaLoops:
    @staticmethod
    def spans(buf: np.ndarray, s: np.ndarray, ln: np.ndarray, out: np.ndarray) -> None:
        _nb()._hash_spans_kernel(buf, s, ln, out)

    @staticmethod
    def index_spans(buf: np.ndarray, ts: np.ndarray, tl: np.ndarray, ks: np.ndarray, kl: np.ndarray,
                    out: np.ndarray) -> None:  # fmt: skip
        _nb()._index_hash_spans_kernel(buf, ts, tl, ks, kl, out)

    @staticmethod
    def prefix_spans(buf: np.ndarray, s: np.ndarray, ln: np.ndarray, prefix: int, out: np.ndarray) -> None:
        _nb()._index_hash_keys_kernel(buf, s, ln, np.uint64(prefix), out)

    @staticmethod
    def joined(kbuf: np.ndarray, kstarts: np.ndarray, prefix: int, out: np.ndarray) -> None:
        _nb()._hash_joined_kernel(kbuf, kstarts, np.uint64(prefix), out)


class _NativeLoops:
    @staticmethod
    def spans(buf: np.ndarray, s: np.ndarray, ln: np.ndarray, out: np.ndarray) -> None:
        _NAT.hash_spans(buf, s, ln, out)

    @staticmethod
    def index_spans(buf: np.ndarray, ts: np.ndarray, tl: np.ndarray, ks: np.ndarray, kl: np.ndarray,
                    out: np.ndarray) -> None:  # fmt: skip
        _NAT.index_hash_spans(buf, ts, tl, ks, kl, out)

    @staticmethod
    def prefix_spans(buf: np.ndarray, s: np.ndarray, ln: np.ndarray, prefix: int, out: np.ndarray) -> None:
        _NAT.prefix_hash_spans(buf, s, ln, int(prefix) & 0xFFFFFFFF, out)

    @staticmethod
    def joined(kbuf: np.ndarray, kstarts: np.ndarray, prefix: int, out: np.ndarray) -> None:
        _NAT.hash_joined(kbuf, kstarts, int(prefix) & 0xFFFFFFFF, out)


def _check_spans(n: int, starts: np.ndarray, lengths: np.ndarray, what: str) -> None:
    if starts.shape != lengths.shape:
        raise InvalidArgumentError(f"{what}: starts and lengths differ in shape")
    if len(starts) and (
        int(starts.min()) < 0 or int(lengths.min()) < 0 or int((starts + lengths).max()) > n
    ):
        raise InvalidArgumentError(f"{what}: a span lies outside the buffer of {n} bytes")


#: below this many spans a call runs in the calling thread only (a pool round costs ~50 µs)
PARALLEL_MIN_SPANS = 1 << 16


def _parts(n: int, threads: int | None) -> list[tuple[int, int]]:
    t = resolve_threads(threads)
    return split_even(n, t if n >= PARALLEL_MIN_SPANS else 1)


# ----------------------------------------------------------------------------- spans of one buffer
def _hash_spans(k: Any, buf_u8: object, starts: np.ndarray, lengths: np.ndarray, threads: int | None) -> np.ndarray:
    buf = as_u8(buf_u8)
    s = np.ascontiguousarray(starts, dtype=np.int64)
    ln = np.ascontiguousarray(lengths, dtype=np.int64)
    _check_spans(len(buf), s, ln, "hash_spans")
    out = np.empty(len(s), np.int32)
    run_parallel(k.spans, [(buf, s[a:b], ln[a:b], out[a:b]) for a, b in _parts(len(s), threads)])
    return out


def hash_spans_numba(buf_u8: object, starts: np.ndarray, lengths: np.ndarray, *,
                     threads: int | None = None) -> np.ndarray:  # fmt: skip
    """Java ``String.hashCode`` of the UTF-8 strings ``buf[starts[i] : starts[i] + lengths[i]]``.

    ``threads``: how many threads share the spans (``None``: :func:`~mqstore.kernels.threads.default_threads`,
    1: the calling thread only); the result does not depend on it."""
    return _hash_spans(_NumbaLoops, buf_u8, starts, lengths, threads)


def hash_spans_native(buf_u8: object, starts: np.ndarray, lengths: np.ndarray, *,
                      threads: int | None = None) -> np.ndarray:  # fmt: skip
    """:func:`hash_spans_numba` in C (``_nat_rmq_index``)."""
    return _hash_spans(_NativeLoops, buf_u8, starts, lengths, threads)


def _index_hash_spans(k: Any, buf_u8: object, topic_starts: np.ndarray, topic_lens: np.ndarray,
                      key_starts: np.ndarray, key_lens: np.ndarray, threads: int | None) -> np.ndarray:  # fmt: skip
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
    run_parallel(k.index_spans, [(buf, ts[a:b], tl[a:b], ks[a:b], kl[a:b], out[a:b])
                                 for a, b in _parts(len(ks), threads)])  # fmt: skip
    return out


def index_hash_spans_numba(buf_u8: object, topic_starts: np.ndarray, topic_lens: np.ndarray,
                           key_starts: np.ndarray, key_lens: np.ndarray, *,
                           threads: int | None = None) -> np.ndarray:  # fmt: skip
    """IndexFile key hash of ``topic + "#" + key`` for spans of one buffer (``threads`` as for
    :func:`hash_spans`)."""
    return _index_hash_spans(_NumbaLoops, buf_u8, topic_starts, topic_lens, key_starts, key_lens, threads)


def index_hash_spans_native(buf_u8: object, topic_starts: np.ndarray, topic_lens: np.ndarray,
                            key_starts: np.ndarray, key_lens: np.ndarray, *,
                            threads: int | None = None) -> np.ndarray:  # fmt: skip
    """:func:`index_hash_spans_numba` in C (``_nat_rmq_index``)."""
    return _index_hash_spans(_NativeLoops, buf_u8, topic_starts, topic_lens, key_starts, key_lens, threads)


# ----------------------------------------------------------------------------- Python strings
def _pack_strings(strings: Sequence[str]) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    encoded = [s.encode("utf-8", "surrogatepass") for s in strings]
    lengths = np.fromiter((len(b) for b in encoded), dtype=np.int64, count=len(encoded))
    starts = np.zeros(len(encoded), np.int64)
    if len(encoded) > 1:
        np.cumsum(lengths[:-1], out=starts[1:])
    return np.frombuffer(b"".join(encoded), np.uint8), starts, lengths


def _has_surrogate(s: str) -> bool:
    return any(0xD800 <= ord(c) <= 0xDFFF for c in s)


def _hash_strings(k: Any, strings: Sequence[str]) -> np.ndarray:
    if any(not s.isascii() and _has_surrogate(s) for s in strings):
        return np.array([java_string_hashcode(s) for s in strings], np.int32)
    buf, starts, lengths = _pack_strings(strings)
    out = np.empty(len(strings), np.int32)
    k.spans(buf, starts, lengths, out)
    return out


def hash_strings_numba(strings: Sequence[str]) -> np.ndarray:
    """Java ``String.hashCode`` of many Python strings (encoded into one buffer, then the kernel).

    Lone surrogates in a string are hashed as the code unit itself, as Java does."""
    return _hash_strings(_NumbaLoops, strings)


def hash_strings_native(strings: Sequence[str]) -> np.ndarray:
    """:func:`hash_strings_numba` in C (``_nat_rmq_index``)."""
    return _hash_strings(_NativeLoops, strings)


def _index_of(h: np.ndarray) -> np.ndarray:
    v = np.abs(h.astype(np.int64))
    v[v > 0x7FFFFFFF] = 0
    return v.astype(np.int32)


def index_hash_strings_numba(keys: Sequence[str]) -> np.ndarray:
    """IndexFile key hash (``abs``, ``MIN_VALUE`` → 0) of many full index keys (``topic#key``)."""
    return _index_of(hash_strings_numba(keys))


def index_hash_strings_native(keys: Sequence[str]) -> np.ndarray:
    """:func:`index_hash_strings_numba` in C (``_nat_rmq_index``)."""
    return _index_of(hash_strings_native(keys))


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
    ``index_hash_span`` and of the kernels that finish key hashes themselves."""
    return java_string_hashcode(text) & 0xFFFFFFFF


def _index_hash_keys(k: Any, index_strings: Any, topic: str, keys: list[str]) -> np.ndarray:
    joined = "".join(keys)
    if not joined.isascii():
        return index_strings([f"{topic}#{key}" for key in keys])
    buf = np.frombuffer(joined.encode("ascii"), np.uint8)
    lengths = np.fromiter(map(len, keys), np.int64, len(keys))
    starts = np.cumsum(lengths) - lengths
    out = np.empty(len(keys), np.int32)
    if len(buf) == 0:
        buf = np.zeros(1, np.uint8)
    k.prefix_spans(buf, starts, lengths, hash_prefix_state(f"{topic}#"), out)
    return out


def index_hash_keys_numba(topic: str, keys: list[str]) -> np.ndarray:
    """IndexFile hashes (``int32``) of ``topic#key`` for many keys: one join and one encode for
    all ASCII keys, the hash continued from the state of ``topic#`` in one kernel pass.
    Non-ASCII keys take :func:`index_hash_strings`.  Raises ``TypeError`` when a key is not a
    string."""
    return _index_hash_keys(_NumbaLoops, index_hash_strings_numba, topic, keys)


def index_hash_keys_native(topic: str, keys: list[str]) -> np.ndarray:
    """:func:`index_hash_keys_numba` in C (``_nat_rmq_index``)."""
    return _index_hash_keys(_NativeLoops, index_hash_strings_native, topic, keys)


def index_hash_keys_py(topic: str, keys: list[str]) -> np.ndarray:
    """Twin of :func:`index_hash_keys`: :func:`~mqstore.formats.rocketmq.javahash.index_key_hash`
    of each ``topic#key``."""
    if any(not isinstance(k, str) for k in keys):
        raise TypeError("keys must be strings")
    return np.array([index_key_hash(f"{topic}#{k}") for k in keys], np.int32)


# Keys handed over as one ``\0``-joined ASCII buffer (the store-level batch query): the boundaries
# are found in one numpy pass and each walking thread hashes its own range of keys right before
# walking it (``javahash_nb.hash_joined_range``).
def join_keys_ascii(keys: list[str]) -> tuple[np.ndarray, np.ndarray] | None:
    """``(kbuf, starts)`` of ASCII keys joined by ``\\0`` (key ``i`` is
    ``kbuf[starts[i] : starts[i + 1] - 1]``), or None when a key is not ASCII or holds ``\\0``
    (then hash with :func:`index_hash_keys`).  Raises ``TypeError`` when a key is not a string."""
    n = len(keys)
    joined = "\0".join(keys)
    if not joined.isascii():
        return None
    kbuf = np.frombuffer(joined.encode("ascii"), np.uint8) if joined else np.zeros(0, np.uint8)
    zeros = np.flatnonzero(kbuf == 0)
    if n and len(zeros) != n - 1:
        return None
    starts = np.empty(n + 1, np.int64)
    starts[0] = 0
    starts[1:n] = zeros + 1
    starts[n] = len(kbuf) + 1
    return kbuf, starts


def _hash_joined(k: Any, kbuf: np.ndarray, kstarts: np.ndarray, prefix: int) -> np.ndarray:
    out = np.empty(len(kstarts) - 1, np.int32)
    k.joined(kbuf, np.ascontiguousarray(kstarts, np.int64), prefix, out)
    return out


def hash_joined_numba(kbuf: np.ndarray, kstarts: np.ndarray, prefix: int) -> np.ndarray:
    """IndexFile hashes (``int32``) of the keys of a :func:`join_keys_ascii` buffer, continued
    from the state ``prefix`` (:func:`hash_prefix_state` of ``topic#``)."""
    return _hash_joined(_NumbaLoops, kbuf, kstarts, prefix)


def hash_joined_native(kbuf: np.ndarray, kstarts: np.ndarray, prefix: int) -> np.ndarray:
    """:func:`hash_joined_numba` in C (``_nat_rmq_index``)."""
    return _hash_joined(_NativeLoops, kbuf, kstarts, prefix)


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


# ----------------------------------------------------------------------------- public names
_ON = _NAT is not None
hash_spans = hash_spans_native if _ON else hash_spans_numba
index_hash_spans = index_hash_spans_native if _ON else index_hash_spans_numba
hash_strings = hash_strings_native if _ON else hash_strings_numba
index_hash_strings = index_hash_strings_native if _ON else index_hash_strings_numba
index_hash_keys = index_hash_keys_native if _ON else index_hash_keys_numba
hash_joined = hash_joined_native if _ON else hash_joined_numba

register("javahash.hash_spans", hash_spans_numba, hash_spans_py, native=hash_spans_native if _ON else None)
register("javahash.index_hash_spans", index_hash_spans_numba, index_hash_spans_py,
         native=index_hash_spans_native if _ON else None)
register("javahash.hash_strings", hash_strings_numba, hash_strings_py, native=hash_strings_native if _ON else None)
register("javahash.index_hash_strings", index_hash_strings_numba, index_hash_strings_py,
         native=index_hash_strings_native if _ON else None)
register("javahash.index_hash_keys", index_hash_keys_numba, index_hash_keys_py,
         native=index_hash_keys_native if _ON else None)
register("javahash.hash_joined", hash_joined_numba, hash_joined_py, native=hash_joined_native if _ON else None)
