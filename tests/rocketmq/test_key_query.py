"""``MessageStore.query_by_key``'s common case in one native call (``key_match.KeyQuery``, bound
to the store by its first native query) against the record-by-record reference path and against
the whole Python method: many keys (hash collisions, missing keys, non-ASCII), many IndexFiles and
CommitLog segments, time windows, caps, argument shapes it leaves to Python (same errors), a
writable store's pending records, a closed store, deleted files and a DLedger CommitLog."""

from __future__ import annotations

import math
import time
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from mqstore import MessageStore, StoreConfig
from mqstore.api import rocketmq as api
from mqstore.errors import InvalidArgumentError
from mqstore.formats.rocketmq.javahash import index_key_hash
from mqstore.kernels.rocketmq import key_match

LONG_MAX = 2**63 - 1
BASE_TS = 1_700_000_000_000

pytestmark = pytest.mark.skipif(key_match.KeyQuery is None, reason="the native query module is not built or not selected")


def _store(tmp_path: Path, **kw: Any) -> MessageStore:
    cfg = StoreConfig(commit_log_file_size=1 << 15, hash_slot_num=13, index_num=60, background_services=False)
    return MessageStore.open(tmp_path / "s", cfg, **kw)


def _colliding(i: int) -> tuple[str, str]:
    """Two keys whose ``topic#key`` Java hashes are equal ("Aa" and "BB" hash alike)."""
    return f"c{i}Aa", f"c{i}BB"


def _fill(s: MessageStore, n: int) -> None:
    for i in range(n):
        a, b = _colliding(i % 13)
        keys = [f"k{i % 97}", f"u{i}", a if i % 2 else b] + (["clé-ü", "键"] if i % 11 == 0 else [])
        s.put("TopicA" if i % 3 else "TopicB", b"x" * (i % 50), queue_id=i % 2, keys=keys,
              born_timestamp=BASE_TS + i * 400)  # fmt: skip


def _keys() -> list[str]:
    out = [f"k{i}" for i in range(0, 110, 3)] + [f"u{i}" for i in range(0, 760, 23)]
    out += [k for i in range(15) for k in _colliding(i)]
    out += ["absent", "clé-ü", "键", "k", "u", "k1 u1", "a\ufffdb", "\ud800x", "x" * 300]
    return out


def _windows(s: MessageStore) -> list[tuple[int | None, int | None]]:
    ts = [f.header.begin_timestamp for f in s.engine.index.files]
    return [(None, None), (ts[3], ts[6]), (ts[5] + 1500, ts[5] + 1500), (ts[-1] + 10**6, None), (None, ts[4]),
            (-5, 0), (ts[2], None)]  # fmt: skip


def _reference(s: MessageStore, topic: str, key: str, b: int | None, e: int | None, mn: int | None) -> list[Any]:
    return s._query_by_key_records(topic, key, 0 if b is None else b, LONG_MAX if e is None else e, mn)


def _bound(s: MessageStore) -> Any:
    s.query_by_key("TopicA", "k1")
    kq = s._key_query
    assert type(kq) is key_match.KeyQuery
    return kq


def test_colliding_keys_collide() -> None:
    for i in range(15):
        a, b = _colliding(i)
        assert index_key_hash(f"TopicA#{a}") == index_key_hash(f"TopicA#{b}")


def test_key_query_equals_reference_over_many_keys(tmp_path: Path) -> None:
    with _store(tmp_path) as s:
        _fill(s, 760)
        s.dispatch()
        assert len(s.engine.index.files) > 10 and len(s.engine.commit_log.queue.files) >= 2
        kq = _bound(s)
        nonempty = 0
        for topic in ("TopicA", "TopicB", "TopicC"):
            for key in _keys():
                for b, e in _windows(s):
                    exp = _reference(s, topic, key, b, e, None)
                    nonempty += bool(exp)
                    assert s.query_by_key(topic, key, b, e) == exp  # (the first call validates the topic)
                    got = kq(topic, key, b, e, None)
                    if key in ("a\ufffdb", "\ud800x"):  # left to Python: a fallback code
                        assert got == key_match.QUERY_FALLBACK
                    else:
                        assert got == exp, (topic, key, b, e)
                    for mn in (1, 2, 7):
                        assert s.query_by_key(topic, key, b, e, mn) == exp[:mn]
                        assert s._query_by_key_any(topic, key, b, e, mn) == exp[:mn]
        assert nonempty > 300
        # the colliding keys share chains but never each other's messages
        a, b = _colliding(3)
        ga, gb = s.query_by_key("TopicA", a), s.query_by_key("TopicA", b)
        assert ga and gb and not {m.commit_log_offset for m in ga} & {m.commit_log_offset for m in gb}
        assert all(a in m.keys for m in ga) and all(b in m.keys for m in gb)


