"""`mqstore rocketmq ...` and `mqstore demo` through click's runner."""

from __future__ import annotations

import base64
import json
import shutil
from pathlib import Path

from click.testing import CliRunner

from mqstore.cli.main import cli


def run(*args: str):
    return CliRunner().invoke(cli, list(args), catch_exceptions=False)


def fixture_store(shared_fixtures: Path, tmp_path: Path) -> tuple[Path, dict]:
    src = shared_fixtures / "rocketmq" / "basic"
    copy = tmp_path / "store"
    shutil.copytree(src / "store", copy)
    return copy, json.loads((src / "manifest.json").read_text())


def test_inspect_json(shared_fixtures: Path, tmp_path: Path) -> None:
    store, m = fixture_store(shared_fixtures, tmp_path)
    r = run("rocketmq", "inspect", str(store), "--json")
    assert r.exit_code == 0, r.output
    info = json.loads(r.output)
    assert info["cleanShutdown"] is True
    assert info["indexFiles"][0]["indexCount"] == m["indexFiles"][0]["indexCount"]
    assert info["indexGeometry"] == {"slots": 100, "items": 1000}
    assert {(q["topic"], q["queueId"]) for q in info["queues"]} == {(c["topic"], c["queueId"]) for c in m["consumeQueues"]}
    r = run("rocketmq", "inspect", str(store))
    assert r.exit_code == 0 and "checkpoint" in r.output


def test_dump_json_has_every_field(shared_fixtures: Path, tmp_path: Path) -> None:
    store, m = fixture_store(shared_fixtures, tmp_path)
    r = run("rocketmq", "dump", str(store), "--json")
    assert r.exit_code == 0
    rows = [json.loads(line) for line in r.output.splitlines()]
    assert len(rows) == len(m["messages"])
    for row, x in zip(rows, sorted(m["messages"], key=lambda x: x["physicalOffset"]), strict=True):
        assert row["commitLogOffset"] == x["physicalOffset"]
        assert base64.b64decode(row["body"]).hex() == x["bodyHex"]
        assert row["bornHost"] == x["bornHost"] and row["bodyCRC"] == x["bodyCRC"]
        assert row["uniqKey"] == x["uniqKey"] and row["tags"] == (x["tags"] or None)
        assert set(row) >= {"topic", "flag", "body", "properties", "queueId", "queueOffset", "commitLogOffset", "size",
                            "bornTimestamp", "storeTimestamp", "bornHost", "storeHost", "sysFlag", "reconsumeTimes",
                            "bodyCRC", "keys", "tags", "uniqKey"}
    r = run("rocketmq", "dump", str(store), "--json", "--topic", "orders", "--limit", "2")
    assert [json.loads(x)["topic"] for x in r.output.splitlines()] == ["orders", "orders"]


def test_queries(shared_fixtures: Path, tmp_path: Path) -> None:
    store, m = fixture_store(shared_fixtures, tmp_path)
    q = next(q for q in m["queries"] if q["queryOffset_phyOffsets"])
    r = run("rocketmq", "query-key", str(store), "--topic", q["topic"], "--key", q["key"], "--semantics", "broker", "--json")
    assert [json.loads(x)["commitLogOffset"] for x in r.output.splitlines()] == q["queryOffset_phyOffsets"]
    r = run("rocketmq", "query-key", str(store), "--topic", q["topic"], "--key", q["key"], "--json")
    assert set(q["exactMatchOffsets"]) <= {json.loads(x)["commitLogOffset"] for x in r.output.splitlines()}
    cq = m["consumeQueues"][0]
    r = run("rocketmq", "get", str(store), "--topic", cq["topic"], "--queue", str(cq["queueId"]), "--offset", "0", "--count", "3", "--json")
    assert [json.loads(x)["queueOffset"] for x in r.output.splitlines()] == [0, 1, 2]
    x = next(x for x in m["messages"] if x["topic"] == cq["topic"] and x["queueId"] == cq["queueId"] and x["queueOffset"] == 1)
    r = run("rocketmq", "query-time", str(store), "--topic", cq["topic"], "--queue", str(cq["queueId"]),
            "--timestamp", str(x["storeTimestamp"]), "--json")
    assert json.loads(r.output)["queueOffset"] == 1


def test_verify_and_rebuild(shared_fixtures: Path, tmp_path: Path) -> None:
    store, _m = fixture_store(shared_fixtures, tmp_path)
    r = run("rocketmq", "verify", str(store))
    assert r.exit_code == 0 and "clean" in r.output
    out = tmp_path / "out"
    r = run("rocketmq", "rebuild-index", str(store), "--out", str(out), "--json")
    assert r.exit_code == 0, r.output
    for p in (store / "index").iterdir():
        assert (out / "index" / p.name).read_bytes() == p.read_bytes()
    # corrupt an index item: verify must fail with exit code 1 and name the file
    idx = next((store / "index").iterdir())
    data = bytearray(idx.read_bytes())
    data[40 + 100 * 4 + 20 * 5 + 4 : 40 + 100 * 4 + 20 * 5 + 12] = (123456789).to_bytes(8, "big")
    idx.write_bytes(bytes(data))
    r = run("rocketmq", "verify", str(store))
    assert r.exit_code == 1 and idx.name in r.output
    # in-place rebuild repairs it
    r = run("rocketmq", "rebuild-index", str(store))
    assert r.exit_code == 0
    assert run("rocketmq", "verify", str(store)).exit_code == 0


def test_bad_arguments_give_error_lines(tmp_path: Path, shared_fixtures: Path) -> None:
    r = CliRunner().invoke(cli, ["rocketmq", "inspect", str(tmp_path / "nope")])
    assert r.exit_code == 2 and "error:" in r.output and "Traceback" not in r.output
    store, _ = fixture_store(shared_fixtures, tmp_path)
    r = CliRunner().invoke(cli, ["rocketmq", "get", str(store), "--topic", "../etc", "--queue", "0", "--offset", "0"])
    assert r.exit_code == 2 and "invalid topic" in r.output
    r = CliRunner().invoke(cli, ["rocketmq", "get", str(store), "--topic", "T", "--queue", "-1", "--offset", "0"])
    assert r.exit_code == 2
    r = CliRunner().invoke(cli, ["rocketmq", "query-time", str(store), "--topic", "T", "--queue", "0", "--timestamp", "x"])
    assert r.exit_code == 2


def test_demo_runs(tmp_path: Path) -> None:
    r = run("demo", "--data", str(tmp_path / "d"), "--messages", "3000")
    assert r.exit_code == 0, r.output
    assert "identical to the live store: yes" in r.output
    page = (tmp_path / "d" / "report.html").read_text()
    assert str(tmp_path / "d" / "report.html") in r.output.replace("\n", "")
    assert page.count("<svg") == 11 and "Verify: <span" in page
