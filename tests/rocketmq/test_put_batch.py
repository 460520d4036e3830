"""The fast put paths (single ``put``, ``put_batch``, ``put_columns``) against the general
record-by-record path, and the compiled batch encoder against the record codec, byte for byte."""

from __future__ import annotations

import dataclasses
import datetime as dt
import struct
import zlib
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from kernel_twins import twins
from mqstore import MessageStore, StoreConfig
from mqstore.api.rocketmq import PutBatchResult, PutResult, _UniqKeyGenerator
from mqstore.errors import InvalidArgumentError, InvalidKeyError, InvalidTopicError, MessageTooLargeError
from mqstore.formats.rocketmq.record import (
    BORNHOST_V6_FLAG,
    STOREHOST_V6_FLAG,
    TRANSACTION_PREPARED_TYPE,
    TRANSACTION_ROLLBACK_TYPE,
    Host,
)
from mqstore.kernels.rocketmq.put import (
    RecordColumns,
    encode_records_bytes,
    queue_ranks,
    queue_ranks_py,
)

SMALL = dict(commit_log_file_size=16384, consume_queue_file_size=320, hash_slot_num=100, index_num=400,
             background_services=False, clock=lambda: 1_700_000_000_123)


# ----------------------------------------------------------------------------- kernel twin
def _host_row(h: Host) -> np.ndarray:
    raw = h.to_bytes()
    row = np.zeros(20, np.uint8)
    row[: len(raw) - 4] = np.frombuffer(raw[:-4], np.uint8)
    row[16:] = np.frombuffer(raw[-4:], np.uint8)
    return row


def _columns(msgs: list[dict[str, Any]], store: Host) -> RecordColumns:
    n = len(msgs)

    def buf(parts: list[bytes]) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        ln = np.array([len(p) for p in parts], np.int64)
        return np.frombuffer(b"".join(parts) or b"\0", np.uint8), np.cumsum(ln) - ln, ln

    bodies, boff, blen = buf([m["body"] for m in msgs])
    topics, toff, tlen = buf([m["topic"].encode() for m in msgs])
    props, poff, plen = buf([m["props"].encode() for m in msgs])
    born = [m["born"] for m in msgs]
    born_v6 = np.array([h.is_v6 for h in born], np.bool_)
    sys_flag = np.array([m["sys_flag"] for m in msgs], np.int64) & ~(BORNHOST_V6_FLAG | STOREHOST_V6_FLAG)
    sys_flag |= np.where(born_v6, BORNHOST_V6_FLAG, 0) | (STOREHOST_V6_FLAG if store.is_v6 else 0)
    return RecordColumns(
        bodies=bodies, body_off=boff, body_len=blen,
        body_crc=np.array([zlib.crc32(m["body"]) & 0x7FFFFFFF for m in msgs], np.int64),
        topics=topics, topic_off=toff, topic_len=tlen, props=props, props_off=poff, props_len=plen,
        v2=np.array([m["v2"] for m in msgs], np.bool_), queue_id=np.array([m["qid"] for m in msgs], np.int64),
        flag=np.array([m["flag"] for m in msgs], np.int64), queue_offset=np.array([m["qo"] for m in msgs], np.int64),
        sys_flag=sys_flag, born_ts=np.array([m["born_ts"] for m in msgs], np.int64),
        born_hosts=np.array([_host_row(h) for h in born], np.uint8).reshape(n, 20), born_v6=born_v6,
        store_host=_host_row(store), store_v6=store.is_v6,
        reconsume=np.array([m["reconsume"] for m in msgs], np.int64),
        prepared=np.array([m["prepared"] for m in msgs], np.int64),
    )


hosts = st.sampled_from([Host("127.0.0.1", 10911), Host("10.1.2.3", 0), Host.parse("[::1]:9876"),
                         Host.parse("[fe80::1:2]:65535")])
message = st.fixed_dictionaries({
    "body": st.binary(max_size=300),
    "topic": st.text(st.sampled_from("abcXYZ_-%|09"), min_size=1, max_size=140),
    "props": st.text(max_size=60),
    "v2": st.booleans(),
    "qid": st.integers(0, 2**31 - 1),
    "flag": st.integers(-(2**31), 2**31 - 1),
    "qo": st.integers(0, 2**62),
    "sys_flag": st.integers(0, 0xFF),
    "born_ts": st.integers(-(2**40), 2**62),
    "born": hosts,
    "reconsume": st.integers(0, 2**31 - 1),
    "prepared": st.integers(0, 2**62),
})


@pytest.mark.parametrize("encode_records_into", twins("rocketmq.encode_records_into"))
@given(st.lists(message, min_size=1, max_size=12), hosts, st.integers(0, 2**50), st.integers(0, 2**42))
@settings(max_examples=150, deadline=None)
def test_kernel_equals_record_codec(encode_records_into: Any, msgs: list[dict[str, Any]], store: Host, base: int,
                                    store_ts: int) -> None:
    for m in msgs:
        m["v2"] = m["v2"] or len(m["topic"]) > 127
    cols = _columns(msgs, store)
    sizes = cols.sizes()
    phys = base + np.cumsum(sizes) - sizes
    want = encode_records_bytes(cols, 0, len(msgs), phys, store_ts)
    out = np.full(int(sizes.sum()) + 16, 0xEE, np.uint8)
    end = encode_records_into(out, 8, cols, 0, len(msgs), sizes, phys, store_ts)
    assert end == 8 + len(want) == 8 + int(sizes.sum())
    assert out[8:end].tobytes() == want
    assert (out[:8] == 0xEE).all() and (out[end:] == 0xEE).all()
    # a sub-range lands at its own position
    if len(msgs) > 2:
        out2 = np.zeros(int(sizes[1:].sum()), np.uint8)
        encode_records_into(out2, 0, cols, 1, len(msgs), sizes, phys, store_ts)
        assert out2.tobytes() == encode_records_bytes(cols, 1, len(msgs), phys, store_ts)
        # columns that do not fit are refused before a byte is written (the copies are unchecked memcpy)
        short = np.full(int(sizes.sum()) - 1, 0xEE, np.uint8)
        with pytest.raises(ValueError):
            encode_records_into(short, 0, cols, 0, len(msgs), sizes, phys, store_ts)
        assert (short == 0xEE).all()
        bad = cols.body_len.copy()
        bad[-1] += 1 << 20  # a body length past the bodies buffer
        with pytest.raises(ValueError):
            encode_records_into(np.zeros(int(sizes.sum()) + (1 << 20), np.uint8), 0,
                                dataclasses.replace(cols, body_len=bad), 0, len(msgs), sizes + (1 << 20), phys, store_ts)


# ----------------------------------------------------------------------------- store paths
def _messages(n: int) -> list[dict[str, Any]]:
    out = []
    for i in range(n):
        m: dict[str, Any] = {"topic": ("TopicA", "TopicB", "T" * 120)[i % 3], "body": bytes([i % 251]) * (50 + 37 * i % 900),
                             "queue_id": i % 4, "uniq_key": f"{i:032X}", "born_timestamp": 1_700_000_000_000 + i}
        if i % 5:
            m["keys"] = [f"k{i}", f"key-{i % 7}"] if i % 2 else f"k{i} key-{i % 7}"
        if i % 3:
            m["tags"] = f"Tag{i % 4}"
        if i % 11 == 0:
            m["flag"] = -5
        out.append(m)
    return out


