"""The DLedger CommitLog of a RocketMQ store (``enableDLegerCommitLog=true``): where its files are,
how its entries are walked, and a read-only :class:`DLedgerCommitLog` that every reader of the
CommitLog (inspect, dump, get, verify, rebuild-index, the API) uses in place of the classic one.

Layout (docs/formats/rocketmq-dledger.md)::

    <root>/dledger-<selfId>/data/<20-digit offset>    entries (all files one size: mappedFileSizeCommitLog)
    <root>/dledger-<selfId>/index/<20-digit offset>   32-byte index units (default 160 MiB files)
    <root>/dledger-<selfId>/checkpoint                endIndex / committedIndex (Java properties)
    <root>/dledger-<selfId>/currterm                  currTerm / voteLeader (Java properties)

DLedger 0.1 (RocketMQ 4.5) names the home ``<dLegerGroup>-<selfId>`` instead, and
``storePathDLedgerCommitLog`` may put ``data/`` elsewhere.  The wrapped CommitLog records sit in
the data files at their own physical offsets (entry position + 48), so a ConsumeQueue unit or an
IndexFile item points straight at them: reading by offset is the classic CommitLog's; only the
walk from record to record differs (48-byte headers between records, a blank filler of magic -1
at the end of each data file), which :meth:`DLedgerCommitLog.scan` does.

mqstore reads DLedger stores only; :class:`DLedgerWriter` makes them (tests, demos) as DLedger and
the broker's append hook do.
"""

from __future__ import annotations

import os
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import BinaryIO

import numpy as np

from mqstore.errors import (
    CorruptDataError,
    GeometryMismatchError,
    InvalidArgumentError,
    ReadOnlyStoreError,
)
from mqstore.formats.rocketmq import dledger as fmt
from mqstore.formats.rocketmq.record import (
    TRANSACTION_MASK,
    TRANSACTION_PREPARED_TYPE,
    TRANSACTION_ROLLBACK_TYPE,
    MessageRecord,
    encode_record,
)
from mqstore.kernels.buffers import as_u8
from mqstore.kernels.rocketmq.scan import (
    STOP_BLANK,
    STOP_END,
    STOP_INVALID,
    STOP_LIMIT,
    DispatchBatch,
    scan_segment,
)
from mqstore.storage.layout import offset_files, offset_name
from mqstore.storage.mapped import MappedFileQueue, MultiPathMappedFileQueue
from mqstore.storage.rocketmq.commitlog import DEFAULT_COMMIT_LOG_FILE_SIZE, CommitLog, RecoveryResult
from mqstore.storage.rocketmq.config import StoreConfig
from mqstore.storage.rocketmq.layout import (
    CURRTERM_FILE,
    DLEDGER_CHECKPOINT_FILE,
    DLEDGER_DATA_DIR,
    DLEDGER_HOME_PREFIX,
    DLEDGER_INDEX_DIR,
    DLedgerHome,
    commit_log_dirs,
    detect_dledger,
    dledger_home,
    find_dledger_homes,
    is_dledger_store,
)


def read_properties_file(path: Path) -> dict[str, str] | None:
    """A DLedger ``checkpoint`` / ``currterm`` file (``None`` when it does not exist)."""
    try:
        data = path.read_bytes()
    except FileNotFoundError:
        return None
    except OSError as exc:
        raise CorruptDataError(f"cannot read {path.name}: {exc}", path=str(path)) from exc
    return fmt.parse_properties(data)


def _int_value(props: dict[str, str] | None, key: str) -> int | None:
    if not props or key not in props:
        return None
    try:
        return int(props[key])
    except ValueError:
        return None


# =============================================================================== entries
@dataclass(slots=True)
class EntryWalk:
    """Every entry of the data files that DLedger's recovery accepts, in order."""

    pos: np.ndarray  # int64, global position of each entry
    size: np.ndarray  # int64, whole entry size
    index: np.ndarray  # int64
    term: np.ndarray  # int64
    body_crc: np.ndarray  # int64 (DLedger's own field; 0 as written)
    end: int  # global end of the last accepted entry (where new entries would go)
    error: str | None = None  # why the walk stopped before the end of the written data
    error_at: int | None = None  # where
    blanks: list[tuple[int, int]] = field(default_factory=list)  # (global position, stated length)

    def __len__(self) -> int:
        return len(self.pos)


