"""Offline inspection of Kafka data: dump and verify (what ``kafka-dump-log.sh`` reports, spec §5).

Verification problems (any of them makes ``verify`` fail):

* ``crc`` / ``bad_size`` / ``torn_tail`` – a batch fails ``ensureValid``, a size field is below 14,
  or bytes after the last whole batch (what recovery would cut);
* ``offset_order`` – batch offsets go backwards or below the segment base offset;
* ``index_sanity`` / ``time_index_sanity`` – Kafka's ``sanityCheck`` fails on the file as Kafka
  would open it (entry count from the length);
* ``index_padded`` / ``time_index_padded`` – an untrimmed file (zero padding after the entries) of a
  rolled segment, which Kafka always trims; on the active (last) segment it is the normal state of
  a running broker: a note (``index_preallocated`` / ``time_index_preallocated``, with the trimmed
  size) and the entries before the padding are judged — a problem there only with ``strict=True``;
* ``index_stale_entries`` / ``time_index_stale_entries`` – non-zero bytes after the entries of an
  untrimmed file (stale entries, e.g. left by a truncation; Kafka would rebuild the index);
* ``index_mismatch`` – an offset-index entry whose position is not a batch start, or whose offset
  is not the last offset of a batch at or after that position (Kafka's ``--verify-index-only``
  mismatch).  An entry that points at the first batch of a multi-batch append and names the last
  offset of a later batch of the same append is what a follower writes: it is reported as a note
  (``multi_batch_entry``), a problem only with ``strict=True`` (Kafka would list it);
* ``time_index_offset_not_found`` / ``time_index_timestamp_mismatch`` /
  ``time_index_out_of_order`` – Kafka's ``dumpTimeIndex`` checks;
* ``txnindex_corrupt`` / ``txnindex_mismatch`` – a ``.txnindex`` that is cut, of an unknown
  version, or differs from the aborted transactions replayed from the log (a missing one is the
  note ``txnindex_missing``); ``snapshot_corrupt`` / ``snapshot_mismatch`` – a
  producer ``.snapshot`` failing its CRC/layout or disagreeing with the replayed producer state
  (see :mod:`mqstore.storage.kafka.txn`).
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterator
from contextlib import closing
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from mqstore.errors import CorruptDataError, InvalidArgumentError, StoreNotFoundError
from mqstore.storage.kafka.index_sanity import WARM_SECTION_BYTES
from mqstore.storage.kafka.layout import (
    INDEX_SUFFIXES,
    KEYINDEX_SUFFIX,
    log_files,
    segment_files,
    segment_logs,
)
from mqstore.storage.kafka.rebuild import MappedLog, analyze_log, parse_base_offset, shared_analyses

if TYPE_CHECKING:
    import numpy as np

# (the record codec, formats.kafka.batch, and the dump's field tables are imported by the functions
# that decode records: verify of uncompressed v2 batches never needs them)

ProgressFn = Callable[[int, int], None]


@dataclass(frozen=True)
class VerifyProblem:
    kind: str
    path: str
    position: int | None
    message: str


@dataclass
class VerifyReport:
    problems: list[VerifyProblem] = field(default_factory=list)
    notes: list[VerifyProblem] = field(default_factory=list)
    segments: int = 0
    batches: int = 0
    bytes: int = 0
    offset_index_entries: int = 0
    time_index_entries: int = 0
    key_index_entries: int = 0

    @property
    def ok(self) -> bool:
        return not self.problems

    def add(self, kind: str, path: Path | str, position: int | None, message: str) -> None:
        self.problems.append(VerifyProblem(kind, str(path), position, message))

    def note(self, kind: str, path: Path | str, position: int | None, message: str) -> None:
        self.notes.append(VerifyProblem(kind, str(path), position, message))


def _padding_start(rel: np.ndarray) -> int:
    """DumpLogSegments' rule: entries stop at the first slot > 0 whose relative offset is 0."""
    import numpy as np

    if rel.shape[0] > 1:
        z = np.nonzero(rel[1:] == 0)[0]
        if z.shape[0]:
            return int(z[0]) + 1
    return rel.shape[0]


