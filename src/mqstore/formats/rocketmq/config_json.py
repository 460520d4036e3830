"""The broker's ``config/*.json`` files (pure text in, values out).

The broker writes them with fastjson, which writes map keys that are numbers *without quotes*
(``{"offsetTable":{"T@g":{0:12,1:7}}}``): not JSON by the standard.  :func:`loads_broker_json`
reads both forms.  Layouts (``docs/rocketmq.md``):

* ``consumerOffset.json``: ``{"offsetTable": {"<topic>@<group>": {<queueId>: <offset>}}, "dataVersion": {...}}``
* ``lmqConsumerOffset.json`` (``enableLmq``: the broker's consumer offsets then live here, not in
  ``consumerOffset.json``): ``{"offsetTable": {...as above...}, "lmqOffsetTable": {"<topic>@<group>":
  <offset>}, "dataVersion": {...}}``; an ``lmqOffsetTable`` entry is the offset of queue 0 of an LMQ
  group (docs/formats/rocketmq-lmq.md)
* ``delayOffset.json``: ``{"offsetTable": {<delayLevel>: <offset>}, "dataVersion": {...}}``
* ``topics.json``: ``{"topicConfigTable": {"<topic>": {"readQueueNums": n, "writeQueueNums": n, "perm": p, ...}}, "dataVersion": {...}}``
* ``subscriptionGroup.json``: ``{"subscriptionGroupTable": {"<group>": {...}}, "dataVersion": {...}}``
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from typing import Any

from mqstore.errors import CorruptDataError

_STRING = re.compile(r'"(?:[^"\\]|\\.)*"', re.S)
_BARE_NUMBER_KEY = re.compile(r"([{,]\s*)(-?\d+)(\s*:)")


def loads_broker_json(text: str, what: str = "config file") -> Any:
    """Parse a broker JSON file (standard JSON, or fastjson's unquoted number keys)."""
    try:
        return json.loads(text)
    except json.JSONDecodeError:
        pass
    parts: list[str] = []
    pos = 0
    for m in _STRING.finditer(text):  # quote bare number keys outside string literals only
        parts.append(_BARE_NUMBER_KEY.sub(r'\1"\2"\3', text[pos : m.start()]))
        parts.append(m.group(0))
        pos = m.end()
    parts.append(_BARE_NUMBER_KEY.sub(r'\1"\2"\3', text[pos:]))
    try:
        return json.loads("".join(parts))
    except json.JSONDecodeError as exc:
        raise CorruptDataError(f"{what} is not valid JSON: {exc.msg} at line {exc.lineno} column {exc.colno}") from exc


def _obj(value: Any, what: str) -> dict[str, Any]:
    if not isinstance(value, dict):
        raise CorruptDataError(f"{what} must be a JSON object, not {type(value).__name__}")
    return value


def _int(value: Any, what: str) -> int:
    if isinstance(value, bool) or not isinstance(value, int | str):
        raise CorruptDataError(f"{what} must be an integer, not {value!r}")
    try:
        return int(value)
    except ValueError as exc:
        raise CorruptDataError(f"{what} must be an integer, not {value!r}") from exc


@dataclass(slots=True)
class DataVersion:
    timestamp: int = 0
    counter: int = 0
    state_version: int = 0

    @classmethod
    def from_json(cls, value: Any) -> DataVersion | None:
        if value is None:
            return None
        v = _obj(value, "dataVersion")
        counter = v.get("counter", 0)
        if isinstance(counter, dict):  # AtomicLong serialised as an object by some versions
            counter = counter.get("value", 0)
        return cls(_int(v.get("timestamp", 0), "dataVersion.timestamp"), _int(counter, "dataVersion.counter"),
                   _int(v.get("stateVersion", 0), "dataVersion.stateVersion"))


@dataclass(slots=True)
class ConsumerOffsets:
    #: (topic, group) -> {queueId: committed offset}
    table: dict[tuple[str, str], dict[int, int]] = field(default_factory=dict)
    data_version: DataVersion | None = None


def _topic_group(key: str, table: str) -> tuple[str, str]:
    topic, sep, group = key.partition("@")
    if not sep or not topic or not group:
        raise CorruptDataError(f"{table} key {key!r} is not <topic>@<group>")
    return topic, group


def parse_consumer_offsets(text: str, what: str = "consumerOffset.json") -> ConsumerOffsets:
    doc = _obj(loads_broker_json(text, what), what)
    table_json = _obj(doc.get("offsetTable") or {}, "offsetTable")
    table: dict[tuple[str, str], dict[int, int]] = {}
    for key, queues in table_json.items():
        topic, group = _topic_group(key, "offsetTable")
        table[(topic, group)] = {_int(q, f"queue id of {key}"): _int(o, f"offset of {key} queue {q}")
                                 for q, o in _obj(queues, f"offsetTable[{key!r}]").items()}
    return ConsumerOffsets(table, DataVersion.from_json(doc.get("dataVersion")))


def parse_lmq_consumer_offsets(text: str) -> ConsumerOffsets:
    """``lmqConsumerOffset.json`` (``LmqConsumerOffsetManager``): its ``offsetTable`` as
    ``consumerOffset.json``'s, plus ``lmqOffsetTable`` (``"<topic>@<group>": offset``, queue 0)."""
    what = "lmqConsumerOffset.json"
    got = parse_consumer_offsets(text, what)
    doc = _obj(loads_broker_json(text, what), what)
    for key, off in _obj(doc.get("lmqOffsetTable") or {}, "lmqOffsetTable").items():
        topic, group = _topic_group(key, "lmqOffsetTable")
        got.table.setdefault((topic, group), {})[0] = _int(off, f"offset of {key}")
    return got


def parse_delay_offsets(text: str) -> dict[int, int]:
    """``delayOffset.json``: delay level -> offset of the next message to deliver in the
    ``SCHEDULE_TOPIC_XXXX`` queue of that level (queue id = level - 1)."""
    doc = _obj(loads_broker_json(text, "delayOffset.json"), "delayOffset.json")
    table = _obj(doc.get("offsetTable") or {}, "offsetTable")
    return {_int(k, "delay level"): _int(v, f"offset of delay level {k}") for k, v in table.items()}


def parse_topics(text: str) -> dict[str, dict[str, Any]]:
    doc = _obj(loads_broker_json(text, "topics.json"), "topics.json")
    table = _obj(doc.get("topicConfigTable") or {}, "topicConfigTable")
    return {str(k): _obj(v, f"topicConfigTable[{k!r}]") for k, v in table.items()}


def parse_subscription_groups(text: str) -> dict[str, dict[str, Any]]:
    doc = _obj(loads_broker_json(text, "subscriptionGroup.json"), "subscriptionGroup.json")
    table = _obj(doc.get("subscriptionGroupTable") or {}, "subscriptionGroupTable")
    return {str(k): _obj(v, f"subscriptionGroupTable[{k!r}]") for k, v in table.items()}
