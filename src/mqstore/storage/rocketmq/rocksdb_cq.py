"""The RocksDB ConsumeQueue of a RocketMQ >= 5.2 store (``storeType=defaultRocksDB``), read only.

The broker keeps one RocksDB database directly in ``STORE/consumequeue/`` (column families
``default``: one 28-byte value per unit, ``offset``: the max/min entries per queue and the
dispatch checkpoint; layouts in :mod:`mqstore.formats.rocketmq.rocksdb_cq`).  This module opens
it through the optional ``rocksdict`` binding (``pip install 'mqstore[rocksdb]'``), imported
lazily, strictly read-only: RocksDB's read-only mode takes no lock and writes no file, and the
binding's own ``rocksdict-config.json`` goes to a private directory of symbolic links to the
database files, so the store directory is never touched.

:class:`RocksDBConsumeQueue` answers the questions a file
:class:`~mqstore.storage.rocketmq.consumequeue.ConsumeQueue` answers (min/max offset, units by
offset range, offset by store time) with the same method names, so the store, the CLI and the
Spark source use either through one code path.  Which one a store uses is decided by
:func:`mqstore.storage.rocketmq.layout.store_type_of`.
"""

from __future__ import annotations

import os
import shutil
import struct
import tempfile
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from mqstore.errors import CorruptDataError, MqStoreError, RocksDBError
from mqstore.formats.rocketmq.consumequeue import CQ_DTYPE, CQUnit
from mqstore.formats.rocketmq.rocksdb_cq import (
    CF_OFFSET,
    CHECKPOINT_KEY,
    CHECKPOINT_TOPIC,
    MAX,
    UNIT_DTYPE,
    OffsetValue,
    decode_checkpoint_value,
    decode_cq_value,
    decode_cq_values,
    decode_offset_key,
    decode_offset_value,
    encode_cq_key,
    queue_prefix,
)

_OFFSET = struct.Struct(">q")
#: keys per multi-get of a range read
_MULTI_GET = 1024
BOUNDARY_LOWER = "lower"
BOUNDARY_UPPER = "upper"
StoreTimeLookup = Callable[[int, int], int]
INSTALL_HINT = "install the optional RocksDB support: pip install 'mqstore[rocksdb]'"


def _rocksdict() -> Any:
    try:
        import rocksdict
    except ImportError as exc:
        raise RocksDBError(f"reading a RocksDB directory needs the rocksdict package: {INSTALL_HINT}") from exc
    return rocksdict


