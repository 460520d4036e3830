"""The RocketMQ fast paths (numba kernels) against their pure-Python twins, on the fixtures and on
random (and randomly damaged) data."""

from __future__ import annotations

import struct
import zlib
from typing import Any

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from kernel_twins import twin_pairs, twins
from mqstore.errors import CorruptDataError, CorruptIndexError, InvalidArgumentError
from mqstore.formats.rocketmq.indexfile import IndexFileBuffer, IndexHeader, index_file_size
from mqstore.formats.rocketmq.javahash import (
    index_key_hash,
    java_bytes_hashcode,
    java_string_hashcode,
)
from mqstore.formats.rocketmq.record import MAGIC_V1, MAGIC_V2, check_record, decode_record
from mqstore.kernels.crc import CRC_TABLE
from mqstore.kernels.crc_nb import crc32_span
from mqstore.kernels.endian import as_u8
from mqstore.kernels.javahash import hash_spans, hash_strings, index_hash_strings
from mqstore.kernels.rocketmq.chain_walk import select_many, select_many_py
from mqstore.kernels.rocketmq.columns import decode_columns, decode_columns_py
from mqstore.kernels.rocketmq.framing import record_positions
from mqstore.kernels.rocketmq.index_build import bulk_put, bulk_put_py, header_array
from mqstore.kernels.rocketmq.scan import (
    STOP_BLANK,
    STOP_END,
    STOP_INVALID,
    DispatchBatch,
    scan_segment,
    scan_segment_py,
)

from .helpers import (
    CASES,
    FixtureCase,
    build_index_files,
    concat_batches,
    index_inputs,
    load_case,
    scan_store,
)

ARRAYS = (
    "commit_log_offset",
    "size",
    "queue_id",
    "queue_offset",
    "sys_flag",
    "store_timestamp",
    "tags_code",
    "topic_id",
    "key_row",
    "key_hash",
)


def assert_same_batch(fast: DispatchBatch, ref: DispatchBatch) -> None:
    for name in ARRAYS:
        a, b = getattr(fast, name), getattr(ref, name)
        assert a.dtype == b.dtype, name
        assert np.array_equal(a, b), (name, a, b)
    assert fast.topics == ref.topics
    assert (fast.next_offset, fast.stop) == (ref.next_offset, ref.stop), (fast.error, ref.error)
    assert (fast.error is None) == (ref.error is None), (fast.error, ref.error)
    assert fast.skipped == ref.skipped
    assert np.array_equal(fast.multi_row, ref.multi_row) and fast.multi_row.dtype == ref.multi_row.dtype
    assert fast.multi_value == ref.multi_value


@pytest.fixture(scope="module", params=CASES)
def case(request: pytest.FixtureRequest) -> FixtureCase:
    return load_case(request.param)


# ----------------------------------------------------------------------------- raw record builder
def raw_record(
    topic: bytes,
    props: bytes,
    body: bytes = b"",
    *,
    v2: bool = False,
    sys_flag: int = 0,
    queue_id: int = 0,
    queue_offset: int = 0,
    store_ts: int = 1_700_000_000_000,
    crc: int | None = None,
    total_delta: int = 0,
) -> bytes:
    """A record from raw bytes (so topics and properties may hold invalid UTF-8)."""
    bw = 20 if sys_flag & 0x10 else 8
    sw = 20 if sys_flag & 0x20 else 8
    total = 48 + bw + 8 + sw + 12 + 4 + len(body) + (2 if v2 else 1) + len(topic) + 2 + len(props)
    if crc is None:
        crc = zlib.crc32(body) & 0x7FFFFFFF
    out = struct.pack(
        ">iiiiiqqiq", total + total_delta, MAGIC_V2 if v2 else MAGIC_V1, crc, queue_id, 0, queue_offset, 0, sys_flag, 1
    )
    out += bytes(range(1, bw + 1)) + struct.pack(">q", store_ts) + bytes(range(7, sw + 7))
    out += struct.pack(">iqi", 0, 0, len(body)) + body
    out += struct.pack(">h", len(topic)) if v2 else struct.pack(">b", len(topic))
    out += topic + struct.pack(">h", len(props)) + props
    return out


