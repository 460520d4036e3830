"""The JSON lines of ``mqstore kafka dump --json [--print-data]`` for many batches in compiled passes.

For runs of v2 batches that are uncompressed, not control batches and whose checksum verified (what
a dump of a real partition mostly holds), one pass writes each batch line and, with
``print_data``, one line per record: byte for byte ``json.dumps(obj, ensure_ascii=False,
separators=(",", ":"))`` of ``{"file": ..., **fields}`` with the fields of
:mod:`mqstore.formats.kafka.dump_fields` and bytes as base64 (the CLI's ``to_json``).  Records
are decoded with the reader's checks (:func:`~mqstore.formats.kafka.batch.iter_records`); a batch
they reject ends the pass there: the lines of the batches before it are returned with its index,
and the caller takes the per-record path for it (which raises the reader's typed error).

Three implementations: :func:`json_lines_native` (C, ``_nat_kafka_json``), :func:`json_lines_numba`
(``json_lines_nb``) and the twin :func:`json_lines_py` (the formats' decoder and ``json.dumps``).
"""

from __future__ import annotations

import base64
import json
from collections.abc import Iterator
from typing import Any

import numpy as np

from mqstore.errors import CorruptDataError
from mqstore.formats.kafka.batch import decode_batch_header, iter_records
from mqstore.formats.kafka.dump_fields import batch_fields, record_fields
from mqstore.kernels.backend import native, numba_module
from mqstore.kernels.buffers import as_u8
from mqstore.kernels.registry import register
from mqstore.kernels.threads import fill_in_parts, ordered_map, resolve_threads, split_even

_NAT: Any = native("_nat_kafka_json")
_EMPTY = np.empty(0, np.uint8)


def line_prefix(file: str) -> bytes:
    """The start every line of a file's dump shares: ``{"file":"<path>",``."""
    return b'{"file":' + json.dumps(file, ensure_ascii=False).encode("utf-8") + b","


def _grow(scratch: list[np.ndarray], size: int) -> np.ndarray:
    if not scratch or len(scratch[0]) < size:
        scratch[:] = [np.empty(size, np.uint8)]
    return scratch[0]


PARALLEL_MIN_BATCHES = 512  # runs this long per thread are written by several threads


