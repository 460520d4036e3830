"""storage/rocketmq/layout: the one home of file naming, segment listing and geometry detection,
and the configuration rule of MessageStore.open (explicit wins, absent is detected)."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from mqstore import MessageStore, StoreConfig
from mqstore.errors import GeometryMismatchError, InvalidArgumentError
from mqstore.formats.rocketmq.indexfile import IndexHeader, index_file_size
from mqstore.storage.rocketmq import layout

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "rocketmq"


def _store(tmp_path: Path, **kw: int) -> Path:
    cfg = dict(commit_log_file_size=8192, consume_queue_file_size=200, hash_slot_num=10, index_num=40,
               background_services=False)
    cfg.update(kw)
    root = tmp_path / "store"
    with MessageStore.open(root, StoreConfig(**cfg)) as s:  # type: ignore[arg-type]
        for i in range(400):
            s.put("T", b"x" * 60, queue_id=i % 2, keys=[f"k{i}"])
    return root


def test_offset_names_and_listing(tmp_path: Path) -> None:
    assert layout.segment_name(1073741824) == "00000000001073741824"
    with pytest.raises(InvalidArgumentError):
        layout.segment_name(-1)
    d = tmp_path / "commitlog"
    d.mkdir()
    for name in ("00000000000000008192", "00000000000000000000", "abc", "0000000000000000000\u00b2"):
        (d / name).write_bytes(b"")
    (d / "00000000000000016384").mkdir()
    assert [p.name for p in layout.segment_files(d)] == ["00000000000000000000", "00000000000000008192"]


def test_index_file_names_roll_and_skip_existing(tmp_path: Path) -> None:
    assert layout.index_file_name(1700000000487) == "20231114221320487"
    assert layout.index_file_name_to_ms("20231114221320487") == 1700000000487
    with pytest.raises(InvalidArgumentError):
        layout.index_file_name_to_ms("latest")
    # not greater than the previous name: 1 ms after it
    assert layout.next_index_file_name(None, "20231114221320487", 1700000000000) == "20231114221320488"
    # a file of that name exists: 1 ms later again, as often as needed
    (tmp_path / "20231114221320488").write_bytes(b"")
    (tmp_path / "20231114221320489").write_bytes(b"")
    assert layout.next_index_file_name(tmp_path, "20231114221320487", 1700000000000) == "20231114221320490"


def test_detect_geometry_of_the_real_broker_fixture() -> None:
    root = FIXTURES / "basic" / "store"
    assert layout.detect_geometry(root) == {"commit_log_file_size": 16384, "consume_queue_file_size": 320,
                                            "hash_slot_num": 100, "index_num": 1000}


def test_index_geometry_from_a_full_file_header_before_ratios(tmp_path: Path) -> None:
    # 7 slots, 30 items: size 40 + 28 + 600 = 668 is also 40 + 4 s + 20 * 4 s for no integer s,
    # and 668 = 40 + 4 * 157: only the header of the full file tells the item count.
    size = index_file_size(7, 30)
    a, b = tmp_path / "20231114221320487", tmp_path / "20231114221320999"
    a.write_bytes(IndexHeader(index_count=30, hash_slot_count=7).encode() + bytes(size - 40))
    b.write_bytes(IndexHeader(index_count=3, hash_slot_count=2).encode() + bytes(size - 40))
    assert layout.detect_index_geometry([a, b]) == (7, 30)
    # without the full file, the first ratio the size and the header allow (none here)
    assert layout.detect_index_geometry([b]) is None
    # a truncated newest file does not hide the geometry
    b.write_bytes(b"\0" * 100)
    assert layout.detect_index_geometry([a, b]) is None  # a alone: no full file, no ratio fits
    c = tmp_path / "20231114221321000"
    c.write_bytes(IndexHeader(index_count=2, hash_slot_count=1).encode() + bytes(size - 40))
    assert layout.detect_index_geometry([a, c, b]) == (7, 30)


def test_index_geometry_defaults_when_the_size_fits(tmp_path: Path) -> None:
    p = tmp_path / "20231114221320487"
    with open(p, "wb") as fh:
        fh.write(IndexHeader(index_count=5).encode())
        fh.truncate(index_file_size(5_000_000, 20_000_000))
    assert layout.detect_index_geometry([p]) == (5_000_000, 20_000_000)


def test_open_detects_a_store_of_any_geometry(tmp_path: Path) -> None:
    root = _store(tmp_path)
    assert layout.detect_geometry(root) == {"commit_log_file_size": 8192, "consume_queue_file_size": 200,
                                            "hash_slot_num": 10, "index_num": 40}
    with MessageStore.open(root, read_only=True) as s:  # no configuration: all detected
        assert s.config.commit_log_file_size == 8192
        assert (s.config.hash_slot_num, s.config.index_num) == (10, 40)
        assert len(s.get("T", 0, 0, 1000)) == 200
    with MessageStore.open(root, {"background_services": False}) as s:  # a mapping: the rest detected
        assert s.config.consume_queue_file_size == 200
        assert len(s.query_by_key("T", "k7")) == 1


def test_explicit_configuration_wins_and_a_mismatch_is_an_error(tmp_path: Path) -> None:
    root = _store(tmp_path)
    with pytest.raises(GeometryMismatchError):
        MessageStore.open(root, StoreConfig(background_services=False), read_only=True)
    with pytest.raises(GeometryMismatchError):
        MessageStore.open(root, {"commit_log_file_size": 16384}, read_only=True)


def test_resolve_config_keeps_the_index_pair_together(tmp_path: Path) -> None:
    root = _store(tmp_path)
    cfg = layout.resolve_config(root, None, hash_slot_num=10)
    assert (cfg.hash_slot_num, cfg.index_num) == (10, StoreConfig().index_num)
    assert cfg.commit_log_file_size == 8192


def test_commitlog_segments_report_the_odd_size(tmp_path: Path) -> None:
    root = _store(tmp_path)
    segs = layout.commitlog_segments(root)
    assert len(segs) > 2 and {s.size for s in segs} == {8192}
    odd = Path(segs[1].path)
    with open(odd, "r+b") as fh:
        fh.truncate(4096)
    with pytest.raises(GeometryMismatchError) as ei:
        layout.commitlog_segments(root)
    assert ei.value.path == str(odd)
    assert layout.detect_segment_size(root) == 8192  # most files agree
    assert [s.path for s in layout.commitlog_segments(root, size=8192)] == [s.path for s in segs if s.path != str(odd)]


def test_cli_and_spark_planner_detect_the_same_geometry(tmp_path: Path) -> None:
    from mqstore.cli.rocketmq import _config
    from mqstore.spark.query import _store_geometry

    root = tmp_path / "copy"
    shutil.copytree(FIXTURES / "basic" / "store", root)
    cli = _config(root)
    assert _store_geometry(root, None, None) == (cli.commit_log_file_size, cli.hash_slot_num, cli.index_num)
