"""``MessageStore``: an embedded, durable message store in the RocketMQ layout.

>>> with MessageStore.open("./data") as store:
...     r = store.put("TopicTest", b"hello", keys=["order-1"], tags="TagA")
...     [m.body for m in store.query_by_key("TopicTest", "order-1")]
[b'hello']

Several processes may open the same store read-only (``read_only=True``) while one writer holds
its lock.  See :class:`StoreConfig` for the durability promise of each flush policy.
"""

from __future__ import annotations

import functools
import itertools
import operator
import os
import struct
import time
from collections import deque
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, fields
from itertools import islice, repeat
from operator import itemgetter
from typing import Any

import numpy as np

from mqstore.errors import CorruptDataError, InvalidArgumentError, InvalidKeyError, OffsetOutOfRangeError
from mqstore.formats.rocketmq.msgid import create_message_id, decode_message_id
from mqstore.formats.rocketmq.properties import (
    PROPERTY_KEYS,
    PROPERTY_TAGS,
    PROPERTY_UNIQ_KEY,
    encode_properties,
    java_hashmap_order,
    join_keys,
    parse_properties,
    split_keys,
)
from mqstore.formats.rocketmq.record import MAGIC_V1, Host, MessageRecord, body_crc, choose_magic
from mqstore.kernels.crc import crc32_spans
from mqstore.kernels.rocketmq import put_one as _put_one
from mqstore.kernels.rocketmq.columns import F_SEGMENT as _F_SEGMENT
from mqstore.kernels.rocketmq.columns import (
    RECORD_FIELDS,
    decode_fields,
)
from mqstore.kernels.rocketmq.put_one import encode_common_into
from mqstore.kernels.rocketmq.put_one import gather_columns as _gather_columns
from mqstore.kernels.rocketmq.put_one import gather_plain as _gather_plain
from mqstore.storage.rocketmq.config import FLUSH_ASYNC, FLUSH_SYNC, StoreConfig, validate_topic
from mqstore.storage.rocketmq.consumequeue import BOUNDARY_LOWER, BOUNDARY_UPPER
from mqstore.storage.rocketmq.layout import resolve_config
from mqstore.storage.rocketmq.lmq import record_queue_positions
from mqstore.storage.rocketmq.store import RecoveryReport, RocketMQStore

