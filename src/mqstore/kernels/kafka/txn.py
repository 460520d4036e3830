"""Transactions over the batch columns of a Kafka partition: which data batches are committed,
aborted or still open, the ranges a ``read_committed`` consumer skips, and the exact producer-state
replay of the broker that yields the ``.txnindex`` entries.

Inputs are per-batch columns in log order (magic-2 batches only; see
:func:`mqstore.storage.kafka.txn.partition_txn_columns`): ``base_offset``, ``last_offset``,
``producer_id``, ``attributes`` and ``marker`` (−1 for a batch that is not an end-transaction
control batch, 0 ABORT, 1 COMMIT).

* :func:`classify_batches` (numpy, O(n log n), no per-batch Python) and its pure-Python twin
  :func:`classify_batches_py` give every batch a status (:data:`NON_TXN`, :data:`COMMITTED`,
  :data:`ABORTED`, :data:`OPEN`, :data:`CONTROL`).  A transactional data batch of producer P is
  decided by the next end marker of P after it, whatever the epochs (recovery and replication
  accept a marker of any epoch, so Transactions V1 — marker epoch = data epoch — and V2 — marker
  epoch = data epoch + 1 — are handled alike).
* :func:`in_ranges` / :func:`in_ranges_py`: which offsets fall inside sorted, disjoint ranges (the
  row filter of ``read_committed``).
* :func:`aborted_transactions` (vectorised grouping + one sweep over the transactions) and its
  per-batch twin :class:`ProducerStateReplay`, the broker's producer-state machine (what
  ``LogSegment.recover`` runs): the aborted-transaction entries with the last stable offset at
  the time of each ABORT marker, byte for byte what Kafka's recovery appends.  The replay also
  gives the producer entries a ``.snapshot`` holds.
"""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from mqstore.formats.kafka.txn import AbortedTxn, ProducerSnapshotEntry
from mqstore.kernels.registry import register

NON_TXN = 0
COMMITTED = 1
ABORTED = 2
OPEN = 3
CONTROL = 4

ATTR_TRANSACTIONAL = 0x10
ATTR_CONTROL = 0x20
MARKER_NONE = -1
MARKER_ABORT = 0
MARKER_COMMIT = 1


