"""The checks ``kafka verify`` makes of a segment's ``.index``/``.timeindex`` against its batches.

Four kernels, each with its pure-Python reference (``*_py``), its numpy path (``*_numpy``, the
vectorised checks verify ran before the native ones: the ``compiled`` twin) and its C twin in
``_nat_kafka`` (``*_native``):

* :func:`index_columns` – the entries of an index file's bytes as two int64 columns (offsets
  absolute) and where DumpLogSegments' zero padding starts;
* :func:`order_events` – batch offsets going backwards (or the first one below the base offset);
* :func:`offset_index_events` – every ``.index`` entry against the walked batches;
* :func:`time_index_events` – every ``.timeindex`` entry: Kafka's search of its batch (from the
  offset index's position for its offset) and the batch's largest record timestamp.

The kernels report *events* (slot, code, numbers); :mod:`mqstore.storage.kafka.tools` turns them
into the verify problems and notes, in slot order, with their wording.  The columns are anything
with the buffer protocol and integer indexing (numpy arrays, or memoryviews cast to ``q``/``i``/
``b``/``B``): the native path of ``kafka verify`` runs without numpy.

This facade imports neither numpy nor numba at module level.
"""

from __future__ import annotations

import os
from bisect import bisect_left, bisect_right
from typing import Any

from mqstore.kernels.backend import native
from mqstore.kernels.registry import register

# offset-index events: (slot, code, log offset of the batch at the entry's position)
OI_NOT_AFTER = 1  # the entry is not after the previous one (offset or position)
OI_NOT_BATCH_START = 2  # its position is not a batch start
OI_MULTI_BATCH = 3  # it names the last offset of a later batch of the same append (a follower's entry)
OI_MISMATCH = 4  # its offset is not the last offset of the batch at its position

# time-index events: (slot, code, batch, log value, out of order)
TI_ORDER_ONLY = 0  # only the out-of-order flag is set
TI_NOT_FOUND = 1  # no valid batch holds the entry's offset (log value −1)
TI_OTHER_OFFSET = 2  # the batch found ends at another offset (log value: that offset)
TI_TS_MISMATCH = 3  # the batch's largest record timestamp differs (log value: that timestamp)
TI_DECODE = 4  # the batch is the entry's, but its records are for the record codec (compressed, legacy, odd)

_NAT = native("_nat_kafka")


# ----------------------------------------------------------------------------- index columns
def index_columns_py(raw: bytes, entry_size: int, base: int) -> tuple[list[int], list[int], int]:
    """``(keys, values, padding_start)`` of the whole slots of an index file's bytes: ``.index``
    (entry size 8) keys = offsets, values = positions; ``.timeindex`` (12) keys = timestamps,
    values = offsets (offsets absolute); padding_start = the first slot > 0 whose relative offset
    is 0, else the number of slots."""
    n = len(raw) // entry_size
    keys, vals = [], []
    pad = n
    for i in range(n):
        e = i * entry_size
        if entry_size == 8:
            rel = int.from_bytes(raw[e : e + 4], "big", signed=True)
            keys.append(base + rel)
            vals.append(int.from_bytes(raw[e + 4 : e + 8], "big", signed=True))
        else:
            rel = int.from_bytes(raw[e + 8 : e + 12], "big", signed=True)
            keys.append(int.from_bytes(raw[e : e + 8], "big", signed=True))
            vals.append(base + rel)
        if rel == 0 and i > 0 and pad == n:
            pad = i
    return keys, vals, pad


def index_columns_numpy(raw: bytes, entry_size: int, base: int) -> tuple[Any, Any, int]:
    """:func:`index_columns_py` with numpy (int64 arrays)."""
    import numpy as np

    n = len(raw) // entry_size
    if entry_size == 8:
        view = np.frombuffer(raw, dtype=[("a", ">i4"), ("b", ">i4")], count=n)
        rel = view["a"].astype(np.int64)
        keys, vals = rel + base, view["b"].astype(np.int64)
    else:
        view = np.frombuffer(raw, dtype=[("a", ">i8"), ("b", ">i4")], count=n)
        rel = view["b"].astype(np.int64)
        keys, vals = view["a"].astype(np.int64), rel + base
    z = np.nonzero(rel[1:] == 0)[0]
    return keys, vals, int(z[0]) + 1 if z.shape[0] else n


