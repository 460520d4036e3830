"""The CommitLog reader: every field of records as named columns, without a Python object per row.

* :func:`decode_fields` – one compiled pass locating and reading the fields of the records at
  given positions into an ``int64`` array with one row per record and the named columns
  :data:`RECORD_FIELDS` (``F_*``: the fixed fields and the ``(start, length)`` spans of hosts,
  body, topic and properties);
* :func:`decode_columns` – those rows as the columns of the ``rocketmq`` source (numpy arrays and
  lists of Python values); twin :func:`decode_columns_py` (record by record through
  :func:`~mqstore.formats.rocketmq.record.check_record`);
* :func:`arrow_columns` – the same columns as Arrow arrays straight from the spans: numba kernels
  locate the kept ``name\\x01value\\x02`` property pairs, the ``KEYS`` pieces and ``TAGS``/
  ``UNIQ_KEY``, format the hosts as text, and one gather per column copies the spans into a single
  data buffer (``pa.Array.from_buffers``).  Twin :func:`arrow_columns_py`
  (:func:`decode_columns_py` + :func:`arrow_of_columns`).

The property rules are those of :func:`~mqstore.formats.rocketmq.properties.parse_properties`
applied to bytes (``\\x01``/``\\x02`` are ASCII, so on valid UTF-8 the byte and character forms
agree): a pair needs a non-empty name and a non-empty value, and a repeated name keeps its first
position with the last value (a Python ``dict``).  The Python path decodes text with
``decode("utf-8", "replace")``; when any emitted string is not valid UTF-8, :func:`arrow_columns`
returns ``None`` and the caller takes :func:`decode_columns` (UTF-8 is self-synchronising at ASCII
bytes, so validating the emitted pieces alone is exact).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, NamedTuple

import numpy as np

from mqstore.errors import CorruptDataError
from mqstore.formats.rocketmq.properties import (
    PROPERTY_KEYS,
    PROPERTY_TAGS,
    PROPERTY_UNIQ_KEY,
    parse_properties,
    split_keys,
)
from mqstore.formats.rocketmq.record import Host, check_record
from mqstore.kernels.backend import numba_module
from mqstore.kernels.buffers import as_u8
from mqstore.kernels.registry import register

if TYPE_CHECKING:  # pragma: no cover
    import pyarrow as pa

#: the columns of a decoded record row (:func:`decode_fields`): its fixed fields and the in-buffer
#: spans of its variable parts, in this order; ``F_*`` are their column numbers
RECORD_FIELDS = (
    "size",
    "magic",
    "bodyCRC",
    "queueId",
    "flag",
    "queueOffset",
    "physicalOffset",
    "sysFlag",
    "bornTimestamp",
    "bornHostPos",
    "bornHostWidth",
    "storeTimestamp",
    "storeHostPos",
    "storeHostWidth",
    "reconsumeTimes",
    "preparedTransactionOffset",
    "bodyStart",
    "bodyLen",
    "topicStart",
    "topicLen",
    "propsStart",
    "propsLen",
)
F_SIZE = 0
F_MAGIC = 1
F_BODY_C_R_C = 2
F_QUEUE_ID = 3
F_FLAG = 4
F_QUEUE_OFFSET = 5
F_PHYSICAL_OFFSET = 6
F_SYS_FLAG = 7
F_BORN_TIMESTAMP = 8
F_BORN_HOST_POS = 9
F_BORN_HOST_WIDTH = 10
F_STORE_TIMESTAMP = 11
F_STORE_HOST_POS = 12
F_STORE_HOST_WIDTH = 13
F_RECONSUME_TIMES = 14
F_PREPARED_TRANSACTION_OFFSET = 15
F_BODY_START = 16
F_BODY_LEN = 17
F_TOPIC_START = 18
F_TOPIC_LEN = 19
F_PROPS_START = 20
F_PROPS_LEN = 21
N_RECORD_FIELDS = len(RECORD_FIELDS)
#: the rows of the exact key query (:mod:`mqstore.kernels.rocketmq.key_match`) add one column: the
#: row of the record's segment in the CommitLog's segment table
F_SEGMENT = N_RECORD_FIELDS
MATCH_COLUMNS = N_RECORD_FIELDS + 1

#: the value spans of the special properties of one record (length -1: absent)
SPECIAL_DTYPE = np.dtype([(name, np.int64) for name in (
    "keysStart", "keysLen", "tagsStart", "tagsLen", "uniqStart", "uniqLen")])  # fmt: skip


_INT32_MAX = 0x7FFFFFFF

# special property names (ASCII)
_KEYS = np.frombuffer(b"KEYS", np.uint8).copy()
_TAGS = np.frombuffer(b"TAGS", np.uint8).copy()
_UNIQ = np.frombuffer(b"UNIQ_KEY", np.uint8).copy()


def _nb() -> Any:
    return numba_module("mqstore.kernels.rocketmq.columns_nb")


class PairSpans(NamedTuple):
    """The kept property pairs: ``pair_off`` (n + 1 row offsets), name and value spans."""

    pair_off: np.ndarray
    name_start: np.ndarray
    name_len: np.ndarray
    value_start: np.ndarray
    value_len: np.ndarray


class KeyPieces(NamedTuple):
    """The non-empty space-separated pieces of ``KEYS``: ``key_off`` (n + 1 row offsets) and spans."""

    key_off: np.ndarray
    start: np.ndarray
    length: np.ndarray






def _host_strings(u8: np.ndarray, pos: np.ndarray, width: np.ndarray) -> list[str]:
    cache: dict[bytes, str] = {}
    out = []
    for p, w in zip(pos.tolist(), width.tolist(), strict=True):
        raw = u8[p : p + w].tobytes()
        s = cache.get(raw)
        if s is None:
            s = cache[raw] = str(Host.from_bytes(raw))
        out.append(s)
    return out


def decode_columns(
    buf: bytes | bytearray | memoryview | np.ndarray,
    file_from_offset: int,
    positions: np.ndarray,
    *,
    include_body: bool = True,
) -> dict[str, Any]:
    """Every field of the records at ``positions`` (in-buffer positions, e.g. from
    :func:`record_positions`) as columns.

    Numeric columns are numpy arrays: ``flag, queueId, size, sysFlag, reconsumeTimes, bodyCRC,
    magic`` (int32), ``queueOffset, commitLogOffset, bornTimestamp, storeTimestamp,
    preparedTransactionOffset`` (int64); ``commitLogOffset`` is the record's location
    (``file_from_offset + position``).  Lists: ``topic`` (str), ``body`` (bytes; omitted when
    ``include_body`` is false), ``properties`` (dict), ``bornHost``/``storeHost`` (str as
    ``Host.__str__``), ``keys`` (list of str), ``tags``/``uniqKey`` (str or None).
    Raises :class:`CorruptDataError` (with the offset) when a position is not a valid record.
    """
    u8 = as_u8(buf)
    pos = np.ascontiguousarray(positions, np.int64)
    rows = decode_fields(u8, pos)
    if isinstance(rows, int):
        raise _not_a_record(u8, file_from_offset, int(pos[rows]))
    col = record_columns(rows)
    cols: dict[str, Any] = {}
    topic_cache: dict[bytes, str] = {}
    topics = []
    for s, ln in zip(col["topicStart"].tolist(), col["topicLen"].tolist(), strict=True):
        raw = u8[s : s + ln].tobytes()
        t = topic_cache.get(raw)
        if t is None:
            t = topic_cache[raw] = raw.decode("utf-8", "replace")
        topics.append(t)
    cols["topic"] = topics
    cols["flag"] = col["flag"].astype(np.int32)
    if include_body:
        cols["body"] = [
            u8[s : s + ln].tobytes() for s, ln in zip(col["bodyStart"].tolist(), col["bodyLen"].tolist(), strict=True)
        ]
    props = [
        parse_properties(u8[s : s + ln].tobytes().decode("utf-8", "replace"))
        for s, ln in zip(col["propsStart"].tolist(), col["propsLen"].tolist(), strict=True)
    ]
    cols["properties"] = props
    cols["queueId"] = col["queueId"].astype(np.int32)
    cols["queueOffset"] = col["queueOffset"].copy()
    cols["commitLogOffset"] = pos + np.int64(file_from_offset)
    cols["size"] = col["size"].astype(np.int32)
    cols["bornTimestamp"] = col["bornTimestamp"].copy()
    cols["storeTimestamp"] = col["storeTimestamp"].copy()
    cols["bornHost"] = _host_strings(u8, col["bornHostPos"], col["bornHostWidth"])
    cols["storeHost"] = _host_strings(u8, col["storeHostPos"], col["storeHostWidth"])
    cols["sysFlag"] = col["sysFlag"].astype(np.int32)
    cols["reconsumeTimes"] = col["reconsumeTimes"].astype(np.int32)
    cols["bodyCRC"] = col["bodyCRC"].astype(np.int32)
    cols["keys"] = [split_keys(p.get(PROPERTY_KEYS)) for p in props]
    cols["tags"] = [p.get(PROPERTY_TAGS) for p in props]
    cols["uniqKey"] = [p.get(PROPERTY_UNIQ_KEY) for p in props]
    cols["preparedTransactionOffset"] = col["preparedTransactionOffset"].copy()
    cols["magic"] = col["magic"].astype(np.int32)
    return cols


def decode_fields(buf: object, positions: np.ndarray) -> np.ndarray | int:
    """The rows (``int64``, columns :data:`RECORD_FIELDS`, numbered ``F_*``) of the records at the
    in-buffer ``positions``, or the index of the first position that is not a valid message record."""
    u8 = as_u8(buf)
    pos = np.ascontiguousarray(positions, np.int64)
    out = np.empty((len(pos), N_RECORD_FIELDS), np.int64)  # (a structured array costs ~10 us more per call)
    bad = int(_nb()._decode_kernel(u8, pos, out))
    return bad if bad >= 0 else out


def record_columns(rows: np.ndarray) -> dict[str, np.ndarray]:
    """The columns of :func:`decode_fields` rows by name (views, no copy)."""
    return {name: rows[:, i] for i, name in enumerate(RECORD_FIELDS)}


def _not_a_record(u8: np.ndarray, file_from_offset: int, p: int) -> CorruptDataError:
    res = check_record(u8, p, check_crc=False, read_body=False) if 0 <= p < len(u8) else None
    reason = (res.error if res is not None and res.error else None) or "not a message record"
    return CorruptDataError(reason, offset=file_from_offset + p)




_HEX = np.frombuffer(b"0123456789abcdef", np.uint8).copy()






def _gather(u8: np.ndarray, starts: np.ndarray, lens: np.ndarray) -> tuple[np.ndarray, np.ndarray] | None:
    """(int32 offsets, data) of the spans; ``None`` when the data would overflow int32 offsets."""
    lens = np.maximum(lens, 0)
    total = int(lens.sum())
    if total > _INT32_MAX:
        return None
    offsets = np.empty(len(starts) + 1, np.int32)
    data = np.empty(total, np.uint8)
    _nb()._gather_kernel(u8, starts, lens, offsets, data)
    return offsets, data


def _var_array(typ: pa.DataType, offsets: np.ndarray, data: np.ndarray, valid: np.ndarray | None = None) -> pa.Array:
    import pyarrow as pa

    n = len(offsets) - 1
    if valid is None or valid.all():
        return pa.Array.from_buffers(typ, n, [None, pa.py_buffer(offsets), pa.py_buffer(data)], null_count=0)
    bitmap = np.packbits(valid, bitorder="little")
    return pa.Array.from_buffers(
        typ, n, [pa.py_buffer(bitmap), pa.py_buffer(offsets), pa.py_buffer(data)], null_count=int(n - valid.sum())
    )


def _utf8_ok(*arrays: pa.Array) -> bool:
    import pyarrow as pa

    for a in arrays:
        try:
            a.validate(full=True)
        except pa.ArrowInvalid:
            return False
    return True


def arrow_columns(
    buf: bytes | bytearray | memoryview | np.ndarray,
    file_from_offset: int,
    positions: np.ndarray,
    *,
    broker_name: str,
    include_body: bool = True,
) -> dict[str, pa.Array] | None:
    """The Arrow columns of the ``rocketmq`` source (names of ``ROCKETMQ_COLUMNS``) for the
    records at ``positions``, equal to ``columns_to_arrow(decode_columns(...))``.

    Returns ``None`` when the batch needs the old path: a position that is not a valid record (the
    old path raises the typed error), text that is not valid UTF-8 (the old path replaces it), or
    more than 2 GiB of data in one column.
    """
    import pyarrow as pa

    u8 = as_u8(buf)
    pos = np.ascontiguousarray(positions, np.int64)
    n = len(pos)
    rows = decode_fields(u8, pos)
    if isinstance(rows, int):
        return None
    col = record_columns(rows)
    s = pa.string()

    ps = np.ascontiguousarray(col["propsStart"])
    pl = np.ascontiguousarray(col["propsLen"])
    cap_pairs = int(pl.sum()) // 3 + n + 1
    cap_keys = int(pl.sum()) // 2 + n + 1
    pair_off = np.empty(n + 1, np.int64)
    ns = np.empty(cap_pairs, np.int64)
    nl = np.empty(cap_pairs, np.int64)
    vs = np.empty(cap_pairs, np.int64)
    vl = np.empty(cap_pairs, np.int64)
    special = np.zeros(n, SPECIAL_DTYPE)
    key_off = np.empty(n + 1, np.int64)
    ks = np.empty(cap_keys, np.int64)
    kl = np.empty(cap_keys, np.int64)
    _nb()._props_kernel(u8, ps, pl, PairSpans(pair_off, ns, nl, vs, vl), special, KeyPieces(key_off, ks, kl))
    npairs = int(pair_off[n])
    nkeys = int(key_off[n])
    if npairs > _INT32_MAX or nkeys > _INT32_MAX:
        return None

    pieces = {
        "topic": (col["topicStart"], col["topicLen"]),
        "pname": (ns[:npairs], nl[:npairs]),
        "pvalue": (vs[:npairs], vl[:npairs]),
        "keys": (ks[:nkeys], kl[:nkeys]),
        "tags": (special["tagsStart"], special["tagsLen"]),
        "uniqKey": (special["uniqStart"], special["uniqLen"]),
    }
    if include_body:
        pieces["body"] = (col["bodyStart"], col["bodyLen"])
    gathered = {}
    for name, (st, ln) in pieces.items():
        g = _gather(u8, np.ascontiguousarray(st), np.ascontiguousarray(ln))
        if g is None:
            return None
        gathered[name] = g
    topic = _var_array(s, *gathered["topic"])
    pname = _var_array(s, *gathered["pname"])
    pvalue = _var_array(s, *gathered["pvalue"])
    tags = _var_array(s, *gathered["tags"], special["tagsLen"] >= 0)
    uniq = _var_array(s, *gathered["uniqKey"], special["uniqLen"] >= 0)
    if not _utf8_ok(topic, pname, pvalue):  # tags, uniqKey and keys are pieces of the values
        return None
    keys_values = _var_array(s, *gathered["keys"])
    properties = pa.MapArray.from_arrays(pa.array(pair_off.astype(np.int32), pa.int32()), pname, pvalue)
    keys = pa.ListArray.from_arrays(pa.array(key_off.astype(np.int32), pa.int32()), keys_values)
    body = _var_array(pa.binary(), *gathered["body"]) if include_body else pa.nulls(n, pa.binary())

    hosts = {}
    for name, p_f, w_f in (("bornHost", "bornHostPos", "bornHostWidth"), ("storeHost", "storeHostPos", "storeHostWidth")):
        h_off = np.empty(n + 1, np.int32)
        h_buf = np.empty(n * 56, np.uint8)
        used = int(_nb()._hosts_kernel(u8, np.ascontiguousarray(col[p_f]), np.ascontiguousarray(col[w_f]), _HEX, h_off, h_buf))
        hosts[name] = _var_array(s, h_off, h_buf[:used])

    bb = broker_name.encode("utf-8")
    broker = _var_array(
        s, (np.arange(n + 1, dtype=np.int64) * len(bb)).astype(np.int32), np.tile(np.frombuffer(bb, np.uint8), n)
    ) if n * len(bb) <= _INT32_MAX else pa.array([broker_name] * n, s)  # fmt: skip

    def i32(name: str) -> pa.Array:
        return pa.array(col[name].astype(np.int32), pa.int32())

    def i64(a: np.ndarray) -> pa.Array:
        return pa.array(np.ascontiguousarray(a, np.int64), pa.int64())

    return {
        "topic": topic,
        "flag": i32("flag"),
        "body": body,
        "properties": properties,
        "brokerName": broker,
        "queueId": i32("queueId"),
        "queueOffset": i64(col["queueOffset"]),
        "bornTimestamp": i64(col["bornTimestamp"]),
        "storeTimestamp": i64(col["storeTimestamp"]),
        "commitLogOffset": i64(pos + np.int64(file_from_offset)),
        "size": i32("size"),
        "keys": keys,
        "tags": tags,
        "uniqKey": uniq,
        "sysFlag": i32("sysFlag"),
        "bornHost": hosts["bornHost"],
        "storeHost": hosts["storeHost"],
        "reconsumeTimes": i32("reconsumeTimes"),
        "bodyCRC": i32("bodyCRC"),
    }


def decode_columns_py(
    buf: bytes | bytearray | memoryview | np.ndarray,
    file_from_offset: int,
    positions: np.ndarray,
    *,
    include_body: bool = True,
) -> dict[str, Any]:
    """Twin of :func:`decode_columns`: :func:`~mqstore.formats.rocketmq.record.check_record` per
    record."""
    u8 = as_u8(buf)
    raw = u8.tobytes()
    pos = np.ascontiguousarray(positions, np.int64)
    recs = []
    for p in pos.tolist():
        res = check_record(raw, p, check_crc=False) if 0 <= p < len(raw) else None
        if res is None or not res.success or res.record is None or res.size <= 0:
            raise _not_a_record(u8, file_from_offset, p)
        recs.append(res.record)
    i32 = lambda vals: np.array(vals, np.int32)  # noqa: E731
    i64 = lambda vals: np.array(vals, np.int64)  # noqa: E731
    cols: dict[str, Any] = {"topic": [r.topic for r in recs], "flag": i32([r.flag for r in recs])}
    if include_body:
        cols["body"] = [bytes(r.body) for r in recs]
    cols["properties"] = [r.properties for r in recs]
    cols["queueId"] = i32([r.queue_id for r in recs])
    cols["queueOffset"] = i64([r.queue_offset for r in recs])
    cols["commitLogOffset"] = pos + np.int64(file_from_offset)
    cols["size"] = i32([r.total_size for r in recs])
    cols["bornTimestamp"] = i64([r.born_timestamp for r in recs])
    cols["storeTimestamp"] = i64([r.store_timestamp for r in recs])
    cols["bornHost"] = [str(r.born_host) for r in recs]
    cols["storeHost"] = [str(r.store_host) for r in recs]
    cols["sysFlag"] = i32([r.sys_flag for r in recs])
    cols["reconsumeTimes"] = i32([r.reconsume_times for r in recs])
    cols["bodyCRC"] = i32([r.body_crc for r in recs])
    cols["keys"] = [r.keys for r in recs]
    cols["tags"] = [r.tags for r in recs]
    cols["uniqKey"] = [r.uniq_key for r in recs]
    cols["preparedTransactionOffset"] = i64([r.prepared_transaction_offset for r in recs])
    cols["magic"] = i32([r.magic for r in recs])
    return cols


def arrow_of_columns(cols: dict[str, Any], broker_name: str, *, include_body: bool = True) -> dict[str, pa.Array]:
    """The Arrow arrays of the ``rocketmq`` source from :func:`decode_columns` output."""
    import pyarrow as pa

    n = len(cols["topic"])
    s = pa.string()
    props: list[dict[str, str]] = cols["properties"]
    p_off = np.zeros(n + 1, np.int32)
    if n:
        np.cumsum([len(d) for d in props], out=p_off[1:])
    p_keys = [k for d in props for k in d]
    p_vals = [v for d in props for v in d.values()]
    properties = pa.MapArray.from_arrays(pa.array(p_off, pa.int32()), pa.array(p_keys, s), pa.array(p_vals, s))
    keys: list[list[str]] = cols["keys"]
    k_off = np.zeros(n + 1, np.int32)
    if n:
        np.cumsum([len(k) for k in keys], out=k_off[1:])
    keys_arr = pa.ListArray.from_arrays(pa.array(k_off, pa.int32()), pa.array([k for ks in keys for k in ks], s))
    body = pa.array(cols["body"], pa.binary()) if include_body else pa.nulls(n, pa.binary())
    return {
        "topic": pa.array(cols["topic"], s),
        "flag": pa.array(cols["flag"], pa.int32()),
        "body": body,
        "properties": properties,
        "brokerName": pa.array([broker_name] * n, s),
        "queueId": pa.array(cols["queueId"], pa.int32()),
        "queueOffset": pa.array(cols["queueOffset"], pa.int64()),
        "bornTimestamp": pa.array(cols["bornTimestamp"], pa.int64()),
        "storeTimestamp": pa.array(cols["storeTimestamp"], pa.int64()),
        "commitLogOffset": pa.array(cols["commitLogOffset"], pa.int64()),
        "size": pa.array(cols["size"], pa.int32()),
        "keys": keys_arr,
        "tags": pa.array(cols["tags"], s),
        "uniqKey": pa.array(cols["uniqKey"], s),
        "sysFlag": pa.array(cols["sysFlag"], pa.int32()),
        "bornHost": pa.array(cols["bornHost"], s),
        "storeHost": pa.array(cols["storeHost"], s),
        "reconsumeTimes": pa.array(cols["reconsumeTimes"], pa.int32()),
        "bodyCRC": pa.array(cols["bodyCRC"], pa.int32()),
    }


def arrow_columns_py(
    buf: bytes | bytearray | memoryview | np.ndarray,
    file_from_offset: int,
    positions: np.ndarray,
    *,
    broker_name: str,
    include_body: bool = True,
) -> dict[str, pa.Array] | None:
    """Twin of :func:`arrow_columns`: :func:`decode_columns_py` + :func:`arrow_of_columns`, None
    for a position that is not a record.  (Where :func:`arrow_columns` declines text that is not
    valid UTF-8, this one answers with the replaced text: the answer the caller's fallback gives.)"""
    try:
        cols = decode_columns_py(buf, file_from_offset, positions, include_body=include_body)
    except CorruptDataError:
        return None
    return arrow_of_columns(cols, broker_name, include_body=include_body)


register("rocketmq.decode_columns", decode_columns, decode_columns_py)
register("rocketmq.arrow_columns", arrow_columns, arrow_columns_py)
