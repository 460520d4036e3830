"""Torn and corrupt files: inject one fault per case into a copy of a reference store, then
``verify`` it (read-only), open it (recovery) and query every message.

Fault kinds, per file kind (RocketMQ: CommitLog, ConsumeQueue, IndexFile, checkpoint; Kafka:
.log, .index, .timeindex, recovery checkpoint): zeroed tails at every byte position of the last
record/batch (a torn write), truncation of the last batch at every byte position (Kafka), random
bit flips in the bytes that carry data, preallocated-but-empty index files, files of the wrong
length, missing files and stray files.

Each case is classified:

* ``detected``: ``verify`` reported a problem or raised a typed error;
* ``open``: ``ok`` (recovery accepted or repaired it) or ``typed`` (a typed error naming the file);
* ``repaired``: after the open, ``verify`` is clean;
* ``wrong``: a query returned a message that is not the one stored there (must be 0);
* ``untyped``: any exception that is not an ``mqstore.errors`` subclass (must be 0).

Usage::

    python tools/corruption_campaign.py [--flips 200] [--seed 1] [--json]
"""

from __future__ import annotations

import argparse
import json
import os
import random
import shutil
import sys
import tempfile
import traceback
from collections import defaultdict
from collections.abc import Callable, Iterator
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from mqstore.errors import MqStoreError

T0 = 1_700_000_000_000


@dataclass
class Tally:
    injected: int = 0
    detected: int = 0
    open_typed: int = 0
    repaired: int = 0
    wrong: int = 0
    untyped: int = 0
    examples: list[str] = field(default_factory=list)

    def add(self, o: Outcome, label: str) -> None:
        self.injected += 1
        self.detected += o.detected
        self.open_typed += o.open_typed
        self.repaired += o.repaired
        self.wrong += o.wrong
        self.untyped += bool(o.untyped)
        if (o.wrong or o.untyped) and len(self.examples) < 5:
            self.examples.append(f"{label}: wrong={o.wrong} {o.untyped}")


@dataclass
class Outcome:
    detected: bool = False
    open_typed: bool = False
    repaired: bool = False
    wrong: int = 0
    untyped: str = ""


# ============================================================================ RocketMQ
def rocketmq_config() -> Any:
    from mqstore import StoreConfig

    return StoreConfig(commit_log_file_size=8192, consume_queue_file_size=200, hash_slot_num=16, index_num=40,
                       background_services=False)


@dataclass
class RmqRef:
    by_offset: dict[int, tuple[str, int, int, bytes, str]]  # offset → topic, queue, queue offset, body, key


def build_rocketmq(path: Path) -> RmqRef:
    from mqstore import MessageStore

    ref: dict[int, tuple[str, int, int, bytes, str]] = {}
    clock = [T0]

    def now() -> int:
        clock[0] += 250
        return clock[0]

    cfg = rocketmq_config()
    cfg.clock = now
    with MessageStore.open(path, cfg) as s:
        for i in range(70):
            topic, q, key = f"T{i % 2}", i % 2, f"key-{i}"
            body = (b"body-%d-" % i) * (1 + i % 7)
            if i == 69:
                body = b"last"  # a small last record: few torn cases
            r = s.put(topic, body, q, keys=[key])
            ref[r.commit_log_offset] = (topic, q, r.queue_offset, body, key)
    return RmqRef(ref)


def _rmq_files(root: Path) -> dict[str, list[Path]]:
    return {
        "commitlog": sorted((root / "commitlog").iterdir()),
        "consumequeue": sorted(p for p in (root / "consumequeue").rglob("*") if p.is_file()),
        "index": sorted((root / "index").iterdir()),
        "checkpoint": [root / "checkpoint"],
    }


def check_rocketmq(root: Path, ref: RmqRef, rng: random.Random) -> Outcome:
    from mqstore import MessageStore
    from mqstore.storage.rocketmq.verify import verify_store

    o = Outcome()
    cfg = rocketmq_config()
    try:
        o.detected = not verify_store(root, cfg).ok
    except MqStoreError:
        o.detected = True
    except Exception as exc:
        o.untyped = f"verify: {type(exc).__name__}: {exc}"
        return o
    try:
        s = MessageStore.open(root, cfg)
    except MqStoreError:
        o.open_typed = True
        return o
    except Exception as exc:
        o.untyped = f"open: {type(exc).__name__}: {exc}"
        return o
    try:
        for off, (topic, q, qo, _body, key) in ref.by_offset.items():
            for fn in (lambda: [s.get_by_offset(off)], lambda: s.get(topic, q, qo, 1),  # noqa: B023
                       lambda: s.query_by_key(topic, key)):  # noqa: B023
                try:
                    got = fn()
                except MqStoreError:
                    continue
                for m in got:
                    exp = ref.by_offset.get(m.commit_log_offset)
                    if exp is None or exp[3] != m.body or exp[2] != m.queue_offset or exp[0] != m.topic:
                        o.wrong += 1
        for topic, q in (("T0", 0), ("T1", 1)):
            try:
                msgs = s.get(topic, q, s.min_offset(topic, q), 1000)
            except MqStoreError:
                continue
            for m in msgs:
                exp = ref.by_offset.get(m.commit_log_offset)
                if exp is None or exp[3] != m.body:
                    o.wrong += 1
    except Exception as exc:
        o.untyped = f"query: {type(exc).__name__}: {exc} at {_where(exc)}"
    finally:
        try:
            s.close()
        except MqStoreError:
            pass
    try:
        o.repaired = verify_store(root, cfg).ok
    except MqStoreError:
        pass
    except Exception as exc:
        o.untyped = o.untyped or f"verify after open: {type(exc).__name__}: {exc}"
    return o