@dataclass(slots=True)
class _FileWalk:
    """The accepted entries of one data file (global positions) and how the walk ended there."""

    pos: np.ndarray
    size: np.ndarray
    index: np.ndarray
    term: np.ndarray
    body_crc: np.ndarray
    end: int = 0  # global end of the last accepted entry (or of the file after a filler)
    blank: tuple[int, int] | None = None  # (global position, stated length) of the filler
    error: str | None = None
    error_at: int | None = None


def walk_file(buf, base: int, file_size: int, *, start: int = 0, prev_index: int = -1, prev_term: int = -1,
              name: str = "") -> _FileWalk:
    """Walk the entries of one data file (``buf``, global position ``base``) from in-file
    position ``start`` by DLedger's recovery rules (the compiled
    :func:`~mqstore.kernels.rocketmq.dledger.walk_dledger_entries`): a header must be valid
    (magic 1, size = body length + 48, ``pos`` = its own position) and fit in the file, indexes
    must follow ``prev_index`` one by one and terms never go below ``prev_term``; magic -1 (the
    filler) closes the file; zeros end the data.  Stops at the first entry that breaks a rule,
    with the reason in ``error``."""
    from mqstore.kernels.rocketmq import dledger as kd  # numba: only DLedger stores load it
    from mqstore.kernels.rocketmq.dledger import walk_dledger_entries

    u8 = as_u8(buf)
    end = min(file_size, len(u8))
    parts: list[tuple[np.ndarray, ...]] = []
    p = start
    while True:
        *cols, status, stop = walk_dledger_entries(u8, base, end, p, prev_index, prev_term, 1 << 16)
        parts.append(tuple(cols))
        if len(cols[0]):
            prev_index, prev_term = int(cols[2][-1]), int(cols[3][-1])
        p = stop
        if status != kd.W_LIMIT:
            break
    cat = [np.concatenate([c[k] for c in parts]) for k in range(5)]
    w = _FileWalk(*cat, end=base + p)
    where = f"data file {name}" if name else "the data file"
    if status == kd.W_BLANK:
        n = int.from_bytes(bytes(u8[p + 4 : p + 8]), "big", signed=True) if p + 8 <= end else -1
        w.blank, w.end = (base + p, n), base + file_size
    elif status == kd.W_CUT:
        w.error, w.error_at = f"DLedger entry header cut by the end of {where}", base + p
    elif status != kd.W_END:
        h = fmt.EntryHeader.decode(bytes(u8[p : p + fmt.ENTRY_HEADER_SIZE]))
        why = {kd.W_HEADER: lambda: h.problem(base + p),
               kd.W_PAST: lambda: f"entry of {h.size} bytes runs past the end of {where}",
               kd.W_GAP: lambda: f"entry index {h.index} does not follow {prev_index}",
               kd.W_TERM: lambda: f"entry term {h.term} is lower than the previous entry's {prev_term}"}[status]()
        w.error, w.error_at = f"DLedger entry at position {base + p}: {why}", base + p
    return w


def walk_entries(files: Sequence, file_size: int) -> EntryWalk:
    """Walk the entries of the data files ``files`` (:class:`~mqstore.storage.mapped.MappedFile`,
    ascending) with :func:`walk_file`, file after file while each ends with a filler; files must
    follow each other without a gap."""
    parts: list[_FileWalk] = []
    blanks: list[tuple[int, int]] = []
    end = files[0].file_from_offset if files else 0
    error = error_at = None
    prev_index = prev_term = -1
    for k, mf in enumerate(files):
        if k and mf.file_from_offset != files[k - 1].file_from_offset + file_size:
            error, error_at = (f"data file {mf.path.name} does not follow {files[k - 1].path.name} "
                               f"(files of {file_size} bytes)"), mf.file_from_offset
            break
        fw = walk_file(mf.mm, mf.file_from_offset, file_size, prev_index=prev_index, prev_term=prev_term,
                       name=mf.path.name)
        parts.append(fw)
        end = fw.end
        if len(fw.index):
            prev_index, prev_term = int(fw.index[-1]), int(fw.term[-1])
        if fw.blank is not None:
            blanks.append(fw.blank)
        if fw.error is not None:
            error, error_at = fw.error, fw.error_at
            break
        if fw.blank is None:
            break

    def col(name: str) -> np.ndarray:
        return np.concatenate([getattr(fw, name) for fw in parts]) if parts else np.empty(0, np.int64)

    return EntryWalk(col("pos"), col("size"), col("index"), col("term"), col("body_crc"), end, error, error_at,
                     blanks)


