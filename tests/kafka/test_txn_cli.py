"""`mqstore kafka dump|verify|rebuild-index` on transactional partitions: .txnindex, .snapshot,
--isolation read_committed, bad input (one `error:` line, exit 2) and read-only guarantees."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

import pytest
from click.testing import CliRunner
from txn_support import Op, build, write_partition

from mqstore.cli.main import cli
from mqstore.formats.kafka.txn import (
    AbortedTxn,
    ProducerSnapshotEntry,
    encode_producer_snapshot,
    encode_txn_index,
)


def run(*args: str) -> tuple[int, str, str]:
    r = CliRunner().invoke(cli, ["kafka", *args])
    return r.exit_code, r.stdout, r.stderr


def _hash_dir(d: Path) -> dict[str, str]:
    return {f.name: hashlib.sha256(f.read_bytes()).hexdigest() for f in sorted(d.iterdir()) if f.is_file()}


OPS = [Op("txn", 1, 2), Op("txn", 2, 3), Op("txn", 1, 1), Op("end", 1, commit=False), Op("plain", n=2),
       Op("end", 2, commit=True), Op("txn", 3, 1), Op("end", 3, commit=False), Op("txn", 4, 2)]


@pytest.fixture(params=[False, True], ids=["txn-v1", "txn-v2"])
def partition(request: pytest.FixtureRequest, tmp_path: Path) -> Path:
    m = build(OPS, tv2=request.param)
    d = tmp_path / "orders-0"
    write_partition(d, m, cuts=[3])
    return d


def test_rebuild_verify_dump_txnindex(partition: Path) -> None:
    d = partition
    code, out, err = run("rebuild-index", str(d), "--json")
    assert code == 0, err
    rows = [json.loads(x) for x in out.splitlines()]
    assert [(r["base_offset"], r["aborted_txns"]) for r in rows] == [(0, 0), (6, 2)]
    assert rows[0]["txn_index_path"] is None and rows[1]["txn_index_path"].endswith("00000000000000000006.txnindex")
    assert not (d / "00000000000000000000.txnindex").exists()
    code, out, _ = run("dump", str(d / "00000000000000000006.txnindex"))
    assert code == 0
    assert out.splitlines()[1:] == [
        "version: 0 producerId: 1 firstOffset: 0 lastOffset: 6 lastStableOffset: 2",
        "version: 0 producerId: 3 firstOffset: 10 lastOffset: 11 lastStableOffset: 12",
    ]
    code, out, _ = run("dump", str(d / "00000000000000000006.txnindex"), "--json")
    assert [json.loads(x)["lastStableOffset"] for x in out.splitlines()] == [2, 12]
    before = _hash_dir(d)
    code, out, _ = run("verify", str(d))
    assert code == 0 and out.startswith("OK")
    assert _hash_dir(d) == before


def test_dump_isolation_read_committed(partition: Path) -> None:
    before = _hash_dir(partition)
    code, out, _ = run("dump", str(partition), "--print-data", "--isolation", "read_committed", "--json")
    assert code == 0
    objs = [json.loads(x) for x in out.splitlines()]
    assert [o["offset"] for o in objs if o["type"] == "record"] == [2, 3, 4, 7, 8]
    assert all(not o["isControl"] for o in objs if o["type"] == "batch" and "isControl" in o)
    code, out, _ = run("dump", str(partition), "--print-data", "--json")
    assert [json.loads(x)["offset"] for x in out.splitlines() if json.loads(x)["type"] == "record"] == list(range(14))
    code, out, _ = run("dump", str(partition / "00000000000000000006.log"), "--isolation", "read_committed",
                       "--print-data")
    assert code == 0 and "| offset: 7 " in out and "| offset: 10 " not in out and "endTxnMarker" not in out
    assert _hash_dir(partition) == before
    code, _, err = run("dump", str(partition), "--isolation", "snapshot")
    assert code == 2 and "snapshot" in err


def test_verify_reports_txnindex_and_snapshot_problems(partition: Path) -> None:
    d = partition
    assert run("rebuild-index", str(d))[0] == 0
    f = d / "00000000000000000006.txnindex"
    f.write_bytes(f.read_bytes()[:40])
    (d / "00000000000000000006.snapshot").write_bytes(b"\x00\x01\x00\x00")
    before = _hash_dir(d)
    code, out, _ = run("verify", str(d), "--json")
    assert code == 1
    kinds = sorted(p["kind"] for p in json.loads(out)["problems"])
    assert kinds == ["snapshot_corrupt", "txnindex_corrupt"]
    assert _hash_dir(d) == before
    f.write_bytes(encode_txn_index([AbortedTxn(1, 0, 6, 2)]))
    code, out, _ = run("verify", str(d))
    assert code == 1 and "problem: txnindex_mismatch" in out


def test_bad_files_give_one_error_line(tmp_path: Path) -> None:
    t = tmp_path / "00000000000000000000.txnindex"
    t.write_bytes(encode_txn_index([AbortedTxn(1, 0, 6, 2)])[:30])
    s = tmp_path / "00000000000000000005.snapshot"
    good = encode_producer_snapshot([ProducerSnapshotEntry(3, 1, 9, 40, 2, 1234, 0, -1)])
    for f, data, msg in [(t, None, "partial entry"), (s, good[:-4], "entries need"),
                         (s, good[:-1] + bytes([good[-1] ^ 1]), "CRC mismatch")]:
        if data is not None:
            f.write_bytes(data)
        code, _, err = run("dump", str(f))
        assert code == 2
        lines = err.strip().splitlines()
        assert len(lines) == 1 and lines[0].startswith("error:") and msg in lines[0]


def test_dump_snapshot(tmp_path: Path) -> None:
    s = tmp_path / "00000000000000000042.snapshot"
    s.write_bytes(encode_producer_snapshot([ProducerSnapshotEntry(3, 1, 9, 40, 2, 1234, 0, -1),
                                            ProducerSnapshotEntry(8, 5, -1, -1, 0, 99, 7, 41)]))
    code, out, _ = run("dump", str(s))
    assert code == 0
    lines = out.splitlines()
    assert lines[1].startswith("version: 1 crc: ") and lines[1].endswith("producers: 2")
    assert lines[3] == ("producerId: 8 producerEpoch: 5 lastSequence: -1 lastOffset: -1 offsetDelta: 0 "
                        "timestamp: 99 coordinatorEpoch: 7 currentTxnFirstOffset: 41")
    code, out, _ = run("dump", str(s), "--json")
    rows = [json.loads(x) for x in out.splitlines()]
    assert rows[0]["type"] == "snapshot" and [r["producerId"] for r in rows[1:]] == [3, 8]


def test_directory_dump_shows_a_bad_snapshot_and_goes_on(partition: Path) -> None:
    (partition / "00000000000000000006.snapshot").write_bytes(b"\x00\x01\x00")
    code, out, _ = run("dump", str(partition))
    assert code == 0
    assert any(x.startswith("invalid: producer snapshot of 3 bytes is shorter") for x in out.splitlines())
    assert "Dumping " + str(partition / "00000000000000000006.log") in out
    code, _, err = run("dump", str(partition / "00000000000000000006.snapshot"))
    assert code == 2 and err.startswith("error:")
