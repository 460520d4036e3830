"""Lookups give Kafka's answer whatever state the index files are in (issue 12.2): missing, a live
broker's preallocated zero-padded file, cut short; verify on a live active segment (issue 12.3)."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
from click.testing import CliRunner
from logdir_support import expected_for_timestamp, tree_hash, ts_of, write_partition

from mqstore.cli.main import cli
from mqstore.kafka import PartitionLog
from mqstore.storage.kafka.index import OffsetIndex, TimeIndex, live_entry_count
from mqstore.storage.kafka.tools import verify_path

STATES = ["clean", "live", "timeindex_missing", "index_missing", "both_missing", "timeindex_truncated",
          "timeindex_torn_entry", "index_truncated", "all_timeindexes_missing"]


def _bases(part: Path) -> list[int]:
    return sorted(int(f.name[:20]) for f in part.glob("*.log"))


def make_state(tmp_path: Path, state: str) -> tuple[Path, list[tuple[int, int]]]:
    part = tmp_path / "orders-0"
    records = write_partition(part, live=state == "live")
    bases = _bases(part)
    mid = part / f"{bases[len(bases) // 2]:020d}"
    if state in ("timeindex_missing", "both_missing"):
        mid.with_suffix(".timeindex").unlink()
    if state in ("index_missing", "both_missing"):
        mid.with_suffix(".index").unlink()
    if state == "all_timeindexes_missing":
        for f in part.glob("*.timeindex"):
            f.unlink()
    if state == "timeindex_truncated":  # the last entries lost (final entry of the roll included)
        ti = mid.with_suffix(".timeindex")
        ti.write_bytes(ti.read_bytes()[:12])
    if state == "timeindex_torn_entry":
        ti = mid.with_suffix(".timeindex")
        ti.write_bytes(ti.read_bytes()[:-5])
    if state == "index_truncated":
        oi = mid.with_suffix(".index")
        oi.write_bytes(oi.read_bytes()[:8 + 3])
    return part, records


def test_live_partition_is_what_a_running_broker_leaves(tmp_path: Path) -> None:
    part, _ = make_state(tmp_path, "live")
    bases = _bases(part)
    active = part / f"{bases[-1]:020d}"
    assert active.with_suffix(".index").stat().st_size == 1000  # segment.index.bytes rounded to 8
    assert active.with_suffix(".timeindex").stat().st_size == 996  # ... and to 12
    assert not (part / ".kafka_cleanshutdown").exists()
    for b in bases[:-1]:  # rolled segments are trimmed
        assert (part / f"{b:020d}.index").stat().st_size % 8 == 0
        assert (part / f"{b:020d}.index").stat().st_size < 1000
    raw = active.with_suffix(".timeindex").read_bytes()
    with TimeIndex(active.with_suffix(".timeindex"), bases[-1], writable=False, stop_at_padding=True) as ti:
        assert ti.padded and 0 < ti.entries < 100
        assert not any(raw[ti.entries * 12:])


@pytest.mark.parametrize("state", STATES)
def test_offset_for_timestamp_matches_kafka(tmp_path: Path, state: str) -> None:
    part, records = make_state(tmp_path, state)
    bases = _bases(part)
    before = tree_hash(part)
    targets = sorted({ts_of(o) for o, _ in records} | {ts_of(o) + 1 for o, _ in records[::7]} | {0, ts_of(400)})
    with PartitionLog.open(part, read_only=True) as log:
        for t in targets:
            want = expected_for_timestamp(records, bases, t)
            got = log.offset_for_timestamp(t)
            assert (None if got is None else (got.offset, got.timestamp)) == want, t
        for o, _ in records[::3]:
            hit = log.lookup_offset(o)
            assert hit is not None and hit.offset == (o // 5) * 5 + 4  # the batch's last offset
        assert log.lookup_offset(300) is None
    assert tree_hash(part) == before


@pytest.mark.parametrize("state", ["live", "timeindex_missing", "index_missing", "timeindex_truncated"])
def test_cli_lookup_timestamp_in_every_index_state(tmp_path: Path, state: str) -> None:
    part, records = make_state(tmp_path, state)
    bases = _bases(part)
    before = tree_hash(part)
    mid = bases[len(bases) // 2]
    for o, t in records:
        if o >= mid and expected_for_timestamp(records, bases, t) == (o, t):
            target = (o, t)
            break
    r = CliRunner().invoke(cli, ["kafka", "lookup", str(part), "--timestamp", str(target[1]), "--json"])
    assert r.exit_code == 0, r.output
    got = json.loads(r.stdout)
    assert (got["offset"], got["timestamp"]) == target
    # the segment's own file answers the same
    seg = next(b for b in reversed(bases) if b <= target[0])
    r = CliRunner().invoke(cli, ["kafka", "lookup", str(part / f"{seg:020d}.log"), "--timestamp",
                                 str(target[1]), "--json"])
    assert r.exit_code == 0 and (json.loads(r.stdout)["offset"], json.loads(r.stdout)["timestamp"]) == target
    assert tree_hash(part) == before


def test_answers_equal_after_rebuild(tmp_path: Path) -> None:
    """The read-only answers on a live directory equal those after Kafka's recovery (rebuild-index)."""
    part, records = make_state(tmp_path, "live")
    rebuilt = tmp_path / "rebuilt" / "orders-0"
    shutil.copytree(part, rebuilt)
    r = CliRunner().invoke(cli, ["kafka", "rebuild-index", str(rebuilt)])
    assert r.exit_code == 0, r.output
    with PartitionLog.open(part, read_only=True) as a, PartitionLog.open(rebuilt, read_only=True) as b:
        for _, t in records[::2]:
            assert a.offset_for_timestamp(t) == b.offset_for_timestamp(t)
        assert a.offset_for_timestamp(-3) == b.offset_for_timestamp(-3)
        assert a.log_end_offset == b.log_end_offset == 300