def json_lines_native(buf: object, positions: np.ndarray, prefix: bytes, print_data: bool,
                      scratch: list[np.ndarray] | None = None, *, threads: int | None = None
                      ) -> tuple[memoryview | bytes, int]:
    """``(lines, done)``: the JSON lines of the first ``done`` batches at ``positions`` (all of them
    unless the reader rejects the records of batch ``done``).  The lines are a view of a buffer
    kept in ``scratch`` (reused by the next call with it).  A long run is cut into one part per
    thread (the C pass releases the GIL; :func:`~mqstore.kernels.threads.fill_in_parts`)."""
    u8 = as_u8(buf)
    pos = np.ascontiguousarray(positions, np.int64)
    n = len(pos)
    if n == 0:
        return b"", 0
    scratch = [] if scratch is None else scratch
    nt = min(resolve_threads(threads), n // PARALLEL_MIN_BATCHES)
    if nt <= 1:
        out = _grow(scratch, 1 << 20)
        while True:
            status, value, used = _NAT.lines(u8, pos, prefix, print_data, out)
            if status == 2:  # the capacity the call asked for
                out = _grow(scratch, value)
                continue
            return memoryview(out)[:used], (n if status == 0 else value)

    def measure(part: np.ndarray) -> int:
        status, value, _ = _NAT.lines(u8, part, prefix, print_data, _EMPTY)
        return value if status == 2 else 0  # (status 1: a batch the reader rejects at once)

    results: dict[int, int] = {}

    def fill(part: np.ndarray, region: np.ndarray) -> tuple[int, bool]:
        status, value, used = _NAT.lines(u8, part, prefix, print_data, region)
        results[id(part)] = len(part) if status == 0 else value
        return used, status == 0

    parts = [pos[a:b] for a, b in split_even(n, nt)]
    view, kept, _ = fill_in_parts(scratch, parts, measure, fill)
    return view, sum(results[id(p)] for p in parts[:kept])


def json_lines_numba(buf: object, positions: np.ndarray, prefix: bytes, print_data: bool,
                     scratch: list[np.ndarray] | None = None, *, threads: int | None = None
                     ) -> tuple[memoryview | bytes, int]:
    """:func:`json_lines_native` on the numba kernel (``json_lines_nb``)."""
    nb = numba_module("mqstore.kernels.kafka.json_lines_nb")
    u8 = as_u8(buf)
    pos = np.ascontiguousarray(positions, np.int64)
    if len(pos) == 0:
        return b"", 0
    scratch = [] if scratch is None else scratch
    pre = np.frombuffer(prefix, np.uint8)
    out = _grow(scratch, 1 << 20)
    while True:
        status, value, used = nb.batch_lines(u8, pos, pre, print_data, out)
        if status == 2:
            out = _grow(scratch, value)
            continue
        return memoryview(out)[:used], (len(pos) if status == 0 else value)


def _b64(obj: Any) -> Any:
    if isinstance(obj, bytes | bytearray | memoryview):
        return base64.b64encode(bytes(obj)).decode("ascii")
    raise TypeError(f"not JSON: {type(obj).__name__}")


def json_lines_py(buf: object, positions: np.ndarray, prefix: bytes, print_data: bool,
                  scratch: list[np.ndarray] | None = None, *, threads: int | None = None
                  ) -> tuple[memoryview | bytes, int]:
    """Twin: the formats' header decoder and record reader, ``json.dumps`` per line (``threads``
    only tunes the native implementation)."""
    raw = as_u8(buf).tobytes()
    file = json.loads(prefix[:-1] + b"}")["file"]
    lines: list[str] = []
    done = 0
    for p in np.asarray(positions, np.int64).tolist():
        h = decode_batch_header(raw, p)
        objs = [batch_fields(h, True)]
        if print_data:
            try:
                objs += [record_fields(h, r) for r in iter_records(raw, h)]
            except CorruptDataError:
                break
        lines += [json.dumps({"file": file, **o}, default=_b64, ensure_ascii=False, separators=(",", ":")) + "\n"
                  for o in objs]  # fmt: skip
        done += 1
    return "".join(lines).encode("utf-8"), done


json_lines = json_lines_native if _NAT is not None else json_lines_numba

CHUNK_BATCHES = 128  # batches per call of json_line_chunks with print_data (~2.8 MB of lines of 1 KiB records)


def json_line_chunks(buf: object, positions: np.ndarray, prefix: bytes, print_data: bool, *,
                     threads: int | None = None, chunk: int | None = None,
                     impl: Any = None) -> Iterator[tuple[memoryview | bytes, int]]:
    """The lines of :func:`json_lines` in pieces, in order: ``(lines, done)`` for consecutive runs
    of ``chunk`` batches, each written by one call of ``impl`` (default :func:`json_lines`),
    ``threads`` calls at a time on the thread pool while the caller consumes the previous piece
    (a pipeline: each output stays small enough for the CPU caches, and no pass measures or
    moves the lines).  ``done`` is the batches of the run the lines cover; a run with a batch
    the reader rejects (``done`` short of the run) is the last piece.  A piece is valid until the
    next one is asked for."""
    impl = json_lines if impl is None else impl
    pos = np.ascontiguousarray(positions, np.int64)
    nt = resolve_threads(threads)
    step = max(1, chunk if chunk is not None else CHUNK_BATCHES if print_data else 32 * CHUNK_BATCHES)
    runs = [pos[a : a + step] for a in range(0, len(pos), step)]
    scratch: list[list[np.ndarray]] = [[] for _ in range(nt + 1)]
    pieces = ordered_map(lambda run, slot: impl(buf, run, prefix, print_data, scratch[slot], threads=1), runs, nt)
    try:
        for run, (lines, done) in zip(runs, pieces, strict=False):
            yield lines, done
            if done < len(run):
                return
    finally:
        pieces.close()  # waits for the calls still running
register("kafka.json_lines", json_lines_numba, json_lines_py, native=json_lines_native if _NAT is not None else None)
