"""`mqstore rocketmq query-time / rebuild-index / inspect / verify` with the sparse time index."""

from __future__ import annotations

import json
import random
from pathlib import Path

from click.testing import CliRunner

from mqstore.cli.main import cli
from mqstore.storage.rocketmq.timeindex import TIMEINDEX_DIR, all_sidecars

from .test_timeindex import brute, make_store


def run(*args: str):
    return CliRunner().invoke(cli, list(args))


def _store(tmp_path: Path, enabled: bool = True) -> tuple[Path, list[int]]:
    stamps = sorted(random.Random(21).choices(range(2000, 2015), k=60))
    s = make_store(tmp_path / "s", stamps, 2, enabled=enabled)
    s.close()
    return tmp_path / "s", stamps


def test_query_time_exact_and_broker(tmp_path: Path) -> None:
    store, stamps = _store(tmp_path)
    for t in (1999, 2000, stamps[30], 2007, 2016):
        for b in ("lower", "upper"):
            for sem in ("exact", "broker"):
                r = run("rocketmq", "query-time", str(store), "--topic", "T", "--queue", "0", "--timestamp", str(t),
                        "--boundary", b, "--semantics", sem, "--json")
                assert r.exit_code == 0, r.output
                got = json.loads(r.output)
                assert got["semantics"] == sem and got["queueOffset"] == brute(stamps, t, b)
    r = run("rocketmq", "query-time", str(store), "--topic", "T", "--queue", "0", "--timestamp", "2005")
    assert r.exit_code == 0 and r.output.strip() == str(brute(stamps, 2005, "lower"))


def test_query_time_bad_input(tmp_path: Path) -> None:
    store, _ = _store(tmp_path)
    base = ["rocketmq", "query-time", str(store), "--topic", "T", "--queue", "0"]
    for extra in (["--timestamp", "x"], ["--timestamp", "1", "--semantics", "fast"],
                  ["--timestamp", "1", "--boundary", "middle"]):
        r = run(*base, *extra)
        assert r.exit_code == 2, (extra, r.output)
    r = run("rocketmq", "query-time", str(store), "--topic", "bad topic!", "--queue", "0", "--timestamp", "1")
    assert r.exit_code == 2 and "error:" in r.output and "Traceback" not in r.output
    r = run("rocketmq", "query-time", str(tmp_path / "missing"), "--topic", "T", "--queue", "0", "--timestamp", "1")
    assert r.exit_code == 2 and "error:" in r.output


def test_rebuild_index_option_inspect_verify(tmp_path: Path) -> None:
    store, stamps = _store(tmp_path, enabled=False)
    assert not (store / TIMEINDEX_DIR).exists()
    before = sorted(p.name for p in store.rglob("*"))
    r = run("rocketmq", "query-time", str(store), "--topic", "T", "--queue", "0", "--timestamp", "2003")
    assert r.exit_code == 0 and r.output.strip() == str(brute(stamps, 2003, "lower"))  # fallback search
    assert sorted(p.name for p in store.rglob("*")) == before  # read-only commands write nothing
    r = run("rocketmq", "rebuild-index", str(store), "--time-index", "--time-index-interval", "3", "--json")
    assert r.exit_code == 0, r.output
    assert all_sidecars(store)
    r = run("rocketmq", "inspect", str(store), "--json")
    assert r.exit_code == 0, r.output
    tix = json.loads(r.output)["timeIndex"]
    assert tix and {f["kind"] for f in tix} == {"timeindex"} and {f["interval"] for f in tix} == {3}
    r = run("rocketmq", "inspect", str(store))
    assert r.exit_code == 0 and "time index" in r.output
    r = run("rocketmq", "verify", str(store))
    assert r.exit_code == 0 and "clean" in r.output, r.output
    # a stray file is listed as unknown and reported, a damaged sidecar too
    (store / TIMEINDEX_DIR / "T" / "0" / "notes.txt").write_text("x")
    _t, _q, first = all_sidecars(store)[0]
    first.write_bytes(b"\x00" * 20)
    r = run("rocketmq", "inspect", str(store), "--json")
    kinds = {f["file"].rsplit("/", 1)[-1]: (f["kind"], f["error"]) for f in json.loads(r.output)["timeIndex"]}
    assert kinds["notes.txt"] == ("unknown", None) and kinds[first.name][1]
    r = run("rocketmq", "verify", str(store), "--json")
    assert r.exit_code == 1
    problems = json.loads(r.output)["problems"]
    assert any("notes.txt" in p for p in problems) and any(first.name in p for p in problems)
    r = run("rocketmq", "query-time", str(store), "--topic", "T", "--queue", "0", "--timestamp", "2003")
    assert r.exit_code == 0 and r.output.strip() == str(brute(stamps, 2003, "lower"))
    r = run("rocketmq", "rebuild-index", str(store), "--no-time-index")
    assert r.exit_code == 0 and not (store / TIMEINDEX_DIR).exists()
    r = run("rocketmq", "rebuild-index", str(store), "--time-index-interval", "0")
    assert r.exit_code == 2


def test_report_verify_summary_groups_sidecar_problems(tmp_path: Path) -> None:
    from mqstore.storage.rocketmq.layout import resolve_config
    from mqstore.storage.rocketmq.report import verify_summary

    store, _ = _store(tmp_path)
    cfg = resolve_config(store)
    summary = verify_summary(store, cfg)
    assert summary["ok"] and any(f["file"] == f"{TIMEINDEX_DIR}/T/0" for f in summary["files"])
    _t, _q, first = all_sidecars(store)[0]
    first.write_bytes(first.read_bytes()[:16] + (5).to_bytes(8, "big") + first.read_bytes()[24:])
    summary = verify_summary(store, cfg)
    entry = next(f for f in summary["files"] if f["file"] == f"{TIMEINDEX_DIR}/T/0")
    assert not summary["ok"] and not entry["ok"] and entry["problems"] and not summary["otherProblems"]
