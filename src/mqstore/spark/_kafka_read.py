"""Reading one offset range of a Kafka partition directory into Arrow record batches shaped like
Spark's Kafka source, plus the pure-Python row reference the tests compare against.

The fast path walks batch headers with the numba scan (:func:`~mqstore.kernels.kafka.batches.scan_batches`),
decodes windows of whole batches with :func:`~mqstore.kernels.kafka.records.decode_records_columnar` and
builds every column at once (numpy arrays and Arrow buffers, never row tuples).  Files are opened
read-only (:class:`~mqstore.storage.mapped.ReadOnlyMap`); nothing is written.

Rows follow a ``read_uncommitted`` consumer: control batches (transaction markers) produce no row,
records of aborted transactions do.  With ``read_committed`` the rows of aborted transactions and
every offset at or past the last stable offset are dropped too (one vectorised mask per Arrow
batch from :class:`~mqstore.storage.kafka.txn.TxnState`).  LogAppendTime batches report the batch
max timestamp.
"""

from __future__ import annotations

from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from typing import Any

import numpy as np
import pyarrow as pa

from mqstore.errors import CorruptDataError, CrcMismatchError, DataLossError, MqStoreError, StoreNotFoundError
from mqstore.formats.kafka.batch import (
    ATTR_CONTROL,
    ATTR_TIMESTAMP_TYPE,
    decode_batch,
    decode_batch_header,
    decode_control_record,
    decode_legacy_message,
    iter_legacy_records,
    validate_batch,
)
from mqstore.kernels.kafka.batches import STOP_BAD_SIZE, check_crcs
from mqstore.kernels.kafka.records import (
    ERR_UNSUPPORTED,
    ERROR_MESSAGES,
    OK,
    batch_bodies,
    decode_records_columnar,
    gather,
    parse_bodies,
)
from mqstore.spark._kafka_plan import OffsetRange, segment_files
from mqstore.storage.fileio import LOCAL, FileIO
from mqstore.storage.kafka.ranged import SegmentRef, batch_chunks, index_position, rebase_error
from mqstore.storage.kafka.segment import LogSegment
from mqstore.storage.kafka.txn import CommittedRanges, partition_txn_state

HEADER_TYPE = pa.struct([pa.field("key", pa.string()), pa.field("value", pa.binary())])
HEADERS_TYPE = pa.list_(pa.field("element", HEADER_TYPE))
TIMESTAMP_TYPE = pa.timestamp("us", tz="UTC")

_BASE_FIELDS = [
    pa.field("key", pa.binary()),
    pa.field("value", pa.binary()),
    pa.field("topic", pa.string()),
    pa.field("partition", pa.int32()),
    pa.field("offset", pa.int64()),
    pa.field("timestamp", TIMESTAMP_TYPE),
    pa.field("timestampType", pa.int32()),
]
KAFKA_ARROW_SCHEMA = pa.schema(_BASE_FIELDS)
KAFKA_ARROW_SCHEMA_WITH_HEADERS = pa.schema([*_BASE_FIELDS, pa.field("headers", HEADERS_TYPE)])

WINDOW_BYTES = 8 << 20  # decode at most this many bytes of batches at a time
_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)


def arrow_schema(include_headers: bool) -> pa.Schema:
    return KAFKA_ARROW_SCHEMA_WITH_HEADERS if include_headers else KAFKA_ARROW_SCHEMA


# ----------------------------------------------------------------------------- segments of a range
def _segments_of(rng: OffsetRange, fail_on_data_loss: bool) -> list[tuple[int, str, int, int | None]]:
    """``(base, path, start position or -1 for "look it up", stop position or None)`` of every
    segment that may hold offsets of ``rng``."""
    segs = segment_files(rng.path, rng.io)
    if not segs:
        if fail_on_data_loss and rng.size:
            raise DataLossError(f"partition {rng.topic}-{rng.partition} has no segments any more", path=rng.path)
        return []
    if rng.start < segs[0][0] and fail_on_data_loss and rng.size:
        raise DataLossError(
            f"offsets {rng.start}..{segs[0][0] - 1} of {rng.topic}-{rng.partition} were deleted before they "
            "were read; set failOnDataLoss=false to skip them", path=rng.path)
    out = []
    for i, (base, path) in enumerate(segs):
        nxt = segs[i + 1][0] if i + 1 < len(segs) else None
        if base >= rng.end:
            break
        if nxt is not None and nxt <= rng.start:
            continue
        start = rng.position if (rng.segment == base and rng.position is not None) else -1
        stop = rng.stop_position if rng.stop_segment == base else None
        out.append((base, path, start, stop))
    return out


