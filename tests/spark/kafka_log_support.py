"""Builders and expectations of the kafka-log source tests (a uniquely named helper module).

Expected rows are computed from what the builder handed to the writer, never by decoding the
files, so they check the reader independently.
"""

from __future__ import annotations

import json
import os
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

from mqstore.formats.kafka import (
    Compression,
    SimpleRecord,
    TimestampType,
    encode_batch,
    encode_end_txn_marker_batch,
)
from mqstore.kafka import LogConfig, PartitionLog

SHARED = Path(__file__).resolve().parents[2] / "tests" / "fixtures" / "kafka"
CASES = ["single_default", "multi_segment_roll_bytes", "append_groups", "unclean_flush", "corrupt_tail_recover"]
EPOCH = datetime(1970, 1, 1, tzinfo=UTC)
T0 = 1_700_000_000_000

Row = dict[str, Any]


def ts(ms: int) -> datetime:
    return EPOCH + timedelta(milliseconds=ms)


def fixture_log_dir(tmp: Path) -> Path:
    """A Kafka log directory whose ``<case>-0`` entries are symlinks to the (read-only) fixtures."""
    if not SHARED.is_dir():
        pytest.fail(f"Kafka fixtures are missing: {SHARED}")
    d = tmp / "fixture-logs"
    if not d.exists():
        d.mkdir()
        for case in CASES:
            os.symlink(SHARED / case / "segments", d / f"{case}-0")
    return d


def manifest_rows(case: str) -> list[Row]:
    """The data records of a fixture case (control batches have no rows), as manifest fields."""
    m = json.loads((SHARED / case / "manifest.json").read_text())
    rows = []
    for seg in m["segments"]:
        for b in seg["batches"]:
            if b["control"]:
                continue
            tt = {"CreateTime": 0, "LogAppendTime": 1}[b["timestamp_type"]]
            for r in b["records"]:
                rows.append({"offset": r["offset"], "timestamp": r["timestamp"], "key": r["key"],
                             "value_size": r["value_size"], "header_keys": r["header_keys"], "timestampType": tt})
    return rows


CODECS = [Compression.NONE, Compression.GZIP, Compression.SNAPPY, Compression.LZ4, Compression.ZSTD]


def write_partition(d: Path, *, batches: int = 30, per_batch: int = 7, segment_bytes: int = 16 * 1024,
                    index_interval_bytes: int = 512, txn: bool = True, first_value: int = 0,
                    topic: str = "t", partition: int = 0) -> list[Row]:
    """A partition with every codec, headers, null keys/values, LogAppendTime batches and (``txn``)
    an aborted and a committed transaction with their control markers.  Returns the rows a
    read_uncommitted consumer sees, in offset order."""
    cfg = LogConfig(segment_bytes=segment_bytes, index_interval_bytes=index_interval_bytes)
    expected: list[Row] = []
    with PartitionLog.open(d, cfg) as log:
        n = first_value
        for b in range(batches):
            codec = CODECS[b % len(CODECS)]
            recs = []
            for i in range(per_batch):
                key = None if (n % 5 == 0) else f"k{n}".encode()
                value = None if (n % 11 == 3) else (f"value-{n}-".encode() * (1 + n % 4))
                headers = [(f"h{j}", None if j == 1 else f"v{n}.{j}".encode()) for j in range(n % 3)]
                recs.append(SimpleRecord(value=value, key=key, headers=headers, timestamp=T0 + n * 10 - (i % 3)))
                n += 1
            log_append = b % 7 == 6
            transactional = txn and b % 9 in (3, 4)
            kw: dict[str, Any] = {"compression": codec}
            if log_append:
                kw.update(timestamp_type=TimestampType.LOG_APPEND_TIME, max_timestamp=T0 + n * 10 + 5)
            if transactional:
                kw.update(is_transactional=True, producer_id=7 + b, producer_epoch=0)
            info = log.append(encode_batch(recs, base_offset=0, **kw))
            for k, r in enumerate(recs):
                expected.append({
                    "key": r.key, "value": r.value, "topic": topic, "partition": partition,
                    "offset": info.first_offset + k,
                    "timestamp": T0 + n * 10 + 5 if log_append else int(r.timestamp or 0),
                    "timestampType": 1 if log_append else 0,
                    "headers": [{"key": hk, "value": hv} for hk, hv in r.headers] or None,  # Spark: null
                })
            if transactional:
                marker = encode_end_txn_marker_batch(commit=b % 2 == 0, producer_id=7 + b, producer_epoch=0,
                                                     timestamp=T0 + n * 10)
                log.append(marker)  # a control batch: takes an offset, yields no row
    return expected


def collect(df: Any) -> list[Row]:
    """Rows of a kafka-log DataFrame as dicts sorted by (topic, partition, offset), with bytes
    values and ``timestamp`` in ms (taken with ``unix_micros`` so no time zone is involved)."""
    rows = df.selectExpr("*", "unix_micros(timestamp) AS __us").drop("timestamp").collect()
    out = []
    for r in rows:
        d = r.asDict(recursive=True)
        us = d.pop("__us")
        assert us % 1000 == 0
        d["timestamp"] = us // 1000
        for k in ("key", "value"):
            if d[k] is not None:
                d[k] = bytes(d[k])
        if d.get("headers") is not None:
            d["headers"] = [{"key": h["key"], "value": None if h["value"] is None else bytes(h["value"])}
                            for h in d["headers"]]
        out.append(d)
    return sorted(out, key=lambda x: (x["topic"], x["partition"], x["offset"]))


def as_manifest(r: Row) -> Row:
    key = r["key"]
    return {"offset": r["offset"], "timestamp": r["timestamp"],
            "key": None if key is None else key.decode("utf-8"),
            "value_size": -1 if r["value"] is None else len(r["value"]),
            "header_keys": [h["key"] for h in r["headers"] or ()], "timestampType": r["timestampType"]}


def arrow_rows(batches: Any) -> list[Row]:
    """Rows of Arrow batches with ``timestamp`` in ms (for comparisons without Spark)."""
    out = []
    for b in batches:
        for d in b.to_pylist():
            d["timestamp"] = int((d["timestamp"] - EPOCH) / timedelta(milliseconds=1))
            out.append(d)
    return out