def index_columns_native(raw: bytes, entry_size: int, base: int) -> tuple[memoryview, memoryview, int]:
    """:func:`index_columns_py` in C: the columns as int64 memoryviews."""
    k, v, pad = _NAT.index_columns(raw, entry_size, base)
    return memoryview(k).cast("q"), memoryview(v).cast("q"), pad


# ----------------------------------------------------------------------------- batch order
def order_events_py(magic: Any, base_offset: Any, last: Any, base: int, limit: int) -> tuple[bool, list[int]]:
    """``(first_below, back)``: whether the first batch (v2) starts below the segment's base offset,
    and the first ``limit`` batch numbers ``i`` such that batch ``i + 1``'s first offset (a legacy
    message's own offset) is not above batch ``i``'s last offset."""
    n = len(magic)
    below = n > 0 and magic[0] >= 2 and base_offset[0] < base
    back: list[int] = []
    for i in range(n - 1):
        if len(back) >= limit:
            break
        first = last[i + 1] if magic[i + 1] < 2 else base_offset[i + 1]
        if first <= last[i]:
            back.append(i)
    return bool(below), back


def order_events_numpy(magic: Any, base_offset: Any, last: Any, base: int, limit: int) -> tuple[bool, list[int]]:
    """:func:`order_events_py` vectorised."""
    import numpy as np

    magic, base_offset, last = (np.asarray(x) for x in (magic, base_offset, last))
    legacy = magic < 2
    firsts = np.where(legacy, last, base_offset)
    if not firsts.shape[0]:
        return False, []
    below = bool(firsts[0] < base and not legacy[0])
    return below, np.nonzero(firsts[1:] <= last[:-1])[0][:limit].tolist()


def order_events_native(magic: Any, base_offset: Any, last: Any, base: int, limit: int) -> tuple[bool, list[int]]:
    """:func:`order_events_py` in C."""
    below, back = _NAT.order_events(magic, base_offset, last, base, limit)
    return bool(below), back


# ----------------------------------------------------------------------------- offset index
def _batch_at(positions: Any, p: int) -> int:
    """The batch starting at ``p`` (positions strictly increase), −1 if none."""
    i = bisect_left(positions, p)
    return i if i < len(positions) and positions[i] == p else -1


def _lower_bound(a: Any, lo: int, hi: int, x: int) -> int:
    """Leftmost ``i`` in ``[lo, hi)`` with ``a[i] >= x`` by the plain binary search (numpy's
    ``searchsorted`` of one key: the same answer on an unsorted column)."""
    while lo < hi:
        mid = lo + ((hi - lo) >> 1)
        if a[mid] < x:
            lo = mid + 1
        else:
            hi = mid
    return lo


def offset_index_events_py(positions: Any, last: Any, keys: Any, vals: Any) -> list[tuple[int, int, int]]:
    """``[(slot, code, log offset)]`` of the ``.index`` entries ``(keys[s], vals[s])`` that are not
    the last offset of the batch at their position, each after the previous entry (codes ``OI_*``;
    the log offset is the last offset of the batch at the entry's position, 0 when none)."""
    n = len(positions)
    out = []
    for s in range(len(keys)):
        o, p = keys[s], vals[s]
        if s and (o <= keys[s - 1] or p < vals[s - 1]):
            out.append((s, OI_NOT_AFTER, 0))
            continue
        idx = _batch_at(positions, p)
        if idx < 0:
            out.append((s, OI_NOT_BATCH_START, 0))
        elif last[idx] != o:
            k = _lower_bound(last, idx, n, o)
            multi = k < n and last[k] == o and (k == idx or last[idx] < o)
            out.append((s, OI_MULTI_BATCH if multi else OI_MISMATCH, int(last[idx])))
    return out


