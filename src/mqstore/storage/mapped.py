"""Memory-mapped fixed-size segment files and the queues of them (RocketMQ spec §0).

A :class:`MappedFile` is one pre-allocated file of a fixed size, mapped whole.  Its name is the
global offset of its first byte as 20 decimal digits.  A :class:`MappedFileQueue` is the sorted
list of those files of one directory (a CommitLog or one ConsumeQueue).

Durability: bytes written through a mapping are in the OS page cache at once, so they survive a
crash of this process (``kill -9``); :meth:`MappedFile.flush` (``msync``) makes them survive a
crash of the machine.  Nothing here flushes on its own: the owners decide when (flush policies).
"""

from __future__ import annotations

import ctypes
import errno
import mmap
import os
import threading
from pathlib import Path

import numpy as np

from mqstore.errors import (
    FlushError,
    GeometryMismatchError,
    PathOutsideStoreError,
    ReadOnlyStoreError,
    StoreError,
    StoreNotFoundError,
)
from mqstore.storage.layout import offset_files, offset_name
from mqstore.storage.libc import libc_function

_NO_SPACE = (errno.ENOSPC, errno.EDQUOT, errno.EFBIG)


# libc ``msync`` through ctypes, which releases the GIL for the call (Linux only).  CPython
# 3.11's ``mmap.flush`` holds the GIL for the whole ``msync``: a 256 MiB flush measured 585 ms
# during which no other thread of the process ran, i.e. the flush service stalled every put.
_msync = libc_function("msync", (ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int))
_MS_SYNC = 4  # Linux <sys/mman.h>


def msync_range(mm: mmap.mmap, view: np.ndarray | None, start: int, length: int) -> None:
    """``msync(MS_SYNC)`` of ``[start, start + length)`` of a mapping (``start`` page-aligned),
    with the GIL released when ``view`` (a numpy view of the whole mapping: it also keeps the
    mapping from being unmapped during the call) is given; otherwise, or off Linux,
    ``mmap.flush``.  Raises ``OSError`` as ``mmap.flush`` does."""
    if _msync is None or view is None or length <= 0:
        mm.flush(start, length)
        return
    if _msync(view.ctypes.data + start, length, _MS_SYNC) != 0:
        err = ctypes.get_errno()
        raise OSError(err, os.strerror(err))


_madvise = libc_function("madvise", (ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int))
MADV_POPULATE_WRITE = 23  # Linux 5.14+: map the pages writable in one call instead of one fault each


def populate_write(view: np.ndarray, start: int, length: int) -> bool:
    """``madvise(MADV_POPULATE_WRITE)`` of ``[start, start + length)`` of the mapping ``view`` (a
    numpy view of the whole mapping, which keeps it mapped during the call; ``start``
    page-aligned), with the GIL released: the page faults of a fresh file region are taken in one
    call while the other threads run.  Changes no byte.  False where the kernel or platform cannot
    do it (the pages then fault in one by one when written)."""
    if _madvise is None or length <= 0:
        return False
    return _madvise(view.ctypes.data + start, length, MADV_POPULATE_WRITE) == 0


MADV_POPULATE_READ = 22  # Linux 5.14+: map the pages readable in one call instead of one fault each


def populate_read(view: np.ndarray, start: int, length: int) -> bool:
    """``madvise(MADV_POPULATE_READ)`` of ``[start, start + length)`` of the mapping ``view`` (as
    :func:`populate_write`): the read faults of a region about to be scanned are taken here, in
    one call with the GIL released, instead of in the scanning thread.  False where the kernel or
    platform cannot do it."""
    if _madvise is None or length <= 0:
        return False
    return _madvise(view.ctypes.data + start, length, MADV_POPULATE_READ) == 0


def size_file(fd: int, size: int, path: Path | str) -> None:
    """Give a new file its size with every block allocated now: writing a page of a sparse
    memory-mapped file on a full disk kills the process with SIGBUS, so a full disk must show up
    here, as a :class:`FlushError`, before anything is mapped."""
    try:
        os.ftruncate(fd, size)
        if size > 0 and hasattr(os, "posix_fallocate"):
            try:
                os.posix_fallocate(fd, 0, size)
            except OSError as exc:
                if exc.errno in _NO_SPACE:
                    raise
                # a file system without fallocate: keep the sparse file
    except OSError as exc:
        if exc.errno in _NO_SPACE:
            raise FlushError(f"no space left to allocate {size} bytes ({exc.strerror})", path=str(path)) from exc
        raise

