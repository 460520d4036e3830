"""Compiled kernels and their pure-Python twins on the same inputs."""

from __future__ import annotations

import random
from typing import Any

import numpy as np
import pytest
from kafka_support import CASES, batch, case_dir, load_manifest

from kernel_twins import twins
from mqstore.errors import CorruptDataError, CrcMismatchError, IndexFullError
from mqstore.formats.kafka import encode_legacy_message
from mqstore.kernels.kafka.batches import STOP_BAD_SIZE, STOP_TORN, scan_batches, scan_batches_py
from mqstore.kernels.kafka.index_build import build_index_entries, build_index_entries_py
from mqstore.kernels.kafka.records import decode_records_columnar


def _same(a: dict, b: dict) -> None:
    assert a.keys() == b.keys()
    for k in a:
        if isinstance(a[k], np.ndarray):
            assert a[k].dtype == b[k].dtype and np.array_equal(a[k], b[k]), k
        else:
            assert a[k] == b[k], k


def _inputs() -> list[bytes]:
    out = []
    for c in CASES:
        m = load_manifest(c)
        for s in m["segments"]:
            out.append((case_dir(c) / "segments" / f"{s['name']}.log").read_bytes())
    out.append((case_dir("corrupt_tail_recover") / "corrupted_input" / "00000000000000000000.log").read_bytes())
    legacy = encode_legacy_message(5, b"v0", magic=0) + encode_legacy_message(6, b"v1", b"k", magic=1, timestamp=77)
    out.append(legacy + batch(7))
    rnd = random.Random(3)
    good = b"".join(batch(i, count=rnd.randrange(1, 4)) for i in range(0, 60, 4))
    for cut in (0, 5, 17, 18, 60, len(good) - 1):
        out.append(good[:cut])
    out.append(good + b"\x00" * 8 + b"\x00\x00\x00\x03" + b"\x00" * 20)  # size 3 < 14
    out.append(bytes(rnd.randrange(256) for _ in range(5000)))
    return out


@pytest.mark.parametrize("i", range(len(_inputs())))
def test_scan_twins_agree(i: int) -> None:
    data = _inputs()[i]
    _same(scan_batches(data), scan_batches_py(data))
    if len(data) > 100:
        _same(scan_batches(data, 17), scan_batches_py(data, 17))


@pytest.mark.parametrize("scan", twins("kafka.scan_batches"))
def test_scan_stop_reasons(scan: Any) -> None:
    good = batch(0) + batch(1)
    assert scan(good[:-1])["stop_reason"] == STOP_TORN
    bad = good + b"\x00" * 8 + b"\x00\x00\x00\x03" + b"\x00" * 20
    r = scan(bad)
    assert r["stop_reason"] == STOP_BAD_SIZE and r["valid_end"] == len(good) and r["count"] == 2


@pytest.mark.parametrize("scan", twins("kafka.scan_batches"))
@pytest.mark.parametrize("crcs", twins("kafka.check_crcs"))
def test_scan_legacy_fields(scan: Any, crcs: Any) -> None:
    data = encode_legacy_message(5, b"v0", magic=0) + encode_legacy_message(6, b"v1", b"k", magic=1, timestamp=77)
    r = scan(data)
    assert r["magic"].tolist() == [0, 1] and r["last_offset"].tolist() == [5, 6]
    assert r["max_timestamp"].tolist() == [-1, 77] and r["base_offset"].tolist() == [-1, -1]
    assert crcs(data, r).tolist() == [True, True]


@pytest.mark.parametrize("case", CASES)
def test_build_index_twins_agree(case: str) -> None:
    m = load_manifest(case)
    c = m["config"]
    for s in m["segments"]:
        data = (case_dir(case) / "segments" / f"{s['name']}.log").read_bytes()
        sc = scan_batches(data)
        for interval in (0, 1, c["index_interval_bytes"], 100_000):
            a = build_index_entries(sc, sc["count"], s["base_offset"], interval, c["max_index_size"])
            b = build_index_entries_py(sc, sc["count"], s["base_offset"], interval, c["max_index_size"])
            for k in a:
                assert np.array_equal(a[k], b[k]), (k, interval)


@pytest.mark.parametrize("build", twins("kafka.build_index_entries"))
def test_build_index_full_and_overflow(build: Any) -> None:
    data = b"".join(batch(i) for i in range(50))
    sc = scan_batches(data)
    with pytest.raises(IndexFullError):
        build(sc, sc["count"], 0, 0, 40)
    with pytest.raises(CorruptDataError, match="relative"):
        build(sc, sc["count"], 10, 0, 4096)


@pytest.mark.parametrize("crcs", twins("kafka.check_crcs"))
def test_crc_check_detects_every_flip(crcs: Any) -> None:
    data = bytearray(batch(0, count=3))
    sc = scan_batches(data)
    assert crcs(data, sc).tolist() == [True]
    for pos in range(21, len(data)):
        data[pos] ^= 0x10
        assert crcs(data, sc).tolist() == [False], pos
        data[pos] ^= 0x10


def test_decode_records_columnar_matches_manifest() -> None:
    m = load_manifest("single_default")
    data = (case_dir("single_default") / "segments" / "00000000000000000000.log").read_bytes()
    cols = decode_records_columnar(data)
    expected = [(r["offset"], r["timestamp"]) for b in m["segments"][0]["batches"]
                if not b["control"] for r in b["records"]]
    assert list(zip(cols["offset"].tolist(), cols["timestamp"].tolist(), strict=True)) == expected
    assert len(cols["key"]) == len(cols["value"]) == len(cols["headers"]) == len(expected)
    lat = {r["offset"] for b in m["segments"][0]["batches"] if b["timestamp_type"] == "LogAppendTime"
           for r in b["records"]}
    assert {int(o) for o, t in zip(cols["offset"], cols["timestamp_type"], strict=True) if t == 1} == lat
    with_ctrl = decode_records_columnar(data, include_control=True)
    assert len(with_ctrl["offset"]) == len(expected) + 10
    window = decode_records_columnar(data, start_offset=100, end_offset=200)
    assert window["offset"].min() >= 100 and window["offset"].max() < 200
    import pyarrow as pa

    rb = pa.record_batch({
        "key": pa.array(cols["key"], pa.binary()), "value": pa.array(cols["value"], pa.binary()),
        "offset": cols["offset"], "timestamp": cols["timestamp"], "timestampType": cols["timestamp_type"],
        "headers": pa.array([[{"key": k, "value": v} for k, v in h] for h in cols["headers"]],
                            pa.list_(pa.struct([("key", pa.string()), ("value", pa.binary())]))),
    })
    assert rb.num_rows == len(expected)


def test_decode_records_columnar_rejects_crc_errors() -> None:
    data = (case_dir("corrupt_tail_recover") / "corrupted_input" / "00000000000000000000.log").read_bytes()
    with pytest.raises(CrcMismatchError) as ei:
        decode_records_columnar(data, path="x.log")
    assert ei.value.offset == 234952