def offset_index_events_numpy(positions: Any, last: Any, keys: Any, vals: Any) -> list[tuple[int, int, int]]:
    """:func:`offset_index_events_py`: the entries naming the last offset of the batch at their
    position, each after the previous one, judged in bulk; the others one by one."""
    import numpy as np

    pos, last, kk, vv = (np.asarray(x, np.int64) for x in (positions, last, keys, vals))
    n = pos.shape[0]
    at = np.searchsorted(pos, vv)
    at[at >= n] = 0
    here = pos[at] == vv if n else np.zeros(vv.shape[0], bool)
    bulk_ok = here & (last[at] == kk) if n else np.zeros(vv.shape[0], bool)
    bulk_ok[1:] &= (kk[1:] > kk[:-1]) & (vv[1:] >= vv[:-1])
    out = []
    for s in np.nonzero(~bulk_ok)[0].tolist():
        o, p = int(kk[s]), int(vv[s])
        if s and (o <= kk[s - 1] or p < vv[s - 1]):
            out.append((s, OI_NOT_AFTER, 0))
            continue
        if not here[s]:
            out.append((s, OI_NOT_BATCH_START, 0))
            continue
        idx = int(at[s])
        k = idx + int(np.searchsorted(last[idx:], o))
        multi = k < n and int(last[k]) == o and (k == idx or int(last[idx]) < o)
        out.append((s, OI_MULTI_BATCH if multi else OI_MISMATCH, int(last[idx])))
    return out


def offset_index_events_native(positions: Any, last: Any, keys: Any, vals: Any) -> list[tuple[int, int, int]]:
    """:func:`offset_index_events_py` in C."""
    return _NAT.offset_index_events(positions, last, keys, vals)


# ----------------------------------------------------------------------------- time index
def _index_search_py(col: Any, n: int, target: int, warm: int) -> int:
    from mqstore.kernels.kafka.index_search import index_search_py

    return index_search_py(col, n, target, warm, False)


def _decodable(magic: int, attrs: int, size: int, count: int, pos: int, file_end: int) -> bool:
    """Whether the record-timestamp loop takes the batch (else: TI_DECODE, the record codec's)."""
    return magic >= 2 and attrs & 7 == 0 and size >= 61 and 0 <= count <= size - 61 and 0 <= pos <= file_end - size


def _batch_max_ts_py(fd: int, file_end: int, pos: int, size: int, magic: int, attrs: int, count: int) -> int | None:
    """The largest record timestamp of an uncompressed v2 batch read from the file (−1 without
    records); None when :func:`_decodable` refuses it or the record codec rejects its records."""
    from mqstore.errors import CorruptDataError
    from mqstore.formats.kafka.batch import decode_batch_header, iter_records

    if not _decodable(magic, attrs, size, count, pos, file_end):
        return None
    data = os.pread(fd, size, pos)
    if len(data) != size:
        return None
    try:
        h = decode_batch_header(data, 0)
        return max((r.timestamp for r in iter_records(data, h)), default=-1)
    except CorruptDataError:
        return None


