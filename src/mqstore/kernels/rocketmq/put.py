"""The batch record encoder of the RocketMQ put path: many CommitLog records in one compiled pass.

:func:`encode_records_into` writes records described by columns (concatenated bodies, topics and
properties with their offsets and lengths, plus one array per fixed field) straight into a
buffer, normally the mapped CommitLog segment.  Its pure-Python twin is the record codec itself
(:func:`encode_records_py` calls :func:`mqstore.formats.rocketmq.record.encode_record` once per
record); the tests compare both byte for byte on the same columns.

Every length, CRC and flag is computed by the caller (vectorised, see
:class:`RecordColumns`), so the kernel only moves bytes.

The batch put's column kernels :func:`build_common_props` (the properties texts) and
:func:`queue_ranks` are native (``kernels/csrc/_nat_put.c``) when built, else numba; this facade
imports no numba (the ``@njit`` kernels live in :mod:`.put_nb`, loaded on first use), so a
``put_batch`` on the native path never loads it.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, NamedTuple

import numpy as np

from mqstore.formats.rocketmq.record import (
    BORNHOST_V6_FLAG,
    MAGIC_V1,
    MAGIC_V2,
    STOREHOST_V6_FLAG,
    Host,
    MessageRecord,
    encode_record,
)
from mqstore.kernels.backend import native, numba_module
from mqstore.kernels.registry import register

# record_length() without body, topic, properties, topic-length field and hosts
FIXED_NO_HOSTS = 4 + 4 + 4 + 4 + 4 + 8 + 8 + 4 + 8 + 8 + 4 + 8 + 4 + 2


@dataclass(slots=True)
class RecordColumns:
    """Columns of ``n`` records to encode (all numpy arrays of length ``n`` unless said).

    ``bodies``/``topics``/``props`` are concatenated ``uint8`` buffers addressed by the
    ``*_off``/``*_len`` columns; ``born_hosts`` is ``(n, 20)`` ``uint8`` (4 or 16 address bytes
    then the big-endian port in the next 4) with ``born_v6`` saying which; ``store_host`` is the
    one store address of the batch in the same form.  ``sys_flag`` already carries the v6 bits.

    ``body_list`` (optional): the bodies as a list of ``bytes``, set by a caller whose records
    all have the common shape (magic v1, IPv4 born host = store host, SYSFLAG 0, RECONSUMETIMES 0,
    PREPAREDTRANSACTIONOFFSET 0); ``bodies`` and ``body_crc`` may then be left empty and the store
    encodes by the native ``put_one.encode_common_into`` (CRC computed while copying).
    """

    bodies: np.ndarray
    body_off: np.ndarray
    body_len: np.ndarray
    body_crc: np.ndarray
    topics: np.ndarray
    topic_off: np.ndarray
    topic_len: np.ndarray
    props: np.ndarray
    props_off: np.ndarray
    props_len: np.ndarray
    v2: np.ndarray  # bool: magic v2 (2-byte topic length)
    queue_id: np.ndarray
    flag: np.ndarray
    queue_offset: np.ndarray
    sys_flag: np.ndarray
    born_ts: np.ndarray
    born_hosts: np.ndarray
    born_v6: np.ndarray
    store_host: np.ndarray
    store_v6: bool
    reconsume: np.ndarray
    prepared: np.ndarray
    body_list: list[bytes] | None = None

    def __len__(self) -> int:
        return int(self.body_len.shape[0])

    def sizes(self) -> np.ndarray:
        """``calMsgLength`` of every record (int64)."""
        return (FIXED_NO_HOSTS + np.where(self.born_v6, 20, 8) + (20 if self.store_v6 else 8)
                + self.body_len + self.topic_len + self.props_len + np.where(self.v2, 2, 1)).astype(np.int64)


class EncodeColumns(NamedTuple):
    """:class:`RecordColumns` as the compiled encoder takes them (one argument, contiguous buffers)."""

    bodies: np.ndarray
    body_off: np.ndarray
    body_len: np.ndarray
    body_crc: np.ndarray
    topics: np.ndarray
    topic_off: np.ndarray
    topic_len: np.ndarray
    props: np.ndarray
    props_off: np.ndarray
    props_len: np.ndarray
    v2: np.ndarray
    queue_id: np.ndarray
    flag: np.ndarray
    queue_offset: np.ndarray
    sys_flag: np.ndarray
    born_ts: np.ndarray
    born_hosts: np.ndarray
    born_v6: np.ndarray
    store_host: np.ndarray
    store_v6: bool
    reconsume: np.ndarray
    prepared: np.ndarray


def encode_records_into(out: np.ndarray, pos: int, cols: RecordColumns, lo: int, hi: int, sizes: np.ndarray,
                        phys: np.ndarray, store_ts: int) -> int:
    """Encode records ``lo:hi`` of ``cols`` back to back into ``out`` (``uint8``) from ``pos``;
    ``phys`` are their physical offsets, ``sizes`` their lengths.  Returns the end position."""
    if out.dtype != np.uint8 or out.ndim != 1 or not out.flags.c_contiguous:
        raise ValueError("out must be a contiguous uint8 buffer")
    c = np.ascontiguousarray
    enc = EncodeColumns(c(cols.bodies, np.uint8), cols.body_off, cols.body_len, cols.body_crc, c(cols.topics, np.uint8),
                        cols.topic_off, cols.topic_len, c(cols.props, np.uint8), cols.props_off, cols.props_len,
                        cols.v2, cols.queue_id, cols.flag, cols.queue_offset, cols.sys_flag, cols.born_ts,
                        cols.born_hosts, cols.born_v6, cols.store_host, bool(cols.store_v6), cols.reconsume,
                        cols.prepared)  # fmt: skip
    return int(_nb()._encode(out, pos, lo, hi, sizes, phys, store_ts, enc))


def _nb() -> Any:
    return numba_module("mqstore.kernels.rocketmq.put_nb")


_NAT_PUT = native("_nat_put")


def queue_ranks_numba(codes: np.ndarray, takes: np.ndarray, nslots: int) -> tuple[np.ndarray, np.ndarray]:
    """For dense queue codes in ``[0, nslots)``: the rank of each record among the earlier
    records of its queue that take a queue offset (``takes``; 0 for the others), and the number
    of such records per code.  One pass, no sort."""
    codes = np.ascontiguousarray(codes, np.int64)
    if codes.shape[0] and (int(codes.min()) < 0 or int(codes.max()) >= nslots):
        raise ValueError("queue code out of range")
    return _nb()._queue_ranks(codes, np.ascontiguousarray(takes, np.bool_), int(nslots))  # type: ignore[no-any-return]


def queue_ranks_native(codes: np.ndarray, takes: np.ndarray, nslots: int) -> tuple[np.ndarray, np.ndarray]:
    """:func:`queue_ranks_numba` in C (``_nat_put.queue_ranks``)."""
    codes = np.ascontiguousarray(codes, np.int64)
    rank = np.empty(codes.shape[0], np.int64)
    seen = np.zeros(int(nslots), np.int64)
    _NAT_PUT.queue_ranks(codes, np.ascontiguousarray(takes, np.bool_), rank, seen)
    return rank, seen


def queue_ranks_py(codes: np.ndarray, takes: np.ndarray, nslots: int) -> tuple[np.ndarray, np.ndarray]:
    """Twin of :func:`queue_ranks`."""
    if any(not 0 <= c < nslots for c in codes.tolist()):
        raise ValueError("queue code out of range")
    seen = [0] * nslots
    rank = [0] * len(codes)
    for i, (c, t) in enumerate(zip(codes.tolist(), takes.tolist(), strict=True)):
        if t:
            rank[i] = seen[c]
            seen[c] += 1
    return np.array(rank, np.int64), np.array(seen, np.int64)


def _host_of(raw: np.ndarray, v6: bool) -> Host:
    addr = bytes(raw[:16] if v6 else raw[:4])
    port = int.from_bytes(bytes(raw[16:20]), "big", signed=True)
    return Host.from_bytes(addr + port.to_bytes(4, "big", signed=True))


def encode_records_py(out: np.ndarray, pos: int, cols: RecordColumns, lo: int, hi: int, sizes: np.ndarray,
                      phys: np.ndarray, store_ts: int) -> int:
    """Twin of :func:`encode_records_into`: the same records through the record codec
    (:func:`~mqstore.formats.rocketmq.record.encode_record`), copied into ``out`` at ``pos``."""
    for i in range(lo, hi):
        for buf, off, ln in ((cols.bodies, cols.body_off, cols.body_len), (cols.topics, cols.topic_off, cols.topic_len),
                             (cols.props, cols.props_off, cols.props_len)):
            if int(ln[i]) < 0 or int(off[i]) < 0 or int(off[i]) + int(ln[i]) > len(buf):
                raise ValueError("record column out of bounds")
    if pos < 0 or pos + int(np.sum(sizes[lo:hi])) > len(out):
        raise ValueError("records do not fit in the output buffer")
    data = encode_records_bytes(cols, lo, hi, phys, store_ts)
    out[pos : pos + len(data)] = np.frombuffer(data, np.uint8)
    return pos + len(data)


def encode_records_bytes(cols: RecordColumns, lo: int, hi: int, phys: np.ndarray, store_ts: int) -> bytes:
    """Records ``lo:hi`` of ``cols`` encoded one by one by the record codec."""
    out = bytearray()
    store = _host_of(cols.store_host, cols.store_v6)
    for i in range(lo, hi):
        b0, t0, p0 = int(cols.body_off[i]), int(cols.topic_off[i]), int(cols.props_off[i])
        rec = MessageRecord(
            topic=bytes(cols.topics[t0 : t0 + int(cols.topic_len[i])]).decode("utf-8"),
            body=bytes(cols.bodies[b0 : b0 + int(cols.body_len[i])]),
            queue_id=int(cols.queue_id[i]), flag=int(cols.flag[i]), queue_offset=int(cols.queue_offset[i]),
            commit_log_offset=int(phys[i]),
            sys_flag=int(cols.sys_flag[i]) & ~(BORNHOST_V6_FLAG | STOREHOST_V6_FLAG),
            born_timestamp=int(cols.born_ts[i]), born_host=_host_of(cols.born_hosts[i], bool(cols.born_v6[i])),
            store_timestamp=store_ts, store_host=store, reconsume_times=int(cols.reconsume[i]),
            prepared_transaction_offset=int(cols.prepared[i]),
            properties_text=bytes(cols.props[p0 : p0 + int(cols.props_len[i])]).decode("utf-8"),
            body_crc=int(cols.body_crc[i]), magic=MAGIC_V2 if cols.v2[i] else MAGIC_V1,
        )
        out += encode_record(rec, max_message_size=2**31 - 1)
    return bytes(out)


# ----------------------------------------------------------------------------- properties
# The properties of the common message shape, in the Java HashMap order of KEYS, TAGS and
# UNIQ_KEY (KEYS, UNIQ_KEY, TAGS; a subset keeps that order): KEYS\x01k\x02UNIQ_KEY\x01u\x02TAGS\x01t\x02.
_KEYS_TAG = np.frombuffer(b"KEYS\x01", np.uint8)
_UNIQ_TAG = np.frombuffer(b"UNIQ_KEY\x01", np.uint8)
_TAGS_TAG = np.frombuffer(b"TAGS\x01", np.uint8)
_HEXDIGITS = np.frombuffer(b"0123456789ABCDEF", np.uint8)
UNIQ_HEAD_LEN = 28  # hex of ip, pid, generator hash and ms in month; 4 hex digits of the counter follow


class TextColumn(NamedTuple):
    """Texts of ``n`` rows in one buffer: row ``i`` is ``buf[off[i]:][:length[i]]`` (length < 0: none)."""

    buf: np.ndarray
    off: np.ndarray
    length: np.ndarray


def common_props_lengths(keys_len: np.ndarray, tags_len: np.ndarray) -> np.ndarray:
    """Byte length of each properties text built by :func:`build_common_props` (a length < 0:
    no such property)."""
    return (np.where(keys_len >= 0, keys_len + 6, 0) + (len(_UNIQ_TAG) + UNIQ_HEAD_LEN + 5)
            + np.where(tags_len >= 0, tags_len + 6, 0)).astype(np.int64)


def _build_common_props(keys: np.ndarray, keys_off: np.ndarray, keys_len: np.ndarray, tags: np.ndarray,
                        tags_off: np.ndarray, tags_len: np.ndarray, uniq_head: bytes,
                        counter0: int, *, native_kernel: bool) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The properties texts (UTF-8) of ``n`` messages of the common shape in one compiled pass:
    message ``i`` has the key text ``keys[keys_off[i]:][:keys_len[i]]`` (no KEYS when the length
    is < 0), the tag likewise, and the generated unique key ``uniq_head`` + 4 hex digits of
    ``(counter0 + i) & 0xFFFF``.  Returns ``(buffer, offsets, lengths)``."""
    if len(uniq_head) != UNIQ_HEAD_LEN:
        raise ValueError(f"unique-key head must be {UNIQ_HEAD_LEN} ASCII bytes")
    lens = common_props_lengths(keys_len, tags_len)
    off = np.cumsum(lens) - lens
    out = np.empty(int(lens.sum()), np.uint8)
    if native_kernel:
        c = np.ascontiguousarray
        _NAT_PUT.build_common_props(c(keys, np.uint8), c(keys_off, np.int64), c(keys_len, np.int64), c(tags, np.uint8),
                                    c(tags_off, np.int64), c(tags_len, np.int64), uniq_head, int(counter0), out, off)
    else:
        _nb()._build_props(TextColumn(keys, keys_off, keys_len), TextColumn(tags, tags_off, tags_len),
                           np.frombuffer(uniq_head, np.uint8), int(counter0), out, off)
    return out, off, lens


