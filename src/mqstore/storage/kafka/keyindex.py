"""The key index of a Kafka segment (``<base>.keyindex``, docs/formats/kafka-keyindex.md):
building it from a ``.log``, keeping it up to date under appends, and answering key lookups.

* :func:`key_entries` – the ``(hash, location, timestamp)`` entries of the records of some batches,
  in record order: batch bodies decompressed and walked by the compiled record parser
  (:func:`~mqstore.kernels.kafka.records.parse_bodies`), keys hashed by the Java-hash kernel
  (:func:`~mqstore.kernels.javahash.hash_spans`);
* :func:`build_keyindex` – the bytes of a whole key index (the RocketMQ IndexFile bulk builder,
  :func:`~mqstore.kernels.rocketmq.index_build.bulk_put`, plus the trailer);
  :func:`rebuild_keyindex` – the key index of one ``.log`` (its valid prefix), written atomically;
* :class:`KeyIndex` – the live key index of the active segment: a memory map the appends put
  into; it grows (rehashed into a file twice as large) when full and is compacted to the exact
  geometry of its entries on roll and close, where it is byte-identical to a rebuild;
* :class:`KeyIndexReader` – a read-only view: candidate locations of many key hashes in one
  compiled chain walk (:func:`~mqstore.kernels.rocketmq.chain_walk.select_many`);
* :func:`verify_keyindex` – compare a key index with what a rebuild with its geometry writes.

The exact answer of a lookup (collisions dropped, time window applied) needs the records: see
:meth:`mqstore.storage.kafka.log.PartitionLog.offsets_for_key`.
"""

from __future__ import annotations

import mmap
import os
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from mqstore.errors import CorruptDataError, CorruptIndexError, InvalidArgumentError, StoreNotFoundError
from mqstore.formats.kafka.keyindex import (
    KeyIndexTrailer,
    check_header_name,
    decode_header,
    decode_trailer,
    geometry_for,
    header_hash,
    key_hash,
)
from mqstore.formats.rocketmq.indexfile import INDEX_HEADER_SIZE, INDEX_ITEM_SIZE, IndexHeader
from mqstore.kernels.javahash import hash_spans, index_hash_spans
from mqstore.kernels.kafka.batches import scan_batches
from mqstore.kernels.kafka.records import (
    ERR_UNSUPPORTED,
    ERROR_MESSAGES,
    OK,
    batch_bodies,
    decode_records_columnar,
    parse_bodies,
)
from mqstore.kernels.rocketmq.chain_select import select_many
from mqstore.kernels.rocketmq.index_build import H_END_TS, H_INDEX_COUNT, bulk_put, header_array, write_header
from mqstore.storage.kafka.layout import LOG_SUFFIX, keyindex_path, parse_base_offset

ATTR_CONTROL = 0x20
WINDOW_BYTES = 8 << 20  # decompress at most this many bytes of batches at a time
#: the items a live key index starts with (it doubles when full)
INITIAL_ITEMS = 1024
_LONG_MIN = -(1 << 63)
_LONG_MAX = (1 << 63) - 1
_INT_MAX = 0x7FFFFFFF


@dataclass(frozen=True)
class KeyEntries:
    """Entries of a key index in record order: hash, location (relative offset << 32 | batch
    position) and record timestamp."""

    key_hash: np.ndarray  # int32
    location: np.ndarray  # int64
    timestamp: np.ndarray  # int64

    def __len__(self) -> int:
        return int(self.key_hash.shape[0])

    @staticmethod
    def empty() -> KeyEntries:
        return KeyEntries(np.zeros(0, np.int32), np.zeros(0, np.int64), np.zeros(0, np.int64))

    @staticmethod
    def concat(parts: Sequence[KeyEntries]) -> KeyEntries:
        if not parts:
            return KeyEntries.empty()
        if len(parts) == 1:
            return parts[0]
        return KeyEntries(np.concatenate([p.key_hash for p in parts]), np.concatenate([p.location for p in parts]),
                          np.concatenate([p.timestamp for p in parts]))


