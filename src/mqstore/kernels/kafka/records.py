"""Kafka records as columns: the generic decoder and the compiled body parser of the Spark source.

* :func:`decode_records_columnar` – every record of the batches of a buffer (all magics, any
  compression) through the record codec of :mod:`mqstore.formats.kafka.batch`, as columns;
* :func:`parse_bodies` (numba) / :func:`parse_bodies_py` – the records of many decompressed v2
  batch bodies as positions into the buffer; :func:`gather` / :func:`gather_py` – those slices
  copied into Arrow binary layouts.

:func:`parse_bodies` walks the records of many (decompressed) batch bodies laid end to end in
one ``uint8`` buffer and writes, per record kept (offset in ``[lo, hi)``), its offset, timestamp,
batch index and the positions/lengths of key, value and header keys/values **in the buffer**:
no Python object per record.  :func:`gather` then copies those slices into Arrow binary layouts.

The compiled kernels are the very same Python functions compiled with ``numba.njit``; the
``*_py`` twins run them in the interpreter (the tests run their behaviour tests over both).  Both follow
the record checks of :func:`mqstore.formats.kafka.batch.iter_records` (spec §2.3).  A varlong
longer than 9 bytes (a delta ≥ 2^62) is reported as ``ERR_UNSUPPORTED`` so the caller falls back
to the generic decoder.
"""

from __future__ import annotations

import types
from typing import Any

import numpy as np

from mqstore.errors import CorruptDataError
from mqstore.kernels.backend import native, numba_module
from mqstore.kernels.buffers import as_u8
from mqstore.kernels.kafka.batches import STOP_BAD_SIZE, scan_batches
from mqstore.kernels.registry import register

OK = 0
ERR_TRUNCATED = 1  # a record, key, value or header runs past its record/batch
ERR_CORRUPT = 2  # negative counts, null header key, record size mismatch, bytes left in a batch
ERR_UNSUPPORTED = 3  # a varlong of 10 bytes: decode this window with the generic decoder

ERROR_MESSAGES = {
    ERR_TRUNCATED: "record data runs past the end of its record or batch",
    ERR_CORRUPT: "malformed record (bad count, null header key, or size mismatch)",
}


def _varint_py(a: Any, p: int, end: int, max_bytes: int) -> tuple[int, int]:
    """Zig-zag varint at ``p``: ``(value, next)``; next −1 truncated, −2 too long, −3 unsupported."""
    u = 0
    shift = 0
    for i in range(max_bytes):
        if p + i >= end:
            return 0, -1
        b = int(a[p + i])
        if shift == 63:
            return 0, -3
        u |= (b & 0x7F) << shift
        if b < 128:
            if max_bytes == 5:
                u &= 0xFFFFFFFF
            return (u >> 1) ^ -(u & 1), p + i + 1
        shift += 7
    return 0, -2


