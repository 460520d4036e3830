"""``mqstore rocketmq dump`` on the native kernels against the numba kernels and the per-record
reference path: the same stdout bytes, stderr and exit code, on clean and damaged stores, with
every dump option (filters, limits, offsets, time range, decoding, plain table output).

Each backend runs every invocation in one child process (``MQSTORE_KERNELS`` set there); the
per-record reference is the default backend with the bulk JSON writer switched off.  A few
invocations also run as whole one-shot processes (``python -m mqstore.cli.main``: the binary
stdout, the early process end) on each backend."""

from __future__ import annotations

import base64
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from mqstore.kernels import backend

from .test_deferred_end import DAMAGE
from .test_deferred_end import _make as _make_segments
from .test_dump_json_bulk import _make as _make_odd

NATIVE_BUILT = backend.built("_nat_rmq_json") is not None and backend.built("_nat_rmq_scan") is not None

#: runs CLI invocations in this process, prints stdout/stderr bytes (base64) and exit codes as JSON;
#: argv[2] == "per-record": the bulk JSON writer declines every batch (the reference path)
RUNNER = """
import base64, json, sys
from click.testing import CliRunner
from mqstore.cli import rocketmq as cli_rocketmq
from mqstore.cli.main import cli
if sys.argv[2] == "per-record":
    cli_rocketmq._BulkJsonLines.write = lambda self, cl, offs: 0
out = []
for args in json.loads(sys.argv[1]):
    r = CliRunner().invoke(cli, args)
    out.append({"code": r.exit_code, "stdout": base64.b64encode(r.stdout_bytes).decode(),
                "stderr": base64.b64encode(r.stderr_bytes).decode(),
                "error": None if r.exception is None or isinstance(r.exception, SystemExit) else repr(r.exception)})
print(json.dumps(out))
"""


def _env(mode: str | None) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k != backend.ENV}
    if mode is not None:
        env[backend.ENV] = mode
    return env


def _run_jobs(jobs: list[list[str]], mode: str | None, path: str = "bulk") -> list[dict]:
    r = subprocess.run([sys.executable, "-c", RUNNER, json.dumps(jobs), path], capture_output=True, text=True,
                       env=_env(mode), check=False)
    assert r.returncode == 0, r.stderr
    return json.loads(r.stdout.strip().splitlines()[-1])  # type: ignore[no-any-return]


