"""Golden tests of the RocketMQ codecs against the fixtures generated with the real Java classes
(spec §11), plus the black-box restatements of RocketMQ's own unit tests (spec §9)."""

from __future__ import annotations

import hashlib
import struct

import pytest

from mqstore.errors import CorruptDataError, UnknownMagicError
from mqstore.formats.rocketmq.checkpoint import CHECKPOINT_FILE_SIZE, Checkpoint
from mqstore.formats.rocketmq.consumequeue import decode_unit
from mqstore.formats.rocketmq.indexfile import (
    DEFAULT_MAX_MSGS_NUM_BATCH,
    IndexFileBuffer,
    IndexHeader,
    index_file_size,
)
from mqstore.formats.rocketmq.javahash import (
    INT_MIN,
    index_key_hash,
    java_string_hashcode,
    tags_code,
)
from mqstore.formats.rocketmq.msgid import create_message_id, decode_message_id
from mqstore.formats.rocketmq.properties import (
    delete_property,
    encode_properties,
    parse_properties,
    split_keys,
)
from mqstore.formats.rocketmq.record import (
    BLANK_MAGIC,
    MAGIC_V1,
    MAGIC_V2,
    Host,
    MessageRecord,
    body_crc,
    check_record,
    choose_magic,
    decode_record,
    encode_record,
)
from mqstore.kernels.rocketmq.scan import STOP_BLANK, STOP_END, scan_segment_py
from mqstore.storage.rocketmq.layout import index_file_name, index_file_name_to_ms

from .helpers import (
    CASES,
    FixtureCase,
    build_consume_queues,
    build_index_files,
    concat_batches,
    index_inputs,
    lenient_properties,
    load_case,
    scan_store,
)


@pytest.fixture(scope="module", params=CASES)
def case(request: pytest.FixtureRequest) -> FixtureCase:
    return load_case(request.param)


def _record_bytes(case: FixtureCase, offset: int) -> tuple[bytes, int]:
    for base, data in case.segments():
        if base <= offset < base + len(data):
            return data, offset - base
    raise AssertionError(f"offset {offset} outside the CommitLog")


# ----------------------------------------------------------------------------- fixture integrity
def test_fixture_files_match_manifest(case: FixtureCase) -> None:
    listed = {f["path"] for f in case.manifest["files"]}
    on_disk = {str(p.relative_to(case.store)) for p in case.store.rglob("*") if p.is_file()}
    assert listed == on_disk
    for f in case.manifest["files"]:
        data = case.store_file(f["path"])
        assert len(data) == f["size"], f["path"]
        assert hashlib.sha256(data).hexdigest() == f["sha256"], f["path"]


# ----------------------------------------------------------------------------- records
def test_every_record_decodes_with_manifest_fields(case: FixtureCase) -> None:
    prop_crc = case.config["enabledAppendPropCRC"]
    for m in case.messages:
        data, pos = _record_bytes(case, m["physicalOffset"])
        assert data[pos : pos + m["size"]].hex() == m["recordHex"], m["index"]
        res = check_record(data, pos, check_crc=True, verify_prop_crc=prop_crc)
        assert res.success and res.size == m["size"], (m["index"], res.error)
        rec = decode_record(data, pos, check_crc=True)
        assert rec.topic == m["topic"]
        assert rec.queue_id == m["queueId"]
        assert rec.queue_offset == m["queueOffset"]
        assert rec.commit_log_offset == m["physicalOffset"]
        assert rec.total_size == m["size"]
        assert rec.magic == {"v1": MAGIC_V1, "v2": MAGIC_V2}[m["magic"]]
        assert rec.sys_flag == m["sysFlag"]
        assert rec.flag == m["flag"]
        assert rec.body_crc == m["bodyCRC"] == body_crc(rec.body)
        assert rec.born_timestamp == m["bornTimestamp"]
        assert rec.store_timestamp == m["storeTimestamp"]
        assert str(rec.born_host) == m["bornHost"]
        assert str(rec.store_host) == m["storeHost"]
        assert rec.reconsume_times == m["reconsumeTimes"]
        assert rec.prepared_transaction_offset == m["preparedTransactionOffset"]
        assert rec.properties_text == m["properties"]
        assert rec.body.hex() == m["bodyHex"]
        assert rec.keys == split_keys(m["keys"])
        assert rec.uniq_key == m["uniqKey"]
        # an empty TAGS value is stored but dropped by the parser (empty value rule)
        assert rec.tags == (m["tags"] or None)
        assert Host.parse(m["bornHost"]) == rec.born_host