def _parse_bodies(a: Any, bstart: Any, bend: Any, bcount: Any, bbase: Any, bts: Any, bmax: Any,
                     blogappend: Any, lo: int, hi: int, fill: bool,
                     r_off: Any, r_ts: Any, r_batch: Any, r_ks: Any, r_kl: Any, r_vs: Any, r_vl: Any,
                     r_hf: Any, h_ks: Any, h_kl: Any, h_vs: Any, h_vl: Any) -> tuple[int, int, int, int]:
    n = 0
    nh = 0
    for b in range(bstart.shape[0]):
        p = int(bstart[b])
        end = int(bend[b])
        if bcount[b] < 0:
            return n, nh, ERR_CORRUPT, b
        for _ in range(bcount[b]):
            length, p = varint(a, p, end, 5)
            if p < 0:
                return n, nh, (ERR_UNSUPPORTED if p == -3 else ERR_TRUNCATED if p == -1 else ERR_CORRUPT), b
            if length < 0 or p + length > end:
                return n, nh, ERR_TRUNCATED, b
            rec_end = p + length
            if p >= rec_end:
                return n, nh, ERR_TRUNCATED, b
            p += 1  # attributes
            tsd, p = varint(a, p, rec_end, 10)
            if p < 0:
                return n, nh, (ERR_UNSUPPORTED if p == -3 else ERR_TRUNCATED if p == -1 else ERR_CORRUPT), b
            od, p = varint(a, p, rec_end, 5)
            if p < 0:
                return n, nh, (ERR_TRUNCATED if p == -1 else ERR_CORRUPT), b
            kl, p = varint(a, p, rec_end, 5)
            if p < 0:
                return n, nh, (ERR_TRUNCATED if p == -1 else ERR_CORRUPT), b
            ks = p
            if kl >= 0:
                if p + kl > rec_end:
                    return n, nh, ERR_TRUNCATED, b
                p += kl
            vl, p = varint(a, p, rec_end, 5)
            if p < 0:
                return n, nh, (ERR_TRUNCATED if p == -1 else ERR_CORRUPT), b
            vs = p
            if vl >= 0:
                if p + vl > rec_end:
                    return n, nh, ERR_TRUNCATED, b
                p += vl
            hn, p = varint(a, p, rec_end, 5)
            if p < 0:
                return n, nh, (ERR_TRUNCATED if p == -1 else ERR_CORRUPT), b
            if hn < 0:
                return n, nh, ERR_CORRUPT, b
            off = bbase[b] + od
            keep = lo <= off < hi
            if keep and fill:
                r_off[n] = off
                r_ts[n] = bmax[b] if blogappend[b] else bts[b] + tsd
                r_batch[n] = b
                r_ks[n] = ks
                r_kl[n] = kl
                r_vs[n] = vs
                r_vl[n] = vl
                r_hf[n] = nh
            for _h in range(hn):
                hkl, p = varint(a, p, rec_end, 5)
                if p < 0:
                    return n, nh, (ERR_TRUNCATED if p == -1 else ERR_CORRUPT), b
                if hkl < 0:
                    return n, nh, ERR_CORRUPT, b
                if p + hkl > rec_end:
                    return n, nh, ERR_TRUNCATED, b
                hks = p
                p += hkl
                hvl, p = varint(a, p, rec_end, 5)
                if p < 0:
                    return n, nh, (ERR_TRUNCATED if p == -1 else ERR_CORRUPT), b
                hvs = p
                if hvl >= 0:
                    if p + hvl > rec_end:
                        return n, nh, ERR_TRUNCATED, b
                    p += hvl
                if keep:
                    if fill:
                        h_ks[nh] = hks
                        h_kl[nh] = hkl
                        h_vs[nh] = hvs
                        h_vl[nh] = hvl
                    nh += 1
            if p != rec_end:
                return n, nh, ERR_CORRUPT, b
            if keep:
                n += 1
        if p != end:
            return n, nh, ERR_CORRUPT, b
    return n, nh, OK, -1


def _gather(a: Any, starts: Any, lens: Any, out_offsets: Any, out_data: Any) -> int:
    total = 0
    for i in range(starts.shape[0]):
        out_offsets[i] = total
        ln = lens[i]
        if ln > 0:
            s = starts[i]
            out_data[total:total + ln] = a[s:s + ln]
            total += ln
    out_offsets[starts.shape[0]] = total
    return total


# ``_parse_bodies`` calls the module global ``varint``: the interpreted one here (the twin), the
# compiled one in :mod:`.records_nb` (a copy of the function whose globals say so).
varint = _varint_py
_parse_twin = types.FunctionType(_parse_bodies.__code__, {**globals(), "varint": _varint_py}, "parse_bodies_twin")


def _nb() -> Any:
    return numba_module("mqstore.kernels.kafka.records_nb")


def _parse_numba(*args: Any) -> tuple[int, int, int, int]:
    return _nb()._parse_nb(*args)


