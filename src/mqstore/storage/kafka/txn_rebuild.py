"""Rebuild of the ``.txnindex`` files of a partition (what ``LogSegment.recover`` leaves), without
numpy when the partition has no transactions.

The aborted transactions come from :func:`mqstore.storage.kafka.txn.expected_txn_indexes` (the
replay over the partition's batch columns).  A partition none of whose valid magic-2 batches
carries the transactional or control attribute has no aborted transaction whatever its snapshots
say (an entry needs an ABORT marker), which the native recovery tells per segment
(:func:`mqstore.storage.kafka.rebuild.txn_batches_of`): then the replay, and numpy, are skipped —
the one-shot ``kafka rebuild-index`` of a plain partition runs without importing numpy.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from mqstore.errors import StoreNotFoundError
from mqstore.storage.kafka.layout import parse_base_offset
from mqstore.storage.kafka.rebuild import _partition_lock, atomic_write, segment_logs_of, txn_batches_of
from mqstore.storage.kafka.txn_files import check_txn_index_files, snapshot_files


@dataclass
class TxnIndexResult:
    segment: int
    path: str
    entries: int
    written: bool  # False: no aborted transaction and no file to reset (Kafka creates none)


def rebuild_txn_indexes(path: str | os.PathLike[str], out_dir: str | os.PathLike[str] | None = None,
                        *, only: set[int] | None = None) -> list[TxnIndexResult]:
    """Write the ``.txnindex`` of every segment of a partition (or of the segments in ``only``)
    exactly as Kafka's recovery leaves it: the aborted transactions whose ABORT marker lies in
    the segment.  A segment without one gets no file, except that an existing file in the
    target directory is emptied (Kafka's ``reset`` truncates it to 0 bytes)."""
    p = Path(path)
    directory = p if p.is_dir() else p.parent
    out = Path(out_dir) if out_dir is not None else directory
    if not out.is_dir():
        raise StoreNotFoundError("output directory does not exist", path=str(out))
    lock = _partition_lock(out) if out.resolve() == directory.resolve() else None
    try:
        return _rebuild_txn_into(directory, out, only)
    finally:
        if lock is not None:
            lock.release()


def _no_transactions(directory: Path) -> dict[int, list[Any]] | None:
    """``{segment: []}`` when no segment of the partition has a transactional or control batch
    (told by the native walk, without numpy), else None (the replay must say)."""
    logs = segment_logs_of(directory)
    if all(txn_batches_of(f) == 0 for f in logs):
        return {parse_base_offset(f): [] for f in logs}
    return None


def _expected(directory: Path) -> dict[int, list[Any]]:
    """Aborted transactions per segment: none when no segment has a transactional or control
    batch (told by the native recovery), else the replay of :mod:`mqstore.storage.kafka.txn`."""
    none = _no_transactions(directory)
    if none is not None:
        return none
    from mqstore.storage.kafka.txn import expected_txn_indexes

    return expected_txn_indexes(directory)


# ----------------------------------------------------------------------------- verify
def verify_txn_indexes_quick(directory: Path, report: Any) -> bool:
    """The ``.txnindex`` part of :func:`mqstore.storage.kafka.txn.verify_txn_indexes` without
    numpy, for a partition with no ``.snapshot`` and no transactional or control batch (then
    every segment expects no aborted transaction); False (nothing checked) otherwise."""
    if snapshot_files(directory):
        return False
    expected = _no_transactions(directory)
    if expected is None:
        return False
    check_txn_index_files(directory, expected, report)
    return True


def _rebuild_txn_into(directory: Path, out: Path, only: set[int] | None) -> list[TxnIndexResult]:
    expected = _expected(directory)
    results = []
    for base, txns in expected.items():
        if only is not None and base not in only:
            continue
        target = out / f"{base:020d}.txnindex"
        if txns or target.exists():
            from mqstore.formats.kafka.txn import encode_txn_index

            atomic_write(target, encode_txn_index(txns))
            results.append(TxnIndexResult(base, str(target), len(txns), True))
        else:
            results.append(TxnIndexResult(base, str(target), 0, False))
    return results