def _roles(producer_id: np.ndarray, attributes: np.ndarray, marker: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    attrs = np.asarray(attributes, np.int64)
    pid = np.asarray(producer_id, np.int64)
    mk = np.asarray(marker, np.int64)
    is_ctrl = (attrs & ATTR_CONTROL) != 0
    txn_data = (~is_ctrl) & ((attrs & ATTR_TRANSACTIONAL) != 0) & (pid >= 0)
    end_marker = is_ctrl & (mk >= 0) & (pid >= 0)
    return is_ctrl, txn_data, end_marker


def classify_batches(producer_id: Any, attributes: Any, marker: Any) -> np.ndarray:
    """Status of every batch (int8), vectorised: group the transactional rows by producer (stable
    sort keeps log order inside a producer) and find, for each data row, the next end marker of
    the same producer with a reversed running minimum (a later producer's rows never qualify:
    their sorted positions lie past the group's end)."""
    is_ctrl, txn_data, end_marker = _roles(producer_id, attributes, marker)
    n = is_ctrl.shape[0]
    status = np.zeros(n, np.int8)
    status[is_ctrl] = CONTROL
    rows = np.nonzero(txn_data | end_marker)[0]
    if rows.shape[0] == 0:
        return status
    pid = np.asarray(producer_id, np.int64)[rows]
    order = np.argsort(pid, kind="stable")
    r = rows[order]
    p = pid[order]
    m = rows.shape[0]
    ends = np.append(np.nonzero(p[1:] != p[:-1])[0], m - 1)
    group_end = ends[np.searchsorted(ends, np.arange(m))]
    is_m = end_marker[r]
    val = np.where(is_m, np.arange(m), m + 1)
    next_m = np.minimum.accumulate(val[::-1])[::-1]
    data = ~is_m
    decided = data & (next_m <= group_end)
    mk = np.asarray(marker, np.int64)
    kinds = mk[r[np.minimum(next_m, m - 1)]]
    status[r[decided & (kinds == MARKER_ABORT)]] = ABORTED
    status[r[decided & (kinds != MARKER_ABORT)]] = COMMITTED
    status[r[data & ~decided]] = OPEN
    return status


def classify_batches_py(producer_id: Any, attributes: Any, marker: Any) -> np.ndarray:
    """Reference twin of :func:`classify_batches`: one pass in log order, pending rows per producer."""
    n = len(producer_id)
    status = np.zeros(n, np.int8)
    pending: dict[int, list[int]] = {}
    for i in range(n):
        a, pid, mk = int(attributes[i]), int(producer_id[i]), int(marker[i])
        if a & ATTR_CONTROL:
            status[i] = CONTROL
            if mk >= 0 and pid >= 0:
                for j in pending.pop(pid, []):
                    status[j] = ABORTED if mk == MARKER_ABORT else COMMITTED
        elif a & ATTR_TRANSACTIONAL and pid >= 0:
            status[i] = OPEN
            pending.setdefault(pid, []).append(i)
    return status


def last_stable_offset(base_offset: Any, status: np.ndarray, log_end: int) -> int:
    """The LSO of a whole log read offline (high watermark = log end): the first offset of the
    earliest still-open transaction, else the log end."""
    open_rows = np.nonzero(status == OPEN)[0]
    return int(np.asarray(base_offset)[open_rows[0]]) if open_rows.shape[0] else int(log_end)


def excluded_ranges(base_offset: Any, last_offset: Any, status: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """``(starts, ends)`` (inclusive, sorted) of the batches a ``read_committed`` consumer never
    returns: aborted data batches and every control batch."""
    sel = (status == ABORTED) | (status == CONTROL)
    return (np.asarray(base_offset, np.int64)[sel], np.asarray(last_offset, np.int64)[sel])


def in_ranges(offsets: Any, starts: np.ndarray, ends: np.ndarray) -> np.ndarray:
    """Boolean mask: ``offsets[k]`` lies in some ``[starts[i], ends[i]]`` (ranges sorted, disjoint)."""
    off = np.asarray(offsets, np.int64)
    if starts.shape[0] == 0:
        return np.zeros(off.shape[0], bool)
    i = np.searchsorted(starts, off, side="right") - 1
    ok = i >= 0
    return ok & (off <= ends[np.maximum(i, 0)])


def in_ranges_py(offsets: Any, starts: Any, ends: Any) -> np.ndarray:
    out = np.zeros(len(offsets), bool)
    for k, o in enumerate(offsets):
        out[k] = any(int(s) <= int(o) <= int(e) for s, e in zip(starts, ends, strict=True))
    return out


def aborted_transactions(base_offset: Any, producer_id: Any, attributes: Any, marker: Any,
                         seed_open: dict[int, int] | None = None) -> tuple[np.ndarray, list[AbortedTxn]]:
    """The ``.txnindex`` entries of a whole log, vectorised: returns the batch row of each ABORT
    marker that closes a non-empty transaction and its :class:`AbortedTxn`, in log order — the
    answer of :class:`ProducerStateReplay` (the per-batch twin).

    Transactions come from the producer grouping of :func:`classify_batches`: a run of data
    batches of P up to P's next end marker (``seed_open`` maps a producer to the first offset of a
    transaction already open before the first batch, from a snapshot).  The last stable offset of
    an ABORT at offset m is the smallest first offset among the *other* transactions alive at m
    (first < m < end; the aborted one ends at m itself, so it never qualifies): with the
    transactions sorted by first offset and a running maximum of their ends, the earliest alive
    one is found by one ``searchsorted`` per marker."""
    seeded = {int(k): int(v) for k, v in (seed_open or {}).items() if int(v) >= 0}
    _ctrl, txn_data, end_marker = _roles(producer_id, attributes, marker)
    rows = np.nonzero(txn_data | end_marker)[0]
    base = np.asarray(base_offset, np.int64)
    mk_all = np.asarray(marker, np.int64)
    pid_rows = np.asarray(producer_id, np.int64)[rows]
    order = np.argsort(pid_rows, kind="stable")
    r = rows[order]
    p = pid_rows[order]
    m = int(r.shape[0])
    idx = np.arange(m)
    starts = np.flatnonzero(np.r_[True, p[1:] != p[:-1]]) if m else np.zeros(0, np.int64)
    group_start = starts[np.searchsorted(starts, idx, side="right") - 1] if m else idx
    is_m = end_marker[r]
    last_m = np.maximum.accumulate(np.where(is_m, idx, -1)) if m else idx  # last marker at or before
    prev_m = np.r_[-1, last_m[:-1]] if m else idx  # last marker strictly before
    run_start = np.maximum(prev_m + 1, group_start)
    # transactions closed by a marker
    js = np.flatnonzero(is_m)
    first = np.where(run_start[js] <= js - 1, base[r[np.minimum(run_start[js], max(m - 1, 0))]], -1)
    first_in_group = prev_m[js] < group_start[js]
    for k in np.flatnonzero(first_in_group).tolist():  # at most one per producer
        f = seeded.pop(int(p[js[k]]), None)
        if f is not None:
            first[k] = f
    closed = first >= 0
    t_first = [first[closed]]
    t_end = [base[r[js[closed]]]]
    # transactions still open at the end: data after the group's last marker, or a seed never closed
    if m:
        gend = np.r_[starts[1:] - 1, m - 1]
        lm = last_m[gend]
        has_open = lm < gend
        open_first = base[r[np.minimum(np.maximum(lm + 1, starts), m - 1)]]
        no_marker = lm < starts
        for k in np.flatnonzero(no_marker).tolist():
            f = seeded.pop(int(p[starts[k]]), None)
            if f is not None:
                open_first[k] = f
                has_open[k] = True
        t_first.append(open_first[has_open])
        t_end.append(np.full(int(has_open.sum()), np.iinfo(np.int64).max, np.int64))
    if seeded:
        t_first.append(np.array(list(seeded.values()), np.int64))
        t_end.append(np.full(len(seeded), np.iinfo(np.int64).max, np.int64))
    all_first = np.concatenate(t_first)
    all_end = np.concatenate(t_end)
    o = np.argsort(all_first, kind="stable")
    sf, se = all_first[o], all_end[o]
    run_max_end = np.maximum.accumulate(se) if se.shape[0] else se
    ab = closed & (mk_all[r[js]] == MARKER_ABORT)
    a_rows = r[js[ab]]
    a_first = first[ab]
    a_end = base[a_rows]
    i = np.searchsorted(run_max_end, a_end, side="right")
    ok = i < sf.shape[0]
    cand = sf[np.minimum(i, max(sf.shape[0] - 1, 0))] if sf.shape[0] else np.zeros(0, np.int64)
    lso = np.where(ok & (cand < a_end), cand, a_end + 1)
    lo = np.argsort(a_rows, kind="stable")  # log order
    a_pid = np.asarray(producer_id, np.int64)[a_rows]
    out = [AbortedTxn(int(a_pid[k]), int(a_first[k]), int(a_end[k]), int(lso[k])) for k in lo.tolist()]
    return a_rows[lo].astype(np.int64), out


def aborted_transactions_py(base_offset: Any, producer_id: Any, attributes: Any, marker: Any,
                            seed_open: dict[int, int] | None = None) -> tuple[np.ndarray, list[AbortedTxn]]:
    """Reference twin of :func:`aborted_transactions`: the per-batch broker replay
    (:class:`ProducerStateReplay`) over the batches that carry a producer id."""
    seed = [ProducerSnapshotEntry(int(p), 0, -1, -1, 0, -1, -1, int(f)) for p, f in (seed_open or {}).items()
            if int(f) >= 0]
    replay = ProducerStateReplay(seed)
    rows: list[int] = []
    out: list[AbortedTxn] = []
    for i in range(len(producer_id)):
        pid = int(producer_id[i])
        if pid < 0:
            continue
        a = int(attributes[i])
        base = int(base_offset[i])
        t = replay.append(base_offset=base, last_offset=base, producer_id=pid, epoch=0, last_sequence=-1,
                          max_timestamp=-1, transactional=bool(a & ATTR_TRANSACTIONAL), control=bool(a & ATTR_CONTROL),
                          marker=int(marker[i]))
        if t is not None:
            rows.append(i)
            out.append(t)
    return np.array(rows, np.int64), out


# ----------------------------------------------------------------------------- exact replay
NUM_BATCHES_TO_RETAIN = 5


@dataclass
class _Producer:
    producer_id: int
    epoch: int = -1
    coordinator_epoch: int = -1
    last_timestamp: int = -1
    current_txn_first_offset: int = -1
    batches: deque[tuple[int, int, int, int]] = field(default_factory=lambda: deque(maxlen=NUM_BATCHES_TO_RETAIN))

    def set_epoch(self, epoch: int) -> None:
        if epoch != self.epoch:  # a new epoch forgets the retained batches (Kafka's rule)
            self.batches.clear()
            self.epoch = epoch

    def entry(self) -> ProducerSnapshotEntry:
        last = self.batches[-1] if self.batches else (-1, -1, 0, -1)
        return ProducerSnapshotEntry(self.producer_id, self.epoch, last[0], last[1], last[2], self.last_timestamp,
                                     self.coordinator_epoch, self.current_txn_first_offset)


class ProducerStateReplay:
    """The broker's producer-state rebuild (replication origin: epochs and sequences are not
    enforced, a marker of any epoch completes the open transaction).  Feed it the batches that
    carry a producer id, in log order; :meth:`append` returns the :class:`AbortedTxn` Kafka's
    recovery appends to the ``.txnindex`` for that batch, or ``None``."""

    def __init__(self, seed: list[ProducerSnapshotEntry] | None = None) -> None:
        self.producers: dict[int, _Producer] = {}
        self.ongoing: dict[int, int] = {}  # first offset of an open transaction -> producer id
        for e in seed or []:
            p = _Producer(e.producer_id, e.epoch, e.coordinator_epoch, e.timestamp, e.current_txn_first_offset)
            if e.last_offset >= 0:
                p.batches.append((e.last_sequence, e.last_offset, e.offset_delta, e.timestamp))
            self.producers[e.producer_id] = p
            if e.current_txn_first_offset >= 0:
                self.ongoing[e.current_txn_first_offset] = e.producer_id

    def _lso(self, producer_id: int, marker_offset: int) -> int:
        others = [first for first, pid in self.ongoing.items() if pid != producer_id]
        return min(others) if others else marker_offset + 1

    def append(self, *, base_offset: int, last_offset: int, producer_id: int, epoch: int, last_sequence: int,
               max_timestamp: int, transactional: bool, control: bool, marker: int = MARKER_NONE,
               coordinator_epoch: int = 0, marker_timestamp: int = -1) -> AbortedTxn | None:
        p = self.producers.get(producer_id)
        if p is None:
            p = self.producers[producer_id] = _Producer(producer_id)
        if control:
            if marker < 0:
                return None  # an empty control batch (cleaned) or a non-transaction control record
            out = None
            if p.current_txn_first_offset >= 0:
                first = p.current_txn_first_offset
                if marker == MARKER_ABORT:
                    out = AbortedTxn(producer_id, first, base_offset, self._lso(producer_id, base_offset))
                self.ongoing.pop(first, None)
            p.set_epoch(epoch)
            p.coordinator_epoch = coordinator_epoch
            p.current_txn_first_offset = -1
            p.last_timestamp = marker_timestamp
            return out
        p.set_epoch(epoch)
        p.batches.append((last_sequence, last_offset, last_offset - base_offset, max_timestamp))
        p.last_timestamp = max_timestamp
        if transactional and p.current_txn_first_offset < 0:
            p.current_txn_first_offset = base_offset
            self.ongoing[base_offset] = producer_id
        return None

    def first_unstable_offset(self) -> int | None:
        return min(self.ongoing) if self.ongoing else None

    def entries(self) -> list[ProducerSnapshotEntry]:
        return [p.entry() for p in sorted(self.producers.values(), key=lambda q: q.producer_id)]


register("kafka.classify_batches", classify_batches, classify_batches_py)
register("kafka.in_ranges", in_ranges, in_ranges_py)
register("kafka.aborted_transactions", aborted_transactions, aborted_transactions_py)
