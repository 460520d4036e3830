"""The compiled ``__consumer_offsets`` kernels against their pure-Python twins (same inputs), against
the generic schema decoder, and the whole replay against a dictionary model."""

from __future__ import annotations

import struct
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st
from kraft_support import group_metadata, offset_commit, txn_batch, txn_marker, write_partition

from kernel_twins import twin_pairs, twins
from mqstore.errors import CorruptDataError
from mqstore.formats.kafka import Compression, SimpleRecord, encode_batch
from mqstore.formats.kafka.coordinator_records import decode_coordinator_record
from mqstore.kernels.kafka.batches import scan_batches
from mqstore.kernels.kafka.offsets import (
    KIND_BAD,
    KIND_COMMIT,
    KIND_OTHER,
    KIND_TOMBSTONE,
    parse_offset_commits,
    parse_offset_commits_py,
    record_spans,
    record_spans_py,
    transaction_fate,
    transaction_fate_py,
)
from mqstore.storage.kafka.internal import consumer_groups

_names = st.text(alphabet="abcé-_", min_size=0, max_size=6)


@st.composite
def _record(draw: st.DrawFn) -> SimpleRecord:
    kind = draw(st.sampled_from(["commit", "tombstone", "group", "garbage_key", "garbage_value", "null_key"]))
    if kind in ("commit", "tombstone"):
        vv = draw(st.integers(0, 4))
        kv = draw(st.integers(0, 1))
        off = None if kind == "tombstone" else draw(st.integers(-(1 << 63), (1 << 63) - 1))
        return offset_commit(draw(_names), draw(_names), draw(st.integers(-5, 1 << 20)), off, key_version=kv,
                             value_version=vv, ts=draw(st.integers(0, 1 << 50)))
    if kind == "group":
        return group_metadata(draw(_names), draw(st.integers(0, 2)))
    if kind == "garbage_key":
        return SimpleRecord(value=draw(st.binary(max_size=20)), key=draw(st.binary(max_size=12)), timestamp=1)
    if kind == "garbage_value":
        good = offset_commit("g", "t", 0, 1)
        return SimpleRecord(value=draw(st.binary(max_size=30)), key=good.key, timestamp=1)
    return SimpleRecord(value=draw(st.binary(max_size=5)), key=None, timestamp=1)


def _bodies(data: bytes) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    buf = np.frombuffer(data, np.uint8)
    scan = scan_batches(buf)
    n = int(scan["count"])
    pos = scan["position"][:n].astype(np.int64)
    return buf, pos + 61, pos + scan["size"][:n].astype(np.int64), scan["record_count"][:n].astype(np.int64)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(batches=st.lists(st.lists(_record(), min_size=1, max_size=5), min_size=1, max_size=5),
       corrupt=st.booleans())
def test_kernels_match_twins_and_generic_decoder(batches: list[list[SimpleRecord]], corrupt: bool) -> None:
    data = bytearray()
    off = 0
    for b in batches:
        data += encode_batch(b, base_offset=off)
        off += len(b)
    if corrupt:  # a bad record length inside the first batch: that batch is dropped by both
        data[61] = 0x7F
    buf, bs, be, cnt = _bodies(bytes(data))
    fast = record_spans(buf, bs, be, cnt)
    slow = record_spans_py(buf, bs, be, cnt)
    assert fast.keys() == slow.keys()
    for k in fast:
        assert np.array_equal(fast[k], slow[k]), k
    if not corrupt:
        assert fast["ok"].all() and fast["key_start"].shape[0] == sum(len(b) for b in batches)
    args = (buf, fast["key_start"], fast["key_len"], fast["val_start"], fast["val_len"])
    pf, ps = parse_offset_commits(*args), parse_offset_commits_py(*args)
    for k in pf:
        assert np.array_equal(pf[k], ps[k]), k
    raw = bytes(data)
    for i in range(fast["key_start"].shape[0]):
        kl, vl = int(fast["key_len"][i]), int(fast["val_len"][i])
        key = None if kl < 0 else raw[fast["key_start"][i]:fast["key_start"][i] + kl]
        val = None if vl < 0 else raw[fast["val_start"][i]:fast["val_start"][i] + vl]
        kind = int(pf["kind"][i])
        try:
            dec: Any = decode_coordinator_record("offsets", key, val)
        except CorruptDataError:
            dec = None
        if kind == KIND_COMMIT:
            v = dec["value"]
            assert (dec["key"]["group"], dec["key"]["topic"], dec["key"]["partition"]) == (
                raw[pf["group_start"][i]:pf["group_start"][i] + pf["group_len"][i]].decode(),
                raw[pf["topic_start"][i]:pf["topic_start"][i] + pf["topic_len"][i]].decode(),
                int(pf["partition"][i]))
            assert (v["offset"], v.get("leaderEpoch", -1), v["commitTimestamp"], v["metadata"]) == (
                int(pf["offset"][i]), int(pf["leader_epoch"][i]), int(pf["commit_timestamp"][i]),
                raw[pf["meta_start"][i]:pf["meta_start"][i] + pf["meta_len"][i]].decode())
        elif kind == KIND_TOMBSTONE:
            assert dec["type"] == "OffsetCommit" and dec["value"] is None
        elif kind == KIND_BAD:
            assert dec is None or dec.get("unknown") or dec["type"] != "OffsetCommit"
        else:
            assert kind == KIND_OTHER
            assert dec is None or dec["type"] != "OffsetCommit"