def index_hashes(java_hashes: np.ndarray) -> np.ndarray:
    """``indexKeyHashMethod`` of Java hash codes (``abs``, ``Integer.MIN_VALUE`` → 0)."""
    h = np.abs(java_hashes.astype(np.int64))
    h[h > _INT_MAX] = 0
    return h.astype(np.int32)


def key_hashes(keys: Sequence[bytes]) -> np.ndarray:
    """Key index hashes of many keys (one buffer, one kernel call)."""
    if not keys:
        return np.zeros(0, np.int32)
    lens = np.fromiter((len(k) for k in keys), np.int64, len(keys))
    starts = np.cumsum(lens) - lens
    buf = np.frombuffer(b"".join(keys) or b"\0", np.uint8)
    return index_hashes(hash_spans(buf, starts, lens, threads=1))


# ----------------------------------------------------------------------------- entries of batches
def _windows(scan: dict[str, Any], n: int) -> Iterator[np.ndarray]:
    size = scan["size"][:n]
    k0 = 0
    acc = 0
    for k in range(n):
        acc += int(size[k])
        if acc >= WINDOW_BYTES:
            yield np.arange(k0, k + 1)
            k0, acc = k + 1, 0
    if k0 < n:
        yield np.arange(k0, n)


def _name_mask(buf: np.ndarray, starts: np.ndarray, lens: np.ndarray, name: bytes) -> np.ndarray:
    """Which header keys ``buf[starts[i]:starts[i]+lens[i]]`` equal ``name``."""
    m = lens == len(name)
    idx = np.nonzero(m)[0]
    if idx.shape[0] and len(name):
        grid = buf[starts[idx][:, None] + np.arange(len(name))[None, :]]
        m[idx] = (grid == np.frombuffer(name, np.uint8)[None, :]).all(axis=1)
    return m


def _window_entries(view: memoryview, scan: dict[str, Any], idx: np.ndarray, base_offset: int, shift: int,
                    header_name: str | None, path: str | None) -> KeyEntries:
    kept = idx[((scan["attributes"][idx] & ATTR_CONTROL) == 0) & (scan["magic"][idx] == 2)]
    legacy = idx[scan["magic"][idx] < 2]
    if legacy.shape[0]:
        return _entries_generic(view, scan, idx, base_offset, shift, header_name, path)
    if kept.shape[0] == 0:
        return KeyEntries.empty()
    name = header_name.encode("utf-8") if header_name is not None else b""
    buf, bstart, bend = batch_bodies(view, scan, kept, path=path, shift=shift, tail=name)
    logappend = (scan["attributes"][kept] & 0x08) != 0
    res = parse_bodies(buf, bstart, bend, scan["record_count"][kept].astype(np.int64), scan["base_offset"][kept],
                       scan["base_timestamp"][kept], scan["max_timestamp"][kept], logappend, _LONG_MIN, _LONG_MAX)
    if res["error"] == ERR_UNSUPPORTED:
        return _entries_generic(view, scan, idx, base_offset, shift, header_name, path)
    if res["error"] != OK:
        raise CorruptDataError(ERROR_MESSAGES[res["error"]], path=path,
                               offset=int(scan["position"][kept[res["error_batch"]]]) + shift)
    rec_pos = scan["position"][kept][res["batch"]] + shift
    loc = ((res["offset"] - base_offset) << 32) | rec_pos
    has_key = res["key_len"] >= 0
    kh = index_hashes(hash_spans(buf, res["key_start"][has_key], res["key_len"][has_key], threads=1))
    rec = [np.nonzero(has_key)[0]]
    hashes = [kh]
    if header_name is not None and res["hkey_start"].shape[0]:
        hm = _name_mask(buf, res["hkey_start"], res["hkey_len"], name) & (res["hvalue_len"] >= 0)
        hsel = np.nonzero(hm)[0]
        if hsel.shape[0]:
            name_at = np.full(hsel.shape[0], len(buf) - len(name), np.int64)
            hh = index_hash_spans(buf, name_at, np.full(hsel.shape[0], len(name), np.int64),
                                  res["hvalue_start"][hsel], res["hvalue_len"][hsel], threads=1)
            hashes.append(hh)
            rec.append(np.searchsorted(res["header_first"], hsel, side="right") - 1)
    r = np.concatenate(rec)
    order = np.argsort(r, kind="stable")  # a record's key first, then its header values
    r = r[order]
    return KeyEntries(np.concatenate(hashes)[order].astype(np.int32), loc[r].astype(np.int64),
                      res["timestamp"][r].astype(np.int64))


