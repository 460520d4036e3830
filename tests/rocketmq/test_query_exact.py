"""The exact single-key query in one compiled call (``exact_key_files``) against its twin and
against the record-by-record path, on stores with many IndexFiles and CommitLog segments."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pytest

from kernel_twins import twins
from mqstore import MessageStore, StoreConfig
from mqstore.errors import CorruptDataError
from mqstore.formats.rocketmq.javahash import index_key_hash
from mqstore.kernels.rocketmq.key_match import EXACT_ROOM, MATCH_COLUMNS, PRM_SIZE

LONG_MAX = 2**63 - 1
KEYS = ["k0", "k5", "k96", "u10", "u699", "absent", "clé-ü", "键", "k1", "u0"]


def _store(tmp_path: Path) -> MessageStore:
    cfg = StoreConfig(commit_log_file_size=1 << 15, hash_slot_num=13, index_num=60, background_services=False)
    return MessageStore.open(tmp_path / "s", cfg)


def _fill(s: MessageStore, n: int) -> None:
    for i in range(n):
        keys = [f"k{i % 97}", f"u{i}"] + (["clé-ü", "键"] if i % 11 == 0 else [])
        s.put("TopicA" if i % 3 else "TopicB", b"x" * (i % 50), queue_id=i % 2, keys=keys,
              born_timestamp=1_700_000_000_000 + i * 400)  # fmt: skip


def _windows(s: MessageStore) -> list[tuple[int, int]]:
    ts = [f.header.begin_timestamp for f in s.engine.index.files]
    return [(0, LONG_MAX), (ts[3], ts[6]), (ts[5] + 1500, ts[5] + 1500), (ts[-1] + 10**6, LONG_MAX)]


def _call(impl: Any, s: MessageStore, topic: str, key: str, b: int, e: int, rows: int) -> tuple[int, list[Any]]:
    idx, cl = s.engine.index, s.engine.commit_log
    plan = idx._make_plan()
    assert plan is not None
    _, table = cl.segment_table()
    if key.isascii():
        seed = ~idx._prefix_state(topic)
    else:
        seed = index_key_hash(f"{topic}#{key}")
    prm = np.array([seed, max(0, b - 1000), e, cl.min_offset, cl.max_offset, b, e], np.int64)
    assert len(prm) == PRM_SIZE
    out = np.zeros((rows, MATCH_COLUMNS), np.int64)
    n = impl(plan[1], table, topic.encode(), key.encode(), prm, out)
    return n, out[: max(n, 0)].tolist()


@pytest.mark.parametrize("impl", twins("rocketmq.exact_key_files"))
def test_exact_key_files_twins_agree(tmp_path: Path, impl: Any) -> None:
    from mqstore.kernels.rocketmq.key_match import exact_key_files_py

    with _store(tmp_path) as s:
        _fill(s, 700)
        s.dispatch()
        assert len(s.engine.index.files) > 10 and len(s.engine.commit_log.queue.files) >= 2
        for topic in ("TopicA", "TopicB", "TopicC"):
            for key in KEYS:
                for b, e in _windows(s):
                    n, rows = _call(impl, s, topic, key, b, e, 64)
                    assert (n, rows) == _call(exact_key_files_py, s, topic, key, b, e, 64)
                    if n > 1:  # a too small output asks for more room
                        assert _call(impl, s, topic, key, b, e, 1)[0] == EXACT_ROOM


def test_query_by_key_matches_record_path(tmp_path: Path) -> None:
    with _store(tmp_path) as s:
        _fill(s, 700)
        s.dispatch()
        for topic in ("TopicA", "TopicB", "TopicC"):
            for key in KEYS:
                for b, e in _windows(s):
                    exp = s._query_by_key_records(topic, key, b, e, None)
                    assert s.query_by_key(topic, key, b, e) == exp
                    assert s.query_by_key(topic, key, b, e, max_num=2) == exp[:2]
        assert len(s.query_by_key("TopicA", "k1")) > 3
        assert s.query_by_keys("TopicA", ["k1", "k5"])["k5"] == s.query_by_key("TopicA", "k5")


def test_query_by_key_messages_parse_properties_lazily(tmp_path: Path) -> None:
    """The messages of the compiled path leave their properties unparsed until looked at; then
    they are the record path's, field for field."""
    from dataclasses import fields

    from mqstore.formats.rocketmq.record import _props_get

    with _store(tmp_path) as s:
        _fill(s, 120)
        for key in ("k5", "u11", "clé-ü"):
            got = s.query_by_key("TopicA", key)
            assert got and all(_props_get(m) is None for m in got)
            exp = s._query_by_key_records("TopicA", key, 0, LONG_MAX, None)
            for m, r in zip(got, exp, strict=True):
                assert [getattr(m, f.name) for f in fields(m)] == [getattr(r, f.name) for f in fields(r)]
                assert key in m.keys or m.uniq_key == key


