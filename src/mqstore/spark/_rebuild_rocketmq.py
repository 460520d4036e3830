"""The pieces of the Spark RocketMQ rebuild: the executor functions (split, scan, write) and the
driver-side plan that reproduces the local rebuild's decisions (where the scan stops, where the
IndexService rolls a file, how files are named).

Executors only receive small picklable descriptors (paths, offsets) and call the storage layer
(:mod:`mqstore.storage.rocketmq.rebuild`) to write files, each atomically.
"""

from __future__ import annotations

import os
import zlib
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from typing import Any

import numpy as np

from mqstore.errors import StoreNotFoundError
from mqstore.kernels.arrays import unique
from mqstore.storage.mapped import ReadOnlyMap
from mqstore.storage.rocketmq.index_roll import FileKeys, IndexRoll, name_rolls
from mqstore.storage.rocketmq.walk import cut_at_records

DEFAULT_SPLIT_BYTES = 128 * 1024 * 1024


# ----------------------------------------------------------------------------- descriptors
@dataclass(frozen=True, slots=True)
class SegmentDesc:
    """One CommitLog segment as the local scan visits it."""

    index: int
    path: str
    file_from_offset: int
    wrote_position: int


@dataclass(frozen=True, slots=True)
class ChunkDesc:
    """A record-aligned range ``[start, end)`` (positions in the segment) scanned by one task."""

    index: int
    segment: int
    path: str
    file_from_offset: int
    start: int
    end: int
    last_in_segment: bool
    check_crc: bool
    enable_lmq: bool = False  # the store's multi-dispatch rule (storage.rocketmq.lmq)
    enable_multi_dispatch: bool = False


@dataclass(slots=True)
class ChunkScan:
    """The dispatch columns of one chunk: ConsumeQueue rows and index keys (already masked)."""

    index: int
    segment: int
    end_offset: int  # global end of the chunk range
    last_in_segment: bool
    next_offset: int
    stop: str
    error: str | None
    messages: int
    topics: list[str]
    cq_topic_id: np.ndarray
    cq_queue_id: np.ndarray
    cq_offset: np.ndarray
    cq_size: np.ndarray
    cq_tags: np.ndarray
    cq_queue_offset: np.ndarray
    last_cq_timestamp: int | None
    key_hash: np.ndarray
    key_phy: np.ndarray
    key_ts: np.ndarray
    cq_store_ts: np.ndarray | None = None  # store times of the ConsumeQueue rows (the time index)

    def summary(self) -> ChunkSummary:
        n = len(self.key_hash)
        return ChunkSummary(self.index, self.segment, self.end_offset, self.last_in_segment, self.next_offset,
                            self.stop, self.error, self.messages, n, self.last_cq_timestamp,
                            int(self.key_ts[0]) if n else 0, int(self.key_phy[-1]) if n else 0,
                            int(self.key_ts[-1]) if n else 0)


@dataclass(frozen=True, slots=True)
class ChunkSummary:
    index: int
    segment: int
    end_offset: int
    last_in_segment: bool
    next_offset: int
    stop: str
    error: str | None
    messages: int
    keys: int
    last_cq_timestamp: int | None
    first_key_ts: int = 0  # store time of the chunk's first index key
    last_key_phy: int = 0  # offset and store time of its last index key
    last_key_ts: int = 0


def _mapped(path: str) -> ReadOnlyMap:
    """A CommitLog segment mapped read-only (storage's view; closed on exit even when numpy
    views were taken)."""
    return ReadOnlyMap(path, what="CommitLog segment (vanished during the rebuild)")


# ----------------------------------------------------------------------------- executor functions
def split_segment(seg: SegmentDesc, split_bytes: int) -> list[tuple[int, int]]:
    """Record-aligned ranges of about ``split_bytes`` covering the segment (cheap boundary walk)."""
    from mqstore.kernels.rocketmq.framing import record_positions

    if seg.wrote_position <= split_bytes:
        return [(0, seg.wrote_position)]
    with _mapped(seg.path) as m:
        positions, _sizes, _stop, _pos = record_positions(m.array, 0, seg.wrote_position)
    targets = np.arange(split_bytes, seg.wrote_position, split_bytes, dtype=np.int64)
    return cut_at_records(positions, 0, seg.wrote_position, targets)