def _entries_generic(view: memoryview, scan: dict[str, Any], idx: np.ndarray, base_offset: int, shift: int,
                     header_name: str | None, path: str | None) -> KeyEntries:
    """The entries of a window through the generic record decoder (legacy magic 0/1 messages,
    varlongs the compiled parser leaves out)."""
    w0 = int(scan["position"][idx[0]])
    w1 = int(scan["position"][idx[-1]] + scan["size"][idx[-1]])
    cols = decode_records_columnar(view, w0, w1, validate=False, path=path)
    hs: list[int] = []
    locs: list[int] = []
    tss: list[int] = []
    for i, off in enumerate(cols["offset"].tolist()):
        loc = ((off - base_offset) << 32) | (int(cols["batch_position"][i]) + shift)
        ts = int(cols["timestamp"][i])
        k = cols["key"][i]
        if k is not None:
            hs.append(key_hash(k))
            locs.append(loc)
            tss.append(ts)
        if header_name is not None:
            for hk, hv in cols["headers"][i]:
                if hk == header_name and hv is not None:
                    hs.append(header_hash(header_name, hv))
                    locs.append(loc)
                    tss.append(ts)
    return KeyEntries(np.array(hs, np.int32), np.array(locs, np.int64), np.array(tss, np.int64))


def key_entries(buf: Any, scan: dict[str, Any], n: int, base_offset: int, *, shift: int = 0,
                header_name: str | None = None, path: str | None = None) -> KeyEntries:
    """Entries of the records of the first ``n`` batches of ``scan`` (batch positions relative to
    ``buf``; ``shift`` is added to make them segment positions), control batches left out."""
    check_header_name(header_name)
    if n <= 0:
        return KeyEntries.empty()
    view = buf if isinstance(buf, memoryview) else memoryview(buf)
    if view.ndim != 1 or view.itemsize != 1:
        view = view.cast("B")
    return KeyEntries.concat([_window_entries(view, scan, w, base_offset, shift, header_name, path)
                              for w in _windows(scan, n)])


# ----------------------------------------------------------------------------- build
def build_keyindex(entries: KeyEntries, *, slots: int | None = None, index_num: int | None = None,
                   header_name: str | None = None, end_timestamp: int | None = None) -> bytes:
    """The bytes of a key index holding ``entries`` (geometry :func:`geometry_for` unless given).
    ``end_timestamp`` replaces the header's endTimestamp (a rebuild from stored items, whose
    time is only kept in seconds)."""
    n = len(entries)
    s, items = geometry_for(n, slots)
    if index_num is not None:
        if index_num < n + 1:
            raise InvalidArgumentError(f"{n} entries do not fit {index_num - 1} items")
        items = index_num
    trailer = KeyIndexTrailer(s, items, header_name)
    out = bytearray(trailer.file_size)
    body = np.frombuffer(out, np.uint8, count=trailer.body_size)
    header = header_array(IndexHeader())
    if n:
        bulk_put(body, s, items, header, entries.key_hash, entries.location, entries.timestamp)
        if end_timestamp is not None:
            header[H_END_TS] = end_timestamp
    write_header(body, header)
    del body
    out[trailer.body_size :] = trailer.encode()
    return bytes(out)


def _atomic_write(path: Path, data: bytes) -> None:
    from mqstore.storage.kafka.rebuild import atomic_write

    atomic_write(path, data, fsync=False)


