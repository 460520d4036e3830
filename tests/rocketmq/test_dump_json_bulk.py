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
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

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


_PROP_BYTES = st.lists(st.sampled_from([b"\x01", b"\x02", b" ", b"KEYS", b"TAGS", b"UNIQ_KEY", b"a", b'"', b"\\",
                                        b"\x00", b"\x1f", "é".encode(), "🎉".encode(), b"\xff", b"\xc3", b"\xed\xa0\x80"]),
                       max_size=40).map(b"".join)  # fmt: skip


@settings(max_examples=150, suppress_health_check=[HealthCheck.too_slow])
@given(texts=st.lists(_PROP_BYTES, min_size=1, max_size=6), topic=st.sampled_from(["T", "t\"q", "é-topic"]),
       body=st.binary(max_size=50), v6=st.booleans(), at=st.integers(0, 1000))  # fmt: skip
def test_json_lines_implementations_agree_on_any_properties(texts: list[bytes], topic: str, body: bytes, v6: bool,
                                                             at: int) -> None:  # fmt: skip
    """Records whose properties text is any byte string (separators anywhere, repeated and empty
    names, escapes, invalid UTF-8): every implementation gives the same lines, or all decline."""
    from mqstore.formats.rocketmq.record import MessageRecord, encode_record
    from mqstore.kernels.registry import kernel_impls

    buf = bytearray()
    positions = []
    for i, raw in enumerate(texts):
        placeholder = "p" * len(raw)  # ASCII of the same length, patched below with the raw bytes
        rec = MessageRecord(topic=topic, body=body, queue_id=i, flag=at - 500, queue_offset=i, commit_log_offset=len(buf),
                            born_host="[2001:db8::1]:-7" if v6 and i % 2 else "10.1.2.3:65535",
                            properties_text=placeholder, born_timestamp=at * 1000 + i)  # fmt: skip
        enc = bytearray(encode_record(rec))
        k = enc.rfind(placeholder.encode()) if raw else -1
        if raw:
            enc[k : k + len(raw)] = raw
        positions.append(len(buf))
        buf += enc
    u8 = np.frombuffer(bytes(buf), np.uint8)
    pos = np.array(positions, np.int64)
    impls = kernel_impls("rocketmq.json_lines")
    want = impls.reference(u8, 0, pos)
    for _, fn in impls.items():
        got = fn(u8, 0, pos, [np.empty(8, np.uint8)])  # a scratch buffer far too small: it must grow
        assert (got is None) == (want is None)
        if want is not None:
            assert bytes(got) == bytes(want)  # type: ignore[arg-type]


def test_json_lines_on_several_threads_is_byte_identical() -> None:
    """A batch large enough to be cut into one part per thread (the native implementation writes
    the parts side by side and moves them together): the same bytes as one thread and as the twin."""
    from mqstore.formats.rocketmq.record import MessageRecord, encode_record
    from mqstore.kernels.registry import kernel_impls

    buf = bytearray()
    positions = []
    for i in range(9000):
        rec = MessageRecord(topic=f"T{i % 7}", body=b"x" * (i % 50), queue_id=i % 4, queue_offset=i,
                            commit_log_offset=len(buf), properties_text=f"KEYS\x01k{i} s\x02TAGS\x01t{i % 3}\x02")  # fmt: skip
        positions.append(len(buf))
        buf += encode_record(rec)
    u8 = np.frombuffer(bytes(buf), np.uint8)
    pos = np.array(positions, np.int64)
    impls = kernel_impls("rocketmq.json_lines")
    want = bytes(impls.reference(u8, 0, pos))
    for _, fn in impls.items():
        for threads in (1, 2, 3):
            assert bytes(fn(u8, 0, pos, [], threads=threads)) == want
    broken = bytearray(buf)
    broken[positions[7000] + 4] ^= 0xFF  # a bad magic in the last part: the whole batch declines
    for _, fn in impls.items():
        assert fn(np.frombuffer(bytes(broken), np.uint8), 0, pos, [], threads=3) is None