def _parse_native(a: np.ndarray, bstart: np.ndarray, bend: np.ndarray, *rest: Any) -> tuple[int, int, int, int]:
    return _NAT.parse_bodies(a, bstart, bend, *rest)


def _parse_with(fn: Any, a: np.ndarray, bstart: np.ndarray, bend: np.ndarray, bcount: np.ndarray, bbase: np.ndarray,
                bts: np.ndarray, bmax: np.ndarray, blogappend: np.ndarray, lo: int, hi: int) -> dict[str, Any]:  # fmt: skip
    a = as_u8(a)
    bstart, bend, bcount, bbase, bts, bmax = (np.ascontiguousarray(x, np.int64)
                                              for x in (bstart, bend, bcount, bbase, bts, bmax))
    blogappend = np.ascontiguousarray(blogappend, np.bool_)
    if bstart.shape[0] and (int(bstart.min()) < 0 or int(bend.max()) > a.shape[0]):
        raise CorruptDataError("record bodies lie outside the buffer")
    args = (a, bstart, bend, bcount, bbase, bts, bmax, blogappend, np.int64(lo), np.int64(hi))
    z = np.zeros(0, np.int64)
    n, nh, err, eb = fn(*args, False, z, z, z, z, z, z, z, z, z, z, z, z)
    if err != OK:
        return {"error": int(err), "error_batch": int(eb)}
    cols = {k: np.empty(n, np.int64) for k in ("offset", "timestamp", "batch", "key_start", "key_len",
                                                 "value_start", "value_len")}
    hf = np.empty(n + 1, np.int64)
    h = {k: np.empty(nh, np.int64) for k in ("hkey_start", "hkey_len", "hvalue_start", "hvalue_len")}
    n2, nh2, err, eb = fn(*args, True, cols["offset"], cols["timestamp"], cols["batch"], cols["key_start"],
                          cols["key_len"], cols["value_start"], cols["value_len"], hf, h["hkey_start"],
                          h["hkey_len"], h["hvalue_start"], h["hvalue_len"])
    assert (n2, nh2, err) == (n, nh, OK)
    hf[n] = nh
    return {**cols, **h, "header_first": hf, "error": OK, "error_batch": -1}


def parse_bodies_numba(a: np.ndarray, bstart: np.ndarray, bend: np.ndarray, bcount: np.ndarray, bbase: np.ndarray,
                       bts: np.ndarray, bmax: np.ndarray, blogappend: np.ndarray, lo: int, hi: int) -> dict[str, Any]:
    """Record columns (positions into ``a``) of the batch bodies ``a[bstart[i]:bend[i]]``.

    Returns ``offset``, ``timestamp`` (ms), ``batch`` (index of the body), ``key_start``/``key_len``,
    ``value_start``/``value_len`` (length −1 = null), ``header_first`` (n + 1 entries) and
    ``hkey_start``/``hkey_len``/``hvalue_start``/``hvalue_len``, plus ``error`` (``OK`` or an
    ``ERR_*`` code) and ``error_batch``.
    """
    return _parse_with(_parse_numba, a, bstart, bend, bcount, bbase, bts, bmax, blogappend, lo, hi)


def parse_bodies_native(a: np.ndarray, bstart: np.ndarray, bend: np.ndarray, bcount: np.ndarray, bbase: np.ndarray,
                        bts: np.ndarray, bmax: np.ndarray, blogappend: np.ndarray, lo: int, hi: int) -> dict[str, Any]:
    """:func:`parse_bodies_numba` in C (``_nat_kafka``)."""
    return _parse_with(_parse_native, a, bstart, bend, bcount, bbase, bts, bmax, blogappend, lo, hi)


