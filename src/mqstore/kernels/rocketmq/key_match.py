"""The exact single-key query (``query_by_key``) in one compiled call.

:func:`exact_key_files` walks the key's hash chains over every IndexFile (the table of
:func:`~mqstore.kernels.rocketmq.chain_walk.select_files`, no cap), drops repeated candidates and
those outside ``[lo, hi)``, and checks each remaining candidate in the mapped CommitLog segments
(a table of their addresses): the record structure and its physical offset
(:func:`~mqstore.kernels.rocketmq.columns.decode_one`), then its topic bytes, its store time and
only then its properties span — the ``UNIQ_KEY`` value and the space-separated ``KEYS`` pieces,
found with the broker's parsing rules (:func:`~mqstore.kernels.rocketmq.properties.prop_spans`) —
and for a match its body CRC.  Matches are written as :data:`RECORD_FIELDS` rows (plus the row of
their segment in the table), newest first by (store time, offset); nothing is decoded to Python
objects here.

Return codes: the number of matches, :data:`EXACT_ROOM` (``out`` too small), :data:`EXACT_UNCLEAN`
(a candidate is not a clean record or a match's body CRC differs: the caller reads record by
record, which raises the typed error), or ``SELECT_FILES_CYCLE - i`` (a looping chain in IndexFile
``i`` of the table).  The key is compared as UTF-8 bytes, which is exact because the properties
text is decoded with ``errors="replace"`` and UTF-8 resynchronises at the ASCII separators; a key
holding U+FFFD is left to the caller's Python path.

Three implementations: :func:`exact_key_files_native` (C, ``_nat_rmq_query``: the public
:func:`exact_key_files` when built), :func:`exact_key_files_numba` (:mod:`.key_match_nb`) and the
twin :func:`exact_key_files_py` (``select_files_py`` and ``check_record`` per candidate,
``parse_properties``/``split_keys`` on the decoded text).
"""

from __future__ import annotations

import ctypes
from typing import Any

import numpy as np

from mqstore.formats.rocketmq.properties import PROPERTY_KEYS, PROPERTY_UNIQ_KEY, parse_properties, split_keys
from mqstore.formats.rocketmq.record import MAGIC_V2, body_crc, check_record
from mqstore.kernels.backend import native, numba_module
from mqstore.kernels.registry import register
from mqstore.kernels.rocketmq.columns import (
    F_BODY_C_R_C,
    F_BODY_LEN,
    F_BODY_START,
    F_PHYSICAL_OFFSET,
    F_PROPS_LEN,
    F_PROPS_START,
    F_STORE_TIMESTAMP,
    F_TOPIC_LEN,
    F_TOPIC_START,
    MATCH_COLUMNS,  # noqa: F401 - re-exported: the rows of the query (callers size ``out`` with it)
)

LONG_MAX = 2**63 - 1
# slots of the ``prm`` argument (int64): the hash seed of select_files (``< 0``: ``~`` the Java hash
# state of ``topic#``, continued over ``key``; ``>= 0``: the key's hash, ``key`` then not hashed),
# the widened index time window, the CommitLog's [lo, hi) and the exact store-time window [b, e]
PRM_SEED = 0
PRM_WBEGIN = 1
PRM_END = 2
PRM_LO = 3
PRM_HI = 4
PRM_B = 5
PRM_E = 6
PRM_SIZE = 7
# columns of the segment table: address of the mapping, readable length (wrote position), global
# offset of its first byte, file size
SEG_ADDR = 0
SEG_LIMIT = 1
SEG_BASE = 2
SEG_SIZE = 3
SEG_COLUMNS = 4
EXACT_ROOM = -1
EXACT_UNCLEAN = -2
#: ``chain_walk.SELECT_FILES_CYCLE`` (that module is numba's; a test checks the two agree):
#: a return of ``SELECT_FILES_CYCLE - i`` names a looping chain in IndexFile ``i`` of the table
SELECT_FILES_CYCLE = -16


def _row_py(buf: bytes, pos: int) -> list[int] | None:
    """The :data:`RECORD_FIELDS` row of the record at ``pos`` (``check_record`` decides validity)."""
    res = check_record(buf, pos, len(buf), check_crc=False)
    if not res.success or res.record is None:
        return None
    r = res.record
    bw = 20 if r.sys_flag & 0x10 else 8
    sw = 20 if r.sys_flag & 0x20 else 8
    body_start = pos + 48 + bw + 8 + sw + 12 + 4
    body_len = int.from_bytes(buf[body_start - 4 : body_start], "big", signed=True)
    tw = 2 if r.magic == MAGIC_V2 else 1
    topic_start = body_start + body_len + tw
    topic_len = int.from_bytes(buf[topic_start - tw : topic_start], "big", signed=True)
    props_start = topic_start + topic_len + 2
    props_len = int.from_bytes(buf[props_start - 2 : props_start], "big", signed=True)
    return [
        r.total_size, r.magic, int.from_bytes(buf[pos + 8 : pos + 12], "big", signed=True), r.queue_id, r.flag,
        r.queue_offset, r.commit_log_offset, r.sys_flag, r.born_timestamp, pos + 48, bw, r.store_timestamp,
        pos + 56 + bw, sw, r.reconsume_times, r.prepared_transaction_offset, body_start, body_len, topic_start,
        topic_len, props_start, props_len,
    ]  # fmt: skip


