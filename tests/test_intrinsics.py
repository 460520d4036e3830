"""`mqstore.kernels.intrinsics`: the prefetch hint changes nothing but speed."""

from __future__ import annotations

import numpy as np
import pytest
from numba import njit
from numba.core.errors import TypingError

from mqstore.kernels.intrinsics import prefetch


@njit(cache=False)
def _prefetch_then_sum(a, ahead):  # type: ignore[no-untyped-def]
    total = 0
    for i in range(a.shape[0]):
        if i + ahead < a.shape[0]:
            prefetch(a, i + ahead)
        total += a[i]
        a[i] = a[i] * 2
    return total


@pytest.mark.parametrize("dtype", [np.uint8, np.int32, np.uint32, np.int64])
def test_prefetch_changes_no_value(dtype: type) -> None:
    rng = np.random.default_rng(7)
    a = rng.integers(0, 100, 10_000).astype(dtype)
    before = a.copy()
    for ahead in (0, 1, 16, 20_000):
        a[:] = before
        assert _prefetch_then_sum(a, ahead) == int(before.astype(np.int64).sum())
        assert np.array_equal(a, (before * 2).astype(dtype))


def test_prefetch_types_only_arrays_and_integer_indexes() -> None:
    @njit(cache=False)
    def bad(x, i):  # type: ignore[no-untyped-def]
        prefetch(x, i)

    with pytest.raises(TypingError):
        bad(1.5, 0)
    with pytest.raises(TypingError):
        bad(np.zeros(4), 0.5)