def test_query_by_key_corrupt_body_raises_as_before(tmp_path: Path) -> None:
    with _store(tmp_path) as s:
        _fill(s, 50)
        s.dispatch()
        m = s.query_by_key("TopicA", "u10")[0]
        mf = s.engine.commit_log.segment_for(m.commit_log_offset)
        pos = m.commit_log_offset - mf.file_from_offset + m.size - 1 - 200  # inside the properties or body
        mf.mm[pos] ^= 0xFF
        mf.mm[m.commit_log_offset - mf.file_from_offset + 8] ^= 0x01  # the stored body CRC
        with pytest.raises(CorruptDataError):
            s._query_by_key_records("TopicA", "u10", 0, LONG_MAX, None)
        with pytest.raises(CorruptDataError):
            s.query_by_key("TopicA", "u10")


def test_segment_table_follows_segments(tmp_path: Path) -> None:
    with _store(tmp_path) as s:
        _fill(s, 300)
        cl = s.engine.commit_log
        files, table = cl.segment_table()
        assert [int(r[2]) for r in table] == [f.file_from_offset for f in cl.queue.files]
        _fill(s, 300)  # more segments: a new table
        files2, table2 = cl.segment_table()
        assert len(files2) > len(files) and int(table2[-1, 1]) == cl.queue.files[-1].wrote_position
        segs = list(cl.queue.files)
    assert all(f._mm is None for f in segs)  # closing drops the table first: the mappings close


def test_select_files_cycle_code_agrees() -> None:
    from mqstore.kernels.rocketmq import chain_walk, key_match

    assert key_match.SELECT_FILES_CYCLE == chain_walk.SELECT_FILES_CYCLE


def _chain_head(s: MessageStore, topic: str, key: str, row: int) -> tuple[np.ndarray, int, int]:
    """The writable bytes of IndexFile ``row`` of the query table (newest first), where its items
    start and the head item number of the chain of ``topic#key`` there."""
    import ctypes

    idx = s.engine.index
    plan = idx._make_plan()
    assert plan is not None
    addr, words, slots, _ = (int(v) for v in plan[1][row])
    w = np.ctypeslib.as_array((ctypes.c_uint32 * words).from_address(addr))
    u8 = w.view(np.uint8)
    h = index_key_hash(f"{topic}#{key}")
    slot = 40 + (h % slots) * 4
    head = int.from_bytes(u8[slot : slot + 4].tobytes(), "big")
    return u8, 40 + slots * 4, head