# =============================================================================== the log
class DLedgerCommitLog(CommitLog):
    """The DLedger data files read as a CommitLog (read-only).

    Offsets are the broker's: a message is at its entry's position + 48, which is what its
    PHYSICALOFFSET field, the ConsumeQueue units and the IndexFile items say.  ``max_offset`` is
    the end of the last entry DLedger's recovery accepts (:func:`walk_entries`).

    ``classic_dirs``: a store migrated to DLedger keeps its classic CommitLog segments below the
    first DLedger data file (the broker's ``dividedCommitlogOffset``); they are read as the classic
    CommitLog (records back to back, up to the blank record the broker wrote when it switched)."""

    has_segment_table = False  # entries wrap the records: queries read them record by record
    can_defer_valid_end = False  # its entries are walked at open (recovery of the DLedger files)

    def __init__(self, home: DLedgerHome, file_size: int = DEFAULT_COMMIT_LOG_FILE_SIZE, *,
                 read_only: bool = True, classic_dirs: Sequence[str] = ()) -> None:
        if not read_only:
            raise ReadOnlyStoreError("mqstore reads DLedger CommitLogs but does not write them: open the store "
                                     "read-only", path=str(home.home))
        if file_size < 64:
            raise InvalidArgumentError(f"DLedger data file size {file_size} is too small")
        self.home = home
        self.file_size = file_size
        dirs = list(home.data_dirs)
        classic = [d for d in dict.fromkeys(str(x) for x in classic_dirs) if offset_files(d)]
        if len(dirs) + len(classic) > 1:
            self.queue: MappedFileQueue = MultiPathMappedFileQueue(classic + dirs, [], file_size, read_only=True)
        else:
            self.queue = MappedFileQueue(Path(dirs[0]), file_size, read_only=True)
        self._data_dirs = {Path(d).resolve() for d in dirs}
        self.directory = self.queue.directory
        self.read_only = True
        self._warmed = (-1, 0)
        self.walk: EntryWalk | None = None  # every entry, walked on demand (entries())
        self.tail = EntryWalk(*(np.empty(0, np.int64),) * 5, 0)  # the recovery walk (load())
        self.data_files: list = []
        self._loaded = False
        self._tail_from = 0
        self._file_walk: tuple[int, _FileWalk] | None = None
        self.classic_files: list = []
        #: where the DLedger data begins (the broker's dividedCommitlogOffset); 0 without classic files
        self.divided = 0

    def load(self) -> None:
        """Map the files and find the end of the log as DLedger's recovery does: walking from the
        third newest data file on (older files hold entries DLedger does not re-check at start;
        a full scan — dump, verify, rebuild — walks them as it reads them)."""
        if self._loaded:  # loaded once (the store's recovery calls it again)
            return
        self._loaded = True
        self.queue.load()
        data = [f for f in self.queue.files if f.path.parent.resolve() in self._data_dirs]
        self.classic_files = [f for f in self.queue.files if f.path.parent.resolve() not in self._data_dirs]
        if self.classic_files and data and self.classic_files[-1].file_from_offset > data[0].file_from_offset:
            raise GeometryMismatchError(
                f"classic CommitLog segment {self.classic_files[-1].path.name} lies above the DLedger data file "
                f"{data[0].path.name}", path=str(self.classic_files[-1].path))
        if self.classic_files:
            self.divided = data[0].file_from_offset if data else self.classic_files[-1].end_offset
        self.data_files = data
        self._tail_from = max(len(data) - 3, 0)
        self.tail = walk_entries(data[self._tail_from:], self.file_size)
        if not data:
            self.tail.end = self.divided
        self.queue.set_positions(self.tail.end)

    def entries(self) -> EntryWalk:
        """Every entry of the log, walked from the first data file (held in memory: verify and
        the tests use it; the scan walks file by file)."""
        if not self._loaded:
            self.load()
        if self.walk is None:
            self.walk = walk_entries(self.data_files, self.file_size)
            if not self.data_files:
                self.walk.end = self.divided
        return self.walk

    def _walks(self, first: int = 0) -> Iterator[tuple[int, _FileWalk]]:
        """``(data file number, its walk)`` from data file ``first`` on, each walk going on from
        the previous one's last index and term, until a file that is not closed by a filler or
        breaks a rule (a gap between files is such a rule)."""
        prev_index = prev_term = -1
        files = self.data_files
        for k in range(first, len(files)):
            mf = files[k]
            if k > first and mf.file_from_offset != files[k - 1].file_from_offset + self.file_size:
                e = np.empty(0, np.int64)
                yield k, _FileWalk(e, e, e, e, e, end=mf.file_from_offset,
                                   error=f"data file {mf.path.name} does not follow {files[k - 1].path.name} "
                                         f"(files of {self.file_size} bytes)", error_at=mf.file_from_offset)
                return
            fw = walk_file(mf.mm, mf.file_from_offset, self.file_size, prev_index=prev_index, prev_term=prev_term,
                           name=mf.path.name)
            yield k, fw
            if fw.error is not None or fw.blank is None:
                return
            if len(fw.index):
                prev_index, prev_term = int(fw.index[-1]), int(fw.term[-1])

    # ------------------------------------------------------------------ what DLedger keeps aside
    def checkpoint(self) -> dict[str, str] | None:
        return read_properties_file(self.home.checkpoint)

    def committed_index(self) -> int | None:
        return _int_value(self.checkpoint(), "committedIndex")

    def current_term(self) -> int | None:
        return _int_value(read_properties_file(self.home.currterm), "currTerm")

    def index_files(self) -> list[Path]:
        return offset_files(self.home.index_dir)

    def entry_at(self, offset: int) -> fmt.EntryHeader | None:
        """The header of the entry whose message starts at physical ``offset`` (``None``: none)."""
        at = offset - fmt.ENTRY_HEADER_SIZE
        k = next((i for i, f in enumerate(self.data_files) if f.file_from_offset <= at < f.end_offset), None)
        if k is None:
            return None
        if self._file_walk is None or self._file_walk[0] != k:
            mf = self.data_files[k]
            self._file_walk = (k, walk_file(mf.mm, mf.file_from_offset, self.file_size, name=mf.path.name))
        fw = self._file_walk[1]
        i = int(np.searchsorted(fw.pos, at))
        if i >= len(fw.pos) or int(fw.pos[i]) != at:
            return None
        mf = self.data_files[k]
        return fmt.EntryHeader.decode(mf.mm, at - mf.file_from_offset)

    def info(self) -> dict:
        """What ``inspect`` shows of the DLedger files, from the first entry and the recovery walk
        (indexes are consecutive: their count is last - first + 1); problems in older files are
        found by the scan and :meth:`problems`, not here."""
        first = last = None
        if self.data_files:
            h = fmt.EntryHeader.decode(self.data_files[0].mm, 0)
            if h.problem(self.data_files[0].file_from_offset) is None:
                first = h
        t = self.tail if len(self.tail) or self._tail_from == 0 else self.entries()
        if len(t):
            last = (int(t.index[-1]), int(t.term[-1]))
        try:
            cp = self.checkpoint()
            term_file = read_properties_file(self.home.currterm)
            file_error = None
        except CorruptDataError as exc:
            cp, term_file, file_error = None, None, exc.message
        committed = _int_value(cp, "committedIndex")
        last_index = last[0] if last is not None else None
        count = (last_index - first.index + 1) if first is not None and last_index is not None else 0
        return {
            "home": str(self.home.home), "selfId": self.home.self_id, "dataDirs": list(self.home.data_dirs),
            "classicSegments": [f.path.name for f in self.classic_files], "dividedOffset": self.divided,
            "dataFileSize": self.file_size, "dataFiles": [f.path.name for f in self.queue.files],
            "indexFiles": [p.name for p in self.index_files()],
            "entries": count, "firstIndex": first.index if first is not None else None, "lastIndex": last_index,
            "firstTerm": first.term if first is not None else None, "lastTerm": last[1] if last is not None else None,
            "dataEnd": self.tail.end, "checkpointEndIndex": _int_value(cp, "endIndex"), "committedIndex": committed,
            "uncommittedEntries": (last_index - committed)
            if last_index is not None and committed is not None and last_index > committed else 0,
            "currTerm": _int_value(term_file, "currTerm"), "stoppedAt": self.tail.error, "fileError": file_error,
        }

    # ------------------------------------------------------------------ recovery (read-only)
    def choose_recovery_segment(self, *, normal: bool, dispatch_from_phy: int, min_timestamp: int,
                                check_crc: bool) -> int:
        return 0

    def find_valid_end(self, start_index: int, *, check_crc: bool) -> RecoveryResult:
        start = self.queue.files[0].file_from_offset if self.queue.files else 0
        return RecoveryResult(self.tail.end, start, 0, self.tail.error)

    def truncate_dirty(self, offset: int) -> int:
        raise ReadOnlyStoreError("a DLedger CommitLog is read-only here", path=str(self.home.home))

    def append_records(self, sizes, encode_at):  # type: ignore[override]
        raise ReadOnlyStoreError("a DLedger CommitLog is read-only here", path=str(self.home.home))

    def append_encoded(self, sizes, write):  # type: ignore[override]
        raise ReadOnlyStoreError("a DLedger CommitLog is read-only here", path=str(self.home.home))

    # ------------------------------------------------------------------ the dispatch walk
    def scan(self, start: int, end: int | None = None, *, check_crc: bool = False, max_records: int | None = None,
             skip_length_mismatch: bool = True) -> Iterator[DispatchBatch]:
        """Dispatch batches of the messages whose entries lie in [start, end) (entry position +
        48 >= ``start``), as the broker's reput reads a DLedger CommitLog: one message per entry,
        the blank filler leading to the next data file.  The batches are those of the classic
        scan over the same records; ``next_offset`` is the end of the last entry consumed (at a
        stop: the position of the entry that stopped it)."""
        if not self._loaded:
            self.load()
        end = self.max_offset if end is None else min(end, self.max_offset)
        if self.classic_files and start < self.divided:  # a migrated store: the classic part first
            for batch in CommitLog.scan(self, start, min(end, self.divided), check_crc=check_crc,
                                        max_records=max_records, skip_length_mismatch=skip_length_mismatch):
                yield batch
                if batch.stop == STOP_INVALID:
                    return
            start = self.divided
            if end <= start:
                return
        limit = max_records if max_records is not None and max_records > 0 else None
        first = next((k for k, f in enumerate(self.data_files) if start < f.end_offset), len(self.data_files))
        for k, fw in self._walks(first):
            mf = self.data_files[k]
            idx = np.flatnonzero((fw.pos + fmt.ENTRY_HEADER_SIZE >= start) & (fw.pos + fw.size <= end))
            i, j = (int(idx[0]), int(idx[-1]) + 1) if len(idx) else (0, 0)
            last_file = fw.error is not None or fw.blank is None or k + 1 >= len(self.data_files) or \
                fw.end >= end
            err_here = fw.error is not None and fw.error_at is not None and fw.error_at >= start and \
                (fw.error_at < end or end >= self.max_offset)
            while i < j:
                b = min(j, i + limit) if limit is not None else j
                batch = scan_entry_bodies(mf.array, mf.file_from_offset, fw.pos[i:b], fw.size[i:b],
                                          check_crc=check_crc, skip_length_mismatch=skip_length_mismatch)
                if batch.stop == STOP_INVALID:
                    yield batch
                    return
                if b < j:
                    batch.stop = STOP_LIMIT
                elif err_here:
                    batch.stop, batch.error, batch.next_offset = STOP_INVALID, fw.error, int(fw.error_at or 0)
                elif not last_file:
                    batch.stop = STOP_BLANK
                yield batch
                if batch.stop == STOP_INVALID:
                    return
                i = b
            if len(idx) == 0 and err_here:
                yield DispatchBatch.empty(int(fw.error_at or 0), STOP_INVALID, fw.error)
                return
            if last_file:
                return

    # ------------------------------------------------------------------ verification
    def problems(self, max_problems: int = 1000) -> list[str]:
        """What is wrong with the DLedger files themselves besides the walk's stop (which
        :meth:`scan` reports as an invalid record): blank fillers, the index units against the
        entries (magic, pos, size, index, term), units past the data, files of another size."""
        out: list[str] = []
        w = self.entries()
        home = self.home.home

        def add(text: str) -> None:
            if len(out) < max_problems:
                out.append(text)

        if self.classic_files and self.classic_files[-1].end_offset != self.divided:
            add(f"dledger: the classic CommitLog ends at {self.classic_files[-1].end_offset}, the DLedger data begins "
                f"at {self.divided} (the broker continues right after the last classic segment)")
        for at, n in w.blanks:
            if n != self.file_size - at % self.file_size:
                add(f"dledger: blank filler at position {at} says {n} bytes, {self.file_size - at % self.file_size} "
                    "remain in its data file")
        files = self.index_files()
        if not files:
            if len(w):
                add(f"dledger: {home.name}/index has no index files for {len(w)} entries")
            return out
        sizes = [p.stat().st_size for p in files]
        isize = max(set(sizes), key=lambda n: (sizes.count(n), n))
        if isize <= 0 or isize % fmt.INDEX_UNIT_SIZE:
            add(f"dledger: index files of {isize} bytes are not whole {fmt.INDEX_UNIT_SIZE}-byte units")
            return out
        units: dict[int, np.ndarray] = {}
        for p, n in zip(files, sizes, strict=True):
            if n != isize:
                add(f"dledger: index file {p.name} is {n} bytes, the others {isize}")
                continue
            if int(p.name) % fmt.INDEX_UNIT_SIZE:
                add(f"dledger: index file {p.name} does not start on a unit")
                continue
            units[int(p.name) // fmt.INDEX_UNIT_SIZE] = np.fromfile(p, dtype=fmt.INDEX_DTYPE)
        if not len(w):
            return out
        first, last = int(w.index[0]), int(w.index[-1])
        got = np.zeros(len(w), dtype=fmt.INDEX_DTYPE)
        have = np.zeros(len(w), bool)
        for start_unit, arr in units.items():
            a = max(first, start_unit)
            b = min(last + 1, start_unit + len(arr))
            if b > a:
                got[a - first : b - first] = arr[a - start_unit : b - start_unit]
                have[a - first : b - first] = True
        missing = np.flatnonzero(~have)
        if len(missing):
            add(f"dledger: no index unit for entries {int(w.index[missing[0]])}..{int(w.index[missing[-1]])} "
                f"({len(missing)} entries)")
        magic = np.full(len(w), fmt.CURRENT_MAGIC, np.int64)
        for name, want in (("magic", magic), ("pos", w.pos), ("size", w.size), ("index", w.index), ("term", w.term)):
            diff = np.flatnonzero(have & (got[name].astype(np.int64) != want))
            for k in diff[:20].tolist():
                add(f"dledger: index unit {int(w.index[k])} says {name} {int(got[name][k])}, the entry at "
                    f"position {int(w.pos[k])} {int(want[k])}")
            if len(diff) > 20:
                add(f"dledger: ... {len(diff) - 20} more index units with a wrong {name}")
        # units past the last entry that point into or past the data (left by a lost tail)
        for start_unit, arr in units.items():
            k0 = max(last + 1 - start_unit, 0)
            tail = arr[k0:]
            live = np.flatnonzero(tail["magic"] != 0)
            if len(live):
                k = int(live[0]) + start_unit + k0
                u = tail[int(live[0])]
                add(f"dledger: index unit {k} (magic {int(u['magic'])}, pos {int(u['pos'])}) is past the last entry "
                    f"{last}" + (f" and points past the data end {w.end}" if int(u["pos"]) >= w.end else ""))
                break
        return out


def scan_entry_bodies(arr: np.ndarray, base: int, entry_pos: np.ndarray, entry_size: np.ndarray, *,
                      check_crc: bool = False, skip_length_mismatch: bool = True) -> DispatchBatch:
    """The classic dispatch scan over the messages of consecutive entries of one data file
    (``arr``: the file, global position ``base``; the entries' global positions and sizes),
    gathered into one buffer and mapped back: the batch's offsets are the messages' own (entry
    position + 48).  A message that does not fill its entry's body or does not name its own offset
    stops the batch (``STOP_INVALID`` at the entry's position); ``next_offset`` is otherwise the
    end of the last entry (``STOP_END``)."""
    pos = entry_pos - base
    bstart = pos + fmt.ENTRY_HEADER_SIZE
    blen = entry_size - fmt.ENTRY_HEADER_SIZE
    # the record inside must fill the body and say where it is: else the entry is corrupt
    from mqstore.kernels.rocketmq import dledger as kd  # numba: only DLedger stores load it
    from mqstore.kernels.rocketmq.dledger import gather_entry_bodies

    compact, n_ok, code, value = gather_entry_bodies(arr, base, entry_pos, entry_size)
    bad = None
    if code != kd.G_OK:
        k = n_ok
        why = {kd.G_SMALL: f"body of {value} bytes holds no message record",
               kd.G_TOTAL: f"message TOTALSIZE {value} is not the entry body length {int(blen[k])}",
               kd.G_PHYSICAL: f"message says it is at offset {value}, its entry puts it at {int(bstart[k] + base)}"}[code]
        bad = (k, why)
    cstart = np.concatenate([[0], np.cumsum(blen[:n_ok])]).astype(np.int64)
    batch = scan_segment(compact, 0, 0, len(compact), check_crc=check_crc,
                         skip_length_mismatch=skip_length_mismatch)
    real = bstart[:n_ok] + base

    def to_real(c: np.ndarray) -> np.ndarray:
        return real[np.searchsorted(cstart[:-1], c)]

    batch.commit_log_offset = to_real(batch.commit_log_offset).astype(np.int64)
    batch.skipped = [(int(to_real(np.array([o]))[0]), why) for o, why in batch.skipped]
    if batch.stop == STOP_INVALID or (batch.stop == STOP_END and batch.next_offset < len(compact)):
        k = int(np.searchsorted(cstart[:-1], batch.next_offset, side="right")) - 1
        batch.stop = STOP_INVALID
        batch.error = batch.error or "message record cut short inside its entry"
        batch.next_offset = int(real[max(k, 0)])
        return batch
    if batch.stop == STOP_BLANK:  # a blank record inside an entry body: not a message
        k = int(np.searchsorted(cstart[:-1], batch.next_offset, side="right")) - 1
        return _cut(batch, int(real[max(k, 0)]), "CommitLog blank record inside a DLedger entry")
    if bad is not None:
        batch.stop, batch.error = STOP_INVALID, f"DLedger entry at position {int(pos[bad[0]]) + base}: {bad[1]}"
        batch.next_offset = int(pos[bad[0]]) + base
        return batch
    batch.next_offset = int(entry_pos[-1] + entry_size[-1]) if len(entry_pos) else base
    batch.stop = STOP_END
    return batch


def _cut(batch: DispatchBatch, at: int, why: str) -> DispatchBatch:
    batch.stop, batch.error, batch.next_offset = STOP_INVALID, why, at
    return batch


def open_dledger_commit_log(root: str | os.PathLike[str], config: StoreConfig) -> DLedgerCommitLog:
    """The store's DLedger CommitLog, read-only (loaded: entries walked), with the classic
    segments of a store migrated to DLedger below it (``commitlog/`` or ``storePathCommitLog``)."""
    home = dledger_home(root, config)
    paths, ro = commit_log_dirs(root, config.store_path_commit_log, config.read_only_commit_log_store_paths)
    cl = DLedgerCommitLog(home, config.commit_log_file_size, classic_dirs=[p for p in paths + ro if Path(p).is_dir()])
    try:
        cl.load()
    except BaseException:
        cl.close()
        raise
    return cl


def open_commit_log(root: str | os.PathLike[str], config: StoreConfig, *, read_only: bool = True) -> CommitLog:
    """The store's CommitLog, classic or DLedger (``config.enable_dledger_commit_log``), loaded:
    the one place every reader (the store, rebuild-index, the batch-queue commands) gets it."""
    if config.enable_dledger_commit_log:
        return open_dledger_commit_log(root, config)
    paths, ro = commit_log_dirs(root, config.store_path_commit_log, config.read_only_commit_log_store_paths)
    cl = CommitLog(Path(paths[0]), config.commit_log_file_size, read_only=read_only, paths=paths, readonly_paths=ro)
    try:
        cl.load()
    except BaseException:
        cl.close()
        raise
    return cl


# =============================================================================== a writer
@dataclass(slots=True)
class WrittenEntry:
    index: int
    pos: int  # entry position
    offset: int  # the message's physical offset (pos + 48)
    size: int  # the message's TOTALSIZE
    queue_offset: int


class DLedgerWriter:
    """Writes a DLedger CommitLog as a RocketMQ broker with ``enableDLegerCommitLog`` leaves it
    (for tests and demos; the store is otherwise read-only here): each message encoded by
    :func:`~mqstore.formats.rocketmq.record.encode_record` with PHYSICALOFFSET = entry position +
    48 (the broker's append hook), one entry per message, indexes from 0, a blank filler when an
    entry and 8 spare bytes do not fit, one index unit per entry.  ``legacy_group``: the DLedger
    0.1 home name ``<group>-<selfId>``.  ``start_pos`` / ``queue_offsets``: a store migrated to
    DLedger, whose data begins after its last classic segment (``dividedCommitlogOffset``) and whose
    queues go on from the classic ones.  Queue offsets are assigned per (topic, queue) as the
    broker does (0 and not advanced for PREPARED/ROLLBACK transaction messages)."""

    def __init__(self, root: str | os.PathLike[str], self_id: str = "n0", *,
                 file_size: int = fmt.DEFAULT_DATA_FILE_SIZE, index_file_size: int = fmt.DEFAULT_INDEX_FILE_SIZE,
                 term: int = 0, legacy_group: str | None = None, start_pos: int = 0,
                 queue_offsets: dict[tuple[str, int], int] | None = None) -> None:
        if index_file_size % fmt.INDEX_UNIT_SIZE:
            raise InvalidArgumentError("index_file_size must be a multiple of 32")
        self.root = Path(root)
        name = f"{legacy_group}-{self_id}" if legacy_group else DLEDGER_HOME_PREFIX + self_id
        self.home = self.root / name
        self.data_dir = self.home / DLEDGER_DATA_DIR
        self.index_dir = self.home / DLEDGER_INDEX_DIR
        self.data_dir.mkdir(parents=True, exist_ok=True)
        self.index_dir.mkdir(parents=True, exist_ok=True)
        self.file_size = file_size
        self.index_file_size = index_file_size
        self.term = term
        self.next_index = 0
        self.write_pos = start_pos
        self.queue_offsets: dict[tuple[str, int], int] = dict(queue_offsets or {})
        self._open: dict[Path, BinaryIO] = {}

    def _write(self, directory: Path, size: int, offset: int, data: bytes) -> None:
        base = offset - offset % size
        p = directory / offset_name(base)
        fh = self._open.get(p)
        if fh is None:
            for old in [k for k in self._open if k.parent == directory]:  # one open file per directory
                self._open.pop(old).close()
            fh = open(p, "r+b" if p.exists() else "w+b")  # kept open until the writer moves to the next file
            if os.fstat(fh.fileno()).st_size < size:
                fh.truncate(size)
            self._open[p] = fh
        fh.seek(offset % size)
        fh.write(data)

    def append_body(self, body: bytes) -> tuple[int, int]:
        """Append one entry with ``body`` as is; returns ``(index, position)``."""
        n = fmt.ENTRY_HEADER_SIZE + len(body)
        if n + fmt.MIN_BLANK_LEN > self.file_size:
            raise InvalidArgumentError(f"an entry of {n} bytes does not fit in data files of {self.file_size} bytes")
        room = self.file_size - self.write_pos % self.file_size
        if n + fmt.MIN_BLANK_LEN > room:
            self._write(self.data_dir, self.file_size, self.write_pos, fmt.encode_blank(room))
            self.write_pos += room
        pos, index = self.write_pos, self.next_index
        self._write(self.data_dir, self.file_size, pos, fmt.encode_entry(index, self.term, pos, body))
        unit = fmt.IndexUnit(fmt.CURRENT_MAGIC, pos, n, index, self.term).encode()
        self._write(self.index_dir, self.index_file_size, index * fmt.INDEX_UNIT_SIZE, unit)
        self.write_pos += n
        self.next_index += 1
        return index, pos

    def append(self, records: Sequence[MessageRecord], *, store_timestamp: int | None = None) -> list[WrittenEntry]:
        """Append messages (queue offsets assigned; ``store_timestamp`` stamped when given, else
        each record's own)."""
        out = []
        for rec in records:
            tx = rec.sys_flag & TRANSACTION_MASK
            key = (rec.topic, rec.queue_id)
            if tx in (TRANSACTION_PREPARED_TYPE, TRANSACTION_ROLLBACK_TYPE):
                rec.queue_offset = 0
            else:
                rec.queue_offset = self.queue_offsets.get(key, 0)
                self.queue_offsets[key] = rec.queue_offset + 1
            if store_timestamp is not None:
                rec.store_timestamp = store_timestamp
            size = len(encode_record(rec))  # the entry's place depends on its size only
            room = self.file_size - self.write_pos % self.file_size
            pos = self.write_pos if fmt.ENTRY_HEADER_SIZE + size + fmt.MIN_BLANK_LEN <= room else self.write_pos + room
            rec.commit_log_offset = pos + fmt.ENTRY_HEADER_SIZE
            data = encode_record(rec)
            index, at = self.append_body(data)
            assert at == pos
            out.append(WrittenEntry(index, at, at + fmt.ENTRY_HEADER_SIZE, len(data), rec.queue_offset))
        return out

    def close(self, *, committed_index: int | None = None, checkpoint: bool = True) -> None:
        """Write ``checkpoint`` (endIndex, committedIndex: default the last index) and
        ``currterm`` as DLedger does at shutdown."""
        for fh in self._open.values():
            fh.close()
        self._open.clear()
        if not checkpoint:
            return
        last = self.next_index - 1
        (self.home / DLEDGER_CHECKPOINT_FILE).write_bytes(fmt.encode_properties(
            {"endIndex": last, "committedIndex": last if committed_index is None else committed_index}))
        (self.home / CURRTERM_FILE).write_bytes(fmt.encode_properties({"currTerm": self.term, "voteLeader": ""}))


__all__ = ["DLedgerCommitLog", "DLedgerHome", "DLedgerWriter", "EntryWalk", "WrittenEntry", "detect_dledger",
           "dledger_home", "find_dledger_homes", "is_dledger_store", "open_commit_log", "open_dledger_commit_log",
           "walk_entries"]
