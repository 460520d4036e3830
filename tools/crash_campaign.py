"""Crash campaign: SIGKILL a writer at random points and check what survives.

A fork server: this process imports mqstore and warms the numba caches once, then ``fork()``s one
child per kill.  The child appends to a RocketMQ-layout store or a Kafka-layout partition (tiny
segments, tiny index geometry, retention now and then, so that rolls, dispatch and retention
happen all the time) and reports every acknowledged message through a pipe (one ``write`` per
line, atomic).  The child announces the phase it is in (put, dispatch, segment roll, index roll,
flush, retention...) in a byte of shared memory.  Two ways to die:

* ``random``: the parent SIGKILLs the child after a random number of acknowledgements plus a
  random delay, and records the phase the child was in;
* ``targeted``: the child traces (``sys.settrace``) its own k-th entry into a chosen phase and
  SIGKILLs itself after a random number of Python line events inside it, i.e. in the middle of a
  roll, a dispatch or a retention pass.

After each kill the parent copies the store and opens the copy as the next writer would
(recovery, background services on), so that checking never repairs the store: the next child
recovers the crashed store itself, as an application does.  Right after ``open`` (no explicit
dispatch) every acknowledged RocketMQ message that retention has not removed must be at its
acknowledged queue offset (``get``); then: every acknowledged message is readable byte-identical;
every record in the store is a whole, known message (nothing torn); no two CommitLog records share
a (topic, queue, queue offset) (a scan of the whole CommitLog); queries by key / time (RocketMQ)
and by offset / time (Kafka) find a sample of the acknowledged messages; ``verify`` is clean.

Usage::

    python tools/crash_campaign.py --kills 5000 [--seed 1] [--layouts rocketmq,kafka] [--json]

The same code runs bounded in CI (``tests/faults/test_crash_campaign.py``).
"""

from __future__ import annotations

import argparse
import json
import mmap
import os
import random
import select
import shutil
import signal
import sys
import tempfile
import time
from collections import Counter
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

# Phases announced by the child through shared memory.
PHASES = ["idle", "put", "dispatch", "segment_roll", "index_roll", "flush", "retention", "recovery",
          "append", "roll"]
ROCKETMQ_POLICIES = ("sync", "async")
KAFKA_POLICIES = ("every-message", "periodic")
ROCKETMQ_TARGETS = ("dispatch", "segment_roll", "index_roll", "retention", "put", "flush", "recovery")
KAFKA_TARGETS = ("append", "roll", "flush", "retention", "recovery")
T0 = 1_700_000_000_000
# A child that acknowledges nothing for this long is taken for hung (killed, reported as a failure).
# Generous: on a starved machine a RocketMQ child's recovery plus first put took over a minute once.
WATCHDOG_S = float(os.environ.get("MQSTORE_CRASH_WATCHDOG_S", "180"))
MAX_CHILD_MESSAGES = 250  # a child that never reaches its target phase kills itself after this many


def body_of(i: int) -> bytes:
    return (f"msg-{i}-".encode() * (1 + i % 11))[: 16 + (i * 37) % 300]


def index_of_body(body: bytes) -> int:
    return int(body.split(b"-", 2)[1])


# ============================================================================ results
@dataclass
class CampaignResult:
    layout: str
    policy: str
    kills: int = 0
    targeted_kills: int = 0
    messages_acked: int = 0
    messages_verified: int = 0  # acknowledged messages found intact after the kill that followed them
    rechecks: int = 0  # acknowledged-message checks over all rounds (each survivor is re-checked every round)
    retained_out: int = 0  # acknowledged, then legitimately deleted by retention
    unacked_survivors: int = 0  # written but killed before the acknowledgement: whole, kept
    torn_records: int = 0
    lost: int = 0
    queue_offset_misses: int = 0  # acknowledged messages not at their queue offset right after open
    duplicate_queue_offsets: int = 0  # (topic, queue, queue offset) triples carried by several records
    verify_problems: int = 0
    query_misses: int = 0
    recoveries_truncated: int = 0
    phases: Counter[str] = field(default_factory=Counter)
    failures: list[str] = field(default_factory=list)

    def ok(self) -> bool:
        return not (self.lost or self.torn_records or self.verify_problems or self.query_misses
                    or self.queue_offset_misses or self.duplicate_queue_offsets or self.failures)

    def as_dict(self) -> dict[str, Any]:
        d = asdict(self)
        d["phases"] = dict(sorted(self.phases.items()))
        d["failures"] = self.failures[:20]
        return d


