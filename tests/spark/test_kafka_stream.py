"""The kafka-log data source as a stream: live writer, admission control, restart exactly once."""

from __future__ import annotations

import threading
from pathlib import Path
from typing import Any

import pytest
from kafka_log_support import T0, write_partition
from pyspark.errors import PySparkException

from mqstore.formats.kafka import Compression, SimpleRecord
from mqstore.kafka import LogConfig, PartitionLog


class Collector:
    """A foreachBatch sink that keeps every micro-batch (replays included) by batch id."""

    def __init__(self) -> None:
        self.batches: dict[int, list[tuple[str, int, int, bytes | None]]] = {}
        self.replayed: list[int] = []

    def __call__(self, df: Any, batch_id: int) -> None:
        rows = sorted((r["topic"], r["partition"], r["offset"], None if r["value"] is None else bytes(r["value"]))
                      for r in df.select("topic", "partition", "offset", "value").collect())
        if batch_id in self.batches:
            self.replayed.append(batch_id)
            assert rows == self.batches[batch_id], f"replayed batch {batch_id} differs"
        self.batches[batch_id] = rows

    def rows(self) -> list[tuple[str, int, int, bytes | None]]:
        return [r for b in sorted(self.batches) for r in self.batches[b]]


def _run(spark, path: Path, checkpoint: Path, sink: Collector, **options: str) -> list[int]:
    q = (spark.readStream.format("kafka-log").options(**options).load(str(path))
         .writeStream.foreachBatch(sink).option("checkpointLocation", str(checkpoint))
         .trigger(availableNow=True).start())
    q.awaitTermination()
    assert q.exception() is None
    return [int(p["numInputRows"]) for p in q.recentProgress]


def _value(p: int, i: int) -> bytes:
    return f"p{p}-r{i}".encode()


def test_live_writer_new_segments_new_partition_and_restarts(spark, tmp_path: Path) -> None:
    root = tmp_path / "logs"
    cfg = LogConfig(segment_bytes=4096, index_interval_bytes=256)
    logs = {p: PartitionLog.open(root / f"live-{p}", cfg) for p in (0, 1)}
    counts = {0: 0, 1: 0}

    def append(p: int, n: int) -> None:
        recs = [SimpleRecord(_value(p, counts[p] + k), key=b"k%d" % k) for k in range(n)]
        logs[p].append_records(recs, compression=Compression.LZ4 if counts[p] % 2 else Compression.NONE,
                               timestamp=T0 + counts[p])
        counts[p] += n

    for p in (0, 1):
        append(p, 40)
    stop = threading.Event()
    progressed = threading.Event()

    def writer() -> None:
        i = 0
        while not stop.is_set() and i < 160:
            append(i % 2, 7)
            i += 1
            if i == 30:
                progressed.set()
            stop.wait(0.01)

    sink = Collector()
    ck = tmp_path / "ck"
    opts = {"startingOffsets": "earliest", "maxOffsetsPerTrigger": "150"}
    t = threading.Thread(target=writer)
    t.start()
    try:
        sizes = _run(spark, root, ck, sink, **opts)  # runs while the writer appends
        progressed.wait()
        sizes += _run(spark, root, ck, sink, **opts)
    finally:
        stop.set()
        t.join()
    # a partition created while the query is stopped is read from its start
    write_partition(root / "live-2", batches=3, per_batch=4, txn=False, topic="live", partition=2)
    # a crash after the offsets of a batch were logged but before it committed: the batch is replayed
    sizes += _run(spark, root, ck, sink, **opts)
    commits = sorted(int(f.name) for f in (ck / "commits").iterdir() if f.name.isdigit())
    (ck / "commits" / str(commits[-1])).unlink()
    (ck / "commits" / f".{commits[-1]}.crc").unlink(missing_ok=True)
    sizes += _run(spark, root, ck, sink, **opts)
    assert sink.replayed == [commits[-1]]
    for log in logs.values():
        log.close()
    sizes += _run(spark, root, ck, sink, **opts)  # nothing new

    rows = sink.rows()
    assert len(rows) == len(set(rows))  # no duplicates
    for p in (0, 1):
        got = [r for r in rows if r[1] == p]
        assert [r[2] for r in got] == list(range(counts[p]))  # no gaps, in order
        assert [r[3] for r in got] == [_value(p, i) for i in range(counts[p])]
    assert [r[2] for r in rows if r[1] == 2] == list(range(12))
    assert all(s <= 150 for s in sizes) and sum(sizes) >= len(rows)
    assert len(list((root / "live-0").glob("*.log"))) > 2  # the writer rolled segments


def test_default_start_is_latest_and_max_bytes(spark, tmp_path: Path) -> None:
    root = tmp_path / "logs"
    exp = write_partition(root / "s-0", batches=20, txn=False, topic="s", partition=0)
    sink = Collector()
    ck = tmp_path / "ck"
    assert sum(_run(spark, root, ck, sink)) == 0  # startingOffsets defaults to latest for streams
    with PartitionLog.open(root / "s-0", LogConfig(segment_bytes=16 * 1024)) as log:
        for k in range(30):
            log.append_records([SimpleRecord(b"new-%d" % k), SimpleRecord(b"more-%d" % k)], timestamp=T0 + k)
    sizes = _run(spark, root, ck, sink, maxBytesPerTrigger="300")
    assert len(sizes) >= 5 and max(sizes) <= 8  # a few 2-record batches (~85 bytes each) per trigger
    rows = sink.rows()
    n = len(exp)
    assert [r[2] for r in rows] == list(range(n, n + 60))
    assert [r[3] for r in rows][:4] == [b"new-0", b"more-0", b"new-1", b"more-1"]


def test_stream_errors_carry_the_mqstore_message(spark, tmp_path: Path) -> None:
    root = tmp_path / "logs"
    write_partition(root / "e-0", batches=3, txn=False, topic="e", partition=0)
    with pytest.raises(PySparkException) as excinfo:  # Spark wraps the typed error in its own exception
        _run(spark, root, tmp_path / "ck", Collector(), startingOffsets='{"e":{"0":999}}')
    assert "is beyond the log end offset" in str(excinfo.value)
    with pytest.raises(PySparkException) as excinfo:  # Spark wraps the typed error in its own exception
        _run(spark, root, tmp_path / "ck2", Collector(), endingOffsets="latest")
    assert "only valid in batch queries" in str(excinfo.value)
