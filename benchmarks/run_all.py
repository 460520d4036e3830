"""Run every mqstore benchmark and print one table against the Java anchors of issue 5.

    python benchmarks/run_all.py [--quick] [--only NAME ...]

One command: each benchmark generates its data deterministically under ``benchmarks/data/``
(a 1 GiB CommitLog of realistic messages — 100-1000-byte bodies, KEYS, TAGS, UNIQ_KEY —, a
1 GiB Kafka segment of v2 batches, 4 million ``topic#key`` keys) and runs in its own process;
their full reports are kept in ``benchmarks/data/results/<NAME>.log``.  The summary gives, per
figure, our number, the Java anchor measured on this machine with the real RocketMQ/Kafka classes
(single-threaded, warm JIT, page cache), the ratio, and for the file-scanning figures the physical
anchor: reading the same file from the page cache with ``cat``.  ``--quick`` uses 256 MiB files and
fewer keys (a smoke run; figures are then not comparable with the anchors' sizes).

``commands`` (issue 15, ``bench_commands.py``): every operator command of the issue's table as a
whole ``mqstore`` process, median of 3, with ``cat`` of the same file in the same run as the ratio's
denominator, and the scaling rows (rebuild-index and verify of 0.25 and 1 GiB stores, plus 4 GiB in
4 segments with ``--big``) with msgs/s and peak RSS.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import subprocess
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
DATA = HERE / "data"
RESULTS = DATA / "results"
PY = sys.executable

# Java anchors of issue 5 (measured on this 2-core machine with the real Java classes).
JAVA = {
    "rebuild": 620_000,  # msgs/s, 1 GiB CommitLog full index rebuild, warm JIT
    "index_build": 5_160_000,  # puts/s, default geometry
    "hash": 38_700_000,  # String.hashCode of topic#key, keys/s
    "scan": 1_630_000,  # msgs/s, headers + properties
    "scan_crc": 1_520_000,  # msgs/s, with body CRC
    "query_present": 1_900_000,  # lookups/s
    "query_absent": 2_940_000,  # lookups/s
    "kafka_offset": 2_900_000,  # lookups/s (2.9-3.7 M)
    "kafka_time": 2_000_000,  # lookups/s (2.0-2.8 M)
    "kafka_recovery": 1_960,  # MB/s (243,000 batches/s)
}
GOALS = {
    "rebuild": 1_250_000, "index_build": 10_000_000, "hash": 40_000_000, "scan_crc": 2_500_000,
    "query_single": 300_000, "query_batch": 4_000_000, "kafka_single": 500_000, "kafka_batch": 10_000_000,
    "kafka_recovery": 3_000, "put": 150_000, "put_batch": 600_000,
}


def run(name: str, args: list[str]) -> str:
    """Run one benchmark script, tee its output to results/NAME.log, return the output."""
    RESULTS.mkdir(parents=True, exist_ok=True)
    print(f"\n=== {name}: {' '.join(args)}", flush=True)
    t = time.perf_counter()
    proc = subprocess.run([PY, *args], cwd=HERE.parent, capture_output=True, text=True)
    out = proc.stdout + ("\n[stderr]\n" + proc.stderr if proc.returncode else "")
    (RESULTS / f"{name}.log").write_text(out)
    print(out.rstrip())
    print(f"=== {name}: exit {proc.returncode} after {time.perf_counter() - t:.0f} s", flush=True)
    return proc.stdout if proc.returncode == 0 else ""


def cat_mb_s(path: Path, repeat: int = 3) -> float:
    """The physical anchor: ``cat FILE > /dev/null`` from the page cache (best of ``repeat``)."""
    subprocess.run(["cat", str(path)], stdout=subprocess.DEVNULL, check=True)  # bring it into the cache
    best = float("inf")
    for _ in range(repeat):
        t = time.perf_counter()
        subprocess.run(["cat", str(path)], stdout=subprocess.DEVNULL, check=True)
        best = min(best, time.perf_counter() - t)
    return path.stat().st_size / best / 1e6


_NUM = re.compile(r"-?[\d,]+(?:\.\d+)?")


def figure(text: str, label: str, column: int = 1, sep: str = r"\s{2,}|\s\|\s") -> float | None:
    """The first number of ``column`` on the first table line starting with ``label``."""
    for line in text.splitlines():
        if line.strip().startswith(label):
            cols = [c for c in re.split(sep, line.strip()) if c]
            if len(cols) > column:
                m = _NUM.search(cols[column])
                if m:
                    return float(m.group().replace(",", ""))
    return None


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--quick", action="store_true", help="256 MiB files, 1M keys, fewer puts (smoke run)")
    ap.add_argument("--only", nargs="*", choices=["kernels", "store", "kafka", "put", "commands"], help="run only these")
    ap.add_argument("--big", action="store_true",
                    help="commands: also the 4 GiB scaling row (4 segments of 1 GiB; ~5 GiB of disk while it runs)")
    ap.add_argument("--rss-mb", type=int, nargs="*", default=[1024, 4096],
                    help="CommitLog sizes of the rebuild peak-RSS measurement (default 1024 4096)")
    args = ap.parse_args()
    mb = 256 if args.quick else 1024
    keys = 1_000_000 if args.quick else 4_000_000
    only = set(args.only or ["kernels", "store", "kafka", "put", "commands"])
    DATA.mkdir(exist_ok=True)
    rows: list[tuple[str, str, str, str, str]] = []

    def add(name: str, ours: float | None, unit: str, anchor: float | None, anchor_text: str = "",
            physical: str = "") -> None:
        if ours is None:
            rows.append((name, "n/a (see log)", anchor_text, "-", physical))
            return
        ratio = f"{ours / anchor:.2f}x" if anchor else "-"
        rows.append((name, f"{ours:,.0f} {unit}", anchor_text or (f"{anchor:,.0f}" if anchor else "-"), ratio, physical))

    started = time.perf_counter()
    load_before = os.getloadavg()[0]
    if "kernels" in only:
        out = run("rocketmq_kernels", ["benchmarks/bench_rocketmq_kernels.py", "--keys", str(keys), "--mb", str(mb),
                                       "--skip-cold"])
        add(f"Java String.hashCode, {keys / 1e6:.0f}M topic#key in a buffer", figure(out, "Java hashCode"), "keys/s",
            JAVA["hash"])
        add(f"CommitLog scan, headers + properties ({mb} MiB)", figure(out, "CommitLog scan  "), "msgs/s", JAVA["scan"])
        add(f"CommitLog scan + body CRC ({mb} MiB)", figure(out, "CommitLog scan + body CRC"), "msgs/s",
            JAVA["scan_crc"])
        add("IndexFile bulk build, 5M slots x 20M items", figure(out, "IndexFile bulk build"), "keys/s",
            JAVA["index_build"])
        for label in ("Java hashCode, native vs numba", "index hash, native vs numba",
                      "IndexFile bulk build, native vs numba"):  # issue 15: the C kernels, numba in the same run
            for line in (x.strip() for x in (out or "").splitlines() if x.strip().startswith(label)):
                cols = [c for c in re.split(r"\s{2,}", line) if c]
                if len(cols) >= 4:
                    rows.append((cols[0], cols[1], cols[2], cols[3], "ratio = numba kernel's time / native's"))
        add("query by key, batch, present keys", figure(out, "select_many batch, present"), "lookups/s",
            JAVA["query_present"])
        add("query by key, batch, absent keys", figure(out, "select_many batch, random"), "lookups/s",
            JAVA["query_absent"])
        add("query by key, batch kernel called with 1 key", figure(out, "select_many, one key"), "lookups/s",
            JAVA["query_present"])
    if "store" in only:
        out = run("rocketmq_store", ["benchmarks/bench_rocketmq_store.py", "--mb", str(mb), "--puts", "20000",
                                     "--rss-mb", *[str(x) for x in args.rss_mb]])
        seg = DATA / f"rocketmq-{mb}m" / "commitlog" / "00000000000000000000"
        phys = ""
        if seg.exists():
            cat = cat_mb_s(seg)
            phys = f"cat {cat:,.0f} MB/s"
        warm = figure(out, f"rebuild {mb} MiB CommitLog, warm")
        cold = figure(out, f"rebuild {mb} MiB CommitLog, cold")
        mbs = re.search(r"rebuild \d+ MiB CommitLog, warm.*?= ([\d,]+) MB/s", out)
        if mbs and seg.exists():
            phys = f"{phys} ({float(mbs.group(1).replace(',', '')) / cat:.2f}x of cat)"
        add(f"full index rebuild, {mb} MiB CommitLog (warm)", warm, "msgs/s", JAVA["rebuild"], physical=phys)
        add(f"full index rebuild, {mb} MiB CommitLog (first run)", cold, "msgs/s", JAVA["rebuild"])
        add(f"full index rebuild, {mb} MiB, one-shot CLI process", figure(out, f"rebuild {mb} MiB, one-shot CLI"),
            "msgs/s", JAVA["rebuild"], "620,000 (5 s/GiB fresh JVM)")
        for line in out.splitlines():
            m = re.match(r"\s*rebuild peak RSS, ([\d,]+) MiB CommitLog\s*\|\s*([\d,]+) MiB", line)
            if m:
                rows.append((f"rebuild peak RSS, {m.group(1)} MiB CommitLog", f"{m.group(2)} MiB", "-", "-", ""))
        add("query by key (store, broker semantics), single", figure(out, "query by key, broker semantics"),
            "lookups/s", JAVA["query_present"])
        add("query by key (store, exact), single", figure(out, "query by key, exact"), "lookups/s",
            JAVA["query_present"])
        add("query by key (store, broker semantics), batch columns, present", figure(
            out, "query_offsets_columns (batch), present"), "keys/s", JAVA["query_present"])
        add("query by key (store, broker semantics), batch columns, absent", figure(
            out, "query_offsets_columns (batch), absent"), "keys/s", JAVA["query_absent"])
    if "kafka" in only:
        js = DATA / "results" / "kafka.json"
        out = run("kafka", ["benchmarks/bench_kafka.py", "--size-mb", str(mb), "--json", str(js)])
        k = json.loads(js.read_text()) if out and js.exists() else {}
        seg = DATA / "kafka" / "bench-0" / "00000000000000000000.log"
        phys = f"cat {cat_mb_s(seg):,.0f} MB/s" if seg.exists() else ""
        add(f"Kafka recovery of a {mb} MiB segment", k.get("recovery_mb_s"), "MB/s", JAVA["kafka_recovery"],
            "1,960 MB/s", physical=phys)
        add("Kafka rebuild-index (scan + CRC + index)", k.get("rebuild_mb_s"), "MB/s", JAVA["kafka_recovery"],
            "1,960 MB/s")
        add("Kafka offset lookup, full 10 MiB index, single", k.get("full_offset_single"), "/s", JAVA["kafka_offset"],
            "2.9-3.7 M/s")
        add("Kafka offset lookup, full 10 MiB index, batch", k.get("full_offset_batch"), "/s", JAVA["kafka_offset"],
            "2.9-3.7 M/s")
        add("Kafka time lookup, full 10 MiB index, single", k.get("full_time_single"), "/s", JAVA["kafka_time"],
            "2.0-2.8 M/s")
        add("Kafka time lookup, full 10 MiB index, batch", k.get("full_time_batch"), "/s", JAVA["kafka_time"],
            "2.0-2.8 M/s")
        add(f"Kafka offset lookup, segment index ({int(k.get('offset_entries', 0)):,} entries), single",
            k.get("offset_single"), "/s", JAVA["kafka_offset"], "2.9-3.7 M/s")
        add("Kafka offset lookup, segment index, batch", k.get("offset_batch"), "/s", JAVA["kafka_offset"],
            "2.9-3.7 M/s")
        add("Kafka append (leader, 16 x 1 KiB batches)", k.get("append_mb_s"), "MB/s", None)
    if "put" in only:
        js = DATA / "results" / "put.json"
        out = run("put", ["benchmarks/bench_put.py", "--messages", "30000" if args.quick else "100000",
                          "--json", str(js)])
        p = json.loads(js.read_text()) if out and js.exists() else {}
        get = lambda k: p[k]["msgs_per_s"] if k in p else None  # noqa: E731
        add("embedded put, single (1 KiB, async flush)", get("single"), "msgs/s", None,
            f"goal {GOALS['put']:,}")
        add("embedded put_batch (1000 dicts/call)", get("batch"), "msgs/s", None, f"goal {GOALS['put_batch']:,}")
        add("embedded put_columns (1000/call)", get("columns"), "msgs/s", None, f"goal {GOALS['put_batch']:,}")
        add("  baseline: general path, one by one", get("general"), "msgs/s", None, "(old put)")
        add("  baseline: general path, 1000/call", get("general_batch"), "msgs/s", None, "(old put_batch)")

    if "commands" in only:  # issue 15: each operator command as a whole process, median of 3, vs cat
        js = DATA / "results" / "commands.json"
        scaling = ["256"] if args.quick else ["256", "1024", *(["4096"] if args.big else [])]
        out = run("commands", ["benchmarks/bench_commands.py", "--mb", str(mb), "--json", str(js),
                               "--scaling", *scaling])
        c = json.loads(js.read_text()) if out and js.exists() else {}
        for key, name, unit in (
            ("rocketmq_rebuild", f"CLI rocketmq rebuild-index ({mb} MiB)", "msgs/s"),
            ("rocketmq_verify", "CLI rocketmq verify", "MB/s"),
            ("rocketmq_dump_json", "CLI rocketmq dump --json", "msgs/s"),
            ("kafka_verify_idx", "CLI kafka verify (with index files)", "MB/s"),
            ("kafka_verify_noidx", "CLI kafka verify (no index files)", "MB/s"),
            ("kafka_rebuild", "CLI kafka rebuild-index", "MB/s"),
            ("kafka_dump_json", "CLI kafka dump --json --print-data", "records/s"),
        ):  # fmt: skip
            r = c.get(key)
            if r is None:
                add(name, None, unit, None)
                continue
            nb = r.get("numba")
            rows.append((name, f"{r['rate']:,.0f} {unit}", "(whole process, median of 3)",
                         f"{nb['wall'] / r['wall']:.2f}" if nb else "-",
                         (f"{r['wall'] / r['cat_s']:.1f}x the time of cat of the file" if r.get("cat_s") else "")
                         + ("; ratio = numba kernels' time / native kernels' time, same run" if nb else "")))
        if "version" in c:
            rows.append(("mqstore --version start-up", f"{c['version']['wall']:.3f} s", "goal 0.15 s", "-", ""))
        if "query_by_key" in c:
            q = c["query_by_key"]
            rows.append(("query_by_key, exact, single (in-process)", f"{q['new']['wall']:,.0f} lookups/s",
                         f"goal {GOALS['query_single']:,}", "-",
                         f"{q['new']['wall'] / q['old']['wall']:.2f}x the record-by-record path"))
        for sc in c.get("scaling", []):
            for what in ("rebuild", "verify"):
                r = sc[what]
                nb = r.get("numba")
                rows.append((f"scaling: {what} {sc['mb']} MiB ({sc['segments']} seg.)",
                             f"{sc['messages'] / r['wall']:,.0f} msgs/s", "-",
                             f"{nb['wall'] / r['wall']:.2f}" if nb else "-",
                             f"{r['wall']:.2f} s; peak RSS {r['rss_mib']:,.0f} MiB, anonymous "
                             f"{r.get('anon_mib', 0):,.0f} MiB"))

    print(f"\n\nmqstore benchmark suite ({'quick' if args.quick else 'full'}), {time.perf_counter() - started:.0f} s; "
          f"Java anchors of issue 5 measured on this machine; ratio = ours / Java")
    print(f"machine: {os.cpu_count()} CPUs, load average {load_before:.1f} at the start, {os.getloadavg()[0]:.1f} at the "
          "end (anything well above 1 means other processes shared the CPUs and every figure is low)")
    head = ("figure", "mqstore", "Java anchor", "ratio", "physical anchor")
    w = [max(len(r[i]) for r in [*rows, head]) for i in range(5)]
    print(" | ".join(h.ljust(w[i]) for i, h in enumerate(head)))
    print("-|-".join("-" * x for x in w))
    for r in rows:
        print(" | ".join(c.ljust(w[i]) for i, c in enumerate(r)))
    (RESULTS / "summary.txt").write_text("\n".join(" | ".join(r) for r in rows) + "\n")


if __name__ == "__main__":
    main()
