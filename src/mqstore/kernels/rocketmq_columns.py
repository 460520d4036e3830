"""CommitLog records → Arrow columns without per-row Python objects.

:func:`arrow_columns` is the vectorised form of
:func:`~mqstore.kernels.rocketmq_scan.decode_columns` followed by the Arrow conversion of the
``rocketmq`` Spark source: numba kernels locate every variable-length piece of the records (topic,
body, the kept ``name\\x01value\\x02`` property pairs, the ``KEYS`` pieces, ``TAGS``/``UNIQ_KEY``)
as ``(start, length)`` spans in the CommitLog bytes and format the hosts as text; one gather per
column copies the spans into a single data buffer, and the Arrow arrays are built from that buffer
and int32 offsets (``pa.Array.from_buffers``).

The property rules are those of :func:`~mqstore.formats.rocketmq.properties.parse_properties`
applied to bytes (``\\x01``/``\\x02`` are ASCII, so on valid UTF-8 the byte and character forms
agree): a pair needs a non-empty name and a non-empty value, and a repeated name keeps its first
position with the last value (a Python ``dict``).  The old path decodes text with
``decode("utf-8", "replace")``; when any emitted string is not valid UTF-8, :func:`arrow_columns`
returns ``None`` and the caller uses the old path (UTF-8 is self-synchronising at ASCII bytes, so
validating the emitted pieces alone is exact).  The pure-Python twin is ``decode_columns`` +
``columns_to_arrow``; tests compare both.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np
from numba import njit

from mqstore.kernels.javahash import as_u8
from mqstore.kernels.rocketmq_scan import _F, _decode_kernel, _eq_bytes, _eq_const

if TYPE_CHECKING:  # pragma: no cover
    import pyarrow as pa

_FI = {name: i for i, name in enumerate(_F)}
_INT32_MAX = 0x7FFFFFFF

# special property names (ASCII)
_KEYS = np.frombuffer(b"KEYS", np.uint8).copy()
_TAGS = np.frombuffer(b"TAGS", np.uint8).copy()
_UNIQ = np.frombuffer(b"UNIQ_KEY", np.uint8).copy()


@njit(cache=True, nogil=True)
def _props_kernel(
    buf: np.ndarray, ps: np.ndarray, pl: np.ndarray, kname: np.ndarray, ktags: np.ndarray, kuniq: np.ndarray,
    pair_off: np.ndarray, ns: np.ndarray, nl: np.ndarray, vs: np.ndarray, vl: np.ndarray,
    special: np.ndarray, key_off: np.ndarray, ks: np.ndarray, kl: np.ndarray,
) -> None:
    """Kept property pairs of every record (``pair_off`` row offsets; name/value spans), the
    ``KEYS``/``TAGS``/``UNIQ_KEY`` value spans (``special[r, 2j:2j+2]``, length -1 when absent) and
    the non-empty space-separated pieces of ``KEYS`` (``key_off`` row offsets)."""
    npairs = 0
    nkeys = 0
    for r in range(ps.shape[0]):
        pair_off[r] = npairs
        key_off[r] = nkeys
        first = npairs
        a = ps[r]
        n = pl[r]
        start = 0
        while start < n:
            end = start
            sep = -1
            while end < n and buf[a + end] != 2:
                if sep < 0 and buf[a + end] == 1:
                    sep = end
                end += 1
            if sep > start and sep < end - 1:
                s0 = a + start
                l0 = sep - start
                dup = -1
                for q in range(first, npairs):
                    if nl[q] == l0 and _eq_bytes(buf, ns[q], s0, l0):
                        dup = q
                        break
                if dup >= 0:
                    vs[dup] = a + sep + 1
                    vl[dup] = end - sep - 1
                else:
                    ns[npairs] = s0
                    nl[npairs] = l0
                    vs[npairs] = a + sep + 1
                    vl[npairs] = end - sep - 1
                    npairs += 1
            start = end + 1
        special[r, 1] = -1
        special[r, 3] = -1
        special[r, 5] = -1
        for q in range(first, npairs):
            if _eq_const(buf, ns[q], nl[q], kname):
                special[r, 0] = vs[q]
                special[r, 1] = vl[q]
            elif _eq_const(buf, ns[q], nl[q], ktags):
                special[r, 2] = vs[q]
                special[r, 3] = vl[q]
            elif _eq_const(buf, ns[q], nl[q], kuniq):
                special[r, 4] = vs[q]
                special[r, 5] = vl[q]
        if special[r, 1] > 0:
            s = special[r, 0]
            e = s + special[r, 1]
            i = s
            while i < e:
                j = i
                while j < e and buf[j] != 32:
                    j += 1
                if j > i:
                    ks[nkeys] = i
                    kl[nkeys] = j - i
                    nkeys += 1
                i = j + 1
    pair_off[ps.shape[0]] = npairs
    key_off[ps.shape[0]] = nkeys


@njit(cache=True, nogil=True)
def _put_uint(out: np.ndarray, o: int, v: int) -> int:
    if v == 0:
        out[o] = 48
        return o + 1
    digits = 0
    t = v
    while t > 0:
        digits += 1
        t //= 10
    for i in range(digits - 1, -1, -1):
        out[o + i] = 48 + v % 10
        v //= 10
    return o + digits


_HEX = np.frombuffer(b"0123456789abcdef", np.uint8).copy()


@njit(cache=True, nogil=True)
def _hosts_kernel(buf: np.ndarray, hp: np.ndarray, hw: np.ndarray, hexd: np.ndarray, offsets: np.ndarray, out: np.ndarray) -> int:
    """``Host.__str__`` text of each host (``a.b.c.d:port``, or ``[8 full groups]:port`` for
    IPv6) into ``out``; ``offsets`` gets the n+1 offsets; returns the byte count."""
    o = 0
    prev_p = -1
    prev_w = 0
    for r in range(hp.shape[0]):
        offsets[r] = o
        p = hp[r]
        w = hw[r]
        if prev_p >= 0 and w == prev_w and _eq_bytes(buf, p, prev_p, w):  # same host as the row before
            a = offsets[r - 1]
            ln = o - a
            for k in range(ln):
                out[o + k] = out[a + k]
            o += ln
            continue
        prev_p = p
        prev_w = w
        if w == 8:
            for k in range(4):
                if k:
                    out[o] = 46
                    o += 1
                o = _put_uint(out, o, np.int64(buf[p + k]))
        else:
            out[o] = 91
            o += 1
            for g in range(8):
                if g:
                    out[o] = 58
                    o += 1
                b0 = buf[p + 2 * g]
                b1 = buf[p + 2 * g + 1]
                out[o] = hexd[b0 >> 4]
                out[o + 1] = hexd[b0 & 15]
                out[o + 2] = hexd[b1 >> 4]
                out[o + 3] = hexd[b1 & 15]
                o += 4
            out[o] = 93
            o += 1
        q = p + w - 4
        port = (np.int64(buf[q]) << 24) | (np.int64(buf[q + 1]) << 16) | (np.int64(buf[q + 2]) << 8) | np.int64(buf[q + 3])
        if port >= 0x80000000:
            port -= 0x100000000
        out[o] = 58
        o += 1
        if port < 0:
            out[o] = 45
            o += 1
            port = -port
        o = _put_uint(out, o, port)
    offsets[hp.shape[0]] = o
    return o


@njit(cache=True, nogil=True)
def _gather_kernel(buf: np.ndarray, starts: np.ndarray, lens: np.ndarray, offsets: np.ndarray, out: np.ndarray) -> None:
    o = 0
    for r in range(starts.shape[0]):
        offsets[r] = o
        s = starts[r]
        ln = lens[r]
        for k in range(ln):  # an explicit loop: slicing costs more than the copy for short pieces
            out[o + k] = buf[s + k]
        o += max(ln, 0)
    offsets[starts.shape[0]] = o


def _gather(u8: np.ndarray, starts: np.ndarray, lens: np.ndarray) -> tuple[np.ndarray, np.ndarray] | None:
    """(int32 offsets, data) of the spans; ``None`` when the data would overflow int32 offsets."""
    lens = np.maximum(lens, 0)
    total = int(lens.sum())
    if total > _INT32_MAX:
        return None
    offsets = np.empty(len(starts) + 1, np.int32)
    data = np.empty(total, np.uint8)
    _gather_kernel(u8, starts, lens, offsets, data)
    return offsets, data


def _var_array(typ: pa.DataType, offsets: np.ndarray, data: np.ndarray, valid: np.ndarray | None = None) -> pa.Array:
    import pyarrow as pa

    n = len(offsets) - 1
    if valid is None or valid.all():
        return pa.Array.from_buffers(typ, n, [None, pa.py_buffer(offsets), pa.py_buffer(data)], null_count=0)
    bitmap = np.packbits(valid, bitorder="little")
    return pa.Array.from_buffers(
        typ, n, [pa.py_buffer(bitmap), pa.py_buffer(offsets), pa.py_buffer(data)], null_count=int(n - valid.sum())
    )


def _utf8_ok(*arrays: pa.Array) -> bool:
    import pyarrow as pa

    for a in arrays:
        try:
            a.validate(full=True)
        except pa.ArrowInvalid:
            return False
    return True


def arrow_columns(
    buf: bytes | bytearray | memoryview | np.ndarray,
    file_from_offset: int,
    positions: np.ndarray,
    *,
    broker_name: str,
    include_body: bool = True,
) -> dict[str, pa.Array] | None:
    """The Arrow columns of the ``rocketmq`` source (names of ``ROCKETMQ_COLUMNS``) for the
    records at ``positions``, equal to ``columns_to_arrow(decode_columns(...))``.

    Returns ``None`` when the batch needs the old path: a position that is not a valid record (the
    old path raises the typed error), text that is not valid UTF-8 (the old path replaces it), or
    more than 2 GiB of data in one column.
    """
    import pyarrow as pa

    u8 = as_u8(buf)
    pos = np.ascontiguousarray(positions, np.int64)
    n = len(pos)
    out = np.zeros((n, len(_F)), np.int64)
    if int(_decode_kernel(u8, pos, out)) >= 0:
        return None
    col = {name: out[:, i] for i, name in enumerate(_F)}
    s = pa.string()

    ps = np.ascontiguousarray(col["propsStart"])
    pl = np.ascontiguousarray(col["propsLen"])
    cap_pairs = int(pl.sum()) // 3 + n + 1
    cap_keys = int(pl.sum()) // 2 + n + 1
    pair_off = np.empty(n + 1, np.int64)
    ns = np.empty(cap_pairs, np.int64)
    nl = np.empty(cap_pairs, np.int64)
    vs = np.empty(cap_pairs, np.int64)
    vl = np.empty(cap_pairs, np.int64)
    special = np.zeros((n, 6), np.int64)
    key_off = np.empty(n + 1, np.int64)
    ks = np.empty(cap_keys, np.int64)
    kl = np.empty(cap_keys, np.int64)
    _props_kernel(u8, ps, pl, _KEYS, _TAGS, _UNIQ, pair_off, ns, nl, vs, vl, special, key_off, ks, kl)
    npairs = int(pair_off[n])
    nkeys = int(key_off[n])
    if npairs > _INT32_MAX or nkeys > _INT32_MAX:
        return None

    pieces = {
        "topic": (col["topicStart"], col["topicLen"]),
        "pname": (ns[:npairs], nl[:npairs]),
        "pvalue": (vs[:npairs], vl[:npairs]),
        "keys": (ks[:nkeys], kl[:nkeys]),
        "tags": (special[:, 2], special[:, 3]),
        "uniqKey": (special[:, 4], special[:, 5]),
    }
    if include_body:
        pieces["body"] = (col["bodyStart"], col["bodyLen"])
    gathered = {}
    for name, (st, ln) in pieces.items():
        g = _gather(u8, np.ascontiguousarray(st), np.ascontiguousarray(ln))
        if g is None:
            return None
        gathered[name] = g
    topic = _var_array(s, *gathered["topic"])
    pname = _var_array(s, *gathered["pname"])
    pvalue = _var_array(s, *gathered["pvalue"])
    tags = _var_array(s, *gathered["tags"], special[:, 3] >= 0)
    uniq = _var_array(s, *gathered["uniqKey"], special[:, 5] >= 0)
    if not _utf8_ok(topic, pname, pvalue):  # tags, uniqKey and keys are pieces of the values
        return None
    keys_values = _var_array(s, *gathered["keys"])
    properties = pa.MapArray.from_arrays(pa.array(pair_off.astype(np.int32), pa.int32()), pname, pvalue)
    keys = pa.ListArray.from_arrays(pa.array(key_off.astype(np.int32), pa.int32()), keys_values)
    body = _var_array(pa.binary(), *gathered["body"]) if include_body else pa.nulls(n, pa.binary())

    hosts = {}
    for name, p_f, w_f in (("bornHost", "bornHostPos", "bornHostWidth"), ("storeHost", "storeHostPos", "storeHostWidth")):
        h_off = np.empty(n + 1, np.int32)
        h_buf = np.empty(n * 56, np.uint8)
        used = int(_hosts_kernel(u8, np.ascontiguousarray(col[p_f]), np.ascontiguousarray(col[w_f]), _HEX, h_off, h_buf))
        hosts[name] = _var_array(s, h_off, h_buf[:used])

    bb = broker_name.encode("utf-8")
    broker = _var_array(
        s, (np.arange(n + 1, dtype=np.int64) * len(bb)).astype(np.int32), np.tile(np.frombuffer(bb, np.uint8), n)
    ) if n * len(bb) <= _INT32_MAX else pa.array([broker_name] * n, s)  # fmt: skip

    def i32(name: str) -> pa.Array:
        return pa.array(col[name].astype(np.int32), pa.int32())

    def i64(a: np.ndarray) -> pa.Array:
        return pa.array(np.ascontiguousarray(a, np.int64), pa.int64())

    return {
        "topic": topic,
        "flag": i32("flag"),
        "body": body,
        "properties": properties,
        "brokerName": broker,
        "queueId": i32("queueId"),
        "queueOffset": i64(col["queueOffset"]),
        "bornTimestamp": i64(col["bornTimestamp"]),
        "storeTimestamp": i64(col["storeTimestamp"]),
        "commitLogOffset": i64(pos + np.int64(file_from_offset)),
        "size": i32("size"),
        "keys": keys,
        "tags": tags,
        "uniqKey": uniq,
        "sysFlag": i32("sysFlag"),
        "bornHost": hosts["bornHost"],
        "storeHost": hosts["storeHost"],
        "reconsumeTimes": i32("reconsumeTimes"),
        "bodyCRC": i32("bodyCRC"),
    }
