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
import struct
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from mqstore.errors import CorruptDataError, StoreNotFoundError
from mqstore.formats.kafka.batch import (
    ControlRecordType,
    batch_body,
    decode_batch_header,
    iter_records,
)
from mqstore.formats.kafka.coordinator_records import OFFSETS_TOPIC, decode_coordinator_record
from mqstore.formats.kafka.metadata_records import decode_metadata_record
from mqstore.formats.kafka.quorum_state import decode_quorum_state
from mqstore.storage.kafka.layout import (  # the KRaft file names live in layout
    METADATA_TOPIC,
    QUORUM_STATE,
    snapshot_files,
    snapshot_kind,
)
from mqstore.storage.kafka.rebuild import MappedLog, analyze_log
from mqstore.storage.kafka.tools import VerifyReport


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


def _verify_metadata_segment(f: Path, report: VerifyReport) -> None:
    """Every data record of the valid batches of a ``__cluster_metadata`` segment must be a valid
    metadata record (``metadata_record`` problem, at most 20 listed; unknown types are notes)."""
    lp = str(f)
    bad = unknown = 0
    with MappedLog(f) as ml:
        mm = ml.mm
        a = analyze_log(mm)
        scan = a.scan
        for i in range(int(scan["count"])):
            if not a.crc_ok[i] or int(scan["magic"][i]) != 2 or int(scan["attributes"][i]) & 0x20:
                continue
            pos = int(scan["position"][i])
            h = decode_batch_header(mm, pos, path=lp)
            try:
                recs = list(iter_records(mm, h, path=lp))
            except CorruptDataError as exc:
                report.add("metadata_record", lp, pos, f"cannot decode batch records: {exc.message}")
                continue
            for r in recs:
                try:
                    d = decode_metadata_record(r.value)
                except CorruptDataError as exc:
                    bad += 1
                    if bad <= 20:
                        report.add("metadata_record", lp, pos, f"record at offset {r.offset}: {exc.message}")
                    continue
                if d.get("unknown"):
                    unknown += 1
                    if unknown <= 20:
                        report.note("unknown_metadata_record", lp, pos,
                                    f"record at offset {r.offset}: api key {d['apiKey']} version {d['version']} "
                                    "is not known to mqstore (left undecoded)")
    if bad > 20:
        report.add("metadata_record", lp, None, f"{bad - 20} more invalid metadata records")


def verify_kraft_files(path: str | os.PathLike[str], report: VerifyReport) -> None:
    """The KRaft checks of a path into ``report``: every snapshot of a directory (or the one
    snapshot file given) with :func:`verify_snapshot`, and ``quorum-state`` parsed
    (``quorum_state`` problem when it does not)."""
    p = Path(path)
    for f in (snapshot_files(p) if p.is_dir() else [p] if snapshot_kind(p.name) else []):
        verify_snapshot(f, report)
    if p.is_dir() and p.name.rpartition("-")[0] == METADATA_TOPIC:
        for f in sorted(p.glob("*.log")):
            if f.name.split(".", 1)[0].isdigit():
                _verify_metadata_segment(f, report)
    qs = p / QUORUM_STATE if p.is_dir() else (p if p.name == QUORUM_STATE else None)
    if qs is not None and qs.is_file():
        try:
            read_quorum_state(qs)
        except CorruptDataError as exc:
            report.add("quorum_state", str(qs), None, exc.message)


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


@dataclass
class _SegmentRecords:
    """Per-record columns of one segment of ``__consumer_offsets`` (pass 1 of the replay)."""

    path: Path
    cols: dict[str, np.ndarray]
    other: list[tuple[int, bytes | None, bytes | None, int]]  # (record index, key, value, offset)


