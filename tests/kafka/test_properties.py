"""Hypothesis property tests: codecs round-trip, index search equals brute force, twins agree."""

from __future__ import annotations

import bisect
import os
import tempfile
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from kernel_twins import twins
from mqstore.formats.kafka import (
    Compression,
    Header,
    SimpleRecord,
    compress,
    decode_batch,
    decode_varint,
    decode_varlong,
    decompress,
    encode_batch,
    encode_varint,
    encode_varlong,
)
from mqstore.formats.kafka.compression import XERIAL_MAGIC
from mqstore.kafka import OffsetIndex, TimeIndex
from mqstore.kernels.kafka.index_search import index_search_many, index_search_many_py, index_search_py

FAST = settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])


@FAST
@given(st.integers(-(2**31), 2**31 - 1))
def test_varint_roundtrip(n: int) -> None:
    b = encode_varint(n)
    assert len(b) <= 5 and decode_varint(b) == (n, len(b))


@FAST
@given(st.integers(-(2**63), 2**63 - 1))
def test_varlong_roundtrip(n: int) -> None:
    b = encode_varlong(n)
    assert len(b) <= 10 and decode_varlong(b) == (n, len(b))


@FAST
@given(st.integers(0, 2**32 - 1))
def test_uvarint_roundtrip(u: int) -> None:
    from mqstore.formats.kafka.varint import decode_uvarint, encode_uvarint

    b = encode_uvarint(u)
    assert len(b) <= 5 and decode_uvarint(b) == (u, len(b))
    assert encode_uvarint(300) == b"\xac\x02"  # plain, not zig-zag (the protocol's compact lengths)


def test_varint_examples() -> None:
    assert encode_varint(-1) == b"\x01" and encode_varint(0) == b"\x00"
    assert encode_varint(1) == b"\x02" and encode_varint(64) == b"\x80\x01"


record_st = st.builds(
    SimpleRecord,
    value=st.one_of(st.none(), st.binary(max_size=300)),
    key=st.one_of(st.none(), st.binary(max_size=40)),
    headers=st.lists(st.builds(Header, st.text(max_size=10), st.one_of(st.none(), st.binary(max_size=20))),
                     max_size=3),
    timestamp=st.integers(0, 2**41),
)


@FAST
@given(st.lists(record_st, min_size=1, max_size=12), st.sampled_from(list(Compression)),
       st.integers(0, 2**40), st.booleans())
def test_batch_roundtrip(records: list[SimpleRecord], codec: Compression, base: int, txn: bool) -> None:
    data = encode_batch(records, base_offset=base, compression=codec, is_transactional=txn,
                        producer_id=5 if txn else -1, producer_epoch=1 if txn else -1)
    rb = decode_batch(data)
    assert rb.crc_valid and rb.header.size == len(data)
    assert rb.header.records_count == len(records) and rb.header.is_transactional == txn
    assert rb.header.max_timestamp == max(r.timestamp for r in records)
    for got, want, i in zip(rb.records, records, range(len(records)), strict=True):
        assert got.offset == base + i
        assert (got.key, got.value, got.timestamp) == (want.key, want.value, want.timestamp)
        assert list(got.headers) == list(want.headers)


@FAST
@given(st.binary(max_size=100_000), st.sampled_from(list(Compression)))
def test_compression_roundtrip(data: bytes, codec: Compression) -> None:
    assert decompress(codec, compress(codec, data)) == data


def test_snappy_raw_and_xerial_are_both_read() -> None:
    import cramjam

    data = os.urandom(50_000) + b"a" * 100_000
    assert decompress(Compression.SNAPPY, bytes(cramjam.snappy.compress_raw(data))) == data
    framed = compress(Compression.SNAPPY, data)
    assert framed.startswith(XERIAL_MAGIC) and decompress(Compression.SNAPPY, framed) == data


def _brute_llb(col: list[int], t: int) -> int:
    return bisect.bisect_right(col, t) - 1


