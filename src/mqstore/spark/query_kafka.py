"""``query_kafka_keys``: many record keys looked up across Kafka log directories at once, on Spark.

The semantics are exactly :meth:`mqstore.storage.kafka.log.PartitionLog.find_keys` per
partition: each segment's key index (``<base>.keyindex``) gives candidate locations for all keys
of a task in one compiled chain walk, and every candidate is checked on its record (key or header
value equal, timestamp inside the window); a segment without a key index is scanned.

Distribution: one task per (segment, key chunk): the driver lists the segments and ships the keys
in chunks; executors open the files themselves, read-only.
"""

from __future__ import annotations

import os
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from mqstore.errors import InvalidArgumentError, StoreNotFoundError

if TYPE_CHECKING:  # pragma: no cover
    from pyspark.sql import DataFrame, SparkSession

RESULT_SCHEMA = ("key STRING, topic STRING, partition INT, offset BIGINT, timestamp BIGINT, segment BIGINT, "
                 "position BIGINT, indexed BOOLEAN")
#: keys per task
KEY_CHUNK = 50_000


def kafka_partitions(paths: Sequence[str | os.PathLike[str]]) -> list[Path]:
    """The partition directories of ``paths`` (each a partition directory or a log directory of
    them); a typed error when a path is missing or holds no segment."""
    from mqstore.storage.kafka.layout import has_segments, partition_dirs

    out: list[Path] = []
    for raw in paths:
        p = Path(raw)
        if not p.is_dir():
            raise StoreNotFoundError("not a Kafka log or partition directory", path=str(p))
        if has_segments(p):
            out.append(p.resolve())
            continue
        parts = partition_dirs(p)
        if not parts:
            raise StoreNotFoundError("no partition with .log segments here", path=str(p))
        out += [q.resolve() for q in parts]
    return out


def _task(args: tuple[str, str, int, int, str | None], keys: list[str]) -> Iterator[tuple[Any, ...]]:
    log_path, _part, begin, end, header = args
    from mqstore.storage.kafka.key_query import query_segments
    from mqstore.storage.kafka.layout import topic_partition_of
    from mqstore.storage.kafka.segment import LogSegment

    topic, partition = topic_partition_of(Path(log_path).parent)
    with LogSegment.open(log_path) as seg:
        found, stats = query_segments([seg], keys, begin, end, header=header)
    indexed = not stats.scanned_segments
    for k, ms in zip(keys, found, strict=True):
        for m in ms:
            yield (k, topic, partition, m.offset, m.timestamp, m.segment, m.position, indexed)


def query_kafka_keys(spark: SparkSession, paths: str | os.PathLike[str] | Sequence[str | os.PathLike[str]],
                     keys: Sequence[str], *, begin: int | None = None, end: int | None = None,
                     header: str | None = None, sort: bool = True) -> DataFrame:
    """The records of the Kafka partitions under ``paths`` whose key (or, with ``header``, a value
    of that header) is one of ``keys`` (UTF-8) and whose timestamp lies in ``[begin, end]`` (ms,
    inclusive): ``key, topic, partition, offset, timestamp, segment, position, indexed``
    (``indexed``: the segment had a key index).  ``sort``: by key, topic, partition, offset."""
    from mqstore.formats.kafka.keyindex import check_header_name
    from mqstore.storage.kafka.layout import log_files

    check_header_name(header)
    b = -(1 << 63) if begin is None else int(begin)
    e = (1 << 63) - 1 if end is None else int(end)
    if e < b:
        raise InvalidArgumentError(f"invalid time window [{begin}, {end}]")
    ks = list(dict.fromkeys(keys))
    if any(not isinstance(k, str) for k in ks):
        raise InvalidArgumentError("keys must be strings")
    if not ks:
        raise InvalidArgumentError("no keys given")
    ps = [paths] if isinstance(paths, str | os.PathLike) else list(paths)
    if not ps:
        raise InvalidArgumentError("no log directories given")
    parts = kafka_partitions(ps)
    from mqstore.spark.cluster import preflight

    preflight(spark, read={"Kafka partition directory": parts})
    segs = [(str(f), p.name) for p in parts for f in log_files(p)]
    chunks = [ks[i : i + KEY_CHUNK] for i in range(0, len(ks), KEY_CHUNK)]
    sc = spark.sparkContext
    bkeys = sc.broadcast(chunks)
    tasks = [(c, (log, part, b, e, header)) for log, part in segs for c in range(len(chunks))]
    if not tasks:
        return spark.createDataFrame([], RESULT_SCHEMA)
    rows = sc.parallelize(tasks, len(tasks)).flatMap(lambda t: _task(t[1], bkeys.value[t[0]]))
    df = spark.createDataFrame(rows, RESULT_SCHEMA)
    if sort:
        df = df.orderBy("key", "topic", "partition", "offset")
    return df


def read_kafka_keys_file(path: str | os.PathLike[str]) -> list[str]:
    """Keys of a local text file, one per line (a Kafka key may hold blanks: only the line end is
    stripped); a typed error when the file is missing or holds no key."""
    p = Path(path)
    if not p.is_file():
        raise InvalidArgumentError(f"keys file {p} does not exist")
    keys = [line.rstrip("\r") for line in p.read_text(encoding="utf-8").split("\n")]
    keys = [k for k in keys if k]
    if not keys:
        raise InvalidArgumentError(f"keys file {p} holds no key")
    return list(dict.fromkeys(keys))
