"""Reading a CommitLog another process writes (storage/rocketmq/tail.py)."""

from __future__ import annotations

from itertools import pairwise
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from mqstore.api.rocketmq import MessageStore, StoreConfig
from mqstore.errors import CorruptDataError, DataLossError
from mqstore.kernels.rocketmq.framing import record_positions
from mqstore.storage.rocketmq.tail import complete_end, scan_tail_range
from mqstore.storage.rocketmq.walk import cut_at_records

SEG = 64 * 1024
CFG = StoreConfig(commit_log_file_size=SEG, consume_queue_file_size=400, hash_slot_num=64, index_num=300,
                  dispatch_enabled=False)


def _store(root: Path, n: int = 30) -> None:
    with MessageStore.open(root, CFG) as store:
        store.put_batch([dict(topic="t", queue_id=i % 2, body=b"x" * (i + 1), keys=[f"k{i}"]) for i in range(n)])


def test_tail_range_reads_what_complete_end_allows(tmp_path: Path) -> None:
    _store(tmp_path)
    end = complete_end(tmp_path, SEG, 0)
    batch = scan_tail_range(tmp_path, SEG, 0, 0, end)
    assert len(batch) == 30 and batch.next_offset == end
    half = complete_end(tmp_path, SEG, 0, max_bytes=end // 2)
    assert 0 < half < end
    assert len(scan_tail_range(tmp_path, SEG, 0, 0, half)) + len(scan_tail_range(tmp_path, SEG, 0, half, end)) == 30


def test_torn_tail_is_not_read_and_bad_ranges_fail_typed(tmp_path: Path) -> None:
    _store(tmp_path)
    seg = tmp_path / "commitlog" / f"{0:020d}"
    data = bytearray(seg.read_bytes())
    positions, sizes, _, _ = record_positions(bytes(data), 0, SEG)
    last = int(positions[-1])
    data[last + int(sizes[-1]) - 4 : last + int(sizes[-1])] = bytes(4)  # the writer is still copying it
    seg.write_bytes(bytes(data))
    assert complete_end(tmp_path, SEG, 0) == last
    data[int(positions[1]) + 4 : int(positions[1]) + 8] = b"\xde\xad\xbe\xef"  # a broken magic code
    seg.write_bytes(bytes(data))
    with pytest.raises(CorruptDataError):
        scan_tail_range(tmp_path, SEG, 0, 0, last)
    seg.unlink()
    with pytest.raises(DataLossError):
        scan_tail_range(tmp_path, SEG, 0, 0, last)
    assert complete_end(tmp_path, SEG, 0) == 0


@given(st.lists(st.integers(1, 50), min_size=0, max_size=40), st.lists(st.integers(0, 2000), max_size=10))
def test_cut_at_records_cuts_only_at_record_starts(sizes: list[int], targets: list[int]) -> None:
    positions = np.cumsum([0, *sizes[:-1]]).astype(np.int64) if sizes else np.empty(0, np.int64)
    end = int(sum(sizes))
    pieces = cut_at_records(positions, 0, end, np.array(sorted(targets), np.int64))
    if end == 0:
        assert pieces == []
        return
    assert pieces[0][0] == 0 and pieces[-1][1] == end
    assert all(a < b for a, b in pieces) and all(b == c for (_, b), (c, _) in pairwise(pieces))
    assert {a for a, _ in pieces} <= set(positions.tolist())
