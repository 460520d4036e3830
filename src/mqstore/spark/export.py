"""Export a RocketMQ store (or several) or Kafka partition directories to Parquet.

The rows are exactly those of the ``rocketmq`` / ``kafka-log`` data sources (same columns, same
options), written as Parquet partitioned by ``topic/queueId`` (Kafka: ``topic/partition``).  Read
the export back with the source's schema so that partition values keep their types::

    spark.read.schema(ROCKETMQ_SCHEMA).parquet(out)
"""

from __future__ import annotations

import json
import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from mqstore.errors import InvalidArgumentError, StoreNotFoundError
from mqstore.spark.cluster import absolute_path, absolute_paths, preflight

if TYPE_CHECKING:  # pragma: no cover
    from pyspark.sql import DataFrame, SparkSession

MODES = ("error", "overwrite", "append", "ignore")


@dataclass(slots=True)
class ExportResult:
    out: str
    rows: int
    files: int
    partitions: int


def _options(options: Mapping[str, Any]) -> dict[str, str]:
    out = {}
    for k, v in options.items():
        if v is None:
            continue
        out[k] = json.dumps(v) if isinstance(v, dict | list | tuple) else (str(v).lower() if isinstance(v, bool) else str(v))
    return out


def _check_out(out: str | os.PathLike[str], mode: str) -> str:
    if mode not in MODES:
        raise InvalidArgumentError(f"mode must be one of {', '.join(MODES)}, not {mode!r}")
    path = absolute_path(out)  # executors write the files: resolve it on the driver
    if "://" not in path and mode == "error" and Path(path).exists() and any(Path(path).iterdir()):
        raise InvalidArgumentError(f"output directory {path} exists and is not empty (choose mode='overwrite' or 'append')")
    return path


def _summary(spark: SparkSession, path: str, schema: Any, partition_cols: tuple[str, str]) -> ExportResult:
    df = spark.read.schema(schema).parquet(path)
    rows = df.count()
    parts = df.select(*partition_cols).distinct().count()
    files = len(df.inputFiles())
    return ExportResult(path, rows, files, parts)


def rocketmq_frame(spark: SparkSession, stores: str | os.PathLike[str] | Sequence[str | os.PathLike[str]],
                   **options: Any) -> DataFrame:
    """The ``rocketmq`` source over one store or several (one per broker)."""
    paths = list(absolute_paths([stores] if isinstance(stores, str | os.PathLike) else stores))
    if not paths:
        raise InvalidArgumentError("no store given")
    for p in paths:
        if "://" not in os.fspath(p) and not (Path(p) / "commitlog").is_dir():
            raise StoreNotFoundError(f"{p} is not a RocketMQ store (no commitlog/ directory)")
    reader = spark.read.format("rocketmq").options(**_options(options))
    if len(paths) == 1:
        return reader.load(os.fspath(paths[0]))
    return reader.option("paths", json.dumps([os.fspath(p) for p in paths])).load()


def export_rocketmq(spark: SparkSession, stores: str | os.PathLike[str] | Sequence[str | os.PathLike[str]],
                    out: str | os.PathLike[str], *, mode: str = "error", **options: Any) -> ExportResult:
    """Write the messages of ``stores`` as Parquet under ``out``, partitioned by topic/queueId.
    ``options`` are the ``rocketmq`` source's (``topics``, ``startingOffsets``, ``includeBody``...)."""
    from mqstore.spark.rocketmq_source import ROCKETMQ_SCHEMA

    path = _check_out(out, mode)
    df = rocketmq_frame(spark, stores, **options)
    preflight(spark, read={"store": absolute_paths([stores] if isinstance(stores, str | os.PathLike) else stores)},
              write={"output directory": [path]})
    df.write.mode(mode).partitionBy("topic", "queueId").parquet(path)
    return _summary(spark, path, ROCKETMQ_SCHEMA, ("topic", "queueId"))


def kafka_frame(spark: SparkSession, path: str | os.PathLike[str], **options: Any) -> DataFrame:
    """The ``kafka-log`` source over a data directory or partition directory."""
    p = absolute_path(path)
    if "://" not in p and not Path(p).is_dir():
        raise StoreNotFoundError(f"Kafka log directory {p} does not exist")
    return spark.read.format("kafka-log").options(**_options(options)).load(p)


def export_kafka(spark: SparkSession, path: str | os.PathLike[str], out: str | os.PathLike[str], *,
                 mode: str = "error", **options: Any) -> ExportResult:
    """Write the records of a Kafka data/partition directory as Parquet under ``out``,
    partitioned by topic/partition.  ``options`` are the ``kafka-log`` source's."""
    from mqstore.spark.kafka_source import KAFKA_SCHEMA, KAFKA_SCHEMA_WITH_HEADERS

    target = _check_out(out, mode)
    df = kafka_frame(spark, path, **options)
    preflight(spark, read={"Kafka log path": [absolute_path(path)]}, write={"output directory": [target]})
    df.write.mode(mode).partitionBy("topic", "partition").parquet(target)
    schema = KAFKA_SCHEMA_WITH_HEADERS if "headers" in df.columns else KAFKA_SCHEMA
    return _summary(spark, target, schema, ("topic", "partition"))
