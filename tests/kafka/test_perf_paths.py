"""The fast Kafka lookup paths (bisect single lookups, fused batch lookups) against the exact
scalar search of spec §3.7 on the same data, including unsorted (corrupt) index files."""

from __future__ import annotations

import struct
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from kernel_twins import twins
from mqstore.formats.kafka.index_entry import OffsetPosition, TimestampOffset
from mqstore.kernels.kafka.index_search import (
    index_lookup_many,
    index_lookup_many_py,
    index_search_py,
    index_search_sorted,
)
from mqstore.storage.kafka.index import OffsetIndex, TimeIndex

increasing = st.lists(st.integers(-50, 400), max_size=60, unique=True).map(sorted)


@given(increasing, st.lists(st.integers(-60, 420), min_size=1, max_size=40), st.integers(0, 6))
@settings(max_examples=300, deadline=None)
def test_sorted_search_equals_kafka_search(col: list[int], targets: list[int], warm: int) -> None:
    n = len(col)
    for t in targets:
        for sub in (False, True):
            assert index_search_sorted(col, n, t, sub) == index_search_py(col, n, t, warm, sub), (col, t, sub)
    # exact hits, slot-0 quirk included
    for t in col:
        for sub in (False, True):
            assert index_search_sorted(col, n, t, sub) == index_search_py(col, n, t, warm, sub)


@given(st.lists(st.integers(-50, 400), max_size=60), st.lists(st.integers(-60, 420), min_size=1, max_size=40),
       st.integers(0, 6))
@settings(max_examples=200, deadline=None)
def test_fused_lookup_many_equals_twin(col: list[int], targets: list[int], warm: int) -> None:
    """Any column, sorted or not: the compiled fused kernel and its Python twin agree."""
    keys = np.array(col, dtype=np.int64)
    vals = keys * 3 + 1
    a = index_lookup_many(keys, vals, len(col), np.array(targets), warm, -7, -9)
    b = index_lookup_many_py(keys, vals, len(col), targets, warm, -7, -9)
    assert np.array_equal(a[0], b[0]) and np.array_equal(a[1], b[1])
    for t, k, v in zip(targets, a[0].tolist(), a[1].tolist(), strict=True):
        s = index_search_py(col, len(col), t, warm, False)
        assert (k, v) == ((-7, -9) if s < 0 else (col[s], col[s] * 3 + 1))


@pytest.mark.parametrize("lookup", twins("kafka.index_lookup_many"))
def test_lookup_many_finds_the_greatest_lower_bound(lookup: Any) -> None:
    keys = np.array([3, 8, 8, 20, 41], dtype=np.int64)  # not strictly increasing: the exact §3.7 search
    vals = keys * 10
    k, v = lookup(keys, vals, 5, np.array([0, 3, 7, 8, 19, 20, 100]), 2, -1, -2)
    exp = [index_search_py(keys.tolist(), 5, t, 2, False) for t in (0, 3, 7, 8, 19, 20, 100)]
    assert k.tolist() == [-1 if s < 0 else int(keys[s]) for s in exp]
    assert v.tolist() == [-2 if s < 0 else int(vals[s]) for s in exp]
    inc = np.array([3, 8, 20, 41], dtype=np.int64)
    k, v = lookup(inc, inc + 1, 4, [2, 3, 9, 41, 50], 1, -1, -2, strictly_increasing=True)
    assert k.tolist() == [-1, 3, 8, 41, 41] and v.tolist() == [-2, 4, 9, 42, 42]


def _scalar_offset_lookup(raw: bytes, base: int, target: int, warm: int) -> OffsetPosition:
    n = len(raw) // 8
    ents = [struct.unpack_from(">ii", raw, 8 * i) for i in range(n)]
    s = index_search_py([base + r for r, _ in ents], n, target, warm, False)
    return OffsetPosition(base, 0) if s < 0 else OffsetPosition(base + ents[s][0], ents[s][1])


