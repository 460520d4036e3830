"""Which implementation of a kernel runs: the ahead-of-time compiled C modules or the numba kernels.

mqstore's hot loops exist up to three times (see :mod:`mqstore.kernels.registry`):

* **native** – C, compiled by ``pip install`` with the machine's C compiler into the extension
  modules ``mqstore.kernels._nat_*`` (sources in ``kernels/csrc/``, built by ``setup.py``).  They
  load in microseconds, so a one-shot operator command does not pay numba's import (~0.7 s) and
  the loading of its cached machine code (~0.1-0.5 s);
* **numba** – the development path (``@njit`` kernels in the ``*_nb`` modules and the kernel
  modules not ported to C), compiled on first use and cached on disk (``mqstore warm-up``);
* **reference** – pure Python, the specification both are tested against.

A kernel module exports its public names bound to the native implementation when its extension is
built and selected, else to the numba one; the numba modules are imported only when a numba kernel
is first called.  ``MQSTORE_KERNELS`` chooses: ``auto`` (default: native where built), ``numba``
(never the native modules: the development path, and how the numba twins are exercised end to
end), ``native`` (like auto, but a missing extension module is an error rather than a fallback).
"""

from __future__ import annotations

import importlib
import importlib.util
import os
from functools import cache
from types import ModuleType

from mqstore.errors import InvalidArgumentError

ENV = "MQSTORE_KERNELS"
MODES = ("auto", "native", "numba")
CHECKSUM_LIBRARY = "isal.isal_zlib"  # the extension module that carries ISA-L's CRC functions


def mode() -> str:
    """The selected mode (``MQSTORE_KERNELS``, default ``auto``)."""
    value = os.environ.get(ENV, "auto").strip().lower() or "auto"
    if value not in MODES:
        raise InvalidArgumentError(f"{ENV}={value!r}: expected one of {', '.join(MODES)}")
    return value


@cache
def _checksum_library() -> str | None:
    """The file of the library whose ISA-L symbols the native modules bind (found without importing it)."""
    try:
        spec = importlib.util.find_spec(CHECKSUM_LIBRARY)
    except (ImportError, ValueError):  # pragma: no cover - isal is a dependency
        return None
    return spec.origin if spec is not None and spec.origin and os.path.exists(spec.origin) else None


@cache
def built(name: str) -> ModuleType | None:
    """The native extension module ``mqstore.kernels.<name>`` if it was built, else None (whatever
    the mode).  Its checksum functions are bound to ISA-L on first load."""
    try:
        mod = importlib.import_module(f"mqstore.kernels.{name}")
    except ImportError:
        return None
    bind = getattr(mod, "bind_checksums", None)
    if bind is not None:
        bind(_checksum_library())
    return mod


def native(name: str) -> ModuleType | None:
    """The native module ``name`` (e.g. ``"_nat_crc"``) when it is selected: built and the mode is
    not ``numba``.  In ``native`` mode a module that was not built raises ``InvalidArgumentError``."""
    m = mode()
    if m == "numba":
        return None
    mod = built(name)
    if mod is None and m == "native":
        raise InvalidArgumentError(
            f"{ENV}=native but the extension module mqstore.kernels.{name} is not built "
            "(reinstall with a C compiler and the Python headers: bash scripts/setup.sh)"
        )
    return mod


def numba_module(name: str) -> ModuleType:
    """The numba kernel module ``name`` (imported, and numba with it, on first use)."""
    return importlib.import_module(name)


def native_sources() -> list[str]:
    """The names of the native modules this source tree defines (``kernels/csrc/_nat_*.c``)."""
    here = os.path.join(os.path.dirname(__file__), "csrc")
    try:
        return sorted(f[:-2] for f in os.listdir(here) if f.startswith("_nat_") and f.endswith(".c"))
    except OSError:  # pragma: no cover - an installed wheel without sources
        return []


def describe() -> str:
    """One line for ``mqstore warm-up``: the mode and which native modules are built."""
    names = native_sources()
    have = [n for n in names if built(n) is not None]
    missing = sorted(set(names) - set(have))
    text = f"kernels: {mode()}; native modules built {len(have)}/{len(names)}"
    return text + (f" (missing: {', '.join(missing)}: those kernels run on numba)" if missing else "")