def scan_chunk(c: ChunkDesc) -> ChunkScan:
    """Stage 1: the numba scan of one chunk, reduced to what the writers need."""
    from mqstore.kernels.rocketmq.scan import scan_segment
    from mqstore.storage.rocketmq.lmq import MultiDispatchRule, cq_units

    with _mapped(c.path) as m:
        b = scan_segment(m.array, c.file_from_offset, c.start, c.end, check_crc=c.check_crc, skip_length_mismatch=True)
    # the ConsumeQueue units (own and multi-dispatch) by the local dispatch's one rule
    u = cq_units(b, MultiDispatchRule(c.enable_lmq, c.enable_multi_dispatch))
    if len(b.key_hash):
        kmask = b.index_key_mask()
        key_rows = b.key_row[kmask]
        key_hash = np.ascontiguousarray(b.key_hash[kmask])
        key_phy = b.commit_log_offset[key_rows]
        key_ts = b.store_timestamp[key_rows]
    else:
        key_hash, key_phy, key_ts = np.empty(0, np.int32), np.empty(0, np.int64), np.empty(0, np.int64)
    return ChunkScan(
        index=c.index, segment=c.segment, end_offset=c.file_from_offset + c.end, last_in_segment=c.last_in_segment,
        next_offset=b.next_offset, stop=b.stop, error=b.error, messages=len(b), topics=list(u.topics),
        cq_topic_id=u.topic_id, cq_queue_id=u.queue_id, cq_offset=u.commit_log_offset,
        cq_size=u.size, cq_tags=u.tags_code, cq_queue_offset=u.queue_offset,
        last_cq_timestamp=int(u.store_timestamp[-1]) if len(u) else None,
        key_hash=key_hash, key_phy=key_phy, key_ts=key_ts, cq_store_ts=u.store_timestamp,
    )


# ----------------------------------------------------------------------------- driver plan
def included_chunks(summaries: list[ChunkSummary], segments: list[SegmentDesc]) -> list[ChunkSummary]:
    """The chunks the local scan would dispatch, in order, decided by storage's stop rule
    (:func:`mqstore.storage.rocketmq.commitlog.scan_step`): the next segment only after an
    end-of-segment blank, the next chunk only when a chunk inside a segment was read to its end."""
    from mqstore.storage.rocketmq.commitlog import SCAN_CONTINUE, SCAN_NEXT_SEGMENT, scan_step

    by_seg: dict[int, list[ChunkSummary]] = {}
    for s in sorted(summaries, key=lambda s: s.index):
        by_seg.setdefault(s.segment, []).append(s)
    out: list[ChunkSummary] = []
    for seg in segments:
        for s in by_seg.get(seg.index, []):
            out.append(s)
            step = scan_step(s.stop, range_cut=s.next_offset == s.end_offset and not s.last_in_segment)
            if step == SCAN_NEXT_SEGMENT:
                break  # the rest of the segment is filler: continue with the next segment
            if step == SCAN_CONTINUE:
                continue
            return out  # the scan stops here (end of data, invalid record)
        else:
            return out  # a segment without an end-of-segment blank ends the CommitLog
    return out


def key_starts(included: list[ChunkSummary]) -> dict[int, int]:
    """Global index of the first key of each included chunk."""
    starts: dict[int, int] = {}
    total = 0
    for s in included:
        starts[s.index] = total
        total += s.keys
    return starts


Pick = tuple[str, int, int, int]


def boundary_picks(scan: ChunkScan | KeyColumns, start: int, firsts: np.ndarray) -> Iterator[Pick]:
    """``("first", g, ts, 0)`` for each new IndexFile whose first key ``g`` (global index,
    ``firsts`` from storage's roll plan) is in this chunk, and ``("carry", g, phy, ts)`` for each
    whose preceding key ``g - 1`` is in it."""
    n = len(scan.key_hash)
    if n == 0:
        return
    for g in firsts[(firsts >= start) & (firsts < start + n)].tolist():
        yield "first", g, int(scan.key_ts[g - start]), 0
    for g in firsts[(firsts > start) & (firsts <= start + n)].tolist():
        yield "carry", g, int(scan.key_phy[g - 1 - start]), int(scan.key_ts[g - 1 - start])


