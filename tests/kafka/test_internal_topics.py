"""``__consumer_offsets``, ``__transaction_state`` and ``__share_group_state`` partitions written
by the project's writers: dump decodes them, ``kafka consumers`` replays the offsets topic
(commits, tombstones, transactional commits, classic and KIP-848 groups) and gives lag."""

from __future__ import annotations

import json
import struct
from pathlib import Path

import pytest
from click.testing import CliRunner
from kraft_support import (
    TOPIC_ID,
    consumer_group_records,
    group_metadata,
    offset_commit,
    tree_hash,
    txn_batch,
    txn_marker,
    write_partition,
)

from mqstore.cli.main import cli
from mqstore.errors import StoreNotFoundError
from mqstore.formats.kafka import Compression, SimpleRecord, encode_batch
from mqstore.formats.kafka.batch import batch_crc
from mqstore.formats.kafka.coordinator_records import encode_coordinator_key, encode_coordinator_value
from mqstore.storage.kafka.internal import consumer_groups


def run(*args: str) -> tuple[int, str, str]:
    r = CliRunner().invoke(cli, ["kafka", *args])
    assert r.exception is None or isinstance(r.exception, SystemExit), r.exception
    return r.exit_code, r.stdout, r.stderr


@pytest.fixture
def logdir(tmp_path: Path) -> Path:
    write_partition(tmp_path, "orders-0", [[SimpleRecord(value=b"x")] * 10])
    write_partition(tmp_path, "orders-1", [[SimpleRecord(value=b"y")] * 4])
    write_partition(tmp_path, "__consumer_offsets-0", [
        [offset_commit("g1", "orders", 0, 4), group_metadata("g1", 2)],
        [offset_commit("g1", "orders", 0, 7)],
        txn_batch([offset_commit("g1", "orders", 1, 3)], producer_id=55),
        txn_marker(55, commit=False),
        txn_batch([offset_commit("g1", "orders", 1, 2)], producer_id=56),
        txn_marker(56, commit=True),
        consumer_group_records("g2", 3, "mA"),
        [offset_commit("g2", "orders", 0, 10), offset_commit("g2", "other", 0, 1, key_version=0, value_version=1)],
        [offset_commit("g3", "orders", 0, 1), group_metadata("g3", 0)],
        [offset_commit("g3", "orders", 0, None)],  # tombstone: the commit is deleted
    ])
    write_partition(tmp_path, "__consumer_offsets-1", [
        [offset_commit("g4", "orders", 1, 1, value_version=4)],
    ])
    return tmp_path


def test_consumers_json(logdir: Path) -> None:
    before = tree_hash(logdir)
    code, out, err = run("consumers", str(logdir), "--json")
    assert code == 0, err
    groups = {g["group"]: g for g in map(json.loads, out.splitlines())}
    assert sorted(groups) == ["g1", "g2", "g3", "g4"]
    g1 = groups["g1"]
    assert (g1["kind"], g1["state"], g1["protocolType"], g1["protocol"], g1["generation"], g1["members"]) == (
        "classic", "Stable", "consumer", "range", 5, 2)
    assert [(o["topic"], o["partition"], o["offset"], o["logEndOffset"], o["lag"]) for o in g1["offsets"]] == [
        ("orders", 0, 7, 10, 3), ("orders", 1, 2, 4, 2)]  # the aborted transactional commit (3) is dropped
    assert g1["offsets"][0]["source"] == "__consumer_offsets-0@2"
    g2 = groups["g2"]
    assert (g2["kind"], g2["generation"], g2["members"], g2["state"]) == ("consumer", 3, 1, "Stable")
    assert [(o["topic"], o["offset"], o["logEndOffset"], o["lag"]) for o in g2["offsets"]] == [
        ("orders", 10, 10, 0), ("other", 1, None, None)]  # no partition dir for "other": lag unknown
    assert groups["g3"]["offsets"] == [] and groups["g3"]["state"] == "Empty"
    assert [(o["partition"], o["offset"], o["lag"]) for o in groups["g4"]["offsets"]] == [(1, 1, 3)]
    assert tree_hash(logdir) == before


