"""Regression tests for bugs the fault campaigns found (one test per bug, smallest reproduction)."""

from __future__ import annotations

import shutil
import struct
from pathlib import Path

import pytest

from mqstore import MessageStore, StoreConfig
from mqstore.errors import (
    CorruptDataError,
    CorruptIndexError,
    CrcMismatchError,
    InvalidArgumentError,
    TruncatedRecordError,
)
from mqstore.formats.kafka.index_entry import decode_offset_entry, decode_time_entry
from mqstore.formats.rocketmq.consumequeue import decode_unit
from mqstore.formats.rocketmq.indexfile import IndexFileBuffer, IndexHeader, index_file_size
from mqstore.formats.rocketmq.msgid import decode_message_id
from mqstore.kafka import LogConfig, PartitionLog, SimpleRecord, verify_path
from mqstore.storage.kafka.log import CLEAN_SHUTDOWN_FILE
from mqstore.storage.rocketmq.store import RocketMQStore
from mqstore.storage.rocketmq.verify import verify_store


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


def _flip_byte(path: Path, pos: int, mask: int = 0x10) -> None:
    data = bytearray(path.read_bytes())
    data[pos] ^= mask
    path.write_bytes(bytes(data))


def test_readers_refuse_records_whose_body_or_header_was_flipped(tmp_path: Path) -> None:
    """Corruption campaign: ``get`` read records without the body CRC and ``query_by_key`` too, and
    no reader checked the header fields (no CRC covers them): a flipped body, queue offset or
    physical offset came back as a valid message."""
    with MessageStore.open(tmp_path, _small()) as s:
        rs = [s.put("T", b"body-%d" % i * 4, keys=[f"k{i}"]) for i in range(3)]
    seg = tmp_path / "commitlog" / f"{0:020d}"
    _flip_byte(seg, seg.read_bytes().index(b"body-0body-0") + 3)  # inside the body of message 0
    _flip_byte(seg, rs[1].commit_log_offset + 27)  # low byte of QUEUEOFFSET of message 1
    _flip_byte(seg, rs[2].commit_log_offset + 35)  # low byte of PHYSICALOFFSET of message 2
    cfg = _small()
    cfg.check_crc_on_recover = False  # as for a segment older than the three recovery re-checks
    with MessageStore.open(tmp_path, cfg, read_only=True) as s:
        with pytest.raises(CorruptDataError):
            s.get("T", 0, 0, 1)
        with pytest.raises(CorruptDataError):
            s.query_by_key("T", "k0")
        with pytest.raises(CorruptDataError):
            s.get("T", 0, 1, 1)
        with pytest.raises(CorruptDataError):
            s.get_by_offset(rs[2].commit_log_offset)
    rep = verify_store(tmp_path, _small())
    assert len(rep.problems) >= 3


def test_verify_cross_checks_units_and_index_items_against_records(tmp_path: Path) -> None:
    """Corruption campaign: a flipped ConsumeQueue tags code or IndexFile time difference was not
    reported by ``verify``."""
    with MessageStore.open(tmp_path, _small()) as s:
        for i in range(4):
            s.put("T", b"x%d" % i, keys=[f"k{i}"], tags="TagA")
    assert verify_store(tmp_path, _small()).ok
    cq = tmp_path / "consumequeue" / "T" / "0" / f"{0:020d}"
    _flip_byte(cq, 20 + 19)  # tags code of unit 1
    idx = next((tmp_path / "index").iterdir())
    items = 40 + 16 * 4
    _flip_byte(idx, items + 3 * 20 + 15, 0x01)  # time difference of item 3
    problems = verify_store(tmp_path, _small()).problems
    assert any("tags code" in p for p in problems) and any("time difference" in p for p in problems), problems


def test_kafka_reader_refuses_a_batch_with_a_bad_crc(tmp_path: Path) -> None:
    """Corruption campaign: after a clean shutdown nothing re-validates old segments, and
    ``iter_records`` decoded batches without their CRC, handing out flipped values."""
    d = tmp_path / "t-0"
    with PartitionLog.open(d, LogConfig(segment_bytes=300)) as log:
        for i in range(10):
            log.append_records([SimpleRecord(b"value-%d" % i * 3, b"k%d" % i, timestamp=1000 + i)])
    first = sorted(d.glob("*.log"))[0]
    _flip_byte(first, first.stat().st_size - 5)
    with PartitionLog.open(d, LogConfig(segment_bytes=300)) as log:
        assert log.had_clean_shutdown
        with pytest.raises(CrcMismatchError):
            list(log.iter_records())