def time_index_events_py(fd: int, file_end: int, positions: Any, sizes: Any, last: Any, ok: Any, magic: Any,
                         attrs: Any, counts: Any, base_ts: Any, max_ts: Any, ts: Any, offs: Any, oi_keys: Any,
                         oi_vals: Any, warm: int) -> list[tuple[int, int, int, int, bool]]:
    """``[(slot, code, batch, log value, out of order)]`` of the ``.timeindex`` entries
    ``(ts[s], offs[s])`` that Kafka's ``dumpTimeIndex`` check would not pass silently (codes
    ``TI_*``).  The batch of an entry is Kafka's search: from the position the offset index
    (``oi_keys``/``oi_values``, searched with the warm-section split of ``warm`` entries unless
    its keys strictly increase) gives for the entry's offset, the first batch whose last offset is
    ≥ it (0 for an empty log).  ``ok``: the batches whose checksum verifies; ``base_ts``/``max_ts``
    are read by the C twin only (log-append-time batches)."""
    n = len(positions)
    no = len(oi_keys)
    keys_inc = all(oi_keys[i] > oi_keys[i - 1] for i in range(1, no))
    cache: dict[int, int | None] = {}
    out = []
    for s in range(len(ts)):
        t, o = ts[s], offs[s]
        k = 0
        if n:
            slot = bisect_right(oi_keys, o) - 1 if keys_inc else _index_search_py(oi_keys, no, o, warm)
            start = oi_vals[slot] if slot >= 0 else 0
            idx = max(_batch_at(positions, start), 0)
            k = _lower_bound(last, idx, n, o)
        code, value = TI_ORDER_ONLY, 0
        if k >= n or not ok[k]:
            code, value = TI_NOT_FOUND, -1
        elif last[k] != o:
            code, value = TI_OTHER_OFFSET, int(last[k])
        else:
            if k not in cache:
                cache[k] = _batch_max_ts_py(fd, file_end, positions[k], sizes[k], magic[k], attrs[k], counts[k])
            got = cache[k]
            if got is None:
                code = TI_DECODE
            elif got != t:
                code, value = TI_TS_MISMATCH, got
        ooo = s > 0 and ts[s - 1] >= t
        if code != TI_ORDER_ONLY or ooo:
            out.append((s, code, k, value, ooo))
    return out