def exact_key_files_py(files, segs, topic, key, prm, out):  # type: ignore[no-untyped-def]
    """Twin of :func:`exact_key_files`: the candidates of ``select_files_py``, each read with
    ``check_record`` and checked on its decoded topic, time and properties."""
    from mqstore.kernels.rocketmq.chain_walk import SELECT_ONE_ROOM, select_files_py

    seed, wbegin, end, lo, hi, b, e = (int(v) for v in prm[:PRM_SIZE])
    kb = bytes(key) if seed < 0 else b""
    cand = np.empty(64, np.int64)
    n = select_files_py(files, seed, kb, LONG_MAX, wbegin, end, cand)
    while n == SELECT_ONE_ROOM:
        cand = np.empty(len(cand) * 16, np.int64)
        n = select_files_py(files, seed, kb, LONG_MAX, wbegin, end, cand)
    if n < 0:
        return n
    topic_s = bytes(topic).decode("utf-8")
    key_s = bytes(key).decode("utf-8")
    table = [[int(v) for v in row] for row in segs]
    rows: list[list[int]] = []
    for off in sorted(set(cand[:n].tolist())):
        if not lo <= off < hi:
            continue
        s = next((i for i, t in enumerate(table) if t[SEG_BASE] <= off < t[SEG_BASE] + t[SEG_SIZE]), -1)
        if s < 0:
            continue
        if len(rows) == len(out):
            return EXACT_ROOM
        addr, limit, base = table[s][SEG_ADDR], table[s][SEG_LIMIT], table[s][SEG_BASE]
        buf = ctypes.string_at(addr, limit)
        row = _row_py(buf, off - base)
        if row is None or row[F_PHYSICAL_OFFSET] != off:
            return EXACT_UNCLEAN
        ts0, tl0 = row[F_TOPIC_START], row[F_TOPIC_LEN]
        if buf[ts0 : ts0 + tl0] != topic_s.encode("utf-8") or not b <= row[F_STORE_TIMESTAMP] <= e:
            continue
        ps0, pl0 = row[F_PROPS_START], row[F_PROPS_LEN]
        props = parse_properties(buf[ps0 : ps0 + pl0].decode("utf-8", "replace"))
        if key_s not in split_keys(props.get(PROPERTY_KEYS)) and props.get(PROPERTY_UNIQ_KEY) != key_s:
            continue
        bs0, bl0 = row[F_BODY_START], row[F_BODY_LEN]
        if body_crc(buf[bs0 : bs0 + bl0]) != row[F_BODY_C_R_C]:
            return EXACT_UNCLEAN
        rows.append([*row, s])
    rows.sort(key=lambda r: (r[F_STORE_TIMESTAMP], r[F_PHYSICAL_OFFSET]), reverse=True)
    for i, r in enumerate(rows):
        out[i] = r
    return len(rows)


def exact_key_files_numba(files, segs, topic, key, prm, out):  # type: ignore[no-untyped-def]
    """The numba kernel (:func:`mqstore.kernels.rocketmq.key_match_nb.exact_key_files`)."""
    return _nb().exact_key_files(files, segs, topic, key, prm, out)


def _nb() -> Any:
    return numba_module("mqstore.kernels.rocketmq.key_match_nb")


_NAT = native("_nat_rmq_query")
#: the native kernel in C (same arguments and results), when built
exact_key_files_native = _NAT.exact_key_files if _NAT is not None else None
exact_key_files = exact_key_files_native if exact_key_files_native is not None else exact_key_files_numba
#: whether :func:`exact_key_files` takes ``prm`` as a tuple of ints too (the native kernel does)
PRM_TUPLE = exact_key_files_native is not None
#: the native builder of the matches' messages (``_nat_rmq_query.messages``), None without it
messages_native = _NAT.messages if _NAT is not None else None
#: the whole single-key query in one native call (``_nat_rmq_query.query``: hash, chain walk,
#: record checks and the Messages; ``IndexService.exact_query`` calls it), None without it
query_native = _NAT.query if _NAT is not None else None
#: ``KeyQuery(engine, index, commit_log, segments_queue, read_only, topics_ok)``: a store's
#: ``query_by_key`` common case (plain arguments, open engine) in one native call, checks included;
#: any other case answers an int and the caller's Python method answers (None without the build)
KeyQuery = _NAT.KeyQuery if _NAT is not None else None
#: its answers other than a list: a plan to make first, a key the compiled path cannot compare
#: (``KeyQuery`` also: QUERY_SLOW, arguments or a store its caller's Python path handles)
QUERY_SLOW = -6
QUERY_NEED_INDEX_PLAN = -3
QUERY_NEED_SEGMENT_PLAN = -4
QUERY_FALLBACK = -5
if _NAT is not None and (_NAT.QUERY_NEED_INDEX_PLAN, _NAT.QUERY_NEED_SEGMENT_PLAN, _NAT.QUERY_FALLBACK,
                         _NAT.QUERY_SLOW) != (QUERY_NEED_INDEX_PLAN, QUERY_NEED_SEGMENT_PLAN, QUERY_FALLBACK, QUERY_SLOW):  # pragma: no cover - a stale build
    raise ImportError("mqstore.kernels._nat_rmq_query: its query codes differ from key_match's (rebuild it)")


def bind_messages(cls: type, slots: tuple[Any, ...], hosts: dict[bytes, Any], host_of: Any) -> None:
    """Tell the native builder the message class (``slots``: the member descriptors of its 18
    fields in constructor order), the host cache and the function that fills it."""
    if _NAT is not None:
        _NAT.bind_messages(cls, slots, hosts, host_of)
register("rocketmq.exact_key_files", exact_key_files_numba, exact_key_files_py, native=exact_key_files_native)
