"""Load campaign: one writer appending continuously, N reader threads and M reader processes on the
same store, for minutes.

RocketMQ layout: the writer ``put``s into 4 queues of one topic (async flush, background reput
thread dispatching ConsumeQueues and IndexFiles); reader threads in the writer's process follow
every queue with ``get`` and look keys up with ``query_by_key``; reader processes reopen the store
read-only again and again (no writer lock) and follow the queues.  Kafka layout: the writer appends
batches to one partition (``PartitionLog``, flushed every 500 offsets); reader threads (the log is
not thread-safe: they take turns with the writer under one lock) and reader processes (read-only
opens, no lock) follow the offsets.

The writer appends as fast as it can, held back only when it runs more than ``--max-lead``
messages ahead of the slowest reader thread (consumer-paced, so that an overloaded machine does not
end a run with minutes of catch-up; the time held back is reported).

Every message carries its queue, its sequence number and a body derived from them, so each reader
checks what it got: a **partial record** is a message whose bytes differ from the expected ones or
that raised a corruption error; an **offset violation** is a queue offset (RocketMQ) or an offset
(Kafka) that is not the previous one plus one.  Both must be 0.  Also measured: the dispatcher lag
(CommitLog end − dispatched offset in bytes, and the age of the oldest undispatched message in ms,
sampled every 10 ms), and the RSS of the writer and of each reader process (anonymous and
file-backed, from ``/proc``, sampled every 0.5 s) against the store size.

Usage::

    python tools/load_campaign.py --minutes 3 [--layouts rocketmq,kafka] [--threads 3] [--procs 2] [--json]

The same code runs bounded by a message count in CI (``tests/faults/test_fault_concurrency.py``).
"""

from __future__ import annotations

import argparse
import collections
import json
import os
import subprocess
import sys
import tempfile
import threading
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

QUEUES = 4
TOPIC = "Load"


def body_of(queue: int, seq: int) -> bytes:
    """The body of the ``seq``-th message of ``queue`` (self-describing, 24..280 bytes)."""
    head = b"%d:%d:" % (queue, seq)
    return head + bytes([65 + (seq + queue) % 26]) * (16 + (seq * 31) % 256)


def check_body(queue: int, seq: int, body: bytes | None) -> bool:
    return body == body_of(queue, seq)


# ============================================================================ memory and size probes
def rss_kib(pid: int) -> tuple[int, int]:
    """(anonymous, file-backed) resident KiB of a process (0, 0 once it is gone)."""
    anon = filed = 0
    try:
        with open(f"/proc/{pid}/status") as f:
            for line in f:
                if line.startswith("RssAnon:"):
                    anon = int(line.split()[1])
                elif line.startswith("RssFile:"):
                    filed = int(line.split()[1])
    except OSError:
        pass
    return anon, filed


def dir_size(path: Path) -> int:
    total = 0
    for root, _dirs, files in os.walk(path):
        for name in files:
            try:
                total += os.stat(os.path.join(root, name)).st_size
            except OSError:
                pass
    return total


@dataclass
class LoadResult:
    layout: str
    seconds: float = 0.0
    messages_written: int = 0
    reads: int = 0  # messages read and checked, over all readers
    key_queries: int = 0
    reader_rounds: int = 0  # read-only reopens by the reader processes
    partial_records: int = 0
    offset_violations: int = 0
    key_misses: int = 0
    max_lead: int = 0  # the writer waits when it is this many messages ahead of the slowest reader thread
    backpressure_seconds: float = 0.0  # time the writer spent waiting for the reader threads
    errors: list[str] = field(default_factory=list)
    lag_bytes_max: int = 0
    lag_bytes_p99: float = 0.0
    lag_ms_max: float = 0.0
    lag_ms_p99: float = 0.0
    lag_samples: int = 0
    store_bytes: int = 0  # files on disk (preallocated mapped files count whole)
    data_bytes: int = 0  # CommitLog end offset / bytes of the Kafka segments
    writer_rss_anon_peak_kib: int = 0
    writer_rss_file_peak_kib: int = 0
    reader_rss_anon_peak_kib: int = 0
    reader_rss_file_peak_kib: int = 0
    # (seconds, writer anon KiB, writer file KiB, max reader anon KiB, store bytes) every ~10 % of the run
    rss_series: list[tuple[float, int, int, int, int]] = field(default_factory=list)

    def ok(self) -> bool:
        return (self.partial_records == 0 and self.offset_violations == 0 and self.key_misses == 0
                and not self.errors)

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)


