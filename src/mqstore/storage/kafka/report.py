"""The figures of ``mqstore kafka report``: a partition directory or a whole log directory (a
directory of ``topic-N`` partition directories).

Per segment, one batch-header scan (the scan kernel, no CRC: ``verify`` checks CRCs) gives numpy
columns; producer ids and epochs are gathered from the mapped batch headers by position, the
indexes are read as numpy views.  Only two things decode batches, both bounded: the control
batches (their one record says COMMIT or ABORT) and an even sample of at most
``COMPRESSION_SAMPLE`` compressed batches per partition for the compression ratio.  Read-only.
"""

from __future__ import annotations

import os
import re
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np

from mqstore.errors import CorruptDataError, InvalidArgumentError, MqStoreError, StoreNotFoundError
from mqstore.formats.kafka.batch import batch_body, decode_batch_header, decode_control_record, iter_records
from mqstore.kernels.arrays import unique
from mqstore.kernels.report import backward_steps, log2_edges, log2_histogram
from mqstore.storage.kafka.index import OffsetIndex, TimeIndex
from mqstore.storage.kafka.rebuild import MappedLog, parse_base_offset, scan_log

ProgressFn = Callable[[int, int], None]

RECOVERY_POINT_FILE = "recovery-point-offset-checkpoint"
COMPRESSION_SAMPLE = 256
SERIES_BINS = 60
SIZE_BINS = 32
RATIO_EDGES = [0.0, 1.0, 1.25, 1.5, 2.0, 3.0, 4.0, 6.0, 8.0, 16.0]
TOP_PRODUCERS = 20
_PARTITION_DIR = re.compile(r"^(?P<topic>.+)-(?P<partition>\d+)$")
_ATTR_COMPRESSION = 0x07
_ATTR_TRANSACTIONAL = 0x10
_ATTR_CONTROL = 0x20


def _is_segment_log(p: Path) -> bool:
    return p.suffix == ".log" and p.name.split(".", 1)[0].isdigit() and p.is_file()


def partition_dirs(path: str | Path) -> list[Path]:
    """``[path]`` when it is a partition directory (it holds segment ``.log`` files), else its
    sub-directories that are partition directories (a log directory), sorted by topic, partition."""
    p = Path(path)
    if not p.is_dir():
        raise StoreNotFoundError("not a directory", path=str(p))
    if any(_is_segment_log(f) for f in p.iterdir()):
        return [p]
    parts = [d for d in p.iterdir() if d.is_dir() and any(_is_segment_log(f) for f in d.iterdir())]
    if not parts:
        raise StoreNotFoundError("no Kafka segment files here nor in its sub-directories", path=str(p))

    def key(d: Path) -> tuple[str, int]:
        m = _PARTITION_DIR.match(d.name)
        return (m.group("topic"), int(m.group("partition"))) if m else (d.name, -1)

    return sorted(parts, key=key)


def read_recovery_point(partition: Path) -> tuple[int | None, str | None]:
    """(recovery point, file) of a partition: from ``recovery-point-offset-checkpoint`` in the
    partition directory (where mqstore keeps it) or in its log directory (where Kafka keeps one
    per log directory; lines ``topic partition offset`` after a version and a count line)."""
    m = _PARTITION_DIR.match(partition.name)
    for f in (partition / RECOVERY_POINT_FILE, partition.parent / RECOVERY_POINT_FILE):
        if not f.is_file():
            continue
        lines = f.read_text(errors="replace").split("\n")
        if len(lines) < 2 or lines[0].strip() != "0":
            raise CorruptDataError("malformed recovery-point checkpoint", path=str(f))
        for line in lines[2:]:
            parts = line.strip().rsplit(" ", 2)
            if len(parts) != 3:
                continue
            topic, part, off = parts
            if m is None or (topic == m.group("topic") and part == m.group("partition")):
                try:
                    return int(off), str(f)
                except ValueError:
                    raise CorruptDataError("malformed recovery-point checkpoint", path=str(f)) from None
    return None, None


def _be_int(a: np.ndarray, pos: np.ndarray, width: int) -> np.ndarray:
    v = np.zeros(pos.shape[0], np.uint64)
    for k in range(width):
        v = (v << np.uint64(8)) | a[pos + k].astype(np.uint64)
    out = v.astype(np.int64)
    if width < 8:
        sign = np.int64(1) << np.int64(8 * width - 1)
        out = np.where(out >= sign, out - (sign << np.int64(1)), out)
    return out