def _commitlog(root: Path) -> bytes:
    return b"".join(p.read_bytes() for p in sorted((root / "commitlog").iterdir()))


def _results_equal(a: list[PutResult], b: list[PutResult]) -> None:
    assert [(r.commit_log_offset, r.queue_offset, r.size, r.msg_id, r.uniq_key, r.store_timestamp) for r in a] == [
        (r.commit_log_offset, r.queue_offset, r.size, r.msg_id, r.uniq_key, r.store_timestamp) for r in b]


def test_all_put_paths_write_the_same_bytes(tmp_path: Path) -> None:
    msgs = _messages(120)  # ~60 KiB over 16 KiB segments: several rolls with blank fillers
    paths = {}
    with MessageStore.open(tmp_path / "general", StoreConfig(**SMALL)) as s:
        ref = [s._put_records([m])[0] for m in msgs]
    with MessageStore.open(tmp_path / "single", StoreConfig(**SMALL)) as s:
        _results_equal([s.put(**m) for m in msgs], ref)
    with MessageStore.open(tmp_path / "batch", StoreConfig(**SMALL)) as s:
        _results_equal(s.put_batch(msgs[:50]) + s.put_batch(msgs[50:]), ref)
    with MessageStore.open(tmp_path / "columns", StoreConfig(**SMALL)) as s:
        res = s.put_columns([m["topic"] for m in msgs], [m["body"] for m in msgs], [m["queue_id"] for m in msgs],
                            keys=[m.get("keys") for m in msgs], tags=[m.get("tags") for m in msgs],
                            uniq_keys=[m["uniq_key"] for m in msgs], flags=[m.get("flag", 0) for m in msgs],
                            born_timestamps=np.array([m["born_timestamp"] for m in msgs]))
        assert isinstance(res, PutBatchResult) and len(res) == len(msgs)
        _results_equal(list(res), ref)
        _results_equal([res[i] for i in range(len(res))], ref)
        assert res.msg_ids == [r.msg_id for r in ref]
    for name in ("general", "single", "batch", "columns"):
        paths[name] = _commitlog(tmp_path / name)
    assert len(set(paths.values())) == 1
    # and the derived files agree too (dispatch of the same CommitLog)
    for name in ("single", "batch", "columns"):
        for sub in ("consumequeue", "index"):
            a = sorted(p.relative_to(tmp_path / name) for p in (tmp_path / name / sub).rglob("*") if p.is_file())
            b = sorted(p.relative_to(tmp_path / "general") for p in (tmp_path / "general" / sub).rglob("*") if p.is_file())
            assert a == b
            for rel in a:
                assert (tmp_path / name / rel).read_bytes() == (tmp_path / "general" / rel).read_bytes(), rel


def test_consume_queue_appends_through_the_file_write_the_same_bytes(tmp_path: Path,
                                                                      monkeypatch: pytest.MonkeyPatch) -> None:
    """ConsumeQueue units appended through the file (``APPEND_THROUGH_FILE``, the default) or,
    below 16 KiB, through the mapping: the same files, the same reads (single puts dispatched one
    by one, first units of new queues, batches, rolls of 16-unit ConsumeQueue files)."""
    from mqstore.storage.rocketmq import consumequeue as cq_mod

    msgs = _messages(300)  # 25 units per queue: two files each
    for on in (False, True):
        monkeypatch.setattr(cq_mod, "APPEND_THROUGH_FILE", on)
        with MessageStore.open(tmp_path / str(on), StoreConfig(**SMALL)) as s:
            for m in msgs[:30]:
                s.put(**m)
                s.engine.dispatch_pending()
            s.put_batch(msgs[30:])
            s.flush()
            got = [(m.body, m.queue_offset) for m in s.get("TopicA", 1, 0, max_count=100)]
            assert len(got) == 25
    files = {on: sorted(p.relative_to(tmp_path / str(on)) for p in (tmp_path / str(on) / "consumequeue").rglob("*")
                        if p.is_file()) for on in (False, True)}
    assert files[False] == files[True] and len(files[True]) == 24
    for rel in files[True]:
        assert (tmp_path / "True" / rel).read_bytes() == (tmp_path / "False" / rel).read_bytes(), rel