def build_common_props_py(keys: np.ndarray, keys_off: np.ndarray, keys_len: np.ndarray, tags: np.ndarray,
                          tags_off: np.ndarray, tags_len: np.ndarray, uniq_head: bytes,
                          counter0: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Twin of :func:`build_common_props`: the texts written out in Python, then encoded."""
    if len(uniq_head) != UNIQ_HEAD_LEN:
        raise ValueError(f"unique-key head must be {UNIQ_HEAD_LEN} ASCII bytes")

    def text(buf: np.ndarray, off: np.ndarray, ln: np.ndarray, i: int) -> str | None:
        n = int(ln[i])
        return None if n < 0 else bytes(buf[int(off[i]) : int(off[i]) + n]).decode("utf-8")

    texts = [common_props_text(text(keys, keys_off, keys_len, i), text(tags, tags_off, tags_len, i),
                               uniq_head.decode("ascii"), counter0 + i).encode("utf-8")
             for i in range(len(keys_len))]  # fmt: skip
    lens = np.array([len(t) for t in texts], np.int64)
    return np.frombuffer(b"".join(texts), np.uint8).copy(), np.cumsum(lens) - lens, lens


def common_props_text(key: str | None, tag: str | None, uniq_head: str, counter: int) -> str:
    """The properties text of one message of the common shape (see :func:`build_common_props`)."""
    text = "" if key is None else f"KEYS\x01{key}\x02"
    text += f"UNIQ_KEY\x01{uniq_head}{counter & 0xFFFF:04X}\x02"
    return text + ("" if tag is None else f"TAGS\x01{tag}\x02")


def build_common_props_numba(keys: np.ndarray, keys_off: np.ndarray, keys_len: np.ndarray, tags: np.ndarray,
                             tags_off: np.ndarray, tags_len: np.ndarray, uniq_head: bytes,
                             counter0: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """:func:`build_common_props` by the numba kernel (``put_nb._build_props``)."""
    return _build_common_props(keys, keys_off, keys_len, tags, tags_off, tags_len, uniq_head, counter0,
                               native_kernel=False)


def build_common_props_native(keys: np.ndarray, keys_off: np.ndarray, keys_len: np.ndarray, tags: np.ndarray,
                              tags_off: np.ndarray, tags_len: np.ndarray, uniq_head: bytes,
                              counter0: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """:func:`build_common_props` by the C kernel (``_nat_put.build_common_props``)."""
    return _build_common_props(keys, keys_off, keys_len, tags, tags_off, tags_len, uniq_head, counter0,
                               native_kernel=True)


#: the native kernels when built, else numba
queue_ranks = queue_ranks_native if _NAT_PUT is not None else queue_ranks_numba
build_common_props = build_common_props_native if _NAT_PUT is not None else build_common_props_numba

register("rocketmq.encode_records_into", encode_records_into, encode_records_py)
register("rocketmq.queue_ranks", queue_ranks_numba, queue_ranks_py,
         native=queue_ranks_native if _NAT_PUT is not None else None)
register("rocketmq.build_common_props", build_common_props_numba, build_common_props_py,
         native=build_common_props_native if _NAT_PUT is not None else None)


# ---------------------------------------------------------------- text columns (keys, tags of a batch)
def _property_text(v: Any) -> bytes | None:
    """One property value as UTF-8, or ``None`` when it is not a string, holds a ``\x01``/``\x02``
    separator or cannot be encoded (a lone surrogate)."""
    if type(v) is not str or "\x01" in v or "\x02" in v:
        return None
    try:
        return v.encode("utf-8")
    except UnicodeEncodeError:
        return None


def text_column_py(values: list[Any]) -> TextColumn | None:
    """A column of property values (``str`` or ``None`` each) as UTF-8 ``(buffer, offsets,
    lengths)``, length −1 for ``None`` (the reference, value by value); ``None`` when a value is
    not a string, contains a ``\\x01``/``\\x02`` separator or cannot be encoded."""
    n = len(values)
    parts: list[bytes] = []
    off, lens = np.zeros(n, np.int64), np.zeros(n, np.int64)
    total = 0
    for i, v in enumerate(values):
        off[i] = total
        if v is None:
            lens[i] = -1
            continue
        b = _property_text(v)
        if b is None:
            return None
        parts.append(b)
        lens[i] = len(b)
        total += len(b)
    return TextColumn(np.frombuffer(b"".join(parts) or b"\0", np.uint8), off, lens)


def text_column_passes(values: list[Any]) -> TextColumn | None:
    """:func:`text_column_py` by C-level passes over the whole column (one copy of a value all
    rows share)."""
    n = len(values)
    nones = values.count(None)
    if nones == n:
        return TextColumn(np.zeros(1, np.uint8), np.zeros(n, np.int64), np.full(n, -1, np.int64))
    if values.count(values[0]) == n:  # one value for all (a tag): one copy of it
        b = _property_text(values[0])
        if b is None:
            return None
        return TextColumn(np.frombuffer(b or b"\0", np.uint8), np.zeros(n, np.int64), np.full(n, len(b), np.int64))
    texts = values if nones == 0 else ["" if v is None else v for v in values]
    if set(map(type, texts)) != {str}:
        return None
    joined = "".join(texts)
    if "\x01" in joined or "\x02" in joined:
        return None
    try:
        buf = joined.encode("utf-8")
    except UnicodeEncodeError:
        return None
    if len(buf) == len(joined):  # ASCII: byte lengths are the text lengths
        lens = np.fromiter(map(len, texts), np.int64, n)
    else:
        lens = np.fromiter((len(t.encode("utf-8")) for t in texts), np.int64, n)
    off = np.cumsum(lens) - lens
    if nones:
        lens[np.fromiter((v is None for v in values), np.bool_, n)] = -1
    return TextColumn(np.frombuffer(buf or b"\0", np.uint8), off, lens)


def text_column_native(values: list[Any]) -> TextColumn | None:
    """:func:`text_column_py` in one C pass (``_nat_put.text_column``)."""
    n = len(values)
    off, lens = np.empty(n, np.int64), np.empty(n, np.int64)
    buf = _NAT_PUT.text_column(values if type(values) is list else list(values), off, lens)
    return None if buf is None else TextColumn(np.frombuffer(buf, np.uint8), off, lens)


#: ``text_column(values)``: the keys or tags of a batch as one UTF-8 column (native when built)
text_column = text_column_native if _NAT_PUT is not None else text_column_passes

register("rocketmq.text_column", text_column_passes, text_column_py,
         native=text_column_native if _NAT_PUT is not None else None)
