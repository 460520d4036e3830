"""storage/kafka/layout: the one home of Kafka segment file naming and listing."""

from __future__ import annotations

from pathlib import Path

import pytest

from mqstore.errors import InvalidArgumentError, StoreNotFoundError
from mqstore.storage.kafka import layout


def _touch(d: Path, *names: str) -> None:
    d.mkdir(parents=True, exist_ok=True)
    for n in names:
        (d / n).write_bytes(b"")


def test_names() -> None:
    assert layout.segment_file_name(42, ".log") == "00000000000000000042.log"
    with pytest.raises(InvalidArgumentError):
        layout.segment_file_name(-1, ".log")
    assert layout.split_segment_name("00000000000000000042.timeindex") == (42, ".timeindex")
    assert layout.split_segment_name("00000000000000000042.log.deleted") == (42, ".log.deleted")
    assert layout.split_segment_name("leader-epoch-checkpoint") is None
    assert layout.split_segment_name("0000000000000000004\u00b2.log") is None
    assert layout.parse_base_offset("/x/00000000000000000042.index") == 42
    with pytest.raises(InvalidArgumentError):
        layout.parse_base_offset("/x/partition.metadata")


def test_listing_orders_by_offset_then_suffix(tmp_path: Path) -> None:
    d = tmp_path / "orders-3"
    _touch(d, "00000000000000000100.timeindex", "00000000000000000100.log", "00000000000000000100.index",
           "00000000000000000000.log", "00000000000000000000.index", "00000000000000000007.txnindex",
           "00000000000000000200.log.deleted", "leader-epoch-checkpoint", "x.log")
    (d / "00000000000000000300.log").mkdir()
    assert [p.name for p in layout.log_files(d)] == ["00000000000000000000.log", "00000000000000000100.log"]
    assert [p.name for p in layout.segment_files(d, layout.DUMP_SUFFIXES)] == [
        "00000000000000000000.log", "00000000000000000000.index",
        "00000000000000000100.log", "00000000000000000100.index", "00000000000000000100.timeindex"]
    assert [p.name for p in layout.segment_files(d, layout.INDEX_SUFFIXES)] == [
        "00000000000000000000.index", "00000000000000000007.txnindex",
        "00000000000000000100.index", "00000000000000000100.timeindex"]


def test_segment_logs_of_a_path(tmp_path: Path) -> None:
    d = tmp_path / "orders-3"
    _touch(d, "00000000000000000000.log", "00000000000000000000.index")
    assert layout.segment_logs(d) == [d / "00000000000000000000.log"]
    assert layout.segment_logs(d / "00000000000000000000.index") == [d / "00000000000000000000.log"]
    with pytest.raises(InvalidArgumentError):
        layout.segment_logs(_file(d, "notes.txt"))
    with pytest.raises(StoreNotFoundError):
        layout.segment_logs(tmp_path / "missing")
    empty = tmp_path / "empty-0"
    empty.mkdir()
    with pytest.raises(StoreNotFoundError):
        layout.segment_logs(empty)


def _file(d: Path, name: str) -> Path:
    (d / name).write_text("x")
    return d / name


def test_partition_dirs(tmp_path: Path) -> None:
    _touch(tmp_path / "orders-0", "00000000000000000000.log")
    _touch(tmp_path / "orders-1", "00000000000000000000.index")  # no segment
    _touch(tmp_path / "__consumer_offsets-12", "00000000000000000000.log")
    _touch(tmp_path / "notapartition", "00000000000000000000.log")
    assert [p.name for p in layout.partition_dirs(tmp_path)] == ["__consumer_offsets-12", "orders-0"]
    assert layout.topic_partition_of(tmp_path / "__consumer_offsets-12") == ("__consumer_offsets", 12)
    assert layout.topic_partition_of(tmp_path / "notapartition") == ("notapartition", 0)


def test_kraft_names_and_presence(tmp_path: Path) -> None:
    classify_partition_file, has_kraft_files = layout.classify_partition_file, layout.has_kraft_files
    snapshot_id, snapshot_kind = layout.snapshot_id, layout.snapshot_kind
    snap = "00000000000000000042-0000000003.checkpoint"
    assert snapshot_kind(snap) == "snapshot" and snapshot_id(snap) == (42, 3)
    assert snapshot_kind(snap + ".part") == "snapshot_part" and snapshot_kind(snap + ".deleted") == "snapshot_deleted"
    assert snapshot_kind("bootstrap.checkpoint") == "bootstrap" and snapshot_kind("00000000000000000000.log") is None
    assert classify_partition_file(snap).kind == "kraft_snapshot" and classify_partition_file(snap).base_offset == 42
    assert classify_partition_file("quorum-state").kind == "quorum_state"
    plain = tmp_path / "orders-0"
    plain.mkdir()
    (plain / "00000000000000000000.log").write_bytes(b"")
    assert not has_kraft_files(plain) and not has_kraft_files(plain / "00000000000000000000.log")
    (plain / "quorum-state").write_text("{}")
    assert has_kraft_files(plain) and has_kraft_files(plain / "quorum-state")
    meta = tmp_path / "__cluster_metadata-0"
    meta.mkdir()
    assert has_kraft_files(meta)  # the metadata topic's segments are checked even without snapshots
    other = tmp_path / "t-1"
    other.mkdir()
    (other / snap).write_bytes(b"")
    assert has_kraft_files(other) and has_kraft_files(other / snap)


def test_log_dir_entries(tmp_path: Path) -> None:
    classify_log_dir_entry, is_log_dir = layout.classify_log_dir_entry, layout.is_log_dir
    assert classify_log_dir_entry("recovery-point-offset-checkpoint", False) == "recovery_point_checkpoint"
    assert classify_log_dir_entry("meta.properties.tmp", False) == "checkpoint_tmp"
    assert classify_log_dir_entry("orders-0", True) == "partition_dir"
    assert classify_log_dir_entry("remote-log-index-cache", True) == "remote_index_cache"
    assert classify_log_dir_entry("bootstrap.checkpoint", False) == "kraft_bootstrap"
    (tmp_path / ".lock").write_bytes(b"")
    (tmp_path / "notes.txt").write_bytes(b"")
    assert not is_log_dir(tmp_path)  # a lock and unknown files are no evidence
    (tmp_path / "orders-0").mkdir()
    assert is_log_dir(tmp_path)
    (tmp_path / "00000000000000000000.log").write_bytes(b"")
    assert not is_log_dir(tmp_path)  # segments at the top: a partition directory
