"""The kafka-log record-body kernels (each test over both implementations), fast vs generic reader."""

from __future__ import annotations

import shutil
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from kafka_log_support import arrow_rows, write_partition

from kernel_twins import twins
from mqstore.errors import CorruptDataError, CrcMismatchError
from mqstore.formats.kafka import SimpleRecord, encode_batch
from mqstore.kernels.kafka.batches import scan_batches
from mqstore.kernels.kafka.records import (
    ERR_CORRUPT,
    ERR_TRUNCATED,
    ERR_UNSUPPORTED,
    OK,
    gather,
    gather_py,
    parse_bodies,
    parse_bodies_py,
)
from mqstore.spark._kafka_plan import OffsetRange
from mqstore.spark._kafka_read import read_arrow, read_rows


def _bodies(batches: list[bytes]) -> tuple[np.ndarray, dict[str, np.ndarray]]:
    data = b"".join(b[61:] for b in batches)
    buf = np.frombuffer(data, np.uint8)
    scans = [scan_batches(b) for b in batches]
    lens = np.array([len(b) - 61 for b in batches], np.int64)
    meta = {
        "bend": np.cumsum(lens),
        "bcount": np.array([s["record_count"][0] for s in scans], np.int64),
        "bbase": np.array([s["base_offset"][0] for s in scans], np.int64),
        "bts": np.array([s["base_timestamp"][0] for s in scans], np.int64),
        "bmax": np.array([s["max_timestamp"][0] for s in scans], np.int64),
        "blogappend": np.array([bool(s["attributes"][0] & 8) for s in scans]),
    }
    meta["bstart"] = meta["bend"] - lens
    return buf, meta


def _parse(buf: np.ndarray, m: dict[str, np.ndarray], lo: int, hi: int, parse: Any = parse_bodies) -> dict:
    return parse(buf, m["bstart"], m["bend"], m["bcount"], m["bbase"], m["bts"], m["bmax"], m["blogappend"], lo, hi)


def _batches() -> list[bytes]:
    out = []
    off = 0
    for b in range(12):
        recs = [SimpleRecord(value=None if i == 2 else b"v" * (i * 37 % 300), key=None if i % 3 == 0 else b"k%d" % i,
                             headers=[("a", b"1"), ("b", None)][: i % 3], timestamp=1_000 + b * 10 - i)
                for i in range(b % 5 + 1)]
        out.append(encode_batch(recs, base_offset=off, compression=0))
        off += len(recs)
    return out


@pytest.mark.parametrize("parse", twins("kafka.parse_bodies"))
@pytest.mark.parametrize(("lo", "hi"), [(0, 10**9), (3, 17), (20, 21), (50, 60)])
def test_parse_bodies_finds_every_record(parse: Any, lo: int, hi: int) -> None:
    batches = _batches()
    buf, m = _bodies(batches)
    a = _parse(buf, m, lo, hi, parse)
    assert a["error"] == OK
    assert a["offset"].tolist() == [o for o in range(33) if lo <= o < hi]  # 33 records in all
    # the same records as the generic decoder, field by field
    from mqstore.formats.kafka.batch import decode_batch_header, iter_records

    ref = [r for b in batches for r in iter_records(b, decode_batch_header(b, 0)) if lo <= r.offset < hi]
    raw = buf.tobytes()

    def piece(s: int, n: int) -> bytes | None:
        return None if n < 0 else raw[s : s + n]

    assert a["timestamp"].tolist() == [r.timestamp for r in ref]
    assert [piece(s, n) for s, n in zip(a["key_start"], a["key_len"], strict=True)] == [r.key for r in ref]
    assert [piece(s, n) for s, n in zip(a["value_start"], a["value_len"], strict=True)] == [r.value for r in ref]
    hf = a["header_first"].tolist()
    got_h = [[(raw[a["hkey_start"][j] : a["hkey_start"][j] + a["hkey_len"][j]].decode(),
               piece(a["hvalue_start"][j], a["hvalue_len"][j])) for j in range(hf[i], hf[i + 1])]
             for i in range(len(ref))]  # fmt: skip
    assert got_h == [[(h.key, h.value) for h in r.headers] for r in ref]


@settings(max_examples=60, deadline=None)
@given(st.integers(0, 40), st.integers(0, 40))
def test_parse_bodies_equals_twin(lo: int, hi: int) -> None:
    buf, m = _bodies(_batches())
    a = _parse(buf, m, lo, hi, parse_bodies)
    b = _parse(buf, m, lo, hi, parse_bodies_py)
    assert a.keys() == b.keys()
    for k in a:
        assert np.array_equal(a[k], b[k]), k


