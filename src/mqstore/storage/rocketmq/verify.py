"""``verify``: check a RocketMQ store's files against each other without changing them."""

from __future__ import annotations

import sys
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from mqstore.errors import MqStoreError
from mqstore.formats.rocketmq.consumequeue import CQ_DTYPE, CQ_UNIT_SIZE, INT_MAX
from mqstore.formats.rocketmq.consumequeue_ext import MAX_ADDR, undecorate
from mqstore.formats.rocketmq.indexfile import time_diff_seconds
from mqstore.kernels.rocketmq.scan import STOP_INVALID, DispatchBatch
from mqstore.storage.rocketmq.config_files import list_config_files
from mqstore.storage.rocketmq.lmq import MultiDispatchRule, cq_units
from mqstore.storage.rocketmq.store import RocketMQStore


@dataclass(slots=True)
class VerifyReport:
    messages: int = 0
    cq_units: int = 0
    ext_units: int = 0
    index_items: int = 0
    problems: list[str] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return not self.problems


@dataclass(slots=True)
class _Records:
    """What the CommitLog says of its records, as columns sorted by offset."""

    starts: np.ndarray  # int64
    sizes: np.ndarray  # int64
    topic_id: np.ndarray  # int64, index into ``topics``
    queue_id: np.ndarray  # int64
    queue_offset: np.ndarray  # int64
    tags_code: np.ndarray  # int64
    store_ts: np.ndarray  # int64
    topics: dict[str, int]
    pair_keys: np.ndarray  # sorted ``record index << 32 | key hash`` of every (record, IndexFile key)

    n: int  # records; every column has one more row, a sentinel that matches nothing
    key_start: np.ndarray = field(default_factory=lambda: np.zeros(2, np.int64))  # see _scan_records
    # multi-dispatch (LMQ) units per queue: (CommitLog offsets, queue offsets), sorted by offset
    multi: dict[tuple[str, int], tuple[np.ndarray, np.ndarray]] = field(default_factory=dict)

    def find(self, offsets: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """(index of the record starting at each offset — the sentinel row where none does —,
        whether there is one)."""
        from mqstore.kernels.rocketmq.index_check import locate  # (a galloping search: offsets mostly ascend)

        i = np.minimum(locate(self.starts, self.n, offsets), self.n)
        ok = (i < self.n) & (self.starts[i] == offsets)
        return i, ok


def _pair_key(rec: np.ndarray, key_hash: np.ndarray) -> np.ndarray:
    return (rec.astype(np.int64) << 32) | (key_hash.astype(np.int64) & 0xFFFFFFFF)


def _is_dledger(cl: object) -> bool:
    """Whether ``cl`` is a DLedger CommitLog (its module is loaded by the store that opens one, and
    only then: a classic store's verify does not import the DLedger kernels)."""
    mod = sys.modules.get("mqstore.storage.rocketmq.dledger")
    return mod is not None and isinstance(cl, mod.DLedgerCommitLog)


_ITEM_DTYPE = np.dtype([("hash", ">i4"), ("phy", ">i8"), ("diff", ">i4"), ("prev", ">i4")])


def verify_store(root: str | Path, config=None, *, max_problems: int = 1000,
                 progress: Callable[[int, int], None] | None = None) -> VerifyReport:
    """CRC of every record, every ConsumeQueue unit against the CommitLog, every IndexFile item
    against the CommitLog (offset of a real record with a matching key hash) and chain links.
    ``progress(done, total)`` is called after each scanned batch with CommitLog bytes.

    Every check runs over columns (the CommitLog scan's, the ConsumeQueue units', the IndexFile
    items'): Python only formats the problems.  :func:`verify_store_reference` is the same
    verification one element at a time (the tests hold the two equal)."""
    # the scans below are recovery's walk too: the open does not walk the CommitLog first
    store = RocketMQStore(root, config, read_only=True, defer_valid_end=True)
    try:
        if _windowed_applies(store, Path(root)):
            rep = VerifyReport()
            try:
                _verify_windowed(store, Path(root), rep, max_problems, progress)
                return rep
            except _Unordered:
                pass  # records not in offset order: the whole-table check below handles any order
        rep = VerifyReport()
        _verify_table(store, Path(root), rep, max_problems, progress)
    finally:
        store.close()
    return rep


def _verify_table(store: RocketMQStore, root: Path, rep: VerifyReport, max_problems: int,
                  progress: Callable[[int, int], None] | None) -> None:
    """:func:`verify_store` with the whole CommitLog's record table in memory (its memory grows
    with the store): the RocksDB ConsumeQueue, timer and time-index sidecar checks look records
    up in any order, and a CommitLog whose scan is not in offset order."""

    def problem(text: str) -> None:
        if len(rep.problems) < max_problems:
            rep.problems.append(text)

    cl = store.commit_log
    # what a broker with multi-dispatch on wrote (LMQ names at queue 0 unless the config says
    # enableLmq is off)
    recs = _scan_records(cl, rep, problem, progress, MultiDispatchRule(store.config.enable_lmq, True))
    end = store.recovery.commit_log_end
    if _is_dledger(cl):  # the DLedger files themselves: index units, fillers
        for text in cl.problems(max_problems):
            problem(text)
    if store.rocksdb_cq is not None:  # the RocksDB ConsumeQueue (storeType=defaultRocksDB)
        _verify_rocksdb_columns(store.rocksdb_cq, rep, problem, recs, cl.min_offset, end)
    for (topic, qid), cq in sorted(store.consume_queues.items() if store.rocksdb_cq is None else ()):
        for mf in cq.queue.files:
            _check_cq_file(mf, topic, qid, cq, recs, cl.min_offset, lambda: end, rep, problem)
    from mqstore.storage.rocketmq.timeindex import verify_sidecars

    def times_at(offsets: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        i, ok = recs.find(np.asarray(offsets, np.int64))
        return recs.store_ts[i], ok

    for text in verify_sidecars(root, store.consume_queues, times_at, cl.min_offset):
        problem(text)
    for f in store.index.files:
        _check_index_file(f, recs, cl.min_offset, rep, problem)
    for text in store.index.verify_chains():
        problem(f"index/{text}")
    from mqstore.formats.rocketmq.timer import TIMER_TOPIC

    n = recs.n
    tid = recs.topics.get(TIMER_TOPIC, -1)
    _verify_config_and_timer(root, recs.starts[:n], recs.sizes[:n], recs.starts[:n][recs.topic_id[:n] == tid],
                             cl.min_offset, end, problem)


class _Unordered(Exception):
    """The CommitLog scan came out of offset order (the windowed check needs ascending records)."""


def _windowed_applies(store: RocketMQStore, root: Path) -> bool:
    """Whether every check can run a CommitLog window at a time: not for the RocksDB
    ConsumeQueue and the time-index sidecars (they look up about a record per message, in any
    order).  The timer files can (:class:`_TimerLookups`)."""
    from mqstore.storage.rocketmq.timeindex import timeindex_root

    return store.rocksdb_cq is None and not timeindex_root(root).exists()


class _TimerLookups:
    """The CommitLog records the timerlog units point at, found as the windowed scan passes them:
    memory is the timerlog's (its units), not the CommitLog's.  :meth:`columns` gives what
    :func:`~mqstore.storage.rocketmq.timer.check_against_commitlog` takes from the whole record
    table (the sorted starts, their sizes, the starts of timer-topic records), restricted to the
    offsets the units name: the same answers."""

    def __init__(self, state, cl_min: int) -> None:
        offs = state.scan.units.offset_py.astype(np.int64)
        self.offsets = np.unique(offs[offs >= cl_min])
        self.found = np.zeros(len(self.offsets), bool)
        self.on_topic = np.zeros(len(self.offsets), bool)
        self.sizes = np.zeros(len(self.offsets), np.int64)

    def see(self, lo: int | None, hi: int | None, w: _Window) -> None:
        """Answer the offsets in ``[lo, hi)`` from the window of the records starting there."""
        from mqstore.formats.rocketmq.timer import TIMER_TOPIC

        a = 0 if lo is None else int(np.searchsorted(self.offsets, lo))
        b = len(self.offsets) if hi is None else int(np.searchsorted(self.offsets, hi))
        n = w.n
        if a == b or not n:
            return
        q = self.offsets[a:b]
        starts = w.starts[:n]
        i = np.minimum(np.searchsorted(starts, q), n - 1)
        hit = starts[i] == q
        self.found[a:b] = hit
        self.sizes[a:b] = np.where(hit, w.batch.size[:n][i], 0)
        self.on_topic[a:b] = hit & (w.batch.topic_id[:n][i] == w.topic_index.get(TIMER_TOPIC, -1))

    def columns(self) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        return self.offsets[self.found], self.sizes[self.found], self.offsets[self.on_topic]


#: ConsumeQueue units / IndexFile items read per step of the windowed check
_VERIFY_CHUNK = 1 << 16


class _Kept:
    """The first ``limit`` (key, text) problems by key, of any number added in any order."""

    def __init__(self, limit: int) -> None:
        self.limit = max(limit, 0)
        self.items: list[tuple[tuple[int, ...], str]] = []

    def add(self, key: tuple[int, ...], text: str) -> None:
        self.items.append((key, text))
        if len(self.items) > 4 * self.limit + 256:
            self._trim()

    def _trim(self) -> None:
        self.items.sort(key=lambda e: e[0])
        del self.items[self.limit :]

    def texts(self) -> list[str]:
        self._trim()
        return [t for _k, t in self.items]


class _Stream:
    """A cursor over the ConsumeQueue units of one queue (its files in order) or the items of one
    IndexFile, read forwards a CommitLog window at a time."""

    __slots__ = ("counts", "cq", "fi", "files", "index", "pos", "qid", "rank", "strays", "topic")

    def __init__(self, rank: int, files: list, counts: list[int], *, topic: str = "", qid: int = 0, cq=None,
                 index: bool = False) -> None:  # fmt: skip
        self.rank, self.files, self.counts = rank, files, counts
        self.topic, self.qid, self.cq, self.index = topic, qid, cq, index
        self.fi = self.pos = 0
        self.strays: list[tuple[int, np.ndarray, np.ndarray]] = []  # (file, rows, offsets) left behind

    def raw(self, fi: int, start: int, count: int) -> np.ndarray:
        """The bytes of rows ``start .. start + count`` of file ``fi`` (20 a row)."""
        f = self.files[fi]
        pos = f.buffer.item_position(1 + start) if self.index else start * CQ_UNIT_SIZE
        return np.frombuffer(f.mm, np.uint8, count=count * 20, offset=pos)


class _Window:
    """The records of one scan batch (its columns as scanned: in offset order, which is checked),
    their index keys grouped per record and their multi-dispatch units."""

    def __init__(self, batch, rule: MultiDispatchRule, scan_problems: list[str] | None) -> None:
        n = self.n = len(batch)
        self.batch = batch
        self.starts = batch.commit_log_offset
        if n > 1 and not bool((self.starts[1:] > self.starts[:-1]).all()):
            raise _Unordered
        self.topic_index = {t: i for i, t in enumerate(batch.topics)}
        if len(self.topic_index) != len(batch.topics):
            raise _Unordered  # (a scan names each topic of a batch once)
        krows = batch.key_row
        if len(krows) > 1 and bool((krows[1:] < krows[:-1]).any()):
            raise _Unordered
        self.key_start = np.zeros(n + 1, np.int64)
        np.cumsum(np.bincount(krows, minlength=n)[:n], out=self.key_start[1:])
        self.keys = batch.key_hash.astype(np.int64)  # (the check compares the low 32 bits)
        self.multi: dict[tuple[str, int], tuple[np.ndarray, np.ndarray]] = {}
        if len(batch.multi_row):
            u = cq_units(batch, rule)
            if scan_problems is not None:
                for off, what in u.problems:
                    scan_problems.append(f"commitlog: record at offset {off}: {what}")
            for t, q, grp in u.groups():
                sel = grp[u.multi[grp]]
                if len(sel):
                    o, qo = u.commit_log_offset[sel].astype(np.int64), u.queue_offset[sel].astype(np.int64)
                    if (t, q) in self.multi:
                        o = np.concatenate([self.multi[(t, q)][0], o])
                        qo = np.concatenate([self.multi[(t, q)][1], qo])
                    srt = np.argsort(o, kind="stable")
                    self.multi[(t, q)] = (o[srt], qo[srt])
        self._table: _Records | None = None

    def table(self) -> _Records:
        """The window as a :class:`_Records` (columns with their sentinel row), for the problems' texts."""
        if self._table is None:
            b, n = self.batch, self.n

            def col(a: np.ndarray) -> np.ndarray:
                out = np.empty(n + 1, np.int64)
                out[:n] = a
                out[n] = -1
                return out

            t = _Records(col(b.commit_log_offset), col(b.size), col(b.topic_id), col(b.queue_id), col(b.queue_offset),
                         col(b.tags_code), col(b.store_timestamp), dict(self.topic_index), np.empty(0, np.int64), n)  # fmt: skip
            t.topic_id[n] = -2  # no topic
            t.multi = self.multi
            self._table = t
        return self._table


def _windows(cl, rule: MultiDispatchRule, rep: VerifyReport | None, scan_problems: list[str] | None,
             progress: Callable[[int, int], None] | None):
    """``(lo, hi, window)`` for each scan batch: its records, which are every record starting in
    ``[lo, hi)`` (``lo`` the previous batch's end, ``None`` before the first and after the last,
    where an empty window ends the run); counts and scan problems go to ``rep``/``scan_problems``
    when given."""
    lo: int | None = None
    for batch in cl.scan_bounded(cl.min_offset, cl.max_offset, check_crc=True, skip_length_mismatch=False,
                                 batch_records=_VERIFY_BATCH_RECORDS):  # fmt: skip
        if rep is not None:
            rep.messages += len(batch)
            if progress is not None:
                progress(batch.next_offset - cl.min_offset, cl.max_offset - cl.min_offset)
        w = _Window(batch, rule, scan_problems)
        if w.n and ((lo is not None and int(w.starts[0]) < lo) or int(w.starts[-1]) >= batch.next_offset):
            raise _Unordered
        if scan_problems is not None and batch.stop == STOP_INVALID:
            scan_problems.append(f"commitlog: invalid record at offset {batch.next_offset}: {batch.error}")
        hi = batch.next_offset
        del batch
        yield lo, hi, w
        lo = hi
    yield lo, None, _Window(DispatchBatch.empty(0), rule, None)


_I64_MIN, _I64_MAX = -(2**63), 2**63 - 1


def _verify_windowed(store: RocketMQStore, root: Path, rep: VerifyReport, max_problems: int,
                     progress: Callable[[int, int], None] | None) -> None:
    """:func:`verify_store` a CommitLog window (scan batch) at a time: the ConsumeQueue units and
    IndexFile items pointing into the window are checked against its records as the scan passes
    (native kernels), each queue and IndexFile read forwards by a cursor (they ascend in offset);
    the few that point behind the window (out of order: a damaged file) are checked in a second
    scan.  Memory is a window's records and the problems kept, whatever the store's size; the
    problems come out in the order of :func:`_verify_table`."""
    from mqstore.kernels.rocketmq.index_check import NOT_A_KEYED_RECORD, check_items
    from mqstore.kernels.rocketmq.verify_check import BEFORE_WINDOW, check_units, cut

    cl = store.commit_log
    cl_min = cl.min_offset

    def end() -> int:  # the valid end, settled by the scan below (or walked for when asked before)
        return store.recovery.commit_log_end

    rule = MultiDispatchRule(store.config.enable_lmq, True)
    streams: list[_Stream] = []
    for (topic, qid), cq in sorted(store.consume_queues.items()):
        files = list(cq.queue.files)
        counts = [mf.wrote_position // CQ_UNIT_SIZE for mf in files]
        rep.cq_units += sum(counts)
        streams.append(_Stream(len(streams), files, counts, topic=topic, qid=qid, cq=cq))
    for f in store.index.files:
        count = max(min(f.header.index_count, f.buffer.index_num), 1) - 1  # items 1 .. count
        rep.index_items += count
        streams.append(_Stream(len(streams), [f], [count], index=True))
    cq_kept, idx_kept = _Kept(max_problems), _Kept(max_problems)

    def cq_problems(s: _Stream, fi: int, idx: np.ndarray, rows: np.ndarray, w: _Window) -> None:
        mf = s.files[fi]
        off = rows["offset"].astype(np.int64)
        size = rows["size"].astype(np.int64)
        tags = rows["tags_code"].astype(np.int64)
        qoff = mf.file_from_offset // CQ_UNIT_SIZE + idx
        last, sub = -1, 0
        for i, text in _cq_problems(s.topic, s.qid, s.cq, w.table(), off, size, tags, qoff, np.ones(len(idx), bool),
                                    end, rep):  # fmt: skip
            sub = sub + 1 if i == last else 0
            last = i
            cq_kept.add((s.rank, fi, int(idx[i]), sub), text)

    def item_problems(s: _Stream, idx: np.ndarray, items: np.ndarray, codes: np.ndarray) -> None:
        for k, sub, text in _item_problems(s.files[0].name, items, codes, 0, idx + 1):
            idx_kept.add((s.rank, int(idx[k]), sub), text)

    def advance(s: _Stream, w: _Window, lo: int | None, hi: int | None) -> None:
        # the stream's rows from its cursor up to the first pointing at ``hi`` or past
        hi_v = _I64_MAX if hi is None else hi
        while s.fi < len(s.files):
            n = s.counts[s.fi]
            if s.pos >= n:
                s.fi, s.pos = s.fi + 1, 0
                continue
            cnt = min(_VERIFY_CHUNK, n - s.pos)
            f = s.files[s.fi]
            raw = s.raw(s.fi, s.pos, cnt)
            if s.index:
                k = cut(raw, cnt, 20, 4, hi_v)
                if k:
                    codes = check_items(raw, k, f.header.begin_timestamp, cl_min, w.starts, w.n, w.key_start, w.keys,
                                        w.batch.store_timestamp, s.pos + 1)  # fmt: skip
                    bad = np.flatnonzero(codes)
                    if len(bad):
                        items = np.frombuffer(raw, _ITEM_DTYPE, count=k)
                        cand = bad[(codes[bad] & NOT_A_KEYED_RECORD) != 0]
                        if lo is not None and len(cand):
                            phy = items["phy"][cand].astype(np.int64)
                            behind = cand[phy < lo]  # (a live item: its record is in an earlier window)
                            if len(behind):
                                codes[behind] &= ~np.uint8(7)  # its record checks wait for the second scan
                                s.strays.append((s.fi, s.pos + behind, phy[phy < lo]))
                        sel = np.flatnonzero(codes)
                        item_problems(s, s.pos + sel, items[sel], codes[sel])
            else:
                m_off, m_qoff = w.multi.get((s.topic, s.qid), (None, None))
                k, codes = check_units(raw, cnt, hi_v, _I64_MIN if lo is None else lo, cl_min,
                                       f.file_from_offset // CQ_UNIT_SIZE + s.pos, w.starts, w.n, w.batch.size,
                                       w.batch.topic_id, w.batch.queue_id, w.batch.queue_offset, w.batch.tags_code,
                                       w.topic_index.get(s.topic, -1), s.qid, m_off, m_qoff)  # fmt: skip
                bad = np.flatnonzero(codes)
                if len(bad):
                    rows = np.frombuffer(raw, CQ_DTYPE, count=k)[bad]
                    behind = codes[bad] == BEFORE_WINDOW
                    if behind.any():
                        s.strays.append((s.fi, s.pos + bad[behind], rows["offset"][behind].astype(np.int64)))
                    if not behind.all():
                        cq_problems(s, s.fi, s.pos + bad[~behind], rows[~behind], w)
            s.pos += k
            if k < cnt:
                break

    from mqstore.storage.rocketmq.layout import timer_files_present

    timer = None
    if timer_files_present(root):  # (the timer module is imported only for a store with timer files)
        from mqstore.storage.rocketmq.timer import load_timer_state

        timer = load_timer_state(root)
    lookups = _TimerLookups(timer, cl_min) if timer is not None else None
    scan_problems: list[str] = []
    for lo, hi, w in _windows(cl, rule, rep, scan_problems, progress):
        for s in streams:
            advance(s, w, lo, hi)
        if lookups is not None:
            lookups.see(lo, hi, w)
        del w
    strays = [(s, fi, idx, off) for s in streams for fi, idx, off in s.strays]
    if strays:  # a second scan for the units/items that point behind where their file's cursor was
        owner = np.concatenate([np.full(len(idx), k, np.int64) for k, (_s, _fi, idx, _o) in enumerate(strays)])
        rows_at = np.concatenate([idx for _s, _fi, idx, _o in strays])
        offs = np.concatenate([o for _s, _fi, _idx, o in strays])
        order = np.argsort(offs, kind="stable")
        owner, rows_at, offs = owner[order], rows_at[order], offs[order]
        for lo, hi, w in _windows(cl, rule, None, None, None):
            a = 0 if lo is None else int(np.searchsorted(offs, lo))
            b = len(offs) if hi is None else int(np.searchsorted(offs, hi))
            for k in np.unique(owner[a:b]).tolist():
                s, fi, _idx, _o = strays[k]
                at = rows_at[np.flatnonzero(owner[a:b] == k) + a]
                if not s.index:
                    cq_problems(s, fi, at, np.frombuffer(s.files[fi].mm, CQ_DTYPE, count=s.counts[fi])[at], w)
                    continue
                f = s.files[0]
                for i in at.tolist():  # (item numbers need not follow each other here: one at a time)
                    raw = s.raw(0, i, 1)
                    code = check_items(raw, 1, f.header.begin_timestamp, cl_min, w.starts, w.n, w.key_start, w.keys,
                                       w.batch.store_timestamp, i + 1) & 7  # fmt: skip
                    item_problems(s, np.array([i], np.int64), np.frombuffer(raw, _ITEM_DTYPE), code)
    del strays

    def problem(text: str) -> None:
        if len(rep.problems) < max_problems:
            rep.problems.append(text)

    for text in scan_problems:
        problem(text)
    if _is_dledger(cl):  # the DLedger files themselves: index units, fillers
        for text in cl.problems(max_problems):
            problem(text)
    for text in cq_kept.texts():
        problem(text)
    for text in idx_kept.texts():
        problem(text)
    for text in store.index.verify_chains():
        problem(f"index/{text}")
    if lookups is None:
        empty = np.empty(0, np.int64)
        _verify_config_and_timer(root, empty, empty, empty, cl_min, end(), problem)
    else:
        _verify_config_and_timer(root, *lookups.columns(), cl_min, end(), problem, timer)


#: records per scanned batch of verify (bounded batches: the scan's own arrays stay small, the
#: next batch is scanned while this one is filed, and the mapped pages behind it are released)
_VERIFY_BATCH_RECORDS = 1 << 16

# the record table's columns and their (compact) types: 44 bytes a record, plus 8 per index key
_RECORD_COLUMNS = (("starts", np.int64), ("sizes", np.int32), ("topic_id", np.int32), ("queue_id", np.int32),
                   ("queue_offset", np.int64), ("tags_code", np.int64), ("store_ts", np.int64))


def _scan_records(cl, rep: VerifyReport, problem: Callable[[str], None],
                  progress: Callable[[int, int], None] | None, rule: MultiDispatchRule) -> _Records:
    topics: dict[str, int] = {}
    multi: dict[tuple[str, int], tuple[list[np.ndarray], list[np.ndarray]]] = {}
    parts: dict[str, list[np.ndarray]] = {k: [] for k, _ in _RECORD_COLUMNS}
    pair_parts: list[np.ndarray] = []  # row << 32 | key hash, rows counted in scan order
    key_rows: list[np.ndarray] = []
    rows = 0
    for batch in cl.scan_bounded(cl.min_offset, cl.max_offset, check_crc=True, skip_length_mismatch=False,
                                 batch_records=_VERIFY_BATCH_RECORDS):  # fmt: skip
        rep.messages += len(batch)
        if progress is not None:
            progress(batch.next_offset - cl.min_offset, cl.max_offset - cl.min_offset)
        remap = np.array([topics.setdefault(t, len(topics)) for t in batch.topics] or [0], np.int32)
        parts["starts"].append(batch.commit_log_offset.astype(np.int64, copy=False))
        parts["sizes"].append(batch.size.astype(np.int32, copy=False))
        parts["topic_id"].append(remap[batch.topic_id] if len(batch) else np.empty(0, np.int32))
        parts["queue_id"].append(batch.queue_id.astype(np.int32, copy=False))
        parts["queue_offset"].append(batch.queue_offset.astype(np.int64, copy=False))
        parts["tags_code"].append(batch.tags_code.astype(np.int64, copy=False))
        parts["store_ts"].append(batch.store_timestamp.astype(np.int64, copy=False))
        krow = batch.key_row.astype(np.int64) + rows
        key_rows.append(krow)
        pair_parts.append(_pair_key(krow, batch.key_hash))
        rows += len(batch)
        if len(batch.multi_row):
            u = cq_units(batch, rule)
            for off, what in u.problems:
                problem(f"commitlog: record at offset {off}: {what}")
            for t, q, grp in u.groups():
                sel = grp[u.multi[grp]]
                if len(sel):
                    lists = multi.setdefault((t, q), ([], []))
                    lists[0].append(u.commit_log_offset[sel].astype(np.int64))
                    lists[1].append(u.queue_offset[sel].astype(np.int64))
        if batch.stop == STOP_INVALID:
            problem(f"commitlog: invalid record at offset {batch.next_offset}: {batch.error}")
        del batch
    n = rows
    starts = _join(parts.pop("starts"), np.int64, n)
    # the scan walks the CommitLog forwards, so the records come sorted by offset; the general
    # case (sort, and map the key rows through the order) is kept for any other source
    order = None if n < 2 or bool((starts[1:n] > starts[: n - 1]).all()) else np.argsort(starts[:n], kind="stable")
    if order is not None:
        starts[:n] = starts[:n][order]
    cols = {"starts": starts}
    for name, dt in _RECORD_COLUMNS[1:]:
        col = _join(parts.pop(name), dt, n)  # the parts of each column are dropped as it is joined
        if order is not None:
            col[:n] = col[:n][order]
        cols[name] = col
    recs = _Records(cols["starts"], cols["sizes"], cols["topic_id"], cols["queue_id"], cols["queue_offset"],
                    cols["tags_code"], cols["store_ts"], topics, np.empty(0, np.int64), n)
    recs.topic_id[n] = -2  # no topic
    for key, (o_parts, q_parts) in multi.items():
        o, q = np.concatenate(o_parts), np.concatenate(q_parts)
        srt = np.argsort(o, kind="stable")
        recs.multi[key] = (o[srt], q[srt])
    krows = np.concatenate(key_rows) if key_rows else np.empty(0, np.int64)
    del key_rows
    pairs = np.concatenate(pair_parts) if pair_parts else np.empty(0, np.int64)
    del pair_parts
    if order is not None:  # scan rows -> sorted rows
        rank = np.empty(n, np.int64)
        rank[order] = np.arange(n, dtype=np.int64)
        krows = rank[krows]
        pairs = _pair_key(krows, pairs & 0xFFFFFFFF)
        pairs.sort()  # grouped by record again (in scan order they already are)
    recs.pair_keys = pairs
    # the pairs of record r are pair_keys[key_start[r] : key_start[r + 1]] (sorted by record first)
    recs.key_start = np.zeros(n + 2, np.int64)
    np.cumsum(np.bincount(krows, minlength=n), out=recs.key_start[1 : n + 1])
    recs.key_start[n + 1] = recs.key_start[n]
    return recs


def _join(parts: list[np.ndarray], dtype: type, n: int) -> np.ndarray:
    """The parts end to end in one array of ``n + 1`` items (the last one, the sentinel row, is -1)."""
    out = np.empty(n + 1, dtype)
    if parts:
        np.concatenate(parts, out=out[:n])
    parts.clear()
    out[n] = -1
    return out


def _check_cq_file(mf, topic: str, qid: int, cq, recs: _Records, cl_min: int, end: Callable[[], int], rep: VerifyReport,
                   problem: Callable[[str], None]) -> None:
    n = mf.wrote_position // CQ_UNIT_SIZE
    units = np.frombuffer(mf.mm, dtype=CQ_DTYPE, count=n)
    rep.cq_units += n
    off = units["offset"].astype(np.int64)
    size = units["size"].astype(np.int64)
    tags = units["tags_code"].astype(np.int64)
    del units
    live = ~((off == 0) & (size == INT_MAX)) & (off >= cl_min)
    first = mf.file_from_offset // CQ_UNIT_SIZE
    qoff = first + np.arange(n, dtype=np.int64)
    for _i, text in _cq_problems(topic, qid, cq, recs, off, size, tags, qoff, live, end, rep):
        problem(text)


def _cq_problems(topic: str, qid: int, cq, recs: _Records, off: np.ndarray, size: np.ndarray, tags: np.ndarray,
                 qoff: np.ndarray, live: np.ndarray, end: Callable[[], int], rep: VerifyReport) -> list[tuple[int, str]]:
    """The problems of ConsumeQueue units (``off``/``size``/``tags`` columns, ``qoff`` their queue
    offsets, ``live`` those to check) against the records ``recs``: ``(unit row, text)`` in order
    (up to two texts a unit); ``end()`` is the CommitLog's valid end (asked only for a text).
    Counts the ConsumeQueueExt units in ``rep``."""
    ri, found = recs.find(off)
    is_rec = live & found & (recs.sizes[ri] == size)
    ext = is_rec & (tags <= MAX_ADDR)
    rep.ext_units += int(ext.sum())
    tid = recs.topics.get(topic, -1)
    same = (recs.topic_id[ri] == tid) & (recs.queue_id[ri] == qid) & (recs.queue_offset[ri] == qoff)
    lmq = recs.multi.get((topic, qid))
    if lmq is not None:  # a multi-dispatch unit of the record (LMQ)
        m_off, m_qoff = lmq
        j = np.minimum(np.searchsorted(m_off, off), len(m_off) - 1)
        same |= (m_off[j] == off) & (m_qoff[j] == qoff)
    wrong = is_rec & ~ext & ~(same & (recs.tags_code[ri] == tags))
    bad = np.nonzero((live & ~is_rec) | ext | wrong)[0].tolist()
    out: list[tuple[int, str]] = []
    if not bad:
        return out
    names = {v: k for k, v in recs.topics.items()}
    for i in bad:
        o, sz, tag, q, r = int(off[i]), int(size[i]), int(tags[i]), int(qoff[i]), int(ri[i])
        where = f"consumequeue/{topic}/{qid}: unit {q}"
        if not is_rec[i]:
            out.append((i, f"consumequeue/{topic}/{qid}: unit {q} points at offset {o} size {sz}, "
                           f"which is not a record of the CommitLog (valid end {end()})"))
            continue
        if ext[i]:
            try:
                e = cq.ext.get(tag) if cq.ext is not None else None
            except MqStoreError as exc:
                out.append((i, f"{where}: ext address {tag} (ext offset {undecorate(tag)}): {exc.message}"))
                continue
            if e is None:
                out.append((i, f"{where}: tags code {tag} is a ConsumeQueueExt address but the store has no "
                               f"consumequeue_ext/{topic}/{qid} files"))
                continue
            if e.msg_store_time != int(recs.store_ts[r]):
                out.append((i, f"{where}: ext unit at {undecorate(tag)} has store time {e.msg_store_time}, "
                               f"the message at offset {o} {int(recs.store_ts[r])}"))
            tag = e.tags_code
        if not same[i] or int(recs.tags_code[r]) != tag:
            out.append((i, f"{where} (tags code {tag}) points at offset {o}, a record of "
                           f"{names[int(recs.topic_id[r])]}/{int(recs.queue_id[r])} queue offset "
                           f"{int(recs.queue_offset[r])} tags code {int(recs.tags_code[r])}"))
    return out


#: IndexFile items checked per step (an IndexFile holds up to 20 M items: their columns and the
#: masks of the checks, ~15 arrays of 8 bytes an item, are made a slice at a time)
_INDEX_ITEMS_PER_STEP = 1 << 18


def _check_index_file(f, recs: _Records, cl_min: int, rep: VerifyReport, problem: Callable[[str], None]) -> None:
    h = f.header
    buf = f.buffer
    count = max(min(h.index_count, buf.index_num), 1) - 1  # items 1 .. count
    rep.index_items += count
    for first in range(0, count, _INDEX_ITEMS_PER_STEP):
        step = min(_INDEX_ITEMS_PER_STEP, count - first)
        items = np.frombuffer(f.mm, dtype=_ITEM_DTYPE, count=step, offset=buf.item_position(1 + first))
        _check_index_items(f.name, items, first + 1, h.begin_timestamp, recs, cl_min, problem)
        del items


def _check_index_items(name: str, items: np.ndarray, first_item: int, begin_ts: int, recs: _Records, cl_min: int,
                       problem: Callable[[str], None]) -> None:
    from mqstore.kernels.rocketmq.index_check import check_items

    raw = items.view(np.uint8)
    codes = check_items(raw, len(items), begin_ts, cl_min, recs.starts, recs.n, recs.key_start, recs.pair_keys,
                        recs.store_ts, first_item)  # fmt: skip
    del raw
    for _k, _sub, text in _item_problems(name, items, codes, first_item):
        problem(text)


def _item_problems(name: str, items: np.ndarray, codes: np.ndarray, first_item: int,
                   numbers: np.ndarray | None = None) -> list[tuple[int, int, str]]:
    """``(row, sub, text)`` of the items' non-zero check codes, in order: ``sub`` 0 the record
    check's text, 1 the link's, 2 the time difference's.  The items are numbered from
    ``first_item``, or by ``numbers``."""
    from mqstore.kernels.rocketmq.index_check import (
        BAD_LINK,
        HASH_NOT_A_KEY,
        NEGATIVE_DIFF,
        NOT_A_KEYED_RECORD,
        TIME_MISMATCH,
    )

    out: list[tuple[int, int, str]] = []
    for k in np.flatnonzero(codes).tolist():
        c, item = int(codes[k]), first_item + k if numbers is None else int(numbers[k])
        key_hash, p, d, prev = (int(items[k][f]) for f in ("hash", "phy", "diff", "prev"))
        if c & NOT_A_KEYED_RECORD:
            out.append((k, 0, f"index/{name}: item {item} points at offset {p}, which is not a record start"))
        elif c & HASH_NOT_A_KEY:
            out.append((k, 0, f"index/{name}: item {item} hash {key_hash} matches no key of the message at {p}"))
        elif c & TIME_MISMATCH:
            out.append((k, 0, f"index/{name}: item {item} time difference {d} s does not match the store time "
                              f"of the message at {p}"))
        if c & BAD_LINK:
            out.append((k, 1, f"index/{name}: item {item} links to item {prev} (must be older)"))
        if c & NEGATIVE_DIFF:
            out.append((k, 2, f"index/{name}: item {item} has a negative time difference"))
    return out


def verify_store_reference(root: str | Path, config=None, *, max_problems: int = 1000,
                           progress: Callable[[int, int], None] | None = None) -> VerifyReport:
    """:func:`verify_store` one record, unit and item at a time with dictionaries: the plain
    statement of every check, and the twin the vectorised version is tested against (same
    problems, same order, same counts)."""
    rep = VerifyReport()
    store = RocketMQStore(root, config, read_only=True)

    def problem(text: str) -> None:
        if len(rep.problems) < max_problems:
            rep.problems.append(text)

    # what a broker with multi-dispatch on wrote (LMQ names at queue 0 unless the config says
    # enableLmq is off)
    rule = MultiDispatchRule(store.config.enable_lmq, True)
    try:
        cl = store.commit_log
        starts: list[np.ndarray] = []
        sizes: list[np.ndarray] = []
        key_sets: dict[int, set[int]] = {}
        # what the CommitLog says of each record: the ConsumeQueue units and index items must agree
        fields_of: dict[int, tuple[str, int, int, int, int]] = {}
        multi_of: dict[int, set[tuple[str, int, int]]] = {}  # multi-dispatch (LMQ) units of a record
        for batch in cl.scan(cl.min_offset, cl.max_offset, check_crc=True, skip_length_mismatch=False):
            rep.messages += len(batch)
            if progress is not None:
                progress(batch.next_offset - cl.min_offset, cl.max_offset - cl.min_offset)
            for r, off in enumerate(batch.commit_log_offset.tolist()):
                fields_of[off] = (batch.topic_of(r), int(batch.queue_id[r]), int(batch.queue_offset[r]),
                                  int(batch.tags_code[r]), int(batch.store_timestamp[r]))
            if len(batch.multi_row):
                u = cq_units(batch, rule)
                for off, what in u.problems:
                    problem(f"commitlog: record at offset {off}: {what}")
                for k in np.flatnonzero(u.multi).tolist():
                    multi_of.setdefault(int(u.commit_log_offset[k]), set()).add(
                        (u.topics[int(u.topic_id[k])], int(u.queue_id[k]), int(u.queue_offset[k])))
            starts.append(batch.commit_log_offset)
            sizes.append(batch.size)
            for row, h in zip(batch.key_row.tolist(), batch.key_hash.tolist(), strict=True):
                key_sets.setdefault(int(batch.commit_log_offset[row]), set()).add(int(h))
            if batch.stop == STOP_INVALID:
                problem(f"commitlog: invalid record at offset {batch.next_offset}: {batch.error}")
        end = store.recovery.commit_log_end
        if _is_dledger(cl):  # the DLedger files themselves: index units, fillers
            for text in cl.problems(max_problems):
                problem(text)
        all_starts = np.concatenate(starts) if starts else np.empty(0, np.int64)
        all_sizes = np.concatenate(sizes) if sizes else np.empty(0, np.int32)
        size_of = dict(zip(all_starts.tolist(), all_sizes.tolist(), strict=True))
        if store.rocksdb_cq is not None:
            def record_ref(off: int) -> tuple[int, str, int, int, int, int] | None:
                return (size_of[off], *fields_of[off]) if off in size_of else None

            _verify_rocksdb(store.rocksdb_cq, rep, problem, record_ref, cl.min_offset, end)
        for (topic, qid), cq in sorted(store.consume_queues.items() if store.rocksdb_cq is None else ()):
            for mf in cq.queue.files:
                n = mf.wrote_position // CQ_UNIT_SIZE
                units = np.frombuffer(mf.mm, dtype=CQ_DTYPE, count=n)
                tags = units["tags_code"].tolist()
                for i, (off, size) in enumerate(zip(units["offset"].tolist(), units["size"].tolist(), strict=True)):
                    rep.cq_units += 1
                    if off == 0 and size == INT_MAX:
                        continue
                    if off < cl.min_offset:
                        continue  # points into a deleted segment (retention)
                    qoff = (mf.file_from_offset // CQ_UNIT_SIZE) + i
                    if size_of.get(off) != size:
                        problem(f"consumequeue/{topic}/{qid}: unit {qoff} points at offset {off} size {size}, "
                                f"which is not a record of the CommitLog (valid end {end})")
                        continue
                    tag = tags[i]
                    where = f"consumequeue/{topic}/{qid}: unit {qoff}"
                    if tag <= MAX_ADDR:  # a ConsumeQueueExt address: the ext unit holds the tags code
                        rep.ext_units += 1
                        try:
                            ext = cq.ext.get(tag) if cq.ext is not None else None
                        except MqStoreError as exc:
                            problem(f"{where}: ext address {tag} (ext offset {undecorate(tag)}): {exc.message}")
                            continue
                        if ext is None:
                            problem(f"{where}: tags code {tag} is a ConsumeQueueExt address but the store has no "
                                    f"consumequeue_ext/{topic}/{qid} files")
                            continue
                        if ext.msg_store_time != fields_of[off][4]:
                            problem(f"{where}: ext unit at {undecorate(tag)} has store time {ext.msg_store_time}, "
                                    f"the message at offset {off} {fields_of[off][4]}")
                        tag = ext.tags_code
                    if ((fields_of[off][:3] != (topic, qid, qoff) and (topic, qid, qoff) not in multi_of.get(off, ()))
                            or fields_of[off][3] != tag):
                        t, q, o, tc, _ = fields_of[off]
                        problem(f"{where} (tags code {tag}) points at offset "
                                f"{off}, a record of {t}/{q} queue offset {o} tags code {tc}")
                del units
        from mqstore.storage.rocketmq.timeindex import verify_sidecars

        def times_at_ref(offsets: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
            got = [fields_of.get(int(o)) for o in offsets.tolist()]
            return (np.array([-1 if g is None else g[4] for g in got], np.int64),
                    np.array([g is not None for g in got], bool))

        for text in verify_sidecars(Path(root), store.consume_queues, times_at_ref, cl.min_offset):
            problem(text)
        for f in store.index.files:
            h = f.header
            buf = f.buffer
            for item in range(1, max(min(h.index_count, buf.index_num), 1)):
                key_hash, phy, diff, prev = buf.read_item(item)
                rep.index_items += 1
                if phy < cl.min_offset:
                    continue
                hashes = key_sets.get(phy)
                if hashes is None:
                    problem(f"index/{f.name}: item {item} points at offset {phy}, which is not a record start")
                elif key_hash not in hashes:
                    problem(f"index/{f.name}: item {item} hash {key_hash} matches no key of the message at {phy}")
                elif item >= 2 and diff != time_diff_seconds(fields_of[phy][4], h.begin_timestamp):
                    problem(f"index/{f.name}: item {item} time difference {diff} s does not match the store time "
                            f"of the message at {phy}")
                if prev < 0 or prev >= item:
                    problem(f"index/{f.name}: item {item} links to item {prev} (must be older)")
                if diff < 0:
                    problem(f"index/{f.name}: item {item} has a negative time difference")
        for text in store.index.verify_chains():
            problem(f"index/{text}")
        from mqstore.formats.rocketmq.timer import TIMER_TOPIC

        order = np.argsort(all_starts, kind="stable")
        timer_starts = np.array(sorted(o for o, f in fields_of.items() if f[0] == TIMER_TOPIC), np.int64)
        _verify_config_and_timer(Path(root), all_starts[order], all_sizes[order].astype(np.int64), timer_starts,
                                 cl.min_offset, end, problem)
    finally:
        store.close()
    return rep


#: (size, topic, queue id, queue offset, tags code, store time) of the record at a CommitLog offset
RecordLookup = Callable[[int], "tuple[int, str, int, int, int, int] | None"]
_ROCKS = "consumequeue (RocksDB)"


def _verify_rocksdb(db, rep: VerifyReport, problem: Callable[[str], None], record: RecordLookup,
                    min_offset: int, end: int) -> None:
    """The RocksDB ConsumeQueue against the CommitLog, one entry at a time (the twin of
    :func:`_verify_rocksdb_columns`): every ``default`` entry decodes and points at the record of
    its topic/queue/offset (size, tags code, store time); then :func:`_rocksdb_queue_problems`."""
    from mqstore.formats.rocketmq.rocksdb_cq import decode_cq_key, decode_cq_value

    for text in db.bad_offset_keys:
        problem(f"{_ROCKS} offset family: {text}")
    seen: dict[tuple[str, int], int] = {}
    first: dict[tuple[str, int], int] = {}
    last: dict[tuple[str, int], int] = {}
    for key, value in db.iter_units():
        rep.cq_units += 1
        try:
            topic, qid, qoff = decode_cq_key(key)
            u = decode_cq_value(value)
        except MqStoreError as exc:
            problem(f"{_ROCKS}: entry {bytes(key)[:48].hex()}: {exc.message}")
            continue
        k = (topic, qid)
        if u.commit_log_offset < min_offset:
            continue  # points into a deleted segment (the compaction filter drops these later)
        mx = db.offsets[k].max if k in db.offsets else None
        if mx is None or qoff <= mx.queue_offset:
            seen[k] = seen.get(k, 0) + 1
            first[k] = min(first.get(k, qoff), qoff)
        last[k] = max(last.get(k, qoff), qoff)
        at = f"{_ROCKS} {topic}/{qid}: unit {qoff}"
        rec = record(u.commit_log_offset)
        if rec is None or rec[0] != u.size:
            problem(f"{at} points at offset {u.commit_log_offset} size {u.size}, which is not a record of the "
                    f"CommitLog (valid end {end})")
            continue
        _size, t, q, o, tc, ts = rec
        if (t, q, o, tc, ts) != (topic, qid, qoff, u.tags_code, u.store_timestamp):
            problem(f"{at} (tags code {u.tags_code}, store time {u.store_timestamp}) points at offset "
                    f"{u.commit_log_offset}, a record of {t}/{q} queue offset {o} tags code {tc} store time {ts}")
    _rocksdb_queue_problems(db, problem, seen, first, last, min_offset, end)


def _verify_rocksdb_columns(db, rep: VerifyReport, problem: Callable[[str], None], recs: _Records,
                            min_offset: int, end: int) -> None:
    """:func:`_verify_rocksdb` over columns: the entries are decoded in one pass, checked against
    the CommitLog's columns at once, and the problems reported in the same order."""
    from mqstore.formats.rocketmq.rocksdb_cq import (
        UNIT_VALUE_SIZE,
        decode_cq_key,
        decode_cq_value,
        decode_cq_values,
    )

    for text in db.bad_offset_keys:
        problem(f"{_ROCKS} offset family: {text}")
    events: list[tuple[int, str]] = []  # (entry number, problem)
    codes: dict[tuple[str, int], int] = {}
    kcode: list[int] = []
    qoffs: list[int] = []
    vals: list[bytes] = []
    index: list[int] = []
    total = 0
    for n, (key, value) in enumerate(db.iter_units()):
        total = n + 1
        try:
            topic, qid, qoff = decode_cq_key(key)
            if len(value) != UNIT_VALUE_SIZE:
                decode_cq_value(value)  # raises the typed error
        except MqStoreError as exc:
            events.append((n, f"{_ROCKS}: entry {bytes(key)[:48].hex()}: {exc.message}"))
            continue
        kcode.append(codes.setdefault((topic, qid), len(codes)))
        qoffs.append(qoff)
        vals.append(value)
        index.append(n)
    rep.cq_units += total
    queues = list(codes)
    u = decode_cq_values(vals)
    kc = np.array(kcode, np.int64)
    qo = np.array(qoffs, np.int64)
    off, size = u["offset"].astype(np.int64), u["size"].astype(np.int64)
    tags, ts = u["tags_code"].astype(np.int64), u["store_time"].astype(np.int64)
    live = off >= min_offset
    nq = len(queues)
    mxq = np.array([db.offsets[k].max.queue_offset if k in db.offsets and db.offsets[k].max is not None else -1
                    for k in queues] or [0], np.int64)
    has_max = np.array([k in db.offsets and db.offsets[k].max is not None for k in queues] or [False], bool)
    counted = live & (~has_max[kc] | (qo <= mxq[kc])) if len(kc) else live
    seen_a = np.bincount(kc[counted], minlength=nq)
    first_a = np.full(max(nq, 1), np.iinfo(np.int64).max, np.int64)
    np.minimum.at(first_a, kc[counted], qo[counted])
    last_a = np.full(max(nq, 1), np.iinfo(np.int64).min, np.int64)
    np.maximum.at(last_a, kc[live], qo[live])
    seen = {queues[c]: int(seen_a[c]) for c in range(nq) if seen_a[c]}
    first = {queues[c]: int(first_a[c]) for c in range(nq) if seen_a[c]}
    has_live = np.bincount(kc[live], minlength=nq)
    last = {queues[c]: int(last_a[c]) for c in range(nq) if has_live[c]}
    ri, found = recs.find(off)
    is_rec = found & (recs.sizes[ri] == size)
    tid = np.array([recs.topics.get(t, -1) for t, _q in queues] or [-1], np.int64)
    qid_of = np.array([q for _t, q in queues] or [0], np.int64)
    same = ((recs.topic_id[ri] == tid[kc]) & (recs.queue_id[ri] == qid_of[kc]) & (recs.queue_offset[ri] == qo)
            & (recs.tags_code[ri] == tags) & (recs.store_ts[ri] == ts)) if len(kc) else live
    names = {v: k for k, v in recs.topics.items()}
    for i in np.nonzero(live & ~(is_rec & same))[0].tolist():
        topic, qid = queues[int(kc[i])]
        o, sz, q = int(off[i]), int(size[i]), int(qo[i])
        at = f"{_ROCKS} {topic}/{qid}: unit {q}"
        if not is_rec[i]:
            events.append((index[i], f"{at} points at offset {o} size {sz}, which is not a record of the "
                                     f"CommitLog (valid end {end})"))
            continue
        r = int(ri[i])
        events.append((index[i], f"{at} (tags code {int(tags[i])}, store time {int(ts[i])}) points at offset {o}, "
                                 f"a record of {names[int(recs.topic_id[r])]}/{int(recs.queue_id[r])} queue offset "
                                 f"{int(recs.queue_offset[r])} tags code {int(recs.tags_code[r])} store time "
                                 f"{int(recs.store_ts[r])}"))
    for _n, text in sorted(events, key=lambda e: e[0]):
        problem(text)
    _rocksdb_queue_problems(db, problem, seen, first, last, min_offset, end)


def _rocksdb_queue_problems(db, problem: Callable[[str], None], seen: dict[tuple[str, int], int],
                            first: dict[tuple[str, int], int], last: dict[tuple[str, int], int],
                            min_offset: int, end: int) -> None:
    """Per queue: its ``max`` entry names its last unit, no unit is missing between the first live
    unit and the max, no unit lies past the max; queues with units but no ``max`` entry; the
    dispatch checkpoint not past the CommitLog's end."""
    for (topic, qid), cq in sorted(db.queues().items()):
        m = cq.offsets.max
        at = f"{_ROCKS} {topic}/{qid}"
        if m is None:
            problem(f"{at}: a min entry but no max entry in the offset family")
            continue
        cq.correct_min_offset(min_offset)
        try:
            unit = cq.get_unit(m.queue_offset)
        except MqStoreError:
            unit = None  # its entry was reported above
        if unit is None:
            problem(f"{at}: the max entry names queue offset {m.queue_offset}, which has no unit")
        elif unit.commit_log_offset != m.commit_log_offset:
            problem(f"{at}: the max entry says offset {m.queue_offset} is at CommitLog offset "
                    f"{m.commit_log_offset}, its unit says {unit.commit_log_offset}")
        lo = first.get((topic, qid), cq.min_offset_in_queue)
        live = max(0, m.queue_offset + 1 - lo)
        got = seen.get((topic, qid), 0)
        if got < live:
            problem(f"{at}: {live - got} of the units between its first live unit {lo} and its max entry's "
                    f"offset {m.queue_offset} are missing (the queue's min offset reads as "
                    f"{cq.min_offset_in_queue})")
        if last.get((topic, qid), -1) > m.queue_offset:
            problem(f"{at}: units past the max entry's queue offset {m.queue_offset} (up to "
                    f"{last[(topic, qid)]}): the offset family is behind")
    for k in sorted(set(last) - set(db.offsets)):
        problem(f"{_ROCKS} {k[0]}/{k[1]}: units but no max entry in the offset family")
    if db.dispatched_phy_offset > end:
        problem(f"{_ROCKS}: the dispatch checkpoint ({db.dispatched_phy_offset}) is past the CommitLog's valid "
                f"end {end}")


def _verify_config_and_timer(root: Path, starts: np.ndarray, sizes: np.ndarray, timer_starts: np.ndarray,
                             cl_min: int, end: int, problem: Callable[[str], None], timer_state=None) -> None:
    """The ``config/`` files, then the timer files (5.x: timerlog units against the CommitLog
    records, ``starts``/``sizes`` sorted by offset, and the wheel's slot chains; ``timer_state``:
    the timer files as already read)."""
    from mqstore.storage.rocketmq.layout import timer_files_present

    for c in list_config_files(root):
        if c.error is not None:
            problem(f"config/{c.name}: {c.error}")
    if not timer_files_present(root):  # (verify_timer's first answer, without importing it)
        return
    from mqstore.storage.rocketmq.timer import verify_timer

    for text in verify_timer(root, starts, sizes, timer_starts, cl_min, end, state=timer_state):
        problem(text)
