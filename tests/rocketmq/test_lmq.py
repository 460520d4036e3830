"""LMQ / multi-dispatch (issue 20 item 2, docs/formats/rocketmq-lmq.md): the property codec, the put
side (queue offsets assigned the broker's way and written into the record), the dispatch into
``consumequeue/%LMQ%<name>/0/`` (checked against units built from the documented layout), live
dispatch vs ``rebuild-index`` byte for byte, recovery of the LMQ queue table, reading, consumers,
and bad input (typed errors, verify problems, never a traceback)."""

from __future__ import annotations

import hashlib
import json
import shutil
import struct
from pathlib import Path

import pytest
from click.testing import CliRunner
from hypothesis import given
from hypothesis import strategies as st

from mqstore.api.rocketmq import MessageStore
from mqstore.cli.main import cli
from mqstore.errors import InvalidArgumentError
from mqstore.formats.rocketmq.javahash import java_string_hashcode
from mqstore.formats.rocketmq.lmq import (
    MalformedMultiDispatchError,
    dispatch_pairs,
    format_multi_dispatch,
    format_queue_offsets,
    java_split,
    parse_multi_dispatch,
    parse_queue_offset,
    parse_queue_offsets,
)
from mqstore.storage.rocketmq.config import StoreConfig
from mqstore.storage.rocketmq.queue_table import queue_offset_duplicates
from mqstore.storage.rocketmq.rebuild import rebuild_indexes
from mqstore.storage.rocketmq.verify import verify_store, verify_store_reference

MD, MO = "INNER_MULTI_DISPATCH", "INNER_MULTI_QUEUE_OFFSET"
CQ_FILE = 20 * 8  # small ConsumeQueue files: LMQ queues roll over several files


def cfg(**kw: object) -> StoreConfig:
    base: dict[str, object] = dict(enable_lmq=True, enable_multi_dispatch=True, commit_log_file_size=64 * 1024,
                                   consume_queue_file_size=CQ_FILE, hash_slot_num=64, index_num=400,
                                   background_services=False)
    base.update(kw)
    return StoreConfig(**base)  # type: ignore[arg-type]


def tree(root: Path, sub: str) -> dict[str, str]:
    base = root / sub
    return {str(p.relative_to(base)): hashlib.sha256(p.read_bytes()).hexdigest()
            for p in sorted(base.rglob("*")) if p.is_file()}


def run(*args: str):
    return CliRunner().invoke(cli, list(args), catch_exceptions=False)


# ------------------------------------------------------------------------------------ codec
names_st = st.lists(st.from_regex(r"%LMQ%[A-Za-z0-9_|%-]{1,12}", fullmatch=True), min_size=1, max_size=8)


@given(names_st, st.lists(st.one_of(st.none(), st.integers(0, 2**63 - 1)), min_size=1, max_size=8))
def test_codec_round_trip(names: list[str], offsets: list[int | None]) -> None:
    assert parse_multi_dispatch(format_multi_dispatch(names)) == names
    text = format_queue_offsets(offsets)
    pieces = parse_queue_offsets(text)
    want = ["" if o is None else str(o) for o in offsets]
    if "," in text:
        while want and want[-1] == "":  # Java's split drops trailing empty pieces
            want.pop()
    assert pieces == want
    full = [o if o is not None else 0 for o in offsets][: len(names)]
    got, problems = dispatch_pairs(format_multi_dispatch(names[: len(full)]), format_queue_offsets(full))
    assert problems == [] and got == list(zip(names[: len(full)], full, strict=True))


@given(st.text(alphabet=",ab", max_size=12))
def test_split_is_javas(value: str) -> None:
    parts = java_split(value)
    if "," not in value:
        assert parts == [value]
    else:
        assert ",".join(parts) == value.rstrip(",")
        assert not parts or parts[-1] != ""


