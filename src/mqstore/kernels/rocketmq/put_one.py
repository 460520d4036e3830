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