def _segment_buffer(f: Path, mm: Any, report: ConsumersReport | None) -> tuple[np.ndarray, dict[str, np.ndarray]]:
    """The segment's bytes (plus the decompressed bodies of compressed batches appended) and the
    columns of its valid v2 batches: ``body_start``, ``body_end``, ``count``, ``attributes``,
    ``producer_id``, ``base_offset``."""
    a = analyze_log(mm)
    scan = a.scan
    buf = np.frombuffer(mm, dtype=np.uint8) if len(mm) else np.zeros(0, np.uint8)
    keep = np.nonzero(a.crc_ok & (scan["magic"] == 2) & (scan["size"] >= 61))[0]
    if report is not None and keep.shape[0] < int(scan["count"]):
        report.problems.append(f"{f.parent.name}/{f.name}: {int(scan['count']) - keep.shape[0]} invalid batch(es) "
                               "skipped")
    pos = scan["position"][keep].astype(np.int64)
    attrs = scan["attributes"][keep].astype(np.int64)
    cols = {"body_start": pos + 61, "body_end": pos + scan["size"][keep].astype(np.int64),
            "count": scan["record_count"][keep].astype(np.int64), "attributes": attrs,
            "base_offset": scan["base_offset"][keep].astype(np.int64)}
    if pos.shape[0]:
        raw = buf[pos[:, None] + np.arange(43, 51)]  # producer id: int64 at byte 43 of the batch
        cols["producer_id"] = raw.copy().view(">i8").reshape(-1).astype(np.int64)
    else:
        cols["producer_id"] = np.zeros(0, np.int64)
    comp = np.nonzero((attrs & 7) != 0)[0]
    if comp.shape[0]:
        extra = bytearray()
        for i in comp.tolist():
            h = decode_batch_header(mm, int(pos[i]), path=str(f))
            try:
                body = batch_body(mm, h, path=str(f))
            except CorruptDataError as exc:  # undecompressible: skipped, reported
                if report is not None:
                    report.problems.append(f"{f.parent.name}/{f.name}: batch at offset {h.base_offset}: "
                                           f"{exc.message}; skipped")
                cols["count"][i] = 0
                continue
            cols["body_start"][i] = buf.shape[0] + len(extra)
            extra += body
            cols["body_end"][i] = buf.shape[0] + len(extra)
        buf = np.concatenate([buf, np.frombuffer(bytes(extra), dtype=np.uint8)])
    return buf, cols


def _scan_segment(f: Path, report: ConsumersReport) -> _SegmentRecords:
    from mqstore.kernels.kafka.offsets import KIND_BAD, KIND_OTHER, parse_offset_commits, record_spans

    with MappedLog(f) as ml:
        buf, b = _segment_buffer(f, ml.mm, report)
        sp = record_spans(buf, b["body_start"], b["body_end"], b["count"])
        for i in np.nonzero(~sp["ok"])[0].tolist():
            report.problems.append(f"{f.parent.name}/{f.name}: records of the batch at offset "
                                   f"{int(b['base_offset'][i])} do not parse; skipped")
        bi = sp["batch"]
        attrs = b["attributes"][bi]
        is_control = (attrs & 0x20) != 0
        ks, kl, vs, vl = sp["key_start"], sp["key_len"], sp["val_start"], sp["val_len"]
        ctype = np.full(ks.shape[0], -1, np.int64)
        has = is_control & (kl >= 4)
        if has.any():
            kp = ks[has]
            ctype[has] = (buf[kp + 2].astype(np.int64) << 8) | buf[kp + 3].astype(np.int64)
        cols = parse_offset_commits(buf, ks, kl, vs, vl)
        cols["kind"][is_control] = -1
        cols["is_txn"] = (attrs & 0x10) != 0
        cols["is_marker"] = is_control & ((ctype == ControlRecordType.COMMIT) | (ctype == ControlRecordType.ABORT))
        cols["marker_commit"] = ctype == ControlRecordType.COMMIT
        cols["producer_id"] = b["producer_id"][bi]
        cols["record_offset"] = b["base_offset"][bi] + sp["offset_delta"]
        cols["key_start"], cols["val_start"], cols["val_len"] = ks, vs, vl
        other = []
        for i in np.nonzero((cols["kind"] == KIND_OTHER) | (cols["kind"] == KIND_BAD))[0].tolist():
            key = None if kl[i] < 0 else bytes(buf[ks[i]:ks[i] + kl[i]])
            val = None if vl[i] < 0 else bytes(buf[vs[i]:vs[i] + vl[i]])
            other.append((i, key, val, int(cols["record_offset"][i])))
        del buf
    return _SegmentRecords(f, cols, other)