# ----------------------------------------------------------------------------- scan: fixtures
@pytest.mark.parametrize("check_crc", [False, True])
def test_scan_fast_equals_reference_on_fixtures(case: FixtureCase, check_crc: bool) -> None:
    for base, data in case.segments():
        for max_records in (None, 0, 1, 5):
            fast = scan_segment(data, base, 0, len(data), check_crc=check_crc, max_records=max_records)
            ref = scan_segment_py(data, base, 0, len(data), check_crc=check_crc, max_records=max_records)
            assert_same_batch(fast, ref)
        # memory-mapped style inputs: numpy array and memoryview, and odd sub-ranges
        arr = np.frombuffer(data, np.uint8)
        for a, b in ((0, 100), (0, 1000), (173, len(data)), (0, len(data) - 3)):
            assert_same_batch(scan_segment(arr, base, a, b), scan_segment_py(data, base, a, b))
            assert_same_batch(scan_segment(memoryview(data), base, a, b), scan_segment_py(data, base, a, b))


def test_scan_fast_store_walk_matches_reference(case: FixtureCase) -> None:
    fast = concat_batches(list(scan_store(case, scan_segment)))
    ref = concat_batches(list(scan_store(case, scan_segment_py)))
    for k in fast:
        assert np.array_equal(np.asarray(fast[k]), np.asarray(ref[k])), k
    assert len(fast["off"]) == len(case.messages)


@pytest.mark.parametrize("scan", twins("rocketmq.scan_segment"))
def test_scan_store_walk_matches_manifest(case: FixtureCase, scan: Any) -> None:
    cols = concat_batches(list(scan_store(case, scan)))
    msgs = sorted(case.messages, key=lambda m: m["physicalOffset"])
    assert cols["off"] == [m["physicalOffset"] for m in msgs]
    assert cols["size"] == [m["size"] for m in msgs]
    assert cols["qid"] == [m["queueId"] for m in msgs]
    assert cols["qoff"] == [m["queueOffset"] for m in msgs]
    assert cols["ts"] == [m["storeTimestamp"] for m in msgs]
    assert cols["sys"] == [m["sysFlag"] for m in msgs]
    assert cols["topic"] == [m["topic"] for m in msgs]


def test_scan_rejects_bad_range() -> None:
    with pytest.raises(InvalidArgumentError):
        scan_segment(b"\0" * 10, 0, 0, 11)
    with pytest.raises(InvalidArgumentError):
        scan_segment(b"\0" * 10, 0, 5, 4)


@pytest.mark.parametrize("positions", twins("rocketmq.record_positions"))
def test_record_positions_on_fixtures(case: FixtureCase, positions: Any) -> None:
    blanks = {b["physicalOffset"] for b in case.manifest["blankRecords"]}
    for base, data in case.segments():
        pos, sizes, stop, nxt = positions(data, 0, len(data))
        batch = scan_segment_py(data, base, 0, len(data))
        assert np.array_equal(pos + base, batch.commit_log_offset)
        assert np.array_equal(sizes, batch.size)
        assert stop == batch.stop
        assert nxt + base == batch.next_offset
        assert (stop == STOP_BLANK) == (base + nxt in blanks)


@pytest.mark.parametrize("decode", twins("rocketmq.decode_columns"))
def test_decode_columns_on_fixtures(case: FixtureCase, decode: Any) -> None:
    by_offset = {m["physicalOffset"]: m for m in case.messages}
    seen = 0
    for base, data in case.segments():
        pos, _, _, _ = record_positions(data, 0, len(data))
        cols = decode(data, base, pos)
        for i, p in enumerate(pos.tolist()):
            m = by_offset[base + p]
            seen += 1
            assert cols["topic"][i] == m["topic"]
            assert cols["body"][i].hex() == m["bodyHex"]
            assert int(cols["flag"][i]) == m["flag"]
            assert int(cols["queueId"][i]) == m["queueId"]
            assert int(cols["queueOffset"][i]) == m["queueOffset"]
            assert int(cols["commitLogOffset"][i]) == m["physicalOffset"]
            assert int(cols["size"][i]) == m["size"]
            assert int(cols["bornTimestamp"][i]) == m["bornTimestamp"]
            assert int(cols["storeTimestamp"][i]) == m["storeTimestamp"]
            assert cols["bornHost"][i] == m["bornHost"]
            assert cols["storeHost"][i] == m["storeHost"]
            assert int(cols["sysFlag"][i]) == m["sysFlag"]
            assert int(cols["reconsumeTimes"][i]) == m["reconsumeTimes"]
            assert int(cols["bodyCRC"][i]) == m["bodyCRC"]
            assert int(cols["preparedTransactionOffset"][i]) == m["preparedTransactionOffset"]
            assert int(cols["magic"][i]) == {"v1": MAGIC_V1, "v2": MAGIC_V2}[m["magic"]]
            assert cols["keys"][i] == [k for k in (m["keys"] or "").split(" ") if k]
            assert cols["tags"][i] == (m["tags"] or None)
            assert cols["uniqKey"][i] == m["uniqKey"]
            assert cols["properties"][i] == decode_record(data, p).properties
        no_body = decode(data, base, pos, include_body=False)
        assert "body" not in no_body
    assert seen == len(case.messages)