def log_entries(log_path: str | os.PathLike[str], *, header_name: str | None = None,
                valid_bytes: int | None = None) -> tuple[KeyEntries, int]:
    """The entries of the valid prefix of a ``.log`` (CRC-checked batches) and that prefix's size."""
    from mqstore.storage.kafka.rebuild import analyze_log_file

    lp = Path(log_path)
    base = parse_base_offset(lp)
    try:
        fd = os.open(lp, os.O_RDONLY)
    except FileNotFoundError:
        raise StoreNotFoundError("log file not found", path=str(lp)) from None
    try:
        size = os.fstat(fd).st_size
        if valid_bytes is None:
            analysis = analyze_log_file(fd, size)
            scan, n, valid = analysis.scan, analysis.n_valid, analysis.valid_bytes
        else:
            valid = valid_bytes
            scan = None
            n = 0
        if valid == 0:
            return KeyEntries.empty(), 0
        with mmap.mmap(fd, valid, access=mmap.ACCESS_READ) as mm:
            view = memoryview(mm)
            try:
                if scan is None:
                    scan = scan_batches(view, 0)
                    n = scan["count"]
                return key_entries(view, scan, n, base, header_name=header_name, path=str(lp)), valid
            finally:
                view.release()
    finally:
        os.close(fd)


@dataclass(frozen=True)
class KeyIndexResult:
    """What :func:`rebuild_keyindex` wrote."""

    log_path: str
    keyindex_path: str
    entries: int
    hash_slot_num: int
    index_num: int
    valid_bytes: int


def rebuild_keyindex(log_path: str | os.PathLike[str], out_dir: str | os.PathLike[str] | None = None, *,
                     header_name: str | None = None, slots: int | None = None, lock: bool = True) -> KeyIndexResult:
    """Write the key index of one ``.log`` (its valid prefix) next to it or into ``out_dir``;
    deterministic, so any process writes the same bytes.  In place, the partition's writer lock
    is taken (``lock``; a :class:`~mqstore.errors.StoreLockedError` while a writer has it open)."""
    lp = Path(log_path)
    if lp.suffix != LOG_SUFFIX:
        raise InvalidArgumentError("a key index is built from a .log file", path=str(lp))
    check_header_name(header_name)
    if out_dir is not None and not Path(out_dir).is_dir():
        raise StoreNotFoundError("output directory does not exist", path=str(out_dir))
    in_place = out_dir is None or Path(out_dir).resolve() == lp.parent.resolve()
    if lock and in_place and lp.parent.is_dir():
        from mqstore.storage.locks import PartitionLock

        held = PartitionLock(lp.parent)
        try:
            return rebuild_keyindex(lp, out_dir, header_name=header_name, slots=slots, lock=False)
        finally:
            held.release()
    entries, valid = log_entries(lp, header_name=header_name)
    data = build_keyindex(entries, slots=slots, header_name=header_name)
    out = keyindex_path(lp) if out_dir is None else Path(out_dir) / keyindex_path(lp).name
    _atomic_write(out, data)
    t = decode_trailer(data)
    return KeyIndexResult(str(lp), str(out), len(entries), t.hash_slot_num, t.index_num, valid)


# ----------------------------------------------------------------------------- reading
@dataclass(frozen=True)
class ParsedKeyIndex:
    trailer: KeyIndexTrailer
    header: IndexHeader


def parse_keyindex(data: Any, *, path: str | None = None) -> ParsedKeyIndex:
    """Trailer and header of the key index bytes ``data`` (:class:`CorruptIndexError` naming
    ``path`` when they are damaged)."""
    try:
        t = decode_trailer(data)
        return ParsedKeyIndex(t, decode_header(data, t))
    except CorruptIndexError as exc:
        raise CorruptIndexError(exc.message, path=path) from None


def stored_entries(data: Any, parsed: ParsedKeyIndex) -> tuple[KeyEntries, np.ndarray]:
    """The items of a key index as entries (timestamps rebuilt from the seconds field) and their
    previous-item links."""
    t, h = parsed.trailer, parsed.header
    n = max(0, min(h.index_count, t.index_num) - 1)
    base = INDEX_HEADER_SIZE + t.hash_slot_num * 4 + INDEX_ITEM_SIZE
    dt = np.dtype([("h", ">i4"), ("loc", ">i8"), ("diff", ">i4"), ("prev", ">i4")])
    items = np.frombuffer(data, dt, count=n, offset=base)
    ts = h.begin_timestamp + items["diff"].astype(np.int64) * 1000
    return (KeyEntries(items["h"].astype(np.int32), items["loc"].astype(np.int64), ts),
            items["prev"].astype(np.int32))