def _brute_sub(col: list[int], t: int) -> int:
    i = bisect.bisect_left(col, t)
    if i == 0 and col and col[0] == t:  # the documented slot-0 quirk (§3.7)
        return 1 if len(col) > 1 else -1
    return i if i < len(col) else -1


@settings(max_examples=40, deadline=None)
@given(st.lists(st.integers(0, 10**6), min_size=0, max_size=3000, unique=True),
       st.lists(st.integers(-5, 10**6 + 5), min_size=1, max_size=50), st.sampled_from([3, 16, 1024, 682]))
def test_search_equals_brute_force_and_twins_agree(keys: list[int], targets: list[int], warm: int) -> None:
    _search_equals_brute_force(keys, targets, warm)


@pytest.mark.parametrize("search", twins("kafka.index_search_many"))
@settings(max_examples=30, deadline=None)
@given(st.lists(st.integers(0, 10**4), min_size=0, max_size=300, unique=True),
       st.lists(st.integers(-5, 10**4 + 5), min_size=1, max_size=40), st.sampled_from([0, 3, 16, 682]))
def test_search_many_equals_brute_force(search: Any, keys: list[int], targets: list[int], warm: int) -> None:
    col = sorted(keys)
    arr = np.array(col, dtype=np.int64)
    for sub in (False, True):
        got = search(arr, len(col), targets, warm, sub)
        assert got.dtype == np.int64
        assert got.tolist() == [(_brute_sub if sub else _brute_llb)(col, t) for t in targets]


def _search_equals_brute_force(keys: list[int], targets: list[int], warm: int) -> None:
    col = sorted(keys)
    arr = np.array(col, dtype=np.int64)
    for sub in (False, True):
        fast = index_search_many(arr, len(col), targets, warm, sub)
        slow = index_search_many_py(arr, len(col), targets, warm, sub)
        assert fast.tolist() == slow.tolist()
        brute = [(_brute_sub if sub else _brute_llb)(col, t) for t in targets]
        assert fast.tolist() == brute
        assert [index_search_py(col, len(col), t, warm, sub) for t in targets] == brute


@settings(max_examples=25, deadline=None)
@given(st.lists(st.tuples(st.integers(1, 1000), st.integers(0, 5000)), min_size=0, max_size=300),
       st.lists(st.integers(0, 400_000), min_size=1, max_size=30))
def test_index_lookup_equals_brute_force(steps: list[tuple[int, int]], targets: list[int]) -> None:
    with tempfile.TemporaryDirectory() as d:
        oi = OffsetIndex(Path(d) / "00000000000000000007.index", 7, 8 * 400)
        ti = TimeIndex(Path(d) / "00000000000000000007.timeindex", 7, 12 * 400)
        off, pos, ts = 7, 0, 1000
        entries, tentries = [], []
        for do, dp in steps:
            off += do
            pos += dp
            ts += dp
            oi.append(off, pos)
            entries.append((off, pos))
            if ti.maybe_append(ts, off):  # equal timestamps are ignored (§3.5)
                tentries.append((ts, off))
            else:
                assert tentries and tentries[-1][0] == ts
        for t in targets:
            fl = [e for e in entries if e[0] <= t]
            assert tuple(oi.lookup(t)) == (fl[-1] if fl else (7, 0))
            tl = [e for e in tentries if e[0] <= t]
            assert tuple(ti.lookup(t)) == (tl[-1] if tl else (-1, 7))
        vo, vp = oi.lookup_many(targets)
        assert list(zip(vo.tolist(), vp.tolist(), strict=True)) == [tuple(oi.lookup(t)) for t in targets]
        vt, vo2 = ti.lookup_many(targets)
        assert list(zip(vt.tolist(), vo2.tolist(), strict=True)) == [tuple(ti.lookup(t)) for t in targets]
        oi.close()
        ti.close()
