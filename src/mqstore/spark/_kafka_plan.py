"""Planning a ``kafka-log`` read against the files (no Spark): discovery, offset resolution,
data-loss checks, ``minPartitions`` splits at offset-index entries, stream admission control.

Everything here opens the partition directories **read-only** (``PartitionLog.open(read_only=True)``,
``LogSegment.open``) and never creates, modifies or recovers a file.
"""

from __future__ import annotations

import math
import os
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from mqstore.errors import (
    DataLossError,
    InvalidArgumentError,
    OffsetOutOfRangeError,
    SourceOptionError,
    StoreNotFoundError,
    UnknownTopicPartitionError,
)
from mqstore.spark._kafka_options import EARLIEST, LATEST, KafkaLogOptions, OffsetSpec, TopicPartition
from mqstore.storage.fileio import LOCAL, FileIO, fileio_for, local_path
from mqstore.storage.kafka.layout import (
    has_segments,
    log_files,
    parse_base_offset,
    partition_dirs,
    topic_partition_of,
)
from mqstore.storage.kafka.log import PartitionLog
from mqstore.storage.kafka.ranged import (
    SegmentRef,
    batch_chunks,
    index_position,
    list_segments,
    log_end_offset,
    partition_dirs_io,
    topic_partition_io,
)


@dataclass(frozen=True)
class PartitionInfo:
    """A partition directory and its offsets at planning time (``log_end`` = next offset after the
    last complete batch)."""

    topic: str
    partition: int
    path: str
    log_start: int
    log_end: int
    io: FileIO = LOCAL  # where the directory is (an object store: read by byte ranges)

    @property
    def tp(self) -> TopicPartition:
        return (self.topic, self.partition)


@dataclass(frozen=True)
class OffsetRange:
    """Records ``start ≤ offset < end`` of one partition; ``position`` is a file position hint:
    the read starts at byte ``position`` of segment ``segment`` (an index entry) when given, and
    stops before byte ``stop_position`` of segment ``stop_segment`` when given."""

    topic: str
    partition: int
    path: str
    start: int
    end: int
    segment: int | None = None
    position: int | None = None
    stop_segment: int | None = None
    stop_position: int | None = None
    io: FileIO = LOCAL

    @property
    def size(self) -> int:
        return max(0, self.end - self.start)


# ----------------------------------------------------------------------------- discovery
def discover(paths: Iterable[str], fs_options: Mapping[str, str] | None = None) -> dict[TopicPartition, str]:
    """Partition directories under ``paths``: each path is a partition directory (it holds
    ``.log`` segments) or a Kafka log directory whose ``<topic>-<partition>`` children are.
    A URL (``s3://...``) is listed through its file system (``fs_options``)."""
    found: dict[TopicPartition, str] = {}
    for raw in paths:
        io = fileio_for(raw, fs_options)
        if io.remote:
            _is_part, dirs = partition_dirs_io(io, raw)
            if not dirs:
                raise StoreNotFoundError("no Kafka partition directories (<topic>-<partition> with .log "
                                         "segments) found", path=raw)
            for d in dirs:
                tp = topic_partition_io(d)
                if tp in found and found[tp] != d:
                    raise InvalidArgumentError(f"partition {tp[0]}-{tp[1]} found twice: {found[tp]} and {d}")
                found[tp] = d
            continue
        p = Path(local_path(raw))
        if not p.exists():
            raise StoreNotFoundError("kafka-log path not found", path=str(p))
        if not p.is_dir():
            raise InvalidArgumentError("kafka-log path must be a partition directory or a log directory",
                                       path=str(p))
        if has_segments(p):
            candidates = [(topic_partition_of(p), p)]
        else:
            candidates = [(topic_partition_of(child), child) for child in partition_dirs(p)]
            if not candidates:
                raise StoreNotFoundError("no Kafka partition directories (<topic>-<partition> with .log "
                                         "segments) found", path=str(p))
        for tp, d in candidates:
            if tp in found and Path(found[tp]).resolve() != d.resolve():
                raise InvalidArgumentError(f"partition {tp[0]}-{tp[1]} found twice: {found[tp]} and {d}")
            found[tp] = str(d)
    return found


