"""Benchmark of the RocketMQ kernels (fast path vs pure-Python twin, and vs the Java anchors of
issue 5).  Deterministic data, one command:

    python benchmarks/bench_rocketmq_kernels.py [--keys N] [--mb N] [--items N] [--skip-cold]

Figures: Java ``String.hashCode`` of ``topic#key`` spans in one buffer; CommitLog scan (headers,
properties, keys, tags; with and without body CRC); bulk IndexFile build at the default geometry
(5M slots, 20M items); batch and single ``select_many`` lookups.  The reference twins run on a
subsample.  Numba compile cost is measured separately in a child process with an empty JIT cache.
"""

from __future__ import annotations

import argparse
import os
import struct
import subprocess
import sys
import tempfile
import time
import zlib
from collections.abc import Callable
from typing import Any

import numpy as np

from mqstore.formats.rocketmq.indexfile import (
    DEFAULT_HASH_SLOT_NUM,
    DEFAULT_INDEX_NUM,
    IndexHeader,
    index_file_size,
)
from mqstore.formats.rocketmq.javahash import java_bytes_hashcode
from mqstore.formats.rocketmq.properties import encode_properties
from mqstore.formats.rocketmq.record import BLANK_MAGIC, MAGIC_V1
from mqstore.kernels.backend import built as native_built
from mqstore.kernels.javahash import hash_spans, index_hash_spans
from mqstore.kernels.rocketmq.chain_walk import select_many, select_many_py
from mqstore.kernels.rocketmq.index_build import bulk_put, bulk_put_parallel, bulk_put_py, header_array
from mqstore.kernels.rocketmq.scan import scan_segment, scan_segment_py
from mqstore.kernels.threads import default_threads

TOPICS = ["TopicTest", "orders", "payments", "user-events", "inventory", "AaTopic", "BBTopic", "audit-log"]
TAGS = ["TagA", "TagB", "TagC", "TAG1", "polygenelubricants", "TagNeg", "created", "updated"]


def timed(fn: Callable[[], Any], repeat: int = 3) -> tuple[float, Any]:
    best, result = float("inf"), None
    for _ in range(repeat):
        t = time.perf_counter()
        result = fn()
        best = min(best, time.perf_counter() - t)
    return best, result


def timed_cpu(fn: Callable[[], Any], repeat: int = 3) -> tuple[float, float, Any]:
    """Best wall time, best CPU time of the process (all threads) and the last result."""
    wall, cpu, result = float("inf"), float("inf"), None
    for _ in range(repeat):
        t, c = time.perf_counter(), time.process_time()
        result = fn()
        wall, cpu = min(wall, time.perf_counter() - t), min(cpu, time.process_time() - c)
    return wall, cpu, result


# ----------------------------------------------------------------------------- data
def make_keys(n: int, seed: int = 1) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """``topic#key`` strings packed in one buffer: (buf, starts, lengths, topic_lens, key_starts)."""
    rng = np.random.default_rng(seed)
    topic_idx = rng.integers(0, len(TOPICS), n)
    ids = rng.integers(0, 10**9, n)
    kinds = rng.integers(0, 3, n)
    prefixes = ("order-", "user-", "txn-")
    parts = [f"{TOPICS[t]}#{prefixes[k]}{i}" for t, i, k in zip(topic_idx.tolist(), ids.tolist(), kinds.tolist(), strict=True)]
    encoded = [p.encode() for p in parts]
    lengths = np.fromiter(map(len, encoded), np.int64, n)
    starts = np.zeros(n, np.int64)
    np.cumsum(lengths[:-1], out=starts[1:])
    topic_lens = np.array([len(TOPICS[t]) for t in range(len(TOPICS))], np.int64)[topic_idx]
    return np.frombuffer(b"".join(encoded), np.uint8), starts, lengths, topic_lens, starts + topic_lens + 1


