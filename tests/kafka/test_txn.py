"""Kafka transactions: .txnindex / .snapshot codecs, batch classification (vectorised vs twin),
the broker's producer-state replay, .txnindex rebuild / verify, read_committed reads — with
Transactions V1 and V2 markers, and against kafka-python (an independent client library)."""

from __future__ import annotations

import hashlib
import struct
from collections import namedtuple
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from kafka.consumer.fetcher import Fetcher
from kafka.protocol.consumer.offsets import IsolationLevel
from kafka.record import MemoryRecords
from kafka.record.default_records import DefaultRecordBatchBuilder
from kafka.structs import TopicPartition
from txn_support import Model, Op, build, expected_by_segment, write_partition

from kernel_twins import twins
from mqstore.errors import (
    CorruptIndexError,
    CrcMismatchError,
    InvalidArgumentError,
    StoreNotFoundError,
    TruncatedRecordError,
    UnsupportedFormatError,
)
from mqstore.formats.kafka import encode_end_txn_marker_batch, set_base_offset
from mqstore.formats.kafka.txn import (
    ABORTED_TXN_SIZE,
    AbortedTxn,
    ProducerSnapshotEntry,
    decode_producer_snapshot,
    decode_txn_index,
    encode_producer_snapshot,
    encode_txn_index,
)
from mqstore.kafka import PartitionLog
from mqstore.kernels.kafka.txn import (
    ABORTED,
    COMMITTED,
    CONTROL,
    NON_TXN,
    OPEN,
    ProducerStateReplay,
    classify_batches,
    classify_batches_py,
    in_ranges,
    in_ranges_py,
)
from mqstore.storage.kafka.tools import verify_path
from mqstore.storage.kafka.txn import (
    expected_txn_indexes,
    partition_txn_columns,
    read_producer_snapshot,
    read_txn_index,
)
from mqstore.storage.kafka.txn_rebuild import rebuild_txn_indexes

I64 = st.integers(-(1 << 63), (1 << 63) - 1)
I32 = st.integers(-(1 << 31), (1 << 31) - 1)
I16 = st.integers(-(1 << 15), (1 << 15) - 1)


def _hash_dir(d: Path) -> dict[str, str]:
    return {f.name: hashlib.sha256(f.read_bytes()).hexdigest() for f in sorted(d.iterdir()) if f.is_file()}


# ----------------------------------------------------------------------------- .txnindex codec
def test_aborted_txn_layout_is_34_big_endian_bytes() -> None:
    raw = encode_txn_index([AbortedTxn(7, 100, 250, 90)])
    assert len(raw) == ABORTED_TXN_SIZE == 34
    assert raw == struct.pack(">h", 0) + struct.pack(">q", 7) + struct.pack(">q", 100) + struct.pack(">q", 250) \
        + struct.pack(">q", 90)


@given(st.lists(st.tuples(I64, I64, I64, I64), max_size=20))
def test_txn_index_round_trip(rows: list[tuple[int, int, int, int]]) -> None:
    txns = [AbortedTxn(*r) for r in rows]
    assert decode_txn_index(encode_txn_index(txns)) == txns


def test_txn_index_partial_entry_and_unknown_version() -> None:
    raw = encode_txn_index([AbortedTxn(1, 0, 5, 6), AbortedTxn(2, 3, 9, 10)])
    with pytest.raises(CorruptIndexError, match="partial entry"):
        decode_txn_index(raw[:-5])
    assert decode_txn_index(raw[:-5], strict=False) == [AbortedTxn(1, 0, 5, 6)]  # Kafka's lenient reader
    bad = struct.pack(">h", 1) + raw[2:34]
    with pytest.raises(UnsupportedFormatError, match="version 1"):
        decode_txn_index(bad)


# ----------------------------------------------------------------------------- .snapshot codec
ENTRY = st.builds(ProducerSnapshotEntry, I64, I16, I32, I64, I32, I64, I32, I64)


@given(st.lists(ENTRY, max_size=12))
def test_snapshot_round_trip(entries: list[ProducerSnapshotEntry]) -> None:
    raw = encode_producer_snapshot(entries)
    assert len(raw) == 10 + 46 * len(entries)
    snap = decode_producer_snapshot(raw)
    assert snap.version == 1 and list(snap.entries) == entries


