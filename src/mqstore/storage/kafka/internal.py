"""Kafka 4.x KRaft metadata files and internal topics, offline (read-only; nothing is written).

* KRaft snapshots (``<20-digit end offset>-<10-digit epoch>.checkpoint``, the in-progress
  ``.checkpoint.part``, the ``.checkpoint.deleted`` waiting for removal, and the log directory's
  ``bootstrap.checkpoint``): files of v2 record batches like a ``.log``; the first batch is a
  control batch holding a SnapshotHeader record, the last a control batch holding a
  SnapshotFooter; the batches between hold metadata records.  :func:`verify_snapshot` checks that.
* ``quorum-state``: :func:`read_quorum_state`.
* ``__consumer_offsets``: :func:`consumer_groups` replays every ``__consumer_offsets-N`` partition
  of a log directory in log order, as the group coordinator does when it loads a partition, and
  gives the committed offsets and lag per group / partition (``kafka-consumer-groups --describe``
  without a broker).
"""

from __future__ import annotations

import os
import re
import struct
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from mqstore.errors import CorruptDataError, StoreNotFoundError
from mqstore.formats.kafka.batch import (
    ControlRecordType,
    decode_batch_header,
    iter_records,
)
from mqstore.formats.kafka.coordinator_records import OFFSETS_TOPIC, decode_coordinator_record
from mqstore.formats.kafka.metadata_records import decode_metadata_record
from mqstore.formats.kafka.quorum_state import decode_quorum_state
from mqstore.storage.kafka.log import PartitionLog
from mqstore.storage.kafka.rebuild import MappedLog, analyze_log
from mqstore.storage.kafka.tools import VerifyReport

SNAPSHOT_NAME = re.compile(r"^(?P<offset>\d{20})-(?P<epoch>\d{10})\.checkpoint(?P<state>\.part|\.deleted)?$")
BOOTSTRAP_CHECKPOINT = "bootstrap.checkpoint"
QUORUM_STATE = "quorum-state"


def snapshot_kind(name: str) -> str | None:
    """``snapshot``, ``snapshot_part``, ``snapshot_deleted``, ``bootstrap`` or ``None``."""
    if name == BOOTSTRAP_CHECKPOINT:
        return "bootstrap"
    m = SNAPSHOT_NAME.match(name)
    if m is None:
        return None
    return {None: "snapshot", ".part": "snapshot_part", ".deleted": "snapshot_deleted"}[m.group("state")]


def snapshot_id(name: str) -> tuple[int, int] | None:
    """``(end offset, epoch)`` from a snapshot file name."""
    m = SNAPSHOT_NAME.match(name)
    return (int(m.group("offset")), int(m.group("epoch"))) if m else None


def read_quorum_state(path: str | os.PathLike[str]) -> dict[str, Any]:
    p = Path(path)
    try:
        data = p.read_bytes()
    except FileNotFoundError:
        raise StoreNotFoundError("quorum-state not found", path=str(p)) from None
    try:
        return decode_quorum_state(data)
    except CorruptDataError as exc:
        raise CorruptDataError(exc.message, path=str(p)) from None


# ----------------------------------------------------------------------------- batches of a file
@dataclass
class _Batch:
    position: int
    header: Any
    valid: bool


def _control_type(key: bytes | None) -> int | None:
    if key is None or len(key) < 4:
        return None
    return int(struct.unpack_from(">hh", key)[1])


