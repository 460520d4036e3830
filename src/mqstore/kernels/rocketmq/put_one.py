"""The single-record encoder of ``MessageStore.put`` (numba-free: the store imports it at start).

``put`` of the common message shape — string keys and tags, a generated unique key, no other
property — writes magic v1 records with IPv4 hosts (the same 8 bytes born and stored), SYSFLAG 0
and the properties ``KEYS\\x01k\\x02UNIQ_KEY\\x01u\\x02TAGS\\x01t\\x02`` (the Java HashMap order of the
three names).  :func:`encode_one_v1` writes such a record into a buffer (the mapped CommitLog
segment) in one call, TOTALSIZE last: a process killed in the middle leaves 0 there, which
recovery never takes for a record.

Implementations (registered as ``rocketmq.encode_one_v1``): the native kernel
(``kernels/csrc/_nat_put.c``) when built, else :func:`encode_one_v1_struct` (one ``struct``
``pack_into``); the reference :func:`encode_one_v1_py` goes through the record codec.
"""

from __future__ import annotations

import struct
from itertools import repeat
from typing import Any

from mqstore.formats.rocketmq.record import MAGIC_V1, Host, MessageRecord, encode_record
from mqstore.kernels.backend import native
from mqstore.kernels.crc import crc32
from mqstore.kernels.registry import register

ONE_V1_FIXED = 88 + 2 + 5 + 1 + 9 + 1 + 5 + 1  # a record of the shape without body, topic field and texts
_HEAD_V1_V4 = struct.Struct(">iiiiiqqiq8sq8siqi")  # up to and including BODYLENGTH
_PACK_SIZE = struct.Struct(">i").pack_into
_ONE_V1: dict[tuple[int, int, int], struct.Struct] = {}  # (body, topic field, properties) lengths -> struct
_ONE_V1_MAX = 4096


def one_v1_size(body: bytes, topic_field: bytes, keys: str, uniq: str, tags: str) -> int:
    """The size of the record :func:`encode_one_v1` writes (ASCII texts)."""
    return ONE_V1_FIXED + len(body) + len(topic_field) + len(keys) + len(uniq) + len(tags)


def _check_one_v1(out: object, pos: int, body: bytes, topic_field: bytes, keys: str, uniq: str, tags: str,
                  queue_id: int, flag: int, host: bytes) -> int:
    for what, t in (("keys", keys), ("uniq", uniq), ("tags", tags)):
        if type(t) is not str or not t.isascii():
            raise ValueError(f"encode_one_v1: {what} must be an ASCII str")
    if (len(host) != 8 or not 2 <= len(topic_field) <= 128 or topic_field[0] != len(topic_field) - 1
            or not -(2**31) <= queue_id < 2**31 or not -(2**31) <= flag < 2**31):
        raise ValueError("encode_one_v1: bad topic field, host, queue id or flag")
    if len(keys) + len(uniq) + len(tags) + 27 > 32767:
        raise ValueError("encode_one_v1: record too large")
    size = one_v1_size(body, topic_field, keys, uniq, tags)
    if pos < 0 or pos + size > len(memoryview(out)):  # type: ignore[arg-type]
        raise ValueError("encode_one_v1: the record does not fit in the output buffer")
    return size


def encode_one_v1_struct(out: object, pos: int, body: bytes, topic_field: bytes, keys: str, uniq: str, tags: str,
                         queue_id: int, flag: int, queue_offset: int, phys: int, born_ts: int, store_ts: int,
                         host: bytes) -> int:
    """:func:`encode_one_v1` by ``struct`` (the path without the native module): one ``pack_into``
    of a struct cached per shape, TOTALSIZE last.  Returns the record size."""
    size = _check_one_v1(out, pos, body, topic_field, keys, uniq, tags, queue_id, flag, host)
    props = f"KEYS\x01{keys}\x02UNIQ_KEY\x01{uniq}\x02TAGS\x01{tags}\x02".encode("ascii")
    lb, lt, lp = len(body), len(topic_field), len(props)
    rec = _ONE_V1.get((lb, lt, lp))
    if rec is None:
        rec = struct.Struct(f"{_HEAD_V1_V4.format}{lb}s{lt}sH{lp}s")
        if len(_ONE_V1) < _ONE_V1_MAX:
            _ONE_V1[(lb, lt, lp)] = rec
    rec.pack_into(out, pos, 0, MAGIC_V1, crc32(body) & 0x7FFFFFFF, queue_id, flag, queue_offset, phys, 0,
                  born_ts, host, store_ts, host, 0, 0, lb, body, topic_field, lp, props)
    _PACK_SIZE(out, pos, size)
    return size