def _records(n: int, body_len: Any = lambda i: i % 50) -> tuple[np.ndarray, np.ndarray]:
    from mqstore.formats.rocketmq.record import MessageRecord, encode_record

    buf = bytearray()
    positions = []
    for i in range(n):
        body = bytes((i * 31 + k * 7) & 0xFF for k in range(body_len(i)))
        rec = MessageRecord(topic=f"T{i % 7}", body=body, queue_id=i % 4, queue_offset=i, commit_log_offset=len(buf),
                            properties_text=f"KEYS\x01k{i} s\x02TAGS\x01t{i % 3}\x02", flag=-i * 1_000_003,
                            born_timestamp=10 ** (i % 19))  # fmt: skip
        positions.append(len(buf))
        buf += encode_record(rec)
    return np.frombuffer(bytes(buf), np.uint8), np.array(positions, np.int64)


@pytest.mark.parametrize("impl", twins("rocketmq.json_lines"))
def test_bodies_of_every_length_and_integers_of_every_width(impl: Any) -> None:
    """base64 of bodies of 0..200 bytes (the 24-byte vector steps, the 6- and 3-byte steps and
    the padded tail) and integers of 1..19 digits, either sign: the same bytes as the twin."""
    from mqstore.kernels.rocketmq.json_lines import json_lines_py

    u8, pos = _records(201, lambda i: i)
    assert bytes(impl(u8, 0, pos)) == bytes(json_lines_py(u8, 0, pos))  # type: ignore[arg-type]


def _string_records(n: int = 240) -> tuple[np.ndarray, np.ndarray]:
    """Records whose topic, property names and values, keys and tags are 0..60 bytes long with a
    character JSON escapes (or a multi-byte one) at every position, or none; the last record's
    properties end at the buffer's end (no readable byte after them)."""
    from mqstore.formats.rocketmq.record import MessageRecord, encode_record

    specials = ['"', "\\", "\n", "\x1f", "\x00", "é", "\u20ac", "\x7f", "/"]
    buf = bytearray()
    positions = []
    for i in range(n):
        length = i % 61
        at = (i * 7) % (length + 1)
        sp = specials[i % len(specials)] if i % 4 else ""
        text = ("abcdefghijklmnopqrstuvwxyz0123456789" * 2)[:length]
        text = text[:at] + sp + text[at:]
        key = text.replace(" ", "_") or "k"
        props = f"KEYS\x01{key} {key[::-1]}\x02TAGS\x01{text or 't'}\x02N{text}\x01v{i}\x02UNIQ_KEY\x01{text or 'u'}"
        rec = MessageRecord(topic=f"T{text[:20].strip() or 'x'}", body=b"b", queue_id=0, queue_offset=i,
                            commit_log_offset=len(buf), properties_text=props)
        positions.append(len(buf))
        buf += encode_record(rec)
    return np.frombuffer(bytes(buf), np.uint8), np.array(positions, np.int64)


@pytest.mark.parametrize("impl", twins("rocketmq.json_lines"))
def test_strings_of_every_length_with_escapes_anywhere(impl: Any) -> None:
    """The 16-byte string steps of the native writer: every length and escape position, strings
    that end at the buffer's end; the same bytes as the twin."""
    from mqstore.kernels.rocketmq.json_lines import json_lines_py

    u8, pos = _string_records()
    assert bytes(impl(u8, 0, pos)) == bytes(json_lines_py(u8, 0, pos))  # type: ignore[arg-type]
    for k in (1, 2, 3, 17):  # the last records alone: their strings run to the end of a shorter buffer
        end = int(pos[-k + 1]) if k > 1 else len(u8)
        sub = u8[:end]
        assert bytes(impl(sub, 0, pos[-k:len(pos) - k + 1] if k > 1 else pos[-1:])) == bytes(
            json_lines_py(sub, 0, pos[-k:len(pos) - k + 1] if k > 1 else pos[-1:]))  # type: ignore[arg-type]