class _Sampler(threading.Thread):
    """RSS of this process and of the reader processes every 0.5 s; store size every 2 s."""

    def __init__(self, res: LoadResult, store: Path, t0: float) -> None:
        super().__init__(daemon=True)
        self.res, self.store, self.t0 = res, store, t0
        self.pids: list[int] = []
        self.stop = threading.Event()
        self.series: list[tuple[float, int, int, int, int]] = []

    def run(self) -> None:
        size = 0
        k = 0
        while not self.stop.is_set():
            self.sample(size)
            if k % 4 == 0:
                size = dir_size(self.store)
            k += 1
            self.stop.wait(0.5)
        self.sample(dir_size(self.store))

    def sample(self, size: int) -> None:
        r = self.res
        wa, wf = rss_kib(os.getpid())
        r.writer_rss_anon_peak_kib = max(r.writer_rss_anon_peak_kib, wa)
        r.writer_rss_file_peak_kib = max(r.writer_rss_file_peak_kib, wf)
        ra = 0
        for pid in self.pids:
            a, f = rss_kib(pid)
            ra = max(ra, a)
            r.reader_rss_anon_peak_kib = max(r.reader_rss_anon_peak_kib, a)
            r.reader_rss_file_peak_kib = max(r.reader_rss_file_peak_kib, f)
        self.series.append((round(time.monotonic() - self.t0, 1), wa, wf, ra, size))


def _percentile(values: list[float], q: float) -> float:
    if not values:
        return 0.0
    s = sorted(values)
    return float(s[min(len(s) - 1, int(q * len(s)))])


def _thin(series: list[tuple[float, int, int, int, int]], n: int = 11) -> list[tuple[float, int, int, int, int]]:
    if len(series) <= n:
        return series
    return [series[round(i * (len(series) - 1) / (n - 1))] for i in range(n)]


def _spawn_readers(layout: str, path: Path, procs: int, stop_file: Path) -> list[subprocess.Popen[str]]:
    return [subprocess.Popen([sys.executable, __file__, "--reader", layout, str(path), str(stop_file)],
                             stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True) for _ in range(procs)]


def _collect_readers(res: LoadResult, readers: list[subprocess.Popen[str]], final: dict[int, int]) -> None:
    for p in readers:
        out, err = p.communicate()
        try:
            rep = json.loads(out.strip().splitlines()[-1])
        except (ValueError, IndexError):
            res.errors.append(f"reader process {p.pid} exited {p.returncode}: {err[-500:]}")
            continue
        res.reads += rep["reads"]
        res.reader_rounds += rep["rounds"]
        res.partial_records += rep["partial"]
        res.offset_violations += rep["violations"]
        res.errors.extend(rep["errors"][:5])
        for q, n in final.items():
            if rep["seen"].get(str(q), 0) != n:
                res.errors.append(f"reader process {p.pid} ended at {rep['seen'].get(str(q))} of queue {q}, "
                                  f"expected {n}")


def _hold_back(res: LoadResult, written: int, progress: list[int], max_lead: int, deadline: float | None) -> None:
    """Backpressure: wait while the slowest reader thread is more than ``max_lead`` messages behind
    (a consumer-paced producer; without it an overloaded machine ends with minutes of catch-up)."""
    if not progress or written - min(progress) <= max_lead:
        return
    t = time.monotonic()
    while written - min(progress) > max_lead // 2 and (deadline is None or time.monotonic() < deadline):
        time.sleep(0.002)
    res.backpressure_seconds += time.monotonic() - t


def _stopping(stop: threading.Event, seconds: float | None, messages: int | None, t0: float, written: int) -> bool:
    if stop.is_set():
        return True
    if messages is not None and written >= messages:
        return True
    return seconds is not None and time.monotonic() - t0 >= seconds


