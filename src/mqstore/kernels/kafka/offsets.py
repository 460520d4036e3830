"""Hot loops of the offline ``__consumer_offsets`` replay, each with a pure-Python twin (suffix
``_py``) that gives identical answers (the tests compare them on the same inputs).

* :func:`record_spans` – the key / value byte spans of every record of many v2 record bodies
  (the framing of spec §2.3: zig-zag varint length, attributes, timestamp delta, offset delta,
  key, value, headers);
* :func:`parse_offset_commits` – for every record, whether it is an offset commit (key version
  0/1) and its fields: group / topic spans, partition, value version, offset, leader epoch, commit
  timestamp, metadata span, tombstone, and a 128-bit hash (two FNV-1a variants) of the key
  (group, topic, partition) so the last commit per key is found with numpy;
* :func:`transaction_fate` – which records of transactional batches are committed (the next
  end-transaction marker of the same producer, later in the log, is a COMMIT).
"""

from __future__ import annotations

from typing import Any

import numpy as np
from numba import njit

from mqstore.kernels.registry import register

# kinds of parse_offset_commits
KIND_COMMIT = 0
KIND_TOMBSTONE = 1
KIND_OTHER = 2  # another record type (group metadata, KIP-848 records, unknown): decoded by the caller
KIND_BAD = 3  # an offset-commit key or value that does not parse (or an unknown value version)

_FNV_OFFSET = 0xCBF29CE484222325
_FNV_PRIME = 0x100000001B3
_ALT_OFFSET = 0x84222325CBF29CE4
_ALT_PRIME = 0x1000193 * 0x100000001B3 & 0xFFFFFFFFFFFFFFFF
_M64 = 0xFFFFFFFFFFFFFFFF


# ----------------------------------------------------------------------------- compiled
@njit(cache=True, inline="always")
def _varint(a, p, end):
    """Zig-zag varint (≤ 10 bytes) at p: (value, next) or (0, -1) when malformed / truncated."""
    u = np.uint64(0)
    shift = np.uint64(0)
    for i in range(10):
        if p + i >= end:
            return np.int64(0), np.int64(-1)
        b = np.uint64(a[p + i])
        u |= (b & np.uint64(0x7F)) << shift
        if b < np.uint64(0x80):
            v = np.int64(u >> np.uint64(1)) ^ -np.int64(u & np.uint64(1))
            return v, np.int64(p + i + 1)
        shift += np.uint64(7)
    return np.int64(0), np.int64(-1)


@njit(cache=True)
def _record_spans(a, body_start, body_end, counts, key_start, key_len, val_start, val_len, batch_idx, delta, ok):
    n = 0
    for b in range(body_start.shape[0]):
        p = body_start[b]
        end = body_end[b]
        first = n
        good = True
        for _r in range(counts[b]):
            length, q = _varint(a, p, end)
            if q < 0 or length < 0 or q + length > end:
                good = False
                break
            rend = q + length
            q += 1  # attributes
            _ts, q = _varint(a, q, rend)
            if q < 0:
                good = False
                break
            od, q = _varint(a, q, rend)
            if q < 0:
                good = False
                break
            kl, q = _varint(a, q, rend)
            if q < 0 or kl < -1 or q + max(kl, 0) > rend:
                good = False
                break
            ks = q
            q += max(kl, 0)
            vl, q = _varint(a, q, rend)
            if q < 0 or vl < -1 or q + max(vl, 0) > rend:
                good = False
                break
            key_start[n] = ks
            key_len[n] = kl
            val_start[n] = q
            val_len[n] = vl
            batch_idx[n] = b
            delta[n] = od
            n += 1
            p = rend
        if not good:
            n = first  # drop the batch's records: the caller decodes it the slow way and reports
        ok[b] = good
    return n


@njit(cache=True, inline="always")
def _hashes(a, s, e):
    h1 = np.uint64(_FNV_OFFSET)
    h2 = np.uint64(_ALT_OFFSET)
    for i in range(s, e):
        h1 = (h1 ^ np.uint64(a[i])) * np.uint64(_FNV_PRIME)
        h2 = (h2 ^ np.uint64(a[i])) * np.uint64(_ALT_PRIME)
    return h1, h2


@njit(cache=True, inline="always")
def _be(a, p, n):
    v = np.uint64(0)
    for i in range(n):
        v = (v << np.uint64(8)) | np.uint64(a[p + i])
    return v


