"""`mqstore rocketmq dump` filters (--from-time/--to-time, --key, --tag, --decode),
`mqstore rocketmq get-by-msgid` (offset message ids and unique keys) and the CLI's progress helper."""

from __future__ import annotations

import datetime as dt
import hashlib
import io
import json
from pathlib import Path

import pytest
from click.testing import CliRunner

from mqstore import MessageStore, StoreConfig
from mqstore.cli.filters import decode_text, decode_value, parse_time
from mqstore.cli.main import cli
from mqstore.errors import InvalidArgumentError

T0 = 1_700_000_000_000


class Clock:
    def __init__(self) -> None:
        self.t = T0

    def __call__(self) -> int:
        self.t += 100
        return self.t


def _digest(root: Path) -> str:
    h = hashlib.sha256()
    for p in sorted(root.rglob("*")):
        if p.is_file():
            h.update(p.name.encode())
            h.update(p.read_bytes())
    return h.hexdigest()


@pytest.fixture(scope="module")
def store(tmp_path_factory: pytest.TempPathFactory) -> dict:
    root = tmp_path_factory.mktemp("dumpf") / "store"
    cfg = StoreConfig(commit_log_file_size=4096, hash_slot_num=100, index_num=400, background_services=False,
                      clock=Clock())
    puts = []
    with MessageStore.open(root, cfg) as s:
        for i in range(40):
            body = json.dumps({"n": i}).encode() if i % 2 == 0 else bytes([0xFF, i])
            tags = "TagA" if i % 3 == 0 else ("TagB" if i % 3 == 1 else None)
            r = s.put("T1" if i < 30 else "T2", body, queue_id=i % 2, keys=[f"k{i}", "shared"], tags=tags)
            puts.append((r, body, tags, "T1" if i < 30 else "T2"))
    return {"root": root, "puts": puts}


def run(*args: str):
    return CliRunner().invoke(cli, list(args))


def _rows(res) -> list[dict]:
    assert res.exit_code == 0, res.output
    return [json.loads(line) for line in res.output.splitlines()]


