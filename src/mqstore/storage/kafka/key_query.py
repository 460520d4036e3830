"""Exact key lookups over the segments of a Kafka partition, through their key indexes.

The key index (:mod:`mqstore.storage.kafka.keyindex`) gives candidate locations per key hash in
one compiled chain walk; the candidates are then checked on the records themselves (one decode
per batch touched): a hash collision, a record outside the time window or an item of the indexed
header (for a key query) is dropped, so the answer is exact.  A segment without a key index (or
whose index does not cover the header asked for) is scanned: its entries are computed from the
``.log`` with the same compiled path a rebuild uses, then checked the same way.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from mqstore.errors import CorruptDataError, CorruptIndexError, CrcMismatchError, InvalidArgumentError
from mqstore.formats.kafka.batch import RECORD_BATCH_OVERHEAD, Record
from mqstore.formats.kafka.keyindex import check_header_name
from mqstore.kernels.kafka.batches import check_crcs
from mqstore.kernels.kafka.records import ERR_UNSUPPORTED, ERROR_MESSAGES, OK, batch_bodies, parse_bodies
from mqstore.storage.kafka.keyindex import key_hashes, log_entries
from mqstore.storage.kafka.segment import LogSegment
from mqstore.storage.mapped import ReadOnlyMap

HEADER_SIZE = RECORD_BATCH_OVERHEAD  # a v2 batch header (61 bytes)


@dataclass(frozen=True, slots=True)
class KeyMatch:
    """One record found: its offset, timestamp, segment and batch position."""

    offset: int
    timestamp: int
    segment: int
    position: int


@dataclass
class KeyQueryStats:
    """How a lookup was answered."""

    indexed_segments: int = 0
    scanned_segments: list[int] = field(default_factory=list)  # base offsets scanned (no usable key index)
    skipped_segments: int = 0  # left out by the time window
    candidates: int = 0
    batches_read: int = 0


def normalize_keys(keys: Sequence[bytes | str]) -> list[bytes]:
    out = []
    for k in keys:
        if isinstance(k, str):
            out.append(k.encode("utf-8", "surrogatepass"))
        elif isinstance(k, bytes | bytearray | memoryview):
            out.append(bytes(k))
        else:
            raise InvalidArgumentError(f"a key is bytes or str, got {type(k).__name__}")
    return out


def check_window(start_ts: int | None, end_ts: int | None) -> tuple[int, int]:
    lo = -(1 << 63) if start_ts is None else int(start_ts)
    hi = (1 << 63) - 1 if end_ts is None else int(end_ts)
    if lo > hi:
        raise InvalidArgumentError(f"start timestamp {lo} is after end timestamp {hi}")
    return lo, hi


def _matches(r: Record, key: bytes, header: str | None) -> bool:
    if header is None:
        return r.key is not None and bytes(r.key) == key
    return any(h.key == header and h.value is not None and bytes(h.value) == key for h in r.headers)


def _scan_candidates(seg: LogSegment, hashes: np.ndarray, header: str | None) -> tuple[np.ndarray, np.ndarray]:
    """Candidates of a segment without a usable key index, from its entries computed off the log."""
    entries, _ = log_entries(seg.log_path, header_name=header, valid_bytes=seg.size)
    order = np.argsort(hashes, kind="stable")
    sh = hashes[order]
    lo = np.searchsorted(sh, entries.key_hash, side="left")
    hi = np.searchsorted(sh, entries.key_hash, side="right")
    hit = np.nonzero(hi > lo)[0]
    per_key: list[list[int]] = [[] for _ in range(len(hashes))]
    for e in hit.tolist():
        for j in range(int(lo[e]), int(hi[e])):
            per_key[int(order[j])].append(int(entries.location[e]))
    splits = np.zeros(len(hashes) + 1, np.int64)
    np.cumsum([len(x) for x in per_key], out=splits[1:])
    locs = np.array([loc for x in per_key for loc in x], np.int64)
    return locs, splits


def _check_compiled(seg: LogSegment, cand_k: np.ndarray, cand_loc: np.ndarray, kb: list[bytes], header: str | None,
                    lo: int, hi: int, stats: KeyQueryStats) -> list[tuple[int, KeyMatch]] | None:
    """The candidates checked through the compiled record parser: each batch touched read once,
    CRC-checked, its records parsed to positions, keys compared on the bytes.  ``None`` when a
    batch needs the generic decoder (legacy magic, a 10-byte varlong)."""
    positions = np.unique(cand_loc & 0xFFFFFFFF)
    where = str(seg.key_index_path)
    size = seg.size
    with ReadOnlyMap(seg.log_path, what="segment log file", size=size) as m:
        arr = m.array
        if arr.shape[0] < size:
            return None  # the file shrank under this reader
        heads = positions[:, None] + np.arange(HEADER_SIZE)[None, :]
        if positions.shape[0] and int(positions[-1]) + HEADER_SIZE > size:
            bad = int(positions[np.nonzero(positions + HEADER_SIZE > size)[0][0]])
            raise CorruptIndexError(f"key index names position {bad}, where no batch starts", path=where,
                                    offset=bad)
        h = arr[heads]
        if (h[:, 16] != 2).any():
            return None  # a legacy message set: the generic decoder
        scan = _header_columns(h, positions)
        if (scan["size"] < HEADER_SIZE).any() or (positions + scan["size"] > size).any():
            bad = int(positions[np.nonzero((scan["size"] < HEADER_SIZE) | (positions + scan["size"] > size))[0][0]])
            raise CorruptIndexError(f"key index names position {bad}, where no whole batch starts", path=where,
                                    offset=bad)
        stats.batches_read += len(positions)
        ok = check_crcs(arr, scan)
        if not ok.all():
            i = int(np.nonzero(~ok)[0][0])
            raise CrcMismatchError("record batch fails its size/CRC check", path=str(seg.log_path),
                                   offset=int(positions[i]))
        kept = np.arange(len(positions))
        if (scan["attributes"] & 0x07).any():
            bodies, bstart, bend = batch_bodies(arr, scan, kept, path=str(seg.log_path))
        else:  # uncompressed: the record bodies are parsed in place, in the map
            bodies, bstart, bend = arr, positions + HEADER_SIZE, positions + scan["size"]
        return _check_parsed(seg, bodies, bstart, bend, scan, positions, cand_k, cand_loc, kb, header, lo, hi,
                             stats)


def _header_columns(h: np.ndarray, positions: np.ndarray) -> dict[str, Any]:
    """The scan columns of v2 batch headers (rows of 61 bytes)."""
    def be(a: int, n: int, signed: bool = True) -> np.ndarray:
        v = np.zeros(h.shape[0], np.int64)
        for i in range(n):
            v = (v << 8) | h[:, a + i].astype(np.int64)
        if signed and n < 8:
            top = np.int64(1) << (8 * n - 1)
            v = np.where(v >= top, v - (top << 1), v)
        return v

    return {"position": positions.astype(np.int64), "size": be(8, 4) + 12, "magic": h[:, 16].astype(np.int64),
            "crc": be(17, 4, False), "attributes": be(21, 2), "base_offset": be(0, 8),
            "base_timestamp": be(27, 8), "max_timestamp": be(35, 8), "record_count": be(57, 4),
            "count": int(h.shape[0])}


def _check_parsed(seg: LogSegment, bodies: np.ndarray, bstart: np.ndarray, bend: np.ndarray, scan: dict[str, Any],
                  positions: np.ndarray, cand_k: np.ndarray, cand_loc: np.ndarray, kb: list[bytes],
                  header: str | None, lo: int, hi: int, stats: KeyQueryStats) -> list[tuple[int, KeyMatch]] | None:
    base = seg.base_offset
    where = str(seg.key_index_path)
    logappend = (scan["attributes"] & 0x08) != 0
    res = parse_bodies(bodies, bstart, bend, scan["record_count"], scan["base_offset"], scan["base_timestamp"],
                       scan["max_timestamp"], logappend, -(1 << 63), (1 << 63) - 1)
    if res["error"] == ERR_UNSUPPORTED:
        return None
    if res["error"] != OK:
        raise CorruptDataError(ERROR_MESSAGES[res["error"]], path=str(seg.log_path),
                               offset=int(positions[res["error_batch"]]))
    offs = res["offset"]
    order = np.argsort(offs, kind="stable")
    want = base + (cand_loc >> 32)
    if len(order) == 0:
        raise CorruptIndexError(f"key index names offset {int(want[0])} in a batch without records", path=where)
    j = np.minimum(np.searchsorted(offs[order], want), len(order) - 1)
    bad = np.nonzero(offs[order[j]] != want)[0]
    if bad.shape[0]:
        c = int(bad[0])
        raise CorruptIndexError(f"key index names offset {int(want[c])} in the batch at position "
                                f"{int(cand_loc[c]) & 0xFFFFFFFF}, which does not hold it", path=where)
    stats.candidates += len(cand_loc)
    r = order[j]
    ts = res["timestamp"][r]
    keep = (ts >= lo) & (ts <= hi)
    if header is None:
        qlen = np.fromiter((len(q) for q in kb), np.int64, len(kb))
        qstart = np.cumsum(qlen) - qlen
        qbuf = np.frombuffer(b"".join(kb) + b"\0", np.uint8)
        klen = res["key_len"][r]
        keep &= klen == qlen[cand_k]
        for n in np.unique(klen[keep]).tolist():  # compare the bytes, one key length at a time
            sel = np.nonzero(keep & (klen == n))[0]
            if n == 0 or sel.shape[0] == 0:
                continue
            span = np.arange(n)
            a = bodies[res["key_start"][r[sel]][:, None] + span]
            b = qbuf[qstart[cand_k[sel]][:, None] + span]
            keep[sel] = (a == b).all(axis=1)
    else:
        name = header.encode("utf-8")
        for c in np.nonzero(keep)[0].tolist():
            q = kb[int(cand_k[c])]
            rr = int(r[c])
            hit = False
            for x in range(int(res["header_first"][rr]), int(res["header_first"][rr + 1])):
                ks, kn = int(res["hkey_start"][x]), int(res["hkey_len"][x])
                vs, vn = int(res["hvalue_start"][x]), int(res["hvalue_len"][x])
                if (kn == len(name) and vn == len(q) and bodies[ks : ks + kn].tobytes() == name
                        and bodies[vs : vs + vn].tobytes() == q):
                    hit = True
                    break
            keep[c] = hit
    sel = np.nonzero(keep)[0]
    if sel.shape[0] == 0:
        return []
    o = np.lexsort((want[sel], cand_k[sel]))  # (key, offset) once each
    idx = sel[o]
    first = np.ones(idx.shape[0], bool)
    first[1:] = (cand_k[idx[1:]] != cand_k[idx[:-1]]) | (want[idx[1:]] != want[idx[:-1]])
    idx = idx[first]
    pos = (cand_loc[idx] & 0xFFFFFFFF).tolist()
    return [(k, KeyMatch(off, t, base, p))
            for k, off, t, p in zip(cand_k[idx].tolist(), want[idx].tolist(), ts[idx].tolist(), pos, strict=True)]


class _BatchCache:
    """Records of the batches a lookup touches, decoded once each."""

    def __init__(self, seg: LogSegment, stats: KeyQueryStats) -> None:
        self.seg = seg
        self.stats = stats
        self._recs: dict[int, dict[int, Record]] = {}

    def record(self, position: int, offset: int) -> Record | None:
        recs = self._recs.get(position)
        if recs is None:
            seg = self.seg
            ref = next(seg.batches(position), None)
            if ref is None:
                raise CorruptIndexError(f"key index names position {position}, where no batch starts",
                                        path=str(seg.key_index_path), offset=position)
            decoded, _ = seg.records_of(ref)
            recs = {r.offset: r for r in decoded}
            self._recs[position] = recs
            self.stats.batches_read += 1
        return recs.get(offset)


def _check_generic(seg: LogSegment, cand_k: np.ndarray, cand_loc: np.ndarray, kb: list[bytes], header: str | None,
                   lo: int, hi: int, stats: KeyQueryStats) -> list[tuple[int, KeyMatch]]:
    """The candidates checked on records decoded by the generic decoder (any magic)."""
    cache = _BatchCache(seg, stats)
    base = seg.base_offset
    out: list[tuple[int, KeyMatch]] = []
    seen: set[tuple[int, int]] = set()
    for k, loc in zip(cand_k.tolist(), cand_loc.tolist(), strict=True):
        stats.candidates += 1
        pos = loc & 0xFFFFFFFF
        off = base + (loc >> 32)
        if (k, off) in seen:
            continue
        r = cache.record(pos, off)
        if r is None:
            raise CorruptIndexError(f"key index names offset {off} in the batch at position {pos}, "
                                    "which does not hold it", path=str(seg.key_index_path), offset=pos)
        if lo <= r.timestamp <= hi and _matches(r, kb[k], header):
            seen.add((k, off))
            out.append((k, KeyMatch(off, r.timestamp, base, pos)))
    return out


def query_segments(segments: Sequence[LogSegment], keys: Sequence[bytes | str], start_ts: int | None = None,
                   end_ts: int | None = None, *, header: str | None = None,
                   use_index: bool = True) -> tuple[list[list[KeyMatch]], KeyQueryStats]:
    """Every record of ``segments`` whose key (or, with ``header``, a value of that header)
    equals one of ``keys`` and whose timestamp lies in ``[start_ts, end_ts]``: per key, the
    matches by offset.  ``use_index=False`` scans every segment (the reference)."""
    check_header_name(header)
    kb = normalize_keys(keys)
    lo, hi = check_window(start_ts, end_ts)
    stats = KeyQueryStats()
    out: list[list[KeyMatch]] = [[] for _ in kb]
    if not kb:
        return out, stats
    texts = kb if header is None else [header.encode("utf-8") + b"#" + k for k in kb]
    hashes = key_hashes(texts)
    for seg in segments:
        if seg.size == 0:
            continue
        if start_ts is not None and seg.max_timestamp_so_far < lo:
            stats.skipped_segments += 1
            continue
        found: Any = seg.key_lookup(hashes) if use_index else None
        if found is not None and (header is None or found[2] == header):
            locs, splits = found[0], found[1]
            stats.indexed_segments += 1
        else:
            locs, splits = _scan_candidates(seg, hashes, header)
            stats.scanned_segments.append(seg.base_offset)
        if len(locs) == 0:
            continue
        cand_k = np.repeat(np.arange(len(kb), dtype=np.int64), np.diff(splits))
        visible = (locs & 0xFFFFFFFF) < seg.size  # items written after this reader sized the segment
        cand_k, cand_loc = cand_k[visible], np.asarray(locs, np.int64)[visible]
        if len(cand_loc) == 0:
            continue
        checked = _check_compiled(seg, cand_k, cand_loc, kb, header, lo, hi, stats)
        if checked is None:
            checked = _check_generic(seg, cand_k, cand_loc, kb, header, lo, hi, stats)
        for k, m in checked:
            out[k].append(m)
    for m in out:
        m.sort(key=lambda x: x.offset)
    return out, stats
