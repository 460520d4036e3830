"""Benchmarks of the Kafka layer.

    python benchmarks/bench_kafka.py [--size-mb N] [--keep] [--json FILE]   (default 1024 MB)

Data is generated deterministically under ``benchmarks/data/kafka/`` (gitignored): batches of 16
records of 1 KiB.  Every figure is printed with a ratio against a baseline measured in the same
process: the raw write / ``cat``-style read of the same bytes (the physical anchor) and the
pure-Python twins of the compiled kernels.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np

ROOT = Path(__file__).resolve().parent
sys.path.insert(0, str(ROOT.parent / "src"))

from mqstore.formats.kafka import SimpleRecord, encode_batch  # noqa: E402
from mqstore.kafka import LogConfig, LogSegment, PartitionLog, rebuild_indexes  # noqa: E402
from mqstore.kernels.kafka.batches import scan_batches, scan_batches_py  # noqa: E402
from mqstore.kernels.kafka.index_build import build_index_entries, build_index_entries_py  # noqa: E402
from mqstore.kernels.kafka.index_search import index_search_py  # noqa: E402

RECORD = 1024
PER_BATCH = 16
MB = 1024 * 1024


def make_batches(n_batches: int) -> list[bytes]:
    rng = np.random.default_rng(20240611)
    pool = rng.bytes(RECORD * 64)
    out = []
    for b in range(n_batches):
        recs = []
        for i in range(PER_BATCH):
            j = (b * PER_BATCH + i) % 63
            recs.append(SimpleRecord(value=pool[j * RECORD : (j + 1) * RECORD], key=b"key-%d" % i,
                                     timestamp=1_700_000_000_000 + b * PER_BATCH + i))
        out.append(encode_batch(recs, base_offset=b * PER_BATCH))
    return out


def timed(fn: Any, *a: Any, **k: Any) -> tuple[Any, float]:
    t = time.perf_counter()
    r = fn(*a, **k)
    return r, time.perf_counter() - t


def raw_read(path: Path) -> int:
    n = 0
    with open(path, "rb", buffering=0) as f:
        while chunk := f.read(MB):
            n += len(chunk)
    return n


def full_index_lookups(d: Path, lookups: int) -> dict[str, float]:
    """Lookups on full default-size (10 MiB) offset and time indexes, as Kafka's anchor was measured:
    one entry per 4 KiB of log, offsets 16 apart, random targets (deterministic)."""
    from mqstore.storage.kafka.index import OffsetIndex, TimeIndex

    d.mkdir(parents=True, exist_ok=True)
    n = 10 * MB // 8
    arr = np.empty((n, 2), dtype=">i4")
    arr[:, 0] = np.arange(n) * 16
    arr[:, 1] = np.arange(n) * 4096
    (d / "00000000000000000000.index").write_bytes(arr.tobytes())
    nt = 10 * MB // 12
    tarr = np.empty(nt, dtype=[("t", ">i8"), ("o", ">i4")])
    tarr["t"] = 1_700_000_000_000 + np.arange(nt) * 16
    tarr["o"] = np.arange(nt) * 16
    (d / "00000000000000000000.timeindex").write_bytes(tarr.tobytes())
    oi = OffsetIndex(d / "00000000000000000000.index", 0, writable=False)
    ti = TimeIndex(d / "00000000000000000000.timeindex", 0, writable=False)
    rng = np.random.default_rng(11)
    out: dict[str, float] = {"full_entries": n}
    for name, idx, lo, hi in (("offset", oi, 0, n * 16), ("time", ti, 1_700_000_000_000, 1_700_000_000_000 + nt * 16)):
        targets = rng.integers(lo, hi, lookups)
        small = targets[:100_000].tolist()
        idx.lookup(small[0])
        idx.lookup_many(targets[:10])
        best = 0.0
        for _ in range(3):
            t = time.perf_counter()
            for x in small:
                idx.lookup(x)
            best = max(best, len(small) / (time.perf_counter() - t))
        out[f"full_{name}_single"] = best
        out[f"full_{name}_batch"] = max(lookups / timed(idx.lookup_many, targets)[1] for _ in range(3))
        # in-process baselines: the exact scalar search reading the mapping per probe (the single
        # path before the search cache) and the plain compiled search followed by numpy gathers
        col, n_e, warm = idx._column(False), idx.entries, idx.warm_entries
        t = time.perf_counter()
        for x in small[:20_000]:
            s = index_search_py(col, n_e, x, warm)
            if s >= 0:
                idx.entry(s)
        out[f"full_{name}_single_baseline"] = 20_000 / (time.perf_counter() - t)

        def plain(targets: np.ndarray = targets, idx: Any = idx) -> None:
            slots = idx.search_many(targets)
            keys, vals = idx.column_array(False), idx.column_array(True)
            found = slots >= 0
            safe = np.where(found, slots, 0)
            np.where(found, keys[safe], -1).astype(np.int64)
            np.where(found, vals[safe], 0).astype(np.int64)

        out[f"full_{name}_batch_baseline"] = max(lookups / timed(plain)[1] for _ in range(3))
    oi.close()
    ti.close()
    return out


def recovery_scan_vs_mapped(seg_path: Path, size: int, rows: list[tuple[str, str, str, str]]) -> dict[str, float]:
    """The analysis pass of recovery (walk + CRC of every batch), the one-pass ``pread`` path against
    the mapped path (header scan of a fresh mapping, then the CRC check), alternating, best of 5."""
    from mqstore.storage.kafka.rebuild import MappedLog, analyze_log, analyze_log_file

    def mapped() -> None:
        with MappedLog(seg_path) as ml:
            analyze_log(ml.mm)

    def pread(threads: int | None = None) -> None:
        fd = os.open(seg_path, os.O_RDONLY)
        try:
            analyze_log_file(fd, size, threads=threads)
        finally:
            os.close(fd)

    runs = {"mapped": mapped, "pread": pread, "pread1": lambda: pread(1)}
    best = {k: (9e9, 9e9) for k in runs}
    for _ in range(5):
        for k, fn in runs.items():
            c0 = time.process_time()
            _, dt = timed(fn)
            best[k] = (min(best[k][0], dt), min(best[k][1], time.process_time() - c0))
    (wm, cm), (wp, cp), (w1, c1) = best["mapped"], best["pread"], best["pread1"]
    rows.append(("recovery scan+CRC, one pread pass", f"{size / wp / MB:,.0f} MB/s",
                 f"{cp:.2f} CPU-s; 1 thread {size / w1 / MB:,.0f} MB/s, {c1:.2f} CPU-s",
                 f"{wm / wp:.2f}× mapped scan then CRC ({size / wm / MB:,.0f} MB/s, {cm:.2f} CPU-s)"))
    return {"recovery_scan_mb_s": size / wp / MB, "recovery_scan_cpu_s": cp, "recovery_scan_1t_mb_s": size / w1 / MB,
            "recovery_scan_1t_cpu_s": c1, "recovery_scan_mapped_mb_s": size / wm / MB,
            "recovery_scan_mapped_cpu_s": cm}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--size-mb", type=int, default=1024, help="segment size to generate (MB)")
    ap.add_argument("--lookups", type=int, default=1_000_000, help="number of index lookups (batch)")
    ap.add_argument("--json", type=Path, help="also write the figures to this JSON file")
    args = ap.parse_args()
    data_dir = ROOT / "data" / "kafka"
    shutil.rmtree(data_dir, ignore_errors=True)
    data_dir.mkdir(parents=True)
    rows: list[tuple[str, str, str, str]] = []
    figures: dict[str, float] = {}

    # ---------------------------------------------------------------- data + append
    one = make_batches(1)[0]
    n_batches = args.size_mb * MB // len(one)
    t0 = time.perf_counter()
    template = make_batches(256)
    enc_rate = 256 * PER_BATCH / (time.perf_counter() - t0)
    batches = [template[i % 256] for i in range(n_batches)]
    total = sum(len(b) for b in batches)
    raw_path = data_dir / "raw.bin"
    t = time.perf_counter()
    with open(raw_path, "wb", buffering=0) as f:
        for b in batches:
            f.write(b)
    raw_write = total / (time.perf_counter() - t) / MB
    raw_path.unlink()
    cfg = LogConfig(segment_bytes=2**31 - 1, validate_appends=True)
    part = data_dir / "bench-0"
    log = PartitionLog.open(part, cfg)
    t = time.perf_counter()
    for b in batches:
        log.append(b, assign_offsets=True)
    dt = time.perf_counter() - t
    log.close()
    append_mb = total / dt / MB
    figures["append_mb_s"] = append_mb
    rows.append(("append (leader, 16×1 KiB batches)", f"{append_mb:,.0f} MB/s",
                 f"{n_batches * PER_BATCH / dt:,.0f} records/s", f"{append_mb / raw_write:.2f}× raw write ({raw_write:,.0f} MB/s)"))
    rows.append(("encode_batch (16×1 KiB, python)", f"{enc_rate * RECORD / MB:,.0f} MB/s", f"{enc_rate:,.0f} records/s", "-"))
    seg_path = part / "00000000000000000000.log"
    size = seg_path.stat().st_size

    # ---------------------------------------------------------------- physical anchor
    raw_read(seg_path)
    _, dt_raw = timed(raw_read, seg_path)
    cat = size / dt_raw / MB
    figures["segment_bytes"] = size
    figures["batches"] = n_batches
    figures["cat_mb_s"] = cat
    rows.append(("cat-style read (page cache)", f"{cat:,.0f} MB/s", f"{size / MB:,.0f} MB", "1.00× (anchor)"))

    # ---------------------------------------------------------------- rebuild-index
    out = data_dir / "rebuilt"
    out.mkdir()
    res, dt = timed(rebuild_indexes, seg_path, out)
    figures["rebuild_first_mb_s"] = size / dt / MB
    dt = min(dt, *(timed(rebuild_indexes, seg_path, out)[1] for _ in range(2)))  # best of 3, as the other rows
    rb = size / dt / MB
    figures["rebuild_mb_s"] = rb
    rows.append(("rebuild-index (scan+CRC+index)", f"{rb:,.0f} MB/s", f"{res.batches:,} batches",
                 f"{rb / cat:.2f}× cat"))
    assert (out / "00000000000000000000.index").read_bytes() == (part / "00000000000000000000.index").read_bytes()
    with open(seg_path, "rb") as f:
        import mmap

        mm = mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ)
        scan_batches(mm[: 1 << 20])
        sc, dt_fast = timed(scan_batches, mm)
        slice_len = min(size, 64 * MB)
        sub = memoryview(mm)[:slice_len]
        _, dt_fast_s = timed(scan_batches, sub)
        _, dt_slow_s = timed(scan_batches_py, sub)
        del sub
        rows.append(("scan kernel (numba)", f"{size / dt_fast / MB:,.0f} MB/s", f"{sc['count'] / dt_fast:,.0f} batches/s",
                     f"{dt_slow_s / dt_fast_s:,.0f}× python twin"))
        n = sc["count"]
        _, dt_b = timed(build_index_entries, sc, n, 0, 4096, 10 * MB)
        _, dt_bp = timed(build_index_entries_py, sc, n, 0, 4096, 10 * MB)
        rows.append(("index build kernel (numba)", f"{n / dt_b:,.0f} batches/s", "-", f"{dt_bp / dt_b:,.0f}× python twin"))
        del sc
        mm.close()

    # ---------------------------------------------------------------- recovery
    seg = LogSegment.open(seg_path, cfg, read_only=False)
    best = (9e9, 0.0)
    for _ in range(3):  # recovering a valid segment rewrites the same index bytes: repeatable
        c0 = time.process_time()
        cut, dt = timed(seg.recover)
        assert cut == 0
        best = min(best, (dt, time.process_time() - c0))
    seg.close()
    dt, cpu = best
    rec = size / dt / MB
    figures["recovery_mb_s"] = rec
    figures["recovery_batches_s"] = n_batches / dt
    figures["recovery_cpu_s"] = cpu
    rows.append(("recovery (LogSegment.recover)", f"{rec:,.0f} MB/s", f"{dt:.2f} s ({cpu:.2f} CPU-s)",
                 f"{rec / cat:.2f}× cat"))
    figures.update(recovery_scan_vs_mapped(seg_path, size, rows))
    (part / ".kafka_cleanshutdown").unlink()
    (part / "recovery-point-offset-checkpoint").write_text("0\n1\nbench 0 0\n")
    log, dt = timed(PartitionLog.open, part, cfg)
    rows.append(("unclean PartitionLog.open", f"{size / dt / MB:,.0f} MB/s", f"{dt:.2f} s", f"{size / dt / MB / cat:.2f}× cat"))

    # ---------------------------------------------------------------- lookups
    seg = log.active_segment
    oi = seg.offset_index
    rng = np.random.default_rng(1)
    targets = rng.integers(0, log.log_end_offset, args.lookups)
    oi.lookup_many(targets[:10])
    tl = targets[: min(len(targets), 100_000)].tolist()
    oi.lookup(tl[0])
    single = 0.0
    for _ in range(3):
        t = time.perf_counter()
        for x in tl:
            oi.lookup(x)
        single = max(single, len(tl) / (time.perf_counter() - t))
    many = max(len(targets) / timed(oi.lookup_many, targets)[1] for _ in range(3))
    rows.append((f"offset index lookup, single ({oi.entries:,} entries)", f"{single:,.0f} /s", "-", "1.00× (baseline)"))
    rows.append(("offset index lookup, vectorised", f"{many:,.0f} /s", f"{len(targets):,} at once", f"{many / single:,.0f}× single"))
    ti = seg.time_index
    tts = rng.integers(1_700_000_000_000, 1_700_000_000_000 + log.log_end_offset, args.lookups)
    ttl = tts[:100_000].tolist()
    ti.lookup(ttl[0])
    tsingle = 0.0
    for _ in range(3):
        t = time.perf_counter()
        for x in ttl:
            ti.lookup(x)
        tsingle = max(tsingle, len(ttl) / (time.perf_counter() - t))
    tmany = max(len(tts) / timed(ti.lookup_many, tts)[1] for _ in range(3))
    rows.append(("time index lookup, single", f"{tsingle:,.0f} /s", "-", "1.00× (baseline)"))
    rows.append(("time index lookup, vectorised", f"{tmany:,.0f} /s", f"{len(tts):,} at once",
                 f"{tmany / tsingle:,.0f}× single"))
    figures.update(offset_single=single, offset_batch=many, time_single=tsingle, time_batch=tmany,
                   offset_entries=oi.entries, time_entries=ti.entries)
    full = full_index_lookups(data_dir / "full-index", args.lookups)
    figures.update(full)
    for kind, java in (("offset", "Java 2.9-3.7 M/s"), ("time", "Java 2.0-2.8 M/s")):
        f = f"full_{kind}"
        rows.append((f"{kind} lookup, full 10 MiB index ({full['full_entries']:,} entries), single",
                     f"{full[f + '_single']:,.0f} /s", java,
                     f"{full[f + '_single'] / full[f + '_single_baseline']:.1f}× scalar search on the mapping"))
        rows.append((f"{kind} lookup, full 10 MiB index, vectorised", f"{full[f + '_batch']:,.0f} /s", java,
                     f"{full[f + '_batch'] / full[f + '_batch_baseline']:.1f}× plain search + numpy gathers"))
    t = time.perf_counter()
    for x in tl[:20_000]:
        seg.translate_offset(x)
    rows.append(("translate_offset (index + file walk)", f"{20_000 / (time.perf_counter() - t):,.0f} /s", "-", "-"))
    log.close()

    if args.json:
        args.json.write_text(json.dumps(figures, indent=1))
    w = [max(len(r[i]) for r in rows) for i in range(4)]
    print(f"\nKafka layer benchmark: segment {size / MB:,.0f} MB, {n_batches:,} batches of {PER_BATCH}×1 KiB records, "
          f"{os.cpu_count()} CPUs\n")
    for r in rows:
        print("  ".join(c.ljust(w[i]) for i, c in enumerate(r)))


if __name__ == "__main__":
    main()