OS_PAGE_SIZE = 4096
#: writes at least this large go through the GIL-free copy of MappedFile.write_at
GIL_FREE_COPY_MIN = 16 << 10


def _is_u8_array(data: object) -> bool:
    return isinstance(data, np.ndarray) and data.dtype == np.uint8 and data.ndim == 1 and data.flags.c_contiguous


def ensure_inside(root: Path, path: Path) -> Path:
    """Resolve ``path`` and check that it lies inside ``root`` (symlinks included)."""
    real_root = root.resolve()
    real = path.resolve()
    if real != real_root and real_root not in real.parents:
        raise PathOutsideStoreError(f"{path} leads outside the store directory {root}")
    return real


class ReadOnlyMap:
    """A whole file mapped read-only, for readers that only look (the Spark tasks, the tools):
    ``mm`` (``None`` for an empty file) and ``array``, a zero-copy ``uint8`` view.  Never
    changes the file.  :meth:`close` leaves the mapping to the garbage collector when a view is
    still referenced (an exception's traceback may hold one).  A missing file is a
    :class:`StoreNotFoundError` naming ``what``."""

    def __init__(self, path: str | os.PathLike[str], *, what: str = "file", size: int | None = None) -> None:
        self.path = str(path)
        try:
            fd = os.open(self.path, os.O_RDONLY)
        except FileNotFoundError:
            raise StoreNotFoundError(f"{what} does not exist", path=self.path) from None
        try:
            n = os.fstat(fd).st_size if size is None else size
            self.mm: mmap.mmap | None = mmap.mmap(fd, n, access=mmap.ACCESS_READ) if n else None
        finally:
            os.close(fd)
        self.array: np.ndarray = np.frombuffer(self.mm, np.uint8) if self.mm is not None else np.empty(0, np.uint8)

    def __len__(self) -> int:
        return len(self.array)

    def close(self) -> None:
        self.array = np.empty(0, np.uint8)
        if self.mm is not None:
            try:
                self.mm.close()
            except BufferError:
                pass
            self.mm = None

    def __enter__(self) -> ReadOnlyMap:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


