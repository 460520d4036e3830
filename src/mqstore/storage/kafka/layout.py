"""The layout of Kafka log directories: the one home of segment file naming and listing, used by
the partition log, the tools, the CLI and the Spark layer.

::

    <log dir>/<topic>-<partition>/<20-digit base offset>.log       record batches
                                  <20-digit base offset>.index     offset index
                                  <20-digit base offset>.timeindex time index
                                  <20-digit base offset>.txnindex  aborted transactions

A segment is named by the offset of its first record.  A directory not named
``<topic>-<partition>`` is partition 0 of a topic named after the directory.
"""

from __future__ import annotations

import os
import re
from pathlib import Path

from mqstore.errors import InvalidArgumentError, StoreNotFoundError
from mqstore.storage.layout import is_offset_name, offset_files, offset_name

LOG_SUFFIX = ".log"
INDEX_SUFFIX = ".index"
TIMEINDEX_SUFFIX = ".timeindex"
TXNINDEX_SUFFIX = ".txnindex"
INDEX_SUFFIXES = (INDEX_SUFFIX, TIMEINDEX_SUFFIX, TXNINDEX_SUFFIX)
SEGMENT_SUFFIXES = (LOG_SUFFIX, *INDEX_SUFFIXES)
#: the files of a segment the tools dump, in the order they list them
DUMP_SUFFIXES = (LOG_SUFFIX, INDEX_SUFFIX, TIMEINDEX_SUFFIX)
_PARTITION_DIR = re.compile(r"^(?P<topic>.+)-(?P<partition>\d+)$")


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
    """``orders-3`` → ``("orders", 3)``; any other name is partition 0 of a topic of that name."""
    name = Path(directory).name
    m = _PARTITION_DIR.match(name)
    if m:
        return m.group("topic"), int(m.group("partition"))
    return name, 0


def is_partition_dir_name(name: str) -> bool:
    return _PARTITION_DIR.match(name) is not None


def partition_dirs(log_dir: str | os.PathLike[str]) -> list[Path]:
    """The ``<topic>-<partition>`` sub-directories of a Kafka log directory that hold segments."""
    return [c for c in sorted(Path(log_dir).iterdir()) if is_partition_dir_name(c.name) and c.is_dir() and has_segments(c)]
