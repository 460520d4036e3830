"""mqstore on Apache Spark: Python data sources over both layouts and the index/query/export jobs.

``register(spark)`` makes ``spark.read.format("rocketmq")`` and ``format("kafka-log")`` (batch and
streaming) available in a session; ``get_session`` creates a session with them registered.
"""

from __future__ import annotations

from mqstore.spark.session import DEFAULT_MASTER, get_session, parse_conf, prepare_environment, register

__all__ = ["DEFAULT_MASTER", "get_session", "parse_conf", "prepare_environment", "register"]
