"""The numba kernel of :mod:`mqstore.kernels.kafka.json_lines` (the development path; imported on
first use, so a process on the native path never loads numba)."""

from __future__ import annotations

import numpy as np
from numba import njit

from mqstore.kernels.endian import rd_i8, rd_i16, rd_i32, rd_i64
from mqstore.kernels.json_text_nb import NULL, lit, put, put_b64, put_int, put_str, utf8_ok

_K_BATCH = lit('"type":"batch","baseOffset":')
_K_LAST_OFF = lit(',"lastOffset":')
_K_COUNT = lit(',"count":')
_K_BASE_SEQ = lit(',"baseSequence":')
_K_LAST_SEQ = lit(',"lastSequence":')
_K_PID = lit(',"producerId":')
_K_PEPOCH = lit(',"producerEpoch":')
_K_LEPOCH = lit(',"partitionLeaderEpoch":')
_K_TXN = lit(',"isTransactional":')
_K_CONTROL = lit(',"isControl":')
_K_DH_MS = lit(',"deleteHorizonMs":')
_K_HAS_DH = lit(',"hasDeleteHorizon":')
_K_POS = lit(',"position":')
_K_TS_TYPE = lit(',"timestampType":"')
_K_MAX_TS = lit('","maxTimestamp":')
_K_BASE_TS = lit(',"baseTimestamp":')
_K_SIZE = lit(',"size":')
_K_MAGIC = lit(',"magic":')
_K_CRC = lit(',"compresscodec":"none","crc":')
_K_VALID = lit(',"isvalid":true}\n')
_K_RECORD = lit('"type":"record","offset":')
_K_TS = lit('","timestamp":')
_K_KEY_SIZE = lit(',"keySize":')
_K_VALUE_SIZE = lit(',"valueSize":')
_K_SEQ = lit(',"sequence":')
_K_HKEYS = lit(',"headerKeys":[')
_K_KEY = lit('],"key":')
_K_VALUE = lit(',"value":')
_K_HEADERS = lit(',"headers":[')
_K_HKEY = lit('{"key":')
_K_REC_END = lit("]}\n")
_TRUE = lit("true")
_FALSE = lit("false")
_CREATE = lit("CreateTime")
_APPEND = lit("LogAppendTime")
_INT64_MAX = np.int64(0x7FFFFFFFFFFFFFFF)


@njit(cache=True, nogil=True)
def _varint(buf: np.ndarray, p: int, end: int, max_bytes: int, bits: int) -> tuple[int, int]:
    """A zig-zag varint at ``p`` (< ``end``), masked to ``bits``: ``(value, next)``, next -1 on error."""
    u = np.uint64(0)
    for i in range(max_bytes):
        if p + i >= end:
            return 0, -1
        b = np.uint64(buf[p + i])
        u |= (b & np.uint64(0x7F)) << np.uint64(7 * i)
        if b < np.uint64(0x80):
            if bits < 64:
                u &= (np.uint64(1) << np.uint64(bits)) - np.uint64(1)
            v = np.int64(u >> np.uint64(1)) ^ -np.int64(u & np.uint64(1))
            return v, p + i + 1
    return 0, -1


@njit(cache=True, nogil=True)
def _put_bool(out: np.ndarray, o: int, v: bool) -> int:
    return put(out, o, _TRUE if v else _FALSE)


@njit(cache=True, nogil=True)
def _put_bytes(out: np.ndarray, o: int, buf: np.ndarray, s: int, n: int) -> int:
    if n < 0:
        return put(out, o, NULL)
    out[o] = 34
    o = put_b64(out, o + 1, buf, s, n)
    out[o] = 34
    return o + 1


@njit(cache=True, nogil=True)
def _bound(size: int, count: int, plen: int, print_data: bool) -> int:
    return plen + 700 + (count * (plen + 400) + 16 * size if print_data else 0)


