"""The naming rule both layouts share: a segment file is named by the global offset of its first
byte (RocketMQ CommitLog and ConsumeQueue files) or record (Kafka ``.log`` and its indexes), as
20 zero-padded decimal digits, optionally followed by a suffix.

:mod:`mqstore.storage.rocketmq.layout` and :mod:`mqstore.storage.kafka.layout` build on it; no
other module formats or recognises these names.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path

from mqstore.errors import InvalidArgumentError

OFFSET_DIGITS = 20


def offset_name(offset: int, suffix: str = "") -> str:
    """``00000000001073741824`` (+ ``suffix``): the file name of a segment starting at ``offset``."""
    if offset < 0:
        raise InvalidArgumentError(f"negative segment offset {offset}")
    return f"{offset:0{OFFSET_DIGITS}d}{suffix}"


def is_offset_name(stem: str) -> bool:
    """Whether ``stem`` is an offset name (ASCII digits only; the brokers write 20 of them, and
    they read any number)."""
    return stem.isascii() and stem.isdigit()


def offset_files(directory: str | os.PathLike[str], suffix: str = "") -> list[Path]:
    """The regular files of ``directory`` named ``<offset><suffix>``, in offset order (empty when
    the directory does not exist)."""
    d = Path(directory)
    if not d.is_dir():
        return []
    out: list[tuple[int, Path]] = []
    for p in d.iterdir():
        name = p.name
        if suffix:
            if not name.endswith(suffix):
                continue
            name = name[: -len(suffix)]
        if is_offset_name(name) and p.is_file():
            out.append((int(name), p))
    out.sort()
    return [p for _, p in out]


def topic_queue_dirs(base: Path, is_queue_name: Callable[[str], bool] = is_offset_name) -> list[tuple[str, int, Path]]:
    """``(topic, queueId, directory)`` of every ``base/<topic>/<queueId>/`` directory, sorted: the
    one walk of the per-queue trees (ConsumeQueues, BatchConsumeQueues, time index sidecars).
    Other names are skipped, as the broker does; so are symbolic links, which could lead out of
    the store."""
    if not base.is_dir():
        return []
    out = []
    for tdir in sorted(base.iterdir()):
        if not tdir.is_dir() or tdir.is_symlink():
            continue
        for qdir in sorted(tdir.iterdir()):
            if is_queue_name(qdir.name) and qdir.is_dir() and not qdir.is_symlink():
                out.append((tdir.name, int(qdir.name), qdir))
    return out
