"""A Kafka log directory as a whole (one entry of the broker's ``log.dirs``): walk, read, verify.

Read-only: nothing here writes, renames or deletes a file.  What Kafka does with each kind of file
when it loads the directory, and what mqstore does, is listed in docs/kafka.md ("Log
directories").  Every file and directory found gets a kind; a name that matches no known kind is
reported as ``unknown`` (a verify note), never skipped.

The partition-directory and partition-file name rules (:func:`parse_partition_dir_name`,
:func:`classify_partition_file`) live in :mod:`mqstore.storage.kafka.layout`.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from dataclasses import dataclass, field
from itertools import pairwise
from pathlib import Path
from typing import Any

import numpy as np

from mqstore.errors import (
    CorruptDataError,
    CorruptIndexError,
    InvalidArgumentError,
    MqStoreError,
    StoreError,
    StoreNotFoundError,
)
from mqstore.formats.kafka.logdir_files import (
    CleanShutdown,
    LeaderEpochCheckpoint,
    MetaProperties,
    OffsetCheckpoint,
    PartitionMetadata,
    is_kafka_uuid,
    parse_clean_shutdown,
    parse_leader_epoch_checkpoint,
    parse_meta_properties,
    parse_offset_checkpoint,
    parse_partition_metadata,
)
from mqstore.storage.kafka.index import OffsetIndex, TimeIndex
from mqstore.storage.kafka.layout import (  # the partition name rules live in layout (re-exported here)
    CLEAN_SHUTDOWN,
    LEADER_EPOCH_CHECKPOINT,
    LOG_DIR_FILE_KINDS,
    META_PROPERTIES,
    OFFSET_CHECKPOINT_FILES,
    PARTITION_METADATA,
    REMOTE_INDEX_CACHE,
    REMOTE_INDEX_NAME,
    FileKind,
    PartitionDirName,
    classify_log_dir_entry,
    classify_partition_file,
    parse_partition_dir_name,
)

TXN_ENTRY_SIZE = 34


# ---------------------------------------------------------------------------------------- layout
@dataclass
class PartitionInfo:
    path: str
    name: PartitionDirName
    files: dict[str, str] = field(default_factory=dict)  # file name -> kind
    logs: list[str] = field(default_factory=list)  # .log paths in base-offset order

    @property
    def label(self) -> str:
        return Path(self.path).name


@dataclass
class LogDirLayout:
    path: str
    entries: dict[str, str] = field(default_factory=dict)  # top-level name -> kind
    partitions: list[PartitionInfo] = field(default_factory=list)
    remote_cache: dict[str, str] = field(default_factory=dict)  # file name -> kind


def scan_partition_dir(path: Path, name: PartitionDirName) -> PartitionInfo:
    info = PartitionInfo(str(path), name)
    logs: list[tuple[int, str]] = []
    for f in sorted(path.iterdir()):
        k = classify_partition_file(f.name) if f.is_file() else FileKind("unknown")
        info.files[f.name] = k.kind
        if k.kind == "log" and k.base_offset is not None:
            logs.append((k.base_offset, str(f)))
    info.logs = [p for _, p in sorted(logs)]
    return info


def scan_log_dir(path: str | os.PathLike[str]) -> LogDirLayout:
    """Every entry of a log directory with its kind, partitions parsed (no file is read)."""
    p = Path(path)
    if not p.is_dir():
        raise StoreNotFoundError("log directory not found", path=str(p))
    layout = LogDirLayout(str(p))
    for f in sorted(p.iterdir()):
        is_dir = f.is_dir() and not f.is_symlink()
        kind = classify_log_dir_entry(f.name, is_dir)
        layout.entries[f.name] = kind
        if kind == "partition_dir":
            name = parse_partition_dir_name(f.name)
            assert name is not None
            layout.partitions.append(scan_partition_dir(f, name))
        elif kind == "remote_index_cache":
            for g in sorted(f.iterdir()):
                m = REMOTE_INDEX_NAME.match(g.name) if g.is_file() else None
                if m is None:
                    layout.remote_cache[g.name] = "unknown"
                elif m.group(4):
                    layout.remote_cache[g.name] = "remote_" + m.group(4)[1:]  # remote_deleted / remote_tmp
                else:
                    layout.remote_cache[g.name] = "remote_" + m.group(3)
    return layout


# ---------------------------------------------------------------------------------------- files
@dataclass
class LogDirFiles:
    """The parsed log-directory files; ``errors[file name]`` holds why one could not be read."""

    checkpoints: dict[str, OffsetCheckpoint] = field(default_factory=dict)  # file name -> content
    meta: MetaProperties | None = None
    clean_shutdown: CleanShutdown | None = None
    errors: dict[str, str] = field(default_factory=dict)


def _read_small(path: Path, limit: int = 64 << 20) -> bytes:
    size = path.stat().st_size
    if size > limit:
        raise CorruptDataError(f"{size} bytes: too large for this kind of file", path=str(path))
    return path.read_bytes()


def read_log_dir_files(layout: LogDirLayout) -> LogDirFiles:
    out = LogDirFiles()
    d = Path(layout.path)
    for name, kind in layout.entries.items():
        p = d / name
        try:
            if kind in ("recovery_point_checkpoint", "log_start_offset_checkpoint", "replication_offset_checkpoint",
                        "cleaner_offset_checkpoint"):
                out.checkpoints[name] = parse_offset_checkpoint(_read_small(p), path=str(p))
            elif kind == "meta_properties":
                out.meta = parse_meta_properties(_read_small(p), path=str(p))
            elif kind == "clean_shutdown":
                out.clean_shutdown = parse_clean_shutdown(_read_small(p), path=str(p))
        except MqStoreError as exc:
            out.errors[name] = exc.message
        except OSError as exc:
            out.errors[name] = f"cannot read: {exc.strerror or exc}"
    return out


def read_log_dir_file(path: str | os.PathLike[str]) -> dict[str, Any]:
    """One log-directory or partition text file parsed, as a JSON-able dict (``dump FILE``).
    Garbage raises :class:`CorruptDataError`; a name that is none of these files raises
    :class:`InvalidArgumentError`."""
    p = Path(path)
    if not p.is_file():
        raise StoreNotFoundError("file not found", path=str(p))
    data = _read_small(p)
    name = p.name
    if name in OFFSET_CHECKPOINT_FILES:
        c = parse_offset_checkpoint(data, path=str(p))
        return {"type": "offset_checkpoint", "file": name, "version": c.version,
                "entries": [{"topic": t, "partition": n, "offset": o} for (t, n), o in c.offsets.items()]}
    if name == LEADER_EPOCH_CHECKPOINT:
        e = parse_leader_epoch_checkpoint(data, path=str(p))
        return {"type": "leader_epoch_checkpoint", "version": e.version,
                "entries": [{"epoch": x.epoch, "start_offset": x.start_offset} for x in e.entries]}
    if name == META_PROPERTIES:
        m = parse_meta_properties(data, path=str(p))
        return {"type": "meta_properties", "version": m.version, "node_id": m.node_id, "cluster_id": m.cluster_id,
                "directory_id": m.directory_id, "other": m.other}
    if name == PARTITION_METADATA:
        pm = parse_partition_metadata(data, path=str(p))
        return {"type": "partition_metadata", "version": pm.version, "topic_id": pm.topic_id}
    if name == CLEAN_SHUTDOWN:
        cs = parse_clean_shutdown(data, path=str(p))
        return {"type": "clean_shutdown", "version": cs.version, "broker_epoch": cs.broker_epoch}
    raise InvalidArgumentError("not a Kafka log-directory file this command reads", path=str(p))


# ---------------------------------------------------------------------------------------- summary
@dataclass
class PartitionSummary:
    partition: str  # directory name
    topic: str
    number: int
    state: str
    segments: int
    bytes: int
    first_offset: int | None  # base offset of the first local segment
    log_end_offset: int | None
    recovery_point: int | None = None
    log_start_offset: int | None = None
    high_watermark: int | None = None
    cleaner_offset: int | None = None
    leader_epoch: int | None = None
    topic_id: str | None = None
    files: dict[str, int] = field(default_factory=dict)  # kind -> count
    unknown: list[str] = field(default_factory=list)
    errors: dict[str, str] = field(default_factory=dict)


def _log_end_offset(logs: list[str]) -> int | None:
    from mqstore.storage.kafka.segment import LogSegment

    if not logs:
        return None
    seg = LogSegment.open(logs[-1])  # the active segment (an empty one ends where it starts)
    try:
        return seg.read_next_offset()
    finally:
        seg.close()


def _partition_files(info: PartitionInfo) -> tuple[LeaderEpochCheckpoint | None, PartitionMetadata | None,
                                                     dict[str, str]]:
    errors: dict[str, str] = {}
    epochs = meta = None
    d = Path(info.path)
    if LEADER_EPOCH_CHECKPOINT in info.files:
        p = d / LEADER_EPOCH_CHECKPOINT
        try:
            epochs = parse_leader_epoch_checkpoint(_read_small(p), path=str(p))
        except MqStoreError as exc:
            errors[LEADER_EPOCH_CHECKPOINT] = exc.message
    if PARTITION_METADATA in info.files:
        p = d / PARTITION_METADATA
        try:
            meta = parse_partition_metadata(_read_small(p), path=str(p))
        except MqStoreError as exc:
            errors[PARTITION_METADATA] = exc.message
    return epochs, meta, errors


def summarize_partition(info: PartitionInfo, files: LogDirFiles) -> PartitionSummary:
    n = info.name
    s = PartitionSummary(info.label, n.topic, n.partition, n.state, len(info.logs),
                         sum(os.stat(p).st_size for p in info.logs),
                         int(Path(info.logs[0]).name.split(".", 1)[0]) if info.logs else None, None)
    try:
        s.log_end_offset = _log_end_offset(info.logs)
    except MqStoreError as exc:
        s.errors["log"] = exc.message
    key = (n.topic, n.partition)
    if n.state == "live":  # the checkpoints name live partitions only
        for fname, attr in (("recovery-point-offset-checkpoint", "recovery_point"),
                            ("log-start-offset-checkpoint", "log_start_offset"),
                            ("replication-offset-checkpoint", "high_watermark"),
                            ("cleaner-offset-checkpoint", "cleaner_offset")):
            c = files.checkpoints.get(fname)
            if c is not None and key in c.offsets:
                setattr(s, attr, c.offsets[key])
    epochs, meta, errors = _partition_files(info)
    s.errors.update(errors)
    if epochs is not None and epochs.entries:
        s.leader_epoch = epochs.entries[-1].epoch
    if meta is not None:
        s.topic_id = meta.topic_id
    for name, kind in info.files.items():
        s.files[kind] = s.files.get(kind, 0) + 1
        if kind == "unknown":
            s.unknown.append(name)
    return s


# ---------------------------------------------------------------------------------------- verify
@dataclass
class PartitionVerify:
    partition: str
    state: str
    segments: int = 0
    batches: int = 0
    bytes: int = 0
    problems: list[Any] = field(default_factory=list)  # VerifyProblem
    notes: list[Any] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return not self.problems


def _verify_partition_job(args: tuple[dict[str, Any], bool]) -> PartitionVerify:
    """Worker: verify one partition directory (segments, indexes, its own text files)."""
    from mqstore.storage.kafka.tools import VerifyReport, verify_path

    raw, strict = args
    info = PartitionInfo(raw["path"], PartitionDirName(**raw["name"]), raw["files"], raw["logs"])
    out = PartitionVerify(info.label, info.name.state)
    rep = VerifyReport()
    if info.logs:
        try:
            rep = verify_path(info.path, strict=strict)
        except MqStoreError as exc:
            rep.add("unreadable", info.path, None, exc.message)
    else:
        rep.note("no_segments", info.path, None, "partition directory without a .log segment "
                 "(Kafka creates an empty segment at the log start offset)")
    epochs, _meta, errors = _partition_files(info)
    for fname, msg in errors.items():
        rep.add("bad_" + fname.replace("-", "_").replace(".", "_"), Path(info.path) / fname, None, msg)
    if epochs is not None:
        e = epochs.entries
        for a, b in pairwise(e):
            if b.epoch <= a.epoch or b.start_offset < a.start_offset:
                rep.add("leader_epoch_order", Path(info.path) / LEADER_EPOCH_CHECKPOINT, None,
                        f"entry ({b.epoch}, {b.start_offset}) does not follow ({a.epoch}, {a.start_offset})")
    from mqstore.storage.kafka.internal import verify_kraft_files

    verify_kraft_files(info.path, rep)  # KRaft snapshots and quorum-state of __cluster_metadata-0
    if not info.logs:  # (verify_path lists these itself when there are segments)
        from mqstore.storage.kafka.tools import _note_other_files

        _note_other_files(Path(info.path), rep)
    out.segments, out.batches, out.bytes = rep.segments, rep.batches, rep.bytes
    out.problems, out.notes = rep.problems, rep.notes
    return out


def _job_args(info: PartitionInfo, strict: bool) -> tuple[dict[str, Any], bool]:
    n = info.name
    return ({"path": info.path, "files": info.files, "logs": info.logs,
             "name": {"topic": n.topic, "partition": n.partition, "state": n.state, "unique_id": n.unique_id}},
            strict)


@dataclass
class LogDirVerify:
    path: str
    partitions: list[PartitionVerify] = field(default_factory=list)
    problems: list[Any] = field(default_factory=list)  # log-directory level
    notes: list[Any] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return not self.problems and all(p.ok for p in self.partitions)


def _verify_remote_cache(d: Path, kinds: dict[str, str], rep: Any) -> None:
    """Each ``<startOffset>_<segmentId>`` triple: Kafka's sanity checks of both indexes, entries in
    order, a whole number of 34-byte transaction entries; an incomplete triple is what Kafka deletes
    at startup (a note), as are ``.deleted``/``.tmp`` files."""
    groups: dict[str, set[str]] = {}
    for name, kind in kinds.items():
        p = d / name
        if kind == "unknown":
            rep.note("unknown_file", p, None, "not a remote index cache file")
            continue
        if kind in ("remote_deleted", "remote_tmp"):
            rep.note(kind, p, None, "left by the broker; Kafka deletes it when the cache starts")
            continue
        stem, ext = name.split(".", 1)
        groups.setdefault(stem, set()).add(ext)
    for stem, exts in sorted(groups.items()):
        missing = {"index", "timeindex", "txnindex"} - exts
        if missing:
            rep.note("remote_incomplete", d / stem, None,
                     f"missing {', '.join(sorted('.' + x for x in missing))} (Kafka deletes the others at startup)")
        base = int(stem.split("_", 1)[0])
        if not is_kafka_uuid(stem.split("_", 1)[1]):
            rep.add("remote_name", d / stem, None, "remote segment id is not a Kafka Uuid")
        for ext, cls in (("index", OffsetIndex), ("timeindex", TimeIndex)):
            if ext not in exts:
                continue
            p = d / f"{stem}.{ext}"
            idx = cls(p, base, -1, writable=False)
            try:
                try:
                    idx.sanity_check()
                except CorruptIndexError as exc:
                    rep.add("remote_index_sanity", p, None, exc.message)
                keys, vals = idx.column_array(False), idx.column_array(True)
                # offsets (.index) / timestamps (.timeindex) strictly increase, the values never go back
                bad = np.nonzero((keys[1:] <= keys[:-1]) | (vals[1:] < vals[:-1]))[0]
                for i in bad[:20]:
                    rep.add("remote_index_order", p, (int(i) + 1) * idx.ENTRY_SIZE,
                            f"entry {int(i) + 1} ({int(keys[i + 1])}, {int(vals[i + 1])}) is not after "
                            f"({int(keys[i])}, {int(vals[i])})")
                rep.offset_index_entries += idx.entries if ext == "index" else 0
                rep.time_index_entries += idx.entries if ext == "timeindex" else 0
            finally:
                idx.close()
        if "txnindex" in exts:
            p = d / f"{stem}.txnindex"
            size = p.stat().st_size
            if size % TXN_ENTRY_SIZE:
                rep.add("remote_txnindex_size", p, size - size % TXN_ENTRY_SIZE,
                        f"{size} bytes is not a whole number of {TXN_ENTRY_SIZE}-byte entries")


PARALLEL_MIN_BYTES = 256 << 20


def verify_log_dir(path: str | os.PathLike[str], *, strict: bool = False, workers: int | None = None,
                   parallel_min_bytes: int = PARALLEL_MIN_BYTES,
                   on_partition: Callable[[PartitionVerify], None] | None = None) -> LogDirVerify:
    """Verify every partition and the log directory's own files.

    Partitions are verified in parallel over the CPUs (a process pool of ``workers``, default the
    CPU count; ``forkserver`` workers) when their ``.log`` files hold at least
    ``parallel_min_bytes`` together — below that, starting the workers costs more than it saves.
    Partitions scheduled for deletion (``-delete``) are listed, not verified.  Results come back in
    partition-name order whatever the pool's timing."""
    from mqstore.storage.kafka.tools import VerifyReport

    layout = scan_log_dir(path)
    d = Path(layout.path)
    result = LogDirVerify(layout.path)
    top = VerifyReport()
    files = read_log_dir_files(layout)
    for name, msg in files.errors.items():
        top.add("bad_" + name.lstrip(".").replace("-", "_").replace(".", "_"), d / name, None, msg)
    for name, kind in layout.entries.items():
        if kind == "unknown":
            top.note("unknown_file", d / name, None, "not a Kafka log-directory entry (Kafka ignores it)")
        elif kind == "checkpoint_tmp":
            top.note("checkpoint_tmp", d / name, None, LOG_DIR_FILE_KINDS[kind])
    if "meta_properties" not in layout.entries.values():
        top.note("no_meta_properties", d / META_PROPERTIES, None,
                 "no meta.properties (a broker refuses to start on this directory until it is formatted)")
    if layout.remote_cache or REMOTE_INDEX_CACHE in layout.entries:
        _verify_remote_cache(d / REMOTE_INDEX_CACHE, layout.remote_cache, top)
    _checkpoint_notes(layout, files, top)
    if (d / "bootstrap.checkpoint").is_file():
        from mqstore.storage.kafka.internal import verify_snapshot

        verify_snapshot(d / "bootstrap.checkpoint", top)
    todo = [p for p in layout.partitions if p.name.state != "delete"]
    for p in layout.partitions:
        if p.name.state == "delete":
            top.note("partition_deleted", p.path, None,
                     "scheduled for deletion (Kafka loads it only to delete it): not verified")
    n_workers = max(1, min(workers or os.cpu_count() or 1, len(todo)))
    if sum(os.stat(f).st_size for p in todo for f in p.logs) < parallel_min_bytes:
        n_workers = 1
    jobs = [_job_args(p, strict) for p in todo]
    if n_workers == 1:
        results = map(_verify_partition_job, jobs)
        for r in results:
            result.partitions.append(r)
            if on_partition is not None:
                on_partition(r)
    else:
        import multiprocessing  # (imported here: a one-shot command on one partition never needs it)
        from concurrent.futures import ProcessPoolExecutor
        from concurrent.futures.process import BrokenProcessPool

        ctx = multiprocessing.get_context("forkserver")
        try:
            with ProcessPoolExecutor(max_workers=n_workers, mp_context=ctx) as pool:
                for r in pool.map(_verify_partition_job, jobs):
                    result.partitions.append(r)
                    if on_partition is not None:
                        on_partition(r)
        except BrokenProcessPool as exc:  # a worker killed (OOM killer, signal): say so, no traceback
            raise StoreError(f"a verify worker process died ({exc}); retry with workers=1",
                             path=layout.path) from None
    result.problems, result.notes = top.problems, top.notes
    return result


