"""The sparse time index of the ConsumeQueues (an mqstore sidecar): the one home of its file rule
and of the exact time lookup.

File rule
---------
* **Where**: ``<root>/consumequeue_timeindex/<topic>/<queueId>/<cq file name>.timeindex``, one
  per ConsumeQueue file, in a directory *parallel* to ``consumequeue/``.  Not next to the
  ConsumeQueue files: the broker's ``MappedFileQueue.load`` lists every file of
  ``consumequeue/<topic>/<queueId>/`` and fails the whole store load on a file whose length is
  not the ConsumeQueue file size (and its ``Long.parseLong`` of the name would throw on the
  suffix); nothing in the broker lists the store root, so a sibling directory is never seen.
* **What**: entries ``(store timestamp, queue offset)`` for the units of the ConsumeQueue file at
  file-relative indexes ``0, N, 2N, ...`` (``N`` = ``StoreConfig.time_index_interval``); blank
  pre-fill units and units whose record cannot be read get none.
* **When**: :meth:`QueueTimeIndex.sync` makes a queue's sidecars agree with its ConsumeQueue
  files: entries for new units are appended, entries past the queue's written end are cut
  (recovery's truncation), sidecars whose ConsumeQueue file is gone are deleted (retention,
  recovery).  The dispatcher calls it after each batch when the index is enabled, recovery after
  the ConsumeQueues are recovered and truncated, retention after ConsumeQueue files are deleted,
  the rebuilds after the queues are written.
* **Enabled** when ``StoreConfig.enable_time_index`` is set, or when the store already has a
  ``consumequeue_timeindex/`` directory (a writer must keep existing sidecars true).

Exact lookup
------------
:func:`first_at_least` finds the first queue offset whose store time is ``>= t`` from the known
points of the sidecars (every ``N``-th unit) and a binary search of the unknown stretch between
the two bracketing points: at most ``ceil(log2(N))`` CommitLog records are read (one for the
default ``N = 2``).  Without sidecar entries the stretch is the whole queue (the fallback: a
binary search over the ConsumeQueue reading ``ceil(log2(n + 1))`` records).  Store times are
assumed non-decreasing along a queue (records are stamped under the put lock in CommitLog order).
"""

from __future__ import annotations

import os
from bisect import bisect_left
from collections.abc import Callable
from pathlib import Path

import numpy as np

from mqstore.errors import CorruptIndexError, MqStoreError
from mqstore.formats.rocketmq.consumequeue import CQ_DTYPE, CQ_UNIT_SIZE, INT_MAX
from mqstore.formats.rocketmq.timeindex import (
    DEFAULT_INTERVAL,
    ENTRY_SIZE,
    HEADER_SIZE,
    SUFFIX,
    TimeIndexHeader,
    check_entries,
    encode_entries,
    entries_view,
    grid_positions,
)
from mqstore.storage.layout import offset_files, offset_name, topic_queue_dirs
from mqstore.storage.mapped import ensure_inside

TIMEINDEX_DIR = "consumequeue_timeindex"
KIND = "timeindex"

BOUNDARY_LOWER = "lower"
BOUNDARY_UPPER = "upper"

#: ``(commit_log_offsets, sizes) -> store timestamps`` (-1 where a record cannot be read)
TimesOf = Callable[[np.ndarray, np.ndarray], np.ndarray]
#: ``(commit_log_offset, size) -> store timestamp`` (-1 when unavailable), the CommitLog's pickup
StoreTimeLookup = Callable[[int, int], int]


# =============================================================================== names
def timeindex_root(root: str | os.PathLike[str]) -> Path:
    return Path(root) / TIMEINDEX_DIR


def queue_dir(root: str | os.PathLike[str], topic: str, queue_id: int) -> Path:
    root = Path(root)
    return ensure_inside(root, root / TIMEINDEX_DIR / topic / str(int(queue_id)))