def test_every_record_reencodes_byte_identical(case: FixtureCase) -> None:
    prop_crc = case.config["enabledAppendPropCRC"]
    for m in case.messages:
        data, pos = _record_bytes(case, m["physicalOffset"])
        rec = decode_record(data, pos)
        if prop_crc:
            # the encoder appends the CRC tail itself and fills it in from the finished record
            rec.properties_text = delete_property(rec.properties_text, "__CRC32#")
        rec.body_crc = None  # recomputed by the encoder
        out = encode_record(rec, append_prop_crc=prop_crc)
        assert out.hex() == m["recordHex"], m["index"]
        # the same message built from the manifest's fields (hosts parsed from text)
        fresh = MessageRecord(
            topic=m["topic"],
            body=bytes.fromhex(m["bodyHex"]),
            queue_id=m["queueId"],
            flag=m["flag"],
            queue_offset=m["queueOffset"],
            commit_log_offset=m["physicalOffset"],
            sys_flag=m["sysFlag"],
            born_timestamp=m["bornTimestamp"],
            born_host=Host.parse(m["bornHost"]),
            store_timestamp=m["storeTimestamp"],
            store_host=Host.parse(m["storeHost"]),
            reconsume_times=m["reconsumeTimes"],
            prepared_transaction_offset=m["preparedTransactionOffset"],
            properties_text=delete_property(m["properties"], "__CRC32#") if prop_crc else m["properties"],
        )
        magic = {"v1": MAGIC_V1, "v2": MAGIC_V2}[m["magic"]]
        assert choose_magic(m["topic"]) == magic
        out = encode_record(fresh, magic=magic, append_prop_crc=prop_crc)
        assert out.hex() == m["recordHex"], m["index"]


def test_properties_order_reproduced_by_encoder(case: FixtureCase) -> None:
    for m in case.messages:
        text = m["properties"]
        if case.config["enabledAppendPropCRC"]:
            assert text.endswith("\x02") and "__CRC32#\x01" in text
            text = delete_property(text, "__CRC32#")
            assert "__CRC32#" not in text
        pairs = lenient_properties(text)
        parsed = parse_properties(text)
        assert parsed == {k: v for k, v in pairs if v}
        # the client's Message map (HashMap with the default capacity 16)
        assert encode_properties(dict(pairs)) == text, m["index"]
        if all(v for _, v in pairs):
            assert encode_properties(parsed) == text, m["index"]


def test_tags_and_keys_of_manifest(case: FixtureCase) -> None:
    for m in case.messages:
        props = parse_properties(m["properties"])
        assert props.get("KEYS") == m["keys"]
        assert props.get("UNIQ_KEY") == m["uniqKey"]
        assert split_keys(m["keys"]) == [k for k in (m["keys"] or "").split(" ") if k]


def test_blank_records_at_manifest_offsets(case: FixtureCase) -> None:
    seg_size = case.config["mappedFileSizeCommitLog"]
    blanks = case.manifest["blankRecords"]
    assert blanks, "every case has at least one rolled segment"
    for b in blanks:
        data, pos = _record_bytes(case, b["physicalOffset"])
        total, magic = struct.unpack_from(">ii", data, pos)
        assert magic == BLANK_MAGIC
        assert total == b["totalSize"] == seg_size - pos
        assert total >= 8
        res = check_record(data, pos)
        assert res.size == 0 and res.success
        with pytest.raises(CorruptDataError):
            decode_record(data, pos)
    scanned = [bt for bt in scan_store(case, scan_segment_py)]
    assert [bt.next_offset for bt in scanned if bt.stop == STOP_BLANK] == [b["physicalOffset"] for b in blanks]
    assert scanned[-1].stop == STOP_END


# ----------------------------------------------------------------------------- scan → CQ / index
def test_scan_matches_manifest_messages(case: FixtureCase) -> None:
    cols = concat_batches(list(scan_store(case, scan_segment_py, check_crc=True)))
    msgs = case.messages
    assert cols["off"] == [m["physicalOffset"] for m in msgs]
    assert cols["size"] == [m["size"] for m in msgs]
    assert cols["topic"] == [m["topic"] for m in msgs]
    assert cols["ts"] == [m["storeTimestamp"] for m in msgs]
    assert cols["qoff"] == [m["queueOffset"] for m in msgs]
    for i, m in enumerate(msgs):
        props = parse_properties(m["properties"])
        expect = tags_code(m["topic"], props.get("TAGS"), props.get("DELAY"), m["storeTimestamp"])
        assert cols["tags"][i] == expect
    # index keys: uniq key first, then every non-empty KEYS piece
    expected_hashes = []
    for m in msgs:
        if m["uniqKey"] is not None:
            expected_hashes.append(index_key_hash(f"{m['topic']}#{m['uniqKey']}"))
        expected_hashes += [index_key_hash(f"{m['topic']}#{k}") for k in split_keys(m["keys"])]
    assert cols["key_hash"].tolist() == expected_hashes