def encode_one_v1_py(out: object, pos: int, body: bytes, topic_field: bytes, keys: str, uniq: str, tags: str,
                     queue_id: int, flag: int, queue_offset: int, phys: int, born_ts: int, store_ts: int,
                     host: bytes) -> int:
    """Twin of :func:`encode_one_v1`: the record built as a :class:`MessageRecord` and encoded by
    the record codec, then copied into ``out``."""
    _check_one_v1(out, pos, body, topic_field, keys, uniq, tags, queue_id, flag, host)
    h = Host.from_bytes(host)
    rec = MessageRecord(
        topic=topic_field[1:].decode("utf-8"), body=body, queue_id=queue_id, flag=flag, queue_offset=queue_offset,
        commit_log_offset=phys, born_timestamp=born_ts, born_host=h, store_timestamp=store_ts, store_host=h,
        properties_text=f"KEYS\x01{keys}\x02UNIQ_KEY\x01{uniq}\x02TAGS\x01{tags}\x02", magic=MAGIC_V1,
    )
    data = encode_record(rec, max_message_size=2**31 - 1)
    memoryview(out)[pos : pos + len(data)] = data  # type: ignore[arg-type]
    return len(data)


_NAT_PUT = native("_nat_put")
encode_one_v1_native = _NAT_PUT.encode_one_v1 if _NAT_PUT is not None else None
#: ``encode_one_v1(out, pos, body, topic_field, keys, uniq, tags, queue_id, flag, queue_offset, phys,
#: born_ts, store_ts, host) -> size``: the native kernel when built, else the ``struct`` path
encode_one_v1 = encode_one_v1_native if encode_one_v1_native is not None else encode_one_v1_struct


register("rocketmq.encode_one_v1", encode_one_v1_struct, encode_one_v1_py, native=encode_one_v1_native)

#: ``put_result(offset, queue_offset, store_timestamp, size, msgid_prefix, uniq_key)``: the result
#: object of a single put made in C (the class bound by :func:`bind_put_result`; its ``msg_id`` is
#: ``f"{msgid_prefix}{offset:016X}"``), None without the native module
put_result_native = _NAT_PUT.put_result if _NAT_PUT is not None else None


_RESULT: list[Any] = []  # the result class of put_plain_py (bind_put_result)


def bind_put_result(cls: type, slots: tuple[object, ...]) -> bool:
    """Tell the native :data:`put_result_native` (and :func:`put_plain_py`) the result class
    (``slots``: the member descriptors of its 6 fields in constructor order); False without the
    native module."""
    _RESULT[:] = [cls]
    if _NAT_PUT is None:
        return False
    _NAT_PUT.bind_put_result(cls, slots)
    return True


