"""Kafka's sparse offset index (``.index``) and time index (``.timeindex``) over mmap'd files.

Behaviour follows spec §3 exactly (Kafka's ``AbstractIndex``/``OffsetIndex``/``TimeIndex``):

* a **new** file is preallocated to ``entry_size × floor(max_index_size / entry_size)`` zero bytes;
* an **existing** file is trusted by length: ``entries = max_entries = floor(length / entry_size)``
  (pass ``stop_at_padding=True`` to stop at the zero padding of an untrimmed file instead, the rule
  of Kafka's DumpLogSegments: the first slot > 0 whose relative offset is 0);
* searches are the warm-section split binary searches of §3.7, quirks included;
* ``close()`` trims the file to its valid entries (writable indexes only).

Durability: entries are written into a shared mapping, so they reach the page cache at once (they
survive a crash of the process); :meth:`flush` (``msync``) makes them durable across an OS crash.
Nothing is guaranteed about an index that was not flushed and trimmed: after an unclean shutdown
indexes are rebuilt from the ``.log`` (:meth:`LogSegment.recover`).
"""

from __future__ import annotations

import mmap
import os
import struct
from array import array
from bisect import bisect_right
from pathlib import Path
from typing import Any

import numpy as np

from mqstore.errors import (
    CorruptIndexError,
    IndexFullError,
    IndexOrderError,
    InvalidArgumentError,
    OffsetOverflowError,
)
from mqstore.formats.kafka.index_entry import OffsetPosition, TimestampOffset
from mqstore.kernels.kafka.index_search import (
    index_lookup_many,
    index_search_many,
    index_search_py,
    index_search_sorted,
)
from mqstore.storage.kafka.index_sanity import (
    WARM_SECTION_BYTES,
    offset_index_sanity_error,
    time_index_sanity_error,
)
from mqstore.storage.mapped import size_file

INT32_MAX = (1 << 31) - 1


_TOP_STRIDE = 64
_bisect_right = bisect_right
_tuple_new = tuple.__new__  # NamedTuple entries without the Python-level __new__ frame


class _FastSearch:
    """Search cache of the single-call lookups: the key and value columns (absolute) as native
    arrays (8 bytes per entry each), a small list of every 64th key (bisected first, so the
    probes of one lookup touch two short ranges) and whether the keys strictly increase (only
    then a C ``bisect`` gives Kafka's exact answer).  Appends extend it in place."""

    __slots__ = ("inc", "keys", "top", "vals")

    def __init__(self, keys: np.ndarray, vals: np.ndarray) -> None:
        self.keys = array("q", keys.astype(np.int64).tobytes())
        self.vals = array("q", vals.astype(np.int64).tobytes())
        self.top = array("q", keys[::_TOP_STRIDE].astype(np.int64).tobytes())  # contiguous: fewer cache misses
        self.inc = bool(keys.shape[0] < 2 or np.all(keys[1:] > keys[:-1]))

    def append(self, k: int, v: int) -> None:
        keys = self.keys
        n = len(keys)
        self.inc = self.inc and (n == 0 or k > keys[-1])
        keys.append(k)
        self.vals.append(v)
        if n % _TOP_STRIDE == 0:
            self.top.append(k)

    def slot(self, target: int) -> int:
        """Greatest slot whose key ≤ target (−1 if none); keys must strictly increase."""
        i = bisect_right(self.top, target) - 1
        if i < 0:
            return -1
        lo = i * _TOP_STRIDE
        return bisect_right(self.keys, target, lo, min(lo + _TOP_STRIDE, len(self.keys))) - 1


def live_entry_count(rel: np.ndarray, slot0_all_zero: bool) -> int:
    """How many entries a preallocated (zero-padded, untrimmed) index file really holds.

    ``rel`` is the relative-offset column of every whole slot of the file.  A live broker's active
    segment keeps its index files preallocated to ``segment.index.bytes`` (rounded down to the entry
    size) with zeros after the entries it appended; the entry count lives only in the broker's
    memory (the mmap position).  Offline it is recovered as follows:

    * the entries end at the first slot > 0 whose relative offset is 0 (DumpLogSegments' rule:
      offsets strictly increase inside an index, so only slot 0 may hold relative offset 0);
    * when the file is padded and slot 0 is all zero as well, the index holds no entry at all
      (Kafka never indexes position 0 — an entry needs more than ``index.interval.bytes`` before
      it — so ``(0, 0)`` in ``.index`` and ``(0 ms, 0)`` in ``.timeindex`` are padding).

    A file without any such slot (trimmed, or full) holds ``len(rel)`` entries.
    """
    n = int(rel.shape[0])
    if n > 1:
        zeros = np.nonzero(rel[1:] == 0)[0]
        if zeros.shape[0]:
            n = int(zeros[0]) + 1
            if n == 1 and slot0_all_zero:
                n = 0
    return n


