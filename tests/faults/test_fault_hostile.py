"""Hostile input and isolation: topic names and keys that try to escape or break the store,
symlinks pointing outside it, huge length fields and decompression bombs.  Nothing may write
outside the store directory, exhaust memory, or raise anything but a typed error."""

from __future__ import annotations

import gzip
import os
import struct
import subprocess
import sys
from pathlib import Path

import pytest

from mqstore import MessageStore, StoreConfig
from mqstore.errors import (
    CorruptDataError,
    InvalidArgumentError,
    InvalidKeyError,
    InvalidTopicError,
    MqStoreError,
    PathOutsideStoreError,
)
from mqstore.formats.kafka.batch import SimpleRecord, decode_batch, encode_batch
from mqstore.formats.rocketmq.record import check_record
from mqstore.kafka import PartitionLog


def _cfg() -> StoreConfig:
    return StoreConfig(commit_log_file_size=64 * 1024, consume_queue_file_size=2000, hash_slot_num=16, index_num=64,
                       background_services=False)


def _tree(root: Path) -> set[str]:
    return {str(p.relative_to(root)) for p in root.rglob("*")}


BAD_TOPICS = ["../escape", "a/b", "/abs", "..", ".", "x\0y", "T" * 40_000, "\udcff", "日本", "", "a b"]


@pytest.mark.parametrize("topic", BAD_TOPICS, ids=range(len(BAD_TOPICS)))
def test_hostile_topics_are_refused_everywhere(tmp_path: Path, topic: str) -> None:
    store = tmp_path / "box" / "store"
    with MessageStore.open(store, _cfg()) as s:
        before = _tree(tmp_path)
        for call in (lambda: s.put(topic, b"x"), lambda: s.get(topic, 0, 0), lambda: s.query_by_key(topic, "k"),
                     lambda: s.offset_for_time(topic, 0, 0), lambda: s.max_offset(topic, 0)):
            with pytest.raises(InvalidTopicError):
                call()
        assert _tree(tmp_path) == before


@pytest.mark.parametrize("key", ["\udcff", "a\x01b", "a\x02b", "k" * 70_000])
def test_hostile_keys_are_typed_errors(tmp_path: Path, key: str) -> None:
    with MessageStore.open(tmp_path, _cfg()) as s:
        with pytest.raises(InvalidArgumentError):
            s.put("T", b"x", keys=[key])
        with pytest.raises(InvalidArgumentError):
            s.put("T", b"x", properties={"p": key})
        r = s.put("T", b"ok", keys=["../../etc/passwd", "nul\0inside"])  # just text: stored, found
        assert [m.commit_log_offset for m in s.query_by_key("T", "../../etc/passwd")] == [r.commit_log_offset]
        assert [m.commit_log_offset for m in s.query_by_key("T", "nul\0inside")] == [r.commit_log_offset]


def test_non_utf8_key_was_an_untyped_error(tmp_path: Path) -> None:
    """Regression (hostile-input campaign): a key with a lone surrogate raised UnicodeEncodeError."""
    with MessageStore.open(tmp_path, _cfg()) as s:
        with pytest.raises(InvalidKeyError):
            s.put("T", b"x", keys=["ok", "bad\udcff"])


def test_rocketmq_symlink_out_of_the_store_is_refused(tmp_path: Path) -> None:
    store, outside = tmp_path / "store", tmp_path / "outside"
    outside.mkdir()
    with MessageStore.open(store, _cfg()) as s:
        s.put("T", b"x")
    (store / "consumequeue" / "Evil").mkdir(parents=True)
    os.symlink(outside, store / "consumequeue" / "Evil" / "0")
    with pytest.raises(PathOutsideStoreError):
        with MessageStore.open(store, _cfg()) as s:
            s.put("Evil", b"x")
    assert list(outside.iterdir()) == []


def test_kafka_symlinked_segment_out_of_the_partition_is_refused(tmp_path: Path) -> None:
    """Regression (hostile-input campaign): a ``.log`` symlinked outside the partition directory
    was opened and appended to, writing outside the store."""
    d, outside = tmp_path / "t-0", tmp_path / "outside"
    outside.mkdir()
    with PartitionLog.open(d) as log:
        log.append_records([SimpleRecord(b"a")])
    (outside / "evil.log").write_bytes(b"")
    os.symlink(outside / "evil.log", d / "00000000000000000100.log")
    with pytest.raises(PathOutsideStoreError):
        PartitionLog.open(d)
    assert (outside / "evil.log").stat().st_size == 0


def test_huge_length_fields_never_allocate(tmp_path: Path) -> None:
    """Length fields of 2 GiB inside small buffers: rejected from the buffer size, no allocation."""
    rec = bytearray(200)
    struct.pack_into(">ii", rec, 0, 2**31 - 1, -626843481)  # TOTALSIZE 2 GiB, magic v1
    assert check_record(bytes(rec)).size == -1
    batch = bytearray(encode_batch([SimpleRecord(b"v")]))
    struct.pack_into(">i", batch, 8, 2**31 - 1)  # batch length 2 GiB
    with pytest.raises(MqStoreError):
        decode_batch(bytes(batch))


def test_gzip_bomb_batch_is_bounded_in_a_child(tmp_path: Path) -> None:
    """A 64 KiB gzip batch that inflates to 64 MiB: decoding must fail with a typed error or stay
    within a memory limit; run in a child with an address-space limit so a failure cannot take
    the test runner down."""
    body = gzip.compress(b"\0" * (64 * 1024 * 1024), compresslevel=9)  # 64 MiB of zeros → ~64 KiB
    bomb = tmp_path / "bomb.bin"
    batch = bytearray(encode_batch([SimpleRecord(b"x")], compression=1))
    head = batch[:61]
    struct.pack_into(">i", head, 8, 61 - 12 + len(body))
    data = bytearray(head + body)
    import crc32c

    struct.pack_into(">I", data, 17, crc32c.crc32c(bytes(data[21:])))
    bomb.write_bytes(bytes(data))
    code = ("import resource, sys\nresource.setrlimit(resource.RLIMIT_AS, (1_500_000_000, 1_500_000_000))\n"
            "from mqstore.formats.kafka.batch import decode_batch\nfrom mqstore.errors import MqStoreError\n"
            "try:\n    decode_batch(open(sys.argv[1], 'rb').read())\nexcept MqStoreError as e:\n"
            "    print('typed', type(e).__name__)\nelse:\n    print('decoded')\n")
    p = subprocess.run([sys.executable, "-c", code, str(bomb)], capture_output=True, text=True)
    assert p.returncode == 0 and p.stdout.startswith("typed"), (p.returncode, p.stdout, p.stderr[-500:])
    with pytest.raises(CorruptDataError):
        decode_batch(bytes(data))