# ---------------------------------------------------------------- the single put's locked section
def _common_section(encode: Any, st: Any, topic: str, topic_field: bytes, body: bytes, keys: str, uniq: str,
                    tags: str, queue_id: int, born_ts: int, size: int) -> tuple[int, int, int] | None:
    """The locked section of :func:`append_common_py` with the record written by ``encode`` (an
    :func:`encode_one_v1` implementation): ``None`` (nothing written or changed) when there is no
    segment or the record does not leave ``BLANK_RECORD_SIZE`` bytes in the last one."""
    import time

    from mqstore.formats.rocketmq.record import BLANK_RECORD_SIZE

    files = st._cl_queue.files
    if not files:
        return None
    mf = files[-1]
    pos = mf.wrote_position
    if size <= 0 or pos < 0 or pos + size + BLANK_RECORD_SIZE > mf.file_size:
        return None  # the end-of-segment rule: the caller rolls the segment and calls again
    clock = st.config.clock
    now = time.time_ns() // 1_000_000 if clock is None else int(clock())
    key = (topic, queue_id)
    qo = st.queue_offsets.get(key, 0)
    phys = mf.file_from_offset + pos
    if one_v1_size(body, topic_field, keys, uniq, tags) != size:
        raise ValueError("append_common: size is not the record's size")
    mm = mf._mm
    encode(mm if mm is not None else mf.mm, pos, body, topic_field, keys, uniq, tags, queue_id, 0, qo, phys, born_ts,
           now, st._store_host_b)
    mf.wrote_position = pos + size
    st.queue_offsets[key] = qo + 1
    if now != st._last_put_ts:
        st._ts_runs.append((phys, now))
        st._last_put_ts = now
    return phys, qo, now


def _append_common(encode: Any, store: object, topic: str, topic_field: bytes, body: bytes, keys: str, uniq: str,
                   tags: str, queue_id: int, born_ts: int, size: int) -> tuple[int, int, int] | None:
    st: Any = store
    if st._closed or st.read_only or st.background_error is not None:
        st._check_writable()
    if size > st._max_fast_size or len(body) > st._max_body or size - len(body) - len(topic_field) > 90 + 32767:
        return None  # 90 bytes of head + properties of at most 32767 bytes: the checked path reports it
    args = (st, topic, topic_field, body, keys, uniq, tags, queue_id, born_ts, size)
    with st._put_lock:
        got = _common_section(encode, *args)
        if got is None:  # the end-of-segment rule: a blank filler and a new segment, then the record
            st._roll_for(size)
            got = _common_section(encode, *args)
            if got is None:
                raise RuntimeError("append_common: the record does not fit in a new segment")
    if got[0] + size - st.reput_from_offset >= st._reput_wake_bytes and not st._wake.is_set():
        st._wake.set()  # once per dispatch round: Event.set takes a lock and notifies
    return got


def append_common_py(store: object, topic: str, topic_field: bytes, body: bytes, keys: str, uniq: str, tags: str,
                     queue_id: int, born_ts: int, size: int) -> tuple[int, int, int] | None:
    """A single ``put`` of the common shape (ASCII string keys and tags, a generated unique key,
    flag 0, born host = store host) into the engine ``store`` (a ``RocketMQStore``), the reference
    of the native ``append_common``; ``size`` is :func:`one_v1_size`.

    A closed, read-only or failed store (``_closed``, ``read_only``, ``background_error``) gets
    ``store._check_writable()``, which raises.  A record above ``_max_fast_size``, a body above
    ``_max_body`` or properties above 32767 bytes give ``None`` (nothing written: the caller
    takes the checked path, which reports it).  Under ``_put_lock``: when the record leaves
    ``BLANK_RECORD_SIZE`` bytes in the last CommitLog segment (``_cl_queue.files[-1]``) it is
    written at the write position (:func:`encode_one_v1`: TOTALSIZE last) with the store time
    (``config.clock()`` or the wall clock, ms) and the queue's next offset (``queue_offsets``);
    the write position and the queue offset advance and a ``(offset, store time)`` run goes to
    ``_ts_runs`` when the store time changed (``_last_put_ts``).  A record that does not fit is
    written after ``store._roll_for(size)`` (the end-of-segment rule: blank filler, new segment).
    Then the reput service is woken (``_wake.set()``) when ``_reput_wake_bytes`` or more are
    written past ``reput_from_offset``.  Returns ``(commit log offset, queue offset, store
    time)``.  A sync-flush store's caller flushes afterwards (the durability rule stays in the
    store)."""
    return _append_common(encode_one_v1_py, store, topic, topic_field, body, keys, uniq, tags, queue_id, born_ts, size)