@pytest.mark.parametrize("decode", twins("rocketmq.decode_columns"))
def test_decode_columns_rejects_non_records(case: FixtureCase, decode: Any) -> None:
    base, data = case.segments()[0]
    with pytest.raises(CorruptDataError):
        decode(data, base, np.array([0, 3], np.int64))
    with pytest.raises(CorruptDataError):
        decode(data, base, np.array([len(data) + 5], np.int64))


@pytest.mark.parametrize("decode", twins("rocketmq.decode_columns"))
def test_decode_columns_equal_on_random_segments(decode: Any) -> None:
    rng = np.random.default_rng(11)
    recs = [raw_record(b"T%d" % (i % 3), b"KEYS\x01k%d x\x02TAGS\x01t\x02UNIQ_KEY\x01u%d\x02" % (i, i),
                       rng.bytes(int(rng.integers(0, 50))), v2=bool(i % 2), sys_flag=int(rng.integers(0, 0x40)),
                       queue_id=i % 4, queue_offset=i) for i in range(40)]  # fmt: skip
    data = b"".join(recs)
    pos, _, _, _ = record_positions(data, 0, len(data))
    got = decode(data, 1 << 30, pos)
    exp = decode_columns(data, 1 << 30, pos) if decode is not decode_columns else decode_columns_py(data, 1 << 30, pos)
    assert got.keys() == exp.keys()
    for k in got:
        if isinstance(got[k], np.ndarray):
            assert got[k].dtype == exp[k].dtype and np.array_equal(got[k], exp[k]), k
        else:
            assert got[k] == exp[k], k


# ----------------------------------------------------------------------------- scan: random data
_name = st.sampled_from([b"KEYS", b"TAGS", b"UNIQ_KEY", b"DELAY", b"WAIT", b"K", b"KEY", b"", b"\xff",
                         b"INNER_MULTI_DISPATCH", b"INNER_MULTI_QUEUE_OFFSET", b"INNER_MULTI_DISPATC"])
_value = st.one_of(
    st.sampled_from([b"a", b"b c", b"  x  y ", b"5", b"18", b"0", b"99", b"+3", b" 4", b"1_0", b"", b"\xe2\x82", b"\xc3\xa9"]),
    st.binary(max_size=8).filter(lambda b: b"\x01" not in b and b"\x02" not in b),
    st.text(max_size=6).map(lambda s: s.encode("utf-8", "surrogatepass")),
)
_topic = st.one_of(
    st.sampled_from([b"TopicTest", b"SCHEDULE_TOPIC_XXXX", b"t\xff", b"t\xfe", b"\xf0\x9f\x98\x80", b"x" * 130]),
    st.binary(min_size=0, max_size=12),
)


@st.composite
def _props(draw: st.DrawFn) -> bytes:
    parts = []
    for _ in range(draw(st.integers(0, 6))):
        name, value = draw(_name), draw(_value)
        sep = draw(st.sampled_from([b"\x01", b"\x01", b"\x01", b""]))
        parts.append(name + sep + value)
    tail = draw(st.sampled_from([b"", b"\x02"]))
    return b"\x02".join(parts) + tail


