"""The ext files of one ConsumeQueue (``consumequeue_ext/<topic>/<queueId>/``).

Writing rule (the broker's ``ConsumeQueueExt.put``): a unit goes at the write position of the
last file when it leaves at least ``END_BLANK_DATA_LENGTH`` (4) bytes free before the file's end;
otherwise ``short -1`` is written at the write position, the file counts as full and the unit
goes at the start of a new file.  The address of a unit is its global offset + ``Long.MIN_VALUE``.

Durability: like the ConsumeQueue itself, ext files are derived data written through the
mapping and ``msync``ed by the ConsumeQueue flush; a rebuild regenerates them from the CommitLog.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

from mqstore.errors import CorruptDataError, OffsetOutOfRangeError
from mqstore.formats.rocketmq.consumequeue_ext import (
    END_BLANK_DATA_LENGTH,
    END_MARK,
    MAX_REAL_OFFSET,
    MIN_EXT_UNIT_SIZE,
    ExtUnit,
    decode_ext_unit,
    decorate,
    decorate_many,
    encode_ext_unit,
    encode_plain_units,
    is_ext_addr,
    scan_end,
    undecorate,
)
from mqstore.storage.mapped import MappedFile, MappedFileQueue


class ConsumeQueueExt:
    def __init__(self, directory: Path, file_size: int, *, read_only: bool = False) -> None:
        self.directory = Path(directory)
        self.file_size = file_size
        self.queue = MappedFileQueue(self.directory, file_size, read_only=read_only)

    def load(self) -> None:
        self.queue.load()

    def recover(self) -> None:
        """The written end of every file is where its units stop (first size below 1)."""
        files = self.queue.files
        for mf in files[:-1]:  # the broker's recovery keeps every file before the last whole
            mf.wrote_position = mf.flushed_position = mf.file_size
        if files:
            last = files[-1]
            last.wrote_position = last.flushed_position = scan_end(last.mm, last.file_size)

    @property
    def total_size(self) -> int:
        return sum(f.file_size for f in self.queue.files)

    # ------------------------------------------------------------------ read
    def get(self, address: int) -> ExtUnit:
        """The unit at ``address``; a typed error when it is not an address, lies outside the ext
        files, or is not a whole unit there."""
        if not is_ext_addr(address):
            raise CorruptDataError(f"tags code {address} is not a ConsumeQueueExt address")
        real = undecorate(address)
        mf = self.queue.find(real)
        if mf is None:
            raise OffsetOutOfRangeError(
                f"ConsumeQueueExt address {address} (offset {real}) lies outside the ext files of {self.directory}")
        pos = real - mf.file_from_offset
        if pos >= mf.wrote_position:
            raise OffsetOutOfRangeError(
                f"ConsumeQueueExt address {address} (offset {real}) lies past the written end "
                f"{mf.file_from_offset + mf.wrote_position} of the ext files", path=str(mf.path))
        return decode_ext_unit(mf.mm, pos, mf.wrote_position)

    def get_tags_codes(self, tags: np.ndarray) -> np.ndarray:
        """The real tag hashes behind an array of tags codes (addresses resolved, others kept)."""
        out = np.asarray(tags, dtype=np.int64).copy()
        for i in np.flatnonzero(out <= -(2**31) - 1).tolist():
            out[i] = self.get(int(out[i])).tags_code
        return out

    # ------------------------------------------------------------------ write
    def _fits(self, mf: MappedFile, size: int) -> bool:
        return size <= self.file_size - mf.wrote_position - END_BLANK_DATA_LENGTH

    def _fill_to_end(self, mf: MappedFile) -> None:
        mf.write_at(mf.wrote_position, END_MARK.to_bytes(2, "big", signed=True))
        mf.wrote_position = self.file_size

    def _writable_last(self) -> MappedFile:
        mf = self.queue.last()
        if mf is None or mf.is_full():
            mf = self.queue.get_last_or_create(0)
        return mf

    def put(self, unit: ExtUnit) -> int | None:
        """Append one unit; its address, or ``None`` when the broker's writer would have refused it
        (unit too large, address space exhausted): the caller then keeps the plain tags code."""
        data = encode_ext_unit(unit) if unit.size <= 32767 else None
        if data is None or self.queue.max_offset + len(data) > MAX_REAL_OFFSET:
            return None
        for _ in range(3):
            mf = self._writable_last()
            if not self._fits(mf, len(data)):
                self._fill_to_end(mf)
                continue
            pos = mf.append(data)
            return decorate(mf.file_from_offset + pos)
        return None

    def put_plain_many(self, tags_codes: np.ndarray, store_times: np.ndarray) -> np.ndarray:
        """Append units without bitmap (20 bytes each) for many messages; their addresses."""
        n = len(tags_codes)
        addrs = np.empty(n, np.int64)
        done = 0
        while done < n:
            mf = self._writable_last()
            room = (self.file_size - mf.wrote_position - END_BLANK_DATA_LENGTH) // MIN_EXT_UNIT_SIZE
            if room <= 0:
                self._fill_to_end(mf)
                continue
            take = min(room, n - done)
            start = mf.file_from_offset + mf.wrote_position
            mf.append(encode_plain_units(tags_codes[done : done + take], store_times[done : done + take]))
            addrs[done : done + take] = decorate_many(start + MIN_EXT_UNIT_SIZE * np.arange(take, dtype=np.int64))
            done += take
        return addrs

    def truncate_after(self, address: int | None) -> None:
        """Drop the ext data past the unit at ``address`` (``None``: drop everything) — what
        recovery keeps after the ConsumeQueue's own tail was cut."""
        if address is None:
            for mf in list(self.queue.files):
                mf.destroy()
            self.queue.files = []
            return
        try:
            unit = self.get(address)
        except (CorruptDataError, OffsetOutOfRangeError):
            return
        end = undecorate(address) + unit.size
        self.queue.truncate_dirty(end)

    def flush(self, least_pages: int = 0) -> None:
        self.queue.flush(least_pages)

    def close(self) -> None:
        self.queue.close()

    def destroy(self) -> None:
        self.queue.destroy()