def test_consume_queues_rebuilt_byte_for_byte(case: FixtureCase) -> None:
    cols = concat_batches(list(scan_store(case, scan_segment_py)))
    files = build_consume_queues(cols, case.config["mappedFileSizeConsumeQueue"])
    expected_files = {f["path"] for f in case.manifest["files"] if f["path"].startswith("consumequeue/")}
    assert set(files) == expected_files
    for rel, data in files.items():
        assert data == case.store_file(rel), rel
    # and the units equal the manifest's
    for q in case.manifest["consumeQueues"]:
        units = q["units_queueOffset_phyOffset_size_tagsCode"]
        prefix = f"consumequeue/{q['topic']}/{q['queueId']}/"
        blob = b"".join(files[k] for k in sorted(files) if k.startswith(prefix))
        for qoff, phy, size, tags in units:
            u = decode_unit(blob, qoff * 20)
            assert (u.commit_log_offset, u.size, u.tags_code) == (phy, size, tags)


def test_index_files_rebuilt_byte_for_byte_reference(case: FixtureCase) -> None:
    cols = concat_batches(list(scan_store(case, scan_segment_py)))
    kh, phy, ts = index_inputs(cols)
    slots, items = case.config["maxHashSlotNum"], case.config["maxIndexNum"]
    assert index_file_size(slots, items) == case.config["indexFileSize"]
    built = build_index_files(kh, phy, ts, slots, items)
    expected = case.manifest["indexFiles"]
    assert [name for name, _ in built] == [f["name"] for f in expected]
    for (name, data), meta in zip(built, expected, strict=True):
        assert data == case.store_file(f"index/{name}"), name
        h = IndexHeader.decode(data)
        assert (h.begin_timestamp, h.end_timestamp, h.begin_phy_offset, h.end_phy_offset) == (
            meta["beginTimestamp"],
            meta["endTimestamp"],
            meta["beginPhyOffset"],
            meta["endPhyOffset"],
        )
        assert (h.hash_slot_count, h.index_count) == (meta["hashSlotCount"], meta["indexCount"])
        assert name == index_file_name(h.begin_timestamp) or index_file_name_to_ms(name) > h.begin_timestamp
        first = IndexFileBuffer(bytearray(data), slots, items).read_item(1)
        assert first[2] == meta["firstItemTimeDiff"]
        assert (h.index_count >= items) == meta["full"]


def _index_files(case: FixtureCase) -> list[tuple[str, IndexFileBuffer]]:
    slots, items = case.config["maxHashSlotNum"], case.config["maxIndexNum"]
    names = [f["name"] for f in case.manifest["indexFiles"]]
    return [(n, IndexFileBuffer(bytearray(case.store_file(f"index/{n}")), slots, items)) for n in names]


def test_queries_replayed(case: FixtureCase) -> None:
    files = _index_files(case)
    cap = case.config["maxMsgsNumBatch"]
    assert cap == DEFAULT_MAX_MSGS_NUM_BATCH
    assert case.manifest["queries"]
    for q in case.manifest["queries"]:
        assert q["indexKey"] == f"{q['topic']}#{q['key']}"
        max_num = min(q["maxNum"], cap)
        by_name = dict(files)
        for pf in q["perFile"]:
            f = by_name[pf["file"]]
            assert f.is_time_matched(q["begin"], q["end"]) == pf["isTimeMatched"], (q["indexKey"], pf)
            out: list[int] = []
            f.select_phy_offset(out, q["indexKey"], max_num, q["begin"], q["end"])
            assert out == pf["selectPhyOffset"], (q["indexKey"], pf)
        # IndexService.queryOffset: newest file first, one shared list
        shared: list[int] = []
        newest = files[-1][1].header
        assert (newest.end_timestamp, newest.end_phy_offset) == (
            q["indexLastUpdateTimestamp"],
            q["indexLastUpdatePhyoffset"],
        )
        for _, f in reversed(files):
            if f.is_time_matched(q["begin"], q["end"]):
                f.select_phy_offset(shared, q["indexKey"], max_num, q["begin"], q["end"])
            if f.header.begin_timestamp < q["begin"] or len(shared) >= max_num:
                break
        assert shared == q["queryOffset_phyOffsets"], q["indexKey"]
        assert sorted(shared) == q["storeSortedOffsets"]
        # the client's exact filter: same topic and the key among the KEYS pieces (or the uniq key)
        exact = []
        for off in sorted(shared):
            data, pos = _record_bytes(case, off)
            rec = decode_record(data, pos)
            if rec.topic == q["topic"] and (q["key"] in rec.keys or rec.uniq_key == q["key"]):
                exact.append(off)
        assert exact == q["exactMatchOffsets"], q["indexKey"]