@pytest.mark.parametrize("text", ["", "x", "1.5", " 1", "1 ", "9223372036854775808", "--1", "+"])
def test_bad_offsets_are_typed_errors(text: str) -> None:
    with pytest.raises(MalformedMultiDispatchError):
        parse_queue_offset(text)


def test_dispatch_pairs_follow_the_brokers_order_of_checks() -> None:
    assert dispatch_pairs("%LMQ%a,%LMQ%b", "3")[0] == []  # counts differ: nothing
    got, why = dispatch_pairs("%LMQ%a,%LMQ%b,%LMQ%c", "1,x,3")  # parseLong throws at b: a only
    assert got == [("%LMQ%a", 1)] and "not a number" in why[0]
    got, why = dispatch_pairs("%LMQ%a/b,%LMQ%c", "x,4")  # a name with '/' is skipped before parsing
    assert got == [("%LMQ%c", 4)] and "'/'" in why[0]
    assert dispatch_pairs("%LMQ%a,%LMQ%b,", "1,2,")[0] == [("%LMQ%a", 1), ("%LMQ%b", 2)]


# ------------------------------------------------------------------------------------ put + dispatch
def put_lmq(s: MessageStore, n: int) -> list[tuple[object, list[str], str]]:
    """Messages of two topics naming one, two or three LMQ queues; returns (result, names, tags)."""
    out = []
    for i in range(n):
        names = ["%LMQ%all"] + (["%LMQ%odd"] if i % 2 else []) + (["%LMQ%third"] if i % 3 == 0 else [])
        tags = f"tag{i % 4}"
        r = s.put(f"T{i % 2}", b"body-%d" % i, queue_id=i % 3, tags=tags, keys=[f"k{i}"],
                  properties={MD: ",".join(names)})
        out.append((r, names, tags))
    return out


def expected_units(puts: list[tuple[object, list[str], str]]) -> dict[str, list[tuple[int, int, int, int]]]:
    """(queue offset, CommitLog offset, size, tags code) per LMQ queue, from the put results."""
    want: dict[str, list[tuple[int, int, int, int]]] = {}
    for r, names, tags in puts:
        for n in names:
            units = want.setdefault(n, [])
            units.append((len(units), r.commit_log_offset, r.size, java_string_hashcode(tags)))  # type: ignore[attr-defined]
    return want


def cq_bytes(root: Path, name: str) -> bytes:
    files = sorted((root / "consumequeue" / name / "0").iterdir())
    assert all(len(f.name) == 20 and int(f.name) % CQ_FILE == 0 for f in files)
    data = b"".join(f.read_bytes() for f in files)
    return data.rstrip(b"\0") if data else data


def test_put_assigns_offsets_and_dispatch_writes_the_lmq_queues(tmp_path: Path) -> None:
    root = tmp_path / "s"
    with MessageStore.open(root, cfg()) as s:
        puts = put_lmq(s, 40)
        s.flush()
        want = expected_units(puts)
        for name, units in want.items():
            # the documented layout: 20-byte units (phy offset, size, tags code of the original)
            raw = b"".join(struct.pack(">qiq", off, size, tags) for _, off, size, tags in units)
            assert cq_bytes(root, name) == raw.rstrip(b"\0")
            assert s.max_offset(name, 0) == len(units)
            got = s.get(name, 0, 0, 64)
            assert [m.commit_log_offset for m in got] == [u[1] for u in units]
        # the record carries its offsets in INNER_MULTI_QUEUE_OFFSET, in INNER_MULTI_DISPATCH's order
        r, names, _ = puts[3]
        m = s.get_by_offset(r.commit_log_offset)  # type: ignore[attr-defined]
        assert m.properties[MD] == ",".join(names)
        assert m.properties[MO] == ",".join(str(next(q for q, o, _, _ in want[n] if o == m.commit_log_offset))
                                            for n in names)
        # the message's own queue is untouched
        assert [x.queue_offset for x in s.get("T1", 0, 0, 64)] == list(range(s.max_offset("T1", 0)))
        assert not (root / "consumequeue_ext").exists()
    assert verify_store(root, cfg()).ok and verify_store_reference(root, cfg()).ok
    # a unit of an LMQ queue pointing at a record that does not name that queue at that offset
    f = sorted((root / "consumequeue" / "%LMQ%odd" / "0").iterdir())[0]
    raw = bytearray(f.read_bytes())
    raw[20:28] = raw[0:8]  # unit 1 points at unit 0's record
    f.write_bytes(bytes(raw))
    rep = verify_store(root, cfg())
    assert len(rep.problems) == 1 and "consumequeue/%LMQ%odd/0: unit 1" in rep.problems[0], rep.problems
    assert verify_store_reference(root, cfg()).problems == rep.problems


