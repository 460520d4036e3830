"""Golden tests of the storage/API layers over the RocketMQ fixtures made with the real classes."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from mqstore import MessageStore, StoreConfig
from mqstore.formats.rocketmq.properties import split_keys
from mqstore.storage.rocketmq.rebuild import compare_trees, rebuild_indexes
from mqstore.storage.rocketmq.verify import verify_store

CASES = ["basic", "prop_crc"]


def load(shared_fixtures: Path, case: str) -> tuple[Path, dict, StoreConfig]:
    root = shared_fixtures / "rocketmq" / case
    m = json.loads((root / "manifest.json").read_text())
    c = m["config"]
    cfg = StoreConfig(commit_log_file_size=c["mappedFileSizeCommitLog"], consume_queue_file_size=c["mappedFileSizeConsumeQueue"],
                      hash_slot_num=c["maxHashSlotNum"], index_num=c["maxIndexNum"], background_services=False,
                      enabled_append_prop_crc=c["enabledAppendPropCRC"])
    return root / "store", m, cfg


@pytest.mark.parametrize("case", CASES)
def test_rebuild_is_byte_identical(shared_fixtures: Path, tmp_path: Path, case: str) -> None:
    store, m, cfg = load(shared_fixtures, case)
    stats = rebuild_indexes(store, tmp_path, config=cfg)
    assert stats.messages == len(m["messages"])
    assert compare_trees(store, tmp_path) == []
    assert (tmp_path / "checkpoint").read_bytes() == (store / "checkpoint").read_bytes()
    names = sorted(p.name for p in (tmp_path / "index").iterdir())
    assert names == [f["name"] for f in m["indexFiles"]]


@pytest.mark.parametrize("case", CASES)
def test_rebuild_in_place(shared_fixtures: Path, tmp_path: Path, case: str) -> None:
    store, _m, cfg = load(shared_fixtures, case)
    copy = tmp_path / "store"
    shutil.copytree(store, copy)
    shutil.rmtree(copy / "index")
    shutil.rmtree(copy / "consumequeue" / "TopicTest")
    rebuild_indexes(copy, None, config=cfg)
    assert compare_trees(store, copy) == []
    assert not [p for p in copy.iterdir() if p.name.startswith(".rebuild")]


@pytest.mark.parametrize("case", CASES)
def test_messages_and_queries(shared_fixtures: Path, case: str) -> None:
    store, m, cfg = load(shared_fixtures, case)
    by_offset = {x["physicalOffset"]: x for x in m["messages"]}
    with MessageStore.open(store, cfg, read_only=True) as s:
        for x in m["messages"]:
            got = s.get_by_offset(x["physicalOffset"])
            assert (got.topic, got.queue_id, got.queue_offset, got.size, got.sys_flag) == (
                x["topic"], x["queueId"], x["queueOffset"], x["size"], x["sysFlag"])
            assert got.store_host == x["storeHost"] and got.born_host == x["bornHost"]
            assert got.body.hex() == x["bodyHex"]
        for cq in m["consumeQueues"]:
            units = cq["units_queueOffset_phyOffset_size_tagsCode"]
            msgs = s.get(cq["topic"], cq["queueId"], 0, 10_000)
            assert [mm.commit_log_offset for mm in msgs] == [u[1] for u in units]
        for q in m["queries"]:
            assert s.query_offsets_broker(q["topic"], q["key"], q["maxNum"], q["begin"], q["end"]) == q["queryOffset_phyOffsets"]
            exact = s.query_by_key(q["topic"], q["key"], q["begin"], q["end"])
            want = sorted(
                off for off, x in by_offset.items()
                if x["topic"] == q["topic"] and x["sysFlag"] & 0xC != 0xC  # rolled back: never indexed
                and q["begin"] <= x["storeTimestamp"] <= q["end"]
                and (q["key"] in split_keys(x["keys"]) or x["uniqKey"] == q["key"])
            )
            assert sorted(mm.commit_log_offset for mm in exact) == want
            assert set(q["exactMatchOffsets"]) <= set(want)


@pytest.mark.parametrize("case", CASES)
def test_fixture_store_verifies_clean(shared_fixtures: Path, case: str) -> None:
    store, m, cfg = load(shared_fixtures, case)
    rep = verify_store(store, cfg)
    assert rep.ok, rep.problems
    assert rep.messages == len(m["messages"])


def test_verify_reports_corruption(shared_fixtures: Path, tmp_path: Path) -> None:
    store, m, cfg = load(shared_fixtures, "basic")
    copy = tmp_path / "store"
    shutil.copytree(store, copy)
    x = m["messages"][10]
    seg_size = cfg.commit_log_file_size
    seg = copy / "commitlog" / f"{x['physicalOffset'] // seg_size * seg_size:020d}"
    pos = x["physicalOffset"] % seg_size
    data = bytearray(seg.read_bytes())
    data[pos + 88] ^= 0xFF  # flip a body byte: CRC mismatch
    seg.write_bytes(bytes(data))
    rep = verify_store(copy, cfg)
    assert not rep.ok
    assert any(str(x["physicalOffset"]) in p for p in rep.problems)
