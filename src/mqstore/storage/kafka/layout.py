"""The layout of Kafka log directories: the one home of segment file naming and listing, used by
the partition log, the tools, the CLI and the Spark layer.

::

    <log dir>/<topic>-<partition>/<20-digit base offset>.log       record batches
                                  <20-digit base offset>.index     offset index
                                  <20-digit base offset>.timeindex time index
                                  <20-digit base offset>.txnindex  aborted transactions
                                  <20-digit base offset>.keyindex  mqstore's key index (optional sidecar)

A segment is named by the offset of its first record.  A directory not named
``<topic>-<partition>`` is partition 0 of a topic named after the directory.
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass
from pathlib import Path

from mqstore.errors import InvalidArgumentError, StoreNotFoundError
from mqstore.storage.layout import is_offset_name, offset_files, offset_name

LOG_SUFFIX = ".log"
INDEX_SUFFIX = ".index"
TIMEINDEX_SUFFIX = ".timeindex"
TXNINDEX_SUFFIX = ".txnindex"
INDEX_SUFFIXES = (INDEX_SUFFIX, TIMEINDEX_SUFFIX, TXNINDEX_SUFFIX)
#: mqstore's key index (docs/formats/kafka-keyindex.md): a sidecar a broker ignores
KEYINDEX_SUFFIX = ".keyindex"
#: the files that belong to a segment and go with it (deleted, truncated, orphans removed)
SEGMENT_SUFFIXES = (LOG_SUFFIX, *INDEX_SUFFIXES, KEYINDEX_SUFFIX)
#: the files a segment's indexes are (orphans are deleted on a writable open)
ALL_INDEX_SUFFIXES = (*INDEX_SUFFIXES, KEYINDEX_SUFFIX)
#: the files of a segment the tools dump, in the order they list them
DUMP_SUFFIXES = (LOG_SUFFIX, INDEX_SUFFIX, TIMEINDEX_SUFFIX)
CLEAN_SHUTDOWN = ".kafka_cleanshutdown"
LEADER_EPOCH_CHECKPOINT = "leader-epoch-checkpoint"
PARTITION_METADATA = "partition.metadata"
_SEGMENT_FILE = re.compile(r"^(\d{20})\.(log|index|timeindex|txnindex|keyindex|snapshot)(\.(deleted|cleaned|swap))?$")
#: a KRaft metadata snapshot: ``<end offset>-<epoch>.checkpoint`` (``.part`` while written, ``.deleted``)
SNAPSHOT_NAME = re.compile(r"^(?P<offset>\d{20})-(?P<epoch>\d{10})\.checkpoint(?P<state>\.part|\.deleted)?$")
BOOTSTRAP_CHECKPOINT = "bootstrap.checkpoint"
QUORUM_STATE = "quorum-state"
#: the KRaft metadata topic (its partition directory is ``__cluster_metadata-0``)
METADATA_TOPIC = "__cluster_metadata"
REMOTE_INDEX_NAME = re.compile(r"^(\d+)_([A-Za-z0-9_-]{22})\.(index|timeindex|txnindex)(\.deleted|\.tmp)?$")
_SPECIAL_DIR = re.compile(r"^(\S+)-(\S+)\.(\S+)-(delete|future|stray)$")

PARTITION_FILE_KINDS = {
    "log": "segment data (record batches)",
    "index": "offset index",
    "timeindex": "time index",
    "txnindex": "aborted-transaction index",
    "snapshot": "producer-state snapshot",
    "keyindex": "mqstore key index (sidecar; Kafka ignores it)",
    "deleted": "segment file scheduled for deletion (Kafka deletes it on load)",
    "cleaned": "log-cleaner output not yet swapped in (Kafka deletes it on load)",
    "swap": "segment file being swapped in (Kafka completes or drops the swap on load)",
    "leader_epoch_checkpoint": "leader epoch cache",
    "partition_metadata": "topic id",
    "checkpoint_tmp": "temporary of an interrupted checkpoint write (ignored, overwritten by Kafka)",
    "kraft_snapshot": "KRaft metadata snapshot",
    "kraft_snapshot_partial": "KRaft snapshot being written (.checkpoint.part, Kafka deletes it)",
    "kraft_snapshot_deleted": "KRaft snapshot scheduled for deletion",
    "quorum_state": "KRaft quorum state",
    "mqstore_recovery_point": "mqstore's per-partition recovery point (PartitionLog)",
    "mqstore_clean_shutdown": "mqstore's per-partition clean-shutdown marker (PartitionLog)",
    "unknown": "not a Kafka file",
}



def segment_file_name(base_offset: int, suffix: str) -> str:
    """``00000000000000000042.log`` for base offset 42 and suffix ``.log``."""
    if base_offset < 0:
        raise InvalidArgumentError(f"negative base offset {base_offset}")
    return offset_name(base_offset, suffix)


def split_segment_name(name: str) -> tuple[int, str] | None:
    """``(base offset, suffix)`` of a segment file name (suffix from the first dot), or ``None``
    when the name is not one."""
    stem, dot, rest = name.partition(".")
    if not dot or not is_offset_name(stem):
        return None
    return int(stem), dot + rest


def parse_base_offset(path: str | os.PathLike[str]) -> int:
    """The base offset encoded in a segment file name (text before the first ``.``)."""
    name = Path(path).name
    parts = split_segment_name(name)
    if parts is None:
        raise InvalidArgumentError(f"not a Kafka segment file name (expected 20 digits): {name}", path=str(path))
    return parts[0]


def is_segment_file(path: Path, suffixes: tuple[str, ...] = SEGMENT_SUFFIXES) -> bool:
    parts = split_segment_name(path.name)
    return parts is not None and parts[1] in suffixes


def log_files(directory: str | os.PathLike[str]) -> list[Path]:
    """The ``.log`` segment files of a partition directory, by base offset."""
    return offset_files(directory, LOG_SUFFIX)


def segment_files(directory: str | os.PathLike[str], suffixes: tuple[str, ...] = SEGMENT_SUFFIXES) -> list[Path]:
    """The segment files of a partition directory with one of ``suffixes``, by base offset and
    then in the order of ``suffixes``."""
    d = Path(directory)
    if not d.is_dir():
        return []
    found = []
    for p in d.iterdir():
        parts = split_segment_name(p.name)
        if parts is not None and parts[1] in suffixes and p.is_file():
            found.append((parts[0], suffixes.index(parts[1]), p))
    found.sort()
    return [p for _, _, p in found]


def keyindex_path(log_path: str | os.PathLike[str]) -> Path:
    """The ``.keyindex`` sidecar of a segment's ``.log``."""
    return Path(log_path).with_suffix(KEYINDEX_SUFFIX)


