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

Twin: :func:`exact_key_files_py` (``select_files_py`` and ``check_record`` per candidate,
``parse_properties``/``split_keys`` on the decoded text).
"""

from __future__ import annotations

import ctypes

import numpy as np
from numba import carray, njit, types
from numba.extending import intrinsic

from mqstore.formats.rocketmq.properties import PROPERTY_KEYS, PROPERTY_UNIQ_KEY, parse_properties, split_keys
from mqstore.formats.rocketmq.record import MAGIC_V2, body_crc, check_record
from mqstore.kernels.crc import CRC_TABLE
from mqstore.kernels.crc_nb import crc32_span
from mqstore.kernels.registry import register
from mqstore.kernels.rocketmq.chain_walk import SELECT_ONE_ROOM, select_files, select_files_py
from mqstore.kernels.rocketmq.columns import (
    F_BODY_C_R_C,
    F_BODY_LEN,
    F_BODY_START,
    F_PHYSICAL_OFFSET,
    F_PROPS_LEN,
    F_PROPS_START,
    F_SEGMENT,
    F_STORE_TIMESTAMP,
    F_TOPIC_LEN,
    F_TOPIC_START,
    MATCH_COLUMNS,
)
from mqstore.kernels.rocketmq.columns_nb import decode_one
from mqstore.kernels.rocketmq.properties import P_KEYS, P_UNIQ, PROP_SPANS
from mqstore.kernels.rocketmq.properties_nb import prop_spans

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


@intrinsic
def _u8_ptr(typingctx, addr):  # type: ignore[no-untyped-def]
    """An ``int64`` address as a ``uint8*`` (for ``numba.carray``)."""
    if not isinstance(addr, types.Integer):
        return None
    ptr_t = types.CPointer(types.uint8)

    def codegen(context, builder, signature, args):  # type: ignore[no-untyped-def]
        return builder.inttoptr(args[0], context.get_value_type(ptr_t))

    return ptr_t(addr), codegen


@njit(cache=True, nogil=True)
def _eq_at(buf: np.ndarray, a: int, const: bytes) -> bool:
    """Whether ``buf[a:a + len(const)] == const``."""
    for k in range(len(const)):
        if buf[a + k] != const[k]:
            return False
    return True


@njit(cache=True, nogil=True)
def _has_piece(buf: np.ndarray, s: int, e: int, key: np.ndarray) -> bool:
    """Whether ``key`` is one of the space-separated pieces of ``buf[s:e]``."""
    n = len(key)
    i = s
    while i < e:
        j = i
        while j < e and buf[j] != 32:
            j += 1
        if j - i == n and _eq_at(buf, i, key):
            return True
        i = j + 1
    return False


@njit(cache=True, nogil=True)
def _segment_of(segs: np.ndarray, off: int) -> int:
    """The row of ``segs`` (ascending bases) holding global offset ``off``, or -1."""
    lo = 0
    hi = segs.shape[0]
    while lo < hi:  # last row with base <= off
        mid = (lo + hi) >> 1
        if segs[mid, SEG_BASE] <= off:
            lo = mid + 1
        else:
            hi = mid
    s = lo - 1
    if s < 0 or off >= segs[s, SEG_BASE] + segs[s, SEG_SIZE]:
        return -1
    return s


@njit(cache=True, nogil=True)
def exact_key_files(files, segs, topic, key, prm, out):  # type: ignore[no-untyped-def]
    """See the module docstring.  ``files``: the IndexFile table of ``select_files``; ``segs``: the
    segment table; ``topic``/``key``: their UTF-8 bytes; ``prm``: the ``PRM_*`` numbers;
    ``out``: ``(rows, MATCH_COLUMNS)`` ``int64``."""
    seed = prm[PRM_SEED]
    wbegin = prm[PRM_WBEGIN]
    end = prm[PRM_END]
    lo = prm[PRM_LO]
    hi = prm[PRM_HI]
    b = prm[PRM_B]
    e = prm[PRM_E]
    kb = key  # (not read by the walk when the seed is the hash)
    cand = np.empty(64, np.int64)
    n = select_files(files, seed, kb, LONG_MAX, wbegin, end, cand)
    while n == SELECT_ONE_ROOM:
        cand = np.empty(cand.shape[0] * 16, np.int64)
        n = select_files(files, seed, kb, LONG_MAX, wbegin, end, cand)
    if n < 0:
        return n
    c = np.sort(cand[:n])
    spans = np.empty(PROP_SPANS, np.int64)
    tl = len(topic)
    m = 0
    prev = -1
    for i in range(n):
        off = c[i]
        if off == prev:
            continue
        prev = off
        if off < lo or off >= hi:
            continue
        s = _segment_of(segs, off)
        if s < 0:
            continue
        if m == out.shape[0]:
            return EXACT_ROOM
        buf = carray(_u8_ptr(segs[s, SEG_ADDR]), (segs[s, SEG_LIMIT],))
        o = out[m]
        if not decode_one(buf, off - segs[s, SEG_BASE], o) or o[F_PHYSICAL_OFFSET] != off:
            return EXACT_UNCLEAN
        if o[F_TOPIC_LEN] != tl or not _eq_at(buf, o[F_TOPIC_START], topic):
            continue
        ts = o[F_STORE_TIMESTAMP]
        if ts < b or ts > e:
            continue
        ps = o[F_PROPS_START]
        prop_spans(buf, ps, ps + o[F_PROPS_LEN], spans)
        hit = spans[P_UNIQ + 1] - spans[P_UNIQ] == len(key) and _eq_at(buf, spans[P_UNIQ], key)
        if not hit and spans[P_KEYS] >= 0:
            hit = _has_piece(buf, spans[P_KEYS], spans[P_KEYS + 1], key)
        if not hit:
            continue
        bs = o[F_BODY_START]
        bl = o[F_BODY_LEN]
        crc = 0 if bl == 0 else crc32_span(buf, bs, bs + bl, CRC_TABLE) & 0x7FFFFFFF
        if crc != o[F_BODY_C_R_C]:
            return EXACT_UNCLEAN
        o[F_SEGMENT] = s
        m += 1
    # newest first: (store time, offset) descending (insertion sort: a key has few matches)
    for i in range(1, m):
        j = i
        while j > 0 and (out[j, F_STORE_TIMESTAMP], out[j, F_PHYSICAL_OFFSET]) > (
            out[j - 1, F_STORE_TIMESTAMP], out[j - 1, F_PHYSICAL_OFFSET]
        ):  # fmt: skip
            for k in range(MATCH_COLUMNS):
                t = out[j, k]
                out[j, k] = out[j - 1, k]
                out[j - 1, k] = t
            j -= 1
    return m


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


register("rocketmq.exact_key_files", exact_key_files, exact_key_files_py)