class ReadOnlyRocksDB:
    """One RocksDB database opened read-only (every column family), through a private directory of
    symbolic links so that nothing is created or changed in ``path``."""

    def __init__(self, path: str | os.PathLike[str], what: str = "RocksDB database") -> None:
        self.path = Path(path)
        self.what = what
        rd = _rocksdict()
        if not (self.path / "CURRENT").is_file():
            raise RocksDBError(f"{self.path} is not a RocksDB database (no CURRENT file)", path=str(self.path))
        self._links = Path(tempfile.mkdtemp(prefix="mqstore-rocksdb-"))
        self.db: Any = None
        try:
            for p in self.path.iterdir():
                if p.is_file() and p.name != "LOCK" and not p.name.startswith("LOG"):
                    (self._links / p.name).symlink_to(p.resolve())
            opts = rd.Options(raw_mode=True)
            try:
                cfs = rd.Rdict.list_cf(str(self._links), opts)
            except Exception as exc:  # the binding raises plain exceptions for a damaged database
                raise RocksDBError(f"{self.path}: not a readable RocksDB database: {_text(exc)}",
                                   path=str(self.path)) from exc
            self.column_families = list(cfs)
            try:
                self.db = rd.Rdict(str(self._links), opts,
                                   column_families={c: rd.Options(raw_mode=True) for c in cfs if c != "default"},
                                   access_type=rd.AccessType.read_only())
            except Exception as exc:
                raise RocksDBError(f"{self.path}: cannot open the RocksDB database read-only: {_text(exc)}",
                                   path=str(self.path)) from exc
        except BaseException:
            self.close()
            raise

    def family(self, name: str) -> Any:
        if name == "default":
            return self.db
        if name not in self.column_families:
            raise RocksDBError(f"{self.path}: the {self.what} has no column family {name!r} "
                               f"(it has {', '.join(self.column_families)})", path=str(self.path))
        return self.db.get_column_family(name)

    def get(self, family: Any, key: bytes) -> bytes | None:
        try:
            return family.get(key)
        except Exception as exc:
            raise RocksDBError(f"{self.path}: reading a key failed: {_text(exc)}", path=str(self.path)) from exc

    def multi_get(self, family: Any, keys: list[bytes]) -> list[bytes | None]:
        if not keys:
            return []
        try:
            return list(family.get(keys))
        except Exception as exc:
            raise RocksDBError(f"{self.path}: reading keys failed: {_text(exc)}", path=str(self.path)) from exc

    def items(self, family: Any, start: bytes | None = None) -> Iterator[tuple[bytes, bytes]]:
        """Entries in key order from ``start`` (or the first)."""
        try:
            it = family.iter()
            if start is None:
                it.seek_to_first()
            else:
                it.seek(start)
            while it.valid():
                yield it.key(), it.value()
                it.next()
        except MqStoreError:
            raise
        except Exception as exc:
            raise RocksDBError(f"{self.path}: reading the database failed: {_text(exc)}", path=str(self.path)) from exc

    def close(self) -> None:
        if self.db is not None:
            try:
                self.db.close()
            except Exception:  # pragma: no cover - closing a read-only handle
                pass
            self.db = None
        shutil.rmtree(self._links, ignore_errors=True)

    def __enter__(self) -> ReadOnlyRocksDB:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def _text(exc: BaseException) -> str:
    return str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__


@dataclass(slots=True)
class QueueOffsets:
    """The ``offset``-family entries of one queue."""

    max: OffsetValue | None = None
    min: OffsetValue | None = None


class RocksDBConsumeQueueStore:
    """The ConsumeQueue database of a store (``STORE/consumequeue/``), read-only."""

    def __init__(self, directory: str | os.PathLike[str]) -> None:
        self.directory = Path(directory)
        self.rdb = ReadOnlyRocksDB(self.directory, "ConsumeQueue database")
        try:
            self.units_cf = self.rdb.family("default")
            self.offset_cf = self.rdb.family(CF_OFFSET)
            self.bad_offset_keys: list[str] = []
            self.offsets = self._read_offsets()
            raw = self.rdb.get(self.offset_cf, CHECKPOINT_KEY)
            self.dispatched_phy_offset = decode_checkpoint_value(raw) if raw is not None else 0
        except BaseException:
            self.rdb.close()
            raise

    def _read_offsets(self) -> dict[tuple[str, int], QueueOffsets]:
        out: dict[tuple[str, int], QueueOffsets] = {}
        for key, value in self.rdb.items(self.offset_cf):
            try:
                k = decode_offset_key(key)
                if k.topic == CHECKPOINT_TOPIC:
                    continue
                v = decode_offset_value(value)
            except CorruptDataError as exc:
                self.bad_offset_keys.append(exc.message)
                continue
            q = out.setdefault((k.topic, k.queue_id), QueueOffsets())
            if k.kind == MAX:
                q.max = v
            else:
                q.min = v
        return out

    def queues(self) -> dict[tuple[str, int], RocksDBConsumeQueue]:
        """A reader per queue the ``offset`` family knows."""
        return {key: RocksDBConsumeQueue(self, key[0], key[1], offs) for key, offs in sorted(self.offsets.items())}

    def describe(self) -> dict[str, Any]:
        """What ``inspect`` shows: the database files, column families, queues and ranges."""
        files = sorted((p.name, p.stat().st_size) for p in self.directory.iterdir() if p.is_file())
        return {"directory": str(self.directory), "columnFamilies": list(self.rdb.column_families),
                "files": [{"name": n, "size": size} for n, size in files],
                "queues": len(self.offsets), "dispatchedPhyOffset": self.dispatched_phy_offset,
                "minEntries": sum(1 for q in self.offsets.values() if q.min is not None),
                "badOffsetEntries": self.bad_offset_keys}

    def iter_units(self) -> Iterator[tuple[bytes, bytes]]:
        """Every entry of the ``default`` family, in key order (raw, for ``verify``)."""
        return self.rdb.items(self.units_cf)

    def close(self) -> None:
        self.rdb.close()