def append_common_struct(store: object, topic: str, topic_field: bytes, body: bytes, keys: str, uniq: str, tags: str,
                         queue_id: int, born_ts: int, size: int) -> tuple[int, int, int] | None:
    """:func:`append_common_py` writing through :func:`encode_one_v1_struct` (the store's path
    without the native module)."""
    return _append_common(encode_one_v1_struct, store, topic, topic_field, body, keys, uniq, tags, queue_id, born_ts,
                          size)


append_common_native = _NAT_PUT.append_common if _NAT_PUT is not None else None
#: ``append_common(store, topic, topic_field, body, keys, uniq, tags, queue_id, born_ts, size)``: a
#: single put of the common shape (:func:`append_common_py`), one C call when the native module is built
append_common = append_common_native if append_common_native is not None else append_common_struct

register("rocketmq.append_common", append_common_struct, append_common_py, native=append_common_native)


# ---------------------------------------------------------------- batches of the common shape
#: the record size of the common batch shape without body, topic and properties
COMMON_FIXED = 91


def _check_common(out: object, pos: int, lo: int, hi: int, sizes: object, bodies: list[bytes], topic_len: object,
                  props_len: object) -> int:
    if type(bodies) is not list or not 0 <= lo <= hi <= len(bodies):
        raise ValueError("encode_common_into: bad record range")
    end = pos
    for i in range(lo, hi):
        b = bodies[i]
        if type(b) is not bytes:
            raise TypeError("encode_common_into: every body must be bytes")
        tl, pl = int(topic_len[i]), int(props_len[i])  # type: ignore[index]
        if not 1 <= tl <= 127 or not 0 <= pl <= 32767 or int(sizes[i]) != COMMON_FIXED + len(b) + tl + pl:  # type: ignore[index]
            raise ValueError("encode_common_into: record column out of bounds")
        end += int(sizes[i])  # type: ignore[index]
    if pos < 0 or end > len(memoryview(out)):  # type: ignore[arg-type]
        raise ValueError("encode_common_into: records do not fit in the output buffer")
    return end


def encode_common_into_numba(out: object, pos: int, lo: int, hi: int, sizes: object, phys: object, store_ts: int,
                             bodies: list[bytes], topics: object, topic_off: object, topic_len: object, props: object,
                             props_off: object, props_len: object, queue_id: object, flag: object,
                             queue_offset: object, born_ts: object, host: bytes) -> int:
    """:func:`encode_common_into` by the compiled column encoder (``put.encode_records_into``):
    the bodies joined and their CRCs computed by ``crc32_spans`` first (the path without the
    native module)."""
    import numpy as np

    from mqstore.kernels.crc import crc32_spans
    from mqstore.kernels.rocketmq.put import RecordColumns, encode_records_into

    _check_common(out, pos, lo, hi, sizes, bodies, topic_len, props_len)
    n = len(bodies)
    body_len = np.fromiter(map(len, bodies), np.int64, n)
    body_off = np.cumsum(body_len) - body_len
    joined = np.frombuffer(b"".join(bodies), np.uint8)
    h = np.zeros(20, np.uint8)
    h[:4] = np.frombuffer(host[:4], np.uint8)
    h[16:] = np.frombuffer(host[4:], np.uint8)
    zeros = np.zeros(n, np.int64)
    cols = RecordColumns(
        bodies=joined, body_off=body_off, body_len=body_len,
        body_crc=crc32_spans(joined, body_off, body_len) & 0x7FFFFFFF if n else zeros,
        topics=np.asarray(topics, np.uint8), topic_off=np.asarray(topic_off, np.int64),
        topic_len=np.asarray(topic_len, np.int64), props=np.asarray(props, np.uint8),
        props_off=np.asarray(props_off, np.int64), props_len=np.asarray(props_len, np.int64),
        v2=np.zeros(n, np.bool_), queue_id=np.asarray(queue_id, np.int64), flag=np.asarray(flag, np.int64),
        queue_offset=np.asarray(queue_offset, np.int64), sys_flag=zeros, born_ts=np.asarray(born_ts, np.int64),
        born_hosts=np.tile(h, (n, 1)), born_v6=np.zeros(n, np.bool_), store_host=h, store_v6=False,
        reconsume=zeros, prepared=zeros,
    )  # fmt: skip
    return encode_records_into(out, pos, cols, lo, hi, np.asarray(sizes, np.int64), np.asarray(phys, np.int64),
                               store_ts)  # type: ignore[arg-type]


