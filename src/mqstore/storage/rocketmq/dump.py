"""Filters of ``mqstore rocketmq dump`` over scanned batches: the rows that may match are chosen
from the batch columns at once (store time, topic, tags hash code, index key hashes), and only
those records are decoded and checked exactly (:func:`matches`): a hash only narrows the search."""

from __future__ import annotations

from collections.abc import Iterable

import numpy as np

from mqstore.formats.rocketmq.javahash import index_key_hash, tags_hash
from mqstore.formats.rocketmq.properties import PROPERTY_UNIQ_KEY
from mqstore.formats.rocketmq.record import MessageRecord
from mqstore.kernels.rocketmq.scan import DispatchBatch
from mqstore.storage.rocketmq.lmq import names_queue

SCHEDULE_TOPIC = "SCHEDULE_TOPIC_XXXX"  # its tags code is the delivery time, not a tags hash


def candidate_rows(batch: DispatchBatch, topic: str | None, lo: int | None, hi: int | None, key: str | None,
                   tags: list[str] | None) -> np.ndarray:
    """Boolean mask of the batch rows that may match the filters (a superset of the matches)."""
    n = len(batch)
    mask = np.ones(n, bool)
    if n == 0:
        return mask
    if lo is not None:
        mask &= batch.store_timestamp >= lo
    if hi is not None:
        mask &= batch.store_timestamp <= hi
    if topic is not None:
        tid = batch.topics.index(topic) if topic in batch.topics else -1
        in_topic = batch.topic_id == tid
        if len(batch.multi_row):  # the records dispatched to ``topic`` as an LMQ / multi-dispatch queue
            in_topic[[r for r, (q, o) in zip(batch.multi_row.tolist(), batch.multi_value, strict=True)
                      if names_queue(q, o, topic)]] = True
        mask &= in_topic
    if tags is not None:
        mask &= tag_candidates(batch, tags)
    if key is not None:
        # the IndexFile hashes topic#key
        wanted = np.array([index_key_hash(f"{t}#{key}") for t in batch.topics], np.int32)
        rows = batch.key_row[np.isin(batch.key_hash, wanted)]
        has = np.zeros(n, bool)
        has[rows] = True
        mask &= has
    return mask


def tag_candidates(batch: DispatchBatch, tags: Iterable[str]) -> np.ndarray:
    """Rows whose ConsumeQueue tags code is the hash of one of ``tags`` (a consumer's first, hash
    stage; the tag itself is compared afterwards).  Rows of the delay topic, whose code is a
    delivery time, are all candidates."""
    ok = np.isin(batch.tags_code, np.array(sorted({tags_hash(t) for t in tags}), np.int64))
    if SCHEDULE_TOPIC in batch.topics:
        ok |= batch.topic_id == batch.topics.index(SCHEDULE_TOPIC)
    return ok


def matches(rec: MessageRecord, key: str | None, tags: list[str] | None) -> bool:
    """The exact check of a candidate: ``key`` is one of its KEYS or its unique key; its TAGS is one of ``tags``."""
    if tags is not None and rec.tags not in tags:
        return False
    if key is not None and key not in rec.keys and rec.properties.get(PROPERTY_UNIQ_KEY) != key:
        return False
    return True