def verify_snapshot(path: str | os.PathLike[str], report: VerifyReport | None = None) -> VerifyReport:
    """Check one KRaft snapshot file (``.checkpoint``, ``bootstrap.checkpoint``; a ``.part`` or
    ``.deleted`` one only gets a note).

    Problems: ``crc`` / ``bad_size`` / ``torn_tail`` (as for a segment), ``snapshot_header`` (the
    first batch is not a control batch whose first record is a SnapshotHeader),
    ``snapshot_footer`` (the last batch is not a control batch whose last record is a
    SnapshotFooter: the snapshot was not completed), ``snapshot_offsets`` (offsets not
    increasing), ``metadata_record`` (a data record that is not a valid metadata record).
    """
    p = Path(path)
    report = report if report is not None else VerifyReport()
    kind = snapshot_kind(p.name)
    lp = str(p)
    if kind in ("snapshot_part", "snapshot_deleted"):
        what = "an unfinished snapshot (Kafka deletes it on start-up)" if kind == "snapshot_part" else \
            "a snapshot marked for deletion (Kafka removes it)"
        report.note(kind, lp, None, what)
        return report
    report.segments += 1
    with MappedLog(p) as ml:
        mm = ml.mm
        a = analyze_log(mm)
        scan = a.scan
        n = int(scan["count"])
        report.batches += n
        report.bytes += a.log_size
        for i in range(n):
            if not a.crc_ok[i]:
                pos = int(scan["position"][i])
                report.add("crc", lp, pos, f"batch at position {pos} fails its size/CRC check")
        if a.stop == "bad_size":
            report.add("bad_size", lp, int(scan["valid_end"]), "size field below 14 (corrupt record)")
        elif scan["valid_end"] < a.log_size:
            report.add("torn_tail", lp, int(scan["valid_end"]),
                       f"{a.log_size - int(scan['valid_end'])} bytes after the last whole batch")
        if n == 0:
            report.add("snapshot_header", lp, 0, "snapshot holds no record batch (no SnapshotHeader)")
            report.add("snapshot_footer", lp, None, "snapshot has no SnapshotFooter: it was not completed")
            return report
        prev_last = -1
        first_type: int | None = None
        last_type: int | None = None
        first_is_control = last_is_control = False
        for i in range(n):
            pos = int(scan["position"][i])
            if not a.crc_ok[i] or int(scan["magic"][i]) != 2:
                if int(scan["magic"][i]) != 2:
                    report.add("snapshot_format", lp, pos, f"batch magic {int(scan['magic'][i])} in a snapshot")
                if i == 0:
                    first_type = None
                last_type = None
                last_is_control = False
                continue
            h = decode_batch_header(mm, pos, path=lp)
            if h.base_offset <= prev_last:
                report.add("snapshot_offsets", lp, pos,
                           f"batch offsets go backwards: {h.base_offset} after {prev_last}")
            prev_last = h.last_offset
            try:
                recs = list(iter_records(mm, h, path=lp))
            except CorruptDataError as exc:
                report.add("metadata_record", lp, pos, f"cannot decode batch records: {exc.message}")
                last_type, last_is_control = None, False
                continue
            if h.is_control:
                types = [_control_type(r.key) for r in recs]
                if i == 0:
                    first_is_control = True
                    first_type = types[0] if types else None
                last_is_control = True
                last_type = types[-1] if types else None
            else:
                if i == 0:
                    first_is_control = False
                last_is_control = False
                for r in recs:
                    try:
                        d = decode_metadata_record(r.value)
                    except CorruptDataError as exc:
                        report.add("metadata_record", lp, pos, f"record at offset {r.offset}: {exc.message}")
                        continue
                    if d.get("unknown"):
                        report.note("unknown_metadata_record", lp, pos,
                                    f"record at offset {r.offset}: api key {d['apiKey']} version {d['version']} "
                                    "is not known to mqstore (left undecoded)")
        if not (first_is_control and first_type == ControlRecordType.SNAPSHOT_HEADER):
            report.add("snapshot_header", lp, 0, "first batch is not a control batch starting with a SnapshotHeader")
        if not (last_is_control and last_type == ControlRecordType.SNAPSHOT_FOOTER):
            report.add("snapshot_footer", lp, int(scan["position"][n - 1]),
                       "last batch is not a control batch ending with a SnapshotFooter: the snapshot is incomplete")
    return report


def snapshot_files(directory: Path) -> list[Path]:
    """KRaft snapshot files of a directory, by name."""
    return sorted(f for f in directory.iterdir() if f.is_file() and snapshot_kind(f.name) is not None)


# ----------------------------------------------------------------------------- __consumer_offsets
@dataclass
class CommittedOffset:
    group: str
    topic: str
    partition: int
    offset: int
    leader_epoch: int
    metadata: str
    commit_timestamp: int
    log_end_offset: int | None = None
    source: str = ""  # the __consumer_offsets partition and offset of the commit

    @property
    def lag(self) -> int | None:
        return None if self.log_end_offset is None else max(0, self.log_end_offset - self.offset)


@dataclass
class GroupInfo:
    group: str
    kind: str = "classic"  # classic | consumer (KIP-848) | share
    protocol_type: str | None = None
    protocol: str | None = None
    generation: int | None = None
    leader: str | None = None
    members: int = 0
    state: str = "Empty"
    offsets: list[CommittedOffset] = field(default_factory=list)


@dataclass
class ConsumersReport:
    groups: dict[str, GroupInfo]
    offsets_partitions: list[str]
    records: int = 0
    decode_errors: int = 0
    problems: list[str] = field(default_factory=list)


def _partition_dirs(logdir: Path) -> Iterator[tuple[str, int, Path]]:
    for d in sorted(logdir.iterdir()):
        if not d.is_dir():
            continue
        topic, sep, part = d.name.rpartition("-")
        if sep and part.isdigit() and topic:
            yield topic, int(part), d


def _iter_partition_records(d: Path) -> Iterator[tuple[Any, Any]]:
    """Every record of the valid batches of a partition directory, in log order, with its batch."""
    logs = sorted((f for f in d.iterdir() if f.suffix == ".log" and f.name.split(".", 1)[0].isdigit()),
                  key=lambda f: int(f.name.split(".", 1)[0]))
    for f in logs:
        with MappedLog(f) as ml:
            mm = ml.mm
            a = analyze_log(mm)
            scan = a.scan
            for i in range(int(scan["count"])):
                if not a.crc_ok[i] or int(scan["magic"][i]) != 2:
                    continue
                h = decode_batch_header(mm, int(scan["position"][i]), path=str(f))
                for r in iter_records(mm, h, path=str(f)):
                    yield h, r