def parse_bodies_py(a: np.ndarray, bstart: np.ndarray, bend: np.ndarray, bcount: np.ndarray, bbase: np.ndarray,
                    bts: np.ndarray, bmax: np.ndarray, blogappend: np.ndarray, lo: int, hi: int) -> dict[str, Any]:
    """Twin of :func:`parse_bodies`: the same walk interpreted."""
    return _parse_with(_parse_twin, a, bstart, bend, bcount, bbase, bts, bmax, blogappend, lo, hi)


def _gather_with(fn: Any, a: np.ndarray, starts: np.ndarray, lens: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    total = int(lens[lens > 0].sum()) if lens.shape[0] else 0
    if total > 0x7FFFFFFF:
        raise OverflowError("more than 2 GiB of binary data in one Arrow batch")
    offsets = np.empty(starts.shape[0] + 1, np.int64)
    data = np.empty(total, np.uint8)
    fn(a, starts, lens, offsets, data)
    return offsets.astype(np.int32), data


def gather(a: np.ndarray, starts: np.ndarray, lens: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Copy the slices ``a[starts[i]:starts[i]+lens[i]]`` (``lens < 0`` = null, nothing copied)
    end to end: ``(offsets int32 of n + 1 entries, data uint8)`` — an Arrow binary layout."""
    return _gather_with(_nb()._gather_nb, a, starts, lens)


def gather_py(a: np.ndarray, starts: np.ndarray, lens: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Twin of :func:`gather`: the same copy loop interpreted."""
    return _gather_with(_gather, a, starts, lens)


def batch_bodies(view: Any, scan: dict[str, Any], kept: np.ndarray, *, path: str | None = None, shift: int = 0,
                 tail: bytes = b"") -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The (decompressed) record bodies of the v2 batches ``kept`` (indexes into ``scan``, batch
    positions relative to ``view``) laid end to end: ``(buffer, starts, ends)``, the input of
    :func:`parse_bodies`.  ``tail`` is appended after the last body (extra bytes a caller wants
    in the same buffer); ``shift`` is added to positions named in errors."""
    from mqstore.formats.kafka.batch import RECORD_BATCH_OVERHEAD
    from mqstore.formats.kafka.compression import decompress

    parts: list[Any] = []
    bstart = np.empty(kept.shape[0], np.int64)
    bend = np.empty(kept.shape[0], np.int64)
    at = 0
    for j, i in enumerate(kept.tolist()):
        p, sz, codec = int(scan["position"][i]), int(scan["size"][i]), int(scan["attributes"][i]) & 0x07
        body: Any = view[p + RECORD_BATCH_OVERHEAD : p + sz]
        if codec:
            body = decompress(codec, body, path=path, offset=p + shift)
        parts.append(body)
        bstart[j] = at
        at += len(body)
        bend[j] = at
    parts.append(tail)
    return np.frombuffer(b"".join(parts), np.uint8), bstart, bend


def decode_records_columnar(
    buf: Any,
    start: int = 0,
    end: int | None = None,
    *,
    start_offset: int | None = None,
    end_offset: int | None = None,
    include_control: bool = False,
    validate: bool = True,
    path: str | None = None,
) -> dict[str, Any]:
    """Decode every record of the batches in ``buf[start:end]`` into columns.

    Intended for building a ``pyarrow.RecordBatch`` shaped like Spark's Kafka source (the caller
    adds the constant ``topic`` and ``partition`` columns)::

        cols = decode_records_columnar(mm, start=pos, start_offset=o)
        pa.record_batch({"key": pa.array(cols["key"], pa.binary()), "value": ...,
                         "topic": ..., "partition": ..., "offset": cols["offset"],
                         "timestamp": cols["timestamp"], "timestampType": cols["timestamp_type"],
                         "headers": cols["headers"]})

    Returns a dict with

    * ``offset`` int64 array, ``timestamp`` int64 array (ms; LogAppendTime batches report the
      batch max timestamp), ``timestamp_type`` int32 array (0 CreateTime, 1 LogAppendTime, −1 none
      for magic 0);
    * ``key``, ``value``: lists of ``bytes | None``;
    * ``headers``: list of lists of ``(key: str, value: bytes | None)`` tuples (Spark's
      ``array<struct<key string, value binary>>``);
    * ``partition_leader_epoch`` int32, ``is_transactional`` bool, ``batch_position`` int64 arrays
      and ``next_position`` (where decoding stopped: the end of the last whole batch).

    Records with offset < ``start_offset`` or ≥ ``end_offset`` are skipped; control batches
    (transaction markers) are skipped unless ``include_control``.  A batch failing its CRC raises
    :class:`~mqstore.errors.CrcMismatchError` when ``validate`` (the default).  A torn tail ends
    the decoding silently (it is the end of data); a size field below 14 raises.
    """
    from mqstore.formats.kafka.batch import (
        decode_batch_header,
        decode_legacy_message,
        iter_legacy_records,
        iter_records,
        validate_batch,
    )

    mv = memoryview(buf).cast("B") if not isinstance(buf, np.ndarray) else memoryview(as_u8(buf))
    if end is not None:
        mv = mv[:end]
    scan = scan_batches(mv, start)
    if scan["stop_reason"] == STOP_BAD_SIZE:
        raise CorruptDataError("record size smaller than the minimum record overhead (14)", path=path,
                               offset=scan["valid_end"])
    offsets: list[int] = []
    timestamps: list[int] = []
    ts_types: list[int] = []
    keys: list[bytes | None] = []
    values: list[bytes | None] = []
    headers: list[list[tuple[str, bytes | None]]] = []
    epochs: list[int] = []
    txn: list[bool] = []
    bpos: list[int] = []
    lo = -(1 << 63) if start_offset is None else start_offset
    hi = (1 << 63) - 1 if end_offset is None else end_offset
    for i in range(scan["count"]):
        if scan["last_offset"][i] < lo:
            continue
        p = int(scan["position"][i])
        m = int(scan["magic"][i])
        if m == 2:
            h = decode_batch_header(mv, p, path=path)
            if validate:
                validate_batch(mv, h, path=path)
            if h.base_offset >= hi:
                break
            if h.is_control and not include_control:
                continue
            tt = int(h.timestamp_type)
            recs = iter_records(mv, h, path=path)
            epoch, is_txn = h.partition_leader_epoch, h.is_transactional
        elif m in (0, 1):
            msg = decode_legacy_message(mv, p, validate=validate, path=path)
            tt = int(msg.timestamp_type)
            recs = iter_legacy_records(msg, path=path)
            epoch, is_txn = -1, False
        else:
            raise CorruptDataError(f"unknown record batch magic {m}", path=path, offset=p)
        for r in recs:
            if r.offset < lo or r.offset >= hi:
                continue
            offsets.append(r.offset)
            timestamps.append(r.timestamp)
            ts_types.append(tt)
            keys.append(r.key)
            values.append(r.value)
            headers.append([(x.key, x.value) for x in r.headers])
            epochs.append(epoch)
            txn.append(is_txn)
            bpos.append(p)
    return {
        "offset": np.array(offsets, dtype=np.int64),
        "timestamp": np.array(timestamps, dtype=np.int64),
        "timestamp_type": np.array(ts_types, dtype=np.int32),
        "key": keys,
        "value": values,
        "headers": headers,
        "partition_leader_epoch": np.array(epochs, dtype=np.int32),
        "is_transactional": np.array(txn, dtype=bool),
        "batch_position": np.array(bpos, dtype=np.int64),
        "next_position": int(scan["valid_end"]),
    }




_NAT = native("_nat_kafka")
parse_bodies = parse_bodies_native if _NAT is not None else parse_bodies_numba
register("kafka.parse_bodies", parse_bodies_numba, parse_bodies_py,
         native=parse_bodies_native if _NAT is not None else None)
register("kafka.gather", gather, gather_py)