def sidecar_name(cq_file_offset: int) -> str:
    """``<20-digit ConsumeQueue file name>.timeindex``."""
    return offset_name(cq_file_offset, SUFFIX)


def is_sidecar_name(name: str) -> bool:
    return name.endswith(SUFFIX) and name[: -len(SUFFIX)].isascii() and name[: -len(SUFFIX)].isdigit()


def sidecar_files(directory: str | os.PathLike[str]) -> list[Path]:
    """The sidecars of one queue directory, by ConsumeQueue file offset."""
    return offset_files(directory, SUFFIX)


def exists(root: str | os.PathLike[str]) -> bool:
    return timeindex_root(root).is_dir()


def all_sidecars(root: str | os.PathLike[str]) -> list[tuple[str, int, Path]]:
    """``(topic, queueId, path)`` of every sidecar of a store, sorted."""
    return [(topic, qid, p) for topic, qid, qdir in topic_queue_dirs(timeindex_root(root), str.isdigit)
            for p in sidecar_files(qdir)]


def read_sidecar(path: str | os.PathLike[str]) -> tuple[TimeIndexHeader, np.ndarray]:
    """Header and entries (native ``int64`` pairs: ``[:, 0]`` times, ``[:, 1]`` queue offsets) of
    one file; a torn last entry is left out."""
    data = Path(path).read_bytes()
    try:
        header = TimeIndexHeader.decode(data)
    except MqStoreError as exc:
        raise CorruptIndexError(f"time index {path}: {exc.message}", path=str(path)) from exc
    ent = entries_view(data)
    return header, np.stack([ent["store_timestamp"].astype(np.int64), ent["queue_offset"].astype(np.int64)], axis=1) \
        if len(ent) else np.empty((0, 2), np.int64)


class _Sidecar:
    """One ``.timeindex`` file and its entries in memory (times, queue offsets; grown by doubling,
    so a writer appending an entry per put costs O(1) amortised)."""

    __slots__ = ("_q", "_t", "cq_file_offset", "fd", "header", "n", "path", "size")

    def __init__(self, path: Path, cq_file_offset: int, header: TimeIndexHeader, entries: np.ndarray) -> None:
        self.path = path
        self.cq_file_offset = cq_file_offset
        self.header = header
        self._t = entries[:, 0].copy()
        self._q = entries[:, 1].copy()
        self.n = len(entries)
        self.size = HEADER_SIZE + ENTRY_SIZE * self.n
        self.fd: int | None = None  # a writer's append descriptor, opened on first append

    def close(self) -> None:
        if self.fd is not None:
            os.close(self.fd)
            self.fd = None

    @property
    def times(self) -> np.ndarray:
        return self._t[: self.n]

    @property
    def offsets(self) -> np.ndarray:
        return self._q[: self.n]

    def __len__(self) -> int:
        return self.n

    def extend(self, times: np.ndarray, offsets: np.ndarray) -> None:
        k = len(offsets)
        if self.n + k > len(self._t):
            cap = max(16, 2 * len(self._t), self.n + k)
            self._t = np.resize(self._t, cap)
            self._q = np.resize(self._q, cap)
        self._t[self.n : self.n + k] = times
        self._q[self.n : self.n + k] = offsets
        self.n += k
        self.size += ENTRY_SIZE * k

    def cut(self, keep: int) -> None:
        self.n = keep
        self.size = HEADER_SIZE + ENTRY_SIZE * keep


