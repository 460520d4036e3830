"""The writer lock of a Kafka partition directory: ``flock`` on the directory itself (no file is
created inside the partition).  A second writer, in this process or another, gets
``StoreLockedError`` naming the directory; read-only opens work while a writer holds it; the lock
goes with ``close()`` and with the death of the holder (SIGKILL)."""

from __future__ import annotations

import signal
import subprocess
import sys
from pathlib import Path

import pytest

from mqstore.errors import StoreLockedError
from mqstore.kafka import LogConfig, PartitionLog, SimpleRecord

# A writer in a child process: opens the partition, appends one record, says "ready" and waits for
# a line on stdin (or for SIGKILL) before closing.
HOLDER = """
import sys
from mqstore.kafka import PartitionLog, SimpleRecord
log = PartitionLog.open(sys.argv[1])
log.append_records([SimpleRecord(value=b"from-child", key=b"c", timestamp=1)])
print("ready", flush=True)
sys.stdin.readline()
log.close()
print("closed", flush=True)
"""

# A second opener in a child process: exit 7 and print the message when the lock is refused.
OPENER = """
import sys
from mqstore.errors import StoreLockedError
from mqstore.kafka import PartitionLog
try:
    log = PartitionLog.open(sys.argv[1], read_only=sys.argv[2] == "ro")
except StoreLockedError as e:
    print("locked:", e, flush=True)
    sys.exit(7)
print("opened", log.log_end_offset, flush=True)
log.close()
"""


def _open_in_child(path: Path, mode: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-c", OPENER, str(path), mode], capture_output=True, text=True)


def _holder(path: Path) -> subprocess.Popen[str]:
    p = subprocess.Popen([sys.executable, "-c", HOLDER, str(path)], stdin=subprocess.PIPE,
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    assert p.stdout is not None
    line = p.stdout.readline()
    assert line.strip() == "ready", line + (p.stderr.read() if p.stderr else "")
    return p


def test_second_writer_in_the_same_process_is_refused_until_close(tmp_path: Path) -> None:
    d = tmp_path / "t-0"
    log = PartitionLog.open(d, LogConfig())
    log.append_records([SimpleRecord(value=b"a", key=b"k", timestamp=1)])
    with pytest.raises(StoreLockedError) as ei:
        PartitionLog.open(d, LogConfig())
    assert str(d) in str(ei.value) and ei.value.path == str(d)
    with PartitionLog.open(d, read_only=True) as ro:  # readers are not excluded
        assert [r.value for r in ro.iter_records()] == [b"a"]
    log.close()
    with PartitionLog.open(d, LogConfig()) as again:
        assert again.log_end_offset == 1


def test_failed_open_releases_the_lock(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    d = tmp_path / "t-0"
    with PartitionLog.open(d) as log:
        log.append_records([SimpleRecord(value=b"a", key=b"k", timestamp=1)])

    def boom(self: PartitionLog, needs: set[int]) -> None:
        raise OSError(5, "injected EIO during recovery")

    with monkeypatch.context() as m:
        m.setattr(PartitionLog, "_recover", boom)
        with pytest.raises(OSError, match="injected EIO"):
            PartitionLog.open(d)
    with PartitionLog.open(d) as log:  # the failed open did not keep the lock
        assert log.log_end_offset == 1
    assert _open_in_child(d, "rw").returncode == 0


def test_the_lock_creates_no_file_in_the_partition(tmp_path: Path) -> None:
    d = tmp_path / "t-0"
    with PartitionLog.open(d) as log:
        log.append_records([SimpleRecord(value=b"a", key=b"k", timestamp=1)])
        during = sorted(p.name for p in d.iterdir())
    after = sorted(p.name for p in d.iterdir())
    assert during == ["00000000000000000000.index", "00000000000000000000.log",
                      "00000000000000000000.timeindex", "recovery-point-offset-checkpoint"]
    assert after == sorted([*during, ".kafka_cleanshutdown"])


def test_writer_in_another_process_excludes_writers_not_readers(tmp_path: Path) -> None:
    d = tmp_path / "t-0"
    with PartitionLog.open(d) as log:
        log.append_records([SimpleRecord(value=b"a", key=b"k", timestamp=1)])
    holder = _holder(d)
    try:
        with pytest.raises(StoreLockedError, match="locked by another writer"):
            PartitionLog.open(d)
        p = _open_in_child(d, "rw")
        assert p.returncode == 7 and "locked:" in p.stdout and str(d) in p.stdout, p.stdout + p.stderr
        with PartitionLog.open(d, read_only=True) as ro:
            assert [r.value for r in ro.iter_records()] == [b"a", b"from-child"]
        p = _open_in_child(d, "ro")
        assert p.returncode == 0 and p.stdout.split() == ["opened", "2"], p.stdout + p.stderr
    finally:
        assert holder.stdin is not None and holder.stdout is not None
        holder.stdin.write("\n")
        holder.stdin.flush()
        assert holder.stdout.readline().strip() == "closed"
        assert holder.wait() == 0
    with PartitionLog.open(d) as log:
        assert log.had_clean_shutdown and log.log_end_offset == 2
    p = _open_in_child(d, "rw")
    assert p.returncode == 0 and p.stdout.split() == ["opened", "2"], p.stdout + p.stderr


def test_lock_of_a_sigkilled_writer_is_released(tmp_path: Path) -> None:
    d = tmp_path / "t-0"
    holder = _holder(d)
    with pytest.raises(StoreLockedError):
        PartitionLog.open(d)
    holder.kill()
    assert holder.wait() == -signal.SIGKILL
    with PartitionLog.open(d) as log:  # recovers the killed writer's log, keeps its record
        assert not log.had_clean_shutdown
        assert [r.value for r in log.iter_records()] == [b"from-child"]


def test_in_place_rebuild_index_takes_the_partition_lock(tmp_path: Path) -> None:
    """Rebuilding a segment's indexes in place replaces files a live writer maps: refused while a
    writer (in this process or another) holds the partition; into another directory it is only a
    reader and works; once the writer is gone the in-place rebuild works and leaves the lock free."""
    from mqstore.kafka import rebuild_indexes

    d = tmp_path / "t-0"
    log_file = d / "00000000000000000000.log"
    out = tmp_path / "out"
    out.mkdir()
    with PartitionLog.open(d) as log:
        log.append_records([SimpleRecord(value=b"a", key=b"k", timestamp=1)])
        with pytest.raises(StoreLockedError, match="already open for writing in this process"):
            rebuild_indexes(log_file)
        assert rebuild_indexes(log_file, out).next_offset == 1
    holder = _holder(d)
    try:
        with pytest.raises(StoreLockedError, match="locked by another writer"):
            rebuild_indexes(log_file)
    finally:
        assert holder.stdin is not None and holder.stdout is not None
        holder.stdin.write("\n")
        holder.stdin.flush()
        assert holder.stdout.readline().strip() == "closed"
        assert holder.wait() == 0
    assert rebuild_indexes(log_file).next_offset == 2
    with PartitionLog.open(d) as log:  # the rebuild released the lock
        assert log.log_end_offset == 2