def consumer_groups(logdir: str | os.PathLike[str], group: str | None = None) -> ConsumersReport:
    """Committed offsets and lag per group / partition from the ``__consumer_offsets-N`` partition
    directories of ``logdir`` alone.

    Replays each partition in log order: an offset commit sets (group, topic, partition), a
    tombstone removes it; transactional commits count only once their COMMIT marker follows (an
    ABORT drops them); the latest GroupMetadata / ConsumerGroupMetadata record gives the group's
    protocol, generation or epoch, and members.  The lag uses the log end offset of the
    ``topic-partition`` directory when it is in ``logdir`` (else it is unknown).

    The offset commits (nearly all records) never become Python objects one by one: compiled
    kernels (:mod:`mqstore.kernels.kafka.offsets`) give their fields as columns, numpy keeps the
    last one per key, and only the survivors are turned into :class:`CommittedOffset`.
    """
    from mqstore.kernels.kafka.offsets import KIND_COMMIT, KIND_TOMBSTONE, transaction_fate
    from mqstore.storage.kafka.log import PartitionLog

    root = Path(logdir)
    if not root.is_dir():
        raise StoreNotFoundError("log directory not found", path=str(root))
    parts = list(_partition_dirs(root))
    offsets_dirs = [d for t, _p, d in parts if t == OFFSETS_TOPIC]
    if not offsets_dirs:
        raise StoreNotFoundError(f"no {OFFSETS_TOPIC}-N partition directory in the log directory", path=str(root))
    report = ConsumersReport(groups={}, offsets_partitions=[d.name for d in offsets_dirs])
    groups = report.groups
    members: dict[str, set[str]] = {}
    survivors: list[tuple[_SegmentRecords, np.ndarray]] = []
    for d in sorted(offsets_dirs, key=lambda x: int(x.name.rpartition("-")[2])):
        logs = sorted((f for f in d.iterdir() if f.suffix == ".log" and f.name.split(".", 1)[0].isdigit()),
                      key=lambda f: int(f.name.split(".", 1)[0]))
        segs = [_scan_segment(f, report) for f in logs]
        if not segs:
            continue
        cat = {k: np.concatenate([s.cols[k] for s in segs]) for k in ("kind", "h1", "h2", "producer_id", "is_txn",
                                                                      "is_marker", "marker_commit")}
        seg_of = np.concatenate([np.full(s.cols["kind"].shape[0], j, np.int64) for j, s in enumerate(segs)])
        first = np.cumsum([0] + [s.cols["kind"].shape[0] for s in segs])
        report.records += int(np.count_nonzero(cat["kind"] >= 0))
        fate = transaction_fate(cat["producer_id"], cat["is_txn"], cat["is_marker"], cat["marker_commit"])
        eff = np.nonzero(fate & ((cat["kind"] == KIND_COMMIT) | (cat["kind"] == KIND_TOMBSTONE)))[0]
        if eff.shape[0]:
            rev = eff[::-1]
            keys = np.empty(rev.shape[0], dtype=[("h1", np.uint64), ("h2", np.uint64)])
            keys["h1"], keys["h2"] = cat["h1"][rev], cat["h2"][rev]
            _u, idx = np.unique(keys, return_index=True)
            last = rev[idx]
            last = last[cat["kind"][last] == KIND_COMMIT]
            for j, s in enumerate(segs):
                mine = last[seg_of[last] == j] - first[j]
                if mine.shape[0]:
                    survivors.append((s, np.sort(mine)))
        for j, s in enumerate(segs):
            for i, key, val, off in s.other:
                if not fate[first[j] + i]:
                    continue
                try:
                    dec = decode_coordinator_record("offsets", key, val)
                except CorruptDataError as exc:
                    report.decode_errors += 1
                    if len(report.problems) < 20:
                        report.problems.append(f"{d.name} offset {off}: {exc.message}")
                    continue
                if dec.get("unknown") or dec["type"] == "OffsetCommit":
                    report.decode_errors += 1
                    if len(report.problems) < 20:
                        report.problems.append(f"{d.name} offset {off}: {dec['type']} record with key "
                                               f"version {dec['keyVersion']} / value version "
                                               f"{dec.get('valueVersion')} not decoded")
                    continue
                _apply_group_record(dec, group, groups, members)
    commits = _materialize(survivors, group)
    for name, ms in members.items():
        if name in groups:
            groups[name].members = len(ms)
    ends: dict[tuple[str, int], int] = {}
    wanted = {(c.topic, c.partition) for c in commits}
    for t, p, d in parts:
        if (t, p) in wanted:
            log = PartitionLog.open(d, read_only=True)
            try:
                ends[(t, p)] = log.log_end_offset
            finally:
                log.close()
    for c in sorted(commits, key=lambda c: (c.group, c.topic, c.partition)):
        c.log_end_offset = ends.get((c.topic, c.partition))
        if c.group not in groups:
            groups[c.group] = GroupInfo(c.group)
        groups[c.group].offsets.append(c)
    for g in groups.values():
        g.state = "Stable" if g.members else "Empty"
    return report


