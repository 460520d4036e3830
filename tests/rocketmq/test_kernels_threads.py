"""Multi-threaded kernels against their sequential versions (and the pure-Python twins): same
results, same bytes, whatever the thread count."""

from __future__ import annotations

import struct
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from click.testing import CliRunner
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from kernel_twins import twins
from mqstore import MessageStore, StoreConfig
from mqstore.cli.main import cli
from mqstore.errors import InvalidArgumentError
from mqstore.formats.rocketmq.indexfile import IndexFileBuffer, index_file_size
from mqstore.formats.rocketmq.javahash import java_bytes_hashcode
from mqstore.formats.rocketmq.record import MAGIC_V1
from mqstore.kernels import javahash, threads
from mqstore.kernels.javahash import hash_spans, index_hash_spans
from mqstore.kernels.rocketmq import index_build as rocketmq_index_bulk
from mqstore.kernels.rocketmq import scan as rocketmq_scan
from mqstore.kernels.rocketmq.index_build import bulk_put, bulk_put_parallel, bulk_put_py, header_array
from mqstore.kernels.rocketmq.scan import scan_segment, scan_segment_py
from mqstore.storage.rocketmq import rebuild as rebuild_module
from mqstore.storage.rocketmq.rebuild import compare_trees, rebuild_indexes

from .test_kernels import assert_same_batch, raw_record


@pytest.fixture
def tiny_parallel(monkeypatch: pytest.MonkeyPatch) -> None:
    """Run the parallel paths even on the few keys hypothesis generates (constant for every
    example, so the function scope is harmless)."""
    monkeypatch.setattr(rocketmq_index_bulk, "PARALLEL_MIN_KEYS", 1)
    monkeypatch.setattr(javahash, "PARALLEL_MIN_SPANS", 1)