def test_scalar_string_path_gives_the_same_bytes() -> None:
    """The native writer without its SIMD steps (``MQSTORE_NO_AVX2``, read at import: no AVX2
    base64, no SSE2 strings) writes the same lines of the escape-heavy records."""
    import hashlib
    import os
    import subprocess
    import sys

    from mqstore.kernels.rocketmq.json_lines import json_lines_py

    code = ("import sys, hashlib; sys.path.insert(0, sys.argv[1]); import numpy as np\n"
            "from test_dump_json_bulk import _string_records\n"
            "from mqstore.kernels.rocketmq.json_lines import json_lines\n"
            "u8, pos = _string_records()\n"
            "print(hashlib.sha256(bytes(json_lines(u8, 0, pos))).hexdigest())")  # fmt: skip
    here = str(Path(__file__).parent)
    out = subprocess.run([sys.executable, "-c", code, here], capture_output=True, text=True, check=True,
                         env={**os.environ, "MQSTORE_NO_AVX2": "1", "PYTHONPATH": str(Path(here).parent)})
    u8, pos = _string_records()
    assert out.stdout.strip() == hashlib.sha256(bytes(json_lines_py(u8, 0, pos))).hexdigest()  # type: ignore[arg-type]


def test_scalar_base64_path_gives_the_same_bytes() -> None:
    """The native kernel without its AVX2 steps (``MQSTORE_NO_AVX2``, read at import) writes the
    same lines."""
    import hashlib
    import os
    import subprocess
    import sys

    from mqstore.kernels.rocketmq.json_lines import json_lines_py

    code = ("import sys, hashlib; sys.path.insert(0, sys.argv[1]); import numpy as np\n"
            "from test_dump_json_bulk import _records\n"
            "from mqstore.kernels.rocketmq.json_lines import json_lines\n"
            "u8, pos = _records(201, lambda i: i)\n"
            "print(hashlib.sha256(bytes(json_lines(u8, 0, pos))).hexdigest())")  # fmt: skip
    here = str(Path(__file__).parent)
    out = subprocess.run([sys.executable, "-c", code, here], capture_output=True, text=True, check=True,
                         env={**os.environ, "MQSTORE_NO_AVX2": "1", "PYTHONPATH": str(Path(here).parent)})
    u8, pos = _records(201, lambda i: i)
    assert out.stdout.strip() == hashlib.sha256(bytes(json_lines_py(u8, 0, pos))).hexdigest()  # type: ignore[arg-type]


@pytest.mark.parametrize("impl", twins("rocketmq.json_lines"))
def test_json_line_chunks_pipeline(impl: Any) -> None:
    """``json_line_chunks``: the pieces joined are the lines of the whole batch on any chunk size
    and thread count; a record that needs the per-record path stops the pieces before its chunk."""
    from mqstore.kernels.rocketmq.json_lines import json_line_chunks, json_lines_py

    u8, pos = _records(300)
    want = bytes(json_lines_py(u8, 0, pos))  # type: ignore[arg-type]
    for chunk, threads in ((7, 1), (7, 2), (64, 3), (1000, 2)):
        got, rows = b"", 0
        for p, k in json_line_chunks(u8, 0, pos, threads=threads, chunk=chunk, impl=impl):
            got += bytes(p)  # (a piece is a view of a reused buffer: copied before the next)
            rows += k
        assert got == want and rows == len(pos)
    broken = pos.copy()
    broken[150] += 1  # not a record
    got, rows = b"", 0
    for p, k in json_line_chunks(u8, 0, broken, threads=2, chunk=16, impl=impl):
        got += bytes(p)
        rows += k
    assert rows == 144 and got == bytes(json_lines_py(u8, 0, pos[:144]))  # type: ignore[arg-type]
