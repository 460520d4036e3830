"""The properties text of a record (``name\\x01value\\x02`` pairs) scanned in place by compiled code.

:func:`prop_spans` finds the values the dispatch needs (KEYS, TAGS, UNIQ_KEY, DELAY) in one pass
with the rules of ``string2messageProperties``; :func:`count_pieces` counts the space-separated
KEYS pieces.  Their Python twin is :func:`mqstore.formats.rocketmq.properties.parse_properties`
(the scan and reader twins go through it).

The kernels themselves are in :mod:`mqstore.kernels.rocketmq.properties_nb` (numba, imported on
first use) and ``kernels/csrc/mq_rmq.h`` (C); this module keeps the slot numbers.
"""

from __future__ import annotations

# slots of the ``prop_spans`` output (start at ``P_*``, end at ``P_* + 1``)
P_KEYS = 0
P_TAGS = 2
P_UNIQ = 4
P_DELAY = 6
P_MULTI = 8  # INNER_MULTI_DISPATCH (LMQ / multi-dispatch queues)
P_MQOFF = 10  # INNER_MULTI_QUEUE_OFFSET (their queue offsets)
PROP_SPANS = 12
