"""ConsumeQueueExt (``enableConsumeQueueExt``): the unit codec, stores written by our own writer
compared with a construction from the documented layout, reads / tag queries / verify through
the ext, byte-identical rebuilds, and bad ext addresses."""

from __future__ import annotations

import hashlib
import json
import shutil
import struct
from itertools import count
from pathlib import Path

import pytest
from click.testing import CliRunner
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from mqstore.api.rocketmq import MessageStore
from mqstore.cli.main import cli
from mqstore.errors import CorruptDataError, OffsetOutOfRangeError, TruncatedRecordError
from mqstore.formats.rocketmq.consumequeue_ext import (
    LONG_MIN,
    MAX_ADDR,
    ExtUnit,
    decode_ext_unit,
    decorate,
    encode_ext_unit,
    is_ext_addr,
    scan_end,
    undecorate,
)
from mqstore.formats.rocketmq.javahash import tags_hash
from mqstore.storage.rocketmq.config import StoreConfig
from mqstore.storage.rocketmq.rebuild import compare_trees, rebuild_indexes
from mqstore.storage.rocketmq.verify import verify_store

EXT_FILE = 110  # 5 units of 20 bytes fit (100 + 20 > 110 - 4): the 6th rolls, "-1" at 100
CQ_FILE = 20 * 50
TAGS = ("TagA", "TagB", "TagC")


def run(*args: str):
    return CliRunner().invoke(cli, list(args), catch_exceptions=False)


def tree_hash(root: Path) -> dict[str, str]:
    return {str(p.relative_to(root)): hashlib.sha256(p.read_bytes()).hexdigest()
            for p in sorted(root.rglob("*")) if p.is_file()}


def ext_config(**kw) -> StoreConfig:
    ticks = count(1_700_000_000_000, 7)
    base = dict(enable_consume_queue_ext=True, mapped_file_size_consume_queue_ext=EXT_FILE,
                consume_queue_file_size=CQ_FILE, commit_log_file_size=64 * 1024, hash_slot_num=50,
                index_num=200, background_services=False, clock=lambda: next(ticks))
    base.update(kw)
    return StoreConfig(**base)  # type: ignore[arg-type]


def make_store(root: Path, n: int = 23, queues: int = 2) -> list:
    with MessageStore.open(root, ext_config()) as s:
        return [s.put("ExtTopic", f"body-{i}".encode(), i % queues, keys=f"k{i}", tags=TAGS[i % 3]) for i in range(n)]


# ------------------------------------------------------------------ codec
@settings(deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.integers(-(2**63), 2**63 - 1), st.integers(-(2**63), 2**63 - 1), st.binary(max_size=300))
def test_ext_unit_round_trip(tags: int, store_time: int, bitmap: bytes) -> None:
    unit = ExtUnit(tags, store_time, bitmap)
    data = encode_ext_unit(unit)
    assert len(data) == 20 + len(bitmap) == unit.size
    assert data[:2] == struct.pack(">h", 20 + len(bitmap))
    assert data[2:10] == struct.pack(">q", tags) and data[10:18] == struct.pack(">q", store_time)
    assert data[18:20] == struct.pack(">h", len(bitmap))
    assert decode_ext_unit(b"\0" * 3 + data, 3) == unit
    assert scan_end(data + b"\xff\xff\0\0", len(data) + 4) == len(data)


@given(st.integers(0, 2**63 - 2**31 - 1))
def test_address_round_trip(offset: int) -> None:
    addr = decorate(offset)
    assert addr == offset + LONG_MIN and is_ext_addr(addr) and undecorate(addr) == offset


def test_address_boundaries() -> None:
    assert MAX_ADDR == -(2**31) - 1
    assert is_ext_addr(MAX_ADDR) and not is_ext_addr(MAX_ADDR + 1) and is_ext_addr(LONG_MIN)
    assert not is_ext_addr(-(2**31)) and not is_ext_addr(0) and not is_ext_addr(2**63 - 1)
    assert decorate(0) == LONG_MIN and undecorate(12345) == 12345


def test_decode_rejects_bad_units() -> None:
    good = encode_ext_unit(ExtUnit(1, 2, b"\x01\x02"))
    with pytest.raises(TruncatedRecordError):
        decode_ext_unit(good[:21])
    with pytest.raises(CorruptDataError, match="does not match its bitmap size"):
        decode_ext_unit(struct.pack(">hqqh", 20, 1, 2, 5))
    with pytest.raises(CorruptDataError, match="has size -1"):
        decode_ext_unit(struct.pack(">hqqh", -1, 0, 0, 0))


