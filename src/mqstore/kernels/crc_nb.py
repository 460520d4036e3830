"""The numba kernels of :mod:`mqstore.kernels.crc` (the development path and the fallback when the
native modules are not built; imported on first use, so a process on the native path never loads numba)."""

from __future__ import annotations

import numpy as np
from numba import njit

from mqstore.kernels import native

HAVE_ISAL_CRC = native.HAVE_ISAL_CRC32
_isal_crc32, _as_voidptr = native.c_crc32, native.as_voidptr


@njit(cache=True, nogil=True)
def crc32_span(buf: np.ndarray, s: int, e: int, tbl: np.ndarray) -> int:
    """zlib CRC-32 of ``buf[s:e]`` (slice-by-8 on :data:`CRC_TABLE`)."""
    crc = np.int64(0xFFFFFFFF)
    i = s
    while i + 8 <= e:
        one = crc ^ (
            np.int64(buf[i]) | (np.int64(buf[i + 1]) << 8) | (np.int64(buf[i + 2]) << 16) | (np.int64(buf[i + 3]) << 24)
        )
        two = np.int64(buf[i + 4]) | (np.int64(buf[i + 5]) << 8) | (np.int64(buf[i + 6]) << 16) | (np.int64(buf[i + 7]) << 24)
        crc = (
            tbl[7, one & 0xFF] ^ tbl[6, (one >> 8) & 0xFF] ^ tbl[5, (one >> 16) & 0xFF] ^ tbl[4, (one >> 24) & 0xFF]
            ^ tbl[3, two & 0xFF] ^ tbl[2, (two >> 8) & 0xFF] ^ tbl[1, (two >> 16) & 0xFF] ^ tbl[0, (two >> 24) & 0xFF]
        )  # fmt: skip
        i += 8
    while i < e:
        crc = tbl[0, (crc ^ np.int64(buf[i])) & 0xFF] ^ (crc >> 8)
        i += 1
    return crc ^ 0xFFFFFFFF


@njit(cache=True, nogil=True, inline="always")
def _crc_step8(buf: np.ndarray, i: int, crc: np.uint32, t: np.ndarray) -> np.uint32:
    one = crc ^ (
        np.uint32(buf[i]) | (np.uint32(buf[i + 1]) << np.uint32(8)) | (np.uint32(buf[i + 2]) << np.uint32(16))
        | (np.uint32(buf[i + 3]) << np.uint32(24))
    )  # fmt: skip
    return (
        t[1792 + (one & np.uint32(0xFF))] ^ t[1536 + ((one >> np.uint32(8)) & np.uint32(0xFF))]
        ^ t[1280 + ((one >> np.uint32(16)) & np.uint32(0xFF))] ^ t[1024 + (one >> np.uint32(24))]
        ^ t[768 + np.uint32(buf[i + 4])] ^ t[512 + np.uint32(buf[i + 5])] ^ t[256 + np.uint32(buf[i + 6])]
        ^ t[np.uint32(buf[i + 7])]
    )  # fmt: skip


@njit(cache=True, nogil=True, inline="always")
def _crc_step16(buf: np.ndarray, i: int, crc: np.uint32, t: np.ndarray) -> np.uint32:
    one = crc ^ (
        np.uint32(buf[i]) | (np.uint32(buf[i + 1]) << np.uint32(8)) | (np.uint32(buf[i + 2]) << np.uint32(16))
        | (np.uint32(buf[i + 3]) << np.uint32(24))
    )  # fmt: skip
    return (
        t[3840 + (one & np.uint32(0xFF))] ^ t[3584 + ((one >> np.uint32(8)) & np.uint32(0xFF))]
        ^ t[3328 + ((one >> np.uint32(16)) & np.uint32(0xFF))] ^ t[3072 + (one >> np.uint32(24))]
        ^ t[2816 + np.uint32(buf[i + 4])] ^ t[2560 + np.uint32(buf[i + 5])] ^ t[2304 + np.uint32(buf[i + 6])]
        ^ t[2048 + np.uint32(buf[i + 7])] ^ t[1792 + np.uint32(buf[i + 8])] ^ t[1536 + np.uint32(buf[i + 9])]
        ^ t[1280 + np.uint32(buf[i + 10])] ^ t[1024 + np.uint32(buf[i + 11])] ^ t[768 + np.uint32(buf[i + 12])]
        ^ t[512 + np.uint32(buf[i + 13])] ^ t[256 + np.uint32(buf[i + 14])] ^ t[np.uint32(buf[i + 15])]
    )  # fmt: skip


@njit(cache=True, nogil=True)
def _crc_spans_kernel(buf: np.ndarray, starts: np.ndarray, lens: np.ndarray, t: np.ndarray, out: np.ndarray) -> None:
    # Slice-by-16 on 32-bit lanes with a uint32 table, one span after the other.  Measured on
    # 100-1000-byte spans: 1.7 GB/s (slice-by-8 on uint32: 1.5 GB/s; an int64 table and four
    # spans interleaved: 1.13 GB/s): the narrow table matters more than overlapping the chains.
    ff = np.uint32(0xFFFFFFFF)
    for k in range(starts.shape[0]):
        p = starts[k]
        e = p + lens[k]
        c = ff
        while p + 16 <= e:
            c = _crc_step16(buf, p, c, t)
            p += 16
        if p + 8 <= e:
            c = _crc_step8(buf, p, c, t)
            p += 8
        while p < e:
            c = t[(c ^ np.uint32(buf[p])) & np.uint32(0xFF)] ^ (c >> np.uint32(8))
            p += 1
        out[k] = np.int64(c ^ ff)


@njit(cache=True, nogil=True)
def _crc_spans_isal(buf: np.ndarray, starts: np.ndarray, lens: np.ndarray, out: np.ndarray) -> None:
    # ISA-L folds 64 bytes per step with PCLMULQDQ: ~8 GB/s on 100-1000-byte spans here, 4.9x the
    # table kernel, which stays as the fallback.
    base = buf.ctypes.data
    for k in range(starts.shape[0]):
        out[k] = np.int64(_isal_crc32(np.uint32(0), _as_voidptr(base + starts[k]), np.uint64(lens[k])))
