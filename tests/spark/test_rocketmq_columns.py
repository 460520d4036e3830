"""The vectorised Arrow column builder (``mqstore.kernels.rocketmq.columns``) against its pure-Python
twin (``decode_columns`` + ``columns_to_arrow``) on broker fixtures and generated records."""

from __future__ import annotations

import random
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pytest

from kernel_twins import twins
from mqstore.formats.rocketmq.record import Host, MessageRecord, decode_record, encode_record
from mqstore.kernels.rocketmq.columns import arrow_columns, decode_columns
from mqstore.kernels.rocketmq.framing import record_positions
from mqstore.spark._rocketmq_read import (
    ROCKETMQ_COLUMNS,
    columns_to_arrow,
    rocketmq_arrow_batches,
    rocketmq_arrow_schema,
)
from mqstore.spark._rocketmq_store import list_segments


def fast_batch(buf: bytes | np.ndarray, base: int, pos: np.ndarray, include_body: bool = True) -> pa.RecordBatch | None:
    cols = arrow_columns(buf, base, pos, broker_name="brøker-a", include_body=include_body)
    if cols is None:
        return None
    return pa.RecordBatch.from_arrays([cols[c] for c in ROCKETMQ_COLUMNS], schema=rocketmq_arrow_schema())


def slow_batch(buf: bytes | np.ndarray, base: int, pos: np.ndarray, include_body: bool = True) -> pa.RecordBatch:
    cols = decode_columns(buf, base, pos, include_body=include_body)
    return columns_to_arrow(cols, "brøker-a", include_body=include_body)


def assert_same(buf: bytes | np.ndarray, base: int, pos: np.ndarray) -> pa.RecordBatch:
    for include_body in (True, False):
        fast = fast_batch(buf, base, pos, include_body)
        slow = slow_batch(buf, base, pos, include_body)
        assert fast is not None
        fast.validate(full=True)
        assert fast.schema == slow.schema
        assert fast.num_rows == slow.num_rows == len(pos)
        assert fast.equals(slow)
        assert fast.to_pylist() == slow.to_pylist()
        for name in ROCKETMQ_COLUMNS:
            assert fast.column(name).null_count == slow.column(name).null_count, name
    return fast


@pytest.mark.parametrize("arrow", twins("rocketmq.arrow_columns"))
def test_arrow_columns_hold_the_fixture_records(shared_fixtures: Path, arrow: Any) -> None:
    seg = list_segments(str(shared_fixtures / "rocketmq" / "basic" / "store"))[0]
    data = Path(seg.path).read_bytes()
    pos, _sizes, _stop, _ = record_positions(np.frombuffer(data, np.uint8), 0, len(data))
    cols = arrow(data, seg.base, pos, broker_name="b")
    assert cols is not None and set(cols) == set(ROCKETMQ_COLUMNS)
    recs = [decode_record(data, int(p)) for p in pos]
    assert cols["topic"].to_pylist() == [r.topic for r in recs]
    assert cols["body"].to_pylist() == [bytes(r.body) for r in recs]
    assert cols["queueId"].to_pylist() == [r.queue_id for r in recs]
    assert cols["queueOffset"].to_pylist() == [r.queue_offset for r in recs]
    assert cols["commitLogOffset"].to_pylist() == [seg.base + int(p) for p in pos]
    assert cols["storeTimestamp"].to_pylist() == [r.store_timestamp for r in recs]
    assert cols["bornHost"].to_pylist() == [str(r.born_host) for r in recs]
    assert cols["tags"].to_pylist() == [r.tags for r in recs]
    assert cols["uniqKey"].to_pylist() == [r.uniq_key for r in recs]
    assert cols["keys"].to_pylist() == [r.keys for r in recs]
    assert [dict(m) for m in cols["properties"].to_pylist()] == [r.properties for r in recs]
    assert cols["brokerName"].to_pylist() == ["b"] * len(recs)
    assert arrow(data, seg.base, np.array([3], np.int64), broker_name="b") is None  # not a record


