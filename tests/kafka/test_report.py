"""`mqstore kafka report`: figures of a log directory built with known shapes (several segments,
transactions with COMMIT and ABORT markers, compressed batches, a timestamp going back in one
segment, Kafka's per-log-directory recovery-point checkpoint), asserted exactly."""

from __future__ import annotations

import hashlib
import json
import struct
from pathlib import Path

import pytest
from click.testing import CliRunner

from mqstore.cli.main import cli
from mqstore.formats.kafka import SimpleRecord, encode_batch
from mqstore.formats.kafka.compression import Compression
from mqstore.kernels.report import log2_histogram_py
from mqstore.storage.kafka.log import PartitionLog
from mqstore.storage.kafka.report import kafka_report, partition_dirs, verify_summary
from mqstore.storage.kafka.segment import LogConfig

T0 = 1_700_000_000_000


def _recs(n: int, ts: int, tag: str) -> list[SimpleRecord]:
    return [SimpleRecord(value=f"{tag}-{i}".encode() * 20, key=f"k{i}".encode(), timestamp=ts + i) for i in range(n)]


def _marker(commit: bool, pid: int, ts: int) -> bytes:
    rec = SimpleRecord(key=struct.pack(">hh", 0, 1 if commit else 0), value=struct.pack(">hi", 0, 3), timestamp=ts)
    return encode_batch([rec], producer_id=pid, producer_epoch=2, is_transactional=True, is_control=True)


@pytest.fixture(scope="module")
def logdir(tmp_path_factory: pytest.TempPathFactory) -> dict:
    root = tmp_path_factory.mktemp("logdir")
    batches: dict[str, list[bytes]] = {"orders-0": [], "orders-1": []}
    p0 = root / "orders-0"
    cfg = LogConfig(segment_bytes=600, index_interval_bytes=256)
    with PartitionLog.open(p0, cfg) as log:
        plan = [
            encode_batch(_recs(5, T0, "a"), producer_id=7, producer_epoch=1, base_sequence=0, is_transactional=True),
            _marker(True, 7, T0 + 10),
            encode_batch(_recs(4, T0 + 100, "b"), producer_id=8, producer_epoch=0, base_sequence=0,
                         is_transactional=True),
            _marker(False, 8, T0 + 110),
            encode_batch(_recs(6, T0 + 200, "c"), compression=Compression.GZIP),
            encode_batch(_recs(3, T0 + 50, "d")),  # goes back in time: 50 < 205
            encode_batch(_recs(8, T0 + 300, "e"), compression=Compression.GZIP, producer_id=9, producer_epoch=0,
                         base_sequence=0),
            encode_batch(_recs(2, T0 + 3000, "f")),
        ]
        for b in plan:
            log.append(b, now=T0 + 5000)
            batches["orders-0"].append(b)
    with PartitionLog.open(root / "orders-1", cfg) as log:
        for i in range(3):
            b = encode_batch(_recs(2, T0 + 1000 * i, f"x{i}"))
            log.append(b, now=T0 + 5000)
            batches["orders-1"].append(b)
    for d in ("orders-0", "orders-1"):  # keep Kafka's layout: one checkpoint per log directory
        (root / d / "recovery-point-offset-checkpoint").unlink(missing_ok=True)
    (root / "recovery-point-offset-checkpoint").write_text("0\n2\norders 0 20\norders 1 6\n")
    return {"root": root, "batches": batches}


def _digest(root: Path) -> str:
    h = hashlib.sha256()
    for p in sorted(root.rglob("*")):
        if p.is_file():
            h.update(str(p.relative_to(root)).encode())
            h.update(p.read_bytes())
    return h.hexdigest()


