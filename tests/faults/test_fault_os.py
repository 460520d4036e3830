"""Disk and OS faults: a full disk (a real size-limited tmpfs when this process may mount one,
else ENOSPC injected into the allocation call), EIO on flush, a read-only store directory and a
second writer: each is a typed error, nothing acknowledged is lost, and the store works again once
the fault clears."""

from __future__ import annotations

import errno
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from mqstore import MessageStore, StoreConfig
from mqstore.errors import FlushError, MqStoreError, ReadOnlyStoreError, StoreLockedError
from mqstore.kafka import LogConfig, PartitionLog, SimpleRecord
from mqstore.storage import mapped


def _cfg(**kw: object) -> StoreConfig:
    base = dict(commit_log_file_size=64 * 1024, consume_queue_file_size=2000, hash_slot_num=16, index_num=64,
                background_services=False)
    base.update(kw)
    return StoreConfig(**base)  # type: ignore[arg-type]


class SmallDisk:
    """A directory whose file system fills up after ``limit`` bytes; :meth:`grow` clears the fault."""

    def __init__(self, root: Path, limit: int, monkeypatch: pytest.MonkeyPatch) -> None:
        self.root = root
        self.mounted = False
        root.mkdir(parents=True, exist_ok=True)
        if os.geteuid() == 0:
            r = subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={limit}", "tmpfs", str(root)],
                               capture_output=True)
            self.mounted = r.returncode == 0
        self._mp = monkeypatch
        if not self.mounted:  # inject ENOSPC into the allocation of new files past the limit
            used = [0]
            real = os.posix_fallocate

            def fallocate(fd: int, off: int, size: int) -> None:
                if used[0] + size > limit:
                    raise OSError(errno.ENOSPC, "No space left on device")
                used[0] += size
                real(fd, off, size)

            self._real = real
            monkeypatch.setattr(mapped.os, "posix_fallocate", fallocate)

    def grow(self, size: int) -> None:
        if self.mounted:
            subprocess.run(["mount", "-o", f"remount,size={size}", str(self.root)], check=True)
        else:
            self._mp.setattr(mapped.os, "posix_fallocate", self._real)

    def close(self) -> None:
        if self.mounted:
            subprocess.run(["umount", "-l", str(self.root)], check=False)