# ============================================================================ RocketMQ
def _rocketmq_config(background: bool = True) -> Any:
    from mqstore import StoreConfig

    return StoreConfig(commit_log_file_size=64 * 1024 * 1024, consume_queue_file_size=300_000 * 20,
                       hash_slot_num=50_000, index_num=200_000, background_services=background)


def run_rocketmq(path: Path, *, seconds: float | None = None, messages: int | None = None, threads: int = 3,
                 procs: int = 2, max_lead: int = 50_000) -> LoadResult:
    from mqstore import MessageStore
    from mqstore.errors import CorruptDataError, MqStoreError

    res = LoadResult("rocketmq", max_lead=max_lead)
    progress = [0] * threads
    stop_file = path.parent / (path.name + ".stop")
    stop_file.unlink(missing_ok=True)
    store = MessageStore.open(path, _rocketmq_config())
    eng = store.engine
    t0 = time.monotonic()
    sampler = _Sampler(res, path, t0)
    readers = _spawn_readers("rocketmq", path, procs, stop_file)
    sampler.pids = [p.pid for p in readers]
    sampler.start()
    written = [0] * QUEUES
    pending: collections.deque[tuple[int, float]] = collections.deque()  # (CommitLog end after put, time)
    lag_b: list[float] = []
    lag_ms: list[float] = []
    done = threading.Event()
    lock = threading.Lock()  # guards the per-reader counters merged into res

    lag_lock = threading.Lock()  # the writer and the sampler thread both sample

    def sample_lag() -> None:
        with lag_lock:
            reput = eng.reput_from_offset
            end = eng.commit_log.max_offset
            now = time.monotonic()
            while pending and pending[0][0] <= reput:
                pending.popleft()
            oldest = pending[0][1] if pending else now
            lag_b.append(max(0, end - reput))
            lag_ms.append((now - oldest) * 1000)

    def lag_sampler() -> None:
        while not done.wait(0.01):
            sample_lag()

    def reader(k: int) -> None:
        nxt = [0] * QUEUES
        reads = queries = partial = viol = misses = 0
        errors: list[str] = []
        try:
            while True:
                finished = done.is_set()
                progressed = False
                for q in range(QUEUES):
                    if nxt[q] >= store.max_offset(TOPIC, q):
                        continue
                    got = store.get(TOPIC, q, nxt[q], 32)
                    for m in got:
                        seq = nxt[q]
                        if m.queue_offset != seq:
                            viol += 1
                            errors.append(f"thread {k}: queue {q} offset {m.queue_offset} after {seq - 1}")
                        if not check_body(q, m.queue_offset, m.body):
                            partial += 1
                        nxt[q] = m.queue_offset + 1
                        reads += 1
                        progressed = True
                    if got and (reads // 32) % 50 == k % 50:  # now and then: the last one by key
                        m = got[-1]
                        key = f"k{q}-{m.queue_offset}"
                        hits = store.query_by_key(TOPIC, key)
                        queries += 1
                        if not any(h.queue_id == q and h.queue_offset == m.queue_offset for h in hits):
                            misses += 1
                            errors.append(f"thread {k}: key {key} not found")
                progress[k] = sum(nxt)
                if finished and not progressed and all(nxt[q] >= written[q] for q in range(QUEUES)):
                    break
                if not progressed:
                    time.sleep(0.001)
        except CorruptDataError as exc:
            partial += 1
            errors.append(f"thread {k}: {exc}")
        except MqStoreError as exc:
            errors.append(f"thread {k}: {type(exc).__name__}: {exc}")
        with lock:
            res.reads += reads
            res.key_queries += queries
            res.partial_records += partial
            res.offset_violations += viol
            res.key_misses += misses
            res.errors.extend(errors[:5])

    lt = threading.Thread(target=lag_sampler, daemon=True)
    lt.start()
    ths = [threading.Thread(target=reader, args=(k,)) for k in range(threads)]
    for t in ths:
        t.start()
    stop = threading.Event()
    i = 0
    try:
        while not _stopping(stop, seconds, messages, t0, i):
            q = i % QUEUES
            seq = written[q]
            r = store.put(TOPIC, body_of(q, seq), q, keys=[f"k{q}-{seq}"])
            if r.queue_offset != seq:
                res.offset_violations += 1
                res.errors.append(f"writer: queue {q} got queue offset {r.queue_offset}, expected {seq}")
            pending.append((r.commit_log_offset + r.size, time.monotonic()))
            if i % 64 == 0:  # the sampler thread competes for the GIL: sample here too
                sample_lag()
            written[q] = seq + 1
            i += 1
            if i % 256 == 0:
                _hold_back(res, i, progress, max_lead, None if seconds is None else t0 + seconds)
    finally:
        res.messages_written = i
        done.set()
        for t in ths:
            t.join()
        lt.join()
        stop_file.write_text(json.dumps({str(q): written[q] for q in range(QUEUES)}))
        _collect_readers(res, readers, dict(enumerate(written)))
        res.seconds = round(time.monotonic() - t0, 1)
        res.data_bytes = eng.commit_log.max_offset
        store.close()
        sampler.stop.set()
        sampler.join()
    res.store_bytes = sampler.series[-1][4] if sampler.series else dir_size(path)
    res.rss_series = _thin(sampler.series)
    res.lag_samples = len(lag_b)
    res.lag_bytes_max = int(max(lag_b, default=0))
    res.lag_bytes_p99 = _percentile(lag_b, 0.99)
    res.lag_ms_max = round(max(lag_ms, default=0.0), 1)
    res.lag_ms_p99 = round(_percentile(lag_ms, 0.99), 1)
    return res


def _reader_rocketmq(path: Path, stop_file: Path) -> dict[str, Any]:
    from mqstore import MessageStore
    from mqstore.errors import CorruptDataError, MqStoreError

    cfg = _rocketmq_config(background=False)
    nxt = [0] * QUEUES
    rep: dict[str, Any] = {"reads": 0, "rounds": 0, "partial": 0, "violations": 0, "errors": []}
    final: dict[str, int] | None = None
    while True:
        if final is None and stop_file.exists():
            final = json.loads(stop_file.read_text())
        rep["rounds"] += 1
        before = sum(nxt)
        try:
            with MessageStore.open(path, cfg, read_only=True) as s:
                for q in range(QUEUES):
                    hi = s.max_offset(TOPIC, q)
                    while nxt[q] < hi:
                        got = s.get(TOPIC, q, nxt[q], 64)
                        if not got:
                            break
                        for m in got:
                            if m.queue_offset != nxt[q]:
                                rep["violations"] += 1
                                rep["errors"].append(f"queue {q} offset {m.queue_offset} after {nxt[q] - 1}")
                            if not check_body(q, m.queue_offset, m.body):
                                rep["partial"] += 1
                            nxt[q] = m.queue_offset + 1
                            rep["reads"] += 1
        except CorruptDataError as exc:
            rep["partial"] += 1
            rep["errors"].append(str(exc))
        except MqStoreError as exc:  # e.g. a file rolled while opening: retry
            rep["errors"].append(f"{type(exc).__name__}: {exc}")
            if len(rep["errors"]) > 20:
                break
        if final is not None and all(nxt[q] >= final[str(q)] for q in range(QUEUES)):
            break
        if sum(nxt) == before:
            time.sleep(0.05)  # nothing new: do not spin on reopening
        if final is not None and rep["rounds"] > 10_000:
            break
    rep["seen"] = {str(q): nxt[q] for q in range(QUEUES)}
    return rep


# ============================================================================ Kafka
def _kafka_config() -> Any:
    from mqstore.kafka import LogConfig

    return LogConfig(segment_bytes=64 * 1024 * 1024, flush_interval_messages=500)


def run_kafka(path: Path, *, seconds: float | None = None, messages: int | None = None, threads: int = 3,
              procs: int = 2, max_lead: int = 50_000) -> LoadResult:
    from mqstore.errors import CorruptDataError, MqStoreError
    from mqstore.kafka import PartitionLog, SimpleRecord

    res = LoadResult("kafka", max_lead=max_lead)
    progress = [0] * threads
    stop_file = path.parent / (path.name + ".stop")
    stop_file.unlink(missing_ok=True)
    log = PartitionLog.open(path, _kafka_config())
    t0 = time.monotonic()
    sampler = _Sampler(res, path, t0)
    readers = _spawn_readers("kafka", path, procs, stop_file)
    sampler.pids = [p.pid for p in readers]
    sampler.start()
    turn = threading.Lock()  # PartitionLog is not thread-safe: writer and reader threads take turns
    done = threading.Event()
    merge = threading.Lock()
    written = [0]

    def reader(k: int) -> None:
        nxt = reads = partial = viol = 0
        errors: list[str] = []
        try:
            while True:
                finished = done.is_set()
                with turn:
                    end = log.log_end_offset
                    recs = list(log.iter_records(nxt, min(end, nxt + 200))) if nxt < end else []
                for r in recs:
                    if r.offset != nxt:
                        viol += 1
                        errors.append(f"thread {k}: offset {r.offset} after {nxt - 1}")
                    if not check_body(0, r.offset, r.value):
                        partial += 1
                    nxt = r.offset + 1
                    reads += 1
                progress[k] = nxt
                if finished and not recs and nxt >= written[0]:
                    break
                if not recs:
                    time.sleep(0.001)
        except CorruptDataError as exc:
            partial += 1
            errors.append(f"thread {k}: {exc}")
        except MqStoreError as exc:
            errors.append(f"thread {k}: {type(exc).__name__}: {exc}")
        with merge:
            res.reads += reads
            res.partial_records += partial
            res.offset_violations += viol
            res.errors.extend(errors[:5])

    ths = [threading.Thread(target=reader, args=(k,)) for k in range(threads)]
    for t in ths:
        t.start()
    stop = threading.Event()
    i = 0
    try:
        while not _stopping(stop, seconds, messages, t0, i):
            n = 1 + i % 8
            recs = [SimpleRecord(body_of(0, j), b"k%d" % j, timestamp=1_700_000_000_000 + j) for j in range(i, i + n)]
            with turn:
                info = log.append_records(recs, compression=(0, 0, 1, 3)[i % 4])
            if info.first_offset != i:
                res.offset_violations += 1
                res.errors.append(f"writer: batch got offset {info.first_offset}, expected {i}")
            i += n
            written[0] = i
            if i % 32 < n:
                _hold_back(res, i, progress, max_lead, None if seconds is None else t0 + seconds)
    finally:
        res.messages_written = i
        done.set()
        for t in ths:
            t.join()
        with turn:
            log.flush()
        stop_file.write_text(json.dumps({"0": i}))
        _collect_readers(res, readers, {0: i})
        res.seconds = round(time.monotonic() - t0, 1)
        log.close()
        res.data_bytes = sum(f.stat().st_size for f in path.glob("*.log"))
        sampler.stop.set()
        sampler.join()
    res.store_bytes = sampler.series[-1][4] if sampler.series else dir_size(path)
    res.rss_series = _thin(sampler.series)
    return res


def _reader_kafka(path: Path, stop_file: Path) -> dict[str, Any]:
    from mqstore.errors import CorruptDataError, MqStoreError
    from mqstore.kafka import PartitionLog

    nxt = 0
    rep: dict[str, Any] = {"reads": 0, "rounds": 0, "partial": 0, "violations": 0, "errors": []}
    final: dict[str, int] | None = None
    while True:
        if final is None and stop_file.exists():
            final = json.loads(stop_file.read_text())
        rep["rounds"] += 1
        before = nxt
        try:
            with PartitionLog.open(path, _kafka_config(), read_only=True) as log:
                end = log.log_end_offset
                while nxt < end:
                    got = 0
                    for r in log.iter_records(nxt, min(end, nxt + 1000)):
                        if r.offset != nxt:
                            rep["violations"] += 1
                            rep["errors"].append(f"offset {r.offset} after {nxt - 1}")
                        if not check_body(0, r.offset, r.value):
                            rep["partial"] += 1
                        nxt = r.offset + 1
                        rep["reads"] += 1
                        got += 1
                    if not got:
                        break
        except CorruptDataError as exc:
            rep["partial"] += 1
            rep["errors"].append(str(exc))
        except MqStoreError as exc:
            rep["errors"].append(f"{type(exc).__name__}: {exc}")
            if len(rep["errors"]) > 20:
                break
        if final is not None and nxt >= final["0"]:
            break
        if nxt == before:
            time.sleep(0.05)  # nothing new: do not spin on reopening
        if final is not None and rep["rounds"] > 10_000:
            break
    rep["seen"] = {"0": nxt}
    return rep


# ============================================================================ main
def summary(r: LoadResult) -> str:
    lines = [
        f"{r.layout:8} {r.seconds:.0f} s: written={r.messages_written} ({r.messages_written / max(r.seconds, 1e-9):.0f}/s) "
        f"reads={r.reads} key_queries={r.key_queries} reader_reopens={r.reader_rounds} "
        f"partial={r.partial_records} offset_violations={r.offset_violations} key_misses={r.key_misses} "
        f"errors={len(r.errors)}; writer held back {r.backpressure_seconds:.1f} s (max lead {r.max_lead})",
        f"         dispatcher lag: max {r.lag_bytes_max} B / p99 {r.lag_bytes_p99:.0f} B; max {r.lag_ms_max} ms / "
        f"p99 {r.lag_ms_p99} ms ({r.lag_samples} samples)" if r.layout == "rocketmq" else
        "         dispatcher lag: n/a (Kafka indexes are written by append itself)",
        f"         store {r.store_bytes / 2**20:.1f} MiB on disk, {r.data_bytes / 2**20:.1f} MiB of data; writer RSS peak anon {r.writer_rss_anon_peak_kib / 1024:.0f} MiB "
        f"+ file {r.writer_rss_file_peak_kib / 1024:.0f} MiB; reader process RSS peak anon "
        f"{r.reader_rss_anon_peak_kib / 1024:.0f} MiB + file {r.reader_rss_file_peak_kib / 1024:.0f} MiB",
        "         over time (s, writer anon MiB, writer file MiB, reader anon MiB, store MiB): "
        + " ".join(f"({t:.0f},{wa / 1024:.0f},{wf / 1024:.0f},{ra / 1024:.0f},{s / 2**20:.0f})"
                   for t, wa, wf, ra, s in r.rss_series),
    ]
    lines += [f"         ERROR: {e}" for e in r.errors[:10]]
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--minutes", type=float, default=3.0, help="run time per layout")
    ap.add_argument("--messages", type=int, default=None, help="stop after this many messages instead")
    ap.add_argument("--layouts", default="rocketmq,kafka")
    ap.add_argument("--threads", type=int, default=3, help="reader threads in the writer's process")
    ap.add_argument("--procs", type=int, default=2, help="read-only reader processes")
    ap.add_argument("--max-lead", type=int, default=50_000,
                    help="the writer waits when this many messages ahead of the slowest reader thread")
    ap.add_argument("--workdir", type=Path, default=None)
    ap.add_argument("--json", action="store_true")
    ap.add_argument("--reader", nargs=3, metavar=("LAYOUT", "PATH", "STOP_FILE"), help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    if args.reader:
        layout, path, stop = args.reader
        fn = _reader_rocketmq if layout == "rocketmq" else _reader_kafka
        print(json.dumps(fn(Path(path), Path(stop))))
        return 0
    ok = True
    with tempfile.TemporaryDirectory(prefix="mqstore-load-") as tmp:
        work = args.workdir or Path(tmp)
        work.mkdir(parents=True, exist_ok=True)
        seconds = None if args.messages else args.minutes * 60
        for layout in args.layouts.split(","):
            run = run_rocketmq if layout == "rocketmq" else run_kafka
            target = work / ("store" if layout == "rocketmq" else "load-0")
            r = run(target, seconds=seconds, messages=args.messages, threads=args.threads, procs=args.procs,
                    max_lead=args.max_lead)
            ok &= r.ok()
            print(json.dumps(r.as_dict()) if args.json else summary(r), flush=True)
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
