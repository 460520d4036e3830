"""An IndexFile through either of its two views, for the compiled builders and walks.

IndexFiles are 4-byte aligned throughout (40-byte header, 4-byte hash slots, 20-byte items) and
big-endian.  A kernel addresses the file by *word* index (slot ``s`` is word ``HEADER_WORDS + s``,
item ``i`` starts at word ``HEADER_WORDS + slots + i * ITEM_WORDS``) through the accessors below,
which numba resolves at compile time by the view's type:

* a native ``uint32`` view of the mapping (:func:`~mqstore.kernels.endian.word_view`, a
  little-endian host and an aligned buffer): one load or store and a byte swap per field;
* the ``uint8`` buffer itself (any host, any alignment): byte by byte.

So each kernel is written once and compiled for both views.  In Python the accessors work on
either view too (slowly), which keeps them testable.
"""

from __future__ import annotations

import warnings
from typing import Any

import numpy as np
from numba import types
from numba.core.errors import NumbaIRAssumptionWarning
from numba.extending import overload

from mqstore.kernels.endian import bswap32, rd_i32, rd_i64, w_i32, w_i64, wr_i32, wr_i64
from mqstore.kernels.intrinsics import prefetch

# numba's own pedantic IR check warns when it inlines these accessors into a loop ("variable
# '_item_i32_impl.<locals>.from_words...' is not in scope"): a note about its SSA pass, not about
# the compiled code (the twin tests compare every kernel's results).  It would reach users as a
# "please report this" text on their first command, so it is silenced for these accessors only.
warnings.filterwarnings("ignore", message=r"variable '_(item|set)_i(32|64)_impl", category=NumbaIRAssumptionWarning)

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


def _is_bytes(a: Any) -> bool:
    return isinstance(a, types.Array) and a.dtype == types.uint8


@overload(item_i32, inline="always")
def _item_i32_impl(a: Any, wi: Any) -> Any:
    if _is_bytes(a):
        def from_bytes(a: Any, wi: Any) -> Any:
            return rd_i32(a, wi * 4)
        return from_bytes

    def from_words(a: Any, wi: Any) -> Any:
        return w_i32(a, wi)
    return from_words


@overload(item_i64, inline="always")
def _item_i64_impl(a: Any, wi: Any) -> Any:
    if _is_bytes(a):
        def from_bytes(a: Any, wi: Any) -> Any:
            return rd_i64(a, wi * 4)
        return from_bytes

    def from_words(a: Any, wi: Any) -> Any:
        return w_i64(a, wi)
    return from_words


@overload(set_i32, inline="always")
def _set_i32_impl(a: Any, wi: Any, v: Any) -> Any:
    if _is_bytes(a):
        def to_bytes(a: Any, wi: Any, v: Any) -> Any:
            wr_i32(a, wi * 4, v)
        return to_bytes

    def to_words(a: Any, wi: Any, v: Any) -> Any:
        a[wi] = bswap32(v)
    return to_words


@overload(set_i64, inline="always")
def _set_i64_impl(a: Any, wi: Any, v: Any) -> Any:
    if _is_bytes(a):
        def to_bytes(a: Any, wi: Any, v: Any) -> Any:
            wr_i64(a, wi * 4, v)
        return to_bytes

    def to_words(a: Any, wi: Any, v: Any) -> Any:
        a[wi] = bswap32(v >> 32)
        a[wi + 1] = bswap32(v)
    return to_words


@overload(touch, inline="always")
def _touch_impl(a: Any, wi: Any) -> Any:
    if _is_bytes(a):
        def in_bytes(a: Any, wi: Any) -> Any:
            prefetch(a, wi * 4)
        return in_bytes

    def in_words(a: Any, wi: Any) -> Any:
        prefetch(a, wi)
    return in_words


@overload(n_words, inline="always")
def _n_words_impl(a: Any) -> Any:
    if _is_bytes(a):
        def of_bytes(a: Any) -> Any:
            return a.shape[0] // 4
        return of_bytes

    def of_words(a: Any) -> Any:
        return a.shape[0]
    return of_words
