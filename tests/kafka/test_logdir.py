"""`mqstore kafka dump|verify|rebuild-index LOGDIR` on a whole Kafka log directory (issue 12.4,
issue 20.10), built with mqstore's own writers in the states a Kafka 4 broker leaves."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import CliRunner
from logdir_support import DIRECTORY_ID, TOPIC_ID, build_log_dir, tree_hash

from mqstore.cli.main import cli
from mqstore.storage.kafka.layout import is_log_dir
from mqstore.storage.kafka.logdir import scan_log_dir, verify_log_dir


def run(*args: str) -> tuple[int, str, str]:
    r = CliRunner().invoke(cli, ["kafka", *args])
    return r.exit_code, r.stdout, r.stderr


@pytest.fixture
def logdir(tmp_path: Path) -> Path:
    return build_log_dir(tmp_path)


def test_dump_log_dir_json(logdir: Path) -> None:
    before = tree_hash(logdir)
    code, out, err = run("dump", str(logdir), "--json")
    assert code == 0 and err == ""
    rows = [json.loads(x) for x in out.splitlines()]
    head = rows[0]
    assert head["type"] == "log_dir"
    assert head["meta_properties"] == {"version": 1, "node_id": 1, "cluster_id": "q1Sh-9_ISia_zwGINzRvyQ",
                                       "directory_id": DIRECTORY_ID}
    assert head["clean_shutdown"] == {"version": 0, "broker_epoch": 42}
    assert head["checkpoints"] == {"cleaner-offset-checkpoint": 1, "log-start-offset-checkpoint": 3,
                                   "recovery-point-offset-checkpoint": 3, "replication-offset-checkpoint": 4}
    assert head["entries"] == {
        ".kafka_cleanshutdown": "clean_shutdown", ".lock": "lock", "cleaner-offset-checkpoint": "cleaner_offset_checkpoint",
        "compacted-0": "partition_dir", "log-start-offset-checkpoint": "log_start_offset_checkpoint",
        "meta.properties": "meta_properties", "old-2.fedcba9876543210fedcba9876543210-delete": "partition_dir",
        "orders-0": "partition_dir", "orders-1": "partition_dir",
        "orders-1.0123456789abcdef0123456789abcdef-future": "partition_dir",
        "orders-7.00112233445566778899aabbccddeeff-stray": "partition_dir",
        "recovery-point-offset-checkpoint": "recovery_point_checkpoint", "remote-log-index-cache": "remote_index_cache",
        "replication-offset-checkpoint": "replication_offset_checkpoint"}
    assert head["remote_index_cache"] == {f"0_{TOPIC_ID}.index": "remote_index",
                                          f"0_{TOPIC_ID}.timeindex": "remote_timeindex",
                                          f"0_{TOPIC_ID}.txnindex": "remote_txnindex"}
    parts = {r["partition"]: r for r in rows[1:]}
    o0 = parts["orders-0"]
    assert (o0["topic"], o0["number"], o0["state"], o0["segments"], o0["first_offset"], o0["log_end_offset"],
            o0["recovery_point"], o0["log_start_offset"], o0["high_watermark"], o0["cleaner_offset"],
            o0["leader_epoch"], o0["topic_id"]) == ("orders", 0, "live", 5, 0, 300, 150, 0, 300, None, 2, TOPIC_ID)
    assert o0["files"] == {"deleted": 1, "index": 5, "leader_epoch_checkpoint": 1, "log": 5, "partition_metadata": 1,
                           "snapshot": 1, "timeindex": 5, "txnindex": 1}
    assert o0["unknown"] == [] and o0["errors"] == {}
    c0 = parts["compacted-0"]
    assert (c0["first_offset"], c0["log_end_offset"], c0["cleaner_offset"]) == (0, 501, 202)
    assert c0["files"]["cleaned"] == 1 and c0["files"]["swap"] == 1
    assert {p: r["state"] for p, r in parts.items() if r["state"] != "live"} == {
        "old-2.fedcba9876543210fedcba9876543210-delete": "delete",
        "orders-1.0123456789abcdef0123456789abcdef-future": "future",
        "orders-7.00112233445566778899aabbccddeeff-stray": "stray"}
    assert parts["orders-1.0123456789abcdef0123456789abcdef-future"]["recovery_point"] is None
    assert tree_hash(logdir) == before


def test_dump_log_dir_text(logdir: Path) -> None:
    code, out, _ = run("dump", str(logdir))
    assert code == 0
    lines = out.splitlines()
    assert lines[:8] == [
        f"Log directory {logdir}",
        f"meta.properties: version: 1 node.id: 1 cluster.id: q1Sh-9_ISia_zwGINzRvyQ directory.id: {DIRECTORY_ID}",
        ".kafka_cleanshutdown: version: 0 brokerEpoch: 42",
        "cleaner-offset-checkpoint: 1 entries",
        "log-start-offset-checkpoint: 3 entries",
        "recovery-point-offset-checkpoint: 3 entries",
        "replication-offset-checkpoint: 4 entries",
        "entries: clean_shutdown 1, cleaner_offset_checkpoint 1, lock 1, log_start_offset_checkpoint 1, "
        "meta_properties 1, partition_dir 6, recovery_point_checkpoint 1, remote_index_cache 1, "
        "replication_offset_checkpoint 1",
    ]
    header = next(x for x in lines if x.startswith("PARTITION"))
    assert header.split() == ["PARTITION", "STATE", "SEGMENTS", "BYTES", "FIRST", "END", "RECOVERY", "START", "HW",
                              "CLEANER", "EPOCH", "TOPIC-ID"]
    row = next(x for x in lines if x.startswith("orders-0 "))
    assert row.split()[:4] + row.split()[5:] == ["orders-0", "live", "5", str(sum(
        f.stat().st_size for f in (logdir / "orders-0").glob("*.log"))), "300", "150", "0", "300", "-", "2", TOPIC_ID]


def test_unknown_files_are_reported_never_skipped(logdir: Path) -> None:
    (logdir / "notes.txt").write_text("operator notes")
    (logdir / "backup").mkdir()
    (logdir / "orders-0" / "00000000000000000000.log.bak").write_bytes(b"x")
    (logdir / "remote-log-index-cache" / "junk").write_bytes(b"x")
    code, out, _ = run("dump", str(logdir))
    assert code == 0
    assert {x for x in out.splitlines() if x.startswith("unknown:")} == {
        "unknown: backup", "unknown: notes.txt", "unknown: remote-log-index-cache/junk",
        "unknown: orders-0/00000000000000000000.log.bak"}
    res = verify_log_dir(logdir)
    assert res.ok
    unknown = sorted(Path(n.path).name for n in res.notes + [n for p in res.partitions for n in p.notes]
                     if n.kind == "unknown_file")
    assert unknown == ["00000000000000000000.log.bak", "backup", "junk", "notes.txt"]


def test_verify_log_dir_serial_and_pool_agree(logdir: Path) -> None:
    before = tree_hash(logdir)
    serial = verify_log_dir(logdir, workers=1)
    pooled = verify_log_dir(logdir, workers=2, parallel_min_bytes=0)
    assert serial.ok and pooled.ok
    assert [(p.partition, p.segments, p.batches, p.bytes, p.notes) for p in serial.partitions] == \
        [(p.partition, p.segments, p.batches, p.bytes, p.notes) for p in pooled.partitions]
    assert [p.partition for p in serial.partitions] == [
        "compacted-0", "orders-0", "orders-1", "orders-1.0123456789abcdef0123456789abcdef-future",
        "orders-7.00112233445566778899aabbccddeeff-stray"]
    notes = sorted((n.kind, Path(n.path).name) for n in serial.notes)
    assert notes == [("checkpoint_unknown_partition", "replication-offset-checkpoint"),
                     ("partition_deleted", "old-2.fedcba9876543210fedcba9876543210-delete")]
    by = {p.partition: sorted(n.kind for n in p.notes) for p in serial.partitions}
    assert by["orders-0"] == ["deleted_file", "index_preallocated", "time_index_preallocated"]
    assert by["compacted-0"] == ["cleaned_file", "swap_file"]  # offset gaps are not problems
    assert tree_hash(logdir) == before


def test_verify_log_dir_cli(logdir: Path) -> None:
    before = tree_hash(logdir)
    code, out, _ = run("verify", str(logdir))
    assert code == 0
    assert out.splitlines()[-1] == "OK: 5 partition(s), 13 segment(s), 132 batches, " + str(sum(
        f.stat().st_size for p in ("compacted-0", "orders-0", "orders-1") for f in (logdir / p).glob("*.log"))
        + 2 * sum(f.stat().st_size for f in (logdir / "orders-1").glob("*.log"))) + " bytes"
    code, out, _ = run("verify", str(logdir), "--json")
    rep = json.loads(out)
    assert code == 0 and rep["ok"] and len(rep["partitions"]) == 5
    code, out, _ = run("verify", str(logdir), "--strict", "--json")
    rep = json.loads(out)
    assert code == 1
    assert [(p["partition"], sorted({q["kind"] for q in p["problems"]})) for p in rep["partitions"] if not p["ok"]] == [
        ("orders-0", ["index_padded", "time_index_padded", "time_index_sanity"])]
    assert tree_hash(logdir) == before


@pytest.mark.parametrize(("name", "content", "kind", "message"), [
    ("recovery-point-offset-checkpoint", b"0\n3\norders 0 1\n", "bad_recovery_point_offset_checkpoint",
     "truncated checkpoint: expected 3 entries but found only 1"),
    ("replication-offset-checkpoint", b"\x00garbage\x01", "bad_replication_offset_checkpoint",
     "line 1: version is not an integer: '\\x00garbage\\x01'"),
    ("meta.properties", b"\x00\x01\x02", "bad_meta_properties", "meta.properties has no version"),
    (".kafka_cleanshutdown", b"{nope", "bad_kafka_cleanshutdown", "not JSON: Expecting property name enclosed in "
     "double quotes at character 1"),
])
def test_garbage_log_dir_files(logdir: Path, name: str, content: bytes, kind: str, message: str) -> None:
    (logdir / name).write_bytes(content)
    before = tree_hash(logdir)
    res = verify_log_dir(logdir)
    assert not res.ok
    assert [(p.kind, Path(p.path).name, p.message) for p in res.problems] == [(kind, name, message)]
    code, out, _ = run("verify", str(logdir))
    assert code == 1 and f"problem: {kind}: {message}" in out
    # a direct command on the file: one error line, exit 2
    code, out, err = run("dump", str(logdir / name))
    assert code == 2 and out == ""
    assert err.splitlines() == [f"error: {message} ({logdir / name})"]
    # the log directory summary still prints, with a warning
    code, out, err = run("dump", str(logdir))
    assert code == 0 and out.startswith(f"Log directory {logdir}")
    assert err.splitlines() == [f"warning: {logdir / name}: {message}"]
    assert tree_hash(logdir) == before


def test_garbage_partition_files(logdir: Path) -> None:
    (logdir / "orders-1" / "leader-epoch-checkpoint").write_bytes(b"0\n2\n5 100\n")
    (logdir / "orders-1" / "partition.metadata").write_bytes(b"version: 0\n")
    res = verify_log_dir(logdir)
    bad = next(p for p in res.partitions if p.partition == "orders-1")
    assert sorted((p.kind, p.message) for p in bad.problems) == [
        ("bad_leader_epoch_checkpoint", "truncated checkpoint: expected 2 entries but found only 1"),
        ("bad_partition_metadata", "truncated partition.metadata (expected version and topic_id lines)")]
    (logdir / "orders-1" / "leader-epoch-checkpoint").write_bytes(b"0\n2\n5 100\n4 200\n")
    (logdir / "orders-1" / "partition.metadata").write_text(f"version: 0\ntopic_id: {TOPIC_ID}\n")
    bad = next(p for p in verify_log_dir(logdir).partitions if p.partition == "orders-1")
    assert [(p.kind, p.message) for p in bad.problems] == [
        ("leader_epoch_order", "entry (4, 200) does not follow (5, 100)")]


def test_dump_text_files(logdir: Path) -> None:
    code, out, _ = run("dump", str(logdir / "replication-offset-checkpoint"))
    assert code == 0
    assert out.splitlines() == [f"Dumping {logdir / 'replication-offset-checkpoint'}", "version: 0 entries: 4",
                                "topic: orders partition: 0 offset: 300", "topic: orders partition: 1 offset: 100",
                                "topic: compacted partition: 0 offset: 501", "topic: gone partition: 3 offset: 7"]
    code, out, _ = run("dump", str(logdir / "orders-0" / "leader-epoch-checkpoint"), "--json")
    assert json.loads(out)["entries"] == [{"epoch": 0, "start_offset": 0}, {"epoch": 1, "start_offset": 100},
                                          {"epoch": 2, "start_offset": 200}]
    code, out, _ = run("dump", str(logdir / "meta.properties"))
    assert out.splitlines()[1] == ("version: 1 node_id: 1 cluster_id: q1Sh-9_ISia_zwGINzRvyQ directory_id: "
                                   f"{DIRECTORY_ID} other: {{}}")
    code, out, _ = run("dump", str(logdir / ".kafka_cleanshutdown"), "--json")
    assert json.loads(out)["broker_epoch"] == 42
    (logdir / ".kafka_cleanshutdown").write_bytes(b"")  # Kafka before 3.x: an empty marker
    code, out, _ = run("dump", str(logdir / ".kafka_cleanshutdown"))
    assert code == 0 and out.splitlines()[1] == "version: null broker_epoch: null"


def test_tiered_storage_log_start_below_local_segments(logdir: Path) -> None:
    """With tiered storage the local log starts above the log start offset: a note, never a problem."""
    for f in sorted((logdir / "orders-1").glob("00000000000000000000.*")):
        f.unlink()
    first = min(int(f.name[:20]) for f in (logdir / "orders-1").glob("*.log"))
    assert first > 0
    res = verify_log_dir(logdir)
    assert res.ok
    below = [n.message for n in res.notes if n.kind == "log_start_below_local"]
    assert below == [f"orders-1: log start offset 0 is below the first local segment {first} (the older data is in "
                     f"remote storage when tiered storage is on; otherwise Kafka uses {first})"]


def test_remote_index_cache_verified(logdir: Path) -> None:
    cache = logdir / "remote-log-index-cache"
    stem = f"0_{TOPIC_ID}"
    res = verify_log_dir(logdir)
    assert res.ok and not [n for n in res.notes if n.kind.startswith("remote")]
    idx = cache / f"{stem}.index"
    idx.write_bytes(idx.read_bytes() + (3).to_bytes(4, "big") + (50).to_bytes(4, "big"))  # goes backwards
    (cache / f"{stem}.txnindex").write_bytes(b"\0" * 35)
    (cache / f"100_{DIRECTORY_ID}.index").write_bytes(b"")
    (cache / f"200_{DIRECTORY_ID}.timeindex.deleted").write_bytes(b"")
    res = verify_log_dir(logdir)
    assert sorted((p.kind, p.message) for p in res.problems) == [
        ("remote_index_order", "entry 3 (3, 50) is not after (14, 1400)"),
        ("remote_txnindex_size", "35 bytes is not a whole number of 34-byte entries")]
    assert sorted(n.kind for n in res.notes if n.kind.startswith("remote")) == ["remote_deleted", "remote_incomplete"]


def test_rebuild_index_log_dir(logdir: Path, tmp_path: Path) -> None:
    out = tmp_path / "idx"
    before = tree_hash(logdir)
    code, stdout, err = run("rebuild-index", str(logdir), "--out", str(out), "--json", "--index-interval-bytes", "300")
    assert code == 0
    rows = [json.loads(x) for x in stdout.splitlines()]
    assert len(rows) == 11  # orders-0 (5), orders-1 (2), its -future copy (2), compacted-0 (2)
    assert sorted(p.name for p in out.iterdir()) == ["compacted-0", "orders-0", "orders-1",
                                                     "orders-1.0123456789abcdef0123456789abcdef-future"]
    assert err.splitlines() == [
        "skipped: old-2.fedcba9876543210fedcba9876543210-delete (-delete: Kafka loads it only to delete it)",
        "skipped: orders-7.00112233445566778899aabbccddeeff-stray (-stray: Kafka keeps it out of service until it "
        "deletes it)"]
    assert tree_hash(logdir) == before
    # the same bytes as rebuilding one partition at a time
    single = tmp_path / "single"
    code, _, _ = run("rebuild-index", str(logdir / "orders-0"), "--out", str(single), "--index-interval-bytes", "300")
    assert code == 0
    for f in single.iterdir():
        assert (out / "orders-0" / f.name).read_bytes() == f.read_bytes()
    # the rebuilt active segment is what Kafka's recovery leaves: the live entries, trimmed
    live = (logdir / "orders-0" / "00000000000000000280.index").read_bytes()
    assert (out / "orders-0" / "00000000000000000280.index").read_bytes() == live[:8] and any(live[:8])


def test_is_log_dir(logdir: Path, tmp_path: Path) -> None:
    assert is_log_dir(logdir)
    assert not is_log_dir(logdir / "orders-0")
    empty = tmp_path / "empty"
    empty.mkdir()
    assert not is_log_dir(empty)
    layout = scan_log_dir(logdir)
    assert [p.label for p in layout.partitions][:2] == ["compacted-0", "old-2.fedcba9876543210fedcba9876543210-delete"]


def test_partition_dir_dump_and_verify_name_every_file(logdir: Path) -> None:
    part = logdir / "orders-0"
    (part / "notes.txt").write_text("x")
    before = tree_hash(part)
    code, out, _ = run("dump", str(part))
    assert code == 0
    # (.txnindex and .snapshot files are dumped themselves, like segments)
    assert [x for x in out.splitlines() if x.startswith("file: ")] == [
        "file: 00000000000000000000.log.deleted kind: deleted",
        "file: leader-epoch-checkpoint kind: leader_epoch_checkpoint",
        "file: notes.txt kind: unknown",
        "file: partition.metadata kind: partition_metadata"]
    assert f"Dumping {part / '00000000000000000150.snapshot'}" in out.splitlines()
    code, out, _ = run("dump", str(part), "--json")
    kinds = {Path(o["file"]).name: o["kind"] for o in map(json.loads, out.splitlines()) if o["type"] == "file"}
    assert kinds["notes.txt"] == "unknown" and kinds["00000000000000000000.log.deleted"] == "deleted"
    code, out, _ = run("verify", str(part))
    assert code == 0
    assert f"note: unknown_file: not a Kafka partition file (Kafka ignores it) ({part / 'notes.txt'})" in out
    assert tree_hash(part) == before


def test_dump_remote_index_cache(logdir: Path) -> None:
    cache = logdir / "remote-log-index-cache"
    (cache / "junk").write_bytes(b"")
    code, out, _ = run("dump", str(cache))
    assert code == 0
    lines = out.splitlines()
    assert lines[:2] == [f"file: 0_{TOPIC_ID}.txnindex kind: remote_txnindex", "file: junk kind: unknown"]
    assert lines[2:] == [f"Dumping {cache / f'0_{TOPIC_ID}.index'}", "offset: 5 position: 500",
                         "offset: 9 position: 900", "offset: 14 position: 1400",
                         f"Dumping {cache / f'0_{TOPIC_ID}.timeindex'}", "timestamp: 1700000000005 offset: 5",
                         "timestamp: 1700000000009 offset: 9", "timestamp: 1700000000014 offset: 14"]


def test_inspect_names_every_file_of_a_partition_and_of_a_log_dir(logdir: Path, tmp_path: Path) -> None:
    part = logdir / "orders-0"
    (part / "notes.txt").write_text("x")
    before = tree_hash(logdir)
    code, out, _ = run("inspect", str(part))
    assert code == 0
    rows = {line.split()[0]: line.split()[1] for line in out.splitlines()[3:]}
    assert set(rows) == {f.name for f in part.iterdir()}  # every file, none skipped
    assert rows["00000000000000000000.log"] == "log" and rows["00000000000000000150.snapshot"] == "snapshot"
    assert rows["00000000000000000000.txnindex"] == "txnindex"
    assert rows["00000000000000000000.log.deleted"] == "deleted" and rows["notes.txt"] == "unknown"
    assert rows["leader-epoch-checkpoint"] == "leader_epoch_checkpoint"
    code, out, _ = run("inspect", str(part), "--json")
    objs = [json.loads(x) for x in out.splitlines()]
    assert objs[0]["type"] == "directory" and objs[0]["kinds"]["unknown"] == 1
    assert len(objs) == 1 + len(list(part.iterdir()))
    code, out, _ = run("inspect", str(logdir))  # a log directory: the summary of dump LOGDIR
    assert code == 0 and out.startswith(f"Log directory {logdir}")
    assert tree_hash(logdir) == before
    code, _, err = run("inspect", str(part / "partition.metadata"))
    assert code == 2 and err.startswith("error: inspect takes a log directory or a partition directory")
    (tmp_path / "nothing").mkdir()
    code, _, err = run("inspect", str(tmp_path / "nothing"))
    assert code == 2 and "no Kafka segment files" in err