def encode_common_into_py(out: object, pos: int, lo: int, hi: int, sizes: object, phys: object, store_ts: int,
                          bodies: list[bytes], topics: object, topic_off: object, topic_len: object, props: object,
                          props_off: object, props_len: object, queue_id: object, flag: object,
                          queue_offset: object, born_ts: object, host: bytes) -> int:
    """Twin of :func:`encode_common_into`: one :class:`MessageRecord` per record through the
    record codec."""
    end = _check_common(out, pos, lo, hi, sizes, bodies, topic_len, props_len)
    h = Host.from_bytes(host)
    tb, pb = bytes(memoryview(topics)), bytes(memoryview(props))  # type: ignore[arg-type]
    mv = memoryview(out)  # type: ignore[arg-type]
    p = pos
    for i in range(lo, hi):
        to, tl, po, pl = int(topic_off[i]), int(topic_len[i]), int(props_off[i]), int(props_len[i])  # type: ignore[index]
        rec = MessageRecord(
            topic=tb[to : to + tl].decode("utf-8"), body=bodies[i], queue_id=int(queue_id[i]),  # type: ignore[index]
            flag=int(flag[i]), queue_offset=int(queue_offset[i]), commit_log_offset=int(phys[i]),  # type: ignore[index]
            born_timestamp=int(born_ts[i]), born_host=h, store_timestamp=store_ts, store_host=h,  # type: ignore[index]
            properties_text=pb[po : po + pl].decode("utf-8"), magic=MAGIC_V1,
        )
        data = encode_record(rec, max_message_size=2**31 - 1)
        mv[p : p + len(data)] = data
        p += len(data)
    return end


encode_common_into_native = _NAT_PUT.encode_common_into if _NAT_PUT is not None else None
#: ``encode_common_into(out, pos, lo, hi, sizes, phys, store_ts, bodies, topics, topic_off, topic_len, props,
#: props_off, props_len, queue_id, flag, queue_offset, born_ts, host) -> end``: records ``lo:hi`` of a batch
#: of the common shape (magic v1, IPv4 born = store host ``host``, SYSFLAG 0) from the list of body
#: ``bytes``, back to back into ``out`` from ``pos``; the native kernel copies each body and
#: computes its CRC in the same pass and stores each TOTALSIZE last.  ``None`` without the
#: native module: the store then takes the column encoder (``put.encode_records_into``).
encode_common_into = encode_common_into_native

register("rocketmq.encode_common_into", encode_common_into_numba, encode_common_into_py,
         native=encode_common_into_native)


# ---------------------------------------------------------------- the whole single put of the common shape
def _put_plain(append: Any, store: Any, uniq_gen: Any, msgid_prefix: str, topic: str, topic_field: bytes, body: bytes,
               keys: str, tags: str, queue_id: int) -> Any:
    import time

    if not keys.isascii() or not tags.isascii() or "\x01" in keys or "\x02" in keys or "\x01" in tags or "\x02" in tags:
        return None
    clock = store.config.clock
    now = time.time_ns() // 1_000_000 if clock is None else int(clock())
    h = uniq_gen.head
    prefix = h[1] if h[0] == now else uniq_gen.head_for(now)[1]
    uniq = f"{prefix}{next(uniq_gen.count) & 0xFFFF:04X}"
    size = one_v1_size(body, topic_field, keys, uniq, tags)
    got = append(store, topic, topic_field, body, keys, uniq, tags, queue_id, now, size)
    if got is None:
        return uniq
    o, qo, ts = got
    return _RESULT[0](o, qo, ts, size, f"{msgid_prefix}{o:016X}", uniq)


