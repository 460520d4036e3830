"""``rocketmq dump --json`` in bulk (``json_lines``): the same bytes as the per-record path, on
messages with every kind of property text, hosts, flags and a record whose properties are not
valid UTF-8 (the per-record fallback)."""

from __future__ import annotations

import shutil
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from click.testing import CliRunner

from kernel_twins import twins
from mqstore import MessageStore, StoreConfig
from mqstore.cli import rocketmq as cli_rocketmq
from mqstore.cli.main import cli

ODD = ['quote " and \\ back', "tab\tnew\nline\r\x00\x1f\x7f", "é漢字🎉", "", "  two  spaces ", "\u2028x"]


def _make(tmp_path: Path, n: int = 120) -> Path:
    root = tmp_path / "store"
    cfg = StoreConfig(commit_log_file_size=1 << 16, background_services=False)
    with MessageStore.open(root, cfg) as s:
        for i in range(n):
            odd = ODD[i % len(ODD)]
            props = {"a": odd or "x", f"n{odd}" or "n": "v", "DUP": str(i)} if i % 4 else None
            s.put("Topic-B%x|y" if i % 5 == 0 else "T", bytes(range(i % 7)) * (i % 13), queue_id=i % 3,
                  keys=[f"k{i}", "shared"] if i % 3 else f"k{i}", tags=None if i % 6 == 0 else f"t{i % 4}",
                  properties=props, flag=-i if i % 9 == 0 else i,
                  born_host="[2001:db8::1]:9876" if i % 8 == 0 else "10.0.0.7:1234",
                  born_timestamp=1_700_000_000_000 + i * 7, sys_flag=0x10 if i % 8 == 0 else 0)  # fmt: skip
        s.flush()
    return root


def _dump(root: Path, *args: str) -> bytes:
    r = CliRunner().invoke(cli, ["rocketmq", "dump", str(root), "--json", *args], catch_exceptions=False)
    assert r.exit_code == 0, r.output
    return r.stdout_bytes


@pytest.mark.parametrize("args", [(), ("--limit", "37"), ("--topic", "T"), ("--from-offset", "")])
def test_bulk_dump_is_byte_identical(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, args: tuple[str, ...]) -> None:
    root = _make(tmp_path)
    if args == ("--from-offset", ""):  # the 50th record's offset (a later segment)
        import json

        args = ("--from-offset", str(json.loads(_dump(root).splitlines()[50])["commitLogOffset"]))
    fast = _dump(root, *args)
    monkeypatch.setattr(cli_rocketmq._BulkJsonLines, "write", lambda self, cl, offs: False)
    slow = _dump(root, *args)
    assert fast == slow and fast.count(b"\n") > 0


def test_bulk_dump_falls_back_on_invalid_utf8(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    root = _make(tmp_path, 30)
    seg = root / "commitlog" / "00000000000000000000"
    data = bytearray(seg.read_bytes())
    at = data.find(b"DUP\x01")
    assert at > 0
    data[at + 4] = 0xFF  # a property value that is not UTF-8 (no CRC covers the properties)
    seg.write_bytes(bytes(data))
    fast = _dump(root)
    monkeypatch.setattr(cli_rocketmq._BulkJsonLines, "write", lambda self, cl, offs: False)
    assert fast == _dump(root)
    assert "\ufffd".encode() in fast


@pytest.mark.parametrize("impl", twins("rocketmq.json_lines"))
def test_json_lines_twins(tmp_path: Path, impl: Any) -> None:
    from mqstore.kernels.rocketmq.json_lines import json_lines_py

    root = _make(tmp_path)
    seg = (root / "commitlog" / "00000000000000000000").read_bytes()
    with MessageStore.open(root, StoreConfig(commit_log_file_size=1 << 16), read_only=True) as s:
        offs = next(s.engine.commit_log.scan(0, 1 << 16)).commit_log_offset
    u8 = np.frombuffer(seg, np.uint8)
    for pos in (offs, offs[::3], offs[:1], offs[:0]):
        got = impl(u8, 0, pos)
        assert got is not None and bytes(got) == bytes(json_lines_py(u8, 0, pos))  # type: ignore[arg-type]
    assert impl(u8, 0, np.array([offs[0] + 1], np.int64)) is None  # not a record
    shutil.rmtree(root)