class QueueTimeIndex:
    """The sidecars of one queue.  ``interval``: ``N`` for new files (an existing file keeps the
    interval its header names)."""

    def __init__(self, directory: Path, cq_file_size: int, interval: int = DEFAULT_INTERVAL, *,
                 read_only: bool = False) -> None:
        self.directory = Path(directory)
        self.cq_file_size = cq_file_size
        self.units_per_file = cq_file_size // CQ_UNIT_SIZE
        self.interval = interval
        self.read_only = read_only
        self.files: list[_Sidecar] = []

    # ------------------------------------------------------------------ load
    def load(self) -> None:
        """(Re)read the sidecars; an unreadable header or entries that break the file's structure are
        a :class:`CorruptIndexError` for a reader, and are dropped (rebuilt by the next sync) by a
        writer."""
        self.close()
        self.files = []
        for p in sidecar_files(self.directory):
            base = int(p.name[: -len(SUFFIX)])
            try:
                header, ent = read_sidecar(p)
                problem = None if header.units_per_file == self.units_per_file else (
                    f"written for ConsumeQueue files of {header.units_per_file} units, not {self.units_per_file}")
                if problem is None:
                    arr = np.empty(len(ent), dtype=[("store_timestamp", "i8"), ("queue_offset", "i8")])
                    arr["store_timestamp"], arr["queue_offset"] = ent[:, 0], ent[:, 1]
                    problem = check_entries(header, base // CQ_UNIT_SIZE, arr)
                if problem is not None:
                    raise CorruptIndexError(f"time index {p}: {problem}", path=str(p))
            except CorruptIndexError:
                if self.read_only:
                    raise
                p.unlink()
                continue
            self.files.append(_Sidecar(p, base, header, ent))

    def refresh(self) -> None:
        """A reader's view of files another process appends to: reload when a size changed."""
        try:
            sizes = [(f.path.stat().st_size if f.path.exists() else -1) for f in self.files]
        except OSError:
            sizes = []
        listed = sidecar_files(self.directory)
        if len(listed) != len(self.files) or any(s != f.size for s, f in zip(sizes, self.files, strict=False)):
            self.load()

    # ------------------------------------------------------------------ write
    def _file_for(self, cq_file_offset: int) -> _Sidecar:
        for f in self.files:
            if f.cq_file_offset == cq_file_offset:
                return f
        header = TimeIndexHeader(self.interval, self.units_per_file)
        self.directory.mkdir(parents=True, exist_ok=True)
        path = self.directory / sidecar_name(cq_file_offset)
        tmp = path.with_name(f".{path.name}.tmp")
        tmp.write_bytes(header.encode())
        os.replace(tmp, path)
        f = _Sidecar(path, cq_file_offset, header, np.empty((0, 2), np.int64))
        self.files.append(f)
        self.files.sort(key=lambda s: s.cq_file_offset)
        return f

    def _truncate(self, f: _Sidecar, keep: int) -> None:
        if keep >= len(f):
            return
        f.cut(keep)
        f.close()
        os.truncate(f.path, f.size)

    def _append(self, f: _Sidecar, times: np.ndarray, offsets: np.ndarray) -> None:
        if not len(offsets):
            return
        if f.fd is None:
            f.fd = os.open(f.path, os.O_WRONLY | os.O_APPEND)
        data = encode_entries(times, offsets)
        if os.write(f.fd, data) != len(data):  # pragma: no cover - a full disk
            raise OSError(f"short write to {f.path}")
        f.extend(times, offsets)

    def _delete(self, f: _Sidecar) -> None:
        f.close()
        f.path.unlink(missing_ok=True)
        self.files.remove(f)

    def sync(self, cq_files: list[tuple[int, memoryview | bytes | np.ndarray, int]], times_of: TimesOf, *,
             tail_only: bool = False) -> int:
        """Make the sidecars agree with the ConsumeQueue files ``cq_files`` (``(file offset,
        buffer, written bytes)`` in order): delete the sidecars of files that are gone, cut entries
        past a file's written end, append the entries of new grid units (their store times from
        ``times_of``).  ``tail_only``: only the ConsumeQueue files from the one of the newest
        sidecar on (the dispatcher, after appending).  Returns the entries appended."""
        if self.read_only:
            return 0
        if not tail_only:
            live = {off for off, _b, _n in cq_files}
            for f in [f for f in self.files if f.cq_file_offset not in live]:
                self._delete(f)
            todo = cq_files
        else:
            newest = self.files[-1].cq_file_offset if self.files else None
            k = next((i for i, (off, _b, _n) in enumerate(cq_files) if off == newest), 0)
            todo = cq_files[k:]
        added = 0
        for off, buf, wrote in todo:
            n_units = wrote // CQ_UNIT_SIZE
            first_q = off // CQ_UNIT_SIZE
            have = next((f for f in self.files if f.cq_file_offset == off), None)
            if have is not None:
                keep = int(np.searchsorted(have.offsets, first_q + n_units))
                self._truncate(have, keep)
                interval = have.header.interval
                start = int(have.offsets[-1]) - first_q + interval if len(have) else 0
            else:
                interval = self.interval
                start = 0
            grid = grid_positions(start, n_units, interval)
            if not len(grid):
                continue
            units = np.frombuffer(buf, dtype=CQ_DTYPE, count=n_units)[grid]
            offs = units["offset"].astype(np.int64)
            sizes = units["size"].astype(np.int64)
            real = (offs >= 0) & (sizes > 0) & ~((offs == 0) & (sizes == INT_MAX))
            grid, offs, sizes = grid[real], offs[real], sizes[real]
            if not len(grid):
                continue
            times = np.asarray(times_of(offs, sizes), dtype=np.int64)
            ok = times >= 0
            f = have if have is not None else self._file_for(off)
            self._append(f, times[ok], grid[ok] + first_q)
            added += int(ok.sum())
        return added

    def check_tail(self, store_time: StoreTimeLookup, cq_unit: Callable[[int], tuple[int, int] | None]) -> int:
        """After an unclean shutdown: walk the newest entries back until one agrees with the
        CommitLog, cutting those that do not (a sidecar page that reached the disk while the
        ConsumeQueue's did not).  Returns the entries cut."""
        cut = 0
        for f in reversed(self.files):
            keep = len(f)
            while keep:
                q = int(f.offsets[keep - 1])
                unit = cq_unit(q)
                if unit is not None and store_time(*unit) == int(f.times[keep - 1]):
                    break
                keep -= 1
            cut += len(f) - keep
            self._truncate(f, keep)
            if keep:
                break
        return cut

    def close(self) -> None:
        for f in self.files:
            f.close()

    def destroy(self) -> None:
        for f in list(self.files):
            self._delete(f)
        import shutil  # (only here: shutil and its compression modules stay out of a reader's start-up)

        shutil.rmtree(self.directory, ignore_errors=True)

    # ------------------------------------------------------------------ read
    @property
    def entries(self) -> int:
        return sum(len(f) for f in self.files)

    def bracket(self, threshold: int) -> tuple[int | None, int | None]:
        """``(last known queue offset with time < threshold, first known with time >= threshold)``
        (``None``: no such entry)."""
        files = [f for f in self.files if len(f)]
        if not files:
            return None, None
        lasts = [int(f.times[-1]) for f in files]
        k = bisect_left(lasts, threshold)  # first file whose last time >= threshold
        if k == len(files):
            return int(files[-1].offsets[-1]), None
        f = files[k]
        j = int(np.searchsorted(f.times, threshold, side="left"))
        right = int(f.offsets[j])
        if j > 0:
            return int(f.offsets[j - 1]), right
        return (int(files[k - 1].offsets[-1]) if k > 0 else None), right


def first_at_least(threshold: int, lo: int, hi: int, unit_time: Callable[[int], int],
                   bracket: tuple[int | None, int | None] = (None, None)) -> int:
    """The first queue offset in ``[lo, hi)`` whose store time is ``>= threshold`` (``hi`` when
    none).  ``bracket``: known queue offsets (time < threshold, time >= threshold) that narrow the
    search; ``unit_time(q)`` reads the store time of unit ``q`` (one CommitLog record)."""
    left, right = bracket
    a = lo if left is None else max(lo, left + 1)
    b = hi if right is None else min(hi, right)
    if right is not None and right <= lo:
        return lo
    if left is not None and left + 1 >= hi:
        return hi
    while a < b:
        mid = (a + b) // 2
        if unit_time(mid) >= threshold:
            b = mid
        else:
            a = mid + 1
    return a


def offset_by_time(timestamp: int, boundary: str, lo: int, hi: int, unit_time: Callable[[int], int],
                   index: QueueTimeIndex | None = None) -> int:
    """The exact answer: LOWER, the first queue offset whose store time is ``>= timestamp`` (the
    max offset when none); UPPER, the last whose store time is ``<= timestamp`` (the min offset
    when none, as the broker's clamp gives)."""
    if lo >= hi:
        return lo
    threshold = timestamp if boundary == BOUNDARY_LOWER else timestamp + 1
    br = index.bracket(threshold) if index is not None else (None, None)
    first = first_at_least(threshold, lo, hi, unit_time, br)
    return first if boundary == BOUNDARY_LOWER else max(first - 1, lo)


SEMANTICS_EXACT = "exact"
SEMANTICS_BROKER = "broker"


def cq_offset_for_time(cq, index: QueueTimeIndex | None, timestamp: int, boundary: str,
                       store_time: StoreTimeLookup) -> int:
    """:func:`offset_by_time` over a :class:`~mqstore.storage.rocketmq.consumequeue.ConsumeQueue`
    (``index``: its sidecars, ``None``: the fallback search over the whole queue)."""

    def unit_time(q: int) -> int:
        u = cq.get_unit(q, resolve_ext=False)
        return -1 if u is None else store_time(u.commit_log_offset, u.size)

    return offset_by_time(timestamp, boundary, cq.min_offset_in_queue, cq.max_offset_in_queue, unit_time, index)


def inspect_sidecars(root: str | os.PathLike[str]) -> list[dict]:
    """Every file of ``consumequeue_timeindex/`` by kind (``timeindex``, or ``unknown`` for a
    name that is not a sidecar's), its interval, entries and time range; a file that cannot be
    read is listed with its error, never raised."""
    base = timeindex_root(root)
    if not base.is_dir():
        return []
    out: list[dict] = []
    for p in sorted(x for x in base.rglob("*") if x.is_file()):
        rel = p.relative_to(Path(root)).as_posix()
        parts = p.relative_to(base).parts
        row: dict = {"file": rel, "kind": KIND if is_sidecar_name(p.name) and len(parts) == 3 else "unknown",
                     "topic": parts[0] if len(parts) == 3 else None,
                     "queueId": int(parts[1]) if len(parts) == 3 and parts[1].isdigit() else None,
                     "interval": None, "entries": None, "firstTimestamp": None, "lastTimestamp": None, "error": None}
        if row["kind"] == KIND:
            try:
                header, ent = read_sidecar(p)
                row.update(interval=header.interval, entries=len(ent),
                           firstTimestamp=int(ent[0, 0]) if len(ent) else None,
                           lastTimestamp=int(ent[-1, 0]) if len(ent) else None)
            except (MqStoreError, OSError) as exc:
                row["error"] = str(exc)
        out.append(row)
    return out


def verify_sidecars(root: Path, consume_queues: dict,
                    times_at: Callable[[np.ndarray], tuple[np.ndarray, np.ndarray]],
                    min_commit_log_offset: int) -> list[str]:
    """Problems of the sidecars of a store against its ConsumeQueues and CommitLog
    (``times_at(commit_log_offsets)``: the store times of the records starting there and whether
    one does): an unreadable file, a file without its ConsumeQueue file, an entry off the grid or
    past the written units, an entry whose time is not the message's, a grid unit without its
    entry, a ConsumeQueue file without its sidecar."""
    problems: list[str] = []
    for row in inspect_sidecars(root):
        if row["kind"] != KIND:
            problems.append(f"{row['file']}: not a time index file name")
        elif row["error"] is not None:
            problems.append(f"{row['file']}: {row['error']}")
    by_queue: dict[tuple[str, int], list[Path]] = {}
    for topic, qid, p in all_sidecars(root):
        by_queue.setdefault((topic, qid), []).append(p)
    for key in sorted(by_queue):
        cq = consume_queues.get(key)
        paths = by_queue[key]
        where = f"{TIMEINDEX_DIR}/{key[0]}/{key[1]}"
        files = {mf.file_from_offset: mf for mf in cq.queue.files} if cq is not None else {}
        for p in paths:
            try:
                header, ent = read_sidecar(p)
            except (MqStoreError, OSError):
                continue  # reported above
            problems.extend(_verify_one(where, p.name, header, ent, files.get(int(p.name[: -len(SUFFIX)])),
                                        int(p.name[: -len(SUFFIX)]), times_at, min_commit_log_offset))
        covered = {int(p.name[: -len(SUFFIX)]) for p in paths}
        for off, mf in files.items():
            if off not in covered and mf.wrote_position >= CQ_UNIT_SIZE:
                problems.append(f"{where}: no time index file for ConsumeQueue file {offset_name(off)}")
    return problems


def _verify_one(where: str, name: str, header: TimeIndexHeader, ent: np.ndarray, mf, base: int,
                times_at: Callable[[np.ndarray], tuple[np.ndarray, np.ndarray]], cl_min: int) -> list[str]:
    if mf is None:
        return [f"{where}/{name}: no ConsumeQueue file {offset_name(base)}"]
    if header.units_per_file * CQ_UNIT_SIZE != mf.file_size:
        return [f"{where}/{name}: written for ConsumeQueue files of {header.units_per_file} units"]
    first_q = base // CQ_UNIT_SIZE
    n_units = mf.wrote_position // CQ_UNIT_SIZE
    arr = np.empty(len(ent), dtype=[("store_timestamp", "i8"), ("queue_offset", "i8")])
    arr["store_timestamp"], arr["queue_offset"] = ent[:, 0], ent[:, 1]
    bad = check_entries(header, first_q, arr)
    if bad is not None:
        return [f"{where}/{name}: {bad}"]
    out: list[str] = []
    units = np.frombuffer(mf.mm, dtype=CQ_DTYPE, count=n_units)
    offs_all = units["offset"].astype(np.int64)
    sizes_all = units["size"].astype(np.int64)
    del units
    rel = ent[:, 1] - first_q
    past = rel >= n_units
    for q in ent[past, 1][:3].tolist():
        out.append(f"{where}/{name}: entry for queue offset {q} past the written units ({first_q + n_units})")
    rel, ts = rel[~past], ent[~past, 0]
    offs = offs_all[rel]
    live = offs >= cl_min  # an entry of a unit into a deleted CommitLog segment is not checked (retention)
    real, found = times_at(offs[live])
    wrong = ~found | (real != ts[live])
    for i in np.flatnonzero(wrong)[:3].tolist():
        q = int(rel[live][i]) + first_q
        what = int(real[i]) if found[i] else "is not a record"
        out.append(f"{where}/{name}: queue offset {q} has time {int(ts[live][i])}, its message at "
                   f"{int(offs[live][i])} {what}")
    grid = grid_positions(0, n_units, header.interval)
    g_off, g_size = offs_all[grid], sizes_all[grid]
    wanted = (g_off >= cl_min) & (g_size > 0) & ~((g_off == 0) & (g_size == INT_MAX))
    _t, exists = times_at(g_off)
    wanted &= exists
    missing = wanted & ~np.isin(grid + first_q, ent[:, 1])
    if missing.any():
        out.append(f"{where}/{name}: no entry for queue offset {int(grid[np.argmax(missing)]) + first_q}")
    return out