# ------------------------------------------------------------------ store files vs the layout
def expected_files(results: list, queue_id: int, queues: int) -> tuple[dict[str, bytes], bytes]:
    """The ext files and the ConsumeQueue bytes of one queue, built from the documented rules
    without the project's codec: 20-byte units while 4 bytes stay free, then short -1."""
    ext: dict[int, bytearray] = {}
    cq = bytearray()
    file_start, pos = 0, 0
    for i, r in enumerate(results):
        if i % queues != queue_id:
            continue
        if pos + 20 > EXT_FILE - 4:
            ext.setdefault(file_start, bytearray(EXT_FILE))[pos : pos + 2] = b"\xff\xff"
            file_start, pos = file_start + EXT_FILE, 0
        buf = ext.setdefault(file_start, bytearray(EXT_FILE))
        buf[pos : pos + 20] = struct.pack(">hqqh", 20, tags_hash(TAGS[i % 3]), r.store_timestamp, 0)
        cq += struct.pack(">qiq", r.commit_log_offset, r.size, file_start + pos - 2**63)
        pos += 20
    return {f"{k:020d}": bytes(v) for k, v in ext.items()}, bytes(cq)


def test_store_writes_ext_as_the_broker(tmp_path: Path) -> None:
    results = make_store(tmp_path / "s")
    for qid in (0, 1):
        ext, cq = expected_files(results, qid, 2)
        ext_dir = tmp_path / "s" / "consumequeue_ext" / "ExtTopic" / str(qid)
        assert {p.name: p.read_bytes() for p in sorted(ext_dir.iterdir())} == ext
        cq_file = (tmp_path / "s" / "consumequeue" / "ExtTopic" / str(qid) / f"{0:020d}").read_bytes()
        assert cq_file == cq + bytes(CQ_FILE - len(cq))
    assert sorted(p.name for p in (tmp_path / "s" / "consumequeue_ext" / "ExtTopic" / "0").iterdir()) == [
        f"{0:020d}", f"{EXT_FILE:020d}", f"{2 * EXT_FILE:020d}"]


def test_reads_resolve_ext_addresses(tmp_path: Path) -> None:
    results = make_store(tmp_path / "s")
    # the default configuration (ext off) still reads through the ext files it finds
    with MessageStore.open(tmp_path / "s", StoreConfig(consume_queue_file_size=CQ_FILE,
                           mapped_file_size_consume_queue_ext=EXT_FILE, commit_log_file_size=64 * 1024,
                           hash_slot_num=50, index_num=200), read_only=True) as s:
        cq = s.engine.consume_queue("ExtTopic", 1)
        assert cq is not None
        for qo in range(11):
            unit = cq.get_unit(qo)
            assert unit is not None and unit.tags_code == tags_hash(TAGS[(2 * qo + 1) % 3])
            raw = cq.get_unit(qo, resolve_ext=False)
            assert raw is not None and is_ext_addr(raw.tags_code)
        got = s.get_by_tag("ExtTopic", 0, "TagB || TagC", 0, 100)
        want = [r.commit_log_offset for i, r in enumerate(results) if i % 2 == 0 and TAGS[i % 3] in ("TagB", "TagC")]
        assert [m.commit_log_offset for m in got] == want
        assert [m.queue_offset for m in s.get_by_tag("ExtTopic", 0, "TagA", 3, 2)] == [3, 6]
        assert len(s.get_by_tag("ExtTopic", 1, "*", 0, 100)) == 11


def test_verify_and_cli_on_an_ext_store(tmp_path: Path) -> None:
    make_store(tmp_path / "s")
    before = tree_hash(tmp_path / "s")
    rep = verify_store(tmp_path / "s", ext_config())
    assert rep.problems == [] and rep.ext_units == 23 and rep.cq_units == 23
    r = run("rocketmq", "verify", str(tmp_path / "s"), "--json")
    assert r.exit_code == 0, r.output
    assert json.loads(r.output)["extUnits"] == 23
    r = run("rocketmq", "get", str(tmp_path / "s"), "--topic", "ExtTopic", "--queue", "1", "--offset", "0",
            "--count", "2", "--tag", "TagA", "--json")
    assert r.exit_code == 0, r.output
    assert [json.loads(x)["queueOffset"] for x in r.output.splitlines()] == [1, 4]
    r = run("rocketmq", "inspect", str(tmp_path / "s"), "--json")
    info = json.loads(r.output)
    assert info["consumeQueueExt"] == {"enabled": True, "fileSize": EXT_FILE, "queues": 2}
    assert [q["extFiles"] for q in info["queues"]] == [3, 3]
    assert tree_hash(tmp_path / "s") == before