def _options(root: Path) -> list[list[str]]:
    """Every dump option, with and without --json."""
    first = _run_jobs([["rocketmq", "dump", str(root), "--json", "--limit", "60"]], None)[0]
    lines = base64.b64decode(first["stdout"]).splitlines()
    mid = json.loads(lines[len(lines) // 2]) if lines else {"commitLogOffset": 0, "storeTimestamp": 0}
    off, ts = str(mid["commitLogOffset"]), str(mid["storeTimestamp"])
    s = str(root)
    opts = [[], ["--limit", "37"], ["--limit", "1"], ["--topic", "T"], ["--topic", "t1"], ["--from-offset", off],
            ["--from-offset", off, "--limit", "5"], ["--from-time", ts], ["--to-time", ts],
            ["--tag", "t1"], ["--tag", "tag2 || tag3"], ["--key", "shared"], ["--key", "k7"], ["--decode", "utf8"],
            ["--decode", "hex"]]  # fmt: skip
    jobs = [["rocketmq", "dump", s, "--json", *o] for o in opts]
    jobs += [["rocketmq", "dump", s, *o] for o in ([], ["--limit", "9"], ["--topic", "t2"], ["--decode", "hex"])]
    return jobs


def _same(jobs: list[list[str]], got: list[dict], want: list[dict], what: str) -> None:
    assert len(got) == len(want)
    for args, g, w in zip(jobs, got, want, strict=True):
        assert g["error"] is None and w["error"] is None, (args, g["error"], w["error"])
        assert (g["code"], g["stderr"]) == (w["code"], w["stderr"]), (what, args)
        assert g["stdout"] == w["stdout"], (what, args)


STORES = ["odd", *sorted(DAMAGE)]


@pytest.fixture(scope="module")
def stores(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    base = tmp_path_factory.mktemp("dump-native")
    pristine = base / "pristine"
    _make_segments(pristine)
    out = {}
    for name in STORES:
        if name == "odd":  # odd property texts, IPv6 hosts, a value that is not UTF-8 (the per-record fallback)
            root = _make_odd(base / "odd-src")
            seg = root / "commitlog" / "00000000000000000000"
            data = bytearray(seg.read_bytes())
            at = data.find(b"DUP\x01")
            data[at + 4] = 0xFF
            seg.write_bytes(bytes(data))
        else:
            root = base / name
            shutil.copytree(pristine, root)
            DAMAGE[name](root)
        out[name] = root
    return out


@pytest.mark.skipif(not NATIVE_BUILT, reason="the native kernels are not built")
def test_dump_native_numba_and_per_record_give_the_same_bytes(stores: dict[str, Path]) -> None:
    jobs = [job for name in STORES for job in _options(stores[name])]
    native = _run_jobs(jobs, "native")
    _same(jobs, native, _run_jobs(jobs, "numba"), "native vs numba")
    _same(jobs, native, _run_jobs(jobs, "native", "per-record"), "native vs per-record")
    assert sum(bool(r["stderr"]) for r in native) > 0  # the damaged stores report their invalid records
    assert sum(len(r["stdout"]) for r in native) > 0


@pytest.mark.skipif(not NATIVE_BUILT, reason="the native kernels are not built")
@pytest.mark.parametrize("name", ["odd", "crc_middle", "magic_first_segment"])
def test_dump_json_as_a_whole_process(stores: dict[str, Path], name: str) -> None:
    """The one-shot process (binary stdout, early exit): the same bytes on both backends."""
    cmd = [sys.executable, "-m", "mqstore.cli.main", "rocketmq", "dump", str(stores[name]), "--json"]
    runs = [subprocess.run(cmd, capture_output=True, env=_env(m), check=False) for m in ("native", "numba")]
    assert [(r.returncode, r.stdout, r.stderr) for r in runs[1:]] == [(runs[0].returncode, runs[0].stdout,
                                                                        runs[0].stderr)]
    assert runs[0].returncode == 0 and runs[0].stdout.count(b"\n") > 0


def test_json_lines_hosts_of_every_octet_width() -> None:
    """IPv4 hosts whose bytes take 1, 2 and 3 digits (0, 9, 10, 99, 100, 255) and ports of any
    width, born and store host, IPv6 beside them: every implementation gives the reference's lines."""
    import numpy as np

    from mqstore.formats.rocketmq.record import MessageRecord, encode_record
    from mqstore.kernels.registry import kernel_impls

    octets = [0, 9, 10, 99, 100, 255, 1, 254]
    buf = bytearray()
    positions = []
    for i in range(64):
        a, b, c, d = (octets[(i + k * 3) % len(octets)] for k in range(4))
        port = [0, 7, 80, 10911, 65535, 2**31 - 1, -1][i % 7]
        born = f"{a}.{b}.{c}.{d}:{port}" if i % 5 else "[2001:db8::ff]:9876"
        rec = MessageRecord(topic="T", body=b"x" * (i % 5), queue_id=0, queue_offset=i, commit_log_offset=len(buf),
                            born_host=born, store_host=f"{d}.{c}.{b}.{a}:{abs(port) % 65536}",
                            sys_flag=0 if i % 5 else 0x10)  # fmt: skip
        positions.append(len(buf))
        buf += encode_record(rec)
    u8 = np.frombuffer(bytes(buf), np.uint8)
    pos = np.array(positions, np.int64)
    impls = kernel_impls("rocketmq.json_lines")
    want = bytes(impls.reference(u8, 0, pos))
    assert b'"bornHost":"0.9.10.99:0"' in want or b'"bornHost":"255.' in want
    for _, fn in impls.items():
        assert bytes(fn(u8, 0, pos)) == want
