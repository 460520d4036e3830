"""Bad input of any kind gets a typed error naming the file and offset, or is repaired."""

from __future__ import annotations

import random
import struct
from pathlib import Path

import pytest
from kafka_support import batch

from mqstore.errors import (
    CorruptDataError,
    CrcMismatchError,
    InvalidArgumentError,
    StoreNotFoundError,
    TruncatedRecordError,
    UnknownMagicError,
    UnsupportedFormatError,
)
from mqstore.formats.kafka import (
    Compression,
    SimpleRecord,
    decode_batch,
    decode_batch_header,
    decode_legacy_message,
    decode_varint,
    encode_batch,
    encode_legacy_message,
    iter_legacy_records,
)
from mqstore.kafka import LogConfig, LogSegment, PartitionLog, rebuild_indexes, verify_path
from mqstore.kernels.kafka.records import decode_records_columnar


def test_truncated_and_bad_headers() -> None:
    data = batch(0, count=3)
    with pytest.raises(TruncatedRecordError):
        decode_batch_header(data[:40])
    with pytest.raises(TruncatedRecordError):
        decode_batch(data[:-1])
    bad_magic = bytearray(data)
    bad_magic[16] = 7
    with pytest.raises(UnknownMagicError):
        decode_batch(bytes(bad_magic))
    with pytest.raises(UnsupportedFormatError, match="legacy"):
        decode_batch(encode_legacy_message(0, b"x"))


def test_bit_flips_raise_crc_errors_with_position() -> None:
    data = batch(0, count=3, compression=Compression.GZIP)
    buf = bytearray(batch(5) + data)
    pos = len(batch(5))
    rnd = random.Random(5)
    for _ in range(50):
        i = pos + rnd.randrange(21, len(data))
        buf[i] ^= 1 << rnd.randrange(8)
        with pytest.raises(CrcMismatchError) as ei:
            decode_batch(bytes(buf), pos, path="seg.log")
        assert ei.value.offset == pos and ei.value.path == "seg.log"
        buf[pos:] = data
    assert decode_batch(bytes(buf), pos).crc_valid


def test_malformed_records_inside_valid_crc() -> None:
    """Structure errors under a correct CRC are typed errors, not crashes or endless loops."""
    rnd = random.Random(11)
    good = encode_batch([SimpleRecord(value=b"abc", key=b"k", headers=[("h", b"v")])] * 3)
    import crc32c

    errors = decoded = 0
    for _ in range(200):
        b = bytearray(good)
        i = rnd.randrange(61, len(b))
        b[i] = rnd.randrange(256)
        struct.pack_into(">I", b, 17, crc32c.crc32c(bytes(b[21:])))
        try:
            batch = decode_batch(bytes(b))
        except CorruptDataError as exc:
            assert exc.message  # a typed error that says what is wrong
            errors += 1
        else:
            assert len(batch.records) == 3  # a byte that still parses gives the declared records
            decoded += 1
    assert errors > 0  # both outcomes are exercised by the seed
    assert decoded > 0


def test_records_count_mismatch_detected() -> None:
    b = bytearray(encode_batch([b"a", b"b"]))
    struct.pack_into(">i", b, 57, 1)  # count says 1, two records present
    import crc32c

    struct.pack_into(">I", b, 17, crc32c.crc32c(bytes(b[21:])))
    with pytest.raises(CorruptDataError, match="declared batch size"):
        decode_batch(bytes(b))


def test_corrupt_compressed_body() -> None:
    b = bytearray(encode_batch([b"a" * 1000] * 5, compression=Compression.ZSTD))
    b[70:80] = b"\xff" * 10
    import crc32c

    struct.pack_into(">I", b, 17, crc32c.crc32c(bytes(b[21:])))
    with pytest.raises(CorruptDataError, match="decompress"):
        decode_batch(bytes(b))


def test_varint_too_long() -> None:
    with pytest.raises(CorruptDataError):
        decode_varint(b"\xff" * 6)
    with pytest.raises(TruncatedRecordError):
        decode_varint(b"\xff\xff")