def _valid_entries(rel: np.ndarray) -> int:
    if rel.shape[0] > 1:
        z = np.nonzero(rel[1:] == 0)[0]
        if z.shape[0]:
            return int(z[0]) + 1
    return rel.shape[0]


def _segment(log_path: Path, index_interval: int, ratios: list[float], sample_max: int,
             producers: dict[int, dict[str, int]], progress: ProgressFn | None) -> dict[str, Any]:
    base = parse_base_offset(log_path)
    lp = str(log_path)
    with MappedLog(log_path) as ml:
        mm = ml.mm
        size = len(mm)
        scan = scan_log(mm, progress=progress)
        n = int(scan["count"])
        magic = scan["magic"][:n]
        v2 = magic >= 2
        pos = scan["position"][:n].astype(np.int64)
        bsize = scan["size"][:n].astype(np.int64) + 12
        attrs = scan["attributes"][:n].astype(np.int64)
        counts = np.where(v2, scan["record_count"][:n], 1).astype(np.int64)
        max_ts = scan["max_timestamp"][:n].astype(np.int64)
        base_ts = np.where(v2, scan["base_timestamp"][:n], max_ts).astype(np.int64)
        last = scan["last_offset"][:n].astype(np.int64)
        firsts = np.where(v2, scan["base_offset"][:n], last).astype(np.int64)
        a = np.frombuffer(mm, np.uint8) if size else np.zeros(0, np.uint8)
        full = v2 & (bsize >= 61)
        pid = np.full(n, -1, np.int64)
        epoch = np.full(n, -1, np.int64)
        if full.any():
            pid[full] = _be_int(a, pos[full] + 43, 8)
            epoch[full] = _be_int(a, pos[full] + 51, 2)
        txn = full & ((attrs & _ATTR_TRANSACTIONAL) != 0)
        ctl = full & ((attrs & _ATTR_CONTROL) != 0)
        comp = full & ((attrs & _ATTR_COMPRESSION) != 0)
        counts = np.where(ctl, 0, counts)  # records = data records: a control batch holds a marker
        # producers: batches, records, transactional batches, COMMIT / ABORT markers
        with_pid = np.flatnonzero(pid >= 0)
        if with_pid.shape[0]:
            up, inv = unique(pid[with_pid], return_inverse=True)
            nb = np.bincount(inv, minlength=up.shape[0])
            nr = np.bincount(inv, weights=counts[with_pid], minlength=up.shape[0])
            nt = np.bincount(inv, weights=txn[with_pid] & ~ctl[with_pid], minlength=up.shape[0])
            ep = np.full(up.shape[0], -1, np.int64)
            np.maximum.at(ep, inv, epoch[with_pid])
            for i, p in enumerate(up.tolist()):
                d = producers.setdefault(p, {"producerId": p, "epoch": -1, "batches": 0, "records": 0,
                                             "transactionalBatches": 0, "commits": 0, "aborts": 0})
                d["batches"] += int(nb[i])
                d["records"] += int(nr[i])
                d["transactionalBatches"] += int(nt[i])
                d["epoch"] = max(d["epoch"], int(ep[i]))
        commits = aborts = 0
        for i in np.flatnonzero(ctl).tolist():
            try:
                h = decode_batch_header(mm, int(pos[i]), path=lp)
                for r in iter_records(mm, h, path=lp):
                    c = decode_control_record(r, path=lp)
                    if c.type_name == "COMMIT":
                        commits += 1
                        producers[int(pid[i])]["commits"] += 1
                    elif c.type_name == "ABORT":
                        aborts += 1
                        producers[int(pid[i])]["aborts"] += 1
            except MqStoreError:
                continue
        # compression ratio of an even sample of the compressed batches
        which = np.flatnonzero(comp)
        for i in which[:: max(1, -(-which.shape[0] // sample_max))].tolist():
            try:
                h = decode_batch_header(mm, int(pos[i]), path=lp)
                body = batch_body(mm, h, path=lp)
            except MqStoreError:
                continue
            ratios.append((len(body) + 61) / float(bsize[i]))
        del a
    oi_entries = ti_entries = 0
    ti_breaks = 0
    oi_path = log_path.with_suffix(".index")
    ti_path = log_path.with_suffix(".timeindex")
    if oi_path.is_file():
        idx = OffsetIndex(oi_path, base, -1, writable=False)
        try:
            oi_entries = _valid_entries(idx.column_array(False) - base)
        finally:
            idx.close()
    if ti_path.is_file():
        tix = TimeIndex(ti_path, base, -1, writable=False)
        try:
            ti_n = _valid_entries(tix.column_array(True) - base)
            ts_col = tix.column_array(False)[:ti_n].astype(np.int64)
            ti_entries = ti_n
            ti_breaks = int(np.count_nonzero(ts_col[1:] <= ts_col[:-1])) if ti_n > 1 else 0
        finally:
            tix.close()
    mib = size / float(1 << 20)
    return {
        "name": log_path.name, "baseOffset": base, "bytes": size, "batches": n, "records": int(counts.sum()),
        "firstOffset": int(firsts[0]) if n else None, "lastOffset": int(last[-1]) if n else None,
        "minTimestamp": int(base_ts.min()) if n else None, "maxTimestamp": int(max_ts.max()) if n else None,
        "validEnd": int(scan["valid_end"]),
        "offsetIndexEntries": oi_entries, "timeIndexEntries": ti_entries,
        "indexEntriesPerMiB": round(oi_entries / mib, 3) if mib else 0.0,
        "expectedEntriesPerMiB": round((1 << 20) / index_interval, 3) if index_interval > 0 else None,
        "timeIndexBreaks": ti_breaks,
        "transactionalBatches": int((txn & ~ctl).sum()), "controlBatches": int(ctl.sum()),
        "commits": commits, "aborts": aborts,
        "_cols": (max_ts, counts, bsize),
    }


def _partition(d: Path, index_interval: int, progress: ProgressFn | None) -> dict[str, Any]:
    logs = sorted((f for f in d.iterdir() if _is_segment_log(f)), key=parse_base_offset)
    producers: dict[int, dict[str, int]] = {}
    ratios: list[float] = []
    segs = []
    total = sum(f.stat().st_size for f in logs) or 1
    done = 0
    for f in logs:
        sz = f.stat().st_size

        def prog(cur: int, _tot: int, _done: int = done) -> None:
            if progress is not None:
                progress(_done + cur, total)

        per_segment = max(8, COMPRESSION_SAMPLE // max(len(logs), 1))
        segs.append(_segment(f, index_interval, ratios, per_segment, producers, prog if progress else None))
        done += sz
    cols = [s.pop("_cols") for s in segs]
    max_ts = np.concatenate([c[0] for c in cols]) if cols else np.zeros(0, np.int64)
    counts = np.concatenate([c[1] for c in cols]) if cols else np.zeros(0, np.int64)
    bsize = np.concatenate([c[2] for c in cols]) if cols else np.zeros(0, np.int64)
    # batches whose max timestamp is below an earlier batch's (across segments, in offset order)
    breaks = 0
    if max_ts.shape[0] > 1:
        run = np.maximum.accumulate(max_ts)
        breaks = int(np.count_nonzero(max_ts[1:] < run[:-1]))
    log_end = (segs[-1]["lastOffset"] + 1) if segs and segs[-1]["lastOffset"] is not None else (
        segs[-1]["baseOffset"] if segs else 0)
    try:
        rp, rp_file = read_recovery_point(d)
        rp_error = None
    except CorruptDataError as exc:
        rp, rp_file, rp_error = None, None, str(exc)
    return {
        "partition": d.name, "path": str(d), "segments": segs,
        "logStartOffset": segs[0]["firstOffset"] if segs and segs[0]["firstOffset"] is not None else (
            segs[0]["baseOffset"] if segs else 0),
        "logEndOffset": log_end, "recoveryPoint": rp, "recoveryPointFile": rp_file, "recoveryPointError": rp_error,
        "unflushedMessages": None if rp is None else max(0, log_end - rp),
        "batches": int(max_ts.shape[0]), "records": int(counts.sum()), "bytes": sum(s["bytes"] for s in segs),
        "timestampBreaks": breaks, "backwardSteps": int(backward_steps(max_ts).shape[0]),
        "producers": sorted(producers.values(), key=lambda p: (-p["batches"], p["producerId"])),
        "_cols": (max_ts, counts, bsize, ratios),
    }


def kafka_report(path: str | os.PathLike[str], *, index_interval_bytes: int = 4096,
                 progress: ProgressFn | None = None) -> dict[str, Any]:
    """Every figure of the report of a partition or log directory (see the module doc)."""
    if index_interval_bytes < 0:
        raise InvalidArgumentError(f"index interval must be >= 0, got {index_interval_bytes}")
    p = Path(path)
    if not p.exists():
        raise StoreNotFoundError("path not found", path=str(p))
    parts = [_partition(d, index_interval_bytes, progress) for d in partition_dirs(p)]
    cols = [x.pop("_cols") for x in parts]
    max_ts = np.concatenate([c[0] for c in cols])
    bsize = np.concatenate([c[2] for c in cols])
    ratios = np.array([r for c in cols for r in c[3]], np.float64)
    rate: dict[str, Any] = {"binMs": 0, "start": None, "bins": 0, "partitions": {}}
    ok = max_ts >= 0
    if ok.any():
        t0, t1 = int(max_ts[ok].min()), int(max_ts[ok].max())
        span = max(t1 - t0 + 1, 1)
        width = max(1000, -(-span // SERIES_BINS))
        width = -(-width // 1000) * 1000
        nbins = -(-span // width)
        start = (t0 // 1000) * 1000
        nbins = max(nbins, int((t1 - start) // width) + 1)
        rate = {"binMs": width, "start": start, "bins": nbins, "partitions": {}}
        for x, c in zip(parts, cols, strict=True):
            m = c[0] >= 0
            b = (c[0][m] - start) // width
            series = np.bincount(b, weights=c[1][m], minlength=nbins)[:nbins] * (1000.0 / width)
            rate["partitions"][x["partition"]] = [round(float(v), 3) for v in series]
    hist_r = np.histogram(ratios, bins=[*RATIO_EDGES, np.inf])[0] if ratios.shape[0] else np.zeros(len(RATIO_EDGES), np.int64)
    producers: dict[int, dict[str, int]] = {}
    for x in parts:
        for pr in x["producers"]:
            d = producers.setdefault(pr["producerId"], {k: 0 for k in pr} | {"producerId": pr["producerId"], "epoch": -1})
            for k2 in ("batches", "records", "transactionalBatches", "commits", "aborts"):
                d[k2] += pr[k2]
            d["epoch"] = max(d["epoch"], pr["epoch"])
        x["producers"] = x["producers"][:TOP_PRODUCERS]
    prods = sorted(producers.values(), key=lambda p: (-p["batches"], p["producerId"]))
    return {
        "layout": "kafka", "path": str(p), "indexIntervalBytes": index_interval_bytes,
        "partitions": parts,
        "batchSize": {"edges": log2_edges(SIZE_BINS), "counts": log2_histogram(bsize, SIZE_BINS).tolist(),
                      "max": int(bsize.max(initial=0)), "mean": round(float(bsize.mean()), 1) if bsize.shape[0] else 0},
        "compressionRatio": {"edges": RATIO_EDGES, "counts": hist_r.tolist(), "sampled": int(ratios.shape[0]),
                             "mean": round(float(ratios.mean()), 3) if ratios.shape[0] else None},
        "recordsPerSecond": rate,
        "producers": {"count": len(prods), "transactionalBatches": sum(p["transactionalBatches"] for p in prods),
                      "commits": sum(p["commits"] for p in prods), "aborts": sum(p["aborts"] for p in prods),
                      "top": prods[:TOP_PRODUCERS]},
    }


def verify_summary(path: str | os.PathLike[str], *, strict: bool = False,
                   progress: ProgressFn | None = None) -> dict[str, Any]:
    """``verify`` of every partition, its problems grouped by file (every ``.log``, ``.index`` and
    ``.timeindex`` gets an entry, ``ok`` when no problem names it)."""
    from mqstore.storage.kafka.tools import verify_path

    files: list[dict[str, Any]] = []
    ok = True
    batches = 0
    for d in partition_dirs(path):
        rep = verify_path(d, strict=strict, progress=progress)
        ok = ok and rep.ok
        batches += rep.batches
        by_path: dict[str, list[str]] = {}
        for pr in rep.problems:
            by_path.setdefault(str(Path(pr.path)), []).append(f"{pr.kind}: {pr.message}")
        for f in sorted(d.iterdir()):
            if f.suffix in (".log", ".index", ".timeindex") and f.name.split(".", 1)[0].isdigit():
                probs = by_path.pop(str(f), [])
                files.append({"file": f"{d.name}/{f.name}", "ok": not probs, "problems": probs})
        for other, probs in by_path.items():
            files.append({"file": other, "ok": False, "problems": probs})
    return {"ok": ok, "batches": batches, "problems": sum(len(f["problems"]) for f in files), "files": files}
