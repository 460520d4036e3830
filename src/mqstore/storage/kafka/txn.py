"""Kafka transactions on disk: the ``.txnindex`` files (read, verify, rebuild), the producer-state
``.snapshot`` files (read) and the transaction state of a whole partition that ``read_committed``
reads use.

The one rule of this module: the aborted transactions follow from the log alone.  A partition's
valid batches (the prefix recovery keeps, magic 2) are scanned once into columns
(:func:`partition_txn_columns`); :func:`mqstore.kernels.kafka.txn.classify_batches` decides every
transactional batch from the end markers (vectorised), and
:class:`~mqstore.kernels.kafka.txn.ProducerStateReplay` replays the broker's producer state to get
the ``.txnindex`` entries byte for byte as ``LogSegment.recover`` appends them.

Producer state before the first segment (transactions that began in deleted segments) is seeded
from the newest valid ``.snapshot`` whose offset is at or below the first segment's base offset,
as Kafka's loading does; later snapshots add nothing a full replay does not know.

Durability of :func:`rebuild_txn_indexes`: each file is written to a temporary file, fsynced and
renamed over the target (the directory is then fsynced by the caller's rename semantics as for the
other indexes).  The ``.log`` files are never modified.
"""

from __future__ import annotations

import bisect
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from mqstore.errors import InvalidArgumentError, MqStoreError, StoreNotFoundError
from mqstore.formats.kafka.batch import decode_batch_header, decode_control_record, iter_records
from mqstore.formats.kafka.txn import (
    AbortedTxn,
    ProducerSnapshot,
    ProducerSnapshotEntry,
    decode_producer_snapshot,
)
from mqstore.kernels.kafka.txn import (
    MARKER_ABORT,
    MARKER_COMMIT,
    MARKER_NONE,
    ProducerStateReplay,
    aborted_transactions,
    classify_batches,
    excluded_ranges,
    in_ranges,
    last_stable_offset,
)
from mqstore.storage.kafka.file_scan import read_spans
from mqstore.storage.kafka.rebuild import MappedLog, parse_base_offset, segment_logs_of
from mqstore.storage.kafka.txn_files import check_txn_index_files, snapshot_files
from mqstore.storage.kafka.txn_files import (
    read_txn_index as read_txn_index,  # (its home is txn_files: numpy-free)
)

# (the .txnindex rebuild is storage.kafka.txn_rebuild: without numpy when the partition has no transactions)

ISOLATION_LEVELS = ("read_uncommitted", "read_committed")


def check_isolation(isolation: str) -> bool:
    """``True`` for ``read_committed``; a typed error for anything but the two Kafka levels."""
    level = str(isolation).strip().lower()
    if level not in ISOLATION_LEVELS:
        raise InvalidArgumentError(f"isolation must be read_uncommitted or read_committed, got {isolation!r}")
    return level == "read_committed"


# ----------------------------------------------------------------------------- files
def read_producer_snapshot(path: str | os.PathLike[str]) -> ProducerSnapshot:
    p = Path(path)
    try:
        data = p.read_bytes()
    except FileNotFoundError:
        raise StoreNotFoundError("snapshot file not found", path=str(p)) from None
    except IsADirectoryError:
        raise InvalidArgumentError("not a producer snapshot file", path=str(p)) from None
    return decode_producer_snapshot(data, path=str(p))


# ----------------------------------------------------------------------------- partition columns
@dataclass
class TxnColumns:
    """Per-batch columns (magic-2 batches of every segment's valid prefix, in log order)."""

    segment: np.ndarray  # base offset of the batch's segment
    base_offset: np.ndarray
    last_offset: np.ndarray
    max_timestamp: np.ndarray
    attributes: np.ndarray
    producer_id: np.ndarray
    producer_epoch: np.ndarray
    base_sequence: np.ndarray
    marker: np.ndarray  # −1 / 0 ABORT / 1 COMMIT
    coordinator_epoch: np.ndarray
    marker_timestamp: np.ndarray
    log_end: int  # next offset after the last valid batch of the partition
    segments: list[int]

    @property
    def count(self) -> int:
        return int(self.base_offset.shape[0])


_BE = {8: ">i8", 4: ">i4", 2: ">i2"}


def _gather(head: np.ndarray, at: int, width: int) -> np.ndarray:
    """The big-endian integers of ``width`` bytes at ``at`` of each row of ``head`` (int64)."""
    if head.shape[0] == 0:
        return np.zeros(0, np.int64)
    return np.ascontiguousarray(head[:, at:at + width]).view(_BE[width]).reshape(-1).astype(np.int64)