@dataclass
class _IndexFile:
    """An index file as verify reads it: its bytes, every whole slot as two int64 columns (offsets
    absolute: :func:`~mqstore.kernels.kafka.index_check.index_columns`), and the entries a live
    broker's file holds (:func:`~mqstore.storage.kafka.index.live_entry_count`)."""

    path: Path
    entry_size: int
    length: int
    keys: Any
    vals: Any
    slots: int  # whole slots of the file
    entries: int  # entries before the zero padding
    clean: bool  # the bytes after those entries are all zero (True for a trimmed file too)

    @classmethod
    def read(cls, path: Path, entry_size: int, base: int) -> _IndexFile:
        from mqstore.kernels.kafka.index_check import index_columns

        raw = path.read_bytes()
        keys, vals, pad = index_columns(raw, entry_size, base)
        slots = len(raw) // entry_size
        n = slots
        if slots > 1 and pad < slots:
            n = pad
            if n == 1 and raw.count(0, 0, entry_size) == entry_size:
                n = 0
        tail = len(raw) - n * entry_size
        return cls(path, entry_size, len(raw), keys, vals, slots, n, raw.count(0, n * entry_size) == tail)


def _judge_padding(report: VerifyReport, kind: str, idx: _IndexFile, active: bool, strict: bool) -> bool:
    """Report an untrimmed index file; True when it is a live active segment's preallocated file
    (then the entries before the padding are the ones to judge)."""
    n = idx.entries
    size = n * idx.entry_size
    path = idx.path
    if idx.length == size:
        return False
    if not idx.clean:
        report.add(f"{kind}_stale_entries", path, size,
                   f"non-zero bytes after the {n} entries of an untrimmed file (stale or damaged entries; "
                   "Kafka rebuilds this index on load)")
        return False
    if active and not strict:
        report.note(f"{kind}_preallocated", path, size,
                    f"active segment of a live broker: {idx.length} bytes preallocated, {n} entries "
                    f"({size} bytes once trimmed, as Kafka trims it on roll and close)")
        return True
    report.add(f"{kind}_padded", path, size, f"{idx.length - size} bytes after {n} entries (file not trimmed)")
    return False


def _max_record_timestamp(mm: Any, position: int, magic: int, path: str) -> int:
    """The largest record timestamp of the batch at ``position`` (−1 for an empty batch): what
    Kafka's time-index check compares an entry with.  The record codec, one batch at a time: the
    reference for :func:`batch_max_timestamps`."""
    from mqstore.formats.kafka.batch import (
        decode_batch_header,
        decode_legacy_message,
        iter_legacy_records,
        iter_records,
    )

    if magic >= 2:
        h = decode_batch_header(mm, position, path=path)
        return max((r.timestamp for r in iter_records(mm, h, path=path)), default=-1)
    msg = decode_legacy_message(mm, position, path=path)
    return max((r.timestamp for r in iter_legacy_records(msg, path=path)), default=-1)


#: batches whose records :func:`batch_max_timestamps` walks in one call of the compiled parser
_TS_CHUNK = 4096


