"""``kernels.arrays.unique`` (by sorting) gives ``numpy.unique``'s answers: values, inverse, counts."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from kernel_twins import twins
from mqstore.kernels.arrays import unique, unique_py

ints = st.lists(st.integers(-(2**63), 2**63 - 1) | st.integers(-5, 5), max_size=200)


@pytest.mark.parametrize("impl", twins("arrays.unique"))
def test_unique_values_inverse_and_counts(impl: Any) -> None:
    a = np.array([5, -1, 5, 3, 3, 3, -1, 9], np.int64)
    assert impl(a).tolist() == [-1, 3, 5, 9]
    values, inverse, counts = impl(a, return_inverse=True, return_counts=True)
    assert values.tolist() == [-1, 3, 5, 9]
    assert inverse.tolist() == [2, 0, 2, 1, 1, 1, 0, 3]
    assert counts.tolist() == [2, 3, 2, 1]
    assert impl(np.empty(0, np.int32)).tolist() == []


@given(ints, st.booleans(), st.booleans())
@settings(max_examples=300, deadline=None)
def test_unique_equals_numpy(values: list[int], inverse: bool, counts: bool) -> None:
    a = np.array(values, np.int64)
    got = unique(a, return_inverse=inverse, return_counts=counts)
    want = unique_py(a, return_inverse=inverse, return_counts=counts)
    if not isinstance(want, tuple):
        got, want = (got,), (want,)
    assert len(got) == len(want)
    for g, w in zip(got, want, strict=True):
        assert g.tolist() == w.reshape(-1).tolist()
        assert g.dtype == w.dtype
