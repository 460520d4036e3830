"""Fuzz targets, one per decoder: any input decodes or raises an ``mqstore.errors`` subclass.

Each target takes ``bytes`` and calls one decoder (or index search) of mqstore on it; seeds are
valid encodings, mutated by bit flips, byte overwrites, insertions, deletions and truncations (and
for checksummed formats a variant whose checksum is fixed up after the mutation, to get past the
CRC into the field decoders).  Kernels with a pure-Python twin are also checked for agreement on
every input.

CI runs the targets through hypothesis (``tests/faults/test_fault_fuzz.py``, bounded
``max_examples``); for long runs::

    python tools/fuzz.py --minutes 10 [--target NAME] [--seed N]

which prints, per target, executions, inputs that decoded, typed errors and anything else (a
bug: the input is written to ``fuzz-crashes/``).
"""

from __future__ import annotations

import argparse
import random
import struct
import sys
import time
import zlib
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import crc32c
import numpy as np

from mqstore.errors import MqStoreError
from mqstore.formats.kafka import batch as kbatch
from mqstore.formats.kafka.batch import SimpleRecord, decode_batch, encode_batch
from mqstore.formats.kafka.compression import Compression, decompress
from mqstore.formats.kafka.index_entry import decode_offset_entry, decode_time_entry
from mqstore.formats.kafka.varint import decode_varint, decode_varlong
from mqstore.formats.rocketmq.checkpoint import Checkpoint
from mqstore.formats.rocketmq.consumequeue import decode_unit, encode_unit, units_view
from mqstore.formats.rocketmq.indexfile import IndexFileBuffer, IndexHeader, index_file_size
from mqstore.formats.rocketmq.msgid import decode_message_id
from mqstore.formats.rocketmq.properties import encode_properties, parse_properties
from mqstore.formats.rocketmq.record import (
    Host,
    MessageRecord,
    body_crc,
    check_record,
    decode_record,
    encode_record,
)
from mqstore.kernels.kafka.batches import scan_batches, scan_batches_py
from mqstore.kernels.rocketmq.scan import scan_segment, scan_segment_py

MAX_INPUT = 4096  # fuzz inputs stay small: a decoder must never allocate far more than it was given
IDX_SLOTS, IDX_ITEMS = 8, 16


# ============================================================================ seeds
def _rocketmq_records() -> list[bytes]:
    out = []
    for i, (topic, body, props) in enumerate([
        ("TopicTest", b"hello", {"KEYS": "k1 k2", "TAGS": "TagA", "UNIQ_KEY": "ABC"}),
        ("T" * 130, b"x" * 50, {}),  # magic v2 (long topic)
        ("t", b"", {"DELAY": "3", "TAGS": "x"}),
    ]):
        rec = MessageRecord(topic=topic, body=body, queue_id=i, queue_offset=7 * i, commit_log_offset=100 * i,
                            born_timestamp=1_700_000_000_000 + i, store_timestamp=1_700_000_000_500 + i,
                            born_host=Host.parse("10.0.0.1:1234"),
                            store_host=Host.parse("[::1]:10911") if i == 2 else Host.parse("127.0.0.1:10911"),
                            properties_text=encode_properties(props), properties=props)
        out.append(encode_record(rec))
    return out


def _index_file() -> bytes:
    buf = bytearray(index_file_size(IDX_SLOTS, IDX_ITEMS))
    ib = IndexFileBuffer(buf, IDX_SLOTS, IDX_ITEMS, load=False)
    for i in range(12):
        ib.put_hash(i % 5, 1000 + 100 * i, 1_700_000_000_000 + 1000 * i)
    ib.write_header()
    return bytes(buf)


def _kafka_batches() -> list[bytes]:
    recs = [SimpleRecord(b"value-%d" % i * (i + 1), b"k%d" % i, timestamp=1_700_000_000_000 + i,
                         headers=[("h", b"v")] if i % 2 else []) for i in range(4)]
    return [encode_batch(recs, base_offset=10, compression=c)
            for c in (Compression.NONE, Compression.GZIP, Compression.SNAPPY, Compression.LZ4, Compression.ZSTD)]


def _legacy_messages() -> list[bytes]:
    inner = kbatch.encode_legacy_message(0, b"a", b"k", magic=1, timestamp=5) + \
        kbatch.encode_legacy_message(1, b"bb", None, magic=1, timestamp=6)
    wrapped = bytearray(kbatch.encode_legacy_message(1, zlib.compress(inner), None, magic=1, timestamp=6))
    wrapped[17] = Compression.GZIP  # attributes: a gzip wrapper
    struct.pack_into(">I", wrapped, 12, zlib.crc32(wrapped[16:]) & 0xFFFFFFFF)
    return [kbatch.encode_legacy_message(3, b"v0", b"k", magic=0),
            kbatch.encode_legacy_message(4, b"v1", None, magic=1, timestamp=1_700_000_000_000), bytes(wrapped)]


