"""Fast key-query paths against their reference twins on the same inputs.

* ``select_one`` (one compiled chain walk, hash finished in the kernel) vs
  ``IndexFileBuffer.select_by_hash`` on built and on garbage IndexFiles;
* ``IndexService.select_offsets`` vs ``IndexService.query_offset`` across many rolled files;
* the columnar batch query vs one broker query per key.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from kernel_twins import twins
from mqstore import MessageStore, StoreConfig
from mqstore.errors import CorruptIndexError, InvalidKeyError, InvalidTopicError
from mqstore.formats.rocketmq.indexfile import IndexFileBuffer, IndexHeader, index_file_size
from mqstore.formats.rocketmq.javahash import index_key_hash
from mqstore.kernels.endian import word_view
from mqstore.kernels.javahash import hash_prefix_state
from mqstore.kernels.rocketmq.chain_walk import SELECT_ONE_CYCLE, select_one
from mqstore.storage.rocketmq.index import IndexService

LONG_MAX = 2**63 - 1
KEY_TEXT = st.text(st.characters(min_codepoint=32, max_codepoint=126), min_size=0, max_size=12)


def _walk_both(buf: np.ndarray, slots: int, items: int, header: IndexHeader, topic: str, key: str, max_num: int,
               begin: int, end: int, select_one: Any = select_one) -> None:  # fmt: skip
    f = IndexFileBuffer(memoryview(buf), slots, items, load=False)
    f.header = header
    try:
        exp: list[int] | None = []
        f.select_by_hash(exp, index_key_hash(f"{topic}#{key}"), max_num, begin, end)  # type: ignore[arg-type]
    except CorruptIndexError:
        exp = None
    w = word_view(buf)
    assert w is not None
    for size in (64, 1):
        out = np.empty(size, np.int64)
        n = select_one(w, slots, items, header.begin_timestamp, header.index_count, hash_prefix_state(f"{topic}#"),
                       key.encode("ascii"), -1, max_num, begin, end, out)  # fmt: skip
        if exp is None:
            assert n == SELECT_ONE_CYCLE
        elif n >= 0:
            assert out[:n].tolist() == exp
        else:
            assert size < len(exp)  # only "no room" may differ, and only with a too-small buffer
        # the pre-hashed entry point gives the same answer
        n2 = select_one(w, slots, items, header.begin_timestamp, header.index_count, 0, b"",
                        index_key_hash(f"{topic}#{key}"), max_num, begin, end, out)  # fmt: skip
        assert n2 == n


@pytest.mark.parametrize("one", twins("rocketmq.select_one"))
@settings(max_examples=150, deadline=None)
@given(st.integers(1, 7), st.integers(2, 30), st.lists(st.tuples(KEY_TEXT, st.integers(0, 5000)), max_size=40),
       st.lists(KEY_TEXT, min_size=1, max_size=6), st.integers(0, 5),
       st.sampled_from([(0, LONG_MAX), (1_700_000_001_000, 1_700_000_003_000), (1_800_000_000_000, LONG_MAX)]))  # fmt: skip
def test_select_one_matches_reference_on_built_files(one: Any, slots: int, items: int, puts: list[tuple[str, int]],
                                                     queries: list[str], max_num: int,
                                                     window: tuple[int, int]) -> None:  # fmt: skip
    buf = np.zeros(index_file_size(slots, items), np.uint8)
    f = IndexFileBuffer(memoryview(buf), slots, items, load=False)
    for i, (key, dt) in enumerate(puts):
        if not f.put_key(f"T#{key}", 1000 + i * 37, 1_700_000_000_000 + dt):
            break
    for key in queries + [k for k, _ in puts[:3]]:
        _walk_both(buf, slots, items, f.header, "T", key, max_num, *window, select_one=one)


@settings(max_examples=200, deadline=None)
@given(st.integers(1, 8), st.integers(2, 12), st.data())
def test_select_one_matches_reference_on_garbage(slots: int, items: int, data: st.DataObject) -> None:
    size = index_file_size(slots, items)
    buf = np.frombuffer(bytearray(data.draw(st.binary(min_size=size, max_size=size))), np.uint8)
    header = IndexHeader(data.draw(st.integers(0, 10**13)), 0, 0, 0, 0, data.draw(st.integers(1, items + 3)))
    begin = data.draw(st.sampled_from([0, -(2**40), 10**13]))
    for key in data.draw(st.lists(KEY_TEXT, min_size=1, max_size=4)):
        _walk_both(buf, slots, items, header, "T", key, 64, begin, LONG_MAX)


def _fill(s: MessageStore, n: int) -> list[str]:
    keys = [f"k{i % 97}" for i in range(n)]
    for i in range(n):
        s.put("TopicA" if i % 3 else "TopicB", b"x" * (i % 50), queue_id=i % 2, keys=[keys[i], f"u{i}"],
              born_timestamp=1_700_000_000_000 + i * 400)  # fmt: skip
    return keys


def _store(tmp_path: Path) -> MessageStore:
    cfg = StoreConfig(commit_log_file_size=1 << 16, hash_slot_num=13, index_num=60, background_services=False)
    return MessageStore.open(tmp_path / "s", cfg)


def test_select_offsets_matches_query_offset_across_files(tmp_path: Path) -> None:
    with _store(tmp_path) as s:
        _fill(s, 700)
        s.dispatch()
        idx = s.engine.index
        assert len(idx.files) > 10
        ts = [f.header.begin_timestamp for f in idx.files]
        windows = [(0, LONG_MAX), (ts[3], ts[6]), (ts[5] + 1500, ts[5] + 1500), (ts[-1] + 10**6, LONG_MAX)]
        for topic in ("TopicA", "TopicB", "TopicC"):
            for key in ["k0", "k5", "k96", "u10", "u699", "absent", "", "clé-ü", "键"]:
                for begin, end in windows:
                    for max_num in (0, 1, 3, 64, 10**6):
                        exp = idx.query_offset(topic, key, max_num, begin, end, cap=None).phy_offsets
                        assert idx.select_offsets(topic, key, max_num, begin, end) == exp
                        api = s.query_offsets_broker(topic, key, max_num, begin, end)
                        assert api == idx.query_offset(topic, key, max_num, begin, end).phy_offsets
        files = list(idx.files)
    assert all(f.mm.closed for f in files)  # the cached query views do not keep mappings open


@pytest.mark.parametrize("files", twins("rocketmq.select_files"))
def test_select_files_answers_query_offset(tmp_path: Path, files: Any) -> None:
    with _store(tmp_path) as s:
        _fill(s, 500)
        s.dispatch()
        idx = s.engine.index
        plan = idx._make_plan()
        assert plan is not None and len(idx.files) > 5
        ts = [f.header.begin_timestamp for f in idx.files]
        for key in ["k0", "k5", "u10", "absent", ""]:
            seed = ~hash_prefix_state("TopicA#")
            for begin, end in ((0, LONG_MAX), (ts[2], ts[4])):
                for max_num in (0, 1, 3, 64):
                    exp = idx.query_offset("TopicA", key, max_num, begin, end, cap=None).phy_offsets
                    out = np.empty(64, np.int64)
                    n = files(plan[1], seed, key.encode("ascii"), max_num, begin, end, out)
                    assert out[:n].tolist() == exp
                    pre = files(plan[1], index_key_hash(f"TopicA#{key}"), b"", max_num, begin, end, out)
                    assert pre == n and out[:n].tolist() == exp
                    if len(exp) > 1:  # too small an output buffer is reported, not overrun
                        assert files(plan[1], seed, key.encode("ascii"), max_num, begin, end, out[:1]) == -2


def test_select_offsets_large_result_grows_buffer(tmp_path: Path) -> None:
    cfg = StoreConfig(commit_log_file_size=1 << 20, hash_slot_num=50, index_num=2000, background_services=False)
    with MessageStore.open(tmp_path / "s", cfg) as s:
        for _ in range(300):
            s.put("T", b"b", keys="same")
        s.dispatch()
        idx = s.engine.index
        got = idx.select_offsets("T", "same", 10**9, 0, LONG_MAX)
        assert len(got) == 300 and got == sorted(got, reverse=True)
        assert got == idx.query_offset("T", "same", 10**9, 0, LONG_MAX, cap=None).phy_offsets
        assert len(s.query_offsets_broker("T", "same", 1000)) == 64  # broker cap


def test_select_offsets_reports_a_cycle(tmp_path: Path) -> None:
    cfg = StoreConfig(commit_log_file_size=1 << 20, hash_slot_num=4, index_num=100, background_services=False)
    with MessageStore.open(tmp_path / "s", cfg) as s:
        for _ in range(5):
            s.put("T", b"b", keys="a")
        s.dispatch()
        idx = s.engine.index
        f = idx.files[-1]
        item = f.buffer.slot_value(index_key_hash("T#a"))  # newest item of the chain
        prev = f.buffer.read_item(item)[3]
        assert prev > 0
        prev_pos = 40 + 4 * 4 + prev * 20 + 16
        f.mm[prev_pos : prev_pos + 4] = item.to_bytes(4, "big")  # item -> prev -> item -> ...
        with pytest.raises(CorruptIndexError):
            idx.query_offset("T", "a", 64, 0, LONG_MAX)
        with pytest.raises(CorruptIndexError):
            s.query_offsets_broker("T", "a")


def test_query_offsets_broker_checks_arguments(tmp_path: Path) -> None:
    with _store(tmp_path) as s:
        _fill(s, 10)
        with pytest.raises(InvalidTopicError):
            s.query_offsets_broker("bad topic/..", "k1")
        with pytest.raises(InvalidTopicError):
            s.query_offsets_broker("bad topic/..", "k1")  # still raised once the valid topics are remembered
        with pytest.raises(InvalidKeyError):
            s.query_offsets_broker("TopicA", 5)  # type: ignore[arg-type]
        assert s.query_offsets_broker("TopicA", "k1") == s.engine.index.query_offset("TopicA", "k1", 64, 0, LONG_MAX).phy_offsets


@settings(max_examples=60, deadline=None)
@given(st.integers(1, 9), st.integers(2, 40), st.data())
def test_select_many_word_paths_match_reference(slots: int, items: int, data: st.DataObject) -> None:
    from mqstore.kernels.rocketmq.chain_walk import select_many, select_many_py
    from mqstore.kernels.rocketmq.index_build import header_array

    size = index_file_size(slots, items)
    if data.draw(st.booleans()):  # garbage: corrupt chains must be reported the same way by every path
        buf = np.frombuffer(bytearray(data.draw(st.binary(min_size=size, max_size=size))), np.uint8)
        header = np.array([data.draw(st.integers(0, 10**13)), 0, 0, 0, 0, data.draw(st.integers(1, items))], np.int64)
    else:
        buf = np.zeros(size, np.uint8)
        f = IndexFileBuffer(memoryview(buf), slots, items, load=False)
        for i, k in enumerate(data.draw(st.lists(st.integers(0, 30), max_size=items))):
            f.put_hash(k, 100 + i, 1_700_000_000_000 + 700 * i)
        header = header_array(f.header)
    keys = np.array(data.draw(st.lists(st.integers(0, 40), min_size=0, max_size=70)), np.int32)
    max_num = data.draw(st.integers(0, 6))
    begin, end = data.draw(st.sampled_from([(0, LONG_MAX), (1_700_000_002_000, 1_700_000_009_000)]))
    try:
        exp = select_many_py(buf, slots, items, header, keys, max_num, begin, end)
    except CorruptIndexError:
        exp = None
    variants = [dict(words=False), dict(threads=1, lanes=1), dict(threads=1, lanes=32), dict(threads=2, lanes=3),
                dict(threads=3, lanes=16, sort_slots=True)]  # fmt: skip
    stopped = []
    for kw in variants:
        stopped.append(select_many(buf, slots, items, header, keys, max_num, begin, end, on_corrupt="stop", **kw))
        if exp is None:
            continue
        got = select_many(buf, slots, items, header, keys, max_num, begin, end, **kw)
        assert np.array_equal(got[0], exp[0]) and np.array_equal(got[1], exp[1]), kw
    for other in stopped[1:]:
        assert np.array_equal(other[0], stopped[0][0]) and np.array_equal(other[1], stopped[0][1])


@pytest.mark.parametrize("index_hash_keys", twins("javahash.index_hash_keys"))
@settings(max_examples=100, deadline=None)
@given(st.sampled_from(["T", "TopicTest", "%RETRY%g"]), st.lists(st.text(max_size=10), max_size=20))
def test_index_hash_keys_matches_scalar_hash(index_hash_keys: Any, topic: str, keys: list[str]) -> None:
    got = index_hash_keys(topic, keys)
    assert got.dtype == np.int32
    assert got.tolist() == [index_key_hash(f"{topic}#{k}") for k in keys]


def test_query_offsets_columns_match_single_queries(tmp_path: Path) -> None:
    with _store(tmp_path) as s:
        keys = _fill(s, 400)
        queries = [*dict.fromkeys(keys), "u7", "u399", "absent", "", "键"]
        for topic in ("TopicA", "TopicB"):
            for max_num in (1, 2, 64):
                cols = s.query_offsets_columns(topic, queries, max_num)
                assert len(cols) == len(queries)
                lists = cols.to_lists()
                assert lists == s.query_offsets_many(topic, queries, max_num)
                for i, k in enumerate(queries):
                    assert lists[i] == cols[i] == s.query_offsets_broker(topic, k, max_num)
                assert cols.key_index.tolist() == [i for i, v in enumerate(lists) for _ in v]
        with pytest.raises(InvalidKeyError):
            s.query_offsets_columns("TopicA", ["a", 3])  # type: ignore[list-item]
        with pytest.raises(InvalidKeyError):
            s.query_offsets_columns("TopicA", ["a", None], 0)  # type: ignore[list-item]
        assert len(s.query_offsets_columns("TopicA", ("k1", "k2"))) == 2


def _candidates_reference(idx: IndexService, topic: str, key: str, begin: int, end: int) -> list[int]:
    """The pure-Python candidate walk (``select_by_hash`` per file) that ``candidates`` replaced."""
    key_hash = index_key_hash(f"{topic}#{key}")
    wbegin = max(0, begin - 1000)
    found: list[int] = []
    for f in reversed(idx.files):
        h = f.header
        if h.index_count <= 1:
            continue
        if not f.buffer.is_time_matched(wbegin, end):
            if h.end_timestamp < wbegin:
                break
            continue
        f.buffer.select_by_hash(found, key_hash, LONG_MAX, wbegin, end)
        if h.begin_timestamp < wbegin:
            break
    return found


def test_candidates_match_reference_walk(tmp_path: Path) -> None:
    with _store(tmp_path) as s:
        _fill(s, 500)
        s.dispatch()
        idx = s.engine.index
        ts = [f.header.begin_timestamp for f in idx.files]
        for topic in ("TopicA", "TopicB"):
            for key in ["k0", "k13", "u9", "u499", "absent", "键"]:
                for begin, end in ((0, LONG_MAX), (ts[2], ts[5]), (ts[4] + 999, ts[4] + 999)):
                    assert list(idx.candidates(topic, key, begin, end)) == _candidates_reference(idx, topic, key, begin,
                                                                                                  end)  # fmt: skip
        msgs = s.query_by_key("TopicA", "k1")
        assert msgs and all("k1" in m.keys for m in msgs)
