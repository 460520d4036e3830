"""KRaft ``__cluster_metadata-0`` directories made with the project's writers: dump decodes the
metadata records (segments and snapshots) and quorum-state, verify checks snapshots; bad input
gives a verify problem or one ``error:`` line, never a traceback; nothing is modified."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import CliRunner
from kraft_support import (
    DIR_ID,
    METADATA_RECORDS,
    make_metadata_dir,
    metadata_values,
    snapshot_bytes,
    tree_hash,
)

from mqstore.cli.main import cli
from mqstore.formats.kafka import SimpleRecord, encode_batch
from mqstore.formats.kafka.metadata_records import type_name
from mqstore.formats.kafka.quorum_state import encode_quorum_state
from mqstore.storage.kafka.internal import verify_snapshot
from mqstore.storage.kafka.layout import snapshot_id, snapshot_kind

QS_V1 = {"leaderId": 1, "leaderEpoch": 3, "votedId": -1, "votedDirectoryId": DIR_ID, "data_version": 1}
QS_V0 = {"clusterId": "", "leaderId": 2, "leaderEpoch": 7, "votedId": 2, "appliedOffset": 0,
         "currentVoters": [{"voterId": 1}, {"voterId": 2}, {"voterId": 3}], "data_version": 0}


def run(*args: str) -> tuple[int, str, str]:
    r = CliRunner().invoke(cli, ["kafka", *args])
    assert r.exception is None or isinstance(r.exception, SystemExit), r.exception
    return r.exit_code, r.stdout, r.stderr


@pytest.fixture
def meta(tmp_path: Path) -> Path:
    return make_metadata_dir(tmp_path, snapshot=snapshot_bytes(metadata_values()),
                             quorum_state=encode_quorum_state(QS_V1))


def test_snapshot_names() -> None:
    assert snapshot_kind("00000000000000000100-0000000002.checkpoint") == "snapshot"
    assert snapshot_kind("00000000000000000100-0000000002.checkpoint.part") == "snapshot_part"
    assert snapshot_kind("00000000000000000100-0000000002.checkpoint.deleted") == "snapshot_deleted"
    assert snapshot_kind("bootstrap.checkpoint") == "bootstrap"
    assert snapshot_kind("00000000000000000100.log") is None
    assert snapshot_kind("100-2.checkpoint") is None
    assert snapshot_id("00000000000000000100-0000000002.checkpoint") == (100, 2)


def test_dump_json_decodes_every_metadata_record(meta: Path) -> None:
    before = tree_hash(meta)
    code, out, _ = run("dump", str(meta), "--print-data", "--json")
    assert code == 0
    rows = [json.loads(x) for x in out.splitlines()]
    seg = [r for r in rows if r["file"].endswith(".log") and r["type"] == "record"]
    assert [r["decoded"]["type"] for r in seg] == [type_name(n) for n, _v, _d in METADATA_RECORDS]
    assert [r["decoded"]["version"] for r in seg] == [v for _n, v, _d in METADATA_RECORDS]
    for r, (_n, _v, data) in zip(seg, METADATA_RECORDS, strict=True):
        assert r["decoded"]["data"] == data
    kinds = {Path(r["file"]).name: r["kind"] for r in rows if r["type"] == "file"}
    assert kinds["quorum-state"] == "quorum_state"
    assert kinds["00000000000000000009-0000000003.checkpoint"] == "kraft_snapshot"
    snap = [r for r in rows if r["file"].endswith(".checkpoint") and r["type"] != "file"]
    assert snap[0] == {"file": snap[0]["file"], "type": "kraft_snapshot", "endOffset": 9, "epoch": 3}
    data_recs = [r for r in snap if r["type"] == "record" and "decoded" in r]
    assert [r["decoded"]["type"] for r in data_recs] == [type_name(n) for n, _v, _d in METADATA_RECORDS]
    qs = [r for r in rows if r["type"] == "quorum_state"]
    assert qs == [{"file": str(meta / "quorum-state"), "type": "quorum_state", **QS_V1}]
    assert tree_hash(meta) == before


def test_dump_text_is_kafka_style(meta: Path) -> None:
    code, out, _ = run("dump", str(meta / "00000000000000000000.log"), "--print-data")
    assert code == 0
    lines = [x for x in out.splitlines() if x.startswith("| offset: 2 ")]
    assert lines == ["| offset: 2 CreateTime: 1700000000002 keySize: -1 valueSize: 27 sequence: -1 headerKeys: [] "
                     'payload: {"type":"TOPIC_RECORD","version":0,"data":{"name":"orders",'
                     '"topicId":"b7E0kH2yQ9uK8lH2cS3wKQ"}}']
    # without --print-data only batches; a named decoder implies it
    code, out, _ = run("dump", str(meta / "00000000000000000000.log"))
    assert "| offset:" not in out
    code, out, _ = run("dump", str(meta / "00000000000000000000.log"), "--decoder", "cluster-metadata")
    assert out.count("payload: {\"type\":") == len(METADATA_RECORDS)
    code, out, _ = run("dump", str(meta / "00000000000000000000.log"), "--print-data", "--decoder", "none")
    assert '"type":"TOPIC_RECORD"' not in out and out.count("| offset:") == len(METADATA_RECORDS)


def test_dump_quorum_state_v0_and_single_files(meta: Path) -> None:
    (meta / "quorum-state").write_bytes(encode_quorum_state(QS_V0))
    code, out, _ = run("dump", str(meta / "quorum-state"))
    assert code == 0
    assert out.splitlines()[1] == "quorum-state: " + json.dumps(
        {k: v for k, v in QS_V0.items()}, separators=(",", ":"))
    code, out, _ = run("dump", str(meta / "00000000000000000009-0000000003.checkpoint"), "--json")
    assert code == 0
    assert json.loads(out.splitlines()[0])["type"] == "kraft_snapshot"


def test_verify_directory_with_good_snapshot_and_bootstrap(meta: Path, tmp_path: Path) -> None:
    (tmp_path / "bootstrap.checkpoint").write_bytes(snapshot_bytes(metadata_values()[:1], epoch=0))
    before = tree_hash(tmp_path)
    code, out, _ = run("verify", str(meta), "--json")
    assert code == 0, out
    rep = json.loads(out)
    assert rep["ok"] and rep["segments"] == 2
    code, out, _ = run("verify", str(tmp_path / "bootstrap.checkpoint"))
    assert code == 0 and out.startswith("OK: 1 segment(s), 3 batches")
    assert tree_hash(tmp_path) == before


def test_snapshot_without_footer_is_a_problem(meta: Path) -> None:
    bad = meta / "00000000000000000020-0000000004.checkpoint"
    bad.write_bytes(snapshot_bytes(metadata_values(), footer=False))
    code, out, _ = run("verify", str(meta), "--json")
    assert code == 1
    kinds = [(p["kind"], Path(p["path"]).name) for p in json.loads(out)["problems"]]
    assert kinds == [("snapshot_footer", bad.name)]
    code, out, _ = run("verify", str(bad))
    assert code == 1 and "problem: snapshot_footer:" in out


def test_snapshot_without_header_crc_and_torn_tail(tmp_path: Path) -> None:
    f = tmp_path / "00000000000000000009-0000000003.checkpoint"
    f.write_bytes(snapshot_bytes(metadata_values(), header=False))
    assert [p.kind for p in verify_snapshot(f).problems] == ["snapshot_header"]
    good = bytearray(snapshot_bytes(metadata_values()))
    good[200] ^= 0xFF  # inside the data batch
    f.write_bytes(bytes(good))
    kinds = [p.kind for p in verify_snapshot(f).problems]
    assert kinds[0] == "crc"
    f.write_bytes(snapshot_bytes(metadata_values())[:-10])
    kinds = [p.kind for p in verify_snapshot(f).problems]
    assert kinds == ["torn_tail", "snapshot_footer"]
    f.write_bytes(b"")
    assert [p.kind for p in verify_snapshot(f).problems] == ["snapshot_header", "snapshot_footer"]


def test_part_and_deleted_snapshots_are_notes(meta: Path) -> None:
    (meta / "00000000000000000030-0000000005.checkpoint.part").write_bytes(b"partial")
    (meta / "00000000000000000001-0000000001.checkpoint.deleted").write_bytes(snapshot_bytes(metadata_values()))
    code, out, _ = run("verify", str(meta), "--json")
    rep = json.loads(out)
    assert code == 0 and rep["ok"]
    assert sorted(n["kind"] for n in rep["notes"] if n["kind"].startswith("snapshot")) == [
        "snapshot_deleted", "snapshot_part"]


def test_bad_metadata_records_are_shown_not_crashing(tmp_path: Path) -> None:
    d = tmp_path / "__cluster_metadata-0"
    vals = metadata_values()
    truncated = vals[2][:-5]
    unknown = bytes([0, 99, 0]) + b"\xde\xad"
    from mqstore.storage.kafka.log import PartitionLog

    with PartitionLog.open(d) as log:
        log.append_records([SimpleRecord(value=truncated, timestamp=1), SimpleRecord(value=unknown, timestamp=2),
                            SimpleRecord(value=None, timestamp=3)])
    code, out, err = run("dump", str(d), "--print-data")
    assert code == 0, err
    recs = [x for x in out.splitlines() if x.startswith("| offset:")]
    assert "decodeError:" in recs[0]
    assert recs[1].endswith('payload: {"type":"UNKNOWN","apiKey":99,"version":0,"bytes":"dead"}')
    assert "decodeError: metadata record without a value" in recs[2]
    code, out, _ = run("verify", str(d), "--json")
    rep_json = json.loads(out)
    assert code == 1
    assert [p["kind"] for p in rep_json["problems"]] == ["metadata_record", "metadata_record"]
    assert [n["kind"] for n in rep_json["notes"] if n["kind"].startswith("unknown")] == ["unknown_metadata_record"]
    # the same records in a snapshot: one problem per bad record, the unknown one a note
    snap = d / "00000000000000000003-0000000001.checkpoint"
    snap.write_bytes(snapshot_bytes([truncated, unknown]))
    rep = verify_snapshot(snap)
    assert [p.kind for p in rep.problems] == ["metadata_record"]
    assert [n.kind for n in rep.notes] == ["unknown_metadata_record"]


def test_bad_quorum_state_and_bad_decoder(meta: Path) -> None:
    (meta / "quorum-state").write_bytes(b'{"data_version": 9}')
    code, _out, err = run("dump", str(meta / "quorum-state"))
    assert code == 2 and err.startswith("error: quorum-state data_version 9") and "Traceback" not in err
    code, out, _ = run("verify", str(meta), "--json")
    assert code == 1
    assert [p["kind"] for p in json.loads(out)["problems"]] == ["quorum_state"]
    code, _out, err = run("dump", str(meta), "--decoder", "bogus")
    assert code == 2 and "bogus" in err


def test_snapshot_with_compressed_batches(tmp_path: Path) -> None:
    from kraft_support import control_record, snapshot_footer_value, snapshot_header_value

    from mqstore.formats.kafka import Compression

    vals = metadata_values()
    data = (encode_batch([control_record(3, snapshot_header_value())], is_control=True)
            + encode_batch([SimpleRecord(value=v, timestamp=5) for v in vals], base_offset=1,
                           compression=Compression.ZSTD)
            + encode_batch([control_record(4, snapshot_footer_value())], base_offset=1 + len(vals), is_control=True))
    f = tmp_path / "00000000000000000010-0000000001.checkpoint"
    f.write_bytes(data)
    rep = verify_snapshot(f)
    assert rep.ok and rep.batches == 3
    code, out, _ = run("dump", str(f), "--json", "--print-data")
    assert code == 0
    types = [json.loads(x).get("decoded", {}).get("type") for x in out.splitlines()]
    assert [t for t in types if t] == [type_name(n) for n, _v, _d in METADATA_RECORDS]


def test_log_directory_verify_checks_snapshots_and_bootstrap(tmp_path: Path) -> None:
    meta = make_metadata_dir(tmp_path, snapshot=snapshot_bytes(metadata_values()),
                             quorum_state=encode_quorum_state(QS_V1))
    (tmp_path / "bootstrap.checkpoint").write_bytes(snapshot_bytes(metadata_values()[:1], epoch=0))
    before = tree_hash(tmp_path)
    code, out, _ = run("verify", str(tmp_path), "--json")
    assert code == 0, out
    assert tree_hash(tmp_path) == before
    (meta / "00000000000000000020-0000000004.checkpoint").write_bytes(
        snapshot_bytes(metadata_values(), footer=False))
    (tmp_path / "bootstrap.checkpoint").write_bytes(snapshot_bytes(metadata_values()[:1], header=False))
    code, out, _ = run("verify", str(tmp_path), "--json")
    rep = json.loads(out)
    assert code == 1
    assert [(p["kind"], Path(p["path"]).name) for p in rep["problems"]] == [
        ("snapshot_header", "bootstrap.checkpoint")]
    part = next(r for r in rep["partitions"] if r["partition"] == "__cluster_metadata-0")
    assert [(p["kind"], Path(p["path"]).name) for p in part["problems"]] == [
        ("snapshot_footer", "00000000000000000020-0000000004.checkpoint")]
