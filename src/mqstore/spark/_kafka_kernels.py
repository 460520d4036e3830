"""Columnar decoding of v2 record-batch bodies for the kafka-log source (numba, with a twin).

:func:`parse_bodies_py` walks the records of many (decompressed) batch bodies laid end to end in
one ``uint8`` buffer and writes, per record kept (offset in ``[lo, hi)``), its offset, timestamp,
batch index and the positions/lengths of key, value and header keys/values **in the buffer**:
no Python object per record.  :func:`gather` then copies those slices into Arrow binary layouts.

The compiled kernels are the very same Python functions compiled with ``numba.njit``; the
``*_py`` names run them in the interpreter (the twins the tests compare against).  Both follow
the record checks of :func:`mqstore.formats.kafka.batch.iter_records` (spec §2.3).  A varlong
longer than 9 bytes (a delta ≥ 2^62) is reported as ``ERR_UNSUPPORTED`` so the caller falls back
to the generic decoder.
"""

from __future__ import annotations

import types
from typing import Any

import numpy as np
from numba import njit

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


def _parse_bodies_py(a: Any, bstart: Any, bend: Any, bcount: Any, bbase: Any, bts: Any, bmax: Any,
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


def _gather_py(a: Any, starts: Any, lens: Any, out_offsets: Any, out_data: Any) -> int:
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


# ``_parse_bodies_py`` calls the module global ``varint``: the compiled varint when numba compiles
# it (so the kernel can be cached), the interpreted one in the twin (a copy of the function whose
# globals say so).
_varint_nb = njit(cache=True, inline="always")(_varint_py)
varint = _varint_nb
_parse_nb = njit(cache=True)(_parse_bodies_py)
_gather_nb = njit(cache=True)(_gather_py)
_parse_twin = types.FunctionType(_parse_bodies_py.__code__, {**globals(), "varint": _varint_py}, "parse_bodies_twin")


def parse_bodies(a: np.ndarray, bstart: np.ndarray, bend: np.ndarray, bcount: np.ndarray, bbase: np.ndarray,
                 bts: np.ndarray, bmax: np.ndarray, blogappend: np.ndarray, lo: int, hi: int,
                 *, compiled: bool = True) -> dict[str, Any]:
    """Record columns (positions into ``a``) of the batch bodies ``a[bstart[i]:bend[i]]``.

    Returns ``offset``, ``timestamp`` (ms), ``batch`` (index of the body), ``key_start``/``key_len``,
    ``value_start``/``value_len`` (length −1 = null), ``header_first`` (n + 1 entries) and
    ``hkey_start``/``hkey_len``/``hvalue_start``/``hvalue_len``, plus ``error`` (``OK`` or an
    ``ERR_*`` code) and ``error_batch``.
    """
    fn = _parse_nb if compiled else _parse_twin
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


def gather(a: np.ndarray, starts: np.ndarray, lens: np.ndarray, *, compiled: bool = True
           ) -> tuple[np.ndarray, np.ndarray]:
    """Copy the slices ``a[starts[i]:starts[i]+lens[i]]`` (``lens < 0`` = null, nothing copied)
    end to end: ``(offsets int32 of n + 1 entries, data uint8)`` — an Arrow binary layout."""
    total = int(lens[lens > 0].sum()) if lens.shape[0] else 0
    if total > 0x7FFFFFFF:
        raise OverflowError("more than 2 GiB of binary data in one Arrow batch")
    offsets = np.empty(starts.shape[0] + 1, np.int64)
    data = np.empty(total, np.uint8)
    (_gather_nb if compiled else _gather_py)(a, starts, lens, offsets, data)
    return offsets.astype(np.int32), data