def test_snapshot_layout_by_hand() -> None:
    """Independent of the encoder: bytes assembled field by field, CRC-32C from the crc32c package."""
    import crc32c

    entry = struct.pack(">qhiqiqiq", 42, 3, 17, 1234, 2, 1_700_000_000_000, 5, 1200)
    tail = struct.pack(">i", 1) + entry
    raw = struct.pack(">hI", 1, crc32c.crc32c(tail)) + tail
    (e,) = decode_producer_snapshot(raw).entries
    assert e == ProducerSnapshotEntry(42, 3, 17, 1234, 2, 1_700_000_000_000, 5, 1200)
    assert encode_producer_snapshot([e]) == raw


def test_snapshot_bad_inputs() -> None:
    raw = encode_producer_snapshot([ProducerSnapshotEntry(1, 0, 4, 10, 4, 99, -1, -1)])
    with pytest.raises(TruncatedRecordError):
        decode_producer_snapshot(raw[:5])
    with pytest.raises(TruncatedRecordError):
        decode_producer_snapshot(raw[:-1])
    flipped = bytearray(raw)
    flipped[20] ^= 0xFF
    with pytest.raises(CrcMismatchError):
        decode_producer_snapshot(bytes(flipped))
    with pytest.raises(UnsupportedFormatError):
        decode_producer_snapshot(struct.pack(">h", 2) + raw[2:])
    with pytest.raises(CorruptIndexError):
        decode_producer_snapshot(raw + b"\0")


# ----------------------------------------------------------------------------- kernels
OPS = st.lists(
    st.one_of(
        st.builds(Op, st.just("txn"), st.integers(0, 3), st.integers(1, 3)),
        st.builds(Op, st.just("plain"), st.just(-1), st.integers(1, 2)),
        st.builds(Op, st.just("end"), st.integers(0, 3), st.just(1), st.booleans()),
    ),
    max_size=40,
)


def _columns_of(model: Model) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    from mqstore.formats.kafka import decode_batch, decode_control_record

    pid, attrs, marker = [], [], []
    for raw in model.batches:
        b = decode_batch(raw)
        pid.append(b.header.producer_id)
        attrs.append(b.header.attributes)
        marker.append(decode_control_record(b.records[0]).type if b.header.is_control else -1)
    return np.array(pid, np.int64), np.array(attrs, np.int64), np.array(marker, np.int64)


@pytest.mark.parametrize("classify", twins("kafka.classify_batches"))
@settings(max_examples=100, deadline=None)
@given(ops=OPS, tv2=st.booleans())
def test_classify_batches_against_model(classify: Any, ops: list[Op], tv2: bool) -> None:
    m = build(ops, tv2=tv2)
    pid, attrs, marker = _columns_of(m)
    fast = classify(pid, attrs, marker)
    assert np.array_equal(fast, classify_batches_py(pid, attrs, marker))
    visible = set(m.visible)
    for i, op in enumerate(ops):
        base = m.bases[i]
        if op.kind == "end":
            assert fast[i] == CONTROL
        elif op.kind == "plain":
            assert fast[i] == NON_TXN
        elif base in visible:
            assert fast[i] == COMMITTED
        else:
            assert fast[i] in (ABORTED, OPEN)


@pytest.mark.parametrize("impl", twins("kafka.in_ranges"))
@given(offsets=st.lists(st.integers(0, 200), max_size=30), widths=st.lists(st.integers(0, 5), max_size=10))
def test_in_ranges(impl: Any, offsets: list[int], widths: list[int]) -> None:
    starts, ends, at = [], [], 0
    for w in widths:
        at += 7
        starts.append(at)
        ends.append(at + w)
        at += w
    s, e = np.array(starts, np.int64), np.array(ends, np.int64)
    want = [any(a <= o <= b for a, b in zip(starts, ends, strict=True)) for o in offsets]
    assert impl(offsets, s, e).tolist() == want
    assert np.array_equal(in_ranges(offsets, s, e), in_ranges_py(offsets, s, e))


