"""ConsumeQueue units (spec §2.1): ``long commitLogOffset, int size, long tagsCode`` = 20 bytes."""

from __future__ import annotations

import struct
from typing import NamedTuple

import numpy as np

from mqstore.errors import TruncatedRecordError

CQ_UNIT_SIZE = 20
DEFAULT_CQ_FILE_SIZE = 300_000 * CQ_UNIT_SIZE
INT_MAX = 2**31 - 1
_UNIT = struct.Struct(">qiq")

#: numpy record dtype of a unit, for zero-copy views of whole files.
CQ_DTYPE = np.dtype([("offset", ">i8"), ("size", ">i4"), ("tags_code", ">i8")])
assert CQ_DTYPE.itemsize == CQ_UNIT_SIZE


class CQUnit(NamedTuple):
    commit_log_offset: int
    size: int
    tags_code: int

    @property
    def is_valid(self) -> bool:
        """Recovery's rule: ``offset >= 0 and size > 0`` (blank pre-fill units count as valid)."""
        return self.commit_log_offset >= 0 and self.size > 0

    @property
    def is_blank(self) -> bool:
        return self.commit_log_offset == 0 and self.size == INT_MAX and self.tags_code == 0


BLANK_UNIT = CQUnit(0, INT_MAX, 0)


def cq_file_size(configured: int) -> int:
    """The getter of ``mappedFileSizeConsumeQueue`` rounds up to a multiple of 20."""
    return -(-configured // CQ_UNIT_SIZE) * CQ_UNIT_SIZE


def encode_unit(commit_log_offset: int, size: int, tags_code: int) -> bytes:
    return _UNIT.pack(commit_log_offset, size, tags_code)


def decode_unit(buf: bytes | bytearray | memoryview, pos: int = 0) -> CQUnit:
    if pos < 0 or pos + CQ_UNIT_SIZE > len(buf):
        raise TruncatedRecordError(f"no whole 20-byte ConsumeQueue unit at position {pos} of {len(buf)} bytes",
                                   offset=pos)
    return CQUnit(*_UNIT.unpack_from(buf, pos))


def units_view(buf: bytes | bytearray | memoryview, count: int | None = None) -> np.ndarray:
    """A zero-copy structured view of the units in ``buf``."""
    n = len(buf) // CQ_UNIT_SIZE if count is None else count
    return np.frombuffer(buf, dtype=CQ_DTYPE, count=n)