@pytest.mark.parametrize("impl", twins("rocketmq.exact_key_files"))
def test_exact_key_files_cycle_and_unclean(tmp_path: Path, impl: Any) -> None:
    """A looping chain gives ``SELECT_FILES_CYCLE - i``, a candidate that is not a clean record
    ``EXACT_UNCLEAN``, on every implementation alike."""
    from mqstore.kernels.rocketmq.key_match import EXACT_UNCLEAN, SELECT_FILES_CYCLE, exact_key_files_py

    with _store(tmp_path) as s:
        _fill(s, 700)
        s.dispatch()
        for row in range(len(s.engine.index.files)):  # a file where the chain has two items or more
            u8, items, head = _chain_head(s, "TopicA", "k1", row)
            prev_at = items + head * 20 + 16
            prev = int.from_bytes(u8[prev_at : prev_at + 4].tobytes(), "big") if head > 0 else 0
            if prev > 0:
                break
        assert prev > 0
        at = items + prev * 20 + 16  # the older item links back to the head: a loop
        saved = u8[at : at + 4].copy()
        u8[at : at + 4] = np.frombuffer(head.to_bytes(4, "big"), np.uint8)
        n, _ = _call(impl, s, "TopicA", "k1", 0, LONG_MAX, 64)
        assert n == SELECT_FILES_CYCLE - row == _call(exact_key_files_py, s, "TopicA", "k1", 0, LONG_MAX, 64)[0]
        u8[at : at + 4] = saved
        # a candidate of the chain that is no record start (its phyOffset moved by one byte)
        h = index_key_hash("TopicA#k1")
        cur = 0
        for row in range(len(s.engine.index.files)):  # an item of the key's own hash
            u8, items, cur = _chain_head(s, "TopicA", "k1", row)
            while cur > 0 and int.from_bytes(u8[items + cur * 20 : items + cur * 20 + 4].tobytes(), "big") != h:
                cur = int.from_bytes(u8[items + cur * 20 + 16 : items + cur * 20 + 20].tobytes(), "big")
            if cur > 0:
                break
        assert cur > 0
        off_at = items + cur * 20 + 4
        off = int.from_bytes(u8[off_at : off_at + 8].tobytes(), "big")
        u8[off_at : off_at + 8] = np.frombuffer((off + 1).to_bytes(8, "big"), np.uint8)
        n, _ = _call(impl, s, "TopicA", "k1", 0, LONG_MAX, 64)
        assert n == EXACT_UNCLEAN == _call(exact_key_files_py, s, "TopicA", "k1", 0, LONG_MAX, 64)[0]


def test_native_messages_are_the_python_builders(tmp_path: Path) -> None:
    """The messages the native builder fills in C are those of ``_messages_of_matches``: the same
    class, fields, equality, repr, pickling and lazily parsed properties."""
    import pickle
    import sys

    from mqstore.api import rocketmq as api
    from mqstore.formats.rocketmq.record import _props_get

    build = api._native_builder()
    if build is None:
        pytest.skip("the native query module is not built or not selected")
    with _store(tmp_path) as s:
        _fill(s, 300)
        idx, cl = s.engine.index, s.engine.commit_log
        topic = "".join(["Topic", "A"])  # a str of its own: its reference count is watched
        idx.exact_matches(topic, "k1", 0, LONG_MAX, cl, build)  # (the index caches the topic once)
        refs = sys.getrefcount(topic)
        for key in KEYS:
            got = idx.exact_matches(topic, key, 0, LONG_MAX, cl, build)
            rows, segments = idx.exact_matches(topic, key, 0, LONG_MAX, cl)
            exp = api._messages_of_matches(rows, segments, topic)
            assert [type(m) for m in got] == [type(m) for m in exp]
            assert all(_props_get(m) is None for m in got)
            assert [repr(m) for m in got] == [repr(m) for m in exp]
            assert got == exp and pickle.loads(pickle.dumps(got)) == exp
            assert got == s._query_by_key_records(topic, key, 0, LONG_MAX, None)
            del got, exp
        assert sys.getrefcount(topic) == refs


def _native_query() -> Any:
    from mqstore.api import rocketmq as api

    q = api._native_query()
    if q is None:
        pytest.skip("the native query module is not built or not selected")
    return q


def test_native_query_follows_new_files_and_segments(tmp_path: Path) -> None:
    """The whole query in one native call (``IndexService.exact_query``) against the record path
    while puts add CommitLog segments and IndexFiles between the queries (stale plans are
    detected by the call and made again), on odd keys (non-ASCII, U+FFFD, a lone surrogate)."""
    import sys

    q = _native_query()
    with _store(tmp_path) as s:
        idx, cl = s.engine.index, s.engine.commit_log
        keys = [*KEYS, "a\ufffdb", "\ud800x", "k" * 300]
        for i in range(700):
            s.put("TopicA", b"y" * (i % 40), keys=[f"k{i % 31}", f"u{i}"] + (["a\ufffdb"] if i % 7 == 0 else []))
            if i % 97 == 0:
                for key in keys:
                    got = s.query_by_key("TopicA", key)  # (dispatches first)
                    assert got == s._query_by_key_records("TopicA", key, 0, LONG_MAX, None)
                    assert s.query_by_key("TopicA", key, max_num=1) == got[:1]
        assert len(idx.files) > 10 and len(cl.queue.files) >= 2
        topic = "".join(["Topic", "A"])
        s.query_by_key(topic, "k1")
        refs = sys.getrefcount(topic)
        for key in keys:
            for b, e in _windows(s):
                exp = s._query_by_key_records(topic, key, b, e, None)
                got = idx.exact_query(topic, key, b, e, cl, -1, q)
                if key in ("a\ufffdb", "\ud800x"):  # keys the compiled comparison leaves to Python
                    assert got is None
                else:
                    assert got == exp
                assert s.query_by_key(topic, key, b, e) == exp
                assert list(s.iter_query_by_key(topic, key, b, e, max_num=2)) == exp[:2]
            del got, exp
        assert sys.getrefcount(topic) == refs
        segs = list(cl.queue.files)
        ixf = list(idx.files)
    assert all(f._mm is None for f in segs)  # the native query holds no mapping after it returns
    assert all(f._words is None for f in ixf)