def _materialize(survivors: list[tuple[_SegmentRecords, np.ndarray]], group: str | None) -> list[CommittedOffset]:
    """CommittedOffset objects for the last commit of each key (pass 2: only these records)."""
    out: list[CommittedOffset] = []
    want = None if group is None else group.encode("utf-8")
    for s, rows in survivors:
        c = s.cols
        with MappedLog(s.path) as ml:
            buf, _b = _segment_buffer(s.path, ml.mm, None)
            for i in rows.tolist():
                g = bytes(buf[c["group_start"][i]:c["group_start"][i] + c["group_len"][i]])
                if want is not None and g != want:
                    continue
                t = bytes(buf[c["topic_start"][i]:c["topic_start"][i] + c["topic_len"][i]])
                m = bytes(buf[c["meta_start"][i]:c["meta_start"][i] + c["meta_len"][i]])
                out.append(CommittedOffset(
                    g.decode("utf-8", "replace"), t.decode("utf-8", "replace"), int(c["partition"][i]),
                    int(c["offset"][i]), int(c["leader_epoch"][i]), m.decode("utf-8", "replace"),
                    int(c["commit_timestamp"][i]), source=f"{s.path.parent.name}@{int(c['record_offset'][i])}"))
            del buf
    return out


def _apply_group_record(dec: dict[str, Any], group: str | None, groups: dict[str, GroupInfo],
                        members: dict[str, set[str]]) -> None:
    t = dec["type"]
    key = dec["key"]
    name = key.get("group", key.get("groupId"))
    if name is None or (group is not None and name != group):
        return
    v = dec.get("value")
    if t == "GroupMetadata":
        if v is None:
            groups.pop(name, None)
            return
        g = groups.setdefault(name, GroupInfo(name))
        g.kind = "classic"
        g.protocol_type = v["protocolType"]
        g.protocol = v["protocol"]
        g.generation = v["generation"]
        g.leader = v["leader"]
        g.members = len(v["members"])
    elif t in ("ConsumerGroupMetadata", "ShareGroupMetadata"):
        if v is None:
            groups.pop(name, None)
            members.pop(name, None)
            return
        g = groups.setdefault(name, GroupInfo(name))
        g.kind = "consumer" if t == "ConsumerGroupMetadata" else "share"
        g.protocol_type = g.kind
        g.generation = v["epoch"]
    elif t in ("ConsumerGroupMemberMetadata", "ShareGroupMemberMetadata"):
        ms = members.setdefault(name, set())
        if v is None:
            ms.discard(key["memberId"])
        else:
            ms.add(key["memberId"])