def test_key_query_newest_first_with_equal_times(tmp_path: Path) -> None:
    with _store(tmp_path) as s:
        for _ in range(40):
            s.put("TopicA", b"z", keys=["same"], born_timestamp=BASE_TS)
        s.dispatch()
        kq = _bound(s)
        got = kq("TopicA", "same")
        assert got == _reference(s, "TopicA", "same", None, None, None) and len(got) == 40
        assert [m.commit_log_offset for m in got] == sorted((m.commit_log_offset for m in got), reverse=True)


def _outcome(f: Any) -> tuple[str, Any]:
    try:
        return "ok", f()
    except Exception as exc:  # (the test compares whatever is raised)
        return type(exc).__name__, str(exc)


BAD_ARGS: list[tuple[Any, ...]] = [
    ("", "k1"), ("Topic A", "k1"), ("T" * 300, "k1"), (b"TopicA", "k1"), (None, "k1"), ("TopicA", ""),
    ("TopicA", b"k1"), ("TopicA", None), ("TopicA", 5), ("TopicA", "k1", None, None, 0), ("TopicA", "k1", None, None, -3),
    ("TopicA", "k1", None, None, True), ("TopicA", "k1", None, None, 2.5), ("TopicA", "k1", None, None, np.int64(2)),
    ("TopicA", "k1", 2.5), ("TopicA", "k1", "0"), ("TopicA", "k1", True, None), ("TopicA", "k1", np.int64(0), None),
    ("TopicA", "k1", None, 2**64), ("TopicA", "k1", -(2**70)), ("TopicA", "k1", None, math.inf),
    ("TopicA", "k1", None, None, 2**70),
]  # fmt: skip


@pytest.mark.parametrize("args", BAD_ARGS, ids=[repr(a)[:40] for a in BAD_ARGS])
def test_other_argument_shapes_answer_as_the_python_method(tmp_path: Path, args: tuple[Any, ...]) -> None:
    """Arguments of another shape: KeyQuery leaves them to the whole method (an int answer), which
    raises or answers exactly as the method does without KeyQuery."""
    with _store(tmp_path) as s:
        _fill(s, 120)
        s.dispatch()
        kq = _bound(s)
        got = kq(*args)
        assert type(got) is int
        with_kq = _outcome(lambda: s.query_by_key(*args))
        s._key_query = api._no_key_query
        assert with_kq == _outcome(lambda: s.query_by_key(*args))
        assert with_kq == _outcome(lambda: s._query_by_key_any(*args, *(None,) * (5 - len(args))))


def test_keywords_and_new_topics_go_through_python_first(tmp_path: Path) -> None:
    with _store(tmp_path) as s:
        _fill(s, 120)
        s.dispatch()
        kq = _bound(s)
        assert kq(topic="TopicA", key="k1") == key_match.QUERY_SLOW
        assert s.query_by_key(topic="TopicA", key="k1", max_num=1) == _reference(s, "TopicA", "k1", None, None, 1)
        api._QUERY_TOPICS_OK.discard("TopicB")
        assert kq("TopicB", "k0") == key_match.QUERY_SLOW  # not yet validated: Python validates it
        exp = _reference(s, "TopicB", "k0", None, None, None)
        assert exp and s.query_by_key("TopicB", "k0") == exp
        assert kq("TopicB", "k0") == exp


def test_writable_store_dispatches_before_the_query(tmp_path: Path) -> None:
    """A put's record is found by the next query without an explicit dispatch, including records
    that open new IndexFiles and CommitLog segments (stale plans made again)."""
    with _store(tmp_path) as s:
        _fill(s, 30)
        kq = _bound(s)
        for i in range(300):
            s.put("TopicA", b"w" * 300, keys=[f"w{i}", "wall"], born_timestamp=BASE_TS + 10**6 + i)
            got = s.query_by_key("TopicA", f"w{i}")
            assert [m.keys for m in got] == [[f"w{i}", "wall"]]
        exp = _reference(s, "TopicA", "wall", None, None, None)
        assert len(exp) == 300 and s.query_by_key("TopicA", "wall") == exp
        assert s._key_query is kq
        assert len(s.engine.index.files) > 5 and len(s.engine.commit_log.queue.files) > 2


def test_read_only_store_and_closed_store(tmp_path: Path) -> None:
    from mqstore.errors import StoreClosedError

    with _store(tmp_path) as s:
        _fill(s, 300)
    with _store(tmp_path, read_only=True) as r:
        kq = _bound(r)
        for key in _keys():
            assert r.query_by_key("TopicA", key) == _reference(r, "TopicA", key, None, None, None)
    assert kq("TopicA", "k1") == key_match.QUERY_SLOW
    with pytest.raises(StoreClosedError):
        r.query_by_key("TopicA", "k1")


