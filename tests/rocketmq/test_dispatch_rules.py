"""The dispatch scan's stop rule, shared by the live reput, the local rebuild and the Spark
rebuild's chunk plan (storage/rocketmq/commitlog.scan_step)."""

from __future__ import annotations

import pytest

from mqstore.kernels.rocketmq.scan import STOP_BLANK, STOP_END, STOP_INVALID, STOP_LIMIT
from mqstore.spark._rebuild_rocketmq import ChunkSummary, SegmentDesc, included_chunks
from mqstore.storage.rocketmq.commitlog import SCAN_CONTINUE, SCAN_NEXT_SEGMENT, SCAN_STOP, scan_step


@pytest.mark.parametrize(("stop", "range_cut", "step"), [
    (STOP_BLANK, False, SCAN_NEXT_SEGMENT),
    (STOP_BLANK, True, SCAN_NEXT_SEGMENT),
    (STOP_LIMIT, False, SCAN_CONTINUE),
    (STOP_END, True, SCAN_CONTINUE),
    (STOP_END, False, SCAN_STOP),
    (STOP_INVALID, False, SCAN_STOP),
    (STOP_INVALID, True, SCAN_STOP),
])
def test_scan_step(stop: str, range_cut: bool, step: str) -> None:
    assert scan_step(stop, range_cut=range_cut) == step


def _chunk(index: int, segment: int, end: int, nxt: int, stop: str, last: bool) -> ChunkSummary:
    return ChunkSummary(index, segment, end, last, nxt, stop, None, 1, 0, None)


def test_spark_chunk_plan_follows_the_rule() -> None:
    segs = [SegmentDesc(0, "a", 0, 100), SegmentDesc(1, "b", 100, 100), SegmentDesc(2, "c", 200, 50)]
    chunks = [
        _chunk(0, 0, 50, 50, STOP_END, False),  # cut inside segment 0: continue
        _chunk(1, 0, 100, 90, STOP_BLANK, True),  # blank: next segment
        _chunk(2, 1, 150, 150, STOP_END, False),
        _chunk(3, 1, 200, 170, STOP_END, True),  # end of data inside segment 1: stop
        _chunk(4, 2, 250, 250, STOP_END, True),  # never dispatched
    ]
    assert [c.index for c in included_chunks(chunks, segs)] == [0, 1, 2, 3]
    torn = [*chunks[:2], _chunk(2, 1, 150, 120, STOP_INVALID, False), *chunks[3:]]
    assert [c.index for c in included_chunks(torn, segs)] == [0, 1, 2]