@njit(cache=True, nogil=True)
def _add_ok(a: int, b: int) -> bool:
    return not ((b > 0 and a > _INT64_MAX - b) or (b < 0 and a < -_INT64_MAX - 1 - b))


@njit(cache=True, nogil=True)
def batch_lines(buf, positions, prefix, print_data, out):  # type: ignore[no-untyped-def]
    """``(status, value, used)``: 0 = all written (value: bytes); 1 = the records of batch
    ``value`` are rejected (``used``: the bytes of the batches before it); 2 = ``out`` is too
    small (value: the bytes needed)."""
    nbuf = buf.shape[0]
    plen = prefix.shape[0]
    cap = out.shape[0]
    o = 0
    for i in range(positions.shape[0]):
        p = positions[i]
        if p < 0 or p > nbuf - 61:
            return 1, i, o
        size = 12 + rd_i32(buf, p + 8)
        count = rd_i32(buf, p + 57)
        if size < 61 or size > nbuf - p or count < 0 or (print_data and count > size):
            return 1, i, o
        if _bound(size, count, plen, print_data) > cap - o:
            need = o + _bound(size, count, plen, print_data)
            for q in range(i + 1, positions.shape[0]):
                pq = positions[q]
                if pq < 0 or pq > nbuf - 61:
                    continue
                need += _bound(max(12 + rd_i32(buf, pq + 8), 0), max(rd_i32(buf, pq + 57), 0), plen, print_data)
            return 2, need, 0
        base_offset = rd_i64(buf, p)
        leader_epoch = rd_i32(buf, p + 12)
        magic = rd_i8(buf, p + 16)
        crc = rd_i32(buf, p + 17) & 0xFFFFFFFF
        attrs = rd_i16(buf, p + 21)
        last_delta = rd_i32(buf, p + 23)
        base_ts = rd_i64(buf, p + 27)
        max_ts = rd_i64(buf, p + 35)
        producer_id = rd_i64(buf, p + 43)
        producer_epoch = rd_i16(buf, p + 51)
        base_seq = rd_i32(buf, p + 53)
        log_append = (attrs & 0x08) != 0
        last_seq = -1
        if base_seq != -1:
            last_seq = base_seq + last_delta
            if last_seq > 0x7FFFFFFF:
                last_seq -= 0x80000000
        ts_type = _APPEND if log_append else _CREATE
        line_start = o
        o = put(out, o, prefix)
        o = put(out, o, _K_BATCH)
        o = put_int(out, o, base_offset)
        o = put(out, o, _K_LAST_OFF)
        o = put_int(out, o, base_offset + last_delta)
        o = put(out, o, _K_COUNT)
        o = put_int(out, o, count)
        o = put(out, o, _K_BASE_SEQ)
        o = put_int(out, o, base_seq)
        o = put(out, o, _K_LAST_SEQ)
        o = put_int(out, o, last_seq)
        o = put(out, o, _K_PID)
        o = put_int(out, o, producer_id)
        o = put(out, o, _K_PEPOCH)
        o = put_int(out, o, producer_epoch)
        o = put(out, o, _K_LEPOCH)
        o = put_int(out, o, leader_epoch)
        o = put(out, o, _K_TXN)
        o = _put_bool(out, o, (attrs & 0x10) != 0)
        o = put(out, o, _K_CONTROL)
        o = _put_bool(out, o, (attrs & 0x20) != 0)
        o = put(out, o, _K_DH_MS)
        o = put_int(out, o, base_ts if attrs & 0x40 else -1)
        o = put(out, o, _K_HAS_DH)
        o = _put_bool(out, o, (attrs & 0x40) != 0)
        o = put(out, o, _K_POS)
        o = put_int(out, o, p)
        o = put(out, o, _K_TS_TYPE)
        o = put(out, o, ts_type)
        o = put(out, o, _K_MAX_TS)
        o = put_int(out, o, max_ts)
        o = put(out, o, _K_BASE_TS)
        o = put_int(out, o, base_ts)
        o = put(out, o, _K_SIZE)
        o = put_int(out, o, size)
        o = put(out, o, _K_MAGIC)
        o = put_int(out, o, magic)
        o = put(out, o, _K_CRC)
        o = put_int(out, o, crc)
        o = put(out, o, _K_VALID)
        if not print_data:
            continue
        r = p + 61
        bend = p + size
        bad = False
        for _ in range(count):
            length, r = _varint(buf, r, bend, 5, 32)
            if r < 0 or length <= 0 or length > bend - r:
                bad = True
                break
            rend = r + length
            r += 1  # attributes
            ts_delta, r = _varint(buf, r, rend, 10, 64)
            if r < 0:
                bad = True
                break
            off_delta, r = _varint(buf, r, rend, 5, 32)
            if r < 0:
                bad = True
                break
            klen, r = _varint(buf, r, rend, 5, 32)
            if r < 0 or klen > rend - r:
                bad = True
                break
            ks = r
            r += max(klen, 0)
            vlen, r = _varint(buf, r, rend, 5, 32)
            if r < 0 or vlen > rend - r:
                bad = True
                break
            vs = r
            r += max(vlen, 0)
            nh, r = _varint(buf, r, rend, 5, 32)
            if r < 0 or nh < 0 or nh > rend - r:
                bad = True
                break
            if log_append:
                ts = max_ts
            elif _add_ok(base_ts, ts_delta):
                ts = base_ts + ts_delta
            else:
                bad = True
                break
            if not _add_ok(base_offset, off_delta):
                bad = True
                break
            o = put(out, o, prefix)
            o = put(out, o, _K_RECORD)
            o = put_int(out, o, base_offset + off_delta)
            o = put(out, o, _K_TS_TYPE)
            o = put(out, o, ts_type)
            o = put(out, o, _K_TS)
            o = put_int(out, o, ts)
            o = put(out, o, _K_KEY_SIZE)
            o = put_int(out, o, klen if klen >= 0 else -1)
            o = put(out, o, _K_VALUE_SIZE)
            o = put_int(out, o, vlen if vlen >= 0 else -1)
            o = put(out, o, _K_SEQ)
            o = put_int(out, o, -1 if base_seq == -1 else base_seq + off_delta)
            o = put(out, o, _K_HKEYS)
            hp = r
            for j in range(nh):
                hk, hp = _varint(buf, hp, rend, 5, 32)
                if hp < 0 or hk < 0 or hk > rend - hp or not utf8_ok(buf, hp, hk):
                    bad = True
                    break
                if j:
                    out[o] = 44
                    o += 1
                o = put_str(out, o, buf, hp, hk)
                hp += hk
                hvl, hp = _varint(buf, hp, rend, 5, 32)
                if hp < 0 or hvl > rend - hp:
                    bad = True
                    break
                hp += max(hvl, 0)
            if bad or hp != rend:
                bad = True
                break
            o = put(out, o, _K_KEY)
            o = _put_bytes(out, o, buf, ks, klen)
            o = put(out, o, _K_VALUE)
            o = _put_bytes(out, o, buf, vs, vlen)
            o = put(out, o, _K_HEADERS)
            hp = r
            for j in range(nh):
                hk, hp = _varint(buf, hp, rend, 5, 32)
                if j:
                    out[o] = 44
                    o += 1
                o = put(out, o, _K_HKEY)
                o = put_str(out, o, buf, hp, hk)
                hp += hk
                hvl, hp = _varint(buf, hp, rend, 5, 32)
                o = put(out, o, _K_VALUE)
                o = _put_bytes(out, o, buf, hp, hvl)
                hp += max(hvl, 0)
                out[o] = 125
                o += 1
            o = put(out, o, _K_REC_END)
            r = rend
        if bad or r != bend:
            return 1, i, line_start
    return 0, o, o