def test_offset_index_appends_keep_cache_in_step(tmp_path: Path) -> None:
    idx = OffsetIndex(tmp_path / "00000000000000000100.index", 100, 8 * 1000)
    assert idx.lookup(5) == OffsetPosition(100, 0)  # empty: builds an empty cache
    for i in range(300):
        idx.append(100 + 3 * i, 50 * i)
        # the cache is extended by the append, never stale
        assert idx.lookup(100 + 3 * i) == OffsetPosition(100 + 3 * i, 50 * i)
        assert idx.lookup(100 + 3 * i + 1) == OffsetPosition(100 + 3 * i, 50 * i)
    raw = bytes(idx._mm[: idx.size_in_bytes])  # type: ignore[index]
    targets = list(range(90, 1010, 7))
    for t in targets:
        assert idx.lookup(t) == _scalar_offset_lookup(raw, 100, t, idx.warm_entries)
    offs, poss = idx.lookup_many(targets)
    assert [OffsetPosition(o, p) for o, p in zip(offs.tolist(), poss.tolist(), strict=True)] == [
        idx.lookup(t) for t in targets]
    idx.truncate_to(400)  # drop entries: the cache is rebuilt
    assert idx.lookup(10_000) == OffsetPosition(397, 50 * 99)
    idx.close()


def test_unsorted_offset_index_uses_exact_search(tmp_path: Path) -> None:
    """A corrupt (non-increasing) index file answers exactly as Kafka's warm/cold binary search."""
    rels = [0, 10, 5, 30, 20, 40, 41, 39, 60, 55] * 200
    raw = b"".join(struct.pack(">ii", r, 7 * i) for i, r in enumerate(rels))
    p = tmp_path / "00000000000000001000.index"
    p.write_bytes(raw)
    idx = OffsetIndex(p, 1000, writable=False)
    assert not idx._fast_columns().inc
    targets = list(range(990, 1070))
    for t in targets:
        assert idx.lookup(t) == _scalar_offset_lookup(raw, 1000, t, idx.warm_entries)
    offs, poss = idx.lookup_many(targets)
    assert [OffsetPosition(o, p) for o, p in zip(offs.tolist(), poss.tolist(), strict=True)] == [
        idx.lookup(t) for t in targets]
    idx.close()


def test_time_index_lookups_match_scalar_search(tmp_path: Path) -> None:
    ti = TimeIndex(tmp_path / "00000000000000000000.timeindex", 0, 12 * 500)
    ts = 1_700_000_000_000
    for i in range(400):
        ti.maybe_append(ts + 10 * i, 2 * i)
    raw = bytes(ti._mm[: ti.size_in_bytes])  # type: ignore[index]
    ents = [struct.unpack_from(">qi", raw, 12 * i) for i in range(ti.entries)]
    col = [t for t, _ in ents]
    targets = [ts - 5, ts, ts + 3, ts + 3990, ts + 10_000] + [ts + 7 * k for k in range(600)]
    for t in targets:
        s = index_search_py(col, len(col), t, ti.warm_entries, False)
        want = TimestampOffset(-1, 0) if s < 0 else TimestampOffset(ents[s][0], ents[s][1])
        assert ti.lookup(t) == want
        assert ti.largest_lower_bound_slot(t) == s
        assert ti.smallest_upper_bound_slot(t) == index_search_py(col, len(col), t, ti.warm_entries, True)
    got_ts, got_off = ti.lookup_many(targets)
    assert [TimestampOffset(a, b) for a, b in zip(got_ts.tolist(), got_off.tolist(), strict=True)] == [
        ti.lookup(t) for t in targets]
    ti.close()


@given(increasing, st.lists(st.integers(-60, 420), min_size=1, max_size=200), st.integers(1, 9))
@settings(max_examples=100, deadline=None)
def test_threaded_lookup_many_equals_twin(col: list[int], targets: list[int], min_per_thread: int) -> None:
    """Large batches are split over threads (here forced with a tiny split size): same answers."""
    import mqstore.kernels.kafka.index_search as ks

    keys = np.array(col, dtype=np.int64)
    vals = keys * 5 - 2
    saved, saved_threads = ks.PARALLEL_MIN_TARGETS, ks.default_threads
    ks.PARALLEL_MIN_TARGETS, ks.default_threads = min_per_thread, lambda: 3
    try:
        a = index_lookup_many(keys, vals, len(col), np.array(targets), 4, -7, -9)
    finally:
        ks.PARALLEL_MIN_TARGETS, ks.default_threads = saved, saved_threads
    b = index_lookup_many_py(keys, vals, len(col), targets, 4, -7, -9)
    assert np.array_equal(a[0], b[0]) and np.array_equal(a[1], b[1])


@given(st.lists(st.integers(1, 6), min_size=1, max_size=40), st.sets(st.integers(0, 10_000), max_size=6),
       st.integers(2, 4))
