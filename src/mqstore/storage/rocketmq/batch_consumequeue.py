"""Read-only access to RocketMQ 5.x BatchConsumeQueues (``batchconsumequeue/<topic>/<queue>/``)
and the compaction store (``compaction/compactionLog``, ``compaction/compactionCq``,
``compaction/position-checkpoint``), their verification against the CommitLog, and the
byte-identical rebuild of the batch queues from the CommitLog.

Layouts: ``docs/formats/rocketmq-batch-consumequeue.md``.  Nothing here writes a file except
:func:`rebuild_batch_queues` (durability: each queue is built in a temporary directory, every
file is fsynced, then the directory is renamed into place; an in-place rebuild swaps the whole
``batchconsumequeue/`` directory only once every queue is complete).
"""

from __future__ import annotations

import json
import os
import re
import shutil
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from mqstore.errors import (
    CorruptDataError,
    InvalidArgumentError,
    MqStoreError,
    OffsetOutOfRangeError,
    StoreNotFoundError,
)
from mqstore.formats.rocketmq.batch_consumequeue import (
    BCQ_DTYPE,
    BCQ_UNIT_SIZE,
    DEFAULT_BCQ_FILE_SIZE,
    DEFAULT_COMPACTION_LOG_FILE_SIZE,
    INVALID_COMPACTED_OFFSET,
    BatchCQUnit,
    units_view,
    valid_prefix,
)
from mqstore.formats.rocketmq.properties import PROPERTY_INNER_BASE, PROPERTY_INNER_NUM
from mqstore.formats.rocketmq.record import MessageRecord
from mqstore.storage.mapped import ensure_inside
from mqstore.storage.rocketmq import config_files
from mqstore.storage.rocketmq.commitlog import CommitLog
from mqstore.storage.rocketmq.config import StoreConfig, validate_topic

BCQ_DIR = "batchconsumequeue"
COMPACTION_DIR = "compaction"
COMPACTION_LOG_DIR = "compactionLog"
COMPACTION_CQ_DIR = "compactionCq"
POSITION_CHECKPOINT = "position-checkpoint"
QUEUE_TYPE_KEY = "queue.type"
BATCH_CQ = "BatchCQ"
_NAME = re.compile(r"^\d{20}$")
SHORT_MAX = 2**15 - 1
#: what Long.parseLong / Short.parseShort accept (an optional sign, ASCII digits)
_JAVA_INT = re.compile(r"[+-]?[0-9]+\Z")


def batch_cq_topics(root: Path) -> set[str]:
    """Topics whose ``config/topics.json`` attributes say ``queue.type=BatchCQ``."""
    topics = config_files.load(Path(root), config_files.TOPICS) or {}
    out = set()
    for name, conf in topics.items():
        attrs = conf.get("attributes") or {}
        if not isinstance(attrs, dict):
            continue
        value = attrs.get(QUEUE_TYPE_KEY, attrs.get("+" + QUEUE_TYPE_KEY))
        if isinstance(value, str) and value == BATCH_CQ:
            out.add(name)
    return out


@dataclass
class BatchQueue:
    """The units of one batch queue directory: the valid prefix the broker's recovery keeps,
    ``units`` a structured array of :data:`BCQ_DTYPE`.  ``problems`` lists what recovery would
    cut off or refuse (files of the wrong size or name, units after the first invalid one)."""

    directory: Path
    topic: str
    queue_id: int
    file_size: int
    files: list[Path]
    units: np.ndarray
    problems: list[str] = field(default_factory=list)
    sparse: bool = False

    @property
    def min_offset(self) -> int:
        return int(self.units["msg_base_offset"][0]) if len(self.units) else 0

    @property
    def max_offset(self) -> int:
        """One past the last queue offset covered (the broker's ``maxOffsetInQueue``)."""
        if not len(self.units):
            return 0
        return int(self.units["msg_base_offset"][-1]) + int(self.units["batch_size"][-1])

    @property
    def messages(self) -> int:
        return int(self.units["batch_size"].astype(np.int64).sum())

    def unit(self, i: int) -> BatchCQUnit:
        u = self.units[i]
        return BatchCQUnit(*(int(u[name]) for name in BCQ_DTYPE.names))

    def find(self, queue_offset: int) -> int:
        """Index of the unit covering ``queue_offset`` (binary search on msgBaseOffset, as the
        broker's ``getBatchMsgIndexBuffer``); :class:`OffsetOutOfRangeError` when none does."""
        bases = self.units["msg_base_offset"]
        i = int(np.searchsorted(bases, queue_offset, side="right")) - 1
        if i < 0 or not self.unit(i).covers(queue_offset):
            raise OffsetOutOfRangeError(f"queue offset {queue_offset} is not in batch queue {self.topic}/{self.queue_id} "
                                        f"[{self.min_offset}, {self.max_offset})")
        return i

    def lookup(self, queue_offset: int) -> BatchCQUnit:
        return self.unit(self.find(queue_offset))


