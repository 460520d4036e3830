"""The twin registry: every compiled kernel has a pure-Python reference and a test that runs over
both (``twins(name)`` of ``tests/kernel_twins.py``)."""

from __future__ import annotations

import ast
import inspect
from pathlib import Path

import pytest

import mqstore.storage.kafka.file_scan  # noqa: F401  (registers the file-level twin of the compiled walk)
from mqstore.errors import InvalidArgumentError
from mqstore.kernels import registry
from mqstore.kernels.registry import KERNEL_MODULES, all_kernels, kernel_impls, register

TESTS = Path(__file__).resolve().parent


def _twin_names_in_tests() -> set[str]:
    """Kernel names passed to ``twins("...")`` or ``twin_pairs(...)`` anywhere under tests/."""
    names: set[str] = set()
    for path in TESTS.rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id in ("twins", "twin_pairs"):
                names.update(a.value for a in node.args if isinstance(a, ast.Constant))
    return names


def test_every_kernel_module_registers_a_kernel() -> None:
    kernels = all_kernels()
    modules = {impls.compiled.__module__ for impls in kernels.values()}
    assert set(KERNEL_MODULES) <= modules


@pytest.mark.parametrize("name", sorted(all_kernels()))
def test_registered_kernel_has_two_implementations(name: str) -> None:
    impls = kernel_impls(name)
    assert impls.name == name
    assert callable(impls.compiled) and callable(impls.reference)
    assert impls.compiled is not impls.reference
    # the twin lives beside the kernel and takes the same arguments
    assert impls.reference.__module__ == impls.compiled.__module__
    if not hasattr(impls.compiled, "py_func"):  # numba dispatchers hide their signature
        assert list(inspect.signature(impls.compiled).parameters) == list(inspect.signature(impls.reference).parameters)


def test_every_registered_kernel_has_a_parametrised_test() -> None:
    missing = sorted(set(all_kernels()) - _twin_names_in_tests())
    assert missing == []


def test_twins_in_tests_name_registered_kernels() -> None:
    unknown = sorted(_twin_names_in_tests() - set(all_kernels()))
    assert unknown == []


def test_register_rejects_bad_pairs(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(registry, "_REGISTRY", dict(registry._REGISTRY))

    def fast(x: int) -> int:
        return x

    def slow(x: int) -> int:
        return x

    with pytest.raises(InvalidArgumentError):
        register("test.same", fast, fast)
    with pytest.raises(InvalidArgumentError):
        register("test.not_callable", fast, 3)  # type: ignore[arg-type]
    register("test.pair", fast, slow)
    register("test.pair", fast, slow)  # a module reload registers the same pair again
    assert kernel_impls("test.pair").items() == (("compiled", fast), ("reference", slow))
    with pytest.raises(InvalidArgumentError):
        register("test.pair", slow, fast)
    with pytest.raises(InvalidArgumentError):
        kernel_impls("test.no_such_kernel")
