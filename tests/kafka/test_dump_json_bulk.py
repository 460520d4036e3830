"""``kafka dump --json`` in bulk: the JSON-lines kernel (native, numba) writes the same bytes as
``json.dumps`` of the dump's dicts, on batches of every shape (headers with odd keys, null keys and
values, transactional, log-append time, delete horizon, sequences), declines a batch whose records
the reader rejects, and the CLI's output is byte-identical to the per-record path on whole
segments with compressed, control and corrupt batches around the plain ones."""

from __future__ import annotations

import struct
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from click.testing import CliRunner
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from kernel_twins import twins
from mqstore.cli import kafka as cli_kafka
from mqstore.cli.main import cli
from mqstore.formats.kafka import SimpleRecord, encode_batch
from mqstore.formats.kafka.batch import Compression, TimestampType, batch_crc
from mqstore.kernels.kafka.json_lines import json_lines_py, line_prefix
from mqstore.kernels.registry import kernel_impls

HEADER_KEYS = st.text(alphabet=st.sampled_from(['a', '"', "\\", "\n", "\x00", "\x1f", "é", "🎉", " ", "\u2028"]),
                      max_size=6)  # fmt: skip
OPT_BYTES = st.none() | st.binary(max_size=40)
RECORD = st.builds(SimpleRecord, value=OPT_BYTES, key=OPT_BYTES,
                   headers=st.lists(st.tuples(HEADER_KEYS, OPT_BYTES), max_size=3).map(tuple),
                   timestamp=st.none() | st.integers(0, 2**41))  # fmt: skip


@st.composite
def batches(draw: Any) -> bytes:
    recs = draw(st.lists(RECORD, min_size=0, max_size=5))
    kind = draw(st.sampled_from(["plain", "txn", "append", "horizon", "seq"]))
    kw: dict[str, Any] = {"base_offset": draw(st.integers(0, 2**40)),
                          "partition_leader_epoch": draw(st.integers(-1, 2**31 - 1))}  # fmt: skip
    if kind == "txn":
        kw.update(is_transactional=True, producer_id=draw(st.integers(0, 2**40)), producer_epoch=draw(st.integers(0, 99)),
                  base_sequence=draw(st.integers(0, 2**31 - 1)))  # fmt: skip
    elif kind == "append":
        kw.update(timestamp_type=TimestampType.LOG_APPEND_TIME, max_timestamp=draw(st.integers(0, 2**41)))
    elif kind == "horizon":
        kw.update(delete_horizon_ms=draw(st.integers(0, 2**41)))
    elif kind == "seq":
        kw.update(producer_id=7, producer_epoch=1, base_sequence=2**31 - 2)  # the last sequence wraps
    return encode_batch(recs, **kw)


def _corrupt_record_area(batch: bytes, at: int, value: int) -> bytes:
    """A batch whose records area is changed at ``at`` and whose CRC is made good again (so only
    the record reader can find the damage)."""
    b = bytearray(batch)
    if len(b) <= 61:
        return batch
    b[61 + at % (len(b) - 61)] = value
    struct.pack_into(">I", b, 17, batch_crc(bytes(b), 0, len(b)))
    return bytes(b)