@pytest.fixture
def small_disk(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[SmallDisk]:
    d = SmallDisk(tmp_path / "disk", 256 * 1024, monkeypatch)
    try:
        yield d
    finally:
        d.close()


def test_disk_full_is_a_typed_error_and_the_store_recovers(small_disk: SmallDisk) -> None:
    """Without preallocation, writing a page of a sparse mapped segment on a full disk killed the
    process with SIGBUS; now the roll into a segment that cannot be allocated raises FlushError."""
    path = small_disk.root / "store"
    acked = {}
    with pytest.raises(FlushError) as err:
        with MessageStore.open(path, _cfg(flush_disk_type="sync")) as s:
            for i in range(10_000):
                r = s.put("T", b"m%d-" % i * 100, keys=[f"k{i}"])
                acked[i] = r.commit_log_offset
    assert "no space" in str(err.value) and err.value.path
    assert len(acked) > 50
    small_disk.grow(8 * 1024 * 1024)
    with MessageStore.open(path, _cfg(flush_disk_type="sync")) as s:
        for i, off in acked.items():
            assert s.get_by_offset(off).body == b"m%d-" % i * 100
        assert [m.commit_log_offset for m in s.query_by_key("T", f"k{len(acked) - 1}")] == [acked[len(acked) - 1]]
        r = s.put("T", b"after", keys=["after"])
        assert s.get_by_offset(r.commit_log_offset).body == b"after"


def test_kafka_disk_full_is_a_typed_error_and_the_log_recovers(small_disk: SmallDisk) -> None:
    d = small_disk.root / "t-0"
    acked: dict[int, bytes] = {}
    log = PartitionLog.open(d, LogConfig(segment_bytes=16 * 1024, max_index_size=4096, flush_interval_messages=1))
    with pytest.raises(MqStoreError):
        for i in range(10_000):
            v = b"v%d-" % i * 50
            info = log.append_records([SimpleRecord(v, b"k%d" % i, timestamp=1000 + i)])
            acked[info.first_offset] = v
    assert len(acked) > 20
    small_disk.grow(8 * 1024 * 1024)
    try:
        log.close()
    except MqStoreError:
        pass
    with PartitionLog.open(d, LogConfig(segment_bytes=16 * 1024, max_index_size=4096)) as log2:
        got = {r.offset: r.value for r in log2.iter_records()}
        assert all(got[o] == v for o, v in acked.items())
        log2.append_records([SimpleRecord(b"after")])


def test_eio_on_flush_is_a_typed_error_and_nothing_acknowledged_is_lost(tmp_path: Path,
                                                                         monkeypatch: pytest.MonkeyPatch) -> None:
    acked = {}
    with MessageStore.open(tmp_path, _cfg(flush_disk_type="sync")) as s:
        for i in range(5):
            acked[i] = s.put("T", b"ok-%d" % i).commit_log_offset

        def eio(self: object, *a: object, **k: object) -> int:
            raise OSError(errno.EIO, "Input/output error")

        monkeypatch.setattr(mapped.MappedFile, "flush", eio)
        with pytest.raises(FlushError):
            s.put("T", b"not acknowledged")
        monkeypatch.undo()
        acked[5] = s.put("T", b"ok-5").commit_log_offset
    with MessageStore.open(tmp_path, _cfg()) as s:
        for i, off in acked.items():
            assert s.get_by_offset(off).body == b"ok-%d" % i


def test_eio_on_index_file_msync_is_a_typed_error(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """IndexFiles are msynced through ctypes (GIL released) like the segments: an EIO there is a
    FlushError naming the file too, and the store keeps working."""
    from mqstore.storage.rocketmq import index as index_mod

    with MessageStore.open(tmp_path, _cfg()) as s:
        s.put("T", b"a", keys=["k1"])
        real = index_mod.msync_range

        def eio(*a: object, **k: object) -> None:
            raise OSError(errno.EIO, "Input/output error")

        monkeypatch.setattr(index_mod, "msync_range", eio)
        with pytest.raises(FlushError, match="msync failed") as info:
            s.flush()
        assert "index" in str(info.value)
        monkeypatch.setattr(index_mod, "msync_range", real)
        s.put("T", b"b", keys=["k2"])
        s.flush()
    with MessageStore.open(tmp_path, _cfg()) as s:
        assert [m.body for m in s.query_by_key("T", "k1")] == [b"a"]
        assert [m.body for m in s.query_by_key("T", "k2")] == [b"b"]


def test_kafka_eio_on_fsync_is_a_typed_error(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    d = tmp_path / "t-0"
    with PartitionLog.open(d, LogConfig(flush_interval_messages=1)) as log:
        log.append_records([SimpleRecord(b"a")])
        real = os.fsync

        def eio(fd: int) -> None:
            raise OSError(errno.EIO, "Input/output error")

        monkeypatch.setattr(os, "fsync", eio)
        with pytest.raises(FlushError):
            log.append_records([SimpleRecord(b"b")])
        monkeypatch.setattr(os, "fsync", real)
        log.append_records([SimpleRecord(b"c")])
    with PartitionLog.open(d) as log:
        assert [r.value for r in log.iter_records()] == [b"a", b"b", b"c"]




def test_read_only_store_refuses_writes_and_reads_everything(tmp_path: Path) -> None:
    with MessageStore.open(tmp_path / "s", _cfg()) as s:
        r = s.put("T", b"x", keys=["k"])
    before = {p: p.stat().st_mtime_ns for p in (tmp_path / "s").rglob("*") if p.is_file()}
    with MessageStore.open(tmp_path / "s", _cfg(), read_only=True) as s:
        assert s.get_by_offset(r.commit_log_offset).body == b"x"
        with pytest.raises(ReadOnlyStoreError):
            s.put("T", b"y")
    after = {p: p.stat().st_mtime_ns for p in (tmp_path / "s").rglob("*") if p.is_file()}
    assert before == after


def test_second_writer_process_gets_a_typed_lock_error(tmp_path: Path) -> None:
    code = ("import sys\nfrom mqstore import MessageStore, StoreConfig\nfrom mqstore.errors import StoreLockedError\n"
            "try:\n    MessageStore.open(sys.argv[1], StoreConfig(commit_log_file_size=65536, consume_queue_file_size=2000,"
            " hash_slot_num=16, index_num=64, background_services=False)).close()\n"
            "except StoreLockedError as e:\n    print('locked', e); sys.exit(7)\n")
    with MessageStore.open(tmp_path / "s", _cfg()) as s:
        s.put("T", b"x")
        p = subprocess.run([sys.executable, "-c", code, str(tmp_path / "s")], capture_output=True, text=True)
        assert p.returncode == 7 and "locked" in p.stdout, p.stderr
        with pytest.raises(StoreLockedError):
            MessageStore.open(tmp_path / "s", _cfg())
    p = subprocess.run([sys.executable, "-c", code, str(tmp_path / "s")], capture_output=True, text=True)
    assert p.returncode == 0, p.stdout + p.stderr