def test_rebuild_index_and_the_cli_write_the_same_bytes(tmp_path: Path) -> None:
    root = tmp_path / "s"
    with MessageStore.open(root, cfg()) as s:
        put_lmq(s, 60)
    live = tree(root, "consumequeue")
    assert any(k.startswith("%LMQ%") for k in live)
    rebuild_indexes(root, tmp_path / "out", config=cfg())
    assert tree(tmp_path / "out", "consumequeue") == live
    # the CLI detects the LMQ queues of the store and does the same
    res = run("rocketmq", "rebuild-index", str(root), "--out", str(tmp_path / "cli"), "--cq-file-size", str(CQ_FILE),
              "--slots", "64", "--items", "400")
    assert res.exit_code == 0, res.output
    assert tree(tmp_path / "cli", "consumequeue") == live
    res = run("rocketmq", "rebuild-index", str(root), "--out", str(tmp_path / "plain"), "--no-lmq",
              "--cq-file-size", str(CQ_FILE))
    assert res.exit_code == 0, res.output
    assert not any(k.startswith("%LMQ%") for k in tree(tmp_path / "plain", "consumequeue"))
    # in place, from nothing
    shutil.rmtree(root / "consumequeue")
    rebuild_indexes(root, None, config=cfg())
    assert tree(root, "consumequeue") == live


def test_recovery_restores_the_lmq_queue_table(tmp_path: Path) -> None:
    root = tmp_path / "s"
    with MessageStore.open(root, cfg()) as s:
        puts = put_lmq(s, 25)
    want = {n: len(u) for n, u in expected_units(puts).items()}
    with MessageStore.open(root, cfg()) as s:
        assert {k[0]: v for k, v in s.engine.queue_offsets.items() if k[0].startswith("%LMQ%")} == want
        r = s.put("T0", b"next", properties={MD: "%LMQ%all,%LMQ%new"})
        assert s.get_by_offset(r.commit_log_offset).properties[MO] == f"{want['%LMQ%all']},0"
    # lost ConsumeQueues, unclean shutdown: the offsets come back from the CommitLog records
    shutil.rmtree(root / "consumequeue")
    (root / "abort").write_text("1")
    with MessageStore.open(root, cfg()) as s:
        assert s.engine.queue_offsets[("%LMQ%all", 0)] == want["%LMQ%all"] + 1
        assert s.engine.queue_offsets[("%LMQ%new", 0)] == 1
        cl = s.engine.commit_log
        assert queue_offset_duplicates(cl.scan(cl.min_offset, cl.max_offset), s.engine.multi_dispatch) == []


