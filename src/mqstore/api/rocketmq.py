"""``MessageStore``: an embedded, durable message store in the RocketMQ layout.

>>> with MessageStore.open("./data") as store:
...     r = store.put("TopicTest", b"hello", keys=["order-1"], tags="TagA")
...     [m.body for m in store.query_by_key("TopicTest", "order-1")]
[b'hello']

Several processes may open the same store read-only (``read_only=True``) while one writer holds
its lock.  See :class:`StoreConfig` for the durability promise of each flush policy.
"""

from __future__ import annotations

import os
import socket
import struct
import threading
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from mqstore.errors import InvalidArgumentError, InvalidKeyError, OffsetOutOfRangeError
from mqstore.formats.rocketmq.msgid import create_message_id, decode_message_id
from mqstore.formats.rocketmq.properties import (
    PROPERTY_KEYS,
    PROPERTY_TAGS,
    PROPERTY_UNIQ_KEY,
    encode_properties,
    join_keys,
    split_keys,
)
from mqstore.formats.rocketmq.record import Host, MessageRecord
from mqstore.storage.rocketmq.config import FLUSH_ASYNC, FLUSH_SYNC, StoreConfig, validate_topic
from mqstore.storage.rocketmq.consumequeue import BOUNDARY_LOWER, BOUNDARY_UPPER
from mqstore.storage.rocketmq.store import RecoveryReport, RocketMQStore

__all__ = [
    "BOUNDARY_LOWER",
    "BOUNDARY_UPPER",
    "FLUSH_ASYNC",
    "FLUSH_SYNC",
    "Message",
    "MessageStore",
    "PutResult",
    "StoreConfig",
]

LONG_MAX = 2**63 - 1


@dataclass(slots=True, frozen=True)
class PutResult:
    commit_log_offset: int
    queue_offset: int
    store_timestamp: int
    size: int
    msg_id: str  # the offset message id (store host + physical offset)
    uniq_key: str | None


@dataclass(slots=True)
class Message:
    """A stored message with every record field (names as the Spark ``rocketmq`` source)."""

    topic: str
    body: bytes
    queue_id: int
    queue_offset: int
    commit_log_offset: int
    size: int
    flag: int
    sys_flag: int
    born_timestamp: int
    born_host: str
    store_timestamp: int
    store_host: str
    reconsume_times: int
    body_crc: int
    prepared_transaction_offset: int
    properties: dict[str, str] = field(default_factory=dict)
    msg_id: str = ""

    @property
    def keys(self) -> list[str]:
        return split_keys(self.properties.get(PROPERTY_KEYS))

    @property
    def tags(self) -> str | None:
        return self.properties.get(PROPERTY_TAGS)

    @property
    def uniq_key(self) -> str | None:
        return self.properties.get(PROPERTY_UNIQ_KEY)

    @classmethod
    def from_record(cls, rec: MessageRecord) -> Message:
        return cls(
            topic=rec.topic, body=rec.body, queue_id=rec.queue_id, queue_offset=rec.queue_offset,
            commit_log_offset=rec.physical_offset, size=rec.total_size, flag=rec.flag, sys_flag=rec.sys_flag,
            born_timestamp=rec.born_timestamp, born_host=str(rec.born_host), store_timestamp=rec.store_timestamp,
            store_host=str(rec.store_host), reconsume_times=rec.reconsume_times, body_crc=rec.body_crc or 0,
            prepared_transaction_offset=rec.prepared_transaction_offset, properties=dict(rec.properties),
            msg_id=create_message_id(rec.store_host, rec.physical_offset),
        )

    def to_json_dict(self) -> dict[str, Any]:
        """The JSON shape of every CLI command that prints messages (Spark column names)."""
        import base64

        return {
            "topic": self.topic, "flag": self.flag, "body": base64.b64encode(self.body).decode("ascii"),
            "properties": self.properties, "queueId": self.queue_id, "queueOffset": self.queue_offset,
            "commitLogOffset": self.commit_log_offset, "size": self.size, "bornTimestamp": self.born_timestamp,
            "storeTimestamp": self.store_timestamp, "bornHost": self.born_host, "storeHost": self.store_host,
            "sysFlag": self.sys_flag, "reconsumeTimes": self.reconsume_times, "bodyCRC": self.body_crc,
            "keys": self.keys, "tags": self.tags, "uniqKey": self.uniq_key,
        }