def consumer_groups(logdir: str | os.PathLike[str], group: str | None = None) -> ConsumersReport:
    """Committed offsets and lag per group / partition from the ``__consumer_offsets-N`` partition
    directories of ``logdir`` alone.

    Replays each partition in log order: an offset commit sets (group, topic, partition), a
    tombstone removes it; transactional commits count only once their COMMIT marker follows (an
    ABORT drops them); the latest GroupMetadata / ConsumerGroupMetadata record gives the group's
    protocol, generation or epoch, and members.  The lag uses the log end offset of the
    ``topic-partition`` directory when it is in ``logdir`` (else it is unknown).
    """
    root = Path(logdir)
    if not root.is_dir():
        raise StoreNotFoundError("log directory not found", path=str(root))
    parts = [(t, p, d) for t, p, d in _partition_dirs(root)]
    offsets_dirs = [d for t, _p, d in parts if t == OFFSETS_TOPIC]
    if not offsets_dirs:
        raise StoreNotFoundError(f"no {OFFSETS_TOPIC}-N partition directory in the log directory", path=str(root))
    report = ConsumersReport(groups={}, offsets_partitions=[d.name for d in offsets_dirs])
    commits: dict[tuple[str, str, int], CommittedOffset] = {}
    groups = report.groups
    members: dict[str, set[str]] = {}

    def grp(name: str) -> GroupInfo:
        g = groups.get(name)
        if g is None:
            g = groups[name] = GroupInfo(name)
        return g

    for d in sorted(offsets_dirs, key=lambda x: int(x.name.rpartition("-")[2])):
        pending: dict[int, list[tuple[str, Any]]] = {}  # producer id -> transactional commits
        for h, r in _iter_partition_records(d):
            if h.is_control:
                ctype = _control_type(r.key)
                txn = pending.pop(h.producer_id, [])
                if ctype == ControlRecordType.COMMIT:
                    for kind, rec in txn:
                        _apply(kind, rec, commits)
                continue
            report.records += 1
            try:
                dec = decode_coordinator_record("offsets", r.key, r.value)
            except CorruptDataError as exc:
                report.decode_errors += 1
                if len(report.problems) < 20:
                    report.problems.append(f"{d.name} offset {r.offset}: {exc.message}")
                continue
            t = dec["type"]
            if t == "OffsetCommit":
                k = dec["key"]
                if group is not None and k["group"] != group:
                    continue
                rec = (k, dec.get("value"), f"{d.name}@{r.offset}")
                if h.is_transactional:
                    pending.setdefault(h.producer_id, []).append(("commit", rec))
                else:
                    _apply("commit", rec, commits)
            elif t == "GroupMetadata":
                name = dec["key"]["group"]
                if group is not None and name != group:
                    continue
                v = dec.get("value")
                if v is None:
                    groups.pop(name, None)
                    continue
                g = grp(name)
                g.kind = "classic"
                g.protocol_type = v["protocolType"]
                g.protocol = v["protocol"]
                g.generation = v["generation"]
                g.leader = v["leader"]
                g.members = len(v["members"])
            elif t in ("ConsumerGroupMetadata", "ShareGroupMetadata"):
                name = dec["key"]["groupId"]
                if group is not None and name != group:
                    continue
                v = dec.get("value")
                if v is None:
                    groups.pop(name, None)
                    members.pop(name, None)
                    continue
                g = grp(name)
                g.kind = "consumer" if t == "ConsumerGroupMetadata" else "share"
                g.protocol_type = g.kind
                g.generation = v["epoch"]
            elif t in ("ConsumerGroupMemberMetadata", "ShareGroupMemberMetadata"):
                name = dec["key"]["groupId"]
                if group is not None and name != group:
                    continue
                ms = members.setdefault(name, set())
                if dec.get("value") is None:
                    ms.discard(dec["key"]["memberId"])
                else:
                    ms.add(dec["key"]["memberId"])
    for name, ms in members.items():
        if name in groups:
            groups[name].members = len(ms)
    ends: dict[tuple[str, int], int] = {}
    wanted = {(c.topic, c.partition) for c in commits.values()}
    for t, p, d in parts:
        if (t, p) in wanted:
            log = PartitionLog.open(d, read_only=True)
            try:
                ends[(t, p)] = log.log_end_offset
            finally:
                log.close()
    for c in sorted(commits.values(), key=lambda c: (c.group, c.topic, c.partition)):
        c.log_end_offset = ends.get((c.topic, c.partition))
        grp(c.group).offsets.append(c)
    for g in groups.values():
        g.state = "Stable" if g.members else "Empty"
    return report


def _apply(kind: str, rec: tuple[dict[str, Any], dict[str, Any] | None, str],
           commits: dict[tuple[str, str, int], CommittedOffset]) -> None:
    k, v, where = rec
    key = (k["group"], k["topic"], k["partition"])
    if v is None:
        commits.pop(key, None)
        return
    commits[key] = CommittedOffset(k["group"], k["topic"], k["partition"], v["offset"],
                                   v.get("leaderEpoch", -1), v["metadata"], v["commitTimestamp"], source=where)
