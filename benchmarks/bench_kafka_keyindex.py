"""Benchmark of the Kafka key index (<base>.keyindex): key lookups per second, one at a time and
in batches, against a full scan of the same partition in the same process.

    python benchmarks/bench_kafka_keyindex.py [--size-mb N] [--dir DIR] [--keep] [--json FILE]

A partition of ``--size-mb`` (default 1024) is written with ``LogConfig(key_index=True)``
(batches of 16 records of ~1 KiB, keys ``order-<n>`` from a space of size/5 records, so a key
holds about five records, lz4-free: uncompressed).  Measured, with the data warm in the page
cache:

* append throughput with and without the key index (a 64 MiB sample each);
* ``rebuild_keyindex`` of the whole partition;
* single lookups (``offsets_for_key``, present and absent keys) and batch lookups
  (``offsets_for_keys`` of 10,000 keys), in lookups per second;
* the baseline: the best full scan mqstore has (the compiled key extraction over every segment,
  the same path a rebuild takes, then the matching records checked), for one key and for the
  batch; a naive record-by-record Python scan is timed over a 64 MiB prefix and extrapolated.

The data goes to ``--dir`` (default ``/tmp/mqstore-bench-keyindex``) and is deleted at the end
unless ``--keep``.
"""

from __future__ import annotations

import argparse
import json
import shutil
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np

ROOT = Path(__file__).resolve().parent
sys.path.insert(0, str(ROOT.parent / "src"))

from mqstore.formats.kafka import SimpleRecord, encode_batch  # noqa: E402
from mqstore.kafka import LogConfig, PartitionLog  # noqa: E402
from mqstore.storage.kafka.keyindex import rebuild_keyindex  # noqa: E402

RECORD = 1000
PER_BATCH = 16
MB = 1024 * 1024


def _batches(n_batches: int, key_space: int, seed: int = 7) -> list[bytes]:
    rng = np.random.default_rng(seed)
    pool = rng.bytes(RECORD * 64)
    keys = rng.integers(0, key_space, n_batches * PER_BATCH)
    out = []
    for b in range(n_batches):
        recs = [SimpleRecord(value=pool[(j := (b * PER_BATCH + i) % 63) * RECORD : (j + 1) * RECORD],
                             key=b"order-%d" % keys[b * PER_BATCH + i], timestamp=1_700_000_000_000 + b * PER_BATCH + i)
                for i in range(PER_BATCH)]
        out.append(encode_batch(recs, base_offset=0))
    return out


def _write(d: Path, batches: list[bytes], cfg: LogConfig, repeat: int) -> float:
    t0 = time.perf_counter()
    with PartitionLog.open(d, cfg) as log:
        for _ in range(repeat):
            for b in batches:
                log.append(b)
    return time.perf_counter() - t0