def test_checkpoint_bytes(case: FixtureCase) -> None:
    data = case.store_file("checkpoint")
    assert len(data) == CHECKPOINT_FILE_SIZE
    cp = Checkpoint.decode(data)
    m = case.manifest["checkpoint"]
    assert cp.physic_msg_timestamp == m["physicMsgTimestamp"]
    assert cp.logics_msg_timestamp == m["logicsMsgTimestamp"]
    assert cp.index_msg_timestamp == m["indexMsgTimestamp"]
    assert cp.master_flushed_offset == m["masterFlushedOffset"]
    assert cp.confirm_phy_offset == m["confirmPhyOffset"]
    assert cp.encode() == data


def test_special_hashes_present_in_fixtures(case: FixtureCase) -> None:
    assert java_string_hashcode("TopicTest#q493u|ke") == INT_MIN
    assert index_key_hash("TopicTest#q493u|ke") == 0
    assert java_string_hashcode("polygenelubricants") == INT_MIN
    assert tags_code("T", "polygenelubricants", None, 0) == -2147483648
    assert java_string_hashcode("TagNeg") < 0
    assert java_string_hashcode("AaTopic#BB") == java_string_hashcode("BBTopic#BB")
    assert java_string_hashcode("AaAa") == java_string_hashcode("BBBB")
    tags = {m["tags"] for m in case.messages}
    assert {"polygenelubricants", "TagNeg"} <= tags


def test_delay_topic_tags_code(case: FixtureCase) -> None:
    delayed = [m for m in case.messages if m["topic"] == "SCHEDULE_TOPIC_XXXX"]
    assert delayed
    levels = {1: 1000, 2: 5000, 3: 10_000, 4: 30_000, 5: 60_000}
    units = {
        (q["topic"], q["queueId"], u[0]): u[3]
        for q in case.manifest["consumeQueues"]
        for u in q["units_queueOffset_phyOffset_size_tagsCode"]
    }
    for m in delayed:
        level = int(parse_properties(m["properties"])["DELAY"])
        if m["sysFlag"] & 0xC in (0, 8):
            assert units[(m["topic"], m["queueId"], m["queueOffset"])] == m["storeTimestamp"] + levels[level]


# ----------------------------------------------------------------------------- spec §9.11 (common)
NUL1, NUL2 = "\x01", "\x02"
PARSE_CASES = [
    ("k1\x01v1", {"k1": "v1"}),
    ("", {}),
    (" ", {}),
    ("aaa", {}),
    ("k1\x01", {}),
    ("\x01v1", {}),
    ("k1\x01v1\x02", {"k1": "v1"}),
    ("k1\x01v1\x02k2\x01v2", {"k1": "v1", "k2": "v2"}),
    ("k1\x01v1\x02\x01v2", {"k1": "v1"}),
    ("k1\x01v1\x02k2\x01", {"k1": "v1"}),
    ("\x01v1\x02k2\x01v2", {"k2": "v2"}),
    ("k1\x01\x02k2\x01v2", {"k2": "v2"}),
    ("1\x011\x022\x012", {"1": "1", "2": "2"}),
    ("1\x01\x022\x012", {"2": "2"}),
    ("\x011\x022\x012", {"2": "2"}),
    ("1\x011\x022\x01", {"1": "1"}),
    ("1\x011\x02\x012", {"1": "1"}),
    ("a\x011\x02a\x012", {"a": "2"}),  # later duplicates win
]


@pytest.mark.parametrize(("text", "expected"), PARSE_CASES)
def test_string2message_properties(text: str, expected: dict[str, str]) -> None:
    assert parse_properties(text) == expected