@njit(cache=True, inline="always")
def _sbe(a, p, n):
    v = _be(a, p, n)
    if n < 8 and v >= np.uint64(1) << np.uint64(8 * n - 1):
        return np.int64(v) - (np.int64(1) << np.int64(8 * n))
    return np.int64(v)


@njit(cache=True, inline="always")
def _uvarint(a, p, end):
    u = np.int64(0)
    for i in range(5):
        if p + i >= end:
            return np.int64(-1), np.int64(-1)
        b = np.int64(a[p + i])
        u |= (b & 0x7F) << (7 * i)
        if b < 0x80:
            return u, np.int64(p + i + 1)
    return np.int64(-1), np.int64(-1)


@njit(cache=True)
def _parse_commits(a, key_start, key_len, val_start, val_len, kind, h1, h2, partition, vversion, offset,
                   leader_epoch, commit_ts, group_s, group_l, topic_s, topic_l, meta_s, meta_l):
    for i in range(key_start.shape[0]):
        ks = key_start[i]
        kl = key_len[i]
        kind[i] = KIND_OTHER
        if kl < 2:
            continue
        kv = _sbe(a, ks, 2)
        if kv != 0 and kv != 1:
            continue
        ke = ks + kl
        p = ks + 2
        kind[i] = KIND_BAD
        if p + 2 > ke:
            continue
        gl = _sbe(a, p, 2)
        if gl < 0 or p + 2 + gl + 2 > ke:
            continue
        group_s[i] = p + 2
        group_l[i] = gl
        p += 2 + gl
        tl = _sbe(a, p, 2)
        if tl < 0 or p + 2 + tl + 4 != ke:
            continue
        topic_s[i] = p + 2
        topic_l[i] = tl
        p += 2 + tl
        partition[i] = _sbe(a, p, 4)
        x1, x2 = _hashes(a, ks + 2, ke)
        h1[i] = x1
        h2[i] = x2
        vl = val_len[i]
        if vl < 0:
            kind[i] = KIND_TOMBSTONE
            continue
        vs = val_start[i]
        ve = vs + vl
        if vl < 2:
            continue
        vv = _sbe(a, vs, 2)
        vversion[i] = vv
        q = vs + 2
        if vv < 0 or vv > 4 or q + 8 > ve:
            continue
        offset[i] = _sbe(a, q, 8)
        q += 8
        leader_epoch[i] = -1
        if vv >= 3:
            if q + 4 > ve:
                continue
            leader_epoch[i] = _sbe(a, q, 4)
            q += 4
        if vv >= 4:
            ml, q = _uvarint(a, q, ve)
            ml -= 1
        else:
            if q + 2 > ve:
                continue
            ml = _sbe(a, q, 2)
            q += 2
        if q < 0 or ml < 0 or q + ml + 8 > ve:
            continue
        meta_s[i] = q
        meta_l[i] = ml
        q += ml
        commit_ts[i] = _sbe(a, q, 8)
        q += 8
        if vv == 1:
            if q + 8 > ve:
                continue
            q += 8  # expire timestamp
        if vv >= 4:
            cnt, q = _uvarint(a, q, ve)
            good = q >= 0
            for _t in range(max(cnt, 0)):
                if not good:
                    break
                _tag, q = _uvarint(a, q, ve)
                if q < 0:
                    good = False
                    break
                sz, q = _uvarint(a, q, ve)
                if q < 0 or q + sz > ve:
                    good = False
                    break
                q += sz
            if not good:
                continue
        if q != ve:
            continue
        kind[i] = KIND_COMMIT


@njit(cache=True)
def _txn_fate(pid, is_txn, is_marker, marker_commit, n_pids, fate):
    state = np.zeros(n_pids, np.int8)  # 0 no marker after, 1 commit, 2 abort
    for i in range(pid.shape[0] - 1, -1, -1):
        if is_marker[i]:
            state[pid[i]] = 1 if marker_commit[i] else 2
            fate[i] = False
        elif is_txn[i]:
            fate[i] = state[pid[i]] == 1
        else:
            fate[i] = True


# ----------------------------------------------------------------------------- public wrappers
def _u8(buf: Any) -> np.ndarray:
    return buf if isinstance(buf, np.ndarray) else np.frombuffer(buf, dtype=np.uint8)