def test_consumers_table_and_group_filter(logdir: Path) -> None:
    code, out, _ = run("consumers", str(logdir))
    assert code == 0
    assert "committed offsets" in out and "g1" in out and "range" in out
    code, out, _ = run("consumers", str(logdir), "--group", "g2", "--json")
    assert code == 0 and [json.loads(x)["group"] for x in out.splitlines()] == ["g2"]
    code, _out, err = run("consumers", str(logdir), "--group", "nope")
    assert code == 1 and err.startswith("error: no group 'nope'")


def test_consumers_bad_input(tmp_path: Path) -> None:
    code, _out, err = run("consumers", str(tmp_path / "missing"))
    assert code == 2 and err.startswith("error: path not found")
    write_partition(tmp_path, "orders-0", [[SimpleRecord(value=b"x")]])
    code, _out, err = run("consumers", str(tmp_path))
    assert code == 2 and "no __consumer_offsets-N partition directory" in err
    with pytest.raises(StoreNotFoundError):
        consumer_groups(tmp_path)
    # garbage records in __consumer_offsets: a warning each, the good ones still count
    write_partition(tmp_path, "__consumer_offsets-0", [
        [SimpleRecord(value=b"\x00\x03", key=b"\x00\x01\x00"), offset_commit("g", "orders", 0, 1)]])
    code, out, err = run("consumers", str(tmp_path), "--json")
    assert code == 0
    assert [json.loads(x)["offsets"][0]["lag"] for x in out.splitlines()] == [0]
    assert err.startswith("warning: undecodable __consumer_offsets record: __consumer_offsets-0 offset 0:")


def test_dump_offsets_topic_decodes(logdir: Path) -> None:
    code, out, _ = run("dump", str(logdir / "__consumer_offsets-0"), "--print-data")
    assert code == 0
    recs = [x for x in out.splitlines() if x.startswith("| offset:")]
    assert recs[0].endswith('key: {"type":"1","data":{"group":"g1","topic":"orders","partition":0}} '
                            'payload: {"version":"3","data":{"offset":4,"leaderEpoch":0,"metadata":"",'
                            '"commitTimestamp":1700000000000}}')
    assert '"members":[{"memberId":"m-0"' in recs[1]
    assert recs[-1].endswith('key: {"type":"1","data":{"group":"g3","topic":"orders","partition":0}} '
                             'payload: <DELETE>')
    assert any('"type":"8","data":{"groupId":"g2","memberId":"mA"}' in r and TOPIC_ID in r for r in recs)
    assert "endTxnMarker: ABORT" in out
    code, out, _ = run("dump", str(logdir / "__consumer_offsets-0"), "--json", "--print-data")
    rows = [json.loads(x) for x in out.splitlines()]
    dec = [r["decoded"] for r in rows if "decoded" in r]
    assert [d["type"] for d in dec][:2] == ["OffsetCommit", "GroupMetadata"]
    assert dec[1]["value"]["members"][0]["subscription"] == "AAE="  # bytes as base64 in JSON


def test_dump_forced_decoder_on_copied_dir(logdir: Path, tmp_path: Path) -> None:
    import shutil

    copy = tmp_path / "backup-0"
    shutil.copytree(logdir / "__consumer_offsets-1", copy)
    code, out, _ = run("dump", str(copy), "--print-data")
    assert code == 0 and '"type":"1"' not in out  # an ordinary topic name: no decoding
    code, out, _ = run("dump", str(copy), "--decoder", "offsets")
    assert code == 0 and '"group":"g4"' in out and '"version":"4"' in out