def summary_picks(included: list[ChunkSummary], starts: dict[int, int],
                  firsts: np.ndarray) -> tuple[list[Pick], set[int]]:
    """The boundary picks the chunk summaries already answer (a file starting at a chunk's first
    key, a file whose predecessor ends at a chunk's last key), and the chunks that must be asked
    for the rest."""
    picks: list[Pick] = []
    ask: set[int] = set()
    for s in included:
        if not s.keys:
            continue
        start, n = starts[s.index], s.keys
        for g in firsts[(firsts >= start) & (firsts < start + n)].tolist():
            if g == start:
                picks.append(("first", g, s.first_key_ts, 0))
            else:
                ask.add(s.index)
        for g in firsts[(firsts > start) & (firsts <= start + n)].tolist():
            if g == start + n:
                picks.append(("carry", g, s.last_key_phy, s.last_key_ts))
            else:
                ask.add(s.index)
    return picks, ask


def plan_index_files(plan: list[FileKeys], picks: Iterable[Pick],
                     directory: str | os.PathLike[str] | None = None) -> list[IndexRoll]:
    """The IndexFiles of the rebuild, rolled, named and carried over by storage's rule
    (:func:`mqstore.storage.rocketmq.index_roll.name_rolls`) from the boundary keys' values."""
    first_ts: dict[int, int] = {}
    last_of: dict[int, tuple[int, int]] = {}
    for kind, g, a, b in picks:
        if kind == "first":
            first_ts[g] = a
        else:
            last_of[g] = (a, b)
    return name_rolls(plan, first_ts, last_of, directory)


# ----------------------------------------------------------------------------- staged columns
# A scan task saves its columns as ``.npy`` files in a stage directory beside the output (on a
# cluster: the same shared filesystem); the writer tasks map the slices they need.  Nothing large
# goes through Spark's block manager or shuffle, and a retried task rewrites the same files.
STAGE_DIR = ".spark-rebuild-stage"
_CQ_COLS = ("cq_topic_id", "cq_queue_id", "cq_offset", "cq_size", "cq_tags", "cq_queue_offset", "cq_store_ts")
_KEY_COLS = ("key_hash", "key_phy", "key_ts")


@dataclass(frozen=True, slots=True)
class StagedChunk:
    """What a scan task returns to the driver: the summary, and the queues the chunk holds."""

    summary: ChunkSummary
    topics: list[str]
    queues: list[tuple[str, int]]


@dataclass(slots=True)
class KeyColumns:
    key_hash: np.ndarray
    key_phy: np.ndarray
    key_ts: np.ndarray


def _chunk_dir(stage: str, index: int) -> str:
    return os.path.join(stage, f"chunk-{index:06d}")


def scan_chunk_staged(c: ChunkDesc, stage: str) -> StagedChunk:
    """Stage 1 of the rebuild: scan one chunk and save its columns under ``stage``."""
    import json
    import shutil
    import uuid

    scan = scan_chunk(c)
    final = _chunk_dir(stage, c.index)
    tmp = f"{final}.tmp-{uuid.uuid4().hex}"
    os.makedirs(tmp)
    for name in (*_CQ_COLS, *_KEY_COLS):
        np.save(os.path.join(tmp, f"{name}.npy"), np.ascontiguousarray(getattr(scan, name)))
    with open(os.path.join(tmp, "topics.json"), "w", encoding="utf-8") as fh:
        json.dump(scan.topics, fh)
    if os.path.isdir(final):  # a retried task: its earlier output is replaced whole
        shutil.rmtree(final, ignore_errors=True)
    os.rename(tmp, final)
    pairs = unique(scan.cq_topic_id.astype(np.int64) * (1 << 32) + scan.cq_queue_id.astype(np.int64))
    queues = [(scan.topics[int(g >> 32)], int(g & 0xFFFFFFFF)) for g in pairs]
    return StagedChunk(scan.summary(), scan.topics, queues)


def _load(stage: str, index: int, names: tuple[str, ...]) -> dict[str, np.ndarray]:
    d = _chunk_dir(stage, index)
    try:
        return {n: np.load(os.path.join(d, f"{n}.npy"), mmap_mode="r") for n in names}
    except FileNotFoundError:
        raise StoreNotFoundError("staged scan columns vanished during the rebuild", path=d) from None


def load_key_columns(stage: str, index: int) -> KeyColumns:
    cols = _load(stage, index, _KEY_COLS)
    return KeyColumns(cols["key_hash"], cols["key_phy"], cols["key_ts"])


CQ, IX = 0, 1


def cq_partition(topic: str, queue_id: int, n_cq: int) -> int:
    """A process-independent partition for a queue (Python's ``hash`` of a str is salted)."""
    return zlib.crc32(f"{topic}\x00{queue_id}".encode()) % max(n_cq, 1)