def time_index_events_numpy(fd: int, file_end: int, positions: Any, sizes: Any, last: Any, ok: Any, magic: Any,
                            attrs: Any, counts: Any, base_ts: Any, max_ts: Any, ts: Any, offs: Any, oi_keys: Any,
                            oi_vals: Any, warm: int) -> list[tuple[int, int, int, int, bool]]:
    """:func:`time_index_events_py` vectorised: the batches of the entries in bulk when the index
    keys and the last offsets increase (the searches then agree with ``searchsorted``), their
    timestamps through the compiled record parser (many batches a call)."""
    import numpy as np

    from mqstore.kernels.kafka.records import OK, parse_bodies

    pos, last, ks, vs, ts, offs = (np.asarray(x, np.int64) for x in (positions, last, oi_keys, oi_vals, ts, offs))
    size = np.asarray(sizes, np.int64)
    okb = np.asarray(ok).astype(bool)
    magic, attrs, counts = np.asarray(magic), np.asarray(attrs, np.int64), np.asarray(counts, np.int64)
    n, m = pos.shape[0], ts.shape[0]
    # the batch of every entry
    if n == 0:
        found = np.zeros(m, np.int64)
    else:
        keys_inc = bool(ks.shape[0] < 2 or np.all(ks[1:] > ks[:-1]))
        if keys_inc and bool(n < 2 or np.all(last[1:] >= last[:-1])):
            j = np.searchsorted(ks, offs, side="right") - 1
            start = np.where(j >= 0, vs[np.maximum(j, 0)] if vs.shape[0] else 0, 0)
            at = np.searchsorted(pos, start)
            at[at >= n] = 0
            at[pos[at] != start] = 0
            found = np.maximum(at, np.searchsorted(last, offs)).astype(np.int64)
        else:
            found = np.empty(m, np.int64)
            for s in range(m):
                o = int(offs[s])
                slot = bisect_right(ks, o) - 1 if keys_inc else _index_search_py(ks, ks.shape[0], o, warm)
                start = int(vs[slot]) if slot >= 0 else 0
                idx = max(_batch_at(pos, start), 0)
                found[s] = idx + int(np.searchsorted(last[idx:], o))
    inside = found < n
    fk = np.where(inside, found, 0)
    checked = inside & okb[fk] & (last[fk] == offs) if n else np.zeros(m, bool)
    # the largest record timestamp of each batch checked (−2: for the record codec)
    batch_ts = np.full(m, -2, np.int64)
    cs = np.nonzero(checked)[0]
    if cs.shape[0]:
        kk = np.unique(found[cs])
        good = ((magic[kk] >= 2) & ((attrs[kk] & 7) == 0) & (size[kk] >= 61) & (counts[kk] >= 0)
                & (counts[kk] <= size[kk] - 61) & (pos[kk] >= 0) & (pos[kk] + size[kk] <= file_end))  # fmt: skip
        kk = kk[good]
        per_batch: dict[int, int] = {}
        groups = [kk[c : c + 4096] for c in range(0, kk.shape[0], 4096)]
        while groups:
            g = groups.pop()
            pieces = [os.pread(fd, int(sz), int(p)) for p, sz in zip(pos[g], size[g], strict=True)]
            if any(len(x) != int(sz) for x, sz in zip(pieces, size[g], strict=True)):
                continue  # (a file that shrank: the record codec says why)
            buf = np.frombuffer(b"".join(pieces), np.uint8)
            starts = np.concatenate([[0], np.cumsum(size[g])[:-1]]).astype(np.int64)
            res = parse_bodies(buf, starts + 61, starts + size[g], counts[g], np.zeros(g.shape[0], np.int64),
                               np.asarray(base_ts, np.int64)[g], np.asarray(max_ts, np.int64)[g], (attrs[g] & 8) != 0,
                               -(1 << 63), (1 << 63) - 1)
            if res["error"] != OK:
                if g.shape[0] > 1:  # find the batches the parser rejects
                    groups += [g[: g.shape[0] // 2], g[g.shape[0] // 2 :]]
                continue
            got = np.full(g.shape[0], -1, np.int64)
            if res["timestamp"].shape[0]:
                np.maximum.at(got, res["batch"], res["timestamp"])
            per_batch.update(zip(g.tolist(), got.tolist(), strict=True))
        if per_batch:
            batch_ts[cs] = [per_batch.get(int(k), -2) for k in found[cs]]
    fine = checked & (batch_ts == ts)
    fine[1:] &= ts[:-1] < ts[1:]
    out = []
    for s in np.nonzero(~fine)[0].tolist():
        t, o, k = int(ts[s]), int(offs[s]), int(found[s])
        code, value = TI_ORDER_ONLY, 0
        if k >= n or not okb[k]:
            code, value = TI_NOT_FOUND, -1
        elif int(last[k]) != o:
            code, value = TI_OTHER_OFFSET, int(last[k])
        elif batch_ts[s] == -2:
            code = TI_DECODE
        elif int(batch_ts[s]) != t:
            code, value = TI_TS_MISMATCH, int(batch_ts[s])
        ooo = s > 0 and int(ts[s - 1]) >= t
        if code != TI_ORDER_ONLY or ooo:
            out.append((s, code, k, value, ooo))
    return out


def time_index_events_native(fd: int, file_end: int, positions: Any, sizes: Any, last: Any, ok: Any, magic: Any,
                             attrs: Any, counts: Any, base_ts: Any, max_ts: Any, ts: Any, offs: Any, oi_keys: Any,
                             oi_vals: Any, warm: int) -> list[tuple[int, int, int, int, bool]]:
    """:func:`time_index_events_py` in C (batches read with ``pread``)."""
    return _NAT.time_index_events(fd, file_end, positions, sizes, last, ok, magic, attrs, counts, base_ts, max_ts,
                                  ts, offs, oi_keys, oi_vals, warm)


index_columns = index_columns_native if _NAT is not None else index_columns_numpy
order_events = order_events_native if _NAT is not None else order_events_numpy
offset_index_events = offset_index_events_native if _NAT is not None else offset_index_events_numpy
time_index_events = time_index_events_native if _NAT is not None else time_index_events_numpy

register("kafka.index_columns", index_columns_numpy, index_columns_py,
         native=index_columns_native if _NAT is not None else None)
register("kafka.order_events", order_events_numpy, order_events_py,
         native=order_events_native if _NAT is not None else None)
register("kafka.offset_index_events", offset_index_events_numpy, offset_index_events_py,
         native=offset_index_events_native if _NAT is not None else None)
register("kafka.time_index_events", time_index_events_numpy, time_index_events_py,
         native=time_index_events_native if _NAT is not None else None)