def log_of(path: str | os.PathLike[str]) -> Path:
    """The ``.log`` of a segment given by any of its files (``.log``, ``.index``, ``.timeindex``)."""
    p = Path(path)
    if p.suffix in (INDEX_SUFFIX, TIMEINDEX_SUFFIX):
        return p.with_suffix(LOG_SUFFIX)
    if p.suffix != LOG_SUFFIX:
        raise InvalidArgumentError("expected a partition directory or a .log/.index/.timeindex file", path=str(p))
    return p


def segment_logs(path: str | os.PathLike[str]) -> list[Path]:
    """The ``.log`` files a path names: every segment of a partition directory
    (:class:`StoreNotFoundError` when it has none), or the one segment of a ``.log``, ``.index``
    or ``.timeindex`` file."""
    p = Path(path)
    if not p.exists():
        raise StoreNotFoundError("path not found", path=str(p))
    if p.is_dir():
        logs = log_files(p)
        if not logs:
            raise StoreNotFoundError("no .log segment files in directory", path=str(p))
        return logs
    return [log_of(p)]


def has_segments(directory: str | os.PathLike[str]) -> bool:
    """Whether a directory holds ``.log`` segments (an unreadable one does not)."""
    try:
        return bool(log_files(directory))
    except OSError:
        return False


def topic_partition_of(directory: str | os.PathLike[str]) -> tuple[str, int]:
    """``orders-3`` → ``("orders", 3)``; any other name (also a ``-delete``/``-future``/``-stray``
    one) is partition 0 of a topic of that name (mqstore's rule for a lone partition directory)."""
    name = Path(directory).name
    p = parse_partition_dir_name(name)
    if p is not None and p.state == "live":
        return p.topic, p.partition
    return name, 0


def is_partition_dir_name(name: str) -> bool:
    """Whether ``name`` is a live partition directory name (``<topic>-<partition>``)."""
    p = parse_partition_dir_name(name)
    return p is not None and p.state == "live"


@dataclass(frozen=True)
class PartitionDirName:
    topic: str
    partition: int
    state: str  # "live" | "delete" | "future" | "stray"
    unique_id: str | None = None


def parse_partition_dir_name(name: str) -> PartitionDirName | None:
    """``<topic>-<partition>`` or ``<topic>-<partition>.<uniqueId>-delete|-future|-stray``
    (Kafka's ``UnifiedLog.parseTopicPartitionName``); ``None`` for any other name."""
    m = _SPECIAL_DIR.match(name)
    if m:
        topic, part, uid, state = m.groups()
        if not part.isdigit():
            return None
        return PartitionDirName(topic, int(part), state, uid)
    topic, sep, part = name.rpartition("-")
    if not sep or not topic or not part.isdigit() or "." in part:
        return None
    return PartitionDirName(topic, int(part), "live")


@dataclass(frozen=True)
class FileKind:
    kind: str
    base_offset: int | None = None
    suffix: str | None = None  # the segment suffix (".log", ...) of segment files and their temporaries