def batch_max_timestamps(mm: Any, scan: dict[str, Any], ks: np.ndarray, path: str,
                         ) -> tuple[np.ndarray, dict[int, str]]:
    """:func:`_max_record_timestamp` of the batches ``ks`` (indexes into ``scan``) in bulk.

    Returns the timestamps (int64, one per ``ks``) and, by position in ``ks``, the message of the
    batches whose records cannot be decoded (their timestamp is then −1).  v2 batches go through
    the compiled record parser (:func:`~mqstore.kernels.kafka.records.parse_bodies`, compressed
    bodies decompressed first) in chunks of :data:`_TS_CHUNK` batches; legacy batches, and any
    chunk the parser rejects, through the record codec one batch at a time (the same answers and
    the same error messages)."""
    import numpy as np

    from mqstore.formats.kafka.batch import ATTR_COMPRESSION_MASK, ATTR_TIMESTAMP_TYPE, RECORD_BATCH_OVERHEAD
    from mqstore.kernels.kafka.records import OK, batch_bodies, parse_bodies

    out = np.full(ks.shape[0], -1, np.int64)
    errors: dict[int, str] = {}
    if ks.shape[0] == 0:
        return out, errors
    view = memoryview(mm).cast("B") if not isinstance(mm, np.ndarray) else memoryview(mm)
    buf_all = np.frombuffer(view, np.uint8)
    magic = scan["magic"][ks]

    def slow(js: np.ndarray) -> None:
        for j in js.tolist():
            k = int(ks[j])
            try:
                out[j] = _max_record_timestamp(mm, int(scan["position"][k]), int(scan["magic"][k]), path)
            except CorruptDataError as exc:
                errors[j] = exc.message

    slow(np.nonzero(magic < 2)[0])
    v2 = np.nonzero(magic >= 2)[0]
    for c0 in range(0, v2.shape[0], _TS_CHUNK):
        js = v2[c0:c0 + _TS_CHUNK]
        kk = ks[js]
        pos = scan["position"][kk].astype(np.int64)
        size = scan["size"][kk].astype(np.int64)
        codec = scan["attributes"][kk].astype(np.int64) & ATTR_COMPRESSION_MASK
        try:
            if not codec.any():
                buf, bstart, bend = buf_all, pos + RECORD_BATCH_OVERHEAD, pos + size
            else:
                buf, bstart, bend = batch_bodies(view, scan, kk, path=path)
        except CorruptDataError:
            slow(js)
            continue
        logappend = (scan["attributes"][kk] & ATTR_TIMESTAMP_TYPE) != 0
        res = parse_bodies(buf, bstart, bend, scan["record_count"][kk].astype(np.int64),
                           scan["base_offset"][kk], scan["base_timestamp"][kk], scan["max_timestamp"][kk],
                           logappend, -(1 << 63), (1 << 63) - 1)
        if res["error"] != OK:
            slow(js)
            continue
        ts = res["timestamp"]
        if ts.shape[0]:
            got = np.full(kk.shape[0], -1, np.int64)
            np.maximum.at(got, res["batch"], ts)
            out[js] = got
    return out, errors


