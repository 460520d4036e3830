"""mqstore on Apache Spark: Python data sources over both layouts and the index/query/export jobs.

``register(spark)`` makes ``spark.read.format("rocketmq")`` and ``format("kafka-log")`` (batch and
streaming) available in a session; ``get_session`` creates a session with them registered.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from mqstore.spark.session import DEFAULT_MASTER, get_session, parse_conf, prepare_environment

if TYPE_CHECKING:  # pragma: no cover
    from pyspark.sql import SparkSession

__all__ = ["DEFAULT_MASTER", "get_session", "parse_conf", "prepare_environment", "register"]


def register(spark: SparkSession) -> None:
    """Register mqstore's data sources (``rocketmq``, ``kafka-log``) in ``spark``.

    Also turns on Python data source filter pushdown (``spark.sql.python.filterPushdown.enabled``,
    off by default in Spark 4): the ``rocketmq`` reader implements ``pushFilters``, and Spark
    refuses such readers while the setting is off.
    """
    from mqstore.spark.sources import data_source_classes

    spark.conf.set("spark.sql.python.filterPushdown.enabled", "true")

    for cls in data_source_classes():
        spark.dataSource.register(cls)