def test_replay_v2_marker_clears_batches_and_bumps_epoch() -> None:
    r = ProducerStateReplay()
    r.append(base_offset=0, last_offset=1, producer_id=9, epoch=4, last_sequence=1, max_timestamp=50,
             transactional=True, control=False)
    assert r.entries()[0].current_txn_first_offset == 0
    # V1: same epoch, the retained batch stays
    r1 = ProducerStateReplay(r.entries())
    r1.append(base_offset=2, last_offset=2, producer_id=9, epoch=4, last_sequence=-1, max_timestamp=-1,
              transactional=True, control=True, marker=1, coordinator_epoch=2, marker_timestamp=60)
    (e1,) = r1.entries()
    assert (e1.epoch, e1.last_sequence, e1.last_offset, e1.offset_delta, e1.current_txn_first_offset,
            e1.coordinator_epoch, e1.timestamp) == (4, 1, 1, 1, -1, 2, 60)
    # V2: marker epoch = data epoch + 1: the producer's epoch moves on, its batch metadata is dropped
    r2 = ProducerStateReplay(r.entries())
    r2.append(base_offset=2, last_offset=2, producer_id=9, epoch=5, last_sequence=-1, max_timestamp=-1,
              transactional=True, control=True, marker=0, coordinator_epoch=2, marker_timestamp=60)
    (e2,) = r2.entries()
    assert (e2.epoch, e2.last_sequence, e2.last_offset, e2.offset_delta, e2.current_txn_first_offset) == \
        (5, -1, -1, 0, -1)


# ----------------------------------------------------------------------------- partitions
def _example(tv2: bool) -> list[Op]:
    return [Op("txn", 1, 2), Op("txn", 2, 3), Op("txn", 1, 1), Op("end", 1, commit=False), Op("plain", n=2),
            Op("end", 2, commit=True), Op("txn", 3, 1), Op("end", 3, commit=False), Op("txn", 1, 2),
            Op("end", 1, commit=True), Op("end", 2, commit=False), Op("txn", 4, 2)]


@pytest.mark.parametrize("tv2", [False, True], ids=["txn-v1", "txn-v2"])
def test_txnindex_rebuild_lso_and_files(tmp_path: Path, tv2: bool) -> None:
    m = build(_example(tv2), tv2=tv2)
    d = tmp_path / "orders-0"
    bases = write_partition(d, m, cuts=[3, 7])
    assert m.aborted == [AbortedTxn(1, 0, 6, 2), AbortedTxn(3, 10, 11, 12)]  # the LSO rule, by hand
    want = expected_by_segment(m, bases)
    assert expected_txn_indexes(d) == want
    res = {r.segment: r for r in rebuild_txn_indexes(d)}
    for b in bases:
        f = d / f"{b:020d}.txnindex"
        assert res[b].written == bool(want[b]) == f.exists()  # Kafka creates the file only when needed
        assert read_txn_index(f) == want[b]
    # an existing file of a segment without aborts is emptied (Kafka's reset), not deleted
    empty = d / f"{bases[0]:020d}.txnindex"
    empty.write_bytes(encode_txn_index([AbortedTxn(5, 1, 2, 3)]))
    rebuild_txn_indexes(d)
    assert empty.exists() and empty.read_bytes() == b""
    assert verify_path(d).ok


def test_txnindex_verify_problems(tmp_path: Path) -> None:
    m = build(_example(False))
    d = tmp_path / "t-0"
    bases = write_partition(d, m, cuts=[3, 7])
    rebuild_txn_indexes(d)
    f = d / f"{bases[1]:020d}.txnindex"
    good = f.read_bytes()
    f.write_bytes(good[:-3])
    before = _hash_dir(d)
    kinds = [p.kind for p in verify_path(d).problems]
    assert kinds == ["txnindex_corrupt"]
    assert _hash_dir(d) == before  # verify modifies nothing
    f.write_bytes(encode_txn_index([AbortedTxn(1, 0, 6, 99)]))
    (p,) = verify_path(d).problems
    assert p.kind == "txnindex_mismatch" and "lastStableOffset 99" in p.message
    f.unlink()
    rep = verify_path(d)
    assert rep.ok and [n.kind for n in rep.notes if n.kind.startswith("txn")] == ["txnindex_missing"]


