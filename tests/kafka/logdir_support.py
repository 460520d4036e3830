"""Builders of Kafka partition and log directories for the tests, made with mqstore's own writers
(PartitionLog, the format encoders) and left in the states a live broker leaves them."""

from __future__ import annotations

import hashlib
import shutil
from pathlib import Path

from mqstore.formats.kafka import SimpleRecord, encode_batch
from mqstore.formats.kafka.logdir_files import (
    EpochEntry,
    encode_clean_shutdown,
    encode_leader_epoch_checkpoint,
    encode_offset_checkpoint,
)
from mqstore.formats.kafka.txn import encode_producer_snapshot
from mqstore.kafka import LogConfig, PartitionLog

# Timestamps go up and down inside a batch and across batches, like real producers' clocks.
BASE_TS = 1_700_000_000_000
TOPIC_ID = "AAECAwQFBgcICQoLDA0ODw"  # 16 bytes 0..15, URL-safe base64
DIRECTORY_ID = "EBESExQVFhcYGRobHB0eHw"


def ts_of(offset: int) -> int:
    return BASE_TS + offset * 10 + (7 if offset % 5 == 0 else 0) - (13 if offset % 7 == 3 else 0)


def write_partition(directory: Path, n_batches: int = 60, per_batch: int = 5, *, live: bool = False,
                    segment_bytes: int = 4000, max_index_size: int = 1000) -> list[tuple[int, int]]:
    """A partition with several segments written by PartitionLog (index every 300 bytes).

    ``live=True`` leaves it as a running broker's directory would be seen: the active segment's
    ``.index``/``.timeindex`` preallocated to ``max_index_size`` rounded down to the entry size
    (1000 → 1000 and 996 bytes) and
    zero-filled after the entries, no final time-index entry, no clean-shutdown marker.
    Returns ``[(offset, timestamp)]`` of every record."""
    cfg = LogConfig(segment_bytes=segment_bytes, index_interval_bytes=300, max_index_size=max_index_size)
    log = PartitionLog.open(directory, cfg)
    out = []
    for b in range(n_batches):
        base = b * per_batch
        recs = [SimpleRecord(value=b"value-%05d" % (base + i) * 3, key=b"k%d" % ((base + i) % 11),
                             timestamp=ts_of(base + i)) for i in range(per_batch)]
        log.append(encode_batch(recs, base_offset=base, partition_leader_epoch=b // 20), assign_offsets=False)
        out += [(base + i, ts_of(base + i)) for i in range(per_batch)]
    if live:
        log.flush()
        log.close_handlers()  # a crash / a running broker: nothing trimmed, no marker
    else:
        log.close()
    return out


def expected_for_timestamp(records: list[tuple[int, int]], seg_bases: list[int], target: int) -> tuple[int, int] | None:
    """Kafka's offset-for-timestamp by brute force: the first segment whose largest record
    timestamp ≥ target, in it the first record (offset order) with timestamp ≥ target."""
    bounds = [*seg_bases[1:], 1 << 62]
    for lo, hi in zip(seg_bases, bounds, strict=True):
        recs = [(o, t) for o, t in records if lo <= o < hi]
        if recs and max(t for _, t in recs) >= target:
            return next((o, t) for o, t in recs if t >= target)
    return None


def tree_hash(root: Path) -> dict[str, str]:
    """Name → SHA-256 (and size/mtime-free) of every file under ``root``: read-only checks."""
    return {str(p.relative_to(root)): hashlib.sha256(p.read_bytes()).hexdigest()
            for p in sorted(root.rglob("*")) if p.is_file()}


def build_log_dir(root: Path) -> Path:
    """A Kafka 4.x log directory: three live partitions (one a live broker's active state), one
    compacted-like partition with offset gaps, ``-delete``/``-future``/``-stray`` directories, the
    four checkpoint files, ``meta.properties`` with ``directory.id``, a JSON clean-shutdown marker,
    per-partition ``partition.metadata``/``leader-epoch-checkpoint``, producer snapshots and
    transaction index files, cleaner temporaries and a tiered-storage ``remote-log-index-cache``."""
    d = root / "data"
    d.mkdir()
    orders0 = d / "orders-0"
    write_partition(orders0, live=True)
    write_partition(d / "orders-1", n_batches=20)
    # compacted topic: offsets with gaps, first batch above the segment base
    comp = d / "compacted-0"
    log = PartitionLog.open(comp, LogConfig(segment_bytes=600, index_interval_bytes=100))
    for off in (3, 4, 9, 15, 16, 40, 41, 90, 200, 201, 202, 500):
        log.append(encode_batch([SimpleRecord(b"v%d" % off, key=b"k%d" % (off % 3), timestamp=BASE_TS + off)],
                                base_offset=off), assign_offsets=False)
    log.close()
    shutil.copytree(d / "orders-1", d / "orders-1.0123456789abcdef0123456789abcdef-future")
    shutil.copytree(d / "orders-1", d / "old-2.fedcba9876543210fedcba9876543210-delete")
    shutil.copytree(d / "orders-1", d / "orders-7.00112233445566778899aabbccddeeff-stray")
    for p in d.iterdir():  # mqstore's per-partition files are not in a broker's partition dirs
        (p / "recovery-point-offset-checkpoint").unlink(missing_ok=True)
        (p / ".kafka_cleanshutdown").unlink(missing_ok=True)
        (p / "partition.metadata").write_text(f"version: 0\ntopic_id: {TOPIC_ID}\n")
        (p / "leader-epoch-checkpoint").write_bytes(
            encode_leader_epoch_checkpoint([EpochEntry(0, 0), EpochEntry(1, 100), EpochEntry(2, 200)]))
    (orders0 / "00000000000000000150.snapshot").write_bytes(encode_producer_snapshot([]))  # a valid empty snapshot
    (orders0 / "00000000000000000000.txnindex").write_bytes(b"")
    (orders0 / "00000000000000000000.log.deleted").write_bytes(b"")
    (comp / "00000000000000000000.log.cleaned").write_bytes(b"")
    (comp / "00000000000000000000.index.swap").write_bytes(b"")
    (d / "recovery-point-offset-checkpoint").write_bytes(encode_offset_checkpoint(
        {("orders", 0): 150, ("orders", 1): 100, ("compacted", 0): 501}))
    (d / "log-start-offset-checkpoint").write_bytes(encode_offset_checkpoint(
        {("orders", 0): 0, ("orders", 1): 0, ("compacted", 0): 0}))
    (d / "replication-offset-checkpoint").write_bytes(encode_offset_checkpoint(
        {("orders", 0): 300, ("orders", 1): 100, ("compacted", 0): 501, ("gone", 3): 7}))
    (d / "cleaner-offset-checkpoint").write_bytes(encode_offset_checkpoint({("compacted", 0): 202}))
    (d / "meta.properties").write_text(
        "#\n#Mon Nov 24 10:00:00 UTC 2026\nnode.id=1\ndirectory.id=" + DIRECTORY_ID +
        "\nversion=1\ncluster.id=q1Sh-9_ISia_zwGINzRvyQ\n")
    (d / ".kafka_cleanshutdown").write_bytes(encode_clean_shutdown(42))
    (d / ".lock").write_bytes(b"")
    cache = d / "remote-log-index-cache"
    cache.mkdir()
    stem = "0_" + TOPIC_ID
    # a remote segment's indexes as Kafka's cache holds them: trimmed, whole entries
    (cache / f"{stem}.index").write_bytes(b"".join(
        (r).to_bytes(4, "big") + (r * 100).to_bytes(4, "big") for r in (5, 9, 14)))
    (cache / f"{stem}.timeindex").write_bytes(b"".join(
        (BASE_TS + r).to_bytes(8, "big") + r.to_bytes(4, "big") for r in (5, 9, 14)))
    (cache / f"{stem}.txnindex").write_bytes(b"")
    return d
