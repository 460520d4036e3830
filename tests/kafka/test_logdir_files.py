"""Codecs of the log-directory text files (formats/kafka/logdir_files.py) and the name rules."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from mqstore.errors import CorruptDataError
from mqstore.formats.kafka.logdir_files import (
    EpochEntry,
    encode_clean_shutdown,
    encode_leader_epoch_checkpoint,
    encode_offset_checkpoint,
    is_kafka_uuid,
    parse_clean_shutdown,
    parse_leader_epoch_checkpoint,
    parse_meta_properties,
    parse_offset_checkpoint,
    parse_partition_metadata,
)
from mqstore.storage.kafka.logdir import (
    PartitionDirName,
    classify_log_dir_entry,
    classify_partition_file,
    parse_partition_dir_name,
)

topics = st.text(alphabet="abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789._-", min_size=1, max_size=30)


@given(st.dictionaries(st.tuples(topics, st.integers(0, 10_000)), st.integers(-1, (1 << 63) - 1), max_size=30))
def test_offset_checkpoint_round_trip(offsets: dict[tuple[str, int], int]) -> None:
    data = encode_offset_checkpoint(offsets)
    c = parse_offset_checkpoint(data)
    assert c.version == 0 and c.offsets == offsets


@given(st.lists(st.builds(EpochEntry, st.integers(0, 1 << 31), st.integers(0, 1 << 62)), max_size=20))
def test_leader_epoch_checkpoint_round_trip(entries: list[EpochEntry]) -> None:
    assert parse_leader_epoch_checkpoint(encode_leader_epoch_checkpoint(entries)).entries == entries


@given(st.integers(-1, 1 << 40))
def test_clean_shutdown_round_trip(epoch: int) -> None:
    c = parse_clean_shutdown(encode_clean_shutdown(epoch))
    assert (c.version, c.broker_epoch) == (0, epoch)


def test_offset_checkpoint_exact_text() -> None:
    assert encode_offset_checkpoint({("orders", 0): 150, ("__consumer_offsets", 49): 7}) == \
        b"0\n2\norders 0 150\n__consumer_offsets 49 7\n"
    assert parse_offset_checkpoint(b"").offsets == {}  # Kafka reads an empty file as no entry
    assert parse_offset_checkpoint(b"0\n0\n").offsets == {}


@pytest.mark.parametrize(("data", "message"), [
    (b"0\n3\norders 0 1\norders 1 2\n", "truncated checkpoint: expected 3 entries but found only 2"),
    (b"0\n1\norders 0 1\norders 1 2\n", "expected 1 entries but found more (2)"),
    (b"1\n0\n", "unrecognised checkpoint version 1 (expected 0)"),
    (b"0\n", "truncated checkpoint: no entry count line"),
    (b"zero\n0\n", "line 1: version is not an integer: 'zero'"),
    (b"0\n1\norders 0\n", "line 3: malformed entry 'orders 0' (expected 3 fields)"),
    (b"0\n1\norders x 5\n", "line 3: partition is not an integer: 'x'"),
    (b"0\n1\norders 0 5x\n", "line 3: offset is not an integer: '5x'"),
    (b"\xff\xfe\n", "not UTF-8 text (byte 0)"),
    (b"0\n-1\n", "line 2: negative entry count -1"),
])
def test_offset_checkpoint_garbage(data: bytes, message: str) -> None:
    with pytest.raises(CorruptDataError) as ei:
        parse_offset_checkpoint(data, path="/x/recovery-point-offset-checkpoint")
    assert ei.value.message == message
    assert "/x/recovery-point-offset-checkpoint" in str(ei.value)


def test_meta_properties_versions() -> None:
    m = parse_meta_properties(b"#\n#Mon Nov 24\nnode.id=3\ndirectory.id=EBESExQVFhcYGRobHB0eHw\nversion=1\n"
                              b"cluster.id=q1Sh-9_ISia_zwGINzRvyQ\n")
    assert (m.version, m.node_id, m.cluster_id, m.directory_id, m.other) == \
        (1, 3, "q1Sh-9_ISia_zwGINzRvyQ", "EBESExQVFhcYGRobHB0eHw", {})
    z = parse_meta_properties(b"version=0\nbroker.id=0\ncluster.id=abc\nextra.key = v\n")
    assert (z.version, z.node_id, z.cluster_id, z.directory_id, z.other) == (0, 0, "abc", None, {"extra.key": "v"})


@pytest.mark.parametrize(("data", "message"), [
    (b"\x00\x01garbage", "meta.properties has no version"),
    (b"version=7\nnode.id=1\ncluster.id=a\n", "meta.properties version 7 is not 0 or 1"),
    (b"version=1\ncluster.id=a\n", "meta.properties version 1 has no node.id"),
    (b"version=1\nnode.id=1\n", "meta.properties version 1 has no cluster.id"),
    (b"version=1\nnode.id=one\ncluster.id=a\n", "node.id is not an integer: 'one'"),
    (b"version=1\nnode.id=1\ncluster.id=a\ndirectory.id=nope\n", "meta.properties directory.id is not a Kafka Uuid: 'nope'"),
])
def test_meta_properties_garbage(data: bytes, message: str) -> None:
    with pytest.raises(CorruptDataError) as ei:
        parse_meta_properties(data)
    assert ei.value.message == message


def test_partition_metadata_and_clean_shutdown() -> None:
    pm = parse_partition_metadata(b"version: 0\ntopic_id: AAECAwQFBgcICQoLDA0ODw\n")
    assert (pm.version, pm.topic_id) == (0, "AAECAwQFBgcICQoLDA0ODw")
    for bad, msg in ((b"version: 0\n", "truncated partition.metadata (expected version and topic_id lines)"),
                     (b"version: 1\ntopic_id: AAECAwQFBgcICQoLDA0ODw\n", "unrecognised partition.metadata version 1"),
                     (b"version: 0\ntopic_id: xyz\n", "line 2: expected 'topic_id: <uuid>', got 'topic_id: xyz'")):
        with pytest.raises(CorruptDataError) as ei:
            parse_partition_metadata(bad)
        assert ei.value.message == msg
    assert parse_clean_shutdown(b"") == parse_clean_shutdown(b"\n")
    assert parse_clean_shutdown(b"").broker_epoch is None
    with pytest.raises(CorruptDataError, match="not JSON"):
        parse_clean_shutdown(b"{broken")
    with pytest.raises(CorruptDataError, match="brokerEpoch"):
        parse_clean_shutdown(b'{"version":0}')


def test_uuid() -> None:
    assert is_kafka_uuid("AAECAwQFBgcICQoLDA0ODw")
    assert not is_kafka_uuid("AAECAwQFBgcICQoLDA0OD")  # 21 characters
    assert not is_kafka_uuid("AAECAwQFBgcICQoLDA0OD+")  # not URL-safe


def test_partition_dir_names() -> None:
    assert parse_partition_dir_name("orders-0") == PartitionDirName("orders", 0, "live")
    assert parse_partition_dir_name("my-topic-12") == PartitionDirName("my-topic", 12, "live")
    assert parse_partition_dir_name("__cluster_metadata-0") == PartitionDirName("__cluster_metadata", 0, "live")
    uid = "0123456789abcdef0123456789abcdef"
    for state in ("delete", "future", "stray"):
        assert parse_partition_dir_name(f"my-topic-3.{uid}-{state}") == PartitionDirName("my-topic", 3, state, uid)
    for bad in ("orders", "orders-", "-0", "orders-x", "orders-1.5", "lost+found"):
        assert parse_partition_dir_name(bad) is None


def test_partition_file_kinds() -> None:
    cases = {
        "00000000000000000100.log": ("log", 100, ".log"),
        "00000000000000000100.index": ("index", 100, ".index"),
        "00000000000000000100.timeindex": ("timeindex", 100, ".timeindex"),
        "00000000000000000100.txnindex": ("txnindex", 100, ".txnindex"),
        "00000000000000000100.snapshot": ("snapshot", 100, ".snapshot"),
        "00000000000000000100.log.deleted": ("deleted", 100, ".log"),
        "00000000000000000100.index.cleaned": ("cleaned", 100, ".index"),
        "00000000000000000100.log.swap": ("swap", 100, ".log"),
        "00000000000000000100-0000000002.checkpoint": ("kraft_snapshot", 100, None),
        "00000000000000000100-0000000002.checkpoint.part": ("kraft_snapshot_partial", 100, None),
        "leader-epoch-checkpoint": ("leader_epoch_checkpoint", None, None),
        "partition.metadata": ("partition_metadata", None, None),
        "leader-epoch-checkpoint.tmp": ("checkpoint_tmp", None, None),
        "quorum-state": ("quorum_state", None, None),
        "100.log": ("unknown", None, None),
        "00000000000000000100.log.bak": ("unknown", None, None),
        "notes.txt": ("unknown", None, None),
    }
    for name, want in cases.items():
        k = classify_partition_file(name)
        assert (k.kind, k.base_offset, k.suffix) == want, name
    assert classify_log_dir_entry("meta.properties", False) == "meta_properties"
    assert classify_log_dir_entry("replication-offset-checkpoint.tmp", False) == "checkpoint_tmp"
    assert classify_log_dir_entry("remote-log-index-cache", True) == "remote_index_cache"
    assert classify_log_dir_entry("orders-0", True) == "partition_dir"
    assert classify_log_dir_entry("backup", True) == "unknown"
    assert classify_log_dir_entry("orders-0", False) == "unknown"