def _start_position(path: str, base: int, offset: int, io: FileIO = LOCAL) -> int:
    if offset <= base:
        return 0
    return index_position(io, SegmentRef(base, path, 0), offset)[1]


# ----------------------------------------------------------------------------- Arrow building
def _const_string(value: str, n: int) -> pa.Array:
    b = value.encode()
    offsets = (np.arange(n + 1, dtype=np.int64) * len(b)).astype(np.int32)
    return pa.StringArray.from_buffers(n, pa.py_buffer(offsets), pa.py_buffer(b * n))


def _headers_list(first: np.ndarray, structs: pa.Array) -> pa.Array:
    """The headers column from per-row start indexes into ``structs``: a record without headers
    gives null, as Spark's Kafka source does (not an empty list)."""
    offsets = np.ascontiguousarray(first, dtype=np.int32)
    empty = offsets[1:] == offsets[:-1]
    return pa.ListArray.from_arrays(pa.array(offsets), structs, type=HEADERS_TYPE,
                                    mask=pa.array(empty) if empty.any() else None)


def _headers_array(headers: list[list[tuple[str, bytes | None]]]) -> pa.Array:
    lengths = np.fromiter((len(h) for h in headers), dtype=np.int32, count=len(headers))
    offsets = np.zeros(len(headers) + 1, dtype=np.int32)
    np.cumsum(lengths, out=offsets[1:])
    keys = [k for h in headers for k, _ in h]
    vals = [v for h in headers for _, v in h]
    structs = pa.StructArray.from_arrays([pa.array(keys, pa.string()), pa.array(vals, pa.binary())],
                                         fields=list(HEADER_TYPE))
    return _headers_list(offsets, structs)


def columns_to_arrow(cols: dict[str, Any], topic: str, partition: int, include_headers: bool) -> pa.RecordBatch:
    """Columns of :func:`decode_records_columnar` → one record batch of the kafka-log schema."""
    n = int(cols["offset"].shape[0])
    ts_us = np.ascontiguousarray(cols["timestamp"], dtype=np.int64) * 1000
    arrays = [
        pa.array(cols["key"], pa.binary()),
        pa.array(cols["value"], pa.binary()),
        _const_string(topic, n),
        pa.array(np.full(n, partition, dtype=np.int32)),
        pa.array(np.ascontiguousarray(cols["offset"], dtype=np.int64)),
        pa.Array.from_buffers(TIMESTAMP_TYPE, n, [None, pa.py_buffer(ts_us)]),
        pa.array(np.ascontiguousarray(cols["timestamp_type"], dtype=np.int32)),
    ]
    if include_headers:
        arrays.append(_headers_array(cols["headers"]))
    return pa.RecordBatch.from_arrays(arrays, schema=arrow_schema(include_headers))


def _windows(scan: dict[str, Any], lo: int, hi: int, max_records: int) -> Iterator[np.ndarray]:
    """Indexes (into the scan) of consecutive whole batches overlapping ``[lo, hi)``, in groups of
    about ``max_records`` records or :data:`WINDOW_BYTES` bytes."""
    n = scan["count"]
    if n == 0:
        return
    last = scan["last_offset"][:n]
    first = np.where(scan["magic"][:n] >= 2, scan["base_offset"][:n], last)
    sel = np.nonzero((last >= lo) & (first < hi))[0]
    if sel.shape[0] == 0:
        return
    size = scan["size"][:n]
    counts = np.maximum(scan["record_count"][:n], 1)
    k0 = 0
    recs = 0
    nbytes = 0
    for k, i in enumerate(sel.tolist()):
        recs += int(counts[i])
        nbytes += int(size[i])
        if recs >= max_records or nbytes >= WINDOW_BYTES:
            yield sel[k0:k + 1]
            k0, recs, nbytes = k + 1, 0, 0
    if k0 < sel.shape[0]:
        yield sel[k0:]


def _binary(buf: np.ndarray, starts: np.ndarray, lens: np.ndarray, typ: pa.DataType) -> pa.Array:
    offsets, data = gather(buf, starts, lens)
    n = int(lens.shape[0])
    valid = lens >= 0
    nulls = n - int(valid.sum())
    bitmap = pa.py_buffer(np.packbits(valid, bitorder="little")) if nulls else None
    return pa.Array.from_buffers(typ, n, [bitmap, pa.py_buffer(offsets), pa.py_buffer(data)], null_count=nulls)