class KeyIndexReader:
    """A key index opened read-only for lookups (a read-only memory map)."""

    def __init__(self, path: str | os.PathLike[str]) -> None:
        self.path = Path(path)
        try:
            fd = os.open(self.path, os.O_RDONLY)
        except FileNotFoundError:
            raise StoreNotFoundError("key index not found", path=str(self.path)) from None
        try:
            size = os.fstat(fd).st_size
            if size == 0:
                raise CorruptIndexError("key index is empty", path=str(self.path))
            self._mm: mmap.mmap | None = mmap.mmap(fd, size, access=mmap.ACCESS_READ)
        finally:
            os.close(fd)
        try:
            self.parsed = parse_keyindex(self._mm, path=str(self.path))
        except BaseException:
            self.close()
            raise
        t = self.parsed.trailer
        self._body: np.ndarray | None = np.frombuffer(self._mm, np.uint8, count=t.body_size)
        self._header = header_array(self.parsed.header)

    @property
    def header_name(self) -> str | None:
        return self.parsed.trailer.header_name

    @property
    def entries(self) -> int:
        return max(0, self.parsed.header.index_count - 1)

    def candidates(self, hashes: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """``(locations, splits)``: the locations of the items whose hash is ``hashes[i]`` are
        ``locations[splits[i]:splits[i+1]]``, newest first (one compiled walk for all keys)."""
        assert self._body is not None
        return walk_candidates(self._body, self.parsed.trailer, self._header, hashes, self.path)

    def stored(self) -> tuple[KeyEntries, np.ndarray]:
        assert self._mm is not None
        return stored_entries(self._mm, self.parsed)

    def last_location(self) -> int | None:
        """The location of the newest item (None when empty)."""
        assert self._mm is not None
        t, h = self.parsed.trailer, self.parsed.header
        last = min(h.index_count, t.index_num) - 1
        if last < 1:
            return None
        at = INDEX_HEADER_SIZE + 4 * t.hash_slot_num + INDEX_ITEM_SIZE * last + 4
        return int.from_bytes(self._mm[at : at + 8], "big", signed=True)

    def close(self) -> None:
        self._body = None
        if self._mm is not None:
            try:
                self._mm.close()
            except BufferError:  # pragma: no cover - a view still alive: unmapped with it
                pass
            self._mm = None

    def __enter__(self) -> KeyIndexReader:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def walk_candidates(body: np.ndarray, trailer: KeyIndexTrailer, header: np.ndarray, hashes: np.ndarray,
                    path: Path) -> tuple[np.ndarray, np.ndarray]:
    """Every item location of each hash (the RocketMQ batch chain walk with an unbounded time
    window: Kafka timestamps need not grow, so the walk never stops on time)."""
    try:
        return select_many(body, trailer.hash_slot_num, trailer.index_num, header,
                           np.ascontiguousarray(hashes, np.int32), _INT_MAX, _LONG_MIN, _LONG_MAX)
    except CorruptIndexError as exc:
        raise CorruptIndexError(exc.message, path=str(path)) from None


# ----------------------------------------------------------------------------- the live index
class KeyIndex:
    """The key index of a writable segment, kept in a memory map the appends put into."""

    def __init__(self, path: Path, *, header_name: str | None, slots: int | None = None) -> None:
        self.path = path
        self.header_name = header_name
        self.fixed_slots = slots
        self._f: Any = None
        self._mm: mmap.mmap | None = None
        self._body: np.ndarray | None = None
        self.trailer: KeyIndexTrailer | None = None
        self.header = header_array(IndexHeader())

    # -- open / create
    @classmethod
    def open_existing(cls, path: Path, *, header_name: str | None, slots: int | None = None) -> KeyIndex:
        """Map an existing key index (:class:`CorruptIndexError` when it is damaged or indexes
        another header)."""
        k = cls(path, header_name=header_name, slots=slots)
        k._map()
        assert k.trailer is not None
        if k.trailer.header_name != header_name:
            k.close()
            raise CorruptIndexError(f"key index indexes header {k.trailer.header_name!r}, the log is configured "
                                    f"for {header_name!r}", path=str(path))
        return k

    @classmethod
    def create(cls, path: Path, entries: KeyEntries, *, header_name: str | None, slots: int | None = None,
               capacity: int | None = None) -> KeyIndex:
        """Write a key index holding ``entries`` with room for ``capacity`` entries, and map it."""
        k = cls(path, header_name=header_name, slots=slots)
        k._write(entries, capacity)
        k._map()
        return k

    def _write(self, entries: KeyEntries, capacity: int | None, end_timestamp: int | None = None) -> None:
        cap = max(len(entries), capacity or 0)
        s, items = geometry_for(cap, self.fixed_slots)
        _atomic_write(self.path, build_keyindex(entries, slots=s, index_num=items, header_name=self.header_name,
                                                end_timestamp=end_timestamp))

    def _map(self) -> None:
        self._unmap()
        try:
            f = open(self.path, "r+b")
        except FileNotFoundError:
            raise StoreNotFoundError("key index not found", path=str(self.path)) from None
        try:
            size = os.fstat(f.fileno()).st_size
            if size == 0:
                raise CorruptIndexError("key index is empty", path=str(self.path))
            mm = mmap.mmap(f.fileno(), size)
        except BaseException:
            f.close()
            raise
        self._f, self._mm = f, mm
        parsed = parse_keyindex(mm, path=str(self.path))
        self.trailer = parsed.trailer
        self.header = header_array(parsed.header)
        self._body = np.frombuffer(mm, np.uint8, count=parsed.trailer.body_size)

    def _unmap(self) -> None:
        self._body = None
        if self._mm is not None:
            try:
                self._mm.close()
            except BufferError:  # pragma: no cover - a view still alive
                pass
            self._mm = None
        if self._f is not None:
            self._f.close()
            self._f = None

    @property
    def count(self) -> int:
        """Entries held."""
        return int(self.header[H_INDEX_COUNT]) - 1

    def stored(self) -> tuple[KeyEntries, np.ndarray]:
        assert self._mm is not None and self.trailer is not None
        return stored_entries(self._mm, ParsedKeyIndex(self.trailer, IndexHeader(*(int(v) for v in self.header))))

    # -- writes
    def append(self, entries: KeyEntries) -> None:
        """Put ``entries`` (record order, after every entry held); grows the file when full."""
        m = len(entries)
        if m == 0:
            return
        assert self.trailer is not None and self._body is not None
        if self.count + m > self.trailer.index_num - 1:
            self._grow(entries)
            return
        t = self.trailer
        bulk_put(self._body, t.hash_slot_num, t.index_num, self.header, entries.key_hash, entries.location,
                 entries.timestamp)

    def _grow(self, more: KeyEntries) -> None:
        old, _ = self.stored()
        end_ts = int(more.timestamp[-1]) if len(more) else int(self.header[H_END_TS])
        both = KeyEntries.concat([old, more])
        # the held items keep their second-granular times: rebuilt from them they get the same
        # time field back; the header's end timestamp is the last real one
        cap = max(2 * len(both), INITIAL_ITEMS)
        self._unmap()
        self._write(both, cap, end_timestamp=end_ts)
        self._map()

    def compact(self) -> None:
        """Rewrite with the exact geometry of the entries held (what a rebuild writes)."""
        assert self.trailer is not None
        want = geometry_for(self.count, self.fixed_slots)
        if (self.trailer.hash_slot_num, self.trailer.index_num) == want:
            return
        old, _ = self.stored()
        end_ts = int(self.header[H_END_TS]) if self.count else None
        self._unmap()
        self._write(old, None, end_timestamp=end_ts)
        self._map()

    def candidates(self, hashes: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """As :meth:`KeyIndexReader.candidates`, on the live map."""
        assert self._body is not None and self.trailer is not None
        return walk_candidates(self._body, self.trailer, self.header, hashes, self.path)

    def flush(self) -> None:
        if self._mm is not None:
            self._mm.flush()

    def close(self) -> None:
        self._unmap()


# ----------------------------------------------------------------------------- verify
@dataclass(frozen=True)
class KeyIndexCheck:
    """The verdict on one key index: ``problem`` (None when sound) and what was compared."""

    path: str
    entries: int
    expected_entries: int
    problem: str | None
    position: int | None = None
    behind: bool = False  # sound, but holds only the first entries (a live writer's index between puts)


def verify_keyindex(keyindex: str | os.PathLike[str], log_path: str | os.PathLike[str]) -> KeyIndexCheck:
    """Compare a key index with what a rebuild of its ``.log`` with the file's own geometry and
    indexed header writes (the valid prefix of the log)."""
    kp = Path(keyindex)
    data = kp.read_bytes()
    try:
        parsed = parse_keyindex(data, path=str(kp))
    except CorruptIndexError as exc:
        return KeyIndexCheck(str(kp), 0, 0, f"unreadable key index: {exc.message}")
    t = parsed.trailer
    entries, _ = log_entries(log_path, header_name=t.header_name)
    held = max(0, parsed.header.index_count - 1)
    if len(entries) > t.index_num - 1:
        return KeyIndexCheck(str(kp), held, len(entries),
                             f"the log has {len(entries)} key entries, the key index room for {t.index_num - 1}")
    want = build_keyindex(entries, slots=t.hash_slot_num, index_num=t.index_num, header_name=t.header_name)
    if want == data:
        return KeyIndexCheck(str(kp), held, len(entries), None)
    if held < len(entries):
        part = KeyEntries(entries.key_hash[:held], entries.location[:held], entries.timestamp[:held])
        if build_keyindex(part, slots=t.hash_slot_num, index_num=t.index_num, header_name=t.header_name) == data:
            return KeyIndexCheck(str(kp), held, len(entries), None, behind=True)
    a = np.frombuffer(data, np.uint8)
    b = np.frombuffer(want, np.uint8)
    first = int(np.nonzero(a != b)[0][0])
    if held != len(entries):
        why = f"the key index holds {held} entries, the log has {len(entries)}"
    elif first < INDEX_HEADER_SIZE:
        why = "the key index header differs from a rebuild"
    elif first < INDEX_HEADER_SIZE + 4 * t.hash_slot_num:
        why = f"hash slot {(first - INDEX_HEADER_SIZE) // 4} differs from a rebuild"
    else:
        why = f"item {(first - INDEX_HEADER_SIZE - 4 * t.hash_slot_num) // INDEX_ITEM_SIZE} differs from a rebuild"
    return KeyIndexCheck(str(kp), held, len(entries), why, first)


def dump_keyindex(path: str | os.PathLike[str]) -> Iterator[dict[str, Any]]:
    """The header line, then one line per item (newest last) of a key index."""
    r = KeyIndexReader(path)
    t, h = r.parsed.trailer, r.parsed.header
    yield {"type": "keyindex_header", "hash_slot_num": t.hash_slot_num, "index_num": t.index_num,
           "header_name": t.header_name, "begin_timestamp": h.begin_timestamp, "end_timestamp": h.end_timestamp,
           "hash_slot_count": h.hash_slot_count, "index_count": h.index_count}
    e, prev = r.stored()
    base = parse_base_offset(path)
    for i in range(len(e)):
        loc = int(e.location[i])
        yield {"type": "keyindex_item", "item": i + 1, "key_hash": int(e.key_hash[i]),
               "offset": base + (loc >> 32), "position": loc & 0xFFFFFFFF,
               "time_diff_s": (int(e.timestamp[i]) - h.begin_timestamp) // 1000, "prev": int(prev[i])}
    r.close()
