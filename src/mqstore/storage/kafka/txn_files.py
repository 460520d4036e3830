"""The transaction files of a partition read without numpy: ``.txnindex`` entries, the producer
``.snapshot`` files present, and the check of every ``.txnindex`` against the aborted transactions
expected in its segment (used by :mod:`mqstore.storage.kafka.txn`'s replay and by the numpy-free
path of ``kafka verify``, :func:`mqstore.storage.kafka.txn_rebuild.verify_txn_indexes_quick`)."""

from __future__ import annotations

import os
from pathlib import Path
from typing import TYPE_CHECKING, Any

from mqstore.errors import CorruptDataError, InvalidArgumentError, MqStoreError

if TYPE_CHECKING:
    from mqstore.formats.kafka.txn import AbortedTxn

# (the .txnindex codec, and the batch codec it imports, are loaded by read_txn_index: a partition
# whose segments have no .txnindex never needs them)


def read_txn_index(path: str | os.PathLike[str], *, base_offset: int | None = None) -> list[AbortedTxn]:
    """Entries of a ``.txnindex`` (a missing file has none, as in Kafka).  Truncated entries or an
    unknown version raise typed errors; with ``base_offset``, Kafka's sanity check (every
    ``lastOffset`` ≥ the segment's base offset) too."""
    p = Path(path)
    try:
        data = p.read_bytes()
    except FileNotFoundError:
        return []
    except IsADirectoryError:
        raise InvalidArgumentError("not a transaction index file", path=str(p)) from None
    from mqstore.formats.kafka.txn import decode_txn_index

    txns = decode_txn_index(data, path=str(p))
    if base_offset is not None:
        for i, t in enumerate(txns):
            if t.last_offset < base_offset:
                raise CorruptDataError(f"last offset {t.last_offset} of aborted transaction {t} is below the "
                                       f"segment's start offset {base_offset}", path=str(p), offset=i * 34)
    return txns


def snapshot_files(directory: Path) -> list[tuple[int, Path]]:
    out = []
    for f in directory.iterdir():
        stem = f.name.split(".", 1)[0]
        if f.suffix == ".snapshot" and f.name == f"{stem}.snapshot" and stem.isdigit() and len(stem) == 20:
            out.append((int(stem), f))
    return sorted(out)


def check_txn_index_files(directory: Path, per_segment: dict[int, list[AbortedTxn]], report: Any) -> None:
    """Every segment's ``.txnindex`` against the aborted transactions expected in it
    (``txnindex_corrupt``, ``txnindex_mismatch``; a missing file where some are expected is the
    note ``txnindex_missing``)."""
    for base, want_txns in per_segment.items():
        f = directory / f"{base:020d}.txnindex"
        if not f.exists():
            if want_txns:
                report.note("txnindex_missing", f, None,
                           f"{len(want_txns)} aborted transaction(s) end in this segment but it has no transaction "
                           "index (read_committed consumers fed from this file would see aborted records; "
                            "rebuild-index writes it)")
            continue
        try:
            have = read_txn_index(f, base_offset=base)
        except MqStoreError as exc:
            report.add("txnindex_corrupt", f, exc.offset, exc.message)
            continue
        if have != want_txns:
            k = next((i for i, (h, w) in enumerate(zip(have, want_txns, strict=False)) if h != w),
                     min(len(have), len(want_txns)))
            got = have[k] if k < len(have) else None
            exp = want_txns[k] if k < len(want_txns) else None
            report.add("txnindex_mismatch", f, k * 34,
                       f"entry {k}: file has {_fmt(got)}, the log gives {_fmt(exp)} "
                       f"({len(have)} vs {len(want_txns)} entries)")


def _fmt(t: AbortedTxn | None) -> str:
    if t is None:
        return "no entry"
    return (f"producerId {t.producer_id} firstOffset {t.first_offset} lastOffset {t.last_offset} "
            f"lastStableOffset {t.last_stable_offset}")
