"""The numba kernel of the dispatch scan (:mod:`mqstore.kernels.rocketmq.scan`): the development
path and the fallback when the native module ``_nat_rmq_scan`` is not built; imported on first use.

The kernel reads every integer byte by byte (big-endian) and checks each length against the end
of its record before touching a byte, so a corrupt or truncated buffer can only stop a scan.
"""

from __future__ import annotations

import numpy as np
from numba import njit

from mqstore.formats.rocketmq.record import MAGIC_V2
from mqstore.kernels.endian import rd_i16, rd_i32, rd_i64
from mqstore.kernels.javahash_nb import hash_continue, index_hash_span, state_to_int32
from mqstore.kernels.rocketmq.framing import FIXED_MIN, ST_BAD, ST_FULL, ST_LIMIT, ST_OK, ST_RANGE
from mqstore.kernels.rocketmq.framing_nb import head
from mqstore.kernels.rocketmq.properties import P_DELAY, P_KEYS, P_MQOFF, P_MULTI, P_TAGS, P_UNIQ, PROP_SPANS
from mqstore.kernels.rocketmq.properties_nb import count_pieces, eq_bytes, eq_const, prop_spans


@njit(cache=True, nogil=True)
def _scan_kernel(buf, prm, delay, rows, topics, keys, fallback, multi, mspan, skips, crcs):  # fmt: skip
    """One pass over the records: columns, topic ids, index key hashes (hashed while the
    properties are in cache), tags codes.  With ``check_crc`` the body spans are collected for
    :func:`~mqstore.kernels.crc.crc32_spans` (checked afterwards, the scan is cut at the first
    mismatch).  Rows naming multi-dispatch queues go to ``multi``, the spans of their
    INNER_MULTI_DISPATCH and INNER_MULTI_QUEUE_OFFSET values (-1: absent) to ``mspan``.  Returns the counts
    ``(n, pos, state, topics, skips, keys, fallbacks, crcs, multis)``."""
    base, start, end, check_crc, skip_mismatch, max_records = prm
    delay_ms, max_level, delay_ok, sched = delay
    off, size, qid, qoff, sysf, ts, tags, topic_id = rows
    rep_s, rep_l, table = topics
    key_row, key_hash = keys
    skip_pos, skip_total, skip_computed = skips
    crc_pos, crc_s, crc_l, crc_row, crc_skip = crcs
    cap = off.shape[0]
    kcap = key_row.shape[0]
    tcap = rep_s.shape[0]
    n = 0
    nt = 0
    ns = 0
    nk = 0
    nf = 0
    nc = 0
    nm = 0
    pos = start
    state = ST_RANGE
    mask = table.shape[0] - 1
    props = np.empty(PROP_SPANS, np.int64)
    last_tid = -1
    c31 = np.uint64(31)
    while pos < end:
        if max_records >= 0 and n >= max_records:
            state = ST_LIMIT
            break
        if n >= cap or ns >= cap or nt >= tcap:
            state = ST_FULL
            break
        head_state, total = head(buf, pos, end, FIXED_MIN)
        if head_state != ST_OK:
            state = head_state
            break
        rend = pos + total
        magic = rd_i32(buf, pos + 4)
        sys = rd_i32(buf, pos + 36)
        bw = 20 if sys & 0x10 else 8
        sw = 20 if sys & 0x20 else 8
        p = pos + 48 + bw + 8 + sw + 12
        if p + 4 > rend:
            state = ST_BAD
            break
        body_len = rd_i32(buf, p)
        p += 4
        if body_len < 0 or p + body_len > rend:
            state = ST_BAD
            break
        bs = p
        p += body_len
        if magic == MAGIC_V2:
            if p + 2 > rend:
                state = ST_BAD
                break
            tl = rd_i16(buf, p)
            p += 2
            tw = 2
        else:
            if p + 1 > rend:
                state = ST_BAD
                break
            tl = np.int64(buf[p])
            if tl >= 128:
                tl -= 256
            p += 1
            tw = 1
        if tl < 0 or p + tl > rend:
            state = ST_BAD
            break
        tps = p
        p += tl
        if p + 2 > rend:
            state = ST_BAD
            break
        pl = rd_i16(buf, p)
        p += 2
        if pl < 0 or p + pl > rend:
            state = ST_BAD
            break
        pps = p
        computed = 48 + bw + 8 + sw + 12 + 4 + body_len + tw + tl + 2 + pl
        if computed != total and not skip_mismatch:
            state = ST_BAD
            break
        if check_crc:
            crc_pos[nc] = pos
            crc_s[nc] = bs
            crc_l[nc] = body_len
            crc_row[nc] = n
            crc_skip[nc] = ns
            nc += 1
        if computed != total:
            skip_pos[ns] = base + pos
            skip_total[ns] = total
            skip_computed[ns] = computed
            ns += 1
            pos += total
            continue
        # ---- a valid record: its properties first (the key count decides whether it fits)
        prop_spans(buf, pps, pps + pl, props)
        k = 1 if props[P_UNIQ] >= 0 else 0
        if props[P_KEYS] >= 0:
            k += count_pieces(buf, props[P_KEYS], props[P_KEYS + 1])
        if nk + k > kcap:
            if check_crc:
                nc -= 1
            state = ST_FULL
            break
        store_ts = rd_i64(buf, pos + 48 + bw)
        off[n] = base + pos
        size[n] = total
        qid[n] = rd_i32(buf, pos + 12)
        qoff[n] = rd_i64(buf, pos + 20)
        sysf[n] = sys
        ts[n] = store_ts
        # topic: Java hash state (continued by the index keys) and its id
        st = hash_continue(buf, tps, tps + tl, np.uint64(0))
        if last_tid >= 0 and rep_l[last_tid] == tl and eq_bytes(buf, rep_s[last_tid], tps, tl):
            tid = last_tid
        else:
            slot = np.int64(((st * np.uint64(0x9E3779B97F4A7C15)) >> np.uint64(33)) & np.uint64(mask))
            while True:
                t = table[slot]
                if t < 0:
                    tid = nt
                    rep_s[nt] = tps
                    rep_l[nt] = tl
                    table[slot] = nt
                    nt += 1
                    break
                if rep_l[t] == tl and eq_bytes(buf, rep_s[t], tps, tl):
                    tid = t
                    break
                slot = (slot + 1) & mask
            last_tid = tid
        topic_id[n] = tid
        # index keys: topic#uniq first, then every non-empty KEYS piece
        h0 = st * c31 + np.uint64(35)
        if props[P_UNIQ] >= 0:
            key_row[nk] = n
            key_hash[nk] = index_hash_span(buf, props[P_UNIQ], props[P_UNIQ + 1], h0)
            nk += 1
        if props[P_KEYS] >= 0:
            i = props[P_KEYS]
            e = props[P_KEYS + 1]
            while i < e:
                j = i
                while j < e and buf[j] != 32:
                    j += 1
                if j > i:
                    key_row[nk] = n
                    key_hash[nk] = index_hash_span(buf, i, j, h0)
                    nk += 1
                i = j + 1
        # tagsCode (delay topic: deliver time)
        code = np.int64(0)
        done = False
        if props[P_DELAY] >= 0 and eq_const(buf, tps, tl, sched):
            ds = props[P_DELAY]
            dl = props[P_DELAY + 1] - ds
            digits = delay_ok and 1 <= dl <= 18
            level = np.int64(0)
            if digits:
                for q in range(ds, ds + dl):
                    d = np.int64(buf[q]) - 48
                    if d < 0 or d > 9:
                        digits = False
                        break
                    level = level * 10 + d
            if not digits:
                fallback[nf] = n
                nf += 1
                done = True
            else:
                if level > max_level:
                    level = max_level
                if level > 0:
                    dm = np.int64(1000)
                    if level < delay_ms.shape[0] and delay_ms[level] >= 0:
                        dm = delay_ms[level]
                    code = store_ts + dm
                    done = True
        if not done and props[P_TAGS] >= 0:
            code = state_to_int32(hash_continue(buf, props[P_TAGS], props[P_TAGS + 1], np.uint64(0)))
        tags[n] = code
        if props[P_MULTI] >= 0:
            multi[nm] = n
            mspan[nm, 0] = props[P_MULTI]
            mspan[nm, 1] = props[P_MULTI + 1]
            mspan[nm, 2] = props[P_MQOFF]
            mspan[nm, 3] = props[P_MQOFF + 1]
            nm += 1
        n += 1
        pos += total
    return n, pos, state, nt, ns, nk, nf, nc, nm