def test_live_entry_count_rule() -> None:
    import numpy as np

    assert live_entry_count(np.array([5, 9, 0, 0]), False) == 2
    assert live_entry_count(np.array([0, 0, 0]), True) == 0  # preallocated, nothing indexed yet
    assert live_entry_count(np.array([0, 0, 0]), False) == 1  # slot 0 holds a real entry (relative offset 0)
    assert live_entry_count(np.array([0]), True) == 1  # a trimmed one-entry file is not padding
    assert live_entry_count(np.array([3, 7, 12]), False) == 3


def test_empty_preallocated_index_has_no_entries(tmp_path: Path) -> None:
    p = tmp_path / "00000000000000000100.timeindex"
    p.write_bytes(b"\0" * 120)
    with TimeIndex(p, 100, writable=False, stop_at_padding=True) as ti:
        assert ti.entries == 0 and ti.last_entry == (-1, 100)
    q = tmp_path / "00000000000000000100.index"
    q.write_bytes(b"\0" * 80)
    with OffsetIndex(q, 100, writable=False, stop_at_padding=True) as oi:
        assert oi.entries == 0 and oi.lookup(150) == (100, 0)


def test_verify_live_active_segment_is_info(tmp_path: Path) -> None:
    part, _ = make_state(tmp_path, "live")
    before = tree_hash(part)
    rep = verify_path(part)
    assert rep.ok, rep.problems
    kinds = sorted(n.kind for n in rep.notes)
    assert kinds == ["index_preallocated", "time_index_preallocated"]
    strict = verify_path(part, strict=True)
    assert {p.kind for p in strict.problems} == {"index_padded", "time_index_padded", "time_index_sanity"}
    r = CliRunner().invoke(cli, ["kafka", "verify", str(part)])
    assert r.exit_code == 0
    r = CliRunner().invoke(cli, ["kafka", "verify", str(part), "--strict"])
    assert r.exit_code == 1
    assert tree_hash(part) == before


def test_verify_padding_on_a_rolled_segment_or_with_stale_bytes_is_a_problem(tmp_path: Path) -> None:
    part, _ = make_state(tmp_path, "clean")
    bases = _bases(part)
    first = part / f"{bases[0]:020d}.index"
    first.write_bytes(first.read_bytes() + b"\0" * 80)  # a rolled segment is always trimmed by Kafka
    rep = verify_path(part)
    assert [p.kind for p in rep.problems] == ["index_padded"]
    last = part / f"{bases[-1]:020d}.timeindex"
    data = last.read_bytes()
    last.write_bytes(data + b"\0" * 24 + (123).to_bytes(8, "big") + (1).to_bytes(4, "big") + b"\0" * 12)
    rep = verify_path(part)
    # Kafka trusts the length of such a file: its last "entry" (0, base) also fails the sanity check
    assert [p.kind for p in rep.problems] == ["index_padded", "time_index_stale_entries", "time_index_sanity"]


def test_long_tail_scan_compiled_and_pread_paths_agree(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A missing time index on a large segment: the compiled header walk (tail > 1 MiB) and the
    batch-by-batch walk give the same largest timestamp and the same lookups."""
    import mqstore.storage.kafka.segment as segmod

    part = tmp_path / "big-0"
    records = write_partition(part, n_batches=1500, per_batch=20, segment_bytes=8 << 20, max_index_size=1 << 20)
    bases = _bases(part)
    assert len(bases) == 1 and (part / f"{bases[0]:020d}.log").stat().st_size > 1 << 20
    (part / f"{bases[0]:020d}.timeindex").unlink()
    (part / f"{bases[0]:020d}.index").unlink()
    targets = [ts_of(o) for o in (0, 7, 4000, 9001, 39999)] + [ts_of(39999) + 1]
    answers = []
    for limit in (segmod._SCAN_MAPPED_BYTES, 1 << 40):
        monkeypatch.setattr(segmod, "_SCAN_MAPPED_BYTES", limit)
        with PartitionLog.open(part, read_only=True) as log:
            seg = log.segments[0]
            answers.append(((seg.max_timestamp_so_far, seg.offset_of_max_timestamp_so_far),
                            [log.offset_for_timestamp(t) for t in targets]))
    assert answers[0] == answers[1]
    top = max(records, key=lambda r: r[1])
    assert answers[0][0] == (top[1], (top[0] // 20) * 20 + 19)
    assert [None if a is None else (a.offset, a.timestamp) for a in answers[0][1]] == \
        [expected_for_timestamp(records, bases, t) for t in targets]


def test_verify_live_active_segment_sanity_of_the_loaded_entries(tmp_path: Path) -> None:
    part, _ = make_state(tmp_path, "live")
    active = part / f"{_bases(part)[-1]:020d}"
    oi = bytearray(active.with_suffix(".index").read_bytes())
    oi[0:4] = (-5).to_bytes(4, "big", signed=True)  # the live entry names an offset below the base
    active.with_suffix(".index").write_bytes(bytes(oi))
    rep = verify_path(part)
    sanity = [p.message for p in rep.problems if p.kind == "index_sanity"]
    base = _bases(part)[-1]
    assert sanity == [f"last offset {base - 5} is less than the base offset {base}"]
    assert "index_preallocated" in {n.kind for n in rep.notes}
