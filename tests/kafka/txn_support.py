"""Builders of transactional Kafka partitions for the transaction tests, and a brute-force model
of what the broker and a read_committed consumer make of them (written independently of the
library's replay: a plain walk over the operations)."""

from __future__ import annotations

import itertools
from dataclasses import dataclass, field
from pathlib import Path

from mqstore.formats.kafka import SimpleRecord, encode_batch, encode_end_txn_marker_batch
from mqstore.formats.kafka.txn import AbortedTxn


@dataclass
class Op:
    """``kind``: "txn" (transactional data of ``pid``), "plain" (non-transactional data) or "end"
    (an end marker of ``pid``: COMMIT when ``commit``)."""

    kind: str
    pid: int = -1
    n: int = 1
    commit: bool = True


@dataclass
class Model:
    batches: list[bytes] = field(default_factory=list)
    bases: list[int] = field(default_factory=list)
    visible: list[int] = field(default_factory=list)  # offsets returned by read_committed (before the LSO cut)
    aborted: list[AbortedTxn] = field(default_factory=list)  # expected .txnindex entries (marker order)
    markers: list[int] = field(default_factory=list)  # offsets of the end markers
    lso: int = 0
    log_end: int = 0

    def committed_offsets(self) -> list[int]:
        return [o for o in self.visible if o < self.lso]


def build(ops: list[Op], *, tv2: bool = False, start: int = 0) -> Model:
    """Encode ``ops`` as consecutive batches from offset ``start`` (Transactions V1: marker epoch =
    data epoch; V2: marker epoch = data epoch + 1 and the producer continues with the bumped
    epoch) and compute the model's answers."""
    m = Model()
    off = start
    epoch: dict[int, int] = {}
    seq: dict[int, int] = {}
    open_txn: dict[int, list[int]] = {}  # pid -> offsets of its open transaction
    first: dict[int, int] = {}
    for op in ops:
        if op.kind == "end":
            e = epoch.get(op.pid, 0)
            me = e + 1 if tv2 else e
            m.batches.append(encode_end_txn_marker_batch(commit=op.commit, producer_id=op.pid, producer_epoch=me,
                                                         base_offset=off, timestamp=5_000 + off,
                                                         coordinator_epoch=3))
            m.bases.append(off)
            m.markers.append(off)
            if op.pid in open_txn:
                offs = open_txn.pop(op.pid)
                f = first.pop(op.pid)
                if op.commit:
                    m.visible.extend(offs)
                else:
                    others = [first[q] for q in first if q != op.pid]
                    m.aborted.append(AbortedTxn(op.pid, f, off, min(others) if others else off + 1))
            if tv2:
                epoch[op.pid] = me
                seq[op.pid] = 0
            off += 1
            continue
        txn = op.kind == "txn"
        pid = op.pid if txn else -1
        s = seq.get(pid, 0) if txn else -1
        recs = [SimpleRecord(b"p%d-o%d" % (pid, off + i), key=b"k%d" % i, timestamp=1_000 + off + i)
                for i in range(op.n)]
        m.batches.append(encode_batch(recs, base_offset=off, producer_id=pid, producer_epoch=epoch.get(pid, 0) if txn
                                      else -1, base_sequence=s, is_transactional=txn))
        m.bases.append(off)
        offsets = list(range(off, off + op.n))
        if txn:
            seq[pid] = s + op.n
            open_txn.setdefault(pid, []).extend(offsets)
            first.setdefault(pid, off)
        else:
            m.visible.extend(offsets)
        off += op.n
    m.log_end = off
    m.lso = min(first.values()) if first else off
    m.visible.sort()
    return m


def write_partition(directory: Path, model: Model, cuts: list[int] | None = None) -> list[int]:
    """Write the model's batches as segments, a new segment starting before each batch index in
    ``cuts``; returns the segment base offsets."""
    directory.mkdir(parents=True, exist_ok=True)
    cuts = sorted(set(c for c in (cuts or []) if 0 < c < len(model.batches)))
    bounds = [0, *cuts, len(model.batches)]
    bases = []
    for a, b in itertools.pairwise(bounds):
        base = model.bases[a]
        (directory / f"{base:020d}.log").write_bytes(b"".join(model.batches[a:b]))
        bases.append(base)
    return bases


def expected_by_segment(model: Model, bases: list[int]) -> dict[int, list[AbortedTxn]]:
    out: dict[int, list[AbortedTxn]] = {b: [] for b in bases}
    for t in model.aborted:
        seg = max(b for b in bases if b <= t.last_offset)
        out[seg].append(t)
    return out