def test_dump_transaction_and_share_state(tmp_path: Path) -> None:
    k = encode_coordinator_key("transaction", 0, {"transactionalId": "tx-1"})
    v = encode_coordinator_value("transaction", 0, 0, {
        "producerId": 9, "producerEpoch": 3, "transactionTimeoutMs": 60000, "transactionStatus": 1,
        "transactionPartitions": None, "transactionLastUpdateTimestampMs": 5, "transactionStartTimestampMs": 4})
    write_partition(tmp_path, "__transaction_state-0", [[SimpleRecord(value=v, key=k, timestamp=1)]])
    code, out, _ = run("dump", str(tmp_path / "__transaction_state-0"), "--print-data")
    assert code == 0
    assert ('key: {"type":"0","data":{"transactionalId":"tx-1"}} payload: {"version":"0","data":{"producerId":9,'
            '"producerEpoch":3,"transactionTimeoutMs":60000,"transactionStatus":1,"transactionPartitions":null,'
            '"transactionLastUpdateTimestampMs":5,"transactionStartTimestampMs":4}}') in out
    key = {"groupId": "sg", "topicId": TOPIC_ID, "partition": 0}
    batches = [{"firstOffset": 0, "lastOffset": 9, "deliveryState": 2, "deliveryCount": 1}]
    snap = encode_coordinator_value("share-state", 0, 0, {
        "snapshotEpoch": 1, "stateEpoch": 1, "leaderEpoch": 0, "startOffset": 0, "deliveryCompleteCount": -1,
        "createTimestamp": 10, "writeTimestamp": 11, "stateBatches": batches})
    upd = encode_coordinator_value("share-state", 1, 0, {
        "snapshotEpoch": 1, "leaderEpoch": 0, "startOffset": 10, "deliveryCompleteCount": 4,
        "stateBatches": batches})
    write_partition(tmp_path, "__share_group_state-0", [[
        SimpleRecord(value=snap, key=encode_coordinator_key("share-state", 0, key), timestamp=1),
        SimpleRecord(value=upd, key=encode_coordinator_key("share-state", 1, key), timestamp=2)]])
    code, out, _ = run("dump", str(tmp_path / "__share_group_state-0"), "--json", "--decoder", "share-state")
    dec = [json.loads(x)["decoded"] for x in out.splitlines() if "decoded" in json.loads(x)]
    assert [d["type"] for d in dec] == ["ShareSnapshot", "ShareUpdate"]
    assert dec[1]["value"]["deliveryCompleteCount"] == 4 and dec[0]["value"]["stateBatches"] == batches


def test_unknown_record_type_and_value_version(tmp_path: Path) -> None:
    k = encode_coordinator_key("offsets", 1, {"group": "g", "topic": "t", "partition": 0})
    write_partition(tmp_path, "__consumer_offsets-0", [[
        SimpleRecord(value=b"\x00\x00abc", key=b"\x00\x63xyz", timestamp=1),
        SimpleRecord(value=b"\x00\x09zz", key=k, timestamp=2)]])
    code, out, _ = run("dump", str(tmp_path / "__consumer_offsets-0"), "--print-data")
    assert code == 0
    recs = [x for x in out.splitlines() if x.startswith("| offset:")]
    assert recs[0].endswith('key: {"type":"99","unknown":true,"bytes":"78797a"} payload: 0000616263')
    assert recs[1].endswith('payload: {"version":"9","unknown":true,"bytes":"7a7a"}')


def test_undecompressible_batch_is_reported_and_skipped(tmp_path: Path) -> None:
    bad = bytearray(encode_batch([offset_commit("g", "orders", 0, 9)], compression=Compression.GZIP))
    bad[70:80] = b"\x00" * 10  # break the gzip stream
    struct.pack_into(">I", bad, 17, batch_crc(bytes(bad), 0, len(bad)))  # a valid CRC over broken data
    write_partition(tmp_path, "__consumer_offsets-0", [[offset_commit("g", "orders", 0, 1)], bytes(bad)])
    write_partition(tmp_path, "orders-0", [[SimpleRecord(value=b"x")] * 3])
    code, out, err = run("consumers", str(tmp_path), "--json")
    assert code == 0
    assert [(o["offset"], o["lag"]) for o in json.loads(out)["offsets"]] == [(1, 2)]
    assert "batch at offset 1:" in err and "skipped" in err
