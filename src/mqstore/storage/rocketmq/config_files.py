"""The broker's ``STORE/config/`` directory, read only: consumer offsets, delay offsets, topics,
subscription groups, and the consumer lag against the ConsumeQueues (``mqadmin consumerProgress``
offline).  Nothing here writes a file."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from mqstore.errors import CorruptDataError
from mqstore.formats.rocketmq.config_json import (
    ConsumerOffsets,
    parse_consumer_offsets,
    parse_delay_offsets,
    parse_lmq_consumer_offsets,
    parse_subscription_groups,
    parse_topics,
)

CONSUMER_OFFSET = "consumerOffset.json"
LMQ_CONSUMER_OFFSET = "lmqConsumerOffset.json"
DELAY_OFFSET = "delayOffset.json"
TOPICS = "topics.json"
SUBSCRIPTION_GROUP = "subscriptionGroup.json"
SCHEDULE_TOPIC = "SCHEDULE_TOPIC_XXXX"

#: the files this module understands -> what they hold
KNOWN: dict[str, str] = {
    CONSUMER_OFFSET: "committed consumer offsets per topic@group and queue",
    LMQ_CONSUMER_OFFSET: "committed consumer offsets with LMQ on (offsetTable, and lmqOffsetTable of LMQ groups)",
    DELAY_OFFSET: "delivery progress of each delay level (SCHEDULE_TOPIC_XXXX queues)",
    TOPICS: "topic configurations",
    SUBSCRIPTION_GROUP: "consumer (subscription) group configurations",
}

#: files read elsewhere (listed by kind here; their contents are shown by their own readers)
READ_ELSEWHERE: dict[str, str] = {
    "timercheck": "timer checkpoint (binary; see the timer section, storage.rocketmq.timer)",
    "timermetrics": "timer metrics per topic (JSON; see the timer section, storage.rocketmq.timer)",
}

_PARSERS: dict[str, Callable[[str], Any]] = {
    CONSUMER_OFFSET: parse_consumer_offsets,
    LMQ_CONSUMER_OFFSET: parse_lmq_consumer_offsets,
    DELAY_OFFSET: parse_delay_offsets,
    TOPICS: parse_topics,
    SUBSCRIPTION_GROUP: parse_subscription_groups,
}


def config_dir(root: Path) -> Path:
    return Path(root) / "config"


def read_text(path: Path) -> str:
    try:
        return path.read_bytes().decode("utf-8")
    except UnicodeDecodeError as exc:
        raise CorruptDataError(f"not UTF-8 text: {exc.reason} at byte {exc.start}", path=str(path)) from exc


def load(root: Path, name: str) -> Any | None:
    """The parsed ``config/<name>`` (``None`` when the file does not exist or is empty); a typed
    error naming the file when it is not what the broker writes."""
    path = config_dir(root) / name
    if not path.is_file():
        return None
    text = read_text(path)
    if not text.strip():
        return None
    try:
        return _PARSERS[name](text)
    except CorruptDataError as exc:
        raise CorruptDataError(exc.message, path=str(path)) from exc


def consumer_offsets(root: Path) -> ConsumerOffsets:
    """The committed offsets of ``consumerOffset.json`` and ``lmqConsumerOffset.json`` (a broker
    with ``enableLmq`` keeps them all in the latter)."""
    got = load(root, CONSUMER_OFFSET)
    lmq = load(root, LMQ_CONSUMER_OFFSET)
    if lmq is None:
        return got if got is not None else ConsumerOffsets()
    if got is None:
        return lmq
    for key, queues in lmq.table.items():
        got.table.setdefault(key, {}).update(queues)
    return got


def delay_offsets(root: Path) -> dict[int, int]:
    got = load(root, DELAY_OFFSET)
    return got if got is not None else {}


@dataclass(slots=True)
class ConfigFileInfo:
    name: str
    size: int
    kind: str  # what the file holds ("unknown" for a file this tool does not read)
    entries: int | None  # table entries (None: not read)
    error: str | None


def list_config_files(root: Path) -> list[ConfigFileInfo]:
    """Every file of ``config/`` by name, the known ones parsed (``.bak`` copies and unknown
    files listed, never silently skipped)."""
    base = config_dir(root)
    if not base.is_dir():
        return []
    out: list[ConfigFileInfo] = []
    for p in sorted(base.iterdir()):
        if not p.is_file():
            out.append(ConfigFileInfo(p.name + "/", 0, "directory", None, None))
            continue
        size = p.stat().st_size
        if p.name in KNOWN:
            try:
                got = load(root, p.name)
            except CorruptDataError as exc:
                out.append(ConfigFileInfo(p.name, size, KNOWN[p.name], None, exc.message))
                continue
            n = 0 if got is None else len(got.table) if isinstance(got, ConsumerOffsets) else len(got)
            out.append(ConfigFileInfo(p.name, size, KNOWN[p.name], n, None))
        elif p.name in READ_ELSEWHERE:
            out.append(ConfigFileInfo(p.name, size, READ_ELSEWHERE[p.name], None, None))
        elif p.name.endswith(".bak") and p.name[:-4] in KNOWN:
            out.append(ConfigFileInfo(p.name, size, "backup of " + p.name[:-4], None, None))
        else:
            out.append(ConfigFileInfo(p.name, size, "unknown (not read)", None, None))
    return out


@dataclass(slots=True)
class QueueProgress:
    group: str
    topic: str
    queue_id: int
    broker_offset: int  # max offset of the ConsumeQueue (0 when the store has no such queue)
    consumer_offset: int
    min_offset: int

    @property
    def diff(self) -> int:
        """Messages not consumed yet (``brokerOffset - consumerOffset``, as consumerProgress)."""
        return self.broker_offset - self.consumer_offset


def consumer_progress(offsets: ConsumerOffsets,
                      queue_range: Callable[[str, int], tuple[int, int] | None]) -> list[QueueProgress]:
    """One row per committed (group, topic, queue), sorted; ``queue_range(topic, queue)`` gives the
    (min, max) offsets of a ConsumeQueue or ``None`` when the store has none."""
    rows: list[QueueProgress] = []
    for (topic, group), queues in offsets.table.items():
        for qid, committed in queues.items():
            rng = queue_range(topic, qid)
            lo, hi = rng if rng is not None else (0, 0)
            rows.append(QueueProgress(group, topic, qid, hi, committed, lo))
    rows.sort(key=lambda r: (r.group, r.topic, r.queue_id))
    return rows