class _UniqKeyGenerator:
    """Client-style unique ids: ip + pid + a per-process hash + ms in month + counter (32 hex)."""

    def __init__(self) -> None:
        try:
            ip = socket.inet_aton(socket.gethostbyname(socket.gethostname()))
        except OSError:
            ip = b"\x7f\x00\x00\x01"
        self._prefix = ip + struct.pack(">hi", os.getpid() & 0x7FFF, id(self) & 0x7FFFFFFF)
        self._counter = 0
        self._lock = threading.Lock()

    def next(self, now_ms: int) -> str:
        import datetime as dt

        t = dt.datetime.fromtimestamp(now_ms / 1000, tz=dt.UTC)
        month_start = dt.datetime(t.year, t.month, 1, tzinfo=dt.UTC)
        since = (now_ms - int(month_start.timestamp() * 1000)) & 0xFFFFFFFF
        with self._lock:
            self._counter = (self._counter + 1) & 0xFFFF
            c = self._counter
        return (self._prefix + struct.pack(">IH", since, c)).hex().upper()


def _check_text(what: str, value: str) -> str:
    if not isinstance(value, str):
        raise InvalidKeyError(f"{what} must be a string, not {type(value).__name__}")
    if "\x01" in value or "\x02" in value:
        raise InvalidKeyError(f"{what} {value!r} contains a reserved separator character (\\x01 or \\x02)")
    return value


