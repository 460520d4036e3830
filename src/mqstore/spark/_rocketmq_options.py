"""Options of the ``rocketmq`` Spark source: parsing, validation and offset resolution.

Pure functions (no Spark, no files): :func:`parse_options` turns the option strings into a
:class:`RocketMQOptions`; :func:`select_topics` and :func:`resolve_queue_bounds` apply them to a
*catalogue* (what the stores hold, as plain data).  Every problem raises a subclass of
:class:`~mqstore.errors.InvalidArgumentError` whose message names the option.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from mqstore.errors import (
    InvalidArgumentError,
    OffsetOptionOutOfRangeError,
    SourceOptionError,
    UnknownTopicError,
)
from mqstore.formats.rocketmq.javahash import parse_sub_expression
from mqstore.spark._option_names import refuse_unknown

EARLIEST = -2  # rocketmq-spark / Kafka conventions inside offsets JSON
LATEST = -1

#: every option name the source takes (compared case-insensitively)
OPTION_NAMES = (
    "path", "paths", "brokerNames", "commitLogPath", "storeType",
    "topics", "topicPattern", "topic", "subscribe", "subscribePattern", "subExpression",
    "startingOffsets", "endingOffsets", "startingTimestamp", "endingTimestamp",
    "includeBody", "checkCRC", "failOnDataLoss", "minPartitions", "maxOffsetsPerTrigger", "maxBytesPerTrigger",
    # rocketmq-spark options that only make sense against a name server / broker: accepted and
    # ignored, so that a job written for rocketmq-spark runs unchanged offline
    "nameServer", "nameserver.addr", "group", "consumer.group", "pullBatchSize", "pull.max.batch.size",
    "pullTimeout", "pullTimeoutMs", "pull.timeout.ms", "fetchOffset.numRetries", "fetchOffset.retryIntervalMs",
)
#: the options that choose topics (at most one may be given)
_TOPIC_OPTIONS = ("topics", "topicPattern", "topic", "subscribe", "subscribePattern")

#: ``{topic: {brokerName: {queueId: offset}}}`` (offsets may be EARLIEST / LATEST)
QueueOffsets = dict[str, dict[str, dict[int, int]]]
#: what a set of stores holds: ``{brokerName: {(topic, queueId): (minOffset, maxOffset)}}``
Catalogue = dict[str, dict[tuple[str, int], tuple[int, int]]]
#: ``(brokerName, topic, queueId, timestamp) -> first queue offset with storeTimestamp >= timestamp``
TimeLookup = Callable[[str, str, int, int], int]


@dataclass(frozen=True, slots=True)
class RocketMQOptions:
    paths: tuple[str, ...]
    broker_names: tuple[str, ...]
    topics: tuple[str, ...] | None = None  # explicit topic names
    topic_pattern: str | None = None  # regex, matched in full
    starting_offsets: str | QueueOffsets = "earliest"  # batch: "earliest"/"latest"/per-queue JSON
    ending_offsets: str | QueueOffsets = "latest"
    starting_timestamp: int | None = None
    ending_timestamp: int | None = None
    offsets_given: bool = False  # any of the four offset/timestamp options was set
    include_body: bool = True
    check_crc: bool = False
    fail_on_data_loss: bool = True
    min_partitions: int | None = None
    max_offsets_per_trigger: int | None = None
    max_bytes_per_trigger: int | None = None
    stream_starting: str | dict[str, int] = "latest"  # streaming: "earliest"/"latest"/{broker: offset}
    # commitLogPath: per store, its CommitLog directory or comma-separated directories (None: STORE/commitlog)
    commit_log_paths: tuple[str | None, ...] = ()
    # storeType: where the stores' ConsumeQueues live (None: decided from each store's files)
    store_type: str | None = None
    # subExpression: the tags selected ("TagA || TagB"; None: every message)
    tags: frozenset[str] | None = None
    topics_option: str = "topics"  # the option the topic selection came from (for messages)

    def commit_log_of(self, index: int) -> str | None:
        return self.commit_log_paths[index] if index < len(self.commit_log_paths) else None

    def topic_selected(self, topic: str) -> bool:
        if self.topics is not None:
            return topic in self.topics
        if self.topic_pattern is not None:
            return re.fullmatch(self.topic_pattern, topic) is not None
        return True


def _get(options: Mapping[str, str], name: str) -> str | None:
    low = name.lower()
    for k, v in options.items():
        if k.lower() == low:
            return None if v is None else str(v)
    return None


def _parse_list(name: str, text: str) -> list[str]:
    text = text.strip()
    if text.startswith("["):
        try:
            value = json.loads(text)
        except json.JSONDecodeError as exc:
            raise SourceOptionError(f"option {name} is not valid JSON: {exc}") from exc
        if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
            raise SourceOptionError(f"option {name} must be a JSON list of strings, got {text!r}")
        items = [v.strip() for v in value]
    else:
        items = [v.strip() for v in text.split(",")]
    if not items or any(not v for v in items):
        raise SourceOptionError(f"option {name} has an empty entry: {text!r}")
    return items


def _parse_bool(name: str, text: str | None, default: bool) -> bool:
    if text is None:
        return default
    t = text.strip().lower()
    if t in ("true", "1", "yes"):
        return True
    if t in ("false", "0", "no"):
        return False
    raise SourceOptionError(f"option {name} must be true or false, got {text!r}")


def _parse_int(name: str, text: str | None, *, minimum: int) -> int | None:
    if text is None:
        return None
    try:
        value = int(text.strip())
    except ValueError as exc:
        raise SourceOptionError(f"option {name} must be an integer, got {text!r}") from exc
    if value < minimum:
        raise SourceOptionError(f"option {name} must be at least {minimum}, got {value}")
    return value


def _json(name: str, text: str) -> Any:
    try:
        return json.loads(text)
    except json.JSONDecodeError as exc:
        raise SourceOptionError(f"option {name} is not valid JSON ({exc}): {text!r}") from exc


def _is_int(v: Any) -> bool:
    return isinstance(v, int) and not isinstance(v, bool)


def parse_queue_offsets(name: str, text: str) -> str | QueueOffsets:
    """``"earliest"``, ``"latest"`` or ``{"topic": {"broker": {"queueId": offset}}}`` with offsets
    >= 0, or -2 (earliest) / -1 (latest)."""
    t = text.strip()
    if t.lower() in ("earliest", "latest"):
        return t.lower()
    value = _json(name, t)
    if not isinstance(value, dict):
        raise SourceOptionError(f"option {name} must be \"earliest\", \"latest\" or a JSON object "
                                f"{{topic: {{brokerName: {{queueId: offset}}}}}}, got {text!r}")
    out: QueueOffsets = {}
    for topic, brokers in value.items():
        if not isinstance(brokers, dict):
            raise SourceOptionError(f"option {name}: topic {topic!r} must map broker names to objects, got {brokers!r}")
        out[topic] = {}
        for broker, queues in brokers.items():
            if not isinstance(queues, dict):
                raise SourceOptionError(f"option {name}: {topic}/{broker} must map queue ids to offsets, got {queues!r}")
            qmap: dict[int, int] = {}
            for qid, off in queues.items():
                try:
                    q = int(qid)
                except ValueError as exc:
                    raise SourceOptionError(f"option {name}: queue id {qid!r} of {topic}/{broker} is not an integer") from exc
                if q < 0:
                    raise SourceOptionError(f"option {name}: queue id {q} of {topic}/{broker} is negative")
                if not _is_int(off) or off < EARLIEST:
                    raise SourceOptionError(
                        f"option {name}: offset of {topic}/{broker}/{q} must be an integer >= 0, "
                        f"-2 (earliest) or -1 (latest), got {off!r}")
                qmap[q] = off
            out[topic][broker] = qmap
    return out


def _parse_stream_start(text: str) -> str | dict[str, int]:
    t = text.strip()
    if t.lower() in ("earliest", "latest"):
        return t.lower()
    value = _json("startingOffsets", t)
    if not isinstance(value, dict) or not all(_is_int(v) and v >= EARLIEST for v in value.values()):
        raise SourceOptionError(
            "option startingOffsets of a stream must be \"earliest\", \"latest\" or a JSON object "
            f"{{brokerName: commitLogOffset}} with offsets >= 0 (or -2 / -1), got {text!r}")
    return {str(k): int(v) for k, v in value.items()}


def parse_options(options: Mapping[str, str], *, streaming: bool = False) -> RocketMQOptions:
    """Validate the options of ``spark.read(Stream).format("rocketmq")`` (names case-insensitive).

    Unknown names are refused (one line naming the nearest valid one); rocketmq-spark's names are
    taken: ``topic``/``subscribe`` (topic names) and ``subscribePattern`` (a regex) select topics as
    ``topics``/``topicPattern`` do, ``subExpression`` filters tags, and its broker-only options
    (``nameServer``, ``group``, ``pullBatchSize``...) are accepted and ignored.  A stream starts at
    the latest offsets unless ``startingOffsets`` says otherwise (as rocketmq-spark and Spark's
    Kafka source do); a batch reads from the earliest."""
    refuse_unknown("rocketmq", (str(k) for k in options), OPTION_NAMES, error=SourceOptionError)
    raw_paths = _get(options, "paths")
    path = _get(options, "path")
    paths: list[str] = []
    if raw_paths is not None and raw_paths.strip() not in ("", "[]"):
        paths += _parse_list("paths", raw_paths)
    if path is not None and path.strip():
        if path.strip() not in paths:
            paths.insert(0, path.strip())
    if not paths:
        raise SourceOptionError("no store given: use load(path) or the option paths (JSON list or comma list)")
    names_text = _get(options, "brokerNames")
    if names_text is not None:
        names = _parse_list("brokerNames", names_text)
        if len(names) != len(paths):
            raise SourceOptionError(f"option brokerNames lists {len(names)} names for {len(paths)} paths")
    else:
        names = [_default_broker_name(p) for p in paths]
    dup = sorted({n for n in names if names.count(n) > 1})
    if dup:
        raise SourceOptionError(
            f"broker name {dup[0]!r} is used by more than one store; give each store its own name with the "
            "option brokerNames (a list aligned with the paths)")

    cl_text = _get(options, "commitLogPath")
    commit_logs: tuple[str | None, ...] = ()
    if cl_text is not None and cl_text.strip().startswith("["):
        listed = _json("commitLogPath", cl_text.strip())
        if not isinstance(listed, list) or len(listed) != len(paths) or \
                not all(v is None or isinstance(v, str) for v in listed):
            raise SourceOptionError(f"option commitLogPath as a JSON list must hold one directory (or null) per "
                                    f"store: {len(paths)} stores")
        commit_logs = tuple(v.strip() or None if isinstance(v, str) else None for v in listed)
    elif cl_text is not None and cl_text.strip():
        if len(paths) != 1:
            raise SourceOptionError("option commitLogPath names the CommitLog of one store; with several stores "
                                    "give a JSON list aligned with the paths")
        commit_logs = (cl_text.strip(),)

    chosen = [name for name in _TOPIC_OPTIONS if _get(options, name) is not None]
    if len(chosen) > 1:
        raise SourceOptionError(f"give only one of {', '.join(_TOPIC_OPTIONS)} (got {', '.join(chosen)})")
    topics_option = chosen[0] if chosen else "topics"
    topics_text = _get(options, topics_option) if topics_option in ("topics", "topic", "subscribe") else None
    pattern = _get(options, topics_option) if topics_option in ("topicPattern", "subscribePattern") else None
    topics: tuple[str, ...] | None = None
    if topics_option == "topics" and topics_text is not None and topics_text.strip().startswith("regex:"):
        pattern = topics_text.strip()[len("regex:"):]
    elif topics_text is not None:
        topics = tuple(dict.fromkeys(_parse_list(topics_option, topics_text)))
    if pattern is not None:
        if not pattern.strip():
            raise SourceOptionError(f"option {topics_option}: the topic pattern is empty")
        try:
            re.compile(pattern)
        except re.error as exc:
            raise SourceOptionError(f"topic pattern {pattern!r} is not a valid regular expression: {exc}") from exc
    sub_expression = _get(options, "subExpression")
    try:
        tags = parse_sub_expression(sub_expression)
    except InvalidArgumentError as exc:
        raise SourceOptionError(f"option subExpression: {exc.message}") from None

    so_text = _get(options, "startingOffsets")
    eo_text = _get(options, "endingOffsets")
    st = _parse_int("startingTimestamp", _get(options, "startingTimestamp"), minimum=0)
    et = _parse_int("endingTimestamp", _get(options, "endingTimestamp"), minimum=0)
    max_offsets = _parse_int("maxOffsetsPerTrigger", _get(options, "maxOffsetsPerTrigger"), minimum=1)
    max_bytes = _parse_int("maxBytesPerTrigger", _get(options, "maxBytesPerTrigger"), minimum=1)
    common: dict[str, Any] = dict(
        paths=tuple(paths), broker_names=tuple(names), topics=topics, topic_pattern=pattern,
        include_body=_parse_bool("includeBody", _get(options, "includeBody"), True),
        check_crc=_parse_bool("checkCRC", _get(options, "checkCRC"), False),
        fail_on_data_loss=_parse_bool("failOnDataLoss", _get(options, "failOnDataLoss"), True),
        min_partitions=_parse_int("minPartitions", _get(options, "minPartitions"), minimum=1),
        commit_log_paths=commit_logs,
        store_type=_store_type(_get(options, "storeType")),
        tags=tags, topics_option=topics_option,
    )
    if streaming:
        for name, value in (("endingOffsets", eo_text), ("startingTimestamp", st), ("endingTimestamp", et)):
            if value is not None:
                raise SourceOptionError(f"option {name} is not supported by the rocketmq stream source "
                                        "(streams start at startingOffsets and never end)")
        start = _parse_stream_start(so_text) if so_text is not None else "latest"
        if isinstance(start, dict):
            unknown = sorted(set(start) - set(names))
            if unknown:
                raise UnknownTopicError(f"option startingOffsets names unknown broker {unknown[0]!r} "
                                        f"(brokers: {', '.join(names)})")
        return RocketMQOptions(**common, stream_starting=start, max_offsets_per_trigger=max_offsets,
                               max_bytes_per_trigger=max_bytes)
    for name, value in (("maxOffsetsPerTrigger", max_offsets), ("maxBytesPerTrigger", max_bytes)):
        if value is not None:
            raise SourceOptionError(f"option {name} only applies to streams (spark.readStream)")
    so = parse_queue_offsets("startingOffsets", so_text) if so_text is not None else "earliest"
    eo = parse_queue_offsets("endingOffsets", eo_text) if eo_text is not None else "latest"
    if st is not None and et is not None and st > et:
        raise SourceOptionError(f"startingTimestamp {st} is after endingTimestamp {et}")
    given = any(v is not None for v in (so_text, eo_text, st, et))
    return RocketMQOptions(**common, starting_offsets=so, ending_offsets=eo, starting_timestamp=st,
                           ending_timestamp=et, offsets_given=given)


def _default_broker_name(path: str) -> str:
    parts = [p for p in re.split(r"[\\/]+", path.strip()) if p]
    return parts[-1] if parts else path


# =============================================================================== resolution
def select_topics(opts: RocketMQOptions, known: set[str]) -> frozenset[str] | None:
    """The topics to read (``None``: all, no topic option given).  Explicit names must exist in
    ``known`` (the stores' ConsumeQueue topics); a pattern may match nothing."""
    if opts.topics is not None:
        missing = [t for t in opts.topics if t not in known]
        if missing:
            raise UnknownTopicError(f"option {opts.topics_option} names unknown topic {missing[0]!r} "
                                    f"(the stores hold: {', '.join(sorted(known)) or 'no ConsumeQueues'})")
        return frozenset(opts.topics)
    if opts.topic_pattern is not None:
        return frozenset(t for t in known if opts.topic_selected(t))
    return None


def _check_named(name: str, spec: QueueOffsets, catalogue: Catalogue, topics: frozenset[str] | None) -> None:
    known_topics = {t for queues in catalogue.values() for (t, _q) in queues}
    for topic, brokers in spec.items():
        if topic not in known_topics:
            raise UnknownTopicError(f"option {name} names unknown topic {topic!r}")
        if topics is not None and topic not in topics:
            raise SourceOptionError(f"option {name} names topic {topic!r}, which the topic selection does not select")
        for broker, queues in brokers.items():
            if broker not in catalogue:
                raise UnknownTopicError(f"option {name} names unknown broker {broker!r} for topic {topic!r} "
                                        f"(brokers: {', '.join(catalogue)})")
            for qid in queues:
                if (topic, qid) not in catalogue[broker]:
                    raise UnknownTopicError(f"option {name}: broker {broker!r} has no queue {qid} of topic {topic!r}")


def _pick(spec: str | QueueOffsets, broker: str, topic: str, qid: int, default: int) -> int:
    if spec == "earliest":
        return EARLIEST
    if spec == "latest":
        return LATEST
    assert isinstance(spec, dict)
    return spec.get(topic, {}).get(broker, {}).get(qid, default)


def resolve_queue_bounds(
    opts: RocketMQOptions, catalogue: Catalogue, topics: frozenset[str] | None,
    time_lookup: TimeLookup | None = None,
) -> dict[str, dict[tuple[str, int], tuple[int, int]]] | None:
    """Per broker, ``{(topic, queueId): (first, end)}`` queue-offset ranges to read, or ``None``
    when no offset option was given (read every record).

    Queues not named in an offsets JSON start at the earliest and end at the latest offset.
    ``startingTimestamp``/``endingTimestamp`` take precedence over the offsets (Kafka's rule) and
    are resolved per queue by ``time_lookup`` (first offset with storeTimestamp >= the time;
    the ending one is exclusive).  A concrete offset outside ``[min, max]`` of its queue raises
    :class:`OffsetOptionOutOfRangeError` when ``failOnDataLoss`` (else it is clamped); a start
    after an end raises :class:`SourceOptionError`.
    """
    if not opts.offsets_given:
        return None
    for name, spec in (("startingOffsets", opts.starting_offsets), ("endingOffsets", opts.ending_offsets)):
        if isinstance(spec, dict):
            _check_named(name, spec, catalogue, topics)
    if (opts.starting_timestamp is not None or opts.ending_timestamp is not None) and time_lookup is None:
        raise SourceOptionError("timestamps cannot be resolved without the ConsumeQueues")
    out: dict[str, dict[tuple[str, int], tuple[int, int]]] = {}
    for broker, queues in catalogue.items():
        res: dict[tuple[str, int], tuple[int, int]] = {}
        for (topic, qid), (qmin, qmax) in sorted(queues.items()):
            if topics is not None and topic not in topics:
                continue
            bounds = []
            for name, spec, ts, default in (
                ("startingOffsets", opts.starting_offsets, opts.starting_timestamp, EARLIEST),
                ("endingOffsets", opts.ending_offsets, opts.ending_timestamp, LATEST),
            ):
                if ts is not None:
                    assert time_lookup is not None
                    off = max(qmin, min(qmax, int(time_lookup(broker, topic, qid, ts))))
                else:
                    off = _pick(spec, broker, topic, qid, default)
                    if off == EARLIEST:
                        off = qmin
                    elif off == LATEST:
                        off = qmax
                    elif off < qmin or off > qmax:
                        if opts.fail_on_data_loss:
                            raise OffsetOptionOutOfRangeError(
                                f"option {name}: offset {off} of {topic}/{broker}/{qid} is outside the queue's range "
                                f"[{qmin}, {qmax}] (set failOnDataLoss=false to clamp it)")
                        off = max(qmin, min(qmax, off))
                bounds.append(off)
            first, end = bounds
            if first > end:
                if opts.starting_timestamp is not None or opts.ending_timestamp is not None:
                    end = first  # an empty time window of this queue
                else:
                    raise SourceOptionError(
                        f"starting offset {first} of {topic}/{broker}/{qid} is after its ending offset {end}")
            res[(topic, qid)] = (first, end)
        out[broker] = res
    return out


def apportion(available: list[int], limit: int) -> list[int]:
    """Split ``limit`` units (messages or bytes) between sources that have ``available[i]`` each:
    everything when it fits, else shares proportional to what each has (largest remainders get
    the rest), never more than available."""
    total = sum(available)
    if total <= limit:
        return list(available)
    shares = [a * limit // total for a in available]
    rest = limit - sum(shares)
    order = sorted(range(len(available)), key=lambda i: (-(available[i] * limit % total), i))
    for i in order:
        if rest <= 0:
            break
        if shares[i] < available[i]:
            shares[i] += 1
            rest -= 1
    return shares


def _store_type(text: str | None) -> str | None:
    """The ``storeType`` option: ``default`` (file ConsumeQueues) or ``defaultRocksDB``."""
    from mqstore.storage.rocketmq.config import STORE_TYPES

    if text is None or not text.strip():
        return None
    if text.strip() not in STORE_TYPES:
        raise SourceOptionError(f"option storeType must be one of {', '.join(STORE_TYPES)}, not {text.strip()!r}")
    return text.strip()