@pytest.mark.parametrize("gather_fn", twins("kafka.gather"))
def test_gather_copies_the_slices(gather_fn: Any) -> None:
    buf, m = _bodies(_batches())
    a = _parse(buf, m, 0, 10**9)
    raw = buf.tobytes()
    for starts, lens in ((a["key_start"], a["key_len"]), (a["value_start"], a["value_len"]),
                         (a["hvalue_start"], a["hvalue_len"])):
        offsets, data = gather_fn(buf, starts, lens)
        assert offsets.dtype == np.int32 and offsets[0] == 0
        assert data.tobytes() == b"".join(raw[s : s + n] for s, n in zip(starts, lens, strict=True) if n > 0)
        assert np.diff(offsets).tolist() == [max(n, 0) for n in lens.tolist()]
        o2, d2 = gather(buf, starts, lens) if gather_fn is gather_py else gather_py(buf, starts, lens)
        assert np.array_equal(offsets, o2) and np.array_equal(data, d2)


@pytest.mark.parametrize("parse", twins("kafka.parse_bodies"))
@pytest.mark.parametrize(("mutate", "code"), [
    (lambda body: body[:-3], ERR_TRUNCATED),  # the last record runs past its batch
    (lambda body: body + b"\x00", ERR_CORRUPT),  # bytes left after the declared records
    (lambda body: b"\x02" + body[1:], ERR_TRUNCATED),  # first record declares 1 byte: its fields overrun it
])
def test_malformed_bodies_give_the_error(parse: Any, mutate: Any, code: int) -> None:
    batch = encode_batch([SimpleRecord(b"hello", key=b"k"), SimpleRecord(b"world")], base_offset=0)
    body = mutate(batch[61:])
    _, m = _bodies([batch])  # header fields of the intact batch, body replaced
    buf = np.frombuffer(body, np.uint8)
    m["bstart"], m["bend"] = np.zeros(1, np.int64), np.array([len(body)], np.int64)
    r = _parse(buf, m, 0, 10, parse)
    assert (r["error"], r["error_batch"]) == (code, 0)


@pytest.mark.parametrize("parse", twins("kafka.parse_bodies"))
def test_ten_byte_varlong_falls_back(parse: Any) -> None:
    batch = encode_batch([SimpleRecord(b"x", timestamp=0), SimpleRecord(b"y", timestamp=(1 << 62) + 5)],
                         base_offset=0)
    buf, m = _bodies([batch])
    assert _parse(buf, m, 0, 10, parse)["error"] == ERR_UNSUPPORTED


def test_fast_generic_and_reference_readers_agree(tmp_path: Path) -> None:
    exp = write_partition(tmp_path / "t-0", batches=45, topic="t")
    rng = OffsetRange("t", 0, str(tmp_path / "t-0"), 0, 10**6)
    fast = arrow_rows(read_arrow(rng, include_headers=True, max_records=50))
    generic = arrow_rows(read_arrow(rng, include_headers=True, max_records=50, fast=False))
    ref = [dict(zip(("key", "value", "topic", "partition", "offset", "timestamp", "timestampType", "headers"),
                    r, strict=True)) for r in read_rows(rng, include_headers=True)]
    for r in ref:
        r["timestamp"] = int(r["timestamp"].timestamp() * 1000)
    assert fast == generic == ref == exp


def test_corrupt_batch_is_a_typed_error(tmp_path: Path) -> None:
    write_partition(tmp_path / "src-0", batches=10, txn=False, segment_bytes=1 << 20, topic="src")
    d = tmp_path / "c-0"
    shutil.copytree(tmp_path / "src-0", d)
    log = next(d.glob("*.log"))
    data = bytearray(log.read_bytes())
    second = int(scan_batches(bytes(data))["position"][1])
    data[second + 70] ^= 0xFF  # inside the records of the second batch: CRC mismatch
    log.write_bytes(bytes(data))
    rng = OffsetRange("c", 0, str(d), 0, 10**6)
    for fast in (True, False):
        with pytest.raises(CrcMismatchError) as ei:
            list(read_arrow(rng, fast=fast))
        assert ei.value.offset == second and str(log) in str(ei.value)
    assert isinstance(ei.value, CorruptDataError)


def test_legacy_messages_then_v2_batches(tmp_path: Path) -> None:
    from mqstore.formats.kafka.batch import encode_legacy_message

    d = tmp_path / "old-0"
    d.mkdir()
    data = b"".join(encode_legacy_message(i, b"m%d" % i, key=None if i % 2 else b"k", magic=i % 2, timestamp=500 + i)
                    for i in range(6))
    data += encode_batch([SimpleRecord(b"new%d" % i, timestamp=900 + i) for i in range(4)], base_offset=6)
    (d / "00000000000000000000.log").write_bytes(data)
    rng = OffsetRange("old", 0, str(d), 2, 9)
    fast = arrow_rows(read_arrow(rng, include_headers=True))
    ref = [(r[4], r[1], r[6]) for r in read_rows(rng, include_headers=True)]
    assert [(r["offset"], r["value"], r["timestampType"]) for r in fast] == ref
    assert ref == [(2, b"m2", -1), (3, b"m3", 0), (4, b"m4", -1), (5, b"m5", 0), (6, b"new0", 0), (7, b"new1", 0),
                   (8, b"new2", 0)]
    assert [r["timestamp"] for r in fast][1::2][:2] == [503, 505]  # magic 1 keeps its timestamp
