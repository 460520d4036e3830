"""Buffer views for the kernel wrappers (numpy only: no numba, so the native path can use them).

``as_u8`` is the zero-copy ``uint8`` view every kernel wrapper takes its buffer through;
``word_view`` the native ``uint32`` view of a buffer of big-endian words (IndexFiles), valid on a
little-endian host only.
"""

from __future__ import annotations

import sys

import numpy as np

WORDS_OK = sys.byteorder == "little"


def as_u8(buf: object) -> np.ndarray:
    """A zero-copy ``uint8`` view of a bytes-like object (or a numpy array)."""
    if isinstance(buf, np.ndarray):
        return buf.view(np.uint8).reshape(-1) if buf.dtype != np.uint8 else buf.reshape(-1)
    return np.frombuffer(buf, dtype=np.uint8)  # type: ignore[call-overload]


def word_view(buf_u8: object) -> np.ndarray | None:
    """The native ``uint32`` view of a buffer of big-endian words, or None (big-endian host,
    unaligned buffer or a length that is not a multiple of 4: callers use the byte kernels)."""
    buf = as_u8(buf_u8)
    if not WORDS_OK or buf.ctypes.data % 4 or len(buf) % 4:
        return None
    return buf.view(np.uint32)
