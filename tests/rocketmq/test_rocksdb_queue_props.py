"""Property tests of the RocksDB ConsumeQueue reader against the file ConsumeQueue: for any queue
(any length, several files, store times with runs of equal milliseconds and jumps, a head cut by
retention) the time search, range reads and min/max agree.  The RocksDB side reads the documented
keys and values from an in-memory table, so hypothesis can try many queues quickly."""

from __future__ import annotations

import tempfile
from pathlib import Path

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from mqstore.formats.rocketmq import rocksdb_cq as fmt
from mqstore.storage.rocketmq.consumequeue import ConsumeQueue
from mqstore.storage.rocketmq.rocksdb_cq import QueueOffsets, RocksDBConsumeQueue

SIZE = 100
T = "topic-é"


class _Table:
    """The two column families as dicts, behind the reader's get / multi_get."""

    def __init__(self, entries: dict[bytes, bytes]) -> None:
        self.entries = entries

    def get(self, _family: object, key: bytes) -> bytes | None:
        return self.entries.get(key)

    def multi_get(self, _family: object, keys: list[bytes]) -> list[bytes | None]:
        return [self.entries.get(k) for k in keys]


class _Store:
    def __init__(self, entries: dict[bytes, bytes]) -> None:
        self.rdb = _Table(entries)
        self.units_cf = None
        self.directory = Path("mem")


@st.composite
def queues(draw):
    n = draw(st.integers(1, 60))
    steps = draw(st.lists(st.sampled_from([0, 0, 1, 2, 7, 100]), min_size=n, max_size=n))
    times = (1_700_000_000_000 + np.cumsum(steps)).tolist()
    cut = draw(st.integers(0, n))  # messages below this one were deleted by retention
    probes = draw(st.lists(st.integers(times[0] - 3, times[-1] + 3), min_size=1, max_size=12))
    return times, cut, probes


@settings(max_examples=150, deadline=None)
@given(queues(), st.booleans(), st.booleans())
def test_time_search_ranges_and_bounds_equal_the_file_queue(q, with_min_entry, compacted):
    times, cut, probes = q
    n = len(times)
    offsets = np.arange(n, dtype=np.int64) * SIZE
    # compacted: the broker's compaction filter already dropped the units below the CommitLog's minimum
    entries = {fmt.encode_cq_key(T, 0, i): fmt.encode_cq_value(i * SIZE, SIZE, 7, t) for i, t in enumerate(times)
               if not (compacted and i < cut)}
    mx = fmt.OffsetValue((n - 1) * SIZE, n - 1)
    mn = fmt.OffsetValue(0, 0) if with_min_entry else None
    rq = RocksDBConsumeQueue(_Store(entries), T, 0, QueueOffsets(max=mx, min=mn))
    with tempfile.TemporaryDirectory() as d:
        fq = ConsumeQueue(Path(d) / "q", T, 0, 8 * 20)
        fq.put_units(offsets, np.full(n, SIZE, np.int32), np.full(n, 7, np.int64), np.arange(n, dtype=np.int64))
        min_phy = cut * SIZE
        fq.delete_expired(min_phy)  # the file queue's retention: whole files below the CommitLog's minimum
        rq.correct_min_offset(min_phy)
        rq.recover()
        assert (rq.min_offset_in_queue, rq.max_offset_in_queue) == (fq.min_offset_in_queue, fq.max_offset_in_queue)
        if not (compacted and cut == n):  # (with every unit compacted away the last size is unknown)
            assert rq.max_physic_offset == fq.max_physic_offset
        for start in range(0, n + 1, 3):
            assert rq.get_units(start, 5).tolist() == fq.get_units(start, 5).tolist()

        def store_time(off: int, size: int) -> int:
            return times[off // SIZE] if off >= min_phy else -1

        lo = fq.min_offset_in_queue
        live = [t for i, t in enumerate(times) if i >= lo]
        for ts in probes:
            for boundary in ("lower", "upper"):
                want = fq.offset_in_queue_by_time(ts, boundary, store_time, min_phy)
                got = rq.offset_in_queue_by_time(ts, boundary, None, min_phy)
                if boundary == "upper" and live and live[0] > ts:
                    # nothing stored at or before ts: the file queue answers 0 when no file starts
                    # at or before it (else its minimum), the RocksDB reader the minimum
                    assert got == lo and want in (0, lo), (ts, got, want)
                    continue
                assert got == want, (ts, boundary)
        fq.close()