__all__ = [
    "BOUNDARY_LOWER",
    "BOUNDARY_UPPER",
    "FLUSH_ASYNC",
    "FLUSH_SYNC",
    "Message",
    "MessageStore",
    "PutBatchResult",
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


_PUT_RESULT_SLOTS = tuple(PutResult.__dict__[f.name].__set__ for f in fields(PutResult))
# Building a PutResult through its slot setters: equal to PutResult(...), without the frozen
# dataclass's per-field object.__setattr__ calls (2.5x cheaper).
_new = object.__new__
_set_off, _set_qo, _set_ts, _set_size, _set_id, _set_uk = _PUT_RESULT_SLOTS
_time_ns = time.time_ns


def _put_result(o: int, qo: int, ts: int, size: int, msg_id: str, uniq: str | None) -> PutResult:
    r = _new(PutResult)
    _set_off(r, o)
    _set_qo(r, qo)
    _set_ts(r, ts)
    _set_size(r, size)
    _set_id(r, msg_id)
    _set_uk(r, uniq)
    return r


def _put_result_py(o: int, qo: int, ts: int, size: int, prefix: str, uniq: str | None) -> PutResult:
    """Twin of the native ``put_result``: the result with the offset message id ``prefix`` + hex."""
    return _put_result(o, qo, ts, size, f"{prefix}{o:016X}", uniq)


#: the result of a single put from (offset, queue offset, store time, size, message id prefix,
#: unique key): one C call when the native put module is built
_make_put_result = _put_result_py
#: put() of the common shape after its checks (put_one.put_plain): one C call when built and bound
_put_plain = _put_one.put_plain_struct
try:
    if _put_one.bind_put_result(PutResult, tuple(PutResult.__dict__[f.name] for f in fields(PutResult))):
        _make_put_result = _put_one.put_result_native
        _put_plain = _put_one.put_plain
except TypeError:  # pragma: no cover - a model the C builder cannot fill
    pass


class PutBatchResult(Sequence[PutResult]):
    """The outcome of :meth:`MessageStore.put_columns` and :meth:`MessageStore.put_batch`, as
    columns: ``commit_log_offset``, ``queue_offset`` and ``size`` are int64 arrays,
    ``store_timestamp`` is shared by the batch.  It is a read-only sequence of
    :class:`PutResult` made on demand: indexing, slicing (a list), iterating, ``len``, ``==``
    with a list, and ``+`` (a list) work as on the ``list[PutResult]`` of earlier versions;
    :meth:`to_list` gives the list itself."""

    __slots__ = ("_msgid_prefix", "_uniq_keys", "_uniq_run", "commit_log_offset", "queue_offset", "size",
                 "store_timestamp")

    def __init__(self, commit_log_offset: np.ndarray, queue_offset: np.ndarray, size: np.ndarray,
                 store_timestamp: int, uniq_keys: list[str | None] | None, msgid_prefix: str,
                 uniq_run: tuple[str, int] | None = None) -> None:
        self.commit_log_offset = commit_log_offset
        self.queue_offset = queue_offset
        self.size = size
        self.store_timestamp = store_timestamp
        self._uniq_keys = uniq_keys
        self._uniq_run = uniq_run  # (head, first counter): generated keys, made when first asked for
        self._msgid_prefix = msgid_prefix

    @property
    def uniq_keys(self) -> list[str | None]:
        """The unique key of each message."""
        if self._uniq_keys is None:
            head, first = self._uniq_run or ("", 0)
            self._uniq_keys = _uniq_run(head, first, len(self))  # type: ignore[assignment]
        return self._uniq_keys  # type: ignore[return-value]

    def __len__(self) -> int:
        return int(self.commit_log_offset.shape[0])

    @property
    def msg_ids(self) -> list[str]:
        """The offset message ids (store host + commit log offset) of the batch."""
        p = self._msgid_prefix
        return [f"{p}{o:016X}" for o in self.commit_log_offset.tolist()]

    def __getitem__(self, i: int | slice) -> Any:
        if isinstance(i, slice):
            return [self[j] for j in range(*i.indices(len(self)))]
        o = int(self.commit_log_offset[i])
        return PutResult(o, int(self.queue_offset[i]), self.store_timestamp, int(self.size[i]),
                         f"{self._msgid_prefix}{o:016X}", self.uniq_keys[i])

    def __iter__(self) -> Iterator[PutResult]:
        return iter(self.to_list())

    def __eq__(self, other: object) -> bool:
        if isinstance(other, PutBatchResult | list | tuple):
            return self.to_list() == list(other)
        return NotImplemented

    __hash__ = None  # type: ignore[assignment]

    def __add__(self, other: Iterable[PutResult]) -> list[PutResult]:
        return self.to_list() + list(other)

    def __radd__(self, other: Iterable[PutResult]) -> list[PutResult]:
        return list(other) + self.to_list()

    def __repr__(self) -> str:
        return f"PutBatchResult({self.to_list()!r})"

    def to_list(self) -> list[PutResult]:
        ts, p = self.store_timestamp, self._msgid_prefix
        # Equal to PutResult(...) per row; the slot setters skip the frozen dataclass's per-field
        # object.__setattr__ calls (about 40 % of building a result).
        new = object.__new__
        s_off, s_qo, s_ts, s_size, s_id, s_uk = _PUT_RESULT_SLOTS
        out = []
        for o, q, s, u in zip(self.commit_log_offset.tolist(), self.queue_offset.tolist(), self.size.tolist(),
                              self.uniq_keys, strict=True):
            r = new(PutResult)
            s_off(r, o)
            s_qo(r, q)
            s_ts(r, ts)
            s_size(r, s)
            s_id(r, f"{p}{o:016X}")
            s_uk(r, u)
            out.append(r)
        return out


#: the message model of the whole package: a stored record with every field (the names of the
#: Spark ``rocketmq`` source's columns in :meth:`~MessageRecord.to_json_dict`)
Message = MessageRecord


#: "0000" .. "FFFF", the counter digits of the unique keys: made with the first key (65,536
#: strings, ~40 ms) so that a process that only reads a store (a dump, a query) does not pay it
_HEX4: list[str] = []


class _UniqKeyGenerator:
    """Client-style unique ids: ip + pid + a per-process hash + ms in month + counter (32 hex).

    The 16-bit counter is an ``itertools.count`` (taking the next value, or a run of values
    with :meth:`next_many`, is one C call: atomic under the GIL, no lock); the first 28 hex
    digits are cached per millisecond in :attr:`head` (one tuple, swapped atomically)."""

    def __init__(self) -> None:
        self._prefix = b""  # ip + pid + hash, made with the first key (_start: a host name lookup)
        self._hex_prefix = ""
        self.count = itertools.count(1)  # next(count) & 0xFFFF is the next counter value
        self._month = (0, -1)  # [start, end) in ms of the month the last key fell in
        self.head: tuple[int, str] = (-1, "")  # (ms, the key without its counter) of the last key

    def set_counter(self, last: int) -> None:
        """Make ``last`` the counter value of the last key (the next one gets ``last + 1``)."""
        self.count = itertools.count(last + 1)

    def _since_month_start(self, now_ms: int) -> int:
        start, end = self._month
        if not start <= now_ms < end:
            import datetime as dt

            t = dt.datetime.fromtimestamp(now_ms / 1000, tz=dt.UTC)
            first = dt.datetime(t.year, t.month, 1, tzinfo=dt.UTC)
            nxt = dt.datetime(t.year + t.month // 12, t.month % 12 + 1, 1, tzinfo=dt.UTC)
            start, end = int(first.timestamp() * 1000), int(nxt.timestamp() * 1000)
            self._month = (start, end)
        return (now_ms - start) & 0xFFFFFFFF

    def _start(self) -> None:
        """The key prefix and the counter digits, made before the first key."""
        global _HEX4
        if not _HEX4:
            _HEX4 = [f"{i:04X}" for i in range(65536)]
        if not self._hex_prefix:
            import socket  # (only here: a reader never imports it, ~5 ms of a one-shot command)

            try:
                ip = socket.inet_aton(socket.gethostbyname(socket.gethostname()))
            except OSError:
                ip = b"\x7f\x00\x00\x01"
            self._prefix = ip + struct.pack(">hi", os.getpid() & 0x7FFF, id(self) & 0x7FFFFFFF)
            self._hex_prefix = self._prefix.hex().upper()

    def head_for(self, now_ms: int) -> tuple[int, str]:
        """``(now_ms, key prefix)`` for keys made at ``now_ms`` (also cached in :attr:`head`).
        Every path that makes a key calls it first (the fast put path when the millisecond
        changes), so the prefix and :data:`_HEX4` exist before a key uses them."""
        h = self.head
        if h[0] != now_ms:
            if not self._hex_prefix or not _HEX4:
                self._start()
            h = self.head = (now_ms, f"{self._hex_prefix}{self._since_month_start(now_ms):08X}")
        return h

    def next(self, now_ms: int) -> str:
        return self.head_for(now_ms)[1] + _HEX4[next(self.count) & 0xFFFF]

    def next_many(self, now_ms: int, n: int) -> list[str]:
        """``n`` consecutive keys (the same as ``n`` calls of :meth:`next` at ``now_ms``)."""
        if n <= 0:
            return []
        head, first = self.reserve(now_ms, n)
        return _uniq_run(head, first, n)

    def reserve(self, now_ms: int, n: int) -> tuple[str, int]:
        """Take ``n`` consecutive counter values at once: ``(key head, first counter value)``; key
        ``i`` of the run is the head + 4 hex digits of ``(first + i) & 0xFFFF``."""
        head = self.head_for(now_ms)[1]
        last = deque(islice(self.count, n), maxlen=1)[0]  # one C call: n consecutive values
        return head, (last - n + 1) & 0xFFFF


def _uniq_run(head: str, first: int, n: int) -> list[str]:
    """The keys of a run taken with :meth:`_UniqKeyGenerator.reserve`."""
    out: list[str] = []
    s = first & 0xFFFF
    while len(out) < n:  # the 16-bit counter wraps
        take = min(n - len(out), 65536 - s)
        out += map(head.__add__, _HEX4[s : s + take])
        s = 0
    return out


# Properties of the common message shape (KEYS, TAGS, UNIQ_KEY, no other property), written in
# the Java HashMap order of that insertion order: one format template per subset of the three.
_FAST_NAMES = (PROPERTY_KEYS, PROPERTY_TAGS, PROPERTY_UNIQ_KEY)
_FAST_ORDER = java_hashmap_order(_FAST_NAMES)
_TEMPLATES = {
    mask: "".join(f"{name}\x01{{{_FAST_NAMES.index(name)}}}\x02" for name in _FAST_ORDER
                  if mask & (1 << _FAST_NAMES.index(name)))
    for mask in range(8)
}
_FAST_FIELDS = frozenset(("topic", "body", "queue_id", "keys", "tags", "properties", "flag", "born_host",
                          "born_timestamp", "uniq_key", "sys_flag"))
_INT32 = 2**31
_ODD_FIELDS = frozenset(("properties", "born_host", "sys_flag"))
_TOPIC = itemgetter("topic")
_EMPTY_U8 = np.zeros(0, np.uint8)
_BODY = itemgetter("body")


def _field(msgs: list[dict[str, Any]], names: set[str], name: str, default: Any) -> list[Any]:
    """The ``name`` field of every message (``default`` where absent), by C-level passes."""
    n = len(msgs)
    if name not in names:
        return [default] * n
    return list(map(dict.get, msgs, repeat(name, n), repeat(default, n)))


def _text_column(values: list[Any]) -> tuple[np.ndarray, np.ndarray, np.ndarray] | None:
    """A column of property values (``str`` or ``None`` each) as UTF-8 ``(buffer, offsets,
    lengths)``, length −1 for ``None``; ``None`` when a value is not a string or contains a
    separator or cannot be encoded (the checked path then reports it or handles it).  One C pass
    when built (``put.text_column``)."""
    from mqstore.kernels.rocketmq.put import text_column  # (numba-free facade)

    return text_column(values)


def _check_text(what: str, value: str) -> str:
    if not isinstance(value, str):
        raise InvalidKeyError(f"{what} must be a string, not {type(value).__name__}")
    if "\x01" in value or "\x02" in value:
        raise InvalidKeyError(f"{what} {value!r} contains a reserved separator character (\\x01 or \\x02)")
    try:
        value.encode("utf-8")
    except UnicodeEncodeError as exc:
        raise InvalidKeyError(f"{what} {value!r} is not valid Unicode text: {exc.reason}") from None
    return value


@functools.lru_cache(maxsize=1024)
def _valid_query_topic(topic: str) -> str:
    return validate_topic(topic)


_QUERY_TOPICS_OK: set[str] = set()  # topics that passed ``validate_topic`` (checked with one set lookup)


def _check_query_topic(topic: object) -> None:
    """``validate_topic`` for the query paths, remembered for valid topics (a bad one raises
    every time: ``lru_cache`` keeps no exceptions)."""
    if type(topic) is str:
        _valid_query_topic(topic)
        if len(_QUERY_TOPICS_OK) >= 4096:
            _QUERY_TOPICS_OK.clear()
        _QUERY_TOPICS_OK.add(topic)
    else:
        validate_topic(topic)


_HOST_TEXT: dict[bytes, Host] = {}  # raw host bytes -> Host (a store has a handful of hosts)


# the rows of decode_fields are unpacked by position below (one ``tolist()`` per group of candidates
# is the cheapest way to Python ints); the order is checked against the named columns here
_EXACT_FIELDS = (
    "size", "magic", "bodyCRC", "queueId", "flag", "queueOffset", "physicalOffset", "sysFlag", "bornTimestamp",
    "bornHostPos", "bornHostWidth", "storeTimestamp", "storeHostPos", "storeHostWidth", "reconsumeTimes",
    "preparedTransactionOffset", "bodyStart", "bodyLen", "topicStart", "topicLen", "propsStart", "propsLen",
)  # fmt: skip
if RECORD_FIELDS != _EXACT_FIELDS:  # pragma: no cover - a changed layout must change the unpacking
    raise ImportError("mqstore.kernels.rocketmq.columns.RECORD_FIELDS changed: update _exact_matches")


def _host_text(raw: bytes) -> Host:
    host = _HOST_TEXT.get(raw)
    if host is None:
        if len(_HOST_TEXT) >= 4096:
            _HOST_TEXT.clear()
        host = _HOST_TEXT[raw] = Host.from_bytes(raw)
    return host


def _exact_matches(cl: Any, offs: list[int], topic: str, key: str, b: int, e: int) -> list[Message] | None:
    """The messages of ``topic`` at the candidate offsets whose KEYS contain ``key`` (or whose
    unique key is ``key``) with a store time in [b, e].  The records' fields are located by one
    compiled pass (``decode_fields``, the structural checks of ``check_record``); only the topic
    bytes, store time and properties are looked at before a record matches, and a ``Message`` (with
    its body CRC verified) is built for matches only.  Returns None when a candidate is not a clean
    record (bad structure, wrong physical offset, body CRC mismatch of a match): the caller then
    reads record by record, which raises the typed error."""
    found: list[Message] = []
    if not offs:
        return found
    max_off = cl.max_offset
    groups: dict[int, tuple[Any, list[int]]] = {}
    for off in offs:
        if off >= max_off:
            continue
        try:
            mf = cl.segment_for(off)
        except OffsetOutOfRangeError:
            continue
        g = groups.get(id(mf))
        if g is None:
            g = groups[id(mf)] = (mf, [])
        g[1].append(off)
    tb = topic.encode("utf-8")
    for mf, group in groups.values():
        mm, base = mf.mm, mf.file_from_offset
        u8 = np.frombuffer(mm, np.uint8)[: mf.wrote_position]
        rows = decode_fields(u8, np.array([off - base for off in group], np.int64))
        if isinstance(rows, int):
            return None
        for off, row in zip(group, rows.tolist(), strict=True):
            crc, phys, store_ts = row[2], row[6], row[11]
            body_start, body_len, topic_start, topic_len, props_start, props_len = row[16:22]
            if phys != off:
                return None
            if mm[topic_start : topic_start + topic_len] != tb or not b <= store_ts <= e:
                continue
            props_text = mm[props_start : props_start + props_len].decode("utf-8", "replace")
            props = parse_properties(props_text)
            if key not in split_keys(props.get(PROPERTY_KEYS)) and props.get(PROPERTY_UNIQ_KEY) != key:
                continue
            body = mm[body_start : body_start + body_len]
            if body_crc(body) != crc:
                return None
            found.append(_message_of(mm, topic, body, props_text, props, row))
    return found


def _message_of(mm: Any, topic: str, body: bytes, props_text: str, props: dict[str, str],
                row: Sequence[int]) -> Message:
    """The :class:`Message` of a checked record from its :data:`RECORD_FIELDS` row in ``mm``."""
    (size, magic, crc, queue_id, flag, queue_offset, off, sys_flag, born_ts, born_pos, born_w, store_ts,
     store_pos, store_w, reconsume, prepared) = row[:16]  # fmt: skip
    # positional, in the order of the fields of MessageRecord (checked at import below)
    return Message(
        topic, body, queue_id, flag, queue_offset, off, sys_flag, born_ts, _host_text(mm[born_pos : born_pos + born_w]),
        store_ts, _host_text(mm[store_pos : store_pos + store_w]), reconsume, prepared, props_text, crc, magic, size,
        props,
    )  # fmt: skip


_MESSAGE_FIELDS = (
    "topic", "body", "queue_id", "flag", "queue_offset", "commit_log_offset", "sys_flag", "born_timestamp",
    "born_host", "store_timestamp", "store_host", "reconsume_times", "prepared_transaction_offset",
    "properties_text", "body_crc", "magic", "total_size", "properties",
)  # fmt: skip
if tuple(f.name for f in fields(Message)) != _MESSAGE_FIELDS:  # pragma: no cover - a changed model
    raise ImportError("mqstore.api.rocketmq: the fields of Message changed: update _message_of")


_NAT_BUILD: list[Any] = []  # [the native builder of the matches' messages, or None], bound on first use


def _native_builder() -> Any:
    """``_nat_rmq_query.messages`` bound to :class:`Message` (its slots filled in C: the same class,
    fields, equality, repr and pickling as :func:`_messages_of_matches` builds), or None."""
    if not _NAT_BUILD:
        from mqstore.formats.rocketmq.record import record_slots
        from mqstore.kernels.rocketmq import key_match

        build = None
        if key_match.messages_native is not None:
            try:
                key_match.bind_messages(Message, record_slots(), _HOST_TEXT, _host_text)
                build = key_match.messages_native
            except TypeError:  # pragma: no cover - a model the C builder cannot fill
                build = None
        _NAT_BUILD.append(build)
        _NAT_QUERY.append(key_match.query_native if build is not None else None)
    return _NAT_BUILD[0]


def _native_query() -> Any:
    """``key_match.query_native`` (the whole single-key query in C), bound with :func:`_native_builder`."""
    _native_builder()
    return _NAT_QUERY[0]


_NAT_QUERY: list[Any] = []  # [the native whole query (key_match.query_native), or None], bound with _NAT_BUILD


def _ms_arg(name: str, value: object) -> int:
    """A time bound of a query (ms; anything ``int()`` takes), clamped to the int64 range every
    store time is in (so the answer is the same); a :class:`InvalidArgumentError` otherwise."""
    try:
        v = int(value)  # type: ignore[call-overload]
    except (TypeError, ValueError, OverflowError):
        raise InvalidArgumentError(f"{name} must be a time in ms, got {value!r}") from None
    return min(max(v, -LONG_MAX - 1), LONG_MAX)


def _no_key_query(topic: object, key: object, begin: object, end: object, max_num: object) -> None:
    """``MessageStore._key_query`` before a native query bound it: no answer (the whole method runs)."""
    return None


def _key_query_of(engine: RocketMQStore) -> Callable[..., Any]:
    """``key_match.KeyQuery`` bound to ``engine`` (a CommitLog with a segment table, the native
    builder bound), or :func:`_no_key_query` when it cannot be made."""
    from mqstore.kernels.rocketmq import key_match

    if key_match.KeyQuery is None or _native_builder() is None:
        return _no_key_query
    cl = engine.commit_log
    return key_match.KeyQuery(engine, engine.index, cl, cl.queue, engine.read_only, _QUERY_TOPICS_OK)  # type: ignore[no-any-return]


def _messages_of_matches(rows: list[list[int]], segments: list[Any], topic: str) -> list[Message]:
    """The messages of the match rows of ``IndexService.exact_matches`` (already checked, newest
    first).  Their ``properties`` are parsed from the text on first access (``properties=None``)."""
    out = []
    hosts = _HOST_TEXT
    for row in rows:
        mm = segments[row[_F_SEGMENT]].mm
        (size, magic, crc, queue_id, flag, queue_offset, off, sys_flag, born_ts, born_pos, born_w, store_ts,
         store_pos, store_w, reconsume, prepared, bs, bl, _ts, _tl, ps, pl) = row[:22]  # fmt: skip
        raw = mm[born_pos : born_pos + born_w]
        born = hosts.get(raw) or _host_text(raw)
        raw = mm[store_pos : store_pos + store_w]
        store = hosts.get(raw) or _host_text(raw)
        # positional, in the order of the fields of MessageRecord (checked at import below)
        out.append(Message(topic, mm[bs : bs + bl], queue_id, flag, queue_offset, off, sys_flag, born_ts, born,
                           store_ts, store, reconsume, prepared, mm[ps : ps + pl].decode("utf-8", "replace"), crc,
                           magic, size, None))  # fmt: skip
    return out


class KeyOffsets:
    """Candidate offsets of many keys as columns (CSR): those of key ``i`` are
    ``offsets[splits[i]:splits[i + 1]]``, newest first."""

    __slots__ = ("offsets", "splits")

    def __init__(self, offsets: np.ndarray, splits: np.ndarray) -> None:
        self.offsets = offsets
        self.splits = splits

    def __len__(self) -> int:
        return len(self.splits) - 1

    @property
    def counts(self) -> np.ndarray:
        return np.diff(self.splits)

    @property
    def key_index(self) -> np.ndarray:
        """The key (index into the queried keys) of each offset."""
        return np.repeat(np.arange(len(self), dtype=np.int64), self.counts)

    def __getitem__(self, i: int) -> list[int]:
        return self.offsets[self.splits[i] : self.splits[i + 1]].tolist()

    def to_lists(self) -> list[list[int]]:
        flat, sp = self.offsets.tolist(), self.splits.tolist()
        return [flat[a:b] for a, b in zip(sp[:-1], sp[1:], strict=True)]  # noqa: RUF007


class MessageStore:
    """An embedded RocketMQ-layout store.  Use :meth:`open`; it is a context manager."""

    def __init__(self, engine: RocketMQStore) -> None:
        self._engine = engine
        self._uniq = _UniqKeyGenerator()
        self._store_host = Host.parse(engine.config.store_host)
        self._store_host_b = self._store_host.to_bytes()
        self._msgid_prefix = self._store_host_b.hex().upper()
        # The fast put paths cover records of magic v1 with IPv4 hosts and no property CRC.
        self._fast_ok = not engine.config.enabled_append_prop_crc and not self._store_host.is_v6
        self._topic_fields: dict[str, bytes] = {}
        self._clock_cfg = engine.config
        # put() of ASCII string keys and tags into an async-flush store: one call (native when
        # built); a sync-flush store writes through the engine's append_one, which flushes
        self._put_plain = None if engine._sync_flush else _put_plain
        # query_by_key's common case in one native call, bound by its first native query
        self._key_query: Callable[..., Any] = _no_key_query

    # ------------------------------------------------------------------ lifecycle
    @classmethod
    def open(cls, path: str | os.PathLike[str], config: StoreConfig | Mapping[str, Any] | None = None, *,
             read_only: bool = False, create: bool = True) -> MessageStore:
        """Open (and recover) the store at ``path``; ``read_only`` opens without the writer lock
        and never changes a file.

        Geometry (:func:`mqstore.storage.rocketmq.layout.resolve_config`): a :class:`StoreConfig`
        is taken as given (a file of another size is a :class:`GeometryMismatchError`); without
        one, or for the settings a mapping leaves out, the CommitLog segment size, the
        ConsumeQueue file size and the IndexFile geometry are detected from the files."""
        return cls(RocketMQStore(path, resolve_config(path, config), read_only=read_only, create=create))

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

    def _topic_field(self, topic: object) -> bytes:
        """Validate ``topic``; the v1 topic field (length byte + bytes) when the fast paths can
        write it, else ``b""``.  Cached per topic."""
        tf = self._topic_fields.get(topic) if type(topic) is str else None  # type: ignore[arg-type]
        if tf is not None:
            return tf
        validate_topic(topic)
        assert isinstance(topic, str)
        tb = topic.encode("utf-8")
        magic = choose_magic(topic, self._engine.config.auto_message_version_on_topic_len)
        tf = bytes((len(tb),)) + tb if magic == MAGIC_V1 and len(tb) <= 127 else b""
        if len(self._topic_fields) < 10_000:
            self._topic_fields[topic] = tf
        return tf

    def _fast_props(self, keys: str | Sequence[str] | None, tags: str | None, uniq_key: str | None,
                    now: int) -> tuple[str, str]:
        """Properties text and unique key of a message without other properties: the same text
        :meth:`_make_record` builds, from a template."""
        mask = 4
        ks = None
        if keys is not None:
            ks = keys if type(keys) is str else join_keys(keys)
            if isinstance(keys, (list, tuple)):
                for k in keys:
                    _check_text("key", k)
                    if " " in k or not k:
                        raise InvalidKeyError(f"key {k!r} must be non-empty and contain no space (keys are space-separated)")
            _check_text("keys", ks)  # type: ignore[arg-type]
            mask = 5
        if tags is not None:
            _check_text("tags", tags)
            mask |= 2
        uniq = self._uniq.next(now) if uniq_key is None else _check_text("uniq_key", uniq_key)
        return _TEMPLATES[mask].format(ks, tags, uniq), uniq

    def put(self, topic: str, body: bytes, queue_id: int = 0, *, keys: str | Sequence[str] | None = None,
            tags: str | None = None, properties: Mapping[str, str] | None = None, flag: int = 0,
            born_host: str | None = None, born_timestamp: int | None = None, uniq_key: str | None = None,
            sys_flag: int = 0) -> PutResult:
        """Append one message.  ``keys``: a space-separated string or a list of keys.  A unique
        key (``UNIQ_KEY``) is generated like the Java client does unless given."""
        tf = self._topic_fields.get(topic) if type(topic) is str else None  # type: ignore[arg-type]
        if (tf and type(keys) is str and type(tags) is str and type(body) is bytes and uniq_key is None
                and born_timestamp is None and born_host is None and not properties and not sys_flag and not flag
                and type(queue_id) is int and 0 <= queue_id < _INT32 and self._fast_ok):
            # The common shape (string keys and tags, generated unique key): nothing else to check.
            plain = self._put_plain
            if plain is not None:  # ASCII texts: clock, unique key, record and result in one call
                got = plain(self._engine, self._uniq, self._msgid_prefix, topic, tf, body, keys, tags, queue_id)
                if got is not None:
                    if type(got) is not str:
                        return got  # type: ignore[no-any-return]
                    # too large for the path (nothing written, ``got`` is its unique key): the checked write
                    # reports it
                    props = f"KEYS\x01{keys}\x02UNIQ_KEY\x01{got}\x02TAGS\x01{tags}\x02".encode()
                    o, size, qo, ts = self._engine.append_one(topic, tf, body, props, queue_id, 0,
                                                              self._engine.config.now())
                    return _make_put_result(o, qo, ts, size, self._msgid_prefix, got)  # pragma: no cover
            if "\x01" not in keys and "\x02" not in keys and "\x01" not in tags and "\x02" not in tags:
                clock = self._clock_cfg.clock
                now = _time_ns() // 1_000_000 if clock is None else int(clock())
                u = self._uniq
                h = u.head
                uniq = (h[1] if h[0] == now else u.head_for(now)[1]) + _HEX4[next(u.count) & 0xFFFF]
                try:  # the properties in the Java HashMap order of KEYS, TAGS, UNIQ_KEY (see _TEMPLATES)
                    props = f"KEYS\x01{keys}\x02UNIQ_KEY\x01{uniq}\x02TAGS\x01{tags}\x02".encode()
                except UnicodeEncodeError:
                    props = None  # lone surrogates: the checked path reports them
                if props is not None:
                    o, size, qo, ts = self._engine.append_one(topic, tf, body, props, queue_id, 0, now)
                    return _make_put_result(o, qo, ts, size, self._msgid_prefix, uniq)
        return self._put_checked(topic, body, queue_id, keys, tags, properties, flag, born_host, born_timestamp,
                                 uniq_key, sys_flag)

    def _put_checked(self, topic: str, body: bytes, queue_id: int, keys: str | Sequence[str] | None,
                     tags: str | None, properties: Mapping[str, str] | None, flag: int, born_host: str | None,
                     born_timestamp: int | None, uniq_key: str | None, sys_flag: int) -> PutResult:
        """:meth:`put` of any other shape: the single-record fast path with the full checks, or the
        general path (user properties, born host, SYSFLAG bits, ...)."""
        tf = self._topic_field(topic)
        if (tf and not properties and born_host is None and sys_flag == 0 and type(body) is bytes
                and type(queue_id) is int and 0 <= queue_id < _INT32 and type(flag) is int
                and -_INT32 <= flag < _INT32 and self._fast_ok):
            eng = self._engine
            eng.check_open()
            now = eng.config.now()
            props, uniq = self._fast_props(keys, tags, uniq_key, now)
            o, size, qo, ts = eng.append_one(topic, tf, body, props.encode("utf-8"), queue_id, flag,
                                             now if born_timestamp is None else int(born_timestamp))
            return _make_put_result(o, qo, ts, size, self._msgid_prefix, uniq)
        return self.put_batch([dict(topic=topic, body=body, queue_id=queue_id, keys=keys, tags=tags,
                                    properties=properties, flag=flag, born_host=born_host,
                                    born_timestamp=born_timestamp, uniq_key=uniq_key, sys_flag=sys_flag)])[0]

    def put_columns(self, topic: str | Sequence[str], bodies: Sequence[bytes],
                    queue_ids: int | Sequence[int] | np.ndarray = 0, *,
                    keys: Sequence[str | Sequence[str] | None] | None = None,
                    tags: str | Sequence[str | None] | None = None,
                    uniq_keys: Sequence[str | None] | None = None,
                    flags: int | Sequence[int] | np.ndarray = 0,
                    born_timestamps: int | Sequence[int] | np.ndarray | None = None) -> PutBatchResult:
        """Append many messages given as columns, the fastest way in: one topic (or one per
        message), the bodies, and optionally per-message queue ids, keys (a string or a list of
        keys each), tags (one for all or one each), unique keys (generated when ``None``), flags
        and born timestamps.  The batch is all or nothing and its records are the same bytes
        :meth:`put` writes one by one.  Returns the results as columns."""
        self._engine.check_open()
        n = len(bodies)
        topics = [topic] * n if isinstance(topic, str) else list(topic)
        if len(topics) != n:
            raise InvalidArgumentError(f"{len(topics)} topics for {n} bodies")

        def column(name: str, value: Any, default: Any) -> list[Any]:
            if value is None:
                return [default] * n
            if isinstance(value, (int, str, np.integer)):
                return [value] * n
            out = value.tolist() if isinstance(value, np.ndarray) else list(value)
            if len(out) != n:
                raise InvalidArgumentError(f"{len(out)} {name} for {n} bodies")
            return out

        msgs = {"topic": topics, "body": list(bodies), "queue_id": column("queue_ids", queue_ids, 0),
                "keys": column("keys", keys, None), "tags": column("tags", tags, None),
                "uniq_key": column("uniq_keys", uniq_keys, None), "flag": column("flags", flags, 0),
                "born_timestamp": column("born_timestamps", born_timestamps, None)}
        if n == 0:
            return PutBatchResult(np.zeros(0, np.int64), np.zeros(0, np.int64), np.zeros(0, np.int64), 0, [],
                                  self._msgid_prefix)
        res = self._put_fast(**msgs)
        if res is None:  # a record shape the fast path does not write: the general path
            rows = [dict(zip(msgs, vals, strict=True)) for vals in zip(*msgs.values(), strict=True)]
            out = self._put_records(rows)
            return PutBatchResult(np.array([r.commit_log_offset for r in out], np.int64),
                                  np.array([r.queue_offset for r in out], np.int64),
                                  np.array([r.size for r in out], np.int64), out[0].store_timestamp,
                                  [r.uniq_key for r in out], self._msgid_prefix)
        return res

    def _props_column(self, keys: list[Any], tags: list[Any], uniqs: list[str], now: int) -> list[str]:
        """Properties texts of a batch: one C-level ``format`` per message when every message has
        the same shape (keys strings or all absent, tags all present or all absent), checked in
        bulk; otherwise message by message."""
        n = len(uniqs)
        nk, nt = keys.count(None), tags.count(None)
        if (nk == n or set(map(type, keys)) == {str}) and (nt == n or set(map(type, tags)) == {str}):
            text = ("\0".join(keys) if nk == 0 else "") + ("\0".join(tags) if nt == 0 else "")
            if "\x01" not in text and "\x02" not in text:
                fmt = _TEMPLATES[4 | (0 if nk else 1) | (0 if nt else 2)].format
                return list(map(fmt, keys, tags, uniqs))
        fast_props = self._fast_props
        return [fast_props(k, t, u, now)[0] for k, t, u in zip(keys, tags, uniqs, strict=True)]

    def _put_fast(self, topic: list[Any], body: list[Any], queue_id: list[Any] | None, keys: list[Any], tags: list[Any],
                  uniq_key: list[Any], flag: list[Any] | None, born_timestamp: list[Any],
                  plain: tuple[np.ndarray, np.ndarray] | None = None) -> PutBatchResult | None:
        """The columnar put: ``None`` (nothing written) when a message needs the general path.
        ``plain``: the queue ids and body lengths of a batch ``put_one.gather_plain`` checked
        (``queue_id`` and ``flag`` are then None: flags 0)."""
        if not self._fast_ok:
            return None
        n = len(body)
        try:
            # one topic (the common batch; the gathered topics are all str): a C-level count, identity first
            one = plain is not None and n and topic.count(topic[0]) == n
            names = {t: self._topic_field(t) for t in ((topic[0],) if one else set(topic))}
        except TypeError:  # an unhashable topic: the general path reports it
            return None
        if not all(names.values()):
            return None
        if plain is not None:
            qids, body_len = plain
            flg = np.zeros(n, np.int64)
        else:  # the bodies, queue ids and flags checked and taken in one pass (native when built)
            if len(queue_id) != n or len(flag) != n:  # type: ignore[arg-type]
                return None
            qids, flg, body_len = np.empty(n, np.int64), np.empty(n, np.int64), np.empty(n, np.int64)
            cols = [c if type(c) is list else list(c) for c in (body, queue_id, flag)]  # type: ignore[arg-type]
            if not _gather_columns(*cols, qids, flg, body_len):
                return None
        eng = self._engine
        now = eng.config.now()
        uniqs: list[str | None] | None = None
        uniq_run = None
        kcol = tcol = None
        if uniq_key.count(None) == n:  # generated unique keys: built with the properties, in the kernel
            kcol, tcol = _text_column(keys), _text_column(tags)
        from mqstore.kernels.rocketmq.put import (  # (native kernels when built: no numba)
            RecordColumns,
            build_common_props,
        )

        if kcol is not None and tcol is not None:
            uniq_run = self._uniq.reserve(now, n)
            props, props_off, props_len = build_common_props(*kcol, *tcol, uniq_run[0].encode("ascii"), uniq_run[1])
        else:
            uniq_checked = [u for u in uniq_key if u is not None]
            for u in uniq_checked:
                _check_text("uniq_key", u)
            missing = n - len(uniq_checked)
            if missing == n:
                uniqs = self._uniq.next_many(now, n)  # type: ignore[assignment]
            else:
                generated = iter(self._uniq.next_many(now, missing))
                uniqs = [next(generated) if u is None else u for u in uniq_key]
            props_text = self._props_column(keys, tags, uniqs, now)  # type: ignore[arg-type]
            joined = "".join(props_text)
            props_buf = joined.encode("utf-8")
            if len(props_buf) == len(joined):  # ASCII: byte lengths are the text lengths
                props_len = np.fromiter(map(len, props_text), np.int64, n)
            else:
                props_len = np.fromiter((len(p.encode("utf-8")) for p in props_text), np.int64, n)
            props, props_off = np.frombuffer(props_buf, np.uint8), np.cumsum(props_len) - props_len
        if born_timestamp.count(None) == n:
            born = np.full(n, now, np.int64)
        else:
            born = np.array([now if b is None else int(b) for b in born_timestamp], dtype=np.int64)
        if len(names) == 1:
            first = next(iter(names.values()))
            topics_buf, topic_off = first[1:], np.zeros(n, np.int64)
            topic_len = np.full(n, len(first) - 1, np.int64)
        else:
            tfs = list(map(names.__getitem__, topic))
            topics_buf = b"".join(tf[1:] for tf in tfs)
            topic_len = np.fromiter((len(tf) - 1 for tf in tfs), np.int64, n)
            topic_off = np.cumsum(topic_len) - topic_len
        host = np.zeros(20, np.uint8)
        host[:4] = np.frombuffer(self._store_host_b[:4], np.uint8)
        host[16:] = np.frombuffer(self._store_host_b[4:], np.uint8)
        zeros = np.zeros(n, np.int64)
        if encode_common_into is not None:  # the native encoder takes the list: no join, CRC while copying
            bodies, body_off, body_crc = _EMPTY_U8, zeros, zeros
        else:
            bodies = np.frombuffer(b"".join(body), np.uint8)
            body_off = np.cumsum(body_len) - body_len
            body_crc = crc32_spans(bodies, body_off, body_len) & 0x7FFFFFFF  # one compiled pass, GIL released
        cols = RecordColumns(
            bodies=bodies, body_off=body_off, body_len=body_len, body_crc=body_crc,
            body_list=body if encode_common_into is not None else None,
            topics=np.frombuffer(topics_buf, np.uint8), topic_off=topic_off, topic_len=topic_len,
            props=props, props_off=props_off, props_len=props_len, v2=np.zeros(n, np.bool_), queue_id=qids, flag=flg, queue_offset=zeros,
            sys_flag=zeros, born_ts=born, born_v6=np.zeros(n, np.bool_),
            born_hosts=np.broadcast_to(host, (n, 20)) if encode_common_into is not None else np.tile(host, (n, 1)),
            store_host=host, store_v6=False, reconsume=zeros, prepared=zeros,
        )
        offsets, sizes, qo, ts = eng.append_columns(cols, topic)
        return PutBatchResult(offsets, qo, sizes, ts, uniqs, self._msgid_prefix, uniq_run)

    def put_batch(self, messages: Iterable[Mapping[str, Any]]) -> Sequence[PutResult]:
        """Append many messages under one lock (each a mapping of :meth:`put`'s arguments).  All
        or nothing.  Returns a sequence of :class:`PutResult` (a :class:`PutBatchResult`, whose
        results are made on demand, or a list)."""
        self._engine.check_open()
        msgs = messages if isinstance(messages, list) else list(messages)
        if msgs and self._fast_ok and _gather_plain is not None:  # plain dicts: their fields in one C pass
            n = len(msgs)
            qids, blen = np.empty(n, np.int64), np.empty(n, np.int64)
            got = _gather_plain(msgs, qids, blen)
            if got is not None:
                nones = [None] * n
                res = self._put_fast(got[0], got[1], None, got[2], got[3], nones, None, nones, plain=(qids, blen))
                if res is not None:
                    return res
                return self._put_records(msgs)
        if msgs and self._fast_ok and set(map(type, msgs)) == {dict}:
            n = len(msgs)
            names = set().union(*msgs)  # every field used by any message (C-level passes, no loop)
            ok = names <= _FAST_FIELDS
            if ok and names & _ODD_FIELDS:
                get = dict.get
                ok = (not any(map(get, msgs, repeat("properties", n)))
                      and set(map(get, msgs, repeat("born_host", n))) == {None}
                      and not any(map(get, msgs, repeat("sys_flag", n))))
            if ok:
                try:
                    topic = list(map(_TOPIC, msgs))
                    body = list(map(_BODY, msgs))
                except KeyError:
                    ok = False
            if ok:
                res = self._put_fast(topic, body, _field(msgs, names, "queue_id", 0), _field(msgs, names, "keys", None),
                                     _field(msgs, names, "tags", None), _field(msgs, names, "uniq_key", None),
                                     _field(msgs, names, "flag", 0), _field(msgs, names, "born_timestamp", None))
                if res is not None:
                    return res
        return self._put_records(msgs)

    def _put_records(self, messages: Iterable[Mapping[str, Any]]) -> list[PutResult]:
        """The general put path: one :class:`MessageRecord` per message."""
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
        return self._engine.commit_log.read_record(int(commit_log_offset), check_crc=check_crc)

    def get_by_msg_id(self, msg_id: str) -> Message:
        """The message of an offset message id (as returned by :meth:`put`)."""
        _host, offset = decode_message_id(msg_id)
        return self.get_by_offset(offset)

    def _queue_at(self, topic: str, queue_id: int, queue_offset: int) -> Any:
        """The ConsumeQueue a read from ``queue_offset`` uses (``None``: the queue has no units
        yet); :class:`OffsetOutOfRangeError` outside its offsets."""
        self._sync()
        cq = self._engine.consume_queue(topic, queue_id)
        if cq is not None and (queue_offset < 0 or queue_offset > cq.max_offset_in_queue):
            raise OffsetOutOfRangeError(
                f"queue offset {queue_offset} outside [{cq.min_offset_in_queue}, {cq.max_offset_in_queue}] of {topic}/{queue_id}"
            )
        return cq

    def get(self, topic: str, queue_id: int, queue_offset: int, max_count: int = 32) -> list[Message]:
        """Up to ``max_count`` messages of a queue from ``queue_offset`` (ConsumeQueue order)."""
        validate_topic(topic)
        if max_count <= 0:
            raise InvalidArgumentError("max_count must be positive")
        cq = self._queue_at(topic, queue_id, queue_offset)
        if cq is None:
            return []
        units = cq.get_units(queue_offset, max_count)
        out = []
        for i, (off, size) in enumerate(zip(units["offset"].tolist(), units["size"].tolist(), strict=True)):
            if size == 2**31 - 1 and off == 0:
                continue  # blank pre-fill unit
            if off < self._engine.commit_log.min_offset:
                continue  # its CommitLog segment was deleted
            m = self.get_by_offset(off)
            if ((m.topic, m.queue_id, m.queue_offset) != (topic, queue_id, queue_offset + i)
                    and (topic, queue_id, queue_offset + i) not in record_queue_positions(
                        m.topic, m.queue_id, m.properties, enable_lmq=self._engine.config.enable_lmq)):
                raise CorruptDataError(
                    f"ConsumeQueue {topic}/{queue_id} unit {queue_offset + i} points at a record of "
                    f"{m.topic}/{m.queue_id} queue offset {m.queue_offset}", path=self.path, offset=off)
            out.append(m)
        return out

    def get_by_tag(self, topic: str, queue_id: int, tags: str, queue_offset: int = 0,
                   max_count: int = 32) -> list[Message]:
        """Up to ``max_count`` messages of a queue from ``queue_offset`` whose tag matches the
        subscription expression ``tags`` (``"TagA || TagB"``, ``"*"`` or empty: all; the rule of
        :func:`~mqstore.formats.rocketmq.javahash.parse_sub_expression`), as a consumer sees
        them: the ConsumeQueue tags codes (through the ConsumeQueueExt when the units hold ext
        addresses) select the candidates, then the tag itself is compared (hash collisions)."""
        from mqstore.formats.rocketmq.javahash import parse_sub_expression, tags_hash

        validate_topic(topic)
        if max_count <= 0:
            raise InvalidArgumentError("max_count must be positive")
        selected = parse_sub_expression(tags)  # the broker's rule: None selects every message
        every = selected is None
        wanted = selected or frozenset()
        codes = np.array(sorted({tags_hash(t) for t in wanted}), dtype=np.int64)
        cq = self._queue_at(topic, queue_id, queue_offset)
        if cq is None:
            return []
        out: list[Message] = []
        q = max(queue_offset, cq.min_offset_in_queue)
        min_phy = self._engine.commit_log.min_offset
        while q < cq.max_offset_in_queue and len(out) < max_count:
            units = cq.get_units(q, 4096)
            if len(units) == 0:
                break
            real = (units["offset"] >= min_phy) & ~((units["offset"] == 0) & (units["size"] == 2**31 - 1))
            if not every:
                real &= np.isin(cq.resolve_tags_codes(units["tags_code"]), codes)
            for off in units["offset"][real].tolist():
                m = self.get_by_offset(off)
                if every or m.tags in wanted:
                    out.append(m)
                    if len(out) == max_count:
                        break
            q += len(units)
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

    def offset_for_time(self, topic: str, queue_id: int, timestamp: int, boundary: str = BOUNDARY_LOWER,
                        semantics: str = "exact") -> int:
        """The queue offset for a store time.  LOWER: the first unit whose store time is
        ``>= timestamp`` (the max offset when none); UPPER: the last unit whose store time is
        ``<= timestamp`` (the min offset when none).

        ``semantics="exact"`` (default): exact for both boundaries, also within one millisecond and
        across ConsumeQueue files; with the sparse time index (``consumequeue_timeindex/``) it reads
        at most ``ceil(log2(time_index_interval))`` CommitLog records (one by default), without
        it a binary search over the queue.  ``semantics="broker"``: the broker's
        ``getOffsetInQueueByTime`` (spec §2.6), its quirks included."""
        from mqstore.storage.rocketmq.timeindex import SEMANTICS_BROKER, SEMANTICS_EXACT, cq_offset_for_time

        validate_topic(topic)
        if boundary not in (BOUNDARY_LOWER, BOUNDARY_UPPER):
            raise InvalidArgumentError(f"boundary must be 'lower' or 'upper', not {boundary!r}")
        if semantics not in (SEMANTICS_EXACT, SEMANTICS_BROKER):
            raise InvalidArgumentError(f"semantics must be 'exact' or 'broker', not {semantics!r}")
        if type(timestamp) is not int and not isinstance(timestamp, np.integer):
            raise InvalidArgumentError(f"timestamp must be an integer (ms since the epoch), not {timestamp!r}")
        if not isinstance(queue_id, (int, np.integer)) or isinstance(queue_id, bool) or queue_id < 0:
            raise InvalidArgumentError(f"queue id must be a non-negative integer, not {queue_id!r}")
        self._sync()
        cq = self._engine.consume_queue(topic, queue_id)
        if cq is None:
            return 0
        cl = self._engine.commit_log
        if semantics == SEMANTICS_BROKER:
            return cq.offset_in_queue_by_time(int(timestamp), boundary, cl.pickup_store_timestamp, cl.min_offset)
        tix = self._engine.writers.time_index_for_lookup(topic, queue_id)
        return cq_offset_for_time(cq, tix, int(timestamp), boundary, cl.pickup_store_timestamp)

    # ------------------------------------------------------------------ queries by key
    def query_offsets_broker(self, topic: str, key: str, max_num: int = 64, begin: int = 0,
                             end: int = LONG_MAX) -> list[int]:
        """Exactly ``IndexService.queryOffset``: candidate offsets newest first, second-granularity
        time filter, capped at ``max_msgs_num_batch`` (64), hash collisions included."""
        if type(topic) is not str or topic not in _QUERY_TOPICS_OK:
            _check_query_topic(topic)
        if type(key) is not str:
            raise InvalidKeyError("key must be a string")
        engine = self._engine
        engine.check_open()
        engine.dispatch_pending()
        cap = engine.config.max_msgs_num_batch
        if cap is not None and cap < max_num:
            max_num = cap
        return engine.index.select_offsets(topic, key, int(max_num), int(begin), int(end))

    def query_by_key(self, topic: str, key: str, begin: int | None = None, end: int | None = None,
                     max_num: int | None = None) -> list[Message]:
        """Messages of ``topic`` whose KEYS contain ``key`` or whose unique key is ``key``, with a
        store time in [begin, end] (ms, inclusive), newest first; no cap unless ``max_num``."""
        # the common case in one native call, its argument checks included (key_match.KeyQuery);
        # any other answer than a list: the whole method below checks, raises and answers
        msgs = self._key_query(topic, key, begin, end, max_num)
        if type(msgs) is list:
            return msgs
        return self._query_by_key_any(topic, key, begin, end, max_num)

    def _query_by_key_any(self, topic: str, key: str, begin: int | None, end: int | None,
                          max_num: int | None) -> list[Message]:
        """:meth:`query_by_key` for every shape of arguments and store (the twin of ``KeyQuery``,
        which answers its common case)."""
        if type(topic) is not str or topic not in _QUERY_TOPICS_OK:
            _check_query_topic(topic)
        if type(key) is not str or not key:
            if not isinstance(key, str) or not key:
                raise InvalidKeyError("key must be a non-empty string")
        b = 0 if begin is None else _ms_arg("begin", begin)
        e = LONG_MAX if end is None else _ms_arg("end", end)
        if max_num is not None:
            try:
                max_num = min(operator.index(max_num), LONG_MAX)  # (no cap can exceed the store)
            except TypeError:
                raise InvalidArgumentError(f"max_num must be an integer, got {max_num!r}") from None
            if max_num <= 0:
                raise InvalidArgumentError("max_num must be positive")
        engine = self._engine
        if engine._closed:
            engine.check_open()
        if not engine.read_only:  # (a reader has nothing to dispatch: dispatch_pending would return 0)
            engine.dispatch_pending()
        q = _NAT_QUERY[0] if _NAT_QUERY else _native_query()
        if q is not None:
            if max_num is None or type(max_num) is int:  # the whole query in one native call
                mn = -1 if max_num is None else max_num
                idx, cl = engine.index, engine.commit_log
                # IndexService.exact_query's first call, made here (a microsecond query pays for
                # every Python call): with current plans it is the answer; any other answer (a
                # plan to make, a fallback, a cycle) goes to exact_query, which asks again and
                # decides (a DLedger CommitLog has no segment table: exact_query says so)
                if cl.has_segment_table:
                    if self._key_query is _no_key_query:  # the next calls' common case in one call
                        self._key_query = _key_query_of(engine)
                    msgs = q(idx._plan, idx.files, cl._seg_plan, cl.queue.files, topic, key, b, e, mn)
                    if type(msgs) is list:
                        return msgs
                msgs = idx.exact_query(topic, key, b, e, cl, mn, q)
            else:  # one native call for the query, one for the messages of the matches
                msgs = engine.index.exact_matches(topic, key, b, e, engine.commit_log, _NAT_BUILD[0])
                if msgs is not None:
                    msgs = msgs[:max_num]
            if msgs is not None:
                return msgs  # type: ignore[no-any-return]
            return self._query_by_key_records(topic, key, b, e, max_num)
        got = engine.index.exact_matches(topic, key, b, e, engine.commit_log)
        if got is not None:  # one compiled call: chain walk + record checks; Messages for the matches only
            rows, segments = got
            if max_num is not None:
                rows = rows[:max_num]
            return _messages_of_matches(rows, segments, topic)
        return self._query_by_key_records(topic, key, b, e, max_num)

    _query_by_key = query_by_key  # (what iter_query_by_key calls)

    def iter_query_by_key(self, topic: str, key: str, begin: int | None = None, end: int | None = None,
                          max_num: int | None = None) -> Iterator[Message]:
        yield from self._query_by_key(topic, key, begin, end, max_num)

    def _query_by_key_records(self, topic: str, key: str, b: int, e: int, max_num: int | None) -> list[Message]:
        """:meth:`query_by_key` through the candidate offsets (the path when the compiled one does
        not apply or a candidate is not a clean record)."""
        min_off = self._engine.commit_log.min_offset
        offs = [off for off in dict.fromkeys(self._engine.index.candidates(topic, key, b, e)) if off >= min_off]
        found = _exact_matches(self._engine.commit_log, offs, topic, key, b, e)
        if found is None:  # a candidate is not a clean record: read record by record (and raise as it does)
            found = self._exact_matches_records(offs, topic, key, b, e)
        if len(found) > 1:
            found.sort(key=lambda m: (m.store_timestamp, m.commit_log_offset), reverse=True)
        return found[:max_num] if max_num is not None else found

    def _exact_matches_records(self, offs: list[int], topic: str, key: str, b: int, e: int) -> list[Message]:
        """The exact key check record by record (``read_record`` with the body CRC for every
        candidate): the twin of :func:`_exact_matches` and its fallback."""
        found: list[Message] = []
        for off in offs:
            try:
                rec = self._engine.commit_log.read_record(off, check_crc=True)
            except OffsetOutOfRangeError:
                continue
            if rec.topic != topic or not b <= rec.store_timestamp <= e:
                continue
            if key in rec.keys or rec.uniq_key == key:
                found.append(rec)
        return found

    def query_offsets_many(self, topic: str, keys: Sequence[str], max_num: int = 64, begin: int = 0,
                           end: int = LONG_MAX) -> list[list[int]]:
        """:meth:`query_offsets_broker` for many keys at once (vectorised chain walk): one list of
        candidate offsets per key, newest first, hash collisions included, broker cap applied."""
        return self.query_offsets_columns(topic, keys, max_num, begin, end).to_lists()

    def query_offsets_columns(self, topic: str, keys: Sequence[str], max_num: int = 64, begin: int = 0,
                              end: int = LONG_MAX) -> KeyOffsets:
        """:meth:`query_offsets_many` as columns, with no Python object per key or offset: the
        candidates of ``keys[i]`` are ``offsets[splits[i]:splits[i + 1]]`` (``key_index`` gives the
        key of each offset).  Keys are hashed in one pass and walked in slot order (two threads
        for large batches)."""
        _check_query_topic(topic)
        keys = keys if isinstance(keys, list) else list(keys)
        self._sync()
        cap = self._engine.config.max_msgs_num_batch
        limit = min(max_num, cap) if cap is not None else max_num
        if limit <= 0:
            if any(type(k) is not str for k in keys):
                raise InvalidKeyError("keys must be strings")
            return KeyOffsets(np.empty(0, np.int64), np.zeros(len(keys) + 1, np.int64))
        try:
            offs, splits = self._engine.index.candidates_columnar(topic, keys, int(begin), int(end), max_num=limit,
                                                                   widen=False)  # fmt: skip
        except TypeError:
            if any(type(k) is not str for k in keys):
                raise InvalidKeyError("keys must be strings") from None
            raise
        return KeyOffsets(offs, splits)

    def query_by_keys(self, topic: str, keys: Sequence[str], begin: int | None = None, end: int | None = None,
                      max_num: int | None = None) -> dict[str, list[Message]]:
        """:meth:`query_by_key` for many keys of ``topic`` at once: ``{key: messages}`` (newest
        first, exact key and time checks, no cap unless ``max_num`` per key).  The index chains of
        all keys are walked in one vectorised pass per IndexFile; candidates are checked as by
        :meth:`query_by_key` (compiled field location, body CRC verified for returned messages)."""
        validate_topic(topic)
        keys = list(dict.fromkeys(keys))
        if any(not isinstance(k, str) or not k for k in keys):
            raise InvalidKeyError("every key must be a non-empty string")
        b = 0 if begin is None else int(begin)
        e = LONG_MAX if end is None else int(end)
        if max_num is not None and max_num <= 0:
            raise InvalidArgumentError("max_num must be positive")
        self._sync()
        offs, splits = self._engine.index.candidates_columnar(topic, keys, b, e)
        cl = self._engine.commit_log
        min_off = cl.min_offset
        flat, sp = offs.tolist(), splits.tolist()
        out: dict[str, list[Message]] = {}
        for i, key in enumerate(keys):
            cand = [off for off in dict.fromkeys(flat[sp[i] : sp[i + 1]]) if off >= min_off]
            found = _exact_matches(cl, cand, topic, key, b, e) if cand else []
            if found is None:  # a candidate is not a clean record: read record by record (its errors)
                found = self._exact_matches_records(cand, topic, key, b, e)
            if len(found) > 1:
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
