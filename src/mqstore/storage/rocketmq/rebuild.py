"""Offline rebuild of ``consumequeue/`` and ``index/`` (and the checkpoint fields they own) from
the CommitLog alone, with the same scan → dispatch → write code as the live store."""

from __future__ import annotations

import hashlib
import os
import shutil
import tempfile
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from mqstore.errors import StoreNotFoundError
from mqstore.storage.rocketmq.checkpoint import StoreCheckpoint
from mqstore.storage.rocketmq.commitlog import CommitLog
from mqstore.storage.rocketmq.config import StoreConfig
from mqstore.storage.rocketmq.dispatch import IndexWriters
from mqstore.storage.rocketmq.index import IndexService


@dataclass(slots=True)
class RebuildStats:
    messages: int
    keys: int
    commit_log_end: int
    consume_queues: int
    index_files: int
    stop_error: str | None


def detect_segment_size(commitlog_dir: Path) -> int | None:
    """The size of the segments of a CommitLog directory (all but an empty last one agree)."""
    sizes = {p.stat().st_size for p in commitlog_dir.iterdir() if p.is_file() and p.name.isdigit() and p.stat().st_size}
    return sizes.pop() if len(sizes) == 1 else None


def rebuild_indexes(store: str | os.PathLike[str], out: str | os.PathLike[str] | None = None, *,
                    config: StoreConfig | None = None, progress: Callable[[int, int], None] | None = None,
                    check_crc: bool = False) -> RebuildStats:
    """Regenerate the ConsumeQueues and IndexFiles of ``store`` into ``out`` (default: in place,
    built next to the old ones and swapped in when complete).  The CommitLog is only read."""
    root = Path(store)
    cl_dir = root / "commitlog"
    if not cl_dir.is_dir():
        raise StoreNotFoundError(f"{root} has no commitlog/ directory")
    cfg = config or StoreConfig()
    seg = detect_segment_size(cl_dir)
    if config is None and seg is not None:
        cfg = StoreConfig(commit_log_file_size=seg)
    in_place = out is None or Path(out).resolve() == root.resolve()
    target = Path(tempfile.mkdtemp(prefix=".rebuild-", dir=root)) if in_place else Path(out)  # type: ignore[arg-type]
    target.mkdir(parents=True, exist_ok=True)
    commit_log = CommitLog(cl_dir, cfg.commit_log_file_size, read_only=True)
    commit_log.load()
    index = IndexService(target / "index", cfg.hash_slot_num, cfg.index_num)
    writers = IndexWriters(target, cfg.mapped_file_size_consume_queue, index if cfg.message_index_enable else None)
    src_cp = StoreCheckpoint(root / "checkpoint", read_only=True) if (root / "checkpoint").exists() else None
    cp = StoreCheckpoint(target / "checkpoint")
    if src_cp is not None:
        cp.values.physic_msg_timestamp = src_cp.values.physic_msg_timestamp
        cp.values.master_flushed_offset = src_cp.values.master_flushed_offset
        cp.values.confirm_phy_offset = src_cp.values.confirm_phy_offset
    cp.values.index_msg_timestamp = 0
    full_end_ts: list[int] = []
    index.on_file_full = full_end_ts.append
    messages = keys = 0
    end = commit_log.max_offset
    last_stop = None
    try:
        for batch in commit_log.scan_bounded(commit_log.min_offset, end, check_crc=check_crc):
            writers.apply(batch)
            writers.release_full_files()
            messages += len(batch)
            keys += int(batch.index_key_mask().sum()) if len(batch.key_hash) else 0
            last_stop = batch
            if progress is not None:
                progress(batch.next_offset - commit_log.min_offset, end - commit_log.min_offset)
        writers.flush()
        index.flush()
        cp.values.logics_msg_timestamp = writers.last_logic_store_ts
        if full_end_ts:
            cp.values.index_msg_timestamp = full_end_ts[-1]
        cp.flush()
        n_cq = len(writers.consume_queues)
        n_idx = len(index.files)
    finally:
        writers.close()
        cp.close()
        commit_log.close()
        if src_cp is not None:
            src_cp.close()
    if in_place:
        for name in ("consumequeue", "index"):
            old = root / name
            if old.exists():
                shutil.rmtree(old)
            if (target / name).exists():
                os.replace(target / name, old)
        os.replace(target / "checkpoint", root / "checkpoint")
        shutil.rmtree(target, ignore_errors=True)
    return RebuildStats(messages, keys, last_stop.next_offset if last_stop else 0, n_cq, n_idx,
                        last_stop.error if last_stop else None)


def _digest(path: Path) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as fh:
        for chunk in iter(lambda: fh.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()


def tree_files(root: Path, subdirs: tuple[str, ...] = ("consumequeue", "index")) -> dict[str, Path]:
    out: dict[str, Path] = {}
    for sub in subdirs:
        base = root / sub
        if base.is_dir():
            for p in sorted(base.rglob("*")):
                if p.is_file():
                    out[str(p.relative_to(root))] = p
    return out


def compare_trees(a: str | os.PathLike[str], b: str | os.PathLike[str],
                  subdirs: tuple[str, ...] = ("consumequeue", "index")) -> list[str]:
    """Differences between the index trees of two stores (empty list: byte-identical)."""
    fa, fb = tree_files(Path(a), subdirs), tree_files(Path(b), subdirs)
    diff = [f"only in {a}: {k}" for k in sorted(set(fa) - set(fb))]
    diff += [f"only in {b}: {k}" for k in sorted(set(fb) - set(fa))]
    for k in sorted(set(fa) & set(fb)):
        if fa[k].stat().st_size != fb[k].stat().st_size or _digest(fa[k]) != _digest(fb[k]):
            diff.append(f"differs: {k}")
    return diff