@settings(max_examples=120, suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
@given(st.lists(batches(), min_size=1, max_size=6), st.booleans(), st.none() | st.tuples(st.integers(0, 5), st.integers(0, 10**6), st.integers(0, 255)))
def test_implementations_agree(blist: list[bytes], print_data: bool, damage: tuple[int, int, int] | None) -> None:
    if damage is not None:
        k = damage[0] % len(blist)
        blist[k] = _corrupt_record_area(blist[k], damage[1], damage[2])
    buf = b"".join(blist)
    pos = np.cumsum([0, *map(len, blist[:-1])]).astype(np.int64)
    prefix = line_prefix("/data/topic-0/00000000000000000000.log")
    want, done = json_lines_py(buf, pos, prefix, print_data)
    for _, fn in kernel_impls("kafka.json_lines").items():
        got, got_done = fn(np.frombuffer(buf, np.uint8), pos, prefix, print_data, [np.empty(4, np.uint8)])
        assert (bytes(got), got_done) == (bytes(want), done)


@pytest.mark.parametrize("impl", twins("kafka.json_lines"))
def test_twins_on_a_fixed_segment(impl: Any) -> None:
    recs = [SimpleRecord(value=b"v" * i, key=None if i % 2 else b"k%d" % i, headers=(("h\n", b"x"), ("é", None)))
            for i in range(20)]  # fmt: skip
    blist = [encode_batch(recs[i : i + 5], base_offset=i) for i in range(0, 20, 5)]
    buf = b"".join(blist)
    pos = np.cumsum([0, *map(len, blist[:-1])]).astype(np.int64)
    prefix = line_prefix('odd "path"\\x.log')
    got, done = impl(np.frombuffer(buf, np.uint8), pos, prefix, True)
    assert done == 4 and bytes(got) == bytes(json_lines_py(buf, pos, prefix, True)[0])
    assert bytes(got).count(b"\n") == 24


def _segment(tmp_path: Path) -> Path:
    part = tmp_path / "t-0"
    part.mkdir()
    blist = []
    off = 0
    for i in range(40):
        recs = [SimpleRecord(value=b"%d" % j * (j % 5), key=b"k%d" % j if j % 3 else None,
                             headers=(("h", b"1"),) if j % 4 == 0 else ())
                for j in range(i % 7 + 1)]  # fmt: skip
        comp = Compression.GZIP if i % 9 == 4 else Compression.NONE
        ctrl = i % 13 == 6
        if ctrl:  # an end-transaction marker (COMMIT): key version 0 type 1, value version 0 epoch 3
            recs = [SimpleRecord(key=b"\x00\x00\x00\x01", value=b"\x00\x00\x00\x00\x00\x03")]
        b = encode_batch(recs, base_offset=off, compression=comp, is_control=ctrl, is_transactional=ctrl,
                         producer_id=5 if ctrl else -1, producer_epoch=3 if ctrl else -1)  # fmt: skip
        if i == 30:  # records the reader rejects under a good checksum: the dump stops with an error there
            b = _corrupt_record_area(b, 0, 0x7F)
        blist.append(b)
        off += len(recs)
    data = b"".join(blist) + b"\x00\x00\x00\x00\x00\x00\x00\x09\x00\x00"  # and a torn tail
    log = part / "00000000000000000000.log"
    log.write_bytes(data)
    return log


@pytest.mark.parametrize("print_data", [True, False])
def test_cli_bulk_output_is_byte_identical(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, print_data: bool) -> None:
    log = _segment(tmp_path)
    args = ["kafka", "dump", str(log), "--json", *(["--print-data"] if print_data else [])]
    fast = CliRunner().invoke(cli, args)

    def per_record(f: Path, data: bool) -> None:  # the generic path: to_json of every dict
        from mqstore.storage.kafka.tools import dump_log

        cli_kafka.echo_json_lines({"file": str(f), **o} for o in dump_log(f, print_data=data))

    monkeypatch.setattr(cli_kafka, "_write_json_lines", per_record)
    slow = CliRunner().invoke(cli, args)
    assert fast.stdout_bytes == slow.stdout_bytes
    assert fast.exit_code == slow.exit_code
    assert fast.stdout_bytes.count(b'"type":"batch"') >= 30
    if print_data:
        assert fast.exit_code != 0 and "error" in fast.output  # batch 30's records: the reader's typed error
    else:
        assert fast.exit_code == 0


def test_threaded_parts_are_byte_identical() -> None:
    """A run long enough to be cut into parts over threads gives the twin's bytes, and a batch the
    reader rejects in a later part keeps exactly the lines before it."""
    blist = [encode_batch([SimpleRecord(value=b"v%d" % i, key=b"k", headers=(("h", b"x"),))], base_offset=i)
             for i in range(2000)]  # fmt: skip
    pos = np.cumsum([0, *map(len, blist[:-1])]).astype(np.int64)
    prefix = line_prefix("p.log")
    impls = kernel_impls("kafka.json_lines")
    for damaged in (None, 1500):
        bl = list(blist)
        if damaged is not None:
            bl[damaged] = _corrupt_record_area(bl[damaged], 0, 0x7F)
        buf = np.frombuffer(b"".join(bl), np.uint8)
        want = json_lines_py(buf, pos, prefix, True)
        assert want[1] == (2000 if damaged is None else damaged)
        for _, fn in impls.items():
            for threads in (1, 2, 3):
                got, done = fn(buf, pos, prefix, True, [], threads=threads)
                assert (bytes(got), done) == (bytes(want[0]), want[1])


@pytest.mark.parametrize("impl", twins("kafka.json_lines"))
def test_json_line_chunks_pipeline(impl: Any) -> None:
    """``json_line_chunks``: the pieces joined are the twin's lines on any chunk size and thread
    count; a batch the reader rejects ends the pieces with exactly the lines before it."""
    from mqstore.kernels.kafka.json_lines import json_line_chunks

    blist = [encode_batch([SimpleRecord(value=bytes(range(i % 200)), key=b"k" * (i % 40), headers=(("h", b"x"),))
                           for _ in range(1 + i % 3)], base_offset=i * 3) for i in range(300)]  # fmt: skip
    pos = np.cumsum([0, *map(len, blist[:-1])]).astype(np.int64)
    prefix = line_prefix("p.log")
    for damaged in (None, 170):
        bl = list(blist)
        if damaged is not None:
            bl[damaged] = _corrupt_record_area(bl[damaged], 0, 0x7F)
        buf = np.frombuffer(b"".join(bl), np.uint8)
        want, want_done = json_lines_py(buf, pos, prefix, True)
        for chunk, threads in ((7, 1), (7, 2), (64, 3), (1000, 2)):
            got, done = b"", 0
            for piece, k in json_line_chunks(buf, pos, prefix, True, threads=threads, chunk=chunk, impl=impl):
                got += bytes(piece)  # (a view of a reused buffer: copied before the next piece)
                done += k
            assert (got, done) == (bytes(want), want_done)