@st.composite
def _segment(draw: st.DrawFn) -> tuple[bytes, int, int]:
    out = bytearray()
    for _ in range(draw(st.integers(0, 6))):
        topic = draw(_topic)
        v2 = len(topic) > 127 or draw(st.booleans())
        body = draw(st.binary(max_size=40))
        sys_flag = draw(st.integers(0, 0xFF))
        bad_crc = draw(st.integers(0, 9)) == 0
        delta = draw(st.sampled_from([0] * 8 + [1, 3]))
        out += raw_record(
            topic,
            draw(_props()),
            body,
            v2=v2,
            sys_flag=sys_flag,
            queue_id=draw(st.integers(0, 3)),
            queue_offset=draw(st.integers(0, 2**40)),
            store_ts=draw(st.integers(0, 2**45)),
            crc=(12345 if bad_crc else None),
            total_delta=delta,
        )
        if delta:
            out += bytes(delta)
    kind = draw(st.integers(0, 5))
    if kind == 1:
        out += struct.pack(">ii", 100, -875286124) + bytes(92)  # blank record
    elif kind == 2:
        out += draw(st.binary(max_size=30))  # garbage tail
    elif kind == 3 and out:
        for _ in range(draw(st.integers(1, 3))):
            out[draw(st.integers(0, len(out) - 1))] = draw(st.integers(0, 255))
    elif kind == 4:
        out += bytes(draw(st.integers(0, 20)))
    if kind == 5 and out:
        out = out[: draw(st.integers(0, len(out)))]
    n = len(out)
    start = draw(st.sampled_from([0, 0, 0, min(1, n)]))
    end = draw(st.one_of(st.just(n), st.integers(start, n)))
    return bytes(out), start, end


@settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
@given(_segment(), st.booleans(), st.booleans(), st.sampled_from([None, 0, 1, 3]))
def test_scan_fast_equals_reference_on_random(
    seg: tuple[bytes, int, int], check_crc: bool, skip: bool, max_records: int | None
) -> None:
    data, start, end = seg
    kw = {"check_crc": check_crc, "skip_length_mismatch": skip, "max_records": max_records}
    fast = scan_segment(data, 1 << 30, start, end, **kw)
    ref = scan_segment_py(data, 1 << 30, start, end, **kw)
    assert_same_batch(fast, ref)
    pos, sizes, stop, nxt = record_positions(data, start, end)
    assert stop in (STOP_END, STOP_BLANK, STOP_INVALID)
    assert start <= nxt <= end and len(pos) == len(sizes)
    if len(pos):
        assert int(pos[-1]) + int(sizes[-1]) == nxt


@settings(max_examples=150, deadline=None)
@given(st.binary(max_size=300), st.integers(0, 300), st.integers(0, 300))
def test_kernels_survive_garbage(data: bytes, a: int, b: int) -> None:
    a, b = min(a, len(data)), min(b, len(data))
    a, b = min(a, b), max(a, b)
    assert_same_batch(scan_segment(data, 0, a, b, check_crc=True), scan_segment_py(data, 0, a, b, check_crc=True))
    record_positions(data, a, b)
    try:
        decode_columns(data, 0, np.arange(0, len(data), 7, dtype=np.int64))
    except CorruptDataError:
        pass


def test_delay_topic_fallback_and_custom_table() -> None:
    recs = [
        raw_record(b"SCHEDULE_TOPIC_XXXX", b"DELAY\x01" + v + b"\x02TAGS\x01tg\x02", store_ts=10_000)
        for v in (b"3", b"+3", b" 3", b"0", b"999", b"x", b"\xd9\xa5")
    ]
    data = b"".join(recs)
    for table in (None, {1: 7, 3: 11}, {}, {2: 5, -1: 3}):
        kw = {} if table is None else {"delay_table": table}
        assert_same_batch(scan_segment(data, 0, 0, len(data), **kw), scan_segment_py(data, 0, 0, len(data), **kw))
    batch = scan_segment(data, 0, 0, len(data))
    assert batch.tags_code[:2].tolist() == [20_000, 20_000]  # level 3 = 10 s, int("+3") == 3


def test_topics_merged_by_decoded_text() -> None:
    data = raw_record(b"t\xff", b"KEYS\x01a\x02") + raw_record(b"t\xfe", b"KEYS\x01a\x02") + raw_record(b"u", b"")
    fast = scan_segment(data, 0, 0, len(data))
    assert fast.topics == ["t\ufffd", "u"]
    assert fast.topic_id.tolist() == [0, 0, 1]
    assert fast.key_hash[0] == fast.key_hash[1] == index_key_hash("t\ufffd#a")
    assert_same_batch(fast, scan_segment_py(data, 0, 0, len(data)))


