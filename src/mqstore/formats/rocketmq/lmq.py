"""LMQ (light message queue) / multi-dispatch properties of a RocketMQ record (pure codec).

A record naming extra queues in ``INNER_MULTI_DISPATCH`` (comma-separated queue names, e.g.
``%LMQ%a,%LMQ%b``) carries in ``INNER_MULTI_QUEUE_OFFSET`` the queue offset the broker assigned it
in each of them (comma-separated decimal numbers, same order).  An LMQ is a queue whose name
starts with ``%LMQ%``; it has one queue, id 0.  See ``docs/formats/rocketmq-lmq.md``.

The split follows Java's ``String.split(",")``: empty pieces are kept except at the end (trailing
empty pieces are dropped), so ``"a,,b"`` has three pieces and ``"a,b,"`` two.
"""

from __future__ import annotations

from collections.abc import Sequence

from mqstore.errors import InvalidArgumentError

PROPERTY_INNER_MULTI_DISPATCH = "INNER_MULTI_DISPATCH"
PROPERTY_INNER_MULTI_QUEUE_OFFSET = "INNER_MULTI_QUEUE_OFFSET"
MULTI_DISPATCH_SEPARATOR = ","
LMQ_PREFIX = "%LMQ%"
LMQ_QUEUE_ID = 0
RETRY_GROUP_TOPIC_PREFIX = "%RETRY%"
SYSTEM_TOPIC_PREFIX = "rmq_sys_"
SCHEDULE_TOPIC = "SCHEDULE_TOPIC_XXXX"
#: maxLmqConsumeQueueNum: puts with multi-dispatch are refused once the store has more LMQ queues
DEFAULT_MAX_LMQ_CONSUME_QUEUE_NUM = 20_000
_JAVA_LONG_MIN, _JAVA_LONG_MAX = -(2**63), 2**63 - 1


class MalformedMultiDispatchError(InvalidArgumentError):
    """An ``INNER_MULTI_DISPATCH`` / ``INNER_MULTI_QUEUE_OFFSET`` value that cannot be used."""


def is_lmq(name: str | None) -> bool:
    """``MixAll.isLmq``: the name starts with ``%LMQ%``."""
    return name is not None and name.startswith(LMQ_PREFIX)


def topic_allows_lmq(topic: str) -> bool:
    """``MixAll.topicAllowsLMQ``: retry, system (``rmq_sys_``) and schedule topics never dispatch
    to extra queues."""
    return not (topic.startswith(RETRY_GROUP_TOPIC_PREFIX) or topic.startswith(SYSTEM_TOPIC_PREFIX)
                or topic == SCHEDULE_TOPIC)


def is_blank(value: str | None) -> bool:
    """``StringUtils.isBlank``: ``None``, empty or whitespace only."""
    return value is None or not value.strip()


def java_split(value: str) -> list[str]:
    """``value.split(",")`` in Java: trailing empty pieces are removed (a value of only commas
    gives no pieces, a value without a comma is one piece, even an empty one)."""
    if MULTI_DISPATCH_SEPARATOR not in value:
        return [value]
    parts = value.split(MULTI_DISPATCH_SEPARATOR)
    while parts and parts[-1] == "":
        parts.pop()
    return parts


def parse_queue_offset(text: str) -> int:
    """``Long.parseLong``: an optional sign and decimal digits (``Character.digit``: any Unicode
    decimal digit) that fit a Java long."""
    body = text[1:] if text[:1] in ("+", "-") else text
    if not body or not body.isdecimal():
        raise MalformedMultiDispatchError(f"queue offset {text!r} is not a number")
    v = int(text)
    if not _JAVA_LONG_MIN <= v <= _JAVA_LONG_MAX:
        raise MalformedMultiDispatchError(f"queue offset {text!r} does not fit a 64-bit long")
    return v


def parse_multi_dispatch(queues: str) -> list[str]:
    """The queue names of an ``INNER_MULTI_DISPATCH`` value (Java split rules)."""
    return java_split(queues)


def format_multi_dispatch(names: Sequence[str]) -> str:
    """An ``INNER_MULTI_DISPATCH`` value; refuses names that would not split back the same."""
    for n in names:
        if not n or MULTI_DISPATCH_SEPARATOR in n:
            raise MalformedMultiDispatchError(f"invalid multi-dispatch queue name {n!r}")
    return MULTI_DISPATCH_SEPARATOR.join(names)


def parse_queue_offsets(offsets: str) -> list[str]:
    """The pieces of an ``INNER_MULTI_QUEUE_OFFSET`` value (Java split rules, not converted: a
    piece may be empty where the broker had no offset for a name)."""
    return java_split(offsets)


def format_queue_offsets(offsets: Sequence[int | None]) -> str:
    """``StringUtils.join(offsets, ",")``: ``None`` becomes an empty piece."""
    return MULTI_DISPATCH_SEPARATOR.join("" if o is None else str(int(o)) for o in offsets)


def dispatch_pairs(queues: str, offsets: str) -> tuple[list[tuple[str, int]], list[str]]:
    """``(queue name, queue offset)`` of the entries the broker's dispatch (``multiDispatchLmqQueue``)
    writes, and the problems it meets, in its order: both lists must have the same number of
    pieces (else nothing is dispatched); a name containing ``/`` (the file separator) is skipped;
    an offset that is not a number stops the dispatch of the record there (the broker's
    ``Long.parseLong`` throws: the entries before it are written, the others not)."""
    names = parse_multi_dispatch(queues)
    pieces = parse_queue_offsets(offsets)
    if len(names) != len(pieces):
        return [], [f"{len(names)} queues in {PROPERTY_INNER_MULTI_DISPATCH} but {len(pieces)} offsets in "
                    f"{PROPERTY_INNER_MULTI_QUEUE_OFFSET}"]
    out: list[tuple[str, int]] = []
    problems: list[str] = []
    for name, piece in zip(names, pieces, strict=True):
        if "/" in name:
            problems.append(f"queue name {name!r} contains '/': skipped")
            continue
        try:
            out.append((name, parse_queue_offset(piece)))
        except MalformedMultiDispatchError as exc:
            problems.append(f"{exc} (queue {name!r}): the remaining queues are not dispatched")
            break
    return out, problems