def record_spans(buf: Any, body_start: np.ndarray, body_end: np.ndarray, counts: np.ndarray) -> dict[str, Any]:
    """Key / value spans of the records of v2 record bodies ``buf[body_start[b]:body_end[b]]``
    holding ``counts[b]`` records each.  Returns ``key_start, key_len, val_start, val_len``
    (length −1 = null), ``batch`` (index of the body), ``offset_delta`` and ``ok`` per body (False: malformed
    records; none of that body's records are returned)."""
    a = _u8(buf)
    total = int(np.sum(counts)) if counts.shape[0] else 0
    ks, kl, vs, vl = (np.zeros(total, np.int64) for _ in range(4))
    bi = np.zeros(total, np.int64)
    od = np.zeros(total, np.int64)
    ok = np.zeros(body_start.shape[0], np.bool_)
    n = _record_spans(a, body_start.astype(np.int64), body_end.astype(np.int64), counts.astype(np.int64),
                      ks, kl, vs, vl, bi, od, ok)
    return {"key_start": ks[:n], "key_len": kl[:n], "val_start": vs[:n], "val_len": vl[:n], "batch": bi[:n],
            "offset_delta": od[:n], "ok": ok}


_COMMIT_FIELDS = (("kind", np.int8), ("h1", np.uint64), ("h2", np.uint64), ("partition", np.int32),
                  ("value_version", np.int16), ("offset", np.int64), ("leader_epoch", np.int32),
                  ("commit_timestamp", np.int64), ("group_start", np.int64), ("group_len", np.int64),
                  ("topic_start", np.int64), ("topic_len", np.int64), ("meta_start", np.int64),
                  ("meta_len", np.int64))


def parse_offset_commits(buf: Any, key_start: np.ndarray, key_len: np.ndarray, val_start: np.ndarray,
                         val_len: np.ndarray) -> dict[str, np.ndarray]:
    """Offset-commit fields of every record (see the module doc); ``kind`` is KIND_COMMIT,
    KIND_TOMBSTONE, KIND_OTHER or KIND_BAD."""
    n = key_start.shape[0]
    cols = {name: np.zeros(n, dt) for name, dt in _COMMIT_FIELDS}
    _parse_commits(_u8(buf), key_start, key_len, val_start, val_len, *(cols[name] for name, _ in _COMMIT_FIELDS))
    return cols


def transaction_fate(producer_id: np.ndarray, is_txn: np.ndarray, is_marker: np.ndarray,
                     marker_commit: np.ndarray) -> np.ndarray:
    """Per record (in log order): True for a non-transactional data record or one whose
    producer's next marker is a COMMIT; False for markers, aborted and still-open transactions."""
    uniq, pid = np.unique(producer_id, return_inverse=True)
    fate = np.zeros(producer_id.shape[0], np.bool_)
    _txn_fate(pid.astype(np.int64), is_txn, is_marker, marker_commit, max(uniq.shape[0], 1), fate)
    return fate


# ----------------------------------------------------------------------------- pure-Python twins
def _varint_py(a: Any, p: int, end: int) -> tuple[int, int]:
    u = 0
    for i in range(10):
        if p + i >= end:
            return 0, -1
        b = int(a[p + i])
        u |= (b & 0x7F) << (7 * i)
        if b < 0x80:
            u &= _M64
            v = (u >> 1) ^ -(u & 1)
            return v, p + i + 1
    return 0, -1


def record_spans_py(buf: Any, body_start: np.ndarray, body_end: np.ndarray, counts: np.ndarray) -> dict[str, Any]:
    a = bytes(_u8(buf))
    names = ("key_start", "key_len", "val_start", "val_len", "batch", "offset_delta")
    out: dict[str, list[int]] = {k: [] for k in names}
    ok = []
    for b in range(len(body_start)):
        p, end = int(body_start[b]), int(body_end[b])
        rows = []
        good = True
        for _ in range(int(counts[b])):
            length, q = _varint_py(a, p, end)
            if q < 0 or length < 0 or q + length > end:
                good = False
                break
            rend = q + length
            q += 1
            _ts, q = _varint_py(a, q, rend)
            if q < 0:
                good = False
                break
            od, q = _varint_py(a, q, rend)
            if q < 0:
                good = False
                break
            kl, q = _varint_py(a, q, rend)
            if q < 0 or kl < -1 or q + max(kl, 0) > rend:
                good = False
                break
            ks = q
            q += max(kl, 0)
            vl, q = _varint_py(a, q, rend)
            if q < 0 or vl < -1 or q + max(vl, 0) > rend:
                good = False
                break
            rows.append((ks, kl, q, vl, b, od))
            p = rend
        ok.append(good)
        if good:
            for r in rows:
                for k, v in zip(names, r, strict=True):
                    out[k].append(v)
    res: dict[str, Any] = {k: np.array(v, np.int64) for k, v in out.items()}
    res["ok"] = np.array(ok, np.bool_)
    return res