class MessageStore:
    """An embedded RocketMQ-layout store.  Use :meth:`open`; it is a context manager."""

    def __init__(self, engine: RocketMQStore) -> None:
        self._engine = engine
        self._uniq = _UniqKeyGenerator()
        self._store_host = Host.parse(engine.config.store_host)

    # ------------------------------------------------------------------ lifecycle
    @classmethod
    def open(cls, path: str | os.PathLike[str], config: StoreConfig | Mapping[str, Any] | None = None, *,
             read_only: bool = False, create: bool = True) -> MessageStore:
        """Open (and recover) the store at ``path``; ``read_only`` opens without the writer lock
        and never changes a file."""
        if isinstance(config, Mapping):
            config = StoreConfig.from_dict(dict(config))
        return cls(RocketMQStore(path, config, read_only=read_only, create=create))

    def __enter__(self) -> MessageStore:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        self._engine.close()

    def flush(self) -> None:
        """Flush the CommitLog, dispatch pending messages, flush ConsumeQueues, IndexFiles and
        the checkpoint: after it returns every message put so far survives a machine crash."""
        self._engine.check_open()
        self._engine.flush()

    @property
    def engine(self) -> RocketMQStore:
        return self._engine

    @property
    def path(self) -> str:
        return str(self._engine.root)

    @property
    def config(self) -> StoreConfig:
        return self._engine.config

    @property
    def recovery(self) -> RecoveryReport:
        return self._engine.recovery

    # ------------------------------------------------------------------ write
    def _make_record(self, topic: str, body: bytes, queue_id: int = 0, keys: str | Sequence[str] | None = None,
                     tags: str | None = None, properties: Mapping[str, str] | None = None, flag: int = 0,
                     born_host: str | None = None, born_timestamp: int | None = None, uniq_key: str | None = None,
                     sys_flag: int = 0, reconsume_times: int = 0, prepared_transaction_offset: int = 0,
                     now: int = 0) -> MessageRecord:
        validate_topic(topic)
        if not isinstance(body, bytes | bytearray | memoryview):
            raise InvalidArgumentError(f"body must be bytes, not {type(body).__name__}")
        if not isinstance(queue_id, int) or not 0 <= queue_id < 2**31:
            raise InvalidArgumentError(f"queue_id must be a non-negative int, not {queue_id!r}")
        if not isinstance(flag, int) or not -(2**31) <= flag < 2**31:
            raise InvalidArgumentError(f"flag must fit in a 32-bit int, not {flag!r}")
        props: dict[str, str] = {}
        keys_s = join_keys(keys)
        if keys_s is not None:
            if isinstance(keys, (list, tuple)):
                for k in keys:
                    _check_text("key", k)
                    if " " in k or not k:
                        raise InvalidKeyError(f"key {k!r} must be non-empty and contain no space (keys are space-separated)")
            props[PROPERTY_KEYS] = _check_text("keys", keys_s)
        if tags is not None:
            props[PROPERTY_TAGS] = _check_text("tags", tags)
        for name, value in (properties or {}).items():
            _check_text("property name", name)
            if not name:
                raise InvalidKeyError("property names must not be empty")
            props[name] = _check_text(f"property {name}", value)
        if uniq_key is None and PROPERTY_UNIQ_KEY not in props:
            uniq_key = self._uniq.next(now)
        if uniq_key is not None:
            props[PROPERTY_UNIQ_KEY] = _check_text("uniq_key", uniq_key)
        return MessageRecord(
            topic=topic, body=bytes(body), queue_id=queue_id, flag=flag, sys_flag=sys_flag,
            born_timestamp=now if born_timestamp is None else int(born_timestamp),
            born_host=Host.parse(born_host) if born_host else self._store_host, store_host=self._store_host,
            reconsume_times=reconsume_times, prepared_transaction_offset=prepared_transaction_offset,
            properties_text=encode_properties(props), properties=props,
        )

    def put(self, topic: str, body: bytes, queue_id: int = 0, *, keys: str | Sequence[str] | None = None,
            tags: str | None = None, properties: Mapping[str, str] | None = None, flag: int = 0,
            born_host: str | None = None, born_timestamp: int | None = None, uniq_key: str | None = None,
            sys_flag: int = 0) -> PutResult:
        """Append one message.  ``keys``: a space-separated string or a list of keys.  A unique
        key (``UNIQ_KEY``) is generated like the Java client does unless given."""
        return self.put_batch([dict(topic=topic, body=body, queue_id=queue_id, keys=keys, tags=tags,
                                    properties=properties, flag=flag, born_host=born_host,
                                    born_timestamp=born_timestamp, uniq_key=uniq_key, sys_flag=sys_flag)])[0]

    def put_batch(self, messages: Iterable[Mapping[str, Any]]) -> list[PutResult]:
        """Append many messages under one lock (each a mapping of :meth:`put`'s arguments)."""
        self._engine.check_open()
        now = self._engine.config.now()
        records = []
        for m in messages:
            try:
                records.append(self._make_record(now=now, **m))
            except TypeError as exc:
                raise InvalidArgumentError(f"bad message fields: {exc}") from exc
        if not records:
            return []
        results = self._engine.append(records)
        return [
            PutResult(r.commit_log_offset, r.queue_offset, r.store_timestamp, r.size,
                      create_message_id(self._store_host, r.commit_log_offset), rec.properties.get(PROPERTY_UNIQ_KEY))
            for r, rec in zip(results, records, strict=True)
        ]

    # ------------------------------------------------------------------ read
    def _sync(self) -> None:
        self._engine.check_open()
        self._engine.dispatch_pending()

    def get_by_offset(self, commit_log_offset: int, *, check_crc: bool = True) -> Message:
        """The message whose record starts at ``commit_log_offset``."""
        self._engine.check_open()
        return Message.from_record(self._engine.commit_log.read_record(int(commit_log_offset), check_crc=check_crc))

    def get_by_msg_id(self, msg_id: str) -> Message:
        """The message of an offset message id (as returned by :meth:`put`)."""
        _host, offset = decode_message_id(msg_id)
        return self.get_by_offset(offset)

    def get(self, topic: str, queue_id: int, queue_offset: int, max_count: int = 32) -> list[Message]:
        """Up to ``max_count`` messages of a queue from ``queue_offset`` (ConsumeQueue order)."""
        validate_topic(topic)
        if max_count <= 0:
            raise InvalidArgumentError("max_count must be positive")
        self._sync()
        cq = self._engine.consume_queue(topic, queue_id)
        if cq is None:
            return []
        if queue_offset < 0 or queue_offset > cq.max_offset_in_queue:
            raise OffsetOutOfRangeError(
                f"queue offset {queue_offset} outside [{cq.min_offset_in_queue}, {cq.max_offset_in_queue}] of {topic}/{queue_id}"
            )
        units = cq.get_units(queue_offset, max_count)
        out = []
        for off, size in zip(units["offset"].tolist(), units["size"].tolist(), strict=True):
            if size == 2**31 - 1 and off == 0:
                continue  # blank pre-fill unit
            if off < self._engine.commit_log.min_offset:
                continue  # its CommitLog segment was deleted
            out.append(self.get_by_offset(off, check_crc=False))
        return out

    def min_offset(self, topic: str, queue_id: int) -> int:
        validate_topic(topic)
        self._sync()
        cq = self._engine.consume_queue(topic, queue_id)
        return 0 if cq is None else cq.min_offset_in_queue

    def max_offset(self, topic: str, queue_id: int) -> int:
        validate_topic(topic)
        self._sync()
        cq = self._engine.consume_queue(topic, queue_id)
        return 0 if cq is None else cq.max_offset_in_queue

    def topics(self) -> dict[str, list[int]]:
        self._sync()
        out: dict[str, list[int]] = {}
        for topic, qid in sorted(self._engine.consume_queues):
            out.setdefault(topic, []).append(qid)
        return out

    def offset_for_time(self, topic: str, queue_id: int, timestamp: int, boundary: str = BOUNDARY_LOWER) -> int:
        """``getOffsetInQueueByTime``: LOWER → first unit with store time ≥ timestamp; UPPER →
        last unit with store time ≤ timestamp (spec §2.6)."""
        validate_topic(topic)
        if boundary not in (BOUNDARY_LOWER, BOUNDARY_UPPER):
            raise InvalidArgumentError(f"boundary must be 'lower' or 'upper', not {boundary!r}")
        self._sync()
        cq = self._engine.consume_queue(topic, queue_id)
        if cq is None:
            return 0
        cl = self._engine.commit_log
        return cq.offset_in_queue_by_time(int(timestamp), boundary, cl.pickup_store_timestamp, cl.min_offset)

    # ------------------------------------------------------------------ queries by key
    def query_offsets_broker(self, topic: str, key: str, max_num: int = 64, begin: int = 0,
                             end: int = LONG_MAX) -> list[int]:
        """Exactly ``IndexService.queryOffset``: candidate offsets newest first, second-granularity
        time filter, capped at ``max_msgs_num_batch`` (64), hash collisions included."""
        validate_topic(topic)
        self._sync()
        res = self._engine.index.query_offset(topic, key, max_num, begin, end, cap=self._engine.config.max_msgs_num_batch)
        return res.phy_offsets

    def query_by_key(self, topic: str, key: str, begin: int | None = None, end: int | None = None,
                     max_num: int | None = None) -> list[Message]:
        """Messages of ``topic`` whose KEYS contain ``key`` or whose unique key is ``key``, with a
        store time in [begin, end] (ms, inclusive), newest first; no cap unless ``max_num``."""
        return list(self.iter_query_by_key(topic, key, begin, end, max_num))

    def iter_query_by_key(self, topic: str, key: str, begin: int | None = None, end: int | None = None,
                          max_num: int | None = None) -> Iterator[Message]:
        validate_topic(topic)
        if not isinstance(key, str) or not key:
            raise InvalidKeyError("key must be a non-empty string")
        b = 0 if begin is None else int(begin)
        e = LONG_MAX if end is None else int(end)
        if max_num is not None and max_num <= 0:
            raise InvalidArgumentError("max_num must be positive")
        self._sync()
        seen: set[int] = set()
        found: list[Message] = []
        min_off = self._engine.commit_log.min_offset
        for off in self._engine.index.candidates(topic, key, b, e):
            if off in seen or off < min_off:
                continue
            seen.add(off)
            try:
                rec = self._engine.commit_log.read_record(off)
            except OffsetOutOfRangeError:
                continue
            if rec.topic != topic or not b <= rec.store_timestamp <= e:
                continue
            if key in split_keys(rec.keys) or rec.uniq_key == key:
                found.append(Message.from_record(rec))
        found.sort(key=lambda m: (m.store_timestamp, m.commit_log_offset), reverse=True)
        yield from found[:max_num] if max_num is not None else found

    def query_offsets_many(self, topic: str, keys: Sequence[str], max_num: int = 64, begin: int = 0,
                           end: int = LONG_MAX) -> list[list[int]]:
        """:meth:`query_offsets_broker` for many keys at once (vectorised chain walk): one list of
        candidate offsets per key, newest first, hash collisions included, broker cap applied."""
        validate_topic(topic)
        keys = list(keys)
        if any(not isinstance(k, str) for k in keys):
            raise InvalidKeyError("keys must be strings")
        self._sync()
        cap = self._engine.config.max_msgs_num_batch
        limit = min(max_num, cap) if cap is not None else max_num
        if limit <= 0:
            return [[] for _ in keys]
        res = self._engine.index.candidates_many(topic, keys, int(begin), int(end), max_num=limit, widen=False)
        return [r.tolist() for r in res]

    def query_by_keys(self, topic: str, keys: Sequence[str], begin: int | None = None, end: int | None = None,
                      max_num: int | None = None) -> dict[str, list[Message]]:
        """:meth:`query_by_key` for many keys of ``topic`` at once: ``{key: messages}`` (newest
        first, exact key and time checks, no cap unless ``max_num`` per key).  The index chains of
        all keys are walked in one vectorised pass per IndexFile; each candidate record is read
        once even when several keys point at it."""
        validate_topic(topic)
        keys = list(dict.fromkeys(keys))
        if any(not isinstance(k, str) or not k for k in keys):
            raise InvalidKeyError("every key must be a non-empty string")
        b = 0 if begin is None else int(begin)
        e = LONG_MAX if end is None else int(end)
        if max_num is not None and max_num <= 0:
            raise InvalidArgumentError("max_num must be positive")
        self._sync()
        cands = self._engine.index.candidates_many(topic, keys, b, e)
        min_off = self._engine.commit_log.min_offset
        cache: dict[int, MessageRecord | None] = {}
        out: dict[str, list[Message]] = {}
        for key, offs in zip(keys, cands, strict=True):
            found: list[Message] = []
            for off in dict.fromkeys(offs.tolist()):
                if off < min_off:
                    continue
                if off not in cache:
                    try:
                        cache[off] = self._engine.commit_log.read_record(off)
                    except OffsetOutOfRangeError:
                        cache[off] = None
                rec = cache[off]
                if rec is None or rec.topic != topic or not b <= rec.store_timestamp <= e:
                    continue
                if key in split_keys(rec.keys) or rec.uniq_key == key:
                    found.append(Message.from_record(rec))
            found.sort(key=lambda m: (m.store_timestamp, m.commit_log_offset), reverse=True)
            out[key] = found[:max_num] if max_num is not None else found
        return out

    # ------------------------------------------------------------------ maintenance
    def delete_expired(self, *, force: bool = False) -> int:
        return self._engine.delete_expired(force=force)

    def dispatch(self) -> int:
        """Dispatch pending CommitLog records now (normally the reput thread does it)."""
        self._engine.check_open()
        return self._engine.dispatch_pending()
