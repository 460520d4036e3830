"""The one-pass pread scan + CRC of recovery (``scan_check_file``) against its pure-Python twin
and the mapped-buffer kernels, on the same files: small buffers (batches and headers straddling
every read), several parts with right and wrong split guesses, legacy messages, corruption."""

from __future__ import annotations

import os
import random
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from kafka_support import CASES, batch, case_dir, load_manifest

import mqstore.kernels.kafka.batches as kb
import mqstore.kernels.kafka.file_scan as kfs
import mqstore.storage.kafka.file_scan as sfs
from kernel_twins import twins
from mqstore.errors import InvalidArgumentError, TruncatedRecordError
from mqstore.formats.kafka import encode_legacy_message
from mqstore.storage.kafka.rebuild import analyze_log, analyze_log_file

pytestmark = pytest.mark.skipif(not kfs.HAVE_FILE_SCAN, reason="pread/ISA-L symbols not available")


#: the fast implementations (numba, and the native one when built), each checked against the twin
FAST = [sfs.scan_check_file_numba, *([sfs.scan_check_file_native] if kfs.HAVE_NATIVE else [])]


def _same(data: bytes, path: Path, **kw: object) -> tuple[dict, np.ndarray]:
    path.write_bytes(data)
    fd = os.open(path, os.O_RDONLY)
    try:
        results = [fast(fd, len(data), **kw) for fast in FAST]  # type: ignore[arg-type]
        twin, twin_ok = sfs.scan_check_file_py(fd, len(data))
    finally:
        os.close(fd)
    ref = kb.scan_batches_py(data)
    for got, ok in results:
        for f in (*kb.SCAN_FIELDS, *kfs.PRODUCER_FIELDS):
            assert got[f].dtype == twin[f].dtype, f
            assert got[f].tolist() == twin[f].tolist() == (ref[f] if f in ref else twin[f]).tolist(), f
        for k in ("valid_end", "stop_reason", "count"):
            assert got[k] == twin[k] == ref[k], k
        assert ok.tolist() == twin_ok.tolist() == kb.check_crcs_py(data, ref).tolist()
    return results[0]


def _log(rng: random.Random, n: int, legacy: bool) -> bytes:
    out = bytearray()
    off = 0
    for _ in range(n):
        if legacy and rng.random() < 0.3:
            out += encode_legacy_message(off, b"x" * rng.randrange(0, 300), magic=rng.choice((0, 1)), timestamp=off)
            off += 1
        else:
            c = rng.randrange(1, 6)
            out += batch(off, count=c, value=b"y" * rng.randrange(0, 400))
            off += c
    return bytes(out)


@given(seed=st.integers(0, 2**32 - 1), n=st.integers(0, 40), legacy=st.booleans(),
       flips=st.lists(st.integers(0, 10**6), max_size=4), bufsize=st.sampled_from([64, 100, 257, 4096, 65536]),
       threads=st.integers(1, 4), cut=st.integers(-40, 0))
@settings(max_examples=150, deadline=None)
def test_file_scan_equals_twin(seed: int, n: int, legacy: bool, flips: list[int], bufsize: int, threads: int,
                               cut: int, tmp_path_factory: pytest.TempPathFactory) -> None:
    rng = random.Random(seed)
    data = bytearray(_log(rng, n, legacy))
    for f in flips:
        if data:
            data[f % len(data)] ^= 1 << (f % 8)
    if cut and data:
        data = data[: max(0, len(data) + cut)]  # a torn tail
    path = tmp_path_factory.mktemp("scan") / "00000000000000000000.log"
    _same(bytes(data), path, threads=threads, buffer_size=bufsize, min_part_bytes=64)