def put_plain_py(store: object, uniq_gen: object, msgid_prefix: str, topic: str, topic_field: bytes, body: bytes,
                 keys: str, tags: str, queue_id: int) -> Any:
    """``MessageStore.put`` of the common shape once its arguments are checked (string keys and
    tags, no unique key or other property, flag 0), into an async-flush engine ``store``; the
    reference of the native ``put_plain``.  ``None`` (nothing done) when ``keys`` or ``tags`` is
    not ASCII or holds a property separator (``\\x01``/``\\x02``).  Otherwise: the born time
    (``store.config.clock()`` or the wall clock, ms), the unique key (``uniq_gen.head``'s prefix
    for that ms, else ``uniq_gen.head_for(ms)``'s, then 4 upper-case hex digits of
    ``next(uniq_gen.count) & 0xFFFF``) and :func:`append_common_py`.  Returns the result (the
    class given to :func:`bind_put_result`, message id ``msgid_prefix`` + the offset in 16 hex
    digits), or the unique key when the record is too large for the path (nothing written: the
    caller reports it through its checked path)."""
    return _put_plain(append_common_py, store, uniq_gen, msgid_prefix, topic, topic_field, body, keys, tags, queue_id)


def put_plain_struct(store: object, uniq_gen: object, msgid_prefix: str, topic: str, topic_field: bytes, body: bytes,
                     keys: str, tags: str, queue_id: int) -> Any:
    """:func:`put_plain_py` through :func:`append_common_struct` (the path without the native module)."""
    return _put_plain(append_common_struct, store, uniq_gen, msgid_prefix, topic, topic_field, body, keys, tags,
                      queue_id)


put_plain_native = _NAT_PUT.put_plain if _NAT_PUT is not None else None
#: ``put_plain(store, uniq_gen, msgid_prefix, topic, topic_field, body, keys, tags, queue_id)``: the single
#: put of the common shape (:func:`put_plain_py`), one C call when the native module is built
put_plain = put_plain_native if put_plain_native is not None else put_plain_struct

register("rocketmq.put_plain", put_plain_struct, put_plain_py, native=put_plain_native)


# ---------------------------------------------------------------- put_batch: the fields of plain dicts
_PLAIN_FIELDS = ("topic", "body", "queue_id", "keys", "tags")


def gather_plain_py(msgs: list[Any], queue_ids: Any, body_len: Any) -> tuple[list[Any], ...] | None:
    """The fields of a batch of plain dicts in one pass (the reference of the native
    ``gather_plain``): each message an exact ``dict`` whose only keys are among ``topic`` (a
    ``str``), ``body`` (``bytes``), ``queue_id`` (an ``int`` in ``[0, 2**31)``, default 0),
    ``keys`` and ``tags`` (``str`` or None, default None), with ``topic`` and ``body`` present.
    Fills ``queue_ids`` and ``body_len`` (int64, one per message) and returns ``(topics, bodies,
    keys, tags)``; None (the outputs partly filled) when a message has another shape."""
    if type(msgs) is not list or len(queue_ids) != len(msgs) or len(body_len) != len(msgs):
        raise ValueError("gather_plain: queue_ids and body_len need one slot per message")
    cols: tuple[list[Any], ...] = ([], [], [], [])
    for i, m in enumerate(msgs):
        if type(m) is not dict or not set(m) <= set(_PLAIN_FIELDS):
            return None
        topic, body, q = m.get("topic"), m.get("body"), m.get("queue_id", 0)
        keys, tags = m.get("keys"), m.get("tags")
        if type(topic) is not str or type(body) is not bytes or type(q) is not int or not 0 <= q < 2**31:
            return None
        if not (keys is None or type(keys) is str) or not (tags is None or type(tags) is str):
            return None
        queue_ids[i] = q
        body_len[i] = len(body)
        for col, v in zip(cols, (topic, body, keys, tags), strict=True):
            col.append(v)
    return cols


