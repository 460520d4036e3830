"""The store-level batch query with keys handed over as text (hashed on the walk's threads)
against its twins: ``index_hash_keys`` + ``select_many_py`` (the reference walk), and the
scalar hash of ``topic#key``."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from kernel_twins import twins
from mqstore import MessageStore, StoreConfig
from mqstore.errors import CorruptIndexError
from mqstore.formats.rocketmq.indexfile import IndexFileBuffer, index_file_size
from mqstore.formats.rocketmq.javahash import index_key_hash
from mqstore.kernels.javahash import hash_prefix_state, index_hash_keys, join_keys_ascii
from mqstore.kernels.rocketmq.chain_walk import select_many_py, select_many_text
from mqstore.kernels.rocketmq.index_build import header_array

LONG_MAX = 2**63 - 1
ASCII_KEY = st.text(st.characters(min_codepoint=1, max_codepoint=127), max_size=12)


@pytest.mark.parametrize("hash_joined", twins("javahash.hash_joined"))
@settings(max_examples=100, deadline=None)
@given(st.sampled_from(["T", "TopicTest", "%RETRY%g"]), st.lists(st.text(max_size=8), max_size=30))
def test_join_keys_ascii_hashes_match_scalar_hash(hash_joined: Any, topic: str, keys: list[str]) -> None:
    text = join_keys_ascii(keys)
    if text is None:  # only for keys the fast path cannot split: non-ASCII or holding "\0"
        assert any(not k.isascii() or "\0" in k for k in keys)
        return
    kbuf, starts = text
    assert len(starts) == len(keys) + 1
    out = hash_joined(kbuf, starts, hash_prefix_state(f"{topic}#"))
    assert out.dtype == np.int32
    assert out.tolist() == [index_key_hash(f"{topic}#{k}") for k in keys]


@pytest.mark.parametrize("select_text", twins("rocketmq.select_many_text"))
def test_select_many_text_finds_the_keys(select_text: Any) -> None:
    slots, items = 7, 60
    buf = np.zeros(index_file_size(slots, items), np.uint8)
    f = IndexFileBuffer(memoryview(buf), slots, items, load=False)
    for i in range(50):
        f.put_key(f"T#k{i % 9}", 1000 + i, 1_700_000_000_000 + 700 * i)
    keys = ["k0", "k3", "absent", "", "k8"]
    text = join_keys_ascii(keys)
    assert text is not None
    offsets, splits, hashes = select_text(buf, slots, items, header_array(f.header), hash_prefix_state("T#"), *text,
                                          64, 0, LONG_MAX)  # fmt: skip
    assert hashes.tolist() == [index_key_hash(f"T#{k}") for k in keys]
    for i, k in enumerate(keys):
        exp = [1000 + j for j in range(49, -1, -1) if k and f"k{j % 9}" == k]
        assert offsets[splits[i] : splits[i + 1]].tolist() == exp


@settings(max_examples=80, deadline=None)
@given(st.integers(1, 9), st.integers(2, 40), st.data())
def test_select_many_text_matches_reference(slots: int, items: int, data: st.DataObject) -> None:
    size = index_file_size(slots, items)
    if data.draw(st.booleans()):  # garbage: corrupt chains are reported as the reference does
        buf = np.frombuffer(bytearray(data.draw(st.binary(min_size=size, max_size=size))), np.uint8)
        header = np.array([data.draw(st.integers(0, 10**13)), 0, 0, 0, 0, data.draw(st.integers(1, items))], np.int64)
    else:
        buf = np.zeros(size, np.uint8)
        f = IndexFileBuffer(memoryview(buf), slots, items, load=False)
        for i, k in enumerate(data.draw(st.lists(st.sampled_from(["a", "b", "c", "k1", "", "zz"]), max_size=items))):
            f.put_key(f"T#{k}", 100 + i, 1_700_000_000_000 + 700 * i)
        header = header_array(f.header)
    keys = data.draw(st.lists(st.one_of(st.sampled_from(["a", "b", "c", "k1", "", "zz"]), ASCII_KEY), max_size=60))
    text = join_keys_ascii(keys)
    if text is None:
        assert any("\0" in k for k in keys)
        return
    max_num = data.draw(st.integers(0, 6))
    begin, end = data.draw(st.sampled_from([(0, LONG_MAX), (1_700_000_002_000, 1_700_000_009_000)]))
    hashes = index_hash_keys("T", keys)
    try:
        exp = select_many_py(buf, slots, items, header, hashes, max_num, begin, end)
    except CorruptIndexError:
        exp = None
    prefix = hash_prefix_state("T#")
    for threads in (1, 2, 3):
        for lanes in (1, 32):
            stop = select_many_text(buf, slots, items, header, prefix, *text, max_num, begin, end, threads=threads,
                                    lanes=lanes, on_corrupt="stop")  # fmt: skip
            assert stop[2].tolist() == hashes.tolist()
            if exp is None:
                try:
                    select_many_text(buf, slots, items, header, prefix, *text, max_num, begin, end, threads=threads)
                except CorruptIndexError:
                    continue
                raise AssertionError("a corrupt chain was not reported")
            got = select_many_text(buf, slots, items, header, prefix, *text, max_num, begin, end, threads=threads,
                                   lanes=lanes)  # fmt: skip
            assert np.array_equal(got[0], exp[0]) and np.array_equal(got[1], exp[1])
            assert np.array_equal(stop[0], exp[0]) and np.array_equal(stop[1], exp[1])


def test_query_offsets_columns_text_and_fallback_paths_agree(tmp_path: Path) -> None:
    cfg = StoreConfig(commit_log_file_size=1 << 16, hash_slot_num=13, index_num=60, background_services=False)
    with MessageStore.open(tmp_path / "s", cfg) as s:
        for i in range(300):
            s.put("TopicA", b"x" * (i % 40), keys=[f"k{i % 31}", f"u{i}", "键" if i % 7 == 0 else "z"],
                  born_timestamp=1_700_000_000_000 + i * 400)  # fmt: skip
        s.dispatch()
        assert len(s.engine.index.files) > 5
        ascii_keys = [f"k{i}" for i in range(31)] + ["u5", "u299", "absent", "z", ""]
        for max_num in (1, 3, 64):
            base = s.query_offsets_columns("TopicA", ascii_keys, max_num)  # the text path
            mixed = s.query_offsets_columns("TopicA", [*ascii_keys, "键"], max_num)  # non-ASCII: the hash path
            nul = s.query_offsets_columns("TopicA", [*ascii_keys, "a\0b"], max_num)  # "\0" in a key: the hash path
            assert base.to_lists() == mixed.to_lists()[:-1] == nul.to_lists()[:-1]
            assert mixed[len(ascii_keys)] == s.query_offsets_broker("TopicA", "键", max_num)
            assert nul[len(ascii_keys)] == []
            for i, k in enumerate(ascii_keys):
                assert base[i] == s.query_offsets_broker("TopicA", k, max_num)


def test_select_offsets_one_call_over_files_matches_twins_while_files_roll(tmp_path: Path) -> None:
    """``select_offsets`` (one compiled call over every file) against the per-file loop and the
    reference ``query_offset``, queried between puts so that the cached file table is rebuilt as
    files roll, then after old files are deleted."""
    cfg = StoreConfig(commit_log_file_size=1 << 15, hash_slot_num=7, index_num=40, background_services=False)
    with MessageStore.open(tmp_path / "s", cfg) as s:
        idx = s.engine.index
        keys = ["k0", "k3", "k7", "u5", "u250", "absent", "", "clé-ü", "键", "𝄞"]
        for round_ in range(5):
            for i in range(round_ * 60, round_ * 60 + 60):
                s.put("TopicA", b"x" * (i % 30), keys=[f"k{i % 11}", f"u{i}", "键" if i % 5 == 0 else "𝄞"],
                      born_timestamp=1_700_000_000_000 + i * 300)  # fmt: skip
            s.dispatch()
            ts = [f.header.begin_timestamp for f in idx.files]
            windows = [(0, LONG_MAX), (ts[len(ts) // 3], ts[len(ts) // 2]), (ts[-1] + 10**6, LONG_MAX)]
            for key in keys:
                for begin, end in windows:
                    for max_num in (0, 1, 2, 64, 10**6):
                        exp = idx.query_offset("TopicA", key, max_num, begin, end, cap=None).phy_offsets
                        assert idx.select_offsets("TopicA", key, max_num, begin, end) == exp
                        assert idx._select_offsets_loop("TopicA", key, max_num, begin, end) == exp
        assert len(idx.files) > 10
        gone = idx.files[:3]
        idx.delete_expired(idx.files[3].header.end_phy_offset)
        assert all(f.mm.closed for f in gone)  # the file table did not keep their mappings open
        for key in keys:
            assert idx.select_offsets("TopicA", key, 64, 0, LONG_MAX) == idx.query_offset("TopicA", key, 64, 0,
                                                                                            LONG_MAX).phy_offsets  # fmt: skip
        files = list(idx.files)
    assert files and all(f.mm.closed for f in files)


def _exact_store(tmp_path: Path) -> MessageStore:
    cfg = StoreConfig(commit_log_file_size=1 << 14, hash_slot_num=5, index_num=50, background_services=False)
    s = MessageStore.open(tmp_path / "s", cfg)
    # "Aa" and "BB" have the same Java hash, so "T#Aa" and "T#BB" share every index entry
    for i in range(240):
        keys = [["Aa"], ["BB"], ["Aa", "x"], [f"k{i % 9}"], ["AaBB", "BBAa"]][i % 5]
        s.put("TopicA" if i % 4 else "TopicB", bytes([i % 256]) * (i % 90), queue_id=i % 3, keys=keys,
              born_timestamp=1_700_000_000_000 + i * 350)  # fmt: skip
    s.dispatch()
    return s


def test_exact_query_compiled_check_matches_record_by_record(tmp_path: Path) -> None:
    with _exact_store(tmp_path) as s:
        eng = s.engine
        assert len(eng.commit_log.queue.files) >= 3 and len(eng.index.files) > 3
        ts = [f.header.begin_timestamp for f in eng.index.files]
        uniq = s.get_by_offset(eng.commit_log.min_offset).uniq_key
        for topic in ("TopicA", "TopicB"):
            for key in ["Aa", "BB", "x", "k3", "AaBB", "BBAa", "absent", uniq]:
                for b, e in ((0, LONG_MAX), (ts[1] + 123, ts[3] + 777), (ts[2], ts[2])):
                    offs = list(dict.fromkeys(eng.index.candidates(topic, key, b, e)))
                    got = s.query_by_key(topic, key, b, e)
                    exp = s._exact_matches_records(offs, topic, key, b, e)
                    exp.sort(key=lambda m: (m.store_timestamp, m.commit_log_offset), reverse=True)
                    assert got == exp
                    if key in ("Aa", "BB") and b == 0:
                        assert got and len(offs) > len(got)  # the collisions were candidates, filtered out
                    for m in got:
                        assert m == s.get_by_offset(m.commit_log_offset)


def test_exact_query_verifies_the_body_crc_of_returned_messages(tmp_path: Path) -> None:
    from mqstore.errors import CorruptDataError

    with _exact_store(tmp_path) as s:
        aa = s.query_by_key("TopicA", "Aa")
        bb = s.query_by_key("TopicA", "BB")
        victim = next(m for m in bb if len(m.body) > 4)
        mf = s.engine.commit_log.segment_for(victim.commit_log_offset)
        pos = victim.commit_log_offset - mf.file_from_offset
        body_at = mf.mm.find(victim.body, pos)
        mf.mm[body_at] ^= 0xFF  # a bad body CRC in a "BB" record
        # a candidate that is not returned (a hash collision) is not decoded, so it does not fail the query
        assert s.query_by_key("TopicA", "Aa") == aa
        import pytest

        with pytest.raises(CorruptDataError):
            s.query_by_key("TopicA", "BB")
        mf.mm[body_at] ^= 0xFF
        assert s.query_by_key("TopicA", "BB") == bb


def test_query_by_keys_matches_single_exact_queries_with_collisions(tmp_path: Path) -> None:
    with _exact_store(tmp_path) as s:
        ts = [f.header.begin_timestamp for f in s.engine.index.files]
        keys = ["Aa", "BB", "x", "k3", "AaBB", "BBAa", "absent"]
        for topic in ("TopicA", "TopicB"):
            for b, e in ((None, None), (ts[1] + 123, ts[3] + 777)):
                for max_num in (None, 1, 2):
                    batch = s.query_by_keys(topic, keys, b, e, max_num)
                    assert list(batch) == keys
                    for k in keys:
                        assert batch[k] == s.query_by_key(topic, k, b, e, max_num)
