"""The CommitLog flush (``msync``) of the put path: the GIL-releasing ctypes call and its
``mmap.flush`` twin behave the same, failures stay typed, and other threads run meanwhile."""

from __future__ import annotations

import ctypes
import errno
import mmap
import os
import sys
import threading
from pathlib import Path

import numpy as np
import pytest

from mqstore import MessageStore, StoreConfig
from mqstore.errors import FlushError, StoreError
from mqstore.storage import mapped
from mqstore.storage.mapped import MappedFile, msync_range

pytestmark = pytest.mark.skipif(mapped._msync is None, reason="libc msync through ctypes is Linux only")


def _mapping(path: Path, size: int) -> tuple[mmap.mmap, np.ndarray]:
    fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
    try:
        os.ftruncate(fd, size)
        mm = mmap.mmap(fd, size)
    finally:
        os.close(fd)
    return mm, np.frombuffer(mm, np.uint8)


@pytest.mark.parametrize("use_view", [True, False], ids=["ctypes", "mmap.flush"])
def test_msync_paths_agree(tmp_path: Path, use_view: bool) -> None:
    size = 4 * mmap.PAGESIZE
    mm, view = _mapping(tmp_path / "f", size)
    try:
        mm[:] = bytes(range(256)) * (size // 256)
        msync_range(mm, view if use_view else None, mmap.PAGESIZE, 2 * mmap.PAGESIZE)
        msync_range(mm, view if use_view else None, 0, size)
        with open(tmp_path / "f", "rb") as f:
            assert f.read() == mm[:]
        with pytest.raises(OSError) as info:  # an unaligned start: the same EINVAL either way
            msync_range(mm, view if use_view else None, 1, mmap.PAGESIZE)
        assert info.value.errno == errno.EINVAL
        del info  # its traceback holds the view
    finally:
        del view
        mm.close()


def test_msync_releases_the_gil(tmp_path: Path) -> None:
    size = 64 << 20
    mm, view = _mapping(tmp_path / "f", size)
    ticks = [0]
    during = [-1]
    stop = threading.Event()
    started = threading.Event()

    def spin() -> None:
        started.set()
        while not stop.is_set():
            ticks[0] += 1

    try:
        view[:] = 7  # 64 MiB of dirty pages: msync has real work to do
        t = threading.Thread(target=spin)
        t.start()
        started.wait()
        before = ticks[0]
        msync_range(mm, view, 0, size)  # no bytecode runs in this thread meanwhile
        during[0] = ticks[0] - before
        stop.set()
        t.join()
        assert during[0] > 0  # the spinner ran while msync was in the kernel
    finally:
        stop.set()
        del view
        mm.close()


def test_failed_msync_is_a_flush_error_and_the_position_stays(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    mf = MappedFile(tmp_path / f"{0:020d}", 8 * mmap.PAGESIZE, create=True)
    try:
        mf.append(b"x" * 5000)

        def eio(addr: int, length: int, flags: int) -> int:
            ctypes.set_errno(errno.EIO)
            return -1

        monkeypatch.setattr(mapped, "_msync", eio)
        with pytest.raises(FlushError):
            mf.flush()
        assert mf.flushed_position == 0
        monkeypatch.undo()
        assert mf.flush() == 5000
    finally:
        mf.close()


def test_sync_and_async_puts_flush_through_ctypes(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    calls: list[int] = []
    real = mapped._msync
    assert real is not None

    def counting(addr: int, length: int, flags: int) -> int:
        calls.append(length)
        return int(real(addr, length, flags))

    monkeypatch.setattr(mapped, "_msync", counting)
    for kind in ("sync", "async"):
        calls.clear()
        with MessageStore.open(tmp_path / kind, StoreConfig(flush_disk_type=kind, background_services=False)) as s:
            r = s.put("T", b"body", keys="k")
            assert bool(calls) == (kind == "sync")  # sync: flushed before put returns
            s.flush()
            assert calls
        with MessageStore.open(tmp_path / kind, read_only=True) as s:
            assert s.get_by_offset(r.commit_log_offset).body == b"body"


def test_flush_racing_close_is_harmless(tmp_path: Path) -> None:
    """The flush service may flush a segment while retention closes and deletes it (the crash
    campaign hit ``mmap closed or invalid`` there): close waits for a running msync, and a flush
    of a closed file has nothing to do."""
    errors: list[BaseException] = []
    old_interval = sys.getswitchinterval()
    sys.setswitchinterval(1e-6)  # switch threads as often as possible: widen every race window
    try:
        _race_flush_and_close(tmp_path, errors)
    finally:
        sys.setswitchinterval(old_interval)
    assert errors == []


def _race_flush_and_close(tmp_path: Path, errors: list[BaseException]) -> None:
    for i in range(200):
        f = MappedFile(tmp_path / f"{i * 65536:020d}", 65536, create=True)
        f.append(b"x" * 8192)
        started = threading.Event()

        def flusher(f: MappedFile = f, started: threading.Event = started) -> None:
            try:
                for _ in range(2000):
                    f.flushed_position = 0  # keep something to flush
                    f.flush()
                    started.set()
            except BaseException as exc:  # reported below
                errors.append(exc)
            started.set()

        t = threading.Thread(target=flusher)
        t.start()
        started.wait()
        f.destroy()
        t.join()
        assert f.flush() == f.flushed_position  # closed: nothing to do, no error


@pytest.mark.parametrize("kind", ["bytes", "array", "bytearray", "small"])
def test_write_at_paths_write_the_same_bytes(tmp_path: Path, kind: str) -> None:
    """Large ``bytes``/``uint8`` writes take the GIL-free memmove, the rest the slice assignment:
    same bytes either way, and an overflow is a typed error that writes nothing."""
    size = 1 << 20
    f = MappedFile(tmp_path / f"{0:020d}", size, create=True)
    rng = np.random.default_rng(3)
    n = 100 if kind == "small" else mapped.GIL_FREE_COPY_MIN + 123
    raw = rng.bytes(n)
    data = {"bytes": raw, "small": raw, "bytearray": bytearray(raw), "array": np.frombuffer(raw, np.uint8)}[kind]
    f.write_at(4097, data)
    assert f.read(4097, n) == raw
    assert f.append(data) == 0 and f.read(0, n) == raw and f.wrote_position == n
    before = f.read(size - 10, 10)
    with pytest.raises(StoreError, match="overflows the segment"):
        f.write_at(size - 10, data)
    assert f.read(size - 10, 10) == before
    f.destroy()