def verify_segment(log_path: Path, report: VerifyReport, *, strict: bool = False,
                   progress: ProgressFn | None = None, active: bool = False) -> None:
    """Check one segment (``.log`` and, when present, its ``.index``/``.timeindex``).

    ``active``: the partition's last segment.  A live broker keeps its indexes preallocated and
    zero-filled past the entries; unless ``strict``, that is a note (``index_preallocated``) and the
    entries before the padding are judged (sanity checks included) — with ``strict`` it is the
    ``index_padded`` problem of any untrimmed file.

    The batches come from the walk of ``kafka rebuild-index`` (without a progress bar and with the
    native kernels: :func:`~mqstore.storage.kafka.rebuild.analyze_file_columns`, no numpy), the
    index checks from the kernels of :mod:`mqstore.kernels.kafka.index_check`; this function turns
    their events into problems and notes."""
    from mqstore.kernels.kafka.index_check import order_events
    from mqstore.storage.kafka.rebuild import analyze_file_columns

    base = parse_base_offset(log_path)
    lp = str(log_path)
    report.segments += 1
    with MappedLog(log_path) as ml:
        a = analyze_file_columns(ml.fileno(), ml.size) if progress is None else None
        if a is None:
            a = ml.analysis(progress=progress)
        scan = a.scan
        n = scan["count"]
        report.batches += int(n)
        report.bytes += a.log_size
        positions = scan["position"]
        ok_bytes = bytes(memoryview(a.crc_ok).cast("B")) if n else b""  # type: ignore[arg-type]
        i = ok_bytes.find(0)
        listed = 0
        while i >= 0 and listed < 20:
            report.add("crc", lp, int(positions[i]), f"batch at position {int(positions[i])} fails its size/CRC check")
            listed += 1
            i = ok_bytes.find(0, i + 1)
        if i >= 0:
            report.add("crc", lp, None, f"{ok_bytes.count(0) - 20} more invalid batches")
        if a.stop == "bad_size":
            report.add("bad_size", lp, int(scan["valid_end"]), "size field below 14 (corrupt record)")
        elif scan["valid_end"] < a.log_size:
            report.add("torn_tail", lp, int(scan["valid_end"]),
                       f"{a.log_size - int(scan['valid_end'])} bytes after the last whole batch")
        last, magic, firsts = scan["last_offset"], scan["magic"], scan["base_offset"]
        below, back = order_events(magic, firsts, last, base, 20)
        if below:
            report.add("offset_order", lp, 0, f"first batch offset {int(firsts[0])} is below the base offset {base}")
        for i in back:
            first = int(last[i + 1] if magic[i + 1] < 2 else firsts[i + 1])
            report.add("offset_order", lp, int(positions[i + 1]),
                       f"batch offsets go backwards: {first} after {int(last[i])}")
        oi_path = log_path.with_suffix(".index")
        ti_path = log_path.with_suffix(".timeindex")
        oi_keys: Any = memoryview(b"").cast("q")  # (no .index: Kafka's search starts at position 0)
        oi_vals: Any = oi_keys
        if not oi_path.exists():
            report.note("index_missing", oi_path, None, "no .index file (Kafka rebuilds it on load)")
        else:
            oi = _IndexFile.read(oi_path, 8, base)
            oi_keys, oi_vals = oi.keys[: oi.entries], oi.vals[: oi.entries]
            _check_offset_index(report, oi, base, scan, active, strict)
        if not ti_path.exists():
            report.note("time_index_missing", ti_path, None, "no .timeindex file (Kafka rebuilds it on load)")
        else:
            ti = _IndexFile.read(ti_path, 12, base)
            _check_time_index(report, ti, base, ml, a, oi_keys, oi_vals, active, strict)


def _check_offset_index(report: VerifyReport, oi: _IndexFile, base: int, scan: dict[str, Any], active: bool,
                        strict: bool) -> None:
    """The ``.index`` checks: padding, Kafka's sanity check, every entry against the batches."""
    from mqstore.kernels.kafka.index_check import (
        OI_MULTI_BATCH,
        OI_NOT_AFTER,
        OI_NOT_BATCH_START,
        offset_index_events,
    )
    from mqstore.storage.kafka.index_sanity import offset_index_sanity_error

    path = oi.path
    keys, vals, valid_n = oi.keys, oi.vals, oi.entries
    if _judge_padding(report, "index", oi, active, strict):  # Kafka's sanity check on the entries before the padding
        if valid_n and int(keys[valid_n - 1]) < base:
            report.add("index_sanity", path, None,
                       f"last offset {int(keys[valid_n - 1])} is less than the base offset {base}")
    else:
        last_offset = int(keys[oi.slots - 1]) if oi.slots else base
        why = offset_index_sanity_error(path, base, oi.slots, last_offset, oi.length)
        if why is not None:
            report.add("index_sanity", path, None, why)
    report.offset_index_entries += valid_n
    for slot, code, log_offset in offset_index_events(scan["position"], scan["last_offset"], keys[:valid_n],
                                                      vals[:valid_n]):
        o, p = int(keys[slot]), int(vals[slot])
        if code == OI_NOT_AFTER:
            report.add("index_mismatch", path, slot * 8, f"entry {slot} ({o}, {p}) is not after the previous one")
        elif code == OI_NOT_BATCH_START:
            report.add("index_mismatch", path, slot * 8, f"Index offset: {o}, position {p} is not the start of a batch")
        elif code == OI_MULTI_BATCH:
            msg = f"Index offset: {o}, log offset: {log_offset} (entry of a multi-batch append)"
            if strict:
                report.add("index_mismatch", path, slot * 8, msg)
            else:
                report.note("multi_batch_entry", path, slot * 8, msg)
        else:
            report.add("index_mismatch", path, slot * 8, f"Index offset: {o}, log offset: {log_offset}")