@pytest.mark.parametrize("spans", twins("kafka.record_spans"))
def test_record_spans_of_empty_and_null_fields(spans: Any) -> None:
    data = encode_batch([SimpleRecord(value=None, key=None, timestamp=1), SimpleRecord(value=b"", key=b"",
                                                                                        timestamp=2)])
    buf, bs, be, cnt = _bodies(data)
    fast = spans(buf, bs, be, cnt)
    assert fast["key_len"].tolist() == [-1, 0] and fast["val_len"].tolist() == [-1, 0]
    assert fast["offset_delta"].tolist() == [0, 1]
    empty = spans(np.zeros(0, np.uint8), np.zeros(0, np.int64), np.zeros(0, np.int64), np.zeros(0, np.int64))
    assert empty["key_start"].shape == (0,) and empty["ok"].shape == (0,)


@pytest.mark.parametrize(("spans", "parse"), twin_pairs("kafka.record_spans", "kafka.parse_offset_commits"))
def test_parse_offset_commits_kinds(spans: Any, parse: Any) -> None:
    records = [offset_commit("grp", "orders", 3, 42, ts=7), offset_commit("grp", "orders", 4, None),
               group_metadata("grp", 1),
               SimpleRecord(value=b"x", key=offset_commit("grp", "orders", 5, 1).key, timestamp=1)]
    buf, bs, be, cnt = _bodies(encode_batch(records))
    sp = spans(buf, bs, be, cnt)
    out = parse(buf, sp["key_start"], sp["key_len"], sp["val_start"], sp["val_len"])
    assert out["kind"].tolist() == [KIND_COMMIT, KIND_TOMBSTONE, KIND_OTHER, KIND_BAD]
    raw = buf.tobytes()
    assert raw[out["group_start"][0]:out["group_start"][0] + out["group_len"][0]] == b"grp"
    assert raw[out["topic_start"][0]:out["topic_start"][0] + out["topic_len"][0]] == b"orders"
    assert (int(out["partition"][0]), int(out["offset"][0]), int(out["commit_timestamp"][0])) == (3, 42, 7)


@pytest.mark.parametrize("fate", twins("kafka.transaction_fate"))
def test_transaction_fate_of_committed_aborted_and_open(fate: Any) -> None:
    # pid 1: a txn batch then its commit; pid 2: a txn batch then an abort; pid 3: still open; pid 4: plain data
    pid = np.array([1, 2, 3, 1, 2, 4], np.int64)
    is_txn = np.array([True, True, True, True, True, False])
    is_marker = np.array([False, False, False, True, True, False])
    commit = np.array([False, False, False, True, False, False])
    # (markers are control batches, not data: never "visible")
    assert fate(pid, is_txn, is_marker, commit).tolist() == [True, False, False, False, False, True]