def _segment_columns(log_path: Path) -> dict[str, Any]:
    lp = str(log_path)
    base = parse_base_offset(log_path)
    with MappedLog(log_path) as ml:
        mm = ml.mm
        if mm is None or len(mm) == 0:
            return {"base": base, "next": base, "cols": None}
        a = ml.analysis()
        n = a.n_valid
        scan = a.scan
        v2 = np.nonzero(scan["magic"][:n] >= 2)[0]
        pos = scan["position"][v2].astype(np.int64)
        cols: dict[str, np.ndarray] = {
            "base_offset": scan["base_offset"][v2].astype(np.int64),
            "last_offset": scan["last_offset"][v2].astype(np.int64),
            "max_timestamp": scan["max_timestamp"][v2].astype(np.int64),
            "attributes": scan["attributes"][v2].astype(np.int64),
        }
        if "producer_id" in scan:  # the file scan read them with the headers
            for f in ("producer_id", "producer_epoch", "base_sequence"):
                cols[f] = scan[f][v2].astype(np.int64)
        else:  # (bytes 43-56 of each v2 header, read with pread: a mapping would fault in a page per batch)
            head = read_spans(ml.fileno(), pos + 43, 14)
            cols.update(producer_id=_gather(head, 0, 8), producer_epoch=_gather(head, 8, 2),
                        base_sequence=_gather(head, 10, 4))
        m = v2.shape[0]
        marker = np.full(m, MARKER_NONE, np.int64)
        coord = np.zeros(m, np.int64)
        mts = np.full(m, -1, np.int64)
        for k in np.nonzero((cols["attributes"] & 0x20) != 0)[0].tolist():
            # (the batch is in the valid prefix: its checksum was verified by the scan, so the
            # header and records are decoded without computing it again)
            header = decode_batch_header(mm, int(pos[k]), path=lp)
            records = tuple(iter_records(mm, header, path=lp))
            if not records:
                continue  # an empty control batch: its transaction was cleaned away
            rec = records[0]
            ctl = decode_control_record(rec, path=lp)
            if ctl.type in (MARKER_ABORT, MARKER_COMMIT):
                marker[k] = ctl.type
                coord[k] = int(ctl.coordinator_epoch or 0)
                mts[k] = rec.timestamp
        cols.update(marker=marker, coordinator_epoch=coord, marker_timestamp=mts)
        nxt = int(scan["last_offset"][n - 1]) + 1 if n else base
        return {"base": base, "next": nxt, "cols": cols}


def partition_txn_columns(path: str | os.PathLike[str], *, logs: list[Path] | None = None) -> TxnColumns:
    """Scan every segment of a partition directory (or one ``.log``, or the given ``logs`` in
    order) read-only into :class:`TxnColumns`."""
    p = Path(path)
    if logs is None:
        if not p.exists():
            raise StoreNotFoundError("path not found", path=str(p))
        logs = segment_logs_of(p) if p.is_dir() else [p]
    parts = [_segment_columns(f) for f in logs]
    names = ("base_offset", "last_offset", "max_timestamp", "attributes", "producer_id", "producer_epoch",
             "base_sequence", "marker", "coordinator_epoch", "marker_timestamp")
    cat: dict[str, np.ndarray] = {}
    for name in names:
        arrs = [x["cols"][name] for x in parts if x["cols"] is not None]
        cat[name] = np.concatenate(arrs) if arrs else np.zeros(0, np.int64)
    seg_col = [np.full(x["cols"]["base_offset"].shape[0], x["base"], np.int64) for x in parts if x["cols"] is not None]
    log_end = parts[-1]["next"] if parts else 0
    return TxnColumns(segment=np.concatenate(seg_col) if seg_col else np.zeros(0, np.int64), log_end=log_end,
                      segments=[x["base"] for x in parts], **cat)


# ----------------------------------------------------------------------------- read_committed
@dataclass(frozen=True)
class CommittedRanges:
    """The part of a :class:`TxnState` one reader needs (small, picklable): the last stable offset
    and the excluded offset ranges (inclusive, sorted, disjoint)."""

    last_stable_offset: int
    excluded_starts: np.ndarray
    excluded_ends: np.ndarray

    def committed_mask(self, offsets: Any) -> np.ndarray:
        """Rows (record offsets) a ``read_committed`` consumer returns (vectorised)."""
        off = np.asarray(offsets, np.int64)
        return (off < self.last_stable_offset) & ~in_ranges(off, self.excluded_starts, self.excluded_ends)