def select(found: Mapping[TopicPartition, str], opts: KafkaLogOptions) -> dict[TopicPartition, str]:
    """The partitions chosen by ``subscribe``/``subscribePattern``/``assign`` (all when none)."""
    topics = {t for t, _ in found}
    if opts.subscribe is not None:
        missing = [t for t in opts.subscribe if t not in topics]
        if missing:
            raise UnknownTopicPartitionError(f"unknown topic(s) {', '.join(missing)} (found: "
                                             f"{', '.join(sorted(topics)) or 'none'})")
    if opts.assign is not None:
        missing_tp = [f"{t}-{p}" for t, p in opts.assign if (t, p) not in found]
        if missing_tp:
            raise UnknownTopicPartitionError(f"unknown topic partition(s) {', '.join(missing_tp)}")
        chosen = {tp: found[tp] for tp in opts.assign}
    else:
        chosen = {tp: d for tp, d in found.items() if opts.selects_topic(tp[0])}
    if not chosen:
        raise UnknownTopicPartitionError(f"no partition matches subscribePattern {opts.subscribe_pattern!r} "
                                         f"(found topics: {', '.join(sorted(topics)) or 'none'})")
    return dict(sorted(chosen.items()))


def partition_info(tp: TopicPartition, path: str, *, read_committed: bool = False,
                   fs_options: Mapping[str, str] | None = None) -> PartitionInfo:
    """Offsets of one partition; with ``read_committed`` its end is the last stable offset (what a
    read_committed consumer's ``endOffsets`` answers), so an open transaction is read later."""
    io = fileio_for(path, fs_options)
    if io.remote:
        if read_committed:
            raise SourceOptionError("kafka.isolation.level=read_committed is not supported for partitions in an "
                                    "object store", path=path)
        start, end = log_end_offset(io, path)
        return PartitionInfo(tp[0], tp[1], path, start, end, io)
    with PartitionLog.open(path, read_only=True) as log:
        end = log.last_stable_offset() if read_committed else log.log_end_offset
        return PartitionInfo(tp[0], tp[1], path, log.log_start_offset, end)


def discover_partitions(opts: KafkaLogOptions, fs_options: Mapping[str, str] | None = None) -> list[PartitionInfo]:
    return [partition_info(tp, d, read_committed=opts.read_committed, fs_options=fs_options)
            for tp, d in select(discover(opts.paths, fs_options), opts).items()]


# ----------------------------------------------------------------------------- offsets
def _name(tp: TopicPartition) -> str:
    return f"{tp[0]}-{tp[1]}"


def _check_covers(spec: OffsetSpec, infos: list[PartitionInfo]) -> None:
    known = {i.tp for i in infos}
    unknown = [tp for tp in spec.per_partition if tp not in known]
    if unknown:
        raise UnknownTopicPartitionError(f"option {spec.source} names unknown topic partition(s) "
                                         + ", ".join(_name(tp) for tp in sorted(unknown)))
    missing = [i.tp for i in infos if i.tp not in spec.per_partition]
    if missing:
        raise InvalidArgumentError(f"option {spec.source} must give every selected partition (missing "
                                   + ", ".join(_name(tp) for tp in missing) + "); use −2 for earliest, "
                                   "−1 for latest")


def _for_timestamp(info: PartitionInfo, ts: int) -> int | None:
    if info.io.remote:
        raise SourceOptionError("timestamp options (startingTimestamp, startingOffsetsByTimestamp, ...) are not "
                                "supported for partitions in an object store; filter on the timestamp column",
                                path=info.path)
    with PartitionLog.open(info.path, read_only=True) as log:
        r = log.offset_for_timestamp(ts)
    return None if r is None else r.offset


