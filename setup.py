"""Build step of mqstore: the ahead-of-time compiled kernels.

Everything else about the package is declared in ``pyproject.toml``.  This file only adds the C
extension modules of ``src/mqstore/kernels/csrc/`` (one module per ``_nat_*.c`` file, sharing the
headers there), compiled by ``pip install`` with the machine's C compiler.  They are optional: a
machine without a compiler or Python headers still installs, and the kernels then run on the
numba path (see ``mqstore.kernels.backend``).  ``MQSTORE_REQUIRE_NATIVE=1`` makes a failed build
an installation error instead (CI and ``scripts/setup.sh`` set it when a compiler is present).

No ``-march=native``: a virtual environment may be packed and shipped to other machines
(``mqstore spark pack-env``); the code picks CPU-specific paths at run time.
"""

from __future__ import annotations

import os
from pathlib import Path

from setuptools import Extension, setup

CSRC = Path("src") / "mqstore" / "kernels" / "csrc"
REQUIRED = os.environ.get("MQSTORE_REQUIRE_NATIVE", "") not in ("", "0")


def native_extensions() -> list[Extension]:
    """One extension ``mqstore.kernels._nat_X`` per ``csrc/_nat_X.c``."""
    headers = sorted(p.as_posix() for p in CSRC.glob("*.h"))
    return [
        Extension(
            f"mqstore.kernels.{src.stem}",
            sources=[src.as_posix()],
            depends=headers,
            include_dirs=[CSRC.as_posix()],
            extra_compile_args=["-O3", "-std=c11", "-fno-strict-aliasing", "-Wall", "-Wno-unused-function"],
            libraries=["dl"],
            optional=not REQUIRED,
        )
        for src in sorted(CSRC.glob("_nat_*.c"))
    ]


setup(ext_modules=native_extensions())