@dataclass
class TxnState:
    """What a ``read_committed`` consumer of the whole log sees: the last stable offset and the
    offset ranges it never returns (aborted data batches and control batches)."""

    last_stable_offset: int
    excluded_starts: np.ndarray
    excluded_ends: np.ndarray
    status: np.ndarray
    columns: TxnColumns

    def committed_mask(self, offsets: Any) -> np.ndarray:
        """Rows (record offsets) a ``read_committed`` consumer returns (vectorised)."""
        off = np.asarray(offsets, np.int64)
        return (off < self.last_stable_offset) & ~in_ranges(off, self.excluded_starts, self.excluded_ends)

    def restrict(self, start: int | None = None, end: int | None = None) -> CommittedRanges:
        """The excluded ranges overlapping ``[start, end)`` (all by default) with the LSO."""
        sel = np.ones(self.excluded_starts.shape[0], bool)
        if start is not None:
            sel &= self.excluded_ends >= start
        if end is not None:
            sel &= self.excluded_starts < end
        return CommittedRanges(self.last_stable_offset, self.excluded_starts[sel], self.excluded_ends[sel])

    def is_visible(self, offset: int) -> bool:
        """One offset (O(log n)): below the LSO and outside every excluded range."""
        if offset >= self.last_stable_offset:
            return False
        i = bisect.bisect_right(self._starts, offset) - 1
        return i < 0 or offset > self._ends[i]

    def __post_init__(self) -> None:
        self._starts = self.excluded_starts.tolist()
        self._ends = self.excluded_ends.tolist()


def txn_state_of(cols: TxnColumns, log_start: int | None = None) -> TxnState:
    status = classify_batches(cols.producer_id, cols.attributes, cols.marker)
    lso = last_stable_offset(cols.base_offset, status, cols.log_end)
    if log_start is not None:
        lso = max(lso, log_start)
    starts, ends = excluded_ranges(cols.base_offset, cols.last_offset, status)
    return TxnState(lso, starts, ends, status, cols)


def partition_txn_state(path: str | os.PathLike[str]) -> TxnState:
    return txn_state_of(partition_txn_columns(path))


# ----------------------------------------------------------------------------- .txnindex rebuild
def _seed(directory: Path, first_base: int) -> tuple[list[Any], Path | None]:
    for off, f in reversed(snapshot_files(directory)):
        if off > first_base:
            continue
        try:
            return list(read_producer_snapshot(f).entries), f
        except MqStoreError:
            continue  # Kafka deletes a corrupt snapshot and falls back to an older one
    return [], None


def expected_txn_indexes(path: str | os.PathLike[str], cols: TxnColumns | None = None, *,
                         replay: bool = False) -> dict[int, list[AbortedTxn]]:
    """Aborted transactions per segment (base offset → entries) that Kafka's recovery of every
    segment writes, for the whole partition: vectorised (:func:`aborted_transactions`), or with
    ``replay`` by the per-batch producer-state replay (the twin; same answer)."""
    if replay:
        return _replay(path, cols).per_segment
    p = Path(path)
    directory = p if p.is_dir() else p.parent
    cols = cols if cols is not None else partition_txn_columns(p if p.is_dir() else directory)
    out: dict[int, list[AbortedTxn]] = {b: [] for b in cols.segments}
    seed, _ = _seed(directory, cols.segments[0]) if cols.segments else ([], None)
    seed_open = {e.producer_id: e.current_txn_first_offset for e in seed if e.current_txn_first_offset >= 0}
    rows, txns = aborted_transactions(cols.base_offset, cols.producer_id, cols.attributes, cols.marker, seed_open)
    for row, t in zip(rows.tolist(), txns, strict=True):
        out[int(cols.segment[row])].append(t)
    return out


@dataclass
class _ReplayResult:
    per_segment: dict[int, list[AbortedTxn]]
    states: dict[int, dict[int, ProducerSnapshotEntry]]  # capture offset → producer id → state
    complete: bool  # the replay knows the whole history (log from 0, or seeded from a snapshot)
    seed: Path | None


