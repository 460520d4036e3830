"""``storage/rocketmq/queue_table``: next queue offsets and duplicate queue offsets from dispatch
batches, against a plain reference over the same rows."""

from __future__ import annotations

from collections import Counter, defaultdict

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from mqstore.formats.rocketmq.record import TRANSACTION_PREPARED_TYPE, TRANSACTION_ROLLBACK_TYPE
from mqstore.kernels.rocketmq.scan import STOP_END, DispatchBatch
from mqstore.storage.rocketmq.queue_table import next_queue_offsets, queue_offset_duplicates

TOPICS = ["A", "B", "%RETRY%g", "C"]
Row = tuple[int, int, int, int]  # topic index, queue id, queue offset, sys flag


def batch_of(rows: list[Row], first_offset: int, topics: list[str]) -> DispatchBatch:
    n = len(rows)
    i32, i64 = np.int32, np.int64
    return DispatchBatch(
        commit_log_offset=np.arange(first_offset, first_offset + 100 * n, 100, dtype=i64),
        size=np.full(n, 100, i32),
        queue_id=np.array([r[1] for r in rows], i32),
        queue_offset=np.array([r[2] for r in rows], i64),
        sys_flag=np.array([r[3] for r in rows], i32),
        store_timestamp=np.zeros(n, i64), tags_code=np.zeros(n, i64),
        topic_id=np.array([r[0] for r in rows], i32), topics=topics,
        key_row=np.empty(0, i64), key_hash=np.empty(0, i32), next_offset=first_offset + 100 * n, stop=STOP_END)


rows_st = st.lists(st.tuples(st.integers(0, 3), st.sampled_from([0, 1, 7, 2**31 - 1, -1]), st.integers(0, 6),
                             st.sampled_from([0, 0, 0, 0x8, TRANSACTION_PREPARED_TYPE, TRANSACTION_ROLLBACK_TYPE])),
                   max_size=60)


@settings(max_examples=200, deadline=None)
@given(st.lists(rows_st, max_size=4), st.permutations(TOPICS))
def test_against_a_plain_reference(batches: list[list[Row]], order: list[str]) -> None:
    # each batch numbers its topics its own way (as the scan kernel does per segment)
    made, all_rows, off = [], [], 0
    for k, rows in enumerate(batches):
        topics = order if k % 2 else TOPICS
        made.append(batch_of(rows, off, topics))
        all_rows += [(topics[t], q, qo, f, off + 100 * j) for j, (t, q, qo, f) in enumerate(rows)]
        off += 100 * len(rows) + 1000
    cq_rows = [r for r in all_rows if r[3] not in (TRANSACTION_PREPARED_TYPE, TRANSACTION_ROLLBACK_TYPE)]
    best: dict[tuple[str, int], int] = defaultdict(lambda: -1)
    for t, q, qo, _, _ in cq_rows:
        best[(t, q)] = max(best[(t, q)], qo)
    assert next_queue_offsets(made) == {k: v + 1 for k, v in best.items()}
    count = Counter((t, q, qo) for t, q, qo, _, _ in cq_rows)
    want = [(t, q, qo, tuple(sorted(o for tt, qq, oo, _, o in cq_rows if (tt, qq, oo) == (t, q, qo))))
            for (t, q, qo), c in sorted(count.items()) if c > 1]
    got = [(d.topic, d.queue_id, d.queue_offset, d.commit_log_offsets) for d in queue_offset_duplicates(made)]
    assert got == want


def test_empty_input() -> None:
    assert next_queue_offsets([]) == {}
    assert queue_offset_duplicates([batch_of([], 0, TOPICS)]) == []