def _checkpoint_notes(layout: LogDirLayout, files: LogDirFiles, rep: Any) -> None:
    """Checkpoints against the partitions present: facts an operator wants, never failures
    (Kafka tolerates each of them on load)."""
    d = Path(layout.path)
    live = {(p.name.topic, p.name.partition): p for p in layout.partitions if p.name.state == "live"}
    leo: dict[tuple[str, int], int | None] = {}

    def end(key: tuple[str, int]) -> int | None:
        if key not in leo:
            try:
                leo[key] = _log_end_offset(live[key].logs)
            except MqStoreError:
                leo[key] = None
        return leo[key]

    for fname, c in files.checkpoints.items():
        for key, off in c.offsets.items():
            if key not in live:
                rep.note("checkpoint_unknown_partition", d / fname, None,
                         f"{key[0]}-{key[1]} {off}: no such partition directory here (Kafka ignores the entry)")
                continue
            p = live[key]
            first = int(Path(p.logs[0]).name.split(".", 1)[0]) if p.logs else None
            e = end(key)
            if fname == "log-start-offset-checkpoint" and first is not None and off < first:
                rep.note("log_start_below_local", d / fname, None,
                         f"{p.label}: log start offset {off} is below the first local segment {first} (the "
                         f"older data is in remote storage when tiered storage is on; otherwise Kafka uses {first})")
            if e is not None and off > e and fname != "cleaner-offset-checkpoint":
                rep.note("checkpoint_beyond_log_end", d / fname, None,
                         f"{p.label}: {off} is beyond the log end offset {e} (Kafka uses the log end offset)")