def _fnv_py(data: bytes, offset: int, prime: int) -> int:
    h = offset
    for x in data:
        h = ((h ^ x) * prime) & _M64
    return h


def parse_offset_commits_py(buf: Any, key_start: np.ndarray, key_len: np.ndarray, val_start: np.ndarray,
                            val_len: np.ndarray) -> dict[str, np.ndarray]:
    a = bytes(_u8(buf))
    n = len(key_start)
    cols = {name: np.zeros(n, dt) for name, dt in _COMMIT_FIELDS}

    def s(p: int, k: int) -> int:
        return int.from_bytes(a[p:p + k], "big", signed=True)

    def uv(p: int, end: int) -> tuple[int, int]:
        u = 0
        for i in range(5):
            if p + i >= end:
                return -1, -1
            b = a[p + i]
            u |= (b & 0x7F) << (7 * i)
            if b < 0x80:
                return u, p + i + 1
        return -1, -1

    for i in range(n):
        ks, kl = int(key_start[i]), int(key_len[i])
        cols["kind"][i] = KIND_OTHER
        if kl < 2 or s(ks, 2) not in (0, 1):
            continue
        ke, p = ks + kl, ks + 2
        cols["kind"][i] = KIND_BAD
        if p + 2 > ke:
            continue
        gl = s(p, 2)
        if gl < 0 or p + 2 + gl + 2 > ke:
            continue
        cols["group_start"][i], cols["group_len"][i] = p + 2, gl
        p += 2 + gl
        tl = s(p, 2)
        if tl < 0 or p + 2 + tl + 4 != ke:
            continue
        cols["topic_start"][i], cols["topic_len"][i] = p + 2, tl
        p += 2 + tl
        cols["partition"][i] = s(p, 4)
        payload = a[ks + 2:ke]
        cols["h1"][i] = _fnv_py(payload, _FNV_OFFSET, _FNV_PRIME)
        cols["h2"][i] = _fnv_py(payload, _ALT_OFFSET, _ALT_PRIME)
        vl = int(val_len[i])
        if vl < 0:
            cols["kind"][i] = KIND_TOMBSTONE
            continue
        vs = int(val_start[i])
        ve = vs + vl
        if vl < 2:
            continue
        vv = s(vs, 2)
        cols["value_version"][i] = vv
        q = vs + 2
        if not 0 <= vv <= 4 or q + 8 > ve:
            continue
        cols["offset"][i] = s(q, 8)
        q += 8
        cols["leader_epoch"][i] = -1
        if vv >= 3:
            if q + 4 > ve:
                continue
            cols["leader_epoch"][i] = s(q, 4)
            q += 4
        if vv >= 4:
            ml, q = uv(q, ve)
            ml -= 1
        else:
            if q + 2 > ve:
                continue
            ml = s(q, 2)
            q += 2
        if q < 0 or ml < 0 or q + ml + 8 > ve:
            continue
        cols["meta_start"][i], cols["meta_len"][i] = q, ml
        q += ml
        cols["commit_timestamp"][i] = s(q, 8)
        q += 8
        if vv == 1:
            if q + 8 > ve:
                continue
            q += 8
        if vv >= 4:
            cnt, q = uv(q, ve)
            good = q >= 0
            for _t in range(max(cnt, 0)):
                if not good:
                    break
                _tag, q = uv(q, ve)
                if q < 0:
                    good = False
                    break
                sz, q = uv(q, ve)
                if q < 0 or q + sz > ve:
                    good = False
                    break
                q += sz
            if not good:
                continue
        if q != ve:
            continue
        cols["kind"][i] = KIND_COMMIT
    return cols


def transaction_fate_py(producer_id: np.ndarray, is_txn: np.ndarray, is_marker: np.ndarray,
                        marker_commit: np.ndarray) -> np.ndarray:
    state: dict[int, int] = {}
    fate = np.zeros(len(producer_id), np.bool_)
    for i in range(len(producer_id) - 1, -1, -1):
        pid = int(producer_id[i])
        if is_marker[i]:
            state[pid] = 1 if marker_commit[i] else 2
        elif is_txn[i]:
            fate[i] = state.get(pid, 0) == 1
        else:
            fate[i] = True
    return fate


register("kafka.record_spans", record_spans, record_spans_py)
register("kafka.parse_offset_commits", parse_offset_commits, parse_offset_commits_py)
register("kafka.transaction_fate", transaction_fate, transaction_fate_py)