def test_snapshot_seed_for_transaction_started_in_deleted_segment(tmp_path: Path) -> None:
    """The log starts at offset 10, inside producer 7's transaction that began at offset 4: the
    snapshot at offset 10 (what Kafka keeps for the first segment) supplies its first offset."""
    m = build([Op("txn", 7, 2), Op("end", 7, commit=False)], start=10)
    d = tmp_path / "t-0"
    write_partition(d, m)
    assert expected_txn_indexes(d)[10] == [AbortedTxn(7, 10, 12, 13)]
    (d / f"{10:020d}.snapshot").write_bytes(encode_producer_snapshot(
        [ProducerSnapshotEntry(7, 0, 5, 9, 1, 900, 3, 4)]))
    assert expected_txn_indexes(d)[10] == [AbortedTxn(7, 4, 12, 13)] == expected_txn_indexes(d, replay=True)[10]
    assert read_producer_snapshot(d / f"{10:020d}.snapshot").entries[0].current_txn_first_offset == 4


@pytest.mark.parametrize("tv2", [False, True], ids=["txn-v1", "txn-v2"])
def test_read_committed_partition_log(tmp_path: Path, tv2: bool) -> None:
    m = build(_example(tv2), tv2=tv2)
    d = tmp_path / "orders-0"
    write_partition(d, m, cuts=[5])
    before = _hash_dir(d)
    with PartitionLog.open(d, read_only=True) as log:
        assert log.last_stable_offset() == m.lso == 16
        got = [r.offset for r in log.iter_records(isolation="read_committed")]
        assert got == m.committed_offsets() == [2, 3, 4, 7, 8, 12, 13]
        assert [r.offset for r in log.iter_records(5, 13, isolation="read_committed")] == [7, 8, 12]
        everything = [r.offset for r in log.iter_records()]
        assert everything == list(range(m.log_end))
        fetch = log.read(0, 1 << 20, isolation="read_committed")  # the first segment: offsets 0..8
        assert PartitionLog._next_offset_after(fetch.records, 0) == 9
        assert fetch.aborted_transactions == m.aborted[:1]
        second = log.read(9, 1 << 20, isolation="read_committed")  # stops before the open txn at 16
        assert PartitionLog._next_offset_after(second.records, 9) == 16
        assert second.aborted_transactions == m.aborted[1:]
        plain = log.read(0, 1 << 20)
        assert plain.aborted_transactions is None and plain.records == fetch.records
        tail = log.read(16, 1 << 20)  # read_uncommitted returns the open transaction's batch
        assert tail.records and not log.read(16, 1 << 20, isolation="read_committed").records
        with pytest.raises(InvalidArgumentError):
            log.read(0, 100, isolation="serializable")
    assert _hash_dir(d) == before


def _kafka_python_consumer(fetch_records: bytes, aborted: list[AbortedTxn], start: int) -> list[int]:
    """kafka-python's own read_committed logic (Fetcher.PartitionRecords) over our fetch answer."""
    txn = namedtuple("AbortedTransaction", "producer_id first_offset")
    pr = Fetcher.PartitionRecords(start, TopicPartition("t", 0), MemoryRecords(fetch_records),
                                  isolation_level=IsolationLevel.READ_COMMITTED,
                                  aborted_transactions=[txn(t.producer_id, t.first_offset) for t in aborted])
    return [r.offset for r in pr.take()]


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(ops=OPS, tv2=st.booleans(), cuts=st.lists(st.integers(1, 39), max_size=3))
def test_property_read_committed_equals_marker_replay(tmp_path_factory: pytest.TempPathFactory, ops: list[Op],
                                                      tv2: bool, cuts: list[int]) -> None:
    """read_committed output = brute-force replay of the commit/abort markers over random
    interleavings of several producers' transactions with plain batches between; the .txnindex
    rebuilt equals the model; kafka-python's consumer agrees on our fetch answer."""
    m = build([Op("plain"), *ops], tv2=tv2)
    d = tmp_path_factory.mktemp("prop") / "p-0"
    bases = write_partition(d, m, cuts=cuts)
    assert expected_txn_indexes(d) == expected_by_segment(m, bases) == expected_txn_indexes(d, replay=True)
    cols = partition_txn_columns(d)
    assert np.array_equal(classify_batches(cols.producer_id, cols.attributes, cols.marker),
                          classify_batches_py(cols.producer_id, cols.attributes, cols.marker))
    with PartitionLog.open(d, read_only=True) as log:
        assert log.last_stable_offset() == m.lso
        assert [r.offset for r in log.iter_records(isolation="read_committed")] == m.committed_offsets()
        fetched: list[int] = []
        pos = 0
        while pos < m.lso:
            f = log.read(pos, 1 << 20, isolation="read_committed")
            if not f.records:
                break
            fetched += _kafka_python_consumer(f.records, f.aborted_transactions or [], pos)
            pos = PartitionLog._next_offset_after(f.records, pos)
        assert fetched == m.committed_offsets()


