"""Every state a SIGKILL can leave in the IndexFile being written, and what recovery makes of it.

The writers (numba kernels and the Python ``putKey``) write a key's item and slot, then the
header's end fields, then its count (the commit point); a batch of keys updates the header once,
after all its items and slots.  A kill therefore leaves the items and slots of the first ``k``
keys with the header of an earlier moment ``j <= k`` (whole, or with only its count behind), and
possibly the item of key ``k + 1`` without its slot.  Every key here is stored in the same
millisecond as the checkpoint's ``indexMsgTimestamp``, so the broker's rule (drop files newer than
the checkpoint) keeps every such file: only :meth:`IndexFile.torn` tells the inconsistent ones
apart.  After the load, the re-dispatch puts what the kept file lacks (or everything, when the file
was dropped); the result must be byte-identical to a clean build of all the keys, which implies
no self-link and no lost key."""

from __future__ import annotations

from pathlib import Path

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from mqstore.formats.rocketmq.indexfile import IndexFileBuffer, index_file_size
from mqstore.storage.rocketmq.index import IndexService

SLOTS, ITEMS = 8, 40
TS = 1_700_000_000_123  # every key's store time = the checkpoint's indexMsgTimestamp
NAME = "20231114221320123"


def _images(keys: list[tuple[int, int]]) -> list[bytes]:
    """``images[k]``: the file after the first ``k`` keys (a rolled file: header carried over)."""
    buf = bytearray(index_file_size(SLOTS, ITEMS))
    f = IndexFileBuffer(buf, SLOTS, ITEMS, load=False)
    f.carry_over(100, TS)
    f.write_header()
    out = [bytes(buf)]
    for h, phy in keys:
        assert f.put_hash(h, phy, TS)
        out.append(bytes(buf))
    return out


def _crash_states(images: list[bytes]) -> list[tuple[str, bytes]]:
    states = []
    n = len(images) - 1
    for k in range(n + 1):
        for j in range(k + 1):
            data = bytearray(images[k])
            data[:40] = images[j][:40]  # the whole header of moment j
            states.append((f"data {k} header {j}", bytes(data)))
            if j < k:
                data = bytearray(images[k])
                data[36:40] = images[j][36:40]  # only the count behind
                states.append((f"data {k} count {j}", bytes(data)))
        if k < n:  # key k+1's item written, its slot and the header not yet
            data = bytearray(images[k])
            item = 40 + SLOTS * 4 + (k + 1) * 20
            data[item : item + 20] = images[k + 1][item : item + 20]
            states.append((f"data {k} + item {k + 1}", bytes(data)))
    return states


def _recover_and_complete(directory: Path, state: bytes, keys: list[tuple[int, int]]) -> tuple[bytes, bool]:
    index_dir = directory / "index"
    index_dir.mkdir(parents=True)
    (index_dir / NAME).write_bytes(state)
    svc = IndexService(index_dir, SLOTS, ITEMS)
    try:
        rebuild_from = svc.load(False, TS)
        # the re-dispatch: IndexService.build's resume rule (one key per message here)
        todo = [
            (h, phy)
            for h, phy in keys
            if phy > svc.resume_offset or (phy == svc.resume_offset and svc.resume_skip == 0)
        ]
        if rebuild_from is not None:
            assert rebuild_from == 0 and not svc.files  # dropped: everything is put again
            todo = list(keys)
        if todo:
            hs, phys = zip(*todo, strict=True)
            svc.put_hashes(np.array(hs, np.int64), np.array(phys, np.int64), np.full(len(todo), TS, np.int64))
        svc.flush()
        assert len(svc.files) == 1
        return svc.files[0].path.read_bytes(), rebuild_from is not None
    finally:
        svc.close()


@settings(max_examples=25, deadline=None)
@given(st.lists(st.integers(-(2**31), 2**31 - 1), min_size=1, max_size=10))
def test_every_crash_state_recovers_to_the_clean_file(tmp_path_factory, hashes: list[int]) -> None:
    # few slots: chains and collisions; one key per message, offsets increasing
    keys = [(h, 1000 + 64 * i) for i, h in enumerate(hashes)]
    images = _images(keys)
    clean = images[-1]
    dropped = kept = 0
    for i, (what, state) in enumerate(_crash_states(images)):
        d = tmp_path_factory.mktemp("s") / str(i)
        got, was_dropped = _recover_and_complete(d, state, keys)
        assert got == clean, what
        dropped += was_dropped
        kept += not was_dropped
    assert kept >= len(keys) + 1  # the consistent states (header of the data's own moment) are kept
    if len(keys) > 1:
        assert dropped > 0  # and the torn ones were rebuilt


def test_torn_states_are_exactly_the_inconsistent_ones(tmp_path: Path) -> None:
    """A consistent file is never dropped (no needless rebuild after a crash); with colliding
    keys every header that lags the data is."""
    keys = [(7, 1000), (15, 1064), (7, 1128), (3, 1192)]  # 7 and 15 share slot 7
    images = _images(keys)
    for i, (what, state) in enumerate(_crash_states(images)):
        _, was_dropped = _recover_and_complete(tmp_path / str(i), state, keys)
        parts = what.split()
        consistent = parts[1] == parts[3] if parts[2] == "header" else parts[2] == "+"
        assert was_dropped != consistent, what
