"""The broker's ``STORE/config/`` directory, read only: consumer offsets, delay offsets, topics,
subscription groups, and the consumer lag against the ConsumeQueues (``mqadmin consumerProgress``
offline).  Nothing here writes a file."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from mqstore.errors import CorruptDataError, MqStoreError
from mqstore.formats.rocketmq.config_json import (
    ConsumerOffsets,
    parse_consumer_offsets,
    parse_delay_offsets,
    parse_subscription_groups,
    parse_topics,
)
from mqstore.storage.rocketmq.layout import is_rocksdb_dir

CONSUMER_OFFSET = "consumerOffset.json"
DELAY_OFFSET = "delayOffset.json"
TOPICS = "topics.json"
SUBSCRIPTION_GROUP = "subscriptionGroup.json"
SCHEDULE_TOPIC = "SCHEDULE_TOPIC_XXXX"

#: the files this module understands -> what they hold
KNOWN: dict[str, str] = {
    CONSUMER_OFFSET: "committed consumer offsets per topic@group and queue",
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


#: the RocksDB config stores of RocketMQ 5.x (directories of config/)
ROCKSDB_OFFSETS_V1 = "consumerOffsets"
ROCKSDB_CONFIG_V2 = "rdb"
ROCKSDB_DIRS: dict[str, str] = {
    ROCKSDB_OFFSETS_V1: "RocksDB consumer offsets (v1: topic@group -> JSON offset table)",
    ROCKSDB_CONFIG_V2: "RocksDB config store (v2: consumer offsets, topics, groups as binary keys)",
}


def consumer_offsets(root: Path) -> ConsumerOffsets:
    """The committed consumer offsets, from where the broker keeps them: the v2 RocksDB config
    store (``config/rdb/``) when there is one, else the v1 RocksDB store
    (``config/consumerOffsets/``, replaced by ``consumerOffset.json`` when the JSON file's data
    version counter is higher, as the broker's start-up merge does), else ``consumerOffset.json``."""
    base = config_dir(root)
    if is_rocksdb_dir(base / ROCKSDB_CONFIG_V2):
        return rocksdb_offsets_v2(root)
    got = load(root, CONSUMER_OFFSET)
    if is_rocksdb_dir(base / ROCKSDB_OFFSETS_V1):
        kv = rocksdb_offsets_v1(root)
        json_counter = got.data_version.counter if got is not None and got.data_version is not None else -1
        kv_counter = kv.data_version.counter if kv.data_version is not None else 0
        return got if got is not None and json_counter > kv_counter else kv
    return got if got is not None else ConsumerOffsets()


def rocksdb_offsets_v1(root: Path) -> ConsumerOffsets:
    """``config/consumerOffsets/`` (the broker's RocksDBConsumerOffsetManager): one entry per
    ``topic@group`` in the default family, the JSON ``{"offsetTable":{queueId: offset}}``; the
    data version in the ``kvDataVersion`` family."""
    from mqstore.formats.rocketmq.config_json import DataVersion, loads_broker_json
    from mqstore.formats.rocketmq.rocksdb_cq import V1_VERSION_CF, V1_VERSION_KEY, decode_v1_offset_key
    from mqstore.storage.rocketmq.rocksdb_cq import ReadOnlyRocksDB

    path = config_dir(root) / ROCKSDB_OFFSETS_V1
    table: dict[tuple[str, str], dict[int, int]] = {}
    version = None
    with ReadOnlyRocksDB(path, "consumer offset store") as db:
        try:
            for key, value in db.items(db.family("default")):
                topic, group = decode_v1_offset_key(key)
                doc = loads_broker_json(bytes(value).decode("utf-8", "replace"), f"the offsets of {topic}@{group}")
                offs = doc.get("offsetTable") if isinstance(doc, dict) else None
                if not isinstance(offs, dict):
                    raise CorruptDataError(f"the value of {topic}@{group} has no offsetTable object")
                table[(topic, group)] = {int(q): int(o) for q, o in offs.items()}
            if V1_VERSION_CF in db.column_families:
                raw = db.get(db.family(V1_VERSION_CF), V1_VERSION_KEY)
                if raw:
                    version = DataVersion.from_json(loads_broker_json(bytes(raw).decode("utf-8", "replace"),
                                                                      "kvDataVersion"))
        except (CorruptDataError, ValueError, TypeError) as exc:
            msg = exc.message if isinstance(exc, CorruptDataError) else f"bad offset entry: {exc}"
            raise CorruptDataError(msg, path=str(path)) from exc
    return ConsumerOffsets(table, version)


def rocksdb_offsets_v2(root: Path) -> ConsumerOffsets:
    """``config/rdb/`` (the broker's ConsumerOffsetManagerV2): table 1 holds one 8-byte offset per
    (group, topic, queue), LMQ offsets included."""
    from mqstore.formats.rocketmq.rocksdb_cq import (
        V2_CONSUMER_OFFSET,
        decode_v2_offset_key,
        decode_v2_offset_value,
        v2_table_prefix,
    )
    from mqstore.storage.rocketmq.rocksdb_cq import ReadOnlyRocksDB

    path = config_dir(root) / ROCKSDB_CONFIG_V2
    prefix = v2_table_prefix(V2_CONSUMER_OFFSET)
    table: dict[tuple[str, str], dict[int, int]] = {}
    with ReadOnlyRocksDB(path, "config store") as db:
        try:
            for key, value in db.items(db.family("default"), prefix):
                if not bytes(key).startswith(prefix):
                    break
                _t, group, topic, qid = decode_v2_offset_key(key)
                table.setdefault((topic, group), {})[qid] = decode_v2_offset_value(value)
        except CorruptDataError as exc:
            raise CorruptDataError(exc.message, path=str(path)) from exc
    return ConsumerOffsets(table, None)


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
        if p.name in ROCKSDB_DIRS and is_rocksdb_dir(p):
            try:
                got = rocksdb_offsets_v1(root) if p.name == ROCKSDB_OFFSETS_V1 else rocksdb_offsets_v2(root)
            except MqStoreError as exc:
                out.append(ConfigFileInfo(p.name + "/", 0, ROCKSDB_DIRS[p.name], None, exc.message))
                continue
            size = sum(f.stat().st_size for f in p.iterdir() if f.is_file())
            out.append(ConfigFileInfo(p.name + "/", size, ROCKSDB_DIRS[p.name], len(got.table), None))
            continue
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
