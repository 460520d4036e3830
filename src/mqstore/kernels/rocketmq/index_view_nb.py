"""The compiled forms of the :mod:`.index_view` accessors (numba ``overload`` functions): the numba
kernels import the accessors from here, which registers them with numba first.
"""

from __future__ import annotations

import warnings
from typing import Any

from numba import types
from numba.core.errors import NumbaIRAssumptionWarning
from numba.extending import overload

from mqstore.kernels.endian import bswap32, rd_i32, rd_i64, w_i32, w_i64, wr_i32, wr_i64
from mqstore.kernels.intrinsics import prefetch
from mqstore.kernels.rocketmq.index_view import (
    HEADER_WORDS,
    ITEM_WORDS,
    item_i32,
    item_i64,
    n_words,
    set_i32,
    set_i64,
    touch,
)

__all__ = ["HEADER_WORDS", "ITEM_WORDS", "item_i32", "item_i64", "n_words", "set_i32", "set_i64", "touch"]

# numba's own pedantic IR check warns when it inlines these accessors into a loop ("variable
# '_item_i32_impl.<locals>.from_words...' is not in scope"): a note about its SSA pass, not about
# the compiled code (the twin tests compare every kernel's results).  It would reach users as a
# "please report this" text on their first command, so it is silenced for these accessors only.
warnings.filterwarnings("ignore", message=r"variable '_(item|set)_i(32|64)_impl", category=NumbaIRAssumptionWarning)


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
