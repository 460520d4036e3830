"""storage/libc: the one loader of the C library calls made through ctypes."""

from __future__ import annotations

import ctypes
import mmap
import sys

import numpy as np
import pytest

from mqstore.storage.libc import libc_function

pytestmark = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="Linux C library calls")


def test_a_function_with_its_signature_and_errno() -> None:
    msync = libc_function("msync", (ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int))
    assert msync is not None and msync.restype is ctypes.c_int
    mm = mmap.mmap(-1, 8192)
    view = np.frombuffer(mm, dtype=np.uint8)
    assert msync(view.ctypes.data, 8192, 4) == 0  # MS_SYNC of an anonymous mapping
    assert msync(view.ctypes.data + 1, 10, 4) == -1 and ctypes.get_errno() == 22  # unaligned: EINVAL
    del view
    mm.close()


def test_a_missing_function_is_none() -> None:
    assert libc_function("no_such_function_in_any_libc", (ctypes.c_int,)) is None