def _window_fast(view: memoryview, scan: dict[str, Any], idx: np.ndarray, lo: int, hi: int, path: str,
                 topic: str, partition: int, include_headers: bool) -> pa.RecordBatch | None:
    """The numba path: one window of v2 batches → one Arrow batch (``None``: use the generic decoder)."""
    if (scan["magic"][idx] != 2).any():
        return None
    sub = {k: scan[k][idx] for k in ("position", "size", "magic", "crc")}
    sub["count"] = int(idx.shape[0])
    ok = check_crcs(view, sub)
    if not ok.all():
        p = int(sub["position"][int(np.nonzero(~ok)[0][0])])
        validate_batch(view, decode_batch_header(view, p, path=path), path=path)  # raises the typed error
        raise CrcMismatchError("record batch fails its size/CRC check", path=path, offset=p)
    attrs = scan["attributes"][idx]
    kept = idx[(attrs & ATTR_CONTROL) == 0]
    buf, bstart, bend = batch_bodies(view, scan, kept, path=path)
    logappend = (scan["attributes"][kept] & ATTR_TIMESTAMP_TYPE) != 0
    res = parse_bodies(buf, bstart, bend, scan["record_count"][kept].astype(np.int64),
                       scan["base_offset"][kept], scan["base_timestamp"][kept], scan["max_timestamp"][kept],
                       logappend, lo, hi)
    if res["error"] == ERR_UNSUPPORTED:
        return None
    if res["error"] != OK:
        raise CorruptDataError(ERROR_MESSAGES[res["error"]], path=path,
                               offset=int(scan["position"][kept[res["error_batch"]]]))
    n = int(res["offset"].shape[0])
    ts_us = res["timestamp"] * 1000
    arrays = [
        _binary(buf, res["key_start"], res["key_len"], pa.binary()),
        _binary(buf, res["value_start"], res["value_len"], pa.binary()),
        _const_string(topic, n),
        pa.array(np.full(n, partition, dtype=np.int32)),
        pa.array(res["offset"]),
        pa.Array.from_buffers(TIMESTAMP_TYPE, n, [None, pa.py_buffer(ts_us)]),
        pa.array(logappend[res["batch"]].astype(np.int32)),
    ]
    if include_headers:
        hkeys = _binary(buf, res["hkey_start"], res["hkey_len"], pa.string())
        try:
            hkeys.validate(full=True)
        except pa.ArrowInvalid:
            raise CorruptDataError("header key is not UTF-8", path=path,
                                   offset=int(scan["position"][kept[0]])) from None
        structs = pa.StructArray.from_arrays(
            [hkeys, _binary(buf, res["hvalue_start"], res["hvalue_len"], pa.binary())], fields=list(HEADER_TYPE))
        arrays.append(_headers_list(res["header_first"], structs))
    return pa.RecordBatch.from_arrays(arrays, schema=arrow_schema(include_headers))


def read_arrow(rng: OffsetRange, *, include_headers: bool = False, max_records: int = 10_000,
               fail_on_data_loss: bool = True, fast: bool = True,
               read_committed: bool = False, committed: CommittedRanges | None = None) -> Iterator[pa.RecordBatch]:
    """Record batches (≤ ``max_records`` rows each) of the records ``rng.start ≤ offset < rng.end``.

    ``fast`` (default) decodes v2 batches with the numba kernels of :mod:`mqstore.kernels.kafka.records`;
    ``False`` (and legacy magic 0/1 data) uses :func:`~mqstore.kernels.kafka.records.decode_records_columnar`.
    ``read_committed`` drops the rows a read_committed consumer never gets, with the ranges of
    ``committed`` (computed once by the planner) or, without it, from a scan of the partition.
    """
    if rng.size == 0:
        return
    if read_committed or committed is not None:
        state = committed if committed is not None else partition_txn_state(rng.path).restrict(rng.start, rng.end)
        for rb in read_arrow(rng, include_headers=include_headers, max_records=max_records,
                             fail_on_data_loss=fail_on_data_loss, fast=fast):
            mask = state.committed_mask(rb.column(4).to_numpy(zero_copy_only=False))
            if mask.all():
                yield rb
            elif mask.any():
                yield rb.filter(pa.array(mask))
        return
    for base, path, start, stop in _segments_of(rng, fail_on_data_loss):
        lo = max(rng.start, base)
        try:
            f = rng.io.open(path, what="Kafka segment")
        except StoreNotFoundError:
            if fail_on_data_loss:
                raise DataLossError("segment deleted while it was being read", path=path) from None
            continue
        try:
            if f.size == 0:
                continue
            pos = start if start >= 0 else _start_position(path, base, lo, rng.io)
            limit = f.size if stop is None else min(stop, f.size)
            for buf, buf_pos, scan in batch_chunks(f, pos, limit):
                try:
                    yield from _chunk_batches(memoryview(buf), scan, lo, rng, path, include_headers, max_records,
                                              fast)
                except MqStoreError as exc:
                    if not buf_pos:
                        raise
                    raise rebase_error(exc, buf_pos, path) from None
                del buf, scan
        finally:
            f.close()