# ----------------------------------------------------------------------------- thread helper
def test_thread_count_resolution(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("MQSTORE_THREADS", raising=False)
    assert 1 <= threads.default_threads() <= threads.MAX_DEFAULT_THREADS
    assert threads.resolve_threads(None) == threads.default_threads()
    assert threads.resolve_threads(3) == 3
    monkeypatch.setattr(threads.os, "cpu_count", lambda: 3)
    assert [threads.default_threads(reserve=r) for r in (0, 1, 2, 3, 5)] == [3, 2, 1, 1, 1]
    monkeypatch.setattr(threads.os, "cpu_count", lambda: 16)
    assert [threads.default_threads(reserve=r) for r in (0, 1)] == [4, 4]
    monkeypatch.setattr(threads.os, "cpu_count", lambda: None)
    assert threads.default_threads(reserve=1) == 1
    monkeypatch.setenv("MQSTORE_THREADS", "7")
    assert threads.default_threads() == 7
    assert threads.default_threads(reserve=1) == 7  # an explicit setting is taken as given
    for bad in ("0", "-1", "two"):
        monkeypatch.setenv("MQSTORE_THREADS", bad)
        with pytest.raises(InvalidArgumentError):
            threads.default_threads()
    for bad_n in (0, -2, True, 1.5):
        with pytest.raises(InvalidArgumentError):
            threads.resolve_threads(bad_n)  # type: ignore[arg-type]


@given(st.integers(0, 1000), st.integers(1, 9))
def test_split_even_covers_the_range(n: int, parts: int) -> None:
    ranges = threads.split_even(n, parts)
    assert ranges[0][0] == 0 and ranges[-1][1] == n
    assert all(a <= b for a, b in ranges)
    assert all(ranges[i][1] == ranges[i + 1][0] for i in range(len(ranges) - 1))
    sizes = [b - a for a, b in ranges]
    assert max(sizes) - min(sizes) <= 1


def test_run_parallel_results_in_order_and_errors_propagate() -> None:
    assert threads.run_parallel(lambda a, b: a * b, [(1, 2), (3, 4), (5, 6)]) == [2, 12, 30]
    assert threads.run_parallel(lambda a: a, []) == []

    def boom(i: int) -> int:
        if i == 2:
            raise ValueError("two")
        return i

    with pytest.raises(ValueError, match="two"):
        threads.run_parallel(boom, [(1,), (2,), (3,)])


# ----------------------------------------------------------------------------- hashing
@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(st.lists(st.binary(max_size=40), max_size=60), st.integers(1, 5))
def test_hash_spans_threads_equal_sequential(tiny_parallel: None, pieces: list[bytes], nthreads: int) -> None:
    raw = b"".join(pieces)
    lengths = np.array([len(p) for p in pieces], np.int64)
    starts = np.concatenate([[0], np.cumsum(lengths)[:-1]]).astype(np.int64) if pieces else np.zeros(0, np.int64)
    got = hash_spans(raw, starts, lengths, threads=nthreads)
    assert got.tolist() == hash_spans(raw, starts, lengths, threads=1).tolist()
    assert got.tolist() == [java_bytes_hashcode(p) for p in pieces]
    # index hash: topic span = first half of each piece, key span = the rest
    tl = lengths // 2
    ks = starts + tl
    got_i = index_hash_spans(raw, starts, tl, ks, lengths - tl, threads=nthreads)
    assert got_i.tolist() == index_hash_spans(raw, starts, tl, ks, lengths - tl, threads=1).tolist()


def test_hash_spans_large_input_uses_threads_and_matches() -> None:
    rng = np.random.default_rng(5)
    n = 3 * javahash.PARALLEL_MIN_SPANS + 17
    raw = rng.integers(32, 127, n * 12, dtype=np.uint8)
    raw[::97] = 0xC3  # some multi-byte / invalid UTF-8 on the way
    starts = np.arange(n, dtype=np.int64) * 12
    lengths = rng.integers(0, 13, n).astype(np.int64)
    seq = hash_spans(raw, starts, lengths, threads=1)
    assert np.array_equal(hash_spans(raw, starts, lengths, threads=2), seq)
    assert np.array_equal(hash_spans(raw, starts, lengths, threads=4), seq)
    sample = range(0, n, 1001)
    assert [int(seq[i]) for i in sample] == [
        java_bytes_hashcode(raw[starts[i] : starts[i] + lengths[i]].tobytes()) for i in sample
    ]


def test_hash_spans_rejects_bad_thread_count() -> None:
    with pytest.raises(InvalidArgumentError):
        hash_spans(b"ab", np.array([0]), np.array([2]), threads=0)


# ----------------------------------------------------------------------------- bulk IndexFile build
_ts = st.one_of(
    st.integers(1_700_000_000_000, 1_700_000_100_000),
    st.sampled_from([0, -5, 1, 2**40, 1_699_000_000_000, 1_700_000_000_000 + 2**31 * 1000 + 7000]),
)


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(st.data())
def test_bulk_put_parallel_byte_identical(tiny_parallel: None, data: st.DataObject) -> None:
    slots = data.draw(st.integers(1, 13), label="slots")
    items = data.draw(st.integers(2, 40), label="items")
    n = data.draw(st.integers(0, 90), label="n")
    kh = np.array(data.draw(st.lists(st.integers(-(2**31), 2**31 - 1) | st.integers(0, 40), min_size=n, max_size=n)),
                  np.int32)  # fmt: skip
    phy = np.array(sorted(data.draw(st.lists(st.integers(0, 2**40), min_size=n, max_size=n))), np.int64)
    ts = np.array(data.draw(st.lists(_ts, min_size=n, max_size=n)), np.int64)
    carry = (data.draw(st.sampled_from([0, 77])), data.draw(st.sampled_from([0, 1_699_999_999_000, 1_700_000_050_000])))
    size = index_file_size(slots, items)
    noise = data.draw(st.none() | st.binary(min_size=size, max_size=size))
    nthreads = data.draw(st.integers(2, 5), label="threads")
    prefill = data.draw(st.integers(0, n), label="prefill")  # keys put sequentially first (a resumed file)
    bufs, headers = [], []
    for _ in range(3):
        b = np.zeros(size, np.uint8)
        if noise is not None:
            b[40:] = np.frombuffer(noise, np.uint8)[40:]  # stale slots/items: validated the same way
        f = IndexFileBuffer(memoryview(b), slots, items, load=False)
        f.carry_over(*carry)
        bufs.append(b)
        headers.append(header_array(f.header))
    starts = []
    for k in range(3):
        starts.append(bulk_put(bufs[k], slots, items, headers[k], kh[:prefill], phy[:prefill], ts[:prefill]))
    assert len(set(starts)) == 1
    s0 = starts[0]
    got = bulk_put_parallel(bufs[0], slots, items, headers[0], kh, phy, ts, s0, threads=nthreads)
    seq = bulk_put(bufs[1], slots, items, headers[1], kh, phy, ts, s0)
    ref = bulk_put_py(bufs[2], slots, items, headers[2], kh, phy, ts, s0)
    assert got == seq == ref
    assert np.array_equal(headers[0], headers[1]) and np.array_equal(headers[1], headers[2])
    assert np.array_equal(bufs[0], bufs[1]) and np.array_equal(bufs[1], bufs[2])


def test_bulk_put_parallel_large_file_rolls_like_sequential() -> None:
    """Above the threshold, with the real code path: a file that fills up mid-way, then a second."""
    rng = np.random.default_rng(11)
    slots, items = 5003, 150_001
    n = 200_000
    kh = rng.integers(0, 2**31 - 1, n, dtype=np.int64).astype(np.int32)
    kh[::7] = kh[3]  # long chains on one slot
    phy = np.arange(n, dtype=np.int64) * 321
    ts = 1_700_000_000_000 + np.arange(n, dtype=np.int64) * 3
    size = index_file_size(slots, items)
    results = []
    for nthreads in (1, 2, 3):
        done = 0
        files = []
        while done < n:
            b = np.zeros(size, np.uint8)
            f = IndexFileBuffer(memoryview(b), slots, items, load=False)
            if files:
                f.carry_over(int(files[-1][1][3]), int(files[-1][1][1]))
            h = header_array(f.header)
            put = bulk_put_parallel(b, slots, items, h, kh, phy, ts, done, threads=nthreads)
            assert put > 0
            done += put
            files.append((b, h))
        results.append(files)
    for other in results[1:]:
        assert len(other) == len(results[0]) == 2
        for (b1, h1), (b2, h2) in zip(results[0], other, strict=True):
            assert np.array_equal(h1, h2) and np.array_equal(b1, b2)


@pytest.mark.parametrize("put", twins("rocketmq.bulk_put_parallel"))
def test_bulk_put_parallel_validates_like_sequential(put: Any) -> None:
    buf = np.zeros(index_file_size(4, 4), np.uint8)
    header = np.array([0, 0, 0, 0, 0, 1], np.int64)
    with pytest.raises(InvalidArgumentError):
        put(buf, 4, 4, header, np.zeros(1, np.int32), np.zeros(1), np.zeros(1), 5)
    with pytest.raises(InvalidArgumentError):
        put(buf, 4, 4, header, np.zeros(1, np.int32), np.zeros(1), np.zeros(1), threads=0)
    assert put(buf, 4, 4, header, np.arange(5, dtype=np.int32), np.arange(5), np.full(5, 7), threads=2) == 3
    assert header.tolist() == [7, 7, 0, 2, 3, 4]


# ----------------------------------------------------------------------------- whole rebuild
def _many_key_store(root: Path) -> Path:
    """A store whose rebuild bulk-puts more keys per call than the parallel threshold, across a
    CommitLog segment roll and an IndexFile roll."""
    cfg = StoreConfig(commit_log_file_size=4 << 20, hash_slot_num=4099, index_num=90_001, background_services=False)
    with MessageStore.open(root, cfg) as store:
        n = 40_000
        for lo in range(0, n, 10_000):
            ids = range(lo, lo + 10_000)
            store.put_columns(["orders", "payments"][lo // 10_000 % 2], [b"x" * (i % 50) for i in ids],
                              [i % 3 for i in ids], keys=[f"k{i} u{i % 977}" for i in ids], tags="TagA")  # fmt: skip
    return root


def test_rebuild_with_threads_is_byte_identical(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    store = _many_key_store(tmp_path / "store")
    monkeypatch.setattr(rebuild_module, "_WRITEBACK_EVERY", 1)  # early write-back after every batch
    cfg = StoreConfig(commit_log_file_size=4 << 20, hash_slot_num=4099, index_num=90_001)
    outs = []
    for nthreads in (1, 2, 3):
        out = tmp_path / f"out{nthreads}"
        stats = rebuild_indexes(store, out, config=cfg, threads=nthreads)
        assert stats.messages == 40_000 and stats.keys == 120_000 and stats.index_files == 2
        outs.append(out)
    assert compare_trees(outs[0], outs[1]) == []
    assert compare_trees(outs[0], outs[2]) == []
    assert compare_trees(store, outs[1]) == []  # and what the live store wrote
    r = CliRunner().invoke(cli, ["rocketmq", "rebuild-index", str(store), "--out", str(tmp_path / "cli"),
                                 "--slots", "4099", "--items", "90001", "--threads", "2", "--json"])  # fmt: skip
    assert r.exit_code == 0, r.output
    assert compare_trees(outs[0], tmp_path / "cli") == []
    r = CliRunner().invoke(cli, ["rocketmq", "rebuild-index", str(store), "--threads", "0"])
    assert r.exit_code == 2 and "Traceback" not in r.output


# ----------------------------------------------------------------------------- scan split in ranges
def _chain(records: list[bytes], base: int) -> bytearray:
    """Records laid out one after the other, each with its PHYSICALOFFSET = ``base`` + position."""
    out = bytearray()
    for r in records:
        rec = bytearray(r)
        struct.pack_into(">q", rec, 28, base + len(out))
        out += rec
    return out


@st.composite
def _split_segment(draw: st.DrawFn) -> tuple[bytes, int, int, int]:
    base = draw(st.sampled_from([0, 1 << 30]))
    recs = []
    for _ in range(draw(st.integers(0, 14))):
        body = draw(st.binary(max_size=130))
        recs.append(raw_record(draw(st.sampled_from([b"TopicTest", b"orders", b"t\xff"])),
                               b"KEYS\x01k1 k2\x02UNIQ_KEY\x01" + draw(st.binary(min_size=1, max_size=4)).hex().encode(),
                               body, v2=draw(st.booleans()), queue_id=draw(st.integers(0, 3)),
                               crc=12345 if draw(st.integers(0, 12)) == 0 else None,
                               total_delta=draw(st.sampled_from([0] * 12 + [1]))))  # fmt: skip
    out = _chain(recs, base)
    # decoys: a record-like header inside a body (right magic, TOTALSIZE and PHYSICALOFFSET)
    for _ in range(draw(st.integers(0, 3))):
        if len(out) > 200:
            q = draw(st.integers(0, len(out) - 100))
            total = draw(st.integers(88, max(88, len(out) - q)))
            struct.pack_into(">ii", out, q, total, MAGIC_V1)
            struct.pack_into(">q", out, q + 28, base + q)
    kind = draw(st.integers(0, 4))
    if kind == 1:
        out += struct.pack(">ii", 100, -875286124) + bytes(92)  # blank record
    elif kind == 2:
        out += draw(st.binary(max_size=30))
    elif kind == 3 and out:
        out[draw(st.integers(0, len(out) - 1))] = draw(st.integers(0, 255))
    n = len(out)
    start = draw(st.sampled_from([0, 0, min(1, n)]))
    end = draw(st.one_of(st.just(n), st.integers(start, n)))
    return bytes(out), base, start, end


@settings(max_examples=400, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])  # fmt: skip
@given(_split_segment(), st.booleans(), st.booleans(), st.integers(2, 5))
def test_scan_split_equals_sequential(monkeypatch: pytest.MonkeyPatch, seg: tuple[bytes, int, int, int],
                                      check_crc: bool, skip: bool, nthreads: int) -> None:  # fmt: skip
    monkeypatch.setattr(rocketmq_scan, "PARALLEL_MIN_BYTES", 0)
    data, base, start, end = seg
    kw = {"check_crc": check_crc, "skip_length_mismatch": skip}
    split = scan_segment(data, base, start, end, threads=nthreads, **kw)
    assert_same_batch(split, scan_segment(data, base, start, end, threads=1, **kw))
    assert_same_batch(split, scan_segment_py(data, base, start, end, **kw))


def test_scan_split_on_a_large_segment_finds_the_cuts() -> None:
    rng = np.random.default_rng(9)
    recs = [raw_record(b"TopicTest" if i % 3 else b"orders", f"KEYS\x01o-{i} u-{i % 97}\x02TAGS\x01T{i % 5}".encode(),
                       rng.integers(0, 256, int(rng.integers(50, 900)), dtype=np.uint8).tobytes(), queue_id=i % 4)
            for i in range(14_000)]  # fmt: skip
    data = bytes(_chain(recs, 1 << 30)) + struct.pack(">ii", 100, -875286124) + bytes(92)
    assert len(data) > rocketmq_scan.PARALLEL_MIN_BYTES
    cuts = rocketmq_scan._cuts(np.frombuffer(data, np.uint8), 1 << 30, 0, len(data), 3)
    assert len(cuts) == 4  # two real boundaries found
    seq = scan_segment(data, 1 << 30, 0, len(data), check_crc=True, threads=1)
    assert len(seq) == 14_000 and seq.stop == "blank"
    for nthreads in (2, 3, 4):
        assert_same_batch(scan_segment(data, 1 << 30, 0, len(data), check_crc=True, threads=nthreads), seq)
    # a bad body CRC in the second half: the split scan stops exactly where the sequential one does
    bad = bytearray(data)
    p = int(seq.commit_log_offset[10_000]) - (1 << 30)
    bad[p + 88] ^= 0xFF
    seq_bad = scan_segment(bytes(bad), 1 << 30, 0, len(bad), check_crc=True, threads=1)
    assert seq_bad.stop == "invalid" and len(seq_bad) == 10_000
    assert_same_batch(scan_segment(bytes(bad), 1 << 30, 0, len(bad), check_crc=True, threads=2), seq_bad)


def test_rebuild_leaves_a_cpu_to_its_scan_thread(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    rebuild = rebuild_module
    (tmp_path / "commitlog").mkdir()
    seen: list[int] = []
    monkeypatch.setattr(rebuild, "_rebuild", lambda root, out, cfg, progress, check_crc, n, *more: seen.append(n))
    monkeypatch.delenv("MQSTORE_THREADS", raising=False)
    monkeypatch.setattr(threads.os, "cpu_count", lambda: 3)
    rebuild.rebuild_indexes(tmp_path, tmp_path / "out")  # the default: 3 CPUs, one for the read-ahead scan
    rebuild.rebuild_indexes(tmp_path, tmp_path / "out", threads=3)
    monkeypatch.setattr(threads.os, "cpu_count", lambda: 2)
    rebuild.rebuild_indexes(tmp_path, tmp_path / "out")
    monkeypatch.setenv("MQSTORE_THREADS", "2")
    rebuild.rebuild_indexes(tmp_path, tmp_path / "out")
    assert seen == [2, 3, 1, 2]
