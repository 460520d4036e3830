"""Parametrising kernel tests over every implementation of a registered kernel.

``@pytest.mark.parametrize("scan", twins("rocketmq.scan_segment"))`` runs a test once with the
compiled (numba) kernel, once with its pure-Python reference and, for a kernel ported to C, once
with the native one (see :mod:`mqstore.kernels.registry`), the
way iceberg-python runs its decoder tests over each decoder.  ``tests/test_kernel_registry.py``
checks that every registered kernel appears in such a parametrisation.
"""

from __future__ import annotations

from typing import Any

import pytest

from mqstore.kernels.registry import kernel_impls


def twins(name: str) -> list[Any]:
    """``[compiled, reference(, native)]`` of the registered kernel ``name`` as pytest params."""
    impls = kernel_impls(name)
    return [pytest.param(fn, id=f"{name.rsplit('.', 1)[-1]}-{kind}") for kind, fn in impls.items()]


def twin_pairs(*names: str) -> list[Any]:
    """The compiled kernels of ``names`` together, then their references together (then their
    native ones, when every one of them has a native implementation), as pytest params of tuples
    (for tests of kernels that work as a set)."""
    impls = [kernel_impls(n) for n in names]
    params = [pytest.param(*(i.compiled for i in impls), id="compiled"),
              pytest.param(*(i.reference for i in impls), id="reference")]
    if all(i.native is not None for i in impls):
        params.append(pytest.param(*(i.native for i in impls), id="native"))
    return params