@settings(max_examples=60, deadline=None)
def test_threaded_crc_check_equals_single_thread(counts: list[int], flips: set[int], threads: int) -> None:
    """The CRC check split over threads (forced with a tiny split size) flags the same batches."""
    from kafka_support import batch

    import mqstore.kernels.kafka.batches as kk

    data = bytearray()
    off = 0
    for c in counts:
        data += batch(off, count=c)
        off += c
    for f in flips:
        data[f % len(data)] ^= 0x40
    sc = kk.scan_batches(bytes(data))
    saved = kk.PARALLEL_MIN_BATCHES
    kk.PARALLEL_MIN_BATCHES = 1
    try:
        got = kk.check_crcs(data, sc, threads=threads)
    finally:
        kk.PARALLEL_MIN_BATCHES = saved
    assert got.tolist() == kk.check_crcs_py(data, sc).tolist()


# ----------------------------------------------------------------------------- verify's time-index check
_CODECS = st.sampled_from([0, 1, 2, 3, 4])


@st.composite
def _log_buffers(draw: st.DrawFn) -> bytes:
    from mqstore.formats.kafka.batch import SimpleRecord, encode_batch, encode_legacy_message

    out = bytearray()
    offset = 0
    for _ in range(draw(st.integers(1, 12))):
        kind = draw(st.sampled_from(["v2", "v2", "v2", "append_time", "legacy0", "legacy1"]))
        if kind.startswith("legacy"):
            out += encode_legacy_message(offset, b"v", b"k", magic=int(kind[-1]),
                                         timestamp=draw(st.integers(0, 10**12)))
            offset += 1
            continue
        ts = draw(st.lists(st.integers(0, 10**12), min_size=1, max_size=6))
        recs = [SimpleRecord(value=b"x" * draw(st.integers(0, 40)), key=b"k%d" % i, timestamp=t)
                for i, t in enumerate(ts)]
        extra: dict[str, Any] = {}
        if kind == "append_time":
            extra = {"timestamp_type": 1, "max_timestamp": draw(st.integers(0, 10**12))}
        out += encode_batch(recs, base_offset=offset, compression=draw(_CODECS), **extra)
        offset += len(recs)
    return bytes(out)


@given(_log_buffers(), st.data())
@settings(max_examples=120, deadline=None)
def test_bulk_max_timestamps_equal_the_record_codec(buf: bytes, data: st.DataObject) -> None:
    """verify's bulk time-index check (compiled record parser, chunks) gives the record codec's
    largest timestamp for every batch, for any magic and codec, LogAppendTime included."""
    from mqstore.kernels.kafka.batches import scan_batches
    from mqstore.storage.kafka import tools

    scan = scan_batches(memoryview(buf))
    n = scan["count"]
    ks = np.array(data.draw(st.lists(st.integers(0, n - 1), max_size=20)), np.int64)
    got, errors = tools.batch_max_timestamps(buf, scan, ks, "x.log")
    assert errors == {}
    want = [tools._max_record_timestamp(buf, int(scan["position"][k]), int(scan["magic"][k]), "x.log")
            for k in ks.tolist()]
    assert got.tolist() == want


def test_bulk_max_timestamps_report_undecodable_batches_like_the_codec(monkeypatch: pytest.MonkeyPatch) -> None:
    """A batch whose records do not parse (valid CRC, broken record length) is reported with the
    record codec's message, and the other batches of its chunk still get their timestamps."""
    import crc32c

    from mqstore.errors import CorruptDataError
    from mqstore.formats.kafka.batch import SimpleRecord, encode_batch
    from mqstore.kernels.kafka.batches import scan_batches
    from mqstore.storage.kafka import tools

    good = encode_batch([SimpleRecord(value=b"a", timestamp=5), SimpleRecord(value=b"b", timestamp=9)], base_offset=0)
    bad = bytearray(encode_batch([SimpleRecord(value=b"abc", timestamp=7)], base_offset=2))
    bad[61] = 0x7E  # the record's length varint: 63, past the end of the batch
    bad[17:21] = struct.pack(">I", crc32c.crc32c(bytes(bad[21:])))  # the CRC stays valid
    buf = good + bytes(bad) + good
    scan = scan_batches(memoryview(buf))
    monkeypatch.setattr(tools, "_TS_CHUNK", 2)
    got, errors = tools.batch_max_timestamps(buf, scan, np.arange(scan["count"], dtype=np.int64), "x.log")
    assert got.tolist() == [9, -1, 9]
    with pytest.raises(CorruptDataError) as exc_info:
        tools._max_record_timestamp(buf, int(scan["position"][1]), 2, "x.log")
    assert errors == {1: exc_info.value.message}
