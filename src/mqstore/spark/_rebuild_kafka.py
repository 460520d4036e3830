"""The pieces of the Spark Kafka index rebuild: finding the segments, and the per-segment task."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from mqstore.errors import InvalidArgumentError, StoreNotFoundError
from mqstore.storage.kafka.layout import LOG_SUFFIX, is_segment_file, log_files


@dataclass(frozen=True, slots=True)
class SegmentTask:
    log_path: str
    out_dir: str
    partition: str
    index_interval_bytes: int
    max_index_bytes: int
    key_index: bool = False
    key_header: str | None = None


def find_segments(path: Path, out: Path) -> list[tuple[str, Path, Path]]:
    """``(partition, log file, output directory)`` of every segment under ``path``: a ``.log``
    file, a partition directory (outputs go straight into ``out``, as ``mqstore kafka
    rebuild-index`` writes them) or a log directory of partition directories (outputs go into
    ``out/<partition>/``)."""
    if not path.exists():
        raise StoreNotFoundError("path not found", path=str(path))
    if path.is_file():
        if not is_segment_file(path, (LOG_SUFFIX,)):
            raise InvalidArgumentError("expected a Kafka .log segment, a partition directory or a log directory",
                                       path=str(path))
        return [(path.parent.name, path, out)]
    own = log_files(path)
    if own:
        return [(path.name, f, out) for f in own]
    found: list[tuple[str, Path, Path]] = []
    for sub in sorted(p for p in path.iterdir() if p.is_dir() and not p.is_symlink()):
        found += [(sub.name, f, out / sub.name) for f in log_files(sub)]
    if not found:
        raise StoreNotFoundError("no Kafka .log segment files here or in its partition directories", path=str(path))
    return found


def rebuild_segment(task: SegmentTask) -> dict[str, object]:
    """One Spark task: the local single-segment rebuild (same code, same bytes)."""
    from mqstore.storage.kafka.rebuild import rebuild_indexes

    r = rebuild_indexes(task.log_path, task.out_dir, index_interval_bytes=task.index_interval_bytes,
                        max_index_size=task.max_index_bytes)
    out: dict[str, object] = {"partition": task.partition, **vars(r)}
    if task.key_index:
        from mqstore.storage.kafka.keyindex import rebuild_keyindex

        k = rebuild_keyindex(task.log_path, task.out_dir, header_name=task.key_header)
        out.update(keyindex_path=k.keyindex_path, key_entries=k.entries)
    return out


@dataclass(frozen=True, slots=True)
class PartitionTxnTask:
    directory: str
    out_dir: str
    partition: str
    bases: tuple[int, ...]


def rebuild_partition_txn(task: PartitionTxnTask) -> dict[str, object]:
    """One Spark task per partition: its segments' ``.txnindex`` (a transaction may span
    segments, so the whole partition is read), the same code and bytes as the local command."""
    from mqstore.storage.kafka.txn_rebuild import rebuild_txn_indexes

    res = rebuild_txn_indexes(task.directory, task.out_dir, only=set(task.bases))
    return {"partition": task.partition, "files": sum(1 for r in res if r.written and r.entries),
            "aborted_txns": sum(r.entries for r in res)}
