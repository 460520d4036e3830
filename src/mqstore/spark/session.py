"""Creating a SparkSession the way mqstore's jobs need it.

The environment must be prepared before the JVM starts: Spark's Python workers must run the same
interpreter (so they can import ``mqstore``), and the JVM should log quietly.  On a real cluster
use ``spark-submit`` (``get_session`` then just returns the active session and applies ``conf``);
see :mod:`mqstore.spark.cluster` for what a cluster needs (worker Python, paths, preflight).
"""

from __future__ import annotations

import os
import sys
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

from mqstore.errors import InvalidArgumentError

if TYPE_CHECKING:  # pragma: no cover
    from pyspark.sql import SparkSession

DEFAULT_MASTER = "local[*]"
LOG4J = Path(__file__).with_name("log4j2.properties")


def prepare_environment(master: str | None = DEFAULT_MASTER, conf: Mapping[str, Any] | None = None) -> None:
    """Environment settings that must exist before the JVM starts (idempotent).

    ``PYSPARK_PYTHON`` (the only setting PySpark reads for its workers' interpreter) becomes
    ``spark.pyspark.python`` from ``conf`` when given, else stays as set, else this interpreter
    when the workers run on this machine (:func:`mqstore.spark.cluster.worker_python`); on a
    remote cluster with neither, :func:`register` refuses with a clear message."""
    from mqstore.spark.cluster import is_loopback_master, source_dir

    configured = str((conf or {}).get("spark.pyspark.python") or "").strip()
    if configured:
        os.environ["PYSPARK_PYTHON"] = configured
    elif is_loopback_master(master):
        os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    os.environ.setdefault("PYSPARK_DRIVER_PYTHON", sys.executable)
    if is_loopback_master(master):  # on a real cluster the executors must reach the driver's address
        os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
    src = source_dir()
    paths = [p for p in os.environ.get("PYTHONPATH", "").split(os.pathsep) if p]
    if src is not None and src not in paths:
        # Workers inherit the environment, not sys.path: make `mqstore` importable even when it
        # was not pip-installed into the interpreter the workers run.
        os.environ["PYTHONPATH"] = os.pathsep.join([src, *paths])


def parse_conf(pairs: list[str] | tuple[str, ...]) -> dict[str, str]:
    """Parse ``k=v`` strings (the CLI's ``--conf``) into a dict, with a typed error on bad input."""
    conf: dict[str, str] = {}
    for pair in pairs:
        key, sep, value = pair.partition("=")
        if not sep or not key.strip():
            raise InvalidArgumentError(f"--conf expects key=value, got {pair!r}")
        conf[key.strip()] = value
    return conf


def get_session(master: str | None = DEFAULT_MASTER, conf: Mapping[str, Any] | None = None,
                app_name: str = "mqstore") -> SparkSession:
    """Return a SparkSession with mqstore's data sources registered.

    ``master=None`` keeps whatever ``spark-submit`` configured.  Quiet logging, UI off and small
    shuffle partition counts are defaults only: anything in ``conf`` overrides them.
    """
    prepare_environment(master, conf)
    from pyspark.sql import SparkSession

    builder = SparkSession.builder.appName(app_name)
    if master:
        builder = builder.master(master)
    defaults = {
        "spark.ui.enabled": "false",
        "spark.ui.showConsoleProgress": "false",
        "spark.sql.shuffle.partitions": str(max(2, os.cpu_count() or 2)),
        "spark.driver.extraJavaOptions": f"-Dlog4j2.configurationFile=file:{LOG4J}",
    }
    for key, value in {**defaults, **dict(conf or {})}.items():
        builder = builder.config(key, str(value))
    spark = builder.getOrCreate()
    spark.sparkContext.setLogLevel("ERROR")
    register(spark)
    return spark


def register(spark: SparkSession) -> None:
    """Register mqstore's data sources (``rocketmq``, ``kafka-log``) in ``spark``.

    Sets the executors' Python (``spark.pyspark.python`` from the session's configuration, which
    PySpark itself ignores, else ``PYSPARK_PYTHON``, else this interpreter on a local or
    127.0.0.1 master; a :class:`~mqstore.errors.WorkerPythonError` on a remote cluster with
    neither) and puts mqstore's source directory on their ``PYTHONPATH`` when mqstore is not
    installed (:func:`mqstore.spark.cluster.configure_workers`).

    Also turns on Python data source filter pushdown (``spark.sql.python.filterPushdown.enabled``,
    off by default in Spark 4): the ``rocketmq`` reader implements ``pushFilters``, and Spark
    refuses such readers while the setting is off.
    """
    from mqstore.spark.cluster import configure_workers
    from mqstore.spark.kafka_source import KafkaLogDataSource
    from mqstore.spark.rocketmq_source import RocketMQDataSource

    configure_workers(spark)
    spark.conf.set("spark.sql.python.filterPushdown.enabled", "true")
    spark.dataSource.register(RocketMQDataSource)
    spark.dataSource.register(KafkaLogDataSource)
