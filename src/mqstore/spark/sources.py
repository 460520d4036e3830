"""The list of mqstore's Spark data sources (filled in as the source modules land)."""

from __future__ import annotations


def data_source_classes() -> list[type]:
    classes: list[type] = []
    try:
        from mqstore.spark.rocketmq_source import RocketMQDataSource
    except ImportError:  # pragma: no cover - module not written yet
        pass
    else:
        classes.append(RocketMQDataSource)
    try:
        from mqstore.spark.kafka_source import KafkaLogDataSource
    except ImportError:  # pragma: no cover - module not written yet
        pass
    else:
        classes.append(KafkaLogDataSource)
    return classes
