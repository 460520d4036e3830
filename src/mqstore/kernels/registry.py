"""The twin registry: every compiled kernel with its pure-Python reference (and its native C twin).

The convention of the package: a kernel ``foo`` (numba, vectorised or threaded: the fast path) has
a twin ``foo_py`` in the same module with the same signature and the same result on every input
(pure Python, written for clarity: the specification the fast path is tested against).  Each
module registers its pairs once, at import::

    register("rocketmq.scan_segment", scan_segment, scan_segment_py)

and the tests run the behaviour tests of a kernel over both implementations
(``@pytest.mark.parametrize("impl", twins("rocketmq.scan_segment"))``, see ``tests/conftest.py``)
plus property tests that compare the two on random inputs.  ``tests/test_kernel_registry.py``
checks that every registered kernel has both and is covered by a parametrised test.

A kernel ported to C (:mod:`mqstore.kernels.backend`) registers its third implementation too,
``register(name, numba_fn, reference_fn, native=native_fn)`` with ``native_fn`` None when the
extension module is not built; the tests then run over all three.

Performance knobs (``threads=``, ``lanes=``, ``use_isal=``) are not twins: they only choose how the
fast path runs and never change a result; the twin accepts and ignores them.  A compiled loop that
works on a file descriptor (:mod:`mqstore.kernels.kafka.file_scan`) is registered by the storage
module that owns the file handling (``kafka.scan_check_file``).
"""

from __future__ import annotations

import importlib
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from mqstore.errors import InvalidArgumentError


@dataclass(frozen=True, slots=True)
class KernelImpls:
    """The implementations of one registered kernel: numba (``compiled``), pure Python
    (``reference``) and, for kernels ported to C, the native one (None when not built)."""

    name: str
    compiled: Callable[..., Any]
    reference: Callable[..., Any]
    native: Callable[..., Any] | None = None

    def items(self) -> tuple[tuple[str, Callable[..., Any]], ...]:
        """``(("compiled", fn), ("reference", fn)[, ("native", fn)])``: what a test parametrises over."""
        pairs = (("compiled", self.compiled), ("reference", self.reference))
        return (*pairs, ("native", self.native)) if self.native is not None else pairs


_REGISTRY: dict[str, KernelImpls] = {}

#: the modules that register kernels (imported by :func:`all_kernels` so the registry is complete)
KERNEL_MODULES = (
    "mqstore.kernels.arrays",
    "mqstore.kernels.crc",
    "mqstore.kernels.javahash",
    "mqstore.kernels.rocketmq.framing",
    "mqstore.kernels.rocketmq.scan",
    "mqstore.kernels.rocketmq.columns",
    "mqstore.kernels.rocketmq.index_build",
    "mqstore.kernels.rocketmq.index_check",
    "mqstore.kernels.rocketmq.verify_check",
    "mqstore.kernels.rocketmq.chain_walk",
    "mqstore.kernels.rocketmq.key_match",
    "mqstore.kernels.rocketmq.json_lines",
    "mqstore.kernels.rocketmq.put",
    "mqstore.kernels.rocketmq.put_one",
    "mqstore.kernels.rocketmq.dledger",
    "mqstore.kernels.rocketmq.cq_group",
    "mqstore.kernels.kafka.batches",
    "mqstore.kernels.kafka.index_build",
    "mqstore.kernels.kafka.index_search",
    "mqstore.kernels.kafka.index_check",
    "mqstore.kernels.kafka.records",
    "mqstore.kernels.kafka.txn",
    "mqstore.kernels.kafka.offsets",
    "mqstore.kernels.kafka.json_lines",
    "mqstore.kernels.report",
)


def register(name: str, compiled: Callable[..., Any], reference: Callable[..., Any], *,
             native: Callable[..., Any] | None = None) -> None:
    """Register the twin pair ``name`` (once per name; re-registering the same pair is a no-op,
    as happens when a module is reloaded), with its native implementation when there is one."""
    if not callable(compiled) or not callable(reference) or (native is not None and not callable(native)):
        raise InvalidArgumentError(f"kernel {name!r}: every implementation must be callable")
    if compiled is reference or native is reference or native is compiled:
        raise InvalidArgumentError(f"kernel {name!r}: the reference must be a separate implementation")
    old = _REGISTRY.get(name)
    if old is not None and (old.compiled.__qualname__, old.reference.__qualname__) != (
        compiled.__qualname__, reference.__qualname__
    ):
        raise InvalidArgumentError(f"kernel {name!r} is already registered with other implementations")
    _REGISTRY[name] = KernelImpls(name, compiled, reference, native)


def kernel_impls(name: str) -> KernelImpls:
    """The implementations of the registered kernel ``name`` (its module is imported on demand)."""
    if name not in _REGISTRY:
        all_kernels()
    try:
        return _REGISTRY[name]
    except KeyError:
        raise InvalidArgumentError(f"no kernel named {name!r} is registered") from None


def all_kernels() -> dict[str, KernelImpls]:
    """Every registered kernel by name (importing every kernel module first)."""
    for mod in KERNEL_MODULES:
        importlib.import_module(mod)
    return dict(_REGISTRY)