def test_parts_with_a_wrong_split_guess(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A record value holding a whole valid batch: a split guess landing on it passes every check
    of the guess, the part before walks past it, and the walk goes on sequentially: same answer."""
    inner = batch(7, count=2)
    data = b"".join(batch(i, value=b"z" * 50) for i in range(20))
    data += batch(20, value=b"\0" * 3 + inner + batch(9) + b"\0" * 40) + b"".join(batch(21 + i) for i in range(20))
    p = tmp_path / "00000000000000000000.log"
    p.write_bytes(data)
    decoy = data.index(inner)
    fd = os.open(p, os.O_RDONLY)
    try:
        guesses = [find(fd, len(data), decoy - 3, decoy + 64, np.empty(256, np.uint8), np.empty(256, np.uint8), 1 << 20)
                   for find in (kfs.find_batch_start_numba, kfs.find_batch_start)]
    finally:
        os.close(fd)
    assert guesses == [decoy, decoy]
    got, ok = _same(data, p, threads=2, min_part_bytes=1)  # real guesses
    assert got["count"] == 41 and ok.all()
    calls: list[int] = []

    def wrong_guess(*args: object) -> int:
        calls.append(1)
        return decoy

    monkeypatch.setattr(sfs, "find_batch_start_numba", wrong_guess)
    monkeypatch.setattr(sfs, "find_batch_start_native", wrong_guess)
    for threads in (2, 3):
        got, ok = _same(data, p, threads=threads, min_part_bytes=1)
        assert got["count"] == 41 and ok.all()
    assert calls


def test_file_scan_on_broker_fixtures(tmp_path: Path) -> None:
    for case in CASES:
        for s in load_manifest(case)["segments"]:
            data = (case_dir(case) / "segments" / f"{s['name']}.log").read_bytes()
            for bufsize in (64, 1000, kfs.FILE_SCAN_BUFFER):
                _same(data, tmp_path / f"{s['name']}.log", threads=2, buffer_size=bufsize, min_part_bytes=128)


def test_analysis_from_file_equals_mapped(tmp_path: Path) -> None:
    rng = random.Random(5)
    data = bytearray(_log(rng, 300, True))
    data[len(data) // 2] ^= 0x20
    p = tmp_path / "00000000000000000000.log"
    p.write_bytes(data)
    fd = os.open(p, os.O_RDONLY)
    try:
        seen: list[tuple[int, int]] = []
        a = analyze_log_file(fd, len(data), progress=lambda d, t: seen.append((d, t)), threads=2)
    finally:
        os.close(fd)
    b = analyze_log(bytes(data))
    assert (a.n_valid, a.valid_bytes, a.stop, a.error) == (b.n_valid, b.valid_bytes, b.stop, b.error)
    assert a.crc_ok.tolist() == b.crc_ok.tolist() and a.stop == "crc"
    assert seen and seen[-1] == (len(data), len(data))


@pytest.mark.parametrize("scan_file", twins("kafka.scan_check_file"))
def test_file_scan_finds_the_batches_and_bad_checksums(tmp_path: Path, scan_file: Any) -> None:
    data = bytearray(b"".join(batch(i * 3, count=3) for i in range(30)))
    sc = kb.scan_batches(bytes(data))
    flip = int(sc["position"][10] + sc["size"][10] - 2)
    data[flip] ^= 0x40  # in the records of batch 10: its checksum fails
    p = tmp_path / "00000000000000000000.log"
    p.write_bytes(bytes(data[:-7]))  # a torn tail
    fd = os.open(p, os.O_RDONLY)
    progress: list[tuple[int, int]] = []
    try:
        scan, ok = scan_file(fd, len(data) - 7, threads=2, progress=lambda d, t: progress.append((d, t)),
                             min_part_bytes=256)  # fmt: skip
    finally:
        os.close(fd)
    assert scan["count"] == 29 and scan["stop_reason"] == kb.STOP_TORN
    assert scan["base_offset"].tolist() == [3 * i for i in range(29)]
    assert scan["valid_end"] == int(scan["position"][-1] + scan["size"][-1])
    assert ok.tolist() == [i != 10 for i in range(29)]
    assert progress[-1] == (len(data) - 7, len(data) - 7)


@pytest.mark.parametrize("scan_file", twins("kafka.scan_check_file"))
def test_file_shorter_than_announced_is_a_typed_error(tmp_path: Path, scan_file: Any) -> None:
    data = b"".join(batch(i, count=3) for i in range(30))
    p = tmp_path / "00000000000000000000.log"
    p.write_bytes(data)
    fd = os.open(p, os.O_RDONLY)
    try:
        with pytest.raises(TruncatedRecordError):
            scan_file(fd, len(data) + 500, buffer_size=64)
    finally:
        os.close(fd)


def test_file_scan_messages_and_arguments(tmp_path: Path) -> None:
    data = b"".join(batch(i, count=3) for i in range(30))
    p = tmp_path / "00000000000000000000.log"
    p.write_bytes(data)
    fd = os.open(p, os.O_RDONLY)
    try:
        with pytest.raises(TruncatedRecordError, match="while being read"):
            sfs.scan_check_file(fd, len(data) + 500, buffer_size=64)
        with pytest.raises(InvalidArgumentError, match="buffer_size"):
            sfs.scan_check_file(fd, len(data), buffer_size=8)
    finally:
        os.close(fd)


def test_empty_and_tiny_files(tmp_path: Path) -> None:
    for data in (b"", b"\0" * 5, b"\0" * 17, batch(0)[:30], batch(0)):
        _same(data, tmp_path / "00000000000000000000.log", threads=2, min_part_bytes=1)


def test_read_spans_native_and_twin(tmp_path: Path) -> None:
    data = bytes(range(256)) * 40
    p = tmp_path / "00000000000000000000.log"
    p.write_bytes(data)
    starts = np.array([0, 5, 1000, len(data) - 14, 77], np.int64)
    fd = os.open(p, os.O_RDONLY)
    try:
        got, twin = sfs.read_spans(fd, starts, 14), sfs.read_spans_py(fd, starts, 14)
        assert got.tolist() == twin.tolist() == [list(data[s:s + 14]) for s in starts.tolist()]
        for fn in (sfs.read_spans, sfs.read_spans_py):
            with pytest.raises(TruncatedRecordError):
                fn(fd, np.array([3, len(data) - 5], np.int64), 14)
    finally:
        os.close(fd)
