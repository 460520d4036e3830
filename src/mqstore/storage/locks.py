"""Writer locks of store directories, the one home of locking (no ``fcntl`` elsewhere).

* :class:`StoreLock` — a RocketMQ store: ``lockf`` of byte 0 of a file in the store, as the
  broker's ``tryLock(0, 1)`` on ``lock`` (POSIX record locks, so a Java broker and mqstore
  exclude each other).  The writer (CommitLog owner) takes ``lock``; the dispatcher
  (ConsumeQueue/IndexFile owner) takes ``dispatch.lock`` when it runs apart from the writer.
* :class:`PartitionLock` — a Kafka partition directory: ``flock`` on the directory itself.

Both keep a per-process registry as well: a POSIX record lock does not exclude two opens in one
process, and a second open in the same process gets its own message.  Locks are released when
the descriptor is closed, including when the process dies.
"""

from __future__ import annotations

import fcntl
import os
import threading
from pathlib import Path

from mqstore.errors import StoreLockedError

WRITER_LOCK_FILE = "lock"
DISPATCH_LOCK_FILE = "dispatch.lock"

_LOCKED_STORES: set[str] = set()
_LOCKED_STORES_GUARD = threading.Lock()


class StoreLock:
    """A lock file of a RocketMQ store directory (:data:`WRITER_LOCK_FILE` by default), taken
    without waiting: :class:`StoreLockedError` when another process or this one holds it."""

    def __init__(self, root: Path, name: str = WRITER_LOCK_FILE) -> None:
        root = Path(root)
        path = root / name
        self.key = f"{root.resolve()}\0{name}"
        writer = name == WRITER_LOCK_FILE
        what, who = ("open for writing", "another writer") if writer else (f"locked by {name}", f"another process ({name})")
        with _LOCKED_STORES_GUARD:
            if self.key in _LOCKED_STORES:
                raise StoreLockedError(f"store {root} is already {what} in this process", path=str(path))
            fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
            try:
                fcntl.lockf(fd, fcntl.LOCK_EX | fcntl.LOCK_NB, 1, 0)
            except OSError as exc:
                os.close(fd)
                raise StoreLockedError(f"store {root} is locked by {who}", path=str(path)) from exc
            if writer:
                os.pwrite(fd, b"lock", 0)
            self.fd: int | None = fd
            _LOCKED_STORES.add(self.key)

    def release(self) -> None:
        if self.fd is None:
            return
        try:
            fcntl.lockf(self.fd, fcntl.LOCK_UN, 1, 0)
        finally:
            os.close(self.fd)
            self.fd = None
            with _LOCKED_STORES_GUARD:
                _LOCKED_STORES.discard(self.key)

    def __enter__(self) -> StoreLock:
        return self

    def __exit__(self, *exc: object) -> None:
        self.release()


# Partition directories this process holds open for writing (an flock already excludes two opens
# in one process; the registry only gives that case its own message).
_LOCKED_PARTITIONS: set[str] = set()
_LOCKED_GUARD = threading.Lock()


class PartitionLock:
    """The writer lock of a partition directory: ``flock(LOCK_EX | LOCK_NB)`` on a read-only
    descriptor of the directory itself, so no file is created inside the partition (the directory
    stays byte-compatible with a broker's and the loader sees nothing new).  The kernel releases
    it when the descriptor is closed, including when the process dies.  Read-only opens take no
    lock: they never change a file."""

    def __init__(self, directory: Path) -> None:
        self.key = str(directory.resolve())
        with _LOCKED_GUARD:
            if self.key in _LOCKED_PARTITIONS:
                raise StoreLockedError(f"partition {directory} is already open for writing in this process",
                                       path=str(directory))
            fd = os.open(directory, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except OSError as exc:
                os.close(fd)
                raise StoreLockedError(f"partition {directory} is locked by another writer",
                                       path=str(directory)) from exc
            self.fd: int | None = fd
            _LOCKED_PARTITIONS.add(self.key)

    def release(self) -> None:
        if self.fd is None:
            return
        try:
            fcntl.flock(self.fd, fcntl.LOCK_UN)
        finally:
            os.close(self.fd)
            self.fd = None
            with _LOCKED_GUARD:
                _LOCKED_PARTITIONS.discard(self.key)
