"""`mqstore kafka query-key`, `rebuild-index --key-index`, and the key index in dump/verify."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import CliRunner

from mqstore.cli.main import cli
from mqstore.formats.kafka.batch import Header, SimpleRecord
from mqstore.storage.kafka.log import PartitionLog
from mqstore.storage.kafka.segment import LogConfig


def run(*args: str) -> tuple[int, str, str]:
    r = CliRunner().invoke(cli, ["kafka", *args])
    return r.exit_code, r.stdout, r.stderr


def _partition(d: Path, config: LogConfig, n: int = 100) -> Path:
    log = PartitionLog.open(d, config)
    for i in range(n):
        log.append_records([SimpleRecord(b"v", key=b"k%d" % (i % 7), headers=[Header("trace", b"T%d" % (i % 3))])],
                           timestamp=1000 + i)
    log.close()
    return d


@pytest.fixture
def logdir(tmp_path: Path) -> Path:
    _partition(tmp_path / "orders-0", LogConfig(key_index=True, key_header="trace", segment_bytes=2000))
    _partition(tmp_path / "orders-1", LogConfig(segment_bytes=2000))
    return tmp_path


def test_query_key_partition_and_log_dir(logdir: Path) -> None:
    code, out, err = run("query-key", str(logdir / "orders-0"), "--key", "k3", "--json")
    assert code == 0 and err == ""
    rows = [json.loads(x) for x in out.splitlines()]
    assert [r["offset"] for r in rows] == list(range(3, 100, 7))
    assert {r["partition"] for r in rows} == {0}
    code, out, err = run("query-key", str(logdir), "--key", "k3", "--from-time", "1050", "--to-time", "1080",
                         "--json")
    assert code == 0
    rows = [json.loads(x) for x in out.splitlines()]
    assert sorted((r["partition"], r["offset"]) for r in rows) == [(p, o) for p in (0, 1) for o in (52, 59, 66, 73, 80)]
    assert "scanned" in err  # orders-1 has no key index
    code, out, _ = run("query-key", str(logdir / "orders-0"), "--key", "T1", "--header", "trace", "--json")
    assert [json.loads(x)["offset"] for x in out.splitlines()] == list(range(1, 100, 3))
    code, out, _ = run("query-key", str(logdir / "orders-0"), "--key", "absent")
    assert code == 0 and "no record found" in out
    code, out, _ = run("query-key", str(logdir / "orders-0"), "--key", "k1", "--from-time", "1970-01-01T00:00:01Z",
                       "--to-time", "1010")
    assert code == 0 and out.split()[-7:] and "1008" in out


@pytest.mark.parametrize("args", [
    ["/nonexistent/dir", "--key", "a"],
    ["{d}", "--key", "a", "--from-time", "yesterday-ish"],
    ["{d}", "--key", "a", "--from-time", "20", "--to-time", "10"],
    ["{d}/00000000000000000000.log", "--key", "a"],
    ["{d}", "--key", "a", "--header", ""],
])
def test_query_key_bad_input(logdir: Path, args: list[str]) -> None:
    code, out, err = run("query-key", *[a.format(d=logdir / "orders-0") for a in args])
    assert code == 2
    assert err.startswith("error: ") and len(err.strip().splitlines()) == 1
    assert "Traceback" not in out + err


def test_query_key_on_a_directory_without_segments(tmp_path: Path) -> None:
    code, _, err = run("query-key", str(tmp_path), "--key", "a")
    assert code == 2 and err.startswith("error: ")


def test_corrupt_keyindex_is_an_error_and_a_verify_problem(logdir: Path) -> None:
    d = logdir / "orders-0"
    k = d / "00000000000000000000.keyindex"
    data = bytearray(k.read_bytes())
    data[-1] ^= 0xFF  # the trailer magic
    k.write_bytes(bytes(data))
    code, _, err = run("query-key", str(d), "--key", "k3")
    assert code == 2 and err.startswith("error: ") and len(err.strip().splitlines()) == 1
    code, out, _ = run("verify", str(d), "--json")
    assert code == 1
    rep = json.loads(out)
    assert [p["kind"] for p in rep["problems"]] == ["keyindex_unreadable"]
    # a sound trailer over a wrong item: a mismatch
    data[-1] ^= 0xFF
    data[200] ^= 0x01
    k.write_bytes(bytes(data))
    code, out, _ = run("verify", str(d), "--json")
    assert code == 1 and [p["kind"] for p in json.loads(out)["problems"]] == ["keyindex_mismatch"]


def test_rebuild_index_key_index_and_dump(logdir: Path) -> None:
    d = logdir / "orders-1"
    assert not list(d.glob("*.keyindex"))
    code, out, _ = run("rebuild-index", str(d), "--key-index", "--key-header", "trace", "--json")
    assert code == 0
    rows = [json.loads(x) for x in out.splitlines()]
    assert sum(r["key_entries"] for r in rows) == 200 and all(Path(r["keyindex_path"]).exists() for r in rows)
    code, out, err = run("query-key", str(d), "--key", "k3", "--json")
    assert code == 0 and err == "" and len(out.splitlines()) == 14
    code, out, _ = run("verify", str(d), "--json")
    assert code == 0 and json.loads(out)["key_index_entries"] == 200
    code, out, _ = run("dump", str(d / "00000000000000000000.keyindex"), "--json")
    rows = [json.loads(x) for x in out.splitlines()]
    assert rows[0]["type"] == "keyindex_header" and rows[0]["header_name"] == "trace"
    assert len(rows) == 1 + rows[0]["index_count"] - 1
    code, out, _ = run("dump", str(d), "--json")
    kinds = {json.loads(x)["kind"] for x in out.splitlines() if json.loads(x).get("type") == "file"}
    assert "keyindex" in kinds and "unknown" not in kinds
    code, _, err = run("rebuild-index", str(d), "--key-header", "trace")
    assert code == 2 and err.startswith("error: ")


def test_stray_keyindex_is_a_verify_note(logdir: Path) -> None:
    d = logdir / "orders-0"
    (d / "00000000000000099999.keyindex").write_bytes(b"x")
    code, out, _ = run("verify", str(d), "--json")
    rep = json.loads(out)
    assert code == 0 and "stray_keyindex" in [n["kind"] for n in rep["notes"]]
    assert "unknown_file" not in [n["kind"] for n in rep["notes"]]


def test_verify_of_a_live_writer_notes_a_key_index_behind(tmp_path: Path) -> None:
    d = tmp_path / "live-0"
    log = PartitionLog.open(d, LogConfig(key_index=True))
    try:
        for i in range(50):
            log.append_records([SimpleRecord(b"v", key=b"k%d" % i)], timestamp=1000 + i)
        log.flush()  # the key index holds all 50
        log.append_records([SimpleRecord(b"v", key=b"late")], timestamp=2000)  # not yet put
        code, out, _ = run("verify", str(d), "--json")
        rep = json.loads(out)
        assert code == 0, rep["problems"]
        assert [n["kind"] for n in rep["notes"] if n["kind"].startswith("keyindex")] == ["keyindex_behind"]
        assert log.offsets_for_key("late") == [50]  # a lookup puts the pending keys first
    finally:
        log.close()
