"""Options of the ``kafka-log`` data source: parsing and validation (pure, no Spark, no files).

Names, defaults and precedence follow Spark's own Kafka source:

* topic selection: at most one of ``subscribe`` (comma list), ``subscribePattern`` (regex that must
  match the whole topic name, like Java's ``Pattern.matches``) and ``assign`` (JSON
  ``{"topic": [0, 1]}``); none selects every partition found;
* start: ``startingTimestamp`` > ``startingOffsetsByTimestamp`` > ``startingOffsets`` (the first
  one present wins); end (batch only): ``endingTimestamp`` > ``endingOffsetsByTimestamp`` >
  ``endingOffsets``;
* offsets JSON ``{"topic": {"0": 23}}`` with −2 = earliest, −1 = latest; a batch query may not
  start at latest nor end at earliest.

Every problem raises :class:`~mqstore.errors.InvalidArgumentError` naming the option: an unknown
name (with the nearest valid one), the ``kafka.*`` settings Spark's Kafka source refuses
(``auto.offset.reset``, the deserializers, ``enable.auto.commit``, ``interceptor.classes``), a
``minOffsetsPerTrigger`` above ``maxOffsetsPerTrigger``.  Broker-only settings (other ``kafka.*``,
``groupIdPrefix``, ``fetchOffset.*``, ``kafkaConsumer.pollTimeoutMs``) are accepted and ignored,
and the trigger options are ignored by batch queries, as in Spark.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Literal

from mqstore.errors import InvalidArgumentError
from mqstore.spark._option_names import refuse_unknown

EARLIEST = -2
LATEST = -1
DEFAULT_MAX_RECORDS_PER_BATCH = 10_000

TopicPartition = tuple[str, int]
SpecKind = Literal["earliest", "latest", "offsets", "timestamp", "timestamps"]

#: every option name the source takes (Spark's spelling; compared case-insensitively)
OPTION_NAMES = (
    "path", "paths", "subscribe", "subscribePattern", "assign",
    "startingOffsets", "endingOffsets", "startingTimestamp", "endingTimestamp",
    "startingOffsetsByTimestamp", "endingOffsetsByTimestamp", "startingOffsetsByTimestampStrategy",
    "failOnDataLoss", "minPartitions", "maxRecordsPerPartition", "includeHeaders", "maxRecordsPerBatch",
    "maxOffsetsPerTrigger", "minOffsetsPerTrigger", "maxTriggerDelay", "maxBytesPerTrigger",
    "kafka.isolation.level",
    # Spark options that only make sense against a broker: accepted and ignored, so that a job
    # written for format("kafka") runs unchanged offline (as are all other kafka.* consumer settings)
    "kafka.bootstrap.servers", "kafka.group.id", "groupIdPrefix", "kafkaConsumer.pollTimeoutMs",
    "fetchOffset.numRetries", "fetchOffset.retryIntervalMs",
)
_IGNORED_PREFIXES = ("kafka.",)
#: kafka.* settings Spark's Kafka source refuses (KafkaSourceProvider), with its reasons
_REFUSED = {
    "kafka.auto.offset.reset": "Kafka option 'auto.offset.reset' is not supported: set the source option "
                               "startingOffsets to earliest or latest instead (a stream resumes from its checkpoint)",
    "kafka.key.deserializer": "Kafka option 'key.deserializer' is not supported: keys are always binary; "
                              "deserialize them with DataFrame operations",
    "kafka.value.deserializer": "Kafka option 'value.deserializer' is not supported: values are always binary; "
                                "deserialize them with DataFrame operations",
    "kafka.enable.auto.commit": "Kafka option 'enable.auto.commit' is not supported",
    "kafka.interceptor.classes": "Kafka option 'interceptor.classes' is not supported",
}
DEFAULT_MAX_TRIGGER_DELAY_MS = 15 * 60 * 1000  # Spark's default maxTriggerDelay, 15m
_STREAM_ONLY = ("maxoffsetspertrigger", "maxbytespertrigger", "minoffsetspertrigger", "maxtriggerdelay")
_BATCH_ONLY = ("endingoffsets", "endingtimestamp", "endingoffsetsbytimestamp")


@dataclass(frozen=True)
class OffsetSpec:
    """Where a read starts or ends, before it is resolved against the files.

    ``kind`` is ``earliest``/``latest``, ``offsets`` (``per_partition`` maps (topic, partition)
    to an offset or −2/−1), ``timestamp`` (one ``timestamp`` for every partition) or
    ``timestamps`` (``per_partition`` maps to a timestamp in ms).
    """

    kind: SpecKind
    per_partition: dict[TopicPartition, int] = field(default_factory=dict)
    timestamp: int | None = None
    source: str = ""  # the option it came from (for messages)


@dataclass(frozen=True)
class KafkaLogOptions:
    """Validated options of one ``kafka-log`` read."""

    paths: tuple[str, ...]
    streaming: bool
    subscribe: tuple[str, ...] | None = None
    subscribe_pattern: str | None = None
    assign: tuple[TopicPartition, ...] | None = None
    starting: OffsetSpec = OffsetSpec("earliest")
    ending: OffsetSpec = OffsetSpec("latest")
    by_timestamp_strategy: Literal["error", "latest"] = "error"
    fail_on_data_loss: bool = True
    min_partitions: int | None = None
    include_headers: bool = False
    max_records_per_batch: int = DEFAULT_MAX_RECORDS_PER_BATCH
    max_offsets_per_trigger: int | None = None
    max_bytes_per_trigger: int | None = None
    min_offsets_per_trigger: int | None = None
    max_trigger_delay_ms: int = DEFAULT_MAX_TRIGGER_DELAY_MS
    max_records_per_partition: int | None = None
    read_committed: bool = False  # kafka.isolation.level=read_committed

    def selects_topic(self, topic: str) -> bool:
        if self.subscribe is not None:
            return topic in self.subscribe
        if self.subscribe_pattern is not None:
            return re.fullmatch(self.subscribe_pattern, topic) is not None
        if self.assign is not None:
            return any(t == topic for t, _ in self.assign)
        return True


# ----------------------------------------------------------------------------- scalar parsers
def _bool(name: str, value: str) -> bool:
    v = str(value).strip().lower()
    if v in ("true", "false"):
        return v == "true"
    raise InvalidArgumentError(f"option {name} must be true or false, got {value!r}")


def _positive_int(name: str, value: str) -> int:
    try:
        n = int(str(value).strip())
    except ValueError:
        raise InvalidArgumentError(f"option {name} must be a positive integer, got {value!r}") from None
    if n <= 0:
        raise InvalidArgumentError(f"option {name} must be a positive integer, got {value!r}")
    return n


_TIME_UNITS_MS = {"us": 0.001, "ms": 1, "s": 1000, "m": 60_000, "min": 60_000, "h": 3_600_000, "d": 86_400_000}


def parse_duration_ms(name: str, value: str) -> int:
    """A time with a unit as Spark reads it (``15m``, ``30s``, ``500ms``, ``2h``, ``1d``; a bare
    number is milliseconds)."""
    m = re.fullmatch(r"\s*(\d+)\s*([a-z]*)\s*", str(value).lower())
    if m is None or m.group(2) not in ("", *_TIME_UNITS_MS):
        raise InvalidArgumentError(f"option {name} must be a time like 15m, 30s or 500ms, got {value!r}")
    return int(int(m.group(1)) * _TIME_UNITS_MS.get(m.group(2) or "ms", 1))


def _timestamp(name: str, value: str) -> int:
    try:
        ts = int(str(value).strip())
    except ValueError:
        raise InvalidArgumentError(f"option {name} expects a single long value (ms), got {value!r}") from None
    if ts < 0:
        raise InvalidArgumentError(f"option {name} must be a timestamp ≥ 0 (ms), got {value!r}")
    return ts


def _json(name: str, value: str) -> Any:
    try:
        return json.loads(value)
    except (TypeError, ValueError) as exc:
        raise InvalidArgumentError(f"option {name} is not valid JSON ({exc}): {value!r}") from None


def _is_int(v: Any) -> bool:
    return isinstance(v, int) and not isinstance(v, bool)


def parse_partition_map(name: str, value: str) -> dict[TopicPartition, int]:
    """``{"topic": {"0": 23, "1": -2}}`` → ``{("topic", 0): 23, ("topic", 1): -2}``."""
    obj = _json(name, value)
    if not isinstance(obj, dict) or not obj:
        raise InvalidArgumentError(f"option {name} expects a JSON object like {{\"topic\":{{\"0\":23}}}}, "
                                   f"got {value!r}")
    out: dict[TopicPartition, int] = {}
    for topic, parts in obj.items():
        if not isinstance(parts, dict):
            raise InvalidArgumentError(f"option {name}: topic {topic!r} must map partitions to numbers, "
                                       f"got {parts!r}")
        for p, v in parts.items():
            try:
                part = int(p)
            except ValueError:
                raise InvalidArgumentError(f"option {name}: partition {p!r} of topic {topic!r} is not an "
                                           "integer") from None
            if part < 0 or not _is_int(v):
                raise InvalidArgumentError(f"option {name}: bad entry {topic!r}/{p!r}: {v!r}")
            out[(topic, part)] = v
    return out


def parse_assign(value: str) -> tuple[TopicPartition, ...]:
    """``{"topicA": [0, 1]}`` → ``(("topicA", 0), ("topicA", 1))``."""
    obj = _json("assign", value)
    if not isinstance(obj, dict) or not obj:
        raise InvalidArgumentError(f"option assign expects a JSON object like {{\"topicA\":[0,1]}}, got {value!r}")
    out: list[TopicPartition] = []
    for topic, parts in obj.items():
        if not isinstance(parts, list) or not all(_is_int(p) and p >= 0 for p in parts):
            raise InvalidArgumentError(f"option assign: topic {topic!r} must map to a list of partition "
                                       f"numbers, got {parts!r}")
        out.extend((topic, p) for p in parts)
    return tuple(sorted(set(out)))


def parse_paths(options: Mapping[str, str]) -> tuple[str, ...]:
    """``path`` and/or ``paths`` (a JSON list, as Spark passes ``load([...])``, or a comma list)."""
    paths: list[str] = []
    if options.get("path"):
        paths.append(str(options["path"]))
    raw = options.get("paths")
    if raw:
        raw = str(raw).strip()
        if raw.startswith("["):
            lst = _json("paths", raw)
            if not isinstance(lst, list) or not all(isinstance(p, str) for p in lst):
                raise InvalidArgumentError(f"option paths must be a JSON list of strings, got {raw!r}")
            paths.extend(lst)
        else:
            paths.extend(p.strip() for p in raw.split(",") if p.strip())
    unique = tuple(dict.fromkeys(paths))
    if not unique:
        raise InvalidArgumentError("kafka-log needs a path: load(path) or option paths "
                                   "(a partition directory or a Kafka log directory)")
    return unique


def _offsets_spec(name: str, value: str, *, start: bool, streaming: bool) -> OffsetSpec:
    v = str(value).strip()
    low = v.lower()
    if low == "earliest":
        if not start:
            raise InvalidArgumentError(f"option {name}: earliest is not allowed as an ending offset")
        return OffsetSpec("earliest", source=name)
    if low == "latest":
        if start and not streaming:
            raise InvalidArgumentError(f"option {name}: latest is not allowed as a starting offset of a batch "
                                       "query")
        return OffsetSpec("latest", source=name)
    if not v.startswith("{"):
        raise InvalidArgumentError(f"option {name} must be earliest, latest or a JSON object, got {value!r}")
    per = parse_partition_map(name, v)
    for tp, off in per.items():
        if off < EARLIEST:
            raise InvalidArgumentError(f"option {name}: offset {off} of {tp[0]}-{tp[1]} is invalid "
                                       "(use ≥ 0, −2 earliest or −1 latest)")
        if start and not streaming and off == LATEST:
            raise InvalidArgumentError(f"option {name}: latest (−1) is not allowed as a starting offset of a "
                                       f"batch query ({tp[0]}-{tp[1]})")
        if not start and off == EARLIEST:
            raise InvalidArgumentError(f"option {name}: earliest (−2) is not allowed as an ending offset "
                                       f"({tp[0]}-{tp[1]})")
    return OffsetSpec("offsets", per, source=name)


def _timestamps_spec(name: str, value: str) -> OffsetSpec:
    per = parse_partition_map(name, str(value).strip())
    for tp, ts in per.items():
        if ts < 0:
            raise InvalidArgumentError(f"option {name}: timestamp {ts} of {tp[0]}-{tp[1]} must be ≥ 0")
    return OffsetSpec("timestamps", per, source=name)


def _bound_spec(opts: Mapping[str, str], which: str, *, streaming: bool) -> OffsetSpec:
    start = which == "starting"
    ts_key, by_key, off_key = f"{which}timestamp", f"{which}offsetsbytimestamp", f"{which}offsets"
    pretty = {ts_key: f"{which}Timestamp", by_key: f"{which}OffsetsByTimestamp", off_key: f"{which}Offsets"}
    if ts_key in opts:
        return OffsetSpec("timestamp", timestamp=_timestamp(pretty[ts_key], opts[ts_key]), source=pretty[ts_key])
    if by_key in opts:
        return _timestamps_spec(pretty[by_key], opts[by_key])
    if off_key in opts:
        return _offsets_spec(pretty[off_key], opts[off_key], start=start, streaming=streaming)
    if start:
        return OffsetSpec("latest" if streaming else "earliest", source="default")
    return OffsetSpec("latest", source="default")


def parse_options(options: Mapping[str, Any], *, streaming: bool) -> KafkaLogOptions:
    """Validate the options of a ``kafka-log`` read (keys case-insensitive)."""
    opts = {str(k).lower(): ("" if v is None else str(v)) for k, v in dict(options).items()}
    for key in opts:
        if key in _REFUSED:
            raise InvalidArgumentError(_REFUSED[key])
    refuse_unknown("kafka-log", (str(k) for k in dict(options)), OPTION_NAMES, prefixes=_IGNORED_PREFIXES)
    if streaming:
        bad = [k for k in _BATCH_ONLY if k in opts]
        if bad:
            raise InvalidArgumentError(f"option {bad[0]} is only valid in batch queries (a stream has no end)")
    level = opts.get("kafka.isolation.level", "read_uncommitted").strip().lower()
    if level not in ("read_uncommitted", "read_committed"):
        raise InvalidArgumentError(f"kafka.isolation.level must be read_uncommitted or read_committed, got {level!r}")
    chosen = [k for k in ("subscribe", "subscribepattern", "assign") if k in opts]
    if len(chosen) > 1:
        raise InvalidArgumentError("only one of assign, subscribe or subscribePattern may be given, got "
                                   + ", ".join(chosen))
    subscribe = pattern = assign = None
    if "subscribe" in opts:
        subscribe = tuple(dict.fromkeys(t.strip() for t in opts["subscribe"].split(",") if t.strip()))
        if not subscribe:
            raise InvalidArgumentError("option subscribe: no topics to subscribe to")
    elif "subscribepattern" in opts:
        pattern = opts["subscribepattern"].strip()
        if not pattern:
            raise InvalidArgumentError("option subscribePattern: pattern to subscribe is empty")
        try:
            re.compile(pattern)
        except re.error as exc:
            raise InvalidArgumentError(f"option subscribePattern is not a valid regex ({exc}): {pattern!r}") from None
    elif "assign" in opts:
        assign = parse_assign(opts["assign"])
    strategy = opts.get("startingoffsetsbytimestampstrategy", "error").strip().lower()
    if strategy not in ("error", "latest"):
        raise InvalidArgumentError(f"option startingOffsetsByTimestampStrategy must be error or latest, "
                                   f"got {strategy!r}")
    max_offsets = _positive_int("maxOffsetsPerTrigger", opts["maxoffsetspertrigger"]) \
        if "maxoffsetspertrigger" in opts else None
    min_offsets = _positive_int("minOffsetsPerTrigger", opts["minoffsetspertrigger"]) \
        if "minoffsetspertrigger" in opts else None
    if min_offsets is not None and max_offsets is not None and min_offsets > max_offsets:
        raise InvalidArgumentError(f"minOffsetsPerTrigger ({min_offsets}) is higher than maxOffsetsPerTrigger "
                                   f"({max_offsets})")
    delay = parse_duration_ms("maxTriggerDelay", opts["maxtriggerdelay"]) if "maxtriggerdelay" in opts \
        else DEFAULT_MAX_TRIGGER_DELAY_MS
    if not streaming:
        for k in _STREAM_ONLY:
            opts.pop(k, None)  # accepted and ignored by batch queries, as Spark does
        max_offsets = min_offsets = None
    return KafkaLogOptions(
        paths=parse_paths(opts),
        streaming=streaming,
        subscribe=subscribe,
        subscribe_pattern=pattern,
        assign=assign,
        starting=_bound_spec(opts, "starting", streaming=streaming),
        ending=_bound_spec(opts, "ending", streaming=streaming) if not streaming else OffsetSpec("latest"),
        by_timestamp_strategy=strategy,  # type: ignore[arg-type]
        fail_on_data_loss=_bool("failOnDataLoss", opts.get("failondataloss", "true")),
        min_partitions=_positive_int("minPartitions", opts["minpartitions"]) if "minpartitions" in opts else None,
        include_headers=_bool("includeHeaders", opts.get("includeheaders", "false")),
        max_records_per_batch=_positive_int("maxRecordsPerBatch", opts["maxrecordsperbatch"])
        if "maxrecordsperbatch" in opts else DEFAULT_MAX_RECORDS_PER_BATCH,
        max_offsets_per_trigger=max_offsets,
        min_offsets_per_trigger=min_offsets,
        max_trigger_delay_ms=delay,
        max_records_per_partition=_positive_int("maxRecordsPerPartition", opts["maxrecordsperpartition"])
        if "maxrecordsperpartition" in opts else None,
        max_bytes_per_trigger=_positive_int("maxBytesPerTrigger", opts["maxbytespertrigger"])
        if "maxbytespertrigger" in opts else None,
        read_committed=level == "read_committed",
    )