def make_commitlog(size: int, seed: int = 2, *, base_offset: int = 0, first_index: int = 0,
                   first_ts: int = 1_700_000_000_000) -> tuple[np.ndarray, int]:
    """A CommitLog segment of realistic v1 records (100-1000 byte bodies, KEYS, TAGS, UNIQ_KEY),
    ended by a blank record.  Returns (buffer, number of messages).  ``base_offset``,
    ``first_index`` and ``first_ts`` continue a previous segment (see :func:`make_segments`)."""
    rng = np.random.default_rng(seed)
    out = bytearray(size)
    pool = rng.integers(0, 256, 1 << 20, dtype=np.uint8).tobytes()
    pos = 0
    n = first_index
    ts = first_ts
    head = struct.Struct(">iiiiiqqiq4si q4si iq i")
    while True:
        topic = TOPICS[n % len(TOPICS)].encode()
        body_len = int(rng.integers(100, 1001))
        off = int(rng.integers(0, len(pool) - body_len))
        body = pool[off : off + body_len]
        uniq = rng.integers(0, 2**63, dtype=np.int64)
        props = encode_properties(
            {
                "KEYS": f"order-{rng.integers(0, 10**8)} user-{rng.integers(0, 10**6)}",
                "UNIQ_KEY": f"{uniq:016X}{n:016X}",
                "CLUSTER": "DefaultCluster",
                "WAIT": "true",
                "TAGS": TAGS[n % len(TAGS)],
            }
        ).encode()
        total = 91 + body_len + len(topic) + len(props)
        if pos + total + 8 > size:
            break
        ts += int(rng.integers(0, 3))
        head.pack_into(
            out, pos, total, MAGIC_V1, zlib.crc32(body) & 0x7FFFFFFF, n % 4, 0, n // 8, base_offset + pos, 0, ts - 5,
            b"\xc0\xa8\x01\x07", 40000, ts, b"\x0a\x00\x00\x05", 10911, 0, 0, body_len,
        )  # fmt: skip
        p = pos + 88
        out[p : p + body_len] = body
        p += body_len
        out[p] = len(topic)
        out[p + 1 : p + 1 + len(topic)] = topic
        p += 1 + len(topic)
        struct.pack_into(">h", out, p, len(props))
        out[p + 2 : p + 2 + len(props)] = props
        pos += total
        n += 1
    struct.pack_into(">ii", out, pos, size - pos, BLANK_MAGIC)
    return np.frombuffer(out, np.uint8), n - first_index