@settings(max_examples=80, deadline=None)
@given(st.lists(st.tuples(st.integers(0, 3), st.sampled_from(["data", "txn", "commit", "abort"])), max_size=40))
def test_transaction_fate_matches_twin(ops: list[tuple[int, str]]) -> None:
    pid = np.array([p for p, _ in ops], np.int64)
    is_txn = np.array([o != "data" for _, o in ops], np.bool_)
    is_marker = np.array([o in ("commit", "abort") for _, o in ops], np.bool_)
    commit = np.array([o == "commit" for _, o in ops], np.bool_)
    assert np.array_equal(transaction_fate(pid, is_txn, is_marker, commit),
                          transaction_fate_py(pid, is_txn, is_marker, commit))


_op = st.one_of(
    st.tuples(st.just("commit"), st.sampled_from(["g1", "g2"]), st.integers(0, 2), st.integers(0, 99)),
    st.tuples(st.just("delete"), st.sampled_from(["g1", "g2"]), st.integers(0, 2), st.just(0)),
    st.tuples(st.just("txn"), st.sampled_from(["g1", "g2"]), st.integers(0, 2), st.integers(0, 99)),
    st.tuples(st.just("end"), st.booleans(), st.just(0), st.just(0)),
)


@settings(max_examples=15, deadline=None, suppress_health_check=[HealthCheck.too_slow,
                                                                  HealthCheck.function_scoped_fixture])
@given(ops=st.lists(_op, min_size=1, max_size=25), compress=st.booleans())
@example(ops=[("txn", "g2", 1, 0), ("delete", "g2", 1, 0), ("end", True, 0, 0)], compress=False)
@example(ops=[("txn", "g1", 0, 5), ("commit", "g1", 0, 9), ("end", True, 0, 0)], compress=False)
@example(ops=[("commit", "g1", 0, 9), ("txn", "g1", 0, 5), ("end", True, 0, 0)], compress=False)
def test_replay_matches_a_dictionary_model(tmp_path_factory: pytest.TempPathFactory, ops: list[Any],
                                           compress: bool) -> None:
    """The group coordinator's replay (Kafka 4.x): a commit sets (group, partition) with its record's
    log position; a tombstone removes the committed offset and the open transaction's pending one;
    a COMMIT marker applies each pending offset unless a later-written commit is already there (the
    most recent record wins, whether transactional or not); ABORT drops them."""
    root: Path = tmp_path_factory.mktemp("replay")
    committed: dict[tuple[str, int], tuple[int, int]] = {}  # key -> (log position, offset)
    pending: dict[tuple[str, int], tuple[int, int]] = {}
    batches: list[Any] = []
    for pos, (op, a, b, c) in enumerate(ops):
        if op in ("commit", "delete"):
            rec = offset_commit(a, "orders", b, c if op == "commit" else None)
            batches.append(encode_batch([rec], compression=Compression.GZIP) if compress else [rec])
            if op == "commit":
                committed[(a, b)] = (pos, c)
            else:
                committed.pop((a, b), None)
                pending.pop((a, b), None)
        elif op == "txn":
            batches.append(txn_batch([offset_commit(a, "orders", b, c)], producer_id=7))
            pending[(a, b)] = (pos, c)
        else:
            batches.append(txn_marker(7, commit=a))
            if a:
                for key, (at, o) in pending.items():
                    if key not in committed or at > committed[key][0]:
                        committed[key] = (at, o)
            pending.clear()
    model = {key: o for key, (_at, o) in committed.items()}
    write_partition(root, "__consumer_offsets-0", batches)
    write_partition(root, "orders-0", [[SimpleRecord(value=b"x")] * 5])
    rep = consumer_groups(root)
    got = {(c.group, c.partition): c.offset for g in rep.groups.values() for c in g.offsets}
    assert got == model
    assert all(c.lag == (max(0, 5 - c.offset) if c.partition == 0 else None)
               for g in rep.groups.values() for c in g.offsets)


def test_key_bytes_not_valid_utf8_are_replaced(tmp_path: Path) -> None:
    key = struct.pack(">hh", 1, 2) + b"\xff\xfe" + struct.pack(">h", 1) + b"t" + struct.pack(">i", 0)
    val = offset_commit("x", "t", 0, 3).value
    write_partition(tmp_path, "__consumer_offsets-0", [[SimpleRecord(value=val, key=key, timestamp=1)]])
    rep = consumer_groups(tmp_path)
    assert [(c.group, c.offset) for g in rep.groups.values() for c in g.offsets] == [("\ufffd\ufffd", 3)]
