"""storage/fileio.py and the ranged readers, against a real S3-compatible server (moto's, on
127.0.0.1, see tests/s3_server.py; no SparkSession): the same rows from a store in a bucket as from the local
directory, with chunks small enough that records and batches cross them (and are larger than
them); missing bucket / prefix and bad credentials are typed errors; URLs and fs options."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from kafka_log_support import fixture_log_dir, write_partition
from rocketmq_spark_support import make_store

from mqstore.errors import InvalidArgumentError, ObjectStoreError, SourceOptionError, StoreNotFoundError
from mqstore.storage import fileio
from mqstore.storage.fileio import LOCAL, fileio_for, is_remote, is_url, local_path, split_fs_options
from s3_server import S3

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures"


@pytest.fixture(scope="module")
def stores(s3: S3, tmp_path_factory: pytest.TempPathFactory) -> dict[str, tuple[str, str]]:
    """``name: (local path, s3 URL)`` of the RocketMQ and Kafka test data uploaded to the bucket."""
    tmp = tmp_path_factory.mktemp("fileio")
    gen = make_store(tmp / "gen-store", 120, body_size=300)
    kafka_gen = tmp / "kafka-gen"
    kafka_gen.mkdir()
    write_partition(kafka_gen / "events-0", batches=40, per_batch=5, segment_bytes=4096)
    out = {
        "basic": FIXTURES / "rocketmq" / "basic" / "store",
        "gen": gen,
        "kafka": fixture_log_dir(tmp),
        "kafka-gen": kafka_gen,
    }
    return {k: (str(v), s3.upload(v, f"s3://data/{k}")) for k, v in out.items()}


def test_url_rules() -> None:
    assert is_url("s3://b/x") and is_remote("s3://b/x") and is_remote("gs://b/x") and is_remote("hdfs://nn:8020/x")
    assert is_url("file:///tmp/x") and not is_remote("file:///tmp/x") and not is_url("/tmp/x")
    assert local_path("file:///tmp/x") == "/tmp/x" and local_path("/a/b") == "/a/b"
    assert fileio_for("/tmp") is LOCAL and fileio_for("file:///tmp") is LOCAL
    fs, rest = split_fs_options({"fs.s3.Endpoint": "http://h:1", "topics": "a"})
    assert fs == {"fs.s3.endpoint": "http://h:1"} and rest == {"topics": "a"}
    with pytest.raises(InvalidArgumentError, match=r"unknown file system option 'fs\.s3\.endpint'"):
        split_fs_options({"fs.s3.endpint": "x"})
    with pytest.raises(InvalidArgumentError, match="unsupported URL scheme 'ftp'"):
        fileio_for("ftp://h/x")


def test_listing_and_ranges(s3: S3, stores: dict[str, tuple[str, str]]) -> None:
    local, url = stores["basic"]
    io = fileio_for(url, s3.options())
    names = [e.name for e in io.list(io.join(url, "commitlog"))]
    assert names == sorted(p.name for p in (Path(local) / "commitlog").iterdir())
    seg = io.join(url, "commitlog", names[1])
    with io.open(seg) as f, LOCAL.open(str(Path(local) / "commitlog" / names[1])) as g:
        assert f.whole is None and g.whole is not None and f.size == g.size
        for pos, n in ((0, 100), (5000, 7000), (g.size - 10, 50), (g.size + 5, 10)):
            assert np.array_equal(f.read(pos, n), g.read(pos, n))
    assert io.list(io.join(url, "no-such-dir")) == []
    assert io.stat(io.join(url, "nothing")) is None


def _rocketmq_rows(path: str, fs: dict[str, str], **extra: str) -> list[dict]:
    from mqstore.spark._rocketmq_options import parse_options
    from mqstore.spark.rocketmq_source import plan_batch, read_range

    out: list[dict] = []
    for part in plan_batch(parse_options({"path": path, "brokerNames": "b", **extra}), None, fs):
        for rb in read_range(part, include_body=True, check_crc=True):
            out += rb.to_pylist()
    return out


@pytest.mark.parametrize("chunk", [None, 1000, 200])
def test_rocketmq_rows_equal_local(s3: S3, stores: dict[str, tuple[str, str]], chunk: int | None,
                                   monkeypatch: pytest.MonkeyPatch) -> None:
    """Chunks of 1000 / 200 bytes: records (400 bytes here) cross chunk ends or exceed a chunk."""
    if chunk:
        monkeypatch.setattr(fileio, "CHUNK_BYTES", chunk)
    for name in ("basic", "gen"):
        local, url = stores[name]
        expected = _rocketmq_rows(local, {})
        assert len(expected) > 100
        assert _rocketmq_rows(url, s3.options()) == expected
        assert _rocketmq_rows(url, s3.options(), minPartitions="7", topics="orders") == \
            _rocketmq_rows(local, {}, minPartitions="7", topics="orders")


def test_rocketmq_stream_walk_equal_local(s3: S3, stores: dict[str, tuple[str, str]],
                                          monkeypatch: pytest.MonkeyPatch) -> None:
    from mqstore.spark._rocketmq_store import list_segments
    from mqstore.storage.rocketmq.walk import walk

    monkeypatch.setattr(fileio, "CHUNK_BYTES", 700)
    local, url = stores["gen"]
    io = fileio_for(url, s3.options())
    lsegs, rsegs = list_segments(local), list_segments(url, None, io)
    assert [(s.base, s.size) for s in lsegs] == [(s.base, s.size) for s in rsegs]
    for start, kw in ((lsegs[0].base, {}), (lsegs[0].base, {"max_records": 17}), (lsegs[1].base, {"max_records": 3})):
        a, b = walk(lsegs, start, **kw), walk(rsegs, start, io=io, **kw)
        assert np.array_equal(a.offsets, b.offsets) and np.array_equal(a.sizes, b.sizes) and a.end == b.end


def _kafka_rows(path: str, fs: dict[str, str], **extra: str) -> list[dict]:
    from mqstore.spark._kafka_options import parse_options
    from mqstore.spark._kafka_plan import discover_partitions, plan_batch_ranges, split_ranges
    from mqstore.spark._kafka_read import read_arrow

    opts = parse_options({"path": path, **extra}, streaming=False)
    out: list[dict] = []
    for r in split_ranges(plan_batch_ranges(opts, discover_partitions(opts, fs)), opts.min_partitions):
        for rb in read_arrow(r, include_headers=True):
            out += rb.to_pylist()
    return sorted(out, key=lambda r: (r["topic"], r["partition"], r["offset"]))


@pytest.mark.parametrize("chunk", [None, 3000, 100])
def test_kafka_rows_equal_local(s3: S3, stores: dict[str, tuple[str, str]], chunk: int | None,
                                monkeypatch: pytest.MonkeyPatch) -> None:
    if chunk:  # (small chunks: many requests, so two partitions only)
        monkeypatch.setattr(fileio, "CHUNK_BYTES", chunk)
    cases = [stores["kafka"], stores["kafka-gen"]] if chunk is None else \
        [(f"{stores['kafka'][0]}/multi_segment_roll_bytes-0", f"{stores['kafka'][1]}/multi_segment_roll_bytes-0"),
         stores["kafka-gen"]]
    for local, url in cases:
        expected = _kafka_rows(local, {})
        assert len(expected) > 100
        assert _kafka_rows(url, s3.options()) == expected
        assert _kafka_rows(url, s3.options(), minPartitions="9") == expected
    local, url = stores["kafka"]
    part = f"{url}/multi_segment_roll_bytes-0"
    assert _kafka_rows(part, s3.options(), startingOffsets='{"multi_segment_roll_bytes": {"0": 300}}') == \
        _kafka_rows(f"{local}/multi_segment_roll_bytes-0", {},
                    startingOffsets='{"multi_segment_roll_bytes": {"0": 300}}')


def test_kafka_offsets_and_byte_limits_equal_local(s3: S3, stores: dict[str, tuple[str, str]],
                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    from mqstore.spark._kafka_options import parse_options
    from mqstore.spark._kafka_plan import discover_partitions, rate_limit_bytes

    monkeypatch.setattr(fileio, "CHUNK_BYTES", 900)
    local, url = stores["kafka"]
    li = discover_partitions(parse_options({"path": local}, streaming=True))
    ri = discover_partitions(parse_options({"path": url}, streaming=True), s3.options())
    assert [(i.tp, i.log_start, i.log_end) for i in li] == [(i.tp, i.log_start, i.log_end) for i in ri]
    for budget in (1, 3000, 50_000):
        assert rate_limit_bytes({i.tp: i.path for i in ri}, {i.tp: i.log_start for i in ri},
                                {i.tp: i.log_end for i in ri}, budget, {i.tp: i.io for i in ri}) == \
            rate_limit_bytes({i.tp: i.path for i in li}, {i.tp: i.log_start for i in li},
                             {i.tp: i.log_end for i in li}, budget)


def test_errors_are_typed(s3: S3, stores: dict[str, tuple[str, str]]) -> None:
    _local, url = stores["basic"]
    bad = {**s3.options(), "fs.s3.secretKey": "wrong"}
    with pytest.raises(ObjectStoreError, match="refused access: check the credentials"):
        _rocketmq_rows(url, bad)
    with pytest.raises(ObjectStoreError, match="refused access"):
        _kafka_rows(stores["kafka"][1], bad)
    with pytest.raises(StoreNotFoundError, match="bucket 'no-such-bucket' does not exist"):
        _rocketmq_rows("s3://no-such-bucket/store", s3.options())
    with pytest.raises(StoreNotFoundError, match="bucket 'no-such-bucket' does not exist"):
        _kafka_rows("s3://no-such-bucket/logs", s3.options())
    with pytest.raises(StoreNotFoundError, match="no commitlog directory"):
        _rocketmq_rows("s3://data/missing-prefix", s3.options())
    with pytest.raises(StoreNotFoundError, match="kafka-log path not found"):
        _kafka_rows("s3://data/missing-prefix", s3.options())
    with pytest.raises(SourceOptionError, match="not supported for a store in an object store"):
        _rocketmq_rows(url, s3.options(), startingOffsets='{"orders": {"basic": {"0": 1}}}')
    with pytest.raises(SourceOptionError, match="not supported for partitions in an object store"):
        _kafka_rows(stores["kafka"][1], s3.options(), startingTimestamp="1")
    with pytest.raises(SourceOptionError, match="read_committed is not supported"):
        _kafka_rows(stores["kafka"][1], s3.options(), **{"kafka.isolation.level": "read_committed"})