def test_crc_kernel_matches_zlib() -> None:
    rng = np.random.default_rng(5)
    data = rng.integers(0, 256, 5000, dtype=np.uint8)
    for a, b in ((0, 0), (0, 1), (3, 11), (0, 5000), (17, 4999)):
        assert crc32_span(data, a, b, CRC_TABLE) == zlib.crc32(data[a:b].tobytes())


@pytest.mark.parametrize("crc_spans", twins("crc.crc32_spans"))
@pytest.mark.parametrize("use_isal", [None, False])
def test_crc32_spans_match_zlib(crc_spans: Any, use_isal: bool | None) -> None:
    rng = np.random.default_rng(6)
    data = rng.integers(0, 256, 5000, dtype=np.uint8)
    starts = np.array([0, 0, 3, 0, 17, 100, 4000], np.int64)
    lens = np.array([0, 1, 8, 5000, 4982, 17, 999], np.int64)
    got = crc_spans(data, starts, lens, use_isal=use_isal)
    assert got.dtype == np.int64
    assert got.tolist() == [zlib.crc32(data[a : a + n].tobytes()) for a, n in zip(starts, lens, strict=True)]
    with pytest.raises(InvalidArgumentError):
        crc_spans(data, np.array([4999]), np.array([2]))


# ----------------------------------------------------------------------------- java hash kernel
_utf8_pieces = st.sampled_from(
    [b"a", b"Z", b" ", b"#", b"\x80", b"\xc2", b"\xc3\xa9", b"\xe0", b"\xe0\xa0", b"\xed\xa0\x80", b"\xe2\x82\xac",
     b"\xef\xbf\xbf", b"\xf0", b"\xf0\x90", b"\xf0\x9f\x98\x80", b"\xf4\x8f\xbf\xbf", b"\xf4\x90\x80\x80", b"\xf5",
     b"\xff", b"\xbf", b"\xc0\xaf"]
)  # fmt: skip


@pytest.mark.parametrize(("hash_spans", "index_hash_spans"), twin_pairs("javahash.hash_spans", "javahash.index_hash_spans"))
@settings(max_examples=400, deadline=None)
@given(st.lists(st.lists(_utf8_pieces, max_size=12).map(b"".join), min_size=1, max_size=8), st.binary(max_size=20))
def test_hash_spans_equals_reference(hash_spans: Any, index_hash_spans: Any, pieces: list[bytes], raw: bytes) -> None:
    spans = [*pieces, raw]
    buf = b"".join(spans)
    lengths = np.array([len(p) for p in spans], np.int64)
    starts = np.concatenate([[0], np.cumsum(lengths)[:-1]]).astype(np.int64)
    assert hash_spans(buf, starts, lengths).tolist() == [java_bytes_hashcode(p) for p in spans]
    # index hash of "topic#key" with the first span as topic and every span as key
    ts = np.zeros(len(spans), np.int64)
    tl = np.full(len(spans), lengths[0], np.int64)
    expected = [
        index_key_hash(spans[0].decode("utf-8", "replace") + "#" + p.decode("utf-8", "replace")) for p in spans
    ]
    assert index_hash_spans(buf, ts, tl, starts, lengths).tolist() == expected


@pytest.mark.parametrize(("hash_strings", "index_hash_strings"),
                         twin_pairs("javahash.hash_strings", "javahash.index_hash_strings"))
@settings(max_examples=300, deadline=None)
@given(st.lists(st.text(max_size=15), max_size=10))
def test_hash_strings_equals_reference(hash_strings: Any, index_hash_strings: Any, strings: list[str]) -> None:
    assert hash_strings(strings).tolist() == [java_string_hashcode(s) for s in strings]
    assert index_hash_strings(strings).tolist() == [index_key_hash(s) for s in strings]