def round_down(n: int, factor: int) -> int:
    return factor * (n // factor)


class _Column:
    """Sequence view of one column of the mapped entries (for the scalar search twin)."""

    __slots__ = ("_add", "_fmt", "_idx", "_mm", "_size")

    def __init__(self, mm: Any, fmt: struct.Struct, idx: int, size: int, add: int) -> None:
        self._mm, self._fmt, self._idx, self._size, self._add = mm, fmt, idx, size, add

    def __getitem__(self, slot: int) -> int:
        return self._fmt.unpack_from(self._mm, slot * self._size)[self._idx] + self._add


class AbstractIndex:
    """Shared mechanics of both index kinds: file, mapping, entry count, search, resize."""

    ENTRY_SIZE = 0
    _ENTRY: struct.Struct
    _KEY_IS_OFFSET = True  # key column holds (relative) offsets
    _REL_SLOT = 0  # struct index of the relative offset

    def __init__(
        self,
        path: str | os.PathLike[str],
        base_offset: int,
        max_index_size: int = -1,
        *,
        writable: bool = True,
        stop_at_padding: bool = False,
    ) -> None:
        self.path = Path(path)
        self.base_offset = int(base_offset)
        self.max_index_size = int(max_index_size)
        self.writable = writable
        self._mm: mmap.mmap | None = None
        self._fd = -1
        self._cache: dict[str, np.ndarray] = {}
        # Search cache of the single-call lookups: (keys, values, strictly increasing), absolute
        # values in native arrays (8 bytes per column entry), kept in step with appends.
        self._fast: _FastSearch | None = None
        self.padded = False
        exists = self.path.exists()
        self.missing = False
        if not exists:
            if not writable:
                # a read-only view of an index that was never created: empty
                self.missing = True
                self._length = 0
                self._entries = 0
                self._max_entries = 0
                self._after_load()
                return
            if self.max_index_size < self.ENTRY_SIZE:
                raise InvalidArgumentError(f"Invalid max index size: {self.max_index_size}", path=str(self.path))
        flags = os.O_RDWR | (os.O_CREAT if writable else 0) if writable else os.O_RDONLY
        self._fd = os.open(self.path, flags, 0o644)
        if not exists:
            try:
                size_file(self._fd, round_down(self.max_index_size, self.ENTRY_SIZE), self.path)
            except BaseException:
                os.close(self._fd)
                self.path.unlink(missing_ok=True)
                raise
        self._length = os.fstat(self._fd).st_size
        self._map()
        self._max_entries = self._length // self.ENTRY_SIZE
        self._entries = 0 if not exists else self._max_entries
        if exists and stop_at_padding and self._entries > 1:
            n = live_entry_count(self._rel_column_raw(self._entries), self._slot0_all_zero())
            if n < self._entries:
                self._entries = n
                self.padded = True
        self._after_load()

    def _slot0_all_zero(self) -> bool:
        return self._mm is not None and self._length >= self.ENTRY_SIZE and not any(self._mm[: self.ENTRY_SIZE])

    # ------------------------------------------------------------------ mapping
    def _map(self) -> None:
        self._mm = None
        if self._length > 0:
            access = mmap.ACCESS_WRITE if self.writable else mmap.ACCESS_READ
            self._mm = mmap.mmap(self._fd, self._length, access=access)

    def _unmap(self) -> None:
        self._cache.clear()
        self._fast = None
        if self._mm is not None:
            self._mm.close()
            self._mm = None

    def _rel_column_raw(self, n: int) -> np.ndarray:
        if n == 0 or self._mm is None:
            return np.zeros(0, np.int64)
        words = self.ENTRY_SIZE // 4
        view = np.frombuffer(self._mm, dtype=">i4", count=n * words)
        col = view.reshape(n, words)[:, self._rel_word].astype(np.int64)
        del view
        return col

    _rel_word = 0

    def _after_load(self) -> None:
        """Hook: refresh cached last entry."""

    def raw_bytes(self, start: int, end: int) -> np.ndarray:
        """A copy of the file's bytes ``[start, end)`` (clipped to the file) as uint8."""
        start, end = max(0, start), min(end, self._length)
        if self._mm is None or end <= start:
            return np.zeros(0, np.uint8)
        return np.frombuffer(self._mm[start:end], dtype=np.uint8)

    def _check_open(self) -> None:
        if self._fd < 0 and not self.missing:
            raise InvalidArgumentError("index is closed", path=str(self.path))

    # ------------------------------------------------------------------ sizes
    @property
    def entries(self) -> int:
        return self._entries

    @property
    def max_entries(self) -> int:
        return self._max_entries

    @property
    def length(self) -> int:
        """The file length (the mapped size)."""
        return self._length

    @property
    def size_in_bytes(self) -> int:
        return self._entries * self.ENTRY_SIZE

    def is_full(self) -> bool:
        return self._entries >= self._max_entries

    # ------------------------------------------------------------------ raw entries
    def _raw(self, slot: int) -> tuple[int, int]:
        assert self._mm is not None
        return self._ENTRY.unpack_from(self._mm, slot * self.ENTRY_SIZE)

    def _column(self, value: bool) -> _Column:
        """Column for searching: key (value=False) or value column, offsets made absolute."""
        idx = 1 if value else 0
        is_offset = (idx == self._REL_SLOT)
        return _Column(self._mm, self._ENTRY, idx, self.ENTRY_SIZE, self.base_offset if is_offset else 0)

    def column_array(self, value: bool = False) -> np.ndarray:
        """The key (or value) column of the valid entries as an int64 array (offsets absolute)."""
        name = "v" if value else "k"
        col = self._cache.get(name)
        if col is None:
            n = self._entries
            if n == 0 or self._mm is None:
                col = np.zeros(0, np.int64)
            else:
                dt = np.dtype([("a", ">i4"), ("b", ">i4")]) if self.ENTRY_SIZE == 8 else np.dtype(
                    [("a", ">i8"), ("b", ">i4")])
                view = np.frombuffer(self._mm, dtype=dt, count=n)
                col = view["b" if value else "a"].astype(np.int64)
                del view
                if (1 if value else 0) == self._REL_SLOT:
                    col += self.base_offset
            self._cache[name] = col
        return col

    # ------------------------------------------------------------------ search (§3.7)
    @property
    def warm_entries(self) -> int:
        return WARM_SECTION_BYTES // self.ENTRY_SIZE

    def _fast_columns(self) -> _FastSearch:
        """The search cache (built on first use; appends extend it, other changes drop it)."""
        fast = self._fast
        if fast is None or len(fast.keys) != self._entries:
            self._check_open()
            fast = self._fast = _FastSearch(self.column_array(False), self.column_array(True))
        return fast

    def _search(self, target: int, smallest_upper_bound: bool) -> int:
        fast = self._fast_columns()
        if fast.inc:
            return index_search_sorted(fast.keys, self._entries, target, smallest_upper_bound)
        return index_search_py(fast.keys, self._entries, target, self.warm_entries, smallest_upper_bound)

    def largest_lower_bound_slot(self, target: int, search_value: bool = False) -> int:
        """Greatest slot whose column ≤ target (−1 if none), exact Kafka algorithm."""
        self._check_open()
        if not search_value:
            return self._search(target, False)
        return index_search_py(self._column(search_value), self._entries, target, self.warm_entries, False)

    def smallest_upper_bound_slot(self, target: int, search_value: bool = False) -> int:
        """Smallest slot whose column ≥ target (−1 if none), exact Kafka algorithm (slot-0 quirk included)."""
        self._check_open()
        if not search_value:
            return self._search(target, True)
        return index_search_py(self._column(search_value), self._entries, target, self.warm_entries, True)

    def search_many(self, targets: Any, *, search_value: bool = False, smallest_upper_bound: bool = False) -> np.ndarray:
        """Slots for many targets at once (compiled); identical to the scalar searches."""
        self._check_open()
        return index_search_many(self.column_array(search_value), self._entries, targets, self.warm_entries,
                                 smallest_upper_bound)

    # ------------------------------------------------------------------ writing helpers
    def _require_writable(self) -> None:
        self._check_open()
        if not self.writable:
            raise InvalidArgumentError("index is open read-only", path=str(self.path))

    def _write_slot(self, slot: int, a: int, b: int) -> None:
        assert self._mm is not None
        self._ENTRY.pack_into(self._mm, slot * self.ENTRY_SIZE, a, b)
        self._cache.clear()
        fast = self._fast
        if fast is not None:
            if slot == len(fast.keys):  # an append: extend the search cache instead of dropping it
                fast.append(a + (self.base_offset if self._REL_SLOT == 0 else 0),
                            b + (self.base_offset if self._REL_SLOT == 1 else 0))
            else:
                self._fast = None

    def write_entries_bulk(self, raw: bytes) -> None:
        """Replace the content by ``raw`` (whole entries, e.g. from a rebuild); the file must be
        large enough.  Used by recovery: the result equals appending the entries one by one."""
        self._require_writable()
        n = len(raw) // self.ENTRY_SIZE
        if n > self._max_entries:
            raise IndexFullError(f"{n} entries do not fit {self._max_entries} slots", path=str(self.path))
        if raw:
            assert self._mm is not None
            self._mm[: len(raw)] = raw
        self._entries = n
        self._cache.clear()
        self._fast = None
        self._after_load()

    # ------------------------------------------------------------------ size management (§3.3)
    def resize(self, new_size: int) -> bool:
        """Set the file length to ``round_down(new_size, entry_size)``; keep the entries."""
        self._require_writable()
        r = round_down(int(new_size), self.ENTRY_SIZE)
        if r == self._length:
            return False
        if r < self.size_in_bytes:
            raise InvalidArgumentError(f"cannot resize below the {self._entries} valid entries", path=str(self.path))
        self._unmap()
        os.ftruncate(self._fd, r)
        self._length = r
        self._map()
        self._max_entries = r // self.ENTRY_SIZE
        self._after_load()
        return True

    def trim_to_valid_size(self) -> bool:
        return self.resize(self.size_in_bytes)

    def reset(self) -> None:
        """Drop every entry, then resize to ``max_index_size``."""
        self.truncate()
        self.resize(self.max_index_size)

    def truncate(self) -> None:
        """Remove every entry (file length unchanged)."""
        self._require_writable()
        self._set_entries(0)

    def _set_entries(self, n: int) -> None:
        self._entries = n
        self._cache.clear()
        self._fast = None
        self._after_load()

    def _truncate_slot_for(self, offset: int) -> int:
        search_value = self._REL_SLOT == 1  # search the offset column
        slot = self.largest_lower_bound_slot(offset, search_value)
        if slot < 0:
            return 0
        col = self._column(search_value)
        return slot if col[slot] == offset else slot + 1

    def truncate_to(self, offset: int) -> None:
        """Remove the entries whose offset is ≥ ``offset`` (§3.9)."""
        self._require_writable()
        n = self._truncate_slot_for(offset)
        if n < self._entries:
            self._set_entries(n)

    def flush(self) -> None:
        """``msync`` the mapping: written entries become durable."""
        if self._mm is not None and self.writable:
            self._mm.flush()

    def close(self) -> None:
        """Trim (writable indexes) and unmap.  Idempotent."""
        if self._fd < 0:
            return
        if self.writable:
            self.trim_to_valid_size()
            self.flush()
        self._unmap()
        os.close(self._fd)
        self._fd = -1

    def delete(self) -> None:
        self.close()
        self.path.unlink(missing_ok=True)

    def rename_to(self, new_path: Path) -> None:
        os.replace(self.path, new_path)
        self.path = Path(new_path)

    def __enter__(self) -> AbstractIndex:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def _check_entry_slot(self, n: int) -> None:
        if not 0 <= n < self._entries:
            raise InvalidArgumentError(
                f"attempt to fetch the {n}th entry from {type(self).__name__} of size {self._entries}",
                path=str(self.path),
            )

    def _rel(self, offset: int) -> int:
        rel = offset - self.base_offset
        if not 0 <= rel <= INT32_MAX:
            raise OffsetOverflowError(
                f"integer overflow for offset {offset} relative to base offset {self.base_offset}", path=str(self.path)
            )
        return rel


class OffsetIndex(AbstractIndex):
    """``.index``: 8-byte entries ``int32 relative offset, int32 position`` (spec §3)."""

    ENTRY_SIZE = 8
    _ENTRY = struct.Struct(">ii")
    _REL_SLOT = 0
    _rel_word = 0

    def _after_load(self) -> None:
        self._last_offset = self.base_offset if self._entries == 0 else self.base_offset + self._raw(self._entries - 1)[0]

    @property
    def last_offset(self) -> int:
        return self._last_offset

    def entry(self, n: int) -> OffsetPosition:
        self._check_entry_slot(n)
        rel, pos = self._raw(n)
        return OffsetPosition(self.base_offset + rel, pos)

    def entries_list(self) -> list[OffsetPosition]:
        return [self.entry(i) for i in range(self._entries)]

    def append(self, offset: int, position: int) -> None:
        """Append ``(offset, position)``: full → :class:`IndexFullError`; offset not above the
        last entry → :class:`IndexOrderError`; not relative-able → :class:`OffsetOverflowError`."""
        self._require_writable()
        if self.is_full():
            raise IndexFullError("attempt to append to a full index", path=str(self.path))
        if self._entries == 0 or offset > self._last_offset:
            rel = self._rel(offset)
            if not 0 <= position <= INT32_MAX:
                raise InvalidArgumentError(f"position {position} does not fit an int32", path=str(self.path))
            self._write_slot(self._entries, rel, position)
            self._entries += 1
            self._last_offset = offset
        else:
            raise IndexOrderError(
                f"attempt to append an offset ({offset}) no larger than the last offset appended ({self._last_offset})",
                path=str(self.path),
            )

    def lookup(self, target_offset: int) -> OffsetPosition:
        """Greatest indexed offset ≤ target with its position, else ``(base_offset, 0)``."""
        fast = self._fast
        if fast is None:  # (closing drops the cache, so a cached index is open)
            fast = self._fast_columns()
        if fast.inc:  # _FastSearch.slot, inlined (this is the hot single-call path)
            keys = fast.keys
            i = _bisect_right(fast.top, target_offset) - 1
            if i < 0:
                return _tuple_new(OffsetPosition, (self.base_offset, 0))
            lo = i * _TOP_STRIDE
            hi = lo + _TOP_STRIDE
            slot = _bisect_right(keys, target_offset, lo, hi if hi < len(keys) else len(keys)) - 1
        else:
            slot = index_search_py(fast.keys, self._entries, target_offset, self.warm_entries, False)
            if slot < 0:
                return OffsetPosition(self.base_offset, 0)
            keys = fast.keys
        return _tuple_new(OffsetPosition, (keys[slot], fast.vals[slot]))

    def lookup_many(self, targets: Any) -> tuple[np.ndarray, np.ndarray]:
        """Vectorised :meth:`lookup`: arrays ``(offsets, positions)`` for many targets."""
        self._check_open()
        return index_lookup_many(self.column_array(False), self.column_array(True), self._entries, targets,
                                 self.warm_entries, self.base_offset, 0, strictly_increasing=self._fast_columns().inc)

    def fetch_upper_bound_offset(self, fetch_offset_position: OffsetPosition | int, fetch_size: int) -> OffsetPosition | None:
        """Smallest upper bound on positions of ``position + fetch_size``; ``None`` if none."""
        pos = fetch_offset_position if isinstance(fetch_offset_position, int) else fetch_offset_position.position
        slot = self.smallest_upper_bound_slot(pos + fetch_size, search_value=True)
        return None if slot < 0 else self.entry(slot)

    def sanity_check(self) -> None:
        """Raise :class:`CorruptIndexError` per spec §3.10."""
        why = offset_index_sanity_error(self.path, self.base_offset, self._entries, self._last_offset, self._length)
        if why is not None:
            raise CorruptIndexError(why, path=str(self.path))


class TimeIndex(AbstractIndex):
    """``.timeindex``: 12-byte entries ``int64 timestamp, int32 relative offset`` (spec §3)."""

    ENTRY_SIZE = 12
    _ENTRY = struct.Struct(">qi")
    _REL_SLOT = 1
    _rel_word = 2

    def _after_load(self) -> None:
        if self._entries == 0:
            self._last_entry = TimestampOffset(-1, self.base_offset)
        else:
            ts, rel = self._raw(self._entries - 1)
            self._last_entry = TimestampOffset(ts, self.base_offset + rel)

    @property
    def last_entry(self) -> TimestampOffset:
        return self._last_entry

    def is_full(self) -> bool:
        """One slot is kept free for the final entry of roll/close: full at ``max_entries − 1``."""
        return self._entries >= self._max_entries - 1

    def entry(self, n: int) -> TimestampOffset:
        self._check_entry_slot(n)
        ts, rel = self._raw(n)
        return TimestampOffset(ts, self.base_offset + rel)

    def entries_list(self) -> list[TimestampOffset]:
        return [self.entry(i) for i in range(self._entries)]

    def maybe_append(self, timestamp: int, offset: int, skip_full_check: bool = False) -> bool:
        """Append when ``timestamp`` exceeds the last one (spec §3.5); returns whether it wrote."""
        self._require_writable()
        if not skip_full_check and self.is_full():
            raise IndexFullError("attempt to append to a full time index", path=str(self.path))
        if self._entries > 0 and offset < self._last_entry.offset:
            raise IndexOrderError(
                f"attempt to append an offset ({offset}) smaller than the last offset appended "
                f"({self._last_entry.offset})",
                path=str(self.path),
            )
        if self._entries > 0 and timestamp < self._last_entry.timestamp:
            raise IndexOrderError(
                f"attempt to append a timestamp ({timestamp}) smaller than the last timestamp appended "
                f"({self._last_entry.timestamp})",
                path=str(self.path),
            )
        if timestamp > self._last_entry.timestamp:
            if self._entries >= self._max_entries:
                raise IndexFullError("no slot left in the time index", path=str(self.path))
            self._write_slot(self._entries, timestamp, self._rel(offset))
            self._entries += 1
            self._last_entry = TimestampOffset(timestamp, offset)
            return True
        return False

    def lookup(self, target_timestamp: int) -> TimestampOffset:
        """Greatest indexed timestamp ≤ target with its offset, else ``(−1, base_offset)``."""
        fast = self._fast
        if fast is None:  # (closing drops the cache, so a cached index is open)
            fast = self._fast_columns()
        if fast.inc:  # _FastSearch.slot, inlined (this is the hot single-call path)
            keys = fast.keys
            i = _bisect_right(fast.top, target_timestamp) - 1
            if i < 0:
                return _tuple_new(TimestampOffset, (-1, self.base_offset))
            lo = i * _TOP_STRIDE
            hi = lo + _TOP_STRIDE
            slot = _bisect_right(keys, target_timestamp, lo, hi if hi < len(keys) else len(keys)) - 1
        else:
            slot = index_search_py(fast.keys, self._entries, target_timestamp, self.warm_entries, False)
            if slot < 0:
                return TimestampOffset(-1, self.base_offset)
            keys = fast.keys
        return _tuple_new(TimestampOffset, (keys[slot], fast.vals[slot]))

    def lookup_many(self, targets: Any) -> tuple[np.ndarray, np.ndarray]:
        """Vectorised :meth:`lookup`: arrays ``(timestamps, offsets)``."""
        self._check_open()
        return index_lookup_many(self.column_array(False), self.column_array(True), self._entries, targets,
                                 self.warm_entries, -1, self.base_offset, strictly_increasing=self._fast_columns().inc)

    def sanity_check(self) -> None:
        """Raise :class:`CorruptIndexError` per spec §3.10."""
        first_ts = self._raw(0)[0] if self._entries != 0 else 0
        why = time_index_sanity_error(self.path, self.base_offset, self._entries, first_ts,
                                      self._last_entry.timestamp, self._last_entry.offset, self._length)
        if why is not None:
            raise CorruptIndexError(why, path=str(self.path))
