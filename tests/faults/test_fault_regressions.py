"""Regression tests for bugs the fault campaigns found (one test per bug, smallest reproduction)."""

from __future__ import annotations

import shutil
import struct
from pathlib import Path

import pytest

from mqstore import MessageStore, StoreConfig
from mqstore.errors import CorruptIndexError, InvalidArgumentError, TruncatedRecordError
from mqstore.formats.kafka.index_entry import decode_offset_entry, decode_time_entry
from mqstore.formats.rocketmq.consumequeue import decode_unit
from mqstore.formats.rocketmq.indexfile import IndexFileBuffer, IndexHeader, index_file_size
from mqstore.formats.rocketmq.msgid import decode_message_id
from mqstore.kafka import LogConfig, PartitionLog, SimpleRecord, verify_path
from mqstore.storage.kafka.log import CLEAN_SHUTDOWN_FILE
from mqstore.storage.rocketmq.store import RocketMQStore


def _small() -> StoreConfig:
    return StoreConfig(commit_log_file_size=8192, consume_queue_file_size=200, hash_slot_num=16, index_num=24,
                       background_services=False)


def test_crash_during_recovery_of_a_clean_store_is_an_unclean_shutdown(tmp_path: Path,
                                                                        monkeypatch: pytest.MonkeyPatch) -> None:
    """Crash campaign: a SIGKILL while a cleanly closed store was being recovered left no ``abort``
    file, so the next open trusted half-recovered files as a clean shutdown."""
    with MessageStore.open(tmp_path, _small()) as s:
        s.put("T", b"x", keys=["k"])
    assert not (tmp_path / "abort").exists()

    def die(self: RocketMQStore) -> None:
        raise KeyboardInterrupt  # stands for the kill, in the middle of recovery

    monkeypatch.setattr(RocketMQStore, "_load_and_recover", die)
    with pytest.raises(KeyboardInterrupt):
        MessageStore.open(tmp_path, _small())
    monkeypatch.undo()
    assert (tmp_path / "abort").exists()
    with MessageStore.open(tmp_path, _small()) as s:
        assert not s.recovery.clean_shutdown
        assert [m.body for m in s.query_by_key("T", "k")] == [b"x"]
    with MessageStore.open(tmp_path, _small()) as s:
        assert s.recovery.clean_shutdown


def test_crash_during_load_of_a_clean_kafka_log_is_an_unclean_shutdown(tmp_path: Path,
                                                                       monkeypatch: pytest.MonkeyPatch) -> None:
    """Crash campaign: a SIGKILL while a cleanly closed partition was being loaded (segments with
    a missing index are rebuilt then) left the clean-shutdown marker in place, so the next open
    trusted whatever the interrupted load had half-written."""
    d = tmp_path / "t-0"
    with PartitionLog.open(d, LogConfig(segment_bytes=300)) as log:
        for i in range(20):
            log.append_records([SimpleRecord(b"v%d" % i, b"k%d" % i, timestamp=1000 + i)])
    assert (d / CLEAN_SHUTDOWN_FILE).exists()

    def die(self: PartitionLog, needs_recovery: set[int]) -> None:
        raise KeyboardInterrupt  # stands for the kill, in the middle of the load

    monkeypatch.setattr(PartitionLog, "_recover", die)
    with pytest.raises(KeyboardInterrupt):
        PartitionLog.open(d, LogConfig(segment_bytes=300))
    monkeypatch.undo()
    assert not (d / CLEAN_SHUTDOWN_FILE).exists()
    with PartitionLog.open(d, LogConfig(segment_bytes=300)) as log:
        assert not log.had_clean_shutdown and log.recovered_segments
        assert [r.value for r in log.iter_records()] == [b"v%d" % i for i in range(20)]
    with PartitionLog.open(d, LogConfig(segment_bytes=300)) as log:
        assert log.had_clean_shutdown


def test_recovery_of_a_segment_denser_than_its_index_room_still_opens(tmp_path: Path) -> None:
    """Crash campaign: appends after a reopen index less densely than the recovery rule, so after a
    crash the recovery of a valid segment wanted more index entries than ``max_index_size`` holds
    and the log could not be opened at all (IndexFullError).  Here the live log writes with a
    sparse interval and the crash copy is recovered with a dense one."""
    live = tmp_path / "live-0"
    log = PartitionLog.open(live, LogConfig(index_interval_bytes=100_000, max_index_size=48))
    for i in range(40):
        log.append_records([SimpleRecord(b"value-%d" % i * 5, b"k%d" % i, timestamp=1000 + i)])
    crash = tmp_path / "crash-0"
    shutil.copytree(live, crash)  # the files as a SIGKILL would leave them (no clean-shutdown marker)
    log.close()
    with PartitionLog.open(crash, LogConfig(index_interval_bytes=50, max_index_size=48)) as rec:
        assert not rec.had_clean_shutdown and rec.recovered_segments == [0]
        assert [r.value for r in rec.iter_records()] == [b"value-%d" % i * 5 for i in range(40)]
        for i in range(40):
            got = rec.offset_for_timestamp(1000 + i)
            assert got is not None and got.offset == i
            assert rec.lookup_offset(i) is not None
    assert verify_path(crash).ok


def test_short_or_negative_index_and_unit_reads_raise_typed_errors() -> None:
    """Fuzzing: a ConsumeQueue unit or an index header shorter than its fixed size, and a negative
    Kafka index slot, raised ``struct.error`` instead of a typed error."""
    with pytest.raises(TruncatedRecordError):
        decode_unit(b"\0" * 19)
    with pytest.raises(TruncatedRecordError):
        decode_unit(b"\0" * 29, 14)
    with pytest.raises(CorruptIndexError):
        IndexHeader.decode(b"\0" * 35)
    for fn in (decode_offset_entry, decode_time_entry):
        with pytest.raises(TruncatedRecordError):
            fn(b"\0" * 24, -1, 0)


def test_index_chain_never_reads_past_the_file_when_the_header_lies() -> None:
    """Fuzzing: an IndexFile header claiming more items than the file holds (index count 1000 in a
    16-item file) made a key lookup read past the buffer (``struct.error``)."""
    buf = bytearray(index_file_size(8, 16))
    struct.pack_into(">qqqqii", buf, 0, 0, 0, 0, 0, 1, 1000)
    struct.pack_into(">i", buf, 40 + 3 * 4, 500)  # slot of hash 3 → item 500
    struct.pack_into(">i", buf, 40 + 4 * 4, 16)  # slot of hash 4 → item 16 (one past the last)
    ib = IndexFileBuffer(buf, 8, 16)
    for h in (3, 4):
        out: list[int] = []
        ib.select_by_hash(out, h, 64, 0, 2**62)
        assert out == []


def test_message_id_with_spaces_is_a_typed_error() -> None:
    """Fuzzing: ``bytes.fromhex`` skips spaces, so a 32-character id with spaces decoded to too few
    bytes and the host parser raised ``ipaddress.AddressValueError``."""
    with pytest.raises(InvalidArgumentError):
        decode_message_id("7F 00 01 00 00 27 11 00000000000000FF")
    assert decode_message_id("7F0000010000271100000000000000FF")[1] == 255
