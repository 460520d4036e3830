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

from mqstore.errors import CorruptIndexError, InvalidArgumentError
from mqstore.formats.kafka.batch import Record
from mqstore.formats.kafka.keyindex import check_header_name
from mqstore.storage.kafka.keyindex import key_hashes, log_entries
from mqstore.storage.kafka.segment import LogSegment


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
        cache = _BatchCache(seg, stats)
        base = seg.base_offset
        size = seg.size
        for i in range(len(kb)):
            a, b = int(splits[i]), int(splits[i + 1])
            if a == b:
                continue
            seen = set()
            for loc in locs[a:b].tolist():
                stats.candidates += 1
                pos = loc & 0xFFFFFFFF
                off = base + (loc >> 32)
                if pos >= size:  # written after this reader sized the segment
                    continue
                if off in seen:
                    continue
                r = cache.record(pos, off)
                if r is None:
                    raise CorruptIndexError(f"key index names offset {off} in the batch at position {pos}, "
                                            "which does not hold it", path=str(seg.key_index_path), offset=pos)
                if lo <= r.timestamp <= hi and _matches(r, kb[i], header):
                    seen.add(off)
                    out[i].append(KeyMatch(off, r.timestamp, base, pos))
    for m in out:
        m.sort(key=lambda x: x.offset)
    return out, stats
