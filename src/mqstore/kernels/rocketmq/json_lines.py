"""The JSON lines of ``mqstore rocketmq dump --json`` for many records in compiled passes.

One line per record, byte for byte what ``json.dumps(message.to_json_dict(), ensure_ascii=False,
separators=(",", ":"))`` followed by a newline gives (the CLI's ``to_json``): the keys in the
order of ``Message.to_json_dict`` (Spark column names), the body as base64, the properties as an
object in ``parse_properties`` order (first position, last value), ``keys`` as the list of
non-empty ``KEYS`` pieces, ``tags``/``uniqKey`` as a string or ``null``.

:func:`json_lines` locates the fields (:func:`~mqstore.kernels.rocketmq.columns.decode_fields`),
the kept property pairs and ``KEYS`` pieces (``_props_kernel``) and formats the hosts
(``_hosts_kernel``) as the Arrow reader does, then one pass writes the lines: integers in decimal,
strings with JSON's escapes (``\\"``, ``\\\\``, ``\\b\\t\\n\\f\\r``, ``\\u00xx`` for the other control
characters, everything else as is — ``ensure_ascii=False``), the body in base64.  Text is copied
as UTF-8 bytes, which equals Python's output when it is valid UTF-8; when a record's topic or
properties span is not (Python would show U+FFFD), a position is not a valid record or a record's
stored physical offset is not its position (the reader raises), it returns ``None`` and the caller
takes the per-record path.  Twin: :func:`json_lines_py` (``check_record`` and ``json.dumps`` per
record).
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import numpy as np

from mqstore.formats.rocketmq.record import check_record
from mqstore.kernels.backend import native, numba_module
from mqstore.kernels.buffers import as_u8
from mqstore.kernels.registry import register
from mqstore.kernels.threads import fill_in_parts, ordered_map, resolve_threads, split_even

_NAT: Any = native("_nat_rmq_json")


def json_lines_numba(buf: object, file_from_offset: int, positions: np.ndarray,
                     scratch: list[np.ndarray] | None = None, *, threads: int | None = None) -> memoryview | None:
    """The dump's JSON lines (each ending in a newline, UTF-8) of the records at the in-buffer
    ``positions``; ``None`` when one of them needs the per-record path (see the module).  The
    result is a view of an output buffer kept in ``scratch`` (a list the caller passes to every
    call, so that the buffer is reused; valid until the next call with it).  ``threads`` only
    tunes the native implementation (several threads on a large batch)."""
    from mqstore.kernels.rocketmq.columns import _HEX, SPECIAL_DTYPE, KeyPieces, PairSpans, decode_fields
    from mqstore.kernels.rocketmq.columns_nb import _hosts_kernel, _props_kernel

    nb = numba_module("mqstore.kernels.rocketmq.json_lines_nb")
    u8 = as_u8(buf)
    pos = np.ascontiguousarray(positions, np.int64)
    n = len(pos)
    if n == 0:
        return b""
    rows = decode_fields(u8, pos)
    if isinstance(rows, int):
        return None
    ps = np.ascontiguousarray(rows[:, 20])
    pl = np.ascontiguousarray(rows[:, 21])
    total_props = int(pl.sum())
    cap_pairs = total_props // 3 + n + 1
    cap_keys = total_props // 2 + n + 1
    pairs = PairSpans(np.empty(n + 1, np.int64), np.empty(cap_pairs, np.int64), np.empty(cap_pairs, np.int64),
                      np.empty(cap_pairs, np.int64), np.empty(cap_pairs, np.int64))  # fmt: skip
    special = np.zeros(n, SPECIAL_DTYPE)
    keys = KeyPieces(np.empty(n + 1, np.int64), np.empty(cap_keys, np.int64), np.empty(cap_keys, np.int64))
    _props_kernel(u8, ps, pl, pairs, special, keys)
    hosts = []
    for p_col, w_col in ((9, 10), (12, 13)):
        h_off = np.empty(n + 1, np.int64)
        h_buf = np.empty(n * 56, np.uint8)
        _hosts_kernel(u8, np.ascontiguousarray(rows[:, p_col]), np.ascontiguousarray(rows[:, w_col]), _HEX, h_off,
                      h_buf)  # fmt: skip
        hosts += [h_buf, h_off]
    # every escaped byte takes at most 6; keys and values appear twice at most (pairs + keys/tags/uniq)
    cap = 12 * (int(rows[:, 19].sum()) + 2 * total_props) + 2 * int(rows[:, 17].sum()) + n * 512 + 64
    if scratch is None:
        scratch = []
    if not scratch or len(scratch[0]) < cap:
        scratch[:] = [np.empty(cap, np.uint8)]
    out = scratch[0]
    used = int(nb._json_kernel(u8, rows, pos + np.int64(file_from_offset), pairs, special, keys, *hosts, out))
    if used < 0:
        return None
    return memoryview(out)[:used]


PARALLEL_MIN_RECORDS = 4096  # batches this large per thread are written by several threads


def json_lines_native(buf: object, file_from_offset: int, positions: np.ndarray,
                      scratch: list[np.ndarray] | None = None, *, threads: int | None = None) -> memoryview | None:
    """:func:`json_lines_numba` in C (``_nat_rmq_json``: one pass per record, the same bytes).

    A large batch is cut into one part per thread (the C pass runs without the GIL): each part is
    written into its own region of the output buffer (sized by a first call that only measures),
    then the regions are moved together (:func:`~mqstore.kernels.threads.fill_in_parts`)."""
    u8 = as_u8(buf)
    pos = np.ascontiguousarray(positions, np.int64)
    n = len(pos)
    if n == 0:
        return b""
    if scratch is None:
        scratch = []
    nt = min(resolve_threads(threads), n // PARALLEL_MIN_RECORDS)
    if nt <= 1:
        if not scratch:
            scratch[:] = [np.empty(max(1 << 20, n * 2048), np.uint8)]
        while True:
            status, value = _NAT.lines(u8, pos, file_from_offset, scratch[0])
            if status == 0:
                return memoryview(scratch[0])[:value]
            if status == 1:  # a record that needs the per-record path
                return None
            scratch[:] = [np.empty(value, np.uint8)]  # the capacity the call asked for

    def measure(part: np.ndarray) -> int | None:  # (status 2, bytes needed) from an empty output
        status, value = _NAT.lines(u8, part, file_from_offset, _EMPTY)
        return value if status == 2 else None

    def fill(part: np.ndarray, region: np.ndarray) -> tuple[int, bool]:
        status, value = _NAT.lines(u8, part, file_from_offset, region)
        return (value, True) if status == 0 else (0, False)

    parts = [pos[a:b] for a, b in split_even(n, nt)]
    view, kept, done = fill_in_parts(scratch, parts, measure, fill)
    return view if kept == len(parts) and all(ok for _, ok in done) else None


_EMPTY = np.empty(0, np.uint8)


def json_lines_py(buf: object, file_from_offset: int, positions: np.ndarray,
                  scratch: list[np.ndarray] | None = None, *, threads: int | None = None) -> memoryview | None:
    """Twin of :func:`json_lines`: ``check_record`` and ``json.dumps`` of the message's JSON
    object per record (``None`` on the same conditions)."""
    from mqstore.kernels.rocketmq.columns import decode_fields

    raw = as_u8(buf).tobytes()
    lines = []
    for p in np.asarray(positions, np.int64).tolist():
        res = check_record(raw, p, check_crc=False) if 0 <= p < len(raw) else None
        if res is None or not res.success or res.record is None or res.size <= 0:
            return None
        rec = res.record
        r = decode_fields(np.frombuffer(raw, np.uint8), np.array([p], np.int64))
        assert not isinstance(r, int)
        topic_raw = raw[int(r[0, 18]) : int(r[0, 18] + r[0, 19])]
        props_raw = raw[int(r[0, 20]) : int(r[0, 20] + r[0, 21])]
        try:  # text that is not valid UTF-8 is shown replaced by Python: the per-record path
            topic_raw.decode("utf-8")
            props_raw.decode("utf-8")
        except UnicodeDecodeError:
            return None
        if rec.commit_log_offset != file_from_offset + p:  # the reader raises on this: the per-record path
            return None
        obj = rec.to_json_dict()
        lines.append(json.dumps(obj, ensure_ascii=False, separators=(",", ":")) + "\n")
    return memoryview("".join(lines).encode("utf-8"))


json_lines = json_lines_native if _NAT is not None else json_lines_numba

CHUNK_RECORDS = 2048  # records per call of json_line_chunks: ~2.6 MB of lines of 1 KiB messages, in cache


def json_line_chunks(buf: object, file_from_offset: int, positions: np.ndarray, *, threads: int | None = None,
                     chunk: int = CHUNK_RECORDS, impl: Any = None,
                     scratch: list[list[np.ndarray]] | None = None) -> Iterator[tuple[memoryview | bytes, int]]:
    """The lines of :func:`json_lines` in pieces, in order: ``(lines, records)`` for consecutive
    runs of ``chunk`` records, each written by one call of ``impl`` (default :func:`json_lines`),
    ``threads`` calls at a time on the thread pool while the caller consumes the previous piece
    (a pipeline: each output stays small enough for the CPU caches, and no pass over the records
    measures or moves the lines).  It stops before the first run with a record that needs the
    per-record path, so the records covered may be fewer than ``positions``.  A piece is valid
    until the next one is asked for.

    ``scratch``: a list the caller passes to every call (of one thread count) to keep the output
    buffers from one call to the next: a dump of many batches then writes into the same warm
    memory instead of fresh pages each batch (their faults and zeroing were ~4 % of its CPU)."""
    impl = json_lines if impl is None else impl
    pos = np.ascontiguousarray(positions, np.int64)
    nt = resolve_threads(threads)
    runs = [pos[a : a + chunk] for a in range(0, len(pos), max(1, chunk))]
    if scratch is None:
        scratch = []
    while len(scratch) < nt + 1:
        scratch.append([])
    pieces = ordered_map(lambda run, slot: impl(buf, file_from_offset, run, scratch[slot], threads=1), runs, nt)
    try:
        for run, lines in zip(runs, pieces, strict=False):
            if lines is None:
                return
            yield lines, len(run)
    finally:
        pieces.close()  # waits for the calls still running
register("rocketmq.json_lines", json_lines_numba, json_lines_py, native=json_lines_native if _NAT is not None else None)
