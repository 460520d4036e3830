"""`mqstore kafka dump` record filters (--from-time/--to-time, --key, --header) and --decode."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import CliRunner

from mqstore.cli.main import cli
from mqstore.formats.kafka import SimpleRecord, encode_batch
from mqstore.storage.kafka.log import PartitionLog
from mqstore.storage.kafka.segment import LogConfig

T0 = 1_700_000_000_000


@pytest.fixture(scope="module")
def part(tmp_path_factory: pytest.TempPathFactory) -> Path:
    d = tmp_path_factory.mktemp("kdump") / "t-0"
    with PartitionLog.open(d, LogConfig(segment_bytes=700)) as log:
        for b in range(6):
            recs = [SimpleRecord(value=json.dumps({"b": b, "i": i}).encode(), key=f"k{b}-{i}".encode(),
                                 timestamp=T0 + 1000 * b + i,
                                 headers=[("src", b"web" if i % 2 else b"app")] + ([("trace", None)] if i == 0 else []))
                    for i in range(3)]
            log.append(encode_batch(recs), now=T0)
    return d


def _rows(*args: str) -> list[dict]:
    res = CliRunner().invoke(cli, ["kafka", "dump", *args, "--json"])
    assert res.exit_code == 0, res.output
    return [json.loads(x) for x in res.output.splitlines()]


def test_time_key_header_filters(part: Path) -> None:
    assert len(list(part.glob("*.log"))) > 1
    rows = _rows(str(part), "--from-time", str(T0 + 2000), "--to-time", "2023-11-14T22:13:23.001Z")
    recs = [r for r in rows if r["type"] == "record"]
    assert [r["timestamp"] for r in recs] == [T0 + 2000, T0 + 2001, T0 + 2002, T0 + 3000, T0 + 3001]
    assert [r["type"] for r in rows] == ["batch", "record", "record", "record", "batch", "record", "record"]
    rows = _rows(str(part), "--key", "k4-1")
    assert [(r["type"], r.get("offset")) for r in rows] == [("batch", None), ("record", 13)]
    rows = _rows(str(part), "--header", "src=web", "--to-time", str(T0 + 1999))
    assert [r["offset"] for r in rows if r["type"] == "record"] == [1, 4]
    rows = _rows(str(part), "--header", "trace")
    assert [r["offset"] for r in rows if r["type"] == "record"] == [0, 3, 6, 9, 12, 15]


def test_decode_json_and_text(part: Path) -> None:
    rows = _rows(str(part), "--key", "k0-2", "--decode", "json")
    rec = next(r for r in rows if r["type"] == "record")
    assert rec["value"] == {"b": 0, "i": 2} and rec["key"] == {"notJson": "k0-2"}
    assert rec["headers"] == [{"key": "src", "value": {"notJson": "app"}}]
    rows = _rows(str(part), "--key", "k0-2", "--decode", "utf8")
    rec = next(r for r in rows if r["type"] == "record")
    assert (rec["key"], rec["value"]) == ("k0-2", '{"b": 0, "i": 2}')
    res = CliRunner().invoke(cli, ["kafka", "dump", str(part), "--key", "k0-2", "--decode", "hex"])
    assert res.exit_code == 0
    assert f"key: {b'k0-2'.hex()} payload: {json.dumps({'b': 0, 'i': 2}).encode().hex()}" in res.output


@pytest.mark.parametrize("args, message", [
    (["--from-time", "not-a-time"], "--from-time: 'not-a-time' is neither epoch milliseconds nor an ISO 8601 time"),
    (["--decode", "yaml"], "--decode must be one of utf8, hex, json, got 'yaml'"),
    (["--header", "=x"], "--header needs KEY or KEY=VALUE"),
])
def test_bad_values(part: Path, args: list[str], message: str) -> None:
    res = CliRunner().invoke(cli, ["kafka", "dump", str(part), *args])
    assert res.exit_code == 2 and res.output.startswith("error: ") and message in res.output
    assert len(res.output.strip().splitlines()) == 1
