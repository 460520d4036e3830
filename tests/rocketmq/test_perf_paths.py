"""The performance paths of the RocketMQ read side against their pure-Python twins: the chunked
one-pass scan (forced into tiny chunks), the interleaved multi-span CRC, and the CRC cut of a
scan at the first bad body."""

from __future__ import annotations

import json
import zlib
from pathlib import Path

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from mqstore import MessageStore, StoreConfig
from mqstore.errors import InvalidArgumentError, InvalidKeyError, InvalidTopicError
from mqstore.formats.rocketmq.indexfile import IndexHeader, index_file_size
from mqstore.formats.rocketmq.properties import split_keys
from mqstore.kernels import endian
from mqstore.kernels.crc import crc32_spans
from mqstore.kernels.rocketmq import scan as rocketmq_scan
from mqstore.kernels.rocketmq.index_build import bulk_put, bulk_put_py, header_array
from mqstore.kernels.rocketmq.scan import STOP_INVALID, scan_segment, scan_segment_py
from mqstore.storage.rocketmq.commitlog import CommitLog
from mqstore.storage.rocketmq.rebuild import compare_trees, rebuild_indexes

from .test_kernels import _segment, assert_same_batch, raw_record


@pytest.fixture
def tiny_chunks(monkeypatch: pytest.MonkeyPatch) -> None:
    """Force every output array of the scan to fill after a few rows, keys or topics."""
    monkeypatch.setattr(rocketmq_scan, "_MAX_CHUNK_ROWS", 2)
    monkeypatch.setattr(rocketmq_scan, "_KEYS_PER_ROW_GUESS", 1)
    monkeypatch.setattr(rocketmq_scan, "_MAX_CHUNK_TOPICS", 1)


def _many_records(n: int, bad_crc_at: int | None = None) -> bytes:
    out = []
    for i in range(n):
        topic = [b"TopicA", b"TopicB", b"t\xff", b"TopicC"][i % 4]
        props = b"KEYS\x01k%d  x%d y\x02UNIQ_KEY\x01U%04d\x02TAGS\x01Tag%d\x02" % (i, i, i, i % 3)
        if i % 5 == 0:
            props = b"TAGS\x01only\x02"  # no keys
        body = bytes((i * 7 + j) & 0xFF for j in range(i % 40))
        out.append(raw_record(topic, props, body, queue_id=i % 2, queue_offset=i // 2, store_ts=1000 + i,
                              crc=12345 if i == bad_crc_at else None))  # fmt: skip
    return b"".join(out)


@pytest.mark.usefixtures("tiny_chunks")
@pytest.mark.parametrize("check_crc", [False, True])
@pytest.mark.parametrize("max_records", [None, 0, 1, 7])
def test_chunked_scan_equals_reference(check_crc: bool, max_records: int | None, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(rocketmq_scan, "_MAX_KEYS_PER_RECORD", 4)  # these records have at most 4 keys
    data = _many_records(23)
    fast = scan_segment(data, 4096, 0, len(data), check_crc=check_crc, max_records=max_records)
    ref = scan_segment_py(data, 4096, 0, len(data), check_crc=check_crc, max_records=max_records)
    assert len(ref) == (23 if max_records is None else max_records)
    assert_same_batch(fast, ref)


@pytest.mark.parametrize("bad", [0, 1, 6, 11, 22])
@pytest.mark.parametrize("chunked", [False, True])
def test_crc_cut_equals_reference(bad: int, chunked: bool, monkeypatch: pytest.MonkeyPatch) -> None:
    if chunked:
        monkeypatch.setattr(rocketmq_scan, "_MAX_CHUNK_ROWS", 3)
    data = _many_records(23, bad_crc_at=bad)
    fast = scan_segment(data, 0, 0, len(data), check_crc=True)
    ref = scan_segment_py(data, 0, 0, len(data), check_crc=True)
    assert ref.stop == STOP_INVALID and len(ref) == bad
    assert_same_batch(fast, ref)
    assert fast.error == ref.error
    # without the check the bad body is not noticed
    assert len(scan_segment(data, 0, 0, len(data))) == 23


@pytest.mark.usefixtures("tiny_chunks")
@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large,
                                                                  HealthCheck.function_scoped_fixture])  # fmt: skip
@given(_segment(), st.booleans(), st.booleans(), st.sampled_from([None, 0, 2, 5]))
def test_chunked_scan_equals_reference_on_random(
    seg: tuple[bytes, int, int], check_crc: bool, skip: bool, max_records: int | None
) -> None:
    data, start, end = seg
    kw = {"check_crc": check_crc, "skip_length_mismatch": skip, "max_records": max_records}
    assert_same_batch(scan_segment(data, 1 << 30, start, end, **kw), scan_segment_py(data, 1 << 30, start, end, **kw))


