"""Shared helpers of the RocketMQ format and kernel tests: fixture loading, a store-level scan over
the CommitLog segments, and the ConsumeQueue / IndexFile writers used to rebuild fixture files."""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from mqstore.formats.rocketmq.consumequeue import CQ_UNIT_SIZE, cq_file_size
from mqstore.formats.rocketmq.indexfile import IndexFileBuffer, index_file_size
from mqstore.formats.rocketmq.record import TRANSACTION_MASK, TRANSACTION_ROLLBACK_TYPE
from mqstore.kernels.rocketmq.scan import STOP_BLANK, DispatchBatch
from mqstore.storage.rocketmq.layout import index_file_name
from mqstore.storage.rocketmq.layout import segment_name as offset_to_file_name

REPO = Path(__file__).resolve().parents[2]
FIXTURES = REPO / "tests" / "fixtures" / "rocketmq"
CASES = ("basic", "prop_crc")


@dataclass
class FixtureCase:
    name: str
    root: Path
    manifest: dict[str, Any]

    @property
    def store(self) -> Path:
        return self.root / "store"

    @property
    def config(self) -> dict[str, Any]:
        return self.manifest["config"]

    @property
    def messages(self) -> list[dict[str, Any]]:
        return self.manifest["messages"]

    def segments(self) -> list[tuple[int, bytes]]:
        """(fileFromOffset, bytes) of every CommitLog segment, ascending."""
        files = sorted((self.store / "commitlog").iterdir(), key=lambda p: p.name)
        return [(int(p.name), p.read_bytes()) for p in files]

    def store_file(self, rel: str) -> bytes:
        return (self.store / rel).read_bytes()


def load_case(name: str) -> FixtureCase:
    """Load a fixture case; a missing fixture is a failure (never a skip)."""
    root = FIXTURES / name
    manifest_path = root / "manifest.json"
    assert manifest_path.is_file(), f"fixture {manifest_path} is missing (tests must not be skipped)"
    return FixtureCase(name, root, json.loads(manifest_path.read_text()))


ScanFn = Callable[..., DispatchBatch]


def scan_store(case: FixtureCase, scan: ScanFn, **kwargs: Any) -> Iterator[DispatchBatch]:
    """Scan every segment from position 0 the way the reput service does (a blank record ends a
    segment; the scan then continues at the start of the next one)."""
    for base, data in case.segments():
        batch = scan(data, base, 0, len(data), **kwargs)
        assert batch.error is None, batch.error
        yield batch
        if batch.stop != STOP_BLANK:
            break


def concat_batches(batches: list[DispatchBatch]) -> dict[str, Any]:
    """Flatten batches into global columns (topics as strings, key rows as global rows)."""
    rows = 0
    out: dict[str, list[Any]] = {k: [] for k in ("off", "size", "qid", "qoff", "sys", "ts", "tags", "topic")}
    key_row: list[np.ndarray] = []
    key_hash: list[np.ndarray] = []
    for b in batches:
        out["off"].extend(b.commit_log_offset.tolist())
        out["size"].extend(b.size.tolist())
        out["qid"].extend(b.queue_id.tolist())
        out["qoff"].extend(b.queue_offset.tolist())
        out["sys"].extend(b.sys_flag.tolist())
        out["ts"].extend(b.store_timestamp.tolist())
        out["tags"].extend(b.tags_code.tolist())
        out["topic"].extend(b.topics[i] for i in b.topic_id.tolist())
        key_row.append(b.key_row + rows)
        key_hash.append(b.key_hash)
        rows += len(b)
    res: dict[str, Any] = dict(out)
    res["key_row"] = np.concatenate(key_row) if key_row else np.empty(0, np.int64)
    res["key_hash"] = np.concatenate(key_hash) if key_hash else np.empty(0, np.int32)
    return res


