"""Scan a CommitLog segment into columnar *dispatch batches* (design: scan → dispatch → write).

A dispatch batch holds, for every message record of a byte range of one segment, exactly what the
ConsumeQueue and IndexFile writers need, as numpy arrays, plus the flattened list of index keys
(already hashed with the IndexFile key hash of ``topic#key``).  The same batches feed the live
dispatcher, the offline rebuild and the Spark jobs.

``scan_segment_py`` is the pure-Python reference (record by record through
:func:`mqstore.formats.rocketmq.record.check_record`); ``scan_segment`` is the fast path and must
return identical batches (tests run both on the same data).
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from mqstore.formats.rocketmq.javahash import DEFAULT_DELAY_TABLE, index_key_hash, tags_code
from mqstore.formats.rocketmq.properties import split_keys
from mqstore.formats.rocketmq.record import TRANSACTION_MASK, TRANSACTION_ROLLBACK_TYPE, check_record

STOP_END = "end"  # reached the end of the requested range (or a partial record that may still be written)
STOP_BLANK = "blank"  # an end-of-segment filler: continue in the next segment
STOP_INVALID = "invalid"  # an unreadable record (bad magic, bad CRC, torn): stop here
STOP_LIMIT = "limit"  # max_records reached


@dataclass(slots=True)
class DispatchBatch:
    """Columnar description of consecutive records of one CommitLog segment."""

    commit_log_offset: np.ndarray  # int64, global physical offset of the record
    size: np.ndarray  # int32, TOTALSIZE
    queue_id: np.ndarray  # int32
    queue_offset: np.ndarray  # int64, QUEUEOFFSET field
    sys_flag: np.ndarray  # int32
    store_timestamp: np.ndarray  # int64
    tags_code: np.ndarray  # int64 (tags hash, or deliver time for the delay topic)
    topic_id: np.ndarray  # int32, index into ``topics``
    topics: list[str]
    key_row: np.ndarray  # int64, row (message) of each index key, in index order
    key_hash: np.ndarray  # int32, IndexFile hash of ``topic#key`` (uniq key first, then KEYS pieces)
    next_offset: int  # global offset just past the last consumed record (or of the stop point)
    stop: str  # one of STOP_END, STOP_BLANK, STOP_INVALID, STOP_LIMIT
    error: str | None = None  # why the scan stopped at an invalid record
    skipped: list[tuple[int, str]] = field(default_factory=list)  # (offset, reason) of skipped records

    def __len__(self) -> int:
        return len(self.commit_log_offset)

    @staticmethod
    def empty(next_offset: int, stop: str = STOP_END, error: str | None = None) -> DispatchBatch:
        i32, i64 = np.empty(0, np.int32), np.empty(0, np.int64)
        return DispatchBatch(i64, i32, i32, i64, i32, i64, i64, i32, [], i64, i32, next_offset, stop, error)

    def topic_of(self, row: int) -> str:
        return self.topics[int(self.topic_id[row])]

    def cq_mask(self) -> np.ndarray:
        """Rows that get a ConsumeQueue unit (transaction type NOT or COMMIT)."""
        t = self.sys_flag & TRANSACTION_MASK
        return (t == 0) | (t == 0x8)

    def index_key_mask(self) -> np.ndarray:
        """Index keys whose message is not a ROLLBACK (those are never indexed)."""
        t = self.sys_flag[self.key_row] & TRANSACTION_MASK
        return t != TRANSACTION_ROLLBACK_TYPE


def scan_segment_py(
    buf: bytes | bytearray | memoryview,
    file_from_offset: int,
    start: int,
    end: int,
    *,
    check_crc: bool = False,
    skip_length_mismatch: bool = True,
    max_records: int | None = None,
    delay_table: dict[int, int] = DEFAULT_DELAY_TABLE,
) -> DispatchBatch:
    """Reference scan of ``buf[start:end]`` (positions inside one segment whose global start is
    ``file_from_offset``).

    Stops at a blank record (``STOP_BLANK``, ``next_offset`` = the blank's offset), at an
    unreadable record (``STOP_INVALID``), when fewer bytes than a whole record remain
    (``STOP_END``) or after ``max_records``.  A record whose TOTALSIZE disagrees with its field
    lengths is skipped (as the reput service does) when ``skip_length_mismatch``, otherwise it is
    an invalid stop (as recovery does).
    """
    cols: dict[str, list[int]] = {k: [] for k in ("off", "size", "qid", "qoff", "sys", "ts", "tags", "topic")}
    key_row: list[int] = []
    key_hash: list[int] = []
    topics: dict[str, int] = {}
    skipped: list[tuple[int, str]] = []
    pos = start
    stop, error = STOP_END, None
    while pos < end:
        if max_records is not None and len(cols["off"]) >= max_records:
            stop = STOP_LIMIT
            break
        res = check_record(buf, pos, end, check_crc=check_crc, read_body=False)
        if res.size == 0 and res.success:
            stop = STOP_BLANK
            break
        if not res.success:
            if res.size > 0 and skip_length_mismatch:
                skipped.append((file_from_offset + pos, res.error or "length mismatch"))
                pos += res.size
                continue
            # A record cut by the end of the range is not an error: it is not written yet.
            if res.error and "truncated" in res.error:
                stop = STOP_END
            elif _all_zero(buf, pos, min(end, pos + 8)):
                stop = STOP_END
            else:
                stop, error = STOP_INVALID, res.error
            break
        rec = res.record
        assert rec is not None
        row = len(cols["off"])
        tid = topics.setdefault(rec.topic, len(topics))
        cols["off"].append(file_from_offset + pos)
        cols["size"].append(res.size)
        cols["qid"].append(rec.queue_id)
        cols["qoff"].append(rec.queue_offset)
        cols["sys"].append(rec.sys_flag)
        cols["ts"].append(rec.store_timestamp)
        cols["tags"].append(tags_code(rec.topic, rec.tags, rec.delay, rec.store_timestamp, delay_table))
        cols["topic"].append(tid)
        if rec.uniq_key is not None:
            key_row.append(row)
            key_hash.append(index_key_hash(f"{rec.topic}#{rec.uniq_key}"))
        for k in split_keys(rec.keys):
            key_row.append(row)
            key_hash.append(index_key_hash(f"{rec.topic}#{k}"))
        pos += res.size
    return DispatchBatch(
        commit_log_offset=np.array(cols["off"], np.int64),
        size=np.array(cols["size"], np.int32),
        queue_id=np.array(cols["qid"], np.int32),
        queue_offset=np.array(cols["qoff"], np.int64),
        sys_flag=np.array(cols["sys"], np.int32),
        store_timestamp=np.array(cols["ts"], np.int64),
        tags_code=np.array(cols["tags"], np.int64),
        topic_id=np.array(cols["topic"], np.int32),
        topics=list(topics),
        key_row=np.array(key_row, np.int64),
        key_hash=np.array(key_hash, np.int32),
        next_offset=file_from_offset + pos,
        stop=stop,
        error=error,
        skipped=skipped,
    )


def _all_zero(buf: bytes | bytearray | memoryview, a: int, b: int) -> bool:
    return not any(bytes(buf[a:b]))


