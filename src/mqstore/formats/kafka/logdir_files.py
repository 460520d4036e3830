"""Pure parsers of the small text / JSON files of a Kafka log directory (no file access here).

Layouts (docs/formats/kafka-logdir.md has the byte-level description):

* offset checkpoints — ``recovery-point-offset-checkpoint``, ``log-start-offset-checkpoint``,
  ``replication-offset-checkpoint``, ``cleaner-offset-checkpoint``: line 1 the version (``0``),
  line 2 the entry count N, then N lines ``<topic> <partition> <offset>`` (fields split on
  whitespace).  An empty file holds no entry.
* ``leader-epoch-checkpoint`` (per partition): version ``0``, count N, N lines ``<epoch> <startOffset>``.
* ``meta.properties``: Java properties; ``version`` 0 (ZooKeeper era: ``broker.id``, optional
  ``cluster.id``) or 1 (KRaft: ``node.id``, ``cluster.id``, since 3.7 ``directory.id``).
* ``partition.metadata`` (per partition): ``version: 0`` then ``topic_id: <uuid>``.
* ``.kafka_cleanshutdown``: empty (before 3.x) or JSON ``{"version":0,"brokerEpoch":N}``.

Every parser raises :class:`CorruptDataError` naming the file and the line on garbage or a
truncated file.
"""

from __future__ import annotations

import base64
import binascii
import json
import re
from dataclasses import dataclass, field

from mqstore.errors import CorruptDataError

_WS = re.compile(r"\s+")

@dataclass(frozen=True)
class OffsetCheckpoint:
    """An offset checkpoint file: ``offsets[(topic, partition)] = offset``."""

    version: int
    offsets: dict[tuple[str, int], int]


@dataclass(frozen=True)
class EpochEntry:
    epoch: int
    start_offset: int


@dataclass(frozen=True)
class LeaderEpochCheckpoint:
    version: int
    entries: list[EpochEntry]


@dataclass(frozen=True)
class MetaProperties:
    """``meta.properties``: the fields Kafka reads, the rest kept in ``other``."""

    version: int
    node_id: int | None
    cluster_id: str | None
    directory_id: str | None
    other: dict[str, str] = field(default_factory=dict)


@dataclass(frozen=True)
class PartitionMetadata:
    version: int
    topic_id: str


@dataclass(frozen=True)
class CleanShutdown:
    """``.kafka_cleanshutdown``: ``version``/``broker_epoch`` are None for the legacy empty marker."""

    version: int | None
    broker_epoch: int | None


def _text(data: bytes, path: str | None) -> str:
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise CorruptDataError(f"not UTF-8 text (byte {exc.start})", path=path, offset=exc.start) from None


def _int(s: str, what: str, path: str | None, line: int) -> int:
    try:
        if not re.fullmatch(r"-?\d+", s):
            raise ValueError
        return int(s)
    except ValueError:
        where = f"line {line}: " if line > 0 else ""
        raise CorruptDataError(f"{where}{what} is not an integer: {s[:40]!r}", path=path) from None


def _checkpoint_lines(data: bytes, path: str | None, fields: int, expected_version: int = 0
                      ) -> tuple[int, list[tuple[int, list[str]]]]:
    """Kafka's checkpoint reader: version, count, exactly ``count`` entry lines of ``fields`` fields."""
    text = _text(data, path)
    lines = text.split("\n")
    if lines and lines[-1] == "":
        lines.pop()
    if not lines:
        return expected_version, []
    version = _int(lines[0].strip(), "version", path, 1)
    if version != expected_version:
        raise CorruptDataError(f"unrecognised checkpoint version {version} (expected {expected_version})", path=path)
    if len(lines) < 2:
        raise CorruptDataError("truncated checkpoint: no entry count line", path=path)
    count = _int(lines[1].strip(), "entry count", path, 2)
    if count < 0:
        raise CorruptDataError(f"line 2: negative entry count {count}", path=path)
    body = lines[2:]
    if len(body) < count:
        raise CorruptDataError(f"truncated checkpoint: expected {count} entries but found only {len(body)}",
                               path=path)
    if len(body) > count:
        raise CorruptDataError(f"expected {count} entries but found more ({len(body)})", path=path)
    out = []
    for i, line in enumerate(body, start=3):
        parts = _WS.split(line.strip())
        if len(parts) != fields:
            raise CorruptDataError(f"line {i}: malformed entry {line[:60]!r} (expected {fields} fields)", path=path)
        out.append((i, parts))
    return version, out


def parse_offset_checkpoint(data: bytes, *, path: str | None = None) -> OffsetCheckpoint:
    """Parse one of the four per-log-directory offset checkpoint files."""
    version, lines = _checkpoint_lines(data, path, 3)
    offsets: dict[tuple[str, int], int] = {}
    for i, (topic, part, off) in lines:
        p = _int(part, "partition", path, i)
        if p < 0:
            raise CorruptDataError(f"line {i}: negative partition {p}", path=path)
        offsets[(topic, p)] = _int(off, "offset", path, i)
    return OffsetCheckpoint(version, offsets)


def encode_offset_checkpoint(offsets: dict[tuple[str, int], int], version: int = 0) -> bytes:
    """The file content Kafka writes for ``offsets`` (entry order as given)."""
    lines = [str(version), str(len(offsets))] + [f"{t} {p} {o}" for (t, p), o in offsets.items()]
    return ("\n".join(lines) + "\n").encode()