def resolve_bound(spec: OffsetSpec, infos: list[PartitionInfo], *, start: bool, strategy: str = "error",
                  fail_on_data_loss: bool = True) -> dict[TopicPartition, int]:
    """Concrete offsets of a start or end bound, checked against each partition's range.

    Timestamps resolve through the time index (``offset_for_timestamp``: the first record with
    timestamp ≥ target).  No match: a start bound fails (``strategy="error"``) or starts at the
    log end (``"latest"``); an end bound becomes the log end, as in Spark.  An explicit offset
    outside ``[log_start, log_end]`` raises :class:`DataLossError` (below the start) or
    :class:`OffsetOutOfRangeError` (above the end) when ``fail_on_data_loss``, else it is clamped.
    """
    if spec.kind in ("offsets", "timestamps"):
        _check_covers(spec, infos)
    out: dict[TopicPartition, int] = {}
    for info in infos:
        if spec.kind == "earliest":
            off = info.log_start
        elif spec.kind == "latest":
            off = info.log_end
        elif spec.kind in ("timestamp", "timestamps"):
            ts = spec.timestamp if spec.kind == "timestamp" else spec.per_partition[info.tp]
            assert ts is not None
            found = _for_timestamp(info, ts)
            if found is None:
                if start and strategy == "error":
                    raise OffsetOutOfRangeError(
                        f"option {spec.source}: no record of {_name(info.tp)} has a timestamp ≥ {ts} "
                        "(set startingOffsetsByTimestampStrategy=latest to start at the end instead)",
                        path=info.path)
                off = info.log_end
            else:
                off = max(found, info.log_start)
        else:
            req = spec.per_partition[info.tp]
            if req == EARLIEST:
                off = info.log_start
            elif req == LATEST:
                off = info.log_end
            else:
                off = check_offset(info, req, what=f"option {spec.source}", fail_on_data_loss=fail_on_data_loss)
        out[info.tp] = off
    return out


def check_offset(info: PartitionInfo, offset: int, *, what: str, fail_on_data_loss: bool) -> int:
    """``offset`` if it lies in ``[log_start, log_end]``, else a typed error or the clamped value."""
    if offset < info.log_start:
        if fail_on_data_loss:
            raise DataLossError(
                f"{what}: offset {offset} of {_name(info.tp)} is below the log start offset {info.log_start} "
                "(data deleted or never written); set failOnDataLoss=false to start at the log start",
                path=info.path)
        return info.log_start
    if offset > info.log_end:
        if fail_on_data_loss:
            raise OffsetOutOfRangeError(
                f"{what}: offset {offset} of {_name(info.tp)} is beyond the log end offset {info.log_end}; "
                "set failOnDataLoss=false to clamp it", path=info.path)
        return info.log_end
    return offset


def plan_batch_ranges(opts: KafkaLogOptions, infos: list[PartitionInfo]) -> list[OffsetRange]:
    """The offset range of every selected partition of a batch query."""
    starts = resolve_bound(opts.starting, infos, start=True, strategy=opts.by_timestamp_strategy,
                           fail_on_data_loss=opts.fail_on_data_loss)
    ends = resolve_bound(opts.ending, infos, start=False, fail_on_data_loss=opts.fail_on_data_loss)
    ranges = []
    for info in infos:
        s, e = starts[info.tp], ends[info.tp]
        if s > e:
            raise InvalidArgumentError(f"starting offset {s} of {_name(info.tp)} is after its ending offset {e}")
        ranges.append(OffsetRange(info.topic, info.partition, info.path, s, e, io=info.io))
    return ranges


# ----------------------------------------------------------------------------- files of a partition
def segment_files(path: str, io: FileIO = LOCAL) -> list[tuple[int, str]]:
    """``(base offset, .log path)`` of a partition directory, by base offset."""
    if io.remote:
        return [(s.base, s.path) for s in list_segments(io, path)]
    return [(parse_base_offset(f), str(f)) for f in log_files(path)]


def _batch_base_at(io: FileIO, log_path: str, position: int) -> int | None:
    """Base offset of the batch at ``position`` (the last offset for legacy messages)."""
    with io.open(log_path, what="Kafka segment") as f:
        hdr = f.read(position, 61).tobytes()
    if len(hdr) < 17:
        return None
    magic = hdr[16]
    off = int.from_bytes(hdr[0:8], "big", signed=True)
    if magic >= 2:
        return off
    return off  # legacy: the stored offset (a legacy wrapper is never split inside)