def test_kafka_report_figures_exact(logdir: dict) -> None:
    root = logdir["root"]
    before = _digest(root)
    r = kafka_report(root, index_interval_bytes=256)
    assert _digest(root) == before
    assert [p["partition"] for p in r["partitions"]] == ["orders-0", "orders-1"]
    p0, p1 = r["partitions"]
    assert len(p0["segments"]) >= 2
    assert p0["batches"] == 8 and p0["records"] == 5 + 4 + 6 + 3 + 8 + 2  # markers are not records
    assert p0["logEndOffset"] == 30  # 28 records + 2 markers
    assert (p0["recoveryPoint"], p0["unflushedMessages"]) == (20, 10)
    assert p0["recoveryPointFile"] == str(root / "recovery-point-offset-checkpoint")
    assert (p1["logEndOffset"], p1["recoveryPoint"], p1["unflushedMessages"]) == (6, 6, 0)
    # one batch older than an earlier one (d after c), in orders-0 only
    assert (p0["timestampBreaks"], p1["timestampBreaks"]) == (1, 0)
    segs = p0["segments"]
    assert [s["baseOffset"] for s in segs] == sorted(s["baseOffset"] for s in segs)
    assert sum(s["bytes"] for s in segs) == sum(len(b) for b in logdir["batches"]["orders-0"])
    for s in segs:
        assert s["expectedEntriesPerMiB"] == 4096.0
        assert s["indexEntriesPerMiB"] == round(s["offsetIndexEntries"] / (s["bytes"] / (1 << 20)), 3)
    # producers and transactions
    prods = {p["producerId"]: p for p in r["producers"]["top"]}
    assert set(prods) == {7, 8, 9}
    assert (prods[7]["transactionalBatches"], prods[7]["commits"], prods[7]["aborts"], prods[7]["epoch"]) == (1, 1, 0, 2)
    assert (prods[8]["transactionalBatches"], prods[8]["commits"], prods[8]["aborts"]) == (1, 0, 1)
    assert (prods[9]["batches"], prods[9]["records"], prods[9]["transactionalBatches"]) == (1, 8, 0)
    assert (r["producers"]["commits"], r["producers"]["aborts"], r["producers"]["count"]) == (1, 1, 3)
    # batch sizes, compression (both gzip batches sampled), records per second
    sizes = [len(b) for bs in logdir["batches"].values() for b in bs]
    assert r["batchSize"]["counts"] == log2_histogram_py(sizes, len(r["batchSize"]["counts"]))
    assert r["compressionRatio"]["sampled"] == 2
    assert all(c >= 0 for c in r["compressionRatio"]["counts"]) and sum(r["compressionRatio"]["counts"]) == 2
    rate = r["recordsPerSecond"]
    assert rate["binMs"] == 1000
    assert sum(rate["partitions"]["orders-0"]) == 28 and sum(rate["partitions"]["orders-1"]) == 6


def test_partition_dirs(logdir: dict, tmp_path: Path) -> None:
    root = logdir["root"]
    assert partition_dirs(root / "orders-1") == [root / "orders-1"]
    r = kafka_report(root / "orders-1")
    assert [p["partition"] for p in r["partitions"]] == ["orders-1"]
    assert r["partitions"][0]["recoveryPoint"] == 6  # found in the parent log directory
    from mqstore.errors import StoreNotFoundError

    with pytest.raises(StoreNotFoundError):
        partition_dirs(tmp_path)


def test_kafka_verify_summary_and_cli(logdir: dict, tmp_path: Path) -> None:
    import shutil

    root = tmp_path / "logs"
    shutil.copytree(logdir["root"], root)
    v = verify_summary(root)
    assert v["ok"] and v["batches"] == 11
    log = sorted((root / "orders-1").glob("*.log"))[0]
    data = bytearray(log.read_bytes())
    data[-5] ^= 0xFF
    log.write_bytes(bytes(data))
    v = verify_summary(root)
    assert not v["ok"]
    # the .log fails its CRC; its .timeindex names an offset of the broken batch
    assert [f["file"] for f in v["files"] if not f["ok"]] == [f"orders-1/{log.name}",
                                                               f"orders-1/{log.stem}.timeindex"]
    out = tmp_path / "k.html"
    res = CliRunner().invoke(cli, ["kafka", "report", str(root), "--html", str(out), "--json"], catch_exceptions=False)
    assert res.exit_code == 1  # verify found a problem: the report is written all the same
    doc = json.loads(res.output)
    assert doc["verify"]["ok"] is False
    page = out.read_text()
    assert page.count("<svg") == 9
    res = CliRunner().invoke(cli, ["kafka", "report", str(tmp_path / "nope"), "--json"])
    assert res.exit_code == 2 and res.output.startswith("error:")
