"""The numba kernels of :mod:`mqstore.kernels.rocketmq.json_lines` (the development path; imported
on first use, so a process on the native path never loads numba)."""

from __future__ import annotations

from numba import njit

from mqstore.kernels.json_text_nb import NULL as _NULL
from mqstore.kernels.json_text_nb import lit as _lit
from mqstore.kernels.json_text_nb import put as _put
from mqstore.kernels.json_text_nb import put_b64 as _put_b64
from mqstore.kernels.json_text_nb import put_int as _put_int
from mqstore.kernels.json_text_nb import put_str as _put_str
from mqstore.kernels.json_text_nb import utf8_ok as _utf8_ok

# the fixed pieces of a line, in order
_K_TOPIC = _lit('{"topic":')
_K_FLAG = _lit(',"flag":')
_K_BODY = _lit(',"body":"')
_K_PROPS = _lit('","properties":{')
_K_QID = _lit('},"queueId":')
_K_QOFF = _lit(',"queueOffset":')
_K_CLOFF = _lit(',"commitLogOffset":')
_K_SIZE = _lit(',"size":')
_K_BORN_TS = _lit(',"bornTimestamp":')
_K_STORE_TS = _lit(',"storeTimestamp":')
_K_BORN_HOST = _lit(',"bornHost":"')
_K_STORE_HOST = _lit('","storeHost":"')
_K_SYS = _lit('","sysFlag":')
_K_RECONSUME = _lit(',"reconsumeTimes":')
_K_CRC = _lit(',"bodyCRC":')
_K_KEYS = _lit(',"keys":[')
_K_TAGS = _lit('],"tags":')
_K_UNIQ = _lit(',"uniqKey":')
_K_END = _lit("}\n")


@njit(cache=True, nogil=True)
def _json_kernel(buf, rows, offs, pairs, special, keys, born, born_off, store, store_off, out):  # type: ignore[no-untyped-def]  # fmt: skip
    """Write the lines of every row into ``out``; the byte count, or ``-1 - r`` when row ``r``
    needs the per-record path (its text is not valid UTF-8, or its stored physical offset is not
    where it lies: the reader raises on that)."""
    pair_off, ns, nl, vs, vl = pairs
    key_off, ks, kl = keys
    o = 0
    for r in range(rows.shape[0]):
        row = rows[r]
        ts0 = row[18]
        tl0 = row[19]
        if row[6] != offs[r] or not _utf8_ok(buf, ts0, tl0) or not _utf8_ok(buf, row[20], row[21]):
            return -1 - r
        o = _put(out, o, _K_TOPIC)
        o = _put_str(out, o, buf, ts0, tl0)
        o = _put(out, o, _K_FLAG)
        o = _put_int(out, o, row[4])
        o = _put(out, o, _K_BODY)
        o = _put_b64(out, o, buf, row[16], row[17])
        o = _put(out, o, _K_PROPS)
        for q in range(pair_off[r], pair_off[r + 1]):
            if q > pair_off[r]:
                out[o] = 44
                o += 1
            o = _put_str(out, o, buf, ns[q], nl[q])
            out[o] = 58
            o += 1
            o = _put_str(out, o, buf, vs[q], vl[q])
        o = _put(out, o, _K_QID)
        o = _put_int(out, o, row[3])
        o = _put(out, o, _K_QOFF)
        o = _put_int(out, o, row[5])
        o = _put(out, o, _K_CLOFF)
        o = _put_int(out, o, offs[r])
        o = _put(out, o, _K_SIZE)
        o = _put_int(out, o, row[0])
        o = _put(out, o, _K_BORN_TS)
        o = _put_int(out, o, row[8])
        o = _put(out, o, _K_STORE_TS)
        o = _put_int(out, o, row[11])
        o = _put(out, o, _K_BORN_HOST)
        for k in range(born_off[r], born_off[r + 1]):
            out[o] = born[k]
            o += 1
        o = _put(out, o, _K_STORE_HOST)
        for k in range(store_off[r], store_off[r + 1]):
            out[o] = store[k]
            o += 1
        o = _put(out, o, _K_SYS)
        o = _put_int(out, o, row[7])
        o = _put(out, o, _K_RECONSUME)
        o = _put_int(out, o, row[14])
        o = _put(out, o, _K_CRC)
        o = _put_int(out, o, row[2])
        o = _put(out, o, _K_KEYS)
        for q in range(key_off[r], key_off[r + 1]):
            if q > key_off[r]:
                out[o] = 44
                o += 1
            o = _put_str(out, o, buf, ks[q], kl[q])
        o = _put(out, o, _K_TAGS)
        sp = special[r]
        if sp["tagsLen"] >= 0:
            o = _put_str(out, o, buf, sp["tagsStart"], sp["tagsLen"])
        else:
            o = _put(out, o, _NULL)
        o = _put(out, o, _K_UNIQ)
        if sp["uniqLen"] >= 0:
            o = _put_str(out, o, buf, sp["uniqStart"], sp["uniqLen"])
        else:
            o = _put(out, o, _NULL)
        o = _put(out, o, _K_END)
    return o
