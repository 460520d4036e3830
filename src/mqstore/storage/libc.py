"""The C library calls the storage layer makes through ctypes, with one loader.

The process's own C library is used (``CDLL(None)``: no ``ctypes.util.find_library``, which runs
``ldconfig`` in a subprocess), and ctypes releases the GIL for each call, which is why these
calls are made this way rather than through ``mmap``/``os`` (``mmap.flush`` holds the GIL).
"""

from __future__ import annotations

import ctypes
import sys
from functools import cache
from typing import Any


@cache
def _libc() -> ctypes.CDLL:
    return ctypes.CDLL(None, use_errno=True)


def libc_function(name: str, argtypes: tuple[Any, ...], restype: Any = ctypes.c_int) -> Any:
    """``name`` of the process's C library with its signature set, or ``None`` where there is no
    such function (not Linux, not glibc, an old glibc).  Errors of a call are read with
    ``ctypes.get_errno()``."""
    if not sys.platform.startswith("linux"):
        return None
    try:
        fn = getattr(_libc(), name)
    except (OSError, AttributeError):
        return None
    fn.argtypes = argtypes
    fn.restype = restype
    return fn