def split_points(rng: OffsetRange, targets: list[int]) -> list[tuple[int, int, int]]:
    """Cut points ``(base offset, segment, position)`` for target offsets, each snapped down to the
    offset-index entry at or below it (or the segment start): the batch at that indexed position
    starts the next piece, so every batch belongs to exactly one piece."""
    segs = segment_files(rng.path, rng.io)
    bases = [b for b, _ in segs]
    cuts: dict[int, tuple[int, int, int]] = {}
    for t in targets:
        i = int(np.searchsorted(np.asarray(bases, np.int64), t, side="right")) - 1
        if i < 0:
            continue
        base, log_path = segs[i]
        pos = index_position(rng.io, SegmentRef(base, log_path, 0), t)[1]
        b = _batch_base_at(rng.io, log_path, pos)
        if b is not None and rng.start < b < rng.end:
            cuts[b] = (b, base, pos)
    return [cuts[k] for k in sorted(cuts)]


def _round_half_up(x: float) -> int:
    """``Math.round`` of the JVM (half up), which Spark's partition counts use."""
    return math.floor(x + 0.5)


def divide_range(r: OffsetRange, parts: int) -> list[OffsetRange]:
    """``r`` cut into ``parts`` pieces of nearly equal offset counts at exact offsets (the last
    pieces take the remainder, as Spark's range calculator does).  A batch that straddles a cut
    is read by both neighbours, each keeping only its own offsets."""
    if parts <= 1 or r.size <= 1:
        return [r]
    out: list[OffsetRange] = []
    lo, remaining = r.start, r.size
    for k in range(parts):
        n = remaining // (parts - k)
        remaining -= n
        hi = min(lo + n, r.end)
        first, last = k == 0, k == parts - 1
        out.append(OffsetRange(r.topic, r.partition, r.path, lo, hi,
                               r.segment if first else None, r.position if first else None,
                               r.stop_segment if last else None, r.stop_position if last else None, io=r.io))
        lo = hi
    return [p for p in out if p.size > 0]


