"""The topic queue table: the next queue offset of every (topic, queue), taken from the CommitLog.

A queue offset is the position of a message in its ConsumeQueue; the store assigns them when it
appends and must never assign one twice.  The ConsumeQueues are derived data that may lag behind
the CommitLog (a crash before the reput service dispatched the tail, an external dispatcher), so
the store's rule (spec §6.3, the broker's ``recoverTopicQueueTable``) is: the next queue offset of
a queue is one past the highest queue offset of its records in the CommitLog, which recovery
gets by dispatching the recovered tail before it reads the ConsumeQueues' ends, and
:func:`next_queue_offsets` gets from the records themselves.

:func:`queue_offset_duplicates` checks the rule over a whole CommitLog (crash tests, campaigns).
"""

from __future__ import annotations

import itertools
from collections.abc import Iterable
from dataclasses import dataclass

import numpy as np

from mqstore.kernels.arrays import unique
from mqstore.kernels.rocketmq.scan import DispatchBatch

QueueKey = tuple[str, int]


class _Columns:
    """(queue code, queue offset, CommitLog offset) of the ConsumeQueue records of many batches,
    with the queue codes numbered across batches (one Python step per distinct queue of a batch,
    numpy for the rows)."""

    def __init__(self) -> None:
        self.keys: list[QueueKey] = []
        self._code_of: dict[QueueKey, int] = {}
        self.codes: list[np.ndarray] = []
        self.queue_offsets: list[np.ndarray] = []
        self.offsets: list[np.ndarray] = []

    def add(self, batch: DispatchBatch) -> None:
        if len(batch) == 0:
            return
        rows = np.flatnonzero(batch.cq_mask())
        if len(rows) == 0:
            return
        local = (batch.topic_id[rows].astype(np.int64) << 32) | (batch.queue_id[rows].astype(np.int64) & 0xFFFFFFFF)
        uniq, inv = unique(local, return_inverse=True)
        glob = np.empty(len(uniq), np.int64)
        for j, c in enumerate(uniq.tolist()):
            key = (batch.topics[c >> 32], int(np.int32(np.uint32(c & 0xFFFFFFFF))))
            code = self._code_of.get(key)
            if code is None:
                code = self._code_of[key] = len(self.keys)
                self.keys.append(key)
            glob[j] = code
        self.codes.append(glob[inv.reshape(-1)])
        self.queue_offsets.append(batch.queue_offset[rows].astype(np.int64))
        self.offsets.append(batch.commit_log_offset[rows].astype(np.int64))

    def arrays(self) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        if not self.codes:
            e = np.empty(0, np.int64)
            return e, e, e
        return np.concatenate(self.codes), np.concatenate(self.queue_offsets), np.concatenate(self.offsets)


class NextQueueOffsets:
    """Feed dispatch batches with :meth:`add`; :meth:`table` gives one past the highest queue
    offset of each (topic, queue) among their ConsumeQueue records (transaction type NOT or
    COMMIT).  Keeps one running maximum per queue, not the rows."""

    def __init__(self) -> None:
        self._cols = _Columns()
        self._best = np.empty(0, np.int64)

    def add(self, batch: DispatchBatch) -> None:
        cols = self._cols
        cols.add(batch)
        if not cols.codes:
            return
        codes, qos, _ = cols.arrays()
        cols.codes.clear()
        cols.queue_offsets.clear()
        cols.offsets.clear()
        if len(self._best) < len(cols.keys):
            self._best = np.r_[self._best, np.full(len(cols.keys) - len(self._best), -1, np.int64)]
        np.maximum.at(self._best, codes, qos)

    def table(self) -> dict[QueueKey, int]:
        return {key: int(v) + 1 for key, v in zip(self._cols.keys, self._best.tolist(), strict=True)}


def next_queue_offsets(batches: Iterable[DispatchBatch]) -> dict[QueueKey, int]:
    """:class:`NextQueueOffsets` of ``batches``."""
    nxt = NextQueueOffsets()
    for batch in batches:
        nxt.add(batch)
    return nxt.table()


@dataclass(frozen=True, slots=True)
class QueueOffsetDuplicate:
    topic: str
    queue_id: int
    queue_offset: int
    commit_log_offsets: tuple[int, ...]  # every record carrying it, ascending


def queue_offset_duplicates(batches: Iterable[DispatchBatch]) -> list[QueueOffsetDuplicate]:
    """The (topic, queue, queue offset) triples carried by more than one ConsumeQueue record of
    ``batches`` (e.g. ``commit_log.scan(min_offset, max_offset)``: a whole CommitLog), sorted."""
    cols = _Columns()
    for batch in batches:
        cols.add(batch)
    codes, qos, offs = cols.arrays()
    if len(codes) < 2:
        return []
    order = np.lexsort((offs, qos, codes))
    c, q, o = codes[order], qos[order], offs[order]
    same = (c[1:] == c[:-1]) & (q[1:] == q[:-1])
    if not same.any():
        return []
    # runs of equal (code, queue offset): a run starts where ``same`` turns on
    in_run = np.zeros(len(c), bool)
    in_run[1:] |= same
    in_run[:-1] |= same
    idx = np.flatnonzero(in_run)
    starts = np.flatnonzero(np.r_[True, ~same[idx[:-1]]]) if len(idx) else idx
    out: list[QueueOffsetDuplicate] = []
    bounds = np.r_[starts, len(idx)].tolist()
    for a, b in itertools.pairwise(bounds):
        rows = idx[a:b]
        topic, qid = cols.keys[int(c[rows[0]])]
        out.append(QueueOffsetDuplicate(topic, qid, int(q[rows[0]]), tuple(o[rows].tolist())))
    out.sort(key=lambda d: (d.topic, d.queue_id, d.queue_offset))
    return out