@pytest.mark.parametrize("case", ("basic", "prop_crc"))
def test_fixtures_equal_old_path(shared_fixtures: Path, case: str) -> None:
    segs = list_segments(str(shared_fixtures / "rocketmq" / case / "store"))
    rows = 0
    for s in segs:
        data = Path(s.path).read_bytes()
        pos, _sizes, _stop, _ = record_positions(np.frombuffer(data, np.uint8), 0, len(data))
        assert len(pos) > 0
        b = assert_same(data, s.base, pos)
        assert_same(data, s.base, pos[::-1].copy())  # any order of positions
        assert_same(data, s.base, pos[1::3].copy())
        rows += b.num_rows
        if case == "prop_crc":
            assert all("__CRC32#" in p for p in (dict(m) for m in b.column("properties").to_pylist()))
    assert rows > 0


def encode_all(recs: list[MessageRecord]) -> tuple[bytearray, np.ndarray]:
    buf = bytearray()
    pos = []
    for r in recs:
        pos.append(len(buf))
        r.commit_log_offset = 1000 + len(buf)
        buf += encode_record(r)
    return buf, np.array(pos, np.int64)


PROPERTY_TEXTS = [
    "",
    "\x01\x02",
    "a\x01\x02",
    "\x01b\x02",
    "a\x01b",  # no trailing separator
    "ab\x01",
    "a\x01b\x01c\x02",  # the value holds a \x01
    "\x02\x02a\x01b\x02\x02",
    "a\x011\x02b\x012\x02a\x013\x02",  # duplicate: first position, last value
    "KEYS\x01  k1  k2 k3 \x02TAGS\x01tagA\x02UNIQ_KEY\x01U1\x02",
    "KEYS\x01 \x02TAGS\x01\x02UNIQ_KEY\x01\x02",  # a KEYS of spaces, empty TAGS/UNIQ_KEY dropped
    "KEYS\x01a\x02KEYS\x01b c\x02TAGS\x01x\x02TAGS\x01y\x02",
    "名前\x01値 です\x02KEYS\x01鍵1 鍵2\x02TAGS\x01😀\x02",
    "x\x01é\x02\x01\x01\x02KEYSX\x01no\x02KEY\x01no\x02",
    "UNIQ_KEY\x01AC1100\x02",
]

HOSTS = [
    Host("127.0.0.1", 0),
    Host("10.200.3.255", 10911),
    Host("0.0.0.0", 2147483647),
    Host("1.2.3.4", -5),
    Host("::1", 8080),
    Host("2001:db8:0:0:0:ff00:42:8329", 65535),
    Host("fe80::abcd:ef01", -2147483648),
]


