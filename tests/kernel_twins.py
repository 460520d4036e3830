"""Parametrising kernel tests over both implementations of a registered kernel.

``@pytest.mark.parametrize("scan", twins("rocketmq.scan_segment"))`` runs a test once with the
compiled kernel and once with its pure-Python reference (see :mod:`mqstore.kernels.registry`), the
way iceberg-python runs its decoder tests over each decoder.  ``tests/test_kernel_registry.py``
checks that every registered kernel appears in such a parametrisation.
"""

from __future__ import annotations

from typing import Any

import pytest

from mqstore.kernels.registry import kernel_impls


def twins(name: str) -> list[Any]:
    """``[compiled, reference]`` of the registered kernel ``name`` as pytest params."""
    impls = kernel_impls(name)
    return [pytest.param(fn, id=f"{name.rsplit('.', 1)[-1]}-{kind}") for kind, fn in impls.items()]


def twin_pairs(*names: str) -> list[Any]:
    """The compiled kernels of ``names`` together, then their references together, as pytest
    params of tuples (for tests of kernels that work as a set)."""
    impls = [kernel_impls(n) for n in names]
    return [pytest.param(*(i.compiled for i in impls), id="compiled"),
            pytest.param(*(i.reference for i in impls), id="reference")]