def _cut_at_index(r: OffsetRange, parts: int) -> list[OffsetRange]:
    """``r`` in about ``parts`` pieces whose cuts sit on offset-index entries (see :func:`split_points`)."""
    if parts <= 1:
        return [r]
    targets = [r.start + (r.size * k) // parts for k in range(1, parts)]
    out: list[OffsetRange] = []
    lo, seg, pos = r.start, r.segment, r.position
    for b, cseg, cpos in split_points(r, targets):
        out.append(OffsetRange(r.topic, r.partition, r.path, lo, b, seg, pos, cseg, cpos, io=r.io))
        lo, seg, pos = b, cseg, cpos
    out.append(OffsetRange(r.topic, r.partition, r.path, lo, r.end, seg, pos, r.stop_segment, r.stop_position,
                           io=r.io))
    return out


def split_ranges(ranges: list[OffsetRange], min_partitions: int | None,
                 max_records_per_partition: int | None = None) -> list[OffsetRange]:
    """The tasks of a batch, by Spark's Kafka range rules.

    * ``maxRecordsPerPartition``: every range of more offsets is cut into
      ``ceil(size / maxRecordsPerPartition)`` equal pieces (exact offsets), so no task exceeds it;
    * then ``minPartitions``, when there are still fewer tasks: a range whose share of the offsets
      rounds to one task stays whole, the others share the remaining task count in proportion to
      their size (cuts moved down to offset-index entries, see :func:`split_points`; this only
      makes pieces smaller, so the maxRecordsPerPartition bound still holds).

    Empty ranges are dropped."""
    pieces = [r for r in ranges if r.size > 0]
    if max_records_per_partition:
        pieces = [p for r in pieces for p in divide_range(r, -(-r.size // max_records_per_partition))]
    if not min_partitions or len(pieces) >= min_partitions:
        return pieces
    total = sum(r.size for r in pieces)
    whole = [_round_half_up(r.size / total * min_partitions) <= 1 for r in pieces]
    split_total = total - sum(r.size for r, w in zip(pieces, whole, strict=True) if w)
    split_min = max(min_partitions - sum(whole), 1)
    out: list[OffsetRange] = []
    for r, w in zip(pieces, whole, strict=True):
        parts = 1 if w else max(_round_half_up(r.size / split_total * split_min), 1)
        out.extend(_cut_at_index(r, parts))
    return out


# ----------------------------------------------------------------------------- streaming admission
def offsets_json(offsets: Mapping[TopicPartition, int]) -> dict[str, dict[str, int]]:
    """Spark's Kafka offset JSON ``{"topic": {"0": next_offset}}`` (sorted, so equal offsets
    serialise identically)."""
    out: dict[str, dict[str, int]] = {}
    for (t, p) in sorted(offsets):
        out.setdefault(t, {})[str(p)] = int(offsets[(t, p)])
    return out


def parse_offsets_json(obj: Mapping[str, Mapping[str, int]]) -> dict[TopicPartition, int]:
    if not isinstance(obj, Mapping):
        raise InvalidArgumentError(f"bad kafka-log stream offset {obj!r}")
    out: dict[TopicPartition, int] = {}
    for t, parts in obj.items():
        if not isinstance(parts, Mapping):
            raise InvalidArgumentError(f"bad kafka-log stream offset {obj!r}")
        for p, off in parts.items():
            out[(t, int(p))] = int(off)
    return out


def rate_limit_offsets(start: Mapping[TopicPartition, int], end: Mapping[TopicPartition, int],
                       max_offsets: int) -> dict[TopicPartition, int]:
    """Spread ``max_offsets`` over the partitions in proportion to what each has available
    (Spark's ``maxOffsetsPerTrigger`` rule: a share below one rounds up, others round down)."""
    avail = {tp: max(0, end[tp] - start.get(tp, end[tp])) for tp in end}
    total = sum(avail.values())
    if total <= max_offsets:
        return dict(end)
    out: dict[TopicPartition, int] = {}
    for tp, e in end.items():
        a = avail[tp]
        if a == 0:
            out[tp] = e
            continue
        share = max_offsets * (a / total)
        n = math.ceil(share) if share < 1 else math.floor(share)
        out[tp] = min(start[tp] + n, e)
    return out


def _bytes_cut(path: str, start: int, end: int, budget: int, io: FileIO = LOCAL) -> tuple[int, int]:
    """Walk whole batches of ``[start, end)`` until ``budget`` bytes: ``(next offset, bytes used)``.
    At least one batch is taken when any exists (so a stream always progresses)."""
    used = 0
    off = start
    for seg in list_segments(io, path):
        if off >= end:
            break
        if seg.size == 0:
            continue
        pos = index_position(io, seg, off)[1] if off > seg.base else 0
        with io.open(seg.path, what="Kafka segment") as f:
            for _buf, _bp, scan in batch_chunks(f, pos, f.size):
                n = scan["count"]
                if n == 0:
                    continue
                last = scan["last_offset"][:n]
                sizes = scan["size"][:n].astype(np.int64)
                keep = (last >= off) & (np.where(scan["magic"][:n] >= 2, scan["base_offset"][:n], last) < end)
                idx = np.nonzero(keep)[0]
                if idx.shape[0] == 0:
                    continue
                cum = used + np.cumsum(sizes[idx])
                fits = int(np.searchsorted(cum, budget, side="right"))
                if fits == 0 and used == 0:
                    fits = 1  # one batch even if it alone exceeds the budget
                if fits < idx.shape[0]:
                    if fits == 0:
                        return off, used
                    return min(int(last[idx[fits - 1]]) + 1, end), int(cum[fits - 1])
                used = int(cum[-1])
                off = min(int(last[idx[-1]]) + 1, end)
    return end, used


def rate_limit_bytes(paths: Mapping[TopicPartition, str], start: Mapping[TopicPartition, int],
                     end: Mapping[TopicPartition, int], max_bytes: int,
                     ios: Mapping[TopicPartition, FileIO] | None = None) -> dict[TopicPartition, int]:
    """Admit whole batches up to about ``max_bytes``: the budget is shared equally by the
    partitions that have data, bytes one partition leaves unused go to the next, and every
    partition with data gets at least one batch (so a stream always progresses)."""
    out = dict(end)
    pending = [tp for tp in sorted(end) if end[tp] > start.get(tp, end[tp])]
    budget = max_bytes
    for k, tp in enumerate(pending):
        share = max(1, budget // (len(pending) - k))
        nxt, used = _bytes_cut(paths[tp], start[tp], end[tp], share, (ios or {}).get(tp, LOCAL))
        out[tp] = nxt
        budget = max(0, budget - used)
    return out


def exists(path: str) -> bool:
    return os.path.isdir(path)