def classify_partition_file(name: str) -> FileKind:
    """Kind of one file inside a partition directory (the single segment-file name parser)."""
    m = _SEGMENT_FILE.match(name)
    if m:
        base, suffix, _, temp = m.groups()
        return FileKind(temp or suffix, int(base), "." + suffix)
    m = SNAPSHOT_NAME.match(name)
    if m:
        extra = m.group("state")
        kind = {None: "kraft_snapshot", ".part": "kraft_snapshot_partial", ".deleted": "kraft_snapshot_deleted"}[extra]
        return FileKind(kind, int(m.group(1)))
    if name == LEADER_EPOCH_CHECKPOINT:
        return FileKind("leader_epoch_checkpoint")
    if name == PARTITION_METADATA:
        return FileKind("partition_metadata")
    if name in (LEADER_EPOCH_CHECKPOINT + ".tmp", PARTITION_METADATA + ".tmp"):
        return FileKind("checkpoint_tmp")
    if name == QUORUM_STATE:
        return FileKind("quorum_state")
    if name == "recovery-point-offset-checkpoint":
        return FileKind("mqstore_recovery_point")
    if name == CLEAN_SHUTDOWN:
        return FileKind("mqstore_clean_shutdown")
    return FileKind("unknown")


def partition_dirs(log_dir: str | os.PathLike[str]) -> list[Path]:
    """The ``<topic>-<partition>`` sub-directories of a Kafka log directory that hold segments."""
    return [c for c in sorted(Path(log_dir).iterdir()) if is_partition_dir_name(c.name) and c.is_dir() and has_segments(c)]


def remote_index_base_offset(name: str) -> int | None:
    """Start offset of a ``remote-log-index-cache`` file name (``<startOffset>_<segmentId>.<kind>``)."""
    m = REMOTE_INDEX_NAME.match(name)
    return int(m.group(1)) if m else None


# ------------------------------------------------------------------------------- KRaft files
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


def snapshot_files(directory: Path) -> list[Path]:
    """KRaft snapshot files of a directory, by name."""
    return sorted(f for f in directory.iterdir() if f.is_file() and snapshot_kind(f.name) is not None)


def has_kraft_files(path: str | os.PathLike[str]) -> bool:
    """Whether the KRaft checks have anything to read at ``path`` (a partition directory or one
    file): a snapshot, ``quorum-state``, or the metadata topic's partition directory."""
    p = Path(path)
    if not p.is_dir():
        return p.name == QUORUM_STATE or snapshot_kind(p.name) is not None
    if p.name.rpartition("-")[0] == METADATA_TOPIC or (p / QUORUM_STATE).is_file():
        return True
    return any(snapshot_kind(f.name) is not None for f in p.iterdir())


# ------------------------------------------------------------------------- log directory entries
META_PROPERTIES = "meta.properties"
REMOTE_INDEX_CACHE = "remote-log-index-cache"
#: the offset checkpoint files at the top of a log directory, by the kind ``classify_log_dir_entry`` gives
_CHECKPOINT_KIND = {
    "recovery-point-offset-checkpoint": "recovery_point_checkpoint",
    "log-start-offset-checkpoint": "log_start_offset_checkpoint",
    "replication-offset-checkpoint": "replication_offset_checkpoint",
    "cleaner-offset-checkpoint": "cleaner_offset_checkpoint",
}
OFFSET_CHECKPOINT_FILES = tuple(_CHECKPOINT_KIND)

LOG_DIR_FILE_KINDS = {
    "recovery_point_checkpoint": "recovery-point-offset-checkpoint",
    "log_start_offset_checkpoint": "log-start-offset-checkpoint",
    "replication_offset_checkpoint": "replication-offset-checkpoint (high watermarks)",
    "cleaner_offset_checkpoint": "cleaner-offset-checkpoint",
    "checkpoint_tmp": "temporary of an interrupted checkpoint write",
    "meta_properties": "meta.properties",
    "clean_shutdown": ".kafka_cleanshutdown",
    "lock": ".lock (the broker's directory lock)",
    "kraft_bootstrap": "bootstrap.checkpoint (KRaft bootstrap metadata)",
    "partition_dir": "partition directory",
    "remote_index_cache": "remote-log-index-cache (tiered storage)",
    "lost_found": "lost+found (file system)",
    "unknown": "not a Kafka file",
}


def classify_log_dir_entry(name: str, is_dir: bool) -> str:
    """Kind of one entry at the top of a log directory."""
    if is_dir:
        if name == REMOTE_INDEX_CACHE:
            return "remote_index_cache"
        if name == "lost+found":
            return "lost_found"
        return "partition_dir" if parse_partition_dir_name(name) is not None else "unknown"
    if name in _CHECKPOINT_KIND:
        return _CHECKPOINT_KIND[name]
    if name.endswith(".tmp") and name[:-4] in (*OFFSET_CHECKPOINT_FILES, META_PROPERTIES):
        return "checkpoint_tmp"
    return {META_PROPERTIES: "meta_properties", CLEAN_SHUTDOWN: "clean_shutdown", ".lock": "lock",
            BOOTSTRAP_CHECKPOINT: "kraft_bootstrap"}.get(name, "unknown")


def is_log_dir(path: Path) -> bool:
    """A directory of partitions (``log.dirs`` entry) rather than one partition directory."""
    if not path.is_dir():
        return False
    has_marker = False
    for f in path.iterdir():
        if f.is_file() and classify_partition_file(f.name).kind == "log":
            return False
        kind = classify_log_dir_entry(f.name, f.is_dir())
        if kind not in ("unknown", "lost_found", "checkpoint_tmp") and not (kind == "lock"):
            has_marker = True
    return has_marker