@dataclass(frozen=True, slots=True)
class WriteTask:
    """Stage 3 work of one task: whole ConsumeQueues or whole IndexFiles.

    ``chunks`` lists ``(chunk index, global index of its first key)`` in CommitLog order."""

    kind: int
    queues: tuple[tuple[str, int], ...]
    files: tuple[int, ...]
    chunks: tuple[tuple[int, int, int], ...]  # (chunk, key start, keys)


def plan_writes(staged: list[StagedChunk], included: list[ChunkSummary], starts: dict[int, int],
                plans: list[IndexRoll], n_cq: int, n_ix: int) -> list[WriteTask]:
    """The write tasks: the queues spread over ``n_cq`` tasks by a stable hash, the IndexFiles
    over ``n_ix`` tasks (file ``k`` to task ``k % n_ix``); each lists only the chunks it reads."""
    by_index = {s.summary.index: s for s in staged}
    order = [s.index for s in included]
    tasks: list[WriteTask] = []
    buckets: list[set[tuple[str, int]]] = [set() for _ in range(max(n_cq, 1))]
    for i in order:
        for q in by_index[i].queues:
            buckets[cq_partition(q[0], q[1], n_cq)].add(q)
    for qs in buckets:
        if qs:
            chunks = tuple((i, starts[i], 0) for i in order if qs.intersection(by_index[i].queues))
            tasks.append(WriteTask(CQ, tuple(sorted(qs)), (), chunks))
    for j in range(n_ix):
        files = tuple(p.number for p in plans if p.number % n_ix == j)
        if not files:
            continue
        mine = [p for p in plans if p.number in files]
        chunks = tuple((s.index, starts[s.index], s.keys) for s in included if s.keys and any(
            starts[s.index] < p.first_key + p.keys and starts[s.index] + s.keys > p.first_key for p in mine))
        tasks.append(WriteTask(IX, (), files, chunks))
    return tasks


def write_task(task: WriteTask, stage: str, target: str, cq_file_size: int, hash_slot_num: int, index_num: int,
               plans: dict[int, IndexRoll], time_index_interval: int = 0) -> Iterator[tuple[Any, ...]]:
    """Stage 3: write the ConsumeQueues or IndexFiles of one task from the staged columns
    (``time_index_interval`` > 0: with the queues' sparse time index sidecars)."""
    import json
    from pathlib import Path

    from mqstore.errors import CorruptIndexError
    from mqstore.storage.rocketmq.lmq import queue_groups
    from mqstore.storage.rocketmq.rebuild import write_consume_queue, write_index_file

    root = Path(target)
    if task.kind == CQ:
        wanted = set(task.queues)
        parts: dict[tuple[str, int], list[list[np.ndarray]]] = {}
        for i, _, _ in task.chunks:
            with open(os.path.join(_chunk_dir(stage, i), "topics.json"), encoding="utf-8") as fh:
                topics = json.load(fh)
            cols = _load(stage, i, _CQ_COLS)
            for tid, qid, grp in queue_groups(cols["cq_topic_id"], cols["cq_queue_id"]):
                q = (topics[tid], qid)
                if q in wanted:
                    parts.setdefault(q, []).append([cols[n][grp] for n in _CQ_COLS[2:]])
        for (topic, qid), pieces in sorted(parts.items()):
            merged = [np.concatenate([p[k] for p in pieces]) for k in range(5)]
            n = write_consume_queue(root, topic, qid, cq_file_size, *merged[:4], store_timestamps=merged[4],
                                    time_index_interval=time_index_interval)
            yield "cq", f"{topic}/{qid}", n
        return
    for number in task.files:
        plan = plans[number]
        lo, hi = plan.first_key, plan.first_key + plan.keys
        got: list[list[np.ndarray]] = []
        for i, s, n in task.chunks:
            a, b = max(lo, s) - s, min(hi, s + n) - s
            if b > a:
                cols = _load(stage, i, _KEY_COLS)
                got.append([cols[k][a:b] for k in _KEY_COLS])
        merged = [np.concatenate([g[k] for g in got]) if got else np.empty(0) for k in range(3)]
        if len(merged[0]) != plan.keys:
            raise CorruptIndexError(f"index file {plan.name}: got {len(merged[0])} keys, planned {plan.keys}")
        write_index_file(root / "index", plan.name, hash_slot_num, index_num, *merged, plan.carry_phy, plan.carry_ts)
        yield "index", plan.name, plan.keys
