"""One session-scoped local SparkSession for every Spark test (UI off, few shuffle partitions)."""

from __future__ import annotations

import pytest

from mqstore.spark.session import LOG4J, prepare_environment


@pytest.fixture(scope="session")
def spark(tmp_path_factory: pytest.TempPathFactory):
    prepare_environment()
    from pyspark.sql import SparkSession

    from mqstore.spark import register

    session = (
        SparkSession.builder.master("local[2]").appName("mqstore-tests")
        .config("spark.ui.enabled", "false")
        .config("spark.ui.showConsoleProgress", "false")
        .config("spark.sql.shuffle.partitions", "2")
        .config("spark.default.parallelism", "2")
        .config("spark.driver.memory", "1g")
        .config("spark.sql.streaming.stopTimeout", "10s")
        .config("spark.sql.warehouse.dir", str(tmp_path_factory.mktemp("warehouse")))
        .config("spark.driver.extraJavaOptions",
                f"-XX:+UseSerialGC -XX:TieredStopAtLevel=1 -Dlog4j2.configurationFile=file:{LOG4J}")
        .getOrCreate()
    )
    session.sparkContext.setLogLevel("ERROR")
    register(session)
    yield session
    session.stop()


@pytest.fixture(scope="module")
def s3():
    from s3_server import s3_server

    with s3_server() as server:
        yield server
