"""`mqstore kafka dump` prints what Kafka's kafka-dump-log prints (issue 12.8): booleans, KRaft
control records (types 2–6, Kafka's message schemas), deleteHorizonMs, legacy batches, trailing bytes."""

from __future__ import annotations

from pathlib import Path

import pytest
from click.testing import CliRunner
from hypothesis import given
from hypothesis import strategies as st

from mqstore.cli.main import cli
from mqstore.errors import CorruptDataError
from mqstore.formats.kafka import SimpleRecord, encode_batch
from mqstore.formats.kafka.batch import encode_legacy_message
from mqstore.formats.kafka.kraft_control import (
    control_key,
    decode_kraft_control,
    encode_kraft_control,
    kraft_control_text,
)

i16 = st.integers(-(1 << 15), (1 << 15) - 1)
i32 = st.integers(-(1 << 31), (1 << 31) - 1)
uuids = st.binary(min_size=16, max_size=16).map(
    lambda b: __import__("base64").urlsafe_b64encode(b).decode().rstrip("="))
voter = st.fixed_dictionaries({"voterId": i32})
kraft_voter = st.fixed_dictionaries({
    "voterId": i32, "voterUuid": uuids,
    "endpoints": st.lists(st.fixed_dictionaries({"name": st.text(max_size=20), "host": st.text(max_size=40),
                                                 "port": st.integers(0, 65535)}), max_size=3),
    "kRaftVersionFeature": st.fixed_dictionaries({"minSupportedVersion": i16, "maxSupportedVersion": i16})})
VALUES = {
    2: st.fixed_dictionaries({"version": i16, "leaderId": i32, "voters": st.lists(voter, max_size=5),
                              "grantingVoters": st.lists(voter, max_size=5)}),
    3: st.fixed_dictionaries({"version": i16, "lastContainedLogTimestamp": st.integers(-(1 << 63), (1 << 63) - 1)}),
    4: st.fixed_dictionaries({"version": i16}),
    5: st.fixed_dictionaries({"version": i16, "kRaftVersion": i16}),
    6: st.fixed_dictionaries({"version": i16, "voters": st.lists(kraft_voter, max_size=3)}),
}


@pytest.mark.parametrize("ctype", sorted(VALUES))
def test_kraft_control_round_trip(ctype: int) -> None:
    @given(VALUES[ctype])
    def check(fields: dict) -> None:
        data = encode_kraft_control(ctype, fields)
        assert decode_kraft_control(ctype, data) == fields
        with pytest.raises(CorruptDataError):
            decode_kraft_control(ctype, data[:-1])
        with pytest.raises(CorruptDataError):
            decode_kraft_control(ctype, data + b"\0")

    check()


def test_kraft_control_exact_bytes_and_tagged_fields() -> None:
    # LeaderChange v0: version 0, leader 1, voters [1,2,3], granting [1,2]; flexible encoding
    data = encode_kraft_control(2, {"version": 0, "leaderId": 1, "voters": [{"voterId": v} for v in (1, 2, 3)],
                                    "grantingVoters": [{"voterId": 1}, {"voterId": 2}]})
    assert data.hex() == ("0000" "00000001" "04" "0000000100" "0000000200" "0000000300"
                          "03" "0000000100" "0000000200" "00")
    # an unknown tagged field (tag 7, 2 bytes) at the end of the message is skipped
    tagged = data[:-1] + bytes([1, 7, 2, 0xAB, 0xCD])
    assert decode_kraft_control(2, tagged)["grantingVoters"] == [{"voterId": 1}, {"voterId": 2}]


def _control_batch(base: int, ctype: int, fields: dict) -> bytes:
    rec = SimpleRecord(value=encode_kraft_control(ctype, fields), key=control_key(ctype), timestamp=1_700_000_000_000)
    return encode_batch([rec], base_offset=base, is_control=True, partition_leader_epoch=3)


