"""The offline rebuild's pipeline (issue 15, round two): the IndexFile keys of a batch are put in an
index thread while the next batch's ConsumeQueue units are written, and the IndexFiles are built
in memory and written with ``pwrite`` (``IndexFile(in_memory=True)``).  The files must be the
bytes of the live store's dispatch (mapped files, one batch after the other), on every kernel
implementation, and the in-memory files must behave as mapped ones for flush, roll and release."""

from __future__ import annotations

import mmap
from pathlib import Path

import numpy as np
import pytest

from mqstore import StoreConfig
from mqstore.errors import CorruptIndexError
from mqstore.formats.rocketmq.indexfile import index_file_size
from mqstore.kernels.rocketmq import index_build
from mqstore.storage.rocketmq import rebuild as rebuild_module
from mqstore.storage.rocketmq.index import IndexFile, IndexService, _bulk_put
from mqstore.storage.rocketmq.rebuild import compare_trees, keep_freed_memory, rebuild_indexes

from .test_kernels_threads import _many_key_store

GEOMETRY = {"hash_slot_num": 4099, "index_num": 90_001}


@pytest.fixture(scope="module")
def many_keys(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return _many_key_store(tmp_path_factory.mktemp("many") / "store")


def _cfg() -> StoreConfig:
    return StoreConfig(commit_log_file_size=4 << 20, consume_queue_file_size=20 * 2_000, **GEOMETRY)


def test_pipelined_in_memory_rebuild_equals_the_live_dispatch(many_keys: Path, tmp_path: Path) -> None:
    """Small batches (many pipeline steps), ConsumeQueue and IndexFile rolls: the same bytes as the
    live store wrote, on one thread and on two."""
    old = {}
    import mqstore.storage.rocketmq.commitlog as commitlog_module

    scan_bounded = commitlog_module.CommitLog.scan_bounded

    def small_batches(self, start, end=None, **kw):  # type: ignore[no-untyped-def]
        kw["batch_records"] = 3_000
        return scan_bounded(self, start, end, **kw)

    old["scan"] = scan_bounded
    commitlog_module.CommitLog.scan_bounded = small_batches  # type: ignore[method-assign]
    try:
        outs = []
        for nthreads in (1, 2):
            out = tmp_path / f"out{nthreads}"
            stats = rebuild_indexes(many_keys, out, config=_cfg(), threads=nthreads)
            assert stats.messages == 40_000 and stats.keys == 120_000 and stats.index_files == 2
            outs.append(out)
    finally:
        commitlog_module.CommitLog.scan_bounded = old["scan"]  # type: ignore[method-assign]
    # the live store's files (mapped, dispatched batch by batch) with the default ConsumeQueue size:
    ref = tmp_path / "ref"
    rebuild_indexes(many_keys, ref, config=StoreConfig(commit_log_file_size=4 << 20, **GEOMETRY))
    assert compare_trees(many_keys, ref) == []
    assert compare_trees(outs[0], outs[1]) == []
    assert compare_trees(outs[0], ref, ("index",)) == []
    cq = sorted(p for p in (outs[0] / "consumequeue").rglob("*") if p.is_file())
    assert len(cq) > 6  # rolled ConsumeQueue files (2,000 units each)
    for topic_queue in {p.parent for p in cq}:
        rel = topic_queue.relative_to(outs[0])
        joined = b"".join(p.read_bytes() for p in sorted(topic_queue.iterdir()))
        ref_bytes = b"".join(p.read_bytes() for p in sorted((ref / rel).iterdir()))
        assert joined[: len(ref_bytes)].rstrip(b"\0") == ref_bytes.rstrip(b"\0")


def test_rebuild_on_the_reference_index_kernels_is_byte_identical(many_keys: Path, tmp_path: Path,
                                                                  monkeypatch: pytest.MonkeyPatch) -> None:
    """The rebuild with the pure-Python twins of the index kernels (the reference path) writes the
    bytes of the compiled path (native when built, else numba)."""
    fast = tmp_path / "fast"
    rebuild_indexes(many_keys, fast, config=StoreConfig(commit_log_file_size=4 << 20, **GEOMETRY), threads=2)
    monkeypatch.setattr(index_build, "bulk_put_parallel", index_build.bulk_put_parallel_py)
    monkeypatch.setattr(index_build, "index_keys", index_build.index_keys_py)
    ref = tmp_path / "reference"
    rebuild_indexes(many_keys, ref, config=StoreConfig(commit_log_file_size=4 << 20, **GEOMETRY), threads=2)
    assert compare_trees(fast, ref) == []
    assert compare_trees(many_keys, ref) == []


def test_index_thread_error_is_raised_and_files_closed(many_keys: Path, tmp_path: Path,
                                                       monkeypatch: pytest.MonkeyPatch) -> None:
    calls = {"n": 0}
    build = IndexService.build

    def failing(self, batch):  # type: ignore[no-untyped-def]
        calls["n"] += 1
        if calls["n"] == 2:
            raise CorruptIndexError("boom")
        return build(self, batch)

    monkeypatch.setattr(IndexService, "build", failing)
    monkeypatch.setattr(rebuild_module, "_WRITEBACK_EVERY", 1)
    import mqstore.storage.rocketmq.commitlog as commitlog_module

    scan_bounded = commitlog_module.CommitLog.scan_bounded
    monkeypatch.setattr(commitlog_module.CommitLog, "scan_bounded",
                        lambda self, s, e=None, **kw: scan_bounded(self, s, e, **{**kw, "batch_records": 5_000}))
    with pytest.raises(CorruptIndexError, match="boom"):
        rebuild_indexes(many_keys, tmp_path / "out", config=StoreConfig(commit_log_file_size=4 << 20, **GEOMETRY))
    # a later rebuild into the same directory completes (files of the failed one are replaced)
    monkeypatch.setattr(IndexService, "build", build)
    import shutil

    shutil.rmtree(tmp_path / "out")
    rebuild_indexes(many_keys, tmp_path / "out", config=StoreConfig(commit_log_file_size=4 << 20, **GEOMETRY))
    assert compare_trees(many_keys, tmp_path / "out") == []


def _keys(n: int, seed: int = 5) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)
    kh = rng.integers(-(2**31), 2**31, n).astype(np.int32)
    phy = np.arange(n, dtype=np.int64) * 100 + 7
    ts = 1_700_000_000_000 + np.arange(n, dtype=np.int64) * 3
    return kh, phy, ts