def test_time_filters_ms_and_iso(store: dict) -> None:
    root, puts = store["root"], store["puts"]
    ts = [p[0].store_timestamp for p in puts]
    lo, hi = ts[5], ts[12]
    rows = _rows(run("rocketmq", "dump", str(root), "--json", "--from-time", str(lo), "--to-time", str(hi)))
    assert [r["storeTimestamp"] for r in rows] == ts[5:13]
    iso_lo = dt.datetime.fromtimestamp(lo / 1000, tz=dt.UTC).isoformat(timespec="milliseconds").replace("+00:00", "Z")
    rows2 = _rows(run("rocketmq", "dump", str(root), "--json", "--from-time", iso_lo, "--to-time", str(hi)))
    assert rows2 == rows
    # the segments roll (4 KiB): the filter works across them
    assert len({p[0].commit_log_offset // 4096 for p in puts}) > 1


def test_key_tag_topic_filters(store: dict) -> None:
    root, puts = store["root"], store["puts"]
    rows = _rows(run("rocketmq", "dump", str(root), "--json", "--key", "k7"))
    assert [r["commitLogOffset"] for r in rows] == [puts[7][0].commit_log_offset]
    rows = _rows(run("rocketmq", "dump", str(root), "--json", "--key", "shared", "--topic", "T2"))
    assert [r["commitLogOffset"] for r in rows] == [p[0].commit_log_offset for p in puts[30:]]
    uniq = puts[11][0].uniq_key
    rows = _rows(run("rocketmq", "dump", str(root), "--json", "--key", uniq))
    assert [r["uniqKey"] for r in rows] == [uniq]
    rows = _rows(run("rocketmq", "dump", str(root), "--json", "--tag", "TagB"))
    assert [r["commitLogOffset"] for r in rows] == [p[0].commit_log_offset for p in puts if p[2] == "TagB"]
    rows = _rows(run("rocketmq", "dump", str(root), "--json", "--tag", "TagA||TagB", "--limit", "5"))
    assert [r["commitLogOffset"] for r in rows] == [p[0].commit_log_offset for p in puts if p[2]][:5]
    assert _rows(run("rocketmq", "dump", str(root), "--json", "--key", "nope")) == []


def test_decode(store: dict) -> None:
    root, puts = store["root"], store["puts"]
    rows = _rows(run("rocketmq", "dump", str(root), "--json", "--decode", "json", "--limit", "2"))
    assert [r["body"] for r in rows] == [{"n": 0}, {"notJson": "\ufffd\x01"}]
    rows = _rows(run("rocketmq", "dump", str(root), "--json", "--decode", "hex", "--limit", "2"))
    assert [r["body"] for r in rows] == [puts[0][1].hex(), "ff01"]
    rows = _rows(run("rocketmq", "dump", str(root), "--json", "--decode", "utf8", "--limit", "1"))
    assert rows[0]["body"] == '{"n": 0}'
    res = CliRunner(env={"COLUMNS": "300"}).invoke(cli, ["rocketmq", "dump", str(root), "--decode", "utf8",
                                                         "--limit", "1"])
    assert res.exit_code == 0 and '{"n": 0}' in res.output


@pytest.mark.parametrize("args, message", [
    (["--from-time", "2024-13-01"], "--from-time: '2024-13-01' is neither epoch milliseconds nor an ISO 8601 time"),
    (["--to-time", "yesterday"], "--to-time: 'yesterday' is neither"),
    (["--decode", "base64"], "--decode must be one of utf8, hex, json, got 'base64'"),
    (["--from-time", "2000", "--to-time", "1000"], "--from-time (2000) is after --to-time (1000)"),
])
def test_bad_values_one_error_line(store: dict, args: list[str], message: str) -> None:
    res = run("rocketmq", "dump", str(store["root"]), *args)
    assert res.exit_code == 2
    assert res.output.startswith("error: ") and message in res.output and len(res.output.strip().splitlines()) == 1


def test_get_by_msgid_both_kinds(store: dict) -> None:
    root, puts = store["root"], store["puts"]
    before = _digest(root)
    r = puts[9][0]
    rows = _rows(run("rocketmq", "get-by-msgid", str(root), r.msg_id, "--json"))
    assert [x["commitLogOffset"] for x in rows] == [r.commit_log_offset]
    rows = _rows(run("rocketmq", "get-by-msgid", str(root), r.uniq_key, "--json"))
    assert [x["commitLogOffset"] for x in rows] == [r.commit_log_offset]
    rows = _rows(run("rocketmq", "get-by-msgid", str(root), puts[33][0].uniq_key, "--topic", "T2", "--json"))
    assert [x["commitLogOffset"] for x in rows] == [puts[33][0].commit_log_offset]
    res = run("rocketmq", "get-by-msgid", str(root), puts[33][0].uniq_key, "--topic", "T1", "--json")
    assert res.exit_code == 1 and res.output.startswith("error: no message has the id")
    res = run("rocketmq", "get-by-msgid", str(root), "not-hex")
    assert res.exit_code == 2 and res.output.strip() == "error: message id 'not-hex' is not hexadecimal"
    assert _digest(root) == before


def test_parse_time_and_decoders() -> None:
    assert parse_time("1700000000123", "--x") == 1_700_000_000_123
    assert parse_time("2023-11-14T22:13:20.123Z", "--x") == 1_700_000_000_123
    assert parse_time("2023-11-15T00:13:20.123+02:00", "--x") == 1_700_000_000_123
    assert parse_time("2023-11-14", "--x") == 1_699_920_000_000
    assert parse_time(None, "--x") is None
    with pytest.raises(InvalidArgumentError, match="--x"):
        parse_time("14/11/2023", "--x")
    assert decode_value(b'{"a":[1]}', "json") == {"a": [1]}
    assert decode_text(b'{"a": [1]}', "json") == '{"a":[1]}'
    assert decode_text(None, "hex") == "null"
    assert decode_value(b"\x00\xff", "utf8") == "\x00\ufffd"


def test_progress_only_on_a_terminal(monkeypatch: pytest.MonkeyPatch) -> None:
    import sys

    from mqstore.cli.common import progress

    class Tty(io.StringIO):
        def isatty(self) -> bool:
            return True

    with progress("verify") as p:  # pytest's captured stderr is not a terminal
        assert p is None
    tty = Tty()
    monkeypatch.setattr(sys, "stderr", tty)
    with progress("verify") as p:
        assert p is not None
        p(512, 1024)
    assert "verify" in tty.getvalue()