class RocksDBConsumeQueue:
    """One queue of a RocksDB ConsumeQueue, with the read interface of the file ConsumeQueue."""

    kind = "rocksdb"
    ext = None  # the RocksDB ConsumeQueue has no ConsumeQueueExt: tags codes are real tag hashes
    read_only = True

    def __init__(self, store: RocksDBConsumeQueueStore, topic: str, queue_id: int, offsets: QueueOffsets) -> None:
        self.store = store
        self.topic = topic
        self.queue_id = queue_id
        self.offsets = offsets
        self._prefix = queue_prefix(topic, queue_id)
        self._min = offsets.min.queue_offset if offsets.min is not None else 0
        self.max_physic_offset = -1

    # ------------------------------------------------------------------ offsets
    @property
    def max_offset_in_queue(self) -> int:
        """The next queue offset (the ``max`` entry's offset + 1; 0 without one)."""
        return self.offsets.max.queue_offset + 1 if self.offsets.max is not None else 0

    @property
    def min_offset_in_queue(self) -> int:
        return self._min

    def load(self) -> None:
        pass

    def recover(self) -> None:
        """``max_physic_offset``: the end of the message of the last unit (as the file queue's)."""
        m = self.offsets.max
        if m is None:
            return
        u = self._value(m.queue_offset, strict=False)
        self.max_physic_offset = u.commit_log_offset + u.size if u is not None else m.commit_log_offset

    def correct_min_offset(self, min_commit_log_offset: int) -> None:
        """The broker's ``getMinCqOffset``: the ``min`` entry when it points at live CommitLog data,
        else the first unit at or past ``min_commit_log_offset`` (a binary search over the
        units; units the compaction filter removed count as below), computed here without writing
        the corrected entry back."""
        mn, mx = self.offsets.min, self.offsets.max
        if mn is not None and mn.commit_log_offset >= min_commit_log_offset:
            self._min = mn.queue_offset
            return
        start = mn.queue_offset if mn is not None else 0
        if mx is None:
            self._min = 0
            return
        if mx.commit_log_offset < min_commit_log_offset:
            self._min = mx.queue_offset + 1
            return
        low, high, found = start, mx.queue_offset, -1
        while high >= low:
            mid = low + ((high - low) >> 1)
            u = self._value(mid, strict=False)
            if u is None:
                low = mid + 1
                continue
            if u.commit_log_offset == min_commit_log_offset:
                found = mid
                break
            if u.commit_log_offset > min_commit_log_offset:
                found = mid
                high = mid - 1
            else:
                low = mid + 1
        self._min = found if found >= 0 else start

    # ------------------------------------------------------------------ read
    def _value(self, queue_offset: int, *, strict: bool = True) -> Any:
        """The unit at ``queue_offset`` (``None``: no entry); an entry that is not 28 bytes is a typed
        error, or ``None`` when not ``strict`` (opening a store only skips it: ``verify`` names it)."""
        raw = self.store.rdb.get(self.store.units_cf, encode_cq_key(self.topic, self.queue_id, queue_offset))
        if raw is None:
            return None
        try:
            return decode_cq_value(raw)
        except CorruptDataError as exc:
            if not strict:
                return None
            raise CorruptDataError(f"RocksDB ConsumeQueue {self.topic}/{self.queue_id} unit {queue_offset}: "
                                   f"{exc.message}", path=str(self.store.directory)) from exc

    def get_unit(self, queue_offset: int, *, resolve_ext: bool = True) -> CQUnit | None:
        if queue_offset < self.min_offset_in_queue or queue_offset >= self.max_offset_in_queue:
            return None
        u = self._value(queue_offset)
        return None if u is None else CQUnit(u.commit_log_offset, u.size, u.tags_code)

    def get_values(self, queue_offset: int, max_count: int) -> np.ndarray:
        """The 28-byte values from ``queue_offset`` on (at most ``max_count``, within the queue's
        range, up to the first missing key, as the broker's range query), as :data:`UNIT_DTYPE`."""
        q = max(queue_offset, self.min_offset_in_queue)
        end = min(self.max_offset_in_queue, q + max_count)
        if q >= end:
            return np.empty(0, dtype=UNIT_DTYPE)
        values: list[bytes] = []
        pack = _OFFSET.pack
        while q < end:  # multi-gets of consecutive keys, as the broker's range query
            n = min(end - q, _MULTI_GET)
            got = self.store.rdb.multi_get(self.store.units_cf, [self._prefix + pack(o) for o in range(q, q + n)])
            stop = next((i for i, v in enumerate(got) if v is None), None)
            values.extend(got if stop is None else got[:stop])
            if stop is not None:
                break
            q += n
        try:
            return decode_cq_values(values)
        except CorruptDataError as exc:
            raise CorruptDataError(f"RocksDB ConsumeQueue {self.topic}/{self.queue_id}: {exc.message}",
                                   path=str(self.store.directory)) from exc

    def get_units(self, queue_offset: int, max_count: int) -> np.ndarray:
        """Units from ``queue_offset`` as the file queue's structured array (:data:`CQ_DTYPE`)."""
        vals = self.get_values(queue_offset, max_count)
        out = np.empty(len(vals), dtype=CQ_DTYPE)
        out["offset"], out["size"], out["tags_code"] = vals["offset"], vals["size"], vals["tags_code"]
        return out

    def resolve_tags_code(self, tags_code: int) -> int:
        return tags_code

    def resolve_tags_codes(self, tags: np.ndarray) -> np.ndarray:
        return np.asarray(tags, dtype=np.int64)

    # ------------------------------------------------------------------ time search
    def offset_in_queue_by_time(self, timestamp: int, boundary: str, store_time: StoreTimeLookup | None = None,
                                min_phy_offset: int = 0) -> int:
        """The broker's RocksDB ``getOffsetInQueueByTime``: a binary search over the queue's units
        on the store time each value carries (``store_time`` is not needed: it is the file
        queue's CommitLog lookup).  LOWER: the first unit stored at or after ``timestamp``,
        UPPER: the last one stored at or before it.  The result is kept within
        ``[min offset, max offset]`` as the file queue's is (the broker's RocksDB search returns 0
        for UPPER when every live unit is newer, below a queue whose head was deleted)."""
        got = self._offset_by_time(timestamp, boundary, min_phy_offset)
        return max(self.min_offset_in_queue, min(got, self.max_offset_in_queue))

    def _offset_by_time(self, timestamp: int, boundary: str, min_phy_offset: int) -> int:
        if self.offsets.max is None:
            return 0
        lower = boundary == BOUNDARY_LOWER
        floor = low = self.min_offset_in_queue
        ceiling = high = self.offsets.max.queue_offset
        top = self._value(ceiling)
        if top is not None and top.store_timestamp < timestamp:
            return ceiling + 1 if lower else ceiling
        bottom = self._value(floor)
        if bottom is not None and bottom.store_timestamp > timestamp:
            return floor if lower else 0
        target = left = right = -1
        while high >= low:
            mid = low + ((high - low) >> 1)
            u = self._value(mid)
            if u is None:
                low = mid + 1
                continue
            if u.commit_log_offset < min_phy_offset:
                low, left = mid + 1, mid
                continue
            t = u.store_timestamp
            if t < 0:
                return 0
            if t == timestamp:
                target = mid
                break
            if t > timestamp:
                high, right = mid - 1, mid
            else:
                low, left = mid + 1, mid
        if target < 0:
            return right if lower else left
        step, stop = (-1, floor) if lower else (1, ceiling)
        while (target + step >= stop) if lower else (target + step <= stop):
            u = self._value(target + step)
            if u is None or u.store_timestamp != timestamp:
                break
            target += step
        return target

    # ------------------------------------------------------------------ lifecycle (nothing to write)
    def flush(self, least_pages: int = 0) -> None:
        pass

    def close(self) -> None:
        pass