def test_settings_off_store_the_property_as_given(tmp_path: Path) -> None:
    root = tmp_path / "s"
    with MessageStore.open(root, cfg(enable_lmq=False, enable_multi_dispatch=False)) as s:
        r = s.put("T", b"x", properties={MD: "%LMQ%a"})
        assert MO not in s.get_by_offset(r.commit_log_offset).properties
    assert not (root / "consumequeue" / "%LMQ%a").exists()
    # enableLmq without enableMultiDispatch: offsets assigned, nothing dispatched to the LMQ
    root2 = tmp_path / "s2"
    with MessageStore.open(root2, cfg(enable_multi_dispatch=False)) as s:
        r = s.put("T", b"x", properties={MD: "%LMQ%a"})
        assert s.get_by_offset(r.commit_log_offset).properties[MO] == "0"
    assert not (root2 / "consumequeue" / "%LMQ%a").exists()
    # retry / system topics never take part (topicAllowsLMQ)
    with MessageStore.open(tmp_path / "s3", cfg()) as s:
        r = s.put("%RETRY%g", b"x", properties={MD: "%LMQ%a"})
        assert MO not in s.get_by_offset(r.commit_log_offset).properties


# ------------------------------------------------------------------------------------ reading
def test_dump_consumers_and_inspect_show_lmq(tmp_path: Path) -> None:
    root = tmp_path / "s"
    with MessageStore.open(root, cfg()) as s:
        puts = put_lmq(s, 12)
    (root / "config").mkdir()
    (root / "config" / "lmqConsumerOffset.json").write_text(
        '{"offsetTable":{"T0@g":{0:3,1:2}},"lmqOffsetTable":{"%LMQ%all@%LMQ%g1":5,"%LMQ%odd@%LMQ%g2":6},'
        '"dataVersion":{"counter":1,"timestamp":1}}')
    res = run("rocketmq", "consumers", str(root), "--json")
    assert res.exit_code == 0, res.output
    rows = [json.loads(line) for line in res.output.splitlines()]
    by = {(r["group"], r["topic"], r["queueId"]): r for r in rows}
    assert by[("%LMQ%g1", "%LMQ%all", 0)]["consumerOffset"] == 5
    assert by[("%LMQ%g1", "%LMQ%all", 0)]["brokerOffset"] == 12
    assert by[("%LMQ%g2", "%LMQ%odd", 0)]["diff"] == 0
    assert by[("g", "T0", 0)]["consumerOffset"] == 3
    res = run("rocketmq", "dump", str(root), "--topic", "%LMQ%odd", "--json")
    assert res.exit_code == 0, res.output
    got = [json.loads(line)["commitLogOffset"] for line in res.output.splitlines()]
    assert got == [r.commit_log_offset for r, names, _ in puts if "%LMQ%odd" in names]  # type: ignore[attr-defined]
    res = run("rocketmq", "get", str(root), "--topic", "%LMQ%third", "--queue", "0", "--offset", "1", "--json")
    assert res.exit_code == 0, res.output
    assert json.loads(res.output.splitlines()[0])["commitLogOffset"] == puts[3][0].commit_log_offset  # type: ignore[attr-defined]
    res = run("rocketmq", "inspect", str(root), "--json")
    assert res.exit_code == 0, res.output
    doc = json.loads(res.output)
    lmq = {q["topic"]: q for q in doc["queues"] if q.get("lmq")}
    assert set(lmq) == {"%LMQ%all", "%LMQ%odd", "%LMQ%third"} and lmq["%LMQ%all"]["maxOffset"] == 12
    assert any(c["name"] == "lmqConsumerOffset.json" and c["entries"] == 3 for c in doc["config"])


# ------------------------------------------------------------------------------------ bad input
@pytest.mark.parametrize("value", ["T1", "%LMQ%a,plain", "%LMQ%a/b", "%LMQ%a b", "%LMQ%..", "%LMQ%a,%LMQ%a", ",",
                                   "%LMQ%a,,%LMQ%b", "%LMQ%\u00e9"])