def generated() -> list[MessageRecord]:
    rng = random.Random(7)
    tokens = ["KEYS", "TAGS", "UNIQ_KEY", "a", "bb", "é", "\x01", "\x02", " ", "😀", "\x01", "\x02"]
    texts = list(PROPERTY_TEXTS) + ["".join(rng.choice(tokens) for _ in range(rng.randrange(0, 30))) for _ in range(400)]
    topics = ["t", "orders", "トピック", "x" * 200, ""]  # 200 chars: magic v2
    recs = []
    for i, text in enumerate(texts):
        recs.append(MessageRecord(
            topic=topics[i % len(topics)], body=bytes(rng.randrange(256) for _ in range(rng.randrange(0, 40))),
            queue_id=i % 7, flag=rng.randrange(-5, 5), queue_offset=i, sys_flag=(i % 3) * 4,
            born_timestamp=1_700_000_000_000 + i, born_host=HOSTS[(i // 3) % len(HOSTS)],  # runs of one host
            store_timestamp=1_700_000_000_500 + i, store_host=HOSTS[(i * 3 + 1) % len(HOSTS)],
            reconsume_times=i % 4, properties_text=text,
        ))  # fmt: skip
    return recs


def test_generated_records_equal_old_path() -> None:
    buf, pos = encode_all(generated())
    b = assert_same(bytes(buf), 1 << 30, pos)
    assert "[0000:0000:0000:0000:0000:0000:0000:0001]:8080" in b.column("bornHost").to_pylist()
    assert "1.2.3.4:-5" in b.column("bornHost").to_pylist()
    row = b.slice(8, 1).to_pylist()[0]
    assert row["properties"] == [("a", "3"), ("b", "2")]
    row = b.slice(9, 1).to_pylist()[0]
    assert (row["keys"], row["tags"], row["uniqKey"]) == (["k1", "k2", "k3"], "tagA", "U1")
    row = b.slice(0, 1).to_pylist()[0]
    assert (row["properties"], row["keys"], row["tags"], row["uniqKey"]) == ([], [], None, None)
    assert_same(bytes(buf), 0, pos[:0].copy())  # no rows
    assert_same(bytes(buf), 0, pos[5:6].copy())


def patched(text_marker: str, raw: bytes, topic: str = "t") -> tuple[bytes, np.ndarray]:
    """Records whose properties hold ``raw`` (possibly invalid UTF-8) where ``text_marker`` was."""
    recs = generated()[:20]
    recs[3].properties_text = "KEYS\x01k1 k2\x02" + text_marker
    recs[3].topic = topic
    buf, pos = encode_all(recs)
    i = buf.index(text_marker.encode())
    assert len(raw) == len(text_marker.encode())
    buf[i : i + len(raw)] = raw
    return bytes(buf), pos


@pytest.mark.parametrize(
    ("marker", "raw"),
    [
        ("n\x01vvvv\x02", b"n\x01v\xff\xfev\x02"),  # invalid value
        ("nn\x01v\x02", b"n\xc3\x01v\x02"),  # truncated sequence in the name
        ("n\x01vv\x02", b"n\x01\xe2\x82\x02"),  # truncated at the pair's end
        ("n\x01vvvvv", b"n\x01v\xed\xa0\x80v"),  # encoded surrogate
    ],
)
def test_invalid_utf8_falls_back_to_the_old_path(tmp_path: Path, marker: str, raw: bytes) -> None:
    buf, pos = patched(marker, raw)
    assert fast_batch(buf, 0, pos) is None
    seg = tmp_path / "00000000000000000000"
    seg.write_bytes(buf)
    got = pa.Table.from_batches(list(rocketmq_arrow_batches(seg, broker_name="brøker-a")))
    want = slow_batch(buf, 0, pos)
    assert got.equals(pa.Table.from_batches([want]))
    assert "\ufffd" in str(want.column("properties").to_pylist()[3])


def test_invalid_utf8_in_a_dropped_pair_keeps_the_fast_path() -> None:
    buf, pos = patched("n\x01\x02zz\x01\x02", b"n\x01\x02\xff\xff\x01\x02")  # both pairs have empty values
    assert_same(buf, 0, pos)


def test_invalid_utf8_topic_falls_back() -> None:
    recs = generated()[:4]
    recs[2].topic = "abcd"
    buf, pos = encode_all(recs)
    i = buf.index(b"abcd")
    buf[i : i + 2] = b"\xc3\x28"
    assert fast_batch(bytes(buf), 0, pos) is None
    assert slow_batch(bytes(buf), 0, pos).column("topic")[2].as_py() == "\ufffd(cd"


def test_unreadable_position_returns_none() -> None:
    buf, pos = encode_all(generated()[:4])
    assert fast_batch(bytes(buf), 0, np.array([pos[1] + 1], np.int64)) is None
    assert fast_batch(bytes(buf), 0, np.array([len(buf)], np.int64)) is None


def test_arrow_batches_use_fast_path_and_split(tmp_path: Path) -> None:
    buf, pos = encode_all(generated())
    seg = tmp_path / "00000000000001073741824"
    seg.write_bytes(buf)
    for include_body in (True, False):
        batches = list(rocketmq_arrow_batches(seg, broker_name="brøker-a", include_body=include_body, max_rows=37))
        assert [b.num_rows for b in batches[:-1]] == [37] * (len(batches) - 1)
        got = pa.Table.from_batches(batches)
        want = pa.Table.from_batches([slow_batch(bytes(buf), 1 << 30, pos, include_body)])
        assert got.equals(want)