def test_rebuild_is_byte_identical(tmp_path: Path) -> None:
    make_store(tmp_path / "s", n=40, queues=3)
    saved = tmp_path / "saved"
    shutil.copytree(tmp_path / "s", saved)
    stats = rebuild_indexes(tmp_path / "s", tmp_path / "out", config=ext_config())
    assert stats.messages == 40
    assert compare_trees(tmp_path / "s", tmp_path / "out") == []
    # in place through the CLI: the ext is detected from its files and rebuilt with them
    shutil.rmtree(tmp_path / "s" / "consumequeue")
    r = run("rocketmq", "rebuild-index", str(tmp_path / "s"), "--cq-file-size", str(CQ_FILE), "--json")
    assert r.exit_code == 0, r.output
    assert compare_trees(tmp_path / "s", saved) == []
    assert (tmp_path / "s" / "consumequeue_ext" / "ExtTopic" / "2").is_dir()


def test_ext_address_past_the_end(tmp_path: Path) -> None:
    make_store(tmp_path / "s")
    cq_file = tmp_path / "s" / "consumequeue" / "ExtTopic" / "0" / f"{0:020d}"
    data = bytearray(cq_file.read_bytes())
    data[20 + 12 : 40] = struct.pack(">q", decorate(10 * EXT_FILE))  # unit 1: an address beyond every ext file
    data[40 + 12 : 60] = struct.pack(">q", decorate(2 * EXT_FILE + 60))  # unit 2: past the written end
    cq_file.write_bytes(bytes(data))
    before = tree_hash(tmp_path / "s")
    rep = verify_store(tmp_path / "s", ext_config())
    assert len(rep.problems) == 2
    assert rep.problems[0].startswith("consumequeue/ExtTopic/0: unit 1: ext address")
    assert "outside the ext files" in rep.problems[0] and "past the written end" in rep.problems[1]
    r = run("rocketmq", "verify", str(tmp_path / "s"))
    assert r.exit_code == 1 and "unit 2: ext address" in r.output
    with MessageStore.open(tmp_path / "s", ext_config(), read_only=True) as s:
        cq = s.engine.consume_queue("ExtTopic", 0)
        assert cq is not None
        with pytest.raises(OffsetOutOfRangeError):
            cq.get_unit(1)
    r = CliRunner().invoke(cli, ["rocketmq", "get", str(tmp_path / "s"), "--topic", "ExtTopic", "--queue", "0",
                                 "--offset", "0", "--count", "5", "--tag", "TagA"])
    assert r.exit_code == 2 and r.output.count("error:") == 1 and "Traceback" not in r.output
    assert tree_hash(tmp_path / "s") == before


def test_ext_address_without_ext_files(tmp_path: Path) -> None:
    make_store(tmp_path / "s")
    shutil.rmtree(tmp_path / "s" / "consumequeue_ext" / "ExtTopic" / "1")
    rep = verify_store(tmp_path / "s", ext_config(enable_consume_queue_ext=False))
    assert len(rep.problems) == 11
    assert all("no consumequeue_ext/ExtTopic/1 files" in p for p in rep.problems)


def test_ext_truncated_with_the_consume_queue_on_recovery(tmp_path: Path) -> None:
    """Recovery cuts the ext after the last unit the remaining ConsumeQueue addresses."""
    make_store(tmp_path / "s", n=8, queues=1)
    cq_file = tmp_path / "s" / "consumequeue" / "ExtTopic" / "0" / f"{0:020d}"
    data = bytearray(cq_file.read_bytes())
    data[6 * 20 : 8 * 20] = bytes(40)  # the last two units were never written
    cq_file.write_bytes(bytes(data))
    (tmp_path / "s" / "abort").write_text("1")  # unclean: redispatch rewrites them
    with MessageStore.open(tmp_path / "s", ext_config()) as s:
        cq = s.engine.consume_queue("ExtTopic", 0)
        assert cq is not None and cq.max_offset_in_queue == 8
    assert verify_store(tmp_path / "s", ext_config()).problems == []


def test_retention_drops_ext_files_before_the_first_live_unit(tmp_path: Path) -> None:
    cfg = ext_config(commit_log_file_size=4096, consume_queue_file_size=100, file_reserved_time_hours=1,
                     delete_file_batch_max=10)
    with MessageStore.open(tmp_path / "s", cfg) as s:
        for i in range(60):
            s.put("ExtTopic", b"b" * 1000, 0, tags=TAGS[i % 3])
        assert s.engine.delete_expired(force=True, now_ms=2_000_000_000_000) == 10
        cq = s.engine.consume_queue("ExtTopic", 0)
        assert cq is not None and cq.min_offset_in_queue > 0
        first = cq.get_unit(cq.min_offset_in_queue, resolve_ext=False)
        assert first is not None
        real = undecorate(first.tags_code)
        files = cq.ext.queue.files if cq.ext is not None else []
        assert files[0].file_from_offset <= real <= files[0].end_offset  # the broker keeps a file whose end is not below it
        assert files[0].file_from_offset > 0
        live = s.get("ExtTopic", 0, cq.min_offset_in_queue, 100)
        assert [m.tags for m in live] == [TAGS[m.queue_offset % 3] for m in live] and len(live) > 10
    assert verify_store(tmp_path / "s", cfg).problems == []
