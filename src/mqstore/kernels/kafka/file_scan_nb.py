"""The numba kernels of :mod:`mqstore.kernels.kafka.file_scan` (the development path and the
fallback when the native module ``_nat_kafka`` is not built; imported on first use)."""

from __future__ import annotations

import numpy as np
from numba import njit

from mqstore.kernels import native
from mqstore.kernels.endian import rd_i8, rd_i32, rd_i64, rd_u16, rd_u32
from mqstore.kernels.kafka.batches import STOP_BAD_SIZE, STOP_END, STOP_TORN
from mqstore.kernels.kafka.file_scan import STOP_FULL, STOP_LIMIT, STOP_READ_ERROR

HAVE_FILE_SCAN = native.HAVE_PREAD and native.HAVE_ISAL_CRC32 and native.HAVE_ISAL_CRC32C
_c_pread, _c_crc32c, _c_crc32, _ptr = native.c_pread, native.c_crc32c, native.c_crc32, native.as_voidptr


@njit(cache=True, nogil=True, inline="always")
def _fill(fd, base, cap, off, file_end):
    # file[off : off + min(cap, file_end - off)] into the buffer; bytes read, or -1 on an error
    want = min(cap, file_end - off)
    got = 0
    while got < want:
        r = _c_pread(np.intc(fd), _ptr(base + got), want - got, off + got)
        if r <= 0:
            return -1 if r < 0 else got
        got += r
    return got


@njit(cache=True, nogil=True)
def _file_scan(fd, file_end, start, stop_at, buf, cols, ok, pid, pepoch, pseq):
    position, size, base_offset, last_offset, max_ts, base_ts, epoch, magic, attrs, count, crc = cols
    cap = position.shape[0]
    bsz = buf.shape[0]
    base = buf.ctypes.data
    ws = np.int64(0)  # the buffer holds file[ws:we]
    we = np.int64(0)
    p = np.int64(start)
    n = 0
    while True:
        if p >= stop_at:
            return n, p, STOP_LIMIT
        if p >= file_end - 17:
            return n, p, STOP_END
        if n >= cap:
            return n, p, STOP_FULL
        need = min(p + 61, file_end)
        if p < ws or need > we:
            got = _fill(fd, base, bsz, p, file_end)
            if got < need - p:
                return n, p, STOP_READ_ERROR
            ws = p
            we = p + got
        o = p - ws
        s = rd_i32(buf, o + 8)
        if s < 14:
            return n, p, STOP_BAD_SIZE
        if p > file_end - 12 - s:
            return n, p, STOP_TORN
        m = rd_i8(buf, o + 16)
        total = s + 12
        pid[n] = -1
        pepoch[n] = -1
        pseq[n] = -1
        position[n] = p
        size[n] = total
        magic[n] = m
        off = rd_i64(buf, o)
        kind = 0  # 0: no checksum (invalid), 1: CRC-32C from p + 21, 2: CRC-32 from p + 16
        if m >= 2:
            epoch[n] = rd_i32(buf, o + 12)
            if total >= 61 and p + 61 <= file_end:
                crc[n] = rd_u32(buf, o + 17)
                attrs[n] = rd_u16(buf, o + 21)
                base_offset[n] = off
                last_offset[n] = off + rd_i32(buf, o + 23)
                base_ts[n] = rd_i64(buf, o + 27)
                max_ts[n] = rd_i64(buf, o + 35)
                count[n] = rd_i32(buf, o + 57)
                pid[n] = rd_i64(buf, o + 43)
                e16 = np.int64(rd_u16(buf, o + 51))
                pepoch[n] = e16 - 65536 if e16 >= 32768 else e16
                pseq[n] = rd_i32(buf, o + 53)
                kind = 1
            else:
                crc[n] = rd_u32(buf, o + 17) if p + 21 <= file_end else 0
                attrs[n] = 0
                base_offset[n] = off
                last_offset[n] = off
                base_ts[n] = -1
                max_ts[n] = -1
                count[n] = 0
        else:
            epoch[n] = -1
            crc[n] = rd_u32(buf, o + 12)
            attrs[n] = np.int64(buf[o + 17])
            base_offset[n] = -1
            last_offset[n] = off
            count[n] = 1
            if m == 1 and s >= 22:
                base_ts[n] = rd_i64(buf, o + 18)
            else:
                base_ts[n] = -1
            max_ts[n] = base_ts[n]
            if (m == 0 or m == 1) and total >= 26:
                kind = 2
        good = False
        if kind != 0:
            cs = p + 21 if kind == 1 else p + 16
            ce = p + total
            c = np.uint32(0xFFFFFFFF) if kind == 1 else np.uint32(0)
            while cs < ce:
                if cs >= we:  # the batch goes on past the buffer: read its next part
                    got = _fill(fd, base, bsz, cs, file_end)
                    if got <= 0:
                        return n, p, STOP_READ_ERROR
                    ws = cs
                    we = cs + got
                e = min(ce, we)
                if kind == 1:
                    c = _c_crc32c(_ptr(base + (cs - ws)), np.intc(e - cs), c)
                else:
                    c = _c_crc32(c, _ptr(base + (cs - ws)), np.uint64(e - cs))
                cs = e
            if kind == 1:
                c = c ^ np.uint32(0xFFFFFFFF)
            good = np.int64(c) == crc[n]
        ok[n] = good
        n += 1
        p += total


@njit(cache=True, nogil=True)
def find_batch_start(fd, file_end, lo, hi, buf, buf2, verify_budget):
    # First position in [lo, hi) that looks like the start of a v2 batch whose CRC-32C verifies
    # (and is followed by a plausible header or the end of the file); -1 if none.  A guess: the
    # caller confirms it by walking the chain from the start of the file up to it.
    bsz = buf.shape[0]
    base = buf.ctypes.data
    base2 = buf2.ctypes.data
    q = np.int64(lo)
    budget = np.int64(verify_budget)
    while q < hi:
        got = _fill(fd, base, bsz, q, file_end)
        if got < 61:
            return -1
        last = min(hi, q + got - 60)
        for c in range(q, last):
            o = c - q
            if buf[o + 16] != 2:
                continue
            s = rd_i32(buf, o + 8)
            if s < 49 or c > file_end - 12 - s or rd_i32(buf, o + 23) < 0 or rd_i32(buf, o + 57) < 0:
                continue
            nxt = c + 12 + s
            if nxt <= file_end - 17:
                if _fill(fd, base2, 17, nxt, file_end) != 17 or buf2[16] != 2 or rd_i32(buf2, 8) < 14:
                    continue
            if s > budget:
                return -1
            budget -= s
            cs = c + 21
            x = np.uint32(0xFFFFFFFF)
            b2 = buf2.shape[0]
            while cs < nxt:
                g = _fill(fd, base2, b2, cs, nxt)
                if g <= 0:
                    return -1
                x = _c_crc32c(_ptr(base2), np.intc(g), x)
                cs += g
            if np.int64(x ^ np.uint32(0xFFFFFFFF)) == rd_u32(buf, o + 17):
                return c
        if last <= q:
            return -1
        q = last
    return -1