def build_consume_queues(cols: dict[str, Any], configured_cq_size: int) -> dict[str, bytes]:
    """ConsumeQueue files (relative path → bytes) for the scanned rows (transaction NOT/COMMIT)."""
    size = cq_file_size(configured_cq_size)
    files: dict[str, bytearray] = {}
    for i in range(len(cols["off"])):
        t = cols["sys"][i] & TRANSACTION_MASK
        if t not in (0x0, 0x8):
            continue
        logical = cols["qoff"][i] * CQ_UNIT_SIZE
        seg_start = logical - logical % size
        rel = f"consumequeue/{cols['topic'][i]}/{cols['qid'][i]}/{offset_to_file_name(seg_start)}"
        buf = files.setdefault(rel, bytearray(size))
        pos = logical % size
        buf[pos : pos + CQ_UNIT_SIZE] = np.array(
            [(cols["off"][i], cols["size"][i], cols["tags"][i])],
            dtype=[("o", ">i8"), ("s", ">i4"), ("t", ">i8")],
        ).tobytes()
    return {k: bytes(v) for k, v in files.items()}


def index_inputs(cols: dict[str, Any]) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(key_hash, phy_offset, store_timestamp) of every index key, ROLLBACK messages removed."""
    rows = cols["key_row"]
    sys = np.asarray(cols["sys"], np.int64)[rows] if len(rows) else np.empty(0, np.int64)
    keep = (sys & TRANSACTION_MASK) != TRANSACTION_ROLLBACK_TYPE
    rows = rows[keep]
    off = np.asarray(cols["off"], np.int64)
    ts = np.asarray(cols["ts"], np.int64)
    return cols["key_hash"][keep].astype(np.int32), off[rows], ts[rows]


BulkPut = Callable[..., int]


def build_index_files(
    key_hash: np.ndarray,
    phy: np.ndarray,
    ts: np.ndarray,
    slots: int,
    items: int,
    bulk_put: BulkPut | None = None,
) -> list[tuple[str, bytes]]:
    """Index files (name, bytes) for the keys, rolling with carry-over (spec 3.6, 3.8, 4.1).

    With ``bulk_put`` the kernel builder fills each file; otherwise ``IndexFileBuffer.put_hash``.
    Each file is named from its final header beginTimestamp (+1 ms when a name is taken).
    """
    files: list[tuple[int, bytearray]] = []
    i, n = 0, len(key_hash)
    prev_end = (0, 0)
    while i < n:
        buf = bytearray(index_file_size(slots, items))
        ref = IndexFileBuffer(buf, slots, items, load=False)
        ref.carry_over(*prev_end)
        if bulk_put is None:
            while i < n and ref.put_hash(int(key_hash[i]), int(phy[i]), int(ts[i])):
                i += 1
            ref.write_header()
            h = ref.header
            header_vals = (h.begin_timestamp, h.end_timestamp, h.begin_phy_offset, h.end_phy_offset)
        else:
            h0 = ref.header
            header = np.array(
                [h0.begin_timestamp, h0.end_timestamp, h0.begin_phy_offset, h0.end_phy_offset,
                 h0.hash_slot_count, h0.index_count],
                np.int64,
            )  # fmt: skip
            arr = np.frombuffer(buf, np.uint8)
            i += bulk_put(arr, slots, items, header, key_hash, phy, ts, i)
            # flush: updateByteBuffer writes every header field
            from mqstore.formats.rocketmq.indexfile import IndexHeader

            buf[0:40] = IndexHeader(*(int(v) for v in header)).encode()
            header_vals = tuple(int(v) for v in header[:4])
        files.append((header_vals[0], buf))
        prev_end = (header_vals[3], header_vals[1])
    out: list[tuple[str, bytes]] = []
    last_ms = -1
    for begin_ts, buf in files:
        ms = max(begin_ts, last_ms + 1)
        last_ms = ms
        out.append((index_file_name(ms), bytes(buf)))
    return out


def lenient_properties(text: str) -> list[tuple[str, str]]:
    """Every ``name\\x01value\\x02`` pair in order, empty values kept (the producer's map)."""
    pairs = []
    for part in text.split("\x02"):
        if not part:
            continue
        name, sep, value = part.partition("\x01")
        assert sep, part
        pairs.append((name, value))
    return pairs
