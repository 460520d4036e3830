"""LMQ / multi-dispatch: the one home of the store's rules (see ``docs/formats/rocketmq-lmq.md``).

* Put (the broker's ``LmqDispatch.wrapLmqDispatch`` / ``updateLmqOffsets``): with ``enableLmq``, a
  message of a topic that allows LMQ whose ``INNER_MULTI_DISPATCH`` is not blank gets, for each
  ``%LMQ%`` name, the next queue offset of queue ``(name, 0)`` written into
  ``INNER_MULTI_QUEUE_OFFSET``; the queues' next offsets then advance by one.
* Dispatch (``ConsumeQueue.multiDispatchLmqQueue``): with ``enableMultiDispatch``, after a record's
  own ConsumeQueue unit, every entry of its two properties becomes a unit (the record's CommitLog
  offset, size and tags code) of queue ``(name, 0)`` for an LMQ name (``enableLmq``), else
  ``(name, the record's queue id)``, at the queue offset the property gives.

:func:`cq_units` gives every ConsumeQueue unit of a dispatch batch (own and multi-dispatch, in
CommitLog order): the live dispatch, ``rebuild-index``, the Spark rebuild and the recovery of the
queue table all take their units from it.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field

import numpy as np

from mqstore.errors import InvalidArgumentError, InvalidTopicError
from mqstore.formats.rocketmq.lmq import (
    LMQ_QUEUE_ID,
    PROPERTY_INNER_MULTI_DISPATCH,
    PROPERTY_INNER_MULTI_QUEUE_OFFSET,
    MalformedMultiDispatchError,
    dispatch_pairs,
    format_queue_offsets,
    is_blank,
    is_lmq,
    parse_multi_dispatch,
    topic_allows_lmq,
)
from mqstore.kernels.rocketmq.scan import DispatchBatch
from mqstore.storage.rocketmq.config import validate_topic

__all__ = [
    "READER_RULE",
    "CQUnits",
    "MultiDispatchProblem",
    "MultiDispatchRule",
    "cq_units",
    "multi_dispatch_problems",
    "multi_units",
    "names_queue",
    "record_queue_positions",
]


@dataclass(frozen=True, slots=True)
class MultiDispatchRule:
    """``enableLmq`` / ``enableMultiDispatch`` of a store (both off by default, as the broker)."""

    enable_lmq: bool = False
    enable_multi_dispatch: bool = False
    max_lmq_consume_queue_num: int = 20_000

    @classmethod
    def of(cls, config: object) -> MultiDispatchRule:
        return cls(bool(getattr(config, "enable_lmq", False)), bool(getattr(config, "enable_multi_dispatch", False)),
                   int(getattr(config, "max_lmq_consume_queue_num", 20_000)))

    @property
    def dispatches(self) -> bool:
        return self.enable_multi_dispatch

    def wants_assignment(self, topic: str, queues: str | None) -> bool:
        """The put side: ``enableLmq && needDispatchLMQ()``."""
        return self.enable_lmq and not is_blank(queues) and topic_allows_lmq(topic)


#: what a reader accepts: the units a broker with both settings on would have written
READER_RULE = MultiDispatchRule(True, True)


# ----------------------------------------------------------------------------------- dispatch
@dataclass(slots=True)
class CQUnits:
    """ConsumeQueue units in CommitLog order (own unit of a record first, then its multi-dispatch
    units in property order).  ``topic_id`` indexes ``topics``; ``multi`` marks the
    multi-dispatch units (written with the plain tags code, never through a ConsumeQueueExt)."""

    topics: list[str]
    topic_id: np.ndarray  # int32
    queue_id: np.ndarray  # int32
    commit_log_offset: np.ndarray  # int64
    size: np.ndarray  # int32
    tags_code: np.ndarray  # int64
    queue_offset: np.ndarray  # int64
    store_timestamp: np.ndarray  # int64
    multi: np.ndarray  # bool
    problems: list[tuple[int, str]] = field(default_factory=list)  # (commit log offset, what)

    def __len__(self) -> int:
        return len(self.commit_log_offset)

    def groups(self) -> Iterator[tuple[str, int, np.ndarray]]:
        """``(topic, queue id, rows)`` per queue, rows in CommitLog order."""
        for tid, qid, rows in queue_groups(self.topic_id, self.queue_id):
            yield self.topics[tid], qid, rows


def queue_groups(topic_id: np.ndarray, queue_id: np.ndarray) -> Iterator[tuple[int, int, np.ndarray]]:
    """``(topic id, queue id, rows)`` per queue of ConsumeQueue rows, rows in their order (the
    dispatch's per-queue grouping: the live dispatch, the local and the Spark rebuild)."""
    if not len(topic_id):
        return
    tid = np.asarray(topic_id)
    qid = np.asarray(queue_id)
    qmin, qmax, tmax = int(qid.min()), int(qid.max()), int(tid.max())
    if qmin >= 0 and int(tid.min()) >= 0 and (tmax + 1) * (qmax + 1) <= 1 << 16:
        # the usual batch (few topics and queues): a 16-bit code, which numpy's stable sort sorts
        # by radix in one pass (a 64-bit key takes a merge sort); same order
        keys = tid.astype(np.int64) * (qmax + 1) + qid
        order = np.argsort(keys.astype(np.uint16), kind="stable")
    else:
        keys = tid.astype(np.int64) * (1 << 32) + (qid.astype(np.int64) & 0xFFFFFFFF)
        order = np.argsort(keys, kind="stable")
    bounds = np.flatnonzero(np.diff(keys[order])) + 1
    for grp in np.split(order, bounds):
        r0 = int(grp[0])
        yield int(topic_id[r0]), int(queue_id[r0]), grp


def _multi_entries(batch: DispatchBatch, rule: MultiDispatchRule, cq: np.ndarray,
                   problems: list[tuple[int, str]]) -> list[tuple[int, str, int, int]]:
    """``(row, queue name, queue id, queue offset)`` of the multi-dispatch units of a batch: the
    broker's ``checkMultiDispatchQueue`` (multi-dispatch on, a ConsumeQueue record of a topic that
    allows LMQ, neither property blank), then ``multiDispatchLmqQueue`` (:func:`dispatch_pairs`;
    queue 0 for an LMQ name with ``enableLmq``, else the record's queue id)."""
    out: list[tuple[int, str, int, int]] = []
    if not rule.dispatches or not len(batch.multi_row):
        return out
    rows = batch.multi_row
    allowed = [topic_allows_lmq(t) for t in batch.topics]
    ok = cq[rows].tolist()
    tids = batch.topic_id[rows].tolist()
    qids = batch.queue_id[rows].tolist()
    offs = batch.commit_log_offset[rows].tolist()
    lmq_on = rule.enable_lmq
    for k, (row, (queues, offsets)) in enumerate(zip(rows.tolist(), batch.multi_value, strict=True)):
        if not ok[k] or not allowed[tids[k]] or is_blank(queues) or is_blank(offsets):
            continue  # MultiDispatchUtils.checkMultiDispatchQueue
        assert offsets is not None
        fast = _fast_names(queues)
        if fast is not None:  # the common case: valid names, plain decimal offsets
            pieces = offsets.split(",")
            if len(pieces) == len(fast[0]) and all(p.isascii() and p.isdigit() and len(p) <= 18 for p in pieces):
                q = qids[k]
                out.extend((row, n, LMQ_QUEUE_ID if lmq and lmq_on else q, int(p))
                           for n, lmq, p in zip(fast[0], fast[1], pieces, strict=True))
                continue
        pairs, why = dispatch_pairs(queues, offsets)
        if why:
            problems.extend((offs[k], w) for w in why)
        for name, qoff in pairs:
            bad = _name_problem(name)
            if bad is not None:
                # the broker would create a directory of that name; mqstore never writes outside
                # the store or under a name no reader accepts
                problems.append((offs[k], f"multi-dispatch queue {name!r} not written: {bad}"))
                continue
            out.append((row, name, LMQ_QUEUE_ID if lmq_on and is_lmq(name) else qids[k], qoff))
    return out


@functools.lru_cache(maxsize=1 << 14)
def _fast_names(queues: str) -> tuple[tuple[str, ...], tuple[bool, ...]] | None:
    """The names of an ``INNER_MULTI_DISPATCH`` value and whether each is an LMQ name, when the
    value has no trailing comma and every name is a valid queue name without ``/`` (else
    ``None``: the exact path decides)."""
    names = queues.split(",")
    if not names[-1] or any("/" in n or _name_problem(n) is not None for n in names):
        return None
    return tuple(names), tuple(is_lmq(n) for n in names)


@functools.lru_cache(maxsize=1 << 16)
def _name_problem(name: str) -> str | None:
    """Why ``name`` cannot be a ConsumeQueue directory (``None``: it can)."""
    try:
        validate_topic(name)
    except InvalidArgumentError as exc:
        return str(exc)
    return None


def cq_units(batch: DispatchBatch, rule: MultiDispatchRule | None = None) -> CQUnits:
    """Every ConsumeQueue unit of ``batch`` (records of transaction type NOT or COMMIT), with the
    multi-dispatch units ``rule`` asks for."""
    cq = batch.cq_mask()
    rows = np.flatnonzero(cq)
    problems: list[tuple[int, str]] = []
    extra = _multi_entries(batch, rule, cq, problems) if rule is not None else []
    topics = list(batch.topics)
    if not extra and len(rows) == len(cq):  # every record gets its unit (the usual batch): the columns as they are
        return CQUnits(topics, batch.topic_id, batch.queue_id, batch.commit_log_offset, batch.size, batch.tags_code,
                       batch.queue_offset, batch.store_timestamp, np.zeros(len(rows), np.bool_), problems)
    if not extra:
        return CQUnits(topics, batch.topic_id[rows], batch.queue_id[rows], batch.commit_log_offset[rows],
                       batch.size[rows], batch.tags_code[rows], batch.queue_offset[rows],
                       batch.store_timestamp[rows], np.zeros(len(rows), np.bool_), problems)
    tid_of = {t: i for i, t in enumerate(topics)}
    m = len(extra)
    m_row = np.fromiter((e[0] for e in extra), np.int64, m)
    m_tid = np.empty(m, np.int32)
    for i, e in enumerate(extra):
        t = tid_of.get(e[1])
        if t is None:
            t = tid_of[e[1]] = len(topics)
            topics.append(e[1])
        m_tid[i] = t
    m_qid = np.fromiter((e[2] for e in extra), np.int32, m)
    m_qoff = np.fromiter((e[3] for e in extra), np.int64, m)
    all_rows = np.concatenate([rows, m_row])
    # CommitLog order: by record, its own unit first, then its multi-dispatch units in order
    order = np.lexsort((np.r_[np.zeros(len(rows), np.int64), np.arange(1, m + 1, dtype=np.int64)], all_rows))
    r = all_rows[order]
    return CQUnits(
        topics,
        np.concatenate([batch.topic_id[rows], m_tid])[order],
        np.concatenate([batch.queue_id[rows], m_qid])[order],
        batch.commit_log_offset[r], batch.size[r], batch.tags_code[r],
        np.concatenate([batch.queue_offset[rows], m_qoff])[order],
        batch.store_timestamp[r],
        np.r_[np.zeros(len(rows), np.bool_), np.ones(m, np.bool_)][order],
        problems,
    )


# ----------------------------------------------------------------------------------- verify/read
def multi_units(batch: DispatchBatch, rule: MultiDispatchRule | None = None) -> list[tuple[int, str, int, int]]:
    """``(row, queue, queue id, queue offset)`` of the multi-dispatch units of ``batch`` (default:
    the :data:`READER_RULE`, what a broker with both settings on wrote)."""
    if not len(batch.multi_row):
        return []
    return _multi_entries(batch, rule or READER_RULE, batch.cq_mask(), [])


@dataclass(frozen=True, slots=True)
class MultiDispatchProblem:
    commit_log_offset: int
    message: str


def multi_dispatch_problems(batches: Iterator[DispatchBatch], rule: MultiDispatchRule) -> list[MultiDispatchProblem]:
    """What the dispatch of ``batches`` could not write (malformed properties, bad names)."""
    out: list[MultiDispatchProblem] = []
    for batch in batches:
        out.extend(MultiDispatchProblem(o, w) for o, w in cq_units(batch, rule).problems)
    return out


def record_queue_positions(topic: str, queue_id: int, properties: dict[str, str], *,
                           enable_lmq: bool = True) -> list[tuple[str, int, int]]:
    """``(queue, queue id, queue offset)`` of the multi-dispatch units a record's properties ask
    for (a reader checks that a unit points at a record that names it); ``enable_lmq``: LMQ names
    use queue 0.  Malformed values give no positions."""
    queues = properties.get(PROPERTY_INNER_MULTI_DISPATCH)
    offsets = properties.get(PROPERTY_INNER_MULTI_QUEUE_OFFSET)
    if is_blank(queues) or is_blank(offsets):
        return []
    assert queues is not None and offsets is not None
    pairs, _ = dispatch_pairs(queues, offsets)
    return [(n, LMQ_QUEUE_ID if enable_lmq and is_lmq(n) else queue_id, o) for n, o in pairs if _valid_name(n)]


def _valid_name(name: str) -> bool:
    return _name_problem(name) is None


def names_queue(queues: str, offsets: str | None, name: str) -> bool:
    """Whether raw ``INNER_MULTI_DISPATCH`` / ``INNER_MULTI_QUEUE_OFFSET`` values give the record a
    unit in queue ``name`` (``dump --topic %LMQ%...``)."""
    if is_blank(offsets) or name not in queues:
        return False
    assert offsets is not None
    return any(n == name for n, _ in dispatch_pairs(queues, offsets)[0])


# ----------------------------------------------------------------------------------- put
def lmq_names_for_put(topic: str, properties: dict[str, str], rule: MultiDispatchRule) -> list[str] | None:
    """The queue names of a message to put, checked; ``None`` when the put assigns nothing.

    Refuses (typed errors, nothing written) what the broker would store but never dispatch
    correctly: names that are not valid topic names, names that are not LMQ names (the broker
    stores an empty offset for them, which its dispatch cannot parse), and a name given twice (the
    broker would assign both the same offset and leave a hole in the queue)."""
    queues = properties.get(PROPERTY_INNER_MULTI_DISPATCH)
    if not rule.wants_assignment(topic, queues):
        return None
    assert queues is not None
    names = parse_multi_dispatch(queues)
    if not names:
        raise MalformedMultiDispatchError(f"{PROPERTY_INNER_MULTI_DISPATCH} {queues!r} names no queue")
    seen: set[str] = set()
    for n in names:
        if not is_lmq(n):
            raise MalformedMultiDispatchError(
                f"{PROPERTY_INNER_MULTI_DISPATCH} queue {n!r} is not an LMQ name (it must start with %LMQ%)")
        try:
            validate_topic(n)
        except InvalidTopicError as exc:
            raise MalformedMultiDispatchError(f"{PROPERTY_INNER_MULTI_DISPATCH} queue {n!r}: {exc}") from None
        if n in seen:
            raise MalformedMultiDispatchError(f"{PROPERTY_INNER_MULTI_DISPATCH} names queue {n!r} twice")
        seen.add(n)
    return names


def assign_lmq_offsets(names: list[str],
                       next_offset: Callable[[tuple[str, int]], int]) -> tuple[str, dict[tuple[str, int], int]]:
    """The ``INNER_MULTI_QUEUE_OFFSET`` value of a message for ``names`` (each queue's next offset,
    ``next_offset((name, 0))``) and the queues' advanced next offsets (one more each)."""
    offs = []
    advanced: dict[tuple[str, int], int] = {}
    for n in names:
        key = (n, LMQ_QUEUE_ID)
        o = next_offset(key)
        offs.append(o)
        advanced[key] = o + 1
    return format_queue_offsets(offs), advanced


def lmq_queue_count(queues: Iterable[tuple[str, int]]) -> int:
    """How many LMQ queues a queue table (or any iterable of ``(topic, queue id)``) holds."""
    return sum(1 for t, _q in queues if is_lmq(t))