def _rate(n: int, s: float) -> float:
    return n / s if s > 0 else float("inf")


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--size-mb", type=int, default=1024)
    ap.add_argument("--dir", default="/tmp/mqstore-bench-keyindex")
    ap.add_argument("--keep", action="store_true")
    ap.add_argument("--json", default=None)
    a = ap.parse_args()
    base = Path(a.dir)
    shutil.rmtree(base, ignore_errors=True)
    base.mkdir(parents=True)
    res: dict[str, Any] = {"size_mb": a.size_mb}
    try:
        batch_bytes = PER_BATCH * (RECORD + 30) + 61
        n_total = a.size_mb * MB // batch_bytes
        key_space = max(1, n_total * PER_BATCH // 5)
        block = _batches(4096, key_space)  # ~64 MiB of distinct batches, written repeatedly with fresh keys below
        # ------------------------------------------------------------ append overhead (64 MiB each)
        _write(base / "warm-0", block[:200], LogConfig(key_index=True), 1)  # load the compiled kernels first
        with PartitionLog.open(base / "warm-0", read_only=True) as w:
            w.offsets_for_keys([b"order-1", b"order-2"])
        shutil.rmtree(base / "warm-0")
        t_plain = _write(base / "plain-0", block, LogConfig(), 1)
        t_keyed = _write(base / "keyed-0", block, LogConfig(key_index=True), 1)
        shutil.rmtree(base / "plain-0")
        shutil.rmtree(base / "keyed-0")
        sample_mb = len(block) * len(block[0]) / MB
        res["append_mb_s_plain"] = sample_mb / t_plain
        res["append_mb_s_key_index"] = sample_mb / t_keyed
        # ------------------------------------------------------------ the 1 GiB partition
        d = base / "orders-0"
        t0 = time.perf_counter()
        with PartitionLog.open(d, LogConfig(key_index=True)) as log:
            seed = 0
            while log.size_in_bytes < a.size_mb * MB:
                seed += 1
                for b in _batches(2048, key_space, seed):
                    log.append(b)
                    if log.size_in_bytes >= a.size_mb * MB:
                        break
            res["records"] = log.log_end_offset
            res["segments"] = len(log.segments)
            res["bytes"] = log.size_in_bytes
        res["write_s"] = time.perf_counter() - t0
        kbytes = sum(p.stat().st_size for p in d.glob("*.keyindex"))
        res["keyindex_bytes"] = kbytes
        t0 = time.perf_counter()
        for f in sorted(d.glob("*.log")):
            rebuild_keyindex(f)
        res["rebuild_keyindex_s"] = time.perf_counter() - t0
        rng = np.random.default_rng(11)
        log = PartitionLog.open(d, read_only=True)
        try:
            present = [b"order-%d" % k for k in rng.integers(0, key_space, 2000)]
            absent = [b"missing-%d" % k for k in range(500)]
            log.offsets_for_key(present[0])  # warm-up: compile, map
            t0 = time.perf_counter()
            hits = sum(len(log.offsets_for_key(k)) for k in present)
            t_single = time.perf_counter() - t0
            t0 = time.perf_counter()
            for k in absent:
                log.offsets_for_key(k)
            t_absent = time.perf_counter() - t0
            res["single_present_per_s"] = _rate(len(present), t_single)
            res["single_absent_per_s"] = _rate(len(absent), t_absent)
            res["records_per_present_key"] = hits / len(present)
            batch = [b"order-%d" % k for k in rng.integers(0, key_space, 10_000)]
            t0 = time.perf_counter()
            found = log.offsets_for_keys(batch)
            t_batch = time.perf_counter() - t0
            res["batch_keys_per_s"] = _rate(len(batch), t_batch)
            # ---------------------------------------------------------- the baseline: full scans
            t0 = time.perf_counter()
            scan_one, _stats = log.find_keys([present[0]], use_index=False)
            t_scan_one = time.perf_counter() - t0
            assert [m.offset for m in scan_one[0]] == log.offsets_for_key(present[0])
            t0 = time.perf_counter()
            scan_batch, _ = log.find_keys(batch[:1000], use_index=False)
            t_scan_batch = time.perf_counter() - t0
            assert [[m.offset for m in ms] for ms in scan_batch] == found[:1000]
            res["scan_one_key_s"] = t_scan_one
            res["scan_1000_keys_s"] = t_scan_batch
            # a naive scan: every record decoded in Python, over a 64 MiB prefix, extrapolated
            limit = 64 * MB
            t0 = time.perf_counter()
            seen = 0
            want = present[0]
            for seg in log.segments:
                for ref in seg.batches(0):
                    if ref.position > limit:
                        break
                    recs, _ = seg.records_of(ref)
                    seen += sum(1 for r in recs if r.key == want)
                break
            res["naive_scan_s_extrapolated"] = (time.perf_counter() - t0) * res["bytes"] / min(limit, res["bytes"])
        finally:
            log.close()
        res["ratio_single_vs_compiled_scan"] = res["single_present_per_s"] * t_scan_one
        res["ratio_batch_vs_compiled_scan"] = res["batch_keys_per_s"] * t_scan_batch / 1000
        res["ratio_single_vs_naive_scan"] = res["single_present_per_s"] * res["naive_scan_s_extrapolated"]
    finally:
        if not a.keep:
            shutil.rmtree(base, ignore_errors=True)
    print(f"partition: {res['bytes'] / MB:.0f} MiB, {res['records']} records in {res['segments']} segment(s), "
          f"{res['records_per_present_key']:.1f} records per key; key indexes {res['keyindex_bytes'] / MB:.1f} MiB")
    print(f"append: {res['append_mb_s_key_index']:.0f} MB/s with the key index vs {res['append_mb_s_plain']:.0f} MB/s "
          f"without (ratio {res['append_mb_s_key_index'] / res['append_mb_s_plain']:.2f})")
    print(f"rebuild_keyindex of the partition: {res['rebuild_keyindex_s']:.2f} s")
    print(f"single lookups: {res['single_present_per_s']:.0f}/s present, {res['single_absent_per_s']:.0f}/s absent")
    print(f"batch lookups: {res['batch_keys_per_s']:.0f} keys/s (10,000 keys in one call)")
    print(f"full scan (compiled extraction + record check): {res['scan_one_key_s']:.2f} s for one key, "
          f"{res['scan_1000_keys_s']:.2f} s for 1,000 keys; naive Python scan ~{res['naive_scan_s_extrapolated']:.1f} s")
    print(f"ratio single lookup vs compiled full scan: {res['ratio_single_vs_compiled_scan']:.0f}x; "
          f"vs naive scan: {res['ratio_single_vs_naive_scan']:.0f}x")
    print(f"ratio batch lookup vs compiled full scan of the same keys: {res['ratio_batch_vs_compiled_scan']:.0f}x")
    if a.json:
        Path(a.json).write_text(json.dumps(res, indent=2))


if __name__ == "__main__":
    main()