def test_columns_read_back_and_query(tmp_path: Path) -> None:
    with MessageStore.open(tmp_path, StoreConfig(**SMALL)) as s:
        s.put("Orders", b"first", keys="a0")
        res = s.put_columns("Orders", [b"x" * i for i in range(1, 40)], [i % 2 for i in range(39)],
                            keys=[f"a{i} b{i % 3}" for i in range(1, 40)], tags="T1")
        assert res.queue_offset.tolist() == [1 + i // 2 if i % 2 == 0 else i // 2 for i in range(39)]
        assert len(set(res.uniq_keys)) == 39 and all(len(u) == 32 for u in res.uniq_keys)  # type: ignore[arg-type]
        got = s.get("Orders", 1, 0, max_count=100)
        assert [m.body for m in got] == [b"x" * i for i in range(2, 40, 2)]
        assert [m.uniq_key for m in got] == res.uniq_keys[1::2]
        assert {m.body for m in s.query_by_key("Orders", "b1")} == {b"x" * i for i in range(1, 40) if i % 3 == 1}
        m = s.get_by_msg_id(res[5].msg_id)
        assert (m.body, m.tags, m.keys, m.store_timestamp) == (b"x" * 6, "T1", ["a6", "b0"], res.store_timestamp)
        assert len(s.put_columns("Orders", [])) == 0
        listed = res.to_list()
        assert listed == [res[i] for i in range(len(res))] and hash(listed[3]) == hash(res[3])
        with pytest.raises(dataclasses.FrozenInstanceError):
            listed[0].size = 5  # type: ignore[misc]


def test_batches_are_all_or_nothing(tmp_path: Path) -> None:
    with MessageStore.open(tmp_path, StoreConfig(**SMALL)) as s:
        s.put("T", b"ok")
        end = s.engine.commit_log.max_offset
        with pytest.raises(MessageTooLargeError):
            s.put_columns("T", [b"a", b"b" * 20000, b"c"])
        with pytest.raises(InvalidKeyError):
            s.put_columns("T", [b"a", b"b"], keys=["fine", "bad\x02key"])
        with pytest.raises(InvalidKeyError):
            s.put_batch([{"topic": "T", "body": b"a"}, {"topic": "T", "body": b"b", "keys": ["two words"]}])
        with pytest.raises(InvalidTopicError):
            s.put_columns(["T", "bad topic"], [b"a", b"b"])
        with pytest.raises(InvalidArgumentError):
            s.put_columns("T", [b"a", b"b"], [0, 1, 2])
        with pytest.raises(InvalidArgumentError):
            s.put_columns("T", [b"a", "text"])  # type: ignore[list-item]
        with pytest.raises(InvalidArgumentError):
            s.put_columns("T", [b"a"], [-1])
        assert s.engine.commit_log.max_offset == end
        assert s.max_offset("T", 0) == 1


def test_general_shapes_still_take_the_general_path(tmp_path: Path) -> None:
    """Properties, born hosts and transaction flags go through the record codec; mixed in a
    batch they still get consecutive offsets and the right bytes."""
    with MessageStore.open(tmp_path, StoreConfig(**SMALL)) as s:
        out = s.put_batch([
            {"topic": "T", "body": b"1", "keys": "a"},
            {"topic": "T", "body": b"2", "properties": {"color": "red"}},
            {"topic": "T", "body": b"3", "born_host": "[::1]:5"},
            {"topic": "T", "body": b"4", "sys_flag": TRANSACTION_PREPARED_TYPE},
            {"topic": "T", "body": b"5"},
        ])
        assert [r.queue_offset for r in out] == [0, 1, 2, 0, 3]
        got = s.get("T", 0, 0, max_count=10)
        assert [m.body for m in got] == [b"1", b"2", b"3", b"5"]
        assert got[1].properties["color"] == "red" and got[2].born_host.startswith("[0000:")
        r = s.put("T", b"6", properties={"x": "y"}, keys="z")
        assert s.get_by_msg_id(r.msg_id).properties["x"] == "y" and r.queue_offset == 4


def test_vectorised_queue_offsets_match_sequential_rule(tmp_path: Path) -> None:
    rng = np.random.default_rng(7)
    with MessageStore.open(tmp_path, StoreConfig(**SMALL)) as s:
        eng = s.engine
        eng.queue_offsets.update({("A", 1): 10, ("B", 0): 3})
        topics = [("A", "B", "C")[int(x)] for x in rng.integers(0, 3, 500)]
        qids = rng.integers(0, 3, 500)
        flags = rng.choice([0, 8, TRANSACTION_PREPARED_TYPE, TRANSACTION_ROLLBACK_TYPE], 500)
        got, updates = eng._assign_queue_offsets(topics, qids, flags)
        nxt = dict(eng.queue_offsets)
        want = []
        for t, q, f in zip(topics, qids.tolist(), flags.tolist(), strict=True):
            if f & 0xC in (TRANSACTION_PREPARED_TYPE, TRANSACTION_ROLLBACK_TYPE):
                want.append(0)
                continue
            want.append(nxt.get((t, q), 0))
            nxt[(t, q)] = want[-1] + 1
        assert got.tolist() == want
        assert {k: v for k, v in nxt.items() if k in updates} == updates
        assert set(nxt) - set(updates) <= set(eng.queue_offsets)


@given(st.lists(st.tuples(st.sampled_from(["A", "B", "C", "D"]), st.sampled_from([0, 1, 2, 7, 31, 70_000]),
                          st.sampled_from([0, 8, TRANSACTION_PREPARED_TYPE, TRANSACTION_ROLLBACK_TYPE])),
                min_size=1, max_size=60),
       st.dictionaries(st.tuples(st.sampled_from(["A", "B", "E"]), st.integers(0, 40)), st.integers(0, 2**40),
                       max_size=6))
@settings(max_examples=150, deadline=None)
def test_queue_offset_kernel_equals_sorting_twin(tmp_path_factory: pytest.TempPathFactory, rows: list[tuple[str, int, int]],
                                                 known: dict[tuple[str, int], int]) -> None:
    topics = [r[0] for r in rows]
    qids = np.array([r[1] for r in rows], np.int64)
    flags = np.array([r[2] for r in rows], np.int64)
    tx = flags & 0xC
    takes = (tx != TRANSACTION_PREPARED_TYPE) & (tx != TRANSACTION_ROLLBACK_TYPE)
    codes = qids % 5
    got_k, got_p = queue_ranks(codes, takes, 5), queue_ranks_py(codes, takes, 5)
    assert got_k[0].tolist() == got_p[0].tolist() and got_k[1].tolist() == got_p[1].tolist()
    with MessageStore.open(tmp_path_factory.mktemp("qo"), StoreConfig(**SMALL)) as s:
        eng = s.engine
        eng.queue_offsets.update(known)
        fast, fast_up = eng._assign_queue_offsets(topics, qids, flags)
        slow, slow_up = eng._assign_queue_offsets_sorted(topics, qids, flags)
        assert fast.tolist() == slow.tolist() and fast_up == slow_up
        assert eng.queue_offsets == known  # nothing assigned until the caller applies the updates


@pytest.mark.parametrize("ranks", twins("rocketmq.queue_ranks"))
def test_queue_ranks_count_per_queue(ranks: Any) -> None:
    codes = np.array([0, 2, 0, 1, 0, 2, 3], np.int64)
    takes = np.array([True, True, False, True, True, True, True])
    rank, seen = ranks(codes, takes, 4)
    assert rank.tolist() == [0, 0, 0, 0, 1, 1, 0]
    assert seen.tolist() == [2, 1, 2, 1]
    with pytest.raises(ValueError):
        ranks(codes, takes, 3)


def _old_uniq(prefix: bytes, now_ms: int, counter: int) -> str:
    t = dt.datetime.fromtimestamp(now_ms / 1000, tz=dt.UTC)
    start = dt.datetime(t.year, t.month, 1, tzinfo=dt.UTC)
    since = (now_ms - int(start.timestamp() * 1000)) & 0xFFFFFFFF
    return (prefix + struct.pack(">IH", since, counter)).hex().upper()


@pytest.mark.parametrize("now", [1_700_000_000_123, 1_701_388_800_000 - 1, 1_701_388_800_000, 1_704_067_199_999])
def test_uniq_keys_keep_the_client_format(now: int) -> None:
    g = _UniqKeyGenerator()
    g.set_counter(65530)
    singles = [g.next(now) for _ in range(4)]
    assert singles == [_old_uniq(g._prefix, now, c) for c in (65531, 65532, 65533, 65534)]
    many = g.next_many(now, 5)  # wraps the 16-bit counter
    assert many == [_old_uniq(g._prefix, now, c) for c in (65535, 0, 1, 2, 3)]
    assert g.next(now + 40 * 86_400_000) == _old_uniq(g._prefix, now + 40 * 86_400_000, 4)  # next month


def test_warm_ahead_populates_without_writing(tmp_path: Path) -> None:
    with MessageStore.open(tmp_path, StoreConfig(**dict(SMALL, commit_log_file_size=8 << 20))) as s:
        s.put("T", b"x" * 100)
        cl = s.engine.commit_log
        end = cl.max_offset
        assert cl.warm_ahead(4 << 20) > 0  # Linux >= 5.14 (MADV_POPULATE_WRITE)
        assert cl.warm_ahead(4 << 20) == 0  # already warm
        s.put("T", b"y" * 100)
        assert s.get("T", 0, 1)[0].body == b"y" * 100
        seg = cl.queue.files[0]
        assert not seg.array[cl.max_offset:].any() and cl.max_offset > end


def test_warm_ahead_follows_the_segment_roll_and_stops_with_the_store(tmp_path: Path) -> None:
    """With the background services on (the reput thread warms the pages ahead), puts that roll
    2 MiB segments: the pre-faulted range follows the new last segment, no byte past the write
    position is written, and the service threads end with the store."""
    import threading

    before = {t.ident for t in threading.enumerate()}
    cfg = StoreConfig(**dict(SMALL, commit_log_file_size=2 << 20, background_services=True))
    with MessageStore.open(tmp_path, cfg) as s:
        cl = s.engine.commit_log
        for i in range(3):
            s.put_batch([{"topic": "T", "body": bytes([i + 1]) * 1000, "queue_id": j % 2} for j in range(1000)])
            s.put("T", b"single", keys="k", tags="t")
        assert len(cl.queue.files) >= 2
        last = cl.queue.files[-1]
        cl.warm_ahead(1 << 20)
        assert cl._warmed[0] == last.file_from_offset
        assert not last.array[last.wrote_position :].any()
        assert s.max_offset("T", 0) == 3 * 500 + 3
    assert not [t for t in threading.enumerate() if t.name.startswith("mqstore-") and t.ident not in before]


def test_common_shape_put_equals_general_path(tmp_path: Path) -> None:
    """The unchecked single-put branch (string keys and tags, generated unique key) writes the
    bytes of the general path, across segment rolls, with the store time runs of the checkpoint."""
    rng = np.random.default_rng(3)
    bodies = [rng.bytes(int(n)) for n in rng.integers(0, 700, 80)]
    with MessageStore.open(tmp_path / "fast", StoreConfig(**SMALL)) as s:
        fast = [s.put(("A", "Bb")[i % 2], b, i % 3, keys=f"k{i} x{i % 5}", tags=f"t{i % 4}", )
                for i, b in enumerate(bodies)]
        assert len({r.uniq_key for r in fast}) == len(fast)
        s.engine.flush_commit_log(0)
        assert s.engine.last_flushed_store_ts == 1_700_000_000_123 and not s.engine._ts_runs
    with MessageStore.open(tmp_path / "general", StoreConfig(**SMALL)) as s:
        ref = [s._put_records([dict(topic=("A", "Bb")[i % 2], body=b, queue_id=i % 3, keys=f"k{i} x{i % 5}",
                                    tags=f"t{i % 4}", uniq_key=r.uniq_key)])[0]
               for i, (b, r) in enumerate(zip(bodies, fast, strict=True))]
    _results_equal(fast, ref)
    assert _commitlog(tmp_path / "fast") == _commitlog(tmp_path / "general")


def test_common_shape_put_rejects_bad_text_and_syncs(tmp_path: Path) -> None:
    with MessageStore.open(tmp_path, StoreConfig(**dict(SMALL, flush_disk_type="sync"))) as s:
        end = s.engine.commit_log.max_offset
        for keys, tags in (("a\x01b", "T"), ("a", "T\x02"), ("a\ud800", "T"), ("a", "\udfff")):
            with pytest.raises(InvalidKeyError):
                s.put("T", b"x", keys=keys, tags=tags)
        with pytest.raises(InvalidArgumentError):
            s.put("T", b"x", -1, keys="a", tags="b")
        assert s.engine.commit_log.max_offset == end
        r = s.put("T", b"x", keys="a", tags="b")
        assert s.engine.commit_log.flushed_offset == r.commit_log_offset + r.size  # sync: flushed on return
        with pytest.raises(dataclasses.FrozenInstanceError):
            r.size = 1  # type: ignore[misc]
        assert r == PutResult(r.commit_log_offset, 0, r.store_timestamp, r.size, r.msg_id, r.uniq_key)


@given(st.binary(max_size=3000))
@settings(max_examples=200, deadline=None)
def test_put_crc32_equals_zlib(data: bytes) -> None:
    from mqstore.kernels.crc import crc32

    assert crc32(data) == zlib.crc32(data)
    assert crc32(data[1:], crc32(data[:1])) == zlib.crc32(data)


texts = st.one_of(st.none(), st.text(st.characters(blacklist_characters="\x01\x02", blacklist_categories=("Cs",)),
                                     max_size=12))


@pytest.mark.parametrize("build", twins("rocketmq.build_common_props"))
@given(st.lists(st.tuples(texts, texts), min_size=1, max_size=30), st.integers(0, 70_000))
@settings(max_examples=200, deadline=None)
def test_props_kernel_equals_templates(build: Any, rows: list[tuple[str | None, str | None]], counter0: int) -> None:
    from mqstore.api.rocketmq import _text_column

    keys, tags = [k for k, _ in rows], [t for _, t in rows]
    kc, tc = _text_column(keys), _text_column(tags)
    assert kc is not None and tc is not None
    head = "0A0B0C0D1F2E00000042075BCD15"
    buf, off, lens = build(*kc, *tc, head.encode(), counter0)
    texts_ = []
    for i, (k, t) in enumerate(rows):
        text = "" if k is None else f"KEYS\x01{k}\x02"
        text += f"UNIQ_KEY\x01{head}{(counter0 + i) & 0xFFFF:04X}\x02"
        texts_.append(text + ("" if t is None else f"TAGS\x01{t}\x02"))
    assert buf.tobytes() == "".join(texts_).encode("utf-8")
    assert off.tolist() == (np.cumsum(lens) - lens).tolist()
    assert lens.tolist() == [len(x.encode("utf-8")) for x in texts_]


def test_columns_common_shape_mixed_keys_equal_general(tmp_path: Path) -> None:
    """put_columns of string/absent keys, one tag or a tag each, non-ASCII text, generated unique
    keys (built in the kernel): the bytes of the general path with the same unique keys."""
    n = 60
    bodies = [bytes([i]) * (i * 7 % 300) for i in range(n)]
    keys = [None if i % 4 == 0 else f"k{i} ключ-{i % 3}" for i in range(n)]
    tags = [None if i % 5 == 0 else f"t{i % 2}" for i in range(n)]
    with MessageStore.open(tmp_path / "cols", StoreConfig(**SMALL)) as s:
        a = s.put_columns("T", bodies, [i % 2 for i in range(n)], keys=keys, tags=tags)
        b = s.put_columns("T", bodies, 1, keys=keys, tags="один")
        uks = a.uniq_keys + b.uniq_keys
        assert len(set(uks)) == 2 * n and a.uniq_keys == [r.uniq_key for r in a]
    with MessageStore.open(tmp_path / "gen", StoreConfig(**SMALL)) as s:
        ref = s._put_records([dict(topic="T", body=bodies[i], queue_id=i % 2, keys=keys[i], tags=tags[i],
                                   uniq_key=uks[i]) for i in range(n)]
                             + [dict(topic="T", body=bodies[i], queue_id=1, keys=keys[i], tags="один",
                                     uniq_key=uks[n + i]) for i in range(n)])
    _results_equal(list(a) + list(b), ref)
    assert _commitlog(tmp_path / "cols") == _commitlog(tmp_path / "gen")


def test_put_batch_result_is_a_list_like_sequence(tmp_path: Path) -> None:
    from collections.abc import Sequence

    with MessageStore.open(tmp_path, StoreConfig(**SMALL)) as s:
        res = s.put_batch([{"topic": "T", "body": b"%d" % i, "keys": f"k{i}", "tags": "x"} for i in range(5)])
        assert isinstance(res, PutBatchResult) and isinstance(res, Sequence) and len(res) == 5
        listed = res.to_list()
        assert res == listed and listed == res and res[1:3] == listed[1:3] and res[-1] == listed[-1]
        assert res + listed[:1] == [*listed, listed[0]] and listed[:1] + res == [listed[0], *listed]
        assert [r.queue_offset for r in res] == [0, 1, 2, 3, 4] and listed[2] in res and res.index(listed[3]) == 3
        assert repr(res).startswith("PutBatchResult([PutResult(")
        with pytest.raises(IndexError):
            res[5]
        odd = s.put_batch([{"topic": "T", "body": b"p", "properties": {"a": "b"}}])  # general path: a list
        assert odd[0].queue_offset == 5 and s.get_by_msg_id(odd[0].msg_id).properties["a"] == "b"


# ----------------------------------------------------------------------------- one record (put)
ascii_text = st.text(st.characters(min_codepoint=0, max_codepoint=127, blacklist_characters="\x01\x02"), max_size=40)


@pytest.mark.parametrize("encode_one", twins("rocketmq.encode_one_v1"))
@given(st.binary(max_size=1500), st.text(st.sampled_from("abcXYZ_-%|09"), min_size=1, max_size=127), ascii_text,
       ascii_text, st.integers(0, 2**31 - 1), st.integers(-(2**31), 2**31 - 1), st.integers(0, 2**62),
       st.integers(0, 2**62), st.integers(0, 2**50), st.integers(0, 64), hosts)
@settings(max_examples=150, deadline=None)
def test_encode_one_v1_equals_record_codec(encode_one: Any, body: bytes, topic: str, keys: str, tags: str, qid: int,
                                           flag: int, qo: int, phys: int, ts: int, pos: int, host: Host) -> None:
    """The single-record encoder of ``put`` (native, ``struct`` and codec twins): the bytes of the
    record codec, its size from ``one_v1_size``, nothing written outside the record."""
    from mqstore.kernels.rocketmq.put_one import encode_one_v1_py, one_v1_size

    if host.is_v6:
        host = Host("10.1.2.3", host.port)
    hb = host.to_bytes()
    tf = bytes((len(topic),)) + topic.encode()
    uniq = "0A0B0C0D1F2E00000042075BCD15" + f"{qid & 0xFFFF:04X}"
    args = (body, tf, keys, uniq, tags, qid, flag, qo, phys, ts - 5, ts, hb)
    size = one_v1_size(body, tf, keys, uniq, tags)
    out, ref = bytearray(b"\xee" * (pos + size + 9)), bytearray(b"\xee" * (pos + size + 9))
    assert encode_one(out, pos, *args) == size == encode_one_v1_py(ref, pos, *args)
    assert out == ref
    assert out[:pos] == b"\xee" * pos and out[pos + size :] == b"\xee" * 9
    with pytest.raises(ValueError):  # does not fit: nothing written
        encode_one(bytearray(size - 1), 0, *args)


@pytest.mark.parametrize("encode_one", twins("rocketmq.encode_one_v1"))
def test_encode_one_v1_refuses_other_shapes(encode_one: Any) -> None:
    hb = Host("127.0.0.1", 10911).to_bytes()
    good = (b"body", b"\x01T", "k", "U" * 32, "t", 0, 0, 0, 0, 1, 1, hb)
    out = bytearray(300)
    assert encode_one(out, 0, *good) > 0
    bad = [(2, "ключ"), (4, "\u00e9"), (3, "k\udc80"), (1, b"\x05T"), (11, b"\x7f" * 4), (5, 2**31), (6, -(2**31) - 1)]
    for i, v in bad:
        args = list(good)
        args[i] = v
        buf = bytearray(300)
        with pytest.raises(ValueError):
            encode_one(buf, 0, *args)
        assert buf == bytearray(300)


def test_single_put_native_path_equals_append_one(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """``put`` through ``append_common`` (one compiled call) writes the bytes and results of the
    earlier single-record path (``append_one``), including across segment rolls; records too
    large for it and non-ASCII texts take the checked path."""
    rng = np.random.default_rng(11)
    bodies = [rng.bytes(int(n)) for n in rng.integers(0, 900, 70)]
    keys = [f"k{i} ключ" if i % 9 == 4 else f"k{i} x{i % 5}" for i in range(70)]

    def run(root: Path) -> list[PutResult]:
        with MessageStore.open(root, StoreConfig(**SMALL)) as s:
            s._uniq.set_counter(41)
            s._uniq._hex_prefix = "0A0B0C0D1F2E00000042"  # the same unique keys in both stores
            out = [s.put(("A", "Bb")[i % 2], b, i % 3, keys=keys[i], tags=f"t{i % 4}") for i, b in enumerate(bodies)]
            with pytest.raises(MessageTooLargeError):
                s.put("A", b"x" * 20000, keys="a", tags="b")
            return out

    fast = run(tmp_path / "fast")
    monkeypatch.setattr("mqstore.api.rocketmq._put_plain", None)  # put() through append_one
    ref = run(tmp_path / "ref")
    _results_equal(fast, ref)
    assert _commitlog(tmp_path / "fast") == _commitlog(tmp_path / "ref")


# ----------------------------------------------------------------------------- batches from a list of bodies
common_row = st.tuples(st.binary(max_size=700), st.text(st.sampled_from("abcXYZ_-%|09"), min_size=1, max_size=127),
                       ascii_text, st.integers(0, 2**31 - 1), st.integers(-(2**31), 2**31 - 1), st.integers(0, 2**62),
                       st.integers(0, 2**50))


def _common_args(rows: list[tuple[Any, ...]], host: bytes, phys0: int) -> tuple[Any, ...]:
    tb = [t.encode() for _b, t, *_ in rows]
    pb = [f"KEYS\x01{k}\x02UNIQ_KEY\x010A0B\x02".encode() for _b, _t, k, *_ in rows]
    tlen = np.array([len(t) for t in tb], np.int64)
    plen = np.array([len(p) for p in pb], np.int64)
    blen = np.array([len(r[0]) for r in rows], np.int64)
    sizes = 91 + blen + tlen + plen
    phys = phys0 + np.cumsum(sizes) - sizes
    return (sizes, phys, 1_700_000_000_123, [r[0] for r in rows], np.frombuffer(b"".join(tb) or b"\0", np.uint8),
            np.cumsum(tlen) - tlen, tlen, np.frombuffer(b"".join(pb) or b"\0", np.uint8), np.cumsum(plen) - plen, plen,
            np.array([r[3] for r in rows], np.int64), np.array([r[4] for r in rows], np.int64),
            np.array([r[5] for r in rows], np.int64), np.array([r[6] for r in rows], np.int64), host)


@pytest.mark.parametrize("encode", twins("rocketmq.encode_common_into"))
@given(st.lists(common_row, max_size=12), st.integers(0, 64), hosts, st.data())
@settings(max_examples=120, deadline=None)
def test_encode_common_into_equals_record_codec(encode: Any, rows: list[tuple[Any, ...]], pos: int, host: Host,
                                                data: st.DataObject) -> None:
    """The batch encoder from a list of bodies (native, compiled-columns and codec twins): the
    bytes of the record codec for records ``lo:hi``, nothing written outside them."""
    from mqstore.kernels.rocketmq.put_one import encode_common_into_py

    if host.is_v6:
        host = Host("10.1.2.3", host.port)
    lo = data.draw(st.integers(0, len(rows)))
    hi = data.draw(st.integers(lo, len(rows)))
    args = _common_args(rows, host.to_bytes(), 4096)
    total = int(args[0][lo:hi].sum())
    out, ref = np.full(pos + total + 9, 0xEE, np.uint8), np.full(pos + total + 9, 0xEE, np.uint8)
    assert encode(out, pos, lo, hi, *args) == pos + total == encode_common_into_py(ref, pos, lo, hi, *args)
    assert out.tobytes() == ref.tobytes()
    assert (out[:pos] == 0xEE).all() and (out[pos + total :] == 0xEE).all()
    if total:
        small = np.zeros(pos + total - 1, np.uint8)
        with pytest.raises(ValueError):  # does not fit: nothing written
            encode(small, pos, lo, hi, *args)
        assert not small.any()


@pytest.mark.parametrize("encode", twins("rocketmq.encode_common_into"))
def test_encode_common_into_refuses_bad_columns(encode: Any) -> None:
    rows = [(b"abc", "T", "k", 1, 0, 5, 7), (b"", "Tt", "", 2, -1, 6, 8)]
    hb = Host("127.0.0.1", 10911).to_bytes()
    args = list(_common_args(rows, hb, 0))
    out = np.zeros(1000, np.uint8)
    assert encode(out, 0, 0, 2, *args) == int(args[0].sum())
    bad_sizes = args[0].copy()
    bad_sizes[1] += 1
    for i, v in [(0, bad_sizes), (3, [b"abc", "x"]), (3, [b"abc"]), (6, np.array([0, 2], np.int64))]:
        a = list(args)
        a[i] = v
        buf = np.zeros(1000, np.uint8)
        with pytest.raises((ValueError, TypeError)):
            encode(buf, 0, 0, 2, *a)
        assert not buf.any()


def test_put_batch_native_encoder_equals_column_encoder(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """``put_batch`` and ``put_columns`` through the native list encoder write the bytes, queue
    offsets and results of the column encoder (joined bodies, ``crc32_spans``), across segment
    rolls, with generated and given unique keys."""
    rng = np.random.default_rng(3)
    msgs = [{"topic": ("A", "Bb")[i % 2], "body": rng.bytes(int(rng.integers(0, 1500))), "queue_id": i % 3,
             "keys": f"k{i}", "tags": f"t{i % 4}"} for i in range(150)]
    for m in msgs[100:120]:
        m["uniq_key"] = f"U{m['keys']}"

    def run(root: Path) -> list[PutResult]:
        with MessageStore.open(root, StoreConfig(**SMALL)) as s:
            s._uniq.set_counter(41)
            s._uniq._hex_prefix = "0A0B0C0D1F2E00000042"
            out = list(s.put_batch(msgs[:60])) + list(s.put_batch(msgs[60:100])) + list(s.put_batch(msgs[100:]))
            out += list(s.put_columns("A", [b"x" * 700] * 30, 1, keys=[f"c{i}" for i in range(30)], tags="T"))
            return out

    import mqstore.api.rocketmq as api

    if api.encode_common_into is None:
        pytest.skip("native module not built")
    fast = run(tmp_path / "fast")
    monkeypatch.setattr(api, "encode_common_into", None)
    ref = run(tmp_path / "ref")
    _results_equal(fast, ref)
    assert _commitlog(tmp_path / "fast") == _commitlog(tmp_path / "ref")


# ----------------------------------------------------------------------------- native put path
def test_native_put_batch_put_and_query_import_no_numba(tmp_path: Path) -> None:
    """put_batch (properties and queue ranks in C), put and query_by_key on the native kernels
    load no numba module; the same store written under MQSTORE_KERNELS=numba is byte-identical."""
    import os
    import subprocess
    import sys

    from mqstore.kernels import backend

    if backend.built("_nat_put") is None or backend.built("_nat_rmq_query") is None:
        pytest.skip("native kernels not built")
    code = (
        "import sys; from mqstore import MessageStore, StoreConfig\n"
        "cfg = StoreConfig(commit_log_file_size=16384, hash_slot_num=100, index_num=400, background_services=False,"
        " clock=lambda: 1_700_000_000_123)\n"
        "with MessageStore.open(sys.argv[1], cfg) as s:\n"
        "    for j in range(3):\n"
        "        s.put_batch([{'topic': 'T' if i % 3 else 'U', 'body': bytes([i]) * (i % 90), 'queue_id': i % 4,\n"
        "                      'keys': f'k{i} j{j}', 'tags': 'A' if i % 2 else None} for i in range(40)])\n"
        "    s.flush()\n"
        "    print(len(s.query_by_key('T', 'k5')), any(m == 'numba' or m.startswith('numba.') for m in sys.modules))\n"
    )
    outs = []
    for mode, d in (("auto", tmp_path / "nat"), ("numba", tmp_path / "nb")):
        r = subprocess.run([sys.executable, "-c", code, str(d)], capture_output=True, text=True, check=False,
                           env={**os.environ, "MQSTORE_KERNELS": mode})
        assert r.returncode == 0, r.stderr
        outs.append(r.stdout.split())
    assert outs[0] == ["3", "False"] and outs[1] == ["3", "True"]
    # the unique keys hold the pid: compare the stores with their unique-key values masked
    import re

    def masked(root: Path) -> bytes:
        return re.sub(rb"UNIQ_KEY\x01[0-9A-F]{32}", b"UNIQ_KEY\x01" + b"#" * 32, _commitlog(root))

    assert masked(tmp_path / "nat") == masked(tmp_path / "nb") and b"UNIQ_KEY" in _commitlog(tmp_path / "nat")


def test_native_put_kernels_reject_out_of_range_columns() -> None:
    from mqstore.kernels.backend import native

    nat = native("_nat_put")
    if nat is None:
        pytest.skip("native kernels not built")
    z = np.zeros(2, np.int64)
    head = b"0" * 28
    out = np.zeros(200, np.uint8)
    keys = np.frombuffer(b"abc", np.uint8)
    with pytest.raises(ValueError, match="out of bounds"):  # a key span past its buffer
        nat.build_common_props(keys, z, np.array([2, 4], np.int64), keys, z, np.array([-1, -1], np.int64), head, 0,
                               out, np.array([0, 60], np.int64))
    with pytest.raises(ValueError, match="out of bounds"):  # an output span past the buffer
        nat.build_common_props(keys, z, np.array([1, 1], np.int64), keys, z, np.array([-1, -1], np.int64), head, 0,
                               out, np.array([0, 190], np.int64))
    with pytest.raises(ValueError):  # a bad unique-key head
        nat.build_common_props(keys, z, z, keys, z, z, b"0", 0, out, z)
    with pytest.raises(ValueError, match="out of range"):
        nat.queue_ranks(np.array([0, -1], np.int64), np.ones(2, np.bool_), np.zeros(2, np.int64), np.zeros(3, np.int64))
    with pytest.raises(TypeError):
        nat.queue_ranks(np.array([0, 1], np.int64), np.ones(2, np.bool_), np.zeros(2, np.int64))


@pytest.mark.parametrize("offset", [0, 1, 0x7FFF_FFFF_FFFF_FFFF, 1_234_567_890_123])
def test_native_put_result_is_the_python_one(offset: int) -> None:
    import pickle

    from mqstore.api import rocketmq as api

    exp = api._put_result_py(offset, 7, 1_700_000_000_123, 1100, "0A0B0C0D00002A9F", "UK")
    got = api._make_put_result(offset, 7, 1_700_000_000_123, 1100, "0A0B0C0D00002A9F", "UK")
    assert type(got) is type(exp) and got == exp and repr(got) == repr(exp) and hash(got) == hash(exp)
    assert pickle.loads(pickle.dumps(got)) == exp
    assert api._make_put_result(offset, 0, 0, 0, "P", None).uniq_key is None


def test_unique_key_prefix_and_digits_are_made_with_the_first_key(tmp_path: Path) -> None:
    """A store that never puts (a dump, a query) pays neither the host lookup nor the table."""
    import subprocess
    import sys

    code = f"""
import mqstore.api.rocketmq as api
with api.MessageStore.open({str(tmp_path)!r}) as s:
    assert api._HEX4 == [] and s._uniq._hex_prefix == ""
    r = s.put("T", b"x")
    assert len(api._HEX4) == 65536 and api._HEX4[0x1F] == "001F" and s._uniq._hex_prefix
    assert r.uniq_key.startswith(s._uniq._hex_prefix) and len(r.uniq_key) == 32
"""
    subprocess.run([sys.executable, "-c", code], check=True)


# ----------------------------------------------------------------------------- the single put's engine call
@pytest.mark.parametrize("append", twins("rocketmq.append_common"))
def test_append_common_twins_write_the_reference_store(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                       append: Any) -> None:
    """``put_one.append_common`` (native, ``struct`` and codec twins) as the engine's single-put
    entry: the same CommitLog bytes, results, queue offsets and store-time runs as the reference,
    across segment rolls (16 KiB segments: the end-of-segment rule), with a clock that moves;
    records too large for the path give None and the checked path reports them."""
    import functools

    from mqstore.kernels.rocketmq import put_one
    from mqstore.kernels.rocketmq.put_one import append_common_py

    rng = np.random.default_rng(7)
    bodies = [rng.bytes(int(n)) for n in rng.integers(0, 1500, 60)]

    def run(root: Path, impl: Any) -> tuple[list[PutResult], dict[Any, int], list[Any]]:
        ticks = iter(range(1_700_000_000_000, 1_700_000_100_000, 7))
        cfg = StoreConfig(**{**SMALL, "clock": lambda: next(ticks) // 21 * 21})
        with MessageStore.open(root, cfg) as s:
            s._put_plain = functools.partial(put_one._put_plain, impl)  # put() through ``impl``
            s._uniq.set_counter(3)
            s._uniq._hex_prefix = "0A0B0C0D1F2E00000042"
            out = [s.put(("A", "Bb")[i % 2], b, i % 3, keys=f"k{i} x{i % 5}", tags=f"t{i % 4}")
                   for i, b in enumerate(bodies)]
            assert impl(s.engine, "A", b"\x01A", b"x" * 20000, "a", "u" * 32, "b", 0, 1, 20000 + 155) is None
            with pytest.raises(MessageTooLargeError):
                s.put("A", b"x" * 20000, keys="a", tags="b")
            state = dict(s.engine.queue_offsets), list(s.engine._ts_runs)
        return out, *state

    ref = run(tmp_path / "ref", append_common_py)
    got = run(tmp_path / "got", append)
    _results_equal(got[0], ref[0])
    assert got[1:] == ref[1:]
    assert _commitlog(tmp_path / "got") == _commitlog(tmp_path / "ref")
    assert len(list((tmp_path / "got" / "commitlog").iterdir())) > 3  # the segment rolled


@pytest.mark.parametrize("append", twins("rocketmq.append_common"))
def test_append_common_refuses_and_leaves_the_store_alone(tmp_path: Path, append: Any) -> None:
    """A size that is not the record's is an error with nothing written or advanced; a closed
    store is refused by the store's own check; the put lock is released after an error."""
    from mqstore.errors import StoreClosedError

    with MessageStore.open(tmp_path / "s", StoreConfig(**SMALL)) as s:
        e = s.engine
        s.put("T", b"first", keys="k", tags="t")
        before = (_commitlog(tmp_path / "s"), dict(e.queue_offsets), e.commit_log.max_offset)
        with pytest.raises(ValueError):
            append(e, "T", b"\x01T", b"body", "k", "u" * 32, "t", 0, 1, 500)
        assert (_commitlog(tmp_path / "s"), dict(e.queue_offsets), e.commit_log.max_offset) == before
        assert e._put_lock.acquire(blocking=False)
        e._put_lock.release()
    with pytest.raises(StoreClosedError):
        append(e, "T", b"\x01T", b"body", "k", "u" * 32, "t", 0, 1, 187)


@pytest.mark.parametrize("plain", twins("rocketmq.put_plain"))
def test_put_plain_twins_equal_the_reference(tmp_path: Path, plain: Any) -> None:
    """``put_one.put_plain`` (native, ``struct`` and codec twins), the whole ``put`` of the common
    shape: the same results, unique keys, CommitLog bytes, queue offsets and time runs as the
    reference across segment rolls with a moving clock; None (nothing consumed) for non-ASCII
    texts and property separators; the unique key (nothing written) for a record too large."""
    from mqstore.kernels.rocketmq.put_one import put_plain_py

    rng = np.random.default_rng(9)
    bodies = [rng.bytes(int(n)) for n in rng.integers(0, 1500, 50)]

    def run(root: Path, impl: Any) -> tuple[Any, ...]:
        ticks = iter(range(1_700_000_000_000, 1_700_000_100_000, 5))
        with MessageStore.open(root, StoreConfig(**{**SMALL, "clock": lambda: next(ticks) // 15 * 15})) as s:
            s._uniq.set_counter(65530)  # the counter wraps at 16 bits
            s._uniq._hex_prefix = "0A0B0C0D1F2E00000042"
            s._put_plain = impl
            e, g, pre = s.engine, s._uniq, s._msgid_prefix
            out = [impl(e, g, pre, ("A", "Bb")[i % 2], (b"\x01A", b"\x02Bb")[i % 2], b, f"k{i} x{i % 5}", f"t{i % 4}",
                        i % 3) for i, b in enumerate(bodies)]
            assert impl(e, g, pre, "A", b"\x01A", b"b", "ключ", "t", 0) is None
            assert impl(e, g, pre, "A", b"\x01A", b"b", "k", "t\x01", 0) is None
            big = impl(e, g, pre, "A", b"\x01A", b"x" * 20000, "k", "t", 0)
            assert type(big) is str and len(big) == 32
            out.append(s.put("A", b"last", 1, keys="k", tags="t"))
            return out, big, dict(e.queue_offsets), list(e._ts_runs), e.commit_log.max_offset

    ref = run(tmp_path / "ref", put_plain_py)
    got = run(tmp_path / "got", plain)
    _results_equal(got[0], ref[0])
    assert all(type(r) is PutResult for r in got[0])
    assert got[1:] == ref[1:]
    assert _commitlog(tmp_path / "got") == _commitlog(tmp_path / "ref")


@pytest.mark.parametrize("gather", twins("rocketmq.gather_plain"))
@settings(max_examples=150, deadline=None)
@given(st.lists(st.one_of(
    st.fixed_dictionaries({"topic": st.sampled_from(["A", "Bb"]), "body": st.binary(max_size=20)},
                          optional={"queue_id": st.one_of(st.integers(-2, 2**31 + 1), st.booleans(), st.none()),
                                    "keys": st.one_of(st.none(), st.text(max_size=5), st.lists(st.text(max_size=3))),
                                    "tags": st.one_of(st.none(), st.text(max_size=5), st.integers()),
                                    "flag": st.integers(0, 1)}),
    st.fixed_dictionaries({"body": st.binary(max_size=3)}),
    st.fixed_dictionaries({"topic": st.just("A"), "body": st.text(max_size=3)})), max_size=12))
def test_gather_plain_twins(gather: Any, msgs: list[dict[str, Any]]) -> None:
    """``put_one.gather_plain`` (native and reference) agree on every batch of dicts: the columns
    and the filled arrays of a plain batch, None for any other shape."""
    from mqstore.kernels.rocketmq.put_one import gather_plain_py

    n = len(msgs)
    q1, b1, q2, b2 = (np.full(n, -7, np.int64) for _ in range(4))
    exp = gather_plain_py(msgs, q1, b1)
    got = gather(msgs, q2, b2)
    assert (got is None) == (exp is None)
    if exp is not None:
        assert got == exp and (q1 == q2).all() and (b1 == b2).all()
        assert all(type(m) is dict and set(m) <= {"topic", "body", "queue_id", "keys", "tags"} for m in msgs)


def test_put_batch_of_plain_dicts_equals_the_passes(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """``put_batch`` of plain dicts through the one-pass gather writes the bytes and results of the
    C-level passes over the dicts (gather switched off), across segment rolls."""
    import mqstore.api.rocketmq as api_mod

    rng = np.random.default_rng(3)
    msgs = [{"topic": ("A", "Bb")[i % 2], "body": rng.bytes(int(rng.integers(0, 700))), "queue_id": i % 3,
             **({"keys": f"k{i} x{i % 5}"} if i % 4 else {}), **({"tags": f"t{i % 3}"} if i % 5 else {"tags": None})}
            for i in range(90)]

    def run(root: Path) -> list[PutResult]:
        with MessageStore.open(root, StoreConfig(**SMALL)) as s:
            s._uniq.set_counter(11)
            s._uniq._hex_prefix = "0A0B0C0D1F2E00000042"
            return [r for i in range(0, 90, 30) for r in s.put_batch(msgs[i : i + 30])]

    fast = run(tmp_path / "fast")
    monkeypatch.setattr(api_mod, "_gather_plain", None)
    ref = run(tmp_path / "ref")
    _results_equal(fast, ref)
    assert _commitlog(tmp_path / "fast") == _commitlog(tmp_path / "ref")


@pytest.mark.parametrize("gather", twins("rocketmq.gather_columns"))
@settings(max_examples=200, deadline=None)
@given(st.lists(st.tuples(st.one_of(st.binary(max_size=6), st.text(max_size=2), st.just(bytearray(b"x"))),
                          st.one_of(st.integers(-2, 3), st.sampled_from([2**31 - 1, 2**31, 2**63, -(2**70)]),
                                    st.booleans(), st.floats(0, 3)),
                          st.one_of(st.integers(-3, 3), st.sampled_from([-(2**31), -(2**31) - 1, 2**31 - 1, 2**31]),
                                    st.booleans())), max_size=12),
       st.booleans())
def test_gather_columns_twins(gather: Any, rows: list[tuple[Any, Any, Any]], plain: bool) -> None:
    """``put_one.gather_columns`` (native, C-level passes, reference) agree on every set of
    columns: True and the same filled arrays when every body is bytes, every queue id an int in
    [0, 2**31) and every flag an int in [-2**31, 2**31); False otherwise."""
    from mqstore.kernels.rocketmq.put_one import gather_columns_py

    if plain:  # mostly valid rows, so that True is common
        rows = [(b if type(b) is bytes else b"b", q if type(q) is int and 0 <= q < 2**31 else 1,
                 f if type(f) is int and -(2**31) <= f < 2**31 else 0) for b, q, f in rows]
    cols = [list(c) for c in zip(*rows, strict=True)] if rows else [[], [], []]
    n = len(rows)
    exp_out = [np.full(n, -7, np.int64) for _ in range(3)]
    got_out = [np.full(n, -7, np.int64) for _ in range(3)]
    exp = gather_columns_py(*cols, *exp_out)
    got = gather(*cols, *got_out)
    assert got is exp
    if exp:
        assert all((a == b).all() for a, b in zip(exp_out, got_out, strict=True))
        assert exp_out[2].tolist() == [len(b) for b in cols[0]]
    with pytest.raises(ValueError):
        gather(*cols, *[np.zeros(n + 1, np.int64) for _ in range(3)])


def test_put_columns_gathered_equals_the_passes(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """``put_columns`` with its columns checked by the native pass and by the C-level passes: the
    same bytes and results; a bad column value takes the general path in both (same error)."""
    import mqstore.api.rocketmq as api_mod
    from mqstore.kernels.rocketmq import put_one

    msgs = _messages(90)

    def run(root: Path) -> tuple[list[PutResult], str]:
        with MessageStore.open(root, StoreConfig(**SMALL)) as s:
            res = s.put_columns([m["topic"] for m in msgs], [m["body"] for m in msgs], [m["queue_id"] for m in msgs],
                                keys=[m.get("keys") for m in msgs], tags=[m.get("tags") for m in msgs],
                                uniq_keys=[m["uniq_key"] for m in msgs], flags=[m.get("flag", 0) for m in msgs],
                                born_timestamps=np.array([m["born_timestamp"] for m in msgs]))
            with pytest.raises(InvalidArgumentError) as err:
                s.put_columns("T", [b"a", b"b"], [0, -1])
            return list(res), str(err.value)

    fast = run(tmp_path / "fast")
    monkeypatch.setattr(api_mod, "_gather_columns", put_one.gather_columns_passes)
    ref = run(tmp_path / "ref")
    _results_equal(fast[0], ref[0])
    assert fast[1] == ref[1]
    assert _commitlog(tmp_path / "fast") == _commitlog(tmp_path / "ref")


@pytest.mark.parametrize("column", twins("rocketmq.text_column"))
@settings(max_examples=200, deadline=None)
@given(st.lists(st.one_of(st.none(), st.text(max_size=6), st.sampled_from(["TagA", "é€", "a\x01", "\ud800"]),
                          st.integers(), st.binary(max_size=2)), max_size=20),
       st.booleans())
def test_text_column_twins(column: Any, values: list[Any], same: bool) -> None:
    """``put.text_column`` (native, C-level passes, reference) agree on every column: the same
    UTF-8 text and length (−1: None) per row, None for a non-string, a separator or a lone
    surrogate."""
    from mqstore.kernels.rocketmq.put import text_column_py

    if same and values:
        values = [values[0]] * len(values)  # one value for all (the passes keep one copy of it)
    exp = text_column_py(values)
    got = column(values)
    assert (got is None) == (exp is None)
    if exp is not None:
        assert got is not None
        assert got[2].tolist() == exp[2].tolist()
        rows = [(bytes(c[0][int(o) : int(o) + int(ln)]) if ln >= 0 else None for o, ln in zip(c[1], c[2], strict=True))
                for c in (got, exp)]
        assert list(rows[0]) == list(rows[1])
        assert len(got[0]) >= 1 and got[0].dtype == np.uint8