def parse_leader_epoch_checkpoint(data: bytes, *, path: str | None = None) -> LeaderEpochCheckpoint:
    version, lines = _checkpoint_lines(data, path, 2)
    entries = [EpochEntry(_int(e, "epoch", path, i), _int(o, "start offset", path, i)) for i, (e, o) in lines]
    return LeaderEpochCheckpoint(version, entries)


def encode_leader_epoch_checkpoint(entries: list[EpochEntry], version: int = 0) -> bytes:
    lines = [str(version), str(len(entries))] + [f"{e.epoch} {e.start_offset}" for e in entries]
    return ("\n".join(lines) + "\n").encode()


def is_kafka_uuid(s: str) -> bool:
    """A Kafka ``Uuid`` string: 16 bytes in URL-safe base64 without padding (22 characters)."""
    if len(s) != 22 or not re.fullmatch(r"[A-Za-z0-9_-]{22}", s):
        return False
    try:
        return len(base64.urlsafe_b64decode(s + "==")) == 16
    except (binascii.Error, ValueError):
        return False


def _properties(text: str) -> dict[str, str]:
    """The subset of java.util.Properties that Kafka writes: ``key=value`` lines, ``#``/``!`` comments."""
    props: dict[str, str] = {}
    for raw in text.splitlines():
        line = raw.strip()
        if not line or line[0] in "#!":
            continue
        m = re.match(r"^((?:[^=:\s\\]|\\.)+)\s*[=:\s]\s*(.*)$", line)
        key, value = (m.group(1), m.group(2)) if m else (line, "")
        props[key.replace("\\", "")] = value
    return props


def parse_meta_properties(data: bytes, *, path: str | None = None) -> MetaProperties:
    """``meta.properties`` as Kafka validates it: an integer ``version`` of 0 or 1; version 1 needs
    ``node.id`` and ``cluster.id``; ``directory.id`` (if any) must be a Kafka Uuid."""
    props = _properties(_text(data, path))
    if "version" not in props:
        raise CorruptDataError("meta.properties has no version", path=path)
    version = _int(props["version"], "version", path, 0)
    if version not in (0, 1):
        raise CorruptDataError(f"meta.properties version {version} is not 0 or 1", path=path)
    id_key = "node.id" if version == 1 else "broker.id"
    node_id = None
    if id_key in props:
        node_id = _int(props[id_key], id_key, path, 0)
    elif version == 1 or "node.id" in props:
        raise CorruptDataError(f"meta.properties version {version} has no {id_key}", path=path)
    cluster_id = props.get("cluster.id")
    if version == 1 and not cluster_id:
        raise CorruptDataError("meta.properties version 1 has no cluster.id", path=path)
    directory_id = props.get("directory.id")
    if directory_id is not None and not is_kafka_uuid(directory_id):
        raise CorruptDataError(f"meta.properties directory.id is not a Kafka Uuid: {directory_id[:40]!r}", path=path)
    known = {"version", id_key, "cluster.id", "directory.id"}
    return MetaProperties(version, node_id, cluster_id, directory_id,
                          {k: v for k, v in props.items() if k not in known})


def parse_partition_metadata(data: bytes, *, path: str | None = None) -> PartitionMetadata:
    lines = [x for x in _text(data, path).split("\n") if x.strip()]
    if len(lines) < 2:
        raise CorruptDataError("truncated partition.metadata (expected version and topic_id lines)", path=path)
    m = re.fullmatch(r"version:\s*(\S+)", lines[0].strip())
    if not m:
        raise CorruptDataError(f"line 1: expected 'version: 0', got {lines[0][:40]!r}", path=path)
    version = _int(m.group(1), "version", path, 1)
    if version != 0:
        raise CorruptDataError(f"unrecognised partition.metadata version {version}", path=path)
    m = re.fullmatch(r"topic_id:\s*(\S+)", lines[1].strip())
    if not m or not is_kafka_uuid(m.group(1)):
        raise CorruptDataError(f"line 2: expected 'topic_id: <uuid>', got {lines[1][:60]!r}", path=path)
    if len(lines) > 2:
        raise CorruptDataError(f"unexpected line 3 in partition.metadata: {lines[2][:40]!r}", path=path)
    return PartitionMetadata(version, m.group(1))


def parse_clean_shutdown(data: bytes, *, path: str | None = None) -> CleanShutdown:
    """``.kafka_cleanshutdown``: empty (legacy marker) or ``{"version":0,"brokerEpoch":N}``."""
    if not data.strip():
        return CleanShutdown(None, None)
    try:
        obj = json.loads(_text(data, path))
    except json.JSONDecodeError as exc:
        raise CorruptDataError(f"not JSON: {exc.msg} at character {exc.pos}", path=path) from None
    if not isinstance(obj, dict) or not isinstance(obj.get("version"), int) \
            or not isinstance(obj.get("brokerEpoch"), int) or isinstance(obj.get("brokerEpoch"), bool):
        raise CorruptDataError('expected {"version": int, "brokerEpoch": int}', path=path)
    return CleanShutdown(obj["version"], obj["brokerEpoch"])


def encode_clean_shutdown(broker_epoch: int, version: int = 0) -> bytes:
    return json.dumps({"version": version, "brokerEpoch": broker_epoch}, separators=(",", ":")).encode()