def test_kafka_python_built_transactional_batches(tmp_path: Path) -> None:
    """Data batches built by kafka-python's DefaultRecordBatchBuilder (transactional, producer id,
    epoch, sequence), end markers by mqstore (kafka-python has no control-batch builder)."""
    def kp_batch(base: int, pid: int, epoch: int, n: int) -> bytes:
        b = DefaultRecordBatchBuilder(magic=2, compression_type=0, is_transactional=pid >= 0, producer_id=pid,
                                      producer_epoch=epoch, base_sequence=0 if pid >= 0 else -1, batch_size=1 << 20)
        for i in range(n):
            b.append(i, 1_700_000_000_000 + base + i, None, b"v%d" % (base + i), [])
        raw = bytearray(b.build())
        set_base_offset(raw, base)
        return bytes(raw)

    parts = [kp_batch(0, 11, 2, 3), kp_batch(3, 12, 0, 2), kp_batch(5, -1, -1, 1),
             encode_end_txn_marker_batch(commit=False, producer_id=11, producer_epoch=3, base_offset=6),  # V2
             encode_end_txn_marker_batch(commit=True, producer_id=12, producer_epoch=0, base_offset=7),  # V1
             kp_batch(8, 11, 3, 2)]
    d = tmp_path / "kp-0"
    d.mkdir()
    (d / f"{0:020d}.log").write_bytes(b"".join(parts))
    assert expected_txn_indexes(d) == {0: [AbortedTxn(11, 0, 6, 3)]}
    with PartitionLog.open(d, read_only=True) as log:
        assert log.last_stable_offset() == 8
        assert [r.offset for r in log.iter_records(isolation="read_committed")] == [3, 4, 5]
        f = log.read(0, 1 << 20, isolation="read_committed")
        assert _kafka_python_consumer(f.records, f.aborted_transactions or [], 0) == [3, 4, 5]


def test_missing_paths_are_typed(tmp_path: Path) -> None:
    with pytest.raises(StoreNotFoundError):
        read_producer_snapshot(tmp_path / "00000000000000000000.snapshot")
    with pytest.raises(StoreNotFoundError):
        partition_txn_columns(tmp_path / "nope")
    assert read_txn_index(tmp_path / "00000000000000000000.txnindex") == []


@pytest.mark.parametrize("tv2", [False, True], ids=["txn-v1", "txn-v2"])
def test_verify_snapshot_against_replayed_producer_state(tmp_path: Path, tv2: bool) -> None:
    """Producer state after data (offsets 0-1, seq 0-1, max timestamp 1001) and a COMMIT marker at
    offset 2 (timestamp 5002, coordinator epoch 3): V1 keeps the batch metadata; V2's marker epoch
    (data epoch + 1) becomes the producer's epoch and drops it, exactly as the broker's entry."""
    m = build([Op("txn", 1, 2), Op("end", 1, commit=True), Op("plain")], tv2=tv2)
    d = tmp_path / "s-0"
    write_partition(d, m)
    v1 = ProducerSnapshotEntry(1, 0, 1, 1, 1, 5002, 3, -1)
    v2 = ProducerSnapshotEntry(1, 1, -1, -1, 0, 5002, 3, -1)
    snap = d / f"{3:020d}.snapshot"
    snap.write_bytes(encode_producer_snapshot([v2 if tv2 else v1]))
    assert verify_path(d).ok
    snap.write_bytes(encode_producer_snapshot([v1 if tv2 else v2]))
    (p,) = verify_path(d).problems
    assert p.kind == "snapshot_mismatch" and "producer 1" in p.message
    # mid-transaction snapshot (offset 2: data appended, marker not yet): the open txn is recorded
    mid = d / f"{2:020d}.snapshot"
    snap.unlink()
    mid.write_bytes(encode_producer_snapshot([ProducerSnapshotEntry(1, 0, 1, 1, 1, 1001, -1, 0)]))
    assert verify_path(d).ok