def _check_time_index(report: VerifyReport, ti: _IndexFile, base: int, ml: MappedLog, a: Any, oi_keys: Any,
                      oi_vals: Any, active: bool, strict: bool) -> None:
    """The ``.timeindex`` checks: padding, Kafka's sanity check, and Kafka's check per entry (the
    batch holding the entry's offset, searched from the offset index's position for it, must end
    at that offset, and its largest record timestamp must be the entry's)."""
    from mqstore.kernels.kafka.index_check import (
        TI_DECODE,
        TI_NOT_FOUND,
        TI_OTHER_OFFSET,
        TI_TS_MISMATCH,
        time_index_events,
    )
    from mqstore.storage.kafka.index_sanity import time_index_sanity_error

    path, lp = ti.path, str(ml.path)
    ts_col, off_col, valid_t = ti.keys, ti.vals, ti.entries
    if _judge_padding(report, "time_index", ti, active, strict):  # Kafka's sanity check before the padding
        if valid_t and int(ts_col[valid_t - 1]) < int(ts_col[0]):
            report.add("time_index_sanity", path, None,
                       f"last timestamp {int(ts_col[valid_t - 1])} is less than the first timestamp {int(ts_col[0])}")
        if valid_t and int(off_col[valid_t - 1]) < base:
            report.add("time_index_sanity", path, None,
                       f"last offset {int(off_col[valid_t - 1])} is less than the base offset {base}")
    else:
        k = ti.slots
        why = time_index_sanity_error(path, base, k, int(ts_col[0]) if k else 0, int(ts_col[k - 1]) if k else -1,
                                      int(off_col[k - 1]) if k else base, ti.length)
        if why is not None:
            report.add("time_index_sanity", path, None, why)
    report.time_index_entries += valid_t
    scan = a.scan
    events = time_index_events(ml.fileno(), a.log_size, scan["position"], scan["size"], scan["last_offset"],
                               a.crc_ok, scan["magic"], scan["attributes"], scan["record_count"],
                               scan["base_timestamp"], scan["max_timestamp"], ts_col[:valid_t], off_col[:valid_t],
                               oi_keys, oi_vals, WARM_SECTION_BYTES // 8)
    for slot, code, k, value, out_of_order in events:
        t, o = int(ts_col[slot]), int(off_col[slot])
        if code == TI_NOT_FOUND or code == TI_OTHER_OFFSET:
            report.add("time_index_offset_not_found", path, slot * 12, f"Indexed offset: {o}, found log offset: {value}")
        else:
            log_ts = t
            if code == TI_TS_MISMATCH:
                log_ts = value
            elif code == TI_DECODE:
                pos = int(scan["position"][k])
                try:
                    log_ts = _max_record_timestamp(ml.mm, pos, int(scan["magic"][k]), lp)
                except CorruptDataError as exc:
                    report.add("crc", lp, pos, f"cannot decode batch: {exc.message}")
            if log_ts != t:
                report.add("time_index_timestamp_mismatch", path, slot * 12,
                           f"Index timestamp: {t}, log timestamp: {log_ts}")
        if out_of_order:
            report.add("time_index_out_of_order", path, slot * 12,
                       f"Index timestamp: {t}, Previously indexed timestamp: {int(ts_col[slot - 1])}")


def verify_segment_keyindex(log_path: Path, report: VerifyReport, *, active: bool = False) -> None:
    """The segment's ``.keyindex``, when there is one, against a rebuild of the ``.log``.  The
    active segment's may hold only the first entries (a live writer puts appended keys in
    groups): a note, not a problem."""
    from mqstore.storage.kafka.layout import keyindex_path

    kp = keyindex_path(log_path)
    if not kp.is_file():
        return
    from mqstore.storage.kafka.keyindex import (
        verify_keyindex,  # the Java-hash kernels: only when there is one
    )

    check = verify_keyindex(kp, log_path)
    report.key_index_entries += check.entries
    if check.behind:
        msg = f"key index holds the first {check.entries} of the log's {check.expected_entries} key entries"
        if active:
            report.note("keyindex_behind", kp, None, msg + " (a live writer's index between puts)")
        else:
            report.add("keyindex_mismatch", kp, None, msg)
    elif check.problem is not None:
        kind = "keyindex_unreadable" if check.problem.startswith("unreadable") else "keyindex_mismatch"
        report.add(kind, kp, check.position, check.problem)


def verify_path(path: str | os.PathLike[str], *, strict: bool = False,
                progress: ProgressFn | None = None) -> VerifyReport:
    """Verify a partition directory or one segment (given by its ``.log``, ``.index`` or ``.timeindex``)."""
    p = Path(path)
    logs = segment_logs(p)
    report = VerifyReport()
    if p.is_dir():
        _note_other_files(p, report)
        bases = {parse_base_offset(f) for f in logs}
        for f in segment_files(p, INDEX_SUFFIXES):
            if parse_base_offset(f) not in bases:
                report.note("stray_index", f, None, "index file without a .log (Kafka deletes it on load)")
        for f in segment_files(p, (KEYINDEX_SUFFIX,)):
            if parse_base_offset(f) not in bases:
                report.note("stray_keyindex", f, None, "key index without a .log (Kafka ignores it; a writable "
                            "mqstore open deletes it)")
    last = _last_segment_log(p if p.is_dir() else logs[0].parent)
    with shared_analyses():  # the transaction check reads the segments the index checks just walked
        for f in logs:
            if not f.exists():
                raise StoreNotFoundError("segment log file not found", path=str(f))
            verify_segment(f, report, strict=strict, progress=progress, active=last is not None and f == last)
            verify_segment_keyindex(f, report, active=last is not None and f == last)
        if p.is_dir():
            from mqstore.storage.kafka.txn_rebuild import verify_txn_indexes_quick

            if not verify_txn_indexes_quick(p, report):  # (transactions or snapshots: the replay, with numpy)
                from mqstore.storage.kafka.txn import verify_txn_indexes

                verify_txn_indexes(p, report)
    return report


def _note_other_files(directory: Path, report: VerifyReport) -> None:
    """Files of a partition directory that are neither segments nor their indexes: unknown ones
    and the temporaries Kafka settles on load are notes (never skipped silently)."""
    from mqstore.storage.kafka.layout import PARTITION_FILE_KINDS, classify_partition_file

    for f in sorted(directory.iterdir()):
        kind = classify_partition_file(f.name).kind if f.is_file() else "unknown"
        if kind == "unknown":
            report.note("unknown_file", f, None, "not a Kafka partition file (Kafka ignores it)")
        elif kind in ("deleted", "cleaned", "swap", "checkpoint_tmp", "kraft_snapshot_partial"):
            report.note(kind + "_file", f, None, PARTITION_FILE_KINDS[kind])


def _last_segment_log(directory: Path) -> Path | None:
    """The partition's active segment: the ``.log`` with the highest base offset."""
    logs = log_files(directory)
    return logs[-1] if logs else None


# ----------------------------------------------------------------------------- dump
def dump_log(log_path: Path, *, print_data: bool = False) -> Iterator[dict[str, Any]]:
    """One dict per batch (every header field) and, with ``print_data``, one per record."""
    lp = str(log_path)
    with MappedLog(log_path) as ml:
        a = analyze_log(ml.mm)
        for i in range(a.scan["count"]):
            yield from _batch_dicts(ml.mm, a, i, lp, print_data)
        tail = _tail_dict(a)
        if tail is not None:
            yield tail


def dump_log_lines(log_path: Path, *, print_data: bool = False) -> Iterator[memoryview | bytes | dict[str, Any]]:
    """:func:`dump_log` for JSON output: runs of batches the JSON-lines kernel writes (v2,
    uncompressed, not control, checksum verified) come as ``bytes`` of finished lines (each
    ``{"file": ..., **fields}``; a view valid until the next item is asked for), every other batch
    as :func:`dump_log`'s dicts (without ``file``); the same lines, in the same order, as
    ``to_json`` of every dict of :func:`dump_log`."""
    from mqstore.kernels.kafka.json_lines import json_line_chunks, line_prefix

    lp = str(log_path)
    prefix = line_prefix(lp)
    with MappedLog(log_path) as ml:
        mm = ml.mm
        a = ml.analysis()  # (read with pread in parts on the pool: the mapping is faulted in by the lines)
        scan = a.scan
        n = scan["count"]
        fast = ((scan["magic"][:n] == 2) & (scan["size"][:n] >= 61) & a.crc_ok[:n]
                & ((scan["attributes"][:n] & 0x27) == 0))  # fmt: skip
        i = 0
        while i < n:
            if not fast[i]:
                yield from _batch_dicts(mm, a, i, lp, print_data)
                i += 1
                continue
            j = i
            while j < n and fast[j]:
                j += 1
            with closing(json_line_chunks(mm, scan["position"][i:j], prefix, print_data)) as pieces:
                for data, done in pieces:  # (closed before the mapping: the running calls end first)
                    if len(data):
                        yield data  # a view of the kernel's buffer: valid until the next item
                    i += done
            if i < j:  # the reader rejects this batch's records: its per-record path raises why
                yield from _batch_dicts(mm, a, i, lp, print_data)
                i += 1
        tail = _tail_dict(a)
        if tail is not None:
            yield tail


def _batch_dicts(mm: Any, a: Any, i: int, lp: str, print_data: bool) -> Iterator[dict[str, Any]]:
    """The dicts of batch ``i`` of the analysis ``a``: its header fields, then its records."""
    from mqstore.formats.kafka.batch import (
        decode_batch_header,
        decode_legacy_message,
        iter_legacy_records,
        iter_records,
    )
    from mqstore.formats.kafka.dump_fields import batch_fields, record_fields

    scan = a.scan
    p = int(scan["position"][i])
    m = int(scan["magic"][i])
    valid = bool(a.crc_ok[i])
    if m >= 2 and int(scan["size"][i]) >= 61:
        h = decode_batch_header(mm, p, path=lp)
        yield batch_fields(h, valid)
        if print_data and valid:
            for r in iter_records(mm, h, path=lp):
                rec = record_fields(h, r)
                if h.is_control:
                    rec.update(_control_fields(r, lp))
                yield rec
        return
    obj: dict[str, Any] = {"type": "batch", "offset": int(scan["last_offset"][i]), "position": p,
                           "magic": m, "size": int(scan["size"][i]), "crc": int(scan["crc"][i]),
                           "isvalid": valid, "maxTimestamp": int(scan["max_timestamp"][i])}
    msg = None
    if m < 2:
        try:
            msg = decode_legacy_message(mm, p, validate=False, path=lp)
            obj["timestampType"] = msg.timestamp_type.label
            obj["compresscodec"] = msg.compression.name.lower()
        except CorruptDataError:
            msg = None
    yield obj
    if print_data and valid and msg is not None:
        for r in iter_legacy_records(msg, path=lp):
            yield {"type": "record", "offset": r.offset, "timestampType": msg.timestamp_type.label,
                   "timestamp": r.timestamp, "keySize": -1 if r.key is None else len(r.key),
                   "valueSize": -1 if r.value is None else len(r.value), "key": r.key, "value": r.value}


def _tail_dict(a: Any) -> dict[str, Any] | None:
    """What follows the last whole batch, when anything does (a torn write or a bad batch)."""
    scan = a.scan
    if a.stop != "end" or scan["valid_end"] < a.log_size:
        return {"type": "tail", "position": int(scan["valid_end"]), "bytes": a.log_size - int(scan["valid_end"]),
                "reason": a.stop if a.stop != "end" else "torn"}
    return None


def _control_fields(r: Any, path: str) -> dict[str, Any]:
    """What a control record holds: end-transaction markers (type 0/1) and the KRaft control
    records (types 2–6, their values decoded); ``controlType`` ``INVALID`` when undecodable."""
    from mqstore.formats.kafka.batch import decode_control_record
    from mqstore.formats.kafka.kraft_control import SCHEMAS as KRAFT_SCHEMAS
    from mqstore.formats.kafka.kraft_control import decode_kraft_control

    try:
        c = decode_control_record(r, path=path)
    except CorruptDataError:
        return {"controlType": "INVALID"}
    out: dict[str, Any] = {"controlType": c.type_name, "controlTypeId": c.type}
    if c.coordinator_epoch is not None:
        out["coordinatorEpoch"] = c.coordinator_epoch
    elif c.type in KRAFT_SCHEMAS:
        try:
            out["control"] = decode_kraft_control(c.type, r.value)
        except CorruptDataError as exc:
            out["controlError"] = exc.message
    return out


def dump_index(path: Path) -> Iterator[dict[str, Any]]:
    """Entries of a ``.index`` or ``.timeindex`` (stopping at zero padding like DumpLogSegments);
    a segment's, or a tiered-storage ``remote-log-index-cache`` file's."""
    from mqstore.storage.kafka.index import OffsetIndex, TimeIndex
    from mqstore.storage.kafka.layout import remote_index_base_offset

    remote = remote_index_base_offset(path.name)
    base = remote if remote is not None else parse_base_offset(path)
    if path.suffix == ".index":
        idx: OffsetIndex | TimeIndex = OffsetIndex(path, base, -1, writable=False)
        keys, vals = idx.column_array(False), idx.column_array(True)
        n = _padding_start(keys - base)
        for i in range(n):
            yield {"type": "offset_index_entry", "offset": int(keys[i]), "position": int(vals[i])}
    elif path.suffix == ".timeindex":
        idx = TimeIndex(path, base, -1, writable=False)
        keys, vals = idx.column_array(False), idx.column_array(True)
        n = _padding_start(vals - base)
        for i in range(n):
            yield {"type": "time_index_entry", "timestamp": int(keys[i]), "offset": int(vals[i])}
    else:
        raise InvalidArgumentError("not an index file", path=str(path))
    idx.close()


def dump_txn_index(path: Path) -> Iterator[dict[str, Any]]:
    """Entries of a ``.txnindex`` (typed error on a partial entry or an unknown version)."""
    from mqstore.storage.kafka.txn_files import read_txn_index

    for t in read_txn_index(path):
        yield {"type": "aborted_txn", "version": t.version, "producerId": t.producer_id,
               "firstOffset": t.first_offset, "lastOffset": t.last_offset, "lastStableOffset": t.last_stable_offset}


def dump_snapshot(path: Path) -> Iterator[dict[str, Any]]:
    """Header and producer entries of a producer-state ``.snapshot`` (CRC checked)."""
    from mqstore.storage.kafka.txn import read_producer_snapshot

    snap = read_producer_snapshot(path)
    yield {"type": "snapshot", "version": snap.version, "crc": snap.crc, "producers": len(snap.entries)}
    for e in snap.entries:
        yield {"type": "producer_entry", "producerId": e.producer_id, "producerEpoch": e.epoch,
               "lastSequence": e.last_sequence, "lastOffset": e.last_offset, "offsetDelta": e.offset_delta,
               "timestamp": e.timestamp, "coordinatorEpoch": e.coordinator_epoch,
               "currentTxnFirstOffset": e.current_txn_first_offset}
