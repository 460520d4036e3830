"""The mapped ``checkpoint`` file (spec §6.1)."""

from __future__ import annotations

import mmap
import os
from pathlib import Path

from mqstore.errors import CorruptDataError, ReadOnlyStoreError
from mqstore.formats.rocketmq.checkpoint import CHECKPOINT_FILE_SIZE, Checkpoint


class StoreCheckpoint:
    """Five longs in a 4096-byte file; values are read when the file exists, written on flush."""

    def __init__(self, path: Path, *, read_only: bool = False) -> None:
        self.path = Path(path)
        self.read_only = read_only
        self.values = Checkpoint()
        self._mm: mmap.mmap | None = None
        existed = self.path.exists()
        if existed:
            size = self.path.stat().st_size
            if size < 40:
                raise CorruptDataError(f"checkpoint file is {size} bytes, expected {CHECKPOINT_FILE_SIZE}", path=str(self.path))
            with open(self.path, "rb") as fh:
                self.values = Checkpoint.decode(fh.read(40), path=str(self.path))
        if read_only:
            return
        fd = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o644)
        try:
            if os.fstat(fd).st_size < CHECKPOINT_FILE_SIZE:
                os.ftruncate(fd, CHECKPOINT_FILE_SIZE)
            self._mm = mmap.mmap(fd, CHECKPOINT_FILE_SIZE, access=mmap.ACCESS_WRITE)
        finally:
            os.close(fd)

    def flush(self) -> None:
        """Write all five fields and ``msync`` (the only moment the file changes)."""
        if self._mm is None:
            if self.read_only:
                raise ReadOnlyStoreError("checkpoint opened read-only", path=str(self.path))
            return
        self.values.pack_into(self._mm)
        self._mm.flush()

    def flush_fields(self, **values: int) -> None:
        """Write only the named fields (8 bytes each, in place) and ``msync``: two processes that
        own different fields (a writer and an external dispatcher) never undo each other."""
        import struct

        from mqstore.formats.rocketmq.checkpoint import Checkpoint

        names = list(Checkpoint.__dataclass_fields__)
        for name, value in values.items():
            setattr(self.values, name, int(value))
            if self._mm is not None:
                struct.pack_into(">q", self._mm, 8 * names.index(name), int(value))
        if self._mm is None:
            if self.read_only:
                raise ReadOnlyStoreError("checkpoint opened read-only", path=str(self.path))
            return
        self._mm.flush()

    def close(self) -> None:
        if self._mm is not None:
            self._mm.close()
            self._mm = None
