"""``mqstore.kafka``: the Kafka API, :mod:`mqstore.api.kafka` (beside :mod:`mqstore.api.rocketmq`),
under its short public name.

>>> from mqstore.kafka import PartitionLog, LogSegment, LogConfig
"""

from __future__ import annotations

from mqstore.api.kafka import *  # noqa: F403
from mqstore.api.kafka import __all__  # noqa: F401