def test_dump_kraft_control_records(tmp_path: Path) -> None:
    part = tmp_path / "__cluster_metadata-0"
    part.mkdir()
    voters = {"version": 0, "voters": [{"voterId": 1, "voterUuid": "AAECAwQFBgcICQoLDA0ODw",
                                        "endpoints": [{"name": "CONTROLLER", "host": "ctl-1", "port": 9093}],
                                        "kRaftVersionFeature": {"minSupportedVersion": 0, "maxSupportedVersion": 1}}]}
    data = (_control_batch(0, 3, {"version": 0, "lastContainedLogTimestamp": 1_700_000_000_123})
            + _control_batch(1, 5, {"version": 0, "kRaftVersion": 1})
            + _control_batch(2, 6, voters)
            + _control_batch(3, 2, {"version": 0, "leaderId": 1, "voters": [{"voterId": 1}],
                                    "grantingVoters": [{"voterId": 1}]})
            + _control_batch(4, 4, {"version": 0})
            + encode_batch([SimpleRecord(value=b"\x00", key=control_key(9), timestamp=1)], base_offset=5,
                           is_control=True)
            + encode_batch([SimpleRecord(value=b"\x07", key=control_key(2), timestamp=1)], base_offset=6,
                           is_control=True))
    log = part / "00000000000000000000.log"
    log.write_bytes(data)
    r = CliRunner().invoke(cli, ["kafka", "dump", str(log), "--print-data"])
    assert r.exit_code == 0
    recs = [x.split("headerKeys: [] ", 1)[1] for x in r.stdout.splitlines() if x.startswith("| offset:")]
    assert recs == [
        'SnapshotHeader {"version":0,"lastContainedLogTimestamp":1700000000123}',
        'KRaftVersion {"version":0,"kRaftVersion":1}',
        'KRaftVoters {"version":0,"voters":[{"voterId":1,"voterUuid":"AAECAwQFBgcICQoLDA0ODw","endpoints":'
        '[{"name":"CONTROLLER","host":"ctl-1","port":9093}],"kRaftVersionFeature":{"minSupportedVersion":0,'
        '"maxSupportedVersion":1}}]}',
        'LeaderChange: {"version":0,"leaderId":1,"voters":[{"voterId":1}],"grantingVoters":[{"voterId":1}]}',
        'SnapshotFooter {"version":0}',
        "controlType: UNKNOWN(9)",
        "LeaderChange: invalid value (LeaderChange: truncated (2 bytes needed, 1 left) at byte 0)",
    ]
    first = r.stdout.splitlines()[2]
    assert first == ("baseOffset: 0 lastOffset: 0 count: 1 baseSequence: -1 lastSequence: -1 producerId: -1 "
                     "producerEpoch: -1 partitionLeaderEpoch: 3 isTransactional: false isControl: true "
                     "deleteHorizonMs: OptionalLong.empty position: 0 CreateTime: 1700000000000 size: "
                     f"{len(_control_batch(0, 3, {'version': 0, 'lastContainedLogTimestamp': 1_700_000_000_123}))} "
                     f"magic: 2 compresscodec: none crc: {first.split('crc: ')[1].split()[0]} isvalid: true")
    assert kraft_control_text(4, {"version": 0}) == 'SnapshotFooter {"version":0}'


def test_dump_delete_horizon_legacy_trailing_bytes_and_absent_key(tmp_path: Path) -> None:
    part = tmp_path / "t-0"
    part.mkdir()
    compacted = encode_batch([SimpleRecord(value=None, key=b"gone", timestamp=1_700_000_000_000)], base_offset=0,
                             delete_horizon_ms=1_700_086_400_000)
    plain = encode_batch([SimpleRecord(value=b"v", key=None, timestamp=1_700_000_000_001)], base_offset=1)
    log = part / "00000000000000000000.log"
    log.write_bytes(compacted + plain + b"\0\0\0")
    r = CliRunner().invoke(cli, ["kafka", "dump", str(log), "--print-data"])
    lines = r.stdout.splitlines()
    assert r.exit_code == 0
    assert lines[0] == f"Dumping {log}" and lines[1] == "Log starting offset: 0"
    assert " deleteHorizonMs: OptionalLong[1700086400000] " in lines[2]
    assert lines[3] == "| offset: 0 CreateTime: 1700000000000 keySize: 4 valueSize: -1 sequence: -1 headerKeys: [] key: gone"
    assert " deleteHorizonMs: OptionalLong.empty " in lines[4]
    assert lines[5] == "| offset: 1 CreateTime: 1700000000001 keySize: -1 valueSize: 1 sequence: -1 headerKeys: [] payload: v"
    assert lines[6] == "Found 3 invalid bytes at the end of 00000000000000000000.log"
    legacy = tmp_path / "l-0"
    legacy.mkdir()
    m1 = encode_legacy_message(0, b"hello", b"k", magic=1, timestamp=1_600_000_000_000)
    m0 = encode_legacy_message(1, b"old", None, magic=0)
    (legacy / "00000000000000000000.log").write_bytes(m1 + m0)
    r = CliRunner().invoke(cli, ["kafka", "dump", str(legacy / "00000000000000000000.log"), "--print-data"])
    lines = r.stdout.splitlines()
    assert lines[2].startswith(f"offset: 0 position: 0 CreateTime: 1600000000000 size: {len(m1)} magic: 1 "
                               "compresscodec: none crc: ")
    assert lines[2].endswith(" isvalid: true")
    assert lines[3] == "| offset: 0 CreateTime: 1600000000000 keySize: 1 valueSize: 5 key: k payload: hello"
    assert lines[4].startswith(f"offset: 1 position: {len(m1)} NoTimestampType: -1 size: {len(m0)} magic: 0 ")
    assert lines[5] == "| offset: 1 NoTimestampType: -1 keySize: -1 valueSize: 3 payload: old"
