"""Small builders shared by the Kafka tests."""

from __future__ import annotations

from mqstore.formats.kafka import SimpleRecord, encode_batch


def batch(base_offset: int, count: int = 1, ts: int | None = None, value: bytes = b"v", **kw: object) -> bytes:
    """A v2 batch with ``count`` records at ``base_offset..``; timestamps default to offset × 10."""
    recs = [SimpleRecord(value=value + str(base_offset + i).encode(),
                         timestamp=(ts if ts is not None else (base_offset + i) * 10)) for i in range(count)]
    return encode_batch(recs, base_offset=base_offset, **kw)  # type: ignore[arg-type]


def append_batch(seg, base_offset: int, count: int = 1, ts: int | None = None) -> bytes:
    data = batch(base_offset, count, ts)
    last = base_offset + count - 1
    max_ts = ts if ts is not None else last * 10
    seg.append(last, max_ts, last, data)
    return data
