"""``kafka verify`` on the native kernels (issue 15, round two).

* the index checks of :mod:`mqstore.kernels.kafka.index_check` — C, numpy and the pure-Python
  reference — give the same events on the same inputs: clean indexes and damaged ones (wrong
  offsets, entries not after the previous one, past the end of the log, time entries that
  disagree with the log, truncated files, the zero padding of preallocated files, stale bytes
  after it, multi-batch entries, a batch failing its CRC under an entry);
* ``kafka verify`` of a partition without transactions imports neither numpy nor numba;
* its stdout and exit status are byte-identical under ``MQSTORE_KERNELS=numba`` and the default.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from cli_support import kernel_env, run_cli_jobs
from kafka_support import batch

from kernel_twins import twins
from mqstore.formats.kafka.batch import SimpleRecord, TimestampType, encode_batch
from mqstore.formats.kafka.compression import Compression
from mqstore.kernels import backend
from mqstore.kernels.kafka.index_check import (
    index_columns_numpy,
    offset_index_events_py,
    order_events_py,
    time_index_events_py,
)
from mqstore.storage.kafka.file_scan import scan_check_file
from mqstore.storage.kafka.index_sanity import WARM_SECTION_BYTES

LOG = f"{0:020d}.log"


def _segment() -> bytes:
    """Batches of every kind the timestamp loop meets: plain, with headers, log-append time,
    gzip (left to the record codec), empty values."""
    out = bytearray()
    off = 0
    for b in range(120):
        n = 1 + b % 4
        if b % 9 == 4:
            recs = [SimpleRecord(value=b"h" * (b % 50), key=b"k", headers=[("a", b"1"), ("b", None)],
                                 timestamp=5_000 + off + i * 3) for i in range(n)]
            out += encode_batch(recs, base_offset=off)
        elif b % 9 == 5:
            recs = [SimpleRecord(value=b"l", timestamp=1) for _ in range(n)]
            out += encode_batch(recs, base_offset=off, timestamp_type=TimestampType.LOG_APPEND_TIME,
                                max_timestamp=9_000 + off)
        elif b % 9 == 6:
            out += batch(off, count=n, value=b"z" * 200, compression=Compression.GZIP)
        else:
            out += batch(off, count=n, value=b"v" * (b * 13 % 300))
        off += n
    return bytes(out)


def _entries(raw: bytes, size: int) -> list[bytes]:
    return [raw[i : i + size] for i in range(0, len(raw) - len(raw) % size, size)]


def _be(v: int, n: int) -> bytes:
    return v.to_bytes(n, "big", signed=True)


def _damage(part: Path, kind: str) -> None:
    oi, ti, log = part / f"{0:020d}.index", part / f"{0:020d}.timeindex", part / LOG
    o, t = _entries(oi.read_bytes(), 8), _entries(ti.read_bytes(), 12)
    if kind == "wrong_offsets":
        o[3] = _be(int.from_bytes(o[3][:4], "big") + 1, 4) + o[3][4:]  # offset not the batch's last
        o[5] = o[5][:4] + _be(int.from_bytes(o[5][4:], "big") + 1, 4)  # position not a batch start
    elif kind == "non_monotonic":
        o[6], o[7] = o[7], o[6]
        t[4], t[5] = t[5], t[4]
    elif kind == "past_end":
        o.append(_be(10_000, 4) + _be(log.stat().st_size + 100, 4))
        t.append(_be(99_999, 8) + _be(10_000, 4))
    elif kind == "time_disagree":
        t[2] = _be(int.from_bytes(t[2][:8], "big") + 5, 8) + t[2][8:]  # timestamp off
        t[6] = t[6][:8] + _be(int.from_bytes(t[6][8:], "big") - 1, 4)  # offset not a batch's last
        t[8] = _be(1, 8) + t[8][8:]  # out of order too
    elif kind == "multi_batch":  # an entry at a batch's position naming a later batch's last offset
        k = 4
        o[k] = _be(int.from_bytes(o[k + 1][:4], "big"), 4) + o[k][4:]
    elif kind == "below_base":
        o[0] = _be(-3, 4) + o[0][4:]
        t[-1] = t[-1][:8] + _be(-2, 4)
    if kind == "truncated":
        oi.write_bytes(b"".join(o)[: 8 * 5 + 3])
        ti.write_bytes(b"".join(t)[: 12 * 4 + 5])
        return
    pad_o = pad_t = b""
    if kind in ("padded", "stale"):
        pad_o, pad_t = bytes(8 * 20), bytes(12 * 20)
        if kind == "stale":
            pad_o = pad_o[:40] + b"\x01" + pad_o[41:]
            pad_t = pad_t[:60] + b"\x02" + pad_t[61:]
    oi.write_bytes(b"".join(o) + pad_o)
    ti.write_bytes(b"".join(t) + pad_t)
    if kind == "crc_under_entry":  # the batch of the third time entry fails its CRC
        data = bytearray(log.read_bytes())
        rel = int.from_bytes(t[2][8:], "big")
        pos = int.from_bytes(o[0][4:], "big")
        for e in o:
            if int.from_bytes(e[:4], "big") <= rel:
                pos = int.from_bytes(e[4:], "big")
        data[pos + 70] ^= 0x20
        log.write_bytes(bytes(data))


KINDS = ["clean", "wrong_offsets", "non_monotonic", "past_end", "time_disagree", "multi_batch", "below_base",
         "truncated", "padded", "stale", "crc_under_entry"]


def _rebuild(part: Path) -> None:
    from mqstore.kafka import rebuild_indexes

    rebuild_indexes(part / LOG, index_interval_bytes=200)


@pytest.fixture(scope="module")
def damaged(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    root = tmp_path_factory.mktemp("verify-native")
    clean = root / "clean" / "topic-0"
    clean.mkdir(parents=True)
    (clean / LOG).write_bytes(_segment())
    _rebuild(clean)
    out = {"clean": clean}
    for kind in KINDS[1:]:
        part = root / kind / "topic-0"
        shutil.copytree(clean, part)
        _damage(part, kind)
        out[kind] = part
    return out


# ----------------------------------------------------------------------------- kernel twins
def _norm(x: Any) -> Any:
    if isinstance(x, tuple | list):
        return [_norm(v) for v in x]
    if isinstance(x, np.ndarray | memoryview):
        return [int(v) for v in x]
    return int(x) if isinstance(x, bool | int | np.integer) else x


def _inputs(part: Path) -> dict[str, Any]:
    fd = os.open(part / LOG, os.O_RDONLY)
    size = os.fstat(fd).st_size
    scan, ok = scan_check_file(fd, size)
    base = 0
    okeys, ovals, opad = index_columns_numpy((part / f"{0:020d}.index").read_bytes(), 8, base)
    tkeys, tvals, _ = index_columns_numpy((part / f"{0:020d}.timeindex").read_bytes(), 12, base)
    return {"fd": fd, "size": size, "scan": scan, "ok": ok.astype(np.uint8), "okeys": okeys, "ovals": ovals,
            "opad": opad, "tkeys": tkeys, "tvals": tvals}


@pytest.mark.parametrize("impl", twins("kafka.index_columns"))
@pytest.mark.parametrize("kind", KINDS)
def test_index_columns_twins(damaged: dict[str, Path], kind: str, impl: Any) -> None:
    for suffix, size in ((".index", 8), (".timeindex", 12)):
        raw = (damaged[kind] / f"{0:020d}{suffix}").read_bytes()
        for base in (0, 7):
            assert _norm(impl(raw, size, base)) == _norm(index_columns_numpy(raw, size, base))
    assert _norm(impl(b"", 8, 0)) == [[], [], 0]


@pytest.mark.parametrize("impl", twins("kafka.order_events"))
def test_order_events_twins(impl: Any) -> None:
    magic = np.array([2, 2, 1, 2, 0, 2, 2], np.int8)
    base_offset = np.array([5, 9, -1, 11, -1, 3, 20], np.int64)
    last = np.array([8, 12, 12, 15, 14, 4, 25], np.int64)
    for b in (0, 6):  # (legacy messages: their own offset is their first)
        assert _norm(impl(magic, base_offset, last, b, 20)) == [int(b == 6), [1, 2, 3, 4]]
        assert _norm(impl(magic, base_offset, last, b, 20)) == _norm(order_events_py(magic, base_offset, last, b, 20))
    assert _norm(impl(magic, base_offset, last, 6, 2)) == [1, [1, 2]]
    empty = np.zeros(0, np.int64)
    assert _norm(impl(np.zeros(0, np.int8), empty, empty, 0, 20)) == [0, []]


@pytest.mark.parametrize("impl", twins("kafka.offset_index_events"))
@pytest.mark.parametrize("kind", KINDS)
def test_offset_index_events_twins(damaged: dict[str, Path], kind: str, impl: Any) -> None:
    x = _inputs(damaged[kind])
    try:
        scan = x["scan"]
        args = (scan["position"], scan["last_offset"], x["okeys"], x["ovals"])
        ref = offset_index_events_py
        want = _norm(ref(*(list(map(int, a)) for a in args)))
        assert _norm(impl(*args)) == want
        if kind == "clean":
            assert want == []
        if kind in ("wrong_offsets", "non_monotonic", "past_end", "multi_batch"):
            assert want
        empty = np.zeros(0, np.int64)  # an empty log: every entry is not at a batch start
        assert _norm(impl(empty, empty, x["okeys"], x["ovals"])) == _norm(ref([], [], list(x["okeys"]),
                                                                              list(x["ovals"])))
    finally:
        os.close(x["fd"])


@pytest.mark.parametrize("impl", twins("kafka.time_index_events"))
@pytest.mark.parametrize("kind", KINDS)
def test_time_index_events_twins(damaged: dict[str, Path], kind: str, impl: Any) -> None:
    x = _inputs(damaged[kind])
    try:
        scan = x["scan"]
        ref = time_index_events_py
        n_oi = x["opad"]
        variants = [(x["okeys"][:n_oi], x["ovals"][:n_oi], WARM_SECTION_BYTES // 8),
                    (x["okeys"][:n_oi], x["ovals"][:n_oi], 1),  # the warm-section split of a non-increasing index
                    (np.zeros(0, np.int64), np.zeros(0, np.int64), 128)]  # no .index
        for ok_keys, ok_vals, warm in variants:
            cols = (scan["position"], scan["size"], scan["last_offset"], x["ok"], scan["magic"], scan["attributes"],
                    scan["record_count"], scan["base_timestamp"], scan["max_timestamp"])
            args = (x["fd"], x["size"], *cols, x["tkeys"], x["tvals"], ok_keys, ok_vals, warm)
            want = _norm(ref(*args))
            assert _norm(impl(*args)) == want, (kind, warm)
            if kind == "clean":
                assert all(code == 4 for _s, code, *_ in want)  # only the gzip batches: for the record codec
            if kind in ("time_disagree", "past_end", "non_monotonic", "crc_under_entry"):
                assert any(code != 4 for _s, code, *_ in want)
    finally:
        os.close(x["fd"])


# ----------------------------------------------------------------------------- the command


native_only = pytest.mark.skipif(backend.built("_nat_kafka") is None, reason="the native Kafka kernels are not built")


@native_only
def test_verify_outputs_identical_under_numba_and_native(damaged: dict[str, Path]) -> None:
    jobs = []
    for part in damaged.values():
        jobs += [["kafka", "verify", str(part)], ["kafka", "verify", "--strict", str(part)],
                 ["kafka", "verify", "--json", str(part)], ["kafka", "verify", str(part / LOG)]]
    a, b = run_cli_jobs(jobs, "numba"), run_cli_jobs(jobs, None)
    for job, x, y in zip(jobs, a["results"], b["results"], strict=True):
        assert x["error"] is None and y["error"] is None, (job, x["error"], y["error"])
        assert x == y, job
    codes = {tuple(j): r["code"] for j, r in zip(jobs, b["results"], strict=True)}
    assert codes[("kafka", "verify", str(damaged["clean"]))] == 0
    assert codes[("kafka", "verify", str(damaged["padded"]))] == 0  # the active segment: a note
    assert codes[("kafka", "verify", "--strict", str(damaged["padded"]))] == 1
    for kind in ("wrong_offsets", "non_monotonic", "past_end", "time_disagree", "stale",
                 "crc_under_entry", "below_base"):
        assert codes[("kafka", "verify", str(damaged[kind]))] == 1, kind
    text = {k: b["results"][jobs.index(["kafka", "verify", str(p)])]["stdout"] for k, p in damaged.items()}
    assert "time_index_timestamp_mismatch" in text["time_disagree"]
    assert "time_index_out_of_order" in text["time_disagree"]
    assert "multi_batch_entry" in text["multi_batch"]
    assert "index_sanity" in text["below_base"]


@native_only
@pytest.mark.parametrize("kind", ["clean", "padded", "bare"])
def test_verify_imports_neither_numpy_nor_numba(damaged: dict[str, Path], tmp_path: Path, kind: str) -> None:
    """A partition without transactions: the walk of rebuild-index, the native index checks and
    the .txnindex check need no numpy (~0.2 s of a one-shot command)."""
    part = damaged["padded" if kind == "padded" else "clean"]
    if kind == "bare":
        part = tmp_path / "bare" / "topic-0"
        part.mkdir(parents=True)
        os.link(damaged["clean"] / LOG, part / LOG)
        (part / f"{0:020d}.txnindex").write_bytes(b"")  # an empty one: checked without the replay
    r = subprocess.run([sys.executable, "-X", "importtime", "-m", "mqstore.cli.main", "kafka", "verify", str(part)],
                       capture_output=True, text=True, env=kernel_env(None), check=False)
    assert r.returncode == 0, r.stderr[-2000:]
    modules = [line.rsplit("|", 1)[-1].strip() for line in r.stderr.splitlines() if line.startswith("import time:")]
    assert "mqstore.storage.kafka.tools" in modules
    loaded = [m for m in modules if re.match(r"(numpy|numba|llvmlite)(\.|$)", m)]
    assert not loaded, f"verify imported {loaded[:5]}"