@pytest.mark.parametrize(
    ("text", "name", "expected"),
    [
        ("KeyA\x01ValueA\x02KeyB\x01ValueB", "KeyA", "KeyB\x01ValueB"),
        ("KeyB\x01ValueB\x02KeyA\x01ValueA", "KeyA", "KeyB\x01ValueB\x02"),
        ("__CRC32#\x01", "__CRC32#", ""),
        ("__CRC32#", "__CRC32#", "__CRC32#"),
        ("XKeyA\x01v\x02KeyA\x01w\x02", "KeyA", "XKeyA\x01v\x02"),
        ("KeyA\x01v\x02KeyA\x01w", "KeyA", ""),
    ],
)
def test_delete_property(text: str, name: str, expected: str) -> None:
    assert delete_property(text, name) == expected


@pytest.mark.parametrize("host", ["127.0.0.1:9103", "[::1]:9103"])
def test_message_decoder_round_trip(host: str) -> None:
    props = {"a": "123", "b": "hello", "c": "3.14", "n": None}
    text = encode_properties(props)
    assert "n\x01" not in text
    rec = MessageRecord(
        topic="abc",
        body=b"hello!q!",
        queue_id=1,
        commit_log_offset=123456,
        born_host=Host.parse(host),
        store_host=Host.parse(host),
        properties_text=text,
    )
    data = encode_record(rec, magic=MAGIC_V1)
    back = decode_record(data, check_crc=True)
    assert back.properties == {"a": "123", "b": "hello", "c": "3.14"}
    assert back.topic == "abc" and back.body == b"hello!q!" and back.queue_id == 1
    assert back.commit_log_offset == 123456
    msg_id = create_message_id(back.store_host, back.commit_log_offset)
    assert len(msg_id) == (32 if host.startswith("127") else 56)
    assert decode_message_id(msg_id) == (Host.parse(host), 123456)


def test_unknown_magic_is_typed_error() -> None:
    data = bytearray(encode_record(MessageRecord(topic="t", body=b"x")))
    struct.pack_into(">i", data, 4, 0x12345678)
    with pytest.raises(UnknownMagicError):
        decode_record(data)


def test_prop_crc_flip_fails_verification() -> None:
    rec = MessageRecord(topic="t", body=b"body", properties_text=encode_properties({"TAGS": "abc"}))
    data = bytearray(encode_record(rec, append_prop_crc=True))
    assert check_record(data, verify_prop_crc=True).success
    props_start = len(data) - len(rec.properties_text) - 20
    data[props_start + 2] ^= 0x01
    assert not check_record(data, verify_prop_crc=True).success


# ----------------------------------------------------------------------------- spec §9.1, §9.3
def test_index_file_put_key_capacity_and_select() -> None:
    buf = bytearray(index_file_size(100, 400))
    f = IndexFileBuffer(buf, 100, 400, load=False)
    now = 1_700_000_000_000
    for i in range(399):
        assert f.put_key(str(i), i, now)
    assert f.is_write_full()
    assert not f.put_key("400", 400, now)
    out: list[int] = []
    f.select_phy_offset(out, "60", 10, 0, 2**63 - 1)
    assert out == [60]
    assert f.header.index_count == 400


def test_index_file_first_item_time_diff_quirk() -> None:
    buf = bytearray(index_file_size(10, 10))
    f = IndexFileBuffer(buf, 10, 10, load=False)
    f.carry_over(500, 1_700_000_000_000)
    assert f.put_hash(3, 600, 1_700_000_005_500)
    assert f.read_item(1) == (3, 600, 5, 0)  # relative to the carried-over timestamp
    assert f.header.begin_timestamp == 1_700_000_005_500
    assert f.header.begin_phy_offset == 600
    assert IndexHeader.decode(buf).begin_timestamp == 1_700_000_005_500  # written through


def test_checkpoint_round_trip() -> None:
    cp = Checkpoint(physic_msg_timestamp=0xAABB, logics_msg_timestamp=0xCCDD)
    data = cp.encode()
    assert len(data) == 4096
    back = Checkpoint.decode(data)
    assert (back.physic_msg_timestamp, back.logics_msg_timestamp) == (43707, 52445)
    assert back.physic_msg_timestamp - back.min_timestamp() == 3000


def test_index_file_name() -> None:
    assert index_file_name(1700000000487) == "20231114221320487"
    assert index_file_name_to_ms("20231114221320487") == 1700000000487
