"""Big-endian integers in byte buffers, for the compiled kernels (both stores are big-endian on disk).

``rd_*``/``wr_*`` read and write through a ``uint8`` array byte by byte: every index is checked by
the caller against its record or file, so a corrupt length can only stop a kernel.  ``bswap32`` and
the ``w_*`` readers address a native ``uint32`` view of a 4-byte-aligned buffer (IndexFiles): one
load per field instead of four, valid on a little-endian host only (see :func:`word_view`).

``as_u8`` is the zero-copy ``uint8`` view every kernel wrapper takes its buffer through.
"""

from __future__ import annotations

import numpy as np
from numba import njit

from mqstore.kernels.buffers import WORDS_OK, as_u8, word_view  # noqa: F401  (re-exported)


@njit(cache=True, nogil=True, inline="always")
def rd_i8(buf: np.ndarray, p: int) -> int:
    v = np.int64(buf[p])
    return v - 256 if v >= 128 else v


@njit(cache=True, nogil=True, inline="always")
def rd_u16(buf: np.ndarray, p: int) -> int:
    return (np.int64(buf[p]) << 8) | np.int64(buf[p + 1])


@njit(cache=True, nogil=True)
def rd_i16(buf: np.ndarray, p: int) -> int:
    v = (np.int64(buf[p]) << 8) | np.int64(buf[p + 1])
    return v - 0x10000 if v >= 0x8000 else v


@njit(cache=True, nogil=True, inline="always")
def rd_u32(buf: np.ndarray, p: int) -> int:
    return (np.int64(buf[p]) << 24) | (np.int64(buf[p + 1]) << 16) | (np.int64(buf[p + 2]) << 8) | np.int64(buf[p + 3])


@njit(cache=True, nogil=True)
def rd_i32(buf: np.ndarray, p: int) -> int:
    v = (np.int64(buf[p]) << 24) | (np.int64(buf[p + 1]) << 16) | (np.int64(buf[p + 2]) << 8) | np.int64(buf[p + 3])
    return v - 0x100000000 if v >= 0x80000000 else v


@njit(cache=True, nogil=True)
def rd_i64(buf: np.ndarray, p: int) -> int:
    v = np.uint64(0)
    for k in range(8):
        v = (v << np.uint64(8)) | np.uint64(buf[p + k])
    return np.int64(v)


@njit(cache=True, nogil=True)
def wr_i32(buf: np.ndarray, p: int, v: int) -> None:
    u = v & 0xFFFFFFFF
    buf[p] = (u >> 24) & 0xFF
    buf[p + 1] = (u >> 16) & 0xFF
    buf[p + 2] = (u >> 8) & 0xFF
    buf[p + 3] = u & 0xFF


@njit(cache=True, nogil=True)
def wr_i64(buf: np.ndarray, p: int, v: int) -> None:
    u = np.uint64(v)
    for k in range(8):
        buf[p + 7 - k] = np.uint8(u & np.uint64(0xFF))
        u = u >> np.uint64(8)


# ----------------------------------------------------------------------------- native word views


@njit(cache=True, nogil=True, inline="always")
def bswap32(v: int) -> np.uint32:
    """The low 32 bits of ``v`` byte-swapped (a big-endian word as a native one and back)."""
    u = np.uint32(v & 0xFFFFFFFF)
    return np.uint32(
        ((u & np.uint32(0xFF)) << np.uint32(24)) | ((u & np.uint32(0xFF00)) << np.uint32(8))
        | ((u >> np.uint32(8)) & np.uint32(0xFF00)) | (u >> np.uint32(24))
    )  # fmt: skip


@njit(cache=True, nogil=True, inline="always")
def w_i32(w: np.ndarray, i: int) -> int:
    """The signed big-endian int32 stored in word ``i`` of a native ``uint32`` view."""
    v = np.int64(bswap32(w[i]))
    return v - 0x100000000 if v >= 0x80000000 else v


@njit(cache=True, nogil=True, inline="always")
def w_i64(w: np.ndarray, i: int) -> int:
    """The big-endian int64 stored in words ``i, i + 1`` of a native ``uint32`` view."""
    hi = np.uint64(bswap32(w[i]))
    lo = np.uint64(bswap32(w[i + 1]))
    return np.int64((hi << np.uint64(32)) | lo)


def set_w_i32(w: np.ndarray, i: int, v: int) -> None:
    """Store ``v`` as a big-endian int32 in word ``i`` of a native view (from Python)."""
    w[i] = int.from_bytes((v & 0xFFFFFFFF).to_bytes(4, "big"), "little")


def set_w_i64(w: np.ndarray, i: int, v: int) -> None:
    """Store ``v`` as a big-endian int64 in words ``i, i + 1`` of a native view (from Python)."""
    set_w_i32(w, i, (v >> 32) & 0xFFFFFFFF)
    set_w_i32(w, i + 1, v & 0xFFFFFFFF)