class MappedFile:
    """One mapped segment file."""

    def __init__(self, path: Path, file_size: int, *, read_only: bool = False, create: bool = False,
                 named_by_offset: bool = True) -> None:
        self.path = Path(path)
        self.file_size = file_size
        self.read_only = read_only
        self.file_from_offset = 0
        if named_by_offset:  # a segment of a queue (IndexFiles and temporaries are named otherwise)
            try:
                self.file_from_offset = int(self.path.name)
            except ValueError as exc:
                raise StoreError(f"segment file name is not a number: {self.path.name}", path=str(self.path)) from exc
        if create:
            if read_only:
                raise ReadOnlyStoreError("cannot create a segment in a read-only store", path=str(self.path))
            fd = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o644)
            try:
                size_file(fd, file_size, self.path)
            except BaseException:
                self.path.unlink(missing_ok=True)
                raise
            finally:
                os.close(fd)
        actual = self.path.stat().st_size
        if actual != file_size:
            raise GeometryMismatchError(
                f"segment is {actual} bytes but the configured size is {file_size}", path=str(self.path)
            )
        flags = os.O_RDONLY if read_only else os.O_RDWR
        fd = os.open(self.path, flags)
        try:
            access = mmap.ACCESS_READ if read_only else mmap.ACCESS_WRITE
            self._mm: mmap.mmap | None = mmap.mmap(fd, file_size, access=access) if file_size > 0 else None
        finally:
            os.close(fd)
        self._np: np.ndarray | None = None
        # flush (the flush service's thread) and close (retention, shutdown) exclude each other:
        # an msync of a mapping being unmapped would fail, or touch memory that is no longer mapped
        self._life = threading.Lock()
        # positions are relative to the file start
        self.wrote_position = file_size if not create else 0
        self.flushed_position = file_size if not create else 0

    # ------------------------------------------------------------------ access
    @property
    def mm(self) -> mmap.mmap:
        if self._mm is None:
            raise StoreError("segment is closed", path=str(self.path))
        return self._mm

    @property
    def array(self) -> np.ndarray:
        """A zero-copy ``uint8`` numpy view of the whole file."""
        if self._np is None:
            self._np = np.frombuffer(self.mm, dtype=np.uint8)
        return self._np

    @property
    def end_offset(self) -> int:
        return self.file_from_offset + self.file_size

    def is_full(self) -> bool:
        return self.wrote_position >= self.file_size

    def read(self, pos: int, size: int) -> bytes:
        return self.mm[pos : pos + size]

    def write_at(self, pos: int, data: bytes | bytearray | memoryview | np.ndarray) -> None:
        """Write ``data`` at ``pos``.  A large write of ``bytes`` or a contiguous ``uint8`` array
        is copied by ``memmove`` through ctypes with the GIL released: the copy, and the page
        faults of fresh pages under it (several µs per page on a VM), then do not stop the other
        threads of the process (the dispatcher writes ConsumeQueue runs while a writer puts)."""
        if self.read_only:
            raise ReadOnlyStoreError("store is opened read-only", path=str(self.path))
        n = len(data)
        if pos < 0 or pos + n > self.file_size:
            raise StoreError(f"write of {n} bytes at {pos} overflows the segment", path=str(self.path))
        if n >= GIL_FREE_COPY_MIN and (type(data) is bytes or _is_u8_array(data)):
            view = self.array  # the export keeps the mapping alive during the copy
            src = data.ctypes.data if isinstance(data, np.ndarray) else data
            ctypes.memmove(view.ctypes.data + pos, src, n)
            return
        self.mm[pos : pos + n] = data

    def append(self, data: bytes | bytearray | memoryview | np.ndarray) -> int:
        """Write ``data`` at the write position; returns the position it was written at."""
        pos = self.wrote_position
        if pos + len(data) > self.file_size:
            raise StoreError(f"append of {len(data)} bytes overflows the segment at {pos}", path=str(self.path))
        self.write_at(pos, data)
        self.wrote_position = pos + len(data)
        return pos

    def append_by_write(self, data: bytes | np.ndarray) -> int:
        """:meth:`append` through the file (``pwrite``, the GIL released) instead of the mapping:
        the page cache is the mapping's, so it reads the same bytes and :meth:`flush` makes them
        durable, but a fresh region takes no page fault per page (each of which first reads, i.e.
        zero-fills, the page of a sparse file: ~4x the CPU of the write on this project's VM).
        For bulk appends of whole runs (the offline rebuild's ConsumeQueue units)."""
        if self.read_only:
            raise ReadOnlyStoreError("store is opened read-only", path=str(self.path))
        pos = self.wrote_position
        n = len(data)
        if pos + n > self.file_size:
            raise StoreError(f"append of {n} bytes overflows the segment at {pos}", path=str(self.path))
        with self._life:
            if self._mm is None:
                raise StoreError("segment is closed", path=str(self.path))
            fd = os.open(self.path, os.O_WRONLY)
            try:
                with memoryview(data) as mv:
                    mv = mv.cast("B")
                    done = 0
                    while done < n:
                        done += os.pwrite(fd, mv[done:], pos + done)
            finally:
                os.close(fd)
        self.wrote_position = pos + n
        return pos

    # ------------------------------------------------------------------ flush
    def is_able_to_flush(self, least_pages: int) -> bool:
        if self.is_full() and self.flushed_position < self.wrote_position:
            return True
        if least_pages > 0:
            return (self.wrote_position // OS_PAGE_SIZE - self.flushed_position // OS_PAGE_SIZE) >= least_pages
        return self.wrote_position > self.flushed_position

    def flush(self, least_pages: int = 0) -> int:
        """``msync`` the written-but-unflushed pages when eligible; returns the flushed position.
        A file closed meanwhile (retention deleted it) has nothing left to flush."""
        if self.read_only:
            return self.flushed_position
        with self._life:
            if self._mm is None or not self.is_able_to_flush(least_pages):
                return self.flushed_position
            start = (self.flushed_position // mmap.PAGESIZE) * mmap.PAGESIZE
            end = self.wrote_position
            try:
                msync_range(self._mm, self.array, start, end - start)
            except OSError as exc:
                from mqstore.errors import FlushError

                raise FlushError(f"msync failed: {exc.strerror}", path=str(self.path)) from exc
            self.flushed_position = end
        return self.flushed_position

    def flush_all(self) -> None:
        if self.read_only:
            return
        with self._life:
            if self._mm is not None:
                self._mm.flush()
                self.flushed_position = self.wrote_position

    # ------------------------------------------------------------------ lifecycle
    def close(self) -> None:
        with self._life:
            self._np = None
            if self._mm is not None:
                try:
                    self._mm.close()
                except BufferError:  # a caller still holds a view; the mapping goes when it does
                    pass
                self._mm = None

    def destroy(self) -> None:
        self.close()
        try:
            self.path.unlink()
        except FileNotFoundError:
            pass

    def __repr__(self) -> str:
        return f"MappedFile({self.path.name}, wrote={self.wrote_position}, flushed={self.flushed_position})"


class MappedFileQueue:
    """The ordered segment files of one directory."""

    def __init__(self, directory: Path, file_size: int, *, read_only: bool = False) -> None:
        self.directory = Path(directory)
        self.file_size = file_size
        self.read_only = read_only
        self.files: list[MappedFile] = []

    # ------------------------------------------------------------------ load (spec §0)
    def load(self) -> None:
        """Open every segment: sorted by name, sub-directories skipped, an empty *last* file
        deleted, any other file of the wrong length is an error."""
        if not self.directory.is_dir():
            return
        self._load_entries(offset_files(self.directory))

    def _load_entries(self, entries: list[Path]) -> None:
        for i, p in enumerate(entries):
            size = p.stat().st_size
            if size == 0 and i == len(entries) - 1:
                if not self.read_only:
                    p.unlink()
                continue
            if size != self.file_size:
                raise GeometryMismatchError(
                    f"segment is {size} bytes but the configured size is {self.file_size}", path=str(p)
                )
            self.files.append(MappedFile(p, self.file_size, read_only=self.read_only))

    # ------------------------------------------------------------------ lookup
    @property
    def min_offset(self) -> int:
        return self.files[0].file_from_offset if self.files else -1

    @property
    def max_offset(self) -> int:
        """Global offset just past the last written byte (0 when empty)."""
        if not self.files:
            return 0
        last = self.files[-1]
        return last.file_from_offset + last.wrote_position

    @property
    def flushed_offset(self) -> int:
        if not self.files:
            return 0
        last = self.files[-1]
        return last.file_from_offset + last.flushed_position

    def last(self) -> MappedFile | None:
        return self.files[-1] if self.files else None

    def find(self, offset: int, *, return_first_on_not_found: bool = False) -> MappedFile | None:
        """The segment that holds global ``offset``."""
        if not self.files:
            return None
        first = self.files[0]
        idx = (offset - first.file_from_offset) // self.file_size if offset >= first.file_from_offset else -1
        if 0 <= idx < len(self.files):
            f = self.files[idx]
            if f.file_from_offset <= offset < f.end_offset:
                return f
        for f in self.files:  # segments not contiguous (deleted holes): linear fallback
            if f.file_from_offset <= offset < f.end_offset:
                return f
        return first if return_first_on_not_found else None

    def get_last_or_create(self, start_offset: int = 0) -> MappedFile:
        """The last segment if it has room, else a new one (the first at ``start_offset`` rounded
        down to the segment size)."""
        last = self.last()
        if last is not None and not last.is_full():
            return last
        if self.read_only:
            raise ReadOnlyStoreError("store is opened read-only", path=str(self.directory))
        new_from = last.end_offset if last is not None else start_offset - start_offset % self.file_size
        self.directory.mkdir(parents=True, exist_ok=True)
        mf = MappedFile(self.directory / offset_name(new_from), self.file_size, create=True)
        self.files.append(mf)
        return mf

    # ------------------------------------------------------------------ maintenance
    def set_positions(self, offset: int) -> None:
        """After recovery: every segment before ``offset`` full, the one holding it at ``offset``."""
        for f in self.files:
            if f.end_offset <= offset:
                f.wrote_position = f.flushed_position = self.file_size
            elif f.file_from_offset <= offset:
                f.wrote_position = f.flushed_position = offset - f.file_from_offset

    def truncate_dirty(self, offset: int) -> None:
        """Drop segments that start beyond ``offset``; set the positions of the one holding it."""
        keep: list[MappedFile] = []
        for f in self.files:
            if f.file_from_offset > offset:
                if self.read_only:
                    continue
                f.destroy()
                continue
            keep.append(f)
        self.files = keep
        self.set_positions(offset)

    def delete_last(self) -> None:
        f = self.files.pop()
        f.destroy()

    def delete_files(self, victims: list[MappedFile]) -> int:
        ids = {id(v) for v in victims}
        for v in victims:
            v.destroy()
        self.files = [f for f in self.files if id(f) not in ids]
        return len(victims)

    def flush(self, least_pages: int = 0) -> int:
        for f in self.files:
            if f.flushed_position < f.wrote_position:
                f.flush(least_pages)
        return self.flushed_offset

    def close(self) -> None:
        for f in self.files:
            f.close()

    def destroy(self) -> None:
        for f in self.files:
            f.destroy()
        self.files = []
        try:
            self.directory.rmdir()
        except OSError:
            pass


class MultiPathMappedFileQueue(MappedFileQueue):
    """The segments of one queue spread over several directories (the broker's CommitLog with
    ``storePathCommitLog`` = ``dirA,dirB,...`` and ``readOnlyCommitLogStorePaths``).

    Loading gathers the numeric files of every path (writable and read-only) and orders them by
    name, whatever directory holds them.  A new segment for global offset ``o`` goes to
    ``sorted(writable paths)[(o // file_size) % len(writable paths)]``: round-robin by segment
    number over the writable paths sorted as strings (the read-only ones never receive one).
    The broker also skips paths whose disk is nearly full; this writer does not (no disk quota
    policy offline), which only matters for where *new* segments go, never for reading.
    """

    def __init__(self, paths: list[str], readonly_paths: list[str], file_size: int, *, read_only: bool = False) -> None:
        if not paths:
            raise StoreError("no CommitLog directory given")
        super().__init__(Path(paths[0]), file_size, read_only=read_only)
        self.paths = list(dict.fromkeys(paths))
        self.readonly_paths = list(dict.fromkeys(readonly_paths))

    def writable_paths(self) -> list[str]:
        ro = set(self.readonly_paths)
        return sorted(p for p in self.paths if p not in ro)

    def all_paths(self) -> list[str]:
        return list(dict.fromkeys(self.paths + self.readonly_paths))

    def load(self) -> None:
        by_name: dict[str, Path] = {}
        for d in self.all_paths():
            for p in offset_files(d):
                if p.name in by_name and by_name[p.name].resolve() != p.resolve():
                    raise StoreError(f"segment {p.name} is in two CommitLog directories: {by_name[p.name]} and {p}",
                                     path=str(p))
                by_name.setdefault(p.name, p)
        self._load_entries([by_name[n] for n in sorted(by_name)])

    def directory_for(self, offset: int) -> Path:
        """The directory a new segment starting at ``offset`` goes to."""
        paths = self.writable_paths()
        if not paths:
            raise ReadOnlyStoreError("every CommitLog directory is read-only", path=str(self.directory))
        return Path(paths[(offset // self.file_size) % len(paths)])

    def get_last_or_create(self, start_offset: int = 0) -> MappedFile:
        last = self.last()
        if last is not None and not last.is_full():
            return last
        if self.read_only:
            raise ReadOnlyStoreError("store is opened read-only", path=str(self.directory))
        new_from = last.end_offset if last is not None else start_offset - start_offset % self.file_size
        d = self.directory_for(new_from)
        d.mkdir(parents=True, exist_ok=True)
        mf = MappedFile(d / offset_name(new_from), self.file_size, create=True)
        self.files.append(mf)
        return mf

    def destroy(self) -> None:
        for f in self.files:
            f.destroy()
        self.files = []
        for d in self.all_paths():
            try:
                Path(d).rmdir()
            except OSError:
                pass
