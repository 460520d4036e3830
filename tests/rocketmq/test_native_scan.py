"""The CommitLog scan on every implementation (native C, numba, pure Python) — fixtures and
hypothesis-made records, torn and corrupt ones included — and the one-shot commands on the native
path: no numba import, the same output bytes as on the numba path."""

from __future__ import annotations

import filecmp
import os
import re
import shutil
import struct
import subprocess
import sys
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from kernel_twins import twins
from mqstore.formats.rocketmq.record import MessageRecord, encode_record
from mqstore.kernels import backend
from mqstore.kernels.registry import kernel_impls
from mqstore.kernels.rocketmq import framing
from mqstore.kernels.rocketmq import scan as rocketmq_scan

from . import test_kernels as tk
from .helpers import CASES, FixtureCase, load_case

NATIVE_BUILT = backend.built("_nat_rmq_scan") is not None
SCANS = twins("rocketmq.scan_segment")
FAST = [p for p in SCANS if not p.id.endswith("-reference")]  # numba (and native when built)
REPO = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module", params=CASES)
def case(request: pytest.FixtureRequest) -> FixtureCase:
    return load_case(request.param)


def test_native_module_is_registered_when_built() -> None:
    impls = kernel_impls("rocketmq.scan_segment")
    assert (impls.native is not None) == (NATIVE_BUILT and backend.mode() != "numba")
    if impls.native is not None:
        assert rocketmq_scan.scan_segment is rocketmq_scan.scan_segment_native


# ----------------------------------------------------------------------------- fixtures
@pytest.mark.parametrize("scan", FAST)
@pytest.mark.parametrize("check_crc", [False, True])
@pytest.mark.parametrize("skip", [False, True])
def test_scan_on_fixtures(case: FixtureCase, scan: Any, check_crc: bool, skip: bool) -> None:
    for base, data in case.segments():
        for max_records in (None, 0, 1, 7):
            kw = {"check_crc": check_crc, "skip_length_mismatch": skip, "max_records": max_records}
            tk.assert_same_batch(scan(data, base, 0, len(data), **kw),
                                 rocketmq_scan.scan_segment_py(data, base, 0, len(data), **kw))
        for a, b in ((0, 100), (0, 1000), (0, len(data) - 3)):
            tk.assert_same_batch(scan(np.frombuffer(data, np.uint8), base, a, b, check_crc=check_crc),
                                 rocketmq_scan.scan_segment_py(data, base, a, b, check_crc=check_crc))


@pytest.mark.parametrize("end", twins("rocketmq.valid_end"))
@pytest.mark.parametrize("check_crc", [False, True])
def test_valid_end_on_fixtures(case: FixtureCase, end: Any, check_crc: bool) -> None:
    for base, data in case.segments():
        for a, b in ((0, len(data)), (0, 1000), (0, len(data) - 3)):
            ref = rocketmq_scan.scan_segment_py(data, base, a, b, check_crc=check_crc, skip_length_mismatch=False)
            assert end(data, base, a, b, check_crc=check_crc) == (ref.next_offset, ref.stop, ref.error)