def test_hash_special_values() -> None:
    assert hash_strings(["polygenelubricants", "TopicTest#q493u|ke", "", "Aa", "BB"]).tolist() == [
        -(2**31),
        -(2**31),
        0,
        2112,
        2112,
    ]
    assert index_hash_strings(["TopicTest#q493u|ke"]).tolist() == [0]
    with pytest.raises(InvalidArgumentError):
        hash_spans(b"abc", np.array([2]), np.array([2]))


def test_as_u8_views_without_copy() -> None:
    data = bytearray(b"abcd")
    view = as_u8(data)
    data[0] = ord("z")
    assert view[0] == ord("z")
    assert check_record(b"\0" * 3).size == -1


# ----------------------------------------------------------------------------- IndexFile kernels
@pytest.mark.parametrize("put", twins("rocketmq.bulk_put"))
def test_index_files_rebuilt_byte_for_byte_bulk(case: FixtureCase, put: Any) -> None:
    cols = concat_batches(list(scan_store(case, scan_segment)))
    kh, phy, ts = index_inputs(cols)
    slots, items = case.config["maxHashSlotNum"], case.config["maxIndexNum"]
    built = build_index_files(kh, phy, ts, slots, items, bulk_put=put)
    assert [n for n, _ in built] == [f["name"] for f in case.manifest["indexFiles"]]
    for name, data in built:
        assert data == case.store_file(f"index/{name}"), name
    # and the reference builder agrees
    assert build_index_files(kh, phy, ts, slots, items) == build_index_files(kh, phy, ts, slots, items, bulk_put)


@pytest.mark.parametrize("select", twins("rocketmq.select_many"))
def test_select_many_replays_fixture_queries(case: FixtureCase, select: Any) -> None:
    slots, items = case.config["maxHashSlotNum"], case.config["maxIndexNum"]
    for meta in case.manifest["indexFiles"]:
        buf = np.frombuffer(case.store_file(f"index/{meta['name']}"), np.uint8)
        header = header_array(IndexHeader.decode(buf.tobytes()))
        for q in case.manifest["queries"]:
            per_file = next(p for p in q["perFile"] if p["file"] == meta["name"])
            if not per_file["isTimeMatched"]:
                continue
            kh = index_hash_strings([q["indexKey"], q["indexKey"]])
            max_num = min(q["maxNum"], case.config["maxMsgsNumBatch"])
            offs, splits = select(buf, slots, items, header, kh, max_num, q["begin"], q["end"])
            assert offs[splits[0] : splits[1]].tolist() == per_file["selectPhyOffset"]
            assert offs[splits[1] : splits[2]].tolist() == per_file["selectPhyOffset"]
            ref = select_many_py(buf, slots, items, header, kh, max_num, q["begin"], q["end"])
            assert np.array_equal(offs, ref[0]) and np.array_equal(splits, ref[1])


_ts = st.one_of(
    st.integers(1_700_000_000_000, 1_700_000_100_000),
    st.sampled_from([0, -5, 1, 2**40, 1_699_000_000_000, 1_700_000_000_000 + 2**31 * 1000 + 7000]),
)


@st.composite
def _index_run(draw: st.DrawFn) -> tuple[int, int, np.ndarray, np.ndarray, np.ndarray, tuple[int, int]]:
    slots = draw(st.integers(1, 13))
    items = draw(st.integers(2, 24))
    n = draw(st.integers(0, 80))
    kh = draw(st.lists(st.integers(0, 2**31 - 1) | st.integers(0, 40), min_size=n, max_size=n))
    phy = sorted(draw(st.lists(st.integers(0, 2**40), min_size=n, max_size=n)))
    ts = draw(st.lists(_ts, min_size=n, max_size=n))
    if draw(st.booleans()):
        ts = sorted(ts)
    carry = (draw(st.sampled_from([0, 77])), draw(st.sampled_from([0, 1_699_999_999_000, 1_700_000_050_000])))
    return (
        slots,
        items,
        np.array(kh, np.int32),
        np.array(phy, np.int64),
        np.array(ts, np.int64),
        carry,
    )


