"""`mqstore kafka ...` through click's CliRunner."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import CliRunner
from kafka_support import case_dir, copy_partition, load_manifest

from mqstore.cli.main import cli


def run(*args: str) -> tuple[int, str, str]:
    r = CliRunner().invoke(cli, ["kafka", *args])
    return r.exit_code, r.stdout, r.stderr


def test_dump_log_json_and_text() -> None:
    d = case_dir("single_default") / "segments"
    code, out, _ = run("dump", str(d / "00000000000000000000.log"), "--json")
    assert code == 0
    rows = [json.loads(x) for x in out.splitlines()]
    m = load_manifest("single_default")["segments"][0]
    assert [r["position"] for r in rows] == [b["position"] for b in m["batches"]]
    assert all(r["isvalid"] for r in rows)
    code, out, _ = run("dump", str(d / "00000000000000000000.log"), "--print-data")
    assert code == 0
    assert out.count("| offset:") == sum(len(b["records"]) for b in m["batches"])
    assert "endTxnMarker: COMMIT" in out and "endTxnMarker: ABORT" in out
    assert out.splitlines()[1] == "Log starting offset: 0"  # as kafka-dump-log
    assert out.splitlines()[2].startswith("baseOffset: 0 lastOffset: 8 count: 9")


def test_dump_indexes_and_directory() -> None:
    d = case_dir("multi_segment_roll_bytes") / "segments"
    code, out, _ = run("dump", str(d / "00000000000000000000.index"), "--json")
    m = load_manifest("multi_segment_roll_bytes")["segments"][0]
    assert code == 0
    assert [[r["offset"], r["position"]] for r in map(json.loads, out.splitlines())] == m["offset_index"]["entry_list"]
    code, out, _ = run("dump", str(d / "00000000000000000000.timeindex"))
    ts0, off0 = m["time_index"]["entry_list"][0]
    assert code == 0 and out.splitlines()[1] == f"timestamp: {ts0} offset: {off0}"
    code, out, _ = run("dump", str(d), "--json")
    files = {json.loads(x)["file"] for x in out.splitlines()}
    assert len(files) == 39


def test_dump_untrimmed_index_stops_at_padding() -> None:
    d = case_dir("unclean_flush") / "segments"
    code, out, _ = run("dump", str(d / "00000000000000000000.index"), "--json")
    assert code == 0 and len(out.splitlines()) == 87


def test_dump_empty_index(tmp_path: Path) -> None:
    p = tmp_path / "00000000000000000000.index"
    p.write_bytes(b"")
    code, out, _ = run("dump", str(p))
    assert code == 0 and f"{p} is empty." in out


@pytest.mark.parametrize("case", ["single_default", "multi_segment_roll_bytes", "append_groups"])
def test_verify_clean_fixtures(case: str) -> None:
    code, out, _ = run("verify", str(case_dir(case) / "segments"), "--json")
    rep = json.loads(out)
    assert code == 0 and rep["ok"] and rep["problems"] == []


def test_verify_strict_reports_multi_batch_entries() -> None:
    code, out, _ = run("verify", str(case_dir("append_groups") / "segments"), "--strict", "--json")
    rep = json.loads(out)
    assert code == 1 and {p["kind"] for p in rep["problems"]} == {"index_mismatch"}


def test_verify_reports_untrimmed_and_corrupt() -> None:
    # the active segment of a live broker (preallocated indexes): info, sound data → exit 0 (issue 12.3)
    code, out, _ = run("verify", str(case_dir("unclean_flush") / "segments"))
    assert code == 0
    assert "note: index_preallocated: active segment of a live broker: 4096 bytes preallocated, 87 entries " \
           "(696 bytes once trimmed" in out
    assert "note: time_index_preallocated: active segment of a live broker: 4092 bytes preallocated, 72 entries " \
           "(864 bytes once trimmed" in out
    assert out.splitlines()[-1] == ("OK: 1 segment(s), 120 batches, 384989 bytes, 87 offset / 72 time index "
                                    "entries checked")
    # --strict keeps the old verdict on any untrimmed file
    code, out, _ = run("verify", str(case_dir("unclean_flush") / "segments"), "--strict")
    assert code == 1
    assert "index_padded" in out and "time_index_sanity" in out and "time_index_padded" in out
    code, out, _ = run("verify", str(case_dir("corrupt_tail_recover") / "corrupted_input"), "--json")
    rep = json.loads(out)
    assert code == 1 and {p["kind"] for p in rep["problems"]} == {"crc", "torn_tail"}
    assert rep["problems"][0]["position"] == 234952


def test_verify_detects_index_mismatch_and_timestamp_problems(tmp_path: Path) -> None:
    part = copy_partition("single_default", tmp_path)
    idx = part / "00000000000000000000.index"
    raw = bytearray(idx.read_bytes())
    raw[4:8] = (12345).to_bytes(4, "big")  # position of entry 0 no longer a batch start
    idx.write_bytes(bytes(raw))
    ti = part / "00000000000000000000.timeindex"
    raw = bytearray(ti.read_bytes())
    raw[12:20] = (1).to_bytes(8, "big")  # entry 1: timestamp out of order and wrong
    ti.write_bytes(bytes(raw))
    code, out, _ = run("verify", str(part), "--json")
    kinds = {p["kind"] for p in json.loads(out)["problems"]}
    assert code == 1
    assert {"index_mismatch", "time_index_timestamp_mismatch", "time_index_out_of_order"} <= kinds


def test_rebuild_index_byte_identical(tmp_path: Path) -> None:
    src = case_dir("multi_segment_roll_bytes") / "segments"
    out_dir = tmp_path / "out"
    code, out, _ = run("rebuild-index", str(src), "--out", str(out_dir), "--index-interval-bytes", "2048", "--json")
    assert code == 0 and len(out.splitlines()) == 13
    for f in src.iterdir():
        if f.suffix != ".log":
            assert (out_dir / f.name).read_bytes() == f.read_bytes()


def test_rebuild_index_in_place_and_corrupt_input(tmp_path: Path) -> None:
    part = copy_partition("unclean_flush", tmp_path)
    code, _, _ = run("rebuild-index", str(part / "00000000000000000000.log"), "--index-interval-bytes", "512",
                     "--max-index-bytes", "4096")
    assert code == 0
    rec = case_dir("unclean_flush") / "recovered"
    for name in ("00000000000000000000.index", "00000000000000000000.timeindex"):
        assert (part / name).read_bytes() == (rec / name).read_bytes()
    part2 = copy_partition("corrupt_tail_recover", tmp_path / "c", "corrupted_input")
    size = (part2 / "00000000000000000000.log").stat().st_size
    code, _, err = run("rebuild-index", str(part2), "--index-interval-bytes", "1024")
    assert code == 0 and "warning:" in err and "158887 invalid bytes" in err
    assert (part2 / "00000000000000000000.log").stat().st_size == size  # never modified


def test_lookup_offset_and_timestamp() -> None:
    m = load_manifest("multi_segment_roll_bytes")
    d = case_dir("multi_segment_roll_bytes") / "segments"
    seg = m["segments"][3]
    b = seg["batches"][5]
    code, out, _ = run("lookup", str(d), "--offset", str(b["base_offset"]), "--json")
    r = json.loads(out)
    assert code == 0
    assert (r["segment"], r["offset"], r["position"], r["size"]) == (seg["base_offset"], b["last_offset"],
                                                                     b["position"], b["size"])
    for s in m["segments"]:
        for p in s["probes"]:
            if p["op"] == "find_by_ts" and p["result"] is not None and p["starting_offset"] == 0:
                code, out, _ = run("lookup", str(d / f"{s['name']}.log"), "--timestamp", str(p["timestamp"]), "--json")
                r = json.loads(out)
                assert code == 0 and (r["offset"], r["timestamp"]) == (p["result"]["offset"], p["result"]["timestamp"])
    code, out, _ = run("lookup", str(d), "--timestamp", "1700000001000")
    assert code == 0 and "430" in out


def test_lookup_not_found_and_bad_arguments(tmp_path: Path) -> None:
    d = case_dir("single_default") / "segments"
    code, _, err = run("lookup", str(d), "--offset", "999999")
    assert code == 1 and err.startswith("error:")
    for args in (["lookup", str(d)], ["lookup", str(d), "--offset", "1", "--timestamp", "2"],
                 ["lookup", str(d), "--offset", "-5"], ["lookup", str(tmp_path / "missing"), "--offset", "1"],
                 ["dump", str(tmp_path / "missing")], ["verify", str(tmp_path / "missing")],
                 ["rebuild-index", str(d), "--max-index-bytes", "3", "--out", str(tmp_path)],
                 ["rebuild-index", str(d), "--index-interval-bytes", "-1", "--out", str(tmp_path)],
                 ["dump", str(Path(__file__))]):
        code, out, err = run(*args)
        assert code != 0, args
        assert err.startswith("error:"), (args, err)
        assert "Traceback" not in err + out


def test_rebuild_index_full_index_is_an_error(tmp_path: Path) -> None:
    d = case_dir("single_default") / "segments"
    code, _, err = run("rebuild-index", str(d), "--out", str(tmp_path), "--max-index-bytes", "100",
                       "--index-interval-bytes", "0")
    assert code == 2 and err.startswith("error:") and "full" in err


def test_cli_on_garbage_log(tmp_path: Path) -> None:
    p = tmp_path / "00000000000000000000.log"
    p.write_bytes(b"\x00" * 8 + b"\x00\x00\x00\x05" + b"\x00" * 30)  # size field 5 < 14
    code, out, _ = run("verify", str(p), "--json")
    assert code == 1 and json.loads(out)["problems"][0]["kind"] == "bad_size"
    code, out, _ = run("dump", str(p), "--json")
    assert code == 0 and json.loads(out.splitlines()[-1])["type"] == "tail"