@pytest.mark.parametrize("scan", FAST)
def test_scan_with_tiny_chunks(case: FixtureCase, scan: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    """Full output arrays (rows, keys, topics) continue in a new chunk: the result does not change."""
    monkeypatch.setattr(rocketmq_scan, "_MAX_CHUNK_ROWS", 2)
    monkeypatch.setattr(rocketmq_scan, "_KEYS_PER_ROW_GUESS", 1)
    monkeypatch.setattr(rocketmq_scan, "_MAX_CHUNK_TOPICS", 1)
    for base, data in case.segments():
        for crc in (False, True):
            tk.assert_same_batch(scan(data, base, 0, len(data), check_crc=crc),
                                 rocketmq_scan.scan_segment_py(data, base, 0, len(data), check_crc=crc))


@pytest.mark.parametrize("scan", FAST)
@pytest.mark.parametrize("seen", [0, 1 << 20, 1 << 30])
def test_scan_with_learned_row_bytes(case: FixtureCase, scan: Any, seen: int, monkeypatch: pytest.MonkeyPatch) -> None:
    """The row capacity learned from earlier chunks (``LEARN_ROW_BYTES``) only decides where a
    chunk ends: a learned record size far above the records' (so a capacity far too small: the
    first record still fits) gives the same batch as the reference, and the scan learns the
    records' own mean size."""
    for base, data in case.segments():
        for crc in (False, True):
            monkeypatch.setattr(rocketmq_scan, "_ROW_BYTES_SEEN", [seen])
            tk.assert_same_batch(scan(data, base, 0, len(data), check_crc=crc),
                                 rocketmq_scan.scan_segment_py(data, base, 0, len(data), check_crc=crc))


@pytest.mark.parametrize("scan", FAST)
def test_scan_learns_the_mean_record_size(scan: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    """A scan of 64 records or more keeps their mean size (what sizes the next scans' columns)."""
    body = bytes(1000)
    records = [MessageRecord(topic="T", body=body, properties_text="KEYS\x01k\x02") for _ in range(100)]
    buf = bytearray()
    for r in records:
        r.commit_log_offset = r.queue_offset = len(buf)
        buf += encode_record(r)
    monkeypatch.setattr(rocketmq_scan, "_ROW_BYTES_SEEN", [0])
    batch = scan(bytes(buf), 0, 0, len(buf))
    assert len(batch) == 100
    assert rocketmq_scan._ROW_BYTES_SEEN[0] == len(buf) // 100


# ----------------------------------------------------------------------------- made-up records
_TOPICS = [b"T", b"TopicA", b"SCHEDULE_TOPIC_XXXX", "тема".encode(), b"bad\xff\xfeutf", b"\xf0\x9f\x98\x80emoji"]
_KEYS = st.lists(st.sampled_from([b"k1", b"key two", b"  ", b"\xc3\x28", "ключ".encode(), b"a b c d", b""]), max_size=3)


@st.composite
def records(draw: st.DrawFn) -> bytes:
    topic = draw(st.sampled_from(_TOPICS))
    props = b""
    for name, value in draw(st.lists(st.tuples(
            st.sampled_from([b"KEYS", b"TAGS", b"UNIQ_KEY", b"DELAY", b"INNER_MULTI_DISPATCH",
                             b"INNER_MULTI_QUEUE_OFFSET", b"OTHER", b"KEY", b""]),
            st.one_of(st.sampled_from([b"1", b"3", b"18", b"99", b"x", b"", b"0", b"-1", b"1234567890123456789"]),
                      st.binary(max_size=6).filter(lambda v: 1 not in v and 2 not in v),
                      _KEYS.map(b" ".join))), max_size=5)):
        props += name + b"\x01" + value + b"\x02"
    if draw(st.booleans()) and props:
        props = props[:-1]  # no trailing separator
    flags = draw(st.sampled_from([0, 0x4, 0x8, 0xC, 0x10, 0x20, 0x30]))
    body = draw(st.binary(max_size=40))
    crc = None if draw(st.integers(0, 9)) else draw(st.integers(-(2**31), 2**31 - 1))
    delta = 0 if draw(st.integers(0, 9)) else draw(st.sampled_from([-1, 1, 3]))
    return tk.raw_record(topic, props, body, v2=draw(st.booleans()), sys_flag=flags,
                         queue_id=draw(st.integers(0, 3)), queue_offset=draw(st.integers(0, 2**40)),
                         crc=crc, total_delta=delta)


@st.composite
def segments(draw: st.DrawFn) -> bytes:
    data = b"".join(draw(st.lists(records(), max_size=12)))
    how = draw(st.sampled_from(["whole", "torn", "flip", "zeros", "blank"]))
    if how == "torn" and data:
        data = data[: draw(st.integers(0, len(data)))]
    elif how == "flip" and data:
        i = draw(st.integers(0, len(data) - 1))
        data = data[:i] + bytes([data[i] ^ draw(st.integers(1, 255))]) + data[i + 1:]
    elif how == "zeros":
        data += b"\0" * draw(st.integers(1, 200))
    elif how == "blank":
        data += struct.pack(">ii", 200, -875286124) + b"\0" * 192
    return data


@pytest.mark.parametrize("scan", FAST)
@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(data=segments(), check_crc=st.booleans(), skip=st.booleans(), limit=st.sampled_from([None, 0, 2, 5]))
def test_scan_random_records_equal_reference(scan: Any, data: bytes, check_crc: bool, skip: bool,
                                             limit: int | None) -> None:
    kw = {"check_crc": check_crc, "skip_length_mismatch": skip, "max_records": limit}
    tk.assert_same_batch(scan(data, 1 << 30, 0, len(data), **kw),
                         rocketmq_scan.scan_segment_py(data, 1 << 30, 0, len(data), **kw))


@pytest.mark.parametrize("scan", FAST)
@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(data=segments(), check_crc=st.booleans(), skip=st.booleans())
def test_scan_with_few_key_slots_equal_reference(scan: Any, data: bytes, check_crc: bool, skip: bool,
                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    """Key output arrays with room for one record's keys (at most 1 + 15 pieces here): a chunk ends
    on its keys (exactly counted where the C pass's bound on a KEYS value does not fit) and the
    next goes on; the result does not change."""
    monkeypatch.setattr(rocketmq_scan, "_KEYS_PER_ROW_GUESS", 0)
    monkeypatch.setattr(rocketmq_scan, "_MAX_KEYS_PER_RECORD", 16)
    kw = {"check_crc": check_crc, "skip_length_mismatch": skip}
    tk.assert_same_batch(scan(data, 1 << 30, 0, len(data), **kw),
                         rocketmq_scan.scan_segment_py(data, 1 << 30, 0, len(data), **kw))


@pytest.mark.parametrize("scan", FAST)
@settings(max_examples=60, deadline=None)
@given(order=st.lists(st.integers(0, 299), min_size=1, max_size=400))
def test_scan_many_topics_equal_reference(scan: Any, order: list[int]) -> None:
    """Hundreds of topics in any order, many of one length and sharing their first or last 8 bytes
    (the C scan's cache of recent topics keys on those and compares whole names): the topic ids,
    names and key hashes are the reference's."""
    names = [b"TopicTest-%03d" % i if i % 3 == 0 else b"%03d-sharedtail-xyz" % i if i % 3 == 1 else b"t%d" % i
             for i in range(300)]  # fmt: skip
    data = b"".join(tk.raw_record(names[i], b"KEYS\x01k%d a\x02UNIQ_KEY\x01u%d\x02" % (i, i)) for i in order)
    tk.assert_same_batch(scan(data, 0, 0, len(data), check_crc=True),
                         rocketmq_scan.scan_segment_py(data, 0, 0, len(data), check_crc=True))


@pytest.mark.parametrize("scan", SCANS)
@settings(max_examples=100, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(data=segments(), check_crc=st.booleans(), skip=st.booleans(), limit=st.sampled_from([None, 0, 2, 5]))
def test_scan_without_keys_is_the_scan_less_its_keys(scan: Any, data: bytes, check_crc: bool, skip: bool,
                                                     limit: int | None) -> None:
    """``keys=False`` (the dump's scan): the same batch as the reference's, with no index keys."""
    kw = {"check_crc": check_crc, "skip_length_mismatch": skip, "max_records": limit}
    ref = rocketmq_scan.scan_segment_py(data, 1 << 30, 0, len(data), **kw)
    ref.key_row, ref.key_hash = ref.key_row[:0], ref.key_hash[:0]
    got = scan(data, 1 << 30, 0, len(data), keys=False, **kw)
    assert len(got.key_row) == 0 and len(got.key_hash) == 0
    tk.assert_same_batch(got, ref)


@pytest.mark.parametrize("scan", FAST)
def test_scan_without_keys_on_fixtures(case: FixtureCase, scan: Any) -> None:
    for base, data in case.segments():
        ref = rocketmq_scan.scan_segment_py(data, base, 0, len(data))
        ref.key_row, ref.key_hash = ref.key_row[:0], ref.key_hash[:0]
        tk.assert_same_batch(scan(data, base, 0, len(data), keys=False), ref)


@pytest.mark.parametrize("scan", SCANS)
@settings(max_examples=100, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(data=segments(), check_crc=st.booleans(), skip=st.booleans(), limit=st.sampled_from([None, 0, 2, 5]))
def test_scan_without_columns_is_the_offsets_of_the_scan(scan: Any, data: bytes, check_crc: bool, skip: bool,
                                                         limit: int | None) -> None:
    """``columns=False`` (the unfiltered dump's scan): the reference's offsets, sizes, stop, next
    offset, error and skipped records; the other columns zeros, no topics, keys or multi rows."""
    kw = {"check_crc": check_crc, "skip_length_mismatch": skip, "max_records": limit}
    ref = rocketmq_scan.without_columns(rocketmq_scan.scan_segment_py(data, 1 << 30, 0, len(data), **kw))
    got = scan(data, 1 << 30, 0, len(data), keys=False, columns=False, **kw)
    tk.assert_same_batch(got, ref)
    assert got.topics == [] and len(got.multi_row) == 0 and not got.queue_id.any() and not got.tags_code.any()
    assert rocketmq_scan.scan_segment_py(data, 1 << 30, 0, len(data), columns=False, **kw).stop == ref.stop


@pytest.mark.parametrize("scan", FAST)
def test_scan_without_columns_on_fixtures(case: FixtureCase, scan: Any) -> None:
    for base, data in case.segments():
        for kw in ({}, {"check_crc": True, "skip_length_mismatch": False}, {"max_records": 3}):
            ref = rocketmq_scan.scan_segment_py(data, base, 0, len(data), **kw)
            got = scan(data, base, 0, len(data), keys=False, columns=False, **kw)
            tk.assert_same_batch(got, rocketmq_scan.without_columns(ref))
            assert got.commit_log_offset.tolist() == ref.commit_log_offset.tolist()


@pytest.mark.parametrize("end", twins("rocketmq.valid_end"))
@pytest.mark.parametrize("window", [None, 1, 97, 250])
@settings(max_examples=100, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(data=segments(), check_crc=st.booleans())
def test_valid_end_random_records(end: Any, window: int | None, data: bytes, check_crc: bool,
                                  monkeypatch: pytest.MonkeyPatch) -> None:
    """The same end whatever the native walk's window (records longer than a window, windows ending
    inside a header); ``done`` is told consecutive ranges ending at the stop."""
    if window is not None:
        monkeypatch.setattr(rocketmq_scan, "VALID_END_WINDOW", window)
    ref = rocketmq_scan.scan_segment_py(data, 77, 0, len(data), check_crc=check_crc, skip_length_mismatch=False)
    seen: list[tuple[int, int]] = []
    got = end(data, 77, 0, len(data), check_crc=check_crc, done=lambda a, b: seen.append((a, b)))
    assert got == (ref.next_offset, ref.stop, ref.error)
    assert all(a < b or (a, b) == (0, 0) for a, b in seen)
    assert [a for a, _ in seen[1:]] == [b for _, b in seen[:-1]]
    assert (seen[-1][1] if seen else 0) == ref.next_offset - 77


@pytest.mark.parametrize("positions", twins("rocketmq.record_positions"))
@settings(max_examples=100, deadline=None)
@given(data=segments())
def test_record_positions_random_records(positions: Any, data: bytes) -> None:
    got = positions(data, 0, len(data))
    ref = framing.record_positions_py(data, 0, len(data))
    assert np.array_equal(got[0], ref[0]) and np.array_equal(got[1], ref[1]) and got[2:] == ref[2:]


@pytest.mark.skipif(not NATIVE_BUILT, reason="the native module _nat_rmq_scan is not built")
@settings(max_examples=100, deadline=None)
@given(data=segments(), start=st.integers(0, 400))
def test_find_boundary_native_equals_numba(data: bytes, start: int) -> None:
    u8 = np.frombuffer(data, np.uint8)
    p = min(start, len(data))
    assert (framing.find_boundary_any(u8, 0, p, len(data), 1 << 20)
            == framing.find_boundary_any(u8, 0, p, len(data), 1 << 20, use_native=False))


@pytest.mark.skipif(not NATIVE_BUILT, reason="the native module _nat_rmq_scan is not built")
def test_native_scan_rejects_bad_arguments() -> None:
    nat = backend.built("_nat_rmq_scan")
    with pytest.raises(ValueError):
        nat.valid_end(b"\0" * 10, 0, 11, False)
    with pytest.raises(ValueError):
        nat.walk(b"\0" * 10, 5, 4, -1, np.empty(0, np.int64), np.empty(0, np.int32), False)
    with pytest.raises(TypeError):
        nat.scan(b"")


# ----------------------------------------------------------------------------- the commands
def _cli(args: list[str], *, mode: str | None = None, importtime: bool = False) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if k != backend.ENV}
    if mode is not None:
        env[backend.ENV] = mode
    cmd = [sys.executable, *(["-X", "importtime"] if importtime else []), "-m", "mqstore.cli.main", *args]
    return subprocess.run(cmd, capture_output=True, text=True, env=env, cwd=REPO)


def _numba_importers(stderr: str) -> list[list[str]]:
    """For every top-level ``numba`` import in ``-X importtime`` output: the chain of modules that
    led to it (the importer first, the outermost module last)."""
    rows = []
    for line in stderr.splitlines():
        m = re.match(r"import time:\s+\d+ \|\s+\d+ \|( *)(\S+)", line)
        if m:
            rows.append((len(m.group(1)), m.group(2)))
    chains = []
    for i, (depth, name) in enumerate(rows):
        if name in ("numba", "llvmlite"):
            chain, cur = [], depth
            for d2, n2 in rows[i + 1:]:
                if d2 < cur:
                    chain.append(n2)
                    cur = d2
            chains.append(chain)
    return chains


NATIVE_ALL = NATIVE_BUILT and all(backend.built(n) is not None for n in backend.native_sources())


@pytest.mark.skipif(not NATIVE_ALL, reason="not every native module is built")
@pytest.mark.parametrize("command", ["verify", "rebuild-index", "dump"])
def test_one_shot_commands_import_no_numba(tmp_path: Path, command: str) -> None:
    store = tmp_path / "store"
    shutil.copytree(load_case("basic").store, store)
    extra = {"rebuild-index": ["--out", str(tmp_path / "out")], "dump": ["--json"]}.get(command, [])
    r = _cli(["rocketmq", command, str(store), *extra], importtime=True)
    assert r.returncode == 0, r.stderr[-2000:]
    assert _numba_importers(r.stderr) == []


def _tree(root: Path) -> list[str]:
    return sorted(str(p.relative_to(root)) for p in root.rglob("*"))


@pytest.mark.parametrize("name", [*CASES, "basic-damaged", "basic-units"])
def test_rebuild_and_verify_same_bytes_on_numba_and_default(tmp_path: Path, name: str) -> None:
    store = tmp_path / "store"
    shutil.copytree(load_case(name.split("-")[0]).store, store)
    if name.endswith("-damaged"):  # a body byte of the second record: a CRC problem in the middle
        seg = sorted((store / "commitlog").iterdir())[0]
        data = bytearray(seg.read_bytes())
        second = struct.unpack(">i", data[:4])[0]
        data[second + 200] ^= 0x5A
        seg.write_bytes(bytes(data))
    if name.endswith("-units"):  # ConsumeQueue units: a wrong offset, a wrong tags code, a size of 0 mid-file
        cq = store / "consumequeue"
        for queue, unit, at, value in (("orders/0", 1, 0, struct.pack(">q", 12345)),
                                       ("TopicTest/0", 0, 12, struct.pack(">q", 99)),
                                       ("orders/1", 2, 8, struct.pack(">i", 0))):  # fmt: skip
            f = cq / queue / "00000000000000000000"
            data = bytearray(f.read_bytes())
            data[20 * unit + at : 20 * unit + at + len(value)] = value
            f.write_bytes(bytes(data))
    outs, verifies = [], []
    for mode in ("numba", None):
        out = tmp_path / f"out-{mode or 'default'}"
        r = _cli(["rocketmq", "rebuild-index", str(store), "--out", str(out)], mode=mode)
        assert r.returncode == 0, r.stderr[-2000:]
        outs.append(out)
        v = _cli(["rocketmq", "verify", str(store), "--json"], mode=mode)
        verifies.append((v.returncode, v.stdout))
    assert _tree(outs[0]) == _tree(outs[1])
    for rel in _tree(outs[0]):
        a, b = outs[0] / rel, outs[1] / rel
        if a.is_file():
            assert filecmp.cmp(a, b, shallow=False), rel
    assert verifies[0] == verifies[1]
    assert verifies[0][0] == (1 if name.endswith(("-damaged", "-units")) else 0), verifies[0]