def _where(exc: BaseException) -> str:
    tb = traceback.extract_tb(exc.__traceback__)
    return "; ".join(f"{Path(f.filename).name}:{f.lineno}" for f in tb[-3:])


def _flip(path: Path, pos: int, bit: int) -> None:
    with open(path, "r+b") as f:
        f.seek(pos)
        b = f.read(1)[0]
        f.seek(pos)
        f.write(bytes([b ^ (1 << bit)]))


def _zero_from(path: Path, pos: int, end: int) -> None:
    with open(path, "r+b") as f:
        f.seek(pos)
        f.write(bytes(end - pos))


def rocketmq_faults(root: Path, ref: RmqRef, rng: random.Random, flips: int) -> Iterator[tuple[str, str, Callable[[Path], None]]]:
    """(file kind, fault kind, injector taking the copy's root)."""
    from mqstore.formats.rocketmq.indexfile import index_file_size

    cfg = rocketmq_config()
    files = _rmq_files(root)
    rel = {k: [p.relative_to(root) for p in v] for k, v in files.items()}
    last_off = max(ref.by_offset)
    seg_size = cfg.commit_log_file_size
    last_seg = rel["commitlog"][-1]
    seg_base = int(last_seg.name)
    rec_start = last_off - seg_base
    rec_end = rec_start + len(_raw_record(root, last_off, seg_size))

    def crashed(r: Path) -> None:
        (r / "abort").write_text("0")

    # torn tail: zeros from every byte position of the last record (crash: abort file present)
    for p in range(rec_start, rec_end):
        def inj(r: Path, p: int = p) -> None:
            _zero_from(r / last_seg, p, rec_end)
            crashed(r)
        yield "commitlog", "zero_tail", inj
    # bit flips in written bytes of each file kind
    written: dict[str, list[tuple[Path, int]]] = {
        "commitlog": [(f, n) for f in rel["commitlog"] for n in [_written_len(root / f)]],
        "consumequeue": [(f, (root / f).stat().st_size - _zero_tail_len(root / f)) for f in rel["consumequeue"]],
        "index": [(f, 40 + 16 * 4 + 40 * 20) for f in rel["index"]],
        "checkpoint": [(rel["checkpoint"][0], 24)],
    }
    for kind, spans in written.items():
        spans = [(f, n) for f, n in spans if n > 0]
        for _ in range(flips):
            f, n = rng.choice(spans)
            pos, bit = rng.randrange(n), rng.randrange(8)

            def inj(r: Path, f: Path = f, pos: int = pos, bit: int = bit) -> None:
                _flip(r / f, pos, bit)
            yield kind, "bit_flip", inj
    # wrong lengths
    for kind in ("commitlog", "consumequeue", "index", "checkpoint"):
        f = rel[kind][-1]
        for cut in (1, 7, 20):
            def inj(r: Path, f: Path = f, cut: int = cut) -> None:
                size = (r / f).stat().st_size
                os.truncate(r / f, max(size - cut, 0))
            yield kind, "wrong_length", inj

        def grow(r: Path, f: Path = f) -> None:
            with open(r / f, "ab") as fh:
                fh.write(b"\0" * 13)
        yield kind, "wrong_length", grow
    # preallocated-but-empty index files
    isize = index_file_size(cfg.hash_slot_num, cfg.index_num)

    def empty_index(r: Path) -> None:
        (r / rel["index"][-1]).write_bytes(bytes(isize))
    yield "index", "preallocated_empty", empty_index

    def extra_empty_index(r: Path) -> None:
        (r / "index" / "29991231000000000").write_bytes(bytes(isize))
    yield "index", "preallocated_empty", extra_empty_index

    def empty_cq(r: Path) -> None:
        (r / rel["consumequeue"][0]).write_bytes(bytes((r / rel["consumequeue"][0]).stat().st_size))
    yield "consumequeue", "preallocated_empty", empty_cq
    # missing files
    for kind, victims in (("commitlog", [rel["commitlog"][0], rel["commitlog"][len(rel["commitlog"]) // 2]]),
                          ("consumequeue", [rel["consumequeue"][0]]), ("index", [rel["index"][0]]),
                          ("checkpoint", [rel["checkpoint"][0]])):
        for v in victims:
            def inj(r: Path, v: Path = v) -> None:
                (r / v).unlink()
            yield kind, "missing", inj
    # stray files
    for kind, stray in (("commitlog", "commitlog/notes.txt"), ("commitlog", "commitlog/00000000000000000001"),
                        ("consumequeue", "consumequeue/T0/0/junk"), ("index", "index/junk.tmp")):
        def inj(r: Path, stray: str = stray) -> None:
            (r / stray).write_bytes(b"stray")
        yield kind, "stray", inj


def _raw_record(root: Path, offset: int, seg_size: int) -> bytes:
    import struct

    seg = root / "commitlog" / f"{offset - offset % seg_size:020d}"
    data = seg.read_bytes()
    pos = offset % seg_size
    (size,) = struct.unpack_from(">i", data, pos)
    return data[pos : pos + size]


def _written_len(path: Path) -> int:
    return path.stat().st_size - _zero_tail_len(path)


def _zero_tail_len(path: Path) -> int:
    data = path.read_bytes()
    return len(data) - len(data.rstrip(b"\0"))


# ============================================================================ Kafka
def kafka_config() -> Any:
    from mqstore.kafka import LogConfig

    return LogConfig(segment_bytes=2000, index_interval_bytes=150, max_index_size=4096)


def build_kafka(path: Path) -> dict[int, tuple[bytes, bytes, int]]:
    from mqstore.kafka import PartitionLog, SimpleRecord

    ref = {}
    with PartitionLog.open(path, kafka_config()) as log:
        for i in range(60):
            n = 1 + i % 3
            recs = [SimpleRecord(b"val-%d-%d" % (i, j) * (1 + i % 5), b"k%d-%d" % (i, j), timestamp=T0 + 10 * i + j)
                    for j in range(n)]
            info = log.append_records(recs, compression=i % 3)
            for j, r in enumerate(recs):
                ref[info.first_offset + j] = (r.key, r.value, r.timestamp)
        last = SimpleRecord(b"last", b"k-last", timestamp=T0 + 10_000)  # a small last batch: few torn cases
        info = log.append_records([last])
        ref[info.first_offset] = (last.key, last.value, last.timestamp)
    return ref


def check_kafka(d: Path, ref: dict[int, tuple[bytes, bytes, int]], rng: random.Random) -> Outcome:
    from mqstore.kafka import PartitionLog, verify_path

    o = Outcome()
    try:
        o.detected = not verify_path(d).ok
    except MqStoreError:
        o.detected = True
    except Exception as exc:
        o.untyped = f"verify: {type(exc).__name__}: {exc}"
        return o
    try:
        log = PartitionLog.open(d, kafka_config())
    except MqStoreError:
        o.open_typed = True
        return o
    except Exception as exc:
        o.untyped = f"open: {type(exc).__name__}: {exc}"
        return o
    try:
        try:
            for r in log.iter_records():
                exp = ref.get(r.offset)
                if exp is None or exp != (r.key, r.value, r.timestamp):
                    o.wrong += 1
        except MqStoreError:
            pass
        for off in sorted(ref)[:: 3]:
            _key, _value, ts = ref[off]
            try:
                t = log.offset_for_timestamp(ts)
            except MqStoreError:
                continue
            # the first record with timestamp ≥ ts is ``off`` itself when it survived, else a later one
            if t is not None and (t.offset < off if off < log.log_end_offset else False):
                o.wrong += 1
            try:
                lk = log.lookup_offset(off)
            except MqStoreError:
                continue
            if lk is not None and off < log.log_end_offset and lk.offset < off:
                o.wrong += 1
    except Exception as exc:
        o.untyped = f"query: {type(exc).__name__}: {exc} at {_where(exc)}"
    finally:
        try:
            log.close()
        except MqStoreError:
            pass
    try:
        o.repaired = verify_path(d).ok
    except MqStoreError:
        pass
    except Exception as exc:
        o.untyped = o.untyped or f"verify after open: {type(exc).__name__}: {exc}"
    return o


def kafka_faults(d: Path, rng: random.Random, flips: int) -> Iterator[tuple[str, str, Callable[[Path], None]]]:
    from mqstore.kafka import scan_batches

    logs = sorted(d.glob("*.log"))
    last = logs[-1]
    data = last.read_bytes()
    scan = scan_batches(data, 0)
    n = scan["count"]
    start = int(scan["position"][n - 1])
    end = len(data)
    name = last.name

    def unclean(r: Path) -> None:
        (r / ".kafka_cleanshutdown").unlink(missing_ok=True)

    for p in range(start, end):
        def trunc(r: Path, p: int = p) -> None:
            os.truncate(r / name, p)
            unclean(r)
        yield ".log", "truncate_tail", trunc

        def zero(r: Path, p: int = p) -> None:
            _zero_from(r / name, p, end)
            unclean(r)
        yield ".log", "zero_tail", zero
    for suffix in (".log", ".index", ".timeindex"):
        files = [f for f in sorted(d.glob("*" + suffix)) if f.stat().st_size > 0]
        for _ in range(flips):
            f = rng.choice(files)
            pos, bit = rng.randrange(f.stat().st_size), rng.randrange(8)

            def inj(r: Path, f: str = f.name, pos: int = pos, bit: int = bit) -> None:
                _flip(r / f, pos, bit)
            yield suffix, "bit_flip", inj
    # the recovery-point checkpoint: flipped digits, garbage
    for text in ("0\n1\nt 0 99999999\n", "garbage", "", "0\n1\n"):
        def cp(r: Path, text: str = text) -> None:
            (r / "recovery-point-offset-checkpoint").write_text(text)
            unclean(r)
        yield "checkpoint", "corrupt", cp
    idx = sorted(d.glob("*.index"))
    tix = sorted(d.glob("*.timeindex"))
    for suffix, victims in ((".index", idx), (".timeindex", tix)):
        for f in (victims[0], victims[-1]):
            def empty(r: Path, f: str = f.name) -> None:
                (r / f).write_bytes(bytes(96))
            yield suffix, "preallocated_empty", empty

            def wrong(r: Path, f: str = f.name) -> None:
                with open(r / f, "ab") as fh:
                    fh.write(b"\1\2\3")
            yield suffix, "wrong_length", wrong

            def missing(r: Path, f: str = f.name) -> None:
                (r / f).unlink()
            yield suffix, "missing", missing
    for f in (logs[0], logs[len(logs) // 2]):
        def miss_log(r: Path, f: str = f.name) -> None:
            (r / f).unlink()
        yield ".log", "missing", miss_log
    for stray in ("00000000000000099999.index", "00000000000000099999.timeindex", "notes.txt",
                  "00000000000000000000.log.deleted", "00000000000000000007.swap"):
        def st(r: Path, stray: str = stray) -> None:
            (r / stray).write_bytes(b"stray")
        yield "stray", "stray", st


# ============================================================================ driver
def run(flips: int, seed: int, work: Path) -> dict[tuple[str, str, str], Tally]:
    rng = random.Random(seed)
    tallies: dict[tuple[str, str, str], Tally] = defaultdict(Tally)
    ref_r = work / "ref-rocketmq"
    rref = build_rocketmq(ref_r)
    for i, (kind, fault, inj) in enumerate(list(rocketmq_faults(ref_r, rref, rng, flips))):
        case = work / "case"
        shutil.rmtree(case, ignore_errors=True)
        shutil.copytree(ref_r, case)
        inj(case)
        tallies[("rocketmq", kind, fault)].add(check_rocketmq(case, rref, rng), f"rocketmq {kind} {fault} #{i}")
    ref_k = work / "ref-kafka" / "t-0"
    kref = build_kafka(ref_k)
    for i, (kind, fault, inj) in enumerate(list(kafka_faults(ref_k, rng, flips))):
        case = work / "kcase" / "t-0"
        shutil.rmtree(case.parent, ignore_errors=True)
        shutil.copytree(ref_k, case)
        inj(case)
        tallies[("kafka", kind, fault)].add(check_kafka(case, kref, rng), f"kafka {kind} {fault} #{i}")
    return tallies


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description="torn and corrupt file campaign")
    ap.add_argument("--flips", type=int, default=200, help="bit flips per file kind")
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args(argv)
    base = "/dev/shm" if os.access("/dev/shm", os.W_OK) else None
    with tempfile.TemporaryDirectory(prefix="mqstore-corrupt-", dir=base) as tmp:
        tallies = run(args.flips, args.seed, Path(tmp))
    bad = 0
    if not args.json:
        print(f"{'layout':9}{'file':14}{'fault':20}{'injected':>9}{'detected':>9}{'typed open':>11}"
              f"{'repaired':>9}{'wrong':>6}{'untyped':>8}")
    for (layout, kind, fault), t in sorted(tallies.items()):
        bad += t.wrong + t.untyped
        if args.json:
            print(json.dumps({"layout": layout, "file": kind, "fault": fault, **asdict(t)}))
        else:
            print(f"{layout:9}{kind:14}{fault:20}{t.injected:9}{t.detected:9}{t.open_typed:11}{t.repaired:9}"
                  f"{t.wrong:6}{t.untyped:8}")
            for e in t.examples:
                print(f"    {e}")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
