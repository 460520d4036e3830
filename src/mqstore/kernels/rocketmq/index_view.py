"""An IndexFile through either of its two views, for the compiled builders and walks.

IndexFiles are 4-byte aligned throughout (40-byte header, 4-byte hash slots, 20-byte items) and
big-endian.  A kernel addresses the file by *word* index (slot ``s`` is word ``HEADER_WORDS + s``,
item ``i`` starts at word ``HEADER_WORDS + slots + i * ITEM_WORDS``) through the accessors below,
which numba resolves at compile time by the view's type:

* a native ``uint32`` view of the mapping (:func:`~mqstore.kernels.endian.word_view`, a
  little-endian host and an aligned buffer): one load or store and a byte swap per field;
* the ``uint8`` buffer itself (any host, any alignment): byte by byte.

So each kernel is written once and compiled for both views.  In Python the accessors work on
either view too (slowly), which keeps them testable.  This module has no numba: the compiled forms
are registered by :mod:`.index_view_nb` (``numba.extending.overload``), which the numba kernels
import the accessors from; the native kernels (``csrc/_nat_rmq_index.c``) address the same words
with big-endian loads.
"""

from __future__ import annotations

import numpy as np

HEADER_WORDS = 10  # the 40-byte header
ITEM_WORDS = 5  # a 20-byte item


def _bytes_of(a: np.ndarray) -> np.ndarray:
    return a.view(np.uint8) if a.dtype == np.uint32 else a


def item_i32(a: np.ndarray, wi: int) -> int:
    """The big-endian int32 at word ``wi``."""
    return int.from_bytes(_bytes_of(a)[4 * wi : 4 * wi + 4].tobytes(), "big", signed=True)


def item_i64(a: np.ndarray, wi: int) -> int:
    """The big-endian int64 at words ``wi, wi + 1``."""
    return int.from_bytes(_bytes_of(a)[4 * wi : 4 * wi + 8].tobytes(), "big", signed=True)


def set_i32(a: np.ndarray, wi: int, v: int) -> None:
    """Store the low 32 bits of ``v`` big-endian at word ``wi``."""
    _bytes_of(a)[4 * wi : 4 * wi + 4] = np.frombuffer((int(v) & 0xFFFFFFFF).to_bytes(4, "big"), np.uint8)


def set_i64(a: np.ndarray, wi: int, v: int) -> None:
    """Store ``v`` big-endian at words ``wi, wi + 1``."""
    _bytes_of(a)[4 * wi : 4 * wi + 8] = np.frombuffer((int(v) & (2**64 - 1)).to_bytes(8, "big"), np.uint8)


def touch(a: np.ndarray, wi: int) -> None:
    """Prefetch the cache line of word ``wi`` (``llvm.prefetch``; nothing in Python)."""


def n_words(a: np.ndarray) -> int:
    """The number of whole words of the view."""
    return int(a.shape[0]) if a.dtype == np.uint32 else int(a.shape[0]) // 4