def gather_plain_passes(msgs: list[Any], queue_ids: Any, body_len: Any) -> tuple[list[Any], ...] | None:
    """:func:`gather_plain_py` by C-level passes over the whole batch (one per field and check)."""
    if type(msgs) is not list or len(queue_ids) != len(msgs) or len(body_len) != len(msgs):
        raise ValueError("gather_plain: queue_ids and body_len need one slot per message")
    n = len(msgs)
    if not n:
        return [], [], [], []
    if set(map(type, msgs)) != {dict} or not set().union(*msgs) <= set(_PLAIN_FIELDS):
        return None
    get = dict.get
    topics = list(map(get, msgs, repeat("topic", n)))
    bodies = list(map(get, msgs, repeat("body", n)))
    qids = list(map(get, msgs, repeat("queue_id", n), repeat(0, n)))
    keys = list(map(get, msgs, repeat("keys", n)))
    tags = list(map(get, msgs, repeat("tags", n)))
    if set(map(type, topics)) != {str} or set(map(type, bodies)) != {bytes} or set(map(type, qids)) != {int}:
        return None
    if not set(map(type, keys)) <= {str, type(None)} or not set(map(type, tags)) <= {str, type(None)}:
        return None
    if min(qids) < 0 or max(qids) >= 2**31:
        return None
    queue_ids[:] = qids
    body_len[:] = list(map(len, bodies))
    return topics, bodies, keys, tags


# ---------------------------------------------------------------- put_columns / put_batch: the column checks
_INT32 = 2**31


def gather_columns_py(bodies: list[Any], queue_ids: list[Any], flags: list[Any], qids: Any, flg: Any,
                      body_len: Any) -> bool:
    """The column checks of a columnar put in one pass (the reference of the native
    ``gather_columns``): every body an exact ``bytes``, every queue id an exact ``int`` in
    ``[0, 2**31)``, every flag an exact ``int`` in ``[-2**31, 2**31)``.  Fills ``qids``, ``flg``
    and ``body_len`` (int64, one per message) and returns True; False (the outputs partly filled)
    when a value is not so (the caller then takes the general path)."""
    n = len(bodies)
    if len(queue_ids) != n or len(flags) != n or len(qids) != n or len(flg) != n or len(body_len) != n:
        raise ValueError("gather_columns: every column and output needs one slot per message")
    for i, (b, q, f) in enumerate(zip(bodies, queue_ids, flags, strict=True)):
        if type(b) is not bytes or type(q) is not int or type(f) is not int:
            return False
        if not 0 <= q < _INT32 or not -_INT32 <= f < _INT32:
            return False
        qids[i], flg[i], body_len[i] = q, f, len(b)
    return True


def gather_columns_passes(bodies: list[Any], queue_ids: list[Any], flags: list[Any], qids: Any, flg: Any,
                          body_len: Any) -> bool:
    """:func:`gather_columns_py` by C-level passes over each column (a type set, a conversion,
    the range checks)."""
    n = len(bodies)
    if len(queue_ids) != n or len(flags) != n or len(qids) != n or len(flg) != n or len(body_len) != n:
        raise ValueError("gather_columns: every column and output needs one slot per message")
    if not n:
        return True
    if set(map(type, bodies)) != {bytes} or set(map(type, queue_ids)) != {int} or set(map(type, flags)) != {int}:
        return False
    if min(queue_ids) < 0 or max(queue_ids) >= _INT32 or min(flags) < -_INT32 or max(flags) >= _INT32:
        return False
    qids[:] = queue_ids
    flg[:] = flags
    body_len[:] = list(map(len, bodies))
    return True


gather_columns_native = _NAT_PUT.gather_columns if _NAT_PUT is not None else None
#: ``gather_columns(bodies, queue_ids, flags, qids, flg, body_len)``: :func:`gather_columns_py`, one C pass
#: when built, else the C-level passes
gather_columns = gather_columns_native if gather_columns_native is not None else gather_columns_passes

register("rocketmq.gather_columns", gather_columns_passes, gather_columns_py, native=gather_columns_native)


gather_plain_native = _NAT_PUT.gather_plain if _NAT_PUT is not None else None
#: ``gather_plain(msgs, queue_ids, body_len)``: :func:`gather_plain_py`, one C pass when built (None otherwise:
#: ``put_batch`` then takes its C-level passes over the dicts)
gather_plain = gather_plain_native

register("rocketmq.gather_plain", gather_plain_passes, gather_plain_py, native=gather_plain_native)