# ============================================================================ checksum fix-ups
def fix_kafka_crc(data: bytearray) -> None:
    """Make a mutated v2 batch pass its CRC again (so the record decoder runs)."""
    if len(data) >= 61 and data[16] == 2:
        struct.pack_into(">I", data, 17, crc32c.crc32c(bytes(data[21:])))


def fix_rocketmq_crc(data: bytearray) -> None:
    """Make a mutated RocketMQ record's body CRC right again (so field checks beyond it run)."""
    res = check_record(bytes(data), check_crc=False)
    if res.record is not None and len(data) >= 12:
        struct.pack_into(">I", data, 8, body_crc(res.record.body) & 0xFFFFFFFF)


# ============================================================================ targets
def t_rocketmq_record(data: bytes) -> None:
    res = check_record(data, check_crc=True)
    if res.record is not None:
        assert res.size == len(data) or res.size <= len(data)
    decode_record(data, check_crc=True)


def t_rocketmq_properties(data: bytes) -> None:
    text = data.decode("utf-8", "replace")
    props = parse_properties(text)
    if props and all(("\x01" not in k + v and "\x02" not in k + v and k) for k, v in props.items()):
        assert parse_properties(encode_properties(props)) == props


def t_rocketmq_cq_units(data: bytes) -> None:
    units_view(data)
    decode_unit(data, 0)
    decode_unit(data, len(data) // 2)


def t_rocketmq_index(data: bytes) -> None:
    IndexHeader.decode(data)
    size = index_file_size(IDX_SLOTS, IDX_ITEMS)
    buf = bytearray(data[:size].ljust(size, b"\0")) if len(data) >= 40 else bytearray(data)
    ib = IndexFileBuffer(buf, IDX_SLOTS, IDX_ITEMS)
    for h in range(-2, 10):
        out: list[int] = []
        ib.select_by_hash(out, h, 64, 0, 2**62)
        assert len(out) <= 64


def t_rocketmq_checkpoint(data: bytes) -> None:
    Checkpoint.decode(data)


def t_rocketmq_msgid(data: bytes) -> None:
    decode_message_id(data.decode("latin-1"))
    decode_message_id(data.hex()[:32])


def t_rocketmq_scan_twins(data: bytes) -> None:
    a = scan_segment(data, 0, 0, len(data), check_crc=True)
    b = scan_segment_py(data, 0, 0, len(data), check_crc=True)
    assert a.commit_log_offset.tolist() == b.commit_log_offset.tolist()
    assert (a.stop, a.next_offset) == (b.stop, b.next_offset)


def t_kafka_batch_v2(data: bytes) -> None:
    try:
        b = decode_batch(data, validate=True)
        assert b.crc_valid and len(b.records) == b.header.records_count
    except MqStoreError:
        pass
    b = decode_batch(data, validate=False)  # past a bad CRC, into the records
    assert len(b.records) == b.header.records_count


def t_kafka_legacy(data: bytes) -> None:
    msg = kbatch.decode_legacy_message(data, validate=False)
    list(kbatch.iter_legacy_records(msg))


def t_kafka_walk_and_scan_twins(data: bytes) -> None:
    refs = []
    try:
        for ref in kbatch.walk_batches(data):
            kbatch.validate_any(data, ref)
            refs.append(ref)
    except MqStoreError:
        pass
    a = scan_batches(data, 0)
    b = scan_batches_py(data, 0)
    assert a["count"] == b["count"] and a["stop_reason"] == b["stop_reason"] and a["valid_end"] == b["valid_end"]
    assert np.array_equal(a["position"][: a["count"]], b["position"][: b["count"]])


def t_kafka_decompress(data: bytes) -> None:
    for codec in (Compression.GZIP, Compression.SNAPPY, Compression.LZ4, Compression.ZSTD):
        try:
            decompress(codec, data)
        except MqStoreError:
            pass
    decompress(data[0] % 8 if data else 0, data[1:])


def t_kafka_index_entries(data: bytes) -> None:
    n = len(data)
    for slot in (0, 1, n // 8, n // 12, -1):
        for fn in (decode_offset_entry, decode_time_entry):
            try:
                fn(data, slot, 100)
            except MqStoreError:
                pass


def t_kafka_varint(data: bytes) -> None:
    for fn in (decode_varint, decode_varlong):
        pos = 0
        while pos < len(data):
            try:
                _, pos = fn(data, pos)
            except MqStoreError:
                break


@dataclass(frozen=True)
class Target:
    name: str
    fn: Callable[[bytes], None]
    seeds: tuple[bytes, ...]
    fix: Callable[[bytearray], None] | None = None


def targets() -> dict[str, Target]:
    recs = tuple(_rocketmq_records())
    kb = tuple(_kafka_batches())
    legacy = tuple(_legacy_messages())
    cp = Checkpoint(1_700_000_000_000, 1_700_000_000_001, 1_700_000_000_002, 0, 0).encode()
    ts = [
        Target("rocketmq_record", t_rocketmq_record, recs, fix_rocketmq_crc),
        Target("rocketmq_properties", t_rocketmq_properties,
               (encode_properties({"KEYS": "a b", "TAGS": "t", "UNIQ_KEY": "U"}).encode(), b"a\x01b\x02c")),
        Target("rocketmq_cq_units", t_rocketmq_cq_units, (encode_unit(100, 200, 3) + encode_unit(300, 50, -1),)),
        Target("rocketmq_index", t_rocketmq_index, (_index_file(),)),
        Target("rocketmq_checkpoint", t_rocketmq_checkpoint, (cp,)),
        Target("rocketmq_msgid", t_rocketmq_msgid, (b"7F0000010000271100000000000000FF",)),
        Target("rocketmq_scan_twins", t_rocketmq_scan_twins, (b"".join(recs),)),
        Target("kafka_batch_v2", t_kafka_batch_v2, kb, fix_kafka_crc),
        Target("kafka_legacy", t_kafka_legacy, legacy),
        Target("kafka_walk_and_scan_twins", t_kafka_walk_and_scan_twins, (b"".join(kb[:3]) + legacy[1],)),
        Target("kafka_decompress", t_kafka_decompress, tuple(b[61:] for b in kb[1:])),
        Target("kafka_index_entries", t_kafka_index_entries, (struct.pack(">iiii", 0, 0, 5, 100),)),
        Target("kafka_varint", t_kafka_varint, (b"\x96\x01\x7f\xff\xff\xff\xff\x0f\x01",)),
    ]
    return {t.name: t for t in ts}


# ============================================================================ mutation
def mutate(rng: random.Random, seed: bytes, fix: Callable[[bytearray], None] | None) -> bytes:
    data = bytearray(seed)
    for _ in range(rng.choice((1, 1, 2, 3, 8))):
        op = rng.randrange(6)
        if op == 0 and data:  # bit flip
            p = rng.randrange(len(data))
            data[p] ^= 1 << rng.randrange(8)
        elif op == 1 and data:  # interesting value over a field
            p = rng.randrange(len(data))
            v = rng.choice((0, 1, 0x7F, 0x80, 0xFF, 0x7FFFFFFF, 0x80000000, 0xFFFFFFFF, 2**31 - 2, 61, 14))
            width = rng.choice((1, 2, 4, 8))
            chunk = (v & ((1 << (8 * width)) - 1)).to_bytes(width, "big")
            data[p : p + width] = chunk
        elif op == 2 and data:  # truncate
            del data[rng.randrange(len(data)) :]
        elif op == 3:  # insert random bytes
            p = rng.randrange(len(data) + 1)
            data[p:p] = rng.randbytes(rng.randint(1, 16))
        elif op == 4 and data:  # delete a range
            p = rng.randrange(len(data))
            del data[p : p + rng.randint(1, 16)]
        else:  # zero a range (a hole, a never-written page)
            if data:
                p = rng.randrange(len(data))
                data[p : p + rng.randint(1, 64)] = bytes(min(len(data) - p, rng.randint(1, 64)))
    if fix is not None and rng.random() < 0.5:
        fix(data)
    return bytes(data[:MAX_INPUT])


def run_one(target: Target, data: bytes) -> str:
    """``"ok"`` or ``"typed"``; any other exception propagates (a bug)."""
    try:
        target.fn(data)
    except MqStoreError:
        return "typed"
    return "ok"


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description="fuzz every mqstore decoder")
    ap.add_argument("--minutes", type=float, default=1.0, help="total time, split over the targets")
    ap.add_argument("--target", action="append", help="only these targets (repeatable)")
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--crash-dir", type=Path, default=Path("fuzz-crashes"))
    args = ap.parse_args(argv)
    ts = targets()
    chosen = [ts[n] for n in (args.target or sorted(ts))]
    per = args.minutes * 60 / len(chosen)
    rng = random.Random(args.seed)
    bugs = 0
    print(f"{'target':28} {'execs':>9} {'decoded':>9} {'typed':>9} {'other':>6}")
    for t in chosen:
        counts = {"ok": 0, "typed": 0, "other": 0}
        stop = time.monotonic() + per
        while time.monotonic() < stop:
            for _ in range(50):
                data = mutate(rng, rng.choice(t.seeds), t.fix) if rng.random() < 0.9 else rng.randbytes(
                    rng.randint(0, 200))
                try:
                    counts[run_one(t, data)] += 1
                except Exception as exc:  # a bug: keep the input
                    counts["other"] += 1
                    bugs += 1
                    args.crash_dir.mkdir(exist_ok=True)
                    f = args.crash_dir / f"{t.name}-{counts['other']}.bin"
                    f.write_bytes(data)
                    if counts["other"] <= 3:
                        print(f"  {t.name}: {type(exc).__name__}: {exc} (input in {f})", file=sys.stderr)
        execs = sum(counts.values())
        print(f"{t.name:28} {execs:9} {counts['ok']:9} {counts['typed']:9} {counts['other']:6}")
    return 1 if bugs else 0


if __name__ == "__main__":
    sys.exit(main())