def _chunk_batches(view: memoryview, scan: dict[str, Any], lo: int, rng: OffsetRange, path: str,
                   include_headers: bool, max_records: int, fast: bool) -> Iterator[pa.RecordBatch]:
    """The record batches of one chunk of a segment (``scan``: its batch headers)."""
    for idx in _windows(scan, lo, rng.end, max_records):
        rb = _window_fast(view, scan, idx, lo, rng.end, path, rng.topic, rng.partition,
                          include_headers) if fast else None
        if rb is None:
            w0 = int(scan["position"][idx[0]])
            w1 = int(scan["position"][idx[-1]] + scan["size"][idx[-1]])
            cols = decode_records_columnar(view, w0, w1, start_offset=lo, end_offset=rng.end,
                                           validate=True, path=path)
            rb = columns_to_arrow(cols, rng.topic, rng.partition, include_headers)
            del cols
        for k in range(0, rb.num_rows, max_records):
            yield rb.slice(k, max_records)
        del rb
    if scan["stop_reason"] == STOP_BAD_SIZE and scan["valid_end"] < len(view):
        # a corrupt size field inside the range: the kernel names the file and position
        decode_records_columnar(view, int(scan["valid_end"]), len(view), path=path)


# ----------------------------------------------------------------------------- pure-Python reference
def _ts(ms: int) -> datetime:
    return _EPOCH + timedelta(milliseconds=ms)


def read_rows(rng: OffsetRange, *, include_headers: bool = False,
              read_committed: bool = False) -> Iterator[tuple[Any, ...]]:
    """The same rows as :func:`read_arrow`, as tuples, by a plain walk over the segment's batches
    (``LogSegment.batches`` + ``decode_batch``): the reference of the Arrow path.  With
    ``read_committed`` a batch is dropped when a brute-force scan finds that the next end marker
    of its producer is an ABORT, when no marker follows it (open), or when it follows an open one."""
    skip = _committed_reference(rng.path) if read_committed else None
    for _base, path, _, _ in _segments_of(rng, True):
        with LogSegment.open(path) as seg:
            for ref in seg.batches(0):
                if ref.last_offset < rng.start:
                    continue
                data = seg.read_bytes(ref.position, ref.size)
                if ref.magic >= 2:
                    b = decode_batch(data, 0, path=path)
                    if b.header.base_offset >= rng.end:
                        return
                    if b.header.is_control:
                        continue
                    if skip is not None and skip(b.header.base_offset):
                        continue
                    tt = int(b.header.timestamp_type)
                    records = list(b.records)
                else:
                    msg = decode_legacy_message(data, 0, path=path)
                    tt = int(msg.timestamp_type)
                    records = list(iter_legacy_records(msg, path=path))
                for r in records:
                    if not rng.start <= r.offset < rng.end:
                        continue
                    row: tuple[Any, ...] = (r.key, r.value, rng.topic, rng.partition, r.offset, _ts(r.timestamp), tt)
                    if include_headers:
                        row += ([{"key": h.key, "value": h.value} for h in r.headers] or None,)
                    yield row


def _committed_reference(path: str) -> Any:
    """Brute force over decoded batches: (pid, base offset) of each transactional data batch is
    decided by the first end marker of the same producer after it; the LSO is the first offset of
    the earliest undecided one.  Returns ``skip(base_offset) -> bool``."""
    batches = []
    for _base, seg_path in segment_files(path):
        with LogSegment.open(seg_path) as seg:
            for ref in seg.batches(0):
                if ref.magic < 2:
                    continue
                b = decode_batch(seg.read_bytes(ref.position, ref.size), 0, path=seg_path)
                kind = None
                if b.header.is_control and b.records:
                    kind = decode_control_record(b.records[0], path=seg_path).type
                batches.append((b.header, kind))
    aborted: set[int] = set()
    undecided: list[int] = []
    for i, (h, _kind) in enumerate(batches):
        if h.is_control or not h.is_transactional or h.producer_id < 0:
            continue
        verdict = next((k for h2, k in batches[i + 1:] if h2.is_control and k in (0, 1)
                        and h2.producer_id == h.producer_id), None)
        if verdict is None:
            undecided.append(h.base_offset)
        elif verdict == 0:
            aborted.add(h.base_offset)
    lso = min(undecided) if undecided else None
    return lambda base: base in aborted or (lso is not None and base >= lso)
