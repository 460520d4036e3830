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
from mqstore.storage.fileio import fileio_for, is_remote, local_path, output_filesystem, split_fs_options

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
    path = absolute_path(local_path(os.fspath(out)))  # executors write the files: resolve it on the driver
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
    paths = list(absolute_paths([local_path(os.fspath(p)) for p in
                                 ([stores] if isinstance(stores, str | os.PathLike) else stores)]))
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
    if is_remote(path):
        return _write_remote(df, path, ("topic", "queueId"), mode, options)
    df.write.mode(mode).partitionBy("topic", "queueId").parquet(path)
    return _summary(spark, path, ROCKETMQ_SCHEMA, ("topic", "queueId"))


def kafka_frame(spark: SparkSession, path: str | os.PathLike[str], **options: Any) -> DataFrame:
    """The ``kafka-log`` source over a data directory or partition directory."""
    p = absolute_path(local_path(os.fspath(path)))
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
    if is_remote(target):
        return _write_remote(df, target, ("topic", "partition"), mode, options)
    df.write.mode(mode).partitionBy("topic", "partition").parquet(target)
    schema = KAFKA_SCHEMA_WITH_HEADERS if "headers" in df.columns else KAFKA_SCHEMA
    return _summary(spark, target, schema, ("topic", "partition"))


# ----------------------------------------------------------------------------- object storage output
def _write_remote(df: DataFrame, url: str, partition_cols: tuple[str, str], mode: str,
                  options: Mapping[str, Any]) -> ExportResult:
    """Write ``df`` as hive-partitioned Parquet under an object store URL: each Spark task writes
    its own files there through pyarrow (Spark's own writer would need the Hadoop S3A/GCS
    connector jars on the cluster), named ``part-<task uuid>-<n>.parquet``; the summary is read
    back through pyarrow on the driver."""
    fs_opts, _rest = split_fs_options(options)
    fs, root = output_filesystem(url, fs_opts)
    io = fileio_for(url, fs_opts)
    if io.list(url):
        if mode == "error":
            raise InvalidArgumentError(f"output {url} exists and is not empty (choose mode='overwrite' or 'append')")
        if mode == "ignore":
            return _remote_summary(fs, root, url, partition_cols)
        if mode == "overwrite":
            fs.delete_dir_contents(root, missing_dir_ok=True)

    def write(batches: Any) -> Any:
        import itertools
        import uuid

        import pyarrow as pa
        import pyarrow.dataset as ds

        it = iter(batches)
        first = next(it, None)
        if first is None:
            yield pa.RecordBatch.from_pylist([{"rows": 0}], schema=pa.schema([pa.field("rows", pa.int64())]))
            return
        n = [0]

        def counted() -> Any:
            for b in itertools.chain([first], it):
                n[0] += b.num_rows
                yield b

        reader = pa.RecordBatchReader.from_batches(first.schema, counted())
        ds.write_dataset(reader, root, format="parquet", filesystem=fs,
                         partitioning=list(partition_cols), partitioning_flavor="hive",
                         basename_template=f"part-{uuid.uuid4().hex}-{{i}}.parquet",
                         existing_data_behavior="overwrite_or_ignore")
        yield pa.RecordBatch.from_pylist([{"rows": n[0]}], schema=pa.schema([pa.field("rows", pa.int64())]))

    df.mapInArrow(write, "rows long").collect()
    return _remote_summary(fs, root, url, partition_cols)


def _remote_summary(fs: Any, root: str, url: str, partition_cols: tuple[str, str]) -> ExportResult:
    import pyarrow.dataset as ds

    data = ds.dataset(root, filesystem=fs, format="parquet", partitioning="hive")
    files = list(data.files)
    parts = {tuple(seg for seg in f[len(root):].strip("/").split("/")[:-1]) for f in files}
    return ExportResult(url, data.count_rows(), len(files), len(parts))
