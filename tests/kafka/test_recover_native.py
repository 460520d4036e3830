"""The native one-call recovery of a ``.log`` (``kernels.kafka.file_scan.recover_native``: the walk
and checksums over threads, the valid prefix and the index bytes, without numpy) against its twin,
the columns path on the same file: ``scan_check_file_py`` + the valid prefix of ``_analysis`` +
``build_index_entries_py`` + ``index_bytes``.  Random logs with flipped bits, torn tails, legacy
messages, small buffers, many parts (right and wrong split guesses) and index limits small enough
to fill the indexes."""

from __future__ import annotations

import os
import random
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from kafka_support import CASES, batch, case_dir, load_manifest

import mqstore.kernels.kafka.file_scan as kfs
import mqstore.storage.kafka.file_scan as sfs
from mqstore.errors import MqStoreError
from mqstore.formats.kafka import encode_legacy_message
from mqstore.kernels.kafka.index_build import build_index_entries_py
from mqstore.kernels.kafka.stops import STOP_READ_ERROR
from mqstore.storage.kafka.rebuild import _analysis, _verdict, index_bytes

pytestmark = pytest.mark.skipif(not kfs.HAVE_NATIVE, reason="the native Kafka kernels are not built")


def _twin(data: bytes, path: Path, base: int, interval: int, max_size: int) -> tuple:
    path.write_bytes(data)
    fd = os.open(path, os.O_RDONLY)
    try:
        scan, ok = sfs.scan_check_file_py(fd, len(data))
    finally:
        os.close(fd)
    a = _analysis(len(data), scan, ok)
    try:
        entries = build_index_entries_py(a.scan, a.n_valid, base, interval, max_size, path="p")
        idx: tuple | str = index_bytes(entries, base)
    except MqStoreError as exc:
        idx = f"{type(exc).__name__}: {exc}"
    txn = int((((scan["attributes"][: a.n_valid] & 0x30) != 0) & (scan["magic"][: a.n_valid] >= 2)).sum())
    last = int(scan["last_offset"][a.n_valid - 1]) if a.n_valid else None
    return a.n_valid, a.valid_bytes, a.stop, a.error, last, idx, txn


def _native(path: Path, base: int, interval: int, max_size: int, **kw: object) -> tuple:
    from mqstore.kernels.kafka.index_build import build_error

    fd = os.open(path, os.O_RDONLY)
    try:
        r = kfs.recover_native(fd, os.fstat(fd).st_size, base, interval, max_size, **kw)  # type: ignore[arg-type]
    finally:
        os.close(fd)
    assert r.reason != STOP_READ_ERROR
    valid_bytes, stop, error = _verdict(r.count, r.n_valid, r.reason, r.valid_end, r.bad, r.next_position)
    if r.build_error:
        exc = build_error(r.build_error, r.build_position if r.build_position >= 0 else None, "p")
        idx: tuple | str = f"{type(exc).__name__}: {exc}"
    else:
        idx = (r.offset_index, r.time_index)
    return r.n_valid, valid_bytes, stop, error, r.last_offset, idx, r.txn_batches


def _log(rng: random.Random, n: int, legacy: bool, txn: bool) -> bytes:
    out = bytearray()
    off = 0
    for _ in range(n):
        if legacy and rng.random() < 0.3:
            out += encode_legacy_message(off, b"x" * rng.randrange(0, 300), magic=rng.choice((0, 1)), timestamp=off)
            off += 1
        else:
            c = rng.randrange(1, 6)
            kw: dict = {}
            if txn and rng.random() < 0.3:
                kw = {"producer_id": 5, "producer_epoch": 0, "is_transactional": True}
            out += batch(off + rng.choice((0, 0, 0, -3)), count=c, ts=rng.randrange(0, 1000),
                         value=b"y" * rng.randrange(0, 400), **kw)
            off += c
    return bytes(out)


@given(seed=st.integers(0, 2**32 - 1), n=st.integers(0, 40), legacy=st.booleans(), txn=st.booleans(),
       flips=st.lists(st.integers(0, 10**6), max_size=3), bufsize=st.sampled_from([64, 100, 257, 4096, 65536]),
       threads=st.integers(1, 5), cut=st.integers(-40, 0), interval=st.sampled_from([0, 1, 100, 4096]),
       max_size=st.sampled_from([12, 40, 100, 10 << 20]), base=st.sampled_from([0, 3]))
@settings(max_examples=200, deadline=None)
def test_recover_native_equals_twin(seed: int, n: int, legacy: bool, txn: bool, flips: list[int], bufsize: int,
                                    threads: int, cut: int, interval: int, max_size: int, base: int,
                                    tmp_path_factory: pytest.TempPathFactory) -> None:
    rng = random.Random(seed)
    data = bytearray(_log(rng, n, legacy, txn))
    for f in flips:
        if data:
            data[f % len(data)] ^= 1 << (f % 8)
    if cut and data:
        data = data[: max(0, len(data) + cut)]
    path = tmp_path_factory.mktemp("recover") / "00000000000000000000.log"
    want = _twin(bytes(data), path, base, interval, max_size)
    assert _native(path, base, interval, max_size, threads=threads, buffer_size=bufsize, min_part_bytes=1) == want


def test_recover_native_with_a_wrong_split_guess(tmp_path: Path) -> None:
    """A record value holding a whole valid batch (a split guess that passes every check): the part
    before walks past it and the walk goes on sequentially from where the chain leads."""
    inner = batch(7, count=2)
    data = b"".join(batch(i, value=b"z" * 50) for i in range(20))
    data += batch(20, value=b"\0" * 3 + inner + batch(9) + b"\0" * 40) + b"".join(batch(21 + i) for i in range(20))
    p = tmp_path / "00000000000000000000.log"
    want = _twin(data, p, 0, 100, 1 << 20)
    for threads in (1, 2, 3, 8, 200):  # (more threads than the native call's 64 parts: capped)
        assert _native(p, 0, 100, 1 << 20, threads=threads, min_part_bytes=1) == want
    assert want[0] == 41


def test_recover_native_on_broker_fixtures(tmp_path: Path) -> None:
    for case in CASES:
        for s in load_manifest(case)["segments"]:
            seg = case_dir(case) / "segments"
            data = (seg / f"{s['name']}.log").read_bytes()
            base = int(s["name"])
            want = _twin(data, tmp_path / f"{s['name']}.log", base, 4096, 10 << 20)
            for bufsize in (64, 1000, kfs.FILE_SCAN_BUFFER):
                assert _native(tmp_path / f"{s['name']}.log", base, 4096, 10 << 20, threads=2, buffer_size=bufsize,
                               min_part_bytes=128) == want


def test_recover_native_empty_file(tmp_path: Path) -> None:
    p = tmp_path / "00000000000000000000.log"
    want = _twin(b"", p, 0, 4096, 1 << 20)
    assert _native(p, 0, 4096, 1 << 20) == want