def find_py(units: np.ndarray, queue_offset: int) -> int:
    """Pure-Python twin of :meth:`BatchQueue.find` (-1 when no unit covers the offset)."""
    lo, hi = 0, len(units) - 1
    found = -1
    while lo <= hi:
        mid = (lo + hi) // 2
        if int(units[mid]["msg_base_offset"]) <= queue_offset:
            found = mid
            lo = mid + 1
        else:
            hi = mid - 1
    if found >= 0 and queue_offset < int(units[found]["msg_base_offset"]) + int(units[found]["batch_size"]):
        return found
    return -1


def _segment_files(directory: Path) -> tuple[list[Path], list[str]]:
    files, problems = [], []
    for p in sorted(directory.iterdir()):
        if p.is_file() and _NAME.match(p.name):
            files.append(p)
        else:
            problems.append(f"{p}: not a batch queue file (20-digit offset name)")
    return files, problems


def load_queue(directory: Path, topic: str, queue_id: int, file_size: int | None = None, *,
               sparse: bool = False) -> BatchQueue:
    """Read one batch queue (or a compaction store's sparse queue) directory, read-only."""
    directory = Path(directory)
    if not directory.is_dir():
        raise StoreNotFoundError(f"batch queue {topic}/{queue_id} does not exist", path=str(directory))
    files, problems = _segment_files(directory)
    if file_size is None:
        file_size = files[0].stat().st_size if files else DEFAULT_BCQ_FILE_SIZE
    if file_size <= 0 or file_size % BCQ_UNIT_SIZE:
        problems.append(f"{directory}: file size {file_size} is not a whole number of {BCQ_UNIT_SIZE}-byte units")
        file_size = max(BCQ_UNIT_SIZE, file_size // BCQ_UNIT_SIZE * BCQ_UNIT_SIZE)
    parts: list[np.ndarray] = []
    first = int(files[0].name) if files else 0
    for k, path in enumerate(files):
        if int(path.name) != first + k * file_size:
            problems.append(f"{path}: name says offset {int(path.name)}, expected {first + k * file_size} "
                            f"({file_size}-byte files)")
            break
        data = path.read_bytes()
        if len(data) != file_size:
            problems.append(f"{path}: {len(data)} bytes, expected {file_size}")
        units = units_view(data[: file_size])
        n = valid_prefix(units)
        parts.append(units[:n].copy())
        if n < file_size // BCQ_UNIT_SIZE:
            rest = units[n:]
            if len(rest) and (rest.view(np.uint8) != 0).any() and not sparse:
                first_bad = units[n]
                problems.append(f"{path}: unit {n} fails the recovery rule (phyOffset {int(first_bad['offset'])}, "
                                f"size {int(first_bad['size'])}, msgBaseOffset {int(first_bad['msg_base_offset'])}, "
                                f"batchSize {int(first_bad['batch_size'])}): it and what follows are cut off")
            if k + 1 < len(files):
                problems.append(f"{directory}: {len(files) - k - 1} file(s) after the end of the valid units "
                                f"(the broker truncates them)")
            break
    units = np.concatenate(parts) if parts else np.empty(0, BCQ_DTYPE)
    return BatchQueue(directory, topic, int(queue_id), file_size, files, units, problems, sparse)


def _queue_dirs(base: Path) -> Iterator[tuple[str, int, Path]]:
    if not base.is_dir():
        return
    for tdir in sorted(base.iterdir()):
        if not tdir.is_dir():
            continue
        for qdir in sorted(tdir.iterdir()):
            if qdir.is_dir() and qdir.name.isdigit():
                yield tdir.name, int(qdir.name), qdir


def load_batch_queues(root: Path, file_size: int | None = None) -> dict[tuple[str, int], BatchQueue]:
    """Every ``batchconsumequeue/<topic>/<queue>`` of the store."""
    return {(t, q): load_queue(d, t, q, file_size) for t, q, d in _queue_dirs(Path(root) / BCQ_DIR)}


def load_compaction_queues(root: Path, file_size: int | None = None) -> dict[tuple[str, int], BatchQueue]:
    """Every ``compaction/compactionCq/<topic>/<queue>`` (sparse units: the queue offsets kept by
    compaction, each ``batchSize`` 1, ``phyOffset`` into the compactionLog)."""
    base = Path(root) / COMPACTION_DIR / COMPACTION_CQ_DIR
    return {(t, q): load_queue(d, t, q, file_size, sparse=True) for t, q, d in _queue_dirs(base)}


def compaction_log(root: Path, topic: str, queue_id: int, file_size: int | None = None) -> CommitLog:
    """The compactionLog of one queue, opened read-only (CommitLog record format)."""
    d = Path(root) / COMPACTION_DIR / COMPACTION_LOG_DIR / topic / str(int(queue_id))
    if not d.is_dir():
        raise StoreNotFoundError(f"no compactionLog for {topic}/{queue_id}", path=str(d))
    if file_size is None:
        names = sorted(p for p in d.iterdir() if p.is_file() and _NAME.match(p.name))
        file_size = names[0].stat().st_size if names else DEFAULT_COMPACTION_LOG_FILE_SIZE
    cl = CommitLog(d, max(file_size, 64), read_only=True)
    cl.load()
    return cl


def position_checkpoint(root: Path) -> dict[str, int]:
    """``compaction/position-checkpoint``: JSON ``{"queueOffsetMap": {"<topic>_<queueId>": offset}}``
    (the CommitLog-queue offset up to which each queue has been compacted)."""
    path = Path(root) / COMPACTION_DIR / POSITION_CHECKPOINT
    if not path.is_file():
        return {}
    text = config_files.read_text(path)
    if not text.strip():
        return {}
    try:
        doc = json.loads(text)
    except ValueError as exc:
        raise CorruptDataError(f"not JSON: {exc}", path=str(path)) from None
    table = doc.get("queueOffsetMap") if isinstance(doc, dict) else None
    if not isinstance(table, dict) or not all(isinstance(v, int) and not isinstance(v, bool) for v in table.values()):
        raise CorruptDataError("expected {\"queueOffsetMap\": {\"topic_queueId\": offset, ...}}", path=str(path))
    return {str(k): int(v) for k, v in table.items()}


# ---------------------------------------------------------------------------------- dispatch rule
def batch_fields(rec: MessageRecord) -> tuple[int, int] | None:
    """``(msgBaseOffset, batchSize)`` of a record dispatched to a batch queue: both properties
    ``INNER_BASE`` and ``INNER_NUM`` present (else the broker leaves msgBaseOffset at -1 and the
    batch queue skips the record).  A value Java cannot parse is a :class:`CorruptDataError`."""
    props = rec.properties
    if PROPERTY_INNER_NUM not in props or PROPERTY_INNER_BASE not in props:
        return None
    base_text, num_text = props[PROPERTY_INNER_BASE], props[PROPERTY_INNER_NUM]
    if not _JAVA_INT.match(base_text) or not _JAVA_INT.match(num_text):
        raise CorruptDataError(f"INNER_BASE={props[PROPERTY_INNER_BASE]!r} / INNER_NUM={props[PROPERTY_INNER_NUM]!r} "
                               f"are not numbers", offset=rec.commit_log_offset)
    base, num = int(base_text), int(num_text)
    if not -(2**63) <= base < 2**63 or not -SHORT_MAX - 1 <= num <= SHORT_MAX:
        raise CorruptDataError(f"INNER_BASE={base} / INNER_NUM={num} out of range", offset=rec.commit_log_offset)
    if base < 0 or num < 0:
        return None
    return base, num


def expected_units(commit_log: CommitLog, topics: set[str]) -> tuple[dict[tuple[str, int], np.ndarray], list[str]]:
    """The batch queue units the broker's dispatch writes for ``topics`` from the CommitLog, in
    CommitLog order, and the problems (records whose batch properties cannot be parsed)."""
    rows: dict[tuple[str, int], list[tuple[int, ...]]] = {}
    problems: list[str] = []
    if not topics:
        return {}, problems
    for batch in commit_log.scan(commit_log.min_offset):
        if not len(batch):
            continue
        want = np.array([t in topics for t in batch.topics], dtype=bool)
        sel = np.flatnonzero(want[batch.topic_id] & batch.cq_mask()) if len(want) else np.empty(0, np.int64)
        for r in sel:
            off = int(batch.commit_log_offset[r])
            try:
                rec = commit_log.read_record(off)
                got = batch_fields(rec)
            except MqStoreError as exc:
                problems.append(f"CommitLog offset {off}: {exc}")
                continue
            if got is None:
                continue
            rows.setdefault((rec.topic, rec.queue_id), []).append(
                (off, int(batch.size[r]), int(batch.tags_code[r]), int(batch.store_timestamp[r]), got[0], got[1],
                 INVALID_COMPACTED_OFFSET, 0))
    return {k: np.array(v, dtype=BCQ_DTYPE) for k, v in rows.items()}, problems


# ---------------------------------------------------------------------------------------- verify
def verify_queue(q: BatchQueue, log: CommitLog) -> list[str]:
    """Problems of one batch queue against the log its units point into."""
    problems = list(q.problems)
    u = q.units
    name = f"{'compactionCq' if q.sparse else 'batchconsumequeue'} {q.topic}/{q.queue_id}"
    if len(u) > 1:
        bases = u["msg_base_offset"].astype(np.int64)
        ends = bases + u["batch_size"].astype(np.int64)
        if q.sparse:
            bad = np.flatnonzero(bases[1:] < ends[:-1])
            what = "overlaps the previous unit"
        else:
            bad = np.flatnonzero(bases[1:] != ends[:-1])
            what = "does not continue the previous unit"
        for i in bad[:20]:
            problems.append(f"{name}: unit {i + 1} msgBaseOffset {int(bases[i + 1])} {what} (ends at {int(ends[i])})")
        phy = u["offset"].astype(np.int64)
        for i in np.flatnonzero(phy[1:] <= phy[:-1])[:20]:
            problems.append(f"{name}: unit {i + 1} phyOffset {int(phy[i + 1])} is not after the previous unit's")
    for i in range(len(u)):
        unit = q.unit(i)
        where = f"{name}: unit {i} (phyOffset {unit.commit_log_offset})"
        try:
            rec = log.read_record(unit.commit_log_offset)
        except MqStoreError as exc:
            problems.append(f"{where}: {exc}")
            continue
        if rec.total_size != unit.size:
            problems.append(f"{where}: size {unit.size}, the record is {rec.total_size} bytes")
        if rec.topic != q.topic or rec.queue_id != q.queue_id:
            problems.append(f"{where}: the record belongs to {rec.topic}/{rec.queue_id}")
        if rec.store_timestamp != unit.store_time:
            problems.append(f"{where}: storeTime {unit.store_time}, the record says {rec.store_timestamp}")
        if q.sparse:
            if rec.queue_offset != unit.msg_base_offset:
                problems.append(f"{where}: msgBaseOffset {unit.msg_base_offset}, the record's queue offset is "
                                f"{rec.queue_offset}")
            continue
        try:
            got = batch_fields(rec)
        except MqStoreError as exc:
            problems.append(f"{where}: {exc}")
            continue
        if got is None:
            problems.append(f"{where}: the record has no INNER_BASE/INNER_NUM properties")
        elif got != (unit.msg_base_offset, unit.batch_size):
            problems.append(f"{where}: msgBaseOffset/batchSize {unit.msg_base_offset}/{unit.batch_size}, the record "
                            f"says {got[0]}/{got[1]}")
    return problems


@dataclass
class BatchVerifyReport:
    queues: int = 0
    units: int = 0
    messages: int = 0
    compaction_queues: int = 0
    compaction_units: int = 0
    problems: list[str] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return not self.problems


def verify_batch_store(root: Path, commit_log: CommitLog, *, bcq_file_size: int | None = None,
                       compaction_cq_file_size: int | None = None) -> BatchVerifyReport:
    """Verify every batch queue against the CommitLog (and that each BatchCQ topic's records all
    have their unit), and every compaction queue against its compactionLog."""
    root = Path(root)
    rep = BatchVerifyReport()
    try:
        topics = batch_cq_topics(root)
    except MqStoreError as exc:
        rep.problems.append(str(exc))
        topics = set()
    queues = load_batch_queues(root, bcq_file_size)
    for q in queues.values():
        rep.queues += 1
        rep.units += len(q.units)
        rep.messages += q.messages
        rep.problems.extend(verify_queue(q, commit_log))
        if topics and q.topic not in topics:
            rep.problems.append(f"batchconsumequeue {q.topic}/{q.queue_id}: topic is not queue.type=BatchCQ in "
                                f"config/topics.json")
    expected, problems = expected_units(commit_log, topics)
    rep.problems.extend(problems)
    for (t, qid), units in sorted(expected.items()):
        have = queues.get((t, qid))
        n = 0 if have is None else len(have.units)
        if n < len(units):
            rep.problems.append(f"batchconsumequeue {t}/{qid}: {len(units) - n} CommitLog batch record(s) from "
                                f"offset {int(units['offset'][n])} have no unit")
    for (t, qid), q in load_compaction_queues(root, compaction_cq_file_size).items():
        rep.compaction_queues += 1
        rep.compaction_units += len(q.units)
        try:
            log = compaction_log(root, t, qid)
        except MqStoreError as exc:
            rep.problems.append(f"compactionCq {t}/{qid}: {exc}")
            continue
        try:
            rep.problems.extend(verify_queue(q, log))
        finally:
            log.close()
    try:
        position_checkpoint(root)
    except MqStoreError as exc:
        rep.problems.append(str(exc))
    return rep


# --------------------------------------------------------------------------------------- rebuild
def write_queue_files(directory: Path, units: np.ndarray, file_size: int) -> int:
    """Write ``units`` as the broker's pre-allocated, zero-filled segment files of ``file_size``
    bytes named by their 20-digit logical start offset.  Each file is fsynced.  Returns files."""
    if file_size % BCQ_UNIT_SIZE:
        raise InvalidArgumentError(f"batch queue file size {file_size} is not a multiple of {BCQ_UNIT_SIZE}")
    data = np.ascontiguousarray(units.astype(BCQ_DTYPE)).tobytes()
    directory.mkdir(parents=True, exist_ok=True)
    per = file_size
    nfiles = max(1, -(-len(data) // per))
    for k in range(nfiles):
        chunk = data[k * per:(k + 1) * per]
        with open(directory / f"{k * per:020d}", "wb") as f:
            f.write(chunk)
            if len(chunk) < per:
                f.truncate(per)
            f.flush()
            os.fsync(f.fileno())
    return nfiles


def rebuild_batch_queues(root: Path, commit_log: CommitLog, out: Path | None = None, *,
                         file_size: int = DEFAULT_BCQ_FILE_SIZE) -> tuple[int, int, list[str]]:
    """Regenerate ``batchconsumequeue/`` for the store's BatchCQ topics from the CommitLog, into
    ``out`` (default: in place, built in a hidden directory and swapped in when complete).
    Returns ``(queues, units, problems)``."""
    root = Path(root)
    topics = batch_cq_topics(root)
    expected, problems = expected_units(commit_log, topics)
    in_place = out is None or Path(out).resolve() == root.resolve()
    import tempfile  # (only the in-place rebuild: not imported by the readers)

    target_root = Path(tempfile.mkdtemp(prefix=".rebuild-bcq-", dir=root)) if in_place else Path(out)  # type: ignore[arg-type]
    try:
        base = target_root / BCQ_DIR
        for (t, qid), units in sorted(expected.items()):
            try:
                validate_topic(t)
            except MqStoreError as exc:
                problems.append(f"topic {t!r}: not written ({exc})")
                continue
            write_queue_files(ensure_inside(target_root, base / t / str(int(qid))), units, file_size)
        if in_place:
            old = root / BCQ_DIR
            if old.exists():
                shutil.rmtree(old)
            if base.exists():
                os.replace(base, old)
    finally:
        if in_place:
            shutil.rmtree(target_root, ignore_errors=True)
    return len(expected), sum(len(u) for u in expected.values()), problems


def detect_file_size(root: Path) -> int | None:
    """The size of the store's existing batch queue files (the first one found), if any."""
    for _t, _q, d in _queue_dirs(Path(root) / BCQ_DIR):
        for p in sorted(d.iterdir()):
            if p.is_file() and _NAME.match(p.name) and p.stat().st_size:
                return p.stat().st_size
    return None


def rebuild_store_batch_queues(root: Path, config: StoreConfig, out: Path | None = None,
                               file_size: int | None = None) -> tuple[int, int, list[str]]:
    """:func:`rebuild_batch_queues` for ``mqstore rocketmq rebuild-index``: nothing is written
    (and an existing ``batchconsumequeue/`` is left alone) when topics.json names no BatchCQ
    topic.  The file size: ``file_size``, else the store's current files', else the default."""
    from mqstore.storage.locks import StoreLock
    from mqstore.storage.rocketmq.dledger import open_commit_log

    root = Path(root)
    if not batch_cq_topics(root):
        return 0, 0, []
    size = file_size or detect_file_size(root) or DEFAULT_BCQ_FILE_SIZE
    if size % BCQ_UNIT_SIZE:
        raise InvalidArgumentError(f"batch queue file size {size} is not a multiple of {BCQ_UNIT_SIZE}")
    cl = open_commit_log(root, config)
    try:
        if out is None or Path(out).resolve() == root.resolve():
            with StoreLock(root):
                return rebuild_batch_queues(root, cl, None, file_size=size)
        return rebuild_batch_queues(root, cl, Path(out), file_size=size)
    finally:
        cl.close()
