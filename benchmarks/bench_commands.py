"""The operator commands of issue 15 as whole processes, against ``cat`` of the same file.

    python benchmarks/bench_commands.py [--mb 1024] [--data DIR] [--scaling 256 1024 [4096]] [--json FILE]

Each row runs the ``mqstore`` command in a fresh process (``python -m mqstore.cli.main``, output to
``/dev/null``) three times and keeps the median wall time; the same run measures ``cat FILE >
/dev/null`` of the file the command reads (median of three, page cache warm) as the ratio's
denominator.  The notes also give each file row's ``x goal`` scaled by that ``cat`` against the
issue's own run (9.95 GB/s when it set the goals): this machine's speed swings by a third between
quiet runs, and the scaled ratio says whether a short row is the command or the day.  The
absolute ``x goal`` column stays the measure.  The baseline of each row is the same command in the same run with
``MQSTORE_KERNELS=numba`` (the numba kernels, loaded from their on-disk cache: what every command
ran on before the native kernels), so the ``x numba`` column is the speed-up of the ahead-of-time
compiled kernels (``--no-baseline`` skips those runs).  CPU seconds come from ``os.wait4`` of each child, peak RSS (``VmHWM``) and anonymous memory from its ``/proc`` status.  The embedded-API
rows (``query_by_key``) run in one child process against the record-by-record path in the same
process; ``MessageStore.put``/``put_batch`` are ``bench_put.py``'s.

The scaling rows rebuild and verify RocketMQ stores of the given sizes (MiB; a size above 1024 is
made of 1 GiB segments) and print msgs/s and peak RSS: the cost should grow linearly and the memory
stay flat.  Data is generated deterministically under ``--data`` (default ``benchmarks/data/commands``)
and the scaling stores are deleted after their rows.

Before the first row the ``mqstore`` package is byte-compiled (``compileall``): an installed package
runs from current ``.pyc`` files, while a source tree run with ``PYTHONDONTWRITEBYTECODE`` set (as
some shells and CI images do) recompiles every edited module in every process, ~0.2 s of each
one-shot command on this machine, which is not the command's cost.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import struct
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
sys.path.insert(0, str(HERE.parent / "src"))

PY = sys.executable
CLI = [PY, "-m", "mqstore.cli.main"]
GOALS = {
    "kafka_verify_idx": ("MB/s", 2000), "kafka_verify_noidx": ("MB/s", 2000), "kafka_rebuild": ("MB/s", 3000),
    "rocketmq_rebuild": ("msgs/s", 1_250_000), "rocketmq_verify": ("MB/s", 1000),
    "rocketmq_dump_json": ("msgs/s", 1_000_000), "kafka_dump_json": ("records/s", 1_000_000),
    "query_by_key": ("lookups/s", 300_000), "version": ("s", 0.15),
}  # fmt: skip


ISSUE_CAT_MBS = 9950.0  # the page-cache cat of the issue's own run (9.95 GB/s), when it set the goals
ANON_PEAK: list[int] = [0]  # peak RssAnon (KiB) of the last run_child, sampled from /proc


def _status_kib(pid: int) -> tuple[int, int]:
    """``(VmHWM, RssAnon)`` of a process in KiB from ``/proc`` (zeros once it is gone)."""
    hwm = anon = 0
    try:
        with open(f"/proc/{pid}/status") as fh:
            for line in fh:
                if line.startswith("VmHWM:"):
                    hwm = int(line.split()[1])
                elif line.startswith("RssAnon:"):
                    anon = int(line.split()[1])
    except OSError:
        pass
    return hwm, anon


def run_child(argv: list[str], *, out: Path | None = None, env: dict[str, str] | None = None) -> tuple[float, float, int, int]:
    """Run one process: (wall s, CPU s, peak RSS KiB, exit status).  The peak RSS is the child's
    own high-water mark (``VmHWM``, sampled every 20 ms: ``wait4``'s ``ru_maxrss`` would also count
    this benchmark process's resident set, which Linux carries into a child across fork and exec)
    and counts the touched pages of mapped files too; the peak anonymous memory (``RssAnon``,
    sampled alike) is left in :data:`ANON_PEAK`."""
    with open(out or os.devnull, "wb") as fh:
        t = time.perf_counter()
        p = subprocess.Popen(argv, stdout=fh, stderr=subprocess.DEVNULL, env=env)
        anon = hwm = 0
        while True:
            pid, status, ru = os.wait4(p.pid, os.WNOHANG)
            if pid:
                break
            h, a = _status_kib(p.pid)
            hwm, anon = max(hwm, h), max(anon, a)
            time.sleep(0.02)
        wall = time.perf_counter() - t
    p.returncode = os.waitstatus_to_exitcode(status)
    ANON_PEAK[0] = anon
    return wall, ru.ru_utime + ru.ru_stime, hwm, p.returncode


BASELINE = [True]  # also run each command on the numba kernels (--no-baseline clears it)
NUMBA_ENV = {**os.environ, "MQSTORE_KERNELS": "numba"}


def median_run(argv: list[str], repeat: int = 3, before: list[Path] | None = None,
               env: dict[str, str] | None = None) -> dict[str, float]:
    """Median wall/CPU time and the largest peak RSS of ``repeat`` runs (``before``: paths
    deleted before each run, e.g. an ``--out`` directory), with the same figures of the numba
    baseline under ``"numba"`` (unless ``env`` is given or the baseline is off)."""
    base = median_run(argv, repeat, before, NUMBA_ENV) if env is None and BASELINE[0] else None
    walls, cpus, rss, anon = [], [], 0, 0
    for _ in range(repeat):
        for p in before or []:
            shutil.rmtree(p, ignore_errors=True)
        wall, cpu, peak, code = run_child(argv, env=env)
        walls.append(wall)
        cpus.append(cpu)
        rss = max(rss, peak)
        anon = max(anon, ANON_PEAK[0])
    r: dict[str, Any] = {"wall": statistics.median(walls), "cpu": statistics.median(cpus), "rss_mib": rss / 1024,
                         "anon_mib": anon / 1024, "exit": code}
    if base is not None:
        r["numba"] = base
    return r


def _vs_numba(r: dict[str, Any]) -> str:
    """The speed-up over the numba baseline of the same run (wall time ratio), or ''."""
    nb = r.get("numba")
    return f"{nb['wall'] / r['wall']:.2f}" if nb else ""


def cat_s(path: Path, repeat: int = 3) -> float:
    subprocess.run(["cat", str(path)], stdout=subprocess.DEVNULL, check=True)
    ts = []
    for _ in range(repeat):
        t = time.perf_counter()
        subprocess.run(["cat", str(path)], stdout=subprocess.DEVNULL, check=True)
        ts.append(time.perf_counter() - t)
    return statistics.median(ts)


# ----------------------------------------------------------------------------- data
def make_rocketmq(root: Path, mb: int, segment_mb: int | None = None) -> int:
    """A RocketMQ store of ``mb`` MiB (segments of ``segment_mb``) with its indexes; its message count."""
    from bench_rocketmq_kernels import make_segments
    from mqstore import StoreConfig
    from mqstore.storage.rocketmq.rebuild import rebuild_indexes

    marker = root / "messages.txt"
    if marker.exists():
        return int(marker.read_text())
    shutil.rmtree(root, ignore_errors=True)
    seg = (segment_mb or mb) << 20
    n = make_segments(root / "commitlog", mb << 20, seg)
    out = root.with_name(root.name + "-rebuilt")
    shutil.rmtree(out, ignore_errors=True)
    rebuild_indexes(root, out, config=StoreConfig(commit_log_file_size=seg))
    for sub in ("index", "consumequeue", "checkpoint"):
        os.replace(out / sub, root / sub)
    shutil.rmtree(out, ignore_errors=True)
    marker.write_text(str(n))
    return n


def make_kafka(part: Path, mb: int) -> int:
    """A Kafka partition of one ~``mb`` MiB segment of 16 x 1 KiB-record v2 batches, with its
    indexes; its record count.  The batches are bench_kafka's; only their base offsets differ
    (the batch CRC does not cover them)."""
    from bench_kafka import PER_BATCH, make_batches
    from mqstore.kafka import rebuild_indexes

    log = part / "00000000000000000000.log"
    marker = part.parent / f"{part.name}.records"
    if marker.exists() and log.exists():
        return int(marker.read_text())
    shutil.rmtree(part, ignore_errors=True)
    part.mkdir(parents=True)
    template = make_batches(256)
    n_batches = (mb << 20) // len(template[0])
    with open(log, "wb") as fh:
        for b in range(n_batches):
            raw = bytearray(template[b % 256])
            struct.pack_into(">q", raw, 0, b * PER_BATCH)
            fh.write(raw)
    rebuild_indexes(log, part)
    marker.write_text(str(n_batches * PER_BATCH))
    return n_batches * PER_BATCH


QUERY = r"""
import json, sys, time
from mqstore import MessageStore, StoreConfig
root, seg = sys.argv[1], int(sys.argv[2])
with MessageStore.open(root, StoreConfig(commit_log_file_size=seg, background_services=False), read_only=True) as s:
    cl = s.engine.commit_log
    batch = next(cl.scan(0, min(cl.max_offset, 64 << 20)))
    picks = batch.commit_log_offset[:: max(1, len(batch) // 20000)][:20000]
    keys = [(m.topic, m.keys[0]) for m in (s.get_by_offset(o, check_crc=False) for o in picks.tolist())]
    old = lambda t, k: s._query_by_key_records(t, k, 0, 2**63 - 1, None)
    new = s.query_by_key
    new(*keys[0]); old(*keys[0])
    res = {}
    for name, f in (("old", old), ("new", new)):
        walls, cpus = [], []
        for _ in range(3):
            c, t = time.process_time(), time.perf_counter()
            for topic, key in keys:
                f(topic, key)
            walls.append(time.perf_counter() - t); cpus.append(time.process_time() - c)
        res[name] = {"wall": len(keys) / sorted(walls)[1], "cpu": len(keys) / sorted(cpus)[1]}
    print(json.dumps(res))
"""


def compile_package() -> None:
    """Write current ``.pyc`` files of the mqstore package the children import (see the docstring)."""
    import compileall

    import mqstore

    compileall.compile_dir(str(Path(mqstore.__file__).parent), quiet=1)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--mb", type=int, default=1024, help="size of the RocketMQ store and Kafka segment (MiB)")
    ap.add_argument("--data", type=Path, default=HERE / "data" / "commands")
    ap.add_argument("--scaling", type=int, nargs="*", default=[256, 1024],
                    help="RocketMQ store sizes (MiB) of the scaling rows; 4096 = 4 segments of 1 GiB (default 256 1024)")
    ap.add_argument("--skip", nargs="*", default=[], help="row keys to skip")
    ap.add_argument("--json", type=Path, help="also write the figures here")
    ap.add_argument("--no-baseline", action="store_true", help="skip the MQSTORE_KERNELS=numba baseline runs")
    args = ap.parse_args()
    BASELINE[0] = not args.no_baseline
    compile_package()
    args.data.mkdir(parents=True, exist_ok=True)
    env_note = f"load average {os.getloadavg()[0]:.1f} on {os.cpu_count()} CPUs"
    fig: dict[str, dict[str, float]] = {}
    rows: list[tuple[str, ...]] = []

    def add(key: str, name: str, r: dict[str, float], amount: float, cat: float | None, size_mb: float) -> None:
        unit, goal = GOALS[key]
        rate = amount / r["wall"]
        r = {**r, "rate": rate, "cpu_rate": amount / r["cpu"], "cat_s": cat or 0}
        # the goal scaled by this run's cat against the issue's (the machine's speed of the day; a
        # second view beside the absolute ratio, which stays the headline)
        scaled = rate / goal * ISSUE_CAT_MBS / (size_mb / cat) if cat else 0.0
        r["x_goal_cat_scaled"] = scaled
        fig[key] = r
        vs_cat = (f"{r['wall'] / cat:.1f}x cat time (cat {size_mb / cat:,.0f} MB/s; x goal scaled to the issue's "
                  f"cat {scaled:.2f})") if cat else ""
        nb = r.get("numba")
        rows.append((name, f"{rate:,.0f} {unit} ({r['wall']:.2f} s)", _vs_numba(r), f"{goal:,} {unit}",
                     f"{rate / goal:.2f}",
                     f"{vs_cat}; CPU {r['cpu']:.2f} s; RSS {r['rss_mib']:,.0f} MiB (anon. {r['anon_mib']:,.0f}); "
                     f"exit {r['exit']}" + (f"; numba: {amount / nb['wall']:,.0f} {unit}, CPU {nb['cpu']:.2f} s, "
                                            f"anon. {nb['anon_mib']:,.0f} MiB" if nb else "")))

    # ------------------------------------------------------------------ start-up
    if "version" not in args.skip:
        walls = sorted(run_child([*CLI, "--version"])[0] for _ in range(7))
        fig["version"] = {"wall": walls[3]}
        rows.append(("mqstore --version (start-up)", f"{walls[3]:.3f} s", "", "0.15 s", f"{0.15 / walls[3]:.2f}",
                     "median of 7"))
    # ------------------------------------------------------------------ RocketMQ
    rocketmq_rows = ("rocketmq_rebuild", "rocketmq_verify", "rocketmq_dump_json", "query_by_key")
    if not set(rocketmq_rows) <= set(args.skip):  # (no RocketMQ data made when every RocketMQ row is skipped)
        root = args.data / f"rocketmq-{args.mb}m"
        n = make_rocketmq(root, args.mb)
        seg = root / "commitlog" / "00000000000000000000"
        size_mb = seg.stat().st_size / 1e6
        cat = cat_s(seg)
        out = args.data / "rocketmq-out"
    if "rocketmq_rebuild" not in args.skip:
        r = median_run([*CLI, "rocketmq", "rebuild-index", str(root), "--out", str(out)], before=[out])
        add("rocketmq_rebuild", f"rocketmq rebuild-index ({args.mb} MiB, {n:,} msgs)", r, n, cat, size_mb)
        shutil.rmtree(out, ignore_errors=True)
    if "rocketmq_verify" not in args.skip:
        add("rocketmq_verify", "rocketmq verify STORE", median_run([*CLI, "rocketmq", "verify", str(root)]),
            size_mb, cat, size_mb)
    if "rocketmq_dump_json" not in args.skip:
        add("rocketmq_dump_json", "rocketmq dump --json > /dev/null",
            median_run([*CLI, "rocketmq", "dump", str(root), "--json"]), n, cat, size_mb)
    if "query_by_key" not in args.skip:
        res = subprocess.run([PY, "-c", QUERY, str(root), str(args.mb << 20)], capture_output=True, text=True)
        if res.returncode == 0:
            q = json.loads(res.stdout)
            fig["query_by_key"] = q
            rows.append(("query_by_key, exact, single key (in-process)", f"{q['new']['wall']:,.0f} lookups/s", "",
                         "300,000 lookups/s", f"{q['new']['wall'] / 300_000:.2f}",
                         f"{q['new']['wall'] / q['old']['wall']:.2f}x the record-by-record path "
                         f"({q['old']['wall']:,.0f}/s); CPU {q['new']['cpu']:,.0f}/s vs {q['old']['cpu']:,.0f}/s"))
    # ------------------------------------------------------------------ Kafka
    kafka_rows = ("kafka_verify_idx", "kafka_verify_noidx", "kafka_rebuild", "kafka_dump_json")
    if not set(kafka_rows) <= set(args.skip):  # (no Kafka data made when every Kafka row is skipped)
        part = args.data / f"kafka-{args.mb}m" / "bench-0"
        records = make_kafka(part, args.mb)
        log = part / "00000000000000000000.log"
        kmb = log.stat().st_size / 1e6
        kcat = cat_s(log)
        bare = args.data / f"kafka-{args.mb}m-bare" / "bench-0"  # the .log alone (a hard link)
        if not (bare / log.name).exists():
            bare.mkdir(parents=True, exist_ok=True)
            os.link(log, bare / log.name)
        kout = args.data / "kafka-out"
        if "kafka_verify_idx" not in args.skip:
            add("kafka_verify_idx", "kafka verify PART (with .index/.timeindex)", median_run([*CLI, "kafka", "verify",
                str(part)]), kmb, kcat, kmb)  # fmt: skip
        if "kafka_verify_noidx" not in args.skip:
            add("kafka_verify_noidx", "kafka verify PART (no index files)", median_run([*CLI, "kafka", "verify",
                str(bare)]), kmb, kcat, kmb)  # fmt: skip
        if "kafka_rebuild" not in args.skip:
            kout.mkdir(exist_ok=True)
            add("kafka_rebuild", "kafka rebuild-index", median_run([*CLI, "kafka", "rebuild-index", str(part), "--out",
                str(kout)]), kmb, kcat, kmb)  # fmt: skip
            shutil.rmtree(kout, ignore_errors=True)
        if "kafka_dump_json" not in args.skip:
            add("kafka_dump_json", "kafka dump --json --print-data > /dev/null",
                median_run([*CLI, "kafka", "dump", str(log), "--json", "--print-data"]), records, kcat, kmb)
    # ------------------------------------------------------------------ scaling
    scaling = []
    for smb in args.scaling if "scaling" not in args.skip else []:
        sroot = args.data / f"scaling-{smb}m"
        segmb = min(smb, 1024)
        sn = make_rocketmq(sroot, smb, segmb)
        sout = args.data / "scaling-out"
        rb = median_run([*CLI, "rocketmq", "rebuild-index", str(sroot), "--out", str(sout)], before=[sout])
        shutil.rmtree(sout, ignore_errors=True)
        vf = median_run([*CLI, "rocketmq", "verify", str(sroot)])
        shutil.rmtree(sroot, ignore_errors=True)
        scaling.append({"mb": smb, "segments": max(1, smb // segmb), "messages": sn, "rebuild": rb, "verify": vf})
        rows.append((f"scaling: rebuild-index {smb} MiB ({max(1, smb // segmb)} seg.)",
                     f"{sn / rb['wall']:,.0f} msgs/s ({rb['wall']:.2f} s)", _vs_numba(rb), "", "",
                     f"CPU {rb['cpu']:.2f} s; peak RSS {rb['rss_mib']:,.0f} MiB, anonymous {rb['anon_mib']:,.0f} MiB"))
        rows.append((f"scaling: verify {smb} MiB", f"{sn / vf['wall']:,.0f} msgs/s ({vf['wall']:.2f} s)",
                     _vs_numba(vf), "", "",
                     f"CPU {vf['cpu']:.2f} s; peak RSS {vf['rss_mib']:,.0f} MiB, anonymous {vf['anon_mib']:,.0f} MiB; "
                     f"exit {vf['exit']}"))
    fig["scaling"] = scaling  # type: ignore[assignment]

    print(f"issue 15 operator commands, whole processes, median of 3 ({env_note} at the start, "
          f"{os.getloadavg()[0]:.1f} at the end)")
    head = ("command", "mqstore", "x numba", "goal", "x goal", "notes")
    w = [max(len(r[i]) for r in [*rows, head]) for i in range(6)]
    print(" | ".join(h.ljust(w[i]) for i, h in enumerate(head)))
    print("-|-".join("-" * x for x in w))
    for row in rows:
        print(" | ".join(c.ljust(w[i]) for i, c in enumerate(row)))
    if args.json:
        args.json.write_text(json.dumps(fig, indent=1))


if __name__ == "__main__":
    main()
