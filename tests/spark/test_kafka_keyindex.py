"""Spark and the Kafka key index: the rebuild writes the same .keyindex bytes as the local command,
and query-keys over log directories answers like PartitionLog.find_keys."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import CliRunner

from mqstore.errors import InvalidArgumentError, StoreNotFoundError
from mqstore.formats.kafka.batch import Header, SimpleRecord
from mqstore.spark.query_kafka import query_kafka_keys
from mqstore.spark.rebuild import rebuild_kafka
from mqstore.storage.kafka.keyindex import rebuild_keyindex
from mqstore.storage.kafka.log import PartitionLog
from mqstore.storage.kafka.segment import LogConfig


@pytest.fixture(scope="module")
def logdir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("kafka-keys") / "data"
    for p in range(3):
        cfg = LogConfig(segment_bytes=3000, key_index=True, key_header="trace") if p < 2 else LogConfig(segment_bytes=3000)
        with PartitionLog.open(root / f"orders-{p}", cfg) as log:
            for i in range(80 + 10 * p):
                log.append_records([SimpleRecord(b"v" * (i % 50), key=b"k%d" % (i % 9),
                                                 headers=[Header("trace", b"t%d" % (i % 4))])],
                                   timestamp=1_700_000_000_000 + i)
    return root


def test_rebuild_writes_the_local_key_indexes(spark, logdir: Path, tmp_path: Path) -> None:
    out = tmp_path / "spark"
    stats = rebuild_kafka(spark, logdir, out, key_index=True, key_header="trace")
    n = 0
    for part in sorted(logdir.iterdir()):
        for log in sorted(part.glob("*.log")):
            local = tmp_path / "local" / part.name
            local.mkdir(parents=True, exist_ok=True)
            rebuild_keyindex(log, local, header_name="trace")
            assert (out / part.name / (log.stem + ".keyindex")).read_bytes() == (local / (log.stem + ".keyindex")).read_bytes()
            n += 1
    assert stats.segments == n and stats.key_entries == 2 * (80 + 90 + 100)
    with pytest.raises(InvalidArgumentError):
        rebuild_kafka(spark, logdir, tmp_path / "x", key_header="trace")


def test_query_keys_equals_the_partition_lookups(spark, logdir: Path) -> None:
    keys = ["k1", "k5", "absent"]
    rows = query_kafka_keys(spark, logdir, keys, begin=1_700_000_000_010, end=1_700_000_000_070).collect()
    got = sorted((r.key, r.partition, r.offset) for r in rows)
    want = []
    for p in range(3):
        with PartitionLog.open(logdir / f"orders-{p}", read_only=True) as log:
            for k, offs in zip(keys, log.offsets_for_keys(keys, 1_700_000_000_010, 1_700_000_000_070), strict=True):
                want += [(k, p, o) for o in offs]
    assert got == sorted(want) and got
    assert {r.indexed for r in rows if r.partition < 2} == {True}
    assert {r.indexed for r in rows if r.partition == 2} == {False}
    hrows = query_kafka_keys(spark, [logdir / "orders-0"], ["t2"], header="trace").collect()
    assert [r.offset for r in hrows] == list(range(2, 80, 4))
    with pytest.raises(StoreNotFoundError):
        query_kafka_keys(spark, logdir / "missing", ["k1"])
    with pytest.raises(InvalidArgumentError):
        query_kafka_keys(spark, logdir, ["k1"], begin=5, end=4)


def test_query_keys_cli(spark, logdir: Path, tmp_path: Path) -> None:
    from mqstore.cli.main import cli

    kf = tmp_path / "keys.txt"
    kf.write_text("k2\nk3\n")
    r = CliRunner().invoke(cli, ["spark", "query-keys", "--layout", "kafka", str(logdir), "--keys-file", str(kf),
                                 "--json", "--master", "local[2]"])
    assert r.exit_code == 0, r.output
    rows = [json.loads(x) for x in r.stdout.splitlines()]
    assert {x["key"] for x in rows} == {"k2", "k3"} and len(rows) == 2 * (9 + 10 + 11)
    r = CliRunner().invoke(cli, ["spark", "query-keys", "--layout", "kafka", str(tmp_path / "nope"),
                                 "--keys-file", str(kf)])
    assert r.exit_code == 2 and r.stderr.startswith("error: ")
