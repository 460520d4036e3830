"""Golden tests over every fixture case made with the real Kafka classes (spec §9)."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path
from typing import Any

import pytest
from kafka_support import CASES, case_dir, copy_partition, load_manifest

from mqstore.formats.kafka import decode_batch, walk_batches
from mqstore.kafka import LogConfig, LogSegment, OffsetPosition, PartitionLog, rebuild_indexes
from mqstore.kernels.kafka.batches import scan_batches


def _segments_with_dirs(case: str) -> list[tuple[dict[str, Any], Path]]:
    """Manifest segments with the directory holding their files (recovery results included)."""
    m = load_manifest(case)
    out = [(s, case_dir(case) / "segments") for s in m["segments"]]
    return out


def _config(m: dict[str, Any]) -> LogConfig:
    c = m["config"]
    return LogConfig(segment_bytes=c["segment_bytes"], segment_ms=c["segment_ms"],
                     index_interval_bytes=c["index_interval_bytes"], max_index_size=c["max_index_size"])


def _check_batches(data: bytes, batches: list[dict[str, Any]]) -> None:
    refs = list(walk_batches(data))
    assert len(refs) == len(batches)
    for ref, b in zip(refs, batches, strict=True):
        rb = decode_batch(data, ref.position)
        h = rb.header
        got = {
            "position": h.position, "size": h.size, "base_offset": h.base_offset, "last_offset": h.last_offset,
            "magic": h.magic, "count": h.records_count, "base_timestamp": h.base_timestamp,
            "max_timestamp": h.max_timestamp, "timestamp_type": h.timestamp_type.label,
            "compression": int(h.compression), "transactional": h.is_transactional, "control": h.is_control,
            "partition_leader_epoch": h.partition_leader_epoch, "producer_id": h.producer_id,
            "producer_epoch": h.producer_epoch, "base_sequence": h.base_sequence, "crc": h.crc,
            "crc_valid": rb.crc_valid,
        }
        assert got == {k: b[k] for k in got}, b["position"]
        assert len(rb.records) == len(b["records"])
        for r, br in zip(rb.records, b["records"], strict=True):
            assert r.offset == br["offset"]
            assert r.timestamp == br["timestamp"]
            key = None if r.key is None else r.key.decode("latin-1")
            assert key == br["key"]
            assert (-1 if r.value is None else len(r.value)) == br["value_size"]
            assert [x.key for x in r.headers] == br["header_keys"]


@pytest.mark.parametrize("case", CASES)
def test_every_batch_matches_manifest(case: str) -> None:
    for seg, d in _segments_with_dirs(case):
        data = (d / f"{seg['name']}.log").read_bytes()
        assert len(data) == seg["log_size"]
        _check_batches(data, seg["batches"])


@pytest.mark.parametrize("case", CASES)
def test_fixture_files_match_manifest_hashes(case: str) -> None:
    for seg, d in _segments_with_dirs(case):
        for name, meta in seg["files"].items():
            data = (d / name).read_bytes()
            assert len(data) == meta["size"]
            assert hashlib.sha256(data).hexdigest() == meta["sha256"]


def test_recovery_segments_parse() -> None:
    rec = load_manifest("unclean_flush")["recovery"]["segment"]
    data = (case_dir("unclean_flush") / "segments" / "00000000000000000000.log").read_bytes()
    _check_batches(data, rec["batches"])
    cor = load_manifest("corrupt_tail_recover")["corruption"]
    data = (case_dir("corrupt_tail_recover") / "segments" / "00000000000000000000.log").read_bytes()
    _check_batches(data[: cor["segment"]["log_size"]], cor["segment"]["batches"])


# append_groups is excluded on purpose: live multi-batch appends index differently from recovery
# (test_append_groups_rebuild_is_recovery_layout covers it)
@pytest.mark.parametrize("case", ["single_default", "multi_segment_roll_bytes", "corrupt_tail_recover"])
def test_rebuild_matches_closed_segments_byte_for_byte(case: str, tmp_path: Path) -> None:
    m = load_manifest(case)
    c = m["config"]
    for seg, d in _segments_with_dirs(case):
        r = rebuild_indexes(d / f"{seg['name']}.log", tmp_path, index_interval_bytes=c["index_interval_bytes"],
                            max_index_size=c["max_index_size"])
        assert r.truncated_bytes == 0 and r.error is None
        assert r.next_offset == seg["next_offset"]
        for suffix in (".index", ".timeindex"):
            assert (tmp_path / f"{seg['name']}{suffix}").read_bytes() == (d / f"{seg['name']}{suffix}").read_bytes()


def test_append_groups_rebuild_is_recovery_layout(tmp_path: Path) -> None:
    """Recovery indexes every batch on its own, so it differs from the live multi-batch entries."""
    m = load_manifest("append_groups")
    seg = m["segments"][0]
    d = case_dir("append_groups") / "segments"
    r = rebuild_indexes(d / "00000000000000000000.log", tmp_path, index_interval_bytes=2048)
    assert r.batches == len(seg["batches"]) and r.next_offset == seg["next_offset"]
    rebuilt = (tmp_path / "00000000000000000000.index").read_bytes()
    assert rebuilt != (d / "00000000000000000000.index").read_bytes()
    # every rebuilt entry names a batch's last offset and that batch's own position
    import struct

    by_pos = {b["position"]: b["last_offset"] for b in seg["batches"]}
    for rel, pos in struct.iter_unpack(">ii", rebuilt):
        assert by_pos[pos] == rel


def test_unclean_flush_rebuild_equals_recovered_and_valid_prefix(tmp_path: Path) -> None:
    m = load_manifest("unclean_flush")
    c = m["config"]
    d = case_dir("unclean_flush")
    r = rebuild_indexes(d / "segments" / "00000000000000000000.log", tmp_path,
                        index_interval_bytes=c["index_interval_bytes"], max_index_size=c["max_index_size"])
    assert r.truncated_bytes == m["recovery"]["truncated_bytes"] == 0
    rec = m["recovery"]["segment"]
    for suffix in (".index", ".timeindex"):
        mine = (tmp_path / f"00000000000000000000{suffix}").read_bytes()
        assert mine == (d / "recovered" / f"00000000000000000000{suffix}").read_bytes()
        assert len(mine) == rec["files"][f"00000000000000000000{suffix}"]
    live = m["segments"][0]
    oi = (d / "segments" / "00000000000000000000.index").read_bytes()
    n = live["offset_index"]["entries"]
    assert (tmp_path / "00000000000000000000.index").read_bytes() == oi[: n * 8]
    assert not any(oi[n * 8 :])  # zero padding
    ti = (d / "segments" / "00000000000000000000.timeindex").read_bytes()
    nt = live["time_index"]["entries"]
    assert ti[: nt * 12] == (tmp_path / "00000000000000000000.timeindex").read_bytes()[: nt * 12]
    assert not any(ti[nt * 12 :])


def test_corrupt_tail_rebuild_equals_kafka_recovery(tmp_path: Path) -> None:
    m = load_manifest("corrupt_tail_recover")
    cor = m["corruption"]
    d = case_dir("corrupt_tail_recover")
    r = rebuild_indexes(d / "corrupted_input" / "00000000000000000000.log", tmp_path,
                        index_interval_bytes=m["config"]["index_interval_bytes"])
    assert r.log_size == cor["size_before"]
    assert r.truncated_bytes == cor["truncated_bytes"]
    assert r.valid_bytes == cor["segment"]["log_size"] == cor["corrupted_batch_position"]
    assert r.stop == "crc"
    for suffix in (".index", ".timeindex"):
        assert (tmp_path / f"00000000000000000000{suffix}").read_bytes() == \
            (d / "corrupted" / f"00000000000000000000{suffix}").read_bytes()


def test_corrupt_tail_segment_recover_and_probes(tmp_path: Path) -> None:
    m = load_manifest("corrupt_tail_recover")
    cor = m["corruption"]
    part = copy_partition("corrupt_tail_recover", tmp_path, "corrupted_input")
    d = case_dir("corrupt_tail_recover")
    seg = LogSegment.open(part / "00000000000000000000.log", _config(m), read_only=False)
    assert seg.recover() == cor["truncated_bytes"]
    assert seg.size == cor["segment"]["log_size"]
    seg.close()
    assert (part / "00000000000000000000.log").read_bytes() == \
        (d / "segments" / "00000000000000000000.log").read_bytes()[: cor["segment"]["log_size"]]
    for suffix in (".index", ".timeindex"):
        assert (part / f"00000000000000000000{suffix}").read_bytes() == \
            (d / "corrupted" / f"00000000000000000000{suffix}").read_bytes()
    seg = LogSegment.open(part / "00000000000000000000.log", _config(m))
    _replay(seg, cor["segment"]["probes"])
    _check_index_meta(seg, cor["segment"], skip_lengths=True)
    seg.close()


def test_partition_log_recovers_corrupt_tail(tmp_path: Path) -> None:
    m = load_manifest("corrupt_tail_recover")
    cor = m["corruption"]
    part = copy_partition("corrupt_tail_recover", tmp_path, "corrupted_input")
    log = PartitionLog.open(part, _config(m))
    assert log.recovered_segments == [0]
    assert log.log_end_offset == cor["segment"]["next_offset"]
    assert log.active_segment.size == cor["segment"]["log_size"]
    log.close()
    d = case_dir("corrupt_tail_recover")
    for suffix in (".index", ".timeindex"):
        assert (part / f"00000000000000000000{suffix}").read_bytes() == \
            (d / "corrupted" / f"00000000000000000000{suffix}").read_bytes()


def _replay(seg: LogSegment, probes: list[dict[str, Any]]) -> int:
    n = 0
    for p in probes:
        op = p["op"]
        if op == "offset_lookup":
            r = seg.offset_index.lookup(p["offset"])
            got: Any = {"offset": r.offset, "position": r.position}
        elif op == "time_lookup":
            r2 = seg.time_index.lookup(p["timestamp"])
            got = {"timestamp": r2.timestamp, "offset": r2.offset}
        elif op == "translate":
            t = seg.translate_offset(p["offset"])
            got = None if t is None else {"offset": t.offset, "position": t.position, "size": t.size}
        elif op == "find_by_ts":
            f = seg.find_offset_by_timestamp(p["timestamp"], p["starting_offset"])
            got = None if f is None else {"timestamp": f.timestamp, "offset": f.offset, "leader_epoch": f.leader_epoch}
        elif op == "fetch_upper_bound":
            u = seg.fetch_upper_bound_offset(OffsetPosition(p["offset"], p["position"]), p["fetch_size"])
            got = None if u is None else {"offset": u.offset, "position": u.position}
        elif op == "read":
            rd = seg.read(p["offset"], p["max_size"], p["min_one_message"])
            got = None if rd is None else {"position": rd.position, "size": rd.size,
                                           "first_entry_incomplete": rd.first_entry_incomplete}
        else:
            raise AssertionError(f"unknown probe op {op}")
        assert got == p["result"], json.dumps(p)
        n += 1
    return n


def _check_index_meta(seg: LogSegment, s: dict[str, Any], skip_lengths: bool = False) -> None:
    oi, ti = seg.offset_index, seg.time_index
    mo, mt = s["offset_index"], s["time_index"]
    assert oi.entries == mo["entries"]
    assert oi.last_offset == mo["last_offset"]
    assert [list(e) for e in oi.entries_list()] == mo["entry_list"]
    assert ti.entries == mt["entries"]
    assert dict(ti.last_entry._asdict()) == mt["last_entry"]
    assert [list(e) for e in ti.entries_list()] == mt["entry_list"]
    if not skip_lengths:
        assert oi.max_entries == mo["max_entries"] and oi.length == mo["length"]
        assert ti.max_entries == mt["max_entries"] and ti.length == mt["length"]
        assert oi.is_full() == mo["is_full"] and ti.is_full() == mt["is_full"]
    assert mo["sanity_check"] == "ok" and mt["sanity_check"] == "ok"
    oi.sanity_check()
    ti.sanity_check()
    assert seg.max_timestamp_so_far == s["max_timestamp_so_far"]
    assert seg.read_next_offset() == s["next_offset"]


@pytest.mark.parametrize("case", CASES)
def test_probes_replayed(case: str) -> None:
    m = load_manifest(case)
    total = 0
    for s, d in _segments_with_dirs(case):
        with LogSegment.open(d / f"{s['name']}.log", _config(m)) as seg:
            total += _replay(seg, s["probes"])
            _check_index_meta(seg, s)
    assert total == sum(len(s["probes"]) for s in m["segments"])


def test_unclean_flush_probes_after_recovery(tmp_path: Path) -> None:
    m = load_manifest("unclean_flush")
    part = copy_partition("unclean_flush", tmp_path)
    log = PartitionLog.open(part, _config(m))
    assert log.recovered_segments == [0]
    log.close()
    with LogSegment.open(part / "00000000000000000000.log", _config(m)) as seg:
        _replay(seg, m["segments"][0]["probes"])
        _check_index_meta(seg, m["recovery"]["segment"], skip_lengths=True)
        assert seg.offset_index.length == 696 and seg.time_index.length == 864


@pytest.mark.parametrize("case", ["single_default", "multi_segment_roll_bytes", "append_groups",
                                  "corrupt_tail_recover"])
def test_live_appends_reproduce_fixture_files(case: str, tmp_path: Path) -> None:
    """Re-appending the fixture batches (as a follower, with the manifest's append groups) through
    PartitionLog writes the same files, rolls included, byte for byte."""
    m = load_manifest(case)
    src = case_dir(case) / "segments"
    data = b"".join((src / f"{s['name']}.log").read_bytes() for s in m["segments"])
    scan = scan_batches(data)
    spec = m["config"]["append_groups"]
    groups = [int(x) for x in spec.split(",")] if spec[0].isdigit() else [1] * scan["count"]
    log = PartitionLog.open(tmp_path / "t-0", _config(m))
    i = 0
    for g in groups:
        if i >= scan["count"]:
            break
        j = min(i + g, scan["count"])
        p0, p1 = int(scan["position"][i]), int(scan["position"][j - 1] + scan["size"][j - 1])
        log.append(data[p0:p1], assign_offsets=False, now=1700000000000)
        i = j
    assert i == scan["count"]
    assert log.log_end_offset == m["log_end_offset"]
    assert [s.base_offset for s in log.segments] == [s["base_offset"] for s in m["segments"]]
    assert [(r["old_base"], r["new_base"]) for r in m["rolls"]] == \
        [(a.base_offset, b.base_offset) for a, b in zip(log.segments, log.segments[1:], strict=False)]
    log.close()
    for f in sorted(src.iterdir()):
        assert (tmp_path / "t-0" / f.name).read_bytes() == f.read_bytes(), f.name


def test_partition_log_reads_multi_segment_fixture_read_only() -> None:
    m = load_manifest("multi_segment_roll_bytes")
    with PartitionLog.open(case_dir("multi_segment_roll_bytes") / "segments", read_only=True) as log:
        assert log.log_end_offset == m["log_end_offset"]
        offsets = [r.offset for r in log.iter_records()]
        expected = [r["offset"] for s in m["segments"] for b in s["batches"] for r in b["records"]]
        assert offsets == expected
        for s in m["segments"]:
            for b in s["batches"]:
                hit = log.lookup_offset(b["last_offset"])
                assert hit is not None and (hit.segment, hit.position, hit.size) == (s["base_offset"], b["position"], b["size"])
        assert log.lookup_offset(m["log_end_offset"]) is None