@settings(max_examples=250, deadline=None)
@given(_index_run(), st.data())
def test_bulk_put_equals_put_hash_with_rolling(run: tuple, data: st.DataObject) -> None:
    slots, items, kh, phy, ts, carry = run
    size = index_file_size(slots, items)
    garbage = data.draw(st.booleans())
    noise = np.frombuffer(data.draw(st.binary(min_size=size, max_size=size)), np.uint8) if garbage else None
    i = 0
    prev = carry
    while True:
        bufs, headers = [], []
        for _ in range(2):
            b = np.zeros(size, np.uint8)
            if noise is not None:
                b[40:] = noise[40:]  # stale slots/items: the garbage protection must behave the same
            f = IndexFileBuffer(memoryview(b), slots, items, load=False)
            f.carry_over(*prev)
            bufs.append(b)
            headers.append(header_array(f.header))
        # feed the keys in two chunks to exercise ``start``
        split = min(len(kh), i + data.draw(st.integers(0, 5)))
        fast_n = bulk_put(bufs[0], slots, items, headers[0], kh[:split], phy[:split], ts[:split], i)
        fast_n += bulk_put(bufs[0], slots, items, headers[0], kh, phy, ts, i + fast_n)
        ref_n = bulk_put_py(bufs[1], slots, items, headers[1], kh, phy, ts, i)
        assert fast_n == ref_n
        assert np.array_equal(headers[0], headers[1])
        assert np.array_equal(bufs[0], bufs[1])
        # batch lookups on the file just built equal the reference chain walk
        queries = np.concatenate([kh[i : i + ref_n], np.array([0, 1, 2**31 - 1], np.int32)])
        for begin, end in ((0, 2**63 - 1), (1_700_000_000_000, 1_700_000_060_000), (2**41, 2**42)):
            max_num = data.draw(st.integers(0, 5))
            got = select_many(bufs[0], slots, items, headers[0], queries, max_num, begin, end)
            exp = select_many_py(bufs[1], slots, items, headers[1], queries, max_num, begin, end)
            assert np.array_equal(got[0], exp[0]) and np.array_equal(got[1], exp[1])
        i += ref_n
        if i >= len(kh):
            break
        assert headers[0][5] == items  # consumed fewer keys only because the file is full
        prev = (int(headers[0][3]), int(headers[0][1]))


@settings(max_examples=150, deadline=None)
@given(st.integers(1, 8), st.integers(2, 12), st.data())
def test_select_many_on_corrupt_chains(slots: int, items: int, data: st.DataObject) -> None:
    size = index_file_size(slots, items)
    buf = np.frombuffer(bytearray(data.draw(st.binary(min_size=size, max_size=size))), np.uint8)
    header = np.array([data.draw(st.integers(0, 10**13)), 0, 0, 0, 0, data.draw(st.integers(1, items))], np.int64)
    keys = np.array(data.draw(st.lists(st.integers(0, 2**31 - 1), min_size=1, max_size=5)), np.int32)
    begin = data.draw(st.sampled_from([0, -(2**62), 10**13]))
    try:
        exp = select_many_py(buf, slots, items, header, keys, 64, begin, 2**63 - 1)
    except CorruptIndexError:
        with pytest.raises(CorruptIndexError):
            select_many(buf, slots, items, header, keys, 64, begin, 2**63 - 1)
        select_many(buf, slots, items, header, keys, 64, begin, 2**63 - 1, on_corrupt="stop")
        return
    got = select_many(buf, slots, items, header, keys, 64, begin, 2**63 - 1)
    assert np.array_equal(got[0], exp[0]) and np.array_equal(got[1], exp[1])


def test_index_kernels_validate_inputs() -> None:
    buf = np.zeros(index_file_size(4, 4), np.uint8)
    header = np.array([0, 0, 0, 0, 0, 1], np.int64)
    with pytest.raises(CorruptIndexError):
        bulk_put(buf[:-1], 4, 4, header, np.zeros(1, np.int32), np.zeros(1), np.zeros(1))
    with pytest.raises(CorruptIndexError):
        bulk_put(buf, 4, 4, np.array([0, 0, 0, 0, 0, 9], np.int64), np.zeros(1, np.int32), np.zeros(1), np.zeros(1))
    with pytest.raises(InvalidArgumentError):
        bulk_put(buf, 4, 4, header, np.zeros(2, np.int32), np.zeros(1), np.zeros(1))
    assert bulk_put(buf, 4, 4, header, np.arange(5, dtype=np.int32), np.arange(5), np.full(5, 7)) == 3
    assert header.tolist() == [7, 7, 0, 2, 3, 4]