@settings(max_examples=60, deadline=None)
@given(st.binary(min_size=0, max_size=3000), st.lists(st.tuples(st.integers(0, 3000), st.integers(0, 300)), max_size=40))
def test_crc32_spans_equals_zlib(raw: bytes, spans: list[tuple[int, int]]) -> None:
    spans = [(min(s, len(raw)), min(n, len(raw) - min(s, len(raw)))) for s, n in spans]
    starts = np.array([s for s, _ in spans], np.int64)
    lens = np.array([n for _, n in spans], np.int64)
    want = [zlib.crc32(raw[s : s + n]) for s, n in spans]
    assert crc32_spans(raw, starts, lens).tolist() == want  # ISA-L kernel (the default)
    assert crc32_spans(raw, starts, lens, use_isal=False).tolist() == want  # table kernel twin


def test_isal_crc_is_used() -> None:
    from mqstore.kernels.crc_nb import HAVE_ISAL_CRC

    assert HAVE_ISAL_CRC, "isal is a dependency: its CRC-32 symbol must be callable from the kernels"


def test_crc32_spans_validates_spans() -> None:
    with pytest.raises(InvalidArgumentError):
        crc32_spans(b"abc", np.array([2]), np.array([5]))
    with pytest.raises(InvalidArgumentError):
        crc32_spans(b"abc", np.array([0, 1]), np.array([1]))
    assert crc32_spans(b"", np.empty(0, np.int64), np.empty(0, np.int64)).tolist() == []


# ----------------------------------------------------------------------------- bounded rebuild scan
def _fixture_store(shared_fixtures: Path, case: str) -> tuple[Path, StoreConfig, int]:
    root = shared_fixtures / "rocketmq" / case
    m = json.loads((root / "manifest.json").read_text())
    c = m["config"]
    cfg = StoreConfig(commit_log_file_size=c["mappedFileSizeCommitLog"], consume_queue_file_size=c["mappedFileSizeConsumeQueue"],
                      hash_slot_num=c["maxHashSlotNum"], index_num=c["maxIndexNum"], background_services=False,
                      enabled_append_prop_crc=c["enabledAppendPropCRC"])  # fmt: skip
    return root / "store", cfg, len(m["messages"])


@pytest.mark.parametrize("case", ["basic", "prop_crc"])
@pytest.mark.parametrize("read_ahead", [False, True])
def test_scan_bounded_equals_scan(shared_fixtures: Path, case: str, read_ahead: bool) -> None:
    store, cfg, n = _fixture_store(shared_fixtures, case)
    cl = CommitLog(store / "commitlog", cfg.commit_log_file_size, read_only=True)
    cl.load()
    try:
        whole = list(cl.scan(cl.min_offset, cl.max_offset))
        for size in (1, 3, 1000):
            parts = list(cl.scan_bounded(cl.min_offset, cl.max_offset, batch_records=size, read_ahead=read_ahead))
            assert all(len(b) <= size for b in parts)
            assert sum(len(b) for b in parts) == sum(len(b) for b in whole) == n
            for name in ("commit_log_offset", "queue_offset", "tags_code", "store_timestamp"):
                assert np.array_equal(np.concatenate([getattr(b, name) for b in parts]),
                                      np.concatenate([getattr(b, name) for b in whole])), name  # fmt: skip
            assert np.array_equal(np.concatenate([b.key_hash for b in parts]), np.concatenate([b.key_hash for b in whole]))
            assert (parts[-1].next_offset, parts[-1].stop) == (whole[-1].next_offset, whole[-1].stop)
        # the pages released behind the scan fault back in from the page cache
        again = list(cl.scan(cl.min_offset, cl.max_offset))
        assert sum(len(b) for b in again) == n
    finally:
        cl.close()


@pytest.mark.parametrize("case", ["basic", "prop_crc"])
def test_rebuild_in_tiny_batches_is_byte_identical(shared_fixtures: Path, tmp_path: Path, case: str,
                                                   monkeypatch: pytest.MonkeyPatch) -> None:  # fmt: skip
    store, cfg, n = _fixture_store(shared_fixtures, case)
    orig = CommitLog.scan_bounded
    monkeypatch.setattr(CommitLog, "scan_bounded", lambda self, *a, **k: orig(self, *a, **{**k, "batch_records": 2}))
    stats = rebuild_indexes(store, tmp_path, config=cfg)
    assert stats.messages == n
    assert compare_trees(store, tmp_path) == []
    assert (tmp_path / "checkpoint").read_bytes() == (store / "checkpoint").read_bytes()