def make_segments(directory: str | os.PathLike[str], total: int, segment_size: int = 1 << 30, seed: int = 2) -> int:
    """Write a CommitLog of ``total`` bytes as segments of ``segment_size`` (continuing offsets,
    queue offsets and timestamps across segments); returns the number of messages."""
    os.makedirs(directory, exist_ok=True)
    n = 0
    ts = 1_700_000_000_000
    for i in range(max(1, total // segment_size)):
        base = i * segment_size
        buf, m = make_commitlog(segment_size, seed + i, base_offset=base, first_index=n, first_ts=ts)
        with open(os.path.join(directory, f"{base:020d}"), "wb") as fh:
            fh.write(memoryview(buf))
        n += m
        ts += 3 * m  # past the last store time of the segment (at most 2 ms per message)
    return n


# ----------------------------------------------------------------------------- cold compile
COLD = r"""
import time, numpy as np
t0 = time.perf_counter()
from mqstore.kernels.javahash import hash_spans
from mqstore.kernels.rocketmq.scan import scan_segment
from mqstore.kernels.rocketmq.framing import record_positions
from mqstore.kernels.rocketmq.columns import decode_columns
from mqstore.kernels.rocketmq.index_build import bulk_put
from mqstore.kernels.rocketmq.chain_walk import select_many
t1 = time.perf_counter()
hash_spans(b"ab", np.array([0]), np.array([2])); t2 = time.perf_counter()
scan_segment(b"\0" * 64, 0, 0, 64, check_crc=True); t3 = time.perf_counter()
record_positions(b"\0" * 64, 0, 64); decode_columns(b"", 0, np.empty(0, np.int64)); t4 = time.perf_counter()
buf = np.zeros(40 + 16 + 40, np.uint8); h = np.array([0, 0, 0, 0, 0, 1], np.int64)
bulk_put(buf, 4, 2, h, np.zeros(1, np.int32), np.zeros(1, np.int64), np.zeros(1, np.int64)); t5 = time.perf_counter()
select_many(buf, 4, 2, h, np.zeros(1, np.int32), 1, 0, 1); t6 = time.perf_counter()
print(t1 - t0, t2 - t1, t3 - t2, t4 - t3, t5 - t4, t6 - t5)
"""


def cold_compile() -> list[float]:
    with tempfile.TemporaryDirectory() as cache:
        env = dict(os.environ, NUMBA_CACHE_DIR=cache)
        res = []
        for _ in range(2):  # first run compiles into the empty cache, second loads from it
            out = subprocess.run([sys.executable, "-c", COLD], env=env, capture_output=True, text=True, check=True)
            res.append([float(x) for x in out.stdout.split()])
    return res[0] + res[1]


# ----------------------------------------------------------------------------- main
def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--keys", type=int, default=4_000_000, help="topic#key keys to hash (default 4M)")
    ap.add_argument("--mb", type=int, default=256, help="CommitLog buffer size in MiB (default 256)")
    ap.add_argument("--items", type=int, default=DEFAULT_INDEX_NUM, help="index items (default 20M)")
    ap.add_argument("--slots", type=int, default=DEFAULT_HASH_SLOT_NUM, help="hash slots (default 5M)")
    ap.add_argument("--skip-cold", action="store_true", help="do not measure the cold compile cost")
    ap.add_argument("--threads", type=int, default=default_threads(),
                    help="threads of the multi-threaded figures (default: CPUs, at most 4)")
    args = ap.parse_args()
    nt = args.threads
    rows: list[tuple[str, str, str, str, str]] = []
    # (figure, unit, n, 1-thread wall, 1-thread cpu, N-thread wall, N-thread cpu): the thread speed-up table
    speedups: list[tuple[str, str, int, float, float, float, float]] = []

    def versus_one_thread(name: str, unit: str, n: int, fn: Callable[[int], Any], repeat: int = 3) -> tuple[float, Any]:
        """Time ``fn(1)`` and ``fn(nt)`` back to back (best of ``repeat`` each, alternating); returns
        the N-thread wall time and result."""
        w1 = c1 = wn = cn = float("inf")
        res = None
        for _ in range(repeat):
            a, b, res1 = timed_cpu(lambda: fn(1), 1)
            w1, c1 = min(w1, a), min(c1, b)
            a, b, res = timed_cpu(lambda: fn(nt), 1)
            wn, cn = min(wn, a), min(cn, b)
        speedups.append((name, unit, n, w1, c1, wn, cn))
        return wn, (res1, res)

    def row(name: str, fast: float, ref: float | None, anchor: float | None, unit: str) -> None:
        rows.append(
            (
                name,
                f"{fast:,.0f} {unit}",
                f"{ref:,.0f}" if ref else "-",
                f"{fast / ref:,.1f}x" if ref else "-",
                f"{anchor:,.0f} ({fast / anchor:.2f}x)" if anchor else "-",
            )
        )

    def vs_numba(name: str, unit: str, n: int, native_fn: Callable[[], Any], numba_fn: Callable[[], Any],
                 repeat: int = 3) -> None:
        """A row: the native kernel's rate, the numba kernel's (same inputs, alternating, best of
        ``repeat``) and numba's time / native's time."""
        numba_fn()  # (compiled or loaded from the cache before timing)
        nat = nb = float("inf")
        for _ in range(repeat):
            nat = min(nat, timed(native_fn, 1)[0])
            nb = min(nb, timed(numba_fn, 1)[0])
        rows.append((name, f"{n / nat:,.0f} {unit}", f"numba {n / nb:,.0f}", f"{nb / nat:,.2f}x", "-"))

    # warm the JIT (loads the cache when present)
    t = time.perf_counter()
    hash_spans(b"ab", np.array([0]), np.array([2]))
    scan_segment(b"\0" * 64, 0, 0, 64, check_crc=True)
    buf0 = np.zeros(96, np.uint8)
    h0 = np.array([0, 0, 0, 0, 0, 1], np.int64)
    bulk_put(buf0, 4, 2, h0, np.zeros(1, np.int32), np.zeros(1, np.int64), np.zeros(1, np.int64))
    select_many(buf0, 4, 2, h0, np.zeros(1, np.int32), 1, 0, 1)
    warm = time.perf_counter() - t

    # ---- Java hash
    print(f"generating {args.keys:,} keys ...", flush=True)
    kbuf, starts, lengths, tlens, kstarts = make_keys(args.keys)
    sec, (hashes1, hashes) = versus_one_thread("Java hashCode of topic#key spans", "keys/s", args.keys,
                                               lambda th: hash_spans(kbuf, starts, lengths, threads=th), 5)
    assert np.array_equal(hashes1, hashes)
    sub = min(200_000, args.keys)
    raw = kbuf.tobytes()
    t = time.perf_counter()
    ref = [java_bytes_hashcode(raw[s : s + ln]) for s, ln in zip(starts[:sub].tolist(), lengths[:sub].tolist(), strict=True)]
    ref_sec = time.perf_counter() - t
    assert ref == hashes[:sub].tolist()
    row("Java hashCode of topic#key spans", args.keys / sec, sub / ref_sec, 38_700_000, "keys/s")
    sec2, _ = timed(lambda: index_hash_spans(kbuf, starts, tlens, kstarts, lengths - tlens - 1, threads=nt))
    row("index hash (topic span + key span)", args.keys / sec2, None, None, "keys/s")
    if native_built("_nat_rmq_index"):  # the C kernels against the numba ones, same process, same inputs
        from mqstore.kernels import javahash as jh

        for label, threads in (("1 thread", 1), (f"{nt} threads", nt)):
            vs_numba(f"Java hashCode, native vs numba, {label}", "keys/s", args.keys,
                     lambda th=threads: jh.hash_spans_native(kbuf, starts, lengths, threads=th),
                     lambda th=threads: jh.hash_spans_numba(kbuf, starts, lengths, threads=th), 5)  # fmt: skip
        vs_numba(f"index hash, native vs numba, {nt} threads", "keys/s", args.keys,
                 lambda: jh.index_hash_spans_native(kbuf, starts, tlens, kstarts, lengths - tlens - 1, threads=nt),
                 lambda: jh.index_hash_spans_numba(kbuf, starts, tlens, kstarts, lengths - tlens - 1, threads=nt), 5)

    # ---- CommitLog scan
    size = args.mb << 20
    print(f"generating a {args.mb} MiB CommitLog ...", flush=True)
    clog, nmsg = make_commitlog(size)
    for crc, anchor in ((False, 1_630_000), (True, 1_520_000)):
        label = "CommitLog scan" + (" + body CRC" if crc else "")
        sec, (batch1, batch) = versus_one_thread(label, "msgs/s", nmsg, lambda th, crc=crc: scan_segment(
            clog, 0, 0, size, check_crc=crc, threads=th), 2)  # fmt: skip
        assert len(batch) == nmsg and batch.stop == "blank", (len(batch), nmsg, batch.stop, batch.error)
        assert np.array_equal(batch1.key_hash, batch.key_hash) and np.array_equal(batch1.tags_code, batch.tags_code)
        sub_end = int(batch.commit_log_offset[min(20_000, nmsg - 1)])
        t = time.perf_counter()
        refb = scan_segment_py(clog, 0, 0, sub_end, check_crc=crc)
        ref_sec = time.perf_counter() - t
        assert np.array_equal(refb.key_hash, batch.key_hash[: len(refb.key_hash)])
        row(label, nmsg / sec, len(refb) / ref_sec, anchor, "msgs/s")
        rows.append((f"  ({label}, bytes)", f"{size / sec / 1e6:,.0f} MB/s", "-", "-", "-"))
    keys_per_msg = len(batch.key_hash) / nmsg

    # ---- bulk index build at the default geometry
    n_items = args.items
    n_keys = n_items - 1
    rng = np.random.default_rng(3)
    print(f"bulk index build: {args.slots:,} slots x {n_items:,} items ...", flush=True)
    kh = rng.integers(0, 2**31 - 1, n_keys, dtype=np.int64).astype(np.int32)
    phy = np.repeat(np.arange(0, n_keys // 3 + 1, dtype=np.int64) * 500, 3)[:n_keys]
    ts = 1_700_000_000_000 + np.arange(n_keys, dtype=np.int64) // 2
    fsize = index_file_size(args.slots, n_items)
    ibuf = np.zeros(fsize, np.uint8)
    digests: dict[int, int] = {}

    def build(th: int) -> tuple[int, np.ndarray]:
        ibuf[:] = 0  # a fresh file (its pages already mapped, as the rebuild pre-faults them)
        h = header_array(IndexHeader())
        consumed = bulk_put_parallel(ibuf, args.slots, n_items, h, kh, phy, ts, threads=th)
        if th not in digests:  # first round only (the best of 2 rounds is then the second one)
            digests[th] = zlib.crc32(memoryview(ibuf))
        return consumed, h

    best, ((consumed1, header1), (consumed, header)) = versus_one_thread(
        "IndexFile bulk build (full file)", "keys/s", n_keys, build, 2)
    assert consumed == consumed1 == n_keys and header[5] == n_items and np.array_equal(header, header1)
    assert digests[1] == digests[nt], "the N-thread build differs from the sequential one"
    sub = 200_000
    rbuf = np.zeros(fsize, np.uint8)
    rheader = header_array(IndexHeader())
    t = time.perf_counter()
    bulk_put_py(rbuf, args.slots, n_items, rheader, kh[:sub], phy[:sub], ts[:sub])
    ref_sec = time.perf_counter() - t
    row("IndexFile bulk build (full file)", n_keys / best, sub / ref_sec, 5_160_000, "keys/s")
    if native_built("_nat_rmq_index"):
        from mqstore.kernels.rocketmq import index_build as ib

        def build_with(fn: Callable[..., int], th: int) -> int:
            ibuf[:] = 0
            consumed = fn(ibuf, args.slots, n_items, header_array(IndexHeader()), kh, phy, ts, threads=th)
            digests.setdefault(-th if fn is ib.bulk_put_parallel_native else -100 - th, zlib.crc32(memoryview(ibuf)))
            return consumed

        for label, threads in (("1 thread", 1), (f"{nt} threads", nt)):
            vs_numba(f"IndexFile bulk build, native vs numba, {label}", "keys/s", n_keys,
                     lambda th=threads: build_with(ib.bulk_put_parallel_native, th),
                     lambda th=threads: build_with(ib.bulk_put_parallel_numba, th), 2)  # fmt: skip
        assert len({v for k, v in digests.items()}) == 1, "native and numba builds differ"
    del rbuf

    # ---- batch lookups
    q = 4_000_000
    present = kh[rng.integers(0, n_keys, q)]
    absent = rng.integers(0, 2**31 - 1, q, dtype=np.int64).astype(np.int32)
    end_ts = 2**63 - 1
    for label, keys, anchor in (("select_many batch, present keys", present, 1_900_000),
                                ("select_many batch, random keys", absent, 2_940_000)):  # fmt: skip
        sec, (_, splits) = timed(lambda keys=keys: select_many(ibuf, args.slots, n_items, header, keys, 64, 0, end_ts), 2)
        sub = 50_000
        t = time.perf_counter()
        _, ref_splits = select_many_py(ibuf, args.slots, n_items, header, keys[:sub], 64, 0, end_ts)
        ref_sec = time.perf_counter() - t
        assert np.array_equal(ref_splits, splits[: sub + 1])
        row(label, q / sec, sub / ref_sec, anchor, "lookups/s")
    single = present[:50_000]
    t = time.perf_counter()
    for i in range(len(single)):
        select_many(ibuf, args.slots, n_items, header, single[i : i + 1], 64, 0, end_ts)
    sec = time.perf_counter() - t
    row("select_many, one key per call", len(single) / sec, None, 1_900_000, "lookups/s")

    # ---- report
    print()
    print(f"CommitLog: {nmsg:,} messages in {args.mb} MiB ({size / nmsg:,.0f} B/msg, {keys_per_msg:.1f} index keys/msg)")
    widths = [max(len(r[i]) for r in [*rows, ("figure", "fast path", "reference", "ratio", "Java anchor")]) for i in range(5)]
    header_row = ("figure", "fast path", "reference", "ratio", "Java anchor (fast/Java)")
    print("  ".join(h.ljust(w) for h, w in zip(header_row, widths, strict=True)))
    print("  ".join("-" * w for w in widths))
    for r in rows:
        print("  ".join(c.ljust(w) for c, w in zip(r, widths, strict=True)))
    print()
    print(f"thread speed-up ({nt} threads vs 1, same process, back to back, best of N; CPU = all threads):")
    print(f"{'figure':<36}  {'1 thread':>24}  {f'{nt} threads':>24}  {'wall ratio':>10}  {'CPU per item, 1 -> N':>22}")
    for name, unit, n, w1, c1, wn, cn in speedups:
        print(f"{name:<36}  {f'{n / w1:,.0f} {unit}':>24}  {f'{n / wn:,.0f} {unit}':>24}  {w1 / wn:>9.2f}x  "
              f"{f'{c1 / n * 1e9:,.0f} -> {cn / n * 1e9:,.0f} ns':>22}")
    print()
    print(f"JIT warm-up in this process (cache load or compile): {warm:.2f} s")
    if not args.skip_cold:
        c = cold_compile()
        names = ("import", "javahash", "scan", "positions+columns", "bulk_put", "select_many")
        print("cold compile (empty NUMBA_CACHE_DIR): " + ", ".join(f"{n} {v:.2f}s" for n, v in zip(names, c[:6], strict=True)))
        print(f"  total {sum(c[:6]):.2f} s; next process with that cache: {sum(c[6:]):.2f} s")


if __name__ == "__main__":
    main()
