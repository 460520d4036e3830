"""The one-shot Kafka operator commands on the ahead-of-time compiled kernels (issue 15).

* ``kafka verify`` / ``rebuild-index`` / ``dump`` never import numba on the native path (checked
  with ``python -X importtime``, which lists every module a process imports);
* their output — stdout, exit status and the files written — is byte-identical under
  ``MQSTORE_KERNELS=numba`` and the default (native) on the same partitions: broker fixtures, a
  corrupt and torn segment, legacy messages mixed with v2 batches, compressed batches, and a
  transactional partition with aborted transactions and control batches.
"""

from __future__ import annotations

import os
import random
import re
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from cli_support import kernel_env, run_cli_jobs
from kafka_support import batch, copy_partition
from txn_support import Op, build, write_partition

from mqstore.formats.kafka import encode_legacy_message
from mqstore.formats.kafka.compression import Compression
from mqstore.kernels import backend

pytestmark = pytest.mark.skipif(backend.built("_nat_kafka") is None, reason="the native Kafka kernels are not built")



# ----------------------------------------------------------------------------- partitions
def _corrupt_and_torn(root: Path) -> Path:
    part = copy_partition("single_default", root / "corrupt")
    log = next(part.glob("*.log"))
    data = bytearray(log.read_bytes())
    data[len(data) // 2] ^= 0x10  # a record byte: that batch fails its CRC
    log.write_bytes(bytes(data) + batch(10_000, count=3)[:40])  # and a torn tail
    return part


def _legacy_and_compressed(root: Path) -> Path:
    part = root / "mixed" / "topic-0"
    part.mkdir(parents=True)
    rng = random.Random(15)
    out = bytearray()
    off = 0
    for i in range(60):
        if i < 20:
            out += encode_legacy_message(off, b"x" * rng.randrange(0, 300), magic=rng.choice((0, 1)), timestamp=off)
            off += 1
        else:
            c = rng.randrange(1, 6)
            codec = (Compression.NONE, Compression.GZIP)[i % 2]
            out += batch(off, count=c, value=b"y" * rng.randrange(0, 400), compression=codec)
            off += c
    (part / f"{0:020d}.log").write_bytes(bytes(out))
    return part


def _headers(root: Path, *, bad_key: bool) -> Path:
    """Records with null keys/values, headers whose keys need JSON escapes or are not ASCII,
    LogAppendTime and idempotent batches; with ``bad_key`` a last batch whose header key is not
    UTF-8 (its CRC valid: the dump reports it as an error after printing the rest)."""
    from mqstore.formats.kafka.batch import SimpleRecord, TimestampType, crc32c, encode_batch

    part = root / ("badkey" if bad_key else "headers") / "topic-0"
    part.mkdir(parents=True)
    keys = ['h"q', "back\\slash", "nl\n tab\t", "ctl\x01\x1f\x7f", "é✓😀", "", "ab"]
    out = bytearray()
    off = 0
    for b in range(12):
        recs = [SimpleRecord(value=None if i % 5 == 4 else bytes(range(i * 7 % 256)) * (i % 3),
                             key=None if i % 3 == 0 else f"k{i}".encode(),
                             headers=[(keys[(b + i + j) % len(keys)], None if j == 1 else b"v" * j) for j in range(i % 4)],
                             timestamp=1_000 + off + i) for i in range(5)]
        kw: dict[str, Any] = {}
        if b % 3 == 1:
            kw.update(timestamp_type=TimestampType.LOG_APPEND_TIME, max_timestamp=9_999 + b)
        if b % 4 == 2:
            kw.update(producer_id=42, producer_epoch=1, base_sequence=b * 5)
        if b % 5 == 3:
            kw.update(compression=Compression.GZIP)
        out += encode_batch(recs, base_offset=off, **kw)
        off += 5
    if bad_key:
        raw = bytearray(encode_batch([SimpleRecord(value=b"x", headers=[("ab", b"y")])], base_offset=off))
        i = raw.index(b"ab")
        raw[i:i + 2] = b"\xff\xfe"
        raw[17:21] = crc32c(bytes(raw[21:])).to_bytes(4, "big")
        out += raw
    (part / f"{0:020d}.log").write_bytes(bytes(out))
    return part


def _plain(root: Path) -> Path:
    """Three segments without transactions (the rebuild's native path skips the transaction
    replay): a CRC failure in the second, a torn tail in the last, and a stale .txnindex."""
    part = root / "plain" / "topic-0"
    part.mkdir(parents=True)
    off = 0
    for s in range(3):
        base = off
        data = bytearray()
        for i in range(40):
            data += batch(off, count=1 + i % 4, value=b"p" * (i * 37 % 900), producer_id=3 if i % 7 == 0 else -1)
            off += 1 + i % 4
        if s == 1:
            data[len(data) // 3] ^= 0x04
        if s == 2:
            data += batch(off, count=2)[:50]
        (part / f"{base:020d}.log").write_bytes(bytes(data))
    (part / f"{0:020d}.txnindex").write_bytes(b"")
    return part


def _transactional(root: Path) -> Path:
    part = root / "txn" / "topic-0"
    ops = [Op("txn", 7, 2), Op("plain", n=3), Op("txn", 8, 1), Op("end", 7, commit=False), Op("txn", 9, 2),
           Op("end", 8, commit=True), Op("plain", n=2), Op("end", 9, commit=False), Op("txn", 7, 1)]
    write_partition(part, build(ops), cuts=[4])
    return part


@pytest.fixture(scope="module")
def partitions(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    root = tmp_path_factory.mktemp("native-commands")
    parts = {
        "single": copy_partition("single_default", root / "single"),
        "multi": copy_partition("multi_segment_roll_bytes", root / "multi"),
        "unclean": copy_partition("unclean_flush", root / "unclean"),
        "corrupt": _corrupt_and_torn(root),
        "mixed": _legacy_and_compressed(root),
        "txn": _transactional(root),
        "plain": _plain(root),
        "headers": _headers(root, bad_key=False),
        "badkey": _headers(root, bad_key=True),
    }
    # (the indexes of the mixed and transactional partitions, so verify checks them too)
    res = run_cli_jobs([["kafka", "rebuild-index", str(parts[k])] for k in ("mixed", "txn")], "numba")
    assert all(r["code"] == 0 for r in res["results"]), res
    return parts


def _jobs(parts: dict[str, Path], out: Path) -> list[list[str]]:
    jobs: list[list[str]] = []
    for name, part in parts.items():
        first_log = sorted(part.glob("*.log"))[0]
        jobs += [
            ["kafka", "verify", str(part)],
            ["kafka", "verify", "--json", str(part)],
            ["kafka", "verify", str(first_log)],
            ["kafka", "rebuild-index", str(part), "--out", str(out / name)],
            ["kafka", "rebuild-index", "--json", str(part), "--out", str(out / name)],
            ["kafka", "dump", str(first_log), "--json", "--print-data"],
            ["kafka", "dump", str(part)],
        ]
    return jobs


def _files(d: Path) -> dict[str, bytes]:
    return {str(f.relative_to(d)): f.read_bytes() for f in sorted(d.rglob("*")) if f.is_file()}


def test_outputs_are_identical_under_numba_and_native(partitions: dict[str, Path], tmp_path: Path) -> None:
    out = tmp_path / "out"
    runs = {}
    files = {}
    for mode in ("numba", None):
        shutil.rmtree(out, ignore_errors=True)
        for name in partitions:
            (out / name).mkdir(parents=True)
        runs[mode] = run_cli_jobs(_jobs(partitions, out), mode)
        files[mode] = _files(out)
    assert runs["numba"]["numba"] and not runs[None]["numba"]  # each mode ran on its own kernels
    jobs = _jobs(partitions, out)
    for job, a, b in zip(jobs, runs["numba"]["results"], runs[None]["results"], strict=True):
        assert a["error"] is None and b["error"] is None, (job, a["error"], b["error"])
        assert a == b, job
    assert files["numba"] == files[None] and len(files[None]) > 10
    verdicts = {tuple(j): r["code"] for j, r in zip(jobs, runs[None]["results"], strict=True)}
    assert verdicts[("kafka", "verify", str(partitions["single"]))] == 0
    assert verdicts[("kafka", "verify", str(partitions["corrupt"]))] == 1  # the problems are found
    corrupt = runs[None]["results"][jobs.index(["kafka", "verify", str(partitions["corrupt"])])]["stdout"]
    assert "problem: crc" in corrupt and "torn_tail" in corrupt
    bad_log = str(sorted(partitions["badkey"].glob("*.log"))[0])
    bad = runs[None]["results"][jobs.index(["kafka", "dump", bad_log, "--json", "--print-data"])]
    assert bad["code"] == 2 and "UTF-8" in bad["stderr"] and bad["stdout"].count("\n") > 12


@pytest.mark.parametrize("command", ["verify", "verify-bare", "rebuild-index", "dump-json", "dump-dir"])
def test_commands_do_not_import_numba(partitions: dict[str, Path], tmp_path: Path, command: str) -> None:
    part = partitions["txn"]
    bare = tmp_path / "bare"
    bare.mkdir()
    for f in part.glob("*.log"):
        os.link(f, bare / f.name)
    log = str(sorted(part.glob("*.log"))[0])
    args = {"verify": ["verify", str(part)], "verify-bare": ["verify", str(bare)],
            "rebuild-index": ["rebuild-index", str(part), "--out", str(tmp_path)],
            "dump-json": ["dump", log, "--json", "--print-data"], "dump-dir": ["dump", str(part)]}[command]
    r = subprocess.run([sys.executable, "-X", "importtime", "-m", "mqstore.cli.main", "kafka", *args],
                       capture_output=True, text=True, env=kernel_env(None), check=False)
    assert r.returncode in (0, 1), r.stderr[-2000:]
    modules = [line.rsplit("|", 1)[-1].strip() for line in r.stderr.splitlines() if line.startswith("import time:")]
    assert "mqstore.storage.kafka.layout" in modules  # (modules imported by importlib.import_module are not listed; numba is imported by statements)
    loaded = [m for m in modules if re.match(r"(numba|llvmlite)(\.|$)", m)]
    assert not loaded, f"{command} imported {loaded[:5]}"
    if command in ("verify", "verify-bare", "rebuild-index"):  # a plain partition: no KRaft or internal-topic readers
        extra = {"mqstore.storage.kafka.internal", "mqstore.storage.kafka.logdir",
                 "mqstore.formats.kafka.coordinator_records", "mqstore.formats.kafka.metadata_records"}
        assert not extra & set(modules), f"{command} imported {sorted(extra & set(modules))}"


@pytest.mark.parametrize("name", ["plain", "mixed", "headers", "badkey"])
def test_rebuild_index_does_not_import_numpy(partitions: dict[str, Path], tmp_path: Path, name: str) -> None:
    """``kafka rebuild-index`` of a partition without transactions runs on the native recovery
    alone (walk, checksums and index bytes in one call; the transaction replay is skipped): no
    numpy import (~0.1 s of a one-shot command).  Its files equal the numba path's."""
    out = tmp_path / "native"
    out.mkdir()
    args = ["kafka", "rebuild-index", str(partitions[name]), "--out", str(out)]
    r = subprocess.run([sys.executable, "-X", "importtime", "-m", "mqstore.cli.main", *args],
                       capture_output=True, text=True, env=kernel_env(None), check=False)
    assert r.returncode == 0, r.stderr[-2000:]
    modules = [line.rsplit("|", 1)[-1].strip() for line in r.stderr.splitlines() if line.startswith("import time:")]
    assert "mqstore.storage.kafka.rebuild" in modules
    loaded = [m for m in modules if re.match(r"(numpy|numba|llvmlite)(\.|$)", m)]
    assert not loaded, f"rebuild-index imported {loaded[:5]}"
    ref = tmp_path / "numba"
    ref.mkdir()
    res = run_cli_jobs([["kafka", "rebuild-index", str(partitions[name]), "--out", str(ref)]], "numba")
    assert res["results"][0]["code"] == 0
    assert _files(out) == _files(ref) and _files(out)