def _replay(path: str | os.PathLike[str], cols: TxnColumns | None = None,
            capture: list[int] | None = None) -> _ReplayResult:
    p = Path(path)
    directory = p if p.is_dir() else p.parent
    cols = cols if cols is not None else partition_txn_columns(p if p.is_dir() else directory)
    out: dict[int, list[AbortedTxn]] = {b: [] for b in cols.segments}
    seed, seed_file = _seed(directory, cols.segments[0]) if cols.segments else ([], None)
    replay = ProducerStateReplay(seed)
    pending = sorted(capture or [])
    states: dict[int, dict[int, ProducerSnapshotEntry]] = {}
    rows = np.nonzero(cols.producer_id >= 0)[0]
    a = cols.attributes
    for i in rows.tolist():
        base, last = int(cols.base_offset[i]), int(cols.last_offset[i])
        while pending and pending[0] <= base:
            states[pending.pop(0)] = {e.producer_id: e for e in replay.entries()}
        seq = int(cols.base_sequence[i])
        last_seq = -1 if seq < 0 else (seq + (last - base)) % (1 << 31)
        t = replay.append(base_offset=base, last_offset=last, producer_id=int(cols.producer_id[i]),
                          epoch=int(cols.producer_epoch[i]), last_sequence=last_seq,
                          max_timestamp=int(cols.max_timestamp[i]), transactional=bool(a[i] & 0x10),
                          control=bool(a[i] & 0x20), marker=int(cols.marker[i]),
                          coordinator_epoch=int(cols.coordinator_epoch[i]),
                          marker_timestamp=int(cols.marker_timestamp[i]))
        if t is not None:
            out[int(cols.segment[i])].append(t)
    for off in pending:
        if off <= cols.log_end:
            states[off] = {e.producer_id: e for e in replay.entries()}
    complete = seed_file is not None or (bool(cols.segments) and cols.segments[0] == 0)
    return _ReplayResult(out, states, complete, seed_file)


def verify_txn_indexes(directory: Path, report: Any, cols: TxnColumns | None = None) -> None:
    """Compare every segment's ``.txnindex`` with the replay (problems: ``txnindex_corrupt``,
    ``txnindex_mismatch``) and check every ``.snapshot``: CRC and layout
    (``snapshot_corrupt``), and each producer entry against the replayed producer state at the
    snapshot's offset (``snapshot_mismatch``) when the replay knows the partition's whole history.

    A missing ``.txnindex`` of a segment where aborted transactions end is a note
    (``txnindex_missing``): a broker's own appends always write it,
    but directories written segment by segment (mqstore's writer, Kafka's ``LogSegment`` alone)
    have none and Kafka's recovery rebuilds it; below the recovery point Kafka trusts the
    missing file, so read_committed consumers would receive the aborted records."""
    snaps: dict[int, tuple[Path, ProducerSnapshot]] = {}
    for off, f in snapshot_files(directory):
        try:
            snaps[off] = (f, read_producer_snapshot(f))
        except MqStoreError as exc:
            report.add("snapshot_corrupt", f, exc.offset, exc.message)
    cols = cols if cols is not None else partition_txn_columns(directory)
    if snaps:  # the per-batch replay gives the producer states the snapshots are compared with
        res = _replay(directory, cols, capture=list(snaps))
    else:
        res = _ReplayResult(expected_txn_indexes(directory, cols), {}, False, None)
    for off, (f, snap) in snaps.items():
        if f == res.seed:
            continue
        state = res.states.get(off)
        if state is None:
            report.note("snapshot_unchecked", f, None, "snapshot offset outside the log's offsets: not compared")
            continue
        for k, e in enumerate(snap.entries):
            want = state.get(e.producer_id)
            if want is None and not res.complete:
                report.note("snapshot_unchecked", f, 10 + 46 * k,
                            f"producer {e.producer_id}: its batches precede the first segment")
                continue
            if want != e:
                report.add("snapshot_mismatch", f, 10 + 46 * k,
                           f"producer {e.producer_id}: snapshot has {_fmt_entry(e)}, the log gives {_fmt_entry(want)}")
    check_txn_index_files(directory, res.per_segment, report)


def _fmt_entry(e: ProducerSnapshotEntry | None) -> str:
    if e is None:
        return "no such producer"
    return (f"epoch {e.epoch} lastSequence {e.last_sequence} lastOffset {e.last_offset} offsetDelta "
            f"{e.offset_delta} timestamp {e.timestamp} coordinatorEpoch {e.coordinator_epoch} "
            f"currentTxnFirstOffset {e.current_txn_first_offset}")


