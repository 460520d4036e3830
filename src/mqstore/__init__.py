"""mqstore: a message-log storage engine byte-compatible with RocketMQ and Kafka.

Layers (each imports only the ones below it):

* :mod:`mqstore.formats`  – pure codecs, bytes in and bytes out, no I/O;
* :mod:`mqstore.kernels`  – vectorised / compiled hot loops with pure-Python twins;
* :mod:`mqstore.storage`  – mapped files, segment queues, the RocketMQ and Kafka store parts;
* :mod:`mqstore.api`      – :class:`MessageStore` (RocketMQ layout, ``api.rocketmq``) and the Kafka
  partition log (``api.kafka``, also ``mqstore.kafka``);
* :mod:`mqstore.spark`    – PySpark data sources and jobs;
* :mod:`mqstore.cli`      – the ``mqstore`` command.
"""

from __future__ import annotations

__version__ = "0.1.0"

__all__ = ["Message", "MessageStore", "StoreConfig", "__version__"]


def __getattr__(name: str):  # lazy: importing mqstore must stay cheap for Spark executors
    if name in ("Message", "MessageStore", "StoreConfig"):
        from mqstore.api import rocketmq as _api

        return getattr(_api, name)
    raise AttributeError(name)