def test_deleted_files_and_truncated_log(tmp_path: Path) -> None:
    """Expired CommitLog segments and IndexFiles deleted between queries, and a CommitLog cut back:
    the native call sees the new file lists (its plans are checked on every call)."""
    with _store(tmp_path) as s:
        _fill(s, 760)
        s.dispatch()
        _bound(s)
        keys = _keys()
        before = {k: s.query_by_key("TopicA", k) for k in keys}
        cl = s.engine.commit_log
        removed = s.engine.delete_expired(force=True, now_ms=int(time.time() * 1000) + 10**10)
        assert removed > 0
        for k in keys:
            exp = _reference(s, "TopicA", k, None, None, None)
            assert s.query_by_key("TopicA", k) == exp
            assert all(m.commit_log_offset >= cl.min_offset for m in exp)
            assert len(exp) <= len(before[k])


def test_dledger_commitlog_stays_on_the_python_path(tmp_path: Path) -> None:
    from click.testing import CliRunner

    from mqstore.cli.main import cli

    from .dledger_support import CQ_FILE, ITEMS, SLOTS, build_dledger_store, make_records

    root = tmp_path / "dl"
    build_dledger_store(root, make_records(120))
    geometry = ["--cq-file-size", str(CQ_FILE), "--slots", str(SLOTS), "--items", str(ITEMS)]
    r = CliRunner().invoke(cli, ["rocketmq", "rebuild-index", str(root), *geometry], catch_exceptions=False)
    assert r.exit_code == 0, r.output
    with MessageStore.open(root, read_only=True) as s:
        seen = 0
        for key in [f"k{i}" for i in range(40)] + ["shared1", "UNIQ00000003", "absent"]:
            for topic in ("TopicA", "TopicB"):
                got = s.query_by_key(topic, key)
                assert got == s._query_by_key_records(topic, key, 0, LONG_MAX, None)
                seen += len(got)
        assert seen > 40 and s._key_query is api._no_key_query


def test_key_query_keeps_no_references_and_releases_the_mappings(tmp_path: Path) -> None:
    import gc
    import sys

    with _store(tmp_path) as s:
        _fill(s, 300)
        s.dispatch()
        kq = _bound(s)
        topic, key = "".join(["Topic", "A"]), "".join(["k", "1"])
        s.query_by_key(topic, key)
        refs = (sys.getrefcount(topic), sys.getrefcount(key))
        for _ in range(200):
            got = kq(topic, key, None, None, 3)
            assert type(got) is list and len(got) == 3
            assert kq(topic, key, 10**18, None, None) == []
        del got
        assert (sys.getrefcount(topic), sys.getrefcount(key)) == refs
        segs, ixf = list(s.engine.commit_log.queue.files), list(s.engine.index.files)
    assert all(f._mm is None for f in segs) and all(f._words is None for f in ixf)
    assert kq(topic, key) == key_match.QUERY_SLOW
    del s, kq
    gc.collect()


def test_queries_beside_a_putting_thread_and_the_reput_service(tmp_path: Path) -> None:
    """Queries while another thread puts (background services on: the reput thread dispatches,
    segments and IndexFiles roll): every key put before a query is found by it, as the reference
    finds it."""
    import threading

    cfg = StoreConfig(commit_log_file_size=1 << 15, hash_slot_num=13, index_num=60)
    with MessageStore.open(tmp_path / "bg", cfg) as s:
        s.put("TopicA", b"0", keys=["p0"])
        assert s.query_by_key("TopicA", "p0") and type(s._key_query) is key_match.KeyQuery
        done = threading.Event()
        errors: list[BaseException] = []

        def putter() -> None:
            try:
                for i in range(1, 600):
                    s.put("TopicA", b"p" * (i % 90), keys=[f"p{i}", "pall"])
            except BaseException as exc:  # pragma: no cover - reported below
                errors.append(exc)
            finally:
                done.set()

        t = threading.Thread(target=putter)
        t.start()
        checked = 0
        while not done.is_set() or checked < 5:
            got = s.query_by_key("TopicA", "pall")
            assert [m.keys[0] for m in got] == [f"p{i}" for i in range(len(got), 0, -1)]
            checked += 1
        t.join()
        assert not errors
        assert s.query_by_key("TopicA", "pall") == _reference(s, "TopicA", "pall", None, None, None)
        assert len(s.query_by_key("TopicA", "pall")) == 599


def test_bounds_outside_int64_are_clamped_and_bad_ones_typed(tmp_path: Path) -> None:
    """Time bounds and caps beyond int64 answer as the widest window / no cap (every store time is
    an int64); bounds int() cannot take, and caps that are not integers, raise InvalidArgumentError."""
    with _store(tmp_path) as s:
        _fill(s, 120)
        s.dispatch()
        every = s.query_by_key("TopicA", "k1")
        assert every
        assert s.query_by_key("TopicA", "k1", -(2**70), 2**64) == every
        assert s.query_by_key("TopicA", "k1", None, None, 2**70) == every
        assert s.query_by_key("TopicA", "k1", 2**64) == []
        for args in [(math.inf,), (None, math.inf), (None, -math.inf), (math.nan,), ("soon",), (object(),),
                     (None, None, 2.5), (None, None, "3")]:
            with pytest.raises(InvalidArgumentError):
                s.query_by_key("TopicA", "k1", *args)