def test_legacy_messages_read() -> None:
    m0 = encode_legacy_message(5, b"v0", magic=0)
    m1 = encode_legacy_message(6, b"v1", b"k", magic=1, timestamp=77)
    a = decode_legacy_message(m0 + m1, 0)
    b = decode_legacy_message(m0 + m1, len(m0))
    assert (a.offset, a.magic, a.value, a.timestamp) == (5, 0, b"v0", -1)
    assert (b.offset, b.key, b.timestamp) == (6, b"k", 77)
    assert [r.value for r in iter_legacy_records(b)] == [b"v1"]
    broken = bytearray(m1)
    broken[-1] ^= 1
    with pytest.raises(CrcMismatchError):
        decode_legacy_message(bytes(broken))
    cols = decode_records_columnar(m0 + m1 + batch(7))
    assert cols["offset"].tolist() == [5, 6, 7] and cols["timestamp_type"].tolist() == [-1, 0, 0]


def test_legacy_segment_recovers_and_verifies(tmp_path: Path) -> None:
    log = tmp_path / "00000000000000000000.log"
    log.write_bytes(b"".join(encode_legacy_message(i, b"x%d" % i, magic=1, timestamp=100 + i) for i in range(30)))
    r = rebuild_indexes(log, tmp_path, index_interval_bytes=50)
    assert r.batches == 30 and r.next_offset == 30 and r.offset_entries > 0
    rep = verify_path(tmp_path)
    assert rep.ok, rep.problems
    with LogSegment.open(log) as seg:
        assert seg.find_offset_by_timestamp(115, 0)[:2] == (115, 15)


def test_truncated_tail_repaired_by_segment_recover(tmp_path: Path) -> None:
    seg = LogSegment.create(tmp_path, 0, LogConfig(index_interval_bytes=10))
    data = b"".join(batch(i) for i in range(10))
    seg.append(9, 90, 9, data)
    seg.close()
    with open(seg.log_path, "ab") as f:
        f.write(batch(10)[:-5])
    seg = LogSegment.open(seg.log_path, LogConfig(index_interval_bytes=10), read_only=False)
    assert seg.recover() == len(batch(10)) - 5
    assert seg.read_next_offset() == 10
    seg.close()
    assert verify_path(seg.log_path).ok


def test_offsets_going_backwards_is_an_error_not_data_loss(tmp_path: Path) -> None:
    d = tmp_path / "t-0"
    d.mkdir()
    log = d / "00000000000000000000.log"
    content = batch(0) + batch(5) + batch(3) + batch(9)
    log.write_bytes(content)
    with pytest.raises(CorruptDataError, match="backwards"):
        rebuild_indexes(log, tmp_path, index_interval_bytes=0)
    with pytest.raises(CorruptDataError):
        PartitionLog.open(d, LogConfig(index_interval_bytes=0))
    assert log.read_bytes() == content  # nothing destroyed
    assert not verify_path(log).ok


def test_missing_paths_and_bad_names(tmp_path: Path) -> None:
    with pytest.raises(StoreNotFoundError):
        LogSegment.open(tmp_path / "00000000000000000000.log")
    with pytest.raises(InvalidArgumentError):
        LogSegment.open(tmp_path / "x.index")
    (tmp_path / "abc.log").write_bytes(b"")
    with pytest.raises(InvalidArgumentError):
        LogSegment.open(tmp_path / "abc.log")
    with pytest.raises(StoreNotFoundError):
        PartitionLog.open(tmp_path / "nope", read_only=True)
    with pytest.raises(StoreNotFoundError):
        verify_path(tmp_path / "nope")
    (tmp_path / "empty-0").mkdir()
    with pytest.raises(StoreNotFoundError):
        PartitionLog.open(tmp_path / "empty-0", read_only=True)
    with pytest.raises(InvalidArgumentError):
        LogConfig(segment_bytes=3)
    with pytest.raises(InvalidArgumentError):
        LogConfig.from_properties({"segment.bytes": "lots"})
    assert LogConfig.from_properties({"segment.bytes": "1000", "index.interval.bytes": 7}).index_interval_bytes == 7


def test_random_garbage_files_never_crash(tmp_path: Path) -> None:
    rnd = random.Random(99)
    for i in range(20):
        p = tmp_path / f"{i:020d}.log"
        p.write_bytes(bytes(rnd.randrange(256) for _ in range(rnd.randrange(0, 3000))))
        size = p.stat().st_size
        rep = verify_path(p)
        assert rep.ok == (size < 18), rep.problems
        try:
            r = rebuild_indexes(p, tmp_path)
        except CorruptDataError as exc:  # e.g. offsets of garbage batches overflow: typed, with a position
            assert exc.path == str(p) and exc.offset is not None
        else:
            assert r.valid_bytes + r.truncated_bytes == size
