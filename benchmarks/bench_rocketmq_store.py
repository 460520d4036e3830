"""Benchmarks of the RocketMQ store: put throughput, full index rebuild, query by key.

    python benchmarks/bench_rocketmq_store.py [--mb 1024] [--puts 20000]

Data is generated deterministically under ``benchmarks/data/`` (kept between runs).  Every figure
is printed with a ratio against a baseline measured in the same run (``cat``-speed read of the same
file from page cache, the single ``put`` path, the pure-Python reference) and against the Java
anchor measured on this machine with the real RocketMQ classes (issue 5).
"""

from __future__ import annotations

import argparse
import os
import resource
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

from bench_rocketmq_kernels import make_commitlog, make_segments  # noqa: E402
from mqstore import MessageStore, StoreConfig  # noqa: E402
from mqstore.kernels.threads import default_threads  # noqa: E402
from mqstore.storage.rocketmq.rebuild import rebuild_indexes  # noqa: E402

DATA = HERE / "data"
JAVA_REBUILD_MSGS_S = 620_000
JAVA_QUERY_PRESENT_S = 1_900_000


def raw_read_seconds(path: Path) -> float:
    """The physical anchor: read the whole file from page cache in 8 MiB chunks (like ``cat``)."""
    t = time.perf_counter()
    with open(path, "rb", buffering=0) as fh:
        buf = bytearray(8 << 20)
        while fh.readinto(buf):
            pass
    return time.perf_counter() - t


def make_store(mb: int) -> tuple[Path, int]:
    root = DATA / f"rocketmq-{mb}m"
    seg = root / "commitlog" / "00000000000000000000"
    marker = root / "messages.txt"
    if seg.exists() and marker.exists():
        return root, int(marker.read_text())
    shutil.rmtree(root, ignore_errors=True)
    seg.parent.mkdir(parents=True)
    t = time.perf_counter()
    buf, n = make_commitlog(mb * 1024 * 1024)
    seg.write_bytes(buf.tobytes())
    marker.write_text(str(n))
    print(f"generated {mb} MiB CommitLog with {n:,} messages in {time.perf_counter() - t:.1f} s")
    return root, n