# ----------------------------------------------------------------------------- bulk index build
@pytest.mark.parametrize("start_count", [1, 5])
def test_bulk_put_word_and_byte_kernels_equal_reference(start_count: int) -> None:
    slots, items = 7, 40
    size = index_file_size(slots, items)
    rng = np.random.default_rng(start_count)
    n = 60  # more than fit: the file fills
    kh = rng.integers(-(2**31), 2**31 - 1, n, dtype=np.int64).astype(np.int32)
    kh[:3] = [0, -(2**31), 2**31 - 1]
    phy = np.sort(rng.integers(0, 2**40, n))
    ts = 1_700_000_000_000 + np.sort(rng.integers(-5000, 10**6, n))
    outs = []
    for kind in ("words", "bytes", "py"):
        raw = np.zeros(size + 8, np.uint8)
        buf = raw[:size] if kind != "bytes" else raw[1 : size + 1]  # an unaligned view takes the byte kernel
        header = header_array(IndexHeader(index_count=start_count))
        if kind == "words":
            assert endian.word_view(buf) is not None
        if kind == "bytes":
            assert endian.word_view(buf) is None
        fn = bulk_put_py if kind == "py" else bulk_put
        done = fn(buf, slots, items, header, kh, phy, ts, 2)
        outs.append((done, header.tolist(), buf.tobytes()))
    assert outs[0] == outs[1] == outs[2]
    assert outs[0][0] == items - start_count


# ----------------------------------------------------------------------------- batch key queries
@pytest.mark.parametrize("case", ["basic", "prop_crc"])
def test_batch_queries_equal_single_queries(shared_fixtures: Path, case: str) -> None:
    store, cfg, _n = _fixture_store(shared_fixtures, case)
    m = json.loads((shared_fixtures / "rocketmq" / case / "manifest.json").read_text())
    with MessageStore.open(store, cfg, read_only=True) as s:
        for q in m["queries"]:  # the broker's own answers (queryOffset), many keys at once
            got = s.query_offsets_many(q["topic"], [q["key"], "absent-key", q["key"]], q["maxNum"], q["begin"], q["end"])
            assert got[0] == got[2] == q["queryOffset_phyOffsets"]
            assert got[1] == s.query_offsets_broker(q["topic"], "absent-key", q["maxNum"], q["begin"], q["end"])
        by_topic: dict[str, set[str]] = {}
        for x in m["messages"]:
            by_topic.setdefault(x["topic"], set()).update(split_keys(x["keys"]))
            if x["uniqKey"]:
                by_topic[x["topic"]].add(x["uniqKey"])
        ts = sorted(x["storeTimestamp"] for x in m["messages"])
        windows = [(None, None), (ts[len(ts) // 3], ts[2 * len(ts) // 3]), (ts[-1] + 1, None)]
        checked = 0
        for topic, keys in by_topic.items():
            keys_list = [*sorted(keys), "no-such-key"]
            for begin, end in windows:
                for max_num in (None, 1):
                    batch = s.query_by_keys(topic, keys_list, begin, end, max_num)
                    assert list(batch) == keys_list
                    for k in keys_list:
                        single = s.query_by_key(topic, k, begin, end, max_num)
                        assert [x.commit_log_offset for x in batch[k]] == [x.commit_log_offset for x in single]
                        checked += len(single)
            for cap in (1, 3, 64):
                many = s.query_offsets_many(topic, keys_list, cap)
                assert many == [s.query_offsets_broker(topic, k, cap) for k in keys_list]
        assert checked > 0


def test_batch_queries_validate_input(shared_fixtures: Path) -> None:
    store, cfg, _n = _fixture_store(shared_fixtures, "basic")
    with MessageStore.open(store, cfg, read_only=True) as s:
        with pytest.raises(InvalidKeyError):
            s.query_by_keys("TopicTest", ["a", ""])
        with pytest.raises(InvalidKeyError):
            s.query_offsets_many("TopicTest", ["a", 3])  # type: ignore[list-item]
        with pytest.raises(InvalidArgumentError):
            s.query_by_keys("TopicTest", ["a"], max_num=0)
        with pytest.raises(InvalidTopicError):
            s.query_by_keys("bad topic/..", ["a"])
        assert s.query_by_keys("TopicTest", []) == {}
        assert s.query_offsets_many("TopicTest", ["a"], 0) == [[]]


def test_batch_queries_across_many_index_files(tmp_path: Path) -> None:
    cfg = StoreConfig(hash_slot_num=3, index_num=9, background_services=False)
    keys = [f"k{i}" for i in range(7)]
    with MessageStore.open(tmp_path / "s", cfg) as s:
        for i in range(60):
            s.put("T", b"x%d" % i, keys=[keys[i % 7], keys[(i * 3) % 7]], tags="A")
            if i % 13 == 0:
                s.put("U", b"other", keys=[keys[i % 7]])
        s.dispatch()
        assert len(s.engine.index.files) > 5
        for cap in (1, 2, 5, 64):
            many = s.query_offsets_many("T", [*keys, "nope"], cap)
            assert many == [s.query_offsets_broker("T", k, cap) for k in [*keys, "nope"]]
            assert any(len(m) == cap for m in many) if cap <= 5 else max(map(len, many)) < cap
        batch = s.query_by_keys("T", [*keys, "nope"])
        for k in [*keys, "nope"]:
            assert [m.commit_log_offset for m in batch[k]] == [m.commit_log_offset for m in s.query_by_key("T", k)]
        assert sum(len(v) for v in batch.values()) > 60