@pytest.mark.parametrize("case", ["single_default", "multi_segment_roll_bytes", "append_groups"])
def test_reference_fixtures_transactions(case: str) -> None:
    """The reference fixtures hold transactional batches and markers (several producers): the
    aborted transactions and read_committed offsets follow from the batch list of the manifest
    (written by the fixture generator) by a plain walk, independent of the library's replay."""
    from kafka_support import case_dir, load_manifest

    d = case_dir(case) / "segments"
    man = load_manifest(case)
    open_first: dict[int, int] = {}
    pending: dict[int, list[int]] = {}
    visible: list[int] = []
    want: dict[int, list[AbortedTxn]] = {}
    for seg in man["segments"]:
        want[seg["base_offset"]] = []
        for b in seg["batches"]:
            if not b["crc_valid"] or b["magic"] < 2:
                continue
            pid = b["producer_id"]
            offs = [r["offset"] for r in b["records"]]
            if b["control"]:
                commit = b["records"][0]["key"][3] == "\x01"
                if pid in open_first:
                    first = open_first.pop(pid)
                    if commit:
                        visible += pending.pop(pid)
                    else:
                        pending.pop(pid)
                        others = list(open_first.values())
                        lso = min(others) if others else b["base_offset"] + 1
                        want[seg["base_offset"]].append(AbortedTxn(pid, first, b["base_offset"], lso))
            elif b["transactional"]:
                open_first.setdefault(pid, b["base_offset"])
                pending.setdefault(pid, []).extend(offs)
            else:
                visible += offs
    lso = min(open_first.values()) if open_first else man["log_end_offset"]
    assert sum(len(v) for v in want.values()) > 0  # the fixture really has aborted transactions
    assert expected_txn_indexes(d) == want == expected_txn_indexes(d, replay=True)
    with PartitionLog.open(d, read_only=True) as log:
        assert log.last_stable_offset() == lso
        assert [r.offset for r in log.iter_records(isolation="read_committed")] == sorted(o for o in visible if o < lso)


@pytest.mark.parametrize("impl", twins("kafka.aborted_transactions"))
@settings(max_examples=100, deadline=None)
@given(ops=OPS, tv2=st.booleans(), pids=st.permutations(range(5)),
       firsts=st.lists(st.integers(0, 99), unique=True, max_size=3))
def test_aborted_transactions_equals_replay(impl: Any, ops: list[Op], tv2: bool, pids: list[int],
                                            firsts: list[int]) -> None:
    """The vectorised .txnindex derivation equals the per-batch broker replay, also when a
    snapshot seeds transactions opened before the first batch (distinct offsets 0..99, log from 100)."""
    from mqstore.formats.kafka import decode_batch

    seed = dict(zip(pids, firsts, strict=False))
    m = build(ops, tv2=tv2, start=100)
    pid, attrs, marker = _columns_of(m)
    base = np.array(m.bases, np.int64)
    rows, fast = impl(base, pid, attrs, marker, seed)
    replay = ProducerStateReplay([ProducerSnapshotEntry(p, 0, -1, -1, 0, -1, -1, f) for p, f in seed.items()])
    slow, slow_rows = [], []
    for i, raw in enumerate(m.batches):
        h = decode_batch(raw).header
        if h.producer_id < 0:
            continue
        t = replay.append(base_offset=h.base_offset, last_offset=h.last_offset, producer_id=h.producer_id,
                          epoch=h.producer_epoch, last_sequence=h.last_sequence, max_timestamp=h.max_timestamp,
                          transactional=h.is_transactional, control=h.is_control, marker=int(marker[i]))
        if t is not None:
            slow.append(t)
            slow_rows.append(i)
    assert fast == slow and rows.tolist() == slow_rows
    if not seed:
        assert fast == m.aborted