def bench_put(n: int) -> list[tuple[str, str, str, str]]:
    rows = []
    body = os.urandom(1024)
    with tempfile.TemporaryDirectory(dir=DATA) as d:
        cfg = StoreConfig(commit_log_file_size=256 * 1024 * 1024, hash_slot_num=500_000, index_num=2_000_000)
        with MessageStore.open(Path(d) / "s", cfg) as s:
            s.put("Warmup", body, keys="w")
            t = time.perf_counter()
            for i in range(n):
                s.put("BenchTopic", body, queue_id=i & 7, keys=f"k{i}", tags="TagA")
            single = n / (time.perf_counter() - t)
            batch = [dict(topic="BenchTopic", body=body, queue_id=i & 7, keys=f"b{i}", tags="TagA") for i in range(1000)]
            m = 5 * n
            t = time.perf_counter()
            for _ in range(m // 1000):
                s.put_batch(batch)
            batched = m / (time.perf_counter() - t)
            t = time.perf_counter()
            s.flush()
            flush_s = time.perf_counter() - t
    rows.append(("put (1 KiB, async flush)", f"{single:,.0f} msgs/s", "goal 150,000", "1.00x (baseline)"))
    rows.append(("put_batch (1000 x 1 KiB)", f"{batched:,.0f} msgs/s", "goal 600,000", f"{batched / single:.2f}x single put"))
    rows.append(("flush + dispatch of the rest", f"{flush_s:.2f} s", "", ""))
    return rows


def bench_rebuild(mb: int, threads: int) -> list[tuple[str, str, str, str]]:
    """The rebuild with ``threads`` (the default of ``rebuild_indexes``, unless given) against
    ``alt`` threads (1, or all the CPUs when the default already is 1), warm and one-shot."""
    alt = 1 if threads != 1 else max(2, default_threads())
    root, _n = make_store(mb)
    seg = root / "commitlog" / "00000000000000000000"
    raw = min(raw_read_seconds(seg) for _ in range(2))
    rows = []
    out = DATA / f"rocketmq-{mb}m-rebuilt"
    cfg = StoreConfig(commit_log_file_size=mb * 1024 * 1024)
    timings: dict[int, tuple[float, float]] = {}  # threads -> best (wall, cpu) of the warm runs
    # cold = the first rebuild of this process; then warm runs alternate N threads and alt threads
    other = f"warm, {alt} thread{'s' if alt > 1 else ''}"
    for label, th in (("cold (first run, JIT cache warm)", threads), ("warm", threads), (other, alt),
                      ("warm", threads), (other, alt)):  # fmt: skip
        shutil.rmtree(out, ignore_errors=True)
        t, c = time.perf_counter(), time.process_time()
        stats = rebuild_indexes(root, out, config=cfg, threads=th)
        dt, cpu = time.perf_counter() - t, time.process_time() - c
        if label.startswith("warm"):
            best = timings.get(th)
            timings[th] = (min(dt, best[0]), min(cpu, best[1])) if best else (dt, cpu)
        else:
            rows.append(_rebuild_row(mb, label, stats.messages, dt, cpu, raw))
    for th in (threads, alt):
        rows.append(_rebuild_row(mb, f"warm ({th} kernel thread{'s' if th > 1 else ''})" if th == threads else other,
                                 stats.messages, *timings[th], raw))
    rows.append((f"  rebuild speed-up of {threads} over {alt} threads (warm)", f"{timings[alt][0] / timings[threads][0]:.2f}x",
                 "", f"CPU {timings[alt][1]:.2f} s -> {timings[threads][1]:.2f} s (all threads)"))  # fmt: skip
    rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    rows.append(("peak RSS of this process", f"{rss:,.0f} MiB", "", f"{stats.keys:,} keys indexed"))
    n = stats.messages
    cli = [str(Path(sys.executable).with_name("mqstore")), "rocketmq", "rebuild-index", str(root), "--out", str(out)]
    best_of: dict[int, tuple[float, int]] = {}
    for _ in range(2):
        for th in (threads, alt):  # alternating, best of 2 each
            shutil.rmtree(out, ignore_errors=True)
            got = run_measured([*cli, "--threads", str(th)])
            if th not in best_of or got[0] < best_of[th][0]:
                best_of[th] = got
    for th in (threads, alt):
        dt, rss_cli = best_of[th]
        name = f"rebuild {mb} MiB, one-shot CLI process (best of 2)" if th == threads else \
            f"rebuild {mb} MiB, one-shot CLI process, --threads {alt}"
        rows.append((name, f"{n / dt:,.0f} msgs/s ({dt:.2f} s)", f"Java {JAVA_REBUILD_MSGS_S:,} msgs/s",
                     f"{n / dt / JAVA_REBUILD_MSGS_S:.2f}x Java; peak RSS {rss_cli / 1024:,.0f} MiB"))
    d1, dn = best_of[alt][0], best_of[threads][0]
    rows.append((f"  one-shot CLI speed-up of {threads} over {alt} threads", f"{d1 / dn:.2f}x", "", ""))
    return rows


def _rebuild_row(mb: int, label: str, n: int, dt: float, cpu: float, raw: float) -> tuple[str, str, str, str]:
    rate = n / dt
    return (f"rebuild {mb} MiB CommitLog, {label}", f"{rate:,.0f} msgs/s = {mb / dt:,.0f} MB/s ({dt:.2f} s)",
            f"Java {JAVA_REBUILD_MSGS_S:,} msgs/s", f"{rate / JAVA_REBUILD_MSGS_S:.2f}x Java; "
            f"{raw / dt:.2f}x of cat-speed ({mb / raw:,.0f} MB/s); CPU {cpu:.2f} s")


REBUILD_CHILD = """
import sys
from mqstore.storage.rocketmq.rebuild import rebuild_indexes
rebuild_indexes(sys.argv[1], sys.argv[2])
with open("/proc/self/status") as fh:  # this process's own peak (ru_maxrss would include the parent's)
    print("VmHWM", [line.split()[1] for line in fh if line.startswith("VmHWM:")][0])
"""


def _vm_hwm_kib(pid: int | str) -> int:
    try:
        with open(f"/proc/{pid}/status") as fh:
            for line in fh:
                if line.startswith("VmHWM:"):
                    return int(line.split()[1])
    except (OSError, ValueError):
        pass
    return 0


def run_measured(argv: list[str]) -> tuple[float, int]:
    """Run a child process; returns (wall seconds, its own peak RSS in KiB).

    Not ``wait4``'s ``ru_maxrss``: Linux keeps the high-water mark across fork and exec, so a child
    of this (large) benchmark process reports at least the parent's RSS at fork time (that is how
    the 1 GiB and 4 GiB rebuilds both showed 1,464 MiB, the generator's size).  The child's own
    ``VmHWM`` is used instead: printed by the child when it does (``VmHWM <KiB>`` on stdout),
    otherwise sampled from ``/proc/<pid>/status`` every 2 ms while it runs."""
    t = time.perf_counter()
    proc = subprocess.Popen(argv, stdout=subprocess.PIPE, text=True)
    peak = 0
    while proc.poll() is None:
        peak = max(peak, _vm_hwm_kib(proc.pid))
        time.sleep(0.002)
    dt = time.perf_counter() - t
    out = proc.stdout.read() if proc.stdout is not None else ""
    if proc.returncode != 0:
        raise SystemExit(f"{argv[:3]} failed with {proc.returncode}")
    for line in out.splitlines():
        if line.startswith("VmHWM "):
            peak = int(line.split()[1])
    return dt, peak


def bench_rebuild_rss(stores: list[Path]) -> list[tuple[str, str, str, str]]:
    """Peak RSS of a rebuild (in a child process, the generator lives elsewhere) per CommitLog size."""
    rows = []
    for root in stores:
        cl_bytes = sum(p.stat().st_size for p in (root / "commitlog").iterdir())
        out = DATA / f"{root.name}-rss-out"
        shutil.rmtree(out, ignore_errors=True)
        dt, rss = run_measured([sys.executable, "-c", REBUILD_CHILD, str(root), str(out)])
        idx = sum(p.stat().st_size for p in (out / "index").iterdir())
        n = int((root / "messages.txt").read_text())
        rows.append((f"rebuild peak RSS, {cl_bytes >> 20:,} MiB CommitLog", f"{rss / 1024:,.0f} MiB",
                     f"index files {idx >> 20:,} MiB", f"{n / dt:,.0f} msgs/s ({dt:.1f} s) in the child"))  # fmt: skip
        shutil.rmtree(out, ignore_errors=True)
    return rows


def make_segmented_store(mb: int) -> Path:
    """A CommitLog of ``mb`` MiB in 1 GiB segments (for the RSS figure), generated once."""
    root = DATA / f"rocketmq-{mb}m-seg"
    marker = root / "messages.txt"
    if not marker.exists():
        shutil.rmtree(root, ignore_errors=True)
        t = time.perf_counter()
        n = make_segments(root / "commitlog", mb << 20, min(mb, 1024) << 20)
        marker.write_text(str(n))
        print(f"generated {mb} MiB CommitLog ({n:,} messages) in {time.perf_counter() - t:.1f} s")
    return root


def _best(fn, reps: int = 3) -> tuple[float, float]:
    """Best wall and best CPU seconds of ``reps`` runs of ``fn``."""
    wall = cpu = float("inf")
    for _ in range(reps):
        t, c = time.perf_counter(), time.process_time()
        fn()
        wall, cpu = min(wall, time.perf_counter() - t), min(cpu, time.process_time() - c)
    return wall, cpu


def bench_query(mb: int, lookups: int = 20_000, batch_records: int = 30_000) -> list[tuple[str, str, str, str]]:
    root, _ = make_store(mb)
    out = DATA / f"rocketmq-{mb}m-rebuilt"
    if not (root / "index").exists():  # move the rebuilt indexes next to the CommitLog
        if not (out / "index").exists():
            rebuild_indexes(root, out, config=StoreConfig(commit_log_file_size=mb * 1024 * 1024))
        for sub in ("index", "consumequeue", "checkpoint"):
            os.replace(out / sub, root / sub)
    out = root
    cfg = StoreConfig(commit_log_file_size=mb * 1024 * 1024, background_services=False)
    rows = []
    with MessageStore.open(out, cfg, read_only=True) as s:
        cl = s.engine.commit_log
        batch = next(cl.scan(0, min(cl.max_offset, 64 << 20)))
        picks = batch.commit_log_offset[:: max(1, len(batch) // lookups)][:lookups]
        keys = []
        for off in picks.tolist():
            m = s.get_by_offset(off, check_crc=False)
            keys.append((m.topic, m.keys[0]))
        # single calls: best of 3 passes over the keys (the first also maps the touched pages); 20,000
        # keys so that a pass lasts ~0.1 s (2,000 keys made a pass ~6 ms, which one scheduler hiccup halves)
        s.query_offsets_broker(*keys[0])  # JIT cache load outside the timing
        bw, bc = _best(lambda: [s.query_offsets_broker(topic, key) for topic, key in keys])
        broker, broker_cpu = len(keys) / bw, len(keys) / bc
        ref_w, _ = _best(lambda: [s.engine.index.query_offset(topic, key, 64, 0, 2**63 - 1) for topic, key in keys])
        ref = len(keys) / ref_w
        found = 0

        def exact_pass() -> None:
            nonlocal found
            found = sum(len(s.query_by_key(topic, key)) for topic, key in keys)

        ew, ec = _best(exact_pass)
        exact, exact_cpu = len(keys) / ew, len(keys) / ec
        by_topic: dict[str, list[str]] = {}
        for topic, key in keys:
            by_topic.setdefault(topic, []).append(key)
        for topic, ks in by_topic.items():  # JIT cache loads (every kernel variant) outside the timing
            s.query_offsets_many(topic, ks)
            s.query_by_keys(topic, ks[:1])
        many_w, _ = _best(lambda: [s.query_offsets_many(topic, ks) for topic, ks in by_topic.items()])
        batch_broker = len(keys) / many_w
        batch_found = 0

        def exact_batch() -> None:
            nonlocal batch_found
            batch_found = sum(len(v) for topic, ks in by_topic.items() for v in s.query_by_keys(topic, ks).values())

        batch_exact = len(keys) / _best(exact_batch)[0]
        # large batches: every key (unique key + KEYS) of the first records, grouped by topic, and
        # as many absent keys
        big: dict[str, list[str]] = {}
        for off in batch.commit_log_offset[:batch_records].tolist():
            r = cl.read_record(off)
            big.setdefault(r.topic, []).extend([r.uniq_key or "", *r.keys])
        absent = {t: [f"absent-{k}" for k in ks] for t, ks in big.items()}
        n_big = sum(map(len, big.values()))
        cols_w, cols_c = _best(lambda: [s.query_offsets_columns(t, ks) for t, ks in big.items()])
        abs_w, abs_c = _best(lambda: [s.query_offsets_columns(t, ks) for t, ks in absent.items()])
        lists_w, _ = _best(lambda: [s.query_offsets_many(t, ks) for t, ks in big.items()])
        hits = sum(len(s.query_offsets_columns(t, ks).offsets) for t, ks in big.items())
    n_keys = sum(1 for _ in (out / "index").iterdir())
    rows.append((f"query by key, broker semantics ({n_keys} index files)", f"{broker:,.0f} lookups/s",
                 f"Java {JAVA_QUERY_PRESENT_S:,}/s; goal 300,000/s", f"{broker / JAVA_QUERY_PRESENT_S:.3f}x Java; CPU {broker_cpu:,.0f}/s; "
                 f"{broker / ref:.1f}x the Python walk ({ref:,.0f}/s)"))  # fmt: skip
    rows.append(("query by key, exact (reads and checks records)", f"{exact:,.0f} lookups/s", "(stricter than the broker's)",
                 f"{exact / broker:.2f}x broker semantics; CPU {exact_cpu:,.0f}/s; {found} messages found"))
    rows.append(("query_offsets_many (batch, broker semantics)", f"{batch_broker:,.0f} keys/s", "goal 4,000,000/s",
                 f"{batch_broker / broker:.2f}x one query_offsets_broker per key ({len(keys):,} keys)"))
    rows.append(("query_by_keys (batch, exact)", f"{batch_exact:,.0f} keys/s", "",
                 f"{batch_exact / exact:.2f}x one query_by_key per key; {batch_found} messages found"))
    rows.append((f"query_offsets_columns (batch), present keys ({n_big:,})", f"{n_big / cols_w:,.0f} keys/s",
                 f"goal 4,000,000/s; Java {JAVA_QUERY_PRESENT_S:,}", f"{n_big / cols_w / JAVA_QUERY_PRESENT_S:.2f}x Java; "
                 f"CPU {n_big / cols_c:,.0f}/s; {hits:,} offsets; lists {n_big / lists_w:,.0f} keys/s"))  # fmt: skip
    rows.append((f"query_offsets_columns (batch), absent keys ({n_big:,})", f"{n_big / abs_w:,.0f} keys/s",
                 "Java 2,940,000", f"{n_big / abs_w / 2_940_000:.2f}x Java; CPU {n_big / abs_c:,.0f}/s"))  # fmt: skip
    return rows


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--mb", type=int, default=1024, help="CommitLog size for the rebuild and query benchmarks")
    ap.add_argument("--puts", type=int, default=20_000, help="messages for the single-put benchmark")
    ap.add_argument("--rss-mb", type=int, nargs="*", default=[1024, 4096],
                    help="CommitLog sizes (MiB, 1 GiB segments) for the rebuild peak-RSS figure")
    ap.add_argument("--only", choices=["put", "rebuild", "query", "rss"], nargs="*", help="run only these parts")
    ap.add_argument("--threads", type=int, default=default_threads(reserve=1),
                    help="threads of the rebuild (default: rebuild_indexes' own, the CPUs less the one of the "
                         "read-ahead scan); also timed with 1 thread (with all CPUs when this is 1)")
    args = ap.parse_args()
    DATA.mkdir(exist_ok=True)
    parts = set(args.only or ["put", "rebuild", "query", "rss"])
    rows = []
    if "put" in parts:
        rows += bench_put(args.puts)
    if "rebuild" in parts:
        rows += bench_rebuild(args.mb, args.threads)
    if "query" in parts:
        rows += bench_query(args.mb)
    if "rss" in parts:
        rows += bench_rebuild_rss([make_segmented_store(mb) for mb in args.rss_mb])
    w = [max(len(r[i]) for r in rows) for i in range(4)]
    print(f"{'figure':<{w[0]}} | {'mqstore':<{w[1]}} | {'anchor':<{w[2]}} | ratio")
    for r in rows:
        print(f"{r[0]:<{w[0]}} | {r[1]:<{w[1]}} | {r[2]:<{w[2]}} | {r[3]}")


if __name__ == "__main__":
    main()
