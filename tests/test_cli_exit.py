"""The ``mqstore`` command ends its process without the interpreter's teardown (``os._exit``)
when that is safe; its output and exit status must be exactly those of a normal exit."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
from pathlib import Path

import pytest

from mqstore import MessageStore, StoreConfig
from mqstore.cli import main as cli_main


def _store(tmp_path: Path, n: int) -> Path:
    root = tmp_path / "store"
    with MessageStore.open(root, StoreConfig(background_services=False)) as s:
        s.put_columns("ExitTopic", [b"b" * 700] * n, [i & 3 for i in range(n)],
                      keys=[f"k{i} u{i % 7}" for i in range(n)], tags="T")
    return root


def _run(args: list[str], *, normal_exit: bool) -> subprocess.CompletedProcess[bytes]:
    env = dict(os.environ)
    env.pop("MQSTORE_NORMAL_EXIT", None)
    if normal_exit:
        env["MQSTORE_NORMAL_EXIT"] = "1"
    return subprocess.run([sys.executable, "-m", "mqstore.cli.main", *args], capture_output=True, env=env,
                          timeout=300, stdin=subprocess.DEVNULL)


def test_fast_and_normal_exit_give_the_same_output_and_status(tmp_path: Path) -> None:
    n = 3000  # a dump of ~2.6 MB: many times a pipe's buffer, so the reader is still reading at exit
    store = _store(tmp_path, n)
    for args, status in ((["rocketmq", "dump", str(store), "--json"], 0),
                         (["rocketmq", "rebuild-index", str(store), "--out", str(tmp_path / "out{}"), "--json"], 0),
                         (["rocketmq", "inspect", str(tmp_path / "missing")], 2),
                         (["rocketmq", "no-such-command"], 2),
                         (["--version"], 0)):
        fast = _run([a.format("f") for a in args], normal_exit=False)
        slow = _run([a.format("n") for a in args], normal_exit=True)
        assert fast.returncode == slow.returncode == status, (args, fast.stderr, slow.stderr)
        assert fast.stderr.replace(b"outf", b"outn") == slow.stderr
        if args[1:2] == ["rebuild-index"]:
            a, b = json.loads(fast.stdout.splitlines()[-1]), json.loads(slow.stdout.splitlines()[-1])
            assert a["messages"] == b["messages"] == n
            for sub in ("consumequeue", "index"):
                fa = sorted(p.relative_to(tmp_path / "outf") for p in (tmp_path / "outf" / sub).rglob("*"))
                fb = sorted(p.relative_to(tmp_path / "outn") for p in (tmp_path / "outn" / sub).rglob("*"))
                assert fa == fb and fa
                for p in fa:
                    if (tmp_path / "outf" / p).is_file():
                        assert (tmp_path / "outf" / p).read_bytes() == (tmp_path / "outn" / p).read_bytes()
        else:
            assert fast.stdout == slow.stdout
    dumped = [json.loads(line) for line in _run(["rocketmq", "dump", str(store), "--json"],
                                                normal_exit=False).stdout.splitlines()]
    assert len(dumped) == n


class _Exited(Exception):
    pass


@pytest.fixture()
def fake_exit(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    calls: list[int] = []

    def exit_(status: int) -> None:
        calls.append(status)
        raise _Exited

    monkeypatch.setattr(cli_main.os, "_exit", exit_)
    monkeypatch.setattr(cli_main.atexit, "_run_exitfuncs", lambda: None)
    monkeypatch.delenv("MQSTORE_NORMAL_EXIT", raising=False)
    return calls


def test_end_process_statuses(fake_exit: list[int], monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delitem(sys.modules, "pyspark", raising=False)
    for code, status in ((None, 0), (0, 0), (2, 2), (256 + 3, 3)):
        with pytest.raises(_Exited):
            cli_main._end_process(code)
        assert fake_exit[-1] == status
    cli_main._end_process("a message for stderr")  # Python prints it and exits 1: the normal exit
    cli_main._end_process(True)
    assert len(fake_exit) == 4


def test_end_process_keeps_the_normal_exit_when_unsafe(fake_exit: list[int], monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delitem(sys.modules, "pyspark", raising=False)
    release = threading.Event()
    worker = threading.Thread(target=release.wait, daemon=False)
    worker.start()
    try:
        cli_main._end_process(0)  # a non-daemon thread still runs: Python must wait for it
    finally:
        release.set()
        worker.join()
    monkeypatch.setitem(sys.modules, "pyspark", sys)  # PySpark loaded: its JVM stops at the normal exit
    cli_main._end_process(0)
    monkeypatch.delitem(sys.modules, "pyspark")
    monkeypatch.setenv("MQSTORE_NORMAL_EXIT", "1")
    cli_main._end_process(0)
    assert fake_exit == []


def test_end_process_stops_the_kernel_pool(fake_exit: list[int], monkeypatch: pytest.MonkeyPatch) -> None:
    from mqstore.kernels import threads

    monkeypatch.delitem(sys.modules, "pyspark", raising=False)
    assert threads.run_parallel(lambda x: x * 2, [(1,), (2,), (3,)]) == [2, 4, 6]
    assert any(t.name.startswith("mqstore-kernel") for t in threading.enumerate())
    with pytest.raises(_Exited):
        cli_main._end_process(0)
    assert not any(t.name.startswith("mqstore-kernel") and t.is_alive() for t in threading.enumerate())
    assert threads.run_parallel(lambda x: x + 1, [(1,), (2,)]) == [2, 3]  # a new pool on the next call