def test_native_query_stale_plans_and_bad_arguments(tmp_path: Path) -> None:
    from mqstore.kernels.rocketmq import key_match

    q = _native_query()
    with _store(tmp_path) as s:
        _fill(s, 200)
        s.dispatch()
        idx, cl = s.engine.index, s.engine.commit_log
        args = ("TopicA", "k1", 0, LONG_MAX, -1)
        assert q(None, idx.files, None, cl.queue.files, *args) == key_match.QUERY_NEED_INDEX_PLAN
        idx._make_plan()
        assert q(idx._plan, idx.files, None, cl.queue.files, *args) == key_match.QUERY_NEED_SEGMENT_PLAN
        cl.segment_table()
        got = q(idx._plan, idx.files, cl._seg_plan, cl.queue.files, *args)
        assert got == s._query_by_key_records("TopicA", "k1", 0, LONG_MAX, None) and got
        assert q(idx._plan, idx.files[:-1], cl._seg_plan, cl.queue.files, *args) == key_match.QUERY_NEED_INDEX_PLAN
        assert q(idx._plan, idx.files, cl._seg_plan, [*cl.queue.files, None], *args) == key_match.QUERY_NEED_SEGMENT_PLAN
        assert q(idx._plan, idx.files, cl._seg_plan, cl.queue.files, "TopicA", "k1", 0, LONG_MAX, 1) == got[:1]
        with pytest.raises(TypeError):
            q(idx._plan, idx.files, cl._seg_plan, cl.queue.files, "TopicA", b"k1", 0, LONG_MAX, -1)
        with pytest.raises(TypeError):
            q(idx._plan, idx.files, cl._seg_plan, cl.queue.files, "TopicA", "k1", 0, LONG_MAX)
        with pytest.raises(OverflowError):
            q(idx._plan, idx.files, cl._seg_plan, cl.queue.files, "TopicA", "k1", 0, 2**64, -1)


def test_query_by_key_cycle_and_unclean(tmp_path: Path) -> None:
    """A looping chain raises ``CorruptIndexError`` naming the file, from the native query as from
    the record path; a candidate that is no record start sends the query down the record path."""
    from mqstore.errors import CorruptIndexError

    with _store(tmp_path) as s:
        _fill(s, 700)
        s.dispatch()
        exp = s._query_by_key_records("TopicA", "k1", 0, LONG_MAX, None)
        for row in range(len(s.engine.index.files)):
            u8, items, head = _chain_head(s, "TopicA", "k1", row)
            prev_at = items + head * 20 + 16
            prev = int.from_bytes(u8[prev_at : prev_at + 4].tobytes(), "big") if head > 0 else 0
            if prev > 0:
                break
        at = items + prev * 20 + 16
        saved = u8[at : at + 4].copy()
        u8[at : at + 4] = np.frombuffer(head.to_bytes(4, "big"), np.uint8)
        name = s.engine.index.files[len(s.engine.index.files) - 1 - row].name
        with pytest.raises(CorruptIndexError, match=name):
            s.query_by_key("TopicA", "k1")
        u8[at : at + 4] = saved
        assert s.query_by_key("TopicA", "k1") == exp


def test_chain_select_constants_agree() -> None:
    from mqstore.kernels.rocketmq import chain_select, chain_walk

    assert chain_select._SELECT_CYCLE == chain_walk.SELECT_CYCLE