# ============================================================================ child side
class _Phases:
    """Phase announcements in shared memory plus the optional self-kill inside a phase."""

    def __init__(self, shm: mmap.mmap, target: str | None, occurrence: int, lines: int) -> None:
        self.shm = shm
        self.target = target
        self.occurrence = occurrence
        self.lines = lines
        self.seen = 0

    def wrap(self, owner: Any, name: str, phase: str, when: Callable[..., bool] | None = None) -> None:
        fn = getattr(owner, name)
        code = PHASES.index(phase)
        me = self

        def wrapper(*args: Any, **kwargs: Any) -> Any:
            if when is not None and not when(*args, **kwargs):
                return fn(*args, **kwargs)
            prev = me.shm[0]
            me.shm[0] = code
            try:
                if phase == me.target:
                    me.seen += 1
                    if me.seen == me.occurrence:
                        return me._traced(fn, args, kwargs)
                return fn(*args, **kwargs)
            finally:
                me.shm[0] = prev

        setattr(owner, name, wrapper)

    def _traced(self, fn: Callable[..., Any], args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
        left = [self.lines]

        def local(frame: Any, event: str, arg: Any) -> Any:
            if event == "line":
                left[0] -= 1
                if left[0] <= 0:
                    os.kill(os.getpid(), signal.SIGKILL)
            return local

        def glob(frame: Any, event: str, arg: Any) -> Any:
            return local

        sys.settrace(glob)
        try:
            result = fn(*args, **kwargs)
        finally:
            sys.settrace(None)
        os.kill(os.getpid(), signal.SIGKILL)  # the phase ended before the chosen line: die right after it
        return result


def _rocketmq_config(policy: str) -> Any:
    from mqstore import StoreConfig

    return StoreConfig(commit_log_file_size=8192, consume_queue_file_size=200, hash_slot_num=16, index_num=24,
                       flush_disk_type=policy, flush_interval_commit_log_ms=2, flush_interval_consume_queue_ms=3,
                       flush_commit_log_least_pages=0, delete_file_batch_max=1, file_reserved_time_hours=1,
                       background_services=True)


def _kafka_config(policy: str) -> Any:
    from mqstore.kafka import LogConfig

    if policy == "every-message":
        return LogConfig(segment_bytes=6000, max_index_size=48, index_interval_bytes=200, retention_bytes=24_000,
                         retention_ms=-1, flush_interval_messages=1)
    return LogConfig(segment_bytes=6000, max_index_size=48, index_interval_bytes=200, retention_bytes=24_000,
                     retention_ms=-1, flush_interval_ms=3)


def _child_rocketmq(path: Path, policy: str, start: int, out: int, phases: _Phases, rng: random.Random) -> None:
    from mqstore import MessageStore
    from mqstore.storage.mapped import MappedFile
    from mqstore.storage.rocketmq.index import IndexService
    from mqstore.storage.rocketmq.store import RocketMQStore

    phases.wrap(RocketMQStore, "append", "put")
    phases.wrap(RocketMQStore, "_dispatch_range", "dispatch")
    phases.wrap(RocketMQStore, "flush_commit_log", "flush")
    phases.wrap(RocketMQStore, "delete_expired", "retention")
    phases.wrap(RocketMQStore, "_load_and_recover", "recovery")
    phases.wrap(IndexService, "_new_file", "index_roll")
    phases.wrap(MappedFile, "__init__", "segment_roll", when=lambda *a, **k: bool(k.get("create")))
    store = MessageStore.open(path, _rocketmq_config(policy))
    i = start
    while i < start + MAX_CHILD_MESSAGES:
        n = 1 if rng.random() < 0.7 else rng.randint(2, 4)
        msgs = [dict(topic=f"T{j % 3}", body=body_of(j), queue_id=j % 2, keys=[f"key-{j}", "shared"])
                for j in range(i, i + n)]
        rs = store.put_batch(msgs)
        lines = "".join(f"{j} {r.commit_log_offset} {r.queue_offset} {r.store_timestamp}\n"
                        for j, r in zip(range(i, i + n), rs, strict=True))
        os.write(out, lines.encode())
        i += n
        if rng.random() < 0.04:
            store.engine.delete_expired(force=True, now_ms=store.config.now() + 10 * 3600_000)
        if rng.random() < 0.03:
            store.flush()
    os.kill(os.getpid(), signal.SIGKILL)


def _child_kafka(path: Path, policy: str, start: int, out: int, phases: _Phases, rng: random.Random) -> None:
    from mqstore.kafka import PartitionLog, SimpleRecord

    phases.wrap(PartitionLog, "append", "append")
    phases.wrap(PartitionLog, "roll", "roll")
    phases.wrap(PartitionLog, "flush", "flush")
    phases.wrap(PartitionLog, "delete_old_segments", "retention")
    phases.wrap(PartitionLog, "_load", "recovery")
    log = PartitionLog.open(path, _kafka_config(policy))
    i = start
    while i < start + MAX_CHILD_MESSAGES:
        n = 1 if rng.random() < 0.6 else rng.randint(2, 5)
        recs = [SimpleRecord(value=body_of(j), key=b"k%d" % j, timestamp=T0 + j) for j in range(i, i + n)]
        info = log.append_records(recs, compression=rng.choice((0, 0, 1, 3)))
        lines = "".join(f"{j} {info.first_offset + k} 0 {T0 + j}\n" for k, j in enumerate(range(i, i + n)))
        os.write(out, lines.encode())
        i += n
        if rng.random() < 0.05:
            log.delete_old_segments()
    os.kill(os.getpid(), signal.SIGKILL)


def _child_main(layout: str, path: Path, policy: str, start: int, out: int, shm: mmap.mmap, seed: int,
                target: str | None, occurrence: int, lines: int) -> None:
    try:
        rng = random.Random(seed)
        phases = _Phases(shm, target, occurrence, lines)
        if layout == "rocketmq":
            _child_rocketmq(path, policy, start, out, phases, rng)
        else:
            _child_kafka(path, policy, start, out, phases, rng)
    except BaseException as exc:  # reported to the parent, which fails the campaign
        try:
            os.write(out, f"ERR {type(exc).__name__}: {exc}\n".encode()[:4000])
        finally:
            os._exit(3)
    os._exit(0)


# ============================================================================ parent side
@dataclass
class Ack:
    offset: int  # commit log offset (RocketMQ) or log offset (Kafka)
    queue_offset: int
    timestamp: int


def _run_one(layout: str, path: Path, policy: str, start: int, rng: random.Random, shm: mmap.mmap,
             targeted: str | None) -> tuple[dict[int, Ack], str, list[str]]:
    r, w = os.pipe()
    occurrence = rng.randint(1, 3)
    lines = rng.randint(1, 120)
    shm[0] = 0
    seed = rng.randrange(2**32)
    pid = os.fork()
    if pid == 0:  # child
        os.close(r)
        _child_main(layout, path, policy, start, w, shm, seed, targeted, occurrence, lines)
    os.close(w)
    acks: dict[int, Ack] = {}
    errors: list[str] = []
    want = rng.randint(1, 150) if targeted is None else None
    buf = b""
    phase = "?"
    killed = False
    try:
        while True:
            if want is not None and not killed and len(acks) >= want:
                if rng.random() < 0.7:
                    time.sleep(rng.random() * 0.004)
                phase = PHASES[shm[0]] if shm[0] < len(PHASES) else "?"
                os.kill(pid, signal.SIGKILL)
                killed = True
            ready, _, _ = select.select([r], [], [], WATCHDOG_S)
            if not ready:
                os.kill(pid, signal.SIGKILL)
                errors.append(f"child made no progress for {WATCHDOG_S:g} s (hang?)")
                break
            chunk = os.read(r, 65536)
            if not chunk:
                break
            buf += chunk
            *done, buf = buf.split(b"\n")
            for line in done:
                if line.startswith(b"ERR"):
                    errors.append(line.decode(errors="replace"))
                    continue
                i, off, qo, ts = (int(x) for x in line.split())
                acks[i] = Ack(off, qo, ts)
    finally:
        os.close(r)
        _, status = os.waitpid(pid, 0)
    if targeted is not None:
        phase = targeted
    if not (os.WIFSIGNALED(status) and os.WTERMSIG(status) == signal.SIGKILL) and not errors:
        errors.append(f"child ended with status {status}, not SIGKILL")
    return acks, phase, errors


def _account(acked: dict[int, Ack], fresh: set[int], seen: dict[int, int], lowest: int,
             res: CampaignResult) -> None:
    """Compare the acknowledgements with what the store holds (``seen``: message → offset);
    messages below ``lowest`` were removed by retention.  Drops lost and retained ones from
    ``acked``."""
    for i, a in list(acked.items()):
        if a.offset < lowest:
            res.retained_out += 1
            del acked[i]
            continue
        if seen.get(i) != a.offset:
            res.lost += 1
            res.failures.append(f"acknowledged message {i} at offset {a.offset} is missing")
            del acked[i]
            continue
        res.rechecks += 1
        res.messages_verified += i in fresh
    res.unacked_survivors += len(set(seen) - set(acked))


def _check_rocketmq(path: Path, policy: str, acked: dict[int, Ack], fresh: set[int], res: CampaignResult,
                    rng: random.Random, phase: str = "put") -> None:
    from mqstore import MessageStore, StoreConfig
    from mqstore.storage.rocketmq.queue_table import queue_offset_duplicates
    from mqstore.storage.rocketmq.verify import verify_store

    cfg = _rocketmq_config(policy)  # as the next writer opens it: background services on
    with MessageStore.open(path, cfg) as s:
        cl = s.engine.commit_log
        min_off = cl.min_offset
        # right after open, no explicit dispatch: every acknowledged message at its queue offset
        for i, a in sorted(acked.items()):
            if a.offset < min_off:
                continue  # removed by retention (counted below)
            topic, qid = f"T{i % 3}", i % 2
            try:
                got = s.get(topic, qid, a.queue_offset, 1)
            except Exception as exc:  # an OffsetOutOfRangeError is a miss like any other
                got = []
                res.failures.append(f"get({topic},{qid},{a.queue_offset}) of message {i}: {type(exc).__name__}: {exc}")
            if not got or got[0].commit_log_offset != a.offset:
                res.queue_offset_misses += 1
                res.failures.append(f"get({topic},{qid},{a.queue_offset}) right after open misses message {i} "
                                    f"(at {a.offset}; got {got[0].commit_log_offset if got else None})")
        if s.recovery.clean_shutdown and phase != "recovery":  # a kill before the marker changed is clean
            res.failures.append("store claims a clean shutdown after SIGKILL")
        if s.recovery.truncated_bytes:
            res.recoveries_truncated += 1
        # every record in the store is a whole known message
        seen: dict[int, int] = {}
        for batch in cl.scan(min_off, cl.max_offset, check_crc=True):
            for off in batch.commit_log_offset.tolist():
                m = s.get_by_offset(off)
                i = index_of_body(m.body)
                if m.body != body_of(i) or m.keys != [f"key-{i}", "shared"] or m.topic != f"T{i % 3}":
                    res.torn_records += 1
                    res.failures.append(f"record at {off} is not a whole message")
                seen[i] = off
        # no queue offset carried by two records, over the whole CommitLog
        for d in queue_offset_duplicates(cl.scan(min_off, cl.max_offset)):
            res.duplicate_queue_offsets += 1
            res.failures.append(f"queue offset {d.queue_offset} of {d.topic}/{d.queue_id} is carried by the records "
                                f"at {list(d.commit_log_offsets)}")
        _account(acked, fresh, seen, min_off, res)
        # queries: by key and time, on a sample of the acknowledged messages
        for i in rng.sample(sorted(acked), min(12, len(acked))):
            a = acked[i]
            topic, qid = f"T{i % 3}", i % 2
            hits = [m.commit_log_offset for m in s.query_by_key(topic, f"key-{i}")]
            if hits != [a.offset]:
                res.query_misses += 1
                res.failures.append(f"query_by_key key-{i} gave {hits}, expected [{a.offset}]")
            qo = s.offset_for_time(topic, qid, a.timestamp, "lower")
            if qo > a.queue_offset or not (m := s.get(topic, qid, qo, 1)) or m[0].store_timestamp != a.timestamp:
                res.query_misses += 1
                res.failures.append(f"offset_for_time({a.timestamp}) of message {i} gave queue offset {qo}")
    rep = verify_store(path, StoreConfig(commit_log_file_size=cfg.commit_log_file_size,
                                         consume_queue_file_size=cfg.consume_queue_file_size,
                                         hash_slot_num=cfg.hash_slot_num, index_num=cfg.index_num,
                                         background_services=False))
    if not rep.ok:
        res.verify_problems += len(rep.problems)
        res.failures.extend(rep.problems[:5])


def _check_kafka(path: Path, policy: str, acked: dict[int, Ack], fresh: set[int], res: CampaignResult,
                 rng: random.Random, phase: str = "append") -> None:
    from mqstore.kafka import PartitionLog, verify_path

    log = PartitionLog.open(path, _kafka_config(policy))
    try:
        if log.had_clean_shutdown and phase != "recovery":  # a kill before the marker changed is clean
            res.failures.append("log claims a clean shutdown after SIGKILL")
        start = log.log_start_offset
        seen: dict[int, int] = {}
        for rec in log.iter_records():
            i = int(rec.key[1:]) if rec.key else -1
            if rec.value != body_of(i) or rec.timestamp != T0 + i:
                res.torn_records += 1
                res.failures.append(f"record at offset {rec.offset} is not a whole message")
            seen[i] = rec.offset
        _account(acked, fresh, seen, start, res)
        for i in rng.sample(sorted(acked), min(12, len(acked))):
            a = acked[i]
            t = log.offset_for_timestamp(a.timestamp)
            if t is None or t.offset != a.offset:
                res.query_misses += 1
                res.failures.append(f"offset_for_timestamp({a.timestamp}) gave {t}, expected offset {a.offset}")
            lk = log.lookup_offset(a.offset)
            if lk is None or not (lk.offset >= a.offset):
                res.query_misses += 1
                res.failures.append(f"lookup_offset({a.offset}) gave {lk}")
    finally:
        log.close()
    rep = verify_path(path)
    if not rep.ok:
        res.verify_problems += len(rep.problems)
        res.failures.extend(str(p) for p in rep.problems[:5])


def warm_up(workdir: Path) -> None:
    """Compile the numba kernels once in this process, before any fork."""
    from mqstore import MessageStore
    from mqstore.kafka import PartitionLog, SimpleRecord, verify_path
    from mqstore.storage.rocketmq.verify import verify_store

    cfg = _rocketmq_config("sync")
    cfg.background_services = False
    d = workdir / "warm-rmq"
    with MessageStore.open(d, cfg) as s:
        for i in range(60):
            s.put("T0", body_of(i), keys=[f"key-{i}"])
        s.query_by_key("T0", "key-1")
        s.offset_for_time("T0", 0, T0)
    verify_store(d, cfg)
    k = workdir / "warm-kafka"
    with PartitionLog.open(k, _kafka_config("periodic")) as log:
        for i in range(60):
            log.append_records([SimpleRecord(body_of(i), b"k%d" % i, timestamp=T0 + i)])
        log.offset_for_timestamp(T0 + 5)
    verify_path(k)


class _StopFlag:
    """Set by SIGTERM/SIGINT in the parent: campaigns end after their current round."""

    def __init__(self) -> None:
        self._set = False

    def set(self, *_: object) -> None:
        self._set = True

    def is_set(self) -> bool:
        return self._set


_STOP = _StopFlag()


def run_campaign(layout: str, policy: str, kills: int, *, seed: int, workdir: Path,
                 targeted_share: float = 0.5, progress: Callable[[CampaignResult], None] | None = None,
                 max_failures: int = 20) -> CampaignResult:
    """Run ``kills`` kill/recover/check rounds on one store (fresh directory under ``workdir``)."""
    rng = random.Random(seed)
    res = CampaignResult(layout, policy)
    path = workdir / f"{layout}-{policy}"
    check = workdir / f"{layout}-{policy}-check"
    shutil.rmtree(path, ignore_errors=True)  # message numbers and timestamps restart with each campaign
    targets = ROCKETMQ_TARGETS if layout == "rocketmq" else KAFKA_TARGETS
    shm = mmap.mmap(-1, 64)
    acked: dict[int, Ack] = {}
    kept = False
    try:
        for round_no in range(kills):
            if _STOP.is_set():  # SIGTERM/SIGINT: end after the last whole round, report what ran
                break
            targeted = rng.choice(targets) if rng.random() < targeted_share else None
            start = round_no * 1_000_000
            acks, phase, errors = _run_one(layout, path, policy, start, rng, shm, targeted)
            res.kills += 1
            res.targeted_kills += targeted is not None
            res.phases[phase] += 1
            res.messages_acked += len(acks)
            res.failures.extend(errors)
            acked.update(acks)
            # check a copy: the crashed store itself stays as the kill left it for the next child
            shutil.rmtree(check, ignore_errors=True)
            if path.exists():
                shutil.copytree(path, check)
            failures_before = len(res.failures)
            broken = False
            try:
                if layout == "rocketmq":
                    _check_rocketmq(check, policy, acked, set(acks), res, rng, phase)
                else:
                    _check_kafka(check, policy, acked, set(acks), res, rng, phase)
            except Exception as exc:  # the store cannot be reopened or queried: a failure, keep the files
                res.failures.append(f"round {round_no}: reopen/check failed: {type(exc).__name__}: {exc}")
                broken = True
            if len(res.failures) > failures_before and not kept:  # the crashed store as it was before the check
                keep = workdir / f"failed-{layout}-{policy}-{round_no}"
                shutil.copytree(path, keep, dirs_exist_ok=True)
                res.failures.append(f"store kept at {keep}")
                kept = True
            if broken:
                break
            if progress is not None:
                progress(res)
            if len(res.failures) >= max_failures:
                break
    finally:
        shm.close()
        shutil.rmtree(check, ignore_errors=True)
    return res


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--kills", type=int, default=5000, help="total kills, spread over layouts and policies")
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--layouts", default="rocketmq,kafka")
    ap.add_argument("--workdir", type=Path, default=None, help="keep the stores here (default: a temp dir)")
    ap.add_argument("--json", action="store_true", help="print one JSON object per campaign")
    ap.add_argument("--policies", default=None,
                    help="only these flush policies (comma-separated, e.g. async or sync,every-message)")
    ap.add_argument("--max-failures", type=int, default=20,
                    help="end a campaign after this many failure lines (it goes on counting until then)")
    args = ap.parse_args(argv)
    combos = [(lay, pol) for lay in args.layouts.split(",")
              for pol in (ROCKETMQ_POLICIES if lay == "rocketmq" else KAFKA_POLICIES)
              if args.policies is None or pol in args.policies.split(",")]
    if not combos:
        ap.error("no campaign left after --layouts/--policies")
    # SIGTERM or Ctrl-C: finish the current round, print the counts of what ran (the children
    # reset the handlers: the parent kills them with SIGKILL anyway).
    signal.signal(signal.SIGTERM, _STOP.set)
    signal.signal(signal.SIGINT, _STOP.set)
    per = max(1, args.kills // len(combos))
    with tempfile.TemporaryDirectory(prefix="mqstore-crash-") as tmp:
        work = args.workdir or Path(tmp)
        work.mkdir(parents=True, exist_ok=True)
        warm_up(work)
        total = CampaignResult("all", "all")
        ok = True
        t0 = time.monotonic()
        for k, (lay, pol) in enumerate(combos):
            if _STOP.is_set():
                break
            def show(r: CampaignResult) -> None:
                if r.kills % 100 == 0 and not args.json:
                    print(f"  {r.layout}/{r.policy}: {r.kills} kills, {r.messages_acked} acked, "
                          f"{r.messages_verified} verified, lost {r.lost}", file=sys.stderr, flush=True)

            r = run_campaign(lay, pol, per, seed=args.seed * 100 + k, workdir=work, progress=show,
                             max_failures=args.max_failures)
            ok &= r.ok()
            for name in ("kills", "targeted_kills", "messages_acked", "messages_verified", "rechecks", "retained_out",
                         "unacked_survivors", "torn_records", "lost", "queue_offset_misses", "duplicate_queue_offsets",
                         "verify_problems", "query_misses", "recoveries_truncated"):
                setattr(total, name, getattr(total, name) + getattr(r, name))
            total.phases.update(r.phases)
            total.failures.extend(r.failures)
            if args.json:
                print(json.dumps(r.as_dict()))
            else:
                print(f"{lay:8} {pol:13} kills={r.kills} (targeted {r.targeted_kills}) acked={r.messages_acked} "
                      f"verified={r.messages_verified} retained_out={r.retained_out} "
                      f"unacked_survivors={r.unacked_survivors} torn={r.torn_records} lost={r.lost} "
                      f"queue_offset_misses={r.queue_offset_misses} duplicates={r.duplicate_queue_offsets} "
                      f"verify_problems={r.verify_problems} query_misses={r.query_misses} "
                      f"truncating_recoveries={r.recoveries_truncated}")
                print(f"         phases at kill: {dict(sorted(r.phases.items()))}")
                for f in r.failures[:10]:
                    print(f"         FAILURE: {f}")
        elapsed = time.monotonic() - t0
        if not args.json:
            print(f"TOTAL kills={total.kills} acked={total.messages_acked} verified={total.messages_verified} "
                  f"lost={total.lost} torn={total.torn_records} queue_offset_misses={total.queue_offset_misses} "
                  f"duplicates={total.duplicate_queue_offsets} verify_problems={total.verify_problems} "
                  f"query_misses={total.query_misses} failures={len(total.failures)} in {elapsed:.0f} s ({'OK' if ok else 'FAILED'})"
                  + (" (stopped early by a signal)" if _STOP.is_set() else ""))
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
