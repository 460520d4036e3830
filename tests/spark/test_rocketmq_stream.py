"""The ``rocketmq`` source as a stream: a live writer appends while the query runs, the query is
stopped and restarted from its checkpoint, and every message arrives exactly once."""

from __future__ import annotations

import json
import threading
import time
from pathlib import Path

import pytest
from pyspark.errors import PySparkException
from pyspark.sql import functions as F
from rocketmq_spark_support import fill, make_store, small_config

from mqstore import MessageStore
from mqstore.spark._rocketmq_store import list_segments
from mqstore.storage.rocketmq.walk import walk

pytestmark = pytest.mark.spark


def seqs_in(spark, out: Path) -> list[int]:
    return sorted(int(r.seq) for r in spark.read.parquet(str(out)).select("seq").collect())


def test_live_writer_stop_restart_exactly_once(spark, tmp_path: Path) -> None:
    path = tmp_path / "broker-a"
    store = MessageStore.open(path, small_config(background=True))
    try:
        fill(store, 30)
        out, ckpt = tmp_path / "out", tmp_path / "ckpt"

        def writer() -> None:  # new messages and new segments while the first query runs
            for k in range(8):
                fill(store, 12, start=30 + 12 * k)
                time.sleep(0.25)

        def start(trigger: dict[str, object]):
            df = (spark.readStream.format("rocketmq").option("startingOffsets", "earliest")
                  .option("maxOffsetsPerTrigger", 25).load(str(path))
                  .select(F.col("properties")["seq"].cast("int").alias("seq"), "commitLogOffset", "topic"))
            return (df.writeStream.format("parquet").option("path", str(out))
                    .option("checkpointLocation", str(ckpt)).trigger(**trigger).start())

        t = threading.Thread(target=writer)
        t.start()
        q = start({"processingTime": "200 milliseconds"})
        q.processAllAvailable()
        q.stop()
        t.join()
        first = seqs_in(spark, out)
        assert first == list(range(len(first))) and len(first) >= 25
        fill(store, 40, start=126)  # more after the stop
        total = 166
        q2 = start({"availableNow": True})
        q2.awaitTermination()
        batches = [p for p in q2.recentProgress if p["numInputRows"] > 0]
        assert all(p["numInputRows"] <= 25 for p in batches) and len(batches) >= (total - len(first)) // 25
        assert seqs_in(spark, out) == list(range(total))  # no duplicates, no gaps
        assert len(list_segments(str(path))) > 3
        # the checkpointed offset is the CommitLog end
        last = json.loads((ckpt / "offsets" / str(q2.lastProgress["batchId"])).read_text().splitlines()[-1])
        segs = list_segments(str(path))
        assert last == {"broker-a": walk(segs, segs[0].base).end}
    finally:
        store.close()


def test_stream_starting_offsets_topics_and_byte_limit(spark, tmp_path: Path) -> None:
    path = make_store(tmp_path / "broker-b", 60)
    segs = list_segments(str(path))
    w = walk(segs, segs[0].base)
    mid = int(w.offsets[20])

    def run(name: str, **options: str) -> tuple[list, int]:
        reader = spark.readStream.format("rocketmq")
        for k, v in options.items():
            reader = reader.option(k, v)
        q = (reader.load(str(path)).writeStream.format("memory").queryName(name)
             .trigger(availableNow=True).start())
        q.awaitTermination()
        rows = spark.table(name).orderBy("commitLogOffset").collect()
        return rows, len([p for p in q.recentProgress if p["numInputRows"] > 0])

    rows, batches = run("rmq_from_mid", startingOffsets=json.dumps({"broker-b": mid}), topics="orders",
                        maxBytesPerTrigger="1500")
    assert [r.commitLogOffset for r in rows] == [o for o, i in zip(w.offsets.tolist(), range(60), strict=True)
                                                 if o >= mid and i % 3 == 0]
    assert batches >= 3  # about 40 records of ~200 bytes at most 1500 bytes per trigger
    rows, _ = run("rmq_latest", startingOffsets="latest")
    assert rows == []
    with pytest.raises(PySparkException, match="not a record boundary"):
        run("rmq_bad", startingOffsets=json.dumps({"broker-b": mid + 1}))