@pytest.mark.parametrize("slots,items", [(4099, 90_001), (7, 50), (1 << 16, 700_000)])
def test_in_memory_index_file_equals_mapped(tmp_path: Path, slots: int, items: int) -> None:
    """Puts in several calls (spills), a flush, a release of the image (as ``release_full_files``
    does to a full file) and a second flush: the file holds the mapped file's bytes."""
    n = min(items - 1, 200_000)
    kh, phy, ts = _keys(n)
    files = {}
    for mode in (False, True):
        path = tmp_path / f"{mode}" / "20240101000000000"
        path.parent.mkdir()
        f = IndexFile(path, slots, items, create=True, in_memory=mode)
        assert f.in_memory is mode
        done = 0
        for cut in (1, n // 3, n // 2, n):
            while done < cut:
                put = _bulk_put(f, kh[:cut], phy[:cut], ts[:cut], done, threads=2)
                assert put > 0
                done += put
        f.flush()
        if mode:
            f.mm.madvise(mmap.MADV_DONTNEED)  # the image is dropped: a second flush writes nothing
        f.flush()
        f.close()
        files[mode] = path.read_bytes()
    assert len(files[True]) == index_file_size(slots, items)
    assert files[True] == files[False]


def test_in_memory_index_file_is_for_new_files(tmp_path: Path) -> None:
    path = tmp_path / "20240101000000000"
    IndexFile(path, 7, 50, create=True).close()
    with pytest.raises(ValueError):
        IndexFile(path, 7, 50, in_memory=True)
    with pytest.raises(ValueError):
        IndexFile(path, 7, 50, create=True, in_memory=True, read_only=True)
    f = IndexFile(tmp_path / "20240101000000001", 7, 50, create=True, in_memory=True)
    f.destroy()
    assert not (tmp_path / "20240101000000001").exists()


def test_keep_freed_memory_is_harmless() -> None:
    assert keep_freed_memory() in (True, False)
    a = np.ones(1 << 20)
    del a


KILL_CHILD = r"""
import os, signal, sys
from mqstore import StoreConfig
import mqstore.storage.rocketmq.commitlog as cl
from mqstore.storage.rocketmq.index import IndexService
from mqstore.storage.rocketmq.rebuild import rebuild_indexes

scan = cl.CommitLog.scan_bounded
cl.CommitLog.scan_bounded = lambda self, s, e=None, **kw: scan(self, s, e, **{**kw, "batch_records": 4_000})
build = IndexService.build
calls = [0]

def killing(self, batch):
    calls[0] += 1
    if calls[0] == 5:  # mid-rebuild: IndexFile and ConsumeQueue files half written
        os.kill(os.getpid(), signal.SIGKILL)
    return build(self, batch)

IndexService.build = killing
rebuild_indexes(sys.argv[1], config=StoreConfig(commit_log_file_size=4 << 20, hash_slot_num=4099, index_num=90_001))
"""


def test_kill9_mid_in_place_rebuild_leaves_the_store_and_the_next_rebuild_completes(many_keys: Path,
                                                                                  tmp_path: Path) -> None:
    import shutil
    import subprocess
    import sys

    store = tmp_path / "store"
    shutil.copytree(many_keys, store)
    r = subprocess.run([sys.executable, "-c", KILL_CHILD, str(store)], capture_output=True)
    assert r.returncode == -9, r.stderr.decode()
    stale = list(store.glob(".rebuild-*"))
    assert stale and any((d / "index").is_dir() for d in stale)  # the killed build, beside the store's files
    assert compare_trees(many_keys, store) == []  # which it never touched
    stats = rebuild_indexes(store, config=StoreConfig(commit_log_file_size=4 << 20, **GEOMETRY))
    assert stats.messages == 40_000
    assert not list(store.glob(".rebuild-*"))  # the next in-place rebuild removed it
    assert compare_trees(many_keys, store) == []


def test_scan_populating_ahead_gives_the_same_batches(many_keys: Path) -> None:
    """``scan_bounded(populate_ahead=True)`` (the rebuild's: the next window's pages mapped by the
    consuming thread) is advice only: the same batches as without."""
    from mqstore.storage.rocketmq.commitlog import CommitLog

    cl = CommitLog(many_keys / "commitlog", 4 << 20, read_only=True)
    try:
        cl.load()
        runs = []
        for populate in (False, True):
            batches = list(cl.scan_bounded(cl.min_offset, cl.max_offset, batch_records=3_000, populate_ahead=populate))
            runs.append([(b.commit_log_offset.copy(), b.key_hash.copy(), b.next_offset) for b in batches])
        assert len(runs[0]) == len(runs[1]) > 10
        for (o1, k1, n1), (o2, k2, n2) in zip(*runs, strict=True):
            assert n1 == n2 and np.array_equal(o1, o2) and np.array_equal(k1, k2)
    finally:
        cl.close()
