"""C functions that compiled kernels call by symbol name: ISA-L's checksums and libc's ``pread``.

ISA-L ships inside the ``isal`` package's extension module; loading that module's file into the
LLVM symbol table once makes ``crc32_gzip_refl`` (zlib's CRC-32) and ``crc32_iscsi`` (CRC-32C)
resolvable from numba code, so a kernel checksums a span where it is, without a Python call per
span, and numba's cache stays valid (the calls are bound by name, not by address).
"""

from __future__ import annotations

from typing import Any

from numba import types
from numba.core import cgutils
from numba.extending import intrinsic

SYMBOLS = ("pread", "crc32_iscsi", "crc32_gzip_refl")


def _load() -> frozenset[str]:
    """The symbols of :data:`SYMBOLS` that compiled code can call (empty when ``isal`` is missing)."""
    try:
        import isal.isal_zlib as isal_zlib
        import llvmlite.binding as llvm

        llvm.load_library_permanently(isal_zlib.__file__)
        return frozenset(s for s in SYMBOLS if llvm.address_of_symbol(s))
    except Exception:  # pragma: no cover - isal missing, or a platform without these symbols
        return frozenset()


AVAILABLE = _load()
HAVE_ISAL_CRC32 = "crc32_gzip_refl" in AVAILABLE
HAVE_ISAL_CRC32C = "crc32_iscsi" in AVAILABLE
HAVE_PREAD = "pread" in AVAILABLE

c_pread = types.ExternalFunction("pread", types.intp(types.intc, types.voidptr, types.uintp, types.int64))
c_crc32c = types.ExternalFunction("crc32_iscsi", types.uint32(types.voidptr, types.intc, types.uint32))
c_crc32 = types.ExternalFunction("crc32_gzip_refl", types.uint32(types.uint32, types.voidptr, types.uint64))


@intrinsic
def as_voidptr(typingctx: Any, addr: Any) -> Any:
    """An integer address (e.g. ``array.ctypes.data + offset``) as a ``void*`` for a C call."""
    sig = types.voidptr(types.intp)

    def codegen(context: Any, builder: Any, signature: Any, args: Any) -> Any:
        return builder.inttoptr(args[0], cgutils.voidptr_t)

    return sig, codegen