def test_bad_multi_dispatch_values_are_refused_before_anything_is_written(tmp_path: Path, value: str) -> None:
    with MessageStore.open(tmp_path / "s", cfg()) as s:
        s.put("T", b"first", properties={MD: "%LMQ%ok"})
        end = s.engine.commit_log.max_offset
        with pytest.raises(InvalidArgumentError):
            s.put_batch([dict(topic="T", body=b"a", properties={MD: "%LMQ%ok"}),
                         dict(topic="T", body=b"b", properties={MD: value})])
        assert s.engine.commit_log.max_offset == end
        assert s.put("T", b"again", properties={MD: "%LMQ%ok"}).commit_log_offset == end
        assert s.get_by_offset(end).properties[MO] == "1"  # the refused batch took no offset


def test_too_many_lmq_queues(tmp_path: Path) -> None:
    with MessageStore.open(tmp_path / "s", cfg(max_lmq_consume_queue_num=2)) as s:
        s.put("T", b"x", properties={MD: "%LMQ%a,%LMQ%b,%LMQ%c"})  # the broker checks before the put
        with pytest.raises(InvalidArgumentError, match="max_lmq_consume_queue_num"):
            s.put("T", b"y", properties={MD: "%LMQ%d"})
        s.put("T", b"plain")  # other puts go on


def test_malformed_records_in_the_commitlog_are_verify_problems(tmp_path: Path) -> None:
    """Records a broker (or anything) wrote with unusable values: dispatch writes what the broker
    would and skips the rest, verify names each, the CLI prints no traceback."""
    root = tmp_path / "s"
    bad = [("%LMQ%a,%LMQ%b", "1"), ("%LMQ%a,%LMQ%b", "0,x"), ("%LMQ%../x", "0"), ("%LMQ%a b", "0"),
           ("%LMQ%a", "99999999999999999999"), ("%LMQ%c", "0")]
    with MessageStore.open(root, cfg(enable_lmq=False, enable_multi_dispatch=False)) as s:
        for q, o in bad:
            s.put("T", b"x", properties={MD: q, MO: o})
    shutil.rmtree(root / "consumequeue")  # dispatched again from the CommitLog with both settings on
    with MessageStore.open(root, cfg()) as s:
        s.flush()
        assert s.max_offset("%LMQ%a", 0) == 1  # "0,x": %LMQ%a gets unit 0, %LMQ%b nothing
        assert s.max_offset("%LMQ%c", 0) == 1
        assert s.max_offset("%LMQ%b", 0) == 0
        assert len(s.engine.writers.multi_dispatch_problems) == 5
    assert not (root / "consumequeue" / "%LMQ%..").exists()
    rep = verify_store(root, cfg())
    assert len([p for p in rep.problems if "commitlog: record" in p]) == 5, rep.problems
    assert verify_store_reference(root, cfg()).problems == rep.problems
    res = run("rocketmq", "verify", str(root))
    assert res.exit_code != 0 and "Traceback" not in res.output
    assert "offsets in INNER_MULTI_QUEUE_OFFSET" in res.output


def test_non_lmq_names_dispatch_to_the_records_queue_id(tmp_path: Path) -> None:
    """Multi-dispatch to a plain topic name (a 5.0 broker assigned those offsets too): the unit goes
    to that topic at the record's own queue id; with enableLmq off, an LMQ name keeps it too."""
    root = tmp_path / "s"
    with MessageStore.open(root, cfg(enable_lmq=False, enable_multi_dispatch=False)) as s:
        a = s.put("T", b"x", queue_id=3, properties={MD: "Other,%LMQ%z", MO: "0,0"})
    shutil.rmtree(root / "consumequeue")
    with MessageStore.open(root, cfg()) as s:
        assert [m.commit_log_offset for m in s.get("Other", 3, 0, 5)] == [a.commit_log_offset]
        assert [m.commit_log_offset for m in s.get("%LMQ%z", 0, 0, 5)] == [a.commit_log_offset]
    shutil.rmtree(root / "consumequeue")
    with MessageStore.open(root, cfg(enable_lmq=False)) as s:
        assert [m.commit_log_offset for m in s.get("%LMQ%z", 3, 0, 5)] == [a.commit_log_offset]
