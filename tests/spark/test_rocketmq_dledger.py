"""The ``rocketmq`` Spark source over a store whose CommitLog is a DLedger one
(``enableDLegerCommitLog``): the batch read plans over the DLedger data files and reads the
messages at entry position + 48; the streaming reader refuses such a store with one error."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest
from click.testing import CliRunner

from mqstore.cli.main import cli
from mqstore.errors import CorruptDataError, SourceOptionError
from mqstore.formats.rocketmq.record import TRANSACTION_MASK
from mqstore.spark._rocketmq_options import parse_options
from mqstore.spark._rocketmq_store import dledger_data_dirs, list_segments
from mqstore.spark.rocketmq_source import RocketMQStreamReader, plan_batch, read_range

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # tests/: the rocketmq test package
from rocketmq.dledger_support import CQ_FILE, DATA_FILE, build_dledger_store, make_records

N = 90


@pytest.fixture
def dstore(tmp_path: Path):
    root = tmp_path / "broker-a"
    recs = make_records(N)
    entries = build_dledger_store(root, recs)
    r = CliRunner().invoke(cli, ["rocketmq", "rebuild-index", str(root), "--cq-file-size", str(CQ_FILE)])
    assert r.exit_code == 0, r.output
    return root, recs, entries


def _rows(parts) -> list[dict]:
    out = []
    for p in parts:
        for b in read_range(p, include_body=True, check_crc=True):
            out += b.to_pylist()
    return sorted(out, key=lambda r: r["commitLogOffset"])


def test_plan_and_read_without_spark(dstore):
    root, recs, entries = dstore
    assert dledger_data_dirs(str(root)) == [root / "dledger-n0" / "data"]
    (root / "commitlog").mkdir()  # an empty commitlog/ does not make it a classic store
    assert dledger_data_dirs(str(root)) == [root / "dledger-n0" / "data"]
    with pytest.raises(SourceOptionError, match="migrated to DLedger"):
        dledger_data_dirs(str(root), str(root / "commitlog"))
    segs = list_segments(str(root))
    assert [s.base for s in segs] == [k * DATA_FILE for k in range(len(segs))]
    parts = plan_batch(parse_options({"path": str(root)}))
    assert parts and all(p.dledger for p in parts)
    n_files = len(parts)
    rows = _rows(parts)
    assert [r["commitLogOffset"] for r in rows] == [e.offset for e in entries]
    assert [(r["topic"], r["body"], r["queueOffset"]) for r in rows] == [
        (rec.topic, rec.body, e.queue_offset) for rec, e in zip(recs, entries, strict=True)]
    # split into more partitions at entry boundaries: the same rows
    parts = plan_batch(parse_options({"path": str(root), "minPartitions": "12"}))
    assert len(parts) > n_files
    assert [r["commitLogOffset"] for r in _rows(parts)] == [e.offset for e in entries]
    # a topic and queue-offset range: planned through the ConsumeQueue, read from the entries
    opts = parse_options({"path": str(root), "topics": "TopicA", "startingOffsets": '{"TopicA": {"broker-a": {"1": 2}}}'})
    want = [e.offset for rec, e in zip(recs, entries, strict=True)
            if rec.topic == "TopicA" and (rec.queue_id != 1 or e.queue_offset >= 2)
            and rec.sys_flag & TRANSACTION_MASK in (0, 8)]
    got = [r["commitLogOffset"] for r in _rows(plan_batch(opts))
           if r["sysFlag"] & TRANSACTION_MASK in (0, 8)]
    assert got == want


def test_corrupt_entry_is_an_error(dstore):
    root, _, entries = dstore
    e = entries[10]
    data = sorted((root / "dledger-n0" / "data").iterdir())[e.pos // DATA_FILE]
    with open(data, "r+b") as fh:
        fh.seek(e.pos % DATA_FILE)
        fh.write(b"\x00\x00\x00\x09")
    with pytest.raises(CorruptDataError, match="unknown DLedger entry magic 9"):
        _rows(plan_batch(parse_options({"path": str(root)})))


def test_stream_refused(dstore):
    root, _, _ = dstore
    with pytest.raises(SourceOptionError, match="DLedger"):
        RocketMQStreamReader(parse_options({"path": str(root)}))


@pytest.mark.spark
def test_spark_batch_read(spark, dstore):
    root, recs, entries = dstore
    df = spark.read.format("rocketmq").load(str(root))
    rows = sorted(df.select("commitLogOffset", "topic", "body", "queueId").collect(), key=lambda r: r[0])
    assert [r[0] for r in rows] == [e.offset for e in entries]
    assert [(r[1], bytes(r[2]), r[3]) for r in rows] == [(rec.topic, rec.body, rec.queue_id) for rec in recs]
    n = spark.read.format("rocketmq").load(str(root)).where("topic = 'TopicB'").count()
    assert n == sum(1 for rec in recs if rec.topic == "TopicB")
