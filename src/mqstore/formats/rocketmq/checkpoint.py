"""StoreCheckpoint (spec §6.1): one 4096-byte file holding five longs."""

from __future__ import annotations

import struct
from dataclasses import dataclass

from mqstore.errors import CorruptDataError

CHECKPOINT_FILE_SIZE = 4096
_FIELDS = struct.Struct(">qqqqq")


@dataclass(slots=True)
class Checkpoint:
    physic_msg_timestamp: int = 0
    logics_msg_timestamp: int = 0
    index_msg_timestamp: int = 0
    master_flushed_offset: int = 0
    confirm_phy_offset: int = 0

    def min_timestamp(self) -> int:
        """``getMinTimestamp``: ``max(0, min(physic, logics) - 3000)``."""
        return max(0, min(self.physic_msg_timestamp, self.logics_msg_timestamp) - 3000)

    def min_timestamp_index(self) -> int:
        return min(self.min_timestamp(), self.index_msg_timestamp)

    def encode(self) -> bytes:
        return _FIELDS.pack(
            self.physic_msg_timestamp,
            self.logics_msg_timestamp,
            self.index_msg_timestamp,
            self.master_flushed_offset,
            self.confirm_phy_offset,
        ).ljust(CHECKPOINT_FILE_SIZE, b"\0")

    def pack_into(self, buf: bytearray | memoryview) -> None:
        _FIELDS.pack_into(
            buf,
            0,
            self.physic_msg_timestamp,
            self.logics_msg_timestamp,
            self.index_msg_timestamp,
            self.master_flushed_offset,
            self.confirm_phy_offset,
        )

    @classmethod
    def decode(cls, data: bytes | bytearray | memoryview, path: str | None = None) -> Checkpoint:
        if len(data) < _FIELDS.size:
            raise CorruptDataError(f"checkpoint is {len(data)} bytes, expected {CHECKPOINT_FILE_SIZE}", path=path)
        return cls(*_FIELDS.unpack_from(data, 0))
