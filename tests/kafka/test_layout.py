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
